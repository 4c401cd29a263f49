/*
 * rules_clip.c - the clip rules (c), the remedies (the run options the advice sets; ampdiag
 * tune applies them), the --fail-on checks and the warnings about the traces themselves
 * (docs/recommendations.md).
 */
#include "analysis/rules.h"

#include <string.h>

/* ------------------------------------------------------------------------------------------
 * Clip (c)
 * ------------------------------------------------------------------------------------------ */

/* The notes that follow the clip value, each a finding of the baseline: AutoClip's alternative
 * (of the clip value's finding), the transformer prior against the median norm, drift, a
 * gradient-norm spike followed by a loss spike, the run's own clip. */
static void clip_notes(const an_run *runs, size_t bi, const an_finding *cv, recommendation *R)
{
    const an_finding *f;
    SAY0(R, SEC_CLIP, R_CLIP_AUTOCLIP, cv, -1);
    if ((f = rf(runs, bi, F_CLIP_PRIOR_NEVER)))
        SAY0(R, SEC_CLIP, R_CLIP_PRIOR_NEVER, f, -1);
    else if ((f = rf(runs, bi, F_CLIP_PRIOR_ALWAYS)))
        SAY0(R, SEC_CLIP, R_CLIP_PRIOR_ALWAYS, f, -1);
    if ((f = rf(runs, bi, F_NORM_DRIFT)))
        SAY0(R, SEC_CLIP, R_CLIP_DRIFT, f, -1);
    if ((f = rf(runs, bi, F_NORM_SPIKE)))
        SAY0(R, SEC_CLIP, R_CLIP_SPIKE, f, -1);
    if ((f = rf(runs, bi, F_CLIPPED_BY_RUN)))
        SAY0(R, SEC_CLIP, R_CLIP_CLIPPED, f, -1);
}

/* (c) Clip value. Reads: the baseline's F_CLIP_VALUE (unscaled, finite, pre-clip gradient norms
 * after the warm-up: clip = max(P99, median + CLIP_MADS x MAD_SIGMA x MAD), with at least
 * CLIP_MIN_NORMS norms), else F_CLIP_FEW_NORMS. Decides: a clip value only where the history
 * shows a spike clipping would catch (F_NORM_SPIKE: a norm NORM_SPIKE_FACTOR x its rolling median
 * followed by a loss spike) and the value is sane by construction (above 0, and reached by some
 * step: it clips at least one); a hypothesis until ampdiag tune tests it. Otherwise the
 * statistics are evidence, and no clip is offered. */
void rec_clip_rules(const an_run *runs, const an_comparison *c, recommendation *R)
{
    size_t bi = c->baseline;
    const an_finding *cv = rf(runs, bi, F_CLIP_VALUE);
    if (!cv) {
        SAY0(R, SEC_CLIP_LINE, R_CLIP_NONE, rf(runs, bi, F_CLIP_FEW_NORMS), (int)bi);
        return;
    }
    const an_finding *spike = rf(runs, bi, F_NORM_SPIKE);
    double v = rec_fv(cv, "value");
    int sane = v > 0 && rec_fv(cv, "n_over") > 0;
    if (!spike || !sane) {
        SAY(R, SEC_CLIP_LINE, R_CLIP_NO_SPIKES, cv, -1, spike != NULL, sane);
        SAY0(R, SEC_CLIP, R_CLIP_VALUE, cv, -1);
        clip_notes(runs, bi, cv, R);
        return;
    }
    R->clip_have = 1;
    R->clip_value = v;
    R->clip_frac = rec_fv(cv, "share");
    R->clip_autoclip = rec_fv(cv, "p10");
    SAY0(R, SEC_CLIP_LINE, R_CLIP_LINE, cv, -1);
    SAY0(R, SEC_CLIP, R_CLIP_VALUE, cv, -1);
    clip_notes(runs, bi, cv, R);
    rec_decision *d = rec_decide(R, WHAT_CLIP, CONF_HYPOTHESIS);
    if (d) {
        d->value = R->clip_value;
        rec_because(d, cv);
        rec_because(d, spike);
    }
}

