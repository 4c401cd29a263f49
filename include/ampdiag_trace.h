/*
 * ampdiag_trace.h - the public C API of ampdiag's HDF5 trace format, version 2.
 *
 * A trace is one HDF5 file per training run: root attributes describing the run and eight
 * tables (/layers, /steps, /tensors, /histograms, /events, /eval, and since version 2 /formats,
 * /whatif and, added later, /quant), plus the optional /traced (which steps have full tensor
 * records, and why). traces/FORMAT.md is the specification; this header is the C view of it. The
 * reader reads version 1 traces too (they have no /formats and /whatif: read as empty).
 *
 * Writing:
 *     ampdiag_trace_writer *w;
 *     if (ampdiag_trace_create("run.h5", NULL, &w) < 0) die(ampdiag_trace_errmsg());
 *     ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PRECISION, "fp16");   // attributes first
 *     int fc1 = ampdiag_trace_add_layer(w, "fc1", "linear", "[256, 784]", 200960);
 *     for (step ...) {
 *         ampdiag_trace_append_tensor(w, step, fc1, AMPDIAG_KIND_WEIGHT_GRAD, &stats, 0);
 *         ampdiag_trace_append_step(w, &step_record);  // flushes every N steps / T seconds
 *     }
 *     ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE);
 *
 * Root attributes can only be added before the first record is appended (the file then
 * switches to HDF5 single-writer/multiple-reader mode, which forbids new attributes); layers
 * can be added at any time. Records are buffered and written in batches; a run killed at any
 * moment leaves a trace whose status is still "running" and which holds every record up to
 * the last flush. On SIGINT/SIGTERM, set a flag in the handler and call
 * ampdiag_trace_close(w, AMPDIAG_STATUS_INTERRUPTED) from the loop (never from the handler:
 * HDF5 is not async-signal-safe).
 *
 * Every function returns 0 (or an index) on success and a negative AMPDIAG_TRACE_E* code on
 * failure; ampdiag_trace_errmsg() then says, naming the file, what failed.
 * ampdiag_trace_err_is_io() separates I/O and resource failures (ampdiag exits 3) from bad
 * input and bad calls (exit 2). A writer that hit an I/O error refuses further records with
 * the same error; what it flushed before stays readable.
 *
 * Writers and readers are independent objects; one object must not be used from two threads
 * at once. The error message is kept per thread.
 */
#ifndef AMPDIAG_TRACE_H
#define AMPDIAG_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "ampdiag.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMPDIAG_TRACE_FORMAT "ampdiag-trace"
#define AMPDIAG_TRACE_FORMAT_VERSION 2

/* ------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------ */

enum {
    AMPDIAG_TRACE_OK = 0,
    AMPDIAG_TRACE_EINVAL = -1,     /* bad argument or call out of order */
    AMPDIAG_TRACE_EIO = -2,        /* the file could not be created, written, flushed or read */
    AMPDIAG_TRACE_ENOMEM = -3,     /* out of memory */
    AMPDIAG_TRACE_EEXIST = -4,     /* the output exists and overwrite was not asked for */
    AMPDIAG_TRACE_ENOENT = -5,     /* the input does not exist or is not a regular file */
    AMPDIAG_TRACE_ENOTHDF5 = -6,   /* the input is not an HDF5 file */
    AMPDIAG_TRACE_ENOTTRACE = -7,  /* an HDF5 file, but not an ampdiag trace */
    AMPDIAG_TRACE_EVERSION = -8,   /* a trace of a newer format_version than this reader */
    AMPDIAG_TRACE_ESCHEMA = -9,    /* a dataset, field or attribute is missing or mistyped */
    AMPDIAG_TRACE_ETRUNCATED = -10 /* the file is truncated or its contents are corrupt */
};

/* The message of the last failed call in this thread ("" if none). */
const char *ampdiag_trace_errmsg(void);
/* A short name of an error code ("I/O error", "not an HDF5 file", ...). */
const char *ampdiag_trace_strerror(int err);
/* 1 when err is an I/O or resource failure (EIO, ENOMEM), 0 otherwise. */
int ampdiag_trace_err_is_io(int err);

/* For programs (call once at start, before any other HDF5 or trace call): HDF5's own exit
 * handler is not installed. HDF5 1.10 crashes in that handler when a file's close failed on a
 * full disk (the file stays half-closed); a program that closes every trace with
 * ampdiag_trace_close loses nothing by it. Returns 0, or -1 when HDF5 refused (too late). */
int ampdiag_trace_process_init(void);

/* ------------------------------------------------------------------------------------------
 * Enumerations (stored as HDF5 enums; the names in quotes are the stored names)
 * ------------------------------------------------------------------------------------------ */

typedef enum ampdiag_tensor_kind {
    AMPDIAG_KIND_ACTIVATION = 0,      /* "activation": a layer's output in the forward pass */
    AMPDIAG_KIND_ACTIVATION_GRAD = 1, /* "activation_grad": gradient w.r.t. that output */
    AMPDIAG_KIND_WEIGHT = 2,          /* "weight": the layer's parameters */
    AMPDIAG_KIND_WEIGHT_GRAD = 3,     /* "weight_grad": gradient w.r.t. the parameters */
    AMPDIAG_KIND_UPDATE = 4,          /* "update": what the optimizer added to the parameters */
    AMPDIAG_NKINDS = 5
} ampdiag_tensor_kind;

