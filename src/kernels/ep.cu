// Expert-parallel dispatch and combine (ep_perf).
//
//  - common: token values, FP8 quantization, deterministic layout (counts and positions), checks
//  - host impl: permute / unpermute around NCCL send/recv
//  - nvl impl, LL: per-(expert, source) slots in a double-buffered symmetric staging window,
//    epoch-tagged counts, packed per local expert; combine returns rows to (k, token) slots
//  - nvl impl, HT: count exchange (notify), then each token once per destination rank, written
//    straight to its final row there; combine returns one pre-weighted row per (token, rank)
//
// Device kernels that wait on peers need every CTA resident: the host launches at most one CTA
// per SM (with enough dynamic shared memory that no two fit on one SM) and no more CTAs than SMs.
#include "ep_common.cuh"

// ---------------------------------------------------------------------------------------------
// Common

extern "C" __global__ void gb_ep_fill(__nv_bfloat16* x, EpArgs a, uint32_t seed) {
  const size_t n = size_t(a.tokens) * a.hidden;
  for (size_t i = gb_tid(); i < n; i += gb_nthreads())
    x[i] = __float2bfloat16(gb_ep_value(a.rank, uint32_t(i / a.hidden), uint32_t(i % a.hidden), seed));
}

// BF16 [T][H] -> rows of H e4m3 bytes then H/128 f32 scales (dequantized = q * scale). A warp
// per (token, group of 128 channels), 4 channels per lane.
extern "C" __global__ void __launch_bounds__(GB_THREADS) gb_ep_quantize(const __nv_bfloat16* x, uint8_t* q, EpArgs a) {
  const int groups = a.hidden / GB_EP_FP8_GROUP, lane = threadIdx.x & 31;
  for (int w = warp_id(); w < a.tokens * groups; w += warp_count()) {
    const int t = w / groups, g = w % groups, h = g * GB_EP_FP8_GROUP + lane * 4;
    const __nv_bfloat162* src = (const __nv_bfloat162*)(x + size_t(t) * a.hidden + h);
    float scale;
    uint8_t* row = q + size_t(t) * a.row;
    *(uint32_t*)(row + h) = quantize_group(__bfloat1622float2(src[0]), __bfloat1622float2(src[1]), scale);
    if (lane == 0) ((float*)(row + a.hidden))[g] = scale;
  }
}

// Deterministic layout, pass 1: a warp per chunk of GB_EP_CHUNK (= 32) tokens, lane i holding the
// chunk's token i. Per chunk: counts per key (E experts, then R ranks); each selection's rank
// among the chunk's selections of its expert; each token's rank among the chunk's tokens bound
// for rank d (-1: not bound there). A token's top-k experts are distinct, so a selection's rank
// is the number of earlier tokens that chose the same expert: the warp ORs each token's bit into
// a per-expert mask (shared memory, E words per warp) and counts with popc. Chunks are
// independent, so all of them run at once instead of one after another per CTA.
static_assert(GB_EP_CHUNK == 32, "the layout kernel maps a chunk's tokens to a warp's lanes");
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_ep_layout_chunks(const int* idx, EpArgs a, int* chunk_cnt, int* sel_local, int* tok_local) {
  extern __shared__ unsigned tok_mask[];  // [warps in the CTA][E]: tokens of the chunk per expert
  const int K = a.topk, R = a.ranks, E = a.experts, keys = E + R, lane = threadIdx.x & 31;
  unsigned* mask = tok_mask + size_t(threadIdx.x >> 5) * E;
  for (int e = lane; e < E; e += 32) mask[e] = 0;
  const unsigned before = (1u << lane) - 1;
  const int chunks = (a.tokens + GB_EP_CHUNK - 1) / GB_EP_CHUNK;
  for (int c = warp_id(); c < chunks; c += warp_count()) {
    const int t = c * GB_EP_CHUNK + lane;
    const bool valid = t < a.tokens;
    // Ranks this token goes to. The per-rank keys hold only ranks below 64: the HT kernels, which
    // read them, refuse more ranks; `host` (any rank count) reads only the expert keys.
    unsigned long long ranks = 0;
    __syncwarp();
    for (int k = 0; k < K; k++) {
      const int e = valid ? idx[size_t(t) * K + k] : -1;
      if (e >= 0) {
        atomicOr(&mask[e], 1u << lane);
        if (e / a.local < 64) ranks |= 1ull << (e / a.local);
      }
    }
    __syncwarp();
    for (int k = 0; k < K; k++) {
      const int e = valid ? idx[size_t(t) * K + k] : -1;
      if (valid) sel_local[size_t(t) * K + k] = e >= 0 ? __popc(mask[e] & before) : -1;
    }
    __syncwarp();
    int* cnt = chunk_cnt + size_t(c) * keys;
    for (int e = lane; e < E; e += 32) {
      cnt[e] = __popc(mask[e]);
      mask[e] = 0;
    }
    for (int d = 0; d < R; d++) {
      const bool here = d < 64 && (ranks >> d & 1);
      const unsigned b = __ballot_sync(~0u, here);
      if (valid) tok_local[size_t(t) * R + d] = here ? __popc(b & before) : -1;
      if (lane == 0) cnt[E + d] = __popc(b);
    }
  }
}

