// Contract tests across processes (virtual nodes on one host), through the exported tables:
//   - the net's data path between this process and a child (messages of several sizes both
//     ways, a receive too small for its message, a peer that dies mid-conversation), and in one
//     process (retries, the request limit, bad calls);
//   - GIN v11 / RMA v14 with ranks spread over three processes (two ranks as threads of one,
//     one rank each in two others): windows are host memory in memfds, announced with
//     shareHostWindowForTests(), so registration passes real descriptors (SCM_RIGHTS) and puts
//     land in mappings of another process's memory; signals travel as messages. Every receiver
//     checks, when it sees a signal, that every byte of the puts before it is there. Rounds under
//     chaos; the negative control (signal-early) must be caught; a rank whose process dies must
//     turn the others' operations into errors, not a hang.
// The test program re-executes itself (`--child ...`) for the other processes; the parent only
// coordinates (handle allgather, barriers) over a socketpair and collects verdicts.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../abi_v11.h"
#include "../abi_v14.h"
#include "../window_share.h"
#include "barrier.h"
#include "harness.h"

extern "C" const gbl::NetTableV11 ncclNetPlugin_v11;
extern "C" const gbl::GinTableV11 ncclGinPlugin_v11;
extern "C" const gbl::RmaTableV14 ncclRmaPlugin_v14;

using namespace gbl;
using Clock = std::chrono::steady_clock;

