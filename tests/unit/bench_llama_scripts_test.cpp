// bench/figures.sh --llama-bench and bench/vs_llama.sh, end to end with
// stand-in engines: small shell scripts that log how they were called and print
// fixed figures in llama-bench's / sluice bench's CSV format. The tests check
// the protocol (one cold repetition per llama-bench process, pp P and tg N at
// depth P, rounds alternating which engine goes first, pass-through flags) and
// the arithmetic (means, sample sds, medians, ratios) against values worked out
// by hand. No real model runs, and no cap: BENCH_DROP_CACHES=file keeps the
// scripts from dropping the whole machine's page cache.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_support.h"

namespace SLUICE_TEST_FILE {

namespace fs = std::filesystem;
using sluice::test::file_bytes;
using sluice::test::TempDir;

struct Shell {
  int status = -1;
  std::string out;  // stdout + stderr
};

Shell sh(const std::string& cmd) {
  Shell r;
  r.out = sluice::test::run_cmd("BENCH_DROP_CACHES=file " + cmd + " 2>&1", &r.status);
  return r;
}

void write_exe(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0755);
}

std::string script(const char* rel) { return (fs::path(SLUICE_SOURCE_DIR) / rel).string(); }

// A llama-bench stand-in: appends its arguments to DIR/llama.argv and "llama-pp"
// or "llama-tg" to DIR/order, and prints llama-bench's CSV (every value quoted;
// build_commit holds a comma and a doubled quote, as a real field may) with
// avg_ts = PP_BASE + PP_STEP * k for the k-th pp call, TG_BASE + TG_STEP * k for tg.
// With FAIL set it prints lowram.sh's OOM line and exits 137 instead.
std::string fake_llama(const std::string& dir, const std::string& pp, const std::string& tg,
                       bool fail = false) {
  return "#!/usr/bin/env bash\n"
         "d=" +
         dir +
         "\n"
         "echo \"$*\" >>\"$d/llama.argv\"\n" +
         (fail ? "echo 'lowram.sh: the kernel OOM-killed 1 process(es) in the 8G memory cgroup' "
                 ">&2; exit 137\n"
               : "") +
         "m= t= np= ng= nd=0\n"
         "while [[ $# -gt 0 ]]; do case $1 in -m) m=$2; shift ;; -t) t=$2; shift ;; -p) np=$2; "
         "shift ;;"
         " -n) ng=$2; shift ;; -d) nd=$2; shift ;; esac; shift; done\n"
         "kind=pp; ((ng > 0)) && kind=tg\n"
         "echo \"llama-$kind\" >>\"$d/order\"\n"
         "k=$(( $(cat \"$d/count_$kind\" 2>/dev/null || echo 0) + 1 )); echo $k "
         ">\"$d/count_$kind\"\n"
         "if [[ $kind == pp ]]; then ts=$(( " +
         pp + " )); else ts=$(( " + tg +
         " )); fi\n"
         "echo build_commit,model_filename,n_threads,n_prompt,n_gen,n_depth,avg_ts\n"
         "echo "
         "\"\\\"x,\\\"\\\"y\\\",\\\"$m\\\",\\\"$t\\\",\\\"$np\\\",\\\"$ng\\\",\\\"$nd\\\",\\\"$ts."
         "000000\\\"\"\n";
}

TEST(BenchLlamaScripts, FiguresRunsOneColdRepetitionPerProcessAndAveragesOverProcesses) {
  TempDir tmp;
  const std::string dir = tmp.path.string(), out = tmp.file("out"), model = tmp.file("m.gguf");
  std::ofstream(model) << "not read by the stand-in";
  write_exe(tmp.file("llama-bench"), fake_llama(dir, "8 + 2 * k", "4 + k"));

  const Shell run =
      sh("bash " + script("bench/figures.sh") + " --model " + model + " --llama-bench " +
         tmp.file("llama-bench") + " --steps llama --caps none -p 8 -n 4 -r 2 -t 2 --out " + out +
         " --llama-args '-fa on'");
  ASSERT_EQ(run.status, 0) << run.out;

  // Two processes per metric, alternating pp and tg; each one cold repetition.
  const std::string base = "-m " + model + " -t 2 -r 1 --no-warmup -lm mmap -o csv ";
  const std::string pp = base + "-p 8 -n 0 -fa on\n", tg = base + "-p 0 -n 4 -d 8 -fa on\n";
  EXPECT_EQ(file_bytes(tmp.file("llama.argv")), pp + tg + pp + tg);

  // pp 10, 12: mean 11, sd sqrt(2); tg 5, 6: mean 5.5, sd sqrt(0.5). Uncapped: no mem_cap_MiB.
  EXPECT_EQ(file_bytes(out + "/llama_cap_none.csv"),
            "model,threads,dense_weights,odirect,load_all,cold,n_prompt,n_gen,reps,prefill_tps,"
            "prefill_tps_sd,"
            "decode_tps,decode_tps_sd,mem_cap_MiB\n"
            "m.gguf,2,mmap,0,0,1,8,4,2,11.000,1.414,5.500,0.707,\n");
  EXPECT_FALSE(fs::exists(out + "/llama_failed.csv"));
}

