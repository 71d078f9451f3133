// The NextN/MTP head's outputs over a whole token sequence, computed exactly
// as shared/golden/README.md's MTP section specifies (llama.cpp's
// common_speculative draft-mtp): for `sluice logits --mtp-out/--mtp-chain-out`
// and the golden test.
//
//   h_p        the trunk's hidden state after output_norm at position p
//   draft row  MTP row p = (t_p, h_{p-1}), h_{-1} = 0, one causal pass over
//              p = 0..n-1; rows 1..n-1 are written (row p predicts t_{p+1})
//   chain      per anchor m = 1..n-1, with the head's cache holding the true
//              rows q < m: step 1 = (t_m, h_{m-1}) at position m; step k >= 2
//              = (d_{k-1}, g_{k-1}) at m+k-1, d = the argmax of the previous
//              step (or the teacher-forced token given), g its normalised output.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"

namespace sluice::runtime {

struct MtpTrace {
  int n_tokens = 0, n_vocab = 0, chain_k = 0;
  int width = 0;                    // floats per hidden row: Model::mtp_hidden_width()
  std::vector<float> trunk_logits;  // [n][n_vocab]
  std::vector<float> hidden;        // [n][width]: h_p
  std::vector<float> draft_logits;  // [n-1][n_vocab]: MTP rows 1..n-1
  std::vector<float> draft_g;       // [n-1][width]
  std::vector<float> chain;         // [n-1][chain_k][n_vocab]
  std::vector<int32_t> chain_tokens;  // [n-1][chain_k]: the tokens each step fed forward (its argmax or forced)
};

// Runs on a freshly reset model (it is reset first) loaded with
// ModelConfig::mtp. `forced` (optional, [n-1][chain_k - 1]): the draft tokens
// steps 2..K take instead of the previous step's argmax (teacher forcing, as
// the golden file's reference). Error for fewer than 2 tokens or a context
// shorter than n + chain_k.
MtpTrace mtp_trace(model::Model& m, std::span<const int32_t> tokens, int chain_k,
                   std::span<const int32_t> forced = {});

}  // namespace sluice::runtime
