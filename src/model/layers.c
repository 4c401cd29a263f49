/*
 * layers.c - forward and backward of every layer, through the backend table (layers.h says
 * which format each tensor is held in; backend.h how the operations round).
 */
#include "model/layers.h"

#include <stdio.h>
#include <string.h>

static const char *const op_names[OP_COUNT] = {
    [OP_LINEAR] = "linear",       [OP_RELU] = "relu",
    [OP_GELU] = "gelu",           [OP_LAYERNORM] = "layernorm",
    [OP_RESIDUAL] = "residual",   [OP_EMBEDDING] = "embedding",
    [OP_ATTENTION] = "attention", [OP_SOFTMAX_CE] = "softmax_ce",
};

const char *layer_op_name(layer_op op)
{
    return (int)op >= 0 && op < OP_COUNT ? op_names[op] : "?";
}

/* ------------------------------------------------------------------------------- activations */

int act_alloc(act *a, const backend *bk, size_t rows)
{
    act_free(a, bk);
    size_t n = rows * (size_t)a->dim;
    a->x = bk->alloc(bk, n * sizeof(float));
    if (!a->x)
        return -1;
    if (a->needs_grad) {
        a->dx = bk->alloc(bk, n * sizeof(float));
        if (!a->dx) {
            act_free(a, bk);
            return -1;
        }
    }
    return 0;
}

void act_free(act *a, const backend *bk)
{
    bk->free(bk, a->x);
    bk->free(bk, a->dx);
    a->x = a->dx = NULL;
}

/* ------------------------------------------------------------------------------- set-up */

static void add_view(layer *L, const char *name, int d0, int d1)
{
    param_view *v = &L->pv[L->npv++];
    v->name = name;
    v->ndim = d1 > 0 ? 2 : 1;
    v->shape[0] = d0;
    v->shape[1] = d1 > 0 ? d1 : 0;
    v->offset = L->nparams;
    v->count = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    L->nparams += v->count;
}

int layer_configure(layer *L, layer_op op, const char *name, int in_dim, int out_dim, int extra)
{
    memset(L, 0, sizeof *L);
    if (!name || strlen(name) >= LAYER_NAME_MAX || (int)op < 0 || op >= OP_COUNT || in_dim <= 0)
        return -1;
    strcpy(L->name, name);
    L->op = op;
    L->in_dim = in_dim;
    L->out_dim = out_dim;
    switch (op) {
    case OP_LINEAR:
        if (out_dim <= 0)
            return -1;
        L->bias = extra != 0;
        add_view(L, "weight", out_dim, in_dim); /* [OC, C] */
        if (L->bias)
            add_view(L, "bias", out_dim, 0);    /* [OC] */
        break;
    case OP_LAYERNORM:
        L->out_dim = in_dim;
        add_view(L, "weight", in_dim, 0);
        add_view(L, "bias", in_dim, 0);
        break;
    case OP_RELU:
    case OP_GELU:
    case OP_RESIDUAL:
        L->out_dim = in_dim;
        break;
    case OP_EMBEDDING:
        if (out_dim <= 0 || extra <= 0)
            return -1;
        L->ctx = extra;
        add_view(L, "wte", in_dim, out_dim); /* [V, C] */
        add_view(L, "wpe", extra, out_dim);  /* [T, C] */
        break;
    case OP_ATTENTION:
        if (out_dim <= 0 || extra <= 0 || out_dim % extra != 0 || in_dim != 3 * out_dim)
            return -1;
        L->heads = extra;
        break;
    case OP_SOFTMAX_CE:
        L->out_dim = 1;
        break;
    default:
        return -1;
    }
    return 0;
}

void layer_bind(layer *L, float *p, float *pc, float *g)
{
    L->p = L->nparams ? p : NULL;
    L->pc = L->nparams ? pc : NULL;
    L->g = L->nparams ? g : NULL;
}

