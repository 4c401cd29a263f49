/*
 * opcheck.c - every operation of the backend table (src/backend/backend.h) run on a backend
 * under test and on a reference backend with the same inputs, and compared, in the spirit of
 * ggml's test-backend-ops (opcheck.h). tests/t_backend_ops prints its lines as TAP; `ampdiag
 * selftest` as its reports.
 *
 * Under test: the CPU backend as it runs (its F16C / AVX2 rounding passes, the AVX2 pass of
 * update_stats, the AVX2 statistics kernels where the CPU has them). Reference: a table whose
 * every entry calls the CPU backend with backend_cpu_force_generic(1), and with the portable
 * statistics kernel for the two entries that compute statistics: the plain C definitions.
 * Any other backend this build has (cuda) is checked against the same reference:
 * opcheck_run(its table, reference). Every buffer comes from the backend's own alloc, with
 * GUARD sentinel values before and after it, and every transfer goes through to_device /
 * to_host.
 *
 * Inputs mix random values of many magnitudes with NaN (quiet, with payload, signalling), +-inf,
 * +-0, float32 subnormals and every FP16 / BF16 threshold (max finite, the overflow threshold,
 * min normal, min subnormal, half of it, ties) with its float32 neighbours one ulp either side,
 * in both signs; the sizes (1, 7, 8, 9, 31, 33, 1003, and a few that cross the backends' block
 * sizes) are not multiples of the vector widths. Each rounding format runs: FP32 (none), FP16,
 * BF16, each with and without AMPDIAG_ROUND_FTZ.
 *
 * Outputs are compared bit for bit (NaN payloads aside: NaN positions must match) unless the
 * tolerance table gives the backend under test an allowance for an operation whose summation
 * order differs. One line per operation and format, with the largest difference seen.
 */
#include "backend/opcheck.h"

#include "backend/opbound.h"
#include "kernels/bodies.h"

#include "numerics/numfmt.h"
#include "util/rng.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 16             /* sentinel values before and after every buffer (64 bytes) */
#define SENTINEL 0x7fc0deadu /* what they hold */
#define POISON 0xffc0beefu   /* what a pure output holds before the op overwrites it */
#define MAXARG 10
#define MAXSCAL 4000         /* statistics records and histograms, or the block-scaled what-if of every scheme */
#define ARENA 32
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const size_t SIZES[] = {1, 7, 8, 9, 31, 33, 1003};
#define NSIZES ((int)NELEM(SIZES))

/* ------------------------------------------------------------------------------- tolerances */

/* Where a backend under test may differ from the reference: float outputs by up to `ulps`,
 * and with `sums` set the double sums among the scalar results (statistics, norms) by the
 * bound on reordering a sum of n terms, n 2^-52 sum|term| (each order is within (n-1) 2^-53
 * sum|term| of the exact sum). Everything not listed is compared bit for bit.
 *
 * The CPU backend against its portable code: the rounding passes (F16C, AVX2 or AVX-512F over
 * the output after the FP32 loop), BF16 rounded inside the ops' vector output loops, GEMM
 * outputs computed and rounded in row chunks, the optimizer's weight rounding and compute copy,
 * and update_stats' AVX2 / AVX-512F passes follow backend_cpu_force_generic and give the same
 * bits as the scalar rounding fused into the portable loops;
 * the statistics kernels (src/numerics/tstats.c, switched by AMPDIAG_TSTATS_IMPL) keep their
 * lane sums in other orders than the portable kernel: the two rows below. Everything else is
 * the same arithmetic in the same order on both sides: the GEMMs are the same cblas_sgemm call,
 * the other reductions (sum, sumsq, bias_grad, the layer norm, softmax and scatter sums) the
 * same C loops, and grad_norm and the optimizer's update are compiler clones (target_clones)
 * that no switch reaches, so both sides run the same one. A backend with other reductions
 * (cuBLAS GEMMs, tree reductions on a GPU) adds rows here, named by its table's name. */
typedef struct tol_rule {
    const char *backend, *op;
    unsigned ulps;
    int sums;
    int perout; /* outputs within the allowance their case computes per value (gemm_allow) */
    const char *why;
    const char *todo; /* a difference not yet bounded: a failure is reported as TAP TODO */
} tol_rule;

/* The cuda rows come from runs on a GPU (an H100, sm_90, CUDA 13.0, cuBLAS 13.1): the double
 * sums of reductions are tree sums (measured at most 0.11 of the allowance); GELU, the softmaxes
 * and the cross-entropy are bit for bit since both sides call the same vexpf (before, with the
 * device's expf and tanhf, GELU differed by up to 25 ulp); cuBLAS and the attention kernels sum
 * their products in other orders, with cancellation (up to millions of ulp near zero) and
 * partial sums that overflow in one order only (NaN/inf positions differ): an ulp bound means
 * nothing there. A GEMM output is held to the bound of any summation order (gemm_allow: twice
 * gamma_(K+2) (sum|alpha a b| + |beta c|), plus one spacing of the output format); the attention's
 * outputs, which chain such sums through a softmax, to the bound of opbound.h.
 * "cpu-reordered" is the CPU backend with a GEMM and an attention of its own that add the
 * products in reverse order (reordered_gemm, reordered_attention_*): it puts the per-output
 * bounds to work on a machine without a GPU. */
static const tol_rule tol_rules[] = {
    {"cpu", "tstats", 0, 1, 0, "sum, sumsq: AVX2 and portable kernels add in other orders", NULL},
    {"cpu", "update_stats", 0, 1, 0, "sum, sumsq: AVX2 and portable kernels add in other orders", NULL},
    {"cpu", "tstats_many", 0, 1, 0, "sum, sumsq: AVX2 and portable kernels add in other orders", NULL},
    {"cpu", "tstats_ge", 0, 1, 0, "sum, sumsq: AVX2 and portable kernels add in other orders", NULL},
    {"cpu", "update_stats_many", 0, 1, 0, "sum, sumsq: AVX2 and portable kernels add in other orders", NULL},
    {"cuda", "sum", 0, 1, 0, "a tree sum on the device", NULL},
    {"cuda", "sumsq", 0, 1, 0, "a tree sum on the device", NULL},
    {"cuda", "tstats", 0, 1, 0, "sum, sumsq: tree sums on the device", NULL},
    {"cuda", "grad_norm", 0, 1, 0, "a tree sum on the device", NULL},
    {"cuda", "update_stats", 0, 1, 0, "sum, sumsq: tree sums on the device", NULL},
    {"cuda", "tstats_many", 0, 1, 0, "sum, sumsq: tree sums on the device", NULL},
    {"cuda", "tstats_ge", 0, 1, 0, "sum, sumsq: tree sums on the device", NULL},
    {"cuda", "update_stats_many", 0, 1, 0, "sum, sumsq: tree sums on the device", NULL},
    {"cuda", "gemm", 0, 0, 1, "cuBLAS: another summation order, within the bound of any order", NULL},
    {"cuda", "attention_fwd", 0, 0, 1, "cuBLAS products and a softmax of their sums, within the bound of any order", NULL},
    {"cuda", "attention_bwd", 0, 0, 1, "cuBLAS products and a softmax of their sums, within the bound of any order", NULL},
    {"cpu-reordered", "gemm", 0, 0, 1, "products added in reverse order, within the bound of any order",
     NULL},
    {"cpu-reordered", "attention_fwd", 0, 0, 1, "products added in reverse order, within the bound of any order",
     NULL},
    {"cpu-reordered", "attention_bwd", 0, 0, 1, "products added in reverse order, within the bound of any order",
     NULL},
};

/* Any other backend (another BLAS, a device without rows of its own, a test's stand-in built
 * from the CPU's table) may add its double sums and its GEMMs' products in its own order. */
static const tol_rule any_rules[] = {
    {"*", "sum", 0, 1, 0, "a sum in another order", NULL},
    {"*", "sumsq", 0, 1, 0, "a sum in another order", NULL},
    {"*", "tstats", 0, 1, 0, "sum, sumsq in another order", NULL},
    {"*", "grad_norm", 0, 1, 0, "a sum in another order", NULL},
    {"*", "update_stats", 0, 1, 0, "sum, sumsq in another order", NULL},
    {"*", "gemm", 0, 0, 1, "another summation order, within the bound of any order", NULL},
    {"*", "attention_fwd", 0, 0, 1, "another summation order, within the bound of any order", NULL},
    {"*", "attention_bwd", 0, 0, 1, "another summation order, within the bound of any order", NULL},
    {"*", "tstats_many", 0, 1, 0, "sum, sumsq in another order", NULL},
    {"*", "tstats_ge", 0, 1, 0, "sum, sumsq in another order", NULL},
    {"*", "update_stats_many", 0, 1, 0, "sum, sumsq in another order", NULL},
};

static const tol_rule *find_tol(const char *name, const char *op)
{
    for (size_t i = 0; i < NELEM(tol_rules); i++)
        if (strcmp(tol_rules[i].backend, name) == 0 && strcmp(tol_rules[i].op, op) == 0)
            return &tol_rules[i];
    for (size_t i = 0; i < NELEM(any_rules) && strcmp(name, "cpu") != 0; i++)
        if (strcmp(any_rules[i].op, op) == 0)
            return &any_rules[i];
    return NULL;
}

/* ------------------------------------------------------------------------------- output */

/* Where the lines of the run under way go (one run at a time: the reference backend switches
 * process-wide settings anyway), the failures counted, and where bail() returns to. */
static const opcheck_out *out_;
static int failed_;
static jmp_buf bail_to_;
static char bail_why_[128];

__attribute__((format(printf, 3, 4)))
static void emit(int pass, const char *todo, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    failed_ += !pass && !todo;
    out_->line(out_->arg, pass, pass ? NULL : todo, text);
}

__attribute__((format(printf, 1, 2)))
static void diag(const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (out_->note)
        out_->note(out_->arg, text);
}

/* A run that cannot go on (out of memory, a case too large for the tables here): back to
 * opcheck_run's caller with the reason. */
__attribute__((noreturn)) static void bail(const char *what)
{
    snprintf(bail_why_, sizeof bail_why_, "%s", what);
    longjmp(bail_to_, 1);
}

/* ------------------------------------------------------------------------------- host helpers */

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        bail("out of memory");
    return p;
}

static float fbits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int isnan_u(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }
static int isinf_u(uint32_t u) { return (u & 0x7fffffffu) == 0x7f800000u; }

/* Position of a float32 on the line of all float32 values (-0 one below +0). */
static int64_t fkey(uint32_t u)
{
    return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) - 1 : (int64_t)u;
}

static uint64_t ulp_dist(uint32_t a, uint32_t b)
{
    int64_t d = fkey(a) - fkey(b);
    return (uint64_t)(d < 0 ? -d : d);
}

/* x held in format r, as numfmt.h defines it (the inputs of an op come in its format). */
static float hround(bk_rnd r, float x)
{
    if (r.fmt == AMPDIAG_FP32)
        return x;
    return (r.flags & AMPDIAG_ROUND_FTZ) ? ampdiag_round_ftz(r.fmt, x) : ampdiag_round(r.fmt, x);
}

static const char *rnd_name(bk_rnd r)
{
    static const char *const names[3][2] = {
        {"FP32", "FP32+FTZ"}, {"FP16", "FP16+FTZ"}, {"BF16", "BF16+FTZ"}};
    return names[r.fmt][(r.flags & AMPDIAG_ROUND_FTZ) != 0];
}

#define NFMT 6
static bk_rnd fmt_at(int i) /* FP32, FP32+FTZ (ignored), FP16, FP16+FTZ, BF16, BF16+FTZ */
{
    static const ampdiag_format f[3] = {AMPDIAG_FP32, AMPDIAG_FP16, AMPDIAG_BF16};
    return bk_rnd_make(f[i / 2], (i % 2) ? AMPDIAG_ROUND_FTZ : 0u);
}

/* ------------------------------------------------------------------------------- inputs */

/* Magnitudes (float32 bits) the inputs draw from, each used with both signs. */
static const uint32_t special_mag[] = {
    /* FP16: max finite 65504, the overflow threshold 65520 (a tie: to inf), min normal 2^-14,
     * min subnormal 2^-24 and half of it (a tie: to 0), each with its neighbours one ulp apart */
    0x477fe000u, 0x477fdfffu, 0x477fe001u, 0x477ff000u, 0x477fefffu, 0x477ff001u,
    0x38800000u, 0x387fffffu, 0x38800001u, 0x33800000u, 0x337fffffu, 0x33800001u,
    0x33000000u, 0x32ffffffu, 0x33000001u,
    /* FP16 ties: 1 + 2^-11 (to even: 1) and neighbours, 1 + 3 2^-11 (to even: up), 1.5 and 2.5
     * min subnormals, the largest subnormal and the tie between it and min normal (up) */
    0x3f801000u, 0x3f800fffu, 0x3f801001u, 0x3f803000u, 0x33c00000u, 0x34200000u, 0x387fc000u,
    0x387fe000u,
    /* BF16: max finite, the overflow threshold (a tie: to inf), min normal 2^-126, min
     * subnormal 2^-133 and half of it (a tie: to 0), each with its neighbours */
    0x7f7f0000u, 0x7f7effffu, 0x7f7f0001u, 0x7f7f8000u, 0x7f7f7fffu, 0x7f7f8001u,
    0x00800000u, 0x007fffffu, 0x00800001u, 0x00010000u, 0x0000ffffu, 0x00010001u,
    0x00008000u, 0x00007fffu, 0x00008001u,
    /* BF16 ties: 1 + 2^-8 (to even: 1) and neighbours, 1 + 3 2^-8 (up), the tie below min normal */
    0x3f808000u, 0x3f807fffu, 0x3f808001u, 0x3f818000u, 0x007f8000u,
    /* float32: max, min subnormal, 1, 0, inf, NaNs (quiet, with payload, signalling, all ones) */
    0x7f7fffffu, 0x00000001u, 0x3f800000u, 0x00000000u, 0x7f800000u, 0x7fc00000u, 0x7fc00001u,
    0x7f800001u, 0x7fffffffu,
};
#define NSPECIAL NELEM(special_mag)

