// Rules of views (view, reshape, transpose, permute, select, slice, unsqueeze, expand; narrow,
// flatten, squeeze, chunk, split and unbind are made of these). A view moves a shard to the dim
// its elements land on and keeps every Partial (views are linear). A dim the view cuts (select,
// slice) or that expand broadcasts must be whole.
//
// Note [Sharded reshape]
// view/reshape pair the input and output dims into groups of equal element count. A shard of
// input dim e stays a shard (of the group's first non-trivial output dim f) only when e is the
// group's first non-trivial input dim and either e and f have one size (a group of that one dim
// on each side: the view leaves the sharded dim as it is, so any chunking of it, uneven ones
// too, is the same on both sides) or both split evenly over the mesh: then every rank's block
// is the same contiguous range of the group's flattened elements on both sides. Otherwise
// ([12, 8] S(1) viewed as [16, 6], torch's known wrong case) the dim is gathered first.

#include <algorithm>

#include "tessera/dtensor/rules/rule_table.h"

namespace tessera::dtensor {
namespace {

using dist::ReduceOp;

const Shape& in_shape(const ShardingCall& call) { return call.inputs[0].shape; }

// Strategies from a map of input dim -> output dim (-1: the dim must be whole), plus Partial.
std::vector<ShardingStrategy> mapped(const ShardingCall& call,
                                     const std::vector<int64_t>& out_dim_of) {
  std::vector<ShardingStrategy> list;
  for (size_t e = 0; e < out_dim_of.size(); ++e) {
    if (out_dim_of[e] >= 0) {
      list.push_back({{Shard(out_dim_of[e])}, {Shard(static_cast<int64_t>(e))}});
    }
  }
  const Placement& current = call.inputs[0].placements[static_cast<size_t>(call.mesh_dim)];
  const bool reshapes = call.op == "view" || call.op == "reshape";
  if (current.is_strided_shard() && !reshapes &&
      out_dim_of[static_cast<size_t>(current.dim())] >= 0) {
    list.push_back(
        {{StridedShard(out_dim_of[static_cast<size_t>(current.dim())], current.split_factor())},
         {current}});
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}) {
    list.push_back({{Partial(op)}, {Partial(op)}});
  }
  return list;
}

std::vector<int64_t> identity_dims(size_t n) {
  std::vector<int64_t> m(n);
  for (size_t i = 0; i < n; ++i) m[i] = static_cast<int64_t>(i);
  return m;
}

// ---- view / reshape (Note [Sharded reshape]) ----

std::vector<int64_t> reshape_map(const ShardingCall& call) {
  const Shape& in = in_shape(call);
  const Shape& out = call.attrs.ints;
  std::vector<int64_t> map(in.size(), -1);
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    // One group: advance both sides until the element counts agree (and are not both empty).
    const size_t i0 = i, o0 = o;
    int64_t pi = 1, po = 1;
    if (i < in.size()) pi *= in[i++];
    if (o < out.size()) po *= out[o++];
    while (pi != po && (i < in.size() || o < out.size())) {
      if ((pi < po && i < in.size()) || o >= out.size()) {
        pi *= in[i++];
      } else {
        po *= out[o++];
      }
    }
    // Absorb trailing size-1 dims into neither group: they form their own groups next round.
    size_t first_in = i0, first_out = o0;
    while (first_in < i && in[first_in] == 1) ++first_in;
    while (first_out < o && out[first_out] == 1) ++first_out;
    if (i == i0 + 1 && o == o0 + 1 && pi == po) {
      map[i0] = static_cast<int64_t>(o0);  // one dim kept as it is, size 1 included
    } else if (first_in < i && first_out < o && pi == po) {
      const int64_t e = in[first_in], f = out[first_out];
      if (e == f || (splits_evenly(call, e) && splits_evenly(call, f))) {
        map[first_in] = static_cast<int64_t>(first_out);
      }
    }
  }
  return map;
}

std::vector<Shape> reshape_shape(const ShardingCall& call) { return {call.attrs.ints}; }

// A StridedShard(e, sf) block is the rank's chunk of each of sf equal pieces of dim e: as ranges
// of the group's flattened elements, the same as StridedShard(f, sf) of the group's output dim f
// when both dims cut into sf x (mesh size) equal parts (conservative, as splits_evenly, since
// other mesh dims may shard the dim too). torch 2.15 carries it likewise, with no collective.
std::vector<ShardingStrategy> reshape_strategies(const ShardingCall& call) {
  const std::vector<int64_t> map = reshape_map(call);
  std::vector<ShardingStrategy> list = mapped(call, map);
  const Placement& current = call.inputs[0].placements[static_cast<size_t>(call.mesh_dim)];
  if (!current.is_strided_shard()) return list;
  const auto e = static_cast<size_t>(current.dim());
  const int64_t f = map[e];
  const int64_t parts = current.split_factor() * call.mesh.size();
  if (f >= 0 && in_shape(call)[e] % parts == 0 &&
      call.attrs.ints[static_cast<size_t>(f)] % parts == 0) {
    list.push_back({{StridedShard(f, current.split_factor())}, {current}});
  }
  return list;
}

