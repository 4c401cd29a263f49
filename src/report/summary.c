/*
 * summary.c - the summary `ampdiag run` prints when it ends (info.h): what the run did, its
 * headline figures under their names, and its findings, causes first (an_cause_order).
 */
#include "report/info.h"
#include "util/escape.h"
#include "util/util.h"
#include "util/wrap.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static const char *str_or(const char *s, const char *dflt) { return s && *s ? s : dflt; }

static void summary_head(FILE *f, const an_run *r, const report_run_extra *x, int width)
{
    long t = (long)(x->wall_s + 0.5);
    double kb = (double)x->trace_bytes / 1024.0;
    char line[4400];
    snprintf(line, sizeof line, "run %s: %zu steps in %ld:%02ld:%02ld -> %s (%.1f %s)", r->status_text, r->nsteps,
             t / 3600, (t / 60) % 60, t % 60, r->path, kb >= 1024 ? kb / 1024.0 : kb, kb >= 1024 ? "MB" : "KB");
    wrap_para(f, "", 0, line, width);
    if (x->traced) {
        int k = snprintf(line, sizeof line, "full tensor records at %ld of %zu steps", x->full_steps, r->nsteps);
        if (x->cadence > 0)
            k += snprintf(line + k, sizeof line - (size_t)k, " (every %d steps%s", x->cadence,
                          isfinite(x->trace_budget) ? "" : ")");
        if (x->cadence > 0 && isfinite(x->trace_budget))
            k += snprintf(line + k, sizeof line - (size_t)k, ", chosen for a budget of %g%% of the CPU time)",
                          x->trace_budget);
        if (x->event_steps > 0)
            snprintf(line + k, sizeof line - (size_t)k, "; %ld for events of their own", x->event_steps);
        wrap_para(f, "", 2, line, width);
    }
    if (x->traced && x->trace_threads && x->wall_s > 0) {
        snprintf(line, sizeof line, "tensor statistics on a second thread; training waited %.2f s for it (%.1f%% "
                 "of the run)", x->trace_wait_s, 100.0 * x->trace_wait_s / x->wall_s);
        wrap_para(f, "", 2, line, width);
    }
    size_t with_params = 0;
    for (size_t l = 0; l < r->nlayers; l++)
        with_params += r->layers[l].params > 0;
    snprintf(line, sizeof line, "model %s (%zu layers with parameters, %.2fM params), %s, seed %" PRId64,
             str_or(r->model, "?"), with_params, (double)r->params / 1e6, str_or(r->precision, "?"), r->seed);
    wrap_para(f, "", 2, line, width);
}

/* name value; name value; ... of the figures that the run has. */
static void figures_line(FILE *f, const an_run *r, const an_figid *ids, size_t n, int width)
{
    char line[2000] = "", v[200];
    for (size_t i = 0; i < n; i++) {
        msg_fig_value(v, sizeof v, r, ids[i]);
        if (strcmp(v, "-") == 0 || (ids[i] == FIG_FP16_FLUSH_AT_SCALE && an_fig(r, ids[i]).na))
            continue;
        size_t len = strlen(line);
        snprintf(line + len, sizeof line - len, "%s%s %s", len ? "; " : "", msg_fig_name(ids[i]), v);
    }
    if (line[0])
        wrap_para(f, "", 2, line, width);
}

static void summary_figures(FILE *f, const an_run *r, int width)
{
    static const an_figid loss[] = {FIG_LOSS_FIRST, FIG_LOSS_LAST, FIG_LOSS_MIN, FIG_LOSS_WINDOW};
    figures_line(f, r, loss, sizeof loss / sizeof loss[0], width);
    char line[1600], a[48], b[48], c[48];
    if (r->find && r->find->last_eval) {
        const ampdiag_trace_eval *e = r->find->last_eval;
        int k = snprintf(line, sizeof line, "%s %s", msg_fig_name(FIG_EVAL_LOSS), fmt_num(a, sizeof a, e->loss, 4));
        if (!isnan(e->metric) && k > 0 && (size_t)k < sizeof line)
            snprintf(line + k, sizeof line - (size_t)k, ", %s %s", str_or(r->eval_metric, "metric"),
                     fmt_metric(b, sizeof b, r, e->metric));
        wrap_para(f, "", 2, line, width);
    }
    if (r->scaled) {
        msg_fig_value(a, sizeof a, r, FIG_SCALE_INIT);
        msg_fig_value(b, sizeof b, r, FIG_SCALE_FINAL);
        msg_fig_value(c, sizeof c, r, FIG_SCALE_MIN);
        int k = snprintf(line, sizeof line, "loss scale %s -> %s (min %s at step %" PRId64 "), %zu backoffs, %zu growths",
                         a, b, c, r->scale_min_step, r->backoffs, r->growths);
        if (r->overflows_at_min && k > 0 && (size_t)k < sizeof line)
            snprintf(line + k, sizeof line - (size_t)k, ", %zu overflows at the minimum scale", r->overflows_at_min);
        wrap_para(f, "", 2, line, width);
    }
    if (r->skipped) {
        msg_fig_value(a, sizeof a, r, FIG_SKIP_SHARE);
        snprintf(line, sizeof line, "%zu skipped steps (%s): first at step %" PRId64 ", %s", r->skipped, a,
                 r->first_skip_step, str_or(r->first_skip_reason, "(no reason recorded)"));
        wrap_para(f, "", 2, line, width);
    } else {
        wrap_para(f, "", 2, "no skipped steps", width);
    }
    static const an_figid ranges[] = {FIG_FP16_HEADROOM, FIG_FP16_FLUSH, FIG_FP16_FLUSH_AT_SCALE, FIG_LOST,
                                    FIG_UPDATE_RATIO};
    figures_line(f, r, ranges, sizeof ranges / sizeof ranges[0], width);
}

/* The findings of an_cause_order, the first of each id, causes first. */
static void summary_findings(FILE *f, const an_run *r, int width)
{
    msg_ctx m = msg_ctx_run(r);
    char buf[2400];
    for (size_t k = 0; an_cause_order[k] != F_NONE; k++) {
        const an_finding *fd = an_run_finding(r, an_cause_order[k]);
        if (!fd)
            continue;
        msg_finding(buf, sizeof buf, &m, fd);
        wrap_para(f, "  -", 4, buf, width);
    }
}

int report_run_summary(FILE *f, const an_run *r, const report_run_extra *x, int width)
{
    if (width < WRAP_MIN)
        width = wrap_width(f);
    summary_head(f, r, x, width);
    summary_figures(f, r, width);
    summary_findings(f, r, width);
    fprintf_text(f, "  next: ampdiag info %s\n", r->path);
    return ferror(f) ? -1 : 0;
}
