#include "tools/shardbench/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

namespace tessera::shardbench {

namespace {
constexpr int kWidth = 30;
}  // namespace

ProgressBar::ProgressBar(int total, std::FILE* out)
    : ProgressBar(total, out, isatty(fileno(out)) != 0) {}

ProgressBar::ProgressBar(int total, std::FILE* out, bool draw)
    : total_(std::max(total, 1)), out_(out), draw_(draw) {}

ProgressBar::~ProgressBar() { clear(); }

void ProgressBar::step(const std::string& what) {
  ++done_;
  if (!draw_) return;
  const int filled = std::min(done_, total_) * kWidth / total_;
  const std::string frame =
      fmt::format("[{:<{}}] {:>3}% {:<24}", std::string(static_cast<size_t>(filled), '='), kWidth,
                  std::min(done_, total_) * 100 / total_, what);
  drawn_ = std::max(drawn_, frame.size());
  // Padded to the longest frame so far: a shorter one would leave the end of a longer one.
  std::fputs(fmt::format("\r{:<{}}", frame, drawn_).c_str(), out_);
  std::fflush(out_);
  if (done_ >= total_) clear();
}

// Blanks the frame and returns to the line's start (the destructor's part: no throwing calls).
void ProgressBar::clear() {
  if (drawn_ == 0) return;
  std::fputc('\r', out_);
  for (size_t i = 0; i < drawn_; ++i) std::fputc(' ', out_);
  std::fputc('\r', out_);
  std::fflush(out_);
  drawn_ = 0;
}

}  // namespace tessera::shardbench