/* The host data of the case being built, freed once it has run on both backends. */
typedef struct tctx {
    const backend *ut, *ref;
    rng g;
    void *arena[ARENA];
    int narena;
} tctx;

static void *hnew(tctx *T, size_t bytes)
{
    if (T->narena == ARENA)
        bail("too many host buffers in one case");
    void *p = xmalloc(bytes);
    T->arena[T->narena++] = p;
    return p;
}

static void hfree(tctx *T)
{
    while (T->narena)
        free(T->arena[--T->narena]);
}

/* A random value of magnitude 2^lo .. 2^(hi+1), either sign. */
static float rand_val(tctx *T, int lo, int hi)
{
    double m = ldexp(1.0 + rng_uniform(&T->g), lo + (int)rng_below(&T->g, (uint32_t)(hi - lo + 1)));
    return (float)((rng_next(&T->g) & 1) ? -m : m);
}

/* x[0..n): every `every`-th value (from a random start; 0: none) a special value drawn at random
 * with a random sign (drawn, not taken in turn: each then has random neighbours, and a vector
 * kernel's fast path for clean vectors cannot hide it), the others rand_val(lo, hi). */
static void fill_gen(tctx *T, float *x, size_t n, int every, int lo, int hi)
{
    size_t start = every ? rng_below(&T->g, (uint32_t)every) : 0;
    for (size_t i = 0; i < n; i++) {
        if (every && i % (size_t)every == start) {
            uint32_t sign = (rng_next(&T->g) & 1) ? 0x80000000u : 0u;
            x[i] = fbits(special_mag[rng_below(&T->g, NSPECIAL)] | sign);
        } else {
            x[i] = rand_val(T, lo, hi);
        }
    }
}

static float *gen(tctx *T, size_t n, int every, int lo, int hi)
{
    float *x = hnew(T, n * sizeof *x);
    fill_gen(T, x, n, every, lo, hi);
    return x;
}

/* The specials and the wide range of magnitudes that cross both formats' limits. */
static float *gen_mix(tctx *T, size_t n) { return gen(T, n, 2, -30, 17); }

/* rows x cols values: clean rows of magnitude 2^lo..2^hi, and every third row (row 1, 4, ...)
 * with specials in it. */
static float *gen_rows(tctx *T, size_t rows, size_t cols, int lo, int hi)
{
    float *x = hnew(T, rows * cols * sizeof *x);
    for (size_t i = 0; i < rows; i++)
        fill_gen(T, x + i * cols, cols, i % 3 == 1 ? 5 : 0, lo, hi);
    return x;
}

static float *zero_every(float *x, size_t n, size_t k)
{
    for (size_t i = 0; i < n; i += k)
        x[i] = 0.0f;
    return x;
}

static float *round_all(float *x, size_t n, bk_rnd r)
{
    for (size_t i = 0; i < n; i++)
        x[i] = hround(r, x[i]);
    return x;
}

/* gen_mix held in format r (what an accumulated output holds before the op adds to it). */
static float *gen_held(tctx *T, size_t n, bk_rnd r) { return round_all(gen_mix(T, n), n, r); }

static int32_t *gen_ints(tctx *T, size_t n, int V)
{
    int32_t *t = hnew(T, n * sizeof *t);
    for (size_t i = 0; i < n; i++)
        t[i] = (int32_t)rng_below(&T->g, (uint32_t)V);
    return t;
}

/* ------------------------------------------------------------------------------- cases */

typedef enum { IN, OUT, INOUT, SCRATCH } role; /* OUT starts as POISON; SCRATCH is not compared */

typedef struct arg {
    const char *name;
    role role;
    size_t n;          /* 4-byte values: float, or int32 for tokens and targets */
    const void *init;  /* its host values before the op (NULL: POISON) */
    size_t rows, cols, ld; /* ld > cols: of each of the rows of ld values, only cols may change */
    const double *allow;   /* per value: how far the backends may differ under a perout rule
                            * (INFINITY: anything, NaN and inf positions too); NULL: none */
} arg;

/* Everything an operation takes besides its buffers (each op uses the fields it needs). */
typedef struct prm {
    size_t n;
    int M, N, K, ta, tb, lda, ldb, ldc; /* gemm; N, C also the rows and columns of row ops */
    int B, T, C, NH, V;
    float alpha, beta, a, v;
    bk_rnd r, rw;
    int omit;          /* pass NULL for the optional argument (bias, dinp, histogram, keep) */
    bk_optim o;
    long t;
    double lr;
    float ginv, gscale;
    const float *hx;   /* host copy of the reduced input, for the bound of its sums */
} prm;

typedef struct result {
    uint32_t *buf[MAXARG]; /* each argument after the op, with its guards */
    int nscal;
    const char *sname[MAXSCAL];
    double scal[MAXSCAL];  /* scalar results: sums, counts, statistics */
    double bound[MAXSCAL]; /* reordering bound of a sum (0: not a sum) */
    long guards, inputs, pads;
    int sync_rc;
    char sync_err[128];
} result;

typedef void (*run_fn)(const backend *bk, float *const *d, const prm *p, result *r);

typedef struct tcase {
    arg a[MAXARG];
    int na;
    run_fn run;
    prm p;
} tcase;

static tcase mk(run_fn run, const prm *p)
{
    tcase c;
    memset(&c, 0, sizeof c);
    c.run = run;
    c.p = *p;
    return c;
}

static void add(tcase *c, const char *name, role ro, size_t n, const void *init)
{
    if (c->na == MAXARG)
        bail("too many arguments");
    arg a = {name, ro, n, init, 0, 0, 0, NULL};
    c->a[c->na++] = a;
}

static void put(result *r, const char *name, double v, double bound)
{
    if (r->nscal == MAXSCAL)
        bail("too many scalar results");
    r->sname[r->nscal] = name;
    r->bound[r->nscal] = bound;
    r->scal[r->nscal++] = v;
}

/* n 2^-52 sum|x_i| (squares with sq) over the finite values: how far two orders of adding them
 * in double may be apart. */
static double sum_bound(const float *x, size_t n, int sq, float scale)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) {
            double v = (double)(x[i] * scale);
            s += sq ? v * v : fabs(v);
        }
    return (double)n * 0x1p-52 * s;
}

/* The statistics' sums: within AMPDIAG_TSTATS_SUM_RTOL of the magnitudes (ampdiag.h: the
 * 512-bit kernel adds 16 values a lane in float), twice that between two kernels, plus the
 * double accumulation's own order. */
static double tstats_sum_bound(const float *x, size_t n, int sq)
{
    double m = sum_bound(x, n, sq, 1.0f) / ((double)(n ? n : 1) * 0x1p-52); /* the magnitudes */
    return sum_bound(x, n, sq, 1.0f) + 2.0 * AMPDIAG_TSTATS_SUM_RTOL * m;
}

/* Every count of the record: the seven classes, then every format's what-if classes, named by
 * the format table (so that a format added to it is compared too). */
static void put_tstats(result *r, const ampdiag_tstats *s, const float *x, size_t n)
{
    static const char *const names[] = {"count", "n_nan", "n_posinf", "n_neginf", "n_zero", "n_neg", "n_pos"};
    static const char *const cls[AMPDIAG_WHATIF_NCLASSES] = {"overflow", "underflow", "subnormal"};
    static char wname[AMPDIAG_NFORMATS][AMPDIAG_WHATIF_NCLASSES][32];
    const uint64_t c[] = {s->count, s->n_nan, s->n_posinf, s->n_neginf, s->n_zero, s->n_neg, s->n_pos};
    for (size_t i = 0; i < NELEM(c); i++)
        put(r, names[i], (double)c[i], 0.0);
    for (int f = 0; f < AMPDIAG_NFORMATS; f++)
        for (int k = 0; k < AMPDIAG_WHATIF_NCLASSES; k++) {
            if (!wname[f][k][0])
                snprintf(wname[f][k], sizeof wname[f][k], "%s_%s", ampdiag_format_get((ampdiag_format)f)->name, cls[k]);
            put(r, wname[f][k], (double)s->whatif[f][k], 0.0);
        }
    put(r, "min", s->min, 0.0);
    put(r, "max", s->max, 0.0);
    put(r, "absmax", s->absmax, 0.0);
    put(r, "absmin_nz", s->absmin_nz, 0.0);
    put(r, "sum", s->sum, tstats_sum_bound(x, n, 0));
    put(r, "sumsq", s->sumsq, tstats_sum_bound(x, n, 1));
}

static void put_hist(result *r, const ampdiag_hist *h)
{
    for (int i = 0; i < AMPDIAG_HIST_BINS; i++)
        put(r, "histogram bin", (double)h->bin[i], 0.0);
}

/* ------------------------------------------------------------------------------- running a case */

static long count_diff(const uint32_t *a, const uint32_t *b, size_t n)
{
    long c = 0;
    for (size_t i = 0; i < n; i++)
        c += a[i] != b[i];
    return c;
}

/* The padding of a strided output: the values past cols in each row that must not change. */
static long count_pad_diff(const arg *a, const uint32_t *got, const uint32_t *init)
{
    long c = 0;
    for (size_t i = 0; i < a->rows; i++)
        c += count_diff(got + i * a->ld + a->cols, init + i * a->ld + a->cols, a->ld - a->cols);
    return c;
}

/* The host image of an argument: GUARD sentinels, its values (or POISON), GUARD sentinels. */
static uint32_t *host_image(const arg *a)
{
    size_t tot = a->n + 2 * GUARD;
    uint32_t *img = xmalloc(tot * sizeof *img);
    for (size_t i = 0; i < tot; i++)
        img[i] = SENTINEL;
    if (a->init)
        memcpy(img + GUARD, a->init, a->n * sizeof *img);
    else
        for (size_t i = 0; i < a->n; i++)
            img[GUARD + i] = POISON;
    return img;
}

/* Runs c on bk: every argument in a buffer of bk's own with sentinels either side, uploaded,
 * the op, a sync, everything downloaded; counts the sentinels, inputs and padding that changed. */
static void exec_case(const backend *bk, const tcase *c, result *r)
{
    void *dev[MAXARG];
    float *d[MAXARG];
    uint32_t *img[MAXARG];
    memset(r, 0, sizeof *r);
    for (int k = 0; k < c->na; k++) {
        size_t bytes = (c->a[k].n + 2 * GUARD) * sizeof(float);
        img[k] = host_image(&c->a[k]);
        dev[k] = bk->alloc(bk, bytes);
        if (!dev[k])
            bail("the backend could not allocate a test buffer");
        bk->to_device(bk, dev[k], img[k], bytes);
        d[k] = (float *)dev[k] + GUARD;
    }
    c->run(bk, d, &c->p, r);
    r->sync_rc = bk->sync(bk, r->sync_err, sizeof r->sync_err);
    for (int k = 0; k < c->na; k++) {
        const arg *a = &c->a[k];
        size_t bytes = (a->n + 2 * GUARD) * sizeof(float);
        uint32_t *got = xmalloc(bytes);
        bk->to_host(bk, got, dev[k], bytes);
        r->guards += count_diff(got, img[k], GUARD)
                     + count_diff(got + GUARD + a->n, img[k] + GUARD + a->n, GUARD);
        if (a->role == IN)
            r->inputs += count_diff(got + GUARD, img[k] + GUARD, a->n);
        if (a->ld > a->cols)
            r->pads += count_pad_diff(a, got + GUARD, img[k] + GUARD);
        r->buf[k] = got;
        bk->free(bk, dev[k]);
        free(img[k]);
    }
}

/* ------------------------------------------------------------------------------- comparing */

/* What one operation in one format has seen over its cases. */
typedef struct opstat {
    const char *op;
    const tol_rule *tol;
    long cases, values, scalars;
    long bad, nanpos, infpos, guards, inputs, pads, syncs;
    uint64_t max_ulp;
    double max_sfrac; /* largest difference of a sum as a fraction of its allowance */
    double max_pfrac; /* largest difference of an output as a fraction of its own allowance */
    long unbounded;   /* outputs whose allowance is unbounded (partial sums may overflow) */
    char first[256]; /* the first difference, for the failure's diagnostics */
} opstat;

static void stat_begin(opstat *st, const tctx *T, const char *op)
{
    memset(st, 0, sizeof *st);
    st->op = op;
    st->tol = find_tol(T->ut->name, op);
}

