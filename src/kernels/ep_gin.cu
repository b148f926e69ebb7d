// Expert-parallel dispatch and combine across nodes (ep_perf -D gin, hybrid, gin-emu, hybrid-emu):
// the dispatch protocols of the nvl impl (ep.cu), with every transfer to a rank outside this
// rank's NVLink node put through GIN (gin_net.cuh). gin puts to every rank, itself included;
// hybrid stores into the ranks of its node over NVLink and puts to the others. Combine pushes
// the expert output back to slots at the token's rank (nvl's combines pull, which GIN's puts
// cannot), then reduces them there.
//
// GIN puts copy from a registered window and land in any order; only signals say what arrived.
// So rows bound for a network peer are first written to this rank's send window, then put, and:
//  - Every signal is per parity (launch e uses e % 2; ep.cu says why two suffice). A sender adds
//    one per row it puts (or the rows of a put) and, once done, pads the signal with the rest of
//    its capacity (signalAdd(capacity - rows)). Each network peer thus adds the same amount in
//    every launch, and the receiver waits for a fixed target: launches of this parity so far x
//    network peers x capacity. That needs no per-launch state and no resets, and it is reached
//    only once every row has landed, in whatever order.
//  - Counts the receiver needs (LL rows per (expert, source), the HT count matrix) travel as puts
//    into its control window, counted by a signal of their own.
//  - Each CTA flushes its puts before the kernel ends, so the next launch may rewrite the sources.
#include "ep_common.cuh"
#include "gin_net.cuh"

// The impl's windows and buffers (mirrors src/ep/gin.rs `GinBufs`).
struct EpGinBufs {
  ncclWindow_t recv;  // LL: staging [2][L][R][maxT][16 + row]; HT: rows [R*maxT][row], then metadata
  ncclWindow_t send;  // LL: [maxT*K][16 + row] a slot per selection; HT: [R][maxT][row], then metadata
  ncclWindow_t y;     // expert output, the combine input
  ncclWindow_t cbuf;  // LL: [2][K][maxT][H] slot per (k, token); HT: [2][R][maxT][H] slot per (rank, position)
  ncclWindow_t ctrl;  // NVLink flags and counts, network counts received and to send (offsets below)
  ncclWindow_t sigwin;  // emulated GIN's signals
  int node_size;        // ranks per virtual node (emulation)
  int meta_bytes;       // HT metadata row
  size_t meta_off;      // HT: where the metadata starts in recv
  size_t send_meta_off;  // HT: ... and in send
  size_t lsa_counts;     // LL: [2][L][R] u64 tagged counts over NVLink; HT: [2][R][R + L] u64
  size_t flags;          // dispatch flags [2][R] u64
  size_t cflags;         // combine flags [2][R] u64
  size_t net_counts;     // counts put by network peers: LL [2][R][L] i32, HT [2][R][R + L] i32, rows 16-aligned
  size_t out_counts;     // counts to put: LL [R][L] i32, HT [R][R + L] i32, rows 16-aligned
  uint32_t* state;       // dispatch: arrivals + epochs (ep.cu begin_epoch)
  uint32_t* cstate;      // combine
  uint32_t* nstate;      // HT notify
  uint32_t* sent;        // LL: rows per expert so far
  uint8_t* out;          // LL: packed rows [L][R*maxT][row]
  uint32_t* src_info;    // LL: their descriptors
  int* recv_count;       // LL: rows per local expert
  int2* ranges;          // LL: (first, count) per (local expert, source)
  int* offs;             // HT: notify's offsets (ep.cu gb_ep_ht_notify)
  int* recv_per_expert;  // HT
  const int* tok_local;  // HT: the layout (ep.cu gb_ep_layout_chunks / scan)
  const int* chunk_base;
  const int* totals;
  uint64_t* sigbase;     // real GIN: each signal's value at setup (gin_net.cuh GinNet)
};

// What the bench hands every kernel: routing, weights, the dispatched rows and the combine output.
struct EpIo {
  const int* idx;
  const float* w;
  const uint8_t* x;
  __nv_bfloat16* out;
};

