#include <algorithm>
#include <cmath>
#include <set>

#include "gguf/expert_layout.h"
#include "model/arch.h"
#include "model/arch/tensor_plan.h"
#include "util/error.h"

namespace sluice::model {
namespace {

// "blk.N." -> N (nullopt for other names).
std::optional<uint64_t> block_index(std::string_view name) {
  constexpr std::string_view kBlk = "blk.";
  if (!name.starts_with(kBlk)) return std::nullopt;
  name.remove_prefix(kBlk.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos || dot > 9) return std::nullopt;
  uint64_t v = 0;
  for (char c : name.substr(0, dot)) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

}  // namespace

const char* router_kind_name(RouterKind k) {
  switch (k) {
    case RouterKind::SoftmaxAll: return "softmax";
    case RouterKind::SoftmaxSelected: return "softmax over the selected";
    case RouterKind::SigmoidBiased: return "sigmoid + selection bias";
    case RouterKind::SqrtSoftplus: return "sqrt-softplus + selection bias";
    case RouterKind::HashSqrtSoftplus: return "hash by token id, sqrt-softplus weights";
  }
  return "?";
}

bool trims_renormalize(const RouterDesc& r) { return r.normalize || r.kind == RouterKind::SoftmaxSelected; }

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::SwiGlu: return "swiglu";
    case Activation::SwiGluOai: return "swiglu-oai";
    case Activation::GeluTanh: return "geglu-tanh";
    case Activation::SwiGluClamped: return "swiglu-clamped";
  }
  return "?";
}

bool ArchDesc::ignores(std::string_view tensor) const {
  for (const std::string& pat : ignored) {
    if (pat == tensor) return true;
    if (std::string_view(pat).ends_with(".*") && !std::string_view(pat).starts_with("blk.*.") &&
        tensor.starts_with(std::string_view(pat).substr(0, pat.size() - 1)))
      return true;  // "blk.N.*": every tensor of layer N
    constexpr std::string_view kAnyLayer = "blk.*.";
    if (std::string_view(pat).starts_with(kAnyLayer) && block_index(tensor)) {
      const std::string_view suffix = std::string_view(pat).substr(kAnyLayer.size());
      const size_t dot = tensor.find('.', 4);
      if (tensor.substr(dot + 1) == suffix) return true;
    }
  }
  return false;
}

ArchReader::ArchReader(const gguf::GgufModel& model)
    : model_(model), arch_(model.architecture()), file_(model.paths().empty() ? "model" : model.paths().front()) {}

uint32_t ArchReader::u32(std::string_view k, std::optional<uint32_t> fallback) const {
  const auto v = model_.metadata().get_uint(key(k));
  if (!v) {
    if (fallback) return *fallback;
    fail(file_, "missing metadata key " + key(k));
  }
  if (*v > 0xffffffffull) bad(k, "out of range (" + std::to_string(*v) + ")");
  return static_cast<uint32_t>(*v);
}

float ArchReader::f32(std::string_view k, std::optional<float> fallback) const {
  const auto v = model_.metadata().get_float(key(k));
  if (!v) {
    if (fallback) return *fallback;
    fail(file_, "missing metadata key " + key(k));
  }
  const float f = static_cast<float>(*v);
  if (!std::isfinite(f)) bad(k, "must be a finite number (got " + std::to_string(*v) + ")");
  return f;
}

bool ArchReader::flag(std::string_view k, bool fallback) const {
  const auto v = model_.metadata().get_bool(key(k));
  return v ? *v : fallback;
}

std::optional<std::string> ArchReader::str(std::string_view k) const { return model_.metadata().get_string(key(k)); }

void ArchReader::bad(std::string_view k, const std::string& why) const {
  fail(file_, "invalid metadata " + key(k) + ": " + why);
}

