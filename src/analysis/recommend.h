/*
 * recommend.h - the rules that turn run summaries into a recommended precision, loss scale,
 * learning rate and clip value, each with the numbers, steps and layers behind it, and the
 * --fail-on conditions. The rules (one function each in recommend.c), their thresholds and
 * their sources are in docs/recommendations.md.
 */
#ifndef AMPDIAG_RECOMMEND_H
#define AMPDIAG_RECOMMEND_H

#include "analysis/compare.h"
#include "analysis/findings.h"
#include "analysis/load.h"

/* Hardware generation (--target). */
typedef enum rec_target {
    TGT_ANY = 0, /* not given: a GPU with FP16 and BF16 (Ampere sm80 or newer) is assumed */
    TGT_SM70,    /* Volta: FP16 tensor cores, no BF16 */
    TGT_SM75,    /* Turing: FP16 tensor cores, no BF16 */
    TGT_SM80,    /* Ampere: FP16 and BF16 */
    TGT_SM89,    /* Ada */
    TGT_SM90,    /* Hopper */
    TGT_CPU      /* CPUs with AVX512_BF16 / AMX (BF16) and AVX512_FP16 (FP16) */
} rec_target;

int rec_target_parse(const char *s, rec_target *t); /* 0 or -1 */
const char *rec_target_name(rec_target t);
int rec_target_has_bf16(rec_target t);
int rec_target_has_fp16(rec_target t);

typedef enum rec_precision {
    REC_UNDECIDED = 0, /* the FP32 baseline itself fails: fix that first */
    REC_FP32,
    REC_FP16,          /* fp16 autocast + dynamic loss scaling */
    REC_BF16           /* bf16 autocast, FP32 master weights */
} rec_precision;

const char *rec_precision_name(rec_precision p); /* "undecided", "fp32", "fp16", "bf16" */

/* The assessment of one 16-bit format. */
typedef struct rec_format {
    int supported;       /* by the target */
    int observed;        /* a run of this format (at the baseline's lr) was given */
    int viable;          /* no problem found that rules it out */
    int decisive;        /* ruled out by a decisive rule (overflow, collapse, skips, NaN) */
    int needs_scaling;   /* fp16: gradients flush to zero without loss scaling */
    char summary[160];   /* the first problem in a few words ("forward overflow in fc1"), or "" */
    strlist issues;      /* what is wrong, with the numbers */
    strlist good;        /* evidence that it works */
} rec_format;

/* The loss scale rule: largest 2^k keeping the largest unscaled gradient under 65504 / 2. */
typedef struct rec_scale {
    int have;
    int log2;             /* the suggested scale is 2^log2 */
    size_t run;           /* the run the gradients come from */
    double max_grad;      /* largest unscaled gradient magnitude */
    int max_grad_layer, max_grad_kind;
    int64_t max_grad_step;
    int from_hist;        /* fractions below come from histograms (else from bounds) */
    double flushed;       /* largest per-layer fraction of non-zero gradients flushed at 2^log2 */
    int flushed_layer, flushed_kind;
    double flushed_norm;  /* that layer's share of its gradients' squared norm flushed at 2^log2
                             (from the histogram; NaN from bounds) */
    double subnormal;     /* largest per-layer fraction that are FP16 subnormals at 2^log2 */
    int subnormal_layer, subnormal_kind;
    double flushed1;      /* largest per-layer fraction flushed without scaling (scale 1) */
    int flushed1_layer, flushed1_kind;
    double range_log2;    /* log2(max / 1st percentile) of the gradient magnitudes */
} rec_scale;

typedef enum rec_lr_verdict {
    LR_UNKNOWN = 0,
    LR_KEEP,
    LR_LOWER,
    LR_RAISE,
    LR_KEEP_MASTER, /* too small an update for the format: keep the lr, use FP32 master weights */
    LR_PICK         /* a sweep over learning rates: the best one */
} rec_lr_verdict;

const char *rec_lr_name(rec_lr_verdict v); /* "unknown", "keep", "lower", "raise", ... */

/* A remedy: an option of `ampdiag run` that the advice sets besides the precision and the lr
 * (ampdiag tune applies them and re-runs). */
typedef enum rec_scope {
    REM_EVERY_RUN = 0,   /* every run, the FP32 baseline included ("every-run") */
    REM_RECOMMENDED = 1  /* the run of the recommended precision ("recommended") */
} rec_scope;

const char *rec_scope_name(rec_scope s); /* "every-run", "recommended" */

typedef struct rec_remedy {
    rec_scope scope;
    char option[32];        /* "--optim-state" */
    char value[256];        /* "fp32" */
    char why[192];          /* the finding it answers */
} rec_remedy;

#define REC_MAX_REMEDIES 8

#define FAIL_NAN 1u
#define FAIL_SKIPS 2u
#define FAIL_DIVERGENCE 4u
#define FAIL_OVERFLOW 8u

/* "nan,skips,divergence,overflow" (any subset, or "all"/"none") -> mask. 0 or -1 (message in
 * err naming the unknown word). */
int rec_fail_parse(const char *list, unsigned *mask, char *err, size_t errlen);
const char *rec_fail_name(unsigned bit);

typedef struct recommendation {
    rec_target target;
    rec_precision precision;
    int predicted;          /* the chosen 16-bit format was not run: predicted from a trace */
    int master_weights;     /* a run lost updates without FP32 master weights: say so */
    char fp32_layers[256];  /* FP32 islands to keep in the 16-bit run ("" if none) */
    char islands[256];      /* the FP32 islands the forward overflow names, whether or not the
                               verdict keeps them ("" when FP16 does not overflow) */
    double islands_param_share; /* their share of the parameters (NaN without islands) */
    double islands_flop_share;  /* their share of the GEMM FLOPs: of the parameters of linear
                                   layers, 2 x batch x params each (NaN without islands) */
    int islands_forward_finite; /* the forward pass stays finite with them: each island's output
                                   that feeds a 16-bit layer stays below 65520 (-1: no islands) */
    char verdict[512];      /* one line: "bf16 (FP32 master weights)" */
    strlist why;            /* the precision verdict's evidence, most important first */
    rec_format fp16, bf16;
    rec_scale scale;
    size_t ref;             /* run the range/clip/lr rules read (the FP32 baseline if given) */

    rec_lr_verdict lr;
    double lr_current, lr_factor, lr_suggested;
    char lr_line[256];      /* one line: "keep 0.001" / "lower to 0.0005 (x0.5)" */
    strlist lr_why;

    int clip_have;
    double clip_value, clip_frac, clip_autoclip;
    char clip_line[256];
    strlist clip_why;

    strlist warnings;

    rec_remedy remedies[REC_MAX_REMEDIES]; /* the run options the advice sets, in rule order */
    size_t nremedies;

    unsigned fail_mask, fail_held;
    strlist fail_why;
} recommendation;

/* Apply the rules. Returns 0 or -1 (out of memory). */
int recommend(const an_run *runs, size_t nruns, const an_comparison *c, rec_target target,
              unsigned fail_mask, recommendation *out);
void rec_free(recommendation *r);

/* "2^16" for powers of two, else "%g". */
void rec_fmt_scale(char *buf, size_t n, double v);

#endif
