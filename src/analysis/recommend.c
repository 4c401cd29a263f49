/*
 * recommend.c - the recommendation rules of docs/recommendations.md: precision (b), clip (c),
 * learning rate (d) and --fail-on. Each rule is a small function whose comment says what it
 * reads, what it decides and which thresholds it uses; docs/recommendations.md documents every
 * rule function by name. The rules of a group are listed in a table and run in its order:
 *
 *   precision_rules[]  (b) evidence for and against FP16 and BF16, then the verdict
 *   verdict_rules[]    (b)7 the first candidate verdict whose condition holds wins
 *   lr_rules[]         (d) run until one of them settles the learning rate
 *   clip_notes[]       (c) notes that follow the clip value
 *   fail_checks[]      --fail-on conditions, per run
 *
 * A rule adds lines of evidence that name the numbers, steps and layers it rests on; the order
 * of the tables is the order of those lines in the report. The first decisive precision rule
 * sets the verdict and every other finding stays as a reason or a warning.
 */
#include "analysis/recommend.h"
#include "analysis/hist.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NELEM(a) (sizeof(a) / sizeof(a)[0])

/* ------------------------------------------------------------------------------------------
 * Format facts, from the format table of the numerics code (ampdiag_format_get in
 * src/numerics/numfmt.c, checked against the converters by tests/t_numfmt.c)
 * ------------------------------------------------------------------------------------------ */

#define FP16_INFO ampdiag_format_get(AMPDIAG_FP16)
#define BF16_INFO ampdiag_format_get(AMPDIAG_BF16)
#define FP16_MAX ((double)FP16_INFO->max_finite)            /* 65504 */
#define FP16_OVERFLOW_AT ((double)FP16_INFO->overflow_at)   /* 65520: |x| >= this rounds to inf */
#define FP16_MARGIN_AT (FP16_MAX / 2)                       /* 32752: one binade of headroom */
#define FP16_UNDERFLOW_AT ((double)FP16_INFO->underflow_at) /* 2^-25: 0 < |x| <= this -> 0 */
/* 40: FP16's span in binades including subnormals, 2^-24 (emin - mantissa bits) .. 2^16 */
#define FP16_SPAN_LOG2 ((double)(FP16_INFO->emax + 1 - (FP16_INFO->emin - FP16_INFO->mant_bits)))
#define BF16_OVERFLOW_AT ((double)BF16_INFO->overflow_at)   /* 2^128 - 2^119 ~ 3.3962e38 */
/* 2^-8, BF16's unit roundoff: updates |dw/w| below it can be lost in BF16 storage */
#define SWAMP_BF16 ((double)BF16_INFO->unit_roundoff)

/* ------------------------------------------------------------------------------------------
 * Thresholds of the rules (docs/recommendations.md gives their sources)
 * ------------------------------------------------------------------------------------------ */

/* precision (b) */
#define SKIP_RATE_MAX (1.0 / 500.0) /* skipped steps after calibration (PyTorch GradScaler docs) */
#define SKIP_MIN_COUNT 2            /* ... and at least this many (one skip is no rate) */
#define FLUSH_MAX 0.01              /* fraction of a layer's gradients flushed at a loss scale */
#define FLUSH_NORM_MAX 0.01         /* ... and the share of its squared norm they carry: a
                                       prediction rules FP16 out only when both are reached */
#define SUBNORMAL_WARN 0.01         /* fraction of a layer's gradients FP16 subnormal at it */
#define GRAD_RANGE_QUANTILE 0.01    /* gradient range: largest / this quantile (1st percentile) */
#define SCALE_INIT_LOG2 16          /* GradScaler's initial 2^16 when no gradient was traced */
#define LOST_MAX 0.01               /* fraction of a layer's updates lost */
#define DEV_ISLAND 0.05             /* activation rms deviation that names a BF16 island */
#define DEV_ISLAND_LAYERS 3         /* at most this many of the most deviating layers named */
#define ISLAND_SHARE_MAX 0.5        /* islands holding more of the parameters are no rescue */
#define FWD_HITS_MAX 64             /* overflowing layers listed */

/* learning rate (d) */
#define RATIO_TARGET 1e-3           /* update/weight ratio (CS231n) */
#define RATIO_HIGH 1e-2             /* above: lower the lr */
#define RATIO_LOW 1e-4              /* below: raise the lr */
#define LR_LOWER_MIN 0.1            /* lr x max(0.1, 1e-3 / r) */
#define LR_RAISE_MAX 10.0           /* lr x min(10, 1e-3 / r) */
#define LR_STEP 0.5                 /* the heuristic step (divergence, loss spikes) */
#define SPIKE_RATE_MAX (1.0 / 1000) /* loss spikes per step */
#define SPIKE_MIN_COUNT 2           /* ... and at least this many */
#define LR_SWEEP_MAX 64             /* learning rates a sweep compares */
#define LEARNED_FRACTION 0.9        /* final-window loss below this share of the first: it learns */
#define FLAT_FRACTION 0.98          /* not below this share: the baseline does not learn at all */
#define DEAD_SHARE 0.8              /* a layer's weight gradients exactly 0: its units died */
#define DEAD_AT_START 0.25          /* ... where at its first record fewer were: they died later */
#define LR_DEAD_FACTOR 0.1          /* dead units at the run's lr: lower it a decade */
#define LR_RAISE_FLAT_MAX 1000.0    /* a baseline that does not learn at all, steps too small:
                                       lr x min(1000, 1e-3 / r) (LR_DIVERGE_MIN's mirror) */
#define RATIO_STRONG 0.1            /* a healthy run's ratio above this still means "lower" */
#define LR_DIVERGE_MIN 1e-3         /* divergence: lr x at least this (the evidence may ask a lot) */

/* clip (c) */
#define CLIP_MIN_NORMS 20           /* gradient norms needed for a clip value */
#define CLIP_PRIOR_NEVER 0.1        /* median norm below: the prior 1.0 would never fire */
#define CLIP_PRIOR_ALWAYS 10.0      /* median norm above: the prior 1.0 would clip every step */
#define CLIP_DRIFT 2.0              /* last / first 10% median outside [1/2, 2]: the norm drifts */


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

const char *rec_scope_name(rec_scope s) { return s == REM_EVERY_RUN ? "every-run" : "recommended"; }

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

static int is_prec(const an_run *r, precision p) { return r->prec == p; }

static uint64_t nonzero(const an_cell *c)
{
    uint64_t bad = c->zero + c->nan + c->posinf + c->neginf;
    return c->count > bad ? c->count - bad : 0;
}

/* A run failed on its own: diverged or non-finite loss. */
static int run_failed(const an_run *r) { return r->diverged || r->loss_nonfinite > 0; }

/* The run learned: its final-window training loss is finite and below LEARNED_FRACTION of its
 * first loss (a network that predicts the class prior sits at ln K, its first loss). */
static int learned(const an_run *r)
{
    return isfinite(r->tail_mean) && isfinite(r->loss_first) &&
           r->tail_mean < LEARNED_FRACTION * r->loss_first;
}

/* Dead units: a run that does not learn (LEARNED_FRACTION) and does not fail while some layer's
 * weight gradients are >= DEAD_SHARE exactly zero, where fewer than DEAD_AT_START were at its
 * first record (a unit inactive for a whole batch is rare at initialisation; a layer that starts
 * with many, as with inputs without signal, is not the lr's doing). */
static int dead_units(const an_run *b)
{
    const an_findings *f = b->find;
    if (learned(b) || run_failed(b) || f->zero_grad_layer < 0 || f->zero_grad_fraction < DEAD_SHARE)
        return 0;
    const an_cell *g0 = &b->layers[f->zero_grad_layer].cell[AMPDIAG_KIND_WEIGHT_GRAD];
    return g0->first_count > 0 && (double)g0->first_zero / (double)g0->first_count < DEAD_AT_START;
}

/* The update/weight ratio the lr rules read: the median of the per-layer medians, else the
 * median of /steps update_ratio (NaN without either). */
static double run_ratio(const an_run *r)
{
    return isfinite(r->ratio_median) ? r->ratio_median : r->step_ratio_median;
}

/* Steps too small to learn: the run neither learns nor fails, has no dead units, and its
 * update/weight ratio is below RATIO_TARGET (1e-3). */
static int steps_too_small(const an_run *r)
{
    double q = run_ratio(r);
    return !learned(r) && !run_failed(r) && !dead_units(r) && isfinite(q) && q < RATIO_TARGET;
}

/* The run does not learn at all: its final-window loss is not below FLAT_FRACTION of its
 * first (a run that fails apart). */
static int learns_nothing(const an_run *r)
{
    return !run_failed(r) && !(isfinite(r->tail_mean) && isfinite(r->loss_first) &&
                               r->tail_mean < FLAT_FRACTION * r->loss_first);
}

/* The last evaluation's loss is NaN or infinite (a finding however the training loss looks). */
static int eval_nonfinite(const an_run *r)
{
    return r->nevals && !isfinite(r->evals[r->nevals - 1].loss);
}

/* The run's evaluation is not finite while its training stayed finite (no non-finite loss, no
 * NaN/inf activation record): its evaluation's forward pass met values the training batches
 * never had. */
static int eval_only_nonfinite(const an_run *r)
{
    return eval_nonfinite(r) && !r->loss_nonfinite && r->fwd_nonfinite_step < 0;
}

/* The step of the run's first evaluation whose loss is not finite; -1 when none. */
static int64_t first_nonfinite_eval(const an_run *r)
{
    for (size_t i = 0; i < r->nevals; i++)
        if (!isfinite(r->evals[i].loss))
            return r->evals[i].step;
    return -1;
}

/* Where the evaluation's forward pass went non-finite, from the run's eval event: "NaN in fc1
 * activations, validation rows 0-63", or "" without one. */
static void eval_where(const an_run *r, char *buf, size_t n)
{
    const an_event_ref *e = &r->eval_forward;
    const char *rows = strstr(e->message, "validation rows ");
    size_t len = rows ? strcspn(rows, ":") : 0;
    if (e->step < 0)
        snprintf(buf, n, "%s", "");
    else
        snprintf(buf, n, "%s in %s activations%s%.*s", e->code == AMPDIAG_EV_NAN_FORWARD ? "NaN" : "inf",
                 an_layer_name(r, e->layer), rows ? ", " : "", (int)len, rows ? rows : "");
}

/* A format cause of NaN that no learning rate fixes: AdamW with its state held in FP16 and an
 * eps that FP16 flushes to zero (|eps| <= 2^-25), so a zero gradient gives 0/0 = NaN. */
static int adam_eps_zero(const an_run *r)
{
    return strcmp(r->optim_state, "fp16") == 0 && strcmp(r->optimizer, "adamw") == 0 &&
           isfinite(r->adam_eps) && r->adam_eps <= FP16_UNDERFLOW_AT;
}

/* The run failed, and by a format cause (adam_eps_zero) rather than the lr. */
static int failed_by_format(const an_run *r) { return run_failed(r) && adam_eps_zero(r); }

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

/* name is one of the comma-separated names of list */
static int in_island_list(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, ",");
        if (k == len && strncmp(p, name, len) == 0)
            return 1;
        p += k + (p[k] == ',');
    }
    return 0;
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


/* The one-line verdict (R->verdict, cut at its size like snprintf). */
static void set_verdict(recommendation *R, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void set_verdict(recommendation *R, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(R->verdict, sizeof R->verdict, fmt, ap);
    va_end(ap);
}

/* Every run diverges or has a non-finite loss, none from the forward pass of its first step. */
static int every_run_fails(const an_run *runs, size_t n)
{
    int all = n > 0;
    for (size_t i = 0; i < n; i++)
        all &= run_failed(&runs[i]) && !failed_from_start(&runs[i]);
    return all;
}

/* "0%", "1.5e-05%", "12.3%" */
static void pct(char *buf, size_t n, double f)
{
    if (f == 0)
        snprintf(buf, n, "0%%");
    else if (f < 1e-4)
        snprintf(buf, n, "%.2g%%", 100 * f);
    else
        snprintf(buf, n, "%.3g%%", 100 * f);
}

static const int grad_kinds[2] = {AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_KIND_WEIGHT_GRAD};

/* ------------------------------------------------------------------------------------------
 * Measurements the rules share
 * ------------------------------------------------------------------------------------------ */

typedef struct fwd_hit {
    int layer, kind;
    double absmax;
    int64_t step;
} fwd_hit;

/* Layers of run r that autocast runs in 16 bits (not fp32_op, not an island) whose activations
 * (else weights) reach limit; at most max of them, in layer order. Returns their number. */
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

/* The layer of r losing the largest fraction of its non-zero updates: updates lost in the run
 * (what_if 0) or that BF16 weights would lose (what_if 1, lost_ifb16). Returns the fraction
 * (0 when none) and the layer in *layer (-1 when none). */
static double worst_lost_layer(const an_run *r, int what_if, int *layer)
{
    double worst = 0;
    *layer = -1;
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_cell *u = &r->layers[l].cell[AMPDIAG_KIND_UPDATE];
        uint64_t z = nonzero(u);
        double f = z ? (double)(what_if ? u->lost_if[1] : u->lost) / (double)z : 0;
        if (f > worst) {
            worst = f;
            *layer = (int)l;
        }
    }
    return worst;
}

