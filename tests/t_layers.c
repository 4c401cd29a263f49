/*
 * t_layers.c - every layer's backward against central differences of an independent
 * double-precision reference forward (tests/layers_ref.c), and the precision policies at the
 * layer level: what is rounded, to which format, bit for bit.
 *
 * Each check builds a tiny graph of layers (the same structures model.c builds), runs the C
 * forward and backward in the FP32 policy with a random upstream gradient gy, and compares
 * every input and parameter gradient with (J(v+h) - J(v-h)) / 2h, J = sum(gy * output), all
 * in double.
 */
#include "numerics/vmath.h"
#include "model/layers.h"
#include "layers_ref.h"
#include "numerics/numfmt.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------- random */

static uint64_t rng_state = 0x1234567887654321ull;

static double urand(void) /* [0, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-53;
}

static float frand(float lo, float hi) { return lo + (hi - lo) * (float)urand(); }

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(99);
    }
    return p;
}

/* ------------------------------------------------------------------------------- graphs */

#define G_MAX 8

typedef struct graph {
    const backend *bk;
    act acts[G_MAX];
    int is_input[G_MAX];
    int nacts;
    layer layers[G_MAX];
    int nl;
    float *p, *pc, *g; /* [np] */
    size_t np;
    layer_ctx ctx;
    int32_t tokens[256], targets[256];
} graph;

static void g_init(graph *G, ampdiag_format fmt, unsigned flags, int B, int T)
{
    memset(G, 0, sizeof *G);
    G->bk = backend_cpu();
    G->ctx.bk = G->bk;
    G->ctx.fmt = fmt;
    G->ctx.flags = flags;
    G->ctx.B = B;
    G->ctx.T = T;
    G->ctx.loss_scale = 1.0f;
    G->ctx.tokens = G->tokens;
    G->ctx.targets = G->targets;
}

static int g_rows(const graph *G) { return G->ctx.B * G->ctx.T; }

/* An input act (data held in FP32) whose gradient the test wants to see. */
static act *g_input(graph *G, int dim)
{
    act *a = &G->acts[G->nacts];
    G->is_input[G->nacts++] = 1;
    a->dim = dim;
    a->fmt = AMPDIAG_FP32;
    a->needs_grad = 1;
    return a;
}

static layer *g_add(graph *G, layer_op op, const char *name, act *in, act *in2, int in_dim,
                    int out_dim, int extra)
{
    layer *L = &G->layers[G->nl++];
    if (layer_configure(L, op, name, in_dim, out_dim, extra)) {
        fprintf(stderr, "layer_configure %s failed\n", name);
        exit(99);
    }
    act *out = &G->acts[G->nacts++];
    out->dim = L->out_dim;
    out->needs_grad = op != OP_SOFTMAX_CE;
    L->in = in;
    L->in2 = in2;
    L->out = out;
    return L;
}

/* Parameters: random in [-1, 1] (layernorm gains around 1); inputs random in [-2, 2] with no
 * value within 0.05 of zero (the ReLU kink). */
static void g_finish(graph *G)
{
    for (int i = 0; i < G->nl; i++)
        G->np += G->layers[i].nparams;
    G->p = xcalloc(G->np, sizeof(float));
    G->pc = xcalloc(G->np, sizeof(float));
    G->g = xcalloc(G->np, sizeof(float));
    size_t off = 0;
    for (int i = 0; i < G->nl; i++) {
        layer *L = &G->layers[i];
        layer_bind(L, G->p + off, G->ctx.fmt == AMPDIAG_FP32 ? G->p + off : G->pc + off,
                   G->g + off);
        for (size_t k = 0; k < L->nparams; k++)
            L->p[k] = frand(-1.0f, 1.0f) + (L->op == OP_LAYERNORM && k < (size_t)L->in_dim);
        off += L->nparams;
        layer_plan(L, &G->ctx);
    }
    size_t scratch = 1;
    for (int i = 0; i < G->nacts; i++)
        if (act_alloc(&G->acts[i], G->bk, (size_t)g_rows(G)))
            exit(99);
    for (int i = 0; i < G->nl; i++) {
        if (layer_alloc(&G->layers[i], G->bk, G->ctx.B, G->ctx.T))
            exit(99);
        size_t k = layer_scratch_need(&G->layers[i], G->ctx.B, G->ctx.T);
        scratch = k > scratch ? k : scratch;
    }
    G->ctx.scratch = xcalloc(scratch, sizeof(float));
    for (int i = 0; i < G->nacts; i++)
        if (G->is_input[i]) {
            act *a = &G->acts[i];
            for (size_t k = 0; k < (size_t)g_rows(G) * (size_t)a->dim; k++) {
                float v = frand(-2.0f, 2.0f);
                a->x[k] = v < 0 ? v - 0.05f : v + 0.05f;
            }
        }
}

static void g_free(graph *G)
{
    for (int i = 0; i < G->nacts; i++)
        act_free(&G->acts[i], G->bk);
    for (int i = 0; i < G->nl; i++)
        layer_free(&G->layers[i], G->bk);
    free(G->p);
    free(G->pc);
    free(G->g);
    free(G->ctx.scratch);
}

