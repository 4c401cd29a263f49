/*
 * tstats.c - fused per-tensor statistics (ampdiag.h): one pass over the data fills every
 * field of an ampdiag_tstats record (with the what-if classes of every row of the format
 * table) and, optionally, the exponent histogram.
 *
 * The data is cut into blocks of TSTATS_BLOCK values. On x86-64 with AVX2 (in 256-bit vectors)
 * or AVX-512 (in 512-bit ones) a block is read once by the block kernel (accumulate_z, below:
 * extremes, zeros, signs, float partial sums and two 16-bit keys a value kept in L1); each class
 * threshold of the format table, and any extra threshold of ampdiag_tstats_compute_ge, is then
 * settled by the block's range of |x| or counted from the keys; a block that holds NaN or inf is
 * redone by the full kernel (block_avx2: every class by compares, double sums). The histogram
 * is counted from the keys' exponent fields by bit-sliced adders. Everywhere else, or with
 * AMPDIAG_TSTATS_IMPL=generic, a portable kernel in plain C (lane arrays the compiler
 * vectorises) does every block. All paths give identical counts, extremes and histograms, and
 * sums within AMPDIAG_TSTATS_SUM_RTOL of the exact ones (tests/t_tstats.c checks all of them
 * against a slow reference).
 *
 * Every kernel takes the class thresholds from the format table (numfmt.h's
 * AMPDIAG_CLASS_BITS_TABLE) and loops over its rows; a new row needs no new kernel code.
 *
 * Per-tensor scaled what-if counts (ampdiag_whatif_scaled) are a separate pass with thresholds
 * found for the scale (ampdiag_scaled_thresholds, numfmt.c).
 */
#include "ampdiag.h"
#include "numerics/numfmt.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TSTATS_HAVE_AVX2 1
#endif

#define TSTATS_BLOCK 4096 /* values per block: counts per lane stay below 2^15 */
#define Z_MAX_EXTRA 8     /* extra thresholds of ampdiag_tstats_compute_ge */
#define TSTATS_LANES 8
#define NFMT AMPDIAG_NFORMATS

/* The class thresholds of every row of the format table (numfmt.h): { overflow, normal,
 * underflow } on |x| bits. Every kernel counts the what-if classes from these. */
static const uint32_t class_bits[NFMT][3] = AMPDIAG_CLASS_BITS_TABLE;
_Static_assert(AMPDIAG_CLASS_NFORMATS == NFMT, "numfmt.h's class table has one row per format");
_Static_assert(offsetof(ampdiag_tstats, e5m2_subnormal) ==
                   offsetof(ampdiag_tstats, whatif) + sizeof(uint64_t) * (3 * AMPDIAG_E5M2 + AMPDIAG_WHATIF_SUBNORMAL),
               "the named what-if counters alias whatif[][]");

/*
 * Every what-if class is a difference of monotone counts G(g) = #{values with |x| bits >= g}:
 *   overflow  = G(ovf) - G(inf)     (finite values at or above the overflow threshold)
 *   underflow = G(1) - G(unf + 1)   (non-zero values at or below the underflow threshold)
 *   subnormal = G(unf + 1) - G(norm)
 * The vector kernels count G at these thresholds (the "G thresholds" of a row, below) and
 * turn them into classes with classes_from_g.
 */
enum { G_UNF = 0, G_NORM = 1, G_OVF = 2 };
static inline uint32_t g_threshold(int f, int j)
{
    return j == G_UNF ? class_bits[f][2] + 1u : j == G_NORM ? class_bits[f][1] : class_bits[f][0];
}

/* One block's partial results. Counts are exact; kmin/kmax are order-preserving keys. */
struct block {
    uint64_t nan, pinf, ninf, zero, neg;
    uint64_t wi[NFMT][AMPDIAG_WHATIF_NCLASSES]; /* as ampdiag_tstats.whatif */
    int32_t kmin, kmax; /* over finite values; INT32_MAX / INT32_MIN when none */
    int32_t amax, amin; /* |x| bits over finite / finite non-zero; 0 / INT32_MAX when none */
    double sum, sq;
};

/* wi[f][*] += the classes of row f from its G counts g[f][G_*], the count of non-zero values
 * nz and of non-finite values nonfin (see above). */
static void classes_from_g(uint64_t wi[NFMT][AMPDIAG_WHATIF_NCLASSES], const uint64_t g[NFMT][3], uint64_t nz,
                           uint64_t nonfin)
{
    for (int f = 0; f < NFMT; f++) {
        wi[f][AMPDIAG_WHATIF_OVERFLOW] += g[f][G_OVF] - nonfin;
        wi[f][AMPDIAG_WHATIF_UNDERFLOW] += nz - g[f][G_UNF];
        wi[f][AMPDIAG_WHATIF_SUBNORMAL] += g[f][G_UNF] - g[f][G_NORM];
    }
}

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
    for (int f = 0; f < NFMT; f++) {
        const uint32_t *t = class_bits[f];
        b->wi[f][AMPDIAG_WHATIF_OVERFLOW] += fin & (a >= t[0]);
        b->wi[f][AMPDIAG_WHATIF_UNDERFLOW] += nz & (a <= t[2]);
        b->wi[f][AMPDIAG_WHATIF_SUBNORMAL] += (a > t[2]) & (a < t[1]);
    }
}

static void block_init(struct block *b)
{
    memset(b, 0, sizeof *b);
    b->kmin = INT32_MAX;
    b->kmax = INT32_MIN;
    b->amin = INT32_MAX;
}

/* G(g), the count of |x| bits >= g among nv values at x (a block, still in L1): one short
 * loop, a compare and an add per vector once the compiler has vectorised it. */
static uint64_t block_count_at_least(const float *x, size_t nv, uint32_t g)
{
    int32_t t = (int32_t)g; /* |x| bits and every threshold are below 2^31: signed compares */
    uint32_t c = 0;
    for (size_t i = 0; i < nv; i++)
        c += (int32_t)(load_bits(x, i) & 0x7fffffffu) >= t;
    return c;
}

/* The what-if classes of a block from its G counts: every threshold at or below the block's
 * smallest non-zero |x| counts all non-zero values, every one above its largest none, and only
 * those in between take a pass over the block (most rows need none on most blocks). */
static void block_classes(const float *x, size_t nv, struct block *b)
{
    uint64_t nonfin = b->nan + b->pinf + b->ninf, nz = nv - b->zero;
    uint32_t lo = (uint32_t)b->amin, hi = (uint32_t)b->amax; /* over finite values */
    if (nonfin) {
        lo = lo < AMPDIAG_F32_INF ? lo : AMPDIAG_F32_INF;
        hi = 0x7fffffffu;
    }
    uint64_t g[NFMT][3];
    for (int f = 0; f < NFMT; f++)
        for (int j = 0; j < 3; j++) {
            uint32_t t = g_threshold(f, j);
            g[f][j] = t <= lo ? nz : t > hi ? 0 : block_count_at_least(x, nv, t);
        }
    classes_from_g(b->wi, g, nz, nonfin);
}

/*
 * Portable block kernel: nv (a multiple of TSTATS_LANES, at most TSTATS_BLOCK) values in
 * lanes, written branch-free with signed compares so that the compiler vectorises it.
 * Five counters are packed three to a 32-bit lane (10 bits each: a lane sees at most
 * TSTATS_BLOCK / TSTATS_LANES = 512 values) to keep the accumulators in registers; the what-if
 * classes then come from block_classes.
 */
