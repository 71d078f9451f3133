#include "tools/inspect_report.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <string>

#include "gguf/expert_layout.h"

namespace sluice::tools {
namespace {

using nlohmann::json;

constexpr double kMiB = 1024.0 * 1024.0;

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json value_json(const gguf::Value& v) {
  using VT = gguf::ValueType;
  switch (v.type) {
    case VT::UINT8: case VT::UINT16: case VT::UINT32: case VT::UINT64: return v.u;
    case VT::INT8: case VT::INT16: case VT::INT32: case VT::INT64: return v.i;
    case VT::FLOAT32: case VT::FLOAT64: return v.f;
    case VT::BOOL: return v.u != 0;
    case VT::STRING: return v.s;
    case VT::ARRAY: {
      if (v.array.size() > 16)
        return json{{"array", std::string(gguf::value_type_name(v.elem_type))}, {"n", v.array.size()}};
      json a = json::array();
      for (const auto& e : v.array) a.push_back(value_json(e));
      return a;
    }
  }
  return nullptr;
}

std::string shape_str(const std::vector<uint64_t>& ne) {
  std::string s = "{";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

std::string mib(uint64_t bytes) {
  char buf[64];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (kMiB * 1024));
  else if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / kMiB);
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  return buf;
}

// "Q4_K_M (15)"; the bare number for a value llama.cpp does not name; "-" when absent.
std::string file_type_text(const std::optional<uint64_t>& ft) {
  if (!ft) return "-";
  const std::string name = file_type_name(*ft);
  return name.empty() ? std::to_string(*ft) : name + " (" + std::to_string(*ft) + ")";
}

template <typename T>
std::string show(const std::optional<T>& v) {
  if (!v) return "-";
  if constexpr (std::is_same_v<T, std::string>) return *v;
  else if constexpr (std::is_floating_point_v<T>) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", *v);
    return buf;
  } else return std::to_string(*v);
}

// "blk.12.ffn_up_exps.weight" -> "blk.N.ffn_up_exps.weight";
// expert-major "blk.12.ffn_up_exps.7.weight" -> "blk.N.ffn_up_exps.E.weight"
std::string family_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return name;
  if (const auto n = gguf::parse_expert_tensor_name(name); n && n->expert)
    return "blk.N." + std::string(gguf::kExpertPartStems[n->part]) + ".E.weight";
  size_t i = 4;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return "blk.N" + name.substr(i);
}

}  // namespace

