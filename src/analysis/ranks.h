/*
 * ranks.h - a distributed run read from its ranks' traces (one trace per rank, as
 * ampdiag.torch writes them under torch.distributed: traces/FORMAT.md, "Distributed runs").
 *
 * A command's trace argument names a group of rank traces in one of two ways: a glob in
 * quotes ('run.rank*.h5', glob(3)), or the trace of rank 0 of a run of W > 1 ranks whose
 * siblings <stem>.rank1<ext> ... <stem>.rank<W-1><ext> lie beside it. an_load_args reads every
 * argument (a group's traces with an_load_many, checked to be one run: the rank attributes
 * valid, one world size, distinct ranks, the same model, precision, optimizer, lr and layer
 * names), and makes of each group one run (an_rank_view, once, in the analysis): the ranks'
 * records merged as the whole run held them (below), every finding of a trace computed on it,
 * and what only the ranks side by side show as findings of its own (evidence.h, F_RANK_*):
 *
 *   rank_first_nonfinite     the first rank, step, layer and tensor with NaN/inf (by step, the
 *                            forward pass before the backward pass, a rank's own tensors
 *                            before reduced ones)
 *   rank_replica_divergence  replicated weights whose records differ across ranks
 *   rank_reduced_mismatch    what must agree after the reduction (weight gradients, updates,
 *                            the gradient norm; in every run the lr and the loss scale) differs
 *   rank_skip_disagreement   a rank skipped steps the others did not
 *   rank_stopped_early       a rank stopped before the others
 *   rank_missing             a rank's trace, or a shard of a layer at some steps, is missing
 *   rank_spread              the widest spread of a figure across ranks (loss, update ratio,
 *                            step time, activation absmax and rms)
 *
 * The merged run. Sharded (FSDP): per (step, layer, kind), the shards' records of the ranks
 * that hold one copy of the parameters merged exactly (ampdiag_trace_tensor_to_tstats,
 * ampdiag_tstats_merge: counts summed, extremes of extremes, sums of squares summed), the
 * gradient norm the square root of the shards' summed squares, the update ratio from the
 * merged records. Replicated (DDP) and "none": the first rank's weights, weight gradients and
 * updates. Either way the activations and their gradients merged over every rank (the global
 * batch), the loss the mean over the ranks, a step skipped where any rank skipped it, the step
 * time the slowest rank's; the steps every rank recorded; the events of every rank (one of each
 * step, layer and code; another rank's marked "[rank N]"); the evaluations averaged where every
 * rank has them at the same steps, else the first rank's. Its status: complete where every
 * rank's is, else that of the rank that stopped first.
 */
#ifndef AMPDIAG_ANALYSIS_RANKS_H
#define AMPDIAG_ANALYSIS_RANKS_H

#include "analysis/evidence.h"
#include "analysis/load.h"
#include "analysis/run.h"

/* How the ranks hold the parameters (the trace's sharding attribute). */
typedef enum an_sharding { AN_SH_REPLICATED = 0, AN_SH_SHARDED, AN_SH_HYBRID, AN_SH_NONE } an_sharding;

/* The figures whose spread across ranks is measured (RANK_SPREAD's "figure"). */
typedef enum an_spread_fig {
    AN_SP_LOSS = 0, AN_SP_UPDATE_RATIO, AN_SP_WALL_MS, AN_SP_ABSMAX, AN_SP_RMS, AN_NSPREAD_FIGS
} an_spread_fig;
const char *an_spread_name(int fig);  /* "loss", "update_ratio", "wall_ms", "absmax", "rms" */
const char *an_spread_words(int fig); /* "the training loss", ..., "absmax" */

/* A figure's widest spread across ranks over the steps. */
typedef struct an_spread {
    int fig;              /* an_spread_fig */
    int layer, kind;      /* the activations' (absmax, rms); -1 for the per-step figures */
    int64_t step;         /* where the spread is widest */
    double min, max;      /* the figure there, smallest and largest over the ranks */
    int64_t argmin, argmax; /* the ranks holding them */
    double rel;           /* (max - min) / max(|min|, |max|) there */
    double typical;       /* the mean of that relative spread over the steps compared */
    size_t steps;         /* steps compared (finite on at least two ranks) */
} an_spread;