static void block_generic(const float *x, size_t nv, struct block *b)
{
    uint32_t c0[TSTATS_LANES] = {0}; /* nan | +inf << 10 | -inf << 20 */
    uint32_t c1[TSTATS_LANES] = {0}; /* zero | neg << 10 */
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
            c0[l] += (uint32_t)((isnan_ & 1) | (isinf_ & ~neg & (1 << 10)) | (isinf_ & neg & (1 << 20)));
            c1[l] += (uint32_t)((~nz & 1) | (fnz & neg & (1 << 10)));
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
        b->zero += c1[l] & 0x3ffu; b->neg += c1[l] >> 10;
        b->kmin = k_min[l] < b->kmin ? k_min[l] : b->kmin;
        b->kmax = k_max[l] > b->kmax ? k_max[l] : b->kmax;
        b->amax = a_max[l] > b->amax ? a_max[l] : b->amax;
        b->amin = a_min[l] < b->amin ? a_min[l] : b->amin;
        b->sum += d_sum[l];
        b->sq += d_sq[l];
    }
    block_classes(x, nv, b);
}

#ifdef TSTATS_HAVE_AVX2
/*
 * AVX2 block kernel (every class by compares). Every count is a monotone count "a > t" over
 * the |x| bit pattern a, or over the signed pattern s for the sign split, so each costs one
 * compare; pairs of 32-bit compare masks are packed into 16-bit lanes (vpackssdw) and
 * subtracted into accumulators (-1 per hit). The compares, in this order:
 *   on a: the three G thresholds of every row of the format table (G_UNF, G_NORM, G_OVF),
 *   on s: S0 s > -1 (sign clear),
 *   on a: a > 0, a >= inf, a > inf (NaN),
 *   on s: S1 s > INT32_MIN (not -0), S2 s >= (int)0xff800000 (sign clear, or negative with
 *         a >= inf), S3 s > (int)0xff800000.
 * A vector whose values are all finite normal float32 (nearly every vector of real data)
 * takes the first FULL_NFAST compares only: the others are known.
 */
#define FULL_S0 (3 * NFMT)
#define FULL_NFAST (FULL_S0 + 1)          /* the compares of a finite normal vector */
#define FULL_NZ FULL_NFAST
#define FULL_NONFIN (FULL_NFAST + 1)
#define FULL_NAN (FULL_NFAST + 2)
#define FULL_S1 (FULL_NFAST + 3)
#define FULL_S2 (FULL_NFAST + 4)
#define FULL_S3 (FULL_NFAST + 5)
#define FULL_NCMP (FULL_NFAST + 6)
_Static_assert(FULL_NFAST % 2 == 0 && FULL_NCMP % 2 == 0, "compares pack in pairs");

/* The compare constants ("> t") of the full kernel. */
static void full_thresholds(int32_t t[FULL_NCMP])
{
    for (int f = 0; f < NFMT; f++)
        for (int j = 0; j < 3; j++)
            t[3 * f + j] = (int32_t)(g_threshold(f, j) - 1u);
    t[FULL_S0] = -1;
    t[FULL_NZ] = 0;
    t[FULL_NONFIN] = (int32_t)(AMPDIAG_F32_INF - 1u);
    t[FULL_NAN] = (int32_t)AMPDIAG_F32_INF;
    t[FULL_S1] = INT32_MIN;
    t[FULL_S2] = (int32_t)0xff800000u - 1;
    t[FULL_S3] = (int32_t)0xff800000u;
}

/* Sum of the -1 hits of each of the two compares packed into a 16-bit accumulator: packs_epi32(p,
 * q) puts p in int16 lanes 0-3 and 8-11, q in 4-7 and 12-15. */
__attribute__((target("avx2")))
static void packed_counts(__m256i acc, uint64_t *p, uint64_t *q)
{
    int16_t t[16];
    _mm256_storeu_si256((__m256i *)(void *)t, acc);
    int64_t sp = 0, sq = 0;
    for (int j = 0; j < 4; j++) {
        sp += (int64_t)t[j] + t[j + 8];
        sq += (int64_t)t[j + 4] + t[j + 12];
    }
    *p += (uint64_t)sp;
    *q += (uint64_t)sq;
}

#define CMPGT(v, t) _mm256_cmpgt_epi32((v), _mm256_set1_epi32((int)(t)))

/* The sums of one vector (v, non-finite lanes already zeroed) into vsum, vsq. */
__attribute__((target("avx2,fma"), always_inline))
static inline void add_sums(__m256 v, __m256d *vsum, __m256d *vsq)
{
    __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    *vsum = _mm256_add_pd(*vsum, _mm256_add_pd(lo, hi));
    *vsq = _mm256_fmadd_pd(lo, lo, _mm256_fmadd_pd(hi, hi, *vsq));
}

__attribute__((target("avx2,fma")))
static void block_avx2(const float *x, size_t nv, struct block *b)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256i imax = _mm256_set1_epi32(INT32_MAX), imin = _mm256_set1_epi32(INT32_MIN);
    int32_t tc[FULL_NCMP];
    full_thresholds(tc);
    __m256i t[FULL_NCMP], acc[FULL_NCMP / 2], facc[FULL_NFAST / 2];
    for (int k = 0; k < FULL_NCMP; k++) t[k] = _mm256_set1_epi32(tc[k]);
    for (int k = 0; k < FULL_NCMP / 2; k++) acc[k] = _mm256_setzero_si256();
    for (int k = 0; k < FULL_NFAST / 2; k++) facc[k] = _mm256_setzero_si256();
    __m256i vkmin = imax, vkmax = imin, vamin = imax;
    __m256d vsum = _mm256_setzero_pd(), vsq = vsum;
    uint64_t nfast = 0;
    /* one branch per 8 values (testing 16 at a time measured slower) */
    for (size_t i = 0; i < nv; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(x + i));
        __m256i a = _mm256_and_si256(u, absmask);
        __m256i key = _mm256_xor_si256(u, _mm256_srli_epi32(_mm256_srai_epi32(u, 31), 1));
        __m256i normal = _mm256_andnot_si256(CMPGT(a, AMPDIAG_F32_INF - 1), CMPGT(a, AMPDIAG_F32_MIN_NORMAL - 1));
        if (_mm256_movemask_epi8(normal) == -1) {
#pragma GCC unroll 16
            for (int k = 0; k < FULL_NFAST; k += 2)
                facc[k / 2] = _mm256_sub_epi16(facc[k / 2], _mm256_packs_epi32(_mm256_cmpgt_epi32(a, t[k]),
                                                                               _mm256_cmpgt_epi32(k + 1 == FULL_S0 ? u : a, t[k + 1])));
            nfast += 8;
            vkmin = _mm256_min_epi32(vkmin, key);
            vkmax = _mm256_max_epi32(vkmax, key);
            vamin = _mm256_min_epi32(vamin, a);
            add_sums(_mm256_castsi256_ps(u), &vsum, &vsq);
            continue;
        }
        __m256i m[FULL_NCMP];
#pragma GCC unroll 32
        for (int k = 0; k < FULL_NCMP; k++) {
            int on_s = k == FULL_S0 || k == FULL_S1 || k == FULL_S2 || k == FULL_S3;
            m[k] = _mm256_cmpgt_epi32(on_s ? u : a, t[k]);
        }
