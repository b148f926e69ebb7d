// The plugin's objects behind the opaque pointers NCCL holds. One GIN (v11) or RMA (v14)
// connection of nranks ranks is a Group; each rank's end of it is a CollComm. In one process
// (one node to NCCL) every rank's CollComm of a Group lives here, and puts are copies between
// their windows. Windows are Registrations: collective, so every rank's base and size are known
// to every rank once all have arrived.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

#include "abi_common.h"
#include "chaos.h"
#include "config.h"
#include "mover.h"

namespace gbl {

struct CollComm;
struct Group;

// What listen() writes into NCCL's handle, which NCCL allgathers and hands to connect().
struct WireHandle {
  char magic[8];           // "GBLOOP1"
  uint64_t processNonce;   // which process listened (one-process mode checks they all match)
  uint64_t listenId;       // unique per listen() in the process; handles[0]'s names the Group
  int32_t pid;
  int32_t rankHint;        // unused by connect; helps when reading a dump
};
static_assert(sizeof(WireHandle) <= kNetHandleMaxSize, "listen handle must fit NCCL_NET_HANDLE_MAXSIZE");

struct Instance {  // what init() returns; nothing depends on it (connect may get NULL)
  uint64_t commId = 0;
};

struct ListenComm {
  WireHandle handle{};
};

struct RegEntry {
  char* base = nullptr;
  size_t size = 0;
  int type = 0;       // kPtrHost / kPtrCuda
  int device = -1;    // CUDA device of a kPtrCuda window
  uint64_t flags = 0;
  bool arrived = false;
  bool deregistered = false;
};

struct Registration {
  uint64_t seq = 0;
  std::vector<RegEntry> entries;  // by rank
  int arrived = 0;
  bool ready = false;   // every rank arrived and device access was granted
  bool failed = false;  // timed out or access could not be granted
  int liveHandles = 0;
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
  std::mutex mutex;  // members, regs
  std::condition_variable cv;
  std::vector<CollComm*> members;
  int joined = 0;
  std::map<uint64_t, Registration*> regs;  // by collective sequence number
  // [rank][0: host words, 1: device words]
  std::vector<std::unique_ptr<SignalDomain>> signalDomains;
  SignalDomain& domain(int rank, bool device) { return *signalDomains[2 * rank + (device ? 1 : 0)]; }
};

struct Part {  // one piece of a request: complete once `timeline` reaches `ticket`
  Timeline* timeline;
  uint64_t ticket;
  std::mutex* lock;  // the signal domain's mutex for shared timelines, else null
};

struct Request {
  CollComm* owner = nullptr;
  std::vector<Part> parts;
  size_t partsDone = 0;  // parts[0, partsDone) are known complete
  int heldChunks = 0;   // chaos: chunks not issued yet
  int lateReports = 0;  // chaos: "not done" answers left after completion
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
  int nContexts = 0;  // v11: 1 from connect; v14: from createContext
  void* contextSet = nullptr;
  std::vector<Lane> lanes;  // [context * nranks + peer]
  std::unordered_set<Request*> requests;
  std::unordered_set<MemHandle*> handles;
  Result error = kSuccess;  // first failure of a data-path call, for queryLastError
};

struct ContextSet {  // v14's rmaCtx
  CollComm* comm = nullptr;
};

// Process-wide table of live objects, so a stale, foreign or wrong-kind pointer is answered with
// an error instead of being dereferenced.
enum class Kind { Instance, Listen, Coll, ContextSet };
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
