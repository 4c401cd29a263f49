/*
 * findings_range.c - what a trace says about ranges and formats (findings_internal.h): the
 * forward pass against FP16's and BF16's limits, the loss scale the gradients allow and what
 * FP16 flushes at it, lost updates, the gradient norms a clip value rests on, and what every
 * other what-if column (FP8, ...) would do to each tensor.
 */
#include "analysis/findings_internal.h"
#include "analysis/hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * The forward pass against the formats' limits
 * ------------------------------------------------------------------------------------------ */

/* One finding per layer run in 16 bits (not an FP32 op, not an island) whose activations (else
 * weights) reach limit, in layer order. */
static void forward_hits(fctx *x, an_fid id, double limit)
{
    const an_run *r = x->r;
    static const int kinds[2] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_WEIGHT};
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op || L->island)
            continue;
        for (int j = 0; j < 2; j++) {
            const an_cell *c = &L->cell[kinds[j]];
            if (!(c->records && c->absmax >= limit))
                continue;
            an_finding *f = fadd(x, id);
            if (f) {
                f->s.layer = (int)l;
                f->s.kind = kinds[j];
                f->s.from = c->absmax_step;
                f->v[0] = c->absmax;
                f->v[1] = (double)c->absmax_step;
                f->v[2] = log2(an_k(K_FP16_MAX) / c->absmax);
            }
            break;
        }
    }
}

/* Activations or weights of a layer run in 16 bits overflow the run's own format (FP16 counts
 * and inf in an fp16 run, BF16's in a bf16 one); an fp32 run: what FP16 would do. The first
 * such layer. */
static void overflow_in_run(fctx *x)
{
    const an_run *r = x->r;
    int fp32 = r->prec == PREC_FP32, fp16 = r->prec == PREC_FP16 || fp32;
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op || L->island)
            continue;
        for (int k = AMPDIAG_KIND_ACTIVATION; k <= AMPDIAG_KIND_WEIGHT; k += 2) {
            const an_cell *c = &L->cell[k];
            uint64_t o = c->wi[fp16 ? AN_WI_FP16 : AN_WI_BF16][AMPDIAG_WHATIF_OVERFLOW];
            if (!fp32)
                o += c->posinf + c->neginf;
            if (!o)
                continue;
            an_finding *f = fadd(x, F_OVERFLOW_IN_RUN);
            if (f) {
                f->s.layer = (int)l;
                f->s.kind = k;
                f->s.col = fp16 ? AN_WI_FP16 : AN_WI_BF16;
                f->v[0] = (double)o;
                f->v[1] = fp32;
            }
            return;
        }
    }
}

/* ------------------------------------------------------------------------------------------
 * The loss scale (rule (b)5) from the unscaled gradients
 * ------------------------------------------------------------------------------------------ */

typedef struct scale_m {
    int log2;
    double max_grad;
    int max_layer, max_kind;
    int64_t max_step;
    int from_hist;
    double flushed, flushed_norm, subnormal, flushed1;
    int fl_layer, fl_kind, sub_layer, sub_kind, fl1_layer, fl1_kind;
    double range_log2;
} scale_m;

static const int grad_kinds[2] = {AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_KIND_WEIGHT_GRAD};

/* The largest unscaled gradient magnitude of the layers run in 16 bits. */
static void largest_gradient(const an_run *r, scale_m *s)
{
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op)
            continue;
        for (int j = 0; j < 2; j++) {
            const an_cell *c = &L->cell[grad_kinds[j]];
            if (c->records && c->absmax_u > s->max_grad && isfinite(c->absmax_u)) {
                s->max_grad = c->absmax_u;
                s->max_layer = (int)l;
                s->max_kind = grad_kinds[j];
                s->max_step = c->absmax_u_step;
            }
        }
    }
}