__attribute__((format(printf, 3, 4)))
static void note(opstat *st, long *counter, const char *fmt, ...)
{
    (*counter)++;
    if (st->first[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->first, sizeof st->first, fmt, ap);
    va_end(ap);
}

/* A value under a perout rule: within its own allowance (allow >= 0). */
static void cmp_allowed(opstat *st, const char *name, size_t i, uint32_t a, uint32_t b,
                        double allow)
{
    if (isinf(allow)) {
        st->unbounded++;
        return;
    }
    if (isnan_u(a) != isnan_u(b) || isinf_u(a) != isinf_u(b)) {
        note(st, isnan_u(a) != isnan_u(b) ? &st->nanpos : &st->infpos,
             "%s[%zu]: %08x under test, %08x reference (NaN or inf in one only)", name, i, a, b);
        return;
    }
    if (isnan_u(a) || a == b)
        return;
    double d = fabs((double)fbits(a) - (double)fbits(b));
    if (!(d <= allow))
        note(st, &st->bad, "%s[%zu]: %.9g under test, %.9g reference (difference %.3g, allowed %.3g)",
             name, i, fbits(a), fbits(b), d, allow);
    else if (d / allow > st->max_pfrac)
        st->max_pfrac = d / allow;
}

static void cmp_value(opstat *st, const char *name, size_t i, uint32_t a, uint32_t b,
                      const double *allow)
{
    st->values++;
    if (a != b && !(isnan_u(a) && isnan_u(b))) {
        uint64_t d = ulp_dist(a, b);
        if (d > st->max_ulp && !isnan_u(a) && !isnan_u(b))
            st->max_ulp = d;
    }
    if (allow && st->tol && st->tol->perout) {
        cmp_allowed(st, name, i, a, b, allow[i]);
        return;
    }
    if (isnan_u(a) || isnan_u(b)) {
        if (isnan_u(a) != isnan_u(b))
            note(st, &st->nanpos, "%s[%zu]: %08x under test, %08x reference (NaN in one only)",
                 name, i, a, b);
        return;
    }
    if (a == b)
        return;
    uint64_t d = ulp_dist(a, b);
    if (isinf_u(a) != isinf_u(b))
        note(st, &st->infpos, "%s[%zu]: %08x under test, %08x reference (inf in one only)", name,
             i, a, b);
    else if (d > (st->tol ? st->tol->ulps : 0u))
        note(st, &st->bad, "%s[%zu]: %08x under test, %08x reference (%llu ulp)", name, i, a, b,
             (unsigned long long)d);
}

static void cmp_scalar(opstat *st, const char *name, double a, double b, double bound)
{
    st->scalars++;
    if (isnan(a) || isnan(b)) {
        if (isnan(a) != isnan(b))
            note(st, &st->nanpos, "%s: %.17g under test, %.17g reference", name, a, b);
        return;
    }
    if (memcmp(&a, &b, sizeof a) == 0)
        return;
    if (isinf(a) || isinf(b)) {
        note(st, &st->infpos, "%s: %.17g under test, %.17g reference", name, a, b);
        return;
    }
    double d = fabs(a - b);
    if (bound > 0.0 && d / bound > st->max_sfrac)
        st->max_sfrac = d / bound;
    if (!(st->tol && st->tol->sums && bound > 0.0 && d <= bound))
        note(st, &st->bad, "%s: %.17g under test, %.17g reference (difference %.3g, allowed %.3g)",
             name, a, b, d, st->tol && st->tol->sums ? bound : 0.0);
}

static void compare(const tcase *c, const result *u, const result *f, opstat *st)
{
    st->cases++;
    st->guards += u->guards + f->guards;
    st->inputs += u->inputs + f->inputs;
    st->pads += u->pads + f->pads;
    if (u->sync_rc || f->sync_rc)
        note(st, &st->syncs, "sync failed: %s%s", u->sync_err, f->sync_err);
    for (int k = 0; k < c->na; k++) {
        const arg *a = &c->a[k];
        if (a->role == IN || a->role == SCRATCH)
            continue;
        for (size_t i = 0; i < a->n; i++)
            cmp_value(st, a->name, i, u->buf[k][GUARD + i], f->buf[k][GUARD + i], a->allow);
    }
    if (u->nscal != f->nscal)
        note(st, &st->bad, "%d scalar results under test, %d reference", u->nscal, f->nscal);
    for (int i = 0; i < u->nscal && i < f->nscal; i++)
        cmp_scalar(st, f->sname[i], u->scal[i], f->scal[i], f->bound[i]);
}

static void result_free(result *r, int na)
{
    for (int k = 0; k < na; k++)
        free(r->buf[k]);
}

/* The case on both backends, compared; its host data freed. */
static void both(tctx *T, const tcase *c, opstat *st)
{
    result *u = xmalloc(sizeof *u), *f = xmalloc(sizeof *f);
    exec_case(T->ut, c, u);
    exec_case(T->ref, c, f);
    compare(c, u, f, st);
    result_free(u, c->na);
    result_free(f, c->na);
    free(u);
    free(f);
    hfree(T);
}

static void report(const opstat *st, const char *label)
{
    int pass = st->cases > 0 && !st->bad && !st->nanpos && !st->infpos && !st->guards
               && !st->inputs && !st->pads && !st->syncs;
    if (!pass) {
        diag("%s: %ld beyond the tolerance, %ld NaN and %ld inf positions differ, %ld sentinels, "
             "%ld input values and %ld padding values overwritten, %ld failed syncs",
             label, st->bad, st->nanpos, st->infpos, st->guards, st->inputs, st->pads, st->syncs);
        if (st->first[0])
            diag("first: %s", st->first);
    }
    const char *todo = !pass && st->tol && st->tol->todo ? st->tol->todo : NULL;
    if (todo)
        emit(pass, todo, "%s: %ld cases, %ld values, %ld scalars; largest difference %llu ulp",
             label, st->cases, st->values, st->scalars, (unsigned long long)st->max_ulp);
    else if (st->tol && st->tol->perout)
        emit(pass, NULL, "%s: %ld cases, %ld values, %ld scalars; largest difference %.2g of its output's "
           "allowance, %ld outputs unbounded (a sum or its rounding may overflow) (%s)", label, st->cases,
           st->values, st->scalars, st->max_pfrac, st->unbounded, st->tol->why);
    else if (st->tol)
        emit(pass, NULL, "%s: %ld cases, %ld values, %ld scalars; largest difference %llu ulp (allowed %u), "
           "sums %.2g of their allowance n 2^-52 sum|x| (%s)", label, st->cases, st->values,
           st->scalars, (unsigned long long)st->max_ulp, st->tol->ulps, st->max_sfrac, st->tol->why);
    else
        emit(pass, NULL, "%s: %ld cases, %ld values, %ld scalars, bit for bit: largest difference %llu ulp",
           label, st->cases, st->values, st->scalars, (unsigned long long)st->max_ulp);
}

/* The cases of one operation in one format. */
typedef void (*cases_fn)(tctx *T, bk_rnd r, opstat *st);

static void per_format(tctx *T, const char *op, cases_fn fn)
{
    for (int i = 0; i < NFMT; i++) {
        bk_rnd r = fmt_at(i);
        opstat st;
        char label[64];
        stat_begin(&st, T, op);
        fn(T, r, &st);
        snprintf(label, sizeof label, "%s %s", op, rnd_name(r));
        report(&st, label);
    }
}

static void once(tctx *T, const char *op, cases_fn fn)
{
    opstat st;
    stat_begin(&st, T, op);
    fn(T, BK_NO_RND, &st);
    report(&st, op);
}

/* ------------------------------------------------------------------------------- the operations */

static void run_fill(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->fill(bk, d[0], p->v, p->n);
}

static void cases_fill(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    static const uint32_t vals[] = {0x00000000u, 0x80000000u, 0x7fc00001u, 0xff800000u,
                                    0x477ff000u, 0x00000001u, 0xbf800000u};
    for (int s = 0; s < NSIZES; s++)
        for (size_t k = 0; k < NELEM(vals); k++) {
            prm p = {.n = SIZES[s], .v = fbits(vals[k])};
            tcase c = mk(run_fill, &p);
            add(&c, "x", OUT, p.n, NULL);
            both(T, &c, st);
        }
}

static void run_scale(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->scale(bk, d[0], p->a, p->n);
}

static void cases_scale(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    static const float as[] = {1.0f, -0.5f, 0x1p100f, 0x1p-100f, 0.0f};
    for (int s = 0; s < NSIZES; s++)
        for (size_t k = 0; k < NELEM(as); k++) {
            prm p = {.n = SIZES[s], .a = as[k]};
            tcase c = mk(run_scale, &p);
            add(&c, "x", INOUT, p.n, gen_mix(T, p.n));
            both(T, &c, st);
        }
}

static void run_axpy(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->axpy(bk, d[0], p->beta, p->a, d[1], p->n, p->r);
}

static void cases_axpy(tctx *T, bk_rnd r, opstat *st)
{
    static const float betas[] = {0.0f, 1.0f, 0.5f}, as[] = {1.0f, -3.0f};
    for (int s = 0; s < NSIZES; s++)
        for (size_t b = 0; b < NELEM(betas); b++)
            for (size_t k = 0; k < NELEM(as); k++) {
                prm p = {.n = SIZES[s], .beta = betas[b], .a = as[k], .r = r};
                tcase c = mk(run_axpy, &p);
                add(&c, "y", INOUT, p.n, gen_held(T, p.n, r));
                add(&c, "x", IN, p.n, gen_mix(T, p.n));
                both(T, &c, st);
            }
}

static void run_round(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    if (p->omit) /* in place */
        bk->round(bk, d[0], d[0], p->n, p->r);
    else
        bk->round(bk, d[0], d[1], p->n, p->r);
}

static void cases_round(tctx *T, bk_rnd r, opstat *st)
{
    for (int s = 0; s < NSIZES; s++)
        for (int inplace = 0; inplace < 2; inplace++) {
            prm p = {.n = SIZES[s], .r = r, .omit = inplace};
            tcase c = mk(run_round, &p);
            float *x = gen_mix(T, p.n);
            add(&c, "out", inplace ? INOUT : OUT, p.n, inplace ? x : NULL);
            if (!inplace)
                add(&c, "in", IN, p.n, x);
            both(T, &c, st);
        }
}

static void run_sum(const backend *bk, float *const *d, const prm *p, result *r)
{
    put(r, "sum", bk->sum(bk, d[0], p->n), sum_bound(p->hx, p->n, 0, 1.0f));
}

static void run_sumsq(const backend *bk, float *const *d, const prm *p, result *r)
{
    put(r, "sumsq", bk->sumsq(bk, d[0], p->n), sum_bound(p->hx, p->n, 1, 1.0f));
}

static void run_count_nonfinite(const backend *bk, float *const *d, const prm *p, result *r)
{
    put(r, "count", (double)bk->count_nonfinite(bk, d[0], p->n), 0.0);
}

static void run_tstats(const backend *bk, float *const *d, const prm *p, result *r)
{
    ampdiag_tstats s;
    ampdiag_hist h;
    bk->tstats(bk, d[0], p->n, &s, p->omit ? NULL : &h);
    put_tstats(r, &s, p->hx, p->n);
    if (!p->omit)
        put_hist(r, &h);
}

/* A reduction over every size, with the specials (NaN and inf sums) and without (finite sums),
 * and sizes that cross the statistics kernel's block of 4096; with hist_too also without the
 * histogram. */
static void reduce_all(tctx *T, opstat *st, run_fn run, int hist_too)
{
    static const size_t more[] = {4096 + 33, 3 * 4096 + 8};
    for (int s = 0; s < NSIZES + (int)NELEM(more); s++)
        for (int v = 0; v < 2 + 2 * hist_too; v++) {
            size_t n = s < NSIZES ? SIZES[s] : more[s - NSIZES];
            prm p = {.n = n, .omit = v >= 2};
            float *x = (v % 2) ? gen(T, n, 0, -30, 17) : gen_mix(T, n);
            p.hx = x;
            tcase c = mk(run, &p);
            add(&c, "x", IN, n, x);
            both(T, &c, st);
        }
}

static void cases_sum(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    reduce_all(T, st, run_sum, 0);
}

static void cases_sumsq(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    reduce_all(T, st, run_sumsq, 0);
}

static void cases_count_nonfinite(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    reduce_all(T, st, run_count_nonfinite, 0);
}

static void cases_tstats(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    reduce_all(T, st, run_tstats, 1);
}

enum { MANY_GE = 4 };

/* count_at_least: thresholds at and around the class boundaries of every format (the pass the
 * delayed-scaling FP8 counts take), and the bad arguments it must refuse. */
static void run_count_at_least(const backend *bk, float *const *d, const prm *p, result *r)
{
    static const uint32_t ge[8] = {1u, AMPDIAG_BF16_UNF_BITS + 1u, AMPDIAG_F32_MIN_NORMAL, AMPDIAG_FP16_UNF_BITS + 1u,
                                   AMPDIAG_E4M3_NORM_BITS, AMPDIAG_E4M3_OVF_BITS, AMPDIAG_FP16_OVF_BITS,
                                   AMPDIAG_F32_INF};
    static const uint32_t bad[2] = {0u, AMPDIAG_F32_INF + 1u};
    uint64_t c[8] = {0}, keep[1] = {7};
    int k = (int)(p->omit % 9); /* 0..8 thresholds */
    put(r, "rc", (double)bk->count_at_least(bk, d[0], p->n, (size_t)k, ge, c), 0.0);
    for (int j = 0; j < 8; j++)
        put(r, "count", (double)c[j], 0.0);
    put(r, "rc (9 thresholds)", (double)bk->count_at_least(bk, d[0], p->n, 9, ge, c), 0.0);
    put(r, "rc (threshold 0)", (double)bk->count_at_least(bk, d[0], p->n, 1, bad, keep), 0.0);
    put(r, "rc (a NaN threshold)", (double)bk->count_at_least(bk, d[0], p->n, 1, bad + 1, keep), 0.0);
    put(r, "untouched", (double)keep[0], 0.0);
}

static void cases_count_at_least(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    static const size_t more[] = {4096 + 33, 3 * 4096 + 8};
    for (int s = 0; s < NSIZES + (int)NELEM(more); s++)
        for (int v = 0; v < 2; v++) {
            size_t n = s < NSIZES ? SIZES[s] : more[s - NSIZES];
            prm p = {.n = n, .omit = (s * 2 + v) % 9};
            float *x = v ? gen(T, n, 0, -30, 17) : gen_mix(T, n);
            tcase c = mk(run_count_at_least, &p);
            add(&c, "x", IN, n, x);
            both(T, &c, st);
        }
}

/* tstats_ge: the record and count_at_least's counts from one pass, with 0..8 of count_at_least's
 * thresholds, with and without the histogram; and the bad arguments it must refuse (nothing
 * computed). */
static void run_tstats_ge(const backend *bk, float *const *d, const prm *p, result *r)
{
    static const uint32_t ge[8] = {1u, AMPDIAG_BF16_UNF_BITS + 1u, AMPDIAG_F32_MIN_NORMAL, AMPDIAG_FP16_UNF_BITS + 1u,
                                   AMPDIAG_E4M3_NORM_BITS, AMPDIAG_E4M3_OVF_BITS, AMPDIAG_FP16_OVF_BITS,
                                   AMPDIAG_F32_INF};
    static const uint32_t bad[2] = {0u, AMPDIAG_F32_INF + 1u};
    uint64_t c[8] = {0}, keep[1] = {7};
    ampdiag_tstats s, s2;
    ampdiag_hist h;
    size_t k = (size_t)(p->omit % 9);
    int hist = p->omit / 9 == 0;
    put(r, "rc", (double)bk->tstats_ge(bk, d[0], p->n, &s, hist ? &h : NULL, k, ge, c), 0.0);
    put_tstats(r, &s, p->hx, p->n);
    if (hist)
        put_hist(r, &h);
    for (int j = 0; j < 8; j++)
        put(r, "count", (double)c[j], 0.0);
    put(r, "rc (9 thresholds)", (double)bk->tstats_ge(bk, d[0], p->n, &s2, NULL, 9, ge, c), 0.0);
    put(r, "rc (threshold 0)", (double)bk->tstats_ge(bk, d[0], p->n, &s2, NULL, 1, bad, keep), 0.0);
    put(r, "rc (a NaN threshold)", (double)bk->tstats_ge(bk, d[0], p->n, &s2, NULL, 1, bad + 1, keep), 0.0);
    put(r, "untouched", (double)keep[0], 0.0);
}

static void cases_tstats_ge(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    static const size_t more[] = {4096 + 33, 3 * 4096 + 8};
    for (int s = 0; s < NSIZES + (int)NELEM(more); s++)
        for (int v = 0; v < 2; v++) {
            size_t n = s < NSIZES ? SIZES[s] : more[s - NSIZES];
            prm p = {.n = n, .omit = (s * 2 + v) % 18};
            float *x = v ? gen(T, n, 0, -30, 17) : gen_mix(T, n);
            p.hx = x;
            tcase c = mk(run_tstats_ge, &p);
            add(&c, "x", IN, n, x);
            both(T, &c, st);
        }
}

/* count_at_least_many (or the loop bk_count_at_least_many falls back to): four requests of
 * other sizes and threshold counts, one empty, in one call; then one with a bad threshold. */
static void run_count_at_least_many(const backend *bk, float *const *d, const prm *p, result *r)
{
    static const size_t ns[MANY_GE] = {1003, 0, 4096 + 33, 7};
    static const uint32_t ge[8] = {1u, AMPDIAG_FP16_UNF_BITS + 1u, AMPDIAG_E5M2_NORM_BITS, AMPDIAG_E4M3_NORM_BITS,
                                   AMPDIAG_E4M3_OVF_BITS, AMPDIAG_FP16_OVF_BITS, AMPDIAG_F32_INF, 0x3f800000u};
    uint64_t c[MANY_GE][8];
    memset(c, 0, sizeof c);
    bk_ge_req q[MANY_GE];
    for (int i = 0; i < MANY_GE; i++)
        q[i] = (bk_ge_req){d[i], ns[i], (size_t)((i * 3 + p->omit) % 9), ge, c[i]};
    put(r, "rc", (double)bk_count_at_least_many(bk, MANY_GE, q), 0.0);
    for (int i = 0; i < MANY_GE; i++)
        for (int j = 0; j < 8; j++)
            put(r, "count", (double)c[i][j], 0.0);
    static const uint32_t bad[1] = {0u};
    q[2].ge = bad;
    q[2].k = 1;
    put(r, "rc (threshold 0)", (double)bk_count_at_least_many(bk, MANY_GE, q), 0.0);
}

static void cases_count_at_least_many(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    static const size_t ns[MANY_GE] = {1003, 0, 4096 + 33, 7};
    for (int v = 0; v < 4; v++) {
        prm p = {.omit = v};
        tcase c = mk(run_count_at_least_many, &p);
        for (int i = 0; i < MANY_GE; i++) {
            size_t n = ns[i] ? ns[i] : 1;
            add(&c, "x", IN, n, (v / 2) ? gen(T, n, 0, -30, 17) : gen_mix(T, n));
        }
        both(T, &c, st);
    }
}

/* quant_whatif: every block-scaled scheme ("all") on a matrix with a 1-D tail and on a vector;
 * every count and the error sums (bit for bit: the same arithmetic in the same order is the
 * contract, the sums in double included). */
static void run_quant_whatif(const backend *bk, float *const *d, const prm *p, result *r)
{
    static ampdiag_qspec spec[64];
    static size_t nspec;
    if (!nspec) {
        char err[256];
        if (ampdiag_qspec_parse("all", spec, 64, &nspec, err, sizeof err) != 0 || nspec == 0)
            bail("quant_whatif: the scheme list 'all' does not parse");
    }
    ampdiag_qstats *q = xmalloc(nspec * sizeof *q);
    memset(q, 0, nspec * sizeof *q);
    put(r, "rc", (double)bk->quant_whatif(bk, d[0], p->n, (size_t)p->M, (size_t)p->N, p->a, nspec, spec, q), 0.0);
    for (size_t i = 0; i < nspec; i++) {
        const ampdiag_qstats *s = &q[i];
        const uint64_t c[] = {s->count, s->nonfinite, s->saturated, s->flushed, s->subnormal, s->poisoned, s->blocks,
                              s->zero_blocks, s->nonfinite_blocks, s->scale_clamped, s->scale_underflow,
                              s->scale_subnormal, s->disagree};
        for (size_t k = 0; k < NELEM(c); k++)
            put(r, "quant count", (double)c[k], 0.0);
        put(r, "computed", (double)s->computed, 0.0);
        put(r, "scale", (double)s->scale, 0.0);
        put(r, "scale_emin", (double)s->scale_emin, 0.0);
        put(r, "scale_emax", (double)s->scale_emax, 0.0);
        for (int b = 0; b < AMPDIAG_QHIST_BINS; b++)
            put(r, "scale_hist", (double)s->scale_hist[b], 0.0);
        put(r, "sig_sq", s->sig_sq, 0.0);
        put(r, "err_sq", s->err_sq, 0.0);
        put(r, "max_rel_err", s->max_rel_err, 0.0);
        put(r, "disagree_sq", s->disagree_sq, 0.0);
    }
    free(q);
}

static void cases_quant_whatif(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    static const int shapes[][3] = {{33, 40, 7}, {130, 129, 0}, {0, 0, 1003}, {16, 16, 0}};
    for (size_t s = 0; s < NELEM(shapes); s++)
        for (int v = 0; v < 2; v++) {
            prm p = {.M = shapes[s][0], .N = shapes[s][1]};
            p.n = (size_t)p.M * (size_t)p.N + (size_t)shapes[s][2];
            float *x = v ? gen(T, p.n, 0, -20, 6) : gen_mix(T, p.n);
            float amax = 0.0f;
            for (size_t i = 0; i < p.n; i++)
                if (!isnan(x[i]) && fabsf(x[i]) > amax)
                    amax = fabsf(x[i]);
            p.a = amax;
            tcase c = mk(run_quant_whatif, &p);
            add(&c, "x", IN, p.n, x);
            both(T, &c, st);
        }
}

/* whatif_scaled: both FP8 formats (and FP16) at scales that move the thresholds across the data;
 * a scale that is not finite and > 0 refused. */
static void run_whatif_scaled(const backend *bk, float *const *d, const prm *p, result *r)
{
    static const float scales[] = {1.0f, 0.0078125f, 3.7f, 1024.0f, 1e-3f, 0x1p-40f};
    const ampdiag_format fmt[3] = {AMPDIAG_E4M3, AMPDIAG_E5M2, AMPDIAG_FP16};
    float sc[3] = {scales[p->omit % 6], scales[(p->omit + 1) % 6] * 2.0f, scales[(p->omit + 2) % 6]};
    uint64_t c[3][AMPDIAG_WHATIF_NCLASSES];
    memset(c, 0, sizeof c);
    put(r, "rc", (double)bk->whatif_scaled(bk, 3, fmt, sc, d[0], p->n, c), 0.0);
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < AMPDIAG_WHATIF_NCLASSES; k++)
            put(r, "count", (double)c[f][k], 0.0);
    float nan_scale = NAN;
    put(r, "rc (NaN scale)", (double)bk->whatif_scaled(bk, 1, fmt, &nan_scale, d[0], p->n, c), 0.0);
}

