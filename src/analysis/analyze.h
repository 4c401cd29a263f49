/*
 * analyze.h - read traces into compact per-run summaries, and compare runs with a baseline.
 *
 * an_load() reads one trace once, in ranges (the tensor and histogram tables can be large), and
 * keeps what the recommendation rules and the reports need: per-step series (loss), per layer
 * and tensor kind aggregates (exact count totals, the extreme magnitudes and where they
 * occurred, FP16/BF16 headroom, an exponent histogram of the unscaled gradients), the loss
 * scale history, skipped steps, NaN/inf events, loss spikes, divergence, the statistics of the
 * gradient norm a clip value rests on, and update/weight ratios. docs/recommendations.md
 * explains each quantity and the rule that uses it.
 *
 * Conventions the traces follow (traces/FORMAT.md): gradient records (activation_grad,
 * weight_grad) hold the values as the run held them, i.e. multiplied by that step's loss scale;
 * the analysis divides by the step's loss_scale to get unscaled magnitudes. /steps grad_norm is
 * already unscaled and before clipping.
 */
#ifndef AMPDIAG_ANALYZE_H
#define AMPDIAG_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "util/strlist.h"

/* ------------------------------------------------------------------------------------------
 * Per-run summary
 * ------------------------------------------------------------------------------------------ */

/* One (layer, kind) over the whole trace. */
typedef struct an_cell {
    uint64_t records;
    uint64_t count, zero, nan, posinf, neginf;  /* sums of the exact counts */
    uint64_t f16o, f16u, f16s, b16o, b16u, b16s; /* what-if FP16/BF16 counts, summed */
    uint64_t f8[2][AMPDIAG_WHATIF_NCLASSES];     /* what-if E4M3 [0] / E5M2 [1], unscaled, summed */
    uint64_t f8d[2][AMPDIAG_WHATIF_NCLASSES];    /* ... under delayed scaling (/whatif), summed */
    uint64_t f8d_values[2];                      /* values those delayed counts are of */
    uint64_t lost;                              /* lost updates (kind update) */
    uint64_t lost_if16, lost_ifb16;             /* ... that FP16 / BF16 weights would lose */
    uint64_t first_count, first_zero;           /* count and zeros of the first record */
    double absmax;       /* largest finite |x| as held; -1 while none */
    int64_t absmax_step;
    double absmin_nz;    /* smallest non-zero finite |x| as held; +inf while none */
    int64_t absmin_step;
    double absmax_u;     /* unscaled (gradients divided by the step's loss scale) */
    int64_t absmax_u_step;
    double absmin_u;
    int64_t first_nonfinite_step; /* first record holding NaN or inf; -1 */
    int64_t first_f16o_step;      /* first record with an FP16 overflow count; -1 */
    uint64_t hist_records;        /* histograms summed into hist */
    uint64_t *hist;               /* [AMPDIAG_HIST_BINS] unscaled exponent histogram, or NULL */
} an_cell;

/* An empty cell: no records, extremes at their "none" values (-1, +inf), steps -1. */
void an_cell_init(an_cell *c);

/* A (step, value) series kept per layer for comparisons between runs. */
typedef struct an_series {
    int64_t *step;
    double *v;
    size_t n, cap;
} an_series;

/* One tensor record reduced to what the charts draw (kept when an_options.keep_points asks). */
typedef struct an_point {
    int64_t step;
    float absmax, absmin_nz; /* NaN when none */
    float under;             /* fraction of count that would underflow in FP16 */
    float over;              /* fraction that would overflow in FP16 or is already inf/NaN */
    float nonfinite;         /* fraction that is inf or NaN */
} an_point;

/* What a column of a chart keeps of the records whose steps fall in it: the record holding
 * each extreme a chart draws (largest and smallest absmax and absmin_nz, largest fractions),
 * and the last. A line through these records, in step order, covers the pixels a line through
 * every record covers: a single-step spike stays visible. */
