/*
 * figures.h - the headline figures of a run: one id, one definition, one unit each, computed
 * once when the trace is loaded (figures.c) and printed under the same name by every command
 * (the run summary, info, compare, sweep, tune, plot); the names and definitions are in the
 * message table (src/messages/figtab.c) and the glossary (`ampdiag help terms`). A figure with
 * another definition is another figure, with another name.
 */
#ifndef AMPDIAG_ANALYSIS_FIGURES_H
#define AMPDIAG_ANALYSIS_FIGURES_H

#include "analysis/evidence.h"
#include "analysis/run.h"

typedef enum an_figid {
    FIG_STEPS,            /* steps recorded */
    FIG_LOSS_FIRST,       /* the first step's training loss */
    FIG_LOSS_LAST,        /* final training loss (last step) */
    FIG_LOSS_MIN,         /* lowest training loss */
    FIG_LOSS_WINDOW,      /* final-window training loss: mean over the last 10% of the steps */
    FIG_EVAL_LOSS,        /* final eval loss */
    FIG_EVAL_SE,          /* its standard error over the validation examples */
    FIG_EVAL_METRIC,      /* final eval metric (accuracy: a share) */
    FIG_SCALE_INIT,
    FIG_SCALE_MIN,
    FIG_SCALE_FINAL,
    FIG_BACKOFFS,
    FIG_GROWTHS,
    FIG_OVERFLOWS_AT_MIN,
    FIG_SKIPPED,          /* skipped steps */
    FIG_SKIP_SHARE,       /* ... as a share of the steps */
    FIG_SKIPPED_AFTER,    /* skipped steps after the calibration window */
    FIG_NONFINITE_EVENTS, /* nan/inf events (forward and backward) */
    FIG_LOSS_SPIKES,
    FIG_DIVERGENCE,       /* the step training diverged from */
    FIG_NONFINITE_ACT,    /* the first NaN/inf activation record (layer, step): its values */
    FIG_NONFINITE_WEIGHTS,/* the first layer whose weights held NaN/inf (step) */
    FIG_FP16_HEADROOM,    /* least FP16 overflow headroom, activations and weights of layers run
                             in 16 bits (binades; -inf: overflowed to inf in an FP16 run) */
    FIG_FP16_ACT_HEADROOM,/* ... of activations alone */
    FIG_FP16_FLUSH,       /* FP16 flush share without loss scaling: the largest share of a layer's
                             non-zero gradient values FP16 flushes to zero, of an unscaled run */
    FIG_FP16_FLUSH_AT_SCALE, /* FP16 flush share at the run's loss scale: the same, as a scaled
                             run (not FP16) held them */
    FIG_FP16_WGRAD_FLUSH, /* FP16 weight-gradient flush share: as FIG_FP16_FLUSH of the weight
                             gradients alone, every layer (JSON's older key) */
    FIG_ZERO_GRAD,        /* zero weight-gradient share: largest per layer */
    FIG_LOST,             /* lost-update share, in the run's own weight storage */
    FIG_LOST_IF_FP16,     /* ... if the weights were FP16 */
    FIG_LOST_IF_BF16,     /* ... if the weights were BF16 */
    FIG_UPDATE_RATIO,     /* median per-layer update/weight ratio (else the steps') */
    FIG_STEP_TIME,        /* median step time: of /steps wall_ms over the steps that recorded
                             one (finite, > 0), ms; NaN when none did */
    FIG_PEAK_MEMORY,      /* peak memory: the root attribute peak_memory_bytes, bytes (its
                             source: an_run's peak_memory_source); NaN when not recorded */
    AN_NFIGS
} an_figid;

typedef struct an_figval {
    double v;        /* NaN: the run has no such figure */
    int layer, kind; /* where it was found (-1 when it is about the run) */
    int64_t step;    /* -1 */
    int na;          /* 1: not applicable to this run (an FP16 run's FP16 flush share) */
} an_figval;

typedef struct an_figures {
    an_figval f[AN_NFIGS];
} an_figures;

typedef struct an_fig_row {
    const char *key;  /* JSON key */
    an_unit unit;
} an_fig_row;

const an_fig_row *an_fig_row_get(an_figid id);

/* The figures of one cell (layer, kind) in one what-if column: the headroom of its range below
 * the column's format's largest value and above its smallest normal (binades, NaN without
 * values), and the shares of its values that would overflow, flush to zero, be subnormal. */
typedef struct an_cell_figs {
    uint64_t values, overflow, underflow, subnormal; /* the counts (values: what they are of) */
    double over_headroom, under_headroom;
    double overflow_share;          /* of the values */
    double underflow_share;         /* of the values */
    double underflow_nonzero_share; /* of the non-zero values (the flush share) */
    double subnormal_share;         /* of the values */
    double lost_share;              /* lost updates of the non-zero values (kind update) */
} an_cell_figs;

void an_cell_figs_of(const an_run *r, const an_cell *c, int col, an_cell_figs *out);

/* Compute into r->fig (allocated here). 0 or -1 (out of memory). */
int an_figures_of(an_run *r);
void an_figures_free(an_run *r);
/* The figure of a run (a NaN figure without the run's figures). */
an_figval an_fig(const an_run *r, an_figid id);

#endif
