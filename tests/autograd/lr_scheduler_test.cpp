// Learning-rate schedules: LambdaLR sets every group's lr from its base lr (torch's
// LambdaLR: lr of step 0 at construction), warmup_cosine against values worked out by hand, and
// set_last_epoch for a resumed run.

#include <catch2/catch.hpp>
#include <cmath>

#include "tessera/tessera.h"

namespace tessera {
namespace {

TEST_CASE("warmup_cosine: linear warm-up then a half cosine to its floor", "[optim]") {
  const auto f = optim::warmup_cosine(4, 10, 0.1);
  // Warm-up: (step + 1) / 4.
  CHECK(f(0) == 0.25);
  CHECK(f(3) == 1.0);
  // Cosine over steps 4..10: progress (step - 4) / 6; at step 7 half way, cos(pi / 2) = 0.
  CHECK(f(4) == Approx(1.0).epsilon(1e-15));
  CHECK(f(7) == Approx(0.1 + 0.9 * 0.5).epsilon(1e-15));
  CHECK(f(10) == 0.1);
  CHECK(f(50) == 0.1);
  CHECK_THROWS_WITH(optim::warmup_cosine(5, 5), Catch::Contains("must exceed warmup_steps"));
  CHECK_THROWS_WITH(optim::warmup_cosine(-1, 5), Catch::Contains(">= 0"));
  CHECK_THROWS_WITH(optim::warmup_cosine(1, 5, 2.0), Catch::Contains("[0, 1]"));
}

TEST_CASE("LambdaLR sets each group's lr from its base lr", "[optim]") {
  Tensor a = ones({2}).requires_grad_(), b = ones({2}).requires_grad_();
  optim::AdamW opt(
      std::vector<optim::ParamGroup<optim::AdamWOptions>>{{{a}, {.lr = 0.1}}, {{b}, {.lr = 0.01}}});
  optim::LambdaLR scheduler(opt, [](int64_t step) { return 1.0 / static_cast<double>(step + 1); });
  CHECK(scheduler.get_last_lr() == std::vector<double>{0.1, 0.01});  // step 0's factor 1
  scheduler.step();
  CHECK(scheduler.last_epoch() == 1);
  CHECK(opt.param_groups()[0].options.lr == 0.1 / 2);
  CHECK(opt.param_groups()[1].options.lr == 0.01 / 2);
  scheduler.set_last_epoch(9);
  CHECK(scheduler.get_last_lr() == std::vector<double>{0.1 * (1.0 / 10), 0.01 * (1.0 / 10)});
  CHECK(scheduler.base_lrs() == std::vector<double>{0.1, 0.01});
  CHECK_THROWS_WITH(scheduler.set_last_epoch(-1), Catch::Contains(">= 0"));
  // The update uses the scheduled lr: one SGD step moves by lr x grad.
  Tensor p = ones({1}).requires_grad_();
  optim::SGD sgd({p}, {.lr = 1.0});
  optim::LambdaLR half(sgd, [](int64_t) { return 0.5; });
  p.set_grad(ones({1}));
  sgd.step();
  CHECK(p.item<double>() == 0.5);
}

}  // namespace
}  // namespace tessera
