// The plugin's objects behind the opaque pointers NCCL holds. One GIN (v11) or RMA (v14)
// connection of nranks ranks is a Group; each rank's end of it is a CollComm. The ranks of one
// process share the process's Group object; ranks in other processes (virtual nodes) are
// reached over a control channel per (rank, remote rank) (channel.h, remote.cc). Puts are
// copies between windows (a peer process's windows mapped here, window_share.h). Windows are
// Registrations: collective, so every rank's window is known to every rank once all have
// arrived.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "abi_common.h"
#include "channel.h"
#include "chaos.h"
#include "config.h"
#include "mover.h"
#include "window_share.h"

namespace gbl {

struct CollComm;
struct Group;
struct Lane;

// What listen() writes into NCCL's handle, which NCCL allgathers and hands to connect().
struct WireHandle {
  char magic[8];           // "GBLOOP1"
  uint64_t processNonce;   // which process listened: ranks with this process's nonce are local
  uint64_t listenId;       // unique per listen() in the process; with the nonce, names the
                           // listen socket, and handles[0]'s pair names the Group
  int32_t pid;
  int32_t rankHint;        // unused by connect; helps when reading a dump
};
static_assert(sizeof(WireHandle) <= kNetHandleMaxSize, "listen handle must fit NCCL_NET_HANDLE_MAXSIZE");

struct Instance {  // what init() returns; nothing depends on it (connect may get NULL)
  uint64_t commId = 0;
};

struct ListenComm {
  WireHandle handle{};
  int fd = -1;  // SOCK_SEQPACKET listener: other processes' ranks connect here (channel.h)
};

// A flag set under one lock and read under another (a rank deregistering its window while a
// peer's put checks it); copyable, so RegEntry stays a value.
struct SharedFlag {
  std::atomic<bool> value{false};
  SharedFlag() = default;
  SharedFlag(const SharedFlag& o) : value(o.value.load()) {}
  SharedFlag& operator=(const SharedFlag& o) {
    value.store(o.value.load());
    return *this;
  }
  explicit operator bool() const { return value.load(std::memory_order_acquire); }
  void set() { value.store(true, std::memory_order_release); }
};
struct RegEntry {
  char* base = nullptr;
  size_t size = 0;
  int type = 0;       // kPtrHost / kPtrCuda
  int device = -1;    // CUDA device of a kPtrCuda window
  uint64_t flags = 0;
  bool arrived = false;
  SharedFlag deregistered;
  // A rank of another process: `base` is its window mapped here (null if it could not be
  // shared, e.g. a signal array: signals then travel as messages, data puts are refused).
  bool remote = false;
  std::shared_ptr<ImportedWindow> imported;
};

struct Registration {
  uint64_t seq = 0;
  std::vector<RegEntry> entries;  // by rank
  int arrived = 0;
  bool granting = false;  // a rank is granting device access (after all arrived)
  bool ready = false;   // every rank arrived and device access was granted
  bool failed = false;  // timed out or access could not be granted
  // Ranks holding it: counted from a rank's arrival in regMrSym (not from its handle), so the
  // first rank back with a handle cannot free it by deregistering while the others have not
  // yet woken up from the wait (they still read it). A MemHandle carries its rank's hold.
  int holders = 0;
};

struct MemHandle {  // mhandle == ginHandle, as NCCL's own IB proxy does
  Registration* reg = nullptr;
  int rank = -1;
  CollComm* owner = nullptr;
};

// Host-side shadow of one signal word (see engine.cc for why signals are written, not added).
struct SignalShadow {
  uint64_t value = 0;
  uint64_t lastTicket = 0;  // ticket of the last write on the domain's timeline
  bool known = false;
};

// The signal words of one destination rank in one memory kind: all writers go through one
// timeline in the order of their shadow values, so the word only ever moves forward.
struct SignalDomain {
  std::mutex mutex;
  std::unique_ptr<Timeline> timeline;
  std::map<std::pair<const Registration*, uint64_t>, SignalShadow> shadows;
};

struct Group {
  uint64_t key = 0;
  int nranks = 0;
  int nLocal = 0;  // ranks of this process
  std::mutex mutex;  // members, regs
  std::condition_variable cv;
  std::vector<CollComm*> members;
  int joined = 0;
  bool closing = false;  // a rank has left: no rank may (re)join
  std::map<uint64_t, Registration*> regs;  // by collective sequence number
  // [rank][0: host words, 1: device words]
  std::vector<std::unique_ptr<SignalDomain>> signalDomains;
  SignalDomain& domain(int rank, bool device) { return *signalDomains[2 * rank + (device ? 1 : 0)]; }
};

struct Part {  // one piece of a request: complete once `timeline` reaches `ticket`
  Timeline* timeline;
  uint64_t ticket;
  std::mutex* lock;  // the signal domain's mutex for shared timelines, else null
  // A signal to another process: complete once `sentLane` has sent `ticket` signal messages
  // (timeline is then null).
  Lane* sentLane = nullptr;
};

// A piece of an op that never landed (engine.cc unhold): to which peer, and why.
struct Lost {
  int peer = -1;  // -1: nothing lost
  const char* why = nullptr;
  explicit operator bool() const { return peer >= 0; }
};

struct Request {
  CollComm* owner = nullptr;
  std::vector<Part> parts;
  size_t partsDone = 0;  // parts[0, partsDone) are known complete
  int heldChunks = 0;   // chaos: chunks not issued yet
  Lost lost;            // chaos: a held chunk that never landed: the op fails its test
  int lateReports = 0;  // chaos: "not done" answers left after completion
  std::chrono::steady_clock::time_point issued{};  // GINBENCH_LOOPBACK_STATS only
};

struct HeldChunk {  // chaos: a piece of an unsignalled put (or get) not issued yet
  Request* req;
  char* dst;
  const char* src;
  size_t bytes;
  int dstDevice;  // CUDA device of each side; -1: host memory
  int srcDevice;
  unsigned pollsLeft;
  uint64_t opSeq;
  unsigned chunk;
  bool crossProcess = false;  // one side is another process's window mapped here: never "local"
  bool untilTested = false;   // negative control: detached from its op, issued after releaseAt
  std::chrono::steady_clock::time_point releaseAt{};
  // The peer's window (a put's destination, a get's source), which its owner may deregister
  // while the piece is held; lives as long as this rank's handle of the same registration, and
  // this rank settles its held pieces before it releases any handle.
  const RegEntry* peerWindow = nullptr;
  bool windowGone() const { return peerWindow != nullptr && peerWindow->deregistered; }
};

// A signal to a rank of another process, waiting until everything before it on its lane has
// completed (GIN's strong-signal rule), then sent as a message to the owner.
struct OutSignal {
  Timeline* fence;  // null: nothing to wait for
  uint64_t ticket;
  uint64_t regSeq;
  uint64_t offset;
  uint64_t delta;
  uint64_t seq;
};

// One ordering domain: this rank's traffic to one peer on one context. GIN orders signals only
// within (context, peer), so lanes run independently, each on its own timeline.
struct Lane {
  int context = 0;
  int peer = 0;
  std::unique_ptr<Timeline> timeline;
  std::vector<std::unique_ptr<Timeline>> retired;  // host timelines replaced by a device one
  std::vector<HeldChunk> held;
  uint64_t opSeq = 0;  // ops entered in program order (trace ids)
  // Signals to another process, in program order; sigQueued/sigSent count them.
  std::deque<OutSignal> outbox;
  uint64_t sigQueued = 0;
  uint64_t sigSent = 0;
  uint64_t sigLost = 0;  // signals up to this one were dropped: their peer closed on purpose
};

struct CollComm {
  Group* group = nullptr;
  int rank = 0;
  int nranks = 0;
  Config config;
  ChaosPolicy chaos;
  Rng rng;
  std::mutex mutex;  // everything below; NCCL calls one CollComm from its progress thread
  std::atomic<int> device{-1};  // this rank's CUDA device, from its first device window
  uint64_t regSeq = 0;
  // Contexts: v11 has 1, from connect. v14 numbers the contexts of each createContext (one per
  // NCCL device communicator) after those of the earlier ones, the same on every rank, since
  // every rank creates them in the same order; a destroyed set's numbers are not reused.
  int nContexts = 0;
  bool v11 = false;
  std::unordered_set<void*> contextSets;  // v14's live rmaCtx
  std::deque<Lane> lanes;  // [context * nranks + peer]; a deque, as ops keep pointers to lanes
  std::unordered_set<Request*> requests;
  std::unordered_set<MemHandle*> handles;
  Result error = kSuccess;  // first failure of a data-path call, for queryLastError

