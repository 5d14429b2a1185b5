#include "tools/checkpoint/verify.h"

#include <map>
#include <vector>

#include "tessera/checkpoint/detail/chunk_reader.h"
#include "tessera/checkpoint/detail/files.h"
#include "tessera/checkpoint/detail/safetensors.h"
#include "tools/checkpoint/coverage.h"

namespace tessera::checkpoint_tool {

namespace {

namespace cd = checkpoint::detail;

constexpr const char* kOp = "tessera-checkpoint verify";

struct ChunkRef {
  const std::string* key;
  const cd::TensorRecord* tensor;
  const cd::ChunkRecord* chunk;
};

[[noreturn]] void header_mismatch(const std::string& path, const ChunkRef& ref,
                                  const std::string& what) {
  throw checkpoint::CheckpointError(tessera::detail::concat_message(
      "[", kOp, "] ", path, ": tensor \"", *ref.key, "\", chunk at ",
      cd::describe_box(ref.chunk->offsets, ref.chunk->sizes), ": ", what,
      "; the file's header is corrupted or the file is not the one the metadata names"));
}

// The file's header lists each of its chunks by name, with the dtype, shape and byte range that
// the metadata records (a load trusts the metadata; a standard safetensors reader the header).
void check_header(const std::string& dir, const std::string& file,
                  const std::vector<ChunkRef>& refs) {
  const cd::File f = cd::File::open_read(dir + "/" + file);
  const cd::SafetensorsHeader header = cd::parse_safetensors_header(
      f.path(), f.size(),
      [&](uint64_t at, uint64_t n) { return f.pread_string(at, n, "the safetensors header"); });
  std::map<std::string, const cd::SafetensorsEntry*> by_name;
  for (const cd::SafetensorsEntry& e : header.entries) by_name[e.name] = &e;
  for (const ChunkRef& ref : refs) {
    const cd::ChunkRecord& c = *ref.chunk;
    const auto it = by_name.find(c.name);
    if (it == by_name.end()) header_mismatch(f.path(), ref, "no entry \"" + c.name + "\"");
    const cd::SafetensorsEntry& e = *it->second;
    if (e.dtype != ref.tensor->dtype || e.shape != c.sizes) {
      header_mismatch(
          f.path(), ref,
          tessera::detail::concat_message("entry \"", c.name, "\" is ", e.dtype, " ", e.shape,
                                          ", the metadata says ", ref.tensor->dtype, " ", c.sizes));
    }
    if (header.data_start + e.begin != c.file_offset || e.end - e.begin != c.nbytes) {
      header_mismatch(f.path(), ref,
                      tessera::detail::concat_message(
                          "entry \"", c.name, "\" holds file bytes [", header.data_start + e.begin,
                          ", ", header.data_start + e.end, "), the metadata says [", c.file_offset,
                          ", ", c.file_offset + c.nbytes, ")"));
    }
  }
}

}  // namespace

VerifySummary verify(const std::string& dir) {
  const cd::Metadata m = cd::read_metadata(dir);
  // The metadata-level checks first (cheap), then the bytes.
  std::map<std::string, std::vector<ChunkRef>> by_file;
  for (const auto& [key, t] : m.tensors) {
    check_coverage(kOp, dir, key, t);
    for (const cd::ChunkRecord& c : t.chunks) by_file[c.file].push_back({&key, &t, &c});
  }
  for (const auto& [file, refs] : by_file) check_header(dir, file, refs);
  VerifySummary s;
  cd::ChunkReader reader(dir, kOp);
  for (const auto& [key, t] : m.tensors) {
    for (const cd::ChunkRecord& c : t.chunks) {
      reader.verify_chunk(key, c);
      ++s.chunks;
      s.bytes += c.nbytes;
    }
    ++s.tensors;
  }
  return s;
}

}  // namespace tessera::checkpoint_tool
