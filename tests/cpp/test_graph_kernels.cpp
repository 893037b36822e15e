// Kernels of fixed size for the graph tests (test_graph*.cpp), following hidet/kernel_abi.h: like
// the kernels of a compiled graph they take no dims. CPU kernels: they ignore the stream. Built with
// OpenMP where CMake finds it, as hidet builds CPU kernels, so that the tests unload a library whose
// OpenMP worker threads outlive it (test_graph_leak.cpp).
#include "hidet/kernel/common.h"

using hidet::fail;
static const int kN = 8;  // every tensor is float32[8]

HIDET_DEFINE_LIBRARY_EXPORTS()

#define F32_8 "{\"dtype\": \"float32\", \"shape\": [8]}"
HIDET_KERNEL_SIGNATURE(add, "{\"buffers\": [" F32_8 ", " F32_8 ", " F32_8 "], \"dims\": []}")
HIDET_KERNEL_SIGNATURE(scale, "{\"buffers\": [" F32_8 ", " F32_8 "], \"dims\": []}")
HIDET_KERNEL_SIGNATURE(broken, "{\"buffers\": [" F32_8 ", " F32_8 "], \"dims\": []}")
HIDET_KERNEL_SIGNATURE(scale_empty, "{\"buffers\": [" F32_8 ", {\"dtype\": \"float32\", \"shape\": [0]}, " F32_8
                                    "], \"dims\": []}")
HIDET_KERNEL_SIGNATURE(scale_rows, "{\"buffers\": [{\"dtype\": \"float32\", \"shape\": [\"batch\", 8]}, "
                                   "{\"dtype\": \"float32\", \"shape\": [[\"batch\", 2, \"*\"], 4]}], "
                                   "\"dims\": [\"batch\"]}")

// out = a + b; buffers: a, b, out.
HIDET_KERNEL_EXPORT int32_t add(void* const* buffers, int32_t num_buffers, const int64_t* /*dims*/, int32_t num_dims,
                                void* /*stream*/) {
  if (num_buffers != 3 || num_dims != 0) return fail("add expects 3 buffers and no dims");
  const float* a = static_cast<const float*>(buffers[0]);
  const float* b = static_cast<const float*>(buffers[1]);
  float* out = static_cast<float*>(buffers[2]);
#pragma omp parallel for num_threads(2)
  for (int i = 0; i < kN; ++i) out[i] = a[i] + b[i];
  return 0;
}

// out = 2 * a; buffers: a, out.
HIDET_KERNEL_EXPORT int32_t scale(void* const* buffers, int32_t num_buffers, const int64_t* /*dims*/,
                                  int32_t num_dims, void* /*stream*/) {
  if (num_buffers != 2 || num_dims != 0) return fail("scale expects 2 buffers and no dims");
  const float* a = static_cast<const float*>(buffers[0]);
  float* out = static_cast<float*>(buffers[1]);
  for (int i = 0; i < kN; ++i) out[i] = 2.0f * a[i];
  return 0;
}

HIDET_KERNEL_EXPORT int32_t broken(void* const* /*buffers*/, int32_t /*num_buffers*/, const int64_t* /*dims*/,
                                   int32_t /*num_dims*/, void* /*stream*/) {
  return fail("broken: this kernel always fails");
}

// out = 2 * a, with an empty second input; buffers: a, e (float32[0]), out.
HIDET_KERNEL_EXPORT int32_t scale_empty(void* const* buffers, int32_t num_buffers, const int64_t* dims,
                                        int32_t num_dims, void* stream) {
  if (num_buffers != 3) return fail("scale_empty expects 3 buffers");
  void* const two[] = {buffers[0], buffers[2]};
  return scale(two, 2, dims, num_dims, stream);
}

// out = 2 * a over batch rows: a float32[batch, 8], out float32[batch * 2, 4]; dims: batch.
HIDET_KERNEL_EXPORT int32_t scale_rows(void* const* buffers, int32_t num_buffers, const int64_t* dims,
                                       int32_t num_dims, void* /*stream*/) {
  if (num_buffers != 2 || num_dims != 1) return fail("scale_rows expects 2 buffers and 1 dim");
  const float* a = static_cast<const float*>(buffers[0]);
  float* out = static_cast<float*>(buffers[1]);
  for (int64_t i = 0; i < dims[0] * kN; ++i) out[i] = 2.0f * a[i];
  return 0;
}
