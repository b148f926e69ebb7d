// What the contract test's files share: the CHECK macros (a failed check prints where and why
// and counts), and the environment helpers.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "../log.h"

extern std::atomic<int> gFailures;
extern std::mutex gPrintMutex;


#define CHECK(cond, ...)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::lock_guard<std::mutex> lock_(gPrintMutex);                       \
      fprintf(stderr, "  check failed at %s:%d: %s\n    ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                         \
      fprintf(stderr, "\n");                                                \
      gFailures++;                                                          \
    }                                                                       \
  } while (0)

#define CHECK_OK(expr) CHECK((expr) == kSuccess, "%s", #expr)

// An error code, and a log line saying why that names the call.
#define CHECK_ERR(expr, needle)                                                          \
  do {                                                                                   \
    Result r_ = (expr);                                                                  \
    CHECK(r_ != kSuccess, "%s succeeded; expected an error", #expr);                     \
    CHECK(strstr(lastWarning(), needle) != nullptr, "%s: warning \"%s\" lacks \"%s\"", #expr, lastWarning(), needle); \
  } while (0)

void setEnv(const char* name, const char* value);
// Sets the plugin's environment and re-reads it (init does), as a new NCCL communicator would.
void configure(const char* chaos, const char* brk, const char* timeout = "20");