TEST(BenchLlamaScripts, FiguresRecordsAFailedCapAndGoesOn) {
  TempDir tmp;
  const std::string dir = tmp.path.string(), out = tmp.file("out"), model = tmp.file("m.gguf");
  std::ofstream(model) << "x";
  write_exe(tmp.file("llama-bench"), fake_llama(dir, "1", "1", /*fail=*/true));

  const Shell run =
      sh("bash " + script("bench/figures.sh") + " --model " + model + " --llama-bench " +
         tmp.file("llama-bench") + " --steps llama --caps none -r 3 --out " + out);
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("llama-bench failed under cap none (pp, process 1: OOM-killed)"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(file_bytes(out + "/llama_failed.csv"), "none,pp,OOM-killed\n");
  EXPECT_FALSE(fs::exists(out + "/llama_cap_none.csv"));
  // The rest of the cap is skipped: the load would fail the same way.
  EXPECT_EQ(file_bytes(tmp.file("order")), "");

  // A process that does not end (thrashing under a cap) is stopped and recorded.
  write_exe(tmp.file("llama-bench"), "#!/usr/bin/env bash\nsleep 60\n");
  const Shell hung =
      sh("bash " + script("bench/figures.sh") + " --model " + model + " --llama-bench " +
         tmp.file("llama-bench") + " --steps llama --caps none --llama-timeout 1 --out " + out);
  ASSERT_EQ(hung.status, 0) << hung.out;
  EXPECT_EQ(file_bytes(out + "/llama_failed.csv"), "none,pp,timed out after 1 s\n");
}

TEST(BenchLlamaScripts, FiguresMergesLlamaRowsByColumnNameWithAnEngineColumn) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot not installed (scripts/deps.sh --with-plot); the plot step needs it";
  }
  TempDir tmp;
  const std::string out = tmp.file("out");
  fs::create_directories(out);
  const std::string figures = "bash " + script("bench/figures.sh") + " --steps plot --out " + out +
                              " --png " + tmp.file("f.png");
  std::ofstream(out + "/cap_8G.csv")
      << "model,threads,io_threads,cache,cache_MiB,mem_cap_MiB,decode_tps,decode_tps_sd\n"
         "q.gguf,2,4,off,0,8192,1.5,0.1\n";

  // Without llama.cpp rows all.csv keeps its shape: no engine column.
  Shell run = sh(figures);
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_EQ(file_bytes(out + "/all.csv"),
            "sweep,model,threads,io_threads,cache,cache_MiB,mem_cap_MiB,decode_tps,decode_tps_sd\n"
            "cap,q.gguf,2,4,off,0,8192,1.5,0.1\n");

  std::ofstream(out + "/llama_cap_8G.csv") << "model,threads,mem_cap_MiB,decode_tps,decode_tps_sd\n"
                                              "q.gguf,2,8192,2.25,0.5\n";
  std::ofstream(out + "/llama_failed.csv") << "4G,pp,OOM-killed\n";
  run = sh(figures);
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_EQ(
      file_bytes(out + "/all.csv"),
      "sweep,engine,model,threads,io_threads,cache,cache_MiB,mem_cap_MiB,decode_tps,decode_tps_sd\n"
      "cap,sluice,q.gguf,2,4,off,0,8192,1.5,0.1\n"
      "cap,llama.cpp,q.gguf,2,,,,8192,2.25,0.5\n");
  EXPECT_EQ(file_bytes(out + "/plot_cap_llama.dat"), "8 2.25 0.5 8\n");
  EXPECT_EQ(file_bytes(out + "/plot_cap_off.dat"), "8 1.5 0.1 8\n");
  EXPECT_EQ(file_bytes(out + "/plot_cap_llama_failed.dat"), "4 OOM-killed\n");

  // A llama.cpp column sluice's header lacks is an error naming the file and column.
  std::ofstream(out + "/llama_cap_8G.csv") << "model,bogus\nq.gguf,1\n";
  run = sh(figures);
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("llama_cap_8G.csv: column bogus is not in sluice bench's CSV header"),
            std::string::npos)
      << run.out;
}

