// StridedShard: the torch documentation's example, and every function that maps a rank to the
// global elements it holds (sharding runs, local shapes, chunk_list, distribute_tensor, the
// factories, visualize_sharding) against the independent reference of
// tests/dtensor/sharding_reference.h, for every placement list with a StridedShard.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "tessera/dtensor/debug/visualize_sharding.h"
#include "tessera/dtensor/sharding.h"
#include "tests/dtensor/placement_cases.h"

namespace tessera::dtensor_test {
namespace {

using independent::Indices;

std::vector<Placements> strided_lists(int64_t mesh_ndim, int64_t tensor_ndim) {
  std::vector<Placements> lists = all_placement_lists(mesh_ndim, tensor_ndim, true);
  std::erase_if(lists, [](const Placements& ps) { return !has_strided(ps); });
  return lists;
}

Indices expand(const std::vector<dtensor::Run>& runs) {
  Indices out;
  for (const dtensor::Run& r : runs) {
    for (int64_t i = 0; i < r.size; ++i) out.push_back(r.offset + i);
  }
  return out;
}

TEST_CASE("StridedShard: the torch documentation's 2x2 example", "[dtensor][strided]") {
  on_mesh({2, 2},
          [](const DeviceMesh& mesh) {
            std::vector<std::string> f;
            const Tensor t = arange(64, kFloat32).reshape({8, 8});
            const DTensor dt = distribute_tensor(t, mesh, {StridedShard(0, 2), Shard(0)});
            // Coordinate (i, j) holds rows of shard 2j + i (the docs' table: rank 1 rows 4-5, rank
            // 2 rows 2-3).
            const int64_t i = mesh.get_local_rank("dp");
            const int64_t j = mesh.get_local_rank("tp");
            if (!equal(dt.to_local(), t.narrow(0, 2 * (2 * j + i), 2))) f.push_back("to_local");
            if (!equal(dt.redistribute({Replicate(), Replicate()}).to_local(), t)) {
              f.push_back("redistribute to [R, R]");
            }
            if (!equal(dt.full_tensor(), t)) f.push_back("full_tensor");
            if (!equal(dt.redistribute({Shard(0), Shard(0)}).to_local(),
                       t.narrow(0, 2 * (2 * i + j), 2))) {
              f.push_back("redistribute to [S(0), S(0)]");
            }
            return f;
          },
          {"dp", "tp"});
}

TEST_CASE("StridedShard: sharding runs and local shapes agree with the reference",
          "[dtensor][strided]") {
  int64_t checked = 0;
  for (const Shape& mesh : std::vector<Shape>{{4}, {2, 2}, {2, 3}, {2, 2, 2}}) {
    for (const Shape& shape : std::vector<Shape>{{7}, {12}, {0}, {5, 3}, {6, 4}, {3, 1, 5}}) {
      for (const Placements& ps :
           strided_lists(static_cast<int64_t>(mesh.size()), static_cast<int64_t>(shape.size()))) {
        for (int64_t r = 0; r < mesh.numel(); ++r) {
          const std::vector<int64_t> coord = independent::coordinate_of(r, mesh);
          const auto expected = independent::held_indices(shape, mesh, ps, coord);
          const auto runs = dtensor::global_runs(shape, mesh, ps, coord);
          Shape expected_shape;
          for (size_t d = 0; d < shape.size(); ++d) {
            INFO("mesh " << mesh << " shape " << shape << " " << ps << " coordinate " << r
                         << " dim " << d);
            REQUIRE(expand(runs[d]) == expected[d]);
            expected_shape.push_back(static_cast<int64_t>(expected[d].size()));
          }
          REQUIRE(dtensor::local_shape(shape, mesh, ps, coord) == expected_shape);
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 10000);
}

// The flat indices of a rank's chunks, as a set (chunk_list describes which elements, not their
// order in the local tensor).
std::set<int64_t> elements_of(const std::vector<ChunkMeta>& chunks, const Shape& shape) {
  std::set<int64_t> out;
  const Shape strides = contiguous_strides(shape);
  for (const ChunkMeta& c : chunks) {
    std::vector<int64_t> index(shape.size(), 0);
    if (Shape(c.sizes).numel() == 0) continue;
    while (true) {
      int64_t flat = 0;
      for (size_t d = 0; d < shape.size(); ++d) flat += (c.offsets[d] + index[d]) * strides[d];
      out.insert(flat);
      size_t d = shape.size();
      while (d-- > 0 && ++index[d] == c.sizes[d]) index[d] = 0;
      if (d == static_cast<size_t>(-1)) break;
    }
  }
  return out;
}

std::set<int64_t> elements_of(const std::vector<Indices>& held, const Shape& shape) {
  std::set<int64_t> out;
  const Shape strides = contiguous_strides(shape);
  std::vector<int64_t> flat{0};
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<int64_t> next;
    for (int64_t base : flat) {
      for (int64_t i : held[d]) next.push_back(base + i * strides[d]);
    }
    flat = std::move(next);
  }
  if (shape.numel() > 0) out.insert(flat.begin(), flat.end());
  return out;
}

TEST_CASE("StridedShard: chunk_list, distribute_tensor and the factories agree with the reference",
          "[dtensor][strided]") {
  for (const Shape& mesh_shape : std::vector<Shape>{{4}, {2, 2}, {2, 3}, {2, 2, 2}}) {
    // Rank-2 tensors on the 8-rank mesh would be 1000 lists; rank 1 covers its mesh dims.
    const std::vector<Shape> shapes = mesh_shape.size() == 3
                                          ? std::vector<Shape>{{7}, {12}}
                                          : std::vector<Shape>{{7}, {12}, {5, 3}};
    on_mesh(mesh_shape, [&](const DeviceMesh& mesh) {
      std::vector<std::string> f;
      const std::vector<int64_t> coord = *mesh.get_coordinate();
      for (const Shape& shape : shapes) {
        const Tensor full = reference(shape);
        for (const Placements& ps :
             strided_lists(mesh.ndim(), static_cast<int64_t>(shape.size()))) {
          const std::string what = fmt::format("shape {} {}: ", shape, to_string(ps));
          const auto held = independent::held_indices(shape, mesh.shape(), ps, coord);
          const DTensor x = distribute_tensor(full, mesh, ps);
          // A Partial(sum) keeps the value on coordinate 0 of its mesh dim and zeros elsewhere.
          const bool summed = std::any_of(
              ps.begin(), ps.end(), [](const Placement& p) { return p.is_partial(ReduceOp::Sum); });
          if (!summed && !equal(x.to_local(), independent::take(full, held))) {
            f.push_back(what + "distribute");
          }
          if (elements_of(x.chunk_list(), shape) != elements_of(held, shape)) {
            f.push_back(what + "chunk_list");
          }
          // The factories make no Partial (their own tests say so).
          if (has_partial(ps)) continue;
          Generator single(7);
          Generator sharded(7);
          const DTensor r =
              dtensor::rand(shape, {.mesh = mesh, .placements = ps, .dtype = kFloat64}, &sharded);
          if (!equal(r.to_local(), independent::take(rand(shape, kFloat64, &single), held))) {
            f.push_back(what + "rand");
          }
          if (shape.size() == 1) {
            const DTensor l = dtensor::linspace(
                -1.0, 2.0, shape[0], {.mesh = mesh, .placements = ps, .dtype = kFloat64});
            if (!equal(l.to_local(),
                       independent::take(linspace(-1.0, 2.0, shape[0], kFloat64), held))) {
              f.push_back(what + "linspace");
            }
          }
        }
      }
      return f;
    });
  }
}

// The "begin:end" ranges on a line of the drawing, left to right. Parsed by hand: <regex> trips
// GCC 12's -Wmaybe-uninitialized under -fsanitize=address at -O2, and the asan CI job uses -Werror.
std::vector<std::pair<int64_t, int64_t>> ranges_in(const std::string& line) {
  std::vector<std::pair<int64_t, int64_t>> found;
  const auto digit = [&](size_t i) {
    return i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]));
  };
  for (size_t i = 0; i < line.size();) {
    if (!digit(i) || (i > 0 && digit(i - 1))) {
      ++i;
      continue;
    }
    size_t colon = i;
    while (digit(colon)) ++colon;
    size_t end = colon + 1;
    if (colon < line.size() && line[colon] == ':' && digit(end)) {
      while (digit(end)) ++end;
      found.emplace_back(std::stoll(line.substr(i, colon - i)),
                         std::stoll(line.substr(colon + 1, end - colon - 1)));
    }
    i = std::max(colon, i + 1);
  }
  return found;
}

// The rank lists of the cells on a line: what follows "rank " or "ranks ", as comma-separated ids.
std::vector<std::set<int>> rank_lists_in(const std::string& line) {
  std::vector<std::set<int>> lists;
  for (size_t at = line.find("rank"); at != std::string::npos; at = line.find("rank", at + 1)) {
    size_t i = at + 4;
    if (i < line.size() && line[i] == 's') ++i;
    if (i >= line.size() || line[i] != ' ') continue;
    ++i;
    std::set<int> ranks;
    std::string number;
    for (; i <= line.size(); ++i) {
      const char ch = i < line.size() ? line[i] : ' ';
      if (std::isdigit(static_cast<unsigned char>(ch))) {
        number += ch;
        continue;
      }
      if (!number.empty()) ranks.insert(std::stoi(number));
      number.clear();
      if (ch != ',') break;
    }
    lists.push_back(std::move(ranks));
  }
  return lists;
}

// The ranks visualize_sharding lists in every cell, by [row, col) ranges: {row begin, row end, col
// begin, col end} -> ranks.
using Cells = std::map<std::vector<int64_t>, std::set<int>>;

Cells parse_drawing(const std::string& drawing) {
  Cells cells;
  std::istringstream lines(drawing);
  std::string line;
  std::vector<std::pair<int64_t, int64_t>> cols{{0, 1}};
  while (std::getline(lines, line)) {
    if (line.rfind("Placements", 0) == 0) continue;
    if (line.find("col ") != std::string::npos) {
      cols = ranges_in(line);
      continue;
    }
    const auto rows = ranges_in(line);
    if (rows.empty()) continue;
    const auto [lo, hi] = rows.front();
    const auto lists = rank_lists_in(line);
    for (size_t c = 0; c < lists.size(); ++c) {
      const auto col = c < cols.size() ? cols[c] : std::pair<int64_t, int64_t>{-1, -1};
      cells[{lo, hi, col.first, col.second}] = lists[c];
    }
  }
  return cells;
}

TEST_CASE("StridedShard: visualize_sharding draws the reference's owners", "[dtensor][strided]") {
  for (const Shape& mesh_shape : std::vector<Shape>{{4}, {2, 2}, {2, 3}}) {
    on_mesh(mesh_shape, [&](const DeviceMesh& mesh) {
      std::vector<std::string> f;
      for (const Shape& shape : std::vector<Shape>{{7}, {12}, {6, 5}}) {
        const bool two_d = shape.size() == 2;
        for (const Placements& ps :
             strided_lists(mesh.ndim(), static_cast<int64_t>(shape.size()))) {
          const std::string drawing =
              debug::visualize_sharding(distribute_tensor(ones(shape), mesh, ps));
          // Owners of every element by the reference.
          std::map<std::pair<int64_t, int64_t>, std::set<int>> owners;
          for (int64_t r = 0; r < mesh.size(); ++r) {
            const auto held = independent::held_indices(
                shape, mesh.shape(), ps, independent::coordinate_of(r, mesh.shape()));
            const Indices cols = two_d ? held[1] : Indices{0};
            for (int64_t i : held[0]) {
              for (int64_t j : cols) owners[{i, j}].insert(mesh.ranks()[static_cast<size_t>(r)]);
            }
          }
          int64_t covered = 0;
          for (const auto& [cell, ranks] : parse_drawing(drawing)) {
            for (int64_t i = cell[0]; i < cell[1]; ++i) {
              for (int64_t j = cell[2]; j < cell[3]; ++j) {
                ++covered;
                if (owners[{i, j}] != ranks) {
                  f.push_back(fmt::format("{} {}: element ({}, {}) drawn wrong:\n{}", shape,
                                          to_string(ps), i, j, drawing));
                  return f;
                }
              }
            }
          }
          if (covered != (two_d ? shape.numel() : shape[0])) {
            f.push_back(fmt::format("{} {}: the drawing covers {} elements:\n{}", shape,
                                    to_string(ps), covered, drawing));
          }
        }
      }
      return f;
    });
  }
}

// torch 2.15's test_utils view propagation: a view that moves a StridedShard'ed dim keeps it
// StridedShard on the dim its elements land on, with no collective, and shares the data.
TEST_CASE("StridedShard: view and reshape carry it to the output dim without collectives",
          "[dtensor][strided]") {
  on_mesh({2, 2, 2}, [](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    const Tensor t = arange(32 * 32 * 4, kFloat64).reshape({32, 32, 4});
    const Placements in{StridedShard(0, 2), StridedShard(1, 2), Shard(0)};
    const DTensor d = distribute_tensor(t, mesh, in);
    struct Case {
      Shape shape;
      Placements want;
    };
    for (const Case& c :
         {Case{{32, 1, 32, 4}, {StridedShard(0, 2), StridedShard(2, 2), Shard(0)}},
          Case{{32, 32, 2, 2}, in},
          Case{{32, 1, 32, 1, 4}, {StridedShard(0, 2), StridedShard(2, 2), Shard(0)}}}) {
      debug::CommDebugMode mode;
      const DTensor v(d.view(c.shape));
      if (mode.get_total_counts() != 0) f.push_back("view collectives:\n" + mode.tracing_table());
      if (v.placements() != c.want) {
        std::ostringstream os;
        os << "view " << c.shape << " gives " << v.placements() << ", want " << c.want;
        f.push_back(os.str());
      }
      if (!v.to_local().is_alias_of(d.to_local())) f.push_back("the view copied");
      if (!equal(v.full_tensor(), t.view(c.shape))) f.push_back("values differ");
    }
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
