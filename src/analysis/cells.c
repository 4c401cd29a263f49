/*
 * cells.c - the cells of a run (one per layer and tensor kind) and its what-if columns
 * (run.h): records added and merged, counts read by column.
 */
#include "analysis/run.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void an_cell_init(an_cell *c)
{
    memset(c, 0, sizeof *c);
    c->absmax = -1;
    c->absmin_nz = INFINITY;
    c->absmax_u = -1;
    c->absmin_u = INFINITY;
    c->absmax_step = c->absmin_step = c->absmax_u_step = -1;
    c->first_nonfinite_step = -1;
    c->first_f16o_step = -1;
}

static void add_counts(uint64_t *dst, uint64_t o, uint64_t u, uint64_t s)
{
    dst[AMPDIAG_WHATIF_OVERFLOW] += o;
    dst[AMPDIAG_WHATIF_UNDERFLOW] += u;
    dst[AMPDIAG_WHATIF_SUBNORMAL] += s;
}

/* The record's extremes into the cell (sc divides magnitudes: the unscaled ones). */
static void add_extremes(an_cell *c, const ampdiag_trace_tensor *x, double sc)
{
    if (!isnan(x->absmax) && x->absmax > c->absmax) {
        c->absmax = x->absmax;
        c->absmax_step = x->step;
    }
    if (!isnan(x->absmax) && x->absmax / sc > c->absmax_u) {
        c->absmax_u = x->absmax / sc;
        c->absmax_u_step = x->step;
    }
    if (!isnan(x->absmin_nz) && x->absmin_nz > 0) {
        if (x->absmin_nz < c->absmin_nz) {
            c->absmin_nz = x->absmin_nz;
            c->absmin_step = x->step;
        }
        if (x->absmin_nz / sc < c->absmin_u)
            c->absmin_u = x->absmin_nz / sc;
    }
}

void an_cell_add(an_cell *c, const ampdiag_trace_tensor *x, double sc, int v1_fp8_cols[2])
{
    uint64_t nonfin = x->n_nan + x->n_posinf + x->n_neginf;
    if (c->records++ == 0) {
        c->first_count = x->count;
        c->first_zero = x->n_zero;
    }
    c->last_count = x->count;
    c->last_zero = x->n_zero;
    c->count += x->count;
    c->zero += x->n_zero;
    c->nan += x->n_nan;
    c->posinf += x->n_posinf;
    c->neginf += x->n_neginf;
    add_counts(c->wi[AN_WI_FP16], x->fp16_overflow, x->fp16_underflow, x->fp16_subnormal);
    add_counts(c->wi[AN_WI_BF16], x->bf16_overflow, x->bf16_underflow, x->bf16_subnormal);
    c->wi_values[AN_WI_FP16] += x->count;
    c->wi_values[AN_WI_BF16] += x->count;
    if (v1_fp8_cols && v1_fp8_cols[0] >= 0) {
        add_counts(c->wi[v1_fp8_cols[0]], x->e4m3_overflow, x->e4m3_underflow, x->e4m3_subnormal);
        c->wi_values[v1_fp8_cols[0]] += x->count;
    }
    if (v1_fp8_cols && v1_fp8_cols[1] >= 0) {
        add_counts(c->wi[v1_fp8_cols[1]], x->e5m2_overflow, x->e5m2_underflow, x->e5m2_subnormal);
        c->wi_values[v1_fp8_cols[1]] += x->count;
    }
    c->lost += x->lost_updates;
    c->lost_if[0] += x->lost_if_fp16;
    c->lost_if[1] += x->lost_if_bf16;
    if (nonfin && c->first_nonfinite_step < 0)
        c->first_nonfinite_step = x->step;
    if (x->fp16_overflow && c->first_f16o_step < 0)
        c->first_f16o_step = x->step;
    add_extremes(c, x, sc);
}

void an_cell_merge(an_cell *d, const an_cell *s)
{
    d->records += s->records;
    d->count += s->count;
    d->zero += s->zero;
    d->nan += s->nan;
    d->posinf += s->posinf;
    d->neginf += s->neginf;
    for (int f = 0; f < AN_MAX_WHATIF; f++) {
        for (int k = 0; k < AMPDIAG_WHATIF_NCLASSES; k++)
            d->wi[f][k] += s->wi[f][k];
        d->wi_values[f] += s->wi_values[f];
    }
    d->lost += s->lost;
    d->lost_if[0] += s->lost_if[0];
    d->lost_if[1] += s->lost_if[1];
    if (s->absmax > d->absmax) {
        d->absmax = s->absmax;
        d->absmax_step = s->absmax_step;
    }
    if (s->absmin_nz < d->absmin_nz) {
        d->absmin_nz = s->absmin_nz;
        d->absmin_step = s->absmin_step;
    }
}

uint64_t an_cell_nonfinite(const an_cell *c) { return c->nan + c->posinf + c->neginf; }

uint64_t an_cell_nonzero(const an_cell *c)
{
    uint64_t bad = c->zero + c->nan + c->posinf + c->neginf;
    return c->count > bad ? c->count - bad : 0;
}

uint64_t an_cell_whatif(const an_cell *c, int col, uint64_t *o, uint64_t *u, uint64_t *s)
{
    if (col < 0 || col >= AN_MAX_WHATIF) {
        *o = *u = *s = 0;
        return 0;
    }
    *o = c->wi[col][AMPDIAG_WHATIF_OVERFLOW];
    *u = c->wi[col][AMPDIAG_WHATIF_UNDERFLOW];
    *s = c->wi[col][AMPDIAG_WHATIF_SUBNORMAL];
    return c->wi_values[col];
}

