// llama_logits: llama.cpp's logits for a token list, the reference of a
// golden case (tests/golden/README.md). Not part of sluice's build: compiled by
// tests/golden/make_reference.sh against a llama.cpp checkout's headers and
// libllama.so.
//
// Usage: llama_logits MODEL.gguf OUT_DIR TOKENS PROMPT_LEN N_GEN
//   TOKENS: comma-separated ids ("bos": the vocabulary's BOS id). Writes to OUT_DIR (raw little-endian float32,
//   row-major [n_tokens][n_vocab]):
//     batch_t2.f32   every position, ONE llama_decode, 2 threads  (the reference)
//     batch_t1.f32   the same with 1 thread
//     decode_t2.f32  one llama_decode per token, 2 threads
//     fa_f16.f32     one batch, F16 KV cache + flash attention, 2 threads
//   and greedy.txt: three lines "t2: ids", "t1: ids", "margins: m..." of the
//   greedy continuation (TOKENS[:PROMPT_LEN] in one batch, then N_GEN steps one
//   token per llama_decode, argmax with ties to the lowest id), and info.txt
//   (llama_print_system_info, n_vocab) and tokens.txt (the resolved ids).
// Context: n_ctx 512, n_batch = n_ubatch = 512, one sequence, F32 KV cache,
// flash attention off (except fa_f16), full-size SWA cache.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"
#include "llama_common.h"

namespace golden {
const char* const kTool = "llama_logits";
}  // namespace golden

namespace {

using golden::Ctx;
using golden::die;
using golden::make_ctx;
using golden::write_f32;

// Decodes tokens[0..n) at positions pos0.. in one call; logits of every row
// (want_all) or of the last only. Returns those rows.
std::vector<float> decode(llama_context* c, const int32_t* tokens, int n, int pos0, bool want_all, int n_vocab) {
  llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    b.token[i] = tokens[i];
    b.pos[i] = pos0 + i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = want_all || i + 1 == n;
  }
  b.n_tokens = n;
  if (llama_decode(c, b) != 0) die("llama_decode failed");
  std::vector<float> out;
  for (int i = want_all ? 0 : n - 1; i < n; ++i) {
    const float* l = llama_get_logits_ith(c, i);
    if (!l) die("no logits");
    out.insert(out.end(), l, l + n_vocab);
  }
  llama_batch_free(b);
  return out;
}

std::vector<float> batch_logits(llama_model* m, const std::vector<int32_t>& t, int threads, bool f16_fa, int nv) {
  Ctx c{make_ctx(m, threads, f16_fa)};
  return decode(c.ctx, t.data(), static_cast<int>(t.size()), 0, true, nv);
}

std::vector<float> decode_logits(llama_model* m, const std::vector<int32_t>& t, int threads, int nv) {
  Ctx c{make_ctx(m, threads, false)};
  std::vector<float> all;
  for (size_t i = 0; i < t.size(); ++i) {
    const auto row = decode(c.ctx, &t[i], 1, static_cast<int>(i), true, nv);
    all.insert(all.end(), row.begin(), row.end());
  }
  return all;
}

// Greedy continuation; margins[k] = top1 - top2 of the logits step k picks from.
std::vector<int32_t> greedy(llama_model* m, const std::vector<int32_t>& prompt, int n_gen, int threads, int nv,
                            std::vector<float>* margins) {
  Ctx c{make_ctx(m, threads, false)};
  std::vector<float> last = decode(c.ctx, prompt.data(), static_cast<int>(prompt.size()), 0, false, nv);
  std::vector<int32_t> out;
  int pos = static_cast<int>(prompt.size());
  for (int k = 0; k < n_gen; ++k) {
    int best = 0;
    for (int v = 1; v < nv; ++v)
      if (last[v] > last[best]) best = v;
    float second = -1e30f;
    for (int v = 0; v < nv; ++v)
      if (v != best && last[v] > second) second = last[v];
    if (margins) margins->push_back(last[best] - second);
    out.push_back(best);
    if (k + 1 == n_gen) break;
    const int32_t one = best;
    last = decode(c.ctx, &one, 1, pos++, false, nv);
  }
  return out;
}

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) die("usage: llama_logits MODEL.gguf OUT_DIR TOKENS PROMPT_LEN N_GEN");
  const std::string model_path = argv[1], out = argv[2];
  std::vector<std::string> items;
  {
    std::stringstream ss(argv[3]);
    std::string item;
    while (std::getline(ss, item, ',')) items.push_back(item);
  }
  const int prompt_len = std::atoi(argv[4]), n_gen = std::atoi(argv[5]);
  if (items.empty() || prompt_len <= 0 || prompt_len > static_cast<int>(items.size()) || n_gen <= 0)
    die("bad TOKENS / PROMPT_LEN / N_GEN");

  llama_log_set(golden::quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) die("llama.cpp cannot load " + model_path);
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int nv = llama_vocab_n_tokens(vocab);
  std::vector<int32_t> tokens;
  for (const std::string& item : items) tokens.push_back(item == "bos" ? llama_vocab_bos(vocab) : std::stoi(item));
  for (int32_t t : tokens)
    if (t < 0 || t >= nv) die("token " + std::to_string(t) + " out of the vocabulary");

  write_f32(out + "/batch_t2.f32", batch_logits(model, tokens, 2, false, nv));
  write_f32(out + "/batch_t1.f32", batch_logits(model, tokens, 1, false, nv));
  write_f32(out + "/decode_t2.f32", decode_logits(model, tokens, 2, nv));
  write_f32(out + "/fa_f16.f32", batch_logits(model, tokens, 2, true, nv));

  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + prompt_len);
  std::vector<float> margins;
  const auto g2 = greedy(model, prompt, n_gen, 2, nv, &margins);
  const auto g1 = greedy(model, prompt, n_gen, 1, nv, nullptr);
  std::ofstream g(out + "/greedy.txt");
  g << "t2: " << join(g2) << "\nt1: " << join(g1) << "\nmargins:";
  for (float m : margins) g << ' ' << m;
  g << '\n';
  std::ofstream(out + "/tokens.txt") << join(tokens) << '\n';
  std::ofstream info(out + "/info.txt");
  info << "n_vocab " << nv << "\nsystem_info " << llama_print_system_info() << '\n';
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
