// synth's streaming writer: rows are generated (and quantized) in parallel in
// chunks while the calling thread writes finished chunks in file order through
// gguf::Writer. At most kSlotsPerThread chunks per worker exist at once, so
// memory is bounded by threads * slots * kChunkBytes whatever the model size.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "gguf/writer.h"
#include "kernels/quant.h"
#include "tools/synth_plan.h"
#include "util/error.h"

namespace sluice::tools {
namespace {

constexpr uint64_t kChunkBytes = 4ull << 20;  // target output bytes per chunk
constexpr unsigned kSlotsPerThread = 2;
constexpr float kRouterGain = 2.0f;  // router logits' token-to-token std ~ gain/sqrt(2)

struct Chunk {
  size_t tensor;
  uint64_t row_begin, row_end;
  uint64_t bytes;
};

std::vector<Chunk> make_chunks(const std::vector<PlannedTensor>& tensors) {
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const PlannedTensor& t = tensors[i];
    const uint64_t row_bytes = *ggml_row_bytes(t.type, t.ne[0]);
    uint64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    const uint64_t per_chunk = std::max<uint64_t>(1, kChunkBytes / row_bytes);
    for (uint64_t r = 0; r < rows; r += per_chunk) {
      const uint64_t end = std::min(rows, r + per_chunk);
      chunks.push_back({i, r, end, (end - r) * row_bytes});
    }
  }
  return chunks;
}

// Hands chunks to workers in order and back to the writer in order.
class ChunkPipeline {
 public:
  ChunkPipeline(size_t n_chunks, size_t n_slots) : n_chunks_(n_chunks), slots_(n_slots) {}

  // Worker side: claims the next chunk index; false when none is left or aborted.
  bool claim(size_t* index) {
    *index = next_.fetch_add(1);
    if (*index >= n_chunks_) return false;
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return aborted_ || *index < written_ + slots_.size(); });
    return !aborted_;
  }
  std::vector<uint8_t>& buffer(size_t index) { return slots_[index % slots_.size()].data; }
  void publish(size_t index) {
    {
      std::lock_guard lk(mu_);
      slots_[index % slots_.size()].ready = true;
    }
    cv_.notify_all();
  }
  void abort(std::exception_ptr e) {
    {
      std::lock_guard lk(mu_);
      if (!error_) error_ = e;
      aborted_ = true;
    }
    cv_.notify_all();
  }

  // Writer side: waits for chunk `index` (rethrows a worker's error).
  std::vector<uint8_t>& wait_ready(size_t index) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return aborted_ || slots_[index % slots_.size()].ready; });
    if (error_) std::rethrow_exception(error_);
    if (aborted_) throw Error("synth: aborted");
    return slots_[index % slots_.size()].data;
  }
  void release(size_t index) {
    {
      std::lock_guard lk(mu_);
      slots_[index % slots_.size()].ready = false;
      ++written_;
    }
    cv_.notify_all();
  }

 private:
  struct Slot {
    std::vector<uint8_t> data;
    bool ready = false;
  };
  const size_t n_chunks_;
  std::atomic<size_t> next_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  size_t written_ = 0;
  bool aborted_ = false;
  std::exception_ptr error_;
};

void check_writable(const PlannedTensor& t) {
  if (t.direct || t.type == GgmlType::F32) return;
  const kernels::TypeKernels* k = nullptr;
  try {
    k = &kernels::kernels_for(t.type);
  } catch (const Error&) {
  }
  if (!k || !k->quantize)
    throw Error("synth: cannot write " + t.name + " as " + std::string(ggml_type_name(t.type)) +
                " (no quantizer for that type)");
}

}  // namespace

// ---- RowGenerator --------------------------------------------------------------

RowGenerator::RowGenerator(const SynthConfig& cfg, uint32_t n_embd, uint32_t n_layer, uint32_t n_expert)
    : seed_(cfg.seed), n_embd_(n_embd), n_expert_(n_expert) {
  Rng ur(mix_seed(seed_, hash_name("shared residual direction")));
  u_.resize(n_embd);
  double norm = 0;
  for (float& v : u_) {
    v = ur.normal();
    norm += double{v} * v;
  }
  for (float& v : u_) v = static_cast<float>(v / std::sqrt(norm));
  affinity_.resize(size_t{n_layer} * n_expert);
  for (uint32_t l = 0; l < n_layer; ++l) {
    Rng ar(mix_seed(mix_seed(seed_, hash_name("router affinity")), l));
    for (uint32_t e = 0; e < n_expert; ++e) affinity_[size_t{l} * n_expert + e] = cfg.routing_skew * ar.normal();
  }
}

void RowGenerator::float_row(const PlannedTensor& t, uint64_t row, float* out) const {
  Rng rng(mix_seed(mix_seed(seed_, hash_name(t.name)), row));
  const uint64_t n = t.ne[0];
  switch (t.init) {
    case Init::Projection: {
      const float std = 1.0f / std::sqrt(static_cast<float>(n));
      for (uint64_t i = 0; i < n; ++i) out[i] = std * rng.normal();
      break;
    }
    case Init::Norm:
      for (uint64_t i = 0; i < n; ++i) out[i] = 1.0f + 0.05f * rng.normal();
      break;
    case Init::Embedding: {
      // x = z + sqrt(n) u: after RMSNorm, u . x_norm ~ sqrt(n/2) for every token.
      const float c = std::sqrt(static_cast<float>(n));
      for (uint64_t i = 0; i < n; ++i) out[i] = rng.normal() + c * u_[i];
      break;
    }
    case Init::Router: {
      // Row e = random part orthogonal to u (token-dependent logits, std ~
      // gain/sqrt 2) + g_e u with g_e = s_e / sqrt(n/2), which adds the
      // constant s_e to expert e's logit: experts with large s_e run hot.
      const float std = kRouterGain / std::sqrt(static_cast<float>(n));
      double dot = 0;
      for (uint64_t i = 0; i < n; ++i) {
        out[i] = std * rng.normal();
        dot += double{out[i]} * u_[i];
      }
      const uint32_t expert = static_cast<uint32_t>(row % n_expert_);
      const float g = router_affinity(t.layer, expert) / std::sqrt(static_cast<float>(n) / 2.0f);
      for (uint64_t i = 0; i < n; ++i) out[i] += (g - static_cast<float>(dot)) * u_[i];
      break;
    }
  }
}

