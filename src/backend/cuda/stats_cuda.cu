/*
 * stats_cuda.cu - the CUDA backend's reductions, fused tensor statistics and optimizer:
 * sum, sum of squares, non-finite counts and the gradient norm as deterministic reductions in
 * double (cuda_internal.h: a fixed grid and fixed trees, so the same data gives the same bits
 * on any GPU, though not the CPU's bits: it adds in another order); ampdiag_tstats_compute's
 * record as one kernel pass over the tensor (kernels/stats.cuh: every count, the extremes and
 * the exponent histogram exact, the sums in double, chunks of a size that depends on n alone)
 * and a merge of the chunks into a small result that is copied back; the counts at least some
 * thresholds behind the scaled FP8 what-if counts (count_at_least, whatif_scaled); the
 * optimizer step and the lost-update counts element by element with kernels/bodies.h's bodies
 * (the CPU's arithmetic bit for bit).
 *
 * The statistics run on the calling thread's stream: the tracer thread's own, beside the
 * training thread's kernels. tstats_many and update_stats_many queue the kernels of every
 * tensor they are given, then copy all the results back with one asynchronous copy into pinned
 * memory and wait once for its event: the tracer waits once per job (one kind of tensor of every
 * layer), not once per tensor.
 */
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/optim_setup.h"
#include "kernels/stats.cuh"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------------- reductions */

struct cu_add_merge {
    template <class T> __device__ void operator()(T &a, const T &b) const { a += b; }
};

double cu_op_sum(const backend *bk, const float *x, size_t n)
{
    double v;
    bool ok = cu_reduce(cu_ctx(bk), n, 0.0, [=] __device__(double &acc, size_t i) { acc += (double)x[i]; },
                        cu_add_merge(), &v, CU_AT, "sum");
    return ok ? v : NAN;
}

double cu_op_sumsq(const backend *bk, const float *x, size_t n)
{
    double v;
    bool ok = cu_reduce(cu_ctx(bk), n, 0.0,
                        [=] __device__(double &acc, size_t i) { acc += (double)x[i] * (double)x[i]; },
                        cu_add_merge(), &v, CU_AT, "sumsq");
    return ok ? v : NAN;
}

size_t cu_op_count_nonfinite(const backend *bk, const float *x, size_t n)
{
    unsigned long long v;
    bool ok = cu_reduce(cu_ctx(bk), n, 0ull,
                        [=] __device__(unsigned long long &acc, size_t i) {
                            acc += (ampdiag_f32_bits(x[i]) & 0x7f800000u) == 0x7f800000u;
                        },
                        cu_add_merge(), &v, CU_AT, "count_nonfinite");
    return ok ? (size_t)v : n; /* after a failure: as if nothing were finite (sync reports it) */
}

struct cu_gn {
    double ss;
    unsigned long long nonfinite;
};

struct cu_gn_merge {
    __device__ void operator()(cu_gn &a, const cu_gn &b) const
    {
        a.ss += b.ss;
        a.nonfinite += b.nonfinite;
    }
};

void cu_op_grad_norm(const backend *bk, const float *g, size_t n, float inv_scale, double *sumsq,
                     uint64_t *nonfinite)
{
    cu_gn v, init = {0.0, 0ull};
    bool ok = cu_reduce(cu_ctx(bk), n, init,
                        [=] __device__(cu_gn &acc, size_t i) {
                            ck_grad_norm_add(&acc.ss, &acc.nonfinite, g[i], inv_scale);
                        },
                        cu_gn_merge(), &v, CU_AT, "grad_norm");
    if (!ok) { /* as if every value were non-finite: the step is skipped, sync reports why */
        v.ss = 0.0;
        v.nonfinite = n;
    }
    *sumsq += v.ss;
    *nonfinite += v.nonfinite;
}

/* ------------------------------------------------------------------------------- statistics */

