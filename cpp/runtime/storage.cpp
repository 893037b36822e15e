// Storage: a device buffer with one owner that releases it; and byte copies between devices.
#include "hidet/runtime/storage.hpp"

#include <cstdio>
#include <cstring>

#include "hidet/runtime/cuda_driver.hpp"
#include "hidet/runtime/memory_pool.hpp"

namespace hidet {

std::shared_ptr<Storage> Storage::allocate(Device device, uint64_t nbytes, void* stream) {
  MemoryPool& pool = MemoryPool::of(device);  // lives for the process, so the release may use it
  void* ptr = pool.allocate(nbytes, stream);
  return std::shared_ptr<Storage>(new Storage(device, ptr, nbytes, [&pool, ptr]() { pool.free(ptr); }));
}

std::shared_ptr<Storage> Storage::wrap(Device device, void* ptr, uint64_t nbytes, std::function<void()> release) {
  return std::shared_ptr<Storage>(new Storage(device, ptr, nbytes, std::move(release)));
}

Storage::~Storage() {
  if (!release_) return;
  try {
    release_();
  } catch (const std::exception& e) {
    // A destructor cannot report to its caller; say so rather than lose the failure.
    std::fprintf(stderr, "hidet: releasing %llu bytes on %s failed: %s\n", static_cast<unsigned long long>(nbytes_),
                 device_.str().c_str(), e.what());
  }
}

// Host-to-host copies run now. Copies touching CUDA memory are enqueued on `stream` and are
// asynchronous: a caller that reads host memory written by a device-to-host copy must synchronize
// the stream first.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, uint64_t nbytes, void* stream) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
  } else {
    cuda::memcpy_async(dst, src, nbytes, stream);
  }
}

}  // namespace hidet
