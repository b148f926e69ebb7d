// The out-of-band socket layer between processes of one host (virtual nodes): Unix domain
// sockets in Linux's abstract namespace, so nothing is left in the file system when a process
// dies, and an address is a name derived from the listening process's nonce and a number (both
// travel in NCCL's listen handles). Two kinds of connection use it:
//   - the net's data path (net_socket.cc): SOCK_STREAM, a byte stream of framed messages;
//   - a GIN/RMA connection's control channel (Channel below): SOCK_SEQPACKET, so every message
//     arrives whole, and a file descriptor sent with SCM_RIGHTS arrives with its message.
// Every socket is non-blocking; the few waits (accepting a peer, a setup message) take a
// deadline. A peer that closes without saying goodbye (EOF, ECONNRESET, EPIPE) is reported as
// dead, never as a hang.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "abi_common.h"

namespace gbl {

using Clock = std::chrono::steady_clock;

// A random number per process, renewed after fork(): tells ranks of this process from others.
uint64_t processNonce();

// An abstract-namespace address: "\0ginbench-loopback/<kind>/<nonce>/<id>".
struct SocketName {
  char bytes[96];
  unsigned length;  // of the name, leading NUL included
};
SocketName socketName(const char* kind, uint64_t nonce, uint64_t id);

// A non-blocking listening socket of `type` (SOCK_STREAM / SOCK_SEQPACKET) bound to `name`;
// -1 and a logged error on failure.
int listenOn(int type, const SocketName& name);
// Non-blocking connect. Returns the fd, or -1 with *retry true when the listener's backlog is
// full (call again), or -1 with *retry false (logged) when nobody listens there.
int connectTo(int type, const SocketName& name, bool* retry);
// Accepts one connection from a non-blocking listener: the new non-blocking fd, or -1 with
// *none true when nobody is waiting, or -1 (logged) on error.
int acceptFrom(int listenFd, bool* none);
// Waits until `fd` is readable (or writable), at most until `deadline`. false: timed out.
bool waitFd(int fd, bool forWrite, Clock::time_point deadline);

Clock::time_point deadlineAfter(double seconds);

// One message of a control channel (fixed size; fields by type).
struct ChannelMsg {
  enum Type : uint32_t { Hello = 1, Reg = 2, Signal = 3, Bye = 4 };
  uint32_t magic;  // kChannelMagic
  uint32_t type;
  uint32_t from;  // sender's rank
  uint32_t to;    // receiver's rank
  // Hello: a = group key, b = nranks, c = sender's pid.
  // Reg: a = registration seq, b = window size, c = memory type, d = offset of the window in
  //      its allocation, e = allocation size, f = flags; hasFd: an fd came with it; importable.
  // Signal: a = context, b = per-(context, sender) sequence number (1, 2, ...), c = registration
  //      seq of the signal window, d = byte offset of the word, e = the amount to add.
  uint64_t a, b, c, d, e, f;
  uint32_t hasFd;
  uint32_t importable;
};
constexpr uint32_t kChannelMagic = 0x67626c63;  // "gblc"
static_assert(sizeof(ChannelMsg) == 72, "control message layout");

// A control channel to one peer rank: a connected SOCK_SEQPACKET socket. Sends and receives
// never block except where a deadline is given. Thread safety: the caller serialises calls on
// one Channel (each CollComm guards its channels with the channel's `mutex`).
class Channel {
 public:
  Channel(int fd, int peer, int peerPid) : fd_(fd), peer_(peer), peerPid_(peerPid) {}
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  std::mutex mutex;

  int fd() const { return fd_; }
  int peer() const { return peer_; }
  int peerPid() const { return peerPid_; }
  void identify(int peer, int pid) {  // an accepted channel, once its Hello has arrived
    peer_ = peer;
    peerPid_ = pid;
  }
  // Dead: the peer went away without a Bye, or the socket failed; why() says how.
  bool dead() const { return dead_; }
  // The peer said goodbye (closed its end of the connection on purpose).
  bool closedByPeer() const { return bye_; }
  const std::string& why() const { return why_; }

  // Tries to send `m` (with `fd` attached if >= 0) now. kSuccess and *sent = false: the socket
  // is full, try later. An error marks the channel dead (logged by the caller).
  Result trySend(const ChannelMsg& m, int fd, bool* sent);
  // Sends, waiting for room until `deadline`.
  Result send(const ChannelMsg& m, int fd, Clock::time_point deadline);
  // Reads every message waiting now into `received` (with the fd that came with it, or -1).
  // Bye marks the channel closed by the peer; EOF without it marks it dead.
  Result pump();
  // Waits until a message arrives (or the deadline) and pumps it.
  Result pumpWait(Clock::time_point deadline);

  struct Received {
    ChannelMsg msg;
    int fd;
    // A signal: since when it has waited for its window (or context) to be registered here
    // (epoch: it has not).
    Clock::time_point waitingSince{};
  };
  std::deque<Received> received;  // in arrival order; the owner takes what it understands

  void sayBye();  // best effort, at close

 private:
  Result markDead(const char* what, int err);
  int fd_;
  int peer_;
  int peerPid_;
  bool dead_ = false;
  bool bye_ = false;
  std::string why_;
};

// Closes every fd of messages still queued (at teardown).
void dropReceived(std::deque<Channel::Received>& q);

}  // namespace gbl
