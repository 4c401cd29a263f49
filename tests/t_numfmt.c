/*
 * t_numfmt.c - number formats: exact FP16/BF16/FP8 rounding against independent references,
 * and the format table (limits, class thresholds, swamping ratios) against the rounding.
 *
 * References: the CPU's own F16C conversion (vcvtps2ph / vcvtph2ps) for FP16; for FP16 and
 * BF16 a rounding written from the definition in double precision (nearest representable
 * value, ties to the even significand, overflow to inf once the rounded value leaves the
 * format); for the OCP FP8 formats an oracle built from the OFP8 definition alone: the 256
 * codes decoded by the formula, the finite values sorted, the nearest one picked with ties to
 * the even code, and OCP's overflow rule (beyond the largest finite value plus half an ulp:
 * NaN in E4M3, inf in E5M2). By default a stratified sample of float32 inputs is checked (every
 * 61st bit pattern plus neighbourhoods of every threshold); AMPDIAG_EXHAUSTIVE=1 (make
 * check-exhaustive) checks all 2^32 patterns.
 */
#include "ampdiag.h"
#include "numerics/numfmt.h"
#include "tap.h"

#include <float.h>
#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_F16C_BUILD 1
__attribute__((target("f16c"))) static uint16_t f16c_encode(float x)
{
    return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) static float f16c_decode(uint16_t h) { return _cvtsh_ss(h); }
#endif

static float fbits(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

/* Round |x| to a format with p significand bits, min normal exponent emin and max exponent
 * emax, from the definition, in double (every step exact). */
static float ref_round(float x, int p, int emin, int emax)
{
    if (isnan(x)) return x;
    if (isinf(x) || x == 0) return x;
    double ax = fabs((double)x);
    int e;
    frexp(ax, &e);
    e -= 1; /* ax in [2^e, 2^(e+1)) */
    if (e < emin) e = emin;
    double ulp = ldexp(1.0, e - p + 1);
    double q = ax / ulp;
    double lo = floor(q), frac = q - lo;
    if (frac > 0.5 || (frac == 0.5 && fmod(lo, 2.0) != 0.0)) lo += 1.0;
    double r = lo * ulp;
    if (r >= ldexp(1.0, emax + 1)) r = INFINITY;
    float fr = (float)r;
    return signbit(x) ? -fr : fr;
}
static float ref_fp16(float x) { return ref_round(x, 11, -14, 15); }
static float ref_bf16(float x) { return ref_round(x, 8, -126, 127); }

static int is_quiet_nan16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x0200); }

static void test_all_16bit_patterns(void)
{
    int bad_h = 0, bad_b = 0, bad_nan = 0, bad_f16c = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = ampdiag_fp16_decode(h);
        uint16_t back = ampdiag_fp16_encode(f);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan) {
            /* NaN stays NaN, keeps sign and payload, and is quiet */
            if (!isnan(f) || back != (h | 0x0200) || !is_quiet_nan16(back)) bad_nan++;
        } else if (back != h) {
            bad_h++;
        }
#ifdef HAVE_F16C_BUILD
        if (__builtin_cpu_supports("f16c") && !same_bits(f, f16c_decode(h)) &&
            !(is_nan && isnan(f16c_decode(h)) && (tap_fbits(f16c_decode(h)) | 0x400000u) == (tap_fbits(f) | 0x400000u)))
            bad_f16c++;
#endif
        float g = ampdiag_bf16_decode(h);
        uint16_t bback = ampdiag_bf16_encode(g);
        int b_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
        if (b_nan) {
            if (!isnan(g) || bback != (h | 0x0040)) bad_nan++;
        } else if (bback != h) {
            bad_b++;
        }
    }
    ok(bad_h == 0, "all 63488 non-NaN FP16 patterns decode and re-encode to themselves (%d bad)", bad_h);
    ok(bad_b == 0, "all 65024 non-NaN BF16 patterns decode and re-encode to themselves (%d bad)", bad_b);
    ok(bad_nan == 0, "every FP16/BF16 NaN pattern decodes to NaN and re-encodes as the same quiet NaN (%d bad)", bad_nan);
#ifdef HAVE_F16C_BUILD
    if (__builtin_cpu_supports("f16c"))
        ok(bad_f16c == 0, "FP16 decode agrees with F16C vcvtph2ps on all 65536 patterns (%d bad)", bad_f16c);
    else
        skip("CPU has no F16C: FP16 decode not compared with hardware");
#else
    skip("not an x86-64 GCC/Clang build: no F16C comparison");
#endif
}

/* ---- the OCP FP8 oracle: from the definition, independent of numfmt.h ---- */
struct fp8_oracle {
    const char *name;
    ampdiag_format fmt;
    int ebits, mbits, bias, has_inf;
    int n;                     /* non-negative finite values, ascending */
    double val[128];
    uint8_t code[128];
    double virt;               /* one ulp above the largest: what unbounded rounding would give */
    uint8_t nan_code, inf_code;
};

/* Magnitude code c (sign bit clear) of a binary format: (1 + m / 2^M) 2^(e - bias), or
 * m / 2^M 2^(1 - bias) for e = 0 (OFP8 section 5.3). */
static double minifloat_value(const struct fp8_oracle *o, unsigned c)
{
    unsigned e = c >> o->mbits, m = c & ((1u << o->mbits) - 1u);
    double frac = (double)m / (double)(1u << o->mbits);
    return e ? ldexp(1.0 + frac, (int)e - o->bias) : ldexp(frac, 1 - o->bias);
}

/* Whether magnitude code c is a special (NaN or inf) in OFP8: E4M3 has only S.1111.111 (NaN);
 * E5M2 is IEEE-like (exponent all ones: inf with m = 0, NaN otherwise). */
static int minifloat_special(const struct fp8_oracle *o, unsigned c)
{
    unsigned emax_field = (1u << o->ebits) - 1u;
    if (o->has_inf)
        return (c >> o->mbits) == emax_field;
    return c == 0x7fu;
}

static void fp8_oracle_init(struct fp8_oracle *o)
{
    o->n = 0;
    for (unsigned c = 0; c < 128; c++)
        if (!minifloat_special(o, c)) {
            o->val[o->n] = minifloat_value(o, c);
            o->code[o->n++] = (uint8_t)c;
        }
    int e;
    frexp(o->val[o->n - 1], &e); /* the largest value's binade is [2^(e-1), 2^e) */
    o->virt = o->val[o->n - 1] + ldexp(1.0, e - 1 - o->mbits);
}

/* The FP8 code of x by the definition. */
static uint8_t fp8_oracle_encode(const struct fp8_oracle *o, float x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x))
        return (uint8_t)(o->nan_code | sign);
    if (isinf(x))
        return (uint8_t)((o->has_inf ? o->inf_code : o->nan_code) | sign);
    double ax = fabs((double)x);
    const double *v = o->val;
    int top = o->n - 1;
    uint8_t ovf = o->has_inf ? o->inf_code : o->nan_code;
    if (ax >= v[top]) { /* the largest value or beyond it: nearer to it, or to the next, even code on a tie */
        double d1 = ax - v[top], d2 = o->virt - ax;
        int up = d2 < d1 || (d2 == d1 && (o->code[top] & 1u));
        return (uint8_t)((up ? ovf : o->code[top]) | sign);
    }
    int lo = 0, hi = top; /* v[lo] <= ax < v[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v[mid] <= ax) lo = mid; else hi = mid;
    }
    double d1 = ax - v[lo], d2 = v[hi] - ax;
    int up = d2 < d1 || (d2 == d1 && (o->code[lo] & 1u));
    return (uint8_t)(o->code[up ? hi : lo] | sign);
}

static struct fp8_oracle oracles[2] = {
    {"e4m3", AMPDIAG_E4M3, 4, 3, 7, 0, 0, {0}, {0}, 0, 0x7f, 0},
    {"e5m2", AMPDIAG_E5M2, 5, 2, 15, 1, 0, {0}, {0}, 0, 0x7f, 0x7c},
};

/* ---- the OCP MX element formats (MX v1.0 section 5.3) from the definition: every code is a
 * number (no inf, no NaN), the finite values sorted, the nearest one picked with ties to the
 * even code, and what lies beyond the largest value plus half an ulp saturates to it. ---- */