int cu_stats_setup(cuda_ctx *c, const cudaDeviceProp *p, char *err, size_t errlen)
{
    if (ck_ranks_build(&c->ranks) != 0) {
        snprintf(err, errlen, "cuda:%d: the format table needs more thresholds than the statistics kernel holds",
                 c->dev);
        return -1;
    }
    c->nranks = 2 * (c->ranks.k + 1);
    int per_sm = 0, per_sm_h = 0;
    size_t smem = cu_stats_smem(c->nranks), smem32 = cu_stats_smem<unsigned>(c->nranks);
    cudaError_t e = cudaMalloc(&c->rank_tab, sizeof c->ranks.bin);
    if (e == cudaSuccess)
        e = cudaMemcpy(c->rank_tab, c->ranks.bin, sizeof c->ranks.bin, cudaMemcpyHostToDevice);
    /* (static and dynamic shared memory together may pass the default 48 KB) */
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(cu_tstats_k<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(cu_tstats_k<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(cu_tstats_k<false, unsigned>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)smem32);
    if (e == cudaSuccess)
        e = cudaFuncSetAttribute(cu_tstats_k<true, unsigned>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)smem32);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cu_tstats_k<false>, CU_THREADS, smem);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_h, cu_tstats_k<true>, CU_THREADS, smem);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda:%d: statistics kernel: %s", c->dev, cudaGetErrorString(e));
        return -1;
    }
    c->stats_grid = (unsigned)((per_sm > 0 ? per_sm : 1) * p->multiProcessorCount);
    c->stats_grid_hist = (unsigned)((per_sm_h > 0 ? per_sm_h : 1) * p->multiProcessorCount);
    return 0;
}

/* What one statistics request leaves in the slot's results: the merged part, then the
 * histogram when asked. */
static const size_t CU_HIST_BYTES = AMPDIAG_HIST_BINS * sizeof(unsigned long long);
static_assert(sizeof(ck_part) % sizeof(unsigned long long) == 0, "histogram alignment");
static size_t stats_result_bytes(bool hist) { return sizeof(ck_part) + (hist ? CU_HIST_BYTES : 0); }

/* Queue the statistics of x[0..n) on the calling thread's stream, their result at the slot's
 * results offset off (stats_result_bytes(hist) bytes). n > 0. */
static void stats_launch(cuda_ctx *c, cu_slot *sl, const float *x, size_t n, bool hist, size_t off)
{
    char *d = static_cast<char *>(sl->dev);
    ck_part *part = reinterpret_cast<ck_part *>(d);
    ck_part *rec = reinterpret_cast<ck_part *>(d + CU_SLOT_PARTS + off);
    unsigned long long *h = reinterpret_cast<unsigned long long *>(d + CU_SLOT_PARTS + off + sizeof(ck_part));
    size_t chunk = cu_stats_chunk(n), nchunks = (n + chunk - 1) / chunk;
    unsigned grid = hist ? c->stats_grid_hist : c->stats_grid;
    if (nchunks < grid)
        grid = (unsigned)nchunks;
    size_t smem = cu_stats_smem(c->nranks), smem32 = cu_stats_smem<unsigned>(c->nranks);
    bool wide = chunk / CU_THREADS >= 65535; /* (n >= 2^36: a thread's count may pass 16 bits) */
    if (hist)
        CU_CK(c, cudaMemsetAsync(h, 0, CU_HIST_BYTES, CU_STREAM));
    if (hist && wide)
        cu_tstats_k<true, unsigned><<<grid, CU_THREADS, smem32, CU_STREAM>>>(x, n, chunk, c->rank_tab, c->nranks, part,
                                                                            h);
    else if (hist)
        cu_tstats_k<true><<<grid, CU_THREADS, smem, CU_STREAM>>>(x, n, chunk, c->rank_tab, c->nranks, part, h);
    else if (wide)
        cu_tstats_k<false, unsigned><<<grid, CU_THREADS, smem32, CU_STREAM>>>(x, n, chunk, c->rank_tab, c->nranks,
                                                                             part, NULL);
    else
        cu_tstats_k<false><<<grid, CU_THREADS, smem, CU_STREAM>>>(x, n, chunk, c->rank_tab, c->nranks, part, NULL);
    cu_launched(c, CU_AT, "tstats");
    cu_parts_merge_k<<<1, CU_MERGE_THREADS, 0, CU_STREAM>>>(nchunks, part, rec);
    cu_launched(c, CU_AT, "tstats (chunks)");
}

/* The record and histogram of n values from a result r (stats_launch's, copied back). */
static void stats_take(const cuda_ctx *c, const char *r, size_t n, ampdiag_tstats *s, ampdiag_hist *h)
{
    ck_part p;
    memcpy(&p, r, sizeof p);
    ck_part_record(&c->ranks, &p, n, s);
    if (h)
        memcpy(h->bin, r + sizeof(ck_part), CU_HIST_BYTES);
}

