#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <strings.h>
#include <string>

namespace gbl {
namespace {

std::atomic<DebugLogger> gLogger{nullptr};

// NCCL shows a plugin's warnings only under NCCL_DEBUG=WARN or more, and NCCL 2.28.9 drops the
// result of a GIN test() or progress() call: a failure there would leave a kernel waiting with
// nothing said. So without NCCL_DEBUG the first warnings also go to stderr (bounded: a failed
// connection can fail every later call).
bool ncclShowsWarnings() {
  static const bool shows = [] {
    const char* v = getenv("NCCL_DEBUG");
    if (v == nullptr) return false;
    for (const char* level : {"WARN", "INFO", "TRACE", "ABORT"}) {
      if (strcasecmp(v, level) == 0) return true;
    }
    return false;
  }();
  return shows;
}
constexpr int kStderrWarnings = 10;
std::atomic<int> gStderrWarnings{0};
// Per thread: the warning of this thread's last failing call (ranks run on their own threads).
thread_local std::string tLast;
// Set once exit() has begun. NCCL's proxy thread may still call in while CUDA tears down under
// it (a benchmark exiting on its watchdog with communicators live); what fails then is the
// process going away, not news for its user, whose last line should be the reason it exits.
std::atomic<bool> gExiting{false};

void emit(int level, const char* fmt, va_list ap) {
  // First: the exiting thread's tLast may already be destroyed.
  if (gExiting.load(std::memory_order_relaxed)) return;
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (level == kLogWarn) tLast = msg;
  DebugLogger logger = gLogger.load(std::memory_order_acquire);
  if (logger != nullptr) {
    logger(level, kLogSubsysNet, __FILE__, __LINE__, "ginbench-loopback: %s", msg);
    if (level == kLogWarn && !ncclShowsWarnings()) {
      int n = gStderrWarnings.fetch_add(1, std::memory_order_relaxed);
      if (n < kStderrWarnings) fprintf(stderr, "ginbench-loopback: %s\n", msg);
      if (n == kStderrWarnings) fprintf(stderr, "ginbench-loopback: further warnings only with NCCL_DEBUG=WARN\n");
    }
  } else if (level == kLogWarn) {
    // Before init there is no NCCL logger; a failure must still be seen.
    fprintf(stderr, "ginbench-loopback: %s\n", msg);
  }
}

}  // namespace

void setLogger(DebugLogger logger) {
  if (logger != nullptr) gLogger.store(logger, std::memory_order_release);
  // Registered at the first init, after CUDA and NCCL registered theirs, so it runs before they
  // tear down (exit handlers run in reverse order).
  static std::once_flag once;
  std::call_once(once, [] { atexit([] { gExiting.store(true, std::memory_order_relaxed); }); });
}

void warn(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(kLogWarn, fmt, ap);
  va_end(ap);
}

void info(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(kLogInfo, fmt, ap);
  va_end(ap);
}

Result fail(Result code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(kLogWarn, fmt, ap);
  va_end(ap);
  return code;
}

const char* lastWarning() { return tLast.c_str(); }

}  // namespace gbl
