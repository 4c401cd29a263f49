/*
 * t_cuda_kernels.c - the CUDA backend's kernel bodies (kernels/bodies.h), run on the
 * host over whole tensors the way the kernels split the work (one call per element, row or
 * column; the attention's products unrounded, in the CPU's order, their rounding where the
 * kernels fuse it), against the CPU backend: every result bit for bit, in every rounding (FP32,
 * FP16, BF16, with and without FTZ). The statistics as the device computes them (each value's
 * rank among the format table's thresholds, kernels/bodies.h) against the CPU's record: every
 * count of every format, the extremes and the histogram exactly, at and around every class
 * boundary too; their sums, which the device adds in another order, to 1e-12 (or the bound of
 * another order where they cancel); the scaled FP8 what-if counts as the device derives them. Built and run in every build,
 * with CUDA or without: it checks the arithmetic the GPU would do, not the GPU (the host's logf
 * stands in for CUDA's, which may differ in the last bit: kernels/bodies.h).
 */
#include "backend/backend.h"
#include "backend/cuda/optim_setup.h"
#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-53;
}

static float *fbuf(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(99);
    }
    return p;
}

/* Values of every size and sign: normal ones over 2^-30..2^17 (so FP16 overflows, underflows
 * and subnormals all occur), with a few zeros, float32 subnormals, infinities and NaNs when
 * special is set. */
static void fill_wide(float *x, size_t n, int special)
{
    static const float odd[] = {0.0f, -0.0f, 1e-40f, -3e-39f, INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f,
                                -65519.0f, 0x1p-25f, 0x1.8p-25f};
    for (size_t i = 0; i < n; i++) {
        double e = -30.0 + 47.0 * urand();
        x[i] = (float)((urand() < 0.5 ? -1.0 : 1.0) * exp2(e));
        if (special && urand() < 0.08)
            x[i] = odd[(size_t)(urand() * (double)(sizeof odd / sizeof odd[0]))];
    }
}

static void fill_unit(float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * (float)(2.0 * urand() - 1.0);
}

/* The first index where a and b differ in bits, or -1. */
static long first_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ampdiag_f32_bits(a[i]) != ampdiag_f32_bits(b[i]))
            return (long)i;
    return -1;
}

static int same(const char *what, const char *rname, const float *gpu, const float *cpu, size_t n)
{
    long d = first_diff(gpu, cpu, n);
    if (d >= 0)
        diag("%s (%s): index %ld: kernel body %a, CPU %a", what, rname, d, (double)gpu[d], (double)cpu[d]);
    return ok(d < 0, "%s (%s): %zu values bit for bit", what, rname, n);
}

typedef struct rnd_case {
    bk_rnd r;
    const char *name;
} rnd_case;

static const rnd_case rnds[] = {
    {{AMPDIAG_FP32, 0}, "fp32"},
    {{AMPDIAG_FP16, 0}, "fp16"},
    {{AMPDIAG_BF16, 0}, "bf16"},
    {{AMPDIAG_FP16, AMPDIAG_ROUND_FTZ}, "fp16 ftz"},
    {{AMPDIAG_BF16, AMPDIAG_ROUND_FTZ}, "bf16 ftz"},
};
#define NRND (sizeof rnds / sizeof rnds[0])

static int rk(const rnd_case *c) { return ck_rnd_kind(c->r.fmt, c->r.flags); }

/* ------------------------------------------------------------------------------- elementwise */

enum { NE = 4099 };

static void test_axpy(const backend *cpu, const rnd_case *c)
{
    static const float betas[3] = {0.0f, 1.0f, 0.5f};
    float *x = fbuf(NE), *y0 = fbuf(NE), *yg = fbuf(NE), *yc = fbuf(NE);
    fill_wide(x, NE, 1);
    fill_wide(y0, NE, 1);
    for (int b = 0; b < 3; b++) {
        memcpy(yg, y0, NE * sizeof *yg);
        memcpy(yc, y0, NE * sizeof *yc);
        for (size_t i = 0; i < NE; i++)
            ck_axpy(yg, betas[b], 0.75f, x, i, rk(c));
        cpu->axpy(cpu, yc, betas[b], 0.75f, x, NE, c->r);
        char what[32];
        snprintf(what, sizeof what, "axpy beta %g", (double)betas[b]);
        same(what, c->name, yg, yc, NE);
    }
    for (size_t i = 0; i < NE; i++)
        yg[i] = ck_rnd(rk(c), x[i]);
    cpu->round(cpu, yc, x, NE, c->r);
    same("round", c->name, yg, yc, NE);
    free(x), free(y0), free(yg), free(yc);
}

