// Compiled graphs on a GPU through the C API: a CUDA artifact of copy instructions (no kernel
// libraries, so no CUDA compiler is needed to build the test), run on streams and replayed as a
// CUDA graph. Every test skips itself where CUDA is unavailable (test_graph.cpp covers that case).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "artifact_writer.hpp"
#include "hidet/runtime.h"

using namespace hidet_test;

namespace {

// t = x (arena), y = t, w_out = w (a weight), all float32[64].
const char* const kManifest = R"({
  "format_version": 1, "target": "cuda", "arch": "sm_80",
  "inputs": [{"name": "x", "tensor": 0}],
  "outputs": [{"name": "y", "tensor": 3}, {"name": "w_out", "tensor": 4}],
  "tensors": [
    {"dtype": "float32", "shape": [64], "storage": "input"},
    {"dtype": "float32", "shape": [64], "storage": "weight", "offset": 0},
    {"dtype": "float32", "shape": [64], "storage": "arena", "offset": 256},
    {"dtype": "float32", "shape": [64], "storage": "output"},
    {"dtype": "float32", "shape": [64], "storage": "output"}
  ],
  "kernels": [],
  "instructions": [{"copy": 0, "to": 2}, {"copy": 2, "to": 3}, {"copy": 1, "to": 4}],
  "arena_nbytes": 512, "weights_nbytes": 256
})";

const DLDevice kGpu = {kDLCUDA, 0};

std::vector<float> range(float start, int n = 64) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

std::string artifact(const std::string& manifest = kManifest) {
  return write_container({{"manifest.json", manifest}, {"weights.bin", float_bytes(range(1000.0f))}});
}

class GraphCuda : public testing::Test {
 protected:
  void SetUp() override {
    int32_t count = 0;
    if (hidet_cuda_device_count(&count) != 0 || count == 0) GTEST_SKIP() << hidet_cuda_unavailable_reason();
    std::string data = artifact();
    ASSERT_EQ(hidet_graph_load_from_memory(data.data(), data.size(), "g.hidet", 0, &graph_), 0)
        << hidet_get_last_error();
    ASSERT_EQ(hidet_stream_create(0, &stream_), 0) << hidet_get_last_error();
    for (void** p : {&x_, &y_, &w_}) ASSERT_EQ(hidet_alloc(kGpu, 256, stream_, p), 0) << hidet_get_last_error();
  }
  void TearDown() override {
    for (void* p : {x_, y_, w_}) {
      if (p) hidet_free(kGpu, p);
    }
    if (stream_) hidet_stream_destroy(stream_);
    if (graph_) hidet_graph_free(graph_);
  }
  // Upload x = range(start), run `run` and check y == x and w_out == the weight.
  template <typename Run>
  void check_run(float start, Run run) {
    std::vector<float> x = range(start), y(64), w(64);
    ASSERT_EQ(hidet_memcpy(x_, x.data(), 256, stream_), 0);
    const void* inputs[] = {x_};
    void* outputs[] = {y_, w_};
    ASSERT_EQ(run(inputs, outputs), 0) << hidet_get_last_error();
    ASSERT_EQ(hidet_memcpy(y.data(), y_, 256, stream_), 0);
    ASSERT_EQ(hidet_memcpy(w.data(), w_, 256, stream_), 0);
    ASSERT_EQ(hidet_stream_synchronize(stream_), 0);
    EXPECT_EQ(y, x);
    EXPECT_EQ(w, range(1000.0f));
  }

  HidetGraphHandle graph_ = nullptr;
  HidetStream stream_ = nullptr;
  void *x_ = nullptr, *y_ = nullptr, *w_ = nullptr;
};

}  // namespace

TEST_F(GraphCuda, Runs) {
  DLDevice device;
  ASSERT_EQ(hidet_graph_device(graph_, &device), 0);
  EXPECT_EQ(device.device_type, kDLCUDA);
  EXPECT_EQ(device.device_id, 0);
  for (float start : {1.0f, 2.0f}) {
    check_run(start, [&](const void* const* in, void* const* out) { return hidet_graph_run(graph_, in, 1, out, 2, stream_); });
  }
  // The default stream gets an arena of its own.
  check_run(3.0f, [&](const void* const* in, void* const* out) {
    int status = hidet_graph_run(graph_, in, 1, out, 2, nullptr);
    return status != 0 ? status : hidet_cuda_device_synchronize(0);
  });
}

