// Internal: the decoder-only transformer every architecture is composed into.
// Pre-norm blocks x += Attn(RMSNorm(x)); x += FFN(RMSNorm(x)), where each
// layer's blocks and their optional inputs come from the architecture's
// declaration (model/arch.h): attention (biases, q/k norm, sinks, window),
// FFN (dense, or routed experts from the ExpertStore plus an optional shared
// expert; router and activation kinds); final RMSNorm and lm head
// (`output.weight`, or the tied token_embd.weight where the architecture allows).
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "model/arch.h"
#include "model/attention.h"
#include "model/mixers/gqa_attention.h"
#include "model/mixers/dsa_attention.h"
#include "model/mixers/dsv4_attention.h"
#include "model/mixers/mla_attention.h"
#include "model/mixers/short_conv.h"
#include "model/ffn.h"
#include "model/matmul.h"
#include "model/mixers/gated_deltanet.h"
#include "model/mixers/kda.h"
#include "model/mixers/gemma4_attention.h"
#include "model/model.h"
#include "model/moe_ffn.h"
#include "model/mtp_head.h"
#include "model/rope.h"
#include "model/router.h"
#include "model/state/model_state.h"
#include "model/state/state_io.h"
#include "model/thread_pool.h"
#include "moe/cache_budget.h"
#include "moe/route_replay.h"

namespace sluice::model {

class Binder;  // transformer.cpp: tensor lookup with shape checks and claims

// A Gemma 4 block's norms and scales (transformer_gemma4.cpp).
struct Gemma4Norms {
  const float* post_attention = nullptr;  // post_attention_norm
  const float* post_ffw_1 = nullptr;      // after the dense MLP
  const float* pre_ffw_2 = nullptr;       // the experts' input
  const float* post_ffw_2 = nullptr;      // after the routed sum
  const float* post_ffw = nullptr;        // after MLP + experts
  const float* router_scale = nullptr;    // ffn_gate_inp.scale {n_embd}
  const float* layer_output_scale = nullptr;  // {1}, or null (optional)
};

// One hyper-connection site of DeepSeek V4 (transformer_dsv4.cpp): hc_*_fn
// {hc n_embd -> (2 + hc) hc}, base, scale {3}; the output head's fn is
// {hc n_embd -> hc} with one scale.
struct HcWeights {
  WeightMatrix fn;
  const float* base = nullptr;
  const float* scale = nullptr;
};

class Transformer final : public Model {
 public:
  Transformer(std::shared_ptr<const gguf::GgufModel> gguf, const ModelConfig& cfg, ArchDesc desc);
  ~Transformer() override;

  const HParams& hparams() const override { return hp_; }
  int n_ctx() const override { return state_->n_ctx(); }
  // Sequence slots (transformer_batch.cpp).
  int n_slots() const override { return 1 + static_cast<int>(extra_slots_.size()); }
  int slot_n_past(int slot) const override { return slot_state(slot).n_past(); }
  int slot_truncate(int slot, int n) override { return slot_state(slot).truncate(n); }
  void slot_checkpoint(int slot) override { slot_state(slot).checkpoint(); }
  void slot_reset(int slot) override;
  StateBytes slot_state_bytes() const override { return state_->bytes(); }
  void slot_allocate(int slot) override { slot_state(slot).allocate(); }
  void slot_release(int slot) override;
  bool slot_allocated(int slot) const override { return slot_state(slot).allocated(); }
  uint64_t slot_state_budget() const override { return slot_state_budget_; }
  void slot_save(int slot, std::string& out) const override { write_state(slot_state(slot), out); }
  void slot_load(int slot, std::string_view in) override {
    read_state(slot_state(slot), in);
    if (slot == 0 && mtp_.state) mtp_.state->reset();  // the head's rows belonged to the old sequence
  }
  void eval_batch(std::span<const SequenceEval> seqs) override;
  void eval(std::span<const int32_t> tokens, int pos0, float* logits_out) override;
  void eval_last(std::span<const int32_t> tokens, int pos0, float* logits_out) override;
  void reset() override {
    state_->reset();
    if (mtp_.state) mtp_.state->reset();
  }
  int n_past() const override { return state_->n_past(); }
  int truncate(int n) override { return state_->truncate(n); }
  void checkpoint() override { state_->checkpoint(); }
  // Only the DeltaNet mixer writes row captures; with any other recurrent
  // mixer (lfm2moe's short convolution) a rejected draft falls back to the
  // checkpoint() taken before the batch instead (correct, with recomputation).
  void checkpoint_rows(int n) override {
    for (const LayerDesc& l : desc_.layers)
      if (l.attn.kind == AttentionKind::ShortConv) return;
    state_->capture_rows(n);
  }
  StateBytes state_bytes() const override;
  ModelStats stats() const override;
  uint64_t expert_bytes(int layer) const override;
  bool has_mtp() const override { return mtp_layer_ >= 0; }
  int64_t mtp_hidden_width() const override { return hp_.dsv4.hc_count > 0 ? x_width() : hp_.n_embd; }
  void eval_hidden(std::span<const int32_t> tokens, int pos0, float* logits_out, float* hidden_out,
                   bool all_rows = true) override;
  void mtp_eval(std::span<const int32_t> tokens, const float* hidden, int pos0, float* logits_out, float* g_out,
                bool all_rows = true) override;
  int mtp_n_past() const override { return mtp_.state ? mtp_.state->n_past() : 0; }
  void mtp_truncate(int n) override;
  double dense_resident_fraction() const override;
  moe::ExpertUsage expert_usage() const override;
  // DSA (glm-dsa): sees every selection a Full indexer layer makes (tests).
  void set_dsa_observer(DsaSelectionObserver f) { dsa_.set_observer(std::move(f)); }
  // deepseek4: sees every CSA layer's selected compressed blocks (tests).
  void set_dsv4_observer(Dsv4SelectionObserver f) { dsv4_attn_.set_observer(std::move(f)); }

