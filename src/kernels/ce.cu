// Helpers for nvl-ce (-D 8): alltoall by the copy engines into peers' symmetric windows (NCCL's
// flat LSA address space), fenced by LSA barriers that run as one-CTA kernels.
#include "device_compat.cuh"

// Base address of every LSA peer's copy of `win`, for host-issued copies (NCCL 2.28 has no host
// getter for LSA pointers).
extern "C" __global__ void gb_lsa_pointers(ncclWindow_t win, int n, uint64_t* out) {
  for (int p = threadIdx.x; p < n; p += blockDim.x) out[p] = (uint64_t)ncclGetLsaPointer(win, 0, p);
}

// One LSA barrier across the team. Before the copies: every peer is inside this operation, so its
// earlier use of its receive buffer is over. After them: every peer's copies into us have
// completed (each peer arrives only once its own copies finished, in stream order).
extern "C" __global__ void gb_lsa_barrier(ncclDevComm dc) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dc, ncclTeamLsa(dc), dc.lsaBarrier, 0};
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}
