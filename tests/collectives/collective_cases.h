#pragma once
// The cases every backend runs (see collective_checks.h): each collective x ReduceOp x dtype,
// even and uneven sizes, disagreements, sub-groups of a 2x2 layout, async overlap, observers.

#include <numeric>

#include "tests/collectives/collective_checks.h"

namespace coll_test {

namespace dist = tessera::dist;

// The same value from every rank's tensor i: stored(dt, q, offset + i) for each rank q.
inline std::vector<double> across_ranks(int n, DType dt, int64_t index) {
  std::vector<double> v;
  for (int q = 0; q < n; ++q) v.push_back(stored(dt, q, index));
  return v;
}

inline void check_all_reduce(Checker& c, DType dt, ReduceOp op, const tessera::Shape& shape,
                             bool async_op) {
  const std::string what =
      fmt::format("all_reduce({}, {}) of {}{}", dt, op, shape, async_op ? " async" : "");
  Tensor t = filled(dt, shape, c.rank());
  if (!op_valid(op, dt)) {
    c.expect_throws<tessera::Error>([&] { c.pg().all_reduce(t, op); }, {"[all_reduce]"}, what);
    return;
  }
  c.pg().all_reduce(t, op, {.async_op = async_op})->wait();
  std::vector<double> want(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    want[static_cast<size_t>(i)] = reduce_ref(op, dt, across_ranks(c.size(), dt, i));
  }
  c.expect_values(t, want, what);
}

inline void check_reduce_scatter(Checker& c, DType dt, ReduceOp op, int64_t m) {
  const std::string what = fmt::format("reduce_scatter_tensor({}, {}) of {} per rank", dt, op, m);
  const int n = c.size();
  Tensor in = filled(dt, {n * m}, c.rank());
  Tensor out = empty(dt, {m});
  if (!op_valid(op, dt)) {
    c.expect_throws<tessera::Error>([&] { c.pg().reduce_scatter_tensor(out, in, op); },
                                    {"[reduce_scatter_tensor]"}, what);
    return;
  }
  c.pg().reduce_scatter_tensor(out, in, op);
  std::vector<double> want(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    want[static_cast<size_t>(i)] = reduce_ref(op, dt, across_ranks(n, dt, c.rank() * m + i));
  }
  c.expect_values(out, want, what);
}

inline void check_all_gathers(Checker& c, DType dt, int64_t m) {
  const int n = c.size();
  const int r = c.rank();
  {
    Tensor out = empty(dt, {n, m});
    c.pg().all_gather_into_tensor(out, filled(dt, {m}, r));
    std::vector<double> want;
    for (int q = 0; q < n; ++q) {
      for (int64_t i = 0; i < m; ++i) want.push_back(stored(dt, q, i));
    }
    c.expect_values(out, want, fmt::format("all_gather_into_tensor({}) of {}", dt, m));
    // In place: the input is this rank's block of the output.
    Tensor flat = empty(dt, {n * m});
    Tensor mine = flat.narrow(0, r * m, m);
    mine.copy_(filled(dt, {m}, r));
    c.pg().all_gather_into_tensor(flat, mine);
    c.expect_values(flat, want, fmt::format("in-place all_gather_into_tensor({}) of {}", dt, m));
  }
  std::vector<int64_t> sizes;
  std::vector<double> want;
  for (int q = 0; q < n; ++q) {
    sizes.push_back(uneven(q) * m);
    for (int64_t i = 0; i < uneven(q) * m; ++i) want.push_back(stored(dt, q, i));
  }
  const Tensor in = filled(dt, {uneven(r) * m}, r);
  // Separate outputs, then views of one buffer in rank order (the layout MPI fills directly).
  std::vector<Tensor> outs;
  for (int q = 0; q < n; ++q) outs.push_back(empty(dt, {sizes[static_cast<size_t>(q)]}));
  c.pg().all_gather(outs, in);
  std::vector<double> got;
  for (const Tensor& o : outs) {
    for (double v : read(o)) got.push_back(v);
  }
  c.expect(got == want,
           fmt::format("uneven all_gather({}) of sizes [{}]", dt, fmt::join(sizes, ", ")));
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  Tensor buffer = empty(dt, {total});
  c.pg().all_gather(buffer.split(sizes), in);
  c.expect_values(buffer, want, fmt::format("uneven all_gather({}) into one buffer", dt));
}

inline void check_rooted(Checker& c, DType dt, int64_t m, int root) {
  const int n = c.size();
  const int r = c.rank();
  Tensor t = filled(dt, {m}, r);
  c.pg().broadcast(t, root);
  std::vector<double> want;
  for (int64_t i = 0; i < m; ++i) want.push_back(stored(dt, root, i));
  c.expect_values(t, want, fmt::format("broadcast({}) of {} from {}", dt, m, root));

  std::vector<Tensor> ins;
  if (r == root) {
    for (int q = 0; q < n; ++q) ins.push_back(filled(dt, {uneven(q) * m}, 10 + q));
  }
  Tensor out = empty(dt, {uneven(r) * m});
  c.pg().scatter(out, ins, root);
  want.clear();
  for (int64_t i = 0; i < uneven(r) * m; ++i) want.push_back(stored(dt, 10 + r, i));
  c.expect_values(out, want, fmt::format("uneven scatter({}) from {}", dt, root));

  std::vector<Tensor> outs;
  if (r == root) {
    for (int q = 0; q < n; ++q) outs.push_back(empty(dt, {uneven(q) * m}));
  }
  c.pg().gather(filled(dt, {uneven(r) * m}, r), outs, root);
  for (size_t q = 0; q < outs.size(); ++q) {
    want.clear();
    for (int64_t i = 0; i < outs[q].numel(); ++i)
      want.push_back(stored(dt, static_cast<int>(q), i));
    c.expect_values(outs[q], want, fmt::format("uneven gather({}) to {}: outs[{}]", dt, root, q));
  }
}

inline void check_all_to_all(Checker& c, DType dt) {
  const int n = c.size();
  const int r = c.rank();
  {  // Even: 2 rows of 3 per rank.
    Tensor out = empty(dt, {2 * n, 3});
    c.pg().all_to_all_single(out, filled(dt, {2 * n, 3}, r));
    std::vector<double> want;
    for (int q = 0; q < n; ++q) {
      for (int64_t k = 0; k < 6; ++k) want.push_back(stored(dt, q, r * 6 + k));
    }
    c.expect_values(out, want, fmt::format("all_to_all_single({}) even", dt));
  }
  // Uneven: rank q sends split(q, j) rows of 2 to rank j.
  const auto split = [](int q, int j) -> int64_t { return (q + 2 * j) % 3; };
  std::vector<int64_t> in_splits;
  std::vector<int64_t> out_splits;
  for (int q = 0; q < n; ++q) {
    in_splits.push_back(split(r, q));
    out_splits.push_back(split(q, r));
  }
  const int64_t in_rows = std::accumulate(in_splits.begin(), in_splits.end(), int64_t{0});
  const int64_t out_rows = std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0});
  Tensor out = empty(dt, {out_rows, 2});
  c.pg().all_to_all_single(out, filled(dt, {in_rows, 2}, r), out_splits, in_splits);
  std::vector<double> want;
  for (int q = 0; q < n; ++q) {
    int64_t offset = 0;
    for (int j = 0; j < r; ++j) offset += split(q, j) * 2;
    for (int64_t k = 0; k < split(q, r) * 2; ++k) want.push_back(stored(dt, q, offset + k));
  }
  c.expect_values(out, want, fmt::format("all_to_all_single({}) uneven", dt));
}

