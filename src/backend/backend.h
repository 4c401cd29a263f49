/*
 * backend.h - the few operations the model needs, as a table of function pointers.
 *
 * A backend is a struct of function pointers (ggml / llm.c style). backend_cpu.c implements it
 * with C loops and CBLAS; a CUDA backend implements the same table with kernels and cuBLAS, so
 * layers.c and model.c never know where the numbers live. Every buffer passed to an operation
 * was allocated by the same backend's alloc (device memory for a GPU backend); host data moves
 * in and out only through to_device / to_host.
 *
 * Layout conventions (llm.c): tensors are row-major; an activation is [N, C] with N = B*T rows
 * (one row per example, or per token); a linear weight is [OC, C] (PyTorch's layout).
 *
 * Rounding. Every operation that produces a tensor takes a bk_rnd saying which format the
 * result is held in: AMPDIAG_FP32 (no rounding) or FP16/BF16, emulated exactly by rounding
 * each float32 result to the format (round to nearest even, overflow to +-inf, subnormals kept
 * unless flags has AMPDIAG_ROUND_FTZ). The rounding is done as the operation writes its output:
 * fused into its output loop, or by a vector pass over the output right after its FP32 loop
 * (backend_cpu.c). Arithmetic is always FP32 (reductions such as the loss mean and sum of
 * squares in double), as on a GPU with FP32 accumulation. Operands are NOT rounded by the
 * operations: the caller holds each operand in the right format already (layers.c rounds an
 * FP32 operand into a copy once, and model.c rounds the FP32 master weights into a compute copy
 * once per step), because one rounded copy serves the forward and both backward GEMMs.
 *
 * "beta" arguments of gradient operations: 0 overwrites the destination, 1 accumulates into
 * it (a tensor used twice, as the residual stream is, receives the sum of two gradients). With
 * accumulation the result is rnd(old + rnd(contribution)), which is what autograd does: each
 * contribution is produced in its op's format, then the sum is held in the tensor's format.
 */
#ifndef AMPDIAG_BACKEND_H
#define AMPDIAG_BACKEND_H

#include "ampdiag.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The format a result is held in. fmt AMPDIAG_FP32 means "no rounding" (flags ignored). */
typedef struct bk_rnd {
    ampdiag_format fmt;
    unsigned flags; /* AMPDIAG_ROUND_FTZ */
} bk_rnd;

static inline bk_rnd bk_rnd_make(ampdiag_format fmt, unsigned flags)
{
    bk_rnd r = {fmt, flags};
    return r;
}

#define BK_NO_RND bk_rnd_make(AMPDIAG_FP32, 0u)

/* An optimizer's configuration (torch.optim.SGD with momentum, dampening 0; torch.optim.AdamW). */
typedef enum { BK_SGD = 0, BK_ADAMW = 1 } bk_optim_kind;
typedef struct bk_optim {
    bk_optim_kind kind;
    double momentum;           /* SGD; 0.9 */
    double weight_decay;       /* SGD: L2 added to the gradient; AdamW: decoupled; 0 */
    double beta1, beta2;       /* AdamW: 0.9, 0.999 */
    double eps;                /* AdamW: 1e-8 */
    ampdiag_format state_fmt;  /* format the optimizer state (and its arithmetic) is held in */
    ampdiag_format weight_fmt; /* format the weights are stored in: FP32 (master) or BF16 (pure) */
    unsigned round_flags;      /* AMPDIAG_ROUND_FTZ */
    ampdiag_format copy_fmt;   /* format of optim_step's w_copy (the GEMMs' compute copy) */
} bk_optim;

/* What an update did to a range of parameters (filled on traced steps). */
typedef struct bk_update_stats {
    ampdiag_tstats weight;   /* the weights the step started from */
    ampdiag_tstats update;   /* the intended change dw (before storage rounding) */
    uint64_t lost_updates;   /* dw != 0 but the stored weight did not change */
    uint64_t lost_if_fp16;   /* dw != 0 but fl16(w + dw) == fl16(w): lost with FP16 weights */
    uint64_t lost_if_bf16;   /* the same for BF16 weights */
} bk_update_stats;

/* A statistics request: the record of x[0..n) into *s, its histogram into *h when h is not
 * NULL (tstats_many). */
typedef struct bk_stats_req {
    const float *x;
    size_t n;
    ampdiag_tstats *s;
    ampdiag_hist *h;
} bk_stats_req;

