/*
 * tstats.c - fused per-tensor statistics (ampdiag.h): one pass over the data fills every
 * field of an ampdiag_tstats record and, optionally, the exponent histogram.
 *
 * The data is cut into blocks of TSTATS_BLOCK values. On x86-64 with AVX2 a block is first
 * read by the clean-block kernel (fast_avx2: FP16 thresholds, zeros, signs, extremes and sums
 * only); a block that turns out to hold NaN, inf, a float32 subnormal or an FP16 overflow is
 * redone by the full kernel (block_avx2: every class by compares). The histogram is counted
 * from exponent bytes that the same loop stores, by bit-sliced adders. Everywhere else, or with
 * AMPDIAG_TSTATS_IMPL=generic, a portable kernel in plain C (lane arrays the compiler
 * vectorises) does every block. All
 * paths give identical counts and extremes, and sums that differ only by the order of the
 * additions (tests/t_tstats.c checks all of them against a slow reference).
 */
#include "ampdiag.h"
#include "numerics/numfmt.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TSTATS_HAVE_AVX2 1
#endif

#define TSTATS_BLOCK 4096 /* values per block: counts per lane stay below 2^15 */
#define TSTATS_LANES 8




/* One block's partial results. Counts are exact; kmin/kmax are order-preserving keys. */
struct block {
    uint64_t nan, pinf, ninf, zero, neg;
    uint64_t hovf, hunf, hsub, bovf, bunf, bsub;
    int32_t kmin, kmax; /* over finite values; INT32_MAX / INT32_MIN when none */
    int32_t amax, amin; /* |x| bits over finite / finite non-zero; 0 / INT32_MAX when none */
    double sum, sq;
};

/* The bit pattern of x[i] (memcpy: no aliasing of float as integer). */
static inline uint32_t load_bits(const float *x, size_t i)
{
    uint32_t u;
    memcpy(&u, x + i, sizeof u);
    return u;
}

/* float32 bits as a signed key that orders like the values (-0 below +0), and back. */
static inline int32_t float_key(uint32_t u) { return (int32_t)u ^ (((int32_t)u >> 31) & 0x7fffffff); }
static inline float key_to_float(int32_t key)
{
    return ampdiag_f32_from_bits((uint32_t)(key ^ ((key >> 31) & 0x7fffffff)));
}

/* Bin of a float32 subnormal |x| bit pattern a (0 < a < 2^23): exponent -149 + floor(log2 a). */
static inline int subnormal_bin(uint32_t a)
{
    return AMPDIAG_HIST_BIN(-149 + (31 - __builtin_clz(a)));
}

/* Add one value to a block (the scalar definition; also the tail of every block). */
static inline void block_add1(struct block *b, uint32_t u)
{
    uint32_t a = u & 0x7fffffffu;
    uint32_t fin = a < AMPDIAG_F32_INF, nz = a != 0;
    int32_t sa = (int32_t)a, key = float_key(u);
    if (fin) {
        float v = ampdiag_f32_from_bits(u);
        b->kmin = key < b->kmin ? key : b->kmin;
        b->kmax = key > b->kmax ? key : b->kmax;
        b->amax = sa > b->amax ? sa : b->amax;
        if (nz && sa < b->amin)
            b->amin = sa;
        b->sum += (double)v;
        b->sq += (double)v * (double)v;
    }
    b->nan += a > AMPDIAG_F32_INF;
    b->pinf += u == 0x7f800000u;
    b->ninf += u == 0xff800000u;
    b->zero += a == 0;
    b->neg += fin & nz & (u >> 31);
    b->hovf += fin & (a >= AMPDIAG_FP16_OVF_BITS);
    b->hunf += nz & (a <= AMPDIAG_FP16_UNF_BITS);
    b->hsub += (a > AMPDIAG_FP16_UNF_BITS) & (a < AMPDIAG_FP16_NORM_BITS);
    b->bovf += fin & (a >= AMPDIAG_BF16_OVF_BITS);
    b->bunf += nz & (a <= AMPDIAG_BF16_UNF_BITS);
    b->bsub += (a > AMPDIAG_BF16_UNF_BITS) & (a < AMPDIAG_BF16_NORM_BITS);
}

static void block_init(struct block *b)
{
    memset(b, 0, sizeof *b);
    b->kmin = INT32_MAX;
    b->kmax = INT32_MIN;
    b->amin = INT32_MAX;
}

/*
 * Portable block kernel: nv (a multiple of TSTATS_LANES, at most TSTATS_BLOCK) values in
 * lanes, written branch-free with signed compares so that the compiler vectorises it.
 * Eleven counters are packed three to a 32-bit lane (10 bits each: a lane sees at most
 * TSTATS_BLOCK / TSTATS_LANES = 512 values) to keep the accumulators in registers.
 */
