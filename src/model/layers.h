/*
 * layers.h - the layers of ampdiag's models, each with a forward and a backward through a
 * backend (backend.h).
 *
 * A layer reads one activation (two for the residual add), writes its own output activation
 * and keeps what its backward needs. Parameters are views into ONE contiguous parameter buffer
 * owned by the model (and one gradient buffer, and one compute copy), llm.c style, so that
 * rounding, clipping, statistics and saving work over a single buffer.
 *
 * Precision (docs/model-spec.md, "What the precision policies do to each layer"). The policy's
 * format F is FP16 or BF16 (FP32 for the fp32
 * policy). A layer computes in F unless it is an FP32 island (--fp32-layers) or the policy is
 * fp32; its compute format is cfmt. What each layer holds:
 *   linear, attention: GEMM operands in cfmt (an FP32-held input is rounded into a copy once;
 *       the weights come from the model's rounded compute copy), FP32 accumulation, output
 *       rounded to cfmt. The softmax of the attention is FP32; its probabilities are rounded
 *       to cfmt as the operand of the second GEMM.
 *   layernorm: statistics and arithmetic in FP32 with FP32 (master) parameters, output rounded
 *       to cfmt.
 *   embedding: FP32 (master) tables; the token + position sum is rounded to cfmt.
 *   relu, gelu, residual add: computed in FP32, output held in F when every input is held in
 *       F and the layer is not an island, else in FP32 (PyTorch's type promotion: an FP32
 *       island's output stays FP32 until a 16-bit GEMM reads it).
 *   softmax_ce: FP32 throughout (the loss).
 * Gradients follow autograd: the gradient of a tensor is held in the tensor's format; the
 * input gradient of a 16-bit GEMM layer is its GEMM's F output (also when the input was held
 * in FP32); a sum of two gradient contributions is rounded to the tensor's format. Weight
 * gradients: a 16-bit GEMM layer's wgrad GEMM output (and bias gradient) is rounded to F and
 * then kept as float32, as autocast's F wgrad is cast to the FP32 master gradient; layernorm
 * and embedding gradients, and islands, stay FP32. Under bf16-pure every parameter and every
 * parameter gradient is held in BF16.
 */
#ifndef AMPDIAG_LAYERS_H
#define AMPDIAG_LAYERS_H

#include "backend/backend.h"

#include <stddef.h>
#include <stdint.h>

#define LAYER_NAME_MAX 64
#define LAYER_MAX_PVIEWS 2

typedef enum layer_op {
    OP_LINEAR,     /* y = x W^T + b; W [OC, C], b [OC] */
    OP_RELU,
    OP_GELU,       /* GPT-2's tanh approximation */
    OP_LAYERNORM,  /* weight [C], bias [C], eps 1e-5 */
    OP_RESIDUAL,   /* y = in + in2 */
    OP_EMBEDDING,  /* y[b,t] = wte[token[b,t]] + wpe[t]; wte [V, C], wpe [T, C] */
    OP_ATTENTION,  /* multi-head causal scaled dot-product attention over a [B,T,3C] qkv */
    OP_SOFTMAX_CE, /* per-row -log softmax(logits)[target], FP32 */
    OP_COUNT
} layer_op;

/* "linear", "relu", "gelu", "layernorm", "residual", "embedding", "attention", "softmax_ce". */
const char *layer_op_name(layer_op op);

/* An activation tensor: rows of `dim` values (a row per example, or per token). */
typedef struct act {
    float *x;           /* [N, dim] values, as held */
    float *dx;          /* [N, dim] gradient of the loss w.r.t. x; NULL when not needed */
    int dim;
    ampdiag_format fmt; /* the format x and dx are held in: AMPDIAG_FP32 or the policy's F */
    int needs_grad;     /* 0 for the model's input data and for the per-row losses */
    int dx_ready;       /* dx has been written during the current backward */
} act;

/* Allocate x (and dx when needs_grad) for `rows` rows; act_free releases them. */
int act_alloc(act *a, const backend *bk, size_t rows);
void act_free(act *a, const backend *bk);

/* A named parameter tensor of a layer, with PyTorch's shape. */
typedef struct param_view {
    const char *name; /* "weight", "bias", "wte", "wpe" */
    int ndim;
    int shape[2];
    size_t offset;    /* from the layer's first parameter */
    size_t count;
} param_view;

