/*
 * optim_cpu.c - the CPU backend's optimizer operations: SGD with momentum and AdamW updates,
 * the gradient norm with its non-finite count, and the statistics of an update (lost updates
 * as stored and if the weights were FP16 / BF16).
 *
 * SGD follows torch.optim.SGD (dampening 0): g' = g + wd w; buf = momentum buf + g' (buf = g'
 * on the first step); dw = -lr buf. AdamW follows torch.optim.AdamW: w -= lr wd w; m = b1 m +
 * (1-b1) g; v = b2 v + (1-b2) g^2; dw = -lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
 * When the state format is FP16 or BF16 every intermediate of the state update is rounded to
 * it, as an optimizer running in that format computes it; in particular eps itself is rounded
 * (1e-8 is 0 in FP16), so a zero second moment gives 0/0 = NaN, as it does in practice.
 *
 * The update goes over the parameters in cache-sized blocks; on traced steps it copies, block
 * by block as the values pass through, the weights it starts from and the changes it intends
 * (dw_keep, w_keep), from which update_stats takes its figures later on the tracer's thread.
 */
#include "backend/cpu/cpu_internal.h"
#include "numerics/numfmt.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define OPTIM_BLOCK 1024 /* parameters per cache block */

static inline float rnd(ampdiag_format f, unsigned flags, float x)
{
    if (f == AMPDIAG_FP32)
        return x;
    if (flags & AMPDIAG_ROUND_FTZ)
        return f == AMPDIAG_FP16 ? ampdiag_fp16_rne_ftz(x) : ampdiag_bf16_rne_ftz(x);
    return f == AMPDIAG_FP16 ? ampdiag_fp16_rne(x) : ampdiag_bf16_rne(x);
}

/* AdamW's scalars for step t, computed in double as PyTorch computes them from Python floats,
 * then held as the float scalars the element loop uses. */
typedef struct adamw_coef {
    float b1, b2, omb1, omb2; /* beta1, beta2, 1 - beta1, 1 - beta2 */
    float bc1, bc2, sqrt_bc2; /* bias corrections 1 - beta^t and sqrt(1 - beta2^t) */
    float step;               /* -lr / bc1 */
    float lrwd;               /* lr * weight_decay */
} adamw_coef;

static adamw_coef adamw_coefficients(const bk_optim *c, long t, float lr)
{
    double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
    adamw_coef k = {(float)c->beta1, (float)c->beta2, (float)(1.0 - c->beta1),
                    (float)(1.0 - c->beta2), (float)bc1, (float)bc2, (float)sqrt(bc2),
                    (float)(-(double)lr / bc1), (float)(c->weight_decay * (double)lr)};
    return k;
}

/* Intended changes dw[0..k) for parameters w[0..k) with gradients (g * ginv) * gscale and state
 * m, v (updated in place). */
