/*
 * analyze.c - one pass over a trace into the summary the rules need (an_load), and the
 * comparison of runs with a baseline (an_compare). The tables are read in ranges; every
 * per-step computation is linear or n log n, so a 100k-step trace reads in about a second.
 * The quantities and their definitions are listed in docs/recommendations.md.
 */
#include "analysis/analyze.h"
#include "analysis/findings.h"
#include "analysis/fp8.h"
#include "monitor/monitor.h"
#include "util/sort.h"
#include "util/vec.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

double an_hist_fp16_flushed_norm(const uint64_t *hist, int shift)
{
    /* each bin's values weighed by the square of its geometric centre, 2^(e + 1/2); relative
     * to the largest bin so that no power of two overflows */
    int top = -1;
    for (int b = AMPDIAG_HIST_NEXP - 1; b >= 0 && top < 0; b--)
        if (hist[b])
            top = b;
    if (top < 0)
        return 0;
    double all = 0, fl = 0;
    for (int b = 0; b <= top; b++) {
        if (!hist[b])
            continue;
        double w = (double)hist[b] * ldexp(1.0, 2 * (b - top));
        all += w;
        if (b + AMPDIAG_HIST_EMIN + shift <= -26)
            fl += w;
    }
    return all > 0 ? fl / all : 0;
}

void an_hist_fp16_at_scale(const uint64_t *hist, int shift, double *flushed, double *subnormal,
                           uint64_t *nonzero)
{
    uint64_t nz = 0, fl = 0, sub = 0;
    for (int b = 0; b < AMPDIAG_HIST_NEXP; b++) {
        uint64_t c = hist[b];
        if (!c)
            continue;
        int e = b + AMPDIAG_HIST_EMIN + shift; /* magnitudes in [2^e, 2^(e+1)) after scaling */
        nz += c;
        if (e <= -26)
            fl += c; /* at most 2^-25: rounds to zero */
        else if (e <= -15)
            sub += c; /* below 2^-14: an FP16 subnormal */
    }
    if (flushed)
        *flushed = nz ? (double)fl / (double)nz : 0;
    if (subnormal)
        *subnormal = nz ? (double)sub / (double)nz : 0;
    if (nonzero)
        *nonzero = nz;
}

double an_hist_quantile_log2(const uint64_t *hist, double p)
{
    uint64_t tot = 0;
    for (int b = 0; b < AMPDIAG_HIST_NEXP; b++)
        tot += hist[b];
    if (!tot)
        return NAN;
    double want = p * (double)tot;
    uint64_t cum = 0;
    for (int b = 0; b < AMPDIAG_HIST_NEXP; b++) {
        cum += hist[b];
        if ((double)cum >= want && hist[b])
            return (double)(b + AMPDIAG_HIST_EMIN);
    }
    return (double)(AMPDIAG_HIST_EMAX);
}

const char *an_layer_name(const an_run *r, int layer)
{
    if (layer < 0)
        return "(global)";
    if ((size_t)layer < r->nlayers)
        return r->layers[layer].name;
    return "?";
}

/* ------------------------------------------------------------------------------------------
 * Attributes
 * ------------------------------------------------------------------------------------------ */

static void copy_attr(ampdiag_trace_reader *r, const char *name, char *dst, size_t n)
{
    const char *s = ampdiag_trace_attr_str(r, name);
    snprintf(dst, n, "%s", s ? s : "");
}

/* The number after "key=" in a "k1=v1 k2=v2" attribute; dflt when absent. */
static double kv_double(const char *s, const char *key, double dflt)
{
    size_t kl = strlen(key);
    for (const char *p = s; p && *p;) {
        while (*p == ' ')
            p++;
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            char *end;
            double v = strtod(p + kl + 1, &end);
            return end == p + kl + 1 ? dflt : v;
        }
        p = strchr(p, ' ');
    }
    return dflt;
}

static void kv_str(const char *s, const char *key, char *dst, size_t n)
{
    size_t kl = strlen(key);
    dst[0] = 0;
    for (const char *p = s; p && *p;) {
        while (*p == ' ')
            p++;
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t len = strcspn(v, " ");
            if (len >= n)
                len = n - 1;
            memcpy(dst, v, len);
            dst[len] = 0;
            return;
        }
        p = strchr(p, ' ');
    }
}

/* A setting from its typed attribute, else from key=value text (older traces), else dflt. */
static double typed_or_kv(ampdiag_trace_reader *rd, const char *attr, const char *kv, const char *key,
                          double dflt)
{
    const ampdiag_trace_attr *a = ampdiag_trace_attr_find(rd, attr);
    if (a && (a->type == AMPDIAG_ATTR_DOUBLE || a->type == AMPDIAG_ATTR_INT))
        return a->d;
    return kv_double(kv, key, dflt);
}

static int is_fp32_op(const char *op)
{
    return strstr(op, "_ce") || strstr(op, "loss") || strstr(op, "cross_entropy");
}

/* A layer that a mixed-precision run (fp16, bf16: 16-bit compute, FP32 weights) recorded as
 * computing in FP32: an op autocast keeps in FP32 (traces/FORMAT.md, /layers compute). */
static int kept_fp32(const an_run *r, const char *compute)
{
    return strcmp(compute, "fp32") == 0 &&
           (strcmp(r->precision, "fp16") == 0 || strcmp(r->precision, "bf16") == 0);
}

static int in_list(const char *list, const char *name)
{
    char item[AMPDIAG_TRACE_NAME_LEN * 2];
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len && len < sizeof item) {
            memcpy(item, p, len);
            item[len] = 0;
            if (strcmp(item, name) == 0 || fnmatch(item, name, 0) == 0)
                return 1;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------------ */

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

static int series_push(an_series *s, int64_t step, double v)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 64;
        int64_t *ns = realloc(s->step, nc * sizeof *ns);
        if (!ns)
            return -1;
        s->step = ns;
        double *nv = realloc(s->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        s->v = nv;
        s->cap = nc;
    }
    s->step[s->n] = step;
    s->v[s->n] = v;
    s->n++;
    return 0;
}

