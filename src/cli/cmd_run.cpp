// `sluice run`: tokenize a prompt, generate, stream the text to stdout; the
// telemetry summary (cli/telemetry_output.h) goes to stderr. With --json -
// stdout carries only the JSON object, the text inside it ("text"), so that
// nothing corrupts it. Ctrl-C stops generation between tokens; the summary
// is still printed and the exit status is 130.
#include <charconv>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/escapes.h"
#include "cli/load_progress.h"
#include "cli/notice.h"
#include "cli/sampler_flags.h"
#include "cli/sigint.h"
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
  bool escapes = false;     // -e: process \n, \t, \xNN... in the prompt
  int n_predict = 128;     // -n; -1: until end of sequence or the context is full
  std::vector<std::string> stop;  // --stop
  bool ignore_eos = false;
  std::string mtp = "0";   // --mtp N|auto|auto:N
  float mtp_p_min = 0.0f;  // --mtp-p-min
  int ngram = 0;           // --ngram N: prompt-lookup drafts (0 off)
  int ngram_draft = 4;     // --ngram-draft K: at most K of them per step
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
  o.log = [](const std::string& line) { notice(line); };
  return o;
}

// The prompt from -p, or the whole of -f's file minus one trailing newline
// (as llama.cpp's -f does, so `echo text > f` and -p text agree).
std::string load_prompt(const RunOptions& o) {
  std::string text = o.prompt;
  if (!o.prompt_file.empty()) {
    text = io::read_text_input(o.prompt_file, "-f");
    if (!text.empty() && text.back() == '\n') text.pop_back();
  }
  return o.escapes ? process_escapes(text, o.prompt_file.empty() ? "-p" : "-f") : text;
}