/* ------------------------------------------------------------------------------------------
 * The loss scale (rule (b)5) from the unscaled gradients of one run
 * ------------------------------------------------------------------------------------------ */

/* Reads: the unscaled largest magnitude (absmax_u) of each gradient cell, loss layers left
 * out. Sets max_grad and where it occurred (stays -1 without a finite gradient). */
static void scale_largest_gradient(const an_run *r, rec_scale *s)
{
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op)
            continue;
        for (int j = 0; j < 2; j++) {
            const an_cell *c = &L->cell[grad_kinds[j]];
            if (c->records && c->absmax_u > s->max_grad && isfinite(c->absmax_u)) {
                s->max_grad = c->absmax_u;
                s->max_grad_layer = (int)l;
                s->max_grad_kind = grad_kinds[j];
                s->max_grad_step = c->absmax_u_step;
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
    double l = log2(FP16_MARGIN_AT / g);
    int k = isnan(l) ? 0 : l > 1100 ? 1100 : l < -1100 ? -1100 : (int)floor(l);
    if (!isfinite(g) || !(g > 0))
        return k;
    while (ldexp(g, k) > FP16_MARGIN_AT)
        k--;
    while (ldexp(g, k + 1) <= FP16_MARGIN_AT)
        k++;
    return k;
}

/* One gradient cell (layer l, kind) at the scale 2^s->log2. Reads its unscaled histogram
 * (else its smallest magnitude: a bound) and, for a run without loss scaling, its FP16
 * underflow count. Raises s->flushed (fraction with |g| * S <= 2^-25), s->subnormal and
 * s->flushed1 (flushed at scale 1) to this cell's where larger; adds the histogram to all
 * (when not NULL). Returns 1 when the cell has a histogram. */
static int scale_cell(const an_run *r, size_t l, int kind, rec_scale *s, uint64_t *all)
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
        fl = isfinite(c->absmin_u) && ldexp(c->absmin_u, s->log2) > FP16_UNDERFLOW_AT ? 0 : NAN;
        sub = NAN;
    }
    if (fl > s->flushed) {
        s->flushed = fl;
        s->flushed_layer = (int)l;
        s->flushed_kind = kind;
        s->flushed_norm = fln;
    }
    if (sub > s->subnormal) {
        s->subnormal = sub;
        s->subnormal_layer = (int)l;
        s->subnormal_kind = kind;
    }
    /* without scaling: the run's own FP16 counts, when it ran unscaled */
    if (!r->scaled) {
        uint64_t z = nonzero(c);
        double f1 = z ? (double)c->wi[AN_WI_FP16][AMPDIAG_WHATIF_UNDERFLOW] / (double)z : 0;
        if (f1 > s->flushed1) {
            s->flushed1 = f1;
            s->flushed1_layer = (int)l;
            s->flushed1_kind = kind;
        }
    }
    return c->hist != NULL;
}

/* Rule (b)5's measurement on run r (index ri): the suggested scale 2^log2 (scale_log2 of the
 * largest unscaled gradient), the worst per-layer fractions flushed and subnormal at it and
 * flushed without scaling (scale_cell), and the gradients' range log2(max / 1st percentile)
 * of the summed histograms. s->have = 0 when r has no finite non-zero gradient. */
static void scale_rule(const an_run *r, size_t ri, rec_scale *s)
{
    memset(s, 0, sizeof *s);
    s->max_grad = -1;
    s->flushed = s->subnormal = s->flushed1 = 0;
    s->flushed_norm = NAN;
    s->flushed_layer = s->subnormal_layer = s->flushed1_layer = -1;
    s->range_log2 = NAN;
    scale_largest_gradient(r, s);
    if (!(s->max_grad > 0))
        return;
    s->have = 1;
    s->run = ri;
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
        double q = an_hist_quantile_log2(all, GRAD_RANGE_QUANTILE);
        if (!isnan(q))
            s->range_log2 = log2(s->max_grad) - q;
    }
    free(all);
}

/* ------------------------------------------------------------------------------------------
 * The precision rules (b). They share a context: the inputs, and what earlier rules found.
 * ------------------------------------------------------------------------------------------ */

typedef struct prec_ctx {
    const an_run *runs;
    size_t n;
    const an_comparison *c;
    recommendation *R;
    const an_run *base;     /* runs[c->baseline] */
    int have_fp32;          /* the baseline is an FP32 run */
    int undecided;          /* (b)1: the baseline does not train */
    const an_run *fwd_src;  /* (b)3: the run the range what-ifs read, or NULL */
    int fp16_fwd;           /* (b)3/(b)4: FP16 overflows in the forward pass */
    int islands_partial;    /* islands known only from an FP16 run's first overflowing layer */
    int baseline_flat;      /* (b)1: the FP32 baseline trains but does not learn */
    int range_decisive;     /* (b)5: the gradient range ruled FP16 out (scale_check_flush/span) */
    const an_run *fp16_healthy; /* (b)4: an FP16 run that was run and is healthy (no NaN/inf,
                                   skips within the limit, loss within the band), or NULL: what
                                   it did outweighs what-if predictions (observed beats
                                   predicted) */
    const an_run *eval_run; /* a 16-bit run whose evaluation alone is not finite (eval_cause) */
    const an_run *fp16_islanded; /* (b)4: a clean fp16 run with FP32 layers (its fp32_layers)
                                    whose loss is within the noise band, or NULL */
    uint64_t island_params; /* parameters of the islands */
    char islands[256];      /* FP32 islands that would let FP16 run: "fc1,fc2" */
    int bf16_bad;           /* (b)6: a decisive rule rules BF16 out */
    int bf16_gap_bad;       /* (b)6(iii): a BF16 run misses the baseline's loss */
    double share;           /* (b)7: the islands' share of the parameters */
    int islands_ok;         /* (b)7: the islands rescue FP16 */
} prec_ctx;

/* The FP32 baseline itself fails (then a 16-bit run failing says nothing about its format). */
static int baseline_fails(const prec_ctx *x) { return x->have_fp32 && run_failed(x->base); }

/* (b)2 Hardware gate. Reads: --target. Decides: fp16/bf16 supported; without BF16 tensor
 * cores (sm70, sm75) BF16 gets an issue and its summary. */
static void rule_target_gate(prec_ctx *x)
{
    recommendation *R = x->R;
    R->fp16.supported = rec_target_has_fp16(R->target);
    R->bf16.supported = rec_target_has_bf16(R->target);
    if (!R->bf16.supported) {
        strlist_addf(&R->bf16.issues, "target %s has no BF16 tensor cores (BF16 needs Ampere sm80 or "
                     "newer)", rec_target_name(R->target));
        summary(&R->bf16, "no BF16 on %s", rec_target_name(R->target));
    }
}

/* (b)1 The baseline must train. Reads: the FP32 baseline's divergence and non-finite loss;
 * without an FP32 baseline, every run's (every_run_fails). Decides: undecided, with the
 * reason in R->why. */
static void rule_baseline_trains(prec_ctx *x)
{
    const an_run *base = x->base;
    recommendation *R = x->R;
    if (baseline_fails(x)) {
        x->undecided = 1;
        if (failed_by_format(base))
            /* cause before remedy: the format, not the lr */
            strlist_addf(&R->why, "the FP32 baseline %s fails (from step %" PRId64 ") because its "
                         "AdamW state is held in FP16, where eps %g rounds to 0 (FP16 flushes |x| <= "
                         "2^-25) and a zero gradient gives 0/0 = NaN: a format cause no learning rate "
                         "fixes; keep the optimizer state in FP32 (--optim-state fp32) or use eps >= "
                         "1e-7, then compare again", base->label,
                         base->diverged ? base->divergence_step : base->first_nonfinite_loss_step,
                         base->adam_eps);
        else if (base->diverged)
            strlist_addf(&R->why, "the FP32 baseline %s diverges too (from step %" PRId64
                         "): the learning rate, not the format, is the problem; fix it first (see LR)",
                         base->label, base->divergence_step);
        else
            strlist_addf(&R->why, "the FP32 baseline %s has a non-finite loss (first at step %" PRId64
                         "): fix that first (see LR)", base->label, base->first_nonfinite_loss_step);
    } else if (!x->have_fp32 && every_run_fails(x->runs, x->n)) {
        x->undecided = 1;
        strlist_addf(&R->why, "every run diverges or has a non-finite loss, and no FP32 run shows "
                     "whether the format is the cause: run FP32 (ampdiag sweep) or lower the lr");
    }
}

/* The run whose ranges stand for FP32's: the FP32 baseline, else an FP32 run, else a BF16
 * (or bf16-pure) run at the baseline's lr; NULL when that run failed (its ranges after
 * divergence say nothing about the formats) or there is none. */
static const an_run *forward_source(const prec_ctx *x)
{
    const an_run *src = x->have_fp32 ? x->base : NULL;
    for (size_t i = 0; i < x->n && !src; i++)
        if (is_prec(&x->runs[i], PREC_FP32) && lr_eq(x->runs[i].lr, x->base->lr))
            src = &x->runs[i];
    for (size_t i = 0; i < x->n && !src; i++)
        if ((is_prec(&x->runs[i], PREC_BF16) || is_prec(&x->runs[i], PREC_BF16_PURE)) &&
            lr_eq(x->runs[i].lr, x->base->lr))
            src = &x->runs[i];
    if (src && run_failed(src))
        src = NULL;
    return src;
}

/* The FP32 islands for overflowing layers: each one and the layer after it (which reads the
 * value), loss layers left out; their names and parameters go to x->islands/island_params. */
static void islands_from_hits(prec_ctx *x, const fwd_hit *hits, size_t nh)
{
    const an_run *src = x->fwd_src;
    char *mark = calloc(src->nlayers ? src->nlayers : 1, 1);
    if (!mark)
        return;
    for (size_t i = 0; i < nh; i++) {
        mark[hits[i].layer] = 1;
        size_t nx = (size_t)hits[i].layer + 1;
        if (nx < src->nlayers && !src->layers[nx].fp32_op)
            mark[nx] = 1;
    }
    for (size_t l = 0; l < src->nlayers; l++)
        if (mark[l]) {
            append_name(x->islands, sizeof x->islands, src->layers[l].name);
            x->island_params += src->layers[l].params;
        }
    free(mark);
}

/* (b)3 Forward overflow => not FP16. Reads: forward_source's activation/weight maxima of
 * 16-bit layers. Decides: any reaching FP16_OVERFLOW_AT (65520) makes FP16 decisively ruled
 * out (loss scaling only scales the backward pass) and names the FP32 islands. */
static void rule_forward_overflow(prec_ctx *x)
{
    x->fwd_src = forward_source(x);
    if (!x->fwd_src)
        return;
    const an_run *src = x->fwd_src;
    rec_format *f16 = &x->R->fp16;
    fwd_hit hits[FWD_HITS_MAX];
    size_t nh = forward_overflow(src, FP16_OVERFLOW_AT, hits, FWD_HITS_MAX);
    if (!nh)
        return;
    x->fp16_fwd = 1;
    f16->decisive = 1;
    char names[160] = "";
    for (size_t i = 0; i < nh; i++)
        append_name(names, sizeof names, src->layers[hits[i].layer].name);
    const fwd_hit *h0 = &hits[0];
    strlist_addf(&f16->issues,
                 "forward overflow: %s %s reach %.4g (2^%.1f) at step %" PRId64 " in %s, above "
                 "FP16's 65504 (>= 65520 rounds to inf); loss scaling cannot help the forward "
                 "pass. Layers reaching 65520: %s",
                 src->layers[h0->layer].name, kind_short(h0->kind), h0->absmax,
                 log2(h0->absmax), h0->step, src->label, names);
    summary(f16, "forward overflow: %s %s reach %.3g > 65504", src->layers[h0->layer].name,
            kind_short(h0->kind), h0->absmax);
    islands_from_hits(x, hits, nh);
}

/* (b)8 Forward headroom. Reads: forward_source's maxima, when rule_forward_overflow found no
 * overflow. Decides nothing: a warning for each 16-bit layer at or above FP16_MARGIN_AT
 * (32752, less than one binade below 65504). */
static void rule_forward_headroom(prec_ctx *x)
{
    if (!x->fwd_src || x->fp16_fwd)
        return;
    fwd_hit hits[FWD_HITS_MAX];
    size_t nw = forward_overflow(x->fwd_src, FP16_MARGIN_AT, hits, FWD_HITS_MAX);
    for (size_t i = 0; i < nw; i++)
        strlist_addf(&x->R->warnings,
                     "%s %s reach %.4g at step %" PRId64 " in %s: less than 1 binade of FP16 "
                     "headroom (%.2f binades below 65504)",
                     x->fwd_src->layers[hits[i].layer].name, kind_short(hits[i].kind), hits[i].absmax,
                     hits[i].step, x->fwd_src->label, log2(FP16_MAX / hits[i].absmax));
}

/* ---- (b)4 FP16 run evidence: checks of one FP16 run at the baseline's lr; each returns 1
 * when it found a problem (the run is then "bad": FP16 is decisively ruled out) ---- */

/* NaN/inf in an activation record (first layer in forward order). Without FP32 evidence of a
 * forward overflow (and a baseline that trains), that layer becomes the (partial) FP32 island. */
