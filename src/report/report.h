/*
 * report.h - render a comparison and its recommendation as text (a terminal: verdict first,
 * then the table and the evidence), Markdown (a pull request: tables, links to the charts) or
 * JSON (scripts: the structure is documented in docs/compare-json.md and stays stable).
 */
#ifndef AMPDIAG_REPORT_H
#define AMPDIAG_REPORT_H

#include <stdio.h>

#include "analysis/compare.h"
#include "analysis/findings.h"
#include "analysis/load.h"
#include "analysis/recommend.h"

#define REPORT_JSON_VERSION 1

/* A chart drawn by `ampdiag plot` machinery for --plots DIR. */
typedef struct report_chart {
    const char *file;  /* file name inside the plots directory ("loss.png") */
    const char *desc;  /* what it shows */
    int drawn;         /* 1 when gnuplot made it */
} report_chart;

typedef struct report_opts {
    const char *plots_dir;       /* --plots DIR: link the charts (Markdown), list them (JSON); NULL */
    const char *md_plots_dir;    /* DIR as the Markdown links it (relative to the report file);
                                    NULL = plots_dir */
    const report_chart *charts;  /* the charts in DIR */
    size_t ncharts;
    const char *charts_note;     /* why charts are missing ("gnuplot not found ..."), or NULL */
    int width;                   /* text wrap width (default 100) */
} report_opts;

/* Each returns 0, or -1 when writing failed (errno set by stdio). */
int report_text(FILE *f, const an_run *runs, size_t n, const an_comparison *c,
                const recommendation *r, const report_opts *o);
int report_markdown(FILE *f, const an_run *runs, size_t n, const an_comparison *c,
                    const recommendation *r, const report_opts *o);
int report_json(FILE *f, const an_run *runs, size_t n, const an_comparison *c,
                const recommendation *r, const report_opts *o);

#endif