enum {
    AN_ROLE_ABSMAX_HI, AN_ROLE_ABSMAX_LO, AN_ROLE_ABSMIN_HI, AN_ROLE_ABSMIN_LO,
    AN_ROLE_UNDER, AN_ROLE_OVER, AN_ROLE_NONFINITE, AN_ROLE_LAST, AN_NROLES
};

typedef struct an_column {
    an_point role[AN_NROLES];
    uint64_t records;        /* records in the column */
} an_column;

/* Columns of the run's grid (an_run.env_origin, env_width), ascending. A run with at most
 * AN_ENV_COLS distinct recorded steps has columns of one step: one per record; a longer one has
 * between AN_ENV_COLS / 2 and AN_ENV_COLS columns per kind, about the pixels of a chart panel. */
#define AN_ENV_COLS 1024
typedef struct an_points {
    an_column *c;
    size_t n, cap;
} an_points;

typedef struct an_layer {
    char name[AMPDIAG_TRACE_NAME_LEN];
    char op[AMPDIAG_TRACE_OP_LEN];
    char shape[AMPDIAG_TRACE_SHAPE_LEN];
    uint64_t params;
    int fp32_op;        /* an op autocast keeps in FP32 (the loss, or a layer a 16-bit run's
                           /layers compute column records as fp32; an_compare shares the latter
                           by name with the other runs): excluded from range rules */
    char compute[AMPDIAG_TRACE_COMPUTE_LEN]; /* /layers compute: "fp32", "fp16", "bf16", "" */
    int island;         /* named in the run's fp32_layers attribute */
    an_cell cell[AMPDIAG_NKINDS];
    an_series act_rms;  /* activation rms per traced step */
    an_points pts[AMPDIAG_NKINDS]; /* chart columns, for the kinds an_options.keep_points names */
    double ratio_median;/* median over traced steps of rms(update)/rms(weight); NaN if none */
    size_t ratio_n;
} an_layer;

/* Gradient-norm statistics for the clip rule (docs/recommendations.md, "(c) Clip value"). */
typedef struct an_clip {
    size_t n;                 /* finite, unskipped norms after the warm-up */
    size_t warmup;            /* steps left out at the start */
    double median, mad, p99, p10, robust; /* robust = median + 3 * 1.4826 * MAD */
    double value;             /* max(P99, robust) */
    size_t n_over;            /* norms above value */
    int64_t over_steps[6];    /* the first of them */
    size_t n_over_listed;
    double median_first, median_last; /* medians of the first and last 10% of the history */
    int64_t norm_spike_step;  /* a norm >= 10x its rolling median followed by a loss spike within
                                 100 steps; -1 if none */
    int64_t norm_spike_loss_step;
    double norm_spike_ratio;
    size_t actually_clipped;  /* steps the run clipped (clip_coef < 1) */
} an_clip;

typedef struct an_event_ref {
    int64_t step; /* -1 when none */
    int layer;    /* -1 for global */
    int code;
    double value;
    char message[AMPDIAG_TRACE_MESSAGE_LEN];
} an_event_ref;

/* A root attribute as stored (every one, for info's listing). */
typedef struct an_attr {
    char *name;
    int type;          /* ampdiag_attr_type */
    char *s;           /* AMPDIAG_ATTR_STR */
    int64_t i;
    double d;
} an_attr;

/* Headroom of one (layer, kind) in binades (factors of 2), for FP16 [0] and BF16 [1]:
 *   over  = log2(max_finite / absmax)        (negative: beyond the format's range)
 *   under = log2(absmin_nz / min_normal)     (negative: subnormal, then zero) */
typedef struct an_headroom {
    int layer, kind;
    double absmax, absmin_nz;          /* over the trace, as held */
    int64_t absmax_step, absmin_step;
    double over[2], under[2];
} an_headroom;

/* A tensor (layer x kind) that casting to FP8 would hurt: at least AN_FP8_MIN_FRACTION of its
 * values would overflow or flush to zero (src/analysis/fp8.c). */
