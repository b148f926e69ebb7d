// The plugin's name and version as a symbol, so ginbench (or anyone with dlsym) can report which
// build NCCL loaded.
#include "version.h"

extern "C" __attribute__((visibility("default"))) const char ginbenchLoopbackVersion[] =
    GINBENCH_LOOPBACK_NAME " " GINBENCH_LOOPBACK_VERSION " (NCCL net v11 + GIN v11 proxy, RMA v14)";
