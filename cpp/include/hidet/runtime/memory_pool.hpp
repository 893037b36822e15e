// A caching memory pool per device. Requests are rounded up (512 B granularity below 1 MiB, 2 MiB
// above), freed blocks are kept and handed out again to later requests on the same stream, and
// statistics are kept. When the device refuses an allocation the pool releases its cache and tries
// once more before raising OutOfMemoryError naming the request and the pool's state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "hidet/runtime/device.hpp"
#include "hidet/runtime/export.hpp"

namespace hidet {

struct MemoryStats {
  uint64_t allocated = 0;        // bytes in blocks handed out (rounded sizes)
  uint64_t reserved = 0;         // bytes obtained from the device (allocated + cached)
  uint64_t peak = 0;             // high-water mark of `allocated`
  uint64_t cached = 0;           // bytes in freed blocks kept for reuse
  uint64_t num_allocations = 0;  // requests served
  uint64_t num_reused = 0;       // requests served from the cache
};

// Where a pool gets its memory from: returns nullptr when the device is out of memory.
struct RawAllocator {
  std::function<void*(size_t)> allocate;
  std::function<void(void*)> release;
};

class HIDET_CXX_API MemoryPool {
 public:
  // `limit`: the most bytes the pool may reserve (0 = no limit besides the device's own).
  MemoryPool(Device device, RawAllocator raw, uint64_t limit = 0);
  ~MemoryPool();  // releases cached blocks; live blocks are leaked deliberately (their owners outlive us)
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // The pool of a device (created on first use, lives for the process like the device itself).
  static MemoryPool& of(Device device);

  void* allocate(uint64_t nbytes, void* stream = nullptr);  // nbytes == 0 gives a valid unique pointer
  void free(void* ptr);                                     // throws for a pointer the pool did not give
  void empty_cache();
  MemoryStats stats() const;
  void reset_peak();
  void set_limit(uint64_t limit);
  Device device() const { return device_; }

  static uint64_t round_size(uint64_t nbytes);

 private:
  struct Block {
    uint64_t size;
    void* stream;
  };
  // Helpers of allocate/free/empty_cache; the caller holds the lock.
  void* take_cached_locked(uint64_t size, void* stream, uint64_t* block_size);  // nullptr: no fit
  // From the device; releases the cache and retries once, then throws OutOfMemoryError.
  void* reserve_locked(uint64_t size, uint64_t requested);
  std::string describe_state() const;  // for error messages
  void release_cached_locked();

  Device device_;
  RawAllocator raw_;
  uint64_t limit_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> live_;                         // handed out
  std::unordered_map<void*, std::multimap<uint64_t, void*>> free_;  // stream -> size -> ptr
  MemoryStats stats_;
};

}  // namespace hidet
