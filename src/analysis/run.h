/*
 * run.h - the types of a loaded trace: its cells (one per layer and tensor kind, with the
 * what-if counts of every number format on one axis), layers, steps and the run's summary.
 * The loader (load.h) fills them; the findings (findings.h) and the figures (figures.h) are
 * computed from them once; renderers print findings and figures, not cells.
 *
 * Conventions the traces follow (traces/FORMAT.md): gradient records (activation_grad,
 * weight_grad) hold the values as the run held them, i.e. multiplied by that step's loss scale;
 * the analysis divides by the step's loss_scale to get unscaled magnitudes. /steps grad_norm is
 * already unscaled and before clipping.
 */
#ifndef AMPDIAG_ANALYSIS_RUN_H
#define AMPDIAG_ANALYSIS_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "numerics/precision.h"
#include "util/vec.h"

/* ------------------------------------------------------------------------------------------
 * The format axis: what-if columns
 *
 * A what-if column is one way of casting the traced values to a number format: the format
 * (a row of the trace's /formats, or of the library's table for the counts /tensors holds),
 * the scaling (none, delayed, ...) and, for block-scaled formats, the scheme, the scale rule
 * and the direction (forward / backward) of the /whatif rows that name them (0 where a trace
 * does not). Every cell holds the counts of every column of its run; findings, report columns
 * and charts loop over the columns, so a format the trace records appears in all of them.
 * FP16 and BF16 are always columns 0 and 1 (every trace's /tensors counts them).
 * ------------------------------------------------------------------------------------------ */

#define AN_MAX_WHATIF 48
enum { AN_WI_FP16 = 0, AN_WI_BF16 = 1 };

/* The key of a column. A /quant row's column (a block-scaled or per-tensor-scaled recipe) has
 * its scheme, rule and direction here, each + 1 (0: none, a per-value column of /tensors or
 * /whatif), and its block; the format is the scheme's element format. */
typedef struct an_whatif_key {
    int32_t scaling;    /* ampdiag_whatif_scaling (a /quant column: AMPDIAG_SCALING_NONE) */
    int32_t scheme;     /* ampdiag_qscheme + 1; 0: not block-scaled */
    int32_t rule;       /* ampdiag_qrule + 1; 0: none */
    int32_t direction;  /* ampdiag_qdir + 1; 0: none */
    int32_t block;      /* values per block (or a tile's side); 0: none or per tensor */
} an_whatif_key;

typedef enum an_whatif_source {
    AN_WS_TENSORS = 0, /* /tensors fields (fp16_*, bf16_*; v1 e4m3_*, e5m2_*) */
    AN_WS_WHATIF = 1,  /* /whatif rows */
    AN_WS_QUANT = 2    /* /quant rows (the counts: saturated as overflow, flushed as underflow) */
} an_whatif_source;

typedef struct an_whatif_col {
    char name[48];          /* the column's name: "fp16", "e4m3", "e4m3_delayed" (JSON keys) */
    char format[AMPDIAG_TRACE_FORMAT_NAME_LEN]; /* the format's name: "e4m3" */
    int lib_format;         /* ampdiag_format, or -1: a format only the trace's /formats names */
    an_whatif_key key;
    int source;             /* an_whatif_source */
    int32_t trace_index;    /* its /formats index (-1: from /tensors) */
    double max_finite, min_normal, min_subnormal; /* the format's limits */
    /* a /quant column: what its scheme does to normally distributed values (quant.c: the
     * reference the recipe findings judge a tensor against); NaN for the others */
    double ref_sqnr_db, ref_flush, ref_saturated;
} an_whatif_col;

/* What one block-scaled (/quant) column did to one (layer, kind), summed over the rows (the
 * traced steps). The signal and error energies of gradients are unscaled (divided by the
 * square of the step's loss scale) so that steps weigh alike whatever their loss scale. */
typedef struct an_qcell {
    uint64_t records;
    uint64_t count, nonfinite, saturated, flushed, subnormal, poisoned;
    uint64_t blocks, zero_blocks, scale_clamped, scale_underflow;
    double sig_sq, err_sq;      /* sums over the rows: SQNR = 10 log10(sig_sq / err_sq) */
    double max_rel_err;         /* the largest of the rows' */
    int64_t max_rel_step;
    double worst_sqnr_db;       /* the lowest SQNR of one row (+inf while none) */
    int64_t worst_step;         /* its step (-1) */
    uint64_t disagree;          /* values whose decoded value differs from the rowwise blocking's */
    int32_t scale_emin, scale_emax; /* over the rows' block scales (emin > emax while none) */
} an_qcell;

/* Shares and dB of a quant cell: flushed, saturated and subnormal of the finite values, the
 * SQNR (dB) and the MSE relative to the mean square, the largest relative error, the share of
 * values on which columnwise (or 2-D) and rowwise blocking disagree, blocks whose scale
 * underflowed or clamped. NaN where the cell has none. */