/* ------------------------------------------------------------------------------------------
 * Remedies: the options of `ampdiag run` that the advice names, each with the runs it applies
 * to (ampdiag tune applies them, re-runs and verifies). remedy_rules[] run after the precision
 * rules, in order.
 * ------------------------------------------------------------------------------------------ */

#define REC_MAX_REMEDIES 8

/* A decision that is a run option (at most REC_MAX_REMEDIES; a later one for the same option
 * is dropped). Returns it or NULL. */
static rec_decision *remedy(recommendation *R, rec_what what, rec_conf conf, rec_scope scope,
                            const char *option, const char *value, rec_mid why)
{
    const rec_decision *have[REC_MAX_REMEDIES];
    size_t n = rec_remedies(R, have, REC_MAX_REMEDIES);
    for (size_t i = 0; i < n; i++)
        if (strcmp(have[i]->option, option) == 0)
            return NULL;
    if (n >= REC_MAX_REMEDIES)
        return NULL;
    rec_decision *d = rec_decide(R, what, conf);
    if (!d)
        return NULL;
    d->scope = scope;
    d->why = why;
    snprintf(d->option, sizeof d->option, "%s", option);
    snprintf(d->option_value, sizeof d->option_value, "%s", value);
    snprintf(d->to, sizeof d->to, "%s", value);
    return d;
}

/* Inputs far from unit scale with trouble that starts in the first layer (rec_inputs_cause):
 * --standardize on for every run, the first remedy (a hypothesis until a run measures it). */
static void remedy_standardize(const an_run *runs, size_t n, recommendation *R)
{
    const an_finding *f = rec_inputs_cause(runs, n, R->ref);
    if (!f)
        return;
    rec_decision *d = remedy(R, WHAT_INPUTS, CONF_HYPOTHESIS, REM_EVERY_RUN, "--standardize", "on",
                             R_REM_STANDARDIZE);
    if (d) {
        snprintf(d->to, sizeof d->to, "standardize");
        rec_because(d, f);
        for (size_t i = 0; i < n; i++)
            for (const an_finding *t = NULL; (t = an_finding_next(an_run_findings(&runs[i]), F_FWD_OVERFLOW, -1, t));)
                rec_because(d, t);
    }
}

/* A run whose AdamW eps rounds to 0 in its FP16 optimizer state (F_ADAM_EPS_ZERO):
 * --optim-state fp32 for every run (the FP32 baseline's state too). */
static void remedy_optim_state(const an_run *runs, size_t n, recommendation *R)
{
    for (size_t i = 0; i < n; i++) {
        const an_finding *a = rf(runs, i, F_ADAM_EPS_ZERO);
        if (!a)
            continue;
        rec_decision *d = remedy(R, WHAT_OPT_STATE, CONF_OBSERVED, REM_EVERY_RUN, "--optim-state",
                                 "fp32", R_REM_OPT_STATE);
        if (d) {
            d->v[0] = rec_fv(a, "eps");
            rec_because(d, a);
        }
        return;
    }
}

/* A verdict that keeps layers in FP32 (its WHAT_FP32_LAYERS decision): --fp32-layers for the
 * recommended precision's run. */
static void remedy_islands(const an_run *runs, size_t n, recommendation *R)
{
    (void)runs;
    (void)n;
    if (!R->fp32_layers[0] || R->precision == REC_UNDECIDED || R->precision == REC_FP32)
        return;
    for (size_t i = 0; i < R->decisions.n; i++) {
        rec_decision *d = &R->decisions.v[i];
        if (d->what != WHAT_FP32_LAYERS || d->option[0])
            continue;
        d->scope = REM_RECOMMENDED;
        d->why = R_REM_ISLANDS;
        snprintf(d->option, sizeof d->option, "--fp32-layers");
        snprintf(d->option_value, sizeof d->option_value, "%s", R->fp32_layers);
        return;
    }
}