static struct fp8_oracle mx_oracles[3] = {
    {"e2m1", AMPDIAG_E2M1, 2, 1, 1, 0, 0, {0}, {0}, 0, 0, 0},
    {"e2m3", AMPDIAG_E2M3, 2, 3, 1, 0, 0, {0}, {0}, 0, 0, 0},
    {"e3m2", AMPDIAG_E3M2, 3, 2, 3, 0, 0, {0}, {0}, 0, 0, 0},
};

static void mx_oracle_init(struct fp8_oracle *o)
{
    o->n = 0;
    for (unsigned c = 0; c < (1u << (o->ebits + o->mbits)); c++) {
        o->val[o->n] = minifloat_value(o, c);
        o->code[o->n++] = (uint8_t)c;
    }
    int e;
    frexp(o->val[o->n - 1], &e);
    o->virt = o->val[o->n - 1] + ldexp(1.0, e - 1 - o->mbits);
}

/* The code of x (sign bit 1 << (ebits + mbits)); *sat := whether it saturated (rounding without
 * an upper bound would have gone beyond the largest value). NaN: a zero of its sign. */
static uint8_t mx_oracle_encode(const struct fp8_oracle *o, float x, int *sat)
{
    uint8_t sign = signbit(x) ? (uint8_t)(1u << (o->ebits + o->mbits)) : 0;
    *sat = 0;
    if (isnan(x))
        return sign;
    double ax = fabs((double)x);
    const double *v = o->val;
    int top = o->n - 1;
    if (ax >= v[top]) {
        double d1 = ax - v[top], d2 = o->virt - ax;
        *sat = isinf(x) || d2 < d1 || (d2 == d1 && (o->code[top] & 1u));
        return (uint8_t)(o->code[top] | sign);
    }
    int lo = 0, hi = top;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v[mid] <= ax) lo = mid; else hi = mid;
    }
    double d1 = ax - v[lo], d2 = v[hi] - ax;
    int up = d2 < d1 || (d2 == d1 && (o->code[lo] & 1u));
    return (uint8_t)(o->code[up ? hi : lo] | sign);
}

/* E8M0 by the definition: 2^(c - 127); x rounds to the nearest power of two with ties (1.5 x
 * 2^k) upward, as ml_dtypes does; zero, negative, NaN, inf and what rounds past 2^127 are NaN
 * (255); a float32 subnormal rounds to 2^-127 up to it and to 2^-126 above it. */
static uint8_t e8m0_oracle_encode(float x)
{
    if (!(x > 0) || isinf(x))
        return 0xff;
    double ax = (double)x;
    if (ax <= ldexp(1.0, -127))
        return 0;
    if (ax < ldexp(1.0, -126))
        return 1;
    int e;
    frexp(ax, &e); /* ax in [2^(e-1), 2^e) */
    int c = (ax >= 1.5 * ldexp(1.0, e - 1) ? e : e - 1) + 127;
    return c > 254 ? 0xff : (uint8_t)c;
}

static uint8_t mx_encode(ampdiag_format f, float x)
{
    return (uint8_t)ampdiag_format_get(f)->encode(x);
}

static uint8_t fp8_encode(ampdiag_format f, float x)
{
    return f == AMPDIAG_E4M3 ? ampdiag_e4m3_encode(x) : ampdiag_e5m2_encode(x);
}
static float fp8_decode(ampdiag_format f, uint8_t c)
{
    return f == AMPDIAG_E4M3 ? ampdiag_e4m3_decode(c) : ampdiag_e5m2_decode(c);
}

static void test_fp8_codes(void)
{
    for (int k = 0; k < 2; k++) {
        const struct fp8_oracle *o = &oracles[k];
        int bad_dec = 0, bad_rt = 0, bad_nan = 0;
        for (unsigned c = 0; c < 256; c++) {
            float got = fp8_decode(o->fmt, (uint8_t)c);
            unsigned mag = c & 0x7fu;
            int neg = (c & 0x80u) != 0;
            if (minifloat_special(o, mag)) {
                int want_inf = o->has_inf && (mag & ((1u << o->mbits) - 1u)) == 0;
                if (want_inf ? !(isinf(got) && (got < 0) == neg) : !(isnan(got) && (signbit(got) != 0) == neg))
                    bad_nan++;
                /* a NaN comes back as the one NaN code of its sign */
                uint8_t back = fp8_encode(o->fmt, got);
                if (!want_inf && back != (uint8_t)(o->nan_code | (c & 0x80u)))
                    bad_nan++;
                if (want_inf && back != c)
                    bad_rt++;
                continue;
            }
            double want = minifloat_value(o, mag);
            if ((double)got != (neg ? -want : want) || (signbit(got) != 0) != neg)
                bad_dec++;
            if (fp8_encode(o->fmt, got) != c)
                bad_rt++;
        }
        ok(bad_dec == 0, "%s: all finite codes decode to the OFP8 formula's value (%d bad)", o->name, bad_dec);
        ok(bad_rt == 0, "%s: every non-NaN code decodes and re-encodes to itself (%d bad)", o->name, bad_rt);
        ok(bad_nan == 0, "%s: NaN%s codes decode as such, signs kept; NaN re-encodes as S.%s (%d bad)", o->name,
           o->has_inf ? " and inf" : "", o->has_inf ? "11111.11" : "1111.111", bad_nan);
    }
    ok(oracles[0].n == 127 && oracles[0].val[126] == 448.0 && oracles[0].virt == 480.0,
       "e4m3: 127 non-negative finite values, the largest 448, one ulp above it 480");
    ok(oracles[1].n == 124 && oracles[1].val[123] == 57344.0 && oracles[1].virt == 65536.0,
       "e5m2: 124 non-negative finite values, the largest 57344, one ulp above it 65536");
}

struct sweep {
    uint64_t checked, bad_f16c, bad_ref16, bad_ref_b16, bad_ftz;
    uint64_t checked8, bad_fp8[2], bad_fp8_ftz, bad_class, bad_mx[3], bad_mx_round, bad_mx_ftz, bad_e8m0;
    uint32_t first_bad_mx[3];
    uint32_t first_bad, first_bad_fp8[2];
};

/* The class of x in format f from the rounded value itself (not from thresholds). */
static ampdiag_class class_from_rounding(ampdiag_format f, float x)
{
    if (isnan(x)) return AMPDIAG_CLASS_NAN;
    if (isinf(x)) return AMPDIAG_CLASS_INF;
    if (x == 0) return AMPDIAG_CLASS_ZERO;
    float r = ampdiag_round(f, x);
    if (f == AMPDIAG_E8M0) /* unsigned: the class of |x| */
        return isnan(ampdiag_round(f, fabsf(x))) ? AMPDIAG_CLASS_OVERFLOW : AMPDIAG_CLASS_NORMAL;
    for (int k = 0; k < 3; k++) /* the MX elements saturate: overflow is what would round beyond the max */
        if (mx_oracles[k].fmt == f) {
            int sat;
            mx_oracle_encode(&mx_oracles[k], x, &sat);
            if (sat) return AMPDIAG_CLASS_OVERFLOW;
        }
    if (!isfinite(r)) return AMPDIAG_CLASS_OVERFLOW;
    if (r == 0) return AMPDIAG_CLASS_UNDERFLOW;
    return fabsf(r) < ampdiag_format_get(f)->min_normal ? AMPDIAG_CLASS_SUBNORMAL : AMPDIAG_CLASS_NORMAL;
}

