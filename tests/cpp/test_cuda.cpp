// The CUDA path (driver loading, pools, copies, streams, events) on a machine with a GPU; every
// test skips itself where CUDA is unavailable (test_cuda_unavailable.cpp covers that case).
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "hidet/runtime.h"
#include "hidet/runtime/cuda_driver.hpp"
#include "hidet/runtime/error.hpp"
#include "hidet/runtime/memory_pool.hpp"
#include "hidet/runtime/storage.hpp"
#include "hidet/runtime/stream.hpp"

using hidet::Device;

class Cuda : public testing::Test {
 protected:
  void SetUp() override {
    if (!hidet::cuda::available()) GTEST_SKIP() << hidet::cuda::unavailable_reason();
  }
};

TEST_F(Cuda, Devices) {
  int n = hidet::cuda::device_count();
  EXPECT_GT(n, 0);
  EXPECT_EQ(hidet::cuda::unavailable_reason(), "");
  hidet::cuda::set_device(0);
  try {
    hidet::cuda::set_device(n);
    FAIL() << "expected an error";
  } catch (const hidet::Error& e) {
    EXPECT_EQ(std::string(e.what()), "cuda:" + std::to_string(n) + " does not exist: this machine has " +
                                         std::to_string(n) + " CUDA device(s)");
  }
  size_t free_bytes = 0, total_bytes = 0;
  hidet::cuda::mem_get_info(0, &free_bytes, &total_bytes);
  EXPECT_GT(total_bytes, 0u);
  EXPECT_LE(free_bytes, total_bytes);
}

TEST_F(Cuda, RoundTripThroughStorageOnAStream) {
  hidet::Stream stream = hidet::Stream::create(0);
  const size_t n = 1 << 20;
  std::vector<float> host(n), back(n, 0.0f);
  std::iota(host.begin(), host.end(), 0.5f);
  auto storage = hidet::Storage::allocate(Device::cuda(0), n * sizeof(float), stream.handle());
  EXPECT_EQ(hidet::cuda::pointer_device(storage->ptr()), 0);
  EXPECT_EQ(hidet::cuda::pointer_device(host.data()), -1);
  hidet::copy_bytes(storage->ptr(), Device::cuda(0), host.data(), Device::cpu(), n * sizeof(float), stream.handle());
  auto other = hidet::Storage::allocate(Device::cuda(0), n * sizeof(float), stream.handle());
  hidet::copy_bytes(other->ptr(), Device::cuda(0), storage->ptr(), Device::cuda(0), n * sizeof(float), stream.handle());
  hidet::copy_bytes(back.data(), Device::cpu(), other->ptr(), Device::cuda(0), n * sizeof(float), stream.handle());
  stream.synchronize();
  EXPECT_EQ(back, host);
}

TEST_F(Cuda, MemsetAndDefaultStream) {
  void* p = hidet::MemoryPool::of(Device::cuda(0)).allocate(4096);
  hidet::cuda::memset_d8_async(p, 0xAB, 4096, nullptr);
  std::vector<unsigned char> back(4096, 0);
  hidet::cuda::memcpy_async(back.data(), p, 4096, nullptr);
  hidet::Stream().synchronize();
  for (unsigned char b : back) ASSERT_EQ(b, 0xAB);
  hidet::MemoryPool::of(Device::cuda(0)).free(p);
}

TEST_F(Cuda, FreshThreadGetsAContext) {
  // A thread that never touched CUDA: the runtime makes a primary context current by itself.
  std::string error;
  std::thread([&] {
    try {
      int x = 42, y = 0;
      void* d = hidet::MemoryPool::of(Device::cuda(0)).allocate(sizeof(int));
      hidet::cuda::memcpy_async(d, &x, sizeof(int), nullptr);
      hidet::cuda::memcpy_async(&y, d, sizeof(int), nullptr);
      hidet::cuda::stream_synchronize(nullptr);
      hidet::MemoryPool::of(Device::cuda(0)).free(d);
      if (y != 42) error = "wrong value " + std::to_string(y);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }).join();
  EXPECT_EQ(error, "");
}

TEST_F(Cuda, EventsTime) {
  hidet::Stream stream = hidet::Stream::create(0);
  hidet::Event start(0, true), end(0, true);
  void* p = hidet::MemoryPool::of(Device::cuda(0)).allocate(64 << 20, stream.handle());
  start.record(stream);
  hidet::cuda::memset_d8_async(p, 0, 64 << 20, stream.handle());
  end.record(stream);
  end.synchronize();
  EXPECT_GE(start.elapsed_ms(end), 0.0f);
  hidet::MemoryPool::of(Device::cuda(0)).free(p);
}

TEST_F(Cuda, OutOfMemory) {
  EXPECT_EQ(hidet::cuda::malloc(0, size_t(1) << 50), nullptr);  // a petabyte: OOM, not an exception
  hidet::MemoryPool pool(Device::cuda(0),
                         {[](size_t n) { return hidet::cuda::malloc(0, n); }, [](void* p) { hidet::cuda::free(0, p); }},
                         /*limit=*/64 << 20);
  void* p = pool.allocate(40 << 20);
  try {
    pool.allocate(40 << 20);
    FAIL() << "expected OutOfMemoryError";
  } catch (const hidet::OutOfMemoryError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("out of memory on cuda:0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("; device: free "), std::string::npos) << msg;
    EXPECT_NE(msg.find("hidet.cuda.empty_cache()"), std::string::npos) << msg;
  }
  pool.free(p);
  pool.set_limit(0);
  // The device itself refuses: the error is the pool's, not the driver's.
  EXPECT_THROW(pool.allocate(uint64_t(1) << 50), hidet::OutOfMemoryError);
}

TEST_F(Cuda, CApi) {
  const DLDevice gpu = {kDLCUDA, 0};
  HidetStream stream = nullptr;
  ASSERT_EQ(hidet_stream_create(0, &stream), 0) << hidet_get_last_error();
  void* d = nullptr;
  ASSERT_EQ(hidet_alloc(gpu, 1024 * sizeof(int), stream, &d), 0) << hidet_get_last_error();
  std::vector<int> host(1024), back(1024, 0);
  std::iota(host.begin(), host.end(), -100);

  HidetEventHandle start = nullptr, end = nullptr;
  ASSERT_EQ(hidet_event_create(0, 1, &start), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_event_create(0, 1, &end), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_event_record(start, stream), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_memcpy(d, host.data(), 1024 * sizeof(int), stream), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_memcpy(back.data(), d, 1024 * sizeof(int), stream), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_event_record(end, stream), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_stream_synchronize(stream), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_event_synchronize(end), 0) << hidet_get_last_error();
  float ms = -1.0f;
  ASSERT_EQ(hidet_event_elapsed_ms(start, end, &ms), 0) << hidet_get_last_error();
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(back, host);

  HidetMemoryStats stats;
  ASSERT_EQ(hidet_memory_stats(gpu, &stats), 0);
  EXPECT_GE(stats.allocated, 4096u);
  ASSERT_EQ(hidet_free(gpu, d), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_empty_cache(gpu), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_cuda_device_synchronize(0), 0) << hidet_get_last_error();
  EXPECT_EQ(hidet_event_destroy(start), 0);
  EXPECT_EQ(hidet_event_destroy(end), 0);
  EXPECT_EQ(hidet_stream_destroy(stream), 0) << hidet_get_last_error();

  EXPECT_EQ(hidet_alloc(DLDevice{kDLCUDA, 999}, 16, nullptr, &d), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("cuda:999 does not exist"), std::string::npos)
      << hidet_get_last_error();
}
