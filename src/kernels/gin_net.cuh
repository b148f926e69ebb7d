// The two transports the GIN protocols run on: NCCL's GIN (`GinNet`) and GIN emulated over LSA on
// one host (`EmuNet`). Both offer the same device-side interface, so the protocols (gin.cu: alltoall;
// ep_gin.cu: dispatch / combine) are written once:
//
//   readSignal(sig)                   this rank's signal value (acquire)
//   put(coop, peer, dst, dstOff, src, srcOff, bytes, sig)
//                                     copy to the peer's window, then +1 on the peer's signal `sig`;
//                                     the signal becomes visible only after the data
//   putAdd(..., sig, value)           the same, adding `value` (signals a put adds to are never
//                                     incremented by put: NCCL forbids mixing the two)
//   signalAdd(coop, peer, sig, value) add to the peer's signal, no data
//   waitSignal(coop, sig, least)      until this rank's signal reaches `least`
//   flush(coop)                       this rank's puts are locally complete (sources reusable)
//   barrier(coop, order)              every rank of the world
//
// As with NCCL's GIN, puts may land in any order and only signal counts say what has arrived.
#pragma once
#include "device_compat.cuh"

// Where the ranks are: the node of this rank is [nodeStart, nodeStart + nodeSize); LSA pointers of
// a node peer p use index p - lsaBase (real hybrid: the LSA team is the node; emulation: the
// whole host is one LSA team, so lsaBase = 0).
struct Topo {
  int rank, nRanks, nodeStart, nodeSize, lsaBase;
  __device__ bool inNode(int p) const { return p >= nodeStart && p < nodeStart + nodeSize; }

  // Real: the node is the LSA team (consecutive world ranks).
  __device__ static Topo lsaNodes(ncclDevComm const& dc) {
    const int start = dc.rank - dc.lsaRank;
    return Topo{dc.rank, dc.nRanks, start, dc.lsaSize, start};
  }
  // Emulated: `nodeSize` consecutive ranks per virtual node; the whole host is one LSA team.
  __device__ static Topo virtualNodes(ncclDevComm const& dc, int nodeSize) {
    return Topo{dc.rank, dc.nRanks, dc.rank / nodeSize * nodeSize, nodeSize, 0};
  }
};

// NCCL hands a new device communicator signal ids that an earlier one may have used, without
// zeroing them (2.28.9 src/dev_runtime.cc resets none). A protocol that waits for fixed targets
// counted from zero passes `base`: each signal's value when its user started (read once at setup,
// before any peer could signal); readSignal and waitSignal then count from there.
struct GinNet {
  ncclDevComm const& dc;
  ncclGin gin;
  const uint64_t* base;
  __device__ GinNet(ncclDevComm const& dc_, int context, const uint64_t* base_ = nullptr)
      : dc(dc_), gin(dc_, context), base(base_) {}

  __device__ uint64_t baseOf(uint32_t sig) const { return base ? base[sig] : 0; }
  __device__ uint64_t readSignal(uint32_t sig) { return gin.readSignal(sig) - baseOf(sig); }

  template <class Coop>
  __device__ void put(Coop coop, int peer, ncclWindow_t dst, size_t dstOff, ncclWindow_t src, size_t srcOff,
                      size_t bytes, uint32_t sig) {
    gin.put(ncclTeamWorld(dc), peer, dst, dstOff, src, srcOff, bytes, GbGinSignalInc{sig}, ncclGin_None{}, coop);
  }

  template <class Coop>
  __device__ void putAdd(Coop coop, int peer, ncclWindow_t dst, size_t dstOff, ncclWindow_t src, size_t srcOff,
                         size_t bytes, uint32_t sig, uint64_t value) {
    gin.put(ncclTeamWorld(dc), peer, dst, dstOff, src, srcOff, bytes, GbGinSignalAdd{sig, value}, ncclGin_None{},
            coop);
  }

  template <class Coop>
  __device__ void signalAdd(Coop coop, int peer, uint32_t sig, uint64_t value) {
    gin.signal(ncclTeamWorld(dc), peer, GbGinSignalAdd{sig, value}, coop);
  }

