// CUDA streams and events with RAII ownership. A Stream either owns its CUstream (created here)
// or borrows one (e.g. PyTorch's current stream).
#pragma once

#include <memory>

#include "hidet/runtime/export.hpp"

namespace hidet {

class HIDET_CXX_API Stream {
 public:
  static Stream create(int device);                 // owning, non-blocking
  static Stream borrow(void* handle, int device);   // not owning
  Stream() = default;                                // the legacy default stream of device 0

  void* handle() const { return handle_ ? handle_.get() : raw_; }
  int device() const { return device_; }
  void synchronize() const;

 private:
  std::shared_ptr<void> handle_;  // owning
  void* raw_ = nullptr;           // borrowed
  int device_ = 0;
};

class HIDET_CXX_API Event {
 public:
  Event(int device, bool enable_timing);
  void record(const Stream& stream);
  void synchronize() const;
  float elapsed_ms(const Event& end) const;  // from this event to `end`
  void* handle() const { return handle_.get(); }

 private:
  std::shared_ptr<void> handle_;
};

}  // namespace hidet
