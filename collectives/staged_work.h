#pragma once
// A collective that wrote into contiguous stand-ins for strided outputs: wait() completes it and
// copies each stand-in into its real output (once).

#include <mutex>
#include <utility>
#include <vector>

#include "tessera/collectives/work.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dist::detail {

class StagedWork final : public Work {
 public:
  // staged: (stand-in, output) pairs.
  StagedWork(WorkPtr inner, std::vector<std::pair<Tensor, Tensor>> staged)
      : inner_(std::move(inner)), staged_(std::move(staged)) {}
  void wait() override {
    inner_->wait();
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [stand_in, out] : staged_) out.copy_(stand_in);
    staged_.clear();
  }
  bool is_completed() const override { return inner_->is_completed(); }

 private:
  WorkPtr inner_;
  std::mutex mutex_;
  std::vector<std::pair<Tensor, Tensor>> staged_;
};

}  // namespace tessera::dist::detail
