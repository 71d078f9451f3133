// Page-cache and residency helpers: how much of a memory range is in RAM
// (mincore), and telling the kernel what we will or will not need.
//
// All functions are best-effort advice except resident_fraction, which throws
// Error only when mincore itself fails on a valid mapping. Thread-safe (they
// are thin syscall wrappers with no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sluice::io {

size_t page_size();

struct Residency {
  uint64_t resident_pages = 0;
  uint64_t total_pages = 0;
  double fraction() const { return total_pages ? double(resident_pages) / double(total_pages) : 1.0; }
};

// Pages of [p, p+n) (widened to page boundaries) that are resident. p must lie
// in a mapping. n == 0 counts nothing.
Residency residency(const void* p, size_t n);
// resident / total pages over [p, p+n); 1.0 for an empty range.
double resident_fraction(const void* p, size_t n);

// posix_fadvise(DONTNEED) over the whole file: drops its clean cached pages so
// the page cache does not hold a second copy of bytes we copied elsewhere.
// Returns false (never throws) when the advice could not be given.
bool drop_file_pages(int fd);
bool drop_file_pages(const std::string& path);

// madvise wrappers over the page-aligned cover of [p, p+n). Return false on failure.
bool advise_willneed(const void* p, size_t n);
bool advise_dontneed(const void* p, size_t n);
bool advise_random(const void* p, size_t n);
// Transparent huge pages for an anonymous range (fewer TLB misses on big scans).
bool advise_hugepage(const void* p, size_t n);

// Reads one byte per page of [p, p+n) so every page is faulted in now rather
// than on first use. Returns a value derived from the bytes so the compiler
// cannot drop the loads.
uint64_t touch_pages(const void* p, size_t n);

}  // namespace sluice::io
