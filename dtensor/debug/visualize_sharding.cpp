#include "tessera/dtensor/debug/visualize_sharding.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <set>

#include "tessera/runtime/error.h"

namespace tessera::debug {

namespace {

std::vector<int64_t> coordinate_of(int64_t rank_index, const Shape& mesh_shape) {
  std::vector<int64_t> c(mesh_shape.size());
  for (int64_t d = static_cast<int64_t>(mesh_shape.size()) - 1; d >= 0; --d) {
    c[static_cast<size_t>(d)] = rank_index % mesh_shape[static_cast<size_t>(d)];
    rank_index /= mesh_shape[static_cast<size_t>(d)];
  }
  return c;
}

// Cut points of a dim: every run boundary of every rank.
std::vector<int64_t> cuts(const std::vector<std::vector<std::vector<dtensor::Run>>>& runs,
                          size_t dim, int64_t length) {
  std::set<int64_t> points{0, length};
  for (const auto& rank_runs : runs) {
    for (const dtensor::Run& r : rank_runs[dim]) {
      points.insert(r.offset);
      points.insert(r.offset + r.size);
    }
  }
  return {points.begin(), points.end()};
}

bool holds(const std::vector<dtensor::Run>& runs, int64_t lo, int64_t hi) {
  return std::any_of(runs.begin(), runs.end(), [&](const dtensor::Run& r) {
    return r.offset <= lo && hi <= r.offset + r.size;
  });
}

}  // namespace

std::string visualize_sharding(const DTensor& dt, const std::string& header) {
  TS_CHECK(dt.ndim() == 1 || dt.ndim() == 2,
           "[visualize_sharding] draws 1-D and 2-D DTensors, got ", dt.ndim(), " dims (shape ",
           dt.shape(), ")");
  const DTensorSpec& spec = dt.spec();
  const Shape& mesh_shape = spec.mesh.shape();
  std::vector<std::vector<std::vector<dtensor::Run>>> runs;
  for (int64_t r = 0; r < mesh_shape.numel(); ++r) {
    runs.push_back(spec.global_runs(coordinate_of(r, mesh_shape)));
  }
  const bool two_d = dt.ndim() == 2;
  const std::vector<int64_t> row_cuts = cuts(runs, 0, dt.size(0));
  const std::vector<int64_t> col_cuts =
      two_d ? cuts(runs, 1, dt.size(1)) : std::vector<int64_t>{0, 1};
  std::vector<std::string> col_names{""};
  for (size_t j = 0; j + 1 < col_cuts.size(); ++j) {
    col_names.push_back(two_d ? fmt::format("col {}:{}", col_cuts[j], col_cuts[j + 1]) : "");
  }
  std::vector<std::vector<std::string>> table{col_names};
  for (size_t i = 0; i + 1 < row_cuts.size(); ++i) {
    std::vector<std::string> row{
        fmt::format("{} {}:{}", two_d ? "row" : "elements", row_cuts[i], row_cuts[i + 1])};
    for (size_t j = 0; j + 1 < col_cuts.size(); ++j) {
      std::vector<std::string> ranks;
      for (size_t r = 0; r < runs.size(); ++r) {
        const bool in_rows = holds(runs[r][0], row_cuts[i], row_cuts[i + 1]);
        const bool in_cols = !two_d || holds(runs[r][1], col_cuts[j], col_cuts[j + 1]);
        if (in_rows && in_cols) ranks.push_back(std::to_string(spec.mesh.ranks()[r]));
      }
      row.push_back(fmt::format("rank{} {}", ranks.size() == 1 ? "" : "s", fmt::join(ranks, ",")));
    }
    table.push_back(std::move(row));
  }
  std::vector<size_t> widths(table[0].size(), 0);
  for (const auto& row : table) {
    for (size_t j = 0; j < row.size(); ++j) widths[j] = std::max(widths[j], row[j].size());
  }
  std::string out = header.empty() ? "" : header + "\n";
  out += fmt::format("Placements {} on mesh {}, shape {}\n", to_string(spec.placements), mesh_shape,
                     dt.shape());
  for (const auto& row : table) {
    for (size_t j = 0; j < row.size(); ++j) out += fmt::format("{:<{}}  ", row[j], widths[j]);
    out += "\n";
  }
  const auto coord = spec.mesh.get_coordinate();
  const bool first = coord.has_value() &&
                     std::all_of(coord->begin(), coord->end(), [](int64_t c) { return c == 0; });
  if (first) std::cout << out << std::flush;
  return out;
}

}  // namespace tessera::debug