/* FP8 encode against the oracle, FP8 flush to zero, and the classes of every row. */
static void check_fp8_one(struct sweep *sw, uint32_t u)
{
    float x = fbits(u);
    sw->checked8++;
    for (int k = 0; k < 2; k++) {
        const struct fp8_oracle *o = &oracles[k];
        uint8_t want = fp8_oracle_encode(o, x);
        if (fp8_encode(o->fmt, x) != want) {
            if (!sw->bad_fp8[k]) sw->first_bad_fp8[k] = u;
            sw->bad_fp8[k]++;
        }
        /* FTZ: the RNE result, flushed when it (or the input) is subnormal */
        float r = fp8_decode(o->fmt, want);
        int sub = fabsf(x) < FLT_MIN || (r != 0 && fabsf(r) < ampdiag_format_get(o->fmt)->min_normal);
        float wf = sub ? copysignf(0.0f, x) : r;
        float got = ampdiag_round_ftz(o->fmt, x);
        if (!same_bits(got, wf) && !(isnan(got) && isnan(wf)))
            sw->bad_fp8_ftz++;
    }
    for (int k = 0; k < 3; k++) {
        const struct fp8_oracle *o = &mx_oracles[k];
        int sat;
        uint8_t want = mx_oracle_encode(o, x, &sat);
        if (mx_encode(o->fmt, x) != want) {
            if (!sw->bad_mx[k]) sw->first_bad_mx[k] = u;
            sw->bad_mx[k]++;
        }
        const ampdiag_format_info *fi = ampdiag_format_get(o->fmt);
        float r = isnan(x) ? x : fi->decode(want), got = ampdiag_round(o->fmt, x);
        if (!same_bits(got, r) && !(isnan(got) && isnan(r) && signbit(got) == signbit(r)))
            sw->bad_mx_round++;
        int sub = fabsf(x) < FLT_MIN || (r != 0 && fabsf(r) < fi->min_normal);
        float wf = isnan(x) ? x : sub ? copysignf(0.0f, x) : r;
        got = ampdiag_round_ftz(o->fmt, x);
        if (!same_bits(got, wf) && !(isnan(got) && isnan(wf)))
            sw->bad_mx_ftz++;
    }
    sw->bad_e8m0 += ampdiag_format_get(AMPDIAG_E8M0)->encode(x) != e8m0_oracle_encode(x);
    for (int f = 0; f < AMPDIAG_NFORMATS_ALL; f++)
        sw->bad_class += ampdiag_classify((ampdiag_format)f, x) != class_from_rounding((ampdiag_format)f, x);
}

#ifdef HAVE_F16C_BUILD
__attribute__((target("f16c")))
#endif
static void check_one(struct sweep *sw, uint32_t u, int have_f16c)
{
    float x = fbits(u);
    uint16_t h = ampdiag_fp16_encode(x);
    float r16 = ampdiag_fp16_decode(h);
    sw->checked++;
#ifdef HAVE_F16C_BUILD
    if (have_f16c && f16c_encode(x) != h) {
        if (!sw->bad_f16c && !sw->bad_ref16 && !sw->bad_ref_b16) sw->first_bad = u;
        sw->bad_f16c++;
    }
#else
    (void)have_f16c;
#endif
    if (isnan(x)) {
        if (!isnan(r16) || !isnan(ampdiag_bf16_decode(ampdiag_bf16_encode(x))) ||
            signbit(r16) != signbit(x)) sw->bad_ref16++;
        return;
    }
    if (!same_bits(r16, ref_fp16(x))) {
        if (!sw->bad_f16c && !sw->bad_ref16 && !sw->bad_ref_b16) sw->first_bad = u;
        sw->bad_ref16++;
    }
    if (!same_bits(ampdiag_round(AMPDIAG_BF16, x), ref_bf16(x))) {
        if (!sw->bad_f16c && !sw->bad_ref16 && !sw->bad_ref_b16) sw->first_bad = u;
        sw->bad_ref_b16++;
    }
    /* FTZ: the RNE result, flushed when it (or the input) is subnormal */
    float f = ampdiag_round_ftz(AMPDIAG_FP16, x);
    float want = (fabsf(x) < FLT_MIN || (r16 != 0 && fabsf(r16) < 0x1p-14f)) ? copysignf(0.0f, x) : r16;
    float fb = ampdiag_round_ftz(AMPDIAG_BF16, x);
    float wantb = fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : ref_bf16(x);
    if (!same_bits(f, want) || !same_bits(fb, wantb)) sw->bad_ftz++;
}

static void test_float32_sweep(void)
{
    int exhaustive = getenv("AMPDIAG_EXHAUSTIVE") && atoi(getenv("AMPDIAG_EXHAUSTIVE"));
    int have_f16c = 0;
#ifdef HAVE_F16C_BUILD
    have_f16c = __builtin_cpu_supports("f16c");
#endif
    struct sweep sw = {0};
    uint32_t stride = exhaustive ? 1u : 61u;
    uint64_t u = 0;
    /* the FP8 oracle and the classes of every row: every pattern, or every third sampled one */
    uint64_t stride8 = exhaustive ? 1u : 3u * stride;
    for (; u <= 0xffffffffull; u += stride) {
        check_one(&sw, (uint32_t)u, have_f16c);
        if (u % stride8 == 0)
            check_fp8_one(&sw, (uint32_t)u);
    }
    /* neighbourhoods (+-4096 patterns, both signs) of every boundary: FP16/BF16, then FP8 (the
     * thresholds of numfmt.h and the smallest and largest values) */
    static const uint32_t edges[] = {
        0x00000000u, 0x00008000u, 0x007f8000u, 0x00800000u, 0x33000000u, 0x33800000u,
        0x387fe000u, 0x38800000u, 0x3f800000u, 0x477fe000u, 0x477ff000u, 0x7f7f8000u,
        0x7f7fffffu, 0x7f800000u, 0x7fc00000u, 0x7fffffffu, 0x38000000u, 0x34000000u,
        AMPDIAG_E4M3_OVF_BITS, AMPDIAG_E4M3_NORM_BITS, AMPDIAG_E4M3_UNF_BITS, 0x43e00000u /* 448 */,
        0x43f00000u /* 480 */, 0x3b000000u /* 2^-9 */, 0x3c800000u /* 2^-6 */,
        AMPDIAG_E5M2_OVF_BITS, AMPDIAG_E5M2_NORM_BITS, AMPDIAG_E5M2_UNF_BITS, 0x47600000u /* 57344 */,
        0x47800000u /* 65536 */, 0x37800000u /* 2^-16 */, 0x3b400000u, 0x3ba00000u /* E4M3 subnormal ties */,
        0x37c00000u, 0x38200000u /* E5M2 subnormal ties */,
        AMPDIAG_E2M1_SAT_BITS, AMPDIAG_E2M1_NORM_BITS, AMPDIAG_E2M1_UNF_BITS, 0x40c00000u /* 6 */,
        AMPDIAG_E2M3_SAT_BITS, AMPDIAG_E2M3_NORM_BITS, AMPDIAG_E2M3_UNF_BITS, 0x40f00000u /* 7.5 */,
        AMPDIAG_E3M2_SAT_BITS, AMPDIAG_E3M2_NORM_BITS, AMPDIAG_E3M2_UNF_BITS, 0x41e00000u /* 28 */,
        0x3fa00000u /* 1.25 */, 0x40a00000u /* 5 */, 0x3e000000u /* 0.125 */,
        AMPDIAG_E8M0_OVF_BITS, AMPDIAG_E8M0_MIN_BITS, 0x00600000u, 0x3fc00000u /* 1.5 */, 0x7f000000u};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        for (int64_t d = -4096; d <= 4096; d++) {
            int64_t v = (int64_t)edges[i] + d;
            if (v < 0 || v > 0x7fffffff) continue;
            for (uint32_t sgn = 0; sgn < 2; sgn++) {
                check_one(&sw, (uint32_t)v | (sgn << 31), have_f16c);
                check_fp8_one(&sw, (uint32_t)v | (sgn << 31));
            }
        }
    diag("checked %llu float32 inputs (%s), %llu of them against the FP8 oracle", (unsigned long long)sw.checked,
         exhaustive ? "all 2^32 patterns" : "every 61st pattern + boundary neighbourhoods", (unsigned long long)sw.checked8);
    if (have_f16c)
        ok(sw.bad_f16c == 0, "float32 -> FP16 bits agree with the CPU's F16C vcvtps2ph (%llu bad, first 0x%08x)",
           (unsigned long long)sw.bad_f16c, sw.first_bad);
    else
        skip("CPU has no F16C: float32 -> FP16 not compared with hardware");
    ok(sw.bad_ref16 == 0, "float32 -> FP16 agrees with the nearest-even reference (%llu bad, first 0x%08x)",
       (unsigned long long)sw.bad_ref16, sw.first_bad);
    ok(sw.bad_ref_b16 == 0, "float32 -> BF16 agrees with the nearest-even reference (%llu bad, first 0x%08x)",
       (unsigned long long)sw.bad_ref_b16, sw.first_bad);
    ok(sw.bad_ftz == 0, "flush-to-zero variants flush exactly the subnormal inputs and results (%llu bad)",
       (unsigned long long)sw.bad_ftz);
    for (int k = 0; k < 2; k++)
        ok(sw.bad_fp8[k] == 0, "float32 -> %s agrees with the OFP8 oracle (nearest, ties to even, OCP overflow) "
           "(%llu bad, first 0x%08x)", oracles[k].name, (unsigned long long)sw.bad_fp8[k], sw.first_bad_fp8[k]);
    ok(sw.bad_fp8_ftz == 0, "FP8 flush-to-zero flushes exactly the subnormal inputs and results (%llu bad)",
       (unsigned long long)sw.bad_fp8_ftz);
    for (int k = 0; k < 3; k++)
        ok(sw.bad_mx[k] == 0, "float32 -> %s agrees with the MX oracle (nearest, ties to even, saturating) "
           "(%llu bad, first 0x%08x)", mx_oracles[k].name, (unsigned long long)sw.bad_mx[k], sw.first_bad_mx[k]);
    ok(sw.bad_mx_round == 0 && sw.bad_mx_ftz == 0, "MX element rounding is the oracle's value (NaN kept), and its "
       "flush-to-zero flushes exactly the subnormal inputs and results (%llu, %llu bad)",
       (unsigned long long)sw.bad_mx_round, (unsigned long long)sw.bad_mx_ftz);
    ok(sw.bad_e8m0 == 0, "float32 -> E8M0 agrees with the definition (nearest power of two, ties up; zero, "
       "negatives and overflow NaN) (%llu bad)", (unsigned long long)sw.bad_e8m0);
    ok(sw.bad_class == 0, "ampdiag_classify (thresholds) agrees with classifying the rounded value, every format "
       "(%llu bad)", (unsigned long long)sw.bad_class);
}

