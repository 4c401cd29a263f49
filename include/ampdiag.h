/*
 * ampdiag.h - the public C API of libampdiag.
 *
 * Number formats (a table of FP32, FP16, BF16 and the OCP FP8 formats E4M3 and E5M2: exact
 * rounding, limits, classes) and fused per-tensor statistics, so that
 * any C, C++ or CUDA training loop can compute the same numbers ampdiag records.
 * All functions are thread-safe: they keep no global state.
 */
#ifndef AMPDIAG_H
#define AMPDIAG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AMPDIAG_VERSION_STRING "0.1.0"
const char *ampdiag_version(void);

/* ------------------------------------------------------------------------------------------
 * Number formats
 * ------------------------------------------------------------------------------------------ */

typedef enum ampdiag_format {
    AMPDIAG_FP32 = 0,
    AMPDIAG_FP16 = 1, /* IEEE binary16: 1/5/10 */
    AMPDIAG_BF16 = 2, /* bfloat16: 1/8/7 */
    AMPDIAG_E4M3 = 3, /* OCP FP8 E4M3 ("E4M3FN"): 1/4/3, bias 7, max 448, no inf, NaN = S.1111.111 */
    AMPDIAG_E5M2 = 4, /* OCP FP8 E5M2: 1/5/2, bias 15, max 57344, inf and NaN as in IEEE */
    AMPDIAG_NFORMATS = 5
} ampdiag_format;

/* Rounding flags. */
#define AMPDIAG_ROUND_RNE 0u /* round to nearest even, subnormals kept (the default) */
#define AMPDIAG_ROUND_FTZ 1u /* also flush subnormal inputs and results to a signed zero */

/*
 * One row of the format table: everything ampdiag knows about a format. The code loops over
 * the rows (ampdiag_format_get(0 .. AMPDIAG_NFORMATS - 1)) instead of naming formats.
 * Rounding is to nearest, ties to even, subnormals kept; an overflow becomes +-inf, or NaN in
 * E4M3, which has no infinities (OCP's non-saturating conversion; docs/numerics.md).
 */
typedef struct ampdiag_format_info {
    const char *name;       /* "fp32", "fp16", "bf16", "e4m3", "e5m2" */
    int bits;               /* storage width */
    int exp_bits, mant_bits;/* stored exponent and mantissa bits */
    int bias;
    int emin, emax;         /* exponents of the smallest and largest normal binade */
    float max_finite;       /* 65504 for FP16 */
    float min_normal;       /* 2^-14 for FP16 */
    float min_subnormal;    /* 2^-24 for FP16 */
    float epsilon;          /* 1 to the next value: 2^-10 for FP16 */
    float unit_roundoff;    /* epsilon / 2 */
    float overflow_at;      /* smallest |x| that overflows (to inf; NaN in E4M3): 65520 for FP16 */
    float underflow_at;     /* largest |x| that rounds to zero: 2^-25 for FP16 */
    float normal_at;        /* smallest |x| that rounds to a normal number: 2^-14 - 2^-25 for FP16 */
    int has_inf;            /* 0 for E4M3: overflow and +-inf become NaN */
    int has_nan;
    /* Swamping (lost updates): an update d to a normal weight w held in the format is lost,
     * fl(w + d) == w, whenever |d| <= lost_certain * |w|, and never when |d| > lost_possible * |w|
     * (2^-(p+1) and 2^-p, p = mant_bits + 1); in between it depends on where w lies in its binade.
     * ampdiag_update_lost() decides one update exactly, as the optimizer's counts do. */
    float lost_certain, lost_possible;
    /* Host rounding of this format (device code uses the inline functions of numfmt.h). */
    float (*round)(float x);         /* as ampdiag_round */
    float (*round_ftz)(float x);     /* as ampdiag_round_ftz */
    uint32_t (*encode)(float x);     /* bit pattern in the low `bits` bits */
    float (*decode)(uint32_t code);  /* exact */
} ampdiag_format_info;

/* Limits of a format; NULL for an unknown format. */
const ampdiag_format_info *ampdiag_format_get(ampdiag_format fmt);
/* "fp32" / "fp16" / "bf16" (case-insensitive) -> format; returns 0 on success, -1 otherwise.
 * Only the formats ampdiag's training loop can hold tensors in: it refuses "e4m3" and "e5m2". */
