/*
 * bench_tstats.c - speed of the fused statistics pass against baselines measured in the same run:
 *   read    : a plain vectorised sum over the same data (the machine's read bandwidth), once in
 *             4 KiB pages and once in a buffer aligned to 2 MiB with madvise(MADV_HUGEPAGE), as
 *             numpy allocates large arrays (transparent huge pages where the kernel gives them:
 *             the output says how much of the buffer it got in huge pages)
 *   fused   : ampdiag_tstats without / with the exponent histogram, each SIMD path, on the
 *             huge-page buffer (ratios to both reads), and the default path on 4 KiB pages
 *   multi   : the same fields computed one pass per field (tests/tstats_ref.c)
 * Two data sets: gradient-like values (exponents spread over 35 binades, one NaN, one inf) for
 * every row, then weight-like values (normal(0, 0.02)) for the default kernel.
 * Usage: bench_tstats [N (floats, default 64M)] [repeats (default 5)]; prints the best wall time and
 * the best thread CPU time of each; throughputs and ratios are by CPU time.
 */
#include "ampdiag.h"
#include "../tests/tstats_ref.h"
#include "huge_alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(clockid_t clk)
{
    struct timespec t;
    clock_gettime(clk, &t);
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

/* The best wall time and the best thread CPU time of reps runs (on a shared machine the CPU
 * time leaves out the time the thread waited for a core; the ratios use it). */
struct timing {
    double wall, cpu;
};

static struct timing run(int what, const float *x, size_t n, int reps)
{
    struct timing best = {1e30, 1e30};
    ampdiag_tstats s;
    static ampdiag_hist h;
    for (int r = 0; r < reps; r++) {
        double t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
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
        double t = now(CLOCK_MONOTONIC) - t0, c = now(CLOCK_THREAD_CPUTIME_ID) - c0;
        best.wall = t < best.wall ? t : best.wall;
        best.cpu = c < best.cpu ? c : best.cpu;
    }
    return best;
}

/* KiB of the mapping that holds p backed by transparent huge pages (/proc/self/smaps), or -1
 * when unknown. */
static long huge_kib(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int inside = 0;
    long kib = -1;
    uintptr_t a = (uintptr_t)p;
    while (kib < 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            inside = a >= lo && a < hi;
        else if (inside && sscanf(line, "AnonHugePages: %ld kB", &kib) != 1)
            kib = -1;
    }
    fclose(f);
    return kib;
}

/* Gradient-like values (normal, magnitudes spread over 2^-30..2^5, one NaN, one inf) or
 * weight-like ones (normal(0, 0.02)), from the generator state st. */
static void fill(float *x, size_t n, int weights, uint64_t *st)
{
    for (size_t i = 0; i < n; i++) {
        *st ^= *st << 13; *st ^= *st >> 7; *st ^= *st << 17;
        double u1 = ((*st >> 11) + 0.5) / 9007199254740992.0;
        *st ^= *st << 13; *st ^= *st >> 7; *st ^= *st << 17;
        double u2 = ((*st >> 11) + 0.5) / 9007199254740992.0;
        double g = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
        x[i] = weights ? (float)(0.02 * g) : (float)(g * ldexp(1.0, -(int)(*st % 30)));
    }
    if (!weights) {
        x[n / 3] = NAN;
        x[n / 2] = INFINITY;
    }
}

/* One line: the times (thread CPU time in parentheses), the throughput by CPU time and the ratios
 * of the CPU time to the reads'. */
static void print_row(const char *what, struct timing t, double bytes, const struct timing *rd_huge,
                      const struct timing *rd_4k)
{
    printf("%-40s %8.2f ms (cpu %7.2f) %6.2f GB/s", what, t.wall * 1e3, t.cpu * 1e3, bytes / t.cpu * 1e-9);
    if (rd_huge)
        printf("  %.2fx huge-page read", t.cpu / rd_huge->cpu);
    if (rd_4k)
        printf("%s%.2fx 4 KiB read", rd_huge ? ", " : "  ", t.cpu / rd_4k->cpu);
    printf("\n");
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)64 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (n == 0 || reps <= 0) {
        fprintf(stderr, "usage: bench_tstats [N floats > 0] [repeats > 0]\n");
        return 2;
    }
    float *x = bench_alloc_floats(n, 1), *x4k = bench_alloc_floats(n, 0);
    if (!x || !x4k) {
        fprintf(stderr, "bench_tstats: cannot allocate 2 x %zu floats\n", n);
        free(x);
        return 3;
    }
    uint64_t st = 88172645463325252ull;
    fill(x, n, 0, &st);
    memcpy(x4k, x, n * sizeof *x);

    double bytes = (double)n * sizeof(float);
    long hk = huge_kib(x), hk4 = huge_kib(x4k);
    printf("bench_tstats: %zu float32 values (%.0f MiB), best of %d runs\n", n, bytes / 1048576.0, reps);
    if (hk < 0)
        printf("huge pages: unknown (no /proc/self/smaps)\n");
    else
        printf("huge pages: %ld of %.0f MiB in 2 MiB pages after madvise(MADV_HUGEPAGE) (%ld MiB in the 4 KiB buffer)\n",
               hk / 1024, bytes / 1048576.0, hk4 < 0 ? 0 : hk4 / 1024);
    struct timing r4 = run(READ, x4k, n, reps), rh = run(READ, x, n, reps);
    print_row("plain read (vectorised sum), 4 KiB pages", r4, bytes, NULL, NULL);
    print_row("plain read, huge pages", rh, bytes, NULL, &r4);
    /* each kernel this CPU runs: the widest first, then capped by AMPDIAG_TSTATS_IMPL */
    const char *caps[3] = {NULL, "avx2", "generic"};
    const char *seen[3] = {NULL, NULL, NULL};
    struct timing fused = {0, 0};
    for (int k = 0; k < 3; k++) {
        if (caps[k]) setenv("AMPDIAG_TSTATS_IMPL", caps[k], 1);
        const char *impl = ampdiag_tstats_impl();
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= seen[j] && strcmp(seen[j], impl) == 0;
        seen[k] = impl;
        if (dup) continue;
        struct timing t1 = run(FUSED, x, n, reps), t2 = run(FUSED_HIST, x, n, reps);
        if (k == 0) fused = t1;
        char l1[64], l2[80];
        snprintf(l1, sizeof l1, "fused stats [%s]", impl);
        snprintf(l2, sizeof l2, "fused stats + histogram [%s]", impl);
        print_row(l1, t1, bytes, &rh, &r4);
        print_row(l2, t2, bytes, &rh, &r4);
    }
    unsetenv("AMPDIAG_TSTATS_IMPL");
    const char *impl = ampdiag_tstats_impl(); /* the default kernel again */
    printf("on 4 KiB pages [%s]:\n", impl);
    print_row("  fused stats", run(FUSED, x4k, n, reps), bytes, NULL, &r4);
    print_row("  fused stats + histogram", run(FUSED_HIST, x4k, n, reps), bytes, NULL, &r4);
    struct timing multi = run(MULTI, x, n, reps < 2 ? reps : 2);
    char lm[64];
    snprintf(lm, sizeof lm, "separate passes (%d loops)", TSTATS_MULTIPASS_LOOPS);
    print_row(lm, multi, bytes, NULL, NULL);
    printf("fused (%s) is %.1fx faster than separate passes, %.2fx the time of a plain read (huge pages)\n", impl,
           multi.cpu / fused.cpu, fused.cpu / rh.cpu);
    fill(x, n, 1, &st);
    printf("weight-like data, normal(0, 0.02) [%s], huge pages:\n", impl);
    print_row("  fused stats", run(FUSED, x, n, reps), bytes, &rh, &r4);
    print_row("  fused stats + histogram", run(FUSED_HIST, x, n, reps), bytes, &rh, &r4);
    free(x);
    free(x4k);
    return 0;
}
