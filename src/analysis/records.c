/*
 * records.c - the loader's pass over the per-layer records (load_internal.h): /tensors into
 * the cells (with the first non-finite activation, the activation rms series, the update
 * ratios and the chart columns), /whatif into the cells' what-if columns (and, by quant.c,
 * /quant), /histograms
 * (unscaled and summed per cell), and the run's totals over its layers.
 */
#include "analysis/columns.h"
#include "analysis/load_internal.h"
#include "util/sort.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * /tensors
 * ------------------------------------------------------------------------------------------ */

/* A layer's weight and update rms waiting for their pair (the ratio of one step). */
struct pending {
    int64_t wstep, ustep;
    double wrms, urms;
};

typedef VEC(double) doubles;

/* The pass over /tensors: its state besides the run. */
struct an_tensor_pass {
    unsigned keep;          /* an_options.keep_points */
    int rms_series;         /* keep the activation rms series */
    int v1_fp8[2];          /* the E4M3 / E5M2 columns /tensors' v1 fields count into, or -1 */
    struct pending *pend;   /* [nlayers] weight and update rms waiting for their pair */
    doubles *rat;           /* [nlayers] update / weight rms ratios */
    int oom;
};

static void pair_ratio(struct pending *p, doubles *r, int *oom)
{
    if (p->wstep == p->ustep && p->wstep >= 0) {
        if (p->wrms > 0 && isfinite(p->wrms) && isfinite(p->urms) && vec_push(r, p->urms / p->wrms))
            *oom = 1;
        p->wstep = p->ustep = -1;
    }
}

/* What one record adds beyond its cell: the first non-finite activation, the rms series, the
 * update ratios, the chart columns. */
static void record_add(an_run *r, an_tensor_pass *tp, const ampdiag_trace_tensor *x)
{
    an_layer *L = &r->layers[x->layer];
    uint64_t nonfin = x->n_nan + x->n_posinf + x->n_neginf;
    r->nan_values += x->n_nan;
    int grew = 0;
    if ((tp->keep & (1u << x->kind)) && an_columns_add(r, &L->pts[x->kind], x, tp->v1_fp8, &grew))
        tp->oom = 1;
    if (grew)
        an_columns_widen(r, tp->keep);
    struct pending *p = &tp->pend[x->layer];
    switch (x->kind) {
    case AMPDIAG_KIND_ACTIVATION:
        if (nonfin && (r->fwd_nonfinite_step < 0 || x->step < r->fwd_nonfinite_step ||
                       (x->step == r->fwd_nonfinite_step && x->layer < r->fwd_nonfinite_layer))) {
            r->fwd_nonfinite_step = x->step;
            r->fwd_nonfinite_layer = x->layer;
        }
        if (tp->rms_series && isfinite(x->rms) &&
            vec_push(&L->act_rms, ((an_sample){x->step, x->rms})))
            tp->oom = 1;
        break;
    case AMPDIAG_KIND_WEIGHT:
        r->weight_nonfinite += nonfin;
        p->wstep = x->step;
        p->wrms = x->rms;
        pair_ratio(p, &tp->rat[x->layer], &tp->oom);
        break;
    case AMPDIAG_KIND_UPDATE:
        p->ustep = x->step;
        p->urms = x->rms;
        pair_ratio(p, &tp->rat[x->layer], &tp->oom);
        break;
    default:
        break;
    }
}

/* One record into the pass: its cell and what record_add keeps; a row naming an unknown layer
 * or kind counts as bad. 0 or -1 (out of memory). */
int an_tensor_pass_add(an_run *r, an_tensor_pass *tp, const ampdiag_trace_tensor *x)
{
    if (x->layer < 0 || (size_t)x->layer >= r->nlayers || x->kind < 0 || x->kind >= AMPDIAG_NKINDS) {
        r->bad_rows++;
        return 0;
    }
    int grad = x->kind == AMPDIAG_KIND_ACTIVATION_GRAD || x->kind == AMPDIAG_KIND_WEIGHT_GRAD;
    an_cell_add(&r->layers[x->layer].cell[x->kind], x, grad ? an_scale_at(r, x->step) : 1.0, tp->v1_fp8);
    record_add(r, tp, x);
    return tp->oom ? -1 : 0;
}