HParams ArchReader::common() const {
  HParams h;
  h.arch = arch_;
  h.n_embd = u32("embedding_length");
  h.n_layer = u32("block_count");
  h.n_head = u32("attention.head_count");
  // A per-layer array (Gemma 4) is the architecture's to read; n_head_kv
  // then stays n_head and each layer declares its own (AttentionDesc).
  const gguf::Value* kv_heads = model_.metadata().find(key("attention.head_count_kv"));
  const bool per_layer_kv = kv_heads && kv_heads->type == gguf::ValueType::ARRAY;
  h.n_head_kv = per_layer_kv ? h.n_head : u32("attention.head_count_kv", h.n_head);
  // Sizes that size buffers before any tensor is bound (RoPE tables, scratch)
  // are bounded here, far above any real model.
  constexpr uint32_t kMaxWidth = 1u << 20, kMaxHeads = 1u << 16, kMaxHeadDim = 1u << 16;
  if (h.n_embd == 0 || h.n_embd > kMaxWidth) bad("embedding_length", "must be in 1.." + std::to_string(kMaxWidth));
  if (h.n_layer == 0) bad("block_count", "must be > 0");
  // The layer count sizes the layer table, the KV cache and the expert store:
  // it must match the blk.N tensors present before anything is sized by it.
  // Distinct indices, so the count is bounded by the tensors really present.
  std::set<uint64_t> blocks;
  for (const gguf::TensorInfo& t : model_.tensors())
    if (const auto il = block_index(t.name)) blocks.insert(*il);
  const uint64_t top = blocks.empty() ? 0 : *blocks.rbegin() + 1;
  if (blocks.size() != h.n_layer || top != h.n_layer)
    bad("block_count", std::to_string(h.n_layer) + " but the file has tensors for " + std::to_string(blocks.size()) +
                           " layers" + (blocks.empty() ? "" : " (highest blk." + std::to_string(top - 1) + ")"));
  if (h.n_head == 0 || h.n_head > kMaxHeads) bad("attention.head_count", "must be in 1.." + std::to_string(kMaxHeads));
  if (h.n_head_kv == 0 || h.n_head % h.n_head_kv != 0)
    bad("attention.head_count_kv",
        std::to_string(h.n_head_kv) + " does not divide head_count " + std::to_string(h.n_head));
  h.head_dim = u32("attention.key_length", h.n_embd / h.n_head);
  h.head_dim_v = u32("attention.value_length", h.head_dim);
  if (h.head_dim == 0 || h.head_dim % 2 != 0 || h.head_dim > kMaxHeadDim)
    bad("attention.key_length", "head dimension " + std::to_string(h.head_dim) + " must be even and in 2.." +
                                    std::to_string(kMaxHeadDim));
  if (h.head_dim_v == 0 || h.head_dim_v > kMaxHeadDim)
    bad("attention.value_length", "must be in 1.." + std::to_string(kMaxHeadDim));
  h.rope.n_rot = u32("rope.dimension_count", h.head_dim);
  if (h.rope.n_rot == 0 || h.rope.n_rot > h.head_dim || h.rope.n_rot % 2 != 0)
    bad("rope.dimension_count",
        std::to_string(h.rope.n_rot) + " must be even and in (0, head dim " + std::to_string(h.head_dim) + "]");
  h.rope.theta = f32("rope.freq_base", 10000.0f);
  if (!(h.rope.theta > 0)) bad("rope.freq_base", "must be > 0");
  if (const auto type = str("rope.scaling.type"); type && *type == "yarn") {
    h.rope.yarn_factor = f32("rope.scaling.factor");
    if (!(h.rope.yarn_factor >= 1.0f)) bad("rope.scaling.factor", "must be >= 1 for YaRN");
    h.rope.yarn_orig_ctx = u32("rope.scaling.original_context_length");
    if (h.rope.yarn_orig_ctx == 0) bad("rope.scaling.original_context_length", "must be > 0");
  } else if (type && *type != "none" && *type != "linear") {
    bad("rope.scaling.type", "'" + *type + "' is not supported (none, yarn)");
  }
  h.rms_eps = f32("attention.layer_norm_rms_epsilon", 1e-5f);
  if (!(h.rms_eps >= 0)) bad("attention.layer_norm_rms_epsilon", "must be >= 0");
  h.n_ctx_train = u32("context_length", 4096);

  h.n_expert = u32("expert_count", 0);
  h.n_expert_used = u32("expert_used_count", 0);
  h.n_ff = u32("feed_forward_length", 0);
  // Expert counts size the router, the cache and the trims: they must match
  // the expert tensors present.
  const std::vector<gguf::LayerExpertParts> parts = gguf::layer_expert_parts(model_);
  for (size_t il = 0; il < parts.size(); ++il) {
    if (!parts[il].present()) continue;
    if (parts[il].n_expert() != h.n_expert)
      bad("expert_count", std::to_string(h.n_expert) + " but tensor " + parts[il].part[gguf::kGate].tensor +
                              " holds " + std::to_string(parts[il].n_expert()) + " experts");
  }
  if (h.n_expert > 0) {
    const bool any = std::any_of(parts.begin(), parts.end(), [](const auto& p) { return p.present(); });
    if (!any) bad("expert_count", std::to_string(h.n_expert) + " but the file has no expert tensors");
    if (h.n_expert_used == 0 || h.n_expert_used > h.n_expert)
      bad("expert_used_count",
          std::to_string(h.n_expert_used) + " must be in [1, expert_count " + std::to_string(h.n_expert) + "]");
    h.n_ff_exp = u32("expert_feed_forward_length", h.n_ff);
    if (h.n_ff_exp == 0) bad("expert_feed_forward_length", "must be > 0");
  }

  const gguf::TensorInfo& embd = model_.require("token_embd.weight");
  if (embd.ne.size() != 2 || embd.ne[0] != h.n_embd)
    fail(file_, "tensor token_embd.weight has the wrong shape (expected {" + std::to_string(h.n_embd) + ", n_vocab})");
  if (embd.ne[1] == 0 || embd.ne[1] > 0x7fffffffull) fail(file_, "tensor token_embd.weight has a bad vocabulary size");
  h.n_vocab = static_cast<uint32_t>(embd.ne[1]);
  return h;
}