static void block_generic(const float *x, size_t nv, struct block *b)
{
    uint32_t c0[TSTATS_LANES] = {0}; /* nan | +inf << 10 | -inf << 20 */
    uint32_t c1[TSTATS_LANES] = {0}; /* zero | neg << 10 | fp16 overflow << 20 */
    uint32_t c2[TSTATS_LANES] = {0}; /* fp16 underflow | fp16 subnormal << 10 | bf16 overflow << 20 */
    uint32_t c3[TSTATS_LANES] = {0}; /* bf16 underflow | bf16 subnormal << 10 */
    int32_t k_min[TSTATS_LANES], k_max[TSTATS_LANES], a_max[TSTATS_LANES], a_min[TSTATS_LANES];
    double d_sum[TSTATS_LANES] = {0}, d_sq[TSTATS_LANES] = {0};
    for (int l = 0; l < TSTATS_LANES; l++) {
        k_min[l] = INT32_MAX;
        k_max[l] = INT32_MIN;
        a_max[l] = 0;
        a_min[l] = INT32_MAX;
    }
    for (size_t i = 0; i < nv; i += TSTATS_LANES) {
        for (int l = 0; l < TSTATS_LANES; l++) {
            uint32_t u = load_bits(x, i + (size_t)l);
            int32_t a = (int32_t)(u & 0x7fffffffu);          /* >= 0: signed compares work */
            int32_t neg = (int32_t)u >> 31;                   /* all ones when the sign is set */
            int32_t fin = -(int32_t)(a < (int32_t)AMPDIAG_F32_INF);
            int32_t nz = -(int32_t)(a != 0);
            int32_t fnz = fin & nz;
            int32_t key = (int32_t)u ^ (neg & 0x7fffffff);
            int32_t kmin = (key & fin) | (INT32_MAX & ~fin);
            int32_t kmax = (key & fin) | (INT32_MIN & ~fin);
            k_min[l] = kmin < k_min[l] ? kmin : k_min[l];
            k_max[l] = kmax > k_max[l] ? kmax : k_max[l];
            int32_t amx = a & fin;
            int32_t amn = (a & fnz) | (INT32_MAX & ~fnz);
            a_max[l] = amx > a_max[l] ? amx : a_max[l];
            a_min[l] = amn < a_min[l] ? amn : a_min[l];
            int32_t isnan_ = -(int32_t)(a > (int32_t)AMPDIAG_F32_INF);
            int32_t isinf_ = -(int32_t)(a == (int32_t)AMPDIAG_F32_INF);
            int32_t h_ovf = fin & -(int32_t)(a >= (int32_t)AMPDIAG_FP16_OVF_BITS);
            int32_t h_unf = nz & -(int32_t)(a <= (int32_t)AMPDIAG_FP16_UNF_BITS);
            int32_t h_sub = -(int32_t)(a > (int32_t)AMPDIAG_FP16_UNF_BITS) & -(int32_t)(a < (int32_t)AMPDIAG_FP16_NORM_BITS);
            int32_t b_ovf = fin & -(int32_t)(a >= (int32_t)AMPDIAG_BF16_OVF_BITS);
            int32_t b_unf = nz & -(int32_t)(a <= (int32_t)AMPDIAG_BF16_UNF_BITS);
            int32_t b_sub = -(int32_t)(a > (int32_t)AMPDIAG_BF16_UNF_BITS) & -(int32_t)(a < (int32_t)AMPDIAG_BF16_NORM_BITS);
            c0[l] += (uint32_t)((isnan_ & 1) | (isinf_ & ~neg & (1 << 10)) | (isinf_ & neg & (1 << 20)));
            c1[l] += (uint32_t)((~nz & 1) | (fnz & neg & (1 << 10)) | (h_ovf & (1 << 20)));
            c2[l] += (uint32_t)((h_unf & 1) | (h_sub & (1 << 10)) | (b_ovf & (1 << 20)));
            c3[l] += (uint32_t)((b_unf & 1) | (b_sub & (1 << 10)));
            /* non-finite values become 0 on the bit pattern: the conversion can't trap and
             * the loop needs no branch */
            float vf = ampdiag_f32_from_bits(u & (uint32_t)fin);
            double dv = (double)vf;
            d_sum[l] += dv;
            d_sq[l] += dv * dv;
        }
    }
    for (int l = 0; l < TSTATS_LANES; l++) {
        b->nan += c0[l] & 0x3ffu; b->pinf += (c0[l] >> 10) & 0x3ffu; b->ninf += c0[l] >> 20;
        b->zero += c1[l] & 0x3ffu; b->neg += (c1[l] >> 10) & 0x3ffu; b->hovf += c1[l] >> 20;
        b->hunf += c2[l] & 0x3ffu; b->hsub += (c2[l] >> 10) & 0x3ffu; b->bovf += c2[l] >> 20;
        b->bunf += c3[l] & 0x3ffu; b->bsub += (c3[l] >> 10) & 0x3ffu;
        b->kmin = k_min[l] < b->kmin ? k_min[l] : b->kmin;
        b->kmax = k_max[l] > b->kmax ? k_max[l] : b->kmax;
        b->amax = a_max[l] > b->amax ? a_max[l] : b->amax;
        b->amin = a_min[l] < b->amin ? a_min[l] : b->amin;
        b->sum += d_sum[l];
        b->sq += d_sq[l];
    }
}

#ifdef TSTATS_HAVE_AVX2
/*
 * AVX2 block kernel. Every class count is a difference of monotone counts "a > T" over the
 * |x| bit pattern a (and four over the signed pattern for the sign split), so each costs one
 * compare; pairs of 32-bit compare masks are packed into 16-bit lanes (vpackssdw) and
 * subtracted into 7 accumulators (-1 per hit).
 *   on a = |x| bits:  A0 a>0  A1 a>bf16_unf  A2 a>=bf16_norm  A3 a>fp16_unf  A4 a>=fp16_norm
 *                     A5 a>=fp16_ovf  A6 a>=bf16_ovf  A7 a>=inf  A8 a>inf (NaN)
 *   on s = bits as int32:  S0 s>=0 (sign clear)  S1 s>INT32_MIN (not -0)
 *                     S2 s>=(int)0xff800000 (sign clear, or negative with a>=inf)  S3 s>(int)0xff800000
 */
#define CMPGT(v, t) _mm256_cmpgt_epi32((v), _mm256_set1_epi32((int)(t)))

