// Gemma 4's tokenizer (llama.cpp's "gemma4" model / pre-tokenizer): BPE merges
// over raw UTF-8 with spaces escaped to U+2581, text split only into lines and
// newline runs (a run of newlines that is a token is taken whole), bytes
// outside the vocabulary as <0xXX> tokens, BOS always added, and Gemma 4's
// end-of-generation tokens. A synthetic vocabulary: the expected ids follow
// from llama.cpp's algorithm by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace sluice::tokenizer {
namespace SLUICE_TEST_FILE {

using gguf::Metadata;
using gguf::Value;

constexpr int32_t kByte0 = 5;  // <0x00>; <0xXX> = kByte0 + XX

Metadata gemma4_vocab(const std::string& model = "gemma4") {
  std::vector<std::string> tokens = {"<pad>", "<eos>", "<bos>", "<|turn>", "<turn|>"};
  std::vector<int32_t> types = {3, 3, 3, 3, 3};
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    types.push_back(6);
  }
  // 261..
  for (const char* t : {"\xE2\x96\x81", "h", "e", "l", "o", "he", "ll", "hell", "hello", "\xE2\x96\x81hello", "\n",
                        "\n\n", "w", "r", "d"}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  tokens.push_back("</s>");  // 276
  types.push_back(3);
  tokens.push_back("<|tool_response>");  // 277
  types.push_back(3);
  Metadata md;
  md.set_source("gemma4-vocab");
  md.add("tokenizer.ggml.model", Value::from_string(model));
  if (model == "gpt2") md.add("tokenizer.ggml.pre", Value::from_string("gemma4"));
  md.add("tokenizer.ggml.tokens", Value::from_strings(tokens));
  md.add("tokenizer.ggml.token_type", Value::from_i32s(types));
  md.add("tokenizer.ggml.merges",
         Value::from_strings({"h e", "l l", "he ll", "hell o", "\xE2\x96\x81 hello"}));
  md.add("tokenizer.ggml.bos_token_id", Value::from_u32(2));
  md.add("tokenizer.ggml.eos_token_id", Value::from_u32(1));
  md.add("tokenizer.ggml.add_bos_token", Value::from_bool(false));  // llama.cpp overrides it for Gemma 4
  return md;
}

TEST(TokenizerGemma4, SpacesEscapedMergesOverLinesNewlineRunsWhole) {
  for (const std::string model : {"gemma4", "gpt2"}) {  // the model, or gpt2 with pre "gemma4"
    const Tokenizer tok = Tokenizer::from_gguf(gemma4_vocab(model));
    EXPECT_EQ(tok.pre_name(), "gemma4") << model;
    EXPECT_TRUE(tok.add_bos());
    // "hello▁hello" merges to hello + ▁hello; "\n\n" is one token; "world" has no merges.
    EXPECT_EQ(tok.encode("hello hello\n\nworld", true, false),
              (std::vector<int32_t>{2, 269, 270, 272, 273, 265, 274, 264, 275}))
        << model;
    EXPECT_EQ(tok.decode(tok.encode("hello hello\n\nworld", false, false)), "hello hello\n\nworld");
    // Three newlines are no token: BPE over them (no merges) gives three "\n".
    EXPECT_EQ(tok.encode("\n\n\n", false, false), (std::vector<int32_t>{271, 271, 271}));
  }
}

TEST(TokenizerGemma4, ByteFallbackAndSpecialTokens) {
  const Tokenizer tok = Tokenizer::from_gguf(gemma4_vocab());
  // "é" (C3 A9) and "i" are not in the vocabulary: <0xXX> byte tokens.
  const std::vector<int32_t> e = tok.encode("\xC3\xA9", false, false);
  EXPECT_EQ(e, (std::vector<int32_t>{kByte0 + 0xC3, kByte0 + 0xA9}));
  EXPECT_EQ(tok.decode(e), "\xC3\xA9");
  EXPECT_EQ(tok.encode("<|turn>hi<turn|>", false, true),
            (std::vector<int32_t>{3, 262, kByte0 + 'i', 4}));
  // Without parse_special the marker is text (its bytes, no token of its own).
  EXPECT_NE(tok.encode("<|turn>", false, false), (std::vector<int32_t>{3}));
  EXPECT_TRUE(tok.is_eog(1));  // <eos>
  EXPECT_TRUE(tok.is_eog(4));  // <turn|>
  EXPECT_TRUE(tok.is_eog(277));  // <|tool_response>
  EXPECT_FALSE(tok.is_eog(276));  // </s> is text when <|tool_response> ends generation
  EXPECT_EQ(tok.token_to_piece(276), "</s>");
  EXPECT_EQ(tok.token_to_piece(270), " hello");
}

}  // namespace
}  // namespace sluice::tokenizer
