/*
 * info.c - `ampdiag info` as text (info.h): the trace and its run, the headline figures under
 * their names, the findings, the events, the FP16/BF16 headroom least first, the what-if
 * counts of the columns shown, all wrapped to the width.
 */
#include "report/info.h"
#include "report/report.h"
#include "report/whatif.h"
#include "report/recipe.h"
#include "util/escape.h"
#include "util/util.h"
#include "util/wrap.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#define FIG_W 43 /* the figure names' column: the longest name and a space */

const char *fmt_metric(char *buf, size_t n, const an_run *r, double v)
{
    if (strcmp(r->eval_metric, "accuracy") == 0 && isfinite(v))
        snprintf(buf, n, "%.1f%%", 100.0 * v);
    else
        fmt_num(buf, n, v, 6);
    return buf;
}

static const char *str_or(const char *s, const char *dflt) { return s && *s ? s : dflt; }

static void text_headline(FILE *f, const an_run *r, int width)
{
    char line[800];
    int k = 0;
    switch (r->status) {
    case AMPDIAG_STATUS_RUNNING:
        k = snprintf(line, sizeof line, "cut off (status still 'running': the writer was killed or is still "
                     "writing), %zu steps up to the last flush", r->nsteps);
        break;
    case AMPDIAG_STATUS_INTERRUPTED: k = snprintf(line, sizeof line, "interrupted after %zu steps", r->nsteps); break;
    case AMPDIAG_STATUS_DIVERGED: k = snprintf(line, sizeof line, "diverged after %zu steps", r->nsteps); break;
    case AMPDIAG_STATUS_COMPLETE:
        k = snprintf(line, sizeof line, "complete, %zu step%s", r->nsteps, r->nsteps == 1 ? "" : "s");
        break;
    default: k = snprintf(line, sizeof line, "status '%s' (unknown), %zu steps", r->status_text, r->nsteps); break;
    }
    if (r->nsteps && k > 0 && (size_t)k < sizeof line)
        k += snprintf(line + k, sizeof line - (size_t)k, " (%" PRId64 "..%" PRId64 ")", r->first_step, r->last_step);
    if (k > 0 && (size_t)k < sizeof line)
        snprintf(line + k, sizeof line - (size_t)k, ", %s", str_or(r->precision, "?"));
    char head[4200];
    snprintf(head, sizeof head, "%s: %s", r->path, line);
    wrap_para(f, "", 0, head, width);
}

static void kv(FILE *f, const char *key, const char *value, int width)
{
    char label[32];
    snprintf(label, sizeof label, "  %s", key);
    wrap_para(f, label, 15, value, width);
}

static void text_run(FILE *f, const an_run *r, int width)
{
    char v[1200];
    snprintf(v, sizeof v, "%s, %zu layer%s, %" PRIu64 " parameters", str_or(r->model, "?"), r->nlayers,
             r->nlayers == 1 ? "" : "s", r->params);
    kv(f, "model", v, width);
    kv(f, "data", str_or(r->data, "?"), width);
    if (r->optimizer[0] || !isnan(r->lr)) {
        int k = snprintf(v, sizeof v, "%s", str_or(r->optimizer, "?"));
        if (!isnan(r->lr))
            k += snprintf(v + k, sizeof v - (size_t)k, ", lr %g", r->lr);
        if (r->schedule[0])
            k += snprintf(v + k, sizeof v - (size_t)k, " (%s)", r->schedule);
        if (!isnan(r->clip))
            snprintf(v + k, sizeof v - (size_t)k, r->clip > 0 ? ", clip %g" : ", clip off", r->clip);
        kv(f, "optimizer", v, width);
    }
    if (r->device[0]) {
        snprintf(v, sizeof v, "%s%s%s%s", r->device, r->device_name[0] ? " (" : "", r->device_name,
                 r->device_name[0] ? ")" : "");
        kv(f, "device", v, width);
    }
    int k = snprintf(v, sizeof v, "format %d, tool_version %s, started %s", r->format_version,
                     str_or(r->tool_version, "?"), str_or(r->start_time, "?"));
    if (r->end_time[0] && k > 0 && (size_t)k < sizeof v)
        snprintf(v + k, sizeof v - (size_t)k, ", ended %s", r->end_time);
    kv(f, "trace", v, width);
    if (r->repaired)
        kv(f, "note", "the file's open-for-write mark was cleared to read it", width);
}

