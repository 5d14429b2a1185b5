// load and load_safetensors (checkpoint/checkpoint.h): Note [Checkpoint loads read only what
// they need].

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <map>
#include <vector>

#include "tessera/checkpoint/checkpoint.h"
#include "tessera/checkpoint/detail/boxes.h"
#include "tessera/checkpoint/detail/chunk_reader.h"
#include "tessera/checkpoint/detail/files.h"
#include "tessera/checkpoint/detail/key_list.h"
#include "tessera/checkpoint/detail/metadata.h"
#include "tessera/checkpoint/detail/pending_save.h"
#include "tessera/checkpoint/detail/rank_agreement.h"
#include "tessera/checkpoint/detail/safetensors.h"
#include "tessera/dtensor/dtensor.h"
#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera::checkpoint {

namespace {

using detail::Box;
using detail::ChunkReader;
using detail::ChunkRecord;
using detail::File;
using detail::TensorRecord;

// Fills `into`'s tensors present in `tensors` from their chunks; checks keys, dtypes and
// shapes first.
void fill_tensors(StateDict& into, const std::map<std::string, TensorRecord>& tensors,
                  ChunkReader& reader, bool strict, const char* op, const std::string& source) {
  std::vector<std::string> missing, unexpected;
  for (const auto& [key, t] : into.tensors) {
    if (!tensors.count(key)) missing.push_back(key);
  }
  for (const auto& [key, t] : tensors) {
    if (!into.tensors.count(key)) unexpected.push_back(key);
  }
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::string message = std::string("[") + op + "] the state dict and " + source + " disagree:";
    if (!missing.empty())
      message += " missing in the checkpoint: " + detail::list_keys(missing) + ";";
    if (!unexpected.empty())
      message += " unexpected (not in the state dict): " + detail::list_keys(unexpected) + ";";
    throw Error(message + " (strict = false loads the keys both have)");
  }
  NoGradGuard no_grad;
  for (auto& [key, target] : into.tensors) {
    auto found = tensors.find(key);
    if (found == tensors.end()) continue;
    const TensorRecord& saved = found->second;
    TS_CHECK(target.defined(), "[", op, "] tensor \"", key, "\" of the state dict is undefined");
    TS_CHECK_DTYPE(target.dtype() == saved.dtype, "[", op, "] tensor \"", key,
                   "\": the checkpoint holds ", dtype_name(saved.dtype), ", the state dict ",
                   dtype_name(target.dtype()));
    TS_CHECK_SHAPE(target.shape() == saved.shape, "[", op, "] tensor \"", key,
                   "\": the checkpoint holds shape ", saved.shape, ", the state dict ",
                   target.shape());
    Tensor local = target;
    if (target.is_distributed()) {
      const DTensor d(target);
      for (const Placement& p : d.placements()) {
        TS_CHECK(!p.is_partial(), "[", op, "] tensor \"", key, "\" is a Partial DTensor (",
                 d.placements(), "); load into Replicate or Shard placements");
      }
      local = d.unsafe_local();
    }
    // In place when the local tensor is CPU-contiguous (the usual parameter); else through a
    // CPU buffer copied in at the end.
    const bool direct = local.is_contiguous() && local.device().is_cpu();
    Tensor dst = direct ? local : empty(local.shape(), local.dtype());
    auto* bytes = static_cast<std::byte*>(dst.raw_data());
    for (const detail::LocalBlock& block : detail::local_blocks(target)) {
      for (const ChunkRecord& chunk : saved.chunks) {
        const auto overlap = detail::intersect(block.global, Box{chunk.offsets, chunk.sizes});
        if (overlap) reader.read_overlap(key, saved, chunk, *overlap, block, bytes, local.shape());
      }
    }
    if (!direct) local.copy_(dst);
  }
}

// Runs `fill` on every rank and raises on every rank when it failed on any.
template <typename Fill>
void load_agreed(Fill&& fill) {
  detail::wait_for_pending_save();
  const dist::ProcessGroupPtr group = detail::world_or_null();
  std::exception_ptr exception;
  const std::string error = detail::capture_error(fill, exception);
  detail::raise_if_any_failed(group.get(), error, exception);
}

}  // namespace

void load(StateDict& into, const std::string& dir, bool strict) {
  const dist::ProcessGroupPtr group = detail::world_or_null();
  const int rank = group ? group->rank() : 0;
  load_agreed([&] {
    const detail::Metadata m = detail::read_metadata(dir);
    std::vector<std::string> missing_scalars;
    for (const auto& [key, value] : into.scalars) {
      const bool saved = m.scalars.count(key) ||
                         std::any_of(m.rank_scalars.begin(), m.rank_scalars.end(),
                                     [&](const auto& r) { return r.second.count(key) > 0; });
      if (!saved) missing_scalars.push_back(key);
    }
    TS_CHECK(!strict || missing_scalars.empty(),
             "[checkpoint.load] scalars missing in the checkpoint ", dir, ": ",
             detail::list_keys(missing_scalars), " (strict = false keeps their values)");
    ChunkReader reader(dir, "checkpoint.load");
    fill_tensors(into, m.tensors, reader, strict, "checkpoint.load", "the checkpoint in " + dir);
    for (const auto& [key, value] : m.scalars) into.scalars[key] = value;
    const int from = m.rank_scalars.count(rank) ? rank : 0;
    if (auto it = m.rank_scalars.find(from); it != m.rank_scalars.end()) {
      for (const auto& [key, value] : it->second) into.scalars[key] = value;
    }
  });
}

void load_safetensors(StateDict& into, const std::string& file, bool strict) {
  load_agreed([&] {
    const File f = File::open_read(file);
    const detail::SafetensorsHeader header =
        detail::parse_safetensors_header(file, f.size(), [&](uint64_t offset, uint64_t n) {
          return f.pread_string(offset, static_cast<size_t>(n), "the header");
        });
    std::map<std::string, TensorRecord> tensors;
    const std::string name = std::filesystem::path(file).filename().string();
    for (const detail::SafetensorsEntry& e : header.entries) {
      ChunkRecord whole;
      whole.file = name;
      whole.name = e.name;
      whole.offsets = Shape(e.shape.size(), 0);
      whole.sizes = e.shape;
      whole.file_offset = header.data_start + e.begin;
      whole.nbytes = e.end - e.begin;
      tensors[e.name] = TensorRecord{e.dtype, e.shape, {whole}};
    }
    const std::string dir = std::filesystem::path(file).parent_path().string();
    ChunkReader reader(dir.empty() ? "." : dir, "checkpoint.load_safetensors");
    fill_tensors(into, tensors, reader, strict, "checkpoint.load_safetensors", file);
  });
}

}  // namespace tessera::checkpoint
