// Rendezvous: the live-object table, listen/connect (which ranks form a Group), collective window
// registration, and the lifetime of Groups and Registrations.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <shared_mutex>
#include <unordered_map>

#include "engine.h"
#include "internal.h"
#include "log.h"
#include "objects.h"

namespace gbl {
namespace {

constexpr char kWireMagic[8] = "GBLOOP1";

std::shared_mutex gLiveMutex;
std::unordered_map<void*, Kind> gLive;

std::atomic<TraceHook> gTraceHook{nullptr};
std::atomic<void*> gTraceUser{nullptr};

std::mutex gGroupsMutex;
std::unordered_map<uint64_t, Group*> gGroups;
std::unordered_map<int, uint64_t> gConnectsByRank;  // seeds chaos per (rank, n-th connection)

std::atomic<uint64_t> gNextListenId{1};

uint64_t processNonce() {
  static const uint64_t nonce = [] {
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      if (read(fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) v = 0;
      close(fd);
    }
    if (v == 0) {
      v = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
          (static_cast<uint64_t>(getpid()) << 32);
    }
    return v;
  }();
  return nonce;
}

uint64_t mix(uint64_t a, uint64_t b) {
  Rng r(a ^ (b * 0x9e3779b97f4a7c15ull));
  return r.next();
}

using Clock = std::chrono::steady_clock;

}  // namespace

void track(void* p, Kind kind) {
  std::unique_lock<std::shared_mutex> lock(gLiveMutex);
  gLive[p] = kind;
}

void untrack(void* p) {
  std::unique_lock<std::shared_mutex> lock(gLiveMutex);
  gLive.erase(p);
}

bool isLive(void* p, Kind kind) {
  if (p == nullptr) return false;
  std::shared_lock<std::shared_mutex> lock(gLiveMutex);
  auto it = gLive.find(p);
  return it != gLive.end() && it->second == kind;
}

void setTraceHook(TraceHook hook, void* user) {
  gTraceUser.store(user, std::memory_order_release);
  gTraceHook.store(hook, std::memory_order_release);
}

void trace(const TraceEvent& event) {
  TraceHook hook = gTraceHook.load(std::memory_order_acquire);
  if (hook != nullptr) hook(event, gTraceUser.load(std::memory_order_acquire));
}

Result listen(int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return fail(kInvalidArgument, "listen: NULL handle or listenComm");
  if (dev != 0) return fail(kInvalidArgument, "listen: device %d does not exist (the plugin has one)", dev);
  ListenComm* l = new ListenComm;
  memcpy(l->handle.magic, kWireMagic, sizeof kWireMagic);
  l->handle.processNonce = processNonce();
  l->handle.listenId = gNextListenId.fetch_add(1);
  l->handle.pid = static_cast<int32_t>(getpid());
  l->handle.rankHint = -1;
  memset(handle, 0, kNetHandleMaxSize);
  memcpy(handle, &l->handle, sizeof l->handle);
  track(l, Kind::Listen);
  *listenComm = l;
  return kSuccess;
}

Result closeListen(void* listenComm) {
  if (!isLive(listenComm, Kind::Listen)) return fail(kInvalidArgument, "closeListen: %p is not an open listen comm", listenComm);
  untrack(listenComm);
  delete static_cast<ListenComm*>(listenComm);
  return kSuccess;
}

Result connect(void* handles[], int nranks, int rank, void* listenComm, int nContexts, void** collComm) {
  if (collComm == nullptr || handles == nullptr) return fail(kInvalidArgument, "connect: NULL handles or collComm");
  *collComm = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return fail(kInvalidArgument, "connect: rank %d of %d ranks is out of range", rank, nranks);
  }
  if (!isLive(listenComm, Kind::Listen)) return fail(kInvalidArgument, "connect: %p is not an open listen comm", listenComm);
  const ListenComm* l = static_cast<const ListenComm*>(listenComm);
  WireHandle first{};
  for (int r = 0; r < nranks; r++) {
    if (handles[r] == nullptr) return fail(kInvalidArgument, "connect: handle of rank %d is NULL", r);
    WireHandle h;
    memcpy(&h, handles[r], sizeof h);
    if (memcmp(h.magic, kWireMagic, sizeof kWireMagic) != 0) {
      return fail(kInvalidArgument, "connect: the handle of rank %d was not made by ginbench-loopback's listen", r);
    }
    if (h.processNonce != processNonce()) {
      return fail(kInvalidUsage,
                  "connect: rank %d is in another process (pid %d); this build moves data between the GPUs of one "
                  "process only, not between processes (virtual nodes)",
                  r, h.pid);
    }
    if (r == 0) first = h;
  }
  WireHandle mine;
  memcpy(&mine, handles[rank], sizeof mine);
  if (mine.listenId != l->handle.listenId) {
    return fail(kInvalidArgument, "connect: handles[%d] is not the handle of this rank's listen comm", rank);
  }

