#include "net_socket.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_set>

#include "channel.h"
#include "config.h"
#include "log.h"
#include "objects.h"

namespace gbl {
namespace net {
namespace {

constexpr char kNetMagic[8] = "GBLNET1";
constexpr uint32_t kFrameMagic = 0x67626c6e;  // "gbln"

struct NetHandle {  // what listen() writes into NCCL's handle
  char magic[8];
  uint64_t nonce;  // listening process
  uint64_t id;     // listen number in that process
  int32_t pid;
};
static_assert(sizeof(NetHandle) <= kNetHandleMaxSize, "net handle must fit NCCL_NET_HANDLE_MAXSIZE");

struct Hello {  // first bytes a connecting side writes: which listen it meant
  uint32_t magic;
  int32_t pid;
  uint64_t id;
};

struct Frame {  // one message's header on the stream
  uint32_t magic;
  int32_t tag;
  uint64_t size;
};

std::atomic<uint64_t> gNextId{1};

struct Listener {
  int fd = -1;
  uint64_t id = 0;
};

struct Comm;

struct Request {
  Comm* comm = nullptr;
  bool send = false;
  char* data = nullptr;
  size_t size = 0;  // send: bytes to send; receive: bytes posted
  int tag = 0;
  Frame frame{};     // sent, or being received
  size_t frameDone = 0;
  size_t dataDone = 0;
  size_t received = 0;  // receive: the message's size once its frame is in
  bool done = false;
};

struct Comm {
  int fd = -1;
  bool send = false;
  int peerPid = 0;
  std::mutex mutex;
  std::deque<Request*> queue;            // in stream order, not yet complete
  std::unordered_set<Request*> requests;  // every live request (complete ones until tested)
  std::unordered_set<void*> mrs;
  Result error = kSuccess;  // sticky: the connection is unusable after it
  std::string why;
};

const char* side(const Comm& c) { return c.send ? "send" : "receive"; }

// A connection on `fd` (connected, greeted), tracked as live.
Comm* newComm(int fd, bool send, int peerPid) {
  Comm* c = new Comm;
  c->fd = fd;
  c->send = send;
  c->peerPid = peerPid;
  track(c, Kind::NetComm);
  return c;
}

Comm* liveComm(void* p, const char* what) {
  if (!isLive(p, Kind::NetComm)) {
    fail(kInvalidArgument, "net %s: %p is not an open net connection", what, p);
    return nullptr;
  }
  return static_cast<Comm*>(p);
}

// Records the first failure of a connection; every later call on it answers with it.
Result broken(Comm& c, Result code, const std::string& why) {
  if (c.error == kSuccess) {
    c.error = code;
    c.why = why;
  }
  return fail(c.error, "net %s connection to pid %d: %s", side(c), c.peerPid, c.why.c_str());
}

// Moves bytes for the requests at the head of the queue as far as the socket allows now.
Result progress(Comm& c) {
  if (c.error != kSuccess) return fail(c.error, "net %s connection to pid %d: %s", side(c), c.peerPid, c.why.c_str());
  while (!c.queue.empty()) {
    Request& r = *c.queue.front();
    if (r.send) {
      iovec iov[2];
      int n = 0;
      if (r.frameDone < sizeof r.frame) {
        iov[n++] = {reinterpret_cast<char*>(&r.frame) + r.frameDone, sizeof r.frame - r.frameDone};
      }
      if (r.dataDone < r.size) iov[n++] = {r.data + r.dataDone, r.size - r.dataDone};
      if (n > 0) {
        msghdr h{};
        h.msg_iov = iov;
        h.msg_iovlen = n;
        ssize_t k = sendmsg(c.fd, &h, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k < 0) {
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return kSuccess;
          return broken(c, kRemoteError, std::string("sending failed: ") + strerror(errno) + " (peer process died?)");
        }
        size_t got = static_cast<size_t>(k);
        size_t f = std::min(got, sizeof r.frame - r.frameDone);
        r.frameDone += f;
        r.dataDone += got - f;
        if (r.frameDone < sizeof r.frame || r.dataDone < r.size) return kSuccess;  // socket full
      }
    } else {
      if (r.frameDone < sizeof r.frame) {
        ssize_t k = recv(c.fd, reinterpret_cast<char*>(&r.frame) + r.frameDone, sizeof r.frame - r.frameDone,
                         MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return kSuccess;
        if (k < 0) return broken(c, kRemoteError, std::string("receiving failed: ") + strerror(errno));
        if (k == 0) return broken(c, kRemoteError, "the peer closed the connection (process died?)");
        r.frameDone += static_cast<size_t>(k);
        if (r.frameDone < sizeof r.frame) return kSuccess;
        if (r.frame.magic != kFrameMagic) return broken(c, kInternalError, "the byte stream lost its framing");
        if (r.frame.size > r.size) {
          char buf[160];
          snprintf(buf, sizeof buf, "a message of %llu bytes arrived for a receive of %zu bytes (tag %d)",
                   static_cast<unsigned long long>(r.frame.size), r.size, r.tag);
          return broken(c, kInvalidUsage, buf);
        }
        if (r.frame.tag != r.tag) {
          char buf[120];
          snprintf(buf, sizeof buf, "a message with tag %d arrived for a receive with tag %d", r.frame.tag, r.tag);
          return broken(c, kInvalidUsage, buf);
        }
        r.received = r.frame.size;
      }
      while (r.dataDone < r.received) {
        ssize_t k = recv(c.fd, r.data + r.dataDone, r.received - r.dataDone, MSG_DONTWAIT);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return kSuccess;
        if (k < 0) return broken(c, kRemoteError, std::string("receiving failed: ") + strerror(errno));
        if (k == 0) return broken(c, kRemoteError, "the peer closed the connection mid-message (process died?)");
        r.dataDone += static_cast<size_t>(k);
      }
    }
    r.done = true;
    c.queue.pop_front();
  }
  return kSuccess;
}

Request* newRequest(Comm& c, bool send, void* data, size_t size, int tag) {
  Request* r = new Request;
  r->comm = &c;
  r->send = send;
  r->data = static_cast<char*>(data);
  r->size = size;
  r->tag = tag;
  if (send) r->frame = Frame{kFrameMagic, tag, size};
  c.queue.push_back(r);
  c.requests.insert(r);
  track(r, Kind::NetRequest);
  return r;
}

Result checkMr(Comm& c, void* mhandle, const char* what) {
  // NCCL passes the handle regMr returned; NULL is tolerated (host memory needs nothing).
  if (mhandle != nullptr && c.mrs.find(mhandle) == c.mrs.end()) {
    return fail(kInvalidArgument, "net %s: %p is not a memory handle registered on this connection", what, mhandle);
  }
  return kSuccess;
}

Result closeComm(void* p, bool send) {
  Comm* c = liveComm(p, send ? "closeSend" : "closeRecv");
  if (c == nullptr) return kInvalidArgument;
  if (c->send != send) {
    return fail(kInvalidArgument, "net %s: %p is a %s connection", send ? "closeSend" : "closeRecv", p, side(*c));
  }
  untrack(c);
  {
    std::lock_guard<std::mutex> lock(c->mutex);
    for (Request* r : c->requests) {
      untrack(r);
      delete r;
    }
    for (void* mr : c->mrs) {
      untrack(mr);
      delete static_cast<char*>(mr);
    }
    if (c->fd >= 0) close(c->fd);
  }
  delete c;
  return kSuccess;
}

}  // namespace

Result listen(int dev, void* handle, void** listenComm) {
  if (handle == nullptr || listenComm == nullptr) return fail(kInvalidArgument, "net listen: NULL handle or listenComm");
  *listenComm = nullptr;
  if (dev != 0) return fail(kInvalidArgument, "net listen: device %d does not exist (the plugin has one)", dev);
  Listener* l = new Listener;
  l->id = gNextId.fetch_add(1);
  l->fd = listenOn(SOCK_STREAM, socketName("net", processNonce(), l->id));
  if (l->fd < 0) {
    delete l;
    return fail(kSystemError, "net listen: no socket");
  }
  NetHandle h{};
  memcpy(h.magic, kNetMagic, sizeof kNetMagic);
  h.nonce = processNonce();
  h.id = l->id;
  h.pid = static_cast<int32_t>(getpid());
  memset(handle, 0, kNetHandleMaxSize);
  memcpy(handle, &h, sizeof h);
  track(l, Kind::NetListen);
  *listenComm = l;
  return kSuccess;
}

Result connect(int dev, void* handle, void** sendComm) {
  if (handle == nullptr || sendComm == nullptr) return fail(kInvalidArgument, "net connect: NULL handle or sendComm");
  *sendComm = nullptr;
  if (dev != 0) return fail(kInvalidArgument, "net connect: device %d does not exist (the plugin has one)", dev);
  NetHandle h;
  memcpy(&h, handle, sizeof h);
  if (memcmp(h.magic, kNetMagic, sizeof kNetMagic) != 0) {
    return fail(kInvalidArgument, "net connect: the handle was not made by ginbench-loopback's net listen");
  }
  bool retry = false;
  int fd = connectTo(SOCK_STREAM, socketName("net", h.nonce, h.id), &retry);
  if (fd < 0) {
    if (retry) return kSuccess;  // NCCL calls again
    return fail(kRemoteError, "net connect: pid %d's listener cannot be reached", h.pid);
  }
  // A fresh socket's buffer is empty: these few bytes always fit.
  Hello hello{kFrameMagic, static_cast<int32_t>(getpid()), h.id};
  if (::send(fd, &hello, sizeof hello, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof hello)) {
    int err = errno;
    close(fd);
    return fail(kRemoteError, "net connect: greeting pid %d failed: %s", h.pid, strerror(err));
  }
  *sendComm = newComm(fd, /*send=*/true, h.pid);
  return kSuccess;
}

Result accept(void* listenComm, void** recvComm) {
  if (recvComm == nullptr) return fail(kInvalidArgument, "net accept: NULL recvComm");
  *recvComm = nullptr;
  if (!isLive(listenComm, Kind::NetListen)) {
    return fail(kInvalidArgument, "net accept: %p is not an open net listen comm", listenComm);
  }
  Listener* l = static_cast<Listener*>(listenComm);
  bool none = false;
  int fd = acceptFrom(l->fd, &none);
  if (fd < 0) return none ? kSuccess : fail(kSystemError, "net accept failed");
  // The connecting side wrote its greeting right after connect: wait for it, bounded.
  Hello hello{};
  size_t got = 0;
  auto deadline = deadlineAfter(currentConfig().timeoutSeconds);
  while (got < sizeof hello) {
    ssize_t k = recv(fd, reinterpret_cast<char*>(&hello) + got, sizeof hello - got, MSG_DONTWAIT);
    if (k > 0) {
      got += static_cast<size_t>(k);
      continue;
    }
    if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    if (!waitFd(fd, false, deadline)) break;
  }
  if (got < sizeof hello || hello.magic != kFrameMagic || hello.id != l->id) {
    close(fd);
    return fail(kRemoteError, "net accept: a connection did not introduce itself (got %zu bytes)", got);
  }
  *recvComm = newComm(fd, /*send=*/false, hello.pid);
  return kSuccess;
}

Result regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  Comm* c = liveComm(comm, "regMr");
  if (c == nullptr) return kInvalidArgument;
  if (mhandle == nullptr) return fail(kInvalidArgument, "net regMr: NULL mhandle");
  *mhandle = nullptr;
  if (type != kPtrHost) {
    return fail(kInvalidArgument, "net regMr: memory type %d; the net moves host memory only (NCCL_PTR_HOST)", type);
  }
  if (data == nullptr && size > 0) return fail(kInvalidArgument, "net regMr: NULL address");
  char* mr = new char(0);  // a token: host memory needs no registration
  std::lock_guard<std::mutex> lock(c->mutex);
  c->mrs.insert(mr);
  track(mr, Kind::NetMr);
  *mhandle = mr;
  return kSuccess;
}

Result deregMr(void* comm, void* mhandle) {
  Comm* c = liveComm(comm, "deregMr");
  if (c == nullptr) return kInvalidArgument;
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->mrs.erase(mhandle) == 0) {
    return fail(kInvalidArgument, "net deregMr: %p is not a memory handle of this connection", mhandle);
  }
  untrack(mhandle);
  delete static_cast<char*>(mhandle);
  return kSuccess;
}

Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) {
  Comm* c = liveComm(sendComm, "isend");
  if (c == nullptr) return kInvalidArgument;
  if (request == nullptr) return fail(kInvalidArgument, "net isend: NULL request pointer");
  *request = nullptr;
  if (!c->send) return fail(kInvalidArgument, "net isend: %p is a receive connection", sendComm);
  if (data == nullptr && size > 0) return fail(kInvalidArgument, "net isend: NULL data");
  // test() reports sizes as int: the plugin advertises maxP2pBytes = kMaxNetSize.
  if (size > kMaxNetSize) {
    return fail(kInvalidArgument, "net isend: %zu bytes, more than maxP2pBytes %zu", size, kMaxNetSize);
  }
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->error != kSuccess) return fail(c->error, "net isend to pid %d: %s", c->peerPid, c->why.c_str());
  if (Result r = checkMr(*c, mhandle, "isend"); r != kSuccess) return r;
  if (c->queue.size() >= static_cast<size_t>(kNetMaxRequests)) return kSuccess;  // NULL: NCCL retries
  Request* r = newRequest(*c, true, data, size, tag);
  // Start moving bytes now; test() does the rest. (On failure the request stays with the
  // connection, which frees it at close.)
  if (Result e = progress(*c); e != kSuccess) return e;
  *request = r;
  return kSuccess;
}