  template <class Coop>
  __device__ void waitSignal(Coop coop, uint32_t sig, uint64_t least) {
    gin.waitSignal(coop, sig, baseOf(sig) + least);
  }

  template <class Coop>
  __device__ void flush(Coop coop) {
    gin.flush(coop);
  }

  // World barrier: LSA inside the node, GIN across nodes (needs reqs.barrierCount >= CTAs).
  template <class Coop>
  __device__ void barrier(Coop coop, cuda::memory_order order) {
    ncclBarrierSession<Coop> bar{coop, ncclTeamTagWorld(), gin, blockIdx.x};
    bar.sync(coop, order, GB_GIN_FENCE_NONE);
  }
};

// GIN emulated with NVLink stores on one host where every rank is in the LSA team. Signals are
// 64-bit words in a symmetric window of their own (`sigwin`, one word per signal per rank).
struct EmuNet {
  ncclDevComm const& dc;
  ncclWindow_t sigwin;
  __device__ EmuNet(ncclDevComm const& dc_, ncclWindow_t sigwin_) : dc(dc_), sigwin(sigwin_) {}

  __device__ uint64_t* signalWord(uint32_t sig, int peer) {
    return (uint64_t*)ncclGetLsaPointer(sigwin, sig * sizeof(uint64_t), peer);
  }

  __device__ uint64_t readSignal(uint32_t sig) {
    cuda::atomic_ref<uint64_t, cuda::thread_scope_system> s(*signalWord(sig, dc.lsaRank));
    return s.load(cuda::memory_order_acquire);
  }

  template <class Coop>
  __device__ void put(Coop coop, int peer, ncclWindow_t dst, size_t dstOff, ncclWindow_t src, size_t srcOff,
                      size_t bytes, uint32_t sig) {
    putAdd(coop, peer, dst, dstOff, src, srcOff, bytes, sig, 1);
  }

  template <class Coop>
  __device__ void putAdd(Coop coop, int peer, ncclWindow_t dst, size_t dstOff, ncclWindow_t src, size_t srcOff,
                         size_t bytes, uint32_t sig, uint64_t value) {
    // 16-byte copies: every put of the protocols is whole vectors at 16-byte offsets. A put that
    // is not stops here rather than move fewer bytes than GIN would.
    if ((bytes | dstOff | srcOff) % 16 != 0) __trap();
    const uint4* s = (const uint4*)ncclGetLocalPointer(src, srcOff);
    uint4* d = (uint4*)ncclGetLsaPointer(dst, dstOff, peer);
    coop.sync();  // the coop's stores to the source are complete (as GIN's put assumes)
    for (size_t i = coop.thread_rank(); i < bytes / 16; i += coop.size()) d[i] = s[i];
    // The signal must not overtake the data: every thread's stores are ordered before the
    // addition (release at system scope), as a GIN signal is visible only after its put.
    signalAdd(coop, peer, sig, value);
  }

  template <class Coop>
  __device__ void signalAdd(Coop coop, int peer, uint32_t sig, uint64_t value) {
    coop.sync();
    if (coop.thread_rank() == 0) {
      cuda::atomic_ref<uint64_t, cuda::thread_scope_system> w(*signalWord(sig, peer));
      w.fetch_add(value, cuda::memory_order_release);
    }
  }

  template <class Coop>
  __device__ void waitSignal(Coop coop, uint32_t sig, uint64_t least) {
    if (coop.thread_rank() == 0) {
      cuda::atomic_ref<uint64_t, cuda::thread_scope_system> s(*signalWord(sig, dc.lsaRank));
      while (int64_t(s.load(cuda::memory_order_acquire) - least) < 0) {
      }
    }
    coop.sync();
  }

  // Stores are issued and ordered by the time put returns: the sources are reusable.
  template <class Coop>
  __device__ void flush(Coop coop) {
    coop.sync();
  }

  template <class Coop>
  __device__ void barrier(Coop coop, cuda::memory_order order) {
    ncclLsaBarrierSession<Coop> bar{coop, dc, ncclTeamLsa(dc), dc.lsaBarrier, blockIdx.x};
    bar.sync(coop, order);
  }
};
