// PCRE2-backed pre-tokenizer: the per-family regex lists and the split loop.
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>
#include <utility>

#include "util/error.h"

namespace sluice::tokenizer {
namespace {

// Building blocks shared by several families. Contractions are spelled with
// explicit case classes (llama.cpp's adaptation of `(?i:'s|'t|...)`).
constexpr std::string_view kContractions = R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))re";

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
// (llama.cpp omits the trailing |\s+; an unmatched whitespace becomes a gap
// piece of its own, which is the same split.)
constexpr std::string_view kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";

// deepseek-llm's letter class: the Unicode cased letters (Lu/Ll/Lt) as listed
// in its tokenizer.json, written as code points.
constexpr std::string_view kDeepseekCasedLetters =
    R"re(\x{0041}-\x{005A}\x{0061}-\x{007A}\x{00B5}\x{00C0}-\x{00D6}\x{00D8}-\x{00F6}\x{00F8}-\x{01BA})re"
    R"re(\x{01BC}-\x{01BF}\x{01C4}-\x{0293}\x{0295}-\x{02AF}\x{0370}-\x{0373}\x{0376}-\x{0377}\x{037B}-\x{037D})re"
    R"re(\x{037F}\x{0386}\x{0388}-\x{038A}\x{038C}\x{038E}-\x{03A1}\x{03A3}-\x{03F5})re"
    R"re(\x{03F7}-\x{0481}\x{048A}-\x{052F}\x{0531}-\x{0556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD})re"
    R"re(\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15})re"
    R"re(\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B})re"
    R"re(\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})re"
    R"re(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC})re"
    R"re(\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})re"
    R"re(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})re"
    R"re(\x{2145}-\x{2149}\x{214E}\x{2183}-\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE})re"
    R"re(\x{2CF2}-\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E})re"
    R"re(\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})re"
    R"re(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943})re";

std::string llama3_like(std::string_view digits) {
  return std::string(kContractions) + R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|)re" + std::string(digits) +
         R"re(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
}

// Kimi-K2: llama.cpp runs a hand-written splitter rather than the tiktoken
// regex. Its behaviour, written as a regex: Han runs; words of non-Han letters
// (no case-change split, \p{M} not part of a word) with an optional leading
// non-letter/digit char and optional contraction; 1-3 digits; punctuation
// runs; whitespace as in llama3. Han = the CJK ideograph blocks llama.cpp uses.
constexpr std::string_view kHan =
    R"re([\x{3400}-\x{4DBF}\x{4E00}-\x{9FFF}\x{F900}-\x{FAFF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2EBEF}\x{2F800}-\x{2FA1F}])re";

std::string kimi_k2() {
  const std::string han(kHan);
  return han + "+|" + R"re([^\r\n\p{L}\p{N}]?(?:(?!)re" + han + R"re()\p{L})+)re" + std::string(kContractions) +
         R"re(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
}

// gpt-4o / o200k as llama.cpp adapts it: "upper" = a letter that is not a-z,
// "lower" = a letter that is not A-Z (so non-ASCII letters are both), and \p{M}
// is not a letter.
std::string gpt4o_like(std::string_view digits, std::string_view punct_tail, bool contractions) {
  const std::string upper = R"re(((?=[\p{L}])([^a-z])))re";
  const std::string lower = R"re(((?=[\p{L}])([^A-Z])))re";
  const std::string c = contractions ? std::string(kContractions) + "?" : "";
  return R"re([^\r\n\p{L}\p{N}]?)re" + upper + "*" + lower + "+" + c + R"re(|[^\r\n\p{L}\p{N}]?)re" + upper + "+" +
         lower + "*" + c + "|" + std::string(digits) + R"re(| ?[^\s\p{L}\p{N}]+)re" + std::string(punct_tail) +
         R"re(|\s*[\r\n]+|\s+(?!\S)|\s+)re";
}

