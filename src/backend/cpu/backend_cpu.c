/*
 * backend_cpu.c - the CPU backend: C loops for the elementwise and normalisation operations,
 * CBLAS sgemm for the GEMMs, and exact FP16/BF16 emulation (numfmt.h) in each operation's
 * output loop.
 *
 * Rounding. Every kernel is an always-inline function whose last argument is the rounding
 * function; WITH_RND calls it once per rounding kind, so each kind gets its own compiled loop
 * with the rounding inlined (no call per element, no branch on the format). Where the CPU has
 * them, FP16 rounding uses the F16C conversion instructions and BF16 rounding AVX2 integer
 * code, 8 values at a time (both bit-identical to numfmt.h for all 2^32 inputs, with and
 * without FTZ: tests/t_layers.c, AMPDIAG_EXHAUSTIVE=1). Then WITH_RND_OUT runs the kernel's
 * FP32 loop and then rounds its output in a second, vector pass (from cache where the output
 * fits in it); a kernel that
 * accumulates (y = R(y + R(g))) keeps the scalar fused rounding, since its two roundings
 * cannot be moved after the loop. AMPDIAG_ROUND_IMPL=generic (or backend_cpu_force_generic)
 * selects the portable code everywhere.
 *
 * Everything is single-threaded C except sgemm (OpenBLAS threads); every reduction runs in a
 * fixed order, so the same inputs give the same bits.
 */
#include "config.h"
#include "backend/backend.h"
#include "backend/cpu/cpu_internal.h"
#include "numerics/vmath.h"
#include "numerics/numfmt.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BK_X86 1
#endif

#define KERNEL static inline __attribute__((always_inline))

typedef float (*rnd_fn)(float);

static inline float rnd_none(float x) { return x; }
static inline float rnd_fp16(float x) { return ampdiag_fp16_rne(x); }
static inline float rnd_fp16_ftz(float x) { return ampdiag_fp16_rne_ftz(x); }
static inline float rnd_bf16(float x) { return ampdiag_bf16_rne(x); }
static inline float rnd_bf16_ftz(float x) { return ampdiag_bf16_rne_ftz(x); }

/*
 * The same roundings written without branches, so that a loop calling them vectorises (the
 * selects become blends): used in the output loops of the vector code paths, where they replace
 * a second pass over the output. The same bits as numfmt.h for all 2^32 inputs, with and without
 * FTZ (tests/t_layers.c, AMPDIAG_EXHAUSTIVE=1). FP16: a normal result rounds the float32
 * mantissa to 10 bits in integer arithmetic (a carry moves into the exponent, and the threshold
 * test sends what would pass 65504 to inf); a subnormal one is |x| rounded to a multiple of
 * 2^-24, which the float addition |x| + 0.5 does exactly (its ulp there is 2^-24); a NaN is
 * quieted with its top 9 payload bits kept, as F16C does.
 */
KERNEL float rnd_fp16_v(float x)
{
    uint32_t u = ampdiag_f32_bits(x), a = u & 0x7fffffffu, s = u & 0x80000000u;
    uint32_t normal = (u + 0x0fffu + ((u >> 13) & 1u)) & 0xffffe000u;
    uint32_t sub = ampdiag_f32_bits((fabsf(x) + 0.5f) - 0.5f) | s;
    uint32_t r = a < 0x38800000u ? sub : normal;
    r = a >= AMPDIAG_FP16_OVF_BITS ? (s | AMPDIAG_F32_INF) : r;
    r = a > AMPDIAG_F32_INF ? ((u | 0x00400000u) & 0xffffe000u) : r;
    return ampdiag_f32_from_bits(r);
}

KERNEL float rnd_fp16_ftz_v(float x)
{
    uint32_t r = ampdiag_f32_bits(rnd_fp16_v(x));
    return ampdiag_f32_from_bits((r & 0x7fffffffu) < 0x38800000u ? (r & 0x80000000u) : r);
}

KERNEL float rnd_bf16_v(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    r = (u & 0x7fffffffu) > AMPDIAG_F32_INF ? ((u | 0x00400000u) & 0xffff0000u) : r;
    return ampdiag_f32_from_bits(r);
}

KERNEL float rnd_bf16_ftz_v(float x)
{
    uint32_t u = ampdiag_f32_bits(x);
    float r = rnd_bf16_v(x);
    return (u & 0x7fffffffu) < AMPDIAG_F32_MIN_NORMAL ? ampdiag_f32_from_bits(u & 0x80000000u) : r;
}

enum { RK_NONE, RK_FP16, RK_FP16_FTZ, RK_BF16, RK_BF16_FTZ };

static int rnd_kind(bk_rnd r)
{
    int ftz = (r.flags & AMPDIAG_ROUND_FTZ) != 0;
    switch (r.fmt) {
    case AMPDIAG_FP16: return ftz ? RK_FP16_FTZ : RK_FP16;
    case AMPDIAG_BF16: return ftz ? RK_BF16_FTZ : RK_BF16;
    default: return RK_NONE;
    }
}

/* KERNEL_FN(args..., R) with R the rounding function for r. */
#define WITH_RND(r, KERNEL_FN, ...)                                                             \
    do {                                                                                        \
        switch (rnd_kind(r)) {                                                                  \
        case RK_FP16: KERNEL_FN(__VA_ARGS__, rnd_fp16); break;                                  \
        case RK_FP16_FTZ: KERNEL_FN(__VA_ARGS__, rnd_fp16_ftz); break;                          \
        case RK_BF16: KERNEL_FN(__VA_ARGS__, rnd_bf16); break;                                  \
        case RK_BF16_FTZ: KERNEL_FN(__VA_ARGS__, rnd_bf16_ftz); break;                          \
        default: KERNEL_FN(__VA_ARGS__, rnd_none); break;                                       \
        }                                                                                       \
    } while (0)

