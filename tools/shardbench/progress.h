#pragma once
// tessera-shardbench's progress bar: one line redrawn in place, "[=====     ]  40% strategy".

#include <cstdio>
#include <string>

namespace tessera::shardbench {

class ProgressBar {
 public:
  // Draws on `out` only when it is a terminal: a log or a pipe would keep every '\r' frame.
  ProgressBar(int total, std::FILE* out);
  // Draws or not as `draw` says (the tests').
  ProgressBar(int total, std::FILE* out, bool draw);
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  // Clears a line it left drawn (an error unwinding past it), so that what is printed next, the
  // error, starts on a line of its own.
  ~ProgressBar();

  void step(const std::string& what);

 private:
  void clear();
  int total_;
  std::FILE* out_;
  bool draw_;
  int done_ = 0;
  size_t drawn_ = 0;  // the longest frame on the line since it was last cleared
};

}  // namespace tessera::shardbench
