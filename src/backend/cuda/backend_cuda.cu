/*
 * backend_cuda.cu - the CUDA backend (backend.h): making it for a device, its memory, its
 * error record and fence, the GEMMs through cuBLAS, and its table. The operations live in
 * ops_cuda.cu (buffers, elementwise, layer norm, attention, embedding, cross-entropy) and
 * stats_cuda.cu (reductions, tensor statistics, optimizer); their per-element arithmetic in
 * kernels/bodies.h, shared with the host tests; the kernels themselves in kernels/ (*.cuh).
 *
 * GEMMs: cublasGemmEx / cublasGemmStridedBatchedEx on FP32 operands (already rounded by the
 * caller, backend.h's rounding contract) with CUBLAS_COMPUTE_32F, reduced-precision
 * reductions disallowed, and TF32 tensor cores only when AMPDIAG_TF32=1 is set when the
 * backend is made (CUBLAS_COMPUTE_32F_FAST_TF32; the device description in the trace says
 * which). The result is then rounded to the run's format by a kernel, as the CPU backend
 * rounds after sgemm. cuBLAS sums in an order of its own: GEMM outputs agree with the CPU's to
 * FP32 rounding, not bit for bit.
 *
 * Written and compiled with nvcc (-Werror) on a machine without a GPU: it has never run.
 */
#include "config.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_check.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------- errors */

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

void cu_fail(cuda_ctx *c, const char *file, int line, const char *call, const char *msg)
{
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->failed)
        return;
    c->failed = true;
    snprintf(c->err, sizeof c->err, "%s:%d: %s: %s", base_name(file), line, call, msg);
}

void cu_launched(cuda_ctx *c, const char *file, int line, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        char call[96];
        snprintf(call, sizeof call, "kernel %s", kernel);
        cu_fail(c, file, line, call, cudaGetErrorString(e));
    }
}

void cu_enter(cuda_ctx *c)
{
    int d = -1;
    if (cudaGetDevice(&d) != cudaSuccess || d != c->dev)
        CU_CK(c, cudaSetDevice(c->dev));
}

/* The fence: the calling thread's stream drained, then the first failure since the last sync
 * (any thread's) returned and cleared. */
static int cu_sync(const backend *bk, char *err, size_t errlen)
{
    cuda_ctx *c = cu_ctx(bk);
    cu_enter(c);
    CU_CK(c, cudaStreamSynchronize(CU_STREAM));
    std::lock_guard<std::mutex> lock(c->mu);
    if (err && errlen)
        snprintf(err, errlen, "%s", c->failed ? c->err : "");
    int rc = c->failed ? -1 : 0;
    c->failed = false;
    c->err[0] = 0;
    return rc;
}

/* ------------------------------------------------------------------------------- slots */

cu_slot *cu_slot_take(cuda_ctx *c)
{
    std::unique_lock<std::mutex> lock(c->mu);
    for (;;) {
        for (int i = 0; i < CU_NSLOTS; i++)
            if (!c->slots[i].busy) {
                c->slots[i].busy = true;
                return &c->slots[i];
            }
        c->slot_freed.wait(lock);
    }
}

void cu_slot_give(cuda_ctx *c, cu_slot *s)
{
    {
        std::lock_guard<std::mutex> lock(c->mu);
        s->busy = false;
    }
    c->slot_freed.notify_one();
}

const void *cu_slot_fetch(cuda_ctx *c, cu_slot *s, size_t off, size_t bytes)
{
    char *dev = static_cast<char *>(s->dev) + CU_SLOT_PARTS + off;
    cudaError_t e = cudaMemcpyAsync(s->host, dev, bytes, cudaMemcpyDeviceToHost, CU_STREAM);
    if (e == cudaSuccess)
        e = cudaEventRecord(s->ready, CU_STREAM);
    if (e == cudaSuccess)
        e = cudaEventSynchronize(s->ready);
    if (e != cudaSuccess) {
        cu_fail(c, __FILE__, __LINE__, "reading a reduction's result (cudaMemcpyAsync, cudaEventSynchronize)",
                cudaGetErrorString(e));
        return NULL;
    }
    return s->host;
}

/* ------------------------------------------------------------------------------- memory */

static void *cu_alloc(const backend *bk, size_t bytes)
{
    cuda_ctx *c = cu_ctx(bk);
    cu_enter(c);
    size_t n = bytes ? (bytes + 255u) & ~(size_t)255u : 256u;
    void *p = NULL;
    if (n < bytes)
        return NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is the caller's to report, not a failure */
        return NULL;
    }
    /* zero-filled, and finished before any thread's stream may use it */
    CU_CK(c, cudaMemsetAsync(p, 0, n, CU_STREAM));
    CU_CK(c, cudaStreamSynchronize(CU_STREAM));
    return p;
}