// Pass 2: a warp per key gives each chunk its base (lane i sums a contiguous run of chunks, the
// warp scans the 32 sums, lane i writes its run's bases) and the key's total; the last CTA to
// finish (ticket) takes each expert's first row in expert order (expert_off[E] = all selections).
// The loads of a run are independent, so a key costs two rounds of loads, not one per 32 chunks.
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_ep_layout_scan(const int* chunk_cnt, EpArgs a, int* chunk_base, int* totals, int* expert_off,
                      unsigned* ticket) {
  const int keys = a.experts + a.ranks, chunks = (a.tokens + GB_EP_CHUNK - 1) / GB_EP_CHUNK;
  const int lane = threadIdx.x & 31, per = (chunks + 31) / 32;
  const int c0 = min(chunks, lane * per), c1 = min(chunks, c0 + per);
  for (int key = warp_id(); key < keys; key += warp_count()) {
    int sum = 0;
#pragma unroll 4
    for (int c = c0; c < c1; c++) sum += chunk_cnt[size_t(c) * keys + key];
    int incl = sum;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int u = __shfl_up_sync(~0u, incl, o);
      if (lane >= o) incl += u;
    }
    int run = incl - sum;
#pragma unroll 4
    for (int c = c0; c < c1; c++) {
      chunk_base[size_t(c) * keys + key] = run;
      run += chunk_cnt[size_t(c) * keys + key];
    }
    if (lane == 31) totals[key] = incl;
  }

  // The last CTA: exclusive prefix of the expert totals, blockDim.x at a time (per-warp scans,
  // then warp sums). It resets the ticket for the next launch.
  __shared__ bool s_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    s_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  __shared__ int warp_sum[GB_THREADS / 32];
  __shared__ int carry;
  if (threadIdx.x == 0) carry = 0;
  for (int e0 = 0; e0 < a.experts; e0 += blockDim.x) {
    const int e = e0 + threadIdx.x;
    const int v = e < a.experts ? ((volatile int*)totals)[e] : 0;
    int incl = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int u = __shfl_up_sync(~0u, incl, o);
      if (lane >= o) incl += u;
    }
    __syncthreads();
    if (lane == 31) warp_sum[threadIdx.x >> 5] = incl;
    __syncthreads();
    int before = carry;
    for (int w = 0; w < int(threadIdx.x >> 5); w++) before += warp_sum[w];
    if (e < a.experts) expert_off[e] = before + incl - v;
    __syncthreads();
    if (threadIdx.x == blockDim.x - 1) carry = before + incl;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    expert_off[a.experts] = carry;
    *ticket = 0;
  }
}

// Row of selection (t, k) of expert e in expert order.
__device__ __forceinline__ size_t expert_row(const EpArgs& a, int t, int k, int e, const int* sel_local,
                                             const int* chunk_base, const int* expert_off) {
  const int keys = a.experts + a.ranks;
  return size_t(expert_off[e]) + chunk_base[size_t(t / GB_EP_CHUNK) * keys + e] + sel_local[size_t(t) * a.topk + k];
}

