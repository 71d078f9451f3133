// Tokenizer conformance and behaviour tests.
//
// * TokenizerVocab/*: every vocab GGUF in shared/vocab against its .inp/.out
//   vectors (llama.cpp's test-tokenizer-0 convention: add_special=false,
//   parse_special=false), plus decode(encode(x)) == x.
// * TokenizerStories: the llama2.c tok512 SPM vocab inside the stories MoE.
// * TokenizerSynthetic*: small in-memory vocabs with hand-derived expectations.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>

#include <tuple>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "test_support.h"

namespace SLUICE_TEST_FILE {

using sluice::gguf::Metadata;
using sluice::gguf::Value;
using sluice::tokenizer::Tokenizer;
namespace fs = std::filesystem;

const fs::path kVocabDir = fs::path(SLUICE_SHARED_DIR) / "vocab";

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Printable form of a test string for failure messages.
std::string show(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c == '"') out += "\\\"";
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

Tokenizer load(const fs::path& gguf) {
  auto model = sluice::gguf::GgufModel::open(gguf.string());
  return Tokenizer::from_gguf(model.metadata());
}

struct VocabCase {
  const char* vocab;  // GGUF file in shared/vocab
  const char* tests;  // X for X.inp / X.out
};

std::string case_name(const testing::TestParamInfo<VocabCase>& info) {
  std::string n = info.param.tests;
  n = n.substr(std::string("ggml-vocab-").size());
  n = n.substr(0, n.find(".gguf"));
  for (char& c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return n;
}

class TokenizerVocab : public testing::TestWithParam<VocabCase> {};

TEST_P(TokenizerVocab, MatchesLlamaCppIdsAndRoundTrips) {
  const VocabCase& c = GetParam();
  const fs::path vocab = kVocabDir / c.vocab;
  const fs::path inp = kVocabDir / (std::string(c.tests) + ".inp");
  const fs::path outp = kVocabDir / (std::string(c.tests) + ".out");
  if (!fs::exists(vocab) || !fs::exists(inp) || !fs::exists(outp)) {
    GTEST_SKIP() << "shared vocab data absent: " << vocab << " / " << inp;
  }

  // .inp: each test string is followed by "\n__ggml_vocab_test__\n".
  const std::string sep = "\n__ggml_vocab_test__\n";
  const std::string raw = read_bytes(inp);
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t hit = raw.find(sep, pos);
    ASSERT_NE(hit, std::string::npos) << inp << ": trailing bytes without separator";
    texts.push_back(raw.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  // .out: one line per test, whitespace-separated ids.
  std::vector<std::vector<int32_t>> expected;
  std::istringstream lines(read_bytes(outp));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ids(line);
    std::vector<int32_t> v;
    for (long long id; ids >> id;) v.push_back(static_cast<int32_t>(id));
    expected.push_back(std::move(v));
  }
  ASSERT_EQ(texts.size(), expected.size()) << inp << " vs " << outp;

  const Tokenizer tok = load(vocab);
  size_t ids_ok = 0, roundtrip_ok = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> got = tok.encode(texts[i], /*add_special=*/false, /*parse_special=*/false);
    if (got == expected[i]) {
      ++ids_ok;
    } else {
      ADD_FAILURE() << c.tests << " case " << i << " " << show(texts[i]) << "\n  expected:" << ids_str(expected[i])
                    << "\n  got:     " << ids_str(got);
    }
    const std::string back = tok.decode(got);
    if (back == texts[i]) {
      ++roundtrip_ok;
    } else {
      ADD_FAILURE() << c.tests << " case " << i << " does not round-trip: " << show(texts[i]) << " -> " << show(back);
    }
  }
  std::printf("[ vocab    ] %s: ids %zu/%zu, round-trip %zu/%zu\n", c.tests, ids_ok, texts.size(), roundtrip_ok,
              texts.size());
}

INSTANTIATE_TEST_SUITE_P(
    Shared, TokenizerVocab,
    testing::Values(VocabCase{"ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2.gguf"},
                    VocabCase{"ggml-vocab-gpt-2.gguf", "ggml-vocab-gpt-2-extra.gguf"},
                    VocabCase{"ggml-vocab-gpt2-pre-qwen2.gguf", "ggml-vocab-gpt2-pre-qwen2.gguf"},
                    VocabCase{"ggml-vocab-gpt2-pre-qwen35.gguf", "ggml-vocab-gpt2-pre-qwen35.gguf"},
                    VocabCase{"ggml-vocab-gpt2-pre-llama-bpe.gguf", "ggml-vocab-gpt2-pre-llama-bpe.gguf"},
                    VocabCase{"ggml-vocab-gpt2-pre-glm4.gguf", "ggml-vocab-gpt2-pre-glm4.gguf"},
                    VocabCase{"ggml-vocab-gpt2-pre-deepseek-v3.gguf", "ggml-vocab-gpt2-pre-deepseek-v3.gguf"},
                    VocabCase{"ggml-vocab-gpt2-pre-kimi-k2.gguf", "ggml-vocab-gpt2-pre-kimi-k2.gguf"},
                    VocabCase{"ggml-vocab-gpt2-pre-gpt-4o.gguf", "ggml-vocab-gpt2-pre-gpt-4o.gguf"},
                    VocabCase{"ggml-vocab-deepseek-coder.gguf", "ggml-vocab-deepseek-coder.gguf"},
                    VocabCase{"ggml-vocab-deepseek-llm.gguf", "ggml-vocab-deepseek-llm.gguf"},
                    VocabCase{"ggml-vocab-falcon.gguf", "ggml-vocab-falcon.gguf"},
                    VocabCase{"ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-spm.gguf"},
                    VocabCase{"ggml-vocab-phi-3.gguf", "ggml-vocab-phi-3.gguf"},
                    VocabCase{"ggml-vocab-starcoder.gguf", "ggml-vocab-starcoder.gguf"}),
    case_name);

}  // namespace