/* WITH_RND with the branch-free roundings (the vector code paths). */
#define WITH_RND_V(r, KERNEL_FN, ...)                                                           \
    do {                                                                                        \
        switch (rnd_kind(r)) {                                                                  \
        case RK_FP16: KERNEL_FN(__VA_ARGS__, rnd_fp16_v); break;                                \
        case RK_FP16_FTZ: KERNEL_FN(__VA_ARGS__, rnd_fp16_ftz_v); break;                        \
        case RK_BF16: KERNEL_FN(__VA_ARGS__, rnd_bf16_v); break;                                \
        case RK_BF16_FTZ: KERNEL_FN(__VA_ARGS__, rnd_bf16_ftz_v); break;                        \
        default: KERNEL_FN(__VA_ARGS__, rnd_none); break;                                       \
        }                                                                                       \
    } while (0)

/* The BF16 cases of WITH_RND_V alone (what WITH_RND_OUT instantiates: fewer copies of each
 * kernel, so that the compiler still inlines what the kernels call). */
#define WITH_RND_BF16_V(r, KERNEL_FN, ...)                                                      \
    do {                                                                                        \
        if (rnd_kind(r) == RK_BF16_FTZ)                                                         \
            KERNEL_FN(__VA_ARGS__, rnd_bf16_ftz_v);                                             \
        else                                                                                    \
            KERNEL_FN(__VA_ARGS__, rnd_bf16_v);                                                 \
    } while (0)

/* ------------------------------------------------------------------------------- SIMD rounding */

enum { SIMD_F16C = 1, SIMD_AVX2 = 2 };
static atomic_int simd_detected = -1; /* what the CPU has (and AMPDIAG_ROUND_IMPL allows) */
static atomic_int simd_forced_off;

void backend_cpu_force_generic(int on) { atomic_store(&simd_forced_off, on != 0); }

int cpu_simd_forced_off(void)
{
    return atomic_load_explicit(&simd_forced_off, memory_order_relaxed);
}

static int simd_caps(void)
{
    if (atomic_load_explicit(&simd_detected, memory_order_relaxed) < 0) {
        int caps = 0;
#ifdef BK_X86
        const char *want = getenv("AMPDIAG_ROUND_IMPL");
        if (!(want && strcmp(want, "generic") == 0)) {
            if (__builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c"))
                caps |= SIMD_F16C;
            if (__builtin_cpu_supports("avx2"))
                caps |= SIMD_AVX2;
        }
#endif
        atomic_store(&simd_detected, caps); /* every thread computes the same value */
    }
    if (cpu_simd_forced_off())
        return 0;
    return atomic_load_explicit(&simd_detected, memory_order_relaxed);
}

const char *backend_cpu_round_impl(void)
{
    static const char *const names[4] = {"generic", "f16c", "avx2", "f16c+avx2"};
    int caps = simd_caps() & 3;
    return caps == 3 && (ampdiag_round_simd_caps() & 4) ? "avx512f" : names[caps];
}

/* Can round_simd handle r? */
static int simd_can(bk_rnd r)
{
    int caps = simd_caps();
    return (r.fmt == AMPDIAG_FP16 && (caps & SIMD_F16C))
           || (r.fmt == AMPDIAG_BF16 && (caps & SIMD_AVX2));
}

/* x[0..n) := rnd(x) with the vector code of ampdiag_round_array (callers checked simd_can). */
static void round_simd(float *x, size_t n, bk_rnd r)
{
    ampdiag_round_array(r.fmt, r.flags, x, x, n);
}

/* KERNEL_FN with rounding r applied to every value it writes to out[0..n). With the vector
 * code: BF16 rounded in the kernel's own loop (branch-free, a few integer operations per
 * vector), FP16 by the FP32 loop then a pass of F16C conversions (cheaper than the integer
 * form); else the fused scalar rounding. Only for kernels that write each output once, as
 * R(value). */
#define WITH_RND_OUT(r, out, n, KERNEL_FN, ...)                                                 \
    do {                                                                                        \
        if (simd_can(r) && (r).fmt == AMPDIAG_BF16) {                                           \
            WITH_RND_BF16_V(r, KERNEL_FN, __VA_ARGS__);                                         \
        } else if (simd_can(r)) {                                                               \
            KERNEL_FN(__VA_ARGS__, rnd_none);                                                   \
            round_simd((out), (n), (r));                                                        \
        } else {                                                                                \
            WITH_RND(r, KERNEL_FN, __VA_ARGS__);                                                \
        }                                                                                       \
    } while (0)

/* Accumulating outputs: dst = R(dst + R(g)), the contribution g computed by the caller into a
 * small scratch chunk (ACC_CHUNK values, in L1). */
#define ACC_CHUNK 512

KERNEL void acc_k(float *dst, const float *g, size_t n, rnd_fn R)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = R(dst[i] + R(g[i]));
}

/* g is overwritten. */
static void emit_acc(float *dst, float *g, size_t n, bk_rnd r)
{
    if (simd_can(r)) {
        round_simd(g, n, r);
        for (size_t i = 0; i < n; i++)
            dst[i] += g[i];
        round_simd(dst, n, r);
    } else {
        WITH_RND(r, acc_k, dst, g, n);
    }
}

/* ------------------------------------------------------------------------------- memory */

static void *cpu_alloc(const backend *bk, size_t bytes)
{
    (void)bk;
    void *p = NULL;
    size_t n = bytes ? (bytes + 63u) & ~(size_t)63u : 64u;
    if (n < bytes || posix_memalign(&p, 64, n) != 0)
        return NULL;
    memset(p, 0, n);
    return p;
}

static void cpu_free(const backend *bk, void *p)
{
    (void)bk;
    free(p);
}

static void cpu_copy(const backend *bk, void *dst, const void *src, size_t bytes)
{
    (void)bk;
    if (bytes)
        memmove(dst, src, bytes);
}

/* ------------------------------------------------------------------------------- buffers */

static void cpu_fill(const backend *bk, float *x, float v, size_t n)
{
    (void)bk;
    for (size_t i = 0; i < n; i++)
        x[i] = v;
}

static void cpu_scale(const backend *bk, float *x, float a, size_t n)
{
    (void)bk;
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}

KERNEL void axpy_k(float *y, float a, const float *x, size_t n, rnd_fn R)
{
    for (size_t i = 0; i < n; i++)
        y[i] = R(a * x[i]);
}