__attribute__((target("avx2,fma")))
static void block_avx2(const float *x, size_t nv, struct block *b)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i imax = _mm256_set1_epi32(INT32_MAX), imin = _mm256_set1_epi32(INT32_MIN);
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    __m256i acc4 = acc0, acc5 = acc0, acc6 = acc0;
    __m256i vkmin = imax, vkmax = imin, vamin = imax;
    __m256d vsum = _mm256_setzero_pd(), vsq = vsum;
    /* fast path: eight values all finite, non-zero and BF16-normal (nearly every vector of real
     * data): only the FP16 thresholds and the sign need counting, and the extremes no masking */
    __m256i f0 = _mm256_setzero_si256(), f1 = f0;
    uint64_t nfast = 0;
    /* one branch per 8 values (testing 16 at a time measured slower) */
    for (size_t i = 0; i < nv; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        __m256i a = _mm256_and_si256(u, absmask);
        __m256i in_bf16 = _mm256_andnot_si256(CMPGT(a, AMPDIAG_BF16_OVF_BITS - 1), CMPGT(a, AMPDIAG_BF16_NORM_BITS - 1));
        if (_mm256_movemask_epi8(in_bf16) == -1) {
            f0 = _mm256_sub_epi16(f0, _mm256_packs_epi32(CMPGT(a, AMPDIAG_FP16_UNF_BITS), CMPGT(a, AMPDIAG_FP16_NORM_BITS - 1)));
            f1 = _mm256_sub_epi16(f1, _mm256_packs_epi32(CMPGT(a, AMPDIAG_FP16_OVF_BITS - 1), CMPGT(u, -1)));
            nfast += 8;
            __m256i key = _mm256_xor_si256(u, _mm256_srli_epi32(_mm256_srai_epi32(u, 31), 1));
            vkmin = _mm256_min_epi32(vkmin, key);
            vkmax = _mm256_max_epi32(vkmax, key);
            vamin = _mm256_min_epi32(vamin, a);
            __m256 v = _mm256_castsi256_ps(u);
            __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
            __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
            vsum = _mm256_add_pd(vsum, _mm256_add_pd(lo, hi));
            vsq = _mm256_fmadd_pd(lo, lo, _mm256_fmadd_pd(hi, hi, vsq));
            continue;
        }
        __m256i a0 = CMPGT(a, 0);
        __m256i a1 = CMPGT(a, AMPDIAG_BF16_UNF_BITS);
        __m256i a2 = CMPGT(a, AMPDIAG_BF16_NORM_BITS - 1);
        __m256i a3 = CMPGT(a, AMPDIAG_FP16_UNF_BITS);
        __m256i a4 = CMPGT(a, AMPDIAG_FP16_NORM_BITS - 1);
        __m256i a5 = CMPGT(a, AMPDIAG_FP16_OVF_BITS - 1);
        __m256i a6 = CMPGT(a, AMPDIAG_BF16_OVF_BITS - 1);
        __m256i a7 = CMPGT(a, AMPDIAG_F32_INF - 1);      /* non-finite */
        __m256i a8 = CMPGT(a, AMPDIAG_F32_INF);          /* NaN */
        __m256i s0 = CMPGT(u, -1);
        __m256i s1 = CMPGT(u, INT32_MIN);
        __m256i s2 = CMPGT(u, (int32_t)0xff800000u - 1);
        __m256i s3 = CMPGT(u, (int32_t)0xff800000u);
        acc0 = _mm256_sub_epi16(acc0, _mm256_packs_epi32(a0, a1));
        acc1 = _mm256_sub_epi16(acc1, _mm256_packs_epi32(a2, a3));
        acc2 = _mm256_sub_epi16(acc2, _mm256_packs_epi32(a4, a5));
        acc3 = _mm256_sub_epi16(acc3, _mm256_packs_epi32(a6, a7));
        acc4 = _mm256_sub_epi16(acc4, _mm256_packs_epi32(a8, s0));
        acc5 = _mm256_sub_epi16(acc5, _mm256_packs_epi32(s1, s2));
        acc6 = _mm256_sub_epi16(acc6, _mm256_packs_epi32(s3, s3));
        /* extremes: non-finite values (a7) replaced by the identities */
        __m256i key = _mm256_xor_si256(u, _mm256_srli_epi32(_mm256_srai_epi32(u, 31), 1));
        vkmin = _mm256_min_epi32(vkmin, _mm256_blendv_epi8(key, imax, a7));
        vkmax = _mm256_max_epi32(vkmax, _mm256_blendv_epi8(key, imin, a7));
        vamin = _mm256_min_epi32(vamin, _mm256_blendv_epi8(imax, a, _mm256_andnot_si256(a7, a0)));
        /* sums in double; non-finite values contribute 0 */
        __m256 v = _mm256_castsi256_ps(_mm256_andnot_si256(a7, u));
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        vsum = _mm256_add_pd(vsum, _mm256_add_pd(lo, hi));
        vsq = _mm256_fmadd_pd(lo, lo, _mm256_fmadd_pd(hi, hi, vsq));
    }
    /* packs_epi32(p, q) puts p in int16 lanes 0-3 and 8-11, q in 4-7 and 12-15; every lane
     * holds a count (each hit subtracted a mask of -1) */
    int16_t t[9][16];
    _mm256_storeu_si256((__m256i *)(void *)t[0], acc0);
    _mm256_storeu_si256((__m256i *)(void *)t[1], acc1);
    _mm256_storeu_si256((__m256i *)(void *)t[2], acc2);
    _mm256_storeu_si256((__m256i *)(void *)t[3], acc3);
    _mm256_storeu_si256((__m256i *)(void *)t[4], acc4);
    _mm256_storeu_si256((__m256i *)(void *)t[5], acc5);
    _mm256_storeu_si256((__m256i *)(void *)t[6], acc6);
    _mm256_storeu_si256((__m256i *)(void *)t[7], f0);
    _mm256_storeu_si256((__m256i *)(void *)t[8], f1);
    uint64_t c[18];
    for (int k = 0; k < 9; k++) {
        int64_t p = 0, q = 0;
        for (int j = 0; j < 4; j++) {
            p += (int64_t)t[k][j] + t[k][j + 8];
            q += (int64_t)t[k][j + 4] + t[k][j + 12];
        }
        c[2 * k] = (uint64_t)p;
        c[2 * k + 1] = (uint64_t)q;
    }
    uint64_t A0 = c[0], A1 = c[1], A2 = c[2], A3 = c[3], A4 = c[4], A5 = c[5], A6 = c[6];
    uint64_t A7 = c[7], A8 = c[8], S0 = c[9], S1 = c[10], S2 = c[11], S3 = c[12];
    /* fast vectors: every value is > 0 in |x|, >= the BF16 thresholds, below BF16 overflow,
     * finite, and not -0; their FP16 counts and positive count are in f0, f1 */
    A0 += nfast; A1 += nfast; A2 += nfast;
    A3 += c[14]; A4 += c[15]; A5 += c[16];
    S0 += c[17]; S1 += nfast; S2 += c[17]; S3 += c[17];
    uint64_t neg_big = S2 - S0, neg_nan = S3 - S0;
    b->zero += nv - A0;
    b->bunf += A0 - A1;
    b->bsub += A1 - A2;
    b->hunf += A0 - A3;
    b->hsub += A3 - A4;
    b->hovf += A5 - A7;
    b->bovf += A6 - A7;
    b->nan += A8;
    b->ninf += neg_big - neg_nan;
    b->pinf += (A7 - A8) - (neg_big - neg_nan);
    b->neg += (S1 - S0) - neg_big;

    int32_t k4[8];
    _mm256_storeu_si256((__m256i *)(void *)k4, vkmin);
    for (int l = 0; l < 8; l++) b->kmin = k4[l] < b->kmin ? k4[l] : b->kmin;
    _mm256_storeu_si256((__m256i *)(void *)k4, vkmax);
    for (int l = 0; l < 8; l++) b->kmax = k4[l] > b->kmax ? k4[l] : b->kmax;
    /* |x| max from the extremes: the larger of |min| and |max| (keys of finite values) */
    if (b->kmin != INT32_MAX) {
        int32_t amin_key = (int32_t)(ampdiag_f32_bits(key_to_float(b->kmin)) & 0x7fffffffu);
        int32_t amax_key = (int32_t)(ampdiag_f32_bits(key_to_float(b->kmax)) & 0x7fffffffu);
        int32_t am = amin_key > amax_key ? amin_key : amax_key;
        b->amax = am > b->amax ? am : b->amax;
    }
    _mm256_storeu_si256((__m256i *)(void *)k4, vamin);
    for (int l = 0; l < 8; l++) b->amin = k4[l] < b->amin ? k4[l] : b->amin;
    double d[4];
    _mm256_storeu_pd(d, vsum);
    b->sum += (d[0] + d[1]) + (d[2] + d[3]);
    _mm256_storeu_pd(d, vsq);
    b->sq += (d[0] + d[1]) + (d[2] + d[3]);
}
#undef CMPGT

