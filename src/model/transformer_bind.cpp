// Transformer's tensor binding: every layer's declared tensors (the token
// mixer's through its own file under mixers/, the FFN's here), then the check
// that every tensor of the file is claimed or knowingly ignored.
#include <string>

#include "kernels/quant.h"
#include "model/binder.h"
#include "model/transformer.h"
#include "util/error.h"

namespace sluice::model {

void Transformer::bind_weights(const std::vector<gguf::LayerExpertParts>& experts) {
  Binder b(*gguf_, *dense_, cfg_.resident_layout == ResidentLayout::Packed, &pool_);
  const uint64_t n_embd = hp_.n_embd;
  const std::string file = gguf_->paths().front();
  token_embd_ = &b.rows("token_embd.weight", {n_embd, hp_.n_vocab});
  if (!kernels::is_supported(token_embd_->type))
    throw Error("unsupported tensor type " + std::string(ggml_type_name(token_embd_->type)) +
                " in tensor token_embd.weight");
  token_embd_data_ = static_cast<const uint8_t*>(dense_->data(*token_embd_));
  output_norm_ = b.vector(desc_.output_norm + ".weight", n_embd);
  // Tied embeddings: no output.weight means the lm head reuses token_embd.
  if (!b.find("output.weight") && !desc_.tied_output) fail(file, "missing tensor output.weight");
  output_ = b.find("output.weight") ? b.matrix("output.weight", n_embd, hp_.n_vocab)
                                    : b.matrix("token_embd.weight", n_embd, hp_.n_vocab);

  if (hp_.dsv4.hc_count > 0) {  // the hyper-connection head in front of output_norm
    const uint64_t hc = hp_.dsv4.hc_count;
    hc_head_.fn = b.matrix("output_hc_fn.weight", hc * n_embd, hc);
    hc_head_.base = b.vector("output_hc_base.weight", hc);
    hc_head_.scale = b.vector("output_hc_scale.weight", 1);
  }
  layers_.resize(hp_.n_layer + (mtp_layer_ >= 0 ? 1 : 0));
  for (uint32_t il = 0; il < hp_.n_layer; ++il) bind_layer(b, il, desc_.layers[il], experts);
  if (mtp_layer_ >= 0) bind_mtp_head(b, experts);

  // Every tensor must be used or knowingly ignored: a tensor nothing claims
  // means the file is not what its architecture says (or sluice would
  // silently compute something else).
  for (const gguf::TensorInfo& t : gguf_->tensors()) {
    if (b.claimed(t.name) || desc_.ignores(t.name)) continue;
    if (const auto e = gguf::parse_expert_tensor_name(t.name);
        e && e->layer < layers_.size() && layers_[e->layer].moe)
      continue;  // a routed-expert weight of a MoE layer (bound through `experts`)
    fail(file, "tensor " + t.name + " is not used by architecture " + hp_.arch +
                   " (no block of this layer takes it); the file does not match its general.architecture");
  }
  dense_packed_bytes_ = b.packed_bytes();
}

void Transformer::bind_layer(Binder& b, uint32_t il, const LayerDesc& d,
                             const std::vector<gguf::LayerExpertParts>& experts) {
  const uint64_t n_embd = hp_.n_embd;
  Layer& L = layers_[il];
  L.desc = &d;
  if (d.block == BlockKind::Gemma4) return bind_gemma4_layer(b, il, d, experts);
  if (d.block == BlockKind::Dsv4) return bind_dsv4_layer(b, il, d, experts);
  const std::string p = "blk." + std::to_string(il) + ".";
  L.attn_norm = b.vector(p + "attn_norm.weight", n_embd);
  L.ffn_norm = b.vector(p + d.ffn_norm + ".weight", n_embd);
  // The token mixer (its own file under mixers/, with its state), then what
  // every attention mixer shares: the output bias and the sinks.
  if (d.attn.kind == AttentionKind::Mla) {
    L.mla = bind_mla(b, p, hp_, d.attn.head_gate);
    if (d.attn.indexer == DsaIndexer::Full) L.dsa = bind_dsa_indexer(b, p, hp_);
  } else if (d.attn.kind == AttentionKind::DeltaNet) {
    L.dn = bind_deltanet(b, p, hp_);
  } else if (d.attn.kind == AttentionKind::Kda) {
    L.kda = bind_kda(b, p, hp_);
  } else if (d.attn.kind == AttentionKind::ShortConv) {
    L.sc = bind_short_conv(b, p, hp_, d.attn.conv_taps);
  } else {
    L.gqa = bind_gqa(b, p, d.attn, hp_);
  }
  L.bo = b.vector_if(d.attn.o_bias, p + "attn_output.bias", {n_embd});
  L.sinks = b.vector_if(d.attn.sinks, p + "attn_sinks.weight", {hp_.n_head});
  L.moe = d.ffn.kind == FfnKind::Moe;
  if (!L.moe) {
    L.dense.gate = b.matrix(p + "ffn_gate.weight", n_embd, d.ffn.n_ff);
    L.dense.up = b.matrix(p + "ffn_up.weight", n_embd, d.ffn.n_ff);
    L.dense.down = b.matrix(p + "ffn_down.weight", d.ffn.n_ff, n_embd);
    return;
  }
  const RouterDesc& r = d.ffn.router;
  const uint64_t n_expert = hp_.n_expert;
  L.router = b.matrix(p + "ffn_gate_inp.weight", n_embd, n_expert);
  L.router_bias = b.vector_if(r.logit_bias, p + "ffn_gate_inp.bias", {n_expert});
  L.selection_bias = b.vector_if(r.selection_bias, p + "exp_probs_b.bias", {n_expert});
  ExpertTemplate& x = L.experts;
  bind_expert_matrices(b, il, experts.at(il), gguf::stacked_expert_name(il, gguf::kGate), x);
  x.gate_bias = b.vector_if(d.ffn.expert_biases, p + "ffn_gate_exps.bias", {hp_.n_ff_exp, n_expert});
  x.up_bias = b.vector_if(d.ffn.expert_biases, p + "ffn_up_exps.bias", {hp_.n_ff_exp, n_expert});
  x.down_bias = b.vector_if(d.ffn.expert_biases, p + "ffn_down_exps.bias", {n_embd, n_expert});
  L.shared = d.ffn.shared_expert;
  if (L.shared) {
    L.shexp.gate = b.matrix(p + "ffn_gate_shexp.weight", n_embd, d.ffn.n_ff);
    L.shexp.up = b.matrix(p + "ffn_up_shexp.weight", n_embd, d.ffn.n_ff);
    L.shexp.down = b.matrix(p + "ffn_down_shexp.weight", d.ffn.n_ff, n_embd);
    if (d.ffn.shared_gate) L.shexp_gate = b.vector(p + "ffn_gate_inp_shexp.weight", n_embd);
  }
}

void Transformer::bind_expert_matrices(Binder& b, uint32_t il, const gguf::LayerExpertParts& lp,
                                       const std::string& missing_name, ExpertTemplate& x) {
  const LayerDesc& d = *layers_[il].desc;
  const uint64_t n_embd = hp_.n_embd;
  if (!lp.present())
    fail(gguf_->paths().front(), "missing tensor " + missing_name + " (layer " + std::to_string(il) +
                                     " of this MoE model has no expert tensors)");
  if (lp.n_expert() != hp_.n_expert)
    throw Error("tensor " + lp.part[gguf::kGate].tensor + ": layer " + std::to_string(il) + " has " +
                std::to_string(lp.n_expert()) + " experts, expected " + std::to_string(hp_.n_expert));
  x.m.gate = b.expert(lp, gguf::kGate, n_embd, hp_.n_ff_exp);
  x.m.up = b.expert(lp, gguf::kUp, n_embd, hp_.n_ff_exp);
  x.m.down = b.expert(lp, gguf::kDown, hp_.n_ff_exp, n_embd);
  x.act = d.ffn.act;
  x.clamp = d.ffn.clamp;
  x.weights_scale = d.ffn.router.weights_scale;
}

}  // namespace sluice::model
