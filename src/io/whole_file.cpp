#include "io/whole_file.h"

#include "util/error.h"

namespace sluice::io {

std::string read_whole_file(const std::string& path, uint64_t max_bytes, const WrapFile& wrap) {
  std::shared_ptr<const File> f = open_file(path);
  if (wrap) f = wrap(std::move(f));
  const uint64_t n = f->size();
  if (n > max_bytes)
    fail(path, "file is " + std::to_string(n) + " bytes, more than the " + std::to_string(max_bytes) +
                   " bytes expected here");
  std::string bytes(static_cast<size_t>(n), '\0');
  f->read_exact(bytes.data(), bytes.size(), 0);
  return bytes;
}

}  // namespace sluice::io
