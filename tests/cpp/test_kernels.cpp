// A small kernel library following hidet/kernel_abi.h, for test_kernel_library.cpp. CPU kernels:
// they ignore the stream.
#include <string>

#include "hidet/kernel_abi.h"

static thread_local std::string last_error;

static int32_t fail(int32_t code, const std::string& msg) {
  last_error = msg;
  return code;
}

HIDET_KERNEL_EXPORT int32_t hidet_kernel_abi_version(void) { return HIDET_KERNEL_ABI_VERSION; }

HIDET_KERNEL_EXPORT const char* hidet_kernel_last_error(void) { return last_error.c_str(); }

// out[i] = a[i] + b[i] for i < dims[0]; buffers: a, b, out (float).
HIDET_KERNEL_EXPORT int32_t vector_add(void* const* buffers, int32_t num_buffers, const int64_t* dims,
                                       int32_t num_dims, void* /*stream*/) {
  if (num_buffers != 3 || num_dims != 1) return fail(1, "vector_add expects 3 buffers and 1 dim");
  const float* a = static_cast<const float*>(buffers[0]);
  const float* b = static_cast<const float*>(buffers[1]);
  float* out = static_cast<float*>(buffers[2]);
  for (int64_t i = 0; i < dims[0]; ++i) out[i] = a[i] + b[i];
  return 0;
}
HIDET_KERNEL_EXPORT const char* hidet_signature_vector_add(void) {
  return R"({"buffers": [{"dtype": "float32", "shape": ["n"]}, {"dtype": "float32", "shape": ["n"]},
                         {"dtype": "float32", "shape": ["n"]}], "dims": ["n"]})";
}

HIDET_KERNEL_EXPORT int32_t always_fails(void* const* /*buffers*/, int32_t /*num_buffers*/, const int64_t* /*dims*/,
                                         int32_t /*num_dims*/, void* /*stream*/) {
  return fail(3, "always_fails: this kernel refuses to run");
}
HIDET_KERNEL_EXPORT const char* hidet_signature_always_fails(void) { return R"({"buffers": [], "dims": []})"; }

// Defined but not declared (no hidet_signature_undeclared): not a kernel the library offers.
HIDET_KERNEL_EXPORT int32_t undeclared(void* const* /*buffers*/, int32_t /*num_buffers*/, const int64_t* /*dims*/,
                                       int32_t /*num_dims*/, void* /*stream*/) {
  return 0;
}