// Pinned on both sides (src/ep/gin.rs), so the launch arguments cannot drift apart.
static_assert(sizeof(EpGinBufs) == 224, "EpGinBufs layout changed: update src/ep/gin.rs GinBufs");
static_assert(sizeof(EpIo) == 32, "EpIo layout changed: update src/ep/gin.rs Io");

// Signal ids. LL: counts (per parity), rows per (parity, local expert), combine rows (per parity).
__device__ __forceinline__ uint32_t ll_sig_counts(uint32_t par) { return par; }
__device__ __forceinline__ uint32_t ll_sig_rows(const EpArgs& a, uint32_t par, int le) {
  return 2 + par * a.local + le;
}
__device__ __forceinline__ uint32_t ll_sig_combine(const EpArgs& a, uint32_t par) { return 2 + 2 * a.local + par; }
// HT: count matrices, dispatched rows and metadata, combine rows (each per parity).
#define HT_SIG_NOTIFY 0
#define HT_SIG_ROWS 2
#define HT_SIG_COMBINE 4

// Launches of epoch's parity so far, this one included (epochs count from 1).
__device__ __forceinline__ uint64_t rounds(uint32_t epoch) { return (epoch + 1) / 2; }

// Who is reached how: NVLink inside the node (hybrid only), GIN to everyone else.
template <bool HYBRID>
struct EpPeers {
  Topo t;
  int net_peers;
  __device__ explicit EpPeers(Topo t_) : t(t_), net_peers(HYBRID ? t_.nRanks - t_.nodeSize : t_.nRanks) {}
  __device__ bool lsa(int p) const { return HYBRID && t.inNode(p); }
  __device__ void* lsa_ptr(ncclWindow_t w, size_t off, int p) const { return ncclGetLsaPointer(w, off, p - t.lsaBase); }
  __device__ FlagPeers flags() const {
    return HYBRID ? FlagPeers{t.nodeStart, t.nodeStart + t.nodeSize, t.lsaBase} : FlagPeers{0, 0, 0};
  }
};

__device__ __forceinline__ size_t counts_row(int n) { return (size_t(n) * 4 + 15) / 16 * 16; }

// ---------------------------------------------------------------------------------------------
// LL (the nvl protocol, ep.cu gb_ep_ll_dispatch / gb_ep_ll_combine)

