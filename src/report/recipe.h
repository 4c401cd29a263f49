/*
 * recipe.h - the low-precision recipe sections as info and compare print them (recipe.h of
 * analysis: MXFP8, NVFP4, FP8 blockwise, FP8 current and delayed scaling): by default one line
 * naming the recipes the traces counted; for the recipe --recipe names, the tensors it would
 * hurt and why, and the per-layer plan (which layers can take it, which should stay BF16,
 * ranked by the measured error), in text, Markdown and JSON. Words from src/messages/.
 */
#ifndef AMPDIAG_REPORT_RECIPE_H
#define AMPDIAG_REPORT_RECIPE_H

#include "analysis/findings.h"
#include "util/json.h"

#include <stdio.h>

/* The names of the recipes runs[0..n) counted, comma-separated ("" when none). */
void report_recipes_counted(char *buf, size_t len, const an_run *runs, size_t n);
/* Text: run r's section for recipe rc (the tensors it would hurt, then its plan), indented by
 * indent and wrapped at width; the line that says the run did not count it when it did not. */
void report_text_recipe(FILE *f, const an_run *r, int rc, int indent, int width);
/* Markdown: the same, as a list and a table (a heading of level 3 first). */
void report_md_recipe(FILE *f, const an_run *r, int rc);
/* JSON: the key "recipes" (docs/compare-json.md; traces/FORMAT.md for info): the recipes the
 * trace counted, and for each its plan, the layers to keep in BF16 and the tensors it would hurt
 * most. */
void report_json_recipes(jw *w, const an_run *r);
/* JSON (info): the key "quant": per /quant column, every (layer, kind) with its figures. */
void report_json_quant(jw *w, const an_run *r);
/* Text (info): per shown /quant column, the table of its (layer, kind) figures. */
void report_text_quant(FILE *f, const an_run *r, const char *list, int width);

#endif
