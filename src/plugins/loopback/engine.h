// The plugin's core, shared by the NCCL 2.28 GIN export (export_v11.cc) and the NCCL >= 2.30 RMA
// export (export_v14.cc). Every function validates its handles and arguments and answers a bad
// call with an NCCL error and one log line; none throws or aborts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi_common.h"

namespace gbl {

// maxRecvs the GIN/RMA properties advertise. NCCL's proxy sizes each peer's descriptor queue
// 32 * maxRecvs (gin_host_proxy.cc). When a queue is full, every GPU thread about to put spins
// on the consumer index, which lives in host memory without GDRCopy; hundreds of warps doing
// that slowed every CUDA call of the plugin 25-90x on H200 (EP LL, 128+ tokens: 0.5-1.8 ms per
// op instead of 20 us). 2048 entries per peer hold an LL dispatch of 256 tokens x top-8 to one
// peer, so the queues of ginbench's sweeps never fill.
constexpr int kGinMaxRecvs = 64;

// init(): reads the environment (config.h), remembers NCCL's logger.
Result instanceInit(void** ctx, uint64_t commId, DebugLogger logger);
Result instanceFinalize(void* ctx);

Result listen(int dev, void* handle, void** listenComm);
Result closeListen(void* listenComm);
// nContexts: 1 for GIN v11 (one connection per context), 0 for RMA v14 (createContext follows).
Result connect(void* handles[], int nranks, int rank, void* listenComm, int nContexts, void** collComm);
Result createContexts(void* collComm, int nContexts, void** contextSet);
Result destroyContexts(void* contextSet);
Result closeColl(void* collComm);

// Collective: every rank registers its windows in the same order; returns once all have.
Result regMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle);
Result deregMrSym(void* collComm, void* mhandle);

// Field order matters: the exports build it positionally (context, source, size, destination,
// rank, then the signal).
struct PutArgs {
  int context = 0;
  uint64_t srcOff = 0;
  void* srcMhandle = nullptr;
  size_t size = 0;
  uint64_t dstOff = 0;
  void* dstMhandle = nullptr;
  uint32_t rank = 0;
  // Signal (signalOp kSignalOpInc adds 1, kSignalOpAdd adds signalValue); no signal: signalMhandle
  // NULL and signalOp 0.
  bool withSignal = false;
  uint64_t signalOff = 0;
  void* signalMhandle = nullptr;
  uint64_t signalValue = 0;
  uint32_t signalOp = 0;
};

// `comm` is a CollComm (v11) or resolved from a ContextSet (v14) by the exports.
Result put(void* collComm, const PutArgs& args, void** request);
Result get(void* collComm, int context, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
           void* localMhandle, uint32_t rank, void** request);
Result flush(void* collComm, int context, uint32_t rank, void** request);
Result test(void* collComm, void* request, int* done);
Result progress(void* collComm);
Result lastError(void* collComm, bool* hasError);

// v14 passes its rmaCtx to the data path: the CollComm behind it, or null (logged) if invalid.
// The connection of a live rmaCtx; `context`, where given, is checked against the rmaCtx's and
// turned into the connection's number for it.
void* commOfContextSet(void* contextSet, int* context);

}  // namespace gbl