inline void check_send_recv(Checker& c, DType dt, int64_t m) {
  const int n = c.size();
  if (n < 2) return;
  const int r = c.rank();
  const int src = (r + n - 1) % n;
  auto sent = c.pg().send(filled(dt, {m}, r), (r + 1) % n, {.async_op = true});
  Tensor got = empty(dt, {m});
  c.pg().recv(got, src);
  sent->wait();
  std::vector<double> want;
  for (int64_t i = 0; i < m; ++i) want.push_back(stored(dt, src, i));
  c.expect_values(got, want, fmt::format("send/recv({}) of {} from {}", dt, m, src));
}

// Arguments that disagree across ranks raise Error on every rank; the group stays usable.
inline void check_disagreements(Checker& c) {
  const int r = c.rank();
  if (c.size() < 2) return;
  using tessera::kFloat32;
  c.expect_throws<tessera::ShapeError>(
      [&] { c.pg().all_reduce(filled(kFloat32, {4 + (r == 1 ? 1 : 0)}, r)); },
      {"[all_reduce]", "rank 0: 4", "rank 1: 5"}, "all_reduce of mismatched sizes");
  c.expect_throws<tessera::DTypeError>(
      [&] { c.pg().all_reduce(filled(r == 1 ? tessera::kInt64 : kFloat32, {4}, r)); },
      {"[all_reduce]", "rank 0: float32", "rank 1: int64"}, "all_reduce of mismatched dtypes");
  c.expect_throws<tessera::Error>(
      [&] {
        Tensor t = filled(kFloat32, {4}, r);
        if (r == 1)
          c.pg().broadcast(t, 0);
        else
          c.pg().all_reduce(t);
      },
      {"issued different collectives", "rank 1: broadcast"}, "mismatched collectives");
  c.expect_throws<tessera::Error>(
      [&] { c.pg().all_reduce(filled(kFloat32, {4}, r), r == 0 ? ReduceOp::Max : ReduceOp::Sum); },
      {"reduce op", "rank 0: max"}, "mismatched reduce ops");
  c.expect_throws<tessera::ShapeError>(
      [&] {
        std::vector<Tensor> outs;
        for (int q = 0; q < c.size(); ++q) outs.push_back(empty(kFloat32, {q == r ? 3 : 2}));
        c.pg().all_gather(outs, filled(kFloat32, {3}, r));
      },
      {"[all_gather]", "sends 3 elements", "expects 2"}, "all_gather of unexpected sizes");
  if (r < 2) {
    const int peer = 1 - r;
    c.expect_throws<tessera::ShapeError>(
        [&] {
          if (r == 0)
            c.pg().send(filled(kFloat32, {3}, r), peer);
          else
            c.pg().recv(empty(kFloat32, {4}), peer);
        },
        {"rank 0", "sends 3 elements", "rank 1 receives 4"}, "send/recv of mismatched sizes");
  }
  check_all_reduce(c, kFloat32, ReduceOp::Sum, {5}, false);
}