static void series_free(an_series *s)
{
    free(s->step);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* First index in the run's (sorted) step table whose step is not below `step`. */
static size_t step_lower_bound(const an_run *r, int64_t step)
{
    size_t lo = 0, hi = r->nsteps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->st_step[mid] < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Index of a step in the run's step table, or -1. */
static long step_index(const an_run *r, int64_t step)
{
    if (r->nsteps == 0)
        return -1;
    int64_t off = step - r->st_step[0];
    if (off >= 0 && (uint64_t)off < r->nsteps && r->st_step[off] == step)
        return (long)off;
    size_t lo = step_lower_bound(r, step);
    return lo < r->nsteps && r->st_step[lo] == step ? (long)lo : -1;
}

struct pending {
    int64_t wstep, ustep;
    double wrms, urms;
};

struct ratios {
    double *v;
    size_t n, cap;
};

static int ratio_push(struct ratios *r, double v)
{
    if (r->n == r->cap) {
        size_t nc = r->cap ? 2 * r->cap : 64;
        double *nv = realloc(r->v, nc * sizeof *nv);
        if (!nv)
            return -1;
        r->v = nv;
        r->cap = nc;
    }
    r->v[r->n++] = v;
    return 0;
}

static void pair_ratio(struct pending *p, struct ratios *r, int *oom)
{
    if (p->wstep == p->ustep && p->wstep >= 0) {
        if (p->wrms > 0 && isfinite(p->wrms) && isfinite(p->urms) && ratio_push(r, p->urms / p->wrms))
            *oom = 1;
        p->wstep = p->ustep = -1;
    }
}

static int fail(char *err, size_t errlen, int rc, const char *path, const char *what)
{
    if (rc == AMPDIAG_TRACE_ENOMEM)
        snprintf(err, errlen, "out of memory reading '%s' (%s)", path, what);
    else
        snprintf(err, errlen, "%s", ampdiag_trace_errmsg());
    return rc;
}

/* The loss scale a step ran with; a step missing from /steps takes the last one before it. */
static double scale_at(const an_run *r, const an_step *steps, int64_t step)
{
    long i = step_index(r, step);
    if (i < 0) {
        size_t lb = step_lower_bound(r, step);
        i = lb > 0 ? (long)lb - 1 : -1;
    }
    double s = i >= 0 ? steps[i].loss_scale : 1.0;
    if (r->grads_unscaled)
        return 1.0;
    return isfinite(s) && s > 0 ? s : 1.0;
}

/* ------------------------------------------------------------------------------------------
 * Chart columns (an_points): the records a chart needs, in memory that does not grow with steps
 * ------------------------------------------------------------------------------------------ */

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t column_key(const an_run *r, int64_t step)
{
    return floor_div(step - r->env_origin, r->env_width);
}

/* 1 when b should take a's place in the role (ties keep the earlier record). */
static int role_better(int role, const an_point *a, const an_point *b)
{
    switch (role) {
    case AN_ROLE_ABSMAX_HI: return !isnan(b->absmax) && (isnan(a->absmax) || b->absmax > a->absmax);
    case AN_ROLE_ABSMAX_LO: return !isnan(b->absmax) && (isnan(a->absmax) || b->absmax < a->absmax);
    case AN_ROLE_ABSMIN_HI:
        return !isnan(b->absmin_nz) && (isnan(a->absmin_nz) || b->absmin_nz > a->absmin_nz);
    case AN_ROLE_ABSMIN_LO:
        return !isnan(b->absmin_nz) && (isnan(a->absmin_nz) || b->absmin_nz < a->absmin_nz);
    case AN_ROLE_UNDER: return !isnan(b->under) && (isnan(a->under) || b->under > a->under);
    case AN_ROLE_OVER: return !isnan(b->over) && (isnan(a->over) || b->over > a->over);
    case AN_ROLE_NONFINITE:
        return !isnan(b->nonfinite) && (isnan(a->nonfinite) || b->nonfinite > a->nonfinite);
    default: return b->step >= a->step; /* AN_ROLE_LAST */
    }
}

static void column_merge(an_column *dst, const an_column *src)
{
    for (int k = 0; k < AN_NROLES; k++)
        if (role_better(k, &dst->role[k], &src->role[k]))
            dst->role[k] = src->role[k];
    dst->records += src->records;
}

/* Merge neighbouring columns that fall into one column of the run's (new, wider) grid. */
static void columns_regrid(const an_run *r, an_points *ps)
{
    size_t k = 0;
    for (size_t i = 0; i < ps->n; i++) {
        if (k && column_key(r, ps->c[k - 1].role[0].step) == column_key(r, ps->c[i].role[0].step))
            column_merge(&ps->c[k - 1], &ps->c[i]);
        else
            ps->c[k++] = ps->c[i];
    }
    ps->n = k;
}

/* Double the run's column width until every kept kind has at most AN_ENV_COLS columns. */
static void columns_widen(an_run *r, unsigned keep)
{
    for (;;) {
        size_t most = 0;
        for (size_t l = 0; l < r->nlayers; l++)
            for (int k = 0; k < AMPDIAG_NKINDS; k++)
                if (r->layers[l].pts[k].n > most)
                    most = r->layers[l].pts[k].n;
        if (most <= AN_ENV_COLS)
            return;
        r->env_width *= 2;
        for (size_t l = 0; l < r->nlayers; l++)
            for (int k = 0; k < AMPDIAG_NKINDS; k++)
                if (keep & (1u << k))
                    columns_regrid(r, &r->layers[l].pts[k]);
    }
}

static void point_of(const ampdiag_trace_tensor *t, an_point *pt)
{
    double n = (double)t->count;
    uint64_t nf = t->n_nan + t->n_posinf + t->n_neginf;
    pt->step = t->step;
    pt->absmax = isfinite(t->absmax) && t->absmax > 0 ? (float)t->absmax : NAN;
    pt->absmin_nz = isfinite(t->absmin_nz) && t->absmin_nz > 0 ? (float)t->absmin_nz : NAN;
    pt->under = t->count ? (float)((double)t->fp16_underflow / n) : NAN;
    pt->over = t->count ? (float)((double)(t->fp16_overflow + nf) / n) : NAN;
    pt->nonfinite = t->count ? (float)((double)nf / n) : NAN;
}

/* The record into its column: merged into it, or a new column in step order. *grew is set when
 * the column count passed AN_ENV_COLS (the caller widens the grid). */
static int keep_point(an_run *r, an_points *ps, const ampdiag_trace_tensor *t, int *grew)
{
    an_column one;
    for (int k = 0; k < AN_NROLES; k++)
        point_of(t, &one.role[k]);
    one.records = 1;
    if (r->rec_step_min > r->rec_step_max) /* the first record: the grid starts at its step */
        r->env_origin = t->step;
    if (t->step < r->rec_step_min)
        r->rec_step_min = t->step;
    if (t->step > r->rec_step_max)
        r->rec_step_max = t->step;
    int64_t key = column_key(r, t->step);
    size_t i = ps->n; /* where the column is or goes: usually at the end */
    while (i > 0 && column_key(r, ps->c[i - 1].role[0].step) > key)
        i--;
    if (i > 0 && column_key(r, ps->c[i - 1].role[0].step) == key) {
        column_merge(&ps->c[i - 1], &one);
        return 0;
    }
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 256;
        an_column *q = realloc(ps->c, cap * sizeof *q);
        if (!q)
            return -1;
        ps->c = q;
        ps->cap = cap;
    }
    memmove(ps->c + i + 1, ps->c + i, (ps->n - i) * sizeof *ps->c);
    ps->c[i] = one;
    if (++ps->n > AN_ENV_COLS)
        *grew = 1;
    return 0;
}

/* One record's counts and extremes into its cell (sc: the loss scale that divides gradient
 * magnitudes). */
static void cell_add(an_cell *c, const ampdiag_trace_tensor *x, double sc)
{
    uint64_t nonfin = x->n_nan + x->n_posinf + x->n_neginf;
    if (c->records++ == 0) {
        c->first_count = x->count;
        c->first_zero = x->n_zero;
    }
    c->count += x->count;
    c->zero += x->n_zero;
    c->nan += x->n_nan;
    c->posinf += x->n_posinf;
    c->neginf += x->n_neginf;
    c->f16o += x->fp16_overflow;
    c->f16u += x->fp16_underflow;
    c->f16s += x->fp16_subnormal;
    c->b16o += x->bf16_overflow;
    c->b16u += x->bf16_underflow;
    c->b16s += x->bf16_subnormal;
    c->f8[0][AMPDIAG_WHATIF_OVERFLOW] += x->e4m3_overflow;
    c->f8[0][AMPDIAG_WHATIF_UNDERFLOW] += x->e4m3_underflow;
    c->f8[0][AMPDIAG_WHATIF_SUBNORMAL] += x->e4m3_subnormal;
    c->f8[1][AMPDIAG_WHATIF_OVERFLOW] += x->e5m2_overflow;
    c->f8[1][AMPDIAG_WHATIF_UNDERFLOW] += x->e5m2_underflow;
    c->f8[1][AMPDIAG_WHATIF_SUBNORMAL] += x->e5m2_subnormal;
    c->lost += x->lost_updates;
    c->lost_if16 += x->lost_if_fp16;
    c->lost_ifb16 += x->lost_if_bf16;
    if (nonfin && c->first_nonfinite_step < 0)
        c->first_nonfinite_step = x->step;
    if (x->fp16_overflow && c->first_f16o_step < 0)
        c->first_f16o_step = x->step;
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

/* The pass over /tensors: its state besides the run. */
struct tensor_pass {
    const an_step *steps;
    unsigned keep;          /* an_options.keep_points */
    int rms_series;         /* keep the activation rms series */
    struct pending *pend;   /* [nlayers] weight and update rms waiting for their pair */
    struct ratios *rat;     /* [nlayers] update / weight rms ratios */
    int oom;
};

/* What one record adds beyond its cell: the first non-finite activation, the rms series, the
 * update ratios, the chart columns. */
static void record_add(an_run *r, struct tensor_pass *tp, const ampdiag_trace_tensor *x)
{
    an_layer *L = &r->layers[x->layer];
    uint64_t nonfin = x->n_nan + x->n_posinf + x->n_neginf;
    r->nan_values += x->n_nan;
    int grew = 0;
    if ((tp->keep & (1u << x->kind)) && keep_point(r, &L->pts[x->kind], x, &grew))
        tp->oom = 1;
    if (grew)
        columns_widen(r, tp->keep);
    struct pending *p = &tp->pend[x->layer];
    switch (x->kind) {
    case AMPDIAG_KIND_ACTIVATION:
        if (nonfin && (r->fwd_nonfinite_step < 0 || x->step < r->fwd_nonfinite_step ||
                       (x->step == r->fwd_nonfinite_step && x->layer < r->fwd_nonfinite_layer))) {
            r->fwd_nonfinite_step = x->step;
            r->fwd_nonfinite_layer = x->layer;
        }
        if (tp->rms_series && isfinite(x->rms) && series_push(&L->act_rms, x->step, x->rms))
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

/* Read /tensors in batches, each row once. 0 or an AMPDIAG_TRACE_ error. */
static int tensor_batches(ampdiag_trace_reader *rd, an_run *r, struct tensor_pass *tp,
                          size_t ntensors)
{
    enum { BATCH = 8192 };
    for (size_t first = 0; first < ntensors; first += BATCH) {
        ampdiag_trace_tensor *t;
        size_t n;
        int rc = ampdiag_trace_read_tensors(rd, first, BATCH, &t, &n);
        if (rc)
            return rc;
        for (size_t i = 0; i < n; i++) {
            const ampdiag_trace_tensor *x = &t[i];
            if (x->layer < 0 || (size_t)x->layer >= r->nlayers || x->kind < 0 ||
                x->kind >= AMPDIAG_NKINDS) {
                r->bad_rows++;
                continue;
            }
            int grad = x->kind == AMPDIAG_KIND_ACTIVATION_GRAD || x->kind == AMPDIAG_KIND_WEIGHT_GRAD;
            cell_add(&r->layers[x->layer].cell[x->kind], x,
                     grad ? scale_at(r, tp->steps, x->step) : 1.0);
            record_add(r, tp, x);
        }
        free(t);
        if (tp->oom)
            return AMPDIAG_TRACE_ENOMEM;
        if (n == 0)
            break;
    }
    return 0;
}

static int load_tensors(ampdiag_trace_reader *rd, an_run *r, const an_step *steps,
                        size_t ntensors, const an_options *opt, char *err, size_t errlen)
{
    struct tensor_pass tp = {.steps = steps, .keep = opt ? opt->keep_points : 0,
                             .rms_series = !(opt && opt->no_rms_series)};
    tp.pend = malloc((r->nlayers ? r->nlayers : 1) * sizeof *tp.pend);
    tp.rat = calloc(r->nlayers ? r->nlayers : 1, sizeof *tp.rat);
    int rc = 0;
    r->env_width = 1;
    if (!tp.pend || !tp.rat) {
        rc = AMPDIAG_TRACE_ENOMEM;
        goto out;
    }
    for (size_t l = 0; l < r->nlayers; l++)
        tp.pend[l].wstep = tp.pend[l].ustep = -1;
    if ((rc = tensor_batches(rd, r, &tp, ntensors)))
        goto out;
    for (size_t l = 0; l < r->nlayers; l++) {
        r->layers[l].ratio_n = tp.rat[l].n;
        r->layers[l].ratio_median = median_doubles(tp.rat[l].v, tp.rat[l].n);
    }
out:
    if (tp.rat)
        for (size_t l = 0; l < r->nlayers; l++)
            free(tp.rat[l].v);
    free(tp.rat);
    free(tp.pend);
    if (rc)
        return fail(err, errlen, rc, r->path, "tensor records");
    return 0;
}

/* A histogram row's step into the distinct steps (ascending; rows usually come in order). */
static int hist_step_add(an_run *r, int64_t s, size_t *cap)
{
    size_t k = r->nhist_steps, j = 0;
    if (k && r->hist_steps[k - 1] == s)
        return 0;
    if (k && r->hist_steps[k - 1] < s)
        j = k;
    else
        while (j < k && r->hist_steps[j] < s)
            j++;
    if (j < k && r->hist_steps[j] == s)
        return 0;
    if (k == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        int64_t *q = realloc(r->hist_steps, nc * sizeof *q);
        if (!q)
            return -1;
        r->hist_steps = q;
        *cap = nc;
    }
    memmove(r->hist_steps + j + 1, r->hist_steps + j, (k - j) * sizeof *r->hist_steps);
    r->hist_steps[j] = s;
    r->nhist_steps++;
    return 0;
}

/* Histograms of gradients, unscaled (shifted by the step's loss scale, rounded to a power of
 * two), summed per (layer, kind). A trace with very many histogram rows is sampled in evenly
 * spaced blocks: the rule that uses them asks for fractions, not totals. With keep, the
 * distinct steps of the rows read are kept (the charts draw a few). */
#define HIST_BLOCK 4096
#define HIST_CAP (8 * HIST_BLOCK)

static int hist_add(an_run *r, const an_step *steps, const ampdiag_trace_hist *x)
{
    if (x->layer < 0 || (size_t)x->layer >= r->nlayers ||
        (x->kind != AMPDIAG_KIND_ACTIVATION_GRAD && x->kind != AMPDIAG_KIND_WEIGHT_GRAD))
        return 0;
    an_cell *c = &r->layers[x->layer].cell[x->kind];
    if (!c->hist && !(c->hist = calloc(AMPDIAG_HIST_BINS, sizeof *c->hist)))
        return -1;
    int shift = (int)lround(log2(scale_at(r, steps, x->step)));
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
#define HIST_READ 512
static int hist_block(ampdiag_trace_reader *rd, an_run *r, const an_step *steps,
                      size_t first, int keep, size_t *cap, size_t *got)
{
    *got = 0;
    for (size_t at = 0; at < HIST_BLOCK; at += HIST_READ) {
        ampdiag_trace_hist *h;
        size_t n;
        int rc = ampdiag_trace_read_hists(rd, first + at, HIST_READ, &h, &n);
        if (rc)
            return rc;
        *got += n;
        for (size_t i = 0; i < n; i++)
            if (hist_add(r, steps, &h[i]) || (keep && hist_step_add(r, h[i].step, cap))) {
                free(h);
                return AMPDIAG_TRACE_ENOMEM;
            }
        free(h);
        if (n < HIST_READ)
            break;
    }
    return 0;
}

static int load_hists(ampdiag_trace_reader *rd, an_run *r, const an_step *steps,
                      size_t nh, int keep, char *err, size_t errlen)
{
    r->hist_rows = nh;
    size_t nblocks = (nh + HIST_BLOCK - 1) / HIST_BLOCK, cap = 0;
    size_t want = nh <= HIST_CAP ? nblocks : HIST_CAP / HIST_BLOCK;
    for (size_t b = 0; b < want; b++) {
        size_t first = nh <= HIST_CAP ? b * HIST_BLOCK
                                      : (size_t)((double)b * (double)(nh - HIST_BLOCK) / (double)(want - 1));
        size_t n;
        int rc = hist_block(rd, r, steps, first, keep, &cap, &n);
        if (rc)
            return fail(err, errlen, rc, r->path, "histograms");
        r->hist_rows_read += n;
        if (n == 0)
            break;
    }
    return 0;
}

/* The histograms a request asks for: one layer, kinds[0..nkinds) at steps[0..nsteps). */
struct hist_req {
    int layer;
    const int *kinds;
    size_t nkinds;
    const int64_t *steps;
    size_t nsteps;
    ampdiag_trace_hist *out;
    int *have;
};

/* The rows of b[0..n) a request asks for into it (a later row of a (kind, step) wins). */
static void hists_take(const struct hist_req *q, const ampdiag_trace_hist *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (b[i].layer != q->layer)
            continue;
        for (size_t k = 0; k < q->nkinds; k++)
            if (b[i].kind == q->kinds[k])
                for (size_t j = 0; j < q->nsteps; j++)
                    if (q->steps[j] == b[i].step) {
                        q->out[k * q->nsteps + j] = b[i];
                        q->have[k * q->nsteps + j] = 1;
                    }
    }
}

/* Every row, read in blocks. */
static int hists_scan(ampdiag_trace_reader *rd, size_t nh, const struct hist_req *q)
{
    for (size_t first = 0; first < nh; first += HIST_BLOCK) {
        ampdiag_trace_hist *b = NULL;
        size_t n = 0;
        int rc = ampdiag_trace_read_hists(rd, first, HIST_BLOCK, &b, &n);
        if (rc)
            return rc;
        hists_take(q, b, n);
        free(b);
        if (n == 0)
            break;
    }
    return 0;
}

/* The first row whose step is not below step, in a table in step order: a binary search that
 * reads single rows. */
static int hist_lower_bound(ampdiag_trace_reader *rd, size_t nh, int64_t step, size_t *at)
{
    size_t lo = 0, hi = nh;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2, n = 0;
        ampdiag_trace_hist *h = NULL;
        int rc = ampdiag_trace_read_hists(rd, mid, 1, &h, &n);
        if (rc)
            return rc;
        int64_t s = n ? h->step : INT64_MAX;
        free(h);
        if (s < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    *at = lo;
    return 0;
}

/* The rows of each asked-for step, where a binary search finds them (a writer appends in step
 * order): the rows from the first of the step on, while they hold it. */
static int hists_search(ampdiag_trace_reader *rd, size_t nh, const struct hist_req *q)
{
    enum { RUN = 64 };
    for (size_t j = 0; j < q->nsteps; j++) {
        size_t first;
        int rc = hist_lower_bound(rd, nh, q->steps[j], &first);
        for (int more = 1; !rc && more && first < nh; first += RUN) {
            ampdiag_trace_hist *b = NULL;
            size_t n = 0;
            if ((rc = ampdiag_trace_read_hists(rd, first, RUN, &b, &n)))
                break;
            size_t k = 0;
            while (k < n && b[k].step == q->steps[j])
                k++;
            hists_take(q, b, k);
            more = n > 0 && k == n;
            free(b);
        }
        if (rc)
            return rc;
    }
    return 0;
}

int an_read_hists(const an_run *r, int layer, const int *kinds, size_t nkinds, const int64_t *steps,
                  size_t nsteps, ampdiag_trace_hist *out, int *have, char *err, size_t errlen)
{
    memset(have, 0, nkinds * nsteps * sizeof *have);
    ampdiag_trace_reader *rd = NULL;
    int rc = ampdiag_trace_open(r->path, AMPDIAG_TRACE_READ_QUIET, &rd);
    if (rc)
        return fail(err, errlen, rc, r->path, "open");
    ampdiag_trace_counts cnt;
    ampdiag_trace_get_counts(rd, &cnt);
    struct hist_req q = {layer, kinds, nkinds, steps, nsteps, out, have};
    rc = hists_search(rd, cnt.hists, &q);
    size_t found = 0;
    for (size_t i = 0; i < nkinds * nsteps; i++)
        found += (size_t)have[i];
    /* a table out of step order, or a (kind, step) without a row: read every row */
    if (!rc && found < nkinds * nsteps) {
        memset(have, 0, nkinds * nsteps * sizeof *have);
        rc = hists_scan(rd, cnt.hists, &q);
    }
    if (rc)
        fail(err, errlen, rc, r->path, "histograms");
    ampdiag_trace_reader_close(rd);
    return rc;
}

/* Every root attribute, copied (the reader's strings live only as long as the reader). */
static int copy_attrs(ampdiag_trace_reader *rd, an_run *r)
{
    size_t n = ampdiag_trace_nattrs(rd);
    r->attrs = calloc(n ? n : 1, sizeof *r->attrs);
    if (!r->attrs)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const ampdiag_trace_attr *a = ampdiag_trace_attr_at(rd, i);
        an_attr *d = &r->attrs[r->nattrs++];
        d->type = a->type;
        d->i = a->i;
        d->d = a->d;
        if (!(d->name = strdup(a->name ? a->name : "")) || (a->s && !(d->s = strdup(a->s))))
            return -1;
    }
    return 0;
}

/* The scaler's actions as its events record them: each scale_backoff event is one non-finite
 * step the scaler answered (a backoff when its value, the new scale, is below the scale the
 * step ran with; an overflow at the minimum scale otherwise), each scale_growth one growth.
 * The minimum includes the scale the last backoff left, after the last step record. Traces
 * without scale events keep the counts read off the step records (summarise_steps). */
static void scale_from_events(an_run *r, const an_step *st, size_t n,
                              const ampdiag_trace_event *ev, size_t nev)
{
    size_t nb = 0, ng = 0, at_min = 0;
    double smin = r->scale_min, sfinal = r->scale_final;
    int64_t smin_step = r->scale_min_step;
    int any = 0;
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].code != AMPDIAG_EV_SCALE_BACKOFF && ev[i].code != AMPDIAG_EV_SCALE_GROWTH)
            continue;
        any = 1;
        long k = step_index(r, ev[i].step);
        double ran = k >= 0 ? st[k].loss_scale : NAN;
        double v = ev[i].value;
        if (ev[i].code == AMPDIAG_EV_SCALE_GROWTH) {
            ng++;
        } else if (isnan(ran) || v < ran) {
            nb++;
        } else {
            at_min++;
        }
        if (!isnan(v) && (isnan(smin) || v < smin)) {
            smin = v;
            smin_step = ev[i].step;
        }
        if (n && ev[i].step >= st[n - 1].step && !isnan(v))
            sfinal = v;
    }
    if (!any)
        return;
    r->backoffs = nb;
    r->growths = ng;
    r->overflows_at_min = at_min;
    r->scale_min = smin;
    r->scale_min_step = smin_step;
    r->scale_final = sfinal;
}

static void summarise_steps(an_run *r, const an_step *st, size_t n, const an_options *o)
{
    r->first_skip_step = -1;
    r->first_nonfinite_loss_step = -1;
    r->loss_min = NAN;
    r->loss_first = r->loss_last = NAN;
    r->scale_init = r->scale_min = r->scale_final = NAN;
    r->tail_mean = r->tail_sd = NAN;
    r->step_ratio_median = NAN;
    if (n == 0)
        return;
    r->first_step = st[0].step;
    r->last_step = st[n - 1].step;
    r->loss_first = st[0].loss;
    r->loss_last = st[n - 1].loss;
    r->scale_init = st[0].loss_scale;
    r->scale_final = st[n - 1].loss_scale;
    r->scale_min = st[0].loss_scale;
    r->scale_min_step = st[0].step;
    long warm = o && o->warmup >= 0 ? o->warmup : (long)(n / 5 < 100 ? n / 5 : 100);
    r->calib = (size_t)warm;
    int skipped_at_min = 0;
    for (size_t i = 0; i < n; i++) {
        const an_step *s = &st[i];
        if (isfinite(s->loss)) {
            if (isnan(r->loss_min) || s->loss < r->loss_min) {
                r->loss_min = s->loss;
                r->loss_min_step = s->step;
            }
        } else {
            if (r->loss_nonfinite++ == 0)
                r->first_nonfinite_loss_step = s->step;
        }
        double ls = s->loss_scale;
        if (!isnan(ls) && ls != 1.0)
            r->scaled = 1;
        if (ls < r->scale_min) {
            r->scale_min = ls;
            r->scale_min_step = s->step;
        }
        if (i > 0 && ls < st[i - 1].loss_scale)
            r->backoffs++;
        if (i > 0 && ls > st[i - 1].loss_scale)
            r->growths++;
        int at_min = r->scaler_min > 0 && ls <= r->scaler_min;
        r->steps_at_min += at_min;
        int after = (uint64_t)(s->step - r->first_step) >= (uint64_t)warm;
        r->steps_after += after;
        if (s->skipped) {
            if (r->skipped++ == 0)
                r->first_skip_step = s->step; /* (its reason: read_steps) */
            r->skipped_after += after;
            skipped_at_min |= at_min;
        }
    }
    /* a backoff after the last step record shows in the scaler's next value: count the final
     * recorded scale as reached */
    r->collapsed = (r->backoffs > 0 || r->skipped > 0) && r->scaled &&
                   (r->scale_min <= 1.0 || skipped_at_min);
    if (r->scale_min <= 1.0 && r->scaled && r->backoffs == 0 && r->scale_init > 1.0)
        r->collapsed = 1;

    /* final window */
    size_t w = n / 10 < 10 ? 10 : n / 10;
    if (w > n)
        w = n;
    r->tail_w = w;
    double sum = 0, ss = 0;
    size_t k = 0;
    for (size_t i = n - w; i < n; i++)
        if (isfinite(st[i].loss)) {
            sum += st[i].loss;
            k++;
        }
    if (k) {
        r->tail_mean = sum / (double)k;
        for (size_t i = n - w; i < n; i++)
            if (isfinite(st[i].loss))
                ss += (st[i].loss - r->tail_mean) * (st[i].loss - r->tail_mean);
        r->tail_sd = k > 1 ? sqrt(ss / (double)(k - 1)) : 0;
    }
    if (k < w)
        r->tail_mean = INFINITY; /* a non-finite loss at the end: diverged */
}

/* Loss spikes and divergence: the live run's detectors (src/monitor/) replayed over /steps. */
static void find_spikes(an_run *r, const an_step *st, size_t n, int64_t *spike_at,
                        size_t *nspike_at, size_t cap)
{
    mon_spike sp;
    mon_spike_init(&sp);
    *nspike_at = 0;
    for (size_t i = 0; i < n; i++) {
        if (!mon_spike_push(&sp, st[i].loss))
            continue;
        if (r->n_spike_listed < sizeof r->spike_steps / sizeof r->spike_steps[0])
            r->spike_steps[r->n_spike_listed++] = st[i].step;
        if (*nspike_at < cap)
            spike_at[(*nspike_at)++] = st[i].step;
        r->loss_spikes++;
    }
}

/* A divergence event the writer recorded decides; a trace without one (another writer, or a
 * run cut off) diverged when its last steps form a streak of the live rule's length, or any
 * streak when its status says diverged. */
static void find_divergence(an_run *r, const an_step *st, size_t n,
                            const ampdiag_trace_event *ev, size_t nev)
{
    r->divergence_step = -1;
    for (size_t i = 0; i < nev; i++)
        if (ev[i].code == AMPDIAG_EV_DIVERGENCE) {
            r->diverged = 1;
            r->divergence_step = ev[i].step;
            snprintf(r->divergence_why, sizeof r->divergence_why, "%s", ev[i].message);
            return;
        }
    if (n == 0)
        return;
    mon_diverge d;
    mon_diverge_init(&d);
    int dynamic = strcmp(r->loss_scale_mode, "dynamic") == 0;
    int is_static = strncmp(r->loss_scale_mode, "static", 6) == 0;
    long streak = 0;
    int why = 0;
    for (size_t i = 0; i < n; i++) {
        int at_floor = mon_scale_at_floor(dynamic, is_static, st[i].loss_scale, r->scaler_min);
        streak = mon_diverge_push(&d, st[i].step, st[i].loss, st[i].skipped != 0, at_floor, &why);
    }
    if (streak >= MON_DIVERGE_PATIENCE || (streak > 0 && r->status == AMPDIAG_STATUS_DIVERGED)) {
        r->diverged = 1;
        r->divergence_step = why ? d.floor_since : d.since;
        snprintf(r->divergence_why, sizeof r->divergence_why, "%s",
                 why ? "steps skipped in a row with the loss scale at its floor"
                     : "loss non-finite or exploded");
    } else if (r->status == AMPDIAG_STATUS_DIVERGED) {
        r->diverged = 1;
        r->divergence_step = st[n - 1].step;
    }
}

static int clip_stats(an_run *r, const an_step *st, size_t n, const int64_t *spikes,
                      size_t nspikes)
{
    an_clip *c = &r->gn;
    c->median = c->mad = c->p99 = c->p10 = c->robust = c->value = NAN;
    c->median_first = c->median_last = NAN;
    c->norm_spike_step = c->norm_spike_loss_step = -1;
    c->warmup = r->calib;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return -1;
    size_t k = 0;
    mon_window w;
    mon_window_init(&w);
    for (size_t i = 0; i < n; i++) {
        c->actually_clipped += st[i].clip_coef < 1.0 && !st[i].skipped;
        double g = st[i].grad_norm;
        if (st[i].skipped || !isfinite(g))
            continue;
        /* a norm spike >= 10x the rolling median, followed by a loss spike within 100 steps */
        if (w.n >= 20 && c->norm_spike_step < 0) {
            double med = mon_window_median(&w);
            if (med > 0 && g >= 10 * med)
                for (size_t j = 0; j < nspikes; j++)
                    if (spikes[j] >= st[i].step && spikes[j] <= st[i].step + 100) {
                        c->norm_spike_step = st[i].step;
                        c->norm_spike_loss_step = spikes[j];
                        c->norm_spike_ratio = g / med;
                        break;
                    }
        }
        mon_window_push(&w, g);
        if ((uint64_t)(st[i].step - r->first_step) < (uint64_t)r->calib)
            continue;
        v[k++] = g;
    }
    c->n = k;
    if (k == 0) {
        free(v);
        return 0;
    }
    size_t t = k / 10 ? k / 10 : 1;
    double *tmp = malloc(t * sizeof *tmp);
    if (!tmp) {
        free(v);
        return -1;
    }
    memcpy(tmp, v, t * sizeof *tmp);
    c->median_first = median_doubles(tmp, t);
    memcpy(tmp, v + k - t, t * sizeof *tmp);
    c->median_last = median_doubles(tmp, t);
    free(tmp);
    /* the steps over a threshold are listed in time order: find them before sorting */
    double *sorted = malloc(k * sizeof *sorted);
    if (!sorted) {
        free(v);
        return -1;
    }
    memcpy(sorted, v, k * sizeof *sorted);
    sort_doubles(sorted, k);
    c->median = quantile_sorted(sorted, k, 0.5);
    c->p99 = quantile_sorted(sorted, k, 0.99);
    c->p10 = quantile_sorted(sorted, k, 0.10);
    for (size_t i = 0; i < k; i++)
        sorted[i] = fabs(sorted[i] - c->median);
    c->mad = median_doubles(sorted, k);
    free(sorted);
    c->robust = c->median + 3 * 1.4826 * c->mad;
    c->value = fmax(c->p99, c->robust);
    for (size_t i = 0; i < n; i++) {
        double g = st[i].grad_norm;
        if (st[i].skipped || !isfinite(g) || (uint64_t)(st[i].step - r->first_step) < (uint64_t)r->calib)
            continue;
        if (g > c->value) {
            if (c->n_over_listed < sizeof c->over_steps / sizeof c->over_steps[0])
                c->over_steps[c->n_over_listed++] = st[i].step;
            c->n_over++;
        }
    }
    free(v);
    return 0;
}

static void init_run(an_run *r)
{
    memset(r, 0, sizeof *r);
    r->seed = r->steps_planned = r->batch = -1;
    r->lr = r->clip = r->adam_eps = NAN;
    r->fwd_nonfinite_step = -1;
    r->fwd_nonfinite_layer = -1;
    r->first_nonfinite.step = r->first_forward.step = r->eval_forward.step = -1;
    r->divergence_step = -1;
    r->ratio_median = r->step_ratio_median = NAN;
    r->rec_step_min = INT64_MAX;
    r->rec_step_max = INT64_MIN;
    r->env_width = 1;
}

/* What an_load has read from the trace and not yet handed to the run. */
typedef struct load_ctx {
    const char *path;
    char *err;
    size_t errlen;
    ampdiag_trace_reader *rd;
    ampdiag_trace_layer *layers; /* [nl]: freed at the end */
    an_step *st;                 /* [ns]: r->steps */
    ampdiag_trace_event *ev;     /* [nev]: kept as r->events */
    size_t nl, ns, nev;
    ampdiag_trace_counts cnt;
    double *tmp;                 /* room for max(ns, nl, 1) values: freed at the end */
} load_ctx;

/* The run's configuration from the root attributes: precision, model, data, optimizer and
 * its hyperparameters, loss scaling, schedule, FP32 layers, scenario, command line, seed, sizes. */
static void read_config_attrs(ampdiag_trace_reader *rd, an_run *r)
{
    copy_attr(rd, AMPDIAG_ATTR_PRECISION, r->precision, sizeof r->precision);
    copy_attr(rd, AMPDIAG_ATTR_MODEL, r->model, sizeof r->model);
    copy_attr(rd, AMPDIAG_ATTR_DATA, r->data, sizeof r->data);
    copy_attr(rd, AMPDIAG_ATTR_OPTIMIZER, r->optimizer, sizeof r->optimizer);
    copy_attr(rd, AMPDIAG_ATTR_LOSS_SCALE, r->loss_scale_mode, sizeof r->loss_scale_mode);
    const char *gs = ampdiag_trace_attr_str(rd, "grad_stats");
    r->grads_unscaled = gs && strcmp(gs, "unscaled") == 0;
    copy_attr(rd, AMPDIAG_ATTR_HYPERPARAMETERS, r->hyper, sizeof r->hyper);
    copy_attr(rd, AMPDIAG_ATTR_LR_SCHEDULE, r->schedule, sizeof r->schedule);
    copy_attr(rd, AMPDIAG_ATTR_FP32_LAYERS, r->fp32_layers, sizeof r->fp32_layers);
    copy_attr(rd, "scenario", r->scenario, sizeof r->scenario);
    copy_attr(rd, AMPDIAG_ATTR_COMMAND_LINE, r->command_line, sizeof r->command_line);
    r->seed = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_SEED, -1);
    r->steps_planned = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_STEPS_PLANNED, -1);
    r->batch = ampdiag_trace_attr_int(rd, AMPDIAG_ATTR_BATCH, -1);
    r->lr = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_LR, NAN);
    r->clip = ampdiag_trace_attr_double(rd, AMPDIAG_ATTR_CLIP, NAN);
    /* the typed settings; traces without them (older writers) say the same in "k=v" strings */
    const char *scaler = ampdiag_trace_attr_str(rd, AMPDIAG_ATTR_SCALER);
    r->scaler_min = typed_or_kv(rd, AMPDIAG_ATTR_SCALER_MIN, scaler, "min", 0);
    r->scaler_init = typed_or_kv(rd, AMPDIAG_ATTR_SCALER_INIT, scaler, "init", NAN);
    r->adam_eps = typed_or_kv(rd, AMPDIAG_ATTR_OPT_EPS, r->hyper, "eps", NAN);
    const char *state = ampdiag_trace_attr_str(rd, AMPDIAG_ATTR_OPT_STATE_FORMAT);
    if (state)
        snprintf(r->optim_state, sizeof r->optim_state, "%s", state);
    else
        kv_str(r->hyper, "state", r->optim_state, sizeof r->optim_state);
    r->weights_16bit = strcmp(r->precision, "bf16-pure") == 0;
}