// Rows of the receive layouts: `groups` groups of `group_rows` rows, group g holding counts[g]
// valid rows (count0 when counts is null).
struct RowSet {
  int groups;
  const int* counts;
  int count0;
  size_t group_rows;
};
static_assert(sizeof(RowSet) == 32, "RowSet layout changed: update src/ep/device.rs RowSet");
__device__ __forceinline__ bool row_valid(const RowSet& rs, size_t r) {
  const int g = int(r / rs.group_rows);
  return int(r % rs.group_rows) < (rs.counts ? rs.counts[g] : rs.count0);
}

// One selection a received row carries into the checks' expert (src/ep/device.rs `ExpertSel`).
struct ExpertSel {
  int expert;  // global id; -1: none
  float weight;
};
static_assert(sizeof(ExpertSel) == 8, "ExpertSel layout changed: update src/ep/device.rs ExpertSel");

// Combine input, the checks' expert: row r = value(token of desc[r]) x (sum over the row's
// selections of weight x gain(expert, channel)). `per_row` selections per row at `sel` (host: the
// row's one expert; HT: the token's top-k, -1 where the expert is elsewhere, pre-weighted as the
// HT combine expects); per_row 0: the row's group is its local expert, weight 1 (LL). `shift`
// moves every expert id (a negative control: the combine then sees other experts' rows).
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_ep_expert(__nv_bfloat16* y, EpArgs a, const uint32_t* desc, RowSet rs, const ExpertSel* sel, int per_row,
                 int shift, uint32_t seed) {
  const int lane = threadIdx.x & 31;
  for (size_t r = warp_id(); r < size_t(rs.groups) * rs.group_rows; r += warp_count()) {
    if (!row_valid(rs, r)) continue;
    const uint32_t d = desc[r];
    const ExpertSel ll{a.rank * a.local + int(r / rs.group_rows), 1.f};
    const ExpertSel* s = per_row ? sel + r * per_row : &ll;
    const int n = per_row ? per_row : 1;
    for (int h = lane; h < a.hidden; h += 32) {
      float m = 0.f;
      for (int i = 0; i < n; i++)
        if (s[i].expert >= 0) m += s[i].weight * gb_ep_gain(s[i].expert + shift, h);
      y[r * a.hidden + h] = __float2bfloat16(gb_ep_value(gb_ep_desc_src(d), gb_ep_desc_token(d), h, seed) * m);
    }
  }
}

// Check received rows against the values of the token their descriptor names: BF16 bit-exact;
// FP8 bit-exact against quantize_group (every sender quantizes with it), bytes and group scales,
// and within e4m3 rounding of the value (2^-4 relative, plus the subnormal step), which checks
// quantize_group itself. (Most groups reach the values' largest magnitude, so most share their
// scale with others: a tolerance alone passed another group's scale, or a scale left stale.)
extern "C" __global__ void __launch_bounds__(GB_THREADS) gb_ep_verify_rows(const uint8_t* rows, EpArgs a,
                                                                            const uint32_t* desc, RowSet rs,
                                                                            uint32_t seed,
                                                                            unsigned long long* wrong) {
  const int lane = threadIdx.x & 31;
  unsigned long long bad = 0;
  for (size_t r = warp_id(); r < size_t(rs.groups) * rs.group_rows; r += warp_count()) {
    if (!row_valid(rs, r)) continue;
    const uint32_t d = desc[r], src = gb_ep_desc_src(d), t = gb_ep_desc_token(d);
    const uint8_t* row = rows + r * a.row;
    if (!a.fp8) {
      for (int h = lane; h < a.hidden; h += 32) {
        const __nv_bfloat16 want = __float2bfloat16(gb_ep_value(src, t, h, seed));
        bad += ((const uint16_t*)row)[h] != *(const uint16_t*)&want;
      }
      continue;
    }
    // Lane i: channels 4i..4i+3 of each group, as quantize_group takes them.
    for (int g = 0; g < a.hidden / GB_EP_FP8_GROUP; g++) {
      const int h = g * GB_EP_FP8_GROUP + lane * 4;
      float v[4];
      for (int i = 0; i < 4; i++) v[i] = gb_ep_value(src, t, h + i, seed);
      float want_scale;
      const uint32_t want = quantize_group(make_float2(v[0], v[1]), make_float2(v[2], v[3]), want_scale);
      const uint32_t got = *(const uint32_t*)(row + h);
      const float scale = ((const float*)(row + a.hidden))[g];
      const bool scale_ok = __float_as_uint(scale) == __float_as_uint(want_scale);
      for (int i = 0; i < 4; i++) {
        __nv_fp8_e4m3 q;
        q.__x = uint8_t(got >> (8 * i));
        const bool near = fabsf(float(q) * scale - v[i]) <= fabsf(v[i]) * 0.0625f + scale * 0.002f;
        bad += !(scale_ok && q.__x == uint8_t(want >> (8 * i)) && near);
      }
    }
  }
  if (bad) atomicAdd(wrong, bad);
}