namespace SLUICE_TEST_FILE {

// ---- llama2.c tok512 SPM vocab inside the stories MoE -----------------------

// Expected ids derived independently of this tokenizer: llama2.c run.c's
// encode() (dummy-prefix " " token, then repeatedly merge the adjacent pair
// whose concatenation has the highest score, first pair on ties), re-run in a
// few lines of Python directly on shared/data/llama2c/tok512.bin:
//   "Once upon a time" -> " Once"=403 " upon"=407 " a"=261 " time"=378
// and BOS=1 first because the file sets add_bos_token.
TEST(TokenizerStories, OnceUponATimeMatchesLlama2cEncoder) {
  const fs::path model = fs::path(SLUICE_SHARED_DIR) / "models" / "stories-moe-8x-q8_0.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << "shared model absent: " << model;
  const Tokenizer tok = load(model);
  EXPECT_EQ(tok.model_name(), "llama");
  EXPECT_EQ(tok.n_vocab(), 512);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_TRUE(tok.add_bos());
  const std::vector<int32_t> ids = tok.encode("Once upon a time", /*add_special=*/true, /*parse_special=*/false);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok.decode(ids, /*render_special=*/false), "Once upon a time");
  EXPECT_EQ(tok.token_to_piece(403), " Once");
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_FALSE(tok.is_eog(403));
}

// ---- synthetic SPM vocab: exact merge order, byte fallback, specials --------

// ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then the entries below.
enum : int32_t { kSp = 259, kA, kB, kAB, kSpA, kAA, kImEnd, kTool };

Metadata synthetic_spm() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf), scores.push_back(0), types.push_back(6);
  }
  const std::vector<std::tuple<std::string, float, int32_t>> rest = {
      {"\xE2\x96\x81", -1.0f, 1}, {"a", -2.0f, 1},   {"b", -3.0f, 1},          {"ab", -0.5f, 1},
      {"\xE2\x96\x81" "a", -1.0f, 1}, {"aa", -0.7f, 1}, {"<|im_end|>", 0.0f, 3}, {"<tool>", 0.0f, 4}};
  for (const auto& [t, s, ty] : rest) tokens.push_back(t), scores.push_back(s), types.push_back(ty);
  Metadata md;
  md.set_source("synthetic-spm");
  md.add("tokenizer.ggml.model", Value::from_string("llama"));
  md.add("tokenizer.ggml.tokens", Value::from_strings(tokens));
  md.add("tokenizer.ggml.scores", Value::from_f32s(scores));
  md.add("tokenizer.ggml.token_type", Value::from_i32s(types));
  return md;
}

int32_t byte_id(unsigned char b) { return 3 + b; }

