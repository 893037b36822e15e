// Compiled graphs through the C API on the CPU: loading artifacts written here, running them (an
// arena intermediate, a weight, a copy), several graphs and threads at once, and every way loading
// or running can fail (never a crash).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "artifact_writer.hpp"
#include "hidet/runtime.h"
#include "hidet/runtime.hpp"

using namespace hidet_test;

namespace {

// x: input, w: weight, t = add(x, w) in the arena, y = scale(t), x_copy = copy of x.
const char* const kManifest = R"({
  "format_version": 1, "hidet_version": "0.1.0", "target": "cpu", "arch": "x86-64",
  "inputs": [{"name": "x", "tensor": 0}],
  "outputs": [{"name": "y", "tensor": 3}, {"name": "x_copy", "tensor": 4}],
  "tensors": [
    {"dtype": "float32", "shape": [8], "storage": "input"},
    {"dtype": "float32", "shape": [8], "storage": "weight", "offset": 0},
    {"dtype": "float32", "shape": [8], "storage": "arena", "offset": 0},
    {"dtype": "float32", "shape": [8], "storage": "output"},
    {"dtype": "float32", "shape": [2, 4], "storage": "output"}
  ],
  "kernels": [{"library": "kernels/0.so", "function": "add", "name": "add_weight"},
              {"library": "kernels/0.so", "function": "scale"}],
  "instructions": [
    {"kernel": 0, "inputs": [0, 1], "outputs": [2]},
    {"kernel": 1, "inputs": [2], "outputs": [3]},
    {"copy": 0, "to": 4}
  ],
  "arena_nbytes": 256, "weights_nbytes": 64, "search_space": 0
})";

std::vector<float> iota8(float start) {
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

std::string artifact(const std::string& manifest = kManifest, float weight_start = 100.0f) {
  return write_container({{"manifest.json", manifest},
                          {"weights.bin", float_bytes(iota8(weight_start), 64)},
                          {"kernels/0.so", read_file(HIDET_TEST_GRAPH_KERNELS_PATH)}});
}

// The error of loading `data`, or "" when it loads.
std::string load_error(const std::string& data, size_t size = std::string::npos) {
  HidetGraphHandle g = nullptr;
  if (hidet_graph_load_from_memory(data.data(), std::min(size, data.size()), "g.hidet", 0, &g) == 0) {
    hidet_graph_free(g);
    return "";
  }
  return hidet_get_last_error();
}

// Run `g` on x = iota8(x_start); check y = 2 (x + w) and x_copy = x.
void run_and_check(HidetGraphHandle g, float x_start, float weight_start) {
  std::vector<float> x = iota8(x_start), y(8, -1.0f), x_copy(8, -1.0f);
  const void* inputs[] = {x.data()};
  void* outputs[] = {y.data(), x_copy.data()};
  ASSERT_EQ(hidet_graph_run(g, inputs, 1, outputs, 2, nullptr), 0) << hidet_get_last_error();
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(y[i], 2.0f * (x[i] + weight_start + static_cast<float>(i))) << i;
    ASSERT_EQ(x_copy[i], x[i]) << i;
  }
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "'" << (text) << "' lacks '" << (part) << "'"

}  // namespace

