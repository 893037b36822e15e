// Kernel libraries of artifacts are loaded once per content, shared by the graphs using them and
// unloaded with the last one; load/run/free cycles keep the process's memory mappings and resident
// memory flat. The kernel library runs an OpenMP parallel region, so unloading it while OpenMP's
// worker threads live on is exercised too (the OpenMP runtime itself stays, pinned on purpose).
//
// HIDET_LEAK_CYCLES=10000 runs the long version of LoadRunFreeCyclesStayFlat (default 300).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "artifact_writer.hpp"
#include "hidet/runtime.h"

using namespace hidet_test;

namespace {

// y = 2 (x + w) through an arena tensor; kernel 'add' runs an OpenMP parallel region.
const char* const kManifest = R"({
  "format_version": 1, "hidet_version": "0.1.0", "target": "cpu", "arch": "x86-64",
  "inputs": [{"name": "x", "tensor": 0}],
  "outputs": [{"name": "y", "tensor": 3}],
  "tensors": [
    {"dtype": "float32", "shape": [8], "storage": "input"},
    {"dtype": "float32", "shape": [8], "storage": "weight", "offset": 0},
    {"dtype": "float32", "shape": [8], "storage": "arena", "offset": 0},
    {"dtype": "float32", "shape": [8], "storage": "output"}
  ],
  "kernels": [{"library": "kernels/0.so", "function": "add"}, {"library": "kernels/0.so", "function": "FUNCTION"}],
  "instructions": [{"kernel": 0, "inputs": [0, 1], "outputs": [2]}, {"kernel": 1, "inputs": [2], "outputs": [3]}],
  "arena_nbytes": 256, "weights_nbytes": 64
})";

std::string artifact(float weight, const std::string& function = "scale") {
  std::vector<float> w(8, weight);
  return write_container({{"manifest.json", replace(kManifest, "FUNCTION", function)},
                          {"weights.bin", float_bytes(w, 64)},
                          {"kernels/0.so", read_file(HIDET_TEST_GRAPH_KERNELS_PATH)}});
}

HidetGraphHandle load(const std::string& data) {
  HidetGraphHandle g = nullptr;
  EXPECT_EQ(hidet_graph_load_from_memory(data.data(), data.size(), "leak.hidet", 0, &g), 0) << hidet_get_last_error();
  return g;
}

// 0 when y = 2 (x + weight), else -1 (the run failed or the result is wrong).
int run(HidetGraphHandle g, float weight) {
  std::vector<float> x(8), y(8, -1.0f);
  for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(i);
  const void* inputs[] = {x.data()};
  void* outputs[] = {y.data()};
  if (hidet_graph_run(g, inputs, 1, outputs, 1, nullptr) != 0) return -1;
  for (int i = 0; i < 8; ++i) {
    if (y[i] != 2.0f * (x[i] + weight)) return -1;
  }
  return 0;
}

// Lines of /proc/self/maps (all of them, or those naming `part`).
int mappings(const char* part = nullptr) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) n += part == nullptr || line.find(part) != std::string::npos;
  return n;
}

// Resident memory in KiB (VmRSS of /proc/self/status).
long rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// The mappings of artifacts' kernel libraries: memory files (or temporary files) named hidet-kernels.
int library_mappings() { return mappings("hidet-kernels"); }

}  // namespace

TEST(KernelLibraries, SharedByGraphsWithTheSameBytes) {
  ASSERT_EQ(library_mappings(), 0);
  HidetGraphHandle first = load(artifact(1.0f));
  int one = library_mappings();
  ASSERT_GT(one, 0);
  std::vector<HidetGraphHandle> more;
  for (int i = 0; i < 4; ++i) more.push_back(load(artifact(10.0f * i)));  // other weights, the same library
  EXPECT_EQ(library_mappings(), one) << "five graphs with one kernel library should map it once";
  ASSERT_EQ(run(first, 1.0f), 0);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(run(more[i], 10.0f * i), 0);
  ASSERT_EQ(hidet_graph_free(first), 0);
  EXPECT_EQ(library_mappings(), one);  // still used by the others
  for (int i = 0; i < 4; ++i) ASSERT_EQ(run(more[i], 10.0f * i), 0);
  for (HidetGraphHandle g : more) ASSERT_EQ(hidet_graph_free(g), 0);
  EXPECT_EQ(library_mappings(), 0) << "the library stays mapped after its last graph was freed";
}

TEST(KernelLibraries, SharedAcrossThreads) {
  // Threads loading, running and freeing graphs of one library at once: one copy at a time, never two
  // graphs' kernels in a library being unloaded.
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string data = artifact(static_cast<float>(t));
      for (int i = 0; i < 50; ++i) {
        HidetGraphHandle g = nullptr;
        if (hidet_graph_load_from_memory(data.data(), data.size(), nullptr, 0, &g) != 0) {
          ++failures[t];
          continue;
        }
        failures[t] += run(g, static_cast<float>(t)) != 0;
        failures[t] += hidet_graph_free(g) != 0;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
  EXPECT_EQ(library_mappings(), 0);
}

TEST(KernelLibraries, UnloadedAfterAFailingKernel) {
  // A kernel's error message lives in a thread_local of its library: one with a destructor would keep
  // the library loaded until the thread exits.
  HidetGraphHandle g = load(artifact(0.0f, "broken"));
  ASSERT_EQ(run(g, 0.0f), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("broken: this kernel always fails"), std::string::npos);
  ASSERT_EQ(hidet_graph_free(g), 0);
  EXPECT_EQ(library_mappings(), 0);
}

TEST(KernelLibraries, LoadRunFreeCyclesStayFlat) {
  const char* env = std::getenv("HIDET_LEAK_CYCLES");
  const int cycles = env && *env ? std::atoi(env) : 300;
  std::string data = artifact(3.0f);
  // Warm up: the OpenMP runtime, its threads, the memory pool and malloc's arenas settle first.
  for (int i = 0; i < 20; ++i) {
    HidetGraphHandle g = load(data);
    ASSERT_EQ(run(g, 3.0f), 0);
    ASSERT_EQ(hidet_graph_free(g), 0);
  }
  const int maps_before = mappings();
  const long rss_before = rss_kib();
  int maps_max = maps_before;
  for (int i = 0; i < cycles; ++i) {
    HidetGraphHandle g = load(data);
    ASSERT_NE(g, nullptr) << "cycle " << i;
    ASSERT_EQ(run(g, 3.0f), 0) << "cycle " << i;
    ASSERT_EQ(hidet_graph_free(g), 0);
    if (i % 100 == 0) maps_max = std::max(maps_max, mappings());
  }
  const int maps_after = mappings();
  const long rss_after = rss_kib();
  std::cout << "[leak] " << cycles << " load/run/free cycles: mappings " << maps_before << " -> " << maps_after
            << " (max " << maps_max << "), RSS " << rss_before << " KiB -> " << rss_after << " KiB ("
            << (rss_after - rss_before) << " KiB)" << std::endl;
  EXPECT_LE(maps_after, maps_before) << "memory mappings grew";
  EXPECT_LE(maps_max, maps_before + 4) << "memory mappings grew during the cycles";
  EXPECT_LT(rss_after - rss_before, 1024) << "resident memory grew by more than 1 MiB";
  EXPECT_EQ(library_mappings(), 0);
}
