#include "moe/route_trace.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "io/whole_file.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::moe {

namespace {

using nlohmann::json;

// Bounds that keep a corrupt file from asking for absurd tables.
constexpr int64_t kMaxLayer = 4096;
constexpr int64_t kMaxExpert = 1 << 20;

class LineError {
 public:
  LineError(const std::string& name, size_t line) : where_(name + ":" + std::to_string(line)) {}
  [[noreturn]] void fail(const std::string& what) const { throw Error(where_ + ": " + what); }

 private:
  std::string where_;
};

int64_t get_int(const json& j, const char* key, const LineError& at, int64_t lo, int64_t hi) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) at.fail(std::string("missing integer \"") + key + "\"");
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    at.fail(std::string("\"") + key + "\" = " + std::to_string(v) + " is out of range [" +
            std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

std::vector<int> get_experts(const json& j, const LineError& at, const char* key) {
  if (!j.is_array() || j.empty()) at.fail(std::string("\"") + key + "\" must be a non-empty array of expert ids");
  std::vector<int> out;
  out.reserve(j.size());
  for (const json& e : j) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() >= kMaxExpert) {
      at.fail(std::string("\"") + key + "\" holds '" + e.dump() + "', not an expert id");
    }
    const int id = static_cast<int>(e.get<int64_t>());
    if (std::find(out.begin(), out.end(), id) != out.end()) {
      at.fail(std::string("\"") + key + "\" lists expert " + std::to_string(id) + " twice");
    }
    out.push_back(id);
  }
  return out;
}

std::vector<float> get_weights(const json& j, size_t n, const LineError& at, const char* key) {
  if (!j.is_array() || j.size() != n) {
    at.fail(std::string("\"") + key + "\" must be an array of " + std::to_string(n) + " numbers");
  }
  std::vector<float> out;
  out.reserve(n);
  for (const json& w : j) {
    if (!w.is_number()) at.fail(std::string("\"") + key + "\" holds '" + w.dump() + "', not a number");
    // A weight beyond float range would become inf, which the writer cannot
    // store (JSON has no inf): reject it here, naming the value.
    const double d = w.get<double>();
    if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) {
      at.fail(std::string("\"") + key + "\" holds " + w.dump() + ", outside the range of a float");
    }
    out.push_back(static_cast<float>(d));
  }
  return out;
}

// Mixtral rows arrive problem -> layer -> token; re-ordered token-major by a
// stable sort on (problem, token_idx, layer), i.e. aligned on the renumbered
// token_idx (see the header for what that means for the per-layer gaps).
void order_token_major(std::vector<RouteRecord>& rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const RouteRecord& a, const RouteRecord& b) {
    if (a.seq != b.seq) return a.seq < b.seq;
    if (a.pos != b.pos) return a.pos < b.pos;
    return a.layer < b.layer;
  });
}

}  // namespace

// ---- RouteTrace ----

int RouteTrace::n_layers() const {
  int n = 0;
  for (const RouteRecord& r : records) n = std::max(n, r.layer + 1);
  return n;
}

int RouteTrace::max_top_k() const {
  size_t k = 0;
  for (const RouteRecord& r : records) k = std::max(k, r.experts.size());
  return static_cast<int>(k);
}

int RouteTrace::n_expert() const {
  int n = 0;
  for (const RouteRecord& r : records) {
    for (int e : r.experts) n = std::max(n, e + 1);
  }
  return n;
}

uint64_t RouteTrace::n_tokens() const {
  std::set<std::pair<int, int64_t>> seen;
  for (const RouteRecord& r : records) seen.emplace(r.seq, r.pos);
  return seen.size();
}

std::string RouteTrace::summary() const {
  return source + ": " + format + " format, " + std::to_string(records.size()) + " records, " +
         std::to_string(n_tokens()) + " tokens, " + std::to_string(n_layers()) + " layers, top-" +
         std::to_string(max_top_k()) + " of " + std::to_string(n_expert()) + " experts";
}

// ---- writing ----

std::string route_record_json(const RouteRecord& r) {
  json j;
  if (r.seq != 0) j["seq"] = r.seq;
  j["pos"] = r.pos;
  j["layer"] = r.layer;
  j["experts"] = r.experts;
  j["weights"] = r.weights;
  j["hit"] = r.hit;
  return json_text(j);
}

RouteTraceWriter::RouteTraceWriter(const std::string& path, io::OutputOptions opts) : out_(path, std::move(opts)) {}

void RouteTraceWriter::write(const RouteRecord& r) { out_.write(route_record_json(r) + "\n"); }

void RouteTraceWriter::close() {
  if (closed_) return;
  closed_ = true;
  out_.commit();
}

// ---- reading ----