static int fp16_check_forward(prec_ctx *x, const an_run *r)
{
    if (r->fwd_nonfinite_step < 0)
        return 0;
    rec_format *f16 = &x->R->fp16;
    const an_layer *L = &r->layers[r->fwd_nonfinite_layer];
    const an_cell *ac = &L->cell[AMPDIAG_KIND_ACTIVATION];
    int inf = ac->posinf + ac->neginf > 0;
    strlist_addf(&f16->issues,
                 "%s: %s in %s activations from step %" PRId64 " (first in forward order; "
                 "%" PRIu64 " non-finite activation values)%s",
                 r->label, inf ? "inf" : "NaN", L->name, r->fwd_nonfinite_step,
                 ac->nan + ac->posinf + ac->neginf,
                 x->fp16_fwd             ? ": the forward overflow above"
                 : inf && !x->undecided ? ": a forward overflow, which loss scaling cannot fix"
                                        : "");
    if (!x->fp16_fwd && !x->undecided) {
        /* no FP32 evidence: the FP16 run is the evidence, and it only shows the first layer to
         * overflow (the ones after it see inf) */
        x->fp16_fwd = 1;
        x->islands_partial = 1;
        append_name(x->islands, sizeof x->islands, L->name);
        x->island_params += L->params;
    }
    summary(f16, "%s in %s activations from step %" PRId64, inf ? "inf" : "NaN", L->name,
            r->fwd_nonfinite_step);
    return 1;
}

/* The loss scale collapsed (to <= 1, or skips at the scaler's minimum). */
static int fp16_check_collapse(prec_ctx *x, const an_run *r)
{
    if (!r->collapsed)
        return 0;
    char a[64], b[192];
    int at_min = r->scaler_min > 0 && r->scale_min <= r->scaler_min;
    rec_fmt_scale(a, sizeof a, r->scale_min);
    rec_fmt_scale(b, sizeof b, r->scaler_min);
    strlist_addf(&x->R->fp16.issues,
                 "%s: loss scale collapses to %s at step %" PRId64 "%s%s (%zu backoffs, %zu "
                 "skipped steps of %zu)",
                 r->label, a, r->scale_min_step, at_min ? ", the scaler's minimum " : "",
                 at_min ? b : "", r->backoffs, r->skipped, r->nsteps);
    summary(&x->R->fp16, "the loss scale collapses to %s", a);
    return 1;
}

/* Skipped steps after calibration: more than SKIP_RATE_MAX (1 in 500), at least
 * SKIP_MIN_COUNT (skips_too_many). */
static int fp16_check_skips(prec_ctx *x, const an_run *r)
{
    if (!skips_too_many(r))
        return 0;
    double rate = 100.0 * (double)r->skipped_after / (double)r->steps_after;
    strlist_addf(&x->R->fp16.issues,
                 "%s: %zu of %zu steps skipped after the first %zu (calibration): %.3g%%, more "
                 "than 1 in 500; first at step %" PRId64 " (%s)",
                 r->label, r->skipped_after, r->steps_after, r->calib, rate, r->first_skip_step,
                 r->first_skip_reason[0] ? r->first_skip_reason : "no reason recorded");
    summary(&x->R->fp16, "%.2g%% of steps skipped after calibration", rate);
    return 1;
}

/* A non-finite loss, unless the FP32 baseline fails too. */
static int fp16_check_loss(prec_ctx *x, const an_run *r)
{
    if (!r->loss_nonfinite || baseline_fails(x))
        return 0;
    strlist_addf(&x->R->fp16.issues, "%s: non-finite loss at %zu steps, first at step %" PRId64 "%s",
                 r->label, r->loss_nonfinite, r->first_nonfinite_loss_step,
                 x->have_fp32 ? " where FP32 stays finite" : "");
    summary(&x->R->fp16, "non-finite loss from step %" PRId64, r->first_nonfinite_loss_step);
    return 1;
}

/* Divergence, unless the FP32 baseline fails too. */
static int fp16_check_divergence(prec_ctx *x, const an_run *r)
{
    if (!r->diverged || baseline_fails(x))
        return 0;
    strlist_addf(&x->R->fp16.issues, "%s: diverges from step %" PRId64 "%s", r->label,
                 r->divergence_step, x->have_fp32 ? " where FP32 does not" : "");
    summary(&x->R->fp16, "diverges from step %" PRId64, r->divergence_step);
    return 1;
}

/* A 16-bit run whose evaluation alone is not finite (eval_only_nonfinite) where the baseline's
 * evaluation is finite: the validation data reaches beyond the format's range in the forward
 * pass (values the training batches never had; loss scaling scales the backward pass only). The
 * format is ruled out for this data, and the cause is named first (R->why). fmt is "FP16" or
 * "BF16", f its assessment. Returns 1 when it applies. */
static int eval_cause(prec_ctx *x, const an_run *r, rec_format *f, const char *fmt)
{
    if (r == x->base || !eval_only_nonfinite(r) || eval_nonfinite(x->base) || !x->base->nevals)
        return 0;
    char where[160], at[200] = "";
    eval_where(r, where, sizeof where);
    if (where[0])
        snprintf(at, sizeof at, " (%s)", where);
    int64_t from = first_nonfinite_eval(r);
    double be = x->base->evals[x->base->nevals - 1].loss;
    strlist_addf(&f->issues, "%s: eval loss not finite from step %" PRId64 "%s while its training "
                 "stays finite (no NaN/inf in its loss or activation records) and %s's eval loss is "
                 "%.4g: validation inputs overflow %s in the forward pass, beyond the range the "
                 "training batches had; loss scaling cannot help the forward pass", r->label, from,
                 at, x->base->label, be, fmt);
    if (!x->eval_run)
        strlist_addf(&x->R->why, "first: %s's evaluation overflows %s from step %" PRId64 "%s while "
                     "its training stays finite and %s's eval loss is %.4g: the validation data holds "
                     "values beyond %s's range that the training batches never had; %s is ruled out "
                     "for this data (check the validation data's preprocessing)", r->label, fmt, from,
                     at, x->base->label, be, fmt, fmt);
    summary(f, "eval loss not finite from step %" PRId64 ": validation inputs overflow %s", from, fmt);
    f->decisive = 1;
    if (!x->eval_run)
        x->eval_run = r;
    return 1;
}

/* The evaluation alone is not finite (eval_cause). */
static int fp16_check_eval(prec_ctx *x, const an_run *r) { return eval_cause(x, r, &x->R->fp16, "FP16"); }

typedef int (*fp16_run_check)(prec_ctx *, const an_run *);
static const fp16_run_check fp16_run_checks[] = {
    fp16_check_forward, fp16_check_collapse, fp16_check_skips, fp16_check_loss,
    fp16_check_divergence, fp16_check_eval,
};

/* A clean FP16 run: evidence that FP16 works, with its skips and loss scale. */
static void fp16_note_clean(prec_ctx *x, const an_run *r)
{
    char a[64], b[192];
    rec_fmt_scale(a, sizeof a, r->scale_init);
    rec_fmt_scale(b, sizeof b, r->scale_final);
    if (r->scaled)
        strlist_addf(&x->R->fp16.good, "%s: no NaN/inf in the forward pass, %zu skipped steps "
                     "(%zu after calibration), loss scale %s -> %s",
                     r->label, r->skipped, r->skipped_after, a, b);
    else
        strlist_addf(&x->R->fp16.good, "%s: no NaN/inf in the forward pass, no skipped steps "
                     "(no loss scaling)", r->label);
}

/* The loss gap of a clean FP16 run (index i): above the noise band it rules FP16 out
 * decisively; within it, evidence that FP16 works. */
static void fp16_check_gap(prec_ctx *x, const an_run *r, size_t i)
{
    const an_gap *g = &x->c->gap[i];
    rec_format *f16 = &x->R->fp16;
    char a[64], b[192];
    if (!g->have || !isfinite(g->rel))
        return;
    if (g->rel > x->c->band) {
        pct(a, sizeof a, g->rel);
        pct(b, sizeof b, x->c->band);
        strlist_addf(&f16->issues, "%s: %s loss %.4g vs %.4g in %s (+%s), outside the noise band "
                     "+-%s", r->label, g->eval ? "final eval" : "final-window", g->value, g->base,
                     x->base->label, a, b);
        summary(f16, "loss +%s vs FP32, outside the noise band", a);
        f16->decisive = 1;
    } else {
        pct(a, sizeof a, fabs(g->rel));
        pct(b, sizeof b, x->c->band);
        strlist_addf(&f16->good, "%s: %s loss %.4g vs %.4g (%s%s), within the noise band +-%s",
                     r->label, g->eval ? "final eval" : "final-window", g->value, g->base,
                     g->rel < 0 ? "-" : "+", a, b);
    }
}

/* (b)4 FP16 run evidence => not FP16. Reads: each FP16 run at the baseline's lr. Decides:
 * fp16 observed; decisive when any fp16_run_checks[] check fires (forward NaN/inf, collapsed
 * scale, skips > 1/500 after calibration, non-finite loss or divergence where FP32 trains) or
 * a clean run's loss gap exceeds the noise band; needs_scaling bit 2 for a run without loss
 * scaling. */
static void rule_fp16_runs(prec_ctx *x)
{
    rec_format *f16 = &x->R->fp16;
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (!is_prec(r, PREC_FP16) || !lr_eq(r->lr, x->base->lr))
            continue;
        if (adam_eps_zero(r) && (run_failed(r) || r->nan_values)) {
            /* cause before remedy: this run's NaN comes from its optimizer state's format, not
             * from FP16 autocast; it is no evidence either way about the activations' format */
            strlist_addf(&f16->issues, "%s fails because its AdamW state is held in FP16, where eps "
                         "%g rounds to 0 and zero gradients give 0/0 = NaN (the first cause: the NaN "
                         "in its layers follows from it); re-run with --optim-state fp32 to judge "
                         "FP16 autocast itself", r->label, r->adam_eps);
            continue;
        }
        f16->observed = 1;
        int bad = 0;
        for (size_t k = 0; k < NELEM(fp16_run_checks); k++)
            bad |= fp16_run_checks[k](x, r);
        if (bad)
            f16->decisive = 1;
        else
            fp16_note_clean(x, r);
        if (!r->scaled && strcmp(r->loss_scale_mode, "none") == 0)
            f16->needs_scaling |= 2; /* ran without scaling: say what scaling would change */
        if (!bad) {
            int before = f16->decisive;
            fp16_check_gap(x, r, i);
            if (!f16->decisive && !before && !x->fp16_healthy)
                x->fp16_healthy = r;
            const an_gap *g = &x->c->gap[i];
            if (r->fp32_layers[0] && !x->fp16_islanded && !(g->have && g->rel > x->c->band))
                x->fp16_islanded = r;
        }
    }
}

/* ---- (b)5 gradient range: checks of the loss scale measurement (scale_rule); a is the
 * suggested scale as text ("2^17"), sr the run the gradients come from ---- */

/* Some layer loses >= FLUSH_MAX (1%) of its non-zero gradients even at the suggested scale:
 * FP16 decisively ruled out. */
static void scale_check_flush(prec_ctx *x, const an_run *sr, const char *a)
{
    const rec_scale *S = &x->R->scale;
    rec_format *f16 = &x->R->fp16;
    char b[192], nb[64] = "";
    if (!(S->flushed_layer >= 0 && S->flushed >= FLUSH_MAX))
        return;
    pct(b, sizeof b, S->flushed);
    if (!isnan(S->flushed_norm))
        pct(nb, sizeof nb, S->flushed_norm);
    if (x->fp16_healthy || (!isnan(S->flushed_norm) && S->flushed_norm < FLUSH_NORM_MAX)) {
        /* observed beats predicted; and flushed values that carry almost none of the
         * gradient's norm do not decide */
        strlist_addf(&x->R->warnings,
                     "predicted from %s: at loss scale %s, %s of %s %s flush to zero in FP16%s%s%s; "
                     "not decisive: %s",
                     sr->label, a, b, sr->layers[S->flushed_layer].name, kind_short(S->flushed_kind),
                     *nb ? " (" : "", nb, *nb ? " of their squared norm)" : "",
                     x->fp16_healthy ? "an FP16 run was run and is healthy, and what it did decides"
                                     : "the flushed values carry less than 1% of the gradient's "
                                       "squared norm");
        return;
    }
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
    x->range_decisive = 1;
}

/* The gradients span more than FP16_SPAN_LOG2 (2^40, max / 1st percentile): FP16 decisively
 * ruled out. */