// Check combined tokens: value x (sum over valid selections of weight x gain), to BF16 precision:
// 2^-7 relative. Two roundings to BF16 meet there, the expert's of a pre-weighted HT row and the
// combine's own, each under u / (1 + u) with u = 2^-8, so together under 2^-7; every term has the
// value's sign, so summing rows adds no more. Weights are at least half the largest
// (src/ep/routing.rs) and gains differ between experts, so a selection dropped or taken twice
// moves many channels of its token past the tolerance (not every channel: against seven
// selections at gain 4, one at gain 1/2 is under 1 % of the sum).
//
// Rows from `guard` to `cap` (the buffer's rows) must still hold the poison written before the
// combines (every bit set: a BF16 NaN no reduction produces), so a combine that writes a token
// past `a.tokens` is counted too.
#define EP_POISON ((GB_EP_POISON_BYTE << 8) | GB_EP_POISON_BYTE)  // both bytes of a BF16 (Buf::poison)
extern "C" __global__ void gb_ep_verify_combine(const __nv_bfloat16* out, EpArgs a, const int* idx, const float* w,
                                                uint32_t seed, int guard, int cap, unsigned long long* wrong) {
  unsigned long long bad = 0;
  const uint16_t* bits = reinterpret_cast<const uint16_t*>(out);
  for (size_t i = gb_tid() + size_t(guard) * a.hidden; i < size_t(cap) * a.hidden; i += gb_nthreads())
    bad += bits[i] != EP_POISON;
  const size_t n = size_t(a.tokens) * a.hidden;
  for (size_t i = gb_tid(); i < n; i += gb_nthreads()) {
    const int t = int(i / a.hidden), h = int(i % a.hidden);
    float m = 0.f;
    for (int k = 0; k < a.topk; k++) {
      const int e = idx[t * a.topk + k];
      if (e >= 0) m += w[t * a.topk + k] * gb_ep_gain(e, h);
    }
    const float ref = gb_ep_value(a.rank, t, h, seed) * m, got = __bfloat162float(out[i]);
    bad += !(fabsf(got - ref) <= fabsf(ref) * 0.0078125f + 1e-6f);
  }
  if (bad) atomicAdd(wrong, bad);
}

// ---------------------------------------------------------------------------------------------
// host impl: NCCL moves the rows; these kernels order them by expert and reduce them back.

// A warp per selection: the token's row to its place in expert order.
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_ep_permute(EpArgs a, const int* idx, const uint8_t* x, const int* sel_local, const int* chunk_base,
                  const int* expert_off, uint8_t* out) {
  const int lane = threadIdx.x & 31;
  for (int s = warp_id(); s < a.tokens * a.topk; s += warp_count()) {
    const int e = idx[s];
    if (e < 0) continue;
    const int t = s / a.topk, k = s % a.topk;
    const size_t r = expert_row(a, t, k, e, sel_local, chunk_base, expert_off);
    warp_copy<false>(out + r * a.row, x + size_t(t) * a.row, a.row, lane);
  }
}

// Weighted sum of each token's expert outputs (reduce_tokens).
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_ep_unpermute(EpArgs a, const int* idx, const float* w, const int* sel_local, const int* chunk_base,
                    const int* expert_off, const __nv_bfloat16* y, __nv_bfloat16* out) {
  const int lane = threadIdx.x & 31;
  reduce_tokens(
      out, a.tokens, a.hidden,
      [&](int t) {
        const int e = lane < a.topk ? idx[t * a.topk + lane] : -1;
        if (e < 0) return TokenSource{nullptr, 0.f};
        return TokenSource{y + expert_row(a, t, lane, e, sel_local, chunk_base, expert_off) * a.hidden,
                           w[t * a.topk + lane]};
      },
      [] {}, lane);
}