#pragma GCC unroll 16
        for (int k = 0; k < FULL_NCMP; k += 2)
            acc[k / 2] = _mm256_sub_epi16(acc[k / 2], _mm256_packs_epi32(m[k], m[k + 1]));
        /* extremes: non-finite values replaced by the identities */
        __m256i nonfin = m[FULL_NONFIN];
        vkmin = _mm256_min_epi32(vkmin, _mm256_blendv_epi8(key, imax, nonfin));
        vkmax = _mm256_max_epi32(vkmax, _mm256_blendv_epi8(key, imin, nonfin));
        vamin = _mm256_min_epi32(vamin, _mm256_blendv_epi8(imax, a, _mm256_andnot_si256(nonfin, m[FULL_NZ])));
        /* sums in double; non-finite values contribute 0 */
        add_sums(_mm256_castsi256_ps(_mm256_andnot_si256(nonfin, u)), &vsum, &vsq);
    }
    uint64_t c[FULL_NCMP] = {0};
    for (int k = 0; k < FULL_NCMP; k += 2)
        packed_counts(acc[k / 2], &c[k], &c[k + 1]);
    uint64_t cf[FULL_NFAST] = {0};
    for (int k = 0; k < FULL_NFAST; k += 2)
        packed_counts(facc[k / 2], &cf[k], &cf[k + 1]);
    /* the finite normal vectors: their compares in cf; every value is > 0, finite, not NaN,
     * not -0, and S2, S3 equal S0 */
    for (int k = 0; k < FULL_NFAST; k++) c[k] += cf[k];
    c[FULL_NZ] += nfast;
    c[FULL_S1] += nfast;
    c[FULL_S2] += cf[FULL_S0];
    c[FULL_S3] += cf[FULL_S0];
    uint64_t g[NFMT][3];
    for (int f = 0; f < NFMT; f++)
        for (int j = 0; j < 3; j++) g[f][j] = c[3 * f + j];
    uint64_t nz = c[FULL_NZ], nonfin = c[FULL_NONFIN], nan = c[FULL_NAN];
    uint64_t S0 = c[FULL_S0], S1 = c[FULL_S1], S2 = c[FULL_S2], S3 = c[FULL_S3];
    uint64_t neg_big = S2 - S0, neg_nan = S3 - S0;
    classes_from_g(b->wi, g, nz, nonfin);
    b->zero += nv - nz;
    b->nan += nan;
    b->ninf += neg_big - neg_nan;
    b->pinf += (nonfin - nan) - (neg_big - neg_nan);
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
 * Histogram of byte-packed exponent fields, bit-sliced: a pass takes 8 consecutive fields
 * [base, base + 8), turns each byte into a one-hot byte (bit k for field base + k, 0 outside)
 * and adds the one-hot vectors as 256 one-bit numbers at once with carry-save adders
 * (Harley-Seal: 16 vectors per 15 adders). The sums live in 8 bit planes, a count of up to 255
 * per bit of every byte lane, so a pass takes at most 255 vectors.
 */
/* Carry-save adder on 256 bits: (h, l) := the two-bit sums of a + b + c (in 512 bits, below,
 * each output is one vpternlogd: 0x96 parity, 0xe8 majority). */
#define CSA(h, l, a, b, c)                                                           \
    do {                                                                             \
        __m256i a_ = (a), b_ = (b), c_ = (c);                                        \
        __m256i u_ = _mm256_xor_si256(a_, b_);                                       \
        (h) = _mm256_or_si256(_mm256_and_si256(a_, b_), _mm256_and_si256(u_, c_));   \
        (l) = _mm256_xor_si256(u_, c_);                                              \
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
__attribute__((target("avx2")))
static void count8_avx2(const uint8_t *eb, size_t nvec, int base, uint64_t out[8]) { COUNT8_BODY }
#undef IN
#undef COUNT8_BODY
#undef CSA

/* The same in 512-bit vectors: 64 fields a vector, nvec (counted in 32-byte vectors as above) a
 * multiple of 32; the planes are counted as two 256-bit halves. */
#define ZTERN(a, b, c, imm) _mm512_ternarylogic_epi32((a), (b), (c), (imm))
#define ZCSA(h, l, a, b, c)                                                           \
    do {                                                                              \
        __m512i a_ = (a), b_ = (b), c_ = (c);                                         \
        (h) = ZTERN(a_, b_, c_, 0xe8);                                                \
        (l) = ZTERN(a_, b_, c_, 0x96);                                                \
    } while (0)
#define ZIN(k) _mm512_shuffle_epi8(onehot, _mm512_adds_epu8(_mm512_sub_epi8(_mm512_load_si512((const void *)(eb + 64 * (j + (k)))), bv), bias))
__attribute__((target("avx2,avx512f,avx512bw,avx512vl")))
static void count8_z512(const uint8_t *eb, size_t nvec, int base, uint64_t out[8])
{
    const __m512i bv = _mm512_set1_epi8((char)base), bias = _mm512_set1_epi8(0x78);
    const __m512i onehot = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, -128));
    const __m512i zero = _mm512_setzero_si512();
    __m512i ones = zero, twos = zero, fours = zero, eights = zero;
    __m512i p16 = zero, p32 = zero, p64 = zero, p128 = zero;
    __m512i twosA, twosB, foursA, foursB, eightsA, eightsB, sixteens;
    for (size_t j = 0; j < nvec / 2; j += 16) {
        ZCSA(twosA, ones, ones, ZIN(0), ZIN(1));
        ZCSA(twosB, ones, ones, ZIN(2), ZIN(3));
        ZCSA(foursA, twos, twos, twosA, twosB);
        ZCSA(twosA, ones, ones, ZIN(4), ZIN(5));
        ZCSA(twosB, ones, ones, ZIN(6), ZIN(7));
        ZCSA(foursB, twos, twos, twosA, twosB);
        ZCSA(eightsA, fours, fours, foursA, foursB);
        ZCSA(twosA, ones, ones, ZIN(8), ZIN(9));
        ZCSA(twosB, ones, ones, ZIN(10), ZIN(11));
        ZCSA(foursA, twos, twos, twosA, twosB);
        ZCSA(twosA, ones, ones, ZIN(12), ZIN(13));
        ZCSA(twosB, ones, ones, ZIN(14), ZIN(15));
        ZCSA(foursB, twos, twos, twosA, twosB);
        ZCSA(eightsB, fours, fours, foursA, foursB);
        ZCSA(sixteens, eights, eights, eightsA, eightsB);
        __m512i c1 = _mm512_and_si512(p16, sixteens);
        p16 = _mm512_xor_si512(p16, sixteens);
        __m512i c2 = _mm512_and_si512(p32, c1);
        p32 = _mm512_xor_si512(p32, c1);
        __m512i c3 = _mm512_and_si512(p64, c2);
        p64 = _mm512_xor_si512(p64, c2);
        p128 = _mm512_or_si512(p128, c3);
    }
    uint64_t lo[8], hi[8];
#define ZLO(v) _mm512_castsi512_si256(v)
#define ZHI(v) _mm512_extracti64x4_epi64((v), 1)
    planes_count(ZLO(ones), ZLO(twos), ZLO(fours), ZLO(eights), ZLO(p16), ZLO(p32), ZLO(p64), ZLO(p128), lo);
    planes_count(ZHI(ones), ZHI(twos), ZHI(fours), ZHI(eights), ZHI(p16), ZHI(p32), ZHI(p64), ZHI(p128), hi);
#undef ZLO
#undef ZHI
    for (int k = 0; k < 8; k++)
        out[k] = lo[k] + hi[k];
}
#undef ZIN
#undef ZCSA
#undef ZTERN

#define HWIN 64 /* the widest exponent window counted by the bit-sliced passes */

/* Histogram of the non-zero values of a finite block x[0..nv) (nv a multiple of 8, at most
 * TSTATS_BLOCK) whose exponent fields lie in [flo, fhi]; eb (room for TSTATS_BLOCK) holds the
 * fields of the first nv - nv % 16 values as bytes, of which the first nq = nv - nv % 32 are
 * counted from eb, the rest from x. The top HWIN fields are counted by count8 (count8_avx2 or
 * count8_z512), 8 per pass; the few values below them (a block that spans more than HWIN
 * binades) are found by one compare and counted one by one. Zeros (field 0 < flo) are not
 * counted here. */
typedef void (*count8_fn)(const uint8_t *, size_t, int, uint64_t *);

