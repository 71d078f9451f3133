// Helpers shared by the unit tests: locating ../shared data and reading a
// tensor's bytes through the engine's own GGUF layer.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "io/file.h"
#include "util/error.h"

namespace sluice::test {

// A fresh directory under the system temp dir, removed with everything in it
// when the object goes.
struct TempDir {
  TempDir()
      : path(std::filesystem::temp_directory_path() /
             ("sluice_test_" + std::to_string(::getpid()) + "_" + std::to_string(next_id()))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
  static int next_id() {
    static int id = 0;
    return id++;
  }
  std::filesystem::path path;
};

// A file name private to this test process (ctest runs tests two at a time, each
// its own process, so a fixed name would be written by two tests at once), in a
// directory removed with everything in it when the process exits, so a run
// leaves nothing behind in the system temp dir.
inline std::string process_temp_path(const std::string& name) {
  static const TempDir dir;
  return dir.file(name);
}

// Absolute path of a file under the shared reference data folder.
inline std::string shared_path(const std::string& rel) { return SLUICE_SHARED_DIR "/" + rel; }
// Absolute path of a file in this repository (the bundled models, tests/golden, bench/).
inline std::string source_path(const std::string& rel) { return SLUICE_SOURCE_DIR "/" + rel; }
inline bool shared_has(const std::string& rel) { return std::filesystem::exists(shared_path(rel)); }

// The message of the sluice::Error that f throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Runs a shell command; returns its stdout and sets *rc to the exit status.
inline std::string run_cmd(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

// The whole content of a file ("" when it cannot be read).
inline std::string file_bytes(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

// What `sluice ARGS REDIRECT` did: its exit status (-1 when it died by a
// signal) and the captured output (REDIRECT picks it; default: both streams).
struct CliResult {
  int status = -1;
  std::string out;
};
inline CliResult run_sluice(const std::string& args, const std::string& redirect = "2>&1") {
  CliResult r;
  r.out = run_cmd(std::string(SLUICE_BINARY) + " " + args + " " + redirect, &r.status);
  return r;
}

inline std::vector<uint8_t> read_tensor_bytes(const gguf::GgufModel& m, const gguf::TensorInfo& t) {
  std::vector<uint8_t> bytes(t.bytes);
  io::open_file(m.paths().at(t.split))->read_exact(bytes.data(), bytes.size(), t.offset);
  return bytes;
}

}  // namespace sluice::test
