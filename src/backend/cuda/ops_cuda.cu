/*
 * ops_cuda.cu - the CUDA backend's tensor operations: buffers, elementwise, layer norm, causal
 * attention, embedding and cross-entropy. Each is a kernel over elements, rows or columns that
 * calls its body in kernels/bodies.h (one thread per element, or per row / column where the CPU sums
 * a row or a column sequentially: the thread sums it in the same order, so the sums are the
 * CPU's bit for bit), with the output rounded to the run's format as it is written. The
 * attention's GEMMs go through cuBLAS (strided-batched over the heads), with the rounding of
 * their outputs fused into the kernel that reads them.
 *
 * Compiled here with nvcc (-Werror); never run: no GPU was available.
 */
#include "backend/cuda/cuda_internal.h"

#include <cub/device/device_radix_sort.cuh>

static int rk_of(bk_rnd r) { return ck_rnd_kind(r.fmt, r.flags); }

/* ------------------------------------------------------------------------------- buffers */

void cu_op_fill(const backend *bk, float *x, float v, size_t n)
{
    cuda_ctx *c = cu_ctx(bk);
    cu_enter(c);
    cu_each(c, n, CU_AT, "fill", [=] __device__(size_t i) { x[i] = v; });
}

void cu_op_scale(const backend *bk, float *x, float a, size_t n)
{
    cuda_ctx *c = cu_ctx(bk);
    cu_enter(c);
    cu_each(c, n, CU_AT, "scale", [=] __device__(size_t i) { x[i] *= a; });
}

void cu_op_axpy(const backend *bk, float *y, float beta, float a, const float *x, size_t n, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    cu_enter(c);
    cu_each(c, n, CU_AT, "axpy", [=] __device__(size_t i) { ck_axpy(y, beta, a, x, i, rk); });
}

void cu_op_round(const backend *bk, float *out, const float *in, size_t n, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    cu_enter(c);
    if (rk == CK_NONE) {
        if (out != in && n)
            CU_CK(c, cudaMemcpyAsync(out, in, n * sizeof *out, cudaMemcpyDeviceToDevice, CU_STREAM));
        return;
    }
    cu_each(c, n, CU_AT, "round", [=] __device__(size_t i) { out[i] = ck_rnd(rk, in[i]); });
}

/* ------------------------------------------------------------------------------- linear */

void cu_op_bias_add(const backend *bk, float *out, const float *bias, int N, int OC, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    cu_enter(c);
    cu_each(c, (size_t)N * (size_t)OC, CU_AT, "bias_add",
            [=] __device__(size_t i) { ck_bias_add(out, bias, i, OC, rk); });
}

void cu_op_bias_grad(const backend *bk, float *dbias, const float *dout, int N, int OC, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    cu_enter(c);
    cu_each(c, (size_t)OC, CU_AT, "bias_grad",
            [=] __device__(size_t j) { ck_bias_grad(dbias, dout, N, OC, (int)j, rk); });
}

/* ------------------------------------------------------------------------------- elementwise */

void cu_op_relu_fwd(const backend *bk, float *out, const float *inp, size_t n, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    cu_enter(c);
    cu_each(c, n, CU_AT, "relu_fwd", [=] __device__(size_t i) { out[i] = ck_rnd(rk, ck_relu(inp[i])); });
}

void cu_op_relu_bwd(const backend *bk, float *dinp, const float *inp, const float *dout, size_t n, float beta,
                    bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r), acc = beta != 0.0f;
    cu_enter(c);
    cu_each(c, n, CU_AT, "relu_bwd",
            [=] __device__(size_t i) { ck_store(&dinp[i], ck_relu_grad(inp[i], dout[i]), acc, rk); });
}

void cu_op_gelu_fwd(const backend *bk, float *out, const float *inp, size_t n, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    cu_enter(c);
    cu_each(c, n, CU_AT, "gelu_fwd", [=] __device__(size_t i) { out[i] = ck_rnd(rk, ck_gelu(inp[i])); });
}

