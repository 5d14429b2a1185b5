#pragma once
// The share of CPU time a hypervisor gave to other guests (steal) while tessera-shardbench ran:
// on a shared virtual machine it is what makes two runs of the same strategy differ, so the table
// prints it beside the figures it disturbed.

#include <optional>

namespace tessera::shardbench {

class StealMeter {
 public:
  StealMeter();  // starts the interval
  // Steal over all CPU time since construction, in [0, 1]; nullopt where /proc/stat is unreadable.
  std::optional<double> share() const;

 private:
  struct Times {
    double steal = 0, total = 0;
  };
  static std::optional<Times> read();
  std::optional<Times> start_;
};

}  // namespace tessera::shardbench