/* The largest k with g * 2^k <= 65504 / 2 (one binade of margin), computed exactly. */
static int scale_log2(double g)
{
    /* g > 0; a quotient that overflows (g subnormal) or a non-finite g must not reach the int
     * conversion (undefined) or make the loops below run for 2^31 steps: clamp to the range of
     * double's exponents, within which the loops correct k in a few steps */
    double margin = an_k(K_FP16_MARGIN_AT);
    double l = log2(margin / g);
    int k = isnan(l) ? 0 : l > 1100 ? 1100 : l < -1100 ? -1100 : (int)floor(l);
    if (!isfinite(g) || !(g > 0))
        return k;
    while (ldexp(g, k) > margin)
        k--;
    while (ldexp(g, k + 1) <= margin)
        k++;
    return k;
}

/* One gradient cell at the scale 2^s->log2: its unscaled histogram (else its smallest
 * magnitude: a bound) and, for a run without loss scaling, its FP16 underflow count. Raises
 * the worst shares flushed, subnormal and flushed without scaling; adds the histogram to all.
 * Returns 1 when the cell has a histogram. */
static int scale_cell(const an_run *r, size_t l, int kind, scale_m *s, uint64_t *all)
{
    const an_cell *c = &r->layers[l].cell[kind];
    double fl, sub, fln = NAN;
    uint64_t nz;
    if (c->hist) {
        an_hist_fp16_at_scale(c->hist, s->log2, &fl, &sub, &nz);
        fln = an_hist_fp16_flushed_norm(c->hist, s->log2);
        if (all)
            for (int b = 0; b < AMPDIAG_HIST_BINS; b++)
                all[b] += c->hist[b];
    } else {
        /* bounds only: nothing flushes when the smallest value survives */
        fl = isfinite(c->absmin_u) && ldexp(c->absmin_u, s->log2) > an_k(K_FP16_UNDERFLOW_AT) ? 0 : NAN;
        sub = NAN;
    }
    if (fl > s->flushed) {
        s->flushed = fl;
        s->fl_layer = (int)l;
        s->fl_kind = kind;
        s->flushed_norm = fln;
    }
    if (sub > s->subnormal) {
        s->subnormal = sub;
        s->sub_layer = (int)l;
        s->sub_kind = kind;
    }
    if (!r->scaled) { /* without scaling: the run's own FP16 counts, when it ran unscaled */
        uint64_t z = an_cell_nonzero(c);
        double f1 = z ? (double)c->wi[AN_WI_FP16][AMPDIAG_WHATIF_UNDERFLOW] / (double)z : 0;
        if (f1 > s->flushed1) {
            s->flushed1 = f1;
            s->fl1_layer = (int)l;
            s->fl1_kind = kind;
        }
    }
    return c->hist != NULL;
}

/* The suggested scale 2^log2, the worst per-layer shares at it and without scaling, and the
 * gradients' range log2(max / 1st percentile) of the summed histograms. 0 when r has no
 * finite non-zero gradient. */
static int scale_measure(const an_run *r, scale_m *s)
{
    memset(s, 0, sizeof *s);
    s->max_grad = -1;
    s->flushed_norm = s->range_log2 = NAN;
    s->fl_layer = s->sub_layer = s->fl1_layer = -1;
    largest_gradient(r, s);
    if (!(s->max_grad > 0))
        return 0;
    s->log2 = scale_log2(s->max_grad);
    uint64_t *all = calloc(AMPDIAG_HIST_BINS, sizeof *all);
    int any_hist = 0;
    for (size_t l = 0; l < r->nlayers; l++) {
        if (r->layers[l].fp32_op)
            continue;
        for (int j = 0; j < 2; j++)
            if (r->layers[l].cell[grad_kinds[j]].records)
                any_hist |= scale_cell(r, l, grad_kinds[j], s, all);
    }
    s->from_hist = any_hist;
    if (any_hist && all) {
        double q = an_hist_quantile_log2(all, an_k(K_GRAD_RANGE_QUANTILE));
        if (!isnan(q))
            s->range_log2 = log2(s->max_grad) - q;
    }
    free(all);
    return 1;
}

static an_finding *at_cell(fctx *x, an_fid id, int layer, int kind)
{
    an_finding *f = fadd(x, id);
    if (f) {
        f->s.layer = layer;
        f->s.kind = kind;
    }
    return f;
}

