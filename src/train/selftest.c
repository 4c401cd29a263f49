/*
 * selftest.c - `ampdiag selftest` (selftest.h): the CPU's own checks, and a device backend
 * against the CPU backend.
 */
#include "train/selftest.h"

#include "ampdiag_trace.h"
#include "backend/opcheck.h"
#include "numerics/numfmt.h"
#include "train/train.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------- reports */

typedef struct st_ctx {
    st_sink sink;
    void *arg;
    int failed;
} st_ctx;

static void vreport(st_ctx *x, st_status s, double measured, double limit, const char *what, const char *fmt,
                    va_list ap)
{
    st_report r;
    r.status = s;
    r.measured = measured;
    r.limit = limit;
    snprintf(r.what, sizeof r.what, "%s", what);
    vsnprintf(r.detail, sizeof r.detail, fmt, ap);
    x->failed += s == ST_FAIL;
    x->sink(&r, x->arg);
}

__attribute__((format(printf, 4, 5)))
static void report(st_ctx *x, st_status s, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(x, s, NAN, NAN, what, fmt, ap);
    va_end(ap);
}

/* A comparison of runs: its largest difference and tolerance go with the report. */
__attribute__((format(printf, 6, 7)))
static void report_diff(st_ctx *x, st_status s, double measured, double limit, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(x, s, measured, limit, what, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------------------- tolerances */

/* Measured on the CPU (tests/t_selftest.c, docs/cuda.md "Agreement with the CPU backend"): the
 * 20-step runs with every linear layer's GEMM summed in another order differ from
 * the CPU's by at most 0 (fp32: below the loss's own float32 rounding), 3.2e-4 (fp16) and
 * 2.7e-5 (bf16); the tolerances leave a margin of 30 and more for a GPU's other differences
 * (expf, logf). TF32 GEMMs keep 10 mantissa bits, as FP16: FP32 runs are then held to FP16's. */
double selftest_tolerance(precision p, int tf32)
{
    return p == PREC_FP32 && !tf32 ? 1e-4 : 1e-2;
}

/* ------------------------------------------------------------------------------- operations */

/* What the operation-by-operation comparison saw: its checks counted, the first failure and
 * the known (not yet bounded) differences named. */
typedef struct ops_tally {
    long checks, failed, known;
    char first[300], note[300], known_ops[96];
} ops_tally;

static void ops_note(void *arg, const char *text)
{
    ops_tally *t = arg;
    snprintf(t->note, sizeof t->note, "%s", text);
}

static void ops_line(void *arg, int pass, const char *todo, const char *text)
{
    ops_tally *t = arg;
    t->checks++;
    if (pass)
        return;
    if (todo) {
        size_t n = strcspn(text, " :"), len = strlen(t->known_ops);
        if (t->known++ < 4 && len + n + 3 < sizeof t->known_ops)
            snprintf(t->known_ops + len, sizeof t->known_ops - len, "%s%.*s", len ? ", " : "", (int)n, text);
    } else if (t->failed++ == 0) {
        snprintf(t->first, sizeof t->first, "%.150s (%.140s)", text, t->note);
    }
}

st_status selftest_backend_ops(const backend *under_test, const backend *ref, st_report *r)
{
    ops_tally t;
    memset(&t, 0, sizeof t);
    const opcheck_out out = {ops_line, ops_note, &t};
    char err[200] = "";
    int rc = opcheck_run(under_test, ref, &out, err, sizeof err);
    r->measured = r->limit = NAN;
    snprintf(r->what, sizeof r->what, "operations: %s against %s", under_test->name, ref->name);
    if (rc < 0) {
        r->status = ST_FAIL;
        snprintf(r->detail, sizeof r->detail, "stopped after %ld checks: %s", t.checks, err);
    } else if (t.failed) {
        r->status = ST_FAIL;
        snprintf(r->detail, sizeof r->detail, "%ld of %ld checks failed; the first: %s", t.failed, t.checks,
                 t.first);
    } else {
        char known[160] = "";
        if (t.known)
            snprintf(known, sizeof known, "; %ld known differences not yet bounded (%s)", t.known, t.known_ops);
        r->status = ST_PASS;
        snprintf(r->detail, sizeof r->detail, "%ld checks, every output bit for bit or within its documented bound%s",
                 t.checks, known);
    }
    return r->status;
}

static void report_ops(st_ctx *x, const backend *under_test)
{
    st_report r;
    selftest_backend_ops(under_test, opcheck_reference(), &r);
    x->failed += r.status == ST_FAIL;
    x->sink(&r, x->arg);
}

/* ------------------------------------------------------------------------------- CPU rounding */

/* The CPU backend's round (SIMD where this CPU has it) against numfmt.h's scalar code on every
 * 256th float32 pattern. */
static void check_cpu_rounding(st_ctx *x)
{
    enum { CHUNK = 1 << 16 };
    static const struct { ampdiag_format f; unsigned fl; const char *name; } cases[] = {
        {AMPDIAG_FP16, 0, "fp16"}, {AMPDIAG_BF16, 0, "bf16"},
        {AMPDIAG_FP16, AMPDIAG_ROUND_FTZ, "fp16 ftz"}, {AMPDIAG_BF16, AMPDIAG_ROUND_FTZ, "bf16 ftz"}};
    const backend *cpu = backend_cpu();
    float *in = malloc(CHUNK * sizeof *in), *out = malloc(CHUNK * sizeof *out);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t bad = 0, first = 0;
        for (uint64_t base = 0; in && out && base < (1ull << 32); base += (uint64_t)CHUNK << 8) {
            for (uint32_t i = 0; i < CHUNK; i++)
                in[i] = ampdiag_f32_from_bits((uint32_t)(base + ((uint64_t)i << 8) + (i & 0xffu)));
            cpu->round(cpu, out, in, CHUNK, bk_rnd_make(cases[c].f, cases[c].fl));
            for (uint32_t i = 0; i < CHUNK; i++) {
                float want = cases[c].fl ? ampdiag_round_ftz(cases[c].f, in[i]) : ampdiag_round(cases[c].f, in[i]);
                if (ampdiag_f32_bits(out[i]) != ampdiag_f32_bits(want) && !bad++)
                    first = ampdiag_f32_bits(in[i]);
            }
        }
        char what[64], firstx[48] = "";
        snprintf(what, sizeof what, "cpu rounding: %s", cases[c].name);
        if (bad)
            snprintf(firstx, sizeof firstx, ", the first at 0x%08llx", (unsigned long long)first);
        if (!in || !out)
            report(x, ST_FAIL, what, "out of memory");
        else
            report(x, bad ? ST_FAIL : ST_PASS, what, "2^24 float32 patterns (every 256th), the %s code against "
                   "numfmt.h: %llu differ%s", backend_cpu_round_impl(), (unsigned long long)bad, firstx);
    }
    free(in);
    free(out);
}

/* ------------------------------------------------------------------------------- runs */

static const char *const run_models[2] = {"mlp", "transformer"};
static const precision precs[3] = {PREC_FP32, PREC_FP16, PREC_BF16};

/* The losses of a run, read back from its trace. */
typedef struct st_run {
    double *loss;
    long n, skipped;
} st_run;

static int read_losses(const char *path, st_run *r, char *err, size_t errlen)
{
    ampdiag_trace_reader *rd = NULL;
    ampdiag_trace_step *st = NULL;
    size_t n = 0;
    int rc = ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &rd);
    if (rc >= 0)
        rc = ampdiag_trace_read_steps(rd, &st, &n);
    if (rd)
        ampdiag_trace_reader_close(rd);
    if (rc < 0) {
        snprintf(err, errlen, "%s: %s", path, ampdiag_trace_errmsg());
        free(st);
        return SELFTEST_EIO;
    }
    r->loss = malloc((n ? n : 1) * sizeof *r->loss);
    if (!r->loss) {
        free(st);
        snprintf(err, errlen, "out of memory");
        return SELFTEST_EIO;
    }
    r->n = (long)n;
    r->skipped = 0;
    for (size_t i = 0; i < n; i++) {
        r->loss[i] = st[i].loss;
        r->skipped += st[i].skipped != 0;
    }
    free(st);
    return 0;
}

