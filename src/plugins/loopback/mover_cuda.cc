// The device mover. Data moves with cuMemcpyAsync on non-blocking streams the plugin creates
// (never the legacy default stream, which would queue behind GIN kernels launched on blocking
// streams); a signal is a cuStreamWriteValue64 on such a stream. Both run on copy engines and
// the GPU front end: neither needs a free SM, so a GIN kernel that occupies every SM while it
// spins on a signal cannot starve the operation it waits for (a signal kernel would deadlock).
// Completion is tracked with one event per operation; tickets map to events in order.
#include <sched.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <vector>

#include "cuda_api.h"
#include "log.h"
#include "mover.h"
#include "stats.h"

namespace gbl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kStagingBytes = 4u << 20;

cu::DevicePtr dptr(const void* p) { return static_cast<cu::DevicePtr>(reinterpret_cast<uintptr_t>(p)); }

using cu::ScopedContext;

// A data-path driver call, counted and timed under GINBENCH_LOOPBACK_STATS (stats.h).
template <class Fn, class... Args>
cu::Status timed(CudaCall which, Fn fn, Args... args) {
  StatsTimer timer(stats().calls[which], stats().callNs[which]);
  return fn(args...);
}

struct CudaTimeline final : Timeline {
  CudaTimeline(Mover* m, int dev, const cu::Api* a, cu::Context c) : Timeline(m, dev), api(a), ctx(c) {}
  ~CudaTimeline() override {
    // Best effort at teardown: the engine drains a timeline before dropping it.
    ScopedContext keep(api);
    if (api->ctxSetCurrent(ctx) != cu::kOk) return;
    for (auto& e : inflight) api->eventDestroy(e.event);
    for (auto e : spare) api->eventDestroy(e);
    if (stream != nullptr) api->streamDestroy(stream);
    if (staging != nullptr) api->memFreeHost(staging);
  }
  const cu::Api* api;
  cu::Context ctx;
  cu::Stream stream = nullptr;
  struct InFlight {
    uint64_t ticket;
    cu::Event event;   // recorded after the work
    const char* what;  // for oldestPending()
    size_t bytes;
  };
  std::deque<InFlight> inflight;
  void* staging = nullptr;  // pinned, for copies bounced through the host
  std::vector<cu::Event> spare;
  uint64_t completed = 0;
};

// Per-device state for read-backs of signal words: a stream of its own (so a read never waits
// behind queued signal writes) and a pinned word to land in.
struct ReadState {
  std::mutex mutex;
  cu::Stream stream = nullptr;
  cu::Event event = nullptr;
  uint64_t* pinned = nullptr;
};

class CudaMover final : public Mover {
 public:
  explicit CudaMover(const cu::Api* api) : api_(api) {}
  const char* name() const override { return "cuda"; }
  bool synchronous() const override { return false; }

  Result newTimeline(int device, std::unique_ptr<Timeline>* out) override {
    cu::Context ctx = nullptr;
    if (Result r = cu::primaryContext(device, &ctx); r != kSuccess) return r;
    if (Result r = checkMemOps(device); r != kSuccess) return r;
    std::unique_ptr<CudaTimeline> t(new CudaTimeline(this, device, api_, ctx));
    ScopedContext keep(api_);
    if (Result r = cu::check(api_->ctxSetCurrent(ctx), "cuCtxSetCurrent"); r != kSuccess) return r;
    if (Result r = cu::check(api_->streamCreate(&t->stream, cu::kStreamNonBlocking), "cuStreamCreate");
        r != kSuccess) {
      return r;
    }
    *out = std::move(t);
    return kSuccess;
  }

