/*
 * bodies.h - the CUDA kernels' bodies: what one GPU thread computes for one element, one row or
 * one column, written once in plain C with numfmt.h's AMPDIAG_HD, so that the same code
 * compiles for the device (the kernels of kernels/, *.cuh, and the launches in src/backend/cuda/)
 * and for the host, where tests/t_cuda_kernels.c runs every body over whole tensors and compares
 * the results with the CPU backend (backend_cpu.c, optim_cpu.c) bit for bit.
 *
 * The bodies repeat the CPU backend's arithmetic expression by expression, in its order
 * (FP32, left to right, each FP32 reduction summed sequentially in the CPU's index order; the
 * CUDA files are compiled with -fmad=false so that no multiply-add is contracted, as the CPU
 * build, C11 mode, does not contract either). On the device the same expressions give the
 * same bits, exp included (GELU's tanh and the softmaxes call the CPU's own vexpf,
 * src/numerics/vmath.h: plain float arithmetic), except where they call logf (the
 * cross-entropy's loss): CUDA's is within 2 ulp of the exact value (CUDA C Programming Guide,
 * "Mathematical Functions"), glibc's nearly always correctly rounded, so a loss may differ in
 * its last bit. sqrtf and division are IEEE-exact on both (nvcc's defaults -prec-sqrt=true
 * -prec-div=true, no --use_fast_math).
 *
 * The double-precision reductions (sum, sum of squares, the gradient norm, the statistics'
 * sums) are not here: the device adds in a fixed tree order of its own (deterministic, but not
 * the CPU's order), so they agree with the CPU to rounding in double only.
 *
 * The host tests check the bodies, not the launches, the indexing of threads or the reductions
 * across threads: those are checked on a GPU by `ampdiag selftest --device cuda` and
 * tests/t_backend_ops (docs/cuda.md says where and when that last ran).
 *
 * This folder (kernels/) holds the device code: these bodies and the kernels that run them
 * (*.cuh); src/backend/cuda/ holds the backend's table and the host glue that launches them.
 * It uses numerics/ and the installed headers only (src/layering.txt).
 */
#ifndef AMPDIAG_KERNELS_BODIES_H
#define AMPDIAG_KERNELS_BODIES_H

#include "ampdiag.h"
#include "numerics/numfmt.h"
#include "numerics/vmath.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------------- rounding */

/* A rounding as one small integer (the CPU backend's rnd_kind). */
enum { CK_NONE = 0, CK_FP16 = 1, CK_FP16_FTZ = 2, CK_BF16 = 3, CK_BF16_FTZ = 4 };

AMPDIAG_HD int ck_rnd_kind(ampdiag_format fmt, unsigned flags)
{
    int ftz = (flags & AMPDIAG_ROUND_FTZ) != 0;
    if (fmt == AMPDIAG_FP16)
        return ftz ? CK_FP16_FTZ : CK_FP16;
    if (fmt == AMPDIAG_BF16)
        return ftz ? CK_BF16_FTZ : CK_BF16;
    return CK_NONE;
}

/* x rounded as the kind says (numfmt.h's exact rounding). */
AMPDIAG_HD float ck_rnd(int rk, float x)
{
    switch (rk) {
    case CK_FP16: return ampdiag_fp16_rne(x);
    case CK_FP16_FTZ: return ampdiag_fp16_rne_ftz(x);
    case CK_BF16: return ampdiag_bf16_rne(x);
    case CK_BF16_FTZ: return ampdiag_bf16_rne_ftz(x);
    default: return x;
    }
}

/* A gradient g into *dst: overwritten as rnd(g), or accumulated as rnd(*dst + rnd(g))
 * (backend.h's beta semantics; the old value is read only when accumulating). */
AMPDIAG_HD void ck_store(float *dst, float g, int acc, int rk)
{
    *dst = acc ? ck_rnd(rk, *dst + ck_rnd(rk, g)) : ck_rnd(rk, g);
}

/* ------------------------------------------------------------------------------- elementwise */

