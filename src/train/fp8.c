/*
 * fp8.c - delayed-scaling FP8 what-if counts (fp8.h).
 *
 * What a traced step would otherwise compute again: the maximum of each amax history is kept as
 * the window slides (a queue of the values that can still be the maximum: TE's history max
 * without reading up to 1024 values per tensor and format each step), and of the counts behind
 * a format's classes (how many |x| are at least its overflow, normal and just-above-underflow
 * thresholds) those that the tensor's statistics settle are not counted again: every finite
 * non-zero |x| lies between the smallest and the largest, NaN and inf above every threshold.
 * Only the thresholds inside that range take a pass (the backend's count_at_least), all of them
 * in one: typically E4M3's normal and underflow thresholds, and nothing for E5M2. With
 * AMPDIAG_TRACE_PLAIN set in the environment (fp8_delayed_create reads it) every history is
 * read whole and every format counted by whatif_scaled, the way the records are checked against
 * (tests/t_trace_fused.c).
 */
#include "train/fp8.h"

#include "numerics/numfmt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const ampdiag_format fp8_formats[FP8_NFORMATS] = {AMPDIAG_E4M3, AMPDIAG_E5M2};

/* The amax history of one (layer, kind): a ring of the last `len` amax values, the scale each
 * format used last, and the queue of the history's maximum: the positions (in the count of
 * values entered) of the values not NaN that no later value is at least as large as, oldest
 * first, their values decreasing; and how many NaNs the history holds. */
typedef struct fp8_ring {
    float *amax;  /* [history] */
    int n, head;  /* values held; where the next one goes */
    float scale[FP8_NFORMATS];
    uint64_t entered;    /* values entered so far */
    uint64_t *qpos;      /* [history]: the queue, a ring of positions ... */
    float *qval;         /* [history]: ... and their values */
    int qhead, qn;
    int nans;
    float tscale[FP8_NFORMATS]; /* the scale each format's thresholds were found for (0: none yet) */
    uint32_t t[FP8_NFORMATS][3]; /* ... and those (ampdiag_scaled_thresholds; a bisection each) */
} fp8_ring;

struct fp8_delayed {
    int nlayers, history, margin;
    int plain;       /* AMPDIAG_TRACE_PLAIN: read every history whole, count every format */
    fp8_ring *rings; /* [nlayers * FP8_NKINDS] */
    float *store;    /* the rings' values, then the queues' values */
    uint64_t *qstore;
};

fp8_delayed *fp8_delayed_create(int nlayers, int history, int margin)
{
    if (nlayers < 0 || history < 1)
        return NULL;
    fp8_delayed *d = calloc(1, sizeof *d);
    size_t nr = (size_t)(nlayers ? nlayers : 1) * FP8_NKINDS;
    if (!d || !(d->rings = calloc(nr, sizeof *d->rings)) ||
        !(d->store = calloc(2 * nr * (size_t)history, sizeof *d->store)) ||
        !(d->qstore = calloc(nr * (size_t)history, sizeof *d->qstore))) {
        fp8_delayed_free(d);
        return NULL;
    }
    d->nlayers = nlayers;
    d->history = history;
    d->margin = margin;
    const char *plain = getenv("AMPDIAG_TRACE_PLAIN");
    d->plain = plain && *plain && strcmp(plain, "0") != 0;
    for (size_t i = 0; i < nr; i++) {
        d->rings[i].amax = d->store + i * (size_t)history;
        d->rings[i].qval = d->store + (nr + i) * (size_t)history;
        d->rings[i].qpos = d->qstore + i * (size_t)history;
        for (int f = 0; f < FP8_NFORMATS; f++)
            d->rings[i].scale[f] = 1.0f; /* TE's initial scale */
    }
    return d;
}

void fp8_delayed_free(fp8_delayed *d)
{
    if (!d)
        return;
    free(d->qstore);
    free(d->store);
    free(d->rings);
    free(d);
}

/* The amax TE would record for a tensor: NaN if it holds a NaN, inf if an inf, else the largest
 * finite |x| (0 for an empty or all-zero tensor). */
static float amax_of(const ampdiag_tstats *s)
{
    if (s->n_nan)
        return NAN;
    if (s->n_posinf || s->n_neginf)
        return INFINITY;
    return s->n_neg + s->n_pos ? s->absmax : 0.0f;
}

/* Enter amax into the history of `history` values: into the ring, and into the queue of its
 * maximum (dropping the position that left the window, and the values amax outdoes). */
