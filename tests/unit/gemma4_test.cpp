// gemma4 beyond the golden logits: what the declaration reads from the
// golden files (SWA/full layers with their own head dims and KV heads, K = V,
// proportional RoPE), the per-layer KV rows state_spec sizes from it, and the
// fused ffn_gate_up_exps seen as gate and up halves of one expert extent.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>

#include "gguf/expert_layout.h"
#include "model/arch.h"
#include "model/state/state_spec.h"
#include "case_name.h"
#include "model_test_support.h"
#include "tools/model_info.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

TEST(Gemma4, DeclarationReadsPerLayerGeometry) {
  REQUIRE_SHARED("golden/gemma4-f32.gguf");
  const gguf::GgufModel g = gguf::GgufModel::open(shared_path("golden/gemma4-f32.gguf"));
  const model::ArchDesc d = model::describe_architecture(g);
  ASSERT_EQ(d.layers.size(), 6u);
  EXPECT_TRUE(d.tied_output);
  EXPECT_FLOAT_EQ(d.hp.logit_softcap, 30.0f);
  EXPECT_FLOAT_EQ(d.hp.embd_scale, 16.0f);  // sqrt(256)
  EXPECT_FLOAT_EQ(d.hp.attn_scale, 1.0f);
  const bool swa[6] = {true, true, false, true, true, false};  // SSFSSF
  for (size_t il = 0; il < 6; ++il) {
    const model::AttentionDesc& a = d.layers[il].attn;
    EXPECT_EQ(d.layers[il].block, model::BlockKind::Gemma4);
    EXPECT_EQ(d.layers[il].ffn.act, model::Activation::GeluTanh);
    ASSERT_TRUE(a.rope.has_value());
    if (swa[il]) {
      EXPECT_EQ(a.window, 8u) << il;
      EXPECT_EQ(a.head_dim, 64u);
      EXPECT_EQ(a.n_head_kv, 2u);
      EXPECT_FLOAT_EQ(a.rope->theta, 1e4f);
      EXPECT_FALSE(a.rope_freqs);
    } else {
      EXPECT_EQ(a.window, 0u) << il;
      EXPECT_EQ(a.head_dim, 128u);
      EXPECT_EQ(a.n_head_kv, 1u);
      EXPECT_FLOAT_EQ(a.rope->theta, 1e6f);
      EXPECT_EQ(a.rope->n_rot, 128u);
      EXPECT_TRUE(a.rope_freqs);
      EXPECT_TRUE(a.v_from_k);
    }
  }
  // KV rows per layer at its own geometry: SWA 2 x 64, full 1 x 128 (K and V).
  // With --ubatch 1 the sliding-window layers keep a ring of window 8 + slack 16.
  const auto specs = model::model_state_specs(d, 100, 1);
  for (size_t il = 0; il < 6; ++il) {
    EXPECT_EQ(specs[il].kind, model::StateKind::KvRows);
    EXPECT_EQ(specs[il].kv.capacity, swa[il] ? 24 : 100);
    EXPECT_EQ(specs[il].kv.k_dim(), swa[il] ? 128 : 128);
    EXPECT_EQ(specs[il].kv.n_kv_heads, swa[il] ? 2 : 1);
    EXPECT_EQ(specs[il].kv.head_dim_v, swa[il] ? 64 : 128);
  }
}

// `sluice inspect` names the layer kinds with their geometry.
TEST(Gemma4, InspectNamesSlidingWindowAndFullLayers) {
  REQUIRE_SHARED("golden/gemma4-kquants.gguf");
  const tools::ModelInfo info = tools::model_info(gguf::GgufModel::open(shared_path("golden/gemma4-kquants.gguf")));
  EXPECT_TRUE(info.not_runnable.empty()) << info.not_runnable;
  EXPECT_EQ(info.layer_mixers,
            "sliding-window x4 (window 8; 2 kv heads x 64), full attention x2 (blk 2, 5; 1 kv head x 128)");
  EXPECT_GT(info.sizing.kv_bytes, 0u);
}

