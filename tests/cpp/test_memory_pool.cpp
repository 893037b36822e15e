// The caching memory pool, on CPU pools with a counting raw allocator.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "hidet/runtime/error.hpp"
#include "hidet/runtime/memory_pool.hpp"

using hidet::Device;
using hidet::MemoryPool;

namespace {

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;

// A raw allocator over malloc that counts its calls and refuses to hold more than `capacity`
// bytes at once (0: no capacity), like a device that runs out of memory.
struct FakeDevice {
  uint64_t capacity = 0;
  std::atomic<uint64_t> held{0};
  std::atomic<int> allocations{0};
  std::atomic<int> releases{0};
  std::atomic<int> refusals{0};
  std::mutex mutex;
  std::unordered_map<void*, uint64_t> sizes;

  hidet::RawAllocator allocator() {
    return {[this](size_t n) -> void* {
              std::lock_guard<std::mutex> lock(mutex);
              if (capacity != 0 && held + n > capacity) {
                ++refusals;
                return nullptr;
              }
              void* p = std::malloc(n);
              sizes[p] = n;
              held += n;
              ++allocations;
              return p;
            },
            [this](void* p) {
              std::lock_guard<std::mutex> lock(mutex);
              held -= sizes.at(p);
              sizes.erase(p);
              ++releases;
              std::free(p);
            }};
  }
};

void* stream_a = reinterpret_cast<void*>(0x1000);
void* stream_b = reinterpret_cast<void*>(0x2000);

}  // namespace

TEST(MemoryPool, RoundSize) {
  EXPECT_EQ(MemoryPool::round_size(0), 512u);
  EXPECT_EQ(MemoryPool::round_size(1), 512u);
  EXPECT_EQ(MemoryPool::round_size(512), 512u);
  EXPECT_EQ(MemoryPool::round_size(513), 1024u);
  EXPECT_EQ(MemoryPool::round_size(MiB - 1), MiB);
  EXPECT_EQ(MemoryPool::round_size(MiB), 2 * MiB);
  EXPECT_EQ(MemoryPool::round_size(2 * MiB), 2 * MiB);
  EXPECT_EQ(MemoryPool::round_size(2 * MiB + 1), 4 * MiB);
  EXPECT_EQ(MemoryPool::round_size(5 * MiB), 6 * MiB);
}

TEST(MemoryPool, ZeroBytesGiveDistinctPointers) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  void* a = pool.allocate(0);
  void* b = pool.allocate(0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.stats().allocated, 1024u);
  pool.free(a);
  pool.free(b);
}

TEST(MemoryPool, FreedBlockIsReused) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  void* a = pool.allocate(1000);
  pool.free(a);
  void* b = pool.allocate(1000);
  EXPECT_EQ(a, b);
  EXPECT_EQ(pool.stats().num_allocations, 2u);
  EXPECT_EQ(pool.stats().num_reused, 1u);
  EXPECT_EQ(dev.allocations, 1);
  // A request of a slightly different size that rounds within 2x also fits the cached block.
  pool.free(b);
  void* c = pool.allocate(600);
  EXPECT_EQ(c, a);
  EXPECT_EQ(pool.stats().num_reused, 2u);
  EXPECT_EQ(pool.stats().allocated, 1024u);  // the whole block is handed out
  pool.free(c);
}

TEST(MemoryPool, BestFitAmongCachedBlocks) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  void* big = pool.allocate(4 * KiB);
  void* fit = pool.allocate(2 * KiB);
  pool.free(big);
  pool.free(fit);
  EXPECT_EQ(pool.allocate(2 * KiB), fit);
  EXPECT_EQ(pool.allocate(2 * KiB + 1), big);  // rounds to 2.5 KiB; 4 KiB is within 2x
}

TEST(MemoryPool, LargeCachedBlockNotSpentOnSmallRequest) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  void* big = pool.allocate(64 * MiB);
  pool.free(big);
  void* small = pool.allocate(1 * KiB);
  EXPECT_NE(small, big);
  EXPECT_EQ(pool.stats().num_reused, 0u);
  EXPECT_EQ(pool.stats().cached, 64 * MiB);
  EXPECT_EQ(pool.allocate(40 * MiB), big);  // 40 MiB: within 2x of the block
  EXPECT_EQ(pool.stats().cached, 0u);
}

