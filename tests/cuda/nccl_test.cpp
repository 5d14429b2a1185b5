// The nccl backend against a single-process reference: every collective on a world of one GPU
// (dist::run_threads(1) + dist::new_nccl_group, see Note [NCCL bootstrap]) and, where the
// machine has two GPUs, on a world of two; refused ops and devices; and the clear error that
// init_process_group({.backend = "nccl"}) raises on a machine without a GPU (runs everywhere).
//
// Rank threads never call Catch2 (its assertions are not thread-safe): they throw on the first
// mismatch and run_threads rethrows it.

#include "tessera/collectives/nccl/nccl.h"

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "tests/cuda/cuda_test_util.h"

namespace {

namespace ts = tessera;
namespace dist = tessera::dist;
using dist::ProcessGroupPtr;
using dist::ReduceOp;
using ts::DType;
using ts::Tensor;

const DType kDtypes[] = {ts::kFloat32, ts::kFloat64, ts::kBFloat16, ts::kFloat16,
                         ts::kInt32,   ts::kInt64,   ts::kUInt8};

// Rank q's element i: small positive integers, so sums, products and averages over two ranks are
// exact in every dtype.
double value(int q, int64_t i) { return static_cast<double>((q + 1) * (i % 5 + 1)); }

Tensor filled(DType dtype, int64_t n, int q, ts::Device device, int64_t offset = 0) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value(q, offset + i);
  return ts::from_vector(v, {n}).to(dtype).to(device);
}

void expect_values(const Tensor& t, const std::vector<double>& want, const std::string& what) {
  const std::vector<double> got = t.cpu().to(ts::kFloat64).to_vector<double>();
  if (got != want) {
    throw std::runtime_error(fmt::format("{} of {}: got [{}], want [{}]", what, t.dtype(),
                                         fmt::join(got, ", "), fmt::join(want, ", ")));
  }
}

template <typename E>
void expect_throws(const std::function<void()>& fn, const std::string& needle,
                   const std::string& what) {
  try {
    fn();
  } catch (const E& e) {
    if (std::string(e.what()).find(needle) == std::string::npos) {
      throw std::runtime_error(
          fmt::format("{}: message \"{}\" lacks \"{}\"", what, e.what(), needle));
    }
    return;
  }
  throw std::runtime_error(what + ": did not raise the expected error");
}

double reduce_ref(ReduceOp op, int n, int64_t i) {
  double acc = value(0, i);
  for (int q = 1; q < n; ++q) {
    const double v = value(q, i);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        acc += v;
        break;
      case ReduceOp::Product:
        acc *= v;
        break;
      case ReduceOp::Max:
        acc = std::max(acc, v);
        break;
      default:
        acc = std::min(acc, v);
    }
  }
  return op == ReduceOp::Avg ? acc / n : acc;
}

void check_reductions(dist::ProcessGroup& pg, DType dtype, ts::Device dev) {
  const int n = pg.size(), r = pg.rank();
  constexpr int64_t m = 6;
  for (ReduceOp op :
       {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg}) {
    if (op == ReduceOp::Avg && !ts::is_floating_point(dtype)) continue;
    std::vector<double> want(static_cast<size_t>(n * m));
    for (int64_t i = 0; i < n * m; ++i) want[static_cast<size_t>(i)] = reduce_ref(op, n, i);
    const std::string what = fmt::format("all_reduce({})", op);
    Tensor t = filled(dtype, n * m, r, dev);
    pg.all_reduce(t, op);
    expect_values(t, want, what);
    Tensor async_t = filled(dtype, n * m, r, dev);
    pg.all_reduce(async_t, op, {.async_op = true})->wait();
    expect_values(async_t, want, what + " async");
    Tensor in = filled(dtype, n * m, r, dev);
    Tensor out = ts::empty({n * m}, ts::TensorOptions().dtype(dtype).device(dev));
    pg.all_reduce_into(out, in, op);
    expect_values(out, want, what + " into");
    expect_values(in,
                  filled(dtype, n * m, r, ts::Device::cpu()).to(ts::kFloat64).to_vector<double>(),
                  what + " into leaves in");
    Tensor scattered = ts::empty({m}, ts::TensorOptions().dtype(dtype).device(dev));
    pg.reduce_scatter_tensor(scattered, filled(dtype, n * m, r, dev), op);
    expect_values(scattered, std::vector<double>(want.begin() + r * m, want.begin() + (r + 1) * m),
                  fmt::format("reduce_scatter_tensor({})", op));
  }
}