/* An update's request: what the update dw[0..n) did to weights w_old[0..n), added to *st (and
 * its histogram to *hu when not NULL), as update_stats (update_stats_many). */
typedef struct bk_update_req {
    const float *w_old, *dw;
    size_t n;
    bk_update_stats *st;
    ampdiag_hist *hu;
} bk_update_req;

/* A counts-at-least request: counts[j] := #(|x| >= ge[j]) over x[0..n) for j < k <= 8, as
 * count_at_least (count_at_least_many). */
typedef struct bk_ge_req {
    const float *x;
    size_t n, k;
    const uint32_t *ge;
    uint64_t *counts;
} bk_ge_req;

typedef struct backend backend;

struct backend {
    const char *name; /* "cpu", "cuda" */
    /* the device as the trace names it (its device_name attribute), filled when the backend is
     * made: "CPU (exact FP16/BF16 emulation)"; for a GPU its name, compute capability, driver,
     * CUDA runtime and cuBLAS versions and whether GEMMs may use TF32 */
    const char *desc;
    void *ctx;        /* the backend's own state (streams, handles); NULL for the CPU */

    /* ---------------------------------------------------------------- memory */
    /* Zero-filled buffer of `bytes` bytes (64-byte aligned on the CPU); NULL when out of memory. */
    void *(*alloc)(const backend *bk, size_t bytes);
    void (*free)(const backend *bk, void *p); /* NULL is allowed */
    void (*to_device)(const backend *bk, void *dst, const void *src_host, size_t bytes);
    void (*to_host)(const backend *bk, void *dst_host, const void *src, size_t bytes);

    /* ---------------------------------------------------------------- buffers */
    void (*fill)(const backend *bk, float *x, float v, size_t n);   /* x[i] = v */
    void (*scale)(const backend *bk, float *x, float a, size_t n);  /* x[i] *= a (FP32) */
    /* y[i] = rnd(beta*y[i] + rnd(a*x[i])); beta 0 overwrites y (so y may hold NaN). */
    void (*axpy)(const backend *bk, float *y, float beta, float a, const float *x, size_t n,
                 bk_rnd r);
    /* out[i] = rnd(in[i]); in == out allowed. */
    void (*round)(const backend *bk, float *out, const float *in, size_t n, bk_rnd r);

    /* ---------------------------------------------------------------- reductions */
    double (*sum)(const backend *bk, const float *x, size_t n);   /* double accumulation */
    double (*sumsq)(const backend *bk, const float *x, size_t n); /* for the gradient norm */
    size_t (*count_nonfinite)(const backend *bk, const float *x, size_t n);
    /* ampdiag_tstats_compute on the buffer; h may be NULL. */
    void (*tstats)(const backend *bk, const float *x, size_t n, ampdiag_tstats *s,
                   ampdiag_hist *h);
    /* tstats of k buffers: a device queues them all and copies their records back together,
     * waiting once (the tracer's statistics of one kind of tensor of every layer). NULL: the
     * backend has no such call, and bk_tstats_many calls tstats k times. */
    void (*tstats_many)(const backend *bk, size_t k, const bk_stats_req *req);
    /* ampdiag_whatif_scaled_n on the buffer: the what-if counts of nfmt formats, fmt[i] after
     * multiplying by scale[i] (per-tensor scaled FP8), into counts[i]. 0, or -1 for an unknown
     * fmt or a scale not finite and > 0. NULL where a backend has none: the delayed-scaling FP8
     * counts are then not recorded. */
    int (*whatif_scaled)(const backend *bk, size_t nfmt, const ampdiag_format *fmt, const float *scale,
                         const float *x, size_t n, uint64_t (*counts)[AMPDIAG_WHATIF_NCLASSES]);
    /* ampdiag_count_at_least on the buffer: counts[j] := how many |x| bit patterns are at least
     * ge[j] (k <= 8 thresholds, ge host memory). 0 or -1 as that. NULL where a backend has none:
     * the delayed-scaling FP8 counts then take whatif_scaled's pass for every threshold. */
    int (*count_at_least)(const backend *bk, const float *x, size_t n, size_t k, const uint32_t *ge,
                          uint64_t *counts);
    /* count_at_least of k requests, waiting once (a device queues them all). 0, or -1 as
     * count_at_least for any request (counts then undefined). NULL: the FP8 counts take
     * count_at_least tensor by tensor. */
    int (*count_at_least_many)(const backend *bk, size_t k, const bk_ge_req *req);
    /* ampdiag_quant_whatif on the buffer: the block-scaled what-if (MX, NVFP4, FP8 blockwise,
     * FP8 current scaling) of nspec schemes (host memory) into out (host memory); x [n] is a
     * rows x cols matrix then a 1-D tail, amax its largest |x| as that takes it. 0, or -1 as
     * that. NULL where a backend has none (the CUDA one, for now): the /quant rows are then not
     * recorded. */
    int (*quant_whatif)(const backend *bk, const float *x, size_t n, size_t rows, size_t cols, float amax,
                        size_t nspec, const ampdiag_qspec *spec, ampdiag_qstats *out);
    /* ampdiag_tstats_compute_ge on the buffer: tstats and, in the same pass, count_at_least's
     * counts (k <= 8 thresholds, ge host memory; h may be NULL). 0 or -1 as that. NULL where a
     * backend has none: tstats, then count_at_least (the delayed-scaling FP8 counts, fp8.h). */
    int (*tstats_ge)(const backend *bk, const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h,
                     size_t k, const uint32_t *ge, uint64_t *counts);

