/*
 * trace_synth.h - deterministic synthetic trace content, shared by the trace tests, the
 * reference-trace generator (tests/t_trace_ref --write) and bench/bench_trace.
 *
 * Every value is a pure function of (trace spec, step, layer, kind, element): tensor elements
 * are built from the bits of an integer hash (no libm), so the same records come out on any
 * machine, and a test can recompute what a trace must hold.
 */
#ifndef AMPDIAG_TRACE_SYNTH_H
#define AMPDIAG_TRACE_SYNTH_H

#include "ampdiag.h"
#include "ampdiag_trace.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define SYNTH_N 128 /* elements per synthetic tensor */

static inline uint32_t synth_hash(uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
    uint32_t h = 0x9e3779b9u ^ a;
    uint32_t v[3] = {b, c, d};
    for (int i = 0; i < 3; i++) {
        h ^= v[i] + 0x7f4a7c15u + (h << 6) + (h >> 2);
        h ^= h >> 16;
        h *= 0x85ebca6bu;
        h ^= h >> 13;
        h *= 0xc2b2ae35u;
        h ^= h >> 16;
    }
    return h;
}

static inline float synth_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Binary exponent range [lo, lo + span) of each tensor kind: activations near 1, gradients and
 * updates small enough that some fall into FP16's subnormal range and below. */
static inline void synth_exp_range(int kind, int *lo, int *span)
{
    static const int los[AMPDIAG_NKINDS] = {-6, -28, -8, -24, -30};
    static const int spans[AMPDIAG_NKINDS] = {11, 17, 8, 17, 17};
    *lo = los[kind];
    *span = spans[kind];
}

/* What a trace spec injects (bit flags). */
#define SYNTH_OVERFLOW_FC1 1u  /* layer 0 activations from step 40: +70000 and -1e5 (FP16 overflow) */
#define SYNTH_INF_SKIPS 2u     /* layer 1 weight_grad: +inf at the skipped steps */
#define SYNTH_NAN_DIVERGE 4u   /* layer 0 activation: NaN at the last step */

typedef struct synth_spec {
    const char *file;         /* reference file name under traces/ */
    const char *precision;
    int nlayers;
    int nsteps;               /* steps appended */
    int hist_every;           /* 0 = no histograms */
    int eval_every;           /* 0 = no evaluations */
    double clip;              /* 0 = no clipping */
    int fp16_scaler;          /* dynamic loss scale with skips at skip_a, skip_b */
    int skip_a, skip_b, grow_at;
    int diverge_from;         /* loss spikes from here, NaN at the last step; 0 = never */
    unsigned inject;
    ampdiag_trace_status status; /* closed with this; RUNNING = killed after the last flush */
    unsigned flush_every;
    int version;              /* the format version of the reference file; --write
                                 writes only those of this writer's version */
    int fp8_history;          /* > 0: delayed-scaling /whatif rows with this amax history */
} synth_spec;

static const synth_spec synth_specs[] = {
    {"v1-fp32-complete.h5", "fp32", 3, 60, 10, 20, 1.5, 0, -1, -1, -1, 0, SYNTH_OVERFLOW_FC1,
     AMPDIAG_STATUS_COMPLETE, 10, 1, 0},
    {"v1-fp16-diverged.h5", "fp16", 2, 40, 20, 0, 0, 1, 12, 25, 30, 36,
     SYNTH_INF_SKIPS | SYNTH_NAN_DIVERGE, AMPDIAG_STATUS_DIVERGED, 10, 1, 0},
    {"v1-cutoff.h5", "bf16", 2, 30, 0, 0, 0, 0, -1, -1, -1, 0, 0, AMPDIAG_STATUS_RUNNING, 8, 1, 0},
    {"v2-fp32-delayed.h5", "fp32", 3, 60, 10, 20, 1.5, 0, -1, -1, -1, 0, SYNTH_OVERFLOW_FC1,
     AMPDIAG_STATUS_COMPLETE, 10, 2, 16},
};
#define SYNTH_NSPECS ((int)(sizeof synth_specs / sizeof synth_specs[0]))

static const char *const synth_layer_names[] = {"fc1", "fc2", "fc3", "fc4"};
static const char *const synth_layer_shapes[] = {"[64, 32]", "[64, 64]", "[10, 64]", "[10, 10]"};
static const uint64_t synth_layer_params[] = {2112, 4160, 650, 110};

