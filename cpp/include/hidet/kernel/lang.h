// Support code for kernel libraries written in Hidet Script (python/hidet/lang): scalar parameters read
// from the kernel ABI's `dims`, and on CUDA the intrinsics of hidet.lang.cuda (shuffles, atomics,
// dynamic shared memory, cp.async, ldmatrix, mma.sync, wgmma, mbarriers and TMA) as inline functions over inline
// PTX, and the host side of TMA: tensor maps built by a kernel's launch entry.
#pragma once

#include <atomic>
#include <cstring>

#ifdef __CUDACC__
#include <cudaTypedefs.h>

#include "hidet/kernel/cuda.h"
#include "hidet/kernel/wgmma.h"
#else
#include "hidet/kernel/cpu.h"
#endif

namespace hidet {
namespace lang {

// A scalar parameter from its slot of `dims` (docs/hidet-script.md): integers and bool by value,
// float32 (and float16/bfloat16, passed as float32) as the bit pattern in the low 32 bits, float64 as
// the 64-bit pattern.
template <typename T>
inline T from_dim(int64_t d) { return static_cast<T>(d); }
template <>
inline bool from_dim<bool>(int64_t d) { return d != 0; }
template <>
inline float from_dim<float>(int64_t d) {
  uint32_t u = uint32_t(uint64_t(d));
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
template <>
inline double from_dim<double>(int64_t d) {
  double f;
  std::memcpy(&f, &d, 8);
  return f;
}

#ifdef __CUDACC__

// ---- warp shuffles: any scalar; types narrower than 32 bits travel as int
#define HIDET_SHFL(NAME, INTRINSIC)                                                   \
  template <typename T>                                                               \
  __device__ __forceinline__ T NAME(unsigned mask, T v, int arg, int width) {        \
    if constexpr (sizeof(T) < 4) {                                                    \
      return T(INTRINSIC(mask, int(v), arg, width));                                  \
    } else {                                                                          \
      return INTRINSIC(mask, v, arg, width);                                          \
    }                                                                                 \
  }
HIDET_SHFL(shfl_sync, __shfl_sync)
HIDET_SHFL(shfl_up_sync, __shfl_up_sync)
HIDET_SHFL(shfl_down_sync, __shfl_down_sync)
HIDET_SHFL(shfl_xor_sync, __shfl_xor_sync)
#undef HIDET_SHFL

// ---- atomics: return the old value (16-bit floats as float, as hidet computes them)
__device__ __forceinline__ float atomic_add(float* p, float v) { return atomicAdd(p, v); }
__device__ __forceinline__ double atomic_add(double* p, double v) { return atomicAdd(p, v); }
__device__ __forceinline__ int32_t atomic_add(int32_t* p, int32_t v) { return atomicAdd(p, v); }
__device__ __forceinline__ int64_t atomic_add(int64_t* p, int64_t v) {
  return int64_t(atomicAdd(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v));
}
__device__ __forceinline__ float atomic_add(__half* p, float v) { return __half2float(atomicAdd(p, __float2half_rn(v))); }
#ifndef HIDET_NO_BF16
__device__ __forceinline__ float atomic_add(__nv_bfloat16* p, float v) {
  return __bfloat162float(atomicAdd(p, __float2bfloat16_rn(v)));
}
#endif
template <typename T, typename V>
__device__ __forceinline__ auto atomic_sub(T* p, V v) { return atomic_add(p, -v); }

// ---- two neighbouring elements, rounded from float, in one store (p at a multiple of two elements): a lane's
// two columns of an mma accumulator tile, 4 bytes of 16-bit values instead of two 2-byte stores
__device__ __forceinline__ void store_pair(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}
#ifndef HIDET_NO_BF16
__device__ __forceinline__ void store_pair(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}
#endif
__device__ __forceinline__ void store_pair(float* p, float a, float b) {
  *reinterpret_cast<float2*>(p) = make_float2(a, b);
}

// ---- two neighbouring elements in one load (src at a multiple of two elements): a lane's two columns of an mma
// score tile read from a mask, one 4-byte load of 16-bit values instead of two 2-byte loads
template <typename T>
__device__ __forceinline__ void load_pair(T* dst, const T* src) {
  struct alignas(2 * sizeof(T)) Pair { T first, second; };
  const Pair pair = *reinterpret_cast<const Pair*>(src);
  dst[0] = pair.first;
  dst[1] = pair.second;
}

__device__ __forceinline__ int32_t atomic_max(int32_t* p, int32_t v) { return atomicMax(p, v); }
__device__ __forceinline__ int32_t atomic_min(int32_t* p, int32_t v) { return atomicMin(p, v); }
__device__ __forceinline__ int64_t atomic_max(int64_t* p, int64_t v) {
  return atomicMax(reinterpret_cast<long long*>(p), (long long)v);
}
__device__ __forceinline__ int64_t atomic_min(int64_t* p, int64_t v) {
  return atomicMin(reinterpret_cast<long long*>(p), (long long)v);
}
// float max/min by compare-and-swap on the bit pattern
template <bool Max>
__device__ __forceinline__ float atomic_minmax(float* p, float v) {
  int* ip = reinterpret_cast<int*>(p);
  int old = *ip, assumed;
  do {
    assumed = old;
    float cur = __int_as_float(assumed);
    if (Max ? !(v > cur) : !(v < cur)) break;
    old = atomicCAS(ip, assumed, __float_as_int(v));
  } while (old != assumed);
  return __int_as_float(old);
}
__device__ __forceinline__ float atomic_max(float* p, float v) { return atomic_minmax<true>(p, v); }
__device__ __forceinline__ float atomic_min(float* p, float v) { return atomic_minmax<false>(p, v); }

__device__ __forceinline__ float atomic_exchange(float* p, float v) { return atomicExch(p, v); }
__device__ __forceinline__ int32_t atomic_exchange(int32_t* p, int32_t v) { return atomicExch(p, v); }
__device__ __forceinline__ int64_t atomic_exchange(int64_t* p, int64_t v) {
  return int64_t(atomicExch(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v));
}
__device__ __forceinline__ int32_t atomic_cas(int32_t* p, int32_t compare, int32_t v) { return atomicCAS(p, compare, v); }
__device__ __forceinline__ int64_t atomic_cas(int64_t* p, int64_t compare, int64_t v) {
  return int64_t(atomicCAS(reinterpret_cast<unsigned long long*>(p), (unsigned long long)compare, (unsigned long long)v));
}

// ---- dynamic shared memory: the block's `extern __shared__` bytes
__device__ __forceinline__ uint8_t* dynamic_smem() {
  extern __shared__ __align__(16) uint8_t hidet_dynamic_smem[];
  return hidet_dynamic_smem;
}

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The dynamic shared memory rounded up to a multiple of A bytes of the shared window (a kernel asks for
// A - 16 bytes more): wgmma's 128-byte swizzle repeats every 1024 bytes of address.
template <int A>
__device__ __forceinline__ uint8_t* dynamic_smem_aligned() {
  uint8_t* p = dynamic_smem();
  return p + ((A - shared_address(p) % A) % A);
}

// ---- cp.async (sm_80+): copy N bytes global -> shared; bytes past src_size are zero-filled (16-byte copies
// bypass L1 and fetch whole 128-byte lines into L2: tiles read them next)
template <int N>
__device__ __forceinline__ void cp_async(void* dst, const void* src, int src_size) {
  static_assert(N == 4 || N == 8 || N == 16, "cp_async copies 4, 8 or 16 bytes");
  if constexpr (N == 16) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
                 "r"(src_size));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(shared_address(dst)), "l"(src), "n"(N),
                 "r"(src_size));
  }
}
__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait_group() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::); }

