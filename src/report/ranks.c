/*
 * ranks.c - a run read from its ranks' traces (analysis/ranks.h), as every renderer shows it
 * (info.h): the group's line (ranks read, sharding, backend, the steps merged), a line per
 * rank (status, steps, skips, its first NaN/inf), the rank findings through the message table;
 * as text, Markdown and JSON ("ranks" of a run: docs/compare-json.md, traces/FORMAT.md).
 */
#include "report/info.h"
#include "analysis/ranks.h"
#include "util/escape.h"
#include "util/wrap.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

int report_is_rank_finding(an_fid id) { return id >= F_RANK_FIRST_NONFINITE && id <= F_RANK_SPREAD; }

static const char *const phase_names[3] = {"forward", "backward", "optimizer"};

static const char *phase_of(int kind)
{
    return phase_names[kind == AMPDIAG_KIND_ACTIVATION ? 0 : kind == AMPDIAG_KIND_UPDATE || kind == AMPDIAG_KIND_WEIGHT ? 2 : 1];
}

/* "ranks 0-1 of 2 ('run.rank*.h5'), replicated, gloo, gradients reduced in fp32; merged over the
 * 6 steps every rank recorded (0..5)". */
void report_ranks_line(char *buf, size_t n, const an_run *r)
{
    const an_ranks *R = r->ranks;
    int k = snprintf(buf, n, "%zu of %" PRId64 " ranks (%s), %s", R->n, R->world_size, R->pattern,
                     R->sharding_name);
    if (R->backend[0] && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", %s", R->backend);
    if (R->reduce_dtype[0] && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", gradients reduced in %s", R->reduce_dtype);
    if (R->shard_group > 1 && R->shard_group < R->n && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, ", %zu ranks to a copy of the parameters", R->shard_group);
    if (k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, "; merged over the %zu steps every rank recorded", R->merged_steps);
    if (R->merged_steps && k > 0 && (size_t)k < n)
        k += snprintf(buf + k, n - (size_t)k, " (%" PRId64 "..%" PRId64 ")", R->merged_from, R->merged_to);
    if (R->unsorted && k > 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "; %zu tensor records out of step order left out", R->unsorted);
}

/* "complete, 6 steps (0..5), 1 skipped (1 alone), first NaN/inf at step 3: fc2 weight_grad
 * (backward)". */
void report_rank_line(char *buf, size_t n, const an_run *r, size_t i)
{
    const an_rank *k = &r->ranks->rank[i];
    const an_run *x = &k->run;
    int len = snprintf(buf, n, "%s, %zu step%s", x->status_text, x->nsteps, x->nsteps == 1 ? "" : "s");
    if (x->nsteps && len > 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, " (%" PRId64 "..%" PRId64 ")", x->first_step, x->last_step);
    if (x->skipped && len > 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, ", %zu skipped%s", x->skipped,
                        k->skipped_alone ? " (some alone)" : "");
    if (k->stop_message && len > 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, ", stopped at step %" PRId64 ": %s", k->end, k->stop_message);
    if (k->nf_step >= 0 && len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, ", first NaN/inf at step %" PRId64 ": %s %s (%s)", k->nf_step,
                 an_layer_name(r, k->nf_layer), ampdiag_kind_name(k->nf_kind), phase_of(k->nf_kind));
}

/* As many rank lines as this shows: all up to 16, else top. */
static size_t rank_lines(const an_ranks *R, size_t top)
{
    return R->n <= 16 || R->n <= top ? R->n : top;
}

int report_ranks_text(FILE *f, const an_run *r, const msg_ctx *m, const char *label, int indent,
                      size_t top, int width)
{
    if (!r->ranks)
        return 0;
    const an_ranks *R = r->ranks;
    char line[1600], lab[48], head[1800];
    report_ranks_line(line, sizeof line, r);
    if (m->alone)
        snprintf(head, sizeof head, "%s", line);
    else
        snprintf(head, sizeof head, "%s: %s", r->label, line);
    wrap_para(f, label, indent, head, width);
    size_t shown = rank_lines(R, top);
    for (size_t i = 0; i < shown; i++) {
        snprintf(lab, sizeof lab, "%*srank %" PRId64, indent > 4 ? 2 : 0, "", R->rank[i].rank);
        report_rank_line(line, sizeof line, r, i);
        wrap_para(f, lab, indent, line, width);
    }
    if (shown < R->n)
        wrap_para(f, "", indent, "... (the others in --format json)", width);
    const an_finding_list *L = an_run_findings(r);
    for (size_t i = 0; i < L->n; i++)
        if (report_is_rank_finding(L->v[i].id)) {
            msg_finding(line, sizeof line, m, &L->v[i]);
            if (m->alone) {
                wrap_para(f, "  -", 4, line, width);
            } else {
                snprintf(head, sizeof head, "- %s", line);
                wrap_para(f, "", indent, head, width);
            }
        }
    return ferror(f) ? -1 : 0;
}

