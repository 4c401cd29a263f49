/*
 * recipe.c - the recipes (recipe.h): which what-if columns each reads for each tensor kind, what
 * it would do to each (layer, kind) against its reference, and the findings of every recipe a
 * trace counted: the tensors it would hurt most (F_RECIPE_HURT), the per-layer plan ranked by
 * the measured error (F_RECIPE_LAYER) and its summary (F_RECIPE_PLAN).
 */
#include "analysis/recipe.h"
#include "analysis/findings_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DIR(d) (1u << (d))
#define ROWCOL (DIR(AMPDIAG_QD_ROWWISE) | DIR(AMPDIAG_QD_COLWISE))
#define TENSOR DIR(AMPDIAG_QD_TENSOR)
#define TILE DIR(AMPDIAG_QD_TILE)

/* A recipe: its scheme (-1: delayed scaling, read from /whatif), element formats forward
 * (activations, weights) and backward (gradients), rule (strict: only that rule), and the
 * directions each operand is blocked in (activation, activation gradient, weight): a GEMM
 * operand is blocked along the reduction dimension, and is used both ways. */
typedef struct recipe_def {
    const char *name, *what;
    int scheme;
    ampdiag_format fwd, bwd;
    ampdiag_qrule rule;
    int strict;
    unsigned dirs[3];
} recipe_def;

static const recipe_def defs[AN_NRECIPES] = {
    [AN_RECIPE_MXFP8] = {"mxfp8", "MXFP8: E4M3 in blocks of 32, power-of-two scales rounded down (OCP)",
                         AMPDIAG_QS_MX, AMPDIAG_E4M3, AMPDIAG_E4M3, AMPDIAG_QR_FLOOR, 1, {ROWCOL, ROWCOL, ROWCOL}},
    [AN_RECIPE_MXFP8_RCEIL] = {"mxfp8:rceil", "MXFP8 with the scale rounded up (NVIDIA's rule)", AMPDIAG_QS_MX,
                               AMPDIAG_E4M3, AMPDIAG_E4M3, AMPDIAG_QR_RCEIL, 1, {ROWCOL, ROWCOL, ROWCOL}},
    [AN_RECIPE_NVFP4] = {"nvfp4", "NVFP4: E2M1 in blocks of 16 with E4M3 scales, weights in 16x16 tiles",
                         AMPDIAG_QS_NVFP4, AMPDIAG_E2M1, AMPDIAG_E2M1, AMPDIAG_QR_E4M3, 0, {ROWCOL, ROWCOL, TILE}},
    [AN_RECIPE_FP8_BLOCK] = {"fp8-block", "FP8 blockwise: E4M3 in 1x128 blocks, weights in 128x128 tiles",
                             AMPDIAG_QS_BLOCKWISE, AMPDIAG_E4M3, AMPDIAG_E4M3, AMPDIAG_QR_POW2, 0,
                             {ROWCOL, ROWCOL, TILE}},
    [AN_RECIPE_FP8_CURRENT] = {"fp8-current", "FP8 current scaling: E4M3 forward, E5M2 gradients, one scale "
                               "per tensor from its amax", AMPDIAG_QS_CURRENT, AMPDIAG_E4M3, AMPDIAG_E5M2,
                               AMPDIAG_QR_FP32, 0, {TENSOR, TENSOR, TENSOR}},
    [AN_RECIPE_FP8_DELAYED] = {"fp8-delayed", "FP8 delayed scaling: E4M3 forward, E5M2 gradients, one scale "
                               "per tensor from an amax history", -1, AMPDIAG_E4M3, AMPDIAG_E5M2,
                               AMPDIAG_QR_FP32, 0, {0, 0, 0}},
};

const char *an_recipe_name(int rc) { return rc >= 0 && rc < AN_NRECIPES ? defs[rc].name : "?"; }
const char *an_recipe_what(int rc) { return rc >= 0 && rc < AN_NRECIPES ? defs[rc].what : "?"; }

int an_recipe_parse(const char *name)
{
    for (int i = 0; name && i < AN_NRECIPES; i++)
        if (strcasecmp(name, defs[i].name) == 0)
            return i;
    return -1;
}