#define R16(x) ampdiag_round(AMPDIAG_FP16, (x))
#define RB16(x) ampdiag_round(AMPDIAG_BF16, (x))

static void test_thresholds(void)
{
    /* FP16 (docs/numerics.md, "Rounding to FP16 and BF16") */
    ok(R16(65504.0f) == 65504.0f, "fp16: 65504 is the largest finite value");
    ok(R16(nextafterf(65520.0f, 0.0f)) == 65504.0f, "fp16: just below 65520 rounds to 65504");
    ok(isinf(R16(65520.0f)) && R16(65520.0f) > 0, "fp16: 65520 overflows to +inf");
    ok(isinf(R16(-65520.0f)) && R16(-65520.0f) < 0, "fp16: -65520 overflows to -inf");
    ok(isinf(R16(66246.39f)), "fp16: the T5 activation 66246.39 overflows");
    ok(same_bits(R16(0x1p-25f), 0.0f), "fp16: 2^-25 (exact tie) flushes to +0");
    ok(same_bits(R16(-0x1p-25f), -0.0f), "fp16: -2^-25 flushes to -0");
    ok(R16(nextafterf(0x1p-25f, 1.0f)) == 0x1p-24f, "fp16: just above 2^-25 rounds to 2^-24");
    ok(R16(0x1p-24f) == 0x1p-24f, "fp16: 2^-24 is the smallest subnormal");
    ok(R16(0x1p-14f - 0x1p-25f) == 0x1p-14f, "fp16: 2^-14 - 2^-25 rounds up to the min normal");
    ok(R16(nextafterf(0x1p-14f - 0x1p-25f, 0.0f)) == 0x1p-14f - 0x1p-24f,
       "fp16: just below it stays the largest subnormal");
    ok(R16(1e-8f) == 0.0f, "fp16: Adam's eps 1e-8 becomes 0");
    ok(R16(1e-7f) == 2 * 0x1p-24f, "fp16: 1e-7 becomes 2 subnormal ulps (1.19e-7)");
    ok(R16(1.0f + 0x1p-11f) == 1.0f, "fp16: 1 + 2^-11 (tie) rounds to even 1");
    ok(R16(1.0f + 0x1p-11f + 0x1p-20f) == 1.0f + 0x1p-10f, "fp16: above the tie rounds up");
    ok(R16(1.001f) == 1.0009765625f, "fp16: 1.001 -> 1.0009765625");
    ok(R16(3.0f * 0x1p-25f) == 0x1p-23f, "fp16: 1.5 subnormal ulps (tie) rounds to even 2 ulps");
    ok(isnan(R16(NAN)) && isinf(R16(INFINITY)) && same_bits(R16(-0.0f), -0.0f), "fp16: NaN, inf, -0 preserved");
    /* BF16 */
    ok(RB16(1.0f + 0x1p-8f) == 1.0f, "bf16: 1 + 2^-8 (tie) rounds to 1");
    ok(RB16(1.001f) == 1.0f, "bf16: 1.001 rounds to 1");
    ok(RB16(fbits(0x7f7f7fffu)) == 0x1.fep127f, "bf16: just below 2^128 - 2^119 rounds to the max 3.3895e38");
    ok(isinf(RB16(fbits(0x7f7f8000u))), "bf16: 2^128 - 2^119 = 3.3961776e38 overflows to inf");
    ok(isinf(RB16(FLT_MAX)), "bf16: FLT_MAX overflows");
    ok(same_bits(RB16(0x1p-134f), 0.0f), "bf16: 2^-134 (tie) flushes to 0");
    ok(RB16(nextafterf(0x1p-134f, 1.0f)) == 0x1p-133f, "bf16: just above 2^-134 rounds to 2^-133");
    ok(RB16(0x1p-126f) == 0x1p-126f, "bf16: 2^-126 is the min normal");
    ok(RB16(fbits(0x007f8000u)) == 0x1p-126f, "bf16: 0x007f8000 rounds up to the min normal");
    ok(ampdiag_bf16_encode(NAN) == 0x7fc0 && ampdiag_bf16_encode(-NAN) == 0xffc0, "bf16: NaN -> 0x7fc0 keeping sign");
    ok(ampdiag_bf16_encode(fbits(0x7f800001u)) == 0x7fc0, "bf16: signalling NaN with low payload stays NaN (0x7fc0)");
    ok(ampdiag_fp16_encode(fbits(0x7f800001u)) == 0x7e00, "fp16: signalling NaN with low payload stays NaN (0x7e00)");
    /* FTZ */
    ok(same_bits(ampdiag_round_ftz(AMPDIAG_FP16, -0x1p-20f), -0.0f), "fp16 ftz: subnormal result -> -0");
    ok(ampdiag_round_ftz(AMPDIAG_FP16, 0x1p-14f) == 0x1p-14f, "fp16 ftz: min normal kept");
    ok(same_bits(ampdiag_round_ftz(AMPDIAG_BF16, 0x1p-130f), 0.0f), "bf16 ftz: float32 subnormal -> 0");
    ok(same_bits(ampdiag_round_ftz(AMPDIAG_FP32, -0x1p-140f), -0.0f), "fp32 ftz: subnormal -> -0");
    ok(ampdiag_round(AMPDIAG_FP32, 0x1p-140f) == 0x1p-140f, "fp32: rounding is the identity");
    ok(isnan(ampdiag_round(AMPDIAG_NFORMATS_ALL, 1.0f)), "unknown format rounds to NaN");
}

