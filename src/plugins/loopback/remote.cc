#include "remote.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "forever.h"
#include "internal.h"
#include "log.h"

namespace gbl {
namespace {

ChannelMsg message(const CollComm& c, int to, ChannelMsg::Type type) {
  ChannelMsg m{};
  m.magic = kChannelMagic;
  m.type = type;
  m.from = static_cast<uint32_t>(c.rank);
  m.to = static_cast<uint32_t>(to);
  return m;
}

// One line per dead peer process, however many connections (contexts) notice it.
bool firstReportOf(int pid) {
  static std::mutex mutex;
  static Forever<std::set<int>> reported;
  std::lock_guard<std::mutex> lock(mutex);
  return reported->insert(pid).second;
}

Result peerDied(CollComm& c, Channel& ch) {
  Result none = kSuccess;
  if (c.peerError.compare_exchange_strong(none, kRemoteError)) {
    const char* what = "GIN connection rank %d: rank %d (pid %d) is gone: %s; every pending and later operation of "
                       "this connection fails";
    if (firstReportOf(ch.peerPid())) {
      fail(kRemoteError, what, c.rank, ch.peer(), ch.peerPid(), ch.why().c_str());
    } else {
      info(what, c.rank, ch.peer(), ch.peerPid(), ch.why().c_str());
    }
  }
  return c.peerError;
}

Result closedPeer(const CollComm& c, Channel& ch, const char* what) {
  return fail(kRemoteError, "%s: rank %d: rank %d (pid %d) has closed its end of the GIN connection", what, c.rank,
              ch.peer(), ch.peerPid());
}

// Takes one message of `type` (and, for Reg, registration `seq`) out of the channel's queue.
bool take(Channel& ch, uint32_t type, uint64_t seq, Channel::Received* out) {
  for (auto it = ch.received.begin(); it != ch.received.end(); ++it) {
    if (it->msg.type == type && (type != ChannelMsg::Reg || it->msg.a == seq)) {
      *out = *it;
      ch.received.erase(it);
      return true;
    }
  }
  return false;
}

// Reads the Hello a connecting rank sends first (bounded) and names the channel after it.
Result helloFrom(int fd, int rank, int nranks, uint64_t key, std::unique_ptr<Channel>* out) {
  std::unique_ptr<Channel> ch(new Channel(fd, -1, 0));
  auto deadline = deadlineAfter(currentConfig().timeoutSeconds);
  while (ch->received.empty()) {
    if (Result r = ch->pumpWait(deadline); r != kSuccess || ch->closedByPeer()) {
      return fail(kRemoteError, "connect: a peer's connection failed before it introduced itself");
    }
    if (ch->received.empty() && Clock::now() >= deadline) {
      return fail(kSystemError, "connect: a peer connected but did not introduce itself within %.0f s",
                  currentConfig().timeoutSeconds);
    }
  }
  // Only the Hello: what the peer sent right after it (its first window) stays queued.
  const ChannelMsg m = ch->received.front().msg;
  if (ch->received.front().fd >= 0) close(ch->received.front().fd);
  ch->received.pop_front();
  if (m.type != ChannelMsg::Hello || m.to != static_cast<uint32_t>(rank) || m.a != key ||
      m.b != static_cast<uint64_t>(nranks) || m.from >= static_cast<uint32_t>(nranks)) {
    return fail(kRemoteError, "connect: the listen socket of rank %d got a connection for another GIN group", rank);
  }
  ch->identify(static_cast<int>(m.from), static_cast<int>(m.c));
  *out = std::move(ch);
  return kSuccess;
}

// Rank `q`'s entry of registration `seq` is filled in already.
bool windowKnown(CollComm& c, uint64_t seq, int q) {
  Group& g = *c.group;
  std::lock_guard<std::mutex> glock(g.mutex);
  auto it = g.regs.find(seq);
  return it != g.regs.end() && it->second->entries[q].arrived;
}

// Whether a signal into registration `seq` can be applied here now: this rank has entered that
// registration and it has ended (ready, failed, or released since: applySignal then reports
// it). One this rank has not reached yet, or still waits for, is not.
bool signalWindowKnown(CollComm& c, uint64_t seq) {
  if (seq >= c.regSeq) return false;
  Group& g = *c.group;
  std::lock_guard<std::mutex> glock(g.mutex);
  auto it = g.regs.find(seq);
  return it == g.regs.end() || it->second->ready || it->second->failed;
}

}  // namespace

Result connectPeers(CollComm& c, const std::vector<WireHandle>& handles, const ListenComm& l, uint64_t key) {
  int n = c.nranks;
  bool anyRemote = false;
  for (int r = 0; r < n; r++) anyRemote = anyRemote || !c.isLocal(r);
  if (!anyRemote) return kSuccess;
  c.channels.resize(static_cast<size_t>(n));
  auto deadline = deadlineAfter(c.config.timeoutSeconds);
  // Lower remote ranks: connect to their listen sockets (the backlog takes us even while they
  // are still busy), and say who we are.
  for (int q = 0; q < c.rank; q++) {
    if (c.isLocal(q)) continue;
    int fd = -1;
    for (;;) {
      bool retry = false;
      fd = connectTo(SOCK_SEQPACKET, socketName("gin", handles[q].processNonce, handles[q].listenId), &retry);
      if (fd >= 0) break;
      if (!retry) return fail(kRemoteError, "connect: rank %d (pid %d) cannot be reached", q, handles[q].pid);
      if (Clock::now() >= deadline) {
        return fail(kSystemError, "connect: rank %d (pid %d) did not take the connection within %.0f s", q,
                    handles[q].pid, c.config.timeoutSeconds);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    c.channels[q].reset(new Channel(fd, q, handles[q].pid));
    ChannelMsg hello = message(c, q, ChannelMsg::Hello);
    hello.a = key;
    hello.b = static_cast<uint64_t>(n);
    hello.c = static_cast<uint64_t>(getpid());
    if (c.channels[q]->send(hello, -1, deadline) != kSuccess) {
      return fail(kRemoteError, "connect: greeting rank %d (pid %d) failed", q, handles[q].pid);
    }
  }
  // Higher remote ranks connect to us.
  int expected = 0;
  for (int q = c.rank + 1; q < n; q++) expected += c.isLocal(q) ? 0 : 1;
  while (expected > 0) {
    bool none = false;
    int fd = acceptFrom(l.fd, &none);
    if (fd < 0 && !none) return fail(kSystemError, "connect: accepting a peer rank failed");
    if (fd < 0) {
      if (!waitFd(l.fd, false, deadline)) {
        int missing = -1;
        for (int q = n - 1; q > c.rank; q--) {
          if (!c.isLocal(q) && !c.channels[q]) missing = q;
        }
        return fail(kSystemError, "connect: rank %d: %d rank(s) of other processes did not connect within %.0f s "
                    "(rank %d, pid %d, missing)",
                    c.rank, expected, c.config.timeoutSeconds, missing, missing >= 0 ? handles[missing].pid : 0);
      }
      continue;
    }
    std::unique_ptr<Channel> owned;
    if (Result r = helloFrom(fd, c.rank, n, key, &owned); r != kSuccess) return r;
    int q = owned->peer();
    if (q <= c.rank || c.isLocal(q) || c.channels[q]) {
      return fail(kRemoteError, "connect: rank %d got an unexpected connection from rank %d", c.rank, q);
    }
    c.channels[q] = std::move(owned);
    expected--;
  }
  c.epollFd = epoll_create1(EPOLL_CLOEXEC);
  if (c.epollFd < 0) return fail(kSystemError, "connect: epoll_create1 failed: %s", strerror(errno));
  for (auto& ch : c.channels) {
    if (!ch) continue;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = ch.get();
    if (epoll_ctl(c.epollFd, EPOLL_CTL_ADD, ch->fd(), &ev) != 0) {
      return fail(kSystemError, "connect: epoll_ctl failed: %s", strerror(errno));
    }
  }
  info("GIN connection rank %d of %d: %zu rank(s) in other processes", c.rank, n,
       static_cast<size_t>(std::count_if(c.channels.begin(), c.channels.end(), [](const auto& p) { return !!p; })));
  return kSuccess;
}

Result announceWindow(CollComm& c, uint64_t seq, const RegEntry& mine, void* data) {
  if (!c.anyRemote()) return kSuccess;
  WindowExport ex;
  if (Result r = exportWindow(data, mine.size, mine.type, mine.device, &ex); r != kSuccess) return r;
  Result result = kSuccess;
  auto deadline = deadlineAfter(c.config.timeoutSeconds);
  for (auto& ch : c.channels) {
    if (!ch) continue;
    ChannelMsg m = message(c, ch->peer(), ChannelMsg::Reg);
    m.a = seq;
    m.b = mine.size;
    m.c = static_cast<uint64_t>(mine.type);
    m.d = ex.offset;
    m.e = ex.allocSize;
    m.f = mine.flags;
    m.hasFd = ex.fd >= 0;
    m.importable = ex.fd >= 0;
    std::lock_guard<std::mutex> lock(ch->mutex);
    Result r = ch->send(m, ex.fd, deadline);  // SCM_RIGHTS duplicates the fd into the message
    if (r != kSuccess) {
      result = ch->dead() ? peerDied(c, *ch)
                          : fail(kSystemError, "regMrSym: could not send window #%llu to rank %d (pid %d) within %.0f s",
                                 static_cast<unsigned long long>(seq), ch->peer(), ch->peerPid(),
                                 c.config.timeoutSeconds);
      break;
    }
  }
  if (ex.fd >= 0) close(ex.fd);
  return result;
}

Result collectWindows(CollComm& c, Registration& reg, bool* all) {
  *all = true;
  if (!c.anyRemote()) return kSuccess;
  Group& g = *c.group;
  for (auto& ch : c.channels) {
    if (!ch) continue;
    int q = ch->peer();
    Channel::Received rec{};
    bool got = false, closed = false;
    {
      std::lock_guard<std::mutex> lock(ch->mutex);
      Result r = ch->pump();
      if (r != kSuccess) return peerDied(c, *ch);
      got = take(*ch, ChannelMsg::Reg, reg.seq, &rec);
      // Signals read here are applied by the next progress()/test().
      if (!ch->received.empty()) c.stashed.store(true, std::memory_order_release);
      closed = !got && ch->closedByPeer();
    }
    bool filled = false;
    {
      std::lock_guard<std::mutex> glock(g.mutex);
      filled = reg.entries[q].arrived;  // by another rank of this process, from its own channel
    }
    if (filled) {
      if (got && rec.fd >= 0) close(rec.fd);
      continue;
    }
    // A peer that closed after its window arrived (filled above) is no failure.
    if (closed) return closedPeer(c, *ch, "regMrSym");
    if (!got) {
      *all = false;
      continue;
    }
    const ChannelMsg& m = rec.msg;
    RegEntry e;
    e.size = m.b;
    e.type = static_cast<int>(m.c);
    e.flags = m.f;
    e.remote = true;
    e.arrived = true;
    if (e.type == kPtrCuda) {
      e.device = c.device.load();
      if (e.device < 0) {
        // No device window of our own yet: map it for the GPU this thread works on.
        int dev = -1;
        if (Result r = currentDevice(&dev); r != kSuccess) {
          if (rec.fd >= 0) close(rec.fd);
          return r;
        }
        e.device = dev;
      }
    }
    if (m.hasFd && rec.fd >= 0) {
      Result r = ImportedWindow::import(rec.fd, e.type, m.d, m.e, e.size, e.device, &e.imported);
      rec.fd = -1;
      if (r != kSuccess) {
        return fail(r, "regMrSym: window #%llu of rank %d (pid %d) could not be mapped here",
                    static_cast<unsigned long long>(reg.seq), q, ch->peerPid());
      }
      e.base = e.imported->base();
    } else if (rec.fd >= 0) {
      close(rec.fd);
    }
    std::lock_guard<std::mutex> glock(g.mutex);
    if (!reg.entries[q].arrived) {  // another local rank may have filled it meanwhile
      reg.entries[q] = e;
      reg.arrived++;
    }
  }
  return kSuccess;
}

Result sendSignal(CollComm& c, Lane& lane, Request* req, uint64_t regSeq, uint64_t offset, uint64_t delta,
                  bool early) {
  if (Result r = peerFailure(c); r != kSuccess) return r;
  Channel* ch = c.channels[lane.peer].get();
  if (ch == nullptr) return fail(kInternalError, "no channel to rank %d", lane.peer);
  OutSignal o{};
  // Everything issued on the lane so far (the data of this op and of every earlier op) must
  // complete before the message may leave.
  o.fence = early ? nullptr : lane.timeline.get();
  o.ticket = o.fence != nullptr ? o.fence->issued : 0;
  o.regSeq = regSeq;
  o.offset = offset;
  o.delta = delta;
  o.seq = ++lane.sigQueued;
  lane.outbox.push_back(o);
  req->parts.push_back(Part{nullptr, o.seq, nullptr, &lane});
  return pumpOutbox(c, lane);
}

Result pumpOutbox(CollComm& c, Lane& lane) {
  if (lane.outbox.empty()) return kSuccess;
  if (Result r = peerFailure(c); r != kSuccess) return r;
  Channel& ch = *c.channels[lane.peer];
  std::lock_guard<std::mutex> lock(ch.mutex);
  while (!lane.outbox.empty()) {
    const OutSignal& o = lane.outbox.front();
    if (o.fence != nullptr && o.ticket > 0) {
      uint64_t done = 0;
      if (o.fence->completedHint.load(std::memory_order_acquire) < o.ticket) {
        if (Result r = o.fence->mover->poll(*o.fence, &done); r != kSuccess) return r;
        if (done < o.ticket) return kSuccess;  // its data is still moving
      }
    }
    ChannelMsg m = message(c, lane.peer, ChannelMsg::Signal);
    m.a = static_cast<uint64_t>(lane.context);
    m.b = o.seq;
    m.c = o.regSeq;
    m.d = o.offset;
    m.e = o.delta;
    bool sent = false;
    if (ch.trySend(m, -1, &sent) != kSuccess) {
      if (!ch.closedByPeer() || ch.dead()) return peerDied(c, ch);
      // The peer closed on purpose: these signals can never be delivered. They fail once, here
      // and in the tests of their ops, and the lane is emptied, so other lanes and peers go on.
      lane.sigLost = lane.sigQueued;
      lane.outbox.clear();
      return closedPeer(c, ch, "signal");
    }
    if (!sent) return kSuccess;  // the socket is full: the owner is behind; try again later
    lane.outbox.pop_front();
    lane.sigSent++;
  }
  return kSuccess;
}

Result peerFailure(CollComm& c) { return c.peerError; }

Result progressPeers(CollComm& c) {
  if (!c.anyRemote()) return kSuccess;
  if (c.peerError != kSuccess) return c.peerError;
  // A lane that fails (its peer closed) fails alone: the others are pumped and drained still.
  Result first = kSuccess;
  for (Lane& lane : c.lanes) {
    Result r = pumpOutbox(c, lane);
    if (c.peerError != kSuccess) return c.peerError;
    if (first == kSuccess) first = r;
  }
  // Which channels have something: epoll, or all of them when regMrSym read some for us.
  Channel* ready[64];
  int nready = 0;
  bool all = c.stashed.exchange(false, std::memory_order_acq_rel);
  if (!all) {
    epoll_event evs[64];
    int k = epoll_wait(c.epollFd, evs, 64, 0);
    for (int i = 0; i < k; i++) ready[nready++] = static_cast<Channel*>(evs[i].data.ptr);
    if (k == 64) all = true;  // more than we could take in one call: look at every channel
  }
  auto drain = [&](Channel& ch) -> Result {
    // A peer that said goodbye stays readable (EOF) forever: stop watching it.
    struct Unwatch {
      CollComm& c;
      Channel& ch;
      ~Unwatch() {
        if (ch.closedByPeer() && !ch.dead()) epoll_ctl(c.epollFd, EPOLL_CTL_DEL, ch.fd(), nullptr);
      }
    } unwatch{c, ch};
    std::deque<Channel::Received> signals;
    {
      std::lock_guard<std::mutex> lock(ch.mutex);
      Result r = ch.pump();
      for (auto it = ch.received.begin(); it != ch.received.end();) {
        if (it->msg.type == ChannelMsg::Signal) {
          if (it->fd >= 0) close(it->fd);  // a signal carries none
          signals.push_back({it->msg, -1, it->waitingSince});
          it = ch.received.erase(it);
        } else if (it->msg.type == ChannelMsg::Reg && windowKnown(c, it->msg.a, ch.peer())) {
          // Another rank of this process imported it from its own channel: drop our copy.
          if (it->fd >= 0) close(it->fd);
          it = ch.received.erase(it);
        } else {
          ++it;  // a window announcement, for regMrSym
        }
      }
      if (r != kSuccess && signals.empty()) return peerDied(c, ch);
      if (r != kSuccess) c.stashed.store(true);  // apply what arrived first, then report
      if (ch.closedByPeer() && ch.dead()) return peerDied(c, ch);
    }
    // In order per context. A signal whose window (or context) this rank has not registered yet
    // waits, with every later one of its context, for the next progress: its sender may finish
    // regMrSym (or createContext) before this rank does, and a NIC would have written it all the
    // same. Other contexts' signals go on: GIN orders signals per context only. A signal that fails
    // (its window deregistered here) is reported and the later ones are still applied, so one bad
    // message does not end the channel's signals.
    Result first = kSuccess;
    const int from = ch.peer();
    std::vector<uint64_t> blocked;  // contexts with a signal waiting
    std::deque<Channel::Received> waiting;
    const auto now = Clock::now();
    for (Channel::Received& s : signals) {
      const ChannelMsg& m = s.msg;
      // v11 has its one context from connect: a higher one can never come.
      if (m.from != static_cast<uint32_t>(from) || m.to != static_cast<uint32_t>(c.rank) ||
          (c.v11 && m.a >= static_cast<uint64_t>(c.nContexts))) {
        return fail(kRemoteError, "a malformed signal message came from rank %d (from %u to %u, context %llu of %d)",
                    from, m.from, m.to, static_cast<unsigned long long>(m.a), c.nContexts);
      }
      bool behind = std::find(blocked.begin(), blocked.end(), m.a) != blocked.end();
      if (behind || m.a >= static_cast<uint64_t>(c.nContexts) || !signalWindowKnown(c, m.c)) {
        if (!behind) blocked.push_back(m.a);
        if (s.waitingSince == Clock::time_point{}) s.waitingSince = now;
        if (now - s.waitingSince > std::chrono::duration<double>(c.config.timeoutSeconds)) {
          return fail(kRemoteError,
                      "a signal from rank %d names window #%llu on context %llu, which rank %d did not register "
                      "within %.0f s",
                      from, static_cast<unsigned long long>(m.c), static_cast<unsigned long long>(m.a), c.rank,
                      c.config.timeoutSeconds);
        }
        waiting.push_back(s);
        continue;
      }
      uint64_t& last = c.inSeq[m.a * static_cast<uint64_t>(c.nranks) + static_cast<uint64_t>(from)];
      if (m.b != last + 1) {
        return fail(kInternalError, "signal message %llu from rank %d on context %llu arrived after %llu (lost or "
                    "reordered)",
                    static_cast<unsigned long long>(m.b), from, static_cast<unsigned long long>(m.a),
                    static_cast<unsigned long long>(last));
      }
      last = m.b;
      Result r = applySignal(c, static_cast<int>(m.a), from, m.c, m.d, m.e);
      if (first == kSuccess) first = r;
    }
    if (waiting.empty()) return first;
    std::lock_guard<std::mutex> lock(ch.mutex);
    ch.received.insert(ch.received.begin(), waiting.begin(), waiting.end());
    c.stashed.store(true, std::memory_order_release);
    return first;
  };
  if (all) {
    for (auto& ch : c.channels) {
      if (!ch) continue;
      if (Result r = drain(*ch); r != kSuccess) return r;
    }
  } else {
    for (int i = 0; i < nready; i++) {
      if (Result r = drain(*ready[i]); r != kSuccess) return r;
    }
  }
  return first;
}

Result closePeers(CollComm& c) {
  if (!c.anyRemote()) return kSuccess;
  Result result = kSuccess;
  // Signals still queued go out first (their data has been drained): the peer may be waiting
  // for them.
  auto deadline = deadlineAfter(c.config.timeoutSeconds);
  for (Lane& lane : c.lanes) {
    while (!lane.outbox.empty() && c.peerError == kSuccess) {
      if (Result r = pumpOutbox(c, lane); r != kSuccess) {
        result = r;
        break;
      }
      if (lane.outbox.empty()) break;
      if (Clock::now() >= deadline) {
        result = fail(kSystemError, "closeColl: %zu signal(s) to rank %d could not be sent within %.0f s",
                      lane.outbox.size(), lane.peer, c.config.timeoutSeconds);
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  for (auto& ch : c.channels) {
    if (!ch) continue;
    std::lock_guard<std::mutex> lock(ch->mutex);
    ch->sayBye();
  }
  if (c.epollFd >= 0) close(c.epollFd);
  c.epollFd = -1;
  c.channels.clear();
  return result;
}

}  // namespace gbl