#define AN_FP8_MIN_FRACTION 1e-3
#define AN_FP8_TOP 5
typedef enum an_fp8_reason {
    AN_FP8_RANGE = 0, /* its dynamic range (over the trace) is wider than the format's */
    AN_FP8_ABOVE,     /* unscaled: values above the format's largest value */
    AN_FP8_BELOW,     /* unscaled: values below half its smallest subnormal */
    AN_FP8_AMAX,      /* delayed: values grew past max / scale (the scale from earlier amax) */
    AN_FP8_HISTORY,   /* delayed: values too far below the history's largest amax */
    AN_FP8_MARGIN     /* delayed: a negative margin puts the history's amax beyond the format */
} an_fp8_reason;
typedef struct an_fp8_hurt {
    int layer, kind;
    int format;               /* AMPDIAG_E4M3 or AMPDIAG_E5M2 */
    int scaling;              /* AMPDIAG_SCALING_NONE or _DELAYED */
    uint64_t values, overflow, underflow;
    double overflow_fraction, underflow_fraction;
    double absmax, absmin_nz; /* the tensor's range over the trace, as held */
    an_fp8_reason reason;
} an_fp8_hurt;
typedef struct an_fp8_findings {
    int unscaled, delayed;    /* the trace has those counts */
    int history, margin;      /* the delayed scaling's (trace attributes; -1 when not recorded) */
    /* unscaled, per format (0 E4M3, 1 E5M2), any kind: up to 3, largest share first */
    an_fp8_hurt hurt_unscaled[2][3];
    int n_unscaled[2];
    /* Transformer Engine's default recipe (delayed scaling, HYBRID: E4M3 for activations and
     * weights, E5M2 for their gradients): the tensors it would hurt, largest share first */
    an_fp8_hurt hurt[AN_FP8_TOP];
    int nhurt;
    size_t nhurt_all;         /* how many tensors it would hurt in all */
} an_fp8_findings;

typedef struct an_findings {
    /* totals per tensor kind over all layers, and over everything */
    an_cell kind[AMPDIAG_NKINDS];
    an_cell all;

    /* every (layer, kind) with finite non-zero values, least headroom first:
     * by_headroom[format 0 fp16 / 1 bf16][side 0 overflow / 1 underflow] */
    an_headroom *by_headroom[2][2];
    size_t nheadroom;

    /* the run summary's one-line findings (layer -1 when none) */
    int act_headroom_layer;     /* least FP16 overflow headroom among activations of ops run in
                                   the run's format (the loss is kept in FP32) */
    double act_headroom;        /* binades: log2(65504 / absmax) there */
    int zero_grad_layer;        /* largest share of weight-gradient values exactly 0 */
    double zero_grad_fraction;  /* of the finite values */
    int flush_layer;            /* largest share of non-zero weight gradients (as held) that FP16
                                   flushes to zero */
    double flush_fraction;
    int nonfinite_act_layer;    /* first layer in forward order whose activations held NaN/inf */
    uint64_t nonfinite_act_count;
    int64_t nonfinite_act_step;
    int nonfinite_weight_layer; /* first layer whose recorded weights held NaN/inf */
    int64_t nonfinite_weight_step;

    /* updates: shares of the finite non-zero update values (NaN when none recorded) */
    uint64_t update_nonzero;
    double lost_fraction;       /* rounded away in the run's own weight storage */
    double lost_if_fp16, lost_if_bf16; /* would round away with 16-bit weights (NaN: not recorded) */

    an_fp8_findings fp8;        /* what FP8 would do (fp8.c) */

    const ampdiag_trace_eval *last_eval; /* NULL when none */
    int eval_is_accuracy;       /* the metric is an accuracy: print it as a percentage */
} an_findings;

/* A /steps row as kept: the fields the analysis, the charts and the recommendations read (the
 * record read is 176 bytes, this 64; the first skip reason is kept in an_run). */
