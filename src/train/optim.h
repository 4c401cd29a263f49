/*
 * optim.h - optimizers (SGD with momentum, AdamW), gradient unscaling and clipping, learning
 * rate schedules: everything between a backward pass and the next forward.
 *
 * The arithmetic is the backend's (optim_step, grad_norm, update_stats in backend.h); this
 * module holds the configuration, the state buffers (allocated by the backend) and the step
 * count. On traced steps the update copies the weights it starts from and the changes it
 * intends (optim_update's w_keep and dw_keep); the weight and update statistics and the lost
 * updates are taken from those copies later, by optim_update_stats on the tracer's thread
 * (src/train/train.c).
 */
#ifndef AMPDIAG_OPTIM_H
#define AMPDIAG_OPTIM_H

#include "ampdiag.h"
#include "backend/backend.h"

#include <stddef.h>
#include <stdint.h>

typedef bk_optim_kind optim_kind;
#define OPT_SGD BK_SGD
#define OPT_ADAMW BK_ADAMW

typedef bk_optim optim_config;

void optim_config_default(optim_config *c, optim_kind kind);
/* "sgd" / "adamw" -> kind; 0 or -1. */
int optim_kind_parse(const char *name, optim_kind *k);
const char *optim_kind_name(optim_kind k);

typedef struct optim {
    const backend *bk; /* whose memory holds the state and whose operations update */
    optim_config cfg;
    float *m, *v;   /* [n] momentum / first moment, second moment (AdamW) */
    size_t n;
    long t;         /* updates taken (skipped steps do not count), for Adam's bias correction */
} optim;

/* State for nparams parameters in bk's memory. 0, or -1 when out of memory. */
int optim_init(optim *o, const backend *bk, const optim_config *c, size_t nparams);
void optim_free(optim *o);

/* What one layer's update did (filled on traced steps). */
typedef bk_update_stats optim_stats;

void optim_stats_init(optim_stats *s);

/* Begin an update (counts it for bias correction). Call once per non-skipped step. */
void optim_begin(optim *o);
/*
 * Update parameters [off, off + n) of the buffer w at learning rate lr, with gradients g as the
 * backward left them (loss-scaled), each taken as (g * ginv) * gscale: ginv undoes the loss scale,
 * gscale is the clip coefficient. The weights are stored rounded to the weight format. dw_keep
 * and w_keep (each may be NULL) receive the intended changes dw[0..n) of this range and the
 * weights it held before, for optim_update_stats (a copy taken while the values pass through the
 * update costs less than another pass over them). w_copy (may be NULL) receives the updated
 * weights of the range rounded to the configuration's copy_fmt, and the number of updated weights
 * that are NaN or inf is added to *nonfinite (may be NULL), in the same pass.
 */
void optim_update(optim *o, float *w, const float *g, size_t off, size_t n, double lr, float ginv, float gscale,
                  float *dw_keep, float *w_keep, float *w_copy, uint64_t *nonfinite);

/*
 * What an update did to n parameters that held w_old before it, given its intended changes dw
 * (from optim_update): adds the update's statistics (histogram to hu when not NULL) and the lost
 * updates as optim_update stored them and if the weights were FP16 / BF16 to st. st->weight is
 * left alone (take the weights' statistics from w_old; the update/weight ratio is
 * sqrt(update.sumsq / weight.sumsq)). Reads only the optimizer's configuration: it may run on
 * another thread.
 */
void optim_update_stats(const optim *o, const float *w_old, const float *dw, size_t n, optim_stats *st,
                        ampdiag_hist *hu);
/* The same for k requests at once (a device waits once: backend.h's update_stats_many). */
void optim_update_stats_many(const optim *o, size_t k, const bk_update_req *req);

/* PyTorch clip_grad_norm_: coefficient min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0
 * (no clipping) or the norm is not finite. */
float clip_coefficient(double norm, double max_norm);

/* ------------------------------------------------------------------ learning-rate schedule */

typedef enum { SCHED_CONSTANT = 0, SCHED_COSINE = 1, SCHED_RANGE = 2 } sched_kind;

typedef struct schedule {
    sched_kind kind;
    double lr;       /* peak learning rate */
    long warmup;     /* linear warm-up steps (from lr/warmup to lr) */
    long total;      /* cosine: steps over which lr decays to min_lr */
    double min_lr;
} schedule;

/* "constant", "cosine[:WARMUP[:MIN_LR]]" or "range:MIN_LR" (the LR range test: MIN_LR at step 0
 * growing exponentially to lr at the last step). 0, or -1 with a message in err. */
int schedule_parse(schedule *s, const char *text, double lr, long total, char *err, size_t errlen);
/* Learning rate of step t (0-based). */
double schedule_lr(const schedule *s, long t);

#endif