static act *g_last(graph *G) { return G->layers[G->nl - 1].out; }

static void g_forward(graph *G)
{
    if (G->ctx.fmt != AMPDIAG_FP32)
        G->bk->round(G->bk, G->pc, G->p, G->np, bk_rnd_make(G->ctx.fmt, G->ctx.flags));
    for (int i = 0; i < G->nl; i++)
        layer_forward(&G->layers[i], &G->ctx);
}

/* Backward with gy as the gradient of the last output (ignored for a softmax_ce graph). */
static void g_backward(graph *G, const float *gy)
{
    act *y = g_last(G);
    for (int i = 0; i < G->nacts; i++)
        G->acts[i].dx_ready = 0;
    if (y->dx) {
        memcpy(y->dx, gy, (size_t)g_rows(G) * (size_t)y->dim * sizeof(float));
        y->dx_ready = 1;
    }
    for (int i = G->nl - 1; i >= 0; i--)
        layer_backward(&G->layers[i], &G->ctx);
}

/* ------------------------------------------------------------------------------- checking */

typedef struct refstate {
    ref_graph rg;
    double *xs[G_MAX];
    double *pd;
    const float *gy;
} refstate;

static void ref_open(refstate *R, graph *G, const float *gy)
{
    memset(R, 0, sizeof *R);
    R->rg = (ref_graph){G->layers, G->nl, G->acts, G->nacts, G->p, G->ctx.B, G->ctx.T,
                        G->tokens, G->targets};
    for (int i = 0; i < G->nacts; i++) {
        size_t n = (size_t)g_rows(G) * (size_t)G->acts[i].dim;
        R->xs[i] = xcalloc(n, sizeof(double));
        if (G->is_input[i])
            for (size_t k = 0; k < n; k++)
                R->xs[i][k] = G->acts[i].x[k];
    }
    R->pd = xcalloc(G->np, sizeof(double));
    for (size_t k = 0; k < G->np; k++)
        R->pd[k] = G->p[k];
    R->gy = gy;
}

static void ref_close(refstate *R, graph *G)
{
    for (int i = 0; i < G->nacts; i++)
        free(R->xs[i]);
    free(R->pd);
}

/* J = sum(gy * last output), or the mean loss of a softmax_ce graph. */
static double ref_J(refstate *R, graph *G)
{
    double loss = ref_graph_run(&R->rg, R->xs, R->pd);
    if (G->layers[G->nl - 1].op == OP_SOFTMAX_CE)
        return loss;
    int last = ref_act_index(&R->rg, g_last(G));
    double J = 0.0;
    size_t n = (size_t)g_rows(G) * (size_t)g_last(G)->dim;
    for (size_t k = 0; k < n; k++)
        J += R->xs[last][k] * R->gy[k];
    return J;
}

/* Worst |analytic - numeric| / (|numeric| + 0.01 max|numeric|) over a tensor. */
static double grad_error(const float *analytic, const double *numeric, size_t n)
{
    double scale = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        scale = fabs(numeric[i]) > scale ? fabs(numeric[i]) : scale;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)analytic[i] - numeric[i]);
        double e = d / (fabs(numeric[i]) + 0.01 * scale + 1e-300);
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* Central differences of J w.r.t. each v[i] (v is a double array inside R). */
static void numeric_grad(refstate *R, graph *G, double *v, size_t n, double *out)
{
    const double h = 1e-5;
    for (size_t i = 0; i < n; i++) {
        double v0 = v[i];
        v[i] = v0 + h;
        double jp = ref_J(R, G);
        v[i] = v0 - h;
        double jm = ref_J(R, G);
        v[i] = v0;
        out[i] = (jp - jm) / (2.0 * h);
    }
}

static int check_tensor(const char *what, const char *tname, const float *analytic,
                        const double *numeric, size_t n, double tol)
{
    double e = grad_error(analytic, numeric, n);
    return ok(e <= tol, "%s: %s matches central differences (worst relative error %.2e, "
              "tolerance %.0e, %zu values)", what, tname, e, tol, n);
}

