// llama-perplexity's base log-probabilities file: the row encoding against a
// straightforward log-softmax, writer -> reader round trips, the statistics of
// a file read back against the model that wrote it, and every malformed file
// refused with a message naming the file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench/kld_base_file.h"
#include "test_support.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using bench::KldBaseHeader;
using bench::KldBaseReader;
using bench::KldBaseWriter;

std::vector<float> random_logits(std::mt19937& rng, int n, float spread) {
  std::normal_distribution<float> d(0.f, spread);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

double exact_log_prob(const std::vector<float>& l, int i) {
  double mx = l[0];
  for (float x : l) mx = std::max<double>(mx, x);
  double s = 0;
  for (float x : l) s += std::exp(x - mx);
  return l[static_cast<size_t>(i)] - mx - std::log(s);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(KldBase, RowSizesFollowLlamaPerplexity) {
  EXPECT_EQ(bench::kld_row_u16(512), 516u);
  EXPECT_EQ(bench::kld_row_u16(513), 518u);  // odd vocabularies pad to an even count
  EXPECT_EQ(bench::kld_scored_rows(128), 63);
  EXPECT_EQ(bench::kld_scored_rows(7), 3);
}

TEST(KldBase, EncodedRowDecodesToTheLogSoftmax) {
  std::mt19937 rng(7);
  const int n = 1001;
  const std::vector<float> l = random_logits(rng, n, 3.f);
  std::vector<uint16_t> row(bench::kld_row_u16(n));
  const double nll = bench::encode_log_probs(l.data(), n, 17, row.data());
  EXPECT_NEAR(nll, -exact_log_prob(l, 17), 1e-5);
  float head[2];
  std::memcpy(head, row.data(), sizeof head);
  const float scale = head[0], min_lp = head[1];
  ASSERT_GT(scale, 0.f);
  for (int i = 0; i < n; ++i) {
    const double want = exact_log_prob(l, i);
    const double got = scale * row[4 + static_cast<size_t>(i)] + min_lp;
    if (want > min_lp) {
      EXPECT_NEAR(got, want, scale * 0.5 + 1e-5) << i;  // half a quantization step
    }
  }
  EXPECT_EQ(row[4 + n], 0);  // the padding
}

TEST(KldBase, WriteThenReadGivesTheSameHeaderTokensAndRows) {
  TempDir d;
  const std::string path = d.file("base.kld");
  const KldBaseHeader h{8, 11, 2};
  std::vector<int32_t> tokens(16);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 11);
  std::mt19937 rng(3);
  std::vector<std::vector<float>> rows;
  {
    KldBaseWriter w(path, {}, h, tokens);
    for (int r = 0; r < 2 * bench::kld_scored_rows(8); ++r) {
      rows.push_back(random_logits(rng, 11, 2.f));
      w.write_row(rows.back().data(), 1);
    }
    w.commit();
  }
  const KldBaseReader rd(path);
  EXPECT_EQ(rd.header().n_ctx, 8);
  EXPECT_EQ(rd.header().n_vocab, 11);
  EXPECT_EQ(rd.header().n_chunk, 2);
  EXPECT_EQ(rd.tokens(), tokens);
  std::vector<uint16_t> chunk, want(bench::kld_row_u16(11));
  rd.read_chunk(1, chunk);
  ASSERT_EQ(chunk.size(), 3 * want.size());
  bench::encode_log_probs(rows[4].data(), 11, 1, want.data());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), chunk.begin() + static_cast<std::ptrdiff_t>(want.size())));

  // The model that wrote the base scored against it: KL ~ 0, same top token, same PPL.
  bench::KldStats s;
  rd.read_chunk(0, chunk);
  for (int r = 0; r < 3; ++r) {
    s.add(rows[static_cast<size_t>(r)].data(), 11, &chunk[static_cast<size_t>(r) * want.size()], 1);
  }
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.n_same_top, 3);
  EXPECT_LT(std::fabs(s.sum_kld / 3), 1e-4);  // 16-bit log-probs: the base is normalised only to ~1e-5
  EXPECT_NEAR(s.sum_nll, s.sum_nll_base, 1e-3);
}

TEST(KldBase, AnUncommittedWriterLeavesNoFile) {
  TempDir d;
  const std::string path = d.file("base.kld");
  {
    KldBaseWriter w(path, {}, {8, 11, 1}, std::vector<int32_t>(8, 0));
    const std::vector<float> l(11, 0.f);
    w.write_row(l.data(), 0);
    EXPECT_NE(error_of([&] { w.commit(); }).find("1 rows written, 3 expected"), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(KldBase, MalformedFilesAreRefusedNamingTheFile) {
  TempDir d;
  const std::string good = d.file("good.kld");
  {
    KldBaseWriter w(good, {}, {4, 3, 1}, std::vector<int32_t>{0, 1, 2, 1});
    const std::vector<float> l = {0.f, 1.f, 2.f};
    w.write_row(l.data(), 2);
    w.commit();
  }
  const std::string bytes = file_bytes(good);
  ASSERT_EQ(bytes.size(), 20u + 16u + 2u * bench::kld_row_u16(3));
  ASSERT_NO_THROW(KldBaseReader{good});
  struct Case {
    const char* name;
    std::string bytes;
    const char* want;
  };
  std::string bad_magic = bytes, bad_ctx = bytes, bad_token = bytes, huge = bytes;
  bad_magic[0] = 'x';
  const int32_t ctx = 1 << 30;
  std::memcpy(&bad_ctx[8], &ctx, 4);
  const int32_t tok = 3;
  std::memcpy(&bad_token[20 + 4], &tok, 4);
  const int32_t chunks = 1 << 30;
  std::memcpy(&huge[16], &chunks, 4);
  const Case cases[] = {
      {"short.kld", bytes.substr(0, 10), "shorter than its 20-byte header"},
      {"magic.kld", bad_magic, "does not start with \"_logits_\""},
      {"ctx.kld", bad_ctx, "n_ctx 1073741824 out of range"},
      {"truncated.kld", bytes.substr(0, bytes.size() - 1), "bytes where n_ctx 4"},
      {"longer.kld", bytes + "x", "bytes where n_ctx 4"},
      {"chunks.kld", huge, "bytes where n_ctx 4"},  // refused by size before any allocation
      {"token.kld", bad_token, "token 1 is 3, outside the vocabulary"},
  };
  for (const Case& c : cases) {
    const std::string p = d.file(c.name);
    write_bytes(p, c.bytes);
    const std::string msg = error_of([&] { KldBaseReader r(p); });
    EXPECT_NE(msg.find(p), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << c.name << ": " << msg;
  }
}

}  // namespace
}  // namespace sluice::test