// Why generation ended, for --json.
const char* finish_reason(const runtime::GenerationStats& st, bool interrupted, bool stop_string, int n_predict) {
  if (interrupted) return "interrupted";
  if (stop_string) return "stop";
  if (st.context_full) return "context_full";
  if (n_predict >= 0 && st.generated >= n_predict) return "length";
  return "eos";
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
  runtime::MtpOptions mtp = parse_mtp(o.mtp, o.mtp_p_min);
  const bool head = mtp.depth > 0;
  if (o.ngram < 0 || o.ngram > 64) throw Error("--ngram: expected a lookup length 0..64 (got " + std::to_string(o.ngram) + ")");
  if (o.ngram_draft < 1 || o.ngram_draft > 16)
    throw Error("--ngram-draft: expected 1..16 drafts per step (got " + std::to_string(o.ngram_draft) + ")");
  if (o.ngram > 0) {
    if (head) throw Error("--ngram: choose one draft source (--mtp " + o.mtp + " is on)");
    mtp.ngram = o.ngram;
    mtp.depth = o.ngram_draft;
  }
  model::ModelConfig cfg = o.engine.to_model_config();
  if (!quiet()) cfg.on_dense_progress = tty_load_progress("sluice: loading dense weights");
  cfg.mtp = head;  // load the NextN head
  runtime::Session session = runtime::Session::open(o.engine.model_path, cfg);
  session.set_mtp(mtp);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(session.gguf().metadata());
  const std::vector<int32_t> prompt = tok.encode(text, true, false);
  if (prompt.empty()) {
    throw Error(std::string(o.prompt_file.empty() ? "-p" : "-f") +
                ": the prompt tokenizes to nothing (and the model adds no BOS)");
  }

  TelemetryOutput telemetry(o.telemetry, session, {o.prompt_file});
  // The text goes to stdout as it comes, or into the JSON object when that
  // is what stdout carries. -q prints only what is generated.
  const bool text_to_stdout = !o.telemetry.json_to_stdout();
  std::string generated;
  auto emit = [&](const std::string& piece) {
    generated += piece;
    if (!text_to_stdout) return;
    out(piece);
    flush_stdout();
  };
  if (text_to_stdout && o.telemetry.verbosity != Verbosity::kQuiet) {
    out(text);
    flush_stdout();
  }
  std::vector<int32_t> stop;
  if (!o.ignore_eos) {
    for (int32_t id : {tok.eos(), tok.eot()})
      if (id >= 0) stop.push_back(id);
  }
  runtime::Sampler sampler(sampler_cfg);
  // The first token arrives after prefill and before any decode step.
  std::optional<moe::ExpertIoStats> io_after_prefill;
  runtime::TextStream stop_strings(o.stop);
  SigintToFlag sigint;  // checked between tokens (a long prefill runs to its end)
  const runtime::GenerationStats st = session.generate(
      prompt, o.n_predict, sampler,
      [&](int32_t id) {
        if (!io_after_prefill) io_after_prefill = session.model().stats().io;
        emit(stop_strings.push(tok.token_to_piece(id, false)));
        return !stop_strings.stopped() && !sigint_received();
      },
      stop);
  emit(stop_strings.finish());
  if (text_to_stdout) out("\n");
  flush_stdout();
  const bool interrupted = sigint_received();
  if (interrupted) notice("sluice: generation stopped (Ctrl-C)");
  if (st.context_full)
    notice("sluice: context full (" + std::to_string(session.model().n_ctx()) +
           " positions): generation stopped; raise -c for longer output");

  if (cfg.route_trace) cfg.route_trace->close();
  if (!o.save_usage.empty()) {
    moe::ExpertUsage u = session.model().expert_usage();
    if (u.n_layer == 0) throw Error("--save-usage: a dense model routes no experts");
    u.model = std::filesystem::path(o.engine.model_path).filename().string();
    io::OutputOptions uo{.flag = "--save-usage", .inputs = gguf::model_file_paths(o.engine.model_path)};
    uo.inputs.push_back(o.prompt_file);
    moe::write_expert_usage(u, o.save_usage, std::move(uo));
  }
  nlohmann::ordered_json fields;
  fields["text"] = generated;
  fields["finish_reason"] = finish_reason(st, interrupted, stop_strings.stopped(), o.n_predict);
  fields["seed"] = sampler_cfg.seed;
  telemetry.finish({}, std::move(fields));
  if (io_after_prefill && o.telemetry.verbosity == Verbosity::kVerbose)
    print_decode_io(st, *io_after_prefill, session.model().stats().io);
  if (interrupted) throw Interrupted{};
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
  cmd->add_flag("-e,--escape", opts->escapes, "process escapes in the prompt: \\n \\t \\r \\\\ \\\" \\' \\xNN");
  cmd->add_option("--stop", opts->stop, "stop generating at this text (not printed); repeatable");
  add_sampler_flags(cmd, opts->sampling);
  cmd->add_flag("--ignore-eos", opts->ignore_eos, "keep generating after end-of-sequence");
  cmd->add_option("--mtp", opts->mtp,
                  "speculative decoding with the model's NextN/MTP head: N drafts per step (0 off), auto (1 draft, "
                  "turned off while it costs more per token than plain decode) or auto:N; greedy output is unchanged")
      ->capture_default_str();
  cmd->add_option("--mtp-p-min", opts->mtp_p_min, "stop drafting when the head's top probability is below P")
      ->capture_default_str();
  cmd->add_option("--ngram", opts->ngram,
                  "speculative decoding without a draft model: when the last N tokens occurred earlier in the prompt "
                  "or output, propose what followed them there (prompt lookup; 0 off); greedy output is unchanged")
      ->capture_default_str();
  cmd->add_option("--ngram-draft", opts->ngram_draft, "--ngram: at most K drafts per step")->capture_default_str();
  add_telemetry_flags(cmd, opts->telemetry, "the generated text (then not streamed), finish_reason, seed");
  cmd->footer(
      "Examples:\n"
      "  sluice run -m model.gguf -p 'Once upon a time' -n 64\n"
      "  sluice run -m model.gguf -f prompt.txt -n -1 -q > story.txt\n"
      "  echo 'Tell me' | sluice run -m model.gguf -f - --json - | jq .summary.decode_tps\n"
      "stdout: the prompt and the generated text (-q: only the generated text); stderr: one summary line\n"
      "(-v: the full telemetry block). Ctrl-C stops generation, prints the summary and exits 130.");
  cmd->add_option("--save-usage", opts->save_usage,
                  "write how often each (layer, expert) was routed to FILE (JSON), for `cache-sim --cache-warm`");
  cmd->callback([opts, p, f] {  // the options are owned by `app`, which outlives parsing
    if (p->count() == 0 && f->count() == 0)
      throw Error("run: no prompt: give -p TEXT or -f FILE");
    run_generate(*opts);
  });
}

}  // namespace sluice::cli
