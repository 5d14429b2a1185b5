// Checkpoints round trip bitwise: every dtype, empty and uneven shards, StridedShard, and every
// pair of layouts (saved under one mesh and placements, loaded under another, world sizes 4, 2
// and 1), compared with the tensors as one device holds them.

#include <catch2/catch.hpp>
#include <mutex>

#include "tessera/checkpoint/detail/files.h"
#include "tessera/checkpoint/detail/metadata.h"
#include "tessera/checkpoint/detail/safetensors.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace tessera::checkpoint_test {
namespace {

using checkpoint::StateDict;

constexpr DType kAllDTypes[] = {kBool,    kUInt8,    kInt32,   kInt64,
                                kFloat16, kBFloat16, kFloat32, kFloat64};

TEST_CASE("every dtype and shape round trips bitwise on one process", "[checkpoint]") {
  TempDir dir;
  StateDict saved;
  uint32_t seed = 1;
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape :
         {Shape{}, Shape{0}, Shape{7}, Shape{3, 5}, Shape{2, 0, 3}, Shape{2, 3, 4}}) {
      saved.tensors[std::string(dtype_name(dtype)) + "." + std::to_string(shape.size()) + "." +
                    std::to_string(shape.numel())] = random_bits(shape, dtype, seed++);
    }
  }
  saved.scalars = {{"epoch", int64_t{3}},
                   {"loss", 0.125},
                   {"note", std::string("a \"quoted\" note")},
                   {"big", int64_t{-9223372036854775807 - 1}}};
  checkpoint::save(saved, dir.path());

  StateDict loaded;
  for (const auto& [key, t] : saved.tensors) loaded.tensors[key] = zeros(t.shape(), t.dtype());
  checkpoint::load(loaded, dir.path());
  for (const auto& [key, t] : saved.tensors) {
    INFO(key);
    CHECK(same_bits(loaded.tensors.at(key), t));
  }
  CHECK(loaded.scalars == saved.scalars);

  // The files are safetensors a strict reader of the spec accepts, holding what was saved.
  const auto metadata = checkpoint::detail::read_metadata(dir.path());
  for (const auto& [key, record] : metadata.tensors) {
    for (const auto& chunk : record.chunks) {
      const auto file = checkpoint::detail::File::open_read(dir / chunk.file);
      const auto header = checkpoint::detail::parse_safetensors_header(
          file.path(), file.size(),
          [&](uint64_t at, uint64_t n) { return file.pread_string(at, n, "header"); });
      CHECK(header.data_start % 8 == 0);
      bool found = false;
      for (const auto& e : header.entries) {
        if (e.name != chunk.name) continue;
        found = true;
        CHECK(e.dtype == record.dtype);
        CHECK(e.shape == chunk.sizes);
        CHECK(header.data_start + e.begin == chunk.file_offset);
        CHECK((header.data_start + e.begin) % element_size(e.dtype) == 0);
      }
      CHECK(found);
    }
  }
}

// A layout of the three test tensors on a world of `world` ranks (0: no world at all).
struct Layout {
  std::string name;
  int world = 0;
  Shape mesh;
  Placements a, b, c;  // for a [7, 5], b [6], c [4, 2, 6]
};

std::vector<Layout> layouts() {
  return {
      {"one device", 0, {}, {}, {}, {}},
      {"4: Shard(0)", 4, {4}, {Shard(0)}, {Shard(0)}, {Shard(0)}},
      {"4: Shard(1)", 4, {4}, {Shard(1)}, {Replicate()}, {Shard(2)}},
      {"4: Replicate", 4, {4}, {Replicate()}, {Replicate()}, {Replicate()}},
      {"2x2: Shard(0), Shard(1)",
       4,
       {2, 2},
       {Shard(0), Shard(1)},
       {Shard(0), Replicate()},
       {Shard(1), Shard(2)}},
      {"2x2: Replicate, Shard(0)",
       4,
       {2, 2},
       {Replicate(), Shard(0)},
       {Replicate(), Shard(0)},
       {Replicate(), Shard(0)}},
      {"2x2: StridedShard(0, 2), Shard(0)",
       4,
       {2, 2},
       {StridedShard(0, 2), Shard(0)},
       {StridedShard(0, 2), Shard(0)},
       {StridedShard(2, 2), Shard(2)}},
      {"2: Shard(1)", 2, {2}, {Shard(1)}, {Shard(0)}, {Shard(2)}},
  };
}