/* Read /tensors in batches, each row once. 0 or an AMPDIAG_TRACE_ error. */
static int tensor_batches(ampdiag_trace_reader *rd, an_run *r, an_tensor_pass *tp)
{
    enum { BATCH = 8192 };
    size_t ntensors = r->counts.tensors;
    for (size_t first = 0; first < ntensors; first += BATCH) {
        ampdiag_trace_tensor *t;
        size_t n;
        int rc = ampdiag_trace_read_tensors(rd, first, BATCH, &t, &n);
        if (rc)
            return rc;
        for (size_t i = 0; i < n; i++)
            an_tensor_pass_add(r, tp, &t[i]);
        free(t);
        if (tp->oom)
            return AMPDIAG_TRACE_ENOMEM;
        if (n == 0)
            break;
    }
    return 0;
}

/* A column of a format of the library's table under a scaling, from /tensors or /whatif. */
static int lib_column(an_run *r, ampdiag_format f, int scaling, int source, int32_t trace_index)
{
    const ampdiag_format_info *fi = ampdiag_format_get(f);
    an_whatif_key key = {scaling, 0, 0, 0, 0};
    return an_whatif_column(r, fi->name, (int)f, &key, source, trace_index, fi->max_finite,
                            fi->min_normal, fi->min_subnormal);
}

/* The columns every trace's /tensors holds (FP16, BF16: columns 0 and 1) and, in a version 1
 * trace whose /tensors has them, the unscaled E4M3 and E5M2 counts. */
static void tensor_columns(ampdiag_trace_reader *rd, an_run *r, int v1_fp8[2])
{
    lib_column(r, AMPDIAG_FP16, AMPDIAG_SCALING_NONE, AN_WS_TENSORS, -1);
    lib_column(r, AMPDIAG_BF16, AMPDIAG_SCALING_NONE, AN_WS_TENSORS, -1);
    v1_fp8[0] = v1_fp8[1] = -1;
    if (ampdiag_trace_has_field(rd, "/tensors", "e4m3_overflow") &&
        ampdiag_trace_has_field(rd, "/tensors", "e5m2_subnormal")) {
        v1_fp8[0] = lib_column(r, AMPDIAG_E4M3, AMPDIAG_SCALING_NONE, AN_WS_TENSORS, -1);
        v1_fp8[1] = lib_column(r, AMPDIAG_E5M2, AMPDIAG_SCALING_NONE, AN_WS_TENSORS, -1);
    }
}

an_tensor_pass *an_tensor_pass_begin(ampdiag_trace_reader *rd, an_run *r, const an_options *opt)
{
    an_tensor_pass *tp = calloc(1, sizeof *tp);
    if (!tp)
        return NULL;
    tp->keep = opt ? opt->keep_points : 0;
    tp->rms_series = !(opt && opt->no_rms_series);
    tensor_columns(rd, r, tp->v1_fp8);
    tp->pend = malloc((r->nlayers ? r->nlayers : 1) * sizeof *tp->pend);
    tp->rat = calloc(r->nlayers ? r->nlayers : 1, sizeof *tp->rat);
    r->env_width = 1;
    if (!tp->pend || !tp->rat) {
        free(tp->pend);
        free(tp->rat);
        free(tp);
        return NULL;
    }
    for (size_t l = 0; l < r->nlayers; l++)
        tp->pend[l].wstep = tp->pend[l].ustep = -1;
    return tp;
}

int an_tensor_pass_end(an_run *r, an_tensor_pass *tp, int keep)
{
    if (!tp)
        return 0;
    int oom = tp->oom;
    for (size_t l = 0; l < r->nlayers; l++) {
        if (keep && !oom) {
            r->layers[l].ratio_n = tp->rat[l].n;
            r->layers[l].ratio_median = median_doubles(tp->rat[l].v, tp->rat[l].n);
        }
        vec_free(&tp->rat[l]);
    }
    free(tp->rat);
    free(tp->pend);
    free(tp);
    return oom ? -1 : 0;
}

static int load_tensors(ampdiag_trace_reader *rd, an_run *r, const an_options *opt)
{
    an_tensor_pass *tp = an_tensor_pass_begin(rd, r, opt);
    if (!tp)
        return AMPDIAG_TRACE_ENOMEM;
    int rc = tensor_batches(rd, r, tp);
    int e = an_tensor_pass_end(r, tp, rc == 0);
    return rc ? rc : e ? AMPDIAG_TRACE_ENOMEM : 0;
}

/* ------------------------------------------------------------------------------------------
 * /whatif (version 2): every row into the column of its (format, scaling)
 * ------------------------------------------------------------------------------------------ */

/* The /formats rows (NULL, 0 without the table). */
static int read_formats(ampdiag_trace_reader *rd, ampdiag_trace_format **fm, size_t *n)
{
    *fm = NULL;
    *n = 0;
    return ampdiag_trace_read_formats(rd, fm, n);
}

