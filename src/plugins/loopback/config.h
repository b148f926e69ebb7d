// The plugin's environment, read at every init() (so a test process can switch modes between
// communicators) and snapshotted by each GIN/RMA communicator at connect().
//   GINBENCH_LOOPBACK_CHAOS=<seed>          ordering fuzz within GIN's guarantees (chaos.h)
//   GINBENCH_LOOPBACK_BREAK=signal-early    test-only: a signal becomes visible before its put
//   GINBENCH_LOOPBACK_TIMEOUT=<seconds>     bound on every wait (collective registration,
//                                           draining at close, device read-backs); default 300
#pragma once

#include <cstdint>

#include "abi_common.h"

namespace gbl {

struct Config {
  bool chaos = false;
  uint64_t chaosSeed = 0;
  bool breakSignalEarly = false;
  double timeoutSeconds = 300.0;
};

// Parses the environment into *out. A malformed value is an error naming the variable; *out is
// then left as it was.
Result readConfig(Config* out);

// The configuration of the last successful init() (defaults before any).
Config currentConfig();
void setCurrentConfig(const Config& config);

}  // namespace gbl
