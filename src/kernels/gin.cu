// Alltoall through GIN (-D 3 gin, -D 4 hybrid) and the same protocols on emulated GIN over NVLink
// (-D 9 gin-emu, -D 10 hybrid-emu, with virtual nodes). The protocol is written once over a
// transport (gin_net.cuh).
//
// Each CTA b takes slice b of every block and sends it to every peer with signal b, so large
// messages spread over CTAs (and GIN contexts: CTA b uses context b % contexts). The receiving
// CTA b waits until signal b has grown by one per network peer. Signals only grow; each launch
// reads the value before the entry barrier, which no peer passes before this rank arrives.
#include "gin_net.cuh"

template <bool HYBRID, class Net>
__device__ void a2a(Net& net, Topo t, ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff,
                    size_t bytes) {
  const uint32_t sig = blockIdx.x;
  const uint64_t v0 = net.readSignal(sig);
  net.barrier(ncclCoopCta(), cuda::memory_order_acquire);

  const size_t vecs = bytes / 16, per = (vecs + gridDim.x - 1) / gridDim.x;
  const size_t lo = min(vecs, blockIdx.x * per), hi = min(vecs, lo + per);
  const size_t off = lo * 16, len = (hi - lo) * 16;
  int netPeers = 0;
  for (int i = 0; i < t.nRanks; i++) {
    const int p = (t.rank + 1 + i + blockIdx.x) % t.nRanks;  // CTAs start at different peers
    const size_t dst = recvoff + size_t(t.rank) * bytes + off, src = sendoff + size_t(p) * bytes + off;
    if (HYBRID && t.inNode(p)) {
      const uint4* s = (const uint4*)ncclGetLocalPointer(sendwin, src);
      uint4* d = (uint4*)ncclGetLsaPointer(recvwin, dst, p - t.lsaBase);
      for (size_t k = threadIdx.x; k < len / 16; k += blockDim.x) d[k] = s[k];
    } else {
      netPeers++;
      if (len > 0) net.put(ncclCoopCta(), p, recvwin, dst, sendwin, src, len, sig);
    }
  }
  // Every peer cut its blocks the same way, so this CTA's slice came with one signal per network
  // peer (none if the slice is empty).
  net.waitSignal(ncclCoopCta(), sig, v0 + (len > 0 ? netPeers : 0));
  net.flush(ncclCoopCta());
  // Release: our LSA stores into node peers are visible before they leave the barrier.
  net.barrier(ncclCoopCta(), cuda::memory_order_release);
}

// Real GIN. gin: every peer through the network (same-node peers too, by NIC loopback).
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_gin(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
           ncclDevComm dc) {
  GinNet net(dc, blockIdx.x % dc.ginContextCount);
  a2a<false>(net, Topo::lsaNodes(dc), sendwin, sendoff, recvwin, recvoff, bytes);
}

// Real hybrid: NVLink stores inside the LSA team (the node), GIN across nodes.
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_hybrid(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
              ncclDevComm dc) {
  GinNet net(dc, blockIdx.x % dc.ginContextCount);
  a2a<true>(net, Topo::lsaNodes(dc), sendwin, sendoff, recvwin, recvoff, bytes);
}

// Setup of the real kinds: the world barrier's GIN part must count from its signals' values
// (device_compat.cuh, gb_rebase_gin_barriers).
extern "C" __global__ void gb_gin_setup(ncclDevComm dc, int barriers) { gb_rebase_gin_barriers(dc, barriers); }

// Emulated: `nodeSize` ranks per virtual node, GIN emulated over NVLink between virtual nodes.
extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_gin_emu(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
               ncclWindow_t sigwin, int nodeSize, ncclDevComm dc) {
  EmuNet net(dc, sigwin);
  a2a<false>(net, Topo::virtualNodes(dc, nodeSize), sendwin, sendoff, recvwin, recvoff, bytes);
}

extern "C" __global__ void __launch_bounds__(GB_THREADS)
    gb_hybrid_emu(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin, size_t recvoff, size_t bytes,
                  ncclWindow_t sigwin, int nodeSize, ncclDevComm dc) {
  EmuNet net(dc, sigwin);
  a2a<true>(net, Topo::virtualNodes(dc, nodeSize), sendwin, sendoff, recvwin, recvoff, bytes);
}
