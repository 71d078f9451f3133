// libFuzzer target for model loading past the parser: hparams and tensor
// binding through the public model::load_model(gguf, cfg), then one token of
// forward pass when the load succeeds. Any bytes must load or throw
// sluice::Error — never crash, hang, leak or read out of bounds.
//
// The input is written to a scratch file (dense weights are mapped from a
// path: --dense-weights mmap, so nothing is copied or allocated per tensor;
// experts are read on demand with the cache off). Sizes that would make the
// fuzzer allocate without bound are skipped here, not fixed in the engine:
// the context is 4 positions, and models with more than kMaxLayers blocks or
// kMaxExperts experts are not loaded (for speed: the engine bounds both by the
// tensors present). Run with -rss_limit_mb (scripts/fuzz.sh) so any unbounded
// allocation is reported. (This target found attention.key_length = 805306372
// allocating 3 GiB of RoPE tables before binding; the engine now bounds head
// dimensions, ModelLoad.HugeHeadDimensionIsAnErrorNotAnAllocation.)
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "util/error.h"

using namespace sluice;

namespace {

constexpr uint64_t kMaxLayers = 64;
constexpr uint64_t kMaxExperts = 256;
constexpr uint64_t kMaxVocab = 1 << 16;

std::string scratch_path() {
  const std::string dir = std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path().string();
  return dir + "/sluice-model-fuzz-" + std::to_string(::getpid()) + ".gguf";
}

bool within_limits(const gguf::GgufModel& g) {
  const std::string a = g.architecture();
  const std::pair<std::string, uint64_t> limits[] = {{a + ".block_count", kMaxLayers},
                                                     {a + ".expert_count", kMaxExperts}};
  for (const auto& [key, limit] : limits) {
    try {
      if (auto v = g.metadata().get_uint(key); v && *v > limit) return false;
    } catch (const Error&) {
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = scratch_path();
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return 0;
    const bool ok = std::fwrite(data, 1, size, f) == size;
    if (std::fclose(f) != 0 || !ok) return 0;
  }
  try {
    auto g = std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(path));
    if (!within_limits(*g)) return 0;
    model::ModelConfig cfg;
    cfg.dense_mode = moe::DenseMode::Mmap;
    cfg.odirect = false;
    cfg.threads = 1;
    cfg.io_threads = 1;
    cfg.n_ctx = 4;
    cfg.ubatch = 4;
    cfg.kv_type = model::KvType::F32;
    std::unique_ptr<model::Model> m = model::load_model(g, cfg);
    const uint32_t n_vocab = m->hparams().n_vocab;
    if (n_vocab == 0 || n_vocab > kMaxVocab) return 0;
    std::vector<float> logits(n_vocab);
    const int32_t tok = static_cast<int32_t>(size % n_vocab);
    m->eval_last(std::span<const int32_t>(&tok, 1), 0, logits.data());
  } catch (const Error&) {
  }
  return 0;
}
