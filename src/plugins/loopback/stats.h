// Where the plugin's time goes (GINBENCH_LOOPBACK_STATS=1): per-process counters of the data
// path, printed as one line per connection at close. Off by default: the counters then cost
// one relaxed load per call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace gbl {

// The driver calls of the data path (mover_cuda.cc), counted and timed one by one.
enum CudaCall { kCallMemcpy, kCallEventRecord, kCallEventQuery, kCallStreamWaitEvent, kCallWriteValue, kCallCount };
extern const char* const kCudaCallNames[kCallCount];

struct Stats {
  std::atomic<uint64_t> puts{0}, putNs{0};          // iput / iputSignal / iget calls
  std::atomic<uint64_t> signals{0}, readBacks{0}, readBackNs{0};
  std::atomic<uint64_t> tests{0}, testNs{0}, testsDone{0};
  std::atomic<uint64_t> doneNs{0};  // summed over ops: from the put call to test() saying done
  std::atomic<uint64_t> calls[kCallCount]{}, callNs[kCallCount]{};
};

bool statsEnabled();
Stats& stats();
void printStats(const char* what);

// Adds the scope's duration to `ns` (and 1 to `count`) when stats are on.
class StatsTimer {
 public:
  StatsTimer(std::atomic<uint64_t>& count, std::atomic<uint64_t>& ns)
      : count_(count), ns_(ns), on_(statsEnabled()) {
    if (on_) t0_ = std::chrono::steady_clock::now();
  }
  ~StatsTimer() {
    if (!on_) return;
    auto d = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_);
    count_.fetch_add(1, std::memory_order_relaxed);
    ns_.fetch_add(static_cast<uint64_t>(d.count()), std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t>& count_;
  std::atomic<uint64_t>& ns_;
  bool on_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace gbl
