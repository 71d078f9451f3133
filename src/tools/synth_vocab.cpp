// Tokenizer metadata for synthesized models: either copied from a vocabulary
// GGUF (--vocab) or a small built-in byte-level BPE vocabulary in the form
// llama.cpp's "gpt2" tokenizer model expects (pre-tokenizer "qwen2").
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tools/synth.h"
#include "util/error.h"

namespace sluice::tools {
namespace {

// Token types as llama.cpp numbers them (llama_token_type).
constexpr int32_t kTypeNormal = 1;
constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeUnused = 5;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's reversible byte -> printable code point map: printable Latin-1 bytes
// map to themselves, the other 68 bytes to U+0100 onwards in byte order.
// Returns the bytes in GPT-2's token order (printable ones first) with their code points.
std::vector<std::pair<uint8_t, uint32_t>> byte_to_unicode() {
  std::vector<std::pair<uint8_t, uint32_t>> out;
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
  for (int b = 0; b < 256; ++b)
    if (printable(b)) out.emplace_back(static_cast<uint8_t>(b), static_cast<uint32_t>(b));
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b)
    if (!printable(b)) out.emplace_back(static_cast<uint8_t>(b), next++);
  return out;
}

// Merges are learnt on this text (plain ASCII, written for this purpose).
constexpr const char* kMergeText =
    "the quick brown fox jumps over the lazy dog and the cat sat on the mat while the sun was shining "
    "there is a little house at the end of the road where an old man lives with his dog and his garden "
    "in the morning he walks to the river to watch the water and the birds that fly over the trees "
    "she said that they would come back in the evening to have dinner with their friends and family "
    "this is one of the most important things that we have learned from the history of the world "
    "people often think about what they want to do with their time and how they can make it better "
    "when it was raining the children played inside the house and read stories about the sea "
    "after the meeting everyone went home and the streets were quiet under the light of the moon "
    "the model reads the input and predicts the next word one token at a time from left to right "
    "there are many ways to solve a problem but the simplest one is often the best for everyone "
    "he wanted to know where the train was going and when it would arrive at the station "
    "we are going to the market to buy some bread and fruit for the weekend with our neighbours "
    "it is important to remember that learning takes time and practice and patience every day "
    "the weather in the north was cold and windy but in the south it was warm and bright "
    "they were walking along the beach when they found a small boat that had been left there";

std::vector<std::string> learn_merges(const std::vector<std::pair<uint8_t, uint32_t>>& b2u, size_t n_merges) {
  std::string byte_sym[256];
  for (const auto& [b, cp] : b2u) byte_sym[b] = utf8(cp);
  // Pre-tokenize: words carry their leading space (as 'Ġ'), like qwen2's regex.
  std::map<std::string, int> word_counts;
  std::string text = kMergeText, cur;
  for (char c : text) {
    if (c == ' ') {
      if (!cur.empty()) ++word_counts[cur];
      cur = " ";
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) ++word_counts[cur];
  std::vector<std::pair<std::vector<std::string>, int>> words;
  for (const auto& [w, n] : word_counts) {
    std::vector<std::string> syms;
    for (unsigned char c : w) syms.push_back(byte_sym[c]);
    words.emplace_back(std::move(syms), n);
  }
  std::vector<std::string> merges;
  while (merges.size() < n_merges) {
    std::map<std::pair<std::string, std::string>, int> pairs;  // ordered: ties resolve deterministically
    for (const auto& [syms, n] : words)
      for (size_t i = 0; i + 1 < syms.size(); ++i) pairs[{syms[i], syms[i + 1]}] += n;
    if (pairs.empty()) break;
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second) best = it;
    const auto [a, b] = best->first;
    merges.push_back(a + " " + b);
    for (auto& [syms, n] : words) {
      std::vector<std::string> merged;
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) {
          merged.push_back(a + b);
          ++i;
        } else {
          merged.push_back(syms[i]);
        }
      }
      syms = std::move(merged);
    }
  }
  return merges;
}

