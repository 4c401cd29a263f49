/*
 * numfmt.c - the exported number-format API (ampdiag.h) over the inline core in numfmt.h.
 */
#include "ampdiag.h"
#include "numerics/numfmt.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NUMFMT_X86 1
#endif

const char *ampdiag_version(void) { return AMPDIAG_VERSION_STRING; }

/* The host rounding of each row, as functions the table can point to. */
static float fp32_round(float x) { return x; }
static float fp32_ftz(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    return (u & 0x7fffffffu) < AMPDIAG_F32_MIN_NORMAL ? ampdiag_f32_from_bits(u & 0x80000000u) : x;
}
static uint32_t fp32_encode(float x) { return ampdiag_f32_bits(x); }
static float fp32_decode(uint32_t c) { return ampdiag_f32_from_bits(c); }
static float fp16_round(float x) { return ampdiag_fp16_rne(x); }
static float fp16_ftz(float x) { return ampdiag_fp16_rne_ftz(x); }
static uint32_t fp16_encode(float x) { return ampdiag_fp16_bits_rne(x); }
static float fp16_decode(uint32_t c) { return ampdiag_fp16_bits_to_f32((uint16_t)c); }
static float bf16_round(float x) { return ampdiag_bf16_rne(x); }
static float bf16_ftz(float x) { return ampdiag_bf16_rne_ftz(x); }
static uint32_t bf16_encode(float x) { return ampdiag_bf16_bits_rne(x); }
static float bf16_decode(uint32_t c) { return ampdiag_bf16_bits_to_f32((uint16_t)c); }
static float e4m3_round(float x) { return ampdiag_e4m3_rne(x); }
static float e4m3_ftz(float x) { return ampdiag_e4m3_rne_ftz(x); }
static uint32_t e4m3_encode(float x) { return ampdiag_e4m3_bits_rne(x); }
static float e4m3_decode(uint32_t c) { return ampdiag_e4m3_bits_to_f32((uint8_t)c); }
static float e5m2_round(float x) { return ampdiag_e5m2_rne(x); }
static float e5m2_ftz(float x) { return ampdiag_e5m2_rne_ftz(x); }
static uint32_t e5m2_encode(float x) { return ampdiag_e5m2_bits_rne(x); }
static float e5m2_decode(uint32_t c) { return ampdiag_e5m2_bits_to_f32((uint8_t)c); }

/* The MX rows. FTZ as for the others: float32 subnormal inputs and subnormal results become
 * signed zeros (a subnormal input to E8M0 reads as zero, which E8M0 cannot hold: NaN). */
#define MX_ROW_FNS(name, norm_bits)                                                             \
    static float name##_round(float x) { return ampdiag_##name##_rne(x); }                      \
    static float name##_ftz(float x)                                                            \
    {                                                                                           \
        uint32_t u = ampdiag_f32_bits(x);                                                       \
        if ((u & 0x7fffffffu) < (norm_bits))                                                    \
            return ampdiag_f32_from_bits(u & 0x80000000u);                                      \
        return ampdiag_##name##_rne(x);                                                         \
    }                                                                                           \
    static uint32_t name##_encode(float x) { return ampdiag_##name##_bits_rne(x); }             \
    static float name##_decode(uint32_t c) { return ampdiag_##name##_bits_to_f32((uint8_t)c); }
MX_ROW_FNS(e2m1, AMPDIAG_E2M1_NORM_BITS)
MX_ROW_FNS(e2m3, AMPDIAG_E2M3_NORM_BITS)
MX_ROW_FNS(e3m2, AMPDIAG_E3M2_NORM_BITS)
#undef MX_ROW_FNS
static float e8m0_round(float x) { return ampdiag_e8m0_rne(x); }
static float e8m0_ftz(float x)
{
    return (ampdiag_f32_bits(x) & 0x7fffffffu) < AMPDIAG_F32_MIN_NORMAL ? ampdiag_e8m0_rne(0.0f) : ampdiag_e8m0_rne(x);
}
static uint32_t e8m0_encode(float x) { return ampdiag_e8m0_bits_rne(x); }
static float e8m0_decode(uint32_t c) { return ampdiag_e8m0_bits_to_f32((uint8_t)c); }

