#include "moe/expert_usage.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "io/whole_file.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::moe {

namespace {
constexpr const char* kFormat = "sluice-expert-usage";
constexpr uint64_t kMaxUsageBytes = uint64_t{256} << 20;
}  // namespace

std::vector<ExpertKey> ExpertUsage::by_use() const {
  std::vector<ExpertKey> keys;
  for (int l = 0; l < n_layer; ++l)
    for (int e = 0; e < n_expert; ++e)
      if (count(l, e) > 0) keys.push_back({l, e});
  std::stable_sort(keys.begin(), keys.end(),
                   [this](const ExpertKey& a, const ExpertKey& b) { return count(a.layer, a.expert) > count(b.layer, b.expert); });
  return keys;
}

void write_expert_usage(const ExpertUsage& u, const std::string& path, io::OutputOptions opts) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = 1;
  j["model"] = u.model;
  j["n_layer"] = u.n_layer;
  j["n_expert"] = u.n_expert;
  j["tokens"] = u.tokens;
  j["counts"] = nlohmann::json::array();
  for (int l = 0; l < u.n_layer; ++l) {
    auto first = u.counts.begin() + static_cast<ptrdiff_t>(l) * u.n_expert;
    j["counts"].push_back(std::vector<uint64_t>(first, first + u.n_expert));
  }
  io::OutputFile out(path, std::move(opts));
  out.write(json_text(j) + "\n");
  out.commit();
}

ExpertUsage read_expert_usage(const std::string& path, const std::string& flag) {
  const std::string where = flag + " " + path + ": ";
  std::string text;
  try {
    text = io::read_whole_file(path, kMaxUsageBytes);
  } catch (const Error& e) {
    throw Error(flag + ": " + e.what());
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + "not valid JSON: " + e.what());
  }
  if (!j.is_object() || j.value("format", "") != kFormat)
    throw Error(where + "not an expert-usage profile (\"format\" must be \"" + kFormat + "\")");
  if (j.value("version", 0) != 1) throw Error(where + "unsupported \"version\" (expected 1)");
  ExpertUsage u;
  try {
    u.model = j.value("model", "");
    u.n_layer = j.at("n_layer").get<int>();
    u.n_expert = j.at("n_expert").get<int>();
    u.tokens = j.at("tokens").get<uint64_t>();
    const nlohmann::json& c = j.at("counts");
    if (u.n_layer < 1 || u.n_layer > 4096 || u.n_expert < 1 || u.n_expert > (1 << 20))
      throw Error(where + "\"n_layer\"/\"n_expert\" out of range");
    if (!c.is_array() || c.size() != static_cast<size_t>(u.n_layer))
      throw Error(where + "\"counts\" must hold " + std::to_string(u.n_layer) + " layers");
    for (const nlohmann::json& row : c) {
      if (!row.is_array() || row.size() != static_cast<size_t>(u.n_expert))
        throw Error(where + "each \"counts\" row must hold " + std::to_string(u.n_expert) + " counts");
      for (const nlohmann::json& v : row) u.counts.push_back(v.get<uint64_t>());
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + "malformed: " + e.what());
  }
  return u;
}

}  // namespace sluice::moe