typedef enum ampdiag_event_code {
    AMPDIAG_EV_NAN_FORWARD = 0,  /* "nan_forward": first NaN in a forward tensor */
    AMPDIAG_EV_INF_FORWARD = 1,  /* "inf_forward" */
    AMPDIAG_EV_NAN_BACKWARD = 2, /* "nan_backward" */
    AMPDIAG_EV_INF_BACKWARD = 3, /* "inf_backward" */
    AMPDIAG_EV_OVERFLOW = 4,     /* "overflow": finite values rounded to inf in a 16-bit format */
    AMPDIAG_EV_SCALE_BACKOFF = 5,/* "scale_backoff": value = the new loss scale */
    AMPDIAG_EV_SCALE_GROWTH = 6, /* "scale_growth": value = the new loss scale */
    AMPDIAG_EV_SKIPPED = 7,      /* "skipped_step" */
    AMPDIAG_EV_CLIPPED = 8,      /* "clipped": value = the pre-clip gradient norm */
    AMPDIAG_EV_LOSS_SPIKE = 9,   /* "loss_spike": value = the loss */
    AMPDIAG_EV_DIVERGENCE = 10,  /* "divergence": value = the loss */
    AMPDIAG_EV_STOP = 11,        /* "stop": the run stopped early (signal, divergence, limit) */
    AMPDIAG_EV_NOTE = 12,        /* "note": anything else worth a line */
    AMPDIAG_EV_NO_LOSS_SCALING = 13, /* "no_loss_scaling": FP16 autocast (or FP16 weights) ran
                                        without a loss scaler; value = the share of the traced
                                        gradient values that were zero, NaN if none traced */
    AMPDIAG_EV_HIDDEN_SCALER = 14,   /* "hidden_scaler": the gradients were scaled by a loss scaler
                                        the writer was not told of; value = the scale found */
    AMPDIAG_NEVENT_CODES = 15
} ampdiag_event_code;

typedef enum ampdiag_trace_status {
    AMPDIAG_STATUS_UNKNOWN = -1, /* reader: a status string this version does not know */
    AMPDIAG_STATUS_RUNNING = 0,  /* "running": still being written, or cut off */
    AMPDIAG_STATUS_COMPLETE = 1, /* "complete" */
    AMPDIAG_STATUS_DIVERGED = 2, /* "diverged": stopped because training diverged */
    AMPDIAG_STATUS_INTERRUPTED = 3 /* "interrupted": stopped by a signal or the user */
} ampdiag_trace_status;

/* How a what-if count of /whatif was taken (stored as the enum "whatif_scaling"). */
typedef enum ampdiag_whatif_scaling {
    AMPDIAG_SCALING_NONE = 0,    /* "none": the values as they are (unscaled) */
    AMPDIAG_SCALING_DELAYED = 1, /* "delayed": multiplied by a per-tensor scale from the amax of
                                    earlier steps, as Transformer Engine's delayed scaling does
                                    (ampdiag_delayed_scale) */
    AMPDIAG_NSCALINGS = 2
} ampdiag_whatif_scaling;

/* Why a step's full tensor records were taken (/traced's reason, stored as the enum
 * "record_reason"; traces/FORMAT.md, "/traced"). A step with several reasons is recorded under
 * the first of: skipped_step, nonfinite, loss_spike, grad_norm_spike, first, last, after_event,
 * every, cadence. */
typedef enum ampdiag_record_reason {
    AMPDIAG_REASON_CADENCE = 0,    /* "cadence": on the cadence the tracer chose from its measured
                                      cost to stay within its budget (ampdiag run --trace-budget) */
    AMPDIAG_REASON_EVERY = 1,      /* "every": on a fixed cadence asked for (--trace-every N) */
    AMPDIAG_REASON_FIRST = 2,      /* "first": the run's first step */
    AMPDIAG_REASON_LAST = 3,       /* "last": the run's last planned step */
    AMPDIAG_REASON_NONFINITE = 4,  /* "nonfinite": the step's loss or gradients were not finite */
    AMPDIAG_REASON_SKIPPED = 5,    /* "skipped_step": the loss scaler skipped the step's update */
    AMPDIAG_REASON_LOSS_SPIKE = 6, /* "loss_spike": the loss spiked (monitor's rule) */
    AMPDIAG_REASON_GRAD_SPIKE = 7, /* "grad_norm_spike": the gradient norm spiked (the same rule) */
    AMPDIAG_REASON_AFTER_EVENT = 8,/* "after_event": one of the steps after an event (event_step) */
    AMPDIAG_NREASONS = 9
} ampdiag_record_reason;

/* Stored names ("activation", "skipped_step", "complete", "delayed", "cadence"); NULL when out of
 * range. */
const char *ampdiag_kind_name(int kind);
const char *ampdiag_scaling_name(int scaling);
const char *ampdiag_event_name(int code);
const char *ampdiag_status_name(int status);
const char *ampdiag_reason_name(int reason);
/* Name -> value; -1 when unknown. */
int ampdiag_kind_parse(const char *name);
int ampdiag_event_parse(const char *name);
int ampdiag_status_parse(const char *name);
int ampdiag_scaling_parse(const char *name);
int ampdiag_reason_parse(const char *name);
/* 1 when the reason is an event of the step itself (nonfinite, skipped_step, loss_spike,
 * grad_norm_spike), else 0. */
int ampdiag_reason_is_event(int reason);

/* ------------------------------------------------------------------------------------------
 * Records (the C view of the tables; the reader fills arrays of these)
 * ------------------------------------------------------------------------------------------ */

/* Fixed string sizes in bytes, terminating NUL included (longer text is refused for layer
 * names and cut at a UTF-8 boundary elsewhere). */
#define AMPDIAG_TRACE_NAME_LEN 64
#define AMPDIAG_TRACE_OP_LEN 32
#define AMPDIAG_TRACE_SHAPE_LEN 64
#define AMPDIAG_TRACE_REASON_LEN 96
#define AMPDIAG_TRACE_MESSAGE_LEN 128
#define AMPDIAG_TRACE_COMPUTE_LEN 16

typedef struct ampdiag_trace_layer {
    int32_t index;                          /* row number; what /tensors' layer refers to */
    char name[AMPDIAG_TRACE_NAME_LEN];      /* unique; traces are compared by name ("fc1") */
    char op[AMPDIAG_TRACE_OP_LEN];          /* "linear", "layernorm", ... */
    char shape[AMPDIAG_TRACE_SHAPE_LEN];    /* weight shape as text, PyTorch order: "[256, 784]" */
    uint64_t params;                        /* number of parameters */
    /* The format the layer computed in as the run ran it: "fp32", "fp16", "bf16" (for a PyTorch
     * run, the dtype of the layer's output under autocast), or "" when not recorded. Optional in
     * the file: a trace without the field (older writers, ampdiag run) reads "". */
    char compute[AMPDIAG_TRACE_COMPUTE_LEN];
} ampdiag_trace_layer;

