/*
 * evidence.h - findings as typed records, and the named constants they are judged against.
 *
 * A finding is what the analysis found in a trace (once per trace, findings.c) or in a
 * comparison of traces (once per comparison, compare.c): an id, the subject (run, layer,
 * tensor kind, what-if column, step range), the figures with their units, text from the trace
 * it quotes (a skip reason, an event's message), and the constants it was judged against. The
 * rules (recommend.h) read findings and return decisions; the words of both are in one table
 * (src/messages/), which every renderer uses: nothing else formats a finding.
 *
 * Adding a finding: its id below, its row in an_finding_defs[] (evidence.c: key, figures with
 * units, strings, constants), its computation (findings.c or compare.c), its words (a row of
 * src/messages/msgtab.c), and docs/recommendations.md regenerated (`make docs-rules`; make
 * check compares).
 */
#ifndef AMPDIAG_ANALYSIS_EVIDENCE_H
#define AMPDIAG_ANALYSIS_EVIDENCE_H

#include <stddef.h>
#include <stdint.h>

#include "util/vec.h"

/* ------------------------------------------------------------------------------------------
 * Units of figures
 * ------------------------------------------------------------------------------------------ */

typedef enum an_unit {
    U_NONE = 0,
    U_COUNT,    /* a number of values, steps, events */
    U_STEP,     /* an optimizer step */
    U_SHARE,    /* a fraction 0..1 (printed as a percentage) */
    U_BINADES,  /* log2 of a ratio: factors of 2 */
    U_VALUE,    /* a magnitude of the tensor's values */
    U_LOSS,     /* a loss (cross-entropy, nats) */
    U_RATIO,    /* a dimensionless ratio (update/weight) */
    U_LR,       /* a learning rate */
    U_FACTOR,   /* a multiplier */
    U_SCALE,    /* a loss scale */
    U_LOG2,     /* an exponent: the value is 2^this */
    U_NORM,     /* an L2 norm of gradients */
    U_FLAG,     /* 0 or 1 */
    U_INDEX,    /* a layer, kind or format index (see the subject) */
    U_DB,       /* decibels: 10 log10 of a ratio of energies (SQNR) */
    U_MS,       /* a duration in milliseconds (wall-clock) */
    U_BYTES,    /* an amount of memory, bytes */
    AN_NUNITS
} an_unit;

const char *an_unit_key(an_unit u); /* "share", "binades", ... (JSON) */

/* ------------------------------------------------------------------------------------------
 * Named constants: every threshold a finding or rule is judged against
 * ------------------------------------------------------------------------------------------ */

typedef enum an_kid {
    /* formats (from the format table of src/numerics) */
    K_FP16_MAX, K_FP16_OVERFLOW_AT, K_FP16_MARGIN_AT, K_FP16_UNDERFLOW_AT, K_FP16_MIN_NORMAL,
    K_FP16_SPAN_LOG2, K_BF16_MAX, K_BF16_OVERFLOW_AT, K_BF16_MIN_NORMAL, K_BF16_UNIT_ROUNDOFF,
    /* skipped steps and the loss scale */
    K_SKIP_RATE_MAX, K_SKIP_MIN_COUNT, K_WARMUP_MAX, K_WARMUP_SHARE, K_SCALE_INIT_LOG2,
    K_FLUSH_MAX, K_FLUSH_NORM_MAX, K_SUBNORMAL_WARN, K_GRAD_RANGE_QUANTILE,
    /* updates and islands */
    K_LOST_MAX, K_DEV_ISLAND, K_DEV_ISLAND_LAYERS, K_ISLAND_SHARE_MAX, K_ADAM_EPS_SAFE,
    /* learning */
    K_LEARNED_FRACTION, K_FLAT_FRACTION, K_ZERO_GRAD_NOTE,
    K_LEARN_SE, K_PAIRED_WINSOR, K_VAL_MIN_ROWS,
    /* the data */
    K_INPUT_SCALE_FAR,
    /* the lr from the whole history */
    K_EARLY_SHARE, K_EARLY_MIN, K_RATIO_EARLY_HIGH, K_DIED_SHARE, K_DEAD_LOSS_SHARE, K_LOSS_RISE,
    K_LR_HIGH_FACTOR, K_STILL_FALLING,
    /* learning rate */
    K_RATIO_TARGET, K_RATIO_HIGH, K_RATIO_LOW, K_RATIO_STRONG, K_LR_LOWER_MIN, K_LR_RAISE_MAX,
    K_LR_STEP, K_LR_RAISE_FLAT_MAX, K_LR_DIVERGE_MIN, K_SPIKE_RATE_MAX,
    K_SPIKE_MIN_COUNT, K_LR_SWEEP_MAX,
    /* clip */
    K_CLIP_MIN_NORMS, K_CLIP_QUANTILE, K_CLIP_MADS, K_MAD_SIGMA, K_AUTOCLIP_QUANTILE,
    K_CLIP_PRIOR, K_CLIP_PRIOR_NEVER, K_CLIP_PRIOR_ALWAYS, K_CLIP_DRIFT, K_DRIFT_SHARE, K_NORM_SPIKE_FACTOR,
    K_NORM_SPIKE_HISTORY, K_NORM_SPIKE_WITHIN, K_ZCLIP_ALPHA, K_ZCLIP_Z,
    /* comparison */
    K_NOISE_BAND_MIN, K_NOISE_SE, K_FINAL_WINDOW_SHARE, K_FINAL_WINDOW_MIN, K_CURVE_SEGMENTS,
    /* what-if formats */
    K_WHATIF_MIN_FRACTION,
    /* ranks */
    K_RANK_SPREAD_TOP,
    /* low-precision recipes (block-scaled and per-tensor-scaled) */
    K_RECIPE_FLUSH_EXCESS, K_RECIPE_SAT_EXCESS, K_RECIPE_REF_FACTOR, K_RECIPE_SQNR_MARGIN,
    K_RECIPE_KEEP_SHARE,
    /* speed */
    K_STEP_TIME_FACTOR,
    AN_NCONSTS
} an_kid;