// Dispatch: a warp per selection claims a slot at the expert's rank and writes header + row there
// (node peer) or into the selection's send slot and puts it (one row on the expert's signal).
// The last CTA publishes the per-expert counts (tagged words to node peers, one put per network
// peer) and pads each expert's signal to max_tokens per source; then CTAs pack as nvl does.
template <bool HYBRID, class Net>
__device__ void ll_dispatch(Net& net, EpPeers<HYBRID> P, const EpArgs& a, const EpIo& io, const EpGinBufs& b) {
  const uint32_t epoch = begin_epoch(b.state), par = epoch & 1;
  const int lane = threadIdx.x & 31, L = a.local, R = a.ranks;
  const size_t slot = 16 + size_t(a.row), seg = size_t(a.max_tokens) * slot, crow = counts_row(L);
  auto seg_off = [&](int le, int src) { return (size_t(par * L + le) * R + src) * seg; };
  auto lsa_count_off = [&](int le, int src) { return b.lsa_counts + (size_t(par * L + le) * R + src) * 8; };
  auto net_count_off = [&](int src) { return b.net_counts + (size_t(par) * R + src) * crow; };

  for (int s = warp_id(); s < a.tokens * a.topk; s += warp_count()) {
    const int e = io.idx[s];
    if (e < 0) continue;
    const int t = s / a.topk, k = s % a.topk, d = e / L;
    uint32_t n = 0;
    if (lane == 0) n = atomicAdd(&b.sent[e], 1u);
    n = __shfl_sync(~0u, n, 0);
    const size_t there = seg_off(e % L, a.rank) + n * slot, here = size_t(s) * slot;
    uint8_t* dst = (uint8_t*)(P.lsa(d) ? P.lsa_ptr(b.recv, there, d) : ncclGetLocalPointer(b.send, here));
    if (lane == 0) *(uint4*)dst = make_uint4(gb_ep_desc(a.rank, t, k), 0, 0, 0);
    warp_send(lane == 0 ? dst + 16 : nullptr, io.x + size_t(t) * a.row, a.row, lane);
    if (!P.lsa(d)) net.putAdd(ncclCoopWarp(), d, b.recv, there, b.send, here, slot, ll_sig_rows(a, par, e % L), 1);
  }
  net.flush(ncclCoopCta());
  if (last_cta(b.state, epoch)) {
    for (int e = threadIdx.x; e < a.experts; e += blockDim.x) {
      const uint32_t n = b.sent[e];
      const int d = e / L, le = e % L;
      b.sent[e] = 0;
      if (P.lsa(d)) {
        st_release_sys_u64((uint64_t*)P.lsa_ptr(b.ctrl, lsa_count_off(le, a.rank), d), tag(epoch, n));
      } else {
        ((int*)ncclGetLocalPointer(b.ctrl, b.out_counts + d * crow))[le] = int(n);
        if (n < uint32_t(a.max_tokens)) net.signalAdd(ncclCoopThread(), d, ll_sig_rows(a, par, le), a.max_tokens - n);
      }
    }
    __syncthreads();
    for (int d = threadIdx.x >> 5; d < R; d += blockDim.x >> 5)
      if (!P.lsa(d))
        net.putAdd(ncclCoopWarp(), d, b.ctrl, net_count_off(a.rank), b.ctrl, b.out_counts + d * crow, crow,
                   ll_sig_counts(par), 1);
    net.flush(ncclCoopCta());
  }

  // Pack (as nvl): a warp per local expert per group learns the counts per source (lane j:
  // source j) and waits for the expert's rows.
  const int groups = max(1, warp_count() / L);
  for (int w = warp_id(); w < groups * L; w += warp_count()) {
    const int le = w % L, g = w / L;
    net.waitSignal(ncclCoopWarp(), ll_sig_counts(par), rounds(epoch) * P.net_peers);
    int n = 0;
    if (lane < R)
      n = P.lsa(lane) ? int(wait_tag((const uint64_t*)ncclGetLocalPointer(b.ctrl, lsa_count_off(le, lane)), epoch))
                      : ld_acquire_sys_s32((const int*)ncclGetLocalPointer(b.ctrl, net_count_off(lane)) + le);
    net.waitSignal(ncclCoopWarp(), ll_sig_rows(a, par, le), rounds(epoch) * P.net_peers * a.max_tokens);
    ll_pack_expert(
        a, le, g, groups, n,
        [&](int src, int j) {
          const uint8_t* s = (const uint8_t*)ncclGetLocalPointer(b.recv, seg_off(le, src) + size_t(j) * slot);
          return LlRow{(const uint32_t*)s, s + 16};  // a 16-byte header, then the row
        },
        b.out, b.src_info, b.recv_count, [&](int src, int2 r) { b.ranges[le * R + src] = r; }, lane);
  }
  end_epoch(b.state, epoch);
}

