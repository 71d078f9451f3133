#include "server/server.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <filesystem>

#include <atomic>
#include <ctime>
#include <exception>
#include <functional>
#include <stdexcept>

#include "server/anthropic.h"
#include "server/api_key.h"
#include "server/errors.h"
#include "server/forced_tool.h"
#include "server/http_server.h"
#include "server/limits.h"
#include "server/llama_api.h"
#include "server/metrics.h"
#include "server/response.h"
#include "server/responses_api.h"
#include "util/error.h"
#include "util/json_text.h"

namespace sluice::server {
namespace {

using nlohmann::json;

// limits.h states these; the library was built with its header's defaults.
static_assert(kMaxUriBytes == CPPHTTPLIB_REQUEST_URI_MAX_LENGTH);
static_assert(kMaxHeaderLineBytes == CPPHTTPLIB_HEADER_MAX_LENGTH);

// A refusal with its own status (the body's size and encoding).
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message) : std::runtime_error(message), status(status) {}
  int status;
};

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(error_body(status, message), "application/json");
}

void send_json(httplib::Response& res, const json& j) { res.set_content(json_text(j), "application/json"); }

std::string too_large_message(size_t max_body_bytes) {
  return "the request body is too large: the limit is " + std::to_string(max_body_bytes >> 20) +
         " MiB (--max-body-mb)";
}

// The request body, read through cpp-httplib's content reader so that the
// limit holds whatever the framing (Content-Length, chunked, until the end)
// and for the decompressed size of a gzip/brotli body.
std::string read_body(httplib::Response& res, const httplib::ContentReader& reader, size_t max_body_bytes) {
  std::string body;
  bool over = false;
  const bool ok = reader([&](const char* data, size_t n) {
    if (n > max_body_bytes - body.size()) {
      over = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (ok) return body;
  // cpp-httplib sets 413 for a Content-Length over its payload limit (the
  // same one) and 415 for a Content-Encoding it cannot decode.
  if (over || res.status == 413) throw HttpError(413, too_large_message(max_body_bytes));
  if (res.status == 415) throw HttpError(415, "the request body's Content-Encoding is not supported (gzip, deflate, br are)");
  throw RequestError("the request body could not be read (cut short, malformed chunks, or a bad gzip/br stream)");
}

// Named SSE events (Anthropic Messages, OpenAI Responses): false when the client is gone.
bool write_events(httplib::DataSink& sink, const std::vector<SseEvent>& events) {
  for (const auto& [name, data] : events) {
    const std::string s = "event: " + name + "\ndata: " + json_text(data) + "\n\n";
    if (!sink.write(s.data(), s.size())) return false;
  }
  return true;
}

int64_t now_s() { return static_cast<int64_t>(std::time(nullptr)); }

// Debian's cpp-httplib 0.11 is a compiled library that listens with a
// backlog of 5 and has no way to change it or reach the socket: a burst of
// connections overflows the accept queue and some are dropped or reset.
// Calling listen() again on a listening socket only changes its backlog, so
// find ours (the listening TCP socket bound to `port`) among our descriptors.
void widen_backlog(int port) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const int fd = std::atoi(e.path().filename().c_str());
    int listening = 0;
    socklen_t len = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t alen = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    int bound = -1;
    if (addr.ss_family == AF_INET) bound = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6) bound = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (bound == port) ::listen(fd, SOMAXCONN);
  }
}

}  // namespace

struct Server::Impl {
  Impl(runtime::Session& s, ServerConfig c) : cfg(std::move(c)), engine(s, cfg.chat_renderer, cfg.max_queue) {}

  ServerConfig cfg;
  Engine engine;
  HttpServer http;
  std::atomic<uint64_t> next_id{1};
  ResponseStore responses;  // /v1/responses conversations, for previous_response_id
  int port = -1;

  enum class Kind { Completion, Chat };

  void routes();
  // POST `path`: `fn` gets the body parsed (parse_json_body), read within max_body_bytes.
  void post(const std::string& path, std::function<void(const json& body, httplib::Response& res)> fn);
  void handle_generation(const json& body, httplib::Response& res, Kind kind);
  void handle_messages(const json& body, httplib::Response& res);  // Anthropic /v1/messages
  void handle_responses(const json& body, httplib::Response& res);  // OpenAI /v1/responses
  void handle_llama_completion(const json& body, httplib::Response& res);  // llama-server /completion
  void handle_slot_action(int slot, const std::string& action, const json& body, httplib::Response& res);
};

