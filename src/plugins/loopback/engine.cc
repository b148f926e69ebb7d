// The data path: puts, puts with a signal, signal-only, inline puts, gets, flushes, completion.
//
// Ordering. GIN (2.28.9) makes every signal strong: once a signal is visible, every earlier put
// and signal of the same context to the same peer is visible. Each (context, peer) is a Lane with
// one timeline (a CUDA stream of the sending GPU): a put's copy goes on it, and the signal write
// that follows is ordered after everything issued on that lane so far. Unsignalled puts carry no
// ordering promise, which is where chaos (chaos.h) is free to hold, split and shuffle them; a
// signal first releases every held piece of its lane.
//
// Signals. A GIN signal is an 8-byte word in the destination's device memory that a GPU kernel
// polls, and the operation is an atomic add. The plugin must not launch a kernel to add (a GIN
// kernel may hold every SM while it spins on that very signal: deadlock), and stream memory
// operations can only write. So the plugin adds on the host: every signal op of a connection
// passes through it, it keeps a shadow of each word's value, and writes shadow+delta with
// cuStreamWriteValue64. This is exact as long as all updates go through the plugin, which GIN
// requires of signals, with one exception: the owner may reset a signal from the device while no
// signal op to it is in flight. Hence: when no write to the word is pending, the shadow is
// re-read from the device first (a copy-engine read on a stream of its own), which picks up any
// reset; while writes are pending, GIN forbids resets, so the shadow is current. Windows
// registered with NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET (NCCL >= 2.30) are read once only, as are
// all words with GINBENCH_LOOPBACK_SIGNAL_READBACK=never (a read-back costs tens of microseconds
// per op; programs that never reset signals can skip it).
// Writers to one word may be different ranks on different GPUs: they all write through one
// timeline per destination rank (a SignalDomain), in shadow order, after a cross-stream wait on
// their own lane, so the word only moves forward and never shows a value before its puts.
//
// Completion. An op is complete (test() says done) when its copy and its signal write have both
// executed. That covers GIN's local completion (NCCL then bumps the op's counter and may reuse the
// source, e.g. the inline slot) and remote visibility.
//
// Other processes (virtual nodes). A put to a rank of another process copies into that rank's
// window mapped here (window_share.h); its signal becomes a message to the owner, sent once
// the lane's data has completed and applied by the owner through the same signal path
// (remote.h says what "done" means then).
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "cuda_api.h"
#include "engine.h"
#include "internal.h"
#include "log.h"
#include "objects.h"
#include "remote.h"
#include "stats.h"

