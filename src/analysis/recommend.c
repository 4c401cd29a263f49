/*
 * recommend.c - the recommendation rules of docs/recommendations.md ("(b) Precision", "(c) Clip
 * value", "(d) Learning rate"; the facts they rest on: docs/numerics.md). Each rule reads the
 * run summaries of analyze.c and adds lines of evidence that name the numbers, steps and
 * layers it rests on. The precision rules run in the documented order; the first decisive one
 * sets the verdict and every other finding stays as a reason or a warning.
 */
#include "analysis/recommend.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FP16 facts (NUMERICS.md 1.1, 1.2). */
#define FP16_MAX 65504.0
#define FP16_OVERFLOW_AT 65520.0 /* |x| >= 65520 rounds to inf */
#define FP16_MARGIN_AT 32752.0   /* 1 binade of headroom (half of 65504) */
#define BF16_MAX 3.3895313892515355e38
#define BF16_OVERFLOW_AT 3.3961775292304256e38
#define FP16_SPAN_LOG2 40.0      /* 2^-24 .. 2^16: FP16's span including subnormals */
#define SWAMP_BF16 0.00390625    /* 2^-8: updates below this ratio are lost in BF16 storage */
#define SWAMP_FP16 0.00048828125 /* 2^-11 */

/* Thresholds of the rules (docs/recommendations.md). */
#define SKIP_RATE_MAX (1.0 / 500.0) /* skipped steps after calibration, PyTorch docs */
#define SKIP_MIN_COUNT 2            /* ... and at least this many (one skip is no rate) */
#define FLUSH_MAX 0.01              /* fraction of a layer's gradients lost at the best scale */
#define LOST_MAX 0.01               /* fraction of a layer's updates lost */
#define DEV_ISLAND 0.05             /* activation rms deviation that names a BF16 island */
#define RATIO_TARGET 1e-3           /* CS231n update/weight ratio */
#define RATIO_HIGH 1e-2
#define RATIO_LOW 1e-4
#define ISLAND_SHARE_MAX 0.5        /* islands holding more of the parameters are no rescue */

/* ------------------------------------------------------------------------------------------
 * Names and parsing
 * ------------------------------------------------------------------------------------------ */

static const char *const target_names[] = {"any", "sm70", "sm75", "sm80", "sm89", "sm90", "cpu"};

int rec_target_parse(const char *s, rec_target *t)
{
    for (size_t i = 0; i < sizeof target_names / sizeof target_names[0]; i++)
        if (strcmp(s, target_names[i]) == 0) {
            *t = (rec_target)i;
            return 0;
        }
    return -1;
}

const char *rec_target_name(rec_target t)
{
    return (size_t)t < sizeof target_names / sizeof target_names[0] ? target_names[t] : "?";
}

int rec_target_has_bf16(rec_target t) { return t != TGT_SM70 && t != TGT_SM75; }
int rec_target_has_fp16(rec_target t) { (void)t; return 1; }

const char *rec_precision_name(rec_precision p)
{
    switch (p) {
    case REC_FP32: return "fp32";
    case REC_FP16: return "fp16";
    case REC_BF16: return "bf16";
    default: return "undecided";
    }
}

const char *rec_lr_name(rec_lr_verdict v)
{
    switch (v) {
    case LR_KEEP: return "keep";
    case LR_LOWER: return "lower";
    case LR_RAISE: return "raise";
    case LR_KEEP_MASTER: return "keep-use-master-weights";
    case LR_PICK: return "pick";
    default: return "unknown";
    }
}

static const char *const fail_names[] = {"nan", "skips", "divergence", "overflow"};

const char *rec_fail_name(unsigned bit)
{
    for (unsigned i = 0; i < 4; i++)
        if (bit == 1u << i)
            return fail_names[i];
    return "?";
}