 private:
  // One layer's bound weights; optional inputs are null when absent.
  struct Layer {
    const LayerDesc* desc = nullptr;  // into desc_.layers
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
    // The token mixer's weights: desc->attn.kind says which is bound.
    GqaWeights gqa;
    MlaWeights mla;
    DsaIndexerWeights dsa;  // Mla with a Full DSA indexer
    DeltaNetWeights dn;
    KdaWeights kda;
    ShortConvWeights sc;
    const float* bo = nullptr;     // attention output bias
    const float* sinks = nullptr;  // attention sinks
    bool moe = false;
    WeightMatrix router;                   // moe
    const float* router_bias = nullptr;    // moe: added to the logits
    const float* selection_bias = nullptr; // moe: exp_probs_b (selection only)
    ExpertTemplate experts;                // moe
    bool shared = false;                   // moe: shared expert present
    FfnMatrices shexp;                     // moe with shared expert
    const float* shexp_gate = nullptr;     // moe: ffn_gate_inp_shexp {n_embd} (shared_gate)
    FfnMatrices dense;                     // !moe; BlockKind::Gemma4: the dense GELU MLP
    Gemma4Norms g4;                        // BlockKind::Gemma4
    Gemma4AttnWeights g4attn;              // BlockKind::Gemma4
    Dsv4AttnWeights dsv4;                  // BlockKind::Dsv4
    HcWeights hc_attn, hc_ffn;             // BlockKind::Dsv4
    const int32_t* tid2eid = nullptr;      // HashSqrtSoftplus: ffn_gate_tid2eid {k, n_vocab}
  };

