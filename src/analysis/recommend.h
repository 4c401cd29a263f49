/*
 * recommend.h - the rules: they read the findings of the runs and of their comparison
 * (evidence.h) and return decisions (what to change: precision, FP32 layers, loss scale, lr,
 * clip, optimizer-state format, master weights, warm-up; to what; with a confidence and the
 * findings behind it) and the evidence as the rules weighed it (items: a finding, or a rule's
 * reasoning, in a section of the report). No rule formats text: the words of every item and
 * decision are in the message table (src/messages/), docs/recommendations.md is generated from
 * it and from the constants, and every renderer prints through it.
 *
 * The rules (rules_*.c) run in a fixed order, a table per group:
 *   precision_rules[]  (b) evidence for and against FP16 and BF16, then the verdict
 *   verdict_rules[]    (b)7 the first candidate verdict whose condition holds wins
 *   lr_rules[]         (d) run until one of them settles the learning rate
 *   clip_rules[]       (c) the clip value and its notes
 *   remedy_rules[]     the run options the advice sets (ampdiag tune applies them)
 *   speed              step times of the viable precisions, side by side (rules_speed.c)
 *   --fail-on          the findings asked for, per run
 */
#ifndef AMPDIAG_RECOMMEND_H
#define AMPDIAG_RECOMMEND_H

#include "analysis/compare.h"
#include "analysis/evidence.h"
#include "analysis/findings.h"
#include "analysis/load.h"

/* Hardware generation (--target). */
typedef enum rec_target {
    TGT_ANY = 0, /* not given: a GPU with FP16 and BF16 (Ampere sm80 or newer) is assumed */
    TGT_SM70,    /* Volta: FP16 tensor cores, no BF16 */
    TGT_SM75,    /* Turing: FP16 tensor cores, no BF16 */
    TGT_SM80,    /* Ampere: FP16 and BF16 */
    TGT_SM89,    /* Ada */
    TGT_SM90,    /* Hopper */
    TGT_CPU      /* CPUs with AVX512_BF16 / AMX (BF16) and AVX512_FP16 (FP16) */
} rec_target;

int rec_target_parse(const char *s, rec_target *t); /* 0 or -1 */
const char *rec_target_name(rec_target t);
int rec_target_has_bf16(rec_target t);
int rec_target_has_fp16(rec_target t);

typedef enum rec_precision {
    REC_UNDECIDED = 0, /* the FP32 baseline itself fails: fix that first */
    REC_FP32,
    REC_FP16,          /* fp16 autocast + dynamic loss scaling */
    REC_BF16           /* bf16 autocast, FP32 master weights */
} rec_precision;

const char *rec_precision_name(rec_precision p); /* "undecided", "fp32", "fp16", "bf16" */

typedef enum rec_lr_verdict {
    LR_UNKNOWN = 0,
    LR_KEEP,
    LR_LOWER,
    LR_RAISE,
    LR_KEEP_MASTER, /* too small an update for the format: keep the lr, use FP32 master weights */
    LR_PICK         /* a sweep over learning rates: the best one */
} rec_lr_verdict;

const char *rec_lr_name(rec_lr_verdict v); /* "unknown", "keep", "lower", "raise", ... */

/* ------------------------------------------------------------------------------------------
 * Items: the evidence as the rules weighed it
 * ------------------------------------------------------------------------------------------ */

/* Where an item goes in a report. */
typedef enum rec_sec {
    SEC_VERDICT,      /* the verdict line, its parts joined by "; " */
    SEC_WHY,          /* the precision verdict's reasons, most important first */
    SEC_FP16_AGAINST, /* fp16: what rules it out or is wrong with it */
    SEC_FP16_FOR,     /* fp16: evidence that it works */
    SEC_BF16_AGAINST,
    SEC_BF16_FOR,
    SEC_SCALE,        /* the loss scale the gradients allow */
    SEC_LR_LINE,      /* the lr advice in one line */
    SEC_LR,           /* its evidence */
    SEC_CLIP_LINE,
    SEC_CLIP,
    SEC_WARN,         /* warnings: true, not decisive */
    SEC_FAIL,         /* --fail-on: the findings asked for that held */
    SEC_SPEED,        /* step times of viable precisions that differ: reported, not weighed */
    SEC_CLAIM,        /* what the advice as a whole claims to fix (rules_claim.c) */
    REC_NSECS
} rec_sec;

