// sluice — run Mixture-of-Experts models larger than RAM by streaming experts
// from flash. This file only wires subcommands and turns errors into one clear
// message and a non-zero exit.
#include <csignal>
#include <cstdio>
#include <exception>

#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/habit_flags.h"
#include "cli/notice.h"
#include "cli/completion.h"
#include "cli/stdout_output.h"
#include "cli/sigint.h"
#include "util/error.h"

namespace {

// The commands, one per line, for a missing or unknown command.
std::string command_list(const CLI::App& app) {
  std::string out = "commands:\n";
  for (const CLI::App* sub : app.get_subcommands({})) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-10s %s\n", sub->get_name().c_str(), sub->get_description().c_str());
    out += line;
  }
  return out + "run `sluice COMMAND --help` for a command's flags\n";
}

constexpr const char* kFooter =
    "Examples:\n"
    "  sluice run -m model.gguf -p 'Once upon a time' -n 64\n"
    "  sluice chat -m model.gguf --system 'You are terse.'\n"
    "  sluice inspect -m model.gguf\n"
    "  sluice serve -m model.gguf --port 8080\n"
    "  sluice models; sluice run -m qwen3:30b-a3b  (ollama / Hugging Face cache / LM Studio names)\n"
    "llama.cpp habits (-ngl, -fa, -cnv, -sys, -ctk, -ctv, -tb, -ub, -b, -mli, --mmap, --no-mmap) are\n"
    "understood: mapped to sluice's flag, or ignored with one notice line saying why.\n"
    "Exit status: 0 ok; 1 runtime error (bad input, I/O failure); 2 usage error (unknown\n"
    "command or flag, bad value); 130 `run` stopped by Ctrl-C (SIGINT); 141 stdout closed.";

}  // namespace

int main(int argc, char** argv) {
  // A closed pipe becomes EPIPE on the write, which the writers turn into a
  // quiet stop (StdoutClosed) instead of a death that skips cleanup.
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"sluice: run MoE models larger than RAM by streaming experts from flash", "sluice"};
  app.require_subcommand(1);
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("sluice ") + SLUICE_VERSION + " (" + SLUICE_GIT_REVISION + ")");
  sluice::cli::register_inspect(app);
  sluice::cli::register_synth(app);
  sluice::cli::register_run(app);
  sluice::cli::register_chat(app);
  sluice::cli::register_logits(app);
  sluice::cli::register_tokenize(app);
  sluice::cli::register_cache_sim(app);
  sluice::cli::register_route_predict(app);
  sluice::cli::register_bench(app);
  sluice::cli::register_eval(app);
  sluice::cli::register_repack(app);
  sluice::cli::register_serve(app);
  sluice::cli::register_models(app);
  sluice::cli::register_completion(app);  // last: it lists the commands above
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const sluice::cli::HabitRewrite habits = sluice::cli::rewrite_habit_flags(args);
    // After -q is known, before the command runs.
    app.parse_complete_callback([&habits] {
      for (const std::string& line : habits.notices) sluice::cli::notice(line);
    });
    std::vector<std::string> reversed(habits.args.rbegin(), habits.args.rend());  // CLI11 takes them reversed
    app.parse(reversed);
    sluice::cli::close_stdout();  // a failed final flush is a failed command
  } catch (const CLI::ParseError& e) {
    // No command, or an unknown one: say so and list them (usage error, 2).
    const bool no_command = app.get_subcommands().empty() && e.get_exit_code() != 0 &&
                            (dynamic_cast<const CLI::RequiredError*>(&e) || dynamic_cast<const CLI::ExtrasError*>(&e));
    if (no_command) {
      std::fprintf(stderr, "sluice: error: %s\n%s", !args.empty() ? ("unknown command '" + args[0] + "'").c_str()
                                                             : "no command given",
                   command_list(app).c_str());
      return 2;
    }
    // Help and --version exit 0; every other parse error is a usage error (2),
    // whatever CLI11's own code (100+) would have been.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const sluice::cli::Interrupted&) {
    return 130;  // what a shell reports for SIGINT; the command printed its summary
  } catch (const sluice::StdoutClosed&) {
    return 141;  // what a shell reports for a process ended by SIGPIPE; no message
  } catch (const sluice::Error& e) {  // bad input or I/O failure: 1
    std::fprintf(stderr, "sluice: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice: internal error: %s\n", e.what());
    return 2;
  }
  return 0;
}