// POST /slots/{id}?action=save|restore {"filename": NAME}: llama-server's shape.
void Server::Impl::handle_slot_action(int slot, const std::string& action, const json& body,
                                      httplib::Response& res) {
  if (action != "save" && action != "restore")
    throw RequestError("'action' must be save or restore (got '" + action + "')");
  if (cfg.slot_save_path.empty())
    throw HttpError(501, "slot save/restore is off: start the server with --slot-save-path DIR");
  if (!body.is_object() || !body.contains("filename") || !body["filename"].is_string())
    throw RequestError("'filename' must be a string");
  const std::string name = body["filename"].get<std::string>();
  // A plain name inside --slot-save-path: never a path out of it.
  if (name.empty() || name.size() > 255 || name.find('/') != std::string::npos ||
      name.find('\\') != std::string::npos || name.find("..") != std::string::npos ||
      name.find('\0') != std::string::npos || name == ".")
    throw RequestError("'filename' must be a plain file name (no '/', '\\' or '..', at most 255 bytes)");
  const std::string path = cfg.slot_save_path + "/" + name;
  if (action == "save") {
    const Engine::SlotFileResult r = engine.save_slot(slot, path);
    send_json(res, {{"id_slot", slot}, {"filename", name}, {"n_saved", r.tokens}, {"n_written", r.bytes}});
    return;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw HttpError(404, "no slot file '" + name + "' in --slot-save-path");
  const Engine::SlotFileResult r = engine.restore_slot(slot, path);
  send_json(res, {{"id_slot", slot}, {"filename", name}, {"n_restored", r.tokens}, {"n_read", r.bytes}});
}

void Server::Impl::routes() {
  http.new_task_queue = [n = cfg.http_threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  http.set_payload_max_length(cfg.max_body_bytes);
  // httplib's default also sets SO_REUSEPORT, which would let a second
  // server bind a port already in use and split its connections: refuse that.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // Any error status without a body gets the JSON error shape (404, httplib's 413, 414, 400, ...).
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([max_body = cfg.max_body_bytes](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        switch (res.status) {
          case 404: send_error(res, 404, "no such endpoint"); break;
          case 405: send_error(res, 405, "method not allowed"); break;
          case 413: send_error(res, 413, too_large_message(max_body)); break;
          case 414: send_error(res, 414, "the request URI is over " + std::to_string(kMaxUriBytes) + " bytes"); break;
          case 400:
            send_error(res, 400, "bad request: a malformed request line or header, or a header line over " +
                                     std::to_string(kMaxHeaderLineBytes) + " bytes");
            break;
          default: send_error(res, res.status, "bad request"); break;
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const HttpError& e) {
      send_error(res, e.status, e.what());
    } catch (const RequestError& e) {
      send_error(res, 400, e.what());
    } catch (const QueueFullError& e) {
      send_error(res, 429, e.what());
    } catch (const MemoryBudgetError& e) {
      send_error(res, 503, e.what());
    } catch (const runtime::SlotFileError& e) {
      send_error(res, 400, e.what());
    } catch (const SlotBusyError& e) {
      send_error(res, 409, e.what());
    } catch (const std::exception& e) {
      send_error(res, 500, e.what());
    } catch (...) {
      send_error(res, 500, "unknown error");
    }
  });
  // Runs once the headers are read, before any of the body is.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // cpp-httplib reads the body of a PUT, PATCH, DELETE or PRI without a
    // bound (chunked or compressed) when no handler takes it: refuse those unread.
    if (req.method != "GET" && req.method != "HEAD" && req.method != "POST" && req.method != "OPTIONS") {
      send_error(res, 405, "method " + req.method + " is not allowed");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.headers.size() > kMaxHeaderCount) {
      send_error(res, 431, "the request has " + std::to_string(req.headers.size()) + " headers; the limit is " +
                               std::to_string(kMaxHeaderCount));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (cfg.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    // Anthropic clients send the key as x-api-key.
    if (bearer_matches(req.get_header_value("Authorization"), cfg.api_key) ||
        (req.has_header("x-api-key") && constant_time_equal(req.get_header_value("x-api-key"), cfg.api_key)))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, 401, "invalid or missing API key (Authorization: Bearer KEY, or x-api-key: KEY)");
    return httplib::Server::HandlerResponse::Handled;
  });

  http.Get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, {{"status", "ok"}}); });
  auto models = [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"object", "list"},
                    {"data",
                     {{{"id", cfg.model_id},
                       {"object", "model"},
                       {"created", now_s()},
                       {"owned_by", "sluice"},
                       {"meta", {{"n_ctx", engine.n_ctx()}, {"n_vocab", engine.tokenizer().n_vocab()}}}}}}});
  };
  http.Get("/v1/models", models);
  http.Get("/models", models);
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(prometheus_text(engine.metrics()), "text/plain; version=0.0.4");
  });
  post("/tokenize", [this](const json& body, httplib::Response& res) {
    if (!body.is_object() || !body.contains("content") || !body["content"].is_string())
      throw RequestError("'content' must be a string");
    bool add_special = false;
    if (body.contains("add_special")) {
      if (!body["add_special"].is_boolean()) throw RequestError("'add_special' must be a boolean");
      add_special = body["add_special"].get<bool>();
    }
    send_json(res, {{"tokens", engine.tokenizer().encode(body["content"].get<std::string>(), add_special, true)}});
  });
  post("/detokenize", [this](const json& body, httplib::Response& res) {
    if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
      throw RequestError("'tokens' must be an array of token ids");
    std::vector<int32_t> ids;
    for (const json& v : body["tokens"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= engine.tokenizer().n_vocab())
        throw RequestError("'tokens' must hold ids in [0, " + std::to_string(engine.tokenizer().n_vocab()) + ")");
      ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    }
    send_json(res, {{"content", engine.tokenizer().decode(ids, false)}});
  });
  for (const char* path : {"/v1/completions", "/completions"})
    post(path, [this](const json& body, httplib::Response& res) { handle_generation(body, res, Kind::Completion); });
  for (const char* path : {"/v1/chat/completions", "/chat/completions"}) {
    post(path, [this](const json& body, httplib::Response& res) {
      if (!engine.has_chat_renderer()) return send_error(res, 501, "this build has no chat-template renderer");
      handle_generation(body, res, Kind::Chat);
    });
  }
  http.Get("/props", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, llama_props(cfg.defaults, engine.n_ctx(), cfg.model_id));
  });
  post("/completion", [this](const json& body, httplib::Response& res) { handle_llama_completion(body, res); });
  for (const char* path : {"/v1/embeddings", "/embeddings"})
    post(path, [](const json&, httplib::Response& res) {
      send_error(res, 501, "embeddings are not implemented: sluice serves generation only");
    });
  for (const char* path : {"/v1/responses", "/responses"}) {
    post(path, [this](const json& body, httplib::Response& res) {
      if (!engine.has_chat_renderer()) return send_error(res, 501, "this build has no chat-template renderer");
      handle_responses(body, res);
    });
  }
  post("/v1/messages", [this](const json& body, httplib::Response& res) {
    if (!engine.has_chat_renderer()) return send_error(res, 501, "this build has no chat-template renderer");
    // Anthropic's error shape for the client's mistakes: {"type": "error", "error": {type, message}}.
    try {
      handle_messages(body, res);
    } catch (const RequestError& e) {
      res.status = 400;
      send_json(res, {{"type", "error"}, {"error", {{"type", "invalid_request_error"}, {"message", e.what()}}}});
    } catch (const QueueFullError& e) {
      res.status = 429;
      send_json(res, {{"type", "error"}, {"error", {{"type", "rate_limit_error"}, {"message", e.what()}}}});
    } catch (const MemoryBudgetError& e) {
      res.status = 503;
      send_json(res, {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", e.what()}}}});
    }
  });
  http.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
    json out = json::array();
    for (const SlotInfo& s : engine.slots())
      out.push_back({{"id", s.id}, {"n_past", s.n_past}, {"is_processing", s.busy}});
    send_json(res, out);
  });
  http.Post(R"(/slots/(\d{1,9}))", [this](const httplib::Request& req, httplib::Response& res,
                                           const httplib::ContentReader& reader) {
    const json body = parse_json_body(read_body(res, reader, cfg.max_body_bytes));
    handle_slot_action(std::stoi(req.matches[1].str()), req.get_param_value("action"), body, res);
  });
  // Registered last: a POST to any other path is answered without reading its
  // body (cpp-httplib would read it, without a bound, before its 404).
  http.Post(".*", [](const httplib::Request&, httplib::Response& res, const httplib::ContentReader&) {
    send_error(res, 404, "no such endpoint");
  });
}