// ---------------------------------------------------------------------------------------------
// nvl impl, low latency. Symmetric windows on every rank:
//   stage:  rows [2][R][maxT][row] (source s's token t at [s][t]), then descriptors
//           [2][L][R][maxT] u32 (the (expert, source) segments: which token, which top-k slot)
//   ctrl:   counts [2][L][R] u64, combine "y ready" flags [2][R] u64, ranges [E] int2: for each
//           expert (every rank's), the first packed row and rows of this rank's segment there,
//           written by the expert's rank in its pack, read locally by this rank's combine
//   y:      [L][R*maxT][H] BF16 expert output in the packed layout (the combine reads it in place)
// Launch e uses buffer e % 2. Two suffice: a rank starts launch e + 2 only after it received
// launch e + 1 from every peer, which each peer sends only after it finished launch e.

// Dispatch: a token's row goes once to each rank holding any of its experts (NVLink carries
// rows per rank, not per selection: 8 selections over 4 ranks reach 3.6 ranks on average), in
// `parts` pieces sent by different warps so that few tokens still keep many warps busy. The warp
// of part 0 claims each selection's slot in its expert's segment (atomic, so arrival order within
// one (expert, source) segment is not deterministic) and writes the descriptor there; the last
// CTA publishes the per-expert counts; then CTAs pack each local expert's segments in source order
// into out [L][R*maxT][row] with descriptors, counts and (begin, count) ranges. x holds the BF16
// tokens; with FP8 the send quantizes them on the way, as DeepEP's LL dispatch does, which saves
// a launch and a pass over the tokens.
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_ep_ll_dispatch(EpArgs a, const int* idx, const uint8_t* x, ncclWindow_t stage_win, ncclWindow_t ctrl,
                      size_t counts_off, uint32_t* state, uint32_t* sent, int* sel_slot, uint8_t* out,
                      uint32_t* src_info, int* recv_count, size_t ranges_off, ncclDevComm dc) {
  const int lane = threadIdx.x & 31, L = a.local, R = a.ranks, T = a.max_tokens;
  // Parts per row: enough for every warp to have one, none shorter than one round of loads, in
  // units the send takes whole: BF16 32-vector lines (a round: EP_UNROLL lines); FP8 128-channel
  // groups, quantized on the way (a round: EP_QROUND groups).
  const int vecs = a.row / 16, units = a.fp8 ? a.hidden / GB_EP_FP8_GROUP : (vecs + 31) / 32;
  const int round = a.fp8 ? EP_QROUND : EP_UNROLL;
  const int parts = max(1, min(warp_count() / max(1, a.tokens), (units + round - 1) / round));
  const int part_units = (units + parts - 1) / parts;
  // The first item's selections are loaded before the epoch, so that the two loads overlap.
  const int w0 = warp_id();
  const int e0 = w0 < a.tokens * parts && lane < a.topk ? idx[w0 / parts * a.topk + lane] : -1;
  const uint32_t epoch = begin_epoch(state), par = epoch & 1;
  const size_t rows_bytes = 2 * size_t(R) * T * a.row;
  auto row_off = [&](int src, int t) { return (size_t(par * R + src) * T + t) * a.row; };
  auto desc_off = [&](int le, int src) { return rows_bytes + (size_t(par * L + le) * R + src) * T * 4; };
  auto count_off = [&](int le, int src) { return counts_off + (size_t(par * L + le) * R + src) * 8; };

  for (int w = w0; w < a.tokens * parts; w += warp_count()) {
    const int t = w / parts, q = w % parts;
    const int e = w == w0 ? e0 : lane < a.topk ? idx[t * a.topk + lane] : -1;  // lane k: selection k
    const int d = e >= 0 ? e / L : -1;
    const bool first = first_lane_for(d, lane);  // it sends the row to rank d
    if (q == 0 && e >= 0) {
      const uint32_t n = atomicAdd(&sent[e], 1u);
      sel_slot[t * a.topk + lane] = int(n);  // where combine finds the expert's output for this selection
      *(uint32_t*)ncclGetLsaPointer(stage_win, desc_off(e % L, a.rank) + n * 4, d) = gb_ep_desc(a.rank, t, lane);
    }
    const int u0 = q * part_units, u1 = min(units, u0 + part_units);
    uint8_t* dst = first ? (uint8_t*)ncclGetLsaPointer(stage_win, row_off(a.rank, t), d) : nullptr;
    if (a.fp8) {
      warp_send_fp8(dst, (const __nv_bfloat16*)x + size_t(t) * a.hidden, a.hidden, u0, u1, lane);
    } else if (u0 < u1) {
      const int v0 = u0 * 32, nv = min(vecs, u1 * 32) - v0;
      warp_send(dst ? dst + v0 * 16 : nullptr, x + size_t(t) * a.row + v0 * 16, nv * 16, lane);
    }
  }
  // The counts go out once every sender is done: after the grid's last CTA arrives or, when
  // every item fell to CTA 0 (a few tokens), after CTA 0's barrier, which saves the grid-wide
  // fence and atomic. The other CTAs still count their arrival, so that last_cta's arithmetic
  // holds for later launches.
  bool publish;
  if (a.tokens * parts <= int(blockDim.x >> 5)) {
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(&state[0], 1u);
    publish = blockIdx.x == 0;
  } else {
    publish = last_cta(state, epoch);
  }
  if (publish) {
    for (int e = threadIdx.x; e < a.experts; e += blockDim.x) {
      const uint32_t n = sent[e];
      sent[e] = 0;
      st_release_sys_u64((uint64_t*)ncclGetLsaPointer(ctrl, count_off(e % L, a.rank), e / L), tag(epoch, n));
    }
  }

  // Pack: the warps split into groups of L (one warp per local expert per group; fewer warps
  // than experts loop); each warp waits for its expert's counts (lane j: source j, R <= 32),
  // builds the source prefix with shuffles, and copies every group-th row, two at a time (with
  // fewer rows than groups, parts of rows). No CTA-wide synchronization.
  const int groups = max(1, warp_count() / L);
  for (int w = warp_id(); w < groups * L; w += warp_count()) {
    const int le = w % L, g = w / L;
    const int n = lane < R ? int(wait_tag((const uint64_t*)ncclGetLocalPointer(ctrl, count_off(le, lane)), epoch)) : 0;
    ll_pack_expert(
        a, le, g, groups, n,
        [&](int src, int j) {
          const uint32_t* desc = (const uint32_t*)ncclGetLocalPointer(stage_win, desc_off(le, src)) + j;
          const int t = gb_ep_desc_token(ld4_peer(desc));
          return LlRow{desc, (const uint8_t*)ncclGetLocalPointer(stage_win, row_off(src, t))};
        },
        out, src_info, recv_count,
        [&](int src, int2 r) {  // to the source, whose combine reads it locally, saving a round trip
          *(int2*)ncclGetLsaPointer(ctrl, ranges_off + size_t(a.rank * L + le) * 8, src) = r;
        },
        lane);
  }
  end_epoch(state, epoch);
}