/* The trace's own state: status, cut off, repaired, format, device, tool, times; then every
 * root attribute copied. 0, or -1 when out of memory. */
static int read_trace_attrs(ampdiag_trace_reader *rd, an_run *r)
{
    r->status = ampdiag_trace_status_of(rd);
    snprintf(r->status_text, sizeof r->status_text, "%s", ampdiag_trace_status_text(rd));
    r->cut_off = ampdiag_trace_cut_off(rd);
    r->repaired = ampdiag_trace_was_repaired(rd);
    r->format_version = ampdiag_trace_format_version(rd);
    copy_attr(rd, AMPDIAG_ATTR_EVAL_METRIC, r->eval_metric, sizeof r->eval_metric);
    copy_attr(rd, AMPDIAG_ATTR_DEVICE, r->device, sizeof r->device);
    copy_attr(rd, AMPDIAG_ATTR_DEVICE_NAME, r->device_name, sizeof r->device_name);
    copy_attr(rd, "tool_version", r->tool_version, sizeof r->tool_version);
    copy_attr(rd, AMPDIAG_ATTR_START_TIME, r->start_time, sizeof r->start_time);
    copy_attr(rd, "end_time", r->end_time, sizeof r->end_time);
    return copy_attrs(rd, r);
}

/* The tables: layers, steps, events and evaluations (and the counts of the others), and room
 * for the run's layers and step index. 0 or an AMPDIAG_TRACE_ error (message in L->err). */
