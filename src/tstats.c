/*
 * tstats.c - fused per-tensor statistics (ampdiag.h): one pass over the data fills every
 * field of an ampdiag_tstats record and, optionally, the exponent histogram.
 *
 * The kernel body lives in tstats_kernel.h and is compiled twice: once for the baseline
 * instruction set and once with AVX2 enabled, chosen at run time. Both give bit-identical
 * records: counts are exact, min/max are exact, and sums are per-lane doubles added in a fixed
 * order.
 */
#include "ampdiag.h"
#include "numfmt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TSTATS_BLOCK 4096
#define TSTATS_LANES 16

/* The bit pattern of x[i] (memcpy: no aliasing of float as integer). */
static inline uint32_t load_bits(const float *x, size_t i)
{
    uint32_t u;
    memcpy(&u, x + i, sizeof u);
    return u;
}

/* Inverse of the order-preserving key used in the kernel. */
static inline float key_to_float(int32_t k)
{
    uint32_t u = (uint32_t)k;
    u ^= (uint32_t)(k >> 31) & 0x7fffffffu;
    return ampdiag_f32_from_bits(u);
}

/* Bin of a float32 subnormal |x| bit pattern a (0 < a < 2^23): exponent -149 + floor(log2 a). */
static inline int subnormal_bin(uint32_t a)
{
    int lz = __builtin_clz(a); /* 9 .. 31 */
    return AMPDIAG_HIST_BIN(-149 + (31 - lz));
}

#define TSTATS_KERNEL tstats_kernel_generic
#define TSTATS_TARGET
#include "tstats_kernel.h"
#undef TSTATS_KERNEL
#undef TSTATS_TARGET

#if defined(__x86_64__) && defined(__GNUC__)
#define TSTATS_HAVE_AVX2 1
#define TSTATS_KERNEL tstats_kernel_avx2
#define TSTATS_TARGET __attribute__((target("avx2")))
#include "tstats_kernel.h"
#undef TSTATS_KERNEL
#undef TSTATS_TARGET
#endif

typedef void (*tstats_fn)(ampdiag_tstats *, ampdiag_hist *, const float *, size_t);

/* AMPDIAG_TSTATS_IMPL=generic forces the portable kernel (tests compare the two). */
static tstats_fn pick_kernel(const char **name)
{
#ifdef TSTATS_HAVE_AVX2
    const char *want = getenv("AMPDIAG_TSTATS_IMPL");
    if (__builtin_cpu_supports("avx2") && !(want && strcmp(want, "generic") == 0)) {
        if (name) *name = "avx2";
        return tstats_kernel_avx2;
    }
#endif
    if (name) *name = "generic";
    return tstats_kernel_generic;
}

const char *ampdiag_tstats_impl(void)
{
    const char *name;
    pick_kernel(&name);
    return name;
}

void ampdiag_tstats_init(ampdiag_tstats *s)
{
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    s->max = -INFINITY;
    s->absmax = -INFINITY;
    s->absmin_nz = INFINITY;
}

void ampdiag_hist_init(ampdiag_hist *h) { memset(h, 0, sizeof *h); }

void ampdiag_hist_merge(ampdiag_hist *dst, const ampdiag_hist *src)
{
    for (int i = 0; i < AMPDIAG_HIST_BINS; i++)
        dst->bin[i] += src->bin[i];
}

void ampdiag_tstats_accumulate(ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t n)
{
    if (n == 0)
        return;
    pick_kernel(NULL)(s, h, x, n);
}

void ampdiag_tstats_compute(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h)
{
    ampdiag_tstats_init(s);
    if (h)
        ampdiag_hist_init(h);
    ampdiag_tstats_accumulate(s, h, x, n);
}

void ampdiag_tstats_merge(ampdiag_tstats *d, const ampdiag_tstats *s)
{
    d->count += s->count;
    d->n_nan += s->n_nan;
    d->n_posinf += s->n_posinf;
    d->n_neginf += s->n_neginf;
    d->n_zero += s->n_zero;
    d->n_neg += s->n_neg;
    d->n_pos += s->n_pos;
    d->fp16_overflow += s->fp16_overflow;
    d->fp16_underflow += s->fp16_underflow;
    d->fp16_subnormal += s->fp16_subnormal;
    d->bf16_overflow += s->bf16_overflow;
    d->bf16_underflow += s->bf16_underflow;
    d->bf16_subnormal += s->bf16_subnormal;
    if (s->min < d->min) d->min = s->min;
    if (s->max > d->max) d->max = s->max;
    if (s->absmax > d->absmax) d->absmax = s->absmax;
    if (s->absmin_nz < d->absmin_nz) d->absmin_nz = s->absmin_nz;
    d->sum += s->sum;
    d->sumsq += s->sumsq;
}

uint64_t ampdiag_tstats_finite(const ampdiag_tstats *s)
{
    return s->count - s->n_nan - s->n_posinf - s->n_neginf;
}

double ampdiag_tstats_mean(const ampdiag_tstats *s)
{
    uint64_t nf = ampdiag_tstats_finite(s);
    return nf ? s->sum / (double)nf : NAN;
}

double ampdiag_tstats_rms(const ampdiag_tstats *s)
{
    uint64_t nf = ampdiag_tstats_finite(s);
    return nf ? sqrt(s->sumsq / (double)nf) : NAN;
}

int ampdiag_hist_bin_of(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    uint32_t a = u & 0x7fffffffu;
    if (a > AMPDIAG_F32_INF) return AMPDIAG_HIST_NAN;
    if (a == AMPDIAG_F32_INF) return (u >> 31) ? AMPDIAG_HIST_NEGINF : AMPDIAG_HIST_POSINF;
    if (a == 0) return AMPDIAG_HIST_ZERO;
    if (a < AMPDIAG_F32_MIN_NORMAL) return subnormal_bin(a);
    return AMPDIAG_HIST_BIN((int)(a >> 23) - 127);
}
