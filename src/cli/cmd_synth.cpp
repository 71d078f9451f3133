// `sluice synth -o OUT.gguf [--preset NAME] [--arch ARCH] [overrides]`: writes a
// random-weight model with a real architecture's layout (see tools/synth.h).
// The presets and architectures are listed from tools::synth_preset_names and
// the architecture registry; nothing here knows an architecture.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "gguf/gguf.h"
#include "io/output_file.h"
#include "tools/routing_probe.h"
#include "tools/synth.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct SynthOptions {
  std::string out, preset = "tiny", arch, vocab, type, dense_type, quant_mode = "auto";
  std::optional<uint32_t> layers, experts, experts_used, n_embd, n_ff_exp, n_ff, heads, kv_heads, head_dim,
      vocab_size, context_length, sliding_window, nextn;
  std::optional<uint64_t> seed;
  std::optional<float> routing_skew;
  unsigned threads = 0;
  bool quiet = false;
  bool zero_data = false;
  bool force = false;
  bool mtp = false;
};

std::string joined(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : sep) + n;
  return s;
}

GgmlType parse_type(const std::string& s, const char* flag) {
  const auto t = ggml_type_from_name(s);
  if (!t) fail(flag, "unknown tensor type '" + s + "'");
  return *t;
}

void run_synth(const SynthOptions& o) {
  tools::SynthConfig c = tools::synth_preset(o.preset, o.arch);
  if (o.layers) c.n_layer = *o.layers;
  if (o.experts) c.n_expert = *o.experts;
  if (o.experts_used) c.n_expert_used = *o.experts_used;
  if (o.n_embd) c.n_embd = *o.n_embd;
  if (o.n_ff_exp) c.n_ff_exp = *o.n_ff_exp;
  if (o.n_ff) c.n_ff = *o.n_ff;
  if (o.heads) c.n_head = *o.heads;
  if (o.kv_heads) c.n_head_kv = *o.kv_heads;
  if (o.head_dim) c.head_dim = *o.head_dim;
  if (o.vocab_size) c.n_vocab = *o.vocab_size;
  if (o.context_length) c.context_length = *o.context_length;
  if (o.sliding_window) c.n_swa = *o.sliding_window;
  if (o.nextn) c.n_nextn = *o.nextn;
  if (o.mtp) c.n_nextn = 1;
  c.zero_data = o.zero_data;
  if (o.seed) c.seed = *o.seed;
  if (o.routing_skew) c.routing_skew = *o.routing_skew;
  if (!o.vocab.empty()) {
    c.vocab_path = o.vocab;
    if (!o.vocab_size) c.n_vocab = 0;  // the vocabulary file decides
  }
  if (!o.type.empty()) c.expert_type = c.down_type = parse_type(o.type, "--type");
  if (!o.dense_type.empty())
    c.attn_type = c.attn_v_type = c.embd_type = c.output_type = parse_type(o.dense_type, "--dense-type");
  // An explicit type replaces the preset's Q4_K_M mix, Q6_K blocks included.
  if (!o.type.empty() || !o.dense_type.empty()) c.q4_k_m_more_bits = false;
  if (o.quant_mode == "auto") c.quant_mode = tools::QuantMode::Auto;
  else if (o.quant_mode == "exact") c.quant_mode = tools::QuantMode::Exact;
  else if (o.quant_mode == "direct") c.quant_mode = tools::QuantMode::Direct;
  else fail("--quant-mode", "expected auto, exact or direct, got '" + o.quant_mode + "'");

  // Refused before any work: OUT is the --vocab file, or exists without --force.
  io::OutputFile out(o.out, {.flag = "-o", .inputs = {o.vocab}, .overwrite = o.force});
  const tools::SynthResult r = tools::synth_model(c, out, o.threads, {.print = !o.quiet});
  std::fprintf(stderr, "synth: wrote %s: %llu tensors, %.1f MiB in %.1f s (%.1f MB/s, %s)\n",
               o.out.c_str(), static_cast<unsigned long long>(r.n_tensors), r.bytes / 1048576.0, r.seconds,
               r.seconds > 0 ? r.bytes / 1e6 / r.seconds : 0.0,
               c.zero_data ? "no data: zero-filled hole" : r.direct ? "direct-block quantization" : "exact quantization");
  // The first routed block (some architectures lead with dense blocks).
  if (!o.quiet && !c.zero_data && r.router_layer >= 0 && out.renames()) {  // a pipe or device cannot be read back
    const auto layer = static_cast<uint32_t>(r.router_layer);
    const tools::RoutingStats st = tools::probe_routing(gguf::GgufModel::open(o.out), layer, 2048);
    std::fprintf(stderr, "synth: layer-%u router on %llu token embeddings: busiest expert takes %.1f%% of top-%u "
                 "selections (uniform %.1f%%)\n", layer, static_cast<unsigned long long>(st.n_tokens), 100 * st.top_share(),
                 st.top_k, 100 * st.uniform_share());
  }
}

}  // namespace

