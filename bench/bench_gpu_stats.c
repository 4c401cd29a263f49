/*
 * bench_gpu_stats.c - speed of a device backend's tensor statistics (tstats: one kernel pass and
 * a small record copied back), without and with the exponent histogram, in GB/s of float32 read,
 * and for reference a device-to-host copy of the same buffer (what reading the tensor back to
 * compute the statistics on the CPU would at least cost). Prints that the rows were not measured
 * when no device backend can run here.
 * Then the records of many small tensors (a traced step of a small model: 64 tensors of 16K to
 * 128K floats), asked for one by one (each call waits for its record) and all at once
 * (tstats_many: queued, copied back together, one wait), in microseconds a tensor.
 * Usage: bench_gpu_stats [DEVICE (default cuda)] [N (floats, default 64M)] [repeats (default 5)]
 */
#include "backend/backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Best of `reps` timings of one call (what 0: tstats, 1: tstats + histogram, 2: to_host). */
static double best_time(const backend *bk, const float *dx, float *host, size_t n, int what, int reps)
{
    static ampdiag_hist h;
    ampdiag_tstats s;
    double best = INFINITY;
    for (int r = 0; r <= reps; r++) { /* the first call warms up */
        double t0 = now();
        if (what == 2)
            bk->to_host(bk, host, dx, n * sizeof *host);
        else
            bk->tstats(bk, dx, n, &s, what ? &h : NULL);
        double t = now() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    const char *dev = argc > 1 ? argv[1] : "cuda";
    size_t n = argc > 2 ? strtoull(argv[2], NULL, 10) : (size_t)64 << 20;
    int reps = argc > 3 ? atoi(argv[3]) : 5;
    char err[256];
    const backend *bk = backend_by_name(dev, err, sizeof err);
    if (!bk) {
        printf("device statistics (%s): not measured: %s\n", dev, err);
        return 0;
    }
    float *host = malloc(n * sizeof *host);
    float *dx = bk->alloc(bk, n * sizeof *dx);
    if (!host || !dx || n == 0 || reps < 1) {
        fprintf(stderr, "bench_gpu_stats: out of memory or bad arguments\n");
        return 3;
    }
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) { /* gradient-like: exponents over 35 binades */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        host[i] = (float)(((s >> 63) ? -1.0 : 1.0) * exp2(-30.0 + 35.0 * (double)(s >> 11) * 0x1p-53));
    }
    bk->to_device(bk, dx, host, n * sizeof *host);
    static const char *const rows[3] = {"tstats", "tstats + histogram", "copy to the host (reference)"};
    printf("| device statistics (%s, %zu floats) | GB/s |\n|---|---|\n", bk->desc, n);
    for (int w = 0; w < 3; w++)
        printf("| %s | %.1f |\n", rows[w], (double)(n * sizeof(float)) / best_time(bk, dx, host, n, w, reps) / 1e9);
    enum { K = 64 };
    bk_stats_req q[K];
    ampdiag_tstats rs[K];
    size_t off = 0;
    for (int i = 0; i < K; i++) {
        size_t m = (size_t)16384 << (i % 4);
        if (off + m > n)
            off = 0;
        q[i] = (bk_stats_req){dx + off, m, &rs[i], NULL};
        off += m;
    }
    double one = INFINITY, all = INFINITY;
    for (int r = 0; r <= reps; r++) {
        double t0 = now();
        for (int i = 0; i < K; i++)
            bk->tstats(bk, q[i].x, q[i].n, q[i].s, NULL);
        double t1 = now();
        bk_tstats_many(bk, K, q);
        double t2 = now();
        if (r > 0) {
            one = t1 - t0 < one ? t1 - t0 : one;
            all = t2 - t1 < all ? t2 - t1 : all;
        }
    }
    printf("\n| %d tensors of 16K-128K floats | us a tensor |\n|---|---|\n| one call each (a wait each) | %.1f |\n"
           "| tstats_many (one wait) | %.1f |\n", K, one / K * 1e6, all / K * 1e6);
    if (bk->sync(bk, err, sizeof err) != 0) {
        fprintf(stderr, "bench_gpu_stats: the %s backend failed: %s\n", dev, err);
        return 3;
    }
    bk->free(bk, dx);
    free(host);
    return 0;
}