    /* ---------------------------------------------------------------- GEMM
     * C[M,N] = rnd(alpha * op(A)[M,K] @ op(B)[K,N] + beta * C), row-major, op = transpose when
     * ta/tb is non-zero, FP32 accumulation. lda/ldb/ldc are the row strides of A, B, C as
     * stored. */
    void (*gemm)(const backend *bk, int ta, int tb, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                 bk_rnd r);

    /* ---------------------------------------------------------------- linear helpers */
    /* out[N,OC]: out[n,o] = rnd(out[n,o] + bias[o]) (the addmm epilogue). */
    void (*bias_add)(const backend *bk, float *out, const float *bias, int N, int OC, bk_rnd r);
    /* dbias[OC] = rnd(sum over n of dout[N,OC]) (FP32 accumulation). */
    void (*bias_grad)(const backend *bk, float *dbias, const float *dout, int N, int OC,
                      bk_rnd r);

    /* ---------------------------------------------------------------- elementwise */
    void (*relu_fwd)(const backend *bk, float *out, const float *inp, size_t n, bk_rnd r);
    /* dinp = rnd(beta*dinp + rnd(inp > 0 ? dout : 0)) */
    void (*relu_bwd)(const backend *bk, float *dinp, const float *inp, const float *dout,
                     size_t n, float beta, bk_rnd r);
    /* GPT-2's tanh approximation, computed in FP32. */
    void (*gelu_fwd)(const backend *bk, float *out, const float *inp, size_t n, bk_rnd r);
    void (*gelu_bwd)(const backend *bk, float *dinp, const float *inp, const float *dout,
                     size_t n, float beta, bk_rnd r);
    /* out = rnd(a + b) (the residual connection; its backward is two axpy calls). */
    void (*add_fwd)(const backend *bk, float *out, const float *a, const float *b, size_t n,
                    bk_rnd r);

    /* ---------------------------------------------------------------- layer norm
     * inp, out [N,C]; weight, bias [C]; mean, rstd [N] (FP32, saved for the backward).
     * Statistics in FP32, eps 1e-5 (PyTorch), out rounded with r. */
    void (*layernorm_fwd)(const backend *bk, float *out, float *mean, float *rstd,
                          const float *inp, const float *weight, const float *bias, int N, int C,
                          bk_rnd r);
    /* dinp [N,C] (beta, rounded with rx; NULL when the input needs no gradient); dweight,
     * dbias [C] overwritten, rounded with rw. */
    void (*layernorm_bwd)(const backend *bk, float *dinp, float *dweight, float *dbias,
                          const float *dout, const float *inp, const float *weight,
                          const float *mean, const float *rstd, int N, int C, float beta,
                          bk_rnd rx, bk_rnd rw);

