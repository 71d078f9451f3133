#include "tools/model_info.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>

#include "gguf/expert_layout.h"
#include "model/arch.h"
#include "model/state/state_spec.h"
#include "moe/cache_budget.h"
#include "util/error.h"

namespace sluice::tools {
namespace {

// An unsigned key that may also be a per-layer array (e.g. head_count_kv in
// some architectures): arrays report their maximum.
std::optional<uint64_t> uint_key(const gguf::Metadata& md, const std::string& key) {
  const gguf::Value* v = md.find(key);
  if (!v) return std::nullopt;
  if (v->type == gguf::ValueType::ARRAY) {
    const auto a = md.get_int_array(key);
    if (!a || a->empty()) return std::nullopt;
    return static_cast<uint64_t>(std::max<int64_t>(0, *std::max_element(a->begin(), a->end())));
  }
  return md.get_uint(key);
}

uint64_t array_size(const gguf::Metadata& md, const char* key) {
  const gguf::Value* v = md.find(key);
  return v && v->type == gguf::ValueType::ARRAY ? v->array.size() : 0;
}

// Layer index of "blk.N.*", or -1.
int64_t layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return -1;
  int64_t n = 0;
  size_t i = 4;
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) n = n * 10 + (name[i] - '0');
  return n;
}

Hyperparameters read_hparams(const gguf::GgufModel& model, const std::string& arch) {
  const gguf::Metadata& md = model.metadata();
  const std::string p = arch + ".";
  Hyperparameters hp;
  hp.block_count = uint_key(md, p + "block_count");
  hp.context_length = uint_key(md, p + "context_length");
  hp.embedding_length = uint_key(md, p + "embedding_length");
  hp.feed_forward_length = uint_key(md, p + "feed_forward_length");
  hp.expert_feed_forward_length = uint_key(md, p + "expert_feed_forward_length");
  hp.expert_count = uint_key(md, p + "expert_count");
  hp.expert_used_count = uint_key(md, p + "expert_used_count");
  hp.head_count = uint_key(md, p + "attention.head_count");
  hp.head_count_kv = uint_key(md, p + "attention.head_count_kv");
  hp.key_length = uint_key(md, p + "attention.key_length");
  hp.value_length = uint_key(md, p + "attention.value_length");
  hp.rope_freq_base = md.get_float(p + "rope.freq_base");
  hp.rope_scaling_factor = md.get_float(p + "rope.scaling.factor");
  hp.rope_scaling_type = md.get_string(p + "rope.scaling.type");
  hp.rms_eps = md.get_float(p + "attention.layer_norm_rms_epsilon");
  if (!hp.rms_eps) hp.rms_eps = md.get_float(p + "attention.layer_norm_epsilon");

  if (!hp.head_count_kv) hp.head_count_kv = hp.head_count;  // llama.cpp's default
  uint64_t derived = 0;
  if (hp.embedding_length && hp.head_count && *hp.head_count > 0) derived = *hp.embedding_length / *hp.head_count;
  hp.head_dim_k = hp.key_length.value_or(derived);
  hp.head_dim_v = hp.value_length.value_or(hp.head_dim_k);

  hp.vocab_size = uint_key(md, p + "vocab_size");
  if (!hp.vocab_size) {
    if (const gguf::TensorInfo* t = model.find("token_embd.weight"); t && t->ne.size() >= 2)
      hp.vocab_size = t->ne[1];
    else if (uint64_t n = array_size(md, "tokenizer.ggml.tokens"))
      hp.vocab_size = n;
  }
  if (!hp.block_count) {  // fall back to the tensors' layer indices
    int64_t max_layer = -1;
    for (const auto& t : model.tensors()) max_layer = std::max(max_layer, layer_of(t.name));
    if (max_layer >= 0) hp.block_count = static_cast<uint64_t>(max_layer + 1);
  }
  return hp;
}

