// Process-wide state that is never destroyed. NCCL's proxy threads may still call into the
// plugin while exit() runs static destructors (a benchmark whose watchdog fires exits with
// communicators live): state destroyed under them turns their calls into use-after-free, or into
// a pure virtual call through a destroyed mover. A Forever<T> is built like a T during static
// initialisation (or at first use, as a function-local static) and lives until the process ends.
#pragma once

#include <new>
#include <utility>

namespace gbl {

template <class T>
class Forever {
 public:
  template <class... Args>
  explicit Forever(Args&&... args) {
    new (storage_) T(std::forward<Args>(args)...);
  }
  Forever(const Forever&) = delete;
  Forever& operator=(const Forever&) = delete;
  T& operator*() { return *std::launder(reinterpret_cast<T*>(storage_)); }
  T* operator->() { return &**this; }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace gbl
