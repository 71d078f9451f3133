// io::memory_file — a File over an owned byte vector (tests, fuzzing).
#include <cstring>

#include "io/file.h"
#include "util/error.h"

namespace sluice::io {
namespace {

class MemoryFile final : public File {
 public:
  MemoryFile(std::string name, std::vector<uint8_t> bytes) : name_(std::move(name)), bytes_(std::move(bytes)) {}

  const std::string& path() const override { return name_; }
  uint64_t size() const override { return bytes_.size(); }

  void read_exact(void* dst, size_t n, uint64_t offset) const override {
    // Written so that offset + n cannot overflow.
    if (offset > bytes_.size() || n > bytes_.size() - offset) {
      fail(name_, "unexpected end of file: wanted " + std::to_string(n) + " bytes at offset " +
                      std::to_string(offset) + " but the file is " + std::to_string(bytes_.size()) + " bytes");
    }
    if (n) std::memcpy(dst, bytes_.data() + offset, n);
  }

 private:
  std::string name_;
  std::vector<uint8_t> bytes_;
};

}  // namespace

std::unique_ptr<File> memory_file(std::string name, std::vector<uint8_t> bytes) {
  return std::make_unique<MemoryFile>(std::move(name), std::move(bytes));
}

}  // namespace sluice::io
