#include "common/clock.h"

#include <chrono>

namespace allot {

TimeMs SystemClock::nowMs() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace allot
