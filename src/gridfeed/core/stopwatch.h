// Wall-clock seconds since a start (steady clock), for phase times in logs and reports.
// A value; not thread safe.
#pragma once

#include <chrono>

namespace gridfeed {

class Stopwatch {
 public:
  Stopwatch() : start_(Clock::now()) {}
  // Seconds since construction or the last Lap().
  double Seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  // Seconds since construction or the last Lap(), and restarts.
  double Lap() {
    const auto now = Clock::now();
    const double s = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return s;
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
};

}  // namespace gridfeed