  Result copy(Timeline& tl, void* dst, const void* src, size_t bytes, bool bounceViaHost, uint64_t* ticket) override {
    CudaTimeline& t = static_cast<CudaTimeline&>(tl);
    if (Result r = cu::makeCurrent(t.ctx); r != kSuccess) return r;
    if (bytes > 0 && bounceViaHost) {
      if (t.staging == nullptr) {
        if (Result r = cu::check(api_->memHostAlloc(&t.staging, kStagingBytes, 0), "cuMemHostAlloc (staging)");
            r != kSuccess) {
          return r;
        }
      }
      // Device -> staging -> device, chunk by chunk; the stream's order keeps a chunk's H2D
      // ahead of the next chunk's D2H into the same staging buffer.
      for (size_t off = 0; off < bytes; off += kStagingBytes) {
        size_t n = bytes - off < kStagingBytes ? bytes - off : kStagingBytes;
        const char* s = static_cast<const char*>(src) + off;
        char* d = static_cast<char*>(dst) + off;
        if (Result r = cu::check(timed(kCallMemcpy, api_->memcpyAsync, dptr(t.staging), dptr(s), n, t.stream),
                                 "cuMemcpyAsync (D2H)");
            r != kSuccess) {
          return r;
        }
        if (Result r = cu::check(timed(kCallMemcpy, api_->memcpyAsync, dptr(d), dptr(t.staging), n, t.stream),
                                 "cuMemcpyAsync (H2D)");
            r != kSuccess) {
          return r;
        }
      }
    } else if (bytes > 0) {
      // Unified addressing lets one call serve device<->device (peer or local), host->device
      // (pageable sources are staged before the call returns, so NCCL may reuse its inline slot
      // once we report completion) and device->host.
      if (Result r =
              cu::check(timed(kCallMemcpy, api_->memcpyAsync, dptr(dst), dptr(src), bytes, t.stream), "cuMemcpyAsync");
          r != kSuccess) {
        return r;
      }
    }
    return record(t, ticket, bytes == 0 ? "empty copy" : bounceViaHost ? "copy through the host" : "copy", bytes);
  }

  Result writeSignal(Timeline& tl, uint64_t* word, uint64_t value, uint64_t* ticket) override {
    CudaTimeline& t = static_cast<CudaTimeline&>(tl);
    if (Result r = cu::makeCurrent(t.ctx); r != kSuccess) return r;
    if (Result r = cu::check(timed(kCallWriteValue, api_->streamWriteValue64, t.stream, dptr(word), value, 0),
                             "cuStreamWriteValue64");
        r != kSuccess) {
      return r;
    }
    return record(t, ticket, "signal write", sizeof(uint64_t));
  }

  Result readSignal(int device, const uint64_t* word, double timeoutSeconds, uint64_t* value) override {
    ReadState* rs = nullptr;
    if (Result r = readState(device, &rs); r != kSuccess) return r;
    std::lock_guard<std::mutex> lock(rs->mutex);
    cu::Context ctx = nullptr;
    if (Result r = cu::primaryContext(device, &ctx); r != kSuccess) return r;
    if (Result r = cu::makeCurrent(ctx); r != kSuccess) return r;
    // Async copy + event poll rather than cuMemcpyDtoH: the synchronous call would run on the
    // legacy default stream (behind a spinning GIN kernel) and could not be bounded in time.
    if (Result r = cu::check(api_->memcpyDtoHAsync(rs->pinned, dptr(word), sizeof(uint64_t), rs->stream),
                             "cuMemcpyDtoHAsync");
        r != kSuccess) {
      return r;
    }
    if (Result r = cu::check(timed(kCallEventRecord, api_->eventRecord, rs->event, rs->stream), "cuEventRecord");
        r != kSuccess) {
      return r;
    }
    auto start = Clock::now();
    auto deadline = start + std::chrono::duration<double>(timeoutSeconds);
    for (;;) {
      cu::Status s = timed(kCallEventQuery, api_->eventQuery, rs->event);
      if (s == cu::kOk) break;
      if (s != cu::kNotReady) return cu::check(s, "cuEventQuery (signal read-back)");
      auto now = Clock::now();
      if (now > deadline) {
        return fail(kSystemError, "reading a signal word on device %d took over %.0f s (GPU hung?)", device,
                    timeoutSeconds);
      }
      // The copy takes microseconds: spin briefly before giving the CPU away.
      if (now - start > std::chrono::microseconds(50)) sched_yield();
    }
    *value = __atomic_load_n(rs->pinned, __ATOMIC_ACQUIRE);
    return kSuccess;
  }

  Result waitFor(Timeline& waiterTl, Timeline& sourceTl, uint64_t ticket) override {
    CudaTimeline& waiter = static_cast<CudaTimeline&>(waiterTl);
    CudaTimeline& source = static_cast<CudaTimeline&>(sourceTl);
    uint64_t done = 0;
    if (Result r = poll(source, &done); r != kSuccess) return r;
    if (done >= ticket) return kSuccess;
    if (source.inflight.empty() || ticket < source.inflight.front().ticket || ticket > source.issued) {
      return fail(kInternalError, "ordering on an unknown ticket %lu", static_cast<unsigned long>(ticket));
    }
    cu::Event ev = source.inflight[ticket - source.inflight.front().ticket].event;
    if (Result r = cu::makeCurrent(waiter.ctx); r != kSuccess) return r;
    // Cross-device waits are allowed: the event may belong to another context.
    return cu::check(timed(kCallStreamWaitEvent, api_->streamWaitEvent, waiter.stream, ev, 0), "cuStreamWaitEvent");
  }

