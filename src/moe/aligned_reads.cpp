#include "moe/aligned_reads.h"

#include <algorithm>

#include "io/direct_reader.h"

namespace sluice::moe {

namespace {

void add_chunked(const io::File* file, uint8_t* dst, uint64_t n, uint64_t offset,
                 uint64_t max_chunk, std::vector<PlannedRead>& out) {
  for (uint64_t done = 0; done < n;) {
    const uint64_t k = std::min(n - done, max_chunk);
    out.push_back({file, dst + done, static_cast<size_t>(k), offset + done});
    done += k;
  }
}

}  // namespace

uint8_t* plan_covering_read(const SplitFiles& f, uint64_t offset, uint64_t bytes, uint8_t* dst,
                            uint64_t max_chunk, std::vector<PlannedRead>& out) {
  const uint64_t a0 = io::align_down(offset);
  uint8_t* first = dst + (offset - a0);
  if (bytes == 0) return first;
  const uint64_t end = offset + bytes;
  if (f.direct == nullptr) {
    add_chunked(f.buffered.get(), first, bytes, offset, max_chunk, out);
    return first;
  }
  const uint64_t a1 = io::align_up(end);
  if (a1 <= f.direct->size()) {
    add_chunked(f.direct.get(), dst, a1 - a0, a0, max_chunk, out);
    return first;
  }
  // The cover runs past end of file: O_DIRECT the whole blocks, then the
  // unaligned tail buffered (the tail is under 4 KiB).
  const uint64_t body_end = io::align_down(end);
  if (body_end > a0) add_chunked(f.direct.get(), dst, body_end - a0, a0, max_chunk, out);
  const uint64_t tail_from = std::max(body_end, offset);
  out.push_back({f.buffered.get(), dst + (tail_from - a0), static_cast<size_t>(end - tail_from),
                 tail_from});
  return first;
}

SplitFiles open_split_files(const std::string& path, bool want_direct, const io::WrapFile& wrap) {
  SplitFiles f;
  std::shared_ptr<io::FdFile> buffered = io::open_fd_file(path, /*direct=*/false);
  f.fd = buffered->fd();
  f.buffered = buffered;
  if (want_direct) f.direct = io::open_fd_file(path, /*direct=*/true);  // null if refused
  if (wrap) {
    f.buffered = wrap(f.buffered);
    if (f.direct) f.direct = wrap(f.direct);
  }
  return f;
}

}  // namespace sluice::moe