CPU_CLONES
static void cpu_axpy(const backend *bk, float *y, float beta, float a, const float *x, size_t n,
                     bk_rnd r)
{
    if (beta == 0.0f) {
        WITH_RND_OUT(r, y, n, axpy_k, y, a, x, n);
        return;
    }
    if (beta != 1.0f)
        cpu_scale(bk, y, beta, n);
    float g[ACC_CHUNK];
    for (size_t i = 0; i < n; i += ACC_CHUNK) {
        size_t k = n - i < ACC_CHUNK ? n - i : ACC_CHUNK;
        axpy_k(g, a, x + i, k, rnd_none);
        emit_acc(y + i, g, k, r);
    }
}

KERNEL void round_k(float *out, const float *in, size_t n, rnd_fn R)
{
    for (size_t i = 0; i < n; i++)
        out[i] = R(in[i]);
}

void cpu_round(const backend *bk, float *out, const float *in, size_t n, bk_rnd r)
{
    (void)bk;
    if (rnd_kind(r) == RK_NONE) {
        if (out != in)
            memmove(out, in, n * sizeof *out);
        return;
    }
    if (simd_can(r)) { /* one pass from in to out (no copy first) */
        ampdiag_round_array(r.fmt, r.flags, in, out, n);
        return;
    }
    WITH_RND(r, round_k, out, in, n);
}

/* Round the rows x cols block of a matrix with row stride ld. */
KERNEL void round_block_k(float *c, int rows, int cols, int ld, rnd_fn R)
{
    for (int i = 0; i < rows; i++) {
        float *row = c + (size_t)i * (size_t)ld;
        for (int j = 0; j < cols; j++)
            row[j] = R(row[j]);
    }
}

/* Rows narrower than this (an attention head's 16 columns) are rounded by the branch-free loop
 * rather than a call of the vector pass per row. */
#define NARROW_ROW 64

CPU_CLONES
static void round_narrow_rows(float *c, int rows, int cols, int ld, bk_rnd r)
{
    WITH_RND_V(r, round_block_k, c, rows, cols, ld);
}

static void round_block(float *c, int rows, int cols, int ld, bk_rnd r)
{
    if (rnd_kind(r) == RK_NONE)
        return;
    if (simd_can(r)) {
        if (ld == cols && (size_t)rows * (size_t)cols >= NARROW_ROW)
            round_simd(c, (size_t)rows * (size_t)cols, r);
        else if (cols < NARROW_ROW)
            round_narrow_rows(c, rows, cols, ld, r);
        else
            for (int i = 0; i < rows; i++)
                round_simd(c + (size_t)i * (size_t)ld, (size_t)cols, r);
        return;
    }
    WITH_RND(r, round_block_k, c, rows, cols, ld);
}

/* ------------------------------------------------------------------------------- reductions */

static double cpu_sum(const backend *bk, const float *x, size_t n)
{
    (void)bk;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i];
    return s;
}

static double cpu_sumsq(const backend *bk, const float *x, size_t n)
{
    (void)bk;
    /* four partial sums: fixed order, so deterministic, and vectorisable */
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++)
            s[k] += (double)x[i + k] * (double)x[i + k];
    for (; i < n; i++)
        s[0] += (double)x[i] * (double)x[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* (the training loop's check of every weight after each update: a pass over all parameters,
 * in 32-bit lane counts so that it vectorises) */
CPU_CLONES
size_t cpu_count_nonfinite(const backend *bk, const float *x, size_t n)
{
    (void)bk;
    size_t c = 0;
    for (size_t b = 0; b < n; b += 1u << 20) {
        size_t k = n - b < (1u << 20) ? n - b : (1u << 20);
        uint32_t cb = 0;
        for (size_t i = 0; i < k; i++)
            cb += (ampdiag_f32_bits(x[b + i]) & 0x7f800000u) == 0x7f800000u;
        c += cb;
    }
    return c;
}

static void cpu_tstats(const backend *bk, const float *x, size_t n, ampdiag_tstats *s,
                       ampdiag_hist *h)
{
    (void)bk;
    ampdiag_tstats_compute(x, n, s, h);
}

static int cpu_whatif_scaled(const backend *bk, size_t nfmt, const ampdiag_format *fmt, const float *scale,
                             const float *x, size_t n, uint64_t (*counts)[AMPDIAG_WHATIF_NCLASSES])
{
    (void)bk;
    return ampdiag_whatif_scaled_n(nfmt, fmt, scale, x, n, counts);
}

static int cpu_count_at_least(const backend *bk, const float *x, size_t n, size_t k, const uint32_t *ge,
                              uint64_t *counts)
{
    (void)bk;
    return ampdiag_count_at_least(x, n, k, ge, counts);
}

/* One request after another (the FP8 counts' batched path, which a device needs, runs on the
 * CPU as well: the traces show it gives the counts of the tensor-by-tensor one). */
static int cpu_count_at_least_many(const backend *bk, size_t k, const bk_ge_req *req)
{
    for (size_t i = 0; i < k; i++)
        if (cpu_count_at_least(bk, req[i].x, req[i].n, req[i].k, req[i].ge, req[i].counts) != 0)
            return -1;
    return 0;
}

static int cpu_quant_whatif(const backend *bk, const float *x, size_t n, size_t rows, size_t cols, float amax,
                            size_t nspec, const ampdiag_qspec *spec, ampdiag_qstats *out)
{
    (void)bk;
    return ampdiag_quant_whatif(x, n, rows, cols, amax, nspec, spec, out);
}

static int cpu_tstats_ge(const backend *bk, const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h, size_t k,
                         const uint32_t *ge, uint64_t *counts)
{
    (void)bk;
    return ampdiag_tstats_compute_ge(x, n, s, h, k, ge, counts);
}

/* ------------------------------------------------------------------------------- GEMM */

/* Rows of C per sgemm call for a large output: about GEMM_CHUNK values (1 MiB), so that
 * OpenBLAS's zeroing of C for beta 0, its kernel's accumulation and the rounding pass all find
 * the chunk in cache (a width-2048 weight gradient is 16 MiB). A multiple of 16 rows (the
 * widest sgemm kernel's rows). With OpenBLAS's blocked kernels each row of C is the same dot
 * products in the same order, so the chunks give the bits of one call (traces of the mlp,
 * transformer and width-2048 models compared dataset by dataset before and after); a BLAS that
 * chose another kernel by the call's size (a small-matrix path for a chunk with tiny K) could
 * add in another order: the runs would then differ from unchunked ones by GEMM rounding only. */
#define GEMM_CHUNK (256 * 1024)

static int gemm_chunk_rows(int M, int N)
{
    if ((size_t)M * (size_t)N <= GEMM_CHUNK)
        return M;
    int rows = GEMM_CHUNK / N / 16 * 16;
    return rows < 16 ? 16 : rows;
}

static void cpu_gemm(const backend *bk, int ta, int tb, int M, int N, int K, float alpha,
                     const float *A, int lda, const float *B, int ldb, float beta, float *C,
                     int ldc, bk_rnd r)
{
    (void)bk;
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) { /* C = beta*C; BLAS implementations disagree on K == 0 */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float *c = C + (size_t)i * (size_t)ldc + j;
                *c = beta == 0.0f ? 0.0f : beta * *c;
            }
        round_block(C, M, N, ldc, r);
        return;
    }
    int rows = gemm_chunk_rows(M, N);
    for (int i = 0; i < M; i += rows) {
        int m = M - i < rows ? M - i : rows;
        const float *Ai = ta ? A + i : A + (size_t)i * (size_t)lda; /* rows i.. of op(A) */
        float *Ci = C + (size_t)i * (size_t)ldc;
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    m, N, K, alpha, Ai, lda, B, ldb, beta, Ci, ldc);
        round_block(Ci, m, N, ldc, r);
    }
}