typedef struct ampdiag_trace_step {
    int64_t step;            /* 0-based optimizer step */
    double loss;             /* unscaled training loss */
    double loss_scale;       /* loss scale used in this step (1 without scaling) */
    double grad_norm;        /* global L2 norm of the unscaled gradients, before clipping */
    double clip_coef;        /* factor the gradients were multiplied by (1 = not clipped) */
    int32_t skipped;         /* 1 if the update was skipped (non-finite gradients) */
    char skip_reason[AMPDIAG_TRACE_REASON_LEN]; /* "" or e.g. "inf in fc3 weight_grad" */
    double lr;               /* learning rate used in this step */
    double update_ratio;     /* ||update|| / ||weights|| over all parameters */
    uint64_t nonfinite_grads;/* number of non-finite gradient values */
    double wall_ms;          /* wall-clock duration of this step, milliseconds */
} ampdiag_trace_step;

/* One tensor's statistics at one step (the file form of ampdiag_tstats). Where the tensor held
 * no finite value, min/max/absmax/mean/rms are NaN; with no finite non-zero value, absmin_nz
 * is NaN. */
typedef struct ampdiag_trace_tensor {
    int64_t step;
    int32_t layer;           /* index into /layers */
    int32_t kind;            /* ampdiag_tensor_kind; -1 if the file holds an unknown name */
    uint64_t count, n_nan, n_posinf, n_neginf, n_zero, n_neg, n_pos;
    float min, max, absmax, absmin_nz;
    double mean, rms;
    uint64_t fp16_overflow, fp16_underflow, fp16_subnormal;
    uint64_t bf16_overflow, bf16_underflow, bf16_subnormal;
    uint64_t lost_updates;   /* kind update: elements where fl(w + dw) == w although dw != 0 */
    /* kind update, what-if (0 otherwise): elements with dw != 0 whose update would round away,
     * fl16(w + dw) == fl16(w), if the weights were stored in FP16 / BF16 (no FP32 master copy).
     * Optional in the file: a trace without these fields (older writers, other programs) reads
     * 0; ampdiag_trace_has_field() tells the two apart. */
    uint64_t lost_if_fp16, lost_if_bf16;
    /* what-if counts for the OCP FP8 formats, unscaled (as ampdiag_tstats counts them): fields
     * of version 1 traces written after the first writers (optional for readers, which read them
     * as 0 when absent; ampdiag_trace_has_field tells). Version 2 keeps them in /whatif
     * (ampdiag_trace_read_whatif) and its /tensors has no such fields: they read 0. */
    uint64_t e4m3_overflow, e4m3_underflow, e4m3_subnormal;
    uint64_t e5m2_overflow, e5m2_underflow, e5m2_subnormal;
} ampdiag_trace_tensor;

/* One row of /formats (version 2): a number format that /whatif counts refer to by index. */
#define AMPDIAG_TRACE_FORMAT_NAME_LEN 16
typedef struct ampdiag_trace_format {
    int32_t index;           /* the row number; /whatif's format refers to it */
    char name[AMPDIAG_TRACE_FORMAT_NAME_LEN]; /* "e4m3", "e5m2", ...: readers match formats by name */
    int32_t bits, exp_bits, mant_bits;
    double max_finite;       /* largest finite value (448 for E4M3) */
    double min_normal;       /* smallest normal (2^-6 for E4M3) */
    double min_subnormal;    /* smallest subnormal (2^-9 for E4M3) */
    int32_t has_inf;         /* 0: an overflow becomes NaN (E4M3) */
} ampdiag_trace_format;

/* One row of /whatif (version 2): what casting one tensor (step, layer, kind) to one format
 * would do, under one scaling. Counts as in ampdiag_tstats's what-if counts, of the values after
 * scaling: overflow (finite values that overflow), underflow (non-zero values that flush to
 * zero), subnormal (values that come out subnormal). */
typedef struct ampdiag_trace_whatif {
    int64_t step;
    int32_t layer;           /* index into /layers */
    int32_t kind;            /* ampdiag_tensor_kind; -1 if the file holds an unknown name */
    int32_t format;          /* index into /formats */
    int32_t scaling;         /* ampdiag_whatif_scaling; -1 if the file holds an unknown name */
    float scale;             /* the factor the values were multiplied by (1 for none) */
    uint64_t count;          /* values of the tensor (its /tensors count) */
    uint64_t overflow, underflow, subnormal;
} ampdiag_trace_whatif;

/* One row of /quant (version 2, added after its first traces: older ones read none): what a
 * block-scaled or per-tensor-scaled recipe would do to one tensor (step, layer, kind), in one
 * element format, scheme, scale rule and direction: the ampdiag_qstats of ampdiag_quant_whatif
 * (include/ampdiag.h; traces/FORMAT.md, "/quant"). */
typedef struct ampdiag_trace_quant {
    int64_t step;
    int32_t layer;           /* index into /layers */
    int32_t kind;            /* ampdiag_tensor_kind; -1 if the file holds an unknown name */
    int32_t format;          /* /formats index of the element format (readers match formats by name) */
    int32_t scheme;          /* ampdiag_qscheme ("quant_scheme"); -1 if unknown */
    int32_t rule;            /* ampdiag_qrule ("quant_rule"); -1 if unknown */
    int32_t direction;       /* ampdiag_qdir ("quant_direction"); -1 if unknown */
    int32_t block;           /* values per block along the direction, or a tile's side; 0 per tensor */
    float scale;             /* the per-tensor factor (current: the FP32 scale; NVFP4: 2688 / amax; else 1) */
    uint64_t count, nonfinite, saturated, flushed, subnormal, poisoned;
    uint64_t blocks, zero_blocks, nonfinite_blocks, scale_clamped, scale_underflow, scale_subnormal;
    int32_t scale_emin, scale_emax;
    uint64_t scale_hist[AMPDIAG_QHIST_BINS];
    double sig_sq, err_sq, max_rel_err;
    uint64_t disagree;
    double disagree_sq;
} ampdiag_trace_quant;

