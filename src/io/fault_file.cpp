#include "io/fault_file.h"

#include <algorithm>
#include <cerrno>

#include "io/read_fully.h"

namespace sluice::io {

void FaultFile::read_exact(void* dst, size_t n, uint64_t offset) const {
  const uint64_t call = ++calls_;
  const bool fail_this = plan_.fail_read != 0 &&
                         (call == plan_.fail_read || (plan_.fail_every_after && call > plan_.fail_read));
  auto raw = [&](void* d, size_t k, uint64_t off) -> ssize_t {
    const uint64_t attempt = ++raw_;
    if (fail_this) return -EIO;
    if (plan_.eintr_every != 0 && attempt % plan_.eintr_every == 0) {
      ++eintr_;
      return -EINTR;
    }
    if (off >= plan_.eof_at) return 0;
    uint64_t take = std::min<uint64_t>(k, plan_.eof_at - off);
    if (plan_.max_bytes_per_raw != 0) take = std::min(take, plan_.max_bytes_per_raw);
    inner_->read_exact(d, static_cast<size_t>(take), off);
    return static_cast<ssize_t>(take);
  };
  read_fully(raw, path(), dst, n, offset);
}

}  // namespace sluice::io