static void test_limits(void)
{
    const ampdiag_format_info *h = ampdiag_format_get(AMPDIAG_FP16);
    const ampdiag_format_info *b = ampdiag_format_get(AMPDIAG_BF16);
    const ampdiag_format_info *f = ampdiag_format_get(AMPDIAG_FP32);
    ok(h && b && f && ampdiag_format_get((ampdiag_format)9) == NULL, "format_get: known formats, NULL otherwise");
    ok(h->max_finite == ampdiag_fp16_decode(0x7bff) && h->max_finite == 65504.0f, "fp16 max_finite = 0x7bff = 65504");
    ok(AMPDIAG_FP16_MAX == 65504.0 && AMPDIAG_FP16_MAX == (double)ampdiag_fp16_decode(0x7bff)
       && h->max_finite == (float)AMPDIAG_FP16_MAX && R16((float)AMPDIAG_FP16_MAX) == h->max_finite,
       "AMPDIAG_FP16_MAX (numfmt.h) = 0x7bff = 65504 = max_finite");
    ok(h->min_normal == ampdiag_fp16_decode(0x0400), "fp16 min_normal = 0x0400 = 2^-14");
    ok(h->min_subnormal == ampdiag_fp16_decode(0x0001), "fp16 min_subnormal = 0x0001 = 2^-24");
    ok(h->epsilon == ampdiag_fp16_decode(0x3c01) - 1.0f && h->unit_roundoff == h->epsilon / 2, "fp16 eps 2^-10, u 2^-11");
    ok(isinf(R16(h->overflow_at)) && !isinf(R16(nextafterf(h->overflow_at, 0))), "fp16 overflow_at is the exact threshold");
    ok(R16(h->underflow_at) == 0 && R16(nextafterf(h->underflow_at, 1)) != 0, "fp16 underflow_at is the exact threshold");
    ok(b->max_finite == ampdiag_bf16_decode(0x7f7f), "bf16 max_finite = 0x7f7f");
    ok(b->min_normal == ampdiag_bf16_decode(0x0080) && b->min_subnormal == ampdiag_bf16_decode(0x0001),
       "bf16 min_normal = 0x0080, min_subnormal = 0x0001 = 2^-133");
    ok(b->epsilon == ampdiag_bf16_decode(0x3f81) - 1.0f && b->unit_roundoff == 0x1p-8f, "bf16 eps 2^-7, u 2^-8");
    ok(isinf(RB16(b->overflow_at)) && !isinf(RB16(nextafterf(b->overflow_at, 0))), "bf16 overflow_at is the exact threshold");
    ok(RB16(b->underflow_at) == 0 && RB16(nextafterf(b->underflow_at, 1)) != 0, "bf16 underflow_at is the exact threshold");
    ok(f->max_finite == FLT_MAX && f->min_normal == FLT_MIN && f->epsilon == FLT_EPSILON, "fp32 limits match <float.h>");
    ampdiag_format fmt = AMPDIAG_FP32;
    ok(ampdiag_format_parse("BF16", &fmt) == 0 && fmt == AMPDIAG_BF16 && ampdiag_format_parse("fp8", &fmt) == -1,
       "format_parse accepts names case-insensitively and refuses unknown ones");
}

#define RE4(x) ampdiag_round(AMPDIAG_E4M3, (x))
#define RE5(x) ampdiag_round(AMPDIAG_E5M2, (x))

static void test_fp8_thresholds(void)
{
    /* E4M3 (docs/numerics.md, "FP8: E4M3 and E5M2") */
    ok(RE4(448.0f) == 448.0f && ampdiag_e4m3_encode(448.0f) == 0x7e, "e4m3: 448 (0x7e) is the largest finite value");
    ok(RE4(464.0f) == 448.0f, "e4m3: 464 = 448 + half an ulp (tie) rounds to even 448");
    ok(ampdiag_e4m3_encode(nextafterf(464.0f, 1e9f)) == 0x7f && isnan(RE4(nextafterf(464.0f, 1e9f))),
       "e4m3: just above 464 overflows to NaN 0x7f (no inf; OCP non-saturating)");
    ok(ampdiag_e4m3_encode(-500.0f) == 0xff && ampdiag_e4m3_encode(-INFINITY) == 0xff && ampdiag_e4m3_encode(INFINITY) == 0x7f,
       "e4m3: -500 and -inf become NaN 0xff, +inf 0x7f (sign kept)");
    ok(ampdiag_e4m3_encode(NAN) == 0x7f && ampdiag_e4m3_encode(-NAN) == 0xff, "e4m3: NaN -> S.1111.111, sign kept");
    ok(RE4(0x1p-9f) == 0x1p-9f && ampdiag_e4m3_encode(0x1p-9f) == 0x01, "e4m3: 2^-9 (0x01) is the smallest subnormal");
    ok(same_bits(RE4(0x1p-10f), 0.0f) && same_bits(RE4(-0x1p-10f), -0.0f), "e4m3: +-2^-10 (tie) flush to +-0");
    ok(RE4(nextafterf(0x1p-10f, 1.0f)) == 0x1p-9f, "e4m3: just above 2^-10 rounds to 2^-9");
    ok(RE4(0x1.ep-7f) == 0x1p-6f && ampdiag_e4m3_encode(0x1.ep-7f) == 0x08, "e4m3: 2^-6 - 2^-10 (tie) rounds up to the min normal 2^-6 (0x08)");
    ok(RE4(nextafterf(0x1.ep-7f, 0.0f)) == 7 * 0x1p-9f, "e4m3: just below it stays the largest subnormal 7 * 2^-9");
    ok(RE4(1.0625f) == 1.0f && RE4(1.1875f) == 1.25f, "e4m3: 1 + 2^-4 (tie) -> 1; 1.1875 (tie) -> even 1.25");
    ok(RE4(1.5f * 0x1p-9f) == 2 * 0x1p-9f && RE4(2.5f * 0x1p-9f) == 2 * 0x1p-9f && RE4(-6.5f * 0x1p-9f) == -6 * 0x1p-9f,
       "e4m3: subnormal ties go to the even code: 1.5 and 2.5 ulps -> 2, -6.5 -> -6 (ulp 2^-9)");
    ok(RE4(0.1f) == 0.1015625f, "e4m3: 0.1 -> 0.1015625 (13 * 2^-7)");
    /* E5M2 */
    ok(RE5(57344.0f) == 57344.0f && ampdiag_e5m2_encode(57344.0f) == 0x7b, "e5m2: 57344 (0x7b) is the largest finite value");
    ok(RE5(nextafterf(61440.0f, 0.0f)) == 57344.0f, "e5m2: just below 61440 rounds to 57344");
    ok(isinf(RE5(61440.0f)) && ampdiag_e5m2_encode(61440.0f) == 0x7c && ampdiag_e5m2_encode(-61440.0f) == 0xfc,
       "e5m2: 61440 = 57344 + half an ulp (tie to the even pattern) overflows to +-inf");
    ok(ampdiag_e5m2_encode(INFINITY) == 0x7c && ampdiag_e5m2_encode(NAN) == 0x7f && ampdiag_e5m2_encode(-NAN) == 0xff,
       "e5m2: inf -> 0x7c, NaN -> S.11111.11");
    ok(RE5(0x1p-16f) == 0x1p-16f && same_bits(RE5(0x1p-17f), 0.0f) && RE5(nextafterf(0x1p-17f, 1.0f)) == 0x1p-16f,
       "e5m2: 2^-16 smallest subnormal; 2^-17 (tie) flushes, just above rounds to 2^-16");
    ok(RE5(0x1.cp-15f) == 0x1p-14f && RE5(nextafterf(0x1.cp-15f, 0.0f)) == 3 * 0x1p-16f,
       "e5m2: 2^-14 - 2^-17 rounds up to the min normal 2^-14, just below it to 3 * 2^-16");
    ok(RE5(1.125f) == 1.0f && RE5(1.375f) == 1.5f, "e5m2: 1.125 (tie) -> 1, 1.375 (tie) -> even 1.5");
    ok(RE5(1.5f * 0x1p-16f) == 0x1p-15f && RE5(2.5f * 0x1p-16f) == 0x1p-15f && RE5(-3.5f * 0x1p-16f) == -0x1p-14f,
       "e5m2: subnormal ties go to the even code: 1.5 and 2.5 ulps -> 2, -3.5 -> -4 (the min normal; ulp 2^-16)");
    ok(ampdiag_e5m2_decode(0x7d) != ampdiag_e5m2_decode(0x7d) && (tap_fbits(ampdiag_e5m2_decode(0x7d)) & 0x00400000u),
       "e5m2: the NaN 0x7d decodes to a quiet float32 NaN");
    /* FTZ and classes */
    ok(same_bits(ampdiag_round_ftz(AMPDIAG_E4M3, -0x1p-8f), -0.0f) && ampdiag_round_ftz(AMPDIAG_E4M3, 0x1.ep-7f) == 0x1p-6f,
       "e4m3 ftz: a subnormal result -> -0; a value rounding up to the min normal is kept");
    ok(ampdiag_classify(AMPDIAG_E4M3, 500.0f) == AMPDIAG_CLASS_OVERFLOW && ampdiag_classify(AMPDIAG_E4M3, 464.0f) == AMPDIAG_CLASS_NORMAL &&
       ampdiag_classify(AMPDIAG_E4M3, 1e-3f) == AMPDIAG_CLASS_SUBNORMAL && ampdiag_classify(AMPDIAG_E4M3, 1e-4f) == AMPDIAG_CLASS_UNDERFLOW &&
       ampdiag_classify(AMPDIAG_E5M2, 1e-4f) == AMPDIAG_CLASS_NORMAL && ampdiag_classify(AMPDIAG_E5M2, -1e-6f) == AMPDIAG_CLASS_UNDERFLOW &&
       ampdiag_classify(AMPDIAG_FP16, -0.0f) == AMPDIAG_CLASS_ZERO && ampdiag_classify(AMPDIAG_BF16, -INFINITY) == AMPDIAG_CLASS_INF &&
       ampdiag_classify(AMPDIAG_FP32, NAN) == AMPDIAG_CLASS_NAN && ampdiag_classify(AMPDIAG_FP32, 0x1p-140f) == AMPDIAG_CLASS_SUBNORMAL &&
       ampdiag_classify(AMPDIAG_NFORMATS_ALL, 1.0f) == AMPDIAG_CLASS_NAN,
       "classify: e4m3 500 overflow, 464 normal, 1e-3 subnormal, 1e-4 underflow; e5m2 1e-4 normal, -1e-6 underflow; specials");
}