/* ------------------------------------------------------------------------------- linear */

KERNEL void bias_add_k(float *out, const float *bias, int N, int OC, rnd_fn R)
{
    for (int n = 0; n < N; n++) {
        float *o = out + (size_t)n * (size_t)OC; /* [OC] */
        for (int j = 0; j < OC; j++)
            o[j] = R(o[j] + bias[j]);
    }
}

CPU_CLONES
static void cpu_bias_add(const backend *bk, float *out, const float *bias, int N, int OC,
                         bk_rnd r)
{
    (void)bk;
    if (bias)
        WITH_RND_OUT(r, out, (size_t)N * (size_t)OC, bias_add_k, out, bias, N, OC);
    else
        round_block(out, N, OC, OC, r);
}

static void cpu_bias_grad(const backend *bk, float *dbias, const float *dout, int N, int OC,
                          bk_rnd r)
{
    (void)bk;
    for (int j = 0; j < OC; j++)
        dbias[j] = 0.0f;
    for (int n = 0; n < N; n++) {
        const float *d = dout + (size_t)n * (size_t)OC; /* [OC] */
        for (int j = 0; j < OC; j++)
            dbias[j] += d[j];
    }
    round_block(dbias, 1, OC, OC, r);
}

/* ------------------------------------------------------------------------------- elementwise */

KERNEL void relu_fwd_k(float *out, const float *inp, size_t n, rnd_fn R)
{
    for (size_t i = 0; i < n; i++)
        out[i] = R(!(inp[i] <= 0.0f) ? inp[i] : 0.0f); /* NaN stays NaN, as torch.relu */
}

CPU_CLONES
static void cpu_relu_fwd(const backend *bk, float *out, const float *inp, size_t n, bk_rnd r)
{
    (void)bk;
    WITH_RND_OUT(r, out, n, relu_fwd_k, out, inp, n);
}

KERNEL void relu_bwd_k(float *dinp, const float *inp, const float *dout, size_t n, rnd_fn R)
{
    for (size_t i = 0; i < n; i++) {
        float d = dout[i]; /* loaded unconditionally: the loop then vectorises */
        /* as PyTorch's threshold_backward: no gradient where the input is <= 0; a NaN input
         * passes the gradient through (NaN <= 0 is false), so NaN propagates */
        dinp[i] = R(!(inp[i] <= 0.0f) ? d : 0.0f);
    }
}

CPU_CLONES
static void cpu_relu_bwd(const backend *bk, float *dinp, const float *inp, const float *dout,
                         size_t n, float beta, bk_rnd r)
{
    (void)bk;
    if (beta == 0.0f) {
        WITH_RND_OUT(r, dinp, n, relu_bwd_k, dinp, inp, dout, n);
        return;
    }
    float g[ACC_CHUNK];
    for (size_t i = 0; i < n; i += ACC_CHUNK) {
        size_t k = n - i < ACC_CHUNK ? n - i : ACC_CHUNK;
        relu_bwd_k(g, inp + i, dout + i, k, rnd_none);
        emit_acc(dinp + i, g, k, r);
    }
}

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

KERNEL void gelu_fwd_k(float *out, const float *inp, size_t n, rnd_fn R)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float cube = GELU_C * x * x * x;
        out[i] = R(0.5f * x * (1.0f + vtanhf(GELU_SCALE * (x + cube))));
    }
}

CPU_CLONES
static void cpu_gelu_fwd(const backend *bk, float *out, const float *inp, size_t n, bk_rnd r)
{
    (void)bk;
    WITH_RND_OUT(r, out, n, gelu_fwd_k, out, inp, n);
}

KERNEL void gelu_bwd_k(float *dinp, const float *inp, const float *dout, size_t n, rnd_fn R)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float t = vtanhf(GELU_SCALE * (x + GELU_C * x * x * x));
        float sech2 = 1.0f - t * t;
        float local = 0.5f * (1.0f + t)
                      + x * 0.5f * sech2 * GELU_SCALE * (1.0f + 3.0f * GELU_C * x * x);
        dinp[i] = R(local * dout[i]);
    }
}

CPU_CLONES
static void cpu_gelu_bwd(const backend *bk, float *dinp, const float *inp, const float *dout,
                         size_t n, float beta, bk_rnd r)
{
    (void)bk;
    if (beta == 0.0f) {
        WITH_RND_OUT(r, dinp, n, gelu_bwd_k, dinp, inp, dout, n);
        return;
    }
    float g[ACC_CHUNK];
    for (size_t i = 0; i < n; i += ACC_CHUNK) {
        size_t k = n - i < ACC_CHUNK ? n - i : ACC_CHUNK;
        gelu_bwd_k(g, inp + i, dout + i, k, rnd_none);
        emit_acc(dinp + i, g, k, r);
    }
}