/*
 * The clean-block AVX2 path (the default on x86-64 with AVX2).
 *
 * Most blocks of real tensors are "clean": no NaN/inf, no float32 subnormal, nothing at or above
 * FP16's overflow threshold (65520). In a clean block no overflow (FP16 or BF16) and no BF16
 * underflow or subnormal can occur and every value is finite, so per value the kernel keeps
 * only: two FP16 threshold counts (underflow, subnormal), the counts of zeros and of negative
 * values, the extremes (integer min/max on the bit patterns, no masking) and the two double
 * sums. Whether the block was clean is read off its extremes at the end; a block that was not
 * is redone by the full kernel (block_avx2: every class by compares, non-finite values masked).
 * So the results are identical to the portable kernel's on every input.
 *
 * With the exponent histogram, the same loop also stores each value's exponent field as a byte.
 * The non-zero values' fields lie between those of the block's smallest and largest |x| (a
 * block of 4096 normal values spans about 15 fields); the top 64 fields of that window are then
 * counted from the bytes, 8 fields per pass, by bit-sliced carry-save adders (count8_*), and the
 * values below them by one more compare, one at a time. The loop prefetches 4 KiB ahead
 * (README: the speeds bench_tstats measured).
 */

/* Per-block results of the fast kernel (reduced from its lanes). */
struct fastblock {
    int32_t smin, smax;   /* signed min / max of the bit patterns */
    uint32_t umax;        /* unsigned max of the bit patterns */
    uint32_t am1;         /* unsigned min of |x| bits - 1 (0xffffffff: no non-zero value) */
    uint64_t g_unf, g_norm;  /* counts of |x| bits > FP16_UNF, >= FP16_NORM */
    uint64_t zero, neg;      /* counts of 0 (either sign) and of negative non-zero values */
    double sum, sq;
};

#define CMPGT(v, t) _mm256_cmpgt_epi32((v), _mm256_set1_epi32((int)(t)))

static inline uint64_t lanes_sum(const uint32_t *t)
{
    uint64_t s = 0;
    for (int l = 0; l < 8; l++) s += t[l];
    return s;
}

/* Prefetch distance of the clean-block kernel: without it the loop waits on DRAM at every 4 KiB
 * page (where the hardware prefetcher stops), and its arithmetic does not overlap the loads. */
#define TSTATS_PREFETCH 4096

/* The clean-block accumulators (all in registers, also when the loop is unrolled). */
struct fastacc {
    __m256i smin, smax, umax, am1, gu, gn, cz, cn;
    __m256d sum0, sum1, sq0, sq1;
};

/* One vector of 8 values (u, also at xi) into the accumulators; returns its |x| bits. */
__attribute__((target("avx2,fma"), always_inline))
static inline __m256i fast_step(struct fastacc *c, __m256i u, const float *xi)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff), m1 = _mm256_set1_epi32(-1);
    __m256i a = _mm256_and_si256(u, absmask);
    __m256i am = _mm256_add_epi32(a, m1); /* |x| bits - 1: all ones for a zero */
    c->am1 = _mm256_min_epu32(c->am1, am);
    c->cz = _mm256_sub_epi32(c->cz, _mm256_cmpeq_epi32(am, m1));
    /* u - 1 < -1 (signed) exactly when u is negative and not -0 */
    c->cn = _mm256_sub_epi32(c->cn, _mm256_cmpgt_epi32(m1, _mm256_add_epi32(u, m1)));
    c->smin = _mm256_min_epi32(c->smin, u);
    c->smax = _mm256_max_epi32(c->smax, u);
    c->umax = _mm256_max_epu32(c->umax, u);
    c->gu = _mm256_sub_epi32(c->gu, CMPGT(a, AMPDIAG_FP16_UNF_BITS));
    c->gn = _mm256_sub_epi32(c->gn, CMPGT(a, AMPDIAG_FP16_NORM_BITS - 1));
    /* four independent sums: no chain longer than one add per vector */
    __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(xi));
    __m256d hi = _mm256_cvtps_pd(_mm_loadu_ps(xi + 4));
    c->sum0 = _mm256_add_pd(c->sum0, lo);
    c->sum1 = _mm256_add_pd(c->sum1, hi);
    c->sq0 = _mm256_fmadd_pd(lo, lo, c->sq0);
    c->sq1 = _mm256_fmadd_pd(hi, hi, c->sq1);
    return a;
}

/* Ports 0, 1 and 5 bound this loop, so it spends as few vector instructions as it can: the
 * conversions to double read memory (no lane extract), a negative non-zero value is one compare
 * on u - 1, and FP16 overflow is not counted: a block whose largest |x| reaches it is not clean.
 * With eb, the exponent fields of the first nv - nv % 16 values are also stored there as bytes
 * (in a lane order the histogram does not mind). */