// Combine: a warp per packed row returns the expert output to slot (k, token) of the token's
// rank: stored over NVLink or put from y (one on the combine signal). The last CTA flags the node
// and pads each network peer's signal to max_tokens x topk; every CTA waits for both, then
// reduces its tokens' slots with the top-k weights (fp32 -> BF16).
template <bool HYBRID, class Net>
__device__ void ll_combine(Net& net, EpPeers<HYBRID> P, const EpArgs& a, const EpIo& io, const EpGinBufs& b) {
  extern __shared__ int smem[];  // [L + 1] row prefix over local experts
  const uint32_t epoch = begin_epoch(b.cstate), par = epoch & 1;
  const int lane = threadIdx.x & 31, L = a.local, R = a.ranks, H = a.hidden;
  const size_t rowb = 2 * size_t(H), cap = size_t(R) * a.max_tokens;
  auto slot_off = [&](int k, int t) { return ((size_t(par) * a.topk + k) * a.max_tokens + t) * rowb; };
  int* pre = smem;
  if (threadIdx.x == 0) {
    int run = 0;
    for (int le = 0; le < L; le++) {
      pre[le] = run;
      run += b.recv_count[le];
    }
    pre[L] = run;
  }
  __syncthreads();
  const __nv_bfloat16* y = (const __nv_bfloat16*)ncclGetLocalPointer(b.y, 0);
  for (int g = warp_id(); g < pre[L]; g += warp_count()) {
    int lo = 0, hi = L - 1;  // the expert whose rows hold g: last le with pre[le] <= g
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (pre[mid] <= g) lo = mid;
      else hi = mid - 1;
    }
    const size_t r = lo * cap + (g - pre[lo]);
    const uint32_t d = b.src_info[r];
    const int owner = gb_ep_desc_src(d);
    const size_t there = slot_off(gb_ep_desc_slot(d), gb_ep_desc_token(d));
    if (P.lsa(owner))
      warp_send(lane == 0 ? (uint8_t*)P.lsa_ptr(b.cbuf, there, owner) : nullptr, y + r * H, int(rowb), lane);
    else
      net.putAdd(ncclCoopWarp(), owner, b.cbuf, there, b.y, r * rowb, rowb, ll_sig_combine(a, par), 1);
  }
  net.flush(ncclCoopCta());
  if (last_cta(b.cstate, epoch)) {
    flag_peers(a, b.ctrl, b.cflags, epoch, P.flags());
    for (int d = threadIdx.x; d < R; d += blockDim.x) {
      if (P.lsa(d)) continue;
      int rows = 0;  // rows this rank returns to d: what it received from d
      for (int le = 0; le < L; le++) rows += b.ranges[le * R + d].y;
      const int pad = a.max_tokens * a.topk - rows;
      if (pad > 0) net.signalAdd(ncclCoopThread(), d, ll_sig_combine(a, par), pad);
    }
  }
  wait_peers(a, b.ctrl, b.cflags, epoch, P.flags());
  net.waitSignal(ncclCoopCta(), ll_sig_combine(a, par),
                 rounds(epoch) * P.net_peers * uint64_t(a.max_tokens) * a.topk);
  __syncthreads();

  const __nv_bfloat16* slots = (const __nv_bfloat16*)ncclGetLocalPointer(b.cbuf, 0);
  reduce_tokens(
      io.out, a.tokens, H,
      [&](int t) {
        const bool valid = lane < a.topk && io.idx[t * a.topk + lane] >= 0;
        return valid ? TokenSource{slots + slot_off(lane, t) / 2, io.w[t * a.topk + lane]} : TokenSource{nullptr, 0.f};
      },
      [] {}, lane);
  end_epoch(b.cstate, epoch);
}

// ---------------------------------------------------------------------------------------------
// HT (the nvl protocol, ep.cu gb_ep_ht_*). A token's position among this rank's tokens bound for
// rank d (the layout's chunk base + rank in chunk) is its row in d's receive window less offs[d],
// and its slot in the combine window: rows go and come back as ranges of consecutive positions.

__device__ __forceinline__ size_t ht_position(const EpArgs& a, const EpGinBufs& b, int t, int d) {
  return size_t(b.chunk_base[size_t(t / GB_EP_CHUNK) * (a.experts + a.ranks) + a.experts + d]) +
         b.tok_local[size_t(t) * a.ranks + d];
}

