/*
 * numfmt.h - number formats: bit-exact rounding of float32 to FP16, BF16 and FP8 (E4M3, E5M2).
 *
 * Everything here is integer arithmetic on the IEEE-754 bit pattern, so it is exact at any
 * optimisation level (no -ffast-math hazard) and compiles unchanged for the host and, through
 * AMPDIAG_HD, for CUDA devices (device code calls these functions directly: the format table's
 * function pointers in numfmt.c are host pointers). Rounding is round-to-nearest-even, overflow
 * goes to +-inf (NaN in E4M3, which has no infinities), NaN stays a quiet NaN with its sign and
 * subnormals are kept.
 *
 * The thresholds below are the exact float32 bit patterns at which the rounded result changes
 * class (docs/numerics.md, "Rounding to FP16 and BF16", "FP8: E4M3 and E5M2"); tests/t_numfmt.c checks each one
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

/* The same for the OCP FP8 formats (docs/numerics.md, "FP8: E4M3 and E5M2"). E4M3 (E4M3FN) has
 * no infinities: what overflows becomes NaN. */
#define AMPDIAG_E4M3_OVF_BITS    0x43e80001u /* the float32 after 464 = 448 + half ulp (464 ties to even 448) */
#define AMPDIAG_E4M3_NORM_BITS   0x3c700000u /* 2^-6 - 2^-10: |x| >= this rounds to a normal */
#define AMPDIAG_E4M3_UNF_BITS    0x3a800000u /* 2^-10: 0 < |x| <= this rounds to zero */
#define AMPDIAG_E5M2_OVF_BITS    0x47700000u /* 61440 = 57344 + half ulp: |x| >= this -> inf */
#define AMPDIAG_E5M2_NORM_BITS   0x38600000u /* 2^-14 - 2^-17: |x| >= this rounds to a normal */
#define AMPDIAG_E5M2_UNF_BITS    0x37000000u /* 2^-17: 0 < |x| <= this rounds to zero */

/* The largest finite FP8 values (docs/numerics.md), as doubles like AMPDIAG_FP16_MAX. */
#define AMPDIAG_E4M3_MAX 448.0
#define AMPDIAG_E5M2_MAX 57344.0

/*
 * The class thresholds of every row of the format table, in the order of ampdiag_format
 * (FP32, FP16, BF16, E4M3, E5M2): { overflow, normal, underflow } as |x| bit patterns, with
 *   overflow : finite |x| >= it overflows (to inf; to NaN in E4M3);
 *   normal   : |x| >= it rounds to a normal number (or overflows);
 *   underflow: 0 < |x| <= it rounds to zero; between underflow and normal the result is subnormal.
 * FP32's row says that rounding to FP32 is the identity: nothing finite overflows or flushes, and
 * float32 subnormals are held as subnormals. The statistics kernels count these classes.
 */
#define AMPDIAG_CLASS_BITS_TABLE                                                                   \
    {{AMPDIAG_F32_INF, AMPDIAG_F32_MIN_NORMAL, 0u},                                               \
     {AMPDIAG_FP16_OVF_BITS, AMPDIAG_FP16_NORM_BITS, AMPDIAG_FP16_UNF_BITS},                      \
     {AMPDIAG_BF16_OVF_BITS, AMPDIAG_BF16_NORM_BITS, AMPDIAG_BF16_UNF_BITS},                      \
     {AMPDIAG_E4M3_OVF_BITS, AMPDIAG_E4M3_NORM_BITS, AMPDIAG_E4M3_UNF_BITS},                      \
     {AMPDIAG_E5M2_OVF_BITS, AMPDIAG_E5M2_NORM_BITS, AMPDIAG_E5M2_UNF_BITS}}
#define AMPDIAG_CLASS_NFORMATS 5

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
 * The OCP FP8 formats (OFP8 rev 1.0). Both round to nearest, ties to even, keep subnormals and
 * keep the sign of zero. E4M3 (E4M3FN: 1/4/3, bias 7) has no infinities and one NaN per sign,
 * S.1111.111; it is converted in the OCP "non-saturating" mode: a finite |x| beyond 464 (448 +
 * half an ulp), and +-inf, become NaN of the same sign. E5M2 (1/5/2, bias 15) is IEEE-like:
 * |x| >= 61440 (57344 + half an ulp) becomes +-inf. A float32 NaN becomes the NaN S.11111.11
 * (S.1111.111 in E4M3), its sign kept, as PyTorch converts it.
 */

/* |x| bit pattern a (finite, below the format's overflow threshold) -> magnitude code of a
 * binary format with m mantissa bits and exponent bias b, round to nearest even (the FP16
 * conversion above is this with m = 10, b = 15). */