/* Forward against the reference, then every input gradient and every parameter view. */
static void check_graph(graph *G, const char *what, double tol)
{
    act *y = g_last(G);
    size_t ny = (size_t)g_rows(G) * (size_t)y->dim;
    float *gy = xcalloc(ny, sizeof(float));
    for (size_t k = 0; k < ny; k++)
        gy[k] = frand(-1.0f, 1.0f);
    g_forward(G);
    g_backward(G, gy);

    refstate R;
    ref_open(&R, G, gy);
    ref_J(&R, G);
    int iy = ref_act_index(&R.rg, y);
    double fe = 0.0, fs = 0.0;
    for (size_t k = 0; k < ny; k++) {
        fs = fmax(fs, fabs(R.xs[iy][k]));
        fe = fmax(fe, fabs(R.xs[iy][k] - y->x[k]));
    }
    ok(fe <= 1e-5 * (fs + 1e-30), "%s: forward matches the double reference (max abs error "
       "%.2e of max %.3g)", what, fe, fs);

    for (int i = 0; i < G->nacts; i++) {
        if (!G->is_input[i])
            continue;
        size_t n = (size_t)g_rows(G) * (size_t)G->acts[i].dim;
        double *num = xcalloc(n, sizeof(double));
        numeric_grad(&R, G, R.xs[i], n, num);
        char tname[32];
        snprintf(tname, sizeof tname, "d(input %d)", i);
        check_tensor(what, tname, G->acts[i].dx, num, n, tol);
        free(num);
    }
    for (int li = 0; li < G->nl; li++) {
        layer *L = &G->layers[li];
        for (int v = 0; v < L->npv; v++) {
            const param_view *pv = &L->pv[v];
            size_t off = (size_t)(L->p - G->p) + pv->offset;
            double *num = xcalloc(pv->count, sizeof(double));
            numeric_grad(&R, G, R.pd + off, pv->count, num);
            char tname[96];
            snprintf(tname, sizeof tname, "d %s.%s", L->name, pv->name);
            check_tensor(what, tname, G->g + off, num, pv->count, tol);
            free(num);
        }
    }
    ref_close(&R, G);
    free(gy);
}

/* ------------------------------------------------------------------------------- FD tests */

#define TOL 1e-4

static void test_linear(int bias)
{
    graph G;
    g_init(&G, AMPDIAG_FP32, 0, 5, 1);
    act *x = g_input(&G, 7);
    g_add(&G, OP_LINEAR, "fc", x, NULL, 7, 4, bias);
    g_finish(&G);
    check_graph(&G, bias ? "linear" : "linear (no bias)", TOL);
    g_free(&G);
}

static void test_unary(layer_op op, const char *what)
{
    graph G;
    g_init(&G, AMPDIAG_FP32, 0, 4, 1);
    act *x = g_input(&G, 6);
    g_add(&G, op, what, x, NULL, 6, 6, 0);
    g_finish(&G);
    check_graph(&G, what, TOL);
    g_free(&G);
}

static void test_residual(void)
{
    graph G;
    g_init(&G, AMPDIAG_FP32, 0, 3, 2);
    act *a = g_input(&G, 5), *b = g_input(&G, 5);
    g_add(&G, OP_RESIDUAL, "res", a, b, 5, 5, 0);
    g_finish(&G);
    check_graph(&G, "residual", TOL);
    g_free(&G);
}

/* One tensor read by two layers: its gradient is the sum of both contributions. */
static void test_shared_input(void)
{
    graph G;
    g_init(&G, AMPDIAG_FP32, 0, 3, 1);
    act *x = g_input(&G, 6);
    layer *fc = g_add(&G, OP_LINEAR, "fc", x, NULL, 6, 6, 1);
    layer *g1 = g_add(&G, OP_GELU, "gelu", fc->out, NULL, 6, 6, 0);
    g_add(&G, OP_RESIDUAL, "res", x, g1->out, 6, 6, 0); /* x is read by fc and by res */
    g_finish(&G);
    check_graph(&G, "shared input (linear, gelu, residual)", TOL);
    g_free(&G);
}

static void test_layernorm(void)
{
    graph G;
    g_init(&G, AMPDIAG_FP32, 0, 4, 1);
    act *x = g_input(&G, 8);
    g_add(&G, OP_LAYERNORM, "ln", x, NULL, 8, 8, 0);
    g_finish(&G);
    check_graph(&G, "layernorm", TOL);
    g_free(&G);
}

static void test_embedding(void)
{
    graph G;
    int B = 2, T = 3, V = 5, C = 4;
    g_init(&G, AMPDIAG_FP32, 0, B, T);
    layer *L = g_add(&G, OP_EMBEDDING, "embed", NULL, NULL, V, C, T);
    const int32_t tok[6] = {1, 3, 1, 4, 1, 0}; /* repeats: the scatter-add must sum */
    memcpy(G.tokens, tok, sizeof tok);
    g_finish(&G);
    (void)L;
    check_graph(&G, "embedding", TOL);
    g_free(&G);
}

static void test_attention_core(void)
{
    graph G;
    int B = 2, T = 5, C = 8, NH = 2;
    g_init(&G, AMPDIAG_FP32, 0, B, T);
    act *qkv = g_input(&G, 3 * C);
    g_add(&G, OP_ATTENTION, "sdpa", qkv, NULL, 3 * C, C, NH);
    g_finish(&G);
    check_graph(&G, "attention core", TOL);

    /* causality: changing the last position's q, k, v leaves every earlier output unchanged */
    float *before = xcalloc((size_t)B * T * C, sizeof(float));
    act *y = g_last(&G);
    memcpy(before, y->x, (size_t)B * T * C * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int i = 0; i < 3 * C; i++)
            qkv->x[((size_t)b * T + T - 1) * 3 * C + i] += 0.5f;
    g_forward(&G);
    int same = 1, changed = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < C; i++) {
                size_t k = ((size_t)b * T + t) * C + i;
                if (t < T - 1)
                    same &= same_bits(before[k], y->x[k]);
                else
                    changed |= !same_bits(before[k], y->x[k]);
            }
    ok(same && changed, "attention: the causal mask hides later positions (earlier outputs "
       "bit-identical, last position changed)");
    free(before);
    g_free(&G);
}

