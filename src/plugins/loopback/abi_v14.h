// The RMA plugin table NCCL >= 2.30 loads for its own GIN proxy (ncclRma_v14_t,
// ncclRmaConfig_v14_t of src/include/plugin/rma/rma_v14.h, and ncclNetProperties_v12_t of
// src/include/plugin/net/net_v12.h), declared here under our own names. Read at tag v2.30.7-1;
// the v14 table is unchanged on the 2.31 development branch, and 2.32.3 still accepts
// ncclRmaPlugin_v14. NCCL finds it with dlsym("ncclRmaPlugin_v14") in the library named by
// NCCL_RMA_PLUGIN, else in the GIN or net plugin library (src/plugin/rma.cc,
// src/plugin/rma/rma_v14.cc).
#pragma once

#include <cstddef>

#include "abi_common.h"

namespace gbl {

constexpr int kNetMaxDevsPerNicV12 = 8;  // NCCL_NET_MAX_DEVS_PER_NIC_V12

struct NetVDevicePropsV12 {
  int ndevs;
  int devs[kNetMaxDevsPerNicV12];
};

struct NetPropertiesV12 {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  NetDeviceType netDeviceType;  // kNetDeviceGinProxy: NCCL's GIN proxy takes the type from here
  int netDeviceVersion;
  NetVDevicePropsV12 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
};
static_assert(offsetof(NetPropertiesV12, vProps) == 64, "net v12 properties layout");
static_assert(offsetof(NetPropertiesV12, maxP2pBytes) == 104, "net v12 properties layout");
static_assert(offsetof(NetPropertiesV12, railId) == 124, "net v12 properties layout");
static_assert(sizeof(NetPropertiesV12) == 128, "net v12 properties layout");

// ncclRmaConfig_v14_t: what createContext is asked for.
struct RmaConfigV14 {
  int nContexts;
  int trafficClass;
  int rankStride;  // FULL (1) vs RAIL connectivity; every rank reaches every rank here
};

// ncclRma_v14_t
struct RmaTableV14 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, DebugLogger logFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV12* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  Result (*connect)(void* ctx, void* handles[], int nranks, int rank, void* listenComm, void** collComm);
  Result (*createContext)(void* collComm, RmaConfigV14* config, void** rmaCtx);
  // NCCL uses the returned mhandle as the device-side window handle too (gin_host_proxy.cc).
  Result (*regMrSym)(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle);
  Result (*regMrSymDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                           uint64_t mrFlags, void** mhandle);
  Result (*deregMrSym)(void* collComm, void* mhandle);
  Result (*destroyContext)(void* rmaCtx);
  Result (*closeColl)(void* collComm);
  Result (*closeListen)(void* listenComm);
  Result (*iput)(void* rmaCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                 void* dstMhandle, uint32_t rank, void** request);
  // Signal-only and VA signals come with size 0 and NULL data handles.
  Result (*iputSignal)(void* rmaCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                       void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle, uint64_t signalValue,
                       uint32_t signalOp, bool isStrongSignal, void** request);
  Result (*iget)(void* rmaCtx, int context, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
                 void* localMhandle, uint32_t rank, void** request);
  Result (*iflush)(void* rmaCtx, int context, void* mhandle, uint32_t rank, void** request);
  // NCCL passes the collComm here, not the rmaCtx (gin_host_proxy.cc, proxyGinPollCompletions).
  Result (*test)(void* collComm, void* request, int* done);
  Result (*rmaProgress)(void* rmaCtx);
  Result (*queryLastError)(void* rmaCtx, bool* hasError);
  Result (*finalize)(void* ctx);
};
static_assert(sizeof(RmaTableV14) == 21 * sizeof(void*), "ncclRma_v14_t: name + 20 functions");
static_assert(offsetof(RmaTableV14, iput) == 13 * sizeof(void*), "ncclRma_v14_t layout");
static_assert(offsetof(RmaTableV14, test) == 17 * sizeof(void*), "ncclRma_v14_t layout");

}  // namespace gbl
