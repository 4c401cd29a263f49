/*
 * report.c - the three renderings of a comparison: text (verdict first, then a table of the
 * runs side by side, then the evidence of each recommendation), Markdown (the same as tables
 * and lists, with links to the charts) and JSON (docs/compare-json.md). Every number printed
 * comes from analyze.c / recommend.c; nothing here decides anything.
 */
#include "report/report.h"
#include "numerics/numfmt.h"
#include "report/fp8.h"
#include "report/info.h"
#include "util/escape.h"
#include "util/json.h"
#include "util/util.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------------------------------
 * Per-run cells shared by the table renderings
 * ------------------------------------------------------------------------------------------ */

enum {
    ROW_STATUS,
    ROW_STEPS,
    ROW_LOSS,
    ROW_CURVE,
    ROW_NONFINITE,
    ROW_SKIPPED,
    ROW_SCALE,
    ROW_HEADROOM,
    ROW_FLUSH,
    ROW_LOST,
    ROW_RATIO,
    ROW_SPIKES,
    ROW_DIVERGED,
    NROWS
};

static const char *const row_label[NROWS] = {
    "status", "steps", "final loss", "loss curve gap", "NaN/inf events", "skipped steps",
    "loss scale", "min fp16 headroom", "fp16 flush to zero", "lost updates", "update/weight",
    "loss spikes", "diverged"};

static const char *kind_abbrev(int k)
{
    switch (k) {
    case AMPDIAG_KIND_ACTIVATION: return "act";
    case AMPDIAG_KIND_ACTIVATION_GRAD: return "agrad";
    case AMPDIAG_KIND_WEIGHT: return "weight";
    case AMPDIAG_KIND_WEIGHT_GRAD: return "wgrad";
    case AMPDIAG_KIND_UPDATE: return "update";
    default: return "?";
    }
}

static void pct(char *buf, size_t n, double f)
{
    if (!isfinite(f))
        snprintf(buf, n, "%s", isnan(f) ? "?" : f > 0 ? "+inf" : "-inf");
    else if (f == 0)
        snprintf(buf, n, "0%%");
    else if (fabs(f) < 1e-4)
        snprintf(buf, n, "%.2g%%", 100 * f);
    else
        snprintf(buf, n, "%.3g%%", 100 * f);
}

static uint64_t nonzero(const an_cell *c)
{
    uint64_t bad = c->zero + c->nan + c->posinf + c->neginf;
    return c->count > bad ? c->count - bad : 0;
}

/* Least FP16 headroom over activations and weights (layer, kind, binades); 0 if none. */
static int min_headroom(const an_run *r, int *layer, int *kind, double *bin, int *inf)
{
    int found = 0;
    *inf = 0;
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op)
            continue;
        for (int k = AMPDIAG_KIND_ACTIVATION; k <= AMPDIAG_KIND_WEIGHT; k += 2) {
            const an_cell *c = &L->cell[k];
            if (!c->records)
                continue;
            if (r->prec == PREC_FP16 && !L->island && c->posinf + c->neginf) {
                if (!*inf) {
                    *layer = (int)l;
                    *kind = k;
                    *bin = -INFINITY;
                }
                *inf = 1;
                found = 1;
                continue;
            }
            if (*inf || !(c->absmax > 0))
                continue;
            double h = log2(AMPDIAG_FP16_MAX / c->absmax);
            if (!found || h < *bin) {
                *layer = (int)l;
                *kind = k;
                *bin = h;
                found = 1;
            }
        }
    }
    return found;
}

/* Largest per-layer fraction of non-zero gradients that FP16 flushes, as the run held them. */
static int worst_flush(const an_run *r, int *layer, int *kind, double *frac)
{
    int found = 0;
    *frac = 0;
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        if (L->fp32_op)
            continue;
        for (int k = AMPDIAG_KIND_ACTIVATION_GRAD; k <= AMPDIAG_KIND_WEIGHT_GRAD; k += 2) {
            const an_cell *c = &L->cell[k];
            uint64_t z = nonzero(c);
            if (!z)
                continue;
            double f = (double)c->wi[AN_WI_FP16][AMPDIAG_WHATIF_UNDERFLOW] / (double)z;
            if (!found || f > *frac) {
                *frac = f;
                *layer = (int)l;
                *kind = k;
                found = 1;
            }
        }
    }
    return found;
}

