/*
 * train.c - the instrumented training loop (train.h).
 */
#include "train/train.h"

#include "ampdiag_trace.h"
#include "backend/backend.h"
#include "monitor/monitor.h"
#include "train/cadence.h"
#include "train/data.h"
#include "train/fp8.h"
#include "train/quant.h"
#include "train/tracer.h"
#include "train/weights.h"
#include "util/escape.h"
#include "util/util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void train_config_default(train_config *c)
{
    memset(c, 0, sizeof *c);
    c->mo = model_options_default();
    c->steps = 500;
    c->batch = 64;
    c->lr = 1e-3;
    c->schedule = "constant";
    optim_config_default(&c->opt, OPT_ADAMW);
    scaler_config_default(&c->scaler, SCALER_DYNAMIC);
    c->loss_scale = "dynamic";
    c->seed = 1;
    c->shuffle = 1;
    c->trace_every = -1;
    c->trace_budget = CADENCE_DEFAULT_BUDGET;
    c->trace_after = CADENCE_DEFAULT_AFTER;
    c->hist_every = 50;
    c->whatif_every = -1;
    c->fp8_history = FP8_DEFAULT_HISTORY;
    c->fp8_margin = 0;
    c->trace_threads = -1;
    c->eval_every = 100;
    c->patience = MON_DIVERGE_PATIENCE;
    c->out = "run.h5";
    c->flush_every = 100;
    c->flush_seconds = 2.0;
}

/* ------------------------------------------------------------------ signals */

static volatile sig_atomic_t stop_requested; /* the signal's number */

static void on_signal(int sig)
{
    stop_requested = sig;
}

/* ------------------------------------------------------------------ helpers */

__attribute__((format(printf, 3, 4)))
static void say(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A trace call failed: keep the first message, classify it. */
static int trace_fail(int rc, char *err, size_t errlen)
{
    say(err, errlen, "%s", ampdiag_trace_errmsg());
    return ampdiag_trace_err_is_io(rc) ? TRAIN_EIO : TRAIN_EBADINPUT;
}

static void fmt_duration(double s, char *buf, size_t n)
{
    long t = (long)(s + 0.5);
    snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
}

static void progress(const train_config *c, long step, double loss, double scale, long skipped, double t0,
                     int final)
{
    if (!c->progress)
        return;
    double el = now_s() - t0;
    double rate = el > 0 ? (double)step / el : 0;
    double eta = rate > 0 ? (double)(c->steps - step) / rate : 0;
    char etas[32];
    fmt_duration(eta, etas, sizeof etas);
    char sc[32];
    char ls[32];
    fmt_num(ls, sizeof ls, loss, 4);
    if (scale > 0 && isfinite(scale))
        snprintf(sc, sizeof sc, "2^%g", log2(scale));
    else
        snprintf(sc, sizeof sc, "%g", scale);
    if (c->progress == 2) {
        int width = 24, fill = c->steps ? (int)((double)width * (double)step / (double)c->steps) : width;
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '=' : (i == fill ? '>' : ' ');
        bar[width] = 0;
        fprintf(stderr, "\rstep %6ld/%ld [%s] loss %s  scale %s  skipped %ld  %.1f step/s  ETA %s   ", step,
                c->steps, bar, ls, sc, skipped, rate, etas);
        if (final)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "step %ld/%ld loss %s scale %s skipped %ld %.1f step/s ETA %s\n", step, c->steps, ls,
                sc, skipped, rate, etas);
    }
    fflush(stderr);
}

/* What the trace calls each kind of model tensor. */
static const ampdiag_tensor_kind kind_of[MT_COUNT] = {
    [MT_ACTIVATION] = AMPDIAG_KIND_ACTIVATION,
    [MT_ACTIVATION_GRAD] = AMPDIAG_KIND_ACTIVATION_GRAD,
    [MT_WEIGHT] = AMPDIAG_KIND_WEIGHT,
    [MT_WEIGHT_GRAD] = AMPDIAG_KIND_WEIGHT_GRAD,
};

/* Per layer: whether an update has made a weight NaN/inf (reported once, as an event). The run's
 * findings are read back from the trace by the analysis (src/analysis/findings.c). */
typedef struct layer_summary {
    int weights_nonfinite;
    uint64_t nonfinite_now; /* NaN/inf weights after the last update (counted by the optimizer) */
} layer_summary;

/* ------------------------------------------------------------------ the run */

#define NSLOTS 3 /* traced steps in flight: being taken, being finished, being written */
#define QCAP 8   /* step records held back (at most three are, see flush_records) */

typedef struct run {
    const train_config *c;
    train_result *r;
    model *m;
    dataset ds;
    data_facts facts;          /* what the trace records about the data (data.h) */
    batcher tb;
    optim opt;
    scaler sc;
    schedule sched;
    ampdiag_trace_writer *w;
    layer_summary *ls;
    int *rows;
    float *xb;
    int32_t *yb, *inb, *tgb;
    int T;                       /* targets per example (1 for classification) */
    mon_spike spike;             /* loss spikes and divergence: the rules the analysis uses */
    mon_diverge div;
    /* tracing: the statistics of a traced step are taken by the tracer (a worker thread) while
     * training goes on, and written to the trace a step or two later (see step_once) */
    tracer *tr;
    cadence cd;                  /* which steps are traced in full, and why */
    long last_hist;              /* the last step that took histograms (-1: none) */
    long last_quant;             /* ... and the block what-if, when it has a cadence of its own */
    fp8_delayed *f8;             /* FP8 delayed-scaling amax histories (NULL: not counted) */
    quant_plan *qp;              /* the block-scaled what-if (--whatif; NULL: not counted) */
    struct tslot *slots;         /* NSLOTS, used in turn by traced steps */
    bk_stats_req *sreq;          /* [nlayers]: the tracer thread's requests of one job */
    bk_update_req *ureq;
    fp8_job *f8job;
    long ntraced;
    float *w_old[2], *dw[2];     /* [nparams] each: the weights a traced step's update started
                                  * from and the changes it intended, for traced steps in turn */
    uint64_t tk_buf[2];          /* the last job reading w_old[k] and dw[k] */
    uint64_t tk_acts, tk_grads;  /* the last jobs reading activations / gradients */
    struct tslot *acts_slot;     /* the traced step whose activations' job is tk_acts */
    double kick_at;              /* when the tracer was last kicked after a backward */
    double acts_job_s, acts_room_s; /* smoothed: the activations' job's time, and the time from
                                  * that kick to the next forward, which it must fit in */
    struct tslot *upd_slot;      /* a traced step whose update job is not posted yet */
    /* step records wait here, in step order, while a traced step before them is not written */
    struct qrec {
        struct tslot *S;         /* a traced step (its record is S->rec), or NULL: rec */
        ampdiag_trace_step rec;
    } q[QCAP];
    int qhead, qn;
} run;

/* One layer's statistics in a traced step. */
typedef struct lslot {
    const float *x[MT_COUNT];    /* the tensors, as the training thread handed them over */
    size_t n[MT_COUNT];
    ampdiag_tstats st[MT_COUNT];
    ampdiag_hist h[MT_COUNT];
    fp8_counts f8[MT_COUNT];     /* delayed-scaling FP8 counts */
    int have[MT_COUNT];
    optim_stats upd;
    ampdiag_hist hu;
} lslot;

/* One traced step: filled by the tracer's jobs, written by drain(). */
typedef struct tslot {
    run *R;
    long step;
    int hist, skip;
    int quant;                   /* the block-scaled what-if is counted (--whatif-every) */
    int buf;                     /* its update's copies are in R->w_old[buf], R->dw[buf] */
    ampdiag_trace_traced trow;   /* its /traced row: why it was traced */
    double acts_s;               /* how long its activations' job took */
    lslot *L;                    /* [nlayers] */
    quant_slot *qs;              /* its block-scaled what-if counts (NULL: none) */
    uint64_t last;               /* the step's last job */
    ampdiag_trace_step rec;      /* its step record, update ratio still to fill */
} tslot;

/* A tensor record, its delayed-scaling FP8 what-if rows (f8 may be NULL) and its histogram (h
 * may be NULL). */
static int record_tensor(run *R, long step, int li, ampdiag_tensor_kind kind, const ampdiag_tstats *s,
                         const fp8_counts *f8, const ampdiag_hist *h, char *err, size_t errlen)
{
    int rc = ampdiag_trace_append_tensor(R->w, step, li, kind, s, 0);
    if (rc < 0)
        return trace_fail(rc, err, errlen);
    for (int f = 0; R->f8 && f8 && f8->have && f < FP8_NFORMATS; f++)
        if ((rc = ampdiag_trace_append_whatif(R->w, step, li, kind, fp8_formats[f], AMPDIAG_SCALING_DELAYED,
                                              f8->scale[f], s->count, f8->c[f])) < 0)
            return trace_fail(rc, err, errlen);
    if (h && (rc = ampdiag_trace_append_hist(R->w, step, li, kind, h)) < 0)
        return trace_fail(rc, err, errlen);
    return 0;
}

static int event(run *R, long step, int li, ampdiag_event_code code, double value, const char *msg, char *err,
                 size_t errlen)
{
    int rc = ampdiag_trace_append_event(R->w, step, li, code, value, msg);
    return rc < 0 ? trace_fail(rc, err, errlen) : 0;
}

/* An event in a phase: an evaluation's names the validation rows of its batch. */
static int event_in(run *R, long step, int li, ampdiag_event_code code, double value, const char *msg,
                    ampdiag_event_phase phase, const long rows[2], char *err, size_t errlen)
{
    int rc = ampdiag_trace_append_event_in(R->w, step, li, code, value, msg, phase, rows[0], rows[1]);
    return rc < 0 ? trace_fail(rc, err, errlen) : 0;
}

/* ------------------------------------------------------------------ tracer jobs */