void check_data_movement(dist::ProcessGroup& pg, DType dtype, ts::Device dev) {
  const int n = pg.size(), r = pg.rank();
  const auto opts = ts::TensorOptions().dtype(dtype).device(dev);
  constexpr int64_t m = 4;
  // broadcast from the last rank
  Tensor b = filled(dtype, m, r, dev);
  pg.broadcast(b, n - 1);
  expect_values(b, filled(dtype, m, n - 1, ts::Device::cpu()).to(ts::kFloat64).to_vector<double>(),
                "broadcast");
  // all_gather_into_tensor and uneven all_gather (rank q contributes q + 1 elements)
  std::vector<double> gathered, uneven;
  for (int q = 0; q < n; ++q) {
    for (int64_t i = 0; i < m; ++i) gathered.push_back(value(q, i));
    for (int64_t i = 0; i <= q; ++i) uneven.push_back(value(q, i));
  }
  Tensor all = ts::empty({n, m}, opts);
  pg.all_gather_into_tensor(all, filled(dtype, m, r, dev));
  expect_values(all, gathered, "all_gather_into_tensor");
  Tensor flat = ts::empty({n * (n + 1) / 2}, opts);
  std::vector<Tensor> outs;
  for (int q = 0, begin = 0; q < n; begin += q + 1, ++q)
    outs.push_back(flat.narrow(0, begin, q + 1));
  pg.all_gather(outs, filled(dtype, r + 1, r, dev), {.async_op = true})->wait();
  expect_values(flat, uneven, "uneven all_gather");
  // all_to_all_single, equal blocks: block j of rank q holds value(q, j * m + i)
  Tensor a2a = ts::empty({n * m}, opts);
  pg.all_to_all_single(a2a, filled(dtype, n * m, r, dev));
  std::vector<double> want_a2a;
  for (int q = 0; q < n; ++q) {
    for (int64_t i = 0; i < m; ++i) want_a2a.push_back(value(q, r * m + i));
  }
  expect_values(a2a, want_a2a, "all_to_all_single");
  // all_to_all_single with uneven splits: rank q sends q + j + 1 rows to rank j
  std::vector<int64_t> in_splits, out_splits;
  for (int j = 0; j < n; ++j) {
    in_splits.push_back(r + j + 1);
    out_splits.push_back(j + r + 1);
  }
  int64_t in_rows = 0, out_rows = 0;
  for (int j = 0; j < n; ++j) in_rows += in_splits[static_cast<size_t>(j)];
  for (int j = 0; j < n; ++j) out_rows += out_splits[static_cast<size_t>(j)];
  Tensor a2av = ts::empty({out_rows}, opts);
  pg.all_to_all_single(a2av, filled(dtype, in_rows, r, dev), out_splits, in_splits);
  std::vector<double> want_a2av;
  for (int q = 0; q < n; ++q) {
    int64_t offset = 0;
    for (int j = 0; j < r; ++j) offset += q + j + 1;
    for (int64_t i = 0; i < q + r + 1; ++i) want_a2av.push_back(value(q, offset + i));
  }
  expect_values(a2av, want_a2av, "uneven all_to_all_single");
  // scatter and gather through root 0
  std::vector<Tensor> ins, gather_outs;
  if (r == 0) {
    for (int q = 0; q < n; ++q) ins.push_back(filled(dtype, m, 0, dev, q * m));
    for (int q = 0; q < n; ++q) gather_outs.push_back(ts::empty({m}, opts));
  }
  Tensor piece = ts::empty({m}, opts);
  pg.scatter(piece, ins, 0);
  expect_values(piece,
                filled(dtype, m, 0, ts::Device::cpu(), r * m).to(ts::kFloat64).to_vector<double>(),
                "scatter");
  pg.gather(filled(dtype, m, r, dev), gather_outs, 0);
  for (int q = 0; q < static_cast<int>(gather_outs.size()); ++q) {
    expect_values(gather_outs[static_cast<size_t>(q)],
                  filled(dtype, m, q, ts::Device::cpu()).to(ts::kFloat64).to_vector<double>(),
                  "gather");
  }
  // send / recv along a chain: rank 0 sends first, the others receive first, so no rank waits
  // on a peer that waits on it
  if (n >= 2) {
    Tensor received = ts::empty({m}, opts);
    if (r == 0) {
      pg.send(filled(dtype, m, r, dev), 1);
      pg.recv(received, n - 1);
    } else {
      pg.recv(received, r - 1);
      pg.send(filled(dtype, m, r, dev), (r + 1) % n);
    }
    expect_values(
        received,
        filled(dtype, m, (r + n - 1) % n, ts::Device::cpu()).to(ts::kFloat64).to_vector<double>(),
        "send / recv");
  }
}

