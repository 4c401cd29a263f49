/*
 * t_plot.c - plot_traces() on two small synthetic traces whose every value is known: the chart
 * list and sizes, the numbers in the data files (loss, markers, loss scale, ranges, heatmap
 * fractions, histogram fractions and their unscaled shift), the scripts, the options (clip,
 * layers, histogram steps), the errors (missing trace, bad options, missing templates,
 * gnuplot missing) and, where gnuplot is installed, that every chart is drawn without a word
 * on stderr.
 *
 * The fp16 trace: layers fc1 (linear), relu1, fc2 (linear); 10 steps; loss 2 / (1 + step),
 * NaN at step 3, which is skipped (nan_backward in fc2, scale backoff 1024 -> 512);
 * grad norm 1 + step; per step and layer an activation and (linear layers) a weight gradient
 * of 64 values: one 2^(step - 4) (the largest), 3 + step values 1e-9 (the smallest; FP16
 * flushes them to zero) and zeros; weight-gradient histograms at steps 0 and 5.
 * The fp32 trace: the same without loss scaling, skips or events; clip 2.5.
 */
#include "tap.h"

#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "plot/plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 64
#define NSTEPS 10

static char dir[512];

static void fill(float *x, int64_t step)
{
    for (int i = 0; i < N; i++)
        x[i] = 0;
    x[0] = ldexpf(1.0f, (int)step - 4);
    for (int i = 1; i <= 3 + step; i++)
        x[i] = -1e-9f;
}

/* The trace of a run of model and data in precision; the activation record of layer gap_layer
 * at step gap_step is left out (-1: none): a step that layer was not traced at. */
static int write_trace_of(const char *path, const char *precision, const char *model, const char *data,
                          int gap_layer, int64_t gap_step)
{
    int fp16 = strcmp(precision, "fp16") == 0;
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    o.overwrite = 1;
    ampdiag_trace_writer *w;
    if (ampdiag_trace_create(path, &o, &w))
        return -1;
    int rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PRECISION, precision);
    rc |= ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_MODEL, model);
    rc |= ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_DATA, data);
    rc |= ampdiag_trace_set_attr_double(w, AMPDIAG_ATTR_CLIP, fp16 ? 0 : 2.5);
    int l0 = ampdiag_trace_add_layer(w, "fc1", "linear", "[4, 4]", 20);
    int l1 = ampdiag_trace_add_layer(w, "relu1", "relu", "", 0);
    int l2 = ampdiag_trace_add_layer(w, "fc2", "linear", "[4, 4]", 20);
    if (rc || l0 != 0 || l1 != 1 || l2 != 2) {
        ampdiag_trace_close(w, AMPDIAG_STATUS_UNKNOWN);
        return -1;
    }
    float x[N];
    for (int64_t s = 0; s < NSTEPS; s++) {
        ampdiag_tstats st;
        ampdiag_hist h;
        fill(x, s);
        ampdiag_tstats_compute(x, N, &st, &h);
        for (int l = 0; l < 3; l++) {
            if (l != gap_layer || s != gap_step)
                rc |= ampdiag_trace_append_tensor(w, s, l, AMPDIAG_KIND_ACTIVATION, &st, 0);
            if (l != 1)
                rc |= ampdiag_trace_append_tensor(w, s, l, AMPDIAG_KIND_WEIGHT_GRAD, &st, 0);
            if (l != 1 && (s == 0 || s == 5))
                rc |= ampdiag_trace_append_hist(w, s, l, AMPDIAG_KIND_WEIGHT_GRAD, &h);
        }
        ampdiag_trace_step r;
        memset(&r, 0, sizeof r);
        r.step = s;
        r.loss = 2.0 / (1.0 + (double)s);
        r.loss_scale = 1;
        r.grad_norm = 1.0 + (double)s;
        r.clip_coef = 1;
        r.lr = 1e-3;
        if (fp16) {
            r.loss_scale = s <= 3 ? 1024 : 512;
            if (s == 3) {
                r.loss = NAN;
                r.skipped = 1;
                r.grad_norm = NAN;
                snprintf(r.skip_reason, sizeof r.skip_reason, "nan in fc2 weight_grad");
                rc |= ampdiag_trace_append_event(w, s, 2, AMPDIAG_EV_NAN_BACKWARD, NAN, "nan");
                rc |= ampdiag_trace_append_event(w, s, -1, AMPDIAG_EV_SCALE_BACKOFF, 512, NULL);
                rc |= ampdiag_trace_append_event(w, s, -1, AMPDIAG_EV_SKIPPED, NAN, NULL);
            }
        }
        rc |= ampdiag_trace_append_step(w, &r);
        if (s == 4 || s == 9)
            rc |= ampdiag_trace_append_eval(w, s, 1.5 / (1.0 + (double)s), 0.5);
    }
    rc |= ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE);
    return rc ? -1 : 0;
}

