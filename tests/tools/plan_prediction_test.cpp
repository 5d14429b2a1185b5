// An explicit --plan is predicted as the built-in strategies are (issue 61 item 2; Note
// [Predicting a plan] in tools/shardbench/predict.cpp): the calibrated share of a rank holding
// 1/n of the parts the plan shards whole (the rest whole), and the collectives its steps issued;
// the median error counts it.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "tests/tools/small_model.h"
#include "tools/shardbench/predict.h"
#include "tools/shardbench/report.h"

namespace tessera::shardbench {
namespace {

Strategy plan_of(const std::string& text, int64_t ranks) {
  const std::string path = "plan_prediction_test_plan.txt";
  { std::ofstream(path) << text; }
  Strategy s = plan_from_file(path, ranks);
  std::remove(path.c_str());
  return s;
}

const char* kTensorParallelStyles =
    "blocks.*.wq colwise dtensor\nblocks.*.wk colwise dtensor\nblocks.*.wv colwise dtensor\n"
    "blocks.*.wo rowwise\nblocks.*.up colwise dtensor\nblocks.*.down rowwise\n";

TEST_CASE("a plan's share: the parts it shards whole on every block", "[shardbench]") {
  const ModelConfig lm = small_model("transformer", 2);
  const auto share = tensor_parallel_share_of(plan_of(kTensorParallelStyles, 4), lm);
  REQUIRE(share.has_value());
  CHECK(share->degree == 4);
  CHECK(share->batch == lm.batch);
  CHECK(share->parts == ShardedParts{true, true, false});
  CHECK(tensor_parallel_share_of(plan_of("blocks.*.up colwise\nblocks.*.down rowwise\n", 4), lm)
            ->parts == ShardedParts{false, true, false});
  // One block of two, or one Linear of a pair: no part whole, the whole model on each rank.
  const ShardedParts none{false, false, false};
  CHECK(tensor_parallel_share_of(plan_of("blocks.0.up colwise\nblocks.0.down rowwise\n", 4), lm)
            ->parts == none);
  CHECK(tensor_parallel_share_of(plan_of("embed rowwise\n", 4), lm)->parts == none);
  const ModelConfig mlp = small_model("mlp", 1);
  CHECK(tensor_parallel_share_of(plan_of("0 colwise\n2 rowwise\n", 4), mlp)->parts ==
        ShardedParts{false, true, false});
  // The built-in strategies shard all three.
  CHECK(tensor_parallel_share_of(strategy_named("tp", 4), lm)->parts == ShardedParts{});
}

TEST_CASE("a share of some parts narrows those alone", "[shardbench]") {
  const ModelConfig lm = small_model("transformer", 2);  // hidden 16, 4 heads, vocab 32
  const ModelConfig all = tensor_parallel_share(lm, 4);
  CHECK(all.heads == 1);
  CHECK(all.attention_width == 4);
  CHECK(all.mlp_width == 16);
  CHECK(all.vocab == 8);
  const ModelConfig mlp_only = tensor_parallel_share(lm, 4, {false, true, false});
  CHECK(mlp_only.heads == 4);
  CHECK(attention_width(mlp_only) == 16);
  CHECK(mlp_only.mlp_width == 16);
  CHECK(mlp_only.vocab == 32);
}

TEST_CASE("a plan is predicted from its share and its traced collectives", "[shardbench]") {
  const ModelConfig lm = small_model("transformer", 2);
  Calibration cal;
  cal.cores = 2;
  cal.batch = lm.batch;
  cal.small_batch = 2;
  cal.compute = {1e-3, 1e-3};
  cal.model.local_bytes_per_s = 1e10;
  cal.model.set_line("all_reduce", 2, {1e-5, 1e-9});
  const Strategy shards_mlp = plan_of("blocks.*.up colwise\nblocks.*.down rowwise\n", 2);
  const TensorParallelShare share{2, lm.batch, {false, true, false}};
  CHECK_THROWS_WITH(predict(shards_mlp, lm, cal, {}),
                    Catch::Contains("no calibration of a 2-way tensor-parallel rank"));
  cal.tp_share_s[share] = 0.25;
  const Prediction alone = predict(shards_mlp, lm, cal, {});
  CHECK(alone.compute_s >= 0.25);
  CHECK(alone.compute_s < 0.26);  // the share and 1/2 of a 0.0 s optimizer step
  CHECK(alone.comm_s == 0.0);
  // The traced collectives are priced: 4 all_reduces of 1 MiB in all on the calibrated line.
  const std::vector<CollectiveTotal> traced{{"all_reduce", "0", 2, 4, 1 << 20}};
  const Prediction priced = predict(shards_mlp, lm, cal, traced);
  CHECK(priced.comm_s == Approx(4 * 1e-5 + 1e-9 * (1 << 20)));
  CHECK(priced.local_s > alone.local_s);

  // The report counts the plan in the median error and names the parts of its share.
  const auto result = [](const std::string& name, double measured, double predicted) {
    StrategyResult r;
    r.strategy.name = name;
    if (name.rfind("plan ", 0) == 0) r.strategy.kind = StrategyKind::Plan;
    r.strategy.mesh_shape = {2};
    r.measured.step_s = {measured, measured, measured};
    r.predicted.compute_s = predicted;
    return r;
  };
  const std::vector<StrategyResult> results{result("TP", 1.0, 0.5), result("plan p", 2.0, 2.2),
                                            result("DP", 1.0, 1.0)};
  CHECK(median_prediction_error(results) == Approx(0.1));
  CHECK(std::isnan(median_prediction_error({})));
  const std::string text = table(lm, cal, results, std::nullopt);
  CHECK_THAT(text, Catch::Contains("10% over 2 strategies and 1 plan") &&
                       Catch::Contains("a 2-way tensor-parallel rank's share (1/2 of the MLP "
                                       "alone, the rest whole) on every rank at once"));
}

}  // namespace
}  // namespace tessera::shardbench
