// replicate (torch's composable DDP): data-parallel training with plain parameters equals one
// device on the whole batch; backward issues one async all_reduce (avg) per gradient bucket, in
// bucket order, from the gradient hooks, while it still computes the gradients of later buckets;
// NoSyncGuard accumulates without communicating; the errors name what is valid.

#include <catch2/catch.hpp>
#include <sstream>

#include "examples/transformer_block.h"
#include "tessera/autograd/engine.h"
#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Each model is built from a seed: seed 0 on rank 0 and on the one-device reference, the rank's
// own seed elsewhere, so that only replicate's broadcast makes the ranks start equal.
std::shared_ptr<nn::Module> make_mlp(uint64_t seed) {
  manual_seed(100 + seed);
  return std::make_shared<nn::MLP>(
      std::vector<int64_t>{8, 16, 4},
      nn::MLPOptions{.activation = nn::Activation::GELU, .tensor_options = kFloat64});
}
// float64 parameters, registered 0.weight [16, 8], 0.bias [16], 2.weight [4, 16], 2.bias [4].
// Reversed under a 600-byte cap: {2.bias 32, 2.weight 512} = 544 bytes; 0.bias (128) would make
// 672, so a bucket of its own; 0.weight (1024) exceeds the cap alone.
const std::vector<int64_t> kMlpBuckets{544, 128, 1024};

std::shared_ptr<nn::Module> make_block(uint64_t seed) {
  manual_seed(200 + seed);
  return std::make_shared<examples::TransformerBlock>(
      examples::BlockConfig{.model = 8, .heads = 4, .hidden = 16});
}
// Registered ln1 (w, b: 8 each), wq, wk, wv, wo (w 64, b 8 each), ln2 (8, 8), up (w 128, b 16),
// down (w 128, b 8), in elements. Reversed under a 256-element (2048-byte) cap:
// {down.b, down.w, up.b} = 152 (+ up.w would make 280); {up.w, ln2.b, ln2.w, wo.b, wo.w, wv.b}
// = 224 (+ wv.w: 288); {wv.w, wk.b, wk.w, wq.b, wq.w, ln1.b, ln1.w} = 224.
const std::vector<int64_t> kBlockBuckets{152 * 8, 224 * 8, 224 * 8};

Tensor mse(nn::Module& m, const Tensor& x, const Tensor& y) {
  const Tensor d = m(x) - y;
  return mean(d * d);
}

// This rank's equal share of the batch (dim 0).
Tensor rows_of_rank(const Tensor& t, const DeviceMesh& mesh) {
  const int64_t n = t.size(0) / mesh.size();
  return t.narrow(0, mesh.get_local_rank(0) * n, n);
}

Tensor param_named(nn::Module& m, const std::string& name) {
  for (const auto& [n, p] : m.named_parameters()) {
    if (n == name) return p;
  }
  return {};
}

std::string join(const std::vector<std::string>& events) {
  std::string out;
  for (const std::string& e : events) out += "\n  " + e;
  return out;
}

// What a rank issues, in order: one line per all_reduce, between the test's markers.
class Trace {
 public:
  Trace()
      : guard_([this](const dist::CollectiveEvent& e) {
          std::ostringstream os;
          os << collective_name(e.kind) << " "
             << (e.op.has_value() ? dist::reduce_op_name(*e.op) : "-") << " "
             << (e.async_op ? "async" : "sync") << " " << e.bytes;
          events.push_back(os.str());
        }) {}

  // Marks the end of the backward pass that `loss` starts: the loss's hook runs before any
  // parameter's, so its callback is queued before replicate's and runs before it.
  void mark_end_of(const Tensor& loss) {
    loss.register_hook([this](const Tensor&) {
      autograd::queue_callback([this] { events.push_back("end"); });
      return Tensor();
    });
  }

  std::vector<std::string> events;

 private:
  dist::CollectiveObserverGuard guard_;
};

std::string all_reduce_line(int64_t bytes) {
  return "all_reduce avg async " + std::to_string(bytes);
}

