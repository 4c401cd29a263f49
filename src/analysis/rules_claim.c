/*
 * rules_claim.c - what the advice claims to fix (docs/recommendations.md, "What compare
 * claims"). It decides on a configuration only where it removes a cost that was observed: a
 * 16-bit run that failed or lost to the FP32 baseline beyond the noise band at the baseline's own
 * lr; with a verdict that removes the mechanism of that cost (not a move across the 16-bit
 * formats' trade-off of range for precision); with advice that changes nothing no run measured;
 * against a baseline whose inputs are near unit scale and whose own history does not put its lr
 * in doubt (too high, too low, still falling). Followed, such advice should match the baseline;
 * it says so, and nothing more. Where no cost of a precision was observed, the precision is not
 * what limits the run and the lr (one lr was run) is untested: undecided beyond the precision,
 * ampdiag tune measures it. The precision verdict itself is unchanged: this is the claim of the
 * advice as a whole.
 */
#include "analysis/rules.h"

#include <string.h>

static const char *const claim_keys[] = {"none", "fix", "no_precision_cost", "untested"};

const char *rec_claim_key(rec_claim c)
{
    return (int)c >= 0 && (size_t)c < NELEM(claim_keys) ? claim_keys[c] : "?";
}

static int is_16bit(const an_run *r)
{
    return is_prec(r, PREC_FP16) || is_prec(r, PREC_BF16) || is_prec(r, PREC_BF16_PURE);
}

/* Run i, a 16-bit run at the baseline's lr, shows a cost against it: it failed (diverged, a
 * non-finite loss, NaN/inf in its forward pass or its evaluation alone) or its loss gap lies
 * outside the noise band on the worse side (or is not finite). *failed: which. */
static int run_cost(const an_run *runs, size_t i, const an_comparison *c, int *failed)
{
    const an_run *r = &runs[i];
    *failed = run_failed(r) || has(r, F_FWD_NONFINITE) || has(r, F_EVAL_ONLY_NONFINITE);
    if (*failed)
        return 1;
    const an_finding *g = an_finding_find(&c->list, F_CMP_GAP, (int)i);
    return g && rec_fv(g, "outside") != 0 && !(rec_fv(g, "rel") < 0);
}

/* The verdict removes the mechanism of run i's observed cost, so that matching the baseline is
 * what it predicts rather than a guess across a trade-off: the verdict is fp32; or bf16 (FP32
 * master weights) for a bf16-pure run; or, for an FP16 run that failed (its range: overflow,
 * NaN) or ran without a loss scaler (gradients flushed), bf16 (FP32's range) or fp16 with the
 * scaler or FP32 islands the advice sets. A scaled FP16 run or a bf16 run that only lost beyond
 * the band, moved to the other 16-bit format, trades range for precision or back: untested,
 * unless a run of the verdict's format at the baseline's lr was seen without a cost
 * (verdict_seen: then matching the baseline is observed, not predicted). */
static int removes_cause(const an_run *r, int failed, const recommendation *R, int verdict_seen)
{
    if (R->precision == REC_FP32 || verdict_seen)
        return 1;
    if (is_prec(r, PREC_BF16_PURE))
        return R->precision == REC_BF16 && !R->keep_pure;
    int unscaled = has(r, F_NO_LOSS_SCALING) || (!r->scaled && strcmp(r->loss_scale_mode, "none") == 0);
    if (!is_prec(r, PREC_FP16) || !(failed || unscaled))
        return 0;
    return R->precision == REC_BF16 || R->precision == REC_FP16;
}

/* A decision of the advice that sets what no run measured: the inputs standardised, an lr from
 * a rule (a sweep's pick was measured), a clip value (a hypothesis until tune tests it). */
static const rec_decision *untested_change(const recommendation *R)
{
    for (size_t i = 0; i < R->decisions.n; i++) {
        const rec_decision *d = &R->decisions.v[i];
        if (d->what == WHAT_INPUTS || (d->what == WHAT_CLIP && isfinite(d->value)) ||
            (d->what == WHAT_LR && (R->lr == LR_LOWER || R->lr == LR_RAISE)))
            return d;
    }
    return NULL;
}

void rec_claim_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R)
{
    size_t bi = c->baseline;
    const an_run *base = &runs[bi];
    R->claim = CLAIM_NONE;
    if (R->precision == REC_UNDECIDED)
        return; /* the verdict says why */
    if (!c->baseline_is_fp32) {
        R->claim = CLAIM_UNTESTED;
        SAY0(R, SEC_CLAIM, R_CLAIM_NO_FP32, NULL, (int)bi);
        return;
    }
    precision want = R->precision == REC_FP16 ? PREC_FP16 : R->keep_pure ? PREC_BF16_PURE : PREC_BF16;
    int have16 = 0, cost_i = -1, cost_failed = 0, verdict_seen = 0;
    for (size_t i = 0; i < n; i++) {
        int failed;
        if (i == bi || !is_16bit(&runs[i]) || !lr_eq(runs[i].lr, base->lr))
            continue;
        have16 = 1;
        if (run_cost(runs, i, c, &failed)) {
            if (cost_i < 0) {
                cost_i = (int)i;
                cost_failed = failed;
            }
        } else if (R->precision != REC_FP32 && is_prec(&runs[i], want)) {
            verdict_seen = 1;
        }
    }
    if (!have16) {
        R->claim = CLAIM_UNTESTED;
        SAY0(R, SEC_CLAIM, R_CLAIM_NO_16BIT, NULL, (int)bi);
        return;
    }
    if (cost_i < 0) {
        R->claim = CLAIM_NO_COST;
        SAY0(R, SEC_CLAIM, R_CLAIM_NO_COST, NULL, (int)bi);
        return;
    }
    const rec_decision *d = untested_change(R);
    const an_finding *in = rf(runs, bi, F_INPUT_SCALE), *doubt = NULL;
    static const an_fid lr_doubts[] = {F_LR_TOO_HIGH, F_LR_TOO_LOW, F_STEPS_TOO_SMALL, F_STILL_FALLING};
    for (size_t k = 0; k < NELEM(lr_doubts) && !doubt; k++)
        doubt = rf(runs, bi, lr_doubts[k]);
    R->claim = CLAIM_UNTESTED;
    if (d && d->what == WHAT_INPUTS)
        SAY0(R, SEC_CLAIM, R_CLAIM_STANDARDIZE, NULL, cost_i);
    else if (d && d->what == WHAT_LR)
        SAY(R, SEC_CLAIM, R_CLAIM_LR, NULL, cost_i, R->lr_suggested);
    else if (d)
        SAY(R, SEC_CLAIM, R_CLAIM_CLIP, NULL, cost_i, d->value);
    else if (!removes_cause(&runs[cost_i], cost_failed, R, verdict_seen))
        SAY0(R, SEC_CLAIM, R_CLAIM_TRADE, NULL, cost_i);
    else if (in)
        SAY0(R, SEC_CLAIM, R_CLAIM_INPUTS, in, (int)bi);
    else if (doubt)
        SAY0(R, SEC_CLAIM, R_CLAIM_BASE_LR, doubt, (int)bi);
    else {
        const ampdiag_trace_eval *e = an_final_eval(base);
        int eval = e && isfinite(e->loss); /* (else the final-window training loss, named as such) */
        R->claim = CLAIM_FIX;
        SAY(R, SEC_CLAIM, R_CLAIM_FIX, NULL, cost_i, cost_failed, eval ? e->loss : base->tail_mean, eval);
    }
}
