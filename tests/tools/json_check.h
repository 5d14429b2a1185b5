#pragma once
// A strict JSON checker for the tools tests (RFC 8259's grammar, no extensions): what a script's
// JSON parser would refuse, such as a bare inf or nan, a trailing comma, an unescaped quote.

#include <cctype>
#include <cstring>
#include <string>
#include <string_view>

namespace tessera::test {

class JsonCheck {
 public:
  // Empty when `text` is one JSON value (and blanks); else what is wrong and where.
  static std::string error_in(std::string_view text) {
    JsonCheck c(text);
    c.value();
    c.blanks();
    if (c.error_.empty() && c.at_ != text.size()) c.fail("text after the value");
    return c.error_;
  }

 private:
  explicit JsonCheck(std::string_view text) : s_(text) {}

  void fail(const std::string& what) {
    if (!error_.empty()) return;
    const size_t from = at_ < 30 ? 0 : at_ - 30;
    error_ = what + " at offset " + std::to_string(at_) + ": ..." +
             std::string(s_.substr(from, 60)) + "...";
    at_ = s_.size();
  }
  bool more() const { return error_.empty() && at_ < s_.size(); }
  char peek() const { return at_ < s_.size() ? s_[at_] : '\0'; }
  void blanks() {
    while (more() && std::strchr(" \t\r\n", s_[at_]) != nullptr) ++at_;
  }
  void expect(char ch) {
    blanks();
    if (peek() != ch) return fail(std::string("expected '") + ch + "'");
    ++at_;
  }
  bool comma() {
    blanks();
    if (!more() || peek() != ',') return false;
    ++at_;
    return true;
  }
  void word(std::string_view w) {
    if (s_.substr(at_, w.size()) != w) return fail("unknown word");
    at_ += w.size();
  }
  void digits() {
    if (!std::isdigit(static_cast<unsigned char>(peek()))) return fail("expected a digit");
    while (std::isdigit(static_cast<unsigned char>(peek()))) ++at_;
  }
  void number() {
    if (peek() == '-') ++at_;
    if (peek() == '0') {
      ++at_;
    } else {
      digits();
    }
    if (peek() == '.') {
      ++at_;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      ++at_;
      if (peek() == '+' || peek() == '-') ++at_;
      digits();
    }
  }
  void string() {
    expect('"');
    while (more() && peek() != '"') {
      const char ch = s_[at_++];
      if (static_cast<unsigned char>(ch) < 0x20) return fail("control character in a string");
      if (ch != '\\') continue;
      const char esc = peek();
      ++at_;
      if (esc == 'u') {
        for (int i = 0; i < 4; ++i, ++at_) {
          if (!std::isxdigit(static_cast<unsigned char>(peek()))) return fail("bad \\u escape");
        }
      } else if (std::strchr("\"\\/bfnrt", esc) == nullptr || esc == '\0') {
        return fail("bad escape");
      }
    }
    expect('"');
  }
  void value() {
    blanks();
    const char ch = peek();
    if (ch == '{') {
      ++at_;
      blanks();
      if (peek() == '}') {
        ++at_;
        return;
      }
      do {
        blanks();
        string();
        expect(':');
        value();
      } while (comma());
      expect('}');
    } else if (ch == '[') {
      ++at_;
      blanks();
      if (peek() == ']') {
        ++at_;
        return;
      }
      do {
        value();
      } while (comma());
      expect(']');
    } else if (ch == '"') {
      string();
    } else if (ch == 't') {
      word("true");
    } else if (ch == 'f') {
      word("false");
    } else if (ch == 'n') {
      word("null");
    } else if (ch == '-' || std::isdigit(static_cast<unsigned char>(ch))) {
      number();
    } else {
      fail("expected a value");
    }
  }

  std::string_view s_;
  size_t at_ = 0;
  std::string error_;
};

}  // namespace tessera::test
