// A small JSON reader (RFC 8259 values: objects, arrays, strings, numbers, true, false, null)
// for the model files Spindle reads back, such as the XGBoost trees of the GNN cost models.
// Input is untrusted: malformed text raises FormatError naming `where` and the byte offset,
// nesting deeper than kMaxDepth is refused (no stack overflow), and nothing is read past the
// end. Numbers are kept as doubles; strings decode the JSON escapes (\uXXXX to UTF-8).
//
//   const json::Value v = json::parse(text, "model file");
//   const json::Value& trees = v.at("learner", "model file").at("trees", "model file");
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spindle/support/error.hpp"

namespace spindle::json {

class Value {
 public:
  enum class Kind { null, boolean, number, string, array, object };

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  double number() const { return number_; }
  bool boolean() const { return boolean_; }
  const std::string& string() const { return string_; }
  const std::vector<Value>& items() const { return items_; }
  const std::vector<std::pair<std::string, Value>>& members() const { return members_; }

  // The member `key` of an object, or nullptr (also when this is not an object).
  const Value* find(std::string_view key) const {
    for (const auto& [k, v] : members_)
      if (k == key) return &v;
    return nullptr;
  }
  // The member `key`; FormatError naming `where` when it is missing.
  const Value& at(std::string_view key, const std::string& where) const {
    const Value* v = find(key);
    SPINDLE_CHECK(v != nullptr, FormatError, where, ": expected a member \"", std::string(key), "\"");
    return *v;
  }

 private:
  friend class Parser;
  Kind kind_ = Kind::null;
  bool boolean_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Value> items_;
  std::vector<std::pair<std::string, Value>> members_;
};

class Parser {
 public:
  static constexpr int kMaxDepth = 128;

  Parser(std::string_view text, std::string where) : s_(text), where_(std::move(where)) {}

  Value parse_document() {
    Value v = value(0);
    skip_space();
    if (p_ != s_.size()) fail("text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(message(where_, ": malformed JSON at byte ", p_, ": ", what));
  }
  void skip_space() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
  }
  char peek() {
    skip_space();
    if (p_ >= s_.size()) fail("unexpected end");
    return s_[p_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++p_;
  }
  void literal(std::string_view word) {
    if (s_.substr(p_, word.size()) != word) fail("unknown literal");
    p_ += word.size();
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    Value v;
    const char c = peek();
    if (c == '{') {
      v.kind_ = Value::Kind::object;
      ++p_;
      if (peek() == '}') return ++p_, v;
      for (;;) {
        if (peek() != '"') fail("expected a member name");
        std::string key = string_literal();
        expect(':');
        Value member = value(depth + 1);
        v.members_.emplace_back(std::move(key), std::move(member));
        if (peek() == ',') {
          ++p_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind_ = Value::Kind::array;
      ++p_;
      if (peek() == ']') return ++p_, v;
      for (;;) {
        v.items_.push_back(value(depth + 1));
        if (peek() == ',') {
          ++p_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind_ = Value::Kind::string;
      v.string_ = string_literal();
      return v;
    }
    if (c == 't' || c == 'f') {
      literal(c == 't' ? "true" : "false");
      v.kind_ = Value::Kind::boolean;
      v.boolean_ = c == 't';
      return v;
    }
    if (c == 'n') {
      literal("null");
      return v;
    }
    v.kind_ = Value::Kind::number;
    v.number_ = number();
    return v;
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, converted by strtod on a bounded copy.
  double number() {
    const std::size_t start = p_;
    auto digits = [&] {
      const std::size_t from = p_;
      while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') ++p_;
      return p_ - from;
    };
    if (p_ < s_.size() && s_[p_] == '-') ++p_;
    if (digits() == 0) fail("expected a value");
    if (p_ < s_.size() && s_[p_] == '.') {
      ++p_;
      if (digits() == 0) fail("expected digits after '.'");
    }
    if (p_ < s_.size() && (s_[p_] == 'e' || s_[p_] == 'E')) {
      ++p_;
      if (p_ < s_.size() && (s_[p_] == '+' || s_[p_] == '-')) ++p_;
      if (digits() == 0) fail("expected an exponent");
    }
    const std::string text(s_.substr(start, p_ - start));
    return std::strtod(text.c_str(), nullptr);
  }

  static void put_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  std::uint32_t hex4() {
    if (s_.size() - p_ < 4) fail("a \\u escape is cut short");
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i, ++p_) {
      const char h = s_[p_];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<std::uint32_t>(h - 'A' + 10);
      else fail("a \\u escape needs four hex digits");
    }
    return v;
  }
  std::string string_literal() {
    ++p_;  // the opening quote
    std::string out;
    for (;;) {
      if (p_ >= s_.size()) fail("a string is not closed");
      const char c = s_[p_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= s_.size()) fail("a string is not closed");
      const char e = s_[p_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
            if (s_.substr(p_, 2) != "\\u") fail("a high surrogate without its low half");
            p_ += 2;
            const std::uint32_t lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("a high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("a low surrogate without its high half");
          }
          put_utf8(out, cp);
          break;
        }
        default: fail("an unknown escape in a string");
      }
    }
  }

  std::string_view s_;
  std::string where_;
  std::size_t p_ = 0;
};

inline Value parse(std::string_view text, const std::string& where) { return Parser(text, where).parse_document(); }

}  // namespace spindle::json
