#include "cuda_api.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "forever.h"
#include "log.h"

namespace gbl {
namespace cu {
namespace {

std::once_flag gOnce;
Api gApi;
Result gLoadResult = kInternalError;
std::atomic<bool> gLoaded{false};  // gLoadResult is kSuccess, readable outside the call_once

template <typename F>
bool bind(void* lib, F* slot, const char* name, const char* fallback = nullptr) {
  void* p = dlsym(lib, name);
  if (p == nullptr && fallback != nullptr) p = dlsym(lib, fallback);
  *slot = reinterpret_cast<F>(p);
  return p != nullptr;
}

void loadOnce() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    gLoadResult = fail(kSystemError, "cannot load the CUDA driver (libcuda.so.1): %s", dlerror());
    return;
  }
  bool ok = true;
  const char* missing = nullptr;
  auto need = [&](bool found, const char* name) {
    if (!found && ok) {
      ok = false;
      missing = name;
    }
  };
  need(bind(lib, &gApi.init, "cuInit"), "cuInit");
  need(bind(lib, &gApi.getErrorString, "cuGetErrorString"), "cuGetErrorString");
  need(bind(lib, &gApi.deviceGet, "cuDeviceGet"), "cuDeviceGet");
  need(bind(lib, &gApi.deviceGetAttribute, "cuDeviceGetAttribute"), "cuDeviceGetAttribute");
  need(bind(lib, &gApi.primaryCtxRetain, "cuDevicePrimaryCtxRetain"), "cuDevicePrimaryCtxRetain");
  need(bind(lib, &gApi.ctxGetCurrent, "cuCtxGetCurrent"), "cuCtxGetCurrent");
  need(bind(lib, &gApi.ctxSetCurrent, "cuCtxSetCurrent"), "cuCtxSetCurrent");
  need(bind(lib, &gApi.ctxEnablePeerAccess, "cuCtxEnablePeerAccess"), "cuCtxEnablePeerAccess");
  need(bind(lib, &gApi.pointerGetAttribute, "cuPointerGetAttribute"), "cuPointerGetAttribute");
  need(bind(lib, &gApi.memGetAddressRange, "cuMemGetAddressRange_v2"), "cuMemGetAddressRange_v2");
  need(bind(lib, &gApi.memSetAccess, "cuMemSetAccess"), "cuMemSetAccess");
  need(bind(lib, &gApi.memHostAlloc, "cuMemHostAlloc"), "cuMemHostAlloc");
  need(bind(lib, &gApi.memFreeHost, "cuMemFreeHost"), "cuMemFreeHost");
  need(bind(lib, &gApi.streamCreate, "cuStreamCreate"), "cuStreamCreate");
  need(bind(lib, &gApi.streamDestroy, "cuStreamDestroy_v2"), "cuStreamDestroy_v2");
  need(bind(lib, &gApi.streamWaitEvent, "cuStreamWaitEvent"), "cuStreamWaitEvent");
  need(bind(lib, &gApi.eventCreate, "cuEventCreate"), "cuEventCreate");
  need(bind(lib, &gApi.eventRecord, "cuEventRecord"), "cuEventRecord");
  need(bind(lib, &gApi.eventQuery, "cuEventQuery"), "cuEventQuery");
  need(bind(lib, &gApi.eventDestroy, "cuEventDestroy_v2"), "cuEventDestroy_v2");
  need(bind(lib, &gApi.memcpyAsync, "cuMemcpyAsync"), "cuMemcpyAsync");
  need(bind(lib, &gApi.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"), "cuMemcpyDtoHAsync_v2");
  need(bind(lib, &gApi.streamWriteValue64, "cuStreamWriteValue64_v2", "cuStreamWriteValue64"),
       "cuStreamWriteValue64_v2");
  need(bind(lib, &gApi.ctxGetDevice, "cuCtxGetDevice"), "cuCtxGetDevice");
  need(bind(lib, &gApi.memRetainAllocationHandle, "cuMemRetainAllocationHandle"), "cuMemRetainAllocationHandle");
  need(bind(lib, &gApi.memExportToShareableHandle, "cuMemExportToShareableHandle"), "cuMemExportToShareableHandle");
  need(bind(lib, &gApi.memImportFromShareableHandle, "cuMemImportFromShareableHandle"),
       "cuMemImportFromShareableHandle");
  need(bind(lib, &gApi.memGetAllocationPropertiesFromHandle, "cuMemGetAllocationPropertiesFromHandle"),
       "cuMemGetAllocationPropertiesFromHandle");
  need(bind(lib, &gApi.memGetAllocationGranularity, "cuMemGetAllocationGranularity"),
       "cuMemGetAllocationGranularity");
  need(bind(lib, &gApi.memAddressReserve, "cuMemAddressReserve"), "cuMemAddressReserve");
  need(bind(lib, &gApi.memAddressFree, "cuMemAddressFree"), "cuMemAddressFree");
  need(bind(lib, &gApi.memMap, "cuMemMap"), "cuMemMap");
  need(bind(lib, &gApi.memUnmap, "cuMemUnmap"), "cuMemUnmap");
  need(bind(lib, &gApi.memRelease, "cuMemRelease"), "cuMemRelease");
  if (!ok) {
    gLoadResult = fail(kSystemError, "the CUDA driver lacks %s (driver too old?)", missing);
    return;
  }
  Status s = gApi.init(0);
  if (s != kOk) {
    gLoadResult = fail(kUnhandledCudaError, "cuInit failed (%d): no usable GPU driver", s);
    return;
  }
  gLoadResult = kSuccess;
  gLoaded.store(true, std::memory_order_release);
}

std::mutex gCtxMutex;
Forever<std::vector<Context>> gPrimary;  // by device ordinal

}  // namespace

Result load(const Api** out) {
  std::call_once(gOnce, loadOnce);
  if (gLoadResult != kSuccess) return gLoadResult;
  *out = &gApi;
  return kSuccess;
}

const Api* loaded() { return gLoaded.load(std::memory_order_acquire) ? &gApi : nullptr; }

Result check(Status status, const char* what) {
  if (status == kOk) return kSuccess;
  const char* text = nullptr;
  if (gApi.getErrorString == nullptr || gApi.getErrorString(status, &text) != kOk || text == nullptr) {
    text = "unknown error";
  }
  return fail(kUnhandledCudaError, "%s failed: %s (%d)", what, text, status);
}

Result makeCurrent(Context ctx) {
  static thread_local Context current = nullptr;
  if (current == ctx) {
    // Someone else (NCCL, the application) may have switched it since; verify cheaply.
    Context now = nullptr;
    if (gApi.ctxGetCurrent(&now) == kOk && now == ctx) return kSuccess;
  }
  Result r = check(gApi.ctxSetCurrent(ctx), "cuCtxSetCurrent");
  current = r == kSuccess ? ctx : nullptr;
  return r;
}

Result primaryContext(int device, Context* out) {
  const Api* api = nullptr;
  if (Result r = load(&api); r != kSuccess) return r;
  std::lock_guard<std::mutex> lock(gCtxMutex);
  if (device < 0) return fail(kInternalError, "no CUDA device for a device-memory operation");
  if (static_cast<size_t>(device) >= gPrimary->size()) gPrimary->resize(device + 1, nullptr);
  if ((*gPrimary)[device] == nullptr) {
    Device dev = 0;
    if (Result r = check(api->deviceGet(&dev, device), "cuDeviceGet"); r != kSuccess) return r;
    Context ctx = nullptr;
    // Retained for the life of the process: NCCL's own contexts are the primary ones, and a
    // release here could tear down a context the application still uses.
    if (Result r = check(api->primaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain"); r != kSuccess) return r;
    (*gPrimary)[device] = ctx;
  }
  *out = (*gPrimary)[device];
  return kSuccess;
}

}  // namespace cu
}  // namespace gbl
