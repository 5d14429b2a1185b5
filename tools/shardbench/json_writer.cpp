#include "tools/shardbench/json_writer.h"

#include <cmath>
#include <utility>

namespace tessera::shardbench {

JsonObject& JsonObject::number(std::string_view key, double value, std::string_view reason) {
  if (std::isfinite(value)) return this->value(key, value);
  if (!reason.empty()) return null(key, reason);
  return null(key, std::isnan(value)
                       ? "not a number (nan): zero over zero, or over a figure not measured"
                       : "infinite: a quotient over a time or count of 0 (a timing shorter than "
                         "the clock's tick)");
}

JsonObject& JsonObject::integer(std::string_view key, int64_t value) {
  return this->value(key, value);
}

JsonObject& JsonObject::text(std::string_view key, std::string_view value) {
  return this->value(key, std::string(value));
}

JsonObject& JsonObject::boolean(std::string_view key, bool value) {
  return this->value(key, value);
}

JsonObject& JsonObject::null(std::string_view key, std::string_view reason) {
  value(key, nullptr);
  return text(std::string(key) + "_reason", reason);
}

JsonObject& JsonObject::value(std::string_view key, Json v) {
  fields_[std::string(key)] = std::move(v);
  return *this;
}

// Invalid UTF-8 in a name (a plan file's path) is replaced, not thrown on.
std::string JsonObject::str(int indent) const {
  return fields_.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace tessera::shardbench