int rec_fail_parse(const char *list, unsigned *mask, char *err, size_t errlen)
{
    *mask = 0;
    if (!list || !*list) {
        snprintf(err, errlen, "--fail-on needs a list (nan,skips,divergence,overflow)");
        return -1;
    }
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        int found = 0;
        if (len == 3 && strncmp(p, "all", 3) == 0) {
            *mask |= FAIL_NAN | FAIL_SKIPS | FAIL_DIVERGENCE | FAIL_OVERFLOW;
            found = 1;
        } else if (len == 4 && strncmp(p, "none", 4) == 0) {
            found = 1;
        }
        for (unsigned i = 0; i < 4 && !found; i++)
            if (strlen(fail_names[i]) == len && strncmp(p, fail_names[i], len) == 0) {
                *mask |= 1u << i;
                found = 1;
            }
        if (!found) {
            snprintf(err, errlen,
                     "--fail-on: unknown condition '%.*s' (expected a comma-separated list of nan, "
                     "skips, divergence, overflow, or all)",
                     (int)len, p);
            return -1;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

void rec_fmt_scale(char *buf, size_t n, double v)
{
    int e;
    double m = frexp(v, &e);
    if (isfinite(v) && v > 0 && m == 0.5)
        snprintf(buf, n, "2^%d", e - 1);
    else
        snprintf(buf, n, "%g", v);
}

/* ------------------------------------------------------------------------------------------
 * Helpers over runs
 * ------------------------------------------------------------------------------------------ */

static int lr_eq(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

static int is_prec(const an_run *r, const char *p) { return strcmp(r->precision, p) == 0; }

static uint64_t nonzero(const an_cell *c)
{
    uint64_t bad = c->zero + c->nan + c->posinf + c->neginf;
    return c->count > bad ? c->count - bad : 0;
}

/* A run failed on its own: diverged or non-finite loss. */
static int run_failed(const an_run *r) { return r->diverged || r->loss_nonfinite > 0; }

/* NaN/inf in the forward pass of the very first step, before any update: not the learning
 * rate's doing (the format, or the data). */
static int failed_from_start(const an_run *r)
{
    return r->nsteps > 0 && r->fwd_nonfinite_step >= 0 && r->fwd_nonfinite_step <= r->first_step;
}

static int skips_too_many(const an_run *r)
{
    return r->skipped_after >= SKIP_MIN_COUNT && r->steps_after > 0 &&
           (double)r->skipped_after / (double)r->steps_after > SKIP_RATE_MAX;
}

static const char *kind_short(int k)
{
    switch (k) {
    case AMPDIAG_KIND_ACTIVATION: return "activations";
    case AMPDIAG_KIND_ACTIVATION_GRAD: return "activation gradients";
    case AMPDIAG_KIND_WEIGHT: return "weights";
    case AMPDIAG_KIND_WEIGHT_GRAD: return "weight gradients";
    case AMPDIAG_KIND_UPDATE: return "updates";
    default: return "values";
    }
}

static void append_name(char *buf, size_t n, const char *name)
{
    size_t len = strlen(buf);
    if (len + strlen(name) + 2 >= n)
        return;
    if (len)
        strcat(buf, ",");
    strcat(buf, name);
}

/* The first problem of a format, in a few words, for the verdict line. */
static void summary(rec_format *f, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void summary(rec_format *f, const char *fmt, ...)
{
    if (f->summary[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->summary, sizeof f->summary, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------------------------
 * Rule (b)2: forward overflow. From an FP32 (or BF16) run: activations or weights of layers
 * that autocast runs in 16 bits reaching 65520. Returns the number of layers; marks them.
 * ------------------------------------------------------------------------------------------ */

typedef struct fwd_hit {
    int layer, kind;
    double absmax;
    int64_t step;
} fwd_hit;

static size_t forward_overflow(const an_run *r, double limit, fwd_hit *hits, size_t max)
{
    size_t n = 0;
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op || L->island)
            continue;
        const int kinds[2] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_WEIGHT};
        for (int j = 0; j < 2; j++) {
            const an_cell *c = &L->cell[kinds[j]];
            if (c->records && c->absmax >= limit && n < max) {
                hits[n].layer = (int)l;
                hits[n].kind = kinds[j];
                hits[n].absmax = c->absmax;
                hits[n].step = c->absmax_step;
                n++;
                break;
            }
        }
    }
    return n;
}

/* ------------------------------------------------------------------------------------------
 * Rule (b)4: the loss scale from the gradients of run r.
 * ------------------------------------------------------------------------------------------ */

static void scale_rule(const an_run *r, size_t ri, rec_scale *s)
{
    memset(s, 0, sizeof *s);
    s->max_grad = -1;
    s->flushed = s->subnormal = s->flushed1 = 0;
    s->flushed_layer = s->subnormal_layer = s->flushed1_layer = -1;
    s->range_log2 = NAN;
    const int gk[2] = {AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_KIND_WEIGHT_GRAD};
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op)
            continue;
        for (int j = 0; j < 2; j++) {
            const an_cell *c = &L->cell[gk[j]];
            if (c->records && c->absmax_u > s->max_grad && isfinite(c->absmax_u)) {
                s->max_grad = c->absmax_u;
                s->max_grad_layer = (int)l;
                s->max_grad_kind = gk[j];
                s->max_grad_step = c->absmax_u_step;
            }
        }
    }
    if (!(s->max_grad > 0))
        return;
    s->have = 1;
    s->run = ri;
    s->log2 = (int)floor(log2(FP16_MARGIN_AT / s->max_grad));
    /* exact: the largest k with max_grad * 2^k <= 65504 / 2 */
    while (ldexp(s->max_grad, s->log2) > FP16_MARGIN_AT)
        s->log2--;
    while (ldexp(s->max_grad, s->log2 + 1) <= FP16_MARGIN_AT)
        s->log2++;
    uint64_t *all = calloc(AMPDIAG_HIST_BINS, sizeof *all);
    int any_hist = 0;
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op)
            continue;
        for (int j = 0; j < 2; j++) {
            const an_cell *c = &L->cell[gk[j]];
            if (!c->records)
                continue;
            double fl, sub;
            uint64_t nz;
            if (c->hist) {
                any_hist = 1;
                an_hist_fp16_at_scale(c->hist, s->log2, &fl, &sub, &nz);
                if (all)
                    for (int b = 0; b < AMPDIAG_HIST_BINS; b++)
                        all[b] += c->hist[b];
            } else {
                /* bounds only: nothing flushes when the smallest value survives */
                fl = isfinite(c->absmin_u) && ldexp(c->absmin_u, s->log2) > 0x1p-25 ? 0 : NAN;
                sub = NAN;
            }
            if (fl > s->flushed) {
                s->flushed = fl;
                s->flushed_layer = (int)l;
                s->flushed_kind = gk[j];
            }
            if (sub > s->subnormal) {
                s->subnormal = sub;
                s->subnormal_layer = (int)l;
                s->subnormal_kind = gk[j];
            }
            /* without scaling: the run's own FP16 counts, when it ran unscaled */
            if (!r->scaled) {
                uint64_t z = nonzero(c);
                double f1 = z ? (double)c->f16u / (double)z : 0;
                if (f1 > s->flushed1) {
                    s->flushed1 = f1;
                    s->flushed1_layer = (int)l;
                    s->flushed1_kind = gk[j];
                }
            }
        }
    }
    s->from_hist = any_hist;
    if (any_hist && all) {
        double q = an_hist_quantile_log2(all, 0.01);
        if (!isnan(q))
            s->range_log2 = log2(s->max_grad) - q;
    }
    free(all);
}

/* ------------------------------------------------------------------------------------------
 * The precision rules (b)
 * ------------------------------------------------------------------------------------------ */

static void pct(char *buf, size_t n, double f)
{
    if (f == 0)
        snprintf(buf, n, "0%%");
    else if (f < 1e-4)
        snprintf(buf, n, "%.2g%%", 100 * f);
    else
        snprintf(buf, n, "%.3g%%", 100 * f);
}

