/*
 * columns.h - chart columns: what plot draws of a long run, kept while the loader reads the
 * tensor records, in memory that does not grow with the steps (an_points in run.h).
 */
#ifndef AMPDIAG_ANALYSIS_COLUMNS_H
#define AMPDIAG_ANALYSIS_COLUMNS_H

#include "analysis/run.h"

/* The record into its column of ps: merged into it, or a new column in step order. *grew is
 * set when the column count passed AN_ENV_COLS (the caller widens the grid). 0 or -1 (out of
 * memory). */
int an_columns_add(an_run *r, an_points *ps, const ampdiag_trace_tensor *t, const int v1_fp8[2], int *grew);
/* A /whatif row's fractions into the chart column of its step (what-if column col; nothing when
 * col >= AN_CHART_WI or no record made the column). */
void an_columns_whatif(const an_run *r, an_points *ps, int64_t step, int col, double under, double over);
/* The what-if columns renumbered: column k takes what was column from[k] (n columns). */
void an_columns_permute(an_points *ps, const int *from, int n);
/* Double the run's column width until every kept kind (bit 1u << kind of keep) has at most
 * AN_ENV_COLS columns. */
void an_columns_widen(an_run *r, unsigned keep);
/* The first step of a chart column's range (its one step when the columns are steps). */
int64_t an_column_start(const an_run *r, const an_column *col);

#endif
