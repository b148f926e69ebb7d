// splitmix64 (Steele, Lea, Flood 2014): the mixer behind every check pattern on the device
// (check.cu's alltoall patterns, ceiling.cu's copy patterns). One definition, so both stay the
// same function of their input.
#pragma once
#include <stdint.h>

__device__ __forceinline__ uint64_t gb_splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
