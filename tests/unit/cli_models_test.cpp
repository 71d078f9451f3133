// `sluice models` and `-m NAME` through the real binary, on fake stores under
// a temp HOME: the listing (text and --json) with sizes, architectures,
// quants, runnability and broken entries; a stored model runs exactly as its
// file does; a name no store has fails with the folders it looked in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "store/locate.h"
#include "store_test_support.h"

namespace SLUICE_TEST_FILE {

using sluice::test::add_ollama_model;
using sluice::test::CliResult;
using sluice::test::FakeHome;
using sluice::test::write_header_gguf;
using sluice::test::write_text;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

// One model of each kind, runnable or not, and two broken ones.
struct Stores {
  Stores() {
    write_header_gguf(
        add_ollama_model(h.ollama(), "registry.ollama.ai", "library", "qwen3", "tiny"), "qwen3moe",
        15);
    add_ollama_model(h.ollama(), "registry.ollama.ai", "someone", "gone",
                     "latest");  // its blob is missing
    const fs::path snap = h.hub() / "models--org--Tiny-GGUF" / "snapshots" / "rev1";
    write_text(h.hub() / "models--org--Tiny-GGUF" / "refs" / "main", "rev1");
    write_header_gguf(snap / "Tiny-Q8_0.gguf", "llama", 7);
    split1 = snap / "Tiny-Q6_K-00001-of-00002.gguf";
    split2 = snap / "Tiny-Q6_K-00002-of-00002.gguf";
    write_header_gguf(split1, "qwen3moe", 18, std::make_pair(uint16_t{0}, uint16_t{2}));
    write_header_gguf(split2, "qwen3moe", 18, std::make_pair(uint16_t{1}, uint16_t{2}));
    write_header_gguf(h.lmstudio() / "pub" / "Gem-GGUF" / "gem-F16.gguf", "gemma3", 1);
    write_text(h.lmstudio_old() / "pub" / "Bad-GGUF" / "bad.gguf", "not a gguf at all");
  }
  FakeHome h;
  fs::path split1, split2;
};

std::map<std::string, nlohmann::json> by_reference(const nlohmann::json& j) {
  std::map<std::string, nlohmann::json> m;
  for (const nlohmann::json& e : j.at("models")) m[e.at("reference").get<std::string>()] = e;
  return m;
}

TEST(CliModels, JsonListsEveryStoreWithHeaderFacts) {
  const Stores s;
  const CliResult r = s.h.sluice("models --json", "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stores"]["ollama"], s.h.ollama().string());
  EXPECT_EQ(j["stores"]["huggingface"], s.h.hub().string());
  auto m = by_reference(j);
  ASSERT_EQ(m.size(), 6u) << r.out;

  const nlohmann::json& q = m.at("qwen3:tiny");
  EXPECT_EQ(q["store"], "ollama");
  EXPECT_EQ(q["architecture"], "qwen3moe");
  EXPECT_EQ(q["quant"], "Q4_K_M");
  EXPECT_EQ(q["file_type"], 15);
  EXPECT_EQ(q["runs"], true);
  EXPECT_EQ(q["size_bytes"], fs::file_size(q["path"].get<std::string>()));
  EXPECT_TRUE(q["error"].is_null());

  const nlohmann::json& gone = m.at("someone/gone:latest");
  EXPECT_EQ(gone["runs"], false);
  EXPECT_TRUE(gone["path"].is_null());
  EXPECT_THAT(gone["error"].get<std::string>(), HasSubstr("is missing"));

  const nlohmann::json& q8 = m.at("org/Tiny-GGUF:Tiny-Q8_0.gguf");
  EXPECT_EQ(q8["store"], "huggingface");
  EXPECT_EQ(q8["architecture"], "llama");
  EXPECT_EQ(q8["quant"], "Q8_0");
  EXPECT_EQ(q8["runs"], true);

  const nlohmann::json& split =
      m.at("org/Tiny-GGUF:Tiny-Q6_K-00001-of-00002.gguf");  // once, as its first part
  EXPECT_EQ(split["quant"], "Q6_K");
  EXPECT_EQ(split["size_bytes"], fs::file_size(s.split1) + fs::file_size(s.split2));

  const nlohmann::json& gem = m.at("pub/Gem-GGUF");
  EXPECT_EQ(gem["store"], "lmstudio");
  EXPECT_EQ(gem["architecture"], "gemma3");
  EXPECT_EQ(gem["quant"], "F16");
  EXPECT_EQ(gem["runs"], false);
  EXPECT_THAT(gem["error"].get<std::string>(), HasSubstr("architecture 'gemma3' is not supported"));

  const nlohmann::json& bad = m.at("pub/Bad-GGUF");
  EXPECT_EQ(bad["runs"], false);
  EXPECT_EQ(bad["size_bytes"], 17);
  EXPECT_TRUE(bad["architecture"].is_null());
  EXPECT_THAT(bad["error"].get<std::string>(), HasSubstr("bad.gguf"));

  // Every listed reference is one -m resolves to the listed file.
  for (const auto& [ref, e] : m) {
    if (e["path"].is_null()) continue;
    EXPECT_EQ(sluice::store::resolve_model(ref, s.h.roots()), e["path"]) << ref;
  }
}