static void cell_text(char *buf, size_t n, const an_run *runs, size_t i, const an_comparison *c, int row)
{
    const an_run *r = &runs[i];
    char a[64], b[64];
    buf[0] = 0;
    switch (row) {
    case ROW_STATUS:
        snprintf(buf, n, "%s", r->cut_off ? "cut off" : r->status_text);
        break;
    case ROW_STEPS:
        snprintf(buf, n, "%zu", r->nsteps);
        break;
    case ROW_LOSS: {
        const an_gap *g = NULL;
        for (size_t j = 0; j < c->nruns; j++)
            if (j != c->baseline && c->gap[j].have) {
                g = &c->gap[j];
                break;
            }
        if (i == c->baseline) {
            if (g)
                fmt_num(buf, n, g->base, 4);
            else if (r->nevals)
                fmt_num(buf, n, r->evals[r->nevals - 1].loss, 4);
            else
                fmt_num(buf, n, r->tail_mean, 4);
        } else if (c->gap[i].have) {
            const an_gap *gi = &c->gap[i];
            if (!isfinite(gi->value))
                snprintf(buf, n, "non-finite");
            else {
                pct(a, sizeof a, gi->rel);
                snprintf(buf, n, "%.4g (%s%s)", gi->value, gi->rel >= 0 ? "+" : "", a);
            }
        } else {
            snprintf(buf, n, "-");
        }
        break;
    }
    case ROW_CURVE:
        if (i == c->baseline || isnan(c->gap[i].curve_max_rel))
            snprintf(buf, n, "-");
        else {
            pct(a, sizeof a, c->gap[i].curve_max_rel);
            snprintf(buf, n, "%s%s (steps %" PRId64 "-%" PRId64 ")",
                     c->gap[i].curve_max_rel >= 0 && isfinite(c->gap[i].curve_max_rel) ? "+" : "",
                     a, c->gap[i].curve_max_from, c->gap[i].curve_max_to);
        }
        break;
    case ROW_NONFINITE: {
        size_t ne = r->by_code[AMPDIAG_EV_NAN_FORWARD] + r->by_code[AMPDIAG_EV_INF_FORWARD] +
                    r->by_code[AMPDIAG_EV_NAN_BACKWARD] + r->by_code[AMPDIAG_EV_INF_BACKWARD];
        if (r->fwd_nonfinite_step >= 0)
            snprintf(buf, n, "%zu (%s.act step %" PRId64 ")", ne, an_layer_name(r, r->fwd_nonfinite_layer),
                     r->fwd_nonfinite_step);
        else if (r->first_nonfinite.step >= 0)
            snprintf(buf, n, "%zu (%s step %" PRId64 ")", ne, an_layer_name(r, r->first_nonfinite.layer),
                     r->first_nonfinite.step);
        else
            snprintf(buf, n, "%zu", ne);
        break;
    }
    case ROW_SKIPPED:
        if (!r->skipped)
            snprintf(buf, n, "0");
        else {
            pct(a, sizeof a, r->nsteps ? (double)r->skipped / (double)r->nsteps : 0);
            snprintf(buf, n, "%zu (%s)", r->skipped, a);
        }
        break;
    case ROW_SCALE:
        if (!r->scaled)
            snprintf(buf, n, "-");
        else {
            rec_fmt_scale(a, sizeof a, r->scale_init);
            rec_fmt_scale(b, sizeof b, r->scale_final);
            char m[32];
            rec_fmt_scale(m, sizeof m, r->scale_min);
            if (r->scale_min < r->scale_final)
                snprintf(buf, n, "%s -> %s (min %s)", a, b, m);
            else
                snprintf(buf, n, "%s -> %s", a, b);
        }
        break;
    case ROW_HEADROOM: {
        int l = 0, k = 0, inf = 0;
        double h = 0;
        if (!min_headroom(r, &l, &k, &h, &inf))
            snprintf(buf, n, "-");
        else if (inf)
            snprintf(buf, n, "%s.%s inf", r->layers[l].name, kind_abbrev(k));
        else
            snprintf(buf, n, "%s.%s %+.1f%s", r->layers[l].name, kind_abbrev(k), h,
                     r->prec != PREC_FP16 ? "*" : "");
        break;
    }
    case ROW_FLUSH: {
        int l = 0, k = 0;
        double f = 0;
        if (r->prec == PREC_FP16)
            /* its gradients were held in FP16 already: nothing left to flush */
            snprintf(buf, n, "n/a (held in FP16)");
        else if (!worst_flush(r, &l, &k, &f))
            snprintf(buf, n, "-");
        else {
            pct(a, sizeof a, f);
            snprintf(buf, n, "%s.%s %s%s", r->layers[l].name, kind_abbrev(k), a,
                     r->prec != PREC_FP16 ? "*" : "");
        }
        break;
    }
    case ROW_LOST:
        if (!r->update_nonzero)
            snprintf(buf, n, "-");
        else {
            pct(a, sizeof a, r->find->lost_fraction);
            snprintf(buf, n, "%s", a);
        }
        break;
    case ROW_RATIO:
        if (isfinite(r->ratio_median))
            snprintf(buf, n, "%.2g", r->ratio_median);
        else if (isfinite(r->step_ratio_median))
            snprintf(buf, n, "%.2g (steps)", r->step_ratio_median);
        else
            snprintf(buf, n, "-");
        break;
    case ROW_SPIKES:
        snprintf(buf, n, "%zu", r->loss_spikes);
        break;
    case ROW_DIVERGED:
        if (r->diverged)
            snprintf(buf, n, "step %" PRId64, r->divergence_step);
        else
            snprintf(buf, n, "-");
        break;
    default:
        break;
    }
}

static void row_note(char *buf, size_t n, const an_comparison *c, const an_run *runs, int row)
{
    buf[0] = 0;
    char a[32];
    if (row == ROW_LOSS) {
        const an_gap *g = NULL;
        for (size_t j = 0; j < c->nruns; j++)
            if (j != c->baseline && c->gap[j].have) {
                g = &c->gap[j];
                break;
            }
        pct(a, sizeof a, c->band);
        if (g)
            snprintf(buf, n, "%s at step %" PRId64 "; noise band +-%s (%s)",
                     g->eval ? "eval loss" : "training loss, final window", g->step, a,
                     c->band_from_seeds ? "2 sigma over seeds"
                     : c->band_from_eval ? "max(1%, 2 SE of the baseline's eval loss over its examples)"
                                         : "max(1%, 2 SE of the baseline's final-window training loss)");
    } else if (row == ROW_HEADROOM) {
        snprintf(buf, n, "binades below 65504 (acts, weights)");
    } else if (row == ROW_FLUSH) {
        snprintf(buf, n, "gradients as held (at the run's loss scale)");
    } else if (row == ROW_LOST) {
        snprintf(buf, n, "of non-zero updates: fl(w + dw) == w");
    } else if (row == ROW_RATIO) {
        snprintf(buf, n, "median per-layer ||dw||/||w||, target ~1e-3");
    }
    (void)runs;
}

static int row_wanted(const an_run *runs, size_t n, int row)
{
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        const an_run *r = &runs[i];
        switch (row) {
        case ROW_CURVE: any |= n > 1; break;
        case ROW_SCALE: any |= r->scaled; break;
        case ROW_SPIKES: any |= r->loss_spikes > 0; break;
        case ROW_DIVERGED: any |= r->diverged; break;
        default: any = 1;
        }
    }
    return any;
}

static char *run_header(const an_run *runs, size_t i, const an_comparison *c, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s", runs[i].label, i == c->baseline ? " (baseline)" : "");
    return buf;
}

/* ------------------------------------------------------------------------------------------
 * Text
 * ------------------------------------------------------------------------------------------ */

