// Rendezvous: the live-object table, listen/connect (which ranks form a Group), collective window
// registration, and the lifetime of Groups and Registrations.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <shared_mutex>
#include <unordered_map>

#include "cuda_api.h"
#include "engine.h"
#include "forever.h"
#include "internal.h"
#include "log.h"
#include "objects.h"
#include "remote.h"

namespace gbl {
namespace {

constexpr char kWireMagic[8] = "GBLOOP1";

Forever<std::shared_mutex> gLiveMutex;
Forever<std::unordered_map<void*, Kind>> gLive;

std::atomic<TraceHook> gTraceHook{nullptr};
std::atomic<void*> gTraceUser{nullptr};

std::mutex gGroupsMutex;
Forever<std::unordered_map<uint64_t, Group*>> gGroups;
Forever<std::unordered_map<int, uint64_t>> gConnectsByRank;  // seeds chaos per (rank, n-th connection)

std::atomic<uint64_t> gNextListenId{1};

uint64_t mix(uint64_t a, uint64_t b) {
  Rng r(a ^ (b * 0x9e3779b97f4a7c15ull));
  return r.next();
}

}  // namespace

void track(void* p, Kind kind) {
  std::unique_lock<std::shared_mutex> lock(*gLiveMutex);
  (*gLive)[p] = kind;
}

void untrack(void* p) {
  std::unique_lock<std::shared_mutex> lock(*gLiveMutex);
  gLive->erase(p);
}

bool isLive(void* p, Kind kind) {
  if (p == nullptr) return false;
  std::shared_lock<std::shared_mutex> lock(*gLiveMutex);
  auto it = gLive->find(p);
  return it != gLive->end() && it->second == kind;
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
  // Ranks of other processes connect here (remote.cc); unused when every rank is in this one.
  l->fd = listenOn(SOCK_SEQPACKET, socketName("gin", l->handle.processNonce, l->handle.listenId));
  if (l->fd < 0) {
    delete l;
    return fail(kSystemError, "listen: no listen socket");
  }
  memset(handle, 0, kNetHandleMaxSize);
  memcpy(handle, &l->handle, sizeof l->handle);
  track(l, Kind::Listen);
  *listenComm = l;
  return kSuccess;
}

Result closeListen(void* listenComm) {
  if (!isLive(listenComm, Kind::Listen)) return fail(kInvalidArgument, "closeListen: %p is not an open listen comm", listenComm);
  untrack(listenComm);
  ListenComm* l = static_cast<ListenComm*>(listenComm);
  if (l->fd >= 0) close(l->fd);
  delete l;
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
  std::vector<WireHandle> all(static_cast<size_t>(nranks));
  int nLocal = 0;
  for (int r = 0; r < nranks; r++) {
    if (handles[r] == nullptr) return fail(kInvalidArgument, "connect: handle of rank %d is NULL", r);
    WireHandle h;
    memcpy(&h, handles[r], sizeof h);
    if (memcmp(h.magic, kWireMagic, sizeof kWireMagic) != 0) {
      return fail(kInvalidArgument, "connect: the handle of rank %d was not made by ginbench-loopback's listen", r);
    }
    if (r == 0) first = h;
    all[r] = h;
    if (h.processNonce == processNonce()) nLocal++;
  }
  WireHandle mine;
  memcpy(&mine, handles[rank], sizeof mine);
  if (mine.listenId != l->handle.listenId || mine.processNonce != l->handle.processNonce) {
    return fail(kInvalidArgument, "connect: handles[%d] is not the handle of this rank's listen comm", rank);
  }

  std::unique_ptr<CollComm> c(new CollComm);
  c->rank = rank;
  c->nranks = nranks;
  c->config = currentConfig();
  c->nContexts = 0;
  c->local.resize(static_cast<size_t>(nranks));
  c->pids.resize(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; r++) {
    c->local[r] = all[r].processNonce == processNonce();
    c->pids[r] = all[r].pid;
  }
  // The group's name, the same in every process: rank 0's listen.
  const uint64_t key = mix(first.processNonce, first.listenId);
  std::unique_lock<std::mutex> lock(gGroupsMutex);
  Group*& g = (*gGroups)[key];
  if (g == nullptr) {
    g = new Group;
    g->key = key;
    g->nranks = nranks;
    g->nLocal = nLocal;
    g->members.assign(nranks, nullptr);
    for (int i = 0; i < 2 * nranks; i++) g->signalDomains.emplace_back(new SignalDomain);
  }
  {
    std::lock_guard<std::mutex> glock(g->mutex);
    if (g->nranks != nranks) {
      return fail(kInvalidArgument, "connect: rank %d says %d ranks, an earlier rank said %d", rank, nranks, g->nranks);
    }
    if (g->members[rank] != nullptr) return fail(kInvalidArgument, "connect: rank %d connected twice", rank);
    if (g->closing) {
      return fail(kInvalidUsage, "connect: rank %d: a rank of this connection has already closed it (handles reused?)",
                  rank);
    }
    g->members[rank] = c.get();
    g->joined++;
  }
  c->group = g;
  c->rng = Rng(mix(mix(c->config.chaosSeed, static_cast<uint64_t>(rank)), (*gConnectsByRank)[rank]++));
  lock.unlock();
  // From here a failure must take the rank out of the group again.
  c->v11 = nContexts > 0;
  if (nContexts > 0) addContexts(*c, nContexts);
  Result r = connectPeers(*c, all, *l, key);
  if (r != kSuccess) {
    closePeers(*c);
    leaveGroup(*c);
    return r;
  }
  CollComm* out = c.release();
  track(out, Kind::Coll);
  *collComm = out;
  return kSuccess;
}

int addContexts(CollComm& c, int n) {
  const int base = c.nContexts;
  c.nContexts += n;
  c.lanes.resize(static_cast<size_t>(c.nContexts) * c.nranks);
  for (int ctx = base; ctx < c.nContexts; ctx++) {
    for (int p = 0; p < c.nranks; p++) {
      Lane& lane = c.lanes[static_cast<size_t>(ctx) * c.nranks + p];
      lane.context = ctx;
      lane.peer = p;
    }
  }
  c.inSeq.resize(static_cast<size_t>(c.nContexts) * c.nranks, 0);
  return base;
}

// Frees a registration once no rank holds it; under the group's mutex.
static void maybeFreeRegistration(Group& g, Registration* reg) {
  if (reg->holders > 0) return;
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

// Collective registration `seq` of the group, made by the first rank of this process to reach
// it; under the group's mutex.
static Registration* registrationOf(Group& g, uint64_t seq) {
  Registration*& slot = g.regs[seq];
  if (slot == nullptr) {
    slot = new Registration;
    slot->seq = seq;
    slot->entries.resize(g.nranks);
  }
  return slot;
}

Result regMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags, void** mhandle) {
  if (!isLive(collComm, Kind::Coll)) return fail(kInvalidArgument, "regMrSym: %p is not an open collComm", collComm);
  if (mhandle == nullptr) return fail(kInvalidArgument, "regMrSym: NULL mhandle");
  *mhandle = nullptr;
  CollComm& c = *static_cast<CollComm*>(collComm);
  Group& g = *c.group;
  // The call takes its place in the collective order before anything can refuse it: a refused
  // call fails the registration for this process's ranks at once (rather than after their
  // timeout), and this rank's next one still pairs with theirs.
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    seq = c.regSeq++;
  }
  auto refuse = [&](Result r) {
    std::lock_guard<std::mutex> glock(g.mutex);
    registrationOf(g, seq)->failed = true;
    g.cv.notify_all();
    return r;
  };
  if (data == nullptr) return refuse(fail(kInvalidArgument, "regMrSym: NULL address"));
  if (type != kPtrHost && type != kPtrCuda) {
    return refuse(
        fail(kInvalidArgument, "regMrSym: memory type %d is neither NCCL_PTR_HOST nor NCCL_PTR_CUDA", type));
  }
  int device = -1;
  if (type == kPtrCuda) {
    if (Result r = deviceOfPointer(data, &device); r != kSuccess) return refuse(r);
  }
  if (device >= 0 && c.device.load() < 0) c.device.store(device);
  Registration* reg = nullptr;
  RegEntry mine;
  {
    std::lock_guard<std::mutex> glock(g.mutex);
    reg = registrationOf(g, seq);
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
    reg->arrived++;
    reg->holders++;  // until this rank's handle is released, or it fails out below
    mine = e;
  }
  // Ranks of other processes learn of the window over their channels (with its fd where it
  // can be shared); theirs arrive the same way, collected in the wait below.
  Result shared = announceWindow(c, seq, mine, data);
  std::unique_lock<std::mutex> glock(g.mutex);
  auto deadline = deadlineAfter(c.config.timeoutSeconds);
  while (shared == kSuccess && !reg->ready && !reg->failed) {
    if (reg->arrived == g.nranks && !reg->granting) {
      // Every window is known: let every GPU of this process reach every device window (peer
      // copies are issued by the sending GPU, read-backs and gets by the other side).
      reg->granting = true;
      std::vector<int> devices;
      for (const RegEntry& e : reg->entries) {
        if (!e.remote) devices.push_back(e.device);
      }
      std::vector<RegEntry> entries = reg->entries;
      glock.unlock();
      Result r = kSuccess;
      for (const RegEntry& e : entries) {
        if (e.type != kPtrCuda || e.base == nullptr || r != kSuccess) continue;
        r = grantAccess(e.base, e.size, e.device, devices.data(), static_cast<int>(devices.size()));
      }
      glock.lock();
      (r == kSuccess ? reg->ready : reg->failed) = true;
      g.cv.notify_all();
      continue;
    }
    if (c.anyRemote() && reg->arrived < g.nranks) {
      glock.unlock();
      bool all = false;
      shared = collectWindows(c, *reg, &all);
      glock.lock();
      if (shared != kSuccess || reg->arrived == g.nranks) continue;
    }
    // Ranks of this process wake us; those of others need polling (a few ms at most).
    auto until = c.anyRemote() ? std::min(deadline, Clock::now() + std::chrono::milliseconds(2)) : deadline;
    g.cv.wait_until(glock, until);
    if (Clock::now() >= deadline && !reg->ready && !reg->failed) {
      reg->failed = true;
      reg->holders--;  // a failed registration stays in g.regs (later arrivals see it) until leaveGroup
      g.cv.notify_all();
      int missing = -1;
      for (int r = 0; r < g.nranks && missing < 0; r++) missing = reg->entries[r].arrived ? -1 : r;
      return fail(kSystemError,
                  "regMrSym: collective registration #%lu: %d of %d ranks arrived within %.0f s (rank %d missing; "
                  "every rank must register the same windows in the same order)",
                  static_cast<unsigned long>(seq), reg->arrived, g.nranks, c.config.timeoutSeconds, missing);
    }
  }
  if (shared != kSuccess) {
    reg->failed = true;
    reg->holders--;
    g.cv.notify_all();
    return shared;
  }
  if (reg->failed) {
    reg->holders--;
    return fail(kSystemError, "regMrSym: collective registration #%lu failed", static_cast<unsigned long>(seq));
  }
  MemHandle* h = new MemHandle;
  h->reg = reg;
  h->rank = c.rank;
  h->owner = &c;  // takes over the hold this rank took at arrival
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
  Result settled = kSuccess;
  // Settling may copy or poll on another GPU's stream: the caller's context stays its own.
  cu::ScopedContext keep;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.handles.erase(h) == 0) {
      return fail(kInvalidArgument, "deregMrSym: %p is not a window registered on this collComm", mhandle);
    }
    // Ops still open (never tested done: the caller's error) may read or write this window, and
    // its memory may be freed once this returns: they land first.
    settled = settleLanes(c, "puts before deregistration");
  }
  releaseHandle(c, h);
  return settled;
}