/* The trace path of a run: DIR/ROLE-MODEL-PREC.h5, ROLE the backend's part ("cpu", "device-cuda_1",
 * "repeat-cpu"; a ':' becomes '_'). */
static int run_path(char *buf, size_t n, const char *dir, const char *role, const char *spec, precision p)
{
    char r[64];
    snprintf(r, sizeof r, "%s", role);
    for (char *s = r; *s; s++)
        if (*s == ':' || *s == '/')
            *s = '_';
    int k = snprintf(buf, n, "%s/%s-%s-%s.h5", dir, r, spec, precision_name(p));
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* Train `steps` steps of the model spec in precision p on bk, traced (every step, histograms every 5),
 * and read its losses. 0, or a TRAIN_ / SELFTEST_ error with a message. */
static int run_once(const backend *bk, const char *spec, precision p, long steps, const char *path, st_run *r,
                    char *err, size_t errlen)
{
    train_config c;
    train_result res;
    train_config_default(&c);
    c.mo.spec = spec;
    c.mo.precision = p;
    c.bk = bk;
    c.steps = steps;
    c.out = path;
    c.overwrite = 1;
    c.trace_every = 1;
    c.hist_every = 5;
    c.eval_every = 0;
    c.command_line = "ampdiag selftest";
    int rc = train_run(&c, &res, err, errlen);
    return rc ? rc : read_losses(path, r, err, errlen);
}

/* The largest |a - b| / max(1, |b|) over the steps (inf where one is NaN), at step *at. */
static double worst_diff(const st_run *a, const st_run *b, long *at)
{
    double worst = 0.0;
    *at = 0;
    for (long i = 0; i < a->n && i < b->n; i++) {
        double d = a->loss[i] == b->loss[i] ? 0.0 : fabs(a->loss[i] - b->loss[i]) / fmax(1.0, fabs(b->loss[i]));
        if (isnan(d))
            d = INFINITY;
        if (d > worst) {
            worst = d;
            *at = i;
        }
    }
    return worst;
}

static int all_finite(const st_run *r)
{
    for (long i = 0; i < r->n; i++)
        if (!isfinite(r->loss[i]))
            return 0;
    return 1;
}

/* ------------------------------------------------------------------------------- statistics */

/* Crafted values: every class and the FP16/BF16 thresholds, each side of each, and a spread of
 * normal values. */
static size_t crafted(float *x, size_t cap)
{
    static const uint32_t edges[] = {AMPDIAG_FP16_OVF_BITS, AMPDIAG_FP16_NORM_BITS, AMPDIAG_FP16_UNF_BITS,
                                     AMPDIAG_BF16_OVF_BITS, AMPDIAG_BF16_NORM_BITS, AMPDIAG_BF16_UNF_BITS,
                                     AMPDIAG_F32_MIN_NORMAL, AMPDIAG_F32_INF, 1u, 0u, 0x7fc00000u, 0x3f800000u};
    size_t n = 0;
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++)
        for (int d = -1; d <= 1; d++)
            for (uint32_t sign = 0; sign <= 1; sign++)
                if (n < cap && !(edges[e] == 0 && d < 0))
                    x[n++] = ampdiag_f32_from_bits((sign << 31) | (uint32_t)((int64_t)edges[e] + d));
    uint64_t s = 0x2545f4914f6cdd1dull;
    while (n < cap) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[n++] = ampdiag_f32_from_bits((uint32_t)(s >> 32) & 0xbfffffffu); /* every exponent below 2^1 */
    }
    return n;
}

