// The caching memory pool (see memory_pool.hpp) and the registry of one pool per device.
#include "hidet/runtime/memory_pool.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

#include "hidet/runtime/cuda_driver.hpp"
#include "hidet/runtime/error.hpp"

namespace hidet {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kSmallGranularity = 512;
constexpr uint64_t kLargeThreshold = kMiB;
constexpr uint64_t kLargeGranularity = 2 * kMiB;
// Larger requests fail at once (and rounding them up could overflow).
constexpr uint64_t kMaxRequest = uint64_t(1) << 56;
// Alignment of CPU blocks: enough for any vector load and for DLPack consumers.
constexpr size_t kCpuAlignment = 256;

uint64_t round_up(uint64_t n, uint64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// "512 B", "1.50 KiB", "2.00 GiB"
std::string format_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (n < kKiB) return str_cat(n, " B");
  double value = static_cast<double>(n);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %s", value, units[unit]);
  return buf;
}

[[noreturn]] void throw_oom(const Device& device, uint64_t size, uint64_t requested, const std::string& state) {
  const char* advice = device.is_cuda()
                           ? "Free tensors you no longer need, call hidet.cuda.empty_cache(), or use smaller shapes."
                           : "Free tensors you no longer need, or use smaller shapes.";
  throw OutOfMemoryError(str_cat("out of memory on ", device.str(), ": cannot allocate ", format_bytes(size),
                                 " (requested ", requested, " bytes); ", state, ". ", advice));
}

RawAllocator cpu_allocator() {
  return {[](size_t nbytes) { return std::aligned_alloc(kCpuAlignment, round_up(nbytes, kCpuAlignment)); },
          [](void* ptr) { std::free(ptr); }};
}

RawAllocator cuda_allocator(int device) {
  return {[device](size_t nbytes) { return cuda::malloc(device, nbytes); },
          [device](void* ptr) { cuda::free(device, ptr); }};
}

}  // namespace

uint64_t MemoryPool::round_size(uint64_t nbytes) {
  if (nbytes == 0) return kSmallGranularity;
  return nbytes < kLargeThreshold ? round_up(nbytes, kSmallGranularity) : round_up(nbytes, kLargeGranularity);
}

MemoryPool::MemoryPool(Device device, RawAllocator raw, uint64_t limit)
    : device_(device), raw_(std::move(raw)), limit_(limit) {}

MemoryPool::~MemoryPool() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    release_cached_locked();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hidet: releasing the %s memory pool failed: %s\n", device_.str().c_str(), e.what());
  }
}

MemoryPool& MemoryPool::of(Device device) {
  struct Registry {
    std::mutex mutex;
    std::map<std::pair<int32_t, int32_t>, MemoryPool*> pools;
  };
  // Leaked on purpose, pools included: tensors may be freed during interpreter shutdown, after
  // static destructors have run.
  static Registry* registry = new Registry();
  if (device.is_cpu()) device = Device::cpu();  // one host pool whatever the index
  std::lock_guard<std::mutex> lock(registry->mutex);
  MemoryPool*& pool = registry->pools[{static_cast<int32_t>(device.kind), device.index}];
  if (pool == nullptr) {
    if (device.is_cuda()) {
      try {
        cuda::set_device(device.index);  // a clear error for a missing GPU or driver
      } catch (...) {
        registry->pools.erase({static_cast<int32_t>(device.kind), device.index});
        throw;
      }
      pool = new MemoryPool(device, cuda_allocator(device.index));
    } else {
      pool = new MemoryPool(device, cpu_allocator());
    }
  }
  return *pool;
}

void* MemoryPool::allocate(uint64_t nbytes, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (nbytes > kMaxRequest) throw_oom(device_, nbytes, nbytes, describe_state());
  uint64_t size = round_size(nbytes);
  uint64_t block_size = size;
  void* ptr = take_cached_locked(size, stream, &block_size);
  if (ptr != nullptr) {
    stats_.cached -= block_size;
    stats_.num_reused += 1;
  } else {
    ptr = reserve_locked(size, nbytes);
  }
  live_.emplace(ptr, Block{block_size, stream});
  stats_.allocated += block_size;
  stats_.peak = std::max(stats_.peak, stats_.allocated);
  stats_.num_allocations += 1;
  return ptr;
}

// Best fit among the stream's free blocks of [size, 2 * size]: a much larger block stays cached
// for a request that needs it rather than being spent on a small one.
void* MemoryPool::take_cached_locked(uint64_t size, void* stream, uint64_t* block_size) {
  auto blocks = free_.find(stream);
  if (blocks == free_.end()) return nullptr;
  auto it = blocks->second.lower_bound(size);
  if (it == blocks->second.end() || it->first > 2 * size) return nullptr;
  void* ptr = it->second;
  *block_size = it->first;
  blocks->second.erase(it);
  if (blocks->second.empty()) free_.erase(blocks);
  return ptr;
}

void* MemoryPool::reserve_locked(uint64_t size, uint64_t requested) {
  auto try_reserve = [&]() -> void* {
    if (limit_ != 0 && stats_.reserved + size > limit_) return nullptr;
    return raw_.allocate(size);
  };
  void* ptr = try_reserve();
  if (ptr == nullptr && stats_.cached > 0) {
    release_cached_locked();
    ptr = try_reserve();
  }
  if (ptr == nullptr) throw_oom(device_, size, requested, describe_state());
  stats_.reserved += size;
  return ptr;
}

void MemoryPool::free(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  HIDET_CHECK(it != live_.end(), "cannot free ", ptr, " on ", device_.str(),
              ": the pool did not allocate it, or it was freed already");
  Block block = it->second;
  live_.erase(it);
  free_[block.stream].emplace(block.size, ptr);
  stats_.allocated -= block.size;
  stats_.cached += block.size;
}

void MemoryPool::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void MemoryPool::release_cached_locked() {
  for (auto blocks = free_.begin(); blocks != free_.end(); blocks = free_.erase(blocks)) {
    for (auto it = blocks->second.begin(); it != blocks->second.end(); it = blocks->second.erase(it)) {
      raw_.release(it->second);
      stats_.cached -= it->first;
      stats_.reserved -= it->first;
    }
  }
}

MemoryStats MemoryPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void MemoryPool::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.allocated;
}

void MemoryPool::set_limit(uint64_t limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  limit_ = limit;
}

std::string MemoryPool::describe_state() const {
  std::string state = str_cat("pool: allocated ", format_bytes(stats_.allocated), ", cached ",
                              format_bytes(stats_.cached), ", reserved ", format_bytes(stats_.reserved), ", peak ",
                              format_bytes(stats_.peak), ", limit ", limit_ ? format_bytes(limit_) : "none");
  if (device_.is_cuda()) {
    try {
      size_t free_bytes = 0, total_bytes = 0;
      cuda::mem_get_info(device_.index, &free_bytes, &total_bytes);
      state += str_cat("; device: free ", format_bytes(free_bytes), " / total ", format_bytes(total_bytes));
    } catch (const std::exception&) {
      // The state is for a message only; leave the device part out.
    }
  }
  return state;
}

}  // namespace hidet