__attribute__((target("avx2,fma"), always_inline))
static inline void fast_body(const float *x, size_t nv, struct fastblock *fb, uint8_t *eb)
{
    struct fastacc c;
    c.smin = _mm256_set1_epi32(INT32_MAX);
    c.smax = _mm256_set1_epi32(INT32_MIN);
    c.umax = _mm256_setzero_si256();
    c.am1 = _mm256_set1_epi32(-1);
    c.gu = c.gn = c.cz = c.cn = _mm256_setzero_si256();
    c.sum0 = c.sum1 = c.sq0 = c.sq1 = _mm256_setzero_pd();
    size_t i = 0;
    if (eb) {
        for (; i + 16 <= nv; i += 16) {
            _mm_prefetch((const char *)(x + i) + TSTATS_PREFETCH, _MM_HINT_T0);
            const __m256i *p = (const __m256i *)(const void *)(x + i);
            __m256i e0 = _mm256_srli_epi32(fast_step(&c, _mm256_loadu_si256(p), x + i), 23);
            __m256i e1 = _mm256_srli_epi32(fast_step(&c, _mm256_loadu_si256(p + 1), x + i + 8), 23);
            /* fields 0..255 in 32-bit lanes to bytes, 8 in each 128-bit lane (the order is
             * scrambled, which a histogram does not mind) */
            __m256i w = _mm256_packus_epi32(e0, e1);
            w = _mm256_packus_epi16(w, w);
            _mm_storel_epi64((__m128i *)(void *)(eb + i), _mm256_castsi256_si128(w));
            _mm_storel_epi64((__m128i *)(void *)(eb + i + 8), _mm256_extracti128_si256(w, 1));
        }
    }
    for (; i < nv; i += 8) {
        _mm_prefetch((const char *)(x + i) + TSTATS_PREFETCH, _MM_HINT_T0);
        fast_step(&c, _mm256_loadu_si256((const __m256i *)(const void *)(x + i)), x + i);
    }
    int32_t t[8] __attribute__((aligned(32)));
    uint32_t *tu = (uint32_t *)(void *)t;
    fb->smin = INT32_MAX; fb->smax = INT32_MIN; fb->umax = 0; fb->am1 = UINT32_MAX;
    _mm256_store_si256((__m256i *)(void *)t, c.smin);
    for (int l = 0; l < 8; l++) fb->smin = t[l] < fb->smin ? t[l] : fb->smin;
    _mm256_store_si256((__m256i *)(void *)t, c.smax);
    for (int l = 0; l < 8; l++) fb->smax = t[l] > fb->smax ? t[l] : fb->smax;
    _mm256_store_si256((__m256i *)(void *)t, c.umax);
    for (int l = 0; l < 8; l++) fb->umax = tu[l] > fb->umax ? tu[l] : fb->umax;
    _mm256_store_si256((__m256i *)(void *)t, c.am1);
    for (int l = 0; l < 8; l++) fb->am1 = tu[l] < fb->am1 ? tu[l] : fb->am1;
    _mm256_store_si256((__m256i *)(void *)t, c.gu);
    fb->g_unf = lanes_sum(tu);
    _mm256_store_si256((__m256i *)(void *)t, c.gn);
    fb->g_norm = lanes_sum(tu);
    _mm256_store_si256((__m256i *)(void *)t, c.cz);
    fb->zero = lanes_sum(tu);
    _mm256_store_si256((__m256i *)(void *)t, c.cn);
    fb->neg = lanes_sum(tu);
    double d[4];
    _mm256_storeu_pd(d, _mm256_add_pd(c.sum0, c.sum1));
    fb->sum = (d[0] + d[1]) + (d[2] + d[3]);
    _mm256_storeu_pd(d, _mm256_add_pd(c.sq0, c.sq1));
    fb->sq = (d[0] + d[1]) + (d[2] + d[3]);
}

__attribute__((target("avx2,fma")))
static void fast_avx2(const float *x, size_t nv, struct fastblock *fb) { fast_body(x, nv, fb, NULL); }

__attribute__((target("avx2,fma")))
static void fast_pack_avx2(const float *x, size_t nv, struct fastblock *fb, uint8_t *eb) { fast_body(x, nv, fb, eb); }

/*
 * Histogram of byte-packed exponent fields, bit-sliced: a pass takes 8 consecutive fields
 * [base, base + 8), turns each byte into a one-hot byte (bit k for field base + k, 0 outside)
 * and adds the one-hot vectors as 256 one-bit numbers at once with carry-save adders
 * (Harley-Seal: 16 vectors per 15 adders). The sums live in 8 bit planes, a count of up to 255
 * per bit of every byte lane, so a pass takes at most 255 vectors.
 */
/* Carry-save adder on 256 bits: (h, l) := the two-bit sums of a + b + c. With AVX-512VL each
 * output is one vpternlogd (0x96: parity, 0xe8: majority). */
#define CSA(h, l, a, b, c)                                                           \
    do {                                                                             \
        __m256i a_ = (a), b_ = (b), c_ = (c);                                        \
        if (TERNLOG) {                                                               \
            (h) = TERN(a_, b_, c_, 0xe8);                                            \
            (l) = TERN(a_, b_, c_, 0x96);                                            \
        } else {                                                                     \
            __m256i u_ = _mm256_xor_si256(a_, b_);                                   \
            (h) = _mm256_or_si256(_mm256_and_si256(a_, b_), _mm256_and_si256(u_, c_)); \
            (l) = _mm256_xor_si256(u_, c_);                                          \
        }                                                                            \
    } while (0)

#define COUNT8_BODY                                                                          \
    const __m256i bv = _mm256_set1_epi8((char)base), bias = _mm256_set1_epi8(0x78);          \
    /* field - base in [0, 8) becomes 0x78..0x7f after the saturating add: table entries   \
     * 8..15; anything else (wrapped or >= 8) is >= 0x80, which vpshufb turns into 0 */       \
    const __m256i onehot = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, -128, \
                                            0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, -128); \
    const __m256i zero = _mm256_setzero_si256();                                             \
    __m256i ones = zero, twos = zero, fours = zero, eights = zero;                           \
    __m256i p16 = zero, p32 = zero, p64 = zero, p128 = zero;                                 \
    __m256i twosA, twosB, foursA, foursB, eightsA, eightsB, sixteens;                        \
    for (size_t j = 0; j < nvec; j += 16) {                                                  \
        CSA(twosA, ones, ones, IN(0), IN(1));                                                \
        CSA(twosB, ones, ones, IN(2), IN(3));                                                \
        CSA(foursA, twos, twos, twosA, twosB);                                               \
        CSA(twosA, ones, ones, IN(4), IN(5));                                                \
        CSA(twosB, ones, ones, IN(6), IN(7));                                                \
        CSA(foursB, twos, twos, twosA, twosB);                                               \
        CSA(eightsA, fours, fours, foursA, foursB);                                          \
        CSA(twosA, ones, ones, IN(8), IN(9));                                                \
        CSA(twosB, ones, ones, IN(10), IN(11));                                              \
        CSA(foursA, twos, twos, twosA, twosB);                                               \
        CSA(twosA, ones, ones, IN(12), IN(13));                                              \
        CSA(twosB, ones, ones, IN(14), IN(15));                                              \
        CSA(foursB, twos, twos, twosA, twosB);                                               \
        CSA(eightsB, fours, fours, foursA, foursB);                                          \
        CSA(sixteens, eights, eights, eightsA, eightsB);                                     \
        /* ripple the sixteens into the upper planes */                                      \
        __m256i c1 = _mm256_and_si256(p16, sixteens);                                        \
        p16 = _mm256_xor_si256(p16, sixteens);                                               \
        __m256i c2 = _mm256_and_si256(p32, c1);                                              \
        p32 = _mm256_xor_si256(p32, c1);                                                     \
        __m256i c3 = _mm256_and_si256(p64, c2);                                              \
        p64 = _mm256_xor_si256(p64, c2);                                                     \
        p128 = _mm256_or_si256(p128, c3);                                                    \
    }                                                                                        \
    planes_count(ones, twos, fours, eights, p16, p32, p64, p128, out);

