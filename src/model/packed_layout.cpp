#include "model/packed_layout.h"

#include <cstdint>
#include <cstring>
#include <memory>

namespace sluice::model {
namespace {

// Groups per thread below which splitting the packing across the pool costs
// more than it saves (a group is a few KiB of copying). Speed only.
constexpr int64_t kMinParallelGroups = 64;

int64_t group_count(const WeightMatrix& w) { return w.n_out / kernels::kPackRows; }

// Packs groups [g0, g1) of w at data through one group of scratch.
void pack_groups(uint8_t* data, const WeightMatrix& w, int64_t g0, int64_t g1) {
  const size_t gb = w.group_bytes();
  // pack_rows needs src and dst apart: pack into scratch, copy back. The
  // layout may depend on dst's address mod 64 (quant.h), so the scratch copy
  // of each group starts at the group's address mod 64.
  const std::unique_ptr<uint8_t[]> scratch(new uint8_t[gb + 64]);
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* group = data + static_cast<size_t>(g) * gb;
    const auto phase = [](const void* p) { return reinterpret_cast<uintptr_t>(p) & 63; };
    uint8_t* dst = scratch.get() + ((phase(group) - phase(scratch.get())) & 63);
    w.kern->pack_rows(w.n_in, group, dst);
    std::memcpy(group, dst, gb);
  }
}

}  // namespace

uint64_t pack_in_place(uint8_t* data, const WeightMatrix& shape, ThreadPool* pool) {
  if (!shape.kern || !packable(*shape.kern) || shape.packed) return 0;
  const int64_t groups = group_count(shape);
  if (groups == 0) return 0;
  auto body = [&](int64_t g0, int64_t g1) { pack_groups(data, shape, g0, g1); };
  if (pool && pool->size() > 1 && groups >= kMinParallelGroups * pool->size()) {
    pool->parallel_for(groups, body);
  } else {
    body(0, groups);
  }
  return static_cast<uint64_t>(groups) * shape.group_bytes();
}

WeightMatrix as_packed(WeightMatrix w) {
  w.packed = w.kern && packable(*w.kern) && group_count(w) > 0;
  return w;
}

WeightMatrix expert_matrix(const WeightMatrix& tmpl, const void* data, bool view_packed) {
  WeightMatrix w = view_packed ? as_packed(tmpl) : tmpl;
  w.data = static_cast<const uint8_t*>(data);
  return w;
}

moe::ExpertTransform expert_packer(std::vector<FfnMatrices> shapes) {
  bool any = false;
  for (const FfnMatrices& m : shapes)
    for (const WeightMatrix* w : {&m.gate, &m.up, &m.down})
      if (w->n_out > 0 && as_packed(*w).packed) any = true;
  if (!any) return {};
  return [shapes = std::move(shapes)](int layer, void* gate, void* up, void* down) {
    const FfnMatrices& m = shapes.at(static_cast<size_t>(layer));
    pack_in_place(static_cast<uint8_t*>(gate), m.gate, nullptr);
    pack_in_place(static_cast<uint8_t*>(up), m.up, nullptr);
    pack_in_place(static_cast<uint8_t*>(down), m.down, nullptr);
  };
}

}  // namespace sluice::model