__attribute__((target("avx2")))
static void hist_window_avx2(const float *x, size_t nv, uint8_t *eb, int flo, int fhi, ampdiag_hist *h,
                             count8_fn count8)
{
    size_t nq = nv - nv % 32, nvec = nq / 32; /* eb holds nv - nv % 16 fields */
    /* pad with zero fields (never counted) to whole groups of 16 vectors (32 for count8_z512) */
    size_t npad = (nvec + 31) / 32 * 32;
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
#endif

typedef void (*block_fn)(const float *, size_t, struct block *);

/* The kernels this CPU runs: 2 = the block kernel in 512-bit vectors (accumulate_z with zops512;
 * AVX-512 F, BW, DQ and VL), 1 = the same in 256-bit vectors (AVX2 and FMA), 0 = the portable
 * kernel.
 * AMPDIAG_TSTATS_IMPL=avx2 or =generic forces a lesser one (the tests run all three); the choice
 * is read from the environment once, and again by ampdiag_tstats_impl(). (An AVX-512 kernel
 * counting with compares into mask registers was measured slower than AVX2 on Intel and on AMD
 * Zen 5: those compares share one or two ports; the 512-bit path counts with plain adds.) */
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
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")
               ? 2 : 1;
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
    static const char *const names[3] = {"generic", "avx2", "avx512"};
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
    for (int f = 0; f < NFMT; f++)
        for (int j = 0; j < AMPDIAG_WHATIF_NCLASSES; j++)
            s->whatif[f][j] += b->wi[f][j];
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
/*
 * The 512-bit path (AVX-512 F/BW/DQ/VL, the default where the CPU has them).
 *
 * A block (at most TSTATS_BLOCK values, a multiple of 64) is read once from memory by z_pass1,
 * which keeps only what every value needs: the extremes (unsigned max of the bit patterns: the
 * most negative value; signed max: the largest non-negative one; unsigned min of |x| bits - 1:
 * the smallest non-zero |x|), the count of zeros and of negative values, the sums, and two
 * 16-bit keys of every value, stored in L1: hi16(|x| - 1) (a zero's is all ones) and hi16(|x|).
 * Counting uses no mask register (compares into masks share one port here): a count "key
 * below t" is the sign bit of key - t, shifted down and added, 32 values at a time.
 *
 * Then, from the block's range of |x| (a finite block: a block with NaN or inf is redone by
 * the full kernel), each class threshold of the format table and each extra threshold (the
 * FP8 delayed-scaling ones: ampdiag_tstats_compute_ge) is settled without looking at a value
 * when it lies at or below the smallest non-zero |x| (every non-zero value reaches it) or
 * above the largest (none does); only those in between are counted, from the stored keys
 * (thresholds whose 16 low bits, or those of threshold - 1, are zero: every OCP FP8 threshold,
 * FP16's underflow threshold, non-zero) or with a 32-bit compare of the block, still in L1.
 * Most thresholds lie outside most blocks' range.
 *
 * Sums: float partial sums of 16 values a lane (256 a fold), folded into double sums; their
 * error is at most 16 units of float rounding of the sum of the magnitudes (squares), within
 * AMPDIAG_TSTATS_SUM_RTOL (ampdiag.h). Blocks whose largest |x| reaches 2^60 (a float square
 * could overflow) or stays below 2^-60 (squares would lose bits in float's subnormals) take
 * double sums instead.
 */
#define Z512 __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl")))
#define Z512_INLINE __attribute__((target("avx2,fma,avx512f,avx512bw,avx512dq,avx512vl"), always_inline)) static inline
#define Z_GROUP 64          /* values a step of z_pass1 */
#define Z_FOLD 256          /* values between folds of the float sums (16 a lane) */
#define Z_PREFETCH 16384    /* bytes ahead: at ~40 GB/s a 4 KiB distance left the loop waiting on DRAM */
#define Z_SUM_HI 0x5d800000u /* 2^60 */
#define Z_SUM_LO 0x21800000u /* 2^-60 */

/* What z_pass1 found in a block. */
struct zblock {
    uint32_t umax;   /* unsigned max of the bit patterns */
    int32_t smax;    /* signed max */
    uint32_t am1;    /* unsigned min of |x| bits - 1 (UINT32_MAX: no non-zero value) */
    uint64_t zero, neg;
    double sum, sq;
};

/* 16-bit lane counters to 32-bit lanes, summed. */
Z512_INLINE uint64_t z_sum16(__m512i c)
{
    return (uint64_t)(uint32_t)_mm512_reduce_add_epi32(_mm512_madd_epi16(c, _mm512_set1_epi16(1)));
}

Z512 static void z_pass1(const float *x, size_t nv, uint16_t *km_out, uint16_t *ka_out, struct zblock *zb)
{
    const __m512i M = _mm512_set1_epi32(0x7fffffff), m1 = _mm512_set1_epi32(-1), M16 = _mm512_set1_epi16(0x7fff);
    /* word i of permutex2var(a, hi, b): the high half of dword i of a (i < 16) or of b */
    const __m512i hi = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                                        25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    __m512i umax = _mm512_setzero_si512(), smax = _mm512_set1_epi32(INT32_MIN), amin = m1;
    __m512i cz = _mm512_setzero_si512(), cn = cz;
    __m512d ds = _mm512_setzero_pd(), dq = ds;
    for (size_t i = 0; i < nv; i += Z_FOLD) {
        __m512 fs = _mm512_setzero_ps(), fq = fs;
        size_t end = nv - i < Z_FOLD ? nv : i + Z_FOLD;
        for (size_t k = i; k < end; k += Z_GROUP) {
            const char *pf = (const char *)(x + k) + Z_PREFETCH;
            _mm_prefetch(pf, _MM_HINT_T0);
            _mm_prefetch(pf + 64, _MM_HINT_T0);
            _mm_prefetch(pf + 128, _MM_HINT_T0);
            _mm_prefetch(pf + 192, _MM_HINT_T0);
            __m512i u[4], am[4];
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                u[j] = _mm512_loadu_si512((const void *)(x + k + 16 * (size_t)j));
                am[j] = _mm512_add_epi32(_mm512_and_si512(u[j], M), m1);
                amin = _mm512_min_epu32(amin, am[j]);
                umax = _mm512_max_epu32(umax, u[j]);
                smax = _mm512_max_epi32(smax, u[j]);
                __m512 v = _mm512_castsi512_ps(u[j]);
                fs = _mm512_add_ps(fs, v);
                fq = _mm512_fmadd_ps(v, v, fq);
            }
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m512i ku = _mm512_permutex2var_epi16(u[2 * h], hi, u[2 * h + 1]);
                __m512i km = _mm512_permutex2var_epi16(am[2 * h], hi, am[2 * h + 1]);
                cz = _mm512_add_epi16(cz, _mm512_srli_epi16(km, 15));                       /* a zero */
                cn = _mm512_add_epi16(cn, _mm512_srli_epi16(_mm512_andnot_si512(km, ku), 15)); /* sign, non-zero */
                _mm512_store_si512((void *)(km_out + k + 32 * (size_t)h), km);
                _mm512_store_si512((void *)(ka_out + k + 32 * (size_t)h), _mm512_and_si512(ku, M16));
            }
        }
        ds = _mm512_add_pd(ds, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(fs)),
                                             _mm512_cvtps_pd(_mm512_extractf32x8_ps(fs, 1))));
        dq = _mm512_add_pd(dq, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(fq)),
                                             _mm512_cvtps_pd(_mm512_extractf32x8_ps(fq, 1))));
    }
    zb->umax = (uint32_t)_mm512_reduce_max_epu32(umax);
    zb->smax = _mm512_reduce_max_epi32(smax);
    zb->am1 = (uint32_t)_mm512_reduce_min_epu32(amin);
    zb->zero = z_sum16(cz);
    zb->neg = z_sum16(cn);
    zb->sum = _mm512_reduce_add_pd(ds);
    zb->sq = _mm512_reduce_add_pd(dq);
}

