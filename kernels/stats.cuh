/*
 * stats.cuh - the fused tensor statistics on the device (CUDA C++ only), and the counts at least
 * some thresholds behind the scaled what-if counts. The launches, the copy of the records back
 * and the records themselves (kernels/bodies.h's ck_part_record) are src/backend/cuda/
 * stats_cuda.cu's.
 *
 * The statistics read the tensor once, 16 bytes a thread at a time where it is aligned. Each
 * value costs its rank (bodies.h: one read of the binade table, kept in shared memory, and
 * three compares; the sign is in the rank) added to the thread's own counter of that rank, a
 * column of shared memory that no other thread touches (so no atomic, and no bank conflict:
 * thread i's counters are in bank i mod 32 whatever the rank), plus its extremes and sums in
 * registers; four values of the same rank (the common case) cost one counter update, and four
 * finite values their extremes without a select. The integer pipe is what limits it (an H200
 * reads 4.4 TB/s: 4 values a clock a multiprocessor), so every instruction a value saves counts.
 * With the histogram, each warp also counts exponent bins in a shared sub-histogram of its own
 * (shared atomics).
 *
 * Determinism: the tensor is cut into chunks whose size depends on n alone (cu_stats_chunk);
 * each chunk is reduced by one block in a fixed order (each thread's values in index order,
 * then a fixed tree over the threads) into part[chunk], and one block merges the chunks' parts
 * in a fixed order. How many blocks run, and which chunks each takes, does not change a bit of
 * the result, so the grid can fill any GPU.
 */
#ifndef AMPDIAG_KERNELS_STATS_CUH
#define AMPDIAG_KERNELS_STATS_CUH

#include "kernels/bodies.h"
#include "kernels/launch.cuh"

#include <cstdint>

enum { CU_WARPS = CU_THREADS / 32, CU_STATS_MAX_CHUNKS = 4096 };

/* A thread's rank counters: 16 bits hold what a thread sees of a chunk (cu_stats_chunk: at most
 * 2^16 - 1 values a thread while n < 2^36), and take half the shared memory of 32 bits. */
#ifndef CU_STATS_COUNTER
#define CU_STATS_COUNTER unsigned short
#endif
/* Whether the element loop loads the next values before it counts those in hand. */
#ifndef CU_STATS_PREFETCH
#define CU_STATS_PREFETCH true
#endif

/* Elements in each chunk for n values: at least 32768 (128 a thread), more where n would make
 * more than CU_STATS_MAX_CHUNKS chunks; a multiple of 1024, so that every chunk starts 16-byte
 * aligned wherever the first does. */
static inline size_t cu_stats_chunk(size_t n)
{
    size_t c = 32768;
    size_t need = (n + CU_STATS_MAX_CHUNKS - 1) / CU_STATS_MAX_CHUNKS;
    if (need > c)
        c = (need + 1023) & ~(size_t)1023;
    return c;
}

/* The per-thread state of one chunk (the rank counters are in shared memory). amin is kept as
 * |x| bits - 1 in unsigned order, so that a zero (whose - 1 wraps to the largest value) never
 * is the least without a select. */
struct cu_thread_stats {
    int32_t kmin, kmax, amax;
    uint32_t aminm1;
    double sum, sq;
};

__device__ inline void cu_ts_init(cu_thread_stats &t)
{
    t.kmin = INT32_MAX;
    t.kmax = INT32_MIN;
    t.amax = 0;
    t.aminm1 = 0xffffffffu;
    t.sum = t.sq = 0.0;
}

/* What one value adds besides its rank (bodies.h's ck_part_add_rest): any value. */
__device__ inline void cu_ts_add(cu_thread_stats &t, uint32_t u)
{
    uint32_t a = u & 0x7fffffffu;
    if (a >= AMPDIAG_F32_INF)
        return;
    int32_t key = ck_key(u);
    double v = (double)__uint_as_float(u);
    t.kmin = min(t.kmin, key);
    t.kmax = max(t.kmax, key);
    t.amax = max(t.amax, (int32_t)a);
    t.aminm1 = min(t.aminm1, a - 1u);
    t.sum += v;
    t.sq += v * v;
}

/* One value: its rank counted in the thread's column, its histogram bin in the warp's
 * sub-histogram (hb may be NULL), the rest in t. */
template <class CT>
__device__ inline void cu_stats_one(cu_thread_stats &t, CT *col, const ck_binade *tab, unsigned *hb,
                                    uint32_t u)
{
    col[ck_rank(tab, u) * CU_THREADS]++;
    if (hb)
        atomicAdd(&hb[ck_hist_bin(u)], 1u);
    cu_ts_add(t, u);
}