CPU_CLONES
static void compute_dw(const backend *bk, const bk_optim *c, long t, const float *w, const float *g,
                       float *m, float *v, size_t k, float lr, float ginv, float gscale, float *dw)
{
    ampdiag_format sf = c->state_fmt;
    unsigned fl = c->round_flags;
    if (c->kind == BK_SGD) {
        /* buf = rnd(momentum buf + g'), or rnd(g') on the first step: an FP32 loop that
         * vectorises, then the backend's rounding pass over the block */
        float mom = (float)c->momentum, wd = (float)c->weight_decay;
        int first = t <= 1;
        for (size_t i = 0; i < k; i++) {
            float gi = (g[i] * ginv) * gscale + wd * w[i];
            m[i] = first ? gi : mom * m[i] + gi;
        }
        cpu_round(bk, m, m, k, bk_rnd_make(sf, fl));
        for (size_t i = 0; i < k; i++)
            dw[i] = -lr * m[i];
        return;
    }
    /* The coefficients are computed in double and then used as float scalars, as PyTorch does
     * with its Python-float hyperparameters (1 - beta2 is 0.001f, not 1 - 0.999f = 0.00099998713;
     * the bias corrections and the step size -lr / bc1 likewise). */
    const adamw_coef k_ = adamw_coefficients(c, t, lr);
    const float b1 = k_.b1, b2 = k_.b2, omb1 = k_.omb1, omb2 = k_.omb2;
    const float bc1 = k_.bc1, bc2 = k_.bc2, wd = k_.lrwd;
    float eps = rnd(sf, fl, (float)c->eps);
    if (sf == AMPDIAG_FP32) {
        /* torch.optim.AdamW (foreach, CPU): m.lerp_(g, 1 - b1); v = v * b2 + (1 - b2) g g;
         * denom = sqrt(v) / sqrt(bc2) + eps; w += (-lr / bc1) * (m / denom) after w *= 1 - lr wd */
        const float sbc2 = k_.sqrt_bc2, step = k_.step;
        for (size_t i = 0; i < k; i++) {
            float gi = (g[i] * ginv) * gscale;
            m[i] = m[i] + omb1 * (gi - m[i]);
            v[i] = b2 * v[i] + omb2 * gi * gi;
            float denom = sqrtf(v[i]) / sbc2 + eps;
            dw[i] = step * (m[i] / denom) - wd * w[i];
        }
        return;
    }
    for (size_t i = 0; i < k; i++) {
        float gi = rnd(sf, fl, (g[i] * ginv) * gscale);
        m[i] = rnd(sf, fl, rnd(sf, fl, b1 * m[i]) + rnd(sf, fl, omb1 * gi));
        v[i] = rnd(sf, fl, rnd(sf, fl, b2 * v[i]) + rnd(sf, fl, omb2 * rnd(sf, fl, gi * gi)));
        float mhat = rnd(sf, fl, m[i] / bc1);
        float vhat = rnd(sf, fl, v[i] / bc2);
        float denom = rnd(sf, fl, rnd(sf, fl, sqrtf(vhat)) + eps);
        dw[i] = rnd(sf, fl, -lr * rnd(sf, fl, mhat / denom)) - wd * w[i];
    }
}

void cpu_optim_step(const backend *bk, const bk_optim *c, long t, float *w, const float *g, float *m, float *v,
                    size_t n, double lr, float ginv, float gscale, float *dw_keep, float *w_keep,
                    float *w_copy, uint64_t *nonfinite)
{
    float dwb[OPTIM_BLOCK];
    ampdiag_format wf = c->weight_fmt;
    unsigned fl = c->round_flags;
    float flr = (float)lr;
    for (size_t b = 0; b < n; b += OPTIM_BLOCK) {
        size_t k = n - b < OPTIM_BLOCK ? n - b : OPTIM_BLOCK;
        float *wb = w + b;
        float *dw = dw_keep ? dw_keep + b : dwb;
        compute_dw(bk, c, t, wb, g + b, m + b, v ? v + b : NULL, k, flr, ginv, gscale, dw);
        if (w_keep)
            memcpy(w_keep + b, wb, k * sizeof *wb);
        for (size_t i = 0; i < k; i++)
            wb[i] += dw[i];
        cpu_round(bk, wb, wb, k, bk_rnd_make(wf, fl));
        if (w_copy)
            cpu_round(bk, w_copy + b, wb, k, bk_rnd_make(c->copy_fmt, fl));
        if (nonfinite)
            *nonfinite += cpu_count_nonfinite(bk, wb, k);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define OPTIM_X86 1
#define UPD_TARGET __attribute__((target("avx2,fma,f16c")))

/* fl16(v) and bf16(v) in lanes, the same bits as ampdiag_round_array (numfmt.c). */
UPD_TARGET static inline __m256 v_fp16(__m256 v, int ftz)
{
    __m256 r = _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (ftz) {
        const __m256 sign = _mm256_set1_ps(-0.0f);
        __m256 tiny = _mm256_cmp_ps(_mm256_andnot_ps(sign, r), _mm256_set1_ps(0x1p-14f), _CMP_LT_OQ);
        r = _mm256_blendv_ps(r, _mm256_and_ps(r, sign), tiny);
    }
    return r;
}

/* bf16(v) for v not NaN (a NaN whose payload carries into the exponent would come out as a
 * number: the caller masks NaN lanes out; inf and overflow come out right) */
UPD_TARGET static inline __m256 v_bf16_num(__m256 v, int ftz)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)),
                                 _mm256_set1_epi32((int)0xffff0000u));
    if (ftz) {
        __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
        r = _mm256_blendv_epi8(r, _mm256_and_si256(u, _mm256_set1_epi32((int)0x80000000u)),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32(0x00800000), a));
    }
    return _mm256_castsi256_ps(r);
}

