/*
 * quant.c - the /quant rows (what a block-scaled or per-tensor-scaled recipe would do to each
 * traced tensor: traces/FORMAT.md, "/quant") into the run: each row into the what-if column of
 * its (element format, scheme, scale rule, direction, block), its counts into the column's
 * what-if counts (saturated as overflow, flushed as underflow, subnormal) and its error and
 * block-scale statistics into the cell's quant sums (an_qcell, run.h); then, per column, what
 * the scheme does to normally distributed values: the reference the recipe findings judge a
 * tensor against (recipe.c, docs/numerics.md "Which layers can take a recipe").
 */
#include "analysis/columns.h"
#include "analysis/load_internal.h"
#include "analysis/quant.h"
#include "util/rng.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * Columns and cells
 * ------------------------------------------------------------------------------------------ */

int an_whatif_is_quant(const an_run *r, int col)
{
    return col >= 0 && col < r->nwcol && r->wcol[col].source == AN_WS_QUANT;
}

int an_whatif_qspec(const an_run *r, int col, ampdiag_qspec *s)
{
    if (!an_whatif_is_quant(r, col))
        return -1;
    const an_whatif_col *c = &r->wcol[col];
    *s = (ampdiag_qspec){(ampdiag_format)c->lib_format, (ampdiag_qscheme)(c->key.scheme - 1),
                         (ampdiag_qrule)(c->key.rule - 1), (ampdiag_qdir)(c->key.direction - 1), c->key.block,
                         0};
    return 0;
}

const an_qcell *an_cell_quant(const an_cell *c, int col)
{
    if (!c->q || col < 0 || col >= AN_MAX_WHATIF || c->q[col].records == 0)
        return NULL;
    return &c->q[col];
}

static double share(uint64_t k, uint64_t n) { return n ? (double)k / (double)n : NAN; }

void an_qcell_figs(const an_qcell *q, an_qfigs *o)
{
    double nan = NAN;
    *o = (an_qfigs){nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, -1};
    if (!q || !q->records)
        return;
    uint64_t finite = q->count > q->nonfinite ? q->count - q->nonfinite : 0;
    o->values = (double)q->count;
    o->flush = share(q->flushed, finite);
    o->saturated = share(q->saturated, finite);
    o->subnormal = share(q->subnormal, finite);
    o->rel_mse = q->sig_sq > 0 ? q->err_sq / q->sig_sq : NAN;
    o->sqnr_db = q->sig_sq > 0 ? (q->err_sq > 0 ? 10 * log10(q->sig_sq / q->err_sq) : INFINITY) : NAN;
    o->max_rel_err = q->max_rel_err;
    o->worst_sqnr_db = isfinite(q->worst_sqnr_db) || q->worst_step >= 0 ? q->worst_sqnr_db : NAN;
    o->worst_step = q->worst_step;
    o->disagree = share(q->disagree, finite);
    uint64_t live = q->blocks > q->zero_blocks ? q->blocks - q->zero_blocks : 0;
    o->scale_underflow = share(q->scale_underflow, live);
    o->scale_clamped = share(q->scale_clamped, live);
}

/* A row into a cell's sums (the cell's array made on its first row). sc: the step's loss scale
 * for gradients (their energies unscaled), 1 for the other kinds. 0 or -1 (out of memory). */