// The registry: one line per architecture in arch/registry.def.
#define SLUICE_ARCH(fn, synth, name) \
  ArchDesc fn(const ArchReader& r);   \
  extern const ArchSynth synth;
#include "model/arch/registry.def"
#undef SLUICE_ARCH

const std::vector<ArchEntry>& architectures() {
  static const std::vector<ArchEntry> all = {
#define SLUICE_ARCH(fn, synth, name) {name, fn, &synth},
#include "model/arch/registry.def"
#undef SLUICE_ARCH
  };
  return all;
}

std::string supported_architectures() {
  std::vector<std::string> names;
  for (const ArchEntry& e : architectures()) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

ArchDesc describe_architecture(const gguf::GgufModel& model) {
  const ArchReader r(model);
  if (r.arch().empty()) fail(r.file(), "missing metadata key general.architecture");
  for (const ArchEntry& e : architectures()) {
    if (r.arch() != e.name) continue;
    ArchDesc d = e.describe(r);
    // llama.cpp limits expert selection to the best groups for any
    // architecture whose file sets expert_group_count > 1; a description
    // that did not read the keys would route differently, silently.
    const uint32_t groups = r.u32("expert_group_count", 0);
    const bool read = std::any_of(d.layers.begin(), d.layers.end(),
                                  [](const LayerDesc& l) { return l.ffn.router.n_group > 0; });
    if (groups > 1 && r.u32("expert_group_used_count", 0) != groups && !read)
      r.bad("expert_group_count", std::to_string(groups) + " groups: group-limited expert selection is not supported for " +
                                      r.arch());
    if (d.layers.size() != d.hp.n_layer)
      throw Error("architecture " + r.arch() + " described " + std::to_string(d.layers.size()) + " layers, expected " +
                  std::to_string(d.hp.n_layer));
    return d;
  }
  fail(r.file(), "unsupported architecture " + r.arch() + " (supported: " + supported_architectures() + ")");
}

}  // namespace sluice::model
