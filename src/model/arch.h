// An architecture is a declaration: which metadata keys it reads, which
// tensors it binds (required / optional / ignored) and, per layer, which
// blocks the shared Transformer composes (attention options, FFN kind, router
// kind, activation, RoPE). One file per architecture under src/model/arch/
// fills an ArchDesc from a GGUF; arch/registry.def lists them, one line each.
// See docs/architecture.md, "Adding an architecture".
//
// Contract: describe() validates everything the forward pass relies on before
// anything is sized by it (layer, head, expert and vocabulary counts are
// checked against the tensors present; floats are finite), and throws
// sluice::Error naming the file and the key or tensor. Shapes and types of
// the tensors are checked when they are bound (Transformer), where every
// tensor of the file must be claimed by a block or listed as ignored.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf.h"
#include "model/hparams.h"

namespace sluice::model {

// Whether a block's optional input tensor is bound.
enum class Need { Absent, Optional, Required };

enum class AttentionKind {
  Gqa,  // attn_q/k/v/output (grouped-query; multi-head when head_count_kv = head_count)
  Mla,  // multi-head latent attention (HParams::mla_params): attn_q_a + attn_q_a_norm + attn_q_b
        // (or attn_q), attn_kv_a_mqa, attn_kv_a_norm, attn_k_b, attn_v_b, attn_output
  DeltaNet,  // gated DeltaNet linear attention (HParams::deltanet; model/mixers/gated_deltanet.h):
             // attn_qkv, attn_gate, ssm_conv1d, ssm_dt.bias, ssm_a, ssm_alpha, ssm_beta, ssm_norm, ssm_out;
             // no KV rows, a recurrent state instead
  ShortConv,  // LFM2's gated short convolution (model/mixers/short_conv.h): shortconv.in_proj, shortconv.conv,
              // shortconv.out_proj; no KV rows, a recurrent state of conv_taps - 1 inputs
  Kda,       // Kimi Delta Attention (bailingmoe3; HParams::deltanet, model/mixers/kda.h): attn_q/k/v,
             // ssm_conv1d_{q,k,v}, ssm_f_a, ssm_dt.bias, ssm_a, ssm_beta, ssm_g_a, ssm_norm, attn_output;
             // a recurrent state like DeltaNet's
  Dsv4,      // DeepSeek V4 (HParams::dsv4; model/mixers/dsv4_attention.h): one K = V head over a
             // sliding window plus compressed blocks (compress_ratio), sinks, grouped output LoRA
};

// Mla layers with DeepSeek's sparse attention (DSA, glm-dsa): a Full layer
// runs the lightning indexer (indexer.* tensors, its keys cached beside the
// latent row) and attends only its top-k keys; a Shared layer has no indexer
// and reuses the selection of the nearest Full layer below it.
enum class DsaIndexer { None, Full, Shared };

struct AttentionDesc {
  AttentionKind kind = AttentionKind::Gqa;
  Need q_norm = Need::Absent;  // per-head RMSNorm of q (attn_q_norm.weight {head_dim}) before RoPE
  Need k_norm = Need::Absent;  // per-head RMSNorm of k (attn_k_norm.weight {head_dim})
  Need q_bias = Need::Absent, k_bias = Need::Absent, v_bias = Need::Absent, o_bias = Need::Absent;
  // Learned per-head sink logit (attn_sinks.weight {n_head}, F32): joins the
  // softmax denominator only (softmax over [scores, sink]; the sink has no value).
  Need sinks = Need::Absent;
  // Sliding window: query at position i sees key j iff 0 <= i - j < window;
  // 0 = full causal attention.
  uint32_t window = 0;
  // Gated attention (Qwen3.5/3.6): attn_q yields per head [query hd | gate hd]
  // (2 q_dim rows) and the attention output is multiplied by sigmoid(gate)
  // before attn_output.
  bool output_gate = false;
  // A layer whose attention geometry differs from HParams' (Gemma 4's
  // sliding-window and full layers): head dim (q, k and v), KV heads and
  // RoPE of this layer; 0 / nullopt: HParams'. state_spec sizes KV rows by them.
  uint32_t head_dim = 0;
  uint32_t n_head_kv = 0;
  std::optional<RopeParams> rope;
  // Gemma 4: RoPE pair i's angle divided by rope_freqs.weight[i] ({n_rot/2},
  // one tensor shared by the layers that declare it).
  bool rope_freqs = false;
  // Gemma 4: without attn_v.weight the values are the raw attn_k projection
  // (attention_k_eq_v); v_norm: values get a per-head RMSNorm without weight.
  bool v_from_k = false;
  bool v_norm = false;
  DsaIndexer indexer = DsaIndexer::None;  // Mla only
  // Mla only (bailingmoe3): each head's output scaled by sigmoid(attn_gate . xn),
  // attn_gate.weight {n_embd, n_head}.
  bool head_gate = false;
  uint32_t conv_taps = 0;                 // ShortConv only: the conv's width L (shortconv.l_cache)
  // Dsv4: 0 (window only), 4 (overlapping compressed blocks + lightning
  // indexer top-k) or 128 (every compressed block).
  uint32_t compress_ratio = 0;
};

enum class RouterKind {
  SoftmaxAll,       // weights = softmax over all experts, top-k of them (qwen3moe, Mixtral)
  SoftmaxSelected,  // top-k of the raw logits, weights = softmax over the k selected (gpt-oss)
  SigmoidBiased,    // sigmoid; selection by sigmoid + exp_probs_b, weights the unbiased sigmoids (glm4moe, DeepSeek-V3)
  SqrtSoftplus,     // sqrt(softplus); selection by it + exp_probs_b, weights the unbiased scores (DeepSeek V4)
  HashSqrtSoftplus, // experts by token id (ffn_gate_tid2eid), weights their sqrt(softplus) scores (DeepSeek V4)
};
const char* router_kind_name(RouterKind k);

struct RouterDesc;
// Whether routing trims renormalise the weights left after a drop: when the
// router's weights sum to 1 (normalised, or a softmax over the selected).
bool trims_renormalize(const RouterDesc& r);

struct RouterDesc {
  RouterKind kind = RouterKind::SoftmaxAll;
  // The router scales the selected weights to sum to 1 (SoftmaxAll, SigmoidBiased).
  // SoftmaxSelected weights sum to 1 by construction and are not rescaled.
  bool normalize = true;
  // Multiplies the routed experts' weighted sum (expert_weights_scale). Applied
  // to the sum, not to the table, so trims see weights that sum to 1.
  float weights_scale = 1.0f;
  Need logit_bias = Need::Absent;      // ffn_gate_inp.bias {n_expert}, added to the logits
  Need selection_bias = Need::Absent;  // exp_probs_b.bias {n_expert}, selection only (SigmoidBiased)
  uint32_t n_group = 0;        // group-limited selection: experts in n_group groups ...
  uint32_t n_group_used = 0;   // ... only the best n_group_used groups compete (0: off)
};

enum class Activation {
  SwiGlu,     // silu(gate) * up
  SwiGluOai,  // g = min(gate, 7), u = clamp(up, -7, 7): g * sigmoid(1.702 g) * (u + 1) (gpt-oss)
  GeluTanh,   // gelu(gate) * up, tanh approximation, exact in F32 (Gemma 4)
  SwiGluClamped,  // silu(min(gate, L)) * clamp(up, -L, L), L = FfnDesc::clamp (DeepSeek V4)
};
const char* activation_name(Activation a);

enum class FfnKind { Dense, Moe };

struct FfnDesc {
  FfnKind kind = FfnKind::Dense;
  Activation act = Activation::SwiGlu;
  uint32_t n_ff = 0;  // dense hidden size (Dense), or the shared expert's (Moe with shared)
  // Moe: per-expert biases ffn_{gate,up,down}_exps.bias {n_out, n_expert} (F32,
  // resident: see gguf/expert_layout.h).
  Need expert_biases = Need::Absent;
  // Moe: an always-on shared expert ffn_{gate,up,down}_shexp (resident), added
  // unweighted to the routed sum.
  bool shared_expert = false;
  // Moe with shared expert: its output is scaled by sigmoid(ffn_gate_inp_shexp . x),
  // ffn_gate_inp_shexp.weight a vector {n_embd} (Qwen3.5/3.6).
  bool shared_gate = false;
  RouterDesc router;
  // SwiGluClamped: L of the routed experts and of the shared expert.
  float clamp = 0.0f;
  float clamp_shexp = 0.0f;
};

// How a layer's blocks are composed (model/transformer.h).
enum class BlockKind {
  PreNorm,  // x += Mixer(norm(x)); x += FFN(norm(x))
  Gemma4,   // Gemma 4's post-normed block with a dense MLP beside the routed experts (transformer_gemma4.cpp)
  Dsv4,     // DeepSeek V4: both sublayers wrapped in hyper-connections (transformer_dsv4.cpp)
};

struct LayerDesc {
  BlockKind block = BlockKind::PreNorm;
  AttentionDesc attn;
  FfnDesc ffn;
  // The norm in front of the FFN: "ffn_norm" (llama, qwen3moe) or
  // "post_attention_norm" (gpt-oss, glm4moe) — same role, converter's name.
  std::string ffn_norm = "ffn_norm";
};

// A NextN/MTP head (DeepSeek-V3, GLM-4.5+): block `layer` (past the trunk)
// predicts the token after next from the trunk's hidden state after
// output_norm and the next token: x = eh_proj . [norm(embed(t)) * enorm,
// norm(h) * hnorm], one decoder layer `block` with its own KV cache, then
// g = norm(x) * shared_head_norm and logits = shared_head_head . g (each
// nextn.* tensor optional where the trunk's can stand in: embed_tokens ->
// token_embd, shared_head_norm -> output_norm, shared_head_head -> output).
struct NextnDesc {
  uint32_t layer = 0;  // blk.<layer>
  LayerDesc block;
  // The head's final norm, blk.<layer>.<head_norm>.weight (bailingmoe3's
  // converter names it layer_output_norm); Optional: output_norm stands in.
  std::string head_norm = "nextn.shared_head_norm";
  Need head_norm_need = Need::Optional;
};

struct ArchDesc {
  HParams hp;
  std::vector<LayerDesc> layers;  // hp.n_layer entries: the trunk the forward pass runs
  // Tensors the forward pass does not use, by exact name, "blk.*.SUFFIX" (that
  // suffix in any layer) or "blk.N.*" (all of layer N, e.g. a NextN/MTP block
  // past the trunk); see ignores(). They are not loaded. Anything else in the
  // file that no block claims is an error.
  std::vector<std::string> ignored;
  bool tied_output = true;  // no output.weight: the lm head reuses token_embd
  std::string output_norm = "output_norm";  // the final norm's tensor (LFM2: "token_embd_norm")
  // NextN/MTP heads after the trunk, in file order; their tensors are in
  // `ignored` (loaded only when MTP is asked for).
  std::vector<NextnDesc> nextn;