#define IN(k) _mm256_shuffle_epi8(onehot, _mm256_adds_epu8(_mm256_sub_epi8(_mm256_load_si256((const __m256i *)(const void *)(eb + 32 * (j + (k)))), bv), bias))

/* Exchange the bits of a selected by m << s with the bits of b selected by m: in every byte
 * lane, one step of an 8x8 bit-matrix transpose (row = plane, column = bit). */
#define SWAPBITS(a, b, s, m)                                                          \
    do {                                                                              \
        __m256i t_ = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi16((a), (s)), (b)), (m)); \
        (b) = _mm256_xor_si256((b), t_);                                              \
        (a) = _mm256_xor_si256((a), _mm256_slli_epi16(t_, (s)));                      \
    } while (0)

/* out[k] := the sum over the byte lanes of the count whose bit p is bit k of plane p: the
 * planes, as the rows of an 8x8 bit matrix in every byte lane, are transposed, so that row k
 * holds bit k's count in each lane, and the rows are summed by vpsadbw. */
__attribute__((target("avx2")))
static void planes_count(__m256i p0, __m256i p1, __m256i p2, __m256i p3, __m256i p4, __m256i p5,
                         __m256i p6, __m256i p7, uint64_t out[8])
{
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x33), m1 = _mm256_set1_epi8(0x55);
    /* transpose by blocks: the top-right and bottom-left 4x4, then 2x2, then 1x1 blocks */
    SWAPBITS(p0, p4, 4, m4);
    SWAPBITS(p1, p5, 4, m4);
    SWAPBITS(p2, p6, 4, m4);
    SWAPBITS(p3, p7, 4, m4);
    SWAPBITS(p0, p2, 2, m2);
    SWAPBITS(p1, p3, 2, m2);
    SWAPBITS(p4, p6, 2, m2);
    SWAPBITS(p5, p7, 2, m2);
    SWAPBITS(p0, p1, 1, m1);
    SWAPBITS(p2, p3, 1, m1);
    SWAPBITS(p4, p5, 1, m1);
    SWAPBITS(p6, p7, 1, m1);
    const __m256i z = _mm256_setzero_si256();
    __m256i r[8] = {p0, p1, p2, p3, p4, p5, p6, p7};
    for (int k = 0; k < 8; k++) {
        uint64_t q[4];
        _mm256_storeu_si256((__m256i *)(void *)q, _mm256_sad_epu8(r[k], z));
        out[k] = q[0] + q[1] + q[2] + q[3];
    }
}
#undef SWAPBITS

/* Counts of the fields [base, base + 8) among the bytes eb[0..32 * nvec) (nvec a multiple of 16,
 * at most 255) into out[0..8). */
#define TERNLOG 0
#define TERN(a, b, c, imm) (a)
__attribute__((target("avx2")))
static void count8_avx2(const uint8_t *eb, size_t nvec, int base, uint64_t out[8]) { COUNT8_BODY }
#undef TERNLOG
#undef TERN
#define TERNLOG 1
#define TERN(a, b, c, imm) _mm256_ternarylogic_epi32((a), (b), (c), (imm))
__attribute__((target("avx2,avx512f,avx512vl")))
static void count8_avx512vl(const uint8_t *eb, size_t nvec, int base, uint64_t out[8]) { COUNT8_BODY }
#undef TERNLOG
#undef TERN
#undef IN
#undef COUNT8_BODY
#undef CSA

#define HWIN 64 /* the widest exponent window counted by the bit-sliced passes */

/* Histogram of the non-zero values of a clean block x[0..nv) (nv a multiple of 8, at most
 * TSTATS_BLOCK) whose exponent fields lie in [flo, fhi]; eb (room for TSTATS_BLOCK) holds the
 * fields of the first nv - nv % 16 values as bytes, of which the first nq = nv - nv % 32 are
 * counted from eb, the rest from x. The top HWIN fields are counted by count8 (count8_avx2 or
 * count8_avx512vl), 8 per pass; the few values below them (a block that spans more than HWIN
 * binades) are found by one compare and counted one by one. Zeros (field 0 < flo) are not
 * counted here. */
typedef void (*count8_fn)(const uint8_t *, size_t, int, uint64_t *);

__attribute__((target("avx2")))
static void hist_window_avx2(const float *x, size_t nv, uint8_t *eb, int flo, int fhi, ampdiag_hist *h,
                             count8_fn count8)
{
    size_t nq = nv - nv % 32, nvec = nq / 32; /* eb holds nv - nv % 16 fields */
    /* pad with zero fields (never counted) to whole groups of 16 vectors */
    size_t npad = (nvec + 15) / 16 * 16;
    memset(eb + nq, 0, (npad - nvec) * 32);
    int wlo = fhi - HWIN + 1 > flo ? fhi - HWIN + 1 : flo;
    if (wlo > flo) {
        /* bytes in [1, wlo): below the window */
        const __m256i top = _mm256_set1_epi8((char)(wlo - 1)), zero = _mm256_setzero_si256();
        for (size_t j = 0; j < nvec; j++) {
            __m256i b = _mm256_load_si256((const __m256i *)(const void *)(eb + 32 * j));
            __m256i below = _mm256_andnot_si256(_mm256_cmpeq_epi8(b, zero),
                                                _mm256_cmpeq_epi8(_mm256_min_epu8(b, top), b));
            uint32_t bits = (uint32_t)_mm256_movemask_epi8(below);
            while (bits) {
                int k = __builtin_ctz(bits);
                bits &= bits - 1;
                h->bin[AMPDIAG_HIST_BIN((int)eb[32 * j + (size_t)k] - 127)]++;
            }
        }
    }
    if (nvec)
        for (int base = wlo; base <= fhi; base += 8) {
            uint64_t c[8];
            count8(eb, npad, base, c);
            for (int k = 0; k < 8 && base + k <= fhi; k++)
                h->bin[AMPDIAG_HIST_BIN(base + k - 127)] += c[k];
        }
    for (size_t i = nq; i < nv; i++) {
        uint32_t e = (load_bits(x, i) >> 23) & 0xffu;
        if (e)
            h->bin[AMPDIAG_HIST_BIN((int)e - 127)]++;
    }
}
#undef CMPGT
#endif