// A `sluice` stand-in for vs_llama.sh: `bench --conditions` prints CONDITIONS;
// `bench --mem` runs the script fragment MEM (empty: fails, so the table has no
// roofline); any other call appends its arguments to DIR/sluice.argv and
// "sluice" to DIR/order and prints sluice bench's CSV with the k-th call's
// prefill_tps PP[k] and decode_tps TG[k] (PP, TG: bash arrays, element 0 unused).
std::string fake_sluice(const std::string& dir, const std::string& conditions, const std::string& mem,
                        const std::string& pp, const std::string& tg) {
  return "#!/usr/bin/env bash\n"
         "d=" + dir + "\n"
         "if [[ $* == 'bench --conditions' ]]; then echo '" + conditions + "'; exit 0; fi\n"
         "if [[ \"$1 $2\" == 'bench --mem' ]]; then\n" +
         (mem.empty() ? std::string("  exit 1\n") : mem) +
         "fi\n"
         "echo \"$*\" >>\"$d/sluice.argv\"\n"
         "echo sluice >>\"$d/order\"\n"
         "k=$(( $(cat \"$d/count_sluice\" 2>/dev/null || echo 0) + 1 )); echo $k >\"$d/count_sluice\"\n"
         "pp=" + pp + "\n"
         "tg=" + tg + "\n"
         "echo model,prefill_tps,decode_tps\n"
         "echo m.gguf,${pp[k]}.000,${tg[k]}.000\n";
}

TEST(BenchLlamaScripts, VsLlamaInterleavesRoundsAndReportsMediansAndRatios) {
  TempDir tmp;
  const std::string dir = tmp.path.string(), model = tmp.file("m.gguf");
  std::ofstream(model) << "x";
  // llama.cpp: pp 10, 10, 20 (median 10); tg 1, 1, 1.
  write_exe(tmp.file("llama-bench"), fake_llama(dir, "k == 3 ? 20 : 10", "1"));
  // sluice: pp 20, 30, 40 (median 30); tg 3, 1, 2 (median 2); logs its arguments and turn.
  // The memory probe: 35 GB/s before the rounds, 33.5 after; 1.75 GB a token.
  const std::string mem =
      "  echo \"$*\" >>\"$d/mem.argv\"\n"
      "  echo threads,bytes,GBps_best,GBps_median,decode_read_bytes,roofline_tps\n"
      "  [[ -e $d/mem_once ]] && echo 2,1,33.500,33.000,1750000000,19.14 || echo 2,1,35.000,34.000,1750000000,20.00\n"
      "  touch \"$d/mem_once\"; exit 0\n";
  write_exe(tmp.file("sluice"), fake_sluice(dir, "CPU fake x2; load 0.10 0.20 0.30", mem, "(0 20 30 40)", "(0 3 1 2)"));

  const Shell run =
      sh("bash " + script("bench/vs_llama.sh") + " --model " + model + " --sluice " +
         tmp.file("sluice") + " --llama-bench " + tmp.file("llama-bench") +
         " --rounds 3 --sluice-args '--resident-layout plain' --out " + tmp.file("out"));
  ASSERT_EQ(run.status, 0) << run.out;

  // Round 1 sluice first, round 2 llama.cpp first, round 3 sluice first.
  EXPECT_EQ(file_bytes(tmp.file("order")),
            "sluice\nllama-pp\nllama-tg\nllama-pp\nllama-tg\nsluice\nsluice\nllama-pp\nllama-tg\n");
  const std::string sluice_call =
      "bench -m " + model + " --load-all -t 2 -p 64 -n 16 -r 2 -o csv --resident-layout plain\n";
  EXPECT_EQ(file_bytes(tmp.file("sluice.argv")), sluice_call + sluice_call + sluice_call);
  const std::string lb = "-m " + model + " -t 2 -lm mmap -o csv ";
  const std::string pp = lb + "-p 64 -n 0 -r 2\n", tg = lb + "-p 0 -n 16 -d 64 -r 2\n";
  EXPECT_EQ(file_bytes(tmp.file("llama.argv")), pp + tg + pp + tg + pp + tg);

  EXPECT_NE(
      run.out.find("| in RAM, warm | pp64 tok/s | 30.00 | 10.00 | 3.00 | 20.00, 30.00, 40.00 | "
                   "10.00, 10.00, 20.00 |"),
      std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("| in RAM, warm | tg16 tok/s | 2.00 | 1.00 | 2.00 | 3.00, 1.00, 2.00 | "
                         "1.00, 1.00, 1.00 |"),
            std::string::npos)
      << run.out;
  // The roofline: probed before and after the rounds at the engines' thread count; the
  // tg medians (sluice 2, llama.cpp 1) as shares of 20 tok/s.
  EXPECT_EQ(file_bytes(tmp.file("mem.argv")), "bench --mem -m " + model + " -t 2 -o csv\n"
                                              "bench --mem -m " + model + " -t 2 -o csv\n");
  EXPECT_NE(run.out.find("Roofline: memory read bandwidth at -t 2 35.00 GB/s at the start, 33.50 at the end "
                         "(`sluice bench --mem`); the model reads 1.750 GB of weights per decode token, so "
                         "in-RAM decode cannot pass 20.00 tok/s here. tg16 medians: sluice 10%, llama.cpp 5% "
                         "of it.\n"),
            std::string::npos)
      << run.out;
  // The machine's conditions head the table and precede every process in the log.
  EXPECT_NE(run.out.find("Machine at the start: CPU fake x2; load 0.10 0.20 0.30."), std::string::npos) << run.out;
  const std::string log = file_bytes(tmp.file("out") + "/vs_llama.log");
  size_t n_conditions = 0;
  for (size_t at = log.find("conditions: CPU fake"); at != std::string::npos; at = log.find("conditions: CPU fake", at + 1))
    ++n_conditions;
  EXPECT_EQ(n_conditions, 9u) << log;  // 3 sluice + 6 llama-bench processes
  // sluice's tg sample 1.00 is exactly half its median 2.00: not flagged.
  EXPECT_EQ(run.out.find("below half"), std::string::npos) << run.out;
}

