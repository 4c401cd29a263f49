/*
 * info.h - render what one trace says (its findings and figures): `ampdiag info` as text for
 * people and as JSON for programs (traces/FORMAT.md, "ampdiag info --format json"), and the
 * summary `ampdiag run` prints when it ends; the JSON both info and compare share. Words come
 * from the message table (src/messages/); they count nothing themselves.
 */
#ifndef AMPDIAG_REPORT_INFO_H
#define AMPDIAG_REPORT_INFO_H

#include <stdio.h>

#include "analysis/figures.h"
#include "analysis/findings.h"
#include "messages/messages.h"
#include "util/json.h"

/* Revision of info's JSON document ("format_version" in it). 2: lost updates as shares of the
 * non-zero updates; backoffs from the scaler's events; trace_format_version. */
#define INFO_JSON_VERSION 2

typedef struct info_opts {
    size_t top;          /* rows of the headroom and event lists */
    const char *whatif;  /* --what-if (report.h, report_whatif_shown) */
    int recipe;          /* --recipe: the recipe (analysis/recipe.h) whose section to print; -1 none
                            (one line names the recipes the trace counted) */
    int width;           /* wrap width (0: wrap_width(f)) */
} info_opts;

/* Each returns 0, or -1 when writing failed. */
int report_info_text(FILE *f, const an_run *r, const info_opts *o);
int report_info_json(FILE *f, const an_run *r);

/* The JSON every document shares (json_evidence.c). */
void report_json_finding(jw *w, const an_finding *f, const msg_ctx *m);
void report_json_finding_list(jw *w, const char *k, const an_finding_list *l, const msg_ctx *m);
void report_json_figures(jw *w, const char *k, const an_run *r);
/* The "findings" object of info's and compare's JSON (the same keys and values in both). */
void report_json_findings(jw *w, const char *k, const an_run *r);
/* The loss-scale keys every JSON document gives (scaled, initial, min, min_step, final,
 * backoffs, growths, overflows_at_min), inside an object the caller opened. */
void report_json_scale_keys(jw *w, const an_run *r);
void report_json_eval(jw *w, const an_run *r, int info_keys);

/* A run read from its ranks' traces (analysis/ranks.h; ranks.c): the group's line, a line per
 * rank, the rank findings. Text under label (indent: the text's column), at most top rank lines
 * of many; Markdown as a list item; JSON as the object k (null for a run of one trace). */
int report_is_rank_finding(an_fid id);
void report_ranks_line(char *buf, size_t n, const an_run *r);
void report_rank_line(char *buf, size_t n, const an_run *r, size_t i);
int report_ranks_text(FILE *f, const an_run *r, const msg_ctx *m, const char *label, int indent,
                      size_t top, int width);
void report_ranks_md(FILE *f, const an_run *r, const msg_ctx *m);
void report_json_ranks(jw *w, const char *k, const an_run *r, const msg_ctx *m);

/* What only the running process knows, for the run summary. */
typedef struct report_run_extra {
    double wall_s;
    long long trace_bytes;
    int trace_threads;         /* statistics taken on a second thread */
    double trace_wait_s;       /* time training waited for it */
    int traced;                /* tensor records were asked for (--trace-every or --trace-budget) */
    double trace_budget;       /* the budget in percent, or NaN for a fixed cadence */
    long full_steps;           /* steps recorded in full ... */
    long event_steps;          /* ... of which for an event of their own */
    int cadence;               /* the last cadence (0: none) */
} report_run_extra;

int report_run_summary(FILE *f, const an_run *r, const report_run_extra *x, int width);

/* An eval metric as text: an accuracy as a percentage, else %.6g (NaN as "nan"). */
const char *fmt_metric(char *buf, size_t n, const an_run *r, double v);

#endif