static void cu_free(const backend *bk, void *p)
{
    cuda_ctx *c = cu_ctx(bk);
    if (!p)
        return;
    cu_enter(c);
    CU_CK(c, cudaFree(p));
}

/* Host memory is pageable: each copy is waited for, so the caller may reuse or read it. */
static void cu_to_device(const backend *bk, void *dst, const void *src_host, size_t bytes)
{
    cuda_ctx *c = cu_ctx(bk);
    if (!bytes)
        return;
    cu_enter(c);
    CU_CK(c, cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, CU_STREAM));
    CU_CK(c, cudaStreamSynchronize(CU_STREAM));
}

static void cu_to_host(const backend *bk, void *dst_host, const void *src, size_t bytes)
{
    cuda_ctx *c = cu_ctx(bk);
    if (!bytes)
        return;
    cu_enter(c);
    CU_CK(c, cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, CU_STREAM));
    CU_CK(c, cudaStreamSynchronize(CU_STREAM));
}

/* ------------------------------------------------------------------------------- GEMM */

void cu_round_block(cuda_ctx *c, float *C, int rows, int cols, int ld, int rk)
{
    if (rk == CK_NONE || rows <= 0 || cols <= 0)
        return;
    size_t n = (size_t)rows * (size_t)cols;
    cu_each(c, n, CU_AT, "round_block", [=] __device__(size_t i) {
        float *x = C + (i / (size_t)cols) * (size_t)ld + i % (size_t)cols;
        *x = ck_rnd(rk, *x);
    });
}

/* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS is given B first,
 * with the same transposition flags, and the dimensions N, M. */
void cu_gemm_batched(cuda_ctx *c, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     long long sA, const float *B, int ldb, long long sB, float beta, float *C, int ldc, long long sC,
                     int batch)
{
    cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasComputeType_t ct = c->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    if (batch == 1)
        CU_BLAS(c, c->blas.gemm(c->handle, opb, opa, N, M, K, &alpha, B, CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C,
                                CUDA_R_32F, ldc, ct, CUBLAS_GEMM_DEFAULT));
    else
        CU_BLAS(c, c->blas.gemm_strided_batched(c->handle, opb, opa, N, M, K, &alpha, B, CUDA_R_32F, ldb, sB, A,
                                                CUDA_R_32F, lda, sA, &beta, C, CUDA_R_32F, ldc, sC, batch, ct,
                                                CUBLAS_GEMM_DEFAULT));
}

