/*
 * bench_gpu_stats.c - speed of a device backend's tensor statistics (tstats: one kernel pass and
 * a small record copied back), without and with the exponent histogram, in GB/s of float32 read,
 * and for reference a device-to-host copy of the same buffer (what reading the tensor back to
 * compute the statistics on the CPU would at least cost). Prints that the rows were not measured
 * when no device backend can run here.
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
    if (bk->sync(bk, err, sizeof err) != 0) {
        fprintf(stderr, "bench_gpu_stats: the %s backend failed: %s\n", dev, err);
        return 3;
    }
    bk->free(bk, dx);
    free(host);
    return 0;
}