/* The whole attention sub-block: qkv projection, causal core, output projection. */
static void test_attention_block(void)
{
    graph G;
    int B = 2, T = 4, C = 8, NH = 2;
    g_init(&G, AMPDIAG_FP32, 0, B, T);
    act *x = g_input(&G, C);
    layer *qkv = g_add(&G, OP_LINEAR, "attn.qkv", x, NULL, C, 3 * C, 1);
    layer *sd = g_add(&G, OP_ATTENTION, "attn.sdpa", qkv->out, NULL, 3 * C, C, NH);
    g_add(&G, OP_LINEAR, "attn.proj", sd->out, NULL, C, C, 1);
    g_finish(&G);
    check_graph(&G, "attention block", TOL);
    g_free(&G);
}

static void test_softmax_ce(float loss_scale)
{
    graph G;
    int N = 6, V = 5;
    g_init(&G, AMPDIAG_FP32, 0, N, 1);
    act *l = g_input(&G, V);
    g_add(&G, OP_SOFTMAX_CE, "loss", l, NULL, V, 1, 0);
    for (int i = 0; i < N; i++)
        G.targets[i] = (i * 3) % V;
    g_finish(&G);
    if (loss_scale == 1.0f) {
        check_graph(&G, "softmax cross-entropy (mean)", TOL);
    } else {
        g_forward(&G);
        g_backward(&G, NULL);
        float *d1 = xcalloc((size_t)N * V, sizeof(float));
        memcpy(d1, l->dx, (size_t)N * V * sizeof(float));
        G.ctx.loss_scale = loss_scale;
        g_backward(&G, NULL);
        int exact = 1;
        for (int k = 0; k < N * V; k++)
            exact &= same_bits(l->dx[k], d1[k] * loss_scale);
        ok(exact, "softmax_ce: loss scale %g multiplies dlogits exactly", (double)loss_scale);
        free(d1);
    }
    g_free(&G);
}

/* The checker itself must catch a wrong gradient. */
static void test_checker_catches_errors(void)
{
    double num[4] = {1.0, -2.0, 0.5, 3.0};
    float good[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    float bad[4] = {1.0f, -2.0f, 0.505f, 3.0f}; /* 1% off in one value */
    ok(grad_error(good, num, 4) <= TOL && grad_error(bad, num, 4) > TOL,
       "the gradient check rejects a 1%% error in one value (error %.2e)", grad_error(bad, num, 4));
}

/* ------------------------------------------------------------------------------- precision */

static int all_in_format(const float *x, size_t n, ampdiag_format f)
{
    for (size_t i = 0; i < n; i++)
        if (!same_bits(ampdiag_round(f, x[i]), x[i]))
            return 0;
    return 1;
}

static size_t count_not_in_format(const float *x, size_t n, ampdiag_format f)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++)
        c += !same_bits(ampdiag_round(f, x[i]), x[i]);
    return c;
}

/* A one-linear graph, N x C -> OC, in format f. */
static layer *linear_graph(graph *G, ampdiag_format f, unsigned flags, int N, int C, int OC)
{
    g_init(G, f, flags, N, 1);
    act *x = g_input(G, C);
    layer *L = g_add(G, OP_LINEAR, "fc", x, NULL, C, OC, 1);
    g_finish(G);
    return L;
}

/* Inputs that make every sum exact in FP32 and in double: small integers times powers of two.
 * Then the 16-bit result must be exactly round_F(exact sum), bit for bit. */
static void test_linear_exact(ampdiag_format f)
{
    graph G;
    int N = 8, C = 16, OC = 12;
    layer *L = linear_graph(&G, f, 0, N, C, OC);
    float *x = L->in->x, *w = L->p, *b = L->p + OC * C;
    for (int i = 0; i < N * C; i++)
        x[i] = (float)((int)(urand() * 255) - 127) * 0x1p-4f;  /* 8 significant bits */
    for (int i = 0; i < OC * C; i++)
        w[i] = (float)((int)(urand() * 255) - 127) * 0x1p-5f;
    for (int i = 0; i < OC; i++)
        b[i] = (float)((int)(urand() * 255) - 127) * 0x1p-3f;
    g_forward(&G);
    int exact = 1, rounded = 0;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = b[o];
            for (int i = 0; i < C; i++)
                s += (double)x[n * C + i] * (double)w[o * C + i];
            float want = ampdiag_round(f, (float)s);
            exact &= same_bits(L->out->x[n * OC + o], want);
            rounded += (double)want != s;
        }
    ok(exact && rounded > 0, "%s linear: output == round(exact GEMM + bias) bit for bit (%d of "
       "%d outputs needed rounding)", ampdiag_format_get(f)->name, rounded, N * OC);
    g_free(&G);
}

