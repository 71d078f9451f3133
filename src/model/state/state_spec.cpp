#include "model/state/state_spec.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "model/arch.h"
#include "model/mixers/dsv4_attention.h"
#include "util/error.h"

namespace sluice::model {

const char* state_kind_name(StateKind k) {
  switch (k) {
    case StateKind::None: return "none";
    case StateKind::KvRows: return "kv-rows";
    case StateKind::Recurrent: return "recurrent";
  }
  return "?";
}

int ring_slack(int ubatch) { return std::max(ubatch, kMinRingSlack); }

LayerStateSpec layer_state_spec(const LayerDesc& d, const HParams& hp, int n_ctx, int ubatch) {
  LayerStateSpec s;
  switch (d.attn.kind) {
    case AttentionKind::Gqa:
      s.kind = StateKind::KvRows;
      // A layer with its own geometry (AttentionDesc::head_dim) keeps q, k and
      // v at that head dim.
      s.kv = {static_cast<int>(d.attn.n_head_kv ? d.attn.n_head_kv : hp.n_head_kv),
              static_cast<int>(d.attn.head_dim ? d.attn.head_dim : hp.head_dim),
              static_cast<int>(d.attn.head_dim ? d.attn.head_dim : hp.head_dim_v), n_ctx};
      if (d.attn.window > 0) {
        // A sliding window keeps the window and the slack, as a ring, when
        // that is less than the context.
        s.kv.window = static_cast<int>(std::min<uint32_t>(d.attn.window, INT32_MAX));
        const int64_t ring = int64_t{s.kv.window} + ring_slack(ubatch);
        if (ring < n_ctx) {
          s.kv.capacity = static_cast<int>(ring);
          s.kv.ring = true;
        }
      }
      break;
    case AttentionKind::Mla:
      // One shared latent "head" (HParams::MlaParams): head_dim = lora + rope dims.
      s.kind = StateKind::KvRows;
      s.kv = {1, static_cast<int>(hp.head_dim), 0, n_ctx};
      if (d.attn.indexer == DsaIndexer::Full) s.kv.index_dim = static_cast<int>(hp.dsa.head_dim);
      break;
    case AttentionKind::Dsv4: {
      // Per position: the raw kv and the compressors' inputs
      // (mixers/dsv4_attention.h), as a ring of what a token reads back plus
      // the slack; per completed block: its compressed entry and indexer key.
      const Dsv4RowLayout l = dsv4_row_layout(d.attn.compress_ratio, hp);
      s.kind = StateKind::KvRows;
      s.kv = {1, l.total, 0, n_ctx};
      const int lookback = dsv4_lookback(d.attn);
      if (lookback > 0) {
        s.kv.window = lookback;
        const int64_t ring = int64_t{lookback} + ring_slack(ubatch);
        if (ring < n_ctx) {
          s.kv.capacity = static_cast<int>(ring);
          s.kv.ring = true;
        }
      }
      if (d.attn.compress_ratio > 0)
        s.blocks = {static_cast<int>(d.attn.compress_ratio), l.block_width, l.d,
                    n_ctx / static_cast<int>(d.attn.compress_ratio)};
      break;
    }
    case AttentionKind::DeltaNet:
    case AttentionKind::Kda: {  // KDA: n_k = n_v, channels() = the three convs' inputs
      // The last K-1 conv inputs and one S x S matrix per value head; no rows.
      const DeltaNetParams& p = hp.deltanet;
      s.kind = StateKind::Recurrent;
      s.rec = {static_cast<int>(p.conv_kernel > 0 ? p.conv_kernel - 1 : 0), static_cast<int>(p.channels()),
               static_cast<int>(p.n_v_heads), static_cast<int>(p.state_size)};
      break;
    }
    case AttentionKind::ShortConv:
      // The last conv_taps - 1 conv inputs over n_embd channels; no matrices.
      s.kind = StateKind::Recurrent;
      s.rec = {static_cast<int>(d.attn.conv_taps > 0 ? d.attn.conv_taps - 1 : 0), static_cast<int>(hp.n_embd), 0, 0};
      break;
  }
  return s;
}

std::vector<LayerStateSpec> model_state_specs(const ArchDesc& desc, int n_ctx, int ubatch, bool with_nextn) {
  std::vector<LayerStateSpec> out;
  for (const LayerDesc& d : desc.layers) out.push_back(layer_state_spec(d, desc.hp, n_ctx, ubatch));
  if (with_nextn && !desc.nextn.empty())
    out.push_back(layer_state_spec(desc.nextn.front().block, desc.hp, n_ctx, ubatch));
  return out;
}

std::optional<StateBytes> layer_state_bytes(const LayerStateSpec& s, KvType kv_type) {
  using u128 = unsigned __int128;
  constexpr u128 kMax = std::numeric_limits<uint64_t>::max();
  StateBytes b;
  if (s.kind == StateKind::KvRows) {
    const u128 heads = static_cast<uint64_t>(s.kv.n_kv_heads);
    const u128 v = u128(static_cast<uint64_t>(s.kv.capacity)) *
                   (heads * static_cast<uint64_t>(s.kv.head_dim_k) + heads * static_cast<uint64_t>(s.kv.head_dim_v) +
                    static_cast<uint64_t>(s.kv.index_dim)) *
                   kv_type_bytes(kv_type);
    if (v > kMax) return std::nullopt;
    b.kv = static_cast<uint64_t>(v);
    b.indexer = static_cast<uint64_t>(u128(static_cast<uint64_t>(s.kv.capacity)) *
                                      static_cast<uint64_t>(s.kv.index_dim) * kv_type_bytes(kv_type));
    if (s.blocks.ratio > 0) {
      // Bounded by the context: a block row is never wider than a position's row.
      const u128 n = static_cast<uint64_t>(s.blocks.capacity);
      const u128 el = kv_type_bytes(kv_type);
      const u128 all = n * static_cast<uint64_t>(s.blocks.width) * el;
      if (u128(b.kv) + all > kMax) return std::nullopt;
      b.kv += static_cast<uint64_t>(all);
      b.indexer += static_cast<uint64_t>(n * static_cast<uint64_t>(s.blocks.index_dim) * el);
      b.compressed = static_cast<uint64_t>(n * static_cast<uint64_t>(s.blocks.width - s.blocks.index_dim) * el);
    }
  } else if (s.kind == StateKind::Recurrent) {
    const u128 v = u128(s.rec.floats()) * sizeof(float);
    if (v > kMax) return std::nullopt;
    b.recurrent = static_cast<uint64_t>(v);
  }
  return b;
}

std::optional<StateBytes> state_bytes(const std::vector<LayerStateSpec>& specs, KvType kv_type) {
  StateBytes sum;
  for (const LayerStateSpec& s : specs) {
    const std::optional<StateBytes> b = layer_state_bytes(s, kv_type);
    if (!b || sum.kv > std::numeric_limits<uint64_t>::max() - b->kv ||
        sum.recurrent > std::numeric_limits<uint64_t>::max() - b->recurrent)
      return std::nullopt;
    sum.kv += b->kv;
    sum.recurrent += b->recurrent;
    sum.indexer += b->indexer;  // <= sum.kv: cannot overflow where kv did not
    sum.compressed += b->compressed;
  }
  return sum;
}

}  // namespace sluice::model
