// FastDivmod (hidet/kernel/fast_divmod.h): the host computes the magic numbers that CUDA kernels divide
// run-time dimensions with; the same division runs here on the host (the device differs only in its
// multiply-high), checked against native division.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "hidet/kernel/fast_divmod.h"

namespace {

std::vector<int64_t> divisors() {
  std::vector<int64_t> ds;
  for (int64_t d = 1; d <= 4096; ++d) ds.push_back(d);
  for (int s = 1; s < 63; ++s) {
    int64_t p = int64_t(1) << s;
    ds.insert(ds.end(), {p - 1, p, p + 1, 3 * (p / 2) + 1});
  }
  ds.push_back(INT64_MAX);
  ds.push_back(INT64_MAX - 1);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) ds.push_back(int64_t(rng() >> (1 + rng() % 62)) + 1);
  return ds;
}

std::vector<int64_t> dividends(int64_t d, std::mt19937_64& rng) {
  std::vector<int64_t> ns = {0, 1, 2, d - 1, d, d + 1, INT64_MAX, INT64_MAX - 1, INT64_MAX / d * d,
                             INT64_MAX / d * d - 1};
  for (int64_t q : {int64_t(1), int64_t(2), int64_t(3), int64_t(1000), int64_t(1) << 20, int64_t(1) << 40}) {
    if (q <= INT64_MAX / d) {
      ns.push_back(q * d);
      ns.push_back(q * d - 1);
      if (q * d < INT64_MAX) ns.push_back(q * d + 1);
    }
  }
  for (int i = 0; i < 64; ++i) ns.push_back(int64_t(rng() >> (1 + rng() % 63)));
  return ns;
}

TEST(FastDivmod, MatchesNativeDivisionForNonNegativeDividends) {
  std::mt19937_64 rng(11);
  for (int64_t d : divisors()) {
    hidet::FastDivmod f(d);
    for (int64_t n : dividends(d, rng)) {
      if (n < 0) continue;
      ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
      ASSERT_EQ(f.mod(n), n % d) << n << " % " << d;
    }
  }
}

TEST(FastDivmod, SmallDividendsExhaustively) {
  for (int64_t d = 1; d <= 300; ++d) {
    hidet::FastDivmod f(d);
    for (int64_t n = 0; n < 100000; ++n) ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
  }
}

TEST(FastDivmod, NegativeDividendsTruncateAsC) {
  for (int64_t d : {int64_t(1), int64_t(3), int64_t(7), int64_t(384), int64_t(1) << 40}) {
    hidet::FastDivmod f(d);
    for (int64_t n : {int64_t(-1), int64_t(-2), int64_t(-385), -d, -d - 1, INT64_MIN + 1}) {
      EXPECT_EQ(f.div(n), n / d);
      EXPECT_EQ(f.mod(n), n % d);
    }
  }
}

TEST(FastDivmod, NonPositiveDivisorsDivideNatively) {
  hidet::FastDivmod f(-3);
  EXPECT_EQ(f.div(10), -3);
  EXPECT_EQ(f.mod(10), 1);
}

}  // namespace
