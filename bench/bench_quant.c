/*
 * bench_quant.c - cost of the block-scaled what-if (ampdiag_quant_whatif) in ns per value,
 * against a plain read and the fused statistics kernel (ampdiag_tstats_compute) measured in the
 * same run on the same data: a weight-like matrix (rows x cols, normal(0, 0.02) with a few
 * outlier rows) in a huge-page buffer.
 * Rows: each scheme alone (its recipe's directions, as --whatif SCHEME expands), ampdiag run's
 * default list, and "all" (every scheme in one pass).
 * Usage: bench_quant [rows (default 4096)] [cols (default 1024)] [repeats (default 3)]; prints the
 * best thread CPU time of each (the machine is shared: CPU time leaves out waiting for a core).
 */
#include "ampdiag.h"
#include "huge_alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
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

/* The best CPU time of reps runs of one thing: what < 0 read, 0 statistics, 1 the list. */
static double best_of(int what, const float *x, size_t n, size_t rows, size_t cols, const ampdiag_qspec *s, size_t ns,
                      ampdiag_qstats *out, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double c0 = cpu_now();
        if (what < 0) {
            sink = plain_sum(x, n);
        } else if (what == 0) {
            ampdiag_tstats st;
            ampdiag_tstats_compute(x, n, &st, NULL);
            sink = st.sum;
        } else {
            ampdiag_tstats st;
            ampdiag_tstats_compute(x, n, &st, NULL);
            float amax = ampdiag_quant_amax(&st);
            if (ampdiag_quant_whatif(x, n, rows, cols, amax, ns, s, out) != 0) {
                fprintf(stderr, "bench_quant: ampdiag_quant_whatif failed\n");
                exit(3);
            }
            sink = out[0].err_sq;
        }
        double c = cpu_now() - c0;
        best = c < best ? c : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t rows = argc > 1 ? strtoull(argv[1], NULL, 10) : 4096, cols = argc > 2 ? strtoull(argv[2], NULL, 10) : 1024;
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    if (rows == 0 || cols == 0 || reps <= 0) {
        fprintf(stderr, "usage: bench_quant [rows > 0] [cols > 0] [repeats > 0]\n");
        return 2;
    }
    size_t n = rows * cols;
    float *x = bench_alloc_floats(n, 1);
    if (!x) {
        fprintf(stderr, "bench_quant: cannot allocate %zu floats\n", n);
        return 3;
    }
    uint64_t st = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        double u1 = ((st >> 11) + 0.5) / 9007199254740992.0;
        st ^= st << 13; st ^= st >> 7; st ^= st << 17;
        double u2 = ((st >> 11) + 0.5) / 9007199254740992.0;
        x[i] = (float)(0.02 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    for (size_t r = 7; r < rows; r += 61) /* outlier rows */
        for (size_t j = 0; j < cols; j += 5) x[r * cols + j] *= 300.0f;

    printf("bench_quant: a %zu x %zu float32 matrix (%.0f MiB, weight-like with outlier rows), best CPU time "
           "of %d runs; ns per value\n", rows, cols, (double)n * 4 / 1048576.0, reps);
    double rd = best_of(-1, x, n, rows, cols, NULL, 0, NULL, reps);
    double ts = best_of(0, x, n, rows, cols, NULL, 0, NULL, reps);
    printf("%-44s %8.3f ns/value\n", "plain read (vectorised sum)", rd / (double)n * 1e9);
    printf("%-44s %8.3f ns/value  %6.2fx read\n", "statistics (ampdiag_tstats_compute)", ts / (double)n * 1e9, ts / rd);
    static const char *const lists[] = {"fp8-current", "mxfp8@row", "mxfp8", "mxfp8:rceil", "mxfp6", "mxfp4",
                                        "nvfp4@row", "nvfp4", "fp8-block", NULL, "all"};
    ampdiag_qspec s[64];
    ampdiag_qstats out[64];
    char err[200];
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        const char *l = lists[k] ? lists[k] : ampdiag_qspec_default();
        size_t ns;
        if (ampdiag_qspec_parse(l, s, 64, &ns, err, sizeof err) != 0) {
            fprintf(stderr, "bench_quant: %s\n", err);
            return 2;
        }
        double t = best_of(1, x, n, rows, cols, s, ns, out, reps);
        char label[96];
        snprintf(label, sizeof label, "stats + %s%s (%zu schemes)", lists[k] ? "" : "default: ", l, ns);
        printf("%-44s %8.3f ns/value  %6.2fx read  %6.2fx stats  (%.2f ns/value per scheme over the stats)\n", label,
               t / (double)n * 1e9, t / rd, t / ts, (t - ts) / (double)n / (double)ns * 1e9);
    }
    free(x);
    return 0;
}
