/*
 * bench_gpu_kernels.cu - the device statistics kernel against the memory it reads, on the GPU
 * itself (CUDA events, no host round trip): GB/s of float32 read by a plain read kernel (16-byte
 * loads, one add a value: what any pass must at least take), a device-to-device copy (bytes
 * read and written), the statistics kernel of kernels/stats.cuh without and with the exponent
 * histogram, the counts-at-least pass, and the statistics kernel of the previous version (one
 * 168-byte state a thread, 64-bit counters, 128 blocks) for comparison on the same device; on
 * gradient-like data (exponents over 35 binades) and weight-like data (|x| near 2^-6). Best of
 * REPS. Prints that nothing was measured where no CUDA device can run.
 * Usage: bench_gpu_kernels [N (floats, default 256M)] [REPS (default 10)]
 */
#include "kernels/stats.cuh"
#include "numerics/numfmt.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "bench_gpu_kernels: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,      \
                    cudaGetErrorString(e_));                                                     \
            exit(3);                                                                             \
        }                                                                                        \
    } while (0)

/* ---------------------------------------------------------------- the previous kernel */

typedef struct old_stats {
    unsigned long long nan, pinf, ninf, zero, neg;
    unsigned long long hovf, hunf, hsub, bovf, bunf, bsub;
    unsigned long long e4ovf, e4unf, e4sub, e5ovf, e5unf, e5sub; /* FP8 E4M3 / E5M2, unscaled */
    unsigned long long fsub; /* float32 subnormals (the FP32 row's what-if) */
    int32_t kmin, kmax; /* over finite values; INT32_MAX / INT32_MIN when none */
    int32_t amax, amin; /* |x| bits over finite / finite non-zero; 0 / INT32_MAX when none */
    double sum, sq;
} old_stats;

__device__ static inline void old_stats_init(old_stats *b)
{
    b->nan = b->pinf = b->ninf = b->zero = b->neg = 0;
    b->hovf = b->hunf = b->hsub = b->bovf = b->bunf = b->bsub = 0;
    b->e4ovf = b->e4unf = b->e4sub = b->e5ovf = b->e5unf = b->e5sub = b->fsub = 0;
    b->kmin = INT32_MAX;
    b->kmax = INT32_MIN;
    b->amax = 0;
    b->amin = INT32_MAX;
    b->sum = b->sq = 0.0;
}

/* One value's bit pattern into b (tstats.c's block_add1). */
__device__ static inline void old_stats_add(old_stats *b, uint32_t u)
{
    uint32_t a = u & 0x7fffffffu;
    unsigned fin = a < AMPDIAG_F32_INF, nz = a != 0;
    int32_t sa = (int32_t)a, key = ck_key(u);
    if (fin) {
        double v = (double)ampdiag_f32_from_bits(u);
        b->kmin = key < b->kmin ? key : b->kmin;
        b->kmax = key > b->kmax ? key : b->kmax;
        b->amax = sa > b->amax ? sa : b->amax;
        if (nz && sa < b->amin)
            b->amin = sa;
        b->sum += v;
        b->sq += v * v;
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
    b->e4ovf += fin & (a >= AMPDIAG_E4M3_OVF_BITS);
    b->e4unf += nz & (a <= AMPDIAG_E4M3_UNF_BITS);
    b->e4sub += (a > AMPDIAG_E4M3_UNF_BITS) & (a < AMPDIAG_E4M3_NORM_BITS);
    b->e5ovf += fin & (a >= AMPDIAG_E5M2_OVF_BITS);
    b->e5unf += nz & (a <= AMPDIAG_E5M2_UNF_BITS);
    b->e5sub += (a > AMPDIAG_E5M2_UNF_BITS) & (a < AMPDIAG_E5M2_NORM_BITS);
    b->fsub += nz & (a < AMPDIAG_F32_MIN_NORMAL);
}

/* d := d merged with s (counts added, extremes combined, sums added). */
__device__ static inline void old_stats_merge(old_stats *d, const old_stats *s)
{
    d->nan += s->nan; d->pinf += s->pinf; d->ninf += s->ninf; d->zero += s->zero; d->neg += s->neg;
    d->hovf += s->hovf; d->hunf += s->hunf; d->hsub += s->hsub;
    d->bovf += s->bovf; d->bunf += s->bunf; d->bsub += s->bsub;
    d->e4ovf += s->e4ovf; d->e4unf += s->e4unf; d->e4sub += s->e4sub;
    d->e5ovf += s->e5ovf; d->e5unf += s->e5unf; d->e5sub += s->e5sub;
    d->fsub += s->fsub;
    d->kmin = s->kmin < d->kmin ? s->kmin : d->kmin;
    d->kmax = s->kmax > d->kmax ? s->kmax : d->kmax;
    d->amax = s->amax > d->amax ? s->amax : d->amax;
    d->amin = s->amin < d->amin ? s->amin : d->amin;
    d->sum += s->sum;
    d->sq += s->sq;
}


static __global__ void old_tstats_k(const float *x, size_t n, old_stats *part)
{
    __shared__ old_stats sh[CU_THREADS];
    old_stats acc;
    old_stats_init(&acc);
    CU_FOR(i, n)
    old_stats_add(&acc, __float_as_uint(x[i]));
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = CU_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            old_stats_merge(&sh[threadIdx.x], &sh[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        part[blockIdx.x] = sh[0];
}

/* ---------------------------------------------------------------- the plain read */

static __global__ void read_k(const float4 *x, size_t n4, float *out)
{
    float s = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = __ldg(x + i);
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 12345.678f) /* (never: keeps the loads) */
        out[0] = s;
}

/* x[i] from a seed: gradient-like (kind 0) or weight-like (kind 1). */
static __global__ void fill_k(float *x, size_t n, int kind)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long s = (i + 1) * 0x9e3779b97f4a7c15ull;
        s ^= s >> 31;
        s *= 0xbf58476d1ce4e5b9ull;
        s ^= s >> 27;
        double u = (double)(s >> 11) * 0x1p-53;
        double m = kind == 0 ? exp2(-30.0 + 35.0 * u) : (0.5 + u) * 0x1p-6;
        x[i] = (float)((s & 1) ? -m : m);
    }
}