/* How many of the nk keys (a multiple of 32, at most TSTATS_BLOCK) are below t (signed 16-bit;
 * every key and t lie in [-1, 0x7f80]): z_below16_N for N thresholds at once; how many of nv
 * values (a multiple of 16) have |x| bits below g (g <= 2^31): z_below32_N. Counting is the sign
 * of key - t shifted down and added (no mask register). */

/* The sums of nv finite values (a multiple of 16) in double, for blocks float sums cannot take. */
Z512 static void z_sums_double(const float *x, size_t nv, double *sum, double *sq)
{
    __m512d s = _mm512_setzero_pd(), q = s;
    for (size_t i = 0; i < nv; i += 8) {
        __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
        s = _mm512_add_pd(s, v);
        q = _mm512_fmadd_pd(v, v, q);
    }
    *sum = _mm512_reduce_add_pd(s);
    *sq = _mm512_reduce_add_pd(q);
}

/* The same for n (1..4) thresholds t[] at once (one load of the keys for all): below[i] +=. */
#define Z_BELOW16_N(N)                                                                                   \
    Z512 static void z_below16_##N(const uint16_t *k, size_t nk, const int16_t *t, uint64_t *below)      \
    {                                                                                                    \
        __m512i T[N], c[N];                                                                              \
        _Pragma("GCC unroll 4")                                                                          \
        for (int j = 0; j < (N); j++) {                                                                  \
            T[j] = _mm512_set1_epi16(t[j]);                                                              \
            c[j] = _mm512_setzero_si512();                                                               \
        }                                                                                                \
        for (size_t i = 0; i < nk; i += 32) {                                                            \
            __m512i v = _mm512_load_si512((const void *)(k + i));                                        \
            _Pragma("GCC unroll 4")                                                                      \
            for (int j = 0; j < (N); j++)                                                                \
                c[j] = _mm512_add_epi16(c[j], _mm512_srli_epi16(_mm512_sub_epi16(v, T[j]), 15));         \
        }                                                                                                \
        for (int j = 0; j < (N); j++)                                                                    \
            below[j] += z_sum16(c[j]);                                                                   \
    }
#define Z_BELOW32_N(N)                                                                                   \
    Z512 static void z_below32_##N(const float *x, size_t nv, const uint32_t *g, uint64_t *below)        \
    {                                                                                                    \
        const __m512i M = _mm512_set1_epi32(0x7fffffff);                                                 \
        __m512i G[N], c[N];                                                                              \
        _Pragma("GCC unroll 4")                                                                          \
        for (int j = 0; j < (N); j++) {                                                                  \
            G[j] = _mm512_set1_epi32((int)g[j]);                                                         \
            c[j] = _mm512_setzero_si512();                                                               \
        }                                                                                                \
        for (size_t i = 0; i < nv; i += 16) {                                                            \
            __m512i a = _mm512_and_si512(_mm512_loadu_si512((const void *)(x + i)), M);                  \
            _Pragma("GCC unroll 4")                                                                      \
            for (int j = 0; j < (N); j++)                                                                \
                c[j] = _mm512_add_epi32(c[j], _mm512_srli_epi32(_mm512_sub_epi32(a, G[j]), 31));         \
        }                                                                                                \
        for (int j = 0; j < (N); j++)                                                                    \
            below[j] += (uint64_t)(uint32_t)_mm512_reduce_add_epi32(c[j]);                               \
    }
Z_BELOW16_N(1)
Z_BELOW16_N(2)
Z_BELOW16_N(3)
Z_BELOW16_N(4)
Z_BELOW32_N(1)
Z_BELOW32_N(2)
Z_BELOW32_N(3)
Z_BELOW32_N(4)

/* Thresholds of a block still to count, by what they are counted from. */
#define Z_MAXQ (2 * (3 * NFMT + Z_MAX_EXTRA))
struct zqueue {
    int n;
    uint32_t g[Z_MAXQ];   /* the thresholds (|x| bits at least g) ... */
    uint64_t *out[Z_MAXQ]; /* ... and where their counts go */
};

/* Exponent fields (|x| bits >> 23) of nv values as bytes, from the keys hi16(|x|). */
Z512 static void z_fields(const uint16_t *ka, size_t nv, uint8_t *eb)
{
    for (size_t i = 0; i < nv; i += 32)
        _mm256_store_si256((__m256i *)(void *)(eb + i),
                           _mm512_cvtepi16_epi8(_mm512_srli_epi16(_mm512_load_si512((const void *)(ka + i)), 7)));
}


/* The same block kernel in 256-bit vectors (AVX2 alone): the keys of two vectors' values are
 * the high halves of their 32-bit lanes side by side ((u0 >> 16) | (u1 & 0xffff0000): the
 * order of keys does not matter to counts), 16 values a lane between folds of the float sums
 * (128 values: the same bound). */
#define Z256 __attribute__((target("avx2,fma")))
#define Z256_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

static inline uint64_t lanes_sum32(const uint32_t *t)
{
    uint64_t s = 0;
    for (int l = 0; l < 8; l++) s += t[l];
    return s;
}

Z256_INLINE uint64_t y_sum16(__m256i c)
{
    __m256i d = _mm256_madd_epi16(c, _mm256_set1_epi16(1));
    __m128i e = _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
    e = _mm_add_epi32(e, _mm_shuffle_epi32(e, 0x4e));
    e = _mm_add_epi32(e, _mm_shuffle_epi32(e, 0xb1));
    return (uint64_t)(uint32_t)_mm_cvtsi128_si32(e);
}

Z256_INLINE double y_sum_pd(__m256d v)
{
    __m128d e = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(e, _mm_unpackhi_pd(e, e)));
}

Z256_INLINE uint32_t y_red32(__m256i v, int op) /* 0 max_epu32, 1 max_epi32, 2 min_epu32 */
{
    uint32_t t[8];
    _mm256_storeu_si256((__m256i *)(void *)t, v);
    uint32_t r = t[0];
    for (int l = 1; l < 8; l++)
        r = op == 0 ? (t[l] > r ? t[l] : r) : op == 1 ? ((int32_t)t[l] > (int32_t)r ? t[l] : r) : (t[l] < r ? t[l] : r);
    return r;
}

Z256 static void y_pass1(const float *x, size_t nv, uint16_t *km_out, uint16_t *ka_out, struct zblock *zb)
{
    const __m256i M = _mm256_set1_epi32(0x7fffffff), m1 = _mm256_set1_epi32(-1), M16 = _mm256_set1_epi16(0x7fff);
    __m256i umax = _mm256_setzero_si256(), smax = _mm256_set1_epi32(INT32_MIN), amin = m1;
    __m256i cz = _mm256_setzero_si256(), cn = cz;
    __m256d ds = _mm256_setzero_pd(), dq = ds;
    for (size_t i = 0; i < nv; i += 128) {
        __m256 fs = _mm256_setzero_ps(), fq = fs;
        size_t end = nv - i < 128 ? nv : i + 128;
        for (size_t k = i; k < end; k += 32) {
            const char *pf = (const char *)(x + k) + Z_PREFETCH;
            _mm_prefetch(pf, _MM_HINT_T0);
            _mm_prefetch(pf + 64, _MM_HINT_T0);
            __m256i u[4], am[4];
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                u[j] = _mm256_loadu_si256((const __m256i *)(const void *)(x + k + 8 * (size_t)j));
                am[j] = _mm256_add_epi32(_mm256_and_si256(u[j], M), m1);
                amin = _mm256_min_epu32(amin, am[j]);
                umax = _mm256_max_epu32(umax, u[j]);
                smax = _mm256_max_epi32(smax, u[j]);
                __m256 v = _mm256_castsi256_ps(u[j]);
                fs = _mm256_add_ps(fs, v);
                fq = _mm256_fmadd_ps(v, v, fq);
            }
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256i ku = _mm256_blend_epi16(_mm256_srli_epi32(u[2 * h], 16), u[2 * h + 1], 0xaa);
                __m256i km = _mm256_blend_epi16(_mm256_srli_epi32(am[2 * h], 16), am[2 * h + 1], 0xaa);
                cz = _mm256_add_epi16(cz, _mm256_srli_epi16(km, 15));
                cn = _mm256_add_epi16(cn, _mm256_srli_epi16(_mm256_andnot_si256(km, ku), 15));
                _mm256_store_si256((__m256i *)(void *)(km_out + k + 16 * (size_t)h), km);
                _mm256_store_si256((__m256i *)(void *)(ka_out + k + 16 * (size_t)h), _mm256_and_si256(ku, M16));
            }
        }
        ds = _mm256_add_pd(ds, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(fs)),
                                             _mm256_cvtps_pd(_mm256_extractf128_ps(fs, 1))));
        dq = _mm256_add_pd(dq, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(fq)),
                                             _mm256_cvtps_pd(_mm256_extractf128_ps(fq, 1))));
    }
    zb->umax = y_red32(umax, 0);
    zb->smax = (int32_t)y_red32(smax, 1);
    zb->am1 = y_red32(amin, 2);
    zb->zero = y_sum16(cz);
    zb->neg = y_sum16(cn);
    zb->sum = y_sum_pd(ds);
    zb->sq = y_sum_pd(dq);
}

