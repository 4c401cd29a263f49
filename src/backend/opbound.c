/*
 * opbound.c - per-output allowances for comparing backends whose sums run in other orders
 * (opbound.h says what each bound covers and where it comes from).
 *
 * The attention's bounds are interval arithmetic in double: an interval that holds what either
 * backend may hold at each stage (its float32 sum within gamma_n sum|term| of the exact sum; its
 * rounding to the run's format, monotone, maps an interval to the interval of the rounded
 * ends; the softmax within a relative (t + 16) u of the exact softmax of its inputs, whose
 * extremes over a box of inputs are known: p_j grows with x_j and falls with every other x_k;
 * the float32 softmax of backend.h within a relative (t + 16 + |x_j - max|) u of it, plus the
 * exponentials below float32's normals that vexpf may flush).
 * The allowance of an output is the width of its final interval: 0 where both ends round to the
 * same value (then both backends must agree bit for bit). Every widening adds a margin for the
 * double arithmetic of the bound itself.
 *
 * Conventions of the attention (backend.h): qkv [B,T,3C] with head h's q, k, v at columns
 * h hs, C + h hs, 2C + h hs of each row; out [B,T,C]; att, att_r [B,NH,T,T], row t of head h
 * holding the causal part j <= t and zeros past it. A device may compute the masked scores and
 * the products with the masked zeros too (cuBLAS multiplies whole matrices), so a NaN or inf
 * anywhere in a column of V, K, Q or dY that such a product reads makes the outputs that sum
 * over it unbounded: 0 * inf is NaN in one backend and never computed in the other.
 */
#include "backend/opbound.h"

#include "numerics/numfmt.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define U 0x1p-24     /* float32's unit roundoff */
#define TINY 0x1p-124 /* what products and exponentials lost to float32's subnormals may add */

double opbound_gamma(int n)
{
    double g = (double)n * U;
    return g / (1.0 - g);
}

double opbound_spacing(bk_rnd r, double x)
{
    static const int mant[3] = {23, 10, 7}, emin[3] = {-126, -14, -126};
    if (r.fmt == AMPDIAG_FP32)
        return 0.0;
    int e = x > 0.0 ? ilogb(x) : emin[r.fmt];
    if ((r.flags & AMPDIAG_ROUND_FTZ) && e <= emin[r.fmt])
        return ldexp(1.0, emin[r.fmt]);
    return ldexp(1.0, (e < emin[r.fmt] ? emin[r.fmt] : e) - mant[r.fmt]);
}

double opbound_max(bk_rnd r)
{
    uint32_t u = r.fmt == AMPDIAG_FP16 ? AMPDIAG_FP16_OVF_BITS : AMPDIAG_BF16_OVF_BITS;
    float f;
    memcpy(&f, &u, sizeof f);
    return r.fmt == AMPDIAG_FP32 ? FLT_MAX : (double)f;
}

/* ---------------------------------------------------------------- intervals */

typedef struct iv {
    double lo, hi;
} iv;

/* A value computed in double from float32 data is within this of the exact one (the bound's
 * own arithmetic: sums of at most a few thousand terms). */
static double margin(double mag) { return mag * 0x1p-40 + 0x1p-300; }

static iv iv_widen(iv a, double e)
{
    double m = e + margin(fmax(fabs(a.lo), fabs(a.hi)));
    a.lo -= m;
    a.hi += m;
    return a;
}

static double iv_mag(iv a) { return fmax(fabs(a.lo), fabs(a.hi)); }

/* x as float32, then held in format r (FP32: the float32 alone). */
static double rnd_to(bk_rnd r, double x)
{
    float f = (float)x;
    if (r.fmt == AMPDIAG_FP32 || !isfinite(f))
        return f;
    return (r.flags & AMPDIAG_ROUND_FTZ) ? ampdiag_round_ftz(r.fmt, f) : ampdiag_round(r.fmt, f);
}

/* Every value of a rounded to r: the interval of its rounded ends (rounding is monotone). */
static iv iv_round(bk_rnd r, iv a) { return (iv){rnd_to(r, a.lo), rnd_to(r, a.hi)}; }

/* The allowance of an output whose value before rounding lies in a: the width of the rounded
 * interval, INFINITY where an end overflows (one backend may overflow and the other not). */