namespace gbl {
namespace {

CollComm* liveComm(void* p, const char* what) {
  if (!isLive(p, Kind::Coll)) {
    fail(kInvalidArgument, "%s: %p is not an open GIN/RMA connection (collComm)", what, p);
    return nullptr;
  }
  return static_cast<CollComm*>(p);
}

// Remembers the first data-path failure for queryLastError and passes it on.
Result noteError(CollComm& c, Result r) {
  if (r != kSuccess && c.error == kSuccess) c.error = r;
  return r;
}

// The window `mh` (one of this rank's registrations) on `rank`, at [off, off+bytes).
Result window(CollComm& c, void* mh, int rank, uint64_t off, size_t bytes, const char* what, const RegEntry** entry,
              char** addr) {
  MemHandle* h = static_cast<MemHandle*>(mh);
  if (c.handles.find(h) == c.handles.end()) {
    return fail(kInvalidArgument, "%s: %p is not a window registered on this connection", what, mh);
  }
  const RegEntry& e = h->reg->entries[rank];
  if (e.deregistered) return fail(kInvalidArgument, "%s: rank %d has deregistered that window", what, rank);
  if (off > e.size || bytes > e.size - off) {
    return fail(kInvalidArgument, "%s: [%lu, +%zu) is outside rank %d's window of %zu bytes", what,
                static_cast<unsigned long>(off), bytes, rank, e.size);
  }
  *entry = &e;
  // A window of another process that could not be mapped here has no address: only signals
  // (messages) may target it.
  *addr = e.base != nullptr ? e.base + off : nullptr;
  return kSuccess;
}

// A data put or get touching `e` of another process needs it mapped here.
Result reachable(const CollComm& c, const RegEntry& e, int rank, const char* what) {
  if (e.base != nullptr) return kSuccess;
  return fail(kInvalidUsage,
              "%s: rank %d (pid %d) is in another process and that window could not be shared with this one (not a "
              "cuMem allocation with POSIX-FD handles)",
              what, rank, c.pids.empty() ? 0 : c.pids[static_cast<size_t>(rank)]);
}

Lane* laneOf(CollComm& c, int context, uint32_t peer, const char* what) {
  if (context < 0 || context >= c.nContexts) {
    fail(kInvalidArgument, "%s: context %d, the connection has %d", what, context, c.nContexts);
    return nullptr;
  }
  if (peer >= static_cast<uint32_t>(c.nranks)) {
    fail(kInvalidArgument, "%s: rank %u of %d ranks", what, peer, c.nranks);
    return nullptr;
  }
  return &c.lanes[static_cast<size_t>(context) * c.nranks + peer];
}

// The GPU that copies into this rank's own memory (puts and gets to self): a same-device copy
// would run on the SMs, so by default another GPU of the group (which has access to every
// window) does it with its copy engine. -1: none (one GPU; the copy bounces through the host).
int helperDevice(const CollComm& c, int own) {
  if (c.config.localCopy == LocalCopy::Host || c.config.localCopy == LocalCopy::Direct) return -1;
  Group& g = *c.group;
  std::lock_guard<std::mutex> glock(g.mutex);
  for (int i = 1; i < g.nranks; i++) {
    const CollComm* m = g.members[(c.rank + i) % g.nranks];
    int d = m != nullptr ? m->device.load() : -1;
    if (d >= 0 && d != own) return d;
  }
  return -1;
}

// The lane's timeline, on the device mover when device memory is involved. A lane starts on
// the host mover and moves to a device stream at its first device op; host ops are complete
// when issued, so nothing is lost in the switch. Lanes to peers run on this rank's GPU (it
// pushes); the lane to self runs on a helper GPU where there is one (helperDevice()).
Result laneTimeline(CollComm& c, Lane& lane, const HeldChunk& piece, Timeline** out) {
  bool device = piece.srcDevice >= 0 || piece.dstDevice >= 0;
  if (lane.timeline && (!device || !lane.timeline->mover->synchronous())) {
    *out = lane.timeline.get();
    return kSuccess;
  }
  std::unique_ptr<Timeline> t;
  if (device) {
    Mover* m = nullptr;
    if (Result r = cudaMover(&m); r != kSuccess) return r;
    int own = c.device.load();
    if (own < 0) own = piece.dstDevice >= 0 ? piece.dstDevice : piece.srcDevice;
    int dev = own;
    if (lane.peer == c.rank) {
      int helper = helperDevice(c, own);
      if (helper >= 0) dev = helper;
    }
    if (Result r = m->newTimeline(dev, &t); r != kSuccess) return r;
  } else if (Result r = hostMover().newTimeline(-1, &t); r != kSuccess) {
    return r;
  }
  if (lane.timeline) lane.retired.push_back(std::move(lane.timeline));
  lane.timeline = std::move(t);
  *out = lane.timeline.get();
  return kSuccess;
}

void traceEvent(const CollComm& c, const Lane& lane, TraceEvent::Type type, uint64_t opSeq, unsigned chunk,
                size_t bytes, const uint64_t* word, uint64_t value) {
  trace(TraceEvent{type, &c, c.rank, lane.context, lane.peer, opSeq, chunk, bytes, word, value});
}

Result issueCopy(CollComm& c, Lane& lane, Request* req, const HeldChunk& piece) {
  Timeline* t = nullptr;
  if (Result r = laneTimeline(c, lane, piece, &t); r != kSuccess) return r;
  // A GPU copying within its own memory: through the host unless told to use the SMs.
  bool bounce = !piece.crossProcess && piece.srcDevice >= 0 && piece.srcDevice == piece.dstDevice &&
                piece.srcDevice == t->device && c.config.localCopy != LocalCopy::Direct;
  uint64_t ticket = 0;
  if (Result r = t->mover->copy(*t, piece.dst, piece.src, piece.bytes, bounce, &ticket); r != kSuccess) return r;
  if (req != nullptr) req->parts.push_back(Part{t, ticket, nullptr});  // null: the negative control's data
  if (t->mover->synchronous()) traceEvent(c, lane, TraceEvent::Data, piece.opSeq, piece.chunk, piece.bytes, nullptr, 0);
  return kSuccess;
}

// A held piece no longer held: its op may complete once the rest has. `lost` (null: it landed)
// says why it never will; then its op's test fails and never reports it done, and every later
// op of the connection fails, as after a dead peer: NCCL 2.28.9 ignores test's result, and a
// failing put is what stops it.
void unhold(CollComm& c, const Lane& lane, const HeldChunk& h, const char* lost) {
  if (h.req != nullptr) h.req->heldChunks--;
  if (lost == nullptr) return;
  if (h.req != nullptr) h.req->lost = Lost{lane.peer, lost};
  if (!c.lost) c.lost = Lost{lane.peer, lost};
}

constexpr const char* kWindowGone = "that rank deregistered its window while the op was in flight";

// A held piece, issued at last: unless the peer deregistered its window meanwhile (the caller's
// error: on a NIC, a write into memory no longer registered), then it is dropped.
Result issueHeld(CollComm& c, Lane& lane, const HeldChunk& h) {
  if (h.windowGone()) {
    unhold(c, lane, h, kWindowGone);
    return fail(kInvalidUsage, "rank %d deregistered a window while a put or get of rank %d to it was in flight",
                lane.peer, c.rank);
  }
  Result r = issueCopy(c, lane, h.req, h);
  unhold(c, lane, h, r != kSuccess ? "its copy failed" : nullptr);
  return r;
}

// Data-path calls after an op lost a piece fail: the program can no longer trust this connection.
Result lostData(const CollComm& c, const char* what) {
  return fail(kInvalidUsage, "%s: part of an earlier op of rank %d to rank %d never landed (%s): this connection "
              "fails from here on",
              what, c.rank, c.lost.peer, c.lost.why);
}

// Which held pieces of a lane to issue: those whose hold ran out, or all (before a signal or a
// flush). The negative control's pieces leave only through releaseDue.
enum class Release { Due, All };

// Issues held pieces of `lane`. Issue order is shuffled: a later put may land first. A piece that
// fails does not stop the others; the first failure is returned.
Result releaseHeld(CollComm& c, Lane& lane, Release which) {
  if (lane.held.empty()) return kSuccess;
  std::vector<HeldChunk> now;
  for (size_t i = 0; i < lane.held.size();) {
    HeldChunk& h = lane.held[i];
    if (!h.untilTested && (which == Release::All || h.pollsLeft <= 1)) {
      now.push_back(h);
      lane.held[i] = lane.held.back();
      lane.held.pop_back();
    } else {
      if (!h.untilTested) h.pollsLeft--;
      i++;
    }
  }
  for (size_t i = now.size(); i > 1; i--) std::swap(now[i - 1], now[c.rng.below(i)]);
  Result first = kSuccess;
  for (const HeldChunk& h : now) {
    if (Result r = issueHeld(c, lane, h); r != kSuccess && first == kSuccess) first = r;
  }
  return first;
}

// The negative control's held data whose delay has passed: issued on any later test().
Result releaseDue(CollComm& c) {
  auto now = std::chrono::steady_clock::now();
  Result first = kSuccess;
  for (Lane& lane : c.lanes) {
    for (size_t i = 0; i < lane.held.size();) {
      if (lane.held[i].untilTested && lane.held[i].releaseAt <= now) {
        HeldChunk h = lane.held[i];
        lane.held.erase(lane.held.begin() + static_cast<std::ptrdiff_t>(i));
        if (Result r = issueHeld(c, lane, h); r != kSuccess && first == kSuccess) first = r;
      } else {
        i++;
      }
    }
  }
  return first;
}

Result progressHeld(CollComm& c) {
  if (!c.config.chaos) return kSuccess;
  for (Lane& lane : c.lanes) {
    if (Result r = releaseHeld(c, lane, Release::Due); r != kSuccess) return r;
  }
  return kSuccess;
}

// A put's (or get's) bytes on its lane: whole, or under chaos split into shuffled chunks of
// which some may be held back (only when nothing on the lane has to follow them: `mayHold`).
// `forceHold`: hold every piece for config.breakDelayMs, detached from the op (the negative control).
// `peerWindow`: the peer's side of the op (put: destination, get: source).
Result enqueueData(CollComm& c, Lane& lane, Request* req, const RegEntry* peerWindow, char* dst, int dstDevice,
                   const char* src, int srcDevice, size_t bytes, uint64_t opSeq, bool mayHold, bool forceHold = false) {
  if (bytes == 0) return kSuccess;
  unsigned n = 1;
  if (c.config.chaos && bytes >= c.chaos.minSplitBytes) n = 1 + static_cast<unsigned>(c.rng.below(c.chaos.maxChunks));
  std::vector<unsigned> order(n);
  for (unsigned i = 0; i < n; i++) order[i] = i;
  if (c.config.chaos) {
    for (size_t i = n; i > 1; i--) std::swap(order[i - 1], order[c.rng.below(i)]);
  }
  for (unsigned i : order) {
    size_t lo = chunkStart(bytes, n, i), hi = chunkStart(bytes, n, i + 1);
    HeldChunk piece{req, dst + lo, src + lo, hi - lo, dstDevice, srcDevice, 0, opSeq, i, !c.isLocal(lane.peer)};
    piece.peerWindow = peerWindow;
    if (forceHold) {
      // The negative control holds a signalled put's data config.breakDelayMs after its signal
      // went out, detached from its request: the op is reported done as soon as its signal is
      // out, as a NIC reports a write done once the data has left the source, so the sender's
      // flush does not wait for the data either, and a receiver that trusts the signal reads the
      // destination before the data lands.
      piece.req = nullptr;
      piece.untilTested = true;
      piece.releaseAt = std::chrono::steady_clock::now() + std::chrono::milliseconds(c.config.breakDelayMs);
      lane.held.push_back(piece);
    } else if (c.config.chaos && mayHold && c.rng.chance(c.chaos.holdPercent)) {
      piece.pollsLeft = 1 + static_cast<unsigned>(c.rng.below(c.chaos.maxHoldPolls));
      req->heldChunks++;
      lane.held.push_back(piece);
    } else if (Result r = issueCopy(c, lane, req, piece); r != kSuccess) {
      return r;
    }
  }
  return kSuccess;
}

// `waiter`'s later work starts after `source` reached `ticket`.
Result orderAfter(Timeline& waiter, Timeline* source, uint64_t ticket, double timeoutSeconds) {
  if (source == nullptr || ticket == 0 || source->mover->synchronous()) return kSuccess;  // host work is done
  if (waiter.mover == source->mover) return waiter.mover->waitFor(waiter, *source, ticket);
  // A host-memory signal word after device copies: wait for them here (rare: NCCL's signal
  // words are device memory).
  auto deadline = Clock::now() + std::chrono::duration<double>(timeoutSeconds);
  for (;;) {
    uint64_t done = 0;
    if (Result r = source->mover->poll(*source, &done); r != kSuccess) return r;
    if (done >= ticket) return kSuccess;
    if (Clock::now() > deadline) return fail(kSystemError, "a put did not complete within %.0f s", timeoutSeconds);
    sched_yield();
  }
}

// Writes the signal word of rank `dest` (of this process). `lane`: the sender's lane, whose work
// the write follows when `orderAfterLane` (null for a signal that arrived as a message: its data
// completed before the message was sent). `req`: the op to complete with it (or null).
Result writeSignal(CollComm& c, int dest, Lane* lane, Request* req, const RegEntry& entry, const Registration* reg,
                   uint64_t signalOff, uint64_t* word, uint64_t delta, uint64_t opSeq, bool orderAfterLane) {
  bool device = entry.type == kPtrCuda;
  SignalDomain& d = c.group->domain(dest, device);
  std::lock_guard<std::mutex> lock(d.mutex);
  if (!d.timeline) {
    Mover* m = &hostMover();
    if (device) {
      if (Result r = cudaMover(&m); r != kSuccess) return r;
    }
    if (Result r = m->newTimeline(device ? entry.device : -1, &d.timeline); r != kSuccess) return r;
  }
  Timeline& t = *d.timeline;
  if (orderAfterLane && lane != nullptr && lane->timeline) {
    if (Result r = orderAfter(t, lane->timeline.get(), lane->timeline->issued, c.config.timeoutSeconds);
        r != kSuccess) {
      return r;
    }
  }
  SignalShadow& s = d.shadows[{reg, signalOff}];
  uint64_t completed = 0;
  if (Result r = t.mover->poll(t, &completed); r != kSuccess) return r;
  bool pending = s.known && s.lastTicket > completed;
  bool neverReset = (entry.flags & kMrFlagSignalNeverReset) != 0 || !c.config.signalReadback;
  if (!pending && !(s.known && neverReset)) {
    StatsTimer timer(stats().readBacks, stats().readBackNs);
    if (Result r = t.mover->readSignal(t.device, word, c.config.timeoutSeconds, &s.value); r != kSuccess) return r;
    s.known = true;
  }
  if (statsEnabled()) stats().signals.fetch_add(1, std::memory_order_relaxed);
  uint64_t value = s.value + delta;
  uint64_t ticket = 0;
  if (Result r = t.mover->writeSignal(t, word, value, &ticket); r != kSuccess) return r;
  s.value = value;
  s.lastTicket = ticket;
  if (req != nullptr) req->parts.push_back(Part{&t, ticket, &d.mutex});
  if (t.mover->synchronous() && lane != nullptr) traceEvent(c, *lane, TraceEvent::Signal, opSeq, 0, 0, word, value);
  return kSuccess;
}

Request* newRequest(CollComm& c) {
  Request* r = new Request;
  r->owner = &c;
  if (statsEnabled()) r->issued = Clock::now();
  if (c.config.chaos && c.rng.chance(c.chaos.latePercent)) {
    r->lateReports = 1 + static_cast<int>(c.rng.below(c.chaos.maxLatePolls));
  }
  c.requests.insert(r);
  return r;
}

void dropRequest(CollComm& c, Request* r) {
  // Pieces still held belong to a request being dropped (an op that failed half-way): forget
  // them so they are never issued.
  for (Lane& lane : c.lanes) {
    lane.held.erase(std::remove_if(lane.held.begin(), lane.held.end(), [r](const HeldChunk& h) { return h.req == r; }),
                    lane.held.end());
  }
  c.requests.erase(r);
  delete r;
}

Result pollPart(const Part& p, uint64_t* completed) {
  if (p.lock != nullptr) {
    std::lock_guard<std::mutex> lock(*p.lock);
    return p.timeline->mover->poll(*p.timeline, completed);
  }
  return p.timeline->mover->poll(*p.timeline, completed);
}

}  // namespace

Result applySignal(CollComm& c, int context, int sender, uint64_t regSeq, uint64_t offset, uint64_t delta) {
  Group& g = *c.group;
  std::lock_guard<std::mutex> glock(g.mutex);
  auto it = g.regs.find(regSeq);
  if (it == g.regs.end() || !it->second->ready) {
    return fail(kRemoteError, "a signal from rank %d (context %d) names window #%llu, which rank %d does not have",
                sender, context, static_cast<unsigned long long>(regSeq), c.rank);
  }
  const Registration* reg = it->second;
  const RegEntry& e = reg->entries[c.rank];
  if (e.deregistered) {
    return fail(kRemoteError, "a signal from rank %d arrived for window #%llu, which rank %d has deregistered", sender,
                static_cast<unsigned long long>(regSeq), c.rank);
  }
  if (offset % sizeof(uint64_t) != 0 || offset > e.size || e.size - offset < sizeof(uint64_t) ||
      reinterpret_cast<uintptr_t>(e.base) % sizeof(uint64_t) != 0) {
    return fail(kRemoteError, "a signal from rank %d is outside window #%llu or misaligned (offset %llu of %zu bytes)",
                sender, static_cast<unsigned long long>(regSeq), static_cast<unsigned long long>(offset), e.size);
  }
  return writeSignal(c, c.rank, nullptr, nullptr, e, reg, offset, reinterpret_cast<uint64_t*>(e.base + offset), delta,
                     0, /*orderAfterLane=*/false);
}

Result drainTimeline(Timeline& t, double timeoutSeconds, const char* what, std::mutex* shared) {
  auto locked = [shared] { return shared ? std::unique_lock<std::mutex>(*shared) : std::unique_lock<std::mutex>(); };
  uint64_t ticket = 0;
  {
    auto hold = locked();
    ticket = t.issued;
  }
  auto deadline = Clock::now() + std::chrono::duration<double>(timeoutSeconds);
  for (;;) {
    uint64_t done = 0;
    {
      auto hold = locked();
      if (Result r = t.mover->poll(t, &done); r != kSuccess) return r;
    }
    if (done >= ticket) return kSuccess;
    if (Clock::now() > deadline) {
      return fail(kSystemError, "%s did not complete within %.0f s (GPU hung?)", what, timeoutSeconds);
    }
    sched_yield();
  }
}

Result instanceInit(void** ctx, uint64_t commId, DebugLogger logger) {
  setLogger(logger);
  if (ctx == nullptr) return fail(kInvalidArgument, "init: NULL context pointer");
  Config config;
  if (Result r = readConfig(&config); r != kSuccess) return r;
  Config before = currentConfig();
  setCurrentConfig(config);
  if (config.chaos != before.chaos || config.chaosSeed != before.chaosSeed ||
      config.breakSignalEarly != before.breakSignalEarly || config.breakDelayMs != before.breakDelayMs) {
    if (config.chaos) info("chaos mode, seed %lu", static_cast<unsigned long>(config.chaosSeed));
    if (config.breakSignalEarly) {
      warn("GINBENCH_LOOPBACK_BREAK=signal-early: signals overtake their puts by %u ms (test only)",
           config.breakDelayMs);
    }
  }
  // Once per process: with fewer hardware queues than streams, a plugin stream can share a queue
  // with a GIN kernel's stream and wait behind the kernel that waits for it (README).
  static std::once_flag queuesChecked;
  std::call_once(queuesChecked, [] {
    const char* v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    if (v == nullptr || atoi(v) < 32) {
      warn("CUDA_DEVICE_MAX_CONNECTIONS is %s: set it to 32 before CUDA starts, or a copy of this plugin may "
           "queue behind a GIN kernel that waits for it (a hang)",
           v == nullptr ? "unset (8 hardware queues per GPU)" : v);
    }
  });
  Instance* inst = new Instance;
  inst->commId = commId;
  track(inst, Kind::Instance);
  *ctx = inst;
  return kSuccess;
}

Result instanceFinalize(void* ctx) {
  // NCCL finalizes with whatever init returned, and later communicators' GIN context is NULL.
  if (ctx == nullptr) return kSuccess;
  if (!isLive(ctx, Kind::Instance)) return fail(kInvalidArgument, "finalize: %p is not a live plugin context", ctx);
  untrack(ctx);
  delete static_cast<Instance*>(ctx);
  return kSuccess;
}

Result createContexts(void* collComm, int nContexts, void** contextSet) {
  CollComm* c = liveComm(collComm, "createContext");
  if (c == nullptr) return kInvalidArgument;
  if (contextSet == nullptr) return fail(kInvalidArgument, "createContext: NULL rmaCtx pointer");
  if (nContexts < 1 || nContexts > kMaxContexts) {
    return fail(kInvalidArgument, "createContext: %d contexts", nContexts);
  }
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->v11) {
    return fail(kInvalidUsage, "createContext: a GIN v11 connection has its one context from connect");
  }
  int live = 0;
  for (void* s : c->contextSets) live += static_cast<ContextSet*>(s)->n;
  if (live + nContexts > kMaxContexts) {
    return fail(kInvalidArgument, "createContext: %d more contexts would exceed %d live on this connection",
                nContexts, kMaxContexts);
  }
  if (c->nContexts > kMaxNumberedContexts - nContexts) {
    return fail(kInvalidArgument, "createContext: this connection has numbered %d contexts, the most it can",
                c->nContexts);
  }
  // NCCL >= 2.30 creates one set per device communicator on the same connection.
  ContextSet* s = new ContextSet{c, addContexts(*c, nContexts), nContexts};
  c->contextSets.insert(s);
  track(s, Kind::ContextSet);
  *contextSet = s;
  return kSuccess;
}