const char *rec_sec_key(rec_sec s); /* "verdict", "why", "fp16_against", ... (JSON) */

/* The words of the items that are a rule's reasoning rather than one finding's own (rows of
 * src/messages/msgtab.c; the figures each names are its row's). R_NONE: the finding's words. */
typedef enum rec_mid {
    R_NONE = 0,
    /* target, baseline */
    R_TARGET_NO_BF16, R_BASELINE_ADAM_EPS, R_BASELINE_DIVERGES, R_BASELINE_LOSS_NONFINITE,
    R_EVERY_RUN_FAILS, R_FIRST_MODEL, R_FIRST_DATA, R_FIRST_NOT_LEARNING,
    R_FIRST_STEPS, R_FIRST_SEED, R_FIRST_VALIDATION, R_FIRST_NO_LEARNING, R_FIRST_STILL_FALLING, R_CAUSE_LR_HIGH,
    R_CAUSE_LR_LOW, R_CAUSE_STEPS_SMALL, R_CAUSE_INPUTS, R_CAUSE_DEAD, R_CAUSE_VALIDATION,
    R_INPUTS_FIRST, R_INPUTS_WARN,
    /* fp16 */
    R_FP16_FWD_OVERFLOW, R_FP16_HEADROOM, R_FP16_ADAM_EPS, R_FP16_FWD_NONFINITE,
    R_FP16_COLLAPSE, R_FP16_SKIPS, R_FP16_LOSS_NONFINITE, R_FP16_DIVERGES, R_EVAL_OVERFLOW,
    R_EVAL_FIRST, R_FP16_CLEAN, R_FP16_CLEAN_UNSCALED, R_FP16_NO_SCALER, R_GAP_OUTSIDE, R_GAP_WITHIN,
    R_FLUSH_PREDICTED, R_FLUSH_DECISIVE, R_SPAN_HEALTHY_RUN, R_SPAN_HARMLESS, R_SPAN_DECISIVE,
    R_NEEDS_SCALING, R_SCALE_GOOD, R_SCALE_GOOD_NONE, R_SUBNORMAL, R_SCALE_LINE,
    /* bf16 */
    R_BF16_MASTER_WEIGHTS, R_BF16_PURE_KEPT, R_BF16_FAILS, R_BF16_CLEAN, R_BF16_RANGE, R_BF16_RANGE_OK,
    R_BF16_RATIO_WHATIF, R_BF16_LOST_NONE, R_BF16_LOST_WHATIF, R_ADAM_EPS_WARN,
    R_ISLANDS_NOT_FINITE,
    /* the verdict */
    R_V_UNDECIDED_ADAM, R_V_UNDECIDED_LR, R_V_UNDECIDED_ALL, R_V_UNDECIDED_INVALID,
    R_V_UNDECIDED_FLAT, R_V_UNDECIDED_FALLING, R_V_BF16, R_V_BF16_MASTER, R_V_BF16_PURE, R_V_FP16,
    R_V_FP16_ISLANDS, R_V_BF16_ISLANDS, R_V_FP32_BF16_MISSES, R_V_FP32_NO_BF16_PARTIAL,
    R_V_FP32_NO_BF16_ISLANDS, R_V_FP32_NO_BF16, R_V_FP32, R_V_FIRST_EVAL,
    R_V_FIRST_ADAM,
    R_WHY_BOTH, R_WHY_BF16_NO_FP16_TARGET, R_WHY_BF16_FP16_OUT, R_WHY_BF16_PREDICTED,
    R_WHY_FP16, R_WHY_FP16_OBSERVED, R_WHY_FP16_ISLANDS, R_WHY_BF16_DEVIATION, R_ISLANDS_PARTIAL, R_ISLANDS_OFFER,
    /* learning rate */
    R_LR_SWEEP_POINT, R_LR_SWEEP_FAILS, R_LR_PICK, R_LR_ADAM_FIRST, R_LR_FORMAT_FIRST_LINE,
    R_LR_FAILS, R_LR_DIVERGE_RATIO, R_LR_DIVERGE_STEP, R_LR_WARMUP_AT, R_LR_LOWER_DIVERGES,
    R_LR_FORMAT_START, R_LR_FORMAT_CAUSED, R_LR_NO_RATIO,
    R_LR_TOO_LOW, R_LR_KEEP_HEALTHY, R_LR_RATIO_HIGH, R_LR_RATIO_LOW, R_LR_SPIKES, R_LR_STILL_FALLING, R_LR_KEEP_BAND,
    R_LR_MASTER, R_LR_KEEP, R_LR_KEEP_MASTER, R_LR_LOWER, R_LR_RAISE, R_LR_HIGH, R_LR_LOW,
    R_LR_LOWER_HIGH, R_LR_RAISE_LOW, R_LR_UNSETTLED, R_LR_INPUTS_FIRST,
    /* clip */
    R_CLIP_NONE, R_CLIP_LINE, R_CLIP_VALUE, R_CLIP_AUTOCLIP, R_CLIP_PRIOR_NEVER,
    R_CLIP_PRIOR_ALWAYS, R_CLIP_DRIFT, R_CLIP_SPIKE, R_CLIP_CLIPPED, R_CLIP_NO_SPIKES,
    /* remedies */
    R_REM_OPT_STATE, R_REM_ISLANDS, R_REM_LOSS_SCALE, R_DEC_LOSS_SCALE, R_REM_STANDARDIZE,
    /* --fail-on */
    R_FAIL_EVAL, R_FAIL_EVAL_ONLY, R_FAIL_FWD, R_FAIL_LOSS, R_FAIL_EVENT, R_FAIL_WEIGHTS, R_FAIL_SKIPS,
    R_FAIL_DIVERGED, R_FAIL_OVERFLOW,
    /* low-precision recipes */
    R_RECIPE_PLAN,
    /* the traces */
    R_WARN_CUT_OFF, R_WARN_BAD_ROWS, R_WARN_HIST_SAMPLED,
    /* speed */
    R_SPEED_FASTER,
    /* the claim */
    R_CLAIM_FIX, R_CLAIM_NO_COST, R_CLAIM_NO_FP32, R_CLAIM_NO_16BIT, R_CLAIM_STANDARDIZE, R_CLAIM_LR,
    R_CLAIM_CLIP, R_CLAIM_INPUTS, R_CLAIM_BASE_LR, R_CLAIM_TRADE,
    REC_NMIDS
} rec_mid;

