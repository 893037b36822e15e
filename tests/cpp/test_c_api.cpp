// The C API on the CPU: memory, copies, statistics, errors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hidet/runtime.h"

namespace {

const DLDevice kCpu = {kDLCPU, 0};

HidetMemoryStats stats_of(DLDevice device) {
  HidetMemoryStats s;
  EXPECT_EQ(hidet_memory_stats(device, &s), 0) << hidet_get_last_error();
  return s;
}

bool last_error_contains(const char* text) { return std::string(hidet_get_last_error()).find(text) != std::string::npos; }

}  // namespace

TEST(CApi, AbiVersion) { EXPECT_EQ(hidet_runtime_abi_version(), HIDET_RUNTIME_ABI_VERSION); }

TEST(CApi, AllocFreeAndStats) {
  ASSERT_EQ(hidet_empty_cache(kCpu), 0);
  HidetMemoryStats before = stats_of(kCpu);

  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(hidet_alloc(kCpu, 1000, nullptr, &a), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_alloc(kCpu, 3 << 20, nullptr, &b), 0) << hidet_get_last_error();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::memset(a, 1, 1000);
  std::memset(b, 2, 3 << 20);

  HidetMemoryStats s = stats_of(kCpu);
  EXPECT_EQ(s.allocated - before.allocated, 1024u + (4u << 20));
  EXPECT_EQ(s.num_allocations - before.num_allocations, 2u);
  EXPECT_GE(s.peak, s.allocated);

  ASSERT_EQ(hidet_free(kCpu, b), 0) << hidet_get_last_error();
  s = stats_of(kCpu);
  EXPECT_EQ(s.cached - before.cached, 4u << 20);

  void* c = nullptr;  // served by the cached block
  ASSERT_EQ(hidet_alloc(kCpu, 3 << 20, nullptr, &c), 0);
  EXPECT_EQ(c, b);
  EXPECT_EQ(stats_of(kCpu).num_reused - before.num_reused, 1u);

  ASSERT_EQ(hidet_free(kCpu, a), 0);
  ASSERT_EQ(hidet_free(kCpu, c), 0);
  ASSERT_EQ(hidet_empty_cache(kCpu), 0);
  s = stats_of(kCpu);
  EXPECT_EQ(s.cached, 0u);
  EXPECT_EQ(s.allocated, before.allocated);
  EXPECT_EQ(s.reserved, s.allocated);
}

TEST(CApi, MemcpyHostToHost) {
  std::vector<int> src(1000), dst(1000, 0);
  for (int i = 0; i < 1000; ++i) src[i] = i * 7 - 3;
  ASSERT_EQ(hidet_memcpy(dst.data(), src.data(), src.size() * sizeof(int), nullptr), 0) << hidet_get_last_error();
  EXPECT_EQ(dst, src);
  EXPECT_EQ(hidet_memcpy(nullptr, nullptr, 0, nullptr), 0);  // nothing to copy
}

TEST(CApi, Errors) {
  void* p = nullptr;
  EXPECT_EQ(hidet_alloc(kCpu, 16, nullptr, nullptr), -1);
  EXPECT_TRUE(last_error_contains("hidet_alloc: argument 'out_ptr' is NULL")) << hidet_get_last_error();
  EXPECT_EQ(hidet_alloc(DLDevice{7, 0}, 16, nullptr, &p), -1);
  EXPECT_TRUE(last_error_contains("unsupported device type 7")) << hidet_get_last_error();

  int local = 0;
  EXPECT_EQ(hidet_free(kCpu, &local), -1);
  EXPECT_TRUE(last_error_contains("the pool did not allocate it")) << hidet_get_last_error();
  EXPECT_EQ(hidet_free(kCpu, nullptr), -1);
  EXPECT_TRUE(last_error_contains("'ptr' is NULL")) << hidet_get_last_error();

  EXPECT_EQ(hidet_memory_stats(kCpu, nullptr), -1);
  EXPECT_TRUE(last_error_contains("'out_stats' is NULL")) << hidet_get_last_error();
  EXPECT_EQ(hidet_memcpy(nullptr, &local, 4, nullptr), -1);
  EXPECT_TRUE(last_error_contains("'dst' is NULL")) << hidet_get_last_error();
  EXPECT_EQ(hidet_cuda_device_count(nullptr), -1);
  EXPECT_TRUE(last_error_contains("'out_count' is NULL")) << hidet_get_last_error();
  EXPECT_EQ(hidet_stream_destroy(nullptr), -1);
  EXPECT_TRUE(last_error_contains("default stream cannot be destroyed")) << hidet_get_last_error();
}

TEST(CApi, OutOfMemoryIsAnErrorNotACrash) {
  void* p = nullptr;
  EXPECT_EQ(hidet_alloc(kCpu, uint64_t(1) << 62, nullptr, &p), HIDET_ERROR_OUT_OF_MEMORY);
  EXPECT_TRUE(last_error_contains("out of memory on cpu")) << hidet_get_last_error();
  EXPECT_TRUE(last_error_contains("requested 4611686018427387904 bytes")) << hidet_get_last_error();
}

TEST(CApi, LastErrorIsPerThread) {
  EXPECT_EQ(hidet_free(kCpu, nullptr), -1);
  std::string other;
  std::thread([&] { other = hidet_get_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_TRUE(last_error_contains("'ptr' is NULL"));
}

TEST(CApi, LimitAndPeak) {
  ASSERT_EQ(hidet_empty_cache(kCpu), 0);
  ASSERT_EQ(hidet_set_memory_limit(kCpu, stats_of(kCpu).reserved + (4 << 20)), 0);
  void* p = nullptr;
  EXPECT_EQ(hidet_alloc(kCpu, 8 << 20, nullptr, &p), HIDET_ERROR_OUT_OF_MEMORY);
  EXPECT_TRUE(last_error_contains("out of memory on cpu")) << hidet_get_last_error();
  ASSERT_EQ(hidet_alloc(kCpu, 1 << 20, nullptr, &p), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_free(kCpu, p), 0);
  ASSERT_EQ(hidet_reset_peak_memory(kCpu), 0);
  EXPECT_EQ(stats_of(kCpu).peak, stats_of(kCpu).allocated);
  ASSERT_EQ(hidet_set_memory_limit(kCpu, 0), 0);
}