TEST(CliModels, TextIsATableWithOneRowPerModel) {
  const Stores s;
  const CliResult r = s.h.sluice("models", "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.rfind("REFERENCE", 0), 0u) << r.out;
  EXPECT_THAT(r.out, AllOf(HasSubstr("STORE"), HasSubstr("SIZE"), HasSubstr("ARCH"),
                           HasSubstr("QUANT"), HasSubstr("RUNS")));
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 7) << r.out;
  const auto row = [&](const std::string& ref) {
    const size_t at = r.out.find("\n" + ref + " ");
    return at == std::string::npos ? std::string()
                                   : r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  EXPECT_THAT(row("qwen3:tiny"), AllOf(HasSubstr("ollama"), HasSubstr("qwen3moe"),
                                       HasSubstr("Q4_K_M"), HasSubstr("yes")));
  EXPECT_THAT(row("pub/Gem-GGUF"), AllOf(HasSubstr("lmstudio"), HasSubstr("gemma3"),
                                         HasSubstr(" no "), HasSubstr("not supported")));
  EXPECT_THAT(row("pub/Bad-GGUF"), AllOf(HasSubstr(" no "), HasSubstr("bad.gguf")));
}

TEST(CliModels, NoStoresSaysWhereItLooked) {
  const FakeHome h;
  const CliResult r = h.sluice("models", "2>/dev/null");
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, AllOf(HasSubstr("no models found in ollama (" + h.ollama().string() + ")"),
                           HasSubstr("Hugging Face cache (" + h.hub().string() + ")"),
                           HasSubstr(h.lmstudio_old().string())));
  // $OLLAMA_MODELS and $HF_HOME move those stores.
  const CliResult moved =
      FakeHome::run_sluice_env("env -u HF_HUB_CACHE -u XDG_CACHE_HOME HOME=" + h.home().string() +
                                   " OLLAMA_MODELS=/o HF_HOME=/hf",
                               "models", "2>/dev/null");
  EXPECT_THAT(moved.out,
              AllOf(HasSubstr("ollama (/o)"), HasSubstr("Hugging Face cache (/hf/hub)")));
}

const std::string kStories = "models/stories-moe-8x-q8_0.gguf";

TEST(CliModels, RunByStoreNameIsRunOnTheFile) {
  if (!sluice::test::shared_has(kStories))
    GTEST_SKIP() << kStories << " not present in " << SLUICE_SHARED_DIR;
  const fs::path model = fs::absolute(sluice::test::shared_path(kStories));
  FakeHome h;
  fs::create_symlink(
      model, add_ollama_model(h.ollama(), "registry.ollama.ai", "library", "stories", "q8"));
  const fs::path snap = h.hub() / "models--tiny--stories-GGUF" / "snapshots" / "abc";
  write_text(h.hub() / "models--tiny--stories-GGUF" / "refs" / "main", "abc");
  fs::create_directories(snap);
  fs::create_symlink(model, snap / "stories-moe-8x-q8_0.gguf");
  const std::string gen = " -p 'Once upon a time' -n 8 --temp 0 -t 1";
  const CliResult direct = h.sluice("run -m " + model.string() + gen, "2>/dev/null");
  ASSERT_EQ(direct.status, 0) << direct.out;
  EXPECT_EQ(direct.out.rfind("Once upon a time", 0), 0u) << direct.out;
  for (const char* name : {"stories:q8", "tiny/stories-GGUF:Q8_0", "tiny/stories-GGUF"}) {
    const CliResult r = h.sluice(std::string("run -m ") + name + gen, "2>/dev/null");
    EXPECT_EQ(r.status, 0) << name << ": " << r.out;
    EXPECT_EQ(r.out, direct.out) << name;
  }
#if SLUICE_HAS_SERVE
  // serve's default model id is the name asked for, not the blob's file name (sha256-...).
  const std::string log = (h.home() / "serve.log").string();
  int rc = 0;
  const std::string served = sluice::test::run_cmd(
      "env -u OLLAMA_MODELS -u HF_HUB_CACHE -u HF_HOME -u XDG_CACHE_HOME HOME=" +
          h.home().string() + " " + SLUICE_BINARY + " serve -m stories:q8 --port 0 -t 1 >" + log +
          " 2>/dev/null & p=$!; " + "for i in $(seq 300); do grep -q serving " + log +
          " && break; sleep 0.1; done; kill $p; wait $p; cat " + log,
      &rc);
  EXPECT_EQ(served.rfind("sluice: serving stories:q8 on http://127.0.0.1:", 0), 0u) << served;
#endif
  const CliResult info = h.sluice("inspect stories:q8 --json", "2>/dev/null");
  ASSERT_EQ(info.status, 0) << info.out;
  EXPECT_EQ(nlohmann::json::parse(info.out)["architecture"], "llama");
}

TEST(CliModels, UnknownNameIsOneErrorNamingTheFolders) {
  const FakeHome h;
  const CliResult r = h.sluice("run -m nosuch:tag -p hi -n 1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(
      r.out,
      AllOf(HasSubstr(
                "sluice: error: -m: 'nosuch:tag' is not a file, and no local model store has it"),
            HasSubstr((h.ollama() / "manifests/registry.ollama.ai/library/nosuch/tag").string()),
            HasSubstr(h.hub().string()), HasSubstr(h.lmstudio().string())));
  EXPECT_THAT(r.out, Not(HasSubstr("internal error")));
  // Every command that takes a model resolves it the same way.
  for (const std::string cmd :
       {"inspect -m nosuch:tag", "tokenize -m nosuch:tag -p hi", "bench -m nosuch:tag"}) {
    const CliResult c = h.sluice(cmd);
    EXPECT_EQ(c.status, 1) << cmd << ": " << c.out;
    EXPECT_THAT(c.out, HasSubstr("'nosuch:tag' is not a file")) << cmd;
  }
}

}  // namespace