TEST(MemoryPool, StreamsDoNotShareBlocks) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  void* a = pool.allocate(4096, stream_a);
  pool.free(a);
  void* b = pool.allocate(4096, stream_b);
  EXPECT_NE(a, b);
  EXPECT_EQ(pool.stats().num_reused, 0u);
  void* c = pool.allocate(4096, stream_a);
  EXPECT_EQ(a, c);
  EXPECT_EQ(pool.stats().num_reused, 1u);
  pool.free(b);
  pool.free(c);
}

TEST(MemoryPool, StatsThroughASequence) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  auto expect = [&](uint64_t allocated, uint64_t reserved, uint64_t peak, uint64_t cached) {
    hidet::MemoryStats s = pool.stats();
    EXPECT_EQ(s.allocated, allocated);
    EXPECT_EQ(s.reserved, reserved);
    EXPECT_EQ(s.peak, peak);
    EXPECT_EQ(s.cached, cached);
    EXPECT_EQ(s.reserved, s.allocated + s.cached);
  };
  expect(0, 0, 0, 0);
  void* a = pool.allocate(100);  // 512
  expect(512, 512, 512, 0);
  void* b = pool.allocate(3 * MiB);  // 4 MiB
  expect(512 + 4 * MiB, 512 + 4 * MiB, 512 + 4 * MiB, 0);
  pool.free(b);
  expect(512, 512 + 4 * MiB, 512 + 4 * MiB, 4 * MiB);
  void* c = pool.allocate(4 * MiB);  // reuses b
  EXPECT_EQ(c, b);
  expect(512 + 4 * MiB, 512 + 4 * MiB, 512 + 4 * MiB, 0);
  pool.free(a);
  pool.free(c);
  expect(0, 512 + 4 * MiB, 512 + 4 * MiB, 512 + 4 * MiB);
  EXPECT_EQ(pool.stats().num_allocations, 3u);
  EXPECT_EQ(pool.stats().num_reused, 1u);
}

TEST(MemoryPool, ResetPeak) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  void* a = pool.allocate(10 * MiB);
  void* b = pool.allocate(1 * KiB);
  pool.free(a);
  EXPECT_EQ(pool.stats().peak, 10 * MiB + KiB);
  pool.reset_peak();
  EXPECT_EQ(pool.stats().peak, KiB);
  pool.free(b);
  EXPECT_EQ(pool.stats().peak, KiB);
}

TEST(MemoryPool, EmptyCacheReleasesCachedBlocks) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  void* a = pool.allocate(8 * MiB);
  void* b = pool.allocate(2 * KiB);
  pool.free(a);
  EXPECT_EQ(pool.stats().reserved, 8 * MiB + 2 * KiB);
  pool.empty_cache();
  EXPECT_EQ(pool.stats().cached, 0u);
  EXPECT_EQ(pool.stats().reserved, 2 * KiB);
  EXPECT_EQ(pool.stats().allocated, 2 * KiB);
  EXPECT_EQ(dev.releases, 1);
  EXPECT_EQ(dev.held, 2 * KiB);
  pool.free(b);
}

TEST(MemoryPool, DestructorReleasesCache) {
  FakeDevice dev;
  {
    MemoryPool pool(Device::cpu(), dev.allocator());
    pool.free(pool.allocate(1 * MiB));
    pool.free(pool.allocate(1 * KiB));
  }
  EXPECT_EQ(dev.held, 0u);
}

TEST(MemoryPool, LimitGivesOutOfMemoryErrorNamingRequestAndState) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator(), /*limit=*/8 * MiB);
  void* a = pool.allocate(6 * MiB);
  try {
    pool.allocate(3 * MiB);
    FAIL() << "expected OutOfMemoryError";
  } catch (const hidet::OutOfMemoryError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory on cpu"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot allocate 4.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("requested 3145728 bytes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("allocated 6.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("reserved 6.00 MiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("limit 8.00 MiB"), std::string::npos) << msg;
  }
  // The pool is unharmed and the error is also a hidet::Error.
  EXPECT_EQ(pool.stats().allocated, 6 * MiB);
  EXPECT_THROW(pool.allocate(3 * MiB), hidet::Error);
  pool.set_limit(0);
  void* b = pool.allocate(3 * MiB);
  pool.free(a);
  pool.free(b);
}

