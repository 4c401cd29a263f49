/*
 * ranks_steps.c - the ranks' step records side by side (ranks.h): the merged run's steps (the
 * steps every rank recorded), events and evaluations; where each rank stopped; what must agree
 * at every step (the lr and the loss scale; the gradient norm of a replicated run) and the
 * skip decisions; the spread of the loss, the update ratio and the step time; then, after the
 * tensor records' pass (ranks.c), every rank finding in order.
 */
#include "analysis/ranks_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *an_spread_name(int fig)
{
    static const char *const names[AN_NSPREAD_FIGS] = {"loss", "update_ratio", "wall_ms", "absmax", "rms"};
    return fig >= 0 && fig < AN_NSPREAD_FIGS ? names[fig] : "?";
}

const char *an_spread_words(int fig)
{
    static const char *const words[AN_NSPREAD_FIGS] = {"the training loss", "the update/weight ratio",
                                                       "the step time (ms)", "absmax", "rms"};
    return fig >= 0 && fig < AN_NSPREAD_FIGS ? words[fig] : "?";
}

static an_finding *radd(an_ranks *R, an_fid id, int *oom)
{
    an_finding *f = an_finding_add(&R->list, id, 0);
    if (!f)
        *oom = 1;
    return f;
}

/* ------------------------------------------------------------------------------------------
 * Where each rank stopped
 * ------------------------------------------------------------------------------------------ */

static void rank_end(an_rank *k)
{
    const an_run *r = &k->run;
    k->stop_message = NULL;
    for (size_t i = 0; i < r->nevents; i++)
        if (r->events[i].code == AMPDIAG_EV_STOP) {
            k->end = r->events[i].step;
            k->stop_message = r->events[i].message;
            return;
        }
    if (r->status == AMPDIAG_STATUS_COMPLETE)
        k->end = INT64_MAX;
    else
        k->end = r->nsteps ? r->last_step + 1 : 0;
}

/* A rank that stopped before another: its stop event, or its last step where it has none. */
static void stopped_early(an_ranks *R, int *oom)
{
    int64_t last = INT64_MIN;
    for (size_t r = 0; r < R->n; r++) {
        rank_end(&R->rank[r]);
        if (R->rank[r].end > last)
            last = R->rank[r].end;
    }
    for (size_t r = 0; r < R->n; r++) {
        const an_rank *k = &R->rank[r];
        an_finding *f;
        if (k->end >= last || !(f = radd(R, F_RANK_STOPPED_EARLY, oom)))
            continue;
        f->v[0] = (double)k->rank;
        f->v[1] = k->run.nsteps ? (double)k->run.last_step : NAN;
        f->v[2] = (double)k->end;
        f->v[3] = last == INT64_MAX ? NAN : (double)last;
        f->v[4] = k->stop_message != NULL;
        f->v[5] = last == INT64_MAX;
        f->s.from = k->end;
        f->str[0] = k->run.status_text;
        f->str[1] = k->stop_message;
    }
}

/* ------------------------------------------------------------------------------------------
 * The merged steps
 * ------------------------------------------------------------------------------------------ */

/* What the per-step comparisons accumulate. */
typedef struct step_acc {
    agree_acc agree[3];        /* lr, loss scale, gradient norm */
    int64_t *skip_first;       /* [n] each rank's first step skipped alone; -1 */
    an_spread sp[3];           /* loss, update ratio, step time */
    double sp_sum[3];
    double *vals;              /* [n] */
} step_acc;

static const char *const agree_what[3] = {"lr", "loss_scale", "grad_norm"};

static double step_value(const an_step *s, int k)
{
    return k == 0 ? s->lr : k == 1 ? s->loss_scale : s->grad_norm;
}

