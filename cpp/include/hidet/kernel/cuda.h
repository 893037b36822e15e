// Support code for CUDA kernel libraries: thread indexing, 16-bit float conversions, and warp-wide
// and block-wide reductions (warp shuffles, then one value per warp through shared memory).
#pragma once

// HIDET_NO_BF16: the library uses no bfloat16 and skips cuda_bf16.h, a fifth of a small kernel's nvcc time
// (the compiler driver defines it where a source never names bfloat16: python/hidet/backend/compiler.py)
#ifndef HIDET_NO_BF16
#include <cuda_bf16.h>
#endif
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "hidet/kernel/common.h"
#include "hidet/kernel/fast_divmod.h"

namespace hidet {

// Whether T is bfloat16 (never, in a library built with HIDET_NO_BF16).
template <typename T>
struct is_bf16 : std::false_type {};
#ifndef HIDET_NO_BF16
template <>
struct is_bf16<__nv_bfloat16> : std::true_type {};
#endif

__device__ __forceinline__ int64_t thread_idx() { return threadIdx.x; }
__device__ __forceinline__ int64_t block_idx() { return blockIdx.x; }
__device__ __forceinline__ int64_t grid_dim() { return gridDim.x; }
__device__ __forceinline__ int64_t global_thread_idx() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t global_threads() { return int64_t(gridDim.x) * blockDim.x; }
__device__ __forceinline__ int64_t lane_idx() { return threadIdx.x % 32; }
__device__ __forceinline__ int64_t global_warp_idx() { return global_thread_idx() / 32; }
__device__ __forceinline__ int64_t global_warps() { return global_threads() / 32; }

__device__ __forceinline__ float to_float(__half h) { return __half2float(h); }
#ifndef HIDET_NO_BF16
__device__ __forceinline__ float to_float(__nv_bfloat16 h) { return __bfloat162float(h); }
#endif

template <typename T>
__device__ __forceinline__ T from_float(float f);
template <>
__device__ __forceinline__ __half from_float<__half>(float f) { return __float2half_rn(f); }
#ifndef HIDET_NO_BF16
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float f) { return __float2bfloat16_rn(f); }
#endif

// Copy `Bytes` bytes (1, 2, 4, 8 or 16) as one access; both addresses aligned to `Bytes`.
template <int Bytes>
__device__ __forceinline__ void copy_vector(void* dst, const void* src) {
  if constexpr (Bytes == 16) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
  } else if constexpr (Bytes == 8) {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  } else if constexpr (Bytes == 4) {
    *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src);
  } else if constexpr (Bytes == 2) {
    *reinterpret_cast<uint16_t*>(dst) = *reinterpret_cast<const uint16_t*>(src);
  } else {
    static_assert(Bytes == 1, "copy_vector copies 1, 2, 4, 8 or 16 bytes");
    *reinterpret_cast<uint8_t*>(dst) = *reinterpret_cast<const uint8_t*>(src);
  }
}

__device__ __forceinline__ float rsqrt(float x) { return ::rsqrtf(x); }
__device__ __forceinline__ double rsqrt(double x) { return ::rsqrt(x); }

// sigmoid(x) = 1 / (1 + e^-x) and 1 + tanh(x) = 2 sigmoid(2x) (GELU-tanh's factor, without its cancellation
// for negative x), each from the approximate exp2 and reciprocal: two special-function instructions, relative
// error near 1e-6 (far under fp16's and bf16's). CUDA's expf, tanhf and IEEE division take some 25 instructions
// a value, which left a GEMM's GELU or SiLU epilogue 30% over the bare GEMM. Doubles keep the exact forms.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float sigmoid(float x) { return rcp_approx(1.0f + exp2_approx(x * -1.4426950408889634f)); }
__device__ __forceinline__ double sigmoid(double x) { return 1.0 / (1.0 + ::exp(-x)); }
__device__ __forceinline__ float one_plus_tanh(float x) {
  return 2.0f * rcp_approx(1.0f + exp2_approx(x * -2.8853900817779268f));
}
__device__ __forceinline__ double one_plus_tanh(double x) { return 1.0 + ::tanh(x); }
// tanh of a value whose result is a float16 or bfloat16: the special-function unit's own tanh (sm_75 and later),
// one instruction of relative error 1.1e-5, 45 times under fp16's rounding (tanhf takes some 20, and the sigmoid
// form two special-function instructions: a GEMM's GELU-tanh epilogue is bound by them)
__device__ __forceinline__ float tanh_approx(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return ::tanhf(x);
#endif
}
// erf of a value whose result is a float16 or bfloat16: tanh(y (2 / sqrt(pi) + c1 y^2 + c2 y^4)), y^2 clamped at
// 18 (where erf is 1 in float), c1 and c2 fitted to erf over [0, 8]: absolute error 5.5e-5, relative 9.2e-5 near
// 0, plus tanh_approx's; one special-function instruction and five others where erff takes some twenty (a GEMM's
// erf-GELU epilogue cost 31% over the bare GEMM at 4096x3072x768 on the H100 with erff)
__device__ __forceinline__ float erf_approx(float y) {
  float u = fminf(y * y, 18.0f);
  return tanh_approx(y * fmaf(fmaf(-0.001620666f, u, 0.1036026f), u, 1.1283792f));
}

// Shuffle any scalar: types narrower than 32 bits travel as int.
template <typename T>
__device__ __forceinline__ T shfl_down(T v, int offset) {
  if constexpr (sizeof(T) < 4) {
    return T(__shfl_down_sync(0xffffffffu, int(v), offset));
  } else {
    return __shfl_down_sync(0xffffffffu, v, offset);
  }
}