void register_synth(CLI::App& app) {
  auto o = std::make_shared<SynthOptions>();
  CLI::App* cmd = app.add_subcommand("synth", "Write a random-weight GGUF with a real architecture's layout");
  cmd->add_option("-o,--output", o->out, "Output GGUF path")->required();
  cmd->add_option("--preset", o->preset, joined(tools::synth_preset_names(), " | "))->capture_default_str();
  cmd->add_option("--arch", o->arch,
                  joined(tools::synth_arch_names(), " | ") + " (default: the preset's; tiny is qwen3moe)");
  cmd->add_option("--layers", o->layers, "Number of trunk blocks (--nextn blocks come on top; a real-model preset's can only be cut)");
  cmd->add_option("--experts", o->experts, "Experts per layer (llama: 0 = dense)");
  cmd->add_option("--experts-used", o->experts_used, "Experts per token (top-k)");
  cmd->add_option("--n-embd", o->n_embd, "Embedding width");
  cmd->add_option("--n-ff-exp", o->n_ff_exp, "Expert FFN width");
  cmd->add_option("--n-ff", o->n_ff, "feed_forward_length metadata");
  cmd->add_option("--heads", o->heads, "Query heads");
  cmd->add_option("--kv-heads", o->kv_heads, "Key/value heads");
  cmd->add_option("--head-dim", o->head_dim, "Head dimension");
  cmd->add_option("--vocab-size", o->vocab_size, "Vocabulary size (pads the vocabulary with <|extra_N|>)");
  cmd->add_option("--context-length", o->context_length, "context_length metadata");
  cmd->add_option("--sliding-window", o->sliding_window, "gpt-oss attention.sliding_window");
  auto* nextn = cmd->add_option(
      "--nextn", o->nextn,
      "NextN/MTP blocks after the --layers trunk blocks, for architectures that have them (default: the preset's)");
  cmd->add_flag("--mtp", o->mtp, "Write one NextN/MTP block (--nextn 1)")->excludes(nextn);
  cmd->add_option("--type", o->type, "Type of the expert tensors (e.g. Q4_K)");
  cmd->add_option("--dense-type", o->dense_type, "Type of attention, embedding and output matrices");
  cmd->add_option("--quant-mode", o->quant_mode, "auto | exact | direct (random quantized blocks)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Random seed");
  cmd->add_option("--routing-skew", o->routing_skew, "Spread of per-expert router bias (0 = near-uniform)");
  cmd->add_option("--vocab", o->vocab, "Copy tokenizer.* metadata from this GGUF");
  cmd->add_option("--threads", o->threads, "Worker threads (0 = all cores); output does not depend on it");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress output");
  cmd->add_flag("--zero-data", o->zero_data,
                "Header and tensor table only; tensor data is a sparse hole of zeros (for inspect/sizing)");
  cmd->add_flag("--force", o->force, "Overwrite the output file if it exists (never the --vocab file)");
  cmd->callback([o] { run_synth(*o); });
}

}  // namespace sluice::cli