AMPDIAG_HD uint32_t ampdiag_minifloat_mag_rne(uint32_t a, uint32_t m, uint32_t b)
{
    uint32_t shift = 23u - m;
    if (a >= (128u - b) << 23) { /* |x| >= the smallest normal 2^(1-b): rebias by 127 - b */
        uint32_t r = a - ((127u - b) << 23);
        r += ((1u << (shift - 1u)) - 1u) + ((r >> shift) & 1u);
        return r >> shift;
    }
    if (a <= (127u - b - m) << 23) /* at most half the smallest subnormal: the tie goes to 0 */
        return 0;
    /* subnormal result: |x| = f * 2^(e - 150), in units of the smallest subnormal 2^(1-b-m) */
    uint32_t e = a >> 23;
    uint32_t f = (a & 0x7fffffu) | 0x800000u;
    uint32_t s = 151u - b - m - e;
    uint32_t q = f >> s, rem = f & ((1u << s) - 1u), half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++; /* may carry into the smallest normal: right */
    return q;
}

/* float32 -> OCP FP8 E4M3 bit pattern (non-saturating: overflow and inf -> NaN). */
AMPDIAG_HD uint8_t ampdiag_e4m3_bits_rne(float f)
{
    uint32_t u = ampdiag_f32_bits(f);
    uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
    if (a >= AMPDIAG_E4M3_OVF_BITS) /* overflow, inf and NaN */
        return (uint8_t)(sign | 0x7fu);
    return (uint8_t)(sign | ampdiag_minifloat_mag_rne(a, 3u, 7u));
}

/* OCP FP8 E4M3 bit pattern -> float32 (exact). S.1111.111 is a quiet NaN of sign S with the
 * mantissa bits at the top of float32's (0x7ff00000), as PyTorch decodes it and as E5M2 and FP16
 * NaNs decode. */
AMPDIAG_HD float ampdiag_e4m3_bits_to_f32(uint8_t c)
{
    uint32_t sign = ((uint32_t)c & 0x80u) << 24;
    uint32_t e = ((uint32_t)c >> 3) & 0xfu, m = (uint32_t)c & 7u;
    if (e == 0xfu && m == 7u)
        return ampdiag_f32_from_bits(sign | 0x7fc00000u | (m << 20));
    if (e != 0)
        return ampdiag_f32_from_bits(sign | ((e + 120u) << 23) | (m << 20));
    float v = (float)m * 0.001953125f; /* subnormal: m * 2^-9 */
    return sign ? -v : v;
}

/* float32 -> OCP FP8 E5M2 bit pattern (overflow -> +-inf). */
AMPDIAG_HD uint8_t ampdiag_e5m2_bits_rne(float f)
{
    uint32_t u = ampdiag_f32_bits(f);
    uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
    if (a > AMPDIAG_F32_INF)
        return (uint8_t)(sign | 0x7fu);
    if (a >= AMPDIAG_E5M2_OVF_BITS) /* includes inf */
        return (uint8_t)(sign | 0x7cu);
    return (uint8_t)(sign | ampdiag_minifloat_mag_rne(a, 2u, 15u));
}

/* OCP FP8 E5M2 bit pattern -> float32 (exact: E5M2 is the top byte of an FP16 pattern; a NaN
 * keeps its sign and mantissa bits and comes out quiet). */
AMPDIAG_HD float ampdiag_e5m2_bits_to_f32(uint8_t c)
{
    if ((c & 0x7cu) == 0x7cu && (c & 3u))
        return ampdiag_f32_from_bits((((uint32_t)c & 0x80u) << 24) | 0x7fc00000u | (((uint32_t)c & 3u) << 21));
    return ampdiag_fp16_bits_to_f32((uint16_t)((uint32_t)c << 8));
}

AMPDIAG_HD float ampdiag_e4m3_rne(float x) { return ampdiag_e4m3_bits_to_f32(ampdiag_e4m3_bits_rne(x)); }
AMPDIAG_HD float ampdiag_e5m2_rne(float x) { return ampdiag_e5m2_bits_to_f32(ampdiag_e5m2_bits_rne(x)); }

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

/* FP8 with flush to zero: float32 subnormal inputs and subnormal results become signed zeros. */
AMPDIAG_HD float ampdiag_e4m3_rne_ftz(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    if ((u & 0x7fffffffu) < AMPDIAG_E4M3_NORM_BITS)
        return ampdiag_f32_from_bits(u & 0x80000000u);
    return ampdiag_e4m3_rne(x);
}

AMPDIAG_HD float ampdiag_e5m2_rne_ftz(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    if ((u & 0x7fffffffu) < AMPDIAG_E5M2_NORM_BITS)
        return ampdiag_f32_from_bits(u & 0x80000000u);
    return ampdiag_e5m2_rne(x);
}

