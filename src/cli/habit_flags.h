// llama.cpp habits (issue 16). CLI11 reads a multi-letter short flag such as
// `-ngl 99` as `-n gl` plus a stray 99, so llama.cpp's spellings are rewritten
// before parsing, from one table (habit_flags.cpp):
//   - where sluice has the meaning, the habit becomes sluice's flag
//     (-ub -> --ubatch, -ctk/-ctv -> --kv-type, --mmap/--no-mmap ->
//     --dense-weights mmap/anon, -sys -> chat's --system, -tb -> -t);
//   - where it has none (-ngl, -fa, -mli, -b, -no-cnv on run) the habit is
//     dropped with exactly one notice line saying why it does nothing here;
//   - where it asks for another command (-cnv on run, -sys outside chat) it
//     is a usage error saying which command to use.
// Arguments after `--` are left alone.
#pragma once

#include <string>
#include <vector>

namespace sluice::cli {

struct HabitRewrite {
  std::vector<std::string> args;     // the command line without argv[0], habits replaced
  std::vector<std::string> notices;  // one "sluice: ..." line per habit that does nothing here
};

// `args` is argv[1..]; args[0], when present, is the command. Throws
// CLI::ValidationError (a usage error: exit 2) naming the habit when it asks
// for another command, lacks its value, or contradicts another flag for the
// same setting (-ctk f16 -ctv f32; --mmap with --dense-weights anon).
HabitRewrite rewrite_habit_flags(const std::vector<std::string>& args);

}  // namespace sluice::cli
