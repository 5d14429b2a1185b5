#include "tessera/checkpoint/detail/save_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "tessera/checkpoint/detail/checksum.h"
#include "tessera/checkpoint/detail/chunk_reader.h"
#include "tessera/checkpoint/detail/metadata.h"
#include "tessera/checkpoint/detail/rank_agreement.h"
#include "tessera/checkpoint/detail/safetensors.h"
#include "tessera/dtensor/dtensor.h"
#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera::checkpoint::detail {

namespace {

using Json = nlohmann::json;

std::string new_save_id() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
  std::random_device random;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%013llx%04x", static_cast<unsigned long long>(micros),
                random() & 0xffffu);
  return buf;
}

std::string rank_file_name(const std::string& save_id, int rank) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "save-%s-rank%05d.safetensors", save_id.c_str(), rank);
  return buf;
}

// The staging buffers of this rank thread's async saves, reused (the first touch of fresh
// memory is the slow part of a copy).
std::vector<Tensor>& staging_pool() {
  thread_local std::vector<Tensor> pool;
  return pool;
}

Tensor staged_copy(const Tensor& block, size_t index) {
  std::vector<Tensor>& pool = staging_pool();
  if (pool.size() <= index) pool.resize(index + 1);
  Tensor& buffer = pool[index];
  if (!buffer.defined() || buffer.dtype() != block.dtype() || buffer.shape() != block.shape()) {
    buffer = empty(block.shape(), block.dtype());
  }
  if (block.is_contiguous() && block.device().is_cpu()) {
    // The training loop waits for this copy: a plain memcpy, not an op's dispatch and kernel.
    std::memcpy(buffer.raw_data(), block.raw_data(), block.nbytes());
  } else {
    buffer.copy_(block);
  }
  return buffer;
}

// A DTensor with its Partial mesh dims reduced (a saved chunk holds the tensor's values).
DTensor without_partials(const DTensor& t) {
  Placements placements = t.placements();
  bool partial = false;
  for (Placement& p : placements) {
    if (p.is_partial()) {
      p = Replicate();
      partial = true;
    }
  }
  return partial ? t.redistribute(placements) : t;
}

// Whether this rank writes its blocks of `t`: it has coordinate 0 on every mesh dim that does
// not shard it, so each replicated block is written once. A DTensor on a sub-mesh (fully_shard on
// mesh["dp"] of a 2-D mesh) is replicated along the root mesh's other dims too.
bool writes_replica(const DTensor& t) {
  const DeviceMesh& mesh = t.device_mesh();
  const std::vector<int64_t> dims = mesh.root_dims();
  const std::optional<std::vector<int64_t>> coordinate = mesh.root_mesh().get_coordinate();
  if (!coordinate) return false;
  for (size_t root_dim = 0; root_dim < coordinate->size(); ++root_dim) {
    if ((*coordinate)[root_dim] == 0) continue;
    const auto it = std::find(dims.begin(), dims.end(), static_cast<int64_t>(root_dim));
    if (it == dims.end() || t.placements()[static_cast<size_t>(it - dims.begin())].is_replicate()) {
      return false;
    }
  }
  return true;
}

std::string chunk_name(const std::string& key, const Box& box, const Shape& shape) {
  if (box.offsets == Shape(shape.size(), 0) && box.sizes == shape) return key;
  std::string name = key + "@";
  for (size_t d = 0; d < box.offsets.size(); ++d) {
    if (d > 0) name += ',';
    name += std::to_string(box.offsets[d]);
  }
  return name;
}

// Writes the job's chunks into its rank file; returns their records by key.
std::map<std::string, std::vector<ChunkRecord>> write_rank_file(const SaveJob& job) {
  std::map<std::string, std::vector<ChunkRecord>> records;
  if (job.chunks.empty()) return records;
  std::vector<size_t> order(job.chunks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Wider elements first, so every tensor's data stays aligned to its element size.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return job.chunks[a].data.element_size() > job.chunks[b].data.element_size();
  });
  const std::string file_name = rank_file_name(job.save_id, job.rank);
  std::vector<SafetensorsEntry> entries;
  uint64_t at = 0;
  for (size_t i : order) {
    const StagedChunk& c = job.chunks[i];
    const auto& [dtype, shape] = job.tensors.at(c.key);
    SafetensorsEntry e{chunk_name(c.key, c.box, shape), dtype, c.box.sizes, at,
                       at + c.data.nbytes()};
    at = e.end;
    entries.push_back(std::move(e));
  }
  const std::string header = encode_safetensors_header(
      entries,
      {{"format", kFormatName}, {"save_id", job.save_id}, {"rank", std::to_string(job.rank)}});
  File file = File::create(job.dir + "/" + file_name);
  file.write_all(header.data(), header.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const StagedChunk& c = job.chunks[order[k]];
    const void* data = c.data.raw_data();
    const size_t n = c.data.nbytes();
    file.write_all(data, n);
    ChunkRecord r;
    r.file = file_name;
    r.name = entries[k].name;
    r.offsets = c.box.offsets;
    r.sizes = c.box.sizes;
    r.file_offset = header.size() + entries[k].begin;
    r.nbytes = n;
    r.xxh3 = xxh3(data, n);
    r.block_xxh3 = block_checksums(data, n, r.block_bytes);
    records[c.key].push_back(std::move(r));
  }
  file.sync();
  file.close();
  return records;
}