static void scale_check_span(prec_ctx *x, const an_run *sr, const char *a)
{
    const rec_scale *S = &x->R->scale;
    (void)a;
    if (!(isfinite(S->range_log2) && S->range_log2 > FP16_SPAN_LOG2))
        return;
    int harmless = S->flushed_layer < 0 || S->flushed < FLUSH_MAX ||
                   (!isnan(S->flushed_norm) && S->flushed_norm < FLUSH_NORM_MAX);
    if (x->fp16_healthy || harmless) {
        char b[64];
        pct(b, sizeof b, isnan(S->flushed_norm) ? 0 : S->flushed_norm);
        if (x->fp16_healthy)
            strlist_addf(&x->R->warnings,
                         "predicted from %s: the gradients span 2^%.1f (largest / 1st percentile), "
                         "more than FP16's 2^40; not decisive: %s was run and is healthy, and what "
                         "it did decides", sr->label, S->range_log2, x->fp16_healthy->label);
        else
            strlist_addf(&x->R->warnings,
                         "predicted from %s: the gradients span 2^%.1f (largest / 1st percentile), "
                         "more than FP16's 2^40; not decisive: at the suggested loss scale the "
                         "values that flush carry %s of the worst layer's squared gradient norm "
                         "(under 1%% does not rule FP16 out)", sr->label, S->range_log2, b);
        return;
    }
    strlist_addf(&x->R->fp16.issues,
                 "gradient range: the gradients span 2^%.1f (largest / 1st percentile), more "
                 "than FP16's 2^40 (from %s)", S->range_log2, sr->label);
    summary(&x->R->fp16, "the gradients span 2^%.0f, more than FP16's 2^40", S->range_log2);
    x->R->fp16.decisive = 1;
    x->range_decisive = 1;
}

/* Without scaling (a run that ran unscaled), some layer flushes >= FLUSH_MAX: FP16 needs loss
 * scaling (needs_scaling bit 1), not a disqualifier. */
static void scale_check_unscaled(prec_ctx *x, const an_run *sr, const char *a)
{
    const rec_scale *S = &x->R->scale;
    char b[192], s1[32];
    if (!(S->flushed1_layer >= 0 && S->flushed1 >= FLUSH_MAX))
        return;
    pct(b, sizeof b, S->flushed1);
    pct(s1, sizeof s1, S->flushed_layer >= 0 ? S->flushed : 0);
    x->R->fp16.needs_scaling |= 1;
    char worst[160] = "none of them flush";
    if (S->flushed_layer >= 0)
        snprintf(worst, sizeof worst, "the worst, %s %s, loses %s", sr->layers[S->flushed_layer].name,
                 kind_short(S->flushed_kind), s1);
    strlist_addf(&x->R->fp16.issues,
                 "needs loss scaling: without it %s of %s %s flush to zero in FP16 (what-if "
                 "from %s); at loss scale %s %s",
                 b, sr->layers[S->flushed1_layer].name, kind_short(S->flushed1_kind), sr->label,
                 a, worst);
}

/* Below FLUSH_MAX at the suggested scale: evidence for FP16 + that scale. */
static void scale_note_good(prec_ctx *x, const an_run *sr, const char *a)
{
    const rec_scale *S = &x->R->scale;
    char b[192];
    if (S->flushed >= FLUSH_MAX)
        return;
    pct(b, sizeof b, S->flushed);
    if (S->flushed_layer >= 0)
        strlist_addf(&x->R->fp16.good,
                     "loss scale %s keeps the largest gradient (%.3g, %s %s, step %" PRId64
                     ") 1 binade under 65504; at it %s of %s %s still flush to zero (the worst "
                     "layer; from %s)",
                     a, S->max_grad, sr->layers[S->max_grad_layer].name,
                     kind_short(S->max_grad_kind), S->max_grad_step, b,
                     sr->layers[S->flushed_layer].name, kind_short(S->flushed_kind), sr->label);
    else
        strlist_addf(&x->R->fp16.good,
                     "loss scale %s keeps the largest gradient (%.3g, %s %s, step %" PRId64
                     ") 1 binade under 65504; no gradient flushes to zero at it (from %s)",
                     a, S->max_grad, sr->layers[S->max_grad_layer].name,
                     kind_short(S->max_grad_kind), S->max_grad_step, sr->label);
}

/* More than SUBNORMAL_WARN (1%) of a layer's gradients are FP16 subnormals at the scale: a
 * warning (hardware flushing FP16 subnormals would lose them). */
static void scale_warn_subnormal(prec_ctx *x, const an_run *sr, const char *a)
{
    const rec_scale *S = &x->R->scale;
    char b[192];
    if (!(S->subnormal_layer >= 0 && S->subnormal > SUBNORMAL_WARN))
        return;
    pct(b, sizeof b, S->subnormal);
    strlist_addf(&x->R->warnings,
                 "at loss scale %s, %s of %s %s are FP16 subnormals: hardware that flushes "
                 "FP16 subnormals (AMD MI200 FP16 MFMA) would lose them",
                 a, b, sr->layers[S->subnormal_layer].name, kind_short(S->subnormal_kind));
}

typedef void (*scale_check)(prec_ctx *, const an_run *, const char *);
static const scale_check scale_checks[] = {
    scale_check_flush, scale_check_span, scale_check_unscaled, scale_note_good, scale_warn_subnormal,
};

/* (b)5 Gradient range => the loss scale, or not FP16. Reads: the gradients of the FP32
 * baseline (without one, the first BF16 run that trains; else the baseline). Decides:
 * R->scale (scale_rule: S = 2^k, the largest with max |g| * S <= 65504 / 2), then
 * scale_checks[]. */
static void rule_gradient_range(prec_ctx *x)
{
    size_t sref = x->c->baseline;
    if (!x->have_fp32) {
        for (size_t i = 0; i < x->n; i++)
            if ((is_prec(&x->runs[i], PREC_BF16) || is_prec(&x->runs[i], PREC_BF16_PURE)) &&
                !run_failed(&x->runs[i])) {
                sref = i;
                break;
            }
    }
    rec_scale *S = &x->R->scale;
    scale_rule(&x->runs[sref], sref, S);
    if (!S->have)
        return;
    char a[64];
    rec_fmt_scale(a, sizeof a, ldexp(1.0, S->log2));
    for (size_t k = 0; k < NELEM(scale_checks); k++)
        scale_checks[k](x, &x->runs[S->run], a);
}

/* ---- (b)6 BF16 run evidence: checks of one BF16 or bf16-pure run (index i) at the
 * baseline's lr ---- */

/* (b)6(i) A bf16-pure run (weights stored in BF16, no FP32 master copy) that lost more than
 * LOST_MAX (1%) of some layer's non-zero updates, or whose median update/weight ratio is below
 * SWAMP_BF16 (2^-8): keep FP32 master weights (R->master_weights). */
static void bf16_check_master_weights(prec_ctx *x, const an_run *r, size_t i, int pure)
{
    int wl;
    double worst = worst_lost_layer(r, 0, &wl);
    char a[64], b[192];
    (void)i;
    int lost_bad = pure && wl >= 0 && worst > LOST_MAX;
    if (!(lost_bad || (pure && r->ratio_median < SWAMP_BF16)))
        return;
    x->R->master_weights = 1;
    pct(a, sizeof a, worst);
    pct(b, sizeof b, r->update_nonzero ? (double)r->lost / (double)r->update_nonzero : 0);
    strlist_addf(&x->R->bf16.issues,
                 "%s (weights stored in BF16, no FP32 master copy): %s of %s's updates were lost "
                 "(fl(w + dw) == w), %s of all; median update/weight ratio %.3g is below BF16's "
                 "2^-8 = 0.0039: keep FP32 master weights",
                 r->label, a, wl >= 0 ? r->layers[wl].name : "?", b, r->ratio_median);
}

/* (b)6(ii) A BF16 run that diverges or has a non-finite loss where the FP32 baseline trains:
 * BF16 ruled out (bf16_bad; a bf16-pure run only gets the issue). */
static void bf16_check_failed(prec_ctx *x, const an_run *r, size_t i, int pure)
{
    (void)i;
    if (!run_failed(r) || baseline_fails(x))
        return;
    int64_t from = r->diverged ? r->divergence_step : r->first_nonfinite_loss_step;
    strlist_addf(&x->R->bf16.issues, "%s: %s from step %" PRId64 " where %s does not", r->label,
                 r->diverged ? "diverges" : "non-finite loss", from, x->base->label);
    if (!pure) {
        x->bf16_bad = 1;
        summary(&x->R->bf16, "diverges from step %" PRId64, from);
    }
}

/* A BF16 run whose evaluation alone is not finite where the baseline's is (eval_cause): BF16
 * ruled out for this data (bf16_bad; a bf16-pure run only gets the issue). */
static void bf16_check_eval(prec_ctx *x, const an_run *r, size_t i, int pure)
{
    (void)i;
    if (eval_cause(x, r, &x->R->bf16, "BF16") && !pure)
        x->bf16_bad = 1;
}

/* (b)6(iii) The loss gap of a BF16 run that trains: above the noise band it fails
 * (bf16_gap_bad; for bf16-pure, the lost updates above explain it); within, evidence. */
static void bf16_check_gap(prec_ctx *x, const an_run *r, size_t i, int pure)
{
    const an_gap *g = &x->c->gap[i];
    rec_format *b16 = &x->R->bf16;
    char a[64], b[192];
    if (!g->have || i == x->c->baseline || run_failed(r))
        return;
    pct(a, sizeof a, fabs(g->rel));
    pct(b, sizeof b, x->c->band);
    if (g->rel > x->c->band) {
        strlist_addf(&b16->issues, "%s: %s loss %.4g vs %.4g in %s (+%s), outside the noise "
                     "band +-%s%s", r->label, g->eval ? "final eval" : "final-window", g->value,
                     g->base, x->base->label, a, b, pure ? " (the lost updates above)" : "");
        if (!pure) {
            x->bf16_gap_bad = 1;
            summary(b16, "loss +%s vs FP32, outside the noise band +-%s", a, b);
        }
    } else {
        strlist_addf(&b16->good, "%s: %s loss %.4g vs %.4g (%s%s), within the noise band +-%s",
                     r->label, g->eval ? "final eval" : "final-window", g->value, g->base,
                     g->rel < 0 ? "-" : "+", a, b);
    }
}

/* A BF16 (autocast) run that trains with no NaN/inf and no skipped step: evidence. */
static void bf16_note_clean(prec_ctx *x, const an_run *r, size_t i, int pure)
{
    (void)i;
    if (!pure && !run_failed(r) && r->fwd_nonfinite_step < 0 && r->skipped == 0)
        strlist_addf(&x->R->bf16.good, "%s: no NaN/inf, no skipped steps", r->label);
}

typedef void (*bf16_run_check)(prec_ctx *, const an_run *, size_t, int);
static const bf16_run_check bf16_run_checks[] = {
    bf16_check_master_weights, bf16_check_failed, bf16_check_eval, bf16_check_gap, bf16_note_clean,
};

/* (b)6(i)-(iii) BF16 run evidence. Reads: each bf16 and bf16-pure run at the baseline's lr.
 * Decides: bf16 observed (a bf16 autocast run), then bf16_run_checks[]. */
static void rule_bf16_runs(prec_ctx *x)
{
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        int pure = is_prec(r, PREC_BF16_PURE);
        if ((!is_prec(r, PREC_BF16) && !pure) || !lr_eq(r->lr, x->base->lr))
            continue;
        if (!pure)
            x->R->bf16.observed = 1;
        for (size_t k = 0; k < NELEM(bf16_run_checks); k++)
            bf16_run_checks[k](x, r, i, pure);
    }
}

/* (b)6(iv) BF16 range (what-if). Reads: forward_source's activation/weight maxima. Decides:
 * a value reaching BF16_OVERFLOW_AT (2^128 - 2^119) rules BF16 out (bf16_bad) unless the
 * verdict is undecided; with no BF16 run and nothing beyond the range, evidence (predicted). */
static void rule_bf16_range(prec_ctx *x)
{
    const an_run *src = x->fwd_src;
    rec_format *b16 = &x->R->bf16;
    if (!src)
        return;
    fwd_hit bh[1]; /* the first layer is the one named */
    size_t nb = forward_overflow(src, BF16_OVERFLOW_AT, bh, NELEM(bh));
    if (nb && !x->undecided) {
        strlist_addf(&b16->issues, "%s %s reach %.4g at step %" PRId64 " in %s: beyond BF16's "
                     "3.39e38", src->layers[bh[0].layer].name, kind_short(bh[0].kind),
                     bh[0].absmax, bh[0].step, src->label);
        x->bf16_bad = 1;
        summary(b16, "%s %s reach %.3g, beyond BF16's range", src->layers[bh[0].layer].name,
                kind_short(bh[0].kind), bh[0].absmax);
    } else if (!b16->observed && !nb) {
        strlist_addf(&b16->good, "what-if from %s: no activation or weight beyond BF16's range "
                     "(BF16 has FP32's exponent range)", src->label);
    }
}

/* The run whose lost_if_bf16 counts the BF16-weights what-if reads: forward_source when it
 * records them and keeps FP32 weights, else the first run at the baseline's lr that does,
 * trains and has updates; NULL when none. */
static const an_run *lost_if_source(const prec_ctx *x)
{
    const an_run *src = x->fwd_src;
    if (src && src->have_lost_if && !src->weights_16bit)
        return src;
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (r->have_lost_if && !r->weights_16bit && !run_failed(r) && lr_eq(r->lr, x->base->lr) &&
            r->update_nonzero > 0)
            return r;
    }
    return NULL;
}

/* (b)6(v) BF16 weights without FP32 master weights (what-if). Reads: lost_if_source's
 * lost_if_bf16 counts (else forward_source's median update/weight ratio against SWAMP_BF16,
 * 2^-8, when no BF16 run was given). Decides nothing: evidence only (BF16 autocast keeps FP32
 * master weights); above LOST_MAX (1%) in the worst layer it says not to use bf16-pure. */