/* y[i] = rnd(beta*y[i] + rnd(a*x[i])); beta 0 overwrites (the old y is not read). */
AMPDIAG_HD void ck_axpy(float *y, float beta, float a, const float *x, size_t i, int rk)
{
    float g = a * x[i];
    if (beta == 0.0f) {
        y[i] = ck_rnd(rk, g);
        return;
    }
    float old = beta != 1.0f ? y[i] * beta : y[i];
    y[i] = ck_rnd(rk, old + ck_rnd(rk, g));
}

/* torch.relu: NaN stays NaN (NaN <= 0 is false). */
AMPDIAG_HD float ck_relu(float x) { return !(x <= 0.0f) ? x : 0.0f; }

/* threshold_backward: no gradient where the input is <= 0; a NaN input passes it through. */
AMPDIAG_HD float ck_relu_grad(float x, float d) { return !(x <= 0.0f) ? d : 0.0f; }

#define CK_GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
#define CK_GELU_C 0.044715f

/* tanh(u) = 1 - 2 / (exp(2u) + 1), as backend_cpu.c computes it (vmath.h). */
AMPDIAG_HD float ck_tanh(float u) { return vtanhf(u); }

/* GPT-2's GELU (tanh approximation), before rounding. */
AMPDIAG_HD float ck_gelu(float x)
{
    float cube = CK_GELU_C * x * x * x;
    return 0.5f * x * (1.0f + ck_tanh(CK_GELU_SCALE * (x + cube)));
}

/* Its gradient times d, before rounding. */
AMPDIAG_HD float ck_gelu_grad(float x, float d)
{
    float t = ck_tanh(CK_GELU_SCALE * (x + CK_GELU_C * x * x * x));
    float sech2 = 1.0f - t * t;
    float local = 0.5f * (1.0f + t) + x * 0.5f * sech2 * CK_GELU_SCALE * (1.0f + 3.0f * CK_GELU_C * x * x);
    return local * d;
}

/* ------------------------------------------------------------------------------- linear */

/* out[i] of [N,OC] = rnd(out[i] + bias[i % OC]); without a bias only the rounding. */
AMPDIAG_HD void ck_bias_add(float *out, const float *bias, size_t i, int OC, int rk)
{
    out[i] = ck_rnd(rk, bias ? out[i] + bias[i % (size_t)OC] : out[i]);
}

/* dbias[j] = rnd(sum over n of dout[n, j]), summed in n order from 0. */
AMPDIAG_HD void ck_bias_grad(float *dbias, const float *dout, int N, int OC, int j, int rk)
{
    float s = 0.0f;
    for (int n = 0; n < N; n++)
        s += dout[(size_t)n * (size_t)OC + (size_t)j];
    dbias[j] = ck_rnd(rk, s);
}

/* ------------------------------------------------------------------------------- layer norm */

#define CK_LN_EPS 1e-5f

/* Row n of [N,C]: mean and 1/std in FP32 (sequential sums), out rounded. */
AMPDIAG_HD void ck_layernorm_row(float *out, float *mean, float *rstd, const float *inp, const float *w,
                                 const float *b, int C, int n, int rk)
{
    const float *x = inp + (size_t)n * (size_t)C;
    float *o = out + (size_t)n * (size_t)C;
    float m = 0.0f;
    for (int i = 0; i < C; i++)
        m += x[i];
    m /= (float)C;
    float v = 0.0f;
    for (int i = 0; i < C; i++) {
        float d = x[i] - m;
        v += d * d;
    }
    v /= (float)C;
    float s = 1.0f / sqrtf(v + CK_LN_EPS);
    for (int i = 0; i < C; i++)
        o[i] = ck_rnd(rk, (x[i] - m) * s * w[i] + b[i]);
    mean[n] = m;
    rstd[n] = s;
}

/* Column i of the weight and bias gradients: sums over the rows in order, then rounded. */
AMPDIAG_HD void ck_layernorm_wgrad(float *dweight, float *dbias, const float *dout, const float *inp,
                                   const float *mean, const float *rstd, int N, int C, int i, int rk)
{
    float dw = 0.0f, db = 0.0f;
    for (int n = 0; n < N; n++) {
        size_t k = (size_t)n * (size_t)C + (size_t)i;
        db += dout[k];
        dw += (inp[k] - mean[n]) * rstd[n] * dout[k];
    }
    dweight[i] = ck_rnd(rk, dw);
    dbias[i] = ck_rnd(rk, db);
}