/* /steps into r->steps (an_step), STEP_BATCH rows at a time: the records read are not all held.
 * The reason of the first skipped step is kept in r. 0 or an AMPDIAG_TRACE_ error. */
#define STEP_BATCH 4096
static int read_steps(load_ctx *L, an_run *r)
{
    size_t ns = L->cnt.steps;
    if (!(r->steps = malloc((ns ? ns : 1) * sizeof *r->steps)))
        return AMPDIAG_TRACE_ENOMEM;
    L->st = r->steps;
    L->ns = 0;
    int reason_kept = 0;
    while (L->ns < ns) {
        ampdiag_trace_step *b;
        size_t n;
        int rc = ampdiag_trace_read_steps_range(L->rd, L->ns, STEP_BATCH, &b, &n);
        if (rc)
            return rc;
        for (size_t i = 0; i < n; i++) {
            const ampdiag_trace_step *s = &b[i];
            if (s->skipped && !reason_kept++)
                snprintf(r->first_skip_reason, sizeof r->first_skip_reason, "%s", s->skip_reason);
            L->st[L->ns + i] = (an_step){s->step, s->loss, s->loss_scale, s->grad_norm, s->clip_coef,
                                         s->lr, s->update_ratio, s->skipped};
        }
        free(b);
        L->ns += n;
        if (n == 0)
            break;
    }
    return 0;
}