void releaseHandle(CollComm& c, MemHandle* h) {
  Group& g = *c.group;
  std::lock_guard<std::mutex> glock(g.mutex);
  h->reg->entries[h->rank].deregistered.set();
  h->reg->holders--;
  maybeFreeRegistration(g, h->reg);
  delete h;
}

Result leaveGroup(CollComm& c) {
  Group* g = c.group;
  {
    // The last rank out takes the Group out of gGroups under the same lock as connect() looks it
    // up, in one step with leaving: otherwise a rank connecting in between (its peers already
    // closed) would join the Group this one is about to free. A rank that left cannot come back
    // (`closing`): its registrations' entries are gone.
    std::lock_guard<std::mutex> lock(gGroupsMutex);
    std::lock_guard<std::mutex> glock(g->mutex);
    g->members[c.rank] = nullptr;
    g->closing = true;
    if (--g->joined > 0) return kSuccess;
    gGroups->erase(g->key);
  }
  // Signal writes of every rank went through the group's domains: let them land before the
  // streams go away.
  Result result = kSuccess;
  for (auto& d : g->signalDomains) {
    if (!d->timeline) continue;
    if (Result r = drainTimeline(*d->timeline, c.config.timeoutSeconds, "signal writes before close");
        r != kSuccess && result == kSuccess) {
      result = r;
    }
  }
  for (auto& kv : g->regs) delete kv.second;  // registrations some rank never released
  delete g;
  return result;
}

}  // namespace gbl