void cu_op_gelu_bwd(const backend *bk, float *dinp, const float *inp, const float *dout, size_t n, float beta,
                    bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r), acc = beta != 0.0f;
    cu_enter(c);
    cu_each(c, n, CU_AT, "gelu_bwd",
            [=] __device__(size_t i) { ck_store(&dinp[i], ck_gelu_grad(inp[i], dout[i]), acc, rk); });
}

void cu_op_add_fwd(const backend *bk, float *out, const float *a, const float *b, size_t n, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    cu_enter(c);
    cu_each(c, n, CU_AT, "add_fwd", [=] __device__(size_t i) { out[i] = ck_rnd(rk, a[i] + b[i]); });
}

/* ------------------------------------------------------------------------------- layer norm */

void cu_op_layernorm_fwd(const backend *bk, float *out, float *mean, float *rstd, const float *inp,
                         const float *weight, const float *bias, int N, int C, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    cu_enter(c);
    cu_each(c, (size_t)N, CU_AT, "layernorm_fwd", [=] __device__(size_t n) {
        ck_layernorm_row(out, mean, rstd, inp, weight, bias, C, (int)n, rk);
    });
}

void cu_op_layernorm_bwd(const backend *bk, float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, const float *mean, const float *rstd, int N, int C,
                         float beta, bk_rnd rx, bk_rnd rw)
{
    cuda_ctx *c = cu_ctx(bk);
    int rkx = rk_of(rx), rkw = rk_of(rw), acc = beta != 0.0f;
    cu_enter(c);
    cu_each(c, (size_t)C, CU_AT, "layernorm_bwd (weights)", [=] __device__(size_t i) {
        ck_layernorm_wgrad(dweight, dbias, dout, inp, mean, rstd, N, C, (int)i, rkw);
    });
    if (dinp)
        cu_each(c, (size_t)N, CU_AT, "layernorm_bwd (input)", [=] __device__(size_t n) {
            ck_layernorm_dx_row(dinp, dout, inp, weight, mean, rstd, C, (int)n, acc, rkx);
        });
}

/* ------------------------------------------------------------------------------- attention */

/* The shapes of one attention call: per batch b, head h's Q, K, V are [T, hs] with row stride
 * 3C at columns h*hs (+C, +2C) of qkv; its scores [T, T] at (b*NH + h)*T*T. */
struct att_shape {
    int B, T, C, NH, hs, C3;
    long long TT;
    float scale;
};

static att_shape att_shape_of(int B, int T, int C, int NH)
{
    att_shape s;
    s.B = B;
    s.T = T;
    s.C = C;
    s.NH = NH;
    s.hs = C / NH;
    s.C3 = 3 * C;
    s.TT = (long long)T * T;
    s.scale = 1.0f / sqrtf((float)s.hs);
    return s;
}

void cu_op_attention_fwd(const backend *bk, float *out, float *att, float *att_r, const float *qkv, int B, int T,
                         int C, int NH, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    att_shape s = att_shape_of(B, T, C, NH);
    cu_enter(c);
    for (int b = 0; b < B; b++) { /* S = Q K^T / sqrt(hs), every head of batch b */
        const float *q = qkv + (size_t)b * (size_t)T * (size_t)s.C3;
        cu_gemm_batched(c, 0, 1, T, T, s.hs, s.scale, q, s.C3, s.hs, q + C, s.C3, s.hs, 0.0f,
                        att + (size_t)b * (size_t)NH * (size_t)s.TT, T, s.TT, NH);
    }
    cu_each(c, (size_t)B * (size_t)NH * (size_t)T, CU_AT, "causal_softmax",
            [=] __device__(size_t row) { ck_softmax_row(att, att_r, T, row, rk); });
    for (int b = 0; b < B; b++) { /* Y = P V */
        const float *v = qkv + (size_t)b * (size_t)T * (size_t)s.C3 + 2 * (size_t)C;
        cu_gemm_batched(c, 0, 0, T, s.hs, T, 1.0f, att_r + (size_t)b * (size_t)NH * (size_t)s.TT, T, s.TT, v, s.C3,
                        s.hs, 0.0f, out + (size_t)b * (size_t)T * (size_t)C, C, s.hs, NH);
    }
    cu_round_block(c, out, B * T, C, C, rk);
}