// How both pull combines open: CTA 0 tells every rank that this rank's expert output (written
// before this launch) is ready (ready_flag); every CTA waits until every rank has said so
// (ready_wait, the reductions' opening: the HT combine's first token's index loads overlap it).
__device__ void ready_flag(const EpArgs& a, ncclWindow_t ctrl, size_t ready_off, uint32_t epoch) {
  if (blockIdx.x == 0) flag_peers(a, ctrl, ready_off, epoch, FlagPeers{0, a.ranks, 0});
}
__device__ void ready_wait(const EpArgs& a, ncclWindow_t ctrl, size_t ready_off, uint32_t epoch) {
  wait_peers(a, ctrl, ready_off, epoch, FlagPeers{0, a.ranks, 0});
  __syncthreads();
}

// Combine (pull): y [L][R*maxT][H] is a symmetric window in the packed layout, so the output for
// this rank's selection (t, k) of expert e sits on e's rank at row (e % L) x R*maxT + the first
// row of this rank's segment there (its `ranges`, in the control window) + the slot the selection
// claimed in dispatch. CTA 0 flags every rank that this rank's y is ready; once every flag is in,
// warps read each token's rows over NVLink and reduce them with the top-k weights (fp32 -> BF16).
// `ranges` is written by the expert ranks in their dispatch, which this rank's dispatch does not
// wait for, and published by their ready flags: even the first token's sources are resolved only
// after the wait (a stale range would read another token's row).
// No closing exchange: a rank rewrites y only in the expert pass after its next dispatch, which
// cannot finish before every rank has finished this combine (it waits for their next counts).
// (A check's expert pass right after its decoy combines breaks this on purpose: only the decoys'
// outputs, which nothing checks, can read the new y.)
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_ep_ll_combine(EpArgs a, ncclWindow_t ywin, ncclWindow_t ctrl, size_t ranges_off, size_t ready_off,
                     const int* sel_slot, const int* idx, const float* w, __nv_bfloat16* out, uint32_t* state,
                     ncclDevComm dc) {
  const uint32_t epoch = begin_epoch(state);
  const int lane = threadIdx.x & 31, L = a.local, R = a.ranks, H = a.hidden;
  const size_t cap = size_t(R) * a.max_tokens;
  ready_flag(a, ctrl, ready_off, epoch);

  reduce_tokens<FirstSources::AfterOpening>(
      out, a.tokens, H,
      [&](int t) {  // the token's rows at the expert ranks
        const int e = lane < a.topk ? idx[t * a.topk + lane] : -1;
        if (e < 0) return TokenSource{nullptr, 0.f};
        const int d = e / L, le = e % L;
        const int first = ((const int2*)ncclGetLocalPointer(ctrl, ranges_off))[e].x;
        const size_t r = le * cap + first + sel_slot[t * a.topk + lane];
        return TokenSource{(const __nv_bfloat16*)ncclGetLsaPointer(ywin, r * 2 * H, d), w[t * a.topk + lane]};
      },
      [&] { ready_wait(a, ctrl, ready_off, epoch); }, lane);
  end_epoch(state, epoch);
}

