/*
 * ranks.c - the ranks' tensor records side by side (ranks.h): each rank's /tensors read again,
 * in step order, all ranks one step at a time. At each step, per (layer, kind), the ranks'
 * records are compared (the first non-finite record of each rank, replicated weights and
 * reduced gradients that must agree, the spread of the activations) and merged into the record
 * the whole run held, which goes to the merged run's tensor pass (load_internal.h).
 * ranks_steps.c does the same for the step records and makes the findings; group.c reads
 * the arguments.
 */
#include "analysis/load_internal.h"
#include "analysis/ranks_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * Each rank's records, in batches
 * ------------------------------------------------------------------------------------------ */

enum { CUR_BATCH = 8192 };

/* The next record of the rank's trace (NULL at the end); *rc an error of the read. */
static const ampdiag_trace_tensor *cur_peek(rcur *c, int *rc)
{
    if (c->pos == c->n) {
        free(c->buf);
        c->buf = NULL;
        c->n = c->pos = 0;
        if (c->next >= c->total)
            return NULL;
        if ((*rc = ampdiag_trace_read_tensors(c->rd, c->next, CUR_BATCH, &c->buf, &c->n)))
            return NULL;
        c->next += c->n;
        if (c->n == 0) {
            c->next = c->total;
            return NULL;
        }
    }
    return &c->buf[c->pos];
}

/* ------------------------------------------------------------------------------------------
 * One step of every rank
 * ------------------------------------------------------------------------------------------ */

static size_t at(const rview *v, size_t r, int layer, int kind)
{
    return (r * v->nl + (size_t)layer) * AMPDIAG_NKINDS + (size_t)kind;
}

/* Two records hold the same statistics: count, mean, rms and the extremes, bit for bit (NaN
 * equals NaN). */
static int same_num(double a, double b) { return a == b || (isnan(a) && isnan(b)); }
static int same_rec(const ampdiag_trace_tensor *a, const ampdiag_trace_tensor *b)
{
    return a->count == b->count && same_num(a->mean, b->mean) && same_num(a->rms, b->rms) &&
           same_num(a->min, b->min) && same_num(a->max, b->max) && same_num(a->absmax, b->absmax);
}

static uint64_t nonfinite(const ampdiag_trace_tensor *x) { return x->n_nan + x->n_posinf + x->n_neginf; }

/* Merge x into the slot (a second record of one (step, layer, kind) in a trace: two forward
 * passes). */
static void merge_rec(ampdiag_trace_tensor *d, const ampdiag_trace_tensor *x)
{
    ampdiag_tstats a, b;
    ampdiag_trace_tensor_to_tstats(d, &a);
    ampdiag_trace_tensor_to_tstats(x, &b);
    ampdiag_tstats_merge(&a, &b);
    uint64_t lost = d->lost_updates + x->lost_updates, l16 = d->lost_if_fp16 + x->lost_if_fp16,
             lb16 = d->lost_if_bf16 + x->lost_if_bf16;
    ampdiag_trace_tensor_from_tstats(d, &a);
    d->lost_updates = lost;
    d->lost_if_fp16 = l16;
    d->lost_if_bf16 = lb16;
}

/* Rank r's next record of a step not done yet: records of a step already done (out of step
 * order) are left out and counted. NULL at the end; *rc an error of the read. */
static const ampdiag_trace_tensor *next_rec(rview *v, size_t r, int *rc)
{
    const ampdiag_trace_tensor *x;
    while ((x = cur_peek(&v->cur[r], rc)) && x->step <= v->done) {
        v->R->unsorted++;
        v->cur[r].pos++;
    }
    return x;
}

/* Rank r's records of step s into the slots (its layers mapped to the merged run's). 0 or an
 * AMPDIAG_TRACE_ error. */