static void rule_bf16_weights_whatif(prec_ctx *x)
{
    const an_run *src = lost_if_source(x);
    rec_format *b16 = &x->R->bf16;
    char a[64], b[192];
    if (!(src && src->update_nonzero > 0)) {
        if (x->fwd_src && !b16->observed && isfinite(x->fwd_src->ratio_median) &&
            x->fwd_src->ratio_median < SWAMP_BF16)
            strlist_addf(&b16->good,
                         "what-if from %s: median update/weight ratio %.3g < 2^-8: weights stored in "
                         "BF16 would lose updates; BF16 autocast keeps FP32 master weights",
                         x->fwd_src->label, x->fwd_src->ratio_median);
        return;
    }
    int wl;
    double worst = worst_lost_layer(src, 1, &wl);
    if (src->lost_if[1] == 0) {
        strlist_addf(&b16->good,
                     "what-if from %s: no update would be lost with BF16 weights without FP32 "
                     "master weights (every non-zero update changes its weight in BF16)",
                     src->label);
        return;
    }
    pct(a, sizeof a, (double)src->lost_if[1] / (double)src->update_nonzero);
    pct(b, sizeof b, worst);
    strlist_addf(&b16->good,
                 "what-if from %s: %s of updates would be lost with BF16 weights without FP32 "
                 "master weights (fl(w + dw) == w in BF16; worst layer %s: %s)%s; BF16 "
                 "autocast keeps FP32 master weights",
                 src->label, a, wl >= 0 ? src->layers[wl].name : "?", b,
                 worst > LOST_MAX ? ": do not store the weights in BF16 (bf16-pure)" : "");
}

/* (b)8 Adam eps in FP16 optimizer state. Reads: each run's optimizer, optimizer-state format
 * and eps. Decides nothing: a warning when AdamW keeps FP16 state and eps <= FP16_UNDERFLOW_AT
 * (2^-25, rounds to 0: 0/0 on zero-gradient steps). */
static void rule_adam_eps(prec_ctx *x)
{
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (adam_eps_zero(r))
            strlist_addf(&x->R->warnings,
                         "%s: AdamW eps %g with FP16 optimizer state rounds to 0 (FP16 flushes |x| <= "
                         "2^-25): zero-gradient steps give 0/0 = NaN%s; use eps >= 1e-7 or FP32 state",
                         r->label, r->adam_eps, r->nan_values ? " (this run has NaN values)" : "");
    }
}

/* The islands as structured evidence: their names, parameter and GEMM-FLOP shares, and whether
 * the forward pass stays finite with them: an island's output that feeds a layer run in 16 bits
 * is rounded there as a GEMM operand, so it must stay below 65520 (from the run the islands were
 * read from). */
static void islands_describe(prec_ctx *x)
{
    recommendation *R = x->R;
    R->islands_param_share = R->islands_flop_share = NAN;
    R->islands_forward_finite = -1;
    const an_run *src = x->fwd_src;
    if (!x->islands[0] || !src)
        return;
    snprintf(R->islands, sizeof R->islands, "%s", x->islands);
    uint64_t lin = 0, lin_isl = 0;
    int finite = 1;
    for (size_t l = 0; l < src->nlayers; l++) {
        const an_layer *L = &src->layers[l];
        int isl = in_island_list(x->islands, L->name);
        if (strcmp(L->op, "linear") == 0) {
            lin += L->params;
            lin_isl += isl ? L->params : 0;
        }
        if (isl && l + 1 < src->nlayers && !src->layers[l + 1].fp32_op &&
            !in_island_list(x->islands, src->layers[l + 1].name) &&
            !(src->layers[l].cell[AMPDIAG_KIND_ACTIVATION].absmax < FP16_OVERFLOW_AT)) {
            finite = 0;
            strlist_addf(&R->fp16.issues, "FP32 islands %s would not keep the forward finite: %s's "
                         "output reaches %.4g, and %s rounds it to FP16 (>= 65520 is inf)",
                         x->islands, L->name, src->layers[l].cell[AMPDIAG_KIND_ACTIVATION].absmax,
                         src->layers[l + 1].name);
        }
    }
    R->islands_param_share = x->share;
    R->islands_flop_share = lin ? (double)lin_isl / (double)lin : NAN;
    R->islands_forward_finite = finite;
}

/* (b)7 Viability. Reads: what the rules above found. Decides: fp16/bf16 viable (supported,
 * not ruled out, not undecided); the islands' share of the parameters (of forward_source,
 * else the baseline); islands_ok: the forward overflow is the only thing against FP16 (no
 * gradient-range disqualifier), its islands are complete (from an FP32/BF16 trace) and hold
 * at most ISLAND_SHARE_MAX (half) of the parameters. */
static void rule_viability(prec_ctx *x)
{
    rec_format *f16 = &x->R->fp16, *b16 = &x->R->bf16;
    const rec_scale *S = &x->R->scale;
    const an_run *base = &x->runs[x->c->baseline];
    f16->viable = f16->supported && !f16->decisive && !x->undecided;
    b16->viable = b16->supported && !x->bf16_bad && !x->bf16_gap_bad && !x->undecided;
    x->share = base->params ? (double)x->island_params / (double)base->params : 1;
    if (x->fwd_src && x->fwd_src->params)
        x->share = (double)x->island_params / (double)x->fwd_src->params;
    int other_fp16 = S->have && x->range_decisive;
    islands_describe(x);
    x->islands_ok = x->fp16_fwd && !x->islands_partial && !other_fp16 && x->islands[0] &&
                    x->share <= ISLAND_SHARE_MAX && f16->supported && x->R->islands_forward_finite == 1;
}

/* ---- (b)7 The verdict: candidates in order of preference; the first whose condition holds
 * concludes (R->precision, R->verdict, R->why, predicted, fp32_layers) ---- */

/* The baseline does not train (rule_baseline_trains): undecided, fix the lr first. */
static int verdict_undecided_applies(const prec_ctx *x) { return x->undecided; }
static void verdict_undecided(prec_ctx *x)
{
    recommendation *R = x->R;
    R->precision = REC_UNDECIDED;
    if (failed_by_format(x->base))
        set_verdict(R, "undecided: the FP32 baseline does not train because its AdamW state is FP16 "
                    "(eps rounds to 0); keep the optimizer state in FP32 (--optim-state fp32) first");
    else
        set_verdict(R, "undecided: the FP32 baseline does not train; fix the learning rate first");
    if (!x->have_fp32)
        set_verdict(R, "undecided: every run fails; run FP32 or lower the learning rate first");
}

/* BF16 viable: bf16 (no scaler to tune, no skipped steps, FP32's exponent range); with FP32
 * master weights when a bf16-pure run lost updates; predicted when no bf16 run was given. */
static int verdict_bf16_applies(const prec_ctx *x) { return x->R->bf16.viable; }
static void verdict_bf16(prec_ctx *x)
{
    recommendation *R = x->R;
    const rec_format *f16 = &R->fp16, *b16 = &R->bf16;
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
                       : x->fwd_src  ? "; predicted from the FP32 trace: confirm with a bf16 run"
                                     : "; no bf16 run given: confirm with one";
    set_verdict(R, "bf16 (autocast with FP32 master weights)%s", pred);
    if (R->master_weights)
        set_verdict(R, "bf16 with FP32 master weights (not bf16-pure: its updates are lost)%s",
                    pred);
}

/* FP16 viable: fp16 + dynamic loss scaling with initial scale S (2^SCALE_INIT_LOG2 without
 * gradients), naming what flushes without scaling when a run showed it. */
static int verdict_fp16_applies(const prec_ctx *x) { return x->R->fp16.viable; }
static void verdict_fp16(prec_ctx *x)
{
    recommendation *R = x->R;
    const rec_format *f16 = &R->fp16;
    const rec_scale *S = &R->scale;
    char a[64], b[192], s1[32];
    R->precision = REC_FP16;
    strlist_addf(&R->why, "fp16 with dynamic loss scaling is healthy%s",
                 !R->bf16.supported ? "; the target has no BF16" : "; bf16 is ruled out (see bf16 below)");
    R->predicted = !f16->observed;
    rec_fmt_scale(a, sizeof a, ldexp(1.0, S->have ? S->log2 : SCALE_INIT_LOG2));
    b[0] = 0;
    if ((f16->needs_scaling & 1) && S->flushed1_layer >= 0) {
        pct(s1, sizeof s1, S->flushed1);
        snprintf(b, sizeof b, "; without it %s of %s", s1, x->runs[S->run].layers[S->flushed1_layer].name);
    }
    const char *what = !b[0] ? ""
                       : S->flushed1_kind == AMPDIAG_KIND_WEIGHT_GRAD
                           ? "'s weight gradients flush to zero"
                           : "'s activation gradients flush to zero";
    set_verdict(R, "fp16 + dynamic loss scaling, initial scale %s%s%s%s", a, b, what,
                R->predicted                ? " (predicted: confirm with an fp16 run)"
                : (f16->needs_scaling & 2) ? " (the fp16 run had none: confirm with one)"
                                           : "");
}

/* islands_ok (rule_viability): fp16 + dynamic loss scaling with the FP32 islands, predicted
 * (confirm with a --fp32-layers run) unless a healthy fp16 run with these islands was given. */
static int verdict_fp16_islands_applies(const prec_ctx *x) { return x->islands_ok; }
static void verdict_fp16_islands(prec_ctx *x)
{
    recommendation *R = x->R;
    const rec_scale *S = &R->scale;
    char a[64];
    R->precision = REC_FP16;
    strlist_addf(&R->why, "the forward overflow is confined to layers holding %.0f%% of the "
                 "parameters: keeping them in FP32 rescues fp16%s", 100 * x->share,
                 !R->bf16.supported ? " (the target has no BF16)" : " (bf16 is ruled out, see below)");
    /* an fp16 run with exactly these islands that is healthy confirms them */
    const an_run *h = x->fp16_islanded;
    int seen = h && strcmp(h->fp32_layers, x->islands) == 0;
    R->predicted = !seen;
    snprintf(R->fp32_layers, sizeof R->fp32_layers, "%s", x->islands);
    rec_fmt_scale(a, sizeof a, ldexp(1.0, S->have ? S->log2 : SCALE_INIT_LOG2));
    set_verdict(R, "fp16 + dynamic loss scaling (initial %s) with FP32 layers %s (--fp32-layers "
                "%s: %.0f%% of the parameters); %s%s",
                a, x->islands, x->islands, 100 * x->share, seen ? "confirmed by " : "confirm with a run",
                seen ? h->label : "");
}

/* (b)6(iii) BF16 supported and ruled out only by its loss gap: bf16 with FP32 layers, the
 * (up to DEV_ISLAND_LAYERS) layers of the first bf16 run whose activations deviate by at
 * least DEV_ISLAND (5%) from the baseline; with none, fp32. */
static int verdict_bf16_islands_applies(const prec_ctx *x)
{
    return x->R->bf16.supported && !x->bf16_bad && x->bf16_gap_bad;
}
static void verdict_bf16_islands(prec_ctx *x)
{
    recommendation *R = x->R;
    const an_comparison *c = x->c;
    char dl[256] = "", a[64];
    for (size_t i = 0; i < x->n; i++) {
        if (!is_prec(&x->runs[i], PREC_BF16) || !c->dev || !c->dev[i])
            continue;
        for (size_t k = 0; k < c->ndev[i] && k < DEV_ISLAND_LAYERS; k++)
            if (c->dev[i][k].rel >= DEV_ISLAND)
                append_name(dl, sizeof dl, x->runs[i].layers[c->dev[i][k].layer].name);
        if (dl[0]) {
            pct(a, sizeof a, c->dev[i][0].rel);
            strlist_addf(&R->why, "%s deviates most from %s: %s activations differ by %s (median "
                         "over %zu steps), far above BF16's unit roundoff 0.39%%",
                         x->runs[i].label, x->base->label, x->runs[i].layers[c->dev[i][0].layer].name,
                         a, c->dev[i][0].n);
        }
        break;
    }
    if (dl[0]) {
        R->precision = REC_BF16;
        R->predicted = 1;
        snprintf(R->fp32_layers, sizeof R->fp32_layers, "%s", dl);
        set_verdict(R, "bf16 with FP32 layers %s (--fp32-layers %s); confirm with a run", dl, dl);
    } else {
        R->precision = REC_FP32;
        set_verdict(R, "fp32: bf16 misses the FP32 loss and fp16 is ruled out");
    }
}

/* Otherwise fp32, saying why (no BF16 on the target, the islands FP16 would need). */
static int verdict_fp32_applies(const prec_ctx *x) { (void)x; return 1; }
static void verdict_fp32(prec_ctx *x)
{
    recommendation *R = x->R;
    const char *tgt = rec_target_name(R->target);
    R->precision = REC_FP32;
    if (!R->bf16.supported && x->fp16_fwd && x->islands[0] && x->islands_partial)
        set_verdict(R, "fp32 (target %s has no BF16 and FP16 overflows in the forward pass from "
                    "%s; an FP32 trace would show whether FP32 islands can rescue it)",
                    tgt, x->islands);
    else if (!R->bf16.supported && x->fp16_fwd && x->islands[0])
        set_verdict(R, "fp32 (target %s has no BF16, and FP32 islands for FP16 would cover "
                    "%.0f%% of the parameters: %s)", tgt, 100 * x->share, x->islands);
    else if (!R->bf16.supported)
        set_verdict(R, "fp32 (target %s has no BF16 and FP16 is ruled out)", tgt);
    else
        set_verdict(R, "fp32 (both 16-bit formats are ruled out)");
}