static void scale_findings(fctx *x)
{
    scale_m s;
    if (!scale_measure(x->r, &s))
        return;
    an_finding *f = at_cell(x, F_LOSS_SCALE, s.max_layer, s.max_kind);
    if (f) {
        f->s.from = s.max_step;
        f->v[0] = s.log2;
        f->v[1] = s.max_grad;
        f->v[2] = (double)s.max_step;
        f->v[3] = s.from_hist;
    }
    if (s.fl_layer >= 0 && (f = at_cell(x, F_FLUSH_AT_SCALE, s.fl_layer, s.fl_kind))) {
        f->v[0] = s.flushed;
        f->v[1] = s.flushed_norm;
        f->v[2] = s.log2;
    }
    if (s.sub_layer >= 0 && (f = at_cell(x, F_SUBNORMAL_AT_SCALE, s.sub_layer, s.sub_kind))) {
        f->v[0] = s.subnormal;
        f->v[1] = s.log2;
    }
    if (s.fl1_layer >= 0 && (f = at_cell(x, F_FLUSH_UNSCALED, s.fl1_layer, s.fl1_kind)))
        f->v[0] = s.flushed1;
    if (isfinite(s.range_log2) && (f = fadd(x, F_GRAD_SPAN))) {
        f->v[0] = s.range_log2;
        f->v[1] = s.range_log2 > an_k(K_FP16_SPAN_LOG2);
    }
}

/* Every layer whose activations reach FP16's overflow, FP32 ops and islands included (whether
 * FP32 islands keep the forward pass finite). */
static void activation_overflow(fctx *x)
{
    const an_run *r = x->r;
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_cell *c = &r->layers[l].cell[AMPDIAG_KIND_ACTIVATION];
        an_finding *f;
        if (!(c->absmax >= an_k(K_FP16_OVERFLOW_AT)) || !(f = fadd(x, F_ACT_OVERFLOW)))
            continue;
        f->s.layer = (int)l;
        f->s.kind = AMPDIAG_KIND_ACTIVATION;
        f->v[0] = c->absmax;
        f->v[1] = (double)c->absmax_step;
        f->v[2] = r->layers[l].fp32_op;
        f->v[3] = r->layers[l].island;
    }
}

void an_range_findings(fctx *x)
{
    activation_overflow(x);
    forward_hits(x, F_FWD_OVERFLOW, an_k(K_FP16_OVERFLOW_AT));
    forward_hits(x, F_FWD_HEADROOM_LOW, an_k(K_FP16_MARGIN_AT));
    forward_hits(x, F_BF16_OVERFLOW, an_k(K_BF16_OVERFLOW_AT));
    overflow_in_run(x);
    scale_findings(x);
}

/* ------------------------------------------------------------------------------------------
 * Lost updates
 * ------------------------------------------------------------------------------------------ */

/* The layer losing the largest share of its non-zero updates: in the run (what_if < 0) or
 * with weights in FP16 (0) / BF16 (1). Returns the share (0 when none); *layer -1 when none. */
static double worst_lost(const an_run *r, int what_if, int *layer)
{
    double worst = 0;
    *layer = -1;
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_cell *u = &r->layers[l].cell[AMPDIAG_KIND_UPDATE];
        uint64_t z = an_cell_nonzero(u);
        double f = z ? (double)(what_if < 0 ? u->lost : u->lost_if[what_if]) / (double)z : 0;
        if (f > worst) {
            worst = f;
            *layer = (int)l;
        }
    }
    return worst;
}

void an_update_findings(fctx *x)
{
    const an_run *r = x->r;
    int wl;
    an_finding *f;
    double worst = worst_lost(r, -1, &wl);
    if ((r->update_nonzero > 0 || isfinite(r->ratio_median)) && (f = fadd(x, F_LOST_UPDATES))) {
        f->s.layer = wl;
        f->s.kind = AMPDIAG_KIND_UPDATE;
        f->v[0] = worst;
        f->v[1] = r->update_nonzero ? (double)r->lost / (double)r->update_nonzero : 0;
        f->v[2] = r->ratio_median;
    }
    if (!(r->have_lost_if && !r->weights_16bit && r->update_nonzero > 0))
        return;
    worst = worst_lost(r, 1, &wl);
    if ((f = fadd(x, F_LOST_IF_BF16))) {
        f->s.layer = wl;
        f->s.kind = AMPDIAG_KIND_UPDATE;
        f->v[0] = (double)r->lost_if[1] / (double)r->update_nonzero;
        f->v[1] = worst;
    }
}

