/*
 * cuda_internal.h - what the CUDA backend's files share (CUDA C++ only): the device context,
 * the error record, the launch helpers, the deterministic reductions and the operations each
 * file defines for the table in backend_cuda.cu.
 *
 * Streams. Every operation runs on cudaStreamPerThread, the calling thread's own stream: the
 * training thread's kernels run in the order it issues them, and the tracer thread's
 * statistics (tstats, update_stats) run on its own stream beside them, reading buffers the
 * training thread finished before it posted them (its sync, the fence of backend.h).
 * Operations that return values to the host (the reductions, tstats) copy a small record
 * into pinned memory with cudaMemcpyAsync, record an event behind it and wait for that event
 * only.
 *
 * Errors. Every CUDA and cuBLAS call is checked (CU_CK, CU_BLAS, cu_launched after each
 * kernel launch): the first failure is kept with its file, line and call, and sync returns it
 * (backend.h: operations report no status of their own).
 */
#ifndef AMPDIAG_CUDA_INTERNAL_H
#define AMPDIAG_CUDA_INTERNAL_H

#include "backend/backend.h"
#include "kernels/bodies.h"
#include "kernels/launch.cuh"
#include "kernels/stats.cuh"

#include <condition_variable>
#include <cstddef>
#include <mutex>

#include <cublas_v2.h>
#include <cuda_runtime.h>

/* ------------------------------------------------------------------------------- cuBLAS */

/* The cuBLAS functions used, loaded with dlopen when a cuda backend is first made, so that a
 * program that never trains on a GPU does not load cuBLAS (hundreds of MB) at start-up. */
typedef cublasStatus_t (*cu_blas_create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*cu_blas_destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*cu_blas_set_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*cu_blas_set_math_fn)(cublasHandle_t, cublasMath_t);
typedef cublasStatus_t (*cu_blas_property_fn)(libraryPropertyType, int *);
typedef const char *(*cu_blas_status_fn)(cublasStatus_t);
typedef cublasStatus_t (*cu_blas_gemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                          const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                                          int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                                          cublasGemmAlgo_t);
typedef cublasStatus_t (*cu_blas_gemm_sb_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                             const void *, const void *, cudaDataType, int, long long int,
                                             const void *, cudaDataType, int, long long int, const void *, void *,
                                             cudaDataType, int, long long int, int, cublasComputeType_t,
                                             cublasGemmAlgo_t);

struct cu_blas_api {
    void *lib; /* dlopen handle */
    cu_blas_create_fn create;
    cu_blas_destroy_fn destroy;
    cu_blas_set_stream_fn set_stream;
    cu_blas_set_math_fn set_math;
    cu_blas_property_fn property;
    cu_blas_status_fn status_string;
    cu_blas_gemm_fn gemm;
    cu_blas_gemm_sb_fn gemm_strided_batched;
};

/* ------------------------------------------------------------------------------- context */

/* A device buffer for the partial results of reductions and statistics (the first
 * CU_SLOT_PARTS bytes: each kernel's blocks write there, and the next kernel on the stream may
 * reuse them) and their final results (the next CU_SLOT_RESULTS bytes), which are copied into the
 * slot's pinned host mirror of CU_SLOT_RESULTS bytes. A thread takes a slot for one operation. */
enum {
    CU_NSLOTS = 8,
    CU_SLOT_PARTS = CU_STATS_MAX_CHUNKS * sizeof(ck_part),
    CU_SLOT_RESULTS = 256 * 1024,
};
struct cu_slot {
    void *dev;  /* CU_SLOT_PARTS + CU_SLOT_RESULTS bytes */
    void *host; /* CU_SLOT_RESULTS bytes, pinned */
    cudaEvent_t ready;
    bool busy;
};

struct cuda_ctx {
    int dev;
    int tf32;                 /* GEMMs may use TF32 tensor cores (AMPDIAG_TF32=1) */
    cu_blas_api blas;
    cublasHandle_t handle;
    std::mutex mu;            /* err, slots */
    std::condition_variable slot_freed;
    cu_slot slots[CU_NSLOTS];
    bool failed;
    char err[512];            /* the first failure since the last sync */
    void *scratch;            /* the training thread's scratch (embedding backward) */
    ck_ranks ranks;           /* the statistics' thresholds and binade table (host copy) */
    ck_binade *rank_tab;      /* the binade table on the device (512 entries) */
    int nranks;               /* ranks: 2 (its thresholds + 1) */
    unsigned stats_grid;      /* blocks of cu_tstats_k that fill the device */
    unsigned stats_grid_hist; /* the same for the kernel with the histogram */
    size_t scratch_bytes;
    char desc[512];
    backend bk;
};

