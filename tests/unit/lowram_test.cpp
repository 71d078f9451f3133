// Bounded memory, end to end: a synthesized qwen3moe whose expert tensors are
// over 4x a memory cap must evaluate under that cap (scripts/lowram.sh, a
// memory cgroup) and give logits byte-identical to an uncapped run.
//
// Why it can pass: with the expert cache off, resident memory is the dense set
// + KV cache + scratch + the expert slots of one layer. For the model below
// (16 layers, 32 experts of 3 x 512x512 Q4_0 = 432 KiB each, 216 MiB of
// experts) that is 14.4 MiB dense (Q8_0 attention + embeddings, f32 norms and
// routers) + 0.25 MiB KV (-c 64, f16) + at most 24 slots (6 tokens x top-4) =
// 10 MiB: ~25 MiB, inside the 48 MiB cap with the binary's own pages. (Measured:
// it also passes at 24M; --load-all, which keeps all 216 MiB, is OOM-killed at
// 48M, and the test checks that as the control.) Experts are
// read with O_DIRECT, so they never enter the page cache. (Under cgroup v1,
// page cache a process faults in is charged to its cgroup too; it is
// reclaimable, so it would slow a buffered run rather than fail it, but
// O_DIRECT keeps the measurement about the engine's own memory.)
//
// Needs root and a usable memory cgroup: SKIPs otherwise (lowram.sh exits 125),
// and under AddressSanitizer.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "test_support.h"

namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;

struct Shell {
  int status = -1;  // exit status; -1 when killed by a signal
  std::string out;  // stdout + stderr
};

Shell sh(const std::string& cmd) {
  Shell r;
  r.out = sluice::test::run_cmd(cmd + " 2>&1", &r.status);
  return r;
}

std::vector<char> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

constexpr uint64_t kCapBytes = uint64_t{48} << 20;
constexpr const char* kCap = "48M";

TEST(LowRam, LogitsUnderCapMatchUncappedWithExpertsOver4xCap) {
#if defined(__SANITIZE_ADDRESS__)
  // The sluice binary shares this build's flags: ASan's shadow memory and
  // quarantine would be measured, not the engine's own footprint.
  GTEST_SKIP() << "memory caps are not meaningful under AddressSanitizer (shadow memory, quarantine)";
#endif
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a memory cgroup (scripts/lowram.sh)";
  const fs::path script = fs::path(SLUICE_SOURCE_DIR) / "scripts" / "lowram.sh";
  ASSERT_TRUE(fs::exists(script)) << script;
  const std::string bin = SLUICE_BINARY;

  // Next to the binary (the build dir), not /tmp: it may be tmpfs, which
  // refuses O_DIRECT and whose pages are memory.
  const fs::path dir = fs::path(bin).parent_path() / "lowram-test";
  fs::create_directories(dir);
  const fs::path model = dir / "lowram-qwen3moe.gguf";
  const fs::path a = dir / "uncapped.logits.f32", b = dir / "capped.logits.f32";
  fs::remove(a);
  fs::remove(b);

  const Shell synth = sh(bin + " synth -q --force -o " + model.string() +
                         " --arch qwen3moe --layers 16 --experts 32 --experts-used 4 --n-embd 512 --n-ff-exp 512"
                         " --n-ff 1536 --heads 8 --kv-heads 4 --head-dim 64 --context-length 256"
                         " --type Q4_0 --dense-type Q8_0 --quant-mode direct --seed 11");
  ASSERT_EQ(synth.status, 0) << synth.out;

  uint64_t expert_bytes = 0, dense_bytes = 0;
  {
    const auto m = sluice::gguf::GgufModel::open(model.string());
    for (const auto& t : m.tensors()) {
      (t.name.find("_exps.") != std::string::npos ? expert_bytes : dense_bytes) += t.bytes;
    }
  }
  // The premise: holding the experts could not fit, the dense set easily does.
  ASSERT_GE(expert_bytes, 4 * kCapBytes) << "expert bytes " << expert_bytes;
  ASSERT_LE(dense_bytes, kCapBytes / 3) << "dense bytes " << dense_bytes;

  const std::string logits = " logits -m " + model.string() + " --tokens 1,17,42,99,7,250 -c 64 -t 2 --io-threads 2";
  const Shell free_run = sh(bin + logits + " -o " + a.string());
  ASSERT_EQ(free_run.status, 0) << free_run.out;

  const Shell capped = sh("bash " + script.string() + " " + kCap + " -- " + bin + logits + " -o " + b.string());
  if (capped.status == 125) GTEST_SKIP() << "memory cgroups not usable here: " << capped.out;
  ASSERT_EQ(capped.status, 0) << "capped run failed (OOM-killed?): " << capped.out;
  EXPECT_EQ(capped.out.find("OOM-killed"), std::string::npos) << capped.out;

  // Control: the cap really bites. Keeping every expert resident cannot fit.
  const Shell all = sh("bash " + script.string() + " " + kCap + " -- " + bin + logits + " --load-all -o " +
                       (dir / "load-all.logits.f32").string());
  EXPECT_NE(all.status, 0) << "--load-all fit under " << kCap << ": the cap is not enforced\n" << all.out;
  fs::remove(dir / "load-all.logits.f32");

  const std::vector<char> la = slurp(a), lb = slurp(b);
  ASSERT_FALSE(la.empty());
  ASSERT_EQ(la.size() % (6 * sizeof(float)), 0u) << "not [6][n_vocab] float32";
  EXPECT_TRUE(la == lb) << "capped logits differ from uncapped ones";

  fs::remove(a);
  fs::remove(b);
  fs::remove(model);
}

}  // namespace
