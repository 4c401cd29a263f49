/*
 * fp8.c - FP8 what-if: /whatif into the run's cells, and which tensors FP8 would hurt (fp8.h).
 */
#include "analysis/fp8.h"
#include "analysis/findings.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ampdiag_format fp8_fmt[2] = {AMPDIAG_E4M3, AMPDIAG_E5M2};

ampdiag_format an_fp8_recipe_format(int kind)
{
    return kind == AMPDIAG_KIND_ACTIVATION_GRAD || kind == AMPDIAG_KIND_WEIGHT_GRAD ? AMPDIAG_E5M2
                                                                                      : AMPDIAG_E4M3;
}

/* ------------------------------------------------------------------------------------------
 * Findings
 * ------------------------------------------------------------------------------------------ */

/* The hurt of cell c (layer, kind) in format slot f (its column col) under a scaling; 0 when
 * under the threshold or the column is missing. */
static int hurt_of(const an_cell *c, int layer, int kind, int f, int col, int scaling, int margin,
                   an_fp8_hurt *h)
{
    if (col < 0)
        return 0;
    const uint64_t *v = c->wi[col];
    uint64_t values = c->wi_values[col];
    if (values == 0)
        return 0;
    memset(h, 0, sizeof *h);
    h->layer = layer;
    h->kind = kind;
    h->format = fp8_fmt[f];
    h->scaling = scaling;
    h->values = values;
    h->overflow = v[AMPDIAG_WHATIF_OVERFLOW];
    h->underflow = v[AMPDIAG_WHATIF_UNDERFLOW];
    h->overflow_fraction = (double)h->overflow / (double)values;
    h->underflow_fraction = (double)h->underflow / (double)values;
    h->absmax = c->absmax;
    h->absmin_nz = c->absmin_nz;
    if (h->overflow_fraction + h->underflow_fraction < AN_FP8_MIN_FRACTION)
        return 0;
    const ampdiag_format_info *fi = ampdiag_format_get(h->format);
    double span = log2((double)fi->max_finite / (double)fi->min_subnormal);
    int wide = h->absmax > 0 && isfinite(h->absmin_nz) && log2(h->absmax / h->absmin_nz) > span;
    int over = h->overflow > h->underflow;
    if (scaling == AMPDIAG_SCALING_NONE)
        h->reason = over ? AN_FP8_ABOVE : wide ? AN_FP8_RANGE : AN_FP8_BELOW;
    else
        h->reason = over ? (margin < 0 ? AN_FP8_MARGIN : AN_FP8_AMAX) : wide ? AN_FP8_RANGE : AN_FP8_HISTORY;
    return 1;
}

static double share(const an_fp8_hurt *h) { return h->overflow_fraction + h->underflow_fraction; }

/* Keep the top `cap` of the list h[0..*n) with x entered: largest share first, then layer, kind. */
static void top_insert(an_fp8_hurt *h, int *n, int cap, const an_fp8_hurt *x)
{
    int i = *n < cap ? (*n)++ : cap;
    if (i == cap && share(x) <= share(&h[cap - 1]))
        return;
    if (i == cap)
        i = cap - 1;
    while (i > 0 && share(&h[i - 1]) < share(x)) {
        h[i] = h[i - 1];
        i--;
    }
    h[i] = *x;
}

void an_fp8_findings_of(const an_run *r, an_fp8_findings *f)
{
    memset(f, 0, sizeof *f);
    int un[2], dl[2];
    for (int fm = 0; fm < 2; fm++) {
        un[fm] = an_whatif_find(r, fp8_fmt[fm], AMPDIAG_SCALING_NONE);
        dl[fm] = an_whatif_find(r, fp8_fmt[fm], AMPDIAG_SCALING_DELAYED);
    }
    f->unscaled = un[0] >= 0 && un[1] >= 0;
    f->delayed = dl[0] >= 0 || dl[1] >= 0;
    f->history = r->fp8_history;
    f->margin = r->fp8_margin;
    for (size_t l = 0; l < r->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            const an_cell *c = &r->layers[l].cell[k];
            an_fp8_hurt h;
            for (int fm = 0; f->unscaled && fm < 2; fm++)
                if (hurt_of(c, (int)l, k, fm, un[fm], AMPDIAG_SCALING_NONE, 0, &h))
                    top_insert(f->hurt_unscaled[fm], &f->n_unscaled[fm], 3, &h);
            int fm = an_fp8_recipe_format(k) == AMPDIAG_E4M3 ? 0 : 1;
            if (f->delayed && k != AMPDIAG_KIND_UPDATE &&
                hurt_of(c, (int)l, k, fm, dl[fm], AMPDIAG_SCALING_DELAYED, f->margin, &h)) {
                top_insert(f->hurt, &f->nhurt, AN_FP8_TOP, &h);
                f->nhurt_all++;
            }
        }
}

/* "2^-30" for a value's binary exponent (floor of log2). */
static void pow2(char *buf, size_t n, double x)
{
    snprintf(buf, n, "2^%d", (int)floor(log2(x)));
}

void an_fp8_why(const an_fp8_hurt *h, char *buf, size_t n)
{
    const ampdiag_format_info *fi = ampdiag_format_get((ampdiag_format)h->format);
    char fmt[8], lo[24], hi[24], sub[24];
    snprintf(fmt, sizeof fmt, "%s", h->format == AMPDIAG_E4M3 ? "E4M3" : "E5M2");
    pow2(lo, sizeof lo, h->absmin_nz);
    pow2(hi, sizeof hi, h->absmax);
    pow2(sub, sizeof sub, fi->min_subnormal);
    double span = log2((double)fi->max_finite / (double)fi->min_subnormal);
    const char *scaling = h->scaling == AMPDIAG_SCALING_NONE ? "unscaled" : "even with delayed scaling";
    int over = h->reason == AN_FP8_ABOVE || h->reason == AN_FP8_AMAX || h->reason == AN_FP8_MARGIN;
    int len = snprintf(buf, n, "%.3g%% of values would %s in %s %s: ",
                       100.0 * (over ? h->overflow_fraction : h->underflow_fraction),
                       over ? "overflow" : "flush to zero", fmt, scaling);
    if (len < 0 || (size_t)len >= n)
        return;
    buf += len;
    n -= (size_t)len;
    switch (h->reason) {
    case AN_FP8_RANGE:
        snprintf(buf, n, "its dynamic range %s..%s (%.1f binades) is wider than %s's %s..%g (%.1f)", lo, hi,
                 log2(h->absmax / h->absmin_nz), fmt, sub, (double)fi->max_finite, span);
        break;
    case AN_FP8_ABOVE:
        snprintf(buf, n, "its values reach %s, above %s's largest %g", hi, fmt, (double)fi->max_finite);
        break;
    case AN_FP8_BELOW:
        snprintf(buf, n, "its values reach down to %s, below %s's smallest subnormal %s", lo, fmt, sub);
        break;
    case AN_FP8_AMAX:
        snprintf(buf, n, "its amax grew past the largest of the history (the scale is set from earlier "
                         "steps), up to %s", hi);
        break;
    case AN_FP8_MARGIN:
        snprintf(buf, n, "the negative margin scales the history's largest amax beyond %s's largest %g",
                 fmt, (double)fi->max_finite);
        break;
    case AN_FP8_HISTORY:
        snprintf(buf, n, "its values (%s..%s) lie more than %.1f binades below the history's largest amax, "
                         "which sets the scale", lo, hi, span);
        break;
    }
}