/* Every row of the table against the rounding it names. */
static void test_table_rows(void)
{
    static const uint32_t cls[AMPDIAG_CLASS_NFORMATS][3] = AMPDIAG_CLASS_BITS_TABLE;
    int bad_thr = 0, bad_lim = 0, bad_fn = 0;
    for (int f = 0; f < AMPDIAG_NFORMATS; f++) {
        const ampdiag_format_info *i = ampdiag_format_get((ampdiag_format)f);
        ampdiag_format g;
        /* the float thresholds are numfmt.h's bit patterns, and exact */
        if (tap_fbits(i->overflow_at) != cls[f][0] || tap_fbits(i->normal_at) != cls[f][1] ||
            tap_fbits(i->underflow_at) != cls[f][2])
            bad_thr++;
        if (f != AMPDIAG_FP32) {
            float r = i->round(i->overflow_at), rb = i->round(nextafterf(i->overflow_at, 0));
            bad_thr += isfinite(r) || !isfinite(rb) || rb != i->max_finite;
            bad_thr += i->round(i->underflow_at) != 0 || i->round(nextafterf(i->underflow_at, 1)) != i->min_subnormal;
            bad_thr += i->round(i->normal_at) != i->min_normal || !(i->round(nextafterf(i->normal_at, 0)) < i->min_normal);
        }
        /* limits from the decoded bit patterns of the format */
        uint32_t maxc = (uint32_t)f == AMPDIAG_FP32 ? 0x7f7fffffu : i->encode(i->max_finite);
        bad_lim += i->decode(maxc) != i->max_finite || i->decode(i->encode(i->min_normal)) != i->min_normal;
        bad_lim += i->decode(1) != i->min_subnormal;
        bad_lim += i->decode(i->encode(1.0f) + 1u) - 1.0f != i->epsilon || i->unit_roundoff != i->epsilon / 2;
        bad_lim += i->min_normal != ldexpf(1.0f, i->emin) || i->max_finite >= ldexpf(2.0f, i->emax) ||
                   i->max_finite < ldexpf(1.0f, i->emax);
        bad_lim += i->bias != (1 << (i->exp_bits - 1)) - 1 || i->bits != 1 + i->exp_bits + i->mant_bits;
        bad_lim += i->lost_certain != ldexpf(1.0f, -(i->mant_bits + 2)) || i->lost_possible != 2 * i->lost_certain;
        bad_lim += i->has_inf != (isinf(i->round(INFINITY)) != 0) || !i->has_nan;
        /* the row's functions are the API's */
        bad_fn += i->round(0.3f) != ampdiag_round((ampdiag_format)f, 0.3f) || i->round_ftz(1e-39f) != 0.0f;
        bad_fn += ampdiag_format_lookup(i->name, &g) != 0 || g != (ampdiag_format)f;
    }
    ok(bad_thr == 0, "each row's overflow_at / normal_at / underflow_at are numfmt.h's class thresholds and the exact "
       "points where its rounding changes class (%d bad)", bad_thr);
    ok(bad_lim == 0, "each row's limits, bias, width and swamping ratios agree with its own bit patterns (%d bad)", bad_lim);
    ok(bad_fn == 0, "each row's functions are ampdiag_round's; lookup finds every row by name (%d bad)", bad_fn);
    const ampdiag_format_info *e4 = ampdiag_format_get(AMPDIAG_E4M3), *e5 = ampdiag_format_get(AMPDIAG_E5M2);
    ok(e4->max_finite == 448.0f && e4->min_normal == 0x1p-6f && e4->min_subnormal == 0x1p-9f && !e4->has_inf &&
       e4->bias == 7 && (float)AMPDIAG_E4M3_MAX == e4->max_finite,
       "e4m3 row: max 448, min normal 2^-6, min subnormal 2^-9, bias 7, no inf");
    ok(e5->max_finite == 57344.0f && e5->min_normal == 0x1p-14f && e5->min_subnormal == 0x1p-16f && e5->has_inf &&
       e5->bias == 15 && (float)AMPDIAG_E5M2_MAX == e5->max_finite,
       "e5m2 row: max 57344, min normal 2^-14, min subnormal 2^-16, bias 15, inf");
    ampdiag_format fmt = AMPDIAG_FP32;
    ok(ampdiag_format_parse("e4m3", &fmt) == -1 && ampdiag_format_parse("E5M2", &fmt) == -1 && fmt == AMPDIAG_FP32 &&
       ampdiag_format_lookup("E4M3", &fmt) == 0 && fmt == AMPDIAG_E4M3 && ampdiag_format_lookup("fp8", &fmt) == -1,
       "format_parse keeps to fp32/fp16/bf16 (what a run can hold); format_lookup knows the FP8 rows");
}