void layer_plan(layer *L, const layer_ctx *c)
{
    ampdiag_format F = c->fmt;
    L->cfmt = (L->fp32 || F == AMPDIAG_FP32) ? AMPDIAG_FP32 : F;
    int f16 = L->cfmt != AMPDIAG_FP32;
    ampdiag_format out = L->cfmt;
    L->round_input = 0;
    switch (L->op) {
    case OP_LINEAR:
    case OP_ATTENTION:
        L->round_input = f16 && L->in->fmt != L->cfmt;
        break;
    case OP_RELU:
    case OP_GELU: /* type promotion: an FP32 input gives an FP32 output */
        out = f16 && L->in->fmt == L->cfmt ? L->cfmt : AMPDIAG_FP32;
        break;
    case OP_RESIDUAL:
        out = f16 && L->in->fmt == L->cfmt && L->in2->fmt == L->cfmt ? L->cfmt : AMPDIAG_FP32;
        break;
    case OP_SOFTMAX_CE:
        L->cfmt = out = AMPDIAG_FP32;
        break;
    default:
        break;
    }
    L->out->fmt = out;
}

static size_t att_size(const layer *L, int B, int T)
{
    return (size_t)B * (size_t)L->heads * (size_t)T * (size_t)T;
}

int layer_alloc(layer *L, const backend *bk, int B, int T)
{
    layer_free(L, bk);
    size_t N = (size_t)B * (size_t)T;
    size_t n1 = 0, n2 = 0, n3 = 0;
    switch (L->op) {
    case OP_LAYERNORM: n1 = n2 = N; break;
    case OP_ATTENTION: n1 = n2 = n3 = att_size(L, B, T); break;
    case OP_SOFTMAX_CE: n1 = N * (size_t)L->in_dim; break;
    default: break;
    }
    int fail = 0;
    if (L->round_input && !(L->xr = bk->alloc(bk, N * (size_t)L->in_dim * sizeof(float))))
        fail = 1;
    if (n1 && !(L->s1 = bk->alloc(bk, n1 * sizeof(float))))
        fail = 1;
    if (n2 && !(L->s2 = bk->alloc(bk, n2 * sizeof(float))))
        fail = 1;
    if (n3 && !(L->s3 = bk->alloc(bk, n3 * sizeof(float))))
        fail = 1;
    if (fail) {
        layer_free(L, bk);
        return -1;
    }
    return 0;
}

void layer_free(layer *L, const backend *bk)
{
    bk->free(bk, L->xr);
    bk->free(bk, L->s1);
    bk->free(bk, L->s2);
    bk->free(bk, L->s3);
    L->xr = L->s1 = L->s2 = L->s3 = NULL;
}

size_t layer_scratch_need(const layer *L, int B, int T)
{
    if (L->op == OP_LINEAR || L->op == OP_ATTENTION || L->op == OP_SOFTMAX_CE)
        return (size_t)B * (size_t)T * (size_t)L->in_dim;
    return 0;
}

/* ------------------------------------------------------------------------------- helpers */

static bk_rnd rnd_of(const layer_ctx *c, ampdiag_format fmt) { return bk_rnd_make(fmt, c->flags); }

static int same_rnd(bk_rnd a, bk_rnd b)
{
    return a.fmt == b.fmt && (a.fmt == AMPDIAG_FP32 || a.flags == b.flags);
}

/* The format this layer's parameter gradients are held in. */
static bk_rnd wgrad_rnd(const layer *L, const layer_ctx *c)
{
    if (c->pure)
        return rnd_of(c, c->fmt);
    int gemm = L->op == OP_LINEAR;
    return rnd_of(c, gemm ? L->cfmt : AMPDIAG_FP32);
}

/* The weights a GEMM reads: the rounded compute copy in a 16-bit layer. */
static const float *gemm_weights(const layer *L)
{
    return L->cfmt != AMPDIAG_FP32 ? L->pc : L->p;
}

/* The input a GEMM layer reads (its rounded copy when the input is held in FP32). */
static const float *gemm_input(const layer *L) { return L->round_input ? L->xr : L->in->x; }