template <typename T>
__device__ __forceinline__ T shfl_xor(T v, int mask) {
  if constexpr (sizeof(T) < 4) {
    return T(__shfl_xor_sync(0xffffffffu, int(v), mask));
  } else {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
}

// Combine `v` across the 32 lanes of a warp with `op`; every lane must call it, and all get the result.
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int mask = 16; mask > 0; mask >>= 1) v = op(v, shfl_xor(v, mask));
  return v;
}

template <typename T>
__device__ T warp_reduce_sum(T v) { return warp_reduce(v, [](T a, T b) { return T(a + b); }); }
template <typename T>
__device__ T warp_reduce_prod(T v) { return warp_reduce(v, [](T a, T b) { return T(a * b); }); }
template <typename T>
__device__ T warp_reduce_max(T v) { return warp_reduce(v, [](T a, T b) { return hidet::max(a, b); }); }
template <typename T>
__device__ T warp_reduce_min(T v) { return warp_reduce(v, [](T a, T b) { return hidet::min(a, b); }); }
__device__ inline bool warp_reduce_or(bool v) { return warp_reduce(v, [](bool a, bool b) { return a || b; }); }
__device__ inline bool warp_reduce_and(bool v) { return warp_reduce(v, [](bool a, bool b) { return a && b; }); }

// Combine `v` across the thread block with `op` (whose identity is `identity`); every thread of
// the block must call it, and all get the result. Blocks are at most 1024 threads (32 warps).
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T warp_values[32];
  __shared__ T result;
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, shfl_down(v, offset));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, num_warps = (blockDim.x + 31) / 32;
  if (lane == 0) warp_values[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < num_warps ? warp_values[lane] : identity;
    for (int offset = 16; offset > 0; offset >>= 1) v = op(v, shfl_down(v, offset));
    if (lane == 0) result = v;
  }
  __syncthreads();
  T out = result;
  __syncthreads();  // the shared slots may be reused by the next reduction
  return out;
}

template <typename T>
__device__ T block_reduce_sum(T v) { return block_reduce(v, [](T a, T b) { return T(a + b); }, T(0)); }
template <typename T>
__device__ T block_reduce_prod(T v) { return block_reduce(v, [](T a, T b) { return T(a * b); }, T(1)); }
template <typename T>
__device__ T block_reduce_max(T v) { return block_reduce(v, [](T a, T b) { return hidet::max(a, b); }, lowest<T>()); }
template <typename T>
__device__ T block_reduce_min(T v) { return block_reduce(v, [](T a, T b) { return hidet::min(a, b); }, highest<T>()); }
__device__ inline bool block_reduce_or(bool v) { return block_reduce(v, [](bool a, bool b) { return a || b; }, false); }
__device__ inline bool block_reduce_and(bool v) { return block_reduce(v, [](bool a, bool b) { return a && b; }, true); }

// Combine `v` across the `Rows` threads that share a column of a `Cols` x `Rows` block (thread t is
// column t % Cols, row t / Cols): column reductions, where consecutive threads reduce consecutive
// outputs. Every thread of the block must call it, and all get their column's result (combined in row
// order, so results do not depend on timing).
template <int Cols, int Rows, typename T, typename Op>
__device__ T column_reduce(T v, Op op) {
  __shared__ T values[Cols * Rows];
  values[threadIdx.x] = v;
  __syncthreads();
  int col = threadIdx.x % Cols;
  T r = values[col];
#pragma unroll
  for (int i = 1; i < Rows; ++i) r = op(r, values[col + i * Cols]);
  __syncthreads();  // the shared slots may be reused by the next reduction
  return r;
}

template <int C, int R, typename T>
__device__ T column_reduce_sum(T v) { return column_reduce<C, R>(v, [](T a, T b) { return T(a + b); }); }
template <int C, int R, typename T>
__device__ T column_reduce_prod(T v) { return column_reduce<C, R>(v, [](T a, T b) { return T(a * b); }); }
template <int C, int R, typename T>
__device__ T column_reduce_max(T v) { return column_reduce<C, R>(v, [](T a, T b) { return hidet::max(a, b); }); }
template <int C, int R, typename T>
__device__ T column_reduce_min(T v) { return column_reduce<C, R>(v, [](T a, T b) { return hidet::min(a, b); }); }
template <int C, int R>
__device__ bool column_reduce_or(bool v) { return column_reduce<C, R>(v, [](bool a, bool b) { return a || b; }); }
template <int C, int R>
__device__ bool column_reduce_and(bool v) { return column_reduce<C, R>(v, [](bool a, bool b) { return a && b; }); }

// Programmatic dependent launch (sm_90): hidet launches its kernels with the programmatic-serialization attribute
// (HIDET_PROGRAMMATIC_LAUNCH, defined where the library is built for sm_90), so a kernel's blocks may be scheduled
// while the kernel before it in the stream (or CUDA graph) drains its last wave, instead of after it has
// finished and flushed. Every kernel hidet generates first waits for the grids before it (griddepcontrol.wait:
// until they have completed and their memory is visible), before any read or write of global memory, so the
// results are those of serialized kernels; it then lets the kernel after it be scheduled (launch_dependents:
// once every block of this one has started, its blocks can take the SMs this one's last wave frees).
__device__ __forceinline__ void dependent_launch_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launch `kernel` on `stream` (programmatically dependent on the kernel before it where built for sm_90).
template <typename... Params, typename... Args>
inline cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          Args... args) {
#if defined(HIDET_PROGRAMMATIC_LAUNCH)
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
#else
  kernel<<<grid, block, smem, stream>>>(static_cast<Params>(args)...);
  return cudaGetLastError();
#endif
}

}  // namespace hidet
