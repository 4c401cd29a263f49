/*
 * ampdiag.h - the public C API of libampdiag.
 *
 * Number formats (a table of FP32, FP16, BF16, the OCP FP8 formats E4M3 and E5M2 and the OCP
 * Microscaling formats E2M1, E2M3, E3M2 and E8M0: exact rounding, limits, classes), fused
 * per-tensor statistics and the block-scaled quantisation what-if (MX, NVFP4, FP8 blockwise and
 * current scaling: counts, scale statistics, quantisation error), so that
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
    /* The rows before this one are the formats whose what-if classes the per-tensor statistics
     * count for every value (ampdiag_tstats.whatif). */
    AMPDIAG_NFORMATS = 5,
    /* The OCP Microscaling element and scale formats (MX v1.0), for the block-scaled what-if
     * (ampdiag_quant_whatif): no infinities; the elements have no NaN either and saturate. */
    AMPDIAG_E2M1 = 5, /* FP4 E2M1: 1/2/1, bias 1, values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6} */
    AMPDIAG_E2M3 = 6, /* FP6 E2M3: 1/2/3, bias 1, max 7.5 */
    AMPDIAG_E3M2 = 7, /* FP6 E3M2: 1/3/2, bias 3, max 28 */
    AMPDIAG_E8M0 = 8, /* the MX scale: unsigned 2^(c - 127), c = 0..254, 255 = NaN; no zero */
    AMPDIAG_NFORMATS_ALL = 9 /* every row of the format table */
} ampdiag_format;

/* Rounding flags. */
#define AMPDIAG_ROUND_RNE 0u /* round to nearest even, subnormals kept (the default) */
#define AMPDIAG_ROUND_FTZ 1u /* also flush subnormal inputs and results to a signed zero */

/*
 * One row of the format table: everything ampdiag knows about a format. The code loops over
 * the rows (ampdiag_format_get(0 .. AMPDIAG_NFORMATS_ALL - 1)) instead of naming formats.
 * Rounding is to nearest, ties to even, subnormals kept; an overflow becomes +-inf, or NaN in
 * E4M3, which has no infinities (OCP's non-saturating conversion; docs/numerics.md). The MX
 * element formats E2M1, E2M3 and E3M2 have no infinity or NaN to overflow to: what rounds
 * beyond their largest value saturates to it (and a NaN stays NaN in the float32 result but has
 * no pattern: encode gives a zero). E8M0 is the unsigned power-of-two scale of MX: it rounds to
 * the nearest power of two with ties upward, and zero, negative and overflowing values are NaN.
 */