/* The unary ops and their backward, overwriting and accumulating. */
static void test_unary(const backend *cpu, const rnd_case *c, int gelu)
{
    float *x = fbuf(NE), *d = fbuf(NE), *og = fbuf(NE), *oc = fbuf(NE), *d0 = fbuf(NE);
    fill_wide(x, NE, 1);
    fill_unit(d, NE, 3.0f);
    fill_unit(d0, NE, 1.0f);
    for (size_t i = 0; i < NE; i++)
        og[i] = ck_rnd(rk(c), gelu ? ck_gelu(x[i]) : ck_relu(x[i]));
    (gelu ? cpu->gelu_fwd : cpu->relu_fwd)(cpu, oc, x, NE, c->r);
    same(gelu ? "gelu_fwd" : "relu_fwd", c->name, og, oc, NE);
    for (int acc = 0; acc < 2; acc++) {
        memcpy(og, d0, NE * sizeof *og);
        memcpy(oc, d0, NE * sizeof *oc);
        for (size_t i = 0; i < NE; i++)
            ck_store(&og[i], gelu ? ck_gelu_grad(x[i], d[i]) : ck_relu_grad(x[i], d[i]), acc, rk(c));
        (gelu ? cpu->gelu_bwd : cpu->relu_bwd)(cpu, oc, x, d, NE, acc ? 1.0f : 0.0f, c->r);
        same(acc ? (gelu ? "gelu_bwd accumulating" : "relu_bwd accumulating") : (gelu ? "gelu_bwd" : "relu_bwd"),
             c->name, og, oc, NE);
    }
    for (size_t i = 0; i < NE; i++)
        og[i] = ck_rnd(rk(c), x[i] + d[i]);
    cpu->add_fwd(cpu, oc, x, d, NE, c->r);
    same("add_fwd", c->name, og, oc, NE);
    free(x), free(d), free(og), free(oc), free(d0);
}

static void test_bias(const backend *cpu, const rnd_case *c)
{
    enum { N = 37, OC = 29 };
    float *o0 = fbuf(N * OC), *og = fbuf(N * OC), *oc = fbuf(N * OC), *bias = fbuf(OC), *bg = fbuf(OC),
          *bc = fbuf(OC);
    fill_unit(o0, N * OC, 100.0f);
    fill_unit(bias, OC, 10.0f);
    for (int with = 0; with < 2; with++) {
        memcpy(og, o0, sizeof(float) * N * OC);
        memcpy(oc, o0, sizeof(float) * N * OC);
        for (size_t i = 0; i < (size_t)N * OC; i++)
            ck_bias_add(og, with ? bias : NULL, i, OC, rk(c));
        cpu->bias_add(cpu, oc, with ? bias : NULL, N, OC, c->r);
        same(with ? "bias_add" : "bias_add without a bias", c->name, og, oc, (size_t)N * OC);
    }
    for (int j = 0; j < OC; j++)
        ck_bias_grad(bg, o0, N, OC, j, rk(c));
    cpu->bias_grad(cpu, bc, o0, N, OC, c->r);
    same("bias_grad", c->name, bg, bc, OC);
    free(o0), free(og), free(oc), free(bias), free(bg), free(bc);
}

/* ------------------------------------------------------------------------------- layer norm */

static void test_layernorm(const backend *cpu, const rnd_case *c)
{
    enum { N = 13, C = 40 };
    size_t nc = (size_t)N * C;
    float *x = fbuf(nc), *w = fbuf(C), *b = fbuf(C), *og = fbuf(nc), *oc = fbuf(nc);
    float *mg = fbuf(N), *sg = fbuf(N), *mc = fbuf(N), *sc = fbuf(N), *d = fbuf(nc), *dx0 = fbuf(nc);
    float *dxg = fbuf(nc), *dxc = fbuf(nc), *dwg = fbuf(C), *dbg = fbuf(C), *dwc = fbuf(C), *dbc = fbuf(C);
    fill_unit(x, nc, 4.0f);
    fill_unit(w, C, 2.0f);
    fill_unit(b, C, 1.0f);
    fill_unit(d, nc, 1.0f);
    fill_unit(dx0, nc, 1.0f);
    for (int n = 0; n < N; n++)
        ck_layernorm_row(og, mg, sg, x, w, b, C, n, rk(c));
    cpu->layernorm_fwd(cpu, oc, mc, sc, x, w, b, N, C, c->r);
    same("layernorm_fwd", c->name, og, oc, nc);
    same("layernorm_fwd mean", c->name, mg, mc, N);
    same("layernorm_fwd rstd", c->name, sg, sc, N);
    for (int acc = 0; acc < 2; acc++) {
        memcpy(dxg, dx0, nc * sizeof *dxg);
        memcpy(dxc, dx0, nc * sizeof *dxc);
        for (int i = 0; i < C; i++)
            ck_layernorm_wgrad(dwg, dbg, d, x, mc, sc, N, C, i, rk(c));
        for (int n = 0; n < N; n++)
            ck_layernorm_dx_row(dxg, d, x, w, mc, sc, C, n, acc, rk(c));
        cpu->layernorm_bwd(cpu, dxc, dwc, dbc, d, x, w, mc, sc, N, C, acc ? 1.0f : 0.0f, c->r, c->r);
        same(acc ? "layernorm_bwd input, accumulating" : "layernorm_bwd input", c->name, dxg, dxc, nc);
    }
    same("layernorm_bwd weight", c->name, dwg, dwc, C);
    same("layernorm_bwd bias", c->name, dbg, dbc, C);
    free(x), free(w), free(b), free(og), free(oc), free(mg), free(sg), free(mc), free(sc), free(d), free(dx0);
    free(dxg), free(dxc), free(dwg), free(dbg), free(dwc), free(dbc);
}

