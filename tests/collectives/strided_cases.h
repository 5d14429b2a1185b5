#pragma once
// all_gather_into_tensor, reduce_scatter_tensor and all_to_all_single on strided views (Note
// [Strided tensors in collectives]): blocks of a tensor along an inner dim, transposed inputs and
// outputs. Every rank can compute every other rank's data (exact small integers in float64); each
// runs the collectives and returns what it found wrong (ranks never call Catch2).

#include <fmt/format.h>

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

// Each block is [rows, width]. Widths that do not divide reduce_scatter's slices (1 / n of a
// block, rounded to a cache line) put the threads backend's rank boundaries in the middle of rows,
// where a rank's first run of every block (Note [Interleaved blocks]) is a partial one.
inline std::vector<std::string> check_strided_collectives(const tessera::dist::ProcessGroupPtr& pg,
                                                          int64_t rows, int64_t width) {
  namespace ts = tessera;
  std::vector<std::string> failures;
  const int n = pg->size();
  const int r = pg->rank();
  const int64_t w = width;
  const auto expect = [&](const ts::Tensor& got, const ts::Tensor& want, const char* what) {
    if (!ts::equal(got.contiguous(), want)) {
      failures.push_back(fmt::format("{} differs (blocks of [{}, {}])", what, rows, w));
    }
  };

  // all_gather_into_tensor: each rank's [rows, w] (transposed in memory) lands in
  // columns [wq, wq + w) of a [rows, wn] output.
  {
    const ts::Tensor in = transposed_copy(strided_source(r, rows, w));
    const ts::Tensor out = ts::zeros({rows, w * n}, ts::kFloat64);
    pg->all_gather_into_tensor(column_blocks(out, n), in)->wait();
    std::vector<ts::Tensor> parts;
    for (int q = 0; q < n; ++q) parts.push_back(strided_source(q, rows, w));
    expect(out, ts::cat(parts, 1), "all_gather_into_tensor into column blocks");
  }
  // reduce_scatter_tensor: column block r of every rank's [rows, wn], summed, into a
  // transposed output.
  {
    const ts::Tensor in = strided_source(r, rows, w * n);
    const ts::Tensor out = ts::zeros({w, rows}, ts::kFloat64).t();
    pg->reduce_scatter_tensor(out, column_blocks(in, n), tessera::dist::ReduceOp::Sum)->wait();
    ts::Tensor want = ts::zeros({rows, w}, ts::kFloat64);
    for (int q = 0; q < n; ++q) want = want + strided_source(q, rows, w * n).narrow(1, w * r, w);
    expect(out, want, "reduce_scatter_tensor from column blocks");
  }
  // The same into a contiguous output, as a redistribute from Partial to Shard(1) runs it (the
  // threads backend reduces many rows of every block per step).
  {
    const ts::Tensor in = strided_source(r, rows, w * n);
    const ts::Tensor out = ts::zeros({rows, w}, ts::kFloat64);
    pg->reduce_scatter_tensor(out, column_blocks(in, n), tessera::dist::ReduceOp::Sum)->wait();
    ts::Tensor want = ts::zeros({rows, w}, ts::kFloat64);
    for (int q = 0; q < n; ++q) want = want + strided_source(q, rows, w * n).narrow(1, w * r, w);
    expect(out, want, "reduce_scatter_tensor from column blocks into a contiguous output");
  }
  // all_to_all_single: column block j of rank q's [rows, wn] goes to rank j, which stacks what
  // it receives by rows into a [rows n, w] output held transposed in memory.
  {
    const ts::Tensor in = strided_source(r, rows, w * n);
    const ts::Tensor out = ts::zeros({w, rows * n}, ts::kFloat64).t();
    pg->all_to_all_single(out.view({n, rows, w}), column_blocks(in, n))->wait();
    std::vector<ts::Tensor> parts;
    for (int q = 0; q < n; ++q) parts.push_back(strided_source(q, rows, w * n).narrow(1, w * r, w));
    expect(out, ts::cat(parts, 0), "all_to_all_single between column blocks");
  }
  // all_to_all_single into a contiguous output from column blocks (the threads backend pushes
  // each rank's blocks into the peers' outputs).
  {
    const ts::Tensor in = strided_source(r, rows, w * n);
    const ts::Tensor out = ts::zeros({rows * n, w}, ts::kFloat64);
    pg->all_to_all_single(out.view({n, rows, w}), column_blocks(in, n))->wait();
    std::vector<ts::Tensor> parts;
    for (int q = 0; q < n; ++q) parts.push_back(strided_source(q, rows, w * n).narrow(1, w * r, w));
    expect(out, ts::cat(parts, 0), "all_to_all_single from column blocks into a contiguous output");
  }
  // Uneven splits of a transposed input: rank q sends rows(q, j) = (q + j) % 3 * rows rows to
  // rank j, from its [rows_sent, w] input held transposed in memory.
  {
    const auto rows_from = [&](int q, int j) { return (q + j) % 3 * rows; };
    std::vector<int64_t> in_splits, out_splits;
    int64_t sent = 0, received = 0;
    for (int q = 0; q < n; ++q) {
      in_splits.push_back(rows_from(r, q));
      out_splits.push_back(rows_from(q, r));
      sent += in_splits.back();
      received += out_splits.back();
    }
    const ts::Tensor in = transposed_copy(strided_source(r, sent, w));
    const ts::Tensor out = ts::zeros({received, w}, ts::kFloat64);
    pg->all_to_all_single(out, in, out_splits, in_splits)->wait();
    std::vector<ts::Tensor> parts;
    for (int q = 0; q < n; ++q) {
      int64_t first = 0;
      for (int j = 0; j < r; ++j) first += rows_from(q, j);
      parts.push_back(
          strided_source(q, first + rows_from(q, r), w).narrow(0, first, rows_from(q, r)));
    }
    expect(out, ts::cat(parts, 0), "all_to_all_single with uneven splits of a transposed input");
  }
  return failures;
}

}  // namespace coll_test
