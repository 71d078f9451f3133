// `sluice serve`: an OpenAI-compatible HTTP server over one Session.
//
// Endpoints: POST /v1/completions, POST /v1/chat/completions (501 without a
// ChatRenderer), GET /v1/models, GET /health, GET /metrics (Prometheus),
// POST /tokenize, POST /detokenize, GET /slots, POST /slots/{id}?action=save|restore
// ({"filename": NAME}, a plain name under --slot-save-path). Request bodies as llama-server accepts
// (server/request.h), bounded by server/limits.h; errors are JSON
// {"error":{"message","type","code"}} with 400 (bad request), 401 (API key),
// 404, 413 (body over max_body_bytes), 414 (URI), 415 (body encoding), 429
// (every slot busy and max_queue requests waiting), 431 (headers), 500, 501.
// Generations run concurrently in the model's slots (Engine, Scheduler). Each connection serves one request.
// Streaming answers are Server-Sent Events: `data: {json}\n\n` chunks, then
// `data: [DONE]\n\n`; a client that goes away stops its generation. Chat
// streams split the answer as the non-streaming message does: deltas of
// reasoning_content and content, and each tool call once complete.
//
// The HTTP layer (cpp-httplib) stays inside server.cpp (request_head.h
// bounds the head on the raw socket before cpp-httplib reads it).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/session.h"
#include "chat_output/chat_output.h"
#include "server/chat_renderer.h"
#include "server/engine.h"
#include "server/limits.h"
#include "server/request.h"

namespace sluice::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (bind() returns it)
  std::string api_key;           // non-empty: every endpoint but /health needs "Authorization: Bearer KEY" (or "x-api-key: KEY")
  std::string model_id;          // the id /v1/models lists and responses carry
  GenerationDefaults defaults;   // sampling and max_tokens when a request omits them
  size_t max_body_bytes = kDefaultMaxBodyBytes;  // 413 above (any framing; decompressed size)
  int http_threads = 8;          // connections served at once; more wait in the accept queue
  int max_queue = Engine::kDefaultMaxQueue;  // requests waiting beyond the model's slots (--max-queue); more: 429
  ChatRenderer chat_renderer;    // empty: /v1/chat/completions answers 501
  // How a chat answer is split into content, reasoning_content and tool_calls,
  // streamed (as deltas) or not (chat_output/chat_output.h, server/response.h).
  chat_output::OutputFormat output_format = chat_output::OutputFormat::Plain;
  // --slot-save-path: the directory POST /slots/{id}?action=save|restore
  // writes and reads slot files in (runtime/slot_file.h); empty: those
  // actions answer 501 naming the flag.
  std::string slot_save_path;
};

class Server {
 public:
  // `session` must outlive the Server; the Server is its only user.
  Server(runtime::Session& session, ServerConfig cfg);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port (the chosen one for port 0).
  // Throws Error naming host:port when it cannot.
  int bind();
  // Serves until stop(); bind() first. Returns false when listening failed.
  bool run();
  // Makes run() return; safe from any thread.
  void stop();

  Engine& engine();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::server
