/*
 * rules.h - what the rule files share (rules_prec.c, rules_bf16.c, rules_verdict.c,
 * rules_lr.c, rules_clip.c, recommend.c): the items and decisions they add, the findings they
 * read, and the precision rules' context. Not for use outside src/analysis/rules_*.c and
 * recommend.c.
 */
#ifndef AMPDIAG_ANALYSIS_RULES_H
#define AMPDIAG_ANALYSIS_RULES_H

#include "analysis/figures.h"
#include "analysis/recommend.h"

#include <math.h>
#include <stdio.h>

#define NELEM(a) (sizeof(a) / sizeof(a)[0])

/* Add an item: the words of msg (R_NONE: of f) about run (-1: f's) in section sec, with the
 * figures v[0..nv). Returns its index, or -1 when out of memory (R->oom set). */
int rec_say(recommendation *R, rec_sec sec, rec_mid msg, const an_finding *f, int run,
            const double *v, size_t nv);
#define SAY(R, sec, msg, f, run, ...)                                                              \
    rec_say(R, sec, msg, f, run, (const double[]){__VA_ARGS__},                                    \
            sizeof((const double[]){__VA_ARGS__}) / sizeof(double))
#define SAY0(R, sec, msg, f, run) rec_say(R, sec, msg, f, run, NULL, 0)

/* Add a decision (its `why` words with v). Returns it (zeroed but for what, conf, value NaN,
 * scope REM_NONE), or NULL when out of memory. */
rec_decision *rec_decide(recommendation *R, rec_what what, rec_conf conf);
/* A finding behind a decision (at most REC_MAX_BECAUSE). */
void rec_because(rec_decision *d, const an_finding *f);

/* The format's first problem (its summary for the verdict line): item i, unless one is set. */
void rec_summary(rec_format *f, int item);

/* The first finding of id of run i / any run, or NULL. */
static inline const an_finding *rf(const an_run *runs, size_t i, an_fid id)
{
    return an_run_finding(&runs[i], id);
}
static inline int has(const an_run *r, an_fid id) { return an_run_finding(r, id) != NULL; }

/* A run failed on its own: diverged or non-finite loss. */
static inline int run_failed(const an_run *r) { return has(r, F_DIVERGED) || has(r, F_LOSS_NONFINITE); }
/* The step a failed run fails from. */
int64_t rec_fail_step(const an_run *r);
/* A run that failed, by a format cause (AdamW eps in FP16 state) rather than the lr. */
static inline int failed_by_format(const an_run *r) { return run_failed(r) && has(r, F_ADAM_EPS_ZERO); }
/* NaN/inf in the forward pass of the very first step, before any update. */
int rec_failed_from_start(const an_run *r);
/* Every run diverges or has a non-finite loss, none from its first step's forward pass. */
int rec_every_run_fails(const an_run *runs, size_t n);
static inline int lr_eq(double a, double b) { return a == b || (isnan(a) && isnan(b)); }
static inline int is_prec(const an_run *r, precision p) { return r->prec == p; }
/* The figure name of a finding (by its row) of f, NaN when f is NULL or has none. */
double rec_fv(const an_finding *f, const char *name);
/* "a,b" + name -> "a,b,name" (cut at n). */
void rec_append_name(char *buf, size_t n, const char *name);
/* name is one of the comma-separated names of list */
int rec_in_list(const char *list, const char *name);

/* ------------------------------------------------------------------------------------------
 * The precision rules (b): their context, the inputs and what earlier rules found
 * ------------------------------------------------------------------------------------------ */