#define Y_BELOW16_N(N)                                                                                   \
    Z256 static void y_below16_##N(const uint16_t *k, size_t nk, const int16_t *t, uint64_t *below)      \
    {                                                                                                    \
        __m256i T[N], c[N];                                                                              \
        _Pragma("GCC unroll 4")                                                                          \
        for (int j = 0; j < (N); j++) {                                                                  \
            T[j] = _mm256_set1_epi16(t[j]);                                                              \
            c[j] = _mm256_setzero_si256();                                                               \
        }                                                                                                \
        for (size_t i = 0; i < nk; i += 16) {                                                            \
            __m256i v = _mm256_load_si256((const __m256i *)(const void *)(k + i));                       \
            _Pragma("GCC unroll 4")                                                                      \
            for (int j = 0; j < (N); j++)                                                                \
                c[j] = _mm256_sub_epi16(c[j], _mm256_cmpgt_epi16(T[j], v)); /* AVX2: a compare's  \
                                                                                result is a vector */ \
        }                                                                                                \
        for (int j = 0; j < (N); j++)                                                                    \
            below[j] += y_sum16(c[j]);                                                                   \
    }
#define Y_BELOW32_N(N)                                                                                   \
    Z256 static void y_below32_##N(const float *x, size_t nv, const uint32_t *g, uint64_t *below)        \
    {                                                                                                    \
        const __m256i M = _mm256_set1_epi32(0x7fffffff);                                                 \
        __m256i G[N], c[N];                                                                              \
        _Pragma("GCC unroll 4")                                                                          \
        for (int j = 0; j < (N); j++) {                                                                  \
            G[j] = _mm256_set1_epi32((int)g[j]);                                                         \
            c[j] = _mm256_setzero_si256();                                                               \
        }                                                                                                \
        for (size_t i = 0; i < nv; i += 8) {                                                             \
            __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(x + i)), M); \
            _Pragma("GCC unroll 4")                                                                      \
            for (int j = 0; j < (N); j++)                                                                \
                c[j] = _mm256_sub_epi32(c[j], _mm256_cmpgt_epi32(G[j], a));                              \
        }                                                                                                \
        for (int j = 0; j < (N); j++) {                                                                  \
            uint32_t t[8];                                                                               \
            _mm256_storeu_si256((__m256i *)(void *)t, c[j]);                                             \
            below[j] += lanes_sum32(t);                                                                  \
        }                                                                                                \
    }
Y_BELOW16_N(1)
Y_BELOW16_N(2)
Y_BELOW16_N(3)
Y_BELOW16_N(4)
Y_BELOW32_N(1)
Y_BELOW32_N(2)
Y_BELOW32_N(3)
Y_BELOW32_N(4)

Z256 static void y_sums_double(const float *x, size_t nv, double *sum, double *sq)
{
    __m256d s = _mm256_setzero_pd(), q = s;
    for (size_t i = 0; i < nv; i += 4) {
        __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
        s = _mm256_add_pd(s, v);
        q = _mm256_fmadd_pd(v, v, q);
    }
    *sum = y_sum_pd(s);
    *sq = y_sum_pd(q);
}

Z256 static void y_fields(const uint16_t *ka, size_t nv, uint8_t *eb)
{
    for (size_t i = 0; i < nv; i += 32) {
        __m256i a = _mm256_srli_epi16(_mm256_load_si256((const __m256i *)(const void *)(ka + i)), 7);
        __m256i b = _mm256_srli_epi16(_mm256_load_si256((const __m256i *)(const void *)(ka + i + 16)), 7);
        _mm256_store_si256((__m256i *)(void *)(eb + i), _mm256_packus_epi16(a, b));
    }
}

/* The kernels of one vector width. */
typedef void (*zb16_fn)(const uint16_t *, size_t, const int16_t *, uint64_t *);
typedef void (*zb32_fn)(const float *, size_t, const uint32_t *, uint64_t *);
struct zops {
    void (*pass1)(const float *, size_t, uint16_t *, uint16_t *, struct zblock *);
    zb16_fn below16[5];
    zb32_fn below32[5];
    void (*sums_double)(const float *, size_t, double *, double *);
    void (*fields)(const uint16_t *, size_t, uint8_t *);
    count8_fn count8;
};
static const struct zops zops512 = {z_pass1, {NULL, z_below16_1, z_below16_2, z_below16_3, z_below16_4},
                                    {NULL, z_below32_1, z_below32_2, z_below32_3, z_below32_4}, z_sums_double,
                                    z_fields, count8_z512};
static const struct zops zops256 = {y_pass1, {NULL, y_below16_1, y_below16_2, y_below16_3, y_below16_4},
                                    {NULL, y_below32_1, y_below32_2, y_below32_3, y_below32_4}, y_sums_double,
                                    y_fields, count8_avx2};

/* The counts of a queue's thresholds: keys k (hi16(|x| - 1) or hi16(|x|), with the threshold's
 * hi16(g - 1) or hi16(g) as the compare) or, k NULL, the values themselves; up to 4 at once. */
static void z_run_queue(const struct zops *ops, const struct zqueue *q, const float *x, size_t nv, const uint16_t *k,
                        int minus1)
{
    const zb16_fn *f16 = ops->below16;
    const zb32_fn *f32 = ops->below32;
    for (int i = 0; i < q->n; i += 4) {
        int m = q->n - i < 4 ? q->n - i : 4;
        uint64_t below[4] = {0, 0, 0, 0};
        if (k) {
            int16_t t[4];
            for (int j = 0; j < m; j++)
                t[j] = (int16_t)((minus1 ? q->g[i + j] - 1u : q->g[i + j]) >> 16);
            f16[m](k, nv, t, below);
        } else {
            f32[m](x, nv, q->g + i, below);
        }
        for (int j = 0; j < m; j++)
            *q->out[i + j] = nv - below[j];
    }
}

/* G(g) = #(|x| bits >= g) into *out over a finite block with nz non-zero values whose non-zero
 * |x| bits lie in [lo, hi] (none when nz = 0): settled by that range, or queued to be counted
 * from the keys (q[0]: hi16(|x| - 1), q[1]: hi16(|x|)) or the values (q[2]). */
/* A threshold with other low bits, bracketed by two hi16(|x|) counts (z_settle). */
struct zfix {
    uint32_t g;
    uint64_t *out, above, at; /* #(hi16 |x| >= hi16(g) + 1), #(hi16 |x| >= hi16(g)) */
};