typedef struct ampdiag_format_info {
    const char *name;       /* "fp32", "fp16", "bf16", "e4m3", "e5m2", "e2m1", "e2m3", "e3m2", "e8m0" */
    int bits;               /* storage width */
    int exp_bits, mant_bits;/* stored exponent and mantissa bits */
    int bias;
    int emin, emax;         /* exponents of the smallest and largest normal binade */
    float max_finite;       /* 65504 for FP16 */
    float min_normal;       /* 2^-14 for FP16 */
    float min_subnormal;    /* 2^-24 for FP16 */
    float epsilon;          /* 1 to the next value: 2^-10 for FP16 */
    float unit_roundoff;    /* epsilon / 2 */
    float overflow_at;      /* smallest |x| that overflows (to inf; NaN in E4M3 and E8M0; the MX
                               elements saturate): 65520 for FP16 */
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
/* The name of any row of the table, FP8 and MX included (case-insensitive); 0 on success, -1 if unknown. */
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

/* ------------------------------------------------------------------------------------------
 * Block-scaled and per-tensor-scaled quantisation what-if (docs/numerics.md, "Block formats")
 *
 * What casting a float32 tensor to a low-precision recipe would do: OCP MX (MXFP8, MXFP6, MXFP4),
 * NVIDIA's NVFP4, FP8 blockwise (DeepSeek-V3, Transformer Engine's Float8BlockScaling) and FP8
 * current scaling (Transformer Engine's Float8CurrentScaling), each value scaled by its block's
 * scale, rounded to the element format (nearest even, saturating) and decoded again, exactly as
 * the recipe's reference code does it. For each scheme: the values flushed to zero, saturated
 * and held as subnormals, the block scales (how many clamped or underflowed their own format,
 * the histogram and spread of their exponents) and the quantisation error (signal and error
 * energy: SQNR, MSE relative to the mean square, the largest relative error), and for 2-D
 * tensors the disagreement between a columnwise or 2-D blocking and the rowwise one.
 * ------------------------------------------------------------------------------------------ */

/* How the scales are found. */
typedef enum ampdiag_qscheme {
    AMPDIAG_QS_CURRENT = 0,   /* one FP32 scale for the tensor from its own amax (FP8 current scaling) */
    AMPDIAG_QS_MX = 1,        /* OCP MX: blocks of 32 along one dimension, a power-of-two E8M0 scale each */
    AMPDIAG_QS_NVFP4 = 2,     /* E2M1 in blocks of 16 (or 16x16 tiles), an E4M3 scale each, an FP32 tensor scale */
    AMPDIAG_QS_BLOCKWISE = 3, /* FP8 blockwise: 1x128 blocks or 128x128 tiles, an FP32 scale each */
    AMPDIAG_NQSCHEMES = 4
} ampdiag_qscheme;

/* How a scale is rounded to its own format. */
typedef enum ampdiag_qrule {
    AMPDIAG_QR_FLOOR = 0, /* MX, the OCP rule: X = 2^(floor(log2 amax) - emax_elem) (values may saturate) */
    AMPDIAG_QR_RCEIL = 1, /* MX, NVIDIA's rule: X = amax / max_elem rounded up to a power of two */
    AMPDIAG_QR_E4M3 = 2,  /* NVFP4: the block scale rounded to E4M3 (nearest even, saturating at 448) */
    AMPDIAG_QR_FP32 = 3,  /* current, blockwise: scale = max_elem / amax in FP32 */
    AMPDIAG_QR_POW2 = 4,  /* the same rounded down to a power of two (blockwise's default) */
    AMPDIAG_NQRULES = 5
} ampdiag_qrule;

/* Which values share a scale. A tensor is a matrix rows x cols (row-major) and a 1-D tail. */
typedef enum ampdiag_qdir {
    AMPDIAG_QD_TENSOR = 0,  /* all of them (current scaling) */
    AMPDIAG_QD_ROWWISE = 1, /* `block` consecutive values of a row (a GEMM operand blocked along K = cols) */
    AMPDIAG_QD_COLWISE = 2, /* `block` consecutive values of a column (the transposed operand) */
    AMPDIAG_QD_TILE = 3,    /* a `block` x `block` tile (2-D blocks: a weight quantised once for both GEMMs) */
    AMPDIAG_NQDIRS = 4
} ampdiag_qdir;

/* One scheme to count. */
typedef struct ampdiag_qspec {
    ampdiag_format elem;    /* element format: E4M3 or E5M2 (current, MX, blockwise), E2M3, E3M2 or E2M1 (MX),
                               E2M1 (NVFP4) */
    ampdiag_qscheme scheme;
    ampdiag_qrule rule;     /* MX: FLOOR or RCEIL; NVFP4: E4M3; current and blockwise: FP32 or POW2 */
    ampdiag_qdir dir;       /* current: TENSOR; the others ROWWISE, COLWISE or TILE (MX: not TILE) */
    int block;              /* values per block along dir, or the side of a tile; 0: the scheme's own
                               (MX 32, NVFP4 16, blockwise 128); current: 0 */
    unsigned kinds;         /* for callers (ampdiag_qspec_parse fills it): the tensor kinds a recipe
                               applies it to, bit k for kind k (activation 0, activation_grad 1,
                               weight 2, weight_grad 3, update 4); ampdiag_quant_whatif ignores it */
} ampdiag_qspec;

#define AMPDIAG_QHIST_BINS 32
/* What one scheme does to one tensor. Counts are exact. Values are the finite ones; NaN and inf
 * inputs are counted in nonfinite only (a recipe cannot represent them either). */
typedef struct ampdiag_qstats {
    ampdiag_qspec spec;     /* as counted (block filled in) */
    int computed;           /* 0: not applicable to this tensor (COLWISE or TILE of a 1-D tensor) */
    float scale;            /* the per-tensor factor: current, the FP32 scale (max_elem / amax);
                               NVFP4, the global encode scale 448 x 6 / amax; 1 for MX and blockwise */
    uint64_t count;         /* values, nonfinite included */
    uint64_t nonfinite;     /* NaN and +-inf values */
    uint64_t saturated;     /* finite values whose scaled value rounded beyond the element's largest
                               value and were clamped to it */
    uint64_t flushed;       /* finite non-zero values that decode as zero */
    uint64_t subnormal;     /* values held as a (non-zero) subnormal element */
    uint64_t poisoned;      /* finite values that decode as NaN because their block's scale is NaN
                               (MX: a NaN or inf in the block); outside the error sums */
    uint64_t blocks;        /* blocks (or tiles, or 1 for the tensor) */
    uint64_t zero_blocks;   /* blocks whose amax is 0 (no scale to speak of) */
    uint64_t nonfinite_blocks; /* blocks holding a NaN or an inf */
    uint64_t scale_clamped; /* scales clamped at the top of their format (NVFP4: E4M3 above 448;
                               current, blockwise: max / amax beyond FLT_MAX) */
    uint64_t scale_underflow; /* blocks with a non-zero amax whose scale fell below its format (MX:
                               exponent below -127; NVFP4: E4M3 scale rounded to 0): their values flush */
    uint64_t scale_subnormal; /* NVFP4: block scales that are E4M3 subnormals (fewer than 4 bits) */
    int32_t scale_emin, scale_emax; /* smallest and largest exponent of the block scales (the decode
                               scale: MX E, NVFP4 the E4M3 block scale's, blockwise and current
                               floor(log2(1 / scale))) over the blocks with a finite non-zero amax;
                               0 and 0 when there is none. Their spread is emax - emin */
    uint64_t scale_hist[AMPDIAG_QHIST_BINS]; /* bin i < 31: blocks whose scale exponent is
                               scale_emax - i; bin 31: those at scale_emax - 31 or below */
    double sig_sq;          /* sum of x^2 over the finite values not poisoned */
    double err_sq;          /* sum of (x - q(x))^2 over them, q(x) the decoded value */
    double max_rel_err;     /* max |x - q(x)| / |x| over them that are non-zero (1 for a flushed value) */
    uint64_t disagree;      /* COLWISE, TILE: values (finite, not poisoned in either) whose decoded
                               value differs from the ROWWISE blocking's; 0 otherwise */
    double disagree_sq;     /* sum of (q(x) - q_rowwise(x))^2 over the values */
} ampdiag_qstats;

/*
 * Count nspec schemes on x[0..n): a matrix of rows x cols values (row-major; rows * cols <= n)
 * followed by n - rows * cols values of a 1-D tail (the bias after a weight), which every
 * direction blocks as a vector. A 1-D tensor is rows = 0 (or 1) and cols = 0 (or n): ROWWISE
 * blocks it, COLWISE and TILE are not applicable (computed = 0). amax is the largest |x| over the
 * values that are not NaN, inf included (ampdiag_quant_amax gives it from the statistics), used
 * by current scaling and NVFP4's tensor scale; a negative amax asks the function to find it (a
 * read pass more). One pass over x for every scheme: the matrix is taken in 128 x 128 tiles,
 * each read from memory once. COLWISE and TILE schemes compute the ROWWISE one of the same
 * format, scheme and rule as well (to count the disagreement); listing it costs nothing more.
 * Returns 0, or -1 (nothing written, the reason from ampdiag_qspec_check) for an invalid spec,
 * rows * cols > n, or no memory for the scratch (a few hundred KB).
 */
int ampdiag_quant_whatif(const float *x, size_t n, size_t rows, size_t cols, float amax, size_t nspec,
                         const ampdiag_qspec *spec, ampdiag_qstats *out);
/* What one scheme does to each value: values[i] := x[i] quantised and decoded (exactly, in double),
 * NaN for NaN and inf inputs, poisoned values and every value of a scheme not applicable to the
 * tensor; stats (may be NULL) := its ampdiag_qstats (no disagreement is counted). The blocks are
 * ampdiag_quant_whatif's. Returns 0, or -1 as ampdiag_quant_whatif. */
int ampdiag_quant_values(const float *x, size_t n, size_t rows, size_t cols, float amax, const ampdiag_qspec *spec,
                         double *values, ampdiag_qstats *stats);
/* Which kernel the block what-if runs on this CPU: "avx512f" or "generic" (AMPDIAG_QUANT_IMPL=generic
 * in the environment asks for the portable one). Both give the same counts and decoded values. */
const char *ampdiag_quant_impl(void);
/* The amax a statistics record implies: +inf if it holds an inf, else its absmax (0 when it has
 * no finite value). */
float ampdiag_quant_amax(const ampdiag_tstats *s);
/* 0 if the spec is valid (block 0 filled in where *s is writable: use a copy), else -1 and a
 * message naming what is wrong in err (may be NULL). */
int ampdiag_qspec_check(ampdiag_qspec *s, char *err, size_t errlen);
/* The --whatif list syntax (docs/numerics.md, "Choosing what to count"): comma-separated items
 * "none", "default", "all", or SCHEME[:RULE][@DIR[+DIR...]] with SCHEME one of fp8-current
 * (E4M3 and E5M2), fp8-current-e4m3, fp8-current-e5m2, mxfp8 (= mxfp8-e4m3), mxfp8-e5m2,
 * mxfp6 (= mxfp6-e2m3), mxfp6-e3m2, mxfp4, nvfp4, fp8-block (= fp8-block-e4m3),
 * fp8-block-e5m2; RULE floor or rceil (MX), fp32 or pow2 (current, blockwise); DIR row, col,
 * 2d. Without @, a scheme's recipe directions: MX row and col; NVFP4 and fp8-block row and col,
 * and 2d (16x16, 128x128) for weights only. Expands into out[0..*n) (at most max; a
 * duplicate is kept once). 0, or -1 with a message naming the item in err. */
int ampdiag_qspec_parse(const char *list, ampdiag_qspec *out, size_t max, size_t *n, char *err, size_t errlen);
/* The list "default" stands for (what ampdiag run counts unless told otherwise). */
const char *ampdiag_qspec_default(void);
/* "mxfp8-e4m3:floor@row" (the parse syntax, the block when it is not the scheme's own:
 * "nvfp4:e4m3@2d/16"); writes at most len bytes, NUL included; returns the length it needs. */
int ampdiag_qspec_name(const ampdiag_qspec *s, char *buf, size_t len);
/* Names: "current", "mx", "nvfp4", "blockwise"; "floor", "rceil", "e4m3", "fp32", "pow2";
 * "tensor", "rowwise", "columnwise", "tile". NULL when out of range; parse gives -1 for unknown. */
const char *ampdiag_qscheme_name(int scheme);
const char *ampdiag_qrule_name(int rule);
const char *ampdiag_qdir_name(int dir);
int ampdiag_qscheme_parse(const char *name);
int ampdiag_qrule_parse(const char *name);
int ampdiag_qdir_parse(const char *name);
/* 10 log10(sig_sq / err_sq) in dB (+inf without error, NaN without signal), and err_sq / sig_sq
 * (the MSE relative to the mean square). */
double ampdiag_qstats_sqnr_db(const ampdiag_qstats *q);
double ampdiag_qstats_rel_mse(const ampdiag_qstats *q);

/* Which SIMD path ampdiag_tstats uses on this CPU: "avx512" (AVX-512 F, BW, DQ, VL), "avx2" or
 * "generic" (AMPDIAG_TSTATS_IMPL=avx2 or =generic in the environment forces a lesser one). */
const char *ampdiag_tstats_impl(void);

#ifdef __cplusplus
}
#endif

#endif /* AMPDIAG_H */