/* A row from the in-memory form and back (the spec's kinds bits are not stored: 0). */
void ampdiag_trace_quant_from_qstats(ampdiag_trace_quant *t, const ampdiag_qstats *q);
void ampdiag_trace_quant_to_qstats(const ampdiag_trace_quant *t, ampdiag_qstats *q);

typedef struct ampdiag_trace_hist {
    int64_t step;
    int32_t layer;
    int32_t kind;
    uint64_t bin[AMPDIAG_HIST_BINS]; /* as ampdiag_hist: see ampdiag.h */
} ampdiag_trace_hist;

/* When an event happened: in a training step or in an evaluation after it. */
typedef enum ampdiag_event_phase {
    AMPDIAG_PHASE_TRAIN = 0,
    AMPDIAG_PHASE_EVAL = 1
} ampdiag_event_phase;

typedef struct ampdiag_trace_event {
    int64_t step;
    int32_t layer;           /* index into /layers, or -1 for a global event */
    int32_t code;            /* ampdiag_event_code; -1 if the file holds an unknown name */
    double value;            /* meaning depends on code (see ampdiag_event_code); NaN if none */
    char message[AMPDIAG_TRACE_MESSAGE_LEN];
    /* added after the fields above (a record written without them reads as a training
     * step's, or as its message says: traces/FORMAT.md) */
    int32_t phase;           /* ampdiag_event_phase */
    int64_t rows_from, rows_to; /* the validation rows of an evaluation's batch, or -1 */
} ampdiag_trace_event;

typedef struct ampdiag_trace_eval {
    int64_t step;            /* the training step after which the evaluation ran; -1: before the
                                first step, on the initial weights (ampdiag run writes one) */
    double loss;
    double metric;           /* e.g. accuracy in [0, 1]; attribute eval_metric names it; NaN if none */
    double loss_se;          /* standard error of loss, the mean over the validation examples:
                                their standard deviation / sqrt(count); NaN when not recorded
                                (traces before the field read NaN) */
} ampdiag_trace_eval;

/* One validation example at an evaluation (the optional table /eval_examples, added to version
 * 2 after its first traces; a trace without it reads none): what two runs on the same validation
 * examples are compared by, pairwise (traces/FORMAT.md, "/eval_examples"). ampdiag run writes
 * them for the initial evaluation (step -1) and the last one. */
typedef struct ampdiag_trace_eval_example {
    int64_t step;            /* the evaluation's step, as in /eval (-1: before the first step) */
    int64_t example;         /* the validation row, 0-based */
    double loss;             /* its loss (a sequence: the mean over its positions) */
    double metric;           /* its share of correct predictions (a row of classification data: 0
                                or 1); NaN when none */
} ampdiag_trace_eval_example;

/* One row of /traced: a step whose full tensor records (its /tensors rows, their /whatif rows and
 * any /histograms rows) were taken, and why. Optional table: a trace without it (written before
 * it existed, or by a program that does not write it) is one whose traced steps are simply those
 * with /tensors rows; ampdiag_trace_has_traced() tells the two apart. Where a trace has the
 * table, a step without a row has no tensor records: its statistics are missing, not zero. */
typedef struct ampdiag_trace_traced {
    int64_t step;            /* the step */
    int32_t reason;          /* ampdiag_record_reason; -1 if the file holds an unknown name */
    int64_t event_step;      /* the step of the event behind an event reason (= step) or
                                after_event (an earlier step); -1 for the other reasons */
    int32_t cadence;         /* the cadence in force at this step: full records every `cadence`
                                steps; 0 when none (a budget of 0, or its cost not measured yet) */
    double record_ms;        /* the tracer's measured CPU time of one full record (all threads,
                                milliseconds, smoothed); NaN when not measured yet */
    double step_ms;          /* its measured CPU time of an untraced step (milliseconds,
                                smoothed); NaN when not measured (no untraced step yet) */
} ampdiag_trace_traced;

/* Fill a tensor record's statistics from / into the in-memory form. to_tstats restores the
 * merge identities (+-inf) where the file has NaN and sum/sumsq from mean/rms (exact to
 * rounding). */
void ampdiag_trace_tensor_from_tstats(ampdiag_trace_tensor *t, const ampdiag_tstats *s);
void ampdiag_trace_tensor_to_tstats(const ampdiag_trace_tensor *t, ampdiag_tstats *s);

/* ------------------------------------------------------------------------------------------
 * Well-known root attributes (written by ampdiag run; any others may be added)
 * ------------------------------------------------------------------------------------------ */

#define AMPDIAG_ATTR_PRECISION "precision"         /* str: fp32 | fp16 | bf16 | bf16-pure */
#define AMPDIAG_ATTR_MODEL "model"                 /* str: preset name or model file */
#define AMPDIAG_ATTR_DATA "data"                   /* str: "synthetic:blobs" or a file */
#define AMPDIAG_ATTR_SEED "seed"                   /* int */
#define AMPDIAG_ATTR_OPTIMIZER "optimizer"         /* str: adamw | sgd */
#define AMPDIAG_ATTR_HYPERPARAMETERS "hyperparameters" /* str: "beta1=0.9 beta2=0.999 ..." */
#define AMPDIAG_ATTR_LR "lr"                       /* double: base learning rate */
#define AMPDIAG_ATTR_LR_SCHEDULE "lr_schedule"     /* str: "constant", "cosine warmup=100" */
#define AMPDIAG_ATTR_CLIP "clip"                   /* double: max grad norm, 0 = off */
#define AMPDIAG_ATTR_LOSS_SCALE "loss_scale"       /* str: dynamic | static:S | none */
#define AMPDIAG_ATTR_SCALER "scaler"               /* str: "init=65536 growth=2 backoff=0.5 ..." */
#define AMPDIAG_ATTR_DEVICE "device"               /* str: cpu | cuda */
#define AMPDIAG_ATTR_DEVICE_NAME "device_name"     /* str */
#define AMPDIAG_ATTR_COMMAND_LINE "command_line"   /* str */
#define AMPDIAG_ATTR_START_TIME "start_time"       /* str, ISO 8601 UTC (set by create) */
#define AMPDIAG_ATTR_STEPS_PLANNED "steps_planned" /* int */
#define AMPDIAG_ATTR_BATCH "batch"                 /* int */
#define AMPDIAG_ATTR_EVAL_METRIC "eval_metric"     /* str: what /eval metric is ("accuracy") */
/* The settings the analysis's rules read, each typed (the "hyperparameters" and "scaler" strings
 * above say the same for people; a reader takes these first and parses those strings only for
 * traces that lack them). */