struct Globals {
  Tensor a = random_bits({7, 5}, kFloat32, 11);
  Tensor b = random_bits({6}, kInt64, 12);
  Tensor c = random_bits({4, 2, 6}, kBFloat16, 13);
};

// Runs body(tensors of the layout) on its world; failures come back as strings.
std::vector<std::string> on_layout(
    const Layout& layout, const Globals& g,
    const std::function<std::vector<std::string>(StateDict&)>& body) {
  if (layout.world == 0) {
    StateDict sd;
    sd.tensors = {{"a", g.a.clone()}, {"b", g.b.clone()}, {"c", g.c.clone()}};
    return body(sd);
  }
  std::mutex mutex;
  std::vector<std::string> failures;
  dist::run_threads(layout.world, [&](dist::ProcessGroupPtr world) {
    const DeviceMesh mesh(DeviceType::CPU, layout.mesh);
    StateDict sd;
    sd.tensors = {{"a", distribute_tensor(g.a, mesh, layout.a)},
                  {"b", distribute_tensor(g.b, mesh, layout.b)},
                  {"c", distribute_tensor(g.c, mesh, layout.c)}};
    std::vector<std::string> mine = body(sd);
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& f : mine) failures.push_back("rank " + std::to_string(world->rank()) + ": " + f);
  });
  return failures;
}

TEST_CASE("saved under any layout, loaded under any other: the same tensors", "[checkpoint]") {
  const Globals g;
  const Globals zero{zeros({7, 5}, kFloat32), zeros({6}, kInt64), zeros({4, 2, 6}, kBFloat16)};
  for (const Layout& from : layouts()) {
    TempDir dir;
    const auto saved = on_layout(from, g, [&](StateDict& sd) {
      sd.scalars["step"] = int64_t{42};
      checkpoint::save(sd, dir.path());
      return std::vector<std::string>{};
    });
    for (const auto& f : saved) FAIL_CHECK(from.name << ": " << f);
    for (const Layout& to : layouts()) {
      INFO("saved under " << from.name << ", loaded under " << to.name);
      const auto failures = on_layout(to, zero, [&](StateDict& sd) {
        checkpoint::load(sd, dir.path());
        std::vector<std::string> f;
        if (!same_bits(sd.tensors.at("a"), g.a)) f.push_back("a differs");
        if (!same_bits(sd.tensors.at("b"), g.b)) f.push_back("b differs");
        if (!same_bits(sd.tensors.at("c"), g.c)) f.push_back("c differs");
        if (sd.scalars.at("step") != checkpoint::Scalar(int64_t{42})) f.push_back("step differs");
        return f;
      });
      for (const auto& f : failures) FAIL_CHECK(f);
    }
  }
}

TEST_CASE("a replicated chunk is written once, by the lowest coordinate", "[checkpoint]") {
  const Globals g;
  TempDir dir;
  on_layout(layouts()[5], g, [&](StateDict& sd) {  // 2x2: Replicate, Shard(0)
    checkpoint::save(sd, dir.path());
    return std::vector<std::string>{};
  });
  const auto m = checkpoint::detail::read_metadata(dir.path());
  CHECK(m.world_size == 4);
  REQUIRE(m.tensors.at("a").chunks.size() == 2);  // two row blocks, each once
  for (const auto& chunk : m.tensors.at("a").chunks) {
    INFO(chunk.file);  // ranks 0 and 1 have coordinate 0 on the replicated mesh dim
    CHECK((chunk.file.find("rank00000") != std::string::npos ||
           chunk.file.find("rank00001") != std::string::npos));
  }
}

TEST_CASE("a Partial DTensor saves its reduced value", "[checkpoint]") {
  Generator gen(3);
  const Tensor value = randint(-50, 50, {4, 3}, kInt64, &gen).to(kFloat64);
  TempDir dir;
  dist::run_threads(2, [&](dist::ProcessGroupPtr world) {
    const DeviceMesh mesh(DeviceType::CPU, {2});
    // Rank 0 holds value - 1, rank 1 ones: their sum is the value.
    const Tensor local = world->rank() == 0 ? value - 1.0 : ones({4, 3}, kFloat64);
    StateDict sd;
    sd.tensors["p"] = DTensor::from_local(local, mesh, {Partial()});
    checkpoint::save(sd, dir.path());
  });
  StateDict loaded;
  loaded.tensors["p"] = zeros({4, 3}, kFloat64);
  checkpoint::load(loaded, dir.path());
  CHECK(same_bits(loaded.tensors.at("p"), value));
}

}  // namespace
}  // namespace tessera::checkpoint_test
