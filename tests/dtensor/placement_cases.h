#pragma once
// The placement lists and Partial sources the exhaustive redistribute tests draw from.

#include <algorithm>
#include <vector>

#include "tests/dtensor/dtensor_test_util.h"
#include "tests/dtensor/sharding_reference.h"

namespace tessera::dtensor_test {

using dist::ReduceOp;

// Every placement list on a mesh of `mesh_ndim` dims for a tensor of `tensor_ndim` dims, from
// {R, P(sum), P(max), P(avg), S(d)} per mesh dim, and StridedShard(d, 2), StridedShard(d, 3) too
// when `strided`.
inline std::vector<Placements> all_placement_lists(int64_t mesh_ndim, int64_t tensor_ndim,
                                                   bool strided = false) {
  std::vector<Placement> options{Replicate(), Partial(ReduceOp::Sum), Partial(ReduceOp::Max),
                                 Partial(ReduceOp::Avg)};
  for (int64_t d = 0; d < tensor_ndim; ++d) options.push_back(Shard(d));
  if (strided) {
    for (int64_t d = 0; d < tensor_ndim; ++d) {
      options.push_back(StridedShard(d, 2));
      options.push_back(StridedShard(d, 3));
    }
  }
  std::vector<Placements> lists{{}};
  for (int64_t m = 0; m < mesh_ndim; ++m) {
    std::vector<Placements> next;
    for (const Placements& l : lists) {
      for (const Placement& p : options) {
        Placements n = l;
        n.push_back(p);
        next.push_back(std::move(n));
      }
    }
    lists = std::move(next);
  }
  // Mixed Partial ops are an Error (only sum and avg mix).
  std::erase_if(lists, [](const Placements& l) {
    bool max = false;
    bool other = false;
    for (const Placement& p : l) {
      if (p.is_partial(ReduceOp::Max)) max = true;
      if (p.is_partial() && !p.is_partial(ReduceOp::Max)) other = true;
    }
    return max && other;
  });
  return lists;
}

inline Tensor reference(const Shape& shape) {
  Generator gen(1234 + static_cast<uint64_t>(shape.numel()));
  return randint(-20, 21, shape, kInt64, &gen).to(kFloat64);
}

// One part per rank of a group of n whose reduction by `op` is v; the draws depend only on seed,
// so every member of the group computes the same parts.
inline Tensor part_of(const Tensor& v, ReduceOp op, int64_t n, int64_t k, uint64_t seed) {
  Generator gen(seed);
  std::vector<Tensor> draws;
  for (int64_t i = 0; i < n; ++i) {
    const bool extremum = op == ReduceOp::Max || op == ReduceOp::Min;
    draws.push_back(randint(extremum ? 0 : -5, 6, v.sizes(), kInt64, &gen).to(kFloat64));
  }
  if (op == ReduceOp::Max || op == ReduceOp::Min) {
    // One rank holds v, the others values below (max) or above (min) it.
    const int64_t keeper = static_cast<int64_t>(seed % static_cast<uint64_t>(n));
    if (k == keeper) return v.clone();
    return op == ReduceOp::Max ? v - draws[static_cast<size_t>(k)]
                               : v + draws[static_cast<size_t>(k)];
  }
  Tensor others = zeros_like(v);
  for (int64_t i = 0; i + 1 < n; ++i) others = others + draws[static_cast<size_t>(i)];
  if (op == ReduceOp::Sum) return k + 1 < n ? draws[static_cast<size_t>(k)] : v - others;
  // Avg: v plus offsets that sum to zero.
  return k + 1 < n ? v + draws[static_cast<size_t>(k)] : v - others;
}

// The rank's part: the reference split, mesh dim by mesh dim, over every Partial dim (on the
// global tensor, so that ranks holding the same elements agree), then cut to the rank's shard.
// The split along mesh dim m depends only on the coordinates of earlier Partial dims, which the
// members of every later Partial group share.
inline Tensor make_local(const Tensor& ref, const DeviceMesh& mesh, const Placements& ps) {
  const std::vector<int64_t> coord = *mesh.get_coordinate();
  Tensor value = ref;
  uint64_t seed = 977;
  for (size_t m = 0; m < ps.size(); ++m) {
    if (!ps[m].is_partial()) continue;
    value = part_of(value, ps[m].reduce_op(), mesh.size(static_cast<int64_t>(m)), coord[m], seed);
    seed = seed * 31 + static_cast<uint64_t>(coord[m]) + 1;
  }
  return independent::local_block(value, mesh.shape(), ps, coord);
}

inline bool has_partial(const Placements& ps) {
  return std::any_of(ps.begin(), ps.end(), [](const Placement& p) { return p.is_partial(); });
}

inline bool has_strided(const Placements& ps) {
  return std::any_of(ps.begin(), ps.end(), [](const Placement& p) { return p.is_strided_shard(); });
}

// Which ordered pairs check_all_pairs runs: every `plain_stride`-th pair without a StridedShard
// (all of them by default), and every `strided_stride`-th pair with one (in a fixed order that
// walks sources and targets alike).
struct PairDraw {
  bool strided = false;
  int64_t strided_stride = 1;
  int64_t plain_stride = 1;
};

// Counts of the pairs run, for the test's message.
struct PairCount {
  int64_t pairs = 0;
  int64_t strided_pairs = 0;
};

// For the ordered pairs of placement lists on `mesh` that `draw` selects and every shape:
// full_tensor() after redistribute equals the reference exactly, and the local block is the one the
// independent reference (tests/dtensor/sharding_reference.h) gives. Returns failures (at most ~20).
inline std::vector<std::string> check_all_pairs(const DeviceMesh& mesh,
                                                const std::vector<Shape>& shapes, PairCount* count,
                                                PairDraw draw = {}) {
  std::vector<std::string> failures;
  const std::vector<int64_t> coord = *mesh.get_coordinate();
  int64_t strided_seen = 0;
  int64_t plain_seen = 0;
  for (const Shape& shape : shapes) {
    const Tensor ref = reference(shape);
    const auto lists =
        all_placement_lists(mesh.ndim(), static_cast<int64_t>(shape.size()), draw.strided);
    for (const Placements& src : lists) {
      const Tensor local = make_local(ref, mesh, src);
      const DTensor dt = DTensor::from_local(local, mesh, src,
                                             {.shape = shape, .stride = contiguous_strides(shape)});
      for (const Placements& dst : lists) {
        const bool strided = has_strided(src) || has_strided(dst);
        // A stride prime to the list count (5 to 7 plain options per mesh dim, 7 to 13 with the
        // StridedShards) spreads the drawn pairs over every source and every target.
        if (strided && strided_seen++ % draw.strided_stride != 0) continue;
        if (!strided && plain_seen++ % draw.plain_stride != 0) continue;
        std::string what =
            "shape " + fmt::format("{}", shape) + " " + to_string(src) + " -> " + to_string(dst);
        try {
          const DTensor out = dt.redistribute(dst);
          const Tensor expected_local = independent::local_block(ref, mesh.shape(), dst, coord);
          if (out.to_local().sizes() != expected_local.sizes()) {
            failures.push_back(what + ": local shape " + fmt::format("{}", out.to_local().sizes()) +
                               ", expected " + fmt::format("{}", expected_local.sizes()));
          } else if (!has_partial(dst) && !equal(out.to_local(), expected_local)) {
            failures.push_back(what + ": the local block differs from the reference's");
          }
          const Tensor full = out.full_tensor();
          if (!equal(full, ref))
            failures.push_back(what + ": full_tensor differs from the reference");
        } catch (const std::exception& e) {
          failures.push_back(what + ": " + e.what());
        }
        ++count->pairs;
        if (strided) ++count->strided_pairs;
        if (failures.size() > 20) return failures;
      }
    }
  }
  return failures;
}

}  // namespace tessera::dtensor_test
