/*
 * compare.h - `ampdiag compare` as a function, so that `ampdiag sweep` runs the same code on
 * the traces it wrote.
 */
#ifndef AMPDIAG_COMPARE_H
#define AMPDIAG_COMPARE_H

#include <stddef.h>

#include "analysis/recommend.h"

typedef enum compare_format { CMP_TEXT = 0, CMP_MARKDOWN, CMP_JSON } compare_format;

typedef struct compare_opts {
    const char *baseline;   /* a trace path (one of the inputs or an extra one); NULL = first fp32 */
    compare_format format;  /* of the report on stdout */
    const char *plots_dir;  /* NULL */
    const char *md_plots_dir; /* plots_dir as seen from md_path (NULL: plots_dir) */
    rec_fail_set fail_mask; /* the findings --fail-on asks for */
    const char *whatif;     /* --what-if (report.h) */
    int recipe;             /* --recipe (analysis/recipe.h): its section and plan; -1: none */
    rec_target target;
    long warmup;            /* < 0: automatic */
    const char *md_path;    /* also write the Markdown report here (NULL: no) */
    const char *json_path;  /* also write the JSON report here (NULL: no) */
    const char *prog;       /* for messages: "ampdiag compare" */
    int alone;              /* --alone: a rank-0 trace by itself, not with its ranks */
} compare_opts;

void compare_opts_init(compare_opts *o);

/* Load, compare, recommend, render. Returns the exit status: 0, 1 (a --fail-on condition held),
 * 2 (bad input: the file is named on stderr), 3 (I/O). */
int compare_files(const char *const *paths, size_t n, const compare_opts *o);

/* Parse a --format value. 0 or -1. */
int compare_format_parse(const char *s, compare_format *f);

#endif