// The buckets' all_reduces in bucket order; the first issued before backward computes the
// gradient of the first registered parameter (which sits in the last bucket); every one issued
// from the hooks, before the pass's end (every parameter gets a gradient).
void check_overlap(Failures& f, const std::string& what, const std::vector<std::string>& events,
                   const std::vector<int64_t>& buckets) {
  std::vector<std::string> reduces, want;
  size_t before_first_param = 0, before_end = 0;
  for (const std::string& e : events) {
    if (e == "first param") {
      before_first_param = reduces.size();
    } else if (e == "end") {
      before_end = reduces.size();
    } else {
      reduces.push_back(e);
    }
  }
  for (const int64_t b : buckets) want.push_back(all_reduce_line(b));
  if (reduces != want || before_first_param < 1 || before_first_param >= buckets.size() ||
      before_end != buckets.size()) {
    f.push_back(what + ": events" + join(events));
  }
}

struct Model {
  std::string name;
  std::function<std::shared_ptr<nn::Module>(uint64_t)> make;
  Tensor x, y;
  double cap_mb = 0;
  std::vector<int64_t> buckets;  // bytes, in bucket order
  std::string first_param;       // registered first
};

void train_equals_one_device(const Model& model) {
  constexpr int kSteps = 3;
  auto reference = model.make(0);
  {
    optim::AdamW opt(reference->parameters(), {.lr = 0.05});
    for (int i = 0; i < kSteps; ++i) {
      opt.zero_grad();
      mse(*reference, model.x, model.y).backward();
      opt.step();
    }
  }
  const auto want = reference->named_parameters();
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto m = model.make(static_cast<uint64_t>(mesh.get_local_rank(0)));
    Trace trace;
    // Registered before replicate's hook, so it runs first: the gradient is being delivered.
    param_named(*m, model.first_param).register_hook([&](const Tensor&) {
      trace.events.push_back("first param");
      return Tensor();
    });
    replicate(*m, mesh, {.bucket_cap_mb = model.cap_mb});
    trace.events.clear();  // the broadcasts
    const Tensor x = rows_of_rank(model.x, mesh), y = rows_of_rank(model.y, mesh);
    optim::AdamW opt(m->parameters(), {.lr = 0.05});
    for (int i = 0; i < kSteps; ++i) {
      opt.zero_grad();
      trace.events.clear();
      const Tensor loss = mse(*m, x, y);
      trace.mark_end_of(loss);
      loss.backward();
      check_overlap(f, model.name + " step " + std::to_string(i), trace.events, model.buckets);
      opt.step();
    }
    const auto got = m->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i].second.is_distributed()) f.push_back(got[i].first + " became a DTensor");
      if (!allclose(got[i].second, want[i].second, 1e-10, 1e-12)) {
        std::ostringstream os;
        os << model.name << " " << got[i].first << " after " << kSteps << " steps differs\n got "
           << got[i].second << "\n want " << want[i].second;
        f.push_back(os.str());
      }
    }
    return f;
  });
}

TEST_CASE("replicate: AdamW steps of an MLP equal one device on the whole batch",
          "[dtensor][replicate]") {
  train_equals_one_device({.name = "MLP",
                           .make = make_mlp,
                           .x = ints({8, 8}, 1) / 10,
                           .y = ints({8, 4}, 2) / 10,
                           .cap_mb = 600 / kMiB,
                           .buckets = kMlpBuckets,
                           .first_param = "0.weight"});
}

TEST_CASE("replicate: AdamW steps of a transformer block equal one device on the whole batch",
          "[dtensor][replicate]") {
  train_equals_one_device({.name = "transformer block",
                           .make = make_block,
                           .x = ints({8, 8, 8}, 3) / 10,
                           .y = ints({8, 8, 8}, 4) / 10,
                           .cap_mb = 2048 / kMiB,
                           .buckets = kBlockBuckets,
                           .first_param = "ln1.weight"});
}

