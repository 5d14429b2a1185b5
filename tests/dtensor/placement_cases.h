#pragma once
// The placement lists and Partial sources the exhaustive redistribute tests draw from.

#include <vector>

#include "dtensor/sharding.h"
#include "tests/dtensor/dtensor_test_util.h"

namespace tessera::dtensor_test {

using dist::ReduceOp;

inline std::vector<Placements> all_placement_lists(int64_t mesh_ndim, int64_t tensor_ndim) {
  std::vector<Placement> options{Replicate(), Partial(ReduceOp::Sum), Partial(ReduceOp::Max),
                                 Partial(ReduceOp::Avg)};
  for (int64_t d = 0; d < tensor_ndim; ++d) options.push_back(Shard(d));
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
    draws.push_back(randint(op == ReduceOp::Max ? 0 : -5, 6, v.sizes(), kInt64, &gen).to(kFloat64));
  }
  if (op == ReduceOp::Max) {
    const int64_t keeper = static_cast<int64_t>(seed % static_cast<uint64_t>(n));
    return k == keeper ? v.clone() : v - draws[static_cast<size_t>(k)];
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
  const auto runs = dtensor::global_runs(ref.sizes(), mesh.shape(), ps, coord);
  for (size_t d = 0; d < runs.size(); ++d) {
    std::vector<Tensor> pieces;
    for (const dtensor::Run& r : runs[d]) {
      pieces.push_back(value.narrow(static_cast<int64_t>(d), r.offset, r.size));
    }
    if (pieces.empty()) pieces.push_back(value.narrow(static_cast<int64_t>(d), 0, 0));
    value = cat(pieces, static_cast<int64_t>(d));
  }
  return value.contiguous();
}

// For every ordered pair of placement lists on `mesh` and every shape: full_tensor() after
// redistribute equals the reference exactly, and the local shape is the spec's. Returns failures
// (at most ~20).
inline std::vector<std::string> check_all_pairs(const DeviceMesh& mesh,
                                                const std::vector<Shape>& shapes,
                                                int64_t* pairs_checked) {
  std::vector<std::string> failures;
  for (const Shape& shape : shapes) {
    const Tensor ref = reference(shape);
    const auto lists = all_placement_lists(mesh.ndim(), static_cast<int64_t>(shape.size()));
    for (const Placements& src : lists) {
      const Tensor local = make_local(ref, mesh, src);
      const DTensor dt = DTensor::from_local(local, mesh, src,
                                             {.shape = shape, .stride = contiguous_strides(shape)});
      for (const Placements& dst : lists) {
        std::string what =
            "shape " + fmt::format("{}", shape) + " " + to_string(src) + " -> " + to_string(dst);
        try {
          const DTensor out = dt.redistribute(dst);
          const Shape expected_local = out.spec().local_shape();
          if (out.to_local().sizes() != expected_local) {
            failures.push_back(what + ": local shape " + fmt::format("{}", out.to_local().sizes()) +
                               ", expected " + fmt::format("{}", expected_local));
          }
          const Tensor full = out.full_tensor();
          if (!equal(full, ref))
            failures.push_back(what + ": full_tensor differs from the reference");
        } catch (const std::exception& e) {
          failures.push_back(what + ": " + e.what());
        }
        ++*pairs_checked;
        if (failures.size() > 20) return failures;
      }
    }
  }
  return failures;
}

}  // namespace tessera::dtensor_test
