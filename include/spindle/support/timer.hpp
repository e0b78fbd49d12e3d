// Wall-clock timing helpers used by the pass pipeline and the benchmarks.
#pragma once

#include <chrono>

namespace spindle {

class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  double micros() const { return seconds() * 1e6; }
  void reset() { start_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace spindle
