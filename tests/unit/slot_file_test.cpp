// Slot save/restore (runtime/slot_file.h): a slot saved, the model loaded
// again ("a restart"), the slot restored, gives the same greedy continuation,
// bit for bit, as never stopping; on a KV-only model (qwen3moe) and a hybrid
// one with recurrent layers (qwen35moe). A corrupt, truncated or mismatched
// file is a SlotFileError naming the problem, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model_test_support.h"
#include "runtime/slot_file.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

std::vector<int32_t> prompt_of(const std::string& name) {
  std::ifstream jf(shared_path("golden/" + name + ".json"));
  return nlohmann::json::parse(jf)["tokens"].get<std::vector<int32_t>>();
}

// Greedy: evaluates `first` then `n` argmax tokens; returns them and every logit row.
std::pair<std::vector<int32_t>, std::vector<float>> continue_greedy(model::Model& m, int32_t first, int n) {
  const size_t nv = m.hparams().n_vocab;
  std::vector<float> row(nv), all;
  std::vector<int32_t> out;
  int32_t t = first;
  for (int i = 0; i < n; ++i) {
    m.eval(std::span(&t, 1), m.n_past(), row.data());
    all.insert(all.end(), row.begin(), row.end());
    t = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    out.push_back(t);
  }
  return {out, all};
}

std::string temp_path(const std::string& tag) {
  return ::testing::TempDir() + "/slot_" + tag + "_" + std::to_string(::getpid()) + ".bin";
}

class SlotFile : public ::testing::TestWithParam<std::string> {};

TEST_P(SlotFile, SaveRestartRestoreContinuesAsNeverStopping) {
  REQUIRE_SHARED("golden/" + GetParam() + ".gguf");
  const std::string path = shared_path("golden/" + GetParam() + ".gguf");
  const std::vector<int32_t> prompt = prompt_of(GetParam());
  ASSERT_GE(prompt.size(), 2u);
  const std::vector<int32_t> head(prompt.begin(), prompt.end() - 1);
  const std::string file = temp_path(GetParam());
  for (model::KvType kv : {model::KvType::F32, model::KvType::F16}) {
    auto cfg = golden_config();
    cfg.kv_type = kv;
    std::pair<std::vector<int32_t>, std::vector<float>> never_stopped;
    {
      auto g = std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(path));
      auto m = model::load_model(g, cfg);
      std::vector<float> logits(head.size() * m->hparams().n_vocab);
      m->eval(head, 0, logits.data());
      runtime::save_slot(file, *m, runtime::slot_identity(*g, *m), 0, head);
      never_stopped = continue_greedy(*m, prompt.back(), 6);
    }
    auto g = std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(path));
    auto m = model::load_model(g, cfg);
    EXPECT_EQ(runtime::restore_slot(file, *m, runtime::slot_identity(*g, *m), 0), head);
    EXPECT_EQ(m->n_past(), static_cast<int>(head.size()));
    const auto restored = continue_greedy(*m, prompt.back(), 6);
    EXPECT_EQ(restored.first, never_stopped.first) << model::kv_type_name(kv);
    EXPECT_TRUE(same_bits(restored.second, never_stopped.second)) << model::kv_type_name(kv);
  }
  std::remove(file.c_str());
}

INSTANTIATE_TEST_SUITE_P(Models, SlotFile, ::testing::Values("qwen3moe-f32", "qwen35moe-f32"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// Every damaged or foreign file is refused with a message saying why, and
// leaves the slot empty.
TEST(SlotFileErrors, CorruptTruncatedAndMismatchedFilesAreRefused) {
  REQUIRE_SHARED("golden/qwen35moe-f32.gguf");
  const std::string path = shared_path("golden/qwen35moe-f32.gguf");
  auto g = std::make_shared<const gguf::GgufModel>(gguf::GgufModel::open(path));
  auto m = model::load_model(g, golden_config());
  const std::vector<int32_t> toks = {1, 2, 3, 4};
  std::vector<float> logits(toks.size() * m->hparams().n_vocab);
  m->eval(toks, 0, logits.data());
  const runtime::SlotIdentity id = runtime::slot_identity(*g, *m);
  std::string state;
  m->slot_save(0, state);
  const std::string good = runtime::encode_slot_file(id, toks, state);
  const int nv = static_cast<int>(m->hparams().n_vocab);
  EXPECT_EQ(runtime::decode_slot_file(good, id, nv, "f").tokens, toks);

  auto refused = [&](const std::string& bytes, const runtime::SlotIdentity& want, const std::string& says) {
    try {
      runtime::decode_slot_file(bytes, want, nv, "f");
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const runtime::SlotFileError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("", id, "truncated");
  refused(std::string(64, 'x'), id, "bad magic");
  refused(good.substr(0, good.size() / 2), id, "checksum");
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 1;
  refused(flipped, id, "checksum");
  runtime::SlotIdentity other = id;
  other.tensor_hash ^= 1;
  refused(good, other, "another model");
  other = id;
  other.n_ctx = 1024;
  refused(good, other, "context of 512");
  refused(runtime::encode_slot_file(id, {nv}, state), id, "outside the vocabulary");
  // Well-formed file whose state does not fit this model's layers.
  std::string bad_state = state;
  bad_state[0] ^= 1;  // the layer count
  const std::string file = temp_path("bad_state");
  {
    std::ofstream f(file, std::ios::binary);
    const std::string bytes = runtime::encode_slot_file(id, toks, bad_state);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  try {
    runtime::restore_slot(file, *m, id, 0);
    ADD_FAILURE() << "accepted a state of another layout";
  } catch (const runtime::SlotFileError& e) {
    EXPECT_NE(std::string(e.what()).find("layers"), std::string::npos) << e.what();
  }
  EXPECT_EQ(m->n_past(), 0);
  // A cut-short state inside a consistent file: named, nothing read past it.
  const std::string cut = runtime::encode_slot_file(id, toks, std::string_view(state).substr(0, state.size() - 4));
  {
    std::ofstream f(file, std::ios::binary);
    f.write(cut.data(), static_cast<std::streamsize>(cut.size()));
  }
  EXPECT_THROW(runtime::restore_slot(file, *m, id, 0), runtime::SlotFileError);
  EXPECT_EQ(m->n_past(), 0);
  std::remove(file.c_str());
}

}  // namespace
}  // namespace sluice::test