/* Four values: one counter update when their ranks agree (the common case); extremes and sums
 * without a select where all four are finite (else value by value). */
template <class CT>
__device__ inline void cu_stats_four(cu_thread_stats &t, CT *col, const ck_binade *tab, unsigned *hb,
                                     float4 v)
{
    uint32_t u0 = __float_as_uint(v.x), u1 = __float_as_uint(v.y), u2 = __float_as_uint(v.z),
             u3 = __float_as_uint(v.w);
    /* the four table reads first, so that their latencies overlap */
    ck_binade b0 = tab[u0 >> 23], b1 = tab[u1 >> 23], b2 = tab[u2 >> 23], b3 = tab[u3 >> 23];
    uint32_t a0 = u0 & 0x7fffffffu, a1 = u1 & 0x7fffffffu, a2 = u2 & 0x7fffffffu, a3 = u3 & 0x7fffffffu;
    unsigned r0 = ck_rank_in(b0, a0), r1 = ck_rank_in(b1, a1), r2 = ck_rank_in(b2, a2), r3 = ck_rank_in(b3, a3);
    if (r0 == r1 && r0 == r2 && r0 == r3) {
        col[r0 * CU_THREADS] += 4;
    } else {
        col[r0 * CU_THREADS]++;
        col[r1 * CU_THREADS]++;
        col[r2 * CU_THREADS]++;
        col[r3 * CU_THREADS]++;
    }
    if (hb) {
        atomicAdd(&hb[ck_hist_bin(u0)], 1u);
        atomicAdd(&hb[ck_hist_bin(u1)], 1u);
        atomicAdd(&hb[ck_hist_bin(u2)], 1u);
        atomicAdd(&hb[ck_hist_bin(u3)], 1u);
    }
    uint32_t amx = max(max(a0, a1), max(a2, a3));
    if (amx >= AMPDIAG_F32_INF) { /* a NaN or inf among them: value by value */
        cu_ts_add(t, u0);
        cu_ts_add(t, u1);
        cu_ts_add(t, u2);
        cu_ts_add(t, u3);
        return;
    }
    int32_t k0 = ck_key(u0), k1 = ck_key(u1), k2 = ck_key(u2), k3 = ck_key(u3);
    t.kmin = min(t.kmin, min(min(k0, k1), min(k2, k3)));
    t.kmax = max(t.kmax, max(max(k0, k1), max(k2, k3)));
    t.amax = max(t.amax, (int32_t)amx);
    t.aminm1 = min(t.aminm1, min(min(a0 - 1u, a1 - 1u), min(a2 - 1u, a3 - 1u)));
    double d0 = v.x, d1 = v.y, d2 = v.z, d3 = v.w;
    t.sum += d0;
    t.sum += d1;
    t.sum += d2;
    t.sum += d3;
    t.sq += d0 * d0;
    t.sq += d1 * d1;
    t.sq += d2 * d2;
    t.sq += d3 * d3;
}

/* a merged with b, for the shuffles and the tree (the order is fixed by the callers). */
__device__ inline void cu_ts_merge(cu_thread_stats &a, const cu_thread_stats &b)
{
    a.kmin = min(a.kmin, b.kmin);
    a.kmax = max(a.kmax, b.kmax);
    a.amax = max(a.amax, b.amax);
    a.aminm1 = min(a.aminm1, b.aminm1);
    a.sum += b.sum;
    a.sq += b.sq;
}

__device__ inline cu_thread_stats cu_ts_shfl_down(const cu_thread_stats &t, int d)
{
    cu_thread_stats o;
    const unsigned full = 0xffffffffu;
    o.kmin = __shfl_down_sync(full, t.kmin, d);
    o.kmax = __shfl_down_sync(full, t.kmax, d);
    o.amax = __shfl_down_sync(full, t.amax, d);
    o.aminm1 = __shfl_down_sync(full, t.aminm1, d);
    o.sum = __shfl_down_sync(full, t.sum, d);
    o.sq = __shfl_down_sync(full, t.sq, d);
    return o;
}

/* The chunk's statistics into *out: the threads' states merged (lane 0 of each warp gets its
 * warp's by a fixed shuffle tree, then thread 0 merges the warps in order) and each rank's
 * column summed (by warp r mod CU_WARPS: 8 strided reads a lane, then shuffles). Every thread of
 * the block calls it; it ends with the block synchronised. */
