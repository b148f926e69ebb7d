#include "stats.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gbl {

bool statsEnabled() {
  static const bool on = [] {
    const char* v = getenv("GINBENCH_LOOPBACK_STATS");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return on;
}

const char* const kCudaCallNames[kCallCount] = {"cuMemcpyAsync", "cuEventRecord", "cuEventQuery",
                                                 "cuStreamWaitEvent", "cuStreamWriteValue64"};

Stats& stats() {
  static Stats s;
  return s;
}

void printStats(const char* what) {
  if (!statsEnabled()) return;
  Stats& s = stats();
  auto us = [](uint64_t ns, uint64_t n) { return n ? static_cast<double>(ns) / n / 1000.0 : 0.0; };
  uint64_t puts = s.puts.load(), tests = s.tests.load(), reads = s.readBacks.load();
  fprintf(stderr,
          "ginbench-loopback: stats at %s: %lu ops (%.1f us each), %lu signals, %lu read-backs (%.1f us each), "
          "%lu tests (%.2f us each, %lu done)\n",
          what, static_cast<unsigned long>(puts), us(s.putNs.load(), puts), static_cast<unsigned long>(s.signals.load()),
          static_cast<unsigned long>(reads), us(s.readBackNs.load(), reads), static_cast<unsigned long>(tests),
          us(s.testNs.load(), tests), static_cast<unsigned long>(s.testsDone.load()));
  // Where an op's time goes: how long ops took to complete, and the driver calls behind them.
  std::string calls;
  for (int i = 0; i < kCallCount; i++) {
    char buf[96];
    uint64_t n = s.calls[i].load();
    snprintf(buf, sizeof buf, "%s %s %lu (%.2f us each)", i ? "," : "", kCudaCallNames[i],
             static_cast<unsigned long>(n), us(s.callNs[i].load(), n));
    calls += buf;
  }
  fprintf(stderr, "ginbench-loopback: stats at %s: ops took %.1f us from the put to done; CUDA calls:%s\n", what,
          us(s.doneNs.load(), s.testsDone.load()), calls.c_str());
}

}  // namespace gbl