TEST(GraphCpu, LoadsAndRuns) {
  std::string path = testing::TempDir() + "graph_" + std::to_string(::getpid()) + ".hidet";
  write_file(path, artifact());
  HidetGraphHandle g = nullptr;
  ASSERT_EQ(hidet_graph_load(path.c_str(), 0, &g), 0) << hidet_get_last_error();
  std::remove(path.c_str());  // the loaded graph needs the file no more

  DLDevice device;
  ASSERT_EQ(hidet_graph_device(g, &device), 0);
  EXPECT_EQ(device.device_type, kDLCPU);
  int32_t n = 0;
  ASSERT_EQ(hidet_graph_num_inputs(g, &n), 0);
  EXPECT_EQ(n, 1);
  ASSERT_EQ(hidet_graph_num_outputs(g, &n), 0);
  EXPECT_EQ(n, 2);
  HidetTensorInfo info;
  ASSERT_EQ(hidet_graph_input_info(g, 0, &info), 0);
  EXPECT_STREQ(info.name, "x");
  EXPECT_STREQ(info.dtype, "float32");
  ASSERT_EQ(info.ndim, 1);
  EXPECT_EQ(info.shape[0], 8);
  EXPECT_EQ(info.nbytes, 32u);
  ASSERT_EQ(hidet_graph_output_info(g, 1, &info), 0);
  EXPECT_STREQ(info.name, "x_copy");
  ASSERT_EQ(info.ndim, 2);
  EXPECT_EQ(info.shape[0], 2);
  EXPECT_EQ(info.shape[1], 4);
  EXPECT_EQ(hidet_graph_output_info(g, 2, &info), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "output index 2 is out of range");

  run_and_check(g, 1.0f, 100.0f);
  run_and_check(g, -5.0f, 100.0f);  // the arena is reused
  ASSERT_EQ(hidet_graph_free(g), 0);
}

TEST(GraphCpu, SeveralGraphsAtOnce) {
  // The same kernel library bytes loaded several times, each graph with its own weights.
  std::vector<HidetGraphHandle> graphs;
  for (int i = 0; i < 5; ++i) {
    std::string data = artifact(kManifest, 10.0f * i);
    HidetGraphHandle g = nullptr;
    ASSERT_EQ(hidet_graph_load_from_memory(data.data(), data.size(), nullptr, 0, &g), 0) << hidet_get_last_error();
    graphs.push_back(g);
  }
  for (int i = 0; i < 5; ++i) run_and_check(graphs[i], 1.0f, 10.0f * i);
  ASSERT_EQ(hidet_graph_free(graphs[2]), 0);  // freeing one leaves the others working
  for (int i : {0, 1, 3, 4}) run_and_check(graphs[i], 2.0f, 10.0f * i);
  for (int i : {0, 1, 3, 4}) ASSERT_EQ(hidet_graph_free(graphs[i]), 0);
}

