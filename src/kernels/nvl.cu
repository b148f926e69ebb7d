// Alltoall over NVLink through NCCL's device API (LSA: load/store to peers' symmetric windows).
// Every rank must be in one LSA team (one NVLink domain); ranks are LSA ranks.
//
// Layout: rank r's send window holds n blocks of `bytes` each, block p for peer p; block r of
// peer p's receive window receives it. `bytes` is a multiple of 16 and offsets are 16-byte
// aligned (the host guarantees both).
#include "device_compat.cuh"

// nvl-simple (-D 1): the plain kernel nccl-tests has. Entry barrier (peers are inside this launch,
// so their earlier reads of their receive buffers are done), 4-byte stores into every peer, exit
// barrier (every peer's stores into us are visible before the kernel ends).
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_nvl_simple(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
                  ncclDevComm dc) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dc, ncclTeamLsa(dc), dc.lsaBarrier, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
  const int me = dc.lsaRank, n = dc.lsaSize;
  const size_t words = bytes / 4;
  const uint32_t* src = (const uint32_t*)ncclGetLocalPointer(sendwin, sendoff);
  for (size_t i = gb_tid(); i < words; i += gb_nthreads()) {
    for (int p = 0; p < n; p++) {
      uint32_t* dst = (uint32_t*)ncclGetLsaPointer(recvwin, recvoff, p);
      dst[me * words + i] = src[p * words + i];
    }
  }
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

// nvl (-D 2): the same barriers; 16-byte vectors, UNROLL loads in flight per lane before the
// stores, and work items (peer, chunk) dealt round-robin to warps so that consecutive warps feed
// different peers and every NVLink is busy at once.
// nvl-pull (-D 7): the same, but each rank reads its blocks from the peers' send windows and
// writes them locally, so NVLink carries reads instead of posted writes.
template <int UNROLL, bool PULL>
__device__ void nvl_copy(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
                         ncclDevComm const& dc) {
  const int me = dc.lsaRank, n = dc.lsaSize;
  const size_t vecs = bytes / 16;
  constexpr size_t CHUNK = UNROLL * 32;
  const size_t nchunks = (vecs + CHUNK - 1) / CHUNK;
  const int lane = threadIdx.x & 31;
  const size_t warp = gb_tid() >> 5, nwarps = gb_nthreads() >> 5;
  for (size_t w = warp; w < n * nchunks; w += nwarps) {
    const int p = (me + 1 + int(w % n)) % n;  // start with the next peer: the local block last
    const size_t c = w / n;
    const uint4* s;
    uint4* d;
    if (PULL) {
      s = (const uint4*)ncclGetLsaPointer(sendwin, sendoff, p) + me * vecs + c * CHUNK;
      d = (uint4*)ncclGetLocalPointer(recvwin, recvoff) + p * vecs + c * CHUNK;
    } else {
      s = (const uint4*)ncclGetLocalPointer(sendwin, sendoff) + p * vecs + c * CHUNK;
      d = (uint4*)ncclGetLsaPointer(recvwin, recvoff, p) + me * vecs + c * CHUNK;
    }
    // Local sources are read-only for the whole kernel: the non-coherent path is safe for them.
    auto load = [&](size_t i) { return PULL ? s[i] : __ldg(s + i); };
    const size_t left = vecs - c * CHUNK;
    if (left >= CHUNK) {
      uint4 v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; u++) v[u] = load(u * 32 + lane);
#pragma unroll
      for (int u = 0; u < UNROLL; u++) d[u * 32 + lane] = v[u];
    } else {
      for (size_t i = lane; i < left; i += 32) d[i] = load(i);
    }
  }
}

template <bool PULL>
__device__ void nvl_barriered(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff,
                              size_t bytes, ncclDevComm const& dc) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dc, ncclTeamLsa(dc), dc.lsaBarrier, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
  nvl_copy<8, PULL>(sendwin, sendoff, recvwin, recvoff, bytes, dc);
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_nvl(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
           ncclDevComm dc) {
  nvl_barriered<false>(sendwin, sendoff, recvwin, recvoff, bytes, dc);
}

extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_nvl_pull(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
                ncclDevComm dc) {
  nvl_barriered<true>(sendwin, sendoff, recvwin, recvoff, bytes, dc);
}