/* ------------------------------------------------------------------------------- attention */

enum { AB = 2, AT = 7, AC = 12, ANH = 3, AHS = AC / ANH, AC3 = 3 * AC };
#define ATT_N ((size_t)AB * ANH * AT * AT)

/* The attention's products of one head as the CPU backend computes them for small heads (its
 * head loops, backend_cpu.c): each value the sum over the shared index in increasing order,
 * then times the scale; only the causal part (j <= t). The GPU uses cuBLAS GEMMs there, which
 * add in their own order: what is compared is the kernels' arithmetic around them.
 * c[t, j] = scale * a_t . b_j (j <= t), rows of a and b [T, AHS] with strides lda, ldb. */
static void prod_abt(float *c, const float *a, int lda, const float *b, int ldb, float scale)
{
    for (int t = 0; t < AT; t++)
        for (int j = 0; j <= t; j++) {
            float s = 0.0f;
            for (int d = 0; d < AHS; d++)
                s += a[(size_t)t * lda + d] * b[(size_t)j * ldb + d];
            c[(size_t)t * AT + j] = s * scale;
        }
}

/* y_t = scale * sum_{j <= t} p[t, j] v_j, or with trans y_j = scale * sum_{t >= j} p[t, j] v_t. */
static void prod_pv(float *y, int ldy, const float *p, const float *v, int ldv, float scale, int trans)
{
    for (int i = 0; i < AT; i++)
        for (int d = 0; d < AHS; d++) {
            float s = 0.0f;
            for (int k = trans ? i : 0; k <= (trans ? AT - 1 : i); k++)
                s += (trans ? p[(size_t)k * AT + i] : p[(size_t)i * AT + k]) * v[(size_t)k * ldv + d];
            y[(size_t)i * ldy + d] = s * scale;
        }
}

/* The GPU's forward: every head's S product unrounded, the softmax kernel (rounding S as it
 * reads it), every head's P V product unrounded, then one rounding pass over out. */
static void att_fwd_as_gpu(float *out, float *att, float *att_r, const float *qkv, int r)
{
    float scale = 1.0f / sqrtf((float)AHS);
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < ANH; h++) {
            const float *q = qkv + (size_t)b * AT * AC3 + (size_t)h * AHS;
            size_t off = ((size_t)b * ANH + (size_t)h) * AT * AT;
            prod_abt(att + off, q, AC3, q + AC, AC3, scale);
        }
    for (size_t row = 0; row < (size_t)AB * ANH * AT; row++)
        ck_softmax_row(att, att_r, AT, row, r);
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < ANH; h++) {
            const float *v = qkv + (size_t)b * AT * AC3 + (size_t)h * AHS + 2 * AC;
            size_t off = ((size_t)b * ANH + (size_t)h) * AT * AT;
            prod_pv(out + (size_t)b * AT * AC + (size_t)h * AHS, AC, att_r + off, v, AC3, 1.0f, 0);
        }
    for (size_t i = 0; i < (size_t)AB * AT * AC; i++)
        out[i] = ck_rnd(r, out[i]);
}

/* The GPU's backward: dP and dV products, the softmax-backward kernel, dQ and dK products, one
 * rounding pass over dqkv. */
static void att_bwd_as_gpu(float *dqkv, float *ds, const float *dout, const float *qkv, const float *att,
                           const float *att_r, int r)
{
    float scale = 1.0f / sqrtf((float)AHS);
    for (int pass = 0; pass < 2; pass++) {
        for (int b = 0; b < AB; b++)
            for (int h = 0; h < ANH; h++) {
                size_t qo = (size_t)b * AT * AC3 + (size_t)h * AHS, off = ((size_t)b * ANH + (size_t)h) * AT * AT;
                const float *q = qkv + qo, *dy = dout + (size_t)b * AT * AC + (size_t)h * AHS;
                if (pass == 0) {
                    prod_abt(ds + off, dy, AC, q + 2 * AC, AC3, 1.0f);
                    prod_pv(dqkv + qo + 2 * AC, AC3, att_r + off, dy, AC, 1.0f, 1);
                } else {
                    prod_pv(dqkv + qo, AC3, ds + off, q + AC, AC3, scale, 0);
                    prod_pv(dqkv + qo + AC, AC3, ds + off, q, AC3, scale, 1);
                }
            }
        if (pass == 0)
            for (size_t row = 0; row < (size_t)AB * ANH * AT; row++)
                ck_softmax_bwd_row(ds, att, AT, row, r);
    }
    for (size_t i = 0; i < (size_t)AB * AT * AC3; i++)
        dqkv[i] = ck_rnd(r, dqkv[i]);
}

