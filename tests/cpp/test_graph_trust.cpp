// Digest pinning (hidet_graph_load_pinned, hidet_sha256) and what a loaded graph describes of its validated
// manifest (hidet_graph_describe, hidet_graph_dim_expr): the C entry points Python's CompiledGraph reads
// instead of the raw manifest.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>
#include <unistd.h>

#include "artifact_writer.hpp"
#include "hidet/runtime.h"

using namespace hidet_test;

namespace {

const char* const kManifest = R"({
  "format_version": 2, "hidet_version": "0.1.0", "target": "cpu", "arch": "x86-64", "symbols": ["batch"],
  "inputs": [{"name": "x", "tensor": 0}],
  "outputs": [{"name": "y", "tensor": 1}],
  "tensors": [
    {"dtype": "float32", "shape": ["batch", 8], "storage": "input"},
    {"dtype": "float32", "shape": [["batch", 2, "*"], 4], "storage": "output"}
  ],
  "kernels": [{"library": "kernels/0.so", "function": "scale_rows"}],
  "instructions": [{"kernel": 0, "inputs": [0], "outputs": [1], "dims": [0]}],
  "arena_nbytes": 0, "weights_nbytes": 0
})";

std::string artifact() {
  return write_container({{"manifest.json", kManifest}, {"kernels/0.so", read_file(HIDET_TEST_GRAPH_KERNELS_PATH)}});
}

std::string sha256(const std::string& data) {
  char hex[65];
  EXPECT_EQ(hidet_sha256(data.data(), data.size(), hex), 0) << hidet_get_last_error();
  return hex;
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "'" << (text) << "' lacks '" << (part) << "'"

}  // namespace

