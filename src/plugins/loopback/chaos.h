// Ordering fuzz (GINBENCH_LOOPBACK_CHAOS=<seed>): makes the plugin exercise every freedom GIN's
// contract leaves it, so a GIN program that relies on more than the contract fails here instead
// of on a real NIC. Within the rules (2.28.9: every signal is strong), chaos may
//   - hold back unsignalled puts and issue them later, in another order (but before any later
//     signal of the same context to the same peer, and before the op reports completion);
//   - split a put into chunks issued in a shuffled order, possibly at different times;
//   - report completions late (test() says "not done" a few more times after the copy finished).
// It never lets a signal become visible before an earlier put or signal of its context to that
// peer. The decisions come from a per-communicator generator seeded by (seed, rank, connection),
// so a given communicator makes the same choices for the same call sequence.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gbl {

// splitmix64: tiny, seedable, good enough for fuzzing decisions.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0.
  uint64_t below(uint64_t n) { return next() % n; }
  bool chance(unsigned percent) { return below(100) < percent; }

 private:
  uint64_t state_;
};

struct ChaosPolicy {
  unsigned holdPercent = 50;      // unsignalled puts (chunks) held back
  unsigned maxHoldPolls = 6;      // a held chunk is issued within this many progress calls
  size_t minSplitBytes = 16;      // puts at least this large may be split
  unsigned maxChunks = 4;
  unsigned latePercent = 50;      // completions reported late
  unsigned maxLatePolls = 4;
};

// Chunk boundaries: n chunks of [0, bytes), 8-byte aligned where the size allows.
inline size_t chunkStart(size_t bytes, unsigned n, unsigned i) {
  size_t step = (bytes / n) & ~static_cast<size_t>(7);
  if (step == 0) step = bytes / n;
  return i == n ? bytes : step * i;
}

}  // namespace gbl
