// The NCCL >= 2.30 entry point: ncclRmaPlugin_v14. From 2.30, NCCL skips external GIN plugins of
// the PROXY kind and runs its own GIN proxy over an RMA plugin (src/plugin/gin.cc,
// src/gin/gin_host_proxy.cc); this is the same core behind that table. Differences from v11:
// one connection carries nContexts contexts (createContext), ops name their context, the
// rmaCtx (not the collComm) is passed to the data path, and there are get and flush.
#include "abi_v14.h"
#include "engine.h"
#include "log.h"
#include "version.h"

#define GBL_EXPORT extern "C" __attribute__((visibility("default")))

namespace gbl {
namespace {

char kName[] = GINBENCH_LOOPBACK_NAME;

Result rmaInit(void** ctx, uint64_t commId, DebugLogger logger) { return instanceInit(ctx, commId, logger); }

Result rmaDevices(int* ndev) {
  if (ndev == nullptr) return fail(kInvalidArgument, "devices: NULL pointer");
  *ndev = 1;
  return kSuccess;
}

Result rmaGetProperties(int dev, NetPropertiesV12* p) {
  if (p == nullptr) return fail(kInvalidArgument, "getProperties: NULL pointer");
  if (dev != 0) return fail(kInvalidArgument, "getProperties: device %d does not exist (the plugin has one)", dev);
  *p = NetPropertiesV12{};
  p->name = kName;
  p->pciPath = nullptr;
  p->guid = 0x6762'6c6f'6f70ull;
  p->ptrSupport = kPtrHost | kPtrCuda;  // no DMA-BUF: registration goes through regMrSym
  p->speed = 400000;
  p->port = 1;
  p->maxComms = 1024 * 1024;
  p->maxRecvs = kGinMaxRecvs;  // NCCL's proxy queue depth per peer is 32 * maxRecvs
  p->netDeviceType = kNetDeviceGinProxy;  // NCCL's GIN proxy reports this as the GIN type
  p->vProps.ndevs = 1;
  p->maxP2pBytes = kMaxNetSize;
  p->maxCollBytes = kMaxNetSize;
  p->maxMultiRequestSize = 1;
  p->railId = 0;
  p->planeId = 0;
  return kSuccess;
}

Result rmaListen(void* /*ctx*/, int dev, void* handle, void** listenComm) { return listen(dev, handle, listenComm); }

Result rmaConnect(void* /*ctx*/, void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  return connect(handles, nranks, rank, listenComm, /*nContexts=*/0, collComm);
}

Result rmaCreateContext(void* collComm, RmaConfigV14* config, void** rmaCtx) {
  if (config == nullptr) return fail(kInvalidArgument, "createContext: NULL config");
  return createContexts(collComm, config->nContexts, rmaCtx);
}

Result rmaIput(void* rmaCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
               void* dstMhandle, uint32_t rank, void** request) {
  void* comm = commOfContextSet(rmaCtx, &context);
  if (comm == nullptr) return kInvalidArgument;
  const PutArgs a{context, srcOff, srcMhandle, size, dstOff, dstMhandle, rank};
  return put(comm, a, request);
}

// isStrongSignal: weak signals promise less (only their own put); every signal here is strong.
Result rmaIputSignal(void* rmaCtx, int context, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                     void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle, uint64_t signalValue,
                     uint32_t signalOp, bool /*isStrongSignal*/, void** request) {
  void* comm = commOfContextSet(rmaCtx, &context);
  if (comm == nullptr) return kInvalidArgument;
  const PutArgs a{context,  srcOff, srcMhandle, size, dstOff, dstMhandle, rank,
                  true, signalOff, signalMhandle, signalValue, signalOp};
  return put(comm, a, request);
}

Result rmaIget(void* rmaCtx, int context, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
               void* localMhandle, uint32_t rank, void** request) {
  void* comm = commOfContextSet(rmaCtx, &context);
  if (comm == nullptr) return kInvalidArgument;
  return get(comm, context, remoteOff, remoteMhandle, size, localOff, localMhandle, rank, request);
}

Result rmaIflush(void* rmaCtx, int context, void* /*mhandle*/, uint32_t rank, void** request) {
  void* comm = commOfContextSet(rmaCtx, &context);
  if (comm == nullptr) return kInvalidArgument;
  return flush(comm, context, rank, request);
}

Result rmaProgress(void* rmaCtx) {
  void* comm = commOfContextSet(rmaCtx, nullptr);
  if (comm == nullptr) return kInvalidArgument;
  return progress(comm);
}

Result rmaQueryLastError(void* rmaCtx, bool* hasError) {
  void* comm = commOfContextSet(rmaCtx, nullptr);
  if (comm == nullptr) return kInvalidArgument;
  return lastError(comm, hasError);
}

}  // namespace
}  // namespace gbl

using namespace gbl;

GBL_EXPORT const RmaTableV14 ncclRmaPlugin_v14 = {
    GINBENCH_LOOPBACK_NAME,
    rmaInit,
    rmaDevices,
    rmaGetProperties,
    rmaListen,
    rmaConnect,
    rmaCreateContext,
    regMrSym,
    nullptr,  // regMrSymDmaBuf: no DMA-BUF advertised
    deregMrSym,
    destroyContexts,
    closeColl,
    closeListen,
    rmaIput,
    rmaIputSignal,
    rmaIget,
    rmaIflush,
    test,
    rmaProgress,
    rmaQueryLastError,
    instanceFinalize,
};