TokenizerSummary read_tokenizer(const gguf::Metadata& md) {
  TokenizerSummary t;
  t.model = md.get_string("tokenizer.ggml.model").value_or("");
  t.pre = md.get_string("tokenizer.ggml.pre").value_or("");
  t.n_tokens = array_size(md, "tokenizer.ggml.tokens");
  t.n_merges = array_size(md, "tokenizer.ggml.merges");
  t.bos_id = uint_key(md, "tokenizer.ggml.bos_token_id");
  t.eos_id = uint_key(md, "tokenizer.ggml.eos_token_id");
  return t;
}

// `desc`: the architecture's declaration when sluice runs it (null otherwise):
// tensors it ignores (NextN/MTP blocks) are not loaded and counted apart, and
// the model state (KV rows, recurrent state) is sized as the engine sizes it.
Sizing compute_sizing(const ModelInfo& info, uint64_t kv_context, const model::ArchDesc* desc) {
  Sizing s;
  s.kv_context = kv_context;
  std::map<uint32_t, LayerSizing> layers;
  for (const auto& t : info.tensors) {
    s.total_bytes += t.bytes;
    if (desc && desc->ignores(t.name)) {
      s.not_loaded_bytes += t.bytes;
      continue;
    }
    if (!gguf::is_expert_tensor_name(t.name) || t.ne.empty()) {
      s.dense_bytes += t.bytes;
      continue;
    }
    s.expert_bytes += t.bytes;
    const int64_t l = layer_of(t.name);
    LayerSizing& ls = layers[static_cast<uint32_t>(std::max<int64_t>(l, 0))];
    ls.layer = static_cast<uint32_t>(std::max<int64_t>(l, 0));
    if (const auto n = gguf::parse_expert_tensor_name(t.name); n && n->expert) {
      // Expert-major: one tensor per expert and part; every expert's match
      // (gguf::layer_expert_parts validates that), so expert 0 gives the size.
      ls.n_expert = std::max(ls.n_expert, *n->expert + 1);
      ls.expert_tensor_bytes += t.bytes;
      if (*n->expert == 0) ls.per_expert_bytes += t.bytes;
      continue;
    }
    const uint64_t n_expert = t.ne.back();  // experts are the outermost dimension
    ls.n_expert = std::max(ls.n_expert, n_expert);
    ls.expert_tensor_bytes += t.bytes;
    if (n_expert > 0) ls.per_expert_bytes += t.bytes / n_expert;
  }
  const Hyperparameters& hp = info.hp;
  s.top_k = hp.expert_used_count.value_or(0);
  std::vector<moe::MoeLayerShape> shapes;
  for (const auto& [l, ls] : layers) {
    s.layers.push_back(ls);
    shapes.push_back({.expert_bytes = ls.per_expert_bytes,
                      .n_expert = static_cast<int>(std::min<uint64_t>(ls.n_expert, INT32_MAX)),
                      .top_k = static_cast<int>(std::min<uint64_t>(s.top_k, INT32_MAX))});
  }
  // The engine's own definitions (moe/cache_budget.h), so inspect and run agree.
  s.token_demand_bytes = moe::token_demand_bytes(shapes);
  s.layer_demand_bytes = moe::cache_floor_bytes(shapes, 1);
  s.decode_read_bytes = s.dense_bytes + s.token_demand_bytes;
  const auto named = [&](std::string_view name) {
    const auto it = std::find_if(info.tensors.begin(), info.tensors.end(), [&](const TensorRow& t) { return t.name == name; });
    return it == info.tensors.end() ? nullptr : &*it;
  };
  if (const TensorRow* embd = named("token_embd.weight"); embd && named("output.weight") && embd->ne.size() >= 2 &&
                                                          embd->ne[1] > 0 && embd->bytes <= s.decode_read_bytes) {
    s.decode_read_bytes -= embd->bytes - embd->bytes / embd->ne[1];  // a lookup reads one row
  }
  if (desc) {
    // The engine's own sizing (model/state/state_spec.h): what `run` allocates
    // at this context with the default f16 KV rows and --ubatch (sliding-window
    // rings), the trunk's layers.
    const int ctx = static_cast<int>(std::min<uint64_t>(kv_context, INT32_MAX));
    const std::optional<model::StateBytes> b =
        model::state_bytes(model::model_state_specs(*desc, ctx, model::kDefaultUbatch), model::KvType::F16);
    s.kv_bytes = b ? b->kv : UINT64_MAX;
    s.recurrent_bytes = b ? b->recurrent : 0;
    s.indexer_bytes = b ? b->indexer : 0;
    s.compressed_bytes = b ? b->compressed : 0;
    s.kv_layout = desc->hp.mla ? "mla-latent" : "per-head";
  } else {
    s.kv_bytes = hp.block_count.value_or(0) * kv_context * hp.head_count_kv.value_or(0) *
                 (hp.head_dim_k + hp.head_dim_v) * 2;
  }
  const uint64_t n_ff = hp.expert_feed_forward_length.value_or(hp.feed_forward_length.value_or(0));
  const uint64_t ff_width = s.top_k > 0 ? s.top_k * n_ff : n_ff;
  s.scratch_bytes = 4 * (hp.vocab_size.value_or(0) + hp.head_count.value_or(0) * kv_context +
                         8 * hp.embedding_length.value_or(0) + 3 * ff_width);
  s.min_ram_bytes = s.dense_bytes + s.layer_demand_bytes + s.kv_bytes + s.recurrent_bytes + s.scratch_bytes;
  return s;
}

