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

/* The parts of an_load_records, for a run whose records come from elsewhere (ranks.c: the
 * ranks' records merged). The pass over tensor records: begin (the columns /tensors holds, as
 * rd's trace has them; NULL when out of memory), add each record (a row naming an unknown
 * layer or kind counts as bad; 0 or -1: out of memory), end (keep: the layers' update ratios
 * into the run; frees tp; 0 or -1). */
typedef struct an_tensor_pass an_tensor_pass;
an_tensor_pass *an_tensor_pass_begin(ampdiag_trace_reader *rd, an_run *r, const an_options *opt);
int an_tensor_pass_add(an_run *r, an_tensor_pass *tp, const ampdiag_trace_tensor *x);
int an_tensor_pass_end(an_run *r, an_tensor_pass *tp, int keep);

/* Rows of another trace's /whatif and /histograms added to the run: its layers mapped to the
 * run's (map[layer], -1: none), only the kinds of `kinds` (bit 1u << kind). NULL: the run's
 * own trace, every row. */
typedef struct an_layer_map {
    const int *map;
    size_t n;
    unsigned kinds;
} an_layer_map;
int an_load_whatif(ampdiag_trace_reader *rd, an_run *r, const an_layer_map *lm);
int an_load_hists(ampdiag_trace_reader *rd, an_run *r, int keep, const an_layer_map *lm);
/* After the what-if rows: the columns in their fixed order. After everything: the totals over
 * the layers (0 or -1: out of memory). */
void an_sort_columns(an_run *r);
int an_layer_totals(an_run *r);

/* A run made by merging the traces of a distributed run's ranks (ranks.c): what it gives the
 * loader in place of the trace's own tables. The loader reads the attributes and layers of
 * `ref` (the first rank's trace), takes over steps, events and evaluations (freed with the
 * run), and calls records() with the tensor pass begun: it adds the merged records and sets
 * what the steps need from them, before the steps are summarised; then finish() (the what-if
 * rows and histograms, the rank findings) before the run's findings are computed. Each returns
 * 0 or an AMPDIAG_TRACE_ error with the message in err. */
typedef struct an_merge_src {
    ampdiag_trace_reader *ref;
    an_step *steps;
    size_t nsteps;
    char first_skip_reason[AMPDIAG_TRACE_REASON_LEN];
    ampdiag_trace_event *events;
    size_t nevents;
    ampdiag_trace_eval *evals;
    size_t nevals;
    int (*records)(void *ctx, an_run *r, an_tensor_pass *tp, char *err, size_t errlen);
    int (*finish)(void *ctx, an_run *r, char *err, size_t errlen);
    void *ctx;
} an_merge_src;

/* load.c: the merged run at path (the first rank's); run is left in a state an_free accepts. */
int an_load_merged(const char *path, const an_options *opt, an_merge_src *m, an_run *r, char *err,
                   size_t errlen);
/* quant.c: the /quant rows into their columns and the cells' quant sums (0 or an
 * AMPDIAG_TRACE_ error); then each /quant column's reference, what its scheme does to normally
 * distributed values (0 or -1: out of memory). */
int an_load_quant(ampdiag_trace_reader *rd, an_run *r);
int an_quant_refs(an_run *r);

#endif