/* The MX rows: codes against the oracle, known answers, and the row's limits from its patterns. */
static void test_mx_rows(void)
{
    static const int nvals[3] = {8, 32, 32};
    static const double maxv[3] = {6.0, 7.5, 28.0};
    for (int k = 0; k < 3; k++) {
        const struct fp8_oracle *o = &mx_oracles[k];
        const ampdiag_format_info *fi = ampdiag_format_get(o->fmt);
        unsigned ncodes = 1u << (o->ebits + o->mbits + 1);
        int bad_dec = 0, bad_rt = 0;
        for (unsigned c = 0; c < ncodes; c++) {
            float got = fi->decode(c);
            unsigned mag = c & (ncodes / 2 - 1u);
            int neg = (c & ncodes / 2) != 0;
            double want = minifloat_value(o, mag);
            bad_dec += (double)got != (neg ? -want : want) || (signbit(got) != 0) != neg;
            bad_rt += fi->encode(got) != c;
        }
        ok(bad_dec == 0 && bad_rt == 0 && o->n == nvals[k] && o->val[o->n - 1] == maxv[k] && fi->max_finite == (float)maxv[k],
           "%s: every code decodes to the MX formula's value and re-encodes to itself; %d magnitudes, the largest %g",
           o->name, nvals[k], maxv[k]);
    }
#define E21(x) ampdiag_round(AMPDIAG_E2M1, (x))
    ok(E21(0.25f) == 0.0f && E21(nextafterf(0.25f, 1)) == 0.5f && E21(0.75f) == 1.0f && E21(nextafterf(0.75f, 0)) == 0.5f &&
       E21(2.5f) == 2.0f && E21(3.5f) == 4.0f && E21(5.0f) == 4.0f && E21(nextafterf(5.0f, 9)) == 6.0f,
       "e2m1: 0.25 ties to 0, 0.75 to 1, 2.5 to 2, 3.5 to 4, 5 to 4 (even codes); just above 5 -> 6");
    ok(E21(7.0f) == 6.0f && E21(1e30f) == 6.0f && E21(INFINITY) == 6.0f && E21(-INFINITY) == -6.0f &&
       ampdiag_classify(AMPDIAG_E2M1, 7.0f) == AMPDIAG_CLASS_OVERFLOW && ampdiag_classify(AMPDIAG_E2M1, nextafterf(7.0f, 0)) == AMPDIAG_CLASS_NORMAL,
       "e2m1 saturates: 7 (the tie beyond 6), 1e30 and inf -> 6, -inf -> -6; 7 is class overflow, just below it normal");
    ok(isnan(E21(NAN)) && ampdiag_e2m1_bits_rne(NAN) == 0 && ampdiag_e2m1_bits_rne(-NAN) == 8 && same_bits(E21(-0.0f), -0.0f) &&
       same_bits(E21(-0.1f), -0.0f),
       "e2m1: a NaN stays NaN when rounded, encodes as a zero of its sign; -0 and -0.1 -> -0");
#undef E21
    ok(ampdiag_round(AMPDIAG_E2M3, 7.7f) == 7.5f && ampdiag_round(AMPDIAG_E2M3, 7.75f) == 7.5f &&
       ampdiag_classify(AMPDIAG_E2M3, 7.75f) == AMPDIAG_CLASS_OVERFLOW && ampdiag_round(AMPDIAG_E2M3, 0.0625f) == 0.0f &&
       ampdiag_round(AMPDIAG_E2M3, 0.9375f) == 1.0f && ampdiag_round(AMPDIAG_E2M3, 0.1875f) == 0.25f,
       "e2m3: 7.7 -> 7.5, 7.75 saturates; 2^-4 ties to 0; 0.9375 -> 1; 1.5 ulps of 1/8 -> 2 ulps");
    ok(ampdiag_round(AMPDIAG_E3M2, 29.9f) == 28.0f && ampdiag_classify(AMPDIAG_E3M2, 30.0f) == AMPDIAG_CLASS_OVERFLOW &&
       ampdiag_classify(AMPDIAG_E3M2, 29.9f) == AMPDIAG_CLASS_NORMAL && ampdiag_round(AMPDIAG_E3M2, 0x1p-5f) == 0.0f &&
       ampdiag_round(AMPDIAG_E3M2, 0.21875f) == 0.25f && ampdiag_round(AMPDIAG_E3M2, 0.1f) == 0.125f,
       "e3m2: 29.9 -> 28, 30 saturates; 2^-5 ties to 0; 0.21875 -> 0.25; 0.1 -> 0.125");
    const ampdiag_format_info *e8 = ampdiag_format_get(AMPDIAG_E8M0);
    ok(e8->decode(0) == 0x1p-127f && e8->decode(127) == 1.0f && e8->decode(254) == 0x1p127f && isnan(e8->decode(255)) &&
       e8->encode(1.0f) == 127 && e8->encode(1.5f) == 128 && e8->encode(nextafterf(1.5f, 0)) == 127 && e8->encode(0.75f) == 127 &&
       e8->encode(0.0f) == 255 && e8->encode(-1.0f) == 255 && e8->encode(INFINITY) == 255 && e8->encode(0x1.8p127f) == 255 &&
       e8->encode(0x1p-130f) == 0 && e8->encode(0x1.2p-127f) == 1,
       "e8m0: codes 0, 127, 254 are 2^-127, 1, 2^127, 255 NaN; 1.5 and 0.75 round up (ties up); zero, negatives, inf "
       "and 1.5 2^127 are NaN; float32 subnormals: up to 2^-127 -> 2^-127, above -> 2^-126");
    int bad = 0;
    for (int f = AMPDIAG_NFORMATS; f < AMPDIAG_NFORMATS_ALL; f++) {
        const ampdiag_format_info *i = ampdiag_format_get((ampdiag_format)f);
        ampdiag_format g;
        bad += i->has_inf || i->bits != (f == AMPDIAG_E8M0 ? 8 : 1 + i->exp_bits + i->mant_bits);
        bad += i->decode(i->encode(i->max_finite)) != i->max_finite || i->decode(i->encode(i->min_normal)) != i->min_normal;
        bad += i->min_normal != ldexpf(1.0f, i->emin) || i->max_finite >= ldexpf(2.0f, i->emax) || i->max_finite < ldexpf(1.0f, i->emax);
        bad += i->bias != (1 << (i->exp_bits - 1)) - 1 || i->unit_roundoff != i->epsilon / 2;
        bad += i->decode(i->encode(1.0f) + 1u) - 1.0f != i->epsilon;
        bad += i->lost_certain != ldexpf(1.0f, -(i->mant_bits + 2)) || i->lost_possible != 2 * i->lost_certain;
        bad += ampdiag_format_lookup(i->name, &g) != 0 || g != (ampdiag_format)f;
        if (f != AMPDIAG_E8M0) { /* the saturation, flush and normal thresholds are where rounding changes */
            bad += i->has_nan || i->decode(1) != i->min_subnormal;
            bad += i->round(i->overflow_at) != i->max_finite || i->round(nextafterf(i->overflow_at, 0)) != i->max_finite;
            bad += ampdiag_classify((ampdiag_format)f, nextafterf(i->overflow_at, 0)) != AMPDIAG_CLASS_NORMAL;
            bad += i->round(i->underflow_at) != 0 || i->round(nextafterf(i->underflow_at, 1)) != i->min_subnormal;
            bad += i->round(i->normal_at) != i->min_normal || !(i->round(nextafterf(i->normal_at, 0)) < i->min_normal);
        } else {
            bad += !i->has_nan || i->min_subnormal != i->min_normal || !isnan(i->round(i->overflow_at)) ||
                   i->round(nextafterf(i->overflow_at, 0)) != i->max_finite;
        }
    }
    ok(bad == 0, "the MX rows' limits, bias, width, epsilon and swamping ratios agree with their bit patterns, and "
       "their thresholds are where their rounding changes class (%d bad)", bad);
    ampdiag_format fmt;
    ok(ampdiag_format_lookup("E2M1", &fmt) == 0 && fmt == AMPDIAG_E2M1 && ampdiag_format_lookup("e8m0", &fmt) == 0 &&
       fmt == AMPDIAG_E8M0 && ampdiag_format_parse("e2m1", &fmt) == -1 && ampdiag_format_get(AMPDIAG_NFORMATS_ALL) == NULL,
       "format_lookup knows the MX rows; format_parse refuses them; the table has AMPDIAG_NFORMATS_ALL rows");
}

/* Swamping: the row's ratios bound the exact lost-update test, and are tight. */
static void test_swamping(void)
{
    int bad = 0, tight_lo = 0, tight_hi = 0;
    uint32_t st = 777;
    for (int f = 0; f < AMPDIAG_NFORMATS; f++) {
        const ampdiag_format_info *i = ampdiag_format_get((ampdiag_format)f);
        int lo_seen = 0, hi_seen = 0;
        for (int t = 0; t < 20000; t++) {
            st = st * 1664525u + 1013904223u;
            /* a weight held in the format, normal, away from overflow, and high enough that d is
             * a normal float32 */
            float w = i->round(ldexpf(1.0f + (float)(st >> 8) * 0x1p-24f, i->emin + i->mant_bits + 4 + (int)(st % 7u)));
            if (st & 1u) w = -w;
            /* |d / w| in [2^-(p+2), 2^-(p-1)): below, between and above the two ratios */
            float r = ldexpf(1.0f + (float)((st >> 4) & 0xfff) * 0x1p-12f, -(i->mant_bits + 3) + (int)((st >> 20) % 3u));
            float d = ((st >> 3) & 1u) ? -r * fabsf(w) : r * fabsf(w);
            int lost = ampdiag_update_lost((ampdiag_format)f, 0, w, d);
            float ratio = fabsf(d) / fabsf(w);
            if (ratio <= i->lost_certain && !lost) bad++;
            if (ratio > i->lost_possible && lost) bad++;
            if (ratio > i->lost_certain * 1.01f && !lost) lo_seen = 1;
            if (ratio < i->lost_possible * 0.99f && lost && ratio > i->lost_certain * 1.01f) hi_seen = 1;
        }
        tight_lo += lo_seen;
        tight_hi += hi_seen;
    }
    ok(bad == 0, "every row: an update |d| <= lost_certain |w| is lost, one above lost_possible |w| is not (%d bad)", bad);
    ok(tight_lo == AMPDIAG_NFORMATS && tight_hi == AMPDIAG_NFORMATS,
       "between the two ratios some updates are lost and some are not (the bounds are tight)");
    ok(ampdiag_update_lost(AMPDIAG_FP16, 0, 1.0f, 0x1p-11f) && !ampdiag_update_lost(AMPDIAG_FP16, 0, 1.0f, 0x1p-10f) &&
       ampdiag_update_lost(AMPDIAG_E4M3, 0, 1.0f, 0.0625f) && !ampdiag_update_lost(AMPDIAG_E4M3, 0, 1.0f, 0.07f) &&
       ampdiag_update_lost(AMPDIAG_E5M2, 0, 1.0f, 0.125f) && !ampdiag_update_lost(AMPDIAG_E5M2, 0, 1.0f, 0.13f) &&
       !ampdiag_update_lost(AMPDIAG_BF16, 0, 1.0f, 0.0f) && !ampdiag_update_lost((ampdiag_format)9, 0, 1.0f, 1e-9f),
       "lost updates on w = 1: fp16 2^-11 lost, 2^-10 kept; e4m3 1/16 lost, 0.07 kept; e5m2 1/8 lost; d = 0 never counts");
}