void Server::Impl::post(const std::string& path, std::function<void(const json& body, httplib::Response& res)> fn) {
  http.Post(path, [this, fn = std::move(fn)](const httplib::Request&, httplib::Response& res,
                                             const httplib::ContentReader& reader) {
    fn(parse_json_body(read_body(res, reader, cfg.max_body_bytes)), res);
  });
}

void Server::Impl::handle_generation(const json& body, httplib::Response& res, Kind kind) {
  const bool chat = kind == Kind::Chat;
  auto r = std::make_shared<GenerationRequest>(chat ? parse_chat_request(body, cfg.defaults)
                                                    : parse_completion_request(body, cfg.defaults));
  if (r->force_tool_call) r->assistant_prefix = forced_call_opener(cfg.output_format);
  // Tokenized here so a bad prompt is a 400 before any streaming starts.
  std::string rendered;
  auto prompt = std::make_shared<std::vector<int32_t>>(engine.tokenize_prompt(*r, &rendered));
  ResponseInfo info;
  info.id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
  info.created = now_s();
  info.model = cfg.model_id;
  info.chat = chat;
  info.format = cfg.output_format;
  // A prompt that opens a reasoning block (<think>) starts the answer inside it.
  info.starts_in_reasoning = chat && chat_output::prompt_opens_reasoning(rendered, cfg.output_format);
  info.logprobs = r->logprobs >= 0;
  info.forced_tool_call = r->force_tool_call;
  info.tok = &engine.tokenizer();
  const int n = r->n;
  if (n > engine.n_slots())
    throw RequestError("'n' is " + std::to_string(n) + "; this server generates at most " +
                       std::to_string(engine.n_slots()) + " choices at once (--parallel)");
  // One builder per choice: each keeps its own parse state of the answer.
  auto builders = std::make_shared<std::vector<ResponseBuilder>>();
  for (int i = 0; i < n; ++i) builders->emplace_back(info);

  // Queued now, so a full queue is a 429 before any streaming starts.
  auto jobs = std::make_shared<std::vector<std::shared_ptr<Job>>>(engine.submit_choices(*r, *prompt));
  if (!r->stream) {
    json body;
    int completion_tokens = 0;
    for (int i = 0; i < n; ++i) {
      const GenerationResult g = engine.wait((*jobs)[i], [](const std::string&) { return true; });
      json one = (*builders)[i].whole(g);
      completion_tokens += g.completion_tokens;
      if (i == 0) {
        body = std::move(one);
        continue;
      }
      for (json& c : one["choices"]) {
        c["index"] = i;
        body["choices"].push_back(std::move(c));
      }
    }
    body["usage"]["completion_tokens"] = completion_tokens;
    body["usage"]["total_tokens"] = body["usage"]["prompt_tokens"].get<int>() + completion_tokens;
    send_json(res, body);
    return;
  }

  // Streaming: the whole generation runs inside the content provider, on
  // this connection's thread, writing one SSE event per event the builders
  // give: the choices one after another (each carries its index; they
  // generate concurrently, a later one's text waits in its job). A failed
  // write means the client is gone: generation stops there.
  res.set_header("Cache-Control", "no-cache");
  // Completions with logprobs: one event per token, text or not (Engine::wait's every_token).
  const bool every_token = !chat && r->logprobs >= 0;
  res.set_chunked_content_provider("text/event-stream", [this, jobs, builders, n, every_token](size_t, httplib::DataSink& sink) {
    int completion_tokens = 0;
    int choice = 0;
    auto send = [&](std::vector<json> events) {
      for (json& j : events) {
        if (j.contains("choices"))
          for (json& c : j["choices"]) c["index"] = choice;
        if (j.contains("usage")) {
          if (choice + 1 < n) {
            j.erase("usage");
          } else {
            j["usage"]["completion_tokens"] = completion_tokens;
            j["usage"]["total_tokens"] = j["usage"]["prompt_tokens"].get<int>() + completion_tokens;
          }
        }
        const std::string s = "data: " + json_text(j) + "\n\n";
        if (!sink.write(s.data(), s.size())) return false;
      }
      return true;
    };
    // The client gone: every choice not yet waited for is cancelled too.
    auto cancel_rest = [&] {
      for (int i = choice; i < n; ++i) (*jobs)[i]->cancelled = true;
      engine.wake();
      return false;
    };
    try {
      for (choice = 0; choice < n; ++choice) {
        ResponseBuilder& builder = (*builders)[choice];
        if (!send(builder.stream_start())) return cancel_rest();
        std::vector<runtime::TokenLogprob> lps;  // since the last text
        const GenerationResult g = engine.wait(
            (*jobs)[choice],
            [&](const std::string& t) {
              const bool ok = send(builder.stream_text(t, lps));
              lps.clear();
              return ok;
            },
            [&](const runtime::TokenLogprob& lp) { lps.push_back(lp); }, every_token);
        // Tokens whose text never came (held back, then cut by a stop string)
        // still have their log-probabilities sent, on the last events.
        builder.add_logprobs(lps);
        completion_tokens += g.completion_tokens;
        if (g.finish_reason == "cancelled") return cancel_rest();
        if (!send(builder.stream_end(g))) return cancel_rest();
      }
      static const char kDone[] = "data: [DONE]\n\n";
      if (!sink.write(kDone, sizeof kDone - 1)) return false;
    } catch (const std::exception& e) {
      // Headers are gone already: report in-band, as llama-server does.
      choice = n;  // no index to patch
      send({{{"error", {{"message", e.what()}, {"type", "server_error"}, {"code", 500}}}}});
    }
    sink.done();
    return true;
  });
}

