/*
 * tstats_ref.c - reference statistics for tests and the benchmark baseline.
 */
#include "tstats_ref.h"

#include <math.h>
#include <string.h>

static int ref_bin(float x)
{
    if (isnan(x)) return AMPDIAG_HIST_NAN;
    if (isinf(x)) return x > 0 ? AMPDIAG_HIST_POSINF : AMPDIAG_HIST_NEGINF;
    if (x == 0) return AMPDIAG_HIST_ZERO;
    int e;
    frexp((double)x, &e); /* |x| = m 2^e, m in [0.5, 1) */
    return AMPDIAG_HIST_BIN(e - 1);
}

void tstats_ref(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h)
{
    ampdiag_tstats_init(s);
    if (h) memset(h, 0, sizeof *h);
    long double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) {
        float v = x[i];
        s->count++;
        if (h) h->bin[ref_bin(v)]++;
        if (isnan(v)) { s->n_nan++; continue; }
        if (isinf(v)) { if (v > 0) s->n_posinf++; else s->n_neginf++; continue; }
        if (v == 0) s->n_zero++;
        else if (v < 0) s->n_neg++;
        else s->n_pos++;
        /* total order: -0 below +0 */
        if (v < s->min || (v == s->min && signbit(v) && !signbit(s->min))) s->min = v;
        if (v > s->max || (v == s->max && !signbit(v) && signbit(s->max))) s->max = v;
        if (fabsf(v) > s->absmax) s->absmax = fabsf(v);
        if (v != 0 && fabsf(v) < s->absmin_nz) s->absmin_nz = fabsf(v);
        sum += v;
        sq += (long double)v * v;
        float r16 = ampdiag_round(AMPDIAG_FP16, v), rb = ampdiag_round(AMPDIAG_BF16, v);
        if (isinf(r16)) s->fp16_overflow++;
        if (v != 0 && r16 == 0) s->fp16_underflow++;
        if (r16 != 0 && fabsf(r16) < 0x1p-14f) s->fp16_subnormal++;
        if (isinf(rb)) s->bf16_overflow++;
        if (v != 0 && rb == 0) s->bf16_underflow++;
        if (rb != 0 && fabsf(rb) < 0x1p-126f) s->bf16_subnormal++;
    }
    s->sum = (double)sum;
    s->sumsq = (double)sq;
}

/* One pass per question, each written the plain way. */
void tstats_multipass(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h)
{
    ampdiag_tstats_init(s);
    s->count = n;
    for (size_t i = 0; i < n; i++) s->n_nan += isnan(x[i]) != 0;
    for (size_t i = 0; i < n; i++) s->n_posinf += isinf(x[i]) && x[i] > 0;
    for (size_t i = 0; i < n; i++) s->n_neginf += isinf(x[i]) && x[i] < 0;
    for (size_t i = 0; i < n; i++) s->n_zero += x[i] == 0;
    for (size_t i = 0; i < n; i++) s->n_neg += isfinite(x[i]) && x[i] < 0;
    for (size_t i = 0; i < n; i++) s->n_pos += isfinite(x[i]) && x[i] > 0;
    for (size_t i = 0; i < n; i++) if (isfinite(x[i]) && x[i] < s->min) s->min = x[i];
    for (size_t i = 0; i < n; i++) if (isfinite(x[i]) && x[i] > s->max) s->max = x[i];
    for (size_t i = 0; i < n; i++) if (isfinite(x[i]) && fabsf(x[i]) > s->absmax) s->absmax = fabsf(x[i]);
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]) && x[i] != 0 && fabsf(x[i]) < s->absmin_nz) s->absmin_nz = fabsf(x[i]);
    for (size_t i = 0; i < n; i++) if (isfinite(x[i])) s->sum += x[i];
    for (size_t i = 0; i < n; i++) if (isfinite(x[i])) s->sumsq += (double)x[i] * x[i];
    for (size_t i = 0; i < n; i++) s->fp16_overflow += isfinite(x[i]) && fabsf(x[i]) >= 65520.0f;
    for (size_t i = 0; i < n; i++) s->fp16_underflow += x[i] != 0 && fabsf(x[i]) <= 0x1p-25f;
    for (size_t i = 0; i < n; i++) s->fp16_subnormal += fabsf(x[i]) > 0x1p-25f && fabsf(x[i]) < 0x1p-14f - 0x1p-25f;
    for (size_t i = 0; i < n; i++) s->bf16_overflow += isfinite(x[i]) && fabsf(x[i]) >= 0x1.ffp127f;
    for (size_t i = 0; i < n; i++) s->bf16_underflow += x[i] != 0 && fabsf(x[i]) <= 0x1p-134f;
    for (size_t i = 0; i < n; i++) s->bf16_subnormal += fabsf(x[i]) > 0x1p-134f && fabsf(x[i]) < 0x1.fep-127f;
    if (h) {
        memset(h, 0, sizeof *h);
        for (size_t i = 0; i < n; i++) h->bin[ampdiag_hist_bin_of(x[i])]++;
    }
}
