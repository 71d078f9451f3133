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
#include <functional>
#include <new>
#include <mutex>
#include <thread>

#include "gguf/writer.h"
#include "kernels/quant.h"
#include "tools/synth_plan.h"
#include "util/clock.h"
#include "util/error.h"

namespace sluice::tools {
namespace {

constexpr uint64_t kChunkBytes = 4ull << 20;  // target output bytes per chunk
constexpr unsigned kSlotsPerThread = 2;
constexpr float kRouterGain = 2.0f;  // router logits' token-to-token std ~ gain/sqrt(2)
// Cap on all workers' chunk buffers and scratch together (with the shape limits
// of validate_synth_config one worker needs at most ~10 MiB).
constexpr uint64_t kMaxBufferBytes = 4ull << 30;

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

// Rethrows the exception in `e` as one sluice::Error (an Error unchanged).
[[noreturn]] void rethrow_as_error(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error("synth: out of memory while generating tensor data (try fewer --threads)");
  } catch (const std::exception& x) {
    throw Error(std::string("synth: worker failed: ") + x.what());
  } catch (...) {
    throw Error("synth: worker failed with an unknown exception");
  }
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Serialized size of one metadata value's payload, as gguf::Writer writes it.
uint64_t value_bytes(const gguf::Value& v) {
  switch (v.type) {
    case gguf::ValueType::UINT8: case gguf::ValueType::INT8: case gguf::ValueType::BOOL: return 1;
    case gguf::ValueType::UINT16: case gguf::ValueType::INT16: return 2;
    case gguf::ValueType::UINT32: case gguf::ValueType::INT32: case gguf::ValueType::FLOAT32: return 4;
    case gguf::ValueType::UINT64: case gguf::ValueType::INT64: case gguf::ValueType::FLOAT64: return 8;
    case gguf::ValueType::STRING: return 8 + v.s.size();
    case gguf::ValueType::ARRAY: {
      uint64_t n = 4 + 8;
      for (const auto& e : v.array) n += value_bytes(e);
      return n;
    }
  }
  return 0;
}

uint64_t tensor_bytes(const PlannedTensor& t) {
  uint64_t rows = 1;
  for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
  return *ggml_row_bytes(t.type, t.ne[0]) * rows;
}

constexpr uint64_t kAlignment = 32;  // gguf::Writer's default, which synth uses

// File size and memory of writing `plan` (GGUF v3 layout, as gguf::Writer
// writes it with the default alignment: no general.alignment key).
SynthSizes plan_sizes(const SynthPlan& plan, unsigned threads) {
  SynthSizes s;
  // Per tensor the sizes fit easily (validate_synth_config's limits); the sum
  // over absurd shapes can pass 2^64, so it saturates (and then cannot fit).
  auto add = [](uint64_t& acc, uint64_t v) {
    if (__builtin_add_overflow(acc, v, &acc)) acc = UINT64_MAX - kAlignment;
  };
  uint64_t header = 4 + 4 + 8 + 8, data = 0, max_chunk = 0, max_row = 0;
  std::vector<uint64_t> block_bytes;  // per blk.N: tensor infos + data
  for (const auto& [k, v] : plan.metadata) header += 8 + k.size() + 4 + value_bytes(v);
  for (const auto& t : plan.tensors) {
    const uint64_t info = 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
    const uint64_t bytes = align_up(tensor_bytes(t), kAlignment);
    header += info;
    add(data, bytes);
    if (t.name.rfind("blk.", 0) == 0) {
      if (block_bytes.size() <= t.layer) block_bytes.resize(t.layer + 1);
      add(block_bytes[t.layer], info + bytes);
    }
    const uint64_t row_bytes = *ggml_row_bytes(t.type, t.ne[0]);
    const uint64_t rows = tensor_bytes(t) / row_bytes;
    max_chunk = std::max(max_chunk, std::min(rows, std::max<uint64_t>(1, kChunkBytes / row_bytes)) * row_bytes);
    max_row = std::max(max_row, t.ne[0]);
  }
  s.header_bytes = align_up(header, kAlignment);
  s.file_bytes = s.header_bytes;
  add(s.file_bytes, data);
  // Blocks differ (leading dense blocks, NextN blocks, per-block types): the
  // largest one keeps the --layers advice on the safe side.
  uint64_t layers_bytes = 0;
  for (uint64_t b : block_bytes) {
    s.per_layer_bytes = std::max(s.per_layer_bytes, b);
    add(layers_bytes, b);
  }
  // + alignment: the header's padding is not linear in the layer count.
  // (Saturated sums make this an over-estimate, which only hides the advice.)
  s.fixed_bytes = s.file_bytes - std::min(s.file_bytes, layers_bytes) + kAlignment;
  s.buffer_bytes = uint64_t{threads} * (kSlotsPerThread * max_chunk + sizeof(float) * max_row);
  return s;
}

unsigned worker_count(unsigned threads) {
  return threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads;
}

void check_writable(const PlannedTensor& t) {
  if ((t.type == GgmlType::I32) != (t.init == Init::ExpertIds))
    throw Error("synth: " + t.name + ": I32 tensors are expert-id tables and nothing else");
  if (t.direct || t.type == GgmlType::F32 || t.type == GgmlType::I32) return;
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
    case Init::Bias:
      for (uint64_t i = 0; i < n; ++i) out[i] = 0.1f * rng.normal();
      break;
    case Init::Decay: {
      // -exp(U(ln 0.05, 0)) in [-1, -0.05): a DeltaNet keeps exp(softplus(.) * a)
      // < 1 of its state per token, so long runs stay finite.
      const float lo = std::log(0.05f);
      for (uint64_t i = 0; i < n; ++i) out[i] = -std::exp(lo * (1.0f - rng.uniform()));
      break;
    }
    case Init::QuarterRope:
      for (uint64_t i = 0; i < n; ++i) out[i] = i < n / 4 ? 1.0f : 1e30f;
      break;
    case Init::ExpertIds:  // integers, written by row()
      throw Error("synth: " + t.name + " holds expert ids, not floats");
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
  if (t.init == Init::ExpertIds) {
    // The first n of a seeded shuffle of 0..n_expert-1: distinct, uniform.
    if (static_cast<uint64_t>(n) > n_expert_)
      throw Error("synth: " + t.name + " wants " + std::to_string(n) + " distinct experts of " +
                  std::to_string(n_expert_));
    Rng rng(mix_seed(mix_seed(seed_, hash_name(t.name)), row));
    std::vector<int32_t> ids(n_expert_);
    for (uint32_t e = 0; e < n_expert_; ++e) ids[e] = static_cast<int32_t>(e);
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t j = static_cast<uint64_t>(i) + static_cast<uint64_t>(rng.uniform() * (n_expert_ - i));
      std::swap(ids[i], ids[std::min<uint64_t>(j, n_expert_ - 1)]);
    }
    std::memcpy(dst, ids.data(), sizeof(int32_t) * n);
    return;
  }
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

void run_chunk_pipeline(size_t n_chunks, unsigned threads, size_t slots,
                        const std::function<void(size_t, std::vector<uint8_t>&)>& produce,
                        const std::function<void(size_t, std::vector<uint8_t>&)>& consume) {
  ChunkPipeline pipe(n_chunks, slots);
  auto work = [&] {
    // Everything a worker does, allocation included, is inside the try: an
    // exception escaping a thread would std::terminate the process.
    try {
      size_t index;
      while (pipe.claim(&index)) {
        produce(index, pipe.buffer(index));
        pipe.publish(index);
      }
    } catch (...) {
      pipe.abort(std::current_exception());
    }
  };
  std::vector<std::jthread> workers;
  try {
    for (unsigned i = 0; i < threads; ++i) workers.emplace_back(work);
    for (size_t i = 0; i < n_chunks; ++i) {
      std::vector<uint8_t>& buf = pipe.wait_ready(i);
      consume(i, buf);
      pipe.release(i);
    }
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    pipe.abort(e);
    workers.clear();  // join: they see the abort
    rethrow_as_error(e);
  }
  workers.clear();
}

SynthSizes synth_sizes(const SynthConfig& cfg, unsigned threads) {
  return plan_sizes(synth_plan(cfg), worker_count(threads));
}

SynthResult synth_model(const SynthConfig& cfg, const std::string& out_path, unsigned threads,
                        const SynthProgress& progress) {
  io::OutputFile out(out_path, {.flag = "", .inputs = {cfg.vocab_path}, .overwrite = true});
  return synth_model(cfg, out, threads, progress);
}

SynthResult synth_model(const SynthConfig& cfg, io::OutputFile& out, unsigned threads, const SynthProgress& progress) {
  SynthPlan plan = synth_plan(cfg);
  threads = worker_count(threads);

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
    if (!cfg.zero_data) check_writable(t);
  }