#define AMPDIAG_ATTR_OPT_STATE_FORMAT "optimizer_state_format" /* str: fp32 | fp16 | bf16 */
#define AMPDIAG_ATTR_OPT_EPS "optimizer_eps"                   /* double: AdamW's eps */
#define AMPDIAG_ATTR_OPT_BETA1 "optimizer_beta1"               /* double: AdamW */
#define AMPDIAG_ATTR_OPT_BETA2 "optimizer_beta2"               /* double: AdamW */
#define AMPDIAG_ATTR_OPT_MOMENTUM "optimizer_momentum"         /* double: SGD */
#define AMPDIAG_ATTR_OPT_WEIGHT_DECAY "optimizer_weight_decay" /* double */
#define AMPDIAG_ATTR_SCALER_INIT "scaler_init_scale"           /* double */
#define AMPDIAG_ATTR_SCALER_GROWTH "scaler_growth_factor"      /* double */
#define AMPDIAG_ATTR_SCALER_BACKOFF "scaler_backoff_factor"    /* double */
#define AMPDIAG_ATTR_SCALER_INTERVAL "scaler_growth_interval"  /* int: steps */
#define AMPDIAG_ATTR_SCALER_MIN "scaler_min_scale"             /* double: the floor, 0 = none */
#define AMPDIAG_ATTR_SCALER_HYSTERESIS "scaler_hysteresis"     /* int: overflows before a backoff */
#define AMPDIAG_ATTR_FP32_LAYERS "fp32_layers"                 /* str: comma list of layers kept in FP32 */
/* The data as the run saw it (written by ampdiag run; traces/FORMAT.md, "The data"): the
 * validation set the evaluations judge and the inputs' scale at load, as data for the reading
 * side (a degenerate validation set, inputs far from unit scale). */
#define AMPDIAG_ATTR_DATA_ROWS "data_rows"                 /* int: training rows */
#define AMPDIAG_ATTR_DATA_VAL_ROWS "data_val_rows"         /* int: validation rows */
#define AMPDIAG_ATTR_DATA_VAL_TARGETS "data_val_targets"   /* int: the predictions the validation
                                                              accuracy counts (a row, or a row's
                                                              target tokens) */
#define AMPDIAG_ATTR_DATA_CLASSES "data_classes"           /* int: classes (a token set: vocabulary) */
#define AMPDIAG_ATTR_DATA_VAL_CLASSES "data_val_classes"   /* int: distinct labels among the
                                                              validation rows (targets) */
#define AMPDIAG_ATTR_DATA_VAL_CHANCE "data_val_chance"     /* double: share of the validation
                                                              labels in their most common class */
#define AMPDIAG_ATTR_DATA_LABELS_SORTED "data_labels_sorted" /* int 0/1: training labels sorted */
#define AMPDIAG_ATTR_INPUT_MIN "input_min"                 /* double: smallest input value */
#define AMPDIAG_ATTR_INPUT_MAX "input_max"                 /* double: largest input value */
#define AMPDIAG_ATTR_INPUT_RMS "input_rms"                 /* double: root mean square of the inputs */
#define AMPDIAG_ATTR_INPUT_STD_MIN "input_std_min"         /* double: smallest feature std (> 0) */
#define AMPDIAG_ATTR_INPUT_STD_MAX "input_std_max"         /* double: largest feature std */
#define AMPDIAG_ATTR_STANDARDIZE "standardize"             /* str: on | off (ampdiag run --standardize) */
/* The run's peak memory, where its writer could measure it (ampdiag.torch): set before the first
 * record as NaN, updated at the end of the run (ampdiag_trace_update_attr_double); NaN in a trace
 * cut off before. */
#define AMPDIAG_ATTR_PEAK_MEMORY "peak_memory_bytes"       /* double: bytes */
#define AMPDIAG_ATTR_PEAK_MEMORY_SOURCE "peak_memory_source" /* str: what was measured:
                                                      "torch.cuda.max_memory_allocated" (the
                                                      tensors allocated on the CUDA device since
                                                      the tracer started) or "ru_maxrss" (the
                                                      process's peak resident set size since it
                                                      started, getrusage) */
/* The delayed scaling behind /whatif's "delayed" rows (written by ampdiag run). */
#define AMPDIAG_ATTR_FP8_AMAX_HISTORY "fp8_amax_history"       /* int: steps of amax history */
#define AMPDIAG_ATTR_FP8_MARGIN "fp8_margin"                   /* int: scale / 2^margin */
#define AMPDIAG_ATTR_FP8_AMAX_ALGO "fp8_amax_compute_algo"     /* str: "max" (of the history) */
/* One rank of a distributed run (torch.distributed: DDP, FSDP2), one trace per rank
 * (traces/FORMAT.md, "Distributed runs"); ampdiag_trace_set_rank writes them together. */
