// Server prefix reuse on a model with recurrent layers (qwen35moe: gated
// DeltaNet). A request that shares only part of the previous one's tokens
// cannot cut the recurrent state back by overwriting: the slot restores a
// checkpoint or recomputes from 0 (Model::truncate), and every answer must be
// the one the same request gets from a fresh server (greedy). Then the same
// on the runtime with --mtp (serve has no --mtp): a session that drafted,
// had drafts rejected and rolled back for a shorter shared prefix answers
// like a fresh session without drafts.
#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "model_test_support.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "server/server.h"

namespace sluice::test {
namespace SLUICE_TEST_FILE {

using json = nlohmann::json;

std::vector<int32_t> seq(int first, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>(1 + (first + 37 * i) % 250));
  return t;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

model::ModelConfig golden_cfg(bool mtp = false) {
  auto cfg = golden_config();
  cfg.n_ctx = 128;
  cfg.ubatch = 4;
  cfg.mtp = mtp;
  return cfg;
}

// A Session and a Server on a free loopback port over a golden GGUF.
struct GoldenServer {
  explicit GoldenServer(const std::string& path) {
    session = std::make_unique<runtime::Session>(runtime::Session::open(path, golden_cfg()));
    server::ServerConfig cfg;
    cfg.defaults.sampler.temperature = 0;  // greedy
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.model_id = "golden";
    srv = std::make_unique<server::Server>(*session, std::move(cfg));
    port = srv->bind();
    thread = std::thread([this] { srv->run(); });
    httplib::Client c("127.0.0.1", port);
    auto h = c.Get("/health");
    EXPECT_TRUE(h && h->status == 200);
  }
  ~GoldenServer() {
    srv->stop();
    thread.join();
  }
  // The completion's generated text and its cached prompt tokens.
  json complete(const std::vector<int32_t>& prompt, int max_tokens) const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    const json body = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"logprobs", 1}};
    auto res = c.Post("/v1/completions", body.dump(), "application/json");
    if (!res || res->status != 200) {
      ADD_FAILURE() << "completion failed: " << (res ? res->body : std::string("no response"));
      return json::object();
    }
    return json::parse(res->body);
  }
  // A counter or gauge from /metrics (-1 when absent).
  double metric(const std::string& name) const {
    httplib::Client c("127.0.0.1", port);
    auto res = c.Get("/metrics");
    if (!res) return -1;
    const std::string& b = res->body;
    for (size_t pos = b.find(name + " "); pos != std::string::npos; pos = b.find(name + " ", pos + 1))
      if (pos == 0 || b[pos - 1] == '\n') return std::stod(b.substr(pos + name.size() + 1));
    return -1;
  }
  std::unique_ptr<runtime::Session> session;
  std::unique_ptr<server::Server> srv;
  std::thread thread;
  int port = 0;
};

// What must match between two answers: the text and every token's logprob entry.
json answer(const json& r) {
  if (!r.contains("choices")) return json();
  return {r["choices"][0]["text"], r["choices"][0]["logprobs"], r["usage"]["completion_tokens"]};
}

TEST(ServePrefixReuse, Qwen35moeSharedPrefixesAnswerLikeAFreshServer) {
  const std::string path = shared_path("golden/qwen35moe-f32.gguf");
  if (!exists(path)) GTEST_SKIP() << path << " not found";
  const std::vector<int32_t> p1 = seq(3, 20);
  // p2 shares 12 of p1's tokens (a cut inside p1: no checkpoint there);
  // p3 extends p1 (a checkpoint at p1's end serves it); p4 shares 5.
  const std::vector<int32_t> p2 = cat(std::vector<int32_t>(p1.begin(), p1.begin() + 12), seq(41, 6));
  const std::vector<int32_t> p3 = cat(p1, seq(77, 9));
  const std::vector<int32_t> p4 = cat(std::vector<int32_t>(p1.begin(), p1.begin() + 5), seq(101, 11));
  const std::vector<std::vector<int32_t>> prompts = {p1, p2, p1, p3, p4, p2};
  constexpr int kMax = 8;
  std::vector<json> fresh;
  for (const auto& p : prompts) {
    GoldenServer s(path);
    fresh.push_back(answer(s.complete(p, kMax)));
  }
  GoldenServer s(path);
  int reused = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json r = s.complete(prompts[i], kMax);
    EXPECT_EQ(answer(r), fresh[i]) << "request " << i << " after " << i << " others on one server";
    if (i > 0) reused += r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() > 0;
  }
  EXPECT_EQ(reused, static_cast<int>(prompts.size()) - 1) << "every later request shares a prefix";
  // Some cut fell back past a checkpoint and was recomputed (said, not hidden).
  EXPECT_GT(s.metric("sluice_prompt_tokens_recomputed_total"), 0.0);
}

// The runtime with --mtp on the qwen35moe NextN golden model: greedy
// generation with drafts (rejections roll the recurrent state back to the
// verify checkpoint), then a prompt that shares only part of the history
// (a rewind inside it), then one that extends it; each continuation equals
// a fresh session's without drafts.
TEST(ServePrefixReuse, Qwen35moeMtpRejectionsThenASharedPrefixMatchAFreshSession) {
  const std::string path = shared_path("golden/qwen35moe-mtp-f32.gguf");
  if (!exists(path)) GTEST_SKIP() << path << " not found";
  auto run = [&](runtime::Session& s, const std::vector<int32_t>& prompt, int n) {
    std::vector<int32_t> out;
    runtime::Sampler greedy(runtime::SamplerConfig{});
    const size_t keep = s.common_prefix(prompt);
    s.rewind(keep);
    s.generate(std::span(prompt).subspan(keep), n, greedy, [&](int32_t id) {
      out.push_back(id);
      return true;
    });
    return out;
  };
  auto fresh = [&](const std::vector<int32_t>& prompt, int n) {
    runtime::Session s = runtime::Session::open(path, golden_cfg(true));
    return run(s, prompt, n);
  };
  runtime::Session s = runtime::Session::open(path, golden_cfg(true));
  runtime::MtpOptions o;
  o.depth = 3;
  s.set_mtp(o);
  const std::vector<int32_t> p1 = seq(3, 14);
  const std::vector<int32_t> g1 = run(s, p1, 24);
  EXPECT_EQ(g1, fresh(p1, 24));
  const telemetry::MtpCounters c = s.mtp_counters();
  EXPECT_GT(c.drafted, 0u);
  EXPECT_LT(c.accepted, c.drafted) << "no draft was rejected: the test needs rejections";
  // A prompt sharing 9 of p1's tokens, then one extending the whole history.
  const std::vector<int32_t> p2 = cat(std::vector<int32_t>(p1.begin(), p1.begin() + 9), seq(55, 5));
  EXPECT_EQ(run(s, p2, 16), fresh(p2, 16));
  const std::vector<int32_t> p3 = cat(s.tokens(), seq(91, 4));
  EXPECT_EQ(run(s, p3, 16), fresh(p3, 16));
}

}  // namespace
}  // namespace sluice::test
