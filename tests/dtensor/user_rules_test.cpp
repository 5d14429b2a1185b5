// User sharding rules (register_sharding) that return too many, repeated or out-of-range
// strategies, or wrong ones (issue 52, rows 4 and 11, and the rule errors of its "unclear errors"):
// the search stays bounded, results equal one device's, and check mode (validate) turns a wrong
// rule into an Error naming it instead of a wrong result.

#include <catch2/catch.hpp>

#include "tessera/dtensor/strategy_search.h"
#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

// Restores an op's built-in rule when the test leaves its scope, however it leaves.
class RuleGuard {
 public:
  RuleGuard(std::string op, ShardingRuleFn rule, RegisterShardingOptions options = {})
      : op_(std::move(op)) {
    register_sharding(op_, std::move(rule), options);
  }
  ~RuleGuard() { unregister_sharding(op_); }
  RuleGuard(const RuleGuard&) = delete;
  RuleGuard& operator=(const RuleGuard&) = delete;

 private:
  std::string op_;
};

ShardingStrategy unary(const Placement& out, const Placement& in) { return {{out}, {in}}; }

TEST_CASE("user rules: repeated and out-of-range strategies are dropped, all-Replicate kept",
          "[dtensor][rules]") {
  std::vector<ShardingStrategy> list = {unary(Shard(0), Shard(0)), unary(Shard(7), Shard(7)),
                                        unary(Shard(0), Shard(0)), unary(Shard(1), Shard(1)),
                                        unary(Shard(0), Shard(0))};
  const size_t r = dtensor::clean_strategies("relu", list, {2}, {2}, /*user_rule=*/false);
  REQUIRE(list.size() == 3);  // S0, S1, then the added all-Replicate
  CHECK(list[0].inputs[0] == Shard(0));
  CHECK(list[1].inputs[0] == Shard(1));
  CHECK(r == 2);
  CHECK(list[2].inputs[0].is_replicate());
  CHECK(list[2].outputs[0].is_replicate());

  // A rule's own all-Replicate stays where the rule put it (order breaks ties); absent inputs'
  // entries do not make strategies differ.
  std::vector<ShardingStrategy> own = {{{Replicate()}, {Replicate(), Shard(0)}},
                                       {{Shard(0)}, {Shard(0), Shard(1)}},
                                       {{Shard(0)}, {Shard(0), Shard(0)}}};
  CHECK(dtensor::clean_strategies("add", own, {2, -1}, {2}, false) == 0);
  CHECK(own.size() == 2);
}

TEST_CASE("user rules: the search over mesh dims is bounded", "[dtensor][rules]") {
  // 300 strategies per mesh dim on 3 mesh dims: 2.7e7 combinations. Strategy j costs |j - 7|
  // on its own; combinations cost the sum.
  const size_t per = 300;
  std::vector<std::vector<ShardingStrategy>> per_dim(3);
  for (auto& list : per_dim) {
    for (size_t j = 0; j < per; ++j)
      list.push_back(unary(StridedShard(0, int64_t(j) + 1), Shard(0)));
    list.push_back(unary(Replicate(), Replicate()));
  }
  const std::vector<size_t> replicate_at(3, per);
  size_t scored = 0;
  const auto score =
      [&](const std::vector<size_t>& pick) -> std::optional<dtensor::CandidateScore> {
    ++scored;
    dtensor::CandidateScore s;
    for (size_t m = 0; m < pick.size(); ++m) {
      const ShardingStrategy& st = per_dim[m][pick[m]];
      s.cost += st.outputs[0].is_replicate()
                    ? 100.0
                    : std::abs(double(st.outputs[0].split_factor()) - 8.0);  // j == 7 is best
    }
    return s;
  };
  REQUIRE(dtensor::bound_strategies(per_dim, replicate_at, score, 4096));
  size_t product = 1;
  for (const auto& list : per_dim) {
    product *= list.size();
    CHECK(list.size() == 16);  // 16^3 = 4096
    // all-Replicate is kept, the best (split factor 8) is kept, and the order is the rule's.
    CHECK(list.back().outputs[0].is_replicate());
    bool best = false;
    for (size_t j = 0; j + 1 < list.size(); ++j) {
      best = best || list[j].outputs[0].split_factor() == 8;
      if (j + 2 < list.size()) {
        CHECK(list[j].outputs[0].split_factor() < list[j + 1].outputs[0].split_factor());
      }
    }
    CHECK(best);
  }
  CHECK(product <= 4096);
  CHECK(scored == 3 * per);  // each mesh dim ranked once, the others all-Replicate
  // Small enough already: untouched.
  std::vector<std::vector<ShardingStrategy>> small = {{unary(Shard(0), Shard(0))}};
  CHECK_FALSE(dtensor::bound_strategies(small, {0}, score, 4096));
}