TEST(TokenizerSyntheticSpm, MergesByScoreNotPosition) {
  const Tokenizer tok = Tokenizer::from_gguf(synthetic_spm());
  // "▁ab": "ab" (-0.5) outranks "▁a" (-1.0) although "▁a" is further left.
  EXPECT_EQ(tok.encode("ab", false, false), (std::vector<int32_t>{kSp, kAB}));
  EXPECT_EQ(tok.encode("a", false, false), (std::vector<int32_t>{kSpA}));
  // "▁aaa": the two "aa" pairs tie at -0.7; the left one wins, then nothing
  // else is a token ("▁a" is stale because its right symbol grew).
  EXPECT_EQ(tok.encode("aaa", false, false), (std::vector<int32_t>{kSp, kAA, kA}));
  EXPECT_EQ(tok.encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_EQ(tok.encode("", false, false), (std::vector<int32_t>{}));
  EXPECT_EQ(tok.encode("a", true, false), (std::vector<int32_t>{1, kSpA}));
}

TEST(TokenizerSyntheticSpm, ByteFallbackAndStreamingPieces) {
  const Tokenizer tok = Tokenizer::from_gguf(synthetic_spm());
  // 'c' and 'é' (C3 A9) are not in the vocab: <0xXX> tokens.
  EXPECT_EQ(tok.encode("c", false, false), (std::vector<int32_t>{kSp, byte_id('c')}));
  const std::vector<int32_t> ids = tok.encode("a\xC3\xA9", false, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{kSpA, byte_id(0xC3), byte_id(0xA9)}));
  // Each byte token is one byte (half a character); concatenation restores it.
  EXPECT_EQ(tok.token_to_piece(byte_id(0xC3)), "\xC3");
  std::string streamed;
  for (int32_t id : ids) streamed += tok.token_to_piece(id);
  EXPECT_EQ(streamed, " a\xC3\xA9");                  // raw pieces keep the prefix space
  EXPECT_EQ(tok.decode(ids), "a\xC3\xA9");            // decode strips it
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, kSpA}, false), "a");  // also right after BOS
}

TEST(TokenizerSyntheticSpm, SpecialTokensInText) {
  const Tokenizer tok = Tokenizer::from_gguf(synthetic_spm());
  // parse_special: the control token is cut out; the text after it gets the space prefix again.
  EXPECT_EQ(tok.encode("a<|im_end|>b", false, true), (std::vector<int32_t>{kSpA, kImEnd, kSp, kB}));
  // Without parse_special the control text is ordinary bytes.
  const auto c = [](char ch) { return byte_id(static_cast<unsigned char>(ch)); };
  EXPECT_EQ(tok.encode("a<|im_end|>b", false, false),
            (std::vector<int32_t>{kSpA, c('<'), c('|'), c('i'), c('m'), c('_'), c('e'), c('n'), c('d'), c('|'),
                                  c('>'), kB}));
  // USER_DEFINED tokens are matched even without parse_special (llama.cpp).
  EXPECT_EQ(tok.encode("a<tool>", false, false), (std::vector<int32_t>{kSpA, kTool}));
  EXPECT_TRUE(tok.is_eog(kImEnd));  // recognised by its text
  EXPECT_TRUE(tok.is_eog(2));
  EXPECT_FALSE(tok.is_eog(kA));
  EXPECT_EQ(tok.token_to_piece(kImEnd, /*render_special=*/true), "<|im_end|>");
  EXPECT_EQ(tok.token_to_piece(kImEnd, /*render_special=*/false), "");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{kSpA, kImEnd, kSp, kB}, false), "a b");
}

TEST(TokenizerSyntheticSpm, BadInputsThrowSluiceError) {
  const Tokenizer tok = Tokenizer::from_gguf(synthetic_spm());
  EXPECT_THROW(tok.token_to_piece(-1), sluice::Error);
  EXPECT_THROW(tok.token_to_piece(tok.n_vocab()), sluice::Error);
  EXPECT_THROW(tok.decode(std::vector<int32_t>{kA, 100000}), sluice::Error);

  Metadata no_model;
  no_model.set_source("x.gguf");
  EXPECT_THROW(Tokenizer::from_gguf(no_model), sluice::Error);

  Metadata bert;
  bert.add("tokenizer.ggml.model", Value::from_string("bert"));
  bert.add("tokenizer.ggml.tokens", Value::from_strings({"a"}));
  EXPECT_THROW(Tokenizer::from_gguf(bert), sluice::Error);

  Metadata short_scores;
  short_scores.add("tokenizer.ggml.model", Value::from_string("llama"));
  short_scores.add("tokenizer.ggml.tokens", Value::from_strings({"a", "b"}));
  short_scores.add("tokenizer.ggml.scores", Value::from_f32s({0.0f}));
  EXPECT_THROW(Tokenizer::from_gguf(short_scores), sluice::Error);

  Metadata bpe_without_merges;
  bpe_without_merges.add("tokenizer.ggml.model", Value::from_string("gpt2"));
  bpe_without_merges.add("tokenizer.ggml.tokens", Value::from_strings({"a"}));
  EXPECT_THROW(Tokenizer::from_gguf(bpe_without_merges), sluice::Error);
}