void* commOfContextSet(void* contextSet, int* context) {
  if (!isLive(contextSet, Kind::ContextSet)) {
    fail(kInvalidArgument, "%p is not a live RMA context (rmaCtx)", contextSet);
    return nullptr;
  }
  const ContextSet& s = *static_cast<ContextSet*>(contextSet);
  if (context != nullptr) {
    if (*context < 0 || *context >= s.n) {
      std::lock_guard<std::mutex> lock(s.comm->mutex);
      noteError(*s.comm, fail(kInvalidArgument, "context %d, the rmaCtx has %d", *context, s.n));
      return nullptr;
    }
    *context += s.base;
  }
  return s.comm;
}

Result destroyContexts(void* contextSet) {
  CollComm* c = static_cast<CollComm*>(commOfContextSet(contextSet, nullptr));
  if (c == nullptr) return kInvalidArgument;
  untrack(contextSet);
  {
    // Its lanes stay until closeColl: their numbers are not reused, and ops NCCL never tested
    // done still settle at close.
    std::lock_guard<std::mutex> lock(c->mutex);
    c->contextSets.erase(contextSet);
  }
  delete static_cast<ContextSet*>(contextSet);
  return kSuccess;
}

Result put(void* collComm, const PutArgs& a, void** request) {
  StatsTimer timer(stats().puts, stats().putNs);
  CollComm* cp = liveComm(collComm, a.withSignal ? "iputSignal" : "iput");
  if (cp == nullptr) return kInvalidArgument;
  CollComm& c = *cp;
  const char* what = a.withSignal ? "iputSignal" : "iput";
  if (request == nullptr) return fail(kInvalidArgument, "%s: NULL request pointer", what);
  *request = nullptr;
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.peerError != kSuccess) return c.peerError;  // a peer process died (logged once)
  if (c.lost) return noteError(c, lostData(c, what));
  Lane* lane = laneOf(c, a.context, a.rank, what);
  if (lane == nullptr) return noteError(c, kInvalidArgument);
  const bool remote = !c.isLocal(static_cast<int>(a.rank));

  const RegEntry* srcE = nullptr;
  const RegEntry* dstE = nullptr;
  char* src = nullptr;
  char* dst = nullptr;
  if (a.size > 0 || !a.withSignal) {
    // Signal-only ops come with size 0 and NULL data handles; every other op names both windows.
    if (Result r = window(c, a.srcMhandle, c.rank, a.srcOff, a.size, what, &srcE, &src); r != kSuccess) {
      return noteError(c, r);
    }
    if (Result r = window(c, a.dstMhandle, static_cast<int>(a.rank), a.dstOff, a.size, what, &dstE, &dst);
        r != kSuccess) {
      return noteError(c, r);
    }
    if (Result r = reachable(c, *dstE, static_cast<int>(a.rank), what); r != kSuccess) return noteError(c, r);
  }
  const RegEntry* sigE = nullptr;
  char* sig = nullptr;
  uint64_t delta = 0;
  if (a.withSignal) {
    if (a.signalOp == kSignalOpInc) {
      delta = 1;
    } else if (a.signalOp == kSignalOpAdd) {
      delta = a.signalValue;
    } else {
      return noteError(c, fail(kInvalidArgument, "%s: signal op %u is neither INC (1) nor ADD (2)", what, a.signalOp));
    }
    if (a.signalOff % sizeof(uint64_t) != 0) {
      return noteError(c, fail(kInvalidArgument, "%s: signal offset %lu is not 8-byte aligned", what,
                               static_cast<unsigned long>(a.signalOff)));
    }
    if (Result r = window(c, a.signalMhandle, static_cast<int>(a.rank), a.signalOff, sizeof(uint64_t), what, &sigE,
                          &sig);
        r != kSuccess) {
      return noteError(c, r);
    }
    // The word is written whole (a 64-bit stream write or store): its window's base must be aligned too.
    if (reinterpret_cast<uintptr_t>(sig) % sizeof(uint64_t) != 0) {
      return noteError(c, fail(kInvalidArgument, "%s: the signal word at %p (rank %u's window) is not 8-byte aligned",
                               what, static_cast<void*>(sig), a.rank));
    }
  }

  int srcDev = srcE != nullptr && srcE->type == kPtrCuda ? srcE->device : -1;
  int dstDev = dstE != nullptr && dstE->type == kPtrCuda ? dstE->device : -1;
  uint64_t opSeq = ++lane->opSeq;
  Request* req = newRequest(c);
  const Registration* sigReg = a.withSignal ? static_cast<MemHandle*>(a.signalMhandle)->reg : nullptr;
  Result r = kSuccess;
  if (!a.withSignal) {
    r = enqueueData(c, *lane, req, dstE, dst, dstDev, src, srcDev, a.size, opSeq, /*mayHold=*/true);
  } else if (c.config.breakSignalEarly) {
    // Negative control: the signal goes now (a message to another process, else a write not
    // ordered after the lane); its data config.breakDelayMs later, after the op was reported done.
    r = remote ? sendSignal(c, *lane, req, sigReg->seq, a.signalOff, delta, /*early=*/true)
               : writeSignal(c, static_cast<int>(a.rank), lane, req, *sigE, sigReg, a.signalOff,
                             reinterpret_cast<uint64_t*>(sig), delta, opSeq, /*orderAfterLane=*/false);
    if (r == kSuccess) r = releaseHeld(c, *lane, Release::All);
    if (r == kSuccess) r = enqueueData(c, *lane, req, dstE, dst, dstDev, src, srcDev, a.size, opSeq, false, true);
  } else {
    // Everything earlier on the lane, then this op's data, then the signal.
    r = releaseHeld(c, *lane, Release::All);
    if (r == kSuccess) r = enqueueData(c, *lane, req, dstE, dst, dstDev, src, srcDev, a.size, opSeq, false);
    if (r == kSuccess && remote) {
      r = sendSignal(c, *lane, req, sigReg->seq, a.signalOff, delta, /*early=*/false);
    } else if (r == kSuccess) {
      r = writeSignal(c, static_cast<int>(a.rank), lane, req, *sigE, sigReg, a.signalOff,
                      reinterpret_cast<uint64_t*>(sig), delta, opSeq, /*orderAfterLane=*/true);
    }
  }
  if (r != kSuccess) {
    dropRequest(c, req);
    return noteError(c, r);
  }
  *request = req;
  return kSuccess;
}