static inline cuda_ctx *cu_ctx(const backend *bk) { return static_cast<cuda_ctx *>(bk->ctx); }

/* Keep the first failure: "file:line: call: message". */
void cu_fail(cuda_ctx *c, const char *file, int line, const char *call, const char *msg);
/* Make the backend's device the calling thread's current one (the tracer thread's first call). */
void cu_enter(cuda_ctx *c);
/* After a kernel launch: a launch error is kept as a failure of that kernel. */
void cu_launched(cuda_ctx *c, const char *file, int line, const char *kernel);

#define CU_CK(c, call)                                                                           \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess)                                                                   \
            cu_fail((c), __FILE__, __LINE__, #call, cudaGetErrorString(e_));                     \
    } while (0)

#define CU_BLAS(c, call)                                                                         \
    do {                                                                                         \
        cublasStatus_t s_ = (call);                                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                         \
            cu_fail((c), __FILE__, __LINE__, #call, (c)->blas.status_string(s_));                \
    } while (0)

#define CU_STREAM cudaStreamPerThread

/* The caller's place, for the messages: cu_each(c, n, CU_AT, "relu_fwd", lambda). */
#define CU_AT __FILE__, __LINE__

/* f(i) for i in [0, n) on the calling thread's stream (f a __device__ lambda). */
template <class F> static inline void cu_each(cuda_ctx *c, size_t n, const char *file, int line, const char *name, F f)
{
    if (n == 0)
        return;
    cu_each_k<<<cu_blocks(n), CU_THREADS, 0, CU_STREAM>>>(n, f);
    cu_launched(c, file, line, name);
}

/* A slot for one reduction's partials and result (waits while all are taken). */
cu_slot *cu_slot_take(cuda_ctx *c);
void cu_slot_give(cuda_ctx *c, cu_slot *s);
/* The results at the slot's results offset `off` (from CU_SLOT_PARTS), `bytes` long (at most
 * CU_SLOT_RESULTS), into its pinned host memory (returned): an asynchronous copy behind the
 * kernels that wrote them, then a wait for its event. NULL after a failure (kept for sync). */
const void *cu_slot_fetch(cuda_ctx *c, cu_slot *s, size_t off, size_t bytes);

/* The reduction of add(acc, i) over [0, n) from init, merged with merge, into *out: true, or
 * false after a failure (kept for sync; *out is then init). */
template <class T, class A, class M>
static bool cu_reduce(cuda_ctx *c, size_t n, T init, A add, M merge, T *out, const char *file, int line,
                      const char *name)
{
    static_assert(CU_RED_BLOCKS * sizeof(T) <= CU_SLOT_PARTS && sizeof(T) <= CU_SLOT_RESULTS, "slot too small");
    cu_enter(c);
    cu_slot *s = cu_slot_take(c);
    T *part = static_cast<T *>(s->dev), *res = reinterpret_cast<T *>(static_cast<char *>(s->dev) + CU_SLOT_PARTS);
    unsigned nb = cu_red_blocks(n);
    cu_reduce_part_k<<<nb, CU_THREADS, 0, CU_STREAM>>>(n, init, add, merge, part);
    cu_launched(c, file, line, name);
    cu_reduce_final_k<<<1, CU_THREADS, 0, CU_STREAM>>>(nb, init, merge, part, res);
    cu_launched(c, file, line, name);
    const T *r = static_cast<const T *>(cu_slot_fetch(c, s, 0, sizeof(T)));
    *out = r ? *r : init;
    cu_slot_give(c, s);
    return r != NULL;
}

/* ------------------------------------------------------------------------------- operations */

/* backend_cuda.cu: GEMMs (also used by the attention in ops_cuda.cu) */
void cu_gemm(const backend *bk, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc, bk_rnd r);
/* C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, X_i = X + i * sX (row-major, as cu_gemm;
 * not rounded) */
void cu_gemm_batched(cuda_ctx *c, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     long long sA, const float *B, int ldb, long long sB, float beta, float *C, int ldc, long long sC,
                     int batch);
/* Round the rows x cols block of C with row stride ld. */
void cu_round_block(cuda_ctx *c, float *C, int rows, int cols, int ld, int rk);

/* ops_cuda.cu: buffers, elementwise, layer norm, attention, embedding, cross-entropy */
void cu_fill_table_ops(backend *bk);
/* stats_cuda.cu: reductions, statistics, optimizer */
void cu_fill_table_stats(backend *bk);
/* The statistics kernel's tables on the device and its grid for device p: 0, or -1 with the
 * message in err. */
int cu_stats_setup(cuda_ctx *c, const cudaDeviceProp *p, char *err, size_t errlen);

#endif /* AMPDIAG_CUDA_INTERNAL_H */
