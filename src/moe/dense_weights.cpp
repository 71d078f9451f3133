// DenseWeights: the non-expert tensors, resident for the whole run.
//
// Modes (see DenseMode):
//  - Anon: copy each tensor into anonymous 4 KiB-aligned memory with O_DIRECT
//    (buffered where refused), then drop the file's cached pages, so exactly
//    one copy of the dense set lives in RAM and the kernel cannot evict it to
//    make room for the page cache.
//  - Warm: map the files and fault the dense ranges in once.
//  - Mmap: map the files and leave everything to demand paging.
// Mapped modes check every tensor range against the file size at load (Error
// naming the file) and guard the mappings (io/mapping_guard.h): a file
// truncated later ends the run with a message, not a bare SIGBUS.
//
// Immutable after construction (anon tensors aside, which the model may
// re-lay once through writable() before using them): data()/bytes()/
// resident_fraction() are safe from any thread.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <unordered_map>

#include "io/aligned_buffer.h"
#include "io/mapping_guard.h"
#include "io/residency.h"
#include "moe/aligned_reads.h"
#include "moe/dense_weights.h"
#include "util/error.h"

namespace sluice::moe {

DenseMode parse_dense_mode(const std::string& s) {
  if (s == "anon") return DenseMode::Anon;
  if (s == "warm") return DenseMode::Warm;
  if (s == "mmap") return DenseMode::Mmap;
  throw Error("--dense-weights: unknown mode '" + s + "' (expected anon, warm or mmap)");
}

const char* dense_mode_name(DenseMode m) {
  switch (m) {
    case DenseMode::Anon: return "anon";
    case DenseMode::Warm: return "warm";
    case DenseMode::Mmap: return "mmap";
  }
  return "?";
}

namespace {

// Pieces of one dense read; large enough that syscall cost is noise.
constexpr uint64_t kDenseChunk = uint64_t{8} << 20;

// A read-only mapping of a whole file, guarded so that SIGBUS from a file
// truncated under it ends the run with a message naming the file.
class FileMapping {
 public:
  explicit FileMapping(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      fail(path, std::string("cannot stat: ") + std::strerror(err));
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        fail(path, std::string("cannot mmap: ") + std::strerror(err));
      }
      data_ = static_cast<const uint8_t*>(p);
      guard_ = std::make_unique<io::MappingGuard>(data_, size_, path);
    }
    ::close(fd);  // the mapping keeps the file referenced
  }
  ~FileMapping() {
    guard_.reset();  // disarmed before the range can be reused
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<io::MappingGuard> guard_;
};

// A run of dense tensors in one split whose aligned covers touch: read as one.
struct Extent {
  uint32_t split = 0;
  uint64_t from = 0;  // first byte (unaligned)
  uint64_t to = 0;    // one past the last byte
  std::vector<const gguf::TensorInfo*> tensors;
};

std::vector<Extent> group_extents(std::vector<const gguf::TensorInfo*> ts) {
  std::sort(ts.begin(), ts.end(), [](const auto* a, const auto* b) {
    return a->split != b->split ? a->split < b->split : a->offset < b->offset;
  });
  std::vector<Extent> out;
  for (const gguf::TensorInfo* t : ts) {
    if (!out.empty() && out.back().split == t->split &&
        io::align_down(t->offset) <= io::align_up(out.back().to)) {
      out.back().to = std::max(out.back().to, t->offset + t->bytes);
      out.back().tensors.push_back(t);
    } else {
      out.push_back({t->split, t->offset, t->offset + t->bytes, {t}});
    }
  }
  return out;
}

// Serialises progress reports from the loader threads (see LoadProgressFn).
class ProgressCounter {
 public:
  ProgressCounter(const LoadProgressFn& fn, uint64_t total) : fn_(fn), total_(total) {}
  void add(uint64_t n) {
    if (!fn_) return;
    std::lock_guard<std::mutex> lk(mu_);
    done_ = std::min(total_, done_ + n);
    report();
  }
  // The closing done == total call, unless add() already made it.
  void finish() {
    if (!fn_) return;
    std::lock_guard<std::mutex> lk(mu_);
    done_ = total_;
    if (!reported_end_) report();
  }