static double allowance(bk_rnd r, iv a)
{
    iv o = iv_round(r, a);
    return isfinite(o.lo) && isfinite(o.hi) ? o.hi - o.lo : INFINITY;
}

/* A float32 sum of terms each in [lo_k, hi_k] (in any order): the interval of the exact sums
 * widened by gamma_(n+2) sum max|term| and a subnormal loss a term; lo, hi, mag the sums of the
 * terms' ends and magnitudes. INFINITY wide where a partial sum may reach FLT_MAX. */
static iv sum_iv(double lo, double hi, double mag, int n)
{
    double g = opbound_gamma(n + 2);
    if (mag * (1.0 + 2.0 * g) >= FLT_MAX)
        return (iv){-INFINITY, INFINITY};
    return iv_widen((iv){lo, hi}, g * mag + (n + 2) * 0x1p-149);
}

/* The shape of one head's data. */
typedef struct head {
    int T, hs, C, C3;
    const float *q, *k, *v; /* row t at + t C3 */
    size_t arow;            /* att's offset of the head */
    size_t orow;            /* out's (and dout's) offset of row 0 */
    double scale;           /* 1 / sqrt(hs) as the backends hold it, in float32 */
} head;

static head head_of(int b, int h, int T, int C, int NH, const float *qkv)
{
    head H;
    H.T = T;
    H.hs = C / NH;
    H.C = C;
    H.C3 = 3 * C;
    H.q = qkv + (size_t)b * (size_t)T * (size_t)H.C3 + (size_t)h * (size_t)H.hs;
    H.k = H.q + C;
    H.v = H.q + 2 * C;
    H.arow = ((size_t)b * (size_t)NH + (size_t)h) * (size_t)T * (size_t)T;
    H.orow = (size_t)b * (size_t)T * (size_t)C + (size_t)h * (size_t)H.hs;
    H.scale = (double)(1.0f / sqrtf((float)H.hs));
    return H;
}

/* The float32 dot product of x and y (n terms, strides sx, sy) times alpha, as a sum in any
 * order then one float32 multiplication (alpha may also be inside the sum: the extra rounding is
 * in gamma_(n+2)); a NaN or inf term gives NaN ends. */
static iv dot_iv(const float *x, size_t sx, const float *y, size_t sy, int n, double alpha)
{
    double ex = 0.0, mag = 0.0;
    for (int d = 0; d < n; d++) {
        double t = (double)x[(size_t)d * sx] * (double)y[(size_t)d * sy];
        if (!isfinite(t) || fabs(t) > FLT_MAX)
            return (iv){NAN, NAN};
        ex += t;
        mag += fabs(t);
    }
    return sum_iv(alpha * ex, alpha * ex, fabs(alpha) * mag, n);
}

static int iv_bad(iv a) { return !(isfinite(a.lo) && isfinite(a.hi)); }

/* Whether column d of rows 0..T-1 (stride ld) holds a value that is not finite. */
static int column_nonfinite(const float *x, int T, size_t ld, int d)
{
    for (int t = 0; t < T; t++)
        if (!isfinite(x[(size_t)t * ld + (size_t)d]))
            return 1;
    return 0;
}

/* ---------------------------------------------------------------- forward */

/* The exact softmax of row x[0..t] at j, with x_j at xj and every other x_k at xo[k]. */
static double softmax_at(const double *xo, int t, int j, double xj)
{
    double mx = xj;
    for (int k = 0; k <= t; k++)
        if (k != j && xo[k] > mx)
            mx = xo[k];
    double z = 0.0;
    for (int k = 0; k <= t; k++)
        z += exp((k == j ? xj : xo[k]) - mx);
    return exp(xj - mx) / z;
}

/* Row t of one head: 1 when a score may overflow or holds a NaN or inf term (the row is
 * unbounded); else, for j <= t, what either backend's att_r may hold (P[j]) and the allowances
 * of att and att_r. xl, xh: scratch [T]. */