typedef struct prec_ctx {
    const an_run *runs;
    size_t n;
    const an_comparison *c;
    recommendation *R;
    const an_run *base;     /* runs[c->baseline] */
    size_t bi;              /* its index */
    int have_fp32;          /* the baseline is an FP32 run */
    int undecided;          /* (b)1: the baseline does not train or learn, or (b)0 the runs cannot
                               be compared */
    int invalid;            /* (b)0: the runs cannot be compared (other model, data, steps, seeds,
                               a degenerate validation set) */
    int inputs_cause;       /* the inputs, far from unit scale, are the likely cause of trouble that
                               starts in the first layer (remedy: --standardize on) */
    const an_run *fwd_src;  /* (b)3: the run the range what-ifs read, or NULL */
    size_t fwd_i;
    int fp16_fwd;           /* (b)3/(b)4: FP16 overflows in the forward pass */
    int islands_partial;    /* islands known only from an FP16 run's first overflowing layer */
    int baseline_flat;      /* (b)1: the FP32 baseline trains but does not learn */
    int baseline_falling;   /* (b)1: the FP32 baseline learns, still falling at the end */
    int range_decisive;     /* (b)5: the gradient range ruled FP16 out */
    const an_run *fp16_healthy; /* (b)4: an FP16 run that was run and is healthy (no NaN/inf,
                                   skips within the limit, loss within the band), or NULL: what
                                   it did outweighs what-if predictions (observed beats
                                   predicted) */
    const an_run *eval_run; /* a 16-bit run whose evaluation alone is not finite (eval_cause) */
    size_t eval_i;
    const an_run *fp16_islanded; /* (b)4: a clean fp16 run with FP32 layers (its fp32_layers)
                                    whose loss is within the noise band, or NULL */
    uint64_t island_params; /* parameters of the islands */
    char islands[256];      /* FP32 islands that would let FP16 run: "fc1,fc2" */
    const an_finding *island_why[REC_MAX_BECAUSE]; /* the findings that name them */
    size_t nisland_why;
    int bf16_bad;           /* (b)6: a decisive rule rules BF16 out */
    int bf16_gap_bad;       /* (b)6(iii): a BF16 run misses the baseline's loss */
    int pure_ok;            /* (b)6(i): a bf16-pure run lost updates and is healthy all the same */
    double share;           /* (b)7: the islands' share of the parameters */
    int islands_ok;         /* (b)7: the islands rescue FP16 */
} prec_ctx;

static inline int baseline_fails(const prec_ctx *x) { return x->have_fp32 && run_failed(x->base); }

/* rules_prec.c: (b)0-(b)5 */
void rule_comparable(prec_ctx *x);
/* The likely causes of a baseline that fails or does not learn, from its history (SEC_WHY); none
 * but the inputs where they are named first. */
void rec_baseline_causes(prec_ctx *x);
void rule_inputs(prec_ctx *x);
void rule_target_gate(prec_ctx *x);
void rule_baseline_trains(prec_ctx *x);
void rule_forward_overflow(prec_ctx *x);
void rule_forward_headroom(prec_ctx *x);
void rule_fp16_runs(prec_ctx *x);
void rule_gradient_range(prec_ctx *x);
/* A 16-bit run's evaluation alone is not finite where the baseline's is: fmt (AMPDIAG_FP16 or
 * _BF16) ruled out for this data (rules_prec.c). Returns 1 when it applies. */
int rec_eval_cause(prec_ctx *x, size_t i, rec_format *f, rec_sec against, ampdiag_format fmt);
/* rules_bf16.c: (b)6, (b)8 */
void rule_bf16_runs(prec_ctx *x);
void rule_bf16_range(prec_ctx *x);
void rule_bf16_weights_whatif(prec_ctx *x);
void rule_adam_eps(prec_ctx *x);
void rule_viability(prec_ctx *x);
void rule_table_agrees(prec_ctx *x);
/* rules_verdict.c: (b)7, (b)8, baseline sanity, causes ranked; all of them in order */
void rec_precision_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R);
/* rules_lr.c: (d) */
void rec_lr_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R);
/* rules_clip.c: (c), the remedies, --fail-on, the traces' warnings */
void rec_clip_rules(const an_run *runs, const an_comparison *c, recommendation *R);
void rec_remedy_rules(const an_run *runs, size_t n, recommendation *R);
/* The first layer with parameters of a run (-1: none): where the inputs enter. */
int rec_first_layer(const an_run *r);
/* The inputs of run i are far from unit scale (F_INPUT_SCALE) and the trouble starts in the
 * first layer (rules_prec.c): the finding, or NULL. */
const an_finding *rec_inputs_cause(const an_run *runs, size_t n, size_t bi);
void rec_fail_checks(const an_run *runs, size_t n, recommendation *R);
void rec_trace_warnings(const an_run *runs, size_t n, recommendation *R);
/* rules_speed.c: the step times of the viable precisions (reported, not weighed) */
void rec_speed_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R);
/* What the advice as a whole claims to fix (rules_claim.c): R->claim and its SEC_CLAIM item. Runs
 * after every other rule (it reads their decisions). */
void rec_claim_rules(const an_run *runs, size_t n, const an_comparison *c, recommendation *R);

#endif