  Result poll(Timeline& tl, uint64_t* completed) override {
    CudaTimeline& t = static_cast<CudaTimeline&>(tl);
    if (!t.inflight.empty()) {
      if (Result r = cu::makeCurrent(t.ctx); r != kSuccess) return r;
    }
    while (!t.inflight.empty()) {
      cu::Status s = timed(kCallEventQuery, api_->eventQuery, t.inflight.front().event);
      if (s == cu::kNotReady) break;
      if (s != cu::kOk) return cu::check(s, "cuEventQuery");
      t.completed = t.inflight.front().ticket;
      t.spare.push_back(t.inflight.front().event);
      t.inflight.pop_front();
    }
    *completed = t.completed;
    t.completedHint.store(t.completed, std::memory_order_release);
    return kSuccess;
  }

  std::string oldestPending(Timeline& tl) override {
    CudaTimeline& t = static_cast<CudaTimeline&>(tl);
    if (t.inflight.empty()) return {};
    char buf[128];
    snprintf(buf, sizeof buf, "oldest pending: #%llu %s of %zu B on device %d (%zu in flight)",
             static_cast<unsigned long long>(t.inflight.front().ticket), t.inflight.front().what,
             t.inflight.front().bytes, t.device, t.inflight.size());
    return buf;
  }

 private:
  Result record(CudaTimeline& t, uint64_t* ticket, const char* what, size_t bytes) {
    cu::Event ev = nullptr;
    if (!t.spare.empty()) {
      ev = t.spare.back();
      t.spare.pop_back();
    } else if (Result r = cu::check(api_->eventCreate(&ev, cu::kEventDisableTiming), "cuEventCreate");
               r != kSuccess) {
      return r;
    }
    if (Result r = cu::check(timed(kCallEventRecord, api_->eventRecord, ev, t.stream), "cuEventRecord"); r != kSuccess) {
      t.spare.push_back(ev);
      return r;
    }
    *ticket = ++t.issued;
    t.inflight.push_back({*ticket, ev, what, bytes});
    return kSuccess;
  }

  // Signals are stream memory operations: refuse devices that cannot do them 64 bits wide,
  // rather than fail at the first signal inside a running kernel.
  Result checkMemOps(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (static_cast<size_t>(device) < memOpsChecked_.size() && memOpsChecked_[device]) return kSuccess;
    cu::Device dev = 0;
    if (Result r = cu::check(api_->deviceGet(&dev, device), "cuDeviceGet"); r != kSuccess) return r;
    int can = 0;
    if (Result r = cu::check(api_->deviceGetAttribute(&can, cu::kDevAttrCanUse64BitStreamMemOps, dev),
                             "cuDeviceGetAttribute");
        r != kSuccess) {
      return r;
    }
    if (!can) {
      return fail(kSystemError, "GPU %d cannot do 64-bit stream memory operations, which GIN signals need here",
                  device);
    }
    if (static_cast<size_t>(device) >= memOpsChecked_.size()) memOpsChecked_.resize(device + 1, false);
    memOpsChecked_[device] = true;
    return kSuccess;
  }

  Result readState(int device, ReadState** out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device < 0) return fail(kInternalError, "signal read-back without a device");
    if (static_cast<size_t>(device) >= reads_.size()) reads_.resize(device + 1);
    if (!reads_[device]) {
      std::unique_ptr<ReadState> rs(new ReadState);
      cu::Context ctx = nullptr;
      if (Result r = cu::primaryContext(device, &ctx); r != kSuccess) return r;
      ScopedContext keep(api_);
      if (Result r = cu::check(api_->ctxSetCurrent(ctx), "cuCtxSetCurrent"); r != kSuccess) return r;
      if (Result r = cu::check(api_->streamCreate(&rs->stream, cu::kStreamNonBlocking), "cuStreamCreate");
          r != kSuccess) {
        return r;
      }
      if (Result r = cu::check(api_->eventCreate(&rs->event, cu::kEventDisableTiming), "cuEventCreate");
          r != kSuccess) {
        return r;
      }
      void* p = nullptr;
      if (Result r = cu::check(api_->memHostAlloc(&p, sizeof(uint64_t), 0), "cuMemHostAlloc"); r != kSuccess) {
        return r;
      }
      rs->pinned = static_cast<uint64_t*>(p);
      reads_[device] = std::move(rs);
    }
    *out = reads_[device].get();
    return kSuccess;
  }

  const cu::Api* api_;
  std::mutex mutex_;
  std::vector<bool> memOpsChecked_;
  std::vector<std::unique_ptr<ReadState>> reads_;  // by device; live for the process
};

}  // namespace

