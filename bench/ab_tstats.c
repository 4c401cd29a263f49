/*
 * ab_tstats.c - the fused statistics pass of this tree against an older revision's, on the same
 * data, interleaved call by call in one process (bench/ab_tstats.sh builds it: the older
 * revision's functions are renamed old_*). On a shared machine the thread CPU time of each
 * call is steadier than the wall time; both are printed. The data lies in huge pages where the
 * system gives them (huge_alloc.h: as numpy allocates large arrays).
 * Usage: ab_tstats N REPS DATA (0: gradient-like, 1: weight-like, as bench_tstats)
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "ampdiag.h"
#include "huge_alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The older revision's ampdiag_tstats_compute (its record and histogram are opaque here: their
 * layout may differ from this tree's). */
void old_ampdiag_tstats_compute(const float *x, size_t n, void *s, void *h);

static double seconds(clockid_t clk)
{
    struct timespec t;
    clock_gettime(clk, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void fill(float *x, size_t n, int weights)
{
    uint64_t st = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        double u1 = ((st >> 11) + 0.5) / 9007199254740992.0;
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        double u2 = ((st >> 11) + 0.5) / 9007199254740992.0;
        double g = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
        x[i] = weights ? (float)(0.02 * g) : (float)(g * ldexp(1.0, -(int)(st % 30)));
    }
    if (!weights) {
        x[n / 3] = NAN;
        x[n / 2] = INFINITY;
    }
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)64 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 21;
    int weights = argc > 3 ? atoi(argv[3]) : 0;
    float *x = bench_alloc_floats(n ? n : 1, 1);
    double *t = malloc((size_t)(reps > 0 ? reps : 1) * 8 * sizeof *t);
    /* room for the older revision's record and histogram, whatever their layout */
    static uint64_t old_rec[512], old_hist[4096];
    static ampdiag_tstats s;
    static ampdiag_hist h;
    if (n == 0 || reps <= 0 || !x || !t) {
        fprintf(stderr, "usage: ab_tstats N>0 REPS>0 [0|1] (or out of memory)\n");
        return 2;
    }
    fill(x, n, weights);
    for (int r = 0; r < reps; r++)
        for (int j = 0; j < 4; j++) {
            int k = (r & 1) ? 3 - j : j; /* the order alternates */
            double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
            switch (k) {
            case 0: old_ampdiag_tstats_compute(x, n, old_rec, NULL); break;
            case 1: ampdiag_tstats_compute(x, n, &s, NULL); break;
            case 2: old_ampdiag_tstats_compute(x, n, old_rec, old_hist); break;
            default: ampdiag_tstats_compute(x, n, &s, &h); break;
            }
            t[(size_t)(k * 2) * (size_t)reps + (size_t)r] = seconds(CLOCK_MONOTONIC) - w0;
            t[(size_t)(k * 2 + 1) * (size_t)reps + (size_t)r] = seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
        }
    for (int k = 0; k < 8; k++)
        qsort(t + (size_t)k * (size_t)reps, (size_t)reps, sizeof *t, cmp_double);
    static const char *const name[4] = {"old fused", "new fused", "old fused + histogram", "new fused + histogram"};
    printf("ab_tstats: %zu values (%s data), %d interleaved calls each [%s]\n", n, weights ? "weight-like" : "gradient-like",
           reps, ampdiag_tstats_impl());
    for (int k = 0; k < 4; k++)
        printf("  %-24s wall min %8.2f median %8.2f ms   cpu min %8.2f median %8.2f ms\n", name[k],
               t[(size_t)(k * 2) * (size_t)reps] * 1e3, t[(size_t)(k * 2) * (size_t)reps + (size_t)reps / 2] * 1e3,
               t[(size_t)(k * 2 + 1) * (size_t)reps] * 1e3, t[(size_t)(k * 2 + 1) * (size_t)reps + (size_t)reps / 2] * 1e3);
    for (int k = 0; k < 4; k += 2) {
        const double *wo = t + (size_t)(k * 2) * (size_t)reps, *wn = t + (size_t)(k * 2 + 2) * (size_t)reps;
        const double *co = wo + reps, *cn = wn + reps;
        printf("  new/old %-16s wall min %.3f median %.3f   cpu min %.3f median %.3f\n", k ? "with histogram" : "record",
               wn[0] / wo[0], wn[reps / 2] / wo[reps / 2], cn[0] / co[0], cn[reps / 2] / co[reps / 2]);
    }
    free(x);
    free(t);
    return 0;
}
