// Fake model stores for the store tests: an ollama store, a Hugging Face hub
// cache and an LM Studio folder laid out as those tools write them, under a
// temp dir, with tiny header-only GGUFs (or links to real models).
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "gguf/writer.h"
#include "store/locate.h"
#include "test_support.h"

namespace sluice::test {

namespace fs = std::filesystem;

inline void write_text(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A GGUF with metadata only: general.architecture, general.file_type and,
// for a split part (no 0-based, count), split.no / split.count.
inline void write_header_gguf(const fs::path& p, const std::string& arch, uint32_t file_type,
                              std::optional<std::pair<uint16_t, uint16_t>> split = std::nullopt) {
  fs::create_directories(p.parent_path());
  gguf::Writer w(p.string());
  w.add_metadata("general.architecture", gguf::Value::from_string(arch));
  w.add_metadata("general.file_type", gguf::Value::from_u32(file_type));
  if (split) {
    gguf::Value no, count;
    no.type = count.type = gguf::ValueType::UINT16;
    no.u = split->first;
    count.u = split->second;
    w.add_metadata("split.no", no);
    w.add_metadata("split.count", count);
  }
  w.write_header();
  w.finish();
}

// A 64-hex-digit digest made from a short tag (distinct tags, distinct digests).
inline std::string digest_hex(const std::string& tag) {
  std::string hex;
  for (char c : tag) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(c));
    hex += b;
  }
  return (hex + std::string(64, '0')).substr(0, 64);
}

// ROOT/manifests/HOST/NS/MODEL/TAG naming the blob ROOT/blobs/sha256-HEX as
// its model layer (beside a config and a template layer, as ollama writes).
// Returns the blob's path; the caller puts a GGUF there.
inline fs::path add_ollama_model(const fs::path& root, const std::string& host,
                                 const std::string& ns, const std::string& model,
                                 const std::string& tag) {
  const std::string hex = digest_hex(host + ns + model + tag);
  const nlohmann::json manifest = {
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.docker.distribution.manifest.v2+json"},
      {"config",
       {{"mediaType", "application/vnd.docker.container.image.v1+json"},
        {"digest", "sha256:" + digest_hex("cfg")},
        {"size", 10}}},
      {"layers",
       {{{"mediaType", "application/vnd.ollama.image.template"},
         {"digest", "sha256:" + digest_hex("tpl")},
         {"size", 5}},
        {{"mediaType", "application/vnd.ollama.image.model"},
         {"digest", "sha256:" + hex},
         {"size", 100}}}}};
  write_text(root / "manifests" / host / ns / model / tag, manifest.dump());
  fs::create_directories(root / "blobs");
  return root / "blobs" / ("sha256-" + hex);
}

// The folder layout of HOME with every store at its default place.
struct FakeHome {
  TempDir dir;
  fs::path home() const { return dir.path; }
  fs::path ollama() const { return dir.path / ".ollama" / "models"; }
  fs::path hub() const { return dir.path / ".cache" / "huggingface" / "hub"; }
  fs::path lmstudio() const { return dir.path / ".lmstudio" / "models"; }
  fs::path lmstudio_old() const { return dir.path / ".cache" / "lm-studio" / "models"; }
  store::StoreRoots roots() const {
    return {ollama().string(), hub().string(), {lmstudio().string(), lmstudio_old().string()}};
  }
  // `sluice ARGS` seeing only this HOME's stores.
  CliResult sluice(const std::string& args, const std::string& redirect = "2>&1") const {
    return run_sluice_env(
        "env -u OLLAMA_MODELS -u HF_HUB_CACHE -u HF_HOME -u XDG_CACHE_HOME HOME=" + home().string(),
        args, redirect);
  }
  static CliResult run_sluice_env(const std::string& env, const std::string& args,
                                  const std::string& redirect) {
    CliResult r;
    r.out = run_cmd(env + " " + SLUICE_BINARY + " " + args + " " + redirect, &r.status);
    return r;
  }
};

}  // namespace sluice::test