// ---- ldmatrix (sm_75+): N (1, 2, 4) 8x8 b16 matrices from shared memory; each thread gives the
// address of one row (threads 8i..8i+7: the rows of matrix i) and receives one 32-bit register per
// matrix, written to dst[0..N-1] (as uint32 words).
template <int N, bool Trans>
__device__ __forceinline__ void ldmatrix(void* dst, const void* smem_row) {
  uint32_t* r = reinterpret_cast<uint32_t*>(dst);
  unsigned a = shared_address(smem_row);
  if constexpr (N == 1) {
    if constexpr (Trans) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(a));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(a));
    }
  } else if constexpr (N == 2) {
    if constexpr (Trans) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
    }
  } else {
    static_assert(N == 4, "ldmatrix loads 1, 2 or 4 matrices");
    if constexpr (Trans) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    }
  }
}

// ---- mma.sync m16n8k16 (sm_80+), row-major A, column-major B, float32 accumulators: c += a * b.
// a: 4 words (8 halves), b: 2 words (4 halves), c: 4 floats, in the PTX fragment layouts.
#define HIDET_MMA_M16N8K16(NAME, AB)                                                                          \
  __device__ __forceinline__ void NAME(const void* a, const void* b, float* c) {                              \
    const uint32_t* A = reinterpret_cast<const uint32_t*>(a);                                                 \
    const uint32_t* B = reinterpret_cast<const uint32_t*>(b);                                                 \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." AB "." AB                                          \
                 ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                     \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                             \
                 : "r"(A[0]), "r"(A[1]), "r"(A[2]), "r"(A[3]), "r"(B[0]), "r"(B[1]));                         \
  }
HIDET_MMA_M16N8K16(mma_m16n8k16_f16_f32, "f16")
HIDET_MMA_M16N8K16(mma_m16n8k16_bf16_f32, "bf16")
#undef HIDET_MMA_M16N8K16

// ---- mma.sync m16n8k8 with TF32 operands (sm_80+): a: 4 floats, b: 2 floats, c: 4 floats (PTX layouts:
// a[0] A[g][t], a[1] A[g+8][t], a[2] A[g][t+4], a[3] A[g+8][t+4]; b[0] B[t][g], b[1] B[t+4][g]), each
// operand rounded to TF32 (10-bit mantissa, round to nearest) first.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ void mma_m16n8k8_tf32_f32(const float* a, const float* b, float* c) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(to_tf32(a[0])), "r"(to_tf32(a[1])), "r"(to_tf32(a[2])), "r"(to_tf32(a[3])),
                 "r"(to_tf32(b[0])), "r"(to_tf32(b[1])));
}

