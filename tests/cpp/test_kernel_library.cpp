// Kernel libraries through the C++ API and the C API, with the libraries built from
// test_kernels.cpp and test_bad_abi.cpp.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "hidet/runtime.h"
#include "hidet/runtime/error.hpp"
#include "hidet/runtime/kernel_library.hpp"

using hidet::KernelLibrary;

namespace {

const std::string kKernels = HIDET_TEST_KERNELS_PATH;
const std::string kBadAbi = HIDET_TEST_BAD_ABI_PATH;

// The message of the hidet::Error that `fn` throws ("" when it throws none).
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const hidet::Error& e) {
    return e.what();
  }
  return "";
}

std::vector<float> random_floats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A file that exists but is not a shared object.
std::string write_text_file() {
  std::string path = testing::TempDir() + "hidet_not_a_library.so";
  std::ofstream(path) << "this is not an ELF file\n";
  return path;
}

}  // namespace

TEST(KernelLibrary, LaunchVectorAdd) {
  auto lib = KernelLibrary::load(kKernels);
  EXPECT_EQ(lib->path(), kKernels);
  EXPECT_TRUE(lib->has_kernel("vector_add"));
  EXPECT_FALSE(lib->has_kernel("no_such_kernel"));
  hidet::Kernel kernel = lib->get_kernel("vector_add");
  EXPECT_EQ(kernel.name(), "vector_add");

  const size_t n = 1000;
  std::vector<float> a = random_floats(n, 1), b = random_floats(n, 2), out(n, 0.0f);
  kernel.launch({a.data(), b.data(), out.data()}, {static_cast<int64_t>(n)}, nullptr);
  for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(out[i], a[i] + b[i]) << i;
}

TEST(KernelLibrary, OnlyItsOwnKernels) {
  // dlsym also finds the library's dependencies' symbols: a manifest naming libc's "abort" must not launch it
  auto lib = KernelLibrary::load(kKernels);
  for (const char* name : {"abort", "malloc", "hidet_kernel_abi_version", "hidet_kernel_last_error",
                           "hidet_signature_vector_add"}) {
    EXPECT_FALSE(lib->has_kernel(name)) << name;
    std::string msg = error_of([&] { lib->get_kernel(name); });
    EXPECT_EQ(msg.rfind(kKernels + " exports no kernel '" + name + "' (the name is one of its dependencies' or "
                        "its own bookkeeping, not a kernel)", 0), 0u) << msg;
  }
}

TEST(KernelLibrary, OnlyDeclaredKernels) {
  // A function the library defines but does not declare (no hidet_signature_<name>) is not one of its kernels.
  auto lib = KernelLibrary::load(kKernels);
  EXPECT_FALSE(lib->has_kernel("undeclared"));
  std::string msg = error_of([&] { lib->get_kernel("undeclared"); });
  EXPECT_EQ(msg.rfind(kKernels + " does not declare kernel 'undeclared': it exports no hidet_signature_undeclared", 0),
            0u) << msg;
  // A declared kernel carries its signature.
  EXPECT_NE(lib->get_kernel("vector_add").signature().find(R"("dims": ["n"])"), std::string::npos);
}

TEST(KernelLibrary, MissingFile) {
  std::string msg = error_of([] { KernelLibrary::load("/nonexistent/libkernels.so"); });
  EXPECT_EQ(msg, "kernel library not found: /nonexistent/libkernels.so");
}

TEST(KernelLibrary, NotALibrary) {
  std::string path = write_text_file();
  std::string msg = error_of([&] { KernelLibrary::load(path); });
  EXPECT_EQ(msg.rfind("cannot load kernel library " + path + ": ", 0), 0u) << msg;
  std::remove(path.c_str());
}

