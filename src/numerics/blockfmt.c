/*
 * blockfmt.c - the block-scaled quantisation what-if (ampdiag.h, "Block-scaled and
 * per-tensor-scaled quantisation what-if"; the definitions, with their sources, are in
 * docs/numerics.md, "Block formats").
 *
 * A scheme is an element format, a way of finding scales (current, MX, NVFP4, blockwise), a
 * rule that rounds a scale to its own format, and a direction (which values share a scale).
 * For every block the scale comes from the block's amax in scalar code that follows the
 * recipe's reference arithmetic step by step in float32 (block_scale); every value is then
 * multiplied by the block's encode factor in float32, rounded to the element format (nearest
 * even, saturating: q_elem) and decoded with the block's decode factor, exactly, in double
 * (qrow). The error x - q(x) is exact in double; only the sums of squares round.
 *
 * One pass over the tensor for every scheme: the matrix is taken in tiles of QT x QT values
 * (QT is a multiple of every block length), and every scheme works on a tile while it is in
 * the cache. Schemes of the same element format, scale scheme, rule and block length form a
 * group; a group's rowwise pass leaves its decoded values in a buffer, against which its
 * columnwise and tile passes count their disagreement.
 */
#include "ampdiag.h"
#include "numerics/numfmt.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define QT 128                 /* the side of the tiles the matrix is read in */
#define HIST_OFF 160           /* internal exponent histogram: exponent e in bin e + HIST_OFF */
#define HIST_N 300

/* q_elem rounds by adding and subtracting 1.5 * 2^23 in float: that needs float arithmetic
 * without excess precision. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#define Q_VOLATILE volatile
#else
#define Q_VOLATILE
#endif

static inline uint32_t fbits(float f) { return ampdiag_f32_bits(f); }
static inline float bitsf(uint32_t u) { return ampdiag_f32_from_bits(u); }

/* ------------------------------------------------------------------------------------------
 * Element formats
 * ------------------------------------------------------------------------------------------ */

typedef struct elemfmt {
    int m;             /* stored mantissa bits */
    int emin, emax;    /* exponents of the smallest normal and of the largest binade */
    float max, min_normal;
    float rcp_max;     /* fl32(1 / max), NVIDIA's E8M0 rule multiplies by it */
    uint32_t sat_bits; /* |v| bits from which rounding goes beyond max: saturated */
} elemfmt;

static int elem_of(ampdiag_format f, elemfmt *e)
{
    const ampdiag_format_info *fi = ampdiag_format_get(f);
    if (!fi || (f != AMPDIAG_E4M3 && f != AMPDIAG_E5M2 && f != AMPDIAG_E2M3 && f != AMPDIAG_E3M2 && f != AMPDIAG_E2M1))
        return -1;
    e->m = fi->mant_bits;
    e->emin = fi->emin;
    e->emax = fi->emax;
    e->max = fi->max_finite;
    e->min_normal = fi->min_normal;
    e->rcp_max = 1.0f / fi->max_finite;
    e->sat_bits = fbits(fi->overflow_at); /* E4M3: past 464, E5M2 61440, E2M1 7, E2M3 7.75, E3M2 30 */
    return 0;
}

/* v rounded to the element format, nearest even, saturating at +-max; *sat := whether it
 * saturated. The rounding is exact float arithmetic: |v| * 2^(m - e) (e the exponent of |v|'s
 * binade, at least emin) is below 2^(m+1), so adding and subtracting 1.5 * 2^23 rounds it to an
 * integer with ties to even, and scaling back is exact. */
static inline float q_elem(float v, const elemfmt *f, int *sat)
{
    uint32_t u = fbits(v), a = u & 0x7fffffffu;
    int e = (int)(a >> 23) - 127;
    if (e < f->emin)
        e = f->emin;
    float up = bitsf((uint32_t)(127 + f->m - e) << 23), down = bitsf((uint32_t)(127 - f->m + e) << 23);
    Q_VOLATILE float t = bitsf(a) * up;
    float r = ((t + 0x1.8p23f) - 0x1.8p23f) * down;
    *sat = a >= f->sat_bits;
    if (*sat)
        r = f->max;
    return bitsf(fbits(r) | (u & 0x80000000u));
}

/* ------------------------------------------------------------------------------------------
 * Work of one scheme
 * ------------------------------------------------------------------------------------------ */

typedef struct qacc {
    uint64_t nonfinite, saturated, flushed, subnormal, poisoned, disagree;
    double sig, err, dsq, rmax;
} qacc;

typedef struct qwork {
    ampdiag_qstats *out; /* NULL: counted only as the reference of a group's other directions */
    int dir, block;
    qacc acc;
    uint64_t blocks, zero_blocks, nonfinite_blocks, clamped, underflow, subnormal_scales;
    uint64_t hist[HIST_N];
    int hmin, hmax;      /* exponents seen (hmin > hmax: none) */
} qwork;

typedef struct qgroup {
    elemfmt e;
    ampdiag_format elem;
    int scheme, rule, block;
    float s_enc, s_dec;  /* NVFP4: the global encode scale and its reciprocal */
    float s_tensor;      /* current: the tensor's scale */
    qwork *w[AMPDIAG_NQDIRS]; /* by direction; NULL where not counted */
} qgroup;

static void hist_add(qwork *w, int e)
{
    int i = e + HIST_OFF;
    i = i < 0 ? 0 : i >= HIST_N ? HIST_N - 1 : i;
    w->hist[i]++;
    if (e < w->hmin) w->hmin = e;
    if (e > w->hmax) w->hmax = e;
}

/* floor(log2 |v|) of a finite non-zero float (subnormals included). */
static int ilog2f(float v)
{
    uint32_t a = fbits(v) & 0x7fffffffu;
    if (a >= AMPDIAG_F32_MIN_NORMAL)
        return (int)(a >> 23) - 127;
    return -118 - __builtin_clz(a); /* a = m 2^-149: floor(log2 m) - 149, floor(log2 m) = 31 - clz */
}

static inline float minf(float a, float b) { return b < a ? b : a; } /* (neither is NaN here) */

/* The scale of one block from its amax: m_all the largest |x| bit pattern (NaN beats inf beats
 * every finite value), m_nn the largest that is not NaN. *mul := the factor values are
 * multiplied by before rounding, *dec := the decoded value of one element unit (NaN: the block
 * decodes as NaN; 0 with mul 0: every value flushes). Counts the block into w. */
