// `sluice run`: tokenize a prompt, generate, stream the text to stdout; the
// telemetry summary (cli/telemetry_output.h) goes to stderr.
#include <cmath>
#include <charconv>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/load_progress.h"
#include "cli/stdout_output.h"
#include "cli/telemetry_output.h"
#include "io/text_input.h"
#include "runtime/session.h"
#include "runtime/stop_strings.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct RunOptions {
  runtime::EngineOptions engine;
  runtime::SamplerConfig sampler;
  std::string prompt;       // -p
  std::string prompt_file;  // -f
  int n_predict = 128;     // -n; -1: until end of sequence or the context is full
  int64_t seed = -1;       // -s; -1: random, printed
  std::vector<std::string> stop;  // --stop
  bool ignore_eos = false;
  std::string mtp = "0";   // --mtp N|auto|auto:N
  float mtp_p_min = 0.0f;  // --mtp-p-min
  TelemetryFlags telemetry;
};

// --mtp N (drafts per step; 0 off), auto (1 draft, switched off while it
// loses) or auto:N.
runtime::MtpOptions parse_mtp(const std::string& v, float p_min) {
  runtime::MtpOptions o;
  std::string depth = v;
  if (v == "auto" || v.rfind("auto:", 0) == 0) {
    o.automatic = true;
    depth = v == "auto" ? "1" : v.substr(5);
  }
  constexpr int kMaxDepth = 16;
  int n = -1;
  const auto [p, ec] = std::from_chars(depth.data(), depth.data() + depth.size(), n);
  if (depth.empty() || ec != std::errc() || p != depth.data() + depth.size() || n < 0 || n > kMaxDepth ||
      (o.automatic && n == 0))
    throw Error("--mtp: expected a number of drafts 0.." + std::to_string(kMaxDepth) + ", auto or auto:N (got '" +
                v + "')");
  o.depth = n;
  if (!(p_min >= 0.0f && p_min <= 1.0f)) throw Error("--mtp-p-min: must be in [0, 1] (got " + std::to_string(p_min) + ")");
  o.p_min = p_min;
  o.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  return o;
}

// The prompt from -p, or the whole of -f's file minus one trailing newline
// (as llama.cpp's -f does, so `echo text > f` and -p text agree).
std::string load_prompt(const RunOptions& o) {
  if (o.prompt_file.empty()) return o.prompt;
  std::string text = io::read_text_input(o.prompt_file, "-f");
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

// The throughput figures the streaming design is judged by, over the decode
// steps only (prefill reads experts for a whole batch at once, so mixing it in
// would hide the per-token cost).
void print_decode_io(const runtime::GenerationStats& st, const moe::ExpertIoStats& before,
                     const moe::ExpertIoStats& after) {
  if (st.decode_tokens <= 0) return;
  const double bytes = static_cast<double>(after.bytes_read - before.bytes_read);
  const double lane_s = after.io_seconds - before.io_seconds;
  const double stall_s = after.stall_seconds - before.stall_seconds;
  std::fprintf(stderr,
               "sluice: decode: %.1f MiB read per token; %.2f GB/s over decode wall time, %.2f GB/s per busy "
               "read lane (%.3f lane-s in pread); compute waited %.3f s on reads\n",
               bytes / 1048576.0 / st.decode_tokens, st.decode_seconds > 0 ? bytes / 1e9 / st.decode_seconds : 0.0,
               lane_s > 0 ? bytes / 1e9 / lane_s : 0.0, lane_s, stall_s);
}

// Each of these, out of range, would print nothing or garbage with status 0
// (--repeat-penalty 0 divides by zero); NaN fails every comparison, hence the
// negated forms.
void check_sampler(const runtime::SamplerConfig& s) {
  auto require = [](bool ok, const char* flag, float v, const char* range) {
    if (ok) return;
    char got[32];
    std::snprintf(got, sizeof got, "%g", static_cast<double>(v));
    throw Error(std::string(flag) + ": must be " + range + " (got " + got + ")");
  };
  require(std::isfinite(s.temperature) && s.temperature >= 0, "--temp", s.temperature, "a number >= 0 (0 = greedy)");
  require(s.top_p > 0 && s.top_p <= 1, "--top-p", s.top_p, "in (0, 1] (1 = off)");
  require(s.min_p >= 0 && s.min_p <= 1, "--min-p", s.min_p, "in [0, 1] (0 = off)");
  require(std::isfinite(s.repeat_penalty) && s.repeat_penalty > 0, "--repeat-penalty", s.repeat_penalty,
          "a number > 0 (1 = off)");
}

void run_generate(RunOptions& o) {
  if (o.n_predict < -1) throw Error("-n: must be >= 0, or -1 for no limit (got " + std::to_string(o.n_predict) + ")");
  if (o.seed < -1) throw Error("-s: seed must be >= 0, or -1 for a random one (got " + std::to_string(o.seed) + ")");
  // A random seed is printed, so any run can be repeated with -s.
  o.sampler.seed = o.seed >= 0 ? static_cast<uint64_t>(o.seed) : (uint64_t{std::random_device{}()} << 32 | std::random_device{}()) >> 1;
  if (o.seed < 0 && o.sampler.temperature > 0)
    std::fprintf(stderr, "sluice: seed %llu\n", static_cast<unsigned long long>(o.sampler.seed));
  check_sampler(o.sampler);
  const std::string text = load_prompt(o);
  o.engine.extra_inputs = {o.prompt_file};  // --route-trace must not replace it
  const runtime::MtpOptions mtp = parse_mtp(o.mtp, o.mtp_p_min);
  model::ModelConfig cfg = o.engine.to_model_config();
  cfg.on_dense_progress = tty_load_progress("sluice: loading dense weights");
  cfg.mtp = mtp.depth > 0;  // load the NextN head
  runtime::Session session = runtime::Session::open(o.engine.model_path, cfg);
  session.set_mtp(mtp);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(session.gguf().metadata());
  const std::vector<int32_t> prompt = tok.encode(text, true, false);
  if (prompt.empty()) {
    throw Error(std::string(o.prompt_file.empty() ? "-p" : "-f") +
                ": the prompt tokenizes to nothing (and the model adds no BOS)");
  }

  TelemetryOutput telemetry(o.telemetry, session, {o.prompt_file});
  out(text);
  flush_stdout();
  std::vector<int32_t> stop;
  if (!o.ignore_eos) {
    for (int32_t id : {tok.eos(), tok.eot()})
      if (id >= 0) stop.push_back(id);
  }
  runtime::Sampler sampler(o.sampler);
  // The first token arrives after prefill and before any decode step.
  std::optional<moe::ExpertIoStats> io_after_prefill;
  runtime::StopStrings stop_strings(o.stop);
  const runtime::GenerationStats st = session.generate(
      prompt, o.n_predict, sampler,
      [&](int32_t id) {
        if (!io_after_prefill) io_after_prefill = session.model().stats().io;
        out(stop_strings.push(tok.token_to_piece(id, false)));
        flush_stdout();
        return !stop_strings.stopped();
      },
      stop);
  out(stop_strings.flush());
  out("\n");
  if (st.context_full)
    std::fprintf(stderr, "sluice: context full (%d positions): generation stopped; raise -c for longer output\n",
                 session.model().n_ctx());
  flush_stdout();

  if (cfg.route_trace) cfg.route_trace->close();
  telemetry.finish();
  if (io_after_prefill) print_decode_io(st, *io_after_prefill, session.model().stats().io);
}

}  // namespace

