#include "runtime/mtp_trace.h"

#include <algorithm>
#include <string>

#include "runtime/sampler.h"
#include "util/error.h"

namespace sluice::runtime {

MtpTrace mtp_trace(model::Model& m, std::span<const int32_t> tokens, int chain_k, std::span<const int32_t> forced) {
  if (!m.has_mtp()) throw Error("--mtp-out: the model was loaded without its NextN/MTP head");
  const int n = static_cast<int>(tokens.size());
  if (n < 2) throw Error("--mtp-out: needs at least 2 tokens (got " + std::to_string(n) + ")");
  if (chain_k < 0) throw Error("--mtp-chain-k: must be >= 0");
  if (n + chain_k > m.n_ctx())
    throw Error("--mtp-chain-k: " + std::to_string(n) + " tokens + " + std::to_string(chain_k) +
                " chained steps exceed the context of " + std::to_string(m.n_ctx()) + " (raise -c)");
  if (!forced.empty() && forced.size() != static_cast<size_t>(n - 1) * std::max(chain_k - 1, 0))
    throw Error("mtp_trace: forced tokens must be [n-1][chain_k-1]");
  MtpTrace t;
  t.n_tokens = n;
  t.n_vocab = static_cast<int>(m.hparams().n_vocab);
  t.width = static_cast<int>(m.mtp_hidden_width());
  t.chain_k = chain_k;
  const size_t V = static_cast<size_t>(t.n_vocab), E = static_cast<size_t>(t.width), N = static_cast<size_t>(n);
  m.reset();
  t.trunk_logits.resize(N * V);
  t.hidden.resize(N * E);
  m.eval_hidden(tokens, 0, t.trunk_logits.data(), t.hidden.data(), true);

  // One causal pass over MTP rows (t_p, h_{p-1}).
  std::vector<float> shifted(N * E, 0.0f);
  std::copy(t.hidden.begin(), t.hidden.end() - static_cast<std::ptrdiff_t>(E), shifted.begin() + static_cast<std::ptrdiff_t>(E));
  std::vector<float> logits(N * V), g(N * E);
  m.mtp_eval(tokens, shifted.data(), 0, logits.data(), g.data(), true);
  t.draft_logits.assign(logits.begin() + static_cast<std::ptrdiff_t>(V), logits.end());
  t.draft_g.assign(g.begin() + static_cast<std::ptrdiff_t>(E), g.end());
  if (chain_k == 0) return t;

  // Chains: the cache holds the true rows q < m (row 0 from the pass above,
  // each anchor's step 1 is the true row m); later steps are truncated.
  t.chain.resize((N - 1) * static_cast<size_t>(chain_k) * V);
  t.chain_tokens.resize((N - 1) * static_cast<size_t>(chain_k));
  std::vector<float> step_logits(V), step_g(E), prev_g(E);
  for (int a = 1; a < n; ++a) {
    int32_t token = tokens[static_cast<size_t>(a)];
    const float* hid = &t.hidden[static_cast<size_t>(a - 1) * E];
    for (int k = 0; k < chain_k; ++k) {
      const int32_t one[1] = {token};
      if (m.mtp_n_past() > a + k) m.mtp_truncate(a + k);  // the previous chain's draft rows
      m.mtp_eval(one, hid, a + k, step_logits.data(), step_g.data(), true);
      const size_t row = static_cast<size_t>(a - 1) * static_cast<size_t>(chain_k) + static_cast<size_t>(k);
      std::copy(step_logits.begin(), step_logits.end(), t.chain.begin() + static_cast<std::ptrdiff_t>(row * V));
      const int32_t next = !forced.empty() && k + 1 < chain_k
                               ? forced[static_cast<size_t>(a - 1) * static_cast<size_t>(chain_k - 1) + static_cast<size_t>(k)]
                               : argmax(step_logits);
      t.chain_tokens[row] = next;
      token = next;
      prev_g = step_g;
      hid = prev_g.data();
    }
  }
  return t;
}

}  // namespace sluice::runtime