// A stack of sliding-window and full attention layers (gpt-oss, gemma4):
// "sliding-window x4 (window 8; 2 kv heads x 64), full attention x2 (blk 2, 5;
// 1 kv head x 128)"; the geometry only where a layer declares its own. ""
// when no layer has a window.
// deepseek4: the window and, per compress ratio, the layers that attend compressed blocks.
std::string dsv4_mixers(const model::ArchDesc& d) {
  std::string by_ratio[3];  // 0, 4, 128
  size_t n[3] = {0, 0, 0};
  for (size_t il = 0; il < d.layers.size(); ++il) {
    const uint32_t r = d.layers[il].attn.compress_ratio;
    const int k = r == 0 ? 0 : r == 4 ? 1 : 2;
    by_ratio[k] += (n[k]++ ? ", " : "") + std::to_string(il);
  }
  static constexpr const char* kNames[] = {"window only", "CSA ratio 4 + indexer top-",
                                           "HCA ratio 128"};
  std::string s =
      "sliding-window " + std::to_string(d.layers.empty() ? 0 : d.layers[0].attn.window) + " +";
  for (int k = 0; k < 3; ++k) {
    if (n[k] == 0) continue;
    s += std::string(k == 0 || s.back() == '+' ? " " : ", ") + kNames[k] +
         (k == 1 ? std::to_string(d.hp.dsa.top_k) : "") + " x" + std::to_string(n[k]) + " (blk " +
         by_ratio[k] + ")";
  }
  return s + "; " + std::to_string(d.hp.dsv4.hc_count) + " hyper-connection streams";
}

std::string window_mixers(const model::ArchDesc& d) {
  if (d.hp.dsv4.hc_count > 0) return dsv4_mixers(d);
  size_t n_swa = 0, n_full = 0;
  std::string full_blocks;
  const model::AttentionDesc* swa = nullptr;
  const model::AttentionDesc* full = nullptr;
  for (size_t il = 0; il < d.layers.size(); ++il) {
    const model::AttentionDesc& a = d.layers[il].attn;
    if (a.window > 0) {
      ++n_swa;
      swa = &a;
    } else {
      full_blocks += (n_full++ ? ", " : "") + std::to_string(il);
      full = &a;
    }
  }
  if (n_swa == 0) return "";
  auto geometry = [](const model::AttentionDesc* a) -> std::string {
    if (!a || a->head_dim == 0) return "";
    return "; " + std::to_string(a->n_head_kv) + (a->n_head_kv == 1 ? " kv head x " : " kv heads x ") +
           std::to_string(a->head_dim);
  };
  std::string s = "sliding-window x" + std::to_string(n_swa) + " (window " + std::to_string(swa->window) +
                  geometry(swa) + ")";
  if (n_full > 0)
    s += ", full attention x" + std::to_string(n_full) + " (blk " + full_blocks + geometry(full) + ")";
  return s;
}

}  // namespace