/* One figure under its name, with what goes with it. */
static void fig(FILE *f, an_figid id, const char *value, int width)
{
    char label[80];
    snprintf(label, sizeof label, "  %s", msg_fig_name(id));
    wrap_para(f, label, FIG_W, value, width);
}

static void loss_figures(FILE *f, const an_run *r, int width)
{
    char a[48], v[600];
    static const an_figid losses[] = {FIG_LOSS_FIRST, FIG_LOSS_LAST, FIG_LOSS_MIN};
    for (size_t i = 0; i < sizeof losses / sizeof losses[0]; i++) {
        an_figval x = an_fig(r, losses[i]);
        if (isnan(x.v) && x.step < 0)
            continue;
        snprintf(v, sizeof v, "%s (step %" PRId64 ")", fmt_num(a, sizeof a, x.v, 6), x.step);
        fig(f, losses[i], v, width);
    }
    if (r->nsteps) {
        snprintf(v, sizeof v, "%s%s", fmt_num(a, sizeof a, an_fig(r, FIG_LOSS_WINDOW).v, 6),
                 r->loss_nonfinite ? "" : "");
        if (r->loss_nonfinite)
            snprintf(v + strlen(v), sizeof v - strlen(v), " (%zu steps with a non-finite loss)", r->loss_nonfinite);
        fig(f, FIG_LOSS_WINDOW, v, width);
    }
    const ampdiag_trace_eval *e = r->find ? r->find->last_eval : NULL;
    if (e) {
        char b[48], c[48];
        int k = snprintf(v, sizeof v, "%s", fmt_num(a, sizeof a, e->loss, 6));
        if (isfinite(e->loss_se))
            k += snprintf(v + k, sizeof v - (size_t)k, " (standard error %s)", fmt_num(b, sizeof b, e->loss_se, 3));
        if (!isnan(e->metric))
            k += snprintf(v + k, sizeof v - (size_t)k, ", %s %s", str_or(r->eval_metric, "metric"),
                          fmt_metric(c, sizeof c, r, e->metric));
        snprintf(v + k, sizeof v - (size_t)k, " at step %" PRId64 " (%zu evaluation%s)", e->step, r->nevals,
                 r->nevals == 1 ? "" : "s");
        fig(f, FIG_EVAL_LOSS, v, width);
    }
}

static void stability_figures(FILE *f, const an_run *r, int width)
{
    char a[48], b[48], c[48], v[800];
    if (r->nsteps && r->scaled) {
        msg_fig_value(a, sizeof a, r, FIG_SCALE_INIT);
        msg_fig_value(b, sizeof b, r, FIG_SCALE_MIN);
        msg_fig_value(c, sizeof c, r, FIG_SCALE_FINAL);
        int k = snprintf(v, sizeof v, "%s initial, lowest %s (step %" PRId64 "), final %s; %zu backoffs, %zu growths",
                         a, b, r->scale_min_step, c, r->backoffs, r->growths);
        if (r->overflows_at_min)
            snprintf(v + k, sizeof v - (size_t)k, ", %zu overflows at the minimum scale", r->overflows_at_min);
        wrap_para(f, "  loss scale", FIG_W, v, width);
    } else if (r->nsteps) {
        wrap_para(f, "  loss scale", FIG_W, "none (1 throughout)", width);
    }
    if (r->skipped) {
        msg_fig_value(a, sizeof a, r, FIG_SKIP_SHARE);
        snprintf(v, sizeof v, "%zu (%s), %zu after calibration; first at step %" PRId64 ": %s", r->skipped, a,
                 r->skipped_after, r->first_skip_step, str_or(r->first_skip_reason, "(no reason recorded)"));
        fig(f, FIG_SKIPPED, v, width);
    } else if (r->nsteps) {
        fig(f, FIG_SKIPPED, "0", width);
    }
    static const an_figid more[] = {FIG_FP16_HEADROOM, FIG_FP16_FLUSH, FIG_FP16_FLUSH_AT_SCALE, FIG_LOST,
                                    FIG_UPDATE_RATIO};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        msg_fig_value(v, sizeof v, r, more[i]);
        if (strcmp(v, "-") != 0 && !(more[i] == FIG_FP16_FLUSH_AT_SCALE && an_fig(r, more[i]).na))
            fig(f, more[i], v, width);
    }
}