TEST_CASE("replicate: no_sync over two micro-batches, then a synced one, equals one device",
          "[dtensor][replicate]") {
  std::vector<Tensor> xs, ys;
  for (uint64_t k = 0; k < 3; ++k) {
    xs.push_back(ints({8, 8}, 10 + k) / 10);
    ys.push_back(ints({8, 4}, 20 + k) / 10);
  }
  auto reference = make_mlp(0);
  for (size_t k = 0; k < 3; ++k) mse(*reference, xs[k], ys[k]).backward();
  const auto want = reference->named_parameters();
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto m = make_mlp(static_cast<uint64_t>(mesh.get_local_rank(0)));
    replicate(*m, mesh, {.bucket_cap_mb = 600 / kMiB});
    auto micro_batch = [&](size_t k) {
      mse(*m, rows_of_rank(xs[k], mesh), rows_of_rank(ys[k], mesh)).backward();
    };
    {
      const NoSyncGuard no_sync(*m);
      debug::CommDebugMode mode;
      {
        const NoSyncGuard nested(*m);
        micro_batch(0);
      }
      micro_batch(1);  // the outer guard still holds
      if (mode.get_total_counts() != 0) {
        f.push_back("no_sync communicated:\n" + mode.tracing_table());
      }
    }
    debug::CommDebugMode mode;
    micro_batch(2);
    if (mode.get_comm_counts() != std::map<std::string, int64_t>{{"all_reduce", 3}}) {
      f.push_back("the synced backward issued:\n" + mode.tracing_table());
    }
    const auto got = m->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      if (!allclose(got[i].second.grad(), want[i].second.grad(), 1e-10, 1e-12)) {
        std::ostringstream os;
        os << got[i].first << " gradient differs\n got " << got[i].second.grad() << "\n want "
           << want[i].second.grad();
        f.push_back(os.str());
      }
    }
    return f;
  });
}

TEST_CASE("replicate: a backward that fails midway leaves the next one whole",
          "[dtensor][replicate]") {
  const Tensor x = ints({8, 8}, 7) / 10;
  const Tensor y = ints({8, 4}, 8) / 10;
  auto reference = make_mlp(0);
  mse(*reference, x, y).backward();
  const auto want = reference->named_parameters();
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto m = make_mlp(static_cast<uint64_t>(mesh.get_local_rank(0)));
    // Before replicate's hook: the first pass fails after the first bucket was issued, with the
    // last one never filled.
    bool fail = true;
    param_named(*m, "0.weight").register_hook([&](const Tensor&) {
      if (fail) throw std::runtime_error("failing on purpose");
      return Tensor();
    });
    replicate(*m, mesh, {.bucket_cap_mb = 600 / kMiB});
    const Tensor xl = rows_of_rank(x, mesh), yl = rows_of_rank(y, mesh);
    try {
      mse(*m, xl, yl).backward();
      f.push_back("the failing pass did not fail");
    } catch (const std::exception& e) {
      if (std::string(e.what()).find("failing on purpose") == std::string::npos) {
        f.push_back(std::string("the failing pass raised ") + e.what());
      }
    }
    fail = false;
    m->zero_grad();
    debug::CommDebugMode mode;
    mse(*m, xl, yl).backward();
    if (mode.get_comm_counts() != std::map<std::string, int64_t>{{"all_reduce", 3}}) {
      f.push_back("the next pass issued:\n" + mode.tracing_table());
    }
    const auto got = m->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      if (!allclose(got[i].second.grad(), want[i].second.grad(), 1e-10, 1e-12)) {
        f.push_back(got[i].first + ": gradient differs from one device");
      }
    }
    return f;
  });
}

// A frozen parameter and a buffer (broadcast, not bucketed) and a Linear forward never uses.
class PartlyUsed : public nn::Module {
 public:
  explicit PartlyUsed(uint64_t seed) : Module("PartlyUsed") {
    register_parameter("frozen", ints({3}, 30 + seed), /*requires_grad=*/false);
    register_buffer("scale", ints({2}, 40 + seed));
    manual_seed(300 + seed);
    used_ = register_module("used", std::make_shared<nn::Linear>(4, 3, true, kFloat64));
    unused_ = register_module("unused", std::make_shared<nn::Linear>(4, 3, true, kFloat64));
  }
  Tensor forward(const Tensor& x) override { return (*used_)(x); }

 private:
  std::shared_ptr<nn::Linear> used_, unused_;
};