static void block_scale(const qgroup *g, uint32_t m_all, uint32_t m_nn, qwork *w, float *mul, double *dec)
{
    w->blocks++;
    if (m_all >= AMPDIAG_F32_INF)
        w->nonfinite_blocks++;
    switch (g->scheme) {
    case AMPDIAG_QS_MX: {
        if (m_all >= AMPDIAG_F32_INF) { /* a NaN or inf in the block: the scale is NaN (E8M0 0xFF) */
            *mul = 0.0f;
            *dec = NAN;
            return;
        }
        int E = -127;
        if (m_all == 0) {
            w->zero_blocks++;
        } else if (g->rule == AMPDIAG_QR_FLOOR) {
            E = (int)(m_all >> 23) - 127 - g->e.emax; /* floor(log2 amax) - emax_elem (subnormal amax: -127) */
        } else {
            uint32_t db = fbits(bitsf(m_all) * g->e.rcp_max); /* d = amax * (1 / max), rounded up to E8M0 */
            uint32_t c = db >> 23, man = db & 0x7fffffu;
            c = c == 0 ? (man > 0x400000u ? 1u : 0u) : c + (man != 0);
            E = (int)c - 127;
            if (db < AMPDIAG_E8M0_MIN_BITS)
                w->underflow++; /* d below 2^-127: the scale stays 2^-127 */
        }
        if (E > 127) { /* (not reached from a finite amax: the E8M0 NaN) */
            *mul = 0.0f;
            *dec = NAN;
            return;
        }
        if (E < -127) {
            E = -127;
            w->underflow++;
        }
        if (m_all != 0)
            hist_add(w, E);
        *mul = E == 127 ? bitsf(AMPDIAG_E8M0_MIN_BITS) : bitsf((uint32_t)(127 - E) << 23); /* 2^-E */
        uint64_t db2 = (uint64_t)(E + 1023) << 52; /* 2^E as a double */
        memcpy(dec, &db2, sizeof db2);
        return;
    }
    case AMPDIAG_QS_NVFP4: {
        if (m_nn == 0) { /* all zero (or NaN): nothing to scale */
            w->zero_blocks++;
            *mul = 0.0f;
            *dec = 0.0;
            return;
        }
        float a = bitsf(m_nn);
        float sdb = minf(a / 6.0f * g->s_enc, FLT_MAX); /* (amax_b / 6) x S_enc */
        float sb;
        if (fbits(sdb) >= AMPDIAG_E4M3_OVF_BITS) {
            sb = 448.0f; /* E4M3 with saturation */
            w->clamped++;
        } else {
            sb = ampdiag_e4m3_rne(sdb);
        }
        if (sb == 0.0f) { /* the block scale flushed: every value decodes as zero */
            w->underflow++;
            *mul = 0.0f;
            *dec = 0.0;
            return;
        }
        if (sb < 0x1p-6f)
            w->subnormal_scales++;
        if (m_nn < AMPDIAG_F32_INF)
            hist_add(w, ilog2f(sb));
        *mul = minf(1.0f / (sb * g->s_dec), FLT_MAX); /* 1 / (s_b x S_dec) */
        *dec = (double)sb * (double)g->s_dec;
        return;
    }
    default: { /* blockwise, current: Transformer Engine's compute_scale_from_amax */
        float s = 1.0f;
        if (g->scheme == AMPDIAG_QS_CURRENT) { /* the tensor's scale (tensor_scales), counted once */
            s = g->s_tensor;
            if (m_nn == 0) {
                w->zero_blocks++;
            } else if (m_nn < AMPDIAG_F32_INF) {
                if (isinf(g->e.max / bitsf(m_nn)))
                    w->clamped++;
                hist_add(w, ilog2f(1.0f / s));
            }
        } else if (m_nn == 0) {
            w->zero_blocks++;
        } else if (m_nn < AMPDIAG_F32_INF) {
            s = g->e.max / bitsf(m_nn);
            if (isinf(s)) {
                s = FLT_MAX;
                w->clamped++;
            }
            if (g->rule == AMPDIAG_QR_POW2)
                s = bitsf(fbits(s) & 0xff800000u);
            hist_add(w, ilog2f(1.0f / s));
        }
        *mul = s;
        *dec = (double)(1.0f / s);
        return;
    }
    }
}

/* The tensor-level scale of current scaling (s) and NVFP4 (S_enc, S_dec) from the amax. */
static void tensor_scales(qgroup *g, float amax)
{
    g->s_enc = g->s_dec = g->s_tensor = 1.0f;
    if (g->scheme == AMPDIAG_QS_NVFP4) {
        float s = fminf(448.0f * 6.0f / amax, FLT_MAX);
        if (!(amax != 0.0f) || s == 0.0f || isnan(s))
            s = 1.0f; /* amax 0 or inf */
        g->s_enc = s;
        g->s_dec = 1.0f / s;
    } else if (g->scheme == AMPDIAG_QS_CURRENT) {
        float s = 1.0f;
        if (amax != 0.0f && isfinite(amax)) {
            s = g->e.max / amax;
            if (isinf(s)) s = FLT_MAX;
            if (g->rule == AMPDIAG_QR_POW2) s = bitsf(fbits(s) & 0xff800000u);
        }
        g->s_tensor = s;
    }
}

/* Values x[0..w) whose factors are mul[j / L] and dec[j / L] (L = 1: one per value, L a block
 * length: one per block): quantise, decode, count into a; deq (may be NULL) := the decoded
 * values (NaN where not counted); cmp (may be NULL): the reference's decoded values, to count
 * the disagreement. */
static void qrow(const float *x, size_t w, const float *mul, const double *dec, size_t L, const elemfmt *f, qacc *a,
                 double *deq, const double *cmp)
{
    for (size_t j = 0; j < w; j++) {
        float xv = x[j];
        double d = dec[j / L];
        if ((fbits(xv) & 0x7f800000u) == 0x7f800000u || d != d) {
            if ((fbits(xv) & 0x7f800000u) == 0x7f800000u)
                a->nonfinite++;
            else
                a->poisoned++;
            if (deq) deq[j] = NAN;
            continue;
        }
        int sat;
        float q = q_elem(xv * mul[j / L], f, &sat);
        double dq = (double)q * d;
        double xd = (double)xv, e = xd - dq;
        a->sig += xd * xd;
        a->err += e * e;
        a->saturated += (uint64_t)sat;
        a->flushed += xv != 0.0f && dq == 0.0;
        a->subnormal += q != 0.0f && fabsf(q) < f->min_normal;
        if (xv != 0.0f) {
            double r = fabs(e) / fabs(xd);
            if (r > a->rmax) a->rmax = r;
        }
        if (deq) deq[j] = dq;
        if (cmp && cmp[j] == cmp[j] && cmp[j] != dq) {
            a->disagree++;
            a->dsq += (dq - cmp[j]) * (dq - cmp[j]);
        }
    }
}

/* The largest |x| bit patterns of the blocks of b values of x[0..w) (the last one ragged): all
 * (NaN beats inf beats every finite value) into ma[k], those that are not NaN into mn[k]. */
static void row_amax(const float *x, size_t w, size_t b, uint32_t *ma, uint32_t *mn)
{
    for (size_t k = 0, blk = 0; k < w; k += b, blk++) {
        size_t len = w - k < b ? w - k : b;
        uint32_t a0 = 0, n0 = 0;
        for (size_t i = 0; i < len; i++) {
            uint32_t v = fbits(x[k + i]) & 0x7fffffffu;
            a0 = v > a0 ? v : a0;
            n0 = v <= AMPDIAG_F32_INF && v > n0 ? v : n0;
        }
        ma[blk] = a0;
        mn[blk] = n0;
    }
}