static void ring_push(fp8_ring *r, int history, float amax)
{
    if (r->n == history && isnan(r->amax[r->head]))
        r->nans--;
    r->amax[r->head] = amax;
    r->head = (r->head + 1) % history;
    if (r->n < history)
        r->n++;
    uint64_t pos = r->entered++;
    if (r->qn > 0 && r->qpos[r->qhead] + (uint64_t)history <= pos) { /* left the window */
        r->qhead = (r->qhead + 1) % history;
        r->qn--;
    }
    if (isnan(amax)) {
        r->nans++;
        return;
    }
    while (r->qn > 0 && !(r->qval[(r->qhead + r->qn - 1) % history] > amax))
        r->qn--;
    int at = (r->qhead + r->qn++) % history;
    r->qpos[at] = pos;
    r->qval[at] = amax;
}

/* The history's maximum as ampdiag_delayed_scale finds it (NaN when it holds one), as a history
 * of one value; *len 0 when it is empty. */
static float ring_max(const fp8_ring *r, size_t *len)
{
    *len = r->n > 0;
    if (r->nans)
        return NAN;
    return r->qn > 0 ? r->qval[r->qhead] : -INFINITY; /* (no value but NaNs: not reached) */
}

/* The counts of |x| bit patterns at least T (T in [1, inf]) that a tensor's statistics settle:
 * NaN and inf are at least every T; the finite non-zero values all are when the smallest is,
 * none when the largest is not (zeros never are). -1 when a pass must count. */
static int64_t known_at_least(const ampdiag_tstats *s, uint32_t T)
{
    uint64_t nonfinite = s->n_nan + s->n_posinf + s->n_neginf, nonzero = s->n_neg + s->n_pos;
    uint32_t amax = ampdiag_f32_bits(s->absmax) & 0x7fffffffu, amin = ampdiag_f32_bits(s->absmin_nz) & 0x7fffffffu;
    if (nonzero == 0 || amax < T)
        return (int64_t)nonfinite;
    if (amin >= T)
        return (int64_t)(nonfinite + nonzero);
    return -1;
}

/* A format's classes from its counts at least t0, t1 and t2 + 1 (ampdiag_scaled_thresholds),
 * as ampdiag_whatif_scaled_n derives them: overflow = #(t0 <= |x| < inf), underflow = #(0 <
 * |x| <= t2), subnormal = #(t2 < |x| < t1). */
static void classes_of(const ampdiag_tstats *s, const uint64_t g[3], uint64_t c[AMPDIAG_WHATIF_NCLASSES])
{
    c[AMPDIAG_WHATIF_OVERFLOW] = g[0] - (s->n_nan + s->n_posinf + s->n_neginf);
    c[AMPDIAG_WHATIF_UNDERFLOW] = s->count - s->n_zero - g[2];
    c[AMPDIAG_WHATIF_SUBNORMAL] = g[2] > g[1] ? g[2] - g[1] : 0;
}

/* The counts of the formats under out->scale: each format's three thresholds settled by the
 * statistics or counted, those left in one pass (count_at_least), or where the backend has no
 * such pass (or AMPDIAG_TRACE_PLAIN), the formats not settled whole by whatif_scaled. 0 or -1. */
