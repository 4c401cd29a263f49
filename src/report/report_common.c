/*
 * report_common.c - what the renderers of a comparison share (report_internal.h): the cells of
 * the table of runs (each a headline figure, under its name), its notes, the verdict line.
 */
#include "report/report_internal.h"
#include "util/util.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void report_in_init(report_in *in, const an_run *runs, size_t n, const an_comparison *c,
                    const recommendation *R)
{
    in->runs = runs;
    in->n = n;
    in->c = c;
    in->R = R;
    in->m = (msg_ctx){.runs = runs, .nruns = n, .baseline = (long)c->baseline, .R = R};
}

/* The first run's loss gap (F_CMP_GAP), or NULL: it says what the loss row measures. */
static const an_finding *first_gap(const report_in *in)
{
    return an_finding_find(&in->c->list, F_CMP_GAP, -1);
}

static const an_finding *gap_of(const report_in *in, size_t i)
{
    return an_finding_find(&in->c->list, F_CMP_GAP, (int)i);
}

static double gv(const an_finding *g, const char *name)
{
    int k = g ? an_finding_fig(g->id, name) : -1;
    return k >= 0 ? g->v[k] : NAN;
}

/* The loss row measures the final eval loss (1) or the final-window training loss (0). */
static int loss_is_eval(const report_in *in)
{
    const an_finding *g = first_gap(in);
    return g ? gv(g, "eval") != 0 : an_final_eval(&in->runs[in->c->baseline]) != NULL;
}

const char *report_row_label(const report_in *in, int row)
{
    switch (row) {
    case ROW_STATUS: return "status";
    case ROW_STEPS: return msg_fig_name(FIG_STEPS);
    case ROW_STEP_TIME: return msg_fig_name(FIG_STEP_TIME);
    case ROW_PEAK_MEMORY: return msg_fig_name(FIG_PEAK_MEMORY);
    case ROW_EVAL_ACC: return msg_fig_name(FIG_EVAL_METRIC);
    case ROW_LOSS: return msg_fig_name(loss_is_eval(in) ? FIG_EVAL_LOSS : FIG_LOSS_WINDOW);
    case ROW_CURVE: return msg_cfig_name(MSG_CURVE_GAP);
    case ROW_NONFINITE: return msg_fig_name(FIG_NONFINITE_EVENTS);
    case ROW_SKIPPED: return msg_fig_name(FIG_SKIPPED);
    case ROW_SCALE: return "loss scale";
    case ROW_HEADROOM: return msg_fig_name(FIG_FP16_HEADROOM);
    case ROW_FLUSH: return msg_fig_name(FIG_FP16_FLUSH);
    case ROW_FLUSH_AT_SCALE: return msg_fig_name(FIG_FP16_FLUSH_AT_SCALE);
    case ROW_LOST: return msg_fig_name(FIG_LOST);
    case ROW_RATIO: return msg_fig_name(FIG_UPDATE_RATIO);
    case ROW_SPIKES: return msg_fig_name(FIG_LOSS_SPIKES);
    default: return msg_fig_name(FIG_DIVERGENCE);
    }
}

/* The run's final eval metric is an accuracy (the trace says so) and was recorded. */
static int is_accuracy(const an_run *r)
{
    return strcmp(r->eval_metric, "accuracy") == 0 && isfinite(an_fig(r, FIG_EVAL_METRIC).v);
}

const char *report_peak_source(const report_in *in)
{
    for (size_t i = 0; i < in->n; i++) {
        const an_run *r = &in->runs[i];
        if (isnan(an_fig(r, FIG_PEAK_MEMORY).v))
            continue;
        for (size_t k = i + 1; k < in->n; k++)
            if (!isnan(an_fig(&in->runs[k], FIG_PEAK_MEMORY).v) &&
                strcmp(in->runs[k].peak_memory_source, r->peak_memory_source) == 0)
                return r->peak_memory_source;
    }
    return NULL;
}

int report_row_wanted(const report_in *in, int row)
{
    if (row == ROW_PEAK_MEMORY)
        return report_peak_source(in) != NULL;
    int any = 0;
    for (size_t i = 0; i < in->n; i++) {
        const an_run *r = &in->runs[i];
        switch (row) {
        case ROW_CURVE: any |= in->n > 1; break;
        case ROW_SCALE: any |= r->scaled; break;
        case ROW_FLUSH_AT_SCALE: any |= !isnan(an_fig(r, FIG_FP16_FLUSH_AT_SCALE).v); break;
        case ROW_SPIKES: any |= r->loss_spikes > 0; break;
        case ROW_DIVERGED: any |= r->diverged; break;
        case ROW_STEP_TIME: any |= !isnan(an_fig(r, FIG_STEP_TIME).v); break;
        case ROW_EVAL_ACC: any |= is_accuracy(r); break;
        default: any = 1;
        }
    }
    return any;
}

