/*
 * quant.c - the block-scaled what-if of ampdiag run (quant.h).
 */
#include "train/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUANT_MAX_SPECS 64

struct quant_plan {
    int nlayers;
    size_t nspec;
    ampdiag_qspec spec[QUANT_MAX_SPECS];
    size_t nkind[MT_COUNT];               /* schemes per model tensor kind ... */
    ampdiag_qspec kspec[MT_COUNT][QUANT_MAX_SPECS]; /* ... and which */
    size_t *prow, *pcol;                  /* [nlayers]: the parameters' matrix (0, 0: 1-D) */
    int *feat;                            /* [nlayers]: features of the layer's output */
    char names[QUANT_MAX_SPECS * 32];
};

struct quant_slot {
    int nlayers;
    size_t per;           /* results per (layer, kind): the most schemes of a kind */
    ampdiag_qstats *q;    /* [nlayers][MT_COUNT][per] */
    int *have;            /* [nlayers][MT_COUNT] */
};

static const ampdiag_tensor_kind kind_of_mt[MT_COUNT] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_ACTIVATION_GRAD,
                                                        AMPDIAG_KIND_WEIGHT, AMPDIAG_KIND_WEIGHT_GRAD};

int quant_plan_create(const model *m, const char *list, quant_plan **out, char *err, size_t errlen)
{
    *out = NULL;
    quant_plan *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory for the --whatif plan");
        return -1;
    }
    char why[200];
    if (ampdiag_qspec_parse(list ? list : ampdiag_qspec_default(), p->spec, QUANT_MAX_SPECS, &p->nspec, why,
                            sizeof why) != 0) {
        snprintf(err, errlen, "--whatif %s", why);
        free(p);
        return -1;
    }
    if (p->nspec == 0 || !m->bk->quant_whatif) {
        free(p);
        return 0;
    }
    size_t at = 0;
    for (size_t i = 0; i < p->nspec; i++) {
        for (int k = 0; k < MT_COUNT; k++)
            if (p->spec[i].kinds & (1u << kind_of_mt[k]))
                p->kspec[k][p->nkind[k]++] = p->spec[i];
        if (at < sizeof p->names - 40) {
            if (at) p->names[at++] = ',';
            at += (size_t)ampdiag_qspec_name(&p->spec[i], p->names + at, sizeof p->names - at);
        }
    }
    p->nlayers = m->nlayers;
    p->prow = calloc((size_t)m->nlayers + 1, sizeof *p->prow);
    p->pcol = calloc((size_t)m->nlayers + 1, sizeof *p->pcol);
    p->feat = calloc((size_t)m->nlayers + 1, sizeof *p->feat);
    if (!p->prow || !p->pcol || !p->feat) {
        quant_plan_free(p);
        snprintf(err, errlen, "out of memory for the --whatif plan");
        return -1;
    }
    for (int i = 0; i < m->nlayers; i++) {
        const layer *L = &m->layers[i];
        if (L->npv > 0 && L->pv[0].ndim == 2 && L->pv[0].offset == 0 && L->pv[0].shape[0] > 1) {
            p->prow[i] = (size_t)L->pv[0].shape[0];
            p->pcol[i] = (size_t)L->pv[0].shape[1];
        }
        p->feat[i] = L->out ? L->out->dim : 0;
    }
    *out = p;
    return 0;
}

void quant_plan_free(quant_plan *p)
{
    if (!p)
        return;
    free(p->prow);
    free(p->pcol);
    free(p->feat);
    free(p);
}

const char *quant_plan_names(const quant_plan *p) { return p ? p->names : ""; }

quant_slot *quant_slot_new(const quant_plan *p)
{
    if (!p)
        return NULL;
    quant_slot *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->nlayers = p->nlayers;
    for (int k = 0; k < MT_COUNT; k++)
        s->per = p->nkind[k] > s->per ? p->nkind[k] : s->per;
    size_t cells = (size_t)p->nlayers * MT_COUNT;
    s->q = calloc(cells * (s->per ? s->per : 1), sizeof *s->q);
    s->have = calloc(cells ? cells : 1, sizeof *s->have);
    if (!s->q || !s->have) {
        quant_slot_free(s);
        return NULL;
    }
    return s;
}

void quant_slot_free(quant_slot *s)
{
    if (!s)
        return;
    free(s->q);
    free(s->have);
    free(s);
}

void quant_count(const quant_plan *p, const backend *bk, quant_slot *s, int li, model_tensor_kind mk,
                 const float *x, size_t n, const ampdiag_tstats *st)
{
    if (!p || !s || li < 0 || li >= p->nlayers || p->nkind[mk] == 0)
        return;
    size_t cell = (size_t)li * MT_COUNT + (size_t)mk;
    size_t rows = 0, cols = 0;
    if (mk == MT_WEIGHT || mk == MT_WEIGHT_GRAD) {
        rows = p->prow[li];
        cols = p->pcol[li];
        if (rows * cols > n)
            rows = cols = 0;
    } else if (p->feat[li] > 1 && n % (size_t)p->feat[li] == 0 && n / (size_t)p->feat[li] > 1) {
        cols = (size_t)p->feat[li];
        rows = n / cols;
    }
    s->have[cell] = bk->quant_whatif(bk, x, n, rows, cols, ampdiag_quant_amax(st), p->nkind[mk], p->kspec[mk],
                                     s->q + cell * s->per) == 0;
}

int quant_write(const quant_plan *p, quant_slot *s, ampdiag_trace_writer *w, int64_t step, int li,
                model_tensor_kind mk, ampdiag_tensor_kind kind)
{
    if (!p || !s || li < 0 || li >= p->nlayers)
        return 0;
    size_t cell = (size_t)li * MT_COUNT + (size_t)mk;
    if (!s->have[cell])
        return 0;
    s->have[cell] = 0;
    for (size_t i = 0; i < p->nkind[mk]; i++) {
        int rc = ampdiag_trace_append_quant(w, step, li, kind, &s->q[cell * s->per + i]);
        if (rc < 0)
            return rc;
    }
    return 0;
}