static void test_attention(const backend *cpu, const rnd_case *c)
{
    size_t nq = (size_t)AB * AT * AC3, no = (size_t)AB * AT * AC;
    float *qkv = fbuf(nq), *og = fbuf(no), *oc = fbuf(no), *ag = fbuf(ATT_N), *ac = fbuf(ATT_N);
    float *arg = fbuf(ATT_N), *arc = fbuf(ATT_N), *dy = fbuf(no), *dg = fbuf(nq), *dc = fbuf(nq);
    float *sg = fbuf(ATT_N), *sc = fbuf(ATT_N);
    fill_unit(qkv, nq, 3.0f);
    fill_unit(dy, no, 1.0f);
    for (size_t i = 0; i < nq; i++)
        qkv[i] = ck_rnd(rk(c), qkv[i]); /* operands held in the format, as layers.c holds them */
    att_fwd_as_gpu(og, ag, arg, qkv, rk(c));
    cpu->attention_fwd(cpu, oc, ac, arc, qkv, AB, AT, AC, ANH, c->r);
    same("attention_fwd out", c->name, og, oc, no);
    same("attention_fwd probabilities", c->name, ag, ac, ATT_N);
    same("attention_fwd rounded probabilities", c->name, arg, arc, ATT_N);
    att_bwd_as_gpu(dg, sg, dy, qkv, ac, arc, rk(c));
    cpu->attention_bwd(cpu, dc, sc, dy, qkv, ac, arc, AB, AT, AC, ANH, c->r);
    same("attention_bwd dqkv", c->name, dg, dc, nq);
    free(qkv), free(og), free(oc), free(ag), free(ac), free(arg), free(arc), free(dy), free(dg), free(dc);
    free(sg), free(sc);
}

/* ------------------------------------------------------------------------------- embedding */

enum { EB = 3, ET = 6, EC = 5, EV = 9 };

/* The positions sorted stably by token (what CUB's radix sort gives the kernel). */
static void sort_stable(const int32_t *tok, size_t n, int V, int32_t *keys, int32_t *pos)
{
    size_t k = 0;
    for (int v = 0; v < V; v++)
        for (size_t i = 0; i < n; i++)
            if (tok[i] == v) {
                keys[k] = v;
                pos[k++] = (int32_t)i;
            }
}

static void test_embedding(const backend *cpu, const rnd_case *c)
{
    size_t n = (size_t)EB * ET, no = n * EC;
    int32_t tok[EB * ET], keys[EB * ET], pos[EB * ET];
    float *wte = fbuf((size_t)EV * EC), *wpe = fbuf((size_t)ET * EC), *og = fbuf(no), *oc = fbuf(no);
    float *dy = fbuf(no), *teg = fbuf((size_t)EV * EC), *tec = fbuf((size_t)EV * EC);
    float *peg = fbuf((size_t)ET * EC), *pec = fbuf((size_t)ET * EC);
    for (size_t i = 0; i < n; i++)
        tok[i] = (int32_t)(urand() * (EV - 2)); /* the last two tokens never occur */
    fill_unit(wte, (size_t)EV * EC, 1.0f);
    fill_unit(wpe, (size_t)ET * EC, 1.0f);
    fill_unit(dy, no, 50.0f);
    for (size_t i = 0; i < no; i++)
        ck_embed(og, tok, wte, wpe, ET, EC, i, rk(c));
    cpu->embed_fwd(cpu, oc, tok, wte, wpe, EB, ET, EC, c->r);
    same("embed_fwd", c->name, og, oc, no);
    sort_stable(tok, n, EV, keys, pos);
    for (size_t i = 0; i < (size_t)EV * EC; i++)
        teg[i] = 0.0f;
    for (size_t i = 0; i < n * EC; i++) {
        size_t k = i / EC;
        if (k == 0 || keys[k] != keys[k - 1])
            ck_embed_dwte(teg, dy, keys, pos, k, n, EC, (int)(i % EC), rk(c));
    }
    for (size_t i = 0; i < (size_t)ET * EC; i++)
        ck_embed_dwpe(peg, dy, EB, ET, EC, i, rk(c));
    cpu->embed_bwd(cpu, tec, pec, dy, tok, EB, ET, EC, EV, c->r);
    same("embed_bwd token rows", c->name, teg, tec, (size_t)EV * EC);
    same("embed_bwd position rows", c->name, peg, pec, (size_t)ET * EC);
    free(wte), free(wpe), free(og), free(oc), free(dy), free(teg), free(tec), free(peg), free(pec);
}

/* ------------------------------------------------------------------------------- cross-entropy */