/* The loss row: the baseline's metric, or a run's with its gap. */
static void loss_cell(char *buf, size_t n, const report_in *in, size_t i)
{
    const an_run *r = &in->runs[i];
    const an_finding *g = gap_of(in, i);
    char a[48];
    if (i == in->c->baseline) {
        const an_finding *g0 = first_gap(in);
        double v = g0 ? gv(g0, "base") : an_fig(r, an_final_eval(r) ? FIG_EVAL_LOSS : FIG_LOSS_WINDOW).v;
        fmt_num(buf, n, v, 4);
    } else if (!g) {
        snprintf(buf, n, "-");
    } else if (!isfinite(gv(g, "value"))) {
        snprintf(buf, n, "non-finite");
    } else {
        msg_pct(a, sizeof a, gv(g, "rel"));
        snprintf(buf, n, "%.4g (%s%s)", gv(g, "value"), gv(g, "rel") >= 0 ? "+" : "", a);
    }
}

static void curve_cell(char *buf, size_t n, const report_in *in, size_t i)
{
    const an_finding *g = gap_of(in, i);
    double rel = gv(g, "curve_rel");
    char a[48];
    if (i == in->c->baseline || isnan(rel)) {
        snprintf(buf, n, "-");
        return;
    }
    msg_pct(a, sizeof a, rel);
    snprintf(buf, n, "%s%s (steps %.0f-%.0f)", rel >= 0 && isfinite(rel) ? "+" : "", a, gv(g, "curve_from"),
             gv(g, "curve_to"));
}

static void nonfinite_cell(char *buf, size_t n, const an_run *r)
{
    an_figval v = an_fig(r, FIG_NONFINITE_EVENTS);
    if (v.step < 0)
        snprintf(buf, n, "%.0f", v.v);
    else
        snprintf(buf, n, "%.0f (%s%s%s step %" PRId64 ")", v.v, an_layer_name(r, v.layer),
                 v.kind >= 0 ? "." : "", v.kind >= 0 ? msg_kind_abbrev(v.kind) : "", v.step);
}

static void scale_cell(char *buf, size_t n, const an_run *r)
{
    char a[32], b[32], m[32];
    if (!r->scaled) {
        snprintf(buf, n, "-");
        return;
    }
    msg_fig_value(a, sizeof a, r, FIG_SCALE_INIT);
    msg_fig_value(b, sizeof b, r, FIG_SCALE_FINAL);
    msg_fig_value(m, sizeof m, r, FIG_SCALE_MIN);
    if (an_fig(r, FIG_SCALE_MIN).v < an_fig(r, FIG_SCALE_FINAL).v)
        snprintf(buf, n, "%s -> %s (min %s)", a, b, m);
    else
        snprintf(buf, n, "%s -> %s", a, b);
}

/* A figure, with "*" where it is predicted (a run in another precision than FP16). */
static void predicted_cell(char *buf, size_t n, const an_run *r, an_figid id)
{
    msg_fig_value(buf, n, r, id);
    an_figval v = an_fig(r, id);
    if (r->prec != PREC_FP16 && !isnan(v.v) && !v.na) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "*");
    }
}

