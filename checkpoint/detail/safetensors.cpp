#include "tessera/checkpoint/detail/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tessera/checkpoint/checkpoint.h"

namespace tessera::checkpoint::detail {

namespace {

struct CodeOf {
  DType dtype;
  const char* code;
};
constexpr CodeOf kCodes[] = {{kBool, "BOOL"},   {kUInt8, "U8"},    {kInt32, "I32"},
                             {kInt64, "I64"},   {kFloat16, "F16"}, {kBFloat16, "BF16"},
                             {kFloat32, "F32"}, {kFloat64, "F64"}};

// The reference implementation refuses headers above 100 MB; so do we, before allocating one.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void malformed(const std::string& path, const std::string& what) {
  throw CheckpointError("[checkpoint] " + path + " is not a valid safetensors file: " + what);
}

}  // namespace

std::string safetensors_code(DType dtype) {
  for (const CodeOf& c : kCodes) {
    if (c.dtype == dtype) return c.code;
  }
  TS_INTERNAL_ASSERT(false, "no safetensors code for ", dtype_name(dtype));
}

DType dtype_from_safetensors_code(const std::string& code, const std::string& context) {
  for (const CodeOf& c : kCodes) {
    if (code == c.code) return c.dtype;
  }
  std::string known;
  for (const CodeOf& c : kCodes) known += std::string(known.empty() ? "" : ", ") + c.code;
  throw CheckpointError("[checkpoint] " + context + ": dtype \"" + code +
                        "\" has no Tessera dtype (Tessera reads " + known + ")");
}

std::string encode_safetensors_header(const std::vector<SafetensorsEntry>& entries,
                                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const SafetensorsEntry& e : entries) {
    header[e.name] = {{"dtype", safetensors_code(e.dtype)},
                      {"shape", std::vector<int64_t>(e.shape)},
                      {"data_offsets", {e.begin, e.end}}};
  }
  std::string json = header.dump();
  json.resize((json.size() + 7) / 8 * 8, ' ');  // the data starts 8-byte aligned
  std::string out(8, '\0');
  for (size_t i = 0; i < 8; ++i) out[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json;
}

SafetensorsHeader parse_safetensors_header(
    const std::string& path, uint64_t file_size,
    const std::function<std::string(uint64_t offset, uint64_t n)>& read) {
  if (file_size < 8) {
    malformed(path, "it has " + std::to_string(file_size) +
                        " bytes, fewer than the 8 of the header length");
  }
  const std::string prefix = read(0, 8);
  uint64_t length = 0;
  for (size_t i = 0; i < 8; ++i) {
    length |= static_cast<uint64_t>(static_cast<unsigned char>(prefix[i])) << (8 * i);
  }
  if (length > kMaxHeaderBytes || length > file_size - 8) {
    malformed(path, "its header length " + std::to_string(length) + " exceeds " +
                        (length > kMaxHeaderBytes
                             ? "the format's 100 MB limit"
                             : "the file's " + std::to_string(file_size) + " bytes"));
  }
  const std::string json = read(8, length);
  if (json.empty() || json[0] != '{') malformed(path, "its header does not start with '{'");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    malformed(path, std::string("its header is not JSON (") + e.what() + ")");
  }
  if (!header.is_object()) malformed(path, "its header is not a JSON object");

  SafetensorsHeader out;
  out.data_start = 8 + length;
  const uint64_t data_size = file_size - out.data_start;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) malformed(path, "__metadata__ is not an object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) malformed(path, "__metadata__[\"" + k + "\"] is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor \"" + name + "\"";
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets")) {
      malformed(path, where + " lacks dtype, shape or data_offsets");
    }
    const auto& dtype = value["dtype"];
    const auto& shape = value["shape"];
    const auto& offsets = value["data_offsets"];
    if (!dtype.is_string() || !shape.is_array() || !offsets.is_array() || offsets.size() != 2 ||
        !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      malformed(path, where +
                          ": dtype must be a string, shape an array, data_offsets two "
                          "non-negative integers");
    }
    SafetensorsEntry e;
    e.name = name;
    e.dtype = dtype_from_safetensors_code(dtype.get<std::string>(), path + " " + where);
    uint64_t numel = 1;
    for (const auto& s : shape) {
      if (!s.is_number_unsigned())
        malformed(path, where + ": shape " + shape.dump() +
                            " has a size that is not a non-negative integer");
      const auto size = s.get<uint64_t>();
      if (size != 0 && numel > UINT64_MAX / size)
        malformed(path, where + ": shape " + shape.dump() + " overflows");
      numel *= size;
      e.shape.push_back(static_cast<int64_t>(size));
    }
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    const uint64_t bytes = numel * element_size(e.dtype);
    if (e.end < e.begin || e.end - e.begin != bytes) {
      malformed(path, where + ": data_offsets [" + std::to_string(e.begin) + ", " +
                          std::to_string(e.end) + ") do not hold shape " + shape.dump() + " of " +
                          dtype.get<std::string>() + " (" + std::to_string(bytes) + " bytes)");
    }
    out.entries.push_back(std::move(e));
  }
  std::sort(out.entries.begin(), out.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t expected = 0;
  for (const SafetensorsEntry& e : out.entries) {
    if (e.begin != expected) {
      malformed(path, "tensor \"" + e.name + "\" starts at data byte " + std::to_string(e.begin) +
                          (e.begin < expected ? ", overlapping the tensor before it"
                                              : ", leaving a gap") +
                          " (expected " + std::to_string(expected) + ")");
    }
    expected = e.end;
  }
  if (expected != data_size) {
    malformed(path, "the tensors hold " + std::to_string(expected) +
                        " data bytes but the file has " + std::to_string(data_size) +
                        (expected > data_size ? " (truncated)" : ""));
  }
  return out;
}

}  // namespace tessera::checkpoint::detail
