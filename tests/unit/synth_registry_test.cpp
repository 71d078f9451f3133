// synth asks the architecture registry (model/arch/registry.def) for every
// plan: each registered architecture has a generator whose tiny file the
// engine accepts, and the outputs of the architectures that synth wrote before
// the plans moved into the declarations are pinned byte for byte.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "model/arch.h"
#include "synth_test_support.h"
#include "tools/synth.h"

namespace sluice::tools {
namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using test::sluice_cli;
using test::TempFile;

// Every architecture sluice runs has a generator, and synth lists exactly those.
TEST(SynthRegistry, EveryArchitectureHasAGenerator) {
  std::vector<std::string> all;
  for (const model::ArchEntry& e : model::architectures()) {
    EXPECT_NE(e.synth, nullptr) << e.name;
    all.emplace_back(e.name);
  }
  EXPECT_EQ(synth_arch_names(), all);
  for (const std::string& arch : all) {
    TempFile out("reg.gguf");
    auto [rc, log] = sluice_cli("synth -q --arch " + arch + " -o " + out.path.string());
    ASSERT_EQ(rc, 0) << arch << "\n" << log;
    std::tie(rc, log) = sluice_cli("inspect --json " + out.path.string());
    ASSERT_EQ(rc, 0) << arch << "\n" << log.substr(0, 2000);
    const auto j = nlohmann::json::parse(log);
    EXPECT_EQ(j["runnable"], true) << arch << ": " << j.value("not_runnable", "");
    EXPECT_EQ(j["architecture"], arch);
  }
  TempFile bad("bad.gguf");
  auto [rc, log] = sluice_cli("synth -q --arch nosuch -o " + bad.path.string());
  EXPECT_NE(rc, 0);
  EXPECT_NE(log.find("--arch"), std::string::npos) << log;
  EXPECT_NE(log.find("qwen35moe"), std::string::npos) << log;
}

std::string sha256_of(const fs::path& p) {
  FILE* f = ::popen(("sha256sum '" + p.string() + "'").c_str(), "r");
  if (!f) return "";
  char buf[65] = {};
  const size_t n = std::fread(buf, 1, 64, f);
  ::pclose(f);
  return std::string(buf, n);
}

// sha256 of `sluice synth` outputs recorded before the plans moved from
// src/tools/synth_<arch>.cpp into the architecture declarations: the files
// are unchanged byte for byte. Pinned on x86-64 only (the values go through
// libm's exp/log/cos, which other targets need not round alike).
TEST(SynthRegistry, OutputsUnchangedByteForByte) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "hashes recorded on x86-64";
#endif
  struct Case {
    const char* args;
    const char* sha;
  };
  for (const Case& c :
       {Case{"--arch qwen3moe", "5ea6e99ff0761f4c342aa488921450a1a231b00f47990fd19c47c5f6e1b34d4c"},
        Case{"--arch llama", "726e6463596042d6b3ea3300bbe04a9eaa0e86b0d81386cba5f8539360a193c3"},
        Case{"--arch llama --experts 0",
             "e30746e53a8c94f465881a525308eebd9c658a1f398fb0fa68acf2e771bd420f"},
        Case{"--arch gpt-oss", "c3fc98c6d5527846d610b234d4457555dca52f889635c6f369d3f2634f0d6d0e"},
        Case{"--arch glm4moe", "99e54f0a3c4995424e43d45a69acdf7e5a11f187b236f53b5cf0e38da990e709"},
        Case{"--arch deepseek2",
             "ed6558f04c880560d7ce385ef30b7ac064a10fdefbf013cdd1e9d5b07e916426"},
        Case{"--arch deepseek2 --nextn 1 --type Q4_K --dense-type Q8_0 --n-embd 256",
             "363f39c62776d51558acd34c29fe89484b0d526072cf3855f1e07992113806c4"},
        Case{"--arch glm4moe --quant-mode direct --type Q4_K --n-embd 256",
             "5e558ea130018e2a1c644462e63c832bd61dfc61888a1875d8aabbbfc52dac4e"}}) {
    TempFile out("pin.gguf");
    auto [rc, log] =
        sluice_cli("synth -q --threads 2 " + std::string(c.args) + " -o " + out.path.string());
    ASSERT_EQ(rc, 0) << log;
    EXPECT_EQ(sha256_of(out.path), c.sha) << c.args;
  }
}

}  // namespace
}  // namespace sluice::tools
