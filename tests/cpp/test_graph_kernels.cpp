// Kernels of fixed size for the graph tests (test_graph*.cpp), following hidet/kernel_abi.h: like
// the kernels of a compiled graph they take no dims. CPU kernels: they ignore the stream. Built with
// OpenMP where CMake finds it, as hidet builds CPU kernels, so that the tests unload a library whose
// OpenMP worker threads outlive it (test_graph_leak.cpp).
#include <string>

#include "hidet/kernel/common.h"

using hidet::fail;
static const int kN = 8;  // every tensor is float32[8]

HIDET_DEFINE_LIBRARY_EXPORTS()

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