// Row and column groups of a 2x2 layout, in flight at once, issued in opposite orders.
inline void check_mesh_groups(Checker& c) {
  if (c.size() != 4) return;
  const int r = c.rank();
  ProcessGroupPtr row = c.pg().split({r / 2 * 2, r / 2 * 2 + 1});
  ProcessGroupPtr col = c.pg().split({r % 2, r % 2 + 2});
  c.expect(row->size() == 2 && row->rank() == r % 2, "row group rank");
  c.expect(col->world_ranks() == std::vector<int>{r % 2, r % 2 + 2}, "column group ranks");
  Tensor a = filled(tessera::kFloat32, {50000}, r);
  Tensor b = filled(tessera::kFloat32, {50000}, 10 + r);
  dist::WorkPtr wa;
  dist::WorkPtr wb;
  if (r < 2) {
    wa = row->all_reduce(a, {.async_op = true});
    wb = col->all_reduce(b, {.async_op = true});
  } else {
    wb = col->all_reduce(b, {.async_op = true});
    wa = row->all_reduce(a, {.async_op = true});
  }
  wb->wait();
  wa->wait();
  std::vector<double> want_a;
  std::vector<double> want_b;
  for (int64_t i = 0; i < a.numel(); ++i) {
    want_a.push_back(stored(tessera::kFloat32, r / 2 * 2, i) +
                     stored(tessera::kFloat32, r / 2 * 2 + 1, i));
    want_b.push_back(stored(tessera::kFloat32, 10 + r % 2, i) +
                     stored(tessera::kFloat32, 12 + r % 2, i));
  }
  c.expect_values(a, want_a, "async all_reduce on the row group");
  c.expect_values(b, want_b, "async all_reduce on the column group");

  ProcessGroupPtr pair = c.pg().new_group({0, 2});
  c.expect((pair != nullptr) == (r % 2 == 0), "new_group returns a group on members only");
  if (pair) {
    Tensor t = filled(tessera::kFloat32, {3}, r);
    pair->broadcast(t, 1);
    c.expect_values(t, read(filled(tessera::kFloat32, {3}, 2)), "broadcast on new_group({0, 2})");
  }
  ProcessGroupPtr single = row->split({row->rank()});
  Tensor t = filled(tessera::kFloat32, {3}, r);
  single->all_reduce(t, ReduceOp::Avg);
  c.expect_values(t, read(filled(tessera::kFloat32, {3}, r)), "all_reduce on a one-rank group");
  c.expect_throws<tessera::Error>(
      [&] {
        c.pg().split({r, (r + 1) % 4});
      },
      {"[split]", "equal lists"}, "overlapping split lists");
}