const char *an_recipe_names(void)
{
    return "mxfp8, mxfp8:rceil, nvfp4, fp8-block, fp8-current, fp8-delayed";
}

/* The index of a kind among the operands (defs' dirs), or -1. */
static int operand(int kind)
{
    return kind == AMPDIAG_KIND_ACTIVATION ? 0 : kind == AMPDIAG_KIND_ACTIVATION_GRAD ? 1
         : kind == AMPDIAG_KIND_WEIGHT ? 2 : -1;
}

int an_recipe_kind(int kind) { return operand(kind) >= 0; }

/* Column c matches the recipe for operand k: its scheme, and (as asked) its element format,
 * rule and direction. */
static int matches(const an_run *r, int c, const recipe_def *d, int k, int elem, int rule, int dir)
{
    ampdiag_qspec s;
    if (an_whatif_qspec(r, c, &s) || (int)s.scheme != d->scheme)
        return 0;
    if (d->strict && s.rule != d->rule)
        return 0;
    ampdiag_format want = k == 1 ? d->bwd : d->fwd;
    return (!elem || s.elem == want) && (!rule || s.rule == d->rule) && (!dir || (d->dirs[k] & DIR(s.dir)));
}

size_t an_recipe_columns(const an_run *r, int rc, int kind, int *cols, int *fallback)
{
    int k = operand(kind);
    *fallback = 0;
    if (rc < 0 || rc >= AN_NRECIPES || k < 0)
        return 0;
    const recipe_def *d = &defs[rc];
    size_t n = 0;
    if (d->scheme < 0) { /* delayed scaling: the /whatif column of the kind's format */
        int c = an_whatif_find(r, k == 1 ? d->bwd : d->fwd, AMPDIAG_SCALING_DELAYED);
        if (c >= 0)
            cols[n++] = c;
        return n;
    }
    /* the recipe's own columns, else relax the rule, the element format, the direction */
    static const int relax[4][3] = {{1, 1, 1}, {1, 0, 1}, {0, 0, 1}, {0, 0, 0}};
    for (int step = 0; step < 4 && n == 0; step++) {
        for (int c = 0; c < r->nwcol; c++)
            if (matches(r, c, d, k, relax[step][0], relax[step][1], relax[step][2]))
                cols[n++] = c;
        *fallback = n > 0 && step > 0;
    }
    return n;
}

int an_recipe_counted(const an_run *r, int rc)
{
    int cols[AN_MAX_WHATIF], fb;
    static const int kinds[3] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_KIND_WEIGHT};
    for (int i = 0; i < 3; i++)
        if (an_recipe_columns(r, rc, kinds[i], cols, &fb))
            return 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * A (layer, kind) under a recipe
 * ------------------------------------------------------------------------------------------ */

/* A share beyond its reference in units of the limit: above 1 when it exceeds the reference by
 * more than the limit and is more than RECIPE_REF_FACTOR times it. */
static double beyond(double share, double ref, an_kid limit)
{
    if (isnan(ref))
        ref = 0;
    double by = (share - ref) / an_k(limit), times = ref > 0 ? share / (ref * an_k(K_RECIPE_REF_FACTOR)) : INFINITY;
    return by < times ? by : times;
}

