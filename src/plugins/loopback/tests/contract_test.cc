// CPU contract tests of the loopback plugin, through its exported tables (ncclNetPlugin_v11,
// ncclGinPlugin_v11, ncclRmaPlugin_v14) the way NCCL calls them: ranks are threads, windows are
// host memory, so the engine's queueing, ordering, signal and completion logic runs with the
// host mover. Bad calls must come back as NCCL errors with a log line, never a crash.
//
// Usage: contract_test [--list] [case...]; prints one line per case and "N passed, M failed".
// (contract_test --child ... is one of the other processes of a multi-process case.)
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "../abi_v11.h"
#include "barrier.h"
#include "harness.h"
#include "../abi_v14.h"
#include "../log.h"
#include "../objects.h"

extern "C" const gbl::NetTableV11 ncclNetPlugin_v11;
extern "C" const gbl::GinTableV11 ncclGinPlugin_v11;
extern "C" const gbl::RmaTableV14 ncclRmaPlugin_v14;
extern "C" const char ginbenchLoopbackVersion[];

using namespace gbl;

// ---- harness -------------------------------------------------------------------------------

std::atomic<int> gFailures{0};
std::mutex gPrintMutex;

void setEnv(const char* name, const char* value) {
  if (value == nullptr) {
    unsetenv(name);
  } else {
    setenv(name, value, 1);
  }
}

// Sets the plugin's environment and re-reads it (init does), as a new NCCL communicator would.
void configure(const char* chaos, const char* brk, const char* timeout) {
  setEnv("GINBENCH_LOOPBACK_CHAOS", chaos);
  setEnv("GINBENCH_LOOPBACK_BREAK", brk);
  setEnv("GINBENCH_LOOPBACK_TIMEOUT", timeout);
  void* ctx = nullptr;
  if (ncclGinPlugin_v11.init(&ctx, 1, nullptr) == kSuccess) ncclGinPlugin_v11.finalize(ctx);
}