/* NULL when the two records agree (counts and extremes exactly, sums within the bound of a
 * reordered sum), else the name
 * of the first field that differs (a format's name for its what-if counts). */
static const char *record_diff(const ampdiag_tstats *a, const ampdiag_tstats *b)
{
    static const char *const counts[7] = {"count", "n_nan", "n_posinf", "n_neginf", "n_zero",
                                          "n_neg", "n_pos"};
    const uint64_t ca[7] = {a->count, a->n_nan, a->n_posinf, a->n_neginf, a->n_zero, a->n_neg, a->n_pos};
    const uint64_t cb[7] = {b->count, b->n_nan, b->n_posinf, b->n_neginf, b->n_zero, b->n_neg, b->n_pos};
    for (int i = 0; i < 7; i++)
        if (ca[i] != cb[i])
            return counts[i];
    for (int f = 0; f < AMPDIAG_NFORMATS; f++)
        for (int c = 0; c < AMPDIAG_WHATIF_NCLASSES; c++)
            if (a->whatif[f][c] != b->whatif[f][c])
                return ampdiag_format_get((ampdiag_format)f)->name;
    static const char *const ext[4] = {"min", "max", "absmax", "absmin_nz"};
    float fa[4] = {a->min, a->max, a->absmax, a->absmin_nz}, fb[4] = {b->min, b->max, b->absmax, b->absmin_nz};
    for (int i = 0; i < 4; i++)
        if (ampdiag_f32_bits(fa[i]) != ampdiag_f32_bits(fb[i]))
            return ext[i];
    /* double sums of n terms added in two orders differ by at most n 2^-52 sum|x| (a tree sum
     * on a device against a running sum); sum|x| <= sqrt(n sumsq) */
    double n = (double)a->count, u = n * 0x1p-52;
    if (!(fabs(a->sum - b->sum) <= u * sqrt(n * fmax(a->sumsq, b->sumsq))))
        return "sum";
    if (!(fabs(a->sumsq - b->sumsq) <= u * fmax(a->sumsq, b->sumsq)))
        return "sumsq";
    return NULL;
}

