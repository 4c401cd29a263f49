/*
 * launch.cuh - the shapes of the CUDA backend's kernels (device code; CUDA C++ only): a kernel
 * over elements in a grid-stride loop, and the deterministic reductions: a grid of
 * cu_red_blocks(n) blocks (a function of n only) of CU_THREADS threads, each thread adding its
 * grid-stride share in index order, each block merging its threads in a fixed tree, then one
 * block merging the blocks' partials in a fixed tree. The same input gives the same bits on
 * any GPU. The host glue that launches them is src/backend/cuda/cuda_internal.h.
 */
#ifndef AMPDIAG_KERNELS_LAUNCH_CUH
#define AMPDIAG_KERNELS_LAUNCH_CUH

#include <cstddef>

#define CU_THREADS 256

/* Blocks for n elements in a grid-stride loop (at most 4096: every thread then takes several). */
static inline unsigned cu_blocks(size_t n)
{
    size_t b = (n + CU_THREADS - 1) / CU_THREADS;
    return b == 0 ? 1u : b > 4096 ? 4096u : (unsigned)b;
}

#define CU_FOR(i, n)                                                                             \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)(n);              \
         i += (size_t)gridDim.x * blockDim.x)

template <class F> __global__ void cu_each_k(size_t n, F f)
{
    CU_FOR(i, n)
    f(i);
}

/* ---------------------------------------------------------------- deterministic reductions */
enum { CU_RED_BLOCKS = 128 };
static inline unsigned cu_red_blocks(size_t n)
{
    size_t b = (n + CU_THREADS - 1) / CU_THREADS;
    return b == 0 ? 1u : b > CU_RED_BLOCKS ? (unsigned)CU_RED_BLOCKS : (unsigned)b;
}

/* Merge sh[0..CU_THREADS) into sh[0] in a fixed tree (every thread of the block calls it). */
template <class T, class M> __device__ inline void cu_tree(T *sh, M merge)
{
    __syncthreads();
    for (int s = CU_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            merge(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
}

template <class T, class A, class M> __global__ void cu_reduce_part_k(size_t n, T init, A add, M merge, T *part)
{
    __shared__ T sh[CU_THREADS];
    T acc = init;
    CU_FOR(i, n)
    add(acc, i);
    sh[threadIdx.x] = acc;
    cu_tree(sh, merge);
    if (threadIdx.x == 0)
        part[blockIdx.x] = sh[0];
}

/* One block: part[0..nb) merged into *out. */
template <class T, class M> __global__ void cu_reduce_final_k(unsigned nb, T init, M merge, const T *part, T *out)
{
    __shared__ T sh[CU_THREADS];
    sh[threadIdx.x] = threadIdx.x < nb ? part[threadIdx.x] : init;
    cu_tree(sh, merge);
    if (threadIdx.x == 0)
        *out = sh[0];
}

#endif /* AMPDIAG_KERNELS_LAUNCH_CUH */
