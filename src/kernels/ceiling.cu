// ginbench ceiling's SM rows: what plain SM stores move to peer GPUs, with nvl's copy loop and
// launch shape but no protocol (no barrier, no flag), between cuMemAlloc buffers made reachable
// by peer access. Beside the copy-engine rows this separates what the links give from what
// SM-initiated writes reach on them.
#include "device_compat.cuh"

// Largest number of destinations of one source (8 GPUs per host).
#define GB_CEILING_MAX_DSTS 7

// One source's copies: destination d receives `bytes` from src + d * stride. Mirrors `Dsts` in
// src/ceiling.rs.
struct GbCeilingDsts {
  uint4* p[GB_CEILING_MAX_DSTS];
  int n;
};
static_assert(sizeof(GbCeilingDsts) == 64, "src/ceiling.rs mirrors this layout");

// Work items (destination, chunk of 8 × 32 vectors) dealt round-robin to warps, so consecutive
// warps feed different peers; 8 loads in flight per lane before the stores, as in nvl. Slots are
// 16-byte aligned (the host's stride); a tail under 16 bytes is copied byte by byte.
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_ceiling_sm_copy(const char* src, size_t stride, GbCeilingDsts dst, size_t bytes) {
  constexpr int UNROLL = 8;
  constexpr size_t CHUNK = UNROLL * 32;
  const size_t vecs = bytes / 16, nchunks = (vecs + CHUNK - 1) / CHUNK;
  const int lane = threadIdx.x & 31;
  const size_t warp = gb_tid() >> 5, nwarps = gb_nthreads() >> 5;
  for (size_t w = warp; w < dst.n * nchunks; w += nwarps) {
    const int d = int(w % dst.n);
    const size_t c = w / dst.n, left = vecs - c * CHUNK;
    const uint4* s = (const uint4*)(src + d * stride) + c * CHUNK;
    uint4* t = dst.p[d] + c * CHUNK;
    if (left >= CHUNK) {
      uint4 v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) v[u] = __ldg(s + u * 32 + lane);
#pragma unroll
      for (int u = 0; u < UNROLL; u++) t[u * 32 + lane] = v[u];
    } else {
      for (size_t i = lane; i < left; i += 32) t[i] = __ldg(s + i);
    }
  }
  const size_t tail = bytes % 16;
  for (size_t i = gb_tid(); i < dst.n * tail; i += gb_nthreads()) {
    const size_t d = i / tail, b = vecs * 16 + i % tail;
    ((char*)dst.p[d])[b] = src[d * stride + b];
  }
}
