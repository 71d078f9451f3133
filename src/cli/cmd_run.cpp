// `sluice run`: tokenize a prompt, generate, stream the text to stdout; the
// telemetry summary (cli/telemetry_output.h) goes to stderr.
#include <charconv>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/load_progress.h"
#include "cli/sampler_flags.h"
#include "cli/stdout_output.h"
#include "cli/telemetry_output.h"
#include "gguf/gguf.h"
#include "io/text_input.h"
#include "moe/expert_usage.h"
#include "runtime/session.h"
#include "runtime/text_stream.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct RunOptions {
  runtime::EngineOptions engine;
  SamplerFlags sampling;
  std::string prompt;       // -p
  std::string prompt_file;  // -f
  int n_predict = 128;     // -n; -1: until end of sequence or the context is full
  std::vector<std::string> stop;  // --stop
  bool ignore_eos = false;
  std::string mtp = "0";   // --mtp N|auto|auto:N
  float mtp_p_min = 0.0f;  // --mtp-p-min
  TelemetryFlags telemetry;
  std::string save_usage;  // --save-usage FILE
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

void run_generate(RunOptions& o) {
  if (o.n_predict < -1) throw Error("-n: must be >= 0, or -1 for no limit (got " + std::to_string(o.n_predict) + ")");
  const runtime::SamplerConfig sampler_cfg = resolve_sampler(o.sampling);
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
  runtime::Sampler sampler(sampler_cfg);
  // The first token arrives after prefill and before any decode step.
  std::optional<moe::ExpertIoStats> io_after_prefill;
  runtime::TextStream stop_strings(o.stop);
  const runtime::GenerationStats st = session.generate(
      prompt, o.n_predict, sampler,
      [&](int32_t id) {
        if (!io_after_prefill) io_after_prefill = session.model().stats().io;
        out(stop_strings.push(tok.token_to_piece(id, false)));
        flush_stdout();
        return !stop_strings.stopped();
      },
      stop);
  out(stop_strings.finish());
  out("\n");
  if (st.context_full)
    std::fprintf(stderr, "sluice: context full (%d positions): generation stopped; raise -c for longer output\n",
                 session.model().n_ctx());
  flush_stdout();

  if (cfg.route_trace) cfg.route_trace->close();
  if (!o.save_usage.empty()) {
    moe::ExpertUsage u = session.model().expert_usage();
    if (u.n_layer == 0) throw Error("--save-usage: a dense model routes no experts");
    u.model = std::filesystem::path(o.engine.model_path).filename().string();
    io::OutputOptions uo{.flag = "--save-usage", .inputs = gguf::model_file_paths(o.engine.model_path)};
    uo.inputs.push_back(o.prompt_file);
    moe::write_expert_usage(u, o.save_usage, std::move(uo));
  }
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
  add_sampler_flags(cmd, opts->sampling);
  cmd->add_flag("--ignore-eos", opts->ignore_eos, "keep generating after end-of-sequence");
  cmd->add_option("--mtp", opts->mtp,
                  "speculative decoding with the model's NextN/MTP head: N drafts per step (0 off), auto (1 draft, "
                  "turned off while it costs more per token than plain decode) or auto:N; greedy output is unchanged")
      ->capture_default_str();
  cmd->add_option("--mtp-p-min", opts->mtp_p_min, "stop drafting when the head's top probability is below P")
      ->capture_default_str();
  add_telemetry_flags(cmd, opts->telemetry);
  cmd->add_option("--save-usage", opts->save_usage,
                  "write how often each (layer, expert) was routed to FILE (JSON), for `cache-sim --cache-warm`");
  cmd->callback([opts, p, f] {  // the options are owned by `app`, which outlives parsing
    if (p->count() == 0 && f->count() == 0)
      throw Error("run: no prompt: give -p TEXT or -f FILE");
    run_generate(*opts);
  });
}

}  // namespace sluice::cli