/* The device's statistics of the same tensors against the CPU's: "" or what differs. */
static void compare_stats(const backend *dev, const float *x, const float *dw, float *dx, float *ddw, size_t n,
                          char *what, size_t wlen)
{
    const backend *cpu = backend_cpu();
    ampdiag_hist hc, hd;
    ampdiag_tstats sc, sd;
    bk_optim oc = {BK_ADAMW, 0.9, 0.0, 0.9, 0.999, 1e-8, AMPDIAG_FP32, AMPDIAG_BF16, 0, AMPDIAG_FP32};
    bk_update_stats uc, ud;
    double gc = 0.0, gd = 0.0;
    uint64_t nc = 0, nd = 0;
    what[0] = 0;
    dev->to_device(dev, dx, x, n * sizeof *x);
    dev->to_device(dev, ddw, dw, n * sizeof *dw);
    cpu->tstats(cpu, x, n, &sc, &hc);
    dev->tstats(dev, dx, n, &sd, &hd);
    const char *fd = record_diff(&sc, &sd);
    if (fd || memcmp(&hc, &hd, sizeof hc) != 0)
        snprintf(what, wlen, "tstats differs: %s", fd ? fd : "the histogram");
    cpu->grad_norm(cpu, x, n, 0.5f, &gc, &nc);
    dev->grad_norm(dev, dx, n, 0.5f, &gd, &nd);
    if (!what[0] && (nc != nd || !(gc == gd || fabs(gc - gd) <= (double)n * 0x1p-52 * fmax(fabs(gc), fabs(gd)))))
        snprintf(what, wlen, "grad_norm differs: %llu non-finite, sum of squares %.17g (cpu %llu, %.17g)",
                 (unsigned long long)nd, gd, (unsigned long long)nc, gc);
    memset(&uc, 0, sizeof uc);
    memset(&ud, 0, sizeof ud);
    ampdiag_tstats_init(&uc.update);
    ampdiag_tstats_init(&ud.update);
    cpu->update_stats(cpu, &oc, x, dw, n, &uc, NULL);
    dev->update_stats(dev, &oc, dx, ddw, n, &ud, NULL);
    if (!what[0] && (uc.lost_updates != ud.lost_updates || uc.lost_if_fp16 != ud.lost_if_fp16 ||
                     uc.lost_if_bf16 != ud.lost_if_bf16 || record_diff(&uc.update, &ud.update)))
        snprintf(what, wlen, "update_stats differs: lost %llu/%llu/%llu (cpu %llu/%llu/%llu)",
                 (unsigned long long)ud.lost_updates, (unsigned long long)ud.lost_if_fp16,
                 (unsigned long long)ud.lost_if_bf16, (unsigned long long)uc.lost_updates,
                 (unsigned long long)uc.lost_if_fp16, (unsigned long long)uc.lost_if_bf16);
}

static void check_stats(st_ctx *x, const backend *dev)
{
    enum { N = 300007 };
    char what[96], berr[256], detail[320] = "";
    snprintf(what, sizeof what, "statistics: %s against cpu", dev->name);
    float *h = malloc(2 * N * sizeof *h), *dx = dev->alloc(dev, N * sizeof *dx), *ddw = dev->alloc(dev, N * sizeof *ddw);
    if (!h || !dx || !ddw) {
        report(x, ST_FAIL, what, "out of memory");
    } else {
        size_t n = crafted(h, N);
        for (size_t i = 0; i < n; i++)
            h[N + i] = h[(i * 7919) % n] * 0x1p-9f; /* updates at the formats' resolutions */
        compare_stats(dev, h, h + N, dx, ddw, n, detail, sizeof detail);
        if (dev->sync(dev, berr, sizeof berr) != 0)
            snprintf(detail, sizeof detail, "the backend failed: %s", berr);
        report(x, detail[0] ? ST_FAIL : ST_PASS, what, "%zu crafted values (every class, each side of every "
               "FP16/BF16 threshold): %s", n, detail[0] ? detail : "tstats with its histogram, grad_norm and "
               "update_stats agree (counts exactly, sums within n 2^-52 sum|x|)");
    }
    free(h);
    dev->free(dev, dx);
    dev->free(dev, ddw);
}