static void cases_whatif_scaled(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    for (int s = 0; s < NSIZES; s++)
        for (int v = 0; v < 2; v++) {
            prm p = {.n = SIZES[s], .omit = s * 2 + v};
            tcase c = mk(run_whatif_scaled, &p);
            add(&c, "x", IN, p.n, v ? gen(T, p.n, 0, -30, 17) : gen_mix(T, p.n));
            both(T, &c, st);
        }
}

/* tstats_many (or, where a backend has none, bk_tstats_many's loop over tstats): four requests
 * of other sizes, one empty, with and without histograms, in one call. */
enum { MANY = 4 };
static void run_tstats_many(const backend *bk, float *const *d, const prm *p, result *r)
{
    static const size_t ns[MANY] = {1003, 0, 4096 + 33, 7};
    ampdiag_tstats s[MANY];
    ampdiag_hist h[MANY];
    bk_stats_req q[MANY];
    for (int i = 0; i < MANY; i++)
        q[i] = (bk_stats_req){d[i], ns[i], &s[i], (i + p->omit) % 2 ? &h[i] : NULL};
    bk_tstats_many(bk, MANY, q);
    for (int i = 0; i < MANY; i++) {
        put_tstats(r, &s[i], p->hx + (size_t)i * 8192, ns[i]);
        if (q[i].h)
            put_hist(r, &h[i]);
    }
}

static void cases_tstats_many(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    static const size_t ns[MANY] = {1003, 0, 4096 + 33, 7};
    for (int v = 0; v < 4; v++) {
        prm p = {.omit = v};
        float *all = hnew(T, MANY * 8192 * sizeof *all); /* each request's host copy, for its sums' bound */
        tcase c = mk(run_tstats_many, &p);
        for (int i = 0; i < MANY; i++) {
            size_t n = ns[i] ? ns[i] : 1;
            float *x = (v / 2) ? gen(T, n, 0, -30, 17) : gen_mix(T, n);
            memcpy(all + (size_t)i * 8192, x, n * sizeof *x);
            add(&c, "x", IN, n, x);
        }
        c.p.hx = all;
        both(T, &c, st);
    }
}

/* update_stats_many likewise: three requests, one empty, in one call. */
static void run_update_stats_many(const backend *bk, float *const *d, const prm *p, result *r)
{
    static const size_t ns[3] = {1033, 0, 9};
    bk_update_stats s[3];
    ampdiag_hist h[3];
    bk_update_req q[3];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 3; i++) {
        ampdiag_tstats_init(&s[i].weight);
        ampdiag_tstats_init(&s[i].update);
        ampdiag_hist_init(&h[i]);
        q[i] = (bk_update_req){d[2 * i], d[2 * i + 1], ns[i], &s[i], (i + p->omit) % 2 ? &h[i] : NULL};
    }
    bk_update_stats_many(bk, &p->o, 3, q);
    for (int i = 0; i < 3; i++) {
        put(r, "lost_updates", (double)s[i].lost_updates, 0.0);
        put(r, "lost_if_fp16", (double)s[i].lost_if_fp16, 0.0);
        put(r, "lost_if_bf16", (double)s[i].lost_if_bf16, 0.0);
        put_tstats(r, &s[i].update, p->hx + (size_t)i * 2048, ns[i]);
        if (q[i].hu)
            put_hist(r, &h[i]);
    }
}

static float *gen_updates(tctx *T, const float *w, size_t n);

static void cases_update_stats_many(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    static const size_t ns[3] = {1033, 0, 9};
    for (int f = 0; f < 3; f++) {
        prm p = {.omit = f};
        p.o = (bk_optim){BK_ADAMW, 0.9, 0.01, 0.9, 0.999, 1e-8, AMPDIAG_FP32, (ampdiag_format)f, 0, AMPDIAG_FP32};
        float *all = hnew(T, 3 * 2048 * sizeof *all);
        tcase c = mk(run_update_stats_many, &p);
        for (int i = 0; i < 3; i++) {
            size_t n = ns[i] ? ns[i] : 1;
            float *w = round_all(zero_every(gen(T, n, 13, -26, 6), n, 4), n, bk_rnd_make(p.o.weight_fmt, 0));
            float *dw = gen_updates(T, w, n);
            memcpy(all + (size_t)i * 2048, dw, n * sizeof *dw);
            add(&c, "w_old", IN, n, w);
            add(&c, "dw", IN, n, dw);
        }
        c.p.hx = all;
        both(T, &c, st);
    }
}

