// ginbench ceiling's SM rows: what plain SM stores move to peer GPUs, with nvl's copy loop and
// launch shape but no protocol (no barrier, no flag), between cuMemAlloc buffers made reachable
// by peer access. Beside the copy-engine rows this separates what the links give from what
// SM-initiated writes reach on them. Both engines' copies are checked (fill / poison / verify).
#include "device_compat.cuh"
#include "splitmix.cuh"

// Largest number of destinations of one source (8 GPUs per host).
#define GB_CEILING_MAX_DSTS 7

// One source's copies: `bytes` from src[d] to dst[d]. Mirrors `Dsts` in src/ceiling.rs.
struct GbCeilingDsts {
  const uint4* src[GB_CEILING_MAX_DSTS];
  uint4* dst[GB_CEILING_MAX_DSTS];
  int n;
};
static_assert(sizeof(GbCeilingDsts) == 120, "src/ceiling.rs mirrors this layout");

// Work items (destination, chunk of 8 × 32 vectors) dealt round-robin to warps, so consecutive
// warps feed different peers; 8 loads in flight per lane before the stores, as in nvl. Slots are
// 16-byte aligned (the host's stride); a tail under 16 bytes is copied byte by byte.
extern "C" __global__ void __launch_bounds__(GB_THREADS) gb_ceiling_sm_copy(GbCeilingDsts c, size_t bytes) {
  constexpr int UNROLL = 8;
  constexpr size_t CHUNK = UNROLL * 32;
  const size_t vecs = bytes / 16, nchunks = (vecs + CHUNK - 1) / CHUNK;
  const int lane = threadIdx.x & 31;
  const size_t warp = gb_tid() >> 5, nwarps = gb_nthreads() >> 5;
  for (size_t w = warp; w < c.n * nchunks; w += nwarps) {
    const int d = int(w % c.n);
    const size_t k = w / c.n, left = vecs - k * CHUNK;
    const uint4* s = c.src[d] + k * CHUNK;
    uint4* t = c.dst[d] + k * CHUNK;
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
  for (size_t i = gb_tid(); i < c.n * tail; i += gb_nthreads()) {
    const size_t d = i / tail, b = vecs * 16 + i % tail;
    ((char*)c.dst[d])[b] = ((const char*)c.src[d])[b];
  }
}

// The check. Source slot (i, j) holds word w = pattern(tag(i, j), w); GPU j's receive slot for i
// is poisoned with its complement before a measurement (so a byte never written cannot pass) and
// must hold the pattern after it. Slots are 4 KB aligned; a tail under 8 bytes takes the bytes of
// the next pattern word.
__device__ __forceinline__ uint64_t gb_ceiling_word(uint32_t tag, uint64_t w) {
  return gb_splitmix64((uint64_t(tag) << 40) ^ w);
}

__device__ __forceinline__ uint8_t gb_ceiling_byte(uint32_t tag, uint64_t b) {
  return uint8_t(gb_ceiling_word(tag, b / 8) >> (8 * (b % 8)));
}

extern "C" __global__ void gb_ceiling_fill(uint8_t* p, size_t bytes, uint32_t tag, int complement) {
  const uint64_t flip = complement ? ~0ull : 0, words = bytes / 8;
  for (uint64_t w = gb_tid(); w < words; w += gb_nthreads()) ((uint64_t*)p)[w] = gb_ceiling_word(tag, w) ^ flip;
  for (uint64_t b = words * 8 + gb_tid(); b < bytes; b += gb_nthreads()) p[b] = gb_ceiling_byte(tag, b) ^ uint8_t(flip);
}

// Adds the bytes that differ from the pattern to *wrong.
extern "C" __global__ void gb_ceiling_verify(const uint8_t* p, size_t bytes, uint32_t tag,
                                             unsigned long long* wrong) {
  const uint64_t words = bytes / 8;
  unsigned long long bad = 0;
  for (uint64_t w = gb_tid(); w < words; w += gb_nthreads()) {
    const uint64_t x = ((const uint64_t*)p)[w] ^ gb_ceiling_word(tag, w);
    for (int k = 0; k < 8; k++) bad += ((x >> (8 * k)) & 0xff) != 0;
  }
  for (uint64_t b = words * 8 + gb_tid(); b < bytes; b += gb_nthreads()) bad += p[b] != gb_ceiling_byte(tag, b);
  if (bad) atomicAdd(wrong, bad);
}