/* Fill x[0..SYNTH_N) for (step, layer, kind) of spec sp (sp NULL: no injections). */
static inline void synth_tensor(const synth_spec *sp, int64_t step, int layer, int kind, float *x)
{
    int lo, span;
    synth_exp_range(kind, &lo, &span);
    for (uint32_t i = 0; i < SYNTH_N; i++) {
        uint32_t h = synth_hash((uint32_t)step, (uint32_t)layer, (uint32_t)kind, i);
        if (h % 17 == 0) {
            x[i] = (h & 0x100u) ? -0.0f : 0.0f;
            continue;
        }
        int e = lo + (int)((h >> 24) % (uint32_t)span);
        uint32_t bits = (h & 0x80000000u) | ((uint32_t)(e + 127) << 23) | (h & 0x7fffffu);
        x[i] = synth_from_bits(bits);
    }
    if (!sp)
        return;
    if ((sp->inject & SYNTH_OVERFLOW_FC1) && layer == 0 && kind == AMPDIAG_KIND_ACTIVATION &&
        step >= 40) {
        x[0] = 70000.0f;
        x[1] = -100000.0f;
    }
    if ((sp->inject & SYNTH_INF_SKIPS) && layer == 1 && kind == AMPDIAG_KIND_WEIGHT_GRAD &&
        (step == sp->skip_a || step == sp->skip_b))
        x[3] = INFINITY;
    if ((sp->inject & SYNTH_NAN_DIVERGE) && layer == 0 && kind == AMPDIAG_KIND_ACTIVATION &&
        step == sp->nsteps - 1)
        x[5] = NAN;
}

static inline uint64_t synth_lost_updates(int64_t step, int layer, int kind)
{
    if (kind != AMPDIAG_KIND_UPDATE)
        return 0;
    return synth_hash((uint32_t)step, (uint32_t)layer, 99u, 7u) % 7u;
}

static inline double synth_loss_scale(const synth_spec *sp, int64_t step)
{
    if (!sp->fp16_scaler)
        return 1.0;
    double s = 65536.0;
    if (step > sp->skip_a) s *= 0.5;
    if (step > sp->skip_b) s *= 0.5;
    if (step > sp->grow_at) s *= 2.0;
    return s;
}

static inline void synth_step(const synth_spec *sp, int64_t step, ampdiag_trace_step *r)
{
    uint32_t h = synth_hash((uint32_t)step, 1000u, 0u, 0u);
    memset(r, 0, sizeof *r);
    r->step = step;
    double loss = 2.5;
    for (int64_t i = 0; i < step; i++)
        loss *= 0.97;
    if (sp->diverge_from && step >= sp->diverge_from)
        for (int64_t i = sp->diverge_from; i <= step; i++)
            loss *= 3.0;
    if (sp->diverge_from && step == sp->nsteps - 1)
        loss = NAN;
    r->loss = loss;
    r->loss_scale = synth_loss_scale(sp, step);
    r->grad_norm = 1.0 + (double)(h % 1000u) / 1000.0;
    r->clip_coef = sp->clip > 0 && r->grad_norm > sp->clip ? sp->clip / r->grad_norm : 1.0;
    if (step == sp->skip_a || step == sp->skip_b) {
        r->skipped = 1;
        snprintf(r->skip_reason, sizeof r->skip_reason, "inf in %s weight_grad", synth_layer_names[1]);
        r->nonfinite_grads = 1;
        r->grad_norm = INFINITY;
        r->clip_coef = 1.0;
    }
    r->lr = 1e-3 * (step < 10 ? (double)(step + 1) / 10.0 : 1.0);
    r->update_ratio = r->skipped ? 0.0 : 1e-3 * (1.0 + (double)(h % 100u) / 100.0);
    r->wall_ms = 10.0 + (double)((h >> 8) % 50u) / 10.0;
}

