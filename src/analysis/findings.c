/*
 * findings.c - what one trace says (findings.h).
 */
#include "analysis/findings.h"
#include "analysis/fp8.h"
#include "analysis/hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t nonfinite(const an_cell *c) { return c->nan + c->posinf + c->neginf; }

static int cmp_tie(const an_headroom *x, const an_headroom *y)
{
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return x->kind < y->kind ? -1 : x->kind > y->kind;
}

#define CMP_BY(field, f)                                                                           \
    static int cmp_##field##f(const void *a, const void *b)                                        \
    {                                                                                              \
        const an_headroom *x = a, *y = b;                                                          \
        if (x->field[f] != y->field[f])                                                            \
            return x->field[f] < y->field[f] ? -1 : 1;                                             \
        return cmp_tie(x, y);                                                                      \
    }
CMP_BY(over, 0)
CMP_BY(over, 1)
CMP_BY(under, 0)
CMP_BY(under, 1)

static int headroom(const an_run *r, an_findings *f)
{
    size_t ncell = (r->nlayers ? r->nlayers : 1) * AMPDIAG_NKINDS;
    for (int fm = 0; fm < 2; fm++)
        for (int side = 0; side < 2; side++)
            if (!(f->by_headroom[fm][side] = malloc(ncell * sizeof(an_headroom))))
                return -1;
    const ampdiag_format_info *fi[2] = {ampdiag_format_get(AMPDIAG_FP16),
                                        ampdiag_format_get(AMPDIAG_BF16)};
    for (size_t l = 0; l < r->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            const an_cell *c = &r->layers[l].cell[k];
            if (c->records == 0 || !(c->absmax > 0) || isinf(c->absmin_nz))
                continue;
            an_headroom h = {(int)l, k, c->absmax, c->absmin_nz, c->absmax_step, c->absmin_step,
                             {0, 0}, {0, 0}};
            for (int fm = 0; fm < 2; fm++) {
                h.over[fm] = log2(fi[fm]->max_finite / c->absmax);
                h.under[fm] = log2(c->absmin_nz / fi[fm]->min_normal);
            }
            for (int fm = 0; fm < 2; fm++)
                for (int side = 0; side < 2; side++)
                    f->by_headroom[fm][side][f->nheadroom] = h;
            f->nheadroom++;
        }
    qsort(f->by_headroom[0][0], f->nheadroom, sizeof(an_headroom), cmp_over0);
    qsort(f->by_headroom[1][0], f->nheadroom, sizeof(an_headroom), cmp_over1);
    qsort(f->by_headroom[0][1], f->nheadroom, sizeof(an_headroom), cmp_under0);
    qsort(f->by_headroom[1][1], f->nheadroom, sizeof(an_headroom), cmp_under1);
    return 0;
}

/* The run summary's per-layer findings. */
static void layer_findings(const an_run *r, an_findings *f)
{
    const double fp16_max = ampdiag_format_get(AMPDIAG_FP16)->max_finite;
    double best = INFINITY;
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        const an_cell *a = &L->cell[AMPDIAG_KIND_ACTIVATION];
        const an_cell *g = &L->cell[AMPDIAG_KIND_WEIGHT_GRAD];
        const an_cell *w = &L->cell[AMPDIAG_KIND_WEIGHT];
        if (nonfinite(w) && (f->nonfinite_weight_layer < 0 ||
                             w->first_nonfinite_step < f->nonfinite_weight_step)) {
            f->nonfinite_weight_layer = (int)l;
            f->nonfinite_weight_step = w->first_nonfinite_step;
        }
        if (a->absmax > 0 && !L->fp32_op) {
            double hd = log2(fp16_max / a->absmax);
            if (hd < best) {
                best = hd;
                f->act_headroom_layer = (int)l;
            }
        }
        uint64_t finite = g->count - nonfinite(g);
        if (finite > 0 && (double)g->zero / (double)finite > f->zero_grad_fraction) {
            f->zero_grad_fraction = (double)g->zero / (double)finite;
            f->zero_grad_layer = (int)l;
        }
        uint64_t nz = finite - g->zero;
        uint64_t fu = g->wi[AN_WI_FP16][AMPDIAG_WHATIF_UNDERFLOW];
        if (nz > 0 && (double)fu / (double)nz > f->flush_fraction) {
            f->flush_fraction = (double)fu / (double)nz;
            f->flush_layer = (int)l;
        }
    }
    f->act_headroom = best;
    /* the first NaN/inf in the forward pass: the first step with one, the first layer there */
    if (r->fwd_nonfinite_layer >= 0 && (size_t)r->fwd_nonfinite_layer < r->nlayers) {
        const an_cell *a = &r->layers[r->fwd_nonfinite_layer].cell[AMPDIAG_KIND_ACTIVATION];
        f->nonfinite_act_layer = r->fwd_nonfinite_layer;
        f->nonfinite_act_step = r->fwd_nonfinite_step;
        f->nonfinite_act_count = nonfinite(a);
    }
}

int an_findings_of(an_run *r)
{
    an_findings *f = r->find = calloc(1, sizeof *r->find);
    if (!f)
        return -1;
    for (int k = 0; k < AMPDIAG_NKINDS; k++)
        an_cell_init(&f->kind[k]);
    an_cell_init(&f->all);
    f->act_headroom_layer = f->zero_grad_layer = f->flush_layer = -1;
    f->nonfinite_act_layer = f->nonfinite_weight_layer = -1;
    f->nonfinite_act_step = f->nonfinite_weight_step = -1;
    f->act_headroom = INFINITY;
    for (size_t l = 0; l < r->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++)
            an_cell_merge(&f->kind[k], &r->layers[l].cell[k]);
    for (int k = 0; k < AMPDIAG_NKINDS; k++)
        an_cell_merge(&f->all, &f->kind[k]);
    layer_findings(r, f);

    f->update_nonzero = r->update_nonzero;
    double unz = r->update_nonzero ? (double)r->update_nonzero : NAN;
    f->lost_fraction = (double)r->lost / unz;
    f->lost_if_fp16 = r->lost_if_fields ? (double)r->lost_if[0] / unz : NAN;
    f->lost_if_bf16 = r->lost_if_fields ? (double)r->lost_if[1] / unz : NAN;

    f->last_eval = r->nevals ? &r->evals[r->nevals - 1] : NULL;
    f->eval_is_accuracy = strcmp(r->eval_metric, "accuracy") == 0;
    an_fp8_findings_of(r, &f->fp8);
    return headroom(r, f);
}

void an_findings_free(an_run *r)
{
    an_findings *f = r->find;
    if (!f)
        return;
    for (int fm = 0; fm < 2; fm++)
        for (int side = 0; side < 2; side++)
            free(f->by_headroom[fm][side]);
    free(f);
    r->find = NULL;
}