void cu_op_attention_bwd(const backend *bk, float *dqkv, float *scratch, const float *dout, const float *qkv,
                         const float *att, const float *att_r, int B, int T, int C, int NH, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    att_shape s = att_shape_of(B, T, C, NH);
    cu_enter(c);
    for (int b = 0; b < B; b++) {
        size_t qo = (size_t)b * (size_t)T * (size_t)s.C3, so = (size_t)b * (size_t)NH * (size_t)s.TT;
        const float *dy = dout + (size_t)b * (size_t)T * (size_t)C, *v = qkv + qo + 2 * (size_t)C;
        /* dP = dY V^T; dV = P^T dY */
        cu_gemm_batched(c, 0, 1, T, T, s.hs, 1.0f, dy, C, s.hs, v, s.C3, s.hs, 0.0f, scratch + so, T, s.TT, NH);
        cu_gemm_batched(c, 1, 0, T, s.hs, T, 1.0f, att_r + so, T, s.TT, dy, C, s.hs, 0.0f, dqkv + qo + 2 * (size_t)C,
                        s.C3, s.hs, NH);
    }
    cu_each(c, (size_t)B * (size_t)NH * (size_t)T, CU_AT, "causal_softmax_bwd",
            [=] __device__(size_t row) { ck_softmax_bwd_row(scratch, att, T, row, rk); });
    for (int b = 0; b < B; b++) {
        size_t qo = (size_t)b * (size_t)T * (size_t)s.C3, so = (size_t)b * (size_t)NH * (size_t)s.TT;
        const float *q = qkv + qo;
        /* dQ = dS K / sqrt(hs); dK = dS^T Q / sqrt(hs) */
        cu_gemm_batched(c, 0, 0, T, s.hs, T, s.scale, scratch + so, T, s.TT, q + C, s.C3, s.hs, 0.0f, dqkv + qo, s.C3,
                        s.hs, NH);
        cu_gemm_batched(c, 1, 0, T, s.hs, T, s.scale, scratch + so, T, s.TT, q, s.C3, s.hs, 0.0f, dqkv + qo + C,
                        s.C3, s.hs, NH);
    }
    cu_round_block(c, dqkv, B * T, s.C3, s.C3, rk); /* dQ, dK and dV: each value once */
}

/* ------------------------------------------------------------------------------- embedding */

void cu_op_embed_fwd(const backend *bk, float *out, const int32_t *tokens, const float *wte, const float *wpe,
                     int B, int T, int C, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    cu_enter(c);
    cu_each(c, (size_t)B * (size_t)T * (size_t)C, CU_AT, "embed_fwd",
            [=] __device__(size_t i) { ck_embed(out, tokens, wte, wpe, T, C, i, rk); });
}

/* The training thread's scratch, at least `bytes` (grown by a synchronous reallocation). */
static void *scratch(cuda_ctx *c, size_t bytes)
{
    if (bytes > c->scratch_bytes) {
        if (c->scratch)
            CU_CK(c, cudaFree(c->scratch));
        c->scratch = NULL;
        c->scratch_bytes = 0;
        if (cudaMalloc(&c->scratch, bytes) != cudaSuccess) {
            (void)cudaGetLastError();
            cu_fail(c, __FILE__, __LINE__, "cudaMalloc (embedding scratch)", "out of memory");
            c->scratch = NULL;
            return NULL;
        }
        c->scratch_bytes = bytes;
    }
    return c->scratch;
}

/* The positions 0..n-1 sorted stably by token (CUB's radix sort is stable): keys the sorted
 * tokens, pos their positions, each token's in (b, t) order. false after a failure. */