/* One element of ampdiag_update_lost_counts, from the definition with scalar roundings. */
static void lost_ref(float w, float d, const float *g, uint64_t c[3])
{
    int meant = d != 0.0f || (g && *g != 0.0f && isfinite(*g));
    c[0] += meant && d == 0.0f;
    const ampdiag_format fmts[2] = {AMPDIAG_FP16, AMPDIAG_BF16};
    for (int k = 0; k < 2; k++) {
        float wr = ampdiag_round(fmts[k], w);
        c[1 + k] += meant && ampdiag_round(fmts[k], wr + d) == wr;
    }
}

/* Lost-update counts over arrays (more than one block), against the scalar definition: updates
 * around the swamping ratios, zero updates with and without a gradient, non-finite values. */
static void test_lost_counts(void)
{
    enum { N = 1500 };
    static float w[N], d[N], g[N];
    uint32_t st = 4242;
    for (int i = 0; i < N; i++) {
        st = st * 1664525u + 1013904223u;
        w[i] = ldexpf(1.0f + (float)(st >> 9) * 0x1p-23f, (int)(st % 9u) - 4) * ((st & 2u) ? -1.0f : 1.0f);
        d[i] = w[i] * ldexpf(1.0f + (float)((st >> 5) & 0xff) * 0x1p-8f, -7 - (int)((st >> 13) % 20u));
        g[i] = (st & 4u) ? 0.0f : -d[i];
        switch ((st >> 17) % 16u) {
        case 0: d[i] = 0.0f; break;                     /* unchanged: lost if pushed */
        case 1: w[i] = 0.0f; break;                     /* a weight at 0 */
        case 2: g[i] = NAN; d[i] = 0.0f; break;         /* a NaN gradient pushes nothing */
        case 3: g[i] = INFINITY; d[i] = 0.0f; break;
        case 4: d[i] = INFINITY; break;
        case 5: w[i] = NAN; break;
        case 6: w[i] = 70000.0f; break;                 /* overflows FP16 */
        default: break;
        }
    }
    uint64_t want[3] = {0, 0, 0}, want_ng[3] = {0, 0, 0}, got[3], got_ng[3];
    for (int i = 0; i < N; i++) {
        lost_ref(w[i], d[i], &g[i], want);
        lost_ref(w[i], d[i], NULL, want_ng);
    }
    int rc = ampdiag_update_lost_counts(w, d, g, N, got);
    rc |= ampdiag_update_lost_counts(w, d, NULL, N, got_ng);
    ok(rc == 0 && got[0] == want[0] && got[1] == want[1] && got[2] == want[2] && want[0] > 0 && want[2] > want[1] &&
       want[1] > want[0],
       "update_lost_counts over %d updates: lost %llu, if fp16 %llu, if bf16 %llu, as the scalar definition",
       N, (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2]);
    ok(got_ng[0] == 0 && got_ng[1] == want_ng[1] && got_ng[2] == want_ng[2] && want_ng[1] < want[1],
       "without gradients only changed weights are meant to change: lost 0, if fp16 %llu, if bf16 %llu",
       (unsigned long long)got_ng[1], (unsigned long long)got_ng[2]);
}

/* Transformer Engine's delayed scaling: scale = (fp8_max / max(history)) / 2^margin. */
static void test_delayed_scale(void)
{
    const float h[4] = {1.0f, 3.5f, 0.0f, 2.0f};
    ok(ampdiag_delayed_scale(AMPDIAG_E4M3, h, 4, 0, 1.0f) == 128.0f, "e4m3: history max 3.5 -> scale 448 / 3.5 = 128");
    ok(ampdiag_delayed_scale(AMPDIAG_E4M3, h, 4, 2, 1.0f) == 32.0f, "e4m3, margin 2: 128 / 4 = 32");
    ok(ampdiag_delayed_scale(AMPDIAG_E5M2, h, 1, 0, 1.0f) == 57344.0f, "e5m2, history length 1 (most recent 1.0): 57344");
    ok(ampdiag_delayed_scale(AMPDIAG_E4M3, h + 2, 1, 0, 7.0f) == 7.0f, "amax 0: the previous scale is kept");
    const float bad[3] = {2.0f, INFINITY, 1.0f}, nanh[2] = {NAN, 1.0f};
    ok(ampdiag_delayed_scale(AMPDIAG_E4M3, bad, 3, 0, 5.0f) == 5.0f && ampdiag_delayed_scale(AMPDIAG_E4M3, nanh, 2, 0, 5.0f) == 5.0f,
       "an inf or NaN amax in the history: the previous scale is kept");
    const float tiny[1] = {1e-45f};
    ok(ampdiag_delayed_scale(AMPDIAG_E4M3, tiny, 1, 0, 1.0f) == FLT_MAX, "a scale that overflows float32 becomes FLT_MAX");
    ok(ampdiag_delayed_scale(AMPDIAG_E4M3, h, 0, 0, 3.0f) == 3.0f && ampdiag_delayed_scale((ampdiag_format)9, h, 4, 0, 3.0f) == 3.0f,
       "an empty history or unknown format keeps the previous scale");
    const float odd[1] = {3.0f};
    ok(ampdiag_delayed_scale(AMPDIAG_E4M3, odd, 1, 1, 1.0f) == (448.0f / 3.0f) / 2.0f,
       "in float32 as TE computes it: (448 / 3) / 2");
}

static void test_round_array(void)
{
    enum { N = 4096 };
    static float in[N], out[N];
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        in[i] = fbits(s);
    }
    int bad = 0;
    for (int f = 0; f < AMPDIAG_NFORMATS_ALL; f++)
        for (unsigned fl = 0; fl < 2; fl++) {
            if (ampdiag_round_array((ampdiag_format)f, fl, in, out, N) != 0) bad++;
            for (int i = 0; i < N; i++) {
                float want = fl ? ampdiag_round_ftz((ampdiag_format)f, in[i]) : ampdiag_round((ampdiag_format)f, in[i]);
                if (!same_bits(out[i], want) && !(isnan(out[i]) && isnan(want))) bad++;
            }
        }
    ok(bad == 0, "round_array equals the scalar rounding for every format and flag (%d bad)", bad);
    ok(ampdiag_round_array(AMPDIAG_NFORMATS_ALL, 0, in, out, N) == -1, "round_array refuses an unknown format");
    memcpy(out, in, sizeof in);
    ampdiag_round_array(AMPDIAG_BF16, 0, out, out, N);
    ok(same_bits(out[17], ampdiag_round(AMPDIAG_BF16, in[17])), "round_array works in place");
}

int main(void)
{
    test_all_16bit_patterns();
    test_thresholds();
    test_limits();
    test_round_array();
    for (int k = 0; k < 2; k++)
        fp8_oracle_init(&oracles[k]);
    for (int k = 0; k < 3; k++)
        mx_oracle_init(&mx_oracles[k]);
    test_fp8_codes();
    test_fp8_thresholds();
    test_table_rows();
    test_mx_rows();
    test_swamping();
    test_lost_counts();
    test_delayed_scale();
    test_float32_sweep();
    return done_testing();
}