static void test_xent(const backend *cpu, const rnd_case *c)
{
    enum { N = 11, V = 17 };
    int32_t tg[N];
    float *l = fbuf(N * V), *pg = fbuf(N * V), *pc = fbuf(N * V), *lg = fbuf(N), *lc = fbuf(N);
    float *dg = fbuf(N * V), *dc = fbuf(N * V);
    fill_unit(l, N * V, 8.0f);
    for (int n = 0; n < N; n++)
        tg[n] = (int32_t)(urand() * V);
    for (int n = 0; n < N; n++)
        ck_xent_row(lg, pg, l, tg, V, n);
    cpu->xent_fwd(cpu, lc, pc, l, tg, N, V);
    same("xent_fwd probabilities", c->name, pg, pc, (size_t)N * V);
    same("xent_fwd losses", c->name, lg, lc, N);
    for (size_t i = 0; i < (size_t)N * V; i++)
        ck_xent_grad(dg, pc, tg, V, 1024.0f / N, i, rk(c));
    cpu->xent_bwd(cpu, dc, pc, tg, N, V, 1024.0f / N, c->r);
    same("xent_bwd", c->name, dg, dc, (size_t)N * V);
    free(l), free(pg), free(pc), free(lg), free(lc), free(dg), free(dc);
}

/* ------------------------------------------------------------------------------- optimizer */

typedef struct optim_case {
    bk_optim_kind kind;
    ampdiag_format state, weight;
    unsigned flags;
    const char *name;
} optim_case;

static bk_optim optim_of(const optim_case *oc)
{
    bk_optim c = {oc->kind, 0.9, 0.01, 0.9, 0.999, 1e-8, oc->state, oc->weight, oc->flags,
                   AMPDIAG_FP32};
    return c;
}

/* Three steps of n parameters both ways: weights, state and the kept copies bit for bit. */
static void test_optim(const backend *cpu, const optim_case *oc)
{
    enum { N = 3001 };
    bk_optim c = optim_of(oc);
    float *wg = fbuf(N), *wc = fbuf(N), *g = fbuf(N), *mg = fbuf(N), *mc = fbuf(N), *vg = fbuf(N), *vc = fbuf(N);
    float *dg = fbuf(N), *dc = fbuf(N), *kg = fbuf(N), *kc = fbuf(N);
    int adam = oc->kind == BK_ADAMW;
    fill_unit(wg, N, 1.0f);
    for (size_t i = 0; i < N; i++)
        wg[i] = wc[i] = ck_rnd(ck_rnd_kind(oc->weight, oc->flags), wg[i]);
    int good = 1;
    for (long t = 1; t <= 3; t++) {
        fill_wide(g, N, 0);
        ck_optim k = ck_optim_setup(&c, t, 1e-3);
        for (size_t i = 0; i < N; i++)
            ck_optim_step(&k, wg, g, mg, adam ? vg : NULL, i, 1.0f / 1024.0f, 0.7f, dg, kg);
        cpu->optim_step(cpu, &c, t, wc, g, mc, adam ? vc : NULL, N, 1e-3, 1.0f / 1024.0f, 0.7f, dc, kc, NULL, NULL);
        long d[5] = {first_diff(wg, wc, N), first_diff(mg, mc, N), adam ? first_diff(vg, vc, N) : -1,
                     first_diff(dg, dc, N), first_diff(kg, kc, N)};
        for (int j = 0; j < 5; j++)
            if (d[j] >= 0) {
                diag("%s step %ld: array %d (w, m, v, dw, w_old) differs at %ld", oc->name, t, j, d[j]);
                good = 0;
            }
    }
    ok(good, "optim_step %s: weights, state, dw and w_old over 3 steps bit for bit", oc->name);
    free(wg), free(wc), free(g), free(mg), free(mc), free(vg), free(vc), free(dg), free(dc), free(kg), free(kc);
}

static void test_lost(const backend *cpu, const optim_case *oc)
{
    enum { N = 5003 };
    bk_optim c = optim_of(oc);
    float *w = fbuf(N), *dw = fbuf(N);
    fill_wide(w, N, 1);
    fill_wide(dw, N, 1);
    for (size_t i = 0; i < N; i += 3)
        dw[i] = w[i] * 1e-4f; /* updates near the formats' resolutions */
    for (size_t i = 0; i < N; i += 7)
        dw[i] = 0.0f;
    unsigned long long cnt[3] = {0, 0, 0};
    for (size_t i = 0; i < N; i++)
        ck_lost(w[i], dw[i], ck_rnd_kind(oc->weight, oc->flags), (oc->flags & AMPDIAG_ROUND_FTZ) != 0, cnt);
    bk_update_stats st;
    memset(&st, 0, sizeof st);
    ampdiag_tstats_init(&st.update);
    cpu->update_stats(cpu, &c, w, dw, N, &st, NULL);
    ok(cnt[0] == st.lost_updates && cnt[1] == st.lost_if_fp16 && cnt[2] == st.lost_if_bf16 && cnt[1] > 0 && cnt[2] > 0,
       "update_stats %s: lost updates %llu / %llu / %llu (as stored / fp16 / bf16), CPU %llu / %llu / %llu", oc->name,
       cnt[0], cnt[1], cnt[2], (unsigned long long)st.lost_updates, (unsigned long long)st.lost_if_fp16,
       (unsigned long long)st.lost_if_bf16);
    free(w), free(dw);
}