/* The lr, the loss scale and (replicated) the gradient norm of each rank against the first's. */
static void agree_step(const an_ranks *R, const an_step *const *st, int64_t s, step_acc *a)
{
    for (int k = 0; k < 3; k++) {
        if (k == 2 && R->sharding != AN_SH_REPLICATED)
            continue;
        agree_acc *g = &a->agree[k];
        int differs = 0;
        double b = step_value(st[0], k);
        for (size_t r = 1; r < R->n; r++) {
            double x = step_value(st[r], k);
            if (x == b || (isnan(x) && isnan(b)))
                continue;
            if (g->first < 0) {
                *g = (agree_acc){s, R->rank[r].rank, R->rank[0].rank, x, b,
                                 fabs(x - b) / fmax(fabs(x), fabs(b)), 0, 0};
            }
            g->ranks += g->first == s;
            differs = 1;
        }
        g->steps += (size_t)differs;
    }
}

/* Ranks that skipped a step not every rank skipped; the spreads of the step's figures. */
static void skips_and_spreads(an_ranks *R, const an_step *const *st, int64_t s, step_acc *a)
{
    size_t skipped = 0;
    for (size_t r = 0; r < R->n; r++)
        skipped += st[r]->skipped != 0;
    for (size_t r = 0; skipped && skipped < R->n && r < R->n; r++)
        if (st[r]->skipped && R->rank[r].skipped_alone++ == 0)
            a->skip_first[r] = s;
    for (int k = 0; k < 3; k++) {
        for (size_t r = 0; r < R->n; r++)
            a->vals[r] = k == 0 ? st[r]->loss : k == 1 ? st[r]->update_ratio : st[r]->wall_ms;
        an_spread_add(&a->sp[k], &a->sp_sum[k], R, a->vals, s);
    }
}

/* The step the whole run took: the loss the mean over the ranks, skipped where any rank
 * skipped, the slowest rank's time, the gradient norm of the shards together (the first rank's
 * where it holds every parameter), the rest the first rank's. */
static an_step merged_step(const an_ranks *R, const an_step *const *st)
{
    an_step m = *st[0];
    double loss = 0, ss = 0;
    for (size_t r = 0; r < R->n; r++) {
        loss += st[r]->loss;
        m.skipped |= st[r]->skipped != 0;
        if (st[r]->wall_ms > m.wall_ms || isnan(m.wall_ms))
            m.wall_ms = st[r]->wall_ms;
        if (r < R->shard_group)
            ss += st[r]->grad_norm * st[r]->grad_norm;
        if (R->shard_group > 1 && isnan(st[r]->update_ratio))
            m.update_ratio = NAN; /* a step one rank did not take; else from the records */
    }
    m.loss = loss / (double)R->n;
    if (R->shard_group > 1)
        m.grad_norm = sqrt(ss);
    return m;
}

/* The steps every rank recorded, merged, and compared on the way. 0 or -1 (out of memory). */
static int merge_steps(an_ranks *R, an_merge_src *m, step_acc *a)
{
    const an_run *ref = &R->rank[0].run;
    const an_step **st = malloc(R->n * sizeof *st);
    m->steps = malloc((ref->nsteps ? ref->nsteps : 1) * sizeof *m->steps);
    if (!st || !m->steps) {
        free(st);
        return -1;
    }
    m->nsteps = 0;
    for (size_t i = 0; i < ref->nsteps; i++) {
        int64_t s = ref->steps[i].step;
        size_t r = 0;
        for (; r < R->n; r++) {
            long k = an_step_index(&R->rank[r].run, s);
            if (k < 0)
                break;
            st[r] = &R->rank[r].run.steps[k];
        }
        if (r < R->n)
            continue;
        agree_step(R, st, s, a);
        skips_and_spreads(R, st, s, a);
        m->steps[m->nsteps++] = merged_step(R, st);
    }
    R->merged_steps = m->nsteps;
    R->merged_from = m->nsteps ? m->steps[0].step : -1;
    R->merged_to = m->nsteps ? m->steps[m->nsteps - 1].step : -1;
    free(st);
    return 0;
}

/* s into dst (n bytes), marked "[rank N] " unless it is the first rank's (cut to fit). */
static void mark_rank(char *dst, size_t n, const an_ranks *R, size_t r, const char *s)
{
    int k = r ? snprintf(dst, n, "[rank %" PRId64 "] %s", R->rank[r].rank, s) : snprintf(dst, n, "%s", s);
    if (k < 0)
        dst[0] = 0;
}