static int count_formats(const fp8_delayed *d, fp8_ring *r, const backend *bk, const float *x, size_t n,
                         const ampdiag_tstats *s, fp8_counts *out)
{
    uint32_t ge[FP8_NFORMATS * 3];
    uint64_t g[FP8_NFORMATS * 3], cnt[FP8_NFORMATS * 3];
    int slot[FP8_NFORMATS * 3], k = 0, unsettled[FP8_NFORMATS] = {0};
    for (int f = 0; f < FP8_NFORMATS; f++) {
        uint32_t *t = r->t[f];
        if (r->tscale[f] != out->scale[f] || d->plain) { /* (a scale changes while the history's maximum does) */
            if (ampdiag_scaled_thresholds(fp8_formats[f], out->scale[f], t) != 0)
                return -1;
            r->tscale[f] = out->scale[f];
        }
        const uint32_t at[3] = {t[0], t[1], t[2] + 1u};
        for (int j = 0; j < 3; j++) {
            int64_t v = known_at_least(s, at[j]);
            g[3 * f + j] = (uint64_t)v;
            slot[3 * f + j] = v < 0 || d->plain ? k : -1;
            if (v < 0 || d->plain) {
                ge[k++] = at[j];
                unsettled[f] = 1;
            }
        }
    }
    if (k > 0 && bk->count_at_least && !d->plain) {
        if (bk->count_at_least(bk, x, n, (size_t)k, ge, cnt) != 0)
            return -1;
        for (int i = 0; i < FP8_NFORMATS * 3; i++)
            if (slot[i] >= 0)
                g[i] = cnt[slot[i]];
        k = 0;
    }
    ampdiag_format fmt[FP8_NFORMATS];
    float scale[FP8_NFORMATS];
    int which[FP8_NFORMATS], m = 0;
    for (int f = 0; f < FP8_NFORMATS; f++) {
        if (k > 0 && unsettled[f]) { /* counted whole below */
            fmt[m] = fp8_formats[f];
            scale[m] = out->scale[f];
            which[m++] = f;
        } else {
            classes_of(s, g + 3 * f, out->c[f]);
        }
    }
    uint64_t c[FP8_NFORMATS][AMPDIAG_WHATIF_NCLASSES];
    if (m > 0 && bk->whatif_scaled(bk, (size_t)m, fmt, scale, x, n, c) != 0)
        return -1;
    for (int j = 0; j < m; j++)
        memcpy(out->c[which[j]], c[j], sizeof c[j]);
    return 0;
}

/* The ring of (layer, kind), or NULL where nothing is counted. */
static fp8_ring *ring_of(fp8_delayed *d, const backend *bk, int layer, ampdiag_tensor_kind kind)
{
    if (!d || !bk->whatif_scaled || layer < 0 || layer >= d->nlayers || (int)kind < 0 || (int)kind >= FP8_NKINDS)
        return NULL;
    return &d->rings[(size_t)layer * FP8_NKINDS + (size_t)kind];
}

/* This step's scales of the ring's formats into r->scale and out->scale, from the history before
 * the step. */
static void step_scales(const fp8_delayed *d, fp8_ring *r, fp8_counts *out)
{
    size_t len;
    float hmax = ring_max(r, &len);
    for (int f = 0; f < FP8_NFORMATS; f++) /* (the order of the values does not matter to their maximum) */
        out->scale[f] = r->scale[f] = d->plain ? ampdiag_delayed_scale(fp8_formats[f], r->amax, (size_t)r->n, d->margin,
                                                                       r->scale[f])
                                               : ampdiag_delayed_scale(fp8_formats[f], &hmax, len, d->margin, r->scale[f]);
}

/* ---------------------------------------------------------------- many tensors at once */

/* One tensor's counts between its plan and its finish: the thresholds a pass must count. */
typedef struct fp8_plan {
    fp8_ring *r;
    uint64_t g[FP8_NFORMATS * 3];
    int slot[FP8_NFORMATS * 3];
    uint32_t ge[FP8_NFORMATS * 3];
    uint64_t cnt[FP8_NFORMATS * 3];
    size_t k;
} fp8_plan;

/* The ring of job j, its scales set from its history, and the thresholds its statistics do not
 * settle into p (p->k of them); NULL r where the job cannot be counted. 0, or -1 for a scale
 * whose thresholds cannot be found. */
static int plan_of(fp8_delayed *d, const fp8_job *j, fp8_plan *p)
{
    p->r = NULL;
    p->k = 0;
    j->out->have = 0;
    if (j->layer < 0 || j->layer >= d->nlayers || (int)j->kind < 0 || (int)j->kind >= FP8_NKINDS)
        return 0;
    fp8_ring *r = &d->rings[(size_t)j->layer * FP8_NKINDS + (size_t)j->kind];
    size_t len;
    float hmax = ring_max(r, &len);
    for (int f = 0; f < FP8_NFORMATS; f++) {
        j->out->scale[f] = r->scale[f] = ampdiag_delayed_scale(fp8_formats[f], &hmax, len, d->margin, r->scale[f]);
        uint32_t *t = r->t[f];
        if (r->tscale[f] != j->out->scale[f]) {
            if (ampdiag_scaled_thresholds(fp8_formats[f], j->out->scale[f], t) != 0)
                return -1;
            r->tscale[f] = j->out->scale[f];
        }
        const uint32_t at[3] = {t[0], t[1], t[2] + 1u};
        for (int q = 0; q < 3; q++) {
            int64_t v = known_at_least(j->s, at[q]);
            p->g[3 * f + q] = (uint64_t)v;
            p->slot[3 * f + q] = v < 0 ? (int)p->k : -1;
            if (v < 0)
                p->ge[p->k++] = at[q];
        }
    }
    p->r = r;
    return 0;
}