json inspect_json(const ModelInfo& info, const gguf::Metadata& metadata) {
  const Hyperparameters& hp = info.hp;
  const Sizing& s = info.sizing;
  json j;
  j["architecture"] = info.architecture;
  j["name"] = info.file.name;
  j["block_count"] = opt(hp.block_count);
  j["expert_count"] = opt(hp.expert_count);
  j["expert_used_count"] = opt(hp.expert_used_count);
  j["embedding_length"] = opt(hp.embedding_length);
  j["vocab_size"] = opt(hp.vocab_size);
  j["dense_bytes"] = s.dense_bytes;
  j["expert_bytes"] = s.expert_bytes;
  j["expert_layout"] = info.file.expert_layout;
  j["token_demand_MiB"] = s.token_demand_bytes / kMiB;
  j["layer_demand_MiB"] = s.layer_demand_bytes / kMiB;
  j["min_ram_MiB"] = s.min_ram_bytes / kMiB;
  j["kv_context"] = s.kv_context;
  j["runnable"] = info.not_runnable.empty();
  if (!info.not_runnable.empty()) j["not_runnable"] = info.not_runnable;
  j["hyperparameters"] = {
      {"block_count", opt(hp.block_count)},
      {"context_length", opt(hp.context_length)},
      {"embedding_length", opt(hp.embedding_length)},
      {"feed_forward_length", opt(hp.feed_forward_length)},
      {"expert_feed_forward_length", opt(hp.expert_feed_forward_length)},
      {"expert_count", opt(hp.expert_count)},
      {"expert_used_count", opt(hp.expert_used_count)},
      {"head_count", opt(hp.head_count)},
      {"head_count_kv", opt(hp.head_count_kv)},
      {"key_length", opt(hp.key_length)},
      {"value_length", opt(hp.value_length)},
      {"head_dim_k", hp.head_dim_k},
      {"head_dim_v", hp.head_dim_v},
      {"rope_freq_base", opt(hp.rope_freq_base)},
      {"rope_scaling_type", opt(hp.rope_scaling_type)},
      {"rope_scaling_factor", opt(hp.rope_scaling_factor)},
      {"rms_eps", opt(hp.rms_eps)},
      {"vocab_size", opt(hp.vocab_size)},
  };
  j["tokenizer"] = {{"model", info.tokenizer.model},       {"pre", info.tokenizer.pre},
                    {"n_tokens", info.tokenizer.n_tokens}, {"n_merges", info.tokenizer.n_merges},
                    {"bos_id", opt(info.tokenizer.bos_id)}, {"eos_id", opt(info.tokenizer.eos_id)}};
  j["file"] = {{"paths", info.file.paths},         {"version", info.file.version},
               {"alignment", info.file.alignment}, {"data_offset", info.file.data_offset},
               {"bytes", info.file.file_bytes},    {"n_metadata", info.file.n_metadata},
               {"file_type", opt(info.file.file_type)}, {"file_type_name", info.file.file_type ? json(file_type_name(*info.file.file_type)) : json(nullptr)},
               {"n_tensors", info.tensors.size()}};
  json layers = json::array();
  for (const auto& l : s.layers)
    layers.push_back({{"layer", l.layer},
                      {"n_expert", l.n_expert},
                      {"expert_tensor_bytes", l.expert_tensor_bytes},
                      {"per_expert_bytes", l.per_expert_bytes}});
  j["sizing"] = {{"dense_bytes", s.dense_bytes},
                 {"expert_bytes", s.expert_bytes},
                 {"total_bytes", s.total_bytes},
                 {"top_k", s.top_k},
                 {"token_demand_bytes", s.token_demand_bytes},
                 {"layer_demand_bytes", s.layer_demand_bytes},
                 {"decode_read_bytes", s.decode_read_bytes},
                 {"kv_context", s.kv_context},
                 {"kv_bytes", s.kv_bytes},
                 {"kv_layout", s.kv_layout},
                 {"recurrent_bytes", s.recurrent_bytes},
                 {"indexer_bytes", s.indexer_bytes},
                 {"compressed_bytes", s.compressed_bytes},
                 {"not_loaded_bytes", s.not_loaded_bytes},
                 {"scratch_bytes", s.scratch_bytes},
                 {"min_ram_bytes", s.min_ram_bytes},
                 {"layers", layers}};
  json tensors = json::array();
  for (const auto& t : info.tensors)
    tensors.push_back({{"name", t.name},
                       {"type", std::string(ggml_type_name(t.type))},
                       {"shape", t.ne},
                       {"offset", t.offset},
                       {"bytes", t.bytes},
                       {"split", t.split}});
  j["tensors"] = std::move(tensors);
  json md = json::object();
  for (const auto& [k, v] : metadata.entries()) md[k] = value_json(v);
  j["metadata"] = std::move(md);
  return j;
}