typedef struct an_step {
    int64_t step;
    double loss;
    double loss_scale;
    double grad_norm;
    double clip_coef;
    double lr;
    double update_ratio;
    int32_t skipped;
} an_step;

typedef struct an_run {
    char *path;
    char label[96];          /* set by an_compare: "fp16", "fp16 lr 0.01", or the file name */
    /* root attributes (empty strings / NaN / -1 when absent) */
    char precision[16], model[128], data[128], optimizer[32], loss_scale_mode[48];
    int grads_unscaled;   /* root attribute grad_stats = "unscaled": gradient records are not loss-scaled */
    char hyper[256], fp32_layers[256], scenario[64], schedule[64];
    char command_line[1024]; /* the command that made the run, as it recorded it (cut) */
    int64_t seed, steps_planned, batch;
    double lr, clip;
    double scaler_min;       /* "min=" of the scaler attribute; 0 when none */
    double scaler_init;
    double adam_eps;         /* "eps=" of hyperparameters; NaN when none */
    char optim_state[16];    /* "state=" of hyperparameters */
    int weights_16bit;       /* bf16-pure: weights stored in 16 bits, no FP32 master copy */
    char eval_metric[32];    /* what /eval metric is ("accuracy"); "" when not said */
    char device[32], device_name[96], tool_version[32], start_time[40], end_time[40];
    int format_version;
    an_attr *attrs;          /* every root attribute, in the file's order */
    size_t nattrs;
    ampdiag_trace_counts counts; /* rows of each table */
    int status;              /* ampdiag_trace_status */
    char status_text[32];
    int cut_off, repaired;
    uint64_t bad_rows;       /* tensor rows naming an unknown layer or kind */

    an_layer *layers;
    size_t nlayers;
    uint64_t params;

    /* steps */
    size_t nsteps;
    an_step *steps;          /* [nsteps], as recorded (increasing step order) */
    int64_t *st_step;        /* [nsteps] */
    double *st_loss;         /* [nsteps] */
    int64_t first_step, last_step;
    double loss_first, loss_last, loss_min;
    int64_t loss_min_step;
    size_t loss_nonfinite;
    int64_t first_nonfinite_loss_step;
    size_t tail_w;           /* steps in the final window */
    double tail_mean, tail_sd; /* training loss over the final window (finite values) */

    /* evaluations */
    ampdiag_trace_eval *evals;
    size_t nevals;

    /* loss scale. With scale events in the trace (ampdiag's writer records one per scaler
     * action), backoffs and growths count them and the minimum includes the scale the last
     * backoff left; otherwise they are read off the step records' loss_scale. */
    int scaled;              /* some step had a loss scale other than 1 */
    double scale_init, scale_min, scale_final;
    int64_t scale_min_step;
    size_t backoffs, growths;
    size_t overflows_at_min; /* non-finite steps at the scaler's minimum (no change possible) */
    size_t steps_at_min;     /* steps run at the scaler's minimum (scaler_min > 0) */
    int collapsed;           /* scale fell to <= 1 (from above) or sat at the scaler minimum */

    /* skipped steps */
    size_t calib;            /* calibration window (steps) */
    size_t skipped, skipped_after, steps_after;
    int64_t first_skip_step;
    char first_skip_reason[AMPDIAG_TRACE_REASON_LEN];

    /* events */
    ampdiag_trace_event *events; /* [nevents], as recorded */
    size_t nevents;
    size_t unknown_events;   /* events with a code this version does not know */
    size_t by_code[AMPDIAG_NEVENT_CODES];
    an_event_ref first_nonfinite;  /* first nan/inf event, forward or backward */
    an_event_ref first_forward;    /* first nan/inf event in the forward pass */
    an_event_ref eval_forward;     /* first nan/inf event in an evaluation's forward pass (its
                                      message starts with "eval:", traces/FORMAT.md) */
    int64_t fwd_nonfinite_step;    /* first step with a NaN/inf activation record; -1 */
    int fwd_nonfinite_layer;
    uint64_t nan_values;           /* NaN values in any record */
    uint64_t weight_nonfinite;     /* NaN/inf values in weight records */

    /* divergence and spikes */
    int diverged;
    int64_t divergence_step;       /* -1 */
    char divergence_why[AMPDIAG_TRACE_MESSAGE_LEN]; /* the divergence event's message, or the
                                                       rule that found it ("" when none) */
    size_t loss_spikes;
    int64_t spike_steps[6];
    size_t n_spike_listed;

    an_clip gn;              /* gradient-norm statistics (clip rule) */
    double ratio_median;           /* median over layers of the per-layer medians */
    double step_ratio_median;      /* median of /steps update_ratio */
    uint64_t lost, update_nonzero; /* totals over layers */
    int lost_if_fields;            /* /tensors has lost_if_fp16 and lost_if_bf16 (what-if) */
    int fp8_fields;                /* the trace has unscaled E4M3/E5M2 what-if counts (/tensors'
                                      e4m3_* and e5m2_* in v1, /whatif rows in v2) */
    int fp8_delayed;               /* ... and delayed-scaling ones (/whatif) */
    int fp8_history, fp8_margin;   /* their amax history and margin (-1: not recorded) */
    int have_lost_if;              /* ... and some count is non-zero: the writer computed them
                                      (ampdiag_trace_append_tensor writes zeros) */
    uint64_t lost_if16, lost_ifb16;/* totals over layers; 0 without the fields */

    uint64_t hist_rows, hist_rows_read; /* histograms in the trace / read (sampled when many) */
    int64_t *hist_steps;           /* distinct steps of the histogram rows read (all, or the
                                      sample load_hists reads of very many), ascending
                                      (keep_points) */
    size_t nhist_steps;
    int64_t rec_step_min, rec_step_max; /* range of the kept points' steps (INT64_MAX/MIN: none) */
    int64_t env_origin, env_width; /* the chart columns: column k holds the steps
                                      [origin + k * width, origin + (k + 1) * width); width 1, 2,
                                      4, ... doubles while a kind's columns exceed AN_ENV_COLS */

    an_findings find;              /* what the trace says, for every renderer (findings.h) */
} an_run;