Result get(void* collComm, int context, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
           void* localMhandle, uint32_t rank, void** request) {
  StatsTimer timer(stats().puts, stats().putNs);
  CollComm* cp = liveComm(collComm, "iget");
  if (cp == nullptr) return kInvalidArgument;
  CollComm& c = *cp;
  if (request == nullptr) return fail(kInvalidArgument, "iget: NULL request pointer");
  *request = nullptr;
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.peerError != kSuccess) return c.peerError;
  if (c.lost) return noteError(c, lostData(c, "iget"));
  Lane* lane = laneOf(c, context, rank, "iget");
  if (lane == nullptr) return noteError(c, kInvalidArgument);
  const RegEntry* remoteE = nullptr;
  const RegEntry* localE = nullptr;
  char* remote = nullptr;
  char* local = nullptr;
  if (Result r = window(c, remoteMhandle, static_cast<int>(rank), remoteOff, size, "iget", &remoteE, &remote);
      r != kSuccess) {
    return noteError(c, r);
  }
  if (Result r = window(c, localMhandle, c.rank, localOff, size, "iget", &localE, &local); r != kSuccess) {
    return noteError(c, r);
  }
  if (Result r = reachable(c, *remoteE, static_cast<int>(rank), "iget"); r != kSuccess) return noteError(c, r);
  int localDev = localE->type == kPtrCuda ? localE->device : -1;
  int remoteDev = remoteE->type == kPtrCuda ? remoteE->device : -1;
  Request* req = newRequest(c);
  if (Result r = enqueueData(c, *lane, req, remoteE, local, localDev, remote, remoteDev, size, ++lane->opSeq, true);
      r != kSuccess) {
    dropRequest(c, req);
    return noteError(c, r);
  }
  *request = req;
  return kSuccess;
}