static int gather(rview *v, size_t r, int64_t s)
{
    rcur *c = &v->cur[r];
    int rc = 0;
    for (const ampdiag_trace_tensor *x; (x = next_rec(v, r, &rc)) && x->step == s; c->pos++) {
        int L = x->layer >= 0 && (size_t)x->layer < v->lmap_n[r] ? v->lmap[r][x->layer] : -1;
        if (L < 0 || x->kind < 0 || x->kind >= AMPDIAG_NKINDS)
            continue;
        size_t i = at(v, r, L, x->kind);
        if (v->have[i])
            merge_rec(&v->slot[i], x);
        else
            v->slot[i] = *x;
        v->slot[i].layer = L;
        v->have[i] = 1;
    }
    return rc;
}

/* The position of (layer, kind) in a step's execution order: the forward pass (layers in
 * order), the backward pass (layers in reverse, each's activation gradient then weight
 * gradient), then the updates and the weights. */
int an_rank_exec_pos(size_t nl, int layer, int kind)
{
    size_t l = (size_t)layer;
    switch (kind) {
    case AMPDIAG_KIND_ACTIVATION: return (int)l;
    case AMPDIAG_KIND_ACTIVATION_GRAD: return (int)(nl + 2 * (nl - 1 - l));
    case AMPDIAG_KIND_WEIGHT_GRAD: return (int)(nl + 2 * (nl - 1 - l) + 1);
    case AMPDIAG_KIND_UPDATE: return (int)(3 * nl + l);
    default: return (int)(4 * nl + l);
    }
}

/* Each rank's first record with NaN/inf in execution order, and its first of its own tensors
 * (activations and their gradients). */
static void first_nonfinite(rview *v, int64_t s)
{
    for (size_t r = 0; r < v->n; r++) {
        an_rank *k = &v->R->rank[r];
        int best = -1;
        for (size_t L = 0; L < v->nl; L++)
            for (int kind = 0; kind < AMPDIAG_NKINDS; kind++) {
                size_t i = at(v, r, (int)L, kind);
                if (!v->have[i] || !nonfinite(&v->slot[i]))
                    continue;
                if (an_rank_local_kind(kind) && k->local_nf_step < 0)
                    k->local_nf_step = s;
                int p = an_rank_exec_pos(v->nl, (int)L, kind);
                if (k->nf_step < 0 && (best < 0 || p < best)) {
                    best = p;
                    k->nf_layer = (int)L;
                    k->nf_kind = kind;
                }
            }
        if (best >= 0)
            k->nf_step = s;
    }
}

/* What must agree across ranks (replicated runs): the weights (replicas) and, after the
 * gradient reduction, the weight gradients and updates; each rank's record against the first
 * rank's. An update that differs where the weights already differ follows from them. */
static void agree_one(rview *v, int64_t s, int L, int kind, agree_acc *a)
{
    int differs = 0;
    size_t i0 = at(v, 0, L, kind);
    if (!v->have[i0])
        return;
    const ampdiag_trace_tensor *b = &v->slot[i0];
    for (size_t r = 1; r < v->n; r++) {
        size_t i = at(v, r, L, kind);
        if (!v->have[i] || same_rec(&v->slot[i], b))
            continue;
        const ampdiag_trace_tensor *x = &v->slot[i];
        if (a->first < 0) {
            a->first = s;
            a->rank = v->R->rank[r].rank;
            a->vs = v->R->rank[0].rank;
            a->value = x->mean;
            a->vs_value = b->mean;
            a->rel = (x->rms - b->rms) / fabs(b->rms);
        }
        if (a->first == s)
            a->ranks++;
        differs = 1;
    }
    a->steps += (size_t)differs;
}

static void agreement(rview *v, int64_t s)
{
    if (v->R->sharding != AN_SH_REPLICATED)
        return;
    for (size_t L = 0; L < v->nl; L++) {
        agree_one(v, s, (int)L, AMPDIAG_KIND_WEIGHT, &v->div[L]);
        agree_one(v, s, (int)L, AMPDIAG_KIND_WEIGHT_GRAD, &v->mis[2 * L]);
        if (v->div[L].first < 0 || v->div[L].first > s)
            agree_one(v, s, (int)L, AMPDIAG_KIND_UPDATE, &v->mis[2 * L + 1]);
    }
}

/* The spread of a value over the ranks at a step into a figure's widest (values NaN where a
 * rank has none; fewer than two finite values: not compared). */