/* On the training thread, before a job is posted: where one kind of tensor of every layer is
 * and how big (the model's own bookkeeping is not read from the tracer thread). */
static void hand_over(tslot *S, model_tensor_kind mk)
{
    model *m = S->R->m;
    for (int i = 0; i < m->nlayers; i++) {
        lslot *l = &S->L[i];
        l->x[mk] = model_tensor(m, i, mk, &l->n[mk]);
        l->have[mk] = l->x[mk] && l->n[mk] > 0;
    }
}

/* Statistics of one kind of model tensor of every layer, into the slot, with their FP8 counts
 * and block what-if. A backend that queues many records (a device: tstats_many) is asked for
 * every layer's at once and waits once, then for the FP8 counts their records do not settle, all
 * at once too (fp8_delayed_count_many); the CPU takes each tensor's record and FP8 counts in one
 * pass (fp8_stats: tstats_ge). The records are the same either way. */
static void stats_of(tslot *S, model_tensor_kind mk)
{
    run *R = S->R;
    const backend *bk = R->m->bk;
    if (bk->tstats_many && !bk->tstats_ge) {
        size_t k = 0, m = 0;
        for (int i = 0; i < R->m->nlayers; i++) {
            lslot *l = &S->L[i];
            if (l->have[mk])
                R->sreq[k++] = (bk_stats_req){l->x[mk], l->n[mk], &l->st[mk], S->hist ? &l->h[mk] : NULL};
        }
        bk_tstats_many(bk, k, R->sreq);
        for (int i = 0; i < R->m->nlayers; i++) {
            lslot *l = &S->L[i];
            if (l->have[mk])
                R->f8job[m++] = (fp8_job){i, kind_of[mk], l->x[mk], l->n[mk], &l->st[mk], &l->f8[mk]};
        }
        fp8_delayed_count_many(R->f8, bk, m, R->f8job);
    } else {
        for (int i = 0; i < R->m->nlayers; i++) {
            lslot *l = &S->L[i];
            if (l->have[mk])
                fp8_stats(R->f8, bk, i, kind_of[mk], l->x[mk], l->n[mk], &l->st[mk], S->hist ? &l->h[mk] : NULL,
                          &l->f8[mk]);
        }
    }
    for (int i = 0; i < R->m->nlayers; i++) {
        lslot *l = &S->L[i];
        if (l->have[mk])
            quant_count(R->qp, bk, S->quant ? S->qs : NULL, i, mk, l->x[mk], l->n[mk], &l->st[mk]);
    }
}

static void job_activations(void *arg)
{
    tslot *S = arg;
    double t0 = now_s();
    stats_of(S, MT_ACTIVATION);
    S->acts_s = now_s() - t0;
}

static void job_gradients(void *arg)
{
    stats_of(arg, MT_ACTIVATION_GRAD);
    stats_of(arg, MT_WEIGHT_GRAD);
}

/* After the update: the statistics of the weights it started from (with their FP8 counts, as
 * stats_of takes them), the update's own statistics and its lost updates, from the copies the
 * optimizer kept, and the weights' block what-if. */
static void job_updates(void *arg)
{
    tslot *S = arg;
    run *R = S->R;
    model *m = R->m;
    const backend *bk = m->bk;
    const float *w_old = R->w_old[S->buf], *dw = R->dw[S->buf];
    int many = bk->tstats_many && !bk->tstats_ge;
    size_t k = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const layer *L = &m->layers[i];
        if (L->nparams == 0)
            continue;
        size_t off = (size_t)(L->p - m->params);
        lslot *l = &S->L[i];
        if (!many)
            fp8_stats(R->f8, bk, i, AMPDIAG_KIND_WEIGHT, w_old + off, L->nparams, &l->st[MT_WEIGHT],
                      S->hist ? &l->h[MT_WEIGHT] : NULL, &l->f8[MT_WEIGHT]);
        optim_stats_init(&l->upd);
        if (S->hist)
            ampdiag_hist_init(&l->hu);
        R->sreq[k] = (bk_stats_req){w_old + off, L->nparams, &l->st[MT_WEIGHT], S->hist ? &l->h[MT_WEIGHT] : NULL};
        R->ureq[k] = (bk_update_req){w_old + off, dw + off, L->nparams, &l->upd, S->hist ? &l->hu : NULL};
        R->f8job[k++] = (fp8_job){i, AMPDIAG_KIND_WEIGHT, w_old + off, L->nparams, &l->st[MT_WEIGHT],
                                  &l->f8[MT_WEIGHT]};
    }
    if (many) {
        bk_tstats_many(bk, k, R->sreq);
        fp8_delayed_count_many(R->f8, bk, k, R->f8job);
    }
    optim_update_stats_many(&R->opt, k, R->ureq);
    for (int i = 0; i < m->nlayers; i++) {
        const layer *L = &m->layers[i];
        if (L->nparams > 0)
            quant_count(R->qp, bk, S->quant ? S->qs : NULL, i, MT_WEIGHT, w_old + (L->p - m->params), L->nparams,
                        &S->L[i].st[MT_WEIGHT]);
    }
}

/* The update job of the last traced step: posted after the next step's gradient job, so that
 * the next activations are not queued behind it, or at the end by drain. */
static void post_update(run *R)
{
    if (R->upd_slot) {
        tslot *S = R->upd_slot;
        R->tk_buf[S->buf] = S->last = tracer_post(R->tr, job_updates, S);
        R->upd_slot = NULL;
    }
}

/* Write a traced step's records, in the order: activations, activation gradients, weight
 * gradients, then weights and updates layer by layer; then its step record. */
static int drain(run *R, tslot *S, char *err, size_t errlen)
{
    model *m = R->m;
    int rc;
    if (R->upd_slot == S)
        post_update(R);
    tracer_wait(R->tr, S->last);
    if ((rc = ampdiag_trace_append_traced(R->w, &S->trow)) < 0)
        return trace_fail(rc, err, errlen);
    static const model_tensor_kind order[3] = {MT_ACTIVATION, MT_ACTIVATION_GRAD, MT_WEIGHT_GRAD};
    for (int k = 0; k < 3; k++) {
        model_tensor_kind mk = order[k];
        for (int i = 0; i < m->nlayers; i++) {
            lslot *l = &S->L[i];
            if (!l->have[mk] || (mk == MT_WEIGHT_GRAD && m->layers[i].nparams == 0))
                continue;
            const ampdiag_tstats *st = &l->st[mk];
            if ((rc = record_tensor(R, S->step, i, kind_of[mk], st, &l->f8[mk], S->hist ? &l->h[mk] : NULL, err,
                                    errlen)) ||
                (rc = quant_write(R->qp, S->qs, R->w, S->step, i, mk, kind_of[mk])) < 0)
                return rc < 0 ? trace_fail(rc, err, errlen) : rc;
        }
    }
    double w_ss = 0, dw_ss = 0;
    if (!S->skip)
        for (int i = 0; i < m->nlayers; i++) {
            lslot *l = &S->L[i];
            if (m->layers[i].nparams == 0)
                continue;
            const optim_stats *st = &l->upd;
            w_ss += l->st[MT_WEIGHT].sumsq; /* finite values only */
            dw_ss += st->update.sumsq;
            if ((rc = record_tensor(R, S->step, i, AMPDIAG_KIND_WEIGHT, &l->st[MT_WEIGHT], &l->f8[MT_WEIGHT],
                                    S->hist ? &l->h[MT_WEIGHT] : NULL, err, errlen)) ||
                (rc = quant_write(R->qp, S->qs, R->w, S->step, i, MT_WEIGHT, AMPDIAG_KIND_WEIGHT)) < 0)
                return rc < 0 ? trace_fail(rc, err, errlen) : rc;
            if ((rc = ampdiag_trace_append_update(R->w, S->step, i, &st->update, st->lost_updates, st->lost_if_fp16,
                                                  st->lost_if_bf16)) < 0)
                return trace_fail(rc, err, errlen);
            if (S->hist && (rc = ampdiag_trace_append_hist(R->w, S->step, i, AMPDIAG_KIND_UPDATE, &l->hu)) < 0)
                return trace_fail(rc, err, errlen);
        }
    S->rec.update_ratio = !S->skip && w_ss > 0 ? sqrt(dw_ss / w_ss) : NAN;
    if ((rc = ampdiag_trace_append_step(R->w, &S->rec)) < 0)
        return trace_fail(rc, err, errlen);
    return 0;
}

/* Write the held-back step records in step order: those of steps up to `upto`, waiting for
 * their statistics if need be, then those that are ready. */
static int flush_records(run *R, long upto, char *err, size_t errlen)
{
    while (R->qn > 0) {
        struct qrec *e = &R->q[R->qhead];
        int rc;
        if (e->S) {
            if (e->S->step > upto && (R->upd_slot == e->S || !tracer_done(R->tr, e->S->last)))
                break;
            if ((rc = drain(R, e->S, err, errlen)))
                return rc;
        } else if ((rc = ampdiag_trace_append_step(R->w, &e->rec)) < 0) {
            return trace_fail(rc, err, errlen);
        }
        R->qhead = (R->qhead + 1) % QCAP;
        R->qn--;
    }
    return 0;
}

/* A step's record: written now, or held back behind a traced step that is not written yet (S:
 * a traced step, whose record is in S->rec). */
static int queue_record(run *R, tslot *S, const ampdiag_trace_step *rec, char *err, size_t errlen)
{
    int rc;
    if (!S && R->qn == 0)
        return (rc = ampdiag_trace_append_step(R->w, rec)) < 0 ? trace_fail(rc, err, errlen) : 0;
    if (R->qn == QCAP) {
        const struct qrec *h = &R->q[R->qhead];
        if ((rc = flush_records(R, h->S ? h->S->step : h->rec.step, err, errlen)))
            return rc;
    }
    struct qrec *e = &R->q[(R->qhead + R->qn++) % QCAP];
    e->S = S;
    if (rec)
        e->rec = *rec;
    return 0;
}

