/*
 * t_quant_run.c - `ampdiag run --whatif` end to end: the /quant rows of a run read back. Two
 * layers start from weights that hold the same values (the same 32 outliers among the same
 * 992 small values) arranged differently: in `a` the outliers fill one row, in `b` each row
 * has one. Everything per tensor (the /tensors record, FP8 current scaling) is the same for
 * both; the block formats are not: rowwise blocks of `b` each carry an outlier that flushes the
 * small values beside it. The rows of the initial weights equal ampdiag_quant_whatif on them,
 * the activation rows have the model's shapes, and --whatif none, --whatif-every 0 and the
 * default cadence (the histogram steps) write what they say.
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "tap.h"
#include "trace_rows.h"

#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[128];

static const char *p(const char *name)
{
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

__attribute__((format(printf, 1, 2))) static int run(const char *fmt, ...)
{
    char args[2048], cmd[2600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "./ampdiag %s > %s/out.txt 2> %s/err.txt", args, dir, dir);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

enum { N = 32 };
static float wa[N * N], wb[N * N], wo[10 * N];

static int put(hid_t f, const char *path, const float *v, hsize_t r, hsize_t c)
{
    hsize_t dims[2] = {r, c};
    hid_t s = H5Screate_simple(c ? 2 : 1, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (s < 0 || lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0)
        return -1;
    hid_t d = H5Dcreate2(f, path, H5T_IEEE_F32LE, s, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    int rc = d >= 0 && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0 ? 0 : -1;
    if (d >= 0) H5Dclose(d);
    H5Pclose(lcpl);
    H5Sclose(s);
    return rc;
}

/* The weights file: a and b hold the same values, arranged differently; biases zero. */
static int write_weights(void)
{
    float small[N * N - N];
    uint32_t st = 12345;
    for (int i = 0; i < N * N - N; i++) {
        st = st * 1664525u + 1013904223u;
        small[i] = ((float)(st >> 8) / 16777216.0f - 0.5f) * 0.1f;
    }
    int ka = 0, kb = 0;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < N; c++) {
            wa[r * N + c] = r == 0 ? 8.0f : small[ka++];
            wb[r * N + c] = r == c ? 8.0f : small[kb++];
        }
    for (int i = 0; i < 10 * N; i++)
        wo[i] = small[i] * 0.5f;
    static const float zero[N] = {0};
    hid_t f = H5Fcreate(p("w.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0)
        return -1;
    int rc = put(f, "/a/weight", wa, N, N) | put(f, "/a/bias", zero, N, 0) | put(f, "/b/weight", wb, N, N) |
             put(f, "/b/bias", zero, N, 0) | put(f, "/out/weight", wo, 10, N) | put(f, "/out/bias", zero, 10, 0);
    return H5Fclose(f) < 0 ? -1 : rc;
}

static double sqnr(const ampdiag_trace_quant *q) { return 10 * log10(q->sig_sq / q->err_sq); }

int main(void)
{
    snprintf(dir, sizeof dir, "%s/t_quant_run.XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    FILE *sp = fopen(p("m.spec"), "w");
    if (!sp || fputs("input 32\nlinear a 32\nrelu\nlinear b 32\nrelu\nlinear out 10\nloss softmax_ce\n", sp) < 0 ||
        fclose(sp) != 0 || write_weights() != 0) {
        printf("Bail out! cannot write the model and weights files in %s\n", dir);
        return 1;
    }
    const char *common = "--progress none --steps 4 --batch 16 --eval-every 0 --trace-threads 0 --trace-every 1";
    int rc = run("run %s --model %s --init-from %s --whatif nvfp4,mxfp8,fp8-current --whatif-every 1 -o %s", common,
                 p("m.spec"), p("w.h5"), p("q.h5"));
    ok(rc == 0, "ampdiag run --whatif nvfp4,mxfp8,fp8-current --whatif-every 1 exits 0");
    trace_rows t;
    if (rc != 0 || trace_rows_load(&t, p("q.h5")) != 0) {
        skip("no trace to read");
        return done_testing();
    }
    int la = trace_rows_layer(&t, "a"), lb = trace_rows_layer(&t, "b");
    const char *qs = ampdiag_trace_attr_str(t.r, "quant_schemes");
    ok(qs && strstr(qs, "nvfp4:e4m3@2d") && strstr(qs, "mxfp8-e4m3:floor@col") && strstr(qs, "fp8-current-e5m2:fp32") &&
           ampdiag_trace_attr_int(t.r, "quant_every", -1) == 1,
       "root attributes quant_schemes (%s) and quant_every 1", qs ? qs : "(none)");
    /* per tensor, a and b are the same */
    const ampdiag_trace_tensor *ta = trace_rows_tensor(&t, 0, la, AMPDIAG_KIND_WEIGHT), *tb = trace_rows_tensor(&t, 0, lb, AMPDIAG_KIND_WEIGHT);
    /* the rms within the sums' documented bound: each sumsq within AMPDIAG_TSTATS_SUM_RTOL of the
     * exact one (the 512-bit kernel adds in float within a block), so each rms within half that */
    ok(ta && tb && ta->absmax == tb->absmax && fabs(ta->rms - tb->rms) <= AMPDIAG_TSTATS_SUM_RTOL * ta->rms &&
           ta->n_pos == tb->n_pos &&
           ta->absmax == 8.0f,
       "the /tensors records of a's and b's initial weights are the same (absmax 8, the same rms)");
    const ampdiag_trace_quant *ca = trace_rows_quant(&t, 0, la, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_CURRENT, AMPDIAG_E4M3, AMPDIAG_QD_TENSOR);
    const ampdiag_trace_quant *cb = trace_rows_quant(&t, 0, lb, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_CURRENT, AMPDIAG_E4M3, AMPDIAG_QD_TENSOR);
    ok(ca && cb && ca->flushed == cb->flushed && ca->subnormal == cb->subnormal && ca->scale == 56.0f &&
           fabs(ca->err_sq - cb->err_sq) <= 1e-12 * ca->err_sq,
       "so is FP8 current scaling (scale 448/8 = 56, the same flushes and error)");
    /* per block they are not */
    const ampdiag_trace_quant *na = trace_rows_quant(&t, 0, la, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_NVFP4, AMPDIAG_E2M1, AMPDIAG_QD_ROWWISE);
    const ampdiag_trace_quant *nb = trace_rows_quant(&t, 0, lb, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_NVFP4, AMPDIAG_E2M1, AMPDIAG_QD_ROWWISE);
    ok(na && nb && nb->flushed > na->flushed + 300 && sqnr(na) > sqnr(nb) + 10,
       "NVFP4 rowwise: b's blocks each hold an outlier: %llu values flush against a's %llu, SQNR %.1f against %.1f dB",
       nb ? (unsigned long long)nb->flushed : 0ULL, na ? (unsigned long long)na->flushed : 0ULL, nb ? sqnr(nb) : 0,
       na ? sqnr(na) : 0);
    const ampdiag_trace_quant *ma = trace_rows_quant(&t, 0, la, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_MX, AMPDIAG_E4M3, AMPDIAG_QD_ROWWISE);
    const ampdiag_trace_quant *nbc = trace_rows_quant(&t, 0, lb, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_NVFP4, AMPDIAG_E2M1, AMPDIAG_QD_COLWISE);
    ok(ma && nbc && ma->scale_emax - ma->scale_emin >= 5 && ma->scale_emax == 3 - 8 + 0 && nbc->disagree > 0,
       "MXFP8: a's rows keep their own scales (exponents %d..%d: the outlier row's 2^-5 above the others); "
       "b's NVFP4 columns disagree with its rows in %llu values", ma ? ma->scale_emin : 0, ma ? ma->scale_emax : 0,
       nbc ? (unsigned long long)nbc->disagree : 0ULL);
    /* the rows of the initial weights are ampdiag_quant_whatif's on them (with the bias tail) */
    float wbt[N * N + N];
    memcpy(wbt, wb, sizeof wb);
    memset(wbt + N * N, 0, N * sizeof(float));
    ampdiag_qspec s[8];
    size_t ns;
    char err[160];
    ampdiag_qstats q[8];
    int same = ampdiag_qspec_parse("nvfp4,mxfp8", s, 8, &ns, err, sizeof err) == 0 &&
               ampdiag_quant_whatif(wbt, N * N + N, N, N, 8.0f, ns, s, q) == 0;
    for (size_t i = 0; same && i < ns; i++) {
        const ampdiag_trace_quant *g = trace_rows_quant(&t, 0, lb, AMPDIAG_KIND_WEIGHT, s[i].scheme, s[i].elem, s[i].dir);
        same = g && g->count == N * N + N && g->flushed == q[i].flushed && g->saturated == q[i].saturated &&
               g->blocks == q[i].blocks && g->disagree == q[i].disagree && g->scale_emin == q[i].scale_emin &&
               fabs(g->err_sq - q[i].err_sq) <= 1e-12 * q[i].err_sq;
    }
    ok(same, "b's weight rows at step 0 are ampdiag_quant_whatif's on its weights and bias (a 32 x 32 matrix, a tail of 32)");
    /* shapes: activations [16, 32] rowwise blocks of 32 -> 16; columnwise of 32 rows -> 32 */
    const ampdiag_trace_quant *ar = trace_rows_quant(&t, 1, la, AMPDIAG_KIND_ACTIVATION, AMPDIAG_QS_MX, AMPDIAG_E4M3, AMPDIAG_QD_ROWWISE);
    const ampdiag_trace_quant *ac = trace_rows_quant(&t, 1, la, AMPDIAG_KIND_ACTIVATION_GRAD, AMPDIAG_QS_MX, AMPDIAG_E4M3, AMPDIAG_QD_COLWISE);
    const ampdiag_trace_quant *at = trace_rows_quant(&t, 1, la, AMPDIAG_KIND_ACTIVATION, AMPDIAG_QS_NVFP4, AMPDIAG_E2M1, AMPDIAG_QD_TILE);
    const ampdiag_trace_quant *wt = trace_rows_quant(&t, 1, la, AMPDIAG_KIND_WEIGHT_GRAD, AMPDIAG_QS_NVFP4, AMPDIAG_E2M1, AMPDIAG_QD_TILE);
    ok(ar && ac && ar->count == 16 * 32 && ar->blocks == 16 && ac->blocks == 32 && !at && !wt &&
           trace_rows_quant(&t, 1, la, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_NVFP4, AMPDIAG_E2M1, AMPDIAG_QD_TILE),
       "activations [16, 32]: 16 rowwise and 32 columnwise MX blocks; NVFP4's 16x16 tiles for weights only");
    size_t steps_seen = 0;
    for (int64_t st = 0; st < 4; st++)
        steps_seen += trace_rows_quant(&t, st, lb, AMPDIAG_KIND_WEIGHT_GRAD, AMPDIAG_QS_MX, AMPDIAG_E4M3, AMPDIAG_QD_ROWWISE) != NULL;
    ok(steps_seen == 4, "with --whatif-every 1 every traced step has its rows (weight gradients included)");
    trace_rows_free(&t);

    /* the default: on the histogram steps; none; never */
    rc = run("run %s --model %s --hist-every 2 -o %s", common, p("m.spec"), p("d.h5"));
    int good = rc == 0 && trace_rows_load(&t, p("d.h5")) == 0;
    if (good) {
        int s0 = 0, s1 = 0, s2 = 0;
        for (size_t i = 0; i < t.nq; i++) {
            s0 += t.Q[i].step == 0;
            s1 += t.Q[i].step == 1;
            s2 += t.Q[i].step == 2;
        }
        const char *dq = ampdiag_trace_attr_str(t.r, "quant_schemes");
        good = s0 > 0 && s1 == 0 && s2 == s0 && dq && strcmp(dq, "mxfp8-e4m3:floor@row,nvfp4:e4m3@row") == 0 &&
               ampdiag_trace_attr_int(t.r, "quant_every", -1) == 2;
        for (size_t i = 0; good && i < t.nq; i++)
            good = t.Q[i].direction == AMPDIAG_QD_ROWWISE;
        trace_rows_free(&t);
    }
    ok(good, "by default: mxfp8@row and nvfp4@row, on the histogram steps only (--hist-every 2: steps 0 and 2)");
    rc = run("run %s --model %s --whatif none -o %s", common, p("m.spec"), p("n.h5"));
    good = rc == 0 && trace_rows_load(&t, p("n.h5")) == 0;
    if (good) {
        good = t.nq == 0 && ampdiag_trace_attr_str(t.r, "quant_schemes") == NULL;
        trace_rows_free(&t);
    }
    ok(good, "--whatif none: no /quant rows, no quant_schemes attribute");
    rc = run("run %s --model %s --whatif all --whatif-every 0 -o %s", common, p("m.spec"), p("z.h5"));
    good = rc == 0 && trace_rows_load(&t, p("z.h5")) == 0;
    if (good) {
        good = t.nq == 0;
        trace_rows_free(&t);
    }
    ok(good, "--whatif-every 0: no rows");
    rc = run("run %s --model %s --whatif mxfp8@diag -o %s", common, p("m.spec"), p("e.h5"));
    ok(rc == 2 && access(p("e.h5"), F_OK) != 0, "a bad --whatif exits 2 before any work (no trace)");
    rc = run("run %s --model %s --whatif-every -1 -o %s", common, p("m.spec"), p("e.h5"));
    ok(rc == 2, "--whatif-every -1 exits 2");
    const char *files[] = {"m.spec", "w.h5", "q.h5", "d.h5", "n.h5", "z.h5", "e.h5", "out.txt", "err.txt"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(p(files[i]));
    rmdir(dir);
    return done_testing();
}