typedef struct an_options {
    long warmup;      /* calibration and clip warm-up window; < 0 = min(100, steps / 5) */
    int quiet;        /* no notes on stderr */
    unsigned keep_points; /* bit 1u << kind: keep that kind's records as chart columns (an_points),
                             and the distinct histogram steps; 0: aggregates only */
    int no_rms_series;    /* 1: no per-layer activation rms series (an_layer.act_rms: only
                             an_compare reads them) */
} an_options;

/* Read and summarise one trace. Returns 0, or an ampdiag_trace error code (negative) with
 * the message (naming the file) in err. run is always left in a state an_free accepts. */
int an_load(const char *path, const an_options *opt, an_run *run, char *err, size_t errlen);
void an_free(an_run *run);
/* an_load in two halves: an_load_begin opens the trace (which forks a probe of the file: call
 * it where no other thread of the process may hold a lock, e.g. before starting threads) into
 * *rd; an_load_finish reads and analyses it and closes rd (it may run on any thread). After a
 * failed an_load_begin (*rd NULL) run is in a state an_free accepts, as after either. */
int an_load_begin(const char *path, const an_options *opt, an_run *run, ampdiag_trace_reader **rd,
                  char *err, size_t errlen);
int an_load_finish(ampdiag_trace_reader *rd, const an_options *opt, an_run *run, char *err,
                   size_t errlen);
/* an_load of paths[0..n) into runs[0..n), several at once (up to the machine's cores, at most
 * 4; load_many.c); every run is left in a state an_free accepts. Returns the index of the first
 * trace that failed (*rc its error code, err its message), or n (*rc 0). Unless opt->quiet, the
 * notes of the traces before the first failure and its own are printed in path order. */