/* Is any of the n values NaN (else they are +-inf)? */
static int holds_nan(const run *R, const float *x, size_t n)
{
    ampdiag_tstats s;
    R->m->bk->tstats(R->m->bk, x, n, &s, NULL);
    return s.n_nan > 0;
}

/* After a forward pass whose loss is not finite: the first layer (in forward order) whose
 * activations are non-finite into *li and *nan (NaN or inf), with a nan_forward/inf_forward
 * event at step: a training step's (rows < 0), or an evaluation's on validation rows
 * rows[0]..rows[1] (its message says so too). 0 or a TRAIN_ error. */
static int forward_origin_event(run *R, long step, float loss, const long rows[2], int *li, int *nan,
                                char *err, size_t errlen)
{
    model *m = R->m;
    *nan = 0;
    *li = model_first_nonfinite_activation(m);
    if (*li < 0)
        return 0;
    size_t n;
    float *x = model_tensor(m, *li, MT_ACTIVATION, &n);
    *nan = holds_nan(R, x, n);
    char msg[128], where[64] = "";
    char lv[32];
    if (rows[0] >= 0)
        snprintf(where, sizeof where, "eval: validation rows %ld-%ld: ", rows[0], rows[1]);
    snprintf(msg, sizeof msg, "%s%s in %s activation (first in forward order); loss %s", where,
             *nan ? "NaN" : "inf", m->layers[*li].name, fmt_num(lv, sizeof lv, (double)loss, 6));
    return event_in(R, step, *li, *nan ? AMPDIAG_EV_NAN_FORWARD : AMPDIAG_EV_INF_FORWARD, (double)loss, msg,
                    rows[0] >= 0 ? AMPDIAG_PHASE_EVAL : AMPDIAG_PHASE_TRAIN, rows, err, errlen);
}

/* An evaluation after step (-1: before the first, on the initial weights) over the validation
 * rows: its loss (the model's, batch by batch), accuracy and the standard error of the loss; with
 * examples, each validation row's loss and share of correct predictions too (/eval_examples:
 * the initial and the last evaluation, what runs on the same examples are compared by, pairwise).
 * 0 or a TRAIN_ error. */
static int evaluate(run *R, long step, int examples, char *err, size_t errlen)
{
    const dataset *ds = &R->ds;
    int B = R->c->batch;
    int nval = ds->n_val;
    double loss_sum = 0, ex_sum = 0, ex_sumsq = 0;
    long correct = 0, total = 0, rows_done = 0;
    int origin_told = 0;
    double *ex_loss = NULL, *ex_metric = NULL;
    if (examples && nval > 0) {
        ex_loss = calloc((size_t)nval, sizeof *ex_loss);
        ex_metric = calloc((size_t)nval, sizeof *ex_metric);
        if (!ex_loss || !ex_metric) {
            free(ex_loss);
            free(ex_metric);
            say(err, errlen, "evaluation: out of memory");
            return TRAIN_EIO;
        }
    }
    int rc = 0;
    for (int start = 0; start < nval && !rc; start += B) {
        int b = nval - start < B ? nval - start : B;
        for (int i = 0; i < b; i++)
            R->rows[i] = start + i;
        data_gather(ds, 1, R->rows, b, R->xb, R->yb, R->inb, R->tgb);
        float loss;
        const int32_t *targets = ds->kind == DATA_TOKENS ? R->tgb : R->yb;
        if (model_forward(R->m, ds->kind == DATA_CLASSIFICATION ? R->xb : NULL,
                          ds->kind == DATA_TOKENS ? R->inb : NULL, targets, b, &loss) != 0) {
            say(err, errlen, "evaluation: %s", model_error(R->m));
            rc = TRAIN_EBADINPUT;
            break;
        }
        if (!isfinite(loss) && !origin_told && step >= 0) { /* the first such batch of this evaluation
                                                            (the initial one has no step to name) */
            int li, nan;
            const long rows[2] = {start, start + b - 1};
            if ((rc = forward_origin_event(R, step, loss, rows, &li, &nan, err, errlen)))
                break;
            origin_told = 1;
        }
        loss_sum += (double)loss * b;
        rows_done += b;
        int nrows, ncols;
        const float *logits = model_logits(R->m, &nrows, &ncols);
        float *host = malloc((size_t)nrows * ncols * sizeof *host);
        if (!host) {
            say(err, errlen, "evaluation: out of memory");
            rc = TRAIN_EIO;
            break;
        }
        R->m->bk->to_host(R->m->bk, host, logits, (size_t)nrows * ncols * sizeof *host);
        int per = b > 0 ? nrows / b : 1; /* positions per example (1: a row of classification data) */
        for (int rrow = 0; rrow < nrows; rrow++) {
            const float *lg = host + (size_t)rrow * ncols;
            int best = 0;
            for (int k = 1; k < ncols; k++)
                if (lg[k] > lg[best]) best = k;
            correct += best == targets[rrow];
            total++;
            /* this example's cross-entropy, in double, for the standard error of the mean */
            double lse = 0;
            for (int k = 0; k < ncols; k++)
                lse += exp((double)lg[k] - (double)lg[best]);
            int tgt = targets[rrow];
            double li = tgt >= 0 && tgt < ncols ? log(lse) + (double)lg[best] - (double)lg[tgt] : NAN;
            ex_sum += li;
            ex_sumsq += li * li;
            if (ex_loss && per > 0) {
                int e = start + rrow / per;
                if (e < nval) {
                    ex_loss[e] += li / per;
                    ex_metric[e] += (double)(best == tgt) / per;
                }
            }
        }
        free(host);
    }
    if (!rc) {
        double el = rows_done ? loss_sum / (double)rows_done : NAN;
        double acc = total ? (double)correct / (double)total : NAN;
        /* the noise of the mean over these examples: sd / sqrt(n) */
        double se = NAN;
        if (total > 1) {
            double m = ex_sum / (double)total;
            double var = (ex_sumsq - ex_sum * m) / (double)(total - 1);
            se = isnan(var) ? NAN : var > 0 ? sqrt(var / (double)total) : 0;
        }
        R->r->eval_loss = el;
        R->r->eval_metric = acc;
        int trc = ampdiag_trace_append_eval_se(R->w, step, el, acc, se);
        if (trc >= 0 && ex_loss)
            trc = ampdiag_trace_append_eval_examples(R->w, step, ex_loss, ex_metric, (size_t)nval);
        if (trc < 0)
            rc = trace_fail(trc, err, errlen);
    }
    free(ex_loss);
    free(ex_metric);
    return rc;
}

static void describe_model(run *R)
{
    int nl = 0;
    for (int i = 0; i < R->m->nlayers; i++)
        nl += R->m->layers[i].nparams > 0;
    double mp = (double)R->m->nparams / 1e6;
    snprintf(R->r->model_desc, sizeof R->r->model_desc, "%d layers with parameters, %.*fM params", nl,
             mp < 0.1 ? 3 : 2, mp);
    R->r->nparams = R->m->nparams;
    R->r->nlayers = R->m->nlayers;
}

/* The delayed scaling behind /whatif's "delayed" rows, where they are counted (the backend has
 * the operation; traced runs only). */
static int write_fp8_settings(run *R, char *err, size_t errlen)
{
    const train_config *c = R->c;
    int rc;
    if (c->fp8_history <= 0 || c->trace_every == 0 || !R->m->bk->whatif_scaled)
        return 0;
    if ((rc = ampdiag_trace_set_attr_int(R->w, AMPDIAG_ATTR_FP8_AMAX_HISTORY, c->fp8_history)) < 0 ||
        (rc = ampdiag_trace_set_attr_int(R->w, AMPDIAG_ATTR_FP8_MARGIN, c->fp8_margin)) < 0 ||
        (rc = ampdiag_trace_set_attr_str(R->w, AMPDIAG_ATTR_FP8_AMAX_ALGO, "max")) < 0)
        return trace_fail(rc, err, errlen);
    return 0;
}

/* The block-scaled what-if schemes behind /quant's rows, where they are counted. */
static int write_quant_settings(run *R, char *err, size_t errlen)
{
    int rc;
    const train_config *c = R->c;
    if (R->qp && ((rc = ampdiag_trace_set_attr_str(R->w, "quant_schemes", quant_plan_names(R->qp))) < 0 ||
                  (rc = ampdiag_trace_set_attr_int(R->w, "quant_every",
                                                   c->whatif_every < 0 ? c->hist_every : c->whatif_every)) < 0))
        return trace_fail(rc, err, errlen);
    return 0;
}

/* The settings the analysis's rules read, as typed attributes. 0 or a TRAIN_ error. */
static int write_typed_settings(run *R, char *err, size_t errlen)
{
    const train_config *c = R->c;
    ampdiag_trace_writer *w = R->w;
    const int adam = c->opt.kind == OPT_ADAMW;
    const struct {
        const char *k;
        double v;
        int on;
    } dbl[] = {
        {AMPDIAG_ATTR_OPT_EPS, c->opt.eps, adam},
        {AMPDIAG_ATTR_OPT_BETA1, c->opt.beta1, adam},
        {AMPDIAG_ATTR_OPT_BETA2, c->opt.beta2, adam},
        {AMPDIAG_ATTR_OPT_MOMENTUM, c->opt.momentum, !adam},
        {AMPDIAG_ATTR_OPT_WEIGHT_DECAY, c->opt.weight_decay, 1},
        {AMPDIAG_ATTR_SCALER_INIT, c->scaler.init, 1},
        {AMPDIAG_ATTR_SCALER_GROWTH, c->scaler.growth_factor, 1},
        {AMPDIAG_ATTR_SCALER_BACKOFF, c->scaler.backoff_factor, 1},
        {AMPDIAG_ATTR_SCALER_MIN, c->scaler.min_scale, 1},
    };
    int rc;
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++)
        if (dbl[i].on && (rc = ampdiag_trace_set_attr_double(w, dbl[i].k, dbl[i].v)) < 0)
            return trace_fail(rc, err, errlen);
    if ((rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_SCALER_INTERVAL, c->scaler.growth_interval)) < 0 ||
        (rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_SCALER_HYSTERESIS, c->scaler.hysteresis)) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_OPT_STATE_FORMAT,
                                         ampdiag_format_get(c->opt.state_fmt)->name)) < 0)
        return trace_fail(rc, err, errlen);
    return 0;
}