int ampdiag_format_parse(const char *name, ampdiag_format *fmt);
/* The name of any row of the table, FP8 included (case-insensitive); 0 on success, -1 if unknown. */
int ampdiag_format_lookup(const char *name, ampdiag_format *fmt);

/* What rounding a float32 value to a format does. */
typedef enum ampdiag_class {
    AMPDIAG_CLASS_ZERO = 0,  /* x is +-0 */
    AMPDIAG_CLASS_NORMAL,    /* rounds to a normal number */
    AMPDIAG_CLASS_SUBNORMAL, /* rounds to a (non-zero) subnormal number */
    AMPDIAG_CLASS_UNDERFLOW, /* non-zero, rounds to zero (flushes) */
    AMPDIAG_CLASS_OVERFLOW,  /* finite, rounds to +-inf (NaN in E4M3) */
    AMPDIAG_CLASS_INF,       /* x is +-inf */
    AMPDIAG_CLASS_NAN        /* x is NaN */
} ampdiag_class;
/* Class of x rounded to fmt (round to nearest even, subnormals kept); NaN class for an unknown fmt. */
ampdiag_class ampdiag_classify(ampdiag_format fmt, float x);

/* Round x to the format and back to float32 (exact emulation). fmt FP32 returns x unchanged
 * (with FTZ: FP32 subnormals become signed zeros). An unknown fmt returns NaN. */
float ampdiag_round(ampdiag_format fmt, float x);
float ampdiag_round_ftz(ampdiag_format fmt, float x);
/* Round n values (in == out is allowed). flags: AMPDIAG_ROUND_*. Returns -1 for an unknown fmt. */
int ampdiag_round_array(ampdiag_format fmt, unsigned flags, const float *in, float *out, size_t n);
/* Whether the update d is lost on the weight w held in fmt: d != 0 and fl(fl(w) + d) == fl(w),
 * every rounding to fmt with flags (AMPDIAG_ROUND_*). 0 for an unknown fmt. */
int ampdiag_update_lost(ampdiag_format fmt, unsigned flags, float w, float d);
/* Lost updates of n weights w (as held before an optimizer step) changed by d (w_after - w), with
 * their gradients g (NULL: none). Element i was meant to change where d[i] != 0 or g[i] is finite
 * and non-zero; counts[0] counts those with d[i] == 0 (lost as stored), counts[1] and counts[2]
 * those with fl(fl(w[i]) + d[i]) == fl(w[i]) in FP16 and in BF16 (round to nearest even, no FTZ):
 * lost if the weights were stored in that format. 0, or -1 if a rounding fails (it cannot: the two
 * formats are built in). */
int ampdiag_update_lost_counts(const float *w, const float *d, const float *g, size_t n, uint64_t counts[3]);

/* Bit patterns. */
uint16_t ampdiag_fp16_encode(float x);
float ampdiag_fp16_decode(uint16_t h);
uint16_t ampdiag_bf16_encode(float x);
float ampdiag_bf16_decode(uint16_t b);
uint8_t ampdiag_e4m3_encode(float x); /* overflow and +-inf -> NaN 0x7f / 0xff */
float ampdiag_e4m3_decode(uint8_t c);
uint8_t ampdiag_e5m2_encode(float x); /* overflow -> +-inf 0x7c / 0xfc; NaN -> 0x7f / 0xff */
float ampdiag_e5m2_decode(uint8_t c);

/*
 * Per-tensor scaled FP8, as Transformer Engine's delayed scaling computes it: the tensor is
 * multiplied by a scale (in float32) before it is cast to FP8, and the scale comes from the
 * largest |x| (amax) of the last steps:
 *     scale = (max_finite / max(amax_history)) / 2^margin
 * (TE's amax_compute_algo "max"; a history of length 1 is "most_recent"). Where that maximum
 * is 0 or not finite the previous scale is kept, and an infinite scale becomes FLT_MAX, as TE
 * does. The history belongs to the caller (one per tensor: the absmax of each step's record).
 * Returns the scale; prev_scale for an unknown fmt or an empty history.
 */
float ampdiag_delayed_scale(ampdiag_format fmt, const float *amax_history, size_t len, int margin,
                            float prev_scale);

/* ------------------------------------------------------------------------------------------
 * Fused tensor statistics
 * ------------------------------------------------------------------------------------------ */