/* The same over the rows i of X (leading dimension ld), one maximum per column j < wd. */
static void col_amax(const float *X, size_t ld, size_t rows, size_t wd, uint32_t *ca, uint32_t *cn)
{
    for (size_t j = 0; j < wd; j++)
        ca[j] = cn[j] = 0;
    for (size_t i = 0; i < rows; i++) {
        const float *row = X + i * ld;
        for (size_t j = 0; j < wd; j++) {
            uint32_t v = fbits(row[j]) & 0x7fffffffu;
            ca[j] = v > ca[j] ? v : ca[j];
            cn[j] = v <= AMPDIAG_F32_INF && v > cn[j] ? v : cn[j];
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define QROW_AVX512 1

/* qrow with AVX-512F, 16 values at a time (the last ones under a mask), L = 1 or a multiple of
 * 16: the same operations on every lane, the counts from mask registers, the sums in 8-lane
 * double accumulators, the largest relative error compared against the one so far and divided
 * out only for the lanes above it. Gives the counts, decoded values and max_rel_err of qrow
 * exactly; the sums differ only by the order of the additions. */
__attribute__((target("avx512f,popcnt"))) static void qrow_avx512(const float *x, size_t w, const float *mul,
                                                                   const double *dec, size_t L, const elemfmt *f,
                                                                   qacc *a, double *deq, const double *cmp)
{
    const __m512i expmask = _mm512_set1_epi32(0x7f800000), absmask = _mm512_set1_epi32(0x7fffffff);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u), emin = _mm512_set1_epi32(f->emin);
    const __m512i upb = _mm512_set1_epi32(127 + f->m), downb = _mm512_set1_epi32(127 - f->m);
    const __m512i satb = _mm512_set1_epi32((int)f->sat_bits), b127 = _mm512_set1_epi32(127);
    const __m512 magic = _mm512_set1_ps(0x1.8p23f), maxv = _mm512_set1_ps(f->max), mn = _mm512_set1_ps(f->min_normal);
    const __m512 zf = _mm512_setzero_ps();
    const __m512d zd = _mm512_setzero_pd(), nand = _mm512_set1_pd(NAN);
    __m512d sig0 = zd, sig1 = zd, err0 = zd, err1 = zd, dsq0 = zd, dsq1 = zd;
    __m512d rmax = _mm512_set1_pd(a->rmax);
    uint64_t nonfin = 0, pois = 0, sat = 0, flush = 0, sub = 0, dis = 0;
    for (size_t j = 0; j < w; j += 16) {
        __mmask16 lanes = w - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (w - j)) - 1u);
        __m512 xv = _mm512_maskz_loadu_ps(lanes, x + j);
        __m512 mv;
        __m512d d0, d1;
        if (L == 1) {
            mv = _mm512_maskz_loadu_ps(lanes, mul + j);
            d0 = _mm512_maskz_loadu_pd((__mmask8)lanes, dec + j);
            d1 = _mm512_maskz_loadu_pd((__mmask8)(lanes >> 8), dec + j + 8);
        } else {
            mv = _mm512_set1_ps(mul[j / L]);
            d0 = d1 = _mm512_set1_pd(dec[j / L]);
        }
        __m512i xb = _mm512_castps_si512(xv);
        __mmask16 fin = _mm512_mask_cmpneq_epi32_mask(lanes, _mm512_and_si512(xb, expmask), expmask);
        __mmask16 nd = (__mmask16)(_mm512_cmp_pd_mask(d0, d0, _CMP_UNORD_Q) |
                                   ((unsigned)_mm512_cmp_pd_mask(d1, d1, _CMP_UNORD_Q) << 8));
        __mmask16 use = fin & (__mmask16)~nd;
        nonfin += (uint64_t)__builtin_popcount((unsigned)(lanes & (__mmask16)~fin));
        pois += (uint64_t)__builtin_popcount((unsigned)(fin & nd));
        /* the element rounding (q_elem) */
        __m512 v = _mm512_mul_ps(xv, mv);
        __m512i u = _mm512_castps_si512(v), av = _mm512_and_si512(u, absmask);
        __m512i e = _mm512_max_epi32(_mm512_sub_epi32(_mm512_srli_epi32(av, 23), b127), emin);
        __m512 up = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(upb, e), 23));
        __m512 down = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(downb, e), 23));
        __m512 t = _mm512_mul_ps(_mm512_castsi512_ps(av), up);
        __m512 r = _mm512_mul_ps(_mm512_sub_ps(_mm512_add_ps(t, magic), magic), down);
        __mmask16 sm = _mm512_cmpge_epi32_mask(av, satb);
        r = _mm512_mask_blend_ps(sm, r, maxv);
        __m512 q = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), _mm512_and_si512(u, sign)));
        sat += (uint64_t)__builtin_popcount((unsigned)(sm & use));
        __mmask16 qnz = _mm512_cmp_ps_mask(r, zf, _CMP_NEQ_OQ);
        sub += (uint64_t)__builtin_popcount((unsigned)(use & qnz & _mm512_cmp_ps_mask(r, mn, _CMP_LT_OQ)));
        __mmask16 xnz = _mm512_mask_cmp_ps_mask(use, xv, zf, _CMP_NEQ_OQ);
        /* decode and the error, in double */
        __m512d q0 = _mm512_cvtps_pd(_mm512_castps512_ps256(q));
        __m512d q1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(q), 1)));
        __m512d x0 = _mm512_cvtps_pd(_mm512_castps512_ps256(xv));
        __m512d x1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xv), 1)));
        __m512d dq0 = _mm512_mul_pd(q0, d0), dq1 = _mm512_mul_pd(q1, d1);
        __m512d e0 = _mm512_sub_pd(x0, dq0), e1 = _mm512_sub_pd(x1, dq1);
        __mmask8 u0 = (__mmask8)use, u1 = (__mmask8)(use >> 8);
        sig0 = _mm512_mask3_fmadd_pd(x0, x0, sig0, u0);
        sig1 = _mm512_mask3_fmadd_pd(x1, x1, sig1, u1);
        err0 = _mm512_mask3_fmadd_pd(e0, e0, err0, u0);
        err1 = _mm512_mask3_fmadd_pd(e1, e1, err1, u1);
        __mmask16 dz = (__mmask16)(_mm512_cmp_pd_mask(dq0, zd, _CMP_EQ_OQ) |
                                   ((unsigned)_mm512_cmp_pd_mask(dq1, zd, _CMP_EQ_OQ) << 8));
        flush += (uint64_t)__builtin_popcount((unsigned)(xnz & dz));
        /* lanes whose relative error may exceed the largest so far: divide them out */
        __m512d ae0 = _mm512_abs_pd(e0), ae1 = _mm512_abs_pd(e1);
        __mmask8 c0 = _mm512_mask_cmp_pd_mask((__mmask8)xnz, ae0, _mm512_mul_pd(rmax, _mm512_abs_pd(x0)), _CMP_GT_OQ);
        __mmask8 c1 = _mm512_mask_cmp_pd_mask((__mmask8)(xnz >> 8), ae1, _mm512_mul_pd(rmax, _mm512_abs_pd(x1)), _CMP_GT_OQ);
        if (c0 | c1) {
            double ea[16], xa[16];
            _mm512_storeu_pd(ea, ae0);
            _mm512_storeu_pd(ea + 8, ae1);
            _mm512_storeu_pd(xa, _mm512_abs_pd(x0));
            _mm512_storeu_pd(xa + 8, _mm512_abs_pd(x1));
            double best = a->rmax;
            for (unsigned m = (unsigned)c0 | ((unsigned)c1 << 8); m; m &= m - 1) {
                int l = __builtin_ctz(m);
                double rr = ea[l] / xa[l];
                if (rr > best) best = rr;
            }
            a->rmax = best;
            rmax = _mm512_set1_pd(best);
        }
        if (deq) {
            _mm512_mask_storeu_pd(deq + j, (__mmask8)lanes, _mm512_mask_blend_pd(u0, nand, dq0));
            _mm512_mask_storeu_pd(deq + j + 8, (__mmask8)(lanes >> 8), _mm512_mask_blend_pd(u1, nand, dq1));
        }
        if (cmp) {
            __m512d r0 = _mm512_maskz_loadu_pd((__mmask8)lanes, cmp + j);
            __m512d r1 = _mm512_maskz_loadu_pd((__mmask8)(lanes >> 8), cmp + j + 8);
            __mmask8 k0 = _mm512_mask_cmp_pd_mask(u0, r0, dq0, _CMP_NEQ_OQ);
            __mmask8 k1 = _mm512_mask_cmp_pd_mask(u1, r1, dq1, _CMP_NEQ_OQ);
            dis += (uint64_t)__builtin_popcount((unsigned)k0 | ((unsigned)k1 << 8));
            __m512d g0 = _mm512_sub_pd(dq0, r0), g1 = _mm512_sub_pd(dq1, r1);
            dsq0 = _mm512_mask3_fmadd_pd(g0, g0, dsq0, k0);
            dsq1 = _mm512_mask3_fmadd_pd(g1, g1, dsq1, k1);
        }
    }
    a->nonfinite += nonfin;
    a->poisoned += pois;
    a->saturated += sat;
    a->flushed += flush;
    a->subnormal += sub;
    a->disagree += dis;
    a->sig += _mm512_reduce_add_pd(_mm512_add_pd(sig0, sig1));
    a->err += _mm512_reduce_add_pd(_mm512_add_pd(err0, err1));
    a->dsq += _mm512_reduce_add_pd(_mm512_add_pd(dsq0, dsq1));
}

/* The maxima of four vectors at once: lane group j (ints 4j .. 4j+3) of the result holds the
 * largest of v_j's 16 values. */