void report_ranks_md(FILE *f, const an_run *r, const msg_ctx *m)
{
    if (!r->ranks)
        return;
    const an_ranks *R = r->ranks;
    char line[1600];
    fputs("- ", f);
    str_fputs(r->label, SINK_MD, f);
    fputs(": ", f);
    report_ranks_line(line, sizeof line, r);
    str_fputs(line, SINK_MD, f);
    fputc('\n', f);
    for (size_t i = 0; i < rank_lines(R, 8); i++) {
        report_rank_line(line, sizeof line, r, i);
        fprintf(f, "  - rank %" PRId64 ": ", R->rank[i].rank);
        str_fputs(line, SINK_MD, f);
        fputc('\n', f);
    }
    const an_finding_list *L = an_run_findings(r);
    for (size_t i = 0; i < L->n; i++)
        if (report_is_rank_finding(L->v[i].id)) {
            msg_finding(line, sizeof line, m, &L->v[i]);
            fputs("  - ", f);
            str_fputs(line, SINK_MD, f);
            fputc('\n', f);
        }
}

static void json_rank(jw *w, const an_run *r, size_t i)
{
    const an_rank *k = &r->ranks->rank[i];
    const an_run *x = &k->run;
    jw_open(w, NULL, '{');
    jw_int(w, "rank", k->rank);
    jw_str(w, "path", x->path);
    jw_str(w, "status", x->status_text);
    jw_bool(w, "cut_off", x->cut_off);
    jw_u64(w, "steps", x->nsteps);
    jw_opt_int(w, "first_step", x->nsteps ? x->first_step : -1);
    jw_opt_int(w, "last_step", x->nsteps ? x->last_step : -1);
    jw_num(w, "loss_last", x->loss_last);
    jw_u64(w, "skipped", x->skipped);
    jw_u64(w, "skipped_alone", k->skipped_alone);
    jw_opt_int(w, "stopped_at", k->end == INT64_MAX ? -1 : k->end);
    jw_str(w, "stop_message", k->stop_message);
    if (k->nf_step >= 0) {
        jw_open(w, "first_nonfinite", '{');
        jw_int(w, "step", k->nf_step);
        jw_str(w, "layer", an_layer_name(r, k->nf_layer));
        jw_str(w, "kind", ampdiag_kind_name(k->nf_kind));
        jw_str(w, "phase", phase_of(k->nf_kind));
        jw_close(w, '}');
    } else {
        jw_null(w, "first_nonfinite");
    }
    jw_opt_int(w, "first_local_nonfinite_step", k->local_nf_step);
    jw_close(w, '}');
}

static void json_spreads(jw *w, const an_run *r)
{
    const an_ranks *R = r->ranks;
    jw_open(w, "spreads", '[');
    for (size_t i = 0; i < R->nspread; i++) {
        const an_spread *s = &R->spread[i];
        jw_open(w, NULL, '{');
        jw_str(w, "figure", an_spread_name(s->fig));
        jw_str(w, "layer", s->layer >= 0 ? an_layer_name(r, s->layer) : NULL);
        jw_str(w, "kind", s->kind >= 0 ? ampdiag_kind_name(s->kind) : NULL);
        jw_int(w, "step", s->step);
        jw_num(w, "min", s->min);
        jw_num(w, "max", s->max);
        jw_int(w, "argmin", s->argmin);
        jw_int(w, "argmax", s->argmax);
        jw_num(w, "rel", s->rel);
        jw_num(w, "typical", s->typical);
        jw_u64(w, "steps", s->steps);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

void report_json_ranks(jw *w, const char *k, const an_run *r, const msg_ctx *m)
{
    const an_ranks *R = r->ranks;
    if (!R) {
        jw_null(w, k);
        return;
    }
    jw_open(w, k, '{');
    jw_str(w, "pattern", R->pattern);
    jw_int(w, "world_size", R->world_size);
    jw_u64(w, "read", R->n);
    jw_open(w, "missing", '[');
    for (size_t i = 0; i < R->nmissing; i++)
        jw_int(w, NULL, R->missing[i]);
    jw_close(w, ']');
    jw_str(w, "sharding", R->sharding_name);
    jw_str(w, "backend", R->backend);
    jw_str(w, "grad_reduce_dtype", R->reduce_dtype);
    jw_u64(w, "shard_group", R->shard_group);
    jw_open(w, "merged_steps", '{');
    jw_u64(w, "count", R->merged_steps);
    jw_opt_int(w, "from", R->merged_from);
    jw_opt_int(w, "to", R->merged_to);
    jw_close(w, '}');
    jw_u64(w, "records_out_of_order", R->unsorted);
    jw_open(w, "ranks", '[');
    for (size_t i = 0; i < R->n; i++)
        json_rank(w, r, i);
    jw_close(w, ']');
    json_spreads(w, r);
    jw_open(w, "findings", '[');
    const an_finding_list *L = an_run_findings(r);
    for (size_t i = 0; i < L->n; i++)
        if (report_is_rank_finding(L->v[i].id))
            report_json_finding(w, &L->v[i], m);
    jw_close(w, ']');
    jw_close(w, '}');
}