// nvl-ll (-D 5): low latency, no barrier. Each 16-byte store carries 8 bytes of data and the
// launch's flag twice ({lo, flag, hi, flag}); the receiver polls its own memory until both flags
// match, so data and "it has arrived" travel in one NVLink transaction.
//
// Staging window (symmetric) on every rank: [2 buffers][n sources][cap bytes]. Launch e uses
// buffer e % 2 with flag e + 1 (zeroed memory never matches). Two buffers suffice: a sender can
// start launch e + 2 only after receiving launch e + 1 from every peer, which each peer sends
// only after it finished launch e, i.e. after it consumed buffer e % 2.
//
// The flag is the CTA's launch epoch, kept in device memory (gb_begin_epoch), so a captured CUDA
// graph replays correctly; every rank must keep the same grid for a given state.
//
// In place works: the thread that sends line (p, l) is the one that later writes received line
// (p, l) to the same address, so it reads the input before overwriting it.
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_nvl_ll(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
              ncclWindow_t llwin, size_t cap, uint32_t* epochs, ncclDevComm dc) {
  // Nothing sent, no epoch used (the same on every rank): a launch that takes an epoch but
  // exchanges nothing would let a rank start the launch after it in the other buffer without
  // waiting for its peers, and the one after that in this launch's buffer while a slow peer
  // may still read the launch before.
  if (bytes == 0) return;
  const uint32_t flag = gb_begin_epoch(epochs);
  const size_t buf = flag & 1;
  const int me = dc.lsaRank, n = dc.lsaSize;
  const size_t lines = bytes / 8;  // per peer
  const size_t total = size_t(n) * lines;
  if (lines * 16 > cap) __trap();  // the host refuses blocks over cap / 2 (16 staging bytes per 8)

  const uint2* src = (const uint2*)ncclGetLocalPointer(sendwin, sendoff);
  for (size_t g = gb_tid(); g < total; g += gb_nthreads()) {
    const int p = int(g / lines);
    const size_t l = g - size_t(p) * lines;
    const uint2 v = src[g];
    uint4* slot = (uint4*)ncclGetLsaPointer(llwin, (buf * n + me) * cap, p) + l;
    gb_st_relaxed_sys_v4(slot, make_uint4(v.x, flag, v.y, flag));
  }
  uint2* dst = (uint2*)ncclGetLocalPointer(recvwin, recvoff);
  for (size_t g = gb_tid(); g < total; g += gb_nthreads()) {
    const int p = int(g / lines);
    const size_t l = g - size_t(p) * lines;
    const uint4* slot = (const uint4*)ncclGetLocalPointer(llwin, (buf * n + p) * cap) + l;
    uint4 v;
    do {
      v = gb_ld_relaxed_sys_v4(slot);
    } while (v.y != flag || v.w != flag);
    dst[g] = make_uint2(v.x, v.z);
  }
  gb_end_epoch(epochs, flag);
}

// nvl-ll128 (-D 11): mid sizes without a barrier, in the spirit of NCCL's LL128. A warp stores 512
// bytes at once, 16 per lane: four 128-byte lines of 8 lanes each. The last lane of each line
// carries 8 data bytes and the launch's flag, the other seven 16 data bytes, so a line holds 120
// bytes of payload (94 % of the link) where nvl-ll's 16-byte lines hold 8. This relies on what
// NCCL's LL128 relies on: the 128-byte line one warp instruction stores is delivered to the peer's
// memory whole, so a reader that sees the flag in a line (read whole by one warp instruction)
// sees that line's data. The reader checks every line's flag and reloads until all are current.
//
// Staging, epochs, two buffers and in place work as in nvl-ll: the warp that sends item (p, c)
// is the one that receives item (p, c) from p and writes it where it read its input. Every warp
// sends all its items before it receives any, and a CTA may wait on data sent by another CTA of
// the peer, so the whole grid must be resident (the default grid is at most one CTA per SM).
namespace ll128 {
constexpr int PACK = GB_LL128_PACK;            // staging bytes one warp-wide store covers: 4 lines
constexpr int PACK_DATA = GB_LL128_PACK_DATA;  // payload in them: 4 x (7 x 16 + 8)
static_assert(PACK == 4 * 128 && PACK_DATA == 4 * (7 * 16 + 8), "a pack is 4 lines of 7 vectors, 8 bytes and a flag");
}  // namespace ll128