/* Exponent histogram: one bin per binary exponent e = floor(log2|x|) from -149 (the smallest
 * float32 subnormal) to 127, then bins for zero, +inf, -inf and NaN. FP16's range is bins
 * e = -24..15, BF16's e = -133..127. */
#define AMPDIAG_HIST_EMIN   (-149)
#define AMPDIAG_HIST_EMAX   127
#define AMPDIAG_HIST_NEXP   (AMPDIAG_HIST_EMAX - AMPDIAG_HIST_EMIN + 1) /* 277 */
#define AMPDIAG_HIST_ZERO   (AMPDIAG_HIST_NEXP + 0)
#define AMPDIAG_HIST_POSINF (AMPDIAG_HIST_NEXP + 1)
#define AMPDIAG_HIST_NEGINF (AMPDIAG_HIST_NEXP + 2)
#define AMPDIAG_HIST_NAN    (AMPDIAG_HIST_NEXP + 3)
#define AMPDIAG_HIST_BINS   (AMPDIAG_HIST_NEXP + 4) /* 281 */
/* Bin of a finite non-zero value with binary exponent e. */
#define AMPDIAG_HIST_BIN(e) ((e) - AMPDIAG_HIST_EMIN)

typedef struct ampdiag_hist {
    uint64_t bin[AMPDIAG_HIST_BINS];
} ampdiag_hist;

/*
 * One tensor's statistics. Counts are exact:
 *   count = n_nan + n_posinf + n_neginf + n_zero + n_neg + n_pos
 * (n_neg / n_pos count finite non-zero values; -0 is a zero).
 * min, max, absmax, absmin_nz, sum and sumsq are over finite values only; min and max order
 * -0 below +0 (so the max of {-0, +0} is +0). While no finite
 * value has been seen, min = +inf and max = absmax = -inf; while no finite non-zero value has
 * been seen, absmin_nz = +inf (these are the identities of merging).
 * The what-if counts say what rounding each value to a format would do, whatever format the
 * tensor is in, for every row of the format table (FP8 unscaled):
 *   overflow  = finite value that overflows (to +-inf; NaN in E4M3);
 *   underflow = non-zero value that rounds to zero;
 *   subnormal = value whose rounded result is subnormal (non-zero).
 * whatif[fmt][AMPDIAG_WHATIF_*] holds them; the named fields (fp16_overflow, ..., e5m2_subnormal)
 * are the same counters under their names. FP32's row counts float32 subnormals only.
 */
enum {
    AMPDIAG_WHATIF_OVERFLOW = 0,
    AMPDIAG_WHATIF_UNDERFLOW = 1,
    AMPDIAG_WHATIF_SUBNORMAL = 2,
    AMPDIAG_WHATIF_NCLASSES = 3
};

typedef struct ampdiag_tstats {
    uint64_t count;
    uint64_t n_nan, n_posinf, n_neginf, n_zero, n_neg, n_pos;
    union {
        uint64_t whatif[AMPDIAG_NFORMATS][AMPDIAG_WHATIF_NCLASSES];
        struct { /* the same counters by name, in the order of the table's rows */
            uint64_t fp32_overflow, fp32_underflow, fp32_subnormal;
            uint64_t fp16_overflow, fp16_underflow, fp16_subnormal;
            uint64_t bf16_overflow, bf16_underflow, bf16_subnormal;
            uint64_t e4m3_overflow, e4m3_underflow, e4m3_subnormal;
            uint64_t e5m2_overflow, e5m2_underflow, e5m2_subnormal;
        };
    };
    float min, max, absmax, absmin_nz;
    double sum, sumsq;
} ampdiag_tstats;

/* sum and sumsq: the exact sums of the finite values and of their squares, to within
 * AMPDIAG_TSTATS_SUM_RTOL times the sum of their magnitudes (of the squares), plus the rounding
 * of the double-precision accumulation (at most count x 2^-53 of the same). The 512-bit kernel
 * adds 16 values a lane in float before folding into double (its error is at most 16 x 2^-24
 * of the magnitudes); the other kernels add in double. */
#define AMPDIAG_TSTATS_SUM_RTOL (1.0 / 1048576.0) /* 2^-20 */