/* The run's findings: those of an_cause_order first (causes before symptoms), then the rest in
 * the order found; none that another says more fully (msg_finding_covered), none of the
 * what-if section's. */
static void text_findings(FILE *f, const an_run *r, int width)
{
    const an_finding_list *L = an_run_findings(r);
    msg_ctx m = msg_ctx_run(r);
    char buf[2400];
    int any = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < L->n; i++) {
            const an_finding *fd = &L->v[i];
            int cause = 0;
            for (size_t k = 0; an_cause_order[k] != F_NONE && !cause; k++)
                cause = an_cause_order[k] == fd->id;
            if (cause != !pass || fd->id == F_WHATIF_HURT || report_is_rank_finding(fd->id) ||
                msg_finding_covered(L, fd))
                continue;
            if (!any)
                fprintf(f, "findings:\n");
            any = 1;
            msg_finding(buf, sizeof buf, &m, fd);
            wrap_para(f, "  -", 4, buf, width);
        }
}

/* A trace ampdiag.torch wrote: what its findings suggest setting, in PyTorch's terms (messages.h,
 * msg_apply_finding), once each. A trace of ampdiag run has its options in compare's advice. */
static void text_apply(FILE *f, const an_run *r, int width)
{
    if (msg_run_vocab(r) != MSG_VOCAB_PYTORCH)
        return;
    const an_finding_list *L = an_run_findings(r);
    msg_ctx m = msg_ctx_run(r);
    char buf[1800], line[1900];
    int any = 0;
    for (size_t i = 0; i < L->n; i++) {
        if (!msg_apply_finding(buf, sizeof buf, &m, &L->v[i], MSG_VOCAB_PYTORCH))
            continue;
        int dup = 0;
        for (size_t k = 0; k < i && !dup; k++)
            dup = L->v[k].id == L->v[i].id;
        if (dup)
            continue;
        if (!any)
            fprintf(f, "apply in %s (traced by ampdiag.torch):\n", msg_vocab_name(MSG_VOCAB_PYTORCH));
        any = 1;
        snprintf(line, sizeof line, "%s", buf);
        wrap_para(f, "  -", 4, line, width);
    }
}

static void text_events(FILE *f, const an_run *r, size_t top, int width)
{
    char line[4000];
    int k = snprintf(line, sizeof line, "%zu", r->nevents);
    int firstc = 1;
    for (int c = 0; c < AMPDIAG_NEVENT_CODES && k > 0 && (size_t)k < sizeof line; c++)
        if (r->by_code[c]) {
            k += snprintf(line + k, sizeof line - (size_t)k, "%s%s %zu", firstc ? ": " : ", ",
                          ampdiag_event_name(c), r->by_code[c]);
            firstc = 0;
        }
    if (r->unknown_events && k > 0 && (size_t)k < sizeof line)
        snprintf(line + k, sizeof line - (size_t)k, "%sunknown %zu", firstc ? ": " : ", ", r->unknown_events);
    wrap_para(f, "events", 15, line, width);
    for (size_t i = 0; i < r->nevents && i < top; i++) {
        const ampdiag_trace_event *e = &r->events[i];
        char label[200];
        snprintf(label, sizeof label, "  step %-6" PRId64 " %-14s %-12s", e->step,
                 str_or(ampdiag_event_name(e->code), "unknown"), an_layer_name(r, e->layer));
        wrap_para(f, label, 44, e->message, width);
    }
    if (r->nevents > top)
        fprintf(f, "  ... %zu more\n", r->nevents - top);
}