/* What the verdict line says about the formats not chosen. */
static void verdict_also(const recommendation *R, char *buf, size_t n)
{
    char sc[32];
    rec_fmt_scale(sc, sizeof sc, ldexp(1.0, R->scale.have ? R->scale.log2 : 16));
    buf[0] = 0;
    switch (R->precision) {
    case REC_BF16:
        if (R->fp16.viable)
            snprintf(buf, n, "fp16 + dynamic loss scaling (initial %s) works too.", sc);
        else if (R->fp16.summary[0])
            snprintf(buf, n, "Not fp16: %s.", R->fp16.summary);
        break;
    case REC_FP16:
        if (R->bf16.summary[0])
            snprintf(buf, n, "Not bf16: %s.", R->bf16.summary);
        break;
    case REC_FP32:
        snprintf(buf, n, "Not fp16: %s; not bf16: %s.", R->fp16.summary[0] ? R->fp16.summary : "see below",
                 R->bf16.summary[0] ? R->bf16.summary : "see below");
        break;
    default:
        break;
    }
}

/* Print `text` (escaped for the terminal) after a label column of width `lw`, wrapped at
 * `width`. */
static void wrap(FILE *f, const char *label, int lw, const char *text, int width)
{
    size_t size = STR_ESCAPED_SIZE(strlen(text));
    char *esc = malloc(size);
    const char *p = esc ? str_escape_ctl(esc, size, text) : "(out of memory)";
    int col = fprintf(f, "%-*s", lw, label ? label : "");
    int avail = width - lw;
    if (avail < 30)
        avail = 30;
    int first = 1;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        /* take as many words as fit */
        int len = (int)strlen(p), take = len;
        if (len > avail) {
            take = avail;
            while (take > 0 && p[take] != ' ')
                take--;
            if (take == 0) { /* one long word */
                take = avail;
                while (p[take] && p[take] != ' ')
                    take++;
            }
        }
        if (!first)
            fprintf(f, "\n%*s", lw, "");
        fprintf(f, "%.*s", take, p);
        first = 0;
        p += take;
    }
    (void)col;
    fputc('\n', f);
    free(esc);
}

static void text_list(FILE *f, const char *label, const strlist *l, const char *prefix, int width)
{
    for (size_t i = 0; i < l->n; i++) {
        char *line = malloc(strlen(prefix) + strlen(l->s[i]) + 1);
        if (!line) {
            wrap(f, i == 0 ? label : "", 11, l->s[i], width);
            continue;
        }
        strcpy(line, prefix);
        strcat(line, l->s[i]);
        wrap(f, i == 0 ? label : "", 11, line, width);
        free(line);
    }
}

/* One remedy as a line: "--optim-state fp32 (every run): AdamW eps ...". */
static void remedy_line(char *buf, size_t n, const rec_remedy *m)
{
    snprintf(buf, n, "%s %s (%s): %s", m->option, m->value,
             m->scope == REM_EVERY_RUN ? "every run" : "the recommended precision's run", m->why);
}

/* What an FP8 recipe would do to each run that recorded delayed-scaling counts. */
static void text_fp8_runs(FILE *f, const an_run *runs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!runs[i].find->fp8.delayed)
            continue;
        char esc[STR_ESCAPED_SIZE(sizeof runs[i].label)];
        fprintf(f, "%-11s%s:\n", "FP8", str_escape_ctl(esc, sizeof esc, runs[i].label));
        report_text_fp8(f, &runs[i], &runs[i].find->fp8, "           ");
    }
}

int report_text(FILE *f, const an_run *runs, size_t n, const an_comparison *c, const recommendation *R,
                const report_opts *o)
{
    int width = o && o->width > 40 ? o->width : 100;
    char line[1600];

    /* verdict first */
    char also[512];
    verdict_also(R, also, sizeof also);
    snprintf(line, sizeof line, "%s.%s%s", R->verdict, also[0] ? " " : "", also);
    wrap(f, "Verdict:", 9, line, width);
    snprintf(line, sizeof line, "LR %s. Clip %s.", R->lr_line, R->clip_line);
    wrap(f, "", 9, line, width);
    if (R->fail_held & R->fail_mask) {
        line[0] = 0;
        for (unsigned b = 1; b <= FAIL_OVERFLOW; b <<= 1)
            if (R->fail_held & R->fail_mask & b) {
                strcat(line, line[0] ? "," : "");
                strcat(line, rec_fail_name(b));
            }
        fprintf(f, "%-9s--fail-on: %s held (exit status 1)\n", "", line);
    }
    fputc('\n', f);

    /* table */
    enum { CW = 40 };
    int lw = 20;
    int *cw = calloc(n ? n : 1, sizeof *cw);
    if (!cw)
        return -1;
    char cell[256], esc[STR_ESCAPED_SIZE(sizeof cell)];
    for (size_t i = 0; i < n; i++) {
        cw[i] = (int)strlen(str_escape_ctl(esc, sizeof esc, run_header(runs, i, c, cell, sizeof cell)));
        for (int row = 0; row < NROWS; row++) {
            if (!row_wanted(runs, n, row))
                continue;
            cell_text(cell, sizeof cell, runs, i, c, row);
            int w = (int)strlen(str_escape_ctl(esc, sizeof esc, cell));
            if (w > cw[i])
                cw[i] = w < CW ? w : CW;
        }
    }
    fprintf(f, "%-*s", lw, "");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%-*s  ", cw[i],
                str_escape_ctl(esc, sizeof esc, run_header(runs, i, c, cell, sizeof cell)));
    fputc('\n', f);
    for (int row = 0; row < NROWS; row++) {
        if (!row_wanted(runs, n, row))
            continue;
        fprintf(f, "%-*s", lw, row_label[row]);
        for (size_t i = 0; i < n; i++) {
            cell_text(cell, sizeof cell, runs, i, c, row);
            fprintf(f, "%-*s  ", cw[i], str_escape_ctl(esc, sizeof esc, cell));
        }
        row_note(cell, sizeof cell, c, runs, row);
        fprintf(f, "%s\n", cell);
    }
    free(cw);
    fprintf(f, "%-*s* predicted from a run in another precision (what FP16 would do)\n\n", lw, "");

    /* evidence */
    wrap(f, "Precision", 11, R->verdict, width);
    text_list(f, "", &R->why, "", width);
    for (int fmt = 0; fmt < 2; fmt++) {
        const rec_format *F = fmt ? &R->bf16 : &R->fp16;
        const char *nm = fmt ? " bf16" : " fp16";
        text_list(f, nm, &F->issues, "- ", width);
        text_list(f, F->issues.n ? "" : nm, &F->good, "+ ", width);
    }
    if (R->scale.have) {
        char a[32], b[32];
        rec_fmt_scale(a, sizeof a, ldexp(1.0, R->scale.log2));
        pct(b, sizeof b, R->scale.flushed);
        snprintf(line, sizeof line,
                 "%s for fp16 (static, or --scale-init for the dynamic scaler): the largest gradient "
                 "%.3g (2^%.1f, %s %s, step %" PRId64 ") times %s stays under 65504/2; %s of the worst "
                 "layer's gradients still flush to zero at it%s",
                 a, R->scale.max_grad, log2(R->scale.max_grad),
                 runs[R->scale.run].layers[R->scale.max_grad_layer].name,
                 kind_abbrev(R->scale.max_grad_kind), R->scale.max_grad_step, a, b,
                 R->scale.from_hist ? "" : " (bound: no histograms)");
        wrap(f, "Loss scale", 11, line, width);
    }
    for (size_t i = 0; i < R->nremedies; i++) {
        remedy_line(line, sizeof line, &R->remedies[i]);
        wrap(f, i ? "" : "Run with", 11, line, width);
    }
    wrap(f, "LR", 11, R->lr_line, width);
    text_list(f, "", &R->lr_why, "", width);
    wrap(f, "Clip", 11, R->clip_line, width);
    text_list(f, "", &R->clip_why, "", width);
    text_fp8_runs(f, runs, n);
    if (R->warnings.n)
        text_list(f, "Warnings", &R->warnings, "", width);
    if (c->notes.n)
        text_list(f, "Runs", &c->notes, "", width);
    if (o && o->plots_dir) {
        size_t drawn = 0;
        for (size_t i = 0; i < o->ncharts; i++)
            drawn += o->charts[i].drawn != 0;
        snprintf(line, sizeof line, "%zu of %zu drawn in %s%s%s", drawn, o->ncharts, o->plots_dir,
                 o->charts_note ? ": " : "", o->charts_note ? o->charts_note : "");
        wrap(f, "Charts", 11, line, width);
    }
    if (R->fail_mask && R->fail_why.n)
        text_list(f, "Fail-on", &R->fail_why, "", width);
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------
 * Markdown
 * ------------------------------------------------------------------------------------------ */