void an_spread_add(an_spread *sp, double *sum, const an_ranks *R, const double *val, int64_t s)
{
    size_t lo = SIZE_MAX, hi = SIZE_MAX, k = 0;
    for (size_t r = 0; r < R->n; r++) {
        if (!isfinite(val[r]))
            continue;
        k++;
        if (lo == SIZE_MAX || val[r] < val[lo])
            lo = r;
        if (hi == SIZE_MAX || val[r] > val[hi])
            hi = r;
    }
    if (k < 2)
        return;
    double m = fmax(fabs(val[lo]), fabs(val[hi]));
    double rel = m > 0 ? (val[hi] - val[lo]) / m : 0;
    *sum += rel;
    sp->steps++;
    if (sp->steps == 1 || rel > sp->rel) {
        sp->rel = rel;
        sp->step = s;
        sp->min = val[lo];
        sp->max = val[hi];
        sp->argmin = R->rank[lo].rank;
        sp->argmax = R->rank[hi].rank;
    }
}

/* The activations' and their gradients' absmax and rms across ranks. */
static void spreads(rview *v, int64_t s)
{
    static const int kinds[2] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_ACTIVATION_GRAD};
    for (size_t L = 0; L < v->nl; L++)
        for (int k = 0; k < 2; k++)
            for (int f = 0; f < 2; f++) {
                for (size_t r = 0; r < v->n; r++) {
                    size_t i = at(v, r, (int)L, kinds[k]);
                    v->vals[r] = !v->have[i] ? NAN : f ? v->slot[i].rms : v->slot[i].absmax;
                }
                size_t j = (L * 2 + (size_t)k) * 2 + (size_t)f;
                an_spread_add(&v->sp[j], &v->sp_sum[j], v->R, v->vals, s);
            }
}

/* ------------------------------------------------------------------------------------------
 * The record the whole run held
 * ------------------------------------------------------------------------------------------ */

/* The records of ranks [from, to) merged into *out (*got: how many had one; *missing: the
 * first without one, SIZE_MAX when none is missing). 1 when merged: every one of them had a
 * record (all), or any did (!all); else 0. */
static int merge_ranks(rview *v, int L, int kind, size_t from, size_t to, int all, ampdiag_trace_tensor *out,
                       size_t *got, size_t *missing)
{
    ampdiag_tstats acc;
    ampdiag_tstats_init(&acc);
    uint64_t lost = 0, l16 = 0, lb16 = 0;
    *got = 0;
    *missing = SIZE_MAX;
    for (size_t r = from; r < to; r++) {
        size_t i = at(v, r, L, kind);
        if (!v->have[i]) {
            if (*missing == SIZE_MAX)
                *missing = r;
            continue;
        }
        ampdiag_tstats t;
        ampdiag_trace_tensor_to_tstats(&v->slot[i], &t);
        ampdiag_tstats_merge(&acc, &t);
        lost += v->slot[i].lost_updates;
        l16 += v->slot[i].lost_if_fp16;
        lb16 += v->slot[i].lost_if_bf16;
        *out = v->slot[i];
        ++*got;
    }
    if (!*got || (all && *missing != SIZE_MAX))
        return 0;
    if (*got == 1)
        return 1; /* the record itself, bit for bit */
    ampdiag_trace_tensor_from_tstats(out, &acc);
    out->lost_updates = lost;
    out->lost_if_fp16 = l16;
    out->lost_if_bf16 = lb16;
    return 1;
}

/* A layer's shard missing at a step (missing: its rank's index), or (missing SIZE_MAX) the
 * shards' weight records adding up to count values where the layer has other than that. */
static void shard_note(rview *v, int L, int kind, int64_t s, size_t missing, uint64_t count)
{
    shard_acc *a = &v->shard[L];
    if (missing != SIZE_MAX) {
        if (a->records && a->last == s)
            return;
        if (a->records++ == 0) {
            a->first = s;
            a->rank = v->R->rank[missing].rank;
            a->kind = kind;
        }
        a->last = s;
    } else if (kind == AMPDIAG_KIND_WEIGHT && a->count_step < 0 && v->run->layers[L].params > 0 &&
               count != v->run->layers[L].params) {
        a->count_step = s;
        a->count = count;
    }
}