/* The figures of one column of a cell (delayed scaling: its counts). 0 when it has none. */
static int column_cell(const an_run *r, const an_cell *c, int col, an_recipe_cell *o)
{
    const an_whatif_col *w = &r->wcol[col];
    o->col = col;
    if (w->source == AN_WS_QUANT) {
        const an_qcell *q = an_cell_quant(c, col);
        if (!q)
            return 0;
        an_qcell_figs(q, &o->q);
        o->ref_sqnr_db = w->ref_sqnr_db;
        o->ref_flush = w->ref_flush;
        o->ref_saturated = w->ref_saturated;
    } else {
        uint64_t ov, un, sb, nv = an_cell_whatif(c, col, &ov, &un, &sb);
        if (!nv)
            return 0;
        an_qcell_figs(NULL, &o->q);
        o->q.values = (double)nv;
        o->q.flush = (double)un / (double)nv;
        o->q.saturated = (double)ov / (double)nv;
        o->q.subnormal = (double)sb / (double)nv;
        o->ref_sqnr_db = NAN;
        o->ref_flush = o->ref_saturated = 0;
    }
    /* beyond the reference, in units of each limit; the reason is the largest */
    double ex[3] = {beyond(o->q.saturated, o->ref_saturated, K_RECIPE_SAT_EXCESS),
                    beyond(o->q.flush, o->ref_flush, K_RECIPE_FLUSH_EXCESS),
                    (o->ref_sqnr_db - o->q.sqnr_db) / an_k(K_RECIPE_SQNR_MARGIN)};
    o->excess = -INFINITY;
    int arg = -1;
    for (int i = 0; i < 3; i++)
        if (!isnan(ex[i]) && ex[i] > o->excess) {
            o->excess = ex[i];
            arg = i;
        }
    o->reason = o->excess > 1 && arg >= 0 ? AN_RC_SATURATE + arg : AN_RC_OK;
    return 1;
}

int an_recipe_cell_of(const an_run *r, int rc, int layer, int kind, an_recipe_cell *out)
{
    int cols[AN_MAX_WHATIF], fb, got = 0;
    out->col = -1;
    out->excess = -INFINITY;
    if (layer < 0 || (size_t)layer >= r->nlayers)
        return 0;
    const an_cell *c = &r->layers[layer].cell[kind];
    size_t n = an_recipe_columns(r, rc, kind, cols, &fb);
    for (size_t i = 0; i < n; i++) {
        an_recipe_cell one;
        if (column_cell(r, c, cols[i], &one) && (!got || one.excess > out->excess)) {
            *out = one;
            got = 1;
        }
    }
    return got;
}

int an_recipe_plan_layer(const an_run *r, int layer)
{
    const an_layer *L = &r->layers[layer];
    char op[sizeof L->op];
    size_t i = 0;
    for (; L->op[i] && i + 1 < sizeof op; i++) /* "LayerNorm" as "layernorm" */
        op[i] = (char)(L->op[i] >= 'A' && L->op[i] <= 'Z' ? L->op[i] - 'A' + 'a' : L->op[i]);
    op[i] = 0;
    return L->params > 0 && !L->fp32_op && !strstr(op, "norm") && !strstr(op, "embed");
}

/* ------------------------------------------------------------------------------------------
 * The findings of every recipe the trace counted
 * ------------------------------------------------------------------------------------------ */

typedef struct judged {
    int layer, kind;
    an_recipe_cell c;
} judged;

/* Largest excess first, then layer and kind. */
static int by_excess(const void *a, const void *b)
{
    const judged *x = a, *y = b;
    if (x->c.excess != y->c.excess)
        return x->c.excess > y->c.excess ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return (x->kind > y->kind) - (x->kind < y->kind);
}

static void hurt_finding(fctx *x, int rc, const judged *j)
{
    an_finding *f = fadd(x, F_RECIPE_HURT);
    if (!f)
        return;
    const an_qfigs *q = &j->c.q;
    f->s.layer = j->layer;
    f->s.kind = j->kind;
    f->s.col = j->c.col;
    f->s.from = q->worst_step;
    double v[] = {q->flush, j->c.ref_flush, q->saturated, j->c.ref_saturated, q->subnormal, q->sqnr_db,
                  j->c.ref_sqnr_db, q->rel_mse, q->max_rel_err, q->scale_underflow, q->disagree, q->worst_sqnr_db,
                  (double)q->worst_step, j->c.excess, j->c.reason, rc};
    memcpy(f->v, v, sizeof v);
}

/* The tensors the recipe would hurt, the AN_RECIPE_HURT_TOP worst: F_RECIPE_HURT. Returns how
 * many it would hurt; *judged_n the tensors it judged. */