/* The format table (docs/numerics.md, "The formats" and "FP8: E4M3 and E5M2"). Each row:
 * name, bits, exponent and mantissa bits, bias, emin, emax, max finite, min normal, min
 * subnormal, epsilon, unit roundoff, overflow_at, underflow_at, normal_at (the class thresholds
 * of numfmt.h as floats), has inf, has NaN, the swamping ratios 2^-(p+1) and 2^-p, rounding. */
static const ampdiag_format_info format_table[AMPDIAG_NFORMATS_ALL] = {
    [AMPDIAG_FP32] = {"fp32", 32, 8, 23, 127, -126, 127, 3.40282347e38f, 0x1p-126f, 0x1p-149f,
                      0x1p-23f, 0x1p-24f, INFINITY, 0.0f, 0x1p-126f, 1, 1, 0x1p-25f, 0x1p-24f,
                      fp32_round, fp32_ftz, fp32_encode, fp32_decode},
    [AMPDIAG_FP16] = {"fp16", 16, 5, 10, 15, -14, 15, (float)AMPDIAG_FP16_MAX, 0x1p-14f, 0x1p-24f,
                      0x1p-10f, 0x1p-11f, 65520.0f, 0x1p-25f, 0x1.ffcp-15f, 1, 1, 0x1p-12f, 0x1p-11f,
                      fp16_round, fp16_ftz, fp16_encode, fp16_decode},
    [AMPDIAG_BF16] = {"bf16", 16, 8, 7, 127, -126, 127, 0x1.fep127f, 0x1p-126f, 0x1p-133f,
                      0x1p-7f, 0x1p-8f, 0x1.ffp127f, 0x1p-134f, 0x1.fep-127f, 1, 1, 0x1p-9f, 0x1p-8f,
                      bf16_round, bf16_ftz, bf16_encode, bf16_decode},
    [AMPDIAG_E4M3] = {"e4m3", 8, 4, 3, 7, -6, 8, (float)AMPDIAG_E4M3_MAX, 0x1p-6f, 0x1p-9f,
                      0x1p-3f, 0x1p-4f, 0x1.d00002p8f, 0x1p-10f, 0x1.ep-7f, 0, 1, 0x1p-5f, 0x1p-4f,
                      e4m3_round, e4m3_ftz, e4m3_encode, e4m3_decode},
    [AMPDIAG_E5M2] = {"e5m2", 8, 5, 2, 15, -14, 15, (float)AMPDIAG_E5M2_MAX, 0x1p-14f, 0x1p-16f,
                      0x1p-2f, 0x1p-3f, 61440.0f, 0x1p-17f, 0x1.cp-15f, 1, 1, 0x1p-4f, 0x1p-3f,
                      e5m2_round, e5m2_ftz, e5m2_encode, e5m2_decode},
    /* the MX rows (docs/numerics.md, "Block formats"): overflow_at is where they saturate */
    [AMPDIAG_E2M1] = {"e2m1", 4, 2, 1, 1, 0, 2, (float)AMPDIAG_E2M1_MAX, 1.0f, 0.5f, 0.5f, 0.25f, 7.0f, 0.25f,
                      0.75f, 0, 0, 0x1p-3f, 0x1p-2f, e2m1_round, e2m1_ftz, e2m1_encode, e2m1_decode},
    [AMPDIAG_E2M3] = {"e2m3", 6, 2, 3, 1, 0, 2, (float)AMPDIAG_E2M3_MAX, 1.0f, 0x1p-3f, 0x1p-3f, 0x1p-4f, 7.75f,
                      0x1p-4f, 0.9375f, 0, 0, 0x1p-5f, 0x1p-4f, e2m3_round, e2m3_ftz, e2m3_encode, e2m3_decode},
    [AMPDIAG_E3M2] = {"e3m2", 6, 3, 2, 3, -2, 4, (float)AMPDIAG_E3M2_MAX, 0x1p-2f, 0x1p-4f, 0x1p-2f, 0x1p-3f, 30.0f,
                      0x1p-5f, 0.21875f, 0, 0, 0x1p-4f, 0x1p-3f, e3m2_round, e3m2_ftz, e3m2_encode, e3m2_decode},
    /* E8M0: no subnormals (min_subnormal = min_normal), epsilon 1 (1 -> 2); every positive value
     * below its overflow rounds to a normal value: normal_at is the smallest positive float */
    [AMPDIAG_E8M0] = {"e8m0", 8, 8, 0, 127, -127, 127, 0x1p127f, 0x1p-127f, 0x1p-127f, 1.0f, 0.5f, 0x1.8p127f,
                      0.0f, 0x1p-149f, 0, 1, 0x1p-2f, 0x1p-1f, e8m0_round, e8m0_ftz, e8m0_encode, e8m0_decode},
};