/* C[M,N] with ldc > N: the padding after each row holds sentinels, which must stay. */
static void run_gemm(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->gemm(bk, p->ta, p->tb, p->M, p->N, p->K, p->alpha, d[0], p->lda, d[1], p->ldb, p->beta,
             d[2], p->ldc, p->r);
}

/* C as the GEMM finds it: the padding after each row holds sentinels (which must stay); with
 * beta 0 the values are POISON (a NaN that beta 0 must not let through), else random. */
static float *gemm_c(tctx *T, const prm *p)
{
    size_t n = (size_t)p->M * (size_t)p->ldc;
    float *c = gen_held(T, n, p->r);
    for (size_t i = 0; i < n; i++) {
        if ((int)(i % (size_t)p->ldc) >= p->N)
            c[i] = fbits(SENTINEL);
        else if (p->beta == 0.0f)
            c[i] = fbits(POISON);
    }
    return c;
}

/* How far two GEMMs that add the same products in any order may differ, per output of C (the
 * padding: 0). Each sums its K + 2 terms (the K products, scaled by alpha, and beta c) within
 * gamma = (K+2) 2^-24 / (1 - (K+2) 2^-24) of sum|term| (Higham, Accuracy and Stability of
 * Numerical Algorithms, 3.1), plus 2^-149 a term for products that fall into float32's
 * subnormals; rounding to an FP16 or BF16 output adds at most one of its spacings. Where
 * sum|a b| (before alpha) or sum|term| reaches FLT_MAX, a product or a partial sum may overflow
 * in one order only (or, with an FMA, not at all): unbounded. Terms
 * that are NaN or inf make both results NaN or inf the same way: allowance 0. */
static double *gemm_allow(tctx *T, const prm *p, const float *A, const float *B, const float *C)
{
    size_t n = (size_t)p->M * (size_t)p->ldc;
    double *allow = hnew(T, n * sizeof *allow), g = (p->K + 2) * 0x1p-24;
    g /= 1.0 - g;
    for (size_t i = 0; i < n; i++)
        allow[i] = 0.0;
    for (int i = 0; i < p->M; i++)
        for (int j = 0; j < p->N; j++) {
            double ex = 0.0, sprod = 0.0, sabs;
            int nonfinite = 0;
            for (int k = 0; k < p->K; k++) {
                double t = (double)A[p->ta ? (size_t)k * p->lda + i : (size_t)i * p->lda + k]
                           * B[p->tb ? (size_t)j * p->ldb + k : (size_t)k * p->ldb + j];
                nonfinite |= !isfinite(t);
                ex += isfinite(t) ? t : 0.0;
                sprod += isfinite(t) ? fabs(t) : 0.0;
            }
            ex *= p->alpha;
            sabs = fabs(p->alpha) * sprod;
            if (p->beta != 0.0f) {
                double t = (double)p->beta * C[(size_t)i * p->ldc + j];
                nonfinite |= !isfinite(t);
                ex += isfinite(t) ? t : 0.0;
                sabs += isfinite(t) ? fabs(t) : 0.0;
            }
            double e = g * sabs + (p->K + 2) * 0x1p-149, hi = fabs(ex) + e;
            double *al = &allow[(size_t)i * p->ldc + j];
            if (fmax(sprod, sabs) * (1.0 + 2.0 * g) >= FLT_MAX || hi + opbound_spacing(p->r, hi) >= opbound_max(p->r))
                *al = INFINITY;
            else
                *al = nonfinite ? 0.0 : 2.0 * e + opbound_spacing(p->r, hi);
        }
    return allow;
}

/* One GEMM: A and B stored with row strides past their widths; K = 1 with B all ones makes C a
 * copy of A's specials (every threshold reaches the rounding); beta 0 over a NaN C. */
static void gemm_case(tctx *T, bk_rnd r, opstat *st, const int *shape, int trans, int acc)
{
    prm p = {.M = shape[0], .N = shape[1], .K = shape[2], .ta = trans & 1, .tb = trans >> 1,
             .alpha = acc ? 0.5f : 1.0f, .beta = acc ? 1.0f : 0.0f, .r = r};
    int arows = p.ta ? p.K : p.M, acols = p.ta ? p.M : p.K;
    int brows = p.tb ? p.N : p.K, bcols = p.tb ? p.K : p.N;
    p.lda = acols + 2;
    p.ldb = bcols + 1;
    p.ldc = p.N + 3;
    size_t na = (size_t)arows * (size_t)p.lda, nb = (size_t)brows * (size_t)p.ldb;
    float *a = p.K == 1 ? gen_mix(T, na) : gen(T, na, p.K <= 9 ? 5 : 0, -8, 8);
    float *b = gen(T, nb, 0, -8, 8);
    if (p.K == 1)
        for (size_t i = 0; i < nb; i++)
            b[i] = 1.0f;
    tcase c = mk(run_gemm, &p);
    add(&c, "A", IN, na, round_all(a, na, r));
    add(&c, "B", IN, nb, round_all(b, nb, r));
    add(&c, "C", INOUT, (size_t)p.M * (size_t)p.ldc, gemm_c(T, &p));
    c.a[2].allow = gemm_allow(T, &p, c.a[0].init, c.a[1].init, c.a[2].init);
    c.a[2].rows = (size_t)p.M;
    c.a[2].cols = (size_t)p.N;
    c.a[2].ld = (size_t)p.ldc;
    both(T, &c, st);
}

static void cases_gemm(tctx *T, bk_rnd r, opstat *st)
{
    static const int shapes[][3] = {{1, 1, 1},   {7, 8, 9},   {9, 31, 33}, {33, 7, 8},
                                    {8, 9, 1003}, {31, 33, 7}, {1, 33, 31}, {7, 9, 0},
                                    {33, 31, 1}};
    for (size_t s = 0; s < NELEM(shapes); s++)
        for (int trans = 0; trans < 4; trans++)
            for (int acc = 0; acc < 2; acc++)
                gemm_case(T, r, st, shapes[s], trans, acc);
}

/* Row ops work on [N, C]: these shapes, N rows of C. */
static const int row_shapes[][2] = {{1, 1}, {7, 8}, {9, 31}, {33, 9}, {3, 1003}, {8, 7}, {2, 33}};
#define NROWSHAPES ((int)NELEM(row_shapes))

static void run_bias_add(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->bias_add(bk, d[0], p->omit ? NULL : d[1], p->N, p->C, p->r);
}

static void cases_bias_add(tctx *T, bk_rnd r, opstat *st)
{
    for (int s = 0; s < NROWSHAPES; s++)
        for (int nobias = 0; nobias < 2; nobias++) {
            prm p = {.N = row_shapes[s][0], .C = row_shapes[s][1], .r = r, .omit = nobias};
            size_t n = (size_t)p.N * (size_t)p.C;
            tcase c = mk(run_bias_add, &p);
            add(&c, "out", INOUT, n, gen_mix(T, n));
            add(&c, "bias", IN, (size_t)p.C, zero_every(gen_mix(T, (size_t)p.C), (size_t)p.C, 2));
            both(T, &c, st);
        }
}

static void run_bias_grad(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->bias_grad(bk, d[0], d[1], p->N, p->C, p->r);
}

static void cases_bias_grad(tctx *T, bk_rnd r, opstat *st)
{
    for (int s = 0; s < NROWSHAPES; s++) {
        prm p = {.N = row_shapes[s][0], .C = row_shapes[s][1], .r = r};
        size_t n = (size_t)p.N * (size_t)p.C;
        tcase c = mk(run_bias_grad, &p);
        add(&c, "dbias", OUT, (size_t)p.C, NULL);
        add(&c, "dout", IN, n, gen_rows(T, (size_t)p.N, (size_t)p.C, -20, 14));
        both(T, &c, st);
    }
}

/* Elementwise ops: out [n] from one or two inputs. */
static void run_relu_fwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->relu_fwd(bk, d[0], d[1], p->n, p->r);
}

static void run_gelu_fwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->gelu_fwd(bk, d[0], d[1], p->n, p->r);
}

static void run_add_fwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->add_fwd(bk, d[0], d[1], d[2], p->n, p->r);
}

static void run_relu_bwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->relu_bwd(bk, d[0], d[1], d[2], p->n, p->beta, p->r);
}

static void run_gelu_bwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->gelu_bwd(bk, d[0], d[1], d[2], p->n, p->beta, p->r);
}

/* out = f(inp) (and b: add's second operand, zero every third value so that out = a there). */
static void unary_cases(tctx *T, bk_rnd r, opstat *st, run_fn run, int binary)
{
    for (int s = 0; s < NSIZES; s++) {
        prm p = {.n = SIZES[s], .r = r};
        tcase c = mk(run, &p);
        add(&c, "out", OUT, p.n, NULL);
        add(&c, "a", IN, p.n, gen_mix(T, p.n));
        if (binary)
            add(&c, "b", IN, p.n, zero_every(gen_mix(T, p.n), p.n, 3));
        both(T, &c, st);
    }
}

/* dinp = rnd(beta dinp + rnd(local gradient * dout)), beta 0 (over NaN) and 1 (accumulating,
 * over chunks of the backend's scratch size). */
static void backward_cases(tctx *T, bk_rnd r, opstat *st, run_fn run)
{
    for (int s = 0; s < NSIZES; s++)
        for (int acc = 0; acc < 2; acc++) {
            prm p = {.n = SIZES[s], .beta = (float)acc, .r = r};
            tcase c = mk(run, &p);
            add(&c, "dinp", acc ? INOUT : OUT, p.n, acc ? gen_held(T, p.n, r) : NULL);
            add(&c, "inp", IN, p.n, gen_mix(T, p.n));
            add(&c, "dout", IN, p.n, gen_mix(T, p.n));
            both(T, &c, st);
        }
}

static void cases_relu_fwd(tctx *T, bk_rnd r, opstat *st) { unary_cases(T, r, st, run_relu_fwd, 0); }
static void cases_gelu_fwd(tctx *T, bk_rnd r, opstat *st) { unary_cases(T, r, st, run_gelu_fwd, 0); }
static void cases_add_fwd(tctx *T, bk_rnd r, opstat *st) { unary_cases(T, r, st, run_add_fwd, 1); }
static void cases_relu_bwd(tctx *T, bk_rnd r, opstat *st) { backward_cases(T, r, st, run_relu_bwd); }
static void cases_gelu_bwd(tctx *T, bk_rnd r, opstat *st) { backward_cases(T, r, st, run_gelu_bwd); }

/* Layer norm: rows of ordinary values and rows with specials; weight zero every fourth column
 * (there out = bias, which holds the specials). */
static void run_ln_fwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->layernorm_fwd(bk, d[0], d[1], d[2], d[3], d[4], d[5], p->N, p->C, p->r);
}

static void cases_layernorm_fwd(tctx *T, bk_rnd r, opstat *st)
{
    for (int s = 0; s < NROWSHAPES; s++)
        for (int wide = 0; wide < 2; wide++) {
            prm p = {.N = row_shapes[s][0], .C = row_shapes[s][1], .r = r};
            size_t n = (size_t)p.N * (size_t)p.C, C = (size_t)p.C;
            tcase c = mk(run_ln_fwd, &p);
            add(&c, "out", OUT, n, NULL);
            add(&c, "mean", OUT, (size_t)p.N, NULL);
            add(&c, "rstd", OUT, (size_t)p.N, NULL);
            add(&c, "inp", IN, n, gen_rows(T, (size_t)p.N, C, wide ? -30 : -3, wide ? 17 : 3));
            add(&c, "weight", IN, C, zero_every(gen(T, C, 0, -2, 6), C, 4));
            add(&c, "bias", IN, C, gen_mix(T, C));
            both(T, &c, st);
        }
}

static void run_ln_bwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->layernorm_bwd(bk, p->omit ? NULL : d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], p->N,
                      p->C, p->beta, p->r, p->rw);
}

/* dinp overwritten, accumulated, or not asked for; the parameter gradients in the format or
 * in FP32 (the layers' policy keeps them FP32). */
static void cases_layernorm_bwd(tctx *T, bk_rnd r, opstat *st)
{
    for (int s = 0; s < NROWSHAPES; s++)
        for (int mode = 0; mode < 3; mode++)
            for (int rw32 = 0; rw32 < 2; rw32++) {
                prm p = {.N = row_shapes[s][0], .C = row_shapes[s][1], .r = r,
                         .rw = rw32 ? BK_NO_RND : r, .omit = mode == 2};
                p.beta = mode == 1 ? 1.0f : 0.0f;
                size_t N = (size_t)p.N, C = (size_t)p.C, n = N * C;
                float *rstd = gen(T, N, 0, -4, 8);
                for (size_t i = 0; i < N; i++)
                    rstd[i] = fabsf(rstd[i]);
                tcase c = mk(run_ln_bwd, &p);
                add(&c, "dinp", mode == 1 ? INOUT : OUT, n, mode == 1 ? gen_held(T, n, r) : NULL);
                add(&c, "dweight", OUT, C, NULL);
                add(&c, "dbias", OUT, C, NULL);
                add(&c, "dout", IN, n, gen_rows(T, N, C, -20, 10));
                add(&c, "inp", IN, n, gen_rows(T, N, C, -3, 3));
                add(&c, "weight", IN, C, gen(T, C, 7, -2, 2));
                add(&c, "mean", IN, N, gen(T, N, 7, -3, 1));
                add(&c, "rstd", IN, N, rstd);
                both(T, &c, st);
            }
}