typedef void (*block_fn)(const float *, size_t, struct block *);

/* The kernels this CPU runs: 2 = the clean-block AVX2 path with AVX-512VL's vpternlogd in the
 * histogram's adders, 1 = the same without AVX-512, 0 = the portable kernel.
 * AMPDIAG_TSTATS_IMPL=avx2 or =generic forces a lesser one (the tests run all three); the choice
 * is read from the environment once, and again by ampdiag_tstats_impl(). An AVX-512 kernel with
 * mask-register counts for the record was measured slower than AVX2 here (compares into k
 * registers share one port). */
static _Atomic int kernel_choice = -1;

static int choose_kernel(void)
{
#ifdef TSTATS_HAVE_AVX2
    const char *want = getenv("AMPDIAG_TSTATS_IMPL");
    if (want && strcmp(want, "generic") == 0)
        return 0;
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
        return 0;
    if (want && strcmp(want, "avx2") == 0)
        return 1;
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") ? 2 : 1;
#else
    return 0;
#endif
}

static int pick_kernel(void)
{
    int k = atomic_load_explicit(&kernel_choice, memory_order_relaxed);
    if (k < 0) {
        k = choose_kernel();
        atomic_store_explicit(&kernel_choice, k, memory_order_relaxed);
    }
    return k;
}

const char *ampdiag_tstats_impl(void)
{
    static const char *const names[3] = {"generic", "avx2", "avx2+avx512vl"};
    int k = choose_kernel();
    atomic_store_explicit(&kernel_choice, k, memory_order_relaxed);
    return names[k];
}

/* Exponent histogram of one block (still in L1): counts of the float32 exponent field in four
 * interleaved sub-histograms (no store-to-load stalls on runs of equal exponents). */
static void block_hist(const float *x, size_t nb, const struct block *b, ampdiag_hist *h)
{
    uint32_t eh[4][256];
    memset(eh, 0, sizeof eh);
    size_t i = 0;
    for (; i + 4 <= nb; i += 4) {
        eh[0][(load_bits(x, i) >> 23) & 0xffu]++;
        eh[1][(load_bits(x, i + 1) >> 23) & 0xffu]++;
        eh[2][(load_bits(x, i + 2) >> 23) & 0xffu]++;
        eh[3][(load_bits(x, i + 3) >> 23) & 0xffu]++;
    }
    for (; i < nb; i++)
        eh[0][(load_bits(x, i) >> 23) & 0xffu]++;
    for (int e = 1; e < 255; e++)
        h->bin[AMPDIAG_HIST_BIN(e - 127)] += (uint64_t)eh[0][e] + eh[1][e] + eh[2][e] + eh[3][e];
    uint64_t ezero = (uint64_t)eh[0][0] + eh[1][0] + eh[2][0] + eh[3][0];
    h->bin[AMPDIAG_HIST_ZERO] += b->zero;
    h->bin[AMPDIAG_HIST_POSINF] += b->pinf;
    h->bin[AMPDIAG_HIST_NEGINF] += b->ninf;
    h->bin[AMPDIAG_HIST_NAN] += b->nan;
    if (ezero > b->zero) /* float32 subnormals in this block: rare, place them exactly */
        for (size_t j = 0; j < nb; j++) {
            uint32_t a = load_bits(x, j) & 0x7fffffffu;
            if (a != 0 && a < AMPDIAG_F32_MIN_NORMAL)
                h->bin[subnormal_bin(a)]++;
        }
}

/* Fold a block's extremes into the record (-0 below +0; famin_nz is +inf when none). */
static void record_extremes(ampdiag_tstats *s, float fmin, float fmax, float famax, float famin_nz)
{
    if (fmin < s->min || (fmin == s->min && signbit(fmin))) s->min = fmin;
    if (fmax > s->max || (fmax == s->max && !signbit(fmax))) s->max = fmax;
    if (famax > s->absmax) s->absmax = famax;
    if (famin_nz < s->absmin_nz) s->absmin_nz = famin_nz;
}

static void record_add_block(ampdiag_tstats *s, const struct block *b, size_t nb)
{
    uint64_t nonfinite = b->nan + b->pinf + b->ninf;
    s->count += nb;
    s->n_nan += b->nan;
    s->n_posinf += b->pinf;
    s->n_neginf += b->ninf;
    s->n_zero += b->zero;
    s->n_neg += b->neg;
    s->n_pos += nb - nonfinite - b->zero - b->neg;
    s->fp16_overflow += b->hovf;
    s->fp16_underflow += b->hunf;
    s->fp16_subnormal += b->hsub;
    s->bf16_overflow += b->bovf;
    s->bf16_underflow += b->bunf;
    s->bf16_subnormal += b->bsub;
    s->sum += b->sum;
    s->sumsq += b->sq;
    if (nonfinite < nb)
        record_extremes(s, key_to_float(b->kmin), key_to_float(b->kmax), ampdiag_f32_from_bits((uint32_t)b->amax),
                        b->amin != INT32_MAX ? ampdiag_f32_from_bits((uint32_t)b->amin) : INFINITY);
}

void ampdiag_tstats_init(ampdiag_tstats *s)
{
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    s->max = -INFINITY;
    s->absmax = -INFINITY;
    s->absmin_nz = INFINITY;
}

void ampdiag_hist_init(ampdiag_hist *h) { memset(h, 0, sizeof *h); }

void ampdiag_hist_merge(ampdiag_hist *dst, const ampdiag_hist *src)
{
    for (int i = 0; i < AMPDIAG_HIST_BINS; i++)
        dst->bin[i] += src->bin[i];
}

