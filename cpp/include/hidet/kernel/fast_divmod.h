// Division by a divisor that is fixed for a kernel launch but only known at run time (a symbolic
// dimension such as a sequence length). A 64-bit division is a long subroutine on the GPU, while a
// division by a compile-time constant is a multiply-high and shifts; FastDivmod gives run-time divisors
// the same: the launch computes the magic multiplier once on the host, the kernel receives it as a
// parameter (hidet's codegen does this for every integer `/` and `%` whose divisor is made of the
// kernel's scalar parameters).
//
// The method is Granlund & Montgomery, "Division by invariant integers using multiplication" (PLDI
// 1994), figure 4.1, with N = 64: exact for every dividend in [0, 2^63) and divisor >= 1. Negative
// dividends and divisors < 1 divide natively (C semantics: truncation).
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define HIDET_FDM_HD __host__ __device__ __forceinline__
#else
#define HIDET_FDM_HD inline
#endif

namespace hidet {

struct FastDivmod {
  int64_t divisor = 1;
  uint64_t magic = 1;  // floor(2^64 * (2^l - d) / d) + 1, l = ceil(log2(d))
  uint32_t shift1 = 0;  // min(l, 1)
  uint32_t shift2 = 0;  // max(l - 1, 0)

  FastDivmod() = default;

  // Host only: the 128-bit division runs once per launch.
  explicit FastDivmod(int64_t d) : divisor(d) {
    if (d <= 0) return;
    uint32_t l = 0;
    while (l < 63 && (uint64_t(1) << l) < uint64_t(d)) ++l;
    unsigned __int128 numerator = static_cast<unsigned __int128>((uint64_t(1) << l) - uint64_t(d)) << 64;
    magic = uint64_t(numerator / uint64_t(d)) + 1;
    shift1 = l < 1 ? l : 1;
    shift2 = l > 0 ? l - 1 : 0;
  }

  HIDET_FDM_HD static uint64_t mul_hi(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
    return __umul64hi(a, b);
#else
    return uint64_t((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
  }

  HIDET_FDM_HD int64_t div(int64_t n) const {
    if (n < 0 || divisor <= 0) return n / divisor;
    uint64_t t = mul_hi(magic, uint64_t(n));
    return int64_t((t + ((uint64_t(n) - t) >> shift1)) >> shift2);
  }

  HIDET_FDM_HD int64_t mod(int64_t n) const { return n - div(n) * divisor; }
};

}  // namespace hidet

#undef HIDET_FDM_HD
