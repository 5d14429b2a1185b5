#include "tessera/checkpoint/detail/metadata.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tessera/checkpoint/detail/files.h"
#include "tessera/checkpoint/detail/safetensors.h"

namespace tessera::checkpoint::detail {

namespace {

using Json = nlohmann::ordered_json;

Json scalar_json(const Scalar& s) {
  if (const auto* i = std::get_if<int64_t>(&s)) return {{"int64", *i}};
  if (const auto* d = std::get_if<double>(&s)) return {{"double", *d}};
  return {{"string", std::get<std::string>(s)}};
}

Json scalars_json(const std::map<std::string, Scalar>& scalars) {
  Json out = Json::object();
  for (const auto& [k, v] : scalars) out[k] = scalar_json(v);
  return out;
}

[[noreturn]] void bad(const std::string& source, const std::string& what) {
  throw CheckpointError("[checkpoint] " + source + " is not valid checkpoint metadata: " + what);
}

const Json& field(const Json& j, const char* name, const std::string& source,
                  const std::string& where) {
  if (!j.is_object() || !j.contains(name)) bad(source, where + " lacks \"" + name + "\"");
  return j.at(name);
}

template <typename T>
T get(const Json& j, const char* name, const std::string& source, const std::string& where) {
  try {
    return field(j, name, source, where).get<T>();
  } catch (const nlohmann::json::exception& e) {
    bad(source, where + "." + name + ": " + e.what());
  }
}

uint64_t parse_hex64(const std::string& s, const std::string& source, const std::string& where) {
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos) {
    bad(source, where + ": checksum \"" + s + "\" is not 16 hex digits");
  }
  return std::stoull(s, nullptr, 16);
}

Scalar scalar_from(const Json& j, const std::string& source, const std::string& where) {
  if (!j.is_object() || j.size() != 1) bad(source, where + " is not {\"<type>\": value}");
  const std::string type = j.begin().key();
  const Json& value = j.begin().value();
  try {
    if (type == "int64") return value.get<int64_t>();
    if (type == "double") return value.get<double>();
    if (type == "string") return value.get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    bad(source, where + ": " + e.what());
  }
  bad(source, where + ": unknown scalar type \"" + type + "\" (int64, double or string)");
}

std::map<std::string, Scalar> scalars_from(const Json& j, const std::string& source,
                                           const std::string& where) {
  if (!j.is_object()) bad(source, where + " is not an object");
  std::map<std::string, Scalar> out;
  for (const auto& [k, v] : j.items()) out[k] = scalar_from(v, source, where + "." + k);
  return out;
}

}  // namespace

std::string hex64(uint64_t value) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

std::string to_json(const Metadata& m) {
  Json tensors = Json::object();
  for (const auto& [key, t] : m.tensors) {
    Json chunks = Json::array();
    for (const ChunkRecord& c : t.chunks) {
      Json blocks = Json::array();
      for (uint64_t b : c.block_xxh3) blocks.push_back(hex64(b));
      chunks.push_back({{"file", c.file},
                        {"name", c.name},
                        {"offsets", std::vector<int64_t>(c.offsets)},
                        {"sizes", std::vector<int64_t>(c.sizes)},
                        {"file_offset", c.file_offset},
                        {"nbytes", c.nbytes},
                        {"xxh3", hex64(c.xxh3)},
                        {"block_bytes", c.block_bytes},
                        {"block_xxh3", blocks}});
    }
    tensors[key] = {{"dtype", safetensors_code(t.dtype)},
                    {"shape", std::vector<int64_t>(t.shape)},
                    {"chunks", chunks}};
  }
  Json rank_scalars = Json::object();
  for (const auto& [rank, scalars] : m.rank_scalars) {
    rank_scalars[std::to_string(rank)] = scalars_json(scalars);
  }
  const Json out = {{"format", kFormatName},       {"version", kFormatVersion},
                    {"world_size", m.world_size},  {"save_id", m.save_id},
                    {"tensors", tensors},          {"scalars", scalars_json(m.scalars)},
                    {"rank_scalars", rank_scalars}};
  return out.dump(1);
}