TEST(MemoryPool, LimitReleasesCacheBeforeFailing) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator(), /*limit=*/8 * MiB);
  pool.free(pool.allocate(4 * MiB));  // 4 MiB cached
  void* b = pool.allocate(1 * KiB);   // not served by the 4 MiB block (more than 2x)
  void* c = pool.allocate(6 * MiB);   // too small a block; 4 + 6 > 8: cache released, then served
  EXPECT_EQ(dev.releases, 1);
  EXPECT_EQ(pool.stats().cached, 0u);
  EXPECT_EQ(pool.stats().reserved, 6 * MiB + KiB);
  pool.free(b);
  pool.free(c);
}

TEST(MemoryPool, DeviceOutOfMemoryRetriesAfterReleasingCache) {
  FakeDevice dev;
  dev.capacity = 12 * MiB;
  MemoryPool pool(Device::cpu(), dev.allocator());
  pool.free(pool.allocate(10 * MiB));  // cached, held by the device
  void* p = pool.allocate(3 * MiB);    // 4 MiB: refused once, then served after the cache goes
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(dev.refusals, 1);
  EXPECT_EQ(dev.releases, 1);
  EXPECT_EQ(pool.stats().cached, 0u);
  EXPECT_EQ(pool.stats().reserved, 4 * MiB);
  // Nothing left to release: a request past the capacity fails.
  EXPECT_THROW(pool.allocate(9 * MiB), hidet::OutOfMemoryError);
  pool.free(p);
}

TEST(MemoryPool, HugeRequestFailsCleanly) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  EXPECT_THROW(pool.allocate(~uint64_t(0)), hidet::OutOfMemoryError);
}

TEST(MemoryPool, FreeingUnknownPointerThrows) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  int local = 0;
  EXPECT_THROW(pool.free(&local), hidet::Error);
  void* a = pool.allocate(16);
  pool.free(a);
  try {
    pool.free(a);  // twice
    FAIL() << "expected hidet::Error";
  } catch (const hidet::Error& e) {
    EXPECT_NE(std::string(e.what()).find("freed already"), std::string::npos) << e.what();
  }
}

TEST(MemoryPool, ThreadSafety) {
  FakeDevice dev;
  MemoryPool pool(Device::cpu(), dev.allocator());
  constexpr int kThreads = 8;
  constexpr int kIterations = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t]() {
      std::mt19937 rng(t);
      std::vector<std::pair<void*, uint64_t>> held;
      void* stream = reinterpret_cast<void*>(static_cast<uintptr_t>(t % 3) * 0x100);
      for (int i = 0; i < kIterations; ++i) {
        if (held.empty() || rng() % 2 == 0) {
          uint64_t n = 1 + rng() % (rng() % 8 == 0 ? 3 * MiB : 64 * KiB);
          auto* p = static_cast<unsigned char*>(pool.allocate(n, stream));
          p[0] = static_cast<unsigned char>(t);  // touch the block: a double hand-out would show
          p[n - 1] = static_cast<unsigned char>(t);
          held.emplace_back(p, n);
        } else {
          auto [p, n] = held.back();
          auto* bytes = static_cast<unsigned char*>(p);
          ASSERT_EQ(bytes[0], static_cast<unsigned char>(t));
          ASSERT_EQ(bytes[n - 1], static_cast<unsigned char>(t));
          held.pop_back();
          pool.free(p);
        }
      }
      for (auto& [p, n] : held) pool.free(p);
    });
  }
  for (auto& th : threads) th.join();
  hidet::MemoryStats s = pool.stats();
  EXPECT_EQ(s.allocated, 0u);
  EXPECT_EQ(s.reserved, s.cached);
  EXPECT_EQ(s.num_allocations, static_cast<uint64_t>(dev.allocations) + s.num_reused);
  pool.empty_cache();
  EXPECT_EQ(dev.held, 0u);
}

TEST(MemoryPool, CpuPoolOfDevice) {
  MemoryPool& pool = MemoryPool::of(Device::cpu());
  EXPECT_EQ(&pool, &MemoryPool::of(Device::cpu()));
  auto* p = static_cast<unsigned char*>(pool.allocate(1000));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
  std::memset(p, 7, 1000);
  pool.free(p);
}
