// Support code for CPU kernel libraries: 16-bit float storage types and their conversions.
// Arithmetic on float16/bfloat16 runs in float32 (as torch's CPU kernels do); values are rounded
// to nearest-even when stored.
#pragma once

#include <cstring>

#include "hidet/kernel/common.h"

namespace hidet {

struct f16 {
  uint16_t bits;
};
struct bf16 {
  uint16_t bits;
};

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float to_float(bf16 h) { return bits_float(uint32_t(h.bits) << 16); }

inline float to_float(f16 h) {
  uint32_t sign = uint32_t(h.bits & 0x8000) << 16, exp = (h.bits >> 10) & 0x1f, mant = h.bits & 0x3ff;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000 | (mant << 13));  // inf / nan
  if (exp == 0) {                                                        // zero / subnormal
    float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

template <typename T>
T from_float(float f);

template <>
inline bf16 from_float<bf16>(float f) {
  uint32_t u = float_bits(f);
  if (is_nan(f)) return bf16{uint16_t((u >> 16) | 0x40)};
  return bf16{uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16)};
}

template <>
inline f16 from_float<f16>(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000);
  uint32_t a = u & 0x7fffffff;
  if (a >= 0x7f800000) return f16{uint16_t(sign | 0x7c00 | (a > 0x7f800000 ? 0x200 : 0))};  // inf / nan
  if (a >= 0x477ff000) return f16{uint16_t(sign | 0x7c00)};  // rounds past 65504: inf
  if (a < 0x38800000) {  // below the smallest normal: a subnormal, rounded to nearest even by the FPU
    float v = bits_float(a) * 16777216.0f;  // in units of 2^-24
    return f16{uint16_t(sign | uint16_t(std::nearbyint(v)))};
  }
  uint32_t rounded = a + 0xfff + ((a >> 13) & 1);  // round to nearest even on the 13 dropped bits
  return f16{uint16_t(sign | ((rounded - 0x38000000) >> 13))};
}

inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }

}  // namespace hidet
