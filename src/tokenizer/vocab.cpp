// load_vocab: GGUF tokenizer metadata -> Vocab, with llama.cpp's defaults,
// per-pre-tokenizer flags and text-based special-token detection.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "tokenizer/pretokenizer.h"
#include "util/error.h"

namespace sluice::tokenizer {
namespace {

// GGUF token_type values (llama.cpp's llama_token_type).
uint32_t attr_from_type(int64_t type) {
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
  }
}

// Token texts that mark end of turn/generation in common chat vocabularies;
// GGUF files rarely list them all, so (like llama.cpp) they are found by text.
constexpr std::array<std::string_view, 11> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"};
constexpr std::array<std::string_view, 19> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>",
    "<eos>", "<turn|>", "<|tool_response>"};  // the last three: Gemma 4

bool contains(auto const& list, std::string_view s) { return std::find(list.begin(), list.end(), s) != list.end(); }

}  // namespace

std::string Vocab::merge_key(std::string_view left, std::string_view right) {
  std::string key;
  key.reserve(4 + left.size() + right.size());
  const uint32_t n = static_cast<uint32_t>(left.size());
  key.append(reinterpret_cast<const char*>(&n), sizeof n);
  key.append(left);
  key.append(right);
  return key;
}

Vocab load_vocab(const gguf::Metadata& md) {
  Vocab v;
  v.source = md.source().empty() ? std::string("GGUF") : md.source();

  auto model = md.get_string("tokenizer.ggml.model");
  if (!model) fail(v.source, "missing metadata key tokenizer.ggml.model (no tokenizer in this file)");
  v.model_name = *model;
  v.pre_name = md.get_string("tokenizer.ggml.pre").value_or("");

  if (v.model_name == "llama") {
    v.kind = VocabKind::kSpm;
    v.bos = 1, v.eos = 2, v.unk = 0;
    v.add_space_prefix = true;
    v.add_bos = true;
  } else if (v.model_name == "gpt2") {
    v.kind = VocabKind::kBpe;
    v.bos = 11, v.eos = 11;  // llama.cpp's BPE defaults, used only when the keys are absent
    const PreInfo pre = lookup_pre(v.pre_name);
    v.ignore_merges = pre.ignore_merges;
    v.add_bos = pre.add_bos;
    if (pre.no_bos) v.bos = kNoToken;
  } else if (v.model_name == "gemma4") {
    // Gemma 4's BPE (llama.cpp's "gemma4" model): its own pre-tokenizer
    // whatever tokenizer.ggml.pre says, special ids only from the keys.
    v.kind = VocabKind::kBpe;
    v.pre_name = "gemma4";
  } else {
    fail(v.source, "unsupported tokenizer.ggml.model '" + v.model_name + "' (supported: llama, gpt2, gemma4)");
  }
  if (v.kind == VocabKind::kBpe) v.spm_bpe = lookup_pre(v.pre_name).spm_bpe;
  if (auto b = md.get_bool("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = *b;

  auto tokens = md.get_string_array("tokenizer.ggml.tokens");
  if (!tokens || tokens->empty()) fail(v.source, "missing or empty metadata array tokenizer.ggml.tokens");
  const size_t n = tokens->size();
  if (n > static_cast<size_t>(INT32_MAX)) fail(v.source, "tokenizer.ggml.tokens has too many entries");
  auto scores = md.get_float_array("tokenizer.ggml.scores");
  auto types = md.get_int_array("tokenizer.ggml.token_type");
  if (scores && scores->size() != n)
    fail(v.source, "tokenizer.ggml.scores has " + std::to_string(scores->size()) + " entries, expected " + std::to_string(n));
  if (types && types->size() != n)
    fail(v.source, "tokenizer.ggml.token_type has " + std::to_string(types->size()) + " entries, expected " +
              std::to_string(n));

  v.texts = std::move(*tokens);
  v.scores.assign(n, 0.0f);
  v.attrs.assign(n, kAttrNormal);
  v.text_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (v.texts[i].empty()) v.texts[i] = "[EMPTY_" + std::to_string(i) + "]";  // keep lookups unambiguous
    v.text_to_id[v.texts[i]] = static_cast<int32_t>(i);
    if (scores) v.scores[i] = (*scores)[i];
    if (types) v.attrs[i] = attr_from_type((*types)[i]);
  }

  if (v.kind == VocabKind::kBpe) {
    auto merges = md.get_string_array("tokenizer.ggml.merges");
    if (!merges && v.pre_name != "kimi-k2") fail(v.source, "missing metadata array tokenizer.ggml.merges (BPE vocab)");
    if (merges) {
      v.merge_ranks.reserve(merges->size());
      for (size_t i = 0; i < merges->size(); ++i) {
        const std::string& m = (*merges)[i];
        const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string::npos;
        if (sp == std::string::npos) continue;  // malformed line: no pair, never matches
        v.merge_ranks.emplace(Vocab::merge_key(std::string_view(m).substr(0, sp), std::string_view(m).substr(sp + 1)),
                              static_cast<int32_t>(i));
      }
    }
  }

  // Special ids: a key overrides the default only when it is a valid id.
  auto special = [&](const char* key, int32_t& id) {
    if (auto x = md.get_uint(key); x && *x < n) id = static_cast<int32_t>(*x);
  };
  special("tokenizer.ggml.bos_token_id", v.bos);
  special("tokenizer.ggml.eos_token_id", v.eos);
  special("tokenizer.ggml.eot_token_id", v.eot);
  special("tokenizer.ggml.eom_token_id", v.eom);
  special("tokenizer.ggml.unknown_token_id", v.unk);
  special("tokenizer.ggml.padding_token_id", v.pad);
  if (v.bos >= static_cast<int64_t>(n)) v.bos = kNoToken;
  if (v.eos >= static_cast<int64_t>(n)) v.eos = kNoToken;
  if (v.unk >= static_cast<int64_t>(n)) v.unk = kNoToken;
  if (auto b = md.get_bool("tokenizer.ggml.add_bos_token")) v.add_bos = *b;
  if (auto b = md.get_bool("tokenizer.ggml.add_eos_token")) v.add_eos = *b;
  if (v.spm_bpe) v.add_bos = true;  // llama.cpp overrides add_bos_token = false for Gemma 4

  // Text-based detection of end-of-turn tokens; such tokens are forced to CONTROL.
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = v.texts[i];
    const auto id = static_cast<int32_t>(i);
    if (v.eot == kNoToken && contains(kEotTexts, t)) v.eot = id, v.attrs[i] |= kAttrControl;
    if (v.eom == kNoToken && t == "<|eom_id|>") v.eom = id, v.attrs[i] |= kAttrControl;
  }
  for (size_t i = 0; i < n; ++i) {
    if (contains(kEogTexts, v.texts[i])) {
      v.eog.insert(static_cast<int32_t>(i));
      v.attrs[i] |= kAttrControl;
    }
  }
  // gpt-oss (harmony) structural tokens are always rendered.
  for (std::string_view t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (int32_t id = v.find(t); id != kNoToken) v.attrs[id] = kAttrUserDefined;
  }
  for (int32_t id : {v.eos, v.eot, v.eom}) {
    if (id != kNoToken) v.eog.insert(id);
  }
  // Harmony / solar-open: "<|end|>" ends a message, not the generation.
  auto eog_has = [&](std::string_view t) {
    int32_t id = v.find(t);
    return id != kNoToken && v.eog.count(id) > 0;
  };
  if ((eog_has("<|return|>") || eog_has("<|flush|>")) && (eog_has("<|call|>") || eog_has("<|calls|>")) &&
      eog_has("<|end|>")) {
    const int32_t end = v.find("<|end|>");
    v.eog.erase(end);
    v.attrs[end] = kAttrUserDefined;
  }

  // Gemma 4 (as llama.cpp): with <|tool_response> ending generation, "</s>"
  // is ordinary text, not an end of generation.
  if (eog_has("<|tool_response>") && eog_has("</s>")) {
    const int32_t s = v.find("</s>");
    v.eog.erase(s);
    v.attrs[s] = kAttrNormal;
  }

  for (size_t i = 0; i < n; ++i) {
    if (v.attrs[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) v.special_by_length.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(v.special_by_length.begin(), v.special_by_length.end(), [&](int32_t a, int32_t b) {
    return v.texts[a].size() > v.texts[b].size();
  });
  return v;
}

}  // namespace sluice::tokenizer