Result irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  Comm* c = liveComm(recvComm, "irecv");
  if (c == nullptr) return kInvalidArgument;
  if (request == nullptr) return fail(kInvalidArgument, "net irecv: NULL request pointer");
  *request = nullptr;
  if (c->send) return fail(kInvalidArgument, "net irecv: %p is a send connection", recvComm);
  if (n != 1) return fail(kInvalidArgument, "net irecv: %d buffers; the plugin advertises maxRecvs = 1", n);
  if (data == nullptr || sizes == nullptr || tags == nullptr) {
    return fail(kInvalidArgument, "net irecv: NULL data, sizes or tags");
  }
  if (data[0] == nullptr && sizes[0] > 0) return fail(kInvalidArgument, "net irecv: NULL buffer");
  if (sizes[0] > kMaxNetSize) {
    return fail(kInvalidArgument, "net irecv: %zu bytes, more than maxP2pBytes %zu", sizes[0], kMaxNetSize);
  }
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->error != kSuccess) return fail(c->error, "net irecv from pid %d: %s", c->peerPid, c->why.c_str());
  if (Result r = checkMr(*c, mhandles != nullptr ? mhandles[0] : nullptr, "irecv"); r != kSuccess) return r;
  if (c->queue.size() >= static_cast<size_t>(kNetMaxRequests)) return kSuccess;
  *request = newRequest(*c, false, data[0], sizes[0], tags[0]);
  return kSuccess;
}

