/*
 * ranks_internal.h - what ranks.c (the tensor records side by side), ranks_steps.c (the step
 * records, the merged steps, events and evaluations, the findings) and group.c (the arguments)
 * share. Not for use outside them.
 */
#ifndef AMPDIAG_ANALYSIS_RANKS_INTERNAL_H
#define AMPDIAG_ANALYSIS_RANKS_INTERNAL_H

#include "analysis/load_internal.h"
#include "analysis/ranks.h"

/* A rank's /tensors read in batches. */
typedef struct rcur {
    ampdiag_trace_reader *rd;
    size_t total, next;        /* rows in the table, the next to read */
    ampdiag_trace_tensor *buf; /* the batch read */
    size_t n, pos;
} rcur;

/* Where a record that must agree across ranks first differs. */
typedef struct agree_acc {
    int64_t first;             /* the step; -1 while none */
    int64_t rank, vs;          /* the rank that differs, and the one it is compared with */
    double value, vs_value;    /* their means */
    double rel;                /* the relative difference of their rms */
    size_t steps;              /* steps where some rank differs */
    size_t ranks;              /* ranks that differ at the first */
} agree_acc;

/* A layer's shards that are missing or do not add up. */
typedef struct shard_acc {
    size_t records;            /* steps where a shard of the layer is missing */
    int64_t first, rank;       /* the first, and the rank whose shard it is */
    int64_t last;              /* the last step counted */
    int kind;
    int64_t count_step;        /* the first step whose shards add up to other than the layer's
                                  parameters; -1 */
    uint64_t count;
} shard_acc;

typedef struct rview {
    an_ranks *R;
    const an_options *opt;
    an_run *run;               /* the merged run being made */
    size_t n, nl;              /* ranks, the merged run's layers */
    int **lmap;                /* [rank][its layer] -> the merged run's layer, or -1 */
    size_t *lmap_n;
    rcur *cur;                 /* [n] */
    ampdiag_trace_tensor *slot;/* [n][nl][kinds]: one step's records */
    unsigned char *have;
    agree_acc *div;            /* [nl] the weights (replicated) */
    agree_acc *mis;            /* [nl][2] weight gradients, updates (replicated) */
    an_spread *sp;             /* [nl][2 kinds][absmax, rms] activations, activation gradients */
    double *sp_sum;
    shard_acc *shard;          /* [nl] */
    double *vals;              /* [n] scratch */
    double *ratio;             /* [the merged run's steps] update ratios from the merged records */
    int64_t done;              /* the last step the pass did (INT64_MIN before the first) */
} rview;

/* Activations and their gradients are each rank's own (its part of the batch); the weights,
 * weight gradients and updates are the state the ranks share (replicated or sharded). */
static inline int an_rank_local_kind(int kind)
{
    return kind == AMPDIAG_KIND_ACTIVATION || kind == AMPDIAG_KIND_ACTIVATION_GRAD;
}
/* The position of (layer, kind) in a step's execution order among nl layers (ranks.c). */
int an_rank_exec_pos(size_t nl, int layer, int kind);
/* The spread over the ranks of val[0..R->n) at step s into sp (sum: of the relative spreads). */
void an_spread_add(an_spread *sp, double *sum, const an_ranks *R, const double *val, int64_t s);

/* ranks_steps.c: the merged run's steps, events and evaluations into m (allocated: the loader
 * takes them over), each rank's end, the step records' comparisons and spreads. 0 or -1 (out of
 * memory). */
int an_rank_steps(an_ranks *R, an_merge_src *m);
/* The rank findings into R->list (and R->spread), in order, after the pass. 0 or -1. */
int an_rank_findings(rview *v, an_run *run);

#endif
