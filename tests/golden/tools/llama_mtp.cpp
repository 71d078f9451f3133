// llama_mtp: llama.cpp's NextN/MTP draft head on a token list, the MTP part
// of a golden case (tests/golden/README.md, "MTP cases"). Not part of sluice's
// build: compiled by tests/golden/make_reference.sh against a llama.cpp
// checkout's headers (src/llama-ext.h, the staging API llama.cpp's own MTP
// drafting uses) and libllama.so.
//
// Usage: llama_mtp MODEL.gguf OUT_DIR TOKENS K
//   TOKENS: comma-separated ids ("bos": the vocabulary's BOS id). Drives the
//   head as common/speculative.cpp's draft-mtp does: a trunk context that
//   outputs h_nextn for every row, an MTP context (LLAMA_CONTEXT_TYPE_MTP) whose
//   row at position p is (token t_p, trunk hidden h_{p-1}), h_{-1} = 0.
//   Writes to OUT_DIR (raw little-endian float32, row-major, no header):
//     h_nextn.f32       [n][n_embd]    h_p, the trunk's hidden state after output_norm (deepseek4:
//                                      its last streams before the hyper-connection head, hc x n_embd
//                                      wide; every [n_embd] here is llama_model_n_embd_out)
//     mtp_logits.f32    [n-1][n_vocab] row i: draft logits of the MTP row at position i+1
//                                      (all n rows in ONE llama_decode, 2 threads)
//     mtp_logits_t1.f32 the same with 1 thread
//     mtp_logits_inc.f32 the same rows, one llama_decode per row (2 threads)
//     mtp_h.f32         [n-1][n_embd]  row i: g of the MTP row at position i (after shared_head_norm;
//                                      deepseek4: the block's streams, what a chained step reads),
//                                      i = 0..n-2 (the layout of shared/golden's mtp_h files)
//     mtp_chain.f32     [n-1][K][n_vocab] anchor m = 1..n-1: step 1 decodes (t_m, h_{m-1}) at
//                                      position m, step k >= 2 (d_{k-1}, g_{k-1}) at m+k-1 with
//                                      d = the previous step's argmax (ties -> lowest id); then the
//                                      rows past m are removed (llama_memory_seq_rm)
//     mtp_chain_t1.f32  the same with 1 thread
//   and chain.txt: per anchor, "d_1 .. d_K | margin_1 .. margin_K".
// Context: n_ctx 512, n_batch = n_ubatch = 512, F32 KV cache, flash attention off.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"
#include "llama_common.h"
#include "../src/llama-ext.h"

namespace golden {
const char* const kTool = "llama_mtp";
}  // namespace golden

namespace {

using golden::Ctx;
using golden::die;
using golden::write_f32;

// The trunk hands every row's hidden state on; the MTP context only the rows asked for.
llama_context* make_ctx(llama_model* model, int threads, bool mtp) {
  llama_context* c = golden::make_ctx(model, threads, /*f16_fa=*/false,
                                      mtp ? LLAMA_CONTEXT_TYPE_MTP : LLAMA_CONTEXT_TYPE_DEFAULT);
  llama_set_embeddings_nextn(c, true, /*masked=*/mtp);
  return c;
}

// A batch whose rows carry both a token id and an n_embd vector (MTP rows).
struct Rows {
  llama_batch b;
  explicit Rows(int n, int n_embd) {
    b = llama_batch_init(n, n_embd, 1);  // allocates embd, not token
    b.token = static_cast<llama_token*>(std::malloc(sizeof(llama_token) * n));
    b.n_tokens = 0;
  }
  ~Rows() { llama_batch_free(b); }  // frees token too
  void add(llama_token t, const float* h, int n_embd, int pos, bool out) {
    const int i = b.n_tokens++;
    b.token[i] = t;
    if (h) std::memcpy(b.embd + static_cast<size_t>(i) * n_embd, h, sizeof(float) * n_embd);
    else std::memset(b.embd + static_cast<size_t>(i) * n_embd, 0, sizeof(float) * n_embd);
    b.pos[i] = pos;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = out;
  }
};

// The trunk's h_nextn at every position, from one batch.
std::vector<float> trunk_hidden(llama_model* m, const std::vector<int32_t>& t, int n_embd) {
  Ctx c{make_ctx(m, 2, false)};
  const int n = static_cast<int>(t.size());
  llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    b.token[i] = t[i];
    b.pos[i] = i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = true;
  }
  b.n_tokens = n;
  if (llama_decode(c.ctx, b) != 0) die("trunk llama_decode failed");
  std::vector<float> h;
  for (int i = 0; i < n; ++i) {
    const float* r = llama_get_embeddings_nextn_ith(c.ctx, i);
    if (!r) die("the trunk gave no h_nextn (does this architecture have an MTP graph?)");
    h.insert(h.end(), r, r + n_embd);
  }
  llama_batch_free(b);
  return h;
}

const float* row(const std::vector<float>& v, int i, int w) { return v.data() + static_cast<size_t>(i) * w; }