/* One rank's trace and what the ranks' records say about it. */
typedef struct an_rank {
    an_run run;           /* the trace read alone */
    int64_t rank;
    int64_t nf_step;      /* its first record holding NaN/inf in execution order (-1: none): */
    int nf_layer, nf_kind;/* ... its layer (the merged run's index) and kind */
    int64_t local_nf_step;/* its first activation or activation-gradient record with NaN/inf; -1 */
    int64_t end;          /* where it stopped: its stop event's step; else, not complete, its last
                             step + 1; INT64_MAX complete */
    const char *stop_message; /* its stop event's message, or NULL */
    size_t skipped_alone; /* steps it skipped that some other rank did not */
} an_rank;

typedef struct an_ranks {
    char pattern[512];     /* the group as given: the glob, or the rank-0 trace's path */
    int64_t world_size;
    an_sharding sharding;
    char sharding_name[16], backend[32], reduce_dtype[16];
    an_rank *rank;         /* [n], by rank */
    size_t n;
    int64_t *missing;      /* ranks of 0 .. world_size - 1 without a trace */
    size_t nmissing;
    size_t shard_group;    /* the first ranks that hold one copy of the parameters: 1
                              (replicated, none), n (sharded), found from the records' counts
                              (hybrid) */
    size_t merged_steps;   /* steps every rank recorded: the merged run's */
    int64_t merged_from, merged_to;
    size_t unsorted;       /* tensor records out of step order in a rank's trace: left out */
    an_spread *spread;     /* every figure's widest spread, widest first */
    size_t nspread;
    an_finding_list list;  /* what reading the ranks together found (subject run 0) */
    char local_ranks[256]; /* RANK_FIRST_NONFINITE's "local_ranks" ("1, 3") */
} an_ranks;

/* Frees the ranks' runs and everything else of R, and R. */
void an_ranks_free(an_ranks *R);

/* The most ranks a group may have (world_size). */
#define AN_MAX_WORLD (1 << 20)

/* Flags of an_load_args. */
enum {
    AN_ARGS_ALONE = 1  /* a rank-0 trace is read by itself, not with the traces beside it */
};

/* What an_load_args made of the arguments: one run per argument (a group's merged run), the
 * arguments' own words for them, and the lines to print on stderr (where a group was read). */
typedef struct an_inputs {
    an_run *runs;          /* [n], each left in a state an_free accepts */
    const char **names;    /* [n] the arguments (pointers into args) */
    size_t n;
    char **notes;          /* [nnotes] lines for stderr: "reading ranks 0-1 of 'run.rank0.h5'
                              together (...)" */
    size_t nnotes;
} an_inputs;

/* Read the traces the arguments args[0..nargs) name, into in (freed with an_inputs_free, also on
 * failure). An argument holding *, ? or [ that is not a file is a glob: its matches are one
 * group. A trace of rank 0 of W > 1 ranks with at least one sibling beside it is read with its
 * siblings (unless AN_ARGS_ALONE); a sibling given as another argument (a glob the shell
 * expanded) is then read once, in the group. opt is the merged runs' (and the other traces');
 * the ranks' own runs are read with aggregates only. Returns 0, or an ampdiag_trace error code
 * with the message (naming the file or argument) in err: AMPDIAG_TRACE_ESCHEMA for a group that
 * is not one run, ENOENT for a glob without a match. */
int an_load_args(const char *const *args, size_t nargs, const an_options *opt, unsigned flags,
                 an_inputs *in, char *err, size_t errlen);
void an_inputs_free(an_inputs *in);

/* The merged run of the ranks' runs R->rank[0..n) (read, checked, sorted by rank; R->missing
 * set): the ranks' traces read again for their records, side by side. R is handed to the run
 * (run->ranks), also on failure; the run is left in a state an_free accepts. 0 or an
 * ampdiag_trace error code (message in err). */
int an_rank_view(an_ranks *R, const an_options *opt, an_run *run, char *err, size_t errlen);

#endif
