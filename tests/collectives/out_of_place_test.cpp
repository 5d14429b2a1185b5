// all_reduce_into (out of place) and collectives on strided views, on the threads backend.

#include <catch2/catch.hpp>
#include <mutex>

#include "tessera/tessera.h"
#include "tests/collectives/strided_cases.h"

namespace dist = tessera::dist;
namespace ts = tessera;

TEST_CASE("threads: all_reduce_into leaves its input and writes the reduction",
          "[collectives][threads]") {
  for (int n : {1, 2, 3, 4}) {
    for (int64_t numel : {int64_t{5}, int64_t{100000}}) {  // the small and the chunked paths
      std::mutex mutex;
      std::vector<std::string> failures;
      dist::run_threads(n, [&](dist::ProcessGroupPtr pg) {
        const ts::Tensor in = ts::full({numel}, static_cast<double>(pg->rank() + 1), ts::kFloat64);
        const ts::Tensor out = ts::zeros({numel}, ts::kFloat64);
        for (bool async : {false, true}) {
          pg->all_reduce_into(out, in, dist::ReduceOp::Sum, {.async_op = async})->wait();
          const double expected = n * (n + 1) / 2.0;
          std::lock_guard<std::mutex> lock(mutex);
          if (!ts::equal(out, ts::full({numel}, expected, ts::kFloat64))) {
            failures.push_back("wrong sum");
          }
          if (!ts::equal(in,
                         ts::full({numel}, static_cast<double>(pg->rank() + 1), ts::kFloat64))) {
            failures.push_back("input modified");
          }
        }
      });
      INFO("world " << n << ", " << numel << " elements");
      for (const auto& f : failures) FAIL_CHECK(f);
    }
  }
}

TEST_CASE("threads: all_gather writes strided blocks of one tensor", "[collectives][threads]") {
  for (int n : {1, 2, 3, 4}) {
    std::mutex mutex;
    std::vector<std::string> failures;
    dist::run_threads(n, [&](dist::ProcessGroupPtr pg) {
      // Rank r holds columns [r * 2, r * 2 + 2) of a [3, 2n] tensor (rank n-1 one column fewer).
      const int64_t cols = 2 * n - 1;
      const ts::Tensor full = ts::arange(3 * cols, ts::kFloat32).reshape({3, cols});
      const auto width = [&](int q) { return q + 1 < n ? int64_t{2} : cols - 2 * (n - 1); };
      const ts::Tensor in = full.narrow(1, 2 * pg->rank(), width(pg->rank())).contiguous();
      const ts::Tensor out = ts::zeros({3, cols});
      std::vector<ts::Tensor> outs;
      for (int q = 0; q < n; ++q) outs.push_back(out.narrow(1, 2 * q, width(q)));
      pg->all_gather(outs, in)->wait();
      std::lock_guard<std::mutex> lock(mutex);
      if (!ts::equal(out, full)) failures.push_back("rank " + std::to_string(pg->rank()));
    });
    INFO("world " << n);
    for (const auto& f : failures) FAIL_CHECK(f);
  }
}

TEST_CASE(
    "threads: all_gather_into_tensor, reduce_scatter_tensor and all_to_all_single move "
    "strided views in place",
    "[collectives][threads]") {
  for (int n : {1, 2, 3, 4}) {
    std::mutex mutex;
    std::vector<std::string> failures;
    dist::run_threads(n, [&](dist::ProcessGroupPtr pg) {
      std::vector<std::string> found = coll_test::check_strided_collectives(pg, 3, 2);
      for (auto& f : coll_test::check_strided_collectives(pg, 2601, 13)) found.push_back(f);
      // Outputs of 4.7 MiB and more: the copies stream (Note [Streaming copies]), rows of
      // 2400 bytes start off 16-byte boundaries and end in partial lines.
      for (auto& f : coll_test::check_strided_collectives(pg, 2048, 300)) found.push_back(f);
      std::lock_guard<std::mutex> lock(mutex);
      for (const auto& f : found)
        failures.push_back("rank " + std::to_string(pg->rank()) + ": " + f);
    });
    INFO("world " << n);
    for (const auto& f : failures) FAIL_CHECK(f);
  }
}

TEST_CASE("threads: large contiguous all_gather into a misaligned output streams exactly",
          "[collectives][threads]") {
  // Blocks of (1 << 20) + 3 float32 (over 4 MiB: streamed in groups of four pages), written one
  // element past the start of the output buffer (destinations off 16-byte boundaries, tails in
  // partial lines).
  const int64_t count = (int64_t{1} << 20) + 3;
  for (int n : {1, 2, 4}) {
    std::mutex mutex;
    std::vector<std::string> failures;
    dist::run_threads(n, [&](dist::ProcessGroupPtr pg) {
      const auto block = [&](int q) {
        return ts::arange(0, static_cast<double>(count), 1, ts::kFloat32) + q * 7.0;
      };
      const ts::Tensor buffer = ts::zeros({n * count + 1}, ts::kFloat32);
      const ts::Tensor out = buffer.narrow(0, 1, n * count);
      pg->all_gather_into_tensor(out, block(pg->rank()))->wait();
      std::vector<ts::Tensor> parts;
      for (int q = 0; q < n; ++q) parts.push_back(block(q));
      const bool ok =
          ts::equal(out, ts::cat(parts, 0)) && buffer.narrow(0, 0, 1).item<float>() == 0.0f;
      std::lock_guard<std::mutex> lock(mutex);
      if (!ok) failures.push_back("rank " + std::to_string(pg->rank()) + ": output differs");
    });
    INFO("world " << n);
    for (const auto& f : failures) FAIL_CHECK(f);
  }
}