#define AMPDIAG_ATTR_RANK "rank"                   /* int: 0 .. world_size - 1 */
#define AMPDIAG_ATTR_WORLD_SIZE "world_size"       /* int: processes of the run */
#define AMPDIAG_ATTR_DIST_BACKEND "dist_backend"   /* str: gloo | nccl | ... */
#define AMPDIAG_ATTR_GRAD_REDUCE_DTYPE "grad_reduce_dtype" /* str: fp32 | bf16 | fp16: the format
                                                              the gradients were reduced in */
#define AMPDIAG_ATTR_SHARDING "sharding"           /* str: replicated | sharded | hybrid | none */
/* Which steps get full tensor records (/traced says, step by step, why each one was taken). */
#define AMPDIAG_ATTR_TRACE_CADENCE "trace_cadence"   /* str: "budget" (a cadence chosen from the
                                                        tracer's measured cost), "every" (fixed),
                                                        "none" (step records only) */
#define AMPDIAG_ATTR_TRACE_BUDGET "trace_budget"     /* double: the budget, percent of the CPU time
                                                        of untraced steps ("budget" only) */
#define AMPDIAG_ATTR_TRACE_EVERY "trace_every"       /* int: the fixed cadence ("every"), else 0 */
#define AMPDIAG_ATTR_TRACE_AFTER_EVENT "trace_after_event" /* int: steps after an event that are
                                                        traced in full too */
/* Managed by the writer (refused by the setters): format, format_version, tool_version,
 * status, end_time. */

/* ------------------------------------------------------------------------------------------
 * Writer
 * ------------------------------------------------------------------------------------------ */

typedef struct ampdiag_trace_writer ampdiag_trace_writer;

typedef struct ampdiag_trace_options {
    unsigned flush_every_steps; /* flush after this many step records (default 10; 0 = off) */
    double flush_seconds;       /* ...or when this much time passed since the last flush at a
                                   step record (default 2.0; <= 0 = off) */
    int overwrite;              /* replace an existing file (default 0: refuse, EEXIST) */
    int compact_on_close;       /* default 1: a successful close rewrites the trace without the
                                   dead space SWMR leaves at each flush (HDF5 does not reuse freed
                                   space in SWMR mode), into a temporary file in the same
                                   directory renamed over the trace; skipped for symlinks and
                                   files with several hard links; a failure leaves the (valid)
                                   uncompacted trace */
    int background;             /* default 0. 1: full batches of records and the periodic flushes
                                   are written (compressed, to disk) by a thread of the writer,
                                   so that appends only copy records into memory; the file sees
                                   the same writes in the same order. ampdiag_trace_flush, the
                                   status and close wait for it; an I/O failure in the thread
                                   is returned by the next append that hands rows over, or by
                                   flush/close. The writer is still to be used from one thread
                                   at a time. */
} ampdiag_trace_options;

/* Set the defaults; call it before changing any field. */
void ampdiag_trace_options_init(ampdiag_trace_options *opt);

/* Create a trace (opt NULL = defaults). Writes format, format_version, tool_version,
 * status = "running" and start_time. */
int ampdiag_trace_create(const char *path, const ampdiag_trace_options *opt,
                         ampdiag_trace_writer **out);

/* Root attributes; only before the first record. Setting a name again replaces the value. */
int ampdiag_trace_set_attr_str(ampdiag_trace_writer *w, const char *name, const char *value);
int ampdiag_trace_set_attr_double(ampdiag_trace_writer *w, const char *name, double value);
int ampdiag_trace_set_attr_int(ampdiag_trace_writer *w, const char *name, int64_t value);
/* A new value for a double attribute set before the first record: a figure known only at the
 * end of the run (AMPDIAG_ATTR_PEAK_MEMORY). The one change HDF5's SWMR mode allows an attribute
 * (in place, same type), so it may come at any time before close. AMPDIAG_TRACE_EINVAL when no
 * double attribute of that name was set. */
int ampdiag_trace_update_attr_double(ampdiag_trace_writer *w, const char *name, double value);

/* Declare a layer; returns its index (0, 1, ...) or a negative error. Names must be unique,
 * non-empty and shorter than AMPDIAG_TRACE_NAME_LEN; op and shape may be NULL. */
int ampdiag_trace_add_layer(ampdiag_trace_writer *w, const char *name, const char *op,
                            const char *shape, uint64_t params);
/* The same with the format the layer computed in ("fp32", "fp16", "bf16"; NULL or "" = not
 * recorded): see ampdiag_trace_layer.compute. */
int ampdiag_trace_add_layer_compute(ampdiag_trace_writer *w, const char *name, const char *op,
                                    const char *shape, uint64_t params, const char *compute);

/* One rank of a distributed run (the attributes AMPDIAG_ATTR_RANK ... AMPDIAG_ATTR_SHARDING).
 * sharding: "replicated" (every rank holds every weight, gradients all-reduced: DDP),
 * "sharded" (every rank holds a shard of each weight, gradient and update: FSDP), "hybrid"
 * (sharded within a group of ranks, replicated across groups: HSDP) or "none" (each rank its
 * own model, no wrapper seen). */
typedef struct ampdiag_trace_rank {
    int64_t rank;             /* 0 .. world_size - 1 */
    int64_t world_size;       /* >= 1 */
    const char *backend;      /* "gloo", "nccl", ...; NULL or "" = not recorded */
    const char *reduce_dtype; /* "fp32", "bf16", "fp16"; NULL or "" = not recorded */
    const char *sharding;     /* one of the four names above */
} ampdiag_trace_rank;

/* Write the five attributes (before the first record, as every attribute), checked: 0 <= rank <
 * world_size, sharding one of the four names; EINVAL otherwise, nothing written. */
int ampdiag_trace_set_rank(ampdiag_trace_writer *w, const ampdiag_trace_rank *d);

/* Append records. Appending a step record may flush (see ampdiag_trace_options). */
int ampdiag_trace_append_step(ampdiag_trace_writer *w, const ampdiag_trace_step *rec);
/* Any kind; writes lost_if_fp16 = lost_if_bf16 = 0, and the unscaled FP8 what-if counts of s
 * as two /whatif rows (e4m3, e5m2). */