KERNEL void add_fwd_k(float *out, const float *a, const float *b, size_t n, rnd_fn R)
{
    for (size_t i = 0; i < n; i++)
        out[i] = R(a[i] + b[i]);
}

CPU_CLONES
static void cpu_add_fwd(const backend *bk, float *out, const float *a, const float *b, size_t n,
                        bk_rnd r)
{
    (void)bk;
    WITH_RND_OUT(r, out, n, add_fwd_k, out, a, b, n);
}

/* ------------------------------------------------------------------------------- layer norm */

#define LN_EPS 1e-5f

KERNEL void layernorm_fwd_k(float *out, float *mean, float *rstd, const float *inp,
                            const float *w, const float *b, int N, int C, rnd_fn R)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * (size_t)C; /* [C] */
        float *o = out + (size_t)n * (size_t)C;       /* [C] */
        float m = 0.0f;
        for (int i = 0; i < C; i++)
            m += x[i];
        m /= (float)C;
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float d = x[i] - m;
            v += d * d;
        }
        v /= (float)C;
        float s = 1.0f / sqrtf(v + LN_EPS);
        for (int i = 0; i < C; i++)
            o[i] = R((x[i] - m) * s * w[i] + b[i]);
        mean[n] = m;
        rstd[n] = s;
    }
}

CPU_CLONES
static void cpu_layernorm_fwd(const backend *bk, float *out, float *mean, float *rstd,
                              const float *inp, const float *weight, const float *bias, int N,
                              int C, bk_rnd r)
{
    (void)bk;
    WITH_RND_OUT(r, out, (size_t)N * (size_t)C, layernorm_fwd_k, out, mean, rstd, inp, weight,
                 bias, N, C);
}

/* dinp for one row, values i0..i1 (llm.c's formula), given the row's two means. */
KERNEL void layernorm_dx_k(float *dx, const float *dout, const float *x, const float *w,
                           float m, float s, float dmean, float dnorm_mean, int i0, int i1,
                           rnd_fn R)
{
    for (int i = i0; i < i1; i++) {
        float norm = (x[i] - m) * s;
        dx[i - i0] = R((w[i] * dout[i] - dmean - norm * dnorm_mean) * s);
    }
}

/* One row of dinp [C]: overwritten, or accumulated as R(dx + R(g)). */
static void layernorm_dx_row(float *dx, const float *dout, const float *x, const float *w,
                             float m, float s, int C, int acc, bk_rnd r)
{
    float dmean = 0.0f, dnorm_mean = 0.0f;
    for (int i = 0; i < C; i++) {
        float norm = (x[i] - m) * s;
        float dn = w[i] * dout[i];
        dmean += dn;
        dnorm_mean += dn * norm;
    }
    dmean /= (float)C;
    dnorm_mean /= (float)C;
    if (!acc) {
        WITH_RND_OUT(r, dx, (size_t)C, layernorm_dx_k, dx, dout, x, w, m, s, dmean, dnorm_mean, 0,
                     C);
        return;
    }
    float g[ACC_CHUNK];
    for (int i = 0; i < C; i += ACC_CHUNK) {
        int k = C - i < ACC_CHUNK ? C - i : ACC_CHUNK;
        layernorm_dx_k(g, dout, x, w, m, s, dmean, dnorm_mean, i, i + k, rnd_none);
        emit_acc(dx + i, g, (size_t)k, r);
    }
}

static void cpu_layernorm_bwd(const backend *bk, float *dinp, float *dweight, float *dbias,
                              const float *dout, const float *inp, const float *weight,
                              const float *mean, const float *rstd, int N, int C, float beta,
                              bk_rnd rx, bk_rnd rw)
{
    (void)bk;
    for (int i = 0; i < C; i++)
        dweight[i] = dbias[i] = 0.0f;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * (size_t)C;  /* [C] */
        const float *d = dout + (size_t)n * (size_t)C; /* [C] */
        float m = mean[n], s = rstd[n];
        for (int i = 0; i < C; i++) {
            dbias[i] += d[i];
            dweight[i] += (x[i] - m) * s * d[i];
        }
        if (dinp) {
            float *dx = dinp + (size_t)n * (size_t)C; /* [C] */
            layernorm_dx_row(dx, d, x, weight, m, s, C, beta != 0.0f, rx);
        }
    }
    round_block(dweight, 1, C, C, rw);
    round_block(dbias, 1, C, C, rw);
}

/* ------------------------------------------------------------------------------- attention */

/* The largest of p[0..n), NaN skipped (-inf when none), in eight lanes so that it vectorises:
 * the same value as one pass (the order matters only to the sign of a zero maximum, which no
 * difference p - max can see). */
KERNEL float row_max(const float *p, int n)
{
    float m8[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                   -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++)
            m8[l] = p[j + l] > m8[l] ? p[j + l] : m8[l];
    float mx = -INFINITY;
    for (; j < n; j++)
        mx = p[j] > mx ? p[j] : mx;
    for (int l = 0; l < 8; l++)
        mx = m8[l] > mx ? m8[l] : mx;
    return mx;
}

/* Causal softmax of the T x T scores in place (FP32); att_r := R(att). Row t keeps j <= t. */
KERNEL void causal_softmax_k(float *att, float *att_r, int T, rnd_fn R)
{
    for (int t = 0; t < T; t++) {
        float *p = att + (size_t)t * (size_t)T;   /* [T] */
        float *pr = att_r + (size_t)t * (size_t)T; /* [T] */
        float mx = row_max(p, t + 1);
        for (int j = 0; j <= t; j++)
            p[j] = vexpf(p[j] - mx);
        float sum = 0.0f;
        for (int j = 0; j <= t; j++)
            sum += p[j];
        float inv = 1.0f / sum;
        for (int j = 0; j <= t; j++) {
            p[j] *= inv;
            pr[j] = R(p[j]);
        }
        for (int j = t + 1; j < T; j++)
            p[j] = pr[j] = 0.0f;
    }
}