/* The column of a /whatif row: its format (by /formats index) and scaling; -1 for a row this
 * version cannot place, or a column beyond AN_MAX_WHATIF. */
static int row_column(an_run *r, const ampdiag_trace_whatif *x, const ampdiag_trace_format *fm,
                      size_t nfm)
{
    if (x->layer < 0 || (size_t)x->layer >= r->nlayers || x->kind < 0 || x->kind >= AMPDIAG_NKINDS ||
        x->scaling < 0 || x->scaling >= AMPDIAG_NSCALINGS)
        return -1;
    const ampdiag_trace_format *f = NULL;
    for (size_t i = 0; i < nfm && !f; i++)
        if (fm[i].index == x->format)
            f = &fm[i];
    if (!f)
        return -1;
    ampdiag_format lib;
    int known = ampdiag_format_lookup(f->name, &lib) == 0;
    an_whatif_key key = {x->scaling, 0, 0, 0, 0};
    int col = an_whatif_column(r, f->name, known ? (int)lib : -1, &key, AN_WS_WHATIF, f->index,
                               f->max_finite, f->min_normal, f->min_subnormal);
    if (col < 0)
        r->whatif_dropped++;
    /* counted from /tensors already (a version 1 trace's FP8 fields) */
    return col >= 0 && r->wcol[col].source == AN_WS_TENSORS ? -1 : col;
}

/* A row's layer in the run: lm->map[layer] (-1: none) where a map is given. */
static int32_t mapped(const an_layer_map *lm, int32_t layer)
{
    if (!lm || !lm->map)
        return layer;
    return layer >= 0 && (size_t)layer < lm->n ? lm->map[layer] : -1;
}

int an_load_whatif(ampdiag_trace_reader *rd, an_run *r, const an_layer_map *lm)
{
    int64_t h = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_FP8_AMAX_HISTORY, -1),
            m = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_FP8_MARGIN, 0);
    r->fp8_history = h >= 0 && h <= INT_MAX ? (int)h : -1;
    r->fp8_margin = m >= INT_MIN && m <= INT_MAX ? (int)m : 0;
    ampdiag_trace_counts cnt;
    ampdiag_trace_get_counts(rd, &cnt);
    if (cnt.whatifs == 0)
        return 0;
    ampdiag_trace_format *fm;
    size_t nfm;
    int rc = read_formats(rd, &fm, &nfm);
    enum { BATCH = 16384 }; /* rows a read: 0.9 MB of records */
    for (size_t first = 0; !rc && first < cnt.whatifs; first += BATCH) {
        ampdiag_trace_whatif *w;
        size_t n;
        if ((rc = ampdiag_trace_read_whatif(rd, first, BATCH, &w, &n)))
            break;
        for (size_t i = 0; i < n; i++) {
            w[i].layer = mapped(lm, w[i].layer);
            if (lm && w[i].kind >= 0 && w[i].kind < AMPDIAG_NKINDS && !(lm->kinds & (1u << w[i].kind)))
                continue;
            int col = row_column(r, &w[i], fm, nfm);
            if (col < 0)
                continue;
            an_cell *c = &r->layers[w[i].layer].cell[w[i].kind];
            if (w[i].count)
                an_columns_whatif(r, &r->layers[w[i].layer].pts[w[i].kind], w[i].step, col,
                                  (double)w[i].underflow / (double)w[i].count,
                                  (double)w[i].overflow / (double)w[i].count);
            c->wi[col][AMPDIAG_WHATIF_OVERFLOW] += w[i].overflow;
            c->wi[col][AMPDIAG_WHATIF_UNDERFLOW] += w[i].underflow;
            c->wi[col][AMPDIAG_WHATIF_SUBNORMAL] += w[i].subnormal;
            c->wi_values[col] += w[i].count;
        }
        free(w);
        if (n == 0)
            break;
    }
    free(fm);
    return rc;
}

/* The columns in a fixed order whatever order the rows came in: by scaling, then the
 * library's formats in table order, then the trace's own formats by name; the /quant columns
 * last, by scheme, element format, rule, direction and block; the cells' counts follow. FP16 and BF16 stay columns 0 and 1. */