/* Set s to the empty record (the identity of merging). */
void ampdiag_tstats_init(ampdiag_tstats *s);
/* s := statistics of x[0..n); h (may be NULL) := its exponent histogram. One pass over x. */
void ampdiag_tstats_compute(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h);
/* Add x[0..n) to s (and h when not NULL): computing halves and merging gives the whole. */
void ampdiag_tstats_accumulate(ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t n);
/* ampdiag_tstats_compute, and in the same pass counts[j] := how many of x[0..n) have |x| bit
 * patterns at least ge[j] (as ampdiag_count_at_least: NaN and inf included), for k <= 8
 * thresholds in [1, 0x7f800000] (the scaled what-if thresholds of ampdiag_scaled_thresholds:
 * delayed-scaling FP8 counts at no second pass). Returns -1 (nothing computed) for k > 8 or a
 * threshold out of range. */
int ampdiag_tstats_compute_ge(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h, size_t k,
                              const uint32_t *ge, uint64_t *counts);
/* dst := dst merged with src. */
void ampdiag_tstats_merge(ampdiag_tstats *dst, const ampdiag_tstats *src);
/* Number of finite values, their mean and root mean square (NaN when there are none). */
uint64_t ampdiag_tstats_finite(const ampdiag_tstats *s);
double ampdiag_tstats_mean(const ampdiag_tstats *s);
double ampdiag_tstats_rms(const ampdiag_tstats *s);

void ampdiag_hist_init(ampdiag_hist *h);
void ampdiag_hist_merge(ampdiag_hist *dst, const ampdiag_hist *src);
/* Bin index of one value (the definition the fast kernel must match). */
int ampdiag_hist_bin_of(float x);

/* The what-if counts of fmt after multiplying x[0..n) by scale in float32, as a per-tensor scaled
 * cast does (ampdiag_delayed_scale): counts[AMPDIAG_WHATIF_*] := how many fl(x[i] * scale)
 * overflow, flush to zero (x[i] != 0) and come out subnormal. One pass over x; the kernel
 * compares |x| with exact thresholds that ampdiag_scaled_thresholds() finds for the scale.
 * Returns -1 (counts untouched) for an unknown fmt or a scale that is not finite and > 0. */
int ampdiag_whatif_scaled(ampdiag_format fmt, float scale, const float *x, size_t n,
                          uint64_t counts[AMPDIAG_WHATIF_NCLASSES]);
/* The same for nfmt formats at once, fmt[i] under scale[i] into counts[i], in one pass over x
 * per two formats (cheaper than a pass per format). Returns -1 (counts untouched, or partly
 * filled when a later pair fails) as ampdiag_whatif_scaled for any pair. */
int ampdiag_whatif_scaled_n(size_t nfmt, const ampdiag_format *fmt, const float *scale, const float *x,
                            size_t n, uint64_t (*counts)[AMPDIAG_WHATIF_NCLASSES]);
/* The thresholds behind it, as |x| bit patterns (as numfmt.h's, for the unscaled formats):
 * bits[0] overflow (finite |x| >= it overflows), bits[1] normal (|x| >= it is held as a
 * normal number), bits[2] underflow (0 < |x| <= it flushes to zero). fl(|x| * scale) is
 * monotone in |x|, so each class is a range of |x|; the thresholds are found by bisection over
 * the float32 bit patterns. Returns -1 as ampdiag_whatif_scaled. */
int ampdiag_scaled_thresholds(ampdiag_format fmt, float scale, uint32_t bits[3]);

/* counts[j] := how many of x[0..n) have |x| bit patterns at least ge[j] (NaN and inf included:
 * their patterns are the largest), for k <= 8 thresholds in [1, 0x7f800000]: the pass behind the
 * scaled what-if counts, for a caller that needs only some of their thresholds. One pass over
 * x (none for k = 0). Returns -1 (counts untouched) for k > 8 or a threshold out of range. */
int ampdiag_count_at_least(const float *x, size_t n, size_t k, const uint32_t *ge, uint64_t *counts);

/* Which SIMD path ampdiag_tstats uses on this CPU: "avx512" (AVX-512 F, BW, DQ, VL), "avx2" or
 * "generic" (AMPDIAG_TSTATS_IMPL=avx2 or =generic in the environment forces a lesser one). */
const char *ampdiag_tstats_impl(void);

#ifdef __cplusplus
}
#endif

#endif /* AMPDIAG_H */