static int qcell_add(an_cell *c, int col, const ampdiag_trace_quant *x, double sc)
{
    if (!c->q) {
        if (!(c->q = calloc(AN_MAX_WHATIF, sizeof *c->q)))
            return -1;
        for (int i = 0; i < AN_MAX_WHATIF; i++) {
            c->q[i].worst_sqnr_db = INFINITY;
            c->q[i].worst_step = c->q[i].max_rel_step = -1;
            c->q[i].scale_emin = INT32_MAX;
            c->q[i].scale_emax = INT32_MIN;
        }
    }
    an_qcell *q = &c->q[col];
    q->records++;
    q->count += x->count;
    q->nonfinite += x->nonfinite;
    q->saturated += x->saturated;
    q->flushed += x->flushed;
    q->subnormal += x->subnormal;
    q->poisoned += x->poisoned;
    q->blocks += x->blocks;
    q->zero_blocks += x->zero_blocks;
    q->scale_clamped += x->scale_clamped;
    q->scale_underflow += x->scale_underflow;
    q->disagree += x->disagree;
    double s2 = sc * sc;
    if (isfinite(x->sig_sq) && isfinite(x->err_sq) && s2 > 0) {
        q->sig_sq += x->sig_sq / s2;
        q->err_sq += x->err_sq / s2;
    }
    if (x->max_rel_err > q->max_rel_err) {
        q->max_rel_err = x->max_rel_err;
        q->max_rel_step = x->step;
    }
    double db = x->sig_sq > 0 ? (x->err_sq > 0 ? 10 * log10(x->sig_sq / x->err_sq) : INFINITY) : NAN;
    if (!isnan(db) && (db < q->worst_sqnr_db || q->worst_step < 0)) {
        q->worst_sqnr_db = db;
        q->worst_step = x->step;
    }
    if (x->blocks > x->zero_blocks + x->nonfinite_blocks) {
        q->scale_emin = x->scale_emin < q->scale_emin ? x->scale_emin : q->scale_emin;
        q->scale_emax = x->scale_emax > q->scale_emax ? x->scale_emax : q->scale_emax;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * /quant
 * ------------------------------------------------------------------------------------------ */

/* The column of a row: its element format (by /formats index, matched by name with the
 * library's table) and scheme; -1 for a row this version cannot place. */
static int quant_column(an_run *r, const ampdiag_trace_quant *x, const ampdiag_trace_format *fm, size_t nfm)
{
    if (x->layer < 0 || (size_t)x->layer >= r->nlayers || x->kind < 0 || x->kind >= AMPDIAG_NKINDS ||
        x->scheme < 0 || x->scheme >= AMPDIAG_NQSCHEMES || x->rule < 0 || x->rule >= AMPDIAG_NQRULES ||
        x->direction < 0 || x->direction >= AMPDIAG_NQDIRS)
        return -1;
    const ampdiag_trace_format *f = NULL;
    for (size_t i = 0; i < nfm && !f; i++)
        if (fm[i].index == x->format)
            f = &fm[i];
    ampdiag_format lib;
    if (!f || ampdiag_format_lookup(f->name, &lib) != 0)
        return -1;
    const ampdiag_format_info *fi = ampdiag_format_get(lib);
    an_whatif_key key = {AMPDIAG_SCALING_NONE, x->scheme + 1, x->rule + 1, x->direction + 1, x->block};
    int col = an_whatif_column(r, fi->name, (int)lib, &key, AN_WS_QUANT, f->index, fi->max_finite,
                               fi->min_normal, fi->min_subnormal);
    if (col < 0)
        r->whatif_dropped++;
    return col;
}

/* One batch of rows into the columns and cells. 0 or -1 (out of memory). */
static int quant_rows(an_run *r, const ampdiag_trace_quant *q, size_t n, const ampdiag_trace_format *fm,
                      size_t nfm)
{
    for (size_t i = 0; i < n; i++) {
        const ampdiag_trace_quant *x = &q[i];
        int col = quant_column(r, x, fm, nfm);
        if (col < 0)
            continue;
        an_layer *L = &r->layers[x->layer];
        an_cell *c = &L->cell[x->kind];
        int grad = x->kind == AMPDIAG_KIND_ACTIVATION_GRAD || x->kind == AMPDIAG_KIND_WEIGHT_GRAD;
        if (qcell_add(c, col, x, grad ? an_scale_at(r, x->step) : 1.0))
            return -1;
        c->wi[col][AMPDIAG_WHATIF_OVERFLOW] += x->saturated;
        c->wi[col][AMPDIAG_WHATIF_UNDERFLOW] += x->flushed;
        c->wi[col][AMPDIAG_WHATIF_SUBNORMAL] += x->subnormal;
        c->wi_values[col] += x->count;
        if (x->count)
            an_columns_whatif(r, &L->pts[x->kind], x->step, col, (double)x->flushed / (double)x->count,
                              (double)x->saturated / (double)x->count);
    }
    return 0;
}

int an_load_quant(ampdiag_trace_reader *rd, an_run *r)
{
    if (r->counts.quants == 0)
        return 0;
    ampdiag_trace_format *fm = NULL;
    size_t nfm = 0;
    int rc = ampdiag_trace_read_formats(rd, &fm, &nfm);
    enum { BATCH = 4096 }; /* rows a read: 1.7 MB of records */
    for (size_t first = 0; !rc && first < r->counts.quants; first += BATCH) {
        ampdiag_trace_quant *q;
        size_t n;
        if ((rc = ampdiag_trace_read_quant(rd, first, BATCH, &q, &n)))
            break;
        if (quant_rows(r, q, n, fm, nfm))
            rc = AMPDIAG_TRACE_ENOMEM;
        free(q);
        if (n == 0)
            break;
    }
    free(fm);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * The reference: what a scheme does to normally distributed values
 * ------------------------------------------------------------------------------------------ */

/* The reference tensor: AN_QREF_ROWS x AN_QREF_COLS standard normal values from a fixed seed
 * (two 128 x 128 tiles each way, 256 blocks of 256 rows, 16 384 NVFP4 blocks). */
#define AN_QREF_ROWS 256
#define AN_QREF_COLS 256
#define AN_QREF_SEED 0x5eed0a11u

int an_quant_refs(an_run *r)
{
    int any = 0;
    for (int col = 0; col < r->nwcol; col++)
        any |= an_whatif_is_quant(r, col);
    if (!any)
        return 0;
    size_t n = (size_t)AN_QREF_ROWS * AN_QREF_COLS;
    float *x = malloc(n * sizeof *x);
    if (!x)
        return -1;
    rng g = rng_seed(AN_QREF_SEED);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)rng_normal(&g);
    for (int col = 0; col < r->nwcol; col++) {
        ampdiag_qspec s;
        ampdiag_qstats q;
        if (an_whatif_qspec(r, col, &s) || ampdiag_quant_whatif(x, n, AN_QREF_ROWS, AN_QREF_COLS, -1.0f, 1, &s, &q) ||
            !q.computed)
            continue;
        an_whatif_col *c = &r->wcol[col];
        uint64_t finite = q.count - q.nonfinite;
        c->ref_sqnr_db = ampdiag_qstats_sqnr_db(&q);
        c->ref_flush = (double)q.flushed / (double)finite;
        c->ref_saturated = (double)q.saturated / (double)finite;
    }
    free(x);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * One column's rows, read again (quant.h)
 * ------------------------------------------------------------------------------------------ */

/* The rows of column c in a batch into *v. 0 or -1 (out of memory). */
static int points_of(const an_run *r, const an_whatif_col *c, const ampdiag_trace_quant *q, size_t n,
                     an_qpoint **v, size_t *nv, size_t *cap)
{
    for (size_t i = 0; i < n; i++) {
        const ampdiag_trace_quant *x = &q[i];
        if (x->format != c->trace_index || x->scheme + 1 != c->key.scheme || x->rule + 1 != c->key.rule ||
            x->direction + 1 != c->key.direction || x->block != c->key.block || x->layer < 0 ||
            (size_t)x->layer >= r->nlayers || x->kind < 0 || x->kind >= AMPDIAG_NKINDS)
            continue;
        if (*nv == *cap) {
            size_t nc = *cap ? 2 * *cap : 1024;
            an_qpoint *t = realloc(*v, nc * sizeof *t);
            if (!t)
                return -1;
            *v = t;
            *cap = nc;
        }
        uint64_t finite = x->count > x->nonfinite ? x->count - x->nonfinite : 0;
        double db = x->sig_sq > 0 ? (x->err_sq > 0 ? 10 * log10(x->sig_sq / x->err_sq) : INFINITY) : NAN;
        (*v)[(*nv)++] = (an_qpoint){x->step, x->layer, x->kind, (float)db,
                                    finite ? (float)((double)x->flushed / (double)finite) : NAN,
                                    finite ? (float)((double)x->saturated / (double)finite) : NAN};
    }
    return 0;
}

int an_read_quant(const an_run *r, int col, an_qpoint **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (!an_whatif_is_quant(r, col))
        return 0;
    ampdiag_trace_reader *rd = NULL;
    int rc = ampdiag_trace_open(r->path, AMPDIAG_TRACE_READ_QUIET, &rd);
    if (rc)
        return an_load_fail(err, errlen, rc, r->path, "open");
    ampdiag_trace_counts cnt;
    ampdiag_trace_get_counts(rd, &cnt);
    size_t cap = 0;
    enum { BATCH = 4096 };
    for (size_t first = 0; !rc && first < cnt.quants; first += BATCH) {
        ampdiag_trace_quant *q;
        size_t got;
        if ((rc = ampdiag_trace_read_quant(rd, first, BATCH, &q, &got)))
            break;
        if (points_of(r, &r->wcol[col], q, got, out, n, &cap))
            rc = AMPDIAG_TRACE_ENOMEM;
        free(q);
        if (got == 0)
            break;
    }
    if (rc) {
        an_load_fail(err, errlen, rc, r->path, "/quant");
        free(*out);
        *out = NULL;
        *n = 0;
    }
    ampdiag_trace_reader_close(rd);
    return rc;
}