/* ------------------------------------------------------------------------------------------
 * Gradient norms: the clip value and what goes with it
 * ------------------------------------------------------------------------------------------ */

void an_clip_findings(fctx *x)
{
    const an_run *r = x->r;
    const an_clip *k = &r->gn;
    an_finding *f;
    if (k->n < an_k(K_CLIP_MIN_NORMS) || !isfinite(k->value)) {
        if ((f = fadd(x, F_CLIP_FEW_NORMS))) {
            f->v[0] = (double)k->n;
            f->v[1] = (double)k->warmup;
        }
    } else if ((f = fadd(x, F_CLIP_VALUE))) {
        const double v[10] = {k->value, k->p99, k->median, k->mad, k->robust, (double)k->n,
                              (double)k->warmup, (double)k->n_over, (double)k->n_over / (double)k->n,
                              k->p10};
        memcpy(f->v, v, sizeof v);
        for (size_t i = 0; i < k->n_over_listed && i < 6; i++)
            f->v[10 + i] = (double)k->over_steps[i];
    }
    double d = k->median_last / k->median_first;
    if (isfinite(k->median_first) && isfinite(k->median_last) && k->median_first > 0 &&
        (d > an_k(K_CLIP_DRIFT) || d < 1.0 / an_k(K_CLIP_DRIFT)) && (f = fadd(x, F_NORM_DRIFT))) {
        f->v[0] = k->median_first;
        f->v[1] = k->median_last;
    }
    if (k->norm_spike_step >= 0 && (f = fadd(x, F_NORM_SPIKE))) {
        f->v[0] = k->norm_spike_ratio;
        f->v[1] = (double)k->norm_spike_step;
        f->v[2] = (double)k->norm_spike_loss_step;
        f->s.from = k->norm_spike_step;
    }
    an_fid prior = k->median < an_k(K_CLIP_PRIOR_NEVER)    ? F_CLIP_PRIOR_NEVER
                   : k->median > an_k(K_CLIP_PRIOR_ALWAYS) ? F_CLIP_PRIOR_ALWAYS
                                                           : F_NONE;
    if (prior != F_NONE && (f = fadd(x, prior)))
        f->v[0] = k->median;
    if (r->clip > 0 && (f = fadd(x, F_CLIPPED_BY_RUN))) {
        f->v[0] = r->clip;
        f->v[1] = (double)k->actually_clipped;
    }
}

/* ------------------------------------------------------------------------------------------
 * What-if columns beyond FP16 and BF16: which tensors a format would hurt, and why
 * ------------------------------------------------------------------------------------------ */

ampdiag_format an_recipe_format(int kind)
{
    return kind == AMPDIAG_KIND_ACTIVATION_GRAD || kind == AMPDIAG_KIND_WEIGHT_GRAD ? AMPDIAG_E5M2
                                                                                      : AMPDIAG_E4M3;
}

typedef struct hurt {
    int layer, kind, col;
    double v[11]; /* as F_WHATIF_HURT's figures */
} hurt;

static double share(const hurt *h) { return h->v[3] + h->v[4]; }