/* Attention: (B, T, C, NH) with head sizes 4, 4, 4, 8, 6, 6 and T not a multiple of 8, and one
 * head of 66 (the CPU's GEMM path for heads wider than its head loops take). */
static const int att_shapes[][4] = {{1, 1, 4, 1}, {2, 7, 8, 2},  {1, 9, 12, 3},
                                    {1, 33, 16, 2}, {2, 8, 6, 1}, {1, 31, 18, 3}, {1, 5, 66, 1}};

static void run_att_fwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->attention_fwd(bk, d[0], d[1], d[2], d[3], p->B, p->T, p->C, p->NH, p->r);
}

static prm att_prm(const int *shape, bk_rnd r)
{
    prm p = {.B = shape[0], .T = shape[1], .C = shape[2], .NH = shape[3], .r = r};
    return p;
}

static size_t att_size(const prm *p)
{
    return (size_t)p->B * (size_t)p->NH * (size_t)p->T * (size_t)p->T;
}

/* qkv of ordinary size, and large (scores that overflow FP16), with a few specials. */
static void cases_attention_fwd(tctx *T, bk_rnd r, opstat *st)
{
    for (size_t s = 0; s < NELEM(att_shapes); s++)
        for (int large = 0; large < 2; large++) {
            prm p = att_prm(att_shapes[s], r);
            size_t nx = (size_t)p.B * (size_t)p.T * (size_t)p.C, na = att_size(&p);
            tcase c = mk(run_att_fwd, &p);
            add(&c, "out", OUT, nx, NULL);
            add(&c, "att", OUT, na, NULL);
            add(&c, "att_r", OUT, na, NULL);
            float *qkv = gen(T, 3 * nx, 97, large ? 2 : -3, large ? 7 : 2);
            add(&c, "qkv", IN, 3 * nx, round_all(qkv, 3 * nx, r));
            double *ao = hnew(T, nx * sizeof *ao), *aa = hnew(T, na * sizeof *aa), *ar = hnew(T, na * sizeof *ar);
            opbound_attention_fwd(p.B, p.T, p.C, p.NH, r, c.a[3].init, ao, aa, ar);
            c.a[0].allow = ao;
            c.a[1].allow = aa;
            c.a[2].allow = ar;
            both(T, &c, st);
        }
}

/* A causal softmax-like att (rows of positive values summing to about 1, zero past the
 * diagonal) and its copy in the format. */
static float *fake_att(tctx *T, const prm *p, bk_rnd r, float **att_r)
{
    size_t na = att_size(p), Tn = (size_t)p->T;
    float *att = hnew(T, na * sizeof *att), *ar = hnew(T, na * sizeof *ar);
    for (size_t i = 0; i < na; i++) {
        size_t t = (i / Tn) % Tn, j = i % Tn;
        att[i] = j <= t ? (float)(rng_uniform(&T->g) * 2.0 / (double)(t + 1)) : 0.0f;
        ar[i] = hround(r, att[i]);
    }
    *att_r = ar;
    return att;
}

static void run_att_bwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->attention_bwd(bk, d[0], d[1], d[2], d[3], d[4], d[5], p->B, p->T, p->C, p->NH, p->r);
}

static void cases_attention_bwd(tctx *T, bk_rnd r, opstat *st)
{
    for (size_t s = 0; s < NELEM(att_shapes); s++) {
        prm p = att_prm(att_shapes[s], r);
        size_t nx = (size_t)p.B * (size_t)p.T * (size_t)p.C, na = att_size(&p);
        float *att_r, *att = fake_att(T, &p, r, &att_r);
        tcase c = mk(run_att_bwd, &p);
        add(&c, "dqkv", OUT, 3 * nx, NULL);
        add(&c, "scratch", SCRATCH, na, NULL);
        add(&c, "dout", IN, nx, round_all(gen(T, nx, 31, -6, 2), nx, r));
        add(&c, "qkv", IN, 3 * nx, round_all(gen(T, 3 * nx, 0, -3, 2), 3 * nx, r));
        add(&c, "att", IN, na, att);
        add(&c, "att_r", IN, na, att_r);
        double *ad = hnew(T, 3 * nx * sizeof *ad);
        opbound_attention_bwd(p.B, p.T, p.C, p.NH, r, c.a[2].init, c.a[3].init, att, att_r, ad);
        c.a[0].allow = ad;
        both(T, &c, st);
    }
}

/* Embedding: (B, T, C, V), tokens repeated (the scatter-add adds several rows into one). */
static const int emb_shapes[][4] = {{1, 1, 1, 1}, {2, 7, 9, 5}, {3, 8, 33, 31}, {1, 9, 1003, 3},
                                    {2, 33, 8, 7}};

static void run_embed_fwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->embed_fwd(bk, d[0], (const int32_t *)d[1], d[2], d[3], p->B, p->T, p->C, p->r);
}

static void cases_embed_fwd(tctx *T, bk_rnd r, opstat *st)
{
    for (size_t s = 0; s < NELEM(emb_shapes); s++) {
        prm p = {.B = emb_shapes[s][0], .T = emb_shapes[s][1], .C = emb_shapes[s][2],
                 .V = emb_shapes[s][3], .r = r};
        size_t bt = (size_t)p.B * (size_t)p.T, C = (size_t)p.C;
        tcase c = mk(run_embed_fwd, &p);
        add(&c, "out", OUT, bt * C, NULL);
        add(&c, "tokens", IN, bt, gen_ints(T, bt, p.V));
        add(&c, "wte", IN, (size_t)p.V * C, gen_mix(T, (size_t)p.V * C));
        size_t npe = (size_t)p.T * C;
        add(&c, "wpe", IN, npe, zero_every(gen_mix(T, npe), npe, 2));
        both(T, &c, st);
    }
}

static void run_embed_bwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->embed_bwd(bk, d[0], d[1], d[2], (const int32_t *)d[3], p->B, p->T, p->C, p->V, p->r);
}

static void cases_embed_bwd(tctx *T, bk_rnd r, opstat *st)
{
    for (size_t s = 0; s < NELEM(emb_shapes); s++) {
        prm p = {.B = emb_shapes[s][0], .T = emb_shapes[s][1], .C = emb_shapes[s][2],
                 .V = emb_shapes[s][3], .r = r};
        size_t bt = (size_t)p.B * (size_t)p.T, C = (size_t)p.C;
        tcase c = mk(run_embed_bwd, &p);
        add(&c, "dwte", OUT, (size_t)p.V * C, NULL);
        add(&c, "dwpe", OUT, (size_t)p.T * C, NULL);
        add(&c, "dout", IN, bt * C, gen_mix(T, bt * C));
        add(&c, "tokens", IN, bt, gen_ints(T, bt, p.V));
        both(T, &c, st);
    }
}

/* Cross-entropy: (N, V), rows with specials among ordinary logits. */
static const int xent_shapes[][2] = {{1, 1}, {7, 9}, {33, 31}, {3, 1003}, {9, 8}, {2, 1}};

static void run_xent_fwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->xent_fwd(bk, d[0], d[1], d[2], (const int32_t *)d[3], p->N, p->V);
}

static void cases_xent_fwd(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    for (size_t s = 0; s < NELEM(xent_shapes); s++) {
        prm p = {.N = xent_shapes[s][0], .V = xent_shapes[s][1]};
        size_t N = (size_t)p.N, V = (size_t)p.V;
        tcase c = mk(run_xent_fwd, &p);
        add(&c, "losses", OUT, N, NULL);
        add(&c, "probs", OUT, N * V, NULL);
        add(&c, "logits", IN, N * V, gen_rows(T, N, V, -3, 4));
        add(&c, "targets", IN, N, gen_ints(T, N, p.V));
        both(T, &c, st);
    }
}

static void run_xent_bwd(const backend *bk, float *const *d, const prm *p, result *r)
{
    (void)r;
    bk->xent_bwd(bk, d[0], d[1], (const int32_t *)d[2], p->N, p->V, p->a, p->r);
}

static void cases_xent_bwd(tctx *T, bk_rnd r, opstat *st)
{
    for (size_t s = 0; s < NELEM(xent_shapes); s++)
        for (int k = 0; k < 3; k++) {
            prm p = {.N = xent_shapes[s][0], .V = xent_shapes[s][1], .r = r};
            size_t N = (size_t)p.N, V = (size_t)p.V;
            p.a = k == 0 ? 1.0f : k == 1 ? 65536.0f / (float)N : 1.0f / (float)N; /* dscale */
            tcase c = mk(run_xent_bwd, &p);
            add(&c, "dlogits", OUT, N * V, NULL);
            add(&c, "probs", IN, N * V, gen_rows(T, N, V, -30, -1));
            add(&c, "targets", IN, N, gen_ints(T, N, p.V));
            both(T, &c, st);
        }
}

static void run_grad_norm(const backend *bk, float *const *d, const prm *p, result *r)
{
    double ss = 1.5; /* both are added to */
    uint64_t nf = 3;
    bk->grad_norm(bk, d[0], p->n, p->a, &ss, &nf);
    put(r, "sumsq", ss, sum_bound(p->hx, p->n, 1, p->a) + 1.5 * 0x1p-52);
    put(r, "nonfinite", (double)nf, 0.0);
}

/* Scaled gradients with and without specials; inverse scales 1, 2^-16 and 2^100 (unscaling
 * overflows: the norm is inf); a size that crosses the optimizer's block of 1024. */
static void cases_grad_norm(tctx *T, bk_rnd r, opstat *st)
{
    (void)r;
    static const float inv[] = {1.0f, 0x1p-16f, 0x1p100f};
    for (int s = 0; s <= NSIZES; s++)
        for (size_t k = 0; k < NELEM(inv); k++)
            for (int clean = 0; clean < 2; clean++) {
                size_t n = s < NSIZES ? SIZES[s] : 2 * 1024 + 9;
                prm p = {.n = n, .a = inv[k]};
                float *g = clean ? gen(T, n, 0, -30, 17) : gen_mix(T, n);
                p.hx = g;
                tcase c = mk(run_grad_norm, &p);
                add(&c, "g", IN, n, g);
                both(T, &c, st);
            }
}

/* ------------------------------------------------------------------------------- optimizer */

/* The optional outputs by p->omit: bit 0 leaves out the keep buffers, bit 1 the compute copy
 * (in o.copy_fmt) and the non-finite count (an untraced training step passes those alone). */
static void run_optim(const backend *bk, float *const *d, const prm *p, result *r)
{
    uint64_t nonfinite = 3; /* added to */
    int nokeep = p->omit & 1, nocopy = p->omit & 2;
    bk->optim_step(bk, &p->o, p->t, d[0], d[1], d[2], p->o.kind == BK_ADAMW ? d[3] : NULL, p->n,
                   p->lr, p->ginv, p->gscale, nokeep ? NULL : d[4], nokeep ? NULL : d[5],
                   nocopy ? NULL : d[6], nocopy ? NULL : &nonfinite);
    put(r, "nonfinite", (double)nonfinite, 0.0);
}

/* Weights and state in their formats; second moments tiny, some zero (with FP16 state eps is
 * 0 too: 0/0); gradients loss-scaled by 2^10, with specials. */
static void optim_case(tctx *T, opstat *st, const bk_optim *o, size_t n, long t, int omit)
{
    int keep = !(omit & 1);
    bk_rnd rw = bk_rnd_make(o->weight_fmt, o->round_flags);
    bk_rnd rs = bk_rnd_make(o->state_fmt, o->round_flags);
    prm p = {.n = n, .o = *o, .t = t, .lr = 1e-3, .ginv = 0x1p-10f, .gscale = keep ? 1.0f : 0.5f,
             .omit = omit};
    float *v = gen(T, n, 9, -40, -10);
    for (size_t i = 0; i < n; i++)
        v[i] = fabsf(v[i]);
    tcase c = mk(run_optim, &p);
    add(&c, "w", INOUT, n, round_all(gen(T, n, 19, -12, 3), n, rw));
    add(&c, "g", IN, n, gen(T, n, 11, -20, 20));
    add(&c, "m", INOUT, n, round_all(gen(T, n, 0, -20, -5), n, rs));
    add(&c, "v", INOUT, n, round_all(zero_every(v, n, 5), n, rs));
    add(&c, "dw_keep", OUT, n, NULL);
    add(&c, "w_keep", OUT, n, NULL);
    add(&c, "w_copy", OUT, n, NULL);
    both(T, &c, st);
}

/* One line per optimizer, state format, weight format and FTZ. */
static void test_optim(tctx *T)
{
    static const ampdiag_format sfs[3] = {AMPDIAG_FP32, AMPDIAG_FP16, AMPDIAG_BF16};
    static const ampdiag_format wfs[2] = {AMPDIAG_FP32, AMPDIAG_BF16};
    for (int kind = 0; kind < 2; kind++)
        for (int s = 0; s < 3; s++)
            for (int w = 0; w < 2; w++)
                for (unsigned ftz = 0; ftz < 2; ftz++) {
                    bk_optim o = {kind ? BK_ADAMW : BK_SGD, 0.9, 0.01, 0.9, 0.999, 1e-8,
                                  sfs[s], wfs[w], ftz, kind ? AMPDIAG_FP16 : AMPDIAG_BF16};
                    opstat st;
                    char label[96];
                    stat_begin(&st, T, "optim_step");
                    for (int k = 0; k <= NSIZES; k++)
                        for (long t = 1; t <= 3; t += 2)
                            for (int omit = 0; omit < 4; omit++)
                                optim_case(T, &st, &o, k < NSIZES ? SIZES[k] : 2 * 1024 + 9, t,
                                           omit);
                    snprintf(label, sizeof label, "optim_step %s, state %s, weights %s%s",
                             kind ? "AdamW" : "SGD", rnd_name(bk_rnd_make(sfs[s], 0)),
                             rnd_name(bk_rnd_make(wfs[w], 0)), ftz ? ", FTZ" : "");
                    report(&st, label);
                }
}

