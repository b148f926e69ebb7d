// The one place for device-side differences between NCCL device-API generations. Which
// generation the headers are is decided once, in build/nccl.rs, and arrives as GB_NCCL_* = 0 / 1
// (the same names as the Rust cfgs). The LSA calls used here (ncclLsaBarrierSession,
// ncclGetLsaPointer, ncclGetLocalPointer) are the same in every generation.
#pragma once
#include <nccl.h>
#include <nccl_device.h>
#include <stdint.h>

#include "config.h"
#include "grid.cuh"

#ifndef GB_NCCL_CFGS
#error "compile through build.rs, which defines GB_NCCL_* from the NCCL version table"
#endif

// GIN remote actions "increment (add to) the peer's signal once the bundled put has landed". 2.30.5 split it
// into strong (also orders earlier puts) and weak; the protocol counts one signal per put, so weak
// is enough.
#if GB_NCCL_GIN_WEAK_SIGNALS
using GbGinSignalInc = ncclGin_WeakSignalInc;
using GbGinSignalAdd = ncclGin_WeakSignalAdd;
#else
using GbGinSignalInc = ncclGin_SignalInc;
using GbGinSignalAdd = ncclGin_SignalAdd;
#endif
// Barrier fence "no drain": an enum class with only Relaxed in 2.28, a bit set (None = Relaxed) later.
#define GB_GIN_FENCE_NONE ncclGinFenceLevel::Relaxed

// NCCL 2.28 hands a new device communicator GIN signal ids that an earlier one may have left
// non-zero (ncclDevCommDestroy frees the ids without zeroing them), while the new communicator's
// GIN barrier epochs, in its freshly zeroed resource buffer, count from zero: its first barriers
// would pass on stale counts, before the peers arrive. gb_rebase_gin_barriers starts the epoch of
// each of the first `n` rail GIN barriers, in every context, at its signal's current value,
// through the barrier session's own constructor (which finds the epoch) and destructor (which
// stores it). Run once after ncclDevCommCreate, before any peer can signal (a host barrier after).
// 2.30 reworked GIN barriers (a signal per peer, no epoch); none of that generation runs on the
// GPU hosts here, so there it does nothing.
__device__ inline void gb_rebase_gin_barriers(ncclDevComm const& dc, int n) {
#if !GB_NCCL_GIN_BARRIER_PER_PEER
  for (int ctx = 0; ctx < dc.ginContextCount; ctx++) {
    ncclGin gin(dc, ctx);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      ncclGinBarrierSession<ncclCoopThread> bar{ncclCoopThread(), gin, ncclTeamTagRail(), uint32_t(i)};
      bar.epoch = uint32_t(gin.readSignal(bar.signal));
    }
  }
#endif
}

// Per-CTA launch epochs kept in device memory, so a captured CUDA graph replays correctly:
// epochs[blockIdx.x] holds the CTA's last launch; this launch is that + 1. Every rank must keep
// the same grid for a given array.
__device__ inline uint32_t gb_begin_epoch(const uint32_t* epochs) {
  __shared__ uint32_t s_epoch;
  if (threadIdx.x == 0) s_epoch = epochs[blockIdx.x] + 1;
  __syncthreads();
  return s_epoch;
}
__device__ inline void gb_end_epoch(uint32_t* epochs, uint32_t epoch) {
  if (threadIdx.x == 0) epochs[blockIdx.x] = epoch;
}

// 16-byte stores and loads at system scope, relaxed: a 16-byte access is delivered whole over
// NVLink, which the flag-in-data protocol relies on.
__device__ __forceinline__ void gb_st_relaxed_sys_v4(uint4* p, uint4 v) {
  asm volatile("st.relaxed.sys.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 gb_ld_relaxed_sys_v4(const uint4* p) {
  uint4 v;
  asm volatile("ld.relaxed.sys.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
