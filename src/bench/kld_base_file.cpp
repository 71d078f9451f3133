#include "bench/kld_base_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "util/error.h"

namespace sluice::bench {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};
constexpr uint64_t kHeaderBytes = 8 + 3 * 4;
// Bounds that keep every product below 2^63 and reject a header that is noise.
constexpr int32_t kMaxCtx = 1 << 24;
constexpr int32_t kMaxVocab = 1 << 24;

// The index of the first maximum, with the maximum itself.
int32_t first_argmax(const float* v, int32_t n, float& max_out) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  max_out = v[best];
  return best;
}

// Round to nearest, ties to even, as the FPU does (llama-perplexity's
// nearest_int: the 1.5 * 2^23 bias trick), for values in [0, 65535].
uint16_t round_u16(float x) { return static_cast<uint16_t>(std::nearbyint(x)); }

struct MeanUnc {
  double mean = 0, unc = 0;
};
// Mean of a row statistic and the uncertainty of that mean (0 for fewer than
// 11 values), as llama-perplexity reports them.
MeanUnc mean_and_uncertainty(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const double f = sum / static_cast<double>(count);
  double df = sum2 / static_cast<double>(count) - f * f;
  df = df > 0 && count > 10 ? std::sqrt(df / static_cast<double>(count - 1)) : 0.0;
  return {f, df};
}

double covariance(double a, double b, double ab, int64_t count) {
  if (count < 10) return 0.0;
  const double n = static_cast<double>(count);
  return (ab / n - (a / n) * (b / n)) / (n - 1);
}

// Linear interpolation between the two nearest ranks of sorted values.
float percentile(const std::vector<float>& sorted, float fraction) {
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  float p = fraction * static_cast<float>(sorted.size() - 1);
  const size_t ip = static_cast<size_t>(p);
  p -= static_cast<float>(ip);
  return (1 - p) * sorted[ip] + p * sorted[std::min(ip + 1, sorted.size() - 1)];
}

float median(const std::vector<float>& sorted) {
  const size_t n = sorted.size();
  return n % 2 == 0 ? 0.5f * (sorted[n / 2] + sorted[n / 2 - 1]) : sorted[n / 2];
}

void appendf(std::string& s, const char* fmt, double a, double b = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  s += buf;
}

}  // namespace

size_t kld_row_u16(int32_t n_vocab) { return 2 * ((static_cast<size_t>(n_vocab) + 1) / 2) + 4; }
int32_t kld_scored_rows(int32_t n_ctx) { return n_ctx - 1 - n_ctx / 2; }