/* What every layer of a model shares during a step. */
typedef struct layer_ctx {
    const backend *bk;
    ampdiag_format fmt;     /* the policy's F (AMPDIAG_FP32 under the fp32 policy) */
    unsigned flags;         /* AMPDIAG_ROUND_FTZ */
    int pure;               /* bf16-pure: parameters and their gradients held in F */
    int B, T;               /* batch size and sequence length (T = 1 without a sequence) */
    const int32_t *tokens;  /* [B,T], backend memory (embedding) */
    const int32_t *targets; /* [B*T], backend memory (softmax_ce) */
    float loss_scale;       /* multiplies dlogits in softmax_ce's backward */
    float *scratch;         /* backend buffer of at least max(N * in_dim) floats over layers */
} layer_ctx;

typedef struct layer {
    char name[LAYER_NAME_MAX];
    layer_op op;
    int fp32;             /* an FP32 island */
    act *in, *in2;        /* inputs (in2: the residual branch); in is NULL for the embedding */
    act *out;             /* its output */
    int in_dim, out_dim;  /* per row; embedding: in_dim = vocabulary size */
    int heads;            /* attention: heads (in_dim = 3 * out_dim) */
    int ctx;              /* embedding: positions (the sequence length T) */
    int bias;             /* linear: has a bias */

    /* parameters: views into the model's buffers, weight first then bias */
    float *p;             /* [nparams] master values */
    float *pc;            /* [nparams] what a 16-bit GEMM reads: p rounded to F, or p itself */
    float *g;             /* [nparams] gradients */
    size_t nparams;
    param_view pv[LAYER_MAX_PVIEWS];
    int npv;

    /* set by layer_plan */
    ampdiag_format cfmt;  /* the format its results are rounded to */
    int round_input;      /* a GEMM operand held in FP32 must be rounded to cfmt first */

    /* saved for the backward (backend memory, allocated by layer_alloc) */
    float *xr;            /* [N, in_dim] the rounded input, when round_input */
    float *s1, *s2, *s3;  /* layernorm: mean, rstd [N]; attention: att, att_r, scratch
                             [B,NH,T,T]; softmax_ce: probs [N,V] */
} layer;

/*
 * Set name, op and shape, and count the parameters (nparams, pv). For OP_LINEAR in_dim/out_dim
 * are the features, `extra` is 1 for a bias; OP_LAYERNORM, OP_RELU, OP_GELU, OP_RESIDUAL:
 * out_dim = in_dim; OP_EMBEDDING: in_dim = vocabulary, out_dim = C, extra = positions;
 * OP_ATTENTION: out_dim = C, extra = heads (in_dim becomes 3C); OP_SOFTMAX_CE: in_dim =
 * classes, out_dim = 1. Returns 0, or -1 for an impossible shape (non-positive, heads not
 * dividing C). The caller then sets in/in2/out and binds the parameter pointers.
 */
int layer_configure(layer *L, layer_op op, const char *name, int in_dim, int out_dim, int extra);

/* Point the layer's parameters at p, pc, g (each with nparams floats). */
void layer_bind(layer *L, float *p, float *pc, float *g);

/* Decide cfmt, round_input and the output's held format from the context and the inputs'
 * formats. Call in forward order, after the inputs were planned. */
void layer_plan(layer *L, const layer_ctx *c);

/* Allocate the saved buffers for B x T rows (frees earlier ones). 0, or -1 out of memory. */
int layer_alloc(layer *L, const backend *bk, int B, int T);
void layer_free(layer *L, const backend *bk);
/* Floats of scratch the layer's backward may need for B*T rows. */
size_t layer_scratch_need(const layer *L, int B, int T);

/* Forward: reads in (and in2), writes out->x and the saved buffers, for c->B x c->T rows. */
void layer_forward(layer *L, const layer_ctx *c);
/* Backward: reads out->dx, writes (or accumulates into) in->dx and in2->dx where needed and
 * overwrites the parameter gradients g. softmax_ce starts the chain from the targets. */
void layer_backward(layer *L, const layer_ctx *c);

/* GEMM floating-point operations of one forward + backward for B x T rows. */
double layer_gemm_flops(const layer *L, int B, int T);

/* A short shape description for reports: "32->256", "64->64 (4 heads)". */
void layer_shape_str(const layer *L, char *buf, size_t n);

#endif /* AMPDIAG_LAYERS_H */