static int read_tables(load_ctx *L, an_run *r)
{
    int rc;
    /* the what-if lost-update counts: absent (read as 0) in traces of older writers */
    r->lost_if_fields = ampdiag_trace_has_field(L->rd, "/tensors", "lost_if_fp16") &&
                        ampdiag_trace_has_field(L->rd, "/tensors", "lost_if_bf16");
    /* the FP8 what-if counts: absent in traces of older writers */
    r->fp8_fields = ampdiag_trace_has_field(L->rd, "/tensors", "e4m3_overflow") &&
                    ampdiag_trace_has_field(L->rd, "/tensors", "e5m2_subnormal");
    ampdiag_trace_get_counts(L->rd, &L->cnt);
    r->counts = L->cnt;
    if ((rc = ampdiag_trace_read_layers(L->rd, &L->layers, &L->nl)) ||
        (rc = read_steps(L, r)) ||
        (rc = ampdiag_trace_read_events(L->rd, &L->ev, &L->nev)) ||
        (rc = ampdiag_trace_read_evals(L->rd, &r->evals, &r->nevals)))
        return fail(L->err, L->errlen, rc, L->path, "tables");
    size_t nl = L->nl, ns = L->ns;
    r->nlayers = nl;
    r->layers = calloc(nl ? nl : 1, sizeof *r->layers);
    r->st_step = malloc((ns ? ns : 1) * sizeof *r->st_step);
    r->st_loss = malloc((ns ? ns : 1) * sizeof *r->st_loss);
    if (!r->layers || !r->st_step || !r->st_loss)
        return fail(L->err, L->errlen, AMPDIAG_TRACE_ENOMEM, L->path, "steps");
    return 0;
}