static void z_settle(uint64_t nz, uint32_t lo, uint32_t hi, uint32_t g, uint64_t *out, struct zqueue q[3],
                     struct zfix *fix, int *nfix)
{
    if (nz == 0 || g > hi) {
        *out = 0;
        return;
    }
    if (g <= lo) {
        *out = nz; /* (g >= 1: a zero never counts) */
        return;
    }
    /* |x| >= g  <=>  hi16(|x| - 1) >= hi16(g - 1) where g - 1 has zero low bits, or
     * hi16(|x|) >= hi16(g) where g has */
    struct zqueue *qq = ((g - 1u) & 0xffffu) == 0 ? &q[0] : (g & 0xffffu) == 0 ? &q[1] : NULL;
    if (qq) {
        qq->g[qq->n] = g;
        qq->out[qq->n++] = out;
        return;
    }
    /* other low bits: G(g) lies between the counts of hi16(|x|) above and at hi16(g); where
     * no value has that hi16 (most blocks: a 1/128 of a binade) they agree and settle it,
     * else the values are compared whole (z_fixup) */
    struct zfix *f = &fix[(*nfix)++];
    f->g = g;
    f->out = out;
    q[1].g[q[1].n] = ((g >> 16) + 1u) << 16;
    q[1].out[q[1].n++] = &f->above;
    q[1].g[q[1].n] = g & 0xffff0000u;
    q[1].out[q[1].n++] = &f->at;
}

/* The bracketed thresholds: settled where the two counts agree, else counted whole. */
static void z_fixup(const struct zops *ops, const float *x, size_t nv, struct zfix *fix, int nfix)
{
    for (int i = 0; i < nfix; i++) {
        if (fix[i].above == fix[i].at) {
            *fix[i].out = fix[i].above;
        } else {
            uint64_t below = 0;
            ops->below32[1](x, nv, &fix[i].g, &below);
            *fix[i].out = nv - below;
        }
    }
}

/* The keys and exponent bytes of a block (z_pass1, z_fields). */
struct zbuf {
    uint16_t km[TSTATS_BLOCK] __attribute__((aligned(64)));
    uint16_t ka[TSTATS_BLOCK] __attribute__((aligned(64)));
    uint8_t eb[TSTATS_BLOCK] __attribute__((aligned(64)));
};

/* One block of nv values (a multiple of 64, at most TSTATS_BLOCK) into s and h, and the counts
 * of |x| bits at least ge[j] (j < k) into g_out. */
static void z_block(const struct zops *ops, ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t nv, size_t k,
                    const uint32_t *ge, uint64_t *g_out, struct zbuf *zbuf)
{
    uint16_t *km = zbuf->km, *ka = zbuf->ka;
    uint8_t *eb = zbuf->eb;
    struct zblock zb;
    ops->pass1(x, nv, km, ka, &zb);
    uint32_t negmax = (zb.umax >> 31) ? zb.umax & 0x7fffffffu : 0;
    uint32_t posmax = zb.smax >= 0 ? (uint32_t)zb.smax : 0;
    uint32_t amax = negmax > posmax ? negmax : posmax;
    if (amax >= AMPDIAG_F32_INF) { /* NaN or inf: the full kernel, every class by compares */
        add_block(block_avx2, s, h, x, nv);
        for (size_t j = 0; j < k; j++)
            g_out[j] += block_count_at_least(x, nv, ge[j]);
        return;
    }
    int any_nz = zb.am1 != UINT32_MAX;
    uint32_t amin = zb.am1 + 1u;
    uint64_t nz = nv - zb.zero;
    /* extremes: the most negative value is the largest pattern with the sign set; the largest
     * is the largest without it, else (every sign set) -0 or the smallest |x| negated */
    float fmin = (zb.umax >> 31) ? ampdiag_f32_from_bits(zb.umax)
                 : zb.zero      ? 0.0f
                                : ampdiag_f32_from_bits(amin);
    float fmax = zb.smax >= 0 ? ampdiag_f32_from_bits((uint32_t)zb.smax)
                 : zb.zero   ? -0.0f
                             : -ampdiag_f32_from_bits(amin);
    record_extremes(s, fmin, fmax, ampdiag_f32_from_bits(amax), any_nz ? ampdiag_f32_from_bits(amin) : INFINITY);
    if (any_nz && (amax >= Z_SUM_HI || amax < Z_SUM_LO))
        ops->sums_double(x, nv, &zb.sum, &zb.sq);
    uint64_t g[NFMT][3], gx[Z_MAX_EXTRA];
    struct zqueue q[3] = {{0}, {0}, {0}};
    struct zfix fix[3 * NFMT + Z_MAX_EXTRA];
    int nfix = 0;
    for (int f = 0; f < NFMT; f++)
        for (int j = 0; j < 3; j++)
            z_settle(nz, amin, amax, g_threshold(f, j), &g[f][j], q, fix, &nfix);
    for (size_t j = 0; j < k; j++)
        z_settle(nz, amin, amax, ge[j], &gx[j], q, fix, &nfix);
    z_run_queue(ops, &q[0], x, nv, km, 1);
    z_run_queue(ops, &q[1], x, nv, ka, 0);
    z_fixup(ops, x, nv, fix, nfix);
    classes_from_g(s->whatif, g, nz, 0);
    for (size_t j = 0; j < k; j++)
        g_out[j] += gx[j];
    s->count += nv;
    s->n_zero += zb.zero;
    s->n_neg += zb.neg;
    s->n_pos += nz - zb.neg;
    s->sum += zb.sum;
    s->sumsq += zb.sq;
    if (h) {
        h->bin[AMPDIAG_HIST_ZERO] += zb.zero;
        int flo = (int)(amin >> 23), fhi = (int)(amax >> 23);
        if (any_nz && fhi >= 1) {
            ops->fields(ka, nv, eb);
            hist_window_avx2(x, nv, eb, flo > 1 ? flo : 1, fhi, h, ops->count8);
        }
        if (any_nz && amin < AMPDIAG_F32_MIN_NORMAL) /* float32 subnormals: rare, placed exactly */
            for (size_t i = 0; i < nv; i++) {
                uint32_t a = load_bits(x, i) & 0x7fffffffu;
                if (a != 0 && a < AMPDIAG_F32_MIN_NORMAL)
                    h->bin[subnormal_bin(a)]++;
            }
    }
}

/* The 512-bit path over x[0..n): blocks of TSTATS_BLOCK, tails shorter than 64 one value at a
 * time; counts[j] += #(|x| bits >= ge[j]) for j < k. */
static void accumulate_z(const struct zops *ops, ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t n, size_t k,
                         const uint32_t *ge, uint64_t *counts)
{
    struct zbuf zbuf; /* 20 KiB: the keys stay in L1 for the block's counts */
    while (n > 0) {
        size_t nb = n < TSTATS_BLOCK ? n : TSTATS_BLOCK;
        size_t nv = nb - nb % Z_GROUP;
        if (nv)
            z_block(ops, s, h, x, nv, k, ge, counts, &zbuf);
        if (nb > nv) {
            accumulate_scalar(s, h, x + nv, nb - nv);
            for (size_t j = 0; j < k; j++)
                counts[j] += block_count_at_least(x + nv, nb - nv, ge[j]);
        }
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
        accumulate_z(k == 2 ? &zops512 : &zops256, s, h, x, n, 0, NULL, NULL);
        return;
    }
#endif
    accumulate_generic(s, h, x, n);
}