/* Lanes where an update counts: d != 0 and neither w nor d NaN (with a NaN the sums are NaN and
 * never equal, so such lanes are never lost, and the BF16 rounding need not be NaN-safe). Two
 * compares that valgrind runs right: ORD_Q(w, d), and d != 0 with NEQ_UQ (true for a NaN d,
 * but those lanes are out already); _CMP_NEQ_OQ, which would say "d != 0, not NaN" in one,
 * runs as NEQ_UQ under valgrind 3.19, and a NaN d of payload 0x7fffffff then counts as lost
 * (its BF16 rounding carries into the sign: -0, equal to a zero weight). */
UPD_TARGET static inline __m256 counts_mask(__m256 w, __m256 d)
{
    return _mm256_and_ps(_mm256_cmp_ps(w, d, _CMP_ORD_Q),
                         _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_NEQ_UQ));
}

/* Lanes of k values (a multiple of 8) where fl(fl(w) + d) == fl(w) in format f (FP16 or BF16),
 * d != 0: one loop per format keeps each iteration short, so that the conversions' latencies
 * overlap across iterations. */
UPD_TARGET static inline uint64_t lost_if_avx2(const float *wb, const float *db, size_t k, ampdiag_format f, int ftz)
{
    __m256i c = _mm256_setzero_si256();
    for (size_t i = 0; i < k; i += 8) {
        __m256 w = _mm256_loadu_ps(wb + i), d = _mm256_loadu_ps(db + i);
        __m256 wr, sr;
        if (f == AMPDIAG_FP16) {
            wr = v_fp16(w, ftz);
            sr = v_fp16(_mm256_add_ps(wr, d), ftz);
        } else {
            wr = v_bf16_num(w, ftz);
            sr = v_bf16_num(_mm256_add_ps(wr, d), ftz);
        }
        c = _mm256_sub_epi32(c, _mm256_castps_si256(_mm256_and_ps(counts_mask(w, d), _mm256_cmp_ps(sr, wr, _CMP_EQ_OQ))));
    }
    uint32_t t[8];
    _mm256_storeu_si256((__m256i *)(void *)t, c);
    uint64_t n = 0;
    for (int l = 0; l < 8; l++)
        n += t[l];
    return n;
}

/* The counts of optim_update_stats over k values (a multiple of 8) of w_old and dw: lost as
 * stored, lost if FP16, lost if BF16. */
UPD_TARGET static void update_pass_avx2(const float *wb, const float *db, size_t k, ampdiag_format wf, int ftz,
                                        uint64_t cnt[3])
{
    cnt[1] = lost_if_avx2(wb, db, k, AMPDIAG_FP16, ftz);
    cnt[2] = lost_if_avx2(wb, db, k, AMPDIAG_BF16, ftz);
    __m256i ca = _mm256_setzero_si256();
    for (size_t i = 0; i < k; i += 8) {
        __m256 w = _mm256_loadu_ps(wb + i), d = _mm256_loadu_ps(db + i);
        __m256 sa = _mm256_add_ps(w, d);
        if (wf == AMPDIAG_FP16)
            sa = v_fp16(sa, ftz);
        else if (wf == AMPDIAG_BF16)
            sa = v_bf16_num(sa, ftz);
        ca = _mm256_sub_epi32(ca, _mm256_castps_si256(_mm256_and_ps(counts_mask(w, d), _mm256_cmp_ps(sa, w, _CMP_EQ_OQ))));
    }
    uint32_t t[8];
    _mm256_storeu_si256((__m256i *)(void *)t, ca);
    cnt[0] = 0;
    for (int l = 0; l < 8; l++)
        cnt[0] += t[l];
}

/* The vector pass runs unless the CPU lacks it, AMPDIAG_ROUND_IMPL=generic (read once) or
 * backend_cpu_force_generic(1). */