/* Each request's record: as many as fit the results launched, copied back and read at a time
 * (one wait each round; tensors with n == 0 get the empty record without a launch). */
static void stats_many(cuda_ctx *c, size_t k, const bk_stats_req *req)
{
    for (size_t i = 0; i < k; i++) {
        ampdiag_tstats_init(req[i].s);
        if (req[i].h)
            ampdiag_hist_init(req[i].h);
    }
    cu_enter(c);
    cu_slot *sl = cu_slot_take(c);
    size_t i = 0;
    while (i < k) {
        size_t j = i, off = 0;
        for (; j < k && off + stats_result_bytes(req[j].h != NULL) <= CU_SLOT_RESULTS; j++) {
            if (req[j].n > 0)
                stats_launch(c, sl, req[j].x, req[j].n, req[j].h != NULL, off);
            off += stats_result_bytes(req[j].h != NULL);
        }
        const char *r = static_cast<const char *>(cu_slot_fetch(c, sl, 0, off));
        if (!r)
            break; /* (the failure is kept for sync; the records stay empty) */
        for (off = 0; i < j; i++) {
            if (req[i].n > 0)
                stats_take(c, r + off, req[i].n, req[i].s, req[i].h);
            off += stats_result_bytes(req[i].h != NULL);
        }
    }
    cu_slot_give(c, sl);
}

void cu_op_tstats(const backend *bk, const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h)
{
    bk_stats_req r = {x, n, s, h};
    stats_many(cu_ctx(bk), 1, &r);
}

void cu_op_tstats_many(const backend *bk, size_t k, const bk_stats_req *req) { stats_many(cu_ctx(bk), k, req); }

/* ------------------------------------------------------------------------------- counts at least */

/* Queue counts[j] := #(|x| >= ge[j]) for k <= CK_MAX_GE thresholds (one pass) into the slot's
 * results at off (k 64-bit counts). */
static void ge_launch(cuda_ctx *c, cu_slot *sl, const float *x, size_t n, size_t k, const uint32_t *ge, size_t off)
{
    cu_ge_set set;
    for (int j = 0; j < CK_MAX_GE; j++)
        set.t[j] = (size_t)j < k ? ge[j] : CK_NO_THRESH;
    unsigned long long *cnt = reinterpret_cast<unsigned long long *>(static_cast<char *>(sl->dev) + CU_SLOT_PARTS + off);
    CU_CK(c, cudaMemsetAsync(cnt, 0, k * sizeof *cnt, CU_STREAM));
    size_t want = (n / 4 + CU_THREADS - 1) / CU_THREADS;
    unsigned grid = want < c->stats_grid ? (unsigned)(want ? want : 1) : c->stats_grid;
    if (k <= 2)
        cu_ge_k<2><<<grid, CU_THREADS, 0, CU_STREAM>>>(x, n, set, cnt);
    else if (k <= 4)
        cu_ge_k<4><<<grid, CU_THREADS, 0, CU_STREAM>>>(x, n, set, cnt);
    else
        cu_ge_k<8><<<grid, CU_THREADS, 0, CU_STREAM>>>(x, n, set, cnt);
    cu_launched(c, CU_AT, "count_at_least");
}

/* counts[j] := #(|x| >= ge[j]) for k <= CK_MAX_GE thresholds, in one pass. false after a
 * failure (kept for sync). */
static bool ge_run(cuda_ctx *c, const float *x, size_t n, size_t k, const uint32_t *ge, uint64_t *counts)
{
    cu_enter(c);
    cu_slot *sl = cu_slot_take(c);
    ge_launch(c, sl, x, n, k, ge, 0);
    const unsigned long long *r = static_cast<const unsigned long long *>(cu_slot_fetch(c, sl, 0, k * sizeof *r));
    for (size_t j = 0; j < k; j++)
        counts[j] = r ? r[j] : 0;
    cu_slot_give(c, sl);
    return r != NULL;
}

static int cu_op_count_at_least(const backend *bk, const float *x, size_t n, size_t k, const uint32_t *ge,
                                uint64_t *counts)
{
    if (k > CK_MAX_GE)
        return -1;
    for (size_t j = 0; j < k; j++)
        if (ge[j] < 1u || ge[j] > AMPDIAG_F32_INF)
            return -1;
    if (k == 0)
        return 0;
    return ge_run(cu_ctx(bk), x, n, k, ge, counts) ? 0 : -1;
}