/* Every (layer, kind) of step s merged and handed to the run's tensor pass: the weights,
 * gradients and updates of the first ranks (one copy of the parameters: all of its shards or
 * none), the activations and their gradients of every rank that has them; the weights' and
 * updates' sums of squares for the step's update ratio. 0 or -1 (out of memory). */
static int emit(rview *v, int64_t s, an_tensor_pass *tp)
{
    double wss = 0, uss = 0;
    size_t pairs = 0, S = v->R->shard_group;
    for (size_t L = 0; L < v->nl; L++) {
        int have_w = 0, have_u = 0;
        for (int kind = 0; kind < AMPDIAG_NKINDS; kind++) {
            ampdiag_trace_tensor m;
            size_t got, missing;
            int state = !an_rank_local_kind(kind);
            int ok = merge_ranks(v, (int)L, kind, 0, state ? S : v->n, state, &m, &got, &missing);
            if (state && S > 1 && got && missing != SIZE_MAX)
                shard_note(v, (int)L, kind, s, missing, 0);
            if (!ok)
                continue;
            if (state && S > 1)
                shard_note(v, (int)L, kind, s, SIZE_MAX, m.count);
            m.step = s;
            m.layer = (int32_t)L;
            m.kind = kind;
            if (an_tensor_pass_add(v->run, tp, &m))
                return -1;
            double ss = isfinite(m.rms) ? m.rms * m.rms * (double)(m.count - nonfinite(&m)) : NAN;
            if (kind == AMPDIAG_KIND_WEIGHT)
                wss += ss, have_w = 1;
            if (kind == AMPDIAG_KIND_UPDATE)
                uss += ss, have_u = 1;
        }
        pairs += (size_t)(have_w && have_u);
    }
    long i = an_step_index(v->run, s);
    if (i >= 0 && pairs && wss > 0)
        v->ratio[i] = sqrt(uss / wss);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * The pass
 * ------------------------------------------------------------------------------------------ */

/* Every step of every rank, in step order. 0 or an AMPDIAG_TRACE_ error (message in err). */
static int pass(rview *v, an_tensor_pass *tp, char *err, size_t errlen)
{
    size_t cells = v->n * v->nl * AMPDIAG_NKINDS;
    for (;;) {
        int64_t s = INT64_MAX;
        for (size_t r = 0; r < v->n; r++) {
            int rc = 0;
            const ampdiag_trace_tensor *x = next_rec(v, r, &rc);
            if (rc)
                return an_load_fail(err, errlen, rc, v->R->rank[r].run.path, "tensor records");
            if (x && x->step < s)
                s = x->step;
        }
        if (s == INT64_MAX)
            return 0;
        memset(v->have, 0, cells);
        for (size_t r = 0; r < v->n; r++) {
            int rc = gather(v, r, s);
            if (rc)
                return an_load_fail(err, errlen, rc, v->R->rank[r].run.path, "tensor records");
        }
        first_nonfinite(v, s);
        agreement(v, s);
        spreads(v, s);
        if (emit(v, s, tp))
            return an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, v->run->path, "tensor records");
        v->done = s;
    }
}

static void agree_init(agree_acc *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = (agree_acc){.first = -1, .rank = -1, .vs = -1};
}

/* Cursors on the ranks' traces, opened again (the first is the merged run's reference too). 0
 * or an AMPDIAG_TRACE_ error (message in err). */
static int open_cursors(rview *v, char *err, size_t errlen)
{
    if (!(v->cur = calloc(v->n, sizeof *v->cur)))
        return an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, v->R->rank[0].run.path, "ranks");
    for (size_t r = 0; r < v->n; r++) {
        an_rank *k = &v->R->rank[r];
        int rc = ampdiag_trace_open(k->run.path, AMPDIAG_TRACE_READ_QUIET, &v->cur[r].rd);
        if (rc)
            return an_load_fail(err, errlen, rc, k->run.path, "open");
        ampdiag_trace_counts cnt;
        ampdiag_trace_get_counts(v->cur[r].rd, &cnt);
        v->cur[r].total = cnt.tensors;
    }
    return 0;
}