/* The first skipped merged step's reason: that of the first rank that skipped it. */
static void skip_reason(const an_ranks *R, an_merge_src *m)
{
    m->first_skip_reason[0] = 0;
    for (size_t i = 0; i < m->nsteps; i++) {
        if (!m->steps[i].skipped)
            continue;
        for (size_t r = 0; r < R->n; r++)
            if (R->rank[r].run.first_skip_step == m->steps[i].step) {
                mark_rank(m->first_skip_reason, sizeof m->first_skip_reason, R, r, R->rank[r].run.first_skip_reason);
                return;
            }
        return;
    }
}

/* ------------------------------------------------------------------------------------------
 * Events and evaluations
 * ------------------------------------------------------------------------------------------ */

typedef struct ev_ref {
    const ampdiag_trace_event *e;
    size_t rank;   /* index in R->rank */
    size_t order;  /* in its trace */
} ev_ref;

static int cmp_ev(const void *pa, const void *pb)
{
    const ev_ref *a = pa, *b = pb;
    if (a->e->step != b->e->step)
        return a->e->step < b->e->step ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

static int layer_index(const an_run *r, const char *name)
{
    for (size_t l = 0; l < r->nlayers; l++)
        if (strcmp(r->layers[l].name, name) == 0)
            return (int)l;
    return -1;
}

static int same_event(const ampdiag_trace_event *a, const ampdiag_trace_event *b)
{
    return a->step == b->step && a->layer == b->layer && a->code == b->code && a->phase == b->phase;
}

/* Every rank's events in step order, one of each (step, layer, code, phase): the first rank's
 * where several have it; another rank's message marked with its rank. Layers mapped by name.
 * 0 or -1. */
static int merge_events(const an_ranks *R, an_merge_src *m)
{
    size_t total = 0, k = 0;
    for (size_t r = 0; r < R->n; r++)
        total += R->rank[r].run.nevents;
    ev_ref *e = malloc((total ? total : 1) * sizeof *e);
    m->events = malloc((total ? total : 1) * sizeof *m->events);
    if (!e || !m->events) {
        free(e);
        return -1;
    }
    for (size_t r = 0; r < R->n; r++)
        for (size_t i = 0; i < R->rank[r].run.nevents; i++)
            e[k++] = (ev_ref){&R->rank[r].run.events[i], r, i};
    qsort(e, total, sizeof *e, cmp_ev);
    const an_run *ref = &R->rank[0].run;
    m->nevents = 0;
    for (size_t i = 0; i < total; i++) {
        ampdiag_trace_event x = *e[i].e;
        const an_run *src = &R->rank[e[i].rank].run;
        x.layer = x.layer < 0 ? -1 : layer_index(ref, an_layer_name(src, x.layer));
        int dup = 0;
        for (size_t j = m->nevents; j-- > 0 && m->events[j].step == x.step && !dup;)
            dup = same_event(&m->events[j], &x);
        if (dup)
            continue;
        mark_rank(x.message, sizeof x.message, R, e[i].rank, e[i].e->message);
        m->events[m->nevents++] = x;
    }
    free(e);
    return 0;
}

/* The evaluations: their mean over the ranks where every rank has them at the same steps (each
 * evaluated its part of the validation set), else the first rank's. 0 or -1. */
static int merge_evals(const an_ranks *R, an_merge_src *m)
{
    const an_run *ref = &R->rank[0].run;
    int same = 1;
    for (size_t r = 1; r < R->n && same; r++) {
        same = R->rank[r].run.nevals == ref->nevals;
        for (size_t i = 0; same && i < ref->nevals; i++)
            same = R->rank[r].run.evals[i].step == ref->evals[i].step;
    }
    m->nevals = ref->nevals;
    if (!(m->evals = malloc((ref->nevals ? ref->nevals : 1) * sizeof *m->evals)))
        return -1;
    for (size_t i = 0; i < ref->nevals; i++) {
        ampdiag_trace_eval x = ref->evals[i];
        if (same && R->n > 1) {
            double l = 0, mt = 0, se = 0;
            for (size_t r = 0; r < R->n; r++) {
                const ampdiag_trace_eval *y = &R->rank[r].run.evals[i];
                l += y->loss;
                mt += y->metric;
                se += y->loss_se * y->loss_se;
            }
            x.loss = l / (double)R->n;
            x.metric = mt / (double)R->n;
            x.loss_se = sqrt(se) / (double)R->n;
        }
        m->evals[i] = x;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * The findings of the step records
 * ------------------------------------------------------------------------------------------ */

/* A value that must agree across ranks and does not (what: its name; layer and kind: the
 * record's, or -1 for a step figure). */
static void mismatch(an_ranks *R, const agree_acc *g, const char *what, int layer, int kind, int *oom)
{
    an_finding *f;
    if (g->first < 0 || !(f = radd(R, F_RANK_REDUCED_GRAD_MISMATCH, oom)))
        return;
    f->s.layer = layer;
    f->s.kind = kind;
    f->s.from = g->first;
    double v[9] = {(double)g->first, (double)g->rank, (double)g->vs, g->value, g->vs_value, g->rel,
                   (double)g->steps, layer >= 0, layer >= 0 || strcmp(what, "grad_norm") == 0};
    memcpy(f->v, v, sizeof v);
    f->str[0] = what;
}

static void step_findings(an_ranks *R, const step_acc *a, int *oom)
{
    for (int k = 0; k < 3; k++)
        mismatch(R, &a->agree[k], agree_what[k], -1, -1, oom);
    for (size_t r = 0; r < R->n; r++) {
        const an_rank *k = &R->rank[r];
        an_finding *f;
        if (!k->skipped_alone || !(f = radd(R, F_RANK_SKIP_DISAGREEMENT, oom)))
            continue;
        f->v[0] = (double)k->rank;
        f->v[1] = (double)k->skipped_alone;
        f->v[2] = (double)a->skip_first[r];
        f->v[3] = (double)R->n;
        f->s.from = a->skip_first[r];
    }
    for (size_t i = 0; i < R->nmissing; i++) {
        an_finding *f = radd(R, F_RANK_MISSING, oom);
        if (!f)
            continue;
        f->v[0] = (double)R->missing[i];
        f->v[1] = (double)R->world_size;
        f->v[2] = (double)R->n;
        f->v[3] = 0;
        f->v[7] = 1;
        f->v[8] = f->v[9] = 0;
    }
    for (int k = 0; k < 3; k++)
        if (a->sp[k].steps) {
            an_spread *sp = &R->spread[R->nspread++];
            *sp = a->sp[k];
            sp->typical = a->sp_sum[k] / (double)sp->steps;
        }
}

int an_rank_steps(an_ranks *R, an_merge_src *m)
{
    int oom = 0;
    size_t nl = R->rank[0].run.nlayers;
    step_acc a;
    memset(&a, 0, sizeof a);
    for (int k = 0; k < 3; k++) {
        a.agree[k] = (agree_acc){.first = -1, .rank = -1, .vs = -1};
        a.sp[k] = (an_spread){.fig = k, .layer = -1, .kind = -1, .step = -1, .argmin = -1, .argmax = -1};
    }
    a.skip_first = malloc(R->n * sizeof *a.skip_first);
    a.vals = malloc(R->n * sizeof *a.vals);
    R->spread = calloc(3 + 4 * nl, sizeof *R->spread);
    if (!a.skip_first || !a.vals || !R->spread)
        oom = 1;
    if (!oom) {
        stopped_early(R, &oom);
        oom |= merge_steps(R, m, &a) || merge_events(R, m) || merge_evals(R, m);
    }
    if (!oom) {
        skip_reason(R, m);
        step_findings(R, &a, &oom);
    }
    free(a.skip_first);
    free(a.vals);
    return oom ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------
 * The findings of the tensor records, and all of them in order
 * ------------------------------------------------------------------------------------------ */

static int phase_of(int kind)
{
    return kind == AMPDIAG_KIND_ACTIVATION ? 0 : kind == AMPDIAG_KIND_ACTIVATION_GRAD ||
                                                         kind == AMPDIAG_KIND_WEIGHT_GRAD ? 1 : 2;
}

static const char *const phase_names[3] = {"forward", "backward", "optimizer"};

/* Rank a's first non-finite record comes before rank b's: an earlier step, the forward pass
 * before the backward pass, a rank's own tensors before reduced ones, execution order, rank. */
static int nf_before(const an_rank *a, const an_rank *b, size_t nl)
{
    if (a->nf_step != b->nf_step)
        return a->nf_step < b->nf_step;
    if (phase_of(a->nf_kind) != phase_of(b->nf_kind))
        return phase_of(a->nf_kind) < phase_of(b->nf_kind);
    if (an_rank_local_kind(a->nf_kind) != an_rank_local_kind(b->nf_kind))
        return an_rank_local_kind(a->nf_kind);
    int pa = an_rank_exec_pos(nl, a->nf_layer, a->nf_kind), pb = an_rank_exec_pos(nl, b->nf_layer, b->nf_kind);
    return pa != pb ? pa < pb : a->rank < b->rank;
}

/* The first rank, step, layer and tensor with NaN/inf; where the first is a tensor the ranks
 * share (a reduced gradient, the replicas' weights), the origin is not in the records: the
 * ranks whose own tensors held NaN/inf are listed. */
static void first_nonfinite_finding(an_ranks *R, size_t nl, int *oom)
{
    const an_rank *best = NULL;
    size_t affected = 0, nlocal = 0;
    R->local_ranks[0] = 0;
    for (size_t r = 0; r < R->n; r++) {
        const an_rank *k = &R->rank[r];
        if (k->local_nf_step >= 0) {
            size_t len = strlen(R->local_ranks);
            snprintf(R->local_ranks + len, sizeof R->local_ranks - len, "%s%" PRId64, nlocal ? ", " : "", k->rank);
            nlocal++;
        }
        if (k->nf_step < 0)
            continue;
        affected++;
        if (!best || nf_before(k, best, nl))
            best = k;
    }
    an_finding *f;
    if (!best || !(f = radd(R, F_RANK_FIRST_NONFINITE, oom)))
        return;
    f->s.layer = best->nf_layer;
    f->s.kind = best->nf_kind;
    f->s.from = best->nf_step;
    int identified = an_rank_local_kind(best->nf_kind) || R->sharding == AN_SH_NONE;
    double v[6] = {(double)best->rank, (double)best->nf_step, (double)affected, (double)R->n, identified,
                   (double)nlocal};
    memcpy(f->v, v, sizeof v);
    f->str[0] = phase_names[phase_of(best->nf_kind)];
    f->str[1] = R->local_ranks;
}

static void divergence_findings(an_ranks *R, const rview *v, int *oom)
{
    for (size_t L = 0; L < v->nl; L++) {
        const agree_acc *g = &v->div[L];
        an_finding *f;
        if (g->first < 0 || !(f = radd(R, F_RANK_REPLICA_DIVERGENCE, oom)))
            continue;
        f->s.layer = (int)L;
        f->s.kind = AMPDIAG_KIND_WEIGHT;
        f->s.from = g->first;
        double x[7] = {(double)g->first, (double)g->rank, (double)g->vs, g->value - g->vs_value, g->rel,
                       (double)g->steps, (double)g->ranks};
        memcpy(f->v, x, sizeof x);
    }
    for (size_t L = 0; L < v->nl; L++) {
        mismatch(R, &v->mis[2 * L], "weight_grad", (int)L, AMPDIAG_KIND_WEIGHT_GRAD, oom);
        mismatch(R, &v->mis[2 * L + 1], "update", (int)L, AMPDIAG_KIND_UPDATE, oom);
    }
}

/* Shards missing at some steps, or adding up to other than the layer. */
static void shard_findings(an_ranks *R, const rview *v, int *oom)
{
    for (size_t L = 0; L < v->nl; L++) {
        const shard_acc *a = &v->shard[L];
        for (int k = 0; k < 2; k++) {
            an_finding *f;
            if ((k ? a->count_step < 0 : !a->records) || !(f = radd(R, F_RANK_MISSING, oom)))
                continue;
            f->s.layer = (int)L;
            f->s.kind = k ? AMPDIAG_KIND_WEIGHT : a->kind;
            f->s.from = k ? a->count_step : a->first;
            f->v[0] = k ? NAN : (double)a->rank;
            f->v[1] = (double)R->world_size;
            f->v[2] = (double)R->n;
            f->v[3] = k ? 0 : (double)a->records;
            f->v[4] = (double)f->s.from;
            f->v[5] = k ? (double)a->count : NAN;
            f->v[6] = k ? (double)v->run->layers[L].params : NAN;
            f->v[7] = 0;
            f->v[8] = !k;
            f->v[9] = k;
        }
    }
}

static int cmp_spread(const void *pa, const void *pb)
{
    const an_spread *a = pa, *b = pb;
    if (a->rel != b->rel)
        return a->rel > b->rel ? -1 : 1;
    return a->fig - b->fig;
}

/* Every figure's widest spread (widest first); findings for the step figures that spread and
 * the RANK_SPREAD_TOP widest of the activations. */
static void spread_findings(an_ranks *R, const rview *v, int *oom)
{
    for (size_t j = 0; j < 4 * v->nl; j++)
        if (v->sp[j].steps) {
            an_spread *sp = &R->spread[R->nspread++];
            *sp = v->sp[j];
            sp->typical = v->sp_sum[j] / (double)sp->steps;
        }
    qsort(R->spread, R->nspread, sizeof *R->spread, cmp_spread);
    size_t top = (size_t)an_k(K_RANK_SPREAD_TOP), named = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < R->nspread; i++) {
            const an_spread *sp = &R->spread[i];
            an_finding *f;
            if ((sp->layer >= 0) != pass || !(sp->rel > 0) || (pass && named++ >= top) ||
                !(f = radd(R, F_RANK_SPREAD, oom)))
                continue;
            f->s.layer = sp->layer;
            f->s.kind = sp->kind;
            f->s.from = sp->step;
            double x[9] = {(double)sp->step, sp->min, sp->max, (double)sp->argmin, (double)sp->argmax, sp->rel,
                           sp->typical, (double)sp->steps, sp->layer >= 0};
            memcpy(f->v, x, sizeof x);
            f->str[0] = an_spread_name(sp->fig);
            f->str[1] = an_spread_words(sp->fig);
        }
}

/* The findings in the order of their ids (each id's in the order found). */
static void sort_findings(an_finding_list *l)
{
    for (size_t i = 1; i < l->n; i++)
        for (size_t j = i; j > 0 && l->v[j].id < l->v[j - 1].id; j--) {
            an_finding t = l->v[j];
            l->v[j] = l->v[j - 1];
            l->v[j - 1] = t;
        }
}

/* The merged run's status: complete where every rank's is, else that of the rank that stopped
 * first. */
static void merged_status(const an_ranks *R, an_run *run)
{
    const an_rank *first = NULL;
    for (size_t r = 0; r < R->n; r++)
        if (R->rank[r].run.status != AMPDIAG_STATUS_COMPLETE && (!first || R->rank[r].end < first->end))
            first = &R->rank[r];
    if (!first)
        return;
    run->status = first->run.status;
    run->cut_off = first->run.cut_off;
    snprintf(run->status_text, sizeof run->status_text, "%s", first->run.status_text);
}

/* The merged run's first skip reason: the origin rank's, where the first NaN/inf names one and
 * it skipped that step (its reason names the tensor the NaN came from). */
static void origin_skip_reason(const an_ranks *R, an_run *run)
{
    const an_finding *f = an_finding_find(&R->list, F_RANK_FIRST_NONFINITE, -1);
    if (!f || !f->v[4] || !run->skipped)
        return;
    for (size_t r = 0; r < R->n; r++)
        if ((double)R->rank[r].rank == f->v[0] && R->rank[r].run.first_skip_step == run->first_skip_step)
            mark_rank(run->first_skip_reason, sizeof run->first_skip_reason, R, r, R->rank[r].run.first_skip_reason);
}

int an_rank_findings(rview *v, an_run *run)
{
    an_ranks *R = v->R;
    int oom = 0;
    first_nonfinite_finding(R, v->nl, &oom);
    divergence_findings(R, v, &oom);
    shard_findings(R, v, &oom);
    spread_findings(R, v, &oom);
    sort_findings(&R->list);
    merged_status(R, run);
    origin_skip_reason(R, run);
    return oom ? -1 : 0;
}