/* The class thresholds of numfmt.h, one row per format (the bit patterns of overflow_at,
 * normal_at and underflow_at: t_numfmt checks that they agree). */
static const uint32_t class_bits[AMPDIAG_CLASS_NFORMATS][3] = AMPDIAG_CLASS_BITS_TABLE;
static const uint32_t class_bits_mx[AMPDIAG_CLASS_NFORMATS_MX][3] = AMPDIAG_CLASS_BITS_TABLE_MX;
_Static_assert(AMPDIAG_CLASS_NFORMATS == AMPDIAG_NFORMATS, "numfmt.h's class table has one row per format");
_Static_assert(AMPDIAG_CLASS_NFORMATS + AMPDIAG_CLASS_NFORMATS_MX == AMPDIAG_NFORMATS_ALL,
               "numfmt.h's two class tables have one row per format");

/* The class thresholds of a row (fmt valid). */
static const uint32_t *class_row(ampdiag_format fmt)
{
    return fmt < AMPDIAG_NFORMATS ? class_bits[fmt] : class_bits_mx[fmt - AMPDIAG_NFORMATS];
}

/* The rows a run can hold tensors in (ampdiag_format_parse); the FP8 rows after them are for
 * rounding and what-if counts only, until the training loop learns them. */
#define STORAGE_FORMATS 3

const ampdiag_format_info *ampdiag_format_get(ampdiag_format fmt)
{
    if ((int)fmt < 0 || fmt >= AMPDIAG_NFORMATS_ALL)
        return NULL;
    return &format_table[fmt];
}

static int find_row(const char *name, int nrows, ampdiag_format *fmt)
{
    if (!name)
        return -1;
    for (int i = 0; i < nrows; i++)
        if (strcasecmp(name, format_table[i].name) == 0) {
            *fmt = (ampdiag_format)i;
            return 0;
        }
    return -1;
}

int ampdiag_format_parse(const char *name, ampdiag_format *fmt) { return find_row(name, STORAGE_FORMATS, fmt); }
int ampdiag_format_lookup(const char *name, ampdiag_format *fmt) { return find_row(name, AMPDIAG_NFORMATS_ALL, fmt); }

ampdiag_class ampdiag_classify(ampdiag_format fmt, float x)
{
    uint32_t a = ampdiag_f32_bits(x) & 0x7fffffffu;
    if (!ampdiag_format_get(fmt) || a > AMPDIAG_F32_INF)
        return AMPDIAG_CLASS_NAN;
    if (a == AMPDIAG_F32_INF)
        return AMPDIAG_CLASS_INF;
    if (a == 0)
        return AMPDIAG_CLASS_ZERO;
    const uint32_t *t = class_row(fmt);
    if (a >= t[0])
        return AMPDIAG_CLASS_OVERFLOW;
    if (a >= t[1])
        return AMPDIAG_CLASS_NORMAL;
    return a <= t[2] ? AMPDIAG_CLASS_UNDERFLOW : AMPDIAG_CLASS_SUBNORMAL;
}

float ampdiag_round(ampdiag_format fmt, float x)
{
    const ampdiag_format_info *f = ampdiag_format_get(fmt);
    return f ? f->round(x) : NAN;
}

float ampdiag_round_ftz(ampdiag_format fmt, float x)
{
    const ampdiag_format_info *f = ampdiag_format_get(fmt);
    return f ? f->round_ftz(x) : NAN;
}