Result flush(void* collComm, int context, uint32_t rank, void** request) {
  CollComm* cp = liveComm(collComm, "iflush");
  if (cp == nullptr) return kInvalidArgument;
  CollComm& c = *cp;
  if (request == nullptr) return fail(kInvalidArgument, "iflush: NULL request pointer");
  *request = nullptr;
  std::lock_guard<std::mutex> lock(c.mutex);
  if (c.lost) return noteError(c, lostData(c, "iflush"));
  Lane* lane = laneOf(c, context, rank, "iflush");
  if (lane == nullptr) return noteError(c, kInvalidArgument);
  if (Result r = releaseHeld(c, *lane, Release::All); r != kSuccess) return noteError(c, r);
  Request* req = newRequest(c);
  if (lane->timeline && lane->timeline->issued > 0) {
    req->parts.push_back(Part{lane->timeline.get(), lane->timeline->issued, nullptr});
  }
  *request = req;
  return kSuccess;
}

Result test(void* collComm, void* request, int* done) {
  StatsTimer timer(stats().tests, stats().testNs);
  CollComm* cp = liveComm(collComm, "test");
  if (cp == nullptr) return kInvalidArgument;
  CollComm& c = *cp;
  if (done == nullptr) return fail(kInvalidArgument, "test: NULL done pointer");
  *done = 0;
  std::lock_guard<std::mutex> lock(c.mutex);
  Request* req = static_cast<Request*>(request);
  if (c.requests.find(req) == c.requests.end()) {
    return noteError(c, fail(kInvalidArgument, "test: %p is not an outstanding request of this connection", request));
  }
  if (Result r = progressHeld(c); r != kSuccess) return noteError(c, r);
  // Other processes: send signals whose data completed, apply those that arrived. A dead peer
  // fails every pending op (NCCL 2.28.9 ignores test()'s result, but a later put fails too).
  if (Result r = progressPeers(c); r != kSuccess) return noteError(c, r);
  if (c.config.breakSignalEarly) {
    if (Result r = releaseDue(c); r != kSuccess) return noteError(c, r);
  }
  if (req->heldChunks > 0) return kSuccess;
  if (req->lost) {
    return noteError(c, fail(kInvalidUsage, "test: part of this op to rank %d never landed: %s", req->lost.peer,
                             req->lost.why));
  }
  for (; req->partsDone < req->parts.size(); req->partsDone++) {
    const Part& p = req->parts[req->partsDone];
    if (p.sentLane != nullptr) {
      if (p.sentLane->sigSent >= p.ticket) continue;
      if (p.ticket <= p.sentLane->sigLost) {
        return noteError(c, fail(kRemoteError, "test: this op's signal to rank %d was dropped: that rank has closed "
                                 "its end of the GIN connection",
                                 p.sentLane->peer));
      }
      if (Result r = pumpOutbox(c, *p.sentLane); r != kSuccess) return noteError(c, r);
      if (p.sentLane->sigSent < p.ticket) return kSuccess;
      continue;
    }
    if (p.timeline->completedHint.load(std::memory_order_acquire) >= p.ticket) continue;
    uint64_t completed = 0;
    if (Result r = pollPart(p, &completed); r != kSuccess) return noteError(c, r);
    if (completed < p.ticket) return kSuccess;
  }
  if (req->lateReports > 0) {
    req->lateReports--;
    return kSuccess;
  }
  if (statsEnabled()) {
    stats().testsDone.fetch_add(1, std::memory_order_relaxed);
    auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - req->issued).count();
    stats().doneNs.fetch_add(static_cast<uint64_t>(took), std::memory_order_relaxed);
  }
  c.requests.erase(req);
  delete req;
  *done = 1;
  return kSuccess;
}