// ---- GPT-2 BPE vocab: specials, BOS policy per pre-tokenizer, UTF-8 pieces --

TEST(TokenizerGpt2, SpecialTokensAndBosPolicy) {
  const fs::path gpt2 = kVocabDir / "ggml-vocab-gpt-2.gguf";
  const fs::path llama_bpe = kVocabDir / "ggml-vocab-gpt2-pre-llama-bpe.gguf";
  if (!fs::exists(gpt2) || !fs::exists(llama_bpe)) GTEST_SKIP() << "shared vocab data absent: " << kVocabDir;
  const Tokenizer tok = load(gpt2);
  EXPECT_EQ(tok.model_name(), "gpt2");
  EXPECT_EQ(tok.pre_name(), "gpt-2");
  EXPECT_TRUE(tok.pre_known());
  EXPECT_EQ(tok.n_vocab(), 50257);
  EXPECT_EQ(tok.encode("<|endoftext|>", false, true), (std::vector<int32_t>{50256}));
  const std::vector<int32_t> plain = tok.encode("<|endoftext|>", false, false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok.decode(plain), "<|endoftext|>");
  EXPECT_TRUE(tok.is_eog(50256));
  // README: with add_special only llama-bpe adds BOS (llama.cpp forces it for LLAMA3).
  EXPECT_EQ(tok.encode("Hello world", true, false), tok.encode("Hello world", false, false));
  EXPECT_EQ(tok.encode("Hello world", false, false), (std::vector<int32_t>{15496, 995}));
  const Tokenizer l3 = load(llama_bpe);
  std::vector<int32_t> with_bos = {50256, 15496, 995};
  EXPECT_EQ(l3.encode("Hello world", true, false), with_bos);
}

TEST(TokenizerGpt2, MultiBytePiecesConcatenateToUtf8) {
  const fs::path gpt2 = kVocabDir / "ggml-vocab-gpt-2.gguf";
  if (!fs::exists(gpt2)) GTEST_SKIP() << "shared vocab data absent: " << gpt2;
  const Tokenizer tok = load(gpt2);
  const std::string text = "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\xA6\x99";  // "日本語 🦙"
  const std::vector<int32_t> ids = tok.encode(text, false, false);
  std::string streamed;
  bool some_piece_splits_a_char = false;
  for (int32_t id : ids) {
    const std::string piece = tok.token_to_piece(id);
    // A piece that ends in the middle of a UTF-8 sequence: its last lead byte
    // announces more continuation bytes than follow it.
    for (size_t i = 0; i < piece.size(); ++i) {
      const auto b = static_cast<unsigned char>(piece[i]);
      const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
      if (b >= 0xC0 && i + need > piece.size()) some_piece_splits_a_char = true;
    }
    streamed += piece;
  }
  EXPECT_EQ(streamed, text);
  EXPECT_TRUE(some_piece_splits_a_char) << "test text no longer exercises split characters";
  // Invalid UTF-8 still round-trips through byte-level BPE.
  const std::string invalid = "a\xFF\xC3(b";
  EXPECT_EQ(tok.decode(tok.encode(invalid, false, false)), invalid);
}

}  // namespace

namespace SLUICE_TEST_FILE {

// ---- `sluice tokenize` CLI ---------------------------------------------------

using sluice::test::run_cmd;

TEST(TokenizerCli, IdsOnlyDecodeAndErrors) {
  const fs::path model = fs::path(SLUICE_SHARED_DIR) / "models" / "stories-moe-8x-q8_0.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << "shared model absent: " << model;
  const std::string bin = SLUICE_BINARY;
  int rc = 0;
  EXPECT_EQ(run_cmd(bin + " tokenize -m " + model.string() + " -p 'Once upon a time' --ids-only", &rc),
            "1 403 407 261 378\n");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(run_cmd(bin + " tokenize -m " + model.string() + " -p 'Once upon a time' --ids-only --no-bos", &rc),
            "403 407 261 378\n");
  EXPECT_EQ(run_cmd(bin + " tokenize -m " + model.string() + " --decode 403,407,261,378", &rc), "Once upon a time\n");
  EXPECT_EQ(rc, 0);
  run_cmd(bin + " tokenize -m " + model.string() + " --decode 403,9999 2>/dev/null", &rc);
  EXPECT_EQ(rc, 1);  // sluice::Error: id out of range
  run_cmd(bin + " tokenize -m " + model.string() + " 2>/dev/null", &rc);
  EXPECT_EQ(rc, 1);  // neither -p nor --decode
}

}  // namespace