/* The events of one step (at most 4), in append order. */
static inline int synth_events(const synth_spec *sp, int64_t step, ampdiag_trace_event *ev)
{
    int n = 0;
    ampdiag_trace_step r;
    synth_step(sp, step, &r);
    memset(ev, 0, 4 * sizeof *ev);
    if (r.clip_coef < 1.0) {
        ev[n] = (ampdiag_trace_event){step, -1, AMPDIAG_EV_CLIPPED, r.grad_norm, "", AMPDIAG_PHASE_TRAIN, -1, -1};
        snprintf(ev[n].message, sizeof ev[n].message, "grad norm %.4g clipped to %g", r.grad_norm,
                 sp->clip);
        n++;
    }
    if (r.skipped) {
        ev[n] = (ampdiag_trace_event){step, 1, AMPDIAG_EV_INF_BACKWARD, 1.0, "", AMPDIAG_PHASE_TRAIN, -1, -1};
        snprintf(ev[n].message, sizeof ev[n].message, "first inf in %s weight_grad",
                 synth_layer_names[1]);
        n++;
        ev[n] = (ampdiag_trace_event){step, -1, AMPDIAG_EV_SCALE_BACKOFF, r.loss_scale / 2, "", AMPDIAG_PHASE_TRAIN, -1, -1};
        snprintf(ev[n].message, sizeof ev[n].message, "loss scale %g -> %g", r.loss_scale,
                 r.loss_scale / 2);
        n++;
    }
    if (sp->fp16_scaler && step == sp->grow_at) {
        ev[n] = (ampdiag_trace_event){step, -1, AMPDIAG_EV_SCALE_GROWTH, r.loss_scale * 2, "", AMPDIAG_PHASE_TRAIN, -1, -1};
        snprintf(ev[n].message, sizeof ev[n].message, "loss scale %g -> %g", r.loss_scale,
                 r.loss_scale * 2);
        n++;
    }
    if (sp->diverge_from && step == sp->diverge_from) {
        ev[n] = (ampdiag_trace_event){step, -1, AMPDIAG_EV_LOSS_SPIKE, r.loss, "loss spike (x3)", AMPDIAG_PHASE_TRAIN, -1, -1};
        n++;
    }
    if (sp->diverge_from && step == sp->nsteps - 1) {
        ev[n] = (ampdiag_trace_event){step, 0, AMPDIAG_EV_NAN_FORWARD, 1.0,
                                      "first NaN in fc1 activation", AMPDIAG_PHASE_TRAIN, -1, -1};
        n++;
        ev[n] = (ampdiag_trace_event){step, -1, AMPDIAG_EV_DIVERGENCE, r.loss, "loss is NaN", AMPDIAG_PHASE_TRAIN, -1, -1};
        n++;
    }
    return n;
}

static inline void synth_eval(int64_t step, ampdiag_trace_eval *e)
{
    e->step = step;
    e->loss = 2.0 - (double)step / 100.0;
    e->metric = 0.5 + (double)step / 200.0;
}

/* Delayed scaling as the definition of the v2 reference's /whatif rows: the amax history of
 * each (layer, kind) and the scale each format used last (1 at first). */
#define SYNTH_FP8_MAXHIST 16
typedef struct synth_fp8 {
    float amax[4][4][SYNTH_FP8_MAXHIST]; /* [layer][kind][ring] */
    int n[4][4];
    float scale[4][4][2];
} synth_fp8;

static inline void synth_fp8_init(synth_fp8 *d)
{
    memset(d, 0, sizeof *d);
    for (int l = 0; l < 4; l++)
        for (int k = 0; k < 4; k++)
            d->scale[l][k][0] = d->scale[l][k][1] = 1.0f;
}

/* The scales and counts of the tensor x (statistics st) of (layer, kind) at this step, for
 * E4M3 [0] and E5M2 [1]; then its amax enters the history (of hist <= SYNTH_FP8_MAXHIST). */
static inline void synth_fp8_step(synth_fp8 *d, int hist, int l, int k, const float *x,
                                  const ampdiag_tstats *st, float scale[2],
                                  uint64_t counts[2][AMPDIAG_WHATIF_NCLASSES])
{
    static const ampdiag_format f8[2] = {AMPDIAG_E4M3, AMPDIAG_E5M2};
    int n = d->n[l][k] < hist ? d->n[l][k] : hist;
    for (int f = 0; f < 2; f++) {
        scale[f] = d->scale[l][k][f] = ampdiag_delayed_scale(f8[f], d->amax[l][k], (size_t)n, 0, d->scale[l][k][f]);
        ampdiag_whatif_scaled(f8[f], scale[f], x, SYNTH_N, counts[f]);
    }
    float a = st->n_nan ? NAN : st->n_posinf + st->n_neginf ? INFINITY : st->n_neg + st->n_pos ? st->absmax : 0.0f;
    d->amax[l][k][d->n[l][k] % hist] = a;
    d->n[l][k]++;
}

/* Write the trace of spec sp to path. With sp->status RUNNING, the caller forks: the function
 * returns after the appends without closing (the child then _exits, as a killed run would).
 * Returns 0 or a trace error code. */