// All n MTP rows in one decode (incremental: one decode per row): the logits
// of positions 1..n-1 and g of positions 0..n-2.
void mtp_rows(llama_model* m, const std::vector<int32_t>& t, const std::vector<float>& h, int n_embd, int nv,
              int threads, bool incremental, std::vector<float>* logits, std::vector<float>* g) {
  Ctx c{make_ctx(m, threads, true)};
  const int n = static_cast<int>(t.size());
  auto take = [&](int batch_i, int pos) {
    if (pos >= 1) {
      const float* l = llama_get_logits_ith(c.ctx, batch_i);
      if (!l) die("no MTP logits");
      logits->insert(logits->end(), l, l + nv);
    }
    if (g && pos + 1 < n) {
      const float* r = llama_get_embeddings_nextn_ith(c.ctx, batch_i);
      if (!r) die("no MTP h_nextn");
      g->insert(g->end(), r, r + n_embd);
    }
  };
  if (!incremental) {
    Rows r(n, n_embd);
    for (int p = 0; p < n; ++p) r.add(t[p], p ? row(h, p - 1, n_embd) : nullptr, n_embd, p, true);
    if (llama_decode(c.ctx, r.b) != 0) die("MTP llama_decode failed");
    for (int p = 0; p < n; ++p) take(p, p);
    return;
  }
  for (int p = 0; p < n; ++p) {
    Rows r(1, n_embd);
    r.add(t[p], p ? row(h, p - 1, n_embd) : nullptr, n_embd, p, true);
    if (llama_decode(c.ctx, r.b) != 0) die("MTP llama_decode failed");
    take(0, p);
  }
}

// Chained drafts of K steps from every anchor m = 1..n-1 (see the header).
std::vector<float> chain(llama_model* m, const std::vector<int32_t>& t, const std::vector<float>& h, int n_embd,
                         int nv, int K, int threads, std::vector<std::string>* lines) {
  Ctx c{make_ctx(m, threads, true)};
  const int n = static_cast<int>(t.size());
  std::vector<float> out;
  {
    Rows r(1, n_embd);
    r.add(t[0], nullptr, n_embd, 0, true);
    if (llama_decode(c.ctx, r.b) != 0) die("MTP llama_decode failed");
  }
  for (int a = 1; a < n; ++a) {
    llama_token tok = t[a];
    std::vector<float> hid(row(h, a - 1, n_embd), row(h, a - 1, n_embd) + n_embd);
    std::string drafts, margins;
    for (int k = 0; k < K; ++k) {
      Rows r(1, n_embd);
      r.add(tok, hid.data(), n_embd, a + k, true);
      if (llama_decode(c.ctx, r.b) != 0) die("MTP llama_decode failed");
      const float* l = llama_get_logits_ith(c.ctx, 0);
      const float* gr = llama_get_embeddings_nextn_ith(c.ctx, 0);
      if (!l || !gr) die("no MTP output in a chain step");
      out.insert(out.end(), l, l + nv);
      int best = 0;
      for (int v = 1; v < nv; ++v)
        if (l[v] > l[best]) best = v;
      float second = -1e30f;
      for (int v = 0; v < nv; ++v)
        if (v != best && l[v] > second) second = l[v];
      drafts += std::to_string(best) + " ";
      margins += " " + std::to_string(l[best] - second);
      tok = best;
      hid.assign(gr, gr + n_embd);
    }
    if (!llama_memory_seq_rm(llama_get_memory(c.ctx), 0, a + 1, -1)) die("llama_memory_seq_rm failed");
    if (lines) lines->push_back(drafts + "|" + margins);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) die("usage: llama_mtp MODEL.gguf OUT_DIR TOKENS K");
  const std::string model_path = argv[1], out = argv[2];
  std::vector<std::string> items;
  {
    std::stringstream ss(argv[3]);
    std::string item;
    while (std::getline(ss, item, ',')) items.push_back(item);
  }
  const int K = std::atoi(argv[4]);
  if (items.size() < 2 || K < 1 || K > 8) die("bad TOKENS / K");

  llama_log_set(golden::quiet_log, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.load_mtp = true;  // what llama-server --spec-type draft-mtp sets
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) die("llama.cpp cannot load " + model_path);
  if (llama_model_n_layer_nextn(model) < 1) die(model_path + " has no NextN/MTP block");
  const llama_vocab* vocab = llama_model_get_vocab(model);
  // The hidden rows the head reads and hands on: n_embd, or deepseek4's hyper-connection
  // streams side by side (n_embd_out = hc x n_embd).
  const int nv = llama_vocab_n_tokens(vocab), n_embd = llama_model_n_embd_out(model);
  std::vector<int32_t> tokens;
  for (const std::string& item : items) tokens.push_back(item == "bos" ? llama_vocab_bos(vocab) : std::stoi(item));
  for (int32_t t : tokens)
    if (t < 0 || t >= nv) die("token " + std::to_string(t) + " out of the vocabulary");

  const std::vector<float> h = trunk_hidden(model, tokens, n_embd);
  write_f32(out + "/h_nextn.f32", h);
  std::vector<float> logits, g, logits_t1, logits_inc;
  mtp_rows(model, tokens, h, n_embd, nv, 2, false, &logits, &g);
  mtp_rows(model, tokens, h, n_embd, nv, 1, false, &logits_t1, nullptr);
  mtp_rows(model, tokens, h, n_embd, nv, 2, true, &logits_inc, nullptr);
  write_f32(out + "/mtp_logits.f32", logits);
  write_f32(out + "/mtp_logits_t1.f32", logits_t1);
  write_f32(out + "/mtp_logits_inc.f32", logits_inc);
  write_f32(out + "/mtp_h.f32", g);
  std::vector<std::string> lines;
  write_f32(out + "/mtp_chain.f32", chain(model, tokens, h, n_embd, nv, K, 2, &lines));
  write_f32(out + "/mtp_chain_t1.f32", chain(model, tokens, h, n_embd, nv, K, 1, nullptr));
  std::ofstream ct(out + "/chain.txt");
  for (const std::string& l : lines) ct << l << '\n';
  if (!ct) die("cannot write chain.txt");
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
