#include "window_share.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mutex>
#include <vector>

#include "cuda_api.h"
#include "forever.h"
#include "log.h"

namespace gbl {
namespace {

struct SharedHost {
  char* base;
  size_t size;
  int fd;
};
std::mutex gSharedMutex;
Forever<std::vector<SharedHost>> gShared;

cu::DevicePtr dptr(const void* p) { return static_cast<cu::DevicePtr>(reinterpret_cast<uintptr_t>(p)); }

Result exportHost(void* data, size_t size, WindowExport* out) {
  std::lock_guard<std::mutex> lock(gSharedMutex);
  char* p = static_cast<char*>(data);
  for (const SharedHost& s : *gShared) {
    if (p >= s.base && p + size <= s.base + s.size) {
      out->fd = fcntl(s.fd, F_DUPFD_CLOEXEC, 0);
      if (out->fd < 0) return fail(kSystemError, "regMrSym: cannot duplicate a shared window's descriptor");
      out->offset = static_cast<uint64_t>(p - s.base);
      out->allocSize = s.size;
      return kSuccess;
    }
  }
  return kSuccess;  // ordinary host memory: not importable
}

Result exportDevice(void* data, int device, WindowExport* out) {
  const cu::Api* api = nullptr;
  if (Result r = cu::load(&api); r != kSuccess) return r;
  cu::ScopedContext keep(api);
  cu::Context ctx = nullptr;
  if (Result r = cu::primaryContext(device, &ctx); r != kSuccess) return r;
  if (Result r = cu::check(api->ctxSetCurrent(ctx), "cuCtxSetCurrent"); r != kSuccess) return r;
  cu::DevicePtr base = 0;
  size_t range = 0;
  if (Result r = cu::check(api->memGetAddressRange(&base, &range, dptr(data)), "cuMemGetAddressRange");
      r != kSuccess) {
    return r;
  }
  cu::MemHandle handle = 0;
  // Not a cuMem allocation (cudaMalloc): nothing to export.
  if (api->memRetainAllocationHandle(&handle, reinterpret_cast<void*>(static_cast<uintptr_t>(base))) != cu::kOk) {
    info("a device window at %p is not a cuMem allocation: other processes reach it through messages only", data);
    return kSuccess;
  }
  int fd = -1;
  cu::Status s = api->memExportToShareableHandle(&fd, handle, cu::kMemHandleTypePosixFd, 0);
  api->memRelease(handle);  // drops the reference the retain took; the allocation stays
  if (s != cu::kOk || fd < 0) {
    // Handle type NONE (NCCL's signal arrays): expected, signals to it travel as messages.
    return kSuccess;
  }
  out->fd = fd;
  out->offset = dptr(data) - base;
  out->allocSize = range;
  return kSuccess;
}

}  // namespace

void shareHostWindowForTests(void* base, size_t size, int fd) {
  std::lock_guard<std::mutex> lock(gSharedMutex);
  gShared->push_back(SharedHost{static_cast<char*>(base), size, fcntl(fd, F_DUPFD_CLOEXEC, 0)});
}

Result exportWindow(void* data, size_t size, int type, int device, WindowExport* out) {
  *out = WindowExport{};
  if (type == kPtrHost) return exportHost(data, size, out);
  return exportDevice(data, device, out);
}

Result ImportedWindow::import(int fd, int type, uint64_t offset, uint64_t allocSize, size_t size, int device,
                              std::shared_ptr<ImportedWindow>* out) {
  std::shared_ptr<ImportedWindow> w(new ImportedWindow);
  if (offset > allocSize || size > allocSize - offset) {
    close(fd);
    return fail(kRemoteError, "regMrSym: a peer's window [%llu, +%zu) lies outside its %llu-byte allocation",
                static_cast<unsigned long long>(offset), size, static_cast<unsigned long long>(allocSize));
  }
  if (type == kPtrHost) {
    void* p = mmap(nullptr, allocSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return fail(kSystemError, "regMrSym: mapping a peer's shared host window failed");
    w->map_ = static_cast<char*>(p);
    w->mapSize_ = allocSize;
    w->base_ = w->map_ + offset;
    *out = std::move(w);
    return kSuccess;
  }
  const cu::Api* api = nullptr;
  if (Result r = cu::load(&api); r != kSuccess) {
    close(fd);
    return r;
  }
  cu::ScopedContext keep(api);
  cu::Context ctx = nullptr;
  Result r = cu::primaryContext(device, &ctx);
  if (r == kSuccess) r = cu::check(api->ctxSetCurrent(ctx), "cuCtxSetCurrent");
  cu::MemHandle h = 0;
  if (r == kSuccess) {
    r = cu::check(api->memImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                    cu::kMemHandleTypePosixFd),
                  "cuMemImportFromShareableHandle");
  }
  close(fd);  // the imported handle holds the allocation now
  if (r != kSuccess) return r;
  w->cuda_ = true;
  w->handle_ = h;  // released by the destructor from here on
  cu::MemAllocationProp prop{};
  size_t gran = 0;
  r = cu::check(api->memGetAllocationPropertiesFromHandle(&prop, h), "cuMemGetAllocationPropertiesFromHandle");
  if (r == kSuccess) {
    r = cu::check(api->memGetAllocationGranularity(&gran, &prop, cu::kMemAllocGranularityMinimum),
                  "cuMemGetAllocationGranularity");
  }
  if (r != kSuccess) return r;
  if (gran == 0) gran = 1;
  size_t bytes = (allocSize + gran - 1) / gran * gran;
  cu::DevicePtr va = 0;
  if (Result e = cu::check(api->memAddressReserve(&va, bytes, gran, 0, 0), "cuMemAddressReserve"); e != kSuccess) {
    return e;
  }
  w->map_ = reinterpret_cast<char*>(static_cast<uintptr_t>(va));
  w->mapSize_ = bytes;  // reserved: freed by the destructor
  if (Result e = cu::check(api->memMap(va, bytes, 0, h, 0), "cuMemMap (a peer's window)"); e != kSuccess) {
    // Unreserve only: nothing is mapped.
    api->memAddressFree(va, bytes);
    w->map_ = nullptr;
    return e;
  }
  cu::MemAccessDesc acc{{cu::kMemLocationTypeDevice, device}, cu::kMemAccessReadWrite};
  if (Result e = cu::check(api->memSetAccess(va, bytes, &acc, 1), "cuMemSetAccess (a peer's window)");
      e != kSuccess) {
    return e;
  }
  w->base_ = w->map_ + offset;
  *out = std::move(w);
  return kSuccess;
}

ImportedWindow::~ImportedWindow() {
  if (!cuda_) {
    if (map_ != nullptr) munmap(map_, mapSize_);
    return;
  }
  const cu::Api* api = nullptr;
  if (cu::load(&api) != kSuccess) return;
  // Best effort at teardown: the engine drained every copy into the mapping before.
  if (map_ != nullptr) {
    cu::DevicePtr va = dptr(map_);
    api->memUnmap(va, mapSize_);
    api->memAddressFree(va, mapSize_);
  }
  if (handle_ != 0) api->memRelease(handle_);
}

}  // namespace gbl