static void text_headroom(FILE *f, const an_run *r, int fm, size_t top, int width)
{
    const an_findings *fd = r->find;
    static const char *const rule[2][2] = {
        {"log2(65504 / largest |x|)", "log2(smallest non-zero |x| / 2^-14)"},
        {"log2(3.39e38 / largest |x|)", "log2(smallest non-zero |x| / 2^-126)"},
    };
    /* below the smallest normal, a value has mant_bits binades of subnormals before it rounds
     * to zero */
    double subnormal_binades = ampdiag_format_get(fm ? AMPDIAG_BF16 : AMPDIAG_FP16)->mant_bits;
    char head[300];
    for (int side = 0; side < 2; side++) {
        snprintf(head, sizeof head, "%s %s headroom, least first (%s, binades):", fm ? "bf16" : "fp16",
                 side ? "underflow" : "overflow", rule[fm][side]);
        wrap_para(f, "", 0, head, width);
        if (fd->nheadroom == 0) {
            fprintf(f, "  (no finite non-zero values recorded)\n");
            continue;
        }
        const an_headroom *h = fd->by_headroom[fm][side];
        wrap_cells t = {0};
        const char *hdr[6] = {"layer", "kind", "binades", side ? "absmin_nz" : "absmax", "step", ""};
        for (int c = 0; c < 6; c++)
            wrap_cell(&t, "%s", hdr[c]);
        for (size_t i = 0; i < fd->nheadroom && i < top; i++) {
            double b = side ? h[i].under[fm] : h[i].over[fm];
            const char *note = "";
            if (!side && b < 0)
                note = "overflows";
            else if (side && b < -subnormal_binades)
                note = "underflows to 0";
            else if (side && b < 0)
                note = "subnormal";
            wrap_cell(&t, "%s", an_layer_name(r, h[i].layer));
            wrap_cell(&t, "%s", ampdiag_kind_name(h[i].kind));
            wrap_cell(&t, "%+.1f", b);
            wrap_cell(&t, "%.3g", side ? h[i].absmin_nz : h[i].absmax);
            wrap_cell(&t, "%" PRId64, side ? h[i].absmin_step : h[i].absmax_step);
            wrap_cell(&t, "%s", note);
        }
        wrap_cells_print(f, &t, 6, 2, width, 8);
    }
}

static void fmt_pct(char *buf, size_t n, uint64_t k, uint64_t total)
{
    if (k == 0)
        snprintf(buf, n, "0");
    else if (total == 0)
        snprintf(buf, n, "%" PRIu64, k);
    else
        snprintf(buf, n, "%" PRIu64 " (%.3g%%)", k, 100.0 * (double)k / (double)total);
}

static void whatif_column(wrap_cells *t, const an_run *r, int col)
{
    const an_findings *fd = r->find;
    for (int k = 0; k <= AMPDIAG_NKINDS; k++) {
        const an_cell *a = k < AMPDIAG_NKINDS ? &fd->kind[k] : &fd->all;
        char o[40], u[40], sb[40];
        uint64_t co, cu, cs, nv = an_cell_whatif(a, col, &co, &cu, &cs);
        if (k < AMPDIAG_NKINDS && (a->records == 0 || nv == 0))
            continue;
        fmt_pct(o, sizeof o, co, nv);
        fmt_pct(u, sizeof u, cu, nv);
        fmt_pct(sb, sizeof sb, cs, nv);
        wrap_cell(t, "%s", r->wcol[col].name);
        wrap_cell(t, "%s", k < AMPDIAG_NKINDS ? ampdiag_kind_name(k) : "all");
        wrap_cell(t, "%" PRIu64, nv);
        wrap_cell(t, "%s", o);
        wrap_cell(t, "%s", u);
        wrap_cell(t, "%s", sb);
    }
}

