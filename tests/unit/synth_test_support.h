// Helpers shared by the synth tests: a scratch model path, the CLI, a file's
// tensor table as a comparable set, and `sluice inspect --json` of a
// zero-data synth file.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
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

// `sluice synth -q --zero-data -o OUT ARGS` (header and tensor table only),
// then `sluice inspect --json OUT`.
inline nlohmann::json inspect_zero_data(const std::string& args, const TempFile& out) {
  auto [rc, log] = sluice_cli("synth -q --zero-data -o " + out.path.string() + " " + args);
  EXPECT_EQ(rc, 0) << log;
  std::tie(rc, log) = sluice_cli("inspect --json " + out.path.string());
  EXPECT_EQ(rc, 0) << log.substr(0, 2000);
  return nlohmann::json::parse(log);
}

// The entry of tensor `name` in an inspect --json report (null if absent).
inline nlohmann::json inspected_tensor(const nlohmann::json& j, const std::string& name) {
  for (const auto& t : j["tensors"])
    if (t["name"] == name) return t;
  return nullptr;
}

inline bool has_tensor(const nlohmann::json& j, const std::string& name) {
  return !inspected_tensor(j, name).is_null();
}

inline uint64_t tensor_bytes(const nlohmann::json& j, const std::string& name) {
  const nlohmann::json t = inspected_tensor(j, name);
  if (t.is_null()) {
    ADD_FAILURE() << "no tensor " << name;
    return 0;
  }
  return t["bytes"].get<uint64_t>();
}

}  // namespace sluice::test