static size_t recipe_hurt(fctx *x, int rc, size_t *judged_n)
{
    const an_run *r = x->r;
    VEC(judged) all = {0};
    for (size_t l = 0; l < r->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            judged j = {(int)l, k, {0}};
            if (an_recipe_kind(k) && an_recipe_cell_of(r, rc, (int)l, k, &j.c) && vec_push(&all, j))
                x->oom = 1;
        }
    *judged_n = all.n;
    if (all.n)
        qsort(all.v, all.n, sizeof *all.v, by_excess);
    size_t hurt = 0;
    for (size_t i = 0; i < all.n && all.v[i].c.reason != AN_RC_OK; i++, hurt++)
        if (hurt < AN_RECIPE_HURT_TOP)
            hurt_finding(x, rc, &all.v[i]);
    vec_free(&all);
    return hurt;
}

/* A plan layer: its worst operand under the recipe. 0 when the recipe judged none of them. */
static int plan_layer(const an_run *r, int rc, int layer, judged *out)
{
    static const int kinds[3] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_KIND_WEIGHT};
    int got = 0;
    for (int i = 0; i < 3; i++) {
        an_recipe_cell c;
        if (an_recipe_cell_of(r, rc, layer, kinds[i], &c) && (!got || c.excess > out->c.excess)) {
            *out = (judged){layer, kinds[i], c};
            got = 1;
        }
    }
    return got;
}

/* The trace lacks some of the recipe's own columns: the nearest it has stand in. */
static int nearest(const an_run *r, int rc)
{
    static const int kinds[3] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_KIND_WEIGHT};
    int cols[AN_MAX_WHATIF], fb, any = 0;
    for (int i = 0; i < 3; i++)
        any |= an_recipe_columns(r, rc, kinds[i], cols, &fb) > 0 && fb;
    return any;
}

/* One F_RECIPE_LAYER per plan layer, ranked by excess; then F_RECIPE_PLAN. */
static void recipe_plan(fctx *x, int rc, size_t hurt, size_t judged_n)
{
    const an_run *r = x->r;
    judged *p = malloc((r->nlayers ? r->nlayers : 1) * sizeof *p);
    int *pos = calloc(r->nlayers ? r->nlayers : 1, sizeof *pos);
    if (!p || !pos) {
        x->oom = 1;
        free(p);
        free(pos);
        return;
    }
    size_t n = 0, keep = 0, last = 0;
    for (size_t l = 0; l < r->nlayers; l++)
        if (an_recipe_plan_layer(r, (int)l) && plan_layer(r, rc, (int)l, &p[n])) {
            pos[l] = (int)++n;
            keep += p[n - 1].c.reason != AN_RC_OK;
        }
    for (size_t i = 0; i < n; i++) /* kept layers among the last `keep` of the plan */
        last += p[i].c.reason != AN_RC_OK && (size_t)pos[p[i].layer] > n - keep;
    qsort(p, n, sizeof *p, by_excess);
    for (size_t i = 0; i < n; i++) {
        an_finding *f = fadd(x, F_RECIPE_LAYER);
        if (!f)
            break;
        const an_recipe_cell *c = &p[i].c;
        f->s.layer = p[i].layer;
        f->s.kind = p[i].kind;
        f->s.col = c->col;
        double v[] = {(double)(i + 1), c->reason != AN_RC_OK, c->excess, c->q.flush, c->ref_flush, c->q.saturated,
                      c->ref_saturated, c->q.sqnr_db, c->ref_sqnr_db, c->reason, rc, (double)n,
                      pos[p[i].layer]};
        memcpy(f->v, v, sizeof v);
    }
    an_finding *f = fadd(x, F_RECIPE_PLAN);
    if (f) {
        double v[] = {rc, (double)n, (double)keep, n ? (double)keep / (double)n : NAN, (double)last,
                      (double)hurt, (double)judged_n, nearest(r, rc)};
        memcpy(f->v, v, sizeof v);
    }
    free(p);
    free(pos);
}

void an_recipe_findings(fctx *x)
{
    for (int rc = 0; rc < AN_NRECIPES; rc++) {
        if (!an_recipe_counted(x->r, rc))
            continue;
        size_t judged_n;
        size_t hurt = recipe_hurt(x, rc, &judged_n);
        recipe_plan(x, rc, hurt, judged_n);
    }
}