TEST_F(GraphCuda, CudaGraphReplays) {
  HidetCudaGraphHandle cg = nullptr;
  ASSERT_EQ(hidet_graph_cuda_graph_create(graph_, &cg), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_graph_free(graph_), 0);  // the CUDA graph keeps what it needs
  graph_ = nullptr;
  for (float start : {1.0f, 50.0f, -7.0f}) {
    check_run(start, [&](const void* const* in, void* const* out) { return hidet_cuda_graph_run(cg, in, 1, out, 2, stream_); });
  }
  // Results of earlier replays are not overwritten by later ones.
  void* y2 = nullptr;
  ASSERT_EQ(hidet_alloc(kGpu, 256, stream_, &y2), 0);
  std::vector<float> x2 = range(500.0f), y_host(64), y2_host(64);
  const void* inputs[] = {x_};
  void* outputs[] = {y_, w_};
  ASSERT_EQ(hidet_cuda_graph_run(cg, inputs, 1, outputs, 2, stream_), 0);
  ASSERT_EQ(hidet_memcpy(x_, x2.data(), 256, stream_), 0);
  void* outputs2[] = {y2, w_};
  ASSERT_EQ(hidet_cuda_graph_run(cg, inputs, 1, outputs2, 2, stream_), 0);
  ASSERT_EQ(hidet_memcpy(y2_host.data(), y2, 256, stream_), 0);
  ASSERT_EQ(hidet_stream_synchronize(stream_), 0);
  EXPECT_EQ(y2_host, x2);
  std::vector<float> x_null(64);
  const void* null_inputs[] = {nullptr};
  EXPECT_EQ(hidet_cuda_graph_run(cg, null_inputs, 1, outputs, 2, stream_), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("input 0 ('x'): null pointer"), std::string::npos);
  ASSERT_EQ(hidet_free(kGpu, y2), 0);
  ASSERT_EQ(hidet_cuda_graph_free(cg), 0);
}

TEST_F(GraphCuda, CudaGraphLaunchThenCopyOutputs) {
  HidetCudaGraphHandle cg = nullptr;
  ASSERT_EQ(hidet_graph_cuda_graph_create(graph_, &cg), 0) << hidet_get_last_error();
  void* outputs[] = {y_, w_};
  // copying out with no launch before it is refused
  EXPECT_EQ(hidet_cuda_graph_copy_outputs(cg, outputs, 2, stream_), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("no launch before it"), std::string::npos);
  for (float start : {3.0f, -20.0f}) {  // the two halves give what run gives
    check_run(start, [&](const void* const* in, void* const* out) {
      int status = hidet_cuda_graph_launch(cg, in, 1, stream_);
      return status != 0 ? status : hidet_cuda_graph_copy_outputs(cg, out, 2, stream_);
    });
  }
  EXPECT_EQ(hidet_cuda_graph_copy_outputs(cg, outputs, 2, stream_), -1);  // each launch is copied out once
  EXPECT_EQ(hidet_cuda_graph_launch(cg, nullptr, 1, stream_), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("the array of inputs is NULL"), std::string::npos);
  ASSERT_EQ(hidet_cuda_graph_free(cg), 0);
}

TEST_F(GraphCuda, CudaGraphOutputsInOneBlock) {
  HidetCudaGraphHandle cg = nullptr;
  ASSERT_EQ(hidet_graph_cuda_graph_create(graph_, &cg), 0) << hidet_get_last_error();
  uint64_t offsets[2] = {1, 1}, nbytes = 0;
  ASSERT_EQ(hidet_cuda_graph_output_layout(cg, offsets, 2, &nbytes), 0) << hidet_get_last_error();
  EXPECT_EQ(offsets[0], 0u);
  EXPECT_EQ(offsets[1], 256u);  // 256-byte aligned
  EXPECT_EQ(nbytes, 512u);
  EXPECT_EQ(hidet_cuda_graph_output_layout(cg, offsets, 1, &nbytes), -1);
  // the outputs copied into one block, each at its offset
  void* block = nullptr;
  ASSERT_EQ(hidet_alloc(kGpu, nbytes, stream_, &block), 0);
  std::vector<float> x = range(7.0f), out(128);
  ASSERT_EQ(hidet_memcpy(x_, x.data(), 256, stream_), 0);
  const void* inputs[] = {x_};
  EXPECT_EQ(hidet_cuda_graph_copy_outputs_block(cg, block, stream_), -1);  // no launch before it
  ASSERT_EQ(hidet_cuda_graph_launch(cg, inputs, 1, stream_), 0) << hidet_get_last_error();
  EXPECT_EQ(hidet_cuda_graph_copy_outputs_block(cg, nullptr, stream_), -1);
  ASSERT_EQ(hidet_cuda_graph_copy_outputs_block(cg, block, stream_), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_memcpy(out.data(), block, 512, stream_), 0);
  ASSERT_EQ(hidet_stream_synchronize(stream_), 0);
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 64), x);
  EXPECT_EQ(std::vector<float>(out.begin() + 64, out.end()), range(1000.0f));
  ASSERT_EQ(hidet_free(kGpu, block), 0);
  ASSERT_EQ(hidet_cuda_graph_free(cg), 0);
}

TEST_F(GraphCuda, ArchTooNew) {
  std::string data = artifact(replace(kManifest, R"("arch": "sm_80")", R"("arch": "sm_990")"));
  HidetGraphHandle g = nullptr;
  ASSERT_EQ(hidet_graph_load_from_memory(data.data(), data.size(), "g.hidet", 0, &g), -1);
  std::string err = hidet_get_last_error();
  EXPECT_NE(err.find("artifact g.hidet was built for sm_990 but device 0 is sm_"), std::string::npos) << err;
  int32_t count = 0;
  ASSERT_EQ(hidet_cuda_device_count(&count), 0);
  ASSERT_EQ(hidet_graph_load_from_memory(data.data(), data.size(), "g.hidet", count, &g), -1);
  err = hidet_get_last_error();
  EXPECT_NE(err.find("cannot load onto cuda:" + std::to_string(count)), std::string::npos) << err;
}