static void runRanks(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

// What NCCL's ncclGinConnectOnce does per context: listen, allgather the handles, connect.
struct Handles {
  explicit Handles(int n) : bytes(static_cast<size_t>(n) * kNetHandleMaxSize), ptrs(n) {
    for (int r = 0; r < n; r++) ptrs[r] = bytes.data() + static_cast<size_t>(r) * kNetHandleMaxSize;
  }
  std::vector<char> bytes;
  std::vector<void*> ptrs;
};

// Connects rank `r` of `n` (all ranks call it together), through the v11 or v14 table.
static void* connectRank(bool v14, int r, int n, Handles& h, Barrier& b) {
  void* listenComm = nullptr;
  void* comm = nullptr;
  Result lr = v14 ? ncclRmaPlugin_v14.listen(nullptr, 0, h.ptrs[r], &listenComm)
                  : ncclGinPlugin_v11.listen(nullptr, 0, h.ptrs[r], &listenComm);
  CHECK(lr == kSuccess, "listen failed");
  b.wait();  // the allgather
  // NULL plugin context: what NCCL passes for every communicator after the first.
  Result cr = v14 ? ncclRmaPlugin_v14.connect(nullptr, h.ptrs.data(), n, r, listenComm, &comm)
                  : ncclGinPlugin_v11.connect(nullptr, h.ptrs.data(), n, r, listenComm, &comm);
  CHECK(cr == kSuccess, "connect failed: %s", lastWarning());
  CHECK_OK(v14 ? ncclRmaPlugin_v14.closeListen(listenComm) : ncclGinPlugin_v11.closeListen(listenComm));
  return comm;
}

static void* reg(bool v14, void* comm, void* data, size_t size, uint64_t flags = 0, int type = kPtrHost) {
  void* mh = nullptr;
  void* gh = nullptr;
  Result r = v14 ? ncclRmaPlugin_v14.regMrSym(comm, data, size, type, flags, &mh)
                 : ncclGinPlugin_v11.regMrSym(comm, data, size, type, flags, &mh, &gh);
  CHECK(r == kSuccess, "regMrSym failed: %s", lastWarning());
  if (!v14) CHECK(gh == mh, "ginHandle %p != mhandle %p", gh, mh);
  return mh;
}

// Polls test() until done; returns how many calls it took (0 on failure).
static int waitDone(bool v14, void* comm, void* req) {
  for (int calls = 1; calls < 1000000; calls++) {
    int done = 0;
    Result r = v14 ? ncclRmaPlugin_v14.test(comm, req, &done) : ncclGinPlugin_v11.test(comm, req, &done);
    if (r != kSuccess) {
      CHECK(false, "test failed: %s", lastWarning());
      return 0;
    }
    if (done) return calls;
  }
  CHECK(false, "request never completed");
  return 0;
}

// ---- trace: what became visible, in order (host mover) ----------------------------------------

struct Trace {
  std::mutex mutex;
  std::vector<TraceEvent> events;
  static void hook(const TraceEvent& e, void* user) {
    Trace* t = static_cast<Trace*>(user);
    std::lock_guard<std::mutex> lock(t->mutex);
    t->events.push_back(e);
  }
};

using LaneKey = std::tuple<const void*, int, int>;  // (comm, context, peer)

// GIN 2.28.9's rule: when a signal of lane L, op s becomes visible, every byte of every op <= s
// of L is visible. `sizes` holds each op's byte count per lane, in program order (op 1 first).
// Returns the number of violations.
static int ruleViolations(const std::vector<TraceEvent>& events, const std::map<LaneKey, std::vector<size_t>>& sizes) {
  std::map<std::tuple<const void*, int, int, uint64_t>, size_t> visible;
  int violations = 0;
  for (const TraceEvent& e : events) {
    LaneKey lane{e.comm, e.context, e.peer};
    if (e.type == TraceEvent::Data) {
      visible[{e.comm, e.context, e.peer, e.opSeq}] += e.bytes;
      continue;
    }
    auto it = sizes.find(lane);
    if (it == sizes.end()) continue;
    for (uint64_t s = 1; s <= e.opSeq && s <= it->second.size(); s++) {
      if (visible[{e.comm, e.context, e.peer, s}] != it->second[s - 1]) violations++;
    }
  }
  return violations;
}

// ---- cases ---------------------------------------------------------------------------------

static void caseTables() {
  CHECK(strcmp(ncclNetPlugin_v11.name, "ginbench-loopback") == 0, "net name %s", ncclNetPlugin_v11.name);
  CHECK(strcmp(ncclGinPlugin_v11.name, "ginbench-loopback") == 0, "gin name %s", ncclGinPlugin_v11.name);
  CHECK(strcmp(ncclRmaPlugin_v14.name, "ginbench-loopback") == 0, "rma name %s", ncclRmaPlugin_v14.name);
  CHECK(strstr(ginbenchLoopbackVersion, "ginbench-loopback ") == ginbenchLoopbackVersion, "%s",
        ginbenchLoopbackVersion);
  const NetTableV11& n = ncclNetPlugin_v11;
  CHECK(n.init && n.devices && n.getProperties && n.finalize, "net: required functions missing");
  CHECK(n.listen && n.connect && n.accept && n.regMr && n.deregMr && n.isend && n.irecv && n.iflush && n.test &&
            n.closeSend && n.closeRecv && n.closeListen,
        "net: data path entries missing");
  // NCCL calls these only when non-NULL; the plugin leaves them out (no DMA-BUF, no vNICs).
  CHECK(!n.regMrDmaBuf && !n.getDeviceMr && !n.irecvConsumed && !n.makeVDevice && !n.setNetAttr,
        "net: optional entries must be NULL");
  const GinTableV11& g = ncclGinPlugin_v11;
  CHECK(g.init && g.devices && g.getProperties && g.listen && g.connect && g.regMrSym && g.deregMrSym &&
            g.closeColl && g.closeListen && g.iput && g.iputSignal && g.test && g.finalize,
        "gin: PROXY entries missing");
  CHECK(!g.createContext && !g.destroyContext && !g.regMrSymDmaBuf && !g.queryLastError,
        "gin: createContext/destroyContext/regMrSymDmaBuf/queryLastError must be NULL for PROXY");
  const RmaTableV14& m = ncclRmaPlugin_v14;
  CHECK(m.init && m.devices && m.getProperties && m.listen && m.connect && m.createContext && m.regMrSym &&
            m.deregMrSym && m.destroyContext && m.closeColl && m.closeListen && m.iput && m.iputSignal && m.iget &&
            m.iflush && m.test && m.rmaProgress && m.queryLastError && m.finalize,
        "rma: entries missing");
  CHECK(!m.regMrSymDmaBuf, "rma: no DMA-BUF registration");
}

static void caseProperties() {
  int nd = 0;
  CHECK_OK(ncclNetPlugin_v11.devices(&nd));
  CHECK(nd == 1, "net devices %d", nd);
  NetPropertiesV11 p{};
  CHECK_OK(ncclNetPlugin_v11.getProperties(0, &p));
  CHECK(p.netDeviceType == kNetDeviceHost && p.ptrSupport == kPtrHost && p.pciPath == nullptr && p.maxRecvs == 1,
        "net props type %d ptr %d pci %p maxRecvs %d", p.netDeviceType, p.ptrSupport, p.pciPath, p.maxRecvs);
  CHECK(p.maxP2pBytes > 0 && p.maxCollBytes > 0 && p.speed > 0 && strcmp(p.name, "ginbench-loopback") == 0,
        "net limits");
  CHECK_OK(ncclGinPlugin_v11.devices(&nd));
  CHECK(nd == 1, "gin devices %d", nd);
  CHECK_OK(ncclGinPlugin_v11.getProperties(0, &p));
  CHECK(p.netDeviceType == kNetDeviceGinProxy && p.ptrSupport == (kPtrHost | kPtrCuda) && p.maxRecvs >= 1,
        "gin props type %d ptr %d", p.netDeviceType, p.ptrSupport);
  NetPropertiesV12 q{};
  CHECK_OK(ncclRmaPlugin_v14.getProperties(0, &q));
  CHECK(q.netDeviceType == kNetDeviceGinProxy && (q.ptrSupport & kPtrDmaBuf) == 0 && q.maxRecvs >= 1,
        "rma props type %d ptr %d", q.netDeviceType, q.ptrSupport);
  CHECK_ERR(ncclGinPlugin_v11.getProperties(1, &p), "device 1");
  CHECK_ERR(ncclNetPlugin_v11.getProperties(0, nullptr), "getProperties");
  CHECK_ERR(ncclRmaPlugin_v14.getProperties(-1, &q), "device -1");
  CHECK_ERR(ncclNetPlugin_v11.devices(nullptr), "devices");
}

static void caseInitConfig() {
  void* ctx = nullptr;
  CHECK_OK(ncclNetPlugin_v11.init(&ctx, 7, nullptr, nullptr, nullptr));
  CHECK(ctx != nullptr, "init returned no context");
  CHECK_OK(ncclNetPlugin_v11.finalize(ctx));
  CHECK_OK(ncclGinPlugin_v11.finalize(nullptr));  // later communicators' GIN context is NULL
  CHECK_ERR(ncclGinPlugin_v11.finalize(ctx), "finalize");  // already finalized
  CHECK_ERR(ncclGinPlugin_v11.init(nullptr, 1, nullptr), "init");
  setEnv("GINBENCH_LOOPBACK_CHAOS", "abc");
  CHECK_ERR(ncclGinPlugin_v11.init(&ctx, 1, nullptr), "GINBENCH_LOOPBACK_CHAOS=abc");
  setEnv("GINBENCH_LOOPBACK_CHAOS", "-3");
  CHECK_ERR(ncclRmaPlugin_v14.init(&ctx, 1, nullptr), "GINBENCH_LOOPBACK_CHAOS=-3");
  setEnv("GINBENCH_LOOPBACK_CHAOS", nullptr);
  setEnv("GINBENCH_LOOPBACK_BREAK", "sometimes");
  CHECK_ERR(ncclGinPlugin_v11.init(&ctx, 1, nullptr), "GINBENCH_LOOPBACK_BREAK=sometimes");
  for (const char* bad : {"signal-early:", "signal-early:0", "signal-early:-5", "signal-early:60001",
                          "signal-early:2x", "signal-earlyish"}) {
    setEnv("GINBENCH_LOOPBACK_BREAK", bad);
    CHECK_ERR(ncclGinPlugin_v11.init(&ctx, 1, nullptr), bad);
  }
  setEnv("GINBENCH_LOOPBACK_BREAK", "signal-early:250");
  CHECK_OK(ncclGinPlugin_v11.init(&ctx, 1, nullptr));
  CHECK(currentConfig().breakSignalEarly && currentConfig().breakDelayMs == 250, "signal-early:250 not read");
  ncclGinPlugin_v11.finalize(ctx);
  setEnv("GINBENCH_LOOPBACK_BREAK", "signal-early");
  CHECK_OK(ncclGinPlugin_v11.init(&ctx, 1, nullptr));
  CHECK(currentConfig().breakDelayMs == 20, "signal-early: default delay %u", currentConfig().breakDelayMs);
  ncclGinPlugin_v11.finalize(ctx);
  setEnv("GINBENCH_LOOPBACK_BREAK", nullptr);
  setEnv("GINBENCH_LOOPBACK_TIMEOUT", "0");
  CHECK_ERR(ncclGinPlugin_v11.init(&ctx, 1, nullptr), "GINBENCH_LOOPBACK_TIMEOUT=0");
  setEnv("GINBENCH_LOOPBACK_TIMEOUT", "1e10");  // nanoseconds from now would overflow
  CHECK_ERR(ncclGinPlugin_v11.init(&ctx, 1, nullptr), "GINBENCH_LOOPBACK_TIMEOUT=1e10");
  setEnv("GINBENCH_LOOPBACK_TIMEOUT", nullptr);
  setEnv("GINBENCH_LOOPBACK_LOCAL_COPY", "sm");
  CHECK_ERR(ncclGinPlugin_v11.init(&ctx, 1, nullptr), "GINBENCH_LOOPBACK_LOCAL_COPY=sm");
  for (const char* mode : {"auto", "host", "direct"}) {
    setEnv("GINBENCH_LOOPBACK_LOCAL_COPY", mode);
    CHECK(ncclGinPlugin_v11.init(&ctx, 1, nullptr) == kSuccess, "GINBENCH_LOOPBACK_LOCAL_COPY=%s refused", mode);
    ncclGinPlugin_v11.finalize(ctx);
  }
  setEnv("GINBENCH_LOOPBACK_LOCAL_COPY", nullptr);
  setEnv("GINBENCH_LOOPBACK_SIGNAL_READBACK", "sometimes");
  CHECK_ERR(ncclGinPlugin_v11.init(&ctx, 1, nullptr), "GINBENCH_LOOPBACK_SIGNAL_READBACK=sometimes");
  setEnv("GINBENCH_LOOPBACK_SIGNAL_READBACK", nullptr);
  configure(nullptr, nullptr);
}

// Every rank puts to every rank (itself too) on every one of 4 contexts, with and without
// signals, INC and ADD, signal-only, and inline-style puts from a host "inlines" array.
static void runAllToAll(bool v14, const char* chaos, Trace* trace, int* lateSeen) {
  configure(chaos, nullptr);
  const int n = 4, nctx = 4, slot = 256, nsig = 16;
  Handles handles[nctx] = {Handles(n), Handles(n), Handles(n), Handles(n)};
  Barrier b(n);
  std::vector<std::vector<uint64_t>> sigmem(n, std::vector<uint64_t>(nsig * nctx, 0));
  std::vector<std::vector<char>> win(n, std::vector<char>(static_cast<size_t>(slot) * n * nctx * 2, 0));
  std::mutex sizesMutex;
  std::map<LaneKey, std::vector<size_t>> sizes;
  std::atomic<int> late{0};
  if (trace) setTraceHook(Trace::hook, trace);
  runRanks(n, [&](int r) {
    void* comms[nctx];
    void* ctxs[nctx];
    int ncomm = v14 ? 1 : nctx;  // v14: one connection with nctx contexts
    for (int c = 0; c < ncomm; c++) comms[c] = connectRank(v14, r, n, handles[c], b);
    if (v14) {
      RmaConfigV14 cfg{nctx, 0, 1};
      CHECK_OK(ncclRmaPlugin_v14.createContext(comms[0], &cfg, &ctxs[0]));
    }
    std::vector<char> src(static_cast<size_t>(slot) * n * nctx * 2);
    for (size_t i = 0; i < src.size(); i++) src[i] = static_cast<char>((r * 131 + i * 7) & 0x7f);
    std::vector<uint64_t> inlines(64, 0);
    void *srcH[nctx], *winH[nctx], *sigH[nctx], *inlH[nctx];
    for (int c = 0; c < ncomm; c++) {
      // NCCL's order: signals, inlines, then windows.
      sigH[c] = reg(v14, comms[c], sigmem[r].data(), sigmem[r].size() * 8, kMrFlagForceSo);
      inlH[c] = reg(v14, comms[c], inlines.data(), inlines.size() * 8);
      winH[c] = reg(v14, comms[c], win[r].data(), win[r].size());
      srcH[c] = reg(v14, comms[c], src.data(), src.size());
    }
    b.wait();
    std::vector<std::pair<void*, void*>> reqs;  // (comm, req)
    std::map<LaneKey, std::vector<size_t>> mine;
    for (int c = 0; c < nctx; c++) {
      void* comm = v14 ? comms[0] : comms[c];
      void* opctx = v14 ? ctxs[0] : comms[c];
      int ci = v14 ? 0 : c;
      int context = v14 ? c : 0;
      for (int p = 0; p < n; p++) {
        auto& lane = mine[LaneKey{comm, context, p}];
        size_t off = (static_cast<size_t>(c) * n + r) * slot * 2;
        uint64_t sigOff = static_cast<uint64_t>(c * nsig + r % nsig) * 8;
        void* req = nullptr;
        auto iput = [&](uint64_t so, void* sh, size_t size, uint64_t dof) {
          return v14 ? ncclRmaPlugin_v14.iput(opctx, context, so, sh, size, dof, winH[ci], p, &req)
                     : ncclGinPlugin_v11.iput(comm, so, sh, size, dof, winH[ci], p, &req);
        };
        auto iputSignal = [&](size_t size, uint64_t dof, uint32_t op, uint64_t value) {
          void* sh = size ? srcH[ci] : nullptr;
          void* dh = size ? winH[ci] : nullptr;
          return v14 ? ncclRmaPlugin_v14.iputSignal(opctx, context, dof, sh, size, dof, dh, p, sigOff, sigH[ci], value,
                                                    op, true, &req)
                     : ncclGinPlugin_v11.iputSignal(comm, dof, sh, size, dof, dh, p, sigOff, sigH[ci], value, op,
                                                    &req);
        };
        // 1: plain put of the first half of the slot
        CHECK_OK(iput(off, srcH[ci], slot, off));
        reqs.push_back({comm, req});
        lane.push_back(slot);
        // 2: inline-style 8-byte put from the host inlines array (what putValue becomes)
        int islot = c * n + p;
        inlines[islot] = 0x1100000000000000ull + static_cast<uint64_t>(r * 100 + p);
        CHECK_OK(iput(static_cast<uint64_t>(islot) * 8, inlH[ci], 8, off + slot));
        reqs.push_back({comm, req});
        lane.push_back(8);
        // 3: put + signal INC covering the rest of the second half
        CHECK_OK(iputSignal(slot - 8, off + slot + 8, kSignalOpInc, 0));
        reqs.push_back({comm, req});
        lane.push_back(slot - 8);
        // 4: signal-only ADD 5
        CHECK_OK(iputSignal(0, 0, kSignalOpAdd, 5));
        reqs.push_back({comm, req});
        lane.push_back(0);
      }
    }
    {
      std::lock_guard<std::mutex> lock(sizesMutex);
      for (auto& kv : mine) sizes[kv.first] = kv.second;
    }
    for (auto& cr : reqs) {
      int calls = waitDone(v14, cr.first, cr.second);
      if (calls > 1) late++;
    }
    b.wait();  // every rank's ops are complete: check what landed in this rank's memory
    for (int c = 0; c < nctx; c++) {
      for (int s = 0; s < n; s++) {
        size_t off = (static_cast<size_t>(c) * n + s) * slot * 2;
        bool same = true;
        for (size_t i = 0; i < static_cast<size_t>(slot) * 2; i++) {
          if (i >= static_cast<size_t>(slot) && i < static_cast<size_t>(slot) + 8) continue;
          same = same && win[r][off + i] == static_cast<char>((s * 131 + (off + i) * 7) & 0x7f);
        }
        CHECK(same, "rank %d: data from rank %d on context %d is wrong", r, s, c);
        uint64_t v;
        memcpy(&v, &win[r][off + slot], 8);
        CHECK(v == 0x1100000000000000ull + static_cast<uint64_t>(s * 100 + r), "inline value %lx",
              static_cast<unsigned long>(v));
      }
      for (int k = 0; k < nsig; k++) {
        // Sender s signals word s % nsig of its context: 1 (INC) + 5 (ADD) per sender.
        uint64_t expect = 0;
        for (int s = 0; s < n; s++) expect += (s % nsig == k) ? 6 : 0;
        CHECK(sigmem[r][c * nsig + k] == expect, "rank %d ctx %d signal %d = %lu, expected %lu", r, c, k,
              static_cast<unsigned long>(sigmem[r][c * nsig + k]), static_cast<unsigned long>(expect));
      }
    }
    b.wait();
    if (v14) {
      bool err = true;
      CHECK_OK(ncclRmaPlugin_v14.queryLastError(ctxs[0], &err));
      CHECK(!err, "queryLastError after clean traffic");
    }
    for (int c = 0; c < ncomm; c++) {
      auto dereg = [&](void* h) {
        CHECK_OK(v14 ? ncclRmaPlugin_v14.deregMrSym(comms[c], h) : ncclGinPlugin_v11.deregMrSym(comms[c], h));
      };
      dereg(srcH[c]);
      dereg(winH[c]);
      dereg(inlH[c]);
      dereg(sigH[c]);
      if (v14) CHECK_OK(ncclRmaPlugin_v14.destroyContext(ctxs[0]));
      CHECK_OK(v14 ? ncclRmaPlugin_v14.closeColl(comms[c]) : ncclGinPlugin_v11.closeColl(comms[c]));
    }
  });
  setTraceHook(nullptr, nullptr);
  if (trace) {
    CHECK(ruleViolations(trace->events, sizes) == 0, "a signal became visible before an earlier put of its lane");
  }
  if (lateSeen) *lateSeen = late.load();
  configure(nullptr, nullptr);
}

static void caseAllToAllV11() {
  Trace t;
  runAllToAll(false, nullptr, &t, nullptr);
  CHECK(!t.events.empty(), "no trace events");
}

static void caseAllToAllV14() {
  Trace t;
  runAllToAll(true, nullptr, &t, nullptr);
}

// Chaos keeps every rule and really does reorder, split and report late.
static void caseChaosKeepsRules() {
  for (const char* seed : {"1", "42", "0xdeadbeef"}) {
    Trace t;
    int late = 0;
    runAllToAll(false, seed, &t, &late);
    bool split = false, reordered = false;
    std::map<LaneKey, uint64_t> lastSeq;
    for (const TraceEvent& e : t.events) {
      if (e.type != TraceEvent::Data) continue;
      split = split || e.chunk > 0;
      uint64_t& last = lastSeq[LaneKey{e.comm, e.context, e.peer}];
      reordered = reordered || e.opSeq < last;
      last = std::max(last, e.opSeq);
    }
    CHECK(split, "seed %s: no put was split into chunks", seed);
    CHECK(reordered, "seed %s: no put landed after a later one", seed);
    CHECK(late > 0, "seed %s: no completion was reported late", seed);
    Trace t14;
    runAllToAll(true, seed, &t14, nullptr);
  }
}

// The negative control: the broken mode lets a signal overtake its put, and the rule check sees it.
static void caseBrokenModeIsCaught() {
  configure(nullptr, "signal-early");
  const int n = 2, slot = 64;
  Handles h(n);
  Barrier b(n);
  std::vector<std::vector<char>> win(n, std::vector<char>(slot * n, 0));
  std::vector<std::vector<uint64_t>> sig(n, std::vector<uint64_t>(4, 0));
  Trace t;
  std::mutex sizesMutex;
  std::map<LaneKey, std::vector<size_t>> sizes;
  setTraceHook(Trace::hook, &t);
  runRanks(n, [&](int r) {
    void* comm = connectRank(false, r, n, h, b);
    std::vector<char> src(slot * n, static_cast<char>(r + 1));
    void* sh = reg(false, comm, sig[r].data(), 32);
    void* wh = reg(false, comm, win[r].data(), win[r].size());
    void* srch = reg(false, comm, src.data(), src.size());
    int peer = 1 - r;
    void* req = nullptr;
    CHECK_OK(ncclGinPlugin_v11.iputSignal(comm, 0, srch, slot, r * slot, wh, peer, 0, sh, 0, kSignalOpInc, &req));
    waitDone(false, comm, req);
    {
      std::lock_guard<std::mutex> lock(sizesMutex);
      sizes[LaneKey{comm, 0, peer}] = {static_cast<size_t>(slot)};
    }
    b.wait();
    CHECK_OK(ncclGinPlugin_v11.closeColl(comm));
  });
  setTraceHook(nullptr, nullptr);
  CHECK(ruleViolations(t.events, sizes) > 0, "signal-early did not break the ordering rule");
  configure(nullptr, nullptr);
}

// Signal words are written from a host shadow: a reset by the owner (no op in flight) is picked
// up; with NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET the shadow is trusted instead.
static void caseSignalShadow() {
  for (int mode = 0; mode < 3; mode++) {
    // 0: read back (default); 1: NEVER_RESET flag on the window; 2: SIGNAL_READBACK=never.
    bool neverReset = mode > 0;
    setEnv("GINBENCH_LOOPBACK_SIGNAL_READBACK", mode == 2 ? "never" : nullptr);
    configure(nullptr, nullptr);
    Handles h(1);
    Barrier b(1);
    void* comm = connectRank(false, 0, 1, h, b);
    uint64_t words[2] = {0, 0};
    void* sh = reg(false, comm, words, sizeof words, mode == 1 ? kMrFlagSignalNeverReset : 0);
    void* req = nullptr;
    CHECK_OK(ncclGinPlugin_v11.iputSignal(comm, 0, nullptr, 0, 0, nullptr, 0, 8, sh, 0, kSignalOpInc, &req));
    waitDone(false, comm, req);
    CHECK(words[1] == 1, "first INC gave %lu", static_cast<unsigned long>(words[1]));
    __atomic_store_n(&words[1], 100, __ATOMIC_RELEASE);  // the owner rewrites the word
    CHECK_OK(ncclGinPlugin_v11.iputSignal(comm, 0, nullptr, 0, 0, nullptr, 0, 8, sh, 7, kSignalOpAdd, &req));
    waitDone(false, comm, req);
    uint64_t expect = neverReset ? 8 : 107;
    CHECK(words[1] == expect, "mode %d: after the owner's write, ADD 7 gave %lu (expected %lu)", mode,
          static_cast<unsigned long>(words[1]), static_cast<unsigned long>(expect));
    CHECK(words[0] == 0, "neighbouring word touched");
    CHECK_OK(ncclGinPlugin_v11.closeColl(comm));  // closing releases the registration too
  }
  setEnv("GINBENCH_LOOPBACK_SIGNAL_READBACK", nullptr);
  configure(nullptr, nullptr);
}

// Any number of windows, registered collectively, deregistered in any order, then more.
static void caseManyWindows() {
  configure(nullptr, nullptr);
  const int n = 3, nwin = 40;
  Handles h(n);
  Barrier b(n);
  std::vector<std::vector<std::vector<char>>> mem(n, std::vector<std::vector<char>>(nwin, std::vector<char>(32, 0)));
  runRanks(n, [&](int r) {
    void* comm = connectRank(false, r, n, h, b);
    std::vector<void*> hs;
    for (int w = 0; w < nwin; w++) hs.push_back(reg(false, comm, mem[r][w].data(), 32));
    for (int w = 0; w < nwin; w += 2) CHECK_OK(ncclGinPlugin_v11.deregMrSym(comm, hs[w]));
    CHECK_ERR(ncclGinPlugin_v11.deregMrSym(comm, hs[0]), "deregMrSym");  // twice
    if (r == 1) {  // only rank 1 drops window 1; its stale handle is refused
      void* req = nullptr;
      CHECK_OK(ncclGinPlugin_v11.deregMrSym(comm, hs[1]));
      CHECK_ERR(ncclGinPlugin_v11.iput(comm, 0, hs[3], 8, 0, hs[1], 0, &req), "not a window registered");
    }
    void* extra = reg(false, comm, mem[r][0].data(), 32);
    char value = static_cast<char>(10 + r);
    std::vector<char> src(32, value);
    void* srcH = reg(false, comm, src.data(), 32);
    b.wait();
    void* req = nullptr;
    int peer = (r + 1) % n;
    CHECK_OK(ncclGinPlugin_v11.iput(comm, 0, srcH, 32, 0, extra, peer, &req));
    waitDone(false, comm, req);
    CHECK_OK(ncclGinPlugin_v11.iput(comm, 0, srcH, 16, 16, hs[nwin - 1], peer, &req));
    waitDone(false, comm, req);
    // A put into a window its owner has deregistered is refused.
    if (r == 0) CHECK_ERR(ncclGinPlugin_v11.iput(comm, 0, srcH, 8, 0, hs[1], 1, &req), "rank 1 has deregistered");

    b.wait();
    int from = (r + n - 1) % n;
    CHECK(mem[r][0][31] == static_cast<char>(10 + from), "window 0 of rank %d", r);
    CHECK(mem[r][nwin - 1][20] == static_cast<char>(10 + from) && mem[r][nwin - 1][5] == 0, "last window of rank %d",
          r);
    b.wait();
    CHECK_OK(ncclGinPlugin_v11.closeColl(comm));
  });
}

// A rank that never registers: the others get an error within the timeout, not a hang.
static void caseRegistrationTimeout() {
  configure(nullptr, nullptr, "0.3");
  Handles h(2);
  Barrier b(2);
  char mem[2][64];
  runRanks(2, [&](int r) {
    void* comm = connectRank(false, r, 2, h, b);
    if (r == 0) {
      void* mh = nullptr;
      void* gh = nullptr;
      auto t0 = std::chrono::steady_clock::now();
      CHECK_ERR(ncclGinPlugin_v11.regMrSym(comm, mem[r], 64, kPtrHost, 0, &mh, &gh), "1 of 2 ranks");
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      CHECK(s < 5, "timed out after %.1f s", s);
      CHECK(mh == nullptr, "a failed registration returned a handle");
    }
    b.wait();
    CHECK_OK(ncclGinPlugin_v11.closeColl(comm));
  });
  configure(nullptr, nullptr);
}

// A registration one rank refuses (a NULL address) fails at once for the others, not after
// their timeout, and the next one still pairs every rank's windows.
static void caseRefusedRegistrationKeepsTheOrder() {
  configure(nullptr, nullptr, "5");
  Handles h(2);
  Barrier b(2);
  std::vector<std::vector<char>> mem(2, std::vector<char>(64, 0));
  runRanks(2, [&](int r) {
    void* comm = connectRank(false, r, 2, h, b);
    void* mh = nullptr;
    void* gh = nullptr;
    auto t0 = std::chrono::steady_clock::now();
    if (r == 0) {
      CHECK_ERR(ncclGinPlugin_v11.regMrSym(comm, nullptr, 64, kPtrHost, 0, &mh, &gh), "NULL address");
    } else {
      CHECK_ERR(ncclGinPlugin_v11.regMrSym(comm, mem[r].data(), 64, kPtrHost, 0, &mh, &gh), "failed");
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      CHECK(s < 2, "the other rank's refusal took %.1f s to reach this one", s);
    }
    b.wait();
    CHECK_OK(ncclGinPlugin_v11.regMrSym(comm, mem[r].data(), 64, kPtrHost, 0, &mh, &gh));
    // Paired: a put lands in the peer's window of this registration.
    for (int i = 0; i < 8; i++) mem[r][i] = static_cast<char>(10 * r + i + 1);
    b.wait();
    void* req = nullptr;
    CHECK_OK(ncclGinPlugin_v11.iput(comm, 0, mh, 8, 8, mh, 1 - r, &req));
    waitDone(false, comm, req);
    b.wait();
    for (int i = 0; i < 8; i++) CHECK(mem[r][8 + i] == static_cast<char>(10 * (1 - r) + i + 1), "byte %d on rank %d", i, r);
    CHECK_OK(ncclGinPlugin_v11.deregMrSym(comm, mh));
    CHECK_OK(ncclGinPlugin_v11.closeColl(comm));
  });
  configure(nullptr, nullptr);
}

static void caseBadCalls() {
  configure(nullptr, nullptr);
  const int n = 2;
  Handles h(n);
  Barrier b(n);
  std::vector<std::vector<char>> mem(n, std::vector<char>(64, 0));
  std::vector<std::vector<uint64_t>> sig(n, std::vector<uint64_t>(4, 0));
  runRanks(n, [&](int r) {
    void* comm = connectRank(false, r, n, h, b);
    void* wh = reg(false, comm, mem[r].data(), 64);
    void* sh = reg(false, comm, sig[r].data(), 32);
    void* misaligned = reg(false, comm, reinterpret_cast<char*>(sig[r].data()) + 4, 16);
    b.wait();
    if (r == 0) {
      const GinTableV11& g = ncclGinPlugin_v11;
      void* req = nullptr;
      int bogus = 0;
      CHECK_ERR(g.iput(comm, 0, wh, 8, 0, wh, 1, nullptr), "NULL request");
      CHECK_ERR(g.iput(comm, 0, &bogus, 8, 0, wh, 1, &req), "not a window");
      CHECK_ERR(g.iput(comm, 60, wh, 8, 0, wh, 1, &req), "outside rank 0's window");
      CHECK_ERR(g.iput(comm, 0, wh, 8, ~0ull, wh, 1, &req), "outside rank 1's window");
      CHECK_ERR(g.iput(comm, 0, wh, 8, 0, wh, 2, &req), "rank 2 of 2");
      CHECK_ERR(g.iput(&bogus, 0, wh, 8, 0, wh, 1, &req), "not an open GIN/RMA connection");
      CHECK_ERR(g.iput(nullptr, 0, wh, 8, 0, wh, 1, &req), "not an open GIN/RMA connection");
      CHECK_ERR(g.iputSignal(comm, 0, nullptr, 0, 0, nullptr, 1, 0, sh, 1, 3, &req), "signal op 3");
      CHECK_ERR(g.iputSignal(comm, 0, nullptr, 0, 0, nullptr, 1, 4, sh, 1, kSignalOpInc, &req), "not 8-byte aligned");
      CHECK_ERR(g.iputSignal(comm, 0, nullptr, 0, 0, nullptr, 1, 32, sh, 1, kSignalOpInc, &req), "outside");
      CHECK_ERR(g.iputSignal(comm, 0, nullptr, 0, 0, nullptr, 1, 0, misaligned, 1, kSignalOpInc, &req),
                "signal word at");
      CHECK_ERR(g.iputSignal(comm, 0, nullptr, 0, 0, nullptr, 1, 0, nullptr, 1, kSignalOpInc, &req), "not a window");
      CHECK_ERR(g.iput(comm, 0, nullptr, 8, 0, nullptr, 1, &req), "not a window");
      int done = 0;
      CHECK_ERR(g.test(comm, &bogus, &done), "not an outstanding request");
      CHECK_OK(g.iput(comm, 0, wh, 8, 8, wh, 1, &req));
      CHECK_ERR(g.test(comm, req, nullptr), "NULL done");
      waitDone(false, comm, req);
      CHECK_ERR(g.test(comm, req, &done), "not an outstanding request");  // already completed and freed
      void* mh = nullptr;
      void* gh = nullptr;
      CHECK_ERR(g.regMrSym(comm, mem[r].data(), 64, 7, 0, &mh, &gh), "memory type 7");
      CHECK_ERR(g.regMrSym(comm, nullptr, 64, kPtrHost, 0, &mh, &gh), "NULL address");
      CHECK_ERR(g.regMrSym(comm, mem[r].data(), 64, kPtrHost, 0, &mh, nullptr), "ginHandle");
      // Device memory without a usable GPU (or a host pointer claimed to be device memory).
      CHECK_ERR(g.regMrSym(comm, mem[r].data(), 64, kPtrCuda, 0, &mh, &gh), "CUDA");
      CHECK_ERR(g.deregMrSym(comm, &bogus), "deregMrSym");
      CHECK_ERR(g.closeColl(&bogus), "closeColl");
      CHECK_ERR(g.closeListen(&bogus), "closeListen");
      CHECK_ERR(g.listen(nullptr, 3, &bogus, &mh), "device 3");
      CHECK_ERR(g.listen(nullptr, 0, nullptr, &mh), "listen");
    }
    b.wait();
    CHECK_OK(ncclGinPlugin_v11.closeColl(comm));
    CHECK_ERR(ncclGinPlugin_v11.closeColl(comm), "closeColl");  // twice
    void* req = nullptr;
    CHECK_ERR(ncclGinPlugin_v11.iput(comm, 0, wh, 8, 0, wh, 0, &req), "not an open");  // after close
  });
  // connect with bad arguments
  void* l = nullptr;
  Handles one(1);
  CHECK_OK(ncclGinPlugin_v11.listen(nullptr, 0, one.ptrs[0], &l));
  void* comm = nullptr;
  CHECK_ERR(ncclGinPlugin_v11.connect(nullptr, one.ptrs.data(), 1, 1, l, &comm), "rank 1 of 1");
  CHECK_ERR(ncclGinPlugin_v11.connect(nullptr, one.ptrs.data(), 0, 0, l, &comm), "rank 0 of 0");
  CHECK_ERR(ncclGinPlugin_v11.connect(nullptr, nullptr, 1, 0, l, &comm), "NULL handles");
  Handles junk(1);
  memset(junk.bytes.data(), 0x5a, junk.bytes.size());
  CHECK_ERR(ncclGinPlugin_v11.connect(nullptr, junk.ptrs.data(), 1, 0, l, &comm), "not made by ginbench-loopback");
  // This rank's slot must hold this rank's own handle (not one of another process).
  WireHandle w;
  memcpy(&w, one.ptrs[0], sizeof w);
  w.processNonce ^= 1;
  memcpy(junk.ptrs[0], &w, sizeof w);
  CHECK_ERR(ncclGinPlugin_v11.connect(nullptr, junk.ptrs.data(), 1, 0, l, &comm), "not the handle of this rank");
  CHECK_OK(ncclGinPlugin_v11.closeListen(l));
  CHECK_ERR(ncclGinPlugin_v11.connect(nullptr, one.ptrs.data(), 1, 0, l, &comm), "not an open listen comm");
}

// v14 specifics: contexts, get, flush, progress, queryLastError, the rmaCtx's lifetime.
static void caseRmaSpecifics() {
  configure("7", nullptr);
  const int n = 2, size = 128;
  Handles h(n);
  Barrier b(n);
  std::vector<std::vector<char>> mem(n, std::vector<char>(size * 2, 0));
  runRanks(n, [&](int r) {
    const RmaTableV14& m = ncclRmaPlugin_v14;
    void* comm = connectRank(true, r, n, h, b);
    void* ctx = nullptr;
    RmaConfigV14 cfg{3, -1, 1};
    CHECK_OK(m.createContext(comm, &cfg, &ctx));
    // A second set on the same connection, as NCCL >= 2.30 makes one per device communicator:
    // its contexts are its own (0 and 1 here), and signals on them reach the peer.
    void* second = nullptr;
    RmaConfigV14 two{2, -1, 1};
    CHECK_OK(m.createContext(comm, &two, &second));
    for (int i = 0; i < size; i++) mem[r][i] = static_cast<char>(r * 50 + i % 50);
    void* wh = reg(true, comm, mem[r].data(), mem[r].size());
    b.wait();
    int peer = 1 - r;
    void* req = nullptr;
    // get the peer's first half into our second half, on context 2
    CHECK_OK(m.iget(ctx, 2, 0, wh, size, size, wh, peer, &req));
    CHECK_OK(m.rmaProgress(ctx));
    void* fl = nullptr;
    CHECK_OK(m.iflush(ctx, 2, wh, peer, &fl));
    waitDone(true, comm, fl);
    waitDone(true, comm, req);
    bool ok = true;
    for (int i = 0; i < size; i++) ok = ok && mem[r][size + i] == static_cast<char>(peer * 50 + i % 50);
    CHECK(ok, "iget data wrong on rank %d", r);
    bool err = true;
    CHECK_OK(m.queryLastError(ctx, &err));
    CHECK(!err, "error reported after clean traffic");
    // The second set: a put with a signal on its context 1 lands on the peer (word 0 of the
    // window's second half, after the get above read it).
    uint64_t* word = reinterpret_cast<uint64_t*>(mem[r].data() + size);
    const uint64_t before = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    b.wait();
    void* sreq = nullptr;
    CHECK_OK(m.iputSignal(second, 1, 0, wh, 8, size + 8, wh, peer, size, wh, 1, kSignalOpInc, true, &sreq));
    waitDone(true, comm, sreq);
    b.wait();
    for (int spin = 0; spin < 100000 && __atomic_load_n(word, __ATOMIC_ACQUIRE) == before; spin++) {
      CHECK_OK(m.rmaProgress(second));
    }
    CHECK(__atomic_load_n(word, __ATOMIC_ACQUIRE) == before + 1, "no signal through the second rmaCtx on rank %d", r);
    CHECK_ERR(m.iput(second, 2, 0, wh, 8, 0, wh, peer, &req), "context 2, the rmaCtx has 2");
    CHECK_OK(m.queryLastError(ctx, &err));
    CHECK(err, "queryLastError does not report the failed call");
    CHECK_OK(m.destroyContext(second));
    // The limit is on live contexts: device communicators made and destroyed one after another
    // may number more than 1024 over the connection's life.
    for (int i = 0; i < 5; i++) {
      void* set = nullptr;
      RmaConfigV14 many{256, -1, 1};
      CHECK_OK(m.createContext(comm, &many, &set));
      CHECK_OK(m.destroyContext(set));
    }
    CHECK_ERR(m.iput(ctx, 3, 0, wh, 8, 0, wh, peer, &req), "context 3, the rmaCtx has 3");
    CHECK_OK(m.queryLastError(ctx, &err));
    CHECK(err, "queryLastError does not report the failed call");
    b.wait();
    CHECK_OK(m.destroyContext(ctx));
    CHECK_ERR(m.iput(ctx, 0, 0, wh, 8, 0, wh, peer, &req), "not a live RMA context");
    CHECK_ERR(m.rmaProgress(ctx), "not a live RMA context");
    CHECK_OK(m.deregMrSym(comm, wh));
    CHECK_OK(m.closeColl(comm));
  });
  configure(nullptr, nullptr);
}

// Pieces chaos holds back on a rank's lanes.
static size_t heldPieces(void* comm) {
  size_t n = 0;
  for (const Lane& lane : static_cast<CollComm*>(comm)->lanes) n += lane.held.size();
  return n;
}

// Rank r of 2, under chaos: connects, registers `dst` (its window) and `src`, and puts all of src
// into the peer's window in 16 pieces it never tests; asserts that chaos held some back.
struct HeldPuts {
  void* comm;
  void* wh;
  void* sh;
};
static HeldPuts putHeldBack(int r, int n, Handles& h, Barrier& b, std::vector<char>& dst, std::vector<char>& src) {
  void* comm = connectRank(false, r, n, h, b);
  void* wh = reg(false, comm, dst.data(), dst.size());
  void* sh = reg(false, comm, src.data(), src.size());
  b.wait();
  for (int i = 0; i < 16; i++) {
    void* req = nullptr;
    const size_t piece = src.size() / 16;
    CHECK_OK(ncclGinPlugin_v11.iput(comm, i * piece, sh, piece, i * piece, wh, 1 - r, &req));
  }
  CHECK(heldPieces(comm) > 0, "rank %d: chaos held nothing back, the case tests nothing", r);
  return HeldPuts{comm, wh, sh};
}

// Closing with operations still held back by chaos and never tested: they are issued, the
// connection closes, nothing hangs. Rank 0 closes first, so its puts land in rank 1's window;
// rank 1's held puts to rank 0's window, deregistered by then, are dropped (and close succeeds).
static void caseCloseWithOutstanding() {
  configure("99", nullptr);
  const int n = 2, size = 4096;
  Handles h(n);
  Barrier b(n);
  std::vector<std::vector<char>> mem(n, std::vector<char>(size, 0));
  runRanks(n, [&](int r) {
    std::vector<char> src(size, static_cast<char>(r + 1));
    HeldPuts p = putHeldBack(r, n, h, b, mem[r], src);
    b.wait();
    if (r == 0) CHECK_OK(ncclGinPlugin_v11.closeColl(p.comm));
    b.wait();
    if (r == 1) {
      CHECK_OK(ncclGinPlugin_v11.closeColl(p.comm));
      bool ok = true;
      for (int i = 0; i < size; i++) ok = ok && mem[1][i] == 1;
      CHECK(ok, "rank 0's held puts were lost at its close");
    }
  });
  configure(nullptr, nullptr);
}

// Deregistering a window with puts from it still open (never tested: the caller's error) lands
// them first, so the window's memory may be freed once deregMrSym returns.
static void caseDeregSettlesHeld() {
  configure("99", nullptr);
  const int n = 2, size = 4096;
  Handles h(n);
  Barrier b(n);
  std::vector<std::vector<char>> mem(n, std::vector<char>(size, 0));
  runRanks(n, [&](int r) {
    std::vector<char> src(size, static_cast<char>(r + 1));
    HeldPuts p = putHeldBack(r, n, h, b, mem[r], src);
    CHECK_OK(ncclGinPlugin_v11.deregMrSym(p.comm, p.sh));
    std::fill(src.begin(), src.end(), 0);  // as if freed: nothing may read it any more
    b.wait();
    bool ok = true;
    for (int i = 0; i < size; i++) ok = ok && mem[r][i] == static_cast<char>(2 - r);
    CHECK(ok, "rank %d: puts from a deregistered window had not landed", r);
    CHECK(heldPieces(p.comm) == 0, "rank %d: pieces still held after deregistration", r);
    b.wait();
    CHECK_OK(ncclGinPlugin_v11.deregMrSym(p.comm, p.wh));
    CHECK_OK(ncclGinPlugin_v11.closeColl(p.comm));
  });
  configure(nullptr, nullptr);
}

// A peer deregisters the destination of puts chaos still holds back: they are dropped with an
// error, never written into memory that is no longer registered, and their ops fail when tested.
static void casePeerDeregDropsHeld() {
  configure("99", nullptr);
  const int n = 2, size = 4096;
  Handles h(n);
  Barrier b(n);
  std::vector<char> dst(size, 0), src(size, 7);
  runRanks(n, [&](int r) {
    void* comm = connectRank(false, r, n, h, b);
    void* wh = reg(false, comm, r == 1 ? dst.data() : src.data(), size);
    void* sh = reg(false, comm, src.data(), size);
    b.wait();
    std::vector<void*> reqs(16, nullptr);
    if (r == 0) {
      for (int i = 0; i < 16; i++) CHECK_OK(ncclGinPlugin_v11.iput(comm, i * 256, sh, 256, i * 256, wh, 1, &reqs[i]));
      CHECK(heldPieces(comm) > 0, "chaos held nothing back, the case tests nothing");
    }
    b.wait();
    if (r == 1) {
      CHECK_OK(ncclGinPlugin_v11.deregMrSym(comm, wh));
      std::fill(dst.begin(), dst.end(), 0x55);  // reused by the program
    }
    b.wait();
    if (r == 0) {  // progress issues held pieces as their holds run out
      bool refused = false;
      for (int i = 0; i < 1000 && heldPieces(comm) > 0; i++) {
        if (ncclGinPlugin_v11.ginProgress(comm) != kSuccess) {
          refused = refused || strstr(lastWarning(), "deregistered a window while") != nullptr;
        }
      }
      CHECK(heldPieces(comm) == 0, "%zu pieces still held after 1000 progress calls", heldPieces(comm));
      CHECK(refused, "no error for puts into a deregistered window");
      bool untouched = true;
      for (int i = 0; i < size; i++) untouched = untouched && dst[i] == 0x55;
      CHECK(untouched, "a held put was written into a deregistered window");
      // Every op ends, done or (one piece dropped at least) failed, and a failed one stays so;
      // then the connection refuses new ops, so NCCL (which ignores test's result) stops.
      int failed = 0;
      for (size_t k = 0; k < reqs.size(); k++) {
        int done = 0;
        bool bad = false;
        for (int i = 0; i < 100000 && !done && !bad; i++) {
          bad = ncclGinPlugin_v11.test(comm, reqs[k], &done) != kSuccess;
        }
        CHECK(done || bad, "op %zu neither completed nor failed", k);
        if (!bad) continue;
        CHECK(strstr(lastWarning(), "to rank 1 never landed: that rank deregistered its window") != nullptr,
              "test failed: %s", lastWarning());
        CHECK(ncclGinPlugin_v11.test(comm, reqs[k], &done) != kSuccess && !done, "op %zu: failed, then done", k);
        failed++;
      }
      CHECK(failed > 0, "every op with a dropped piece reported success");
      void* later = nullptr;
      CHECK(ncclGinPlugin_v11.iput(comm, 0, sh, 8, 0, wh, 0, &later) != kSuccess, "an op after lost data went ahead");
      CHECK(strstr(lastWarning(), "fails from here on") != nullptr, "iput failed: %s", lastWarning());
      CHECK_OK(ncclGinPlugin_v11.deregMrSym(comm, wh));
    }
    b.wait();
    CHECK_OK(ncclGinPlugin_v11.deregMrSym(comm, sh));
    CHECK_OK(ncclGinPlugin_v11.closeColl(comm));
  });
  configure(nullptr, nullptr);
}

// A rank that closed cannot connect again into the connection its peers still hold (with the
// same handles): its registrations there are gone.
static void caseRejoinRefused() {
  configure(nullptr, nullptr);
  const int n = 2;
  Handles h(n);
  void* listens[2] = {nullptr, nullptr};
  void* comms[2] = {nullptr, nullptr};
  for (int r = 0; r < n; r++) CHECK_OK(ncclGinPlugin_v11.listen(nullptr, 0, h.ptrs[r], &listens[r]));
  for (int r = 0; r < n; r++) CHECK_OK(ncclGinPlugin_v11.connect(nullptr, h.ptrs.data(), n, r, listens[r], &comms[r]));
  CHECK_OK(ncclGinPlugin_v11.closeColl(comms[1]));
  void* again = nullptr;
  CHECK_ERR(ncclGinPlugin_v11.connect(nullptr, h.ptrs.data(), n, 1, listens[1], &again), "already closed it");
  CHECK(again == nullptr, "a refused connect returned a connection");
  CHECK_OK(ncclGinPlugin_v11.closeColl(comms[0]));
  for (void* l : listens) CHECK_OK(ncclGinPlugin_v11.closeListen(l));
}

// A process that drives every GPU as a thread of its own, creating and destroying communicators
// one after the other: every rank's init, listen/connect of 4 contexts, collective registrations
// (NCCL's signal array and inlines first, then windows), puts + signals while a progress thread
// per rank polls, a window registered and at once deregistered, deregistrations and closes in a
// different order on every rank, and no barrier between one communicator's close and the next
// one's connect. Under a sanitizer (see README) this finds races between the ranks' calls.
static void runLifecycles(int n, int rounds) {
  configure(nullptr, nullptr);
  const int nctx = 4, nwin = 3, size = 256, nsig = 8;
  std::vector<Handles> handles;
  for (int i = 0; i < rounds * nctx; i++) handles.emplace_back(n);
  Barrier b(n);
  // [rank][window]: stays allocated across rounds (a rank may still be closing the previous
  // round while its peers register the next one's).
  std::vector<std::vector<std::vector<char>>> mem(
      n, std::vector<std::vector<char>>(nwin, std::vector<char>(static_cast<size_t>(size) * n, 0)));
  std::vector<std::vector<uint64_t>> sigmem(n, std::vector<uint64_t>(nsig * nctx, 0));
  runRanks(n, [&](int r) {
    std::vector<uint64_t> inlines(64, 0);
    std::vector<char> src(size, static_cast<char>(r + 1));
    for (int round = 0; round < rounds; round++) {
      void* inst = nullptr;
      CHECK_OK(ncclGinPlugin_v11.init(&inst, static_cast<uint64_t>(round), nullptr));
      void* comms[nctx];
      void *sigH[nctx], *inlH[nctx], *srcH[nctx], *winH[nctx][nwin];
      for (int c = 0; c < nctx; c++) {
        comms[c] = connectRank(false, r, n, handles[static_cast<size_t>(round) * nctx + c], b);
        sigH[c] = reg(false, comms[c], sigmem[r].data(), sigmem[r].size() * 8, kMrFlagForceSo);
        inlH[c] = reg(false, comms[c], inlines.data(), inlines.size() * 8);
      }
      // NCCL's GIN progress thread: polls every context while this thread registers and puts.
      std::atomic<bool> stop{false};
      std::thread progress([&] {
        while (!stop.load()) {
          for (int c = 0; c < nctx; c++) CHECK_OK(ncclGinPlugin_v11.ginProgress(comms[c]));
          std::this_thread::yield();
        }
      });
      for (int c = 0; c < nctx; c++) {
        srcH[c] = reg(false, comms[c], src.data(), src.size());
        for (int w = 0; w < nwin; w++) winH[c][w] = reg(false, comms[c], mem[r][w].data(), mem[r][w].size());
      }
      const int peer = (r + 1 + round) % n;
      for (int c = 0; c < nctx; c++) {
        void* req = nullptr;
        uint64_t off = static_cast<uint64_t>(r) * size;
        CHECK_OK(ncclGinPlugin_v11.iputSignal(comms[c], 0, srcH[c], size, off, winH[c][round % nwin], peer,
                                              static_cast<uint64_t>(c * nsig + r % nsig) * 8, sigH[c], 0,
                                              kSignalOpInc, &req));
        if (req != nullptr) waitDone(false, comms[c], req);
      }
      b.wait();  // every put has landed: the windows may go
      // A window registered and dropped at once: the first rank back from the collective
      // registration deregisters while the others may not have woken up from it yet.
      for (int c = 0; c < nctx; c++) {
        void* tmp = reg(false, comms[c], mem[r][0].data(), 64);
        if (tmp != nullptr) CHECK_OK(ncclGinPlugin_v11.deregMrSym(comms[c], tmp));
      }
      stop = true;
      progress.join();
      for (int k = 0; k < nctx; k++) {
        int c = (k + r) % nctx;  // every rank tears its contexts down in another order
        for (int w = 0; w < nwin; w++) CHECK_OK(ncclGinPlugin_v11.deregMrSym(comms[c], winH[c][(w + r) % nwin]));
        if (r % 2 == 0) {
          CHECK_OK(ncclGinPlugin_v11.deregMrSym(comms[c], srcH[c]));
          CHECK_OK(ncclGinPlugin_v11.deregMrSym(comms[c], inlH[c]));
          CHECK_OK(ncclGinPlugin_v11.deregMrSym(comms[c], sigH[c]));
        }
        // Odd ranks leave srcH, inlH and sigH to closeColl.
        CHECK_OK(ncclGinPlugin_v11.closeColl(comms[c]));
      }
      CHECK_OK(ncclGinPlugin_v11.finalize(inst));
    }
  });
  // Every round put one INC per context into word (sender % nsig) of its peer.
  uint64_t total = 0;
  for (int r = 0; r < n; r++) {
    for (uint64_t v : sigmem[r]) total += v;
  }
  CHECK(total == static_cast<uint64_t>(n) * rounds * nctx, "%lu signals arrived, expected %d",
        static_cast<unsigned long>(total), n * rounds * nctx);
}

static void caseConcurrentLifecycles4() { runLifecycles(4, 20); }
static void caseConcurrentLifecycles8() { runLifecycles(8, 6); }

// A rank may connect while the other ranks of its group already closed (no registration made
// them wait for each other): it must join a live group or start a new one, never the one the
// last rank out is freeing.
static void caseConnectWhileLastLeaves() {
  configure(nullptr, nullptr);
  const int n = 2, rounds = 300;
  std::vector<Handles> handles;
  for (int i = 0; i < rounds; i++) handles.emplace_back(n);
  Barrier b(n);
  runRanks(n, [&](int r) {
    for (int round = 0; round < rounds; round++) {
      void* comm = connectRank(false, r, n, handles[static_cast<size_t>(round)], b);
      if (comm != nullptr) CHECK_OK(ncclGinPlugin_v11.closeColl(comm));
    }
  });
}

// ---- main ----------------------------------------------------------------------------------

struct Case {
  const char* name;
  void (*fn)();
};

// tests/multiprocess.cc
void caseNetOneProcess();
void caseNetTwoProcesses();
void caseNetPeerDies();
void caseMultiProcessV11();
void caseMultiProcessV14();
void caseMultiProcessChaos();
void caseMultiProcessBroken();
void caseMultiProcessPeerDeath();
void caseExitWhileBusy();
void caseSignalWaitsForItsWindow();
void caseSignalWaitsPerContext();
void caseClosedPeerFailsAlone();
int childMain(int argc, char** argv);

static const Case kCases[] = {
    {"tables", caseTables},
    {"properties", caseProperties},
    {"init_config", caseInitConfig},
    {"net_one_process", caseNetOneProcess},
    {"net_two_processes", caseNetTwoProcesses},
    {"net_peer_dies", caseNetPeerDies},
    {"alltoall_v11", caseAllToAllV11},
    {"alltoall_v14", caseAllToAllV14},
    {"chaos_keeps_rules", caseChaosKeepsRules},
    {"broken_mode_is_caught", caseBrokenModeIsCaught},
    {"signal_shadow", caseSignalShadow},
    {"many_windows", caseManyWindows},
    {"registration_timeout", caseRegistrationTimeout},
    {"bad_calls", caseBadCalls},
    {"refused_registration_keeps_the_order", caseRefusedRegistrationKeepsTheOrder},
    {"rma_specifics", caseRmaSpecifics},
    {"close_with_outstanding", caseCloseWithOutstanding},
    {"dereg_settles_held", caseDeregSettlesHeld},
    {"peer_dereg_drops_held", casePeerDeregDropsHeld},
    {"rejoin_refused", caseRejoinRefused},
    {"concurrent_lifecycles_4", caseConcurrentLifecycles4},
    {"concurrent_lifecycles_8", caseConcurrentLifecycles8},
    {"connect_while_last_leaves", caseConnectWhileLastLeaves},
    {"processes_v11", caseMultiProcessV11},
    {"processes_v14", caseMultiProcessV14},
    {"processes_chaos", caseMultiProcessChaos},
    {"processes_broken_mode_is_caught", caseMultiProcessBroken},
    {"processes_peer_death", caseMultiProcessPeerDeath},
    {"exit_while_busy", caseExitWhileBusy},
    {"processes_signal_waits_for_its_window", caseSignalWaitsForItsWindow},
    {"processes_signal_waits_per_context", caseSignalWaitsPerContext},
    {"processes_closed_peer_fails_alone", caseClosedPeerFailsAlone},
};

// Stands in for NCCL's logger: the bad-call cases provoke many warnings on purpose.
static void quietLogger(int level, unsigned long, const char*, int, const char* fmt, ...) {
  if (getenv("CONTRACT_TEST_VERBOSE") == nullptr || level > kLogWarn) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
}

int main(int argc, char** argv) {
  // The other processes of the multi-process cases: this program, re-executed.
  if (argc > 1 && strcmp(argv[1], "--child") == 0) return childMain(argc, argv);
  setLogger(quietLogger);
  if (argc > 1 && strcmp(argv[1], "--list") == 0) {
    for (const Case& c : kCases) printf("%s\n", c.name);
    return 0;
  }
  int passed = 0, failed = 0;
  for (const Case& c : kCases) {
    bool selected = argc == 1;
    for (int i = 1; i < argc; i++) selected = selected || strcmp(argv[i], c.name) == 0;
    if (!selected) continue;
    int before = gFailures.load();
    c.fn();
    bool ok = gFailures.load() == before;
    printf("case %s ... %s\n", c.name, ok ? "ok" : "FAILED");
    fflush(stdout);
    (ok ? passed : failed)++;
  }
  if (passed + failed == 0) {
    fprintf(stderr, "contract_test: no case matches; --list shows them\n");
    return 2;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