/* The run's layers from the trace's table, their cells empty; the parameter count. */
static void init_layers(an_run *r, const ampdiag_trace_layer *layers, size_t nl)
{
    for (size_t l = 0; l < nl; l++) {
        an_layer *L = &r->layers[l];
        snprintf(L->name, sizeof L->name, "%s", layers[l].name);
        snprintf(L->op, sizeof L->op, "%s", layers[l].op);
        snprintf(L->shape, sizeof L->shape, "%s", layers[l].shape);
        L->params = layers[l].params;
        snprintf(L->compute, sizeof L->compute, "%s", layers[l].compute);
        L->fp32_op = is_fp32_op(L->op) || kept_fp32(r, L->compute);
        L->island = in_list(r->fp32_layers, L->name);
        L->ratio_median = NAN;
        for (int k = 0; k < AMPDIAG_NKINDS; k++)
            an_cell_init(&L->cell[k]);
        r->params += L->params;
    }
}

/* The step index (st_step, st_loss). The steps must be in increasing step order for the
 * lookups (a writer appends them so). 0 or AMPDIAG_TRACE_ESCHEMA (message in L->err). */
static int index_steps(load_ctx *L, an_run *r)
{
    const an_step *st = L->st;
    r->nsteps = L->ns;
    for (size_t i = 0; i < L->ns; i++) {
        r->st_step[i] = st[i].step;
        r->st_loss[i] = st[i].loss;
        if (i && st[i].step <= st[i - 1].step) {
            snprintf(L->err, L->errlen, "'%s': /steps is not in increasing step order (step %" PRId64
                     " after %" PRId64 ")", L->path, st[i].step, st[i - 1].step);
            return AMPDIAG_TRACE_ESCHEMA;
        }
    }
    return 0;
}

/* The events counted by code (unknown codes apart), and the first non-finite event, the first
 * non-finite forward event and the first of an evaluation's forward pass (the earliest step;
 * the first recorded at that step). */
static void scan_events(an_run *r, const ampdiag_trace_event *ev, size_t nev)
{
    for (size_t i = 0; i < nev; i++) {
        int c = ev[i].code;
        if (c < 0 || c >= AMPDIAG_NEVENT_CODES) {
            r->unknown_events++;
            continue;
        }
        r->by_code[c]++;
        int nonfin = c == AMPDIAG_EV_NAN_FORWARD || c == AMPDIAG_EV_INF_FORWARD ||
                     c == AMPDIAG_EV_NAN_BACKWARD || c == AMPDIAG_EV_INF_BACKWARD;
        int fwd = c == AMPDIAG_EV_NAN_FORWARD || c == AMPDIAG_EV_INF_FORWARD;
        int eval = fwd && strncmp(ev[i].message, "eval:", 5) == 0;
        an_event_ref *targets[3] = {nonfin ? &r->first_nonfinite : NULL, fwd ? &r->first_forward : NULL,
                                    eval ? &r->eval_forward : NULL};
        for (int j = 0; j < 3; j++) {
            an_event_ref *e = targets[j];
            if (!e || (e->step >= 0 && e->step <= ev[i].step))
                continue;
            e->step = ev[i].step;
            e->layer = ev[i].layer;
            e->code = c;
            e->value = ev[i].value;
            snprintf(e->message, sizeof e->message, "%s", ev[i].message);
        }
    }
}

/* The loss spikes (at most 4096), then the clip statistics, which leave them out. 0 or
 * AMPDIAG_TRACE_ENOMEM (message in L->err). */
static int spikes_and_clip(load_ctx *L, an_run *r)
{
    enum { MAXSPIKES = 4096 };
    int64_t *spikes = malloc(MAXSPIKES * sizeof *spikes);
    if (!spikes)
        return fail(L->err, L->errlen, AMPDIAG_TRACE_ENOMEM, L->path, "steps");
    size_t nspikes = 0;
    find_spikes(r, L->st, L->ns, spikes, &nspikes, MAXSPIKES);
    int e = clip_stats(r, L->st, L->ns, spikes, nspikes);
    free(spikes);
    return e ? fail(L->err, L->errlen, AMPDIAG_TRACE_ENOMEM, L->path, "steps") : 0;
}

/* The median of the steps' finite update ratios, in L->tmp (allocated here, kept for
 * summarise_layers). 0 or AMPDIAG_TRACE_ENOMEM (message in L->err). */
static int step_ratio_median(load_ctx *L, an_run *r)
{
    size_t ns = L->ns, nl = L->nl;
    L->tmp = malloc((ns > nl ? ns : nl ? nl : 1) * sizeof *L->tmp);
    if (!L->tmp)
        return fail(L->err, L->errlen, AMPDIAG_TRACE_ENOMEM, L->path, "steps");
    size_t k = 0;
    for (size_t i = 0; i < ns; i++)
        if (isfinite(L->st[i].update_ratio))
            L->tmp[k++] = L->st[i].update_ratio;
    r->step_ratio_median = median_doubles(L->tmp, k);
    return 0;
}

/* The per-layer records: tensors, histograms, and the histograms' steps when points are kept.
 * 0 or an AMPDIAG_TRACE_ error (message in L->err). */
static int load_records(load_ctx *L, an_run *r, const an_options *opt)
{
    unsigned keep = opt ? opt->keep_points : 0;
    int rc;
    if ((rc = load_tensors(L->rd, r, r->steps, L->cnt.tensors, opt, L->err, L->errlen)) ||
        (rc = an_fp8_load(L->rd, r, L->err, L->errlen)) ||
        (rc = load_hists(L->rd, r, r->steps, L->cnt.hists, keep != 0, L->err, L->errlen)))
        return rc;
    return 0;
}

/* The run's totals over its layers (lost updates, non-zero updates, the median of the layers'
 * update ratios, norms apart), then its findings. 0 or AMPDIAG_TRACE_ENOMEM (message in
 * L->err). */
static int summarise_layers(load_ctx *L, an_run *r)
{
    size_t k = 0;
    for (size_t l = 0; l < L->nl; l++) {
        an_layer *ly = &r->layers[l];
        const an_cell *u = &ly->cell[AMPDIAG_KIND_UPDATE];
        r->lost += u->lost;
        r->lost_if16 += u->lost_if16;
        r->lost_ifb16 += u->lost_ifb16;
        r->update_nonzero += u->count - u->zero - u->nan - u->posinf - u->neginf;
        if (ly->ratio_n && !strstr(ly->op, "norm") && isfinite(ly->ratio_median))
            L->tmp[k++] = ly->ratio_median;
    }
    r->ratio_median = median_doubles(L->tmp, k);
    /* all-zero counts cannot be told from a writer that did not compute them */
    r->have_lost_if = r->lost_if_fields && r->lost_if16 + r->lost_ifb16 > 0;
    if (an_findings_of(r, &r->find))
        return fail(L->err, L->errlen, AMPDIAG_TRACE_ENOMEM, L->path, "findings");
    return 0;
}

int an_load_begin(const char *path, const an_options *opt, an_run *r, ampdiag_trace_reader **rd,
                  char *err, size_t errlen)
{
    *rd = NULL;
    init_run(r);
    r->path = strdup(path);
    if (!r->path)
        return fail(err, errlen, AMPDIAG_TRACE_ENOMEM, path, "path");
    int rc = ampdiag_trace_open(path, opt && opt->quiet ? AMPDIAG_TRACE_READ_QUIET : 0, rd);
    return rc ? fail(err, errlen, rc, path, "open") : 0;
}

int an_load_finish(ampdiag_trace_reader *rd, const an_options *opt, an_run *r, char *err,
                   size_t errlen)
{
    load_ctx L;
    memset(&L, 0, sizeof L);
    L.path = r->path;
    L.err = err;
    L.errlen = errlen;
    L.rd = rd;
    read_config_attrs(L.rd, r);
    int rc = 0;
    if (read_trace_attrs(L.rd, r)) {
        rc = fail(err, errlen, AMPDIAG_TRACE_ENOMEM, L.path, "attributes");
        ampdiag_trace_reader_close(L.rd);
        return rc;
    }
    if ((rc = read_tables(&L, r)))
        goto out;
    init_layers(r, L.layers, L.nl);
    if ((rc = index_steps(&L, r)))
        goto out;
    summarise_steps(r, L.st, L.ns, opt);
    scale_from_events(r, L.st, L.ns, L.ev, L.nev);
    scan_events(r, L.ev, L.nev);
    find_divergence(r, L.st, L.ns, L.ev, L.nev);
    if ((rc = spikes_and_clip(&L, r)) ||
        (rc = step_ratio_median(&L, r)) ||
        (rc = load_records(&L, r, opt)) ||
        (rc = summarise_layers(&L, r)))
        goto out;
    rc = 0;
out:
    free(L.tmp);
    free(L.layers);
    r->events = L.ev;
    r->nevents = L.nev;
    ampdiag_trace_reader_close(L.rd);
    return rc;
}

