// The net and GIN plugin tables of NCCL 2.28.x (ncclNet_v11_t, ncclGin_v11_t and
// ncclNetProperties_v11_t of src/include/plugin/net/net_v11.h at tag v2.28.9-1), declared here
// under our own names. Field order and types are the ABI: NCCL reads these tables by offset
// after dlsym("ncclNetPlugin_v11") / dlsym("ncclGinPlugin_v11") (src/plugin/net.cc,
// src/plugin/net/net_v11.cc). The static_asserts pin the layout on LP64.
#pragma once

#include <cstddef>

#include "abi_common.h"

namespace gbl {

constexpr int kNetMaxDevsPerNicV11 = 4;  // NCCL_NET_MAX_DEVS_PER_NIC in 2.28

struct NetVDevicePropsV11 {
  int ndevs;
  int devs[kNetMaxDevsPerNicV11];
};

struct NetCommConfigV11 {
  int trafficClass;
};

struct NetPropertiesV11 {
  char* name;
  char* pciPath;  // NULL: the NIC is attached to the first CPU, so NCCL never prefers the network
  uint64_t guid;
  int ptrSupport;  // kPtrHost | kPtrCuda | kPtrDmaBuf
  int regIsGlobal;
  int forceFlush;
  int speed;  // Mbps
  int port;
  float latency;
  int maxComms;
  int maxRecvs;  // GIN proxy queue depth per peer = kNetMaxRequests * maxRecvs
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  NetVDevicePropsV11 vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
};
static_assert(offsetof(NetPropertiesV11, ptrSupport) == 24, "net v11 properties layout");
static_assert(offsetof(NetPropertiesV11, netDeviceType) == 56, "net v11 properties layout");
static_assert(offsetof(NetPropertiesV11, vProps) == 64, "net v11 properties layout");
static_assert(offsetof(NetPropertiesV11, maxP2pBytes) == 88, "net v11 properties layout");
static_assert(sizeof(NetPropertiesV11) == 112, "net v11 properties layout");

struct NetCommAttrV11 {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
};

struct NetAttrV11 {
  NetCommAttrV11 sendCommAttr;
  NetCommAttrV11 recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
};

// ncclNet_v11_t
struct NetTableV11 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, NetCommConfigV11* config, DebugLogger logFunction,
                 ProfilerCallback profFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV11* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  Result (*connect)(void* ctx, int dev, void* handle, void** sendComm, NetDeviceHandle** sendDevComm);
  Result (*accept)(void* listenComm, void** recvComm, NetDeviceHandle** recvDevComm);
  Result (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  Result (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  Result (*deregMr)(void* comm, void* mhandle);
  Result (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  Result (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                  void** request);
  Result (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  Result (*test)(void* request, int* done, int* sizes);
  Result (*closeSend)(void* sendComm);
  Result (*closeRecv)(void* recvComm);
  Result (*closeListen)(void* listenComm);
  Result (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  Result (*irecvConsumed)(void* recvComm, int n, void* request);
  Result (*makeVDevice)(int* d, NetVDevicePropsV11* props);
  Result (*finalize)(void* ctx);
  Result (*setNetAttr)(void* ctx, NetAttrV11* netAttr);
};
static_assert(sizeof(NetTableV11) == 22 * sizeof(void*), "ncclNet_v11_t: name + 21 functions");
static_assert(offsetof(NetTableV11, test) == 13 * sizeof(void*), "ncclNet_v11_t layout");
static_assert(offsetof(NetTableV11, finalize) == 20 * sizeof(void*), "ncclNet_v11_t layout");

// ncclGin_v11_t
struct GinTableV11 {
  const char* name;
  Result (*init)(void** ctx, uint64_t commId, DebugLogger logFunction);
  Result (*devices)(int* ndev);
  Result (*getProperties)(int dev, NetPropertiesV11* props);
  Result (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  // ctx is comm->ginContext, NULL for every communicator after the first (src/plugin/net.cc).
  Result (*connect)(void* ctx, void* handles[], int nranks, int rank, void* listenComm, void** collComm);
  Result (*createContext)(void* collComm, int nSignals, int nCounters, void** ginCtx, NetDeviceHandle** devHandle);
  Result (*regMrSym)(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle,
                     void** ginHandle);
  Result (*regMrSymDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                           uint64_t mrFlags, void** mhandle, void** ginHandle);
  Result (*deregMrSym)(void* collComm, void* mhandle);
  Result (*destroyContext)(void* ginCtx);
  Result (*closeColl)(void* collComm);
  Result (*closeListen)(void* listenComm);
  Result (*iput)(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff, void* dstMhandle,
                 uint32_t rank, void** request);
  Result (*iputSignal)(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                       void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle, uint64_t signalValue,
                       uint32_t signalOp, void** request);
  Result (*test)(void* collComm, void* request, int* done);
  Result (*ginProgress)(void* collComm);
  Result (*queryLastError)(void* ginCtx, bool* hasError);
  Result (*finalize)(void* ctx);
};
static_assert(sizeof(GinTableV11) == 19 * sizeof(void*), "ncclGin_v11_t: name + 18 functions");
static_assert(offsetof(GinTableV11, iput) == 13 * sizeof(void*), "ncclGin_v11_t layout");
static_assert(offsetof(GinTableV11, finalize) == 18 * sizeof(void*), "ncclGin_v11_t layout");

}  // namespace gbl
