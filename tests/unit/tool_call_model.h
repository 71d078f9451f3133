// A tiny model that answers every Qwen3-style chat prompt with one Hermes
// tool call, deterministically: the end-to-end tool-call tests serve it.
//
// Construction (written with synth's llama plan, so names, shapes and keys
// are the loader's usual ones):
//   * vocabulary: synth's built-in byte-level BPE vocabulary (bytes, merges,
//     <|endoftext|>, <|im_start|>, <|im_end|> = EOS) plus three USER_DEFINED
//     tokens, as Qwen3's GGUFs mark <tool_call>: "<tool_call>", "</tool_call>"
//     and kCallBody, the whole call body in one token. The body carries the
//     newlines Qwen3 writes around it: a bigram chain cannot pass through "\n"
//     twice with two different successors, and the prompt already ends in one.
//   * weights: one dense block whose attn_output and ffn_down (all of
//     attention and the FFN, in fact) are zero, so the residual stream
//     entering the head is the last token's embedding: the model is a bigram
//     table. token_embd puts the chain's tokens on one-hot axes ("\n" -> 0,
//     <tool_call> -> 1, body -> 2, </tool_call> -> 3; every other token is
//     zero), output.weight gives the successor of axis k a weight of 1 on it
//     and every other token 0. After the RMS norm the successor's logit is
//     sqrt(n_embd) and all others 0, so greedy decoding after a prompt that
//     ends in "\n" (Qwen3's "<|im_start|>assistant\n") is
//       <tool_call> -> body -> </tool_call> -> <|im_end|> (end of generation),
//     i.e. the text "<tool_call>\n{...}\n</tool_call>".
//   * tokenizer.chat_template: the caller's (a real Qwen3 template).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "tools/synth.h"
#include "tools/synth_plan.h"

namespace sluice::test {

inline constexpr const char* kCallBody = "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n";

inline void write_tool_call_model(const std::string& path, const std::string& chat_template) {
  tools::SynthConfig cfg = tools::synth_preset("tiny", "llama");
  cfg.name = "tool-call-bigram";
  cfg.n_expert = 0;
  cfg.n_layer = 1;
  cfg.n_embd = 32;
  cfg.n_head = cfg.n_head_kv = 2;
  cfg.head_dim = 16;
  cfg.n_ff = 32;
  cfg.context_length = 2048;
  cfg.embd_type = cfg.output_type = cfg.attn_type = cfg.attn_v_type = GgmlType::F32;
  const tools::BuiltinVocab& vocab = tools::builtin_vocab();
  const uint32_t first_extra = static_cast<uint32_t>(vocab.tokens.size());
  cfg.n_vocab = first_extra + 3;  // synth pads with placeholders, renamed below
  tools::SynthPlan plan = tools::synth_plan(cfg);

  const std::vector<std::string> extra = {"<tool_call>", "</tool_call>", kCallBody};
  for (auto& [key, value] : plan.metadata) {
    for (size_t i = 0; i < extra.size(); ++i) {
      if (key == "tokenizer.ggml.tokens") value.array[first_extra + i].s = extra[i];
      if (key == "tokenizer.ggml.token_type") value.array[first_extra + i].i = value.array[first_extra + i].u = 4;
    }
  }
  plan.metadata.emplace_back("tokenizer.chat_template", gguf::Value::from_string(chat_template));

  // "\n" is byte 0x0A, which GPT-2's byte map writes as U+010A.
  const auto newline = std::find(vocab.tokens.begin(), vocab.tokens.end(), "\xC4\x8A") - vocab.tokens.begin();
  const std::vector<int64_t> chain = {newline, first_extra, first_extra + 2, first_extra + 1,
                                      static_cast<int64_t>(vocab.eos)};

  gguf::Writer w(path);
  for (auto& [key, value] : plan.metadata) w.add_metadata(key, value);
  for (const auto& t : plan.tensors) w.add_tensor(t.name, t.type, t.ne);
  w.write_header();
  for (const auto& t : plan.tensors) {
    const uint64_t row = t.ne[0];
    uint64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    std::vector<float> v(row * rows, 0.0f);
    if (t.name.ends_with("norm.weight")) std::fill(v.begin(), v.end(), 1.0f);
    for (size_t k = 0; k + 1 < chain.size(); ++k) {
      if (t.name == "token_embd.weight") v[chain[k] * row + k] = 1.0f;  // token chain[k] on axis k
      if (t.name == "output.weight") v[chain[k + 1] * row + k] = 1.0f;  // axis k votes for chain[k + 1]
    }
    w.write_tensor_data(v.data(), v.size() * sizeof(float));
  }
  w.finish();
}

}  // namespace sluice::test
