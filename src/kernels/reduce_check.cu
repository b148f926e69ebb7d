// Correctness check of the background all-reduce (interference_perf): fill, poison, verify.
//
// Rank r's element i is (r + 1) + h(seed, i) with h in 0..3, a float holding a small integer. The
// sum over n ranks is n(n+1)/2 + n*h(seed, i): below 2^24 for n <= 4096, so every partial sum is
// exact in float whatever order NCCL's algorithm adds in, and the result is compared exactly.
// h varies with the element, so a block landing at the wrong offset is caught, and with the seed,
// so a result left from an earlier run does not pass. Poison is NaN: it never compares equal.
#include <stdint.h>

#include "grid.cuh"

namespace {

__device__ __forceinline__ uint32_t h(uint32_t seed, uint64_t i) {
  uint64_t x = i * 0x9e3779b97f4a7c15ull + seed;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  return uint32_t(x >> 62);
}

}  // namespace

extern "C" __global__ void gb_reduce_fill_f32(float* buf, uint64_t count, uint32_t seed, uint32_t rank) {
  for (uint64_t i = gb_tid(); i < count; i += gb_nthreads()) buf[i] = float(rank + 1 + h(seed, i));
}

extern "C" __global__ void gb_reduce_poison_f32(float* buf, uint64_t count) {
  for (uint64_t i = gb_tid(); i < count; i += gb_nthreads()) buf[i] = __int_as_float(0x7fc00000);
}

// Counts elements that differ from the sum over `nranks` ranks into *wrong (accumulates).
extern "C" __global__ void gb_reduce_verify_f32(const float* buf, uint64_t count, uint32_t seed, uint32_t nranks,
                                                unsigned long long* wrong) {
  uint64_t stride = gb_nthreads();
  uint64_t rounds = (count + stride - 1) / stride;
  float base = float(uint64_t(nranks) * (nranks + 1) / 2);
  for (uint64_t r = 0; r < rounds; r++) {
    uint64_t i = r * stride + gb_tid();
    bool bad = i < count && !(buf[i] == base + float(nranks * h(seed, i)));
    unsigned mask = __ballot_sync(0xffffffffu, bad);
    if ((threadIdx.x & 31) == 0 && mask) atomicAdd(wrong, (unsigned long long)__popc(mask));
  }
}