void register_run(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "generate text from a prompt");
  add_engine_flags(cmd, opts->engine);
  CLI::Option* p = cmd->add_option("-p,--prompt", opts->prompt, "prompt text");
  CLI::Option* f =
      cmd->add_option("-f,--file", opts->prompt_file, "read the prompt from a file (- for stdin; at most 64 MiB)");
  p->excludes(f);
  f->excludes(p);
  cmd->add_option("-n,--n-predict", opts->n_predict, "tokens to generate (-1: until end of sequence or a full context)")
      ->capture_default_str();
  cmd->add_option("--stop", opts->stop, "stop generating at this text (not printed); repeatable");
  cmd->add_option("--temp", opts->sampler.temperature, "temperature (0 = greedy)")->capture_default_str();
  cmd->add_option("--top-k", opts->sampler.top_k, "top-k (0 = off)")->capture_default_str();
  cmd->add_option("--top-p", opts->sampler.top_p, "top-p (1 = off)")->capture_default_str();
  cmd->add_option("--min-p", opts->sampler.min_p, "min-p (0 = off)")->capture_default_str();
  cmd->add_option("--repeat-penalty", opts->sampler.repeat_penalty, "repetition penalty (1 = off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", opts->sampler.repeat_last_n, "tokens the penalty looks back over")
      ->capture_default_str();
  cmd->add_option("-s,--seed", opts->seed, "sampling seed (-1: random, printed)")->capture_default_str();
  cmd->add_flag("--ignore-eos", opts->ignore_eos, "keep generating after end-of-sequence");
  cmd->add_option("--mtp", opts->mtp,
                  "speculative decoding with the model's NextN/MTP head: N drafts per step (0 off), auto (1 draft, "
                  "turned off while it costs more per token than plain decode) or auto:N; greedy output is unchanged")
      ->capture_default_str();
  cmd->add_option("--mtp-p-min", opts->mtp_p_min, "stop drafting when the head's top probability is below P")
      ->capture_default_str();
  add_telemetry_flags(cmd, opts->telemetry);
  cmd->callback([opts, p, f] {  // the options are owned by `app`, which outlives parsing
    if (p->count() == 0 && f->count() == 0)
      throw Error("run: no prompt: give -p TEXT or -f FILE");
    run_generate(*opts);
  });
}

}  // namespace sluice::cli