// Notify (one CTA): as nvl, with the count matrix row put to network peers.
template <bool HYBRID, class Net>
__device__ void ht_notify(Net& net, EpPeers<HYBRID> P, const EpArgs& a, const EpIo&, const EpGinBufs& b) {
  extern __shared__ int m[];  // [R][R + L]
  const int R = a.ranks, L = a.local, W = R + L;
  const size_t crow = counts_row(W);
  __shared__ uint32_t s_epoch;
  if (threadIdx.x == 0) s_epoch = b.nstate[0] + 1;
  __syncthreads();
  const uint32_t epoch = s_epoch, par = epoch & 1;
  auto lsa_off = [&](int src, int j) { return b.lsa_counts + ((size_t(par) * R + src) * W + j) * 8; };
  auto net_off = [&](int src) { return b.net_counts + (size_t(par) * R + src) * crow; };
  for (int i = threadIdx.x; i < R * W; i += blockDim.x) {
    const int d = i / W, j = i % W;
    const int v = j < R ? b.totals[a.experts + j] : b.totals[d * L + (j - R)];
    if (P.lsa(d)) st_release_sys_u64((uint64_t*)P.lsa_ptr(b.ctrl, lsa_off(a.rank, j), d), tag(epoch, v));
    else ((int*)ncclGetLocalPointer(b.ctrl, b.out_counts + d * crow))[j] = v;
  }
  __syncthreads();
  for (int d = threadIdx.x >> 5; d < R; d += blockDim.x >> 5)
    if (!P.lsa(d))
      net.putAdd(ncclCoopWarp(), d, b.ctrl, net_off(a.rank), b.ctrl, b.out_counts + d * crow, crow,
                 HT_SIG_NOTIFY + par, 1);
  net.waitSignal(ncclCoopCta(), HT_SIG_NOTIFY + par, rounds(epoch) * P.net_peers);
  for (int i = threadIdx.x; i < R * W; i += blockDim.x) {
    const int src = i / W, j = i % W;
    m[i] = P.lsa(src) ? int(wait_tag((const uint64_t*)ncclGetLocalPointer(b.ctrl, lsa_off(src, j)), epoch))
                      : ld_acquire_sys_s32((const int*)ncclGetLocalPointer(b.ctrl, net_off(src)) + j);
  }
  net.flush(ncclCoopCta());
  __syncthreads();
  ht_offsets(a, m, b.offs, b.recv_per_expert);
  if (threadIdx.x == 0) b.nstate[0] = epoch;
}

// Dispatch: a CTA per chunk of GB_EP_CHUNK tokens. Its warps write each token once per destination
// rank (with its metadata): node peers at the final row over NVLink, network peers into the send
// window at the token's position. The chunk's rows for a network peer are consecutive on both
// sides, so one put carries them and one their metadata (each adding its rows to the signal).
template <bool HYBRID, class Net>
__device__ void ht_dispatch(Net& net, EpPeers<HYBRID> P, const EpArgs& a, const EpIo& io, const EpGinBufs& b) {
  const uint32_t epoch = begin_epoch(b.state), par = epoch & 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int R = a.ranks, mb = b.meta_bytes;
  const int chunks = (a.tokens + GB_EP_CHUNK - 1) / GB_EP_CHUNK;
  auto send_row = [&](int d, size_t q) { return (size_t(d) * a.max_tokens + q); };
  for (int c = blockIdx.x; c < chunks; c += gridDim.x) {
    const int t0 = c * GB_EP_CHUNK, t1 = min(a.tokens, t0 + GB_EP_CHUNK);
    for (int t = t0 + warp; t < t1; t += warps) {
      for (int d0 = 0; d0 < R; d0 += 32) {  // lane j: destination d0 + j
        const int d = d0 + lane;
        uint8_t *dst = nullptr, *meta = nullptr;
        if (d < R && b.tok_local[size_t(t) * R + d] >= 0) {
          const size_t q = ht_position(a, b, t, d);
          if (P.lsa(d)) {
            const size_t r = b.offs[d] + q;
            dst = (uint8_t*)P.lsa_ptr(b.recv, r * a.row, d);
            meta = (uint8_t*)P.lsa_ptr(b.recv, b.meta_off + r * mb, d);
          } else {
            dst = (uint8_t*)ncclGetLocalPointer(b.send, send_row(d, q) * a.row);
            meta = (uint8_t*)ncclGetLocalPointer(b.send, b.send_meta_off + send_row(d, q) * mb);
          }
        }
        warp_ht_meta(meta, d0, a, io.idx, io.w, t, mb, lane);
        warp_send(dst, io.x + size_t(t) * a.row, a.row, lane);
      }
    }
    __syncthreads();
    for (int d = 0; d < R; d++) {
      if (P.lsa(d)) continue;
      const int keys = a.experts + R, key = a.experts + d;
      const int q = b.chunk_base[size_t(c) * keys + key];
      const int n = (c + 1 < chunks ? b.chunk_base[size_t(c + 1) * keys + key] : b.totals[key]) - q;
      if (n == 0) continue;
      const size_t r = b.offs[d] + q;
      net.putAdd(ncclCoopCta(), d, b.recv, r * a.row, b.send, send_row(d, q) * a.row, size_t(n) * a.row,
                 HT_SIG_ROWS + par, n);
      net.putAdd(ncclCoopCta(), d, b.recv, b.meta_off + r * mb, b.send, b.send_meta_off + send_row(d, q) * mb,
                 size_t(n) * mb, HT_SIG_ROWS + par, n);
    }
  }
  net.flush(ncclCoopCta());
  // The last CTA flags the node, pads each network peer's signal (two per row: row, metadata)
  // to 2 x max_tokens, and waits until this rank has received everything.
  if (last_cta(b.state, epoch)) {
    flag_peers(a, b.ctrl, b.flags, epoch, P.flags());
    for (int d = threadIdx.x; d < R; d += blockDim.x) {
      const int pad = 2 * (a.max_tokens - b.totals[a.experts + d]);
      if (!P.lsa(d) && pad > 0) net.signalAdd(ncclCoopThread(), d, HT_SIG_ROWS + par, pad);
    }
    wait_peers(a, b.ctrl, b.flags, epoch, P.flags());
    net.waitSignal(ncclCoopCta(), HT_SIG_ROWS + par, rounds(epoch) * P.net_peers * 2 * uint64_t(a.max_tokens));
  }
  end_epoch(b.state, epoch);
}

