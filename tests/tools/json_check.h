#pragma once
// The tools tests' JSON check: what a script's JSON parser would refuse (a bare inf or nan, a
// trailing comma, an unescaped quote), by nlohmann::json's parser, which follows RFC 8259
// strictly (no comments, no extensions).

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tessera::test {

struct JsonCheck {
  // Empty when `text` is one JSON value (and blanks); else the parser's message, with where.
  static std::string error_in(std::string_view text) {
    try {
      [[maybe_unused]] const nlohmann::json parsed = nlohmann::json::parse(text);
      return {};
    } catch (const nlohmann::json::parse_error& e) {
      return e.what();
    }
  }
};

}  // namespace tessera::test