TEST_CASE("replicate: broadcasts rank 0's state; an unused parameter's bucket waits for the end",
          "[dtensor][replicate]") {
  const Tensor x = ints({4, 4}, 5) / 10;
  const Tensor y = ints({4, 3}, 6) / 10;
  PartlyUsed reference(0);
  mse(reference, x, y).backward();
  const auto want = reference.named_parameters();
  const auto want_buffers = reference.named_buffers();
  on_mesh({2}, [&](const DeviceMesh& mesh) {
    Failures f;
    PartlyUsed m(static_cast<uint64_t>(mesh.get_local_rank(0)));
    replicate(m, mesh);
    if (!allclose(m.named_buffers()[0].second, want_buffers[0].second, 0, 0)) {
      f.push_back("the buffer is not rank 0's");
    }
    Trace trace;
    const Tensor loss = mse(m, rows_of_rank(x, mesh), rows_of_rank(y, mesh));
    trace.mark_end_of(loss);
    loss.backward();
    // One bucket under the default cap, the trainable parameters reversed: unused.bias 3,
    // unused.weight 12, used.bias 3, used.weight 12 elements; complete only at the pass's end.
    if (trace.events != std::vector<std::string>{"end", all_reduce_line(30 * 8)}) {
      f.push_back("events" + join(trace.events));
    }
    const auto got = m.named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string& name = got[i].first;
      if (!allclose(got[i].second, want[i].second, 0, 0)) f.push_back(name + " is not rank 0's");
      const Tensor g = got[i].second.grad();
      if (name.starts_with("used.")) {
        if (!g.defined() || !allclose(g, want[i].second.grad(), 1e-10, 1e-12)) {
          f.push_back(name + ": gradient differs from one device");
        }
      } else if (g.defined()) {
        f.push_back(name + ": got a gradient");
      }
    }
    return f;
  });
}

TEST_CASE("replicate: errors name the op and what is valid", "[dtensor][replicate]") {
  on_mesh({2, 2}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto m = make_mlp(0);
    expect_error(f, "2-D mesh", [&] { replicate(*m, mesh); },
                 {"[replicate]", "1-D mesh", "[2, 2]", "mesh[\"dp\"]"});
    return f;
  });
  on_mesh({2}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto m = make_mlp(0);
    for (const double cap : {0.0, -1.0}) {
      expect_error(f, "cap " + std::to_string(cap),
                   [&] { replicate(*m, mesh, {.bucket_cap_mb = cap}); },
                   {"[replicate]", "bucket_cap_mb must be > 0"});
    }
    // The failed calls left the module as it was.
    replicate(*m, mesh);
    expect_error(f, "twice", [&] { replicate(*m, mesh); }, {"[replicate]", "replicated before"});
    expect_error(f, "a replicated module's child", [&] { replicate(*m->children()[0], mesh); },
                 {"[replicate]", "parameter 'weight'", "managed by replicate() of another"});

    auto parent = make_mlp(0);
    replicate(*parent->children()[2], mesh);
    expect_error(f, "a replicated child's parent", [&] { replicate(*parent, mesh); },
                 {"[replicate]", "parameter '2.weight'", "managed by replicate() of another"});

    auto sharded = make_mlp(0);
    fully_shard(*sharded, mesh);
    expect_error(f, "fully_shard'ed", [&] { replicate(*sharded, mesh); },
                 {"[replicate]", "is fully_shard'ed", "not both"});
    auto inner = make_mlp(0);
    fully_shard(*inner->children()[0], mesh);
    expect_error(f, "a fully_shard'ed child", [&] { replicate(*inner, mesh); },
                 {"[replicate]", "submodule '0'", "is fully_shard'ed"});

    // And the other way: fully_shard refuses a replicated module or one with a replicated child.
    auto replicated = make_mlp(0);
    replicate(*replicated, mesh);
    expect_error(f, "fully_shard of a replicated module", [&] { fully_shard(*replicated, mesh); },
                 {"[fully_shard]", "this MLP, was replicate()'d", "not both"});
    auto replicated_child = make_mlp(0);
    replicate(*replicated_child->children()[0], mesh);
    expect_error(f, "fully_shard over a replicated child",
                 [&] { fully_shard(*replicated_child, mesh); },
                 {"[fully_shard]", "a submodule of this module, a Linear, was replicate()'d"});

    nn::Linear linear(4, 3, true, kFloat64);
    distribute_module(linear, mesh);
    expect_error(f, "DTensor parameter", [&] { replicate(linear, mesh); },
                 {"[replicate]", "parameter 'weight' is a DTensor", "plain parameters"});

    auto plain = make_mlp(0);
    expect_error(f, "NoSyncGuard", [&] { const NoSyncGuard guard(*plain); },
                 {"[NoSyncGuard]", "is not replicated"});
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