typedef struct verdict_rule {
    int (*applies)(const prec_ctx *);
    void (*conclude)(prec_ctx *);
} verdict_rule;

static const verdict_rule verdict_rules[] = {
    {verdict_undecided_applies, verdict_undecided},
    {verdict_bf16_applies, verdict_bf16},
    {verdict_fp16_applies, verdict_fp16},
    {verdict_fp16_islands_applies, verdict_fp16_islands},
    {verdict_bf16_islands_applies, verdict_bf16_islands},
    {verdict_fp32_applies, verdict_fp32},
};

/* (b)7 The verdict: the first of verdict_rules[] that applies. */
static void rule_verdict(prec_ctx *x)
{
    for (size_t k = 0; k < NELEM(verdict_rules); k++)
        if (verdict_rules[k].applies(x)) {
            verdict_rules[k].conclude(x);
            return;
        }
}

/* (b)8 Island warning (not when undecided). Reads: the islands and the verdict. Decides
 * nothing: names the FP32 islands that would let FP16 run when the verdict is not fp16 (or
 * only the first overflowing layer, known from an FP16 run), and says "no rescue" above
 * ISLAND_SHARE_MAX of the parameters. */
static void rule_island_warning(prec_ctx *x)
{
    recommendation *R = x->R;
    if (x->undecided || !x->fp16_fwd || !x->islands[0] || !R->fp16.supported)
        return;
    if (x->islands_partial)
        strlist_addf(&R->warnings,
                     "FP32 islands for FP16: at least %s (the first layer to overflow); an FP32 trace "
                     "shows which layers after it overflow too", x->islands);
    else if (R->precision != REC_FP16)
        strlist_addf(&R->warnings,
                     "FP32 islands that would let FP16 run: --fp32-layers %s (%.0f%% of the "
                     "parameters%s)", x->islands, 100 * x->share,
                     x->share > ISLAND_SHARE_MAX ? ": most of the model, no rescue" : "");
}

/* Why a baseline does not learn, when its numbers say: steps too small (steps_too_small: the
 * ratio and the updates lost even in FP32) or dead units; "" otherwise. */
static void flat_cause(const an_run *b, char *buf, size_t n)
{
    char a[32], lost[96] = "";
    if (isfinite(b->find->lost_fraction) && b->find->lost_fraction > LOST_MAX) {
        pct(a, sizeof a, b->find->lost_fraction);
        snprintf(lost, sizeof lost, "; %s of its updates round away even in FP32 weights", a);
    }
    if (steps_too_small(b))
        snprintf(buf, n, "; the cause: its steps are too small (update/weight ratio %.3g, target "
                 "~1e-3%s): the lr is too low", run_ratio(b), lost);
    else if (dead_units(b))
        snprintf(buf, n, "; the cause: units died (%s's weight gradients are mostly 0): the lr is too "
                 "high", b->layers[b->find->zero_grad_layer].name);
    else
        snprintf(buf, n, "%s", "");
}

/* Baseline sanity, first: runs of another model or data set than the baseline's (their gaps
 * mix that difference with the precision), and an FP32 baseline that trains without failing
 * but does not learn (nothing to hold the 16-bit runs against: undecided). */
static void rule_baseline_sanity(prec_ctx *x)
{
    const an_run *b = x->base;
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (strcmp(r->model, b->model))
            strlist_addf(&x->R->why, "first: %s is a run of model '%s', the baseline %s of '%s': "
                         "its comparison mixes the model difference with the precision",
                         r->label, r->model, b->label, b->model);
        if (strcmp(r->data, b->data))
            strlist_addf(&x->R->why, "first: %s ran on data '%s', the baseline %s on '%s': their "
                         "losses are not comparable", r->label, r->data, b->label, b->data);
    }
    if (x->have_fp32 && learns_nothing(b)) {
        x->baseline_flat = 1;
        char cause[256] = "";
        flat_cause(b, cause, sizeof cause);
        strlist_addf(&x->R->why, "first: the FP32 baseline %s does not learn: its final training "
                     "loss %.4g is not below %.0f%% of its first, %.4g%s%s; a 16-bit run that matches "
                     "it shows little: the format findings below hold for these values, but fix the "
                     "training first (see LR)", b->label, b->tail_mean, 100 * FLAT_FRACTION, b->loss_first,
                     b->find->last_eval && b->find->eval_is_accuracy ? " (its eval accuracy is chance-level or "
                                                                     "close)" : "", cause);
    }
}

/* Causes ranked: a run that failed by a format cause no lr or island fixes (AdamW eps 0 in FP16
 * state) is named in the verdict line itself, with its remedy, unless the baseline's failure
 * already made it the verdict. */
static void rule_cause_first(prec_ctx *x)
{
    if (x->baseline_flat) {
        size_t len = strlen(x->R->verdict);
        const char *why = steps_too_small(x->base) ? ": its lr is too low (see LR)"
                          : dead_units(x->base)      ? ": its units died, the lr is too high (see LR)"
                                                     : "";
        snprintf(x->R->verdict + len, sizeof x->R->verdict - len, "; first: the FP32 baseline %s "
                 "does not learn (its loss stays near its first value)%s, fix the training first",
                 x->base->label, why);
    }
    if (x->eval_run) {
        char where[160];
        eval_where(x->eval_run, where, sizeof where);
        size_t len = strlen(x->R->verdict);
        snprintf(x->R->verdict + len, sizeof x->R->verdict - len, "; first cause of %s's NaN: its "
                 "evaluation overflows %s%s%s%s while its training stays finite (validation inputs "
                 "beyond the training range)", x->eval_run->label, is_prec(x->eval_run, PREC_FP16) ? "FP16" : "BF16",
                 where[0] ? " (" : "", where, where[0] ? ")" : "");
    }
    if (failed_by_format(x->base))
        return;
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (!adam_eps_zero(r) || !(run_failed(r) || r->nan_values))
            continue;
        size_t len = strlen(x->R->verdict);
        snprintf(x->R->verdict + len, sizeof x->R->verdict - len, "; first cause of %s's NaN: its "
                 "AdamW state is FP16, where eps %g is 0 (use --optim-state fp32)", r->label,
                 r->adam_eps);
        return;
    }
}

typedef void (*prec_rule)(prec_ctx *);

/* The precision rules (b), in the order they run; each reads what the ones before found. */
static const prec_rule precision_rules[] = {
    rule_target_gate,         /* (b)2 */
    rule_baseline_trains,     /* (b)1 */
    rule_baseline_sanity,     /* (b)1: different model/data, a baseline that does not learn */
    rule_forward_overflow,    /* (b)3 */
    rule_forward_headroom,    /* (b)8 */
    rule_fp16_runs,           /* (b)4 */
    rule_gradient_range,      /* (b)5 */
    rule_bf16_runs,           /* (b)6 (i)-(iii) */
    rule_bf16_range,          /* (b)6 (iv) */
    rule_bf16_weights_whatif, /* (b)6 (v) */
    rule_adam_eps,            /* (b)8 */
    rule_viability,           /* (b)7 */
    rule_verdict,             /* (b)7 */
    rule_island_warning,      /* (b)8 */
    rule_cause_first,         /* causes ranked: a format cause names itself in the verdict */
};

static void run_precision_rules(const an_run *runs, size_t n, const an_comparison *c,
                                recommendation *R)
{
    prec_ctx x;
    memset(&x, 0, sizeof x);
    x.runs = runs;
    x.n = n;
    x.c = c;
    x.R = R;
    x.base = &runs[c->baseline];
    x.have_fp32 = c->baseline_is_fp32;
    for (size_t k = 0; k < NELEM(precision_rules); k++)
        precision_rules[k](&x);
}

/* ------------------------------------------------------------------------------------------
 * Learning rate (d). The rules run in order until one returns 1 (the lr is settled).
 * ------------------------------------------------------------------------------------------ */

typedef struct lr_ctx {
    const an_run *runs;
    size_t n;
    const an_comparison *c;
    recommendation *R;
    const an_run *base;
    double ratio;       /* the baseline's median update/weight ratio, else its steps' median */
    int layers_n;       /* the baseline's layers with a ratio */
    const an_run *pure; /* the last run storing weights in 16 bits with a ratio below 2^-8 */
} lr_ctx;

/* A run's final metric: its last eval loss (inf when not finite), else its final-window mean. */
static double final_metric(const an_run *r)
{
    if (r->nevals && isfinite(r->evals[r->nevals - 1].loss))
        return r->evals[r->nevals - 1].loss;
    if (r->nevals)
        return INFINITY;
    return r->tail_mean;
}

/* The distinct finite learning rates of the runs, in order (at most max). */
static size_t distinct_lrs(const an_run *runs, size_t n, double *lrs, size_t max)
{
    size_t nlr = 0;
    for (size_t i = 0; i < n && nlr < max; i++) {
        int seen = 0;
        for (size_t j = 0; j < nlr; j++)
            seen |= lr_eq(lrs[j], runs[i].lr);
        if (!seen && isfinite(runs[i].lr))
            lrs[nlr++] = runs[i].lr;
    }
    return nlr;
}

/* One learning rate of a sweep: the runs of the baseline's precision at lr. Adds a line (the
 * step a run fails from, else the best final metric); *m = that metric, *fails = runs that
 * fail. Returns 0 when no such run. */
static int lr_sweep_point(lr_ctx *x, double lr, double *m, int *fails)
{
    const an_run *base = x->base;
    int cnt = 0;
    int64_t div = -1;
    *m = INFINITY;
    *fails = 0;
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (!lr_eq(r->lr, lr) || r->prec != base->prec || strcmp(r->precision, base->precision))
            continue;
        cnt++;
        if (run_failed(r)) {
            (*fails)++;
            div = r->diverged ? r->divergence_step : r->first_nonfinite_loss_step;
        } else if (final_metric(r) < *m) {
            *m = final_metric(r);
        }
    }
    if (!cnt)
        return 0;
    if (*fails)
        strlist_addf(&x->R->lr_why, "lr %g: %s %s from step %" PRId64, lr, base->precision,
                     "diverges", div);
    else
        strlist_addf(&x->R->lr_why, "lr %g: %s final loss %.4g", lr, base->precision, *m);
    return 1;
}

/* (d)1 A sweep over learning rates. Reads: runs of the baseline's precision at two or more
 * learning rates (lr_sweep_point). Decides: LR_PICK, the lr with the lowest final metric
 * among those where no run fails. */
static int lr_rule_sweep(lr_ctx *x)
{
    recommendation *R = x->R;
    double lrs[LR_SWEEP_MAX];
    size_t nlr = distinct_lrs(x->runs, x->n, lrs, LR_SWEEP_MAX);
    if (nlr <= 1)
        return 0;
    double best = INFINITY, best_lr = NAN;
    for (size_t j = 0; j < nlr; j++) {
        double m;
        int fails;
        if (lr_sweep_point(x, lrs[j], &m, &fails) && !fails && m < best) {
            best = m;
            best_lr = lrs[j];
        }
    }
    if (isnan(best_lr))
        return 0;
    R->lr = LR_PICK;
    R->lr_suggested = best_lr;
    R->lr_factor = isfinite(x->base->lr) && x->base->lr > 0 ? best_lr / x->base->lr : NAN;
    snprintf(R->lr_line, sizeof R->lr_line, "use %g: the lowest final %s loss among the learning "
             "rates tried (%.4g)", best_lr, x->base->precision, best);
    return 1;
}

/* The step a failed run fails from, and how ("diverges" / "has a non-finite loss"). */
/* Index in r->steps of step (or the last before it); -1 when none. */
static long lr_step_index(const an_run *r, int64_t step)
{
    long k = -1;
    for (size_t i = 0; i < r->nsteps && r->steps[i].step <= step; i++)
        k = (long)i;
    return k;
}

static int64_t fail_step(const an_run *r) { return r->diverged ? r->divergence_step : r->first_nonfinite_loss_step; }
static const char *fail_how(const an_run *r) { return r->diverged ? "diverges" : "has a non-finite loss"; }

/* (d)2 Divergence that is not the format's: the FP32 baseline fails, or every run does
 * (every_run_fails). Decides: LR_LOWER by max(LR_LOWER_MIN, RATIO_TARGET / r) when the ratio r
 * is above RATIO_HIGH (1e-2), else by LR_STEP (0.5) with a longer warm-up; lists each failing
 * run. */
/* (d)2a A baseline (or every run) that fails by a format cause (Adam eps in FP16 state): no lr
 * advice, the format first. Decides LR_UNKNOWN and stops the lr rules. */
static int lr_rule_format_first(lr_ctx *x)
{
    const an_run *b = x->base;
    if (!failed_by_format(b))
        return 0;
    x->R->lr = LR_UNKNOWN;
    strlist_addf(&x->R->lr_why, "%s fails because AdamW's eps %g is 0 in its FP16 optimizer state "
                 "(0/0 = NaN on zero gradients), not because of the lr: no lr advice until the "
                 "state is FP32 (--optim-state fp32)", b->label, b->adam_eps);
    snprintf(x->R->lr_line, sizeof x->R->lr_line, "no advice: fix the optimizer state's format "
             "first (--optim-state fp32)");
    return 1;
}