static void run_update_stats(const backend *bk, float *const *d, const prm *p, result *r)
{
    bk_update_stats s;
    ampdiag_hist h;
    memset(&s, 0, sizeof s);
    ampdiag_tstats_init(&s.weight);
    ampdiag_tstats_init(&s.update);
    s.weight.count = 12345; /* left alone */
    s.lost_updates = 5;     /* added to */
    s.lost_if_fp16 = 6;
    s.lost_if_bf16 = 7;
    ampdiag_hist_init(&h);
    bk->update_stats(bk, &p->o, d[0], d[1], p->n, &s, p->omit ? NULL : &h);
    put(r, "lost_updates", (double)s.lost_updates, 0.0);
    put(r, "lost_if_fp16", (double)s.lost_if_fp16, 0.0);
    put(r, "lost_if_bf16", (double)s.lost_if_bf16, 0.0);
    put(r, "weight.count", (double)s.weight.count, 0.0);
    put_tstats(r, &s.update, p->hx, p->n);
    if (!p->omit)
        put_hist(r, &h);
}

/* Updates 2^-2 .. 2^-30 of their weight (some lost in FP16, BF16, FP32), zeros, every fifth
 * of magnitude 2^-30 .. 2^0 whatever the weight (the weights hold zeros: an update of a zero
 * weight that the format flushes is lost), specials. */
static float *gen_updates(tctx *T, const float *w, size_t n)
{
    float *dw = gen(T, n, 17, -30, 0);
    for (size_t i = 0; i < n; i++) {
        if (i % 5 == 1)
            continue; /* keep the absolute ones and some specials, wherever they fell */
        float f = ldexpf(1.0f + (float)rng_uniform(&T->g), -2 - (int)rng_below(&T->g, 29));
        dw[i] = i % 7 == 0 ? 0.0f : (rng_next(&T->g) & 1) ? w[i] * f : -w[i] * f;
    }
    return dw;
}

static void update_stats_cases(tctx *T, opstat *st, const bk_optim *o)
{
    static const size_t more[] = {1024 + 9, 2 * 1024 + 7};
    bk_rnd rw = bk_rnd_make(o->weight_fmt, o->round_flags);
    for (int s = 0; s < NSIZES + (int)NELEM(more); s++)
        for (int nohist = 0; nohist < 2; nohist++) {
            size_t n = s < NSIZES ? SIZES[s] : more[s - NSIZES];
            prm p = {.n = n, .o = *o, .omit = nohist};
            float *w = round_all(zero_every(gen(T, n, 13, -26, 6), n, 4), n, rw);
            float *dw = gen_updates(T, w, n);
            p.hx = dw;
            tcase c = mk(run_update_stats, &p);
            add(&c, "w_old", IN, n, w);
            add(&c, "dw", IN, n, dw);
            both(T, &c, st);
        }
}

/* One TAP line per weight format and FTZ. */
static void test_update_stats(tctx *T)
{
    for (int f = 0; f < 3; f++)
        for (unsigned ftz = 0; ftz < 2; ftz++) {
            bk_optim o = {BK_ADAMW, 0.9, 0.01, 0.9, 0.999, 1e-8, AMPDIAG_FP32,
                          (ampdiag_format)f, ftz, AMPDIAG_FP32};
            opstat st;
            char label[64];
            stat_begin(&st, T, "update_stats");
            update_stats_cases(T, &st, &o);
            snprintf(label, sizeof label, "update_stats weights %s",
                     rnd_name(bk_rnd_make(o.weight_fmt, ftz)));
            report(&st, label);
        }
}

/* ------------------------------------------------------------------------------- memory, sync */

/* alloc zero-fills; to_device and to_host copy the bytes asked for, whole or from the middle
 * of a buffer, and nothing around them. Returns the number of wrong values. */
static long memory_case(tctx *T, const backend *bk, size_t n)
{
    size_t o = n / 3, m = (n - o + 1) / 2;
    long bad = 0;
    float *p = bk->alloc(bk, n * sizeof(float));
    if (!p)
        bail("the backend could not allocate a test buffer");
    float *got = hnew(T, (n + 2 * GUARD) * sizeof *got), *a = gen_mix(T, n), *b = gen_mix(T, m);
    float zero = 0.0f, sentinel = fbits(SENTINEL);
    bk->to_host(bk, got, p, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&got[i], &zero, sizeof zero) != 0;
    bk->to_device(bk, p, a, n * sizeof(float));
    bk->to_device(bk, p + o, b, m * sizeof(float));
    bk->to_host(bk, got, p, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&got[i], i >= o && i < o + m ? &b[i - o] : &a[i], sizeof(float)) != 0;
    for (size_t i = 0; i < m + 2 * GUARD; i++)
        got[i] = sentinel;
    bk->to_host(bk, got + GUARD, p + o, m * sizeof(float));
    for (size_t i = 0; i < m + 2 * GUARD; i++)
        bad += memcmp(&got[i], i >= GUARD && i < GUARD + m ? &b[i - GUARD] : &sentinel,
                      sizeof(float)) != 0;
    bk->free(bk, p);
    hfree(T);
    return bad;
}

static void test_memory(tctx *T, const backend *bk)
{
    long bad = 0;
    for (int s = 0; s < NSIZES; s++)
        bad += memory_case(T, bk, SIZES[s]);
    bk->free(bk, NULL);
    emit(bad == 0, NULL, "memory on %s: alloc zero-filled, whole and partial to_device / to_host exact "
       "and touching nothing else, free(NULL); %d sizes, %ld wrong values", bk->name, NSIZES, bad);
}

static void test_sync(const backend *bk)
{
    char err[64];
    memset(err, 'x', sizeof err);
    int rc = bk->sync(bk, err, sizeof err);
    emit(rc == 0 && err[0] == 0, NULL, "sync on %s after all the operations: 0 and no message", bk->name);
}

/* ------------------------------------------------------------------------------- the reference */

/* The CPU backend's portable code as a backend of its own: every entry calls the CPU backend's
 * entry (bk->ctx) with backend_cpu_force_generic(1) and the portable statistics kernel
 * (AMPDIAG_TSTATS_IMPL=generic, which ampdiag_tstats_impl() reads again; the force switch does
 * not reach src/numerics/tstats.c), then restores both. */
static char tstats_env[64];
static int tstats_env_saved;

static void tstats_generic(int on)
{
    int rc;
    if (on)
        rc = setenv("AMPDIAG_TSTATS_IMPL", "generic", 1);
    else if (tstats_env_saved)
        rc = setenv("AMPDIAG_TSTATS_IMPL", tstats_env, 1);
    else
        rc = unsetenv("AMPDIAG_TSTATS_IMPL");
    if (rc != 0)
        bail("cannot set AMPDIAG_TSTATS_IMPL");
    (void)ampdiag_tstats_impl(); /* reads the variable again */
}

static const backend *generic_begin(const backend *bk)
{
    backend_cpu_force_generic(1);
    tstats_generic(1);
    return bk->ctx;
}

static void generic_end(void)
{
    tstats_generic(0);
    backend_cpu_force_generic(0);
}

#define REF_VOID(op, PARAMS, ...)                                                               \
    static void ref_##op PARAMS                                                                 \
    {                                                                                           \
        const backend *in_ = generic_begin(bk);                                                 \
        in_->op(in_, __VA_ARGS__);                                                              \
        generic_end();                                                                          \
    }
#define REF_RET(type, op, PARAMS, ...)                                                          \
    static type ref_##op PARAMS                                                                 \
    {                                                                                           \
        const backend *in_ = generic_begin(bk);                                                 \
        type v_ = in_->op(in_, __VA_ARGS__);                                                    \
        generic_end();                                                                          \
        return v_;                                                                              \
    }

REF_RET(void *, alloc, (const backend *bk, size_t bytes), bytes)
REF_VOID(free, (const backend *bk, void *p), p)
REF_VOID(to_device, (const backend *bk, void *dst, const void *src, size_t bytes), dst, src, bytes)
REF_VOID(to_host, (const backend *bk, void *dst, const void *src, size_t bytes), dst, src, bytes)
REF_VOID(fill, (const backend *bk, float *x, float v, size_t n), x, v, n)
REF_VOID(scale, (const backend *bk, float *x, float a, size_t n), x, a, n)
REF_VOID(axpy, (const backend *bk, float *y, float beta, float a, const float *x, size_t n,
                bk_rnd r),
         y, beta, a, x, n, r)
REF_VOID(round, (const backend *bk, float *out, const float *in, size_t n, bk_rnd r), out, in, n, r)
REF_RET(double, sum, (const backend *bk, const float *x, size_t n), x, n)
REF_RET(double, sumsq, (const backend *bk, const float *x, size_t n), x, n)
REF_RET(size_t, count_nonfinite, (const backend *bk, const float *x, size_t n), x, n)
REF_VOID(tstats, (const backend *bk, const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h),
         x, n, s, h)
REF_VOID(gemm, (const backend *bk, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                int lda, const float *B, int ldb, float beta, float *C, int ldc, bk_rnd r),
         ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, r)
REF_VOID(bias_add, (const backend *bk, float *out, const float *bias, int N, int OC, bk_rnd r),
         out, bias, N, OC, r)
REF_VOID(bias_grad, (const backend *bk, float *dbias, const float *dout, int N, int OC, bk_rnd r),
         dbias, dout, N, OC, r)
REF_VOID(relu_fwd, (const backend *bk, float *out, const float *inp, size_t n, bk_rnd r), out, inp,
         n, r)
REF_VOID(relu_bwd, (const backend *bk, float *dinp, const float *inp, const float *dout, size_t n,
                    float beta, bk_rnd r),
         dinp, inp, dout, n, beta, r)
REF_VOID(gelu_fwd, (const backend *bk, float *out, const float *inp, size_t n, bk_rnd r), out, inp,
         n, r)
REF_VOID(gelu_bwd, (const backend *bk, float *dinp, const float *inp, const float *dout, size_t n,
                    float beta, bk_rnd r),
         dinp, inp, dout, n, beta, r)
REF_VOID(add_fwd, (const backend *bk, float *out, const float *a, const float *b, size_t n,
                   bk_rnd r),
         out, a, b, n, r)
REF_VOID(layernorm_fwd, (const backend *bk, float *out, float *mean, float *rstd, const float *inp,
                         const float *weight, const float *bias, int N, int C, bk_rnd r),
         out, mean, rstd, inp, weight, bias, N, C, r)
REF_VOID(layernorm_bwd, (const backend *bk, float *dinp, float *dweight, float *dbias,
                         const float *dout, const float *inp, const float *weight,
                         const float *mean, const float *rstd, int N, int C, float beta,
                         bk_rnd rx, bk_rnd rw),
         dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, beta, rx, rw)
REF_VOID(attention_fwd, (const backend *bk, float *out, float *att, float *att_r, const float *qkv,
                         int B, int T, int C, int NH, bk_rnd r),
         out, att, att_r, qkv, B, T, C, NH, r)
REF_VOID(attention_bwd, (const backend *bk, float *dqkv, float *scratch, const float *dout,
                         const float *qkv, const float *att, const float *att_r, int B, int T,
                         int C, int NH, bk_rnd r),
         dqkv, scratch, dout, qkv, att, att_r, B, T, C, NH, r)
REF_VOID(embed_fwd, (const backend *bk, float *out, const int32_t *tokens, const float *wte,
                     const float *wpe, int B, int T, int C, bk_rnd r),
         out, tokens, wte, wpe, B, T, C, r)
REF_VOID(embed_bwd, (const backend *bk, float *dwte, float *dwpe, const float *dout,
                     const int32_t *tokens, int B, int T, int C, int V, bk_rnd rw),
         dwte, dwpe, dout, tokens, B, T, C, V, rw)
REF_VOID(xent_fwd, (const backend *bk, float *losses, float *probs, const float *logits,
                    const int32_t *targets, int N, int V),
         losses, probs, logits, targets, N, V)
REF_VOID(xent_bwd, (const backend *bk, float *dlogits, const float *probs, const int32_t *targets,
                    int N, int V, float dscale, bk_rnd r),
         dlogits, probs, targets, N, V, dscale, r)
REF_VOID(grad_norm, (const backend *bk, const float *g, size_t n, float inv_scale, double *sumsq,
                     uint64_t *nonfinite),
         g, n, inv_scale, sumsq, nonfinite)
REF_VOID(optim_step, (const backend *bk, const bk_optim *c, long t, float *w, const float *g,
                      float *m, float *v, size_t n, double lr, float ginv, float gscale,
                      float *dw_keep, float *w_keep, float *w_copy, uint64_t *nonfinite),
         c, t, w, g, m, v, n, lr, ginv, gscale, dw_keep, w_keep, w_copy, nonfinite)
REF_VOID(update_stats, (const backend *bk, const bk_optim *c, const float *w_old, const float *dw,
                        size_t n, bk_update_stats *st, ampdiag_hist *hu),
         c, w_old, dw, n, st, hu)
REF_RET(int, count_at_least, (const backend *bk, const float *x, size_t n, size_t k, const uint32_t *ge,
                              uint64_t *counts),
        x, n, k, ge, counts)
