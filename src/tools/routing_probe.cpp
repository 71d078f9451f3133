#include "tools/routing_probe.h"

#include <algorithm>
#include <memory>
#include <cmath>
#include <numeric>

#include "io/file.h"
#include "kernels/quant.h"
#include "util/error.h"

namespace sluice::tools {
namespace {

// Reads rows [r0, r0 + n) of a tensor as floats.
std::vector<float> read_rows(const std::vector<std::unique_ptr<io::File>>& files, const gguf::TensorInfo& t,
                             uint64_t r0, uint64_t n) {
  const uint64_t row_bytes = t.row_bytes();
  std::vector<uint8_t> raw(row_bytes * n);
  const auto& file = files.at(t.split);
  file->read_exact(raw.data(), raw.size(), t.offset + r0 * row_bytes);
  std::vector<float> out(t.ne[0] * n);
  for (uint64_t r = 0; r < n; ++r)
    kernels::dequantize_row(t.type, raw.data() + r * row_bytes, out.data() + r * t.ne[0],
                            static_cast<int64_t>(t.ne[0]));
  return out;
}

}  // namespace

double RoutingStats::top_share() const {
  const uint64_t total = n_tokens * top_k;
  if (total == 0 || hits.empty()) return 0;
  return static_cast<double>(*std::max_element(hits.begin(), hits.end())) / static_cast<double>(total);
}

RoutingStats probe_routing(const gguf::GgufModel& model, uint32_t layer, uint64_t max_tokens) {
  const std::string arch = model.architecture();
  const std::string blk = "blk." + std::to_string(layer) + ".";
  const gguf::TensorInfo& embd = model.require("token_embd.weight");
  const gguf::TensorInfo& router = model.require(blk + "ffn_gate_inp.weight");
  // The RMSNorm in front of the router: ffn_norm, or gpt-oss's post_attention_norm.
  const gguf::TensorInfo* norm_p = model.find(blk + "ffn_norm.weight");
  if (!norm_p) norm_p = model.find(blk + "post_attention_norm.weight");
  const gguf::TensorInfo& norm = norm_p ? *norm_p : model.require(blk + "ffn_norm.weight");  // throws naming it
  const gguf::TensorInfo* bias = model.find(blk + "ffn_gate_inp.bias");  // gpt-oss
  const uint64_t n_embd = embd.ne[0];
  if (router.ne.size() != 2 || router.ne[0] != n_embd || norm.ne[0] != n_embd || embd.ne.size() != 2)
    fail(model.paths().front(), "routing probe: shapes of token_embd, " + router.name + " and " + norm.name +
                                    " do not agree");
  const double eps = model.metadata().get_float(arch + ".attention.layer_norm_rms_epsilon").value_or(1e-6);

  RoutingStats st;
  st.layer = layer;
  st.n_expert = static_cast<uint32_t>(router.ne[1]);
  st.top_k = static_cast<uint32_t>(model.metadata().get_uint(arch + ".expert_used_count").value_or(1));
  st.top_k = std::min(st.top_k, st.n_expert);
  st.hits.assign(st.n_expert, 0);

  std::vector<std::unique_ptr<io::File>> files;
  for (const auto& p : model.paths()) files.push_back(io::open_file(p));
  const std::vector<float> w = read_rows(files, router, 0, st.n_expert);
  const std::vector<float> g = read_rows(files, norm, 0, 1);
  std::vector<float> b(st.n_expert, 0.0f);
  if (bias) {
    if (bias->ne[0] != st.n_expert) fail(model.paths().front(), "routing probe: " + bias->name + " has the wrong length");
    b = read_rows(files, *bias, 0, 1);
  }
  const uint64_t n_vocab = embd.ne[1];
  const uint64_t n = std::min(max_tokens, n_vocab);
  std::vector<float> logits(st.n_expert);
  std::vector<uint32_t> idx(st.n_expert);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t tok = i * n_vocab / n;
    std::vector<float> x = read_rows(files, embd, tok, 1);
    double ss = 0;
    for (float v : x) ss += double{v} * v;
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / n_embd + eps));
    for (uint64_t k = 0; k < n_embd; ++k) x[k] *= scale * g[k];
    for (uint32_t e = 0; e < st.n_expert; ++e) {
      double acc = b[e];
      for (uint64_t k = 0; k < n_embd; ++k) acc += double{w[e * n_embd + k]} * x[k];
      logits[e] = static_cast<float>(acc);
    }
    std::iota(idx.begin(), idx.end(), 0u);
    std::partial_sort(idx.begin(), idx.begin() + st.top_k, idx.end(),
                      [&](uint32_t a, uint32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (uint32_t k = 0; k < st.top_k; ++k) ++st.hits[idx[k]];
  }
  st.n_tokens = n;
  return st;
}

}  // namespace sluice::tools
