// Correctness-check kernels: deterministic fill, poison, bit-exact verify, and a check that a
// region still holds its fill.
//
// Rank r's send buffer holds n blocks of c elements; element i, bound for rank i / c, is
// pattern(seed, r, i / c, base + i), where `base` numbers the operations of one checked group apart
// (operation j: base j*n*c). After an alltoall, block j of rank r's receive buffer must equal block
// r of rank j's send buffer, i.e. recv[j*c + k] == pattern(seed, j, r, base + r*c + k).
// Verification recomputes that value on the device, so no "expected" buffer is needed. Elements are
// compared as unsigned integers of their width (the operation moves bits; the datatype does not
// matter). A region bound for no rank (a guard, the timed data) passes c = UINT64_MAX: all of it
// is "bound for rank 0".
#include <stdint.h>

#include "grid.cuh"

#include "splitmix.cuh"

namespace {

// Bit 0 says whether the sender's rank is above the receiver's. In place, block j of the receive
// buffer holds what this rank sends to rank j until rank j's block replaces it; with this bit the
// two differ in every element (j != r), so an element the operation never wrote is always wrong.
// Without it, one in 2^bits matched by chance (1 in 256 for 8-bit types).
template <typename T>
__device__ __forceinline__ T pattern(uint32_t seed, uint32_t src, uint32_t dst, uint64_t idx) {
  return static_cast<T>((gb_keyed64(seed, src, idx) & ~1ull) | uint64_t(src > dst));
}

// Element idx of a region of `count` whose blocks of c elements are bound for ranks 0, 1, ...
template <typename T>
__device__ __forceinline__ T filled(uint32_t seed, uint32_t rank, uint64_t c, uint64_t base, uint64_t idx) {
  return pattern<T>(seed, rank, uint32_t(idx / c), base + idx);
}

template <typename T>
__device__ __forceinline__ T expected(uint32_t seed, uint32_t rank, uint64_t c, uint64_t base, uint64_t idx) {
  uint64_t j = idx / c, k = idx % c;
  return pattern<T>(seed, uint32_t(j), rank, base + uint64_t(rank) * c + k);
}


template <typename T>
__device__ void fill(T* buf, uint64_t count, uint64_t c, uint32_t seed, uint32_t rank, uint64_t base) {
  for (uint64_t i = gb_tid(); i < count; i += gb_nthreads()) buf[i] = filled<T>(seed, rank, c, base, i);
}

// Poison each receive element with the complement of its expected value, so an element the
// operation never wrote is always counted wrong (a constant poison could equal the pattern).
template <typename T>
__device__ void poison(T* buf, uint64_t c, uint32_t nranks, uint32_t seed, uint32_t rank, uint64_t base) {
  uint64_t count = c * nranks;
  for (uint64_t i = gb_tid(); i < count; i += gb_nthreads()) buf[i] = T(~expected<T>(seed, rank, c, base, i));
}

// Count the elements i < count for which bad(i); grid-stride with a uniform trip count per warp
// so the ballot sees full warps.
template <typename Bad>
__device__ void count_bad(uint64_t count, Bad bad, unsigned long long* wrong) {
  uint64_t stride = gb_nthreads();
  uint64_t rounds = (count + stride - 1) / stride;
  for (uint64_t r = 0; r < rounds; r++) {
    uint64_t i = r * stride + gb_tid();
    unsigned mask = __ballot_sync(0xffffffffu, i < count && bad(i));
    if ((threadIdx.x & 31) == 0 && mask) atomicAdd(wrong, (unsigned long long)__popc(mask));
  }
}

}  // namespace

#define GB_CHECK_KERNELS(SUFFIX, T)                                                                          \
  extern "C" __global__ void gb_fill_##SUFFIX(T* buf, uint64_t count, uint64_t c, uint32_t seed,            \
                                              uint32_t rank, uint64_t base) {                                \
    fill<T>(buf, count, c, seed, rank, base);                                                                \
  }                                                                                                          \
  extern "C" __global__ void gb_poison_##SUFFIX(T* buf, uint64_t c, uint32_t nranks, uint32_t seed,          \
                                                uint32_t rank, uint64_t base) {                              \
    poison<T>(buf, c, nranks, seed, rank, base);                                                             \
  }                                                                                                          \
  /* Elements of the receive buffer that differ from what the peers sent. */                                 \
  extern "C" __global__ void gb_verify_##SUFFIX(const T* buf, uint64_t c, uint32_t nranks, uint32_t seed,    \
                                                uint32_t rank, uint64_t base, unsigned long long* wrong) {   \
    count_bad(c * nranks, [&](uint64_t i) { return buf[i] != expected<T>(seed, rank, c, base, i); }, wrong); \
  }                                                                                                          \
  /* Elements that no longer hold their fill (a send buffer, a guard). */                                    \
  extern "C" __global__ void gb_changed_##SUFFIX(const T* buf, uint64_t count, uint64_t c, uint32_t seed,    \
                                                 uint32_t rank, uint64_t base, unsigned long long* wrong) {  \
    count_bad(count, [&](uint64_t i) { return buf[i] != filled<T>(seed, rank, c, base, i); }, wrong);        \
  }

GB_CHECK_KERNELS(u8, uint8_t)
GB_CHECK_KERNELS(u16, uint16_t)
GB_CHECK_KERNELS(u32, uint32_t)
GB_CHECK_KERNELS(u64, uint64_t)