/* What the trace records about the data (data_facts): the validation set and the inputs'
 * scale. 0 or a TRAIN_ error. */
static int write_data_facts(run *R, char *err, size_t errlen)
{
    const data_facts *f = &R->facts;
    ampdiag_trace_writer *w = R->w;
    const struct {
        const char *k;
        int64_t v;
    } ints[] = {
        {AMPDIAG_ATTR_DATA_ROWS, f->rows}, {AMPDIAG_ATTR_DATA_VAL_ROWS, f->val_rows},
        {AMPDIAG_ATTR_DATA_VAL_TARGETS, f->val_targets},
        {AMPDIAG_ATTR_DATA_CLASSES, f->classes}, {AMPDIAG_ATTR_DATA_VAL_CLASSES, f->val_classes},
        {AMPDIAG_ATTR_DATA_LABELS_SORTED, f->labels_sorted},
    };
    const struct {
        const char *k;
        double v;
        int on;
    } dbl[] = {
        {AMPDIAG_ATTR_DATA_VAL_CHANCE, f->val_chance, isfinite(f->val_chance)},
        {AMPDIAG_ATTR_INPUT_MIN, f->input_min, f->have_inputs},
        {AMPDIAG_ATTR_INPUT_MAX, f->input_max, f->have_inputs},
        {AMPDIAG_ATTR_INPUT_RMS, f->input_rms, f->have_inputs},
        {AMPDIAG_ATTR_INPUT_STD_MIN, f->input_std_min, f->have_inputs},
        {AMPDIAG_ATTR_INPUT_STD_MAX, f->input_std_max, f->have_inputs},
    };
    int rc;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((rc = ampdiag_trace_set_attr_int(w, ints[i].k, ints[i].v)) < 0)
            return trace_fail(rc, err, errlen);
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++)
        if (dbl[i].on && (rc = ampdiag_trace_set_attr_double(w, dbl[i].k, dbl[i].v)) < 0)
            return trace_fail(rc, err, errlen);
    if ((rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_STANDARDIZE, R->c->standardize ? "on" : "off")) < 0)
        return trace_fail(rc, err, errlen);
    return 0;
}

static int write_header(run *R, char *err, size_t errlen)
{
    const train_config *c = R->c;
    ampdiag_trace_writer *w = R->w;
    char hp[256], sch[128], scl[256];
    if (c->opt.kind == OPT_ADAMW)
        snprintf(hp, sizeof hp, "beta1=%g beta2=%g eps=%g weight_decay=%g state=%s", c->opt.beta1, c->opt.beta2,
                 c->opt.eps, c->opt.weight_decay, ampdiag_format_get(c->opt.state_fmt)->name);
    else
        snprintf(hp, sizeof hp, "momentum=%g weight_decay=%g state=%s", c->opt.momentum, c->opt.weight_decay,
                 ampdiag_format_get(c->opt.state_fmt)->name);
    if (R->sched.kind == SCHED_COSINE)
        snprintf(sch, sizeof sch, "cosine warmup=%ld min_lr=%g", R->sched.warmup, R->sched.min_lr);
    else
        snprintf(sch, sizeof sch, "constant");
    snprintf(scl, sizeof scl, "init=%g growth=%g backoff=%g interval=%d min=%g hysteresis=%d", c->scaler.init,
             c->scaler.growth_factor, c->scaler.backoff_factor, c->scaler.growth_interval, c->scaler.min_scale,
             c->scaler.hysteresis);
    struct {
        const char *k, *v;
    } strs[] = {
        {AMPDIAG_ATTR_PRECISION, precision_name(c->mo.precision)},
        {AMPDIAG_ATTR_MODEL, c->mo.spec ? c->mo.spec : "mlp"},
        {AMPDIAG_ATTR_DATA, R->ds.name},
        {AMPDIAG_ATTR_OPTIMIZER, optim_kind_name(c->opt.kind)},
        {AMPDIAG_ATTR_HYPERPARAMETERS, hp},
        {AMPDIAG_ATTR_LR_SCHEDULE, sch},
        {AMPDIAG_ATTR_LOSS_SCALE, c->loss_scale ? c->loss_scale : "dynamic"},
        {AMPDIAG_ATTR_SCALER, scl},
        {AMPDIAG_ATTR_DEVICE, R->m->bk->name},
        {AMPDIAG_ATTR_DEVICE_NAME, R->m->bk->desc},
        {AMPDIAG_ATTR_COMMAND_LINE, c->command_line ? c->command_line : ""},
        {AMPDIAG_ATTR_EVAL_METRIC, "accuracy"},
        {AMPDIAG_ATTR_FP32_LAYERS, c->mo.fp32_layers ? c->mo.fp32_layers : ""},
        {"flush_to_zero", (c->mo.round_flags & AMPDIAG_ROUND_FTZ) ? "yes" : "no"},
        {"scenario", c->scenario ? c->scenario : ""},
        /* activation_grad / weight_grad records hold the gradients as the backward pass left
         * them, multiplied by the step's loss scale (/steps loss_scale; traces/FORMAT.md) */
        {"grad_stats", "scaled"},
    };
    int rc;
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if ((rc = ampdiag_trace_set_attr_str(w, strs[i].k, strs[i].v)) < 0)
            return trace_fail(rc, err, errlen);
    if ((rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_SEED, (int64_t)c->seed)) < 0 ||
        (rc = ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_LR, c->lr)) < 0 ||
        (rc = ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_CLIP, c->clip)) < 0 ||
        (rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_STEPS_PLANNED, c->steps)) < 0 ||
        (rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_BATCH, c->batch)) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_TRACE_CADENCE,
                                         c->trace_every < 0 ? "budget" : c->trace_every ? "every" : "none")) < 0 ||
        (rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_TRACE_EVERY, c->trace_every > 0 ? c->trace_every : 0)) < 0 ||
        (c->trace_every < 0 &&
         (rc = ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_TRACE_BUDGET, c->trace_budget)) < 0) ||
        (c->trace_every != 0 &&
         (rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_TRACE_AFTER_EVENT, c->trace_after)) < 0) ||
        (rc = ampdiag_trace_set_attr_int(w, "hist_every", c->hist_every)) < 0 ||
        (rc = ampdiag_trace_set_attr_int(w, "params", (int64_t)R->m->nparams)) < 0)
        return trace_fail(rc, err, errlen);
    if ((rc = write_typed_settings(R, err, errlen)) || (rc = write_fp8_settings(R, err, errlen)) ||
        (rc = write_quant_settings(R, err, errlen)) || (rc = write_data_facts(R, err, errlen)))
        return rc;
    for (int i = 0; i < R->m->nlayers; i++) {
        const layer *L = &R->m->layers[i];
        char shape[64] = "";
        if (L->npv > 0) {
            const param_view *pv = &L->pv[0];
            if (pv->ndim == 2)
                snprintf(shape, sizeof shape, "[%d, %d]", pv->shape[0], pv->shape[1]);
            else
                snprintf(shape, sizeof shape, "[%d]", pv->shape[0]);
        }
        if ((rc = ampdiag_trace_add_layer(w, L->name, layer_op_name(L->op), shape, L->nparams)) < 0)
            return trace_fail(rc, err, errlen);
    }
    return 0;
}

/* ------------------------------------------------------------------ one step */

/* What a step has found so far, handed from each part of step_once to the next. */
typedef struct step_state {
    long t;
    double ts;                   /* when the step began */
    int traced;
    tslot *S;                    /* its slot when traced, else NULL */
    float loss;
    int fwd_li, fwd_nan;         /* where a non-finite forward began (fwd_li -1: it did not) */
    double scale;                /* the loss scale the step ran with */
    float inv;                   /* 1 / scale */
    uint64_t nonfinite;          /* non-finite values among the gradients */
    double norm;                 /* their global norm, unscaled (inf if any is non-finite) */
    int found, skip;             /* non-finite gradients found; the update skipped for them */
    float coef;                  /* the clip coefficient */
    double lr;
    long streak;                 /* steps in a row towards divergence (monitor.h) */
    int floor_why;               /* 1: the streak is of skipped steps at the scale's floor */
    ampdiag_trace_step rec;      /* the step record being filled */
} step_state;

/* Step t of s is traced in full, for reason: it takes a slot (the one NSLOTS traced steps back,
 * whose records are written out first), with histograms where it is the first traced step at
 * or after a multiple of --hist-every. 0 or a TRAIN_ error. */
static int take_slot(run *R, step_state *s, int reason, int64_t event_step, char *err, size_t errlen)
{
    const train_config *c = R->c;
    long t = s->t, H = c->hist_every;
    tslot *S = &R->slots[R->ntraced % NSLOTS];
    int rc;
    for (int k = 0; k < R->qn; k++)
        if (R->q[(R->qhead + k) % QCAP].S == S && (rc = flush_records(R, S->step, err, errlen)))
            return rc;
    S->buf = (int)(R->ntraced++ & 1);
    S->step = t;
    S->hist = H > 0 && (R->last_hist < 0 || t / H > R->last_hist / H);
    if (S->hist)
        R->last_hist = t;
    long W = c->whatif_every; /* the block what-if: on the histogram steps, or likewise every W */
    S->quant = W < 0 ? S->hist : W > 0 && (R->last_quant < 0 || t / W > R->last_quant / W);
    if (S->quant && W > 0)
        R->last_quant = t;
    S->skip = 0;
    cadence_taken(&R->cd, t, reason);
    cadence_row(&R->cd, t, reason, event_step, &S->trow);
    R->r->full_steps++;
    R->r->cadence = S->trow.cadence;
    s->traced = 1;
    s->S = S;
    return 0;
}