/* ------------------------------------------------------------------------------------------
 * What-if columns
 * ------------------------------------------------------------------------------------------ */

int an_whatif_find(const an_run *r, int lib_format, int scaling)
{
    for (int i = 0; i < r->nwcol; i++)
        if (r->wcol[i].lib_format == lib_format && r->wcol[i].key.scaling == scaling &&
            r->wcol[i].key.scheme == 0 && r->wcol[i].key.rule == 0 && r->wcol[i].key.direction == 0)
            return i;
    return -1;
}

static int same_key(const an_whatif_key *a, const an_whatif_key *b)
{
    return a->scaling == b->scaling && a->scheme == b->scheme && a->rule == b->rule &&
           a->direction == b->direction && a->block == b->block;
}

/* The column's name: a /quant column's, its scheme as --whatif names it
 * ("mxfp8-e4m3:floor@row"); else the format's, then each part of the key that is not its
 * default ("e4m3_delayed"). */
static void column_name(an_whatif_col *c)
{
    if (c->source == AN_WS_QUANT) {
        ampdiag_qspec s = {(ampdiag_format)c->lib_format, (ampdiag_qscheme)(c->key.scheme - 1),
                           (ampdiag_qrule)(c->key.rule - 1), (ampdiag_qdir)(c->key.direction - 1),
                           c->key.block, 0};
        ampdiag_qspec_name(&s, c->name, sizeof c->name);
        return;
    }
    const char *sc = ampdiag_scaling_name(c->key.scaling);
    int n = snprintf(c->name, sizeof c->name, "%s", c->format);
    if (c->key.scaling != AMPDIAG_SCALING_NONE && n >= 0 && (size_t)n < sizeof c->name)
        n += snprintf(c->name + n, sizeof c->name - (size_t)n, "_%s", sc ? sc : "scaled");
    const int32_t parts[3] = {c->key.scheme, c->key.rule, c->key.direction};
    const char tags[3] = {'s', 'r', 'd'};
    for (int i = 0; i < 3; i++)
        if (parts[i] && n >= 0 && (size_t)n < sizeof c->name)
            n += snprintf(c->name + n, sizeof c->name - (size_t)n, "_%c%d", tags[i], (int)parts[i]);
}

int an_whatif_column(an_run *r, const char *format, int lib_format, const an_whatif_key *key,
                     int source, int32_t trace_index, double max_finite, double min_normal,
                     double min_subnormal)
{
    for (int i = 0; i < r->nwcol; i++)
        if (strcmp(r->wcol[i].format, format) == 0 && same_key(&r->wcol[i].key, key))
            return i;
    if (r->nwcol >= AN_MAX_WHATIF)
        return -1;
    an_whatif_col col;
    memset(&col, 0, sizeof col);
    an_whatif_col *c = &col;
    snprintf(c->format, sizeof c->format, "%s", format);
    c->lib_format = lib_format;
    c->key = *key;
    c->source = source;
    c->trace_index = trace_index;
    c->max_finite = max_finite;
    c->min_normal = min_normal;
    c->min_subnormal = min_subnormal;
    c->ref_sqnr_db = c->ref_flush = c->ref_saturated = NAN;
    column_name(c);
    r->wcol[r->nwcol] = col;
    return r->nwcol++;
}

const char *an_layer_name(const an_run *r, int layer)
{
    if (layer < 0)
        return "(global)";
    if ((size_t)layer < r->nlayers)
        return r->layers[layer].name;
    return "?";
}

int an_whatif_own(const an_run *r, int col)
{
    if (col < 0 || col >= r->nwcol || r->prec == PREC_FP32)
        return 0;
    const an_whatif_col *c = &r->wcol[col];
    return c->lib_format >= 0 && c->lib_format == (int)precision_format(r->prec) &&
           c->key.scaling == AMPDIAG_SCALING_NONE && c->source != AN_WS_QUANT;
}

/* name is one of the comma-separated names of list (case-insensitive). */
static int list_names(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t k = strcspn(p, ",");
        if (k == len && strncasecmp(p, name, len) == 0)
            return 1;
        p += k + (p[k] == ',');
    }
    return 0;
}

int an_whatif_named(const an_run *r, int col, const char *list)
{
    if (col < 0 || col >= r->nwcol || !list || !*list)
        return 0;
    const an_whatif_col *c = &r->wcol[col];
    int fp8 = (c->lib_format == AMPDIAG_E4M3 || c->lib_format == AMPDIAG_E5M2) && c->source != AN_WS_QUANT;
    if (c->source == AN_WS_QUANT) /* named by "all" or its own name, not its element format's */
        return list_names(list, "all") || list_names(list, c->name);
    return list_names(list, "all") || (fp8 && list_names(list, "fp8")) || list_names(list, c->name) ||
           list_names(list, c->format);
}

const ampdiag_trace_eval *an_initial_eval(const an_run *r)
{
    for (size_t i = 0; i < r->nevals; i++)
        if (r->evals[i].step == -1)
            return &r->evals[i];
    return NULL;
}

const ampdiag_trace_eval *an_final_eval(const an_run *r)
{
    for (size_t i = r->nevals; i-- > 0;)
        if (r->evals[i].step >= 0)
            return &r->evals[i];
    return NULL;
}
