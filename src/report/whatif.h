/*
 * whatif.h - the what-if sections beyond FP16 and BF16 (FP8 and any other column a trace
 * records) as info and compare print them: the tensors each unscaled column and the FP8 recipe
 * would hurt, and why (the findings F_WHATIF_HURT, words from src/messages/).
 */
#ifndef AMPDIAG_REPORT_WHATIF_H
#define AMPDIAG_REPORT_WHATIF_H

#include "analysis/findings.h"
#include "util/json.h"

#include <stdio.h>

/* Text: for each shown unscaled column, its tensors; then the recipe's (when its columns are
 * shown): a header line and one line per tensor, indented by indent, wrapped at width. */
void report_text_whatif_hurt(FILE *f, const an_run *r, const char *list, int indent, int width);
/* JSON: the key "fp8" (docs/compare-json.md; traces/FORMAT.md for info): the recipe's hurt
 * tensors, or null. */
void report_json_fp8(jw *w, const an_run *r);
/* JSON: the "hurt_most" list of an unscaled column (inside its object), when it has one. */
void report_json_hurt_most(jw *w, const an_run *r, int col);
/* The names of the run's columns --what-if list would not show, comma-separated, into buf (the
 * /quant columns apart: report_recipes_line). */
void report_whatif_hidden_names(char *buf, size_t n, const an_run *runs, size_t nruns, const char *list);
/* The line that says which low-precision recipes the runs counted (--recipe shows one) and, with
 * tables (info's per-column tables), that they hold /quant columns --what-if list does not show
 * ("" when neither). */
void report_recipes_line(char *buf, size_t n, const an_run *runs, size_t nruns, const char *list, int tables);

#endif
