/*
 * bench_gemm.c - the CBLAS sgemm this build links (configure --with-blas), on one thread, at
 * the shapes of ampdiag's presets: the mlp (batch 64, width 256), the transformer (d_model 64,
 * d_ff 256, 32 tokens, batch 8 and 64) and the width-2048 mlp of bench/bench_torch.py, forward
 * (x W^T), weight gradient (dy^T x) and input gradient (dy W). Prints GFLOP/s by the process's
 * CPU time (all threads: run it with OPENBLAS_NUM_THREADS=1, as ampdiag runs its BLAS; best of
 * 5 timed runs of about a second in all), so that BLAS libraries, or one library's kernels
 * (OPENBLAS_CORETYPE, BLIS_ARCH_TYPE), can be compared on the shapes that matter here.
 * Usage: OPENBLAS_NUM_THREADS=1 bench_gemm [seconds per shape (default 0.3)]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.3;
    if (!(secs > 0) || secs > 60) {
        fprintf(stderr, "usage: bench_gemm [seconds per shape in (0, 60]]\n");
        return 2;
    }
    static const struct {
        int M, N, K, ta, tb;
        const char *what;
    } S[] = {
        {64, 256, 32, 0, 1, "mlp fc1 forward"},      {64, 256, 256, 0, 1, "mlp fc2 forward"},
        {256, 256, 64, 1, 0, "mlp fc2 weight grad"}, {64, 256, 256, 0, 0, "mlp fc2 input grad"},
        {256, 192, 64, 0, 1, "transformer qkv (b8)"}, {256, 256, 64, 0, 1, "transformer ff1 (b8)"},
        {256, 64, 256, 0, 1, "transformer ff2 (b8)"}, {256, 64, 256, 1, 0, "transformer ff1 wgrad (b8)"},
        {2048, 192, 64, 0, 1, "transformer qkv (b64)"}, {2048, 256, 64, 0, 1, "transformer ff1 (b64)"},
        {64, 2048, 2048, 0, 1, "mlp-2048 forward"},  {2048, 2048, 64, 1, 0, "mlp-2048 weight grad"},
        {64, 2048, 2048, 0, 0, "mlp-2048 input grad"},
    };
    size_t big = (size_t)2048 * 2048;
    float *A = malloc(big * sizeof *A), *B = malloc(big * sizeof *B), *C = malloc(big * sizeof *C);
    if (!A || !B || !C) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        free(A);
        free(B);
        free(C);
        return 3;
    }
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < big; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        A[i] = (float)(s >> 40) * 0x1p-24f - 0.5f;
        B[i] = (float)((s >> 16) & 0xffffff) * 0x1p-24f - 0.5f;
        C[i] = 0;
    }
    printf("| shape | M x N x K | GFLOP/s |\n|---|---|---|\n");
    for (size_t k = 0; k < sizeof S / sizeof S[0]; k++) {
        int M = S[k].M, N = S[k].N, K = S[k].K;
        int lda = S[k].ta ? M : K, ldb = S[k].tb ? K : N;
        double flop = 2.0 * M * N * K;
        /* calls per timed run: about secs / 5 of CPU at 100 GFLOP/s */
        long reps = (long)(secs / 5 * 100e9 / flop);
        if (reps < 1) reps = 1;
        double best = 1e30;
        for (int r = 0; r < 6; r++) { /* the first is a warm-up */
            double t0 = cpu_now();
            for (long q = 0; q < reps; q++)
                cblas_sgemm(CblasRowMajor, S[k].ta ? CblasTrans : CblasNoTrans, S[k].tb ? CblasTrans : CblasNoTrans, M,
                            N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
            double t = (cpu_now() - t0) / (double)reps;
            if (r > 0 && t < best) best = t;
        }
        printf("| %s | %d x %d x %d | %.1f |\n", S[k].what, M, N, K, flop / best * 1e-9);
    }
    free(A);
    free(B);
    free(C);
    return 0;
}