double encode_log_probs(const float* logits, int32_t n_vocab, int32_t target, uint16_t* row) {
  float max_logit = logits[0], min_logit = logits[0];
  for (int32_t i = 1; i < n_vocab; ++i) {
    max_logit = std::max(max_logit, logits[i]);
    min_logit = std::min(min_logit, logits[i]);
  }
  min_logit = std::max(min_logit, max_logit - 16);  // below that a probability is < 1e-7: stored as 0
  double sum_exp = 0.0;
  for (int32_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  const float head[2] = {(max_logit - min_logit) / 65535.f, min_logit - max_logit - log_sum_exp};
  std::memcpy(row, head, sizeof head);
  uint16_t* q = row + 4;
  const size_t n_row = kld_row_u16(n_vocab);
  std::fill(q, row + n_row, uint16_t{0});
  if (head[0] != 0.f) {
    const float inv_scale = 1 / head[0];
    for (int32_t i = 0; i < n_vocab; ++i)
      if (logits[i] > min_logit) q[i] = round_u16(inv_scale * (logits[i] - min_logit));
  }
  return static_cast<double>(max_logit) + log_sum_exp - logits[target];
}

KldBaseWriter::KldBaseWriter(const std::string& path, std::vector<std::string> inputs, const KldBaseHeader& h,
                             std::span<const int32_t> tokens)
    : out_(path, {.flag = "--kl-divergence-base", .inputs = std::move(inputs), .overwrite = true}),
      h_(h),
      row_(kld_row_u16(h.n_vocab)) {
  if (tokens.size() != static_cast<size_t>(h.n_chunk) * static_cast<size_t>(h.n_ctx))
    throw Error("--kl-divergence-base: " + std::to_string(tokens.size()) + " tokens for " +
                std::to_string(h.n_chunk) + " chunks of " + std::to_string(h.n_ctx));
  out_.write(kMagic, sizeof kMagic);
  const int32_t head[3] = {h.n_ctx, h.n_vocab, h.n_chunk};
  out_.write(head, sizeof head);
  out_.write(tokens.data(), tokens.size_bytes());
}

void KldBaseWriter::write_row(const float* logits, int32_t target) {
  encode_log_probs(logits, h_.n_vocab, target, row_.data());
  out_.write(row_.data(), row_.size() * sizeof(uint16_t));
  ++rows_written_;
}

void KldBaseWriter::commit() {
  const int64_t want = static_cast<int64_t>(h_.n_chunk) * kld_scored_rows(h_.n_ctx);
  if (rows_written_ != want)
    throw Error(out_.path() + ": --kl-divergence-base: " + std::to_string(rows_written_) + " rows written, " +
                std::to_string(want) + " expected");
  out_.commit();
}

KldBaseReader::KldBaseReader(const std::string& path) : path_(path), file_(io::open_file(path)) {
  auto bad = [&](const std::string& why) -> Error {
    return Error(path + ": not a llama-perplexity base log-probabilities file (--kl-divergence-base): " + why);
  };
  if (file_->size() < kHeaderBytes) throw bad("shorter than its 20-byte header");
  char magic[8];
  file_->read_exact(magic, sizeof magic, 0);
  if (std::memcmp(magic, kMagic, sizeof magic) != 0) throw bad("it does not start with \"_logits_\"");
  int32_t head[3];
  file_->read_exact(head, sizeof head, 8);
  h_ = {head[0], head[1], head[2]};
  if (h_.n_ctx < 4 || h_.n_ctx > kMaxCtx) throw bad("n_ctx " + std::to_string(h_.n_ctx) + " out of range");
  if (h_.n_vocab < 1 || h_.n_vocab > kMaxVocab) throw bad("n_vocab " + std::to_string(h_.n_vocab) + " out of range");
  if (h_.n_chunk < 1) throw bad("n_chunk " + std::to_string(h_.n_chunk) + " out of range");
  const uint64_t n_tokens = static_cast<uint64_t>(h_.n_chunk) * static_cast<uint64_t>(h_.n_ctx);
  const uint64_t row_bytes = kld_row_u16(h_.n_vocab) * sizeof(uint16_t);
  const uint64_t rows = static_cast<uint64_t>(h_.n_chunk) * static_cast<uint64_t>(kld_scored_rows(h_.n_ctx));
  // n_chunk < 2^31, n_ctx and n_vocab < 2^24: no product below overflows 64 bits.
  const uint64_t want = kHeaderBytes + n_tokens * 4 + rows * row_bytes;
  if (file_->size() != want)
    throw bad(std::to_string(file_->size()) + " bytes where n_ctx " + std::to_string(h_.n_ctx) + ", n_vocab " +
              std::to_string(h_.n_vocab) + " and n_chunk " + std::to_string(h_.n_chunk) + " make " +
              std::to_string(want));
  tokens_.resize(n_tokens);
  file_->read_exact(tokens_.data(), n_tokens * 4, kHeaderBytes);
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (tokens_[i] < 0 || tokens_[i] >= h_.n_vocab)
      throw bad("token " + std::to_string(i) + " is " + std::to_string(tokens_[i]) + ", outside the vocabulary");
  rows_offset_ = kHeaderBytes + n_tokens * 4;
}

void KldBaseReader::read_chunk(int32_t chunk, std::vector<uint16_t>& rows) const {
  if (chunk < 0 || chunk >= h_.n_chunk) throw Error(path_ + ": no chunk " + std::to_string(chunk));
  const size_t per_chunk = static_cast<size_t>(kld_scored_rows(h_.n_ctx)) * kld_row_u16(h_.n_vocab);
  rows.resize(per_chunk);
  file_->read_exact(rows.data(), per_chunk * sizeof(uint16_t),
                    rows_offset_ + static_cast<uint64_t>(chunk) * per_chunk * sizeof(uint16_t));
}

void KldStats::add(const float* logits, int32_t n_vocab, const uint16_t* base_row, int32_t target) {
  float max_logit = 0;
  const int32_t top = first_argmax(logits, n_vocab, max_logit);
  double sum_exp = 0.0;
  for (int32_t i = 0; i < n_vocab; ++i) sum_exp += std::exp(logits[i] - max_logit);
  const float log_sum_exp = static_cast<float>(std::log(sum_exp));
  float head[2];
  std::memcpy(head, base_row, sizeof head);
  const float scale = head[0], min_log_prob = head[1];
  const uint16_t* q = base_row + 4;

  const float nll = max_logit + log_sum_exp - logits[target];
  const float nll_base = -(scale * q[target] + min_log_prob);
  sum_nll += nll;
  sum_nll2 += static_cast<double>(nll) * nll;
  sum_nll_base += nll_base;
  sum_nll_base2 += static_cast<double>(nll_base) * nll_base;
  sum_nll_nll_base += static_cast<double>(nll) * nll_base;

  // KL(base || model) over the base's tokens with log p > -16 (what the file kept).
  const float log_z = max_logit + log_sum_exp;
  double kl = 0.0;
  int32_t top_base = 0;
  float best_base = 0;
  for (int32_t i = 0; i < n_vocab; ++i) {
    const float lp_base = scale * q[i] + min_log_prob;
    if (i == 0 || lp_base > best_base) {
      best_base = lp_base;
      top_base = i;
    }
    if (lp_base > -16.f) kl += std::exp(lp_base) * (lp_base - logits[i] + log_z);
  }
  sum_kld += kl;
  sum_kld2 += kl * kl;
  ++count;
  if (top == top_base) ++n_same_top;

  const float p_diff = std::exp(-nll) - std::exp(-nll_base);
  sum_p_diff += p_diff;
  const double d2 = static_cast<double>(p_diff) * p_diff;
  sum_p_diff2 += d2;
  sum_p_diff4 += d2 * d2;
  max_p_diff = std::max(max_p_diff, static_cast<double>(std::fabs(p_diff)));
  kld_values.push_back(static_cast<float>(kl));
  p_diff_values.push_back(p_diff);
}

std::string kld_report(const KldStats& s) {
  std::string r;
  if (s.count < 2) return "kl-divergence: fewer than 2 scored rows, no statistics\n";
  const MeanUnc lp = mean_and_uncertainty(s.sum_nll, s.sum_nll2, s.count);
  const MeanUnc lb = mean_and_uncertainty(s.sum_nll_base, s.sum_nll_base2, s.count);
  const double ppl = std::exp(lp.mean), ppl_unc = ppl * lp.unc;
  const double ppl_base = std::exp(lb.mean), ppl_base_unc = ppl_base * lb.unc;
  const double cov = covariance(s.sum_nll, s.sum_nll_base, s.sum_nll_nll_base, s.count);
  const double ratio = lp.mean - lb.mean;
  const double ratio_unc = std::sqrt(std::max(0.0, lp.unc * lp.unc + lb.unc * lb.unc - 2.0 * cov));
  r += "====== Perplexity statistics ======\n";
  appendf(r, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl, ppl_unc);
  appendf(r, "Mean PPL(base)                : %10.6f ± %10.6f\n", ppl_base, ppl_base_unc);
  if (lp.unc > 0 && lb.unc > 0) appendf(r, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100.0 * cov / (lp.unc * lb.unc));
  appendf(r, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", ratio, ratio_unc);
  appendf(r, "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", std::exp(ratio), std::exp(ratio) * ratio_unc);
  const double diff_unc = std::sqrt(
      std::max(0.0, ppl_unc * ppl_unc + ppl_base_unc * ppl_base_unc - 2.0 * ppl * ppl_base * cov));
  appendf(r, "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n\n", ppl - ppl_base, diff_unc);

  std::vector<float> kld = s.kld_values, dp = s.p_diff_values;
  std::sort(kld.begin(), kld.end());
  std::sort(dp.begin(), dp.end());
  const MeanUnc k = mean_and_uncertainty(s.sum_kld, s.sum_kld2, s.count);
  r += "====== KL divergence statistics ======\n";
  appendf(r, "Mean    KLD: %10.6f ± %10.6f\n", k.mean, k.unc);
  appendf(r, "Maximum KLD: %10.6f\n", kld.back());
  const std::pair<const char*, float> kq[] = {{"99.9%%", 0.999f}, {"99.0%%", 0.99f}, {"95.0%%", 0.95f},
                                              {"90.0%%", 0.9f}};
  for (const auto& [name, f] : kq) appendf(r, (std::string(name) + "   KLD: %10.6f\n").c_str(), percentile(kld, f));
  appendf(r, "Median  KLD: %10.6f\n", median(kld));
  const std::pair<const char*, float> kl_low[] = {{"10.0%%", 0.1f}, {" 5.0%%", 0.05f}, {" 1.0%%", 0.01f},
                                                  {" 0.1%%", 0.001f}};
  for (const auto& [name, f] : kl_low) appendf(r, (std::string(name) + "   KLD: %10.6f\n").c_str(), percentile(kld, f));
  appendf(r, "Minimum KLD: %10.6f\n\n", kld.front());

  const MeanUnc d = mean_and_uncertainty(s.sum_p_diff, s.sum_p_diff2, s.count);
  r += "====== Token probability statistics ======\n";
  appendf(r, "Mean    Δp: %6.3f ± %5.3f %%\n", 100.0 * d.mean, 100.0 * d.unc);
  appendf(r, "Maximum Δp: %6.3f%%\n", 100.0 * dp.back());
  const std::pair<const char*, float> dq[] = {{"99.9%%", 0.999f}, {"99.0%%", 0.99f}, {"95.0%%", 0.95f},
                                              {"90.0%%", 0.9f},   {"75.0%%", 0.75f}};
  for (const auto& [name, f] : dq) appendf(r, (std::string(name) + "   Δp: %6.3f%%\n").c_str(), 100.0 * percentile(dp, f));
  appendf(r, "Median  Δp: %6.3f%%\n", 100.0 * median(dp));
  const std::pair<const char*, float> d_low[] = {{"25.0%%", 0.25f}, {"10.0%%", 0.1f}, {" 5.0%%", 0.05f},
                                                 {" 1.0%%", 0.01f}, {" 0.1%%", 0.001f}};
  for (const auto& [name, f] : d_low) appendf(r, (std::string(name) + "   Δp: %6.3f%%\n").c_str(), 100.0 * percentile(dp, f));
  appendf(r, "Minimum Δp: %6.3f%%\n", 100.0 * dp.front());
  const MeanUnc mse = mean_and_uncertainty(s.sum_p_diff2, s.sum_p_diff4, s.count);
  const double rms = std::sqrt(mse.mean);
  appendf(r, "RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * rms, rms > 0 ? 100.0 * 0.5 / rms * mse.unc : 0.0);
  const double same = static_cast<double>(s.n_same_top) / static_cast<double>(s.count);
  appendf(r, "Same top p: %6.3f ± %5.3f %%\n", 100.0 * same,
          100.0 * std::sqrt(same * (1.0 - same) / static_cast<double>(s.count - 1)));
  return r;
}

}  // namespace sluice::bench
