/*
 * compare.h - runs compared with a baseline: the loss gap of each run and the noise band it is
 * judged against, the layers whose activations deviate most, the notes on what differs
 * between the runs' configurations. Computed once per comparison (an_compare).
 */
#ifndef AMPDIAG_ANALYSIS_COMPARE_H
#define AMPDIAG_ANALYSIS_COMPARE_H

#include "analysis/run.h"
#include "analysis/evidence.h"

/* Labels for runs shown together (compare's report and the charts alike): the precision, with
 * " lr X" / " seed N" when those differ between the runs, or the file name where two would
 * still read the same. */
void an_label_runs(an_run *runs, size_t n);

/* ------------------------------------------------------------------------------------------
 * Comparing runs with the baseline
 * ------------------------------------------------------------------------------------------ */

typedef struct an_gap {
    int have;             /* both runs have the metric */
    int eval;             /* 1: final eval loss at a common step; 0: final-window training loss */
    int64_t step;         /* the eval step, or the last common step */
    double base, value;   /* the metric in the baseline and in this run */
    double rel;           /* (value - base) / |base| */
    double curve_max_rel; /* largest relative gap of the 10 segment means of the training loss */
    int64_t curve_max_from, curve_max_to;
    /* the noise band this gap is judged against, relative to base: paired (both runs have the
     * examples of that evaluation: max(NOISE_BAND_MIN, NOISE_SE standard errors of the per-example
     * differences), and at least the band over seeds where one was measured), else the
     * comparison's band */
    double band;
    int paired;
    size_t examples;      /* examples paired */
    double paired_band;   /* NOISE_SE standard errors of the differences, relative (NaN: unpaired) */
} an_gap;

typedef struct an_layer_dev {
    int layer;            /* index in the run */
    double rel;           /* median relative difference of activation rms vs the baseline */
    size_t n;             /* common steps */
} an_layer_dev;

typedef struct an_comparison {
    size_t nruns;
    size_t baseline;      /* index of the baseline run */
    int baseline_is_fp32;
    /* noise band of the metric, relative to the baseline's metric */
    double band;          /* the unpaired band (each gap has its own, paired where it can be) */
    int band_from_seeds;  /* 1: 2 sigma over baseline-config runs with other seeds */
    int band_from_eval;   /* 1: 2 standard errors of the baseline's eval loss (its examples) */
    size_t band_seeds;    /* runs used */
    double tail_noise_rel;/* 2 * sd / sqrt(W) of the baseline's final-window training loss, relative */
    an_gap *gap;          /* [nruns]; gap[baseline].have = 0 */
    an_layer_dev **dev;   /* [nruns] sorted, largest first; NULL for the baseline */
    size_t *ndev;
    int **layer_map;      /* [nruns][run's nlayers] -> baseline layer index or -1 */
    an_finding_list list; /* the comparison's findings (evidence.h): what differs between the
                             runs (the notes), each run's loss gap, the layers deviating most */
    int lr_measured;      /* the caller measured the baseline's lr against its neighbours (ampdiag
                             tune's yardstick): a baseline still falling is not a reason to decline */
    int oom;
} an_comparison;

/* Compare every run with runs[baseline]: labels the runs, shares the layers a run kept in FP32
 * by name, and computes every run's findings again with its index in runs (an_findings_refresh).
 * Returns 0 or -1 (out of memory). */
int an_compare(an_run *runs, size_t nruns, size_t baseline, an_comparison *c);
void an_comparison_free(an_comparison *c);

#endif