#define REC_MAXV 8

typedef struct rec_item {
    rec_mid msg;         /* R_NONE: the words of the finding f */
    rec_sec sec;
    const an_finding *f; /* the finding the item reads (NULL: none); valid while the runs and
                            the comparison are */
    int run;             /* the run it is about (-1: f's, or none) */
    double v[REC_MAXV];  /* its own figures, named by its row of the message table */
} rec_item;

/* ------------------------------------------------------------------------------------------
 * Decisions
 * ------------------------------------------------------------------------------------------ */

typedef enum rec_what {
    WHAT_PRECISION,     /* to: "fp32", "fp16", "bf16", "undecided" */
    WHAT_FP32_LAYERS,   /* to: the layers' names, comma-separated */
    WHAT_LOSS_SCALE,    /* value: the initial scale of a dynamic scaler */
    WHAT_LR,            /* value: the suggested lr */
    WHAT_CLIP,          /* value: the clip value */
    WHAT_OPT_STATE,     /* to: the optimizer state's format */
    WHAT_MASTER_WEIGHTS,/* to: "fp32" */
    WHAT_WARMUP,        /* to: "longer" */
    WHAT_INPUTS,        /* to: "standardize" (ampdiag run --standardize on) */
    WHAT_RECIPE_BF16,   /* to: the layers a low-precision recipe should leave in BF16 ("" none);
                           value: the recipe (an_recipe, recipe.h) */
    REC_NWHATS
} rec_what;