// ---- wgmma (sm_90a): a warpgroup (4 warps) multiplies a 64 x 16 tile of A by a 16 x N tile of B, both in
// shared memory with a 128-byte swizzle (the 16-byte chunk c of a 128-byte row r at c ^ (r % 8), rows of a
// 1024-byte aligned block), adding to N / 2 float32 accumulators per thread. A K-major operand is rows of 64
// k values; an M/N-major one blocks of [k rows][64 m/n values]. LBO / SBO (bytes): the stride between 64-wide
// M/N blocks / between groups of 8 rows (1024 for these layouts); K-major operands ignore LBO.
__device__ __forceinline__ uint64_t wgmma_desc(const void* smem, uint32_t lbo, uint32_t sbo) {
  uint64_t a = (shared_address(smem) & 0x3FFFF) >> 4;
  return a | (uint64_t((lbo >> 4) & 0x3FFF) << 16) | (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Writes to shared memory by this thread (st.shared, cp.async) become visible to wgmma's reads (the async
// proxy) once a barrier follows.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

template <int N, int TA, int TB, int ALBO, int BLBO, typename T>
__device__ __forceinline__ void wgmma_m64k16(float* d, const T* a, const T* b, int accumulate) {
  static_assert(N == 16 || N == 32 || N == 64 || N == 128 || N == 192 || N == 256,
                "wgmma_m64k16: N is 16, 32, 64, 128, 192 or 256");
  constexpr bool F16 = std::is_same<T, __half>::value;
  static_assert(F16 || is_bf16<T>::value, "wgmma_m64k16: float16 or bfloat16 operands");
  const uint64_t da = wgmma_desc(a, ALBO, 1024), db = wgmma_desc(b, BLBO, 1024);
  if constexpr (N == 16) {
    if constexpr (F16) wgmma_m64n16k16_f16<TA, TB>(d, da, db, accumulate); else wgmma_m64n16k16_bf16<TA, TB>(d, da, db, accumulate);
  } else if constexpr (N == 32) {
    if constexpr (F16) wgmma_m64n32k16_f16<TA, TB>(d, da, db, accumulate); else wgmma_m64n32k16_bf16<TA, TB>(d, da, db, accumulate);
  } else if constexpr (N == 64) {
    if constexpr (F16) wgmma_m64n64k16_f16<TA, TB>(d, da, db, accumulate); else wgmma_m64n64k16_bf16<TA, TB>(d, da, db, accumulate);
  } else if constexpr (N == 128) {
    if constexpr (F16) wgmma_m64n128k16_f16<TA, TB>(d, da, db, accumulate); else wgmma_m64n128k16_bf16<TA, TB>(d, da, db, accumulate);
  } else if constexpr (N == 192) {
    if constexpr (F16) wgmma_m64n192k16_f16<TA, TB>(d, da, db, accumulate); else wgmma_m64n192k16_bf16<TA, TB>(d, da, db, accumulate);
  } else {
    if constexpr (F16) wgmma_m64n256k16_f16<TA, TB>(d, da, db, accumulate); else wgmma_m64n256k16_bf16<TA, TB>(d, da, db, accumulate);
  }
}

// The same with A from registers: `a` points to the warp's m16n8k16 A fragment (8 values: rows 16w + lane / 4
// and + 8, k 2 (lane % 4) .. + 1 and + 8) of its 16 rows of the 64 x 16 tile.
template <int N, int TB, int BLBO, typename T>
__device__ __forceinline__ void wgmma_m64k16_rs(float* d, const T* a, const T* b, int accumulate) {
  static_assert(N == 64 || N == 128, "wgmma_m64k16_rs: N is 64 or 128");
  constexpr bool F16 = std::is_same<T, __half>::value;
  static_assert(F16 || is_bf16<T>::value, "wgmma_m64k16_rs: float16 or bfloat16 operands");
  const uint32_t* ra = reinterpret_cast<const uint32_t*>(a);
  const uint64_t db = wgmma_desc(b, BLBO, 1024);
  if constexpr (N == 64) {
    if constexpr (F16) wgmma_m64n64k16_f16_rs<TB>(d, ra, db, accumulate); else wgmma_m64n64k16_bf16_rs<TB>(d, ra, db, accumulate);
  } else {
    if constexpr (F16) wgmma_m64n128k16_f16_rs<TB>(d, ra, db, accumulate); else wgmma_m64n128k16_bf16_rs<TB>(d, ra, db, accumulate);
  }
}

// Named barrier `ID` (1..15) of `THREADS` threads (whole warps) of the block.
template <int ID, int THREADS>
__device__ __forceinline__ void named_barrier_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
}

// ---- mbarriers (sm_90): a shared 64-bit barrier completes a phase when `count` threads have arrived and the
// transaction bytes they announced (expect_tx) have landed (TMA copies complete them)
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)), "r"(count) : "memory");
}
// Barrier initializations become visible to the async proxy (TMA) once a block barrier follows.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(bar)) : "memory");
}
// Wait until the phase of parity `phase` (0, 1, 0, ...: the barrier's n-th use waits for parity n % 2) completes.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, int phase) {
  asm volatile(
      "{\n.reg .pred done;\nhidet_mbarrier_wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra hidet_mbarrier_wait;\n}\n" ::"r"(shared_address(bar)),
      "r"(phase)
      : "memory");
}