 private:
  void report() {
    reported_end_ = done_ == total_;
    fn_(done_, total_);
  }

  const LoadProgressFn& fn_;
  const uint64_t total_;
  uint64_t done_ = 0;
  bool reported_end_ = false;
  std::mutex mu_;
};

// Runs the reads on a few threads: one O_DIRECT stream rarely saturates an
// NVMe drive, and loading the dense set is on the startup path. Rethrows the
// first failure once every thread has stopped.
void read_parallel(const std::vector<PlannedRead>& reads, ProgressCounter& progress) {
  constexpr size_t kMaxThreads = 4;
  const size_t n_threads = std::min(kMaxThreads, reads.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto worker = [&] {
    for (size_t i; !failed && (i = next++) < reads.size();) {
      try {
        reads[i].file->read_exact(reads[i].dst, reads[i].n, reads[i].offset);
        progress.add(reads[i].n);
      } catch (...) {
        std::lock_guard<std::mutex> lk(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t) {
    try {
      threads.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // the OS refused a thread: the threads we have (at least this one) do all reads
    }
  }
  worker();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

struct DenseWeights::Impl {
  DenseMode mode = DenseMode::Anon;
  uint64_t total_bytes = 0;
  bool buffered_fallback = false;
  std::unordered_map<const gguf::TensorInfo*, const uint8_t*> by_ptr;
  std::unordered_map<std::string, const uint8_t*> by_name;  // for TensorInfo copies
  std::vector<io::AlignedBuffer> buffers;                   // anon: one per split
  std::vector<std::unique_ptr<FileMapping>> maps;           // warm/mmap: by split
  struct Span {
    const uint8_t* p;
    size_t n;
  };
  std::vector<Span> spans;  // what resident_fraction measures

  void add(const gguf::TensorInfo* t, const uint8_t* p) {
    by_ptr[t] = p;
    by_name[t->name] = p;
  }

  void load_anon(const gguf::GgufModel& model, const std::vector<Extent>& extents, const DenseConfig& cfg);
  void load_mapped(const gguf::GgufModel& model, const std::vector<Extent>& extents, bool warm,
                   const LoadProgressFn& on_progress);
};

void DenseWeights::Impl::load_anon(const gguf::GgufModel& model, const std::vector<Extent>& extents,
                                   const DenseConfig& cfg) {
  const bool odirect = cfg.odirect;
  const std::vector<std::string> paths = model.paths();
  buffers.resize(paths.size());
  std::vector<SplitFiles> files(paths.size());
  std::vector<PlannedRead> reads;
  for (uint32_t s = 0; s < paths.size(); ++s) {
    uint64_t need = 0;
    for (const Extent& e : extents) {
      if (e.split == s) need += cover_bytes(e.from, e.to - e.from);
    }
    if (need == 0) continue;
    files[s] = open_split_files(paths[s], odirect, cfg.wrap_file);
    if (odirect && files[s].direct == nullptr) buffered_fallback = true;
    buffers[s] = io::AlignedBuffer(need);
    // Dense weights are scanned by every token's matmuls: huge pages cut TLB misses.
    io::advise_hugepage(buffers[s].data(), buffers[s].size());
    uint64_t pos = 0;
    for (const Extent& e : extents) {
      if (e.split != s) continue;
      uint8_t* first = plan_covering_read(files[s], e.from, e.to - e.from,
                                          buffers[s].data() + pos, kDenseChunk, reads);
      for (const gguf::TensorInfo* t : e.tensors) add(t, first + (t->offset - e.from));
      pos += cover_bytes(e.from, e.to - e.from);
    }
    spans.push_back({buffers[s].data(), static_cast<size_t>(need)});
  }
  uint64_t planned = 0;
  for (const PlannedRead& r : reads) planned += r.n;
  ProgressCounter progress(cfg.on_progress, planned);
  read_parallel(reads, progress);
  progress.finish();
  // We now own a private copy; the cached file pages (the header parse, and
  // everything on the buffered path) would be a second one.
  for (const SplitFiles& f : files) io::drop_file_pages(f.fd);
}

void DenseWeights::Impl::load_mapped(const gguf::GgufModel& model, const std::vector<Extent>& extents,
                                     bool warm, const LoadProgressFn& on_progress) {
  const std::vector<std::string> paths = model.paths();
  maps.resize(paths.size());
  uint64_t planned = 0;
  for (const Extent& e : extents) planned += e.to - e.from;
  ProgressCounter progress(on_progress, planned);
  for (const Extent& e : extents) {
    auto& m = maps[e.split];
    if (!m) m = std::make_unique<FileMapping>(paths[e.split]);
    // The header was checked against the size at parse time, but the file
    // may have shrunk since: map nothing past its end (that would SIGBUS).
    for (const gguf::TensorInfo* t : e.tensors) {
      if (t->offset + t->bytes > m->size())
        fail(paths[e.split], "tensor " + t->name + " (bytes " + std::to_string(t->offset) + ".." +
                                 std::to_string(t->offset + t->bytes) + ") ends past end of file (size " +
                                 std::to_string(m->size()) + "); was the file truncated?");
    }
    const uint8_t* base = m->data();
    for (const gguf::TensorInfo* t : e.tensors) add(t, base + t->offset);
    const uint8_t* p = base + e.from;
    const size_t n = static_cast<size_t>(e.to - e.from);
    spans.push_back({p, n});
    if (warm) {
      // Read-ahead in big requests first, then touch so every page is mapped
      // into this process (WILLNEED alone only fills the page cache).
      io::advise_willneed(p, n);
      io::touch_pages(p, n);
      progress.add(n);
    }
  }
  progress.finish();
}

DenseWeights::DenseWeights(const gguf::GgufModel& model, const DenseConfig& cfg,
                           const std::function<bool(const gguf::TensorInfo&)>& is_expert)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.mode = cfg.mode;
  std::vector<const gguf::TensorInfo*> dense;
  for (const gguf::TensorInfo& t : model.tensors()) {
    if (is_expert && is_expert(t)) continue;
    s.total_bytes += t.bytes;
    if (t.bytes == 0) {
      s.add(&t, nullptr);
      continue;
    }
    dense.push_back(&t);
  }
  const std::vector<Extent> extents = group_extents(std::move(dense));
  if (cfg.mode == DenseMode::Anon) {
    s.load_anon(model, extents, cfg);
  } else {
    s.load_mapped(model, extents, cfg.mode == DenseMode::Warm, cfg.on_progress);
  }
}

DenseWeights::~DenseWeights() = default;

const void* DenseWeights::data(const gguf::TensorInfo& t) const {
  if (auto it = impl_->by_ptr.find(&t); it != impl_->by_ptr.end()) return it->second;
  if (auto it = impl_->by_name.find(t.name); it != impl_->by_name.end()) return it->second;
  throw Error("dense weights: tensor " + t.name + " was not loaded (it is an expert tensor?)");
}

uint8_t* DenseWeights::writable(const gguf::TensorInfo& t) {
  const void* p = data(t);
  // Anon buffers are this object's own private, writable mappings.
  return impl_->mode == DenseMode::Anon ? static_cast<uint8_t*>(const_cast<void*>(p)) : nullptr;
}

uint64_t DenseWeights::bytes() const { return impl_->total_bytes; }

double DenseWeights::resident_fraction() const {
  io::Residency total;
  for (const auto& sp : impl_->spans) {
    const io::Residency r = io::residency(sp.p, sp.n);
    total.resident_pages += r.resident_pages;
    total.total_pages += r.total_pages;
  }
  return total.fraction();
}

bool DenseWeights::used_buffered_fallback() const { return impl_->buffered_fallback; }

DenseMode DenseWeights::mode() const { return impl_->mode; }

}  // namespace sluice::moe