/* Start step t: its time, the measure of the step before, and whether it is planned for full
 * records (then its slot). 0 or a TRAIN_ error. */
static int step_begin(run *R, step_state *s, long t, char *err, size_t errlen)
{
    s->t = t;
    s->ts = now_s();
    s->traced = 0;
    s->S = NULL;
    if (!R->tr)
        return 0;
    cadence_tick(&R->cd, t, tracer_inline_cpu_s(R->tr));
    int64_t ev;
    int reason = cadence_plan(&R->cd, t, &ev);
    return reason < 0 ? 0 : take_slot(R, s, reason, ev, err, errlen);
}

/* An event in step t (a non-finite loss or gradient, a skipped update, a loss or gradient-norm
 * spike; cadence.h): the step's full records, whatever the cadence. They are known after the
 * backward pass, and the step's activations and gradients are still in memory (the next
 * forward and backward wait for the tracer's jobs), and so are its weights: a step not planned
 * for full records takes its slot and hands its tensors over now, and its update keeps its
 * copies (apply_update). A planned step keeps its slot, now under the event's reason. 0 or a
 * TRAIN_ error. */
static int trace_event(run *R, step_state *s, char *err, size_t errlen)
{
    if (!R->tr)
        return 0;
    int spike = mon_spike_test(&R->spike, s->loss);
    int reason = cadence_event(&R->cd, s->t, s->loss, s->norm, s->found || s->fwd_li >= 0, s->skip, spike);
    if (reason < 0)
        return 0;
    R->r->event_steps++;
    if (s->traced) {
        s->S->trow.reason = reason;
        s->S->trow.event_step = s->t;
        return 0;
    }
    int rc = take_slot(R, s, reason, s->t, err, errlen);
    if (rc)
        return rc;
    tslot *S = s->S;
    hand_over(S, MT_ACTIVATION);
    R->tk_acts = S->last = tracer_post(R->tr, job_activations, S);
    hand_over(S, MT_ACTIVATION_GRAD);
    hand_over(S, MT_WEIGHT_GRAD);
    R->tk_grads = S->last = tracer_post(R->tr, job_gradients, S);
    tracer_kick(R->tr);
    return 0;
}

/* Once the tracer has read the last traced step's activations: learn whether that job fitted
 * between the kick after the backward and this forward (ts) (smoothed times in R). */
static void learn_acts_room(run *R, double ts)
{
    if (R->acts_slot && R->kick_at > 0) {
        double job = R->acts_slot->acts_s, room = ts - R->kick_at;
        R->acts_job_s = R->acts_job_s > 0 ? 0.75 * R->acts_job_s + 0.25 * job : job;
        R->acts_room_s = R->acts_room_s > 0 ? 0.75 * R->acts_room_s + 0.25 * room : room;
    }
    R->acts_slot = NULL;
}

/* A traced step's activations to the tracer: queued, not woken for (the worker takes them with
 * the gradients' job, one wake-up a step instead of two, and has until the next forward),
 * except where the job takes more than half of that time (the transformer's activations). */
static void post_activations(run *R, tslot *S)
{
    hand_over(S, MT_ACTIVATION);
    R->tk_acts = S->last = tracer_post(R->tr, job_activations, S);
    R->acts_slot = S;
    if (R->acts_job_s > 0.5 * R->acts_room_s)
        tracer_kick(R->tr);
}

/* The backend's fence: everything issued so far has finished (so the tracer's thread may read
 * it) and did not fail. 0, or TRAIN_EIO with the backend's message. */
static int fence(run *R, long t, const char *after, char *err, size_t errlen)
{
    const backend *bk = R->m->bk;
    char berr[256];
    if (bk->sync(bk, berr, sizeof berr) == 0)
        return 0;
    say(err, errlen, "step %ld: the %s backend failed in the %s: %s", t, bk->name, after, berr);
    return TRAIN_EIO;
}

/* The forward pass of the next batch (once the tracer has read the last traced step's
 * activations) into s->loss. 0, or TRAIN_EBADINPUT with the model's message. */
static int forward_step(run *R, step_state *s, char *err, size_t errlen)
{
    const train_config *c = R->c;
    model *m = R->m;
    tracer_wait(R->tr, R->tk_acts);
    learn_acts_room(R, s->ts);
    batcher_next(&R->tb, R->rows, c->batch);
    data_gather(&R->ds, 0, R->rows, c->batch, R->xb, R->yb, R->inb, R->tgb);
    if (model_forward(m, R->ds.kind == DATA_CLASSIFICATION ? R->xb : NULL, R->ds.kind == DATA_TOKENS ? R->inb : NULL,
                      R->ds.kind == DATA_TOKENS ? R->tgb : R->yb, c->batch, &s->loss) != 0) {
        say(err, errlen, "step %ld: %s", s->t, model_error(m));
        return TRAIN_EBADINPUT;
    }
    int rc = fence(R, s->t, "forward pass", err, errlen);
    if (!rc && s->traced)
        post_activations(R, s->S);
    return rc;
}

/* A non-finite loss: the first layer (in forward order) whose activations are non-finite into
 * s->fwd_li and s->fwd_nan (NaN or inf), with an event. 0 or a TRAIN_ error. */
static int find_forward_origin(run *R, step_state *s, char *err, size_t errlen)
{
    s->fwd_li = -1;
    s->fwd_nan = 0;
    if (isfinite(s->loss))
        return 0;
    static const long no_rows[2] = {-1, -1};
    return forward_origin_event(R, s->t, s->loss, no_rows, &s->fwd_li, &s->fwd_nan, err, errlen);
}

/* The backward pass of loss * scale (once the tracer has read the last traced step's
 * gradients); a traced step hands its gradients over, then the last traced step's update job
 * is posted behind them and the tracer woken. 0, or TRAIN_EBADINPUT with the model's message. */
static int backward_step(run *R, step_state *s, char *err, size_t errlen)
{
    model *m = R->m;
    s->scale = scaler_scale(&R->sc);
    tracer_wait(R->tr, R->tk_grads);
    if (model_backward(m, (float)s->scale) != 0) {
        say(err, errlen, "step %ld: %s", s->t, model_error(m));
        return TRAIN_EBADINPUT;
    }
    int rc = fence(R, s->t, "backward pass", err, errlen);
    if (rc)
        return rc;
    if (s->traced) {
        hand_over(s->S, MT_ACTIVATION_GRAD);
        hand_over(s->S, MT_WEIGHT_GRAD);
        R->tk_grads = s->S->last = tracer_post(R->tr, job_gradients, s->S);
    }
    post_update(R); /* the last traced step's, behind this step's activations and gradients */
    tracer_kick(R->tr);
    R->kick_at = now_s();
    return 0;
}

/* The gradients' norm and non-finite count, of the unscaled values; they stay scaled in memory
 * (the tracer reads them as the format held them; the optimizer unscales as it reads). Sets
 * s->inv, s->nonfinite, s->norm, s->found and s->skip. */
static void measure_gradients(run *R, step_state *s)
{
    model *m = R->m;
    double sumsq = 0;
    uint64_t nonfinite = 0;
    s->inv = (float)(1.0 / s->scale);
    for (int i = 0; i < m->nlayers; i++) {
        layer *L = &m->layers[i];
        if (L->nparams > 0)
            m->bk->grad_norm(m->bk, L->g, L->nparams, s->inv, &sumsq, &nonfinite);
    }
    s->nonfinite = nonfinite;
    s->norm = nonfinite ? INFINITY : sqrt(sumsq);
    s->found = nonfinite > 0;
    s->skip = s->found && R->c->scaler.kind != SCALER_NONE;
}

/* Non-finite gradients after a finite forward: the first layer and tensor (in backward order)
 * that holds one, as the skip reason and an event. 0 or a TRAIN_ error. */
static int find_backward_origin(run *R, step_state *s, char *err, size_t errlen)
{
    model *m = R->m;
    ampdiag_trace_step *rec = &s->rec;
    model_tensor_kind k = MT_WEIGHT_GRAD;
    int li = model_first_nonfinite_gradient(m, &k);
    const char *what = k == MT_ACTIVATION_GRAD ? "activation_grad" : "weight_grad";
    int nan = 0;
    if (li >= 0) {
        size_t n;
        float *x = model_tensor(m, li, k, &n);
        nan = x ? holds_nan(R, x, n) : 0;
        snprintf(rec->skip_reason, sizeof rec->skip_reason, "%s in %s %s", nan ? "nan" : "inf", m->layers[li].name,
                 what);
    } else {
        snprintf(rec->skip_reason, sizeof rec->skip_reason, "non-finite gradients");
    }
    char msg[256];
    snprintf(msg, sizeof msg, "%s (first in backward order); %llu non-finite gradient values at scale %g",
             rec->skip_reason, (unsigned long long)s->nonfinite, s->scale);
    return event(R, s->t, li, nan ? AMPDIAG_EV_NAN_BACKWARD : AMPDIAG_EV_INF_BACKWARD, (double)s->nonfinite, msg,
                 err, errlen);
}

/* Starts the step record (zeroed) with the reason for non-finite gradients: the forward
 * pass's origin when it was already non-finite, else the backward's (kept only when the step
 * is skipped). 0 or a TRAIN_ error. */
static int explain_nonfinite(run *R, step_state *s, char *err, size_t errlen)
{
    ampdiag_trace_step *rec = &s->rec;
    memset(rec, 0, sizeof *rec);
    if (s->found && s->fwd_li >= 0) {
        /* the forward was already non-finite: that is the origin, not the backward */
        snprintf(rec->skip_reason, sizeof rec->skip_reason, "%s in %s activation (forward)",
                 s->fwd_nan ? "nan" : "inf", R->m->layers[s->fwd_li].name);
    } else if (s->found) {
        int rc = find_backward_origin(R, s, err, errlen);
        if (rc)
            return rc;
    }
    if (s->found && !s->skip)
        rec->skip_reason[0] = 0;
    return 0;
}

