/*
 * train.h - the instrumented training loop behind `ampdiag run`.
 *
 * One step: forward (loss in FP32), backward of loss * scale, a pass over the gradients that
 * sums the squares of their unscaled values and counts the non-finite ones (the gradients stay
 * scaled in memory; the optimizer unscales them as it reads them), the loss-scaler update
 * (skipping the step on non-finite gradients, naming the first layer and tensor that held one,
 * in execution order), clipping by the global norm, and the optimizer pass. On traced steps the
 * statistics are taken by the tracer thread while training goes on (tracer.h; on the training
 * thread itself with --trace-threads 0): activations and gradients as the format held them
 * (gradients scaled), and weights, updates and lost updates from the copies the optimizer pass
 * keeps (optim.h). A traced step's records go to the trace (src/trace/) a step or two later,
 * in step order. Which steps are traced in full, and why, is cadence.h's: a cadence that keeps
 * their cost within a budget (or a fixed one), the first and last step, and every event with
 * the steps after it.
 */
#ifndef AMPDIAG_TRAIN_H
#define AMPDIAG_TRAIN_H

#include "model/model.h"
#include "train/optim.h"
#include "train/scaler.h"

#include <stddef.h>
#include <stdint.h>

typedef struct train_config {
    model_options mo;          /* spec, precision, fp32 layers, FTZ, seed */
    const char *data;          /* "synthetic:NAME" or a file; NULL: the model's default */
    const char *device;        /* backend by name (backend_by_name): "cpu" (default, NULL) */
    const backend *bk;         /* the backend itself, instead of by name (tests, selftest); NULL */
    long steps;
    int batch;
    double lr;
    const char *schedule;      /* "constant" | "cosine[:WARMUP[:MIN_LR]]" */
    optim_config opt;
    double clip;               /* max global gradient norm; 0 = off */
    scaler_config scaler;
    const char *loss_scale;    /* as given on the command line, for the trace */
    uint64_t seed;
    int shuffle;
    int standardize;           /* standardise the inputs (data_standardize) before the first step */
    int trace_every;           /* full tensor records every N steps; 0 = none (step records only);
                                  -1 (default) = at a cadence chosen to keep within trace_budget
                                  (cadence.h); steps are always recorded */
    double trace_budget;       /* with trace_every -1: the share of CPU time full records may take,
                                  percent (default 5; 0 = only on events, the first and last step) */
    int trace_after;           /* steps after an event (non-finite value, skip, spike) recorded in
                                  full too (default 3) */
    int hist_every;            /* histograms every N steps (0 = none) */
    int fp8_history;           /* FP8 delayed-scaling what-if: steps of amax history (default
                                  1024, TE's; 0 = not counted) */
    int fp8_margin;            /* ... and its margin (scale / 2^margin; default 0) */
    const char *whatif;        /* block-scaled what-if schemes (ampdiag_qspec_parse's list; NULL:
                                  ampdiag_qspec_default(); "none": not counted) */
    int whatif_every;          /* ... on traced steps every N steps (0 = never; -1, the default: on
                                  the histogram steps, hist_every) */
    int trace_threads;         /* tensor statistics on a worker thread: 1, or 0 = on the training
                                  thread; -1 = 1 when the machine has two or more cores */
    int eval_every;            /* evaluation every N steps (and after the last) */
    int patience;              /* updated (not skipped) steps with non-finite or exploded loss before
                                  stopping as diverged */
    const char *out;           /* trace path */
    int overwrite;
    unsigned flush_every;      /* trace flush every N steps */
    double flush_seconds;      /* ... or T seconds */
    const char *init_from;     /* weights file or NULL */
    const char *save_weights;  /* weights file or NULL */
    const char *command_line;
    const char *scenario;      /* the --scenario preset, or NULL */
    int progress;              /* 0 none, 1 plain lines, 2 a bar (terminal) */
    int dry_run;               /* check the data, model, weights and optimizer, then stop: no
                                  step, no trace, no weights written (run --dry-run) */
} train_config;

void train_config_default(train_config *c);

typedef struct train_result {
    long steps_done;
    int status;                /* ampdiag_trace_status */
    int stop_signal;           /* SIGINT or SIGTERM when that stopped the run (status interrupted), else 0 */
    double loss_first, loss_last, loss_min;
    double eval_loss, eval_metric;   /* last evaluation (NaN if none) */
    const char *eval_metric_name;
    long skipped;
    long first_skip_step;
    char first_skip_reason[96];
    double scale_first, scale_last, scale_min;
    long backoffs, growths;
    long diverged_at;          /* first step of the divergence (-1) */
    double wall_s;
    int trace_threads;         /* 1: tensor statistics were taken on a worker thread */
    double trace_wait_s;       /* time the training thread waited for that thread */
    long full_steps;           /* steps recorded in full (/traced rows) ... */
    long event_steps;          /* ... of which for an event of their own */
    int cadence;               /* the cadence at the end (0: none) */
    long long trace_bytes;
    size_t nparams;
    int nlayers;
    char model_desc[128];
} train_result;

/* Exit codes of the command line. */
#define TRAIN_OK 0
#define TRAIN_EBADINPUT 2
#define TRAIN_EIO 3

/* Run the configured training. Returns TRAIN_OK (also for a run that diverged: that is data),
 * TRAIN_EBADINPUT or TRAIN_EIO with a message in err. A batch larger than the data's training
 * rows is said before any step, with the data's warnings (stderr, and note events in the
 * trace). With c->dry_run, everything is set up
 * and checked as for the run (r->nparams, r->nlayers, r->model_desc filled), then freed. */
int train_run(const train_config *c, train_result *r, char *err, size_t errlen);

#endif
