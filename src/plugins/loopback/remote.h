// Ranks in other processes (virtual nodes on one host): the control channels of a GIN/RMA
// connection, the allgather of windows inside regMrSym, and signals delivered as messages.
//
// Channels. connect() gives rank r one SOCK_SEQPACKET channel to every rank q of another
// process: r connects to q's listen socket (named by q's listen handle) when q < r, and accepts
// from its own when q > r, then a Hello names both ends and the group. Ranks of r's own process
// share the in-process Group instead (the one-process path, unchanged).
//
// Windows. regMrSym announces this rank's window (seq, size, type, offset in its allocation)
// to every remote rank with the allocation's fd attached where it can be shared, and maps
// every remote rank's announced window (window_share.h). Windows that cannot be shared (NCCL's
// signal arrays) are known by size only.
//
// Signals. A signal to a rank of another process cannot be written by this process (its signal
// array is not shareable), so it becomes a message (context, sequence number, window, offset,
// amount) that the owner applies in its progress()/test() with the one-process signal
// machinery (host shadow + cuStreamWriteValue64, no kernel). The message leaves only after
// everything issued before it on its lane (context, peer) has completed, so the signal is never
// visible before its data or an earlier signal; messages of one lane are sent in order on one
// channel and the owner checks their sequence numbers.
//
// Completion. A put + signal to another process is done (test() says so) when its data has
// landed in the peer's memory and the signal message has been written into the channel
// (the kernel's socket buffer): the owner applies it at its next progress() call, so it is not
// yet necessarily visible at that moment. NCCL's GIN needs no more: remote visibility is
// observed through the signal itself, and the source may be reused once the data landed.
//
// Faults. A peer that goes away without closing (EOF, ECONNRESET, EPIPE) fails every pending
// and later operation of the connection with one logged line naming the rank and its pid.
#pragma once

#include <vector>

#include "objects.h"

namespace gbl {

// connect(): the channels from c.rank to the ranks of other processes (none: nothing to do).
Result connectPeers(CollComm& c, const std::vector<WireHandle>& handles, const ListenComm& listen, uint64_t groupKey);

// regMrSym(): tells every remote rank about this rank's window `seq`.
Result announceWindow(CollComm& c, uint64_t seq, const RegEntry& mine, void* data);
// regMrSym(): fills in the entries of remote ranks that have announced `seq` (importing their
// windows); under no lock. *all: every remote entry of `reg` is filled.
Result collectWindows(CollComm& c, Registration& reg, bool* all);

// put(): the signal part of an op to a rank of another process. `early`: the negative control
// (sent at once, before the lane's data).
Result sendSignal(CollComm& c, Lane& lane, Request* req, uint64_t regSeq, uint64_t offset, uint64_t delta,
                  bool early);
// Sends the lane's signals whose data has completed. Under c.mutex.
Result pumpOutbox(CollComm& c, Lane& lane);
// test()/progress(): sends what may be sent, applies signals that arrived. Under c.mutex.
Result progressPeers(CollComm& c);
// The sticky failure once a peer died (logged once), else kSuccess.
Result peerFailure(CollComm& c);
// closeColl(): sends what is left (bounded), says goodbye, closes the channels.
Result closePeers(CollComm& c);

}  // namespace gbl
