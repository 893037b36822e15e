// On a machine without an NVIDIA driver (CI), every CUDA request fails with a clear error and
// nothing crashes. On a GPU machine these tests skip themselves.
#include <gtest/gtest.h>

#include <string>

#include "hidet/runtime.h"
#include "hidet/runtime/cuda_driver.hpp"
#include "hidet/runtime/error.hpp"
#include "hidet/runtime/memory_pool.hpp"
#include "hidet/runtime/storage.hpp"
#include "hidet/runtime/stream.hpp"

namespace {

const char* const kUnavailable = "CUDA is not available";

bool mentions_unavailable(const std::string& msg) { return msg.find(kUnavailable) != std::string::npos; }

template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const hidet::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

class CudaUnavailable : public testing::Test {
 protected:
  void SetUp() override {
    if (hidet::cuda::available()) GTEST_SKIP() << "a CUDA device is present";
  }
};

TEST_F(CudaUnavailable, Queries) {
  EXPECT_FALSE(hidet::cuda::available());
  EXPECT_EQ(hidet::cuda::device_count(), 0);
  const std::string& reason = hidet::cuda::unavailable_reason();
  EXPECT_TRUE(mentions_unavailable(reason)) << reason;
  EXPECT_NE(reason.find("device='cpu'"), std::string::npos) << reason;
  EXPECT_EQ(hidet::cuda::pointer_device(&reason), -1);
}

TEST_F(CudaUnavailable, CppCallsFailClearly) {
  std::string msg = error_of([] { hidet::MemoryPool::of(hidet::Device::cuda(0)).allocate(1024); });
  EXPECT_TRUE(mentions_unavailable(msg)) << msg;
  msg = error_of([] { hidet::Storage::allocate(hidet::Device::cuda(0), 16); });
  EXPECT_TRUE(mentions_unavailable(msg)) << msg;
  msg = error_of([] { hidet::cuda::set_device(0); });
  EXPECT_TRUE(mentions_unavailable(msg)) << msg;
  msg = error_of([] { hidet::Stream::create(0); });
  EXPECT_TRUE(mentions_unavailable(msg)) << msg;
  msg = error_of([] { hidet::Event(0, true); });
  EXPECT_TRUE(mentions_unavailable(msg)) << msg;
  msg = error_of([] { hidet::Stream().synchronize(); });
  EXPECT_TRUE(mentions_unavailable(msg)) << msg;
  int x = 1, y = 0;
  msg = error_of([&] { hidet::copy_bytes(&y, hidet::Device::cuda(0), &x, hidet::Device::cpu(), sizeof(int)); });
  EXPECT_TRUE(mentions_unavailable(msg)) << msg;
}

TEST_F(CudaUnavailable, CApiFailsClearly) {
  int32_t count = -1;
  EXPECT_EQ(hidet_cuda_device_count(&count), 0);
  EXPECT_EQ(count, 0);
  EXPECT_TRUE(mentions_unavailable(hidet_cuda_unavailable_reason()));

  void* ptr = nullptr;
  EXPECT_EQ(hidet_alloc(DLDevice{kDLCUDA, 0}, 1024, nullptr, &ptr), -1);
  EXPECT_TRUE(mentions_unavailable(hidet_get_last_error())) << hidet_get_last_error();
  EXPECT_EQ(ptr, nullptr);

  HidetStream stream = nullptr;
  EXPECT_EQ(hidet_stream_create(0, &stream), -1);
  EXPECT_TRUE(mentions_unavailable(hidet_get_last_error())) << hidet_get_last_error();
  EXPECT_EQ(hidet_stream_synchronize(nullptr), -1);
  EXPECT_TRUE(mentions_unavailable(hidet_get_last_error())) << hidet_get_last_error();

  HidetEventHandle event = nullptr;
  EXPECT_EQ(hidet_event_create(0, 1, &event), -1);
  EXPECT_TRUE(mentions_unavailable(hidet_get_last_error())) << hidet_get_last_error();
  EXPECT_EQ(hidet_cuda_device_synchronize(0), -1);
  EXPECT_TRUE(mentions_unavailable(hidet_get_last_error())) << hidet_get_last_error();

  HidetMemoryStats stats;
  EXPECT_EQ(hidet_memory_stats(DLDevice{kDLCUDA, 0}, &stats), -1);
  EXPECT_TRUE(mentions_unavailable(hidet_get_last_error())) << hidet_get_last_error();
}
