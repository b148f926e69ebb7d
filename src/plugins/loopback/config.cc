#include "config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "log.h"

namespace gbl {
namespace {

std::mutex gMutex;
Config gConfig;

}  // namespace

Result readConfig(Config* out) {
  Config c;
  if (const char* v = getenv("GINBENCH_LOOPBACK_CHAOS"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    errno = 0;
    unsigned long long seed = strtoull(v, &end, 0);
    if (errno != 0 || end == v || *end != '\0' || v[0] == '-') {
      return fail(kInvalidArgument, "GINBENCH_LOOPBACK_CHAOS=%s is not a seed (an unsigned integer)", v);
    }
    c.chaos = true;
    c.chaosSeed = seed;
  }
  if (const char* v = getenv("GINBENCH_LOOPBACK_BREAK"); v != nullptr && *v != '\0') {
    // signal-early, or signal-early:<ms> to hold the data longer than a slow run takes between
    // a signal and the read of its data (e.g. ranks taking turns on a shared GPU).
    const char* mode = "signal-early";
    const size_t len = strlen(mode);
    bool ok = strncmp(v, mode, len) == 0 && (v[len] == '\0' || v[len] == ':');
    if (ok && v[len] == ':') {
      char* end = nullptr;
      errno = 0;
      unsigned long ms = strtoul(v + len + 1, &end, 10);
      ok = errno == 0 && end != v + len + 1 && *end == '\0' && v[len + 1] != '-' && ms >= 1 && ms <= 60000;
      c.breakDelayMs = static_cast<uint32_t>(ms);
    }
    if (!ok) {
      return fail(kInvalidArgument, "GINBENCH_LOOPBACK_BREAK=%s: the only mode is signal-early[:<ms, 1-60000>]", v);
    }
    c.breakSignalEarly = true;
  }
  if (const char* v = getenv("GINBENCH_LOOPBACK_TIMEOUT"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    double s = strtod(v, &end);
    // Bounded so that every deadline (now + timeout, in nanoseconds) stays representable.
    if (end == v || *end != '\0' || !std::isfinite(s) || s <= 0 || s > kMaxTimeoutSeconds) {
      return fail(kInvalidArgument, "GINBENCH_LOOPBACK_TIMEOUT=%s is not a number of seconds in (0, %.0f]", v,
                  kMaxTimeoutSeconds);
    }
    c.timeoutSeconds = s;
  }
  if (const char* v = getenv("GINBENCH_LOOPBACK_LOCAL_COPY"); v != nullptr && *v != '\0') {
    if (strcmp(v, "auto") == 0) {
      c.localCopy = LocalCopy::Auto;
    } else if (strcmp(v, "host") == 0) {
      c.localCopy = LocalCopy::Host;
    } else if (strcmp(v, "direct") == 0) {
      c.localCopy = LocalCopy::Direct;
    } else {
      return fail(kInvalidArgument, "GINBENCH_LOOPBACK_LOCAL_COPY=%s: use auto, host or direct", v);
    }
  }
  if (const char* v = getenv("GINBENCH_LOOPBACK_SIGNAL_READBACK"); v != nullptr && *v != '\0') {
    if (strcmp(v, "auto") == 0) {
      c.signalReadback = true;
    } else if (strcmp(v, "never") == 0) {
      c.signalReadback = false;
    } else {
      return fail(kInvalidArgument, "GINBENCH_LOOPBACK_SIGNAL_READBACK=%s: use auto or never", v);
    }
  }
  *out = c;
  return kSuccess;
}

Config currentConfig() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gConfig;
}

void setCurrentConfig(const Config& config) {
  std::lock_guard<std::mutex> lock(gMutex);
  gConfig = config;
}

}  // namespace gbl