void Server::Impl::handle_messages(const json& body, httplib::Response& res) {
  auto r = std::make_shared<GenerationRequest>(parse_messages_request(body, cfg.defaults));
  if (r->force_tool_call) r->assistant_prefix = forced_call_opener(cfg.output_format);
  std::string rendered;
  auto prompt = std::make_shared<std::vector<int32_t>>(engine.tokenize_prompt(*r, &rendered));
  MessagesInfo info;
  info.id = "msg_" + std::to_string(next_id++);
  info.model = cfg.model_id;
  info.format = cfg.output_format;
  info.starts_in_reasoning = chat_output::prompt_opens_reasoning(rendered, cfg.output_format);
  info.forced_tool_call = r->force_tool_call;
  if (r->stop.size() == 1) info.single_stop_sequence = r->stop[0];
  auto builder = std::make_shared<MessagesBuilder>(std::move(info));
  // Queued now, so a full queue is a 429 before any streaming starts.
  std::shared_ptr<Job> job = engine.submit(*r, *prompt);
  if (!r->stream) {
    send_json(res, builder->whole(engine.wait(job, [](const std::string&) { return true; })));
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  const int n_prompt = static_cast<int>(prompt->size());
  res.set_chunked_content_provider("text/event-stream", [this, job, n_prompt, builder](size_t, httplib::DataSink& sink) {
    auto send = [&](const std::vector<SseEvent>& events) { return write_events(sink, events); };
    if (!send(builder->stream_start(n_prompt))) return false;
    try {
      const GenerationResult g =
          engine.wait(job, [&](const std::string& t) { return send(builder->stream_text(t)); });
      if (g.finish_reason == "cancelled" || !send(builder->stream_end(g))) return false;
    } catch (const std::exception& e) {
      send({{"error", {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", e.what()}}}}}});
    }
    sink.done();
    return true;
  });
}

void Server::Impl::handle_llama_completion(const json& body, httplib::Response& res) {
  auto r = std::make_shared<GenerationRequest>(parse_completion_request(body, cfg.defaults));
  if (r->n > 1) throw RequestError("'n' above 1 is served on /v1/completions and /v1/chat/completions");
  auto prompt = std::make_shared<std::vector<int32_t>>(engine.tokenize_prompt(*r));
  // Queued now, so a full queue is a 429 before any streaming starts.
  std::shared_ptr<Job> job = engine.submit(*r, *prompt);
  if (!r->stream) {
    const GenerationResult g = engine.wait(job, [](const std::string&) { return true; });
    send_json(res, llama_completion_body(g, cfg.model_id, r->stop, false));
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [this, r, job](size_t, httplib::DataSink& sink) {
    auto send = [&](const json& j) {
      const std::string s = "data: " + json_text(j) + "\n\n";
      return sink.write(s.data(), s.size());
    };
    try {
      const GenerationResult g =
          engine.wait(job, [&](const std::string& t) { return send(llama_completion_chunk(t)); });
      if (g.finish_reason == "cancelled" || !send(llama_completion_body(g, cfg.model_id, r->stop, true))) return false;
    } catch (const std::exception& e) {
      send({{"error", {{"message", e.what()}, {"type", "server_error"}, {"code", 500}}}});
    }
    sink.done();
    return true;
  });
}

void Server::Impl::handle_responses(const json& body, httplib::Response& res) {
  auto parsed = std::make_shared<ParsedResponsesRequest>(parse_responses_request(body, cfg.defaults, responses));
  GenerationRequest& r = parsed->gen;
  if (r.force_tool_call) r.assistant_prefix = forced_call_opener(cfg.output_format);
  std::string rendered;
  auto prompt = std::make_shared<std::vector<int32_t>>(engine.tokenize_prompt(r, &rendered));
  ResponsesInfo info;
  info.id = "resp_" + std::to_string(next_id++);
  info.created = now_s();
  info.model = cfg.model_id;
  info.format = cfg.output_format;
  info.starts_in_reasoning = chat_output::prompt_opens_reasoning(rendered, cfg.output_format);
  info.forced_tool_call = r.force_tool_call;
  info.previous_response_id = body.value("previous_response_id", json());
  auto builder = std::make_shared<ResponsesBuilder>(std::move(info));
  const std::string id = "resp_" + std::to_string(next_id - 1);
  // Kept for a later previous_response_id: the conversation and this answer.
  auto remember = [this, parsed, builder, id](const GenerationResult& g) {
    json conv = parsed->conversation;
    conv.push_back(builder->answer_message(g));
    responses.put(id, std::move(conv));
  };
  // Queued now, so a full queue is a 429 before any streaming starts.
  std::shared_ptr<Job> job = engine.submit(r, *prompt);
  if (!r.stream) {
    const GenerationResult g = engine.wait(job, [](const std::string&) { return true; });
    remember(g);
    send_json(res, builder->whole(g));
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [this, job, builder, remember](size_t, httplib::DataSink& sink) {
    if (!write_events(sink, builder->stream_start())) return false;
    try {
      const GenerationResult g = engine.wait(job, [&](const std::string& t) {
        return write_events(sink, builder->stream_text(t));
      });
      if (g.finish_reason == "cancelled") return false;
      remember(g);
      if (!write_events(sink, builder->stream_end(g))) return false;
    } catch (const std::exception& e) {
      write_events(sink, {{"error", {{"type", "error"}, {"message", e.what()}}}});
    }
    sink.done();
    return true;
  });
}

Server::Server(runtime::Session& session, ServerConfig cfg) : impl_(std::make_unique<Impl>(session, std::move(cfg))) {
  impl_->routes();
}

Server::~Server() { stop(); }

int Server::bind() {
  const ServerConfig& c = impl_->cfg;
  if (c.port < 0 || c.port > 65535) throw Error("--port: must be 0..65535 (got " + std::to_string(c.port) + ")");
  int port = c.port;
  if (c.port == 0) {
    port = impl_->http.bind_to_any_port(c.host);
  } else if (!impl_->http.bind_to_port(c.host, c.port)) {
    port = -1;
  }
  if (port <= 0)
    throw Error("serve: cannot listen on " + c.host + ":" + std::to_string(c.port) +
                " (address in use, or not an address of this machine)");
  impl_->port = port;
  widen_backlog(port);
  return port;
}

bool Server::run() { return impl_->http.listen_after_bind(); }

void Server::stop() { impl_->http.stop(); }

Engine& Server::engine() { return impl_->engine; }

}  // namespace sluice::server
