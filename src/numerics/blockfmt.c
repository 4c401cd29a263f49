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

/* floor(log2 |v|) of a finite non-zero double. */
static int ilog2d(double v)
{
    int e;
    frexp(v, &e);
    return e - 1;
}

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
        *dec = ldexp(1.0, E);
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
        float sdb = fminf(a / 6.0f * g->s_enc, FLT_MAX); /* (amax_b / 6) x S_enc */
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
            hist_add(w, ilog2d(sb));
        *mul = fminf(1.0f / (sb * g->s_dec), FLT_MAX); /* 1 / (s_b x S_dec) */
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
                hist_add(w, ilog2d((double)(1.0f / s)));
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
            hist_add(w, ilog2d((double)(1.0f / s)));
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

/* Values x[0..w) with per-value factors: quantise, decode, count into a; deq (may be NULL) :=
 * the decoded values (NaN where not counted); cmp (may be NULL): the reference's decoded
 * values, to count the disagreement. */
static void qrow(const float *x, size_t w, const float *mul, const double *dec, const elemfmt *f, qacc *a,
                 double *deq, const double *cmp)
{
    for (size_t j = 0; j < w; j++) {
        float xv = x[j];
        double d = dec[j];
        if ((fbits(xv) & 0x7f800000u) == 0x7f800000u || d != d) {
            if ((fbits(xv) & 0x7f800000u) == 0x7f800000u)
                a->nonfinite++;
            else
                a->poisoned++;
            if (deq) deq[j] = NAN;
            continue;
        }
        int sat;
        float q = q_elem(xv * mul[j], f, &sat);
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

/* The largest |x| bit patterns of x[0..n): all (NaN the largest) and not NaN. */
static void amax_bits(const float *x, size_t n, uint32_t *m_all, uint32_t *m_nn)
{
    uint32_t ma = 0, mn = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = fbits(x[i]) & 0x7fffffffu;
        ma = a > ma ? a : ma;
        mn = a <= AMPDIAG_F32_INF && a > mn ? a : mn;
    }
    *m_all = ma;
    *m_nn = mn;
}

/* Scratch of a call. */
typedef struct qscratch {
    float mul[QT];
    double dec[QT];
    uint32_t ca[QT], cn[QT]; /* column maxima */
    double ref[QT * QT];     /* the rowwise pass's decoded values of the tile */
} qscratch;

/* A 1-D run x[0..n) in blocks of b (b = 0: one block with the tensor's scale). */
static void pass_vec(const qgroup *g, qwork *w, const float *x, size_t n, size_t b, qscratch *s)
{
    for (size_t k = 0; k < n; k += b) { /* b <= QT */
        size_t len = n - k < b ? n - k : b;
        uint32_t ma, mn;
        amax_bits(x + k, len, &ma, &mn);
        float mul;
        double dec;
        block_scale(g, ma, mn, w, &mul, &dec);
        for (size_t j = 0; j < len; j++) {
            s->mul[j] = mul;
            s->dec[j] = dec;
        }
        qrow(x + k, len, s->mul, s->dec, &g->e, &w->acc, NULL, NULL);
    }
}

/* The tile X (h x wd, leading dimension ld) of a matrix. */
static void pass_tile_tensor(const qgroup *g, qwork *w, const float *X, size_t ld, size_t h, size_t wd, qscratch *s,
                             float mul, double dec)
{
    for (size_t j = 0; j < wd; j++) {
        s->mul[j] = mul;
        s->dec[j] = dec;
    }
    for (size_t i = 0; i < h; i++)
        qrow(X + i * ld, wd, s->mul, s->dec, &g->e, &w->acc, NULL, NULL);
}

static void pass_tile_rows(const qgroup *g, qwork *w, const float *X, size_t ld, size_t h, size_t wd, qscratch *s,
                           int keep)
{
    size_t b = (size_t)g->block;
    for (size_t i = 0; i < h; i++) {
        const float *row = X + i * ld;
        for (size_t k = 0; k < wd; k += b) {
            size_t len = wd - k < b ? wd - k : b;
            uint32_t ma, mn;
            amax_bits(row + k, len, &ma, &mn);
            float mul;
            double dec;
            block_scale(g, ma, mn, w, &mul, &dec);
            for (size_t j = k; j < k + len; j++) {
                s->mul[j] = mul;
                s->dec[j] = dec;
            }
        }
        qrow(row, wd, s->mul, s->dec, &g->e, &w->acc, keep ? s->ref + i * QT : NULL, NULL);
    }
}

static void pass_tile_cols(const qgroup *g, qwork *w, const float *X, size_t ld, size_t h, size_t wd, qscratch *s,
                           int cmp)
{
    size_t b = (size_t)g->block;
    for (size_t i0 = 0; i0 < h; i0 += b) {
        size_t i1 = h - i0 < b ? h : i0 + b;
        for (size_t j = 0; j < wd; j++)
            s->ca[j] = s->cn[j] = 0;
        for (size_t i = i0; i < i1; i++) {
            const float *row = X + i * ld;
            for (size_t j = 0; j < wd; j++) {
                uint32_t a = fbits(row[j]) & 0x7fffffffu;
                s->ca[j] = a > s->ca[j] ? a : s->ca[j];
                s->cn[j] = a <= AMPDIAG_F32_INF && a > s->cn[j] ? a : s->cn[j];
            }
        }
        for (size_t j = 0; j < wd; j++)
            block_scale(g, s->ca[j], s->cn[j], w, &s->mul[j], &s->dec[j]);
        for (size_t i = i0; i < i1; i++)
            qrow(X + i * ld, wd, s->mul, s->dec, &g->e, &w->acc, NULL, cmp ? s->ref + i * QT : NULL);
    }
}

static void pass_tile_tiles(const qgroup *g, qwork *w, const float *X, size_t ld, size_t h, size_t wd, qscratch *s,
                            int cmp)
{
    size_t b = (size_t)g->block;
    for (size_t i0 = 0; i0 < h; i0 += b) {
        size_t i1 = h - i0 < b ? h : i0 + b;
        for (size_t k = 0; k < wd; k += b) {
            size_t len = wd - k < b ? wd - k : b;
            uint32_t ma = 0, mn = 0;
            for (size_t i = i0; i < i1; i++) {
                uint32_t a, n;
                amax_bits(X + i * ld + k, len, &a, &n);
                ma = a > ma ? a : ma;
                mn = n > mn ? n : mn;
            }
            float mul;
            double dec;
            block_scale(g, ma, mn, w, &mul, &dec);
            for (size_t j = k; j < k + len; j++) {
                s->mul[j] = mul;
                s->dec[j] = dec;
            }
        }
        for (size_t i = i0; i < i1; i++)
            qrow(X + i * ld, wd, s->mul, s->dec, &g->e, &w->acc, NULL, cmp ? s->ref + i * QT : NULL);
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

int ampdiag_quant_whatif(const float *x, size_t n, size_t rows, size_t cols, float amax, size_t nspec,
                         const ampdiag_qspec *spec, ampdiag_qstats *out)
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

    /* groups and their works */
    qgroup *gs = calloc(nspec ? nspec : 1, sizeof *gs);
    qwork *ws = calloc(nspec ? 2 * nspec : 1, sizeof *ws);
    qscratch *s = malloc(sizeof *s);
    if (!gs || !ws || !s) {
        free(gs);
        free(ws);
        free(s);
        return -1;
    }
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
        if (gs[k].w[c.dir]) { /* listed twice: counted once, copied at the end */
            continue;
        }
        qwork *w = &ws[nw++];
        w->out = &out[i];
        w->dir = (int)c.dir;
        w->block = c.block;
        w->hmin = INT32_MAX;
        w->hmax = INT32_MIN;
        gs[k].w[c.dir] = w;
    }
    /* a reference rowwise work where a group counts columnwise or tiles without it */
    for (size_t k = 0; k < ng; k++)
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
        uint32_t ma, mn;
        amax_bits(x, n, &ma, &mn);
        amax = bitsf(mn);
    }
    for (size_t k = 0; k < ng; k++)
        tensor_scales(&gs[k], amax);

    /* the matrix, tile by tile */
    for (size_t r0 = 0; r0 < mrows; r0 += QT) {
        size_t h = mrows - r0 < QT ? mrows - r0 : QT;
        for (size_t c0 = 0; c0 < mcols; c0 += QT) {
            size_t wd = mcols - c0 < QT ? mcols - c0 : QT;
            const float *X = x + r0 * mcols + c0;
            for (size_t k = 0; k < ng; k++) {
                qgroup *g = &gs[k];
                if (g->w[AMPDIAG_QD_TENSOR]) {
                    float mul;
                    double dec;
                    /* the one scale, counted as one block at the first tile */
                    qwork *w = g->w[AMPDIAG_QD_TENSOR];
                    if (r0 == 0 && c0 == 0) {
                        uint32_t ab = fbits(amax) & 0x7fffffffu;
                        block_scale(g, ab, ab, w, &mul, &dec);
                    }
                    mul = g->s_tensor;
                    dec = (double)(1.0f / g->s_tensor);
                    pass_tile_tensor(g, w, X, mcols, h, wd, s, mul, dec);
                }
                int cmp = g->w[AMPDIAG_QD_COLWISE] || g->w[AMPDIAG_QD_TILE];
                if (g->w[AMPDIAG_QD_ROWWISE])
                    pass_tile_rows(g, g->w[AMPDIAG_QD_ROWWISE], X, mcols, h, wd, s, cmp);
                if (g->w[AMPDIAG_QD_COLWISE])
                    pass_tile_cols(g, g->w[AMPDIAG_QD_COLWISE], X, mcols, h, wd, s, 1);
                if (g->w[AMPDIAG_QD_TILE])
                    pass_tile_tiles(g, g->w[AMPDIAG_QD_TILE], X, mcols, h, wd, s, 1);
            }
        }
    }
    /* the 1-D tail (or the whole of a 1-D tensor) */
    if (tail > 0)
        for (size_t k = 0; k < ng; k++) {
            qgroup *g = &gs[k];
            const float *t = x + mrows * mcols;
            for (int d = 0; d < AMPDIAG_NQDIRS; d++) {
                qwork *w = g->w[d];
                if (!w)
                    continue;
                if (d == AMPDIAG_QD_TENSOR) {
                    if (mrows * mcols == 0) {
                        float mul;
                        double dec;
                        uint32_t ab = fbits(amax) & 0x7fffffffu;
                        block_scale(g, ab, ab, w, &mul, &dec);
                    }
                    float ml = g->s_tensor;
                    double dc = (double)(1.0f / g->s_tensor);
                    for (size_t j = 0; j < QT; j++) {
                        s->mul[j] = ml;
                        s->dec[j] = dc;
                    }
                    for (size_t c = 0; c < tail; c += QT)
                        qrow(t + c, tail - c < QT ? tail - c : QT, s->mul, s->dec, &g->e, &w->acc, NULL, NULL);
                } else {
                    pass_vec(g, w, t, tail, (size_t)g->block, s);
                }
            }
        }
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