/*
 * The OCP Microscaling element formats (MX v1.0, section 5.3) and the E8M0 scale (5.4; docs/numerics.md,
 * "Block formats"). E2M1 (1/2/1, bias 1, max 6), E2M3 (1/2/3, bias 1, max 7.5) and E3M2 (1/3/2,
 * bias 3, max 28) have no infinities and no NaN: rounding is to nearest even, subnormals kept,
 * and what rounds beyond the largest value saturates to it (inf included: the MX conversion
 * clamps, and there is no pattern to overflow to). A NaN has no pattern either: encoding gives
 * a zero of its sign, rounding keeps it NaN. E8M0 is an unsigned power of two 2^(c - 127),
 * c = 0..254, 255 = NaN: no zero, no sign, no infinities.
 */
#define AMPDIAG_E2M1_SAT_BITS    0x40e00000u /* 7 = 6 + half ulp (the tie goes to the even 8): |x| >= this saturates to 6 */
#define AMPDIAG_E2M1_NORM_BITS   0x3f400000u /* 0.75: |x| >= this rounds to a normal (>= 1) */
#define AMPDIAG_E2M1_UNF_BITS    0x3e800000u /* 0.25: 0 < |x| <= this rounds to zero */
#define AMPDIAG_E2M3_SAT_BITS    0x40f80000u /* 7.75 = 7.5 + half ulp */
#define AMPDIAG_E2M3_NORM_BITS   0x3f700000u /* 0.9375 = 1 - 2^-4 */
#define AMPDIAG_E2M3_UNF_BITS    0x3d800000u /* 2^-4 */
#define AMPDIAG_E3M2_SAT_BITS    0x41f00000u /* 30 = 28 + half ulp */
#define AMPDIAG_E3M2_NORM_BITS   0x3e600000u /* 0.21875 = 2^-2 - 2^-5 */
#define AMPDIAG_E3M2_UNF_BITS    0x3d000000u /* 2^-5 */
#define AMPDIAG_E8M0_OVF_BITS    0x7f400000u /* 1.5 * 2^127: rounds past 2^127, to NaN */
#define AMPDIAG_E8M0_MIN_BITS    0x00400000u /* 2^-127, the smallest E8M0 value (code 0) */

#define AMPDIAG_E2M1_MAX 6.0
#define AMPDIAG_E2M3_MAX 7.5
#define AMPDIAG_E3M2_MAX 28.0

/* The class thresholds of the rows after E5M2 (E2M1, E2M3, E3M2, E8M0), as AMPDIAG_CLASS_BITS_TABLE
 * (overflow there means saturation; E8M0 holds every positive value it does not overflow as a
 * normal number: nothing flushes). */
#define AMPDIAG_CLASS_BITS_TABLE_MX                                                               \
    {{AMPDIAG_E2M1_SAT_BITS, AMPDIAG_E2M1_NORM_BITS, AMPDIAG_E2M1_UNF_BITS},                      \
     {AMPDIAG_E2M3_SAT_BITS, AMPDIAG_E2M3_NORM_BITS, AMPDIAG_E2M3_UNF_BITS},                      \
     {AMPDIAG_E3M2_SAT_BITS, AMPDIAG_E3M2_NORM_BITS, AMPDIAG_E3M2_UNF_BITS},                      \
     {AMPDIAG_E8M0_OVF_BITS, 1u, 0u}}
#define AMPDIAG_CLASS_NFORMATS_MX 4

/* float32 -> the sign and magnitude code of a saturating MX element format with m mantissa
 * bits and bias b whose codes reach max_code (every exponent pattern is a number): round to
 * nearest even, |x| >= sat_bits (inf included) -> max_code, NaN -> a zero of its sign. The
 * sign is bit nbits - 1. */
AMPDIAG_HD uint8_t ampdiag_mxelem_bits_rne(float f, uint32_t m, uint32_t b, uint32_t sat_bits,
                                           uint32_t max_code, uint32_t nbits)
{
    uint32_t u = ampdiag_f32_bits(f);
    uint32_t sign = (u >> 31) << (nbits - 1u), a = u & 0x7fffffffu;
    if (a > AMPDIAG_F32_INF)
        return (uint8_t)sign;
    if (a >= sat_bits)
        return (uint8_t)(sign | max_code);
    return (uint8_t)(sign | ampdiag_minifloat_mag_rne(a, m, b));
}

