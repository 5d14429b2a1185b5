#pragma once
// Learning-rate schedules (torch.optim.lr_scheduler): a scheduler sets each parameter group's
// "lr" option from the group's base learning rate (its lr when the scheduler was made) and the
// number of step() calls so far. A training loop calls optimizer.step() then scheduler.step().
// Checkpoints restore the groups' lr with the optimizer's options (checkpoint/checkpoint.h); the
// scheduler's position is last_epoch(), restored with set_last_epoch().

#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/autograd/optim/optimizer.h"

namespace tessera::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  // Advances one step and sets every group's lr to base_lr x factor(step).
  void step();
  // The steps taken (torch's last_epoch; 0 after construction).
  int64_t last_epoch() const { return last_epoch_; }
  // Moves to `epoch` (a resumed run) and sets the groups' lr for it. Errors: epoch < 0.
  void set_last_epoch(int64_t epoch);
  // Each group's lr as last set.
  std::vector<double> get_last_lr() const;
  const std::vector<double>& base_lrs() const { return base_lrs_; }

 protected:
  // Reads the groups' lr as their base; sets the lr of step 0. Errors: a group without an "lr"
  // option.
  explicit LRScheduler(Optimizer& optimizer);
  // Call at the end of a derived constructor (factor is virtual).
  void apply();
  virtual double factor(int64_t epoch, size_t group) const = 0;

 private:
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = 0;
};

// lr = base_lr x lambda(step), one lambda for every group (torch.optim.lr_scheduler.LambdaLR).
class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lambda);

 protected:
  double factor(int64_t epoch, size_t group) const override;

 private:
  std::function<double(int64_t)> lambda_;
};

// The usual language-model schedule as a LambdaLR factor: linear warm-up from 1 / warmup_steps to
// 1 over the first warmup_steps steps, then a half cosine down to min_factor at total_steps (and
// min_factor after). Errors: warmup_steps < 0, total_steps <= warmup_steps, min_factor outside
// [0, 1].
std::function<double(int64_t)> warmup_cosine(int64_t warmup_steps, int64_t total_steps,
                                             double min_factor = 0.0);

}  // namespace tessera::optim