template <class CT>
__device__ inline void cu_chunk_reduce(cu_thread_stats t, const CT *cnt, int nranks, cu_thread_stats *warp_sh,
                                       ck_part *out)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int d = 16; d > 0; d >>= 1) {
        cu_thread_stats o = cu_ts_shfl_down(t, d);
        if (lane < d)
            cu_ts_merge(t, o);
    }
    if (lane == 0)
        warp_sh[w] = t;
    __syncthreads();
    for (int r = w; r < nranks; r += CU_WARPS) {
        unsigned long long c = 0;
        for (int i = lane; i < CU_THREADS; i += 32)
            c += cnt[r * CU_THREADS + i];
        for (int d = 16; d > 0; d >>= 1)
            c += __shfl_down_sync(0xffffffffu, c, d);
        if (lane == 0)
            out->rank[r] = c;
    }
    if (threadIdx.x == 0) {
        cu_thread_stats m = warp_sh[0];
        for (int k = 1; k < CU_WARPS; k++)
            cu_ts_merge(m, warp_sh[k]);
        for (int r = nranks; r < CK_NRANKS; r++)
            out->rank[r] = 0;
        out->kmin = m.kmin;
        out->kmax = m.kmax;
        out->amax = m.amax;
        out->amin = m.aminm1 == 0xffffffffu ? INT32_MAX : (int32_t)(m.aminm1 + 1u);
        out->sum = m.sum;
        out->sq = m.sq;
    }
    __syncthreads();
}

/* The dynamic shared memory of cu_tstats_k: one counter a rank and a thread. */
template <class CT = CU_STATS_COUNTER>
static inline size_t cu_stats_smem(int nranks) { return (size_t)nranks * CU_THREADS * sizeof(CT); }

/* The statistics of x[0..n) in chunks of `chunk` values (cu_stats_chunk), chunk c into part[c];
 * tab_g the binade table (512 entries), nranks = 2 (its thresholds + 1); the histogram added to hist
 * when HIST. Any grid: each block takes chunks blockIdx.x, + gridDim.x, ... */
template <bool HIST, class CT = CU_STATS_COUNTER, bool PF = CU_STATS_PREFETCH>
__global__ void __launch_bounds__(CU_THREADS) cu_tstats_k(const float *x, size_t n, size_t chunk, const ck_binade *tab_g,
                                                          int nranks, ck_part *part, unsigned long long *hist)
{
    extern __shared__ __align__(16) unsigned char cnt_bytes[]; /* [nranks * CU_THREADS] counters: cu_stats_smem */
    CT *cnt = reinterpret_cast<CT *>(cnt_bytes);
    __shared__ ck_binade tab[512];
    __shared__ unsigned hbin[HIST ? CU_WARPS * AMPDIAG_HIST_BINS : 1];
    __shared__ cu_thread_stats warp_sh[CU_WARPS];
    for (int i = threadIdx.x; i < 512; i += CU_THREADS)
        tab[i] = tab_g[i];
    if (HIST)
        for (int i = threadIdx.x; i < CU_WARPS * AMPDIAG_HIST_BINS; i += CU_THREADS)
            hbin[i] = 0;
    __syncthreads();
    CT *col = cnt + threadIdx.x;
    unsigned *hb = HIST ? hbin + (threadIdx.x >> 5) * AMPDIAG_HIST_BINS : NULL;
    size_t nchunks = (n + chunk - 1) / chunk;
    for (size_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
        for (int r = 0; r < nranks; r++)
            col[r * CU_THREADS] = 0;
        cu_thread_stats t;
        cu_ts_init(t);
        size_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n, len = hi - lo;
        const float *p = x + lo;
        size_t head = ((16u - ((uintptr_t)p & 15u)) & 15u) / 4u; /* values before the first 16-byte boundary */
        if (head > len)
            head = len;
        size_t nv = (len - head) / 4, tail0 = head + 4 * nv;
        if (threadIdx.x < head)
            cu_stats_one(t, col, tab, hb, __float_as_uint(p[threadIdx.x]));
        const float4 *q = reinterpret_cast<const float4 *>(p + head);
        size_t j = threadIdx.x;
        if (PF) { /* the next two loads issued before the values in hand are counted */
            float4 a = j < nv ? __ldg(q + j) : make_float4(0, 0, 0, 0);
            float4 b = j + CU_THREADS < nv ? __ldg(q + j + CU_THREADS) : a;
            for (; j + CU_THREADS < nv; j += 2 * CU_THREADS) {
                size_t k = j + 2 * CU_THREADS;
                float4 na = k < nv ? __ldg(q + k) : a, nb = k + CU_THREADS < nv ? __ldg(q + k + CU_THREADS) : a;
                cu_stats_four(t, col, tab, hb, a);
                cu_stats_four(t, col, tab, hb, b);
                a = na;
                b = nb;
            }
            if (j < nv)
                cu_stats_four(t, col, tab, hb, a);
        } else {
            for (; j + CU_THREADS < nv; j += 2 * CU_THREADS) { /* two loads in flight */
                float4 a = __ldg(q + j), b = __ldg(q + j + CU_THREADS);
                cu_stats_four(t, col, tab, hb, a);
                cu_stats_four(t, col, tab, hb, b);
            }
            if (j < nv)
                cu_stats_four(t, col, tab, hb, __ldg(q + j));
        }
        if (tail0 + threadIdx.x < len)
            cu_stats_one(t, col, tab, hb, __float_as_uint(p[tail0 + threadIdx.x]));
        __syncthreads(); /* every column written */
        cu_chunk_reduce(t, cnt, nranks, warp_sh, &part[c]);
    }
    if (HIST) {
        __syncthreads();
        for (int b = threadIdx.x; b < AMPDIAG_HIST_BINS; b += CU_THREADS) {
            unsigned long long s = 0;
            for (int w = 0; w < CU_WARPS; w++)
                s += hbin[w * AMPDIAG_HIST_BINS + b];
            if (s)
                atomicAdd(&hist[b], s);
        }
    }
}