/* An fp16 verdict (fp16 + dynamic loss scaling, initial scale 2^k) where no fp16 run at the
 * baseline's lr scaled dynamically (a run without scaling, or with a static scale, or none run):
 * --loss-scale dynamic --scale-init 2^k for the fp16 run. An fp16 run that scaled dynamically is
 * the evidence the verdict rests on: the scale is a decision, no remedy. Figures of why: k,
 * gradients flush without it. */
static void remedy_loss_scale(const an_run *runs, size_t n, recommendation *R)
{
    if (R->precision != REC_FP16)
        return;
    const an_run *b = &runs[R->ref];
    int k = R->scale ? (int)rec_fv(R->scale, "log2") : (int)an_k(K_SCALE_INIT_LOG2);
    int dynamic_run = 0;
    for (size_t i = 0; i < n; i++)
        dynamic_run |= is_prec(&runs[i], PREC_FP16) && lr_eq(runs[i].lr, b->lr) &&
                       strcmp(runs[i].loss_scale_mode, "dynamic") == 0;
    char v[64];
    snprintf(v, sizeof v, "%.17g", ldexp(1.0, k));
    rec_decision *d[2] = {NULL, NULL};
    if (dynamic_run) {
        d[0] = rec_decide(R, WHAT_LOSS_SCALE, CONF_OBSERVED);
        if (d[0])
            d[0]->why = R_DEC_LOSS_SCALE;
    } else {
        d[0] = remedy(R, WHAT_LOSS_SCALE, CONF_HYPOTHESIS, REM_RECOMMENDED, "--loss-scale", "dynamic",
                      R_REM_LOSS_SCALE);
        d[1] = remedy(R, WHAT_LOSS_SCALE, CONF_HYPOTHESIS, REM_RECOMMENDED, "--scale-init", v,
                      R_REM_LOSS_SCALE);
    }
    for (int j = 0; j < 2; j++)
        if (d[j]) {
            d[j]->value = ldexp(1.0, k);
            d[j]->v[0] = k;
            d[j]->v[1] = (R->fp16.needs_scaling & 1) != 0;
            if (R->scale)
                rec_because(d[j], R->scale);
        }
}

typedef void (*remedy_rule)(const an_run *, size_t, recommendation *);
static const remedy_rule remedy_rules[] = {remedy_standardize, remedy_optim_state, remedy_islands,
                                           remedy_loss_scale};

void rec_remedy_rules(const an_run *runs, size_t n, recommendation *R)
{
    for (size_t k = 0; k < NELEM(remedy_rules); k++)
        remedy_rules[k](runs, n, R);
}

/* ------------------------------------------------------------------------------------------
 * --fail-on: the findings of the four groups, per run (held whether or not --fail-on asked for
 * them), then any other finding asked for by its key
 * ------------------------------------------------------------------------------------------ */

/* One held finding: its bit and its item. */
static void held(recommendation *R, rec_mid msg, const an_finding *f, int run, const double *v,
                 size_t nv)
{
    R->fail_held |= REC_FAIL_BIT(f->id);
    rec_say(R, SEC_FAIL, msg, f, run, v, nv);
}

/* nan: NaN/inf in an activation record or the loss, a nan_forward/inf_forward/nan_backward
 * event, non-finite weights, or an eval loss that is not finite (inf gradients alone, the
 * scaler's calibration, do not count). */
