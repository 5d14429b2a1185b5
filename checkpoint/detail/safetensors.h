#pragma once
// The safetensors format (huggingface/safetensors, its published spec): an 8-byte little-endian
// header length N, N bytes of JSON (an object: each tensor's "dtype", "shape" and
// "data_offsets" [begin, end) relative to the data, and an optional "__metadata__" object of
// strings), padded with spaces so the data starts 8-byte aligned, then the raw little-endian
// data, every byte of it belonging to exactly one tensor.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tessera/runtime/dtype.h"
#include "tessera/runtime/shape.h"

namespace tessera::checkpoint::detail {

// "F32", "BF16", "I64", "BOOL", ... Errors (from_code): a code Tessera has no dtype for, named
// with `context` (the file).
std::string safetensors_code(DType dtype);
DType dtype_from_safetensors_code(const std::string& code, const std::string& context);

struct SafetensorsEntry {
  std::string name;
  DType dtype = kFloat32;
  Shape shape;
  uint64_t begin = 0;  // relative to the data start
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // in data order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // absolute byte offset of the data in the file
};

// The file's bytes before the data, for entries whose begin / end are set and laid out back to
// back from 0 in the order given.
std::string encode_safetensors_header(const std::vector<SafetensorsEntry>& entries,
                                      const std::map<std::string, std::string>& metadata);

// Strict parse of a file's header (`read(offset, n)` returns n bytes of the file at offset):
// the length fits the file, the JSON is an object, every tensor has a known dtype, a shape of
// non-negative sizes and offsets that match it, the tensors tile the data without gaps or
// overlaps, and the data ends where the file does. Errors (CheckpointError) name `path` and
// what is wrong.
SafetensorsHeader parse_safetensors_header(
    const std::string& path, uint64_t file_size,
    const std::function<std::string(uint64_t offset, uint64_t n)>& read);

}  // namespace tessera::checkpoint::detail