/* ------------------------------------------------------------------------------- the plan */

typedef struct st_plan {
    const selftest_options *o;
    const backend *dev; /* NULL: device parts skipped */
    const char *dev_name;
    int tf32;           /* the device's GEMMs may use TF32 (the cuda backend, AMPDIAG_TF32=1) */
    char why_not[200];  /* why the device parts are skipped */
    char dir[PATH_MAX];
    int temp;           /* dir is ours: its traces are removed */
} st_plan;

/* One case: the CPU's run, then the device's against it. 0 or an error with its message. */
static int check_case(st_ctx *x, st_plan *P, const char *spec, precision p, char *err, size_t errlen)
{
    char path[PATH_MAX], what[96];
    st_run rc_ = {NULL, 0, 0}, rd = {NULL, 0, 0};
    const backend *cpu = backend_cpu();
    char role[64];
    int rc = run_path(path, sizeof path, P->dir, "cpu", spec, p) ? SELFTEST_EIO : 0;
    if (!rc)
        rc = run_once(cpu, spec, p, P->o->steps, path, &rc_, err, errlen);
    if (P->temp)
        unlink(path);
    if (!rc) {
        snprintf(what, sizeof what, "run: %s %s on cpu", spec, precision_name(p));
        int good = rc_.n == P->o->steps && all_finite(&rc_);
        report(x, good ? ST_PASS : ST_FAIL, what, "%ld steps, loss %.4g -> %.4g, %ld skipped%s", rc_.n,
               rc_.n ? rc_.loss[0] : NAN, rc_.n ? rc_.loss[rc_.n - 1] : NAN, rc_.skipped,
               good ? "" : ": a loss is not finite or steps are missing");
    }
    if (!rc && P->dev) {
        snprintf(role, sizeof role, "device-%s", P->dev_name);
        rc = run_path(path, sizeof path, P->dir, role, spec, p) ? SELFTEST_EIO : 0;
        if (!rc)
            rc = run_once(P->dev, spec, p, P->o->steps, path, &rd, err, errlen);
        if (P->temp)
            unlink(path);
    }
    if (!rc && P->dev) {
        long at;
        double w = worst_diff(&rd, &rc_, &at), tol = selftest_tolerance(p, P->tf32);
        snprintf(what, sizeof what, "run: %s %s on %s against cpu", spec, precision_name(p), P->dev_name);
        int good = rd.n == rc_.n && w <= tol;
        report_diff(x, good ? ST_PASS : ST_FAIL, w, tol, what,
                    "%ld steps (%ld skipped, cpu %ld): largest loss difference %.3g of max(1, |loss|) at step %ld "
                    "(tolerance %g)", rd.n, rd.skipped, rc_.skipped, w, at, tol);
    }
    free(rc_.loss);
    free(rd.loss);
    return rc;
}

/* The backend under test (the device's, or the CPU's) gives the same losses twice. */
static int check_repeat(st_ctx *x, st_plan *P, char *err, size_t errlen)
{
    const backend *bk = P->dev ? P->dev : backend_cpu();
    const char *name = P->dev ? P->dev_name : "cpu";
    char path[PATH_MAX], what[96], role[64];
    st_run a = {NULL, 0, 0}, b = {NULL, 0, 0};
    int rc = 0;
    snprintf(role, sizeof role, "repeat-%s", name);
    for (int k = 0; k < 2 && !rc; k++) {
        rc = run_path(path, sizeof path, P->dir, role, "mlp", PREC_FP16) ? SELFTEST_EIO : 0;
        if (!rc)
            rc = run_once(bk, "mlp", PREC_FP16, P->o->steps, path, k ? &b : &a, err, errlen);
        if (P->temp)
            unlink(path);
    }
    if (!rc) {
        long at;
        int same = a.n == b.n && memcmp(a.loss, b.loss, (size_t)a.n * sizeof *a.loss) == 0;
        double w = worst_diff(&a, &b, &at);
        snprintf(what, sizeof what, "repeat: mlp fp16 on %s", name);
        report_diff(x, same ? ST_PASS : ST_FAIL, w, 0.0, what, "%s (largest difference %.3g at step %ld)",
                    same ? "two runs, the same losses bit for bit" : "two runs differ", w, at);
    }
    free(a.loss);
    free(b.loss);
    return rc;
}

