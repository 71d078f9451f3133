// An incremental validator for prefixes of one JSON object (RFC 8259): the
// text is optional whitespace, one object `{...}`, optional whitespace.
//
// push() feeds bytes and says whether what was fed so far can still be
// extended to a valid document; complete() says whether it already is one
// (nothing but whitespace may follow). It is a pushdown state machine over
// bytes: strings are checked as UTF-8 (RFC 3629 ranges, no overlongs or
// surrogates), escapes including \u with surrogate pairs, numbers by the
// RFC grammar (no leading zeros, digits after '.' and 'e'), and the literals
// true/false/null. Numbers of any size are accepted (the grammar has no
// limit). Nesting deeper than kMaxDepth is refused, so the stack is bounded.
//
// max_blank_run > 0 additionally refuses more than that many whitespace
// bytes in a row outside strings: still valid JSON, but a sampler can no
// longer pad forever (small models happily emit newlines until max_tokens).
//
// The state is a small value: copy it to try a continuation without
// committing (the sampler constraint does exactly that per candidate token).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::grammar {

class JsonPrefix {
 public:
  static constexpr size_t kMaxDepth = 256;

  explicit JsonPrefix(size_t max_blank_run = 0) : max_blank_run_(max_blank_run) {}

  // Feeds `bytes`. False once the text can no longer be a prefix of a valid
  // object; the validator then stays failed (every later push is false).
  bool push(std::string_view bytes);
  bool push_byte(uint8_t c);
  // The text so far is one whole object (plus whitespace).
  bool complete() const { return state_ == State::Done; }
  bool failed() const { return state_ == State::Failed; }

 private:
  enum class State : uint8_t {
    Start,         // before the top-level '{'
    KeyOrClose,    // after '{': a key or '}'
    Key,           // after ',' in an object: a key
    Colon,         // after a key
    Value,         // a value must come (after ':' or ',' in an array)
    ValueOrClose,  // after '[': a value or ']'
    AfterValue,    // ',' or the closer of the innermost container
    String,        // inside a string (key_ says whether it is a key)
    Escape,        // after a backslash
    Hex,           // inside \uXXXX (hex_left digits to go)
    LowBackslash,  // after a high surrogate: '\' of its low half must come
    LowU,          // ... then 'u'
    Literal,       // inside true/false/null
    Minus,         // number: after '-'
    Zero,          // number: the integer part is "0"
    Int,           // number: integer digits
    Dot,           // number: after '.'
    Frac,          // number: fraction digits
    Exp,           // number: after 'e'/'E'
    ExpSign,       // number: after the exponent's sign
    ExpInt,        // number: exponent digits
    Done,          // the object is complete: whitespace only
    Failed,
  };

  bool step(uint8_t c);
  bool fail() {
    state_ = State::Failed;
    return false;
  }
  bool begin_value(uint8_t c);
  bool end_value();       // a value just ended: AfterValue (or Done at depth 0)
  bool close(uint8_t c);  // '}' or ']' in AfterValue/KeyOrClose/ValueOrClose
  bool string_byte(uint8_t c);
  bool end_hex();

  State state_ = State::Start;
  bool key_ = false;                         // the open string is an object key
  uint8_t hex_left_ = 0;                     // \u digits still to come
  uint16_t hex_ = 0;                         // the \u code unit so far
  bool low_pending_ = false;                 // the \u being read must be a low surrogate
  uint8_t utf8_left_ = 0;                    // continuation bytes still to come
  uint8_t utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // the range of the next continuation byte
  const char* literal_ = nullptr;            // the rest of the literal still to match
  size_t max_blank_run_ = 0;                 // 0: any
  size_t blank_run_ = 0;                     // whitespace bytes in a row outside strings
  std::string stack_;                        // '{' or '[' per open container
};

}  // namespace sluice::grammar