// ---------------------------------------------------------------------------------------------
// nvl impl, high throughput. Symmetric windows on every rank:
//   recv:  [R*maxT][row] rows, then [R*maxT][meta] (descriptor, K local expert indices, K weights)
//   ctrl:  count matrix [2][R][R + L] u64 at mat_off, dispatch flags [2][R], combine "y ready"
//          flags [2][R]
//   y:     [R*maxT][H] BF16 expert output, rows as received (the combine reads it in place)
// Rows arrive in (source rank, token) order: deterministic.

// Notify (one CTA): every rank sends its tokens-per-rank row and, to each rank, its counts for
// that rank's experts; all wait for everyone's, then derive this rank's first row in every
// destination (offs[d]), its received rows (offs[R]), the first received row per source
// (offs[R + 1 + s], offs[2R + 1] = all) and rows per local expert.
extern "C" __global__ void gb_ep_ht_notify(EpArgs a, const int* totals, ncclWindow_t ctrl, size_t mat_off,
                                           uint32_t* state, int* offs, int* recv_per_expert, ncclDevComm dc) {
  extern __shared__ int m[];  // [R][R + L]
  const int R = a.ranks, L = a.local, W = R + L;
  __shared__ uint32_t s_epoch;
  if (threadIdx.x == 0) s_epoch = state[0] + 1;
  __syncthreads();
  const uint32_t epoch = s_epoch, par = epoch & 1;
  auto off = [&](int src, int j) { return mat_off + ((size_t(par) * R + src) * W + j) * 8; };
  for (int i = threadIdx.x; i < R * W; i += blockDim.x) {
    const int d = i / W, j = i % W;
    const int v = j < R ? totals[a.experts + j] : totals[d * L + (j - R)];
    st_release_sys_u64((uint64_t*)ncclGetLsaPointer(ctrl, off(a.rank, j), d), tag(epoch, v));
  }
  for (int i = threadIdx.x; i < R * W; i += blockDim.x)
    m[i] = int(wait_tag((const uint64_t*)ncclGetLocalPointer(ctrl, off(i / W, i % W)), epoch));
  __syncthreads();
  ht_offsets(a, m, offs, recv_per_expert);
  if (threadIdx.x == 0) state[0] = epoch;
}