static bool sort_tokens(cuda_ctx *c, const int32_t *tokens, size_t n, int V, int32_t **keys, int32_t **pos)
{
    int bits = 1;
    while (bits < 31 && (1u << bits) < (unsigned)V)
        bits++;
    const unsigned *kin = reinterpret_cast<const unsigned *>(tokens);
    size_t temp = 0;
    CU_CK(c, cub::DeviceRadixSort::SortPairs(NULL, temp, kin, (unsigned *)NULL, (const int32_t *)NULL,
                                             (int32_t *)NULL, (int)n, 0, bits, CU_STREAM));
    temp = (temp + 255u) & ~(size_t)255u;
    size_t arr = (n * sizeof(int32_t) + 255u) & ~(size_t)255u;
    char *base = static_cast<char *>(scratch(c, temp + 3 * arr));
    if (!base)
        return false;
    int32_t *kout = reinterpret_cast<int32_t *>(base + temp), *vin = kout + arr / sizeof(int32_t);
    int32_t *vout = vin + arr / sizeof(int32_t);
    cu_each(c, n, CU_AT, "embed_bwd (positions)", [=] __device__(size_t i) { vin[i] = (int32_t)i; });
    CU_CK(c, cub::DeviceRadixSort::SortPairs(base, temp, kin, reinterpret_cast<unsigned *>(kout), vin, vout, (int)n,
                                             0, bits, CU_STREAM));
    *keys = kout;
    *pos = vout;
    return true;
}

void cu_op_embed_bwd(const backend *bk, float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B,
                     int T, int C, int V, bk_rnd rw)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(rw);
    size_t n = (size_t)B * (size_t)T;
    cu_enter(c);
    cu_each(c, (size_t)T * (size_t)C, CU_AT, "embed_bwd (positions' gradient)",
            [=] __device__(size_t i) { ck_embed_dwpe(dwpe, dout, B, T, C, i, rk); });
    CU_CK(c, cudaMemsetAsync(dwte, 0, (size_t)V * (size_t)C * sizeof *dwte, CU_STREAM)); /* tokens not seen */
    int32_t *keys = NULL, *pos = NULL;
    if (n == 0 || !sort_tokens(c, tokens, n, V, &keys, &pos))
        return;
    /* one thread per (sorted position, column); the first position of each token sums its run */
    cu_each(c, n * (size_t)C, CU_AT, "embed_bwd (tokens' gradient)", [=] __device__(size_t i) {
        size_t k = i / (size_t)C;
        if (k == 0 || keys[k] != keys[k - 1])
            ck_embed_dwte(dwte, dout, keys, pos, k, n, C, (int)(i % (size_t)C), rk);
    });
}

/* ------------------------------------------------------------------------------- cross-entropy */

void cu_op_xent_fwd(const backend *bk, float *losses, float *probs, const float *logits, const int32_t *targets,
                    int N, int V)
{
    cuda_ctx *c = cu_ctx(bk);
    cu_enter(c);
    cu_each(c, (size_t)N, CU_AT, "xent_fwd",
            [=] __device__(size_t n) { ck_xent_row(losses, probs, logits, targets, V, (int)n); });
}

void cu_op_xent_bwd(const backend *bk, float *dlogits, const float *probs, const int32_t *targets, int N, int V,
                    float dscale, bk_rnd r)
{
    cuda_ctx *c = cu_ctx(bk);
    int rk = rk_of(r);
    cu_enter(c);
    cu_each(c, (size_t)N * (size_t)V, CU_AT, "xent_bwd",
            [=] __device__(size_t i) { ck_xent_grad(dlogits, probs, targets, V, dscale, i, rk); });
}

/* ------------------------------------------------------------------------------- the table */

void cu_fill_table_ops(backend *bk)
{
    bk->fill = cu_op_fill;
    bk->scale = cu_op_scale;
    bk->axpy = cu_op_axpy;
    bk->round = cu_op_round;
    bk->bias_add = cu_op_bias_add;
    bk->bias_grad = cu_op_bias_grad;
    bk->relu_fwd = cu_op_relu_fwd;
    bk->relu_bwd = cu_op_relu_bwd;
    bk->gelu_fwd = cu_op_gelu_fwd;
    bk->gelu_bwd = cu_op_gelu_bwd;
    bk->add_fwd = cu_op_add_fwd;
    bk->layernorm_fwd = cu_op_layernorm_fwd;
    bk->layernorm_bwd = cu_op_layernorm_bwd;
    bk->attention_fwd = cu_op_attention_fwd;
    bk->attention_bwd = cu_op_attention_bwd;
    bk->embed_fwd = cu_op_embed_fwd;
    bk->embed_bwd = cu_op_embed_bwd;
    bk->xent_fwd = cu_op_xent_fwd;
    bk->xent_bwd = cu_op_xent_bwd;
}