namespace {
// GINBENCH_LOOPBACK_STATS: every few seconds, one line per connection with work in flight or
// signals exchanged: what each lane has issued, completed and still holds, and how many signal
// messages went out and came in. Two ranks' lines side by side show where a stalled exchange
// stopped (a signal never sent, sent but not applied, or applied and the kernel still waits).
void dumpState(CollComm& c) {
  auto now = Clock::now();
  if (now < c.nextStateLine) return;
  c.nextStateLine = now + std::chrono::seconds(3);
  std::string s;
  char buf[160];
  for (const Lane& l : c.lanes) {
    uint64_t done = l.timeline ? l.timeline->completedHint.load() : 0;
    uint64_t issued = l.timeline ? l.timeline->issued : 0;
    if (issued == 0 && l.sigQueued == 0 && l.held.empty()) continue;
    snprintf(buf, sizeof buf, " | to %d ctx %d: copies %llu/%llu held %zu signals sent %llu/%llu", l.peer, l.context,
             static_cast<unsigned long long>(done), static_cast<unsigned long long>(issued), l.held.size(),
             static_cast<unsigned long long>(l.sigSent), static_cast<unsigned long long>(l.sigQueued));
    s += buf;
    if (l.timeline && done < issued) s += " (" + l.timeline->mover->oldestPending(*l.timeline) + ")";
  }
  for (size_t i = 0; i < c.inSeq.size(); i++) {
    if (c.inSeq[i] == 0) continue;
    snprintf(buf, sizeof buf, " | from %zu ctx %zu: %llu applied", i % static_cast<size_t>(c.nranks),
             i / static_cast<size_t>(c.nranks), static_cast<unsigned long long>(c.inSeq[i]));
    s += buf;
  }
  {
    SignalDomain& d = c.group->domain(c.rank, true);
    std::lock_guard<std::mutex> dlock(d.mutex);
    if (d.timeline && d.timeline->issued > 0) {
      uint64_t done = 0;
      d.timeline->mover->poll(*d.timeline, &done);
      snprintf(buf, sizeof buf, " | own signal words: writes %llu/%llu", static_cast<unsigned long long>(done),
               static_cast<unsigned long long>(d.timeline->issued));
      s += buf;
      if (done < d.timeline->issued) s += " (" + d.timeline->mover->oldestPending(*d.timeline) + ")";
    }
  }
  if (s.empty() && c.requests.empty()) return;
  fprintf(stderr, "ginbench-loopback: state pid %d rank %d/%d conn %p: %zu request(s) open%s\n", static_cast<int>(getpid()),
          c.rank, c.nranks, static_cast<void*>(&c), c.requests.size(), s.c_str());
}
}  // namespace

