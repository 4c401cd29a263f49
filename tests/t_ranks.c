/*
 * t_ranks.c - a distributed run's rank traces read together (src/analysis/ranks.h), on
 * synthetic per-rank traces written through the public writer as a trainer under
 * torch.distributed would write them (no PyTorch needed):
 *
 *   shard   FSDP-like, 2 ranks: each rank's weight, gradient and update records are the
 *           statistics of its half of the layer; the merged run holds exactly the statistics of
 *           the whole tensors (checked against a trace written from them), its gradient norm is
 *           the shards' together, its update ratio the whole's
 *   repl    DDP-like, 3 ranks: rank 2's fc2 replica moves at step 4, rank 1's batch holds a NaN
 *           at step 6 (its fc1 activation; every rank's reduced gradients), rank 2 alone skips
 *           step 8, rank 1's lr differs at step 9
 *   reduced the NaN only in the reduced gradients (no activation records): the origin is not
 *           identifiable
 *   part    3 ranks, rank 1's trace missing, rank 2 stops at step 4
 *   hole    sharded, rank 1's fc2 weight shard missing at step 2; rank 0's step-5 records written
 *           after its step-6 records (out of step order: left out, counted)
 *   bad     groups that are not one run: another lr, a rank twice, a trace of one process
 *
 * usage: t_ranks                 the tests (TAP)
 *        t_ranks --write DIR     only write the traces into DIR (tests/t_ranks_cli.sh)
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "analysis/findings.h"
#include "analysis/load.h"
#include "analysis/ranks.h"
#include "messages/messages.h"
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NL 2
static const char *const lname[NL] = {"fc1", "fc2"};
static const size_t lparams[NL] = {24, 10};
static const size_t lact[NL] = {16, 8}; /* activation values of one rank's batch */

/* What one group of rank traces holds. */
typedef struct spec {
    const char *stem;
    int world;
    unsigned write;          /* bit r: write rank r's trace */
    const char *sharding;
    int nsteps;
    int poison_rank, poison_step;   /* a NaN in that rank's batch (-1: none) */
    int reduced_only;               /* no activation records: the NaN only in the reduced gradients */
    int perturb_rank, perturb_step; /* that rank's fc2 replica moves from that step */
    int skip_rank, skip_step;       /* that rank alone skips that step */
    int lr_rank, lr_step;           /* that rank's lr differs at that step */
    int stop_rank, stop_step;       /* that rank stops after that step */
    int hole_rank, hole_step;       /* that rank's fc2 weight shard is not written at that step */
    int late_rank, late_step;       /* that rank writes that step's records after the next step's */
    double lr_attr1;                /* rank 1's lr attribute (0: the others') */
    int rank_of[4];                 /* the rank attribute of trace r (-1: r; -2: none) */
} spec;

static void spec_init(spec *s, const char *stem, int world, const char *sharding)
{
    memset(s, 0, sizeof *s);
    s->stem = stem;
    s->world = world;
    s->write = (1u << world) - 1;
    s->sharding = sharding;
    s->nsteps = 10;
    s->poison_rank = s->perturb_rank = s->skip_rank = s->lr_rank = s->stop_rank = s->hole_rank = -1;
    s->late_rank = -1;
    for (int r = 0; r < 4; r++)
        s->rank_of[r] = -1;
}

/* Deterministic values: seeded by (step, layer, kind, salt). */
static void fill(float *v, size_t n, int64_t step, int layer, int kind, uint32_t salt)
{
    uint64_t x = (uint64_t)step * 1000003u + (uint64_t)layer * 7919u + (uint64_t)kind * 104729u + salt * 15485863u + 1;
    double scale = kind == AMPDIAG_KIND_WEIGHT ? 0.5 : kind == AMPDIAG_KIND_UPDATE ? 1e-3 : 2.0;
    for (size_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(x >> 11) / 9007199254740992.0;
        v[i] = (float)((u - 0.5) * scale);
    }
}

/* The shard [*lo, *hi) of n values rank r of w holds. */
static void shard(size_t n, int r, int w, size_t *lo, size_t *hi)
{
    size_t per = (n + (size_t)w - 1) / (size_t)w;
    *lo = per * (size_t)r < n ? per * (size_t)r : n;
    *hi = *lo + per < n ? *lo + per : n;
}

static int sharded(const spec *s) { return strcmp(s->sharding, "sharded") == 0; }

