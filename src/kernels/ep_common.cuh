// Shared by the expert-parallel kernels (ep.cu: host and NVLink impls; ep_gin.cu: GIN and hybrid):
// the launch arguments, token values, flag words, and the warp-level copy, send and reduce.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "device_compat.cuh"
#include "splitmix.cuh"

// Mirrors src/ep/device.rs `Args`.
struct EpArgs {
  int tokens;      // tokens of this rank in this launch
  int max_tokens;  // capacity per source rank (LL slots, HT rows and combine slots)
  int hidden;
  int topk;
  int experts;
  int local;  // experts per rank
  int ranks;
  int rank;
  int row;  // bytes of one dispatched row: BF16 2H, FP8 H + 4H/128 padded to a multiple of 16
  int fp8;
};
static_assert(sizeof(EpArgs) == 40, "EpArgs layout changed: update src/ep/device.rs Args");

// Receive descriptor: source rank, token, top-k slot (src/ep/reference.rs `desc`).
constexpr int EP_DESC_SRC_SHIFT = GB_EP_DESC_TOKEN_BITS + GB_EP_DESC_SLOT_BITS;
__device__ __forceinline__ uint32_t gb_ep_desc(int s, int t, int k) {
  return (uint32_t(s) << EP_DESC_SRC_SHIFT) | (uint32_t(t) << GB_EP_DESC_SLOT_BITS) | uint32_t(k);
}
__device__ __forceinline__ int gb_ep_desc_src(uint32_t desc) { return int(desc >> EP_DESC_SRC_SHIFT); }
__device__ __forceinline__ int gb_ep_desc_token(uint32_t desc) {
  return int((desc >> GB_EP_DESC_SLOT_BITS) & ((1u << GB_EP_DESC_TOKEN_BITS) - 1));
}
__device__ __forceinline__ int gb_ep_desc_slot(uint32_t desc) { return int(desc & ((1u << GB_EP_DESC_SLOT_BITS) - 1)); }

// Token values: a hash of (seed, source rank, token, channel) onto 251 levels, exact in BF16 (7
// significant bits), so any rank can check any row it receives, a stale row from another seed
// fails, and no two tokens or channels share their values by construction (a linear formula had
// given token t and t + 251 the same row).
__device__ __forceinline__ float gb_ep_value(uint32_t s, uint32_t t, uint32_t h, uint32_t seed) {
  const uint32_t v = uint32_t(gb_keyed64(seed, s, (uint64_t(t) << 32) | h) % 251u);
  return (float(v) - 125.f) * 0.03125f;
}

// The checks' expert: expert e multiplies channel h by a gain of 1/2, 1, 2 or 4 (a hash of e and
// h; powers of two, so a BF16 value stays exact). The gains differ between experts on about
// 3 channels in 4, so a combine that takes another selection's row, or drops one, is wrong there
// (an identity expert gave every selection of a token the same row).
__device__ __forceinline__ float gb_ep_gain(int e, int h) {
  return 0.5f * float(1u << (gb_splitmix64((uint64_t(uint32_t(e)) << 32) | uint32_t(h)) & 3u));
}