static int col_before(const an_whatif_col *a, const an_whatif_col *b)
{
    int qa = a->source == AN_WS_QUANT, qb = b->source == AN_WS_QUANT;
    if (qa != qb) /* the /quant columns after the others, by scheme first */
        return qb;
    if (qa && a->key.scheme != b->key.scheme)
        return a->key.scheme < b->key.scheme;
    if (a->key.scaling != b->key.scaling)
        return a->key.scaling < b->key.scaling;
    int la = a->lib_format < 0 ? AMPDIAG_NFORMATS : a->lib_format;
    int lb = b->lib_format < 0 ? AMPDIAG_NFORMATS : b->lib_format;
    if (la != lb)
        return la < lb;
    int c = strcmp(a->format, b->format);
    if (c)
        return c < 0;
    if (a->key.scheme != b->key.scheme)
        return a->key.scheme < b->key.scheme;
    if (a->key.rule != b->key.rule)
        return a->key.rule < b->key.rule;
    if (a->key.direction != b->key.direction)
        return a->key.direction < b->key.direction;
    return a->key.block < b->key.block;
}

static void permute_cell(an_cell *c, const int *from, int n)
{
    uint64_t wi[AN_MAX_WHATIF][AMPDIAG_WHATIF_NCLASSES], wv[AN_MAX_WHATIF];
    memcpy(wi, c->wi, sizeof wi);
    memcpy(wv, c->wi_values, sizeof wv);
    for (int i = 0; i < n; i++) {
        memcpy(c->wi[i], wi[from[i]], sizeof c->wi[i]);
        c->wi_values[i] = wv[from[i]];
    }
    if (c->q) {
        an_qcell q[AN_MAX_WHATIF];
        memcpy(q, c->q, sizeof q);
        for (int i = 0; i < n; i++)
            c->q[i] = q[from[i]];
    }
}

void an_sort_columns(an_run *r)
{
    int from[AN_MAX_WHATIF];
    an_whatif_col cols[AN_MAX_WHATIF];
    int n = r->nwcol;
    for (int i = 0; i < n; i++)
        from[i] = i;
    for (int i = 1; i < n; i++) /* insertion sort: a handful of columns */
        for (int j = i; j > 0 && col_before(&r->wcol[from[j]], &r->wcol[from[j - 1]]); j--) {
            int t = from[j];
            from[j] = from[j - 1];
            from[j - 1] = t;
        }
    for (int i = 0; i < n; i++)
        cols[i] = r->wcol[from[i]];
    memcpy(r->wcol, cols, (size_t)n * sizeof *cols);
    for (size_t l = 0; l < r->nlayers; l++)
        for (int k = 0; k < AMPDIAG_NKINDS; k++) {
            permute_cell(&r->layers[l].cell[k], from, n);
            an_columns_permute(&r->layers[l].pts[k], from, n);
        }
}

/* ------------------------------------------------------------------------------------------
 * /histograms: gradients, unscaled (shifted by the step's loss scale, rounded to a power of
 * two), summed per (layer, kind). A trace with very many histogram rows is sampled in evenly
 * spaced blocks: the rule that uses them asks for fractions, not totals. With keep, the
 * distinct steps of the rows read are kept (the charts draw a few).
 * ------------------------------------------------------------------------------------------ */

#define HIST_BLOCK 4096
#define HIST_CAP (8 * HIST_BLOCK)
#define HIST_READ 512

/* A histogram row's step into the distinct steps (ascending; rows usually come in order). */
static int hist_step_add(an_run *r, int64_t s)
{
    size_t k = r->hist_steps.n, j = 0;
    const int64_t *h = r->hist_steps.v;
    if (k && h[k - 1] == s)
        return 0;
    if (k && h[k - 1] < s)
        j = k;
    else
        while (j < k && h[j] < s)
            j++;
    if (j < k && h[j] == s)
        return 0;
    return vec_insert(&r->hist_steps, j, s);
}

static int hist_add(an_run *r, const ampdiag_trace_hist *x)
{
    if (x->layer < 0 || (size_t)x->layer >= r->nlayers ||
        (x->kind != AMPDIAG_KIND_ACTIVATION_GRAD && x->kind != AMPDIAG_KIND_WEIGHT_GRAD))
        return 0;
    an_cell *c = &r->layers[x->layer].cell[x->kind];
    if (!c->hist && !(c->hist = calloc(AMPDIAG_HIST_BINS, sizeof *c->hist)))
        return -1;
    int shift = (int)lround(log2(an_scale_at(r, x->step)));
    for (int k = 0; k < AMPDIAG_HIST_NEXP; k++) {
        if (!x->bin[k])
            continue;
        int d = k - shift;
        if (d < 0)
            d = 0;
        if (d >= AMPDIAG_HIST_NEXP)
            d = AMPDIAG_HIST_NEXP - 1;
        c->hist[d] += x->bin[k];
    }
    for (int k = AMPDIAG_HIST_NEXP; k < AMPDIAG_HIST_BINS; k++)
        c->hist[k] += x->bin[k];
    c->hist_records++;
    return 0;
}