/* Random inputs: operands rounded to F, FP32 accumulation, output rounded. Against a double
 * GEMM of the rounded operands, a mismatch is allowed only where the double result lies
 * within 1e-6 (relative) of a rounding boundary of F. */
static void test_linear_random(ampdiag_format f)
{
    graph G;
    int N = 16, C = 64, OC = 32;
    layer *L = linear_graph(&G, f, 0, N, C, OC);
    g_forward(&G);
    const float *x = L->in->x, *w = L->p, *b = L->p + OC * C;
    int mismatch = 0, excused = 0;
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = ampdiag_round(f, b[o]);
            for (int i = 0; i < C; i++)
                s += (double)ampdiag_round(f, x[n * C + i])
                     * (double)ampdiag_round(f, w[o * C + i]);
            float got = L->out->x[n * OC + o];
            if (same_bits(got, ampdiag_round(f, (float)s)))
                continue;
            mismatch++;
            /* boundary: rounding s*(1 -+ 1e-6) gives different results */
            excused += !same_bits(ampdiag_round(f, (float)(s * (1 - 1e-6))),
                                  ampdiag_round(f, (float)(s * (1 + 1e-6))));
        }
    ok(mismatch == excused && all_in_format(L->out->x, (size_t)N * OC, f),
       "%s linear (random operands): output == round(GEMM of rounded operands), %d of %d "
       "differ, all at rounding boundaries", ampdiag_format_get(f)->name, mismatch, N * OC);
    if (f == AMPDIAG_FP16)
        ok(count_not_in_format(L->out->x, (size_t)N * OC, AMPDIAG_BF16) > 0,
           "fp16 linear: outputs carry more bits than bf16 would");
    g_free(&G);
}

/* In a 16-bit policy, an FP32 island's output is the FP32 policy's output, bit for bit, and
 * the 16-bit layer after it rounds the island's output as its GEMM operand. */
static void test_island(void)
{
    graph G16, G32;
    for (int k = 0; k < 2; k++) {
        graph *G = k ? &G32 : &G16;
        rng_state = 42;
        g_init(G, k ? AMPDIAG_FP32 : AMPDIAG_FP16, 0, 6, 1);
        act *x = g_input(G, 10);
        layer *a = g_add(G, OP_LINEAR, "fc1", x, NULL, 10, 12, 1);
        a->fp32 = 1;
        g_add(G, OP_LINEAR, "fc2", a->out, NULL, 12, 5, 1);
        g_finish(G);
        g_forward(G);
    }
    layer *i16 = &G16.layers[0], *n16 = &G16.layers[1];
    size_t n = 6 * 12;
    int same = 1;
    for (size_t k = 0; k < n; k++)
        same &= same_bits(i16->out->x[k], G32.layers[0].out->x[k]);
    ok(same && count_not_in_format(i16->out->x, n, AMPDIAG_FP16) > n / 2,
       "fp32 island in fp16: output equals the fp32 policy's bit for bit and is not rounded "
       "(%zu of %zu values are not fp16 values)", count_not_in_format(i16->out->x, n, AMPDIAG_FP16),
       n);
    ok(i16->out->fmt == AMPDIAG_FP32 && n16->round_input && n16->out->fmt == AMPDIAG_FP16
           && all_in_format(n16->out->x, 6 * 5, AMPDIAG_FP16),
       "fp16 layer after an island rounds its operand and its output to fp16");

    /* gradients: the island's input gradient is held in the input's format (fp32 data here),
     * its weight gradient is FP32; the 16-bit layer's are fp16 */
    float gy[30];
    for (int k = 0; k < 30; k++)
        gy[k] = frand(-1, 1);
    g_backward(&G16, gy);
    ok(all_in_format(n16->g, n16->nparams, AMPDIAG_FP16)
           && all_in_format(i16->out->dx, n, AMPDIAG_FP16)
           && count_not_in_format(i16->g, i16->nparams, AMPDIAG_FP16) > 0,
       "fp16 layer: weight and input gradients in fp16; island weight gradient not rounded");
    g_free(&G16);
    g_free(&G32);
}

/* An island reading a 16-bit tensor hands back a gradient held in that tensor's format. */
static void test_island_grad_format(void)
{
    graph G;
    g_init(&G, AMPDIAG_FP16, 0, 4, 1);
    act *x = g_input(&G, 6);
    layer *a = g_add(&G, OP_LINEAR, "fc1", x, NULL, 6, 8, 1);
    layer *r = g_add(&G, OP_RELU, "relu1", a->out, NULL, 8, 8, 0);
    layer *b = g_add(&G, OP_LINEAR, "fc2", r->out, NULL, 8, 3, 1);
    b->fp32 = 1;
    g_finish(&G);
    g_forward(&G);
    float gy[12];
    for (int k = 0; k < 12; k++)
        gy[k] = frand(-1, 1) * 1.001f;
    g_backward(&G, gy);
    ok(r->out->fmt == AMPDIAG_FP16 && !b->round_input
           && all_in_format(r->out->dx, 4 * 8, AMPDIAG_FP16)
           && count_not_in_format(b->out->x, 12, AMPDIAG_FP16) > 0,
       "island after fp16 layers: reads fp16 values as they are, output unrounded, input "
       "gradient held in fp16");
    g_free(&G);
}