/* ------------------------------------------------------------------------------- reductions */

static int close_rel(double a, double b, double tol)
{
    return a == b || fabs(a - b) <= tol * fmax(fabs(a), fabs(b));
}

static void test_grad_norm(const backend *cpu)
{
    enum { N = 9999 };
    float *g = fbuf(N);
    fill_wide(g, N, 1);
    double ss = 0.0, sc = 0.0;
    unsigned long long nf = 0;
    uint64_t nc = 0;
    for (size_t i = 0; i < N; i++)
        ck_grad_norm_add(&ss, &nf, g[i], 1.0f / 64.0f);
    cpu->grad_norm(cpu, g, N, 1.0f / 64.0f, &sc, &nc);
    ok(nf == nc && nf > 0 && close_rel(ss, sc, 1e-12), "grad_norm: %llu non-finite (CPU %llu), sum of squares %.17g (CPU %.17g)",
       nf, (unsigned long long)nc, ss, sc);
    free(g);
}

/* Every count of the record (7 counts, then every format's what-if classes: all of them, so
 * that a format added to the table is compared too), the extremes bit for bit; the sums within
 * twice the documented bound (ampdiag.h: the CPU's kernels may add 16 values a lane in float,
 * AMPDIAG_TSTATS_SUM_RTOL of the magnitudes of x[0..n)) plus another order in double. Names the
 * first field that differs into why. */
static int same_stats(const ampdiag_tstats *a, const ampdiag_tstats *b, const float *x, size_t n, char *why,
                      size_t whylen)
{
    const uint64_t ca[7] = {a->count, a->n_nan, a->n_posinf, a->n_neginf, a->n_zero, a->n_neg, a->n_pos};
    const uint64_t cb[7] = {b->count, b->n_nan, b->n_posinf, b->n_neginf, b->n_zero, b->n_neg, b->n_pos};
    static const char *const names[7] = {"count", "n_nan", "n_posinf", "n_neginf", "n_zero", "n_neg", "n_pos"};
    static const char *const cls[AMPDIAG_WHATIF_NCLASSES] = {"overflow", "underflow", "subnormal"};
    for (int i = 0; i < 7; i++)
        if (ca[i] != cb[i]) {
            snprintf(why, whylen, "%s %llu vs %llu", names[i], (unsigned long long)ca[i], (unsigned long long)cb[i]);
            return 0;
        }
    for (int f = 0; f < AMPDIAG_NFORMATS; f++)
        for (int k = 0; k < AMPDIAG_WHATIF_NCLASSES; k++)
            if (a->whatif[f][k] != b->whatif[f][k]) {
                snprintf(why, whylen, "%s %s %llu vs %llu", ampdiag_format_get((ampdiag_format)f)->name, cls[k],
                         (unsigned long long)a->whatif[f][k], (unsigned long long)b->whatif[f][k]);
                return 0;
            }
    int ext = ampdiag_f32_bits(a->min) == ampdiag_f32_bits(b->min) && ampdiag_f32_bits(a->max) == ampdiag_f32_bits(b->max) &&
              ampdiag_f32_bits(a->absmax) == ampdiag_f32_bits(b->absmax) &&
              ampdiag_f32_bits(a->absmin_nz) == ampdiag_f32_bits(b->absmin_nz);
    if (!ext) {
        snprintf(why, whylen, "extremes");
        return 0;
    }
    double sabs = 0, ssq = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) {
            sabs += fabs((double)x[i]);
            ssq += (double)x[i] * (double)x[i];
        }
    double rt = 2 * AMPDIAG_TSTATS_SUM_RTOL + 4 * (double)n * 0x1p-53;
    if (!(fabs(a->sum - b->sum) <= rt * sabs || (isinf(a->sum) && a->sum == b->sum)) ||
        !(fabs(a->sumsq - b->sumsq) <= rt * ssq || (isinf(a->sumsq) && a->sumsq == b->sumsq))) {
        snprintf(why, whylen, "sums %.17g / %.17g vs %.17g / %.17g", a->sum, a->sumsq, b->sum, b->sumsq);
        return 0;
    }
    why[0] = 0;
    return 1;
}

static ck_ranks ranks;

/* The statistics of x as the kernel computes them: each value's rank counted, the chunks'
 * parts merged (here three "chunks", split unevenly, merged in order), the record derived from
 * the ranks' counts; the histogram by bins. */
static void stats_as_gpu(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h)
{
    ck_part p[3];
    size_t cut[4] = {0, n / 3, n / 3 + n / 5, n};
    ampdiag_hist_init(h);
    for (int c = 0; c < 3; c++) {
        ck_part_init(&p[c]);
        for (size_t i = cut[c]; i < cut[c + 1]; i++) {
            ck_part_add(&p[c], ranks.bin, ampdiag_f32_bits(x[i]));
            h->bin[ck_hist_bin(ampdiag_f32_bits(x[i]))]++;
        }
    }
    ck_part_merge(&p[0], &p[1]);
    ck_part_merge(&p[0], &p[2]);
    ck_part_record(&ranks, &p[0], n, s);
}

