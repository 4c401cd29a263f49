/*
 * ampdiag.h - the public C API of libampdiag.
 *
 * Number formats (exact FP16/BF16 rounding and limits) and fused per-tensor statistics, so that
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
    /* 3 and 4 are reserved for FP8 E4M3 and E5M2 */
    AMPDIAG_NFORMATS = 3
} ampdiag_format;

/* Rounding flags. */
#define AMPDIAG_ROUND_RNE 0u /* round to nearest even, subnormals kept (the default) */
#define AMPDIAG_ROUND_FTZ 1u /* also flush subnormal inputs and results to a signed zero */

typedef struct ampdiag_format_info {
    const char *name;       /* "fp32", "fp16", "bf16" */
    int bits;               /* storage width */
    int exp_bits, mant_bits;/* stored exponent and mantissa bits */
    int bias;
    int emin, emax;         /* exponents of the smallest and largest normal binade */
    float max_finite;       /* 65504 for FP16 */
    float min_normal;       /* 2^-14 for FP16 */
    float min_subnormal;    /* 2^-24 for FP16 */
    float epsilon;          /* 1 to the next value: 2^-10 for FP16 */
    float unit_roundoff;    /* epsilon / 2 */
    float overflow_at;      /* smallest |x| that rounds to inf: 65520 for FP16 */
    float underflow_at;     /* largest |x| that rounds to zero: 2^-25 for FP16 */
} ampdiag_format_info;

/* Limits of a format; NULL for an unknown format. */
const ampdiag_format_info *ampdiag_format_get(ampdiag_format fmt);
/* "fp32" / "fp16" / "bf16" (case-insensitive) -> format; returns 0 on success, -1 if unknown. */
int ampdiag_format_parse(const char *name, ampdiag_format *fmt);

/* Round x to the format and back to float32 (exact emulation). fmt FP32 returns x unchanged
 * (with FTZ: FP32 subnormals become signed zeros). An unknown fmt returns NaN. */
float ampdiag_round(ampdiag_format fmt, float x);
float ampdiag_round_ftz(ampdiag_format fmt, float x);
/* Round n values (in == out is allowed). flags: AMPDIAG_ROUND_*. Returns -1 for an unknown fmt. */
int ampdiag_round_array(ampdiag_format fmt, unsigned flags, const float *in, float *out, size_t n);

/* Bit patterns. */
uint16_t ampdiag_fp16_encode(float x);
float ampdiag_fp16_decode(uint16_t h);
uint16_t ampdiag_bf16_encode(float x);
float ampdiag_bf16_decode(uint16_t b);

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
 * The fp16_* / bf16_* counts say what rounding each value to that format would do, whatever
 * format the tensor is in: overflow = finite value that rounds to +-inf; underflow = non-zero
 * value that rounds to zero; subnormal = value whose rounded result is subnormal (non-zero).
 */
typedef struct ampdiag_tstats {
    uint64_t count;
    uint64_t n_nan, n_posinf, n_neginf, n_zero, n_neg, n_pos;
    uint64_t fp16_overflow, fp16_underflow, fp16_subnormal;
    uint64_t bf16_overflow, bf16_underflow, bf16_subnormal;
    float min, max, absmax, absmin_nz;
    double sum, sumsq;
} ampdiag_tstats;

/* Set s to the empty record (the identity of merging). */
void ampdiag_tstats_init(ampdiag_tstats *s);
/* s := statistics of x[0..n); h (may be NULL) := its exponent histogram. One pass over x. */
void ampdiag_tstats_compute(const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h);
/* Add x[0..n) to s (and h when not NULL): computing halves and merging gives the whole. */
void ampdiag_tstats_accumulate(ampdiag_tstats *s, ampdiag_hist *h, const float *x, size_t n);
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

/* Which SIMD path ampdiag_tstats uses on this CPU: "avx2+avx512vl", "avx2" or "generic"
 * (AMPDIAG_TSTATS_IMPL=avx2 or =generic in the environment forces a lesser one). */
const char *ampdiag_tstats_impl(void);

#ifdef __cplusplus
}
#endif

#endif /* AMPDIAG_H */