BuiltinVocab make_builtin_vocab() {
  BuiltinVocab v;
  const auto b2u = byte_to_unicode();
  for (const auto& [b, cp] : b2u) {
    v.tokens.push_back(utf8(cp));
    v.token_types.push_back(kTypeNormal);
  }
  // 256 bytes + 253 merges + 3 control tokens = 512 tokens.
  v.merges = learn_merges(b2u, 253);
  for (const auto& m : v.merges) {
    const size_t sp = m.find(' ');
    v.tokens.push_back(m.substr(0, sp) + m.substr(sp + 1));
    v.token_types.push_back(kTypeNormal);
  }
  auto add_control = [&](const char* s) {
    v.tokens.emplace_back(s);
    v.token_types.push_back(kTypeControl);
    return static_cast<uint32_t>(v.tokens.size() - 1);
  };
  v.pad = v.bos = add_control("<|endoftext|>");
  add_control("<|im_start|>");
  v.eos = add_control("<|im_end|>");
  return v;
}

}  // namespace

const BuiltinVocab& builtin_vocab() {
  static const BuiltinVocab v = make_builtin_vocab();
  return v;
}

std::vector<std::pair<std::string, gguf::Value>> synth_vocab(const std::string& vocab_path, uint32_t n_vocab,
                                                             uint32_t* vocab_size) {
  std::vector<std::pair<std::string, gguf::Value>> out;
  if (vocab_path.empty()) {
    const BuiltinVocab& v = builtin_vocab();
    out.emplace_back("tokenizer.ggml.model", gguf::Value::from_string("gpt2"));
    out.emplace_back("tokenizer.ggml.pre", gguf::Value::from_string("qwen2"));
    out.emplace_back("tokenizer.ggml.tokens", gguf::Value::from_strings(v.tokens));
    out.emplace_back("tokenizer.ggml.token_type", gguf::Value::from_i32s(v.token_types));
    out.emplace_back("tokenizer.ggml.merges", gguf::Value::from_strings(v.merges));
    out.emplace_back("tokenizer.ggml.eos_token_id", gguf::Value::from_u32(v.eos));
    out.emplace_back("tokenizer.ggml.padding_token_id", gguf::Value::from_u32(v.pad));
    out.emplace_back("tokenizer.ggml.bos_token_id", gguf::Value::from_u32(v.bos));
    out.emplace_back("tokenizer.ggml.add_bos_token", gguf::Value::from_bool(false));
  } else {
    const gguf::GgufModel src = gguf::GgufModel::open(vocab_path);
    for (const auto& [key, value] : src.metadata().entries())
      if (key.rfind("tokenizer.", 0) == 0) out.emplace_back(key, value);
  }
  auto find = [&](const std::string& key) -> gguf::Value* {
    for (auto& [k, v] : out)
      if (k == key) return &v;
    return nullptr;
  };
  gguf::Value* tokens = find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != gguf::ValueType::ARRAY || tokens->elem_type != gguf::ValueType::STRING)
    fail(vocab_path, "--vocab: no tokenizer.ggml.tokens string array");
  const uint64_t have = tokens->array.size();
  if (n_vocab != 0 && n_vocab < have)
    fail("--vocab-size", std::to_string(n_vocab) + " is smaller than the vocabulary (" + std::to_string(have) +
                             " tokens)");
  if (n_vocab > have) {
    // Pad every per-token array in step with the tokens.
    gguf::Value* types = find("tokenizer.ggml.token_type");
    gguf::Value* scores = find("tokenizer.ggml.scores");
    for (uint64_t i = have; i < n_vocab; ++i) {
      gguf::Value t;
      t.type = gguf::ValueType::STRING;
      t.s = "<|extra_" + std::to_string(i - have) + "|>";
      tokens->array.push_back(std::move(t));
      if (types && types->type == gguf::ValueType::ARRAY && types->array.size() == i) {
        gguf::Value ty;
        ty.type = types->elem_type;
        ty.i = kTypeUnused;
        ty.u = kTypeUnused;
        types->array.push_back(ty);
      }
      if (scores && scores->type == gguf::ValueType::ARRAY && scores->array.size() == i) {
        gguf::Value sc;
        sc.type = scores->elem_type;
        sc.f = -1e9;
        scores->array.push_back(sc);
      }
    }
  }
  *vocab_size = static_cast<uint32_t>(tokens->array.size());
  return out;
}

}  // namespace sluice::tools