RouteTrace parse_route_trace(std::istream& in, const std::string& name) {
  RouteTrace trace;
  trace.source = name;
  std::string line;
  size_t line_no = 0;
  int qwen_call = -1;
  int64_t aligned_prefill = 0;  // prefill tokens seen (decode positions follow them)
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const LineError at(name, line_no);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception& e) {
      at.fail(std::string("not valid JSON: ") + e.what());
    }
    if (!j.is_object()) at.fail("expected a JSON object per line");
    std::string format;
    if (j.contains("gating_probs") && j.contains("problem_id")) {
      format = "mixtral";
    } else if (j.contains("phase")) {
      format = "mixtral-aligned";
    } else if (j.contains("type")) {
      format = "qwen-moe";
    } else if (j.contains("pos") && j.contains("layer")) {
      format = "sluice";
    } else {
      at.fail("unrecognised routing record (expected sluice, Mixtral or Qwen-MoE trace keys)");
    }
    if (trace.format.empty()) trace.format = format;
    if (format != trace.format) at.fail("a " + format + " record in a " + trace.format + " trace");

    if (format == "mixtral") {
      RouteRecord r;
      r.seq = static_cast<int>(get_int(j, "problem_id", at, 0, 1 << 30));
      r.layer = static_cast<int>(get_int(j, "layer", at, 0, kMaxLayer));
      r.pos = get_int(j, "token_idx", at, 0, INT64_C(1) << 40);
      r.experts = get_experts(j["experts"], at, "experts");
      r.weights = get_weights(j["gating_probs"], r.experts.size(), at, "gating_probs");
      trace.records.push_back(std::move(r));
    } else if (format == "mixtral-aligned") {
      const json& phase = j["phase"];
      const bool decode = phase == "decode";
      if (!decode && phase != "prefill") at.fail("\"phase\" must be \"prefill\" or \"decode\"");
      const int64_t pos = get_int(j, "pos", at, 0, INT64_C(1) << 40);
      if (!decode) aligned_prefill = std::max(aligned_prefill, pos + 1);
      const json& ex = j["experts"];
      const json& gp = j.contains("gating_probs") ? j["gating_probs"] : json();
      if (!ex.is_array() || ex.size() > kMaxLayer) at.fail("\"experts\" must be an array per layer");
      for (size_t l = 0; l < ex.size(); ++l) {
        if (ex[l].is_null()) continue;  // unknown for this layer
        RouteRecord r;
        r.pos = decode ? aligned_prefill + pos : pos;
        r.layer = static_cast<int>(l);
        r.experts = get_experts(ex[l], at, "experts");
        if (gp.is_array() && l < gp.size() && !gp[l].is_null()) {
          r.weights = get_weights(gp[l], r.experts.size(), at, "gating_probs");
        }
        trace.records.push_back(std::move(r));
      }
    } else if (format == "qwen-moe") {
      if (j["type"] == "meta") continue;
      if (j["type"] != "route") at.fail("\"type\" must be \"meta\" or \"route\"");
      RouteRecord r;
      r.pos = get_int(j, "token_idx", at, 0, INT64_C(1) << 40);
      if (r.pos == 0 || qwen_call < 0) ++qwen_call;  // a new fused-MoE call
      r.seq = qwen_call;
      r.layer = static_cast<int>(get_int(j, "layer", at, 0, kMaxLayer));
      r.experts = get_experts(j["topk_ids"], at, "topk_ids");
      r.weights = get_weights(j["topk_weights"], r.experts.size(), at, "topk_weights");
      trace.records.push_back(std::move(r));
    } else {  // sluice
      RouteRecord r;
      r.seq = j.contains("seq") ? static_cast<int>(get_int(j, "seq", at, 0, 1 << 30)) : 0;
      r.pos = get_int(j, "pos", at, 0, INT64_C(1) << 40);
      r.layer = static_cast<int>(get_int(j, "layer", at, 0, kMaxLayer));
      r.experts = get_experts(j["experts"], at, "experts");
      if (j.contains("weights") && !j["weights"].empty()) {
        r.weights = get_weights(j["weights"], r.experts.size(), at, "weights");
      }
      if (j.contains("hit") && !j["hit"].empty()) {
        const json& h = j["hit"];
        if (!h.is_array() || h.size() != r.experts.size()) {
          at.fail("\"hit\" must be an array of " + std::to_string(r.experts.size()) + " booleans");
        }
        for (const json& b : h) {
          if (!b.is_boolean()) at.fail("\"hit\" holds '" + b.dump() + "', not a boolean");
          r.hit.push_back(b.get<bool>());
        }
      }
      trace.records.push_back(std::move(r));
    }
  }
  if (in.bad()) throw Error(name + ": read error");
  if (trace.format == "mixtral") order_token_major(trace.records);
  if (trace.records.empty()) throw Error(name + ": no routing records");
  return trace;
}

RouteTrace read_route_trace(const std::string& path, const io::WrapFile& wrap) {
  std::istringstream in(io::read_whole_file(path, kMaxTraceBytes, wrap));
  return parse_route_trace(in, path);
}

std::vector<RouteTrace> read_route_traces(const std::vector<std::string>& paths) {
  std::vector<RouteTrace> out;
  for (const std::string& p : paths) out.push_back(read_route_trace(p));
  return out;
}

}  // namespace sluice::moe