int ampdiag_update_lost(ampdiag_format fmt, unsigned flags, float w, float d)
{
    const ampdiag_format_info *f = ampdiag_format_get(fmt);
    if (!f)
        return 0;
    float (*r)(float) = (flags & AMPDIAG_ROUND_FTZ) ? f->round_ftz : f->round;
    float wr = r(w);
    return d != 0.0f && r(wr + d) == wr;
}

#ifdef NUMFMT_X86
/* x[0..n) := fp16(x) with F16C (round to nearest even; FTZ: subnormal results to signed 0). */
__attribute__((target("avx,f16c"))) static void round_fp16_f16c(const float *in, float *x, size_t n, int ftz)
{
    const __m256 min_normal = _mm256_set1_ps(0x1p-14f), sign = _mm256_set1_ps(-0.0f);
    size_t i = 0;
    for (; n >= 8 && i <= n - 8; i += 8) {
        __m256 v = _mm256_loadu_ps(in + i);
        __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 r = _mm256_cvtph_ps(h);
        if (ftz) {
            __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(sign, r), min_normal, _CMP_LT_OQ);
            r = _mm256_blendv_ps(r, _mm256_and_ps(r, sign), tiny);
        }
        _mm256_storeu_ps(x + i, r);
    }
    for (; i < n; i++)
        x[i] = ftz ? ampdiag_fp16_rne_ftz(in[i]) : ampdiag_fp16_rne(in[i]);
}

/* x[0..n) := bf16(x) with AVX2 integer arithmetic on the bit patterns (as numfmt.h). */
__attribute__((target("avx2"))) static void round_bf16_avx2(const float *in, float *x, size_t n, int ftz)
{
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u), bias = _mm256_set1_epi32(0x7fff);
    const __m256i one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x00400000);
    const __m256i min_normal = _mm256_set1_epi32(0x00800000);
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    size_t i = 0;
    for (; n >= 8 && i <= n - 8; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(in + i));
        __m256i a = _mm256_and_si256(u, abs_mask);
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), hi);
        __m256i nan = _mm256_and_si256(_mm256_or_si256(u, quiet), hi);
        r = _mm256_blendv_epi8(r, nan, _mm256_cmpgt_epi32(a, inf));
        if (ftz)
            r = _mm256_blendv_epi8(r, _mm256_and_si256(u, sign), _mm256_cmpgt_epi32(min_normal, a));
        _mm256_storeu_si256((__m256i *)(void *)(x + i), r);
    }
    for (; i < n; i++)
        x[i] = ftz ? ampdiag_bf16_rne_ftz(in[i]) : ampdiag_bf16_rne(in[i]);
}

/* The same two with AVX-512F, 16 values at a time (the same operations on wider registers,
 * masks for the blends), the last n % 16 by the code above. */
__attribute__((target("avx512f"))) static void round_fp16_avx512(const float *in, float *x, size_t n, int ftz)
{
    const __m512 min_normal = _mm512_set1_ps(0x1p-14f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    size_t i = 0;
    for (; n >= 16 && i <= n - 16; i += 16) {
        __m512 v = _mm512_loadu_ps(in + i);
        __m512 r = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        if (ftz) {
            __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_abs_ps(r), min_normal, _CMP_LT_OQ);
            __m512i b = _mm512_castps_si512(r);
            r = _mm512_castsi512_ps(_mm512_mask_and_epi32(b, tiny, b, sign));
        }
        _mm512_storeu_ps(x + i, r);
    }
    round_fp16_f16c(in + i, x + i, n - i, ftz);
}

__attribute__((target("avx512f"))) static void round_bf16_avx512(const float *in, float *x, size_t n, int ftz)
{
    const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u), bias = _mm512_set1_epi32(0x7fff);
    const __m512i one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x00400000);
    const __m512i min_normal = _mm512_set1_epi32(0x00800000);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
    size_t i = 0;
    for (; n >= 16 && i <= n - 16; i += 16) {
        __m512i u = _mm512_loadu_si512((const void *)(in + i));
        __m512i a = _mm512_and_si512(u, abs_mask);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
        __m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), hi);
        r = _mm512_mask_and_epi32(r, _mm512_cmpgt_epi32_mask(a, inf), _mm512_or_si512(u, quiet), hi);
        if (ftz)
            r = _mm512_mask_and_epi32(r, _mm512_cmpgt_epi32_mask(min_normal, a), u, sign);
        _mm512_storeu_si512((void *)(x + i), r);
    }
    round_bf16_avx2(in + i, x + i, n - i, ftz);
}
#endif