__device__ __forceinline__ uint64_t ld_acquire_sys_u64(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ int ld_acquire_sys_s32(const int* p) {
  int v;
  asm volatile("ld.acquire.sys.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys_u64(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Wait until the word carries `epoch` in its high half; returns the low half.
__device__ __forceinline__ uint32_t wait_tag(const uint64_t* p, uint32_t epoch) {
  uint64_t v;
  do {
    v = ld_acquire_sys_u64(p);
  } while (uint32_t(v >> 32) != epoch);
  return uint32_t(v);
}
__device__ __forceinline__ uint64_t tag(uint32_t epoch, uint32_t v) { return (uint64_t(epoch) << 32) | v; }

__device__ __forceinline__ int warp_id() { return int((blockIdx.x * blockDim.x + threadIdx.x) >> 5); }
__device__ __forceinline__ int warp_count() { return int((gridDim.x * blockDim.x) >> 5); }

// Whether this lane is the first of its warp to name rank d (d < 0: none): a token goes to a
// rank once however many of its selections are experts there. Every lane must call it (the match
// is warp-wide), before any condition that differs between lanes.
__device__ __forceinline__ bool first_lane_for(int d, int lane) {
  const unsigned same = __match_any_sync(~0u, d);
  return d >= 0 && __ffs(same) - 1 == lane;
}

// This warp's share of `items` work items as one contiguous span: items (token, segment) in a span
// mostly share their token, so a warp resolves a token's source rows (index loads, for LL a
// remote one) once for several segments, and the spans still differ by one item at most.
__device__ __forceinline__ int2 warp_span(int items) {
  const int per = (items + warp_count() - 1) / warp_count();
  const int i0 = min(items, warp_id() * per);
  return make_int2(i0, min(items, i0 + per));
}

// acc[0..8) += w x (8 BF16 values in u).
__device__ __forceinline__ void accumulate8(float* acc, uint4 u, float w) {
  const __nv_bfloat162* h = (const __nv_bfloat162*)&u;
#pragma unroll
  for (int q = 0; q < 4; q++) {
    const float2 f = __bfloat1622float2(h[q]);
    acc[2 * q] += w * f.x;
    acc[2 * q + 1] += w * f.y;
  }
}
__device__ __forceinline__ uint4 to_bf16x8(const float* acc) {
  uint4 o;
  __nv_bfloat162* q = (__nv_bfloat162*)&o;
#pragma unroll
  for (int j = 0; j < 4; j++) q[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
  return o;
}

// A warp copies `bytes` (multiple of 16), EP_UNROLL 16-byte loads in flight per lane. PEER: the
// source was written by peers during this kernel, and the warp has acquired the flag or count
// that published it (then __syncwarp); the loads skip L1 allocation, so no line cached before
// the peers wrote can be hit. Otherwise the source is read-only for the kernel (non-coherent
// path).
template <bool PEER>
__device__ __forceinline__ uint4 ld16(const uint4* p) {
  if (!PEER) return __ldg(p);
  uint4 v;
  asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
#define EP_UNROLL 8  // 16-byte loads in flight per lane
template <bool PEER>
__device__ __forceinline__ void warp_copy(void* dst, const void* src, int bytes, int lane) {
  const uint4* s = (const uint4*)src;
  uint4* d = (uint4*)dst;
  const int n = bytes / 16;
  int i = lane;
  for (; i + 32 * (EP_UNROLL - 1) < n; i += 32 * EP_UNROLL) {
    uint4 v[EP_UNROLL];
#pragma unroll
    for (int u = 0; u < EP_UNROLL; u++) v[u] = ld16<PEER>(s + i + 32 * u);
#pragma unroll
    for (int u = 0; u < EP_UNROLL; u++) d[i + 32 * u] = v[u];
  }
  for (; i < n; i += 32) d[i] = ld16<PEER>(s + i);
}

// Two rows at once (dst1 null: one): every batch loads both rows before storing either, so a warp
// keeps 2 x EP_UNROLL loads in flight where its row copies would otherwise form a chain.
template <bool PEER>
__device__ __forceinline__ void warp_copy2(void* dst0, const void* src0, void* dst1, const void* src1, int bytes,
                                           int lane) {
  if (!dst1) return warp_copy<PEER>(dst0, src0, bytes, lane);
  const uint4 *s0 = (const uint4*)src0, *s1 = (const uint4*)src1;
  uint4 *d0 = (uint4*)dst0, *d1 = (uint4*)dst1;
  const int n = bytes / 16;
  for (int base = 0; base < n; base += 32 * EP_UNROLL) {
    uint4 v0[EP_UNROLL], v1[EP_UNROLL];
#pragma unroll
    for (int u = 0; u < EP_UNROLL; u++) {
      const int i = base + 32 * u + lane;
      if (i < n) {
        v0[u] = ld16<PEER>(s0 + i);
        v1[u] = ld16<PEER>(s1 + i);
      }
    }
#pragma unroll
    for (int u = 0; u < EP_UNROLL; u++) {
      const int i = base + 32 * u + lane;
      if (i < n) {
        d0[i] = v0[u];
        d1[i] = v1[u];
      }
    }
  }
}

// A warp sends one local row (`bytes`, multiple of 16) to up to 32 destinations: lane j holds
// destination j (null: none). Each chunk (EP_UNROLL 16-byte loads per lane) is loaded once and
// stored to every destination, so the row is read once and stores to different peers overlap.
__device__ __forceinline__ void warp_send(uint8_t* my_dst, const void* src, int bytes, int lane) {
  const uint4* s = (const uint4*)src;
  const int n = bytes / 16;
  const unsigned have = __ballot_sync(~0u, my_dst != nullptr);
  if (!have) return;
  for (int base = 0; base < n; base += 32 * EP_UNROLL) {
    uint4 v[EP_UNROLL];
#pragma unroll
    for (int u = 0; u < EP_UNROLL; u++) {
      const int i = base + 32 * u + lane;
      if (i < n) v[u] = __ldg(s + i);
    }
    for (unsigned m = have; m; m &= m - 1) {
      uint4* d = (uint4*)__shfl_sync(~0u, (unsigned long long)my_dst, __ffs(m) - 1);
#pragma unroll
      for (int u = 0; u < EP_UNROLL; u++) {
        const int i = base + 32 * u + lane;
        if (i < n) d[i] = v[u];
      }
    }
  }
}

// FP8 quantization of one 128-channel group, lane i holding channels 4i..4i+3 (v0, v1): the
// group's e4m3 bytes for this lane, and the group's scale (dequantized = q x scale).
__device__ __forceinline__ uint32_t quantize_group(float2 v0, float2 v1, float& scale) {
  float amax = fmaxf(fmaxf(fabsf(v0.x), fabsf(v0.y)), fmaxf(fabsf(v1.x), fabsf(v1.y)));
#pragma unroll
  for (int o = 16; o; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(~0u, amax, o));
  scale = amax > 0.f ? amax / 448.f : 1.f;
  const float inv = 1.f / scale;
  const __nv_fp8x4_e4m3 f(make_float4(v0.x * inv, v0.y * inv, v1.x * inv, v1.y * inv));
  return *(const uint32_t*)&f;
}

// A warp quantizes channel groups [g0, g1) of one BF16 token into the FP8 row layout
// (`hidden` e4m3 bytes, then hidden / 128 f32 scales; gb_ep_quantize's) and stores them to up
// to 32 destinations (lane j holds destination j's row, null: none). EP_QROUND groups are loaded
// before any is stored; their scales go out as one store of the first lanes.
#define EP_QROUND 8
__device__ __forceinline__ void warp_send_fp8(uint8_t* my_dst, const __nv_bfloat16* src, int hidden, int g0, int g1,
                                              int lane) {
  const unsigned have = __ballot_sync(~0u, my_dst != nullptr);
  if (!have) return;
  for (int gb = g0; gb < g1; gb += EP_QROUND) {
    const int n = min(EP_QROUND, g1 - gb);
    uint2 v[EP_QROUND];
#pragma unroll
    for (int u = 0; u < EP_QROUND; u++)
      if (u < n) v[u] = __ldg((const uint2*)(src + size_t(gb + u) * GB_EP_FP8_GROUP) + lane);
    uint32_t q[EP_QROUND];
    float my_scale = 0.f;  // lane u: group gb + u's
#pragma unroll
    for (int u = 0; u < EP_QROUND; u++) {
      if (u < n) {
        const __nv_bfloat162* h = (const __nv_bfloat162*)&v[u];
        float sc;
        q[u] = quantize_group(__bfloat1622float2(h[0]), __bfloat1622float2(h[1]), sc);
        if (lane == u) my_scale = sc;
      }
    }
    for (unsigned m = have; m; m &= m - 1) {
      uint8_t* d = (uint8_t*)__shfl_sync(~0u, (unsigned long long)my_dst, __ffs(m) - 1);
#pragma unroll
      for (int u = 0; u < EP_QROUND; u++)
        if (u < n) ((uint32_t*)(d + size_t(gb + u) * GB_EP_FP8_GROUP))[lane] = q[u];
      if (lane < n) ((float*)(d + hidden))[gb + lane] = my_scale;
    }
  }
}

// HT metadata row of token t (`mb` bytes, a multiple of 16): descriptor, K local expert indices
// (-1: not at that rank), K weights (0 there), zero padding. Lane j holds where destination
// d0 + j takes it (null: none); the warp writes one destination's row at a time, as mb / 16
// 16-byte stores of its first lanes, instead of 2K + 1 scalar stores from one lane.
__device__ __forceinline__ void warp_ht_meta(uint8_t* my_meta, int d0, const EpArgs& a, const int* idx,
                                             const float* w, int t, int mb, int lane) {
  const int K = a.topk;
  const int e = lane < K ? idx[t * K + lane] : -1;
  const float wt = lane < K ? w[t * K + lane] : 0.f;
  // Word i = 4 x lane + q holds selection i - 1's index (1 <= i <= K) or selection i - 1 - K's
  // weight (K < i <= 2K).
  int ei[4], ew[4];
  float ww[4];
#pragma unroll
  for (int q = 0; q < 4; q++) {
    const int i = 4 * lane + q;
    ei[q] = __shfl_sync(~0u, e, (i - 1) & 31);
    ew[q] = __shfl_sync(~0u, e, (i - 1 - K) & 31);
    ww[q] = __shfl_sync(~0u, wt, (i - 1 - K) & 31);
  }
  for (unsigned m = __ballot_sync(~0u, my_meta != nullptr); m; m &= m - 1) {
    const int j = __ffs(m) - 1, d = d0 + j;
    uint4* meta = (uint4*)__shfl_sync(~0u, (unsigned long long)my_meta, j);
    uint32_t word[4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int i = 4 * lane + q;
      if (i == 0) word[q] = gb_ep_desc(a.rank, t, 0);
      else if (i <= K) word[q] = ei[q] >= 0 && ei[q] / a.local == d ? ei[q] % a.local : -1;
      else if (i <= 2 * K) word[q] = ew[q] >= 0 && ew[q] / a.local == d ? __float_as_uint(ww[q]) : 0u;
      else word[q] = 0;
    }
    if (lane < mb / 16) meta[lane] = make_uint4(word[0], word[1], word[2], word[3]);
  }
}

// Weighted sum of up to 32 BF16 rows into `out` (fp32 accumulation, BF16 result): lane j holds
// source row j (null: none) and its weight. The warp covers vectors [v0, v0 + 32 x RED) of the
// row, RED independent loads per lane and source, and issues the loads of up to BATCH sources
// before accumulating any (RED x BATCH loads in flight per lane), which hides the latency of rows
// read from peers over NVLink as well as of local ones: the reduction is latency-bound.
#define EP_RED 4
#define EP_BATCH 4
template <int RED, int BATCH>
__device__ __forceinline__ void warp_reduce(__nv_bfloat16* out, const __nv_bfloat16* my_src, float my_w, int vecs,
                                            int v0, int lane) {
  float acc[RED][8] = {};
  unsigned m = __ballot_sync(~0u, my_src != nullptr);
  while (m) {
    uint4 u[BATCH][RED];
    float wb[BATCH];
    int nb = 0;
#pragma unroll
    for (int b = 0; b < BATCH; b++) {
      if (!m) break;
      const int j = __ffs(m) - 1;
      m &= m - 1;
      const uint4* p = (const uint4*)__shfl_sync(~0u, (unsigned long long)my_src, j);
      wb[b] = __shfl_sync(~0u, my_w, j);
#pragma unroll
      for (int r = 0; r < RED; r++) {
        const int v = v0 + r * 32 + lane;
        if (v < vecs) u[b][r] = p[v];
      }
      nb = b + 1;
    }
#pragma unroll
    for (int b = 0; b < BATCH; b++)
      if (b < nb)
#pragma unroll
        for (int r = 0; r < RED; r++)
          if (v0 + r * 32 + lane < vecs) accumulate8(acc[r], u[b][r], wb[b]);
  }
#pragma unroll
  for (int r = 0; r < RED; r++) {
    const int v = v0 + r * 32 + lane;
    if (v < vecs) ((uint4*)out)[v] = to_bf16x8(acc[r]);
  }
}
// Segments of 32 x RED vectors per row.
template <int RED>
__device__ __forceinline__ int red_segments(int hidden) {
  return (hidden / 8 + 32 * RED - 1) / (32 * RED);
}

// A lane's source row for one token (null: none) and its weight.
struct TokenSource {
  const __nv_bfloat16* row;
  float w;
};
// Whether the first token's sources may be resolved before the opening, overlapping its wait:
// only where they read nothing a peer publishes by what the opening waits for.
enum class FirstSources { BeforeOpening, AfterOpening };

template <int RED, int BATCH, FirstSources FIRST, class Sources, class Opening>
__device__ void reduce_span(__nv_bfloat16* out, int tokens, int hidden, Sources sources, Opening opening, int lane) {
  const int segs = red_segments<RED>(hidden);
  const int2 span = warp_span(tokens * segs);
  TokenSource s{nullptr, 0.f};
  int t = span.x < span.y ? span.x / segs : -1;
  if (FIRST == FirstSources::BeforeOpening && t >= 0) s = sources(t);
  opening();
  if (FIRST == FirstSources::AfterOpening && t >= 0) s = sources(t);
  for (int item = span.x; item < span.y; item++) {
    if (item / segs != t) {  // a new token: its sources (index loads, for LL a remote one) once
      t = item / segs;
      s = sources(t);
    }
    warp_reduce<RED, BATCH>(out + size_t(t) * hidden, s.row, s.w, hidden / 8, (item % segs) * 32 * RED, lane);
  }
}
// Every combine's reduction: out[t] = sum over lanes of w x row, for every token, sources(t)
// giving the lane's TokenSource. Work items (token, segment) form one contiguous span per warp,
// so a warp resolves a token's sources once for several segments. The first token's are resolved
// before opening() (every thread calls it once: what must precede the reads, e.g. waiting for
// the peers' ready flags), so their loads overlap that wait, unless FIRST says they read what
// the opening waits for. When a 32-vector item for every warp covers all tokens, segments are 32
// vectors with up to 8 sources at once: more warps share each token, and each waits for one round
// of loads instead of one per batch of sources. With more tokens, segments are 32 x EP_RED
// vectors with EP_BATCH sources at once.
template <FirstSources FIRST = FirstSources::BeforeOpening, class Sources, class Opening>
__device__ void reduce_tokens(__nv_bfloat16* out, int tokens, int hidden, Sources sources, Opening opening,
                              int lane) {
  if (tokens * red_segments<1>(hidden) <= warp_count())
    reduce_span<1, 8, FIRST>(out, tokens, hidden, sources, opening, lane);
  else
    reduce_span<EP_RED, EP_BATCH, FIRST>(out, tokens, hidden, sources, opening, lane);
}

// Per-launch state of a kernel that signals peers: state[0] counts CTA arrivals over all
// launches, state[1 + b] is CTA b's launch epoch (kept on the device, so CUDA graphs replay).
__device__ __forceinline__ uint32_t begin_epoch(uint32_t* state) { return gb_begin_epoch(state + 1); }
__device__ __forceinline__ void end_epoch(uint32_t* state, uint32_t epoch) { gb_end_epoch(state + 1, epoch); }
// Every CTA calls this once its stores to peers are issued. True in exactly one CTA, the last to
// arrive; by then every CTA's earlier stores are visible system-wide, so a release store that
// follows publishes all of them. state[0] counts arrivals over every launch, so every launch on
// one state must use the same grid (the EP impls fix their CTAs when they are made).
__device__ bool last_cta(uint32_t* state, uint32_t epoch) {
  __shared__ int s_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    s_last = atomicAdd(&state[0], 1u) == epoch * gridDim.x - 1;
    if (s_last) __threadfence_system();
  }
  __syncthreads();
  return s_last;
}

// Flags at `flags_off` in the control window: [2][R] u64, one per source rank per parity. Ranks
// [lo, hi) are reached by NVLink (LSA index = rank - lsa_base): the whole world for the nvl impl,
// the node for hybrid, none for gin.
struct FlagPeers {
  int lo, hi, lsa_base;
};
__device__ __forceinline__ size_t flag_off(const EpArgs& a, size_t flags_off, uint32_t epoch, int src) {
  return flags_off + (size_t(epoch & 1) * a.ranks + src) * 8;
}
// One CTA tells every rank of `p` that this rank's stores of launch `epoch` are visible.
__device__ __forceinline__ void flag_peers(const EpArgs& a, ncclWindow_t ctrl, size_t flags_off, uint32_t epoch,
                                           FlagPeers p) {
  for (int d = p.lo + threadIdx.x; d < p.hi; d += blockDim.x)
    st_release_sys_u64((uint64_t*)ncclGetLsaPointer(ctrl, flag_off(a, flags_off, epoch, a.rank), d - p.lsa_base),
                       tag(epoch, 1));
}
// Until every rank of `p` flagged launch `epoch`: what they stored is then visible to this CTA.
__device__ __forceinline__ void wait_peers(const EpArgs& a, ncclWindow_t ctrl, size_t flags_off, uint32_t epoch,
                                           FlagPeers p) {
  for (int src = p.lo + threadIdx.x; src < p.hi; src += blockDim.x)
    wait_tag((const uint64_t*)ncclGetLocalPointer(ctrl, flag_off(a, flags_off, epoch, src)), epoch);
}
// Called by every CTA once its stores to peers are issued: the last CTA flags every rank of `p`;
// then every CTA (every_cta) or the last one alone waits for their flags. Returns whether this
// CTA was the last.
__device__ bool flag_all_then_wait(const EpArgs& a, ncclWindow_t ctrl, size_t flags_off, uint32_t* state,
                                   uint32_t epoch, bool every_cta, FlagPeers p) {
  const bool last = last_cta(state, epoch);
  if (last) flag_peers(a, ctrl, flags_off, epoch, p);
  if (last || every_cta) wait_peers(a, ctrl, flags_off, epoch, p);
  __syncthreads();
  return last;
}

// A received LL row: where its descriptor and its data are in the staging window.
struct LlRow {
  const uint32_t* desc;
  const uint8_t* row;
};

// 4 bytes a peer wrote during this kernel, after the warp acquired what published them (as ld16).
__device__ __forceinline__ uint32_t ld4_peer(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// LL: pack one local expert's received rows into out [L][R*maxT][row] in source order. Lane j < R
// holds n, the rows source j sent the expert, already acquired; `slot(j, i)` is the LlRow of
// source j's i-th row for the expert; `range(j, r)` records r = (first packed row, rows) of source
// j's segment (group 0 calls it, lane j). The warp is group g of `groups` working on the expert
// and copies every group-th row, two at a time.
template <class Slot, class Range>
__device__ void ll_pack_expert(const EpArgs& a, int le, int g, int groups, int n, Slot slot, uint8_t* out,
                               uint32_t* src_info, int* recv_count, Range range, int lane) {
  const int R = a.ranks;
  const size_t cap = size_t(R) * a.max_tokens;
  __syncwarp();  // every lane's later loads follow the lanes' acquires
  int incl = n;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(~0u, incl, o);
    if (lane >= o) incl += u;
  }
  const int total = __shfl_sync(~0u, incl, 31), begin = incl - n;
  if (g == 0 && lane < R) range(lane, make_int2(begin, n));
  if (g == 0 && lane == 0) recv_count[le] = total;
  auto slot_of = [&](int i) {  // the slot of the expert's row i
    int src = 0;  // the source whose segment holds row i: last lane with begin <= i
    for (int j = 1; j < R; j++) src += __shfl_sync(~0u, begin, j) <= i;
    return slot(src, i - __shfl_sync(~0u, begin, src));
  };
  // Fewer rows than groups (a few tokens): rows split in parts over the idle groups. One warp
  // copying a whole row waits for one round of loads after another.
  const int vecs = a.row / 16, round = 32 * EP_UNROLL;
  const int parts = total > 0 && total < groups ? min(groups / total, (vecs + round - 1) / round) : 1;
  if (parts > 1) {
    const int part_vecs = ((vecs + parts - 1) / parts + 31) / 32 * 32;
    for (int item = g; item < total * parts; item += groups) {
      const int i = item / parts, v0 = item % parts * part_vecs, nv = min(vecs, v0 + part_vecs) - v0;
      const LlRow s = slot_of(i);
      const uint32_t desc = v0 == 0 && lane == 0 ? ld4_peer(s.desc) : 0;
      if (nv > 0) warp_copy<true>(out + (le * cap + i) * a.row + v0 * 16, s.row + v0 * 16, nv * 16, lane);
      if (v0 == 0 && lane == 0) src_info[le * cap + i] = desc;
    }
    return;
  }
  for (int i = g; i < total; i += 2 * groups) {
    const int i1 = i + groups;
    const LlRow s0 = slot_of(i);
    const LlRow s1 = i1 < total ? slot_of(i1) : LlRow{nullptr, nullptr};
    // Lanes 0 and 1 load the descriptors with the rows and store them after, so their latency
    // hides behind the copy.
    const uint32_t* hdr = lane == 0 ? s0.desc : lane == 1 ? s1.desc : nullptr;
    const uint32_t desc = hdr ? ld4_peer(hdr) : 0;
    warp_copy2<true>(out + (le * cap + i) * a.row, s0.row, s1.row ? out + (le * cap + i1) * a.row : nullptr, s1.row,
                     a.row, lane);
    if (hdr) src_info[le * cap + (lane == 0 ? i : i1)] = desc;
  }
}

// HT notify's last step, from the count matrix m [R][R + L] (row s: source s's tokens per rank,
// then its selections per expert of this rank): this rank's first row in every destination
// (offs[d]), its received rows (offs[R]), the first received row per source (offs[R + 1 + s],
// offs[2R + 1] = all; rows arrive in source order) and rows per local expert.
__device__ void ht_offsets(const EpArgs& a, const int* m, int* offs, int* recv_per_expert) {
  const int R = a.ranks, L = a.local, W = R + L;
  for (int d = threadIdx.x; d < R; d += blockDim.x) {
    int o = 0;
    for (int s = 0; s < a.rank; s++) o += m[s * W + d];
    offs[d] = o;
  }
  for (int j = threadIdx.x; j < L; j += blockDim.x) {
    int n = 0;
    for (int s = 0; s < R; s++) n += m[s * W + R + j];
    recv_per_expert[j] = n;
  }
  if (threadIdx.x == 0) {
    int n = 0;
    for (int s = 0; s < R; s++) {
      offs[R + 1 + s] = n;
      n += m[s * W + a.rank];
    }
    offs[R] = offs[2 * R + 1] = n;
  }
}