// ---- TMA (sm_90): copy a box of a tensor map (a __grid_constant__ kernel parameter) at element coordinates
// (innermost first) into shared memory, completing `bar`'s transaction bytes; elements outside the tensor are 0.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
      ::"r"(shared_address(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(shared_address(bar)), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(shared_address(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(shared_address(bar)), "r"(c0),
      "r"(c1), "r"(c2)
      : "memory");
}

// ---- thread-block clusters (sm_90): the CTAs of a cluster (the kernel's __cluster_dims__) share their shared
// memory (DSMEM). cluster_sync: every thread of every CTA of the cluster arrives, then waits for the others (release /
// acquire: shared-memory writes before it are seen by reads after it, across the cluster).
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// 4 floats of CTA `rank`'s shared memory at the offset that `src` has in this CTA's (16-byte aligned).
__device__ __forceinline__ void cluster_load_f32x4(float* dst, const float* src, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(shared_address(src)), "r"(rank));
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(dst[0]), "=f"(dst[1]), "=f"(dst[2]), "=f"(dst[3]) : "r"(remote) : "memory");
}

// TMA im2col mode: a column of pixels of a channels-last [n, h, w, c] tensor map (cuTensorMapEncodeIm2col)
// from window origin (c, w, h, n), every pixel shifted by the window offsets (ow, oh).
__device__ __forceinline__ void tma_load_im2col(void* dst, const CUtensorMap* map, uint64_t* bar, int c, int w, int h,
                                                int n, uint16_t ow, uint16_t oh) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%3, %4, %5, %6}], [%2], {%7, %8};\n" ::"r"(shared_address(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(shared_address(bar)), "r"(c), "r"(w), "r"(h), "r"(n), "h"(ow), "h"(oh)
      : "memory");
}

