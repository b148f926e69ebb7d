// GPU smoke test of the loopback plugin's device path (needs GPUs; built by build_support.rs
// where cuda.h is available, run by hand or by a GPU CI script):
//   ginbench-loopback-gpu-smoke <path/to/libnccl-net-ginbench.so>
//   ginbench-loopback-gpu-smoke <path/to/libnccl-net-ginbench.so> --processes [N]
// Loads the plugin with dlopen the way NCCL does and drives ncclGinPlugin_v11 with cuMem device
// windows on every GPU (up to 4, one thread per rank, like NCCL's setup threads). Each rank
// launches a kernel that fills every SM and spins on its signal word (the deadlock case: no SM is
// left for a signal kernel); every rank then puts + signals into every rank, itself included,
// from a fresh thread with no CUDA context (NCCL's proxy thread sets none). When the kernel sees
// the signal it checks the data is already there. Rounds: plain, after a device-side reset of the
// signal (read-back path), under chaos; then a bandwidth figure for rank 0 -> 1 and 0 -> 0, and
// the time per small put + signal, alone and while the destination's SMs spin on the signal.
// With --processes, N processes (default 2; a GPU each: two processes whose kernels hold every SM
// of one GPU run in turns, and each starves the other's copies, so fewer GPUs is refused) are
// one rank each, as under MPI with virtual nodes: windows are cuMem allocations with POSIX-FD
// handles (exported, passed over the plugin's channels, mapped by the others), the signal array
// has handle type NONE as NCCL's (signals travel as messages, applied by the owner's
// ginProgress), and every rank's kernel holds every SM while it waits. One plain round and one
// under chaos.
// Exit 0: passed; 1: failed; 8: no GPU or no driver.
#include <cuda.h>
#include <dlfcn.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../abi_v11.h"
#include "barrier.h"

using namespace gbl;
using Clock = std::chrono::steady_clock;

// ---- the driver, through dlopen (the binary links no CUDA library) -------------------------------
#define GBL_STR2(x) #x
#define GBL_STR(x) GBL_STR2(x)
#define GBL_FN(fn) static decltype(&fn) p_##fn = nullptr;
#define GBL_LOAD(fn)                                                       \
  p_##fn = reinterpret_cast<decltype(&fn)>(dlsym(lib, GBL_STR(fn)));       \
  if (p_##fn == nullptr) {                                                 \
    fprintf(stderr, "gpu-smoke: driver lacks %s\n", GBL_STR(fn));          \
    return false;                                                          \
  }
#define GBL_FUNCS(X)                                                                                         \
  X(cuInit) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent) \
  X(cuDeviceGetAttribute) X(cuMemGetAllocationGranularity) X(cuMemCreate) X(cuMemAddressReserve) X(cuMemMap) \
  X(cuMemSetAccess) X(cuMemUnmap) X(cuMemAddressFree) X(cuMemRelease) X(cuMemsetD8) X(cuMemcpyDtoH)           \
  X(cuMemsetD32Async) X(cuStreamCreate) X(cuStreamQuery) X(cuStreamSynchronize) X(cuStreamDestroy)           \
  X(cuModuleLoadData) X(cuModuleGetFunction) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuLaunchKernel) \
  X(cuGetErrorString)
GBL_FUNCS(GBL_FN)

static bool loadDriver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) return false;
  GBL_FUNCS(GBL_LOAD)
  return p_cuInit(0) == CUDA_SUCCESS;
}