/* Count the infinities in a linear's output for the three formats, inputs scaled by `scale`
 * (and made positive, with positive weights, when `positive`). */
static void overflow_counts(float scale, int positive, size_t ninf[3], size_t nfin[3])
{
    static const ampdiag_format fmts[3] = {AMPDIAG_FP16, AMPDIAG_BF16, AMPDIAG_FP32};
    for (int k = 0; k < 3; k++) {
        graph G;
        rng_state = 7;
        layer *L = linear_graph(&G, fmts[k], 0, 8, 32, 8);
        for (int i = 0; i < 8 * 32; i++)
            L->in->x[i] = (positive ? fabsf(L->in->x[i]) : L->in->x[i]) * scale;
        for (size_t i = 0; positive && i < L->nparams; i++)
            L->p[i] = fabsf(L->p[i]);
        g_forward(&G);
        ninf[k] = nfin[k] = 0;
        for (int i = 0; i < 64; i++) {
            ninf[k] += isinf(L->out->x[i]) != 0;
            nfin[k] += isfinite(L->out->x[i]) != 0;
        }
        g_free(&G);
    }
}

static void test_overflow(void)
{
    size_t ninf[3], nfin[3];
    overflow_counts(1e5f, 1, ninf, nfin);
    ok(ninf[0] == 64 && nfin[1] == 64 && nfin[2] == 64,
       "inputs x1e5 into a linear: every fp16 output is inf (operands beyond 65504); bf16 and "
       "fp32 outputs all finite");
    overflow_counts(1e4f, 0, ninf, nfin);
    ok(ninf[0] > 0 && ninf[0] == 64 - nfin[0] && nfin[1] == 64 && nfin[2] == 64,
       "inputs x1e4 (fp16 operands finite): %zu of 64 fp16 GEMM outputs overflow to inf, none "
       "in bf16 or fp32", ninf[0]);
}

static void test_ftz(void)
{
    float out[2];
    for (int k = 0; k < 2; k++) {
        graph G;
        layer *L = linear_graph(&G, AMPDIAG_FP16, k ? AMPDIAG_ROUND_FTZ : 0, 1, 2, 1);
        L->in->x[0] = 1e-6f; /* fp16 subnormal range: below 2^-14 = 6.1e-5 */
        L->in->x[1] = 0.0f;
        L->p[0] = 1.0f;
        L->p[1] = 1.0f;
        L->p[2] = 0.0f;
        g_forward(&G);
        out[k] = L->out->x[0];
        g_free(&G);
    }
    ok(out[0] > 0.0f && out[0] < 0x1p-14f && out[1] == 0.0f,
       "fp16 subnormal output %.3g is kept without FTZ and flushed to 0 with FTZ",
       (double)out[0]);
}

/* Every tensor of a 16-bit GEMM + elementwise chain is held in F; layer norm statistics and
 * parameter gradients are FP32. */
static void test_chain_formats(ampdiag_format f)
{
    graph G;
    g_init(&G, f, 0, 4, 3);
    act *x = g_input(&G, 8);
    layer *ln = g_add(&G, OP_LAYERNORM, "ln", x, NULL, 8, 8, 0);
    layer *fc = g_add(&G, OP_LINEAR, "fc", ln->out, NULL, 8, 24, 1);
    layer *at = g_add(&G, OP_ATTENTION, "sdpa", fc->out, NULL, 24, 8, 2);
    layer *ge = g_add(&G, OP_GELU, "gelu", at->out, NULL, 8, 8, 0);
    layer *re = g_add(&G, OP_RESIDUAL, "res", x, ge->out, 8, 8, 0);
    g_finish(&G);
    g_forward(&G);
    size_t n8 = 12 * 8;
    float gy[96];
    for (int k = 0; k < 96; k++)
        gy[k] = frand(-1, 1);
    g_backward(&G, gy);
    const char *fn = ampdiag_format_get(f)->name;
    ok(all_in_format(ln->out->x, n8, f) && all_in_format(fc->out->x, 12 * 24, f)
           && all_in_format(at->out->x, n8, f) && all_in_format(ge->out->x, n8, f),
       "%s: layernorm, linear, attention and gelu outputs are %s values", fn, fn);
    ok(re->out->fmt == AMPDIAG_FP32 && count_not_in_format(re->out->x, n8, f) > 0,
       "%s: a residual add with an FP32 operand stays FP32 (type promotion)", fn);
    ok(all_in_format(fc->out->dx, 12 * 24, f) && all_in_format(at->out->dx, n8, f)
           && all_in_format(ln->out->dx, n8, f) && all_in_format(fc->g, fc->nparams, f),
       "%s: activation gradients and the linear's weight gradient are %s values", fn, fn);
    ok(count_not_in_format(ln->g, ln->nparams, f) > 0,
       "%s: layer norm parameter gradients stay FP32", fn);
    g_free(&G);
}