__attribute__((target("avx512f"))) static inline __m512i max4_epu32(__m512i v0, __m512i v1, __m512i v2, __m512i v3)
{
    __m512i a = _mm512_max_epu32(_mm512_shuffle_i32x4(v0, v1, 0x44), _mm512_shuffle_i32x4(v0, v1, 0xee));
    __m512i b = _mm512_max_epu32(_mm512_shuffle_i32x4(v2, v3, 0x44), _mm512_shuffle_i32x4(v2, v3, 0xee));
    __m512i c = _mm512_max_epu32(_mm512_shuffle_i32x4(a, b, 0x88), _mm512_shuffle_i32x4(a, b, 0xdd));
    c = _mm512_max_epu32(c, _mm512_shuffle_epi32(c, (_MM_PERM_ENUM)0x4e));
    return _mm512_max_epu32(c, _mm512_shuffle_epi32(c, (_MM_PERM_ENUM)0xb1));
}

/* row_amax for b a multiple of 16: the non-NaN maxima of the blocks, four blocks reduced at a
 * time; a row holding a NaN (rare) is left to row_amax for the NaN-propagating ones. */
__attribute__((target("avx512f"))) static void row_amax_avx512(const float *x, size_t w, size_t b, uint32_t *ma,
                                                               uint32_t *mn)
{
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32((int)AMPDIAG_F32_INF);
    __m512i part[QT / 16];
    __mmask16 nan = 0;
    size_t nb = 0;
    for (size_t k = 0; k < w; k += b, nb++) {
        size_t len = w - k < b ? w - k : b;
        __m512i n0 = _mm512_setzero_si512();
        for (size_t i = 0; i < len; i += 16) {
            __mmask16 lanes = len - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - i)) - 1u);
            __m512i v = _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(lanes, x + k + i)), absmask);
            __mmask16 ok = _mm512_cmple_epu32_mask(v, inf);
            nan |= (__mmask16)~ok;
            n0 = _mm512_mask_max_epu32(n0, ok, n0, v);
        }
        part[nb] = n0;
    }
    const __m512i z = _mm512_setzero_si512();
    for (size_t k = 0; k < nb; k += 4) {
        __m512i m = max4_epu32(part[k], k + 1 < nb ? part[k + 1] : z, k + 2 < nb ? part[k + 2] : z,
                               k + 3 < nb ? part[k + 3] : z);
        uint32_t r[16];
        _mm512_storeu_si512((void *)r, m);
        for (size_t t = 0; t < 4 && k + t < nb; t++)
            mn[k + t] = ma[k + t] = r[4 * t];
    }
    if (nan)
        row_amax(x, w, b, ma, mn);
}

__attribute__((target("avx512f"))) static void col_amax_avx512(const float *X, size_t ld, size_t rows, size_t wd,
                                                               uint32_t *ca, uint32_t *cn)
{
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32((int)AMPDIAG_F32_INF);
    for (size_t j = 0; j < wd; j += 16) {
        __mmask16 lanes = wd - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (wd - j)) - 1u);
        __m512i a0 = _mm512_setzero_si512(), n0 = _mm512_setzero_si512();
        for (size_t i = 0; i < rows; i++) {
            __m512i v = _mm512_and_si512(_mm512_castps_si512(_mm512_maskz_loadu_ps(lanes, X + i * ld + j)), absmask);
            a0 = _mm512_max_epu32(a0, v);
            n0 = _mm512_mask_max_epu32(n0, _mm512_cmple_epu32_mask(v, inf), n0, v);
        }
        _mm512_mask_storeu_epi32(ca + j, lanes, a0);
        _mm512_mask_storeu_epi32(cn + j, lanes, n0);
    }
}
#endif

/* Which kernels this CPU runs: 1 AVX-512F, 0 the portable ones (AMPDIAG_QUANT_IMPL=generic asks
 * for them). Read once. */
static int qkernel(void)
{
    static atomic_int kind = -1;
    int k = atomic_load_explicit(&kind, memory_order_relaxed);
    if (k < 0) {
        k = 0;
#ifdef QROW_AVX512
        const char *want = getenv("AMPDIAG_QUANT_IMPL");
        if (!(want && strcmp(want, "generic") == 0) && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("popcnt"))
            k = 1;
#endif
        atomic_store_explicit(&kind, k, memory_order_relaxed); /* every thread finds the same */
    }
    return k;
}

const char *ampdiag_quant_impl(void) { return qkernel() ? "avx512f" : "generic"; }

static void qrow_any(const float *x, size_t w, const float *mul, const double *dec, size_t L, const elemfmt *f,
                     qacc *a, double *deq, const double *cmp)
{
#ifdef QROW_AVX512
    if ((L == 1 || L % 16 == 0) && qkernel()) {
        qrow_avx512(x, w, mul, dec, L, f, a, deq, cmp);
        return;
    }
#endif
    qrow(x, w, mul, dec, L, f, a, deq, cmp);
}

static void row_amax_any(const float *x, size_t w, size_t b, uint32_t *ma, uint32_t *mn)
{
#ifdef QROW_AVX512
    if (b % 16 == 0 && qkernel()) {
        row_amax_avx512(x, w, b, ma, mn);
        return;
    }
#endif
    row_amax(x, w, b, ma, mn);
}

static void col_amax_any(const float *X, size_t ld, size_t rows, size_t wd, uint32_t *ca, uint32_t *cn)
{
#ifdef QROW_AVX512
    if (qkernel()) {
        col_amax_avx512(X, ld, rows, wd, ca, cn);
        return;
    }
#endif
    col_amax(X, ld, rows, wd, ca, cn);
}

/* Scratch of a call. */
typedef struct qscratch {
    float mul[QT];
    double dec[QT];
    uint32_t ca[QT], cn[QT]; /* block or column maxima */
    uint32_t ta[QT], tn[QT]; /* a row's block maxima, for tiles */
    double ref[QT * QT];     /* the rowwise pass's decoded values of the tile */
} qscratch;

/* Where the decoded values of a pass go: the reference buffer of its group (ref, stride QT)
 * and/or the caller's array (out, stride ld). */
typedef struct qdest {
    double *ref;
    double *out;
    size_t ld;
    const float *pf;   /* the first pass over a tile: the next tile, whose row i it asks the cache
                          for as it works on its own row i (the rows lie a matrix row apart: more
                          streams than the hardware prefetchers follow); NULL otherwise */
    size_t pf_rows, pf_bytes;
} qdest;

static void pf_row(const qdest *d, size_t i, size_t ld)
{
    if (d->pf && i < d->pf_rows) {
        const char *p = (const char *)(d->pf + i * ld);
        for (size_t b = 0; b < d->pf_bytes; b += 64)
            __builtin_prefetch(p + b, 0, 3);
    }
}

/* One row of w values blocked by b (the factors of its blocks into s->mul, s->dec), counted. */
static void row_blocks(const qgroup *g, qwork *w, const float *row, size_t wd, size_t b, qscratch *s, double *deq)
{
    row_amax_any(row, wd, b, s->ca, s->cn);
    for (size_t k = 0, blk = 0; k < wd; k += b, blk++)
        block_scale(g, s->ca[blk], s->cn[blk], w, &s->mul[blk], &s->dec[blk]);
    qrow_any(row, wd, s->mul, s->dec, b, &g->e, &w->acc, deq, NULL);
}

/* A 1-D run x[0..n) in blocks of b, or (tensor) with the tensor's scale; out (may be NULL) :=
 * its decoded values. */
static void pass_vec(const qgroup *g, qwork *w, int tensor, const float *x, size_t n, size_t b, qscratch *s, double *out)
{
    for (size_t c = 0; c < n; c += QT) { /* b divides QT */
        size_t seg = n - c < QT ? n - c : QT;
        if (tensor) {
            s->mul[0] = g->s_tensor;
            s->dec[0] = (double)(1.0f / g->s_tensor);
            qrow_any(x + c, seg, s->mul, s->dec, QT, &g->e, &w->acc, out ? out + c : NULL, NULL);
        } else {
            row_blocks(g, w, x + c, seg, b, s, out ? out + c : NULL);
        }
    }
}

static void put_rows(const qdest *d, size_t i, size_t wd, const double *src)
{
    if (d->out)
        memcpy(d->out + i * d->ld, src, wd * sizeof *src);
}