  // Whether `tensor` is listed in `ignored`.
  bool ignores(std::string_view tensor) const;
};

// Typed reads of `<arch>.<key>`, each error naming the file and the key.
class ArchReader {
 public:
  explicit ArchReader(const gguf::GgufModel& model);

  const gguf::GgufModel& model() const { return model_; }
  const std::string& arch() const { return arch_; }
  const std::string& file() const { return file_; }
  std::string key(std::string_view k) const { return arch_ + "." + std::string(k); }

  uint32_t u32(std::string_view k, std::optional<uint32_t> fallback = std::nullopt) const;
  float f32(std::string_view k, std::optional<float> fallback = std::nullopt) const;  // finite, always
  bool flag(std::string_view k, bool fallback) const;
  std::optional<std::string> str(std::string_view k) const;
  [[noreturn]] void bad(std::string_view k, const std::string& why) const;

  // The hyperparameters every decoder shares (sizes, heads, RoPE base, eps,
  // context, expert counts, vocabulary from token_embd), validated, with the
  // layer count checked against the blk.N tensors present (n_trunk_layers of
  // them run; the rest, e.g. NextN blocks, are the caller's business).
  HParams common() const;

 private:
  const gguf::GgufModel& model_;
  std::string arch_;
  std::string file_;
};

// ---- describe pieces several architectures share (arch_deepseek2.cpp) ----

// DeepSeek's MLA sizes (q/kv LoRA ranks, key/value lengths) into hp.
void describe_mla(const ArchReader& r, HParams& hp);
// expert_group_count / expert_group_used_count into `router` (whose kind is
// set): DeepSeek-V3's group-limited selection, checked against the expert
// counts; refused with softmax gating. llama.cpp applies the keys for every
// architecture, so describe_architecture refuses a file that sets them where
// the architecture's description did not read them.
void describe_expert_groups(const ArchReader& r, const HParams& hp, RouterDesc& router);

struct ArchSynth;  // model/arch/tensor_plan.h

// One architecture: its general.architecture name, how to describe a file of
// it and how to generate one (`sluice synth`).
struct ArchEntry {
  const char* name;
  ArchDesc (*describe)(const ArchReader& r);
  const ArchSynth* synth;
};

// The registered architectures, in registry.def order.
const std::vector<ArchEntry>& architectures();
// "gpt-oss, llama, qwen3moe" (for messages).
std::string supported_architectures();
// The description of `model`: Error("FILE: unsupported architecture X (supported: ...)").
ArchDesc describe_architecture(const gguf::GgufModel& model);

}  // namespace sluice::model
