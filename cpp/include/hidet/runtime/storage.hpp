// A block of memory on a device with a single owner that releases it: the device's memory pool,
// or an external owner (a DLPack producer such as PyTorch). Tensors share Storage by shared_ptr.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "hidet/runtime/device.hpp"
#include "hidet/runtime/export.hpp"

namespace hidet {

class HIDET_CXX_API Storage {
 public:
  // Allocate from the device's pool; returned to it when the last reference goes.
  static std::shared_ptr<Storage> allocate(Device device, uint64_t nbytes, void* stream = nullptr);
  // Wrap memory owned by someone else; `release` is called once when the last reference goes.
  static std::shared_ptr<Storage> wrap(Device device, void* ptr, uint64_t nbytes, std::function<void()> release);

  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  Device device() const { return device_; }
  void* ptr() const { return ptr_; }
  uint64_t nbytes() const { return nbytes_; }

 private:
  Storage(Device device, void* ptr, uint64_t nbytes, std::function<void()> release)
      : device_(device), ptr_(ptr), nbytes_(nbytes), release_(std::move(release)) {}
  Device device_;
  void* ptr_;
  uint64_t nbytes_;
  std::function<void()> release_;
};

// Copy bytes between storages or raw pointers on any devices (synchronous for host-only copies,
// enqueued on `stream` when CUDA memory is involved: synchronize the stream before reading host
// memory that a device-to-host copy writes).
HIDET_CXX_API void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, uint64_t nbytes,
                void* stream = nullptr);

}  // namespace hidet