  // Sizes first: nothing is opened or allocated for a file that cannot fit.
  const SynthSizes sizes = plan_sizes(plan, threads);
  if (sizes.buffer_bytes > kMaxBufferBytes)
    fail("--threads", std::to_string(threads) + " workers would need " + std::to_string(sizes.buffer_bytes >> 20) +
                          " MiB of chunk buffers (limit " + std::to_string(kMaxBufferBytes >> 20) + " MiB)");
  // A zero-data file's tensor data is a hole: only the header takes space.
  check_disk_space(out.path(), cfg.zero_data ? sizes.header_bytes : sizes.file_bytes, free_disk_bytes(out.path()),
                   sizes.fixed_bytes, sizes.per_layer_bytes);

  const RowGenerator gen(cfg, cfg.n_embd, cfg.n_layer + cfg.n_nextn, cfg.n_expert);  // NextN blocks route too
  const auto chunks = cfg.zero_data ? std::vector<Chunk>{} : make_chunks(plan.tensors);
  const auto t0 = std::chrono::steady_clock::now();
  SynthResult result;
  result.direct = direct;
  result.n_tensors = plan.tensors.size();
  result.buffer_bytes = sizes.buffer_bytes;
  for (const auto& t : plan.tensors)
    if (t.name.rfind("blk.", 0) == 0 && t.name.ends_with(".ffn_gate_inp.weight")) {
      result.router_layer = t.layer;
      break;
    }
  uint64_t max_row = 0;
  for (const auto& t : plan.tensors) max_row = std::max(max_row, t.ne[0]);