int ampdiag_tstats_compute_ge(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h, size_t k,
                              const uint32_t *ge, uint64_t *counts)
{
    if (k > Z_MAX_EXTRA)
        return -1;
    for (size_t j = 0; j < k; j++)
        if (ge[j] < 1u || ge[j] > AMPDIAG_F32_INF)
            return -1;
    ampdiag_tstats_init(s);
    if (h)
        ampdiag_hist_init(h);
    for (size_t j = 0; j < k; j++)
        counts[j] = 0;
#ifdef TSTATS_HAVE_AVX2
    int kern = pick_kernel();
    if (kern) {
        accumulate_z(kern == 2 ? &zops512 : &zops256, s, h, x, n, k, ge, counts);
        return 0;
    }
#endif
    ampdiag_tstats_accumulate(s, h, x, n);
    return ampdiag_count_at_least(x, n, k, ge, counts);
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
    for (int f = 0; f < NFMT; f++)
        for (int j = 0; j < AMPDIAG_WHATIF_NCLASSES; j++)
            d->whatif[f][j] += s->whatif[f][j];
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

/* The scaled what-if counts of nb values against one format's thresholds t (|x| bit patterns),
 * and of two formats' in one pass; counts per block in 32 bits, in plain variables, and the
 * compares signed (|x| bits and thresholds are below 2^31), so that the compiler vectorises
 * them. -O2's cost model vectorises them poorly: compiled at O3, with an AVX2 clone, the
 * two-format pass over 1M values took 0.45 ms of thread CPU time instead of 0.78 (2-core VM).
 * (Not under ThreadSanitizer: gcc instruments the ifunc resolvers, which run before TSan is up.) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define SCALED_CLONES __attribute__((target_clones("avx2", "default"), optimize("O3")))
#elif defined(__GNUC__) && !defined(__clang__)
#define SCALED_CLONES __attribute__((optimize("O3")))
#else
#define SCALED_CLONES
#endif
/* Counts of |x| bit patterns at or above thresholds: g[j] += #(a >= ge[j]) for the k thresholds
 * of ge (signed compares: |x| bits and thresholds are below 2^31), over nb values. Counting
 * "at least" needs one compare and one add per threshold and value (the classes follow from
 * differences, scaled_classes); one loop per count of thresholds keeps the counters in
 * registers. */
#define GE_BODY(K)                                                                  \
    int32_t t_[K], g_[K];                                                           \
    for (int j = 0; j < (K); j++) {                                                 \
        t_[j] = (int32_t)(ge[j] - 1u);                                              \
        g_[j] = 0;                                                                  \
    }                                                                               \
    for (size_t i = 0; i < nb; i++) {                                               \
        int32_t a = (int32_t)(load_bits(x, i) & 0x7fffffffu);                       \
        for (int j = 0; j < (K); j++)                                               \
            g_[j] += a > t_[j]; /* (ge[j] >= 1: one compare) */                     \
    }                                                                               \
    for (int j = 0; j < (K); j++)                                                   \
        g[j] += (uint64_t)g_[j];
SCALED_CLONES static void ge_block1(const float *x, size_t nb, const uint32_t *ge, uint64_t *g) { GE_BODY(1) }
SCALED_CLONES static void ge_block2(const float *x, size_t nb, const uint32_t *ge, uint64_t *g) { GE_BODY(2) }
SCALED_CLONES static void ge_block3(const float *x, size_t nb, const uint32_t *ge, uint64_t *g) { GE_BODY(3) }
SCALED_CLONES static void ge_block4(const float *x, size_t nb, const uint32_t *ge, uint64_t *g) { GE_BODY(4) }
SCALED_CLONES static void ge_block5(const float *x, size_t nb, const uint32_t *ge, uint64_t *g) { GE_BODY(5) }
SCALED_CLONES static void ge_block6(const float *x, size_t nb, const uint32_t *ge, uint64_t *g) { GE_BODY(6) }
SCALED_CLONES static void ge_block8(const float *x, size_t nb, const uint32_t *ge, uint64_t *g) { GE_BODY(8) }

typedef void (*ge_fn)(const float *, size_t, const uint32_t *, uint64_t *);

int ampdiag_count_at_least(const float *x, size_t n, size_t k, const uint32_t *ge, uint64_t *counts)
{
    static const ge_fn by_k[9] = {NULL, ge_block1, ge_block2, ge_block3, ge_block4, ge_block5, ge_block6, NULL, ge_block8};
    if (k > 8)
        return -1;
    if (k == 0)
        return 0; /* nothing to count: no pass */
    for (size_t j = 0; j < k; j++)
        if (ge[j] < 1u || ge[j] > AMPDIAG_F32_INF)
            return -1;
    uint32_t t[8];
    memcpy(t, ge, k * sizeof *ge);
    size_t kk = k;
    while (kk < 8 && !by_k[kk])
        t[kk++] = AMPDIAG_F32_INF; /* (7: the kernel of 8, the last counted and dropped) */
    uint64_t g[8] = {0};
    for (size_t done = 0; kk > 0 && done < n;) {
        size_t nb = n - done < TSTATS_BLOCK ? n - done : TSTATS_BLOCK;
        by_k[kk](x + done, nb, t, g);
        done += nb;
    }
    memcpy(counts, g, k * sizeof *counts);
    return 0;
}

/* The thresholds "at least" of one format's classes (t from ampdiag_scaled_thresholds): the
 * overflow threshold, the normal one, and just above the underflow one. */
static void scaled_ge(const uint32_t t[3], uint32_t *ge)
{
    ge[0] = t[0];
    ge[1] = t[1];
    ge[2] = t[2] + 1u;
}

/* One format's classes from its counts at least ge (scaled_ge) and those of the non-zero (a >=
 * 1) and non-finite (a >= inf) values: every threshold lies in (0, inf], so overflow = #(t0 <= a
 * < inf), underflow = #(0 < a <= t2), subnormal = #(t2 < a < t1). */
static void scaled_classes(const uint64_t *g, uint64_t nz, uint64_t nonfinite, uint64_t *c)
{
    c[AMPDIAG_WHATIF_OVERFLOW] = g[0] - nonfinite;
    c[AMPDIAG_WHATIF_UNDERFLOW] = nz - g[2];
    c[AMPDIAG_WHATIF_SUBNORMAL] = g[2] > g[1] ? g[2] - g[1] : 0;
}

int ampdiag_whatif_scaled_n(size_t nfmt, const ampdiag_format *fmt, const float *scale, const float *x,
                            size_t n, uint64_t (*counts)[AMPDIAG_WHATIF_NCLASSES])
{
    uint32_t t[2][3];
    if (nfmt > 2) /* in pairs */
        return ampdiag_whatif_scaled_n(2, fmt, scale, x, n, counts) ||
                       ampdiag_whatif_scaled_n(nfmt - 2, fmt + 2, scale + 2, x, n, counts + 2)
                   ? -1
                   : 0;
    for (size_t f = 0; f < nfmt; f++)
        if (ampdiag_scaled_thresholds(fmt[f], scale[f], t[f]) != 0)
            return -1;
    /* thresholds "at least": the formats' three each, then non-zero and non-finite */
    uint32_t ge[8];
    size_t k = 0;
    for (size_t f = 0; f < nfmt; f++, k += 3)
        scaled_ge(t[f], ge + k);
    ge[k] = 1u;
    ge[k + 1] = AMPDIAG_F32_INF;
    uint64_t g[8], c[2][AMPDIAG_WHATIF_NCLASSES];
    if (ampdiag_count_at_least(x, n, k + 2, ge, g) != 0)
        return -1; /* (not reached: every threshold is in range) */
    for (size_t f = 0; f < nfmt; f++)
        scaled_classes(g + 3 * f, g[k], g[k + 1], c[f]);
    memcpy(counts, c, nfmt * sizeof c[0]);
    return 0;
}

int ampdiag_whatif_scaled(ampdiag_format fmt, float scale, const float *x, size_t n,
                          uint64_t counts[AMPDIAG_WHATIF_NCLASSES])
{
    return ampdiag_whatif_scaled_n(1, &fmt, &scale, x, n, (uint64_t (*)[AMPDIAG_WHATIF_NCLASSES])counts);
}
