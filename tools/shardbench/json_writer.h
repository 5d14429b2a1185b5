#pragma once
// The JSON tessera-shardbench writes (--json): strings escaped, and a figure that is not finite
// written as null with its reason in a field beside it, "key": null, "key_reason": "...". JSON
// has no inf or nan (a bare `inf` made the whole file unreadable), and a script that meets a
// null should be able to say why.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::shardbench {

// A quoted JSON string: quotes, backslashes and control characters escaped.
std::string json_string(std::string_view s);
// [a, b] of values written already; with `indent` > 0 one per line at that indent.
std::string json_array(const std::vector<std::string>& items, int indent = 0);
std::string json_strings(const std::vector<std::string>& items);

// An object's fields in the order they are added.
class JsonObject {
 public:
  // A finite value as a number (6 significant digits); inf or nan as null beside
  // "<key>_reason": `reason`, or where it is empty one from the value.
  JsonObject& number(std::string_view key, double value, std::string_view reason = {});
  JsonObject& integer(std::string_view key, int64_t value);
  JsonObject& text(std::string_view key, std::string_view value);
  JsonObject& boolean(std::string_view key, bool value);
  // null and why: a figure this run has no value for.
  JsonObject& null(std::string_view key, std::string_view reason);
  // A value written already (an object or an array).
  JsonObject& raw(std::string_view key, std::string json);
  // {"a": 1, "b": 2} on one line, or with `indent` > 0 one field per line at that indent.
  std::string str(int indent = 0) const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace tessera::shardbench
