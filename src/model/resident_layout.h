// --resident-layout: how weights that stay in memory are laid out. Packed
// (the default) re-lays them once into kernels' row-interleaved groups
// (model/packed_layout.h); Plain keeps the file's rows (for A/B measurement).
// Either gives bit-identical logits.
#pragma once

#include <string>

namespace sluice::model {

enum class ResidentLayout { Packed, Plain };
ResidentLayout parse_resident_layout(
    const std::string& s);  // throws Error naming --resident-layout
const char* resident_layout_name(ResidentLayout l);

}  // namespace sluice::model