/* dS = R(P * (dP - sum_j P_j dP_j)) over the causal part of each row, 0 elsewhere; in place. */
KERNEL void causal_softmax_bwd_k(float *dp, const float *p, int T, rnd_fn R)
{
    for (int t = 0; t < T; t++) {
        float *d = dp + (size_t)t * (size_t)T;     /* [T] */
        const float *pp = p + (size_t)t * (size_t)T; /* [T] */
        float dot = 0.0f;
        for (int j = 0; j <= t; j++)
            dot += pp[j] * d[j];
        for (int j = 0; j <= t; j++)
            d[j] = R(pp[j] * (d[j] - dot));
        for (int j = t + 1; j < T; j++)
            d[j] = 0.0f;
    }
}

/*
 * One head's products. A head of the model presets is tiny (T 32, hs 16: a 32 x 32 x 16
 * product), and a BLAS call costs more in packing and set-up than it computes: 3,000 such calls
 * were a tenth of a transformer step. Heads up to ATT_SMALL_HS wide with T * hs <= ATT_SMALL
 * use these loops instead, which also skip the masked half; each loop runs along a row of the
 * result (j or the head's columns), so that it vectorises without reordering any sum: every
 * value is the sum over the shared index in increasing order, times the scale. Larger heads
 * use cblas_sgemm. Operands are [T, hs] with row stride ld (3C for q, k, v and their
 * gradients, C for out and dout); S, P, dP and dS are [T, T].
 */
#define ATT_SMALL_HS 64
#define ATT_SMALL 8192

static int att_small(int T, int hs) { return hs <= ATT_SMALL_HS && (long)T * hs <= ATT_SMALL; }

/* The causal part of row t (j <= t) rounded up to a multiple of 8 values, so that the vector
 * loops over it have no scalar remainder (the masked values this adds are overwritten by the
 * softmax and its backward). */
static inline int att_row_len(int t, int T) { return (t + 8) / 8 * 8 < T ? (t + 8) / 8 * 8 : T; }

/* s[t, j] = scale * (a_t . b_j) for j <= t (and a few masked j: att_row_len); the rest of s is
 * left as it was. bt is scratch for b transposed. Eight values of a row at a time, their sums
 * held in a vector register over d. */
KERNEL void att_rowdot(float *s, const float *a, const float *b, float *bt, int T, int hs,
                       int lda, int ldb, float scale)
{
    for (int j = 0; j < T; j++)
        for (int d = 0; d < hs; d++)
            bt[(size_t)d * (size_t)T + (size_t)j] = b[(size_t)j * (size_t)ldb + (size_t)d];
    for (int t = 0; t < T; t++) {
        float *st = s + (size_t)t * (size_t)T; /* [T] */
        const float *at = a + (size_t)t * (size_t)lda;
        int n = att_row_len(t, T), j = 0;
        for (; j + 8 <= n; j += 8) {
            float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            for (int d = 0; d < hs; d++)
                for (int l = 0; l < 8; l++)
                    acc[l] += at[d] * bt[(size_t)d * (size_t)T + (size_t)(j + l)];
            for (int l = 0; l < 8; l++)
                st[j + l] = acc[l] * scale;
        }
        for (; j < n; j++) {
            float acc = 0.0f;
            for (int d = 0; d < hs; d++)
                acc += at[d] * bt[(size_t)d * (size_t)T + (size_t)j];
            st[j] = acc * scale;
        }
    }
}

/* y_i = scale * sum_{k <= i} p[i, k] v_k (P V, dS K), or with trans y_i = scale *
 * sum_{k >= i} p[k, i] v_k (P^T dY, dS^T Q); eight columns at a time, as att_rowdot. */
KERNEL void att_pv(float *y, const float *p, const float *v, int T, int hs, int ldy, int ldv,
                   float scale, int trans)
{
    for (int i = 0; i < T; i++) {
        int k0 = trans ? i : 0, k1 = trans ? T - 1 : i, d = 0;
        float *yi = y + (size_t)i * (size_t)ldy;
        for (; d + 8 <= hs; d += 8) {
            float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
            for (int k = k0; k <= k1; k++) {
                float pk = trans ? p[(size_t)k * (size_t)T + (size_t)i] : p[(size_t)i * (size_t)T + (size_t)k];
                const float *vk = v + (size_t)k * (size_t)ldv + (size_t)d;
                for (int l = 0; l < 8; l++)
                    acc[l] += pk * vk[l];
            }
            for (int l = 0; l < 8; l++)
                yi[d + l] = acc[l] * scale;
        }
        for (; d < hs; d++) {
            float acc = 0.0f;
            for (int k = k0; k <= k1; k++) {
                float pk = trans ? p[(size_t)k * (size_t)T + (size_t)i] : p[(size_t)i * (size_t)T + (size_t)k];
                acc += pk * v[(size_t)k * (size_t)ldv + (size_t)d];
            }
            yi[d] = acc * scale;
        }
    }
}

/* The head's offsets: q, k, v (and their gradients) at qkv + qoff, qoff + C, qoff + 2C with
 * row stride 3C; its out (dout) at out + ooff with row stride C; its T x T blocks at aoff. */
typedef struct att_head {
    size_t qoff, ooff, aoff;
} att_head;

static att_head head_at(int b, int h, int T, int C, int NH)
{
    int hs = C / NH;
    att_head o = {(size_t)b * (size_t)T * (size_t)(3 * C) + (size_t)h * (size_t)hs,
                  (size_t)b * (size_t)T * (size_t)C + (size_t)h * (size_t)hs,
                  ((size_t)b * (size_t)NH + (size_t)h) * (size_t)T * (size_t)T};
    return o;
}

CPU_CLONES
static void cpu_attention_fwd(const backend *bk, float *out, float *att, float *att_r,
                              const float *qkv, int B, int T, int C, int NH, bk_rnd r)
{
    int hs = C / NH, C3 = 3 * C, small = att_small(T, hs);
    float scale = 1.0f / sqrtf((float)hs), kt[ATT_SMALL];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            att_head o = head_at(b, h, T, C, NH);
            const float *q = qkv + o.qoff, *k = q + C, *v = q + 2 * C;
            float *p = att + o.aoff, *pr = att_r + o.aoff, *y = out + o.ooff;
            if (small) {
                att_rowdot(p, q, k, kt, T, hs, C3, C3, scale); /* S = QK^T */
                round_block(p, T, T, T, r);
            } else {
                cpu_gemm(bk, 0, 1, T, T, hs, scale, q, C3, k, C3, 0.0f, p, T, r);
            }
            WITH_RND_OUT(r, pr, (size_t)T * (size_t)T, causal_softmax_k, p, pr, T);
            if (small) {
                att_pv(y, pr, v, T, hs, C, C3, 1.0f, 0); /* Y = P V */
                round_block(y, T, hs, C, r);
            } else {
                cpu_gemm(bk, 0, 0, T, hs, T, 1.0f, pr, T, v, C3, 0.0f, y, C, r);
            }
        }
}