static size_t rows(const layer_ctx *c) { return (size_t)c->B * (size_t)c->T; }

/*
 * Input gradients of GEMM layers: the op writes its contribution rounded to cfmt into a->dx
 * (first contribution) or into the scratch (a later one); grad_commit then rounds it to the
 * format a is held in where that differs and adds it in.
 */
static float *grad_dest(const layer_ctx *c, const act *a)
{
    return a->dx_ready ? c->scratch : a->dx;
}

static void grad_commit(const layer_ctx *c, act *a, float *buf, size_t n, bk_rnd done)
{
    const backend *bk = c->bk;
    bk_rnd hold = rnd_of(c, a->fmt);
    if (buf == a->dx) {
        if (!same_rnd(done, hold) && hold.fmt != AMPDIAG_FP32)
            bk->round(bk, a->dx, a->dx, n, hold);
    } else {
        bk->axpy(bk, a->dx, 1.0f, 1.0f, buf, n, hold);
    }
    a->dx_ready = 1;
}

static float grad_beta(act *a)
{
    float beta = a->dx_ready ? 1.0f : 0.0f;
    a->dx_ready = 1;
    return beta;
}

/* ------------------------------------------------------------------------------- linear */

static void linear_forward(layer *L, const layer_ctx *c)
{
    const backend *bk = c->bk;
    int N = (int)rows(c), C = L->in_dim, OC = L->out_dim;
    bk_rnd r = rnd_of(c, L->cfmt);
    if (L->round_input)
        bk->round(bk, L->xr, L->in->x, (size_t)N * (size_t)C, r);
    const float *x = gemm_input(L);       /* [N, C] */
    const float *w = gemm_weights(L);     /* [OC, C] */
    const float *b = L->bias ? w + (size_t)OC * (size_t)C : NULL; /* [OC] */
    float *y = L->out->x;                 /* [N, OC] */
    bk->gemm(bk, 0, 1, N, OC, C, 1.0f, x, C, w, C, 0.0f, y, OC, BK_NO_RND);
    bk->bias_add(bk, y, b, N, OC, r);     /* bias and rounding in one pass */
}

static void linear_backward(layer *L, const layer_ctx *c)
{
    const backend *bk = c->bk;
    int N = (int)rows(c), C = L->in_dim, OC = L->out_dim;
    bk_rnd r = rnd_of(c, L->cfmt), rw = wgrad_rnd(L, c);
    const float *x = gemm_input(L);       /* [N, C] */
    const float *w = gemm_weights(L);     /* [OC, C] */
    const float *dy = L->out->dx;         /* [N, OC] */
    float *dw = L->g;                     /* [OC, C] */
    bk->gemm(bk, 1, 0, OC, C, N, 1.0f, dy, OC, x, C, 0.0f, dw, C, rw); /* dW = dY^T X */
    if (L->bias)
        bk->bias_grad(bk, dw + (size_t)OC * (size_t)C, dy, N, OC, rw); /* db [OC] */
    act *in = L->in;
    if (in->needs_grad) {
        float *dx = grad_dest(c, in);     /* [N, C] */
        bk->gemm(bk, 0, 0, N, C, OC, 1.0f, dy, OC, w, C, 0.0f, dx, C, r); /* dX = dY W */
        grad_commit(c, in, dx, (size_t)N * (size_t)C, r);
    }
}

/* ------------------------------------------------------------------------------- elementwise */

static void relu_forward(layer *L, const layer_ctx *c)
{
    size_t n = rows(c) * (size_t)L->in_dim;
    c->bk->relu_fwd(c->bk, L->out->x, L->in->x, n, rnd_of(c, L->out->fmt));
}

static void relu_backward(layer *L, const layer_ctx *c)
{
    act *in = L->in;
    if (!in->needs_grad)
        return;
    size_t n = rows(c) * (size_t)L->in_dim;
    float beta = grad_beta(in);
    c->bk->relu_bwd(c->bk, in->dx, in->x, L->out->dx, n, beta, rnd_of(c, in->fmt));
}

