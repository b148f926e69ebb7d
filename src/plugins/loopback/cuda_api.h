// The slice of the CUDA driver API the device mover needs, loaded with dlopen("libcuda.so.1") on
// first use: the library has no link-time dependency on CUDA, so it loads, and its contract
// tests run, on machines without a GPU. The declarations mirror cuda.h (CUDA 12/13) under our own
// names; the _v2 entry points are the ones cuda.h maps the plain names to.
#pragma once

#include <cstddef>
#include <cstdint>

#include "abi_common.h"

namespace gbl {
namespace cu {

using Status = int;  // CUresult
using Device = int;  // CUdevice
using DevicePtr = unsigned long long;  // CUdeviceptr
using Context = struct CtxOpaque*;     // CUcontext
using Stream = struct StreamOpaque*;   // CUstream
using Event = struct EventOpaque*;     // CUevent

constexpr Status kOk = 0;                         // CUDA_SUCCESS
constexpr Status kNotReady = 600;                 // CUDA_ERROR_NOT_READY
constexpr Status kPeerAccessAlreadyEnabled = 704; // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
constexpr unsigned kStreamNonBlocking = 0x1;      // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDisableTiming = 0x2;     // CU_EVENT_DISABLE_TIMING
constexpr int kPointerAttrDeviceOrdinal = 9;      // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr int kDevAttrCanUse64BitStreamMemOps = 122;  // CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS
constexpr int kMemLocationTypeDevice = 1;         // CU_MEM_LOCATION_TYPE_DEVICE
constexpr int kMemAccessReadWrite = 3;            // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
constexpr int kMemHandleTypePosixFd = 1;          // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
constexpr int kMemAllocGranularityMinimum = 0;    // CU_MEM_ALLOC_GRANULARITY_MINIMUM
using MemHandle = unsigned long long;             // CUmemGenericAllocationHandle

struct MemLocation {  // CUmemLocation
  int type;
  int id;
};
struct MemAccessDesc {  // CUmemAccessDesc
  MemLocation location;
  int flags;
};
struct MemAllocationProp {  // CUmemAllocationProp
  int type;
  int requestedHandleTypes;
  MemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

struct Api {
  Status (*init)(unsigned flags);
  Status (*getErrorString)(Status, const char**);
  Status (*deviceGet)(Device*, int ordinal);
  Status (*deviceGetAttribute)(int*, int attribute, Device);
  Status (*primaryCtxRetain)(Context*, Device);
  Status (*ctxGetCurrent)(Context*);
  Status (*ctxSetCurrent)(Context);
  Status (*ctxEnablePeerAccess)(Context peer, unsigned flags);
  Status (*pointerGetAttribute)(void* data, int attribute, DevicePtr ptr);
  Status (*memGetAddressRange)(DevicePtr* base, size_t* size, DevicePtr ptr);
  Status (*memSetAccess)(DevicePtr ptr, size_t size, const MemAccessDesc* desc, size_t count);
  Status (*memHostAlloc)(void** p, size_t bytes, unsigned flags);
  Status (*memFreeHost)(void* p);
  Status (*streamCreate)(Stream*, unsigned flags);
  Status (*streamDestroy)(Stream);
  Status (*streamWaitEvent)(Stream, Event, unsigned flags);
  Status (*eventCreate)(Event*, unsigned flags);
  Status (*eventRecord)(Event, Stream);
  Status (*eventQuery)(Event);
  Status (*eventDestroy)(Event);
  Status (*memcpyAsync)(DevicePtr dst, DevicePtr src, size_t bytes, Stream);
  Status (*memcpyDtoHAsync)(void* dst, DevicePtr src, size_t bytes, Stream);
  Status (*streamWriteValue64)(Stream, DevicePtr addr, uint64_t value, unsigned flags);
  // Windows shared between processes (window_share.cc).
  Status (*ctxGetDevice)(Device*);
  Status (*memRetainAllocationHandle)(MemHandle*, void* addr);
  Status (*memExportToShareableHandle)(void* shareable, MemHandle, int handleType, unsigned long long flags);
  Status (*memImportFromShareableHandle)(MemHandle*, void* osHandle, int handleType);
  Status (*memGetAllocationPropertiesFromHandle)(MemAllocationProp*, MemHandle);
  Status (*memGetAllocationGranularity)(size_t*, const MemAllocationProp*, int option);
  Status (*memAddressReserve)(DevicePtr*, size_t size, size_t alignment, DevicePtr addr, unsigned long long flags);
  Status (*memAddressFree)(DevicePtr, size_t);
  Status (*memMap)(DevicePtr, size_t size, size_t offset, MemHandle, unsigned long long flags);
  Status (*memUnmap)(DevicePtr, size_t);
  Status (*memRelease)(MemHandle);
};

// The driver API, loaded and cuInit'ed once per process. Fails (with one log line) where no
// driver is installed.
Result load(const Api** out);

// The driver API if an earlier load() succeeded, else null; never loads it.
const Api* loaded();

// "cuXxx failed: <driver's text> (<code>)" as an NCCL error, logged once.
Result check(Status status, const char* what);

// Makes `ctx` current on the calling thread if it is not already: NCCL's GIN progress thread
// never sets a device, so every entry point that touches CUDA does this first.
Result makeCurrent(Context ctx);

// The primary context of `device`, retained once per process.
Result primaryContext(int device, Context* out);

// Saves the calling thread's current context and puts it back: setup and teardown calls run on
// NCCL's (or the application's) threads, whose context must not change under them. Without an
// api (the default: the driver if loaded()), where no driver was loaded, it does nothing: no
// plugin stream exists then to change the context.
class ScopedContext {
 public:
  explicit ScopedContext(const Api* api = loaded()) : api_(api) {
    ok_ = api_ != nullptr && api_->ctxGetCurrent(&saved_) == kOk;
  }
  ~ScopedContext() {
    if (ok_) api_->ctxSetCurrent(saved_);
  }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  const Api* api_;
  Context saved_ = nullptr;
  bool ok_ = false;
};

}  // namespace cu
}  // namespace gbl