/* The tile X (h x wd, leading dimension ld) of a matrix, in each direction. */
static void pass_tile_tensor(const qgroup *g, qwork *w, const float *X, size_t ld, size_t h, size_t wd, qscratch *s,
                             const qdest *d)
{
    s->mul[0] = g->s_tensor;
    s->dec[0] = (double)(1.0f / g->s_tensor);
    for (size_t i = 0; i < h; i++) {
        pf_row(d, i, ld);
        qrow_any(X + i * ld, wd, s->mul, s->dec, QT, &g->e, &w->acc, d->out ? d->out + i * d->ld : NULL, NULL);
    }
}

static void pass_tile_rows(const qgroup *g, qwork *w, const float *X, size_t ld, size_t h, size_t wd, qscratch *s,
                           const qdest *d)
{
    for (size_t i = 0; i < h; i++) {
        pf_row(d, i, ld);
        double *dst = d->ref ? s->ref + i * QT : d->out ? d->out + i * d->ld : NULL;
        row_blocks(g, w, X + i * ld, wd, (size_t)g->block, s, dst);
        if (d->ref)
            put_rows(d, i, wd, s->ref + i * QT);
    }
}

static void pass_tile_cols(const qgroup *g, qwork *w, const float *X, size_t ld, size_t h, size_t wd, qscratch *s,
                           int cmp, const qdest *d)
{
    size_t b = (size_t)g->block;
    for (size_t i0 = 0; i0 < h; i0 += b) {
        size_t i1 = h - i0 < b ? h : i0 + b;
        for (size_t i = i0; i < i1; i++)
            pf_row(d, i, ld);
        col_amax_any(X + i0 * ld, ld, i1 - i0, wd, s->ca, s->cn);
        for (size_t j = 0; j < wd; j++)
            block_scale(g, s->ca[j], s->cn[j], w, &s->mul[j], &s->dec[j]);
        for (size_t i = i0; i < i1; i++)
            qrow_any(X + i * ld, wd, s->mul, s->dec, 1, &g->e, &w->acc, d->out ? d->out + i * d->ld : NULL,
                     cmp ? s->ref + i * QT : NULL);
    }
}

static void pass_tile_tiles(const qgroup *g, qwork *w, const float *X, size_t ld, size_t h, size_t wd, qscratch *s,
                            int cmp, const qdest *d)
{
    size_t b = (size_t)g->block, nb = (wd + b - 1) / b;
    for (size_t i0 = 0; i0 < h; i0 += b) {
        size_t i1 = h - i0 < b ? h : i0 + b;
        for (size_t k = 0; k < nb; k++)
            s->ca[k] = s->cn[k] = 0;
        for (size_t i = i0; i < i1; i++) {
            pf_row(d, i, ld);
            row_amax_any(X + i * ld, wd, b, s->ta, s->tn);
            for (size_t k = 0; k < nb; k++) {
                s->ca[k] = s->ta[k] > s->ca[k] ? s->ta[k] : s->ca[k];
                s->cn[k] = s->tn[k] > s->cn[k] ? s->tn[k] : s->cn[k];
            }
        }
        for (size_t k = 0; k < nb; k++)
            block_scale(g, s->ca[k], s->cn[k], w, &s->mul[k], &s->dec[k]);
        for (size_t i = i0; i < i1; i++)
            qrow_any(X + i * ld, wd, s->mul, s->dec, b, &g->e, &w->acc, d->out ? d->out + i * d->ld : NULL,
                     cmp ? s->ref + i * QT : NULL);
    }
}

/* ------------------------------------------------------------------------------------------
 * Specs
 * ------------------------------------------------------------------------------------------ */

static const char *const scheme_names[AMPDIAG_NQSCHEMES] = {"current", "mx", "nvfp4", "blockwise"};
static const char *const rule_names[AMPDIAG_NQRULES] = {"floor", "rceil", "e4m3", "fp32", "pow2"};
static const char *const dir_names[AMPDIAG_NQDIRS] = {"tensor", "rowwise", "columnwise", "tile"};

const char *ampdiag_qscheme_name(int v) { return v >= 0 && v < AMPDIAG_NQSCHEMES ? scheme_names[v] : NULL; }
const char *ampdiag_qrule_name(int v) { return v >= 0 && v < AMPDIAG_NQRULES ? rule_names[v] : NULL; }
const char *ampdiag_qdir_name(int v) { return v >= 0 && v < AMPDIAG_NQDIRS ? dir_names[v] : NULL; }

static int find_name(const char *const *names, int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}
int ampdiag_qscheme_parse(const char *s) { return find_name(scheme_names, AMPDIAG_NQSCHEMES, s); }
int ampdiag_qrule_parse(const char *s) { return find_name(rule_names, AMPDIAG_NQRULES, s); }
int ampdiag_qdir_parse(const char *s) { return find_name(dir_names, AMPDIAG_NQDIRS, s); }

static int fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    if (err && errlen)
        snprintf(err, errlen, fmt, a ? a : "", b ? b : "");
    return -1;
}

static const char *fmt_name(ampdiag_format f)
{
    const ampdiag_format_info *fi = ampdiag_format_get(f);
    return fi ? fi->name : "?";
}