/* One head's backward with the small loops: dP = dY V^T, dV = P^T dY, dS, dQ = dS K,
 * dK = dS^T Q (the last two scaled). */
KERNEL void att_bwd_small(float *dq, float *ds, const float *dy, const float *q, const float *p,
                          const float *pr, int T, int C, int hs, float scale, float *vt, bk_rnd r)
{
    int C3 = 3 * C;
    const float *k = q + C, *v = q + 2 * C;
    float *dk = dq + C, *dv = dq + 2 * C;
    att_rowdot(ds, dy, v, vt, T, hs, C, C3, 1.0f);
    round_block(ds, T, T, T, r);
    att_pv(dv, pr, dy, T, hs, C3, C, 1.0f, 1);
    round_block(dv, T, hs, C3, r);
    WITH_RND_OUT(r, ds, (size_t)T * (size_t)T, causal_softmax_bwd_k, ds, p, T);
    att_pv(dq, ds, k, T, hs, C3, C3, scale, 0);
    round_block(dq, T, hs, C3, r);
    att_pv(dk, ds, q, T, hs, C3, C3, scale, 1);
    round_block(dk, T, hs, C3, r);
}

CPU_CLONES
static void cpu_attention_bwd(const backend *bk, float *dqkv, float *scratch, const float *dout,
                              const float *qkv, const float *att, const float *att_r, int B,
                              int T, int C, int NH, bk_rnd r)
{
    int hs = C / NH, C3 = 3 * C, small = att_small(T, hs);
    float scale = 1.0f / sqrtf((float)hs), vt[ATT_SMALL];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            att_head o = head_at(b, h, T, C, NH);
            const float *q = qkv + o.qoff, *k = q + C, *v = q + 2 * C; /* [T,hs], stride 3C */
            float *dq = dqkv + o.qoff, *dk = dq + C, *dv = dq + 2 * C; /* [T,hs], stride 3C */
            const float *p = att + o.aoff, *pr = att_r + o.aoff;      /* [T,T] */
            float *ds = scratch + o.aoff;                              /* [T,T] */
            const float *dy = dout + o.ooff;
            if (small) {
                att_bwd_small(dq, ds, dy, q, p, pr, T, C, hs, scale, vt, r);
                continue;
            }
            cpu_gemm(bk, 0, 1, T, T, hs, 1.0f, dy, C, v, C3, 0.0f, ds, T, r);  /* dP = dY V^T */
            cpu_gemm(bk, 1, 0, T, hs, T, 1.0f, pr, T, dy, C, 0.0f, dv, C3, r); /* dV = P^T dY */
            WITH_RND_OUT(r, ds, (size_t)T * (size_t)T, causal_softmax_bwd_k, ds, p, T);
            cpu_gemm(bk, 0, 0, T, hs, T, scale, ds, T, k, C3, 0.0f, dq, C3, r); /* dQ = dS K */
            cpu_gemm(bk, 1, 0, T, hs, T, scale, ds, T, q, C3, 0.0f, dk, C3, r); /* dK = dS^T Q */
        }
}

/* ------------------------------------------------------------------------------- embedding */

KERNEL void embed_fwd_k(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                        int B, int T, int C, rnd_fn R)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t bt = (size_t)b * (size_t)T + (size_t)t;
            float *o = out + bt * (size_t)C;                           /* [C] */
            const float *we = wte + (size_t)tokens[bt] * (size_t)C;   /* [C] */
            const float *wp = wpe + (size_t)t * (size_t)C;            /* [C] */
            for (int i = 0; i < C; i++)
                o[i] = R(we[i] + wp[i]);
        }
}

CPU_CLONES
static void cpu_embed_fwd(const backend *bk, float *out, const int32_t *tokens, const float *wte,
                          const float *wpe, int B, int T, int C, bk_rnd r)
{
    (void)bk;
    WITH_RND_OUT(r, out, (size_t)B * (size_t)T * (size_t)C, embed_fwd_k, out, tokens, wte, wpe, B,
                 T, C);
}

static void cpu_embed_bwd(const backend *bk, float *dwte, float *dwpe, const float *dout,
                          const int32_t *tokens, int B, int T, int C, int V, bk_rnd rw)
{
    (void)bk;
    memset(dwte, 0, (size_t)V * (size_t)C * sizeof *dwte);
    memset(dwpe, 0, (size_t)T * (size_t)C * sizeof *dwpe);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t bt = (size_t)b * (size_t)T + (size_t)t;
            const float *d = dout + bt * (size_t)C;                 /* [C] */
            float *dwe = dwte + (size_t)tokens[bt] * (size_t)C;    /* [C] */
            float *dwp = dwpe + (size_t)t * (size_t)C;             /* [C] */
            for (int i = 0; i < C; i++) {
                dwe[i] += d[i];
                dwp[i] += d[i];
            }
        }
    round_block(dwte, V, C, C, rw);
    round_block(dwpe, T, C, C, rw);
}

/* ------------------------------------------------------------------------------- cross-entropy */

static void cpu_xent_fwd(const backend *bk, float *losses, float *probs, const float *logits,
                         const int32_t *targets, int N, int V)
{
    (void)bk;
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * (size_t)V; /* [V] */
        float *p = probs + (size_t)n * (size_t)V;        /* [V] */
        float mx = -INFINITY; /* a NaN logit is skipped here but poisons the sum below */
        for (int i = 0; i < V; i++)
            mx = l[i] > mx ? l[i] : mx;
        float sum = 0.0f;
        for (int i = 0; i < V; i++) {
            p[i] = vexpf(l[i] - mx);
            sum += p[i];
        }
        float inv = 1.0f / sum;
        for (int i = 0; i < V; i++)
            p[i] *= inv;
        /* -log softmax[target] = log(sum) + max - logit[target], without log(0) */
        losses[n] = logf(sum) + mx - l[targets[n]];
    }
}

