// Movers: the only part of the plugin that differs between host memory (memcpy, used by the CPU
// contract tests and for host-to-host traffic) and device memory (CUDA copies and stream memory
// operations). The engine (engine.h) keeps every ordering, signal and completion rule on top of
// this interface, so the CPU tests exercise the same logic the GPUs run.
//
// A Timeline is an ordered queue of work (a CUDA stream, or the host's synchronous one). Every
// operation returns a ticket; tickets complete in order, and poll() reports the highest one
// completed. Work on one timeline never overtakes earlier work on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <atomic>
#include <memory>
#include <string>

#include "abi_common.h"

namespace gbl {

class Mover;

struct Timeline {
  explicit Timeline(Mover* m, int dev) : mover(m), device(dev) {}
  virtual ~Timeline() = default;
  Mover* const mover;
  const int device;     // CUDA device the work runs on; -1 for the host
  uint64_t issued = 0;  // last ticket handed out
  // Highest ticket poll() has seen complete; readable without the timeline's lock, so test()
  // can skip a driver call for work already known to be done.
  std::atomic<uint64_t> completedHint{0};
};

class Mover {
 public:
  virtual ~Mover() = default;
  virtual const char* name() const = 0;
  // True when every operation has completed by the time its call returns (the host mover).
  virtual bool synchronous() const = 0;
  virtual Result newTimeline(int device, std::unique_ptr<Timeline>* out) = 0;
  // bounceViaHost: the device copies into its own memory through pinned host memory, in copy
  // engine steps (D2H then H2D): a same-device cuMemcpyAsync would need a free SM.
  virtual Result copy(Timeline& t, void* dst, const void* src, size_t bytes, bool bounceViaHost, uint64_t* ticket) = 0;
  // Stores `value` into the 8-byte signal word (a plain store, visible after all earlier work on
  // `t`): the engine computes the value from its shadow of the word (engine.cc says why).
  virtual Result writeSignal(Timeline& t, uint64_t* word, uint64_t value, uint64_t* ticket) = 0;
  // Reads a signal word of `device` (-1: host) while nothing is pending on it.
  virtual Result readSignal(int device, const uint64_t* word, double timeoutSeconds, uint64_t* value) = 0;
  // Work issued on `waiter` after this call starts only once `ticket` of `source` (same mover)
  // has completed.
  virtual Result waitFor(Timeline& waiter, Timeline& source, uint64_t ticket) = 0;
  virtual Result poll(Timeline& t, uint64_t* completed) = 0;
  // The oldest work of `t` not known complete, in words (diagnostics); empty when none.
  virtual std::string oldestPending(Timeline& t) = 0;
};

// memcpy and atomic stores; always available.
Mover& hostMover();
// CUDA copies and cuStreamWriteValue64 on non-blocking streams of the plugin's own; loads the
// driver on first use and fails (logged) where there is none.
Result cudaMover(Mover** out);

// For device memory: grants every device in `devices` read-write access to the allocation that
// holds [ptr, ptr+size) (cuMemSetAccess for cuMem allocations, peer access otherwise), so a copy
// issued on one GPU's stream can reach another GPU's window.
Result grantAccess(void* ptr, size_t size, int ownerDevice, const int* devices, int nDevices);
// The device ordinal of a device pointer.
Result deviceOfPointer(const void* ptr, int* device);
// The device of the calling thread's current CUDA context.
Result currentDevice(int* device);

}  // namespace gbl