int ampdiag_qspec_check(ampdiag_qspec *s, char *err, size_t errlen)
{
    elemfmt e;
    const char *sn = ampdiag_qscheme_name((int)s->scheme);
    if (!sn)
        return fail(err, errlen, "unknown scale scheme%s%s", NULL, NULL);
    if (elem_of(s->elem, &e) != 0)
        return fail(err, errlen, "%s: %s is not an element format (e4m3, e5m2, e2m3, e3m2, e2m1)", sn, fmt_name(s->elem));
    if (!ampdiag_qrule_name((int)s->rule) || !ampdiag_qdir_name((int)s->dir))
        return fail(err, errlen, "%s: unknown scale rule or direction%s", sn, NULL);
    switch (s->scheme) {
    case AMPDIAG_QS_CURRENT:
        if (s->elem != AMPDIAG_E4M3 && s->elem != AMPDIAG_E5M2)
            return fail(err, errlen, "%s: elements are e4m3 or e5m2, not %s", sn, fmt_name(s->elem));
        if (s->rule != AMPDIAG_QR_FP32 && s->rule != AMPDIAG_QR_POW2)
            return fail(err, errlen, "%s: the scale rule is fp32 or pow2, not %s", sn, ampdiag_qrule_name((int)s->rule));
        if (s->dir != AMPDIAG_QD_TENSOR || s->block != 0)
            return fail(err, errlen, "%s: one scale for the whole tensor (direction tensor, no block)%s", sn, NULL);
        return 0;
    case AMPDIAG_QS_MX:
        if (s->rule != AMPDIAG_QR_FLOOR && s->rule != AMPDIAG_QR_RCEIL)
            return fail(err, errlen, "%s: the scale rule is floor or rceil, not %s", sn, ampdiag_qrule_name((int)s->rule));
        if (s->dir == AMPDIAG_QD_TENSOR || s->dir == AMPDIAG_QD_TILE)
            return fail(err, errlen, "%s: blocks are rowwise or columnwise, not %s", sn, ampdiag_qdir_name((int)s->dir));
        break;
    case AMPDIAG_QS_NVFP4:
        if (s->elem != AMPDIAG_E2M1)
            return fail(err, errlen, "%s: elements are e2m1, not %s", sn, fmt_name(s->elem));
        if (s->rule != AMPDIAG_QR_E4M3)
            return fail(err, errlen, "%s: the block scale is e4m3, not %s", sn, ampdiag_qrule_name((int)s->rule));
        if (s->dir == AMPDIAG_QD_TENSOR)
            return fail(err, errlen, "%s: blocks are rowwise, columnwise or 2-D tiles%s", sn, NULL);
        break;
    case AMPDIAG_QS_BLOCKWISE:
        if (s->elem != AMPDIAG_E4M3 && s->elem != AMPDIAG_E5M2)
            return fail(err, errlen, "%s: elements are e4m3 or e5m2, not %s", sn, fmt_name(s->elem));
        if (s->rule != AMPDIAG_QR_FP32 && s->rule != AMPDIAG_QR_POW2)
            return fail(err, errlen, "%s: the scale rule is fp32 or pow2, not %s", sn, ampdiag_qrule_name((int)s->rule));
        if (s->dir == AMPDIAG_QD_TENSOR)
            return fail(err, errlen, "%s: blocks are rowwise, columnwise or 2-D tiles%s", sn, NULL);
        break;
    default:
        break;
    }
    if (s->block == 0)
        s->block = s->scheme == AMPDIAG_QS_MX ? 32 : s->scheme == AMPDIAG_QS_NVFP4 ? 16 : 128;
    if (s->block < 1 || s->block > QT || QT % s->block != 0)
        return fail(err, errlen, "%s: a block length divides %s (1, 2, 4, ..., 128)", sn, "128");
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * The pass
 * ------------------------------------------------------------------------------------------ */

float ampdiag_quant_amax(const ampdiag_tstats *s)
{
    if (s->n_posinf + s->n_neginf > 0)
        return INFINITY;
    return s->absmax >= 0.0f && isfinite(s->absmax) ? s->absmax : 0.0f;
}

static int same_scheme(const ampdiag_qspec *a, const ampdiag_qspec *b)
{
    return a->elem == b->elem && a->scheme == b->scheme && a->rule == b->rule && a->dir == b->dir && a->block == b->block;
}

static void finish(const qwork *w, ampdiag_qstats *o, const qgroup *g)
{
    o->computed = 1;
    o->scale = g->scheme == AMPDIAG_QS_NVFP4 ? g->s_enc : g->scheme == AMPDIAG_QS_CURRENT ? g->s_tensor : 1.0f;
    o->nonfinite = w->acc.nonfinite;
    o->saturated = w->acc.saturated;
    o->flushed = w->acc.flushed;
    o->subnormal = w->acc.subnormal;
    o->poisoned = w->acc.poisoned;
    o->blocks = w->blocks;
    o->zero_blocks = w->zero_blocks;
    o->nonfinite_blocks = w->nonfinite_blocks;
    o->scale_clamped = w->clamped;
    o->scale_underflow = w->underflow;
    o->scale_subnormal = w->subnormal_scales;
    o->sig_sq = w->acc.sig;
    o->err_sq = w->acc.err;
    o->max_rel_err = w->acc.rmax;
    o->disagree = w->acc.disagree;
    o->disagree_sq = w->acc.dsq;
    if (w->dir == AMPDIAG_QD_TENSOR) /* its one block holds a NaN or inf if any value is one */
        o->nonfinite_blocks = o->nonfinite > 0;
    memset(o->scale_hist, 0, sizeof o->scale_hist);
    if (w->hmin <= w->hmax) {
        o->scale_emin = w->hmin;
        o->scale_emax = w->hmax;
        for (int e = w->hmax; e >= w->hmin; e--) {
            int i = w->hmax - e;
            o->scale_hist[i < AMPDIAG_QHIST_BINS ? i : AMPDIAG_QHIST_BINS - 1] += w->hist[e + HIST_OFF];
        }
    } else {
        o->scale_emin = o->scale_emax = 0;
    }
}

/* Read a panel of rows in memory order, one load per cache line: the hardware prefetchers
 * stream it into the cache at the machine's read bandwidth, where the tiles then find it (read
 * tile by tile from memory, 128 rows a matrix row apart each, it came several times slower). */
static void touch_panel(const float *p, size_t n)
{
    volatile float sink = 0.0f;
    float acc = 0.0f;
    for (size_t i = 0; i < n; i += 16)
        acc += p[i];
    sink = acc;
    (void)sink;
}

/* The pass behind ampdiag_quant_whatif and ampdiag_quant_values: values (may be NULL; then
 * nspec == 1) := the decoded values of the one spec. */
static int quant_run(const float *x, size_t n, size_t rows, size_t cols, float amax, size_t nspec,
                     const ampdiag_qspec *spec, ampdiag_qstats *out, double *values)
{
    if (rows > 0 && cols > SIZE_MAX / rows)
        return -1;
    if (rows * cols > n || (!x && n > 0) || (nspec > 0 && (!spec || !out)))
        return -1;
    for (size_t i = 0; i < nspec; i++) {
        ampdiag_qspec c = spec[i];
        if (ampdiag_qspec_check(&c, NULL, 0) != 0)
            return -1;
    }
    int matrix = rows >= 2 && cols >= 1;
    size_t mrows = matrix ? rows : 0, mcols = matrix ? cols : 0, tail = n - mrows * mcols;

    qgroup *gs = calloc(nspec ? nspec : 1, sizeof *gs);
    qwork *ws = calloc(nspec ? 2 * nspec : 1, sizeof *ws);
    qscratch *s = malloc(sizeof *s);
    if (!gs || !ws || !s) {
        free(gs);
        free(ws);
        free(s);
        return -1;
    }
    /* groups: one per element format, scheme, rule and block length, a work per direction */
    size_t ng = 0, nw = 0;
    for (size_t i = 0; i < nspec; i++) {
        ampdiag_qspec c = spec[i];
        ampdiag_qspec_check(&c, NULL, 0);
        memset(&out[i], 0, sizeof out[i]);
        out[i].spec = c;
        out[i].count = n;
        if (!matrix && (c.dir == AMPDIAG_QD_COLWISE || c.dir == AMPDIAG_QD_TILE))
            continue; /* not applicable: computed stays 0 */
        size_t k = 0;
        while (k < ng && !(gs[k].elem == c.elem && gs[k].scheme == (int)c.scheme && gs[k].rule == (int)c.rule &&
                           gs[k].block == c.block))
            k++;
        if (k == ng) {
            gs[k].elem = c.elem;
            elem_of(c.elem, &gs[k].e);
            gs[k].scheme = (int)c.scheme;
            gs[k].rule = (int)c.rule;
            gs[k].block = c.block;
            ng++;
        }
        if (gs[k].w[c.dir])
            continue; /* listed twice: counted once, copied at the end */
        qwork *w = &ws[nw++];
        w->out = &out[i];
        w->dir = (int)c.dir;
        w->block = c.block;
        w->hmin = INT32_MAX;
        w->hmax = INT32_MIN;
        gs[k].w[c.dir] = w;
    }
    /* a reference rowwise work where a group counts columnwise or tiles without it (not for
     * the decoded values of one spec: no disagreement is counted then) */
    for (size_t k = 0; k < ng && !values; k++)
        if (!gs[k].w[AMPDIAG_QD_ROWWISE] && (gs[k].w[AMPDIAG_QD_COLWISE] || gs[k].w[AMPDIAG_QD_TILE])) {
            qwork *w = &ws[nw++];
            w->dir = AMPDIAG_QD_ROWWISE;
            w->block = gs[k].block;
            w->hmin = INT32_MAX;
            w->hmax = INT32_MIN;
            gs[k].w[AMPDIAG_QD_ROWWISE] = w;
        }
    /* the tensor's amax, where a scheme needs it */
    int need_amax = 0;
    for (size_t k = 0; k < ng; k++)
        need_amax |= gs[k].scheme == AMPDIAG_QS_CURRENT || gs[k].scheme == AMPDIAG_QS_NVFP4;
    if (need_amax && !(amax >= 0.0f)) {
        uint32_t ma = 0, mn = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t v = fbits(x[i]) & 0x7fffffffu;
            mn = v <= AMPDIAG_F32_INF && v > mn ? v : mn;
            ma = v > ma ? v : ma;
        }
        amax = bitsf(mn);
    }
    for (size_t k = 0; k < ng; k++) {
        tensor_scales(&gs[k], amax);
        if (gs[k].w[AMPDIAG_QD_TENSOR]) { /* the one scale, counted once */
            float mul;
            double dec;
            uint32_t ab = fbits(amax) & 0x7fffffffu;
            block_scale(&gs[k], ab, ab, gs[k].w[AMPDIAG_QD_TENSOR], &mul, &dec);
        }
    }

    /* the matrix, tile by tile: every group works on a tile while it is in the cache */
    for (size_t r0 = 0; r0 < mrows; r0 += QT) {
        size_t h = mrows - r0 < QT ? mrows - r0 : QT;
        if (mcols > QT)
            touch_panel(x + r0 * mcols, h * mcols);
        for (size_t c0 = 0; c0 < mcols; c0 += QT) {
            size_t wd = mcols - c0 < QT ? mcols - c0 : QT;
            const float *X = x + r0 * mcols + c0;
            qdest none = {NULL, values ? values + r0 * mcols + c0 : NULL, mcols, NULL, 0, 0}, first = none;
            size_t nr = c0 + QT < mcols ? r0 : r0 + QT, nc = c0 + QT < mcols ? c0 + QT : 0; /* the next tile */
            if (nr < mrows) {
                first.pf = x + nr * mcols + nc;
                first.pf_rows = mrows - nr < QT ? mrows - nr : QT;
                first.pf_bytes = (mcols - nc < QT ? mcols - nc : QT) * sizeof(float);
            }
            int pf = 1;
            for (size_t k = 0; k < ng; k++) {
                qgroup *g = &gs[k];
                int cmp = g->w[AMPDIAG_QD_COLWISE] || g->w[AMPDIAG_QD_TILE];
                for (int dd = 0; dd < AMPDIAG_NQDIRS; dd++) {
                    if (!g->w[dd])
                        continue;
                    qdest d = pf ? first : none;
                    pf = 0;
                    if (dd == AMPDIAG_QD_ROWWISE && cmp && !values)
                        d.ref = s->ref;
                    if (dd == AMPDIAG_QD_TENSOR)
                        pass_tile_tensor(g, g->w[dd], X, mcols, h, wd, s, &d);
                    else if (dd == AMPDIAG_QD_ROWWISE)
                        pass_tile_rows(g, g->w[dd], X, mcols, h, wd, s, &d);
                    else if (dd == AMPDIAG_QD_COLWISE)
                        pass_tile_cols(g, g->w[dd], X, mcols, h, wd, s, !values, &d);
                    else
                        pass_tile_tiles(g, g->w[dd], X, mcols, h, wd, s, !values, &d);
                }
            }
        }
    }
    /* the 1-D tail (or the whole of a 1-D tensor), blocked as a vector in every direction */
    if (tail > 0)
        for (size_t k = 0; k < ng; k++)
            for (int d = 0; d < AMPDIAG_NQDIRS; d++)
                if (gs[k].w[d])
                    pass_vec(&gs[k], gs[k].w[d], d == AMPDIAG_QD_TENSOR, x + mrows * mcols, tail, (size_t)gs[k].block, s,
                             values ? values + mrows * mcols : NULL);
    /* results */
    for (size_t k = 0; k < ng; k++)
        for (int d = 0; d < AMPDIAG_NQDIRS; d++)
            if (gs[k].w[d] && gs[k].w[d]->out)
                finish(gs[k].w[d], gs[k].w[d]->out, &gs[k]);
    /* duplicates: copy the first */
    for (size_t i = 0; i < nspec; i++)
        if (!out[i].computed)
            for (size_t j = 0; j < i; j++)
                if (out[j].computed && same_scheme(&out[j].spec, &out[i].spec)) {
                    ampdiag_qspec keep = out[i].spec;
                    out[i] = out[j];
                    out[i].spec = keep;
                    break;
                }
    free(gs);
    free(ws);
    free(s);
    return 0;
}