static int lr_rule_divergence(lr_ctx *x)
{
    recommendation *R = x->R;
    const an_run *base = x->base;
    double r = x->ratio;
    if (!((x->c->baseline_is_fp32 && run_failed(base)) || every_run_fails(x->runs, x->n)))
        return 0;
    for (size_t i = 0; i < x->n; i++)
        if (run_failed(&x->runs[i]))
            strlist_addf(&R->lr_why, "%s %s from step %" PRId64, x->runs[i].label,
                         fail_how(&x->runs[i]), fail_step(&x->runs[i]));
    R->lr = LR_LOWER;
    if (isfinite(r) && r > RATIO_HIGH) {
        /* below where the instability began, by as much as the ratio says: not capped at 10x */
        R->lr_factor = fmax(LR_DIVERGE_MIN, fmin(LR_STEP, RATIO_TARGET / r));
        strlist_addf(&R->lr_why, "median update/weight ratio %.3g in %s (target ~1e-3): lr x "
                     "min(0.5, 1e-3 / %.3g) = x%.3g", r, base->label, r, R->lr_factor);
    } else {
        R->lr_factor = LR_STEP;
        strlist_addf(&R->lr_why, "the same in every precision, so not a format limit: lr x 0.5 "
                     "and a longer warm-up (>= 2k steps for large models), a heuristic step");
    }
    /* a schedule that was still warming up when the run broke: below the lr it had reached */
    int64_t at = fail_step(base);
    long k = at >= 0 ? lr_step_index(base, at) : -1;
    if (k >= 0 && isfinite(base->steps[k].lr) && base->steps[k].lr > 0 &&
        base->steps[k].lr * LR_STEP < base->lr * R->lr_factor) {
        R->lr_factor = base->steps[k].lr * LR_STEP / base->lr;
        strlist_addf(&R->lr_why, "the instability began at step %" PRId64 " with lr %.3g (warm-up): "
                     "lr x 0.5 of that = x%.3g of the peak", at, base->steps[k].lr, R->lr_factor);
    }
    R->lr_suggested = base->lr * R->lr_factor;
    snprintf(R->lr_line, sizeof R->lr_line, "lower to %.3g (x%.3g): training diverges in %s",
             R->lr_suggested, R->lr_factor, x->c->baseline_is_fp32 ? "FP32 too" : "every run");
    return 1;
}

/* (d)6 Format-caused failures. Reads: runs that fail while the baseline trains. Decides
 * nothing: says to fix the precision first (from the first step's forward pass, or "while
 * the baseline trains"). */
static int lr_rule_format_caused(lr_ctx *x)
{
    for (size_t i = 0; i < x->n; i++) {
        const an_run *r = &x->runs[i];
        if (!run_failed(r))
            continue;
        if (failed_from_start(r))
            strlist_addf(&x->R->lr_why, "%s %s from step %" PRId64 ", with NaN/inf in the forward pass "
                         "of its first step, before any update: format-caused, fix the precision "
                         "first, not the lr", r->label, fail_how(r), fail_step(r));
        else
            strlist_addf(&x->R->lr_why, "%s %s from step %" PRId64 " while %s trains: format-caused, fix "
                         "the precision first, not the lr", r->label, fail_how(r), fail_step(r),
                         x->base->label);
    }
    return 0;
}

/* (d)2b Dead units. Reads: the baseline's final-window loss against its first, and the largest
 * share of a layer's weight-gradient values that are exactly 0 (findings). Decides: a run with
 * dead_units (ReLUs pushed below zero for every example by too large a step): the lr is too
 * high, LR_LOWER x LR_DEAD_FACTOR, never "raise" (the tiny update/weight ratio there is zero
 * gradients, not a small lr). */
static int lr_rule_dead_units(lr_ctx *x)
{
    recommendation *R = x->R;
    const an_run *b = x->base;
    const an_findings *f = b->find;
    if (!dead_units(b))
        return 0;
    char a[32];
    pct(a, sizeof a, f->zero_grad_fraction);
    R->lr = LR_LOWER;
    R->lr_factor = LR_DEAD_FACTOR;
    R->lr_suggested = b->lr * R->lr_factor;
    strlist_addf(&R->lr_why, "%s does not learn: its final training loss %.4g is not below %.0f%% "
                 "of its first, %.4g (the loss of predicting the class prior), and %s of %s's "
                 "weight-gradient values are exactly 0: units died (too large a step pushed them "
                 "below zero for every example): the lr is too high, never too low; lr x %.1f",
                 b->label, b->tail_mean, 100 * LEARNED_FRACTION, b->loss_first, a,
                 b->layers[f->zero_grad_layer].name, LR_DEAD_FACTOR);
    snprintf(R->lr_line, sizeof R->lr_line, "lower to %.3g (x%.3g): units died and the loss stays "
             "at its first value", R->lr_suggested, R->lr_factor);
    return 1;
}

/* No update/weight ratio in the baseline: LR_UNKNOWN. */
static int lr_rule_no_ratio(lr_ctx *x)
{
    if (isfinite(x->ratio))
        return 0;
    x->R->lr = LR_UNKNOWN;
    snprintf(x->R->lr_line, sizeof x->R->lr_line, "no update/weight ratios recorded in %s: no lr advice",
             x->base->label);
    return 1;
}

/* (d)3a Steps too small. Reads: the baseline's final-window loss against its first, its ratio r
 * and its lost updates (steps_too_small: it neither learns nor fails, no dead units, r <
 * RATIO_TARGET 1e-3). Decides: LR_RAISE x min(LR_RAISE_MAX 10, 1e-3 / r); for a baseline that
 * does not learn at all (learns_nothing) x min(LR_RAISE_FLAT_MAX 1000, 1e-3 / r): its weights
 * are still where they started, so r grows in proportion to the lr and 1e-3 / r is a
 * measurement, not a step in the dark. Not with a run storing weights in 16 bits below 2^-8
 * (x->pure: lr_rule_master_weights). Does not settle; lr_rule_ratio leaves the lr it set. */
static int lr_rule_too_low(lr_ctx *x)
{
    recommendation *R = x->R;
    const an_run *b = x->base;
    double r = x->ratio;
    if (x->pure || !steps_too_small(b))
        return 0;
    int flat = learns_nothing(b);
    double cap = flat ? LR_RAISE_FLAT_MAX : LR_RAISE_MAX;
    char lost[128] = "", a[32];
    if (isfinite(b->find->lost_fraction) && b->find->lost_fraction > LOST_MAX) {
        pct(a, sizeof a, b->find->lost_fraction);
        snprintf(lost, sizeof lost, ", and %s of its non-zero updates round away even in its FP32 "
                 "weights (fl(w + dw) == w)", a);
    }
    R->lr = LR_RAISE;
    R->lr_factor = fmin(cap, RATIO_TARGET / r);
    strlist_addf(&R->lr_why, "%s does not learn%s: its final training loss %.4g is not below %.0f%% "
                 "of its first, %.4g; its update/weight ratio %.3g is below the ~1e-3 target%s: the "
                 "lr is too low, not too high; %slr x min(%g, 1e-3/%.3g) = x%.3g", b->label,
                 flat ? " at all" : " enough", b->tail_mean, 100 * (flat ? FLAT_FRACTION : LEARNED_FRACTION),
                 b->loss_first, r, lost,
                 flat ? "its weights have hardly moved, so the ratio grows in proportion to the lr: " : "",
                 cap, r, R->lr_factor);
    return 0;
}

/* (d)3 Update/weight ratio r and (d)5 loss spikes. Reads: the baseline's ratio and loss
 * spikes. Decides: r > RATIO_HIGH (1e-2): LR_LOWER x max(LR_LOWER_MIN, RATIO_TARGET / r);
 * r < RATIO_LOW (1e-4) and no 16-bit-weights run below 2^-8: LR_RAISE x min(LR_RAISE_MAX,
 * RATIO_TARGET / r); more than SPIKE_RATE_MAX (1 per 1000 steps, at least SPIKE_MIN_COUNT)
 * loss spikes: LR_LOWER x LR_STEP; else LR_KEEP. */
static int lr_rule_ratio(lr_ctx *x)
{
    recommendation *R = x->R;
    const an_run *base = x->base;
    double r = x->ratio;
    char a[64];
    snprintf(a, sizeof a, "%s over %d layers", x->layers_n ? "median of the per-layer medians" : "median "
             "of the steps' ratios", x->layers_n);
    double steps = (double)base->nsteps;
    int spiky = base->loss_spikes >= SPIKE_MIN_COUNT && steps > 0 &&
                (double)base->loss_spikes / steps > SPIKE_RATE_MAX;
    int healthy = learned(base) && !run_failed(base) && !spiky;
    if (R->lr != LR_UNKNOWN)
        return 0; /* lr_rule_too_low decided */
    if (healthy && (r <= RATIO_STRONG && (r >= RATIO_LOW || x->pure))) {
        /* one healthy run: keep unless the evidence is strong; the 1e-4..1e-2 band is a rule
         * of thumb that a run which trains without spikes outweighs */
        R->lr = LR_KEEP;
        strlist_addf(&R->lr_why, "%s trains (final loss %.4g from %.4g) without loss spikes: keep "
                     "the lr; its update/weight ratio %.3g (%s; target ~1e-3)%s", base->label, base->tail_mean,
                     base->loss_first, r, a,
                     r > RATIO_HIGH ? " is above the 1e-2 rule of thumb, not enough to change a "
                                      "run that trains (a sweep, ampdiag sweep --lrs, would show a "
                                      "better one)"
                                    : " is within 1e-4..1e-2");
    } else if (r > RATIO_HIGH) {
        R->lr = LR_LOWER;
        R->lr_factor = fmax(LR_LOWER_MIN, RATIO_TARGET / r);
        strlist_addf(&R->lr_why, "update/weight ratio %.3g (%s) in %s is above 1e-2 (target ~1e-3): "
                     "lr x max(0.1, 1e-3/%.3g) = x%.3g", r, a, base->label, r, R->lr_factor);
    } else if (r < RATIO_LOW && !x->pure) {
        R->lr = LR_RAISE;
        R->lr_factor = fmin(LR_RAISE_MAX, RATIO_TARGET / r);
        strlist_addf(&R->lr_why, "update/weight ratio %.3g (%s) in %s is below 1e-4 (target ~1e-3): "
                     "lr x min(10, 1e-3/%.3g) = x%.3g", r, a, base->label, r, R->lr_factor);
    } else if (spiky) {
        R->lr = LR_LOWER;
        R->lr_factor = LR_STEP;
        strlist_addf(&R->lr_why, "%zu loss spikes in %zu steps of %s (more than 1 per 1000; first at "
                     "step %" PRId64 "): lr x 0.5 and/or a longer warm-up (heuristic)",
                     base->loss_spikes, base->nsteps, base->label, base->spike_steps[0]);
    } else {
        R->lr = LR_KEEP;
        strlist_addf(&R->lr_why, "update/weight ratio %.3g (%s) in %s, within 1e-4..1e-2 (target "
                     "~1e-3); %zu loss spikes", r, a, base->label, base->loss_spikes);
    }
    return 0;
}

/* (d)4 Precision interplay. Reads: a run storing weights in 16 bits whose median ratio is
 * below SWAMP_BF16 (2^-8). Decides: the lr is not raised to beat the rounding;
 * LR_KEEP_MASTER (x1, use FP32 master weights) unless the lr is to be lowered. */
static int lr_rule_master_weights(lr_ctx *x)
{
    recommendation *R = x->R;
    if (!x->pure || !(R->lr == LR_RAISE || x->ratio < SWAMP_BF16))
        return 0;
    strlist_addf(&R->lr_why, "%s stores weights in BF16 and its median update/weight ratio "
                 "%.3g is below 2^-8: do not raise the lr to push updates over the rounding "
                 "threshold; keep FP32 master weights (or Kahan summation / stochastic "
                 "rounding)", x->pure->label, x->pure->ratio_median);
    if (R->lr != LR_LOWER) {
        R->lr = LR_KEEP_MASTER;
        R->lr_factor = 1;
    }
    return 0;
}

/* The suggested lr and its one-line summary from the verdict above. */
static int lr_rule_line(lr_ctx *x)
{
    recommendation *R = x->R;
    double lr = x->base->lr;
    R->lr_suggested = lr * R->lr_factor;
    switch (R->lr) {
    case LR_KEEP:
        snprintf(R->lr_line, sizeof R->lr_line, "keep %g", lr);
        break;
    case LR_KEEP_MASTER:
        snprintf(R->lr_line, sizeof R->lr_line, "keep %g and use FP32 master weights (do not raise it "
                 "to beat BF16 rounding)", lr);
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
    return 1;
}

typedef int (*lr_rule)(lr_ctx *);
static const lr_rule lr_rules[] = {
    lr_rule_sweep, lr_rule_format_first, lr_rule_divergence, lr_rule_format_caused, lr_rule_dead_units,
    lr_rule_no_ratio, lr_rule_too_low, lr_rule_ratio, lr_rule_master_weights, lr_rule_line,
};

static void run_lr_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R)
{
    lr_ctx x = {runs, n, c, R, &runs[c->baseline], NAN, 0, NULL};
    const an_run *base = x.base;
    R->lr_current = base->lr;
    R->lr_factor = 1;
    R->lr_suggested = base->lr;
    x.ratio = run_ratio(base);
    for (size_t l = 0; l < base->nlayers; l++)
        x.layers_n += base->layers[l].ratio_n > 0;
    for (size_t i = 0; i < n; i++)
        if (runs[i].weights_16bit && isfinite(runs[i].ratio_median) && runs[i].ratio_median < SWAMP_BF16)
            x.pure = &runs[i];
    for (size_t k = 0; k < NELEM(lr_rules); k++)
        if (lr_rules[k](&x))
            return;
}