void fp8_delayed_count_many(fp8_delayed *d, const backend *bk, size_t k, const fp8_job *jobs)
{
    for (size_t i = 0; i < k; i++)
        jobs[i].out->have = 0;
    if (!d || !bk->whatif_scaled)
        return;
    if (!bk->count_at_least_many || d->plain) {
        for (size_t i = 0; i < k; i++)
            fp8_delayed_count(d, bk, jobs[i].layer, jobs[i].kind, jobs[i].x, jobs[i].n, jobs[i].s, jobs[i].out);
        return;
    }
    fp8_plan *plan = malloc((k ? k : 1) * sizeof *plan);
    bk_ge_req *req = malloc((k ? k : 1) * sizeof *req);
    if (!plan || !req) { /* (out of memory: one at a time, which needs none) */
        free(plan), free(req);
        for (size_t i = 0; i < k; i++)
            fp8_delayed_count(d, bk, jobs[i].layer, jobs[i].kind, jobs[i].x, jobs[i].n, jobs[i].s, jobs[i].out);
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < k; i++)
        if (plan_of(d, &jobs[i], &plan[i]) == 0 && plan[i].r && plan[i].k > 0)
            req[m++] = (bk_ge_req){jobs[i].x, jobs[i].n, plan[i].k, plan[i].ge, plan[i].cnt};
        else if (plan[i].k > 0) /* (a scale without thresholds: not counted) */
            plan[i].r = NULL;
    int rc = m > 0 ? bk->count_at_least_many(bk, m, req) : 0;
    for (size_t i = 0; i < k; i++) {
        fp8_plan *p = &plan[i];
        if (!p->r || rc != 0)
            continue;
        for (int q = 0; q < FP8_NFORMATS * 3; q++)
            if (p->slot[q] >= 0)
                p->g[q] = p->cnt[p->slot[q]];
        for (int f = 0; f < FP8_NFORMATS; f++)
            classes_of(jobs[i].s, p->g + 3 * f, jobs[i].out->c[f]);
        ring_push(p->r, d->history, amax_of(jobs[i].s));
        jobs[i].out->have = 1;
    }
    free(plan);
    free(req);
}

void fp8_delayed_count(fp8_delayed *d, const backend *bk, int layer, ampdiag_tensor_kind kind,
                       const float *x, size_t n, const ampdiag_tstats *s, fp8_counts *out)
{
    out->have = 0;
    fp8_ring *r = ring_of(d, bk, layer, kind);
    if (!r)
        return;
    step_scales(d, r, out);
    if (count_formats(d, r, bk, x, n, s, out) != 0)
        return;
    ring_push(r, d->history, amax_of(s));
    out->have = 1;
}

void fp8_stats(fp8_delayed *d, const backend *bk, int layer, ampdiag_tensor_kind kind, const float *x,
               size_t n, ampdiag_tstats *s, ampdiag_hist *h, fp8_counts *out)
{
    fp8_ring *r = ring_of(d, bk, layer, kind);
    out->have = 0;
    if (!r || d->plain || !bk->tstats_ge) {
        bk->tstats(bk, x, n, s, h);
        fp8_delayed_count(d, bk, layer, kind, x, n, s, out);
        return;
    }
    step_scales(d, r, out);
    uint32_t ge[FP8_NFORMATS * 3];
    for (int f = 0; f < FP8_NFORMATS; f++) {
        uint32_t *t = r->t[f];
        if (r->tscale[f] != out->scale[f]) { /* (a scale changes while the history's maximum does) */
            if (ampdiag_scaled_thresholds(fp8_formats[f], out->scale[f], t) != 0) {
                bk->tstats(bk, x, n, s, h);
                return;
            }
            r->tscale[f] = out->scale[f];
        }
        ge[3 * f] = t[0];
        ge[3 * f + 1] = t[1];
        ge[3 * f + 2] = t[2] + 1u;
    }
    uint64_t g[FP8_NFORMATS * 3];
    if (bk->tstats_ge(bk, x, n, s, h, FP8_NFORMATS * 3, ge, g) != 0) {
        bk->tstats(bk, x, n, s, h);
        return;
    }
    for (int f = 0; f < FP8_NFORMATS; f++)
        classes_of(s, g + 3 * f, out->c[f]);
    ring_push(r, d->history, amax_of(s));
    out->have = 1;
}