int ampdiag_quant_whatif(const float *x, size_t n, size_t rows, size_t cols, float amax, size_t nspec,
                         const ampdiag_qspec *spec, ampdiag_qstats *out)
{
    return quant_run(x, n, rows, cols, amax, nspec, spec, out, NULL);
}

int ampdiag_quant_values(const float *x, size_t n, size_t rows, size_t cols, float amax, const ampdiag_qspec *spec,
                         double *values, ampdiag_qstats *stats)
{
    ampdiag_qstats tmp;
    if (!values && n > 0)
        return -1;
    int rc = quant_run(x, n, rows, cols, amax, 1, spec, stats ? stats : &tmp, values);
    if (rc == 0 && !(stats ? stats : &tmp)->computed)
        for (size_t i = 0; i < n; i++)
            values[i] = NAN;
    return rc;
}

double ampdiag_qstats_sqnr_db(const ampdiag_qstats *q)
{
    if (!(q->sig_sq > 0))
        return NAN;
    return q->err_sq > 0 ? 10.0 * log10(q->sig_sq / q->err_sq) : INFINITY;
}

double ampdiag_qstats_rel_mse(const ampdiag_qstats *q)
{
    return q->sig_sq > 0 ? q->err_sq / q->sig_sq : NAN;
}

/* ------------------------------------------------------------------------------------------
 * The list syntax of --whatif
 * ------------------------------------------------------------------------------------------ */

#define K_ACTS 0x1u   /* activation */
#define K_AGRAD 0x2u  /* activation_grad */
#define K_W 0x4u      /* weight */
#define K_WGRAD 0x8u  /* weight_grad */
#define K_ALL (K_ACTS | K_AGRAD | K_W | K_WGRAD)

/* The cheap default of ampdiag run (docs/numerics.md, "Choosing what to count"). */
static const char default_list[] = "mxfp8@row,nvfp4@row";

const char *ampdiag_qspec_default(void) { return default_list; }

static const struct qname {
    const char *name;
    ampdiag_qscheme scheme;
    ampdiag_format elem, elem2; /* elem2: a second format (fp8-current counts both); FP32 = none */
} qnames[] = {
    {"fp8-current", AMPDIAG_QS_CURRENT, AMPDIAG_E4M3, AMPDIAG_E5M2},
    {"fp8-current-e4m3", AMPDIAG_QS_CURRENT, AMPDIAG_E4M3, AMPDIAG_FP32},
    {"fp8-current-e5m2", AMPDIAG_QS_CURRENT, AMPDIAG_E5M2, AMPDIAG_FP32},
    {"mxfp8", AMPDIAG_QS_MX, AMPDIAG_E4M3, AMPDIAG_FP32},
    {"mxfp8-e4m3", AMPDIAG_QS_MX, AMPDIAG_E4M3, AMPDIAG_FP32},
    {"mxfp8-e5m2", AMPDIAG_QS_MX, AMPDIAG_E5M2, AMPDIAG_FP32},
    {"mxfp6", AMPDIAG_QS_MX, AMPDIAG_E2M3, AMPDIAG_FP32},
    {"mxfp6-e2m3", AMPDIAG_QS_MX, AMPDIAG_E2M3, AMPDIAG_FP32},
    {"mxfp6-e3m2", AMPDIAG_QS_MX, AMPDIAG_E3M2, AMPDIAG_FP32},
    {"mxfp4", AMPDIAG_QS_MX, AMPDIAG_E2M1, AMPDIAG_FP32},
    {"mxfp4-e2m1", AMPDIAG_QS_MX, AMPDIAG_E2M1, AMPDIAG_FP32},
    {"nvfp4", AMPDIAG_QS_NVFP4, AMPDIAG_E2M1, AMPDIAG_FP32},
    {"fp8-block", AMPDIAG_QS_BLOCKWISE, AMPDIAG_E4M3, AMPDIAG_FP32},
    {"fp8-block-e4m3", AMPDIAG_QS_BLOCKWISE, AMPDIAG_E4M3, AMPDIAG_FP32},
    {"fp8-block-e5m2", AMPDIAG_QS_BLOCKWISE, AMPDIAG_E5M2, AMPDIAG_FP32},
};
#define NQNAMES (sizeof qnames / sizeof qnames[0])

/* "all": every scheme once with its recipe's defaults, and MXFP8 under both rules. */
static const char all_list[] = "fp8-current,mxfp8,mxfp8:rceil,mxfp8-e5m2,mxfp6,mxfp6-e3m2,mxfp4,nvfp4,fp8-block";

static ampdiag_qrule default_rule(ampdiag_qscheme s)
{
    return s == AMPDIAG_QS_MX ? AMPDIAG_QR_FLOOR : s == AMPDIAG_QS_NVFP4 ? AMPDIAG_QR_E4M3
         : s == AMPDIAG_QS_BLOCKWISE ? AMPDIAG_QR_POW2 : AMPDIAG_QR_FP32;
}