ModelInfo model_info(const gguf::GgufModel& model, uint64_t kv_context) {
  ModelInfo info;
  const gguf::Metadata& md = model.metadata();
  info.architecture = model.architecture();
  info.file.paths = model.paths();
  const gguf::ParsedFile& first = model.split(0);
  info.file.version = first.version;
  info.file.alignment = first.alignment;
  info.file.data_offset = first.data_offset;
  for (uint32_t i = 0; i < model.n_splits(); ++i) info.file.file_bytes += model.split(i).file_size;
  info.file.n_metadata = md.entries().size();
  info.file.file_type = uint_key(md, "general.file_type");
  info.file.name = md.get_string("general.name").value_or("");
  info.file.expert_layout = gguf::expert_layout_name(gguf::expert_layout(model));

  info.hp = read_hparams(model, info.architecture);
  info.tokenizer = read_tokenizer(md);
  for (const auto& t : model.tensors()) info.tensors.push_back({t.name, t.type, t.ne, t.split, t.offset, t.bytes});
  std::optional<model::ArchDesc> desc;
  try {
    desc = model::describe_architecture(model);
  } catch (const Error& e) {
    info.not_runnable = e.what();  // inspect still describes what it can
  }
  if (kv_context == 0) {
    const uint64_t train = desc ? desc->hp.n_ctx_train
                                : info.hp.context_length.value_or(static_cast<uint64_t>(model::kDefaultContextCap));
    kv_context = static_cast<uint64_t>(model::resolve_context(0, static_cast<uint32_t>(std::min<uint64_t>(train, UINT32_MAX))));
  }
  info.sizing = compute_sizing(info, kv_context, desc ? &*desc : nullptr);
  if (desc) {
    std::string attention;
    size_t n_attention = 0;
    const char* recurrent = "gated-deltanet";  // the recurrent mixer of a hybrid stack
    for (size_t il = 0; il < desc->layers.size(); ++il) {
      const model::AttentionKind k = desc->layers[il].attn.kind;
      if (k == model::AttentionKind::ShortConv) recurrent = "short-conv";
      if (k == model::AttentionKind::Kda) recurrent = "kimi-delta";
      if (k != model::AttentionKind::DeltaNet && k != model::AttentionKind::ShortConv &&
          k != model::AttentionKind::Kda)
        attention += (n_attention++ ? ", " : "") + std::to_string(il);
    }
    const size_t n_delta = desc->layers.size() - n_attention;
    if (n_delta > 0)
      info.layer_mixers = std::string(recurrent) + " x" + std::to_string(n_delta) + ", attention x" +
                          std::to_string(n_attention) + (n_attention ? " (blk " + attention + ")" : "");
    if (n_delta == 0) info.layer_mixers = window_mixers(*desc);
  }
  return info;
}

std::string file_type_name(uint64_t file_type) {
  // llama_ftype (llama.h); 4-6 and 33-35 are retired there.
  static constexpr const char* kNames[] = {
      "F32",     "F16",    "Q4_0",    "Q4_1",    "",       "",       "",       "Q8_0",   "Q5_0",   "Q5_1",
      "Q2_K",    "Q3_K_S", "Q3_K_M",  "Q3_K_L",  "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",   "IQ2_XXS",
      "IQ2_XS",  "Q2_K_S", "IQ3_XS",  "IQ3_XXS", "IQ1_S",  "IQ4_NL", "IQ3_S",  "IQ3_M",  "IQ2_S",  "IQ2_M",
      "IQ4_XS",  "IQ1_M",  "BF16",    "",        "",       "",       "TQ1_0",  "TQ2_0",  "MXFP4_MOE"};
  return file_type < std::size(kNames) ? kNames[file_type] : "";
}

}  // namespace sluice::tools