/* The rank table: built, ascending, and each rank what comparing with every threshold gives,
 * over the thresholds and their neighbours and a sweep of the patterns, both signs (a negative
 * value's rank comes after the positive ranks). */
static void test_ranks(void)
{
    ok(ck_ranks_build(&ranks) == 0 && ranks.k >= 3 && ranks.k <= CK_MAX_THRESH,
       "the statistics' rank table builds from the format table: %d thresholds, ranks 0..%d", ranks.k, ranks.k);
    int asc = 1;
    for (int j = 1; j < ranks.k; j++)
        asc &= ranks.th[j - 1] < ranks.th[j];
    ok(asc && ranks.th[0] == 1u && ranks.th[ranks.k - 1] == AMPDIAG_F32_INF + 1u,
       "the thresholds ascend from 1 (non-zero) to the first NaN pattern");
    uint64_t checked = 0, bad = 0;
    for (int j = 0; j < ranks.k; j++)
        for (int d = -2; d <= 2; d++) {
            uint32_t a = ranks.th[j] + (uint32_t)d;
            if (a > 0x7fffffffu)
                continue;
            unsigned want = 0;
            for (int i = 0; i < ranks.k; i++)
                want += a >= ranks.th[i];
            bad += ck_rank(ranks.bin, a) != want;
            bad += ck_rank(ranks.bin, a | 0x80000000u) != want + (unsigned)ranks.k + 1u; /* negative: after the positive */
            checked += 2;
        }
    for (uint64_t a = 0; a <= 0x7fffffffu; a += 997) {
        unsigned want = 0;
        for (int i = 0; i < ranks.k; i++)
            want += (uint32_t)a >= ranks.th[i];
        bad += ck_rank(ranks.bin, (uint32_t)a) != want;
        bad += ck_rank(ranks.bin, (uint32_t)a | 0x80000000u) != want + (unsigned)ranks.k + 1u;
        checked += 2;
    }
    ok(bad == 0 && checked > 4000000, "ck_rank agrees with comparing every threshold on %llu |x| patterns (%llu differ)",
       (unsigned long long)checked, (unsigned long long)bad);
}

static void test_tstats(const backend *cpu)
{
    enum { N = 20011 };
    float *x = fbuf(N);
    static const size_t sizes[4] = {0, 1, 9, N};
    ampdiag_tstats sg, sc;
    char why[160];
    ampdiag_hist *hg = calloc(1, sizeof *hg), *hc = calloc(1, sizeof *hc);
    if (!hg || !hc)
        exit(99);
    for (int special = 0; special < 2; special++) {
        fill_wide(x, N, special);
        for (int k = 0; k < 4; k++) {
            stats_as_gpu(x, sizes[k], &sg, hg);
            cpu->tstats(cpu, x, sizes[k], &sc, hc);
            int same = same_stats(&sg, &sc, x, sizes[k], why, sizeof why);
            ok(same && memcmp(hg, hc, sizeof *hg) == 0,
               "tstats of %zu values%s: every count of every format, extremes and histogram exact, sums within "
               "2^-19%s%s", sizes[k], special ? " with NaN, inf, zeros and subnormals" : "", same ? "" : ": ", why);
        }
    }
    /* every class boundary of every format, both signs, and its neighbours */
    static const uint32_t cls[AMPDIAG_CLASS_NFORMATS][3] = AMPDIAG_CLASS_BITS_TABLE;
    size_t m = 0;
    for (int f = 0; f < AMPDIAG_CLASS_NFORMATS; f++)
        for (int j = 0; j < 3; j++)
            for (int d = -2; d <= 2; d++)
                for (int sg2 = 0; sg2 < 2; sg2++) {
                    uint32_t a = cls[f][j] + (uint32_t)d;
                    if (a <= 0x7fffffffu && m < N)
                        x[m++] = ampdiag_f32_from_bits(a | (sg2 ? 0x80000000u : 0u));
                }
    stats_as_gpu(x, m, &sg, hg);
    cpu->tstats(cpu, x, m, &sc, hc);
    int same = same_stats(&sg, &sc, x, m, why, sizeof why);
    ok(same && memcmp(hg, hc, sizeof *hg) == 0 && sc.fp16_overflow > 0 && sc.e4m3_subnormal > 0 && sc.bf16_underflow > 0,
       "tstats of the %zu values at and around every class boundary of every format: exact%s%s", m, same ? "" : ": ",
       why);
    /* a wrong threshold is caught: the table built without FP16's overflow row moved */
    ck_ranks keep = ranks;
    for (int e = 0; e < 512; e++)
        for (int j = 0; j < CK_IN_BINADE; j++)
            if (ranks.bin[e].t[j] == AMPDIAG_FP16_OVF_BITS)
                ranks.bin[e].t[j] += 1u;
    stats_as_gpu(x, m, &sg, hg);
    ok(!same_stats(&sg, &sc, x, m, why, sizeof why), "mutation: a binade table whose FP16 overflow threshold is one pattern "
       "off gives other counts (%s)", why);
    ranks = keep;
    float nonfinite[3] = {NAN, INFINITY, -INFINITY};
    stats_as_gpu(nonfinite, 3, &sg, hg);
    cpu->tstats(cpu, nonfinite, 3, &sc, hc);
    ok(same_stats(&sg, &sc, nonfinite, 3, why, sizeof why) && sg.absmin_nz == INFINITY && sg.max == -INFINITY,
       "tstats of only non-finite values: the empty extremes");
    free(x), free(hg), free(hc);
}

