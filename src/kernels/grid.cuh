// A thread's index in the grid and the grid's size, for grid-stride loops.
#pragma once
#include <stdint.h>

__device__ __forceinline__ uint64_t gb_tid() { return uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ uint64_t gb_nthreads() { return uint64_t(gridDim.x) * blockDim.x; }
