// splitmix64 (Steele, Lea, Flood 2014): the mixer behind the check patterns on the device
// (check.cu's alltoall patterns, ep_common.cuh's token values, ceiling.cu's copy patterns). One
// definition, so all stay the same function of their input. (The all-reduce check draws 2-bit
// values its own way, reduce_check.cu, so that float sums of them stay exact.)
#pragma once
#include <stdint.h>

__device__ __forceinline__ uint64_t gb_splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A check's value `idx` of one rank: (seed, rank) hashed apart from the index. Shifted into one
// word they overlapped (seed 256 of rank 0 was seed 0 of rank 1), so two checks could share a
// pattern; and a hash has no period in any of its inputs, where a linear formula repeats.
__device__ __forceinline__ uint64_t gb_keyed64(uint32_t seed, uint32_t rank, uint64_t idx) {
  return gb_splitmix64(gb_splitmix64((uint64_t(seed) << 32) | rank) ^ idx);
}