Metadata metadata_from_json(const std::string& text, const std::string& source) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    bad(source, std::string("not JSON (") + e.what() + ")");
  }
  if (!j.is_object()) bad(source, "not a JSON object");
  const auto format = get<std::string>(j, "format", source, "the top level");
  if (format != kFormatName) bad(source, "format \"" + format + "\", not \"" + kFormatName + "\"");
  const auto version = get<int>(j, "version", source, "the top level");
  if (version != kFormatVersion) {
    bad(source, "version " + std::to_string(version) + "; this Tessera reads version " +
                    std::to_string(kFormatVersion));
  }
  Metadata m;
  m.world_size = get<int>(j, "world_size", source, "the top level");
  m.save_id = get<std::string>(j, "save_id", source, "the top level");
  const Json& tensors = field(j, "tensors", source, "the top level");
  if (!tensors.is_object()) bad(source, "\"tensors\" is not an object");
  for (const auto& [key, t] : tensors.items()) {
    const std::string where = "tensors[\"" + key + "\"]";
    TensorRecord record;
    record.dtype = dtype_from_safetensors_code(get<std::string>(t, "dtype", source, where), source);
    record.shape = get<std::vector<int64_t>>(t, "shape", source, where);
    const Json& chunks = field(t, "chunks", source, where);
    if (!chunks.is_array()) bad(source, where + ".chunks is not an array");
    for (size_t i = 0; i < chunks.size(); ++i) {
      const Json& c = chunks[i];
      const std::string cw = where + ".chunks[" + std::to_string(i) + "]";
      ChunkRecord chunk;
      chunk.file = get<std::string>(c, "file", source, cw);
      // A bare name in the directory: metadata must not send reads elsewhere.
      if (chunk.file.empty() || chunk.file.find('/') != std::string::npos || chunk.file[0] == '.') {
        bad(source,
            cw + ": file \"" + chunk.file + "\" is not a file name in the checkpoint's directory");
      }
      chunk.name = get<std::string>(c, "name", source, cw);
      chunk.offsets = get<std::vector<int64_t>>(c, "offsets", source, cw);
      chunk.sizes = get<std::vector<int64_t>>(c, "sizes", source, cw);
      chunk.file_offset = get<uint64_t>(c, "file_offset", source, cw);
      chunk.nbytes = get<uint64_t>(c, "nbytes", source, cw);
      chunk.xxh3 = parse_hex64(get<std::string>(c, "xxh3", source, cw), source, cw);
      chunk.block_bytes = get<uint64_t>(c, "block_bytes", source, cw);
      for (const auto& b : get<std::vector<std::string>>(c, "block_xxh3", source, cw)) {
        chunk.block_xxh3.push_back(parse_hex64(b, source, cw));
      }
      const bool geometry_ok = chunk.offsets.size() == record.shape.size() &&
                               chunk.sizes.size() == record.shape.size() && chunk.block_bytes > 0;
      uint64_t numel = 1;
      for (size_t d = 0; geometry_ok && d < chunk.sizes.size(); ++d) {
        if (chunk.offsets[d] < 0 || chunk.sizes[d] < 0 ||
            chunk.offsets[d] + chunk.sizes[d] > record.shape[d]) {
          bad(source, cw + " lies outside the tensor's shape");
        }
        numel *= static_cast<uint64_t>(chunk.sizes[d]);
      }
      if (!geometry_ok || numel * element_size(record.dtype) != chunk.nbytes ||
          chunk.block_xxh3.size() != (chunk.nbytes + chunk.block_bytes - 1) / chunk.block_bytes) {
        bad(source, cw + ": offsets, sizes, nbytes and block checksums do not agree");
      }
      record.chunks.push_back(std::move(chunk));
    }
    m.tensors.emplace(key, std::move(record));
  }
  m.scalars = scalars_from(field(j, "scalars", source, "the top level"), source, "scalars");
  const Json& rank_scalars = field(j, "rank_scalars", source, "the top level");
  if (!rank_scalars.is_object()) bad(source, "\"rank_scalars\" is not an object");
  for (const auto& [rank, scalars] : rank_scalars.items()) {
    if (rank.empty() || rank.size() > 9 ||
        rank.find_first_not_of("0123456789") != std::string::npos) {
      bad(source, "rank_scalars key \"" + rank + "\" is not a rank");
    }
    m.rank_scalars[std::stoi(rank)] = scalars_from(scalars, source, "rank_scalars." + rank);
  }
  return m;
}

Metadata read_metadata(const std::string& dir) {
  if (!path_exists(dir)) {
    throw CheckpointError("[checkpoint] no checkpoint directory " + dir);
  }
  const std::string path = dir + "/" + kMetadataFile;
  if (!path_exists(path)) {
    throw CheckpointError("[checkpoint] " + dir + " holds no committed checkpoint (no " +
                          kMetadataFile +
                          "): an interrupted or failed save, or not a checkpoint directory");
  }
  const File file = File::open_read(path);
  return metadata_from_json(file.pread_string(0, file.size(), "the metadata"), path);
}

}  // namespace tessera::checkpoint::detail
