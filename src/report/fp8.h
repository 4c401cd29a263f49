/*
 * fp8.h - the FP8 findings (src/analysis/fp8.c) as `info` and `compare` print them: which
 * tensors Transformer Engine's delayed-scaling recipe would hurt, and why.
 */
#ifndef AMPDIAG_REPORT_FP8_H
#define AMPDIAG_REPORT_FP8_H

#include "analysis/compare.h"
#include "analysis/findings.h"
#include "analysis/load.h"
#include "util/json.h"

#include <stdio.h>

/* Text: a header line and one line per hurt tensor, each led by indent; nothing when the trace
 * has no delayed-scaling counts. */
void report_text_fp8(FILE *f, const an_run *r, const an_fp8_findings *x, const char *indent);
/* JSON: the key "fp8" (docs/compare-json.md; traces/FORMAT.md for info). */
void report_json_fp8(jw *w, const an_run *r, const an_fp8_findings *x);

#endif
