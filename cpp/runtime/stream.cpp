// CUDA streams and events with shared ownership of the driver handles.
#include "hidet/runtime/stream.hpp"

#include "hidet/runtime/cuda_driver.hpp"

namespace hidet {

// Deleters run from destructors, possibly at process exit after the driver has shut down: a
// failure to destroy a handle then is not worth more than the handle itself.
static void destroy_stream(void* handle) {
  try {
    cuda::stream_destroy(handle);
  } catch (...) {
  }
}

static void destroy_event(void* handle) {
  try {
    cuda::event_destroy(handle);
  } catch (...) {
  }
}

Stream Stream::create(int device) {
  Stream s;
  s.handle_ = std::shared_ptr<void>(cuda::stream_create(device), destroy_stream);
  s.device_ = device;
  return s;
}

Stream Stream::borrow(void* handle, int device) {
  Stream s;
  s.raw_ = handle;
  s.device_ = device;
  return s;
}

void Stream::synchronize() const {
  cuda::set_device(device_);  // the legacy default stream (nullptr) is the current context's
  cuda::stream_synchronize(handle());
}

Event::Event(int device, bool enable_timing)
    : handle_(cuda::event_create(device, enable_timing), destroy_event) {}

void Event::record(const Stream& stream) {
  cuda::set_device(stream.device());
  cuda::event_record(handle(), stream.handle());
}

void Event::synchronize() const { cuda::event_synchronize(handle()); }

float Event::elapsed_ms(const Event& end) const { return cuda::event_elapsed_ms(handle(), end.handle()); }

}  // namespace hidet
