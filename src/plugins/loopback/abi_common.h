// Declarations shared by every NCCL plugin interface this library exports (net v11, GIN v11 for
// NCCL 2.28.x; RMA v14 for NCCL >= 2.30). NCCL's plugin headers are not part of the NCCL wheel,
// so the plugin declares what it needs itself; the values below are those of NCCL's
// src/include/nccl.h (ncclResult_t), src/include/nccl_common.h (logger), and
// src/include/plugin/nccl_net.h / src/include/nccl_device/net_device.h (flags, device types),
// read at tags v2.28.9-1 and v2.30.7-1, where they agree.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gbl {

// ncclResult_t: an int-sized C enum on NCCL's side; the values are part of NCCL's public ABI.
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};
static_assert(sizeof(Result) == 4, "ncclResult_t is an int-sized enum");

// ncclDebugLogLevel values used here (nccl_common.h).
enum LogLevel : int { kLogNone = 0, kLogVersion = 1, kLogWarn = 2, kLogInfo = 3, kLogAbort = 4, kLogTrace = 5 };
// ncclDebugLogSubSys: the NET subsystem, so NCCL_DEBUG_SUBSYS=NET shows our lines.
constexpr unsigned long kLogSubsysNet = 0x10;
constexpr unsigned long kLogSubsysInit = 0x1;

// ncclDebugLogger_t and ncclProfilerCallback_t (nccl_common.h).
typedef void (*DebugLogger)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
typedef Result (*ProfilerCallback)(void** eHandle, int type, void* pHandle, int64_t pluginId, void* extData);

// nccl_net.h
constexpr int kNetHandleMaxSize = 128;  // NCCL_NET_HANDLE_MAXSIZE: bytes NCCL allgathers per rank
constexpr int kPtrHost = 0x1;           // NCCL_PTR_HOST
constexpr int kPtrCuda = 0x2;           // NCCL_PTR_CUDA
constexpr int kPtrDmaBuf = 0x4;         // NCCL_PTR_DMABUF (never advertised: no DMA-BUF here)
constexpr uint64_t kMrFlagForceSo = 1u << 0;            // NCCL_NET_MR_FLAG_FORCE_SO (signal arrays)
constexpr uint64_t kMrFlagSignalNeverReset = 1u << 1;   // NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET (>= 2.30)
constexpr uint32_t kSignalOpInc = 0x1;                  // NCCL_NET_SIGNAL_OP_INC
constexpr uint32_t kSignalOpAdd = 0x2;                  // NCCL_NET_SIGNAL_OP_ADD
constexpr int kNetMaxRequests = 32;                     // NCCL_NET_MAX_REQUESTS
constexpr size_t kMaxNetSize = 1024ul * 1024 * 1024;    // MAX_NET_SIZE

// ncclNetDeviceType (nccl_device/net_device.h): HOST for the net, GIN_PROXY for GIN / RMA.
enum NetDeviceType : int {
  kNetDeviceHost = 0,
  kNetDeviceUnpack = 1,
  kNetDeviceGinProxy = 2,
  kNetDeviceGinGdaki = 3,
};
static_assert(sizeof(NetDeviceType) == 4, "ncclNetDeviceType is an int-sized enum");

// ncclNetDeviceHandle_v7_t .. _v11_t (identical): only appears in signatures the plugin answers
// with NULL or an error (device offload is not offered).
struct NetDeviceHandle {
  NetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};

}  // namespace gbl
