/*
 * vmath.h - exp and tanh for the CPU backend's element loops, written so that the compiler
 * vectorises the loops they sit in: no call, no branch (selects only), no table, integer work
 * only on the exponent. The same IEEE operations in the same order whatever the vector width,
 * and no FMA contraction (-std=c11 keeps it off), so a loop gives the same bits scalar, SSE2 or
 * AVX2 (the backend's compiler clones and its portable path agree bit for bit). AMPDIAG_HD
 * (numfmt.h): the CUDA kernel bodies (kernels/bodies.h) call the same functions, so
 * that the device computes the CPU's bits.
 *
 * vexpf: Cody-Waite reduction x = k ln2 + r (|r| <= ln2/2; ln2 split in two so that k ln2 is
 * exact) and Cephes' degree-6 polynomial for exp(r), scaled by 2^k through the exponent bits.
 * Largest error against exp computed in double, over every float32 in [-87, 88]: 0.99 ulp
 * (tests/t_layers.c checks a sample of them against the bound below). Outside that range: +inf above
 * 88 (expf overflows at 88.72), 0 below -87 (expf is then below 1.7e-38, a subnormal from
 * -87.34 on); NaN gives NaN, -inf 0, +inf +inf.
 *
 * vtanhf: 1 - 2 / (exp(2u) + 1), saturating to +-1 (exp overflow to inf, or 0); absolute error
 * within 1.8e-7 of tanh in double over every float32 in [-20, 20] (tests/t_layers.c); NaN gives NaN.
 */
#ifndef AMPDIAG_NUMERICS_VMATH_H
#define AMPDIAG_NUMERICS_VMATH_H

#include "numerics/numfmt.h"

#include <stdint.h>

/* Always inlined on the host: a kernel instantiated once per rounding kind (backend_cpu.c) can
 * outgrow the compiler's inlining budget, and a call left in its loop stops it vectorising. */
#if defined(__CUDACC__)
#define VMATH_FN AMPDIAG_HD
#else
#define VMATH_FN static inline __attribute__((always_inline))
#endif

/* what tests/t_layers.c holds vexpf and vtanhf to over their ranges */
#define VEXPF_MAX_ULP 1.0
#define VTANHF_MAX_ABS 2e-7

VMATH_FN float vexpf(float x)
{
    const float log2e = 1.44269504088896341f, magic = 0x1.8p23f; /* 1.5 * 2^23: round to int */
    const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f; /* ln2_hi has 9 bits: k ln2_hi exact */
    float xc = x > 88.0f ? 88.0f : x; /* NaN compares false and stays NaN */
    xc = xc < -87.0f ? -87.0f : xc;
    float k = (xc * log2e + magic) - magic; /* nearest integer, in [-126, 127]; NaN for NaN */
    float r = xc - k * ln2_hi;
    r = r - k * ln2_lo;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    float kc = k == k ? k : 0.0f; /* NaN (p is NaN then) converted to int would be undefined */
    float y = p * ampdiag_f32_from_bits((uint32_t)((int32_t)kc + 127) << 23);
    y = x > 88.0f ? ampdiag_f32_from_bits(AMPDIAG_F32_INF) : y;
    return x < -87.0f ? 0.0f : y;
}

VMATH_FN float vtanhf(float u) { return 1.0f - 2.0f / (vexpf(2.0f * u) + 1.0f); }

#endif
