/*
 * stats.cuh - the fused tensor statistics on the device (CUDA C++ only): one pass over the
 * tensor, each block counting every class, the extremes (order-preserving integer keys), the
 * what-if counts and, when asked, the exponent histogram (shared-memory bins), its sums in
 * double; kernels/bodies.h's ck_stats holds one block's share. The launch and the copy of the
 * record back are src/backend/cuda/stats_cuda.cu's.
 */
#ifndef AMPDIAG_KERNELS_STATS_CUH
#define AMPDIAG_KERNELS_STATS_CUH

#include "kernels/bodies.h"
#include "kernels/launch.cuh"

struct cu_stats_merge {
    __device__ void operator()(ck_stats &a, const ck_stats &b) const { ck_stats_merge(&a, &b); }
};

/* One block's share of x into part[blockIdx.x]; the histogram (when hist is not NULL) counted
 * in shared memory, then added to hist (integer additions: the order does not matter). */
__global__ void cu_tstats_part_k(const float *x, size_t n, ck_stats *part, unsigned long long *hist)
{
    __shared__ ck_stats sh[CU_THREADS];
    __shared__ unsigned hb[AMPDIAG_HIST_BINS];
    if (hist)
        for (int k = threadIdx.x; k < AMPDIAG_HIST_BINS; k += blockDim.x)
            hb[k] = 0;
    __syncthreads();
    ck_stats acc;
    ck_stats_init(&acc);
    CU_FOR(i, n)
    {
        uint32_t u = __float_as_uint(x[i]);
        ck_stats_add(&acc, u);
        if (hist)
            atomicAdd(&hb[ck_hist_bin(u)], 1u);
    }
    sh[threadIdx.x] = acc;
    cu_tree(sh, cu_stats_merge());
    if (threadIdx.x == 0)
        part[blockIdx.x] = sh[0];
    if (hist)
        for (int k = threadIdx.x; k < AMPDIAG_HIST_BINS; k += blockDim.x)
            if (hb[k])
                atomicAdd(&hist[k], (unsigned long long)hb[k]);
}

#endif /* AMPDIAG_KERNELS_STATS_CUH */