static void precision_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R)
{
    const an_run *base = &runs[c->baseline];
    int have_fp32 = c->baseline_is_fp32;
    rec_format *f16 = &R->fp16, *b16 = &R->bf16;
    char a[64], b[192], s1[32];

    f16->supported = rec_target_has_fp16(R->target);
    b16->supported = rec_target_has_bf16(R->target);
    if (!b16->supported)
        strlist_addf(&b16->issues, "target %s has no BF16 tensor cores (BF16 needs Ampere sm80 or "
                     "newer)", rec_target_name(R->target));
    if (!b16->supported)
        summary(b16, "no BF16 on %s", rec_target_name(R->target));

    /* 1. the baseline itself must train */
    int undecided = 0;
    if (have_fp32 && run_failed(base)) {
        undecided = 1;
        if (base->diverged)
            strlist_addf(&R->why, "the FP32 baseline %s diverges too (from step %" PRId64
                         "): the learning rate, not the format, is the problem; fix it first (see LR)",
                         base->label, base->divergence_step);
        else
            strlist_addf(&R->why, "the FP32 baseline %s has a non-finite loss (first at step %" PRId64
                         "): fix that first (see LR)", base->label, base->first_nonfinite_loss_step);
    } else if (!have_fp32) {
        int all_failed = n > 0;
        for (size_t i = 0; i < n; i++)
            all_failed &= run_failed(&runs[i]) && !failed_from_start(&runs[i]);
        if (all_failed) {
            undecided = 1;
            strlist_addf(&R->why, "every run diverges or has a non-finite loss, and no FP32 run shows "
                         "whether the format is the cause: run FP32 (ampdiag sweep) or lower the lr");
        }
    }

    /* 2. forward overflow => not FP16 (from FP32, else BF16 evidence, else the FP16 run) */
    fwd_hit hits[64];
    size_t nh = 0;
    const an_run *fwd_src = have_fp32 ? base : NULL;
    for (size_t i = 0; i < n && !fwd_src; i++)
        if (is_prec(&runs[i], "fp32") && lr_eq(runs[i].lr, base->lr))
            fwd_src = &runs[i];
    for (size_t i = 0; i < n && !fwd_src; i++)
        if ((is_prec(&runs[i], "bf16") || is_prec(&runs[i], "bf16-pure")) && lr_eq(runs[i].lr, base->lr))
            fwd_src = &runs[i];
    if (fwd_src && run_failed(fwd_src))
        fwd_src = NULL; /* its ranges after divergence say nothing about the formats */
    if (fwd_src)
        nh = forward_overflow(fwd_src, FP16_OVERFLOW_AT, hits, 64);
    int fp16_fwd = 0, islands_partial = 0;
    uint64_t island_params = 0;
    char islands[256] = "";
    if (nh) {
        fp16_fwd = 1;
        f16->decisive = 1;
        char names[160] = "";
        for (size_t i = 0; i < nh; i++)
            append_name(names, sizeof names, fwd_src->layers[hits[i].layer].name);
        const fwd_hit *h0 = &hits[0];
        strlist_addf(&f16->issues,
                     "forward overflow: %s %s reach %.4g (2^%.1f) at step %" PRId64 " in %s, above "
                     "FP16's 65504 (>= 65520 rounds to inf); loss scaling cannot help the forward "
                     "pass. Layers reaching 65520: %s",
                     fwd_src->layers[h0->layer].name, kind_short(h0->kind), h0->absmax,
                     log2(h0->absmax), h0->step, fwd_src->label, names);
        summary(f16, "forward overflow: %s %s reach %.3g > 65504", fwd_src->layers[h0->layer].name,
                kind_short(h0->kind), h0->absmax);
        /* FP32 islands: the overflowing layers and the layer after each (it reads the value) */
        char *mark = calloc(fwd_src->nlayers ? fwd_src->nlayers : 1, 1);
        if (mark) {
            for (size_t i = 0; i < nh; i++) {
                mark[hits[i].layer] = 1;
                size_t nx = (size_t)hits[i].layer + 1;
                if (nx < fwd_src->nlayers && !fwd_src->layers[nx].fp32_op)
                    mark[nx] = 1;
            }
            for (size_t l = 0; l < fwd_src->nlayers; l++)
                if (mark[l]) {
                    append_name(islands, sizeof islands, fwd_src->layers[l].name);
                    island_params += fwd_src->layers[l].params;
                }
            free(mark);
        }
    } else if (fwd_src) {
        /* near the limit: warn */
        size_t nw = forward_overflow(fwd_src, FP16_MARGIN_AT, hits, 64);
        for (size_t i = 0; i < nw; i++)
            strlist_addf(&R->warnings,
                         "%s %s reach %.4g at step %" PRId64 " in %s: less than 1 binade of FP16 "
                         "headroom (%.2f binades below 65504)",
                         fwd_src->layers[hits[i].layer].name, kind_short(hits[i].kind), hits[i].absmax,
                         hits[i].step, fwd_src->label, log2(FP16_MAX / hits[i].absmax));
    }
    /* the FP16 runs themselves */
    int fp16_runs = 0, fp16_failed = 0;
    for (size_t i = 0; i < n; i++) {
        const an_run *r = &runs[i];
        if (!is_prec(r, "fp16") || !lr_eq(r->lr, base->lr))
            continue;
        fp16_runs++;
        f16->observed = 1;
        int bad = 0;
        if (r->fwd_nonfinite_step >= 0) {
            const an_layer *L = &r->layers[r->fwd_nonfinite_layer];
            const an_cell *ac = &L->cell[AMPDIAG_KIND_ACTIVATION];
            int inf = ac->posinf + ac->neginf > 0;
            strlist_addf(&f16->issues,
                         "%s: %s in %s activations from step %" PRId64 " (first in forward order; "
                         "%" PRIu64 " non-finite activation values)%s",
                         r->label, inf ? "inf" : "NaN", L->name, r->fwd_nonfinite_step,
                         ac->nan + ac->posinf + ac->neginf,
                         fp16_fwd             ? ": the forward overflow above"
                         : inf && !undecided ? ": a forward overflow, which loss scaling cannot fix"
                                             : "");
            if (!fp16_fwd && !undecided) {
                /* no FP32 evidence: the FP16 run is the evidence, and it only shows the first
                 * layer to overflow (the ones after it see inf) */
                fp16_fwd = 1;
                islands_partial = 1;
                append_name(islands, sizeof islands, L->name);
                island_params += L->params;
            }
            summary(f16, "%s in %s activations from step %" PRId64, inf ? "inf" : "NaN", L->name,
                    r->fwd_nonfinite_step);
            bad = 1;
        }
        if (r->collapsed) {
            rec_fmt_scale(a, sizeof a, r->scale_min);
            rec_fmt_scale(b, sizeof b, r->scaler_min);
            strlist_addf(&f16->issues,
                         "%s: loss scale collapses to %s at step %" PRId64 "%s%s (%zu backoffs, %zu "
                         "skipped steps of %zu)",
                         r->label, a, r->scale_min_step,
                         r->scaler_min > 0 && r->scale_min <= r->scaler_min ? ", the scaler's minimum " : "",
                         r->scaler_min > 0 && r->scale_min <= r->scaler_min ? b : "", r->backoffs,
                         r->skipped, r->nsteps);
            summary(f16, "the loss scale collapses to %s", a);
            bad = 1;
        }
        if (skips_too_many(r)) {
            strlist_addf(&f16->issues,
                         "%s: %zu of %zu steps skipped after the first %zu (calibration): %.3g%%, more "
                         "than 1 in 500; first at step %" PRId64 " (%s)",
                         r->label, r->skipped_after, r->steps_after, r->calib,
                         100.0 * (double)r->skipped_after / (double)r->steps_after, r->first_skip_step,
                         r->first_skip_reason[0] ? r->first_skip_reason : "no reason recorded");
            summary(f16, "%.2g%% of steps skipped after calibration",
                    100.0 * (double)r->skipped_after / (double)r->steps_after);
            bad = 1;
        }
        if (r->loss_nonfinite && !(have_fp32 && run_failed(base))) {
            strlist_addf(&f16->issues, "%s: non-finite loss at %zu steps, first at step %" PRId64 "%s",
                         r->label, r->loss_nonfinite, r->first_nonfinite_loss_step,
                         have_fp32 ? " where FP32 stays finite" : "");
            summary(f16, "non-finite loss from step %" PRId64, r->first_nonfinite_loss_step);
            bad = 1;
        }
        if (r->diverged && !(have_fp32 && run_failed(base))) {
            strlist_addf(&f16->issues, "%s: diverges from step %" PRId64 "%s", r->label,
                         r->divergence_step, have_fp32 ? " where FP32 does not" : "");
            summary(f16, "diverges from step %" PRId64, r->divergence_step);
            bad = 1;
        }
        if (bad) {
            f16->decisive = 1;
            fp16_failed++;
        } else {
            rec_fmt_scale(a, sizeof a, r->scale_init);
            rec_fmt_scale(b, sizeof b, r->scale_final);
            if (r->scaled)
                strlist_addf(&f16->good, "%s: no NaN/inf in the forward pass, %zu skipped steps "
                             "(%zu after calibration), loss scale %s -> %s",
                             r->label, r->skipped, r->skipped_after, a, b);
            else
                strlist_addf(&f16->good, "%s: no NaN/inf in the forward pass, no skipped steps "
                             "(no loss scaling)", r->label);
        }
        if (!r->scaled && strcmp(r->loss_scale_mode, "none") == 0)
            f16->needs_scaling |= 2; /* ran without scaling: say what scaling would change */
        const an_gap *g = &c->gap[&runs[i] - runs];
        if (!bad && g->have && isfinite(g->rel) && g->rel > c->band) {
            pct(a, sizeof a, g->rel);
            pct(b, sizeof b, c->band);
            strlist_addf(&f16->issues, "%s: %s loss %.4g vs %.4g in %s (+%s), outside the noise band "
                         "+-%s", r->label, g->eval ? "final eval" : "final-window", g->value, g->base,
                         base->label, a, b);
            summary(f16, "loss +%s vs FP32, outside the noise band", a);
            f16->viable = 0;
            f16->decisive = 1;
        } else if (!bad && g->have && isfinite(g->rel)) {
            pct(a, sizeof a, fabs(g->rel));
            pct(b, sizeof b, c->band);
            strlist_addf(&f16->good, "%s: %s loss %.4g vs %.4g (%s%s), within the noise band +-%s",
                         r->label, g->eval ? "final eval" : "final-window", g->value, g->base,
                         g->rel < 0 ? "-" : "+", a, b);
        }
    }
    (void)fp16_runs;

    /* 4. gradient range: the loss scale */
    size_t sref = c->baseline;
    if (!have_fp32) {
        for (size_t i = 0; i < n; i++)
            if ((is_prec(&runs[i], "bf16") || is_prec(&runs[i], "bf16-pure")) && !run_failed(&runs[i])) {
                sref = i;
                break;
            }
    }
    scale_rule(&runs[sref], sref, &R->scale);
    rec_scale *S = &R->scale;
    if (S->have) {
        const an_run *sr = &runs[S->run];
        rec_fmt_scale(a, sizeof a, ldexp(1.0, S->log2));
        if (S->flushed_layer >= 0 && S->flushed >= FLUSH_MAX) {
            pct(b, sizeof b, S->flushed);
            strlist_addf(&f16->issues,
                         "gradient range: even at the best loss scale %s (largest gradient %.3g in %s "
                         "%s, step %" PRId64 ", kept under 65504/2) %s of %s %s flush to zero in FP16 "
                         "(from %s)",
                         a, S->max_grad, sr->layers[S->max_grad_layer].name, kind_short(S->max_grad_kind),
                         S->max_grad_step, b, sr->layers[S->flushed_layer].name,
                         kind_short(S->flushed_kind), sr->label);
            summary(f16, "%s of %s %s flush to zero even at loss scale %s", b,
                    sr->layers[S->flushed_layer].name, kind_short(S->flushed_kind), a);
            f16->decisive = 1;
        }
        if (isfinite(S->range_log2) && S->range_log2 > FP16_SPAN_LOG2) {
            strlist_addf(&f16->issues,
                         "gradient range: the gradients span 2^%.1f (largest / 1st percentile), more "
                         "than FP16's 2^40 (from %s)", S->range_log2, sr->label);
            summary(f16, "the gradients span 2^%.0f, more than FP16's 2^40", S->range_log2);
            f16->decisive = 1;
        }
        if (S->flushed1_layer >= 0 && S->flushed1 >= FLUSH_MAX) {
            pct(b, sizeof b, S->flushed1);
            pct(s1, sizeof s1, S->flushed_layer >= 0 ? S->flushed : 0);
            f16->needs_scaling |= 1;
            char worst[160] = "none of them flush";
            if (S->flushed_layer >= 0)
                snprintf(worst, sizeof worst, "the worst, %s %s, loses %s", sr->layers[S->flushed_layer].name,
                         kind_short(S->flushed_kind), s1);
            strlist_addf(&f16->issues,
                         "needs loss scaling: without it %s of %s %s flush to zero in FP16 (what-if "
                         "from %s); at loss scale %s %s",
                         b, sr->layers[S->flushed1_layer].name, kind_short(S->flushed1_kind), sr->label,
                         a, worst);
        }
        if (!(S->flushed >= FLUSH_MAX)) {
            pct(b, sizeof b, S->flushed);
            if (S->flushed_layer >= 0)
                strlist_addf(&f16->good,
                             "loss scale %s keeps the largest gradient (%.3g, %s %s, step %" PRId64
                             ") 1 binade under 65504; at it %s of %s %s still flush to zero (the worst "
                             "layer; from %s)",
                             a, S->max_grad, sr->layers[S->max_grad_layer].name,
                             kind_short(S->max_grad_kind), S->max_grad_step, b,
                             sr->layers[S->flushed_layer].name, kind_short(S->flushed_kind), sr->label);
            else
                strlist_addf(&f16->good,
                             "loss scale %s keeps the largest gradient (%.3g, %s %s, step %" PRId64
                             ") 1 binade under 65504; no gradient flushes to zero at it (from %s)",
                             a, S->max_grad, sr->layers[S->max_grad_layer].name,
                             kind_short(S->max_grad_kind), S->max_grad_step, sr->label);
        }
        if (S->subnormal_layer >= 0 && S->subnormal > FLUSH_MAX) {
            pct(b, sizeof b, S->subnormal);
            strlist_addf(&R->warnings,
                         "at loss scale %s, %s of %s %s are FP16 subnormals: hardware that flushes "
                         "FP16 subnormals (AMD MI200 FP16 MFMA) would lose them",
                         a, b, sr->layers[S->subnormal_layer].name, kind_short(S->subnormal_kind));
        }
    }

    /* BF16 */
    int bf16_bad = 0, bf16_gap_bad = 0;
    for (size_t i = 0; i < n; i++) {
        const an_run *r = &runs[i];
        int pure = is_prec(r, "bf16-pure");
        if ((!is_prec(r, "bf16") && !pure) || !lr_eq(r->lr, base->lr))
            continue;
        if (!pure)
            b16->observed = 1;
        /* lost updates without master weights */
        double worst = 0;
        int wl = -1;
        for (size_t l = 0; l < r->nlayers; l++) {
            const an_cell *u = &r->layers[l].cell[AMPDIAG_KIND_UPDATE];
            uint64_t z = nonzero(u);
            double f = z ? (double)u->lost / (double)z : 0;
            if (f > worst) {
                worst = f;
                wl = (int)l;
            }
        }
        int lost_bad = pure && wl >= 0 && worst > LOST_MAX;
        if (lost_bad || (pure && r->ratio_median < SWAMP_BF16)) {
            R->master_weights = 1;
            pct(a, sizeof a, worst);
            pct(b, sizeof b, r->update_nonzero ? (double)r->lost / (double)r->update_nonzero : 0);
            strlist_addf(&b16->issues,
                         "%s (weights stored in BF16, no FP32 master copy): %s of %s's updates were lost "
                         "(fl(w + dw) == w), %s of all; median update/weight ratio %.3g is below BF16's "
                         "2^-8 = 0.0039: keep FP32 master weights",
                         r->label, a, wl >= 0 ? r->layers[wl].name : "?", b, r->ratio_median);
        }
        if (run_failed(r) && !(have_fp32 && run_failed(base))) {
            strlist_addf(&b16->issues, "%s: %s from step %" PRId64 " where %s does not", r->label,
                         r->diverged ? "diverges" : "non-finite loss",
                         r->diverged ? r->divergence_step : r->first_nonfinite_loss_step, base->label);
            if (!pure)
                bf16_bad = 1;
            if (!pure)
                summary(b16, "diverges from step %" PRId64,
                        r->diverged ? r->divergence_step : r->first_nonfinite_loss_step);
        }
        const an_gap *g = &c->gap[i];
        if (g->have && i != c->baseline && !run_failed(r)) {
            pct(a, sizeof a, fabs(g->rel));
            pct(b, sizeof b, c->band);
            if (g->rel > c->band) {
                strlist_addf(&b16->issues, "%s: %s loss %.4g vs %.4g in %s (+%s), outside the noise "
                             "band +-%s%s", r->label, g->eval ? "final eval" : "final-window", g->value,
                             g->base, base->label, a, b,
                             pure ? " (the lost updates above)" : "");
                if (!pure)
                    bf16_gap_bad = 1;
                if (!pure)
                    summary(b16, "loss +%s vs FP32, outside the noise band +-%s", a, b);
            } else {
                strlist_addf(&b16->good, "%s: %s loss %.4g vs %.4g (%s%s), within the noise band +-%s",
                             r->label, g->eval ? "final eval" : "final-window", g->value, g->base,
                             g->rel < 0 ? "-" : "+", a, b);
            }
        }
        if (!pure && !run_failed(r) && r->fwd_nonfinite_step < 0 && r->skipped == 0)
            strlist_addf(&b16->good, "%s: no NaN/inf, no skipped steps", r->label);
    }
    /* BF16 range (what-if from the reference) */
    if (fwd_src) {
        fwd_hit bh[8];
        size_t nb = forward_overflow(fwd_src, BF16_OVERFLOW_AT, bh, 8);
        if (nb && !undecided) {
            strlist_addf(&b16->issues, "%s %s reach %.4g at step %" PRId64 " in %s: beyond BF16's "
                         "3.39e38", fwd_src->layers[bh[0].layer].name, kind_short(bh[0].kind),
                         bh[0].absmax, bh[0].step, fwd_src->label);
            bf16_bad = 1;
            summary(b16, "%s %s reach %.3g, beyond BF16's range", fwd_src->layers[bh[0].layer].name,
                    kind_short(bh[0].kind), bh[0].absmax);
        } else if (!b16->observed && !nb) {
            strlist_addf(&b16->good, "what-if from %s: no activation or weight beyond BF16's range "
                         "(BF16 has FP32's exponent range)", fwd_src->label);
        }
    }
    /* BF16 weights without FP32 master weights (what-if): counted per update when the trace
     * records lost_if_bf16 (from the reference, else another run at the baseline's lr that keeps
     * FP32 weights); traces without the field fall back to the update/weight ratio rule */
    const an_run *lost_src = fwd_src && fwd_src->have_lost_if && !fwd_src->weights_16bit ? fwd_src : NULL;
    for (size_t i = 0; i < n && !lost_src; i++)
        if (runs[i].have_lost_if && !runs[i].weights_16bit && !run_failed(&runs[i]) &&
            lr_eq(runs[i].lr, base->lr) && runs[i].update_nonzero > 0)
            lost_src = &runs[i];
    if (lost_src && lost_src->update_nonzero > 0) {
        double worst = 0;
        int wl = -1;
        for (size_t l = 0; l < lost_src->nlayers; l++) {
            const an_cell *u = &lost_src->layers[l].cell[AMPDIAG_KIND_UPDATE];
            uint64_t z = nonzero(u);
            double f = z ? (double)u->lost_ifb16 / (double)z : 0;
            if (f > worst) {
                worst = f;
                wl = (int)l;
            }
        }
        if (lost_src->lost_ifb16 == 0) {
            strlist_addf(&b16->good,
                         "what-if from %s: no update would be lost with BF16 weights without FP32 "
                         "master weights (every non-zero update changes its weight in BF16)",
                         lost_src->label);
        } else {
            pct(a, sizeof a, (double)lost_src->lost_ifb16 / (double)lost_src->update_nonzero);
            pct(b, sizeof b, worst);
            strlist_addf(&b16->good,
                         "what-if from %s: %s of updates would be lost with BF16 weights without FP32 "
                         "master weights (fl(w + dw) == w in BF16; worst layer %s: %s)%s; BF16 "
                         "autocast keeps FP32 master weights",
                         lost_src->label, a, wl >= 0 ? lost_src->layers[wl].name : "?", b,
                         worst > LOST_MAX ? ": do not store the weights in BF16 (bf16-pure)" : "");
        }
    } else if (fwd_src && !b16->observed && isfinite(fwd_src->ratio_median) &&
               fwd_src->ratio_median < SWAMP_BF16) {
        strlist_addf(&b16->good,
                     "what-if from %s: median update/weight ratio %.3g < 2^-8: weights stored in "
                     "BF16 would lose updates; BF16 autocast keeps FP32 master weights",
                     fwd_src->label, fwd_src->ratio_median);
    }

    /* Adam eps in FP16 optimizer state (rule 7) */
    for (size_t i = 0; i < n; i++) {
        const an_run *r = &runs[i];
        if (strcmp(r->optim_state, "fp16") == 0 && strcmp(r->optimizer, "adamw") == 0 &&
            isfinite(r->adam_eps) && r->adam_eps <= 0x1p-25)
            strlist_addf(&R->warnings,
                         "%s: AdamW eps %g with FP16 optimizer state rounds to 0 (FP16 flushes |x| <= "
                         "2^-25): zero-gradient steps give 0/0 = NaN%s; use eps >= 1e-7 or FP32 state",
                         r->label, r->adam_eps, r->nan_values ? " (this run has NaN values)" : "");
    }

    /* ---- decision ---- */
    f16->viable = f16->supported && !f16->decisive && !undecided;
    b16->viable = b16->supported && !bf16_bad && !bf16_gap_bad && !undecided;
    double share = runs[c->baseline].params ? (double)island_params / (double)runs[c->baseline].params : 1;
    if (fwd_src && fwd_src->params)
        share = (double)island_params / (double)fwd_src->params;
    /* forward overflow explains the FP16 run's failures: islands rescue FP16 unless other rules
     * (gradient range, loss gap) also rule it out */
    int other_fp16 = 0;
    if (S->have && (S->flushed >= FLUSH_MAX || (isfinite(S->range_log2) && S->range_log2 > FP16_SPAN_LOG2)))
        other_fp16 = 1;
    int islands_ok = fp16_fwd && !islands_partial && !other_fp16 && islands[0] &&
                     share <= ISLAND_SHARE_MAX && f16->supported;

    if (undecided) {
        R->precision = REC_UNDECIDED;
        snprintf(R->verdict, sizeof R->verdict, "undecided: the FP32 baseline does not train; fix the "
                 "learning rate first");
        if (!have_fp32)
            snprintf(R->verdict, sizeof R->verdict, "undecided: every run fails; run FP32 or lower the "
                     "learning rate first");
        return;
    }
    if (b16->viable) {
        R->precision = REC_BF16;
        if (f16->viable)
            strlist_addf(&R->why, "both 16-bit formats are healthy; bf16 is preferred: no loss scaler "
                         "to tune, no skipped steps, FP32's exponent range (fp16 + dynamic loss scaling "
                         "works too)");
        else if (!f16->supported)
            strlist_addf(&R->why, "bf16 is healthy; fp16 is not available on the target");
        else if (b16->observed)
            strlist_addf(&R->why, "bf16 is healthy and fp16 is ruled out (see fp16 below)");
        else
            strlist_addf(&R->why, "fp16 is ruled out (see fp16 below) and nothing found rules out "
                         "bf16, whose exponent range is FP32's");
        R->predicted = !b16->observed;
        const char *pred = !R->predicted ? ""
                           : fwd_src      ? "; predicted from the FP32 trace: confirm with a bf16 run"
                                          : "; no bf16 run given: confirm with one";
        snprintf(R->verdict, sizeof R->verdict, "bf16 (autocast with FP32 master weights)%s", pred);
        if (R->master_weights)
            snprintf(R->verdict, sizeof R->verdict, "bf16 with FP32 master weights (not bf16-pure: its "
                     "updates are lost)%s", pred);
    } else if (f16->viable) {
        R->precision = REC_FP16;
        strlist_addf(&R->why, "fp16 with dynamic loss scaling is healthy%s",
                     !b16->supported ? "; the target has no BF16"
                                     : "; bf16 is ruled out (see bf16 below)");
        R->predicted = !f16->observed;
        rec_fmt_scale(a, sizeof a, ldexp(1.0, S->have ? S->log2 : 16));
        b[0] = 0;
        if ((f16->needs_scaling & 1) && S->flushed1_layer >= 0) {
            pct(s1, sizeof s1, S->flushed1);
            snprintf(b, sizeof b, "; without it %s of %s", s1, runs[S->run].layers[S->flushed1_layer].name);
        }
        snprintf(R->verdict, sizeof R->verdict, "fp16 + dynamic loss scaling, initial scale %s%s%s%s", a,
                 b[0] ? b : "", b[0] ? (S->flushed1_kind == AMPDIAG_KIND_WEIGHT_GRAD ? "'s weight "
                                        "gradients flush to zero" : "'s activation gradients flush to zero") : "",
                 R->predicted ? " (predicted: confirm with an fp16 run)"
                 : (f16->needs_scaling & 2) ? " (the fp16 run had none: confirm with one)" : "");
    } else if (islands_ok) {
        R->precision = REC_FP16;
        strlist_addf(&R->why, "the forward overflow is confined to layers holding %.0f%% of the "
                     "parameters: keeping them in FP32 rescues fp16%s", 100 * share,
                     !b16->supported ? " (the target has no BF16)" : " (bf16 is ruled out, see below)");
        R->predicted = 1;
        snprintf(R->fp32_layers, sizeof R->fp32_layers, "%s", islands);
        rec_fmt_scale(a, sizeof a, ldexp(1.0, S->have ? S->log2 : 16));
        snprintf(R->verdict, sizeof R->verdict, "fp16 + dynamic loss scaling (initial %s) with FP32 "
                 "layers %s (--fp32-layers %s: %.0f%% of the parameters); confirm with a run",
                 a, islands, islands, 100 * share);
    } else if (b16->supported && !bf16_bad && bf16_gap_bad) {
        /* rule (b)5(iii): FP32 for the layers that deviate most */
        char dl[256] = "";
        for (size_t i = 0; i < n; i++) {
            if (!is_prec(&runs[i], "bf16") || !c->dev || !c->dev[i])
                continue;
            for (size_t k = 0; k < c->ndev[i] && k < 3; k++)
                if (c->dev[i][k].rel >= DEV_ISLAND)
                    append_name(dl, sizeof dl, runs[i].layers[c->dev[i][k].layer].name);
            if (dl[0]) {
                pct(a, sizeof a, c->dev[i][0].rel);
                strlist_addf(&R->why, "%s deviates most from %s: %s activations differ by %s (median "
                             "over %zu steps), far above BF16's unit roundoff 0.39%%",
                             runs[i].label, base->label, runs[i].layers[c->dev[i][0].layer].name, a,
                             c->dev[i][0].n);
            }
            break;
        }
        if (dl[0]) {
            R->precision = REC_BF16;
            R->predicted = 1;
            snprintf(R->fp32_layers, sizeof R->fp32_layers, "%s", dl);
            snprintf(R->verdict, sizeof R->verdict, "bf16 with FP32 layers %s (--fp32-layers %s); "
                     "confirm with a run", dl, dl);
        } else {
            R->precision = REC_FP32;
            snprintf(R->verdict, sizeof R->verdict, "fp32: bf16 misses the FP32 loss and fp16 is ruled "
                     "out");
        }
    } else {
        R->precision = REC_FP32;
        if (!b16->supported && fp16_fwd && islands[0] && islands_partial)
            snprintf(R->verdict, sizeof R->verdict, "fp32 (target %s has no BF16 and FP16 overflows in "
                     "the forward pass from %s; an FP32 trace would show whether FP32 islands can "
                     "rescue it)", rec_target_name(R->target), islands);
        else if (!b16->supported && fp16_fwd && islands[0])
            snprintf(R->verdict, sizeof R->verdict, "fp32 (target %s has no BF16, and FP32 islands for "
                     "FP16 would cover %.0f%% of the parameters: %s)",
                     rec_target_name(R->target), 100 * share, islands);
        else if (!b16->supported)
            snprintf(R->verdict, sizeof R->verdict, "fp32 (target %s has no BF16 and FP16 is ruled out)",
                     rec_target_name(R->target));
        else
            snprintf(R->verdict, sizeof R->verdict, "fp32 (both 16-bit formats are ruled out)");
    }
    if (fp16_fwd && islands[0] && islands_partial && f16->supported)
        strlist_addf(&R->warnings,
                     "FP32 islands for FP16: at least %s (the first layer to overflow); an FP32 trace "
                     "shows which layers after it overflow too", islands);
    else if (fp16_fwd && islands[0] && R->precision != REC_FP16 && f16->supported)
        strlist_addf(&R->warnings,
                     "FP32 islands that would let FP16 run: --fp32-layers %s (%.0f%% of the "
                     "parameters%s)", islands, 100 * share,
                     share > ISLAND_SHARE_MAX ? ": most of the model, no rescue" : "");
    (void)fp16_failed;
}