/* Values x[0..nb) one at a time (a tail shorter than a vector), into s and h. */
static void accumulate_scalar(ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t nb)
{
    struct block b;
    block_init(&b);
    for (size_t i = 0; i < nb; i++)
        block_add1(&b, load_bits(x, i));
    record_add_block(s, &b, nb);
    if (h)
        block_hist(x, nb, &b, h);
}

/* nv values (a multiple of TSTATS_LANES, at most TSTATS_BLOCK) by a block kernel, into s and h. */
static void add_block(block_fn kernel, ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t nv)
{
    struct block b;
    block_init(&b);
    kernel(x, nv, &b);
    record_add_block(s, &b, nv);
    if (h)
        block_hist(x, nv, &b, h);
}

/* Block by block with the portable kernel. */
static void accumulate_generic(ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t n)
{
    while (n > 0) {
        size_t nb = n < TSTATS_BLOCK ? n : TSTATS_BLOCK;
        size_t nv = nb - nb % TSTATS_LANES;
        if (nv)
            add_block(block_generic, s, h, x, nv);
        if (nb > nv)
            accumulate_scalar(s, h, x + nv, nb - nv);
        x += nb;
        n -= nb;
    }
}

#ifdef TSTATS_HAVE_AVX2
static void accumulate_fast(ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t n, count8_fn count8)
{
    uint8_t eb[TSTATS_BLOCK] __attribute__((aligned(32)));
    while (n > 0) {
        size_t nb = n < TSTATS_BLOCK ? n : TSTATS_BLOCK;
        size_t nv = nb - nb % TSTATS_LANES;
        if (nv) {
            struct fastblock fb;
            if (h)
                fast_pack_avx2(x, nv, &fb, eb);
            else
                fast_avx2(x, nv, &fb);
            uint32_t negmax = (fb.umax >> 31) ? fb.umax & 0x7fffffffu : 0;
            uint32_t posmax = fb.smax >= 0 ? (uint32_t)fb.smax : 0;
            uint32_t amax = negmax > posmax ? negmax : posmax;
            int any_nz = fb.am1 != UINT32_MAX;
            uint32_t amin = fb.am1 + 1u;
            if (amax < AMPDIAG_FP16_OVF_BITS && (!any_nz || amin >= AMPDIAG_F32_MIN_NORMAL)) {
                /* clean: extremes from the bit-pattern extremes, every class by the counts */
                uint32_t minb = (fb.umax >> 31) ? fb.umax : (uint32_t)fb.smin;
                uint32_t maxb = fb.smax >= 0 ? (uint32_t)fb.smax : (uint32_t)fb.smin;
                record_extremes(s, ampdiag_f32_from_bits(minb), ampdiag_f32_from_bits(maxb),
                                ampdiag_f32_from_bits(amax), any_nz ? ampdiag_f32_from_bits(amin) : INFINITY);
                uint64_t neg = fb.neg;
                s->count += nv;
                s->n_zero += fb.zero;
                s->n_neg += neg;
                s->n_pos += nv - fb.zero - neg;
                s->fp16_underflow += (nv - fb.zero) - fb.g_unf;
                s->fp16_subnormal += fb.g_unf - fb.g_norm;
                s->sum += fb.sum;
                s->sumsq += fb.sq;
                if (h) {
                    int flo = (int)(amin >> 23), fhi = (int)(amax >> 23);
                    if (any_nz)
                        hist_window_avx2(x, nv, eb, flo, fhi, h, count8);
                    h->bin[AMPDIAG_HIST_ZERO] += fb.zero;
                }
            } else {
                /* NaN, inf, a float32 subnormal or an FP16 overflow: the full kernel */
                add_block(block_avx2, s, h, x, nv);
            }
        }
        if (nb > nv)
            accumulate_scalar(s, h, x + nv, nb - nv);
        x += nb;
        n -= nb;
    }
}
#endif

void ampdiag_tstats_accumulate(ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t n)
{
#ifdef TSTATS_HAVE_AVX2
    int k = pick_kernel();
    if (k) {
        accumulate_fast(s, h, x, n, k == 2 ? count8_avx512vl : count8_avx2);
        return;
    }
#endif
    accumulate_generic(s, h, x, n);
}

void ampdiag_tstats_compute(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h)
{
    ampdiag_tstats_init(s);
    if (h)
        ampdiag_hist_init(h);
    ampdiag_tstats_accumulate(s, h, x, n);
}

void ampdiag_tstats_merge(ampdiag_tstats *d, const ampdiag_tstats *s)
{
    d->count += s->count;
    d->n_nan += s->n_nan;
    d->n_posinf += s->n_posinf;
    d->n_neginf += s->n_neginf;
    d->n_zero += s->n_zero;
    d->n_neg += s->n_neg;
    d->n_pos += s->n_pos;
    d->fp16_overflow += s->fp16_overflow;
    d->fp16_underflow += s->fp16_underflow;
    d->fp16_subnormal += s->fp16_subnormal;
    d->bf16_overflow += s->bf16_overflow;
    d->bf16_underflow += s->bf16_underflow;
    d->bf16_subnormal += s->bf16_subnormal;
    record_extremes(d, s->min, s->max, s->absmax, s->absmin_nz);
    d->sum += s->sum;
    d->sumsq += s->sumsq;
}

uint64_t ampdiag_tstats_finite(const ampdiag_tstats *s)
{
    return s->count - s->n_nan - s->n_posinf - s->n_neginf;
}

double ampdiag_tstats_mean(const ampdiag_tstats *s)
{
    uint64_t nf = ampdiag_tstats_finite(s);
    return nf ? s->sum / (double)nf : NAN;
}

double ampdiag_tstats_rms(const ampdiag_tstats *s)
{
    uint64_t nf = ampdiag_tstats_finite(s);
    return nf ? sqrt(s->sumsq / (double)nf) : NAN;
}

int ampdiag_hist_bin_of(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    uint32_t a = u & 0x7fffffffu;
    if (a > AMPDIAG_F32_INF) return AMPDIAG_HIST_NAN;
    if (a == AMPDIAG_F32_INF) return (u >> 31) ? AMPDIAG_HIST_NEGINF : AMPDIAG_HIST_POSINF;
    if (a == 0) return AMPDIAG_HIST_ZERO;
    if (a < AMPDIAG_F32_MIN_NORMAL) return subnormal_bin(a);
    return AMPDIAG_HIST_BIN((int)(a >> 23) - 127);
}
