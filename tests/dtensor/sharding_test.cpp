// Which elements each rank holds: torch.chunk sizes, nested shards, StridedShard, printing.

#include "tessera/dtensor/sharding.h"

#include <catch2/catch.hpp>

#include "tessera/tessera.h"

namespace tessera::dtensor {
namespace {

std::vector<int64_t> sizes_of(int64_t length, int64_t parts) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < parts; ++i) out.push_back(chunk_of(length, parts, i).size);
  return out;
}

TEST_CASE("shards follow torch.chunk, with empty trailing shards", "[dtensor][sharding]") {
  CHECK(sizes_of(5, 4) == std::vector<int64_t>{2, 2, 1, 0});
  CHECK(sizes_of(13, 4) == std::vector<int64_t>{4, 4, 4, 1});
  CHECK(sizes_of(14, 4) == std::vector<int64_t>{4, 4, 4, 2});
  CHECK(sizes_of(31, 4) == std::vector<int64_t>{8, 8, 8, 7});
  CHECK(sizes_of(9, 2) == std::vector<int64_t>{5, 4});
  CHECK(sizes_of(3, 4) == std::vector<int64_t>{1, 1, 1, 0});
  CHECK(sizes_of(1, 4) == std::vector<int64_t>{1, 0, 0, 0});
  CHECK(sizes_of(0, 4) == std::vector<int64_t>{0, 0, 0, 0});
  // The offset of an empty chunk clamps to the length.
  CHECK(chunk_of(5, 4, 3) == Run{5, 0});
}

TEST_CASE("nested shards of one dim chunk what the outer shard left", "[dtensor][sharding]") {
  // torch's docstring table: global [2, 5], mesh 2x2, [S(1), S(1)].
  const Placements ps{Shard(1), Shard(1)};
  CHECK(local_shape({2, 5}, {2, 2}, ps, {0, 0}) == Shape{2, 2});
  CHECK(local_shape({2, 5}, {2, 2}, ps, {0, 1}) == Shape{2, 1});
  CHECK(local_shape({2, 5}, {2, 2}, ps, {1, 0}) == Shape{2, 1});
  CHECK(local_shape({2, 5}, {2, 2}, ps, {1, 1}) == Shape{2, 1});
  CHECK(global_runs({2, 5}, {2, 2}, ps, {0, 1})[1] == std::vector<Run>{Run{2, 1}});
  CHECK(global_runs({2, 5}, {2, 2}, ps, {1, 1})[1] == std::vector<Run>{Run{4, 1}});
}

TEST_CASE("StridedShard: right-to-left sharding as torch documents it", "[dtensor][sharding]") {
  // [8, 8] on 2x2, [_S(0, sf=2), S(0)]: rank (i, j) holds rows 4j + 2i .. 4j + 2i + 1.
  const Placements strided{StridedShard(0, 2), Shard(0)};
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      INFO("coordinate " << i << ", " << j);
      CHECK(global_runs({8, 8}, {2, 2}, strided, {i, j})[0] ==
            std::vector<Run>{Run{4 * j + 2 * i, 2}});
    }
  }
  // Alone, it holds one chunk of every piece.
  CHECK(shard_positions(8, 2, 1, 2) == std::vector<Run>{Run{2, 2}, Run{6, 2}});
}

TEST_CASE("placements print as PyTorch prints them", "[dtensor][sharding]") {
  CHECK(Placement(Shard(0)).to_string() == "S(0)");
  CHECK(Placement(Replicate()).to_string() == "R");
  CHECK(Placement(Partial()).to_string() == "P(sum)");
  CHECK(Placement(Partial(dist::ReduceOp::Max)).to_string() == "P(max)");
  CHECK(Placement(StridedShard(0, 2)).to_string() == "_S(0, sf=2)");
  CHECK(to_string(Placements{Shard(1), Replicate()}) == "[S(1), R]");
  CHECK(Placement(Shard(1)).is_shard());
  CHECK(Placement(Shard(1)).is_shard(1));
  CHECK_FALSE(Placement(Shard(1)).is_shard(0));
  CHECK(Placement(StridedShard(1, 2)).is_shard(1));
  CHECK(Placement(Partial(dist::ReduceOp::Avg)).is_partial(dist::ReduceOp::Avg));
  CHECK_FALSE(Placement(Partial()).is_partial(dist::ReduceOp::Max));
  CHECK(Placement(Replicate()).is_replicate());
}

}  // namespace
}  // namespace tessera::dtensor