  // transformer_setup.cpp: the flags (Error naming the flag), then the model
  // state planned for n_ctx: the trunk's layers, the NextN head's block
  // (when --mtp) and the bytes of every slot's state (Error when more than
  // the memory available, before anything is allocated).
  void check_config();
  struct StatePlan {
    std::vector<LayerStateSpec> specs;  // one slot's trunk
    LayerStateSpec nextn;               // --mtp
    StateBytes bytes;                   // all slots (lazy_slots: their budget) and the head
    uint64_t slot_budget = 0;           // what the slots' states may hold at once
  };
  StatePlan plan_state(int n_ctx) const;
  // Refuses (Error) before loading when what must stay resident cannot fit the
  // memory available (ModelConfig::memory_bytes; 0 = unknown, no check): anon
  // dense buffers, the model state and a fixed --cache-mb (not scratch: only
  // what cannot fit at all is refused). Without it a model whose dense set
  // exceeds a cgroup limit is OOM-killed mid-load.
  void check_resident_fits(uint64_t dense_bytes, uint64_t state_bytes) const;
  static uint64_t resolve_cache_bytes(const ModelConfig& cfg, std::span<const moe::MoeLayerShape> layers,
                                      uint64_t dense_bytes, uint64_t kv_bytes, int decode_prefetch);
  // transformer_bind.cpp: binds every layer's declared tensors, then checks that every tensor of the
  // file is claimed or ignored. experts: by layer (MoE models).
  void bind_weights(const std::vector<gguf::LayerExpertParts>& experts);
  void bind_layer(Binder& b, uint32_t il, const LayerDesc& d, const std::vector<gguf::LayerExpertParts>& experts);
  void bind_mtp_head(Binder& b, const std::vector<gguf::LayerExpertParts>& experts);
  // A MoE layer's routed gate/up/down (checked against n_expert; `missing_name` names what
  // a layer without expert tensors lacks), its activation and weights scale.
  void bind_expert_matrices(Binder& b, uint32_t il, const gguf::LayerExpertParts& lp, const std::string& missing_name,
                            ExpertTemplate& x);
  // Router logits (+ logit bias) of layer L for T rows of xn into `logits`.
  void router_logits(const Layer& L, const float* xn, int T, std::vector<float>& logits);
  void dense_ffn(const FfnMatrices& m, Activation act, int T, float* out, float clamp = 0.0f);
  // Rows [row0, row0 + n) of a forward pass belong to one sequence at
  // positions pos0.. whose state is `st` (its mixers run on it alone).
  struct RowSegment {
    int row0 = 0;
    int n = 0;
    int pos0 = 0;
    ModelState* st = nullptr;
  };
  ModelState& slot_state(int slot);
  const ModelState& slot_state(int slot) const;
  // The trunk over x_'s T rows (embedded by the caller), every segment's
  // state appended by its rows; prefetch reset after the last layer and the
  // route trace written. The caller opens and commits the appends.
  void run_trunk(int T, std::span<const RowSegment> segs);
  // Embeds tokens[t] into row `row` of x_.
  void embed_row(int32_t token, int row);
  // eval_batch accounting: the union vs per-sequence distinct experts of
  // layer il's routes_ (BatchCounters).
  void count_batch_experts(int il, std::span<const RowSegment> segs);
  // hidden_out (optional): every row's state after output_norm, [T][n_embd].
  void run(std::span<const int32_t> tokens, int pos0, float* logits_out, bool all_rows, float* hidden_out = nullptr);
  // One ubatch of run(): every layer, then the logits of rows [first_row, T).
  void run_ubatch(std::span<const int32_t> tokens, int pos0, int first_row, float* logits_out, float* hidden_out);
  // One NextN-head ubatch of mtp_eval().
  // Logits of rows [first_row, T) only; g_out (optional) gets every row.
  void mtp_ubatch(std::span<const int32_t> tokens, const float* hidden, int pos0, int first_row, float* logits_out,
                  float* g_out);
  // Block il over x_'s T rows: each segment's mixer on its own state (layer
  // st_layer of it), everything else over all rows.
  void forward_layer(int il, int n_tokens, std::span<const RowSegment> segs, int st_layer);
  // BlockKind::Gemma4 layers (transformer_gemma4.cpp): binding and the block.
  void bind_gemma4_layer(Binder& b, uint32_t il, const LayerDesc& d,
                         const std::vector<gguf::LayerExpertParts>& experts);
  void forward_gemma4_layer(int il, int n_tokens, std::span<const RowSegment> segs, int st_layer);
  // BlockKind::Dsv4 layers (transformer_dsv4.cpp): binding, the block, the
  // hyper-connection head before output_norm, hash routing.
  void bind_dsv4_layer(Binder& b, uint32_t il, const LayerDesc& d, const std::vector<gguf::LayerExpertParts>& experts);
  void forward_dsv4_layer(int il, int n_tokens, std::span<const RowSegment> segs, int st_layer);
  void route_dsv4_hash(int il, int n_tokens);
  // Floats per row of x_: n_embd, times the hyper-connection streams.
  int64_t x_width() const { return static_cast<int64_t>(hp_.n_embd) * std::max<uint32_t>(1, hp_.dsv4.hc_count); }
  // The rows' final hidden state after output_norm (n rows of x_ from `x`,
  // n_embd each into out): RMSNorm * output_norm, after the hyper-connection
  // head where the model has streams.
  void final_norm_rows(const float* x, int n, float* out);
  // deepseek4: the rows' streams mixed into one (output_hc_*), n_embd each, before any norm.
  void hc_head_rows(const float* x, int n, float* out);
  // The routed experts of MoE layer il over rows xn_ (routed by router_logits_,
  // which the caller filled) into tmp_: replay, trims, prefetch, traces, usage.
  void routed_experts(int il, int n_tokens, std::span<const RowSegment> segs, const float* selection_bias);
  // HParams::logit_softcap over n_rows rows of logits (no-op without one).
  void softcap_logits(float* logits, int64_t n_rows) const;
  // Checks the positions and tokens of an eval against `st` (Error otherwise).
  void check_eval(std::span<const int32_t> tokens, int pos0, const ModelState& st, const char* what) const;
  void record_route(int il, std::span<const RowSegment> segs);  // --route-trace: appends to trace_buf_
  // --prefetch: the setting in force after the load-time rules (0: off; logs why).
  int resolve_prefetch() const;
  // --prefetch: predicts layer il+1's experts, each position's `depth` most
  // probable, and starts reading them into prefetch_. The prediction is the
  // next layer's router applied to the current hidden state x_ (after layer
  // il's attention), or under --route-replay the next layer's replayed
  // routing itself. Never throws: a prefetch that cannot start is simply not there.
  void start_prefetch(int il, int n_tokens, int depth);

