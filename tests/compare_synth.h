/*
 * compare_synth.h - synthetic traces with known contents for the compare tests
 * (tests/t_compare.c) and the compare benchmark (bench/bench_compare.c), written through the
 * public trace writer as any trainer would.
 *
 * Per step: loss = loss0 * exp(-step / tau) + floor + noise, grad_norm from a repeating ramp
 * 1.00, 1.01, ..., 1.99 (so percentiles are known exactly), a loss scale, skipped steps and
 * spikes where asked. Every trace_every steps, per layer: activation, activation_grad, weight,
 * weight_grad and update records whose absmax, rms and counts follow the spec (gradient
 * records as held: multiplied by the step's loss scale). Every hist_every steps, gradient
 * histograms with given exponents.
 */
#ifndef AMPDIAG_COMPARE_SYNTH_H
#define AMPDIAG_COMPARE_SYNTH_H

#include "ampdiag.h"
#include "ampdiag_trace.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CS_MAXL 16

typedef struct cs_spec {
    const char *precision;   /* "fp32", "fp16", ... */
    const char *model, *data;
    int64_t seed;
    double lr;
    long nsteps, trace_every, hist_every, eval_every;
    int nlayers;
    double scale;            /* loss scale on every step (1 = none) */
    double loss0, loss_floor, loss_noise, tau;
    double final_eval;       /* eval loss at the last eval (NaN: follow the training loss) */
    double act_absmax[CS_MAXL];   /* per layer; 0 = 1.0 */
    const char *compute[CS_MAXL]; /* per layer, the /layers compute column; NULL = not recorded */
    double grad_absmax[CS_MAXL];  /* per layer, unscaled; 0 = 1e-2 */
    double w_rms, u_rms;          /* weight and update rms (ratio = u_rms / w_rms) */
    uint64_t lost_per_update;     /* lost updates per update record */
    /* gradient histograms: per layer two exponents with counts (unscaled) */
    int hist_e1, hist_e2;
    uint64_t hist_c1, hist_c2;
    const long *skips;            /* skipped steps (sorted), NULL */
    size_t nskips;
    long nan_from;                /* loss NaN from this step on; -1 = never */
    long spike_at;                /* loss x 10 at this step; -1 */
    long norm_spike_at;           /* grad norm 100 at this step; -1 */
    const char *skip_reason;      /* reason text of skipped steps */
    int flush_every;
    const char *writer;           /* root attribute writer ("ampdiag.torch (torch 2.x)"); NULL none */
    const char *device;           /* root attribute device ("cpu"); NULL none */
    const char *eval_metric;      /* root attribute eval_metric ("accuracy"); NULL none */
    double eval_acc;              /* the evaluations' metric; 0 = 0.9 */
    const double *wall;           /* the steps' wall_ms, step t taking wall[t % nwall]; NULL: 1 */
    size_t nwall;
    double no_scaler_zero;        /* > 0: a no_loss_scaling event at step 0 with this zero share */
} cs_spec;

static inline void cs_spec_init(cs_spec *s)
{
    memset(s, 0, sizeof *s);
    s->precision = "fp32";
    s->model = "mlp";
    s->data = "synthetic:blobs";
    s->seed = 1;
    s->lr = 1e-3;
    s->nsteps = 1000;
    s->trace_every = 10;
    s->hist_every = 100;
    s->eval_every = 250;
    s->nlayers = 4;
    s->scale = 1;
    s->loss0 = 2.0;
    s->loss_floor = 0.5;
    s->loss_noise = 0.01;
    s->tau = 200;
    s->final_eval = NAN;
    s->w_rms = 0.1;
    s->u_rms = 1e-4;
    s->hist_e1 = -10;
    s->hist_e2 = -12;
    s->hist_c1 = 900;
    s->hist_c2 = 100;
    s->nan_from = -1;
    s->spike_at = -1;
    s->norm_spike_at = -1;
    s->skip_reason = "inf in fc1 weight_grad";
    s->flush_every = 1000;
}

static inline double cs_noise(long step, uint32_t salt)
{
    uint32_t h = (uint32_t)step * 2654435761u ^ salt * 40503u;
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return (double)(h % 2001) / 1000.0 - 1.0; /* -1 .. 1 */
}

