#pragma once
// The JSON tessera-shardbench writes (--json), built with nlohmann::json (Debian's
// nlohmann-json3-dev): fields in the order they are added, and a figure that is not finite
// written as null with its reason in a field beside it, "key": null, "key_reason": "...". JSON
// has no inf or nan (a bare `inf` once made the whole file unreadable), and a script that meets
// a null should be able to say why.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tessera::shardbench {

// JSON values that keep their fields' order (objects print as they were built).
using Json = nlohmann::ordered_json;

// An object's fields in the order they are added.
class JsonObject {
 public:
  // A finite value as a number; inf or nan as null beside "<key>_reason": `reason`, or where it
  // is empty one from the value.
  JsonObject& number(std::string_view key, double value, std::string_view reason = {});
  JsonObject& integer(std::string_view key, int64_t value);
  JsonObject& text(std::string_view key, std::string_view value);
  JsonObject& boolean(std::string_view key, bool value);
  // null and why: a figure this run has no value for.
  JsonObject& null(std::string_view key, std::string_view reason);
  // Any other value: an object, an array.
  JsonObject& value(std::string_view key, Json v);
  const Json& json() const { return fields_; }
  // {"a": 1, "b": 2} on one line, or with `indent` > 0 indented by that many spaces per level.
  std::string str(int indent = -1) const;

 private:
  Json fields_ = Json::object();
};

}  // namespace tessera::shardbench