  std::shared_ptr<const gguf::GgufModel> gguf_;
  ModelConfig cfg_;
  ArchDesc desc_;
  const HParams& hp_;  // desc_.hp
  std::unique_ptr<moe::DenseWeights> dense_;
  std::unique_ptr<moe::ExpertStore> store_;  // null for dense models
  std::unique_ptr<ModelState> state_;  // the trunk's layers (slot 0)
  std::vector<std::unique_ptr<ModelState>> extra_slots_;  // slots 1.. (ModelConfig::n_slots)
  uint64_t slot_state_budget_ = 0;                         // StatePlan::slot_budget
  BatchCounters batch_;                                   // eval_batch() accounting
  std::vector<uint32_t> batch_seen_;  // count_batch_experts scratch: per expert, last marker
  uint32_t batch_mark_ = 0;
  bool batching_ = false;  // inside eval_batch(): count_batch_experts per MoE layer
  ThreadPool pool_;

  const gguf::TensorInfo* token_embd_ = nullptr;
  const uint8_t* token_embd_data_ = nullptr;
  const float* output_norm_ = nullptr;
  WeightMatrix output_;
  std::vector<Layer> layers_;  // the trunk, then the NextN head (block mtp_layer_) when loaded

  // --mtp: the NextN head (transformer_mtp.cpp): block mtp_layer_ of layers_
  // runs through forward_layer; its inputs, outputs and state are mtp_'s.
  int mtp_layer_ = -1;  // -1: no head loaded
  MtpHead mtp_;

  // Scratch, sized per eval.
  std::vector<float> x_, xn_, tmp_, shared_out_, router_logits_;
  GqaAttention gqa_;  // the token mixers (their scratch)
  MlaAttention mla_;
  DsaAttention dsa_;
  GatedDeltaNet deltanet_;
  KimiDeltaAttention kda_;
  ShortConv short_conv_;
  Gemma4Attention gemma4_attn_;
  std::vector<float> g4_mlp_;  // Gemma 4: the dense MLP's rows
  Dsv4Attention dsv4_attn_;
  HcWeights hc_head_;          // deepseek4: output_hc_*
  std::vector<float> hc_mix_, hc_u_;  // deepseek4 scratch
  std::vector<int32_t> row_tokens_;   // the token of each row of x_ (hash routing)
  QuantizedRows act_;
  RopeAngles rope_;
  SwiGlu swiglu_;
  MoeFfn moe_ffn_;
  Routing routing_;             // router scratch (dense top-k)
  moe::RoutingTable routes_;    // one layer's routing for the current ubatch, after trims
  int moe_k_ = 0;               // experts selected per token (model value or --moe-top-k)
  moe::TrimStats trim_stats_;
  RouteDrops drops_;            // distinct experts the trims removed from the current layer batch
  std::vector<moe::RouteRecord> trace_buf_;  // --route-trace: this eval's records, written token-major
  // --prefetch: the setting in force after the load-time rules (0: off;
  // model::prefetch_depth_for_batch turns it into a depth per micro-batch);
  // the next layer's experts in flight (reset at the end of each ubatch and
  // on errors); prediction scratch.
  int prefetch_setting_ = 0;
  // --route-replay: the trace mapped onto this model (null: the router decides).
  // Position t of a ubatch replays token tokens_evaluated_ + t.
  std::unique_ptr<moe::RouteReplay> replay_;
  std::vector<uint64_t> usage_;  // [n_layer][n_expert]: positions routed (after trims), trunk layers
  std::optional<PrefetchedExperts> prefetch_;
  std::vector<float> pf_xn_, pf_logits_;
  std::vector<float> batch_logits_;  // eval_batch(): the decoding sequences' logits, stacked
  Routing pf_routing_;
  uint64_t dense_packed_bytes_ = 0;  // dense bytes re-laid at load (ModelStats)
  bool experts_packed_ = false;      // the store re-lays experts as they become resident
  uint64_t tokens_evaluated_ = 0;
  double eval_s_ = 0;       // TimeProfile::eval_s
  double attention_s_ = 0;  // TimeProfile::attention_s
};

}  // namespace sluice::model