static inline int cs_is_skip(const cs_spec *s, long step)
{
    for (size_t i = 0; i < s->nskips; i++)
        if (s->skips[i] == step)
            return 1;
    return 0;
}

static inline double cs_loss(const cs_spec *s, long step)
{
    if (s->nan_from >= 0 && step >= s->nan_from)
        return NAN;
    double l = s->loss0 * exp(-(double)step / s->tau) + s->loss_floor +
               s->loss_noise * cs_noise(step, (uint32_t)s->seed);
    if (step == s->spike_at)
        l *= 10;
    return l;
}

/* A statistics record of n values: nz zeros, the rest split in sign, with the given extremes
 * and rms; FP16/BF16 counts as given. */
static inline void cs_tstats(ampdiag_tstats *t, uint64_t n, uint64_t nz, double absmax, double absmin,
                             double rms)
{
    ampdiag_tstats_init(t);
    t->count = n;
    t->n_zero = nz;
    t->n_pos = (n - nz) / 2;
    t->n_neg = n - nz - t->n_pos;
    t->absmax = (float)absmax;
    t->absmin_nz = (float)absmin;
    t->max = (float)absmax;
    t->min = (float)-absmax;
    t->sum = 0;
    t->sumsq = rms * rms * (double)n;
}

/* Write the trace. Returns 0 or the writer's error code. */
static inline int cs_write(const char *path, const cs_spec *s)
{
    ampdiag_trace_options opt;
    ampdiag_trace_options_init(&opt);
    opt.overwrite = 1;
    opt.flush_every_steps = (unsigned)(s->flush_every > 0 ? s->flush_every : 1000);
    opt.flush_seconds = 0;
    ampdiag_trace_writer *w;
    int rc = ampdiag_trace_create(path, &opt, &w);
    if (rc < 0)
        return rc;
    char scaler[128];
    snprintf(scaler, sizeof scaler, "init=%g growth=2 backoff=0.5 interval=2000 min=0 hysteresis=1", s->scale);
    if ((rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PRECISION, s->precision)) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_MODEL, s->model)) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_DATA, s->data)) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_OPTIMIZER, "adamw")) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_HYPERPARAMETERS,
                                         "beta1=0.9 beta2=0.999 eps=1e-08 weight_decay=0 state=fp32")) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_LOSS_SCALE, s->scale != 1 ? "dynamic" : "none")) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_SCALER, scaler)) < 0 ||
        (rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_SEED, s->seed)) < 0 ||
        (rc = ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_LR, s->lr)) < 0 ||
        (rc = ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_CLIP, 0)) < 0 ||
        (rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_STEPS_PLANNED, s->nsteps)) < 0 ||
        (rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_BATCH, 64)) < 0 ||
        (s->writer && (rc = ampdiag_trace_set_attr_str(w, "writer", s->writer)) < 0) ||
        (s->device && (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_DEVICE, s->device)) < 0) ||
        (s->eval_metric && (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_EVAL_METRIC, s->eval_metric)) < 0))
        goto fail;
    for (int l = 0; l < s->nlayers; l++) {
        char name[16];
        snprintf(name, sizeof name, "fc%d", l + 1);
        if ((rc = ampdiag_trace_add_layer_compute(w, name, "linear", "[64, 64]", 4160, s->compute[l])) < 0)
            goto fail;
    }
    for (long t = 0; t < s->nsteps; t++) {
        int skip = cs_is_skip(s, t);
        int traced = s->trace_every > 0 && (t % s->trace_every == 0 || t == s->nsteps - 1);
        int hist = traced && s->hist_every > 0 && t % s->hist_every == 0;
        if (traced) {
            for (int l = 0; l < s->nlayers; l++) {
                ampdiag_tstats st;
                double am = s->act_absmax[l] > 0 ? s->act_absmax[l] : 1.0;
                double gm = (s->grad_absmax[l] > 0 ? s->grad_absmax[l] : 1e-2) * s->scale;
                cs_tstats(&st, 4096, 100, am, am * 1e-4, am / 3);
                if (am >= 65520)
                    st.fp16_overflow = 10;
                if ((rc = ampdiag_trace_append_tensor(w, t, l, AMPDIAG_KIND_ACTIVATION, &st, 0)) < 0)
                    goto fail;
                cs_tstats(&st, 4096, 0, gm / 2, gm * 1e-6, gm / 10);
                if ((rc = ampdiag_trace_append_tensor(w, t, l, AMPDIAG_KIND_ACTIVATION_GRAD, &st, 0)) < 0)
                    goto fail;
                cs_tstats(&st, 4160, 0, gm, gm * 1e-6, gm / 10);
                if (skip) {
                    st.n_posinf = 1;
                    st.n_pos--;
                }
                if ((rc = ampdiag_trace_append_tensor(w, t, l, AMPDIAG_KIND_WEIGHT_GRAD, &st, 0)) < 0)
                    goto fail;
                if (hist) {
                    ampdiag_hist h;
                    ampdiag_hist_init(&h);
                    int sh = (int)lround(log2(s->scale));
                    h.bin[AMPDIAG_HIST_BIN(s->hist_e1 + sh)] = s->hist_c1;
                    h.bin[AMPDIAG_HIST_BIN(s->hist_e2 + sh)] = s->hist_c2;
                    h.bin[AMPDIAG_HIST_ZERO] = 7;
                    if ((rc = ampdiag_trace_append_hist(w, t, l, AMPDIAG_KIND_WEIGHT_GRAD, &h)) < 0)
                        goto fail;
                }
                if (!skip) {
                    cs_tstats(&st, 4160, 0, s->w_rms * 3, s->w_rms * 1e-3, s->w_rms);
                    if ((rc = ampdiag_trace_append_tensor(w, t, l, AMPDIAG_KIND_WEIGHT, &st, 0)) < 0)
                        goto fail;
                    cs_tstats(&st, 4160, 0, s->u_rms * 3, s->u_rms * 1e-3, s->u_rms);
                    if ((rc = ampdiag_trace_append_tensor(w, t, l, AMPDIAG_KIND_UPDATE, &st,
                                                          s->lost_per_update)) < 0)
                        goto fail;
                }
            }
        }
        ampdiag_trace_step rec;
        memset(&rec, 0, sizeof rec);
        rec.step = t;
        rec.loss = cs_loss(s, t);
        rec.loss_scale = s->scale;
        rec.grad_norm = skip ? INFINITY : t == s->norm_spike_at ? 100.0 : 1.0 + (double)(t % 100) / 100.0;
        rec.clip_coef = 1;
        rec.skipped = skip;
        if (skip)
            snprintf(rec.skip_reason, sizeof rec.skip_reason, "%s", s->skip_reason);
        rec.lr = s->lr;
        rec.update_ratio = traced && !skip ? s->u_rms / s->w_rms : NAN;
        rec.nonfinite_grads = (uint64_t)skip;
        rec.wall_ms = s->wall && s->nwall ? s->wall[(size_t)t % s->nwall] : 1;
        if (skip && (rc = ampdiag_trace_append_event(w, t, 0, AMPDIAG_EV_INF_BACKWARD, 1, s->skip_reason)) < 0)
            goto fail;
        if (t == 0 && s->no_scaler_zero > 0 &&
            (rc = ampdiag_trace_append_event(w, t, -1, AMPDIAG_EV_NO_LOSS_SCALING, s->no_scaler_zero,
                                             "FP16 without a GradScaler")) < 0)
            goto fail;
        if (skip && (rc = ampdiag_trace_append_event(w, t, -1, AMPDIAG_EV_SKIPPED, s->scale, s->skip_reason)) < 0)
            goto fail;
        if ((rc = ampdiag_trace_append_step(w, &rec)) < 0)
            goto fail;
        if (s->eval_every > 0 && ((t + 1) % s->eval_every == 0)) {
            double el = cs_loss(s, t) * 1.05;
            if (t + 1 == s->nsteps && !isnan(s->final_eval))
                el = s->final_eval;
            if ((rc = ampdiag_trace_append_eval(w, t, el, s->eval_acc > 0 ? s->eval_acc : 0.9)) < 0)
                goto fail;
        }
    }
    return ampdiag_trace_close(w, s->nan_from >= 0 ? AMPDIAG_STATUS_DIVERGED : AMPDIAG_STATUS_COMPLETE);
fail:
    ampdiag_trace_close(w, AMPDIAG_STATUS_UNKNOWN);
    return rc;
}

#endif
