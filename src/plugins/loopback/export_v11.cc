// The NCCL 2.28.x entry points: ncclNetPlugin_v11 (the net NCCL requires before it looks for GIN
// in the same library; src/plugin/net.cc) and ncclGinPlugin_v11 of the PROXY kind (NCCL's proxy
// thread polls the GPU's descriptor queues and calls iput / iputSignal / test here).
#include "abi_v11.h"
#include "engine.h"
#include "log.h"
#include "net_socket.h"
#include "version.h"

#define GBL_EXPORT extern "C" __attribute__((visibility("default")))

namespace gbl {
namespace {

char kName[] = GINBENCH_LOOPBACK_NAME;

// ---- net v11 -------------------------------------------------------------------------------
// One host-only device. In one process every GPU pair has P2P, so NCCL never sets up its network
// transport and only init / devices / getProperties / finalize are called (the NIC has no PCI
// path, so it hangs off the first CPU and is never preferred). Between processes on other
// (virtual) nodes NCCL's host traffic goes through the data path of net_socket.cc.

Result netInit(void** ctx, uint64_t commId, NetCommConfigV11* /*config*/, DebugLogger logger,
               ProfilerCallback /*prof*/) {
  return instanceInit(ctx, commId, logger);
}

Result netDevices(int* ndev) {
  if (ndev == nullptr) return fail(kInvalidArgument, "devices: NULL pointer");
  *ndev = 1;
  return kSuccess;
}

template <typename Props>
void fillCommon(Props* p) {
  p->name = kName;
  p->pciPath = nullptr;
  p->guid = 0x6762'6c6f'6f70ull;  // "gbloop"
  p->regIsGlobal = 0;
  p->forceFlush = 0;
  p->speed = 400000;  // Mbps: a nominal 400G so NCCL's tuning sees a plausible NIC
  p->port = 1;
  p->latency = 0;
  p->maxComms = 1024 * 1024;
  p->netDeviceVersion = 0;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = 0;
  p->maxP2pBytes = kMaxNetSize;
  p->maxCollBytes = kMaxNetSize;
  p->maxMultiRequestSize = 1;
}

Result netGetProperties(int dev, NetPropertiesV11* props) {
  if (props == nullptr) return fail(kInvalidArgument, "getProperties: NULL pointer");
  if (dev != 0) return fail(kInvalidArgument, "getProperties: device %d does not exist (the plugin has one)", dev);
  *props = NetPropertiesV11{};
  fillCommon(props);
  props->ptrSupport = kPtrHost;
  props->maxRecvs = 1;
  props->netDeviceType = kNetDeviceHost;
  return kSuccess;
}

Result netListen(void*, int dev, void* handle, void** listenComm) { return net::listen(dev, handle, listenComm); }
Result netConnect(void*, int dev, void* handle, void** sendComm, NetDeviceHandle** /*sendDevComm: no offload*/) {
  return net::connect(dev, handle, sendComm);
}
Result netAccept(void* listenComm, void** recvComm, NetDeviceHandle** /*recvDevComm*/) {
  return net::accept(listenComm, recvComm);
}
Result netIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* /*phandle*/, void** request) {
  return net::isend(sendComm, data, size, tag, mhandle, request);
}
Result netIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** /*phandles*/,
                void** request) {
  return net::irecv(recvComm, n, data, sizes, tags, mhandles, request);
}
Result netFinalize(void* ctx) { return instanceFinalize(ctx); }

// ---- GIN v11 -------------------------------------------------------------------------------

Result ginInit(void** ctx, uint64_t commId, DebugLogger logger) { return instanceInit(ctx, commId, logger); }

Result ginGetProperties(int dev, NetPropertiesV11* props) {
  if (props == nullptr) return fail(kInvalidArgument, "getProperties: NULL pointer");
  if (dev != 0) return fail(kInvalidArgument, "getProperties: device %d does not exist (the plugin has one)", dev);
  *props = NetPropertiesV11{};
  fillCommon(props);
  // No DMA-BUF: NCCL then registers with regMrSym, which is all the plugin needs.
  props->ptrSupport = kPtrHost | kPtrCuda;
  props->maxRecvs = kGinMaxRecvs;  // NCCL's proxy queue depth per peer is 32 * maxRecvs
  props->netDeviceType = kNetDeviceGinProxy;
  return kSuccess;
}

Result ginListen(void* /*ctx*/, int dev, void* handle, void** listenComm) { return listen(dev, handle, listenComm); }

Result ginConnect(void* /*ctx: NULL for later communicators*/, void* handles[], int nranks, int rank, void* listenComm,
                  void** collComm) {
  return connect(handles, nranks, rank, listenComm, /*nContexts=*/1, collComm);
}

Result ginRegMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle,
                   void** ginHandle) {
  if (ginHandle == nullptr) return fail(kInvalidArgument, "regMrSym: NULL ginHandle pointer");
  *ginHandle = nullptr;
  Result r = regMrSym(collComm, data, size, type, mrFlags, mhandle);
  // The device-side handle is the host one: NCCL's proxy hands it back to iput (as its IB proxy).
  if (r == kSuccess) *ginHandle = *mhandle;
  return r;
}

Result ginIput(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff, void* dstMhandle,
               uint32_t rank, void** request) {
  const PutArgs a{0, srcOff, srcMhandle, size, dstOff, dstMhandle, rank};
  return put(collComm, a, request);
}

Result ginIputSignal(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                     void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle, uint64_t signalValue,
                     uint32_t signalOp, void** request) {
  const PutArgs a{0,  srcOff, srcMhandle, size, dstOff, dstMhandle, rank,
                  true, signalOff, signalMhandle, signalValue, signalOp};
  return put(collComm, a, request);
}

Result ginProgress(void* collComm) { return progress(collComm); }

}  // namespace
}  // namespace gbl

using namespace gbl;

GBL_EXPORT const NetTableV11 ncclNetPlugin_v11 = {
    GINBENCH_LOOPBACK_NAME,
    netInit,
    netDevices,
    netGetProperties,
    netListen,
    netConnect,
    netAccept,
    net::regMr,
    nullptr,  // regMrDmaBuf
    net::deregMr,
    netIsend,
    netIrecv,
    net::iflush,
    net::test,
    net::closeSend,
    net::closeRecv,
    net::closeListen,
    nullptr,  // getDeviceMr
    nullptr,  // irecvConsumed
    nullptr,  // makeVDevice
    netFinalize,
    nullptr,  // setNetAttr
};

GBL_EXPORT const GinTableV11 ncclGinPlugin_v11 = {
    GINBENCH_LOOPBACK_NAME,
    ginInit,
    netDevices,
    ginGetProperties,
    ginListen,
    ginConnect,
    nullptr,  // createContext: not used for PROXY (NCCL builds the context itself)
    ginRegMrSym,
    nullptr,  // regMrSymDmaBuf: no DMA-BUF advertised
    deregMrSym,
    nullptr,  // destroyContext
    closeColl,
    closeListen,
    ginIput,
    ginIputSignal,
    test,
    ginProgress,  // drives chaos holds; NCCL calls it every proxy pass
    nullptr,      // queryLastError: errors surface from the calls themselves
    netFinalize,
};
