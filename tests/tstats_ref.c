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
        /* every row of the format table: actually round, and classify the result */
        for (int f = 0; f < AMPDIAG_NFORMATS; f++) {
            const ampdiag_format_info *fi = ampdiag_format_get((ampdiag_format)f);
            float r = fi->round(v);
            if (!isfinite(r)) s->whatif[f][AMPDIAG_WHATIF_OVERFLOW]++; /* inf, or NaN in E4M3 */
            if (v != 0 && r == 0) s->whatif[f][AMPDIAG_WHATIF_UNDERFLOW]++;
            if (r != 0 && fabsf(r) < fi->min_normal) s->whatif[f][AMPDIAG_WHATIF_SUBNORMAL]++;
        }
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
    for (int f = 0; f < AMPDIAG_NFORMATS; f++) {
        const ampdiag_format_info *fi = ampdiag_format_get((ampdiag_format)f);
        uint64_t *w = s->whatif[f];
        for (size_t i = 0; i < n; i++) w[0] += isfinite(x[i]) && fabsf(x[i]) >= fi->overflow_at;
        for (size_t i = 0; i < n; i++) w[1] += x[i] != 0 && fabsf(x[i]) <= fi->underflow_at;
        for (size_t i = 0; i < n; i++) w[2] += fabsf(x[i]) > fi->underflow_at && fabsf(x[i]) < fi->normal_at;
    }
    if (h) {
        memset(h, 0, sizeof *h);
        for (size_t i = 0; i < n; i++) h->bin[ampdiag_hist_bin_of(x[i])]++;
    }
}