void RowGenerator::row(const PlannedTensor& t, uint64_t row, void* dst, float* scratch) const {
  const int64_t n = static_cast<int64_t>(t.ne[0]);
  if (t.direct) {
    Rng rng(mix_seed(mix_seed(seed_, hash_name(t.name)), row));
    generate_direct_row(t.type, rng, 1.0f / std::sqrt(static_cast<float>(n)), dst, n);
    return;
  }
  float_row(t, row, scratch);
  if (t.type == GgmlType::F32)
    std::memcpy(dst, scratch, sizeof(float) * n);
  else
    kernels::quantize_row(t.type, scratch, dst, n);
}

// ---- synth_model ---------------------------------------------------------------

SynthResult synth_model(const SynthConfig& cfg, const std::string& out_path, unsigned threads,
                        const SynthProgress& progress) {
  io::OutputFile out(out_path, {.flag = "", .inputs = {cfg.vocab_path}, .overwrite = true});
  return synth_model(cfg, out, threads, progress);
}

SynthResult synth_model(const SynthConfig& cfg, io::OutputFile& out, unsigned threads, const SynthProgress& progress) {
  if (cfg.arch != "qwen3moe") fail("--arch", "unsupported architecture '" + cfg.arch + "' (supported: qwen3moe)");
  SynthPlan plan = plan_qwen3moe(cfg);

  uint64_t total_elements = 0;
  for (const auto& t : plan.tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.ne) n *= d;
    total_elements += n;
  }
  const bool direct = cfg.quant_mode == QuantMode::Direct ||
                      (cfg.quant_mode == QuantMode::Auto && total_elements > kDirectThresholdElements);
  for (auto& t : plan.tensors) {
    t.direct = direct && t.init == Init::Projection && direct_block_supported(t.type);
    check_writable(t);
  }
  const RowGenerator gen(cfg, cfg.n_embd, cfg.n_layer, cfg.n_expert);

  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const auto chunks = make_chunks(plan.tensors);
  const auto t0 = std::chrono::steady_clock::now();
  SynthResult result;
  result.direct = direct;
  result.n_tensors = plan.tensors.size();
  uint64_t max_row = 0;
  for (const auto& t : plan.tensors) max_row = std::max(max_row, t.ne[0]);

  {
    gguf::Writer writer(out);
    for (auto& [k, v] : plan.metadata) writer.add_metadata(k, std::move(v));
    for (const auto& t : plan.tensors) writer.add_tensor(t.name, t.type, t.ne);
    writer.write_header();

    ChunkPipeline pipe(chunks.size(), size_t{threads} * kSlotsPerThread);
    auto work = [&] {
      std::vector<float> scratch(max_row);
      size_t index;
      try {
        while (pipe.claim(&index)) {
          const Chunk& c = chunks[index];
          const PlannedTensor& t = plan.tensors[c.tensor];
          const uint64_t row_bytes = c.bytes / (c.row_end - c.row_begin);
          std::vector<uint8_t>& buf = pipe.buffer(index);
          buf.resize(c.bytes);
          for (uint64_t r = c.row_begin; r < c.row_end; ++r)
            gen.row(t, r, buf.data() + (r - c.row_begin) * row_bytes, scratch.data());
          pipe.publish(index);
        }
      } catch (...) {
        pipe.abort(std::current_exception());
      }
    };
    std::vector<std::jthread> workers;
    for (unsigned i = 0; i < threads; ++i) workers.emplace_back(work);

    uint64_t total = 0, done = 0;
    for (const auto& c : chunks) total += c.bytes;
    auto last_print = t0;
    try {
      for (size_t i = 0; i < chunks.size(); ++i) {
        std::vector<uint8_t>& buf = pipe.wait_ready(i);
        writer.write_tensor_data(buf.data(), chunks[i].bytes);
        pipe.release(i);
        done += chunks[i].bytes;
        const auto now = std::chrono::steady_clock::now();
        if (progress.print && (now - last_print > std::chrono::seconds(1) || i + 1 == chunks.size())) {
          last_print = now;
          const double s = std::chrono::duration<double>(now - t0).count();
          std::fprintf(stderr, "\rsynth: %8.1f / %.1f MiB  %6.1f MB/s  %5.1f s", done / 1048576.0,
                       total / 1048576.0, s > 0 ? done / 1e6 / s : 0.0, s);
          std::fflush(stderr);
        }
      }
    } catch (...) {
      pipe.abort(std::current_exception());
      throw;
    }
    workers.clear();  // join
    writer.finish();
    out.commit();
    result.bytes = writer.bytes_written();
    if (progress.print) std::fprintf(stderr, "\n");
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace sluice::tools