std::vector<std::string> regexes_for(PreFamily family) {
  switch (family) {
    case PreFamily::kGpt2:
      return {std::string(kGpt2)};
    case PreFamily::kLlama3:
    case PreFamily::kDbrx:
    case PreFamily::kChatGlm4:
      return {llama3_like(R"re(\p{N}{1,3})re")};
    case PreFamily::kQwen2:
      return {llama3_like(R"re(\p{N})re")};
    case PreFamily::kQwen35:
      return {std::string(kContractions) +
              R"re(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
    case PreFamily::kDeepseekLlm:
      return {
          R"re([\r\n])re",
          R"re(\s?[)re" + std::string(kDeepseekCasedLetters) + R"re(]+)re",
          R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re",
          R"re(\s+$)re",
          R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re",
          R"re(\p{N}+)re",
      };
    case PreFamily::kDeepseekCoder:
      return {
          R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re", R"re(\p{N})re",
      };
    case PreFamily::kDeepseekV3:
      return {
          R"re(\p{N}{1,3})re",
          R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
          R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
      };
    case PreFamily::kFalcon:
      return {R"re([\p{P}\$\+<=>\^~\|`]+)re", std::string(kGpt2), R"re([0-9][0-9][0-9])re"};
    case PreFamily::kStarcoder:
      return {R"re(\p{N})re", std::string(kGpt2)};
    case PreFamily::kGpt4o:
      return {gpt4o_like(R"re(\p{N}{1,3})re", R"re([\r\n/]*)re", true)};
    case PreFamily::kTekken:
      return {gpt4o_like(R"re(\p{N})re", R"re([\r\n/]*)re", false)};
    case PreFamily::kKimiK2:
      return {kimi_k2()};
    case PreFamily::kPoro:
      return {R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)re"};
    case PreFamily::kViking:
      return {R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)re", R"re(\p{N})re"};
    case PreFamily::kBailingMoe:
      return {R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re"};
    case PreFamily::kSeedCoder:
      return {std::string(kContractions) +
              R"re(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
    case PreFamily::kGemma4:
      return {R"re([^\n]+|[\n]+)re"};
    case PreFamily::kDefault:
      break;
  }
  return {R"re([\p{P}\$\+<=>\^~\|]+)re", std::string(kGpt2), R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"};
}

struct NameEntry {
  std::string_view name;
  PreInfo info;
};

PreInfo fam(PreFamily f) { return PreInfo{f, true, false, false, false}; }

}  // namespace

PreInfo lookup_pre(std::string_view name) {
  const PreInfo llama3{PreFamily::kLlama3, true, true, true, false};
  const NameEntry table[] = {
      {"default", fam(PreFamily::kDefault)},
      {"llama3", llama3}, {"llama-v3", llama3}, {"llama-bpe", llama3}, {"falcon3", llama3},
      {"falcon-h1", llama3}, {"pixtral", llama3}, {"midm-2.0", llama3}, {"lfm2", llama3},
      {"dbrx", fam(PreFamily::kDbrx)}, {"smaug-bpe", fam(PreFamily::kDbrx)},
      {"deepseek-llm", fam(PreFamily::kDeepseekLlm)},
      {"deepseek-coder", fam(PreFamily::kDeepseekCoder)},
      {"deepseek-v3", fam(PreFamily::kDeepseekV3)}, {"hunyuan-dense", fam(PreFamily::kDeepseekV3)},
      {"joyai-llm", fam(PreFamily::kDeepseekV3)},
      {"falcon", fam(PreFamily::kFalcon)},
      {"starcoder", fam(PreFamily::kStarcoder)}, {"refact", fam(PreFamily::kStarcoder)},
      {"command-r", fam(PreFamily::kStarcoder)}, {"smollm", fam(PreFamily::kStarcoder)},
      {"codeshell", fam(PreFamily::kStarcoder)}, {"exaone", fam(PreFamily::kStarcoder)},
      {"minerva-7b", fam(PreFamily::kStarcoder)},
      {"gpt-2", fam(PreFamily::kGpt2)}, {"phi-2", fam(PreFamily::kGpt2)}, {"jina-es", fam(PreFamily::kGpt2)},
      {"jina-de", fam(PreFamily::kGpt2)}, {"gigachat", fam(PreFamily::kGpt2)},
      {"jina-v2-es", fam(PreFamily::kGpt2)}, {"jina-v2-de", fam(PreFamily::kGpt2)},
      {"a.x-4.0", fam(PreFamily::kGpt2)}, {"mellum", fam(PreFamily::kGpt2)}, {"mpt", fam(PreFamily::kGpt2)},
      {"olmo", fam(PreFamily::kGpt2)}, {"jais", fam(PreFamily::kGpt2)}, {"trillion", fam(PreFamily::kGpt2)},
      {"exaone4", fam(PreFamily::kGpt2)}, {"granite-docling", fam(PreFamily::kGpt2)},
      {"qwen2", fam(PreFamily::kQwen2)}, {"deepseek-r1-qwen", fam(PreFamily::kQwen2)},
      {"kormo", fam(PreFamily::kQwen2)}, {"megrez", fam(PreFamily::kQwen2)}, {"stablelm2", fam(PreFamily::kQwen2)},
      {"hunyuan", fam(PreFamily::kQwen2)}, {"solar-open", fam(PreFamily::kQwen2)}, {"grok-2", fam(PreFamily::kQwen2)},
      {"qwen35", fam(PreFamily::kQwen35)},
      {"glm4", PreInfo{PreFamily::kChatGlm4, true, false, false, true}},
      {"chatglm-bpe", PreInfo{PreFamily::kChatGlm4, true, false, false, true}},
      {"gpt-4o", fam(PreFamily::kGpt4o)}, {"llama4", fam(PreFamily::kGpt4o)},
      {"minimax-m2", fam(PreFamily::kGpt4o)},
      {"tekken", PreInfo{PreFamily::kTekken, true, true, true, false}},
      {"kimi-k2", fam(PreFamily::kKimiK2)},
      {"poro-chat", fam(PreFamily::kPoro)}, {"bloom", fam(PreFamily::kPoro)}, {"gpt3-finnish", fam(PreFamily::kPoro)},
      {"viking", fam(PreFamily::kViking)},
      {"bailingmoe", fam(PreFamily::kBailingMoe)}, {"bailingmoe2", fam(PreFamily::kBailingMoe)},
      {"llada-moe", fam(PreFamily::kBailingMoe)},
      {"seed-coder", fam(PreFamily::kSeedCoder)},
      {"gemma4", PreInfo{PreFamily::kGemma4, true, false, true, false, true}},
  };
  for (const auto& e : table) {
    if (e.name == name) return e.info;
  }
  return PreInfo{};  // missing or unknown: llama.cpp's default splitter
}

// One compiled pattern. Owns the pcre2_code.
struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(PreFamily family) {
  for (const std::string& pattern : regexes_for(family)) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    // DOLLAR_ENDONLY: `$` means end of piece (as std::regex), not "before a final \n".
    const uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), opts, &err,
                                     &err_off, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      throw Error("tokenizer: cannot compile pre-tokenizer regex at offset " + std::to_string(err_off) + ": " +
                  reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional: the interpreter is the fallback
    auto rx = std::make_unique<Regex>();
    rx->code = code;
    regexes_.push_back(std::move(rx));
  }
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  for (const auto& rx : regexes_) {
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(rx->code, nullptr), &pcre2_match_data_free);
    if (!md) throw Error("tokenizer: out of memory creating regex match data");
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t pos = 0;   // where the next search starts
      size_t kept = 0;  // end of the last emitted piece
      while (pos < piece.size()) {
        // NOTEMPTY: every family's regex consumes at least one char; an empty
        // match would only stall the loop.
        int rc = pcre2_match(rx->code, subject, piece.size(), pos, PCRE2_NOTEMPTY, md.get(), nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          rc = pcre2_match(rx->code, subject, piece.size(), pos, PCRE2_NOTEMPTY | PCRE2_NO_JIT, md.get(), nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof msg);
          throw Error("tokenizer: pre-tokenizer regex failed on a " + std::to_string(piece.size()) +
                      "-byte piece: " + reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t start = ov[0], end = ov[1];
        if (start > kept) next.push_back(piece.substr(kept, start - kept));
        next.push_back(piece.substr(start, end - start));
        kept = end;
        pos = end;
      }
      if (kept < piece.size()) next.push_back(piece.substr(kept));
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace sluice::tokenizer