  // Other processes. local[r]: rank r lives in this process; channels[r]: the control channel
  // to rank r of another process (null for local ranks); pids for messages.
  std::vector<char> local;
  std::vector<int> pids;
  std::vector<std::unique_ptr<Channel>> channels;
  int epollFd = -1;              // every channel, so progress() finds traffic with one call
  std::vector<uint64_t> inSeq;   // [context * nranks + sender]: last signal applied
  // A peer process died: every later op fails. Set from regMrSym's thread too, without `mutex`.
  std::atomic<Result> peerError{kSuccess};
  Lost lost;  // an op lost a held piece (engine.cc unhold): every later op fails
  std::atomic<bool> stashed{false};  // regMrSym left signals in a channel's queue for progress()
  std::chrono::steady_clock::time_point nextStateLine{};  // GINBENCH_LOOPBACK_STATS: see dumpState
  bool isLocal(int r) const { return local.empty() || local[static_cast<size_t>(r)] != 0; }
  bool anyRemote() const { return !channels.empty(); }
};

// Contexts one connection may have live, all its rmaCtx together; and numbered over its life (a
// destroyed rmaCtx's numbers are not reused: every rank numbers alike only if none is).
constexpr int kMaxContexts = 1024;
constexpr int kMaxNumberedContexts = 1 << 20;

struct ContextSet {  // v14's rmaCtx: the connection's contexts [base, base + n)
  CollComm* comm = nullptr;
  int base = 0;
  int n = 0;
};

// Process-wide table of live objects, so a stale, foreign or wrong-kind pointer is answered with
// an error instead of being dereferenced.
enum class Kind { Instance, Listen, Coll, ContextSet, NetListen, NetComm, NetRequest, NetMr };
void track(void* p, Kind kind);
void untrack(void* p);
bool isLive(void* p, Kind kind);

// Test hook: visibility events of the synchronous (host) mover, in the order they happened.
struct TraceEvent {
  enum Type { Data, Signal } type;
  const CollComm* comm;
  int rank;
  int context;
  int peer;
  uint64_t opSeq;
  unsigned chunk;
  size_t bytes;  // Data: bytes made visible
  const uint64_t* word;  // Signal: the word and the value stored
  uint64_t value;
};
using TraceHook = void (*)(const TraceEvent& event, void* user);
void setTraceHook(TraceHook hook, void* user);
void trace(const TraceEvent& event);

}  // namespace gbl