/* The vector rounding code (F16C, AVX2) against the portable code and numfmt.h: random bit
 * patterns and special values; all 2^32 float32 inputs with AMPDIAG_EXHAUSTIVE=1. */
static int round_impls_agree(const float *in, float *a, float *b, size_t n, bk_rnd r)
{
    const backend *bk = backend_cpu();
    backend_cpu_force_generic(0);
    bk->round(bk, a, in, n, r);
    backend_cpu_force_generic(1);
    bk->round(bk, b, in, n, r);
    backend_cpu_force_generic(0);
    int ftz = (r.flags & AMPDIAG_ROUND_FTZ) != 0;
    for (size_t i = 0; i < n; i++) {
        float want = ftz ? ampdiag_round_ftz(r.fmt, in[i]) : ampdiag_round(r.fmt, in[i]);
        if (!same_bits(a[i], want) || !same_bits(b[i], want)) {
            diag("input %08x: vector %08x, generic %08x, numfmt %08x", tap_fbits(in[i]),
                 tap_fbits(a[i]), tap_fbits(b[i]), tap_fbits(want));
            return 0;
        }
    }
    return 1;
}

/* The branch-free roundings in the CPU backend's output loops (backend_cpu.c, rnd_*_v) against
 * numfmt.h: through axpy with beta 0 and a = 1 (y = rnd(x); BF16 rounds in axpy's loop) and
 * through bias_grad over one row of 48 (dbias = rnd(0 + x), rows that narrow are rounded by the
 * branch-free loop in both formats). */
static int fused_impls_agree(const float *in, float *a, size_t n, bk_rnd r)
{
    const backend *bk = backend_cpu();
    int ftz = (r.flags & AMPDIAG_ROUND_FTZ) != 0;
    bk->axpy(bk, a, 0.0f, 1.0f, in, n, r);
    for (size_t i = 0; i < n; i++) {
        float want = ftz ? ampdiag_round_ftz(r.fmt, in[i]) : ampdiag_round(r.fmt, in[i]);
        if (!same_bits(a[i], want)) {
            diag("axpy, input %08x: %08x, numfmt %08x", tap_fbits(in[i]), tap_fbits(a[i]),
                 tap_fbits(want));
            return 0;
        }
    }
    for (size_t i0 = 0; i0 < n; i0 += 48) {
        int k = n - i0 < 48 ? (int)(n - i0) : 48;
        bk->bias_grad(bk, a, in + i0, 1, k, r);
        for (int i = 0; i < k; i++) {
            float x = 0.0f + in[i0 + (size_t)i];
            float want = ftz ? ampdiag_round_ftz(r.fmt, x) : ampdiag_round(r.fmt, x);
            if (!same_bits(a[i], want)) {
                diag("bias_grad, input %08x: %08x, numfmt %08x", tap_fbits(in[i0 + (size_t)i]),
                     tap_fbits(a[i]), tap_fbits(want));
                return 0;
            }
        }
    }
    return 1;
}

static void test_round_impls(void)
{
    size_t n = (1u << 16) + 7; /* and a tail that is not a multiple of 8 */
    float *in = xcalloc(n, sizeof(float)), *a = xcalloc(n, sizeof(float));
    float *b = xcalloc(n, sizeof(float));
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                       0x7fc00001u, 0xffbfffffu, 0x7f800001u, 0x477ff000u,
                                       0x477fefffu, 0x33000000u, 0x33000001u, 0x387fe000u,
                                       0x387fdfffu, 0x00000001u, 0x807fffffu, 0x7f7f8000u,
                                       0x7f7f7fffu, 0x00008000u, 0x00008001u, 0x3f808000u};
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)(urand() * 4294967296.0);
        if (i % 3 == 0) /* many values near FP16's range */
            u = (u & 0x80ffffffu) | ((uint32_t)(96 + (u >> 24) % 48) << 23);
        if (i < sizeof special / sizeof special[0])
            u = special[i];
        memcpy(&in[i], &u, sizeof u);
    }
    static const ampdiag_format fmts[2] = {AMPDIAG_FP16, AMPDIAG_BF16};
    int good = 1;
    int fused = 1;
    for (int f = 0; f < 2; f++)
        for (unsigned flags = 0; flags < 2; flags++) {
            good &= round_impls_agree(in, a, b, n, bk_rnd_make(fmts[f], flags));
            fused &= fused_impls_agree(in, a, n, bk_rnd_make(fmts[f], flags));
        }
    ok(good, "round (%s): vector and generic code equal numfmt.h on %zu values, fp16/bf16, "
       "with and without FTZ", backend_cpu_round_impl(), n);
    ok(fused, "the roundings in the output loops (axpy, bias_grad) equal numfmt.h on the same "
       "values");
    const char *ex = getenv("AMPDIAG_EXHAUSTIVE");
    if (ex && *ex && strcmp(ex, "0") != 0) {
        size_t chunk = (size_t)1 << 20;
        int all = 1;
        for (uint64_t base = 0; base <= 0xffffffffull && all; base += chunk) {
            for (size_t i = 0; i < chunk; i++) {
                uint32_t u = (uint32_t)(base + i);
                memcpy(&in[i % n], &u, sizeof u);
                if (i % n == n - 1 || i == chunk - 1)
                    for (int f = 0; f < 2; f++)
                        for (unsigned flags = 0; flags < 2; flags++)
                            all &= round_impls_agree(in, a, b, i % n + 1,
                                                     bk_rnd_make(fmts[f], flags)) &&
                                   fused_impls_agree(in, a, i % n + 1,
                                                     bk_rnd_make(fmts[f], flags));
            }
        }
        ok(all, "round and the output loops' roundings: vector and generic code equal numfmt.h "
           "on all 2^32 float32 inputs");
    }
    free(in);
    free(a);
    free(b);
}