// A sample below half its engine's median is named under the table (and
// warned about), without changing the medians.
TEST(BenchLlamaScripts, VsLlamaNamesSamplesBelowHalfTheirEnginesMedian) {
  TempDir tmp;
  const std::string dir = tmp.path.string(), model = tmp.file("m.gguf");
  std::ofstream(model) << "x";
  write_exe(tmp.file("llama-bench"), fake_llama(dir, "10", "k == 2 ? 2 : 5"));  // tg 5, 2, 5: 2 < 2.5
  // sluice: pp 14, 30, 40 (median 30; 14 < 15); tg 2, 2, 2.
  write_exe(tmp.file("sluice"), fake_sluice(dir, "CPU fake x2", "", "(0 14 30 40)", "(0 2 2 2)"));
  const Shell run = sh("bash " + script("bench/vs_llama.sh") + " --model " + model + " --sluice " +
                       tmp.file("sluice") + " --llama-bench " + tmp.file("llama-bench") + " --rounds 3 --out " +
                       tmp.file("out"));
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("| in RAM, warm | pp64 tok/s | 30.00 | 10.00 | 3.00 | 14.00, 30.00, 40.00 |"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("**Warning: samples below half their engine's median**"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("- llama.cpp in RAM tg round 2: 2.00 (median 5.00)\n"
                         "- sluice in RAM pp round 1: 14.00 (median 30.00)\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("vs_llama.sh: warning: 2 sample(s) below half their engine's median"), std::string::npos)
      << run.out;
}

TEST(BenchLlamaScripts, BadFlagsEndInOneMessageNamingTheFlag) {
  TempDir tmp;
  const std::string model = tmp.file("m.gguf");
  std::ofstream(model) << "x";
  struct Case {
    std::string cmd, message;
  };
  const Case cases[] = {
      {"bench/figures.sh --model " + model + " --steps llama --out " + tmp.file("o"),
       "figures.sh: error: --steps llama needs --llama-bench PATH"},
      {"bench/figures.sh --model " + model + " --llama-bench " + tmp.file("none") +
           " --steps llama --out " + tmp.file("o"),
       "figures.sh: error: --llama-bench: '" + tmp.file("none") + "' is not an executable file"},
      {"bench/vs_llama.sh --model " + model + " --rounds 0",
       "vs_llama.sh: error: --rounds must be a positive integer"},
      {"bench/vs_llama.sh --model " + tmp.file("none"),
       "vs_llama.sh: error: --model: '" + tmp.file("none") + "' is not a readable file"},
      {"bench/vs_llama.sh --model " + model + " --sluice /bin/true --llama-bench " +
           tmp.file("none"),
       "vs_llama.sh: error: --llama-bench: '" + tmp.file("none") + "' is not an executable file"},
      {"bench/vs_llama.sh --model " + model +
           " --skip-warm --llama-bench /bin/true --sluice /bin/true",
       "vs_llama.sh: error: --skip-warm leaves nothing to measure without --cap SIZE"},
  };
  for (const Case& c : cases) {
    const Shell run = sh("bash " + script(c.cmd.substr(0, c.cmd.find(' ')).c_str()) +
                         c.cmd.substr(c.cmd.find(' ')));
    EXPECT_EQ(run.status, 1) << c.cmd << "\n" << run.out;
    EXPECT_NE(run.out.find(c.message), std::string::npos) << c.cmd << "\n" << run.out;
  }
}

}  // namespace
