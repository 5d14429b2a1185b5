#include "tools/checkpoint/consolidate.h"

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <vector>

#include "tessera/checkpoint/detail/chunk_reader.h"
#include "tessera/checkpoint/detail/files.h"
#include "tessera/checkpoint/detail/safetensors.h"
#include "tools/checkpoint/coverage.h"
#include "tools/checkpoint/scalars.h"
#include "tools/checkpoint/slabs.h"

namespace tessera::checkpoint_tool {

namespace {

namespace cd = checkpoint::detail;
namespace fs = std::filesystem;

constexpr const char* kOp = "tessera-checkpoint consolidate";

// Renaming the output over the metadata or a chunk file would destroy the checkpoint it was read
// from.
void check_not_in_checkpoint(const std::string& dir, const std::string& out,
                             const cd::Metadata& m) {
  std::vector<std::string> names{cd::kMetadataFile};
  for (const auto& [key, t] : m.tensors) {
    for (const cd::ChunkRecord& c : t.chunks) names.push_back(c.file);
  }
  std::error_code ec;
  if (fs::is_directory(out, ec)) {
    throw checkpoint::CheckpointError(tessera::detail::concat_message(
        "[", kOp, "] the output ", out, " is a directory; name the .safetensors file to write"));
  }
  const fs::path target = fs::weakly_canonical(out, ec);
  if (ec) return;  // File::create names the problem with the path
  for (const std::string& name : names) {
    if (fs::weakly_canonical(fs::path(dir) / name, ec) == target && !ec) {
      throw checkpoint::CheckpointError(tessera::detail::concat_message(
          "[", kOp, "] the output ", out, " is ", name,
          " of the checkpoint being read; write it outside the checkpoint's files"));
    }
  }
}

std::map<std::string, std::string> metadata_strings(const std::string& dir, const cd::Metadata& m) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : m.scalars) out[key] = scalar_text(value);
  for (const auto& [rank, values] : m.rank_scalars) {
    for (const auto& [key, value] : values) {
      const std::string name = "rank" + std::to_string(rank) + "/" + key;
      if (out.count(name)) {
        throw checkpoint::CheckpointError(tessera::detail::concat_message(
            "[", kOp, "] ", dir, ": scalar \"", name, "\" and rank ", rank, "'s scalar \"", key,
            "\" would have the same __metadata__ key"));
      }
      out[name] = scalar_text(value);
    }
  }
  return out;
}

// Wider elements first (stable: names in order within a width), so that every tensor's data
// starts aligned to its element size, as the chunk files do.
std::vector<cd::SafetensorsEntry> layout(const cd::Metadata& m) {
  std::vector<cd::SafetensorsEntry> entries;
  for (const auto& [key, t] : m.tensors) entries.push_back({key, t.dtype, t.shape, 0, 0});
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return element_size(a.dtype) > element_size(b.dtype);
  });
  uint64_t at = 0;
  for (cd::SafetensorsEntry& e : entries) {
    e.begin = at;
    at += static_cast<uint64_t>(e.shape.numel()) * element_size(e.dtype);
    e.end = at;
  }
  return entries;
}

// The output's temporary file; its error names the output the user asked for.
cd::File create_output(const std::string& out, const std::string& temp) {
  try {
    return cd::File::create(temp);
  } catch (const Error& e) {
    throw checkpoint::CheckpointError(
        tessera::detail::concat_message("[", kOp, "] cannot write ", out, ": ", e.what()));
  }
}

void write_tensor(const std::string& key, const cd::TensorRecord& t, int64_t slab_bytes,
                  cd::ChunkReader& reader, std::vector<std::byte>& slab, cd::File& file) {
  const size_t element = element_size(t.dtype);
  for_each_slab(t.shape, element, slab_bytes, [&](const cd::Box& box) {
    slab.resize(static_cast<size_t>(box.numel()) * element);
    // The slab is the destination array; its block is itself, at offset zero.
    const cd::LocalBlock block{box, Shape(box.sizes.size(), 0)};
    for (const cd::ChunkRecord& c : t.chunks) {
      const auto overlap = cd::intersect(box, cd::Box{c.offsets, c.sizes});
      if (overlap) reader.read_overlap(key, t, c, *overlap, block, slab.data(), box.sizes);
    }
    file.write_all(slab.data(), slab.size());
  });
}

}  // namespace

ConsolidateSummary consolidate(const std::string& dir, const std::string& out,
                               const ConsolidateOptions& options) {
  const cd::Metadata m = cd::read_metadata(dir);
  // Every slab is filled only by chunk overlaps: a gap would write garbage, so check first.
  for (const auto& [key, t] : m.tensors) check_coverage(kOp, dir, key, t);
  check_not_in_checkpoint(dir, out, m);
  const std::vector<cd::SafetensorsEntry> entries = layout(m);
  const std::string header = cd::encode_safetensors_header(entries, metadata_strings(dir, m));

  const std::string temp = out + ".tmp";
  ConsolidateSummary summary;
  cd::File file = create_output(out, temp);
  try {
    file.write_all(header.data(), header.size());
    cd::ChunkReader reader(dir, kOp);
    std::vector<std::byte> slab;
    for (const cd::SafetensorsEntry& e : entries) {
      write_tensor(e.name, m.tensors.at(e.name), options.slab_bytes, reader, slab, file);
    }
    file.sync();
    summary.bytes = file.size();
    file.close();
    cd::rename_file(temp, out);
    const fs::path parent = fs::path(out).parent_path();
    cd::sync_directory(parent.empty() ? "." : parent.string());
  } catch (...) {
    // The partial file goes; the error the caller sees is the one that stopped the write.
    try {
      cd::remove_file_if_exists(temp);
    } catch (const Error&) {
    }
    throw;
  }
  summary.tensors = static_cast<int64_t>(entries.size());
  return summary;
}

}  // namespace tessera::checkpoint_tool