REF_RET(int, tstats_ge, (const backend *bk, const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h, size_t k,
                         const uint32_t *ge, uint64_t *counts),
        x, n, s, h, k, ge, counts)
REF_RET(int, whatif_scaled, (const backend *bk, size_t nfmt, const ampdiag_format *fmt, const float *scale,
                             const float *x, size_t n, uint64_t (*counts)[AMPDIAG_WHATIF_NCLASSES]),
        nfmt, fmt, scale, x, n, counts)
REF_RET(int, quant_whatif, (const backend *bk, const float *x, size_t n, size_t rows, size_t cols, float amax,
                            size_t nspec, const ampdiag_qspec *spec, ampdiag_qstats *out),
        x, n, rows, cols, amax, nspec, spec, out)
REF_RET(int, sync, (const backend *bk, char *err, size_t errlen), err, errlen)

const backend *opcheck_reference(void)
{
    static backend ref = {
        .name = "cpu-generic",
        .desc = "CPU, portable code (the reference)",
        .alloc = ref_alloc,
        .free = ref_free,
        .to_device = ref_to_device,
        .to_host = ref_to_host,
        .fill = ref_fill,
        .scale = ref_scale,
        .axpy = ref_axpy,
        .round = ref_round,
        .sum = ref_sum,
        .sumsq = ref_sumsq,
        .count_nonfinite = ref_count_nonfinite,
        .tstats = ref_tstats,
        .count_at_least = ref_count_at_least,
        .tstats_ge = ref_tstats_ge,
        .whatif_scaled = ref_whatif_scaled,
        .quant_whatif = ref_quant_whatif,
        .gemm = ref_gemm,
        .bias_add = ref_bias_add,
        .bias_grad = ref_bias_grad,
        .relu_fwd = ref_relu_fwd,
        .relu_bwd = ref_relu_bwd,
        .gelu_fwd = ref_gelu_fwd,
        .gelu_bwd = ref_gelu_bwd,
        .add_fwd = ref_add_fwd,
        .layernorm_fwd = ref_layernorm_fwd,
        .layernorm_bwd = ref_layernorm_bwd,
        .attention_fwd = ref_attention_fwd,
        .attention_bwd = ref_attention_bwd,
        .embed_fwd = ref_embed_fwd,
        .embed_bwd = ref_embed_bwd,
        .xent_fwd = ref_xent_fwd,
        .xent_bwd = ref_xent_bwd,
        .grad_norm = ref_grad_norm,
        .optim_step = ref_optim_step,
        .update_stats = ref_update_stats,
        .sync = ref_sync,
    };
    const char *e = getenv("AMPDIAG_TSTATS_IMPL");
    if (e && strlen(e) < sizeof tstats_env) {
        strcpy(tstats_env, e);
        tstats_env_saved = 1;
    }
    ref.ctx = (void *)backend_cpu();
    return &ref;
}

/* ------------------------------------------------------------------------------- stand-ins */

static double perturb_; /* a relative error added to the stand-ins' outputs (the mutation runs) */

static float bump(float x) { return perturb_ != 0.0 && isfinite(x) ? (float)((double)x * (1.0 + perturb_)) : x; }

/* ------------------------------------------------------------------------------- a reordered GEMM */

/* C = rnd(alpha op(A) op(B) + beta C) with each output's products added in float32 from the last
 * to the first: the same contract as the CPU's cblas_sgemm, another summation order. */
static void reordered_gemm(const backend *bk, int ta, int tb, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta, float *C,
                           int ldc, bk_rnd r)
{
    (void)bk;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = K - 1; k >= 0; k--)
                acc += A[ta ? (size_t)k * lda + i : (size_t)i * lda + k]
                       * B[tb ? (size_t)j * ldb + k : (size_t)k * ldb + j];
            float *c = &C[(size_t)i * ldc + j];
            float v = alpha * acc;
            if (beta != 0.0f)
                v += beta * *c;
            *c = bump(hround(r, v));
        }
}

/* ------------------------------------------------------------------------------- a reordered attention */

/* sum of x[k sx] y[k sy] over k < n in float32, from the last term to the first. */
static float rev_dot(const float *x, size_t sx, const float *y, size_t sy, int n)
{
    float acc = 0.0f;
    for (int k = n - 1; k >= 0; k--)
        acc += x[(size_t)k * sx] * y[(size_t)k * sy];
    return acc;
}

/* attention_fwd as backend.h defines it, its products added in reverse order over whole
 * matrices (the masked scores too, as cuBLAS does), the softmax the kernels' own body. */
static void reordered_attention_fwd(const backend *bk, float *out, float *att, float *att_r, const float *qkv,
                                    int B, int T, int C, int NH, bk_rnd r)
{
    (void)bk;
    int hs = C / NH, rk = ck_rnd_kind(r.fmt, r.flags);
    size_t C3 = 3 * (size_t)C, Tn = (size_t)T;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * Tn * C3 + (size_t)h * (size_t)hs, *k = q + C, *v = q + 2 * (size_t)C;
            size_t off = ((size_t)b * (size_t)NH + (size_t)h) * Tn * Tn;
            float *p = att + off, *pr = att_r + off;
            for (size_t t = 0; t < Tn; t++)
                for (size_t j = 0; j < Tn; j++)
                    p[t * Tn + j] = rev_dot(q + t * C3, 1, k + j * C3, 1, hs) * scale;
            for (size_t t = 0; t < Tn; t++)
                ck_softmax_row(p, pr, T, t, rk);
            for (size_t t = 0; t < Tn; t++)
                for (int d = 0; d < hs; d++)
                    out[((size_t)b * Tn + t) * (size_t)C + (size_t)h * (size_t)hs + (size_t)d] =
                        bump(hround(r, rev_dot(pr + t * Tn, 1, v + d, C3, T)));
        }
}

/* attention_bwd likewise: dP = dY V^T, dV = P^T dY, dS (the kernels' body), dQ = dS K scaled,
 * dK = dS^T Q scaled, each product added in reverse order over whole matrices. */
static void reordered_attention_bwd(const backend *bk, float *dqkv, float *scratch, const float *dout,
                                    const float *qkv, const float *att, const float *att_r, int B, int T, int C,
                                    int NH, bk_rnd r)
{
    (void)bk;
    int hs = C / NH, rk = ck_rnd_kind(r.fmt, r.flags);
    size_t C3 = 3 * (size_t)C, Tn = (size_t)T, Cn = (size_t)C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            size_t qo = (size_t)b * Tn * C3 + (size_t)h * (size_t)hs, off = ((size_t)b * (size_t)NH + (size_t)h) * Tn * Tn;
            const float *q = qkv + qo, *k = q + C, *v = q + 2 * Cn;
            const float *dy = dout + (size_t)b * Tn * Cn + (size_t)h * (size_t)hs, *P = att + off, *Pr = att_r + off;
            float *dq = dqkv + qo, *dk = dq + C, *dv = dq + 2 * Cn, *ds = scratch + off;
            for (size_t t = 0; t < Tn; t++)
                for (size_t j = 0; j < Tn; j++)
                    ds[t * Tn + j] = rev_dot(dy + t * Cn, 1, v + j * C3, 1, hs);
            for (size_t j = 0; j < Tn; j++)
                for (int d = 0; d < hs; d++)
                    dv[j * C3 + (size_t)d] = bump(hround(r, rev_dot(Pr + j, Tn, dy + d, Cn, T)));
            for (size_t t = 0; t < Tn; t++)
                ck_softmax_bwd_row(ds, P, T, t, rk);
            for (size_t t = 0; t < Tn; t++)
                for (int d = 0; d < hs; d++)
                    dq[t * C3 + (size_t)d] = bump(hround(r, rev_dot(ds + t * Tn, 1, k + d, C3, T) * scale));
            for (size_t j = 0; j < Tn; j++)
                for (int d = 0; d < hs; d++)
                    dk[j * C3 + (size_t)d] = bump(hround(r, rev_dot(ds + j, Tn, q + d, C3, T) * scale));
        }
}

/* ------------------------------------------------------------------------------- the runs */

typedef struct op_entry {
    const char *op;
    cases_fn fn;
    int formats; /* one line per rounding format (else one line) */
    size_t slot; /* the entry's offset in the table: an optional one may be NULL */
    int optional;
} op_entry;

#define OP(name, fmts) {#name, cases_##name, fmts, offsetof(backend, name), 0}
#define OPT(name, fmts) {#name, cases_##name, fmts, offsetof(backend, name), 1}

static const op_entry ops[] = {
    OP(fill, 0),
    OP(scale, 0),
    OP(axpy, 1),
    OP(round, 1),
    OP(sum, 0),
    OP(sumsq, 0),
    OP(count_nonfinite, 0),
    OP(tstats, 0),
    OPT(tstats_many, 0),
    OPT(whatif_scaled, 0),
    OPT(count_at_least, 0),
    OPT(count_at_least_many, 0),
    OPT(tstats_ge, 0),
    OPT(quant_whatif, 0),
    OP(gemm, 1),
    OP(bias_add, 1),
    OP(bias_grad, 1),
    OP(relu_fwd, 1),
    OP(relu_bwd, 1),
    OP(gelu_fwd, 1),
    OP(gelu_bwd, 1),
    OP(add_fwd, 1),
    OP(layernorm_fwd, 1),
    OP(layernorm_bwd, 1),
    OP(attention_fwd, 1),
    OP(attention_bwd, 1),
    OP(embed_fwd, 1),
    OP(embed_bwd, 1),
    OP(xent_fwd, 0),
    OP(xent_bwd, 1),
    OP(grad_norm, 0),
    OPT(update_stats_many, 0),
};

/* The entries checked by tests of their own in all_ops (memory, the optimizer, the update
 * statistics, the fence), and the one that is itself a check. */
static const char *const other_ops[] = {"alloc", "free", "to_device", "to_host", "optim_step", "update_stats",
                                        "sync", "self_check"};

const char *opcheck_covered(int i)
{
    if (i < 0)
        return NULL;
    if ((size_t)i < NELEM(ops))
        return ops[i].op;
    i -= (int)NELEM(ops);
    return (size_t)i < NELEM(other_ops) ? other_ops[i] : NULL;
}

/* Whether bk has entry e (an optional entry may be NULL). */
static int has_op(const backend *bk, const op_entry *e)
{
    void *fn;
    memcpy(&fn, (const char *)bk + e->slot, sizeof fn);
    return fn != NULL;
}

/* Runs fn(T) with its lines to o: the failures counted, or -1 with the reason in err when it had
 * to stop (bail). The host data of the case under way is freed then; its device buffers are not. */
static int guarded(tctx *T, void (*fn)(tctx *T), const opcheck_out *o, char *err, size_t errlen)
{
    out_ = o;
    failed_ = 0;
    if (setjmp(bail_to_)) {
        hfree(T);
        snprintf(err, errlen, "%s", bail_why_);
        return -1;
    }
    fn(T);
    return failed_;
}

static void all_ops(tctx *T)
{
    diag("under test: %s (%s); reference: %s (%s)", T->ut->name, T->ut->desc, T->ref->name,
         T->ref->desc);
    test_memory(T, T->ut);
    test_memory(T, T->ref);
    for (size_t i = 0; i < NELEM(ops); i++) {
        int many = strcmp(ops[i].op, "tstats_many") == 0 || strcmp(ops[i].op, "update_stats_many") == 0 ||
                   strcmp(ops[i].op, "count_at_least_many") == 0;
        if (!has_op(T->ut, &ops[i]) && !many) /* (the _many entries fall back to a loop: checked either way) */
            emit(1, NULL, "%s: not provided by %s (optional: its callers do without it)", ops[i].op, T->ut->name);
        else if (!has_op(T->ref, &ops[i]) && !many)
            emit(1, NULL, "%s: the reference has none to compare with", ops[i].op);
        else
            (ops[i].formats ? per_format : once)(T, ops[i].op, ops[i].fn);
    }
    test_optim(T);
    test_update_stats(T);
    test_sync(T->ut);
    test_sync(T->ref);
}

int opcheck_run(const backend *under_test, const backend *ref, const opcheck_out *o, char *err,
                size_t errlen)
{
    tctx T;
    memset(&T, 0, sizeof T);
    T.ut = under_test;
    T.ref = ref;
    T.g = rng_seed(0x6261636b656e64ull);
    return guarded(&T, all_ops, o, err, errlen);
}

static void reordered_ops(tctx *T)
{
    diag("under test: %s (%s); reference: %s (%s)", T->ut->name, T->ut->desc, T->ref->name,
         T->ref->desc);
    per_format(T, "gemm", cases_gemm);
    per_format(T, "attention_fwd", cases_attention_fwd);
    per_format(T, "attention_bwd", cases_attention_bwd);
}

int opcheck_reordered(const backend *ref, double perturb, const opcheck_out *o, char *err, size_t errlen)
{
    static backend b;
    b = *backend_cpu();
    b.name = "cpu-reordered";
    b.desc = perturb != 0.0 ? "CPU, products added in reverse order, outputs off by a relative error"
                            : "CPU, GEMM and attention products added in reverse order";
    b.gemm = reordered_gemm;
    b.attention_fwd = reordered_attention_fwd;
    b.attention_bwd = reordered_attention_bwd;
    tctx T;
    memset(&T, 0, sizeof T);
    T.ut = &b;
    T.ref = ref;
    T.g = rng_seed(0x72656f72646572ull);
    perturb_ = perturb;
    int rc = guarded(&T, reordered_ops, o, err, errlen);
    perturb_ = 0.0;
    return rc;
}