/* How a constant is printed (src/messages): "%g", "1%", "1 in 500", "2^-25", "x0.5", "1e-3",
 * "1.0". */
typedef enum an_kstyle { KS_G = 0, KS_INT, KS_PCT, KS_RATIO, KS_POW2, KS_FACTOR, KS_EXP, KS_F1 } an_kstyle;

typedef struct an_const {
    const char *key;   /* "SKIP_RATE_MAX" */
    double value;
    an_kstyle style;
    const char *why;   /* what it bounds and where it comes from (docs/recommendations.md) */
} an_const;

/* The constants, in an_kid order (evidence.c); the format facts are read from the format
 * table when the table is first used. */
const an_const *an_const_get(an_kid k);
double an_k(an_kid k);

/* ------------------------------------------------------------------------------------------
 * Findings
 * ------------------------------------------------------------------------------------------ */

typedef enum an_fid {
    F_NONE = 0,
    /* per trace: the run's own health */
    F_NOT_COMPLETE,        /* status is not "complete" */
    F_CUT_OFF,             /* status still "running": the writer was killed */
    F_INTERRUPTED,
    F_DIVERGED,
    F_LOSS_NONFINITE,
    F_FWD_NONFINITE,       /* NaN/inf in an activation record (first in forward order) */
    F_NONFINITE_WEIGHTS,
    F_NONFINITE_EVENT,     /* the first nan/inf event (forward or backward) */
    F_SCALE_COLLAPSED,
    F_SKIPS_ABOVE_LIMIT,
    F_EVAL_NONFINITE,      /* the last evaluation's loss is NaN or inf */
    F_EVAL_ONLY_NONFINITE, /* ... while training stayed finite */
    F_ADAM_EPS_ZERO,
    /* learning */
    F_NOT_LEARNING,        /* final-window loss not below LEARNED_FRACTION of the first */
    F_LEARNS_NOTHING,      /* ... not below FLAT_FRACTION */
    F_DEAD_UNITS,
    F_STEPS_TOO_SMALL,
    F_UPDATE_RATIO,
    F_LOSS_SPIKES,
    F_LEARNS,              /* the final eval loss is below the initial one by more than the noise
                              (and the accuracy above chance): measured against the run's start */
    F_DOES_NOT_LEARN,      /* ... it is not */
    F_VAL_DEGENERATE,      /* the validation set is one class, or a handful of rows */
    F_INPUT_SCALE,         /* the inputs are far from unit scale */
    F_LR_TOO_HIGH,         /* the history says the lr is too high (divergence, an early explosion,
                              units dying after large early updates) */
    F_LR_TOO_LOW,          /* ... too low (live gradients, a small ratio throughout) */
    F_STILL_FALLING,       /* a run that learns, its training loss still falling at the end at
                              STILL_FALLING of its mean rate or more: not trained to its best */
    /* ranges and formats */
    F_FWD_OVERFLOW,        /* a 16-bit layer's activations (else weights) reach FP16's overflow */
    F_ACT_OVERFLOW,        /* any layer's activations reach FP16's overflow (islands, FP32 ops) */
    F_FWD_HEADROOM_LOW,    /* ... reach FP16_MARGIN_AT (less than a binade of headroom) */
    F_BF16_OVERFLOW,
    F_OVERFLOW_IN_RUN,     /* activations or weights overflow the run's own 16-bit format */
    F_LOSS_SCALE,          /* the largest 2^k keeping the largest gradient under 65504/2 */
    F_FLUSH_AT_SCALE,      /* the worst layer's gradients flushed at that scale */
    F_SUBNORMAL_AT_SCALE,
    F_FLUSH_UNSCALED,      /* ... without scaling (an unscaled run's own counts) */
    F_GRAD_SPAN,           /* the gradients' range in binades (largest / 1st percentile) */
    F_LOST_UPDATES,        /* updates lost in the run's own weight storage (worst layer) */
    F_LOST_IF_BF16,        /* ... that BF16 weights would lose (what-if) */
    F_WHATIF_HURT,         /* a what-if column would overflow / flush a tensor (FP8 and beyond) */
    F_RECIPE_HURT,         /* a low-precision recipe would hurt a tensor (recipe.h), the worst first */
    F_RECIPE_LAYER,        /* a layer in a recipe's plan: take the recipe or stay BF16, ranked */
    F_RECIPE_PLAN,         /* the plan's summary: layers kept in BF16 against the published share */
    /* clip */
    F_CLIP_VALUE,
    F_CLIP_FEW_NORMS,
    F_NORM_DRIFT,
    F_NORM_SPIKE,
    F_CLIP_PRIOR_NEVER,
    F_CLIP_PRIOR_ALWAYS,
    F_CLIPPED_BY_RUN,
    /* the trace itself */
    F_BAD_ROWS,
    F_HIST_SAMPLED,
    F_NO_LOSS_SCALING,     /* FP16 ran without a loss scaler (the writer's no_loss_scaling event) */
    /* a distributed run's ranks read together (ranks.h) */
    F_RANK_FIRST_NONFINITE,      /* the first rank, step, layer and tensor with NaN/inf */
    F_RANK_REPLICA_DIVERGENCE,   /* replicated weights differ across ranks */
    F_RANK_REDUCED_GRAD_MISMATCH,/* reduced gradients, updates, norm, lr or loss scale differ */
    F_RANK_SKIP_DISAGREEMENT,    /* a rank skipped steps the others did not */
    F_RANK_STOPPED_EARLY,        /* a rank stopped before the others */
    F_RANK_MISSING,              /* a rank's trace, or a shard's records, missing */
    F_RANK_SPREAD,               /* a figure's widest spread across ranks */
    /* per comparison */
    F_CMP_MODEL,
    F_CMP_DATA,
    F_CMP_SEED,
    F_CMP_STEPS,
    F_CMP_LR,
    F_CMP_OPTIMIZER,
    F_CMP_BATCH,
    F_CMP_LAYERS,
    F_CMP_CUT_OFF,
    F_CMP_INTERRUPTED,
    F_CMP_BASELINE_NOT_FP32,
    F_CMP_NO_FP32,
    F_CMP_GAP,             /* a run's loss against the baseline's, and the noise band */
    F_CMP_DEVIATION,       /* the layer whose activations deviate most from the baseline's */
    AN_NFINDINGS
} an_fid;