static void gelu_forward(layer *L, const layer_ctx *c)
{
    size_t n = rows(c) * (size_t)L->in_dim;
    c->bk->gelu_fwd(c->bk, L->out->x, L->in->x, n, rnd_of(c, L->out->fmt));
}

static void gelu_backward(layer *L, const layer_ctx *c)
{
    act *in = L->in;
    if (!in->needs_grad)
        return;
    size_t n = rows(c) * (size_t)L->in_dim;
    float beta = grad_beta(in);
    c->bk->gelu_bwd(c->bk, in->dx, in->x, L->out->dx, n, beta, rnd_of(c, in->fmt));
}

static void residual_forward(layer *L, const layer_ctx *c)
{
    size_t n = rows(c) * (size_t)L->in_dim;
    c->bk->add_fwd(c->bk, L->out->x, L->in->x, L->in2->x, n, rnd_of(c, L->out->fmt));
}

static void residual_backward(layer *L, const layer_ctx *c)
{
    size_t n = rows(c) * (size_t)L->in_dim;
    act *ins[2] = {L->in, L->in2};
    for (int i = 0; i < 2; i++) {
        act *a = ins[i];
        if (!a->needs_grad)
            continue;
        float beta = grad_beta(a);
        c->bk->axpy(c->bk, a->dx, beta, 1.0f, L->out->dx, n, rnd_of(c, a->fmt));
    }
}

/* ------------------------------------------------------------------------------- layer norm */

static void layernorm_forward(layer *L, const layer_ctx *c)
{
    int N = (int)rows(c), C = L->in_dim;
    const float *w = L->p, *b = L->p + C; /* [C], [C] (FP32 master) */
    c->bk->layernorm_fwd(c->bk, L->out->x, L->s1, L->s2, L->in->x, w, b, N, C,
                         rnd_of(c, L->cfmt));
}

static void layernorm_backward(layer *L, const layer_ctx *c)
{
    int N = (int)rows(c), C = L->in_dim;
    act *in = L->in;
    float *dx = in->needs_grad ? in->dx : NULL;
    float beta = in->needs_grad ? grad_beta(in) : 0.0f;
    c->bk->layernorm_bwd(c->bk, dx, L->g, L->g + C, L->out->dx, in->x, L->p, L->s1, L->s2, N, C,
                         beta, rnd_of(c, in->fmt), wgrad_rnd(L, c));
}

/* ------------------------------------------------------------------------------- embedding */

static void embedding_forward(layer *L, const layer_ctx *c)
{
    int C = L->out_dim, V = L->in_dim;
    const float *wte = L->p, *wpe = L->p + (size_t)V * (size_t)C; /* [V, C], [T, C] */
    c->bk->embed_fwd(c->bk, L->out->x, c->tokens, wte, wpe, c->B, c->T, C, rnd_of(c, L->cfmt));
}

static void embedding_backward(layer *L, const layer_ctx *c)
{
    int C = L->out_dim, V = L->in_dim;
    float *dwte = L->g, *dwpe = L->g + (size_t)V * (size_t)C;
    c->bk->embed_bwd(c->bk, dwte, dwpe, L->out->dx, c->tokens, c->B, c->T, C, V,
                     wgrad_rnd(L, c));
}

/* ------------------------------------------------------------------------------- attention */

static void attention_forward(layer *L, const layer_ctx *c)
{
    const backend *bk = c->bk;
    bk_rnd r = rnd_of(c, L->cfmt);
    if (L->round_input)
        bk->round(bk, L->xr, L->in->x, rows(c) * (size_t)L->in_dim, r);
    bk->attention_fwd(bk, L->out->x, L->s1, L->s2, gemm_input(L), c->B, c->T, L->out_dim,
                      L->heads, r);
}

