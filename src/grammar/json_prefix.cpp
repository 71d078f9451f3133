#include "grammar/json_prefix.h"

namespace sluice::grammar {
namespace {

bool is_ws(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }
int hex_value(uint8_t c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool JsonPrefix::push(std::string_view bytes) {
  for (char ch : bytes)
    if (!push_byte(static_cast<uint8_t>(ch))) return false;
  return state_ != State::Failed;
}

bool JsonPrefix::begin_value(uint8_t c) {
  switch (c) {
    case '{':
    case '[':
      if (stack_.size() >= kMaxDepth) return fail();
      stack_.push_back(static_cast<char>(c));
      state_ = c == '{' ? State::KeyOrClose : State::ValueOrClose;
      return true;
    case '"':
      key_ = false;
      state_ = State::String;
      return true;
    case '-':
      state_ = State::Minus;
      return true;
    case '0':
      state_ = State::Zero;
      return true;
    case 't':
      literal_ = "rue";
      state_ = State::Literal;
      return true;
    case 'f':
      literal_ = "alse";
      state_ = State::Literal;
      return true;
    case 'n':
      literal_ = "ull";
      state_ = State::Literal;
      return true;
    default:
      if (c >= '1' && c <= '9') {
        state_ = State::Int;
        return true;
      }
      return fail();
  }
}

bool JsonPrefix::end_value() {
  state_ = stack_.empty() ? State::Done : State::AfterValue;
  return true;
}

bool JsonPrefix::close(uint8_t c) {
  if (stack_.empty() || stack_.back() != (c == '}' ? '{' : '[')) return fail();
  stack_.pop_back();
  return end_value();
}

bool JsonPrefix::end_hex() {
  const uint16_t u = hex_;
  if (low_pending_) {
    low_pending_ = false;
    if (u < 0xDC00 || u > 0xDFFF) return fail();  // a high surrogate needs its low half
  } else if (u >= 0xDC00 && u <= 0xDFFF) {
    return fail();  // a low surrogate alone
  } else if (u >= 0xD800 && u <= 0xDBFF) {
    low_pending_ = true;
    state_ = State::LowBackslash;
    return true;
  }
  state_ = State::String;
  return true;
}

bool JsonPrefix::string_byte(uint8_t c) {
  if (utf8_left_ > 0) {
    if (c < utf8_lo_ || c > utf8_hi_) return fail();
    --utf8_left_;
    utf8_lo_ = 0x80;
    utf8_hi_ = 0xBF;
    return true;
  }
  if (c == '"') {
    if (key_) {
      state_ = State::Colon;
      return true;
    }
    return end_value();
  }
  if (c == '\\') {
    state_ = State::Escape;
    return true;
  }
  if (c < 0x20) return fail();  // control characters must be escaped
  if (c < 0x80) return true;
  // A UTF-8 lead byte (RFC 3629 table 4): how many continuation bytes, and
  // the narrower range of the first one that rules out overlongs,
  // surrogates and code points above U+10FFFF.
  utf8_lo_ = 0x80;
  utf8_hi_ = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    utf8_left_ = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    utf8_left_ = 2;
    if (c == 0xE0) utf8_lo_ = 0xA0;
    if (c == 0xED) utf8_hi_ = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    utf8_left_ = 3;
    if (c == 0xF0) utf8_lo_ = 0x90;
    if (c == 0xF4) utf8_hi_ = 0x8F;
  } else {
    return fail();
  }
  return true;
}

bool JsonPrefix::push_byte(uint8_t c) {
  const bool in_string = state_ == State::String || state_ == State::Escape ||
                         state_ == State::Hex || state_ == State::LowBackslash ||
                         state_ == State::LowU;
  if (!in_string && is_ws(c)) {
    if (max_blank_run_ > 0 && ++blank_run_ > max_blank_run_) return fail();
  } else {
    blank_run_ = 0;
  }
  return step(c);
}

bool JsonPrefix::step(uint8_t c) {
  switch (state_) {
    case State::Failed:
      return false;
    case State::Done:
      return is_ws(c) ? true : fail();
    case State::Start:
      if (is_ws(c)) return true;
      if (c != '{') return fail();  // the top level must be an object
      return begin_value(c);
    case State::KeyOrClose:
      if (is_ws(c)) return true;
      if (c == '}') return close(c);
      [[fallthrough]];
    case State::Key:
      if (is_ws(c)) return true;
      if (c != '"') return fail();
      key_ = true;
      state_ = State::String;
      return true;
    case State::Colon:
      if (is_ws(c)) return true;
      if (c != ':') return fail();
      state_ = State::Value;
      return true;
    case State::ValueOrClose:
      if (is_ws(c)) return true;
      if (c == ']') return close(c);
      return begin_value(c);
    case State::Value:
      if (is_ws(c)) return true;
      return begin_value(c);
    case State::AfterValue:
      if (is_ws(c)) return true;
      if (c == '}' || c == ']') return close(c);
      if (c != ',') return fail();
      state_ = stack_.back() == '{' ? State::Key : State::Value;
      return true;
    case State::String:
      return string_byte(c);
    case State::Escape:
      switch (c) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
          state_ = State::String;
          return true;
        case 'u':
          state_ = State::Hex;
          hex_left_ = 4;
          hex_ = 0;
          return true;
        default:
          return fail();
      }
    case State::Hex: {
      const int v = hex_value(c);
      if (v < 0) return fail();
      hex_ = static_cast<uint16_t>(hex_ * 16 + v);
      return --hex_left_ == 0 ? end_hex() : true;
    }
    case State::LowBackslash:
      if (c != '\\') return fail();
      state_ = State::LowU;
      return true;
    case State::LowU:
      if (c != 'u') return fail();
      state_ = State::Hex;
      hex_left_ = 4;
      hex_ = 0;
      return true;
    case State::Literal:
      if (c != static_cast<uint8_t>(*literal_)) return fail();
      if (*++literal_ == '\0') return end_value();
      return true;
    case State::Minus:
      if (c == '0') {
        state_ = State::Zero;
        return true;
      }
      if (c >= '1' && c <= '9') {
        state_ = State::Int;
        return true;
      }
      return fail();
    case State::Int:
      if (is_digit(c)) return true;
      [[fallthrough]];
    case State::Zero:
      if (c == '.') {
        state_ = State::Dot;
        return true;
      }
      if (c == 'e' || c == 'E') {
        state_ = State::Exp;
        return true;
      }
      end_value();  // the number ended at c (a leading 0 takes no digits after it)
      return step(c);
    case State::Dot:
      if (!is_digit(c)) return fail();
      state_ = State::Frac;
      return true;
    case State::Frac:
      if (is_digit(c)) return true;
      if (c == 'e' || c == 'E') {
        state_ = State::Exp;
        return true;
      }
      end_value();
      return step(c);
    case State::Exp:
      if (c == '+' || c == '-') {
        state_ = State::ExpSign;
        return true;
      }
      [[fallthrough]];
    case State::ExpSign:
      if (!is_digit(c)) return fail();
      state_ = State::ExpInt;
      return true;
    case State::ExpInt:
      if (is_digit(c)) return true;
      end_value();
      return step(c);
  }
  return fail();
}

}  // namespace sluice::grammar