/* Which vector paths this CPU has: 1 F16C (FP16), 2 AVX2 (BF16), 4 AVX-512F (both, with the
 * other two for the tails); AMPDIAG_ROUND_IMPL=generic turns them off, =avx2 keeps the first
 * two only. All give the same bits as numfmt.h (make check-exhaustive compares them on all 2^32
 * inputs). */
int ampdiag_round_simd_caps(void)
{
    static atomic_int caps = -1;
    if (atomic_load_explicit(&caps, memory_order_relaxed) < 0) {
        int c = 0;
#ifdef NUMFMT_X86
        const char *want = getenv("AMPDIAG_ROUND_IMPL");
        if (!(want && strcmp(want, "generic") == 0)) {
            if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c")) c |= 1;
            if (__builtin_cpu_supports("avx2")) c |= 2;
            if (c == 3 && __builtin_cpu_supports("avx512f") && !(want && strcmp(want, "avx2") == 0))
                c |= 4;
        }
#endif
        atomic_store_explicit(&caps, c, memory_order_relaxed); /* every thread computes the same value */
    }
    return atomic_load_explicit(&caps, memory_order_relaxed);
}

/* x[0..n) := rounded in[0..n), one scalar loop per row and flag (the rounding inlined). */
#define ROUND_LOOPS(fn, rne, rne_ftz)                                                     \
    static void fn(const float *in, float *out, size_t n, int ftz)                        \
    {                                                                                     \
        if (ftz)                                                                          \
            for (size_t i = 0; i < n; i++) out[i] = rne_ftz(in[i]);                       \
        else                                                                              \
            for (size_t i = 0; i < n; i++) out[i] = rne(in[i]);                           \
    }
static void round_n_fp32(const float *in, float *out, size_t n, int ftz)
{
    if (ftz)
        for (size_t i = 0; i < n; i++) out[i] = fp32_ftz(in[i]);
    else if (in != out)
        memmove(out, in, n * sizeof *out);
}
ROUND_LOOPS(round_n_fp16, ampdiag_fp16_rne, ampdiag_fp16_rne_ftz)
ROUND_LOOPS(round_n_bf16, ampdiag_bf16_rne, ampdiag_bf16_rne_ftz)
ROUND_LOOPS(round_n_e4m3, ampdiag_e4m3_rne, ampdiag_e4m3_rne_ftz)
ROUND_LOOPS(round_n_e5m2, ampdiag_e5m2_rne, ampdiag_e5m2_rne_ftz)
ROUND_LOOPS(round_n_e2m1, e2m1_round, e2m1_ftz)
ROUND_LOOPS(round_n_e2m3, e2m3_round, e2m3_ftz)
ROUND_LOOPS(round_n_e3m2, e3m2_round, e3m2_ftz)
ROUND_LOOPS(round_n_e8m0, e8m0_round, e8m0_ftz)
#undef ROUND_LOOPS

typedef void (*round_n_fn)(const float *, float *, size_t, int);

/* Per row: the portable loop, a vector path with the CPU capability it needs (0: none), and
 * its AVX-512 version (capability 4). */
static const struct {
    round_n_fn scalar, simd;
    int cap;
    round_n_fn wide;
} round_impl[AMPDIAG_NFORMATS_ALL] = {
    [AMPDIAG_FP32] = {round_n_fp32, NULL, 0, NULL},
#ifdef NUMFMT_X86
    [AMPDIAG_FP16] = {round_n_fp16, round_fp16_f16c, 1, round_fp16_avx512},
    [AMPDIAG_BF16] = {round_n_bf16, round_bf16_avx2, 2, round_bf16_avx512},
#else
    [AMPDIAG_FP16] = {round_n_fp16, NULL, 0, NULL},
    [AMPDIAG_BF16] = {round_n_bf16, NULL, 0, NULL},
#endif
    [AMPDIAG_E4M3] = {round_n_e4m3, NULL, 0, NULL},
    [AMPDIAG_E5M2] = {round_n_e5m2, NULL, 0, NULL},
    [AMPDIAG_E2M1] = {round_n_e2m1, NULL, 0, NULL},
    [AMPDIAG_E2M3] = {round_n_e2m3, NULL, 0, NULL},
    [AMPDIAG_E3M2] = {round_n_e3m2, NULL, 0, NULL},
    [AMPDIAG_E8M0] = {round_n_e8m0, NULL, 0, NULL},
};

