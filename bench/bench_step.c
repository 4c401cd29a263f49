/*
 * bench_step.c - training-step speed of the model presets on the CPU backend: forward +
 * backward steps per second in fp32, fp16 and bf16 (mlp at batch 64, transformer at batch 8),
 * the GEMM floating-point rate those steps achieve, and plain sgemm at the mlp's largest shape
 * for reference. `make bench-step`; `bench_step SECONDS` sets the time per case (default 1).
 */
#include "backend/backend.h"
#include "model/model.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;

static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

/* Time forward + backward steps for about `seconds`; returns steps per second, or -1. */
static double time_steps(const char *spec, precision p, int B, double seconds, double *gflop)
{
    model_options o = model_options_default();
    char err[256];
    o.spec = spec;
    o.precision = p;
    model *m = model_create(&o, backend_cpu(), err, sizeof err);
    if (!m) {
        fprintf(stderr, "bench_step: %s\n", err);
        return -1;
    }
    size_t rows = (size_t)B * (size_t)m->T;
    float *x = m->transformer ? NULL : malloc(rows * (size_t)m->input_dim * sizeof *x);
    int32_t *tok = malloc(rows * sizeof *tok), *y = malloc(rows * sizeof *y);
    if ((!m->transformer && !x) || !tok || !y) {
        fprintf(stderr, "bench_step: out of memory\n");
        free(x);
        free(tok);
        free(y);
        model_free(m);
        return -1;
    }
    for (size_t i = 0; x && i < rows * (size_t)m->input_dim; i++)
        x[i] = (float)(2.0 * urand() - 1.0);
    for (size_t i = 0; i < rows; i++) {
        y[i] = (int32_t)(urand() * m->classes);
        tok[i] = (int32_t)(urand() * m->classes);
    }
    float scale = p == PREC_FP16 ? 1024.0f : 1.0f;
    for (int i = 0; i < 3; i++) { /* warm-up: buffers, caches, BLAS threads */
        model_forward(m, x, tok, y, B, NULL);
        model_backward(m, scale);
    }
    long steps = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 10; i++, steps++)
            if (model_forward(m, x, tok, y, B, NULL) || model_backward(m, scale)) {
                fprintf(stderr, "bench_step: %s\n", model_error(m));
                steps = -1;
                break;
            }
        t = now() - t0;
    } while (steps > 0 && t < seconds);
    *gflop = model_gemm_flops(m, B) * 1e-9;
    free(x);
    free(tok);
    free(y);
    model_free(m);
    return steps > 0 ? (double)steps / t : -1;
}

static double sgemm_gflops(int M, int N, int K, double seconds)
{
    float *a = calloc((size_t)M * K, sizeof *a), *b = calloc((size_t)K * N, sizeof *b);
    float *c = calloc((size_t)M * N, sizeof *c);
    if (!a || !b || !c) {
        free(a);
        free(b);
        free(c);
        return -1;
    }
    for (size_t i = 0; i < (size_t)M * K; i++)
        a[i] = (float)urand();
    for (size_t i = 0; i < (size_t)K * N; i++)
        b[i] = (float)urand();
    long n = 0;
    double t0 = now(), t;
    do {
        for (int i = 0; i < 50; i++, n++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f,
                        c, N);
        t = now() - t0;
    } while (t < seconds);
    free(a);
    free(b);
    free(c);
    return 2.0 * M * N * K * (double)n / t * 1e-9;
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    if (!(seconds > 0) || seconds > 600) {
        fprintf(stderr, "usage: bench_step [SECONDS per case, default 1]\n");
        return 2;
    }
    static const struct { const char *spec; int B; } cases[] = {{"mlp", 64}, {"transformer", 8}};
    static const precision precs[] = {PREC_FP32, PREC_FP16, PREC_BF16};
    printf("%-12s %-6s %5s %10s %9s %11s %13s %9s\n", "model", "prec", "batch", "steps/s",
           "ms/step", "GFLOP/step", "GEMM GFLOP/s", "vs fp32");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double base = 0.0;
        for (size_t p = 0; p < sizeof precs / sizeof precs[0]; p++) {
            double gflop = 0.0;
            double sps = time_steps(cases[c].spec, precs[p], cases[c].B, seconds, &gflop);
            if (sps < 0)
                return 3;
            if (p == 0)
                base = sps;
            printf("%-12s %-6s %5d %10.1f %9.3f %11.4f %13.2f %8.2fx\n", cases[c].spec,
                   precision_name(precs[p]), cases[c].B, sps, 1e3 / sps, gflop, gflop * sps,
                   sps / base);
        }
    }
    printf("reference: cblas_sgemm 64x256x256 alone: %.2f GFLOP/s\n",
           sgemm_gflops(64, 256, 256, seconds));
    return 0;
}
