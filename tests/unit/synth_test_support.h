// Helpers shared by the synth tests: a scratch model path, the CLI, and a
// file's tensor table as a comparable set.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gguf/gguf.h"
#include "test_support.h"

namespace sluice::test {

// A path in its own scratch directory (removed with the object).
struct TempFile {
  explicit TempFile(const std::string& name) : path(dir.path / name) {}
  TempDir dir;
  std::filesystem::path path;
};

// `sluice ARGS` with stderr folded into the output: {exit status, output}.
inline std::pair<int, std::string> sluice_cli(const std::string& args) {
  const CliResult r = run_sluice(args);
  return {r.status, r.out};
}

using TensorSet = std::set<std::tuple<std::string, std::string, std::vector<uint64_t>>>;

// Every tensor as (name, type name, shape).
inline TensorSet tensors_of(const gguf::GgufModel& m) {
  TensorSet s;
  for (const auto& t : m.tensors()) s.insert({t.name, std::string(ggml_type_name(t.type)), t.ne});
  return s;
}

}  // namespace sluice::test