/* A state tensor (weight, weight gradient, update) of a layer at a step, as rank r holds it
 * (whole: r < 0): its values into v (n of them), their statistics into st; sumsq for the norm. */
static size_t state_values(const spec *s, int r, int64_t t, int l, int kind, float *v)
{
    size_t n = lparams[l];
    fill(v, n, t, l, kind, 7);
    if (kind == AMPDIAG_KIND_WEIGHT && r >= 0 && r == s->perturb_rank && t >= s->perturb_step && l == 1)
        for (size_t i = 0; i < n; i++)
            v[i] += 1e-3f;
    if (kind == AMPDIAG_KIND_WEIGHT_GRAD && s->poison_rank >= 0 && t == s->poison_step)
        v[0] = NAN; /* reduced: every rank's */
    if (r < 0 || !sharded(s))
        return n;
    size_t lo, hi;
    shard(n, r, s->world, &lo, &hi);
    memmove(v, v + lo, (hi - lo) * sizeof *v);
    return hi - lo;
}

static int poisoned(const spec *s, int r, int64_t t) { return r >= 0 && r == s->poison_rank && t == s->poison_step; }

/* Rank r's activations (and their gradients) of a layer at a step; whole (r < 0): every rank's. */
static size_t act_values(const spec *s, int r, int64_t t, int l, int kind, float *v)
{
    size_t k = 0;
    for (int q = r < 0 ? 0 : r; q < (r < 0 ? s->world : r + 1); q++) {
        fill(v + k, lact[l], t, l, kind, 100 + (uint32_t)q);
        if (poisoned(s, q, t) && (kind == AMPDIAG_KIND_ACTIVATION || kind == AMPDIAG_KIND_ACTIVATION_GRAD))
            v[k] = NAN;
        k += lact[l];
    }
    return k;
}

static int write_attrs(ampdiag_trace_writer *w, const spec *s, int r)
{
    double lr = r == 1 && s->lr_attr1 > 0 ? s->lr_attr1 : 1e-3;
    int rc;
    if ((rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PRECISION, "fp32")) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_MODEL, "dist-mlp")) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_DATA, "synthetic")) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_OPTIMIZER, "adamw")) < 0 ||
        (rc = ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_LR, lr)) < 0)
        return rc;
    if (r < 0 || s->rank_of[r] == -2)
        return 0;
    ampdiag_trace_rank d = {s->rank_of[r] >= 0 ? s->rank_of[r] : r, s->world, "gloo", "fp32", s->sharding};
    return ampdiag_trace_set_rank(w, &d);
}

/* One step's tensor records of rank r (whole: r < 0; w NULL: none written); the sums of squares
 * of its gradients, weights and updates. */
static int write_tensors(ampdiag_trace_writer *w, const spec *s, int r, int64_t t, double *gss, double *wss,
                         double *uss)
{
    float v[64];
    ampdiag_tstats st;
    int rc = 0;
    for (int l = 0; l < NL && rc >= 0; l++)
        for (int kind = 0; kind < AMPDIAG_NKINDS && rc >= 0; kind++) {
            int local = kind == AMPDIAG_KIND_ACTIVATION || kind == AMPDIAG_KIND_ACTIVATION_GRAD;
            if ((local && s->reduced_only) || (kind == AMPDIAG_KIND_WEIGHT && l == 1 && r >= 0 && r == s->hole_rank &&
                                                t == s->hole_step))
                continue;
            size_t n = local ? act_values(s, r, t, l, kind, v) : state_values(s, r, t, l, kind, v);
            ampdiag_tstats_compute(v, n, &st, NULL);
            double ss = st.sumsq;
            if (kind == AMPDIAG_KIND_WEIGHT_GRAD)
                *gss += ampdiag_tstats_finite(&st) < st.count ? INFINITY : ss;
            if (kind == AMPDIAG_KIND_WEIGHT)
                *wss += ss;
            if (kind == AMPDIAG_KIND_UPDATE)
                *uss += ss;
            /* lost-update counts that add up over the shards as over the whole */
            if (!w)
                continue;
            rc = kind == AMPDIAG_KIND_UPDATE ? ampdiag_trace_append_update(w, t, l, &st, st.count, 0, st.count)
                                             : ampdiag_trace_append_tensor(w, t, l, kind, &st, 0);
        }
    return rc;
}

