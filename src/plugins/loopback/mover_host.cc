// The host mover: memcpy for data, a release store for signals. Operations complete inside the
// call, so a timeline is just a ticket counter and waitFor() has nothing to do: program order on
// the calling thread is the visibility order, which is what GIN's ordering rules ask for.
#include <cstring>

#include "forever.h"
#include "mover.h"

namespace gbl {
namespace {

class HostMover final : public Mover {
 public:
  const char* name() const override { return "host"; }
  bool synchronous() const override { return true; }

  Result newTimeline(int /*device*/, std::unique_ptr<Timeline>* out) override {
    out->reset(new Timeline(this, -1));
    return kSuccess;
  }

  Result copy(Timeline& t, void* dst, const void* src, size_t bytes, bool /*bounce*/, uint64_t* ticket) override {
    if (bytes > 0) memmove(dst, src, bytes);
    // Order the data before any later store (a signal) for readers on other threads, the way a
    // GPU kernel polling the signal would see it.
    __atomic_thread_fence(__ATOMIC_RELEASE);
    *ticket = ++t.issued;
    return kSuccess;
  }

  Result writeSignal(Timeline& t, uint64_t* word, uint64_t value, uint64_t* ticket) override {
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
    *ticket = ++t.issued;
    return kSuccess;
  }

  Result readSignal(int /*device*/, const uint64_t* word, double /*timeout*/, uint64_t* value) override {
    *value = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    return kSuccess;
  }

  Result waitFor(Timeline&, Timeline&, uint64_t) override { return kSuccess; }

  std::string oldestPending(Timeline&) override { return {}; }  // done when issued

  Result poll(Timeline& t, uint64_t* completed) override {
    *completed = t.issued;
    t.completedHint.store(t.issued, std::memory_order_release);
    return kSuccess;
  }
};

}  // namespace

Mover& hostMover() {
  static Forever<HostMover> mover;
  return *mover;
}

}  // namespace gbl
