// `sluice tokenize`: show how a model's tokenizer splits a text (ids and
// pieces), or decode a list of ids back to text. Reads only GGUF metadata.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_ref.h"
#include "cli/id_list.h"
#include "cli/stdout_output.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace sluice::cli {
namespace {

struct TokenizeOptions {
  std::string model_path;
  std::string prompt;
  std::string decode_ids;
  bool ids_only = false;
  bool no_bos = false;
  bool parse_special = false;
};

// Piece bytes made visible: control characters, and bytes that are not part
// of a complete UTF-8 character inside this piece (a character split across
// tokens), are written as \n, \t, \r or \xNN.
std::string visible(const std::string& piece) {
  std::string out;
  auto hex = [&](unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
    out += buf;
  };
  for (size_t i = 0; i < piece.size();) {
    const auto c = static_cast<unsigned char>(piece[i]);
    if (c == '\n' || c == '\t' || c == '\r') {
      out += c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\r";
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7F) {
      hex(c);
      ++i;
      continue;
    }
    const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool complete = len > 0 && i + len <= piece.size();
    for (size_t k = 1; complete && k < len; ++k) complete = (static_cast<unsigned char>(piece[i + k]) & 0xC0) == 0x80;
    if (complete) {
      out.append(piece, i, len);
      i += len;
    } else {
      hex(c);
      ++i;
    }
  }
  return out;
}

void run_tokenize(const TokenizeOptions& o) {
  const bool have_prompt = !o.prompt.empty();
  const bool have_decode = !o.decode_ids.empty();
  if (have_prompt == have_decode) throw Error("tokenize: give exactly one of -p TEXT or --decode IDS");

  const gguf::GgufModel model = gguf::GgufModel::open(o.model_path);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(model.metadata());
  if (!tok.pre_known()) {
    std::fprintf(stderr, "sluice: warning: %s: unrecognised tokenizer.ggml.pre '%s', using the default splitter\n",
                 o.model_path.c_str(), tok.pre_name().c_str());
  }

  if (have_decode) {
    const std::vector<int32_t> ids = parse_id_list(o.decode_ids, "--decode", tok.n_vocab());
    const std::string text = tok.decode(ids);
    out(text);
    out("\n");
    return;
  }

  const std::vector<int32_t> ids = tok.encode(o.prompt, /*add_special=*/!o.no_bos, o.parse_special);
  if (o.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) outf("%s%d", i ? " " : "", ids[i]);
    outf("\n");
    return;
  }
  for (int32_t id : ids) outf("%6d -> '%s'\n", id, visible(tok.token_to_piece(id)).c_str());
  outf("%zu tokens (%s vocab, pre '%s')\n", ids.size(), tok.model_name().c_str(), tok.pre_name().c_str());
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "show the token ids and pieces of a text, or decode ids");
  cmd->add_option("-m,--model", opts->model_path, "GGUF model (or vocab-only GGUF)")
      ->required()
      ->transform(model_reference("-m"));
  cmd->add_option("-p,--prompt", opts->prompt, "text to tokenize");
  cmd->add_option("--decode", opts->decode_ids, "token ids to decode, comma separated (e.g. 1,403,407)");
  cmd->add_flag("--ids-only", opts->ids_only, "print only the ids, space separated");
  cmd->add_flag("--no-bos", opts->no_bos, "do not add the BOS/EOS tokens the vocab asks for");
  cmd->add_flag("--parse-special", opts->parse_special, "turn special-token text (e.g. <|im_end|>) into that token");
  cmd->callback([opts] { run_tokenize(*opts); });
}

}  // namespace sluice::cli
