/*
 * t_recipe.c - the block-scaled what-if read into the analysis and what it tells the user: the
 * per-block effect that per-tensor statistics miss, and the per-layer plan of a recipe.
 *
 * The case: a model p -> a -> b -> out (linear layers, ReLU between) whose layers a and b start
 * from weights holding the same values (256 outliers of +-0.5 among 3840 small values of at
 * most 0.02) arranged differently. In a the outliers fill one 16 x 16 tile (the NVFP4 weight
 * tile) and the 1 x 16 blocks of its trace_rows; in b every 16-block of every row and column, and
 * every 16 x 16 tile, holds outliers. Everything per tensor is the same for both: the /tensors
 * record, FP8 current scaling (one scale per tensor). Per block it is not: NVFP4 scales each
 * block of b to its outlier, and the small values beside it (below 1/24 of it) flush to zero.
 *
 * Checked: the trace's per-tensor records of a and b are the same and its NVFP4 rows are not;
 * the loader fills the column keys and its quant sums equal the rows'; the recipe findings and
 * compare's plan for NVFP4 name b (and neither a nor p), MXFP8's do not name b; info, compare
 * (text, JSON) and plot (--quant) show it; bad options exit 2. T_RECIPE_KEEP=1 in the
 * environment keeps the directory (its path on the log).
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "analysis/findings.h"
#include "analysis/load.h"
#include "analysis/recipe.h"
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

/* ./ampdiag ARGS > dir/out.txt 2> dir/err.txt: the exit status. */
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