/* One block of CU_MERGE_THREADS: part[0..np) merged in a fixed order into *out (thread i
 * merges parts i, i + CU_MERGE_THREADS, ... in order, then a fixed tree). */
enum { CU_MERGE_THREADS = 64 };
static __global__ void __launch_bounds__(CU_MERGE_THREADS) cu_parts_merge_k(size_t np, const ck_part *part, ck_part *out)
{
    __shared__ ck_part sh[CU_MERGE_THREADS];
    ck_part m;
    ck_part_init(&m);
    for (size_t i = threadIdx.x; i < np; i += CU_MERGE_THREADS)
        ck_part_merge(&m, &part[i]);
    sh[threadIdx.x] = m;
    __syncthreads();
    for (int s = CU_MERGE_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            ck_part_merge(&sh[threadIdx.x], &sh[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *out = sh[0];
}

/* ---------------------------------------------------------------- counts at least */

/* The thresholds by value, so that the element loop reads them from registers. */
struct cu_ge_set {
    uint32_t t[CK_MAX_GE];
};

template <int K> __device__ inline void cu_ge_one(unsigned *c, const cu_ge_set &s, uint32_t u)
{
    uint32_t a = u & 0x7fffffffu;
#pragma unroll
    for (int j = 0; j < K; j++)
        c[j] += a >= s.t[j];
}

/* counts[j] += #(|x| >= s.t[j]) for j < K over x[0..n): integer counts, so any grid gives the
 * same result; 16-byte loads, 32-bit counters a thread (a thread sees far fewer than 2^32
 * values), a warp's counts summed by shuffles and added with one 64-bit atomic a threshold. */
template <int K>
__global__ void __launch_bounds__(CU_THREADS) cu_ge_k(const float *x, size_t n, cu_ge_set s, unsigned long long *counts)
{
    unsigned c[K];
#pragma unroll
    for (int j = 0; j < K; j++)
        c[j] = 0;
    size_t head = ((16u - ((uintptr_t)x & 15u)) & 15u) / 4u, tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x,
           stride = (size_t)gridDim.x * blockDim.x;
    if (head > n)
        head = n;
    size_t nv = (n - head) / 4, tail0 = head + 4 * nv;
    if (tid < head)
        cu_ge_one<K>(c, s, __float_as_uint(x[tid]));
    if (tid < n - tail0)
        cu_ge_one<K>(c, s, __float_as_uint(x[tail0 + tid]));
    const float4 *q = reinterpret_cast<const float4 *>(x + head);
    for (size_t i = tid; i < nv; i += stride) {
        float4 v = __ldg(q + i);
        cu_ge_one<K>(c, s, __float_as_uint(v.x));
        cu_ge_one<K>(c, s, __float_as_uint(v.y));
        cu_ge_one<K>(c, s, __float_as_uint(v.z));
        cu_ge_one<K>(c, s, __float_as_uint(v.w));
    }
#pragma unroll
    for (int j = 0; j < K; j++) {
        unsigned v = c[j];
        for (int d = 16; d > 0; d >>= 1)
            v += __shfl_down_sync(0xffffffffu, v, d);
        if ((threadIdx.x & 31) == 0 && v)
            atomicAdd(&counts[j], (unsigned long long)v);
    }
}

#endif /* AMPDIAG_KERNELS_STATS_CUH */
