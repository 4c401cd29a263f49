/*
 * numfmt.h - number formats: bit-exact rounding of float32 to FP16 and BF16.
 *
 * Everything here is integer arithmetic on the IEEE-754 bit pattern, so it is exact at any
 * optimisation level (no -ffast-math hazard) and compiles unchanged for the host and, through
 * AMPDIAG_HD, for CUDA devices. Rounding is round-to-nearest-even, overflow goes to +-inf, NaN
 * stays a quiet NaN with its sign and top payload bits, and subnormals are kept.
 *
 * The thresholds below are the exact float32 bit patterns at which the rounded result changes
 * class (docs/numerics.md, "Rounding to FP16 and BF16"); tests/t_numfmt.c checks each one
 * against the converters.
 */
#ifndef AMPDIAG_NUMFMT_H
#define AMPDIAG_NUMFMT_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define AMPDIAG_HD static __host__ __device__ __forceinline__
#else
#define AMPDIAG_HD static inline
#endif

/* The largest finite FP16 value, (2 - 2^-10) * 2^15 = 65504 (bit pattern 0x7bff; docs/numerics.md,
 * "The formats"): what headroom is measured against. A double, so that an expression such as
 * log2(AMPDIAG_FP16_MAX / absmax) is computed in double whatever absmax's type. The format table
 * (ampdiag_format_get) holds the same value as max_finite. */
#define AMPDIAG_FP16_MAX 65504.0

/* |x| bit patterns (sign cleared) at which FP16/BF16 rounding changes class. */
#define AMPDIAG_F32_INF          0x7f800000u /* +inf; larger |x| patterns are NaN */
#define AMPDIAG_FP16_OVF_BITS    0x477ff000u /* 65520 = 65504 + half ulp: |x| >= this -> inf */
#define AMPDIAG_FP16_NORM_BITS   0x387fe000u /* 2^-14 - 2^-25: |x| >= this rounds to a normal */
#define AMPDIAG_FP16_UNF_BITS    0x33000000u /* 2^-25: 0 < |x| <= this rounds to zero */
#define AMPDIAG_BF16_OVF_BITS    0x7f7f8000u /* 2^128 - 2^119: |x| >= this -> inf */
#define AMPDIAG_BF16_NORM_BITS   0x007f8000u /* |x| >= this rounds to a normal (>= 2^-126) */
#define AMPDIAG_BF16_UNF_BITS    0x00008000u /* 2^-134: 0 < |x| <= this rounds to zero */
#define AMPDIAG_F32_MIN_NORMAL   0x00800000u /* 2^-126 */

AMPDIAG_HD uint32_t ampdiag_f32_bits(float f)
{
#if defined(__CUDA_ARCH__)
    return (uint32_t)__float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

AMPDIAG_HD float ampdiag_f32_from_bits(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* float32 -> IEEE binary16 bit pattern, round to nearest even. */
AMPDIAG_HD uint16_t ampdiag_fp16_bits_rne(float f)
{
    uint32_t u = ampdiag_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > AMPDIAG_F32_INF) /* NaN: quiet it, keep the top 9 payload bits (as F16C does) */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= AMPDIAG_FP16_OVF_BITS) /* includes inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* |x| >= 2^-14: normal; rebias the exponent by 127 - 15 */
        uint32_t r = a - 0x38000000u;
        r += 0x0fffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a <= AMPDIAG_FP16_UNF_BITS) /* at most 2^-25: the tie at 2^-25 goes to even, i.e. zero */
        return (uint16_t)sign;
    /* subnormal result: value = m * 2^(e - 150); in units of 2^-24 that is m >> (126 - e) */
    uint32_t e = a >> 23;                       /* 102 .. 112 here */
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;                  /* 14 .. 24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;                                    /* may carry into the min normal 0x0400: right */
    return (uint16_t)(sign | q);
}

/* IEEE binary16 bit pattern -> float32 (exact). */
AMPDIAG_HD float ampdiag_fp16_bits_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t m = (uint32_t)h & 0x3ffu;
    if (e == 0x1fu) /* inf or NaN: payload moves to the top of the float32 mantissa */
        return ampdiag_f32_from_bits(sign | 0x7f800000u | (m << 13));
    if (e != 0)
        return ampdiag_f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0)
        return ampdiag_f32_from_bits(sign);
    /* subnormal: m * 2^-24, exact in float32 */
    float v = (float)m * 5.9604644775390625e-8f;
    return sign ? -v : v;
}

/* float32 -> bfloat16 bit pattern, round to nearest even (PyTorch c10 rounding). */
AMPDIAG_HD uint16_t ampdiag_bf16_bits_rne(float f)
{
    uint32_t u = ampdiag_f32_bits(f);
    if ((u & 0x7fffffffu) > AMPDIAG_F32_INF)
        return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN, sign and top payload kept */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

AMPDIAG_HD float ampdiag_bf16_bits_to_f32(uint16_t b)
{
    return ampdiag_f32_from_bits((uint32_t)b << 16);
}

/* Round-trips through the 16-bit formats, result stored in float32 (the CPU emulation). */
AMPDIAG_HD float ampdiag_fp16_rne(float x) { return ampdiag_fp16_bits_to_f32(ampdiag_fp16_bits_rne(x)); }
AMPDIAG_HD float ampdiag_bf16_rne(float x) { return ampdiag_bf16_bits_to_f32(ampdiag_bf16_bits_rne(x)); }

/*
 * Flush-to-zero variants, for hardware that flushes denormals (TPU, Intel VCVTNEPS2BF16, AMD
 * MI200 FP16 matrix units): float32 subnormal inputs are read as zero, and a result that would
 * be subnormal in the target format becomes a zero of the same sign.
 */
AMPDIAG_HD float ampdiag_fp16_rne_ftz(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    if ((u & 0x7fffffffu) < AMPDIAG_F32_MIN_NORMAL)
        return ampdiag_f32_from_bits(u & 0x80000000u);
    uint16_t h = ampdiag_fp16_bits_rne(x);
    if ((h & 0x7c00u) == 0)
        h &= 0x8000u;
    return ampdiag_fp16_bits_to_f32(h);
}

AMPDIAG_HD float ampdiag_bf16_rne_ftz(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    if ((u & 0x7fffffffu) < AMPDIAG_F32_MIN_NORMAL) /* a normal input never rounds to a bf16 subnormal */
        return ampdiag_f32_from_bits(u & 0x80000000u);
    return ampdiag_bf16_rne(x);
}

#endif /* AMPDIAG_NUMFMT_H */