/* The step record of rank r (whole: r < 0) and its events. */
static int write_step(ampdiag_trace_writer *w, const spec *s, int r, int64_t t, double gss, double wss, double uss)
{
    ampdiag_trace_step rec;
    memset(&rec, 0, sizeof rec);
    int poison = s->poison_rank >= 0 && t == s->poison_step;
    int skip = poison || (r >= 0 && r == s->skip_rank && t == s->skip_step);
    rec.step = t;
    rec.loss = poisoned(s, r, t) || (r < 0 && poison) ? NAN : 1.0 + 0.1 * (double)(r < 0 ? 0 : r) + 0.01 * (double)t;
    rec.loss_scale = 65536;
    rec.grad_norm = sqrt(gss);
    rec.clip_coef = 1;
    rec.skipped = skip;
    if (skip)
        snprintf(rec.skip_reason, sizeof rec.skip_reason, "%s", poisoned(s, r, t) ? "nan in fc1 activation" :
                 "nan in fc2 weight_grad");
    rec.lr = r >= 0 && r == s->lr_rank && t == s->lr_step ? 2e-3 : 1e-3;
    rec.update_ratio = skip ? NAN : sqrt(uss / wss);
    rec.wall_ms = 10 + (r < 0 ? 0 : r);
    int rc = 0;
    if (poisoned(s, r, t))
        rc = ampdiag_trace_append_event(w, t, 0, AMPDIAG_EV_NAN_FORWARD, NAN, "NaN in fc1 activation");
    if (rc >= 0 && skip)
        rc = ampdiag_trace_append_event(w, t, -1, AMPDIAG_EV_SKIPPED, 65536, rec.skip_reason);
    if (rc >= 0)
        rc = ampdiag_trace_append_step(w, &rec);
    if (rc >= 0 && r >= 0 && r == s->stop_rank && t == s->stop_step)
        rc = ampdiag_trace_append_event(w, t, -1, AMPDIAG_EV_STOP, NAN, "RuntimeError: rank stops (test)");
    return rc;
}

/* Rank r's trace (r < 0: the whole run's, a trace of one process) at path. */
static int write_trace(const char *path, const spec *s, int r)
{
    ampdiag_trace_options opt;
    ampdiag_trace_options_init(&opt);
    opt.overwrite = 1;
    ampdiag_trace_writer *w;
    int rc = ampdiag_trace_create(path, &opt, &w);
    if (rc < 0)
        return rc;
    if ((rc = write_attrs(w, s, r)) < 0)
        goto fail;
    for (int l = 0; l < NL; l++)
        if ((rc = ampdiag_trace_add_layer(w, lname[l], "linear", "[?]", lparams[l])) < 0)
            goto fail;
    int last = r >= 0 && r == s->stop_rank ? s->stop_step : s->nsteps - 1;
    double late[3] = {0, 0, 0};
    for (int64_t t = 0; t <= last; t++) {
        double gss = 0, wss = 0, uss = 0;
        int defer = r >= 0 && r == s->late_rank && t == s->late_step, after = r >= 0 && r == s->late_rank &&
                                                                              t == s->late_step + 1;
        if (!defer && (rc = write_tensors(w, s, r, t, &gss, &wss, &uss)) < 0)
            goto fail;
        if (after && (rc = write_tensors(w, s, r, t - 1, &late[0], &late[1], &late[2])) < 0)
            goto fail;
        if (defer) /* this step's sums, for its step record; its tensor records come after the next's */
            write_tensors(NULL, s, r, t, &gss, &wss, &uss);
        if ((rc = write_step(w, s, r, t, gss, wss, uss)) < 0)
            goto fail;
    }
    return ampdiag_trace_close(w, r >= 0 && r == s->stop_rank ? AMPDIAG_STATUS_INTERRUPTED : AMPDIAG_STATUS_COMPLETE);
fail:
    ampdiag_trace_close(w, AMPDIAG_STATUS_UNKNOWN);
    return rc;
}

