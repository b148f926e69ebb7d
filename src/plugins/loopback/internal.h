// Helpers shared between registry.cc and engine.cc (not part of any exported interface).
#pragma once

#include "objects.h"

namespace gbl {

// Appends `n` contexts to the connection; returns the number of the first.
int addContexts(CollComm& c, int n);
// Drops one rank's handle on a registration (freeing it when no rank holds it any more).
void releaseHandle(CollComm& c, MemHandle* h);
// Takes the rank out of its Group; the last one out drains (bounded) and frees the Group.
Result leaveGroup(CollComm& c);
// Under c.mutex: issues every held piece of the connection and waits (bounded) for its copies
// and for the signal writes queued into this rank's own words, so that what it put or got, and
// what was signalled to it, has landed before a window may go away (deregistration, close).
Result settleLanes(CollComm& c, const char* what);
// Applies a signal that arrived as a message from rank `sender` (another process) to this
// rank's window `regSeq` at `offset`: the same shadow + write path as a local signal.
Result applySignal(CollComm& c, int context, int sender, uint64_t regSeq, uint64_t offset, uint64_t delta);
// Waits (bounded) until `t` has completed what was issued on it when called. `shared`: the
// mutex of a timeline other ranks issue on too (a signal domain's), held around each look.
Result drainTimeline(Timeline& t, double timeoutSeconds, const char* what, std::mutex* shared = nullptr);

}  // namespace gbl