int ampdiag_trace_append_tensor(ampdiag_trace_writer *w, int64_t step, int layer,
                                ampdiag_tensor_kind kind, const ampdiag_tstats *s,
                                uint64_t lost_updates);
/* A record of kind update with the what-if lost-update counts (see ampdiag_trace_tensor). */
int ampdiag_trace_append_update(ampdiag_trace_writer *w, int64_t step, int layer,
                                const ampdiag_tstats *s, uint64_t lost_updates,
                                uint64_t lost_if_fp16, uint64_t lost_if_bf16);
int ampdiag_trace_append_hist(ampdiag_trace_writer *w, int64_t step, int layer,
                              ampdiag_tensor_kind kind, const ampdiag_hist *h);
/* A /whatif row: the counts[AMPDIAG_WHATIF_*] of casting count values of (step, layer, kind)
 * to fmt after multiplying them by scale (1 and AMPDIAG_SCALING_NONE: unscaled). fmt is any row
 * of the format table but FP32. ampdiag_trace_append_tensor and _update write the unscaled FP8
 * rows themselves (from the statistics' what-if counts); this adds others, such as delayed
 * scaling's (ampdiag_delayed_scale, ampdiag_whatif_scaled). */
int ampdiag_trace_append_whatif(ampdiag_trace_writer *w, int64_t step, int layer,
                                ampdiag_tensor_kind kind, ampdiag_format fmt,
                                ampdiag_whatif_scaling scaling, float scale, uint64_t count,
                                const uint64_t counts[AMPDIAG_WHATIF_NCLASSES]);
/* A /quant row: what ampdiag_quant_whatif counted for (step, layer, kind). A stats record that
 * is not computed (q->computed 0: a direction that does not apply to the tensor) writes nothing
 * and returns 0. */
int ampdiag_trace_append_quant(ampdiag_trace_writer *w, int64_t step, int layer, ampdiag_tensor_kind kind,
                               const ampdiag_qstats *q);
/* layer -1 for a global event; msg may be NULL. A training step's event. */
int ampdiag_trace_append_event(ampdiag_trace_writer *w, int64_t step, int layer,
                               ampdiag_event_code code, double value, const char *msg);
/* The same in a phase: an evaluation's (AMPDIAG_PHASE_EVAL) names the validation rows of the
 * batch it met (rows_from..rows_to, -1 when not known). */
int ampdiag_trace_append_event_in(ampdiag_trace_writer *w, int64_t step, int layer,
                                  ampdiag_event_code code, double value, const char *msg,
                                  ampdiag_event_phase phase, int64_t rows_from, int64_t rows_to);
int ampdiag_trace_append_eval(ampdiag_trace_writer *w, int64_t step, double loss, double metric);
/* The same with the standard error of the eval loss (its noise: readers build the noise band of
 * a comparison from it). */
int ampdiag_trace_append_eval_se(ampdiag_trace_writer *w, int64_t step, double loss, double metric,
                                 double loss_se);
/* The n validation examples of the evaluation at step, rows 0..n-1: their losses, and their
 * metric (metric NULL: NaN). */
int ampdiag_trace_append_eval_examples(ampdiag_trace_writer *w, int64_t step, const double *loss,
                                       const double *metric, size_t n);

/* A /traced row: the full records of rec->step were taken, and why (reason one of
 * ampdiag_record_reason; event_step -1 or a step not after rec->step; cadence >= 0). Append it
 * with the step's tensor records, in step order. */
int ampdiag_trace_append_traced(ampdiag_trace_writer *w, const ampdiag_trace_traced *rec);

/* Write every buffered record and flush the file: after this returns 0, a crash loses
 * nothing appended so far. */
int ampdiag_trace_flush(ampdiag_trace_writer *w);
/* Record a status now (and flush). */
int ampdiag_trace_set_status(ampdiag_trace_writer *w, ampdiag_trace_status status);

/* Close: set the status (AMPDIAG_STATUS_RUNNING leaves the trace marked as cut off; pass
 * AMPDIAG_STATUS_UNKNOWN to keep the last one set), write end_time, flush and free. Safe in any
 * state (before the first record, after an I/O error, w NULL); always frees w. Returns the
 * first error met, including an earlier I/O error that made the writer stop. */
int ampdiag_trace_close(ampdiag_trace_writer *w, ampdiag_trace_status status);

typedef struct ampdiag_trace_writer_info {
    uint64_t steps, tensors, hists, events, evals, layers; /* records appended */
    uint64_t flushes;              /* completed flushes */
    uint64_t steps_flushed;        /* step records safe on disk after the last flush */
    uint64_t whatifs;              /* /whatif rows appended */
    uint64_t quants;               /* /quant rows appended */
    uint64_t eval_examples;        /* /eval_examples rows appended */
} ampdiag_trace_writer_info;
void ampdiag_trace_writer_get_info(const ampdiag_trace_writer *w, ampdiag_trace_writer_info *info);

/* ------------------------------------------------------------------------------------------
 * Reader
 * ------------------------------------------------------------------------------------------ */

typedef struct ampdiag_trace_reader ampdiag_trace_reader;

#define AMPDIAG_TRACE_READ_QUIET 1u     /* do not print notes (such as a repair) on stderr */
#define AMPDIAG_TRACE_READ_NO_REPAIR 2u /* never clear a stale open-for-write mark */

/* Open and validate a trace. A trace whose writer died before its first flush is still marked
 * open-for-write; unless NO_REPAIR, the mark is cleared (as h5clear -s does) and the open
 * retried, with a note on stderr unless QUIET. The file is untrusted: HDF5 first parses its
 * structure in a child process (fork; at most 5 s and 512 MiB), so a damaged file is refused
 * (AMPDIAG_TRACE_ETRUNCATED) instead of crashing or hanging the caller (traces/FORMAT.md,
 * "Limits"). */
int ampdiag_trace_open(const char *path, unsigned flags, ampdiag_trace_reader **out);
void ampdiag_trace_reader_close(ampdiag_trace_reader *r);
/* Re-read the table sizes of a trace that is still being written. */
int ampdiag_trace_refresh(ampdiag_trace_reader *r);