int ampdiag_round_array(ampdiag_format fmt, unsigned flags, const float *in, float *out, size_t n)
{
    if (!ampdiag_format_get(fmt))
        return -1;
    int ftz = (flags & AMPDIAG_ROUND_FTZ) != 0, caps = ampdiag_round_simd_caps();
    if (round_impl[fmt].wide && (caps & 4))
        round_impl[fmt].wide(in, out, n, ftz);
    else if (round_impl[fmt].simd && (caps & round_impl[fmt].cap))
        round_impl[fmt].simd(in, out, n, ftz);
    else
        round_impl[fmt].scalar(in, out, n, ftz);
    return 0;
}

uint16_t ampdiag_fp16_encode(float x) { return ampdiag_fp16_bits_rne(x); }
float ampdiag_fp16_decode(uint16_t h) { return ampdiag_fp16_bits_to_f32(h); }
uint16_t ampdiag_bf16_encode(float x) { return ampdiag_bf16_bits_rne(x); }
float ampdiag_bf16_decode(uint16_t b) { return ampdiag_bf16_bits_to_f32(b); }
uint8_t ampdiag_e4m3_encode(float x) { return ampdiag_e4m3_bits_rne(x); }
float ampdiag_e4m3_decode(uint8_t c) { return ampdiag_e4m3_bits_to_f32(c); }
uint8_t ampdiag_e5m2_encode(float x) { return ampdiag_e5m2_bits_rne(x); }
float ampdiag_e5m2_decode(uint8_t c) { return ampdiag_e5m2_bits_to_f32(c); }

float ampdiag_delayed_scale(ampdiag_format fmt, const float *amax_history, size_t len, int margin,
                            float prev_scale)
{
    const ampdiag_format_info *f = ampdiag_format_get(fmt);
    if (!f || len == 0)
        return prev_scale;
    float amax = amax_history[0];
    for (size_t i = 1; i < len && !isnan(amax); i++)
        if (isnan(amax_history[i]) || amax_history[i] > amax)
            amax = amax_history[i]; /* a NaN wins, as in torch.max */
    if (!(amax > 0.0f) || !isfinite(amax))
        return prev_scale;
    /* float32 throughout, as TE's tensors: (max / amax) / 2^margin */
    float sf = (f->max_finite / amax) / ldexpf(1.0f, margin);
    return isinf(sf) ? FLT_MAX : sf;
}

/* The smallest |x| bit pattern a in [0, 2^31) with |fl(x * scale)| bits >= t, or AMPDIAG_F32_INF
 * when no finite x has one (fl(|x| * scale) is monotone in |x|: bisection). */
static uint32_t first_scaled_at_least(float scale, uint32_t t)
{
    uint32_t lo = 0, hi = AMPDIAG_F32_INF; /* answer in [lo, hi]; hi stands for "none" */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        float y = ampdiag_f32_from_bits(mid) * scale;
        if ((ampdiag_f32_bits(y) & 0x7fffffffu) >= t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

int ampdiag_scaled_thresholds(ampdiag_format fmt, float scale, uint32_t bits[3])
{
    if (!ampdiag_format_get(fmt) || !(scale > 0.0f) || !isfinite(scale))
        return -1;
    const uint32_t *t = class_row(fmt);
    bits[0] = first_scaled_at_least(scale, t[0]);
    bits[1] = first_scaled_at_least(scale, t[1]);
    bits[2] = first_scaled_at_least(scale, t[2] + 1u) - 1u; /* the last one at most t[2] */
    return 0;
}
