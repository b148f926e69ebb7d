// Correctness-check kernels: deterministic fill, poison and bit-exact verify.
//
// Rank r's send buffer holds n blocks of c elements; element i is pattern(seed, r, i). After an
// alltoall, block j of rank r's receive buffer must equal block r of rank j's send buffer, i.e.
// recv[j*c + k] == pattern(seed, j, r*c + k). Verification recomputes that value on the device, so
// no "expected" buffer is needed. Elements are compared as unsigned integers of their width (the
// operation moves bits; the datatype does not matter).
#include <stdint.h>

#include "splitmix.cuh"

namespace {

// (seed, rank) are hashed apart from the index: shifted into one word they overlapped (seed 256
// of rank 0 was seed 0 of rank 1), so two checks could share a pattern.
template <typename T>
__device__ __forceinline__ T pattern(uint32_t seed, uint32_t rank, uint64_t idx) {
  return static_cast<T>(gb_splitmix64(gb_splitmix64((uint64_t(seed) << 32) | rank) ^ idx));
}

template <typename T>
__device__ __forceinline__ T expected(uint32_t seed, uint32_t rank, uint64_t c, uint64_t idx) {
  uint64_t j = idx / c, k = idx % c;
  return pattern<T>(seed, uint32_t(j), uint64_t(rank) * c + k);
}

__device__ __forceinline__ uint64_t tid() { return uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ uint64_t nthreads() { return uint64_t(gridDim.x) * blockDim.x; }

template <typename T>
__device__ void fill(T* buf, uint64_t count, uint32_t seed, uint32_t rank) {
  for (uint64_t i = tid(); i < count; i += nthreads()) buf[i] = pattern<T>(seed, rank, i);
}

// Poison each receive element with the complement of its expected value, so an element the
// operation never wrote is always counted wrong (a constant poison could equal the pattern).
template <typename T>
__device__ void poison(T* buf, uint64_t c, uint32_t nranks, uint32_t seed, uint32_t rank) {
  uint64_t count = c * nranks;
  for (uint64_t i = tid(); i < count; i += nthreads()) buf[i] = T(~expected<T>(seed, rank, c, i));
}

template <typename T>
__device__ void verify(const T* buf, uint64_t c, uint32_t nranks, uint32_t seed, uint32_t rank,
                       unsigned long long* wrong) {
  uint64_t count = c * nranks;
  // Grid-stride with a uniform trip count per warp so the ballot below sees full warps.
  uint64_t stride = nthreads();
  uint64_t rounds = (count + stride - 1) / stride;
  for (uint64_t r = 0; r < rounds; r++) {
    uint64_t i = r * stride + tid();
    bool bad = i < count && buf[i] != expected<T>(seed, rank, c, i);
    unsigned mask = __ballot_sync(0xffffffffu, bad);
    if ((threadIdx.x & 31) == 0 && mask) atomicAdd(wrong, (unsigned long long)__popc(mask));
  }
}

}  // namespace

#define GB_CHECK_KERNELS(SUFFIX, T)                                                              \
  extern "C" __global__ void gb_fill_##SUFFIX(T* buf, uint64_t count, uint32_t seed,              \
                                              uint32_t rank) {                                   \
    fill<T>(buf, count, seed, rank);                                                             \
  }                                                                                              \
  extern "C" __global__ void gb_poison_##SUFFIX(T* buf, uint64_t c, uint32_t nranks,              \
                                                uint32_t seed, uint32_t rank) {                  \
    poison<T>(buf, c, nranks, seed, rank);                                                       \
  }                                                                                              \
  extern "C" __global__ void gb_verify_##SUFFIX(const T* buf, uint64_t c, uint32_t nranks,        \
                                                uint32_t seed, uint32_t rank,                    \
                                                unsigned long long* wrong) {                     \
    verify<T>(buf, c, nranks, seed, rank, wrong);                                                \
  }

GB_CHECK_KERNELS(u8, uint8_t)
GB_CHECK_KERNELS(u16, uint16_t)
GB_CHECK_KERNELS(u32, uint32_t)
GB_CHECK_KERNELS(u64, uint64_t)