// Every collective of the group, as rank pg.rank() runs it.
void check_every_collective(const ProcessGroupPtr& pg) {
  const ts::Device dev = ts::Device::cuda(pg->rank() % ts::cuda_device_count());
  if (pg->backend_name() != "nccl") throw std::runtime_error("not a nccl group");
  for (DType dtype : kDtypes) {
    check_reductions(*pg, dtype, dev);
    check_data_movement(*pg, dtype, dev);
  }
  // bool moves as bytes; its Sum is logical or, as on the other backends.
  Tensor flags = ts::from_vector(std::vector<double>{0, 1, 0}, {3}).to(ts::kBool).to(dev);
  pg->all_reduce(flags, ReduceOp::Sum);
  expect_values(flags, {0, 1, 0}, "all_reduce(sum) of bool");
  pg->barrier();
  pg->barrier({.async_op = true})->wait();
  // Zero-size tensors move nothing and still complete.
  Tensor none = ts::empty({0}, ts::TensorOptions().device(dev));
  pg->all_reduce(none);
  // Observers see each collective once, as on the other backends.
  int seen = 0;
  {
    dist::CollectiveObserverGuard guard([&](const dist::CollectiveEvent& e) {
      if (e.kind == dist::CollectiveKind::AllReduce) ++seen;
    });
    Tensor t = filled(ts::kFloat32, 3, pg->rank(), dev);
    pg->all_reduce(t);
  }
  if (seen != 1) throw std::runtime_error(fmt::format("observer saw {} all_reduces, want 1", seen));
  // Refused: bitwise ops and tensors on another device.
  Tensor ints = filled(ts::kInt32, 3, pg->rank(), dev);
  expect_throws<ts::NotSupportedError>(
      [&] { pg->all_reduce(ints, ReduceOp::BAnd); },
      "[all_reduce] ReduceOp::BAnd is not supported by the nccl backend", "BAnd");
  expect_throws<ts::DeviceError>(
      [&] { pg->all_reduce(filled(ts::kFloat32, 3, 0, ts::Device::cpu())); }, "[all_reduce]",
      "a CPU tensor");
  // new_group / split: a group of rank 0 alone.
  const ProcessGroupPtr sub = pg->new_group({0});
  if ((sub != nullptr) != (pg->rank() == 0)) throw std::runtime_error("new_group membership");
  if (sub) {
    Tensor t = filled(ts::kFloat32, 3, 0, dev);
    sub->all_reduce(t);
    expect_values(
        t, filled(ts::kFloat32, 3, 0, ts::Device::cpu()).to(ts::kFloat64).to_vector<double>(),
        "all_reduce on new_group({0})");
  }
  const ProcessGroupPtr self = pg->split({pg->rank()});
  if (self == nullptr || self->size() != 1) throw std::runtime_error("split into singletons");
}

}  // namespace

TEST_CASE("nccl: init_process_group and new_nccl_group raise a clear error without a GPU",
          "[cuda][nccl]") {
  // Runs everywhere: on a machine without a GPU (or without NCCL in the build) the nccl backend
  // must refuse with an Error that names the entry point, never crash.
  if (ts::cuda_is_available()) {
    const ProcessGroupPtr world = dist::init_process_group({.backend = "nccl"});
    CHECK(world->backend_name() == "nccl");
    CHECK(world->size() == 1);
    dist::destroy_process_group();
    return;
  }
  try {
    dist::init_process_group({.backend = "nccl"});
    FAIL("init_process_group({.backend = \"nccl\"}) succeeded without a CUDA device");
  } catch (const ts::Error& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.find("[init_process_group]") == 0);
    CHECK(message.find("nccl") != std::string::npos);
  }
  CHECK_FALSE(dist::is_initialized());
  CHECK_THROWS_AS(dist::run_threads(1, [](ProcessGroupPtr world) { dist::new_nccl_group(world); }),
                  ts::Error);
}

TEST_CASE("nccl: every collective on a world of one GPU", "[cuda][nccl]") {
  TS_REQUIRE_CUDA_DEVICE();
  REQUIRE_NOTHROW(dist::run_threads(
      1, [](ProcessGroupPtr world) { check_every_collective(dist::new_nccl_group(world)); }));
}

TEST_CASE("nccl: every collective on a world of two GPUs", "[cuda][nccl]") {
  TS_REQUIRE_CUDA_DEVICE();
  if (ts::cuda_device_count() < 2) {
    WARN("skipped: a world of two needs two GPUs, this machine has " << ts::cuda_device_count());
    return;
  }
  REQUIRE_NOTHROW(dist::run_threads(
      2, [](ProcessGroupPtr world) { check_every_collective(dist::new_nccl_group(world)); }));
}