Result iflush(void* recvComm, int /*n*/, void** /*data*/, int* /*sizes*/, void** /*mhandles*/, void** request) {
  Comm* c = liveComm(recvComm, "iflush");
  if (c == nullptr) return kInvalidArgument;
  if (request == nullptr) return fail(kInvalidArgument, "net iflush: NULL request pointer");
  if (c->send) return fail(kInvalidArgument, "net iflush: %p is a send connection", recvComm);
  // Host memory written by the CPU: nothing to flush (NULL request = done, as NCCL expects).
  *request = nullptr;
  return kSuccess;
}

Result test(void* request, int* done, int* sizes) {
  if (done == nullptr) return fail(kInvalidArgument, "net test: NULL done pointer");
  *done = 0;
  if (!isLive(request, Kind::NetRequest)) return fail(kInvalidArgument, "net test: %p is not a live net request", request);
  Request* r = static_cast<Request*>(request);
  Comm& c = *r->comm;
  std::lock_guard<std::mutex> lock(c.mutex);
  if (!r->done) {
    if (Result e = progress(c); e != kSuccess) return e;
    if (!r->done) return kSuccess;
  }
  *done = 1;
  if (sizes != nullptr) sizes[0] = static_cast<int>(r->send ? r->size : r->received);
  c.requests.erase(r);
  untrack(r);
  delete r;
  return kSuccess;
}

Result closeSend(void* sendComm) { return closeComm(sendComm, true); }
Result closeRecv(void* recvComm) { return closeComm(recvComm, false); }

Result closeListen(void* listenComm) {
  if (!isLive(listenComm, Kind::NetListen)) {
    return fail(kInvalidArgument, "net closeListen: %p is not an open net listen comm", listenComm);
  }
  untrack(listenComm);
  Listener* l = static_cast<Listener*>(listenComm);
  close(l->fd);
  delete l;
  return kSuccess;
}

}  // namespace net
}  // namespace gbl