static void fail_nan(const an_run *runs, size_t i, recommendation *R)
{
    const an_finding *f;
    if ((f = rf(runs, i, F_EVAL_ONLY_NONFINITE)))
        held(R, R_FAIL_EVAL_ONLY, f, -1, (const double[]){(double)an_final_eval(&runs[i])->step}, 1);
    else if ((f = rf(runs, i, F_FWD_NONFINITE)))
        held(R, R_FAIL_FWD, f, -1, NULL, 0);
    else if ((f = rf(runs, i, F_LOSS_NONFINITE)))
        held(R, R_FAIL_LOSS, f, -1, NULL, 0);
    else if ((f = rf(runs, i, F_NONFINITE_EVENT)) && rec_fv(f, "nan_events") > 0)
        held(R, R_FAIL_EVENT, f, -1, NULL, 0);
    else if ((f = rf(runs, i, F_NONFINITE_WEIGHTS)))
        held(R, R_FAIL_WEIGHTS, f, -1, NULL, 0);
    else if ((f = rf(runs, i, F_EVAL_NONFINITE)))
        held(R, R_FAIL_EVAL, f, -1, (const double[]){rec_fv(f, "step")}, 1);
}

/* skips: more than SKIP_RATE_MAX skipped steps after calibration (at least SKIP_MIN_COUNT), or
 * a collapsed loss scale. Item figures: skipped after, steps after, collapsed. */
static void fail_skips(const an_run *runs, size_t i, recommendation *R)
{
    const an_finding *s = rf(runs, i, F_SKIPS_ABOVE_LIMIT), *c = rf(runs, i, F_SCALE_COLLAPSED);
    if (!s && !c)
        return;
    if (s && c)
        R->fail_held |= REC_FAIL_BIT(F_SCALE_COLLAPSED);
    held(R, R_FAIL_SKIPS, s ? s : c, -1,
         (const double[]){(double)runs[i].skipped_after, (double)runs[i].steps_after, c != NULL}, 3);
}

static void fail_divergence(const an_run *runs, size_t i, recommendation *R)
{
    const an_finding *f = rf(runs, i, F_DIVERGED);
    if (f)
        held(R, R_FAIL_DIVERGED, f, -1, NULL, 0);
}

/* overflow: activations or weights of a 16-bit layer overflow the run's format (FP16 counts and
 * inf for fp16, BF16's for bf16); for an fp32 run, FP16 counts (what-if). */
static void fail_overflow(const an_run *runs, size_t i, recommendation *R)
{
    const an_finding *f = rf(runs, i, F_OVERFLOW_IN_RUN);
    if (f)
        held(R, R_FAIL_OVERFLOW, f, -1, NULL, 0);
}

typedef void (*fail_check)(const an_run *, size_t, recommendation *);
static const fail_check fail_checks[] = {fail_nan, fail_skips, fail_divergence, fail_overflow};

void rec_fail_checks(const an_run *runs, size_t n, recommendation *R)
{
    rec_fail_set groups = REC_FAIL_NAN | REC_FAIL_SKIPS | REC_FAIL_DIVERGENCE | REC_FAIL_OVERFLOW;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < NELEM(fail_checks); k++)
            fail_checks[k](runs, i, R);
    /* any other finding asked for by its key: the first of each run */
    for (int id = 1; id < AN_NFINDINGS; id++) {
        if (!(R->fail_mask & REC_FAIL_BIT(id)) || (groups & REC_FAIL_BIT(id)))
            continue;
        for (size_t i = 0; i < n; i++) {
            const an_finding *f = rf(runs, i, (an_fid)id);
            if (f)
                held(R, R_NONE, f, -1, NULL, 0);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */

/* Warnings about the traces themselves: cut off, unknown rows, sampled histograms. */
void rec_trace_warnings(const an_run *runs, size_t n, recommendation *R)
{
    static const struct {
        an_fid f;
        rec_mid m;
    } w[] = {{F_CUT_OFF, R_WARN_CUT_OFF}, {F_BAD_ROWS, R_WARN_BAD_ROWS}, {F_HIST_SAMPLED, R_WARN_HIST_SAMPLED}};
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < NELEM(w); k++) {
            const an_finding *f = rf(runs, i, w[k].f);
            if (f)
                SAY0(R, SEC_WARN, w[k].m, f, -1);
        }
}
