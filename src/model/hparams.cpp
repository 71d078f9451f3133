#include "model/hparams.h"

#include <optional>
#include <string_view>

#include "util/error.h"

namespace sluice::model {
namespace {

// Reads `<arch>.<key>` through one place so every error names the file and key.
class KeyReader {
 public:
  KeyReader(const gguf::GgufModel& model, std::string arch)
      : md_(model.metadata()), arch_(std::move(arch)), file_(model.paths().empty() ? "" : model.paths().front()) {}

  std::string key(std::string_view k) const { return arch_ + "." + std::string(k); }

  uint32_t u32(std::string_view k, std::optional<uint32_t> fallback = std::nullopt) const {
    const auto v = md_.get_uint(key(k));
    if (!v) {
      if (fallback) return *fallback;
      fail(file_, "missing metadata key " + key(k));
    }
    if (*v > 0xffffffffull) fail(file_, "metadata key " + key(k) + " is out of range (" + std::to_string(*v) + ")");
    return static_cast<uint32_t>(*v);
  }
  float f32(std::string_view k, std::optional<float> fallback = std::nullopt) const {
    const auto v = md_.get_float(key(k));
    if (!v) {
      if (fallback) return *fallback;
      fail(file_, "missing metadata key " + key(k));
    }
    return static_cast<float>(*v);
  }
  [[noreturn]] void bad(std::string_view k, const std::string& why) const {
    fail(file_, "invalid metadata " + key(k) + ": " + why);
  }
  const std::string& file() const { return file_; }

 private:
  const gguf::Metadata& md_;
  std::string arch_;
  std::string file_;
};

}  // namespace

HParams HParams::from_gguf(const gguf::GgufModel& model) {
  HParams h;
  h.arch = model.architecture();
  const std::string file = model.paths().empty() ? "model" : model.paths().front();
  if (h.arch.empty()) fail(file, "missing metadata key general.architecture");
  if (h.arch == "qwen3moe") {
    h.rope_type = RopeType::Neox;
  } else if (h.arch == "llama") {
    h.rope_type = RopeType::Norm;
  } else {
    throw Error("unsupported architecture " + h.arch);
  }
  const KeyReader r(model, h.arch);

  h.n_embd = r.u32("embedding_length");
  h.n_layer = r.u32("block_count");
  h.n_head = r.u32("attention.head_count");
  h.n_head_kv = r.u32("attention.head_count_kv", h.n_head);
  if (h.n_embd == 0) r.bad("embedding_length", "must be > 0");
  if (h.n_layer == 0) r.bad("block_count", "must be > 0");
  if (h.n_head == 0) r.bad("attention.head_count", "must be > 0");
  if (h.n_head_kv == 0 || h.n_head % h.n_head_kv != 0)
    r.bad("attention.head_count_kv", std::to_string(h.n_head_kv) + " does not divide head_count " +
                                         std::to_string(h.n_head));
  const uint32_t default_hd = h.n_embd / h.n_head;
  h.head_dim = r.u32("attention.key_length", default_hd);
  h.head_dim_v = r.u32("attention.value_length", h.head_dim);
  if (h.head_dim == 0 || h.head_dim % 2 != 0) r.bad("attention.key_length", "head dimension must be even and > 0");
  if (h.head_dim_v == 0) r.bad("attention.value_length", "must be > 0");
  h.n_rot = r.u32("rope.dimension_count", h.head_dim);
  if (h.n_rot == 0 || h.n_rot > h.head_dim || h.n_rot % 2 != 0)
    r.bad("rope.dimension_count", std::to_string(h.n_rot) + " must be even and in (0, head dim " +
                                      std::to_string(h.head_dim) + "]");
  h.rope_theta = r.f32("rope.freq_base", 10000.0f);
  if (!(h.rope_theta > 0)) r.bad("rope.freq_base", "must be > 0");
  h.rms_eps = r.f32("attention.layer_norm_rms_epsilon", 1e-5f);
  if (!(h.rms_eps >= 0)) r.bad("attention.layer_norm_rms_epsilon", "must be >= 0");
  h.n_ctx_train = r.u32("context_length", 4096);

  h.n_expert = r.u32("expert_count", 0);
  h.n_expert_used = r.u32("expert_used_count", 0);
  h.n_ff = r.u32("feed_forward_length", 0);
  if (h.n_expert > 0) {
    if (h.n_expert_used == 0 || h.n_expert_used > h.n_expert)
      r.bad("expert_used_count", std::to_string(h.n_expert_used) + " must be in [1, expert_count " +
                                     std::to_string(h.n_expert) + "]");
    // qwen3moe names the expert hidden size separately; llama/Mixtral reuses feed_forward_length.
    h.n_ff_exp = r.u32("expert_feed_forward_length", h.n_ff);
    if (h.n_ff_exp == 0) r.bad("expert_feed_forward_length", "must be > 0");
  } else {
    if (h.arch == "qwen3moe") r.bad("expert_count", "qwen3moe needs experts");
    if (h.n_ff == 0) r.bad("feed_forward_length", "must be > 0 for a dense model");
  }

  const gguf::TensorInfo& embd = model.require("token_embd.weight");
  if (embd.ne.size() != 2 || embd.ne[0] != h.n_embd)
    fail(file, "tensor token_embd.weight has the wrong shape (expected {" + std::to_string(h.n_embd) + ", n_vocab})");
  if (embd.ne[1] == 0 || embd.ne[1] > 0x7fffffffull) fail(file, "tensor token_embd.weight has a bad vocabulary size");
  h.n_vocab = static_cast<uint32_t>(embd.ne[1]);
  return h;
}

}  // namespace sluice::model