typedef void (*launch_fn)(void *ctx);

static float time_best(launch_fn f, void *ctx, int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    float best = INFINITY;
    for (int r = 0; r <= reps; r++) {
        CK(cudaEventRecord(a));
        f(ctx);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (r > 0 && ms < best)
            best = ms;
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    return best;
}

struct bench {
    float *x, *y, *sink;
    size_t n;
    ck_binade *tab;
    int nranks;
    ck_part *part, *rec;
    unsigned long long *hist;
    old_stats *opart;
    unsigned grid, grid_h, sms;
};

static void run_read(void *p)
{
    bench *B = (bench *)p;
    read_k<<<B->sms * 8, 256>>>((const float4 *)B->x, B->n / 4, B->sink);
}
static void run_copy(void *p)
{
    bench *B = (bench *)p;
    CK(cudaMemcpyAsync(B->y, B->x, B->n * sizeof(float), cudaMemcpyDeviceToDevice));
}
template <class CT, bool PF = CU_STATS_PREFETCH> static void run_stats(bench *B, bool hist)
{
    size_t chunk = cu_stats_chunk(B->n), nch = (B->n + chunk - 1) / chunk;
    unsigned g = hist ? B->grid_h : B->grid;
    if (g > nch)
        g = (unsigned)nch;
    size_t smem = cu_stats_smem<CT>(B->nranks);
    if (hist) {
        CK(cudaMemsetAsync(B->hist, 0, AMPDIAG_HIST_BINS * sizeof *B->hist));
        cu_tstats_k<true, CT, PF><<<g, CU_THREADS, smem>>>(B->x, B->n, chunk, B->tab, B->nranks, B->part, B->hist);
    } else {
        cu_tstats_k<false, CT, PF><<<g, CU_THREADS, smem>>>(B->x, B->n, chunk, B->tab, B->nranks, B->part, NULL);
    }
    cu_parts_merge_k<<<1, CU_MERGE_THREADS>>>(nch, B->part, B->rec);
}
static void run_stats0(void *p) { run_stats<unsigned short>((bench *)p, false); }
static void run_stats1(void *p) { run_stats<unsigned short>((bench *)p, true); }
static void run_stats32(void *p) { run_stats<unsigned>((bench *)p, false); }
static void run_stats_nopf(void *p) { run_stats<unsigned short, false>((bench *)p, false); }
static void run_old(void *p)
{
    bench *B = (bench *)p;
    old_tstats_k<<<128, CU_THREADS>>>(B->x, B->n, B->opart);
}
struct cu_ge_merge {
    __device__ void operator()(ck_ge &a, const ck_ge &b) const
    {
        for (int j = 0; j < CK_MAX_GE; j++)
            a.n[j] += b.n[j];
    }
};
struct cu_ge_add {
    cu_ge_set set;
    const float *x;
    __device__ void operator()(ck_ge &acc, size_t i) const { ck_ge_add(&acc, set.t, __float_as_uint(x[i])); }
};
static void run_ge_new(void *p, int k)
{
    bench *B = (bench *)p;
    cu_ge_set set;
    for (int j = 0; j < CK_MAX_GE; j++)
        set.t[j] = j < k ? 0x30000000u + 0x01000000u * (unsigned)j : CK_NO_THRESH;
    CK(cudaMemsetAsync(B->hist, 0, 8 * sizeof *B->hist));
    if (k <= 2)
        cu_ge_k<2><<<B->grid, CU_THREADS>>>(B->x, B->n, set, B->hist);
    else
        cu_ge_k<8><<<B->grid, CU_THREADS>>>(B->x, B->n, set, B->hist);
}
static void run_ge5(void *p) { run_ge_new(p, 5); }
static void run_ge2(void *p) { run_ge_new(p, 2); }
static void run_ge(void *p)
{
    bench *B = (bench *)p;
    cu_ge_add add;
    for (int j = 0; j < CK_MAX_GE; j++)
        add.set.t[j] = j < 5 ? 0x30000000u + 0x01000000u * (unsigned)j : CK_NO_THRESH;
    add.x = B->x;
    ck_ge init;
    memset(&init, 0, sizeof init);
    cu_reduce_part_k<<<cu_red_blocks(B->n), CU_THREADS>>>(B->n, init, add, cu_ge_merge(), (ck_ge *)B->part);
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)256 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 10;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("device kernels: not measured (no usable CUDA device)\n");
        return 0;
    }
    if (n < 1024 || n % 4 || reps < 1) {
        fprintf(stderr, "bench_gpu_kernels: N must be a multiple of 4, at least 1024; REPS at least 1\n");
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    bench B;
    memset(&B, 0, sizeof B);
    B.n = n;
    B.sms = (unsigned)prop.multiProcessorCount;
    ck_ranks ranks;
    if (ck_ranks_build(&ranks) != 0) {
        fprintf(stderr, "bench_gpu_kernels: rank table\n");
        return 3;
    }
    B.nranks = 2 * (ranks.k + 1);
    CK(cudaMalloc(&B.x, n * sizeof(float)));
    CK(cudaMalloc(&B.y, n * sizeof(float)));
    CK(cudaMalloc(&B.sink, 64));
    CK(cudaMalloc(&B.tab, sizeof ranks.bin));
    CK(cudaMemcpy(B.tab, ranks.bin, sizeof ranks.bin, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&B.part, CU_STATS_MAX_CHUNKS * sizeof(ck_part)));
    CK(cudaMalloc(&B.rec, sizeof(ck_part)));
    CK(cudaMalloc(&B.hist, AMPDIAG_HIST_BINS * sizeof(unsigned long long)));
    CK(cudaMalloc(&B.opart, 128 * sizeof(old_stats)));
    int per = 0, per_h = 0;
    CK(cudaFuncSetAttribute(cu_tstats_k<false, unsigned short>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)cu_stats_smem<unsigned short>(B.nranks)));
    CK(cudaFuncSetAttribute(cu_tstats_k<true, unsigned short>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)cu_stats_smem<unsigned short>(B.nranks)));
    CK(cudaFuncSetAttribute(cu_tstats_k<false, unsigned>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)cu_stats_smem<unsigned>(B.nranks)));
    CK(cudaFuncSetAttribute(cu_tstats_k<false, unsigned short, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)cu_stats_smem<unsigned short>(B.nranks)));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, cu_tstats_k<false>, CU_THREADS, cu_stats_smem(B.nranks)));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_h, cu_tstats_k<true>, CU_THREADS, cu_stats_smem(B.nranks)));
    B.grid = (unsigned)per * B.sms;
    B.grid_h = (unsigned)per_h * B.sms;
    double gb = (double)n * sizeof(float) / 1e9;
    printf("%s, %d SMs, %d-bit memory bus; %zu floats (%.2f GB); best of %d; statistics grid %u blocks "
           "(%d a SM), %u with the histogram (%d a SM)\n",
           prop.name, prop.multiProcessorCount, prop.memoryBusWidth, n, gb, reps, B.grid, per, B.grid_h, per_h);
    static const char *const kinds[2] = {"gradient-like", "weight-like"};
    printf("| kernel | data | ms | GB/s read | x plain read |\n|---|---|---|---|---|\n");
    for (int kind = 0; kind < 2; kind++) {
        fill_k<<<B.sms * 8, 256>>>(B.x, n, kind);
        CK(cudaDeviceSynchronize());
        float tread = time_best(run_read, &B, reps);
        struct {
            const char *name;
            launch_fn f;
            double bytes;
        } rows[] = {{"plain read (float4, one add a value)", run_read, gb},
                    {"device-to-device copy (read + write)", run_copy, 2 * gb},
                    {"statistics", run_stats0, gb},
                    {"statistics, 32-bit rank counters", run_stats32, gb},
                    {"statistics, no prefetch", run_stats_nopf, gb},
                    {"statistics + histogram", run_stats1, gb},
                    {"counts at least 5 thresholds", run_ge5, gb},
                    {"counts at least 2 thresholds", run_ge2, gb},
                    {"counts at least 5, previous kernel", run_ge, gb},
                    {"statistics, previous kernel", run_old, gb}};
        ck_part first, got;
        int have_first = 0;
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            float ms = i == 0 ? tread : time_best(rows[i].f, &B, reps);
            const char *same = "";
            if (strncmp(rows[i].name, "statistics", 10) == 0 && strstr(rows[i].name, "previous") == NULL) {
                CK(cudaMemcpy(&got, B.rec, sizeof got, cudaMemcpyDeviceToHost));
                if (!have_first) {
                    first = got;
                    have_first = 1;
                } else {
                    same = memcmp(&first, &got, sizeof got) == 0 ? " (record: the same bits)" : " (record: DIFFERENT)";
                }
            }
            printf("| %s%s | %s | %.3f | %.0f | %.2f |\n", rows[i].name, same, kinds[kind], ms,
                   rows[i].bytes / (ms * 1e-3), ms / tread);
        }
    }
    CK(cudaDeviceSynchronize());
    return 0;
}
