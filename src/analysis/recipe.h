/*
 * recipe.h - low-precision training recipes as the analysis judges them from a trace: MXFP8
 * (OCP's scale rule, or NVIDIA's round-up), NVFP4, FP8 blockwise, FP8 current and delayed
 * scaling. A recipe reads, for each tensor kind it quantises (the GEMM operands: activations,
 * activation gradients, weights), the what-if columns of its scheme, element format and
 * directions (/quant rows; delayed scaling: the /whatif rows), and judges each (layer, kind)
 * against what the same scheme does to normally distributed values (the columns' reference,
 * quant.c): a tensor is hurt when the recipe flushes or saturates more of it, or its SQNR is
 * lower, by more than a named constant (evidence.c; docs/numerics.md, "Which layers can take a
 * recipe"). The findings (F_RECIPE_HURT, F_RECIPE_LAYER, F_RECIPE_PLAN) are computed for every
 * recipe a trace counted (an_recipe_findings, with the other findings of a trace); the reports
 * show the one --recipe names.
 */
#ifndef AMPDIAG_ANALYSIS_RECIPE_H
#define AMPDIAG_ANALYSIS_RECIPE_H

#include "analysis/run.h"

typedef enum an_recipe {
    AN_RECIPE_MXFP8 = 0,   /* MX, E4M3 elements, blocks of 32 along rows and columns; OCP's rule (only) */
    AN_RECIPE_MXFP8_RCEIL, /* the same with NVIDIA's rule (the scale rounded up) */
    AN_RECIPE_NVFP4,       /* E2M1 in blocks of 16; weights in 16 x 16 tiles */
    AN_RECIPE_FP8_BLOCK,   /* E4M3, 1 x 128 blocks; weights in 128 x 128 tiles */
    AN_RECIPE_FP8_CURRENT, /* per-tensor scale from the same step's amax; E4M3 forward, E5M2 backward */
    AN_RECIPE_FP8_DELAYED, /* per-tensor scale from an amax history (the /whatif delayed rows) */
    AN_NRECIPES
} an_recipe;

/* "mxfp8", "mxfp8:rceil", "nvfp4", "fp8-block", "fp8-current", "fp8-delayed". */
const char *an_recipe_name(int rc);
/* What it is, in a few words ("MXFP8: E4M3 in blocks of 32, power-of-two scales (OCP rule)"). */
const char *an_recipe_what(int rc);
/* The recipe a name names (case-insensitive), or -1. */
int an_recipe_parse(const char *name);
/* "mxfp8, mxfp8:rceil, ..." (the names --recipe takes). */
const char *an_recipe_names(void);

/* A kind the recipes quantise (the GEMM operands): activations, activation gradients, weights. */
int an_recipe_kind(int kind);
/* The run's columns the recipe reads for a kind, into cols (at most AN_MAX_WHATIF); *fallback
 * set when they are not the recipe's own (its element format, rule or directions were not
 * counted: the nearest the trace has). */
size_t an_recipe_columns(const an_run *r, int rc, int kind, int *cols, int *fallback);
/* The trace counted the recipe (some column of it). */
int an_recipe_counted(const an_run *r, int rc);

/* Why a recipe hurts a tensor (F_RECIPE_HURT's and F_RECIPE_LAYER's "reason"). */
typedef enum an_recipe_reason {
    AN_RC_OK = 0,      /* within the limits of its reference */
    AN_RC_SATURATE,    /* saturates more than RECIPE_SAT_EXCESS beyond the reference */
    AN_RC_FLUSH,       /* flushes more than RECIPE_FLUSH_EXCESS beyond the reference */
    AN_RC_SQNR         /* SQNR more than RECIPE_SQNR_MARGIN below the reference's */
} an_recipe_reason;

/* One (layer, kind) under a recipe: the figures of the column that hurts it most. */
typedef struct an_recipe_cell {
    int col;           /* that column (-1: the recipe has none for the cell) */
    an_qfigs q;        /* its figures (delayed scaling: flush and saturated from the counts) */
    double ref_sqnr_db, ref_flush, ref_saturated; /* the column's reference */
    double excess;     /* the largest of flush, saturation and SQNR beyond the reference, each in
                          units of its constant: above 1, hurt */
    int reason;        /* an_recipe_reason */
} an_recipe_cell;

/* The cell's figures under the recipe; 0 when it has none (no column, no record). */
int an_recipe_cell_of(const an_run *r, int rc, int layer, int kind, an_recipe_cell *out);

/* A layer the plan takes in: one with parameters that is not an op kept in FP32, a norm or an
 * embedding (the recipes quantise linear layers). */
int an_recipe_plan_layer(const an_run *r, int layer);

#endif
