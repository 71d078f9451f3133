// libFuzzer target for the tokenizer: vocab load from GGUF metadata, then
// encode/decode of arbitrary bytes. Never crash, hang, leak or read out of
// bounds; every encoded id must be a valid token.
//
// Input: byte 0 selects the mode, the rest is the payload.
//   mode % 4 == 3:  payload is a whole GGUF file; its tokenizer.ggml.* metadata
//                   is loaded (the vocab-load path), and if that succeeds a
//                   fixed text is encoded and decoded with it.
//   otherwise:      payload is text, encoded with one of the vocabularies
//                   loaded at start-up (byte 0 / 4 picks which; bit 0 and 1
//                   are add_special / parse_special), then decoded, and its
//                   bytes are also read as token ids for token_to_piece.
// Start-up vocabularies: real ones from SLUICE_FUZZ_VOCAB_DIR (the shared
// reference vocab/ folder; SPM and several BPE pre-tokenizers) when present,
// else a tiny built-in SPM vocab so the target works anywhere.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "io/file.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

using namespace sluice;

namespace {

std::vector<tokenizer::Tokenizer>& vocabs() {
  static std::vector<tokenizer::Tokenizer> v;
  return v;
}

void load_startup_vocabs() {
  const char* names[] = {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt2-pre-qwen2.gguf",
                         "ggml-vocab-gpt-2.gguf",     "ggml-vocab-deepseek-llm.gguf",
                         "ggml-vocab-falcon.gguf",    "ggml-vocab-phi-3.gguf"};
  for (const char* n : names) {
    const std::string p = std::string(SLUICE_FUZZ_VOCAB_DIR) + "/" + n;
    if (!std::filesystem::exists(p)) continue;
    vocabs().push_back(tokenizer::Tokenizer::from_gguf(gguf::GgufModel::open(p).metadata()));
  }
  if (!vocabs().empty()) return;
  // Fallback: a tiny SPM vocab with byte tokens, built in memory.
  gguf::Metadata md;
  std::vector<std::string> toks = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "\xE2\x96\x81the", "a", "b"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    toks.push_back(buf);
  }
  std::vector<float> scores(toks.size(), -1.0f);
  std::vector<int32_t> types(toks.size(), 1);
  types[0] = 2;
  types[1] = types[2] = 3;
  for (size_t i = 7; i < toks.size(); ++i) types[i] = 6;
  md.add("tokenizer.ggml.model", gguf::Value::from_string("llama"));
  md.add("tokenizer.ggml.tokens", gguf::Value::from_strings(toks));
  md.add("tokenizer.ggml.scores", gguf::Value::from_f32s(scores));
  md.add("tokenizer.ggml.token_type", gguf::Value::from_i32s(types));
  vocabs().push_back(tokenizer::Tokenizer::from_gguf(md));
}

void check_ids(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) __builtin_trap();
}

void exercise(const tokenizer::Tokenizer& tok, std::string_view text, bool add_special, bool parse_special) {
  const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  check_ids(tok, ids);
  (void)tok.decode(ids, parse_special);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  load_startup_vocabs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode % 4 == 3) {
    try {
      auto file = io::memory_file("fuzz-vocab.gguf", std::vector<uint8_t>(data + 1, data + size));
      std::vector<gguf::ParsedFile> splits;
      splits.push_back(gguf::parse(*file));
      const gguf::GgufModel m = gguf::GgufModel::from_parsed(std::move(splits));
      const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(m.metadata());
      exercise(tok, "Hello world! \xE2\x96\x81 <s> 123 \xF0\x9F\x98\x80", true, true);
      for (int32_t id = 0; id < std::min(tok.n_vocab(), 64); ++id) (void)tok.token_to_piece(id);
    } catch (const Error&) {
    }
    return 0;
  }
  const tokenizer::Tokenizer& tok = vocabs()[(mode / 4) % vocabs().size()];
  exercise(tok, payload, (mode & 1) != 0, (mode & 2) != 0);
  // The payload's bytes as token ids: valid ones decode, others must throw Error.
  for (size_t i = 0; i + 4 <= payload.size() && i < 64; i += 4) {
    int32_t id;
    std::memcpy(&id, payload.data() + i, 4);
    try {
      (void)tok.token_to_piece(id % (tok.n_vocab() + 2), (mode & 2) != 0);
    } catch (const Error&) {
    }
  }
  return 0;
}
