#pragma once
// all_gather_into_tensor, reduce_scatter_tensor and all_to_all_single on strided views (Note
// [Strided tensors in collectives]): blocks of a tensor along an inner dim, transposed inputs and
// outputs. Every rank can compute every other rank's data (exact small integers in float64); each
// runs the collectives and returns what it found wrong (ranks never call Catch2).

#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace coll_test {

// Rank q's [rows, cols] tensor: q * 1000 + i * 10 + j.
inline tessera::Tensor strided_source(int q, int64_t rows, int64_t cols) {
  std::vector<double> v;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) v.push_back(q * 1000.0 + i * 10.0 + static_cast<double>(j));
  }
  return tessera::from_vector(v, {rows, cols});
}

// Blocks of t along dim 1 as a [n, rows, cols / n] view (block k = columns [k * w, (k + 1) * w)).
inline tessera::Tensor column_blocks(const tessera::Tensor& t, int n) {
  return t.view({t.size(0), n, t.size(1) / n}).permute({1, 0, 2});
}

// The [rows, cols] tensor t as a transposed view of fresh [cols, rows] memory, with t's values.
inline tessera::Tensor transposed_copy(const tessera::Tensor& t) { return t.t().contiguous().t(); }

inline std::vector<std::string> check_strided_collectives(
    const tessera::dist::ProcessGroupPtr& pg) {
  namespace ts = tessera;
  std::vector<std::string> failures;
  const int n = pg->size();
  const int r = pg->rank();
  const auto expect = [&](const ts::Tensor& got, const ts::Tensor& want, const char* what) {
    if (!ts::equal(got.contiguous(), want)) failures.push_back(std::string(what) + " differs");
  };

  // all_gather_into_tensor: each rank's [3, 2] (transposed in memory) lands in columns
  // [2q, 2q + 2) of a [3, 2n] output.
  {
    const ts::Tensor in = transposed_copy(strided_source(r, 3, 2));
    const ts::Tensor out = ts::zeros({3, 2 * n}, ts::kFloat64);
    pg->all_gather_into_tensor(column_blocks(out, n), in)->wait();
    std::vector<ts::Tensor> parts;
    for (int q = 0; q < n; ++q) parts.push_back(strided_source(q, 3, 2));
    expect(out, ts::cat(parts, 1), "all_gather_into_tensor into column blocks");
  }
  // reduce_scatter_tensor: column block r of every rank's [3, 2n], summed, into a transposed
  // output.
  {
    const ts::Tensor in = strided_source(r, 3, 2 * n);
    const ts::Tensor out = ts::zeros({2, 3}, ts::kFloat64).t();
    pg->reduce_scatter_tensor(out, column_blocks(in, n), tessera::dist::ReduceOp::Sum)->wait();
    ts::Tensor want = ts::zeros({3, 2}, ts::kFloat64);
    for (int q = 0; q < n; ++q) want = want + strided_source(q, 3, 2 * n).narrow(1, 2 * r, 2);
    expect(out, want, "reduce_scatter_tensor from column blocks");
  }
  // all_to_all_single: column block j of rank q's [3, 2n] goes to rank j, which stacks what it
  // receives by rows into a [3n, 2] output held transposed in memory.
  {
    const ts::Tensor in = strided_source(r, 3, 2 * n);
    const ts::Tensor out = ts::zeros({2, 3 * n}, ts::kFloat64).t();
    pg->all_to_all_single(out.view({n, 3, 2}), column_blocks(in, n))->wait();
    std::vector<ts::Tensor> parts;
    for (int q = 0; q < n; ++q) parts.push_back(strided_source(q, 3, 2 * n).narrow(1, 2 * r, 2));
    expect(out, ts::cat(parts, 0), "all_to_all_single between column blocks");
  }
  return failures;
}

}  // namespace coll_test
