/*
 * t_numfmt.c - number formats: exact FP16/BF16 rounding against independent references.
 *
 * References: the CPU's own F16C conversion (vcvtps2ph / vcvtph2ps) for FP16, and for both
 * formats a rounding written from the definition in double precision (nearest representable
 * value, ties to the even significand, overflow to inf once the rounded value leaves the
 * format). By default a stratified sample of float32 inputs is checked (every 61st bit pattern
 * plus neighbourhoods of every threshold); AMPDIAG_EXHAUSTIVE=1 checks all 2^32 patterns.
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

struct sweep {
    uint64_t checked, bad_f16c, bad_ref16, bad_ref_b16, bad_ftz;
    uint32_t first_bad;
};

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
    for (; u <= 0xffffffffull; u += stride)
        check_one(&sw, (uint32_t)u, have_f16c);
    /* neighbourhoods (+-4096 patterns, both signs) of every boundary */
    static const uint32_t edges[] = {
        0x00000000u, 0x00008000u, 0x007f8000u, 0x00800000u, 0x33000000u, 0x33800000u,
        0x387fe000u, 0x38800000u, 0x3f800000u, 0x477fe000u, 0x477ff000u, 0x7f7f8000u,
        0x7f7fffffu, 0x7f800000u, 0x7fc00000u, 0x7fffffffu, 0x38000000u, 0x34000000u};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        for (int64_t d = -4096; d <= 4096; d++) {
            int64_t v = (int64_t)edges[i] + d;
            if (v < 0 || v > 0x7fffffff) continue;
            check_one(&sw, (uint32_t)v, have_f16c);
            check_one(&sw, (uint32_t)v | 0x80000000u, have_f16c);
        }
    diag("checked %llu float32 inputs (%s)", (unsigned long long)sw.checked,
         exhaustive ? "all 2^32 patterns" : "every 61st pattern + boundary neighbourhoods");
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
    ok(isnan(ampdiag_round((ampdiag_format)7, 1.0f)), "unknown format rounds to NaN");
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
    for (int f = 0; f < AMPDIAG_NFORMATS; f++)
        for (unsigned fl = 0; fl < 2; fl++) {
            if (ampdiag_round_array((ampdiag_format)f, fl, in, out, N) != 0) bad++;
            for (int i = 0; i < N; i++) {
                float want = fl ? ampdiag_round_ftz((ampdiag_format)f, in[i]) : ampdiag_round((ampdiag_format)f, in[i]);
                if (!same_bits(out[i], want) && !(isnan(out[i]) && isnan(want))) bad++;
            }
        }
    ok(bad == 0, "round_array equals the scalar rounding for every format and flag (%d bad)", bad);
    ok(ampdiag_round_array((ampdiag_format)5, 0, in, out, N) == -1, "round_array refuses an unknown format");
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
    test_float32_sweep();
    return done_testing();
}
