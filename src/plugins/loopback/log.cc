#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace gbl {
namespace {

std::atomic<DebugLogger> gLogger{nullptr};
// Per thread: the warning of this thread's last failing call (ranks run on their own threads).
thread_local std::string tLast;

void emit(int level, const char* fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (level == kLogWarn) tLast = msg;
  DebugLogger logger = gLogger.load(std::memory_order_acquire);
  if (logger != nullptr) {
    logger(level, kLogSubsysNet, __FILE__, __LINE__, "ginbench-loopback: %s", msg);
  } else if (level == kLogWarn) {
    // Before init there is no NCCL logger; a failure must still be seen.
    fprintf(stderr, "ginbench-loopback: %s\n", msg);
  }
}

}  // namespace

void setLogger(DebugLogger logger) {
  if (logger != nullptr) gLogger.store(logger, std::memory_order_release);
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
