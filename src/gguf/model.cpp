// GgufModel: one logical model over one or more GGUF splits.
#include <filesystem>
#include <optional>

#include "gguf/gguf.h"
#include "util/error.h"

namespace sluice::gguf {
namespace {

// Split naming: PREFIX-NNNNN-of-MMMMM.gguf (llama.cpp's gguf-split convention).
struct SplitName {
  std::string prefix;  // path up to, not including, "-NNNNN-of-MMMMM.gguf"
  uint32_t no = 0;     // 1-based
  uint32_t count = 0;
};

std::optional<SplitName> parse_split_name(const std::string& path) {
  constexpr std::string_view kSuffix = ".gguf";
  constexpr size_t kTail = 1 + 5 + 4 + 5 + 5;  // "-00001-of-00003.gguf"
  if (path.size() <= kTail) return std::nullopt;
  const std::string_view tail = std::string_view(path).substr(path.size() - kTail);
  if (tail[0] != '-' || tail.substr(6, 4) != "-of-" || tail.substr(15) != kSuffix) return std::nullopt;
  auto digits = [](std::string_view s, uint32_t& out) {
    out = 0;
    for (char ch : s) {
      if (ch < '0' || ch > '9') return false;
      out = out * 10 + static_cast<uint32_t>(ch - '0');
    }
    return true;
  };
  SplitName n;
  if (!digits(tail.substr(1, 5), n.no) || !digits(tail.substr(10, 5), n.count)) return std::nullopt;
  n.prefix = path.substr(0, path.size() - kTail);
  return n;
}

std::string split_path(const std::string& prefix, uint32_t no, uint32_t count) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05u-of-%05u.gguf", no, count);
  return prefix + buf;
}

ParsedFile parse_path(const std::string& path, const io::WrapFile& wrap) {
  std::shared_ptr<const io::File> file = io::open_file(path);
  if (wrap) file = wrap(std::move(file));
  return parse(*file);
}

}  // namespace

std::vector<std::string> model_file_paths(const std::string& path) {
  const std::optional<SplitName> name = parse_split_name(path);
  if (!name || name->count <= 1) return {path};
  std::vector<std::string> out;
  for (uint32_t no = 1; no <= name->count; ++no) out.push_back(split_path(name->prefix, no, name->count));
  return out;
}

uint64_t TensorInfo::n_elements() const {
  uint64_t p = 1;
  for (uint64_t d : ne) p *= d;
  return p;
}

uint64_t TensorInfo::row_bytes() const {
  if (ne.empty()) return 0;
  return ggml_row_bytes(type, ne[0]).value_or(0);
}

uint64_t TensorInfo::n_rows() const {
  uint64_t p = 1;
  for (size_t k = 1; k < ne.size(); ++k) p *= ne[k];
  return p;
}

GgufModel GgufModel::open(const std::string& path, const io::WrapFile& wrap) {
  ParsedFile first = parse_path(path, wrap);
  const Metadata& md = first.metadata;
  const std::optional<SplitName> name = parse_split_name(path);
  const std::optional<uint64_t> md_count = md.get_uint("split.count");

  uint64_t count = md_count.value_or(name ? name->count : 1);
  if (md_count && name && *md_count != name->count)
    fail(path, "split.count is " + std::to_string(*md_count) + " but the file name says " + std::to_string(name->count) + " splits");
  if (count == 0) fail(path, "split.count is 0");
  if (count == 1) {
    std::vector<ParsedFile> one;
    one.push_back(std::move(first));
    return from_parsed(std::move(one));
  }
  if (!name)
    fail(path, "metadata says the model has " + std::to_string(count) +
                   " splits, but the file name does not follow NAME-00001-of-" + std::to_string(count) +
                   ".gguf so the other splits cannot be found");
  if (count > 99999) fail(path, "split.count " + std::to_string(count) + " is too large");

  std::vector<ParsedFile> splits;
  splits.reserve(count);
  for (uint32_t no = 1; no <= count; ++no) {
    const std::string p = split_path(name->prefix, no, static_cast<uint32_t>(count));
    if (no == name->no) {
      splits.push_back(std::move(first));
      continue;
    }
    std::error_code ec;
    if (!std::filesystem::exists(p, ec))
      fail(p, "missing split " + std::to_string(no) + " of " + std::to_string(count) + " (opened " + path + ")");
    splits.push_back(parse_path(p, wrap));
  }
  return from_parsed(std::move(splits));
}

GgufModel GgufModel::from_parsed(std::vector<ParsedFile> splits) {
  if (splits.empty()) throw Error("GgufModel::from_parsed: no splits");
  GgufModel m;
  const uint64_t n = splits.size();
  uint64_t total = 0;
  for (uint64_t k = 0; k < n; ++k) {
    const ParsedFile& s = splits[k];
    // split.no is 0-based in llama.cpp's gguf-split output.
    if (n > 1) {
      if (auto no = s.metadata.get_uint("split.no"); no && *no != k)
        fail(s.path, "split.no is " + std::to_string(*no) + " but this is split " + std::to_string(k) + " (0-based) of " + std::to_string(n));
      if (auto c = s.metadata.get_uint("split.count"); c && *c != n)
        fail(s.path, "split.count is " + std::to_string(*c) + " but the model has " + std::to_string(n) + " split files");
    }
    total += s.tensors.size();
  }
  m.tensors_.reserve(total);
  m.index_.reserve(total);
  for (uint32_t k = 0; k < n; ++k) {
    for (const TensorInfo& t : splits[k].tensors) {
      if (!m.index_.emplace(t.name, m.tensors_.size()).second) {
        const TensorInfo& other = m.tensors_[m.index_.find(t.name)->second];
        fail(splits[k].path, "tensor '" + t.name + "' also appears in " + splits[other.split].path);
      }
      m.tensors_.push_back(t);
      m.tensors_.back().split = k;
    }
  }
  if (auto expected = splits.front().metadata.get_uint("split.tensors.count"); expected && *expected != total)
    fail(splits.front().path, "split.tensors.count is " + std::to_string(*expected) + " but the splits hold " + std::to_string(total) +
                                  " tensors");
  m.splits_ = std::move(splits);
  return m;
}

const TensorInfo* GgufModel::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufModel::require(std::string_view name) const {
  if (const TensorInfo* t = find(name)) return *t;
  fail(splits_.front().path, "missing tensor " + std::string(name));
}

ByteRange GgufModel::expert_range(const TensorInfo& t, uint64_t e) const {
  if (t.ne.size() != 3)
    fail(splits_.at(t.split).path, "tensor '" + t.name + "' is not a 3-D expert tensor {n_in, n_out, n_expert}");
  if (e >= t.ne[2])
    fail(splits_.at(t.split).path, "expert " + std::to_string(e) + " out of range for tensor '" + t.name + "' with " +
                                       std::to_string(t.ne[2]) + " experts");
  const uint64_t per_expert = t.bytes / t.ne[2];
  return ByteRange{t.split, t.offset + e * per_expert, per_expert};
}

std::vector<std::string> GgufModel::paths() const {
  std::vector<std::string> out;
  out.reserve(splits_.size());
  for (const auto& s : splits_) out.push_back(s.path);
  return out;
}

std::string GgufModel::architecture() const { return metadata().get_string("general.architecture").value_or(""); }

}  // namespace sluice::gguf