Result progress(void* collComm) {
  CollComm* cp = liveComm(collComm, "progress");
  if (cp == nullptr) return kInvalidArgument;
  std::lock_guard<std::mutex> lock(cp->mutex);
  if (statsEnabled()) dumpState(*cp);
  if (Result r = progressHeld(*cp); r != kSuccess) return noteError(*cp, r);
  return noteError(*cp, progressPeers(*cp));
}

Result lastError(void* collComm, bool* hasError) {
  CollComm* cp = liveComm(collComm, "queryLastError");
  if (cp == nullptr) return kInvalidArgument;
  if (hasError == nullptr) return fail(kInvalidArgument, "queryLastError: NULL result pointer");
  std::lock_guard<std::mutex> lock(cp->mutex);
  *hasError = cp->error != kSuccess;
  return kSuccess;
}

Result settleLanes(CollComm& c, const char* what) {
  Result result = kSuccess;
  size_t dropped = 0;
  for (Lane& lane : c.lanes) {
    // Pieces for a window its owner deregistered (its memory may be freed) cannot land, nor can
    // the negative control's late data once a window may be gone; neither makes this call fail.
    auto gone = [](const HeldChunk& h) { return h.untilTested || h.windowGone(); };
    for (const HeldChunk& h : lane.held) {
      if (!gone(h)) continue;
      unhold(c, lane, h, h.untilTested ? nullptr : kWindowGone);
      if (!h.untilTested) dropped++;
    }
    lane.held.erase(std::remove_if(lane.held.begin(), lane.held.end(), gone), lane.held.end());
    if (Result r = releaseHeld(c, lane, Release::All); r != kSuccess && result == kSuccess) result = r;
    if (lane.timeline) {
      Result r = drainTimeline(*lane.timeline, c.config.timeoutSeconds, what);
      if (r != kSuccess && result == kSuccess) result = r;
    }
  }
  // Signal writes into this rank's own words (a put + signal of any local rank, or one that
  // came as a message) are queued on its signal domains, not on a lane: they land too, since
  // the words' memory may be freed once this returns (NCCL frees its signal array right after
  // deregistering it). Up to what is queued now: other ranks may go on signalling other words.
  for (bool device : {false, true}) {
    SignalDomain& d = c.group->domain(c.rank, device);
    Timeline* t = nullptr;
    {
      std::lock_guard<std::mutex> dlock(d.mutex);
      t = d.timeline.get();
    }
    if (t == nullptr) continue;
    Result r = drainTimeline(*t, c.config.timeoutSeconds, "signal writes into this rank's words", &d.mutex);
    if (r != kSuccess && result == kSuccess) result = r;
  }
  if (dropped > 0) {
    warn("rank %d, %s: %zu held piece(s) of puts or gets that never completed were dropped: their windows' owners had "
         "deregistered them",
         c.rank, what, dropped);
  }
  return result;
}

Result closeColl(void* collComm) {
  CollComm* cp = liveComm(collComm, "closeColl");
  if (cp == nullptr) return kInvalidArgument;
  untrack(cp);  // no new calls from here on
  CollComm& c = *cp;
  Result result = kSuccess;
  // Settling may copy or poll on another GPU's stream: the caller's context stays its own.
  cu::ScopedContext keep;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    result = settleLanes(c, "puts before close");
    // Signals to other processes still waiting for their data go out now (bounded), then the
    // channels close with a goodbye, so the peers do not take this for a crash.
    if (Result r = closePeers(c); r != kSuccess && result == kSuccess) result = r;
    for (Request* r : c.requests) delete r;
    c.requests.clear();
    for (MemHandle* h : c.handles) releaseHandle(c, h);
    c.handles.clear();
    for (void* s : c.contextSets) {
      untrack(s);
      delete static_cast<ContextSet*>(s);
    }
    c.contextSets.clear();
  }
  if (c.rank == 0) printStats("close of a rank-0 connection");
  if (Result r = leaveGroup(c); r != kSuccess && result == kSuccess) result = r;
  delete cp;
  return result;
}

}  // namespace gbl