  {
    gguf::Writer writer(out);
    for (auto& [k, v] : plan.metadata) writer.add_metadata(k, std::move(v));
    for (const auto& t : plan.tensors) writer.add_tensor(t.name, t.type, t.ne);
    writer.write_header();

    // One scratch row per worker thread, allocated inside the worker's try.
    auto produce = [&](size_t index, std::vector<uint8_t>& buf) {
      thread_local std::vector<float> scratch;
      scratch.resize(max_row);
      const Chunk& c = chunks[index];
      const PlannedTensor& t = plan.tensors[c.tensor];
      const uint64_t row_bytes = c.bytes / (c.row_end - c.row_begin);
      buf.resize(c.bytes);
      for (uint64_t r = c.row_begin; r < c.row_end; ++r)
        gen.row(t, r, buf.data() + (r - c.row_begin) * row_bytes, scratch.data());
    };
    uint64_t total = 0, done = 0;
    for (const auto& c : chunks) total += c.bytes;
    auto last_print = t0;
    auto consume = [&](size_t i, std::vector<uint8_t>& buf) {
      writer.write_tensor_data(buf.data(), chunks[i].bytes);
      done += chunks[i].bytes;
      const auto now = std::chrono::steady_clock::now();
      if (progress.print && (now - last_print > std::chrono::seconds(1) || i + 1 == chunks.size())) {
        last_print = now;
        const double s = seconds_since(t0, now);
        std::fprintf(stderr, "\rsynth: %8.1f / %.1f MiB  %6.1f MB/s  %5.1f s", done / 1048576.0,
                     total / 1048576.0, s > 0 ? done / 1e6 / s : 0.0, s);
        std::fflush(stderr);
      }
    };
    if (cfg.zero_data)
      writer.zero_fill_remaining();
    else
      run_chunk_pipeline(chunks.size(), threads, size_t{threads} * kSlotsPerThread, produce, consume);
    writer.finish();
    out.commit();
    result.bytes = writer.bytes_written();
    if (progress.print) std::fprintf(stderr, "\n");
  }
  result.seconds = seconds_since(t0);
  return result;
}

}  // namespace sluice::tools
