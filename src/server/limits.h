// Every bound `sluice serve` puts on a request, in one place (the README's
// serve section lists them with these values). A request over one is
// refused before anything is allocated by it or run on it, with a JSON error
// {"error": {"message", "type", "code"}} whose message names the field or
// header and the limit.
//
// Which status each limit answers:
//   413  body over max_body_bytes (--max-body-mb; any framing, and the
//        decompressed size of a gzip/brotli body)
//   414  request URI over kMaxUriBytes (cpp-httplib's own check)
//   431  request line + headers over kMaxHeadBytes, or over kMaxHeaderCount headers
//   400  a header line over kMaxHeaderLineBytes (cpp-httplib's own check), and
//        every field limit below
//   401  a wrong or missing API key
#pragma once

#include <cstddef>

namespace sluice::server {

// ---- HTTP --------------------------------------------------------------------

// The default of --max-body-mb (its range is 1..4096 MiB).
inline constexpr size_t kDefaultMaxBodyBytes = size_t{8} << 20;
// The request line and all headers together; checked before cpp-httplib
// reads them (it would keep any number of headers).
inline constexpr size_t kMaxHeadBytes = size_t{32} << 10;
inline constexpr size_t kMaxHeaderCount = 100;
// Compiled into Debian's cpp-httplib 0.11 (CPPHTTPLIB_REQUEST_URI_MAX_LENGTH,
// CPPHTTPLIB_HEADER_MAX_LENGTH); server.cpp asserts they agree.
inline constexpr size_t kMaxUriBytes = 8192;
inline constexpr size_t kMaxHeaderLineBytes = 8192;
// A client may pause at most cpp-httplib's read timeout (5 s) between bytes
// of the head, as of the rest of the request.

// ---- JSON bodies -------------------------------------------------------------

// Nesting of the whole body ({"a": [1]} is 2 deep); it also bounds
// response_format's schema (whose own size limits are in
// grammar/json_schema.h: kMaxNodes, kMaxChoiceBytes). Deeper bodies are
// refused while parsing, so nothing recursive ever sees one.
inline constexpr int kMaxJsonDepth = 64;

// ---- generation fields -------------------------------------------------------

inline constexpr size_t kMaxMessages = 4096;                   // chat `messages`
inline constexpr size_t kMaxStopStrings = 16;                  // `stop` (OpenAI allows 4)
inline constexpr size_t kMaxStopStringBytes = 256;             // each `stop` string
inline constexpr size_t kMaxTools = 128;                       // `tools`
inline constexpr int kMaxChoices = 16;                         // `n` (and at most --parallel)
inline constexpr size_t kMaxToolJsonBytes = size_t{64} << 10;  // each tool, as compact JSON
// `max_tokens` / `n_predict` / `max_completion_tokens` may not exceed the
// model's context (-1: until the context is full); `n` must be 1; prompt token
// ids must be in [0, n_vocab). Those limits come from the model, not from here.

}  // namespace sluice::server
