// One-line diagnostics prefixed "ginbench-loopback:", through the logger NCCL hands to init()
// (so NCCL_DEBUG / NCCL_DEBUG_FILE apply), or on stderr before any init; nothing once the
// process has begun to exit.
#pragma once

#include "abi_common.h"

namespace gbl {

void setLogger(DebugLogger logger);
// printf-style; warn() for failures (NCCL prints them at NCCL_DEBUG=WARN), info() for setup.
void warn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void info(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// The one-liner every failing entry point ends with: logs "ginbench-loopback: <what>" and
// returns `code`, so `return fail(kInvalidArgument, "...")` answers a bad call.
Result fail(Result code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// The last warning logged on the calling thread, for the contract tests (which check that bad
// calls say why).
const char* lastWarning();

}  // namespace gbl
