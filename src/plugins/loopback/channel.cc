#include "channel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "chaos.h"
#include "log.h"

namespace gbl {

uint64_t processNonce() {
  // Recomputed when the pid changes: a forked child must not pass for its parent, whose
  // listen handles it may see in the same group.
  static std::mutex mutex;
  static pid_t owner = -1;
  static uint64_t nonce = 0;
  std::lock_guard<std::mutex> lock(mutex);
  pid_t pid = getpid();
  if (pid != owner) {
    uint64_t v = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      if (read(fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) v = 0;
      close(fd);
    }
    Rng mixer(v ^ static_cast<uint64_t>(Clock::now().time_since_epoch().count()) ^
              (static_cast<uint64_t>(pid) << 32));
    nonce = mixer.next() | 1;  // never 0
    owner = pid;
  }
  return nonce;
}

SocketName socketName(const char* kind, uint64_t nonce, uint64_t id) {
  SocketName n{};
  // bytes[0] stays NUL: the abstract namespace.
  int len = snprintf(n.bytes + 1, sizeof n.bytes - 1, "ginbench-loopback/%s/%016llx/%llu", kind,
                     static_cast<unsigned long long>(nonce), static_cast<unsigned long long>(id));
  n.length = 1 + static_cast<unsigned>(len);
  return n;
}

static socklen_t fillAddress(const SocketName& name, sockaddr_un* addr) {
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  memcpy(addr->sun_path, name.bytes, name.length);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.length);
}

static const char* printable(const SocketName& name) { return name.bytes + 1; }

// A non-blocking socket of `type` and `name`'s address; -1 (logged) on failure.
static int openSocket(int type, const SocketName& name, sockaddr_un* addr, socklen_t* len) {
  int fd = socket(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    fail(kSystemError, "socket(AF_UNIX) failed: %s", strerror(errno));
    return -1;
  }
  *len = fillAddress(name, addr);
  return fd;
}

int listenOn(int type, const SocketName& name) {
  sockaddr_un addr;
  socklen_t len = 0;
  int fd = openSocket(type, name, &addr, &len);
  if (fd < 0) return -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    fail(kSystemError, "cannot listen on @%s: %s", printable(name), strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

int connectTo(int type, const SocketName& name, bool* retry) {
  *retry = false;
  sockaddr_un addr;
  socklen_t len = 0;
  int fd = openSocket(type, name, &addr, &len);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0) return fd;
  int err = errno;
  close(fd);
  // A Unix socket connect never stays in progress: it succeeds, or the backlog is full (EAGAIN).
  if (err == EAGAIN || err == EINTR) {
    *retry = true;
    return -1;
  }
  fail(kRemoteError, "cannot connect to @%s: %s (the listening process is gone?)", printable(name), strerror(err));
  return -1;
}

int acceptFrom(int listenFd, bool* none) {
  *none = false;
  int fd = accept4(listenFd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) return fd;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
    *none = true;
    return -1;
  }
  fail(kSystemError, "accept failed: %s", strerror(errno));
  return -1;
}

bool waitFd(int fd, bool forWrite, Clock::time_point deadline) {
  for (;;) {
    auto now = Clock::now();
    if (now >= deadline) return false;
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    pollfd p{fd, static_cast<short>(forWrite ? POLLOUT : POLLIN), 0};
    // Short slices, so a deadline is honoured even if poll misses a wake-up.
    int r = poll(&p, 1, static_cast<int>(ms < 100 ? ms + 1 : 100));
    if (r > 0) return true;  // ready, or an error/hang-up the next call will report
    if (r < 0 && errno != EINTR) return true;
  }
}

Clock::time_point deadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

Channel::~Channel() {
  dropReceived(received);
  if (fd_ >= 0) close(fd_);
}

Result Channel::markDead(const char* what, int err) {
  if (!dead_) {
    dead_ = true;
    char buf[160];
    snprintf(buf, sizeof buf, "%s%s%s", what, err ? ": " : "", err ? strerror(err) : "");
    why_ = buf;
  }
  return kRemoteError;
}

Result Channel::trySend(const ChannelMsg& m, int fd, bool* sent) {
  *sent = false;
  if (dead_) return kRemoteError;
  if (bye_) return kRemoteError;
  iovec iov{const_cast<ChannelMsg*>(&m), sizeof m};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    memset(control, 0, sizeof control);
    h.msg_control = control;
    h.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  ssize_t n = sendmsg(fd_, &h, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == static_cast<ssize_t>(sizeof m)) {
    *sent = true;
    return kSuccess;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ENOBUFS)) return kSuccess;
  int err = n < 0 ? errno : 0;
  // The peer may have closed on purpose: read what it sent last (a Bye says so) before calling
  // it dead.
  pump();
  if (bye_ || dead_) return kRemoteError;
  return markDead("sending failed", err);
}

Result Channel::send(const ChannelMsg& m, int fd, Clock::time_point deadline) {
  for (;;) {
    bool sent = false;
    if (Result r = trySend(m, fd, &sent); r != kSuccess) return r;
    if (sent) return kSuccess;
    if (!waitFd(fd_, true, deadline)) return kSystemError;  // the caller names the timeout
  }
}

Result Channel::pump() {
  if (dead_) return kRemoteError;
  while (!bye_) {
    Received rec{};
    rec.fd = -1;
    iovec iov{&rec.msg, sizeof rec.msg};
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    h.msg_control = control;
    h.msg_controllen = sizeof control;
    ssize_t n = recvmsg(fd_, &h, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return kSuccess;
    if (n < 0) return markDead("the connection failed", errno);
    // Collect any descriptors first, so none leaks whatever the message turns out to be.
    for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; i++) {
        int got = -1;
        memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (rec.fd < 0) {
          rec.fd = got;
        } else {
          close(got);  // one per message at most; extras are not ours
        }
      }
    }
    if (n == 0) {
      if (rec.fd >= 0) close(rec.fd);
      return markDead("it closed the connection without a goodbye (process died?)", 0);
    }
    if (n != static_cast<ssize_t>(sizeof rec.msg) || rec.msg.magic != kChannelMagic || (h.msg_flags & MSG_TRUNC)) {
      if (rec.fd >= 0) close(rec.fd);
      return markDead("a malformed control message arrived", 0);
    }
    if (rec.msg.type == ChannelMsg::Bye) {
      bye_ = true;
      if (rec.fd >= 0) close(rec.fd);
      return kSuccess;
    }
    received.push_back(rec);
  }
  return kSuccess;
}

Result Channel::pumpWait(Clock::time_point deadline) {
  if (Result r = pump(); r != kSuccess) return r;
  if (!received.empty() || bye_) return kSuccess;
  auto slice = Clock::now() + std::chrono::milliseconds(20);
  waitFd(fd_, false, slice < deadline ? slice : deadline);
  return pump();
}

void Channel::sayBye() {
  if (dead_ || fd_ < 0) return;
  ChannelMsg m{};
  m.magic = kChannelMagic;
  m.type = ChannelMsg::Bye;
  bool sent = false;
  trySend(m, -1, &sent);
  // Nothing more goes out; the peer reads the Bye, then EOF once we close.
  shutdown(fd_, SHUT_WR);
}

void dropReceived(std::deque<Channel::Received>& q) {
  for (auto& r : q) {
    if (r.fd >= 0) close(r.fd);
  }
  q.clear();
}

}  // namespace gbl