TEST(Sha256, KnownDigests) {  // FIPS 180-2 examples
  EXPECT_EQ(sha256(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hidet_sha256(nullptr, 0, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "out_hex");
}

TEST(Pinning, LoadsOnlyThePinnedBytes) {
  std::string data = artifact();
  std::string digest = sha256(data);
  HidetGraphHandle g = nullptr;
  ASSERT_EQ(hidet_graph_load_from_memory_pinned(data.data(), data.size(), "m.hidet", 0, digest.c_str(), &g), 0)
      << hidet_get_last_error();
  hidet_graph_free(g);
  std::string upper = digest;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ASSERT_EQ(hidet_graph_load_from_memory_pinned(data.data(), data.size(), "m.hidet", 0, upper.c_str(), &g), 0)
      << hidet_get_last_error();
  hidet_graph_free(g);
  // NULL: no pinning.
  ASSERT_EQ(hidet_graph_load_from_memory_pinned(data.data(), data.size(), "m.hidet", 0, nullptr, &g), 0);
  hidet_graph_free(g);

  // A valid artifact, but another one: refused before anything of it is read.
  std::string other = data;
  other.back() ^= 1;  // the library's last byte: the container hash is now wrong too, but is never reached
  g = nullptr;
  EXPECT_EQ(hidet_graph_load_from_memory_pinned(other.data(), other.size(), "m.hidet", 0, digest.c_str(), &g), -1);
  EXPECT_EQ(g, nullptr);
  std::string error = hidet_get_last_error();
  EXPECT_CONTAINS(error, "artifact m.hidet: its SHA-256 is " + sha256(other) + ", expected " + digest);
  EXPECT_EQ(error.find("hash mismatch"), std::string::npos) << error;

  for (const char* bad : {"", "abc", "zz16bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015adzz",
                          " ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}) {
    EXPECT_EQ(hidet_graph_load_from_memory_pinned(data.data(), data.size(), "m.hidet", 0, bad, &g), -1) << bad;
    EXPECT_CONTAINS(hidet_get_last_error(), "is not 64 hex digits");
  }
}

TEST(Pinning, Files) {
  std::string data = artifact();
  std::string path = "/tmp/hidet_test_pinning_" + std::to_string(::getpid()) + ".hidet";
  write_file(path, data);
  HidetGraphHandle g = nullptr;
  ASSERT_EQ(hidet_graph_load_pinned(path.c_str(), 0, sha256(data).c_str(), &g), 0) << hidet_get_last_error();
  hidet_graph_free(g);
  std::string wrong(64, '0');
  EXPECT_EQ(hidet_graph_load_pinned(path.c_str(), 0, wrong.c_str(), &g), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "artifact " + path + ": its SHA-256 is " + sha256(data));
  std::remove(path.c_str());
  EXPECT_EQ(hidet_graph_load_pinned(path.c_str(), 0, wrong.c_str(), &g), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "cannot open artifact " + path);
}

TEST(Describe, TheValidatedManifest) {
  std::string data = artifact();
  HidetGraphHandle g = nullptr;
  ASSERT_EQ(hidet_graph_load_from_memory(data.data(), data.size(), "m.hidet", 0, &g), 0) << hidet_get_last_error();
  HidetGraphDescription d;
  ASSERT_EQ(hidet_graph_describe(g, &d), 0) << hidet_get_last_error();
  EXPECT_EQ(d.format_version, 2);
  EXPECT_STREQ(d.hidet_version, "0.1.0");
  EXPECT_STREQ(d.target, "cpu");
  EXPECT_STREQ(d.arch, "x86-64");
  EXPECT_EQ(d.num_kernels, 1);
  EXPECT_EQ(d.num_instructions, 1);
  EXPECT_EQ(d.arena_nbytes, 0u);
  EXPECT_EQ(d.weights_nbytes, 0u);
  EXPECT_EQ(std::string(d.manifest_json, d.manifest_nbytes), kManifest);

  const char* expr = nullptr;
  ASSERT_EQ(hidet_graph_dim_expr(g, 0, 0, 0, &expr), 0);
  EXPECT_STREQ(expr, "batch");
  ASSERT_EQ(hidet_graph_dim_expr(g, 0, 0, 1, &expr), 0);
  EXPECT_STREQ(expr, "8");
  ASSERT_EQ(hidet_graph_dim_expr(g, 1, 0, 0, &expr), 0);
  EXPECT_STREQ(expr, "batch 2 *");
  EXPECT_EQ(hidet_graph_dim_expr(g, 1, 0, 2, &expr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "output 0 ('y'): dimension 2 is out of range: it has 2");
  EXPECT_EQ(hidet_graph_dim_expr(g, 0, 1, 0, &expr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), "input index 1 is out of range");
  hidet_graph_free(g);
}

TEST(Validation, WrittenBeforeRead) {
  // x -> t (arena) -> y; the instructions in the wrong order read t before it is written.
  auto manifest = [](const std::string& instructions) {
    return R"({"format_version": 1, "target": "cpu", "arch": "x86-64",
      "inputs": [{"name": "x", "tensor": 0}], "outputs": [{"name": "y", "tensor": 2}],
      "tensors": [{"dtype": "float32", "shape": [8], "storage": "input"},
                  {"dtype": "float32", "shape": [8], "storage": "arena", "offset": 0},
                  {"dtype": "float32", "shape": [8], "storage": "output"},
                  {"dtype": "float32", "shape": [0], "storage": "arena", "offset": 0}],
      "kernels": [{"library": "kernels/0.so", "function": "scale"},
                  {"library": "kernels/0.so", "function": "scale_empty"}],
      "instructions": )" + instructions + R"(, "arena_nbytes": 256, "weights_nbytes": 0})";
  };
  auto load_error = [](const std::string& m) -> std::string {
    std::string data = write_container({{"manifest.json", m}, {"kernels/0.so", read_file(HIDET_TEST_GRAPH_KERNELS_PATH)}});
    HidetGraphHandle g = nullptr;
    if (hidet_graph_load_from_memory(data.data(), data.size(), "m.hidet", 0, &g) == 0) {
      hidet_graph_free(g);
      return "";
    }
    return hidet_get_last_error();
  };
  EXPECT_EQ(load_error(manifest(R"([{"kernel": 0, "inputs": [0], "outputs": [1]},
                                     {"kernel": 0, "inputs": [1], "outputs": [2]}])")), "");
  EXPECT_CONTAINS(load_error(manifest(R"([{"kernel": 0, "inputs": [1], "outputs": [2]},
                                          {"kernel": 0, "inputs": [0], "outputs": [1]}])")),
                  "artifact m.hidet: invalid manifest: instructions[0].inputs[0]: reads tensor 1 (storage 'arena') "
                  "before any instruction writes it");
  EXPECT_CONTAINS(load_error(manifest(R"([{"copy": 1, "to": 2}])")),
                  "instructions[0].copy: reads tensor 1 (storage 'arena') before any instruction writes it");
  // An empty static tensor needs no writer (the builder leaves such instructions out).
  EXPECT_EQ(load_error(manifest(R"([{"kernel": 0, "inputs": [0], "outputs": [1]},
                                     {"kernel": 1, "inputs": [1, 3], "outputs": [2]}])")), "");
}

TEST(Validation, KernelContract) {
  // Each instruction passes exactly what its kernel declared (hidet_signature_<name>): as many buffers, of
  // the declared dtypes and shapes, its symbolic dimensions bound to the symbols of the same names.
  auto load = [](const std::string& m, HidetGraphHandle* g) {
    std::string data = write_container({{"manifest.json", m}, {"kernels/0.so", read_file(HIDET_TEST_GRAPH_KERNELS_PATH)}});
    return hidet_graph_load_from_memory(data.data(), data.size(), "m.hidet", 0, g);
  };
  auto err = [&](const std::string& from, const std::string& to) -> std::string {
    HidetGraphHandle g = nullptr;
    std::string m = replace(kManifest, from, to);
    if (load(m, &g) == 0) {
      hidet_graph_free(g);
      return "(loaded) " + m;
    }
    return hidet_get_last_error();
  };
  const std::string at = "artifact m.hidet: instructions[0] (kernel 0 'scale_rows')";
  EXPECT_CONTAINS(err(R"("inputs": [0], "outputs": [1])", R"("inputs": [0, 0], "outputs": [1])"),
                  at + ": the kernel takes 2 buffers (inputs and outputs), the instruction passes 3");
  EXPECT_CONTAINS(err(R"({"dtype": "float32", "shape": ["batch", 8])", R"({"dtype": "int32", "shape": ["batch", 8])"),
                  at + ".inputs[0]: tensor 0 is int32, the kernel's buffer 0 is float32");
  EXPECT_CONTAINS(err(R"("shape": ["batch", 8])", R"("shape": ["batch", 8, 1])"),
                  at + ".inputs[0]: tensor 0 has 3 dimension(s) [batch, 8, 1], the kernel's buffer 0 has 2 [batch, 8]");
  EXPECT_CONTAINS(err(R"("shape": ["batch", 8])", R"("shape": ["batch", 9])"),
                  at + ".inputs[0]: tensor 0 has shape [batch, 9], the kernel's buffer 0 is [batch, 8]");
  EXPECT_CONTAINS(err(R"("outputs": [1], "dims": [0])", R"("outputs": [1])"),
                  at + ": the kernel takes 1 symbolic dimension(s), the instruction binds 0");
  // (the tensors' "batch" is now symbol 1; the instruction still binds symbol 0 to the kernel's batch)
  EXPECT_CONTAINS(err(R"("symbols": ["batch"])", R"("symbols": ["seq", "batch"])"),
                  at + ": dims[0] binds symbol 'seq' to the kernel's dimension 'batch'");
  EXPECT_CONTAINS(err(R"("inputs": [0], "outputs": [1])", R"("inputs": [1], "outputs": [1])"),
                  "instructions[0].inputs[0]: reads tensor 1 (storage 'output') before any instruction writes it");
  EXPECT_CONTAINS(err(R"("function": "scale_rows")", R"("function": "undeclared_kernel")"),
                  "kernels/0.so exports no kernel 'undeclared_kernel'");

  HidetGraphHandle g = nullptr;
  // A symbolic shape the kernel did not declare: found when the symbol values are first planned, before any
  // kernel runs.
  std::string wrong = replace(kManifest, R"([["batch", 2, "*"], 4])", R"([["batch", 3, "*"], 4])");
  ASSERT_EQ(load(wrong, &g), 0) << hidet_get_last_error();
  std::vector<float> x(16, 1.0f), y(24, 0.0f);
  const void* inputs[] = {x.data()};
  void* outputs[] = {y.data()};
  int64_t batch = 2;
  EXPECT_EQ(hidet_graph_run_dims(g, &batch, 1, inputs, 1, outputs, 1, nullptr), -1);
  EXPECT_CONTAINS(hidet_get_last_error(), at + ".outputs[0]: tensor 1 has shape [6, 4] at batch=2, the kernel's "
                                               "buffer 1 is [4, 4]");
  for (float v : y) EXPECT_EQ(v, 0.0f);  // nothing ran
  hidet_graph_free(g);
}