// Rank 0: the metadata of every rank's records, checked (each tensor one dtype and shape, its
// chunks covering it once), written through a temporary name and renamed into place.
void commit(const SaveJob& job, const std::vector<std::string>& records) {
  Metadata m;
  m.world_size = job.world_size;
  m.save_id = job.save_id;
  std::vector<std::map<std::string, Scalar>> rank_scalars;
  for (size_t r = 0; r < records.size(); ++r) {
    Metadata part = metadata_from_json(records[r], "rank " + std::to_string(r) + "'s record");
    for (auto& [key, rec] : part.tensors) {
      auto [it, inserted] = m.tensors.emplace(key, TensorRecord{rec.dtype, rec.shape, {}});
      if (!inserted && (it->second.dtype != rec.dtype || it->second.shape != rec.shape)) {
        throw Error(tessera::detail::concat_message(
            "[checkpoint.save] tensor \"", key,
            "\" differs between ranks: ", dtype_name(it->second.dtype), " ", it->second.shape,
            " on a lower rank, ", dtype_name(rec.dtype), " ", rec.shape, " on rank ", r));
      }
      for (ChunkRecord& c : rec.chunks) it->second.chunks.push_back(std::move(c));
    }
    rank_scalars.push_back(std::move(part.scalars));
  }
  for (const auto& [key, rec] : m.tensors) {
    int64_t covered = 0;
    std::string listed;
    for (const ChunkRecord& c : rec.chunks) {
      covered += Box{c.offsets, c.sizes}.numel();
      listed += " " + c.file + " " + describe_box(c.offsets, c.sizes) + ";";
    }
    TS_CHECK(covered == rec.shape.numel(), "[checkpoint.save] the ranks' chunks of tensor \"", key,
             "\" ", rec.shape, " hold ", covered, " of its ", rec.shape.numel(),
             " elements: the ranks hold it under different meshes or placements; chunks:", listed);
  }
  // A scalar equal on every rank is saved once; one that differs (a data-parallel generator), per
  // rank.
  for (const auto& [key, value] : rank_scalars[0]) {
    bool same = true;
    for (const auto& scalars : rank_scalars) {
      auto it = scalars.find(key);
      same = same && it != scalars.end() && it->second == value;
    }
    if (same) m.scalars[key] = value;
  }
  for (size_t r = 0; r < rank_scalars.size(); ++r) {
    for (const auto& [key, value] : rank_scalars[r]) {
      if (!m.scalars.count(key)) m.rank_scalars[static_cast<int>(r)][key] = value;
    }
  }
  const std::string json = to_json(m);
  // The chunk files' names durable before the metadata that points at them.
  sync_directory(job.dir);
  const std::string final_path = job.dir + "/" + kMetadataFile;
  const std::string temp_path = final_path + ".tmp-" + job.save_id;
  File file = File::create(temp_path);
  file.write_all(json.data(), json.size());
  file.sync();
  file.close();
  rename_file(temp_path, final_path);
  sync_directory(job.dir);
  // The previous saves' files are garbage now; the committed metadata names none of them.
  const std::string mine = "save-" + job.save_id + "-";
  for (const auto& entry : std::filesystem::directory_iterator(job.dir)) {
    const std::string name = entry.path().filename().string();
    const bool old_chunks = name.rfind("save-", 0) == 0 && name.rfind(mine, 0) != 0 &&
                            name.size() > 12 && name.ends_with(".safetensors");
    const bool old_temp = name.rfind(std::string(kMetadataFile) + ".tmp-", 0) == 0;
    if (old_chunks || old_temp) remove_file_if_exists(entry.path().string());
  }
}

}  // namespace