namespace {

// ---- coordination: fixed-size messages over a SOCK_SEQPACKET socketpair ----------------------

constexpr size_t kCoordMax = 16384;

bool coordSend(int fd, const void* p, size_t n) {
  return send(fd, p, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

// Receives one message (up to `cap` bytes) within `seconds`; returns its size, -1 on timeout/EOF.
ssize_t coordRecv(int fd, void* p, size_t cap, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    pollfd pf{fd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return -1;
    int r = poll(&pf, 1, static_cast<int>(left));
    if (r > 0) {
      ssize_t n = recv(fd, p, cap, 0);
      return n > 0 ? n : -1;
    }
    if (r < 0 && errno != EINTR) return -1;
  }
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
};

Child spawn(const std::vector<std::string>& args) {
  int sv[2];
  Child c;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return c;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    // The child's end survives exec; its number goes on the command line.
    int fd = dup(sv[1]);
    std::vector<std::string> full{"contract_test", "--child", std::to_string(fd)};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(sv[1]);
  c.pid = pid;
  c.fd = sv[0];
  return c;
}

// Waits for a child's exit (bounded); kills it past the deadline. Returns its exit code or -1.
int reap(Child& c, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(c.pid, &status, WNOHANG);
    if (r == c.pid) break;
    if (Clock::now() > deadline) {
      kill(c.pid, SIGKILL);
      waitpid(c.pid, &status, 0);
      close(c.fd);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  close(c.fd);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// ---- net ----------------------------------------------------------------------------------

const NetTableV11& N = ncclNetPlugin_v11;

unsigned char pattern(int stream, size_t msg, size_t i) {
  return static_cast<unsigned char>((stream * 31 + msg * 7 + i * 13) & 0xff);
}

const size_t kNetSizes[] = {0, 1, 7, 4096, (1u << 20) + 3, 8u << 20};

// Polls a request to completion within `seconds`. Returns the NCCL result; *size the size.
Result netWait(void* req, int* size, double seconds = 20) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int done = 0;
    Result r = N.test(req, &done, size);
    if (r != kSuccess || done) return r;
    if (Clock::now() > deadline) return kSystemError;
    std::this_thread::yield();
  }
}

void* netConnect(void* handle) {
  void* comm = nullptr;
  for (int i = 0; i < 100000 && comm == nullptr; i++) {
    if (N.connect(nullptr, 0, handle, &comm, nullptr) != kSuccess) return nullptr;
  }
  return comm;
}

void* netAccept(void* listenComm) {
  void* comm = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (comm == nullptr && Clock::now() < deadline) {
    if (N.accept(listenComm, &comm, nullptr) != kSuccess) return nullptr;
    if (comm == nullptr) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return comm;
}

// Sends every size of kNetSizes, stream `stream`'s pattern, tag = stream.
bool netSendAll(void* send, int stream) {
  bool ok = true;
  for (size_t m = 0; m < sizeof kNetSizes / sizeof kNetSizes[0]; m++) {
    std::vector<unsigned char> buf(kNetSizes[m] + 1);
    for (size_t i = 0; i < kNetSizes[m]; i++) buf[i] = pattern(stream, m, i);
    void* mh = nullptr;
    ok = ok && N.regMr(send, buf.data(), buf.size(), kPtrHost, &mh) == kSuccess;
    void* req = nullptr;
    while (ok && req == nullptr) ok = N.isend(send, buf.data(), kNetSizes[m], stream, mh, nullptr, &req) == kSuccess;
    int size = -1;
    ok = ok && netWait(req, &size) == kSuccess && size == static_cast<int>(kNetSizes[m]);
    ok = ok && N.deregMr(send, mh) == kSuccess;
  }
  return ok;
}

// Receives them into buffers larger than needed; checks sizes and bytes.
bool netRecvAll(void* recv, int stream) {
  bool ok = true;
  for (size_t m = 0; m < sizeof kNetSizes / sizeof kNetSizes[0]; m++) {
    std::vector<unsigned char> buf(kNetSizes[m] + 100, 0xee);
    void* mh = nullptr;
    ok = ok && N.regMr(recv, buf.data(), buf.size(), kPtrHost, &mh) == kSuccess;
    void* data = buf.data();
    size_t posted = buf.size();
    int tag = stream;
    void* req = nullptr;
    while (ok && req == nullptr) ok = N.irecv(recv, 1, &data, &posted, &tag, &mh, nullptr, &req) == kSuccess;
    int size = -1;
    ok = ok && netWait(req, &size) == kSuccess;
    CHECK(size == static_cast<int>(kNetSizes[m]), "message %zu: received %d bytes, sent %zu", m, size, kNetSizes[m]);
    for (size_t i = 0; ok && i < kNetSizes[m]; i++) ok = buf[i] == pattern(stream, m, i);
    ok = ok && buf[kNetSizes[m]] == 0xee;  // nothing past the message
    ok = ok && N.deregMr(recv, mh) == kSuccess;
  }
  return ok;
}

int childNet(int coord, const std::string& mode) {
  char handle[kNetHandleMaxSize];
  if (coordRecv(coord, handle, sizeof handle, 20) != static_cast<ssize_t>(sizeof handle)) return 10;
  void* send = netConnect(handle);
  if (send == nullptr) return 11;
  void* listen = nullptr;
  if (N.listen(nullptr, 0, handle, &listen) != kSuccess) return 12;
  coordSend(coord, handle, sizeof handle);
  void* recv = netAccept(listen);
  if (recv == nullptr) return 13;
  if (!netSendAll(send, 1)) return 14;
  if (mode == "die") _exit(0);  // no close, no goodbye: the parent must see an error, not hang
  if (!netRecvAll(recv, 2)) return 15;
  // A message too big for the receive the parent will post.
  std::vector<char> big(1000, 'x');
  void* req = nullptr;
  while (req == nullptr) {
    if (N.isend(send, big.data(), big.size(), 1, nullptr, nullptr, &req) != kSuccess) return 16;
  }
  int size = 0;
  if (netWait(req, &size) != kSuccess) return 17;
  char done;
  coordRecv(coord, &done, 1, 20);  // the parent has seen the error
  N.closeSend(send);
  N.closeRecv(recv);
  N.closeListen(listen);
  return 0;
}

void netTwoProcesses(const char* mode) {
  configure(nullptr, nullptr, "10");
  bool die = strcmp(mode, "die") == 0;
  Child child = spawn({"net", mode});
  CHECK(child.pid > 0, "spawn failed");
  char handle[kNetHandleMaxSize];
  void* listen = nullptr;
  CHECK_OK(N.listen(nullptr, 0, handle, &listen));
  coordSend(child.fd, handle, sizeof handle);
  void* recv = netAccept(listen);
  CHECK(recv != nullptr, "accept failed: %s", lastWarning());
  char theirs[kNetHandleMaxSize];
  CHECK(coordRecv(child.fd, theirs, sizeof theirs, 20) == static_cast<ssize_t>(sizeof theirs), "no handle");
  void* send = netConnect(theirs);
  CHECK(send != nullptr, "connect failed: %s", lastWarning());
  if (recv != nullptr && send != nullptr) {
    CHECK(netRecvAll(recv, 1), "messages from the child are wrong");
    if (die) {
      // The child is gone: a posted receive fails (EOF), well within the timeout.
      std::vector<char> buf(64);
      void* data = buf.data();
      size_t posted = buf.size();
      int tag = 1;
      void* req = nullptr;
      CHECK_OK(N.irecv(recv, 1, &data, &posted, &tag, nullptr, nullptr, &req));
      auto t0 = Clock::now();
      int size = 0;
      Result r = netWait(req, &size, 15);
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      CHECK(r == kRemoteError, "receive from a dead peer: result %d after %.1f s", r, s);
      CHECK(strstr(lastWarning(), "closed the connection") != nullptr, "warning: %s", lastWarning());
      // Sends to it fail too (EPIPE), at once or on a later test.
      std::vector<char> out(1 << 20, 'y');
      Result sr = kSuccess;
      for (int i = 0; i < 64 && sr == kSuccess; i++) {
        void* sreq = nullptr;
        sr = N.isend(send, out.data(), out.size(), 2, nullptr, nullptr, &sreq);
        if (sr == kSuccess && sreq != nullptr) sr = netWait(sreq, &size, 15);
      }
      CHECK(sr == kRemoteError, "sending to a dead peer: result %d", sr);
    } else {
      CHECK(netSendAll(send, 2), "sending to the child failed");
      std::vector<char> small(500);
      void* data = small.data();
      size_t posted = small.size();
      int tag = 1;
      void* req = nullptr;
      CHECK_OK(N.irecv(recv, 1, &data, &posted, &tag, nullptr, nullptr, &req));
      int size = 0;
      Result r = netWait(req, &size);
      CHECK(r == kInvalidUsage, "too-small receive: result %d", r);
      CHECK(strstr(lastWarning(), "1000 bytes arrived for a receive of 500") != nullptr, "%s", lastWarning());
      coordSend(child.fd, "x", 1);
    }
    CHECK_OK(N.closeSend(send));
    CHECK_OK(N.closeRecv(recv));
  }
  CHECK_OK(N.closeListen(listen));
  int code = reap(child, 30);
  CHECK(code == 0, "child exited %d", code);
  configure(nullptr, nullptr);
}

// ---- GIN across processes -------------------------------------------------------------------

struct MpSetup {
  const char* variant;  // v11, v14, chaos, broken, death
  int nranks = 4;
  int ncomms() const { return strcmp(variant, "v14") == 0 ? 1 : 2; }
  int ncontexts() const { return 2; }  // v11: one per comm; v14: two in the one comm
  bool v14() const { return strcmp(variant, "v14") == 0; }
};

constexpr size_t kSlot = 4096;   // bytes per (context, sender) in every window
constexpr int kNsig = 8;         // signal words per context
constexpr int kRounds = 3;
constexpr int kPiecesPerPut = 4;  // three unsignalled puts, then one with the signal

// The processes: ranks {0,1} in process 0, {2} in process 1, {3} in process 2.
std::vector<int> ranksOf(int proc) {
  if (proc == 0) return {0, 1};
  return {proc + 1};
}

unsigned char dataByte(int sender, int receiver, int ctx, int round, size_t i) {
  return static_cast<unsigned char>((sender * 67 + receiver * 29 + ctx * 11 + round * 5 + i * 3) & 0xff);
}

struct Verdict {
  int violations = 0;   // a signal was seen before its data
  int errors = 0;       // calls that failed
  int peerErrors = 0;   // failures that name the dead rank (death variant)
  int completed = 0;    // rounds completed
  int deathLines = 0;   // warnings "... rank 3 (pid N) is gone ..." the process logged
};

std::atomic<int> gDeathLines{0};

// The children's logger: warnings go to stderr (a failing child says why); the one line about
// a dead peer is counted.
void childLogger(int level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != kLogWarn) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (strstr(msg, "ginbench-loopback: ") == msg && strstr(msg, "rank 3 (pid") && strstr(msg, "is gone")) {
    gDeathLines++;
    return;
  }
  if (getenv("CONTRACT_TEST_VERBOSE") != nullptr) fprintf(stderr, "  [pid %d] %s\n", getpid(), msg);
}

// One rank of a child process. `coordBarrier` synchronises all ranks of all processes.
void runRank(const MpSetup& s, int r, const std::vector<std::vector<char>>& handleTable,
             const std::vector<void*>& listens, const std::function<void(int)>& barrier, Verdict* v,
             std::mutex* vm) {
  const int n = s.nranks, ncomm = s.ncomms(), nctx = s.ncontexts();
  const bool v14 = s.v14();
  // Windows: shared host memory; signals and sources: private memory.
  size_t winBytes = kSlot * n * nctx;
  int mfd = memfd_create("gbl-window", MFD_CLOEXEC);
  CHECK(mfd >= 0 && ftruncate(mfd, static_cast<off_t>(winBytes)) == 0, "memfd");
  char* win = static_cast<char*>(mmap(nullptr, winBytes, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0));
  shareHostWindowForTests(win, winBytes, mfd);
  close(mfd);
  std::vector<uint64_t> sig(kNsig * nctx, 0);
  std::vector<char> src(kSlot * n * nctx);
  std::vector<void*> comms(ncomm);
  void* rmaCtx = nullptr;
  for (int c = 0; c < ncomm; c++) {
    std::vector<void*> ptrs(n);
    std::vector<std::vector<char>> copy(n);
    for (int q = 0; q < n; q++) {
      copy[q] = handleTable[c * n + q];
      ptrs[q] = copy[q].data();
    }
    void* l = listens[c * n + r];  // listened before the allgather (childGin)
    Result cr = v14 ? ncclRmaPlugin_v14.connect(nullptr, ptrs.data(), n, r, l, &comms[c])
                    : ncclGinPlugin_v11.connect(nullptr, ptrs.data(), n, r, l, &comms[c]);
    CHECK(cr == kSuccess, "rank %d: connect failed: %s", r, lastWarning());
    CHECK_OK(v14 ? ncclRmaPlugin_v14.closeListen(l) : ncclGinPlugin_v11.closeListen(l));
  }
  if (v14) {
    RmaConfigV14 cfg{nctx, 0, 1};
    CHECK_OK(ncclRmaPlugin_v14.createContext(comms[0], &cfg, &rmaCtx));
  }
  auto reg = [&](void* comm, void* p, size_t bytes, uint64_t flags) {
    void* mh = nullptr;
    void* gh = nullptr;
    Result rr = v14 ? ncclRmaPlugin_v14.regMrSym(comm, p, bytes, kPtrHost, flags, &mh)
                    : ncclGinPlugin_v11.regMrSym(comm, p, bytes, kPtrHost, flags, &mh, &gh);
    CHECK(rr == kSuccess, "rank %d: regMrSym failed: %s", r, lastWarning());
    return mh;
  };
  std::vector<void*> sigH(ncomm), winH(ncomm), srcH(ncomm);
  for (int c = 0; c < ncomm; c++) {
    sigH[c] = reg(comms[c], sig.data(), sig.size() * 8, kMrFlagForceSo);  // not shareable: messages
    winH[c] = reg(comms[c], win, winBytes, 0);
    srcH[c] = reg(comms[c], src.data(), src.size(), 0);
  }
  auto test = [&](void* comm, void* req, int* done) {
    return v14 ? ncclRmaPlugin_v14.test(comm, req, done) : ncclGinPlugin_v11.test(comm, req, done);
  };
  auto progress = [&](int c) {
    return v14 ? ncclRmaPlugin_v14.rmaProgress(rmaCtx) : ncclGinPlugin_v11.ginProgress(comms[c]);
  };
  const bool death = strcmp(s.variant, "death") == 0;
  const bool broken = strcmp(s.variant, "broken") == 0;
  bool sawPeerError = false;
  auto noteFailure = [&](Result res) {
    std::lock_guard<std::mutex> lock(*vm);
    v->errors++;
    if (death && res == kRemoteError) v->peerErrors++;
    sawPeerError = true;
  };
  barrier(r);
  for (int round = 0; round < kRounds && !sawPeerError; round++) {
    if (death && round == 1 && r == 3) _exit(0);  // the process dies: no close, no goodbye
    for (int ctx = 0; ctx < nctx; ctx++) {
      for (size_t i = 0; i < kSlot * n; i++) {
        int p = static_cast<int>(i / kSlot);
        src[ctx * kSlot * n + i] = static_cast<char>(dataByte(r, p, ctx, round, i % kSlot));
      }
    }
    std::vector<std::pair<void*, void*>> reqs;
    for (int ctx = 0; ctx < nctx && !sawPeerError; ctx++) {
      int c = v14 ? 0 : ctx;
      int context = v14 ? ctx : 0;
      void* opctx = v14 ? rmaCtx : comms[c];
      for (int k = 0; k < n && !sawPeerError; k++) {
        int p = (r + k) % n;
        size_t base = ctx * kSlot * n;  // source: [ctx][p]; destination: [ctx][r] at p
        for (int piece = 0; piece < kPiecesPerPut; piece++) {
          size_t lo = kSlot * piece / kPiecesPerPut, hi = kSlot * (piece + 1) / kPiecesPerPut;
          uint64_t so = base + p * kSlot + lo, dofs = base + r * kSlot + lo;
          void* req = nullptr;
          Result pr;
          if (piece + 1 < kPiecesPerPut) {
            pr = v14 ? ncclRmaPlugin_v14.iput(opctx, context, so, srcH[c], hi - lo, dofs, winH[c], p, &req)
                     : ncclGinPlugin_v11.iput(opctx, so, srcH[c], hi - lo, dofs, winH[c], p, &req);
          } else {
            uint64_t sigOff = static_cast<uint64_t>(ctx * kNsig + r) * 8;
            pr = v14 ? ncclRmaPlugin_v14.iputSignal(opctx, context, so, srcH[c], hi - lo, dofs, winH[c], p, sigOff,
                                                    sigH[c], 0, kSignalOpInc, true, &req)
                     : ncclGinPlugin_v11.iputSignal(opctx, so, srcH[c], hi - lo, dofs, winH[c], p, sigOff, sigH[c],
                                                    0, kSignalOpInc, &req);
          }
          if (pr != kSuccess) {
            noteFailure(pr);
            break;
          }
          reqs.push_back({comms[c], req});
        }
      }
    }
    // Until every own request is done and every sender's signal has arrived: test, progress,
    // and check each sender's slot the moment its signal shows. The negative control's data
    // to other processes is issued only when its op is tested: test only once every signal is
    // in, so that receivers look before it can land.
    std::vector<char> seen(static_cast<size_t>(nctx) * n, 0);
    int seenCount = 0;
    auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!sawPeerError && (!reqs.empty() || seenCount < nctx * n)) {
      for (size_t i = 0; (!broken || seenCount == nctx * n) && i < reqs.size();) {
        int done = 0;
        Result tr = test(reqs[i].first, reqs[i].second, &done);
        if (tr != kSuccess) {
          noteFailure(tr);
          break;
        }
        if (done) {
          reqs[i] = reqs.back();
          reqs.pop_back();
        } else {
          i++;
        }
      }
      for (int c = 0; c < ncomm && !sawPeerError; c++) {
        Result gr = progress(c);
        if (gr != kSuccess) noteFailure(gr);
      }
      for (int ctx = 0; ctx < nctx; ctx++) {
        for (int sdr = 0; sdr < n; sdr++) {
          if (seen[ctx * n + sdr]) continue;
          uint64_t w = __atomic_load_n(&sig[ctx * kNsig + sdr], __ATOMIC_ACQUIRE);
          if (w < static_cast<uint64_t>(round + 1)) continue;
          seen[ctx * n + sdr] = 1;
          seenCount++;
          const char* slot = win + ctx * kSlot * n + sdr * kSlot;
          bool ok = w == static_cast<uint64_t>(round + 1);
          for (size_t i = 0; ok && i < kSlot; i++) ok = static_cast<unsigned char>(slot[i]) == dataByte(sdr, r, ctx, round, i);
          if (!ok) {
            std::lock_guard<std::mutex> lock(*vm);
            v->violations++;
          }
        }
      }
      if (Clock::now() > deadline) {
        CHECK(death, "rank %d round %d: %zu requests pending, %d of %d signals seen after 30 s", r, round,
              reqs.size(), seenCount, nctx * n);
        noteFailure(kSystemError);
        break;
      }
      std::this_thread::yield();
    }
    if (sawPeerError) break;
    {
      std::lock_guard<std::mutex> lock(*vm);
      v->completed++;
    }
    barrier(r);  // nobody overwrites a slot before its owner has checked it
  }
  // The survivors close only once every one of them has seen the death (a rank closing early
  // would be another kind of failure for the others).
  if (death) barrier(r);
  // Closing never hangs, with or without a dead peer.
  for (int c = 0; c < ncomm; c++) {
    if (v14 && rmaCtx != nullptr && c == 0) ncclRmaPlugin_v14.destroyContext(rmaCtx);
    Result cr = v14 ? ncclRmaPlugin_v14.closeColl(comms[c]) : ncclGinPlugin_v11.closeColl(comms[c]);
    CHECK(cr == kSuccess || death, "rank %d: closeColl: %s", r, lastWarning());
  }
  munmap(win, winBytes);
}

// Child process `proc` of the GIN test.
int childGin(int coord, int proc, const char* variant) {
  MpSetup s{variant};
  if (strcmp(variant, "chaos") == 0) {
    configure("4242", nullptr, "10");
  } else if (strcmp(variant, "broken") == 0) {
    configure(nullptr, "signal-early", "10");
  } else {
    configure(nullptr, nullptr, "10");
  }
  std::vector<int> mine = ranksOf(proc);
  const int n = s.nranks, ncomm = s.ncomms();
  // listen for every (comm, local rank); send (comm, rank, handle) to the parent.
  std::vector<void*> listens(static_cast<size_t>(ncomm) * n, nullptr);
  for (int c = 0; c < ncomm; c++) {
    for (int r : mine) {
      char msg[8 + kNetHandleMaxSize] = {};
      Result lr = s.v14() ? ncclRmaPlugin_v14.listen(nullptr, 0, msg + 8, &listens[c * n + r])
                          : ncclGinPlugin_v11.listen(nullptr, 0, msg + 8, &listens[c * n + r]);
      if (lr != kSuccess) return 20;
      int32_t ids[2] = {c, r};
      memcpy(msg, ids, 8);
      coordSend(coord, msg, sizeof msg);
    }
  }
  // The allgathered table: ncomm * n handles.
  std::vector<char> table(static_cast<size_t>(ncomm) * n * kNetHandleMaxSize);
  if (coordRecv(coord, table.data(), table.size(), 30) != static_cast<ssize_t>(table.size())) return 21;
  std::vector<std::vector<char>> handles;
  for (int i = 0; i < ncomm * n; i++) {
    handles.emplace_back(table.begin() + i * kNetHandleMaxSize, table.begin() + (i + 1) * kNetHandleMaxSize);
  }
  Barrier local(static_cast<int>(mine.size()));
  auto barrier = [&](int r) {
    local.wait();
    if (r == mine[0]) {  // one thread per process talks to the parent
      coordSend(coord, "B", 1);
      char ack;
      coordRecv(coord, &ack, 1, 60);
    }
    local.wait();
  };
  Verdict v;
  std::mutex vm;
  std::vector<std::thread> threads;
  for (int r : mine) threads.emplace_back([&, r] { runRank(s, r, handles, listens, barrier, &v, &vm); });
  for (auto& t : threads) t.join();
  char report[64];
  snprintf(report, sizeof report, "V %d %d %d %d %d %d", v.violations, v.errors, v.peerErrors, v.completed,
           gFailures.load(), gDeathLines.load());
  coordSend(coord, report, strlen(report) + 1);
  return 0;
}

// Runs the three processes of a variant and returns their verdicts (one per process; a process
// that died has none).
std::vector<Verdict> ginThreeProcesses(const char* variant) {
  MpSetup s{variant};
  const int n = s.nranks, ncomm = s.ncomms();
  std::vector<Child> kids;
  for (int p = 0; p < 3; p++) kids.push_back(spawn({"gin", std::to_string(p), variant}));
  std::vector<char> table(static_cast<size_t>(ncomm) * n * kNetHandleMaxSize);
  for (int got = 0; got < ncomm * n; got++) {
    // Any child may answer first.
    bool one = false;
    for (auto& k : kids) {
      pollfd pf{k.fd, POLLIN, 0};
      if (poll(&pf, 1, 0) <= 0) continue;
      char msg[8 + kNetHandleMaxSize];
      if (coordRecv(k.fd, msg, sizeof msg, 1) != static_cast<ssize_t>(sizeof msg)) continue;
      int32_t ids[2];
      memcpy(ids, msg, 8);
      memcpy(table.data() + (static_cast<size_t>(ids[0]) * n + ids[1]) * kNetHandleMaxSize, msg + 8,
             kNetHandleMaxSize);
      one = true;
      break;
    }
    if (!one) {
      got--;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (auto& k : kids) coordSend(k.fd, table.data(), table.size());
  // Barriers and verdicts.
  std::vector<Verdict> verdicts;
  std::vector<char> finished(kids.size(), 0);
  int waiting = 0;
  std::vector<char> atBarrier(kids.size(), 0);
  auto deadline = Clock::now() + std::chrono::seconds(90);
  size_t alive = kids.size();
  while (alive > 0 && Clock::now() < deadline) {
    for (size_t i = 0; i < kids.size(); i++) {
      if (finished[i]) continue;
      pollfd pf{kids[i].fd, POLLIN, 0};
      if (poll(&pf, 1, 1) <= 0) continue;
      char msg[128] = {};
      ssize_t k = recv(kids[i].fd, msg, sizeof msg - 1, 0);
      if (k <= 0) {  // exited without a verdict (the death variant's victim)
        finished[i] = 1;
        alive--;
        continue;
      }
      if (msg[0] == 'B') {
        atBarrier[i] = 1;
        waiting++;
      } else if (msg[0] == 'V') {
        Verdict v;
        int childFailures = 0;
        sscanf(msg, "V %d %d %d %d %d %d", &v.violations, &v.errors, &v.peerErrors, &v.completed, &childFailures,
               &v.deathLines);
        CHECK(childFailures == 0, "process %zu (%s): %d failed checks (see its output above)", i, variant,
              childFailures);
        verdicts.push_back(v);
        finished[i] = 1;
        alive--;
      }
    }
    size_t live = 0;
    for (size_t i = 0; i < kids.size(); i++) live += finished[i] ? 0 : 1;
    if (waiting > 0 && static_cast<size_t>(waiting) == live) {
      for (size_t i = 0; i < kids.size(); i++) {
        if (atBarrier[i]) coordSend(kids[i].fd, "A", 1);
        atBarrier[i] = 0;
      }
      waiting = 0;
    }
  }
  CHECK(alive == 0, "%s: %zu process(es) did not finish within 90 s", variant, alive);
  for (auto& k : kids) {
    int code = reap(k, 10);
    CHECK(code == 0, "%s: a child exited %d", variant, code);
  }
  return verdicts;
}

void ginVariant(const char* variant) {
  std::vector<Verdict> vs = ginThreeProcesses(variant);
  int violations = 0, errors = 0, peerErrors = 0, completed = 0;
  for (const Verdict& v : vs) {
    violations += v.violations;
    errors += v.errors;
    peerErrors += v.peerErrors;
    completed += v.completed;
  }
  if (strcmp(variant, "broken") == 0) {
    CHECK(vs.size() == 3, "broken: %zu verdicts", vs.size());
    CHECK(violations > 0, "signal-early across processes was not caught (no receiver saw a signal before its data)");
  } else if (strcmp(variant, "death") == 0) {
    CHECK(vs.size() == 2, "death: %zu verdicts (the dying process gives none)", vs.size());
    CHECK(violations == 0, "death: %d ordering violations", violations);
    CHECK(peerErrors >= 3, "death: only %d of the 3 survivors' ranks saw an error", peerErrors);
    for (const Verdict& v : vs) {
      CHECK(v.deathLines == 1, "death: a surviving process logged %d lines naming the dead rank (expected one)",
            v.deathLines);
    }
  } else {
    CHECK(vs.size() == 3, "%s: %zu verdicts", variant, vs.size());
    CHECK(violations == 0 && errors == 0, "%s: %d ordering violations, %d errors", variant, violations, errors);
    CHECK(completed == 4 * kRounds, "%s: %d rank-rounds completed, expected %d", variant, completed, 4 * kRounds);
  }
}

// The exit child's last exit handler (registered before any static object is built, so it runs
// after every static destructor): the process lingers there, as one does while CUDA and NCCL
// tear down, so the busy thread meets whatever those destructors left; and a call that fails
// during exit (CUDA shutting down under NCCL's proxy thread) must say nothing.
bool gLingerAtExit = false;
__attribute__((constructor(101))) void registerLinger() {
  atexit([] {
    if (!gLingerAtExit) return;
    int done = 0;
    ncclGinPlugin_v11.test(reinterpret_cast<void*>(1), reinterpret_cast<void*>(1), &done);
    usleep(100 * 1000);
  });
}

// `--child <fd> exit <file>`: one rank keeps putting with a signal and testing on a thread of its
// own while the main thread exits the process, as a benchmark does when its -T watchdog fires
// with NCCL's GIN proxy thread still calling in. Stderr goes to <file>. Every call must keep
// working and say nothing until the process is gone.
int childExitWhileBusy(const char* errPath) {
  int fd = open(errPath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || dup2(fd, 2) < 0) return 3;
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);  // else init warns (a GPU setting)
  static const GinTableV11& G = ncclGinPlugin_v11;
  // Host windows that outlive exit(): static storage is never freed.
  static uint64_t sig[8];
  static char src[4096], dst[4096];
  void *ctx = nullptr, *listen = nullptr, *comm = nullptr, *sigH = nullptr, *srcH = nullptr, *dstH = nullptr, *gh;
  char handle[kNetHandleMaxSize];
  void* handles[1] = {handle};
  if (G.init(&ctx, 1, nullptr) != kSuccess || G.listen(ctx, 0, handle, &listen) != kSuccess ||
      G.connect(ctx, handles, 1, 0, listen, &comm) != kSuccess || G.closeListen(listen) != kSuccess ||
      G.regMrSym(comm, sig, sizeof sig, kPtrHost, kMrFlagForceSo, &sigH, &gh) != kSuccess ||
      G.regMrSym(comm, src, sizeof src, kPtrHost, 0, &srcH, &gh) != kSuccess ||
      G.regMrSym(comm, dst, sizeof dst, kPtrHost, 0, &dstH, &gh) != kSuccess) {
    return 3;
  }
  static std::atomic<long> ops{0};
  std::thread([=] {
    for (;;) {
      void* req = nullptr;
      int done = 0;
      if (G.iputSignal(comm, 0, srcH, sizeof src, 0, dstH, 0, 0, sigH, 0, kSignalOpInc, &req) != kSuccess) _exit(5);
      while (!done) {
        if (G.test(comm, req, &done) != kSuccess) _exit(6);
      }
      ops++;
    }
  }).detach();
  while (ops.load() < 1000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  gLingerAtExit = true;
  exit(0);
}

}  // namespace

// ---- cases ---------------------------------------------------------------------------------

// The net in one process: retry paths, every size, a too-small receive, the request limit, bad
// calls.
void caseNetOneProcess() {
  configure(nullptr, nullptr, "5");
  char handle[kNetHandleMaxSize];
  void* listen = nullptr;
  CHECK_OK(N.listen(nullptr, 0, handle, &listen));
  void* none = reinterpret_cast<void*>(1);
  CHECK_OK(N.accept(listen, &none, nullptr));
  CHECK(none == nullptr, "accept with nobody connecting must answer NULL (NCCL retries)");
  void* send = netConnect(handle);
  void* recv = netAccept(listen);
  CHECK(send != nullptr && recv != nullptr, "connect/accept: %s", lastWarning());
  if (send == nullptr || recv == nullptr) return;
  std::thread sender([&] { CHECK(netSendAll(send, 5), "sending failed: %s", lastWarning()); });
  CHECK(netRecvAll(recv, 5), "receiving failed: %s", lastWarning());
  sender.join();
  // The request limit: the 33rd outstanding send is answered with a NULL request.
  std::vector<char> buf(1 << 20, 'z');
  std::vector<void*> reqs;
  for (int i = 0; i < kNetMaxRequests; i++) {
    void* req = nullptr;
    CHECK_OK(N.isend(send, buf.data(), buf.size(), 9, nullptr, nullptr, &req));
    CHECK(req != nullptr, "send %d refused", i);
    reqs.push_back(req);
  }
  void* extra = reinterpret_cast<void*>(1);
  CHECK_OK(N.isend(send, buf.data(), buf.size(), 9, nullptr, nullptr, &extra));
  CHECK(extra == nullptr, "a send beyond NCCL_NET_MAX_REQUESTS must get a NULL request");
  std::thread drain([&] {
    std::vector<char> in(1 << 20);
    for (int i = 0; i < kNetMaxRequests; i++) {
      void* data = in.data();
      size_t posted = in.size();
      int tag = 9;
      void* req = nullptr;
      while (req == nullptr) N.irecv(recv, 1, &data, &posted, &tag, nullptr, nullptr, &req);
      int size = 0;
      CHECK(netWait(req, &size) == kSuccess && size == 1 << 20, "drain %d", i);
    }
  });
  for (void* r : reqs) CHECK(netWait(r, nullptr) == kSuccess, "limit sends");
  drain.join();
  // Bad calls.
  int bogus = 0;
  int done = 0;
  void* req = nullptr;
  void* data = buf.data();
  size_t sizes[2] = {16, 16};
  int tags[2] = {0, 0};
  void* datas[2] = {data, data};
  CHECK_ERR(N.irecv(recv, 2, datas, sizes, tags, nullptr, nullptr, &req), "maxRecvs = 1");
  CHECK_ERR(N.irecv(send, 1, datas, sizes, tags, nullptr, nullptr, &req), "is a send connection");
  CHECK_ERR(N.isend(recv, data, 8, 0, nullptr, nullptr, &req), "is a receive connection");
  CHECK_ERR(N.isend(&bogus, data, 8, 0, nullptr, nullptr, &req), "not an open net connection");
  CHECK_ERR(N.isend(send, data, 8, 0, &bogus, nullptr, &req), "not a memory handle");
  CHECK_ERR(N.test(&bogus, &done, nullptr), "not a live net request");
  CHECK_ERR(N.test(nullptr, nullptr, nullptr), "net test");
  CHECK_ERR(N.regMr(send, data, 8, kPtrCuda, &req), "host memory only");
  CHECK_ERR(N.deregMr(send, &bogus), "deregMr");
  char bogusHandle[kNetHandleMaxSize] = {};  // NCCL passes whole handles
  CHECK_ERR(N.connect(nullptr, 0, bogusHandle, &req, nullptr), "not made by ginbench-loopback");
  CHECK_ERR(N.closeSend(recv), "is a receive connection");
  CHECK_ERR(N.accept(&bogus, &req, nullptr), "not an open net listen comm");
  void* fl = reinterpret_cast<void*>(1);
  CHECK_OK(N.iflush(recv, 1, &data, nullptr, nullptr, &fl));
  CHECK(fl == nullptr, "iflush of host memory: NULL request (nothing to flush)");
  CHECK_ERR(N.iflush(send, 1, &data, nullptr, nullptr, &fl), "is a send connection");
  CHECK_ERR(N.isend(send, data, kMaxNetSize + 1, 0, nullptr, nullptr, &req), "more than maxP2pBytes");
  size_t hugeSize[1] = {kMaxNetSize + 1};
  CHECK_ERR(N.irecv(recv, 1, datas, hugeSize, tags, nullptr, nullptr, &req), "more than maxP2pBytes");
  // A too-small receive in one process.
  std::vector<char> small(100);
  void* sreq = nullptr;
  CHECK_OK(N.isend(send, buf.data(), 200, 3, nullptr, nullptr, &sreq));
  void* sd = small.data();
  size_t posted = small.size();
  int tag = 3;
  void* rreq = nullptr;
  CHECK_OK(N.irecv(recv, 1, &sd, &posted, &tag, nullptr, nullptr, &rreq));
  int size = 0;
  CHECK(netWait(rreq, &size) == kInvalidUsage, "too-small receive accepted");
  CHECK_ERR(N.irecv(recv, 1, &sd, &posted, &tag, nullptr, nullptr, &rreq), "arrived for a receive of 100");
  CHECK_OK(N.closeSend(send));
  CHECK_OK(N.closeRecv(recv));
  CHECK_OK(N.closeListen(listen));
  CHECK_ERR(N.closeListen(listen), "closeListen");
  configure(nullptr, nullptr);
}

void caseNetTwoProcesses() { netTwoProcesses("ok"); }
void caseNetPeerDies() { netTwoProcesses("die"); }
void caseMultiProcessV11() { ginVariant("v11"); }
void caseMultiProcessV14() { ginVariant("v14"); }
void caseMultiProcessChaos() { ginVariant("chaos"); }
void caseMultiProcessBroken() { ginVariant("broken"); }
void caseMultiProcessPeerDeath() { ginVariant("death"); }

// A process that exits while a thread is still inside the plugin (a -T timeout exits with
// NCCL's proxy thread live) exits cleanly and silently: no crash from the plugin's process-wide
// state torn down under that thread, no warnings from calls made during exit. Several runs, as
// the race lands differently each time.
void caseExitWhileBusy() {
  for (int run = 0; run < 10; run++) {
    char path[] = "/tmp/ginbench-contract-exit-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp failed");
    if (fd < 0) return;
    close(fd);
    Child c = spawn({"exit", path});
    int code = reap(c, 20);
    std::string err;
    if (FILE* f = fopen(path, "r")) {
      char buf[512];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, f)) > 0) err.append(buf, n);
      fclose(f);
    }
    unlink(path);
    CHECK(code == 0 && err.empty(), "run %d: exit code %d (-1: killed by a signal or hung), stderr: %s", run, code,
          err.c_str());
  }
}