/* The hurt of cell c (layer, kind) in column col; 0 when under the threshold. */
static int hurt_of(const an_run *r, const an_cell *c, int layer, int kind, int col, int margin,
                   hurt *h)
{
    const an_whatif_col *w = &r->wcol[col];
    uint64_t values = c->wi_values[col];
    if (values == 0)
        return 0;
    const uint64_t *n = c->wi[col];
    double over = (double)n[AMPDIAG_WHATIF_OVERFLOW] / (double)values;
    double under = (double)n[AMPDIAG_WHATIF_UNDERFLOW] / (double)values;
    if (over + under < an_k(K_WHATIF_MIN_FRACTION))
        return 0;
    double span = log2(w->max_finite / w->min_subnormal);
    int wide = c->absmax > 0 && isfinite(c->absmin_nz) && log2(c->absmax / c->absmin_nz) > span;
    int ov = n[AMPDIAG_WHATIF_OVERFLOW] > n[AMPDIAG_WHATIF_UNDERFLOW];
    an_hurt_reason why;
    if (w->key.scaling == AMPDIAG_SCALING_NONE)
        why = ov ? AN_HURT_ABOVE : wide ? AN_HURT_RANGE : AN_HURT_BELOW;
    else
        why = ov ? (margin < 0 ? AN_HURT_MARGIN : AN_HURT_AMAX) : wide ? AN_HURT_RANGE : AN_HURT_HISTORY;
    *h = (hurt){layer, kind, col,
                {(double)values, (double)n[AMPDIAG_WHATIF_OVERFLOW], (double)n[AMPDIAG_WHATIF_UNDERFLOW],
                 over, under, c->absmax, c->absmin_nz, why, 0, 0, margin}};
    return 1;
}

/* Keep the top `cap` of h[0..*n) with x entered: largest share first, then layer, kind. */
static void top_insert(hurt *h, int *n, int cap, const hurt *x)
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

static void emit(fctx *x, const hurt *h, int n, int recipe)
{
    for (int i = 0; i < n; i++) {
        an_finding *f = fadd(x, F_WHATIF_HURT);
        if (!f)
            return;
        f->s.layer = h[i].layer;
        f->s.kind = h[i].kind;
        f->s.col = h[i].col;
        memcpy(f->v, h[i].v, sizeof h[i].v);
        f->v[8] = recipe;
        f->v[9] = i + 1;
    }
}

/* Every unscaled column but FP16's and BF16's: its top tensors. */
static void column_hurt(fctx *x, int col)
{
    const an_run *r = x->r;
    hurt top[AN_HURT_TOP_COLUMN], h;
    int n = 0;
    for (size_t l = 0; l < r->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++)
            if (hurt_of(r, &r->layers[l].cell[k], (int)l, k, col, 0, &h))
                top_insert(top, &n, AN_HURT_TOP_COLUMN, &h);
    emit(x, top, n, 0);
}

/* Transformer Engine's default recipe (delayed scaling, E4M3 for activations and weights, E5M2
 * for their gradients): the tensors it would hurt, largest share first. */
static void recipe_hurt(fctx *x)
{
    const an_run *r = x->r;
    int dl[2] = {an_whatif_find(r, AMPDIAG_E4M3, AMPDIAG_SCALING_DELAYED),
                 an_whatif_find(r, AMPDIAG_E5M2, AMPDIAG_SCALING_DELAYED)};
    x->F->recipe = dl[0] >= 0 || dl[1] >= 0;
    x->F->recipe_hurt_all = 0;
    if (!x->F->recipe)
        return;
    hurt top[AN_HURT_TOP], h;
    int n = 0;
    for (size_t l = 0; l < r->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            int col = dl[an_recipe_format(k) == AMPDIAG_E4M3 ? 0 : 1];
            if (k == AMPDIAG_KIND_UPDATE || col < 0 ||
                !hurt_of(r, &r->layers[l].cell[k], (int)l, k, col, r->fp8_margin, &h))
                continue;
            top_insert(top, &n, AN_HURT_TOP, &h);
            x->F->recipe_hurt_all++;
        }
    emit(x, top, n, 1);
}

void an_whatif_findings(fctx *x)
{
    const an_run *r = x->r;
    for (int col = 0; col < r->nwcol; col++)
        if (col != AN_WI_FP16 && col != AN_WI_BF16 && r->wcol[col].key.scaling == AMPDIAG_SCALING_NONE &&
            !an_whatif_is_quant(r, col))
            column_hurt(x, col);
    recipe_hurt(x);
}