#define AN_MAXFIG 16
#define AN_MAXSTR 2
#define AN_MAXK 4

/* What a finding is about. Indices are -1 where they do not apply. */
typedef struct an_subject {
    int32_t run;        /* index of the run in the runs given (0 for a trace alone) */
    int32_t run2;       /* the run it is judged against (the baseline), or -1 */
    int32_t layer;      /* in run's layers */
    int32_t kind;       /* ampdiag_tensor_kind */
    int32_t col;        /* the run's what-if column (run.h) */
    int64_t from, to;   /* steps */
} an_subject;

typedef struct an_finding {
    an_fid id;
    an_subject s;
    double v[AN_MAXFIG];        /* the figures, named and with units by the id's row */
    const char *str[AN_MAXSTR]; /* text from the trace it quotes (valid while the run is) */
} an_finding;

typedef struct an_fig_def {
    const char *name;  /* "skipped_after" (JSON, message templates) */
    an_unit unit;
} an_fig_def;

typedef struct an_finding_def {
    const char *key;               /* stable id: "skips_above_limit" (JSON, --fail-on) */
    an_fig_def fig[AN_MAXFIG];     /* figure names and units, in v[] order ({NULL} ends) */
    const char *str[AN_MAXSTR];    /* names of the strings */
    an_kid k[AN_MAXK];             /* constants it is judged against; AN_NCONSTS ends */
    int nk;
} an_finding_def;

const an_finding_def *an_finding_def_get(an_fid id);
/* The id with this key, or F_NONE. */
an_fid an_finding_parse(const char *key);
/* The index of a figure of f's row by name, or -1. */
int an_finding_fig(an_fid id, const char *name);

/* Findings of one run in the order a summary names them: causes before symptoms (a format cause
 * no lr fixes, an evaluation that alone overflows, a forward overflow, then NaN/inf, the loss
 * scale, skips, then learning), ended by F_NONE. */
extern const an_fid an_cause_order[];

typedef VEC(an_finding) an_finding_list;

/* A finding with its subject initialised (run, no layer, kind, column or steps). Returns NULL
 * when out of memory. */
an_finding *an_finding_add(an_finding_list *l, an_fid id, int run);
/* The first finding of id about run (any run: -1) in l, or NULL. */
const an_finding *an_finding_find(const an_finding_list *l, an_fid id, int run);
/* The next one after prev (NULL: the first). */
const an_finding *an_finding_next(const an_finding_list *l, an_fid id, int run,
                                  const an_finding *prev);

#endif