// ---- the other views ----

std::vector<int64_t> transpose_map(const ShardingCall& call) {
  std::vector<int64_t> map = identity_dims(in_shape(call).size());
  if (map.empty()) return map;
  std::swap(map[static_cast<size_t>(call.attrs.ints[0])],
            map[static_cast<size_t>(call.attrs.ints[1])]);
  return map;
}
std::vector<Shape> transpose_shape(const ShardingCall& call) {
  Shape s = in_shape(call);
  if (!s.empty()) {
    std::swap(s[static_cast<size_t>(call.attrs.ints[0])],
              s[static_cast<size_t>(call.attrs.ints[1])]);
  }
  return {s};
}

std::vector<int64_t> permute_map(const ShardingCall& call) {
  std::vector<int64_t> map(in_shape(call).size());
  for (size_t i = 0; i < call.attrs.ints.size(); ++i) {
    map[static_cast<size_t>(call.attrs.ints[i])] = static_cast<int64_t>(i);
  }
  return map;
}
std::vector<Shape> permute_shape(const ShardingCall& call) {
  Shape s;
  for (int64_t d : call.attrs.ints) s.push_back(in_shape(call)[static_cast<size_t>(d)]);
  return {s};
}

// select(d, index): dim d disappears.
std::vector<int64_t> select_map(const ShardingCall& call) {
  const int64_t d = call.attrs.ints[0];
  std::vector<int64_t> map = identity_dims(in_shape(call).size());
  for (auto& m : map) {
    if (m == d) {
      m = -1;
    } else if (m > d) {
      --m;
    }
  }
  return map;
}
std::vector<Shape> select_shape(const ShardingCall& call) {
  Shape s = in_shape(call);
  s.erase(s.begin() + call.attrs.ints[0]);
  return {s};
}

// slice(d, start, end, step) (start/end already clamped).
std::vector<int64_t> slice_map(const ShardingCall& call) {
  std::vector<int64_t> map = identity_dims(in_shape(call).size());
  map[static_cast<size_t>(call.attrs.ints[0])] = -1;
  return map;
}
std::vector<Shape> slice_shape(const ShardingCall& call) {
  Shape s = in_shape(call);
  const int64_t start = call.attrs.ints[1], end = call.attrs.ints[2], step = call.attrs.ints[3];
  s[static_cast<size_t>(call.attrs.ints[0])] = (end - start + step - 1) / step;
  return {s};
}

std::vector<int64_t> unsqueeze_map(const ShardingCall& call) {
  std::vector<int64_t> map = identity_dims(in_shape(call).size());
  for (auto& m : map) {
    if (m >= call.attrs.ints[0]) ++m;
  }
  return map;
}
std::vector<Shape> unsqueeze_shape(const ShardingCall& call) {
  Shape s = in_shape(call);
  s.insert(s.begin() + call.attrs.ints[0], 1);
  return {s};
}

// expand(sizes) (sizes resolved): input dims align right; a broadcast (size-1) dim must be whole.
std::vector<int64_t> expand_map(const ShardingCall& call) {
  const Shape& in = in_shape(call);
  const Shape& out = call.attrs.ints;
  const auto lead = static_cast<int64_t>(out.size() - in.size());
  std::vector<int64_t> map(in.size(), -1);
  for (size_t e = 0; e < in.size(); ++e) {
    if (in[e] == out[e + static_cast<size_t>(lead)]) map[e] = static_cast<int64_t>(e) + lead;
  }
  return map;
}

using MapFn = std::vector<int64_t> (*)(const ShardingCall&);

ShardingRuleFn view_rule(MapFn map) {
  return [map](const ShardingCall& call) { return mapped(call, map(call)); };
}

}  // namespace

void add_view_rules(RuleTable& table) {
  table["view"] = OpRule{reshape_strategies, reshape_shape, "", false, true};
  table["reshape"] = OpRule{reshape_strategies, reshape_shape, "", false, true};
  table["transpose"] = OpRule{view_rule(transpose_map), transpose_shape, "", false, true};
  table["permute"] = OpRule{view_rule(permute_map), permute_shape, "", false, true};
  table["select"] = OpRule{view_rule(select_map), select_shape, "", false, true};
  table["slice"] = OpRule{view_rule(slice_map), slice_shape, "", false, true};
  table["unsqueeze"] = OpRule{view_rule(unsqueeze_map), unsqueeze_shape, "", false, true};
  table["expand"] = OpRule{view_rule(expand_map), reshape_shape, "", false, true};
}

}  // namespace tessera::dtensor