static int fwd_row(const head *H, int t, bk_rnd r, double *xl, double *xh, iv *P, double *a_att, double *a_att_r)
{
    for (int j = 0; j <= t; j++) {
        iv s = dot_iv(H->q + (size_t)t * H->C3, 1, H->k + (size_t)j * H->C3, 1, H->hs, H->scale);
        if (iv_bad(s))
            return 1;
        iv x = iv_round(r, s); /* the rounded scores the softmax reads */
        if (iv_bad(x))
            return 1;
        xl[j] = x.lo;
        xh[j] = x.hi;
    }
    double mh = -INFINITY;
    for (int j = 0; j <= t; j++)
        mh = xh[j] > mh ? xh[j] : mh;
    for (int j = 0; j <= t; j++) {
        /* each side: exp within 1 ulp of exp of x_j - max, whose float32 subtraction is off by
         * up to u |x_j - max|; t + 1 terms summed; the reciprocal and the product */
        double c = (t + 16 + (mh - xl[j])) * U;
        iv p = {softmax_at(xh, t, j, xl[j]), softmax_at(xl, t, j, xh[j])};
        p.lo = p.lo * (1.0 - c) - TINY;
        p.hi = p.hi * (1.0 + c) + TINY;
        p = iv_widen(p, 0.0);
        if (p.lo < 0.0)
            p.lo = 0.0;
        a_att[j] = p.hi - p.lo;
        P[j] = iv_round(r, p);
        a_att_r[j] = P[j].hi - P[j].lo;
    }
    return 0;
}

/* out[t, d] = sum_j att_r[t, j] v[j, d] of one head, then rounded. */
static double fwd_out(const head *H, int t, int d, bk_rnd r, const iv *P)
{
    double lo = 0.0, hi = 0.0, mag = 0.0;
    for (int j = 0; j <= t; j++) {
        double v = (double)H->v[(size_t)j * H->C3 + (size_t)d];
        double a = P[j].lo * v, b = P[j].hi * v;
        lo += fmin(a, b);
        hi += fmax(a, b);
        mag += iv_mag(P[j]) * fabs(v);
    }
    return allowance(r, sum_iv(lo, hi, mag, H->T));
}

void opbound_attention_fwd(int B, int T, int C, int NH, bk_rnd r, const float *qkv, double *a_out,
                           double *a_att, double *a_att_r)
{
    double *xl = malloc((size_t)T * sizeof *xl), *xh = malloc((size_t)T * sizeof *xh);
    iv *P = malloc((size_t)T * sizeof *P);
    int nomem = !xl || !xh || !P;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            head H = head_of(b, h, T, C, NH, qkv);
            for (int t = 0; t < T; t++) {
                double *aa = a_att + H.arow + (size_t)t * (size_t)T, *ar = a_att_r + H.arow + (size_t)t * (size_t)T;
                int unb = nomem || fwd_row(&H, t, r, xl, xh, P, aa, ar);
                for (int j = unb ? 0 : t + 1; j < T; j++) /* masked: 0 on both sides */
                    aa[j] = ar[j] = j <= t ? INFINITY : 0.0;
                for (int d = 0; d < H.hs; d++)
                    a_out[H.orow + (size_t)t * (size_t)C + (size_t)d] =
                        unb || column_nonfinite(H.v, T, (size_t)H.C3, d) ? INFINITY : fwd_out(&H, t, d, r, P);
            }
        }
    free(xl), free(xh), free(P);
}

/* ---------------------------------------------------------------- backward */

/* Row t of one head's dS = rnd(P (rnd(dP) - dot)), dot = sum_j P_j rnd(dP_j): what either
 * backend may hold, into S[j] (j <= t; [0, 0] past it); 1 when the row is unbounded. x: [T]. */
static int bwd_row(const head *H, int t, bk_rnd r, const float *dy, const float *P, iv *x, iv *S)
{
    double dl = 0.0, dh = 0.0, mag = 0.0;
    for (int j = 0; j <= t; j++) {
        iv s = dot_iv(dy + (size_t)t * H->C, 1, H->v + (size_t)j * H->C3, 1, H->hs, 1.0);
        if (iv_bad(s))
            return 1;
        x[j] = iv_round(r, s);
        if (iv_bad(x[j]))
            return 1;
        double p = (double)P[j]; /* (a softmax: not negative) */
        dl += p * x[j].lo;
        dh += p * x[j].hi;
        mag += p * iv_mag(x[j]);
    }
    iv dot = sum_iv(dl, dh, mag, t + 1);
    if (iv_bad(dot))
        return 1;
    for (int j = 0; j <= t; j++) {
        double p = (double)P[j];
        iv in = {x[j].lo - dot.hi, x[j].hi - dot.lo};
        in = iv_widen(in, U * iv_mag(in)); /* fl(x - dot) */
        iv pr = {p * in.lo, p * in.hi};
        pr = iv_widen(pr, U * iv_mag(pr) + 0x1p-149); /* fl(P * inner) */
        S[j] = iv_round(r, pr);
        if (iv_bad(S[j]))
            return 1;
    }
    for (int j = t + 1; j < H->T; j++)
        S[j] = (iv){0.0, 0.0};
    return 0;
}