/* ------------------------------------------------------------------------------------------
 * Clip (c)
 * ------------------------------------------------------------------------------------------ */

/* AutoClip alternative: P10 of the history (clips ~90% of steps). */
static void clip_note_autoclip(const an_run *r, recommendation *R)
{
    strlist_addf(&R->clip_why, "AutoClip alternative: P10 = %.3g (clips ~90%% of steps, smoothing "
                 "rather than guarding spikes)", r->gn.p10);
}

/* The transformer prior 1.0 against the median norm: never fires below CLIP_PRIOR_NEVER (0.1),
 * clips every step above CLIP_PRIOR_ALWAYS (10). */
static void clip_note_prior(const an_run *r, recommendation *R)
{
    const an_clip *k = &r->gn;
    if (k->median < CLIP_PRIOR_NEVER)
        strlist_addf(&R->clip_why, "the common transformer prior of 1.0 would never fire here (median "
                     "norm %.3g)", k->median);
    else if (k->median > CLIP_PRIOR_ALWAYS)
        strlist_addf(&R->clip_why, "the common transformer prior of 1.0 would clip every step here "
                     "(median norm %.3g)", k->median);
}

/* Drift: the median of the last 10% of the history differs by more than CLIP_DRIFT (2x) from
 * the first 10%'s: a fixed clip goes stale (ZClip or AutoClip). */
static void clip_note_drift(const an_run *r, recommendation *R)
{
    const an_clip *k = &r->gn;
    if (isfinite(k->median_first) && isfinite(k->median_last) && k->median_first > 0 &&
        (k->median_last / k->median_first > CLIP_DRIFT ||
         k->median_last / k->median_first < 1.0 / CLIP_DRIFT))
        strlist_addf(&R->clip_why, "the norm drifts (median %.3g in the first 10%% of the history, %.3g "
                     "in the last 10%%): a fixed clip goes stale; consider ZClip (alpha 0.97, z 2.5) or "
                     "AutoClip", k->median_first, k->median_last);
}

/* A gradient-norm spike (>= 10x the rolling median, found by the analysis) followed by a loss
 * spike: PaLM's rewind-and-skip mitigation. */
static void clip_note_spike(const an_run *r, recommendation *R)
{
    const an_clip *k = &r->gn;
    if (k->norm_spike_step >= 0)
        strlist_addf(&R->clip_why, "a gradient-norm spike %.3gx the rolling median at step %" PRId64
                     " is followed by a loss spike at step %" PRId64 ": besides clipping, rewind ~100 "
                     "steps and skip 200-500 batches (PaLM)", k->norm_spike_ratio, k->norm_spike_step,
                     k->norm_spike_loss_step);
}

/* A run that clipped: at what value and how many steps. */
static void clip_note_clipped(const an_run *r, recommendation *R)
{
    if (r->clip > 0)
        strlist_addf(&R->clip_why, "%s clipped at %g: %zu steps clipped", r->label, r->clip,
                     r->gn.actually_clipped);
}

typedef void (*clip_note)(const an_run *, recommendation *);
static const clip_note clip_notes[] = {
    clip_note_autoclip, clip_note_prior, clip_note_drift, clip_note_spike, clip_note_clipped,
};

/* (c) Clip value. Reads: the baseline's unscaled, finite, pre-clip gradient norms after the
 * warm-up (an_clip). Decides: with at least CLIP_MIN_NORMS (20), clip = max(P99, median + 3 *
 * 1.4826 * MAD), the fraction and first steps it would clip; then clip_notes[]. */
static void run_clip_rules(const an_run *runs, const an_comparison *c, recommendation *R)
{
    const an_run *r = &runs[c->baseline];
    const an_clip *k = &r->gn;
    if (k->n < CLIP_MIN_NORMS || !isfinite(k->value)) {
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
    for (size_t j = 0; j < NELEM(clip_notes); j++)
        clip_notes[j](r, R);
}

/* ------------------------------------------------------------------------------------------
 * Remedies: the options of `ampdiag run` that the advice names, each with the runs it applies
 * to (ampdiag tune applies them, re-runs and verifies). remedy_rules[] run after the precision
 * rules, in order.
 * ------------------------------------------------------------------------------------------ */

/* Add a remedy (at most REC_MAX_REMEDIES; a later one for the same option is dropped). */
static void remedy_add(recommendation *R, rec_scope scope, const char *option, const char *value,
                       const char *why)
{
    for (size_t i = 0; i < R->nremedies; i++)
        if (strcmp(R->remedies[i].option, option) == 0)
            return;
    if (R->nremedies >= REC_MAX_REMEDIES)
        return;
    rec_remedy *m = &R->remedies[R->nremedies++];
    m->scope = scope;
    snprintf(m->option, sizeof m->option, "%s", option);
    snprintf(m->value, sizeof m->value, "%s", value);
    snprintf(m->why, sizeof m->why, "%s", why);
}

/* A run whose AdamW eps rounds to 0 in its FP16 optimizer state (adam_eps_zero, rule_adam_eps,
 * rule_cause_first): --optim-state fp32 for every run (the FP32 baseline's state too). */
static void remedy_optim_state(const an_run *runs, size_t n, recommendation *R)
{
    for (size_t i = 0; i < n; i++)
        if (adam_eps_zero(&runs[i])) {
            char why[192];
            snprintf(why, sizeof why, "AdamW eps %g rounds to 0 in FP16 optimizer state (0/0 = NaN on "
                     "zero gradients)", runs[i].adam_eps);
            remedy_add(R, REM_EVERY_RUN, "--optim-state", "fp32", why);
            return;
        }
}

/* A verdict that keeps layers in FP32 (verdict_fp16_islands, verdict_bf16_islands):
 * --fp32-layers for the recommended precision's run. */
static void remedy_islands(const an_run *runs, size_t n, recommendation *R)
{
    (void)runs;
    (void)n;
    if (R->fp32_layers[0] && R->precision != REC_UNDECIDED && R->precision != REC_FP32)
        remedy_add(R, REM_RECOMMENDED, "--fp32-layers", R->fp32_layers,
                   "FP32 islands named by the verdict");
}

/* An fp16 verdict (fp16 + dynamic loss scaling, initial scale S) where no fp16 run at the
 * baseline's lr scaled dynamically (a run without scaling, or with a static scale, or none
 * run): --loss-scale dynamic --scale-init S for the fp16 run. An fp16 run that scaled
 * dynamically is the evidence the verdict rests on: no remedy. */
static void remedy_loss_scale(const an_run *runs, size_t n, recommendation *R)
{
    if (R->precision != REC_FP16)
        return;
    const an_run *b = &runs[R->ref];
    for (size_t i = 0; i < n; i++)
        if (is_prec(&runs[i], PREC_FP16) && lr_eq(runs[i].lr, b->lr) &&
            strcmp(runs[i].loss_scale_mode, "dynamic") == 0)
            return;
    char v[64], why[192];
    int k = R->scale.have ? R->scale.log2 : SCALE_INIT_LOG2;
    snprintf(v, sizeof v, "%.17g", ldexp(1.0, k));
    snprintf(why, sizeof why, "the fp16 verdict needs dynamic loss scaling, initial scale 2^%d%s", k,
             R->fp16.needs_scaling & 1 ? " (gradients flush to zero without it)" : "");
    remedy_add(R, REM_RECOMMENDED, "--loss-scale", "dynamic", why);
    remedy_add(R, REM_RECOMMENDED, "--scale-init", v, why);
}

typedef void (*remedy_rule)(const an_run *, size_t, recommendation *);
static const remedy_rule remedy_rules[] = {remedy_optim_state, remedy_islands, remedy_loss_scale};

/* ------------------------------------------------------------------------------------------
 * --fail-on: each check looks at one run and returns 1 (with a line in why) when its
 * condition holds; recorded in fail_held whether or not --fail-on asked for it
 * ------------------------------------------------------------------------------------------ */

/* nan: NaN/inf in an activation record or the loss, a nan_forward/inf_forward/nan_backward
 * event, or non-finite weights (inf gradients alone, the scaler's calibration, do not count). */
static int fail_check_nan(const an_run *r, strlist *why)
{
    if (!(r->fwd_nonfinite_step >= 0 || r->loss_nonfinite || r->by_code[AMPDIAG_EV_NAN_FORWARD] ||
          r->by_code[AMPDIAG_EV_INF_FORWARD] || r->by_code[AMPDIAG_EV_NAN_BACKWARD] || r->weight_nonfinite ||
          eval_nonfinite(r)))
        return 0;
    if (eval_only_nonfinite(r)) {
        char where[160];
        eval_where(r, where, sizeof where);
        strlist_addf(why, "nan: %s's eval loss at step %" PRId64 " is not finite%s%s%s", r->label,
                     r->evals[r->nevals - 1].step, where[0] ? " (" : "", where, where[0] ? ")" : "");
        return 1;
    }
    if (r->fwd_nonfinite_step >= 0)
        strlist_addf(why, "nan: %s has NaN/inf activations from step %" PRId64 " (first in %s)",
                     r->label, r->fwd_nonfinite_step, an_layer_name(r, r->fwd_nonfinite_layer));
    else if (r->loss_nonfinite)
        strlist_addf(why, "nan: %s has a non-finite loss at %zu steps, first %" PRId64,
                     r->label, r->loss_nonfinite, r->first_nonfinite_loss_step);
    else
        strlist_addf(why, "nan: %s: %s at step %" PRId64 " (%s)", r->label,
                     ampdiag_event_name(r->first_nonfinite.code), r->first_nonfinite.step,
                     r->first_nonfinite.message);
    return 1;
}

/* skips: more than SKIP_RATE_MAX (1 in 500) skipped steps after calibration (at least
 * SKIP_MIN_COUNT), or a collapsed loss scale. */
static int fail_check_skips(const an_run *r, strlist *why)
{
    if (!skips_too_many(r) && !r->collapsed)
        return 0;
    strlist_addf(why, "skips: %s skipped %zu of %zu steps after calibration%s", r->label,
                 r->skipped_after, r->steps_after, r->collapsed ? " and its loss scale collapsed" : "");
    return 1;
}

/* divergence: the run diverged. */
static int fail_check_divergence(const an_run *r, strlist *why)
{
    if (!r->diverged)
        return 0;
    strlist_addf(why, "divergence: %s diverges from step %" PRId64, r->label, r->divergence_step);
    return 1;
}

/* overflow: activations or weights of a 16-bit layer overflow the run's format (FP16 counts
 * and inf for fp16, BF16 counts and inf for bf16); for an fp32 run, FP16 counts (what-if). */
static int fail_check_overflow(const an_run *r, strlist *why)
{
    int fp16 = is_prec(r, PREC_FP16) || is_prec(r, PREC_FP32);
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op || L->island)
            continue;
        for (int k = AMPDIAG_KIND_ACTIVATION; k <= AMPDIAG_KIND_WEIGHT; k += 2) {
            const an_cell *c = &L->cell[k];
            uint64_t o = fp16 ? c->wi[AN_WI_FP16][AMPDIAG_WHATIF_OVERFLOW] : c->wi[AN_WI_BF16][AMPDIAG_WHATIF_OVERFLOW];
            if (!is_prec(r, PREC_FP32))
                o += c->posinf + c->neginf;
            if (o) {
                strlist_addf(why, "overflow: %s: %s forward values overflow %s%s", r->label, L->name,
                             fp16 ? "FP16" : "BF16", is_prec(r, PREC_FP32) ? " (what-if)" : "");
                return 1;
            }
        }
    }
    return 0;
}

typedef struct fail_check {
    unsigned bit;
    int (*holds)(const an_run *, strlist *);
} fail_check;

static const fail_check fail_checks[] = {
    {FAIL_NAN, fail_check_nan},
    {FAIL_SKIPS, fail_check_skips},
    {FAIL_DIVERGENCE, fail_check_divergence},
    {FAIL_OVERFLOW, fail_check_overflow},
};

static void run_fail_checks(const an_run *runs, size_t n, recommendation *R)
{
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < NELEM(fail_checks); k++)
            if (fail_checks[k].holds(&runs[i], &R->fail_why))
                R->fail_held |= fail_checks[k].bit;
}

/* ------------------------------------------------------------------------------------------ */

/* Warnings about the traces themselves: cut off, unknown rows, sampled histograms. */
static void trace_warnings(const an_run *runs, size_t n, recommendation *R)
{
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
}

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
    run_precision_rules(runs, n, c, R);
    for (size_t k = 0; k < NELEM(remedy_rules); k++)
        remedy_rules[k](runs, n, R);
    run_lr_rules(runs, n, c, R);
    run_clip_rules(runs, c, R);
    run_fail_checks(runs, n, R);
    trace_warnings(runs, n, R);
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
