// The plugin's environment, read at every init() (so a test process can switch modes between
// communicators) and snapshotted by each GIN/RMA communicator at connect().
//   GINBENCH_LOOPBACK_CHAOS=<seed>          ordering fuzz within GIN's guarantees (chaos.h)
//   GINBENCH_LOOPBACK_BREAK=signal-early    test-only: a signal becomes visible before its put
//   GINBENCH_LOOPBACK_TIMEOUT=<seconds>     bound on every wait (collective registration,
//                                           draining at close, device read-backs); default 300,
//                                           at most 1e6
//   GINBENCH_LOOPBACK_LOCAL_COPY=auto|host|direct
//                                           how a GPU copies into its own memory (puts to self):
//                                           CUDA runs a same-device copy on the SMs, which a GIN
//                                           kernel holding every SM starves (measured on H200), so
//                                           auto has another GPU of the group do it with its copy
//                                           engine, or with one GPU bounces it through pinned host
//                                           memory; host always bounces; direct = cuMemcpyAsync on
//                                           the GPU itself, fastest but can deadlock
//   GINBENCH_LOOPBACK_SIGNAL_READBACK=auto|never
//                                           auto: before writing a signal word nothing is pending
//                                           on, read it back from the device (exact even when the
//                                           program resets signals; ~40 us per such op on H200);
//                                           never: trust the plugin's shadow after a first read,
//                                           right for programs that never call resetSignal
//   GINBENCH_LOOPBACK_STATS=1               data-path counters per connection at close (calls and
//                                           their cost, how long ops took to complete, each CUDA
//                                           call of the data path), and every 3 s one line of each
//                                           connection's state (copies, signals sent and applied)
#pragma once

#include <cstdint>

#include "abi_common.h"

namespace gbl {

enum class LocalCopy { Auto, Host, Direct };

constexpr double kMaxTimeoutSeconds = 1e6;

struct Config {
  LocalCopy localCopy = LocalCopy::Auto;
  bool signalReadback = true;
  bool chaos = false;
  uint64_t chaosSeed = 0;
  bool breakSignalEarly = false;
  // How long the negative control holds a signalled put's data (GINBENCH_LOOPBACK_BREAK=signal-early[:ms]).
  uint32_t breakDelayMs = 20;
  double timeoutSeconds = 300.0;
};

// Parses the environment into *out. A malformed value is an error naming the variable; *out is
// then left as it was.
Result readConfig(Config* out);

// The configuration of the last successful init() (defaults before any).
Config currentConfig();
void setCurrentConfig(const Config& config);

}  // namespace gbl