typedef struct an_qfigs {
    double values, flush, saturated, subnormal, sqnr_db, rel_mse, max_rel_err, worst_sqnr_db;
    double disagree, scale_underflow, scale_clamped;
    int64_t worst_step;
} an_qfigs;
void an_qcell_figs(const an_qcell *q, an_qfigs *out);

/* ------------------------------------------------------------------------------------------
 * Cells: one (layer, kind) over the whole trace
 * ------------------------------------------------------------------------------------------ */

typedef struct an_cell {
    uint64_t records;
    uint64_t count, zero, nan, posinf, neginf;  /* sums of the exact counts */
    uint64_t wi[AN_MAX_WHATIF][AMPDIAG_WHATIF_NCLASSES]; /* what-if counts per column, summed */
    uint64_t wi_values[AN_MAX_WHATIF];          /* the values those counts are of */
    uint64_t lost;                              /* lost updates (kind update) */
    uint64_t lost_if[2];                        /* ... that FP16 [0] / BF16 [1] weights would lose */
    uint64_t first_count, first_zero;           /* count and zeros of the first record */
    uint64_t last_count, last_zero;             /* ... and of the last */
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
    an_qcell *q;                  /* [AN_MAX_WHATIF] the /quant columns' sums (indexed by
                                     column), or NULL: none recorded (not merged) */
} an_cell;

/* An empty cell: no records, extremes at their "none" values (-1, +inf), steps -1. */
void an_cell_init(an_cell *c);
/* One tensor record's counts and extremes into a cell; sc divides gradient magnitudes (the
 * step's loss scale, 1 for other kinds). ncols: the run's what-if columns from /tensors. */
void an_cell_add(an_cell *c, const ampdiag_trace_tensor *x, double sc, int v1_fp8_cols[2]);
/* d += s: counts summed, extremes kept (the histogram and the /quant sums are not merged). */
void an_cell_merge(an_cell *d, const an_cell *s);
uint64_t an_cell_nonfinite(const an_cell *c);
/* Finite non-zero values. */
uint64_t an_cell_nonzero(const an_cell *c);
/* The what-if counts of column col: overflow, underflow, subnormal; returns the values they
 * are of (0: the column has none for this cell). */
uint64_t an_cell_whatif(const an_cell *c, int col, uint64_t *o, uint64_t *u, uint64_t *s);

/* ------------------------------------------------------------------------------------------
 * Layers: per-layer series and chart columns
 * ------------------------------------------------------------------------------------------ */

/* A (step, value) series kept per layer for comparisons between runs. */
typedef struct an_sample {
    int64_t step;
    double v;
} an_sample;
typedef VEC(an_sample) an_series;

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

/* What-if columns (the format axis) a chart column keeps fractions of: the first ones, in the
 * run's column order (FP16 and BF16 first). */
#define AN_CHART_WI 8

typedef struct an_column {
    an_point role[AN_NROLES];
    uint64_t records;        /* records in the column */
    /* the largest fraction of a record's values that would underflow (flush to zero) / overflow
     * in what-if column c (NaN: no record counted it), and of exact zeros */
    float under[AN_CHART_WI], over[AN_CHART_WI];
    float zero;
} an_column;

/* Columns of the run's grid (an_run.env_origin, env_width), ascending. A run with at most
 * AN_ENV_COLS distinct recorded steps has columns of one step: one per record; a longer one has
 * between AN_ENV_COLS / 2 and AN_ENV_COLS columns per kind, about the pixels of a chart panel. */
#define AN_ENV_COLS 1024
typedef VEC(an_column) an_points;

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

/* ------------------------------------------------------------------------------------------
 * Steps, events, the run's summary
 * ------------------------------------------------------------------------------------------ */

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
    int64_t rows_from, rows_to; /* an evaluation's: the validation rows of its batch, or -1 */
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

/* A /steps row as kept: the fields the analysis, the charts and the recommendations read (the
 * record read is 176 bytes, this 72; the first skip reason is kept in an_run). */
typedef struct an_step {
    int64_t step;
    double loss;
    double loss_scale;
    double grad_norm;
    double clip_coef;
    double lr;
    double update_ratio;
    int32_t skipped;
    double wall_ms;          /* the step's wall-clock time (the spread across ranks: ranks.h) */
} an_step;

struct an_findings;
struct an_figures;
struct an_ranks;

/* The root attributes of one rank's trace in a distributed run (traces/FORMAT.md, "Distributed
 * runs"), as ampdiag_trace_get_rank read them. */
typedef struct an_rank_attrs {
    int have;                /* 1: one rank's trace; 0: no rank attributes (one process); -1:
                                they are there but invalid (err says why) */
    int64_t rank, world_size;
    char sharding[16];       /* "replicated", "sharded", "hybrid", "none" */
    char backend[32], reduce_dtype[16];
    char err[200];
} an_rank_attrs;

