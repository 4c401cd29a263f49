/*
 * load.h - read one trace (or several at once) into a run (run.h): each table once, in
 * ranges, keeping aggregates whose memory does not grow with the steps (but for the per-step
 * arrays the analysis needs: the step records, the gradient norms the clip statistics sort,
 * the activation rms series compare matches between runs), then the run's findings and
 * figures, computed once (findings.h, figures.h). docs/recommendations.md explains each
 * quantity.
 */
#ifndef AMPDIAG_ANALYSIS_LOAD_H
#define AMPDIAG_ANALYSIS_LOAD_H

#include "analysis/run.h"

typedef struct an_options {
    long warmup;      /* calibration and clip warm-up window; < 0 = min(100, steps / 5) */
    int quiet;        /* no notes on stderr */
    unsigned keep_points; /* bit 1u << kind: keep that kind's records as chart columns (an_points),
                             and the distinct histogram steps; 0: aggregates only */
    int no_rms_series;    /* 1: no per-layer activation rms series (an_layer.act_rms: only
                             an_compare reads them) */
} an_options;

/* Read and summarise one trace. Returns 0, or an ampdiag_trace error code (negative) with
 * the message (naming the file) in err. run is always left in a state an_free accepts. */
int an_load(const char *path, const an_options *opt, an_run *run, char *err, size_t errlen);
void an_free(an_run *run);
/* an_load in two halves: an_load_begin opens the trace (which forks a probe of the file: call
 * it where no other thread of the process may hold a lock, e.g. before starting threads) into
 * *rd; an_load_finish reads and analyses it and closes rd (it may run on any thread). After a
 * failed an_load_begin (*rd NULL) run is in a state an_free accepts, as after either. */
int an_load_begin(const char *path, const an_options *opt, an_run *run, ampdiag_trace_reader **rd,
                  char *err, size_t errlen);
int an_load_finish(ampdiag_trace_reader *rd, const an_options *opt, an_run *run, char *err,
                   size_t errlen);
/* an_load of paths[0..n) into runs[0..n), several at once (up to the machine's cores, at most
 * 4; load_many.c); every run is left in a state an_free accepts. Returns the index of the first
 * trace that failed (*rc its error code, err its message), or n (*rc 0). Unless opt->quiet, the
 * notes of the traces before the first failure and its own are printed in path order. */
size_t an_load_many(const char *const *paths, size_t n, const an_options *opt, an_run *runs,
                    int *rc, char *err, size_t errlen);

#endif
