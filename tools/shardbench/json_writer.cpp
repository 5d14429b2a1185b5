#include "tools/shardbench/json_writer.h"

#include <fmt/format.h>

#include <cmath>

namespace tessera::shardbench {

namespace {

std::string joined(const std::vector<std::string>& items, int indent, char open, char close) {
  if (items.empty()) return {open, close};
  const std::string pad(static_cast<size_t>(std::max(indent, 0)), ' ');
  const std::string outer(static_cast<size_t>(std::max(indent - 2, 0)), ' ');
  std::string s(1, open);
  for (size_t i = 0; i < items.size(); ++i) {
    s += indent > 0 ? "\n" + pad : (i == 0 ? "" : " ");
    s += items[i];
    if (i + 1 < items.size()) s += ',';
  }
  if (indent > 0) s += "\n" + outer;
  s += close;
  return s;
}

}  // namespace

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(ch)));
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string json_array(const std::vector<std::string>& items, int indent) {
  return joined(items, indent, '[', ']');
}

std::string json_strings(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const std::string& item : items) quoted.push_back(json_string(item));
  return json_array(quoted);
}

JsonObject& JsonObject::number(std::string_view key, double value, std::string_view reason) {
  if (std::isfinite(value)) return raw(key, fmt::format("{:.6g}", value));
  if (!reason.empty()) return null(key, reason);
  return null(key, std::isnan(value)
                       ? "not a number (nan): zero over zero, or over a figure not measured"
                       : "infinite: a quotient over a time or count of 0 (a timing shorter than "
                         "the clock's tick)");
}

JsonObject& JsonObject::integer(std::string_view key, int64_t value) {
  return raw(key, std::to_string(value));
}

JsonObject& JsonObject::text(std::string_view key, std::string_view value) {
  return raw(key, json_string(value));
}

JsonObject& JsonObject::boolean(std::string_view key, bool value) {
  return raw(key, value ? "true" : "false");
}

JsonObject& JsonObject::null(std::string_view key, std::string_view reason) {
  raw(key, "null");
  return text(std::string(key) + "_reason", reason);
}

JsonObject& JsonObject::raw(std::string_view key, std::string json) {
  fields_.emplace_back(std::string(key), std::move(json));
  return *this;
}

std::string JsonObject::str(int indent) const {
  std::vector<std::string> items;
  for (const auto& [key, value] : fields_) items.push_back(json_string(key) + ": " + value);
  return joined(items, indent, '{', '}');
}

}  // namespace tessera::shardbench