typedef struct an_run {
    char *path;
    char label[96];          /* set by an_label_runs: "fp16", "fp16 lr 0.01", or the file name */
    /* root attributes (empty strings / NaN / -1 when absent) */
    precision prec;          /* the precision policy (PREC_COUNT: not one this version knows) */
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
    double peak_memory;        /* bytes (peak_memory_bytes), NaN when not recorded */
    char peak_memory_source[48]; /* what it measured: "torch.cuda.max_memory_allocated",
                                    "ru_maxrss" ("" when not recorded) */
    int format_version;
    an_attr *attrs;          /* every root attribute, in the file's order */
    size_t nattrs;
    an_rank_attrs dist;      /* the rank attributes of a distributed run's trace */
    ampdiag_trace_counts counts; /* rows of each table */
    int status;              /* ampdiag_trace_status */
    char status_text[32];
    int cut_off, repaired;
    uint64_t bad_rows;       /* tensor rows naming an unknown layer or kind */

    an_whatif_col wcol[AN_MAX_WHATIF]; /* the what-if columns (the format axis, above) */
    int nwcol;
    uint64_t whatif_dropped; /* /whatif rows of columns beyond AN_MAX_WHATIF (ignored) */

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

    /* evaluations (the initial one, step -1, first where the run made one) */
    ampdiag_trace_eval *evals;
    size_t nevals;
    /* the validation examples of the initial and the final evaluation (/eval_examples): loss
     * and metric by example; n 0 where the trace has none */
    double *ex0_loss, *ex0_metric, *ex1_loss, *ex1_metric;
    size_t nex0, nex1;
    int64_t ex1_step;        /* the evaluation ex1 belongs to (-1: none) */

    /* the data as the run saw it (traces/FORMAT.md: data_*, input_*); -1 / NaN when not
     * recorded (older traces) */
    int64_t data_rows, data_val_rows, data_val_targets, data_classes, data_val_classes;
    double data_val_chance;
    int data_labels_sorted;
    double input_min, input_max, input_rms, input_std_min, input_std_max;
    int standardized;        /* --standardize on: 1, off: 0, not recorded: -1 */

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
    an_event_ref eval_forward;     /* first nan/inf event in an evaluation's forward pass */
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
    int fp8_history, fp8_margin;   /* the delayed scaling's amax history and margin (-1: not
                                      recorded) */
    int have_lost_if;              /* ... and some count is non-zero: the writer computed them
                                      (ampdiag_trace_append_tensor writes zeros) */
    uint64_t lost_if[2];           /* FP16 / BF16 totals over layers; 0 without the fields */

    uint64_t hist_rows, hist_rows_read; /* histograms in the trace / read (sampled when many) */
    VEC(int64_t) hist_steps;       /* distinct steps of the histogram rows read (all, or the
                                      sample load_hists reads of very many), ascending
                                      (keep_points) */
    int64_t rec_step_min, rec_step_max; /* range of the kept points' steps (INT64_MAX/MIN: none) */
    int64_t env_origin, env_width; /* the chart columns: column k holds the steps
                                      [origin + k * width, origin + (k + 1) * width); width 1, 2,
                                      4, ... doubles while a kind's columns exceed AN_ENV_COLS */

    struct an_figures *fig;        /* the headline figures (figures.h) */
    struct an_findings *find;      /* what the trace says, for every renderer (findings.h) */
    struct an_ranks *ranks;        /* a run read from its ranks' traces (ranks.h): the ranks and
                                      what reading them together found; NULL for one trace */
} an_run;

/* The quant sums of column col of a cell, or NULL (none, or not a /quant column). */
const an_qcell *an_cell_quant(const an_cell *c, int col);
/* Column col is a /quant column (block-scaled or per-tensor-scaled recipe). */
int an_whatif_is_quant(const an_run *r, int col);
/* Its scheme as the library's spec (0), or -1 when col is not one. */
int an_whatif_qspec(const an_run *r, int col, ampdiag_qspec *s);

/* The run's what-if column of a library format under a scaling, or -1. */
int an_whatif_find(const an_run *r, int lib_format, int scaling);
/* The column of a format named by the trace (any format, known to this version or not) under
 * a key; registered when new (key order: see an_whatif_col). -1 when the run has
 * AN_MAX_WHATIF columns already. */
/* Column col is the run's own format (its precision's, unscaled): an FP16 run's FP16 column. */
int an_whatif_own(const an_run *r, int col);
/* A --what-if list names column col: "all", its name ("e4m3_delayed"), its format's ("e4m3"),
 * or "fp8" for E4M3 and E5M2 (case-insensitive, comma-separated); a /quant column only "all"
 * and its name ("nvfp4:e4m3@row"). */
int an_whatif_named(const an_run *r, int col, const char *list);
int an_whatif_column(an_run *r, const char *format, int lib_format, const an_whatif_key *key,
                     int source, int32_t trace_index, double max_finite, double min_normal,
                     double min_subnormal);

const char *an_layer_name(const an_run *r, int layer); /* "(global)" for -1, "?" if unknown */
/* The initial evaluation (step -1, on the initial weights), or NULL. */
const ampdiag_trace_eval *an_initial_eval(const an_run *r);
/* The last evaluation after a step (the final one), or NULL. */
const ampdiag_trace_eval *an_final_eval(const an_run *r);

#endif