/* ------------------------------------------------------------------------------------------
 * Learning rate (d)
 * ------------------------------------------------------------------------------------------ */

static double final_metric(const an_run *r)
{
    if (r->nevals && isfinite(r->evals[r->nevals - 1].loss))
        return r->evals[r->nevals - 1].loss;
    if (r->nevals)
        return INFINITY;
    return r->tail_mean;
}

static void lr_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R)
{
    const an_run *base = &runs[c->baseline];
    R->lr_current = base->lr;
    R->lr_factor = 1;
    R->lr_suggested = base->lr;
    char a[64];

    /* several learning rates: pick the best that converges (rule (d)4) */
    double lrs[64];
    size_t nlr = 0;
    for (size_t i = 0; i < n && nlr < 64; i++) {
        int seen = 0;
        for (size_t j = 0; j < nlr; j++)
            seen |= lr_eq(lrs[j], runs[i].lr);
        if (!seen && isfinite(runs[i].lr))
            lrs[nlr++] = runs[i].lr;
    }
    if (nlr > 1) {
        double best = INFINITY, best_lr = NAN;
        for (size_t j = 0; j < nlr; j++) {
            double m = INFINITY;
            int fails = 0, cnt = 0;
            int64_t div = -1;
            for (size_t i = 0; i < n; i++) {
                const an_run *r = &runs[i];
                if (!lr_eq(r->lr, lrs[j]) || strcmp(r->precision, base->precision))
                    continue;
                cnt++;
                if (run_failed(r)) {
                    fails++;
                    div = r->diverged ? r->divergence_step : r->first_nonfinite_loss_step;
                } else if (final_metric(r) < m) {
                    m = final_metric(r);
                }
            }
            if (!cnt)
                continue;
            if (fails)
                strlist_addf(&R->lr_why, "lr %g: %s %s from step %" PRId64, lrs[j], base->precision,
                             "diverges", div);
            else
                strlist_addf(&R->lr_why, "lr %g: %s final loss %.4g", lrs[j], base->precision, m);
            if (!fails && m < best) {
                best = m;
                best_lr = lrs[j];
            }
        }
        if (!isnan(best_lr)) {
            R->lr = LR_PICK;
            R->lr_suggested = best_lr;
            R->lr_factor = isfinite(base->lr) && base->lr > 0 ? best_lr / base->lr : NAN;
            snprintf(R->lr_line, sizeof R->lr_line, "use %g: the lowest final %s loss among the learning "
                     "rates tried (%.4g)", best_lr, base->precision, best);
            return;
        }
    }

    int base_failed = run_failed(base);
    int all_failed = 1;
    for (size_t i = 0; i < n; i++)
        all_failed &= run_failed(&runs[i]) && !failed_from_start(&runs[i]);
    double r = base->ratio_median;
    int layers_n = 0;
    for (size_t l = 0; l < base->nlayers; l++)
        layers_n += base->layers[l].ratio_n > 0;
    if (!isfinite(r))
        r = base->step_ratio_median;

    /* precision interplay (rule (d)2): weights stored in 16 bits below the swamping threshold */
    const an_run *pure = NULL;
    for (size_t i = 0; i < n; i++)
        if (runs[i].weights_16bit && isfinite(runs[i].ratio_median) && runs[i].ratio_median < SWAMP_BF16)
            pure = &runs[i];

    if ((c->baseline_is_fp32 && base_failed) || all_failed) {
        /* divergence not caused by the format (rule (d)3) */
        for (size_t i = 0; i < n; i++)
            if (run_failed(&runs[i]))
                strlist_addf(&R->lr_why, "%s %s from step %" PRId64, runs[i].label,
                             runs[i].diverged ? "diverges" : "has a non-finite loss",
                             runs[i].diverged ? runs[i].divergence_step : runs[i].first_nonfinite_loss_step);
        R->lr = LR_LOWER;
        if (isfinite(r) && r > RATIO_HIGH) {
            R->lr_factor = fmax(0.1, RATIO_TARGET / r);
            strlist_addf(&R->lr_why, "median update/weight ratio %.3g in %s (target ~1e-3): lr x "
                         "max(0.1, 1e-3 / %.3g) = x%.3g", r, base->label, r, R->lr_factor);
        } else {
            R->lr_factor = 0.5;
            strlist_addf(&R->lr_why, "the same in every precision, so not a format limit: lr x 0.5 "
                         "and a longer warm-up (>= 2k steps for large models), a heuristic step");
        }
        R->lr_suggested = base->lr * R->lr_factor;
        snprintf(R->lr_line, sizeof R->lr_line, "lower to %.3g (x%.3g): training diverges in %s",
                 R->lr_suggested, R->lr_factor, c->baseline_is_fp32 ? "FP32 too" : "every run");
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (run_failed(&runs[i]) && failed_from_start(&runs[i]))
            strlist_addf(&R->lr_why, "%s %s from step %" PRId64 ", with NaN/inf in the forward pass "
                         "of its first step, before any update: format-caused, fix the precision "
                         "first, not the lr", runs[i].label,
                         runs[i].diverged ? "diverges" : "has a non-finite loss",
                         runs[i].diverged ? runs[i].divergence_step : runs[i].first_nonfinite_loss_step);
        else if (run_failed(&runs[i]))
            strlist_addf(&R->lr_why, "%s %s from step %" PRId64 " while %s trains: format-caused, fix "
                         "the precision first, not the lr", runs[i].label,
                         runs[i].diverged ? "diverges" : "has a non-finite loss",
                         runs[i].diverged ? runs[i].divergence_step : runs[i].first_nonfinite_loss_step,
                         base->label);
    if (!isfinite(r)) {
        R->lr = LR_UNKNOWN;
        snprintf(R->lr_line, sizeof R->lr_line, "no update/weight ratios recorded in %s: no lr advice",
                 base->label);
        return;
    }
    snprintf(a, sizeof a, "%s over %d layers", layers_n ? "median of the per-layer medians" : "median "
             "of the steps' ratios", layers_n);
    /* loss spikes (rule (d)3) */
    double steps = (double)base->nsteps;
    int spiky = base->loss_spikes >= 2 && steps > 0 && (double)base->loss_spikes / steps > 1.0 / 1000;
    if (r > RATIO_HIGH) {
        R->lr = LR_LOWER;
        R->lr_factor = fmax(0.1, RATIO_TARGET / r);
        strlist_addf(&R->lr_why, "update/weight ratio %.3g (%s) in %s is above 1e-2 (target ~1e-3): "
                     "lr x max(0.1, 1e-3/%.3g) = x%.3g", r, a, base->label, r, R->lr_factor);
    } else if (r < RATIO_LOW && !pure) {
        R->lr = LR_RAISE;
        R->lr_factor = fmin(10, RATIO_TARGET / r);
        strlist_addf(&R->lr_why, "update/weight ratio %.3g (%s) in %s is below 1e-4 (target ~1e-3): "
                     "lr x min(10, 1e-3/%.3g) = x%.3g", r, a, base->label, r, R->lr_factor);
    } else if (spiky) {
        R->lr = LR_LOWER;
        R->lr_factor = 0.5;
        strlist_addf(&R->lr_why, "%zu loss spikes in %zu steps of %s (more than 1 per 1000; first at "
                     "step %" PRId64 "): lr x 0.5 and/or a longer warm-up (heuristic)",
                     base->loss_spikes, base->nsteps, base->label, base->spike_steps[0]);
    } else {
        R->lr = LR_KEEP;
        strlist_addf(&R->lr_why, "update/weight ratio %.3g (%s) in %s, within 1e-4..1e-2 (target "
                     "~1e-3); %zu loss spikes", r, a, base->label, base->loss_spikes);
    }
    if (pure) {
        if (R->lr == LR_RAISE || r < SWAMP_BF16) {
            strlist_addf(&R->lr_why, "%s stores weights in BF16 and its median update/weight ratio "
                         "%.3g is below 2^-8: do not raise the lr to push updates over the rounding "
                         "threshold; keep FP32 master weights (or Kahan summation / stochastic "
                         "rounding)", pure->label, pure->ratio_median);
            if (R->lr != LR_LOWER) {
                R->lr = LR_KEEP_MASTER;
                R->lr_factor = 1;
            }
        }
    }
    R->lr_suggested = base->lr * R->lr_factor;
    switch (R->lr) {
    case LR_KEEP:
        snprintf(R->lr_line, sizeof R->lr_line, "keep %g", base->lr);
        break;
    case LR_KEEP_MASTER:
        snprintf(R->lr_line, sizeof R->lr_line, "keep %g and use FP32 master weights (do not raise it "
                 "to beat BF16 rounding)", base->lr);
        break;
    case LR_LOWER:
        snprintf(R->lr_line, sizeof R->lr_line, "lower to %.3g (x%.3g)", R->lr_suggested, R->lr_factor);
        break;
    case LR_RAISE:
        snprintf(R->lr_line, sizeof R->lr_line, "raise to %.3g (x%.3g)", R->lr_suggested, R->lr_factor);
        break;
    default:
        break;
    }
}

/* ------------------------------------------------------------------------------------------
 * Clip (c)
 * ------------------------------------------------------------------------------------------ */

static void clip_rules(const an_run *runs, const an_comparison *c, recommendation *R)
{
    const an_run *r = &runs[c->baseline];
    const an_clip *k = &r->gn;
    if (k->n < 20 || !isfinite(k->value)) {
        snprintf(R->clip_line, sizeof R->clip_line, "no value: %zu finite, unskipped gradient norms "
                 "after the first %zu steps of %s (20 needed)", k->n, k->warmup, r->label);
        return;
    }
    R->clip_have = 1;
    R->clip_value = k->value;
    R->clip_frac = (double)k->n_over / (double)k->n;
    R->clip_autoclip = k->p10;
    char a[32], steps[160] = "";
    pct(a, sizeof a, R->clip_frac);
    for (size_t i = 0; i < k->n_over_listed; i++) {
        char s[24];
        snprintf(s, sizeof s, "%s%" PRId64, i ? ", " : "", k->over_steps[i]);
        if (strlen(steps) + strlen(s) + 1 < sizeof steps)
            strcat(steps, s);
    }
    snprintf(R->clip_line, sizeof R->clip_line, "%.3g: would clip %s of steps", k->value, a);
    strlist_addf(&R->clip_why,
                 "%.3g = max(P99 %.3g, median %.3g + 3 x 1.4826 x MAD %.3g = %.3g) of %zu unscaled, "
                 "finite, pre-clip gradient norms of %s after step %zu: would clip %zu steps (%s)%s%s%s",
                 k->value, k->p99, k->median, k->mad, k->robust, k->n, r->label, k->warmup, k->n_over, a,
                 k->n_over ? ": steps " : "", steps, k->n_over > k->n_over_listed ? ", ..." : "");
    strlist_addf(&R->clip_why, "AutoClip alternative: P10 = %.3g (clips ~90%% of steps, smoothing "
                 "rather than guarding spikes)", k->p10);
    if (k->median < 0.1)
        strlist_addf(&R->clip_why, "the common transformer prior of 1.0 would never fire here (median "
                     "norm %.3g)", k->median);
    else if (k->median > 10)
        strlist_addf(&R->clip_why, "the common transformer prior of 1.0 would clip every step here "
                     "(median norm %.3g)", k->median);
    if (isfinite(k->median_first) && isfinite(k->median_last) && k->median_first > 0 &&
        (k->median_last / k->median_first > 2 || k->median_last / k->median_first < 0.5))
        strlist_addf(&R->clip_why, "the norm drifts (median %.3g in the first 10%% of the history, %.3g "
                     "in the last 10%%): a fixed clip goes stale; consider ZClip (alpha 0.97, z 2.5) or "
                     "AutoClip", k->median_first, k->median_last);
    if (k->norm_spike_step >= 0)
        strlist_addf(&R->clip_why, "a gradient-norm spike %.3gx the rolling median at step %" PRId64
                     " is followed by a loss spike at step %" PRId64 ": besides clipping, rewind ~100 "
                     "steps and skip 200-500 batches (PaLM)", k->norm_spike_ratio, k->norm_spike_step,
                     k->norm_spike_loss_step);
    if (r->clip > 0)
        strlist_addf(&R->clip_why, "%s clipped at %g: %zu steps clipped", r->label, r->clip,
                     k->actually_clipped);
}

/* ------------------------------------------------------------------------------------------
 * --fail-on
 * ------------------------------------------------------------------------------------------ */

static void fail_rules(const an_run *runs, size_t n, recommendation *R)
{
    for (size_t i = 0; i < n; i++) {
        const an_run *r = &runs[i];
        if (r->fwd_nonfinite_step >= 0 || r->loss_nonfinite || r->by_code[AMPDIAG_EV_NAN_FORWARD] ||
            r->by_code[AMPDIAG_EV_INF_FORWARD] || r->by_code[AMPDIAG_EV_NAN_BACKWARD] || r->weight_nonfinite) {
            R->fail_held |= FAIL_NAN;
            if (r->fwd_nonfinite_step >= 0)
                strlist_addf(&R->fail_why, "nan: %s has NaN/inf activations from step %" PRId64
                             " (first in %s)", r->label, r->fwd_nonfinite_step,
                             an_layer_name(r, r->fwd_nonfinite_layer));
            else if (r->loss_nonfinite)
                strlist_addf(&R->fail_why, "nan: %s has a non-finite loss at %zu steps, first %" PRId64,
                             r->label, r->loss_nonfinite, r->first_nonfinite_loss_step);
            else
                strlist_addf(&R->fail_why, "nan: %s: %s at step %" PRId64 " (%s)", r->label,
                             ampdiag_event_name(r->first_nonfinite.code), r->first_nonfinite.step,
                             r->first_nonfinite.message);
        }
        if (skips_too_many(r) || r->collapsed) {
            R->fail_held |= FAIL_SKIPS;
            strlist_addf(&R->fail_why, "skips: %s skipped %zu of %zu steps after calibration%s",
                         r->label, r->skipped_after, r->steps_after,
                         r->collapsed ? " and its loss scale collapsed" : "");
        }
        if (r->diverged) {
            R->fail_held |= FAIL_DIVERGENCE;
            strlist_addf(&R->fail_why, "divergence: %s diverges from step %" PRId64, r->label,
                         r->divergence_step);
        }
        /* forward tensors overflowing the run's 16-bit format (fp32 runs: FP16, as a what-if) */
        int fp16 = is_prec(r, "fp16") || is_prec(r, "fp32");
        int over = 0;
        const char *lname = NULL;
        for (size_t l = 0; l < r->nlayers && !over; l++) {
            const an_layer *L = &r->layers[l];
            if (L->fp32_op || L->island)
                continue;
            for (int k = AMPDIAG_KIND_ACTIVATION; k <= AMPDIAG_KIND_WEIGHT; k += 2) {
                const an_cell *c = &L->cell[k];
                uint64_t o = fp16 ? c->f16o : c->b16o;
                if (!is_prec(r, "fp32"))
                    o += c->posinf + c->neginf;
                if (o) {
                    over = 1;
                    lname = L->name;
                    break;
                }
            }
        }
        if (over) {
            R->fail_held |= FAIL_OVERFLOW;
            strlist_addf(&R->fail_why, "overflow: %s: %s forward values overflow %s%s", r->label,
                         lname, fp16 ? "FP16" : "BF16", is_prec(r, "fp32") ? " (what-if)" : "");
        }
    }
}

/* ------------------------------------------------------------------------------------------ */

int recommend(const an_run *runs, size_t n, const an_comparison *c, rec_target target,
              unsigned fail_mask, recommendation *R)
{
    memset(R, 0, sizeof *R);
    R->target = target;
    R->fail_mask = fail_mask;
    R->ref = c->baseline;
    R->lr_current = R->lr_factor = R->lr_suggested = NAN;
    if (n == 0)
        return 0;
    precision_rules(runs, n, c, R);
    lr_rules(runs, n, c, R);
    clip_rules(runs, c, R);
    fail_rules(runs, n, R);
    for (size_t i = 0; i < n; i++) {
        if (runs[i].cut_off)
            strlist_addf(&R->warnings, "%s was cut off (status 'running'): its numbers cover %zu steps",
                         runs[i].label, runs[i].nsteps);
        if (runs[i].bad_rows)
            strlist_addf(&R->warnings, "%s: %" PRIu64 " tensor records name an unknown layer or kind "
                         "(ignored)", runs[i].label, runs[i].bad_rows);
        if (runs[i].hist_rows_read < runs[i].hist_rows)
            strlist_addf(&R->warnings, "%s: %" PRIu64 " of %" PRIu64 " histogram records read (evenly "
                         "spaced blocks); fractions come from that sample", runs[i].label,
                         runs[i].hist_rows_read, runs[i].hist_rows);
    }
    int oom = R->why.oom || R->fp16.issues.oom || R->fp16.good.oom || R->bf16.issues.oom ||
              R->bf16.good.oom || R->lr_why.oom || R->clip_why.oom || R->warnings.oom ||
              R->fail_why.oom;
    return oom ? -1 : 0;
}

void rec_free(recommendation *R)
{
    if (!R)
        return;
    strlist_free(&R->why);
    strlist_free(&R->fp16.issues);
    strlist_free(&R->fp16.good);
    strlist_free(&R->bf16.issues);
    strlist_free(&R->bf16.good);
    strlist_free(&R->lr_why);
    strlist_free(&R->clip_why);
    strlist_free(&R->warnings);
    strlist_free(&R->fail_why);
}