static void text_whatif(FILE *f, const an_run *r, const char *list, int width)
{
    const an_findings *fd = r->find;
    char line[800], hidden[600];
    int k = snprintf(line, sizeof line, "what if stored in");
    for (int col = 0; col < r->nwcol && k > 0 && (size_t)k < sizeof line; col++)
        if (report_whatif_shown(r, col, list))
            k += snprintf(line + k, sizeof line - (size_t)k, "%s%s", col ? " / " : " ", r->wcol[col].name);
    if (k > 0 && (size_t)k < sizeof line)
        snprintf(line + k, sizeof line - (size_t)k, " (values summed over the trace; %% of all values of that kind):");
    wrap_para(f, "", 0, line, width);
    wrap_cells t = {0};
    static const char *const hdr[6] = {"format", "kind", "values", "overflow", "underflow", "subnormal"};
    for (int c = 0; c < 6; c++)
        wrap_cell(&t, "%s", hdr[c]);
    for (int col = 0; col < r->nwcol; col++)
        if (report_whatif_shown(r, col, list))
            whatif_column(&t, r, col);
    wrap_cells_print(f, &t, 6, 2, width, 8);
    const an_cell *all = &fd->all;
    if (all->nan + all->posinf + all->neginf)
        fprintf(f, "non-finite     %" PRIu64 " NaN, %" PRIu64 " +inf, %" PRIu64 " -inf values recorded\n",
                all->nan, all->posinf, all->neginf);
    report_whatif_hidden_names(hidden, sizeof hidden, r, 1, list);
    msg_whatif_hidden(line, sizeof line, hidden);
    if (line[0])
        wrap_para(f, "", 0, line, width);
}

static void text_lost(FILE *f, const an_run *r, int width)
{
    char v[600], a[40];
    if (r->lost) {
        msg_fig_value(a, sizeof a, r, FIG_LOST);
        snprintf(v, sizeof v, "%" PRIu64 " lost updates (%s of the %" PRIu64 " non-zero update values)", r->lost, a,
                 r->update_nonzero);
        wrap_para(f, "", 0, v, width);
    }
    static const an_figid ifs[2] = {FIG_LOST_IF_FP16, FIG_LOST_IF_BF16};
    for (int k = 0; k < 2 && r->lost_if_fields && r->update_nonzero > 0; k++) {
        msg_fig_value(a, sizeof a, r, ifs[k]);
        snprintf(v, sizeof v, "%s: %s (%" PRIu64 " of %" PRIu64 " non-zero update values)", msg_fig_name(ifs[k]), a,
                 r->lost_if[k], r->update_nonzero);
        wrap_para(f, "", 0, v, width);
    }
    if (!r->lost_if_fields && r->find->kind[AMPDIAG_KIND_UPDATE].records > 0) {
        snprintf(v, sizeof v, "%s, %s: not recorded in this trace", msg_fig_name(ifs[0]), msg_fig_name(ifs[1]));
        wrap_para(f, "", 0, v, width);
    }
}

/* The section of the recipe --recipe names, else the line naming the recipes counted. */
static void text_recipe(FILE *f, const an_run *r, int rc, const char *list, int width)
{
    char line[800];
    if (rc >= 0) {
        report_text_recipe(f, r, rc, 0, width);
        return;
    }
    report_recipes_line(line, sizeof line, r, 1, list, 1);
    if (line[0])
        wrap_para(f, "", 0, line, width);
}

int report_info_text(FILE *f, const an_run *r, const info_opts *o)
{
    int width = o && o->width >= WRAP_MIN ? o->width : wrap_width(f);
    size_t top = o ? o->top : 10;
    const char *list = o ? o->whatif : NULL;
    text_headline(f, r, width);
    text_run(f, r, width);
    if (r->ranks) {
        msg_ctx m = msg_ctx_run(r);
        report_ranks_text(f, r, &m, "ranks", 15, top, width);
    }
    fprintf(f, "figures:\n");
    loss_figures(f, r, width);
    stability_figures(f, r, width);
    text_findings(f, r, width);
    text_apply(f, r, width);
    text_events(f, r, top, width);
    text_headroom(f, r, 0, top, width);
    text_headroom(f, r, 1, top, width);
    text_whatif(f, r, list, width);
    report_text_quant(f, r, list, width);
    text_lost(f, r, width);
    report_text_whatif_hurt(f, r, list, 0, width);
    text_recipe(f, r, o ? o->recipe : -1, list, width);
    return ferror(f) ? -1 : 0;
}