/* The loss scaler's answer to the step (an event for a backoff, a growth or an overflow at the
 * minimum scale; the counts in the result). 0 or a TRAIN_ error. */
static int update_scaler(run *R, step_state *s, char *err, size_t errlen)
{
    train_result *r = R->r;
    scaler_event se = scaler_update(&R->sc, s->found);
    if (se == SCALER_BACKED_OFF || se == SCALER_GREW || se == SCALER_AT_MIN) {
        char msg[96];
        snprintf(msg, sizeof msg, "loss scale %g -> %g", s->scale, scaler_scale(&R->sc));
        int rc = event(R, s->t, -1, se == SCALER_GREW ? AMPDIAG_EV_SCALE_GROWTH : AMPDIAG_EV_SCALE_BACKOFF,
                       scaler_scale(&R->sc), se == SCALER_AT_MIN ? "overflow at the minimum loss scale" : msg, err,
                       errlen);
        if (rc)
            return rc;
    }
    if (se == SCALER_BACKED_OFF) r->backoffs++;
    if (se == SCALER_GREW) r->growths++;
    return 0;
}

/* A skipped step: counted, the first one's reason kept, an event. 0 or a TRAIN_ error. */
static int skip_update(run *R, step_state *s, char *err, size_t errlen)
{
    train_result *r = R->r;
    if (s->S)
        s->S->skip = 1;
    r->skipped++;
    if (r->first_skip_step < 0) {
        r->first_skip_step = s->t;
        snprintf(r->first_skip_reason, sizeof r->first_skip_reason, "%s", s->rec.skip_reason);
    }
    return event(R, s->t, -1, AMPDIAG_EV_SKIPPED, s->scale, s->rec.skip_reason, err, errlen);
}

/* An update that made weights non-finite (Adam's 0/0 with FP16 state, an exploding step) is
 * reported once per layer, where it happened. 0 or a TRAIN_ error. */