static void attention_backward(layer *L, const layer_ctx *c)
{
    const backend *bk = c->bk;
    act *in = L->in;
    if (!in->needs_grad)
        return;
    bk_rnd r = rnd_of(c, L->cfmt);
    float *dqkv = grad_dest(c, in); /* [B, T, 3C] */
    bk->attention_bwd(bk, dqkv, L->s3, L->out->dx, gemm_input(L), L->s1, L->s2, c->B, c->T,
                      L->out_dim, L->heads, r);
    grad_commit(c, in, dqkv, rows(c) * (size_t)L->in_dim, r);
}

/* ------------------------------------------------------------------------------- loss */

static void softmax_ce_forward(layer *L, const layer_ctx *c)
{
    c->bk->xent_fwd(c->bk, L->out->x, L->s1, L->in->x, c->targets, (int)rows(c), L->in_dim);
}

static void softmax_ce_backward(layer *L, const layer_ctx *c)
{
    act *in = L->in;
    if (!in->needs_grad)
        return;
    int N = (int)rows(c), V = L->in_dim;
    float dscale = c->loss_scale / (float)N; /* d(scale * mean loss) / d(row loss) */
    float *dl = grad_dest(c, in);            /* [N, V] */
    bk_rnd hold = rnd_of(c, in->fmt);
    c->bk->xent_bwd(c->bk, dl, L->s1, c->targets, N, V, dscale, hold);
    grad_commit(c, in, dl, (size_t)N * (size_t)V, hold);
}

/* ------------------------------------------------------------------------------- dispatch */

typedef void (*layer_fn)(layer *, const layer_ctx *);

static const layer_fn fwd_table[OP_COUNT] = {
    [OP_LINEAR] = linear_forward,       [OP_RELU] = relu_forward,
    [OP_GELU] = gelu_forward,           [OP_LAYERNORM] = layernorm_forward,
    [OP_RESIDUAL] = residual_forward,   [OP_EMBEDDING] = embedding_forward,
    [OP_ATTENTION] = attention_forward, [OP_SOFTMAX_CE] = softmax_ce_forward,
};

static const layer_fn bwd_table[OP_COUNT] = {
    [OP_LINEAR] = linear_backward,       [OP_RELU] = relu_backward,
    [OP_GELU] = gelu_backward,           [OP_LAYERNORM] = layernorm_backward,
    [OP_RESIDUAL] = residual_backward,   [OP_EMBEDDING] = embedding_backward,
    [OP_ATTENTION] = attention_backward, [OP_SOFTMAX_CE] = softmax_ce_backward,
};

void layer_forward(layer *L, const layer_ctx *c) { fwd_table[L->op](L, c); }

void layer_backward(layer *L, const layer_ctx *c) { bwd_table[L->op](L, c); }

/* ------------------------------------------------------------------------------- reports */

double layer_gemm_flops(const layer *L, int B, int T)
{
    double N = (double)B * (double)T;
    if (L->op == OP_LINEAR) {
        double one = 2.0 * N * L->in_dim * L->out_dim;
        return one * (L->in && L->in->needs_grad ? 3.0 : 2.0); /* forward, dW, dX */
    }
    if (L->op == OP_ATTENTION) { /* 2 GEMMs forward, 4 backward, each T x T x hs per head */
        double one = 2.0 * B * L->heads * (double)T * T * (L->out_dim / L->heads);
        return one * 6.0;
    }
    return 0.0;
}

void layer_shape_str(const layer *L, char *buf, size_t n)
{
    switch (L->op) {
    case OP_ATTENTION:
        snprintf(buf, n, "%d->%d (%d heads)", L->in_dim, L->out_dim, L->heads);
        break;
    case OP_EMBEDDING:
        snprintf(buf, n, "vocab %d, ctx %d -> %d", L->in_dim, L->ctx, L->out_dim);
        break;
    case OP_RESIDUAL:
        snprintf(buf, n, "%d+%d->%d", L->in_dim, L->in_dim, L->out_dim);
        break;
    default:
        snprintf(buf, n, "%d->%d", L->in_dim, L->out_dim);
        break;
    }
}