// Combine: the rows received from a source are consecutive, in its position order; a CTA takes
// GB_EP_CHUNK of them (sources rank-rotated against incast) and returns them, pre-weighted, to that
// source's slots (this rank, position): stored over NVLink or put in one piece. Every CTA then
// waits for the node's flags and the signal (padded to max_tokens per peer), and sums each
// token's partial rows (fp32 -> BF16).
template <bool HYBRID, class Net>
__device__ void ht_combine(Net& net, EpPeers<HYBRID> P, const EpArgs& a, const EpIo& io, const EpGinBufs& b) {
  const uint32_t epoch = begin_epoch(b.cstate), par = epoch & 1;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int R = a.ranks, H = a.hidden;
  const size_t rowb = 2 * size_t(H);
  auto slot_off = [&](int src, size_t q) { return ((size_t(par) * R + src) * a.max_tokens + q) * rowb; };
  const int* first = b.offs + R + 1;
  int most = 0;
  for (int s = 0; s < R; s++) most = max(most, first[s + 1] - first[s]);
  const int pieces = (most + GB_EP_CHUNK - 1) / GB_EP_CHUNK;
  const __nv_bfloat16* y = (const __nv_bfloat16*)ncclGetLocalPointer(b.y, 0);
  for (int item = blockIdx.x; item < pieces * R; item += gridDim.x) {
    const int src = (item + a.rank) % R, q0 = item / R * GB_EP_CHUNK;
    const int n = min(GB_EP_CHUNK, first[src + 1] - first[src] - q0);
    if (n <= 0) continue;
    const size_t r0 = first[src] + q0;
    if (P.lsa(src)) {
      for (int i = warp; i < n; i += warps)
        warp_send(lane == 0 ? (uint8_t*)P.lsa_ptr(b.cbuf, slot_off(a.rank, q0 + i), src) : nullptr,
                  y + (r0 + i) * H, int(rowb), lane);
    } else {
      net.putAdd(ncclCoopCta(), src, b.cbuf, slot_off(a.rank, q0), b.y, r0 * rowb, n * rowb, HT_SIG_COMBINE + par, n);
    }
  }
  net.flush(ncclCoopCta());
  if (last_cta(b.cstate, epoch)) {
    flag_peers(a, b.ctrl, b.cflags, epoch, P.flags());
    for (int s = threadIdx.x; s < R; s += blockDim.x) {
      const int pad = a.max_tokens - (first[s + 1] - first[s]);
      if (!P.lsa(s) && pad > 0) net.signalAdd(ncclCoopThread(), s, HT_SIG_COMBINE + par, pad);
    }
  }
  wait_peers(a, b.ctrl, b.cflags, epoch, P.flags());
  net.waitSignal(ncclCoopCta(), HT_SIG_COMBINE + par, rounds(epoch) * P.net_peers * uint64_t(a.max_tokens));
  __syncthreads();

  const __nv_bfloat16* slots = (const __nv_bfloat16*)ncclGetLocalPointer(b.cbuf, 0);
  reduce_tokens(
      io.out, a.tokens, H,
      [&](int t) {
        // Lane k holds rank d of selection k, unless an earlier selection already named d.
        const int e = lane < a.topk ? io.idx[t * a.topk + lane] : -1;
        const int d = e >= 0 ? e / a.local : -1;
        return first_lane_for(d, lane) ? TokenSource{slots + slot_off(d, ht_position(a, b, t, d)) / 2, 1.f}
                                       : TokenSource{nullptr, 0.f};
      },
      [] {}, lane);
  end_epoch(b.cstate, epoch);
}