size_t an_load_many(const char *const *paths, size_t n, const an_options *opt, an_run *runs,
                    int *rc, char *err, size_t errlen);

/* Histograms of one layer at given steps, for the charts: out[k * nsteps + j] and have[same]
 * receive the row of kinds[k] at steps[j] (have 0 where none). Reads the trace again. Returns 0
 * or an ampdiag_trace error code (message in err). */
int an_read_hists(const an_run *r, int layer, const int *kinds, size_t nkinds, const int64_t *steps,
                  size_t nsteps, ampdiag_trace_hist *out, int *have, char *err, size_t errlen);

/* Labels for runs shown together (compare's report and the charts alike): the precision, with
 * " lr X" / " seed N" when those differ between the runs, or the file name where two would
 * still read the same. */
void an_label_runs(an_run *runs, size_t n);

/* Helpers the rules and reports share. */
/* The fraction of a histogram's non-zero finite values whose magnitude times 2^shift would be
 * flushed to zero in FP16 (|x| * 2^shift <= 2^-25), and would be FP16 subnormals. */
void an_hist_fp16_at_scale(const uint64_t *hist, int shift, double *flushed, double *subnormal,
                           uint64_t *nonzero);
/* The share of the squared norm of a histogram's non-zero finite values (each bin weighed by
 * the square of its centre) that times 2^shift would flush to zero in FP16: the weight of the
 * flushed values in the gradient, where the share of values counts each alike. */
double an_hist_fp16_flushed_norm(const uint64_t *hist, int shift);
/* log2 of the p-quantile (0..1) of the non-zero finite magnitudes (bin lower edge); NaN if
 * none. */
double an_hist_quantile_log2(const uint64_t *hist, double p);
const char *an_layer_name(const an_run *r, int layer); /* "(global)" for -1, "?" if unknown */

/* ------------------------------------------------------------------------------------------
 * Comparing runs with the baseline
 * ------------------------------------------------------------------------------------------ */

typedef struct an_gap {
    int have;             /* both runs have the metric */
    int eval;             /* 1: final eval loss at a common step; 0: final-window training loss */
    int64_t step;         /* the eval step, or the last common step */
    double base, value;   /* the metric in the baseline and in this run */
    double rel;           /* (value - base) / |base| */
    double curve_max_rel; /* largest relative gap of the 10 segment means of the training loss */
    int64_t curve_max_from, curve_max_to;
} an_gap;

typedef struct an_layer_dev {
    int layer;            /* index in the run */
    double rel;           /* median relative difference of activation rms vs the baseline */
    size_t n;             /* common steps */
} an_layer_dev;

typedef struct an_comparison {
    size_t nruns;
    size_t baseline;      /* index of the baseline run */
    int baseline_is_fp32;
    /* noise band of the metric, relative to the baseline's metric */
    double band;
    int band_from_seeds;  /* 1: 2 sigma over baseline-config runs with other seeds */
    int band_from_eval;   /* 1: 2 standard errors of the baseline's eval loss (its examples) */
    size_t band_seeds;    /* runs used */
    double tail_noise_rel;/* 2 * sd / sqrt(W) of the baseline's final-window training loss, relative */
    an_gap *gap;          /* [nruns]; gap[baseline].have = 0 */
    an_layer_dev **dev;   /* [nruns] sorted, largest first; NULL for the baseline */
    size_t *ndev;
    int **layer_map;      /* [nruns][run's nlayers] -> baseline layer index or -1 */
    strlist notes;        /* comparability: what differs and what it means */
} an_comparison;

/* Compare every run with runs[baseline]; labels the runs. Returns 0 or -1 (out of memory). */
int an_compare(an_run *runs, size_t nruns, size_t baseline, an_comparison *c);
void an_comparison_free(an_comparison *c);

#endif