// ---- signal delivery between processes: one rank per process --------------------------------

namespace {

// `contract_test --child <fd> deliver <scenario> <rank> <nranks>`: connects through the parent
// (handle allgather), runs `scenario`, exits 0 when it held.
//   held: rank 1 enters regMrSym first, its proxy thread progressing; rank 0 arrives last,
//     returns at once and signals rank 1's window before rank 1's registration has ended. The
//     signal must wait for it, not be dropped (and every later one with it).
//   bye: rank 2 closes normally; rank 0's signal to it fails, and rank 0 still applies rank 1's
//     signals after that, with at most one failing progress call, not one per call.
//   contexts (RMA v14): rank 0 has two rmaCtx, rank 1 one so far. Rank 0 signals rank 1 on its
//     second context, which rank 1 does not have yet, then on the first: the first's signal is
//     applied while the other waits, and that one is applied once rank 1 creates its second.
int childDeliver(int coord, const std::string& scenario, int rank, int n) {
  configure(nullptr, nullptr, "10");
  const GinTableV11& G = ncclGinPlugin_v11;
  const RmaTableV14& R = ncclRmaPlugin_v14;
  const bool v14 = scenario == "contexts";
  std::vector<char> table(static_cast<size_t>(n) * kNetHandleMaxSize);
  void* listen = nullptr;
  if ((v14 ? R.listen : G.listen)(nullptr, 0, table.data() + rank * kNetHandleMaxSize, &listen) != kSuccess) return 20;
  coordSend(coord, table.data() + rank * kNetHandleMaxSize, kNetHandleMaxSize);
  if (coordRecv(coord, table.data(), table.size(), 30) != static_cast<ssize_t>(table.size())) return 21;
  std::vector<void*> handles;
  for (int r = 0; r < n; r++) handles.push_back(table.data() + r * kNetHandleMaxSize);
  void* comm = nullptr;
  if ((v14 ? R.connect : G.connect)(nullptr, handles.data(), n, rank, listen, &comm) != kSuccess) return 22;
  auto barrier = [&] {
    coordSend(coord, "B", 1);
    char ack;
    return coordRecv(coord, &ack, 1, 30) == 1;
  };
  auto wait = [&](void* req) {
    for (auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
      int done = 0;
      if (G.test(comm, req, &done) != kSuccess) return false;
      if (done) return true;
    }
    return false;
  };
  auto word = [](uint64_t* w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); };
  alignas(8) static uint64_t sig[8];
  void *mh = nullptr, *gh = nullptr;
  int code = 0;
  if (scenario == "held") {
    std::atomic<bool> stop{false};
    std::thread proxy;
    if (rank == 1) {
      proxy = std::thread([&] {
        while (!stop) G.ginProgress(comm);
      });
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (G.regMrSym(comm, sig, sizeof sig, kPtrHost, 0, &mh, &gh) != kSuccess) return 23;
    if (rank == 0) {
      for (int i = 0; i < 3 && code == 0; i++) {
        void* req = nullptr;
        if (G.iputSignal(comm, 0, nullptr, 0, 0, nullptr, 1, 0, mh, 1, kSignalOpInc, &req) != kSuccess || !wait(req)) {
          code = 24;
        }
      }
    } else {
      auto until = Clock::now() + std::chrono::seconds(5);
      while (word(&sig[0]) < 3 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (word(&sig[0]) != 3) code = 25;
      stop = true;
      proxy.join();
    }
    if (!barrier()) return 26;
  } else if (scenario == "contexts") {
    RmaConfigV14 one{1, 0, 1};
    void *first = nullptr, *second = nullptr;
    if (R.createContext(comm, &one, &first) != kSuccess) return 32;
    if (rank == 0 && R.createContext(comm, &one, &second) != kSuccess) return 32;
    if (R.regMrSym(comm, sig, sizeof sig, kPtrHost, 0, &mh) != kSuccess) return 23;
    if (rank == 0) {
      void* req = nullptr;
      for (void* ctx : {second, first}) {
        const uint64_t off = ctx == second ? 0 : 8;
        if (R.iputSignal(ctx, 0, 0, nullptr, 0, 0, nullptr, 1, off, mh, 1, kSignalOpInc, true, &req) != kSuccess ||
            !wait(req)) {
          code = 24;
        }
      }
      if (!barrier()) return 26;  // rank 1 has both
    } else {
      auto until = Clock::now() + std::chrono::seconds(5);
      while (word(&sig[1]) == 0 && Clock::now() < until) R.rmaProgress(first);
      if (word(&sig[1]) != 1) code = 33;  // held behind the other context's signal
      if (word(&sig[0]) != 0) code = 34;  // applied on a context that does not exist here
      if (R.createContext(comm, &one, &second) != kSuccess) return 32;
      until = Clock::now() + std::chrono::seconds(5);
      while (word(&sig[0]) == 0 && Clock::now() < until) R.rmaProgress(first);
      if (word(&sig[0]) != 1) code = 35;
      if (!barrier()) return 26;
    }
    for (void* ctx : {first, second}) R.destroyContext(ctx);
  } else if (scenario == "bye") {
    if (G.regMrSym(comm, sig, sizeof sig, kPtrHost, 0, &mh, &gh) != kSuccess) return 23;
    if (!barrier()) return 26;
    if (rank == 2) {
      G.closeColl(comm);
      barrier();  // closed
      barrier();  // rank 0 has signalled it
      barrier();  // rank 1 has signalled rank 0
      return 0;
    }
    barrier();
    if (rank == 0) {
      void* req = nullptr;
      Result r = G.iputSignal(comm, 0, nullptr, 0, 0, nullptr, 2, 0, mh, 1, kSignalOpInc, &req);
      if (r == kSuccess && wait(req)) code = 27;  // a signal to a closed rank cannot be done
    }
    barrier();
    if (rank == 1) {
      void* req = nullptr;
      if (G.iputSignal(comm, 0, nullptr, 0, 0, nullptr, 0, 0, mh, 1, kSignalOpInc, &req) != kSuccess || !wait(req)) {
        code = 28;
      }
    }
    barrier();
    if (rank == 0) {
      int failed = 0;
      for (int i = 0; i < 200 && word(&sig[0]) == 0; i++) {
        failed += G.ginProgress(comm) != kSuccess;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (word(&sig[0]) != 1) code = 29;
      if (failed > 1) code = 30;
    }
  }
  if ((v14 ? R.deregMrSym : G.deregMrSym)(comm, mh) != kSuccess && code == 0 && scenario != "bye") code = 31;
  (v14 ? R.closeColl : G.closeColl)(comm);
  (v14 ? R.closeListen : G.closeListen)(listen);
  return code;
}

// Runs `scenario` on `n` ranks, one child process each, as their coordinator.
void deliver(const char* scenario, int n) {
  std::vector<Child> kids;
  for (int r = 0; r < n; r++) kids.push_back(spawn({"deliver", scenario, std::to_string(r), std::to_string(n)}));
  std::vector<char> table(static_cast<size_t>(n) * kNetHandleMaxSize);
  bool ok = true;
  for (int r = 0; r < n; r++) {
    ok = ok && coordRecv(kids[r].fd, table.data() + r * kNetHandleMaxSize, kNetHandleMaxSize, 30) ==
                   static_cast<ssize_t>(kNetHandleMaxSize);
  }
  for (Child& k : kids) ok = ok && coordSend(k.fd, table.data(), table.size());
  // Barriers until the children are done (each leaves by closing its end).
  while (ok) {
    int in = 0;
    for (Child& k : kids) {
      char b;
      in += coordRecv(k.fd, &b, 1, 30) == 1;
    }
    if (in == 0) break;
    for (Child& k : kids) coordSend(k.fd, "A", 1);
  }
  for (int r = 0; r < n; r++) {
    int code = reap(kids[r], 30);
    CHECK(code == 0, "%s: rank %d exited %d", scenario, r, code);
  }
}

}  // namespace

void caseSignalWaitsForItsWindow() { deliver("held", 2); }
void caseClosedPeerFailsAlone() { deliver("bye", 3); }
void caseSignalWaitsPerContext() { deliver("contexts", 2); }

// `contract_test --child <fd> net <mode>` / `--child <fd> gin <proc> <variant>`.
int childMain(int argc, char** argv) {
  if (argc < 4) return 2;
  int coord = atoi(argv[2]);
  setLogger(childLogger);
  std::string role = argv[3];
  int code = 3;
  if (role == "net" && argc >= 5) code = childNet(coord, argv[4]);
  if (role == "gin" && argc >= 6) code = childGin(coord, atoi(argv[4]), argv[5]);
  if (role == "exit" && argc >= 5) code = childExitWhileBusy(argv[4]);
  if (role == "deliver" && argc >= 7) code = childDeliver(coord, argv[4], atoi(argv[5]), atoi(argv[6]));
  fflush(stdout);
  fflush(stderr);
  return code;
}
