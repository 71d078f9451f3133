// Shell completion generated from the CLI11 definitions themselves, so the
// script can only list commands and flags that sluice accepts.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace sluice::cli {

// A bash completion script for `app` (one level of subcommands): the first
// word completes to a command or a top-level flag, a word starting with '-'
// after a command to that command's flags (short and long names), anything
// else falls back to file names (`complete -o default`). Hidden commands and
// options (empty group) are left out. The program is the app's name without
// directories (CLI11 renames an unnamed app after argv[0]); the function is
// `_<program>`.
std::string bash_completion(const CLI::App& app);

// `sluice completion bash`: prints bash_completion(app) to stdout. Register it
// last, so the script sees every other command.
void register_completion(CLI::App& app);

}  // namespace sluice::cli