KERNEL void xent_bwd_k(float *dlogits, const float *probs, const int32_t *targets, int N, int V,
                       float dscale, rnd_fn R)
{
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * (size_t)V; /* [V] */
        float *d = dlogits + (size_t)n * (size_t)V;     /* [V] */
        int y = targets[n];
        for (int i = 0; i < V; i++)
            d[i] = R((p[i] - (i == y ? 1.0f : 0.0f)) * dscale);
    }
}

CPU_CLONES
static void cpu_xent_bwd(const backend *bk, float *dlogits, const float *probs,
                         const int32_t *targets, int N, int V, float dscale, bk_rnd r)
{
    (void)bk;
    WITH_RND_OUT(r, dlogits, (size_t)N * (size_t)V, xent_bwd_k, dlogits, probs, targets, N, V,
                 dscale);
}

/* The CPU runs each operation to its end before returning and has no failure to report. */
static int cpu_sync(const backend *bk, char *err, size_t errlen)
{
    (void)bk;
    if (err && errlen)
        err[0] = 0;
    return 0;
}

/* ------------------------------------------------------------------------------- the table */

static const backend cpu_backend = {
    .name = "cpu",
    .desc = "CPU (exact FP16/BF16 emulation)",
    .ctx = NULL,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .fill = cpu_fill,
    .scale = cpu_scale,
    .axpy = cpu_axpy,
    .round = cpu_round,
    .sum = cpu_sum,
    .sumsq = cpu_sumsq,
    .count_nonfinite = cpu_count_nonfinite,
    .tstats = cpu_tstats,
    .whatif_scaled = cpu_whatif_scaled,
    .count_at_least = cpu_count_at_least,
    .count_at_least_many = cpu_count_at_least_many,
    .quant_whatif = cpu_quant_whatif,
    .tstats_ge = cpu_tstats_ge,
    .gemm = cpu_gemm,
    .bias_add = cpu_bias_add,
    .bias_grad = cpu_bias_grad,
    .relu_fwd = cpu_relu_fwd,
    .relu_bwd = cpu_relu_bwd,
    .gelu_fwd = cpu_gelu_fwd,
    .gelu_bwd = cpu_gelu_bwd,
    .add_fwd = cpu_add_fwd,
    .layernorm_fwd = cpu_layernorm_fwd,
    .layernorm_bwd = cpu_layernorm_bwd,
    .attention_fwd = cpu_attention_fwd,
    .attention_bwd = cpu_attention_bwd,
    .embed_fwd = cpu_embed_fwd,
    .embed_bwd = cpu_embed_bwd,
    .xent_fwd = cpu_xent_fwd,
    .xent_bwd = cpu_xent_bwd,
    .grad_norm = cpu_grad_norm,
    .optim_step = cpu_optim_step,
    .update_stats = cpu_update_stats,
    .sync = cpu_sync,
};

#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
void openblas_set_num_threads(int num_threads);
#endif
#ifdef HAVE_BLAS_THREAD_SHUTDOWN_
int blas_thread_shutdown_(void);
#endif

#if defined(HAVE_OPENBLAS_GET_CORENAME) && defined(HAVE_GOTOBLAS_DYNAMIC_INIT) &&                   \
    defined(HAVE_GOTOBLAS_DYNAMIC_QUIT) && defined(BK_X86)
char *openblas_get_corename(void);
void gotoblas_dynamic_init(void);
void gotoblas_dynamic_quit(void);

/* An OpenBLAS built for every x86 CPU (DYNAMIC_ARCH, as Debian's) picks its kernels by the CPU's
 * model number when it is loaded, and one that does not know the model falls back to its SSE3
 * kernels ("Prescott"): OpenBLAS 0.3.21 on a CPU newer than it (family 6, model 207) ran sgemm
 * at a quarter or less of its AVX-512 kernels' rate, and GEMMs are most of a step. Where that
 * happened on a CPU with AVX2 and FMA (or AVX-512), and OPENBLAS_CORETYPE does not choose, the
 * kernels are chosen again by the CPU's features, as OPENBLAS_CORETYPE would choose them, before
 * any BLAS call: "SkylakeX" (AVX-512 F, BW, DQ, VL) or "Haswell". The entry points used for it
 * are exported by OpenBLAS but not part of its API: configure checks that they exist. */
static void blas_pick_kernels(void)
{
    static const char *const fallback[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                           "Sandybridge", "Atom"};
    const char *core = openblas_get_corename();
    int old = 0;
    for (size_t i = 0; core && i < sizeof fallback / sizeof fallback[0]; i++)
        old |= strcmp(core, fallback[i]) == 0;
    if (!old || getenv("OPENBLAS_CORETYPE") || !__builtin_cpu_supports("avx2") ||
        !__builtin_cpu_supports("fma"))
        return;
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (setenv("OPENBLAS_CORETYPE", avx512 ? "SkylakeX" : "Haswell", 1) != 0)
        return;
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE"); /* (runs started from this process choose for themselves) */
}
#else
static void blas_pick_kernels(void) {}
#endif

/* The models ampdiag trains are small: their GEMMs (e.g. 64 x 256 x 256) run fastest on one
 * thread, and OpenBLAS's thread pool slowed steps by up to 6x on a loaded 2-core machine. So
 * one BLAS thread unless OPENBLAS_NUM_THREADS says otherwise. OpenBLAS started its pool when it
 * was loaded, and an idle pool thread still wakes and yields the CPU over and over, taking time
 * from the tracer and trace-writer threads: it is stopped (OpenBLAS starts it again should a
 * call ever want more than one thread). */
const backend *backend_cpu(void)
{
    static atomic_int once;
    if (atomic_exchange(&once, 1) == 0) {
        blas_pick_kernels();
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
        if (!getenv("OPENBLAS_NUM_THREADS")) {
            openblas_set_num_threads(1);
#ifdef HAVE_BLAS_THREAD_SHUTDOWN_
            blas_thread_shutdown_();
#endif
        }
#endif
    }
    return &cpu_backend;
}
