// GGUF writing, streamed: declare metadata and tensors, write the header, then
// stream each tensor's bytes in declaration order (in as many chunks as you
// like). Padding to `alignment` is inserted automatically. Writes GGUF v3.
//
// Output goes through io::OutputFile (temporary file, renamed into place when
// complete). Writer(path) owns one and commits it in finish(); Writer(out)
// writes into the caller's, which the caller commits after finish() (so it
// chooses the inputs to protect and whether to overwrite).
//
// Failure: an alignment that is not a power of two up to kMaxAlignment, any
// I/O error or protocol misuse (wrong order, too many/few bytes)
// throws sluice::Error naming the output file. Without a successful finish()
// (and commit) the destination is untouched. A Writer is single-threaded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "io/output_file.h"

namespace sluice::gguf {

// The largest alignment a Writer takes: a 2 MiB huge page, the most a reader
// mapping the file could want. Padding is written out, so an alignment of
// 2^40 would be a terabyte of zeros (and GGUF stores it as a uint32).
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 21;

class Writer {
 public:
  explicit Writer(std::string path, uint64_t alignment = 32);
  explicit Writer(io::OutputFile& out, uint64_t alignment = 32);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void add_metadata(std::string key, Value v);  // before write_header
  void add_tensor(std::string name, GgmlType type, std::vector<uint64_t> ne);  // before write_header
  void write_header();
  // Appends bytes of the current tensor; moves to the next once it is complete.
  void write_tensor_data(const void* data, size_t n);
  // Completes every tensor not yet written with zeros without writing them
  // (io::OutputFile::extend_with_zeros: a hole on a regular file, taking no
  // disk space where the file system supports it). For header-only test and
  // sizing files with full-size tensor tables. finish() must still be called.
  void zero_fill_remaining();
  // Checks every tensor was written completely and hands the last bytes to the
  // output; an owned output is then committed.
  void finish();

  uint64_t bytes_written() const { return written_; }

 private:
  struct Pending { std::string name; GgmlType type; std::vector<uint64_t> ne; uint64_t bytes; uint64_t offset; };
  void check_alignment();
  void put(const void* p, size_t n);
  void pad_to(uint64_t align);
  std::string path_;
  uint64_t alignment_;
  std::unique_ptr<io::OutputFile> owned_;  // Writer(path) only
  io::OutputFile* out_;
  bool finished_ = false;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<Pending> tensors_;
  size_t current_ = 0;
  uint64_t current_written_ = 0;
  uint64_t written_ = 0;
  uint64_t data_start_ = 0;  // file offset of the tensor data section
  bool header_written_ = false;
  std::vector<char> buffer_;
};

}  // namespace sluice::gguf
