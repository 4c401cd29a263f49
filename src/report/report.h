/*
 * report.h - render a comparison and its recommendation as text (a terminal: verdict first,
 * then the table and the evidence, wrapped to the width), Markdown (a pull request: tables,
 * links to the charts) or JSON (scripts: ids, figures and words; the structure is documented in
 * docs/compare-json.md and stays stable). Every word comes from the message table
 * (src/messages/); every number from the analysis. Nothing here counts or decides.
 */
#ifndef AMPDIAG_REPORT_H
#define AMPDIAG_REPORT_H

#include <stdio.h>

#include "analysis/compare.h"
#include "analysis/findings.h"
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
    int width;                   /* text wrap width (0: wrap_width(f)) */
    const char *whatif;          /* --what-if: the what-if columns to show beyond FP16 and BF16
                                    ("fp8", "all", column names, comma-separated), or NULL: one
                                    line says which the traces hold */
    const char *recipe;          /* --recipe: the name of the recipe (analysis/recipe.h) whose
                                    sections to show, or NULL: one line says which were counted */
} report_opts;

/* Each returns 0, or -1 when writing failed (errno set by stdio). */
int report_text(FILE *f, const an_run *runs, size_t n, const an_comparison *c,
                const recommendation *r, const report_opts *o);
int report_markdown(FILE *f, const an_run *runs, size_t n, const an_comparison *c,
                    const recommendation *r, const report_opts *o);
int report_json(FILE *f, const an_run *runs, size_t n, const an_comparison *c,
                const recommendation *r, const report_opts *o);

/* Whether a what-if column of run r is shown under --what-if `list` (NULL: FP16 and BF16
 * only; "fp8": the FP8 columns too; "all": every column; else the columns named). A run whose
 * precision is one of the column's formats shows it whatever the list. */
int report_whatif_shown(const an_run *r, int col, const char *list);

#endif
