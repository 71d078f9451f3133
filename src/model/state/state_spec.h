// What state each layer of a model keeps between evaluations, and its bytes:
// the one sizing rule used both by the model's allocation (ModelState) and by
// `sluice inspect` (tools/model_info.cpp), so the two cannot disagree.
//
// A layer's state follows from its token mixer (LayerDesc::attn.kind):
//   Gqa / Mla  -> KvRows: one row per position up to `capacity` (= the
//                 context; for a sliding-window layer the window plus a
//                 slack, kept as a ring, when that is less); Gqa rows hold n_kv_heads x head_dim keys and
//                 n_kv_heads x head_dim_v values, Mla one latent row of
//                 kv_lora_rank + rope dims (values live in the key row);
//                 an Mla layer with a Full DSA indexer appends its indexer
//                 key (index_dim values) to that row, so it rolls back with it.
//   Dsv4       -> KvRows of the per-token values (the raw kv and the
//                 compressors' inputs, mixers/dsv4_attention.h), a ring of
//                 what a token reads back (its window, and the one or two
//                 compress blocks behind it) plus the slack; and BlockRows:
//                 one row per completed compress block (its compressed entry
//                 and, for ratio 4, its indexer key), n_ctx / ratio of them.
//   (a recurrent mixer such as gated DeltaNet) -> Recurrent: conv taps and
//                 per-head S x S matrices, one value overwritten by every token.
//   None       -> no state (not used by any current mixer; kept for FFN-only
//                 layers of future architectures).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/state/kv_rows.h"

namespace sluice::model {

struct ArchDesc;
struct LayerDesc;
struct HParams;

enum class StateKind { None, KvRows, Recurrent };
const char* state_kind_name(StateKind k);

struct KvRowsSpec {
  int n_kv_heads = 0;
  int head_dim_k = 0;  // per KV head
  int head_dim_v = 0;  // per KV head; 0: values are read from the key row (MLA)
  int capacity = 0;    // rows held: the context, or window + slack (a ring) where less
  int window = 0;      // > 0: a sliding-window layer (a token sees `window` keys)
  bool ring = false;   // capacity < the context: position p lives in row p % capacity
  int index_dim = 0;   // DSA indexer key values stored after the keys of each row (0: none)
  int k_dim() const { return n_kv_heads * head_dim_k + index_dim; }
  int v_dim() const { return n_kv_heads * head_dim_v; }
};

// Rows kept per completed block of `ratio` positions (deepseek4's compressed
// KV): block b (positions [b ratio, (b + 1) ratio)) is written by the append
// that holds its last position, so n_past / ratio blocks are held.
struct BlockRowsSpec {
  int ratio = 0;      // 0: none
  int width = 0;      // values per block: the compressed entry, then index_dim indexer values
  int index_dim = 0;  // the indexer key's part of width (0: none)
  int capacity = 0;   // n_ctx / ratio
};

struct RecurrentSpec {
  int conv_taps = 0;      // K - 1 past inputs of a width-K causal convolution
  int conv_channels = 0;  // channels the convolution runs over
  int n_heads = 0;        // recurrent matrices ...
  int head_size = 0;      // ... each head_size x head_size
  uint64_t conv_floats() const { return uint64_t(conv_taps) * uint64_t(conv_channels); }
  uint64_t matrix_floats() const { return uint64_t(n_heads) * uint64_t(head_size) * uint64_t(head_size); }
  uint64_t floats() const { return conv_floats() + matrix_floats(); }
};

struct LayerStateSpec {
  StateKind kind = StateKind::None;
  KvRowsSpec kv;        // kind == KvRows
  BlockRowsSpec blocks; // kind == KvRows, deepseek4's compressed layers (ratio > 0)
  RecurrentSpec rec;    // kind == Recurrent
};

// Bytes of model state, by kind. Recurrent state is always F32; KV rows use
// the --kv-type element size. nullopt from state_bytes when a figure would
// overflow 64 bits (a -c far too large).
struct StateBytes {
  uint64_t kv = 0;
  uint64_t recurrent = 0;
  uint64_t indexer = 0;  // the part of `kv` that holds DSA indexer keys (counted in kv, not in total() again)
  uint64_t compressed = 0;  // the part of `kv` that holds compressed blocks' entries (deepseek4; likewise)
  uint64_t total() const { return kv + recurrent; }
};

// Rows a sliding-window layer keeps beyond its window: the most positions
// one append writes (a micro-batch of `ubatch`: its first token still reads
// the window before it while the last is stored) and the most a rollback
// undoes exactly (MTP verification rows, at least kMinRingSlack). A truncate
// further back than the slack recomputes (ModelState).
inline constexpr int kMinRingSlack = 16;
// --ubatch's default (ModelConfig::ubatch): what `inspect` sizes rings for.
inline constexpr int kDefaultUbatch = 512;
int ring_slack(int ubatch);

// The state of one layer declared by `d` at context `n_ctx`, for appends of
// at most `ubatch` positions (ModelConfig::ubatch, --ubatch).
LayerStateSpec layer_state_spec(const LayerDesc& d, const HParams& hp, int n_ctx, int ubatch);
// The trunk's layers (desc.layers, in order), then, when `with_nextn`, the
// first NextN head's block (its own KV rows).
std::vector<LayerStateSpec> model_state_specs(const ArchDesc& desc, int n_ctx, int ubatch, bool with_nextn = false);
std::optional<StateBytes> layer_state_bytes(const LayerStateSpec& s, KvType kv_type);
std::optional<StateBytes> state_bytes(const std::vector<LayerStateSpec>& specs, KvType kv_type);

}  // namespace sluice::model
