#include "tessera/autograd/optim/lr_scheduler.h"

#include <cmath>
#include <numbers>

#include "tessera/runtime/error.h"

namespace tessera::optim {

namespace {

// The "lr" option of group `g`.
double* lr_of(Optimizer& optimizer, size_t g) {
  for (const Optimizer::OptionRef& o : optimizer.option_refs(g)) {
    if (o.name == "lr" && o.number != nullptr) return o.number;
  }
  TS_CHECK(false, "[LRScheduler] parameter group ", g, " has no \"lr\" option");
  return nullptr;
}

}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g)
    base_lrs_.push_back(*lr_of(optimizer, g));
}

void LRScheduler::apply() {
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    *lr_of(optimizer_, g) = base_lrs_[g] * factor(last_epoch_, g);
  }
}

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

void LRScheduler::set_last_epoch(int64_t epoch) {
  TS_CHECK(epoch >= 0, "[LRScheduler.set_last_epoch] epoch must be >= 0, got ", epoch);
  last_epoch_ = epoch;
  apply();
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (size_t g = 0; g < base_lrs_.size(); ++g) out.push_back(*lr_of(optimizer_, g));
  return out;
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lambda)
    : LRScheduler(optimizer), lambda_(std::move(lambda)) {
  TS_CHECK(static_cast<bool>(lambda_), "[LambdaLR] the lambda is empty");
  apply();
}

double LambdaLR::factor(int64_t epoch, size_t) const { return lambda_(epoch); }

std::function<double(int64_t)> warmup_cosine(int64_t warmup_steps, int64_t total_steps,
                                             double min_factor) {
  TS_CHECK(warmup_steps >= 0, "[warmup_cosine] warmup_steps must be >= 0, got ", warmup_steps);
  TS_CHECK(total_steps > warmup_steps, "[warmup_cosine] total_steps (", total_steps,
           ") must exceed warmup_steps (", warmup_steps, ")");
  TS_CHECK(min_factor >= 0.0 && min_factor <= 1.0,
           "[warmup_cosine] min_factor must be in [0, 1], got ", min_factor);
  return [=](int64_t step) {
    if (step < warmup_steps)
      return static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    if (step >= total_steps) return min_factor;
    const double progress =
        static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
    return min_factor + (1.0 - min_factor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  };
}

}  // namespace tessera::optim