static int write_trace(const char *path, const char *precision)
{
    return write_trace_of(path, precision, "mlp", "synthetic:test", -1, -1);
}

/* ------------------------------------------------------------------------------------------
 * Reading what plot wrote
 * ------------------------------------------------------------------------------------------ */

static char *slurp(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    size_t k;
    while (b && (k = fread(b + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *nb = realloc(b, 2 * cap + 1);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    if (fclose(f) != 0 && b) {
        free(b);
        return NULL;
    }
    if (b)
        b[n] = 0;
    if (len)
        *len = n;
    return b;
}

/* Data blocks are separated by two empty lines, which strtok hides: count them by hand. */
static int block_rows(const char *name, int index, double *col0, int max)
{
    char *b = slurp(name, NULL);
    if (!b)
        return -1;
    int blk = 0, rows = 0, empty = 0;
    char *p = b;
    while (*p) {
        char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0) {
            if (++empty == 2)
                blk++;
        } else {
            empty = 0;
            if (p[0] != '#' && blk == index) {
                if (rows < max && col0)
                    col0[rows] = strtod(p, NULL);
                rows++;
            }
        }
        if (!e)
            break;
        p = e + 1;
    }
    free(b);
    return rows;
}

/* Column c of row `row` of block `index`. */
static double cell(const char *name, int index, int row, int c)
{
    char *b = slurp(name, NULL);
    if (!b)
        return -999;
    int blk = 0, rows = 0, empty = 0;
    double v = -999;
    char *p = b;
    while (*p) {
        char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0) {
            if (++empty == 2)
                blk++;
        } else {
            empty = 0;
            if (p[0] != '#' && blk == index) {
                if (rows == row) {
                    char line[512];
                    snprintf(line, sizeof line, "%.*s", (int)(len < 511 ? len : 511), p);
                    char *q = line, *end;
                    for (int k = 0; k <= c; k++) {
                        v = strtod(q, &end);
                        if (end == q) {
                            v = -999;
                            break;
                        }
                        q = end;
                    }
                    break;
                }
                rows++;
            }
        }
        if (!e)
            break;
        p = e + 1;
    }
    free(b);
    return v;
}

static int exists(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static int contains(const char *name, const char *text)
{
    char *b = slurp(name, NULL);
    int r = b && strstr(b, text) != NULL;
    free(b);
    return r;
}

static const plot_chart *chart(const plot_result *res, const char *file)
{
    for (size_t i = 0; i < res->n; i++)
        if (strcmp(res->charts[i].file, file) == 0)
            return &res->charts[i];
    return NULL;
}

/* Width and height of a PNG (0 when it is not one). */
static int png_size(const char *name, unsigned *w, unsigned *h)
{
    size_t n;
    unsigned char *b = (unsigned char *)slurp(name, &n);
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    static const unsigned char iend[8] = {'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
    int ok_ = b && n > 45 && memcmp(b, sig, 8) == 0 && memcmp(b + 12, "IHDR", 4) == 0 &&
              memcmp(b + n - 8, iend, 8) == 0;
    if (ok_) {
        *w = (unsigned)b[16] << 24 | (unsigned)b[17] << 16 | (unsigned)b[18] << 8 | b[19];
        *h = (unsigned)b[20] << 24 | (unsigned)b[21] << 16 | (unsigned)b[22] << 8 | b[23];
    }
    free(b);
    return ok_;
}

static int has_gnuplot(void)
{
    const char *path = getenv("PATH");
    if (!path)
        return 0;
    char *p = strdup(path);
    int found = 0;
    for (char *d = strtok(p, ":"); d && !found; d = strtok(NULL, ":")) {
        char f[1024];
        snprintf(f, sizeof f, "%s/gnuplot", d);
        found = access(f, X_OK) == 0;
    }
    free(p);
    return found;
}

/* What the charts say about themselves (issue 31's charts): a heatmap of an FP16 run shows the
 * increase of its zeros over an FP32 run of the same model and data, or its own zeros saying
 * so; an FP32 heatmap says "without loss scaling" and marks what a loss scale keeps; a step a
 * layer was not traced at is missing (NaN), not 0%; titles name each run's own model and data;
 * legends name only the bands and windows drawn. */
static void test_chart_words(const char *base, const char *t16)
{
    char gap[512];
    snprintf(gap, sizeof gap, "%s/gap32.h5", base);
    if (write_trace_of(gap, "fp32", "cnn", "synthetic:other", 1, 6)) {
        ok(0, "write the trace with a gap: %s", ampdiag_trace_errmsg());
        return;
    }
    snprintf(dir, sizeof dir, "%s/charts-words", base);
    const char *paths[2] = {t16, gap};
    plot_options opt;
    plot_options_init(&opt);
    opt.draw = 0;
    plot_result res;
    char err[512];
    int rc = plot_traces(paths, 2, dir, &opt, &res, err, sizeof err);
    ok(rc == PLOT_OK, "plot of fp16 (mlp) and fp32 (cnn, relu1 not traced at step 6): %s", err);
    size_t n = 0;
    char *b = slurp("fp16-heatmap-fp32-activation-underflow.bin", &n);
    float m[3 * NSTEPS];
    int have = b && n == sizeof m;
    if (have)
        memcpy(m, b, sizeof m);
    free(b);
    ok(have && isnan(m[1 * NSTEPS + 6]) && m[1 * NSTEPS + 5] == 8.0f / 64 && m[0 * NSTEPS + 6] == 9.0f / 64,
       "heatmap: relu1 at step 6 (not traced) is NaN, drawn as missing; its neighbours and fc1 are counted");
    ok(contains("fp16-heatmap-fp32.gp", "would flush to zero in FP16 without loss scaling") &&
           contains("fp16-heatmap-fp32.gp", "marks_file = 'fp16-heatmap-fp32-kept.dat'"),
       "the FP32 run's heatmap: gradients without loss scaling, with the kept cells' marks");
    ok(contains("fp16-heatmap-fp16.gp", "array panel_kind[4] = [3, 1, 3, 1]") &&
           contains("fp16-heatmap-fp16.gp", "share of exact zeros") &&
           contains("fp16-heatmap-fp16.gp", "draw it with an FP32 run"),
       "the FP16 run's heatmap, no FP32 run of its model and data: its own zeros, saying what it cannot show");
    ok(contains("fp16-heatmap-fp32.gp", "cnn on synthetic:other") && !contains("fp16-heatmap-fp32.gp", "mlp on") &&
           contains("fp16-heatmap-fp16.gp", "mlp on synthetic:test") && !contains("fp16-heatmap-fp16.gp", "cnn on"),
       "each run's charts are titled with its own model and data");
    ok(contains("loss.gp", "fp16: mlp on synthetic:test; fp32: cnn on synthetic:other"),
       "a chart of both names each run's own");
    ok(contains("layer-ranges-activation.gp", "FP16: > 65504") && !contains("layer-ranges-activation.gp", "BF16 subnormal") &&
           !contains("layer-ranges-activation.gp", "BF16: >"),
       "layer ranges: legend entries for FP16's bands, none for BF16's (outside the range)");
    ok(contains("exponent-histogram-fp32-fc1.gp", "array window_shown[4] = [1, 1, 0, 0]") ||
           contains("exponent-histogram-fp32-fc1.gp", "array window_shown[4] = [1, 1, 1, 0]"),
       "histogram: FP16's windows shown, BF16's subnormal one not (outside the exponents drawn)");
    plot_result_free(&res);
    /* with an FP32 run of its own model and data: the increase of its zeros */
    snprintf(dir, sizeof dir, "%s/charts-zeros", base);
    char same[512];
    snprintf(same, sizeof same, "%s/same32.h5", base);
    const char *p2[2] = {t16, same};
    rc = write_trace(same, "fp32") ? -1 : plot_traces(p2, 2, dir, &opt, &res, err, sizeof err);
    ok(rc == PLOT_OK && contains("fp16-heatmap-fp16.gp", "array panel_kind[4] = [2, 1, 2, 1]") &&
           contains("fp16-heatmap-fp16.gp", "more exact zeros than fp32"),
       "with an FP32 run of the same model and data: the increase of the FP16 run's zeros over it");
    b = slurp("fp16-heatmap-fp16-activation-zeros.bin", &n);
    ok(b && n == 3 * NSTEPS * sizeof(float) && ((float *)(void *)b)[4] == 0,
       "... 0 where both hold the same values (the synthetic runs do)");
    free(b);
    plot_result_free(&res);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    char base[400];
    snprintf(base, sizeof base, "%s/t_plot.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(base)) {
        printf("Bail out! cannot make a temporary directory %s: %s\n", base, strerror(errno));
        return 1;
    }
    char t16[512], t32[512];
    snprintf(t16, sizeof t16, "%s/a16.h5", base);
    snprintf(t32, sizeof t32, "%s/b32.h5", base);
    snprintf(dir, sizeof dir, "%s/charts", base);
    if (write_trace(t16, "fp16") || write_trace(t32, "fp32")) {
        printf("Bail out! cannot write the synthetic traces: %s\n", ampdiag_trace_errmsg());
        return 1;
    }
    if (!getenv("AMPDIAG_PLOTS_DIR")) {
        const char *srcdir = getenv("srcdir");
        static char pd[512];
        snprintf(pd, sizeof pd, "%s/plots", srcdir ? srcdir : ".");
        setenv("AMPDIAG_PLOTS_DIR", pd, 1);
    }
    diag("templates from %s", plot_templates_dir());

    /* ---------------------------------------------------------------- data and scripts */
    const char *paths[2] = {t16, t32};
    plot_options opt;
    plot_options_init(&opt);
    opt.draw = 0;
    opt.clip = 3.25;
    plot_result res;
    char err[1024];
    int rc = plot_traces(paths, 2, dir, &opt, &res, err, sizeof err);
    ok(rc == PLOT_OK, "plot_traces (no drawing) succeeds: %s", err);
    static const char *const expect[] = {
        "loss.png", "loss-scale.png", "grad-norm.png", "layer-ranges-activation.png",
        "layer-ranges-weight_grad.png", "fp16-heatmap-fp16.png", "fp16-heatmap-fp32.png",
        "exponent-histogram-fp16-fc1.png", "exponent-histogram-fp32-fc1.png"};
    size_t nexp = sizeof expect / sizeof expect[0];
    int order = res.n == nexp;
    for (size_t i = 0; order && i < nexp; i++)
        order = strcmp(res.charts[i].file, expect[i]) == 0;
    ok(order, "the %zu charts expected, in order (got %zu)", nexp, res.n);
    for (size_t i = 0; i < res.n; i++)
        diag("%s: %s", res.charts[i].file, res.charts[i].desc);
    ok(strstr(res.notes, "layer-ranges-activation_grad") != NULL,
       "the chart without data is named in the notes: %s", res.notes);
    const plot_chart *c = chart(&res, "loss.png");
    ok(c && c->width == 1200 && c->height == 650 && !c->drawn &&
       strcmp(c->script, "loss.gp") == 0, "loss: 1200x650, script loss.gp, not drawn");
    c = chart(&res, "layer-ranges-activation.png");
    ok(c && c->width == 1200 && c->height == 900, "layer ranges: 1200x900");
    c = chart(&res, "exponent-histogram-fp16-fc1.png");
    ok(c && c->width == 1200 && c->height == 800, "histogram: 1200x800");
    c = chart(&res, "loss.png");
    ok(c && strstr(c->desc, "skipped steps (1)") && strstr(c->desc, "NaN/inf events (1)"),
       "loss description counts 1 skipped step and 1 NaN event");

    /* loss: run 1 = fp16 (first on the command line), run 2 = fp32 */
    double col[3];
    ok(block_rows("loss.dat", 0, NULL, 0) == NSTEPS && block_rows("loss.dat", 1, NULL, 0) == NSTEPS,
       "loss.dat: %d rows per run", NSTEPS);
    ok(fabs(cell("loss.dat", 0, 5, 1) - 2.0 / 6.0) < 1e-8 && cell("loss.dat", 0, 5, 0) == 5,
       "loss.dat: step 5 of fp16 has loss 1/3 (%.9g)", cell("loss.dat", 0, 5, 1));
    ok(isnan(cell("loss.dat", 0, 3, 1)), "loss.dat: the NaN loss of step 3 is written NaN");
    ok(fabs(cell("loss.dat", 1, 3, 1) - 0.5) < 1e-8, "loss.dat: fp32 step 3 loss 0.5");
    ok(cell("loss.dat", 0, 0, 2) != -999 && cell("loss.dat", 0, 0, 3) == -999,
       "loss.dat rows have 3 columns");
    ok(block_rows("loss-eval.dat", 0, col, 3) == 2 && col[0] == 4 && col[1] == 9,
       "loss-eval.dat: evals at steps 4 and 9");
    ok(fabs(cell("loss-eval.dat", 1, 1, 1) - 0.15) < 1e-9, "loss-eval.dat: fp32 eval at 9 = 0.15");
    ok(block_rows("loss-marks.dat", 0, col, 3) == 1 && col[0] == 3,
       "loss-marks.dat: the one skipped step of fp16 is step 3");
    ok(block_rows("loss-marks.dat", 1, col, 3) == 1 && col[0] == 3,
       "loss-marks.dat: the NaN event of fp16 at step 3");
    ok(cell("loss-marks.dat", 0, 0, 1) > 2.0, "loss-marks.dat: a NaN loss is marked at the top "
       "(y %g above the largest loss 2)", cell("loss-marks.dat", 0, 0, 1));
    ok(block_rows("loss-marks.dat", 2, col, 3) == 1 && isnan(cell("loss-marks.dat", 2, 0, 0)),
       "loss-marks.dat: fp32 has no skipped step (a NaN placeholder row)");
    ok(contains("loss.gp", "outfile = 'loss.png'") && contains("loss.gp", "logy = 0") &&
       contains("loss.gp", "array run_title[2] = ['fp16', 'fp32']") &&
       contains("loss.gp", "array run_color[2] = ['#0072b2', '#3c3c3c']") &&
       contains("loss.gp", "set output outfile"),
       "loss.gp: variables (linear scale: the loss spans only 2 to 0.2), run titles and "
       "colours, then the template");

    /* loss scale: only the fp16 run */
    ok(block_rows("loss-scale.dat", 0, NULL, 0) == NSTEPS && cell("loss-scale.dat", 0, 0, 1) == 1024 &&
       cell("loss-scale.dat", 0, 9, 1) == 512 && block_rows("loss-scale.dat", 1, NULL, 0) == 0,
       "loss-scale.dat: fp16 only, 1024 then 512");
    ok(block_rows("loss-scale-marks.dat", 0, col, 3) == 1 && col[0] == 3 &&
       cell("loss-scale-marks.dat", 0, 0, 1) == 1024 &&
       isnan(cell("loss-scale-marks.dat", 1, 0, 0)),
       "loss-scale-marks.dat: one backoff at step 3 (from 1024), no growth");
    ok(contains("loss-scale.gp", "ymin = 2.0**") && contains("loss-scale.gp", "nbackoff = 1") &&
       contains("loss-scale.gp", "fp32: no loss scaling"),
       "loss-scale.gp: a power-of-2 range, 1 backoff, the unscaled run named");

    /* gradient norm and clip lines */
    ok(fabs(cell("grad-norm.dat", 1, 7, 1) - 8) < 1e-9 && isnan(cell("grad-norm.dat", 0, 3, 1)),
       "grad-norm.dat: fp32 step 7 norm 8; fp16's skipped step NaN");
    ok(block_rows("grad-norm-clip.dat", 0, NULL, 0) == 2 && cell("grad-norm-clip.dat", 0, 0, 1) == 3.25 &&
       cell("grad-norm-clip.dat", 1, 1, 1) == 2.5 && cell("grad-norm-clip.dat", 1, 1, 0) == 9,
       "grad-norm-clip.dat: the clip asked for (3.25) and fp32's own (2.5) across steps 0..9");
    ok(contains("grad-norm.gp", "clip value 3.25") && contains("grad-norm.gp", "clip used by fp32: 2.5"),
       "grad-norm.gp: the clip lines are titled");

    /* layer ranges: panel p, run r -> block (p-1)*2 + r-1 */
    ok(cell("layer-ranges-activation.dat", 2, 6, 1) == 4 &&
       fabsf((float)cell("layer-ranges-activation.dat", 2, 6, 2) - 1e-9f) < 1e-17,
       "layer-ranges-activation.dat: relu1 (panel 2), fp16, step 6: absmax 2^2, absmin 1e-9");
    ok(block_rows("layer-ranges-weight_grad.dat", 0, NULL, 0) == NSTEPS &&
       contains("layer-ranges-weight_grad.gp", "npanels = 2") &&
       contains("layer-ranges-weight_grad.gp", "array panel_title[2] = ['fc1', 'fc2']"),
       "layer-ranges-weight_grad: only the two linear layers");

    /* heatmap: rows fc1, relu1, fc2; columns steps 0..9; underflow = (3 + step) / 64 */
    size_t n = 0;
    char *b = slurp("fp16-heatmap-fp32-activation-underflow.bin", &n);
    ok(b && n == 3 * NSTEPS * sizeof(float), "heatmap matrix 3 layers x %d steps of float32 (%zu bytes)",
       NSTEPS, n);
    if (b && n == 3 * NSTEPS * sizeof(float)) {
        float m[3 * NSTEPS];
        memcpy(m, b, sizeof m);
        ok(m[0] == 3.0f / 64 && m[1 * NSTEPS + 7] == 10.0f / 64 && m[2 * NSTEPS + 9] == 12.0f / 64,
           "heatmap cells: fraction underflowing = (3 + step) / 64 (%g %g %g)", m[0],
           m[NSTEPS + 7], m[2 * NSTEPS + 9]);
    } else {
        ok(0, "heatmap cells");
    }
    free(b);
    b = slurp("fp16-heatmap-fp32-weight_grad-overflow.bin", &n);
    ok(b && n == 2 * NSTEPS * sizeof(float) && ((float *)(void *)b)[5] == 0,
       "heatmap: weight gradients of the 2 linear layers, no overflow");
    free(b);
    ok(contains("fp16-heatmap-fp32.gp", "x0 = 0") && contains("fp16-heatmap-fp32.gp", "dx = 1") &&
       contains("fp16-heatmap-fp32.gp", "ncols = 10"), "heatmap script: steps 0, 1, ..., 9");

    /* histogram: default layer fc1 (most FP16 underflow, then the first); steps 0 and 5;
     * values: one 2^(step-4) (bin e = step - 4), 3 + step of 1e-9 (e = -30), rest zero */
    const char *h16 = "exponent-histogram-fp16-fc1.dat";
    ok(contains("exponent-histogram-fp16-fc1.gp", "nsteps = 2") &&
       contains("exponent-histogram-fp16-fc1.gp", "scaled = 1"), "histogram: 2 steps, scaled run");
    /* every bin from one below the lowest non-empty one to one above the highest */
    ok(block_rows(h16, 0, NULL, 0) == 29 && cell(h16, 0, 0, 0) == -30.5 && cell(h16, 0, 0, 1) == 0 &&
       cell(h16, 0, 1, 0) == -29.5 && cell(h16, 0, 27, 0) == -3.5 && cell(h16, 0, 28, 1) == 0,
       "step 0 as held: bins e = -31 .. -3 (x = e + 0.5), the outer ones empty");
    ok(fabs(cell(h16, 0, 1, 1) - 3.0 / 64) < 1e-12 && fabs(cell(h16, 0, 27, 1) - 1.0 / 64) < 1e-12 &&
       cell(h16, 0, 2, 1) == 0 && fabs(cell(h16, 2, 32, 1) - 1.0 / 64) < 1e-12 &&
       cell(h16, 2, 32, 0) == 1.5,
       "fractions: 3/64 at e = -30 and 1/64 at e = -4 (step 0), none between; 1/64 at e = 1 (step 5)");
    ok(cell(h16, 3, 32, 0) == 1.5 - 9 && fabs(cell(h16, 3, 32, 1) - 1.0 / 64) < 1e-12,
       "step 5 unscaled: shifted by log2(512) = 9 binades");
    ok(cell(h16, 1, 1, 0) == -29.5 - 10, "step 0 unscaled: shifted by log2(1024) = 10");
    ok(isnan(cell("exponent-histogram-fp32-fc1.dat", 1, 0, 0)),
       "fp32 run: no unscaled histograms (NaN placeholder)");
    ok(contains("exponent-histogram-fp16-fc1.gp", "step 5 (zeros 86%"),
       "step titles give the zero fraction (55/64 = 85.9%%)");
    ok(exists("draw-all.sh") && contains("draw-all.sh", "gnuplot exponent-histogram-fp32-fc1.gp"),
       "draw-all.sh lists every script");
    plot_result_free(&res);

    /* ---------------------------------------------------------------- options */
    static const char *const lay[] = {"fc2"};
    static const int64_t hs[] = {4, 100, 6};
    plot_options_init(&opt);
    opt.draw = 0;
    opt.layers = lay;
    opt.nlayers = 1;
    opt.hist_steps = hs;
    opt.nhist_steps = 3;
    opt.format = PLOT_SVG;
    rc = plot_traces(paths + 1, 1, dir, &opt, &res, err, sizeof err);
    ok(rc == PLOT_OK && chart(&res, "exponent-histogram-fp32-fc2.svg") &&
       chart(&res, "layer-ranges-activation.svg") && !chart(&res, "loss-scale.svg"),
       "--layers fc2, svg, one unscaled run: fc2 histograms, no loss-scale chart");
    ok(contains("layer-ranges-activation.gp", "npanels = 1") &&
       contains("layer-ranges-activation.gp", "term = 'svg'"), "one panel, svg terminal");
    ok(contains("exponent-histogram-fp32-fc2.gp", "nsteps = 1") &&
       contains("exponent-histogram-fp32-fc2.gp", "step 5 ("),
       "hist steps 4, 100, 6 all map to the nearest recorded step, 5");
    plot_result_free(&res);

    /* ---------------------------------------------------------------- errors */
    char missing[600];
    snprintf(missing, sizeof missing, "%s/nope.h5", base);
    const char *bad[2] = {t32, missing};
    plot_options_init(&opt);
    opt.draw = 0;
    rc = plot_traces(bad, 2, dir, &opt, &res, err, sizeof err);
    ok(rc == PLOT_EINPUT && plot_exit_status(rc) == 2 && strstr(err, "nope.h5"),
       "a missing trace: EINPUT (exit 2) naming it: %s", err);
    plot_result_free(&res);
    static const char *const nolayer[] = {"fc9"};
    opt.layers = nolayer;
    opt.nlayers = 1;
    rc = plot_traces(paths, 2, dir, &opt, &res, err, sizeof err);
    ok(rc == PLOT_EINPUT && strstr(err, "'fc9'") && strstr(err, "fc1, relu1, fc2"),
       "an unknown layer: EINPUT naming it and the layers: %s", err);
    plot_result_free(&res);
    plot_options_init(&opt);
    opt.draw = 0;
    opt.clip = -1;
    rc = plot_traces(paths, 2, dir, &opt, &res, err, sizeof err);
    ok(rc == PLOT_EINPUT && strstr(err, "clip"), "a negative clip: EINPUT: %s", err);
    plot_result_free(&res);
    plot_options_init(&opt);
    opt.draw = 0;
    rc = plot_traces(paths, 2, t32, &opt, &res, err, sizeof err);
    ok(rc == PLOT_EINPUT && strstr(err, "not a directory"), "-o a file: EINPUT: %s", err);
    plot_result_free(&res);
    opt.templates = base; /* no loss.gp there */
    rc = plot_traces(paths, 2, dir, &opt, &res, err, sizeof err);
    ok(rc == PLOT_EIO && plot_exit_status(rc) == 3 && strstr(err, "AMPDIAG_PLOTS_DIR"),
       "templates missing: EIO (exit 3) saying what to set: %s", err);
    plot_result_free(&res);

    /* ---------------------------------------------------------------- gnuplot missing */
    plot_options_init(&opt);
    opt.gnuplot = "/nonexistent/gnuplot";
    snprintf(dir, sizeof dir, "%s/nognuplot", base);
    rc = plot_traces(paths, 2, dir, &opt, &res, err, sizeof err);
    ok(rc == PLOT_ENOGNUPLOT && plot_exit_status(rc) == 3 && res.gnuplot_missing &&
       strstr(err, "not found") && strstr(err, "draw-all.sh"),
       "gnuplot missing: ENOGNUPLOT (exit 3), told where the scripts are: %s", err);
    ok(res.n == nexp && exists("loss.gp") && exists("loss.dat") && exists("draw-all.sh") &&
       exists("fp16-heatmap-fp32.gp") && !exists("loss.png") && !exists("loss.log"),
       "... and every script and data file is written, no chart, no log");
    plot_result_free(&res);

    /* ---------------------------------------------------------------- drawing */
    if (!has_gnuplot()) {
        skip("gnuplot is not installed: charts not drawn");
    } else {
        snprintf(dir, sizeof dir, "%s/drawn", base);
        for (int f = 0; f < 2; f++) {
            plot_options_init(&opt);
            opt.format = f ? PLOT_SVG : PLOT_PNG;
            opt.clip = 3.25;
            rc = plot_traces(paths, 2, dir, &opt, &res, err, sizeof err);
            int all = rc == PLOT_OK && res.n == nexp, quiet = 1, valid = 1;
            for (size_t i = 0; i < res.n; i++) {
                const plot_chart *ch = &res.charts[i];
                all &= ch->drawn;
                if (ch->warned) {
                    quiet = 0;
                    diag("gnuplot said on %s: %s", ch->script, ch->message);
                }
                if (f == 0) {
                    unsigned w = 0, h = 0;
                    if (!png_size(ch->file, &w, &h) || w != (unsigned)ch->width ||
                        h != (unsigned)ch->height) {
                        valid = 0;
                        diag("%s: not a PNG of %dx%d (%ux%u)", ch->file, ch->width, ch->height,
                             w, h);
                    }
                } else {
                    char want[64];
                    snprintf(want, sizeof want, "width=\"%d\" height=\"%d\"", ch->width, ch->height);
                    char *s = slurp(ch->file, NULL);
                    const char *root = s ? strstr(s, "<svg") : NULL;
                    if (!root || !strstr(root, want) || !strstr(root, "</svg>")) {
                        valid = 0;
                        diag("%s: not an SVG with %s", ch->file, want);
                    }
                    free(s);
                }
            }
            ok(all, "%s: all %zu charts drawn (%s)", f ? "svg" : "png", res.n, err);
            ok(quiet, "%s: gnuplot wrote nothing on stderr", f ? "svg" : "png");
            ok(valid, "%s: every file is a valid %s of its size", f ? "svg" : "png", f ? "SVG" : "PNG");
            plot_result_free(&res);
        }
    }
    test_chart_words(base, t16);
    if (!getenv("T_PLOT_KEEP")) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
        if (system(cmd) != 0)
            diag("could not remove %s", base);
    } else {
        diag("kept %s", base);
    }
    return done_testing();
}