/* Non-finite values through the elementwise ops, as PyTorch: relu(NaN) = NaN, relu(-inf) = 0,
 * relu(inf) = inf; the backward (threshold_backward: grad where !(x <= 0)) passes the gradient
 * through a NaN input, so a NaN in the forward is not turned into a zero gradient. */
static void test_relu_nonfinite(void)
{
    const backend *bk = backend_cpu();
    float in[4] = {NAN, -INFINITY, INFINITY, -1.0f}, out[4], dout[4] = {2, 3, 5, 7}, din[4];
    bk->relu_fwd(bk, out, in, 4, BK_NO_RND);
    ok(isnan(out[0]) && out[1] == 0.0f && isinf(out[2]) && out[2] > 0 && out[3] == 0.0f,
       "relu: NaN -> NaN, -inf -> 0, inf -> inf, -1 -> 0");
    bk->relu_bwd(bk, din, in, dout, 4, 0.0f, BK_NO_RND);
    ok(din[0] == dout[0] && din[1] == 0.0f && din[2] == dout[2] && din[3] == 0.0f,
       "relu backward as PyTorch's threshold_backward: no gradient where x <= 0 (-inf, -1), the "
       "gradient passes where x is NaN or > 0");
}

/* vmath.h's exp and tanh (GELU, softmax, cross-entropy) against double over a sample of their
 * float32 inputs (every 251st bit pattern of either sign: every exponent, many mantissas), and
 * at their edges. */
static void test_vmath(void)
{
    double worst_ulp = 0.0, worst_abs = 0.0;
    for (uint32_t u = 0; u <= ampdiag_f32_bits(88.0f); u += 251)
        for (int sign = 0; sign < 2; sign++) {
            float x = sign ? -ampdiag_f32_from_bits(u) : ampdiag_f32_from_bits(u);
            if (x < -87.0f)
                continue;
            double e = exp((double)x), ulp = ldexp(1.0, ilogb(e) - 23);
            double d = fabs((double)vexpf(x) - e) / ulp;
            worst_ulp = d > worst_ulp ? d : worst_ulp;
            if (fabsf(x) <= 20.0f) {
                double t = fabs((double)vtanhf(x) - tanh((double)x));
                worst_abs = t > worst_abs ? t : worst_abs;
            }
        }
    ok(worst_ulp <= VEXPF_MAX_ULP, "vexpf within %.1f ulp of exp over [-87, 88] (worst %.3f ulp)",
       VEXPF_MAX_ULP, worst_ulp);
    ok(worst_abs <= VTANHF_MAX_ABS, "vtanhf within %.0e of tanh over [-20, 20] (worst %.2e)",
       VTANHF_MAX_ABS, worst_abs);
    ok(vexpf(-INFINITY) == 0.0f && vexpf(-88.0f) == 0.0f && isinf(vexpf(89.0f)) &&
           isinf(vexpf(INFINITY)) && isnan(vexpf(NAN)) && vexpf(0.0f) == 1.0f,
       "vexpf: -inf and below -87 -> 0, above 88 and inf -> inf, NaN -> NaN, exp(0) = 1");
    ok(vtanhf(100.0f) == 1.0f && vtanhf(-INFINITY) == -1.0f && isnan(vtanhf(NAN)),
       "vtanhf saturates to +-1 and keeps NaN");
}

int main(void)
{
    test_relu_nonfinite();
    test_vmath();
    test_round_impls();
    test_checker_catches_errors();
    test_linear(1);
    test_linear(0);
    test_unary(OP_RELU, "relu");
    test_unary(OP_GELU, "gelu");
    test_layernorm();
    test_residual();
    test_shared_input();
    test_embedding();
    test_attention_core();
    test_attention_block();
    test_softmax_ce(1.0f);
    test_softmax_ce(1024.0f);

    test_linear_exact(AMPDIAG_FP16);
    test_linear_exact(AMPDIAG_BF16);
    test_linear_random(AMPDIAG_FP16);
    test_linear_random(AMPDIAG_BF16);
    test_island();
    test_island_grad_format();
    test_overflow();
    test_ftz();
    test_chain_formats(AMPDIAG_FP16);
    test_chain_formats(AMPDIAG_BF16);
    return done_testing();
}
