/*
 * t_selftest.c - `ampdiag selftest`'s comparison of a backend with the CPU (src/train/selftest.c),
 * with stand-in backends, since this machine may have no GPU:
 *   - the CPU backend with its GEMMs summed in another order (each split in two halves over K,
 *     the halves added: what another BLAS, cuBLAS among them, may do): every check passes, and
 *     the largest loss differences of the 20-step runs, printed, stay below a quarter of the
 *     tolerances (so that the tolerances leave room for a GPU's other differences too);
 *   - the CPU backend with an optimizer that takes twice the learning rate: the runs' checks
 *     and the operation-by-operation comparison fail (naming optim_step), the others pass.
 */
#include "train/selftest.h"
#include "tap.h"

#include <math.h>
#include <string.h>

/* C = op(A) op(B) over k < K/2, then + the rest (beta 1), rounded once at the end. */
static void gemm_split(const backend *bk, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc, bk_rnd r)
{
    const backend *cpu = backend_cpu();
    (void)bk;
    if (K < 2) {
        cpu->gemm(cpu, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, r);
        return;
    }
    int h = K / 2;
    const float *A2 = ta ? A + (size_t)h * (size_t)lda : A + h, *B2 = tb ? B + h : B + (size_t)h * (size_t)ldb;
    cpu->gemm(cpu, ta, tb, M, N, h, alpha, A, lda, B, ldb, beta, C, ldc, BK_NO_RND);
    cpu->gemm(cpu, ta, tb, M, N, K - h, alpha, A2, lda, B2, ldb, 1.0f, C, ldc, BK_NO_RND);
    for (int i = 0; i < M; i++)
        cpu->round(cpu, C + (size_t)i * (size_t)ldc, C + (size_t)i * (size_t)ldc, (size_t)N, r);
}

static void optim_wrong(const backend *bk, const bk_optim *c, long t, float *w, const float *g, float *m, float *v,
                        size_t n, double lr, float ginv, float gscale, float *dw_keep, float *w_keep,
                        float *w_copy, uint64_t *nonfinite)
{
    (void)bk;
    const backend *cpu = backend_cpu();
    cpu->optim_step(cpu, c, t, w, g, m, v, n, 2.0 * lr, ginv, gscale, dw_keep, w_keep, w_copy, nonfinite);
}

/* Does gemm_split change a GEMM's bits (on 64 x 64 x 100 random matrices)? */
static int split_differs(void)
{
    enum { M = 64, N = 64, K = 100 };
    static float A[M * K], B[K * N], C1[M * N], C2[M * N];
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < M * K; i++)
        A[i] = (float)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 40) * 0x1p-24f - 0.5f;
    for (int i = 0; i < K * N; i++)
        B[i] = (float)((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 40) * 0x1p-24f - 0.5f;
    const backend *cpu = backend_cpu();
    cpu->gemm(cpu, 0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C1, N, BK_NO_RND);
    gemm_split(cpu, 0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C2, N, BK_NO_RND);
    int differ = 0;
    for (int i = 0; i < M * N; i++)
        differ += memcmp(&C1[i], &C2[i], sizeof C1[i]) != 0;
    return differ;
}

typedef struct tally {
    int runs, runs_failed, other_failed;
    int ops, ops_failed;   /* the operation-by-operation comparisons of the backend under test */
    char ops_detail[400];
    double worst[3]; /* largest measured / limit per precision: fp32, fp16, bf16 */
} tally;

static void sink(const st_report *r, void *arg)
{
    tally *t = arg;
    int run = strncmp(r->what, "run: ", 5) == 0 && strstr(r->what, " against ");
    if (run) {
        t->runs++;
        t->runs_failed += r->status == ST_FAIL;
        int p = strstr(r->what, " fp32 ") ? 0 : strstr(r->what, " fp16 ") ? 1 : 2;
        if (r->measured / r->limit > t->worst[p])
            t->worst[p] = r->measured / r->limit;
        diag("%s: largest loss difference %.3g (tolerance %g)", r->what, r->measured, r->limit);
    } else if (strncmp(r->what, "operations: cpu-", 16) == 0) {
        t->ops++;
        t->ops_failed += r->status == ST_FAIL;
        snprintf(t->ops_detail, sizeof t->ops_detail, "%s", r->detail);
        diag("%s: %s", r->what, r->detail);
    } else {
        t->other_failed += r->status == ST_FAIL;
        if (r->status == ST_FAIL)
            diag("%s: %s", r->what, r->detail);
    }
}

static int run_with(const backend *bk, long steps, tally *t)
{
    selftest_options o = {NULL, bk, steps, NULL};
    char err[512] = "";
    int failed = 0;
    memset(t, 0, sizeof *t);
    int rc = selftest_run(&o, sink, t, &failed, err, sizeof err);
    if (rc)
        diag("selftest_run: %s", err);
    return rc ? -1 : failed;
}

int main(void)
{
    backend split = *backend_cpu(), wrong = *backend_cpu();
    split.name = "cpu-split-k";
    split.gemm = gemm_split;
    wrong.name = "cpu-wrong-lr";
    wrong.optim_step = optim_wrong;
    tally t;
    int failed = run_with(&split, 20, &t);
    ok(failed == 0 && t.runs == 6, "GEMMs summed in another order: every check passes (%d failed, %d runs compared)",
       failed, t.runs);
    ok(t.ops == 1 && t.ops_failed == 0, "its operations, compared one by one, pass (the GEMMs within their bound)");
    int d = split_differs();
    ok(d > 0, "the other order changes GEMM results (%d of 4096 values of a 64 x 64 x 100 product)", d);
    static const char *const pn[3] = {"fp32", "fp16", "bf16"};
    for (int p = 0; p < 3; p++)
        ok(t.worst[p] < 0.25, "%s: the largest loss difference is %.3g of the tolerance (below 1/4)", pn[p], t.worst[p]);
    ok(t.worst[1] > 0 && t.worst[2] > 0, "in fp16 and bf16 the other order did change the losses");
    failed = run_with(&wrong, 4, &t);
    ok(t.runs == 6 && t.runs_failed == 6 && t.other_failed == 0,
       "twice the learning rate: all %d run comparisons fail (%d), the other checks pass", t.runs, t.runs_failed);
    ok(t.ops == 1 && t.ops_failed == 1 && strstr(t.ops_detail, "the first: optim_step"),
       "the operation-by-operation comparison fails and names the optimizer step first");
    ok(failed == t.runs_failed + 1, "the failures are counted (%d)", failed);
    return done_testing();
}