static int update_pass_simd(void)
{
    static _Atomic int have = -1;
    int h = atomic_load_explicit(&have, memory_order_relaxed);
    if (h < 0) {
        const char *want = getenv("AMPDIAG_ROUND_IMPL");
        h = !(want && strcmp(want, "generic") == 0) && __builtin_cpu_supports("avx2") &&
            __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
        atomic_store_explicit(&have, h, memory_order_relaxed);
    }
    return h && !cpu_simd_forced_off();
}

/* The same pass in 16 lanes where the CPU has AVX-512F: half the instructions a value (the
 * conversions dominate), the same bits (t_optim, t_backend_ops). */
#define UPD512_TARGET __attribute__((target("avx512f")))

UPD512_TARGET static inline __m512 v512_fp16(__m512 v, int ftz)
{
    __m512 r = _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    if (ftz) {
        __m512i u = _mm512_castps_si512(r);
        __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_abs_ps(r), _mm512_set1_ps(0x1p-14f), _CMP_LT_OQ);
        r = _mm512_castsi512_ps(_mm512_mask_and_epi32(u, tiny, u, _mm512_set1_epi32((int)0x80000000u)));
    }
    return r;
}

/* bf16(v) for v not NaN, as v_bf16_num */
UPD512_TARGET static inline __m512 v512_bf16_num(__m512 v, int ftz)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)),
                                 _mm512_set1_epi32((int)0xffff0000u));
    if (ftz) {
        __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
        __mmask16 tiny = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(0x00800000), a);
        r = _mm512_mask_and_epi32(r, tiny, u, _mm512_set1_epi32((int)0x80000000u));
    }
    return _mm512_castsi512_ps(r);
}

/* fl(v) in format f (FP32: v itself) */
UPD512_TARGET static inline __m512 v512_round(__m512 v, ampdiag_format f, int ftz)
{
    return f == AMPDIAG_FP16 ? v512_fp16(v, ftz) : f == AMPDIAG_BF16 ? v512_bf16_num(v, ftz) : v;
}

/* The counts of update_pass_avx2 over k values (a multiple of 16), one loop per count. */
UPD512_TARGET static void update_pass_avx512(const float *wb, const float *db, size_t k, ampdiag_format wf, int ftz,
                                             uint64_t cnt[3])
{
    static const ampdiag_format fmts[3] = {AMPDIAG_FP32, AMPDIAG_FP16, AMPDIAG_BF16};
    for (int j = 0; j < 3; j++) {
        ampdiag_format f = j == 0 ? wf : fmts[j];
        uint64_t n = 0;
        for (size_t i = 0; i < k; i += 16) {
            __m512 w = _mm512_loadu_ps(wb + i), d = _mm512_loadu_ps(db + i);
            __m512 wr = j == 0 ? w : v512_round(w, f, ftz); /* lost as stored: against w as held */
            __m512 sr = v512_round(_mm512_add_ps(wr, d), f, ftz);
            __mmask16 m = _mm512_cmp_ps_mask(w, d, _CMP_ORD_Q) & _mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ) &
                          _mm512_cmp_ps_mask(sr, wr, _CMP_EQ_OQ);
            n += (uint64_t)__builtin_popcount((unsigned)m);
        }
        cnt[j] = n;
    }
}

/* The 16-lane pass where the CPU has AVX-512F (and the AVX2 pass runs). */
static int update_pass_avx512_ok(void)
{
    static _Atomic int have = -1;
    int h = atomic_load_explicit(&have, memory_order_relaxed);
    if (h < 0) {
        h = __builtin_cpu_supports("avx512f");
        atomic_store_explicit(&have, h, memory_order_relaxed);
    }
    return h;
}
#endif

