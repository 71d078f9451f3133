// What tests/golden's llama.cpp reference tools share (llama_logits.cpp,
// llama_mtp.cpp): the failure exit, the context every reference is made in
// (n_ctx 512, n_batch = n_ubatch = 512, one sequence, full-size SWA cache)
// and the log filter. Header-only: each tool is one compile against llama.cpp.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "llama.h"

namespace golden {

// The tool's name for its messages (each tool defines it).
extern const char* const kTool;

[[noreturn]] inline void die(const std::string& why) {
  std::fprintf(stderr, "%s: %s\n", kTool, why.c_str());
  std::exit(1);
}

// Frees the context when it goes out of scope.
struct Ctx {
  llama_context* ctx = nullptr;
  ~Ctx() {
    if (ctx) llama_free(ctx);
  }
};

// F32 KV cache without flash attention (the reference), or F16 with it (a
// noise-floor variant); `type`: LLAMA_CONTEXT_TYPE_DEFAULT or _MTP.
inline llama_context* make_ctx(llama_model* model, int threads, bool f16_fa,
                               llama_context_type type = LLAMA_CONTEXT_TYPE_DEFAULT) {
  llama_context_params p = llama_context_default_params();
  p.n_ctx = 512;
  p.n_batch = 512;
  p.n_ubatch = 512;
  p.n_seq_max = 1;
  p.n_threads = threads;
  p.n_threads_batch = threads;
  p.type_k = f16_fa ? GGML_TYPE_F16 : GGML_TYPE_F32;
  p.type_v = f16_fa ? GGML_TYPE_F16 : GGML_TYPE_F32;
  p.flash_attn_type = f16_fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
  p.swa_full = true;
  p.no_perf = true;
  p.ctx_type = type;
  llama_context* c = llama_init_from_model(model, p);
  if (!c) die("cannot create a context");
  return c;
}

inline void write_f32(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  if (!f) die("cannot write " + path);
}

// Errors and warnings only.
inline void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) std::fputs(text, stderr);
}

}  // namespace golden
