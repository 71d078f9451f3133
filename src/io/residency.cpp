#include "io/residency.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "util/error.h"

namespace sluice::io {

size_t page_size() {
  static const size_t ps = [] {
    long v = ::sysconf(_SC_PAGESIZE);
    return v > 0 ? static_cast<size_t>(v) : size_t{4096};
  }();
  return ps;
}

namespace {

// The page-aligned cover of [p, p+n).
struct PageCover {
  uintptr_t start = 0;
  size_t bytes = 0;
};

PageCover cover(const void* p, size_t n) {
  const uintptr_t ps = page_size();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = a - a % ps;
  const uintptr_t end = (a + n + ps - 1) / ps * ps;
  return {start, static_cast<size_t>(end - start)};
}

}  // namespace

Residency residency(const void* p, size_t n) {
  Residency r;
  if (n == 0) return r;
  const PageCover c = cover(p, n);
  const size_t ps = page_size();
  const size_t pages = c.bytes / ps;
  // mincore in chunks so a huge range does not need a huge vector.
  constexpr size_t kChunkPages = 1 << 16;
  std::vector<unsigned char> vec(std::min(pages, kChunkPages));
  for (size_t done = 0; done < pages;) {
    const size_t k = std::min(pages - done, kChunkPages);
    void* addr = reinterpret_cast<void*>(c.start + done * ps);
    if (::mincore(addr, k * ps, vec.data()) != 0) {
      throw Error(std::string("mincore failed: ") + std::strerror(errno));
    }
    for (size_t i = 0; i < k; ++i) r.resident_pages += vec[i] & 1u;
    done += k;
  }
  r.total_pages = pages;
  return r;
}

double resident_fraction(const void* p, size_t n) { return residency(p, n).fraction(); }

bool drop_file_pages(int fd) {
  if (fd < 0) return false;
  return ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
}

bool drop_file_pages(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = drop_file_pages(fd);
  ::close(fd);
  return ok;
}

namespace {
bool advise(const void* p, size_t n, int advice) {
  if (n == 0) return true;
  const PageCover c = cover(p, n);
  return ::madvise(reinterpret_cast<void*>(c.start), c.bytes, advice) == 0;
}
}  // namespace

bool advise_willneed(const void* p, size_t n) { return advise(p, n, MADV_WILLNEED); }
bool advise_dontneed(const void* p, size_t n) { return advise(p, n, MADV_DONTNEED); }
bool advise_random(const void* p, size_t n) { return advise(p, n, MADV_RANDOM); }
bool advise_hugepage(const void* p, size_t n) {
#ifdef MADV_HUGEPAGE
  return advise(p, n, MADV_HUGEPAGE);
#else
  return false;
#endif
}

uint64_t touch_pages(const void* p, size_t n) {
  if (n == 0) return 0;
  const auto* b = static_cast<const volatile uint8_t*>(p);
  const size_t ps = page_size();
  uint64_t sum = 0;
  // First byte, then one byte at every page boundary inside the range, then the last byte.
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  sum += b[0];
  for (size_t off = ps - a % ps; off < n; off += ps) sum += b[off];
  sum += b[n - 1];
  return sum;
}

}  // namespace sluice::io