void cpu_update_stats(const backend *bk, const bk_optim *c, const float *w_old, const float *dw, size_t n,
                      bk_update_stats *st, ampdiag_hist *hu)
{
    ampdiag_format wf = c->weight_fmt;
    unsigned fl = c->round_flags;
    float wr[OPTIM_BLOCK], sum[OPTIM_BLOCK];
    static const ampdiag_format what_if[2] = {AMPDIAG_FP16, AMPDIAG_BF16};
    ampdiag_tstats_accumulate(&st->update, hu, dw, n);
    int ftz = (fl & AMPDIAG_ROUND_FTZ) != 0;
    for (size_t b = 0; b < n; b += OPTIM_BLOCK) {
        size_t k = n - b < OPTIM_BLOCK ? n - b : OPTIM_BLOCK;
        const float *wb = w_old + b, *db = dw + b;
        uint64_t lost = 0, lw[2] = {0, 0};
        size_t done = 0;
#ifdef OPTIM_X86
        size_t kv = k - k % 8;
        int wide = update_pass_simd() && update_pass_avx512_ok();
        if (wide)
            kv = k - k % 16;
        if (update_pass_simd() && kv > 0) {
            uint64_t cnt[3];
            if (wide)
                update_pass_avx512(wb, db, kv, wf, ftz, cnt);
            else
                update_pass_avx2(wb, db, kv, wf, ftz, cnt);
            lost = cnt[0];
            lw[0] = cnt[1];
            lw[1] = cnt[2];
            done = kv;
        }
#endif
        if (done < k) {
            /* the plain definition, over what the vector pass did not take */
            const float *wt = wb + done, *dt = db + done;
            size_t kt = k - done;
            /* what-if: would dw be lost with weights stored in FP16 / BF16? wr = fl(w), sum =
             * fl(wr + dw): lost when dw != 0 and sum == wr */
            for (int f = 0; f < 2; f++) {
                cpu_round(bk, wr, wt, kt, bk_rnd_make(what_if[f], fl));
                for (size_t i = 0; i < kt; i++)
                    sum[i] = wr[i] + dt[i];
                cpu_round(bk, sum, sum, kt, bk_rnd_make(what_if[f], fl));
                for (size_t i = 0; i < kt; i++)
                    lw[f] += (dt[i] != 0.0f) & (sum[i] == wr[i]);
            }
            /* the update as optim_update stored it: lost when the stored weight did not change */
            for (size_t i = 0; i < kt; i++)
                sum[i] = wt[i] + dt[i];
            cpu_round(bk, sum, sum, kt, bk_rnd_make(wf, fl));
            for (size_t i = 0; i < kt; i++)
                lost += (dt[i] != 0.0f) & (sum[i] == wt[i]);
        }
        st->lost_updates += lost;
        st->lost_if_fp16 += lw[0];
        st->lost_if_bf16 += lw[1];
    }
}

CPU_CLONES
void cpu_grad_norm(const backend *bk, const float *g, size_t n, float inv_scale, double *sumsq, uint64_t *nonfinite)
{
    (void)bk;
    /* eight lanes of double sums: a single accumulator would serialise on the add latency */
    double ssl[8] = {0};
    uint32_t badl[8] = {0};
    uint64_t nf = 0;
    for (size_t b = 0; b < n; b += OPTIM_BLOCK) {
        size_t k = n - b < OPTIM_BLOCK ? n - b : OPTIM_BLOCK;
        const float *gb = g + b;
        size_t kv = k - k % 8;
        for (size_t i = 0; i < kv; i += 8)
            for (int l = 0; l < 8; l++) {
                /* GradScaler checks the values as held (scaled), then unscales */
                uint32_t fin = (ampdiag_f32_bits(gb[i + l]) & 0x7fffffffu) < AMPDIAG_F32_INF;
                badl[l] += !fin;
                float x = ampdiag_f32_from_bits(ampdiag_f32_bits(gb[i + l]) & (0u - fin)) * inv_scale;
                ssl[l] += (double)x * x; /* inf when unscaling overflowed: the norm is inf */
            }
        for (size_t i = kv; i < k; i++) {
            if (isfinite(gb[i])) {
                float x = gb[i] * inv_scale;
                ssl[0] += (double)x * x;
            } else {
                nf++;
            }
        }
        for (int l = 0; l < 8; l++) {
            nf += badl[l];
            badl[l] = 0;
        }
    }
    double ss = 0;
    for (int l = 0; l < 8; l++)
        ss += ssl[l];
    *sumsq += ss;
    *nonfinite += nf;
}

