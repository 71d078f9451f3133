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
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

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