int an_load(const char *path, const an_options *opt, an_run *r, char *err, size_t errlen)
{
    ampdiag_trace_reader *rd;
    int rc = an_load_begin(path, opt, r, &rd, err, errlen);
    return rc ? rc : an_load_finish(rd, opt, r, err, errlen);
}

void an_free(an_run *r)
{
    if (!r)
        return;
    for (size_t l = 0; r->layers && l < r->nlayers; l++) {
        for (int k = 0; k < AMPDIAG_NKINDS; k++)
            free(r->layers[l].cell[k].hist);
        series_free(&r->layers[l].act_rms);
        for (int k = 0; k < AMPDIAG_NKINDS; k++)
            free(r->layers[l].pts[k].c);
    }
    free(r->layers);
    free(r->st_step);
    free(r->st_loss);
    free(r->steps);
    free(r->events);
    free(r->hist_steps);
    an_findings_free(&r->find);
    for (size_t i = 0; r->attrs && i < r->nattrs; i++) {
        free(r->attrs[i].name);
        free(r->attrs[i].s);
    }
    free(r->attrs);
    free(r->evals);
    free(r->path);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------------------------------------
 * Comparison
 * ------------------------------------------------------------------------------------------ */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

void an_label_runs(an_run *runs, size_t n)
{
    int lr_differs = 0, seed_differs = 0;
    for (size_t i = 1; i < n; i++) {
        if (!(runs[i].lr == runs[0].lr) && !(isnan(runs[i].lr) && isnan(runs[0].lr)))
            lr_differs = 1;
        if (runs[i].seed != runs[0].seed)
            seed_differs = 1;
    }
    for (size_t i = 0; i < n; i++) {
        an_run *r = &runs[i];
        int len = snprintf(r->label, sizeof r->label, "%s", r->precision[0] ? r->precision : "?");
        if (lr_differs && len > 0 && (size_t)len < sizeof r->label)
            len += snprintf(r->label + len, sizeof r->label - (size_t)len, " lr %g", r->lr);
        if (seed_differs && len > 0 && (size_t)len < sizeof r->label)
            snprintf(r->label + len, sizeof r->label - (size_t)len, " seed %" PRId64, r->seed);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            if (i != j && strcmp(runs[i].label, runs[j].label) == 0) {
                for (size_t k = 0; k < n; k++)
                    if (strcmp(runs[k].label, runs[i].label) == 0 && k != i)
                        snprintf(runs[k].label, sizeof runs[k].label, "%s", base_name(runs[k].path));
                snprintf(runs[i].label, sizeof runs[i].label, "%s", base_name(runs[i].path));
            }
}

/* Mean of the finite training losses with step in (from, to]. */
static double mean_loss(const an_run *r, int64_t from, int64_t to, size_t *nfin, size_t *ntot)
{
    size_t i = step_lower_bound(r, from + 1);
    double s = 0;
    size_t k = 0, t = 0;
    for (; i < r->nsteps && r->st_step[i] <= to; i++) {
        t++;
        if (isfinite(r->st_loss[i])) {
            s += r->st_loss[i];
            k++;
        }
    }
    if (nfin)
        *nfin = k;
    if (ntot)
        *ntot = t;
    if (t && k < t)
        return INFINITY;
    return k ? s / (double)k : NAN;
}

/* The metric of a run for the gap: eval loss at `eval_step` (if >= 0) or the training-loss mean
 * over (from, to]. */
static double metric_of(const an_run *r, int eval, int64_t eval_step, int64_t from, int64_t to)
{
    if (eval) {
        for (size_t i = 0; i < r->nevals; i++)
            if (r->evals[i].step == eval_step)
                return isfinite(r->evals[i].loss) ? r->evals[i].loss : INFINITY;
        return NAN;
    }
    return mean_loss(r, from, to, NULL, NULL);
}

static int64_t last_common_eval(const an_run *a, const an_run *b)
{
    for (size_t i = a->nevals; i-- > 0;)
        for (size_t j = b->nevals; j-- > 0;)
            if (a->evals[i].step == b->evals[j].step)
                return a->evals[i].step;
    return -1;
}

static int cmp_dev(const void *a, const void *b)
{
    const an_layer_dev *x = a, *y = b;
    if (x->rel > y->rel) return -1;
    if (x->rel < y->rel) return 1;
    return x->layer - y->layer;
}

static int same_config_but_seed(const an_run *a, const an_run *b)
{
    return strcmp(a->precision, b->precision) == 0 && strcmp(a->model, b->model) == 0 &&
           strcmp(a->data, b->data) == 0 && strcmp(a->optimizer, b->optimizer) == 0 &&
           (a->lr == b->lr || (isnan(a->lr) && isnan(b->lr))) && a->batch == b->batch &&
           a->seed != b->seed;
}

/* c->layer_map: each run's layers matched to the baseline's by name (-1: none), with a note
 * for a run whose layers do not all match. 0, or -1 when out of memory. */
static int match_layers(an_run *runs, size_t n, size_t base, an_comparison *c)
{
    const an_run *b = &runs[base];
    for (size_t i = 0; i < n; i++) {
        an_run *r = &runs[i];
        c->layer_map[i] = malloc((r->nlayers ? r->nlayers : 1) * sizeof(int));
        if (!c->layer_map[i])
            return -1;
        size_t matched = 0;
        for (size_t l = 0; l < r->nlayers; l++) {
            c->layer_map[i][l] = -1;
            for (size_t m = 0; m < b->nlayers; m++)
                if (strcmp(r->layers[l].name, b->layers[m].name) == 0) {
                    c->layer_map[i][l] = (int)m;
                    matched++;
                    break;
                }
        }
        if (i != base && (matched < r->nlayers || matched < b->nlayers))
            strlist_addf(&c->notes,
                         "%s: %zu of its %zu layers match the baseline's %zu by name; the others are "
                         "reported but not compared",
                         r->label, matched, r->nlayers, b->nlayers);
    }
    return 0;
}

/* A layer that one run's autocast kept in FP32 is an FP32 op in every run of the comparison:
 * the FP32 baseline cannot record what autocast would do, and its range rules must not predict
 * 16-bit overflow in a layer that never runs in 16 bits. */
static void share_fp32_ops(an_run *runs, size_t n, size_t base, const an_comparison *c)
{
    an_run *b = &runs[base];
    for (size_t i = 0; i < n; i++)
        for (size_t l = 0; l < runs[i].nlayers; l++)
            if (runs[i].layers[l].fp32_op && c->layer_map[i][l] >= 0)
                b->layers[c->layer_map[i][l]].fp32_op = 1;
    for (size_t i = 0; i < n; i++)
        for (size_t l = 0; l < runs[i].nlayers; l++)
            if (c->layer_map[i][l] >= 0 && b->layers[c->layer_map[i][l]].fp32_op)
                runs[i].layers[l].fp32_op = 1;
}

/* A note on a run that did not finish: cut off (still 'running') or interrupted. */
static void note_status(an_comparison *c, const an_run *r)
{
    if (r->cut_off)
        strlist_addf(&c->notes,
                     "%s: cut off (status still 'running'): %zu steps up to its last flush",
                     r->label, r->nsteps);
    else if (r->status == AMPDIAG_STATUS_INTERRUPTED)
        strlist_addf(&c->notes, "%s: interrupted after %zu steps", r->label, r->nsteps);
}

/* A note for each way run r's configuration differs from the baseline b's, saying what it
 * means for the comparison. */
static void note_config(an_comparison *c, const an_run *r, const an_run *b)
{
    if (strcmp(r->model, b->model))
        strlist_addf(&c->notes,
                     "%s: model '%s' differs from the baseline's '%s': layers are matched by name "
                     "and the loss gap mixes model and precision",
                     r->label, r->model, b->model);
    if (strcmp(r->data, b->data))
        strlist_addf(&c->notes,
                     "%s: data '%s' differs from the baseline's '%s': losses are not comparable",
                     r->label, r->data, b->data);
    if (r->seed != b->seed)
        strlist_addf(&c->notes,
                     "%s: seed %" PRId64 " differs from the baseline's %" PRId64
                     ": the gap includes seed-to-seed noise",
                     r->label, r->seed, b->seed);
    if (r->nsteps != b->nsteps)
        strlist_addf(&c->notes,
                     "%s: %zu steps recorded, the baseline %zu: curves are compared over the "
                     "steps both have",
                     r->label, r->nsteps, b->nsteps);
    if (!(r->lr == b->lr) && !(isnan(r->lr) && isnan(b->lr)))
        strlist_addf(&c->notes,
                     "%s: lr %g differs from the baseline's %g: its gap measures the learning "
                     "rate as well as the precision",
                     r->label, r->lr, b->lr);
    if (strcmp(r->optimizer, b->optimizer))
        strlist_addf(&c->notes, "%s: optimizer %s differs from the baseline's %s", r->label,
                     r->optimizer, b->optimizer);
    if (r->batch != b->batch)
        strlist_addf(&c->notes, "%s: batch %" PRId64 " differs from the baseline's %" PRId64,
                     r->label, r->batch, b->batch);
}

/* Comparability: a note on each run that did not finish, on each difference from the
 * baseline's configuration, and on a baseline that is not an FP32 trace. */
static void note_differences(const an_run *runs, size_t n, size_t base, an_comparison *c)
{
    const an_run *b = &runs[base];
    for (size_t i = 0; i < n; i++) {
        note_status(c, &runs[i]);
        if (i != base)
            note_config(c, &runs[i], b);
    }
    if (!c->baseline_is_fp32) {
        int any_fp32 = 0;
        for (size_t i = 0; i < n; i++)
            any_fp32 |= strcmp(runs[i].precision, "fp32") == 0;
        if (any_fp32)
            strlist_addf(&c->notes, "the baseline is %s (%s), not an FP32 trace: gaps are measured "
                         "against it", b->label, b->path);
        else
            strlist_addf(&c->notes,
                         "no FP32 trace given: the baseline is %s (%s); gaps are measured against it",
                         b->label, b->path);
    }
}

/* The curves' gap: of 10 segments of the steps both runs have (span steps from `first`), the
 * one where run r's mean loss is furthest from the baseline b's (relative), into g. */
static void curve_gap(an_gap *g, const an_run *b, const an_run *r, int64_t first, int64_t span)
{
    double worst = 0;
    int have_seg = 0;
    for (int s = 0; s < 10 && span >= 10; s++) {
        int64_t from = first - 1 + span * s / 10, to = first - 1 + span * (s + 1) / 10;
        double mb = mean_loss(b, from, to, NULL, NULL), mr = mean_loss(r, from, to, NULL, NULL);
        if (!isfinite(mb) || isnan(mr) || mb == 0)
            continue;
        double rel = isinf(mr) ? INFINITY : (mr - mb) / fabs(mb);
        if (!have_seg || fabs(rel) > fabs(worst)) {
            worst = rel;
            g->curve_max_from = from + 1;
            g->curve_max_to = to;
        }
        have_seg = 1;
    }
    if (have_seg)
        g->curve_max_rel = worst;
}

/* Run r's loss gap to the baseline b (g left unknown for the baseline itself, is_base, or a
 * run without steps): the metric is the final eval loss at a step both have in the final
 * window, else the training loss's mean over that window; then the curves' gap. */
static void loss_gap(an_gap *g, const an_run *b, const an_run *r, int is_base)
{
    g->rel = g->base = g->value = g->curve_max_rel = NAN;
    g->step = -1;
    g->curve_max_from = g->curve_max_to = -1;
    if (is_base || b->nsteps == 0 || r->nsteps == 0)
        return;
    int64_t es = last_common_eval(b, r);
    int64_t lend = r->last_step < b->last_step ? r->last_step : b->last_step;
    int64_t first = b->first_step > r->first_step ? b->first_step : r->first_step;
    int64_t span = lend - first + 1;
    int64_t w = span / 10 < 10 ? 10 : span / 10;
    if (es >= 0 && es >= lend - w) {
        g->eval = 1;
        g->step = es;
    } else {
        g->eval = 0;
        g->step = lend;
    }
    g->base = metric_of(b, g->eval, g->step, lend - w, lend);
    g->value = metric_of(r, g->eval, g->step, lend - w, lend);
    g->have = !isnan(g->base) && !isnan(g->value);
    if (g->have)
        g->rel = isinf(g->value) ? INFINITY
                 : isinf(g->base) ? -INFINITY
                                  : (g->value - g->base) / fabs(g->base);
    curve_gap(g, b, r, first, span);
}

/* The noise band: 2 sigma over runs of the baseline's configuration with other seeds (their
 * final eval loss, or final-window training loss if one has no evaluation), else max(1 %,
 * 2 * standard error of the baseline's final eval loss over its validation examples), else (a
 * trace without that standard error) max(1 %, 2 * standard error of the baseline's final-window
 * training loss). */
static void noise_band(const an_run *runs, size_t n, size_t base, an_comparison *c)
{
    const an_run *b = &runs[base];
    if (isfinite(b->tail_mean) && b->tail_mean != 0 && b->tail_w > 1)
        c->tail_noise_rel = 2 * b->tail_sd / sqrt((double)b->tail_w) / fabs(b->tail_mean);
    double vals[64];
    size_t k = 0;
    int use_eval = 1;
    for (size_t i = 0; i < n && k < 64; i++)
        if (i == base || same_config_but_seed(&runs[i], b))
            if (runs[i].nevals == 0)
                use_eval = 0;
    for (size_t i = 0; i < n && k < 64; i++) {
        if (i != base && !same_config_but_seed(&runs[i], b))
            continue;
        const an_run *r = &runs[i];
        double v = use_eval ? r->evals[r->nevals - 1].loss : r->tail_mean;
        if (isfinite(v))
            vals[k++] = v;
    }
    if (k >= 2) {
        double m = 0, ss = 0;
        for (size_t i = 0; i < k; i++)
            m += vals[i];
        m /= (double)k;
        for (size_t i = 0; i < k; i++)
            ss += (vals[i] - m) * (vals[i] - m);
        c->band = 2 * sqrt(ss / (double)(k - 1)) / fabs(m);
        c->band_from_seeds = 1;
        c->band_seeds = k;
    } else if (b->nevals && isfinite(b->evals[b->nevals - 1].loss_se) &&
               isfinite(b->evals[b->nevals - 1].loss) && b->evals[b->nevals - 1].loss != 0) {
        /* the noise of the quantity judged: the baseline's eval loss, 2 standard errors of its
         * mean over the validation examples */
        const ampdiag_trace_eval *e = &b->evals[b->nevals - 1];
        c->band = fmax(0.01, 2 * e->loss_se / fabs(e->loss));
        c->band_from_eval = 1;
    } else {
        c->band = isfinite(c->tail_noise_rel) ? fmax(0.01, c->tail_noise_rel) : 0.01;
    }
}

/* The median, over the steps both series have, of |x - y| / y where y > 0, into *med, and
 * the number of such steps into *k (*med untouched when there is none). 0, or -1 when out of
 * memory. */
static int rms_deviation(const an_series *x, const an_series *y, size_t *k, double *med)
{
    double *rel = malloc((x->n < y->n ? x->n : y->n) * sizeof *rel + sizeof *rel);
    if (!rel)
        return -1;
    size_t p = 0, q = 0, nk = 0;
    while (p < x->n && q < y->n) {
        if (x->step[p] < y->step[q])
            p++;
        else if (x->step[p] > y->step[q])
            q++;
        else {
            if (y->v[q] > 0)
                rel[nk++] = fabs(x->v[p] - y->v[q]) / y->v[q];
            p++;
            q++;
        }
    }
    if (nk)
        *med = median_doubles(rel, nk);
    *k = nk;
    free(rel);
    return 0;
}

/* c->dev[i]: run i's layers (those matched) by the median deviation of their activation rms
 * from the baseline's at common steps, largest first. 0, or -1 when out of memory. */
static int layer_deviation(an_run *runs, size_t i, size_t base, an_comparison *c)
{
    const an_run *r = &runs[i], *b = &runs[base];
    c->dev[i] = calloc(r->nlayers ? r->nlayers : 1, sizeof **c->dev);
    if (!c->dev[i])
        return -1;
    size_t nd = 0;
    for (size_t l = 0; l < r->nlayers; l++) {
        int m = c->layer_map[i][l];
        if (m < 0)
            continue;
        size_t k;
        double med = NAN;
        if (rms_deviation(&r->layers[l].act_rms, &b->layers[m].act_rms, &k, &med))
            return -1;
        if (k) {
            c->dev[i][nd].layer = (int)l;
            c->dev[i][nd].n = k;
            c->dev[i][nd].rel = med;
            nd++;
        }
    }
    qsort(c->dev[i], nd, sizeof **c->dev, cmp_dev);
    c->ndev[i] = nd;
    return 0;
}

int an_compare(an_run *runs, size_t n, size_t base, an_comparison *c)
{
    memset(c, 0, sizeof *c);
    c->nruns = n;
    c->baseline = base;
    c->band = NAN;
    c->tail_noise_rel = NAN;
    an_run *b = &runs[base];
    c->baseline_is_fp32 = strcmp(b->precision, "fp32") == 0;
    an_label_runs(runs, n);
    c->gap = calloc(n, sizeof *c->gap);
    c->dev = calloc(n, sizeof *c->dev);
    c->ndev = calloc(n, sizeof *c->ndev);
    c->layer_map = calloc(n, sizeof *c->layer_map);
    if (!c->gap || !c->dev || !c->ndev || !c->layer_map)
        return -1;
    if (match_layers(runs, n, base, c))
        return -1;
    share_fp32_ops(runs, n, base, c);
    note_differences(runs, n, base, c);
    for (size_t i = 0; i < n; i++)
        loss_gap(&c->gap[i], b, &runs[i], i == base);
    noise_band(runs, n, base, c);
    for (size_t i = 0; i < n; i++)
        if (i != base && layer_deviation(runs, i, base, c))
            return -1;
    return c->notes.oom ? -1 : 0;
}

void an_comparison_free(an_comparison *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nruns; i++) {
        if (c->dev)
            free(c->dev[i]);
        if (c->layer_map)
            free(c->layer_map[i]);
    }
    free(c->gap);
    free(c->dev);
    free(c->ndev);
    free(c->layer_map);
    strlist_free(&c->notes);
    memset(c, 0, sizeof *c);
}