/* count_at_least of k requests: as many as fit the results queued, copied back together. */
static int cu_op_count_at_least_many(const backend *bk, size_t k, const bk_ge_req *req)
{
    for (size_t i = 0; i < k; i++) {
        if (req[i].k > CK_MAX_GE)
            return -1;
        for (size_t j = 0; j < req[i].k; j++)
            if (req[i].ge[j] < 1u || req[i].ge[j] > AMPDIAG_F32_INF)
                return -1;
    }
    cuda_ctx *c = cu_ctx(bk);
    cu_enter(c);
    cu_slot *sl = cu_slot_take(c);
    int rc = 0;
    size_t i = 0;
    while (i < k && rc == 0) {
        size_t j = i, off = 0;
        for (; j < k && off + req[j].k * sizeof(unsigned long long) <= CU_SLOT_RESULTS; j++) {
            if (req[j].k > 0)
                ge_launch(c, sl, req[j].x, req[j].n, req[j].k, req[j].ge, off);
            off += req[j].k * sizeof(unsigned long long);
        }
        const unsigned long long *r = static_cast<const unsigned long long *>(cu_slot_fetch(c, sl, 0, off));
        if (!r)
            rc = -1;
        for (off = 0; r && i < j; i++) {
            for (size_t q = 0; q < req[i].k; q++)
                req[i].counts[q] = r[off + q];
            off += req[i].k;
        }
    }
    cu_slot_give(c, sl);
    return rc;
}

/* ampdiag_whatif_scaled_n on the device: the formats' scaled thresholds found on the host
 * (ampdiag_scaled_thresholds), counted two formats a pass with the non-zero and non-finite
 * counts, the classes derived as the CPU derives them (ck_scaled_classes). */
static int cu_op_whatif_scaled(const backend *bk, size_t nfmt, const ampdiag_format *fmt, const float *scale,
                               const float *x, size_t n, uint64_t (*counts)[AMPDIAG_WHATIF_NCLASSES])
{
    for (size_t f0 = 0; f0 < nfmt; f0 += 2) {
        size_t m = nfmt - f0 < 2 ? nfmt - f0 : 2, k = 0;
        uint32_t ge[CK_MAX_GE], t[3];
        for (size_t f = 0; f < m; f++) {
            if (ampdiag_scaled_thresholds(fmt[f0 + f], scale[f0 + f], t) != 0)
                return -1;
            ge[k++] = t[0];
            ge[k++] = t[1];
            ge[k++] = t[2] + 1u;
        }
        ge[k++] = 1u;
        ge[k++] = AMPDIAG_F32_INF;
        uint64_t g[CK_MAX_GE];
        if (!ge_run(cu_ctx(bk), x, n, k, ge, g))
            return -1;
        for (size_t f = 0; f < m; f++)
            ck_scaled_classes(g + 3 * f, g[k - 2], g[k - 1], counts[f0 + f]);
    }
    return 0;
}

/* ------------------------------------------------------------------------------- optimizer */

void cu_op_optim_step(const backend *bk, const bk_optim *cfg, long t, float *w, const float *g, float *m, float *v,
                      size_t n, double lr, float ginv, float gscale, float *dw_keep, float *w_keep,
                      float *w_copy, uint64_t *nonfinite)
{
    cuda_ctx *c = cu_ctx(bk);
    const ck_optim k = ck_optim_setup(cfg, t, lr);
    cu_enter(c);
    cu_each(c, n, CU_AT, "optim_step", [=] __device__(size_t i) {
        ck_optim_step(&k, w, g, m, v, i, ginv, gscale, dw_keep, w_keep);
    });
    if (w_copy) /* passes of their own on the device */
        bk->round(bk, w_copy, w, n, bk_rnd_make(cfg->copy_fmt, cfg->round_flags));
    if (nonfinite)
        *nonfinite += bk->count_nonfinite(bk, w, n);
}

struct cu_lost3 {
    unsigned long long n[3];
};

struct cu_lost3_merge {
    __device__ void operator()(cu_lost3 &a, const cu_lost3 &b) const
    {
        for (int k = 0; k < 3; k++)
            a.n[k] += b.n[k];
    }
};

/* Queue the lost-update counts of one request, their result (a cu_lost3) at the slot's results
 * offset off. n > 0. */
