#include "stats.h"

#include <cstdio>
#include <cstdlib>

namespace gbl {

bool statsEnabled() {
  static const bool on = [] {
    const char* v = getenv("GINBENCH_LOOPBACK_STATS");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  return on;
}

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
}

}  // namespace gbl