const char *ampdiag_trace_path(const ampdiag_trace_reader *r);
int ampdiag_trace_format_version(const ampdiag_trace_reader *r);
ampdiag_trace_status ampdiag_trace_status_of(const ampdiag_trace_reader *r);
const char *ampdiag_trace_status_text(const ampdiag_trace_reader *r); /* as stored */
/* 1 when the status is still "running": the writer was killed (or is still running); the
 * trace holds every record up to its last flush. */
int ampdiag_trace_cut_off(const ampdiag_trace_reader *r);
/* 1 when open had to clear a stale open-for-write mark. */
int ampdiag_trace_was_repaired(const ampdiag_trace_reader *r);

typedef enum ampdiag_attr_type {
    AMPDIAG_ATTR_STR = 0,
    AMPDIAG_ATTR_INT = 1,
    AMPDIAG_ATTR_DOUBLE = 2,
    AMPDIAG_ATTR_OTHER = 3 /* arrays, compounds, ...: kept by name only */
} ampdiag_attr_type;

typedef struct ampdiag_trace_attr {
    const char *name;
    ampdiag_attr_type type;
    const char *s;   /* STR */
    int64_t i;       /* INT */
    double d;        /* INT and DOUBLE */
} ampdiag_trace_attr;

size_t ampdiag_trace_nattrs(const ampdiag_trace_reader *r);
const ampdiag_trace_attr *ampdiag_trace_attr_at(const ampdiag_trace_reader *r, size_t i);
const ampdiag_trace_attr *ampdiag_trace_attr_find(const ampdiag_trace_reader *r, const char *name);
/* Convenience: the value, or NULL / dflt when absent or of another type (an int attribute is
 * also returned by _double). */
const char *ampdiag_trace_attr_str(const ampdiag_trace_reader *r, const char *name);
int64_t ampdiag_trace_attr_int(const ampdiag_trace_reader *r, const char *name, int64_t dflt);
double ampdiag_trace_attr_double(const ampdiag_trace_reader *r, const char *name, double dflt);

/* The rank attributes of a trace: 1 and *d filled for one rank's trace (strings owned by r;
 * "" when absent, sharding "none"); 0 and *d zeroed for a trace without them (a single
 * process); ESCHEMA, with a message naming the file, when rank or world_size is mistyped or out
 * of range or sharding is not one of its names (a reader that only shows them may ignore it). */
int ampdiag_trace_get_rank(const ampdiag_trace_reader *r, ampdiag_trace_rank *d);

/* 1 when the file's table ("/tensors" or "tensors") has a field of that name, 0 when it does
 * not (or the table is unknown). Optional fields (lost_if_fp16, lost_if_bf16) that a file lacks
 * read as 0: this separates "absent" from "0". */
int ampdiag_trace_has_field(const ampdiag_trace_reader *r, const char *table, const char *field);

typedef struct ampdiag_trace_counts {
    size_t layers, steps, tensors, hists, events, evals;
    size_t formats, whatifs; /* 0 in a version 1 trace */
    size_t quants;           /* /quant rows: 0 in a trace written before the table */
    size_t eval_examples;    /* /eval_examples rows: 0 in a trace written before the table */
} ampdiag_trace_counts;
void ampdiag_trace_get_counts(const ampdiag_trace_reader *r, ampdiag_trace_counts *c);

/* Read a whole table into a malloc'ed array (the caller frees it; NULL when n is 0). */
int ampdiag_trace_read_layers(ampdiag_trace_reader *r, ampdiag_trace_layer **out, size_t *n);
int ampdiag_trace_read_steps(ampdiag_trace_reader *r, ampdiag_trace_step **out, size_t *n);
int ampdiag_trace_read_events(ampdiag_trace_reader *r, ampdiag_trace_event **out, size_t *n);
int ampdiag_trace_read_evals(ampdiag_trace_reader *r, ampdiag_trace_eval **out, size_t *n);
/* The big tables can be read in ranges: rows [first, first + max) (max SIZE_MAX = to the end). */
int ampdiag_trace_read_tensors(ampdiag_trace_reader *r, size_t first, size_t max,
                               ampdiag_trace_tensor **out, size_t *n);
int ampdiag_trace_read_hists(ampdiag_trace_reader *r, size_t first, size_t max,
                             ampdiag_trace_hist **out, size_t *n);
/* /steps in ranges too (a long run's step records need not all be held at once). */
int ampdiag_trace_read_steps_range(ampdiag_trace_reader *r, size_t first, size_t max,
                                   ampdiag_trace_step **out, size_t *n);
/* Version 2's tables (a version 1 trace reads none: *n = 0). */
int ampdiag_trace_read_formats(ampdiag_trace_reader *r, ampdiag_trace_format **out, size_t *n);
int ampdiag_trace_read_whatif(ampdiag_trace_reader *r, size_t first, size_t max,
                              ampdiag_trace_whatif **out, size_t *n);
/* /quant (a trace written before the table reads none: *n = 0). */
int ampdiag_trace_read_quant(ampdiag_trace_reader *r, size_t first, size_t max, ampdiag_trace_quant **out,
                             size_t *n);
/* /eval_examples (a trace written before the table reads none: *n = 0). */
int ampdiag_trace_read_eval_examples(ampdiag_trace_reader *r, size_t first, size_t max,
                                     ampdiag_trace_eval_example **out, size_t *n);
/* /traced (optional in every version: a trace without it reads none, *n = 0). */
int ampdiag_trace_read_traced(ampdiag_trace_reader *r, ampdiag_trace_traced **out, size_t *n);
/* 1 when the trace has a /traced table (its rows are then every step with tensor records, and
 * why), 0 when it has none (the steps with /tensors rows are the traced ones; why is not known). */
int ampdiag_trace_has_traced(const ampdiag_trace_reader *r);

#ifdef __cplusplus
}
#endif

#endif /* AMPDIAG_TRACE_H */
