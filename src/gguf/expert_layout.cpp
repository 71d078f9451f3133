// Expert layout discovery: stacked and expert-major files (see expert_layout.h).
#include "gguf/expert_layout.h"

#include <algorithm>
#include <map>

#include "util/error.h"

namespace sluice::gguf {
namespace {

// Bounds that keep a hostile name from sizing a huge table.
constexpr uint64_t kMaxLayer = 1u << 16;
constexpr uint64_t kMaxExpert = 1u << 20;

const std::string& path_of(const GgufModel& m, const TensorInfo& t) { return m.split(t.split).path; }

std::string shape_str(const std::vector<uint64_t>& ne) {
  std::string s = "{";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

// Parses a decimal number without sign or leading '+'; nullopt if empty or not all digits.
std::optional<uint64_t> parse_index(std::string_view s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// The per-layer tensors found while scanning the file.
struct LayerTensors {
  std::array<const TensorInfo*, 3> stacked{};
  const TensorInfo* gate_up = nullptr;  // fused ffn_gate_up_exps
  std::array<std::vector<const TensorInfo*>, 3> major;  // [part][expert]
};

LayerExpertParts expert_major_layer_parts(const GgufModel& m, uint32_t layer, const LayerTensors& lt) {
  const std::string& file = m.split(0).path;
  uint64_t n_expert = 0;
  for (const auto& ts : lt.major) n_expert = std::max<uint64_t>(n_expert, ts.size());
  LayerExpertParts out;
  out.layout = ExpertLayout::ExpertMajor;
  out.experts.resize(n_expert);
  for (size_t p = 0; p < 3; ++p) {
    const auto& ts = lt.major[p];
    for (uint64_t e = 0; e < n_expert; ++e) {
      if (e >= ts.size() || ts[e] == nullptr)
        fail(file, "expert-major layer " + std::to_string(layer) + " lacks tensor " + expert_major_name(layer, p, e) +
                       " (every part needs experts 0.." + std::to_string(n_expert - 1) + ")");
    }
    const TensorInfo& first = *ts[0];
    if (first.ne.size() != 2)
      fail(path_of(m, first), "expert tensor " + first.name + " has shape " + shape_str(first.ne) +
                                  ", expected one expert's 2-D matrix {n_in, n_out}");
    ExpertPartInfo& info = out.part[p];
    info.type = first.type;
    info.ne = first.ne;
    info.bytes = first.bytes;
    info.tensor = first.name;
    for (uint64_t e = 0; e < n_expert; ++e) {
      const TensorInfo& t = *ts[e];
      if (t.type != first.type || t.ne != first.ne)
        fail(path_of(m, t), "expert tensor " + t.name + " is " + std::string(ggml_type_name(t.type)) + " " + shape_str(t.ne) +
                                " but " + first.name + " is " + std::string(ggml_type_name(first.type)) + " " +
                                shape_str(first.ne) + " (every expert of a layer must match)");
      out.experts[e][p] = ByteRange{t.split, t.offset, t.bytes};
    }
  }
  return out;
}

// A stacked layer with ffn_gate_up_exps: gate and up are the halves of each
// expert's slice of the fused tensor (see the header).
LayerExpertParts fused_layer_parts(const GgufModel& m, uint32_t layer, const LayerTensors& lt) {
  const TensorInfo& gu = *lt.gate_up;
  if (lt.stacked[kGate] || lt.stacked[kUp])
    fail(path_of(m, gu), "layer " + std::to_string(layer) + " has both " + gu.name + " and separate gate/up expert tensors");
  if (!lt.stacked[kDown])
    fail(path_of(m, gu), "layer " + std::to_string(layer) + " has " + gu.name + " but no " + stacked_expert_name(layer, kDown));
  const TensorInfo& down = *lt.stacked[kDown];
  const uint64_t n_expert = gu.ne.size() == 3 ? gu.ne[2] : 0;
  if (gu.ne.size() != 3 || n_expert == 0 || gu.ne[1] == 0 || gu.ne[1] % 2 != 0 || gu.bytes % (2 * n_expert) != 0)
    fail(path_of(m, gu), "expert tensor " + gu.name + " (shape " + shape_str(gu.ne) +
                             ") is not a 3-D stack {n_in, 2 n_ff, n_expert} of fused gate/up experts");
  if (down.ne.size() != 3 || down.ne[2] != n_expert || down.bytes % n_expert != 0)
    fail(path_of(m, down), "expert tensor " + down.name + " (shape " + shape_str(down.ne) + ") is not a 3-D stack of " +
                               std::to_string(n_expert) + " experts like " + gu.name);
  LayerExpertParts out;
  out.layout = ExpertLayout::Stacked;
  const uint64_t half = gu.bytes / n_expert / 2;
  out.part[kGate] = ExpertPartInfo{gu.type, {gu.ne[0], gu.ne[1] / 2}, half, gu.name, true};
  out.part[kUp] = ExpertPartInfo{gu.type, {gu.ne[0], gu.ne[1] / 2}, half, gu.name, true};
  out.part[kDown] = ExpertPartInfo{down.type, {down.ne[0], down.ne[1]}, down.bytes / n_expert, down.name};
  out.experts.resize(n_expert);
  for (uint64_t e = 0; e < n_expert; ++e) {
    const ByteRange r = m.expert_range(gu, e);
    out.experts[e][kGate] = ByteRange{r.split, r.offset, half};
    out.experts[e][kUp] = ByteRange{r.split, r.offset + half, half};
    out.experts[e][kDown] = m.expert_range(down, e);
  }
  return out;
}

}  // namespace

const char* expert_layout_name(ExpertLayout l) {
  switch (l) {
    case ExpertLayout::None: return "none";
    case ExpertLayout::Stacked: return "stacked";
    case ExpertLayout::ExpertMajor: return "expert-major";
  }
  return "?";
}

bool is_expert_tensor_name(std::string_view name) { return parse_expert_tensor_name(name).has_value(); }
bool is_expert_weight(const TensorInfo& t) { return is_expert_tensor_name(t.name); }

std::string stacked_expert_name(uint32_t layer, size_t part) {
  return "blk." + std::to_string(layer) + "." + kExpertPartStems.at(part) + ".weight";
}

std::string expert_major_name(uint32_t layer, size_t part, uint64_t expert) {
  return "blk." + std::to_string(layer) + "." + kExpertPartStems.at(part) + "." + std::to_string(expert) + ".weight";
}

std::optional<ExpertTensorName> parse_expert_tensor_name(std::string_view name) {
  constexpr std::string_view kBlk = "blk.", kWeight = ".weight";
  if (!name.starts_with(kBlk) || !name.ends_with(kWeight)) return std::nullopt;
  std::string_view rest = name.substr(kBlk.size(), name.size() - kBlk.size() - kWeight.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const auto layer = parse_index(rest.substr(0, dot));
  if (!layer) return std::nullopt;
  rest.remove_prefix(dot + 1);  // "STEM" or "STEM.E"
  ExpertTensorName out;
  out.layer = static_cast<uint32_t>(*layer);
  const size_t dot2 = rest.find('.');
  const std::string_view stem = rest.substr(0, dot2);
  if (dot2 != std::string_view::npos) {
    out.expert = parse_index(rest.substr(dot2 + 1));
    if (!out.expert) return std::nullopt;
  }
  if (stem == kFusedGateUpStem) {
    out.part = kGate;
    out.fused_gate_up = true;
    return out;
  }
  for (size_t p = 0; p < 3; ++p) {
    if (stem == kExpertPartStems[p]) {
      out.part = p;
      return out;
    }
  }
  return std::nullopt;
}

ExpertLayout expert_layout(const GgufModel& m) {
  if (const auto v = m.metadata().get_string(kExpertLayoutKey)) {
    if (*v == kExpertMajorValue) return ExpertLayout::ExpertMajor;
    if (*v == "stacked") return ExpertLayout::Stacked;
    fail(m.paths().front(), std::string("unknown ") + kExpertLayoutKey + " '" + *v +
                                "' (this build reads 'stacked' and 'expert-major')");
  }
  for (const TensorInfo& t : m.tensors()) {
    const auto n = parse_expert_tensor_name(t.name);
    if (n && !n->expert) return ExpertLayout::Stacked;
  }
  return ExpertLayout::None;
}

LayerExpertParts stacked_layer_parts(const GgufModel& m, uint32_t layer, const TensorInfo& gate, const TensorInfo& up,
                                     const TensorInfo& down) {
  const std::array<const TensorInfo*, 3> ts = {&gate, &up, &down};
  const uint64_t n_expert = gate.ne.size() == 3 ? gate.ne[2] : 0;
  LayerExpertParts out;
  out.layout = ExpertLayout::Stacked;
  for (size_t p = 0; p < 3; ++p) {
    const TensorInfo& t = *ts[p];
    if (t.ne.size() != 3 || t.ne[2] != n_expert || n_expert == 0 || t.bytes % n_expert != 0)
      fail(path_of(m, t), "expert tensor " + t.name + " (shape " + shape_str(t.ne) + ") is not a 3-D stack of " +
                              std::to_string(n_expert) + " experts like the other expert tensors of layer " + std::to_string(layer));
    out.part[p] = ExpertPartInfo{t.type, {t.ne[0], t.ne[1]}, t.bytes / n_expert, t.name};
  }
  out.experts.resize(n_expert);
  for (uint64_t e = 0; e < n_expert; ++e)
    for (size_t p = 0; p < 3; ++p) out.experts[e][p] = m.expert_range(*ts[p], e);
  return out;
}

std::vector<LayerExpertParts> layer_expert_parts(const GgufModel& m) {
  const ExpertLayout layout = expert_layout(m);
  const std::string& file = m.split(0).path;
  std::map<uint32_t, LayerTensors> found;
  for (const TensorInfo& t : m.tensors()) {
    const auto n = parse_expert_tensor_name(t.name);
    if (!n) continue;
    if (n->layer >= kMaxLayer) fail(path_of(m, t), "expert tensor " + t.name + " has a layer index that is too large");
    LayerTensors& lt = found[n->layer];
    if (n->fused_gate_up && n->expert)
      fail(path_of(m, t), "expert tensor " + t.name + ": a fused gate/up expert tensor must be stacked (" +
                              kFusedGateUpStem + ".weight {n_in, 2 n_ff, n_expert})");
    if (n->fused_gate_up) {
      if (layout == ExpertLayout::ExpertMajor)
        fail(path_of(m, t), "stacked expert tensor " + t.name + " in a file whose " + kExpertLayoutKey +
                                " says expert-major");
      lt.gate_up = &t;
      continue;
    }
    if (!n->expert) {
      if (layout == ExpertLayout::ExpertMajor)
        fail(path_of(m, t), "stacked expert tensor " + t.name + " in a file whose " + kExpertLayoutKey +
                                " says expert-major");
      lt.stacked[n->part] = &t;
      continue;
    }
    if (layout != ExpertLayout::ExpertMajor)
      fail(path_of(m, t), "per-expert tensor " + t.name + " in a file whose metadata lacks " + kExpertLayoutKey +
                              " = " + kExpertMajorValue);
    if (*n->expert >= kMaxExpert) fail(path_of(m, t), "expert tensor " + t.name + " has an expert index that is too large");
    auto& v = lt.major[n->part];
    if (v.size() <= *n->expert) v.resize(*n->expert + 1, nullptr);
    v[*n->expert] = &t;
  }
  std::vector<LayerExpertParts> out(found.empty() ? 0 : found.rbegin()->first + 1);
  for (const auto& [layer, lt] : found) {
    if (layout == ExpertLayout::ExpertMajor) {
      out[layer] = expert_major_layer_parts(m, layer, lt);
      continue;
    }
    if (lt.gate_up) {
      out[layer] = fused_layer_parts(m, layer, lt);
      continue;
    }
    for (size_t p = 0; p < 3; ++p) {
      if (!lt.stacked[p])
        fail(file, "layer " + std::to_string(layer) + " has some but not all of gate/up/down expert tensors (missing " +
                       stacked_expert_name(layer, p) + ")");
    }
    out[layer] = stacked_layer_parts(m, layer, *lt.stacked[kGate], *lt.stacked[kUp], *lt.stacked[kDown]);
  }
  return out;
}

}  // namespace sluice::gguf