static void lost_launch(cuda_ctx *c, cu_slot *sl, const bk_optim *cfg, const float *w_old, const float *dw, size_t n,
                        size_t off)
{
    int wrk = ck_rnd_kind(cfg->weight_fmt, cfg->round_flags), ftz = (cfg->round_flags & AMPDIAG_ROUND_FTZ) != 0;
    char *d = static_cast<char *>(sl->dev);
    cu_lost3 *part = reinterpret_cast<cu_lost3 *>(d), *res = reinterpret_cast<cu_lost3 *>(d + CU_SLOT_PARTS + off);
    cu_lost3 init = {{0ull, 0ull, 0ull}};
    unsigned nb = cu_red_blocks(n);
    auto add = [=] __device__(cu_lost3 & acc, size_t i) { ck_lost(w_old[i], dw[i], wrk, ftz, acc.n); };
    cu_reduce_part_k<<<nb, CU_THREADS, 0, CU_STREAM>>>(n, init, add, cu_lost3_merge(), part);
    cu_launched(c, CU_AT, "update_stats (lost updates)");
    cu_reduce_final_k<<<1, CU_THREADS, 0, CU_STREAM>>>(nb, init, cu_lost3_merge(), part, res);
    cu_launched(c, CU_AT, "update_stats (lost updates, blocks)");
}

/* update_stats of k requests: each one's statistics of dw and its lost updates queued, as many
 * as fit the results at a time, then copied back together. */
static void cu_op_update_stats_many(const backend *bk, const bk_optim *cfg, size_t k, const bk_update_req *req)
{
    cuda_ctx *c = cu_ctx(bk);
    cu_enter(c);
    cu_slot *sl = cu_slot_take(c);
    size_t i = 0;
    while (i < k) {
        size_t j = i, off = 0;
        for (; j < k && off + stats_result_bytes(req[j].hu != NULL) + sizeof(cu_lost3) <= CU_SLOT_RESULTS; j++) {
            if (req[j].n > 0) {
                stats_launch(c, sl, req[j].dw, req[j].n, req[j].hu != NULL, off);
                lost_launch(c, sl, cfg, req[j].w_old, req[j].dw, req[j].n, off + stats_result_bytes(req[j].hu != NULL));
            }
            off += stats_result_bytes(req[j].hu != NULL) + sizeof(cu_lost3);
        }
        const char *r = static_cast<const char *>(cu_slot_fetch(c, sl, 0, off));
        if (!r)
            break; /* (kept for sync; nothing is added) */
        for (off = 0; i < j; i++) {
            const bk_update_req *q = &req[i];
            size_t sb = stats_result_bytes(q->hu != NULL);
            if (q->n > 0) {
                ampdiag_tstats us;
                ampdiag_hist hh;
                stats_take(c, r + off, q->n, &us, q->hu ? &hh : NULL);
                cu_lost3 lost;
                memcpy(&lost, r + off + sb, sizeof lost);
                ampdiag_tstats_merge(&q->st->update, &us);
                if (q->hu)
                    ampdiag_hist_merge(q->hu, &hh);
                q->st->lost_updates += lost.n[0];
                q->st->lost_if_fp16 += lost.n[1];
                q->st->lost_if_bf16 += lost.n[2];
            }
            off += sb + sizeof(cu_lost3);
        }
    }
    cu_slot_give(c, sl);
}

void cu_op_update_stats(const backend *bk, const bk_optim *cfg, const float *w_old, const float *dw, size_t n,
                        bk_update_stats *st, ampdiag_hist *hu)
{
    bk_update_req r = {w_old, dw, n, st, hu};
    cu_op_update_stats_many(bk, cfg, 1, &r);
}

/* ------------------------------------------------------------------------------- the table */

void cu_fill_table_stats(backend *bk)
{
    bk->sum = cu_op_sum;
    bk->sumsq = cu_op_sumsq;
    bk->count_nonfinite = cu_op_count_nonfinite;
    bk->tstats = cu_op_tstats;
    bk->tstats_many = cu_op_tstats_many;
    bk->count_at_least = cu_op_count_at_least;
    bk->count_at_least_many = cu_op_count_at_least_many;
    bk->whatif_scaled = cu_op_whatif_scaled;
    bk->grad_norm = cu_op_grad_norm;
    bk->optim_step = cu_op_optim_step;
    bk->update_stats = cu_op_update_stats;
    bk->update_stats_many = cu_op_update_stats_many;
}
