/*
 * bench_tstats.c - speed of the fused statistics pass against baselines measured in the same run:
 *   read    : a plain vectorised sum over the same buffer (the machine's read bandwidth)
 *   fused   : ampdiag_tstats without / with the exponent histogram, each SIMD path
 *   multi   : the same fields computed one pass per field (tests/tstats_ref.c)
 * Two data sets: gradient-like values (exponents spread over 35 binades, one NaN, one inf) for
 * every row, then weight-like values (normal(0, 0.02)) for the default kernel.
 * Usage: bench_tstats [N (floats, default 64M)] [repeats (default 5)]; prints the best time.
 */
#include "ampdiag.h"
#include "../tests/tstats_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static volatile double sink;

__attribute__((noinline)) static double plain_sum(const float *x, size_t n)
{
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            acc[l] += x[i + l];
    double s = 0;
    for (int l = 0; l < 16; l++) s += acc[l];
    for (; i < n; i++) s += x[i];
    return s;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((noinline, target("avx2"))) static double plain_sum_avx2(const float *x, size_t n)
{
    float acc[16] = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            acc[l] += x[i + l];
    double s = 0;
    for (int l = 0; l < 16; l++) s += acc[l];
    for (; i < n; i++) s += x[i];
    return s;
}
#endif

enum { READ, FUSED, FUSED_HIST, MULTI };

static double run(int what, const float *x, size_t n, int reps)
{
    double best = 1e30;
    ampdiag_tstats s;
    static ampdiag_hist h;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        switch (what) {
        case READ:
#if defined(__x86_64__) && defined(__GNUC__)
            sink = __builtin_cpu_supports("avx2") ? plain_sum_avx2(x, n) : plain_sum(x, n);
#else
            sink = plain_sum(x, n);
#endif
            break;
        case FUSED: ampdiag_tstats_compute(x, n, &s, NULL); sink = s.sum; break;
        case FUSED_HIST: ampdiag_tstats_compute(x, n, &s, &h); sink = s.sum + (double)h.bin[100]; break;
        case MULTI: tstats_multipass(x, n, &s, &h); sink = s.sum; break;
        }
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)64 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (n == 0 || reps <= 0) {
        fprintf(stderr, "usage: bench_tstats [N floats > 0] [repeats > 0]\n");
        return 2;
    }
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "bench_tstats: cannot allocate %zu floats\n", n);
        return 3;
    }
    uint64_t st = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        double u1 = ((st >> 11) + 0.5) / 9007199254740992.0;
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        double u2 = ((st >> 11) + 0.5) / 9007199254740992.0;
        /* gradient-like values: normal with magnitudes spread over 2^-30..2^5 */
        x[i] = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2) * ldexp(1.0, -(int)(st % 30)));
    }
    x[n / 3] = NAN;
    x[n / 2] = INFINITY;

    double bytes = (double)n * sizeof(float);
    printf("bench_tstats: %zu float32 values (%.0f MiB), best of %d runs\n", n, bytes / 1048576.0, reps);
    double t_read = run(READ, x, n, reps);
    printf("%-40s %8.2f ms %7.2f GB/s\n", "plain read (vectorised sum)", t_read * 1e3, bytes / t_read * 1e-9);
    /* each kernel this CPU runs: the widest first, then capped by AMPDIAG_TSTATS_IMPL */
    const char *caps[3] = {NULL, "avx2", "generic"};
    const char *seen[3] = {NULL, NULL, NULL};
    double t_fused = 0;
    for (int k = 0; k < 3; k++) {
        if (caps[k]) setenv("AMPDIAG_TSTATS_IMPL", caps[k], 1);
        const char *impl = ampdiag_tstats_impl();
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= seen[j] && strcmp(seen[j], impl) == 0;
        seen[k] = impl;
        if (dup) continue;
        double t1 = run(FUSED, x, n, reps), t2 = run(FUSED_HIST, x, n, reps);
        if (k == 0) t_fused = t1;
        char l1[64], l2[80];
        snprintf(l1, sizeof l1, "fused stats [%s]", impl);
        snprintf(l2, sizeof l2, "fused stats + histogram [%s]", impl);
        printf("%-40s %8.2f ms %7.2f GB/s  (%.2fx plain read)\n", l1, t1 * 1e3, bytes / t1 * 1e-9, t1 / t_read);
        printf("%-40s %8.2f ms %7.2f GB/s  (%.2fx plain read)\n", l2, t2 * 1e3, bytes / t2 * 1e-9, t2 / t_read);
    }
    unsetenv("AMPDIAG_TSTATS_IMPL");
    double t_multi = run(MULTI, x, n, reps < 2 ? reps : 2);
    char lm[64];
    snprintf(lm, sizeof lm, "separate passes (%d loops)", TSTATS_MULTIPASS_LOOPS);
    printf("%-40s %8.2f ms %7.2f GB/s\n", lm, t_multi * 1e3, bytes / t_multi * 1e-9);
    printf("fused (%s) is %.1fx faster than separate passes, %.2fx the time of a plain read\n",
           ampdiag_tstats_impl(), t_multi / t_fused, t_fused / t_read);
    /* weight-like values: normal(0, 0.02), a narrow spread of exponents */
    for (size_t i = 0; i < n; i++) {
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        double u1 = ((st >> 11) + 0.5) / 9007199254740992.0;
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        double u2 = ((st >> 11) + 0.5) / 9007199254740992.0;
        x[i] = (float)(0.02 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    double w1 = run(FUSED, x, n, reps), w2 = run(FUSED_HIST, x, n, reps);
    printf("weight-like data, normal(0, 0.02) [%s]:\n", ampdiag_tstats_impl());
    printf("  %-38s %8.2f ms %7.2f GB/s  (%.2fx plain read)\n", "fused stats", w1 * 1e3,
           bytes / w1 * 1e-9, w1 / t_read);
    printf("  %-38s %8.2f ms %7.2f GB/s  (%.2fx plain read)\n", "fused stats + histogram", w2 * 1e3,
           bytes / w2 * 1e-9, w2 / t_read);
    free(x);
    return 0;
}
