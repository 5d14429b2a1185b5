// Distributed ops given arguments that fit some ranks' shards but not the global tensor (issue
// 52, rows 6, 7 and 9): every rank raises the same tessera::Error before any rank computes, never
// some ranks a result and others an error. One forked child per case (forked_case.h).

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>

#include "tests/robustness/forked_case.h"

namespace tessera::robustness_test {
namespace {

// Two Shard(0) DTensors whose global shapes, [8, 4] and [8, 5], differ outside dim 0.
std::vector<Tensor> mismatched_row_shards(const DeviceMesh& mesh) {
  return {distribute_tensor(ones({8, 4}), mesh, {Shard(0)}),
          distribute_tensor(ones({8, 5}), mesh, {Shard(0)})};
}

TEST_CASE("robustness: cat of DTensors checks the global shapes on every rank (row 6)",
          "[robustness]") {
  expect_success("cat({S0 [8, 4], S0 [8, 5]}, 0)", [] {
    every_rank_raises([](const DeviceMesh& mesh) { cat(mismatched_row_shards(mesh), 0); },
                      "[cat] sizes of tensors must match except in dimension 0");
  });
  expect_success("cat({S1 [8, 4], S1 [8, 4]}, 2) (dim out of range)", [] {
    every_rank_raises(
        [](const DeviceMesh& mesh) {
          const Tensor a = distribute_tensor(ones({8, 4}), mesh, {Shard(1)});
          cat({a, a}, 2);
        },
        "[cat]");
  });
  expect_success("stack({S0 [8, 4], S0 [8, 5]})", [] {
    every_rank_raises([](const DeviceMesh& mesh) { stack(mismatched_row_shards(mesh), 0); },
                      "[stack] expects each tensor to be equal size");
  });
}

TEST_CASE("robustness: broadcast and product shapes are checked globally and named after the op",
          "[robustness]") {
  expect_success("add(S0 [8, 4], S0 [8, 5])", [] {
    every_rank_raises(
        [](const DeviceMesh& mesh) {
          const std::vector<Tensor> ab = mismatched_row_shards(mesh);
          add(ab[0], ab[1]);
        },
        "[add] shapes [8, 4] and [8, 5] cannot be broadcast");
  });
  expect_success("bmm(S0 [4, 2, 3], S0 [4, 5, 2])", [] {
    every_rank_raises(
        [](const DeviceMesh& mesh) {
          bmm(distribute_tensor(ones({4, 2, 3}), mesh, {Shard(0)}),
              distribute_tensor(ones({4, 5, 2}), mesh, {Shard(0)}));
        },
        "[bmm] shapes [4, 2, 3] and [4, 5, 2] cannot be multiplied (3 != 5)");
  });
  expect_success("bmm(S2 [4, 2, 8], R [8, 8, 2]) (batch sizes)", [] {
    every_rank_raises(
        [](const DeviceMesh& mesh) {
          bmm(distribute_tensor(ones({4, 2, 8}), mesh, {Shard(2)}),
              distribute_tensor(ones({8, 8, 2}), mesh, {Replicate()}));
        },
        "[bmm] batch sizes must be equal");
  });
  expect_success("matmul(S0 [2, 3, 4, 5], R [2, 5, 6]) (batch dims)", [] {
    every_rank_raises(
        [](const DeviceMesh& mesh) {
          matmul(distribute_tensor(ones({4, 3, 4, 5}), mesh, {Shard(0)}),
                 distribute_tensor(ones({2, 5, 6}), mesh, {Replicate()}));
        },
        "[matmul] batch dimensions of shapes [4, 3, 4, 5] and [2, 5, 6] cannot be broadcast");
  });
}

TEST_CASE("robustness: ranks building a module differently are told at fully_shard",
          "[robustness]") {
  expect_success("nn::Linear(4, 4) on rank 0, nn::Linear(5, 4) on the others", [] {
    every_rank_raises(
        [](const DeviceMesh& mesh) {
          nn::Linear layer(mesh.get_coordinate()->at(0) == 0 ? 4 : 5, 4);
          fully_shard(layer, mesh);
        },
        "issued it for different operations, so their data would not match: distribute_tensor "
        "of a float32 tensor of shape [4, 4] to [S(0)] (rank 0); distribute_tensor of a float32 "
        "tensor of shape [4, 5] to [S(0)] (ranks 1, 2, 3)");
  });
}

TEST_CASE("robustness: a local_map whose outputs differ per rank is named at the call",
          "[robustness]") {
  // Rank 0's fn returns a [3, 4] block where the others return [2, 4]: from_local would infer
  // global [12, 4] on rank 0 and [8, 4] elsewhere.
  const auto uneven = [](const Tensor& x) {
    const bool first = DTensor(x).device_mesh().get_coordinate()->at(0) == 0;
    const LocalFn fn = [first](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{in[0].narrow(0, 0, first ? 3 : 2) * 2.0, in[0] + 1.0};
    };
    return local_map(fn, {.out_placements = {Placements{Shard(0)}, Placements{Shard(0)}}})({x});
  };
  expect_success("fn returning [3, 4] on rank 0 and [2, 4] elsewhere under S(0)", [&] {
    every_rank_raises(
        [&](const DeviceMesh& mesh) {
          (void)uneven(distribute_tensor(ones({16, 4}), mesh, {Shard(0)}))[0].full_tensor();
        },
        "[local_map] ranks disagree on output 0 ([S(0)]): this rank (rank ");
  });
  expect_success("the message gives both ranks' shapes", [&] {
    every_rank_raises(
        [&](const DeviceMesh& mesh) {
          (void)uneven(distribute_tensor(ones({16, 4}), mesh, {Shard(0)}));
        },
        "local tensor of shape [2, 4] (global shape [8, 4])");
  });
  expect_success("check_outputs = false: as PyTorch, no check (the values stay per rank)", [] {
    dist::run_threads(4, [](dist::ProcessGroupPtr) {
      const DeviceMesh mesh(DeviceType::CPU, {4});
      const DTensor x = distribute_tensor(ones({16, 4}), mesh, {Shard(0)});
      const LocalFn fn = [](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{in[0] * 3.0};
      };
      const std::vector<Tensor> out =
          local_map(fn, {.out_placements = {Placements{Shard(0)}}, .check_outputs = false})({x});
      if (!equal(out[0].full_tensor(), full({16, 4}, 3.0))) throw std::logic_error("wrong values");
    });
  });
}

TEST_CASE("robustness: an error of an op's local computation names the global shapes (issue 62)",
          "[robustness]") {
  // layer_norm over a last dim of 4 where the tensor's is 5: the local kernel sees a [1, 5] shard
  // of the [4, 5] DTensor, and the message says so.
  expect_success("layer_norm(S(0) [4, 5], normalized_shape [4])", [] {
    every_rank_raises(
        [](const DeviceMesh& mesh) {
          (void)layer_norm(distribute_tensor(ones({4, 5}), mesh, {Shard(0)}), {4});
        },
        "input of shape [1, 5] does not end with normalized_shape [4]; expected an input of "
        "shape [*, 4] (raised on this rank's local shards, which any shapes above are; "
        "[layer_norm] ran on DTensors: input 0: global shape [4, 5] under [S(0)], local shard "
        "[1, 5]");
  });
  expect_success("the error keeps its type", [] {
    dist::run_threads(4, [](dist::ProcessGroupPtr) {
      const DeviceMesh mesh(DeviceType::CPU, {4});
      try {
        (void)layer_norm(distribute_tensor(ones({4, 5}), mesh, {Shard(0)}), {4});
      } catch (const ShapeError&) {
        return;
      }
      throw std::logic_error("no ShapeError");
    });
  });
}

TEST_CASE("robustness: shards of a dim near INT64_MAX (row 7)", "[robustness]") {
  expect_success("torch.chunk sizes of INT64_MAX over 4 ranks", [] {
    dist::run_threads(4, [](dist::ProcessGroupPtr world) {
      const int64_t n = std::numeric_limits<int64_t>::max();
      const int64_t chunk = n / 4 + 1;
      const dtensor::Run mine = dtensor::chunk_of(n, 4, world->rank());
      const int64_t want = world->rank() < 3 ? chunk : n - 3 * chunk;
      if (mine.size != want || mine.offset != chunk * world->rank()) {
        std::ostringstream os;
        os << "rank " << world->rank() << " gets a chunk of " << mine.size << ", want " << want;
        throw std::logic_error(os.str());
      }
    });
  });
#ifdef TESSERA_TEST_UNDER_SANITIZER
  WARN(
      "dtensor::ones({INT64_MAX}) skipped under sanitizers: AddressSanitizer aborts on "
      "allocations above its limit by design (release builds run it)");
#else
  expect_success("dtensor::ones({INT64_MAX}, S(0)) on 4 ranks", [] {
    every_rank_raises(
        [](const DeviceMesh& mesh) {
          dtensor::ones({std::numeric_limits<int64_t>::max()},
                        {.mesh = mesh, .placements = {Shard(0)}});
        },
        "[");
  });
#endif
}

TEST_CASE("robustness: fully_shard refuses non-floating dtypes at the call (row 9)",
          "[robustness]") {
  for (const auto& [what, options] :
       {std::pair{"param_dtype = int32", FullyShardOptions{.param_dtype = kInt32}},
        std::pair{"reduce_dtype = bool", FullyShardOptions{.reduce_dtype = kBool}}}) {
    expect_success(what, [options] {
      every_rank_raises(
          [&](const DeviceMesh& mesh) {
            nn::Linear layer(4, 4);
            fully_shard(layer, mesh, options);
          },
          "is not a floating-point dtype");
    });
  }
}

TEST_CASE("robustness: Partial(sum) times or over a non-finite or zero scalar (row 5)",
          "[robustness]") {
  expect_success("P * inf, P / 0, P / inf, P * nan give the single-device values", [] {
    dist::run_threads(4, [](dist::ProcessGroupPtr) {
      const DeviceMesh mesh(DeviceType::CPU, {4});
      const Tensor x = from_vector(std::vector<double>{0.0, 1.5, -2.0, 0.0, 3.0, 0.25}, {6});
      const Tensor p = distribute_tensor(x, mesh, {Replicate()}).redistribute({Partial()});
      const double inf = std::numeric_limits<double>::infinity();
      const std::vector<std::pair<std::string, std::pair<Tensor, Tensor>>> cases{
          {"P * inf", {p * inf, x * inf}},
          {"P / 0", {p / 0.0, x / 0.0}},
          {"P / inf", {p / inf, x / inf}},
          {"P * nan", {p * std::nan(""), x * std::nan("")}},
          {"P * 2 (stays Partial)", {p * 2.0, x * 2.0}}};
      for (const auto& [name, got_want] : cases) {
        if (!allclose(got_want.first.full_tensor(), got_want.second, 0, 0, true)) {
          std::ostringstream os;
          os << name << " gives " << got_want.first.full_tensor() << ", one device "
             << got_want.second;
          throw std::logic_error(os.str());
        }
      }
      if (!DTensor(p * 2.0).placements()[0].is_partial()) {
        throw std::logic_error("P * 2 no longer stays Partial");
      }
    });
  });
}

// got (a DTensor) against one device's want, NaN where want has NaN.
void expect_single_device(const std::string& name, const Tensor& got, const Tensor& want) {
  const Tensor whole = DTensor(got).full_tensor();
  if (!allclose(whole, want, 1e-12, 0, true)) {
    std::ostringstream os;
    os << name << " gives " << whole << ", one device " << want;
    throw std::logic_error(os.str());
  }
}

TEST_CASE("robustness: Partial(sum) times or over a Replicate tensor holding inf or 0 (row 5)",
          "[robustness]") {
  const double inf = std::numeric_limits<double>::infinity();
  expect_success("P * R, R * P, P / R, matmul(P, R), matmul(R, P) on 4 ranks", [inf] {
    dist::run_threads(4, [inf](dist::ProcessGroupPtr) {
      const DeviceMesh mesh(DeviceType::CPU, {4});
      const Tensor x = from_vector(std::vector<double>{0.0, 1.5, -2.0, 0.0, 3.0, 0.25}, {2, 3});
      const Tensor r = from_vector(std::vector<double>{inf, 2.0, 0.0, -1.0, 0.5, -inf}, {2, 3});
      const Tensor p = distribute_tensor(x, mesh, {Replicate()}).redistribute({Partial()});
      const Tensor rd = distribute_tensor(r, mesh, {Replicate()});
      expect_single_device("P * R", p * rd, x * r);
      expect_single_device("R * P", rd * p, r * x);
      expect_single_device("P / R (a zero divisor)", p / rd, x / r);
      const Tensor w = from_vector(std::vector<double>{1.0, inf, 2.0, 0.0, -1.0, 3.0}, {3, 2});
      const Tensor wd = distribute_tensor(w, mesh, {Replicate()});
      expect_single_device("matmul(P, R)", matmul(p, wd), matmul(x, w));
      expect_single_device("matmul(R, P)", matmul(wd, p), matmul(w, x));
      // Finite factors: the Partial stays (no collective beside the check).
      const Tensor finite = distribute_tensor(ones({2, 3}) * 2.0, mesh, {Replicate()});
      const Tensor stays = p * finite;
      expect_single_device("P * finite R", stays, x * 2.0);
      if (!DTensor(stays).placements()[0].is_partial()) {
        throw std::logic_error("P * finite R no longer stays Partial");
      }
    });
  });
  expect_success("P on one mesh dim, the factor sharded on the other with inf in one shard", [inf] {
    dist::run_threads(4, [inf](dist::ProcessGroupPtr) {
      const DeviceMesh mesh(DeviceType::CPU, {2, 2});
      std::vector<double> xv(8, 0.0), rv(8, 1.0);
      for (size_t i = 0; i < 8; ++i) xv[i] = static_cast<double>(i) - 3.0;
      rv[1] = inf;  // row 0: only the ranks holding shard 0 of dim 0 see it
      const Tensor x = from_vector(xv, {4, 2});
      const Tensor r = from_vector(rv, {4, 2});
      const Tensor p =
          distribute_tensor(x, mesh, {Shard(0), Replicate()}).redistribute({Shard(0), Partial()});
      const Tensor rd = distribute_tensor(r, mesh, {Shard(0), Replicate()});
      expect_single_device("S0,P * S0,R", p * rd, x * r);
    });
  });
  expect_success("in place: P *= R holding inf raises", [inf] {
    every_rank_raises(
        [inf](const DeviceMesh& mesh) {
          Tensor p = distribute_tensor(ones({4}), mesh, {Replicate()}).redistribute({Partial()});
          p *= distribute_tensor(full({4}, inf), mesh, {Replicate()});
        },
        "[mul_] writes a Partial DTensor in place with a factor that holds inf or NaN");
  });
}

TEST_CASE("robustness: in-place ops on views of DTensors write through or raise (row 8)",
          "[robustness]") {
  expect_success("narrow of the sharded dim, then +=", [] {
    every_rank_raises(
        [](const DeviceMesh& mesh) {
          const Tensor d =
              distribute_tensor(arange(32, kFloat32).reshape({8, 4}), mesh, {Shard(0)});
          Tensor v = d.narrow(0, 1, 4);
          v += 1;
        },
        "would not reach the DTensor it viewed");
  });
  expect_success("narrow of an unsharded dim, then += (writes through)", [] {
    dist::run_threads(4, [](dist::ProcessGroupPtr) {
      const DeviceMesh mesh(DeviceType::CPU, {4});
      const Tensor x = arange(32, kFloat32).reshape({8, 4});
      const Tensor d = distribute_tensor(x, mesh, {Shard(0)});
      Tensor v = d.narrow(1, 1, 2);
      v += 1;
      Tensor xv = x.narrow(1, 1, 2);
      xv += 1;
      if (!equal(d.full_tensor(), x)) throw std::logic_error("the write did not reach d");
    });
  });
}

}  // namespace
}  // namespace tessera::robustness_test