void cu_gemm(const backend *bk, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    if (M <= 0 || N <= 0)
        return;
    cu_enter(c);
    if (K <= 0) { /* C = beta*C, as the CPU backend does it (BLAS libraries differ on K == 0) */
        size_t n = (size_t)M * (size_t)N;
        cu_each(c, n, CU_AT, "gemm_k0", [=] __device__(size_t i) {
            float *x = C + (i / (size_t)N) * (size_t)ldc + i % (size_t)N;
            *x = beta == 0.0f ? 0.0f : beta * *x;
        });
    } else {
        cu_gemm_batched(c, ta, tb, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
    }
    cu_round_block(c, C, M, N, ldc, ck_rnd_kind(r.fmt, r.flags));
}

/* ------------------------------------------------------------------------------- self-check */

static int cu_self_check(const backend *bk, char *msg, size_t msglen)
{
    cuda_ctx *c = cu_ctx(bk);
    uint64_t bad[4];
    char err[256];
    if (ampdiag_cuda_check_numfmt_on(c->dev, bad, err, sizeof err) != 0) {
        snprintf(msg, msglen, "%s", err);
        return -1;
    }
    uint64_t total = bad[0] + bad[1] + bad[2] + bad[3];
    snprintf(msg, msglen,
             "numfmt.h on cuda:%d against CUDA's conversions, all 2^32 float32 patterns: %llu FP16 and %llu BF16 "
             "encodings, %llu FP16 and %llu BF16 decodings differ",
             c->dev, (unsigned long long)bad[0], (unsigned long long)bad[1], (unsigned long long)bad[2],
             (unsigned long long)bad[3]);
    return total ? 1 : 0;
}

/* ------------------------------------------------------------------------------- making one */

#define CU_STR2(x) #x
#define CU_STR(x) CU_STR2(x)

/* dlsym into a typed pointer; false when the symbol is missing. */
template <class F> static bool cu_sym(void *lib, const char *name, F *fn)
{
    void *p = dlsym(lib, name);
    *fn = reinterpret_cast<F>(p);
    return p != NULL;
}

/* cuBLAS, from the library this build was compiled against (its major version), found on the
 * program's run path (configure sets it to the toolkit's library folder) or the loader's. */
static int load_cublas(cu_blas_api *a, char *err, size_t errlen)
{
    const char *soname = "libcublas.so." CU_STR(CUBLAS_VER_MAJOR);
    a->lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
#ifdef AMPDIAG_CUDA_LIBDIR
    if (!a->lib)
        a->lib = dlopen(AMPDIAG_CUDA_LIBDIR "/libcublas.so." CU_STR(CUBLAS_VER_MAJOR), RTLD_NOW | RTLD_LOCAL);
#endif
    if (!a->lib) {
        snprintf(err, errlen, "cannot load cuBLAS (%s): %s", soname, dlerror());
        return -1;
    }
    static const char *const names[] = {"cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2",
                                        "cublasSetMathMode", "cublasGetProperty", "cublasGetStatusString",
                                        "cublasGemmEx", "cublasGemmStridedBatchedEx"};
    bool ok[8] = {cu_sym(a->lib, names[0], &a->create), cu_sym(a->lib, names[1], &a->destroy),
                  cu_sym(a->lib, names[2], &a->set_stream), cu_sym(a->lib, names[3], &a->set_math),
                  cu_sym(a->lib, names[4], &a->property), cu_sym(a->lib, names[5], &a->status_string),
                  cu_sym(a->lib, names[6], &a->gemm), cu_sym(a->lib, names[7], &a->gemm_strided_batched)};
    for (int i = 0; i < 8; i++)
        if (!ok[i]) {
            snprintf(err, errlen, "%s has no %s", soname, names[i]);
            return -1;
        }
    return 0;
}

/* The typedefs of cuda_internal.h match cuBLAS's prototypes (checked here, not called). */
static_assert(sizeof(static_cast<cu_blas_gemm_fn>(&cublasGemmEx)) > 0, "cublasGemmEx");
static_assert(sizeof(static_cast<cu_blas_gemm_sb_fn>(&cublasGemmStridedBatchedEx)) > 0, "cublasGemmStridedBatchedEx");
static_assert(sizeof(static_cast<cu_blas_create_fn>(&cublasCreate_v2)) > 0, "cublasCreate_v2");
static_assert(sizeof(static_cast<cu_blas_set_stream_fn>(&cublasSetStream_v2)) > 0, "cublasSetStream_v2");
static_assert(sizeof(static_cast<cu_blas_set_math_fn>(&cublasSetMathMode)) > 0, "cublasSetMathMode");
static_assert(sizeof(static_cast<cu_blas_property_fn>(&cublasGetProperty)) > 0, "cublasGetProperty");
static_assert(sizeof(static_cast<cu_blas_status_fn>(&cublasGetStatusString)) > 0, "cublasGetStatusString");
static_assert(sizeof(static_cast<cu_blas_destroy_fn>(&cublasDestroy_v2)) > 0, "cublasDestroy_v2");

/* Teardown after a failed creation: the failure that led here is the message; what these calls
 * return adds nothing to it. */
static void destroy(cuda_ctx *c)
{
    for (int i = 0; i < CU_NSLOTS; i++) {
        if (c->slots[i].dev)
            (void)cudaFree(c->slots[i].dev);
        if (c->slots[i].host)
            (void)cudaFreeHost(c->slots[i].host);
        if (c->slots[i].ready)
            (void)cudaEventDestroy(c->slots[i].ready);
    }
    if (c->rank_tab)
        (void)cudaFree(c->rank_tab);
    if (c->handle)
        (void)c->blas.destroy(c->handle);
    if (c->blas.lib)
        dlclose(c->blas.lib);
    delete c;
}

/* "1.2" from CUDA's version numbers (1000 * major + 10 * minor). */
static void version_text(int v, char *buf, size_t n) { snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10); }

static void describe(cuda_ctx *c, const cudaDeviceProp *p)
{
    int drv = 0, rt = 0, bmaj = 0, bmin = 0, bpat = 0;
    char dv[16] = "?", rv[16] = "?";
    if (cudaDriverGetVersion(&drv) == cudaSuccess)
        version_text(drv, dv, sizeof dv);
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
        version_text(rt, rv, sizeof rv);
    if (c->blas.property(MAJOR_VERSION, &bmaj) != CUBLAS_STATUS_SUCCESS ||
        c->blas.property(MINOR_VERSION, &bmin) != CUBLAS_STATUS_SUCCESS ||
        c->blas.property(PATCH_LEVEL, &bpat) != CUBLAS_STATUS_SUCCESS)
        bmaj = bmin = bpat = -1;
    snprintf(c->desc, sizeof c->desc,
             "%s (cuda:%d, sm_%d%d, driver %s, CUDA runtime %s, cuBLAS %d.%d.%d; FP32 GEMMs in cuBLAS with TF32 "
             "%s; FP16/BF16 emulated exactly by rounding FP32 results)",
             p->name, c->dev, p->major, p->minor, dv, rv, bmaj, bmin, bpat, c->tf32 ? "on (AMPDIAG_TF32=1)" : "off");
}