    /* ---------------------------------------------------------------- causal attention
     * qkv [B,T,3C] (q, k, v side by side, head h at columns h*hs..h*hs+hs of each, hs = C/NH);
     * out [B,T,C]. S = rnd(Q K^T / sqrt(hs)) (a GEMM held in r), causal mask, P = softmax(S)
     * in FP32, saved in att [B,NH,T,T]; its rounded copy att_r = rnd(P) is the operand of
     * out = rnd(att_r V). Masked entries of att and att_r are 0. */
    void (*attention_fwd)(const backend *bk, float *out, float *att, float *att_r,
                          const float *qkv, int B, int T, int C, int NH, bk_rnd r);
    /* dqkv [B,T,3C] overwritten; scratch [B,NH,T,T]. The gradients of S and of the GEMM
     * outputs are rounded with r; masked positions receive no gradient (and contribute nothing
     * to a row's softmax sum, so an inf in a masked dP cannot leak into the row). */
    void (*attention_bwd)(const backend *bk, float *dqkv, float *scratch, const float *dout,
                          const float *qkv, const float *att, const float *att_r, int B, int T,
                          int C, int NH, bk_rnd r);

    /* ---------------------------------------------------------------- embedding
     * out[B,T,C] = rnd(wte[tokens[b,t]] + wpe[t]); tokens [B,T] in device memory, each in
     * [0, V) (the caller checks). */
    void (*embed_fwd)(const backend *bk, float *out, const int32_t *tokens, const float *wte,
                      const float *wpe, int B, int T, int C, bk_rnd r);
    /* dwte [V,C] and dwpe [T,C] overwritten: FP32 scatter-add of dout, then rounded with rw. */
    void (*embed_bwd)(const backend *bk, float *dwte, float *dwpe, const float *dout,
                      const int32_t *tokens, int B, int T, int C, int V, bk_rnd rw);

    /* ---------------------------------------------------------------- softmax cross-entropy
     * logits [N,V]; targets [N] in [0, V) (device memory); probs [N,V] FP32 softmax saved for
     * the backward; losses [N] = -log p[target] in FP32. */
    void (*xent_fwd)(const backend *bk, float *losses, float *probs, const float *logits,
                     const int32_t *targets, int N, int V);
    /* dlogits[N,V] = rnd((probs - onehot(target)) * dscale), dscale = loss_scale / N for a
     * mean loss. Overwrites dlogits. */
    void (*xent_bwd)(const backend *bk, float *dlogits, const float *probs,
                     const int32_t *targets, int N, int V, float dscale, bk_rnd r);

    /* ---------------------------------------------------------------- optimizer
     * The gradients as the backward left them (loss-scaled), each read as (g * ginv) * gscale:
     * ginv undoes the loss scale, gscale is the clip coefficient. */
    /* One pass: the number of non-finite values as held (scaled: GradScaler checks before it
     * unscales) is added to *nonfinite, and the sum of squares (double) of the unscaled finite
     * ones, g[i] * inv_scale, to *sumsq (+inf where unscaling a finite value overflows). */
    void (*grad_norm)(const backend *bk, const float *g, size_t n, float inv_scale,
                      double *sumsq, uint64_t *nonfinite);
    /* Update n parameters w (stored rounded to c->weight_fmt) with gradients g and state m, v
     * ([n] each; v NULL for SGD), t the number of updates taken including this one (Adam's bias
     * correction, SGD's first step). dw_keep and w_keep ([n] each, may be NULL) receive the
     * intended changes and the weights the update started from, for update_stats. w_copy ([n],
     * may be NULL) receives the updated weights rounded to c->copy_fmt, and the number of
     * updated weights that are NaN or inf is added to *nonfinite (may be NULL): the compute
     * copy and the check of the weights, taken as the update passes over them. */
    void (*optim_step)(const backend *bk, const bk_optim *c, long t, float *w, const float *g,
                       float *m, float *v, size_t n, double lr, float ginv, float gscale,
                       float *dw_keep, float *w_keep, float *w_copy, uint64_t *nonfinite);
    /* What an update did to n parameters that held w_old, given its intended changes dw (from
     * optim_step): adds the update's statistics (histogram to hu when not NULL) and the lost
     * updates as stored and if the weights were FP16 / BF16 to st (st->weight is left alone). */
    void (*update_stats)(const backend *bk, const bk_optim *c, const float *w_old,
                         const float *dw, size_t n, bk_update_stats *st, ampdiag_hist *hu);
    /* update_stats of k requests, waiting once (as tstats_many). NULL: bk_update_stats_many
     * calls update_stats k times. */
    void (*update_stats_many)(const backend *bk, const bk_optim *c, size_t k, const bk_update_req *req);