/* Add one spec (checked), merging a duplicate's kinds. */
static int add_spec(ampdiag_qspec *out, size_t max, size_t *n, ampdiag_qspec c, const char *item, char *err,
                    size_t errlen)
{
    char why[160];
    if (ampdiag_qspec_check(&c, why, sizeof why) != 0) {
        if (err && errlen)
            snprintf(err, errlen, "'%s': %s", item, why);
        return -1;
    }
    for (size_t i = 0; i < *n; i++)
        if (same_scheme(&out[i], &c)) {
            out[i].kinds |= c.kinds;
            return 0;
        }
    if (*n >= max) {
        if (err && errlen)
            snprintf(err, errlen, "'%s': more than %zu schemes", item, max);
        return -1;
    }
    out[(*n)++] = c;
    return 0;
}

static int parse_item(const char *item, ampdiag_qspec *out, size_t max, size_t *n, char *err, size_t errlen, int depth)
{
    if (strcmp(item, "none") == 0 || item[0] == '\0')
        return 0;
    if (depth == 0 && (strcmp(item, "default") == 0 || strcmp(item, "all") == 0)) {
        const char *list = strcmp(item, "all") == 0 ? all_list : default_list;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", list);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (parse_item(t, out, max, n, err, errlen, depth + 1) != 0)
                return -1;
        return 0;
    }
    char name[64], rule[32] = "", dirs[64] = "";
    size_t ln = strcspn(item, ":@");
    if (ln == 0 || ln >= sizeof name)
        return fail(err, errlen, "'%s': expected a scheme (fp8-current, mxfp8, mxfp6, mxfp4, nvfp4, fp8-block, ...)%s",
                    item, NULL);
    memcpy(name, item, ln);
    name[ln] = '\0';
    const char *p = item + ln;
    if (*p == ':') {
        size_t lr = strcspn(p + 1, "@");
        if (lr == 0 || lr >= sizeof rule)
            return fail(err, errlen, "'%s': expected a scale rule after ':' (floor, rceil, fp32, pow2)%s", item, NULL);
        memcpy(rule, p + 1, lr);
        rule[lr] = '\0';
        p += 1 + lr;
    }
    if (*p == '@') {
        if (strlen(p + 1) == 0 || strlen(p + 1) >= sizeof dirs)
            return fail(err, errlen, "'%s': expected directions after '@' (row, col, 2d, joined by '+')%s", item, NULL);
        snprintf(dirs, sizeof dirs, "%s", p + 1);
    }
    const struct qname *q = NULL;
    for (size_t i = 0; i < NQNAMES; i++)
        if (strcasecmp(qnames[i].name, name) == 0)
            q = &qnames[i];
    if (!q)
        return fail(err, errlen, "'%s': unknown scheme '%s' (fp8-current, mxfp8, mxfp8-e5m2, mxfp6, mxfp6-e3m2, "
                    "mxfp4, nvfp4, fp8-block, fp8-block-e5m2, or none, default, all)", item, name);
    ampdiag_qrule r = default_rule(q->scheme);
    if (rule[0]) {
        int v = ampdiag_qrule_parse(rule);
        if (v < 0)
            return fail(err, errlen, "'%s': unknown scale rule '%s' (floor, rceil, e4m3, fp32, pow2)", item, rule);
        r = (ampdiag_qrule)v;
    }
    for (int e = 0; e < 2; e++) {
        ampdiag_format elem = e == 0 ? q->elem : q->elem2;
        if (elem == AMPDIAG_FP32)
            continue;
        ampdiag_qspec c = {elem, q->scheme, r, AMPDIAG_QD_TENSOR, 0, K_ALL};
        if (q->scheme == AMPDIAG_QS_CURRENT) {
            if (dirs[0])
                return fail(err, errlen, "'%s': current scaling has one scale per tensor: no '@'%s", item, NULL);
            if (add_spec(out, max, n, c, item, err, errlen) != 0)
                return -1;
            continue;
        }
        if (!dirs[0]) { /* the recipe's directions */
            c.dir = AMPDIAG_QD_ROWWISE;
            if (add_spec(out, max, n, c, item, err, errlen) != 0)
                return -1;
            c.dir = AMPDIAG_QD_COLWISE;
            if (add_spec(out, max, n, c, item, err, errlen) != 0)
                return -1;
            if (q->scheme != AMPDIAG_QS_MX) {
                c.dir = AMPDIAG_QD_TILE;
                c.kinds = K_W;
                if (add_spec(out, max, n, c, item, err, errlen) != 0)
                    return -1;
            }
            continue;
        }
        char buf[64];
        snprintf(buf, sizeof buf, "%s", dirs);
        for (char *save = NULL, *t = strtok_r(buf, "+", &save); t; t = strtok_r(NULL, "+", &save)) {
            char *slash = strchr(t, '/');
            c.block = 0;
            if (slash) {
                char *end;
                long b = strtol(slash + 1, &end, 10);
                if (slash[1] == '\0' || *end != '\0' || b < 1 || b > QT)
                    return fail(err, errlen, "'%s': a block length after '/' is 1 .. 128%s", item, NULL);
                c.block = (int)b;
                *slash = '\0';
            }
            if (strcmp(t, "row") == 0)
                c.dir = AMPDIAG_QD_ROWWISE;
            else if (strcmp(t, "col") == 0)
                c.dir = AMPDIAG_QD_COLWISE;
            else if (strcmp(t, "2d") == 0)
                c.dir = AMPDIAG_QD_TILE;
            else
                return fail(err, errlen, "'%s': unknown direction '%s' (row, col, 2d)", item, t);
            if (add_spec(out, max, n, c, item, err, errlen) != 0)
                return -1;
        }
    }
    return 0;
}

int ampdiag_qspec_parse(const char *list, ampdiag_qspec *out, size_t max, size_t *n, char *err, size_t errlen)
{
    *n = 0;
    if (!list)
        return fail(err, errlen, "no list%s%s", NULL, NULL);
    size_t len = strlen(list);
    char *buf = malloc(len + 1);
    if (!buf)
        return fail(err, errlen, "out of memory%s%s", NULL, NULL);
    memcpy(buf, list, len + 1);
    int rc = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        char *e = t + strlen(t);
        while (e > t && e[-1] == ' ') *--e = '\0';
        rc = parse_item(t, out, max, n, err, errlen, 0);
    }
    free(buf);
    if (rc != 0)
        *n = 0;
    return rc;
}

int ampdiag_qspec_name(const ampdiag_qspec *s, char *buf, size_t len)
{
    const char *sn = NULL;
    for (size_t i = 0; i < NQNAMES; i++)
        if (qnames[i].scheme == s->scheme && qnames[i].elem == s->elem && qnames[i].elem2 == AMPDIAG_FP32 &&
            strchr(qnames[i].name + 3, '-')) /* the spelled-out name: "mxfp8-e4m3", not "mxfp8" */
            sn = qnames[i].name;
    if (!sn && s->scheme == AMPDIAG_QS_NVFP4)
        sn = "nvfp4";
    if (!sn)
        sn = "?";
    const char *rn = ampdiag_qrule_name((int)s->rule);
    static const char *const dn[AMPDIAG_NQDIRS] = {"", "row", "col", "2d"};
    int own = s->block == 0 || s->block == (s->scheme == AMPDIAG_QS_MX ? 32 : s->scheme == AMPDIAG_QS_NVFP4 ? 16 : 128);
    const char *d = (int)s->dir >= 0 && s->dir < AMPDIAG_NQDIRS ? dn[s->dir] : "?";
    if (s->dir == AMPDIAG_QD_TENSOR)
        return snprintf(buf, len, "%s:%s", sn, rn ? rn : "?");
    if (own)
        return snprintf(buf, len, "%s:%s@%s", sn, rn ? rn : "?", d);
    return snprintf(buf, len, "%s:%s@%s/%d", sn, rn ? rn : "?", d, s->block);
}
