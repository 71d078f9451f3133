#include "server/logprobs_json.h"

#include <string>

namespace sluice::server {
namespace {

using nlohmann::json;

// A piece as a JSON string: a piece that is only part of a UTF-8 character
// is not valid UTF-8 alone, so its bytes are replaced (U+FFFD) there; the
// exact bytes are in "bytes".
std::string piece_text(const std::string& piece) {
  return json::parse(json(piece).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

json entry(int32_t id, float lp, const tokenizer::Tokenizer& tok) {
  const std::string piece = tok.token_to_piece(id, false);
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return {{"token", piece_text(piece)}, {"logprob", lp}, {"bytes", std::move(bytes)}};
}

}  // namespace

json chat_logprobs(std::span<const runtime::TokenLogprob> lps, const tokenizer::Tokenizer& tok) {
  json content = json::array();
  for (const runtime::TokenLogprob& t : lps) {
    json e = entry(t.id, t.logprob, tok);
    json top = json::array();
    for (const auto& [id, lp] : t.top) top.push_back(entry(id, lp, tok));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

json completion_logprobs(std::span<const runtime::TokenLogprob> lps,
                         const tokenizer::Tokenizer& tok, size_t first_offset) {
  json tokens = json::array(), values = json::array(), tops = json::array(),
       offsets = json::array();
  size_t offset = first_offset;
  for (const runtime::TokenLogprob& t : lps) {
    const std::string piece = tok.token_to_piece(t.id, false);
    tokens.push_back(piece_text(piece));
    values.push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) top[piece_text(tok.token_to_piece(id, false))] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += piece.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace sluice::server