/* Rows [first, first + HIST_BLOCK) of /histograms (fewer at its end) added, read HIST_READ at a
 * time (a histogram row is 2.3 KB). 0 or an AMPDIAG_TRACE_ error; *got: the rows read. */
static int hist_block(ampdiag_trace_reader *rd, an_run *r, size_t first, int keep, const an_layer_map *lm,
                      size_t *got)
{
    *got = 0;
    for (size_t at = 0; at < HIST_BLOCK; at += HIST_READ) {
        ampdiag_trace_hist *h;
        size_t n;
        int rc = ampdiag_trace_read_hists(rd, first + at, HIST_READ, &h, &n);
        if (rc)
            return rc;
        *got += n;
        for (size_t i = 0; i < n; i++) {
            h[i].layer = mapped(lm, h[i].layer);
            if (lm && h[i].kind >= 0 && h[i].kind < AMPDIAG_NKINDS && !(lm->kinds & (1u << h[i].kind)))
                continue;
            if (hist_add(r, &h[i]) || (keep && hist_step_add(r, h[i].step))) {
                free(h);
                return AMPDIAG_TRACE_ENOMEM;
            }
        }
        free(h);
        if (n < HIST_READ)
            break;
    }
    return 0;
}

int an_load_hists(ampdiag_trace_reader *rd, an_run *r, int keep, const an_layer_map *lm)
{
    ampdiag_trace_counts cnt;
    ampdiag_trace_get_counts(rd, &cnt);
    size_t nh = cnt.hists;
    r->hist_rows += nh;
    size_t nblocks = (nh + HIST_BLOCK - 1) / HIST_BLOCK;
    size_t want = nh <= HIST_CAP ? nblocks : HIST_CAP / HIST_BLOCK;
    for (size_t b = 0; b < want; b++) {
        size_t first = nh <= HIST_CAP ? b * HIST_BLOCK
                                      : (size_t)((double)b * (double)(nh - HIST_BLOCK) / (double)(want - 1));
        size_t n;
        int rc = hist_block(rd, r, first, keep, lm, &n);
        if (rc)
            return rc;
        r->hist_rows_read += n;
        if (n == 0)
            break;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */

/* The run's totals over its layers: lost updates, non-zero updates, the median of the layers'
 * update ratios (norms apart). 0 or -1 (out of memory). */
int an_layer_totals(an_run *r)
{
    double *tmp = malloc((r->nlayers ? r->nlayers : 1) * sizeof *tmp);
    if (!tmp)
        return -1;
    size_t k = 0;
    for (size_t l = 0; l < r->nlayers; l++) {
        an_layer *ly = &r->layers[l];
        const an_cell *u = &ly->cell[AMPDIAG_KIND_UPDATE];
        r->lost += u->lost;
        r->lost_if[0] += u->lost_if[0];
        r->lost_if[1] += u->lost_if[1];
        r->update_nonzero += u->count - u->zero - u->nan - u->posinf - u->neginf;
        if (ly->ratio_n && !strstr(ly->op, "norm") && isfinite(ly->ratio_median))
            tmp[k++] = ly->ratio_median;
    }
    r->ratio_median = median_doubles(tmp, k);
    free(tmp);
    /* all-zero counts cannot be told from a writer that did not compute them */
    r->have_lost_if = r->lost_if_fields && r->lost_if[0] + r->lost_if[1] > 0;
    return 0;
}

int an_load_records(ampdiag_trace_reader *rd, an_run *r, const an_options *opt, char *err,
                    size_t errlen)
{
    unsigned keep = opt ? opt->keep_points : 0;
    int rc;
    if ((rc = load_tensors(rd, r, opt)))
        return an_load_fail(err, errlen, rc, r->path, "tensor records");
    if ((rc = an_load_whatif(rd, r, NULL)))
        return an_load_fail(err, errlen, rc, r->path, "/whatif");
    if ((rc = an_load_quant(rd, r)))
        return an_load_fail(err, errlen, rc, r->path, "/quant");
    an_sort_columns(r);
    if (an_quant_refs(r))
        return an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, r->path, "/quant");
    if ((rc = an_load_hists(rd, r, keep != 0, NULL)))
        return an_load_fail(err, errlen, rc, r->path, "histograms");
    if (an_layer_totals(r))
        return an_load_fail(err, errlen, AMPDIAG_TRACE_ENOMEM, r->path, "layers");
    return 0;
}