// Two collectives in flight on one group, waited in reverse order; a synchronous call after them
// runs after them.
inline void check_async_overlap(Checker& c) {
  const int n = c.size();
  const int r = c.rank();
  Tensor x = filled(tessera::kFloat64, {40000}, r);
  Tensor gathered = empty(tessera::kFloat64, {n * 1000});
  auto w1 = c.pg().all_reduce(x, ReduceOp::Max, {.async_op = true});
  auto w2 = c.pg().all_gather_into_tensor(gathered, filled(tessera::kFloat64, {1000}, r),
                                          {.async_op = true});
  Tensor y = filled(tessera::kFloat64, {8}, r);
  c.pg().broadcast(y, 0);
  c.expect(w1->is_completed() && w2->is_completed(), "a synchronous call runs after queued ones");
  w2->wait();
  w1->wait();
  std::vector<double> want;
  for (int64_t i = 0; i < x.numel(); ++i) {
    want.push_back(
        reduce_ref(ReduceOp::Max, tessera::kFloat64, across_ranks(n, tessera::kFloat64, i)));
  }
  c.expect_values(x, want, "async all_reduce overlapped with all_gather");
  want.clear();
  for (int q = 0; q < n; ++q) {
    for (int64_t i = 0; i < 1000; ++i) want.push_back(stored(tessera::kFloat64, q, i));
  }
  c.expect_values(gathered, want, "async all_gather overlapped with all_reduce");
}

inline void check_observer(Checker& c) {
  std::vector<dist::CollectiveEvent> events;
  {
    dist::CollectiveObserverGuard guard(
        [&](const dist::CollectiveEvent& e) { events.push_back(e); });
    Tensor t = filled(tessera::kFloat32, {10}, c.rank());
    c.pg().all_reduce(t, ReduceOp::Max);
    Tensor out = empty(tessera::kBFloat16, {c.size() * 4});
    c.pg()
        .all_gather_into_tensor(out, filled(tessera::kBFloat16, {4}, c.rank()), {.async_op = true})
        ->wait();
    c.pg().barrier();
  }
  c.pg().barrier();  // not observed: the guard is gone
  c.expect(events.size() == 3, fmt::format("observer saw {} events, expected 3", events.size()));
  if (events.size() != 3) return;
  const auto& ar = events[0];
  c.expect(ar.kind == dist::CollectiveKind::AllReduce && ar.bytes == 40 &&
               ar.group == c.pg_ptr().get() && ar.op == ReduceOp::Max &&
               ar.dtype == tessera::kFloat32 && !ar.async_op,
           "all_reduce event");
  const auto& ag = events[1];
  c.expect(ag.kind == dist::CollectiveKind::AllGatherIntoTensor && ag.bytes == c.size() * 8 &&
               ag.async_op && !ag.op.has_value(),
           "all_gather_into_tensor event");
  c.expect(events[2].kind == dist::CollectiveKind::Barrier && events[2].bytes == 0 &&
               !events[2].dtype.has_value(),
           "barrier event");
}

// Everything above, on one rank of `pg`. `checks_agreement`: the backend reports arguments that
// disagree across ranks (threads always; mpi in checked mode).
inline std::vector<std::string> check_everything(const ProcessGroupPtr& pg, bool checks_agreement) {
  Checker c(pg);
  const int n = c.size();
  for (DType dt : kMatrixDTypes) {
    for (ReduceOp op : kAllOps) {
      // Even and uneven counts, tiny and above the backends' small-message paths.
      for (int64_t count :
           {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{4 * n}, int64_t{20000}, int64_t{20001}}) {
        check_all_reduce(c, dt, op, {count}, false);
      }
      check_all_reduce(c, dt, op, {3, 5}, true);
      for (int64_t m : {int64_t{0}, int64_t{3}, int64_t{10000}}) check_reduce_scatter(c, dt, op, m);
    }
  }
  for (DType dt : kAllDTypes) {
    for (ReduceOp op : kAllOps) check_all_reduce(c, dt, op, {33}, false);
    check_all_gathers(c, dt, 3);
    check_rooted(c, dt, 5, n - 1);
    check_all_to_all(c, dt);
    check_send_recv(c, dt, 6);
  }
  for (DType dt : kMatrixDTypes) {
    check_all_gathers(c, dt, 5000);
    check_rooted(c, dt, 7000, 0);
    check_send_recv(c, dt, 50000);
  }
  c.pg().barrier();
  if (checks_agreement) check_disagreements(c);
  check_mesh_groups(c);
  check_async_overlap(c);
  check_observer(c);
  return c.failures();
}

}  // namespace coll_test
