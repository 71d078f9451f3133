// Re-laying resident weights into the packed layout (kernels/quant.h): once,
// when their bytes arrive, so every later matmul reads them with packed_dot.
//
// Who packs what (the model decides; the stores only hold bytes):
//  - dense matmul weights read into anonymous memory (Transformer's Binder),
//    never a tensor also read by row (token_embd, NextN embed_tokens);
//  - cached and --load-all experts, through ExpertStoreConfig::on_resident
//    (expert_packer below); streamed experts only where a prompt batch uses
//    them several times (moe_ffn.h: kMinUsesToPackStreamed).
// A matrix is packed only when packable(*w.kern); its n_out % kPackRows tail
// rows stay plain (WeightMatrix::packed_rows).
#pragma once

#include <cstdint>
#include <vector>

#include "model/ffn.h"
#include "model/matmul.h"
#include "model/resident_layout.h"
#include "model/thread_pool.h"
#include "moe/expert_store.h"

namespace sluice::model {

// Packs the plain matrix `shape` (its data, n_out rows of row_bytes) in place
// at `data`, group by group through a one-group scratch; with a pool, groups
// are split across its threads. Returns the bytes re-laid (0 when the kernels
// are not packable or n_out < kPackRows). `data` must be writable, hold
// exactly the matrix's plain rows, and no reader may use it meanwhile.
uint64_t pack_in_place(uint8_t* data, const WeightMatrix& shape, ThreadPool* pool);

// The shape with `packed` set where pack_in_place re-laid its bytes.
WeightMatrix as_packed(WeightMatrix w);

// ExpertStoreConfig::on_resident for experts of these shapes (by layer; layers
// without experts have n_out == 0): packs gate, up and down of one expert in
// place on the calling thread (a read lane). ExpertView::packed then means
// "packed where packable", which is how MoeFfn reads it back (expert_matrix).
// Null when no expert part of any layer is packable (nothing to do).
moe::ExpertTransform expert_packer(std::vector<FfnMatrices> shapes);

// One expert part's matrix: the template with the view's bytes and layout.
WeightMatrix expert_matrix(const WeightMatrix& tmpl, const void* data, bool view_packed);

}  // namespace sluice::model
