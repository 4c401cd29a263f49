/*
 * stats_cuda.cu - the CUDA backend's reductions, fused tensor statistics and optimizer:
 * sum, sum of squares, non-finite counts and the gradient norm as deterministic reductions in
 * double (cuda_internal.h: a fixed grid and fixed trees, so the same data gives the same bits
 * on any GPU, though not the CPU's bits: it adds in another order); ampdiag_tstats_compute's
 * record as one kernel pass over the tensor (every count, the extremes and the exponent
 * histogram exact, the sums in double) writing a small record that is copied back; the
 * optimizer step and the lost-update counts element by element with kernels/bodies.h's bodies (the
 * CPU's arithmetic bit for bit).
 *
 * The statistics run on the calling thread's stream: the tracer thread's own, beside the
 * training thread's kernels. Each call waits for its own record (an asynchronous copy into
 * pinned memory and an event), since backend.h's tstats returns it; a call that hands the
 * record back later, so that the tracer could queue several tensors, is not part of this
 * version.
 *
 * Compiled here with nvcc (-Werror); never run: no GPU was available.
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

/* The slot's layout: the blocks' partials, the merged record, the histogram. */
enum { CU_ST_REC = CU_RED_BLOCKS * sizeof(ck_stats), CU_ST_HIST = CU_ST_REC + sizeof(ck_stats) };
static_assert(CU_ST_HIST + AMPDIAG_HIST_BINS * sizeof(unsigned long long) <= CU_SLOT_BYTES, "slot too small");
static_assert(sizeof(ck_stats) % sizeof(unsigned long long) == 0, "histogram alignment");

/* s := the statistics of x[0..n) (h, when not NULL, its histogram). false after a failure (s
 * is then the empty record). */
static bool stats_run(cuda_ctx *c, const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h)
{
    ampdiag_tstats_init(s);
    if (h)
        ampdiag_hist_init(h);
    if (n == 0)
        return true;
    cu_enter(c);
    cu_slot *sl = cu_slot_take(c);
    char *d = static_cast<char *>(sl->dev);
    ck_stats *part = reinterpret_cast<ck_stats *>(d), *rec = reinterpret_cast<ck_stats *>(d + CU_ST_REC);
    unsigned long long *hist = h ? reinterpret_cast<unsigned long long *>(d + CU_ST_HIST) : NULL;
    size_t hbytes = AMPDIAG_HIST_BINS * sizeof(unsigned long long);
    if (hist)
        CU_CK(c, cudaMemsetAsync(hist, 0, hbytes, CU_STREAM));
    unsigned nb = cu_red_blocks(n);
    ck_stats init;
    ck_stats_init(&init);
    cu_tstats_part_k<<<nb, CU_THREADS, 0, CU_STREAM>>>(x, n, part, hist);
    cu_launched(c, CU_AT, "tstats");
    cu_reduce_final_k<<<1, CU_THREADS, 0, CU_STREAM>>>(nb, init, cu_stats_merge(), part, rec);
    cu_launched(c, CU_AT, "tstats (blocks)");
    const char *r = static_cast<const char *>(cu_slot_fetch(c, sl, CU_ST_REC, sizeof(ck_stats) + (h ? hbytes : 0)));
    if (r) {
        ck_stats st;
        memcpy(&st, r, sizeof st);
        ck_stats_record(&st, n, s);
        if (h)
            memcpy(h->bin, r + sizeof(ck_stats), hbytes);
    }
    cu_slot_give(c, sl);
    return r != NULL;
}

void cu_op_tstats(const backend *bk, const float *x, size_t n, ampdiag_tstats *s, ampdiag_hist *h)
{
    (void)stats_run(cu_ctx(bk), x, n, s, h);
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

void cu_op_update_stats(const backend *bk, const bk_optim *cfg, const float *w_old, const float *dw, size_t n,
                        bk_update_stats *st, ampdiag_hist *hu)
{
    cuda_ctx *c = cu_ctx(bk);
    ampdiag_tstats us;
    ampdiag_hist hh;
    if (!stats_run(c, dw, n, &us, hu ? &hh : NULL))
        return;
    int wrk = ck_rnd_kind(cfg->weight_fmt, cfg->round_flags), ftz = (cfg->round_flags & AMPDIAG_ROUND_FTZ) != 0;
    cu_lost3 lost, init = {{0ull, 0ull, 0ull}};
    bool ok = cu_reduce(c, n, init,
                        [=] __device__(cu_lost3 &acc, size_t i) { ck_lost(w_old[i], dw[i], wrk, ftz, acc.n); },
                        cu_lost3_merge(), &lost, CU_AT, "update_stats");
    if (!ok)
        return;
    ampdiag_tstats_merge(&st->update, &us);
    if (hu)
        ampdiag_hist_merge(hu, &hh);
    st->lost_updates += lost.n[0];
    st->lost_if_fp16 += lost.n[1];
    st->lost_if_bf16 += lost.n[2];
}

/* ------------------------------------------------------------------------------- the table */

void cu_fill_table_stats(backend *bk)
{
    bk->sum = cu_op_sum;
    bk->sumsq = cu_op_sumsq;
    bk->count_nonfinite = cu_op_count_nonfinite;
    bk->tstats = cu_op_tstats;
    bk->grad_norm = cu_op_grad_norm;
    bk->optim_step = cu_op_optim_step;
    bk->update_stats = cu_op_update_stats;
}