static int write_group(const char *dir, const spec *s)
{
    char p[1024];
    for (int r = 0; r < s->world; r++) {
        if (!(s->write & (1u << r)))
            continue;
        snprintf(p, sizeof p, "%s/%s.rank%d.h5", dir, s->stem, r);
        if (write_trace(p, s, r) < 0) {
            fprintf(stderr, "t_ranks: %s\n", ampdiag_trace_errmsg());
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * The groups
 * ------------------------------------------------------------------------------------------ */

static void specs(spec *s)
{
    spec_init(&s[0], "shard", 2, "sharded");
    spec_init(&s[1], "repl", 3, "replicated");
    s[1].perturb_rank = 2, s[1].perturb_step = 4;
    s[1].poison_rank = 1, s[1].poison_step = 6;
    s[1].skip_rank = 2, s[1].skip_step = 8;
    s[1].lr_rank = 1, s[1].lr_step = 9;
    spec_init(&s[2], "reduced", 2, "replicated");
    s[2].poison_rank = 1, s[2].poison_step = 3, s[2].reduced_only = 1;
    spec_init(&s[3], "part", 3, "replicated");
    s[3].write = 1u | 4u;
    s[3].stop_rank = 2, s[3].stop_step = 4;
    spec_init(&s[4], "hole", 2, "sharded");
    s[4].hole_rank = 1, s[4].hole_step = 2;
    s[4].late_rank = 0, s[4].late_step = 5;
    spec_init(&s[5], "badlr", 2, "replicated");
    s[5].lr_attr1 = 2e-3;
    spec_init(&s[6], "twice", 2, "replicated");
    s[6].rank_of[1] = 0;
    spec_init(&s[7], "plain", 2, "replicated");
    s[7].rank_of[1] = -2;
}
#define NSPECS 8

static int write_all(const char *dir)
{
    spec s[NSPECS];
    specs(s);
    for (int i = 0; i < NSPECS; i++)
        if (write_group(dir, &s[i]))
            return -1;
    char p[1024];
    snprintf(p, sizeof p, "%s/shard-whole.h5", dir); /* the sharded run as one process holds it */
    if (write_trace(p, &s[0], -1) < 0) {
        fprintf(stderr, "t_ranks: %s\n", ampdiag_trace_errmsg());
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Checks
 * ------------------------------------------------------------------------------------------ */

static char dir[512];

static int load(const char *name, unsigned flags, an_inputs *in, char *err, size_t errlen)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    const char *args[1] = {p};
    an_options ao = {.warmup = -1, .quiet = 1};
    return an_load_args(args, 1, &ao, flags, in, err, errlen);
}

static const an_finding *finding(const an_run *r, an_fid id) { return an_run_finding(r, id); }

static double fig(const an_finding *f, const char *name)
{
    int i = f ? an_finding_fig(f->id, name) : -1;
    return i >= 0 ? f->v[i] : NAN;
}

static int rel_close(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(fabs(a), fabs(b)); }

/* Every cell of the merged run holds what the whole run's trace holds. */
static int same_cells(const an_run *a, const an_run *b)
{
    for (size_t l = 0; l < NL; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            const an_cell *x = &a->layers[l].cell[k], *y = &b->layers[l].cell[k];
            if (x->records != y->records || x->count != y->count || x->zero != y->zero || x->nan != y->nan ||
                x->absmax != y->absmax || x->absmin_nz != y->absmin_nz || x->lost != y->lost ||
                x->lost_if[1] != y->lost_if[1] || x->first_nonfinite_step != y->first_nonfinite_step ||
                memcmp(x->wi[AN_WI_FP16], y->wi[AN_WI_FP16], sizeof x->wi[0]) ||
                memcmp(x->wi[AN_WI_BF16], y->wi[AN_WI_BF16], sizeof x->wi[0])) {
                diag("cell %s %s differs: records %llu/%llu count %llu/%llu absmax %g/%g", lname[l],
                     ampdiag_kind_name(k), (unsigned long long)x->records, (unsigned long long)y->records,
                     (unsigned long long)x->count, (unsigned long long)y->count, x->absmax, y->absmax);
                return 0;
            }
        }
    return 1;
}

static void check_shard(void)
{
    an_inputs in;
    char err[1024], p[1024];
    int rc = load("shard.rank*.h5", 0, &in, err, sizeof err);
    an_run whole;
    snprintf(p, sizeof p, "%s/shard-whole.h5", dir);
    an_options ao = {.warmup = -1, .quiet = 1};
    int rw = an_load(p, &ao, &whole, err, sizeof err);
    const an_run *m = in.n ? &in.runs[0] : NULL;
    ok(!rc && !rw && in.n == 1 && m->ranks && m->ranks->n == 2 && m->ranks->shard_group == 2 &&
       m->ranks->sharding == AN_SH_SHARDED, "sharded: the glob is one run of 2 ranks, both shards of a copy (%s)",
       rc || rw ? err : "");
    if (!m || !m->ranks || rw) {
        an_inputs_free(&in);
        an_free(&whole);
        return;
    }
    ok(same_cells(m, &whole), "sharded: every (layer, kind) of the merged run holds the whole tensors' counts, "
       "extremes, what-if and lost-update counts");
    int norms = m->nsteps == whole.nsteps, ratios = norms, losses = norms;
    for (size_t i = 0; norms && i < m->nsteps; i++) {
        norms &= rel_close(m->steps[i].grad_norm, whole.steps[i].grad_norm, 1e-12);
        ratios &= rel_close(m->steps[i].update_ratio, whole.steps[i].update_ratio, 1e-9);
        losses &= rel_close(m->steps[i].loss, 1.05 + 0.01 * (double)i, 1e-12);
    }
    ok(norms, "sharded: the merged gradient norm is the shards' together: the whole gradient's (rel 1e-12)");
    ok(ratios, "sharded: the merged update ratio is the whole run's (rel 1e-9)");
    ok(losses, "sharded: the merged loss is the mean of the ranks' losses");
    ok(!finding(m, F_RANK_MISSING) && !finding(m, F_RANK_REPLICA_DIVERGENCE) &&
       !finding(m, F_RANK_REDUCED_GRAD_MISMATCH) && !finding(m, F_RANK_FIRST_NONFINITE),
       "sharded: no shard missing, nothing that must agree differs, nothing non-finite");
    const an_finding *f = NULL;
    while ((f = an_finding_next(an_run_findings(m), F_RANK_SPREAD, -1, f)) && strcmp(f->str[0], "wall_ms"))
        ;
    ok(f && fig(f, "argmax") == 1 && fig(f, "max") == 11 && fig(f, "min") == 10 && fabs(fig(f, "rel") - 1.0 / 11) < 1e-12,
       "sharded: the spread of the step time names the slower rank: 11 ms on rank 1, 10 on rank 0");
    an_inputs_free(&in);
    an_free(&whole);
}

static void check_repl(void)
{
    an_inputs in;
    char err[1024];
    int rc = load("repl.rank0.h5", 0, &in, err, sizeof err);
    const an_run *m = !rc && in.n ? &in.runs[0] : NULL;
    ok(m && m->ranks && m->ranks->n == 3 && in.nnotes == 1 && strstr(in.notes[0], "rank 0 of 3"),
       "replicated: rank 0's trace is read with its 2 siblings, and a note says so (%s)",
       rc ? err : in.nnotes ? in.notes[0] : "no note");
    if (!m || !m->ranks) {
        an_inputs_free(&in);
        return;
    }
    const an_finding *f = finding(m, F_RANK_FIRST_NONFINITE);
    ok(f && fig(f, "rank") == 1 && fig(f, "step") == 6 && f->s.layer == 0 && f->s.kind == AMPDIAG_KIND_ACTIVATION &&
       fig(f, "identified") == 1 && fig(f, "ranks_affected") == 3 && strcmp(f->str[0], "forward") == 0,
       "replicated: the first NaN/inf is rank 1's fc1 activation at step 6 (forward), 3 ranks affected");
    const an_rank *r0 = &m->ranks->rank[0];
    ok(r0->nf_step == 6 && r0->nf_layer == 1 && r0->nf_kind == AMPDIAG_KIND_WEIGHT_GRAD && r0->local_nf_step < 0,
       "replicated: rank 0's own first is the reduced fc2 weight gradient at step 6; its own tensors stay finite");
    ok(an_run_findings(m)->n && an_run_findings(m)->v[0].id == F_RANK_FIRST_NONFINITE,
       "replicated: the rank findings come first, the first NaN/inf first of them");
    f = finding(m, F_RANK_REPLICA_DIVERGENCE);
    ok(f && f->s.layer == 1 && fig(f, "first_step") == 4 && fig(f, "rank") == 2 && fig(f, "vs_rank") == 0 &&
       fig(f, "steps") == 6 && fabs(fig(f, "delta_mean") - 1e-3) < 1e-6 &&
       !an_finding_next(an_run_findings(m), F_RANK_REPLICA_DIVERGENCE, -1, f),
       "replicated: rank 2's fc2 replica differs from step 4 on (6 steps, mean +1e-3), and no other layer's");
    f = finding(m, F_RANK_REDUCED_GRAD_MISMATCH);
    ok(f && strcmp(f->str[0], "lr") == 0 && fig(f, "first_step") == 9 && fig(f, "rank") == 1 &&
       fig(f, "value") == 2e-3 && fig(f, "vs_value") == 1e-3 &&
       !an_finding_next(an_run_findings(m), F_RANK_REDUCED_GRAD_MISMATCH, -1, f),
       "replicated: rank 1's lr differs at step 9; the reduced gradients and updates agree");
    f = finding(m, F_RANK_SKIP_DISAGREEMENT);
    ok(f && fig(f, "rank") == 2 && fig(f, "steps") == 1 && fig(f, "first_step") == 8 &&
       !an_finding_next(an_run_findings(m), F_RANK_SKIP_DISAGREEMENT, -1, f),
       "replicated: rank 2 alone skipped step 8 (step 6, skipped by all, is no disagreement)");
    const an_finding *fw = finding(m, F_FWD_NONFINITE);
    ok(m->skipped == 2 && m->loss_nonfinite == 1 && fw && fw->s.layer == 0 && fig(fw, "step") == 6,
       "replicated: the merged run skips steps 6 and 8, its loss is NaN at step 6 and its fc1 activations "
       "(the global batch) hold the NaN");
    int marked = 0;
    for (size_t i = 0; i < m->nevents; i++)
        marked |= m->events[i].code == AMPDIAG_EV_NAN_FORWARD && strncmp(m->events[i].message, "[rank 1] ", 9) == 0;
    ok(marked, "replicated: rank 1's nan_forward event is in the merged run, marked [rank 1]");
    an_inputs_free(&in);
}

static void check_reduced(void)
{
    an_inputs in;
    char err[1024];
    int rc = load("reduced.rank*.h5", 0, &in, err, sizeof err);
    const an_run *m = !rc && in.n ? &in.runs[0] : NULL;
    const an_finding *f = m ? finding(m, F_RANK_FIRST_NONFINITE) : NULL;
    char words[2400] = "";
    if (f) {
        msg_ctx c = msg_ctx_run(m);
        msg_finding(words, sizeof words, &c, f);
    }
    ok(f && fig(f, "identified") == 0 && fig(f, "step") == 3 && f->s.kind == AMPDIAG_KIND_WEIGHT_GRAD &&
       fig(f, "local") == 0 && fig(f, "ranks_affected") == 2 && strstr(words, "do not show which rank") &&
       strstr(words, "no rank's own activations"),
       "only the reduced gradients hold the NaN: the origin is not identifiable, and the words say so (%s)", words);
    an_inputs_free(&in);
}

static void check_part(void)
{
    an_inputs in;
    char err[1024];
    int rc = load("part.rank*.h5", 0, &in, err, sizeof err);
    const an_run *m = !rc && in.n ? &in.runs[0] : NULL;
    ok(m && m->ranks && m->ranks->n == 2 && m->ranks->nmissing == 1 && m->ranks->missing[0] == 1,
       "ranks 0 and 2 of 3: rank 1 is missing (%s)", rc ? err : "");
    if (!m || !m->ranks) {
        an_inputs_free(&in);
        return;
    }
    const an_finding *f = finding(m, F_RANK_MISSING);
    ok(f && fig(f, "trace") == 1 && fig(f, "rank") == 1 && fig(f, "world_size") == 3 && fig(f, "read") == 2,
       "a missing rank is a finding: no trace of rank 1 of 3");
    f = finding(m, F_RANK_STOPPED_EARLY);
    ok(f && fig(f, "rank") == 2 && fig(f, "stop_step") == 4 && fig(f, "event") == 1 && fig(f, "others_complete") == 1 &&
       f->str[1] && strstr(f->str[1], "rank stops"),
       "rank 2 stopped first, at step 4, with its stop event's message; the others completed");
    ok(m->nsteps == 5 && m->ranks->merged_from == 0 && m->ranks->merged_to == 4 &&
       m->status == AMPDIAG_STATUS_INTERRUPTED,
       "the merged run holds the 5 steps every rank recorded and is interrupted, as rank 2 (%zu steps, status %s)",
       m->nsteps, m->status_text);
    an_inputs_free(&in);
}

static void check_hole(void)
{
    an_inputs in;
    char err[1024];
    int rc = load("hole.rank0.h5", 0, &in, err, sizeof err);
    const an_run *m = !rc && in.n ? &in.runs[0] : NULL;
    const an_finding *f = NULL, *f0 = NULL;
    while (m && (f = an_finding_next(an_run_findings(m), F_RANK_MISSING, -1, f)) && f->s.layer != 1)
        f0 = f;
    ok(f0 && fig(f0, "rank") == 0 && fig(f0, "first_step") == 5 && fig(f0, "records") == 1, "rank 0's fc1 shards "
       "missing at step 5 (their records came out of order)");
    ok(f && fig(f, "shard") == 1 && fig(f, "rank") == 1 && f->s.layer == 1 && f->s.kind == AMPDIAG_KIND_WEIGHT &&
       fig(f, "first_step") == 2 && fig(f, "records") == 2 &&
       m->layers[1].cell[AMPDIAG_KIND_WEIGHT].records == 8 && m->layers[0].cell[AMPDIAG_KIND_WEIGHT].records == 9,
       "rank 1's fc2 weight shard missing at step 2 (and rank 0's shards at step 5, out of order): findings, and "
       "those steps' weights left out of the merged run");
    ok(m && m->ranks && m->ranks->unsorted == 2 * AMPDIAG_NKINDS,
       "rank 0's records of step 5, written after step 6's, are left out and counted (%zu)",
       m && m->ranks ? m->ranks->unsorted : 0);
    an_inputs_free(&in);
}

static void check_bad(void)
{
    static const struct {
        const char *glob, *file, *words;
    } cases[] = {
        {"badlr.rank*.h5", "badlr.rank1.h5", "lr 0.002, not 0.001"},
        {"twice.rank*.h5", "twice.rank1.h5", "both rank 0"},
        {"plain.rank*.h5", "plain.rank1.h5", "not one rank's trace"},
        {"nosuch.rank*.h5", "nosuch.rank*.h5", "no file matches"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        an_inputs in;
        char err[1024] = "";
        int rc = load(cases[i].glob, 0, &in, err, sizeof err);
        ok(rc && !ampdiag_trace_err_is_io(rc) && strstr(err, cases[i].file) && strstr(err, cases[i].words),
           "'%s' is not one run: refused naming %s (%s)", cases[i].glob, cases[i].file, err);
        an_inputs_free(&in);
    }
}

static void check_args(void)
{
    an_inputs in;
    char err[1024], p[3][1024];
    int rc = load("repl.rank0.h5", AN_ARGS_ALONE, &in, err, sizeof err);
    ok(!rc && in.n == 1 && !in.runs[0].ranks && in.nnotes == 0, "--alone: rank 0's trace read by itself");
    an_inputs_free(&in);
    const char *args[3];
    for (int r = 0; r < 3; r++) {
        snprintf(p[r], sizeof p[r], "%s/repl.rank%d.h5", dir, r);
        args[r] = p[r];
    }
    an_options ao = {.warmup = -1, .quiet = 1};
    rc = an_load_args(args, 3, &ao, 0, &in, err, sizeof err);
    ok(!rc && in.n == 1 && in.runs[0].ranks && in.runs[0].ranks->n == 3 && in.nnotes == 3,
       "the three rank traces as three arguments (a glob the shell expanded): one run, notes for the two read "
       "as ranks of the first (%zu runs, %zu notes)", in.n, in.nnotes);
    an_inputs_free(&in);
    args[0] = p[1];
    rc = an_load_args(args, 1, &ao, 0, &in, err, sizeof err);
    ok(!rc && in.n == 1 && !in.runs[0].ranks && in.runs[0].dist.have == 1 && in.runs[0].dist.rank == 1,
       "rank 1's trace alone is a run of its own (its rank attributes kept)");
    an_inputs_free(&in);
}

int main(int argc, char **argv)
{
    if (ampdiag_trace_process_init())
        return 1;
    if (argc == 3 && strcmp(argv[1], "--write") == 0) {
        snprintf(dir, sizeof dir, "%s", argv[2]);
        return write_all(dir) ? 1 : 0;
    }
    snprintf(dir, sizeof dir, "%s/t_ranks.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    ok(write_all(dir) == 0, "the rank traces written through the public writer");
    check_shard();
    check_repl();
    check_reduced();
    check_part();
    check_hole();
    check_bad();
    check_args();
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