/* dQ (over = 0: sum over j of dS_tj K_jd) or dK (over = 1: sum over t of dS_tj Q_td), scaled,
 * of one head into a (row stride C3), from dS's intervals S ([T,T]) and unb (rows unbounded). */
static void bwd_qk(const head *H, bk_rnd r, const iv *S, const int *unb, int over, double *a)
{
    const float *x = over ? H->q : H->k;
    for (int i = 0; i < H->T; i++)
        for (int d = 0; d < H->hs; d++) {
            double *out = &a[(size_t)i * H->C3 + (size_t)d], lo = 0.0, hi = 0.0, mag = 0.0;
            int bad = column_nonfinite(x, H->T, (size_t)H->C3, d) || (!over && unb[i]);
            for (int m = 0; m < H->T && !bad; m++) {
                if (over && unb[m] && m >= i) { /* row m's dS reaches column i */
                    bad = 1;
                    break;
                }
                const iv *s = &S[over ? (size_t)m * (size_t)H->T + (size_t)i : (size_t)i * (size_t)H->T + (size_t)m];
                double xv = (double)x[(size_t)m * H->C3 + (size_t)d];
                double p = s->lo * xv, q = s->hi * xv;
                lo += fmin(p, q);
                hi += fmax(p, q);
                mag += iv_mag(*s) * fabs(xv);
            }
            if (bad) {
                *out = INFINITY;
                continue;
            }
            iv sum = sum_iv(lo, hi, mag, H->T);
            iv sc = {sum.lo * H->scale, sum.hi * H->scale};
            *out = allowance(r, iv_widen(sc, U * iv_mag(sc)));
        }
}

/* dV = att_r^T dY of one head into a (row stride C3): identical inputs, any order. */
static void bwd_v(const head *H, bk_rnd r, const float *dy, const float *Pr, double *a)
{
    for (int j = 0; j < H->T; j++)
        for (int d = 0; d < H->hs; d++) {
            double *out = &a[(size_t)j * H->C3 + (size_t)d];
            if (column_nonfinite(dy, H->T, (size_t)H->C, d)) {
                *out = INFINITY;
                continue;
            }
            iv s = dot_iv(Pr + j, (size_t)H->T, dy + d, (size_t)H->C, H->T, 1.0);
            *out = iv_bad(s) ? INFINITY : allowance(r, s);
        }
}

void opbound_attention_bwd(int B, int T, int C, int NH, bk_rnd r, const float *dout, const float *qkv,
                           const float *att, const float *att_r, double *a_dqkv)
{
    size_t TT = (size_t)T * (size_t)T;
    iv *x = malloc((size_t)T * sizeof *x), *S = malloc(TT * sizeof *S);
    int *unb = malloc((size_t)T * sizeof *unb);
    if (!x || !S || !unb) {
        for (size_t i = 0; i < (size_t)B * (size_t)T * 3u * (size_t)C; i++)
            a_dqkv[i] = INFINITY;
        free(x), free(S), free(unb);
        return;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            head H = head_of(b, h, T, C, NH, qkv);
            const float *dy = dout + H.orow, *P = att + H.arow, *Pr = att_r + H.arow;
            size_t qoff = (size_t)(H.q - qkv);
            for (int t = 0; t < T; t++) {
                iv *row = S + (size_t)t * T;
                unb[t] = bwd_row(&H, t, r, dy, P + (size_t)t * T, x, row);
                for (int j = 0; unb[t] && j < T; j++) /* (the causal part is never read then) */
                    row[j] = j <= t ? (iv){NAN, NAN} : (iv){0.0, 0.0};
            }
            bwd_qk(&H, r, S, unb, 0, a_dqkv + qoff);            /* dQ */
            bwd_qk(&H, r, S, unb, 1, a_dqkv + qoff + C);        /* dK */
            bwd_v(&H, r, dy, Pr, a_dqkv + qoff + 2 * (size_t)C); /* dV */
        }
    free(x), free(S), free(unb);
}
