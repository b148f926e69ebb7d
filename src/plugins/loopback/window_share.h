// Windows shared between processes (virtual nodes): the owner exports its window's allocation
// as a file descriptor, which travels over the control channel (SCM_RIGHTS); every other
// process maps it into its own address space once, at collective registration, so a put there
// is a copy into local addresses.
//   - Device windows (cuMem, as ncclMemAlloc and NCCL's resource windows allocate them, with
//     POSIX-FD handles): cuMemRetainAllocationHandle + cuMemExportToShareableHandle; the
//     importer does cuMemImportFromShareableHandle + cuMemAddressReserve + cuMemMap +
//     cuMemSetAccess for its GPU, rounded to the allocation granularity.
//   - Memory that cannot be exported (handle type NONE, as NCCL's per-context signal array;
//     cudaMalloc memory; host memory) is recorded as not importable: signals reach it as
//     messages to its owner, and NCCL's host "inlines" array is only ever a put source.
//   - Host memory backed by a shared file (memfd) that a test announced with
//     shareHostWindowForTests(): mmap'ed by the importer, so the CPU tests run the whole
//     cross-process data path with the host mover.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "abi_common.h"

namespace gbl {

struct WindowExport {
  int fd = -1;              // to send, then close; -1: not importable
  uint64_t offset = 0;      // of the window in its allocation
  uint64_t allocSize = 0;   // bytes to map
};

// Never fails for memory that simply cannot be shared (fd = -1); fails for a CUDA error on
// memory that should have been exportable.
Result exportWindow(void* data, size_t size, int type, int device, WindowExport* out);

// A mapping of another process's window in this process; unmapped when the last reference goes.
class ImportedWindow {
 public:
  ~ImportedWindow();
  char* base() const { return base_; }  // the window (mapping + offset)
  bool device() const { return cuda_; }

  // Takes ownership of `fd` (closed in every case). `device`: this process's GPU that will
  // copy into the mapping (device windows only).
  static Result import(int fd, int type, uint64_t offset, uint64_t allocSize, size_t size, int device,
                       std::shared_ptr<ImportedWindow>* out);

 private:
  ImportedWindow() = default;
  char* base_ = nullptr;
  char* map_ = nullptr;
  size_t mapSize_ = 0;
  bool cuda_ = false;
  unsigned long long handle_ = 0;
};

// CPU tests only: [base, base+size) is a MAP_SHARED mapping of `fd` from offset 0; registered
// host windows inside it are exported with that fd. The plugin dups the fd.
void shareHostWindowForTests(void* base, size_t size, int fd);

}  // namespace gbl