/* Row n of the input gradient (llm.c's formula), overwritten or accumulated. */
AMPDIAG_HD void ck_layernorm_dx_row(float *dinp, const float *dout, const float *inp, const float *w,
                                    const float *mean, const float *rstd, int C, int n, int acc, int rk)
{
    size_t base = (size_t)n * (size_t)C;
    const float *x = inp + base, *d = dout + base;
    float *dx = dinp + base;
    float m = mean[n], s = rstd[n];
    float dmean = 0.0f, dnorm_mean = 0.0f;
    for (int i = 0; i < C; i++) {
        float norm = (x[i] - m) * s;
        float dn = w[i] * d[i];
        dmean += dn;
        dnorm_mean += dn * norm;
    }
    dmean /= (float)C;
    dnorm_mean /= (float)C;
    for (int i = 0; i < C; i++) {
        float norm = (x[i] - m) * s;
        ck_store(&dx[i], (w[i] * d[i] - dmean - norm * dnorm_mean) * s, acc, rk);
    }
}

/* ------------------------------------------------------------------------------- attention */

/* Row r of the causal softmax over [rows, T] scores (t = r % T keeps j <= t): the scores are
 * read rounded (the GEMM's output held in rk), att gets the FP32 probabilities, att_r their
 * rounded copies, masked entries 0. */
