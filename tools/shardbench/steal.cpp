#include "tools/shardbench/steal.h"

#include <fstream>
#include <sstream>
#include <string>

namespace tessera::shardbench {

StealMeter::StealMeter() : start_(read()) {}

// The first line of /proc/stat: "cpu user nice system idle iowait irq softirq steal ..." in
// clock ticks summed over the CPUs.
std::optional<StealMeter::Times> StealMeter::read() {
  std::ifstream in("/proc/stat");
  std::string line;
  if (!std::getline(in, line) || line.rfind("cpu ", 0) != 0) return std::nullopt;
  std::istringstream fields(line.substr(4));
  Times t;
  double value = 0;
  for (int i = 0; i < 8 && fields >> value; ++i) {
    t.total += value;
    if (i == 7) t.steal = value;
  }
  if (t.total <= 0) return std::nullopt;
  return t;
}

std::optional<double> StealMeter::share() const {
  const std::optional<Times> now = read();
  if (!start_ || !now || now->total <= start_->total) return std::nullopt;
  return (now->steal - start_->steal) / (now->total - start_->total);
}

}  // namespace tessera::shardbench