const char *rec_what_key(rec_what w); /* "precision", "fp32_layers", ... (JSON) */

typedef enum rec_conf {
    CONF_OBSERVED = 0,  /* observed in a run that was given */
    CONF_MEASURED,      /* measured by a re-run (ampdiag tune verifies) */
    CONF_HYPOTHESIS     /* a hypothesis from a heuristic or a prediction from another format */
} rec_conf;

const char *rec_conf_key(rec_conf c); /* "observed", "measured", "hypothesis" */

/* Where a decision that is a run option applies (ampdiag tune applies them and re-runs). */
typedef enum rec_scope {
    REM_NONE = -1,       /* not a run option */
    REM_EVERY_RUN = 0,   /* every run, the FP32 baseline included ("every-run") */
    REM_RECOMMENDED = 1  /* the run of the recommended precision ("recommended") */
} rec_scope;

const char *rec_scope_name(rec_scope s); /* "every-run", "recommended" */

#define REC_MAX_BECAUSE 8

typedef struct rec_decision {
    rec_what what;
    char to[256];       /* the change as text: "bf16", "fc1,fc2" ("" when value says it) */
    double value;       /* the number (lr, clip, loss scale), NaN */
    rec_conf conf;
    const an_finding *because[REC_MAX_BECAUSE]; /* the findings behind it */
    size_t nbecause;
    rec_mid why;        /* the words of why (with v), R_NONE when none */
    double v[REC_MAXV];
    /* a run option: ampdiag run's option and its value, and the runs it applies to */
    rec_scope scope;
    char option[32];    /* "--optim-state" ("" when not an option) */
    char option_value[256];
} rec_decision;

/* ------------------------------------------------------------------------------------------
 * The recommendation
 * ------------------------------------------------------------------------------------------ */

/* What the advice as a whole claims (rules_claim.c). Decided on a configuration only with
 * CLAIM_FIX; the precision verdict is what it is either way. */
typedef enum rec_claim {
    CLAIM_NONE = 0,  /* the precision is undecided: the verdict says why */
    CLAIM_FIX,       /* a 16-bit run failed or lost to the FP32 baseline at its lr beyond the noise
                        band, the verdict removes that cost's mechanism, the advice changes
                        nothing no run measured, and the baseline is a yardstick: followed, it
                        should match the baseline */
    CLAIM_NO_COST,   /* no 16-bit run lost to the baseline at its lr: the precision is not what
                        limits the run; the lr is untested (undecided beyond the precision) */
    CLAIM_UNTESTED   /* the advice sets what no run measured (the inputs, an lr by a rule, a clip,
                        a 16-bit format across the range/precision trade-off from the run's),
                        no FP32 or no 16-bit run at the baseline's lr was given, or the baseline
                        is no yardstick of a good run: inputs far from unit scale, or a history
                        that puts its lr in doubt */
} rec_claim;

const char *rec_claim_key(rec_claim c); /* "none", "fix", "no_precision_cost", "untested" */

/* The assessment of one 16-bit format. */
typedef struct rec_format {
    int supported;       /* by the target */
    int observed;        /* a run of this format (at the baseline's lr) was given */
    int viable;          /* no problem found that rules it out */
    int decisive;        /* ruled out by a decisive rule (overflow, collapse, skips, NaN) */
    int needs_scaling;   /* fp16: gradients flush to zero without loss scaling */
    int summary;         /* the item whose short words are its first problem (the verdict
                            line's "Not fp16: ..."), or -1 */
} rec_format;

