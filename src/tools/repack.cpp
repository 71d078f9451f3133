// Stacked -> expert-major GGUF rewrite (see repack.h).
#include "tools/repack.h"

#include <algorithm>
#include <chrono>
#include <array>
#include <memory>
#include <vector>

#include "gguf/expert_layout.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "io/file.h"
#include "io/output_file.h"
#include "util/clock.h"
#include "util/error.h"

namespace sluice::tools {
namespace {

// Bytes read at once from one stream (a dense tensor, or one stacked expert
// tensor): large enough for sequential disk speed, small enough that the three
// windows of an expert layer stay ~100 MiB.
constexpr uint64_t kWindowBytes = uint64_t{32} << 20;

// One output step: a dense tensor copied whole, or one layer's experts interleaved.
struct Step {
  const gguf::TensorInfo* dense = nullptr;  // set: copy this tensor
  uint32_t layer = 0;                       // else: this expert layer
};

// Copies tensor data from the input splits to the writer, reporting progress.
class Copier {
 public:
  Copier(const gguf::GgufModel& in, gguf::Writer& w, uint64_t total, const RepackOptions& opts)
      : in_(in), w_(w), total_(total), opts_(opts) {
    for (const std::string& p : in.paths()) files_.push_back(io::open_file(p));
  }

  void dense(const gguf::TensorInfo& t) {
    buf_[0].resize(std::min(t.bytes, kWindowBytes));
    for (uint64_t at = 0; at < t.bytes; at += kWindowBytes) {
      const uint64_t n = std::min(kWindowBytes, t.bytes - at);
      files_.at(t.split)->read_exact(buf_[0].data(), n, t.offset + at);
      w_.write_tensor_data(buf_[0].data(), n);
      advance(n);
    }
  }

  // Experts of one stacked layer in expert-major order. Each part's experts
  // are consecutive slices of its stacked tensor, so a window of experts is
  // one sequential read per part.
  void experts(const gguf::LayerExpertParts& lp) {
    uint64_t widest = 1;
    for (const auto& p : lp.part) widest = std::max(widest, p.bytes);
    const uint64_t per_window = std::max<uint64_t>(1, kWindowBytes / widest);
    for (uint64_t e0 = 0; e0 < lp.n_expert(); e0 += per_window) {
      const uint64_t e1 = std::min(lp.n_expert(), e0 + per_window);
      for (size_t p = 0; p < 3; ++p) {
        const gguf::ByteRange& first = lp.experts[e0][p];
        const uint64_t n = (e1 - e0) * lp.part[p].bytes;
        buf_[p].resize(n);
        files_.at(first.split)->read_exact(buf_[p].data(), n, first.offset);
      }
      for (uint64_t e = e0; e < e1; ++e) {
        for (size_t p = 0; p < 3; ++p) {
          const uint64_t n = lp.part[p].bytes;
          w_.write_tensor_data(buf_[p].data() + (e - e0) * n, n);
          advance(n);
        }
      }
    }
  }

  uint64_t done() const { return done_; }

 private:
  void advance(uint64_t n) {
    done_ += n;
    if (opts_.on_progress) opts_.on_progress(done_, total_);
  }

  const gguf::GgufModel& in_;
  gguf::Writer& w_;
  uint64_t total_;
  const RepackOptions& opts_;
  std::vector<std::unique_ptr<io::File>> files_;  // by split
  std::array<std::vector<uint8_t>, 3> buf_;
  uint64_t done_ = 0;
};

bool skipped_key(const std::string& key) {
  return key.starts_with("split.") || key == gguf::kExpertLayoutKey || key == gguf::kExpertLayoutAlignmentKey;
}

}  // namespace

RepackResult repack_expert_major(const std::string& in_path, const std::string& out_path, const RepackOptions& opts) {
  const auto t0 = std::chrono::steady_clock::now();
  const gguf::GgufModel in = gguf::GgufModel::open(in_path);
  const gguf::ExpertLayout layout = gguf::expert_layout(in);
  if (layout == gguf::ExpertLayout::ExpertMajor)
    fail(in_path, std::string("is already expert-major (") + gguf::kExpertLayoutKey + "); nothing to repack");
  if (layout == gguf::ExpertLayout::None)
    fail(in_path, "has no stacked expert tensors (blk.N.ffn_{gate,up,down}_exps.weight); nothing to repack");
  const std::vector<gguf::LayerExpertParts> layers = gguf::layer_expert_parts(in);  // validates
  // Refused here, before any work, when OUT is one of IN's files or exists without --force.
  io::OutputFile out(out_path, {.flag = "", .inputs = in.paths(), .overwrite = opts.force});
  RepackResult result;
  {
    gguf::Writer w(out, gguf::kExpertMajorAlignment);
    for (const auto& [key, value] : in.metadata().entries()) {
      if (skipped_key(key)) continue;
      if (key == "general.alignment") {
        w.add_metadata(key, gguf::Value::from_u32(static_cast<uint32_t>(gguf::kExpertMajorAlignment)));
      } else {
        w.add_metadata(key, value);
      }
    }
    w.add_metadata(gguf::kExpertLayoutKey, gguf::Value::from_string(gguf::kExpertMajorValue));
    w.add_metadata(gguf::kExpertLayoutAlignmentKey,
                   gguf::Value::from_u32(static_cast<uint32_t>(gguf::kExpertMajorAlignment)));

    // Tensor order: the input's, with each expert layer's block where its first
    // stacked tensor stood.
    std::vector<Step> steps;
    std::vector<bool> layer_placed(layers.size(), false);
    uint64_t total = 0;
    for (const gguf::TensorInfo& t : in.tensors()) {
      total += t.bytes;
      const auto n = gguf::parse_expert_tensor_name(t.name);
      if (!n) {
        w.add_tensor(t.name, t.type, t.ne);
        result.n_tensors += 1;
        steps.push_back({&t, 0});
        continue;
      }
      if (layer_placed.at(n->layer)) continue;
      layer_placed[n->layer] = true;
      const gguf::LayerExpertParts& lp = layers[n->layer];
      for (uint64_t e = 0; e < lp.n_expert(); ++e)
        for (size_t p = 0; p < 3; ++p) w.add_tensor(gguf::expert_major_name(n->layer, p, e), lp.part[p].type, lp.part[p].ne);
      steps.push_back({nullptr, n->layer});
      result.n_tensors += 3 * lp.n_expert();
      result.n_expert_layers += 1;
    }
    w.write_header();

    Copier copy(in, w, total, opts);
    for (const Step& s : steps) {
      if (s.dense) copy.dense(*s.dense);
      else copy.experts(layers[s.layer]);
    }
    w.finish();
    result.tensor_bytes = copy.done();
    result.bytes_written = w.bytes_written();
  }
  out.commit();
  // Re-read what was written: the expert table must parse in the new layout
  // (a pipe or device destination cannot be read back).
  if (out.renames()) {
    const gguf::GgufModel check = gguf::GgufModel::open(out_path);
    if (gguf::expert_layout(check) != gguf::ExpertLayout::ExpertMajor ||
        gguf::layer_expert_parts(check).size() != layers.size())
      fail(out_path, "internal: the written file does not read back as expert-major");
  }
  result.seconds = seconds_since(t0);
  return result;
}

}  // namespace sluice::tools
