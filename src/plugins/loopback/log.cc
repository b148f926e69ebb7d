#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>

namespace gbl {
namespace {

std::atomic<DebugLogger> gLogger{nullptr};
std::mutex gLastMutex;
std::string gLast;

void emit(int level, const char* fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (level == kLogWarn) {
    std::lock_guard<std::mutex> lock(gLastMutex);
    gLast = msg;
  }
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

const char* lastWarning() {
  // Thread-local copy: the caller may read it while another thread warns.
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lock(gLastMutex);
  copy = gLast;
  return copy.c_str();
}

}  // namespace gbl