/* The device: the one named, or cuda where it can run. A named device that cannot run is an
 * error; by default the device parts are skipped with the reason. */
static int pick_device(st_plan *P, char *err, size_t errlen)
{
    char berr[256];
    const char *name = P->o->bk ? P->o->bk->name : P->o->device ? P->o->device : "cuda";
    P->dev = P->o->bk ? P->o->bk : backend_by_name(name, berr, sizeof berr);
    P->dev_name = name;
    const char *tf = getenv("AMPDIAG_TF32");
    P->tf32 = P->dev && strcmp(P->dev->name, "cuda") == 0 && tf && strcmp(tf, "1") == 0;
    if (P->dev)
        return 0;
    if (P->o->device) {
        snprintf(err, errlen, "--device %s: %s", name, berr);
        return SELFTEST_EUSAGE;
    }
    snprintf(P->why_not, sizeof P->why_not, "%.199s", berr);
    return 0;
}

static int make_dir(st_plan *P, char *err, size_t errlen)
{
    if (P->o->dir) {
        int k = snprintf(P->dir, sizeof P->dir, "%s", P->o->dir);
        if (k < 0 || (size_t)k >= sizeof P->dir - 64) {
            snprintf(err, errlen, "-o: the path is too long");
            return SELFTEST_EUSAGE;
        }
        struct stat sb;
        if (mkdir(P->dir, 0777) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "%s: %s", P->dir, strerror(errno));
            return SELFTEST_EIO;
        }
        if (stat(P->dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            snprintf(err, errlen, "-o %s: not a folder", P->dir);
            return SELFTEST_EUSAGE;
        }
        return 0;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(P->dir, sizeof P->dir, "%s/ampdiag-selftest-XXXXXX", tmp && *tmp && strlen(tmp) < 512 ? tmp : "/tmp");
    if (!mkdtemp(P->dir)) {
        snprintf(err, errlen, "%s: %s", P->dir, strerror(errno));
        return SELFTEST_EIO;
    }
    P->temp = 1;
    return 0;
}

static void device_checks(st_ctx *x, st_plan *P)
{
    char msg[400];
    if (P->dev->self_check) {
        char what[96];
        snprintf(what, sizeof what, "device check: %s", P->dev_name);
        int r = P->dev->self_check(P->dev, msg, sizeof msg);
        report(x, r == 0 ? ST_PASS : ST_FAIL, what, "%s", msg);
    }
    check_stats(x, P->dev);
    report_ops(x, P->dev);
}

int selftest_run(const selftest_options *o, st_sink sink, void *arg, int *failed, char *err, size_t errlen)
{
    st_ctx x = {sink, arg, 0};
    st_plan P;
    memset(&P, 0, sizeof P);
    P.o = o;
    int rc = pick_device(&P, err, errlen);
    if (!rc)
        rc = make_dir(&P, err, errlen);
    if (rc)
        return rc;
    check_cpu_rounding(&x);
    report_ops(&x, backend_cpu());
    if (P.dev)
        device_checks(&x, &P);
    else
        report(&x, ST_SKIP, "device parts", "not run: %s", P.why_not);
    for (int m = 0; m < 2 && !rc; m++)
        for (int p = 0; p < 3 && !rc; p++)
            rc = check_case(&x, &P, run_models[m], precs[p], err, errlen);
    if (!rc)
        rc = check_repeat(&x, &P, err, errlen);
    if (P.temp && rmdir(P.dir) != 0 && !rc) {
        snprintf(err, errlen, "%s: %s", P.dir, strerror(errno));
        rc = SELFTEST_EIO;
    }
    *failed = x.failed;
    return rc == TRAIN_EBADINPUT ? SELFTEST_EUSAGE : rc == TRAIN_EIO ? SELFTEST_EIO : rc;
}