SaveJob stage_save(const StateDict& state, const std::string& dir, dist::ProcessGroupPtr group,
                   bool copy) {
  NoGradGuard no_grad;
  SaveJob job;
  job.dir = dir;
  job.group = group;
  job.rank = group ? group->rank() : 0;
  job.world_size = group ? group->size() : 1;

  // Rank 0 prepares the directory and names the save; every rank says which plain tensors it
  // holds, so that each is written by the lowest rank holding it.
  std::exception_ptr exception;
  std::string save_id;
  const std::string error = capture_error(
      [&] {
        for (const auto& [key, t] : state.tensors) {
          TS_CHECK(t.defined(), "[checkpoint.save] tensor \"", key, "\" is undefined");
        }
        if (job.rank != 0) return;
        make_directories(dir);
        job.lock.emplace(dir);
        save_id = new_save_id();
      },
      exception);
  Json announce = {{"error", error}, {"save_id", save_id}, {"plain", Json::array()}};
  for (const auto& [key, t] : state.tensors) {
    if (t.defined() && !t.is_distributed()) announce["plain"].push_back(key);
  }
  const std::vector<std::string> all = all_gather_strings(group.get(), announce.dump());
  std::vector<Json> parsed;
  std::vector<std::string> errors;
  for (const std::string& s : all) {
    parsed.push_back(Json::parse(s));
    errors.push_back(parsed.back()["error"].get<std::string>());
  }
  raise_first_error(errors, exception);
  job.save_id = parsed[0]["save_id"].get<std::string>();
  std::map<std::string, int> plain_owner;
  for (int r = static_cast<int>(parsed.size()) - 1; r >= 0; --r) {
    for (const auto& key : parsed[static_cast<size_t>(r)]["plain"]) {
      plain_owner[key.get<std::string>()] = r;
    }
  }

  for (const auto& [key, tensor] : state.tensors) {
    Tensor t = tensor;
    bool writes = true;
    Tensor local = t;
    if (t.is_distributed()) {
      const DTensor d = without_partials(DTensor(t));
      t = d;
      writes = writes_replica(d);
      local = d.unsafe_local();
    } else {
      writes = plain_owner.at(key) == job.rank;
    }
    job.tensors[key] = {t.dtype(), t.shape()};
    if (!writes) continue;
    for (const LocalBlock& block : local_blocks(t)) {
      if (block.global.numel() == 0) continue;
      Tensor view = local;
      for (size_t d = 0; d < block.global.sizes.size(); ++d) {
        view = view.narrow(static_cast<int64_t>(d), block.local_offsets[d], block.global.sizes[d]);
      }
      Tensor data = copy ? staged_copy(view, job.chunks.size()) : view.cpu().contiguous();
      job.chunks.push_back(StagedChunk{key, block.global, data});
    }
  }
  job.scalars = state.scalars;
  return job;
}

void write_and_commit(SaveJob& job) {
  std::exception_ptr exception;
  std::string record;
  const std::string file_path = job.dir + "/" + rank_file_name(job.save_id, job.rank);
  const std::string error = capture_error(
      [&] {
        Metadata part;
        for (const auto& [key, meta] : job.tensors) {
          part.tensors[key] = TensorRecord{meta.first, meta.second, {}};
        }
        for (auto& [key, chunks] : write_rank_file(job))
          part.tensors[key].chunks = std::move(chunks);
        part.scalars = job.scalars;
        record = to_json(part);
      },
      exception);
  // Every rank's file is synced before rank 0 commits: the gather is the barrier.
  const std::vector<std::string> all =
      all_gather_strings(job.group.get(), error.empty() ? "R" + record : "E" + error);
  std::vector<std::string> errors, records;
  for (const std::string& s : all) {
    errors.push_back(s[0] == 'E' ? s.substr(1) : std::string());
    records.push_back(s[0] == 'R' ? s.substr(1) : std::string());
  }
  const bool failed = std::any_of(errors.begin(), errors.end(), [](auto& e) { return !e.empty(); });
  std::string commit_error;
  if (!failed && job.rank == 0)
    commit_error = capture_error([&] { commit(job, records); }, exception);
  if (failed) {
    remove_file_if_exists(file_path);
    job.lock.reset();
    raise_first_error(errors, exception);
  }
  const std::vector<std::string> commit_errors = all_gather_strings(job.group.get(), commit_error);
  job.lock.reset();
  if (!commit_errors[0].empty()) {
    remove_file_if_exists(file_path);
    raise_first_error(commit_errors, exception);
  }
}

}  // namespace tessera::checkpoint::detail
