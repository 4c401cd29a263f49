/*
 * columns.c - chart columns (columns.h): per (layer, kind), the records a chart needs of each
 * column of a grid of steps; the grid's width doubles while a kind has too many columns.
 */
#include "analysis/columns.h"

#include <math.h>
#include <string.h>

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

static float fmax_nan(float a, float b) { return isnan(a) || b > a ? b : a; }

static void column_merge(an_column *dst, const an_column *src)
{
    for (int k = 0; k < AN_NROLES; k++)
        if (role_better(k, &dst->role[k], &src->role[k]))
            dst->role[k] = src->role[k];
    dst->records += src->records;
    for (int c = 0; c < AN_CHART_WI; c++) {
        dst->under[c] = fmax_nan(dst->under[c], src->under[c]);
        dst->over[c] = fmax_nan(dst->over[c], src->over[c]);
    }
    dst->zero = fmax_nan(dst->zero, src->zero);
}

/* Merge neighbouring columns that fall into one column of the run's (new, wider) grid. */
static void columns_regrid(const an_run *r, an_points *ps)
{
    size_t k = 0;
    for (size_t i = 0; i < ps->n; i++) {
        if (k && column_key(r, ps->v[k - 1].role[0].step) == column_key(r, ps->v[i].role[0].step))
            column_merge(&ps->v[k - 1], &ps->v[i]);
        else
            ps->v[k++] = ps->v[i];
    }
    ps->n = k;
}

/* Double the run's column width until every kept kind has at most AN_ENV_COLS columns. */
void an_columns_widen(an_run *r, unsigned keep)
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

/* The record's own what-if fractions: FP16 and BF16 (columns 0 and 1), and the v1 FP8 fields
 * into their columns (v1_fp8, -1 when none); the rest are NaN until /whatif fills them. */
static void fractions_of(const ampdiag_trace_tensor *t, const int v1_fp8[2], an_column *c)
{
    for (int k = 0; k < AN_CHART_WI; k++)
        c->under[k] = c->over[k] = NAN;
    c->zero = NAN;
    if (!t->count)
        return;
    double n = (double)t->count;
    c->zero = (float)((double)t->n_zero / n);
    const uint64_t uo[4][2] = {{t->fp16_underflow, t->fp16_overflow}, {t->bf16_underflow, t->bf16_overflow},
                               {t->e4m3_underflow, t->e4m3_overflow}, {t->e5m2_underflow, t->e5m2_overflow}};
    const int col[4] = {AN_WI_FP16, AN_WI_BF16, v1_fp8 ? v1_fp8[0] : -1, v1_fp8 ? v1_fp8[1] : -1};
    for (int k = 0; k < 4; k++)
        if (col[k] >= 0 && col[k] < AN_CHART_WI) {
            c->under[col[k]] = (float)((double)uo[k][0] / n);
            c->over[col[k]] = (float)((double)uo[k][1] / n);
        }
}

/* The column of step in ps (its index), or -1. */
static long column_find(const an_run *r, const an_points *ps, int64_t step)
{
    int64_t key = column_key(r, step);
    size_t lo = 0, hi = ps->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (column_key(r, ps->v[mid].role[0].step) < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ps->n && column_key(r, ps->v[lo].role[0].step) == key ? (long)lo : -1;
}

void an_columns_whatif(const an_run *r, an_points *ps, int64_t step, int col, double under, double over)
{
    long k = col >= 0 && col < AN_CHART_WI ? column_find(r, ps, step) : -1;
    if (k < 0)
        return;
    an_column *c = &ps->v[k];
    c->under[col] = fmax_nan(c->under[col], (float)under);
    c->over[col] = fmax_nan(c->over[col], (float)over);
}

void an_columns_permute(an_points *ps, const int *from, int n)
{
    for (size_t i = 0; i < ps->n; i++) {
        an_column *c = &ps->v[i];
        float u[AN_CHART_WI], o[AN_CHART_WI];
        memcpy(u, c->under, sizeof u);
        memcpy(o, c->over, sizeof o);
        for (int k = 0; k < AN_CHART_WI; k++) {
            int f = k < n ? from[k] : -1;
            c->under[k] = f >= 0 && f < AN_CHART_WI ? u[f] : NAN;
            c->over[k] = f >= 0 && f < AN_CHART_WI ? o[f] : NAN;
        }
    }
}

/* The record into its column: merged into it, or a new column in step order. *grew is set when
 * the column count passed AN_ENV_COLS (the caller widens the grid). */
int an_columns_add(an_run *r, an_points *ps, const ampdiag_trace_tensor *t, const int v1_fp8[2], int *grew)
{
    an_column one;
    for (int k = 0; k < AN_NROLES; k++)
        point_of(t, &one.role[k]);
    one.records = 1;
    fractions_of(t, v1_fp8, &one);
    if (r->rec_step_min > r->rec_step_max) /* the first record: the grid starts at its step */
        r->env_origin = t->step;
    if (t->step < r->rec_step_min)
        r->rec_step_min = t->step;
    if (t->step > r->rec_step_max)
        r->rec_step_max = t->step;
    int64_t key = column_key(r, t->step);
    size_t i = ps->n; /* where the column is or goes: usually at the end */
    while (i > 0 && column_key(r, ps->v[i - 1].role[0].step) > key)
        i--;
    if (i > 0 && column_key(r, ps->v[i - 1].role[0].step) == key) {
        column_merge(&ps->v[i - 1], &one);
        return 0;
    }
    if (vec_insert(ps, i, one))
        return -1;
    if (ps->n > AN_ENV_COLS)
        *grew = 1;
    return 0;
}

int64_t an_column_start(const an_run *r, const an_column *col)
{
    return r->env_origin + floor_div(col->role[0].step - r->env_origin, r->env_width) * r->env_width;
}