/* The code of such a format -> float32 (exact). */
AMPDIAG_HD float ampdiag_mxelem_bits_to_f32(uint32_t c, uint32_t m, uint32_t b, uint32_t nbits)
{
    uint32_t sign = ((c >> (nbits - 1u)) & 1u) << 31;
    uint32_t e = (c >> m) & ((1u << (nbits - 1u - m)) - 1u), mant = c & ((1u << m) - 1u);
    if (e != 0)
        return ampdiag_f32_from_bits(sign | ((e + 127u - b) << 23) | (mant << (23u - m)));
    float v = (float)mant * ampdiag_f32_from_bits((128u - b - m) << 23); /* mant * 2^(1-b-m) */
    return sign ? -v : v;
}

AMPDIAG_HD uint8_t ampdiag_e2m1_bits_rne(float f) { return ampdiag_mxelem_bits_rne(f, 1u, 1u, AMPDIAG_E2M1_SAT_BITS, 0x7u, 4u); }
AMPDIAG_HD uint8_t ampdiag_e2m3_bits_rne(float f) { return ampdiag_mxelem_bits_rne(f, 3u, 1u, AMPDIAG_E2M3_SAT_BITS, 0x1fu, 6u); }
AMPDIAG_HD uint8_t ampdiag_e3m2_bits_rne(float f) { return ampdiag_mxelem_bits_rne(f, 2u, 3u, AMPDIAG_E3M2_SAT_BITS, 0x1fu, 6u); }
AMPDIAG_HD float ampdiag_e2m1_bits_to_f32(uint8_t c) { return ampdiag_mxelem_bits_to_f32(c, 1u, 1u, 4u); }
AMPDIAG_HD float ampdiag_e2m3_bits_to_f32(uint8_t c) { return ampdiag_mxelem_bits_to_f32(c, 3u, 1u, 6u); }
AMPDIAG_HD float ampdiag_e3m2_bits_to_f32(uint8_t c) { return ampdiag_mxelem_bits_to_f32(c, 2u, 3u, 6u); }

/* Round-trips; a NaN stays NaN (quiet, its sign kept) although the formats cannot hold it. */
AMPDIAG_HD float ampdiag_mxelem_nan(float x) { return ampdiag_f32_from_bits(ampdiag_f32_bits(x) | 0x00400000u); }
AMPDIAG_HD float ampdiag_e2m1_rne(float x)
{
    return x != x ? ampdiag_mxelem_nan(x) : ampdiag_e2m1_bits_to_f32(ampdiag_e2m1_bits_rne(x));
}
AMPDIAG_HD float ampdiag_e2m3_rne(float x)
{
    return x != x ? ampdiag_mxelem_nan(x) : ampdiag_e2m3_bits_to_f32(ampdiag_e2m3_bits_rne(x));
}
AMPDIAG_HD float ampdiag_e3m2_rne(float x)
{
    return x != x ? ampdiag_mxelem_nan(x) : ampdiag_e3m2_bits_to_f32(ampdiag_e3m2_bits_rne(x));
}

/* float32 -> E8M0 code, to the nearest power of two with ties (1.5 * 2^k) upward, as ml_dtypes
 * converts: NaN, +-inf, zero and negative values -> 255 (NaN); a float32 subnormal above 2^-127
 * -> 1 (2^-126), up to 2^-127 -> 0 (2^-127, there is no zero); from 1.5 * 2^127 on -> 255. The
 * MX scale rules do not round a value: they find the exponent themselves (blockfmt.c). */
AMPDIAG_HD uint8_t ampdiag_e8m0_bits_rne(float f)
{
    uint32_t u = ampdiag_f32_bits(f);
    if (u == 0 || u >= AMPDIAG_F32_INF) /* zero, sign set (negative, -0, -inf, negative NaN), +inf, NaN */
        return 0xffu;
    if (u < AMPDIAG_F32_MIN_NORMAL)
        return u > AMPDIAG_E8M0_MIN_BITS ? 1u : 0u;
    uint32_t c = (u + 0x00400000u) >> 23;
    return (uint8_t)(c > 0xffu ? 0xffu : c);
}

AMPDIAG_HD float ampdiag_e8m0_bits_to_f32(uint8_t c)
{
    if (c == 0xffu)
        return ampdiag_f32_from_bits(0x7fc00000u);
    return ampdiag_f32_from_bits(c == 0 ? AMPDIAG_E8M0_MIN_BITS : (uint32_t)c << 23);
}

AMPDIAG_HD float ampdiag_e8m0_rne(float x) { return ampdiag_e8m0_bits_to_f32(ampdiag_e8m0_bits_rne(x)); }

/* The vector paths ampdiag_round_array takes on this CPU (numfmt.c): 1 F16C (FP16), 2 AVX2
 * (BF16), 4 AVX-512F (both); 0 with AMPDIAG_ROUND_IMPL=generic. */
#ifndef __CUDACC__
int ampdiag_round_simd_caps(void);
#endif

#endif /* AMPDIAG_NUMFMT_H */
