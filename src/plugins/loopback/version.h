#pragma once

#define GINBENCH_LOOPBACK_NAME "ginbench-loopback"
#define GINBENCH_LOOPBACK_VERSION "0.1.0"
