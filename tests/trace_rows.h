/* trace_rows.h - tests: a trace's /layers, /tensors and /quant rows read whole through the
 * public reader, and lookups in them (t_quant_run, t_recipe). */
#ifndef AMPDIAG_TESTS_TRACE_ROWS_H
#define AMPDIAG_TESTS_TRACE_ROWS_H

#include "ampdiag_trace.h"
#include "tap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct trace_rows {
    ampdiag_trace_reader *r;
    ampdiag_trace_layer *L;
    ampdiag_trace_quant *Q;
    ampdiag_trace_tensor *T;
    size_t nl, nq, nt;
} trace_rows;

/* 0, or -1 after a diag naming the file (t is then for trace_rows_free). */
static inline int trace_rows_load(trace_rows *t, const char *path)
{
    memset(t, 0, sizeof *t);
    if (ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &t->r) != 0 || ampdiag_trace_read_layers(t->r, &t->L, &t->nl) ||
        ampdiag_trace_read_quant(t->r, 0, SIZE_MAX, &t->Q, &t->nq) ||
        ampdiag_trace_read_tensors(t->r, 0, SIZE_MAX, &t->T, &t->nt)) {
        diag("read %s: %s", path, ampdiag_trace_errmsg());
        return -1;
    }
    return 0;
}

static inline void trace_rows_free(trace_rows *t)
{
    free(t->L);
    free(t->Q);
    free(t->T);
    ampdiag_trace_reader_close(t->r);
}

/* The index of the layer named name, or -1. */
static inline int trace_rows_layer(const trace_rows *t, const char *name)
{
    for (size_t i = 0; i < t->nl; i++)
        if (strcmp(t->L[i].name, name) == 0)
            return (int)i;
    return -1;
}

static inline const ampdiag_trace_tensor *trace_rows_tensor(const trace_rows *t, int64_t step, int layer, int kind)
{
    for (size_t i = 0; i < t->nt; i++)
        if (t->T[i].step == step && t->T[i].layer == layer && t->T[i].kind == kind)
            return &t->T[i];
    return NULL;
}

/* The /quant row of (step, layer, kind, scheme, element format, direction); fmt -1: any. */
static inline const ampdiag_trace_quant *trace_rows_quant(const trace_rows *t, int64_t step, int layer, int kind,
                                                          int scheme, int fmt, int d)
{
    for (size_t i = 0; i < t->nq; i++) {
        const ampdiag_trace_quant *q = &t->Q[i];
        if (q->step == step && q->layer == layer && q->kind == kind && q->scheme == scheme &&
            (fmt < 0 || q->format == fmt) && q->direction == d)
            return q;
    }
    return NULL;
}

#endif