void report_cell(char *buf, size_t n, const report_in *in, size_t i, int row)
{
    const an_run *r = &in->runs[i];
    char a[48];
    switch (row) {
    case ROW_STATUS: snprintf(buf, n, "%s", r->cut_off ? "cut off" : r->status_text); break;
    case ROW_STEPS: msg_fig_value(buf, n, r, FIG_STEPS); break;
    case ROW_STEP_TIME: msg_fig_value(buf, n, r, FIG_STEP_TIME); break;
    case ROW_PEAK_MEMORY: {
        const char *src = report_peak_source(in);
        if (src && !isnan(an_fig(r, FIG_PEAK_MEMORY).v) && strcmp(r->peak_memory_source, src) == 0) {
            msg_fig_value(a, sizeof a, r, FIG_PEAK_MEMORY);
            snprintf(buf, n, "%s (%s)", a, msg_peak_memory_source(src));
        } else {
            snprintf(buf, n, "-");
        }
        break;
    }
    case ROW_EVAL_ACC:
        if (is_accuracy(r))
            msg_pct(buf, n, an_fig(r, FIG_EVAL_METRIC).v);
        else
            snprintf(buf, n, "-");
        break;
    case ROW_LOSS: loss_cell(buf, n, in, i); break;
    case ROW_CURVE: curve_cell(buf, n, in, i); break;
    case ROW_NONFINITE: nonfinite_cell(buf, n, r); break;
    case ROW_SKIPPED:
        msg_fig_value(a, sizeof a, r, FIG_SKIP_SHARE);
        if (r->skipped)
            snprintf(buf, n, "%zu (%s)", r->skipped, a);
        else
            snprintf(buf, n, "0");
        break;
    case ROW_SCALE: scale_cell(buf, n, r); break;
    case ROW_HEADROOM: predicted_cell(buf, n, r, FIG_FP16_HEADROOM); break;
    case ROW_FLUSH: predicted_cell(buf, n, r, FIG_FP16_FLUSH); break;
    case ROW_FLUSH_AT_SCALE: predicted_cell(buf, n, r, FIG_FP16_FLUSH_AT_SCALE); break;
    case ROW_LOST: msg_fig_value(buf, n, r, FIG_LOST); break;
    case ROW_RATIO: msg_fig_value(buf, n, r, FIG_UPDATE_RATIO); break;
    case ROW_SPIKES: msg_fig_value(buf, n, r, FIG_LOSS_SPIKES); break;
    default:
        if (r->diverged)
            snprintf(buf, n, "step %" PRId64, r->divergence_step);
        else
            snprintf(buf, n, "-");
        break;
    }
}

void report_run_header(char *buf, size_t n, const report_in *in, size_t i)
{
    snprintf(buf, n, "%s%s", in->runs[i].label, i == in->c->baseline ? " (baseline)" : "");
}

void report_table_notes(const report_in *in, void (*note)(const char *label, const char *text, void *arg),
                        void *arg)
{
    char t[1200], d[900], b[500];
    const an_finding *g = first_gap(in);
    msg_noise_band(b, sizeof b, in->c);
    if (g)
        snprintf(t, sizeof t, "at step %.0f; %s %s", gv(g, "step"), msg_cfig_name(MSG_NOISE_BAND), b);
    else
        snprintf(t, sizeof t, "%s %s", msg_cfig_name(MSG_NOISE_BAND), b);
    note(report_row_label(in, ROW_LOSS), t, arg);
    static const an_figid defined[] = {FIG_FP16_HEADROOM, FIG_FP16_FLUSH, FIG_FP16_FLUSH_AT_SCALE, FIG_LOST,
                                       FIG_UPDATE_RATIO};
    for (size_t k = 0; k < sizeof defined / sizeof defined[0]; k++) {
        if (defined[k] == FIG_FP16_FLUSH_AT_SCALE && !report_row_wanted(in, ROW_FLUSH_AT_SCALE))
            continue;
        msg_fig_definition(d, sizeof d, defined[k]);
        note(msg_fig_name(defined[k]), d, arg);
    }
    const char *src = report_peak_source(in);
    if (src)
        note(msg_fig_name(FIG_PEAK_MEMORY), msg_peak_memory_what(src), arg);
    note("*", "predicted from a run in another precision (what FP16 would do)", arg);
}

msg_vocab report_vocab(const report_in *in) { return msg_run_vocab(&in->runs[in->c->baseline]); }

size_t report_apply_lines(const report_in *in, void (*line)(const char *what, const char *how, void *arg),
                          void *arg)
{
    msg_vocab v = report_vocab(in);
    char (*seen)[1200] = NULL;
    size_t nseen = 0, nd = in->R->decisions.n;
    if (nd && !(seen = malloc(nd * sizeof *seen)))
        return 0;
    for (size_t i = 0; i < nd; i++) {
        const rec_decision *d = &in->R->decisions.v[i];
        char what[400];
        if (!msg_apply(seen[nseen], sizeof seen[nseen], &in->m, d, v))
            continue;
        int dup = 0;
        for (size_t k = 0; k < nseen && !dup; k++)
            dup = strcmp(seen[k], seen[nseen]) == 0;
        if (dup)
            continue;
        msg_decision(what, sizeof what, &in->m, d);
        line(what, seen[nseen++], arg);
    }
    free(seen);
    return nseen;
}

/* ------------------------------------------------------------------------------------------ */

int report_is_note(const an_finding *f) { return f->id != F_CMP_GAP && f->id != F_CMP_DEVIATION; }