/* Device memory, pinned mirrors and events of the reduction slots. */
static int make_slots(cuda_ctx *c, char *err, size_t errlen)
{
    for (int i = 0; i < CU_NSLOTS; i++) {
        cu_slot *s = &c->slots[i];
        cudaError_t e = cudaMalloc(&s->dev, (size_t)CU_SLOT_PARTS + CU_SLOT_RESULTS);
        if (e == cudaSuccess)
            e = cudaMallocHost(&s->host, CU_SLOT_RESULTS);
        if (e == cudaSuccess)
            e = cudaEventCreateWithFlags(&s->ready, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            snprintf(err, errlen, "cuda:%d: reduction buffers: %s", c->dev, cudaGetErrorString(e));
            return -1;
        }
    }
    return 0;
}

/* cuBLAS's handle on the calling thread's stream, FP32 GEMMs without reduced precision. */
static int make_handle(cuda_ctx *c, char *err, size_t errlen)
{
    if (load_cublas(&c->blas, err, errlen))
        return -1;
    cublasStatus_t s = c->blas.create(&c->handle);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = c->blas.set_stream(c->handle, CU_STREAM);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = c->blas.set_math(c->handle, (cublasMath_t)((c->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) |
                                                       CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (s != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cuda:%d: cuBLAS: %s", c->dev, c->blas.status_string(s));
        return -1;
    }
    return 0;
}

static void fill_table(cuda_ctx *c)
{
    backend *bk = &c->bk;
    memset(bk, 0, sizeof *bk);
    bk->name = "cuda";
    bk->desc = c->desc;
    bk->ctx = c;
    bk->alloc = cu_alloc;
    bk->free = cu_free;
    bk->to_device = cu_to_device;
    bk->to_host = cu_to_host;
    bk->gemm = cu_gemm;
    bk->sync = cu_sync;
    bk->self_check = cu_self_check;
    cu_fill_table_ops(bk);
    cu_fill_table_stats(bk);
}

static cuda_ctx *make(int dev, char *err, size_t errlen)
{
    cuda_ctx *c = new cuda_ctx();
    c->dev = dev;
    const char *tf = getenv("AMPDIAG_TF32");
    c->tf32 = tf && strcmp(tf, "1") == 0;
    cudaDeviceProp p;
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess)
        e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda:%d: %s", dev, cudaGetErrorString(e));
        (void)cudaGetLastError();
        destroy(c);
        return NULL;
    }
    if (make_handle(c, err, errlen) || make_slots(c, err, errlen) || cu_stats_setup(c, &p, err, errlen)) {
        (void)cudaGetLastError();
        destroy(c);
        return NULL;
    }
    describe(c, &p);
    fill_table(c);
    return c;
}

enum { CU_MAX_DEVICES = 64 };

/* Can device `device` run here? 0, or -1 with the reason in err. Makes no context. */
extern "C" int backend_cuda_available(int device, char *err, size_t errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
        snprintf(err, errlen, "the cuda backend cannot run here: no usable CUDA device (cudaGetDeviceCount: %s)",
                 e != cudaSuccess ? cudaGetErrorString(e) : "no device");
        (void)cudaGetLastError();
        return -1;
    }
    if (device < 0 || device >= n || device >= CU_MAX_DEVICES) {
        if (n == 1)
            snprintf(err, errlen, "this machine has one CUDA device (cuda:0)");
        else
            snprintf(err, errlen, "this machine has %d CUDA devices (cuda:0 to cuda:%d)", n, n - 1);
        return -1;
    }
    return 0;
}

extern "C" const backend *backend_cuda(int device, char *err, size_t errlen)
{
    static std::mutex made_mu;
    static cuda_ctx *made[CU_MAX_DEVICES];
    std::lock_guard<std::mutex> lock(made_mu);
    if (backend_cuda_available(device, err, errlen))
        return NULL;
    if (!made[device])
        made[device] = make(device, err, errlen);
    return made[device] ? &made[device]->bk : NULL;
}