/* The whole of dir/out.txt (static; "" when unreadable). */
static const char *out_text(void)
{
    static char buf[1 << 20];
    FILE *f = fopen(p("out.txt"), "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f)
        fclose(f);
    return buf;
}

enum { N = 64, NB = 256 };
static float wp[N * 32], wa[N * N], wb[N * N], wo[10 * N];

static int put(hid_t f, const char *path, const float *v, hsize_t r, hsize_t c)
{
    hsize_t dims[2] = {r, c};
    hid_t s = H5Screate_simple(c ? 2 : 1, dims, NULL);
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (s < 0 || lcpl < 0 || H5Pset_create_intermediate_group(lcpl, 1) < 0)
        return -1;
    hid_t d = H5Dcreate2(f, path, H5T_IEEE_F32LE, s, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    int rc = d >= 0 && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0 ? 0 : -1;
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(lcpl);
    H5Sclose(s);
    return rc;
}

static uint32_t lcg = 2024;
static float uniform(float scale)
{
    lcg = lcg * 1664525u + 1013904223u;
    return ((float)(lcg >> 8) / 16777216.0f * 2.0f - 1.0f) * scale;
}

/* The weights file: p and out plain, a and b the same values arranged differently. */
static int write_weights(void)
{
    static float small[N * N - NB];
    for (int i = 0; i < N * N - NB; i++)
        small[i] = uniform(0.02f);
    int ka = 0, kb = 0, ba = 0, bb = 0;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < N; c++) {
            int out_a = r < 16 && c < 16, out_b = (c - r + N) % 16 == 0;
            wa[r * N + c] = out_a ? (ba++ % 2 ? -0.5f : 0.5f) : small[ka++];
            wb[r * N + c] = out_b ? (bb++ % 2 ? -0.5f : 0.5f) : small[kb++];
        }
    for (int i = 0; i < N * 32; i++)
        wp[i] = uniform(0.15f);
    for (int i = 0; i < 10 * N; i++)
        wo[i] = uniform(0.1f);
    static const float zero[N] = {0};
    hid_t f = H5Fcreate(p("w.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0)
        return -1;
    int rc = put(f, "/p/weight", wp, N, 32) | put(f, "/p/bias", zero, N, 0) | put(f, "/a/weight", wa, N, N) |
             put(f, "/a/bias", zero, N, 0) | put(f, "/b/weight", wb, N, N) | put(f, "/b/bias", zero, N, 0) |
             put(f, "/out/weight", wo, 10, N) | put(f, "/out/bias", zero, 10, 0);
    return H5Fclose(f) < 0 ? -1 : rc;
}

/* ------------------------------------------------------------------------------------------
 * The trace as written
 * ------------------------------------------------------------------------------------------ */

/* The /quant row of a scheme (FP8 current scaling: its E4M3 row). */
static const ampdiag_trace_quant *qrow(const trace_rows *t, int64_t step, int layer, int kind, int scheme, int d)
{
    return trace_rows_quant(t, step, layer, kind, scheme, scheme == AMPDIAG_QS_CURRENT ? AMPDIAG_E4M3 : -1, d);
}

static double flushed_share(const ampdiag_trace_quant *q) { return (double)q->flushed / (double)q->count; }

static void check_trace(const trace_rows *t)
{
    int la = trace_rows_layer(t, "a"), lb = trace_rows_layer(t, "b");
    const ampdiag_trace_tensor *ta = trace_rows_tensor(t, 0, la, AMPDIAG_KIND_WEIGHT), *tb = trace_rows_tensor(t, 0, lb, AMPDIAG_KIND_WEIGHT);
    ok(ta && tb && ta->absmax == tb->absmax && ta->absmin_nz == tb->absmin_nz && ta->n_pos == tb->n_pos &&
           fabs(ta->rms - tb->rms) <= AMPDIAG_TSTATS_SUM_RTOL * ta->rms && ta->fp16_subnormal == tb->fp16_subnormal,
       "per tensor, a's and b's initial weights read the same (absmax %g, the same rms and counts)",
       ta ? ta->absmax : 0.0);
    const ampdiag_trace_quant *ca = qrow(t, 0, la, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_CURRENT, AMPDIAG_QD_TENSOR);
    const ampdiag_trace_quant *cb = qrow(t, 0, lb, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_CURRENT, AMPDIAG_QD_TENSOR);
    ok(ca && cb && ca->flushed == cb->flushed && ca->saturated == cb->saturated &&
           fabs(ca->err_sq - cb->err_sq) <= 1e-9 * ca->err_sq,
       "so does FP8 current scaling, one scale per tensor (%llu flushed each)",
       ca ? (unsigned long long)ca->flushed : 0ULL);
    const ampdiag_trace_quant *na = qrow(t, 0, la, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_NVFP4, AMPDIAG_QD_TILE);
    const ampdiag_trace_quant *nb = qrow(t, 0, lb, AMPDIAG_KIND_WEIGHT, AMPDIAG_QS_NVFP4, AMPDIAG_QD_TILE);
    ok(na && nb && flushed_share(nb) > 0.8 && flushed_share(na) < 0.15 && nb->blocks == na->blocks,
       "per block they differ: NVFP4's 16x16 tiles flush %.1f%% of b's weights, %.1f%% of a's",
       nb ? 100 * flushed_share(nb) : 0.0, na ? 100 * flushed_share(na) : 0.0);
}

/* ------------------------------------------------------------------------------------------
 * The analysis
 * ------------------------------------------------------------------------------------------ */

static int col_named(const an_run *r, const char *name)
{
    for (int c = 0; c < r->nwcol; c++)
        if (strcmp(r->wcol[c].name, name) == 0)
            return c;
    return -1;
}

/* The loader's sums of one (layer, kind, column) against the rows' own. */
static int sums_match(const trace_rows *t, const an_run *r, int layer, int kind, int col)
{
    ampdiag_qspec s;
    const an_qcell *q = an_cell_quant(&r->layers[layer].cell[kind], col);
    if (!q || an_whatif_qspec(r, col, &s))
        return 0;
    uint64_t count = 0, fl = 0, sat = 0, sub = 0, blocks = 0, dis = 0, recs = 0;
    double sig = 0, err = 0, mre = 0, worst = INFINITY;
    for (size_t i = 0; i < t->nq; i++) {
        const ampdiag_trace_quant *x = &t->Q[i];
        if (x->layer != layer || x->kind != kind || x->scheme != (int)s.scheme || x->direction != (int)s.dir ||
            x->rule != (int)s.rule || x->format != (int)s.elem)
            continue;
        recs++, count += x->count, fl += x->flushed, sat += x->saturated, sub += x->subnormal;
        blocks += x->blocks, dis += x->disagree, sig += x->sig_sq, err += x->err_sq;
        mre = x->max_rel_err > mre ? x->max_rel_err : mre;
        worst = fmin(worst, 10 * log10(x->sig_sq / x->err_sq));
    }
    return recs && q->records == recs && q->count == count && q->flushed == fl && q->saturated == sat &&
           q->subnormal == sub && q->blocks == blocks && q->disagree == dis && fabs(q->sig_sq - sig) <= 1e-9 * sig &&
           fabs(q->err_sq - err) <= 1e-9 * err && q->max_rel_err == mre && fabs(q->worst_sqnr_db - worst) < 1e-9;
}

/* The F_RECIPE_LAYER of a layer under a recipe, or NULL. */
static const an_finding *plan_of(const an_run *r, int rc, int layer)
{
    const an_finding_list *L = an_run_findings(r);
    int kr = an_finding_fig(F_RECIPE_LAYER, "recipe");
    for (const an_finding *f = NULL; (f = an_finding_next(L, F_RECIPE_LAYER, -1, f));)
        if ((int)f->v[kr] == rc && f->s.layer == layer)
            return f;
    return NULL;
}

static double fig(const an_finding *f, const char *name)
{
    int k = f ? an_finding_fig(f->id, name) : -1;
    return k >= 0 ? f->v[k] : NAN;
}

static void check_analysis(const trace_rows *t)
{
    an_run r;
    char err[512];
    an_options o = {.warmup = -1, .quiet = 1};
    if (an_load(p("q.h5"), &o, &r, err, sizeof err) != 0) {
        ok(0, "an_load: %s", err);
        an_free(&r);
        return;
    }
    int la = trace_rows_layer(t, "a"), lb = trace_rows_layer(t, "b"), lp = trace_rows_layer(t, "p");
    int c2d = col_named(&r, "nvfp4:e4m3@2d"), crow = col_named(&r, "mxfp8-e4m3:floor@row");
    const an_whatif_col *w = c2d >= 0 ? &r.wcol[c2d] : NULL;
    ok(w && w->source == AN_WS_QUANT && w->key.scheme == AMPDIAG_QS_NVFP4 + 1 && w->key.rule == AMPDIAG_QR_E4M3 + 1 &&
           w->key.direction == AMPDIAG_QD_TILE + 1 && w->key.block == 16 && w->lib_format == AMPDIAG_E2M1 &&
           crow >= 0 && crow < c2d && c2d > col_named(&r, "e5m2_delayed"),
       "the /quant rows are columns of the format axis, their keys filled (scheme, rule, direction, block), "
       "after the per-value columns, by scheme");
    ok(w && w->ref_flush > 0.05 && w->ref_flush < 0.2 && w->ref_sqnr_db > 15 && w->ref_sqnr_db < 25,
       "each with its reference on normal values (NVFP4 2-D: flushes %.2f%%, SQNR %.1f dB)",
       w ? 100 * w->ref_flush : 0.0, w ? w->ref_sqnr_db : 0.0);
    ok(c2d >= 0 && crow >= 0 && sums_match(t, &r, lb, AMPDIAG_KIND_WEIGHT, c2d) &&
           sums_match(t, &r, la, AMPDIAG_KIND_ACTIVATION, crow) && sums_match(t, &r, lp, AMPDIAG_KIND_WEIGHT, c2d),
       "the cells' quant sums are the rows' over the steps (counts, energies, largest error, worst SQNR)");
    const an_finding *pb = plan_of(&r, AN_RECIPE_NVFP4, lb), *pa = plan_of(&r, AN_RECIPE_NVFP4, la),
                     *pp = plan_of(&r, AN_RECIPE_NVFP4, lp);
    ok(pb && fig(pb, "keep") == 1 && fig(pb, "rank") == 1 && fig(pb, "reason") == AN_RC_FLUSH &&
           pb->s.kind == AMPDIAG_KIND_WEIGHT && pa && fig(pa, "keep") == 0 && pp && fig(pp, "keep") == 0,
       "NVFP4's plan: b first and stays BF16 (its weights flush %.1f%%), a and p take it",
       100 * fig(pb, "flush_share"));
    const an_finding *mb = plan_of(&r, AN_RECIPE_MXFP8, lb);
    ok(mb && fig(mb, "keep") == 0, "MXFP8 (E4M3's range covers the outliers and the small values): b takes it");
    an_free(&r);
}

/* ------------------------------------------------------------------------------------------
 * The commands
 * ------------------------------------------------------------------------------------------ */

/* The "to" of compare's recipe decision in its JSON, into buf ("" when none). */
static void decision_to(const char *json, const char *recipe, char *buf, size_t n)
{
    char key[96];
    buf[0] = 0;
    snprintf(key, sizeof key, "\"what\":\"recipe_bf16_layers\",\"recipe\":\"%s\",\"to\":", recipe);
    const char *at = strstr(json, key);
    if (!at)
        return;
    at += strlen(key);
    if (*at++ != '"')
        return;
    size_t k = strcspn(at, "\"");
    snprintf(buf, n, "%.*s", (int)(k < n ? k : n - 1), at);
}

static int names(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *q = list; *q;) {
        size_t k = strcspn(q, ",");
        if (k == len && strncmp(q, name, len) == 0)
            return 1;
        q += k + (q[k] == ',');
    }
    return 0;
}

static void check_commands(void)
{
    char to[256];
    int rc = run("compare %s %s --recipe nvfp4 --format json", p("q.h5"), p("q16.h5"));
    decision_to(out_text(), "nvfp4", to, sizeof to);
    ok(rc == 0 && names(to, "b") && !names(to, "a") && !names(to, "p"),
       "compare --recipe nvfp4: the decision keeps %s in BF16 (b, not a or p)", to);
    rc = run("compare %s %s --recipe mxfp8 --format json", p("q.h5"), p("q16.h5"));
    decision_to(out_text(), "mxfp8", to, sizeof to);
    ok(rc == 0 && strstr(out_text(), "\"recipe\":\"mxfp8\"") && !names(to, "b"),
       "compare --recipe mxfp8: b is not named (%s)", to[0] ? to : "no layer");
    rc = run("compare %s %s --recipe nvfp4", p("q.h5"), p("q16.h5"));
    ok(rc == 0 && strstr(out_text(), "under nvfp4 keep ") && strstr(out_text(), "1. b: stay BF16, its weights (nvfp4:e4m3@2d) flush"),
       "compare's text: the decision and each run's plan, b first");
    rc = run("compare %s %s", p("q.h5"), p("q16.h5"));
    ok(rc == 0 && strstr(out_text(), "low-precision recipes mxfp8, nvfp4, fp8-current") &&
           !strstr(out_text(), "plan for nvfp4"),
       "without --recipe one line names the recipes counted, no plan");
    rc = run("compare %s %s --recipe nvfp4 --format md", p("q.h5"), p("q16.h5"));
    ok(rc == 0 && strstr(out_text(), "### Recipe nvfp4") && strstr(out_text(), "| 1 | b | **stay BF16** |"),
       "compare's Markdown: the plan as a table");
    rc = run("info %s --recipe nvfp4", p("q.h5"));
    ok(rc == 0 && strstr(out_text(), "plan for nvfp4") && strstr(out_text(), "b weights (nvfp4:e4m3@2d) flush to zero"),
       "info --recipe nvfp4: the tensors it would hurt and the plan");
    rc = run("info %s --format json", p("q.h5"));
    ok(rc == 0 && strstr(out_text(), "\"counted\":[\"mxfp8\",\"nvfp4\",\"fp8-current\"") &&
           strstr(out_text(), "\"stay_bf16\":[\"b\"") && strstr(out_text(), "\"nvfp4:e4m3@2d\":{\"element\":\"e2m1\""),
       "info's JSON: every recipe counted with its plan, and the /quant figures per column");
    rc = run("info %s --recipe fp8-block", p("q.h5"));
    ok(rc == 0 && strstr(out_text(), "fp8-block: not counted in the trace"), "a recipe the trace did not count: said so");
    rc = run("info %s --recipe fp4", p("q.h5"));
    ok(rc == 2, "info --recipe fp4: exit 2");
    rc = run("compare %s --recipe nvfp5", p("q.h5"));
    ok(rc == 2, "compare --recipe nvfp5: exit 2");
}

/* The flush heatmap of NVFP4's weights: b's row above a's at every step. */
static void check_plot(void)
{
    int rc = run("plot %s -o %s --no-draw --quant nvfp4:e4m3@2d --quant-metric flush", p("q.h5"), p("charts"));
    FILE *f = fopen(p("charts/quant-heatmap-nvfp4-e4m3-2d-fp32-weight.bin"), "rb");
    float m[64];
    size_t n = f ? fread(m, sizeof *m, 64, f) : 0;
    if (f)
        fclose(f);
    /* rows in the union's layer order: p, a, b, out; columns steps 0, 5, 10, 15 */
    int good = rc == 0 && n == 16;
    for (int k = 0; good && k < 4; k++)
        good = m[2 * 4 + k] > 0.8f && m[1 * 4 + k] < 0.15f;
    ok(good, "plot --quant nvfp4:e4m3@2d --quant-metric flush: a 4 x 4 weight panel, b's row above 80%%, a's "
             "below 15%% (%zu values)", n);
    rc = run("plot %s -o %s --no-draw --quant nvfp4 --quant-metric snr", p("q.h5"), p("charts"));
    ok(rc == 2, "--quant-metric snr: exit 2");
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/t_recipe.XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    FILE *sp = fopen(p("m.spec"), "w");
    if (!sp ||
        fputs("input 32\nlinear p 64\nrelu\nlinear a 64\nrelu\nlinear b 64\nrelu\nlinear out 10\nloss softmax_ce\n", sp) <
            0 ||
        fclose(sp) != 0 || write_weights() != 0) {
        printf("Bail out! cannot write the model and weights files in %s\n", dir);
        return 1;
    }
    const char *common = "--progress none --steps 20 --batch 32 --eval-every 0 --trace-threads 0 "
                         "--trace-every 1 --whatif nvfp4,mxfp8,fp8-current --whatif-every 5";
    int rc = run("run %s --model %s --init-from %s -o %s", common, p("m.spec"), p("w.h5"), p("q.h5"));
    int rc16 = run("run %s --model %s --init-from %s --precision bf16 -o %s", common, p("m.spec"), p("w.h5"),
                   p("q16.h5"));
    ok(rc == 0 && rc16 == 0, "fp32 and bf16 runs traced with --whatif nvfp4,mxfp8,fp8-current");
    trace_rows t;
    if (rc != 0 || rc16 != 0 || trace_rows_load(&t, p("q.h5")) != 0) {
        skip("no trace to read");
        return done_testing();
    }
    check_trace(&t);
    check_analysis(&t);
    trace_rows_free(&t);
    check_commands();
    check_plot();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (getenv("T_RECIPE_KEEP")) /* the traces and charts of the case, for docs/numerics.md */
        diag("kept %s", dir);
    else if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