// Fused gate/up: each expert's gate and up are the two adjacent halves of
// its slice of ffn_gate_up_exps (so the store reads them as one extent); the
// split file's separate tensors describe the same shapes.
TEST(Gemma4, FusedGateUpIsTwoAdjacentHalves) {
  REQUIRE_SHARED("golden/gemma4-f32.gguf");
  const gguf::GgufModel g = gguf::GgufModel::open(shared_path("golden/gemma4-f32.gguf"));
  const auto parts = gguf::layer_expert_parts(g);
  ASSERT_EQ(parts.size(), 6u);
  const gguf::TensorInfo& fused = g.require("blk.2.ffn_gate_up_exps.weight");
  const gguf::LayerExpertParts& lp = parts[2];
  ASSERT_EQ(lp.n_expert(), 16u);
  EXPECT_TRUE(lp.part[gguf::kGate].fused);
  EXPECT_EQ(lp.part[gguf::kGate].ne, (std::vector<uint64_t>{256, 64}));
  EXPECT_EQ(lp.part[gguf::kUp].ne, (std::vector<uint64_t>{256, 64}));
  EXPECT_EQ(lp.part[gguf::kGate].bytes, 256u * 64 * 4);
  for (uint64_t e = 0; e < 16; ++e) {
    const auto& r = lp.experts[e];
    EXPECT_EQ(r[gguf::kGate].offset, g.expert_range(fused, e).offset);
    EXPECT_EQ(r[gguf::kGate].offset + r[gguf::kGate].bytes, r[gguf::kUp].offset) << e;
    EXPECT_EQ(r[gguf::kUp].bytes, r[gguf::kGate].bytes);
  }
  const auto n = gguf::parse_expert_tensor_name("blk.2.ffn_gate_up_exps.weight");
  ASSERT_TRUE(n);
  EXPECT_TRUE(n->fused_gate_up);
  EXPECT_FALSE(gguf::parse_expert_tensor_name("blk.2.ffn_gate_up_exps.scale"));

  REQUIRE_SHARED("golden/gemma4-split-q8_0.gguf");
  const gguf::GgufModel s = gguf::GgufModel::open(shared_path("golden/gemma4-split-q8_0.gguf"));
  const auto sp = gguf::layer_expert_parts(s);
  EXPECT_FALSE(sp[2].part[gguf::kGate].fused);
  EXPECT_EQ(sp[2].part[gguf::kGate].ne, (std::vector<uint64_t>{256, 64}));
}

// Micro-batch size and thread count never change a bit (SWA windows, per-
// layer geometry and the parallel MLP + experts included), and token-by-token
// decode gives the prefill's bits.
class Gemma4Invariance : public ::testing::TestWithParam<std::string> {};

TEST_P(Gemma4Invariance, UbatchThreadsAndDecodeGiveIdenticalLogits) {
  REQUIRE_SHARED("golden/" + GetParam() + ".gguf");
  const std::string path = shared_path("golden/" + GetParam() + ".gguf");
  std::ifstream jf(shared_path("golden/" + GetParam() + ".json"));
  const auto tokens = nlohmann::json::parse(jf)["tokens"].get<std::vector<int32_t>>();
  auto base_cfg = golden_config();
  base_cfg.ubatch = 512;
  const auto baseline = eval_all(*load(path, base_cfg), tokens);
  for (int ubatch : {1, 5})
    for (int threads : {1, 2}) {
      auto cfg = golden_config();
      cfg.ubatch = ubatch;
      cfg.threads = threads;
      EXPECT_TRUE(same_bits(eval_all(*load(path, cfg), tokens), baseline)) << "ubatch " << ubatch << " threads "
                                                                           << threads;
    }
  auto m = load(path, base_cfg);
  const size_t nv = m->hparams().n_vocab;
  std::vector<float> step(tokens.size() * nv);
  for (size_t i = 0; i < tokens.size(); ++i)
    m->eval(std::span(tokens).subspan(i, 1), static_cast<int>(i), &step[i * nv]);
  EXPECT_TRUE(same_bits(step, baseline));
}

INSTANTIATE_TEST_SUITE_P(Cases, Gemma4Invariance,
                         ::testing::Values("gemma4-f32", "gemma4-kquants", "gemma4-split-q8_0"),
                         CaseName());

}  // namespace
}  // namespace sluice::test