static int check_weights(run *R, long t, char *err, size_t errlen)
{
    model *m = R->m;
    for (int i = 0; i < m->nlayers; i++) {
        layer *L = &m->layers[i];
        if (L->nparams == 0 || R->ls[i].weights_nonfinite)
            continue;
        size_t nf = (size_t)R->ls[i].nonfinite_now;
        if (nf) {
            R->ls[i].weights_nonfinite = 1;
            char msg[160];
            snprintf(msg, sizeof msg, "the optimizer update made %zu of %zu %s weights non-finite", nf,
                     L->nparams, L->name);
            int nan = holds_nan(R, L->p, L->nparams);
            int rc = event(R, t, i, nan ? AMPDIAG_EV_NAN_BACKWARD : AMPDIAG_EV_INF_BACKWARD, (double)nf, msg,
                           err, errlen);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* The optimizer update, clipped (with an event) and unscaled as it reads the gradients; a
 * traced step's update keeps the weights it started from and its changes for the tracer (its
 * job is posted with the next step's gradients). 0 or a TRAIN_ error. */
static int apply_update(run *R, step_state *s, char *err, size_t errlen)
{
    const train_config *c = R->c;
    model *m = R->m;
    tslot *S = s->S;
    int rc;
    if (s->coef < 1.0f) {
        char msg[96];
        snprintf(msg, sizeof msg, "gradient norm %.4g clipped to %g", s->norm, c->clip);
        if ((rc = event(R, s->t, -1, AMPDIAG_EV_CLIPPED, s->norm, msg, err, errlen)))
            return rc;
    }
    optim_begin(&R->opt);
    if (s->traced)
        tracer_wait(R->tr, R->tk_buf[S->buf]); /* the last analysis that read these copies */
    float *wc = model_compute_copy(m); /* written by the update, as are the counts check_weights reads */
    for (int i = 0; i < m->nlayers; i++) {
        layer *L = &m->layers[i];
        if (L->nparams == 0)
            continue;
        size_t off = (size_t)(L->p - m->params);
        R->ls[i].nonfinite_now = 0;
        optim_update(&R->opt, m->params, m->grads, off, L->nparams, s->lr, s->inv, s->coef,
                     s->traced ? R->dw[S->buf] + off : NULL, s->traced ? R->w_old[S->buf] + off : NULL,
                     wc ? wc + off : NULL, &R->ls[i].nonfinite_now);
    }
    model_hold_params(m);
    if (wc)
        model_copy_written(m);
    if ((rc = fence(R, s->t, "optimizer step", err, errlen)))
        return rc;
    if (s->traced)
        R->upd_slot = S; /* posted with the next step's gradients */
    return check_weights(R, s->t, err, errlen);
}

/* The loss's bookkeeping: first, last and least loss, the divergence streak (s->streak), and
 * a loss spike as an event. 0 or a TRAIN_ error. */
static int watch_loss(run *R, step_state *s, char *err, size_t errlen)
{
    train_result *r = R->r;
    float loss = s->loss;
    if (s->t == 0)
        r->loss_first = loss;
    r->loss_last = loss;
    if (isfinite(loss) && !(loss >= r->loss_min))
        r->loss_min = loss;
    const train_config *c = R->c;
    int at_floor = mon_scale_at_floor(c->scaler.kind == SCALER_DYNAMIC, c->scaler.kind == SCALER_STATIC,
                                      s->scale, c->scaler.min_scale);
    s->streak = mon_diverge_push(&R->div, s->t, loss, s->skip, at_floor, &s->floor_why);
    r->diverged_at = s->streak > 0 ? (long)(s->floor_why ? R->div.floor_since : R->div.since) : -1;
    size_t window_n = R->spike.w.n;
    if (mon_spike_push(&R->spike, loss)) {
        char msg[96];
        snprintf(msg, sizeof msg, "loss %.4g above the median %.4g of the last %zu by %.1f MADs", (double)loss,
                 R->spike.med, window_n, ((double)loss - R->spike.med) / (MON_MAD_TO_SD * R->spike.mad));
        return event(R, s->t, -1, AMPDIAG_EV_LOSS_SPIKE, loss, msg, err, errlen);
    }
    return 0;
}

/* The step record, completed: written now, or held back behind a traced step (a traced step's
 * own record waits in its slot for its tensor records). 0 or a TRAIN_ error. */
static int record_step(run *R, step_state *s, char *err, size_t errlen)
{
    ampdiag_trace_step *rec = &s->rec;
    rec->step = s->t;
    rec->loss = s->loss;
    rec->loss_scale = s->scale;
    rec->grad_norm = s->norm;
    rec->clip_coef = s->coef;
    rec->skipped = s->skip;
    rec->lr = s->lr;
    rec->update_ratio = NAN;
    rec->nonfinite_grads = s->nonfinite;
    rec->wall_ms = (now_s() - s->ts) * 1e3;
    if (s->traced)
        s->S->rec = *rec; /* written with the step's tensor records */
    return queue_record(R, s->S, s->traced ? NULL : rec, err, errlen);
}

/* The result's scale figures and steps done, after the step. */
static void step_totals(run *R, const step_state *s)
{
    train_result *r = R->r;
    r->scale_last = scaler_scale(&R->sc);
    /* the smallest scale reached, the one the last backoff left included */
    if (s->scale < r->scale_min) r->scale_min = s->scale;
    if (r->scale_last < r->scale_min) r->scale_min = r->scale_last;
    r->steps_done = s->t + 1;
}

/* A divergence streak as long as the patience: divergence and stop events, *stop set. 0 or a
 * TRAIN_ error. */
static int stop_if_diverged(run *R, const step_state *s, int *stop, char *err, size_t errlen)
{
    train_result *r = R->r;
    if (s->streak < R->c->patience)
        return 0;
    char msg[192];
    if (s->floor_why)
        snprintf(msg, sizeof msg, "%ld steps in a row skipped with the loss scale at its floor (%g) since step %ld: "
                 "the gradients overflow even unscaled", s->streak, s->scale, r->diverged_at);
    else
        snprintf(msg, sizeof msg, "loss non-finite or above %gx its first value for %ld steps since step %ld",
                 MON_DIVERGE_FACTOR, s->streak, r->diverged_at);
    int rc;
    if ((rc = event(R, r->diverged_at, -1, AMPDIAG_EV_DIVERGENCE, s->loss, msg, err, errlen)) ||
        (rc = event(R, s->t, -1, AMPDIAG_EV_STOP, (double)s->t, "stopped: diverged", err, errlen)))
        return rc;
    *stop = 1;
    return 0;
}

/* Every --eval-every steps (but after the last, which train_run evaluates, or a stop): the
 * evaluation, once the tracer is done with the activations. 0 or a TRAIN_ error. */
static int evaluate_every(run *R, const step_state *s, int stop, char *err, size_t errlen)
{
    const train_config *c = R->c;
    long t = s->t;
    if (c->eval_every > 0 && (t + 1) % c->eval_every == 0 && t + 1 < c->steps && !stop) {
        tracer_drain(R->tr); /* the evaluation's forward overwrites the activations */
        cadence_pause(&R->cd);
        int rc = evaluate(R, t, 0, err, errlen);
        cadence_resume(&R->cd);
        return rc;
    }
    return 0;
}

/* The progress bar after every step, or a line every tenth of the run. */
static void step_progress(run *R, const step_state *s, double t0)
{
    const train_config *c = R->c;
    long t = s->t;
    if (c->progress == 2 || (c->progress == 1 && ((t + 1) % (c->steps >= 10 ? c->steps / 10 : 1) == 0)))
        progress(c, t + 1, s->loss, R->r->scale_last, R->r->skipped, t0, 0);
}

/* One training step, t. Sets *stop when the run must end (divergence). 0 or a TRAIN_ error
 * (with the message in err). */
static int step_once(run *R, long t, double t0, int *stop, char *err, size_t errlen)
{
    step_state s;
    int rc;
    if ((rc = step_begin(R, &s, t, err, errlen)) ||
        (rc = forward_step(R, &s, err, errlen)) ||
        (rc = find_forward_origin(R, &s, err, errlen)) ||
        (rc = backward_step(R, &s, err, errlen)))
        return rc;
    measure_gradients(R, &s);
    /* the records of the traced step two back (its update analysis was posted a step ago), and
     * any later ones whose statistics are ready */
    if ((rc = flush_records(R, t - 2, err, errlen)) ||
        (rc = explain_nonfinite(R, &s, err, errlen)) ||
        (rc = update_scaler(R, &s, err, errlen)) ||
        (rc = trace_event(R, &s, err, errlen)))
        return rc;
    s.coef = s.skip ? 1.0f : clip_coefficient(s.norm, R->c->clip);
    s.lr = schedule_lr(&R->sched, t);
    if ((rc = s.skip ? skip_update(R, &s, err, errlen) : apply_update(R, &s, err, errlen)) ||
        (rc = watch_loss(R, &s, err, errlen)) ||
        (rc = record_step(R, &s, err, errlen)))
        return rc;
    step_totals(R, &s);
    if ((rc = stop_if_diverged(R, &s, stop, err, errlen)) ||
        (rc = evaluate_every(R, &s, *stop, err, errlen)))
        return rc;
    step_progress(R, &s, t0);
    return 0;
}

/* 1 when tracing work goes to background threads: asked for, or by default on two or more
 * cores. */
static int background_threads(const train_config *c)
{
    if (c->trace_threads >= 0)
        return c->trace_threads > 0;
    return sysconf(_SC_NPROCESSORS_ONLN) >= 2;
}

/* The tracer (a worker thread, or jobs run inline), its two slots, and the buffers for the
 * update analysis. */
static int tracing_init(run *R, char *err, size_t errlen)
{
    const train_config *c = R->c;
    R->last_hist = -1;
    R->last_quant = -1;
    if (c->trace_every == 0)
        return 0;
    cadence_config cc = {c->trace_every, c->trace_budget / 100.0, c->trace_after, c->steps};
    cadence_init(&R->cd, &cc);
    int threads = background_threads(c);
    int nl = R->m->nlayers;
    size_t np = R->m->nparams ? R->m->nparams : 1;
    R->tr = tracer_create(threads > 0 ? 1 : 0);
    R->slots = calloc(NSLOTS, sizeof *R->slots);
    R->sreq = calloc((size_t)(nl > 0 ? nl : 1), sizeof *R->sreq);
    R->ureq = calloc((size_t)(nl > 0 ? nl : 1), sizeof *R->ureq);
    R->f8job = calloc((size_t)(nl > 0 ? nl : 1), sizeof *R->f8job);
    const backend *bk = R->m->bk;
    for (int k = 0; k < 2; k++) {
        R->w_old[k] = bk->alloc(bk, np * sizeof *R->w_old[k]);
        R->dw[k] = bk->alloc(bk, np * sizeof *R->dw[k]);
    }
    if (!R->tr || !R->slots || !R->sreq || !R->ureq || !R->f8job || !R->w_old[0] || !R->dw[0] || !R->w_old[1] || !R->dw[1]) {
        say(err, errlen, "out of memory for tracing (%zu parameters)", np);
        return TRAIN_EIO;
    }
    for (int k = 0; k < NSLOTS; k++) {
        R->slots[k].R = R;
        R->slots[k].L = calloc((size_t)nl, sizeof *R->slots[k].L);
        if (!R->slots[k].L) {
            say(err, errlen, "out of memory for tracing (%d layers)", nl);
            return TRAIN_EIO;
        }
    }
    if (quant_plan_create(R->m, c->whatif, &R->qp, err, errlen) != 0)
        return TRAIN_EBADINPUT;
    for (int k = 0; R->qp && k < NSLOTS; k++)
        if (!(R->slots[k].qs = quant_slot_new(R->qp))) {
            say(err, errlen, "out of memory for the --whatif counts (%d layers)", nl);
            return TRAIN_EIO;
        }
    if (c->fp8_history > 0 && bk->whatif_scaled &&
        !(R->f8 = fp8_delayed_create(nl, c->fp8_history, c->fp8_margin))) {
        say(err, errlen, "out of memory for the FP8 amax histories (%d layers x %d steps)", nl, c->fp8_history);
        return TRAIN_EIO;
    }
    R->r->trace_threads = threads > 0 ? 1 : 0;
    return 0;
}

static void tracing_free(run *R)
{
    if (R->tr)
        R->r->trace_wait_s = tracer_blocked_s(R->tr);
    tracer_free(R->tr); /* finishes what is queued */
    R->tr = NULL;
    fp8_delayed_free(R->f8);
    R->f8 = NULL;
    if (R->slots)
        for (int k = 0; k < NSLOTS; k++) {
            free(R->slots[k].L);
            quant_slot_free(R->slots[k].qs);
        }
    quant_plan_free(R->qp);
    R->qp = NULL;
    free(R->slots);
    R->slots = NULL;
    free(R->sreq);
    free(R->ureq);
    free(R->f8job);
    R->sreq = NULL;
    R->ureq = NULL;
    R->f8job = NULL;
    for (int k = 0; k < 2; k++) {
        if (R->m) {
            R->m->bk->free(R->m->bk, R->w_old[k]);
            R->m->bk->free(R->m->bk, R->dw[k]);
        }
        R->w_old[k] = R->dw[k] = NULL;
    }
}

/* ------------------------------------------------------------------ the run, in steps */

/* The result before the run: nothing done, every figure unknown. */
static void result_init(train_result *r)
{
    memset(r, 0, sizeof *r);
    r->first_skip_step = -1;
    r->diverged_at = -1;
    r->loss_first = r->loss_last = r->loss_min = NAN;
    r->eval_loss = r->eval_metric = NAN;
    r->eval_metric_name = "accuracy";
    r->scale_min = INFINITY;
    r->status = AMPDIAG_STATUS_RUNNING;
}

/* The model spec first (it says whether the model reads tokens), then data that fits it, into
 * R->ds. 0 or a TRAIN_ error; on error nothing is left to free. */
static int load_data(run *R, char *err, size_t errlen)
{
    const train_config *c = R->c;
    char merr[2048]; /* room for the list of synthetic sets */
    model_spec spec;
    if (model_spec_load(&spec, c->mo.spec ? c->mo.spec : "mlp", merr, sizeof merr) != 0) {
        say(err, errlen, "--model: %s", merr);
        return TRAIN_EBADINPUT;
    }
    int want_tokens = spec.transformer;
    model_spec_free(&spec);
    int drc = data_load(&R->ds, c->data, want_tokens, c->seed, merr, sizeof merr);
    if (drc) {
        say(err, errlen, "%s%s", strncmp(merr, "--data", 6) == 0 ? "" : "--data: ", merr);
        return drc == DATA_EIO ? TRAIN_EIO : TRAIN_EBADINPUT;
    }
    if (c->standardize && data_standardize(&R->ds, merr, sizeof merr)) {
        say(err, errlen, "%s", merr);
        data_free(&R->ds);
        return TRAIN_EBADINPUT;
    }
    data_facts_of(&R->ds, &R->facts);
    if (c->batch > R->ds.n) { /* said before the first step, not after minutes of it */
        size_t k = strlen(R->ds.warnings);
        snprintf(R->ds.warnings + k, sizeof R->ds.warnings - k, "--batch %d is larger than the %d "
                 "training rows of %s: every step repeats rows (a step is %.3g passes over them)\n",
                 c->batch, R->ds.n, R->ds.name, (double)c->batch / R->ds.n);
    }
    /* what the checks at load found: on stderr now, as note events in the trace (open_trace) */
    for (const char *w = R->ds.warnings; *w;) {
        size_t len = strcspn(w, "\n");
        fprintf_text(stderr, "ampdiag run: warning: %.*s\n", (int)len, w);
        w += len + (w[len] == '\n');
    }
    return 0;
}

/* The model, shaped by the data, described in the result, with the weights of --init-from.
 * 0 or a TRAIN_ error; R->m is freed by free_run. */
static int build_model(run *R, char *err, size_t errlen)
{
    const train_config *c = R->c;
    char merr[512];
    model_options mo = c->mo;
    mo.seed = c->seed;
    if (R->ds.kind == DATA_CLASSIFICATION) {
        mo.input_dim = R->ds.d;
        mo.classes = R->ds.classes;
    } else {
        mo.vocab = R->ds.vocab;
        mo.ctx = R->ds.len - 1;
    }
    const backend *bk = c->bk ? c->bk : backend_by_name(c->device ? c->device : "cpu", merr, sizeof merr);
    if (!bk) {
        say(err, errlen, "--device %s: %s", c->device ? c->device : "cpu", merr);
        return TRAIN_EBADINPUT;
    }
    R->m = model_create(&mo, bk, merr, sizeof merr);
    if (!R->m) { /* named by its file (or preset), unless the message names it or an option */
        const char *spec = c->mo.spec ? c->mo.spec : "mlp";
        if (strncmp(merr, "--", 2) == 0 || strncmp(merr, spec, strlen(spec)) == 0)
            say(err, errlen, "%s", merr);
        else
            say(err, errlen, "--model %s: %s", spec, merr);
        return TRAIN_EBADINPUT;
    }
    describe_model(R);
    if (c->init_from) {
        int wrc = weights_load(R->m, c->init_from, merr, sizeof merr);
        if (wrc) {
            say(err, errlen, "--init-from %s", merr);
            return wrc == WEIGHTS_EIO ? TRAIN_EIO : TRAIN_EBADINPUT;
        }
    }
    return 0;
}

/* The learning-rate schedule, the optimizer (BF16 weights and state for bf16-pure) and the
 * loss scaler. 0 or a TRAIN_ error; the optimizer's state is freed by free_run. */
static int setup_optimizer(run *R, char *err, size_t errlen)
{
    const train_config *c = R->c;
    char merr[512];
    if (schedule_parse(&R->sched, c->schedule, c->lr, c->steps, merr, sizeof merr) != 0) {
        say(err, errlen, "%s", merr);
        return TRAIN_EBADINPUT;
    }
    optim_config oc = c->opt;
    if (c->mo.precision == PREC_BF16_PURE) {
        oc.weight_fmt = AMPDIAG_BF16;
        oc.state_fmt = AMPDIAG_BF16;
    }
    oc.round_flags = c->mo.round_flags;
    oc.copy_fmt = R->m->ctx.fmt; /* the compute copy's, written by the update (apply_update) */
    if (optim_init(&R->opt, R->m->bk, &oc, R->m->nparams) != 0) {
        say(err, errlen, "out of memory for the optimizer state (%zu parameters)", R->m->nparams);
        return TRAIN_EIO;
    }
    scaler_init(&R->sc, &c->scaler);
    R->r->scale_first = scaler_scale(&R->sc);
    return 0;
}

/* The batch buffers, the per-layer summaries and the batch order. 0 or TRAIN_EIO; freed by
 * free_run. */
static int alloc_batches(run *R, char *err, size_t errlen)
{
    const train_config *c = R->c;
    R->T = R->ds.kind == DATA_TOKENS ? R->ds.len - 1 : 1;
    int B = c->batch;
    R->rows = malloc((size_t)B * sizeof *R->rows);
    R->ls = calloc((size_t)R->m->nlayers, sizeof *R->ls);
    if (R->ds.kind == DATA_CLASSIFICATION) {
        R->xb = malloc((size_t)B * R->ds.d * sizeof *R->xb);
        R->yb = malloc((size_t)B * sizeof *R->yb);
    } else {
        R->inb = malloc((size_t)B * R->T * sizeof *R->inb);
        R->tgb = malloc((size_t)B * R->T * sizeof *R->tgb);
    }
    if (!R->rows || !R->ls || (R->ds.kind == DATA_CLASSIFICATION ? !R->xb || !R->yb : !R->inb || !R->tgb) ||
        batcher_init(&R->tb, R->ds.n, c->shuffle, c->seed) != 0) {
        say(err, errlen, "out of memory");
        return TRAIN_EIO;
    }
    return 0;
}

/* The trace (compression and disk writes on a thread of its own where tracing work goes to
 * background threads) and its header. 0 or a TRAIN_ error; closed by close_run. */
static int open_trace(run *R, char *err, size_t errlen)
{
    const train_config *c = R->c;
    ampdiag_trace_options to;
    ampdiag_trace_options_init(&to);
    to.flush_every_steps = c->flush_every;
    to.flush_seconds = c->flush_seconds;
    to.overwrite = c->overwrite;
    to.background = background_threads(c); /* compression and disk writes off this thread */
    int trc = ampdiag_trace_create(c->out, &to, &R->w);
    if (trc < 0)
        return trace_fail(trc, err, errlen);
    int rc = write_header(R, err, errlen);
    for (const char *w = R->ds.warnings; !rc && *w;) {
        size_t len = strcspn(w, "\n");
        char msg[AMPDIAG_TRACE_MESSAGE_LEN];
        snprintf(msg, sizeof msg, "data: %.*s", (int)len, w);
        rc = event(R, 0, -1, AMPDIAG_EV_NOTE, NAN, msg, err, errlen);
        w += len + (w[len] == '\n');
    }
    return rc;
}

/* SIGINT/SIGTERM stop the loop; caught until the trace is closed, so that a second one cannot
 * cut the closing off. */
typedef struct saved_signals {
    struct sigaction old_int, old_term;
    int caught;
} saved_signals;

/* Install on_signal for SIGINT and SIGTERM, keeping the old actions in *sg. */
static void catch_signals(saved_signals *sg)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    stop_requested = 0;
    sigaction(SIGINT, &sa, &sg->old_int);
    sigaction(SIGTERM, &sa, &sg->old_term);
    sg->caught = 1;
}

/* The actions catch_signals replaced, back (nothing if it was not called). */
static void restore_signals(saved_signals *sg)
{
    if (sg->caught) {
        sigaction(SIGINT, &sg->old_int, NULL);
        sigaction(SIGTERM, &sg->old_term, NULL);
    }
}

/* The steps, until the last, a divergence or a signal (the trace's status and the result's
 * say which). 0 or the failed step's TRAIN_ error. */
static int train_loop(run *R, double t0, char *err, size_t errlen)
{
    const train_config *c = R->c;
    train_result *r = R->r;
    int rc = 0, stop = 0;
    mon_spike_init(&R->spike);
    mon_diverge_init(&R->div);
    r->status = AMPDIAG_STATUS_COMPLETE;
    for (long t = 0; t < c->steps && !stop; t++) {
        if (stop_requested) {
            r->status = AMPDIAG_STATUS_INTERRUPTED;
            r->stop_signal = stop_requested;
            event(R, t, -1, AMPDIAG_EV_STOP, (double)t, "stopped: interrupted by a signal", err, errlen);
            break;
        }
        if ((rc = step_once(R, t, t0, &stop, err, errlen)))
            break;
        if (stop)
            r->status = AMPDIAG_STATUS_DIVERGED;
    }
    return rc;
}

/* After the loop (rc its result): the held-back records, the final evaluation, the last
 * progress line, the wall time. Returns rc, or the first error of these. */
static int finish_run(run *R, int rc, double t0, char *err, size_t errlen)
{
    const train_config *c = R->c;
    train_result *r = R->r;
    if (!rc) {
        post_update(R);
        rc = flush_records(R, LONG_MAX, err, errlen);
    }
    tracer_drain(R->tr);
    if (!rc && r->status != AMPDIAG_STATUS_INTERRUPTED && r->steps_done > 0)
        rc = evaluate(R, r->steps_done - 1, 1, err, errlen);
    if (c->progress == 2 || (c->progress == 1 && r->steps_done % (c->steps >= 10 ? c->steps / 10 : 1) != 0))
        progress(c, r->steps_done, r->loss_last, r->scale_last, r->skipped, t0, 1);
    r->wall_s = now_s() - t0;
    if (r->diverged_at >= 0 && r->status != AMPDIAG_STATUS_DIVERGED)
        r->diverged_at = -1;
    return rc;
}

/* Everything the run allocated (after the data was loaded). */
static void free_run(run *R)
{
    optim_free(&R->opt);
    batcher_free(&R->tb);
    free(R->rows);
    free(R->ls);
    free(R->xb);
    free(R->yb);
    free(R->inb);
    free(R->tgb);
    if (R->m)
        model_free(R->m);
    data_free(&R->ds);
}

/* The end of a run that got as far as its data, rc its result so far: the tracer stopped, the
 * trace closed (marked interrupted on an error) and its size taken, the signals restored, the
 * final weights saved (--save-weights, when all went well), everything freed. Returns rc, or
 * the first error of these. */
static int close_run(run *R, int rc, saved_signals *sg, char *err, size_t errlen)
{
    const train_config *c = R->c;
    train_result *r = R->r;
    tracing_free(R); /* first: the worker may still be reading the model */
    if (R->w) {
        int crc = ampdiag_trace_close(R->w, rc ? AMPDIAG_STATUS_INTERRUPTED : (ampdiag_trace_status)r->status);
        if (crc < 0 && !rc)
            rc = trace_fail(crc, err, errlen);
        struct stat stt;
        if (stat(c->out, &stt) == 0)
            r->trace_bytes = (long long)stt.st_size;
        else if (crc < 0 && rc && errno == ENOENT) {
            size_t l = strlen(err); /* the writer removed a trace that held no record */
            snprintf(err + l, errlen - l, "; the trace held no record and was removed");
        }
    }
    restore_signals(sg);
    if (!rc && c->save_weights) {
        char merr[512];
        int wrc = weights_save(R->m, c->save_weights, c->overwrite, merr, sizeof merr);
        if (wrc) {
            say(err, errlen, "--save-weights %s", merr);
            rc = wrc == WEIGHTS_EIO ? TRAIN_EIO : TRAIN_EBADINPUT;
        }
    }
    free_run(R);
    return rc;
}

int train_run(const train_config *c, train_result *r, char *err, size_t errlen)
{
    result_init(r);
    if (c->steps <= 0 || c->batch <= 0) {
        say(err, errlen, "--steps and --batch must be positive");
        return TRAIN_EBADINPUT;
    }
    run R;
    memset(&R, 0, sizeof R);
    R.c = c;
    R.r = r;
    saved_signals sg;
    memset(&sg, 0, sizeof sg);
    int rc = load_data(&R, err, errlen);
    if (rc)
        return rc;
    if ((rc = build_model(&R, err, errlen)) ||
        (rc = setup_optimizer(&R, err, errlen)) ||
        (rc = alloc_batches(&R, err, errlen)))
        return close_run(&R, rc, &sg, err, errlen);
    if (c->dry_run) { /* all checked: no step, no trace, no weights written */
        free_run(&R);
        return TRAIN_OK;
    }
    if ((rc = tracing_init(&R, err, errlen)) ||
        (rc = open_trace(&R, err, errlen)))
        return close_run(&R, rc, &sg, err, errlen);
    catch_signals(&sg);
    double t0 = now_s();
    /* the initial evaluation, on the initial weights: what learning is measured against */
    if (c->eval_every > 0 && !(rc = evaluate(&R, -1, 1, err, errlen)))
        R.r->eval_loss = R.r->eval_metric = NAN;
    if (!rc)
        rc = train_loop(&R, t0, err, errlen);
    rc = finish_run(&R, rc, t0, err, errlen);
    return close_run(&R, rc, &sg, err, errlen);
}