  std::unique_ptr<CollComm> c(new CollComm);
  c->rank = rank;
  c->nranks = nranks;
  c->config = currentConfig();
  c->nContexts = 0;
  std::lock_guard<std::mutex> lock(gGroupsMutex);
  Group*& g = gGroups[first.listenId];
  if (g == nullptr) {
    g = new Group;
    g->key = first.listenId;
    g->nranks = nranks;
    g->members.assign(nranks, nullptr);
    for (int i = 0; i < 2 * nranks; i++) g->signalDomains.emplace_back(new SignalDomain);
  }
  {
    std::lock_guard<std::mutex> glock(g->mutex);
    if (g->nranks != nranks) {
      return fail(kInvalidArgument, "connect: rank %d says %d ranks, an earlier rank said %d", rank, nranks, g->nranks);
    }
    if (g->members[rank] != nullptr) return fail(kInvalidArgument, "connect: rank %d connected twice", rank);
    g->members[rank] = c.get();
    g->joined++;
  }
  c->group = g;
  c->rng = Rng(mix(mix(c->config.chaosSeed, static_cast<uint64_t>(rank)), gConnectsByRank[rank]++));
  if (nContexts > 0) {
    if (Result r = setContexts(*c, nContexts); r != kSuccess) return r;
  }
  CollComm* out = c.release();
  track(out, Kind::Coll);
  *collComm = out;
  return kSuccess;
}

Result setContexts(CollComm& c, int nContexts) {
  c.nContexts = nContexts;
  c.lanes.clear();
  c.lanes.resize(static_cast<size_t>(nContexts) * c.nranks);
  for (int ctx = 0; ctx < nContexts; ctx++) {
    for (int p = 0; p < c.nranks; p++) {
      Lane& lane = c.lanes[static_cast<size_t>(ctx) * c.nranks + p];
      lane.context = ctx;
      lane.peer = p;
    }
  }
  return kSuccess;
}

// Frees a registration once no rank holds it; under the group's mutex.
static void maybeFreeRegistration(Group& g, Registration* reg) {
  if (reg->liveHandles > 0) return;
  // A registration only some ranks reached (timed out) still has waiters; they free nothing.
  if (!reg->ready && !reg->failed) return;
  for (auto& d : g.signalDomains) {
    std::lock_guard<std::mutex> dlock(d->mutex);
    for (auto it = d->shadows.begin(); it != d->shadows.end();) {
      it = it->first.first == reg ? d->shadows.erase(it) : std::next(it);
    }
  }
  g.regs.erase(reg->seq);
  delete reg;
}