Result cudaMover(Mover** out) {
  static std::once_flag once;
  static CudaMover* mover = nullptr;
  static Result status = kInternalError;
  std::call_once(once, [] {
    const cu::Api* api = nullptr;
    status = cu::load(&api);
    if (status == kSuccess) mover = new CudaMover(api);  // lives for the process
  });
  if (status != kSuccess) return fail(status, "device memory needs the CUDA driver, which did not load");
  *out = mover;
  return kSuccess;
}

Result deviceOfPointer(const void* ptr, int* device) {
  const cu::Api* api = nullptr;
  if (Result r = cu::load(&api); r != kSuccess) return r;
  int ordinal = -1;
  if (api->pointerGetAttribute(&ordinal, cu::kPointerAttrDeviceOrdinal, dptr(ptr)) != cu::kOk || ordinal < 0) {
    return fail(kInvalidArgument, "%p registered as device memory is not a CUDA device pointer", ptr);
  }
  *device = ordinal;
  return kSuccess;
}

Result currentDevice(int* device) {
  const cu::Api* api = nullptr;
  if (Result r = cu::load(&api); r != kSuccess) return r;
  cu::Device d = -1;
  if (Result r = cu::check(api->ctxGetDevice(&d), "cuCtxGetDevice (no current CUDA context?)"); r != kSuccess) {
    return r;
  }
  *device = d;
  return kSuccess;
}

Result grantAccess(void* ptr, size_t size, int ownerDevice, const int* devices, int nDevices) {
  const cu::Api* api = nullptr;
  if (Result r = cu::load(&api); r != kSuccess) return r;
  std::vector<int> others;
  for (int i = 0; i < nDevices; i++) {
    int d = devices[i];
    if (d < 0 || d == ownerDevice) continue;
    bool seen = false;
    for (int o : others) seen = seen || o == d;
    if (!seen) others.push_back(d);
  }
  if (others.empty()) return kSuccess;
  // Called on whichever rank's thread completed the registration: look the allocation up from
  // its owner's context (a cuMem range is invisible to a device without access to it yet).
  ScopedContext keep(api);
  cu::Context owner = nullptr;
  if (Result r = cu::primaryContext(ownerDevice, &owner); r != kSuccess) return r;
  if (Result r = cu::check(api->ctxSetCurrent(owner), "cuCtxSetCurrent"); r != kSuccess) return r;
  cu::DevicePtr base = 0;
  size_t range = 0;
  if (Result r = cu::check(api->memGetAddressRange(&base, &range, dptr(ptr)), "cuMemGetAddressRange");
      r != kSuccess) {
    return r;
  }
  if (dptr(ptr) + size > base + range) {
    return fail(kInvalidArgument, "window %p + %zu bytes runs past its allocation", ptr, size);
  }
  std::vector<cu::MemAccessDesc> desc;
  for (int d : others) desc.push_back({{cu::kMemLocationTypeDevice, d}, cu::kMemAccessReadWrite});
  // cuMem (VMM) allocations, which is what NCCL registers: add access on the owner's mapping.
  if (api->memSetAccess(base, range, desc.data(), desc.size()) == cu::kOk) return kSuccess;
  // cudaMalloc-style memory: classic peer access, context to context.
  for (int d : others) {
    cu::Context ctx = nullptr;
    if (Result r = cu::primaryContext(d, &ctx); r != kSuccess) return r;
    if (Result r = cu::check(api->ctxSetCurrent(ctx), "cuCtxSetCurrent"); r != kSuccess) return r;
    cu::Status s = api->ctxEnablePeerAccess(owner, 0);
    if (s != cu::kOk && s != cu::kPeerAccessAlreadyEnabled) {
      char what[96];
      snprintf(what, sizeof what, "giving GPU %d access to GPU %d's window (cuCtxEnablePeerAccess)", d, ownerDevice);
      return cu::check(s, what);
    }
  }
  return kSuccess;
}

}  // namespace gbl