// Dispatch: a warp per token writes it to every rank holding one of its experts (read once,
// stored to all), at the row the layout and the notify gave, with its metadata; the last CTA flags every rank and waits
// for every rank's flag, so the kernel ends when this rank has received everything.
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_ep_ht_dispatch(EpArgs a, const int* idx, const float* w, const uint8_t* x, const int* tok_local,
                      const int* chunk_base, const int* offs, ncclWindow_t recv, size_t meta_off, int meta_bytes,
                      ncclWindow_t ctrl, size_t flags_off, uint32_t* state, ncclDevComm dc) {
  const uint32_t epoch = begin_epoch(state);
  const int lane = threadIdx.x & 31, R = a.ranks, keys = a.experts + R;
  for (int t = warp_id(); t < a.tokens; t += warp_count()) {
    // Destinations in groups of 32, lane j holding destination d0 + j: the row is read once
    // per group and written to all of them.
    for (int d0 = 0; d0 < R; d0 += 32) {
      const int d = d0 + lane;
      uint8_t *dst = nullptr, *meta = nullptr;
      const int p = d < R ? tok_local[size_t(t) * R + d] : -1;
      if (p >= 0) {
        const size_t r = size_t(offs[d]) + chunk_base[size_t(t / GB_EP_CHUNK) * keys + a.experts + d] + p;
        dst = (uint8_t*)ncclGetLsaPointer(recv, r * a.row, d);
        meta = (uint8_t*)ncclGetLsaPointer(recv, meta_off + r * meta_bytes, d);
      }
      warp_ht_meta(meta, d0, a, idx, w, t, meta_bytes, lane);
      warp_send(dst, x + size_t(t) * a.row, a.row, lane);
    }
  }
  flag_all_then_wait(a, ctrl, flags_off, state, epoch, false, FlagPeers{0, a.ranks, 0});
  end_epoch(state, epoch);
}

// Combine (pull): every rank's expert output y is a symmetric window, rows in receive order, so
// the row rank d holds for (this rank, token t) is offs[d] + t's position among this rank's tokens
// bound for d. CTA 0 flags every rank that this rank's y (written before this launch) is ready;
// once every rank's flag is in, warps read each token's partial rows (already weighted by that
// rank's experts) straight from the ranks it went to and sum them (fp32 -> BF16). Reading in
// place saves the send phase and a write and re-read of every row. No closing exchange: a rank
// rewrites y only in the expert pass after its next dispatch, which cannot finish before every
// rank has finished this combine (its last CTA waits for every rank's next flags). (A check's
// expert pass right after its decoy combines breaks this on purpose, as in the LL combine.)
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_ep_ht_combine(EpArgs a, ncclWindow_t ywin, const int* offs, const int* tok_local, const int* chunk_base,
                     ncclWindow_t ctrl, size_t ready_off, const int* idx, __nv_bfloat16* out,
                     uint32_t* state, ncclDevComm dc) {
  const uint32_t epoch = begin_epoch(state);
  const int lane = threadIdx.x & 31, R = a.ranks, H = a.hidden, keys = a.experts + R;
  ready_flag(a, ctrl, ready_off, epoch);

  reduce_tokens(
      out, a.tokens, H,
      [&](int t) {  // the token's partial rows, one per rank it went to
        // Lane k holds rank d of selection k, unless an earlier selection already named d.
        const int e = lane < a.topk ? idx[t * a.topk + lane] : -1;
        const int d = e >= 0 ? e / a.local : -1;
        if (!first_lane_for(d, lane)) return TokenSource{nullptr, 0.f};
        const size_t r = size_t(offs[d]) + chunk_base[size_t(t / GB_EP_CHUNK) * keys + a.experts + d] +
                         tok_local[size_t(t) * R + d];
        return TokenSource{(const __nv_bfloat16*)ncclGetLsaPointer(ywin, r * 2 * H, d), 1.f};
      },
      [&] { ready_wait(a, ctrl, ready_off, epoch); }, lane);
  end_epoch(state, epoch);
}