// On 2×H200, 2 or 8 packs per item, volatile instead of relaxed accesses, and polling one pack
// before loading all gave the same times within noise (results/h200x2/ll128/README.md).
template <int UNROLL>  // packs per work item
__device__ void nvl_ll128(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
                          ncclWindow_t llwin, size_t cap, uint32_t* epochs, ncclDevComm const& dc) {
  using namespace ll128;
  if (bytes == 0) return;  // the same on every rank: nothing sent, no epoch used
  const uint32_t flag = gb_begin_epoch(epochs);
  const size_t buf = flag & 1;
  const int me = dc.lsaRank, n = dc.lsaSize;

  // This lane's share of a pack's payload: 16 bytes at `pos`, or 8 for the flag lane of a line
  // (the four lines' 8-byte tails follow the 28 full vectors).
  const int lane = threadIdx.x & 31, line = lane >> 3;
  const bool flag_lane = (lane & 7) == 7;
  const uint32_t pos = flag_lane ? 28 * 16 + line * 8 : (line * 7 + (lane & 7)) * 16;
  const uint32_t len = flag_lane ? 8 : 16;

  constexpr size_t ITEM = UNROLL * PACK_DATA;
  const size_t items = (bytes + ITEM - 1) / ITEM;  // per peer
  // The host sizes `cap` from the same constants and refuses larger blocks; staging past it would
  // land in the next source's slot.
  if (items * UNROLL * PACK > cap) __trap();
  const size_t work = size_t(n) * items;            // (peer, item) pairs, this rank's own block included
  const size_t warp = gb_tid() >> 5, nwarps = gb_nthreads() >> 5;
  const char* src = (const char*)ncclGetLocalPointer(sendwin, sendoff);
  char* dst = (char*)ncclGetLocalPointer(recvwin, recvoff);
  // Work w: peer p (consecutive warps on different peers, starting with the next rank, this rank
  // last), at payload offset `at` of the block.
  auto peer_of = [&](size_t w) { return (me + 1 + int(w % n)) % n; };
  auto offset_of = [&](size_t w) { return w / n * ITEM; };

  for (size_t w = warp; w < work; w += nwarps) {
    const int p = peer_of(w);
    const size_t at = offset_of(w);
    const char* s = src + p * bytes + at;
    if (p == me) {  // own block: copied directly (in place it is already there)
      if (src == dst) continue;
      const size_t vecs = (min(bytes - at, ITEM) + 15) / 16;
      uint4 v[(ITEM / 16 + 31) / 32];
#pragma unroll
      for (int u = 0; u < (ITEM / 16 + 31) / 32; u++)
        if (u * 32 + lane < vecs) v[u] = ((const uint4*)s)[u * 32 + lane];
#pragma unroll
      for (int u = 0; u < (ITEM / 16 + 31) / 32; u++)
        if (u * 32 + lane < vecs) ((uint4*)(dst + p * bytes + at))[u * 32 + lane] = v[u];
      continue;
    }
    uint4* stage = (uint4*)((char*)ncclGetLsaPointer(llwin, (buf * n + me) * cap, p) + at / PACK_DATA * PACK);
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const size_t o = u * PACK_DATA + pos;
      v[u] = make_uint4(0, 0, 0, 0);
      if (at + o + len <= bytes) {
        if (flag_lane) {
          const uint2 h = *(const uint2*)(s + o);
          v[u].x = h.x;
          v[u].y = h.y;
        } else {
          v[u] = *(const uint4*)(s + o);
        }
      }
      if (flag_lane) v[u].z = v[u].w = flag;
    }
    // Reconverged, the warp issues each pack's 32 stores as one 512-byte instruction, so a line
    // and its flag become visible together (the assumption NCCL's LL128 makes too).
    __syncwarp();
#pragma unroll
    for (int u = 0; u < UNROLL; u++) gb_st_relaxed_sys_v4(stage + u * 32 + lane, v[u]);
  }

  for (size_t w = warp; w < work; w += nwarps) {
    const int p = peer_of(w);
    if (p == me) continue;
    const size_t at = offset_of(w);
    const uint4* stage =
        (const uint4*)((const char*)ncclGetLocalPointer(llwin, (buf * n + p) * cap) + at / PACK_DATA * PACK);
    uint4 v[UNROLL];
    bool ready;
    do {
      ready = true;
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        v[u] = gb_ld_relaxed_sys_v4(stage + u * 32 + lane);
        ready &= !flag_lane || (v[u].z == flag && v[u].w == flag);
      }
    } while (!__all_sync(0xffffffffu, ready));
    char* d = dst + p * bytes + at;
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const size_t o = u * PACK_DATA + pos;
      if (at + o + len > bytes) continue;
      if (flag_lane) {
        *(uint2*)(d + o) = make_uint2(v[u].x, v[u].y);
      } else {
        *(uint4*)(d + o) = v[u];
      }
    }
  }
  gb_end_epoch(epochs, flag);
}

extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_nvl_ll128(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
                 ncclWindow_t llwin, size_t cap, uint32_t* epochs, ncclDevComm dc) {
  nvl_ll128<GB_LL128_UNROLL>(sendwin, sendoff, recvwin, recvoff, bytes, llwin, cap, epochs, dc);
}