TEST(KernelLibrary, SharedObjectWithoutAbiVersion) {
  // Any shared object that is no kernel library: the C library itself.
  std::string msg = error_of([] { KernelLibrary::load("/lib/x86_64-linux-gnu/libm.so.6"); });
  if (msg.rfind("kernel library not found", 0) == 0) GTEST_SKIP() << "no libm.so.6 at the usual path";
  EXPECT_NE(msg.find("is not a hidet kernel library: it exports no hidet_kernel_abi_version"), std::string::npos)
      << msg;
}

TEST(KernelLibrary, WrongAbiVersion) {
  std::string msg = error_of([] { KernelLibrary::load(kBadAbi); });
  EXPECT_EQ(msg, kBadAbi + " was built for kernel ABI version " + std::to_string(HIDET_KERNEL_ABI_VERSION + 998) +
                     ", this runtime expects " + std::to_string(HIDET_KERNEL_ABI_VERSION) +
                     "; rebuild it (clear the hidet cache)");
}

TEST(KernelLibrary, MissingKernel) {
  auto lib = KernelLibrary::load(kKernels);
  std::string msg = error_of([&] { lib->get_kernel("matmul_f16"); });
  EXPECT_EQ(msg, kKernels + " exports no kernel 'matmul_f16'");
}

TEST(KernelLibrary, FailingKernelCarriesItsMessage) {
  auto lib = KernelLibrary::load(kKernels);
  hidet::Kernel kernel = lib->get_kernel("always_fails");
  std::string msg = error_of([&] { kernel.launch({}, {}, nullptr); });
  EXPECT_EQ(msg, "kernel 'always_fails' (" + kKernels + ") failed with code 3: always_fails: this kernel refuses to run");
}

TEST(KernelLibrary, KernelKeepsLibraryLoaded) {
  hidet::Kernel kernel = KernelLibrary::load(kKernels)->get_kernel("vector_add");
  float a[2] = {1, 2}, b[2] = {10, 20}, out[2] = {0, 0};
  kernel.launch({a, b, out}, {2}, nullptr);
  EXPECT_EQ(out[1], 22.0f);
}

// ---------------------------------------------------------------- the C API

TEST(KernelLibraryCApi, LoadLaunchFree) {
  HidetKernelLibraryHandle lib = nullptr;
  ASSERT_EQ(hidet_library_load(kKernels.c_str(), &lib), 0) << hidet_get_last_error();
  HidetKernelHandle kernel = nullptr;
  ASSERT_EQ(hidet_library_get_kernel(lib, "vector_add", &kernel), 0) << hidet_get_last_error();

  const int64_t n = 257;
  std::vector<float> a = random_floats(n, 3), b = random_floats(n, 4), out(n, 0.0f);
  void* buffers[] = {a.data(), b.data(), out.data()};
  ASSERT_EQ(hidet_kernel_launch(kernel, buffers, 3, &n, 1, nullptr), 0) << hidet_get_last_error();
  for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(out[i], a[i] + b[i]) << i;
  const char* signature = nullptr;
  ASSERT_EQ(hidet_kernel_signature(kernel, &signature), 0) << hidet_get_last_error();
  EXPECT_NE(std::string(signature).find(R"({"dtype": "float32", "shape": ["n"]})"), std::string::npos) << signature;

  EXPECT_EQ(hidet_kernel_free(kernel), 0);
  EXPECT_EQ(hidet_library_free(lib), 0);
}

TEST(KernelLibraryCApi, KernelOutlivesLibraryHandle) {
  HidetKernelLibraryHandle lib = nullptr;
  ASSERT_EQ(hidet_library_load(kKernels.c_str(), &lib), 0) << hidet_get_last_error();
  HidetKernelHandle kernel = nullptr;
  ASSERT_EQ(hidet_library_get_kernel(lib, "vector_add", &kernel), 0) << hidet_get_last_error();
  ASSERT_EQ(hidet_library_free(lib), 0);

  float a[3] = {1, 2, 3}, b[3] = {4, 5, 6}, out[3] = {};
  void* buffers[] = {a, b, out};
  int64_t n = 3;
  ASSERT_EQ(hidet_kernel_launch(kernel, buffers, 3, &n, 1, nullptr), 0) << hidet_get_last_error();
  EXPECT_EQ(out[0], 5.0f);
  EXPECT_EQ(out[2], 9.0f);
  EXPECT_EQ(hidet_kernel_free(kernel), 0);
}