/* --fail-on: a set of findings (a bit per an_fid), by key or by the name of a group. 128 bits
 * (GCC's and Clang's unsigned __int128: 0, |, & and ~ as on any integer): the findings outgrew
 * 64 when the rank and recipe findings came together. */
__extension__ typedef unsigned __int128 rec_fail_set;
#define REC_FAIL_BIT(id) ((rec_fail_set)1 << (id))
/* The groups --fail-on has always taken: nan, skips, divergence, overflow. */
extern const rec_fail_set REC_FAIL_NAN, REC_FAIL_SKIPS, REC_FAIL_DIVERGENCE, REC_FAIL_OVERFLOW;

/* "nan,skips,diverged,..." (finding keys, the groups, "all" or "none") -> a set. 0 or -1
 * (message in err naming the unknown word). */
int rec_fail_parse(const char *list, rec_fail_set *set, char *err, size_t errlen);
/* The name --fail-on and the reports give the finding id: its group's ("nan") where it is in
 * one of the four groups, else its key. */
const char *rec_fail_name(an_fid id);

typedef VEC(rec_item) rec_item_list;
typedef VEC(rec_decision) rec_decision_list;

typedef struct recommendation {
    rec_target target;
    rec_precision precision;
    int predicted;          /* the chosen 16-bit format was not run: predicted from a trace */
    int master_weights;     /* a run lost updates without FP32 master weights: say so */
    int keep_pure;          /* the verdict is bf16 with the bf16-pure run given kept as run (it
                               lost updates and learns within the noise band of FP32 all the same) */
    char fp32_layers[256];  /* FP32 islands to keep in the 16-bit run ("" if none) */
    char islands[256];      /* the FP32 islands the forward overflow names, whether or not the
                               verdict keeps them ("" when FP16 does not overflow) */
    double islands_param_share; /* their share of the parameters (NaN without islands) */
    double islands_flop_share;  /* their share of the GEMM FLOPs: of the parameters of linear
                                   layers, 2 x batch x params each (NaN without islands) */
    int islands_forward_finite; /* the forward pass stays finite with them: each island's output
                                   that feeds a 16-bit layer stays below 65520 (-1: no islands) */
    rec_format fp16, bf16;
    const an_finding *scale; /* F_LOSS_SCALE of the run the scale comes from, or NULL */
    size_t scale_run;       /* that run */
    size_t ref;             /* run the range/clip/lr rules read (the FP32 baseline if given) */

    rec_lr_verdict lr;
    double lr_current, lr_factor, lr_suggested;

    int clip_have;
    double clip_value, clip_frac, clip_autoclip;

    rec_item_list items;    /* in the order the rules said them, per section */
    rec_decision_list decisions;

    rec_fail_set fail_mask, fail_held;
    rec_claim claim;
    int oom;
} recommendation;

/* Apply the rules. Returns 0 or -1 (out of memory). */
int recommend(const an_run *runs, size_t nruns, const an_comparison *c, rec_target target,
              rec_fail_set fail_mask, recommendation *out);
void rec_free(recommendation *r);
/* The plan of the low-precision recipe rc (analysis/recipe.h; compare's --recipe) as a decision
 * WHAT_RECIPE_BF16: the layers to keep in BF16 (to), from the baseline's trace when it counted
 * the recipe, else the first run's that did (nothing when none did). Called after recommend. */
void rec_recipe_rules(const an_run *runs, size_t n, const an_comparison *c, int rc, recommendation *R);

/* The decisions that are run options (ampdiag tune applies them), in rule order. */
size_t rec_remedies(const recommendation *R, const rec_decision **out, size_t max);
/* The first finding of id in the evidence of a section (any section: REC_NSECS), or NULL. */
const rec_item *rec_find_item(const recommendation *R, rec_sec sec, rec_mid msg, an_fid f);

#endif