Result regMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle) {
  if (!isLive(collComm, Kind::Coll)) return fail(kInvalidArgument, "regMrSym: %p is not an open collComm", collComm);
  if (mhandle == nullptr) return fail(kInvalidArgument, "regMrSym: NULL mhandle");
  *mhandle = nullptr;
  if (data == nullptr) return fail(kInvalidArgument, "regMrSym: NULL address");
  if (type != kPtrHost && type != kPtrCuda) {
    return fail(kInvalidArgument, "regMrSym: memory type %d is neither NCCL_PTR_HOST nor NCCL_PTR_CUDA", type);
  }
  CollComm& c = *static_cast<CollComm*>(collComm);
  Group& g = *c.group;
  int device = -1;
  if (type == kPtrCuda) {
    if (Result r = deviceOfPointer(data, &device); r != kSuccess) return r;
  }
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    seq = c.regSeq++;
    if (device >= 0 && c.device.load() < 0) c.device.store(device);
  }
  Registration* reg = nullptr;
  bool complete = false;
  {
    std::lock_guard<std::mutex> glock(g.mutex);
    Registration*& slot = g.regs[seq];
    if (slot == nullptr) {
      slot = new Registration;
      slot->seq = seq;
      slot->entries.resize(g.nranks);
    }
    reg = slot;
    if (reg->failed) {
      return fail(kSystemError, "regMrSym: collective registration #%lu already failed on another rank",
                  static_cast<unsigned long>(seq));
    }
    RegEntry& e = reg->entries[c.rank];
    e.base = static_cast<char*>(data);
    e.size = size;
    e.type = type;
    e.device = device;
    e.flags = mrFlags;
    e.arrived = true;
    complete = ++reg->arrived == g.nranks;
  }
  if (complete) {
    // Last to arrive: let every rank's GPU reach every device window of this registration
    // (peer copies are issued by the sending GPU, read-backs and gets by the other side).
    Result r = kSuccess;
    std::vector<int> devices;
    for (const RegEntry& e : reg->entries) devices.push_back(e.device);
    for (const RegEntry& e : reg->entries) {
      if (e.type != kPtrCuda || r != kSuccess) continue;
      r = grantAccess(e.base, e.size, e.device, devices.data(), static_cast<int>(devices.size()));
    }
    std::lock_guard<std::mutex> glock(g.mutex);
    if (r == kSuccess) {
      reg->ready = true;
    } else {
      reg->failed = true;
    }
    g.cv.notify_all();
  }
  std::unique_lock<std::mutex> glock(g.mutex);
  auto deadline = Clock::now() + std::chrono::duration<double>(c.config.timeoutSeconds);
  while (!reg->ready && !reg->failed) {
    if (g.cv.wait_until(glock, deadline) == std::cv_status::timeout && !reg->ready && !reg->failed) {
      reg->failed = true;
      g.cv.notify_all();
      int missing = -1;
      for (int r = 0; r < g.nranks && missing < 0; r++) missing = reg->entries[r].arrived ? -1 : r;
      return fail(kSystemError,
                  "regMrSym: collective registration #%lu: %d of %d ranks arrived within %.0f s (rank %d missing; "
                  "every rank must register the same windows in the same order)",
                  static_cast<unsigned long>(seq), reg->arrived, g.nranks, c.config.timeoutSeconds, missing);
    }
  }
  if (reg->failed) {
    return fail(kSystemError, "regMrSym: collective registration #%lu failed", static_cast<unsigned long>(seq));
  }
  MemHandle* h = new MemHandle;
  h->reg = reg;
  h->rank = c.rank;
  h->owner = &c;
  reg->liveHandles++;
  glock.unlock();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.handles.insert(h);
  *mhandle = h;
  return kSuccess;
}

Result deregMrSym(void* collComm, void* mhandle) {
  if (!isLive(collComm, Kind::Coll)) return fail(kInvalidArgument, "deregMrSym: %p is not an open collComm", collComm);
  CollComm& c = *static_cast<CollComm*>(collComm);
  MemHandle* h = static_cast<MemHandle*>(mhandle);
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.handles.erase(h) == 0) {
      return fail(kInvalidArgument, "deregMrSym: %p is not a window registered on this collComm", mhandle);
    }
  }
  releaseHandle(c, h);
  return kSuccess;
}

void releaseHandle(CollComm& c, MemHandle* h) {
  Group& g = *c.group;
  std::lock_guard<std::mutex> glock(g.mutex);
  h->reg->entries[h->rank].deregistered = true;
  h->reg->liveHandles--;
  maybeFreeRegistration(g, h->reg);
  delete h;
}

void leaveGroup(CollComm& c) {
  Group* g = c.group;
  bool last = false;
  {
    std::lock_guard<std::mutex> glock(g->mutex);
    g->members[c.rank] = nullptr;
    last = --g->joined == 0;
  }
  if (!last) return;
  {
    std::lock_guard<std::mutex> lock(gGroupsMutex);
    gGroups.erase(g->key);
  }
  // Signal writes of every rank went through the group's domains: let them land before the
  // streams go away.
  for (auto& d : g->signalDomains) {
    if (d->timeline) drainTimeline(*d->timeline, c.config.timeoutSeconds, "signal writes");
  }
  for (auto& kv : g->regs) delete kv.second;  // registrations some rank never released
  delete g;
}

}  // namespace gbl