std::string inspect_text(const ModelInfo& info, bool full_tensors) {
  const Hyperparameters& hp = info.hp;
  const Sizing& s = info.sizing;
  std::string out;
  auto line = [&](const std::string& k, const std::string& v) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "  %-28s %s\n", k.c_str(), v.c_str());
    out += buf;
  };
  out += "model\n";
  for (const auto& p : info.file.paths) line("file", p);
  line("architecture", info.architecture.empty() ? "(none)" : info.architecture);
  if (!info.not_runnable.empty()) line("runs with sluice", "no: " + info.not_runnable);
  if (!info.file.name.empty()) line("name", info.file.name);
  line("gguf version / alignment", std::to_string(info.file.version) + " / " + std::to_string(info.file.alignment));
  line("file size", mib(info.file.file_bytes));
  line("metadata keys / tensors", std::to_string(info.file.n_metadata) + " / " + std::to_string(info.tensors.size()));
  line("file_type", file_type_text(info.file.file_type));
  line("expert layout", info.file.expert_layout);

  out += "hyperparameters\n";
  line("block_count", show(hp.block_count));
  line("embedding_length", show(hp.embedding_length));
  line("context_length", show(hp.context_length));
  line("feed_forward_length", show(hp.feed_forward_length));
  line("expert_feed_forward_length", show(hp.expert_feed_forward_length));
  line("experts (used / total)", show(hp.expert_used_count) + " / " + show(hp.expert_count));
  line("heads (q / kv)", show(hp.head_count) + " / " + show(hp.head_count_kv));
  if (!info.layer_mixers.empty()) line("layer mixers", info.layer_mixers);
  line("head dim (k / v)", std::to_string(hp.head_dim_k) + " / " + std::to_string(hp.head_dim_v));
  line("rope freq base", show(hp.rope_freq_base));
  if (hp.rope_scaling_type || hp.rope_scaling_factor)
    line("rope scaling", show(hp.rope_scaling_type) + " x" + show(hp.rope_scaling_factor));
  line("rms eps", show(hp.rms_eps));
  line("vocab_size", show(hp.vocab_size));

  const TokenizerSummary& tk = info.tokenizer;
  out += "tokenizer\n";
  line("model / pre", (tk.model.empty() ? "-" : tk.model) + " / " + (tk.pre.empty() ? "-" : tk.pre));
  line("tokens / merges", std::to_string(tk.n_tokens) + " / " + std::to_string(tk.n_merges));
  line("bos / eos", show(tk.bos_id) + " / " + show(tk.eos_id));

  out += "sizing\n";
  line("dense (resident)", mib(s.dense_bytes));
  line("experts (streamed)", mib(s.expert_bytes));
  if (!s.layers.empty()) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const auto& l : s.layers) lo = std::min(lo, l.per_expert_bytes), hi = std::max(hi, l.per_expert_bytes);
    line("one expert", lo == hi ? mib(lo) : mib(lo) + " .. " + mib(hi));
  }
  line("token demand (top-" + std::to_string(s.top_k) + ")", mib(s.token_demand_bytes));
  line("layer demand", mib(s.layer_demand_bytes));
  line("read per decode token", mib(s.decode_read_bytes) + " (all resident)");
  line("KV cache (f16, ctx " + std::to_string(s.kv_context) + ")",
       mib(s.kv_bytes) + (s.kv_layout == "mla-latent" ? " (MLA latent rows)" : ""));
  if (s.compressed_bytes > 0) line("  of which compressed blocks", mib(s.compressed_bytes));
  if (s.indexer_bytes > 0) line("  of which DSA indexer keys", mib(s.indexer_bytes));
  if (s.recurrent_bytes > 0) line("recurrent state (f32)", mib(s.recurrent_bytes));
  if (s.not_loaded_bytes > 0) line("not loaded (NextN/MTP)", mib(s.not_loaded_bytes));
  line("scratch", mib(s.scratch_bytes));
  line("min RAM", mib(s.min_ram_bytes));

  out += full_tensors ? "tensors\n" : "tensors (by family; --tensors lists each)\n";
  char buf[512];
  if (full_tensors) {
    for (const auto& t : info.tensors) {
      std::snprintf(buf, sizeof buf, "  %-34s %-6s %-22s off %12" PRIu64 "  %s\n", t.name.c_str(),
                    std::string(ggml_type_name(t.type)).c_str(), shape_str(t.ne).c_str(), t.offset,
                    mib(t.bytes).c_str());
      out += buf;
    }
  } else {
    struct Family { size_t count = 0; uint64_t bytes = 0; std::map<std::string, size_t> types; std::vector<uint64_t> ne; };
    std::vector<std::string> order;
    std::map<std::string, Family> fam;
    for (const auto& t : info.tensors) {
      const std::string f = family_of(t.name);
      auto [it, inserted] = fam.try_emplace(f);
      if (inserted) order.push_back(f), it->second.ne = t.ne;
      it->second.count++;
      it->second.bytes += t.bytes;
      it->second.types[std::string(ggml_type_name(t.type))]++;
    }
    for (const auto& f : order) {
      const Family& x = fam[f];
      std::string types;
      for (const auto& [ty, n] : x.types) types += (types.empty() ? "" : ",") + ty;
      std::snprintf(buf, sizeof buf, "  %-34s x%-4zu %-10s %-22s %s\n", f.c_str(), x.count, types.c_str(),
                    shape_str(x.ne).c_str(), mib(x.bytes).c_str());
      out += buf;
    }
  }
  return out;
}

}  // namespace sluice::tools