/* Markdown-safe text: nothing in it breaks a table cell or adds markup (util/escape.h). */
static void md(FILE *f, const char *s) { str_fputs(s, SINK_MD, f); }

static void md_list(FILE *f, const strlist *l, const char *prefix)
{
    for (size_t i = 0; i < l->n; i++) {
        fputs("- ", f);
        if (prefix)
            fputs(prefix, f);
        md(f, l->s[i]);
        fputc('\n', f);
    }
}

/* Per layer and kind of one run: FP16/BF16 headroom and what-if fractions (a collapsed table). */
static void md_ranges(FILE *f, const an_run *r)
{
    static const int kinds[] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_WEIGHT, AMPDIAG_KIND_ACTIVATION_GRAD,
                                AMPDIAG_KIND_WEIGHT_GRAD};
    fprintf(f, "\n<details><summary>Ranges per layer in ");
    str_fputs(r->label, SINK_HTML, f); /* an HTML block: Markdown's escapes do not work there */
    fprintf(f, " (FP16/BF16 headroom in binades, what FP16/BF16 would do to the values as held)"
               "</summary>\n\n");
    fprintf(f, "| layer | kind | absmax (step) | fp16 headroom over | fp16 headroom under | fp16 overflow "
               "| fp16 flushed | fp16 subnormal | bf16 flushed |\n|---|---|---|---|---|---|---|---|---|\n");
    for (size_t l = 0; l < r->nlayers; l++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            const an_cell *c = &r->layers[l].cell[kinds[k]];
            if (!c->records)
                continue;
            char a[32], b[32], d[32], e[32];
            uint64_t z = nonzero(c);
            pct(a, sizeof a, c->count ? (double)c->wi[AN_WI_FP16][AMPDIAG_WHATIF_OVERFLOW] / (double)c->count : 0);
            pct(b, sizeof b, z ? (double)c->wi[AN_WI_FP16][AMPDIAG_WHATIF_UNDERFLOW] / (double)z : 0);
            pct(d, sizeof d, c->count ? (double)c->wi[AN_WI_FP16][AMPDIAG_WHATIF_SUBNORMAL] / (double)c->count : 0);
            pct(e, sizeof e, z ? (double)c->wi[AN_WI_BF16][AMPDIAG_WHATIF_UNDERFLOW] / (double)z : 0);
            fprintf(f, "| ");
            md(f, r->layers[l].name);
            fprintf(f, " | %s | ", kind_abbrev(kinds[k]));
            if (c->absmax >= 0)
                fprintf(f, "%.3g (%" PRId64 ") | %+.1f | ", c->absmax, c->absmax_step, log2(AMPDIAG_FP16_MAX / c->absmax));
            else
                fprintf(f, "- | - | ");
            if (isfinite(c->absmin_nz))
                fprintf(f, "%+.1f", log2(c->absmin_nz / 0x1p-14));
            else
                fprintf(f, "-");
            fprintf(f, " | %s | %s | %s | %s |\n", a, b, d, e);
        }
    fprintf(f, "\n</details>\n");
}