    /* ---------------------------------------------------------------- ordering and errors
     * A fence: returns once every operation issued so far has finished, so that another
     * thread (the tracer) may read its results and buffers may be reused. Operations report
     * no status of their own: a device records its first failure, and sync returns it (0, or
     * -1 with a message naming the operation in err) and clears it. Every caller that hands
     * results on checks it. */
    int (*sync)(const backend *bk, char *err, size_t errlen);

    /* ---------------------------------------------------------------- self-check
     * The backend's own exhaustive check, for `ampdiag selftest` (NULL: it has none). The CUDA
     * backend rounds every float32 bit pattern with numfmt.h's device code and compares it
     * with CUDA's own conversions. 0 passed, 1 failed, -1 could not run; msg says what. */
    int (*self_check)(const backend *bk, char *msg, size_t msglen);
};

/* tstats of k buffers through the backend's tstats_many where it has one. */
static inline void bk_tstats_many(const backend *bk, size_t k, const bk_stats_req *req)
{
    if (bk->tstats_many) {
        bk->tstats_many(bk, k, req);
        return;
    }
    for (size_t i = 0; i < k; i++)
        bk->tstats(bk, req[i].x, req[i].n, req[i].s, req[i].h);
}

/* update_stats of k requests through the backend's update_stats_many where it has one. */
static inline void bk_update_stats_many(const backend *bk, const bk_optim *c, size_t k, const bk_update_req *req)
{
    if (bk->update_stats_many) {
        bk->update_stats_many(bk, c, k, req);
        return;
    }
    for (size_t i = 0; i < k; i++)
        bk->update_stats(bk, c, req[i].w_old, req[i].dw, req[i].n, req[i].st, req[i].hu);
}

/* count_at_least of k requests through the backend's count_at_least_many where it has one.
 * 0, or -1 as count_at_least. */
static inline int bk_count_at_least_many(const backend *bk, size_t k, const bk_ge_req *req)
{
    if (bk->count_at_least_many)
        return bk->count_at_least_many(bk, k, req);
    for (size_t i = 0; i < k; i++)
        if (bk->count_at_least(bk, req[i].x, req[i].n, req[i].k, req[i].ge, req[i].counts) != 0)
            return -1;
    return 0;
}

/* The backends this build has, by name ("cpu", "cuda"): NULL with a message in err when the
 * name is unknown, the backend was not built, or it cannot run here (no device). */
const backend *backend_by_name(const char *name, char *err, size_t errlen);
/* Whether backend_by_name(name) would give a backend, without making one (for commands that
 * pass --device on to runs in other processes): 0, or -1 with the message in err. */
int backend_available(const char *name, char *err, size_t errlen);
/* The names of the backends this build knows, and whether each was built (for --help). */
int backend_count(void);
const char *backend_name_at(int i, int *built);

/* The CUDA backend on device `device` (kernels, cuBLAS GEMMs; src/backend/cuda/), made on the
 * first request and kept until the program ends. NULL with a message in err when the machine
 * has no usable CUDA device (no GPU, no driver), fewer devices, or cuBLAS cannot be loaded.
 * Defined only in a build with CUDA (AMPDIAG_HAVE_CUDA in config.h). */
const backend *backend_cuda(int device, char *err, size_t errlen);
/* Whether backend_cuda(device) could run here (a device of that number exists), without making
 * it: 0, or -1 with the reason in err. */
int backend_cuda_available(int device, char *err, size_t errlen);

/* The CPU backend (C loops, CBLAS GEMMs). A static table: never freed. */
const backend *backend_cpu(void);
/* Which rounding code the CPU backend uses: "f16c+avx2", "f16c", "avx2" or "generic". */
const char *backend_cpu_round_impl(void);
/* Use the portable code even where SIMD code exists: the rounding passes, the optimizer's weight
 * rounding and the vector pass of update_stats (tests compare the two; the environment variable
 * AMPDIAG_ROUND_IMPL=generic does the same for a whole run). The statistics kernels
 * (ampdiag_tstats, src/numerics/tstats.c) have their own switch, AMPDIAG_TSTATS_IMPL; the
 * optimizer's compiler clones (target_clones) have none and compute the same values. */
void backend_cpu_force_generic(int on);

#ifdef __cplusplus
}
#endif

#endif /* AMPDIAG_BACKEND_H */