TEST(GraphCpu, OneGraphManyThreads) {
  std::string data = artifact();
  HidetGraphHandle g = nullptr;
  ASSERT_EQ(hidet_graph_load_from_memory(data.data(), data.size(), nullptr, 0, &g), 0) << hidet_get_last_error();
  std::vector<std::thread> threads;
  std::vector<int> failures(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int iter = 0; iter < 500; ++iter) {
        std::vector<float> x = iota8(static_cast<float>(t * 1000 + iter)), y(8), x_copy(8);
        const void* inputs[] = {x.data()};
        void* outputs[] = {y.data(), x_copy.data()};
        if (hidet_graph_run(g, inputs, 1, outputs, 2, nullptr) != 0) ++failures[t];
        for (int i = 0; i < 8; ++i) {
          if (y[i] != 2.0f * (x[i] + 100.0f + static_cast<float>(i)) || x_copy[i] != x[i]) ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  ASSERT_EQ(hidet_graph_free(g), 0);
}

TEST(GraphErrors, RunArguments) {
  std::string data = artifact();
  HidetGraphHandle g = nullptr;
  ASSERT_EQ(hidet_graph_load_from_memory(data.data(), data.size(), nullptr, 0, &g), 0) << hidet_get_last_error();
  std::vector<float> x(8), y(8), z(8);
  const void* inputs[] = {x.data(), x.data()};
  void* outputs[] = {y.data(), z.data()};
  EXPECT_EQ(hidet_graph_run(g, inputs, 2, outputs, 2, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "the graph takes 1 input(s) (x), got 2");
  EXPECT_EQ(hidet_graph_run(g, inputs, 1, outputs, 1, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "the graph has 2 output(s) (y, x_copy), got 1");
  const void* null_input[] = {nullptr};
  EXPECT_EQ(hidet_graph_run(g, null_input, 1, outputs, 2, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "input 0 ('x'): null pointer");
  void* null_output[] = {y.data(), nullptr};
  EXPECT_EQ(hidet_graph_run(g, inputs, 1, null_output, 2, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "output 1 ('x_copy'): null pointer");
  EXPECT_EQ(hidet_graph_run(g, nullptr, 1, outputs, 2, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "the array of inputs is NULL");
  EXPECT_EQ(hidet_graph_run(nullptr, inputs, 1, outputs, 2, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "argument 'graph' is NULL");

  HidetCudaGraphHandle cg = nullptr;
  EXPECT_EQ(hidet_graph_cuda_graph_create(g, &cg), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "was built for the CPU; CUDA graphs need a graph built for CUDA");
  EXPECT_EQ(cg, nullptr);
  ASSERT_EQ(hidet_graph_free(g), 0);
}

TEST(GraphErrors, FailingKernel) {
  std::string data = artifact(replace(kManifest, R"("function": "scale")", R"("function": "broken")"));
  HidetGraphHandle g = nullptr;
  ASSERT_EQ(hidet_graph_load_from_memory(data.data(), data.size(), "g.hidet", 0, &g), 0) << hidet_get_last_error();
  std::vector<float> x(8), y(8), z(8);
  const void* inputs[] = {x.data()};
  void* outputs[] = {y.data(), z.data()};
  EXPECT_EQ(hidet_graph_run(g, inputs, 1, outputs, 2, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "artifact g.hidet: instruction 1 (kernel 'broken')");
  EXPECT_CONTAINS(hidet_get_last_error(), "broken: this kernel always fails");
  ASSERT_EQ(hidet_graph_free(g), 0);
}

TEST(GraphErrors, Container) {
  EXPECT_CONTAINS(load_error("hello, not an artifact at all"), "artifact g.hidet is not a hidet artifact (bad magic");
  EXPECT_CONTAINS(load_error(""), "is not a hidet artifact");
  std::string data = artifact();
  std::string v7 = data;
  v7[8] = 7;
  EXPECT_CONTAINS(load_error(v7), "artifact g.hidet has container version 7; this runtime reads version 1");
  HidetGraphHandle g = nullptr;
  EXPECT_EQ(hidet_graph_load("/nonexistent/model.hidet", 0, &g), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "cannot open artifact /nonexistent/model.hidet");
  EXPECT_EQ(hidet_graph_load_from_memory(nullptr, 10, nullptr, 0, &g), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "the buffer is NULL");
}

TEST(GraphErrors, EveryTruncationFails) {
  // A small artifact: copies only, no kernel library.
  const char* manifest = R"({"format_version": 1, "target": "cpu", "arch": "x86-64",
    "inputs": [{"name": "x", "tensor": 0}], "outputs": [{"name": "y", "tensor": 1}, {"name": "w", "tensor": 3}],
    "tensors": [{"dtype": "int32", "shape": [3], "storage": "input"}, {"dtype": "int32", "shape": [3], "storage": "output"},
                {"dtype": "int32", "shape": [3], "storage": "weight", "offset": 0},
                {"dtype": "int32", "shape": [3], "storage": "output"}],
    "kernels": [], "instructions": [{"copy": 0, "to": 1}, {"copy": 2, "to": 3}],
    "arena_nbytes": 0, "weights_nbytes": 12})";
  std::string data = write_container({{"manifest.json", manifest}, {"weights.bin", std::string(12, '\x07')}});
  HidetGraphHandle g = nullptr;
  ASSERT_EQ(hidet_graph_load_from_memory(data.data(), data.size(), nullptr, 0, &g), 0) << hidet_get_last_error();
  int32_t x[3] = {1, 2, 3}, y[3] = {0, 0, 0}, w[3] = {0, 0, 0};
  const void* inputs[] = {x};
  void* outputs[] = {y, w};
  ASSERT_EQ(hidet_graph_run(g, inputs, 1, outputs, 2, nullptr), 0) << hidet_get_last_error();
  EXPECT_EQ(y[2], 3);
  EXPECT_EQ(w[2], 0x07070707);
  ASSERT_EQ(hidet_graph_free(g), 0);

  for (size_t cut = 0; cut < data.size(); ++cut) {
    std::string err = load_error(data, cut);
    ASSERT_TRUE(err.find("is truncated") != std::string::npos || err.find("not a hidet artifact") != std::string::npos)
        << "cut at " << cut << ": '" << err << "'";
  }
  EXPECT_CONTAINS(load_error(data, data.size() - 1),
                  "artifact g.hidet is truncated: entry weights.bin ends at byte " + std::to_string(data.size()) +
                      " but the file has " + std::to_string(data.size() - 1) + " bytes");
}

TEST(GraphErrors, FlippedBytes) {
  std::string data = artifact();
  size_t manifest_at = data.find("{\n  \"format_version\"");
  ASSERT_NE(manifest_at, std::string::npos);
  size_t manifest_end = manifest_at + std::string(kManifest).size();
  // Every byte of the entry table and of the manifest: always an error.
  for (size_t i = 0; i < manifest_end; ++i) {
    if (i >= 16 + 3 * 28 + 36 && i < manifest_at) continue;  // padding before the first entry
    std::string bad = data;
    bad[i] ^= 0x5A;
    ASSERT_NE(load_error(bad), "") << "flipping byte " << i << " went unnoticed";
  }
  std::string bad = data;
  bad[manifest_at + 3] ^= 1;
  EXPECT_CONTAINS(load_error(bad), "artifact g.hidet is corrupt: hash mismatch in manifest.json");
  bad = data;
  bad[data.size() - 100] ^= 1;
  EXPECT_CONTAINS(load_error(bad), "artifact g.hidet is corrupt: hash mismatch in kernels/0.so");
}

// Bytes a process has just built without entry hashes (hidet.runtime.artifact.write(..., hashes=False)) load
// through hidet_graph_load_built, which checks everything but the hashes; hidet_graph_load_from_memory checks them.
TEST(GraphCpu, BuiltBytesLoadWithoutHashes) {
  std::string data = artifact();
  uint32_t count = 0;
  std::memcpy(&count, data.data() + 12, 4);
  for (uint32_t i = 0, pos = 16; i < count; ++i) {
    uint32_t n = 0;
    std::memcpy(&n, data.data() + pos, 4);
    std::memset(&data[pos + 4 + n + 16], 0, 8);  // the entry's hash
    pos += 4 + n + 24;
  }
  EXPECT_CONTAINS(load_error(data), "artifact g.hidet is corrupt: hash mismatch in manifest.json");
  HidetGraphHandle g = nullptr;
  ASSERT_EQ(hidet_graph_load_built(data.data(), data.size(), "g.hidet", 0, &g), 0) << hidet_get_last_error();
  run_and_check(g, 1.0f, 100.0f);
  hidet_graph_free(g);
  std::string truncated = data.substr(0, data.size() - 1);  // the rest is checked as always
  EXPECT_EQ(hidet_graph_load_built(truncated.data(), truncated.size(), "g.hidet", 0, &g), -1);
  EXPECT_CONTAINS(std::string(hidet_get_last_error()), "is truncated");
}

TEST(GraphErrors, Manifest) {
  auto err = [](const std::string& from, const std::string& to) { return load_error(artifact(replace(kManifest, from, to))); };
  EXPECT_CONTAINS(err(R"("format_version": 1)", R"("format_version": 7)"),
                  "artifact g.hidet was written by format version 7; this runtime reads versions 1 to 2");
  std::string json_error = err(R"("inputs": [0, 1])", R"("inputs": [0, 1,])");
  EXPECT_CONTAINS(json_error, "artifact g.hidet: manifest.json is not valid JSON: ");
  EXPECT_CONTAINS(json_error, "at byte ");
  EXPECT_CONTAINS(err(R"("inputs": [0, 1])", R"("inputs": [0, 100])"),
                  "artifact g.hidet: invalid manifest: instructions[0].inputs[1]: tensor id 100 is out of range "
                  "(the manifest has 5 tensors)");
  EXPECT_CONTAINS(err(R"({"name": "x", "tensor": 0})", R"({"name": "x", "tensor": -1})"), "tensor id -1 is out of range");
  EXPECT_CONTAINS(err(R"("dtype": "float32", "shape": [8], "storage": "input")",
                      R"("dtype": "float8", "shape": [8], "storage": "input")"),
                  "tensors[0].dtype: unknown dtype 'float8'");
  EXPECT_CONTAINS(err(R"("storage": "input")", R"("storage": "host")"), "tensors[0].storage: unknown storage 'host'");
  EXPECT_CONTAINS(err(R"("storage": "weight", "offset": 0)", R"("storage": "weight", "offset": 64)"),
                  "tensors[1]: weight bytes [64, 96) lie outside weights_nbytes (64)");
  EXPECT_CONTAINS(err(R"("arena_nbytes": 256)", R"("arena_nbytes": 16)"), "arena bytes [0, 32) lie outside arena_nbytes");
  EXPECT_CONTAINS(err(R"("arena_nbytes": 256)", R"("arena_nbytes": 1099511627776)"),
                  "arena_nbytes: 1099511627776 is more than the arena tensors need (256 bytes)");
  EXPECT_CONTAINS(err(R"("storage": "arena", "offset": 0)", R"("storage": "arena", "offset": 8)"),
                  "tensors[2].offset: 8 is not a multiple of 256");
  EXPECT_CONTAINS(err(R"("weights_nbytes": 64)", R"("weights_nbytes": 128)"),
                  "weights.bin has 64 bytes but the manifest's weights_nbytes is 128");
  EXPECT_CONTAINS(err(R"({"name": "x_copy", "tensor": 4})", R"({"name": "x_copy", "tensor": 3})"),
                  "outputs[1]: tensor 3 is listed twice");
  EXPECT_CONTAINS(err(R"(, {"name": "x_copy", "tensor": 4}])", "]"),
                  "tensors[4]: has storage 'output' but is not listed in \"outputs\"");
  EXPECT_CONTAINS(err(R"({"name": "x", "tensor": 0})", R"({"name": "x", "tensor": 1})"),
                  "inputs[0]: tensor 1 has storage 'weight', expected 'input'");
  EXPECT_CONTAINS(err(R"({"copy": 0, "to": 4})", R"({"copy": 0, "to": 1})"),
                  "instructions[2]: writes tensor 1, which has storage 'weight' (read-only)");
  EXPECT_CONTAINS(err(R"({"copy": 0, "to": 4})", R"({"copy": 0, "to": 2})"),
                  "outputs[1]: output 'x_copy' (tensor 4) is never written");
  EXPECT_CONTAINS(err(R"({"kernel": 1,)", R"({"kernel": 2,)"), "instructions[1].kernel: 2 is out of range [0, 1]");
  EXPECT_CONTAINS(err(R"("shape": [8], "storage": "input")", R"("shape": ["n"], "storage": "input")"),
                  "tensors[0].shape[0]: symbolic dimension 'n' needs format version 2 and a \"symbols\" list");
  EXPECT_CONTAINS(err(R"("format_version": 1)", R"("format_version": 1, "symbols": ["n"])"),
                  "symbols: symbolic dimensions need format version 2");
  EXPECT_CONTAINS(err(R"("library": "kernels/0.so", "function": "add")", R"("library": "kernels/9.so", "function": "add")"),
                  "kernels[0]: library kernels/9.so is not in the artifact");
  EXPECT_CONTAINS(err(R"("function": "add")", R"("function": "mul")"),
                  "artifact g.hidet: kernel 0 ('add_weight'): kernels/0.so exports no kernel 'mul'");
  EXPECT_CONTAINS(err(R"("target": "cpu", "arch": "x86-64")", R"("target": "cpu", "arch": "aarch64")"),
                  "was built for cpu aarch64 but this machine is x86-64");
  EXPECT_CONTAINS(err(R"("target": "cpu")", R"("target": "tpu")"), "target: unknown target 'tpu'");
  EXPECT_CONTAINS(err(R"("target": "cpu",)", ""), "invalid manifest: (top level): missing \"target\"");
  EXPECT_CONTAINS(load_error(write_container({{"weights.bin", ""}})), "artifact g.hidet has no manifest.json entry");
  std::string not_a_library = write_container({{"manifest.json", kManifest},
                                               {"weights.bin", float_bytes(iota8(0), 64)},
                                               {"kernels/0.so", "not an ELF file"}});
  EXPECT_CONTAINS(load_error(not_a_library), "artifact g.hidet: cannot load kernel library kernels/0.so (of kernel 0 "
                                             "'add_weight'): not a loadable shared library: not an ELF file");
}

TEST(GraphErrors, CudaArtifactWithoutGpu) {
  int32_t count = 0;
  ASSERT_EQ(hidet_cuda_device_count(&count), 0);
  if (count > 0) GTEST_SKIP() << "a CUDA device is present";
  std::string err = load_error(artifact(replace(kManifest, R"("target": "cpu", "arch": "x86-64")",
                                                R"("target": "cuda", "arch": "sm_90")")));
  EXPECT_CONTAINS(err, "artifact g.hidet was built for cuda sm_90 but no CUDA device is available: CUDA is not available");
}

// ---------------------------------------------------------------- DLPack tensors and the C++ wrapper

namespace {

DLTensor cpu_tensor(std::vector<float>& v, std::vector<int64_t>& shape) {
  return hidet::rt::make_dl_tensor(v.data(), shape, DLDataType{kDLFloat, 32, 1});
}

}  // namespace

TEST(GraphTensors, RunChecksEveryTensor) {
  std::string data = artifact();
  hidet::rt::Graph g(data.data(), data.size(), "g.hidet");
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.inputs()[0].name, "x");
  EXPECT_EQ(g.outputs()[1].shape, (std::vector<int64_t>{2, 4}));
  std::vector<float> x = iota8(1.0f), y(8), x_copy(8);
  std::vector<int64_t> s8{8}, s24{2, 4}, s9{9};
  g.run({cpu_tensor(x, s8)}, {cpu_tensor(y, s8), cpu_tensor(x_copy, s24)});
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(y[i], 2.0f * (x[i] + 100.0f + static_cast<float>(i)));
    EXPECT_EQ(x_copy[i], x[i]);
  }

  auto error_of = [&](std::vector<DLTensor> inputs, std::vector<DLTensor> outputs) -> std::string {
    try {
      g.run(inputs, outputs);
    } catch (const hidet::rt::Error& e) {
      return e.what();
    }
    return "";
  };
  DLTensor good_x = cpu_tensor(x, s8), good_y = cpu_tensor(y, s8), good_c = cpu_tensor(x_copy, s24);
  EXPECT_CONTAINS(error_of({}, {good_y, good_c}), "the graph takes 1 input(s) (x), got 0");
  EXPECT_CONTAINS(error_of({good_x}, {good_y}), "the graph has 2 output(s) (y, x_copy), got 1");

  DLTensor t = good_x;
  t.dtype = DLDataType{kDLFloat, 16, 1};
  EXPECT_CONTAINS(error_of({t}, {good_y, good_c}), "input 0 ('x'): dtype float16, expected float32");
  t = good_x;
  t.shape = s9.data();
  EXPECT_CONTAINS(error_of({t}, {good_y, good_c}), "input 0 ('x'): shape [9], expected [8]");
  t = good_c;
  t.shape = s8.data();
  t.ndim = 1;
  EXPECT_CONTAINS(error_of({good_x}, {good_y, t}), "output 1 ('x_copy'): shape [8], expected [2, 4]");
  t = good_x;
  t.device = DLDevice{kDLCUDA, 0};
  EXPECT_CONTAINS(error_of({t}, {good_y, good_c}), "input 0 ('x'): the tensor is on cuda:0 but the graph runs on cpu");
  t = good_x;
  t.data = nullptr;
  EXPECT_CONTAINS(error_of({t}, {good_y, good_c}), "input 0 ('x'): null data pointer");
  std::vector<int64_t> strides{1, 2};
  t = good_c;
  t.strides = strides.data();
  EXPECT_CONTAINS(error_of({good_x}, {good_y, t}), "output 1 ('x_copy'): the tensor is not contiguous (strides [1, 2])");
  std::vector<int64_t> compact{4, 1};
  t.strides = compact.data();
  EXPECT_EQ(error_of({good_x}, {good_y, t}), "");  // explicit compact strides are fine

  // byte_offset is honoured: x viewed from its second element.
  std::vector<float> padded = iota8(0.0f);
  padded.insert(padded.begin(), -1.0f);
  t = cpu_tensor(padded, s8);
  t.byte_offset = sizeof(float);
  EXPECT_EQ(error_of({t}, {good_y, good_c}), "");
  EXPECT_EQ(x_copy[0], 0.0f);
  EXPECT_EQ(x_copy[7], 7.0f);
}

TEST(GraphTensors, RuntimeAllocatedOutputs) {
  std::string data = artifact();
  hidet::rt::Graph g(data.data(), data.size(), "g.hidet");
  std::vector<float> x = iota8(3.0f);
  std::vector<int64_t> s8{8};
  for (int iter = 0; iter < 3; ++iter) {
    std::vector<hidet::rt::Tensor> out = g.run({cpu_tensor(x, s8)});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0]->device.device_type, kDLCPU);
    EXPECT_EQ(out[0]->dtype.code, kDLFloat);
    ASSERT_EQ(out[1]->ndim, 2);
    EXPECT_EQ(out[1]->shape[1], 4);
    EXPECT_EQ(out[1].nbytes(), 32u);
    const float* y = static_cast<const float*>(out[0]->data);
    const float* c = static_cast<const float*>(out[1]->data);
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(y[i], 2.0f * (x[i] + 100.0f + static_cast<float>(i)));
      EXPECT_EQ(c[i], x[i]);
    }
  }
  // A failing run hands out nothing.
  HidetGraphHandle h = g.handle();
  DLManagedTensor* outs[2] = {reinterpret_cast<DLManagedTensor*>(1), reinterpret_cast<DLManagedTensor*>(1)};
  std::vector<int64_t> s9{9};
  DLTensor bad = cpu_tensor(x, s9);
  EXPECT_EQ(hidet_graph_run_alloc(h, &bad, 1, outs, 2, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "input 0 ('x'): shape [9], expected [8]");
  EXPECT_EQ(outs[0], nullptr);
  EXPECT_EQ(outs[1], nullptr);
  DLTensor good = cpu_tensor(x, s8);
  EXPECT_EQ(hidet_graph_run_alloc(h, &good, 1, outs, 1, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "the graph has 2 output(s), got room for 1");
}

TEST(GraphTensors, DtypeNames) {
  DLDataType t;
  ASSERT_EQ(hidet_dtype_to_dl("bfloat16", &t), 0);
  EXPECT_EQ(t.code, kDLBfloat);
  EXPECT_EQ(t.bits, 16);
  EXPECT_EQ(hidet::rt::dtype_from_name("bool").code, kDLBool);
  EXPECT_THROW(hidet::rt::dtype_from_name("float8"), hidet::rt::Error);
  EXPECT_CONTAINS(hidet_get_last_error(), "unknown dtype 'float8'");
}

TEST(GraphTensors, LoadErrorsThroughTheWrapper) {
  try {
    hidet::rt::Graph g("/nonexistent/model.hidet");
    FAIL() << "loaded a missing file";
  } catch (const hidet::rt::Error& e) {
    EXPECT_CONTAINS(e.what(), "/nonexistent/model.hidet");
  }
}