/* The pass's room: the slots of one step, the accumulators. 0 or an AMPDIAG_TRACE_ error
 * (message in err). */
static int pass_setup(rview *v, char *err, size_t errlen)
{
    size_t n = v->n, nl = v->nl;
    size_t cells = n * nl * AMPDIAG_NKINDS;
    v->slot = malloc((cells + 1) * sizeof *v->slot);
    v->have = malloc(cells + 1);
    v->div = malloc((nl + 1) * sizeof *v->div);
    v->mis = malloc((2 * nl + 1) * sizeof *v->mis);
    v->sp = calloc(4 * nl + 1, sizeof *v->sp);
    v->sp_sum = calloc(4 * nl + 1, sizeof *v->sp_sum);
    v->shard = calloc(nl + 1, sizeof *v->shard);
    v->vals = malloc(n * sizeof *v->vals);
    v->ratio = malloc((v->run->nsteps + 1) * sizeof *v->ratio);
    if (!v->slot || !v->have || !v->div || !v->mis || !v->sp || !v->sp_sum || !v->shard ||
        !v->vals || !v->ratio)
        return an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, v->run->path, "ranks");
    agree_init(v->div, nl);
    agree_init(v->mis, 2 * nl);
    for (size_t i = 0; i < v->run->nsteps; i++)
        v->ratio[i] = NAN;
    for (size_t L = 0; L < nl; L++) {
        v->shard[L] = (shard_acc){.first = -1, .rank = -1, .count_step = -1};
        for (int j = 0; j < 4; j++)
            v->sp[4 * L + (size_t)j] = (an_spread){.fig = j & 1 ? AN_SP_RMS : AN_SP_ABSMAX, .layer = (int)L,
                                                   .kind = j & 2 ? AMPDIAG_KIND_ACTIVATION_GRAD
                                                                 : AMPDIAG_KIND_ACTIVATION,
                                                   .step = -1, .argmin = -1, .argmax = -1};
    }
    return 0;
}

/* The merged run's records (an_merge_src.records): the pass, then the sharded steps' gradient
 * norms and update ratios. */
static int view_records(void *ctx, an_run *run, an_tensor_pass *tp, char *err, size_t errlen)
{
    rview *v = ctx;
    v->run = run;
    int rc = pass_setup(v, err, errlen);
    if (!rc)
        rc = pass(v, tp, err, errlen);
    if (!rc && v->R->shard_group > 1)
        for (size_t i = 0; i < run->nsteps; i++)
            if (!isnan(run->steps[i].update_ratio))
                run->steps[i].update_ratio = v->ratio[i];
    return rc;
}

/* The merged run's what-if rows and histograms: the first ranks' weights, gradients and
 * updates (one copy of the parameters), every rank's activations and their gradients. */
static int view_extras(rview *v, an_run *run, char *err, size_t errlen)
{
    int keep = v->opt && v->opt->keep_points;
    unsigned local = 1u << AMPDIAG_KIND_ACTIVATION | 1u << AMPDIAG_KIND_ACTIVATION_GRAD;
    for (int part = 0; part < 2; part++)
        for (size_t r = 0; r < v->n; r++) {
            an_layer_map lm = {v->lmap[r], v->lmap_n[r], r < v->R->shard_group ? ~0u : local};
            int rc = part ? an_load_hists(v->cur[r].rd, run, keep, &lm) : an_load_whatif(v->cur[r].rd, run, &lm);
            if (rc)
                return an_load_fail(err, errlen, rc, v->R->rank[r].run.path, part ? "histograms" : "/whatif");
            if (!part && r + 1 == v->n)
                an_sort_columns(run);
        }
    if (an_layer_totals(run))
        return an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, run->path, "layers");
    return 0;
}

/* an_merge_src.finish: the what-if rows and histograms, then the rank findings. */
static int view_finish(void *ctx, an_run *run, char *err, size_t errlen)
{
    rview *v = ctx;
    run->ranks = v->R;
    int rc = view_extras(v, run, err, errlen);
    if (!rc && an_rank_findings(v, run))
        rc = an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, run->path, "rank findings");
    return rc;
}

