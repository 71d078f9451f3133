// store::resolve_model on fake ollama / Hugging Face / LM Studio layouts:
// each kind of reference, quant picking, ambiguity and not-found messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "store/locate.h"
#include "store_test_support.h"

namespace SLUICE_TEST_FILE {

using sluice::store::looks_like_path;
using sluice::store::resolve_model;
using sluice::test::add_ollama_model;
using sluice::test::error_of;
using sluice::test::FakeHome;
using sluice::test::write_text;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

TEST(StoreLocate, WhatLooksLikeAPath) {
  for (const char* p : {"/models/x.gguf", "./x", "../x", "~/x", "model.gguf", "dir/Model.GGUF"})
    EXPECT_TRUE(looks_like_path(p)) << p;
  for (const char* r :
       {"qwen3:30b-a3b", "qwen3", "org/name", "org/name:Q4_K_M", "org/name:file.gguf"})
    EXPECT_FALSE(looks_like_path(r)) << r;
}

TEST(StoreLocate, AnExistingFileOrAPathIsReturnedAsGiven) {
  FakeHome h;
  write_text(h.home() / "qwen3:30b", "x");  // an existing file wins over any store
  const sluice::store::StoreRoots roots = h.roots();
  EXPECT_EQ(resolve_model((h.home() / "qwen3:30b").string(), roots),
            (h.home() / "qwen3:30b").string());
  EXPECT_EQ(resolve_model("/nonexistent/m.gguf", roots),
            "/nonexistent/m.gguf");  // open says what is wrong
  // A relative name that exists in the working directory is the file, not a reference.
  write_text(h.home() / "org" / "name", "x");
  const fs::path cwd = fs::current_path();
  fs::current_path(h.home());
  const std::string got = resolve_model("org/name", roots);
  fs::current_path(cwd);
  EXPECT_EQ(got, "org/name");
}

TEST(StoreLocate, OllamaNamesInEverySpelling) {
  FakeHome h;
  const fs::path blob =
      add_ollama_model(h.ollama(), "registry.ollama.ai", "library", "qwen3", "30b-a3b");
  const fs::path latest =
      add_ollama_model(h.ollama(), "registry.ollama.ai", "library", "qwen3", "latest");
  const fs::path user = add_ollama_model(h.ollama(), "registry.ollama.ai", "someone", "tiny", "q8");
  const fs::path hf = add_ollama_model(h.ollama(), "hf.co", "org", "repo", "Q4_K_M");
  for (const fs::path& b : {blob, latest, user, hf}) write_text(b, "GGUF");
  const auto roots = h.roots();
  EXPECT_EQ(resolve_model("qwen3:30b-a3b", roots), blob.string());
  EXPECT_EQ(resolve_model("library/qwen3:30b-a3b", roots), blob.string());
  EXPECT_EQ(resolve_model("registry.ollama.ai/library/qwen3:30b-a3b", roots), blob.string());
  EXPECT_EQ(resolve_model("qwen3", roots), latest.string());        // no tag: latest
  EXPECT_EQ(resolve_model("Qwen3:30B-A3B", roots), blob.string());  // ollama names ignore case
  EXPECT_EQ(resolve_model("someone/tiny:q8", roots), user.string());
  EXPECT_EQ(resolve_model("hf.co/org/repo:Q4_K_M", roots), hf.string());
}

TEST(StoreLocate, BrokenOllamaManifestsAreNamedErrors) {
  FakeHome h;
  const auto roots = h.roots();
  const fs::path manifests = h.ollama() / "manifests" / "registry.ollama.ai" / "library";
  add_ollama_model(h.ollama(), "registry.ollama.ai", "library", "noblob",
                   "latest");  // blob never written
  EXPECT_THAT(error_of([&] { resolve_model("noblob", roots); }),
              AllOf(HasSubstr((manifests / "noblob" / "latest").string()), HasSubstr("model blob"),
                    HasSubstr("is missing")));
  write_text(manifests / "junk" / "latest", "{not json");
  EXPECT_THAT(
      error_of([&] { resolve_model("junk", roots); }),
      AllOf(HasSubstr((manifests / "junk" / "latest").string()), HasSubstr("not valid JSON")));
  write_text(
      manifests / "safet" / "latest",
      R"({"layers":[{"mediaType":"application/vnd.ollama.image.tensor","digest":"sha256:00"}]})");
  EXPECT_THAT(error_of([&] { resolve_model("safet", roots); }),
              HasSubstr("has no GGUF model layer"));
  write_text(
      manifests / "baddigest" / "latest",
      R"({"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:../../x"}]})");
  EXPECT_THAT(error_of([&] { resolve_model("baddigest", roots); }),
              HasSubstr("not sha256:<64 hex digits>"));
}

// A hub cache repo as huggingface_hub writes it: snapshot files are links
// into blobs/, refs/main names the current snapshot.
struct HfRepo {
  explicit HfRepo(const FakeHome& h) : repo(h.hub() / "models--org--Model-GGUF") {
    write_text(repo / "refs" / "main", "rev2\n");
    add("rev1", "Model-Q8_0.gguf");  // an older revision: never picked while refs/main names rev2
    for (const char* f :
         {"Model-Q4_K_M.gguf", "Model-Q4_K_S.gguf", "Model-Q8_0.gguf", "mmproj-Model-F16.gguf",
          "Q6_K/Model-Q6_K-00001-of-00002.gguf", "Q6_K/Model-Q6_K-00002-of-00002.gguf"})
      add("rev2", f);
  }
  void add(const std::string& rev, const std::string& file) {
    const fs::path blob = repo / "blobs" / (rev + "-" + fs::path(file).filename().string());
    write_text(blob, "GGUF");
    const fs::path link = repo / "snapshots" / rev / file;
    fs::create_directories(link.parent_path());
    fs::create_symlink(fs::relative(blob, link.parent_path()), link);
  }
  fs::path snap(const std::string& rev) const { return repo / "snapshots" / rev; }
  fs::path repo;
};

TEST(StoreLocate, HuggingFaceCacheByQuantOrFile) {
  FakeHome h;
  const HfRepo r(h);
  const auto roots = h.roots();
  EXPECT_EQ(resolve_model("org/Model-GGUF:Q4_K_M", roots),
            (r.snap("rev2") / "Model-Q4_K_M.gguf").string());
  EXPECT_EQ(resolve_model("org/Model-GGUF:q8_0", roots),
            (r.snap("rev2") / "Model-Q8_0.gguf").string());
  EXPECT_EQ(resolve_model("org/Model-GGUF:Model-Q4_K_S.gguf", roots),
            (r.snap("rev2") / "Model-Q4_K_S.gguf").string());
  // A split model is its first part, kept as the snapshot's link so its other parts sit beside it.
  EXPECT_EQ(resolve_model("org/Model-GGUF:Q6_K", roots),
            (r.snap("rev2") / "Q6_K" / "Model-Q6_K-00001-of-00002.gguf").string());
  EXPECT_EQ(resolve_model("org/model-gguf:Q4_K_M", roots),
            (r.snap("rev2") / "Model-Q4_K_M.gguf").string());
}

TEST(StoreLocate, HuggingFaceAmbiguityListsTheCandidates) {
  FakeHome h;
  const HfRepo r(h);
  const auto roots = h.roots();
  EXPECT_THAT(
      error_of([&] { resolve_model("org/Model-GGUF:Q4_K", roots); }),
      AllOf(HasSubstr("'Q4_K' matches 2 models"), HasSubstr("Model-Q4_K_M.gguf, Model-Q4_K_S.gguf"),
            HasSubstr(r.snap("rev2").string())));
  // No selector: four models (the projector and the second split part are not candidates).
  EXPECT_THAT(error_of([&] { resolve_model("org/Model-GGUF", roots); }),
              AllOf(HasSubstr("holds 4 models"), HasSubstr("Q6_K/Model-Q6_K-00001-of-00002.gguf"),
                    Not(HasSubstr("00002-of-00002")), Not(HasSubstr("mmproj"))));
  EXPECT_THAT(error_of([&] { resolve_model("org/Model-GGUF:Q5_K_M", roots); }),
              AllOf(HasSubstr(r.snap("rev2").string() +
                              ": no model file matching 'Q5_K_M' (has: Model-Q4_K_M.gguf"),
                    HasSubstr("not a file, and no local model store has it")));
}

TEST(StoreLocate, HuggingFaceWithoutRefsTakesTheNewestSnapshot) {
  FakeHome h;
  HfRepo r(h);
  fs::remove(r.repo / "refs" / "main");
  fs::last_write_time(r.snap("rev2"), fs::file_time_type::clock::now() - std::chrono::hours(24));
  fs::last_write_time(r.snap("rev1"), fs::file_time_type::clock::now());
  EXPECT_EQ(resolve_model("org/Model-GGUF", h.roots()),
            (r.snap("rev1") / "Model-Q8_0.gguf").string());
}

TEST(StoreLocate, LmStudioBothFolders) {
  FakeHome h;
  write_text(h.lmstudio() / "lmstudio-community" / "Qwen3-GGUF" / "Qwen3-Q4_K_M.gguf", "GGUF");
  write_text(h.lmstudio_old() / "TheBloke" / "Old-GGUF" / "old.Q5_K_M.gguf", "GGUF");
  write_text(h.lmstudio_old() / "TheBloke" / "Old-GGUF" / "old.Q8_0.gguf", "GGUF");
  const auto roots = h.roots();
  EXPECT_EQ(resolve_model("lmstudio-community/Qwen3-GGUF", roots),
            (h.lmstudio() / "lmstudio-community" / "Qwen3-GGUF" / "Qwen3-Q4_K_M.gguf").string());
  EXPECT_EQ(resolve_model("TheBloke/Old-GGUF:Q8_0", roots),
            (h.lmstudio_old() / "TheBloke" / "Old-GGUF" / "old.Q8_0.gguf").string());
}

TEST(StoreLocate, StoresAreAskedInOrder) {
  FakeHome h;
  const fs::path blob = add_ollama_model(h.ollama(), "registry.ollama.ai", "org", "name", "Q8_0");
  write_text(blob, "GGUF");
  write_text(h.lmstudio() / "org" / "name" / "name-Q8_0.gguf", "GGUF");
  EXPECT_EQ(resolve_model("org/name:Q8_0", h.roots()), blob.string());  // ollama before LM Studio
}

TEST(StoreLocate, NotFoundNamesEveryFolderItLookedIn) {
  FakeHome h;
  const auto roots = h.roots();
  EXPECT_THAT(
      error_of([&] { resolve_model("nosuch/model:Q4_K_M", roots); }),
      AllOf(HasSubstr("'nosuch/model:Q4_K_M' is not a file, and no local model store has it"),
            HasSubstr("nothing is downloaded"),
            HasSubstr((h.ollama() / "manifests/registry.ollama.ai/nosuch/model/Q4_K_M").string() +
                      ": no such manifest"),
            HasSubstr((h.hub() / "models--nosuch--model").string() + ": no such folder"),
            HasSubstr((h.lmstudio() / "nosuch/model").string() + ": no such folder"),
            HasSubstr((h.lmstudio_old() / "nosuch/model").string() + ": no such folder")));
  // An ollama-only name says why the other stores could not hold it, naming their folders.
  EXPECT_THAT(
      error_of([&] { resolve_model("qwen9:1b", roots); }),
      AllOf(HasSubstr((h.ollama() / "manifests/registry.ollama.ai/library/qwen9/1b").string()),
            HasSubstr("Hugging Face cache (" + h.hub().string() + "): 'qwen9:1b' is not ORG/NAME"),
            HasSubstr("LM Studio (" + h.lmstudio().string() +
                      "): 'qwen9:1b' is not PUBLISHER/MODEL")));
  // No way out of a model's folder through the selector.
  EXPECT_THAT(error_of([&] { resolve_model("org/name:../../x", roots); }),
              HasSubstr("is not ORG/NAME"));
}

}  // namespace