TEST_CASE("user rules: thousands of strategies on a 2-D mesh give one device's result",
          "[dtensor][rules]") {
  // 5,000 strategies per mesh dim: repeats, out-of-range dims and 1,000 distinct split factors
  // (all valid). Without deduplication and a bound: 5,000^2 combinations.
  const RuleGuard rule("relu", [](const ShardingCall&) {
    std::vector<ShardingStrategy> list;
    for (int64_t j = 0; j < 5000; ++j) {
      switch (j % 5) {
        case 0:
          list.push_back(unary(Shard(0), Shard(0)));
          break;
        case 1:
          list.push_back(unary(Shard(9), Shard(9)));  // relu's input has 2 dims
          break;
        case 2:
          list.push_back(unary(StridedShard(0, j / 5 + 1), StridedShard(0, j / 5 + 1)));
          break;
        default:
          list.push_back(unary(Shard(1), Shard(1)));
      }
    }
    return list;
  });
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({8, 4}, 11);
    const DTensor d = distribute_tensor(a, mesh, {Shard(0), Shard(1)});
    const DTensor out = relu(d);
    expect_equal(f, "relu with 5,000 strategies per mesh dim", out.full_tensor(), relu(a));
    expect_placements(f, "relu keeps the input's placements", out, {Shard(0), Shard(1)});
    // A Replicate input: the best candidate (all-Replicate, added last) is never found early,
    // so every combination left is priced.
    const DTensor whole = relu(distribute_tensor(a, mesh));
    expect_equal(f, "relu of a Replicate input", whole.full_tensor(), relu(a));
    expect_placements(f, "relu of a Replicate input", whole, {Replicate(), Replicate()});
    return f;
  });
}

TEST_CASE("user rules: validate turns a wrong rule into an Error naming it", "[dtensor][rules]") {
  // relu is not linear: relu(R) -> P(sum) makes full_tensor 4x the answer on 4 ranks.
  const auto wrong = [](const ShardingCall&) {
    return std::vector<ShardingStrategy>{unary(Partial(), Replicate())};
  };
  SECTION("trusted (validate off): the wrong answer, as documented") {
    const RuleGuard rule("relu", wrong);
    on_mesh({4}, [](const DeviceMesh& mesh) {
      Failures f;
      const Tensor a = ints({8, 4}, 3).abs() + 1.0;
      const DTensor d = distribute_tensor(a, mesh);
      expect_equal(f, "a trusted wrong rule", relu(d).full_tensor(), a * 4.0);
      return f;
    });
  }
  SECTION("validate: an Error on every rank") {
    const RuleGuard rule("relu", wrong, {.validate = true});
    on_mesh({4}, [](const DeviceMesh& mesh) {
      Failures f;
      const DTensor d = distribute_tensor(ints({8, 4}, 3).abs() + 1.0, mesh);
      expect_error(f, "relu(R) -> P(sum) checked", [&] { relu(d); },
                   {"[relu] the sharding rule registered for 'relu' does not hold here",
                    "inputs [R] and outputs [P(sum)]", "differs from 'relu' on the whole tensors",
                    "unregister_sharding(\"relu\")"});
      return f;
    });
  }
  SECTION("validate: a right rule runs and gives one device's result, in place too") {
    const RuleGuard rule("mul",
                         [](const ShardingCall& call) {
                           std::vector<ShardingStrategy> list;
                           for (int64_t d = 0; d < 2; ++d)
                             list.push_back({{Shard(d)}, {Shard(d), Shard(d)}});
                           (void)call;
                           return list;
                         },
                         {.validate = true});
    const RuleGuard in_place(
        "mul_",
        [](const ShardingCall&) {
          return std::vector<ShardingStrategy>{{{Shard(0)}, {Shard(0), Shard(0)}}};
        },
        {.validate = true});
    on_mesh({4}, [](const DeviceMesh& mesh) {
      Failures f;
      const Tensor a = ints({8, 4}, 5), b = ints({8, 4}, 6);
      const DTensor x = distribute_tensor(a, mesh, {Shard(1)});
      const DTensor y = distribute_tensor(b, mesh, {Shard(1)});
      expect_equal(f, "mul checked", mul(x, y).full_tensor(), mul(a, b));
      DTensor z = distribute_tensor(a, mesh, {Shard(0)});
      z *= distribute_tensor(b, mesh, {Shard(0)});
      expect_equal(f, "mul_ checked", z.full_tensor(), mul(a, b));
      return f;
    });
  }
}

TEST_CASE("user rules: output placements the op cannot give name the rule", "[dtensor][rules]") {
  // relu of S(0) claimed to give S(1): the local result has the input's shard shape.
  const RuleGuard rule("relu", [](const ShardingCall&) {
    return std::vector<ShardingStrategy>{unary(Shard(1), Shard(0))};
  });
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const DTensor d = distribute_tensor(ints({8, 4}, 7), mesh, {Shard(0)});
    expect_error(f, "relu S(0) -> S(1)", [&] { relu(d); },
                 {"[relu] the sharding rule registered for 'relu' gives output 0 placements [S(1)]",
                  "shard of shape [8, 1]", "computes a local result of shape [2, 4]"});
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