// Host: a driver function (CUDA 12.0's version) through the runtime, so libraries need no -lcuda; or null.
inline void* driver_function(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found;
#if CUDART_VERSION >= 12050
  cudaError_t err = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found);
#else
  cudaError_t err = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &found);
#endif
  return err == cudaSuccess && found == cudaDriverEntryPointSuccess ? p : nullptr;
}

// `name`'s driver function, looked up once into `slot`: a constant-initialized atomic rather than a function-local
// static, whose thread-safe initialization would call the C++ runtime (__cxa_guard_acquire; common.h says why a
// kernel library avoids it). Two threads may both look it up the first time; they store the same pointer.
inline void* cached_driver_function(std::atomic<void*>& slot, const char* name) {
  void* fn = slot.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = driver_function(name);
    slot.store(fn, std::memory_order_release);
  }
  return fn;
}

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static std::atomic<void*> slot{nullptr};
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(cached_driver_function(slot, "cuTensorMapEncodeTiled"));
}

inline PFN_cuTensorMapEncodeIm2col_v12000 im2col_tensor_map_encoder() {
  static std::atomic<void*> slot{nullptr};
  return reinterpret_cast<PFN_cuTensorMapEncodeIm2col_v12000>(cached_driver_function(slot, "cuTensorMapEncodeIm2col"));
}

template <typename T>
constexpr CUtensorMapDataType tensor_map_dtype() {
  static_assert(sizeof(T) == 2, "tensor maps of 16-bit floats");
  return is_bf16<T>::value ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
}

// Host: a tensor map of `rank` dims (innermost first; strides in bytes of dims 1.., multiples of 16) over
// `base` (16-byte aligned), copied in boxes of `box` elements with the 128-byte swizzle (wgmma's tiles:
// a box row of 128 bytes). Returns nullptr on success, else what failed (with the CUresult in *code).
template <typename T>
inline const char* make_tensor_map(CUtensorMap* map, const void* base, int rank, const uint64_t* dims,
                                   const uint64_t* strides, const uint32_t* box, int* code) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return "the CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12 and an sm_90 GPU)";
  const uint32_t ones[3] = {1, 1, 1};
  CUresult r = encode(map, tensor_map_dtype<T>(), rank, const_cast<void*>(base), dims, strides, box, ones,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  *code = int(r);
  return r == CUDA_SUCCESS ? nullptr : "cuTensorMapEncodeTiled failed";
}

// Host: an im2col tensor map over a channels-last [n, h, w, c] tensor at `base` (dims innermost first: c, w, h,
// n; strides in bytes of w, h, n): copies of `pixels` pixels (traversing w, h, n by `traversal` steps inside the
// bounding box from `lower` to the sizes plus `upper`, corners given as (w, h)) of `channels` channels each,
// with the 128-byte swizzle. Returns nullptr on success, else what failed (with the CUresult in *code).
template <typename T>
inline const char* make_im2col_tensor_map(CUtensorMap* map, const void* base, const uint64_t* dims,
                                          const uint64_t* strides, const int* lower, const int* upper,
                                          uint32_t channels, uint32_t pixels, const uint32_t* traversal, int* code) {
  PFN_cuTensorMapEncodeIm2col_v12000 encode = im2col_tensor_map_encoder();
  if (encode == nullptr) return "the CUDA driver has no cuTensorMapEncodeIm2col (TMA needs CUDA 12 and an sm_90 GPU)";
  CUresult r = encode(map, tensor_map_dtype<T>(), 4, const_cast<void*>(base), dims, strides, lower, upper, channels,
                      pixels, traversal, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  *code = int(r);
  return r == CUDA_SUCCESS ? nullptr : "cuTensorMapEncodeIm2col failed";
}

#endif  // __CUDACC__

}  // namespace lang
}  // namespace hidet
