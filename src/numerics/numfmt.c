/*
 * numfmt.c - the exported number-format API (ampdiag.h) over the inline core in numfmt.h.
 */
#include "ampdiag.h"
#include "numerics/numfmt.h"

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

static const ampdiag_format_info format_table[AMPDIAG_NFORMATS] = {
    [AMPDIAG_FP32] = {"fp32", 32, 8, 23, 127, -126, 127, 3.40282347e38f, 0x1p-126f, 0x1p-149f,
                      0x1p-23f, 0x1p-24f, INFINITY, 0.0f},
    [AMPDIAG_FP16] = {"fp16", 16, 5, 10, 15, -14, 15, (float)AMPDIAG_FP16_MAX, 0x1p-14f, 0x1p-24f,
                      0x1p-10f, 0x1p-11f, 65520.0f, 0x1p-25f},
    [AMPDIAG_BF16] = {"bf16", 16, 8, 7, 127, -126, 127, 0x1.fep127f, 0x1p-126f, 0x1p-133f,
                      0x1p-7f, 0x1p-8f, 0x1.ffp127f, 0x1p-134f},
};

const ampdiag_format_info *ampdiag_format_get(ampdiag_format fmt)
{
    if ((int)fmt < 0 || fmt >= AMPDIAG_NFORMATS)
        return NULL;
    return &format_table[fmt];
}

int ampdiag_format_parse(const char *name, ampdiag_format *fmt)
{
    if (!name)
        return -1;
    for (int i = 0; i < AMPDIAG_NFORMATS; i++)
        if (strcasecmp(name, format_table[i].name) == 0) {
            *fmt = (ampdiag_format)i;
            return 0;
        }
    return -1;
}

float ampdiag_round(ampdiag_format fmt, float x)
{
    switch (fmt) {
    case AMPDIAG_FP32: return x;
    case AMPDIAG_FP16: return ampdiag_fp16_rne(x);
    case AMPDIAG_BF16: return ampdiag_bf16_rne(x);
    default: return NAN;
    }
}

static float fp32_ftz(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    return (u & 0x7fffffffu) < AMPDIAG_F32_MIN_NORMAL ? ampdiag_f32_from_bits(u & 0x80000000u) : x;
}

float ampdiag_round_ftz(ampdiag_format fmt, float x)
{
    switch (fmt) {
    case AMPDIAG_FP32: return fp32_ftz(x);
    case AMPDIAG_FP16: return ampdiag_fp16_rne_ftz(x);
    case AMPDIAG_BF16: return ampdiag_bf16_rne_ftz(x);
    default: return NAN;
    }
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
#endif

/* Which vector paths this CPU has: 1 F16C (FP16), 2 AVX2 (BF16); AMPDIAG_ROUND_IMPL=generic
 * turns them off. Both give the same bits as numfmt.h (make check-exhaustive compares them on
 * all 2^32 inputs). */
static int round_simd_caps(void)
{
    static atomic_int caps = -1;
    if (atomic_load_explicit(&caps, memory_order_relaxed) < 0) {
        int c = 0;
#ifdef NUMFMT_X86
        const char *want = getenv("AMPDIAG_ROUND_IMPL");
        if (!(want && strcmp(want, "generic") == 0)) {
            if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c")) c |= 1;
            if (__builtin_cpu_supports("avx2")) c |= 2;
        }
#endif
        atomic_store_explicit(&caps, c, memory_order_relaxed); /* every thread computes the same value */
    }
    return atomic_load_explicit(&caps, memory_order_relaxed);
}

int ampdiag_round_array(ampdiag_format fmt, unsigned flags, const float *in, float *out, size_t n)
{
#ifdef NUMFMT_X86
    int caps = round_simd_caps();
    if (fmt == AMPDIAG_FP16 && (caps & 1)) {
        round_fp16_f16c(in, out, n, (flags & AMPDIAG_ROUND_FTZ) != 0);
        return 0;
    }
    if (fmt == AMPDIAG_BF16 && (caps & 2)) {
        round_bf16_avx2(in, out, n, (flags & AMPDIAG_ROUND_FTZ) != 0);
        return 0;
    }
#endif
    int ftz = (flags & AMPDIAG_ROUND_FTZ) != 0;
    switch (fmt) {
    case AMPDIAG_FP32:
        if (ftz)
            for (size_t i = 0; i < n; i++) out[i] = fp32_ftz(in[i]);
        else if (in != out)
            memmove(out, in, n * sizeof *out);
        return 0;
    case AMPDIAG_FP16:
        if (ftz)
            for (size_t i = 0; i < n; i++) out[i] = ampdiag_fp16_rne_ftz(in[i]);
        else
            for (size_t i = 0; i < n; i++) out[i] = ampdiag_fp16_rne(in[i]);
        return 0;
    case AMPDIAG_BF16:
        if (ftz)
            for (size_t i = 0; i < n; i++) out[i] = ampdiag_bf16_rne_ftz(in[i]);
        else
            for (size_t i = 0; i < n; i++) out[i] = ampdiag_bf16_rne(in[i]);
        return 0;
    default:
        return -1;
    }
}

uint16_t ampdiag_fp16_encode(float x) { return ampdiag_fp16_bits_rne(x); }
float ampdiag_fp16_decode(uint16_t h) { return ampdiag_fp16_bits_to_f32(h); }
uint16_t ampdiag_bf16_encode(float x) { return ampdiag_bf16_bits_rne(x); }
float ampdiag_bf16_decode(uint16_t b) { return ampdiag_bf16_bits_to_f32(b); }