// ---------------------------------------------------------------------------------------------
// Entry points: every protocol on real GIN (gin, hybrid; the node is the LSA team) and emulated
// GIN (gin_emu, hybrid_emu; virtual nodes of node_size ranks on one host). Real GIN uses context
// 0 for every signal, so that a receiver's signals count every sender's puts.
#define GB_EP_GIN_ENTRIES(fn)                                                                               \
  extern "C" __global__ void __launch_bounds__(GB_THREADS)                                                  \
      gb_ep_gin_##fn(EpArgs a, EpIo io, EpGinBufs b, ncclDevComm dc) {                                       \
    GinNet net(dc, 0, b.sigbase);                                                                           \
    fn(net, EpPeers<false>(Topo::lsaNodes(dc)), a, io, b);                                                  \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(GB_THREADS)                                                  \
      gb_ep_hybrid_##fn(EpArgs a, EpIo io, EpGinBufs b, ncclDevComm dc) {                                    \
    GinNet net(dc, 0, b.sigbase);                                                                           \
    fn(net, EpPeers<true>(Topo::lsaNodes(dc)), a, io, b);                                                   \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(GB_THREADS)                                                  \
      gb_ep_gin_emu_##fn(EpArgs a, EpIo io, EpGinBufs b, ncclDevComm dc) {                                   \
    EmuNet net(dc, b.sigwin);                                                                               \
    fn(net, EpPeers<false>(Topo::virtualNodes(dc, b.node_size)), a, io, b);                                 \
  }                                                                                                         \
  extern "C" __global__ void __launch_bounds__(GB_THREADS)                                                  \
      gb_ep_hybrid_emu_##fn(EpArgs a, EpIo io, EpGinBufs b, ncclDevComm dc) {                                \
    EmuNet net(dc, b.sigwin);                                                                               \
    fn(net, EpPeers<true>(Topo::virtualNodes(dc, b.node_size)), a, io, b);                                  \
  }

GB_EP_GIN_ENTRIES(ll_dispatch)
GB_EP_GIN_ENTRIES(ll_combine)
GB_EP_GIN_ENTRIES(ht_notify)
GB_EP_GIN_ENTRIES(ht_dispatch)
GB_EP_GIN_ENTRIES(ht_combine)

// Setup, once per impl: the starting value of each of the `n` signals the protocols use (see
// GinNet). The host synchronises and barriers after it, so no peer has signalled yet.
extern "C" __global__ void gb_ep_gin_signal_base(EpGinBufs b, ncclDevComm dc, int n) {
  ncclGin gin(dc, 0);
  for (int i = threadIdx.x; i < n; i += blockDim.x) b.sigbase[i] = gin.readSignal(i);
}