AMPDIAG_HD void ck_softmax_row(float *att, float *att_r, int T, size_t r, int rk)
{
    int t = (int)(r % (size_t)T);
    float *p = att + r * (size_t)T, *pr = att_r + r * (size_t)T;
    float mx = -INFINITY;
    for (int j = 0; j <= t; j++) {
        float v = ck_rnd(rk, p[j]);
        mx = v > mx ? v : mx;
    }
    float sum = 0.0f;
    for (int j = 0; j <= t; j++) {
        p[j] = vexpf(ck_rnd(rk, p[j]) - mx);
        sum += p[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j <= t; j++) {
        p[j] *= inv;
        pr[j] = ck_rnd(rk, p[j]);
    }
    for (int j = t + 1; j < T; j++)
        p[j] = pr[j] = 0.0f;
}

/* Row r of the softmax's backward in place: dP (the GEMM's output, read rounded) becomes
 * dS = rnd(P * (dP - sum_j P_j dP_j)) over the causal part, 0 elsewhere. */
AMPDIAG_HD void ck_softmax_bwd_row(float *dp, const float *att, int T, size_t r, int rk)
{
    int t = (int)(r % (size_t)T);
    float *d = dp + r * (size_t)T;
    const float *pp = att + r * (size_t)T;
    float dot = 0.0f;
    for (int j = 0; j <= t; j++)
        dot += pp[j] * ck_rnd(rk, d[j]);
    for (int j = 0; j <= t; j++)
        d[j] = ck_rnd(rk, pp[j] * (ck_rnd(rk, d[j]) - dot));
    for (int j = t + 1; j < T; j++)
        d[j] = 0.0f;
}

/* ------------------------------------------------------------------------------- embedding */

/* out[i] of [B,T,C] = rnd(wte[tokens[b,t]] + wpe[t]). */
AMPDIAG_HD void ck_embed(float *out, const int32_t *tokens, const float *wte, const float *wpe, int T, int C,
                         size_t i, int rk)
{
    size_t bt = i / (size_t)C, c = i % (size_t)C, t = bt % (size_t)T;
    out[i] = ck_rnd(rk, wte[(size_t)tokens[bt] * (size_t)C + c] + wpe[t * (size_t)C + c]);
}

/* dwpe[t, c] = rnd(sum over b of dout[b, t, c]), in b order. */
AMPDIAG_HD void ck_embed_dwpe(float *dwpe, const float *dout, int B, int T, int C, size_t i, int rk)
{
    size_t t = i / (size_t)C, c = i % (size_t)C;
    float s = 0.0f;
    for (int b = 0; b < B; b++)
        s += dout[((size_t)b * (size_t)T + t) * (size_t)C + c];
    dwpe[i] = ck_rnd(rk, s);
}

/* Column c of one token's row of dwte: keys[k0..) are the tokens sorted stably (so each
 * token's positions pos[] are in (b, t) order, as the CPU's scatter-add visits them); k0
 * starts the token's run of n entries in all. */
AMPDIAG_HD void ck_embed_dwte(float *dwte, const float *dout, const int32_t *keys, const int32_t *pos, size_t k0,
                              size_t n, int C, int c, int rk)
{
    int32_t v = keys[k0];
    float s = 0.0f;
    for (size_t k = k0; k < n && keys[k] == v; k++)
        s += dout[(size_t)pos[k] * (size_t)C + (size_t)c];
    dwte[(size_t)v * (size_t)C + (size_t)c] = ck_rnd(rk, s);
}

/* ------------------------------------------------------------------------------- cross-entropy */

/* Row n: probs = softmax(logits) in FP32, losses[n] = -log p[target]. */
AMPDIAG_HD void ck_xent_row(float *losses, float *probs, const float *logits, const int32_t *targets, int V, int n)
{
    const float *l = logits + (size_t)n * (size_t)V;
    float *p = probs + (size_t)n * (size_t)V;
    float mx = -INFINITY;
    for (int i = 0; i < V; i++)
        mx = l[i] > mx ? l[i] : mx;
    float sum = 0.0f;
    for (int i = 0; i < V; i++) {
        p[i] = vexpf(l[i] - mx);
        sum += p[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < V; i++)
        p[i] *= inv;
    losses[n] = logf(sum) + mx - l[targets[n]];
}

/* dlogits[i] of [N,V] = rnd((probs - onehot(target)) * dscale). */
AMPDIAG_HD void ck_xent_grad(float *dlogits, const float *probs, const int32_t *targets, int V, float dscale,
                             size_t i, int rk)
{
    size_t n = i / (size_t)V;
    int j = (int)(i % (size_t)V);
    dlogits[i] = ck_rnd(rk, (probs[i] - (j == targets[n] ? 1.0f : 0.0f)) * dscale);
}

/* ------------------------------------------------------------------------------- optimizer */

/* One optimizer step's scalars, computed once on the host (ck_optim_setup, as optim_cpu.c
 * computes them). */
typedef struct ck_optim {
    int adamw;            /* 0: SGD */
    int srk, wrk;         /* rounding of the state and of the stored weights */
    int state_fp32;       /* AdamW's FP32-state formula (torch's foreach path) */
    int first;            /* SGD: the first step (no momentum yet) */
    float lr;             /* as a float */
    float mom, wd;        /* SGD's momentum and weight decay */
    float b1, b2, omb1, omb2, bc1, bc2, sqrt_bc2, step, lrwd, eps; /* AdamW */
} ck_optim;

/* The intended change of parameter i (optim_cpu.c's compute_dw), updating the state m, v. */
AMPDIAG_HD float ck_optim_dw(const ck_optim *k, float w, float g, float *m, float *v, float ginv, float gscale)
{
    int s = k->srk;
    if (!k->adamw) {
        float gi = (g * ginv) * gscale + k->wd * w;
        float b = k->first ? gi : ck_rnd(s, k->mom * *m + gi);
        *m = ck_rnd(s, b);
        return -k->lr * *m;
    }
    if (k->state_fp32) {
        float gi = (g * ginv) * gscale;
        *m = *m + k->omb1 * (gi - *m);
        *v = k->b2 * *v + k->omb2 * gi * gi;
        float denom = sqrtf(*v) / k->sqrt_bc2 + k->eps;
        return k->step * (*m / denom) - k->lrwd * w;
    }
    float gi = ck_rnd(s, (g * ginv) * gscale);
    *m = ck_rnd(s, ck_rnd(s, k->b1 * *m) + ck_rnd(s, k->omb1 * gi));
    *v = ck_rnd(s, ck_rnd(s, k->b2 * *v) + ck_rnd(s, k->omb2 * ck_rnd(s, gi * gi)));
    float mhat = ck_rnd(s, *m / k->bc1);
    float vhat = ck_rnd(s, *v / k->bc2);
    float denom = ck_rnd(s, ck_rnd(s, sqrtf(vhat)) + k->eps);
    return ck_rnd(s, -k->lr * ck_rnd(s, mhat / denom)) - k->lrwd * w;
}

/* Parameter i's update: w[i] = rnd_w(w[i] + dw), keeping dw and the old weight when asked. */
AMPDIAG_HD void ck_optim_step(const ck_optim *k, float *w, const float *g, float *m, float *v, size_t i, float ginv,
                              float gscale, float *dw_keep, float *w_keep)
{
    float zero = 0.0f;
    float old = w[i];
    float dw = ck_optim_dw(k, old, g[i], &m[i], v ? &v[i] : &zero, ginv, gscale);
    if (dw_keep)
        dw_keep[i] = dw;
    if (w_keep)
        w_keep[i] = old;
    w[i] = ck_rnd(k->wrk, old + dw);
}

/* Was the change d to weight w lost: as stored (rounded with wrk, or not), and if the weights
 * were FP16 / BF16 (fl(fl(w) + d) == fl(w))? Adds 1 to cnt[0], cnt[1], cnt[2] for each. */
AMPDIAG_HD void ck_lost(float w, float d, int wrk, int ftz, unsigned long long cnt[3])
{
    if (!(d != 0.0f))
        return;
    cnt[0] += ck_rnd(wrk, w + d) == w;
    int h = ftz ? CK_FP16_FTZ : CK_FP16, b = ftz ? CK_BF16_FTZ : CK_BF16;
    float wh = ck_rnd(h, w), wb = ck_rnd(b, w);
    cnt[1] += ck_rnd(h, wh + d) == wh;
    cnt[2] += ck_rnd(b, wb + d) == wb;
}

/* The gradient norm's part of one value g (held scaled): non-finite values are counted, the
 * unscaled finite ones squared into *ss (inf when unscaling overflows). */
AMPDIAG_HD void ck_grad_norm_add(double *ss, unsigned long long *nonfinite, float g, float inv_scale)
{
    if ((ampdiag_f32_bits(g) & 0x7fffffffu) < AMPDIAG_F32_INF) {
        float x = g * inv_scale;
        *ss += (double)x * x;
    } else {
        (*nonfinite)++;
    }
}

/* ------------------------------------------------------------------------------- statistics
 *
 * Every count of a statistics record (NaN, inf, zeros, negatives and each format's overflow,
 * underflow and subnormal what-if classes) is a difference of counts #(|x| >= t), of all values
 * or of the negative ones, over a few |x| bit patterns t: the classes of numfmt.h's
 * AMPDIAG_CLASS_BITS_TABLE are ranges of |x|. So the kernel counts, for each value, its rank:
 * how many of the distinct thresholds (sorted, ck_ranks.th) its |x| reaches, offset by the
 * number of ranks for a negative value, one counter a rank, and every count of the record
 * follows from the ranks' counts (ck_part_record). The rank is found from the sign and exponent
 * bits (u >> 23): a table of 512 binades gives the rank at the binade's start and the (at most
 * CK_IN_BINADE) thresholds inside it, so a value costs one table read and three compares
 * whatever the number of formats, where comparing it with every threshold would cost two
 * instructions per threshold.
 */

/* 16-byte aligned, so that a device reads a ck_binade with one 16-byte load */
#define AMPDIAG_ALIGN16 __attribute__((aligned(16)))

enum { CK_MAX_THRESH = 24, CK_NRANKS = 2 * (CK_MAX_THRESH + 1), CK_IN_BINADE = 3 };
#define CK_NO_THRESH 0x80000000u /* above every |x| pattern: a compare with it is false */

/* One binade of float32 with its sign (u >> 23: |x| patterns [e << 23, (e + 1) << 23) of one
 * sign): the rank of its first pattern (negative binades offset by k + 1) and the thresholds
 * inside it (CK_NO_THRESH where fewer). 16 bytes, read as one. */
typedef struct AMPDIAG_ALIGN16 ck_binade {
    uint32_t r;
    uint32_t t[CK_IN_BINADE];
} ck_binade;

/* The thresholds, ascending, and the binade table. */
typedef struct ck_ranks {
    int k;                        /* distinct thresholds: ranks 0..k, negative ones k+1..2k+1 */
    uint32_t th[CK_MAX_THRESH];
    ck_binade bin[512];
} ck_ranks;

/* The rank of |x| pattern a in its binade's entry b: a < t is the sign of a - t (both below
 * 2^31 + 1), two instructions a threshold where a compare and a conditional add take three. */
AMPDIAG_HD unsigned ck_rank_in(ck_binade b, uint32_t a)
{
    return b.r + 3u - ((a - b.t[0]) >> 31) - ((a - b.t[1]) >> 31) - ((a - b.t[2]) >> 31);
}

/* The rank of a bit pattern u: #{j : |u| >= th[j]}, plus k + 1 when u is negative. */
AMPDIAG_HD unsigned ck_rank(const ck_binade *tab, uint32_t u)
{
    return ck_rank_in(tab[u >> 23], u & 0x7fffffffu);
}

/* The statistics of some values as a block of the kernel keeps them: how many have each rank,
 * the extremes as order-preserving integer keys, sums in double. */
typedef struct ck_part {
    unsigned long long rank[CK_NRANKS];
    int32_t kmin, kmax; /* over finite values; INT32_MAX / INT32_MIN when none */
    int32_t amax, amin; /* |x| bits over finite / finite non-zero; 0 / INT32_MAX when none */
    double sum, sq;
} ck_part;

AMPDIAG_HD void ck_part_init(ck_part *p)
{
    for (int r = 0; r < CK_NRANKS; r++)
        p->rank[r] = 0;
    p->kmin = INT32_MAX;
    p->kmax = INT32_MIN;
    p->amax = 0;
    p->amin = INT32_MAX;
    p->sum = p->sq = 0.0;
}

/* float32 bits as a signed key that orders like the values (-0 below +0). */
AMPDIAG_HD int32_t ck_key(uint32_t u) { return (int32_t)u ^ (((int32_t)u >> 31) & 0x7fffffff); }
AMPDIAG_HD float ck_key_value(int32_t key)
{
    return ampdiag_f32_from_bits((uint32_t)(key ^ ((key >> 31) & 0x7fffffff)));
}

/* What one value adds besides its rank: the extremes and the sums. */
AMPDIAG_HD void ck_part_add_rest(ck_part *p, uint32_t u)
{
    uint32_t a = u & 0x7fffffffu;
    if (a < AMPDIAG_F32_INF) {
        int32_t sa = (int32_t)a, key = ck_key(u);
        double v = (double)ampdiag_f32_from_bits(u);
        p->kmin = key < p->kmin ? key : p->kmin;
        p->kmax = key > p->kmax ? key : p->kmax;
        p->amax = sa > p->amax ? sa : p->amax;
        if (a != 0 && sa < p->amin)
            p->amin = sa;
        p->sum += v;
        p->sq += v * v;
    }
}

/* One value into p (what the kernel does for each value, with its rank counter in shared
 * memory). */
AMPDIAG_HD void ck_part_add(ck_part *p, const ck_binade *tab, uint32_t u)
{
    p->rank[ck_rank(tab, u)]++;
    ck_part_add_rest(p, u);
}

/* d := d merged with s (counts added, extremes combined, sums added). */
AMPDIAG_HD void ck_part_merge(ck_part *d, const ck_part *s)
{
    for (int r = 0; r < CK_NRANKS; r++)
        d->rank[r] += s->rank[r];
    d->kmin = s->kmin < d->kmin ? s->kmin : d->kmin;
    d->kmax = s->kmax > d->kmax ? s->kmax : d->kmax;
    d->amax = s->amax > d->amax ? s->amax : d->amax;
    d->amin = s->amin < d->amin ? s->amin : d->amin;
    d->sum += s->sum;
    d->sq += s->sq;
}

/* The histogram bin of a bit pattern (ampdiag_hist_bin_of). */
AMPDIAG_HD int ck_hist_bin(uint32_t u)
{
    uint32_t a = u & 0x7fffffffu;
    if (a > AMPDIAG_F32_INF)
        return AMPDIAG_HIST_NAN;
    if (a == AMPDIAG_F32_INF)
        return (u >> 31) ? AMPDIAG_HIST_NEGINF : AMPDIAG_HIST_POSINF;
    if (a == 0)
        return AMPDIAG_HIST_ZERO;
    if (a < AMPDIAG_F32_MIN_NORMAL) {
        int msb = 31;
        while (!(a >> msb))
            msb--;
        return AMPDIAG_HIST_BIN(-149 + msb);
    }
    return AMPDIAG_HIST_BIN((int)(a >> 23) - 127);
}

/* ---------------------------------------------------------------- host side of the ranks */

/* t := the thresholds every count needs, ascending and distinct: 1 (non-zero), +inf and the
 * first NaN pattern, and for each format of AMPDIAG_CLASS_BITS_TABLE its overflow and normal
 * thresholds and the first pattern above its underflow threshold; then the binade table of
 * both signs. 0, or -1 when the formats need more thresholds than CK_MAX_THRESH or more than
 * CK_IN_BINADE inside one binade (a format added to the table that this layout cannot hold).
 * Host only. */
static inline int ck_ranks_build(ck_ranks *t)
{
    static const uint32_t cls[AMPDIAG_CLASS_NFORMATS][3] = AMPDIAG_CLASS_BITS_TABLE;
    uint32_t all[3 + 3 * AMPDIAG_CLASS_NFORMATS];
    int m = 0;
    all[m++] = 1u;
    all[m++] = AMPDIAG_F32_INF;
    all[m++] = AMPDIAG_F32_INF + 1u;
    for (int f = 0; f < AMPDIAG_CLASS_NFORMATS; f++) {
        all[m++] = cls[f][0];
        all[m++] = cls[f][1];
        all[m++] = cls[f][2] + 1u;
    }
    t->k = 0;
    for (;;) { /* selection of the next larger distinct value */
        uint32_t best = CK_NO_THRESH;
        uint32_t last = t->k ? t->th[t->k - 1] : 0u;
        for (int i = 0; i < m; i++)
            if (all[i] > last && all[i] < best)
                best = all[i];
        if (best == CK_NO_THRESH)
            break;
        if (t->k == CK_MAX_THRESH)
            return -1;
        t->th[t->k++] = best;
    }
    for (uint32_t e = 0; e < 256; e++) {
        uint32_t lo = e << 23, hi = lo + (1u << 23); /* (e = 255: hi wraps to 0x80000000) */
        ck_binade *b = &t->bin[e];
        b->r = 0;
        int in = 0;
        for (int j = 0; j < CK_IN_BINADE; j++)
            b->t[j] = CK_NO_THRESH;
        for (int j = 0; j < t->k; j++) {
            if (t->th[j] <= lo)
                b->r++;
            else if (t->th[j] < hi) {
                if (in == CK_IN_BINADE)
                    return -1;
                b->t[in++] = t->th[j];
            }
        }
        t->bin[256 + e] = *b; /* the negative binade: the same thresholds, ranks after the positive */
        t->bin[256 + e].r += (uint32_t)t->k + 1u;
    }
    return 0;
}

/* #(|x| >= th) from the rank counts, for a threshold th of t->th: of every value, or (neg) of
 * the negative ones. */
static inline uint64_t ck_at_least(const ck_ranks *t, const ck_part *p, uint32_t th, int neg)
{
    uint64_t c = 0;
    int off = t->k + 1;
    for (int j = 0; j < t->k; j++)
        if (t->th[j] == th) {
            for (int r = j + 1; r <= t->k; r++)
                c += p->rank[off + r] + (neg ? 0 : p->rank[r]);
            return c;
        }
    return 0; /* (not a threshold of t: ck_ranks_build puts every one the record needs there) */
}

/* The record of n values whose statistics are p. Host only. */
static inline void ck_part_record(const ck_ranks *t, const ck_part *p, uint64_t n, ampdiag_tstats *s)
{
    static const uint32_t cls[AMPDIAG_CLASS_NFORMATS][3] = AMPDIAG_CLASS_BITS_TABLE;
    uint64_t nz = ck_at_least(t, p, 1u, 0), inf_up = ck_at_least(t, p, AMPDIAG_F32_INF, 0),
             nan = ck_at_least(t, p, AMPDIAG_F32_INF + 1u, 0);
    uint64_t neg_nz = ck_at_least(t, p, 1u, 1), neg_inf_up = ck_at_least(t, p, AMPDIAG_F32_INF, 1),
             neg_nan = ck_at_least(t, p, AMPDIAG_F32_INF + 1u, 1);
    uint64_t nonfinite = inf_up;
    s->count = n;
    s->n_nan = nan;
    s->n_neginf = neg_inf_up - neg_nan;
    s->n_posinf = inf_up - nan - s->n_neginf;
    s->n_zero = n - nz;
    s->n_neg = neg_nz - neg_inf_up;
    s->n_pos = n - nonfinite - s->n_zero - s->n_neg;
    for (int f = 0; f < AMPDIAG_CLASS_NFORMATS; f++) {
        uint64_t ovf = ck_at_least(t, p, cls[f][0], 0), norm = ck_at_least(t, p, cls[f][1], 0),
                 above_unf = ck_at_least(t, p, cls[f][2] + 1u, 0);
        s->whatif[f][AMPDIAG_WHATIF_OVERFLOW] = ovf - inf_up;      /* finite |x| >= overflow */
        s->whatif[f][AMPDIAG_WHATIF_UNDERFLOW] = nz - above_unf;   /* 0 < |x| <= underflow */
        s->whatif[f][AMPDIAG_WHATIF_SUBNORMAL] = above_unf - norm; /* underflow < |x| < normal */
    }
    s->sum = p->sum;
    s->sumsq = p->sq;
    int any = nonfinite < n;
    s->min = any ? ck_key_value(p->kmin) : INFINITY;
    s->max = any ? ck_key_value(p->kmax) : -INFINITY;
    s->absmax = any ? ampdiag_f32_from_bits((uint32_t)p->amax) : -INFINITY;
    s->absmin_nz = p->amin != INT32_MAX ? ampdiag_f32_from_bits((uint32_t)p->amin) : INFINITY;
}

/* ---------------------------------------------------------------- counts at least
 * The pass behind the scaled what-if counts (backend.h's count_at_least and whatif_scaled): how
 * many |x| patterns reach each of up to CK_MAX_GE thresholds. */
enum { CK_MAX_GE = 8 };
typedef struct ck_ge {
    unsigned long long n[CK_MAX_GE];
} ck_ge;

AMPDIAG_HD void ck_ge_add(ck_ge *c, const uint32_t *ge, uint32_t u)
{
    uint32_t a = u & 0x7fffffffu;
    for (int j = 0; j < CK_MAX_GE; j++) /* (unused thresholds are CK_NO_THRESH) */
        c->n[j] += a >= ge[j];
}

/* The classes of a format under a scale from the counts at least its scaled thresholds
 * (ampdiag_scaled_thresholds: t0 overflow, t1 normal, t2 underflow; every one in (0, inf]) as
 * ampdiag_whatif_scaled derives them: g = {#>=t0, #>=t1, #>=t2+1}, nz = #>=1, nonfinite =
 * #>=inf; overflow = #(t0 <= a < inf), underflow = #(0 < a <= t2), subnormal = #(t2 < a < t1).
 * Host only. */
static inline void ck_scaled_classes(const uint64_t g[3], uint64_t nz, uint64_t nonfinite,
                                     uint64_t c[AMPDIAG_WHATIF_NCLASSES])
{
    c[AMPDIAG_WHATIF_OVERFLOW] = g[0] - nonfinite;
    c[AMPDIAG_WHATIF_UNDERFLOW] = nz - g[2];
    c[AMPDIAG_WHATIF_SUBNORMAL] = g[2] > g[1] ? g[2] - g[1] : 0;
}

#endif /* AMPDIAG_KERNELS_BODIES_H */
