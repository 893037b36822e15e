// Support code included by every kernel library hidet generates (CPU and CUDA): the ABI exports,
// error reporting and scalar helpers with torch's semantics (NaN-propagating max/min).
#pragma once

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "hidet/kernel_abi.h"

#ifdef __CUDACC__
#define HIDET_HD __host__ __device__ __forceinline__
#else
#define HIDET_HD inline
#endif

namespace hidet {

// The message of the last failure on this thread, per library (inline: one per shared object). A
// plain array, not a std::string: a thread_local with a destructor keeps its library from being
// unloaded (glibc defers that until every thread that touched it has exited), so each graph loaded
// and freed in a long-lived process would leak its libraries once a kernel had failed.
constexpr size_t kMaxErrorLength = 2048;
inline char* last_error() {
  static thread_local char message[kMaxErrorLength];
  return message;
}

// Keep the printf-style message (cut to kMaxErrorLength - 1 bytes) as this thread's last error; returns 1.
// printf, not std::string: a kernel library uses nothing of the C++ runtime library (a compiler that links
// libstdc++ statically would otherwise put a private copy in every library, whose exception-handling pool,
// 72 KiB, is allocated at each load and never freed, and whose unique symbols keep the library loaded).
inline int32_t fail(const char* format, ...) __attribute__((format(printf, 1, 2)));
inline int32_t fail(const char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(last_error(), kMaxErrorLength, format, args);
  va_end(args);
  return 1;
}

template <typename T>
HIDET_HD bool is_nan(T x) {
  return x != x;
}

// max/min that propagate NaN, as torch.maximum / torch.max do (`|`, not `||`: no branch, so loops of
// them vectorize). float32 on sm_80+: PTX's max.NaN / min.NaN, one instruction with the same NaN propagation
// (the comparison is three, and a chain of them is the latency of a softmax's row maximum or a pooling window).
template <typename T>
HIDET_HD T max(T a, T b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same<T, float>::value) {
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  }
#endif
  return ((a > b) | is_nan(a)) ? a : b;
}
template <typename T>
HIDET_HD T min(T a, T b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same<T, float>::value) {
    float r;
    asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  }
#endif
  return ((a < b) | is_nan(a)) ? a : b;
}

// The identity of max (lowest) and min (highest) reductions (no std::numeric_limits: device code).
template <typename T>
HIDET_HD T lowest();
template <typename T>
HIDET_HD T highest();
#define HIDET_LIMITS(T, LO, HI)            \
  template <>                              \
  HIDET_HD T lowest<T>() { return LO; }    \
  template <>                              \
  HIDET_HD T highest<T>() { return HI; }
HIDET_LIMITS(float, -INFINITY, INFINITY)
HIDET_LIMITS(double, -double(INFINITY), double(INFINITY))
HIDET_LIMITS(int8_t, INT8_MIN, INT8_MAX)
HIDET_LIMITS(int16_t, INT16_MIN, INT16_MAX)
HIDET_LIMITS(int32_t, INT32_MIN, INT32_MAX)
HIDET_LIMITS(int64_t, INT64_MIN, INT64_MAX)
HIDET_LIMITS(uint8_t, 0, UINT8_MAX)
HIDET_LIMITS(bool, false, true)
#undef HIDET_LIMITS

// Integer power with torch's semantics: wraps on overflow; a negative exponent gives 1 for base 1,
// +-1 for base -1 and 0 otherwise.
template <typename T>
HIDET_HD T ipow(T base, T exp) {
  if constexpr (std::is_same_v<T, bool>) {
    return base || !exp;
  } else {
    if constexpr (std::is_signed_v<T>) {
      if (exp < 0) return base == 1 ? T(1) : base == -1 ? T((exp % 2) ? -1 : 1) : T(0);
    }
    using U = std::conditional_t<(sizeof(T) < 4), uint32_t, std::make_unsigned_t<T>>;
    U result = 1, b = U(base);
    for (U e = U(exp); e; e >>= 1) {
      if (e & 1) result *= b;
      b *= b;
    }
    return T(result);
  }
}

// Whether `p` is aligned to `bytes` (a vectorized kernel needs its buffers aligned to its vectors).
inline bool is_aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace hidet

// Defines the two symbols every kernel library exports besides its kernels (kernel_abi.h).
#define HIDET_DEFINE_LIBRARY_EXPORTS()                                                              \
  HIDET_KERNEL_EXPORT int32_t hidet_kernel_abi_version(void) { return HIDET_KERNEL_ABI_VERSION; } \
  HIDET_KERNEL_EXPORT const char* hidet_kernel_last_error(void) { return hidet::last_error(); }

// Declares kernel `name` (kernel_abi.h): `text` is its signature, JSON of its buffers and dims.
#define HIDET_KERNEL_SIGNATURE(name, text) \
  HIDET_KERNEL_EXPORT const char* hidet_signature_##name(void) { return text; }