static void view_free(rview *v)
{
    for (size_t r = 0; v->cur && r < v->n; r++) {
        ampdiag_trace_reader_close(v->cur[r].rd);
        free(v->cur[r].buf);
    }
    for (size_t r = 0; v->lmap && r < v->n; r++)
        free(v->lmap[r]);
    free(v->lmap);
    free(v->lmap_n);
    free(v->cur);
    free(v->slot);
    free(v->have);
    free(v->div);
    free(v->mis);
    free(v->sp);
    free(v->sp_sum);
    free(v->shard);
    free(v->vals);
    free(v->ratio);
}

/* Each rank's layers mapped to the first rank's by name (group.c checked they are the same). */
static int map_layers(rview *v)
{
    const an_run *ref = &v->R->rank[0].run;
    v->nl = ref->nlayers;
    v->lmap = calloc(v->n, sizeof *v->lmap);
    v->lmap_n = calloc(v->n, sizeof *v->lmap_n);
    if (!v->lmap || !v->lmap_n)
        return -1;
    for (size_t r = 0; r < v->n; r++) {
        const an_run *x = &v->R->rank[r].run;
        if (!(v->lmap[r] = malloc((x->nlayers ? x->nlayers : 1) * sizeof(int))))
            return -1;
        v->lmap_n[r] = x->nlayers;
        for (size_t l = 0; l < x->nlayers; l++) {
            v->lmap[r][l] = -1;
            for (size_t m = 0; m < ref->nlayers && v->lmap[r][l] < 0; m++)
                if (strcmp(x->layers[l].name, ref->layers[m].name) == 0)
                    v->lmap[r][l] = (int)m;
        }
    }
    return 0;
}

/* The first ranks that hold one copy of the parameters: 1 for replicated runs (and none), all
 * for sharded ones; for hybrid ones, the fewest first ranks whose first weight records add up
 * to every layer's parameters (else all). */
static size_t shard_group(const an_ranks *R)
{
    if (R->sharding == AN_SH_REPLICATED || R->sharding == AN_SH_NONE)
        return 1;
    if (R->sharding == AN_SH_SHARDED)
        return R->n;
    const an_run *ref = &R->rank[0].run;
    for (size_t k = 1; k < R->n; k++) {
        int whole = 1, any = 0;
        for (size_t l = 0; l < ref->nlayers && whole; l++) {
            uint64_t c = 0;
            for (size_t r = 0; r < k; r++)
                c += l < R->rank[r].run.nlayers ? R->rank[r].run.layers[l].cell[AMPDIAG_KIND_WEIGHT].first_count : 0;
            if (ref->layers[l].params && ref->layers[l].cell[AMPDIAG_KIND_WEIGHT].records) {
                any = 1;
                whole = c == ref->layers[l].params;
            }
        }
        if (whole && any)
            return k;
    }
    return R->n;
}

int an_rank_view(an_ranks *R, const an_options *opt, an_run *run, char *err, size_t errlen)
{
    rview v;
    memset(&v, 0, sizeof v);
    v.R = R;
    v.opt = opt;
    v.n = R->n;
    v.done = INT64_MIN;
    an_merge_src m;
    memset(&m, 0, sizeof m);
    int rc = 0;
    for (size_t r = 0; r < R->n; r++)
        R->rank[r].nf_step = R->rank[r].local_nf_step = -1;
    R->shard_group = shard_group(R);
    if (map_layers(&v) || an_rank_steps(R, &m)) {
        rc = an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, R->rank[0].run.path, "ranks");
        memset(run, 0, sizeof *run);
    } else {
        rc = open_cursors(&v, err, errlen);
        if (rc) {
            memset(run, 0, sizeof *run);
        } else {
            m.ref = v.cur[0].rd;
            m.records = view_records;
            m.finish = view_finish;
            m.ctx = &v;
            rc = an_load_merged(R->rank[0].run.path, opt, &m, run, err, errlen);
        }
    }
    run->ranks = R;
    free(m.steps);
    free(m.events);
    free(m.evals);
    view_free(&v);
    return rc;
}