static std::atomic<int> gFailures{0};
#define CU(call)                                                                               \
  do {                                                                                         \
    CUresult s_ = (call);                                                                      \
    if (s_ != CUDA_SUCCESS) {                                                                  \
      const char* t_ = "?";                                                                    \
      p_cuGetErrorString(s_, &t_);                                                             \
      fprintf(stderr, "gpu-smoke: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, t_);     \
      gFailures++;                                                                             \
    }                                                                                          \
  } while (0)
#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (!(cond)) {                                              \
      fprintf(stderr, "gpu-smoke: %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                             \
      fprintf(stderr, "\n");                                    \
      gFailures++;                                              \
    }                                                           \
  } while (0)

// Spins (every thread of every block) until *sig >= target or the timeout, then thread 0 checks
// the first and last 8 bytes of every slot hold (slot index + 1) in every byte.
// result: 1 ok, 2 data missing when the signal was seen, 3 timed out.
static const char* kPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry gbl_wait(.param .u64 p_sig, .param .u64 p_target, .param .u64 p_slots, .param .u32 p_nslots,
                         .param .u64 p_slot_bytes, .param .u64 p_result, .param .u64 p_timeout)
{
  .reg .pred %p<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<20>;
  ld.param.u64 %rd1, [p_sig];
  ld.param.u64 %rd2, [p_target];
  ld.param.u64 %rd3, [p_slots];
  ld.param.u32 %r1, [p_nslots];
  ld.param.u64 %rd4, [p_slot_bytes];
  ld.param.u64 %rd5, [p_result];
  ld.param.u64 %rd6, [p_timeout];
  mov.u64 %rd7, %globaltimer;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  or.b32 %r4, %r2, %r3;
  setp.ne.u32 %p3, %r4, 0;
WAIT:
  ld.acquire.sys.global.u64 %rd8, [%rd1];
  setp.ge.u64 %p1, %rd8, %rd2;
  @%p1 bra SEEN;
  mov.u64 %rd9, %globaltimer;
  sub.u64 %rd10, %rd9, %rd7;
  setp.gt.u64 %p2, %rd10, %rd6;
  @%p2 bra TIMEOUT;
  bra WAIT;
TIMEOUT:
  @%p3 bra DONE;
  st.global.u32 [%rd5], 3;
  bra DONE;
SEEN:
  @%p3 bra DONE;
  mov.u32 %r5, 0;
  mov.u32 %r6, 1;
LOOP:
  setp.ge.u32 %p1, %r5, %r1;
  @%p1 bra REPORT;
  cvt.u64.u32 %rd11, %r5;
  mul.lo.u64 %rd12, %rd11, %rd4;
  add.u64 %rd13, %rd3, %rd12;
  add.u64 %rd14, %rd11, 1;
  mul.lo.u64 %rd15, %rd14, 72340172838076673;
  ld.volatile.global.u64 %rd16, [%rd13];
  setp.ne.u64 %p2, %rd16, %rd15;
  @%p2 mov.u32 %r6, 2;
  add.u64 %rd17, %rd13, %rd4;
  sub.u64 %rd17, %rd17, 8;
  ld.volatile.global.u64 %rd16, [%rd17];
  setp.ne.u64 %p2, %rd16, %rd15;
  @%p2 mov.u32 %r6, 2;
  add.u32 %r5, %r5, 1;
  bra LOOP;
REPORT:
  st.global.u32 [%rd5], %r6;
DONE:
  ret;
}
)";

struct DevBuf {  // a cuMem allocation, as ncclMemAlloc makes them
  CUdeviceptr ptr = 0;
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
};

static DevBuf devAlloc(int dev, size_t bytes, CUmemAllocationHandleType handles = CU_MEM_HANDLE_TYPE_NONE) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = handles;
  size_t gran = 0;
  CU(p_cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  DevBuf b;
  b.size = (bytes + gran - 1) / gran * gran;
  CU(p_cuMemCreate(&b.handle, b.size, &prop, 0));
  CU(p_cuMemAddressReserve(&b.ptr, b.size, gran, 0, 0));
  CU(p_cuMemMap(b.ptr, b.size, 0, b.handle, 0));
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CU(p_cuMemSetAccess(b.ptr, b.size, &acc, 1));
  CU(p_cuMemsetD8(b.ptr, 0, b.size));
  return b;
}

static void devFree(DevBuf& b) {
  CU(p_cuMemUnmap(b.ptr, b.size));
  CU(p_cuMemAddressFree(b.ptr, b.size));
  CU(p_cuMemRelease(b.handle));
}

static const GinTableV11* gGin = nullptr;

static bool waitRequests(void* comm, std::vector<void*>& reqs, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (!reqs.empty()) {
    for (size_t i = 0; i < reqs.size();) {
      int done = 0;
      if (gGin->test(comm, reqs[i], &done) != kSuccess) return false;
      if (done) {
        reqs[i] = reqs.back();
        reqs.pop_back();
      } else {
        i++;
      }
    }
    if (Clock::now() > deadline) return false;
    if (gGin->ginProgress) gGin->ginProgress(comm);
  }
  return true;
}

struct Rank {
  int dev;
  CUcontext ctx;
  CUstream kernelStream, aux;
  CUfunction wait;
  int blocks;
  DevBuf win, sig, src;
  std::vector<uint64_t> inlines;
  void* comm = nullptr;
  void *winH, *sigH, *srcH, *inlH;
};

static const size_t kSlot = 4 << 20;  // bytes per sender slot

// Rank r's GPU side on device `dev`: context, streams, the kernel that fills every thread slot of
// every SM, its window and source (handle type `windows`; the source filled with r + 1), the
// signal array (never shareable, as NCCL's) and host inline slots.
static void setUpRank(Rank& rk, int dev, int r, int n, CUmemAllocationHandleType windows) {
  rk.dev = dev;
  CUdevice d;
  CU(p_cuDeviceGet(&d, dev));
  CU(p_cuDevicePrimaryCtxRetain(&rk.ctx, d));
  CU(p_cuCtxSetCurrent(rk.ctx));
  CU(p_cuStreamCreate(&rk.kernelStream, CU_STREAM_DEFAULT));
  CU(p_cuStreamCreate(&rk.aux, CU_STREAM_NON_BLOCKING));
  CUmodule mod;
  CU(p_cuModuleLoadData(&mod, kPtx));
  CU(p_cuModuleGetFunction(&rk.wait, mod, "gbl_wait"));
  int perSm = 0, sms = 0;
  CU(p_cuOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, rk.wait, 1024, 0));
  CU(p_cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
  rk.blocks = perSm * sms;
  rk.win = devAlloc(dev, n * kSlot + 4096, windows);
  rk.sig = devAlloc(dev, 65536 * 8);
  rk.src = devAlloc(dev, kSlot, windows);
  CU(p_cuMemsetD8(rk.src.ptr, static_cast<unsigned char>(r + 1), kSlot));
  rk.inlines.assign(64, 0);
}

// Collective, as NCCL does at context creation: the signal array (strongly ordered), the inline
// slots (host), then the user windows.
static void registerWindows(Rank& rk) {
  void* gh = nullptr;
  CHECK(gGin->regMrSym(rk.comm, reinterpret_cast<void*>(rk.sig.ptr), rk.sig.size, kPtrCuda, kMrFlagForceSo, &rk.sigH,
                       &gh) == kSuccess,
        "regMrSym signals");
  CHECK(gGin->regMrSym(rk.comm, rk.inlines.data(), rk.inlines.size() * 8, kPtrHost, 0, &rk.inlH, &gh) == kSuccess,
        "regMrSym inlines");
  CHECK(gGin->regMrSym(rk.comm, reinterpret_cast<void*>(rk.win.ptr), rk.win.size, kPtrCuda, 0, &rk.winH, &gh) ==
            kSuccess,
        "regMrSym window");
  CHECK(gGin->regMrSym(rk.comm, reinterpret_cast<void*>(rk.src.ptr), rk.src.size, kPtrCuda, 0, &rk.srcH, &gh) ==
            kSuccess,
        "regMrSym source");
}

// Launches the waiting kernel on every SM of rank `rk`: it waits until its signal word reaches
// `target`, then checks each of the `n` senders' slots (result word at sig + 64).
static void launchWait(Rank& rk, uint64_t target, int n, unsigned long long timeoutNs) {
  CUdeviceptr result = rk.sig.ptr + 64;
  unsigned nslots = static_cast<unsigned>(n);
  unsigned long long slot = kSlot;
  void* args[] = {&rk.sig.ptr, &target, &rk.win.ptr, &nslots, &slot, &result, &timeoutNs};
  CU(p_cuLaunchKernel(rk.wait, rk.blocks, 1, 1, 1024, 1, 1, 0, rk.kernelStream, args, nullptr));
}

// After the waiting kernel ended: its verdict and the signal word it saw (true: both right).
static bool checkWait(Rank& rk, int r, uint64_t target, const char* what) {
  uint32_t res = 0;
  uint64_t word = 0;
  CU(p_cuMemcpyDtoH(&res, rk.sig.ptr + 64, 4));
  CU(p_cuMemcpyDtoH(&word, rk.sig.ptr, 8));
  CHECK(res == 1, "%s: rank %d: kernel result %u (2: data not visible with the signal, 3: timed out)", what, r, res);
  CHECK(word == target, "%s: rank %d: signal word %lu, expected %lu", what, r, static_cast<unsigned long>(word),
        static_cast<unsigned long>(target));
  return res == 1 && word == target;
}

// One round on rank r: spin kernel on every SM, puts + signals from a context-less thread, check.
static void round(Rank& rk, int r, int n, Barrier& b, uint64_t target, const char* label) {
  CU(p_cuCtxSetCurrent(rk.ctx));
  CU(p_cuMemsetD32Async(rk.sig.ptr + 64, 0, 1, rk.aux));  // result word
  CU(p_cuStreamSynchronize(rk.aux));
  // A blocking stream: the legacy default stream, and anything on it, now queues behind this.
  launchWait(rk, target, n, 10ull * 1000 * 1000 * 1000);
  b.wait();  // every GPU is full
  bool ok = true;
  std::thread proxy([&] {  // no CUDA context on this thread, as in NCCL's GIN progress thread
    std::vector<void*> reqs;
    for (int p = 0; p < n; p++) {
      void* req = nullptr;
      uint64_t dstOff = static_cast<uint64_t>(r) * kSlot;
      ok = ok && gGin->iputSignal(rk.comm, 0, rk.srcH, kSlot, dstOff, rk.winH, p, 0, rk.sigH, 0, kSignalOpInc, &req) ==
                     kSuccess;
      reqs.push_back(req);
      // putValue: 8 bytes from the host inline array into the tail of the peer's window.
      rk.inlines[p] = 0xabc0000000000000ull | static_cast<uint64_t>(r * 16 + p);
      ok = ok && gGin->iput(rk.comm, p * 8, rk.inlH, 8, n * kSlot + r * 8, rk.winH, p, &req) == kSuccess;
      reqs.push_back(req);
    }
    ok = ok && waitRequests(rk.comm, reqs, 30);
  });
  proxy.join();
  CHECK(ok, "%s: rank %d: plugin calls failed or did not complete", label, r);
  auto deadline = Clock::now() + std::chrono::seconds(40);
  while (p_cuStreamQuery(rk.kernelStream) == CUDA_ERROR_NOT_READY && Clock::now() < deadline) sched_yield();
  CU(p_cuStreamSynchronize(rk.kernelStream));
  b.wait();  // every rank's puts are done
  bool waited = checkWait(rk, r, target, label);
  std::vector<uint64_t> tail(n);
  CU(p_cuMemcpyDtoH(tail.data(), rk.win.ptr + n * kSlot, n * 8));
  for (int s = 0; s < n; s++) {
    CHECK(tail[s] == (0xabc0000000000000ull | static_cast<uint64_t>(s * 16 + r)), "%s: rank %d: inline from %d",
          label, r, s);
  }
  printf("gpu-smoke: %s: rank %d ok=%d\n", label, r, waited);
}

static void connectAndRegister(Rank& rk, int r, int n, std::vector<char>& handles, std::vector<void*>& ptrs,
                               Barrier& b) {
  void* l = nullptr;
  CHECK(gGin->listen(nullptr, 0, ptrs[r], &l) == kSuccess, "listen");
  b.wait();
  CHECK(gGin->connect(nullptr, ptrs.data(), n, r, l, &rk.comm) == kSuccess, "connect");
  gGin->closeListen(l);
  registerWindows(rk);
  (void)handles;
}

// Teardown on the rank's own thread, as NCCL's or the application's: a put to itself is left
// untested, so deregistration settles it on the self lane's stream (a helper GPU where there are
// two), and the thread's context must be its own afterwards.
static void closeComm(Rank& rk, int r) {
  void* req = nullptr;
  CHECK(gGin->iput(rk.comm, 0, rk.srcH, 8, 0, rk.winH, r, &req) == kSuccess, "rank %d: iput before close", r);
  CU(p_cuCtxSetCurrent(rk.ctx));
  for (void* h : {rk.sigH, rk.inlH, rk.winH, rk.srcH}) gGin->deregMrSym(rk.comm, h);
  CHECK(gGin->closeColl(rk.comm) == kSuccess, "closeColl");
  CUcontext now = nullptr;
  CU(p_cuCtxGetCurrent(&now));
  CHECK(now == rk.ctx, "rank %d: deregMrSym / closeColl left another CUDA context current on the caller's thread", r);
}

static double bandwidth(Rank& rk, int peer, int reps) {
  std::vector<void*> reqs;
  auto t0 = Clock::now();
  for (int i = 0; i < reps; i++) {
    void* req = nullptr;
    CHECK(gGin->iput(rk.comm, 0, rk.srcH, kSlot, 0, rk.winH, peer, &req) == kSuccess, "iput");
    reqs.push_back(req);
  }
  CHECK(waitRequests(rk.comm, reqs, 30), "bandwidth puts did not complete");
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return reps * static_cast<double>(kSlot) / s / 1e9;
}

// Small ops: `reps` puts of `bytes` with a signal each from rank rk to `peer`, at most `window` in
// flight, tested as NCCL's proxy tests them (every outstanding one per pass); microseconds per op.
static double opRate(Rank& rk, int peer, int reps, size_t bytes, int window) {
  std::vector<void*> reqs;
  auto t0 = Clock::now();
  for (int i = 0; i < reps; i++) {
    void* req = nullptr;
    CHECK(gGin->iputSignal(rk.comm, 0, rk.srcH, bytes, static_cast<uint64_t>(i % 64) * bytes, rk.winH, peer, 0,
                           rk.sigH, 0, kSignalOpInc, &req) == kSuccess,
          "iputSignal (rate)");
    reqs.push_back(req);
    if (static_cast<int>(reqs.size()) >= window) CHECK(waitRequests(rk.comm, reqs, 30), "rate puts did not complete");
  }
  CHECK(waitRequests(rk.comm, reqs, 30), "rate puts did not complete");
  return std::chrono::duration<double>(Clock::now() - t0).count() / reps * 1e6;
}

static int processesMain(const char* lib, int nprocs);
static int processChild(const char* lib, int coord, int rank, int nprocs);

int main(int argc, char** argv) {
  // As the plugin asks of every GIN program: enough hardware queues that its streams never wait
  // behind the spinning kernel (before CUDA starts; children inherit it).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int nprocs = 0;  // --processes N; 0: ranks as threads of this process
  if (argc >= 3 && strcmp(argv[2], "--processes") == 0) {
    nprocs = argc >= 4 ? atoi(argv[3]) : 2;
    if (nprocs < 2 || nprocs > 8) {
      fprintf(stderr, "usage: %s <lib> --processes [2..8]\n", argv[0]);
      return 6;
    }
  } else if (argc == 6 && strcmp(argv[2], "--child") == 0) {
    return processChild(argv[1], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
  } else if (argc != 2) {
    fprintf(stderr, "usage: %s <libnccl-net-ginbench.so>\n", argv[0]);
    return 6;
  }
  if (!loadDriver()) {
    fprintf(stderr, "gpu-smoke: no CUDA driver: skipped\n");
    return 8;
  }
  int ndev = 0;
  if (p_cuDeviceGetCount(&ndev) != CUDA_SUCCESS || ndev < 1) {
    fprintf(stderr, "gpu-smoke: no GPU: skipped\n");
    return 8;
  }
  if (nprocs > 0) {
    if (ndev < nprocs) {
      fprintf(stderr, "gpu-smoke: --processes %d needs a GPU per process, this host has %d: skipped\n", nprocs, ndev);
      return 8;
    }
    return processesMain(argv[1], nprocs);
  }
  void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) {
    fprintf(stderr, "gpu-smoke: dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  gGin = static_cast<const GinTableV11*>(dlsym(plugin, "ncclGinPlugin_v11"));
  if (gGin == nullptr) {
    fprintf(stderr, "gpu-smoke: no ncclGinPlugin_v11 in %s\n", argv[1]);
    return 1;
  }
  void* inst = nullptr;
  CHECK(gGin->init(&inst, 1, nullptr) == kSuccess, "init");
  int n = ndev < 4 ? ndev : 4;
  printf("gpu-smoke: %d GPU(s), %d rank(s)\n", ndev, n);
  std::vector<Rank> ranks(n);
  Barrier b(n);
  std::vector<char> handles(static_cast<size_t>(n) * kNetHandleMaxSize);
  std::vector<void*> ptrs(n);
  for (int r = 0; r < n; r++) ptrs[r] = handles.data() + r * kNetHandleMaxSize;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; r++) {
    threads.emplace_back([&, r] {
      Rank& rk = ranks[r];
      setUpRank(rk, r, r, n, CU_MEM_HANDLE_TYPE_NONE);
      connectAndRegister(rk, r, n, handles, ptrs, b);
      b.wait();
      round(rk, r, n, b, static_cast<uint64_t>(n), "round 1");
      // The owner resets its signal from the device side while nothing is in flight: the plugin
      // must pick that up (read-back) instead of continuing from its shadow.
      CU(p_cuMemsetD32Async(rk.sig.ptr, 0, 2, rk.aux));
      CU(p_cuStreamSynchronize(rk.aux));
      CU(p_cuMemsetD8(rk.win.ptr, 0, n * kSlot));
      b.wait();
      round(rk, r, n, b, static_cast<uint64_t>(n), "after reset");
      b.wait();
      // Without a reset, the next round continues from the current value.
      CU(p_cuMemsetD8(rk.win.ptr, 0, n * kSlot));
      b.wait();
      round(rk, r, n, b, static_cast<uint64_t>(2 * n), "no reset");
      b.wait();
      closeComm(rk, r);
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  // Chaos on a new connection.
  setenv("GINBENCH_LOOPBACK_CHAOS", "1234", 1);
  void* inst2 = nullptr;
  CHECK(gGin->init(&inst2, 2, nullptr) == kSuccess, "init (chaos)");
  for (int r = 0; r < n; r++) {
    threads.emplace_back([&, r] {
      Rank& rk = ranks[r];
      CU(p_cuCtxSetCurrent(rk.ctx));
      CU(p_cuMemsetD8(rk.win.ptr, 0, n * kSlot));
      CU(p_cuMemsetD8(rk.sig.ptr, 0, 1024));
      connectAndRegister(rk, r, n, handles, ptrs, b);
      b.wait();
      for (int i = 0; i < 3; i++) {
        round(rk, r, n, b, static_cast<uint64_t>(n) * (i + 1), "chaos");
        b.wait();
        CU(p_cuMemsetD8(rk.win.ptr, 0, n * kSlot));
        b.wait();
      }
      closeComm(rk, r);
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  unsetenv("GINBENCH_LOOPBACK_CHAOS");
  void* inst3 = nullptr;
  CHECK(gGin->init(&inst3, 3, nullptr) == kSuccess, "init (bandwidth)");
  for (int r = 0; r < n; r++) {
    threads.emplace_back([&, r] {
      Rank& rk = ranks[r];
      CU(p_cuCtxSetCurrent(rk.ctx));
      connectAndRegister(rk, r, n, handles, ptrs, b);
      b.wait();
      if (r == 0) {
        std::thread([&] {
          double self = bandwidth(rk, 0, 64);
          printf("gpu-smoke: bandwidth rank 0 -> 0: %.1f GB/s (4 MiB puts)\n", self);
          if (n > 1) printf("gpu-smoke: bandwidth rank 0 -> 1: %.1f GB/s (4 MiB puts)\n", bandwidth(rk, 1, 64));
          if (n > 1) {
            // The cost of one small op (an EP LL token is 7 KiB), alone and while rank 1's GPU is
            // full of a kernel spinning on the signal word the ops increment.
            const int reps = 2000;
            printf("gpu-smoke: rate rank 0 -> 1: %.1f us per 7 KiB put + signal, 1024 in flight\n",
                   opRate(rk, 1, reps, 7168, 1024));
            Rank& dst = ranks[1];
            CU(p_cuCtxSetCurrent(dst.ctx));
            uint64_t now = 0;
            CU(p_cuMemcpyDtoH(&now, dst.sig.ptr, 8));
            CU(p_cuMemsetD32Async(dst.sig.ptr + 64, 0, 1, dst.aux));
            CU(p_cuStreamSynchronize(dst.aux));
            CUdeviceptr result = dst.sig.ptr + 64;
            uint64_t target = now + reps;
            unsigned nslots = 0;  // no data check: only the signal count
            unsigned long long slot = kSlot, timeoutNs = 60ull * 1000 * 1000 * 1000;
            void* args[] = {&dst.sig.ptr, &target, &dst.win.ptr, &nslots, &slot, &result, &timeoutNs};
            CU(p_cuLaunchKernel(dst.wait, dst.blocks, 1, 1, 1024, 1, 1, 0, dst.kernelStream, args, nullptr));
            CU(p_cuCtxSetCurrent(rk.ctx));
            double spun = opRate(rk, 1, reps, 7168, 1024);
            CU(p_cuCtxSetCurrent(dst.ctx));
            CU(p_cuStreamSynchronize(dst.kernelStream));
            uint32_t res = 0;
            CU(p_cuMemcpyDtoH(&res, result, 4));
            CU(p_cuCtxSetCurrent(rk.ctx));
            CHECK(res == 1, "rate under a spinning kernel: kernel result %u (3: the signals never all arrived)", res);
            printf("gpu-smoke: rate rank 0 -> 1: %.1f us per op with every SM of GPU 1 spinning on the signal\n", spun);
          }
        }).join();
      }
      b.wait();
      closeComm(rk, r);
      devFree(rk.win);
      devFree(rk.sig);
      devFree(rk.src);
    });
  }
  for (auto& t : threads) t.join();
  for (void* i : {inst, inst2, inst3}) gGin->finalize(i);
  int f = gFailures.load();
  printf("gpu-smoke: %s (%d failure%s)\n", f == 0 ? "passed" : "FAILED", f, f == 1 ? "" : "s");
  return f == 0 ? 0 : 1;
}

// ---- several processes (virtual nodes) -----------------------------------------------------
// The parent never touches CUDA (a forked child could not use it): it spawns the ranks (this
// program again, with --child), relays the listen handles and runs the barriers over one
// socketpair per child, and collects the exit codes.

// One message of exactly n bytes within `seconds`.
static bool coordRecvAll(int fd, void* p, size_t n, int seconds) {
  pollfd pf{fd, POLLIN, 0};
  if (poll(&pf, 1, seconds * 1000) <= 0) return false;
  return recv(fd, p, n, 0) == static_cast<ssize_t>(n);
}

static int processesMain(const char* lib, int nprocs) {
  std::vector<int> fds;
  std::vector<pid_t> pids;
  for (int r = 0; r < nprocs; r++) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      int fd = dup(sv[1]);
      std::string sfd = std::to_string(fd), sr = std::to_string(r), sn = std::to_string(nprocs);
      execl("/proc/self/exe", "ginbench-loopback-gpu-smoke", lib, "--child", sfd.c_str(), sr.c_str(), sn.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(sv[1]);
    fds.push_back(sv[0]);
    pids.push_back(pid);
  }
  bool ok = true;
  // Each step, one message from every child: all a listen handle (the table goes back to all),
  // all 'B' (a barrier: 'A' goes back), or all 'E' (finished).
  for (;;) {
    std::vector<char> table(static_cast<size_t>(nprocs) * kNetHandleMaxSize);
    int handles = 0, barriers = 0, ends = 0;
    for (int r = 0; r < nprocs && ok; r++) {
      char msg[kNetHandleMaxSize];
      pollfd pf{fds[r], POLLIN, 0};
      ssize_t k = poll(&pf, 1, 180 * 1000) > 0 ? recv(fds[r], msg, sizeof msg, 0) : -1;
      if (k == static_cast<ssize_t>(kNetHandleMaxSize)) {
        memcpy(table.data() + static_cast<size_t>(r) * kNetHandleMaxSize, msg, kNetHandleMaxSize);
        handles++;
      } else if (k == 1 && msg[0] == 'B') {
        barriers++;
      } else if (k == 1 && msg[0] == 'E') {
        ends++;
      } else {
        ok = false;  // a child failed or died
      }
    }
    if (!ok || ends == nprocs) break;
    if (handles == nprocs) {
      for (int r = 0; r < nprocs; r++) send(fds[r], table.data(), table.size(), 0);
    } else if (barriers == nprocs) {
      for (int r = 0; r < nprocs; r++) send(fds[r], "A", 1, 0);
    } else {
      ok = false;  // the children disagree on where they are
      break;
    }
  }
  int worst = 0;
  for (int r = 0; r < nprocs; r++) {
    int status = 0;
    pid_t done = 0;
    if (!ok) {
      // A child that found no GPU exits 8 on its own, perhaps after a sibling already did: give
      // each a few seconds to end before killing it, or a killed sibling reads as a failure.
      for (int i = 0; i < 100 && (done = waitpid(pids[r], &status, WNOHANG)) == 0; i++) usleep(50 * 1000);
      if (done == 0) kill(pids[r], SIGKILL);
    }
    if (done == 0) waitpid(pids[r], &status, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
    if (code == 8) worst = worst == 0 ? 8 : worst;
    if (code != 0 && code != 8) worst = 1;
    close(fds[r]);
  }
  if (!ok && worst == 0) worst = 1;
  if (worst == 8) {
    fprintf(stderr, "gpu-smoke: no GPU: skipped\n");
    return 8;
  }
  printf("gpu-smoke: %d processes: %s\n", nprocs, worst == 0 ? "passed" : "FAILED");
  return worst;
}

static int processChild(const char* lib, int coord, int r, int n) {
  if (!loadDriver()) return 8;
  int ndev = 0;
  if (p_cuDeviceGetCount(&ndev) != CUDA_SUCCESS || ndev < 1) return 8;
  void* plugin = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (plugin == nullptr) return 1;
  gGin = static_cast<const GinTableV11*>(dlsym(plugin, "ncclGinPlugin_v11"));
  if (gGin == nullptr) return 1;
  auto barrier = [&] {
    send(coord, "B", 1, 0);
    char c;
    return coordRecvAll(coord, &c, 1, 120);
  };
  Rank rk;
  // As ncclMemAlloc: POSIX-FD handles for the windows, so other processes can map them.
  setUpRank(rk, r, r, n, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);  // a GPU per process (main)
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) setenv("GINBENCH_LOOPBACK_CHAOS", "77", 1);
    void* inst = nullptr;
    CHECK(gGin->init(&inst, 10 + pass, nullptr) == kSuccess, "init");
    std::vector<char> handles(static_cast<size_t>(n) * kNetHandleMaxSize);
    std::vector<void*> ptrs(n);
    for (int q = 0; q < n; q++) ptrs[q] = handles.data() + static_cast<size_t>(q) * kNetHandleMaxSize;
    void* l = nullptr;
    CHECK(gGin->listen(nullptr, 0, ptrs[r], &l) == kSuccess, "listen");
    send(coord, ptrs[r], kNetHandleMaxSize, 0);
    if (!coordRecvAll(coord, handles.data(), handles.size(), 120)) return 1;
    CHECK(gGin->connect(nullptr, ptrs.data(), n, r, l, &rk.comm) == kSuccess, "connect (rank %d)", r);
    gGin->closeListen(l);
    registerWindows(rk);
    CU(p_cuMemsetD8(rk.win.ptr, 0, n * kSlot));
    CU(p_cuMemsetD8(rk.sig.ptr, 0, 1024));
    if (!barrier()) return 1;
    // The kernel fills every SM and waits for n signals; the owner's ginProgress applies the
    // messages from the other processes, so the proxy thread keeps progressing until it ends.
    uint64_t target = static_cast<uint64_t>(n);
    launchWait(rk, target, n, 20ull * 1000 * 1000 * 1000);
    if (!barrier()) return 1;
    bool ok = true;
    std::thread proxy([&] {  // no CUDA context, as NCCL's GIN progress thread
      std::vector<void*> reqs;
      for (int k = 0; k < n; k++) {
        int p = (r + k) % n;
        void* req = nullptr;
        ok = ok && gGin->iputSignal(rk.comm, 0, rk.srcH, kSlot, static_cast<uint64_t>(r) * kSlot, rk.winH, p, 0,
                                    rk.sigH, 0, kSignalOpInc, &req) == kSuccess;
        reqs.push_back(req);
        rk.inlines[p] = 0xabc0000000000000ull | static_cast<uint64_t>(r * 16 + p);
        ok = ok && gGin->iput(rk.comm, p * 8, rk.inlH, 8, n * kSlot + r * 8, rk.winH, p, &req) == kSuccess;
        reqs.push_back(req);
      }
      auto deadline = Clock::now() + std::chrono::seconds(40);
      while (ok && (!reqs.empty() || p_cuStreamQuery(rk.kernelStream) == CUDA_ERROR_NOT_READY)) {
        for (size_t i = 0; ok && i < reqs.size();) {
          int done = 0;
          ok = gGin->test(rk.comm, reqs[i], &done) == kSuccess;
          if (done) {
            reqs[i] = reqs.back();
            reqs.pop_back();
          } else {
            i++;
          }
        }
        if (gGin->ginProgress(rk.comm) != kSuccess) ok = false;
        if (Clock::now() > deadline) ok = false;
      }
    });
    proxy.join();
    CHECK(ok, "pass %d: rank %d: plugin calls failed or did not complete", pass, r);
    CU(p_cuStreamSynchronize(rk.kernelStream));
    char what[32];
    snprintf(what, sizeof what, "pass %d", pass);
    checkWait(rk, r, target, what);
    // Every rank's puts are done before anyone checks the inline values or closes.
    if (!barrier()) return 1;
    std::vector<uint64_t> tail(n);
    CU(p_cuMemcpyDtoH(tail.data(), rk.win.ptr + n * kSlot, n * 8));
    for (int s = 0; s < n; s++) {
      CHECK(tail[s] == (0xabc0000000000000ull | static_cast<uint64_t>(s * 16 + r)), "pass %d: rank %d: inline from %d",
            pass, r, s);
    }
    printf("gpu-smoke: process rank %d (GPU %d) pass %d: %s\n", r, rk.dev, pass,
           gFailures.load() == 0 ? "ok" : "FAILED");
    closeComm(rk, r);
    gGin->finalize(inst);
  }
  send(coord, "E", 1, 0);
  return gFailures.load() == 0 ? 0 : 1;
}