static inline int synth_write(const synth_spec *sp, const char *path, ampdiag_trace_writer **keep)
{
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    o.overwrite = 1;
    o.flush_every_steps = sp->flush_every;
    o.flush_seconds = 0; /* deterministic: flush by steps only */
    ampdiag_trace_writer *w;
    int rc = ampdiag_trace_create(path, &o, &w);
    if (rc)
        return rc;
#define SYNTH_TRY(call)                                                                            \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ < 0) {                                                                             \
            ampdiag_trace_close(w, AMPDIAG_STATUS_UNKNOWN);                                        \
            return rc_;                                                                            \
        }                                                                                          \
    } while (0)
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PRECISION, sp->precision));
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_MODEL, "synthetic-mlp"));
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_DATA, "synthetic:reference"));
    SYNTH_TRY(ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_SEED, 1234));
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_OPTIMIZER, "adamw"));
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_HYPERPARAMETERS,
                                         "beta1=0.9 beta2=0.999 eps=1e-08 weight_decay=0.01"));
    SYNTH_TRY(ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_LR, 1e-3));
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_LR_SCHEDULE, "linear warmup=10"));
    SYNTH_TRY(ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_CLIP, sp->clip));
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_LOSS_SCALE, sp->fp16_scaler ? "dynamic" : "none"));
    if (sp->fp16_scaler)
        SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_SCALER,
                                             "init=65536 growth=2 backoff=0.5 interval=2000"));
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_DEVICE, "cpu"));
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_DEVICE_NAME, "synthetic"));
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_COMMAND_LINE, "t_trace_ref --write traces"));
    SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_START_TIME, "2025-01-01T00:00:00Z"));
    SYNTH_TRY(ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_STEPS_PLANNED, sp->nsteps));
    SYNTH_TRY(ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_BATCH, 32));
    if (sp->eval_every)
        SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_EVAL_METRIC, "accuracy"));
    if (sp->fp8_history > 0) {
        SYNTH_TRY(ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_FP8_AMAX_HISTORY, sp->fp8_history));
        SYNTH_TRY(ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_FP8_MARGIN, 0));
        SYNTH_TRY(ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_FP8_AMAX_ALGO, "max"));
    }
    synth_fp8 d8;
    synth_fp8_init(&d8);
    for (int l = 0; l < sp->nlayers; l++)
        SYNTH_TRY(ampdiag_trace_add_layer(w, synth_layer_names[l], "linear", synth_layer_shapes[l],
                                          synth_layer_params[l]));
    float x[SYNTH_N];
    for (int64_t s = 0; s < sp->nsteps; s++) {
        for (int l = 0; l < sp->nlayers; l++)
            for (int k = 0; k < AMPDIAG_NKINDS; k++) {
                ampdiag_tstats st;
                ampdiag_hist hist;
                synth_tensor(sp, s, l, k, x);
                ampdiag_tstats_compute(x, SYNTH_N, &st, &hist);
                SYNTH_TRY(ampdiag_trace_append_tensor(w, s, l, (ampdiag_tensor_kind)k, &st,
                                                      synth_lost_updates(s, l, k)));
                if (sp->fp8_history > 0 && k != AMPDIAG_KIND_UPDATE) {
                    float sc[2];
                    uint64_t c8[2][AMPDIAG_WHATIF_NCLASSES];
                    synth_fp8_step(&d8, sp->fp8_history, l, k, x, &st, sc, c8);
                    for (int f = 0; f < 2; f++)
                        SYNTH_TRY(ampdiag_trace_append_whatif(w, s, l, (ampdiag_tensor_kind)k,
                                                              f ? AMPDIAG_E5M2 : AMPDIAG_E4M3,
                                                              AMPDIAG_SCALING_DELAYED, sc[f], st.count, c8[f]));
                }
                if (sp->hist_every && s % sp->hist_every == 0)
                    SYNTH_TRY(ampdiag_trace_append_hist(w, s, l, (ampdiag_tensor_kind)k, &hist));
            }
        ampdiag_trace_event ev[4];
        int ne = synth_events(sp, s, ev);
        for (int i = 0; i < ne; i++)
            SYNTH_TRY(ampdiag_trace_append_event(w, s, ev[i].layer, (ampdiag_event_code)ev[i].code,
                                                 ev[i].value, ev[i].message));
        if (sp->eval_every && (s + 1) % sp->eval_every == 0) {
            ampdiag_trace_eval e;
            synth_eval(s, &e);
            SYNTH_TRY(ampdiag_trace_append_eval(w, e.step, e.loss, e.metric));
        }
        ampdiag_trace_step r;
        synth_step(sp, s, &r);
        SYNTH_TRY(ampdiag_trace_append_step(w, &r));
    }
#undef SYNTH_TRY
    if (sp->status == AMPDIAG_STATUS_RUNNING && keep) {
        *keep = w; /* the caller _exits without closing */
        return 0;
    }
    return ampdiag_trace_close(w, sp->status);
}

#endif /* AMPDIAG_TRACE_SYNTH_H */
