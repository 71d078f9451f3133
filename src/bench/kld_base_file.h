// llama-perplexity's base log-probabilities file (`--kl-divergence-base FILE`):
// one run writes the full-precision model's log-probabilities at every scored
// position, a later `--kl-divergence` run of a trimmed or quantized model reads
// them and reports KL divergence, top-1 agreement and the probability shift.
// sluice reads files llama-perplexity (llama.cpp b10573) wrote and writes files
// it reads, so either engine can be the base.
//
// Layout, little-endian, exactly as tools/perplexity of llama.cpp b10573 has it:
//   char[8]  "_logits_"
//   int32    n_ctx, n_vocab, n_chunk
//   int32    tokens[n_chunk * n_ctx]   the evaluated stream, before the BOS that
//                                      replaces each chunk's first token
//   n_chunk x scored_rows(n_ctx) rows of row_u16(n_vocab) uint16 each:
//     u16[0..3] hold two floats, scale and min_log_prob; then n_vocab quantized
//     log-probabilities q_i with log p_i = scale * q_i + min_log_prob (q_i = 0
//     for logits more than 16 below the maximum), then padding.
// A row predicts the next token of its chunk; the scored rows of a chunk are
// positions n_ctx/2 .. n_ctx-2 (the first half of a chunk is only context).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/file.h"
#include "io/output_file.h"

namespace sluice::bench {

struct KldBaseHeader {
  int32_t n_ctx = 0;
  int32_t n_vocab = 0;
  int32_t n_chunk = 0;
};

// uint16 values per stored row for a vocabulary of n_vocab.
size_t kld_row_u16(int32_t n_vocab);
// Scored rows per chunk of n_ctx positions: n_ctx - 1 - n_ctx / 2.
int32_t kld_scored_rows(int32_t n_ctx);

// Quantizes one logits row into `row` (kld_row_u16(n_vocab) values) as
// llama-perplexity does; returns the row's negative log-likelihood of `target`.
double encode_log_probs(const float* logits, int32_t n_vocab, int32_t target, uint16_t* row);

// Streams a base file through io::OutputFile (temp file + rename: the file
// appears only complete; it never replaces one of `inputs`).
class KldBaseWriter {
 public:
  KldBaseWriter(const std::string& path, std::vector<std::string> inputs, const KldBaseHeader& h,
                std::span<const int32_t> tokens);
  // Appends the next scored row (in chunk order, then position order).
  void write_row(const float* logits, int32_t target);
  // Throws unless exactly n_chunk x scored_rows rows were written.
  void commit();

 private:
  io::OutputFile out_;
  KldBaseHeader h_;
  std::vector<uint16_t> row_;
  int64_t rows_written_ = 0;
};

// Opens and validates a base file: magic, header ranges, and a file size that
// equals what the header implies, all before anything is allocated by it.
class KldBaseReader {
 public:
  explicit KldBaseReader(const std::string& path);
  const KldBaseHeader& header() const { return h_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // n_chunk * n_ctx
  // The scored rows of one chunk, kld_scored_rows(n_ctx) x kld_row_u16(n_vocab).
  void read_chunk(int32_t chunk, std::vector<uint16_t>& rows) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::unique_ptr<io::File> file_;
  KldBaseHeader h_;
  std::vector<int32_t> tokens_;
  uint64_t rows_offset_ = 0;
};

// llama-perplexity's KL-divergence statistics, summed over scored rows.
struct KldStats {
  double sum_nll = 0, sum_nll2 = 0;            // the model under test
  double sum_nll_base = 0, sum_nll_base2 = 0;  // the base file's
  double sum_nll_nll_base = 0;
  double sum_kld = 0, sum_kld2 = 0;
  double sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;
  double max_p_diff = 0;
  int64_t n_same_top = 0;
  int64_t count = 0;
  std::vector<float> kld_values;     // per row, for the percentiles
  std::vector<float> p_diff_values;  // per row: p(target) - p_base(target)

  // Adds one row: the model's logits against the base row, `target` the next token.
  void add(const float* logits, int32_t n_vocab, const uint16_t* base_row, int32_t target);
};

// The report llama-perplexity prints after `--kl-divergence` (PPL(Q), PPL(base),
// their ratio, KL divergence with percentiles, Δp, same top p), same figures.
std::string kld_report(const KldStats& s);

}  // namespace sluice::bench
