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

// The conversions below are branch-free (selects through bit masks made by arithmetic shifts, which
// g++ cannot turn back into branches) so that loops converting float16/bfloat16 arrays vectorize.
// mask_if_less(a, b): all ones where a < b, else 0 (for a, b < 2^31).
inline uint32_t mask_if_less(uint32_t a, uint32_t b) { return uint32_t(int32_t(a - b) >> 31); }

inline float to_float(f16 h) {
  uint32_t em = h.bits & 0x7fffu, sign = uint32_t(h.bits & 0x8000u) << 16;
  // exponent and mantissa moved into place and rebiased by a multiply (exact, subnormals included)
  uint32_t r = float_bits(bits_float(em << 13) * 0x1p112f);
  r |= ~mask_if_less(em, 0x7c00u) & 0x7f800000u;  // inf / nan
  return bits_float(r | sign);
}

template <typename T>
T from_float(float f);

template <>
inline bf16 from_float<bf16>(float f) {
  uint32_t u = float_bits(f);
  uint32_t nan_mask = mask_if_less(0x7f800000u, u & 0x7fffffffu);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // round to nearest even
  return bf16{uint16_t((((u >> 16) | 0x40u) & nan_mask) | (rounded & ~nan_mask))};
}

template <>
inline f16 from_float<f16>(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  // normal: round to nearest even on the 13 dropped bits, then rebias
  uint32_t normal = (a + 0xfffu + ((a >> 13) & 1u) - 0x38000000u) >> 13;
  // below the smallest normal: adding 0.5 makes the FPU round to a multiple of 2^-24 (nearest even)
  uint32_t subnormal = float_bits(bits_float(a) + 0.5f) - 0x3f000000u;
  uint32_t special = 0x7c00u | (mask_if_less(0x7f800000u, a) & 0x200u);  // inf (rounds past 65504) / nan
  uint32_t is_sub = mask_if_less(a, 0x38800000u), is_big = ~mask_if_less(a, 0x477ff000u);
  uint32_t r = (subnormal & is_sub) | (normal & ~is_sub);
  r = (special & is_big) | (r & ~is_big);
  return f16{uint16_t(sign | r)};
}

// Copy `Bytes` bytes (the CPU side of a vectorized access).
template <int Bytes>
inline void copy_vector(void* dst, const void* src) { std::memcpy(dst, src, Bytes); }

inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline float one_plus_tanh(float x) { return 1.0f + std::tanh(x); }
inline double one_plus_tanh(double x) { return 1.0 + std::tanh(x); }

}  // namespace hidet
