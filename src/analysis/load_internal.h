/*
 * load_internal.h - what the loader's files share (load.c: the tables and attributes;
 * steps.c: the step records, events, divergence, spikes and clip statistics; records.c: the
 * tensor, what-if and histogram records). Not for use outside src/analysis/load*.c, steps.c,
 * records.c.
 */
#ifndef AMPDIAG_ANALYSIS_LOAD_INTERNAL_H
#define AMPDIAG_ANALYSIS_LOAD_INTERNAL_H

#include "analysis/load.h"

/* The error of a read: "out of memory reading 'PATH' (what)" or the reader's message. */
int an_load_fail(char *err, size_t errlen, int rc, const char *path, const char *what);

/* First index in the run's (sorted) step table whose step is not below `step`. */
size_t an_step_lower_bound(const an_run *r, int64_t step);
/* Index of a step in the run's step table, or -1. */
long an_step_index(const an_run *r, int64_t step);
/* The loss scale a step ran with (a step missing from /steps takes the last one before it);
 * 1 for a trace whose gradient records are unscaled. */
double an_scale_at(const an_run *r, int64_t step);

/* steps.c: the summary of /steps (loss, scale, skips, the final window), the scaler's events,
 * the events by code, divergence; then spikes and the clip statistics (0 or -1: out of
 * memory). */
void an_summarise_steps(an_run *r, const an_options *o);
void an_scale_from_events(an_run *r);
void an_scan_events(an_run *r);
void an_find_divergence(an_run *r);
int an_spikes_and_clip(an_run *r);
/* The median of the steps' finite update ratios (0 or -1: out of memory). */
int an_step_ratio_median(an_run *r);

/* records.c: the tensor records, the /whatif rows, the histograms (0 or an AMPDIAG_TRACE_
 * error, message in err). */
int an_load_records(ampdiag_trace_reader *rd, an_run *r, const an_options *opt, char *err,
                    size_t errlen);

/* quant.c: the /quant rows into their columns and the cells' quant sums (0 or an
 * AMPDIAG_TRACE_ error); then each /quant column's reference, what its scheme does to normally
 * distributed values (0 or -1: out of memory). */
int an_load_quant(ampdiag_trace_reader *rd, an_run *r);
int an_quant_refs(an_run *r);

#endif