TEST(KernelLibraryCApi, Errors) {
  HidetKernelLibraryHandle lib = nullptr;
  EXPECT_EQ(hidet_library_load("/nonexistent/lib.so", &lib), -1);
  EXPECT_STREQ(hidet_get_last_error(), "kernel library not found: /nonexistent/lib.so");
  EXPECT_EQ(lib, nullptr);

  EXPECT_EQ(hidet_library_load(kBadAbi.c_str(), &lib), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("was built for kernel ABI version"), std::string::npos);

  ASSERT_EQ(hidet_library_load(kKernels.c_str(), &lib), 0) << hidet_get_last_error();
  HidetKernelHandle kernel = nullptr;
  EXPECT_EQ(hidet_library_get_kernel(lib, "nope", &kernel), -1);
  EXPECT_EQ(std::string(hidet_get_last_error()), kKernels + " exports no kernel 'nope'");
  int32_t has = -1;
  ASSERT_EQ(hidet_library_has_kernel(lib, "nope", &has), 0);
  EXPECT_EQ(has, 0);
  ASSERT_EQ(hidet_library_has_kernel(lib, "vector_add", &has), 0);
  EXPECT_EQ(has, 1);

  ASSERT_EQ(hidet_library_get_kernel(lib, "always_fails", &kernel), 0);
  EXPECT_EQ(hidet_kernel_launch(kernel, nullptr, 0, nullptr, 0, nullptr), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("failed with code 3: always_fails: this kernel refuses to run"),
            std::string::npos)
      << hidet_get_last_error();
  EXPECT_EQ(hidet_kernel_free(kernel), 0);
  EXPECT_EQ(hidet_library_free(lib), 0);
}

TEST(KernelLibraryCApi, NullArguments) {
  HidetKernelLibraryHandle lib = nullptr;
  EXPECT_EQ(hidet_library_load(nullptr, &lib), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("'path' is NULL"), std::string::npos) << hidet_get_last_error();
  EXPECT_EQ(hidet_library_load(kKernels.c_str(), nullptr), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("hidet_library_load: argument 'out_library' is NULL"),
            std::string::npos)
      << hidet_get_last_error();

  ASSERT_EQ(hidet_library_load(kKernels.c_str(), &lib), 0);
  HidetKernelHandle kernel = nullptr;
  EXPECT_EQ(hidet_library_get_kernel(nullptr, "vector_add", &kernel), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("'library' is NULL"), std::string::npos);
  EXPECT_EQ(hidet_library_get_kernel(lib, nullptr, &kernel), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("'name' is NULL"), std::string::npos);
  EXPECT_EQ(hidet_library_get_kernel(lib, "vector_add", nullptr), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("'out_kernel' is NULL"), std::string::npos);

  ASSERT_EQ(hidet_library_get_kernel(lib, "vector_add", &kernel), 0);
  EXPECT_EQ(hidet_kernel_launch(nullptr, nullptr, 0, nullptr, 0, nullptr), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("'kernel' is NULL"), std::string::npos);
  EXPECT_EQ(hidet_kernel_launch(kernel, nullptr, 3, nullptr, 0, nullptr), -1);
  EXPECT_NE(std::string(hidet_get_last_error()).find("'buffers' is NULL"), std::string::npos);

  EXPECT_EQ(hidet_kernel_free(nullptr), -1);
  EXPECT_EQ(hidet_library_free(nullptr), -1);
  EXPECT_EQ(hidet_kernel_free(kernel), 0);
  EXPECT_EQ(hidet_library_free(lib), 0);
}