/* The scaled what-if counts as the device derives them (counts at least the thresholds, then
 * ck_scaled_classes) against ampdiag_whatif_scaled_n, for both FP8 formats at several scales. */
static void test_whatif_scaled(void)
{
    enum { N = 30011 };
    float *x = fbuf(N);
    fill_wide(x, N, 1);
    static const float scales[] = {1.0f, 0.0078125f, 3.7f, 1024.0f, 1e-3f};
    const ampdiag_format fmt[2] = {AMPDIAG_E4M3, AMPDIAG_E5M2};
    for (size_t si = 0; si < sizeof scales / sizeof scales[0]; si++) {
        float sc[2] = {scales[si], scales[si] * 2.0f};
        uint64_t want[2][AMPDIAG_WHATIF_NCLASSES], got[2][AMPDIAG_WHATIF_NCLASSES];
        int rc = ampdiag_whatif_scaled_n(2, fmt, sc, x, N, want);
        uint32_t ge[CK_MAX_GE], t[3];
        size_t k = 0;
        for (int f = 0; f < 2; f++) {
            rc |= ampdiag_scaled_thresholds(fmt[f], sc[f], t);
            ge[k++] = t[0];
            ge[k++] = t[1];
            ge[k++] = t[2] + 1u;
        }
        ge[k++] = 1u;
        ge[k++] = AMPDIAG_F32_INF;
        ck_ge c;
        memset(&c, 0, sizeof c);
        for (size_t i = 0; i < N; i++)
            ck_ge_add(&c, ge, ampdiag_f32_bits(x[i]));
        uint64_t g[CK_MAX_GE];
        for (int j = 0; j < CK_MAX_GE; j++)
            g[j] = c.n[j];
        for (int f = 0; f < 2; f++)
            ck_scaled_classes(g + 3 * f, g[k - 2], g[k - 1], got[f]);
        ok(rc == 0 && memcmp(want, got, sizeof want) == 0 && want[0][AMPDIAG_WHATIF_UNDERFLOW] + want[1][AMPDIAG_WHATIF_OVERFLOW] > 0,
           "whatif_scaled on the device's path, E4M3 at scale %g and E5M2 at %g: the CPU's counts", (double)sc[0],
           (double)sc[1]);
    }
    free(x);
}

/* ------------------------------------------------------------------------------- main */

int main(void)
{
    const backend *cpu = backend_cpu();
    for (size_t r = 0; r < NRND; r++) {
        test_axpy(cpu, &rnds[r]);
        test_unary(cpu, &rnds[r], 0);
        test_unary(cpu, &rnds[r], 1);
        test_bias(cpu, &rnds[r]);
        test_layernorm(cpu, &rnds[r]);
        test_attention(cpu, &rnds[r]);
        test_embedding(cpu, &rnds[r]);
        test_xent(cpu, &rnds[r]);
    }
    static const optim_case optims[] = {
        {BK_SGD, AMPDIAG_FP32, AMPDIAG_FP32, 0, "sgd fp32"},
        {BK_SGD, AMPDIAG_BF16, AMPDIAG_BF16, 0, "sgd bf16 state and weights"},
        {BK_ADAMW, AMPDIAG_FP32, AMPDIAG_FP32, 0, "adamw fp32"},
        {BK_ADAMW, AMPDIAG_FP16, AMPDIAG_FP32, 0, "adamw fp16 state"},
        {BK_ADAMW, AMPDIAG_BF16, AMPDIAG_BF16, 0, "adamw bf16 state and weights"},
        {BK_ADAMW, AMPDIAG_BF16, AMPDIAG_BF16, AMPDIAG_ROUND_FTZ, "adamw bf16 ftz"},
        {BK_ADAMW, AMPDIAG_FP16, AMPDIAG_FP32, AMPDIAG_ROUND_FTZ, "adamw fp16 state ftz"},
    };
    for (size_t i = 0; i < sizeof optims / sizeof optims[0]; i++) {
        test_optim(cpu, &optims[i]);
        test_lost(cpu, &optims[i]);
    }
    test_grad_norm(cpu);
    test_ranks();
    test_tstats(cpu);
    test_whatif_scaled();
    return done_testing();
}