int report_markdown(FILE *f, const an_run *runs, size_t n, const an_comparison *c,
                    const recommendation *R, const report_opts *o)
{
    char cell[256];
    char also[512];
    verdict_also(R, also, sizeof also);
    fprintf(f, "## ampdiag compare\n\n**Verdict:** ");
    md(f, R->verdict);
    if (also[0]) {
        fputs(". ", f);
        md(f, also);
    }
    fprintf(f, "  \n**LR:** ");
    md(f, R->lr_line);
    fprintf(f, "  \n**Clip:** ");
    md(f, R->clip_line);
    fprintf(f, "\n");
    if (R->fail_held & R->fail_mask) {
        fprintf(f, "\n**--fail-on held:**");
        for (unsigned b = 1; b <= FAIL_OVERFLOW; b <<= 1)
            if (R->fail_held & R->fail_mask & b)
                fprintf(f, " `%s`", rec_fail_name(b));
        fprintf(f, "\n");
    }
    fprintf(f, "\n| |");
    for (size_t i = 0; i < n; i++) {
        fputc(' ', f);
        md(f, run_header(runs, i, c, cell, sizeof cell));
        fprintf(f, " |");
    }
    fprintf(f, " note |\n|---|");
    for (size_t i = 0; i <= n; i++)
        fprintf(f, "---|");
    fputc('\n', f);
    for (int row = 0; row < NROWS; row++) {
        if (!row_wanted(runs, n, row))
            continue;
        fprintf(f, "| %s |", row_label[row]);
        for (size_t i = 0; i < n; i++) {
            cell_text(cell, sizeof cell, runs, i, c, row);
            fputc(' ', f);
            md(f, cell);
            fprintf(f, " |");
        }
        row_note(cell, sizeof cell, c, runs, row);
        fputc(' ', f);
        md(f, cell);
        fprintf(f, " |\n");
    }
    fprintf(f, "\n\\* predicted from a run in another precision (what FP16 would do)\n");
    md_ranges(f, &runs[c->baseline]);
    fprintf(f, "\n### Precision\n\n");
    md_list(f, &R->why, NULL);
    md_list(f, &R->fp16.issues, "fp16 ✗ ");
    md_list(f, &R->fp16.good, "fp16 ✓ ");
    md_list(f, &R->bf16.issues, "bf16 ✗ ");
    md_list(f, &R->bf16.good, "bf16 ✓ ");
    if (R->scale.have) {
        char a[32], b[32];
        rec_fmt_scale(a, sizeof a, ldexp(1.0, R->scale.log2));
        pct(b, sizeof b, R->scale.flushed);
        fprintf(f, "\n### Loss scale\n\n- ");
        snprintf(cell, sizeof cell, "%s: largest gradient %.3g (%s %s, step %" PRId64
                 ") stays under 65504/2; %s of the worst layer's gradients still flush to zero",
                 a, R->scale.max_grad, runs[R->scale.run].layers[R->scale.max_grad_layer].name,
                 kind_abbrev(R->scale.max_grad_kind), R->scale.max_grad_step, b);
        md(f, cell);
        fputc('\n', f);
    }
    if (R->nremedies)
        fprintf(f, "\n### Run with\n\n");
    for (size_t i = 0; i < R->nremedies; i++) {
        char rl[sizeof R->remedies[i].value + 512];
        remedy_line(rl, sizeof rl, &R->remedies[i]);
        fputs("- ", f);
        md(f, rl);
        fputc('\n', f);
    }
    fprintf(f, "\n### Learning rate\n\n**");
    md(f, R->lr_line);
    fprintf(f, "**\n\n");
    md_list(f, &R->lr_why, NULL);
    fprintf(f, "\n### Clip\n\n**");
    md(f, R->clip_line);
    fprintf(f, "**\n\n");
    md_list(f, &R->clip_why, NULL);
    if (R->warnings.n) {
        fprintf(f, "\n### Warnings\n\n");
        md_list(f, &R->warnings, NULL);
    }
    if (c->notes.n) {
        fprintf(f, "\n### Runs compared\n\n");
        md_list(f, &c->notes, NULL);
    }
    fprintf(f, "\n| run | file | precision | model | data | seed | lr |\n|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        const an_run *r = &runs[i];
        fprintf(f, "| ");
        md(f, r->label);
        fprintf(f, " | ");
        str_fputs_md_code(r->path, f);
        fprintf(f, " | ");
        md(f, r->precision);
        fprintf(f, " | ");
        md(f, r->model);
        fprintf(f, " | ");
        md(f, r->data);
        fprintf(f, " | %" PRId64 " | %g |\n", r->seed, r->lr);
    }
    if (o && o->plots_dir) {
        fprintf(f, "\n### Charts\n\n");
        for (size_t i = 0; i < o->ncharts; i++) {
            const report_chart *ch = &o->charts[i];
            const char *dir = o->md_plots_dir ? o->md_plots_dir : o->plots_dir;
            if (ch->drawn) {
                fprintf(f, "![");
                md(f, ch->desc);
                fputs("](", f);
                str_fputs(dir, SINK_TEXT, f);
                fprintf(f, "/%s)\n\n", ch->file);
            } else {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s", dir, ch->file);
                fputs("- ", f);
                str_fputs_md_code(path, f);
                fputs(" (not drawn): ", f);
                md(f, ch->desc);
                fputc('\n', f);
            }
        }
        if (o->charts_note) {
            fputc('\n', f);
            md(f, o->charts_note);
            fputc('\n', f);
        }
    }
    if (R->fail_mask && R->fail_why.n) {
        fprintf(f, "\n### --fail-on\n\n");
        md_list(f, &R->fail_why, NULL);
    }
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------
 * JSON
 * ------------------------------------------------------------------------------------------ */

static void jw_strlist(jw *w, const char *k, const strlist *l)
{
    jw_open(w, k, '[');
    for (size_t i = 0; i < l->n; i++)
        jw_str(w, NULL, l->s[i]);
    jw_close(w, ']');
}

static void jw_layer_name(jw *w, const char *k, const an_run *r, int layer)
{
    if (layer < 0 || (size_t)layer >= r->nlayers)
        jw_str(w, k, NULL);
    else
        jw_str(w, k, r->layers[layer].name);
}

static void json_cell(jw *w, const an_cell *c, int kind)
{
    uint64_t z = nonzero(c);
    jw_open(w, ampdiag_kind_name(kind), '{');
    jw_u64(w, "records", c->records);
    jw_u64(w, "values", c->count);
    jw_u64(w, "nonzero", z);
    jw_u64(w, "nan", c->nan);
    jw_u64(w, "posinf", c->posinf);
    jw_u64(w, "neginf", c->neginf);
    jw_num(w, "absmax", c->absmax >= 0 ? c->absmax : NAN);
    jw_opt_int(w, "absmax_step", c->absmax >= 0 ? c->absmax_step : -1);
    jw_num(w, "absmin_nz", c->absmin_nz);
    jw_num(w, "absmax_unscaled", c->absmax_u >= 0 ? c->absmax_u : NAN);
    jw_num(w, "fp16_headroom_over", c->absmax > 0 ? log2(AMPDIAG_FP16_MAX / c->absmax) : NAN);
    jw_num(w, "fp16_headroom_under", isfinite(c->absmin_nz) ? log2(c->absmin_nz / 0x1p-14) : NAN);
    jw_num(w, "bf16_headroom_over", c->absmax > 0 ? log2(3.3895313892515355e38 / c->absmax) : NAN);
    jw_num(w, "bf16_headroom_under", isfinite(c->absmin_nz) ? log2(c->absmin_nz / 0x1p-126) : NAN);
    double d = c->count ? (double)c->count : NAN;
    jw_open(w, "fp16", '{');
    jw_u64(w, "overflow", c->wi[AN_WI_FP16][AMPDIAG_WHATIF_OVERFLOW]);
    jw_u64(w, "underflow", c->wi[AN_WI_FP16][AMPDIAG_WHATIF_UNDERFLOW]);
    jw_u64(w, "subnormal", c->wi[AN_WI_FP16][AMPDIAG_WHATIF_SUBNORMAL]);
    jw_num(w, "overflow_fraction", (double)c->wi[AN_WI_FP16][AMPDIAG_WHATIF_OVERFLOW] / d);
    jw_num(w, "underflow_fraction", z ? (double)c->wi[AN_WI_FP16][AMPDIAG_WHATIF_UNDERFLOW] / (double)z : NAN);
    jw_num(w, "subnormal_fraction", (double)c->wi[AN_WI_FP16][AMPDIAG_WHATIF_SUBNORMAL] / d);
    jw_close(w, '}');
    jw_open(w, "bf16", '{');
    jw_u64(w, "overflow", c->wi[AN_WI_BF16][AMPDIAG_WHATIF_OVERFLOW]);
    jw_u64(w, "underflow", c->wi[AN_WI_BF16][AMPDIAG_WHATIF_UNDERFLOW]);
    jw_u64(w, "subnormal", c->wi[AN_WI_BF16][AMPDIAG_WHATIF_SUBNORMAL]);
    jw_num(w, "overflow_fraction", (double)c->wi[AN_WI_BF16][AMPDIAG_WHATIF_OVERFLOW] / d);
    jw_num(w, "underflow_fraction", z ? (double)c->wi[AN_WI_BF16][AMPDIAG_WHATIF_UNDERFLOW] / (double)z : NAN);
    jw_num(w, "subnormal_fraction", (double)c->wi[AN_WI_BF16][AMPDIAG_WHATIF_SUBNORMAL] / d);
    jw_close(w, '}');
    if (kind == AMPDIAG_KIND_UPDATE) {
        jw_u64(w, "lost_updates", c->lost);
        jw_num(w, "lost_fraction", z ? (double)c->lost / (double)z : NAN);
    }
    jw_opt_int(w, "first_nonfinite_step", c->first_nonfinite_step);
    jw_close(w, '}');
}

static void json_event(jw *w, const char *k, const an_run *r, const an_event_ref *e)
{
    if (e->step < 0) {
        jw_key(w, k);
        fputs("null", w->f);
        return;
    }
    jw_open(w, k, '{');
    jw_int(w, "step", e->step);
    jw_layer_name(w, "layer", r, e->layer);
    jw_str(w, "code", ampdiag_event_name(e->code));
    jw_num(w, "value", e->value);
    jw_str(w, "message", e->message);
    jw_close(w, '}');
}

static void json_run(jw *w, const an_run *r, size_t i, const an_comparison *c)
{
    jw_open(w, NULL, '{');
    jw_int(w, "index", (int64_t)i);
    jw_str(w, "label", r->label);
    jw_str(w, "path", r->path);
    jw_bool(w, "baseline", i == c->baseline);
    jw_str(w, "precision", r->precision);
    jw_str(w, "model", r->model);
    jw_str(w, "data", r->data);
    jw_opt_int(w, "seed", r->seed);
    jw_str(w, "optimizer", r->optimizer);
    jw_num(w, "lr", r->lr);
    jw_num(w, "clip", r->clip);
    jw_str(w, "loss_scale_mode", r->loss_scale_mode);
    jw_str(w, "fp32_layers", r->fp32_layers);
    jw_str(w, "status", r->status_text);
    jw_bool(w, "cut_off", r->cut_off);
    jw_int(w, "steps", (int64_t)r->nsteps);
    jw_opt_int(w, "steps_planned", r->steps_planned);
    jw_u64(w, "params", r->params);

    jw_open(w, "loss", '{');
    jw_num(w, "first", r->loss_first);
    jw_num(w, "last", r->loss_last);
    jw_num(w, "min", r->loss_min);
    jw_opt_int(w, "min_step", isnan(r->loss_min) ? -1 : r->loss_min_step);
    jw_num(w, "final_window_mean", r->tail_mean);
    jw_num(w, "final_window_sd", r->tail_sd);
    jw_int(w, "final_window_steps", (int64_t)r->tail_w);
    jw_int(w, "nonfinite_steps", (int64_t)r->loss_nonfinite);
    jw_opt_int(w, "first_nonfinite_step", r->first_nonfinite_loss_step);
    jw_close(w, '}');
    if (r->nevals) {
        const ampdiag_trace_eval *e = &r->evals[r->nevals - 1];
        jw_open(w, "eval", '{');
        jw_int(w, "step", e->step);
        jw_num(w, "loss", e->loss);
        jw_num(w, "metric", e->metric);
        jw_int(w, "count", (int64_t)r->nevals);
        jw_close(w, '}');
    } else {
        jw_key(w, "eval");
        fputs("null", w->f);
    }
    const an_gap *g = &c->gap[i];
    if (g->have) {
        jw_open(w, "gap", '{');
        jw_str(w, "metric", g->eval ? "eval_loss" : "final_window_training_loss");
        jw_int(w, "step", g->step);
        jw_num(w, "baseline", g->base);
        jw_num(w, "value", g->value);
        jw_num(w, "relative", g->rel);
        jw_bool(w, "within_band", isfinite(g->rel) && fabs(g->rel) <= c->band);
        jw_num(w, "curve_max_relative", g->curve_max_rel);
        jw_opt_int(w, "curve_max_from", g->curve_max_from);
        jw_opt_int(w, "curve_max_to", g->curve_max_to);
        jw_close(w, '}');
    } else {
        jw_key(w, "gap");
        fputs("null", w->f);
    }

    jw_open(w, "stability", '{');
    size_t ne = r->by_code[AMPDIAG_EV_NAN_FORWARD] + r->by_code[AMPDIAG_EV_INF_FORWARD] +
                r->by_code[AMPDIAG_EV_NAN_BACKWARD] + r->by_code[AMPDIAG_EV_INF_BACKWARD];
    jw_int(w, "nonfinite_events", (int64_t)ne);
    json_event(w, "first_nonfinite_event", r, &r->first_nonfinite);
    json_event(w, "first_forward_event", r, &r->first_forward);
    json_event(w, "eval_forward_event", r, &r->eval_forward);
    jw_opt_int(w, "forward_nonfinite_step", r->fwd_nonfinite_step);
    jw_layer_name(w, "forward_nonfinite_layer", r, r->fwd_nonfinite_layer);
    jw_u64(w, "nan_values", r->nan_values);
    jw_int(w, "skipped", (int64_t)r->skipped);
    jw_int(w, "calibration_steps", (int64_t)r->calib);
    jw_int(w, "skipped_after_calibration", (int64_t)r->skipped_after);
    jw_num(w, "skip_rate_after_calibration",
           r->steps_after ? (double)r->skipped_after / (double)r->steps_after : NAN);
    jw_opt_int(w, "first_skip_step", r->first_skip_step);
    jw_str(w, "first_skip_reason", r->skipped ? r->first_skip_reason : NULL);
    jw_open(w, "loss_scale", '{');
    report_json_scale_keys(w, r);
    jw_num(w, "scaler_min", r->scaler_min > 0 ? r->scaler_min : NAN);
    jw_int(w, "steps_at_min", (int64_t)r->steps_at_min);
    jw_bool(w, "collapsed", r->collapsed);
    jw_close(w, '}');
    jw_bool(w, "diverged", r->diverged);
    jw_opt_int(w, "divergence_step", r->divergence_step);
    jw_int(w, "loss_spikes", (int64_t)r->loss_spikes);
    jw_open(w, "loss_spike_steps", '[');
    for (size_t k = 0; k < r->n_spike_listed; k++)
        jw_int(w, NULL, r->spike_steps[k]);
    jw_close(w, ']');
    jw_close(w, '}');

    const an_clip *k = &r->gn;
    jw_open(w, "grad_norm", '{');
    jw_int(w, "count", (int64_t)k->n);
    jw_int(w, "warmup", (int64_t)k->warmup);
    jw_num(w, "median", k->median);
    jw_num(w, "mad", k->mad);
    jw_num(w, "p10", k->p10);
    jw_num(w, "p99", k->p99);
    jw_num(w, "median_plus_3mad", k->robust);
    jw_num(w, "clip_value", k->value);
    jw_num(w, "clip_fraction", k->n ? (double)k->n_over / (double)k->n : NAN);
    jw_open(w, "clip_steps", '[');
    for (size_t j = 0; j < k->n_over_listed; j++)
        jw_int(w, NULL, k->over_steps[j]);
    jw_close(w, ']');
    jw_int(w, "clipped_by_run", (int64_t)k->actually_clipped);
    jw_close(w, '}');

    jw_open(w, "updates", '{');
    jw_num(w, "ratio_median", r->ratio_median);
    jw_num(w, "step_ratio_median", r->step_ratio_median);
    jw_u64(w, "lost", r->lost);
    jw_u64(w, "nonzero", r->update_nonzero);
    jw_num(w, "lost_fraction", r->find->lost_fraction);
    /* what-if: null for traces without the lost_if_* fields */
    jw_num(w, "lost_if_fp16_fraction", r->find->lost_if_fp16);
    jw_num(w, "lost_if_bf16_fraction", r->find->lost_if_bf16);
    jw_bool(w, "weights_16bit", r->weights_16bit);
    jw_close(w, '}');
    report_json_fp8(w, r, &r->find->fp8);

    jw_open(w, "layers", '[');
    for (size_t l = 0; l < r->nlayers; l++) {
        const an_layer *L = &r->layers[l];
        jw_open(w, NULL, '{');
        jw_str(w, "name", L->name);
        jw_str(w, "op", L->op);
        jw_u64(w, "params", L->params);
        jw_bool(w, "fp32_op", L->fp32_op);
        jw_bool(w, "fp32_island", L->island);
        int m = c->layer_map && c->layer_map[i] ? c->layer_map[i][l] : -1;
        jw_bool(w, "matched", m >= 0);
        jw_num(w, "update_ratio_median", L->ratio_median);
        double dev = NAN;
        if (c->dev && c->dev[i])
            for (size_t d = 0; d < c->ndev[i]; d++)
                if (c->dev[i][d].layer == (int)l)
                    dev = c->dev[i][d].rel;
        jw_num(w, "activation_deviation", dev);
        jw_open(w, "kinds", '{');
        for (int kk = 0; kk < AMPDIAG_NKINDS; kk++)
            if (L->cell[kk].records)
                json_cell(w, &L->cell[kk], kk);
        jw_close(w, '}');
        jw_close(w, '}');
    }
    jw_close(w, ']');
    report_json_findings(w, "findings", r);
    jw_close(w, '}');
}

static void json_format(jw *w, const char *k, const rec_format *f)
{
    jw_open(w, k, '{');
    jw_bool(w, "supported", f->supported);
    jw_bool(w, "observed", f->observed);
    jw_bool(w, "viable", f->viable);
    jw_bool(w, "ruled_out", f->decisive);
    jw_bool(w, "needs_loss_scaling", f->needs_scaling != 0);
    jw_strlist(w, "issues", &f->issues);
    jw_strlist(w, "evidence", &f->good);
    jw_close(w, '}');
}

int report_json(FILE *f, const an_run *runs, size_t n, const an_comparison *c, const recommendation *R,
                const report_opts *o)
{
    jw w;
    jw_begin(&w, f);
    jw_open(&w, NULL, '{');
    jw_str(&w, "format", "ampdiag-compare");
    jw_int(&w, "format_version", REPORT_JSON_VERSION);
    jw_int(&w, "version", REPORT_JSON_VERSION); /* the name of format_version before 0.2 */
    jw_str(&w, "tool_version", ampdiag_version());
    jw_str(&w, "target", rec_target_name(R->target));
    jw_int(&w, "baseline", (int64_t)c->baseline);
    jw_open(&w, "noise_band", '{');
    jw_num(&w, "relative", c->band);
    jw_str(&w, "source", c->band_from_seeds ? "seeds" : c->band_from_eval ? "baseline_eval_standard_error"
                                                                          : "baseline_final_window");
    jw_int(&w, "seeds", (int64_t)c->band_seeds);
    jw_num(&w, "baseline_final_window_relative", c->tail_noise_rel);
    jw_close(&w, '}');
    jw_strlist(&w, "notes", &c->notes);
    jw_open(&w, "runs", '[');
    for (size_t i = 0; i < n; i++)
        json_run(&w, &runs[i], i, c);
    jw_close(&w, ']');

    jw_open(&w, "recommendation", '{');
    jw_open(&w, "precision", '{');
    jw_str(&w, "verdict", rec_precision_name(R->precision));
    jw_str(&w, "text", R->verdict);
    jw_bool(&w, "predicted", R->predicted);
    jw_bool(&w, "master_weights", R->precision == REC_BF16 || R->master_weights);
    jw_open(&w, "fp32_layers", '[');
    for (const char *p = R->fp32_layers; *p;) {
        size_t len = strcspn(p, ",");
        char name[AMPDIAG_TRACE_NAME_LEN];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        jw_str(&w, NULL, name);
        p += len;
        if (*p == ',')
            p++;
    }
    jw_close(&w, ']');
    jw_open(&w, "islands", '{');
    jw_str(&w, "layers", R->islands[0] ? R->islands : NULL);
    jw_num(&w, "params_share", R->islands_param_share);
    jw_num(&w, "flops_share", R->islands_flop_share);
    if (R->islands_forward_finite < 0)
        jw_null(&w, "forward_finite");
    else
        jw_bool(&w, "forward_finite", R->islands_forward_finite);
    jw_close(&w, '}');
    jw_strlist(&w, "reasons", &R->why);
    /* the evidence that decided, first: the first reason (baseline sanity and format causes are
     * ranked before the rest) */
    jw_str(&w, "decisive_evidence", R->why.n ? R->why.s[0] : NULL);
    json_format(&w, "fp16", &R->fp16);
    json_format(&w, "bf16", &R->bf16);
    jw_close(&w, '}');
    if (R->scale.have) {
        const rec_scale *s = &R->scale;
        const an_run *sr = &runs[s->run];
        jw_open(&w, "loss_scale", '{');
        jw_num(&w, "value", ldexp(1.0, s->log2));
        jw_int(&w, "log2", s->log2);
        jw_int(&w, "from_run", (int64_t)s->run);
        jw_num(&w, "max_gradient", s->max_grad);
        jw_layer_name(&w, "max_gradient_layer", sr, s->max_grad_layer);
        jw_str(&w, "max_gradient_kind", ampdiag_kind_name(s->max_grad_kind));
        jw_opt_int(&w, "max_gradient_step", s->max_grad_step);
        jw_bool(&w, "from_histograms", s->from_hist);
        jw_num(&w, "flushed_fraction", s->flushed);
        jw_layer_name(&w, "flushed_layer", sr, s->flushed_layer);
        jw_num(&w, "subnormal_fraction", s->subnormal);
        jw_layer_name(&w, "subnormal_layer", sr, s->subnormal_layer);
        jw_num(&w, "unscaled_flushed_fraction", s->flushed1);
        jw_layer_name(&w, "unscaled_flushed_layer", sr, s->flushed1_layer);
        jw_num(&w, "gradient_range_log2", s->range_log2);
        jw_close(&w, '}');
    } else {
        jw_key(&w, "loss_scale");
        fputs("null", f);
    }
    jw_open(&w, "remedies", '[');
    for (size_t i = 0; i < R->nremedies; i++) {
        jw_open(&w, NULL, '{');
        jw_str(&w, "option", R->remedies[i].option);
        jw_str(&w, "value", R->remedies[i].value);
        jw_str(&w, "scope", rec_scope_name(R->remedies[i].scope));
        jw_str(&w, "why", R->remedies[i].why);
        jw_close(&w, '}');
    }
    jw_close(&w, ']');
    jw_open(&w, "lr", '{');
    jw_str(&w, "verdict", rec_lr_name(R->lr));
    jw_str(&w, "text", R->lr_line);
    jw_num(&w, "current", R->lr_current);
    jw_num(&w, "factor", R->lr_factor);
    jw_num(&w, "suggested", R->lr_suggested);
    jw_strlist(&w, "reasons", &R->lr_why);
    jw_close(&w, '}');
    jw_open(&w, "clip", '{');
    jw_num(&w, "value", R->clip_have ? R->clip_value : NAN);
    jw_num(&w, "fraction_clipped", R->clip_have ? R->clip_frac : NAN);
    jw_num(&w, "autoclip_p10", R->clip_have ? R->clip_autoclip : NAN);
    jw_str(&w, "text", R->clip_line);
    jw_strlist(&w, "reasons", &R->clip_why);
    jw_close(&w, '}');
    jw_strlist(&w, "warnings", &R->warnings);
    jw_close(&w, '}');

    jw_open(&w, "fail_on", '{');
    jw_open(&w, "requested", '[');
    for (unsigned b = 1; b <= FAIL_OVERFLOW; b <<= 1)
        if (R->fail_mask & b)
            jw_str(&w, NULL, rec_fail_name(b));
    jw_close(&w, ']');
    jw_open(&w, "held", '[');
    for (unsigned b = 1; b <= FAIL_OVERFLOW; b <<= 1)
        if (R->fail_held & b)
            jw_str(&w, NULL, rec_fail_name(b));
    jw_close(&w, ']');
    jw_bool(&w, "failed", (R->fail_held & R->fail_mask) != 0);
    jw_strlist(&w, "reasons", &R->fail_why);
    jw_close(&w, '}');

    jw_open(&w, "charts", '[');
    if (o && o->plots_dir)
        for (size_t i = 0; i < o->ncharts; i++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", o->plots_dir, o->charts[i].file);
            jw_open(&w, NULL, '{');
            jw_str(&w, "path", path);
            jw_str(&w, "description", o->charts[i].desc);
            jw_bool(&w, "drawn", o->charts[i].drawn);
            jw_close(&w, '}');
        }
    jw_close(&w, ']');
    jw_str(&w, "charts_note", o ? o->charts_note : NULL);
    jw_close(&w, '}');
    return jw_end(&w);
}
