// The net's data path (ncclNet_v11 listen / connect / accept / regMr / isend / irecv / test /
// close*): host memory between processes of one host over Unix stream sockets. NCCL uses it
// for its own traffic between virtual nodes (P2P and SHM refuse peers with another host hash);
// in one process it is unused but works all the same.
//
// Semantics (those of NCCL's net plugins): one receive buffer per irecv (maxRecvs = 1); a
// connection carries messages in order, each a header (tag, size) and its bytes; a message
// longer than the posted receive is an error; test() reports the received size; isend/irecv
// answer with a NULL request when NCCL_NET_MAX_REQUESTS are already in flight on the
// connection (NCCL retries); all progress is made inside test(), which never blocks.
#pragma once

#include <cstddef>

#include "abi_common.h"

namespace gbl {
namespace net {

Result listen(int dev, void* handle, void** listenComm);
// Returns with *sendComm NULL (and success) while the listener cannot take the connection yet.
Result connect(int dev, void* handle, void** sendComm);
// Returns with *recvComm NULL (and success) while no connection is waiting.
Result accept(void* listenComm, void** recvComm);
Result regMr(void* comm, void* data, size_t size, int type, void** mhandle);
Result deregMr(void* comm, void* mhandle);
Result isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
Result irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
Result iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
Result test(void* request, int* done, int* sizes);
Result closeSend(void* sendComm);
Result closeRecv(void* recvComm);
Result closeListen(void* listenComm);

}  // namespace net
}  // namespace gbl
