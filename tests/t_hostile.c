/*
 * t_hostile.c - traces and inputs built to hurt the reader: they must be refused (exit 2, a
 * message naming what is wrong) or shown harmlessly, never disclose other files, never loop or
 * allocate without bound, never put terminal escapes on the screen, and `ampdiag run` must not
 * destroy its own inputs.
 *
 * Files are built with the public writer API and then edited with the HDF5 API (this test
 * includes hdf5.h); the checks run ./ampdiag (the CLI every CI gate runs).
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[4096];

#define SECRET "SECRET-CONTENT-42"

static const char *p(const char *name)
{
    static char buf[8][4200];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Run ./ampdiag with arguments, limited to 60 s of CPU time (a loop that spins is killed: exit
 * 128 + SIGKILL or SIGXCPU) and to 20 minutes of wall time (one that waits forever: 124), so
 * that a loaded machine does not fail it; its exit status. */
__attribute__((format(printf, 1, 2)))
static int run(const char *fmt, ...)
{
    char args[3000], cmd[4000 + 3 * 4200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "ulimit -t 60 && timeout -s KILL 1200 ./ampdiag %s > %s 2> %s", args, p("out.txt"), p("err.txt"));
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Contents of out.txt + err.txt (static buffer). */
static const char *output(void)
{
    static char buf[1 << 20];
    size_t n = 0;
    const char *files[] = {"out.txt", "err.txt"};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(p(files[i]), "rb");
        if (!f)
            continue;
        n += fread(buf + n, 1, sizeof buf - 1 - n, f);
        fclose(f);
    }
    buf[n] = 0;
    /* NUL bytes would hide what follows from strstr/strchr */
    for (size_t i = 0; i < n; i++)
        if (!buf[i])
            buf[i] = '?';
    return buf;
}

static int has(const char *needle) { return strstr(output(), needle) != NULL; }

/* A small complete trace: one layer named `layer`, `nsteps` steps (step numbers from `steps`
 * when given), one event with `msg`, a weight_grad record of 8 values of size `g` (0: none),
 * loss scale `scale`. */
static int write_trace(const char *path, const char *layer, const char *msg, const int64_t *steps,
                       int nsteps, double scale, float g)
{
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    o.overwrite = 1;
    ampdiag_trace_writer *w = NULL;
    if (ampdiag_trace_create(path, &o, &w) < 0)
        return -1;
    int rc = ampdiag_trace_set_attr_str(w, "precision", "fp16") < 0 ||
             ampdiag_trace_add_layer(w, layer, "linear", "[4, 2]", 8) < 0;
    for (int i = 0; i < nsteps && !rc; i++) {
        ampdiag_trace_step s;
        memset(&s, 0, sizeof s);
        s.step = steps ? steps[i] : i;
        s.loss = 2.0 - 0.1 * i;
        s.loss_scale = scale;
        s.grad_norm = 0.5;
        s.clip_coef = 1;
        s.lr = 1e-3;
        s.update_ratio = NAN;
        s.wall_ms = 1;
        if (i == 1) {
            s.skipped = 1;
            snprintf(s.skip_reason, sizeof s.skip_reason, "inf in \x1b[31mfc1\x1b[0m weight_grad");
        }
        rc = ampdiag_trace_append_step(w, &s) < 0;
        if (!rc && g > 0) {
            float x[8];
            for (int k = 0; k < 8; k++)
                x[k] = (k % 2 ? -g : g) * (float)(k + 1) / 8.0f;
            ampdiag_tstats ts;
            ampdiag_hist h;
            ampdiag_tstats_compute(x, 8, &ts, &h);
            rc = ampdiag_trace_append_tensor(w, s.step, 0, AMPDIAG_KIND_WEIGHT_GRAD, &ts, 0) < 0 ||
                 ampdiag_trace_append_hist(w, s.step, 0, AMPDIAG_KIND_WEIGHT_GRAD, &h) < 0;
        }
    }
    if (!rc)
        rc = ampdiag_trace_append_event(w, steps ? steps[0] : 0, 0, AMPDIAG_EV_NOTE, NAN, msg) < 0;
    if (ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) < 0)
        rc = 1;
    return rc ? -1 : 0;
}

/* A trace with layers names[0..n), 3 steps, a weight_grad record and histogram of each layer
 * per step. */
static int write_layers(const char *path, const char *const *names, int n)
{
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    o.overwrite = 1;
    ampdiag_trace_writer *w = NULL;
    if (ampdiag_trace_create(path, &o, &w) < 0)
        return -1;
    int rc = ampdiag_trace_set_attr_str(w, "precision", "fp16") < 0;
    for (int l = 0; l < n && !rc; l++)
        rc = ampdiag_trace_add_layer(w, names[l], "linear", "[4, 2]", 8) < 0;
    for (int i = 0; i < 3 && !rc; i++) {
        ampdiag_trace_step s;
        memset(&s, 0, sizeof s);
        s.step = i;
        s.loss = 2.0 - 0.1 * i;
        s.loss_scale = 1;
        s.grad_norm = 0.5;
        s.clip_coef = 1;
        s.lr = 1e-3;
        s.update_ratio = NAN;
        rc = ampdiag_trace_append_step(w, &s) < 0;
        for (int l = 0; l < n && !rc; l++) {
            float x[8];
            for (int k = 0; k < 8; k++)
                x[k] = (k % 2 ? -1e-6f : 1e-6f) * (float)(k + 1 + l);
            ampdiag_tstats ts;
            ampdiag_hist h;
            ampdiag_tstats_compute(x, 8, &ts, &h);
            rc = ampdiag_trace_append_tensor(w, i, l, AMPDIAG_KIND_WEIGHT_GRAD, &ts, 0) < 0 ||
                 ampdiag_trace_append_hist(w, i, l, AMPDIAG_KIND_WEIGHT_GRAD, &h) < 0;
        }
    }
    if (ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) < 0)
        rc = 1;
    return rc ? -1 : 0;
}

/* Open a trace for editing; -1 on failure. */
static hid_t edit(const char *path) { return H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT); }

/* The type of /events in path (to build look-alike datasets). */
static hid_t events_type(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f >= 0 ? H5Dopen2(f, "events", H5P_DEFAULT) : -1;
    hid_t t = d >= 0 ? H5Dget_type(d) : -1;
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    return t;
}

/* ------------------------------------------------------------------------------------------
 * 1. No local file disclosure
 * ------------------------------------------------------------------------------------------ */

static void expect_refused(const char *file, const char *what, const char *names)
{
    int rc = run("info %s", p(file));
    ok(rc == 2 && has(names) && !has(SECRET), "info refuses %s: exit %d, names %s", what, rc, names);
    if (rc != 2 || !has(names))
        diag("%s", output());
    rc = run("compare %s %s", p("base.h5"), p(file));
    ok(rc == 2 && has(names) && !has(SECRET), "compare refuses %s: exit %d", what, rc);
}

static void test_disclosure(void)
{
    /* the file whose contents must not leak: a trace with a secret event message, a text file */
    ok(write_trace(p("secret.h5"), "fc1", SECRET " from the other file", NULL, 3, 1, 0) == 0 &&
           write_trace(p("base.h5"), "fc1", "ok", NULL, 3, 1, 0) == 0,
       "write the secret and the base traces");
    FILE *tf = fopen(p("secret.txt"), "w");
    if (tf) {
        for (int i = 0; i < 200; i++)
            fprintf(tf, "%s line %d ........................................................\n", SECRET, i);
        fclose(tf);
    }
    hid_t et = events_type(p("base.h5"));

    /* an external link /events -> secret.h5:/events */
    write_trace(p("elink.h5"), "fc1", "ok", NULL, 3, 1, 0);
    hid_t f = edit(p("elink.h5"));
    ok(f >= 0 && H5Ldelete(f, "events", H5P_DEFAULT) >= 0 &&
           H5Lcreate_external(p("secret.h5"), "/events", f, "events", H5P_DEFAULT, H5P_DEFAULT) >= 0,
       "build a trace whose /events is an external link");
    if (f >= 0) H5Fclose(f);
    expect_refused("elink.h5", "an external link", "external link");

    /* a soft link /events -> /elsewhere, an external link */
    write_trace(p("soft.h5"), "fc1", "ok", NULL, 3, 1, 0);
    f = edit(p("soft.h5"));
    ok(f >= 0 && H5Ldelete(f, "events", H5P_DEFAULT) >= 0 &&
           H5Lcreate_external(p("secret.h5"), "/events", f, "elsewhere", H5P_DEFAULT, H5P_DEFAULT) >= 0 &&
           H5Lcreate_soft("/elsewhere", f, "events", H5P_DEFAULT, H5P_DEFAULT) >= 0,
       "build a trace whose /events is a soft link to an external link");
    if (f >= 0) H5Fclose(f);
    expect_refused("soft.h5", "a soft link leaving the file", "soft link");

    /* /events stored in an external raw file: secret.txt */
    write_trace(p("extstore.h5"), "fc1", "ok", NULL, 3, 1, 0);
    f = edit(p("extstore.h5"));
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t n = 4;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t d = -1;
    if (f >= 0 && et >= 0 && H5Ldelete(f, "events", H5P_DEFAULT) >= 0 &&
        H5Pset_external(dcpl, p("secret.txt"), 0, H5F_UNLIMITED) >= 0)
        d = H5Dcreate2(f, "events", et, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ok(d >= 0, "build a trace whose /events is stored in a local text file");
    if (d >= 0) H5Dclose(d);
    H5Sclose(sp);
    H5Pclose(dcpl);
    if (f >= 0) H5Fclose(f);
    expect_refused("extstore.h5", "external raw storage", "external files");

    /* /events a virtual dataset mapping secret.h5:/events */
    write_trace(p("vds.h5"), "fc1", "ok", NULL, 3, 1, 0);
    f = edit(p("vds.h5"));
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    n = 1;
    sp = H5Screate_simple(1, &n, NULL);
    hid_t src = H5Screate_simple(1, &n, NULL);
    d = -1;
    if (f >= 0 && et >= 0 && H5Ldelete(f, "events", H5P_DEFAULT) >= 0 &&
        H5Pset_virtual(dcpl, sp, p("secret.h5"), "/events", src) >= 0)
        d = H5Dcreate2(f, "events", et, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ok(d >= 0, "build a trace whose /events is a virtual dataset");
    if (d >= 0) H5Dclose(d);
    H5Sclose(sp);
    H5Sclose(src);
    H5Pclose(dcpl);
    if (f >= 0) H5Fclose(f);
    expect_refused("vds.h5", "a virtual dataset", "virtual dataset");
    if (et >= 0) H5Tclose(et);
}

/* ------------------------------------------------------------------------------------------
 * 2. Bounded work on absurd values
 * ------------------------------------------------------------------------------------------ */

static void test_absurd(void)
{
    /* /events claims 2^40 rows in a small file */
    write_trace(p("rows.h5"), "fc1", "ok", NULL, 3, 1, 0);
    hid_t f = edit(p("rows.h5"));
    hid_t d = f >= 0 ? H5Dopen2(f, "events", H5P_DEFAULT) : -1;
    hsize_t big = (hsize_t)1 << 40;
    ok(d >= 0 && H5Dset_extent(d, &big) >= 0, "build a trace whose /events claims 2^40 rows");
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    int rc = run("info %s", p("rows.h5"));
    ok(rc == 2 && has("/events") && has("limit of 2^32"), "2^40 rows: exit 2 naming /events and the limit (exit %d)", rc);
    /* 2^24 rows of /histograms (2.3 KB each) in a file of some KB: beyond 1000 x the file size */
    /* (a fresh file: shrinking the 2^40-row table back would walk every chunk) */
    write_trace(p("rows2.h5"), "fc1", "ok", NULL, 3, 1, 0);
    f = edit(p("rows2.h5"));
    d = f >= 0 ? H5Dopen2(f, "histograms", H5P_DEFAULT) : -1;
    big = (hsize_t)1 << 24;
    ok(d >= 0 && H5Dset_extent(d, &big) >= 0, "build a trace whose /histograms claims 2^24 rows");
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    rc = run("info %s", p("rows2.h5"));
    ok(rc == 2 && has("/histograms") && has("1000 times the file's size"),
       "2^24 histogram rows in a small file: exit 2 naming /histograms and the limit (exit %d)", rc);

    /* steps at the ends of int64 */
    int64_t steps[3] = {0, INT64_C(5000000000000000000), INT64_MAX};
    ok(write_trace(p("steps.h5"), "fc1", "ok", steps, 3, 1, 1e-3f) == 0, "write a trace with steps 0, 5e18, INT64_MAX");
    rc = run("info %s", p("steps.h5"));
    ok(rc == 2 && has("/steps") && has("2^53"), "info: steps beyond 2^53 are refused with exit 2 (exit %d)", rc);
    rc = run("compare %s %s", p("steps.h5"), p("base.h5"));
    ok(rc == 2 && has("2^53"), "compare: the same (exit %d)", rc);
    rc = run("plot %s -o %s", p("steps.h5"), p("plots"));
    ok(rc == 2 && has("2^53"), "plot: the same (exit %d)", rc);

    /* a loss scale of 1e308 with tiny gradients: the unscaled gradients underflow to
     * subnormals, the scale advice must not loop 2^31 times */
    ok(write_trace(p("scale.h5"), "fc1", "ok", NULL, 3, 1e308, 1e-30f) == 0, "write a trace with loss scale 1e308");
    rc = run("compare %s %s", p("scale.h5"), p("scale.h5"));
    ok(rc != 124 && rc >= 0 && rc <= 1, "compare of a 1e308 loss-scale trace ends (exit %d)", rc);
    rc = run("info %s", p("scale.h5"));
    ok(rc == 0, "info of it ends (exit %d)", rc);

    /* a data file with the label INT32_MAX */
    hid_t df = H5Fcreate(p("data.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t xd[2] = {20, 2}, yd = 20;
    float x[40];
    int32_t y[20];
    for (int i = 0; i < 40; i++) x[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 20; i++) y[i] = i % 2;
    y[3] = INT32_MAX;
    hid_t sx = H5Screate_simple(2, xd, NULL), sy = H5Screate_simple(1, &yd, NULL);
    hid_t dx = H5Dcreate2(df, "x", H5T_IEEE_F32LE, sx, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t dy = H5Dcreate2(df, "y", H5T_STD_I32LE, sy, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ok(dx >= 0 && dy >= 0 && H5Dwrite(dx, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0 &&
           H5Dwrite(dy, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, y) >= 0,
       "write a data file with the label INT32_MAX");
    H5Dclose(dx); H5Dclose(dy); H5Sclose(sx); H5Sclose(sy); H5Fclose(df);
    rc = run("run --data %s -o %s --steps 2 --progress none", p("data.h5"), p("run-data.h5"));
    ok(rc == 2 && has("2147483647"), "run: a label INT32_MAX is refused with exit 2 (exit %d)", rc);
}

/* ------------------------------------------------------------------------------------------
 * 3. No terminal escapes, valid JSON, Markdown tables and gnuplot scripts that hold
 * ------------------------------------------------------------------------------------------ */

/* Text a terminal shows as it is: valid UTF-8 (checked here byte by byte, independently of
 * ampdiag's own decoder) without C0 controls but newline and tab, DEL or C1 controls. On
 * failure, *where is the offset of the first bad byte. */
static int terminal_safe(const char *s, size_t n, size_t *where)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                   : (c & 0xf8) == 0xf0 ? 4 : 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
        int bad = len == 0 || i + len > n;
        for (size_t k = 1; !bad && k < len; k++) {
            bad = (u[i + k] & 0xc0) != 0x80;
            cp = cp << 6 | (u[i + k] & 0x3f);
        }
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        bad = bad || cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
              (cp < 0x20 && cp != '\n' && cp != '\t') || (cp >= 0x7f && cp <= 0x9f);
        if (bad) {
            if (where)
                *where = i;
            return 0;
        }
        i += len;
    }
    return 1;
}

/* The whole of a file (static buffer; NUL bytes kept) and its length. */
static const char *slurp(const char *path, size_t *n)
{
    static char buf[1 << 20];
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return "";
    *n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[*n] = 0;
    return buf;
}

/* out.txt and err.txt of the last command are terminal-safe (the first bad bytes shown if not) */
static int output_safe(const char *what)
{
    const char *files[] = {"out.txt", "err.txt"};
    for (int i = 0; i < 2; i++) {
        size_t n, at = 0;
        const char *s = slurp(p(files[i]), &n);
        if (!terminal_safe(s, n, &at)) {
            diag("%s: %s holds a control byte or invalid UTF-8 at offset %zu: 0x%02x", what, files[i], at,
                 (unsigned char)s[at]);
            return 0;
        }
    }
    return 1;
}

/* Set (replace) the string attribute `name` of a trace's root. */
static int set_root_str(const char *path, const char *name, const char *value)
{
    hid_t f = edit(path);
    if (f < 0)
        return -1;
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = -1;
    int rc = -1;
    if (H5Tset_size(t, strlen(value) + 1) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0 &&
        (H5Aexists(f, name) <= 0 || H5Adelete(f, name) >= 0) &&
        (a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 && H5Awrite(a, t, value) >= 0)
        rc = 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
    return rc;
}

/* The Python that checks JSON ($AMPDIAG_PYTHON, the source tree's .venv, python3), NULL if none. */
static const char *python(void)
{
    static char found[4200];
    static int looked;
    if (looked)
        return found[0] ? found : NULL;
    looked = 1;
    const char *env = getenv("AMPDIAG_PYTHON"), *srcdir = getenv("srcdir");
    char venv[4200];
    snprintf(venv, sizeof venv, "%s/.venv/bin/python", srcdir && *srcdir ? srcdir : ".");
    const char *cands[] = {env && *env ? env : NULL, venv, "python3"};
    for (int i = 0; i < 3; i++) {
        char cmd[8600];
        if (!cands[i])
            continue;
        snprintf(cmd, sizeof cmd, "'%s' -c 'import json' > /dev/null 2>&1", cands[i]);
        if (system(cmd) == 0) {
            snprintf(found, sizeof found, "%s", cands[i]);
            return found;
        }
    }
    return NULL;
}

/* out.txt is strict UTF-8 and JSON, and the Python expression `expr` of it (d) holds. */
static void json_ok(const char *what, const char *expr)
{
    const char *py = python();
    if (!py) {
        skip("%s: no Python to parse the JSON with", what);
        return;
    }
    FILE *f = fopen(p("check.py"), "w");
    if (f) {
        fprintf(f, "import json, sys\nb = open(sys.argv[1], 'rb').read()\nd = json.loads(b.decode('utf-8'))\n"
                   "sys.exit(0 if (%s) else 1)\n", expr);
        fclose(f);
    }
    char cmd[13000];
    snprintf(cmd, sizeof cmd, "'%s' %s %s > %s 2>&1", py, p("check.py"), p("out.txt"), p("py.txt"));
    int st = system(cmd);
    int pass = f && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    ok(pass, "%s: strict UTF-8, parses as JSON, %s", what, expr);
    if (!pass) {
        size_t n;
        diag("%s", slurp(p("py.txt"), &n));
    }
}

/* Pipes that separate cells in a Markdown table row (not escaped as \|). */
static int md_pipes(const char *line, size_t len)
{
    int n = 0;
    for (size_t i = 0; i < len; i++) {
        if (line[i] == '\\' && i + 1 < len) {
            i++;
            continue;
        }
        n += line[i] == '|';
    }
    return n;
}

/* In out.txt: the number of cell separators of the first line starting with `start`, -1 if none */
static int md_row_pipes(const char *start)
{
    size_t n;
    const char *s = slurp(p("out.txt"), &n);
    for (const char *q = s; q && *q; q = strchr(q, '\n') ? strchr(q, '\n') + 1 : NULL)
        if (strncmp(q, start, strlen(start)) == 0)
            return md_pipes(q, strcspn(q, "\n"));
    return -1;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* The first file of dir whose name starts with prefix and ends with suffix, or "" (static). */
static const char *first_named(const char *d, const char *prefix, const char *suffix)
{
    static char name[256];
    name[0] = 0;
    DIR *dh = opendir(d);
    for (struct dirent *e; dh && (e = readdir(dh));) {
        size_t n = strlen(e->d_name), k = strlen(suffix);
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && n > k && !strcmp(e->d_name + n - k, suffix)) {
            snprintf(name, sizeof name, "%s", e->d_name);
            break;
        }
    }
    if (dh)
        closedir(dh);
    return name;
}

static void test_escapes(void)
{
    ok(write_trace(p("esc.h5"), "fc1\x1b]0;pwned\x07", "boom \x1b[2J cleared", NULL, 3, 1, 1e-3f) == 0,
       "write a trace with escapes in a layer name, a message and a skip reason");
    const char *cmds[][2] = {
        {"info %s", "info"},
        {"info --format json %s", "info --format json"},
        {"compare %s %s", "compare"},
        {"compare --format markdown %s %s", "compare --format markdown"},
        {"compare --format json %s %s", "compare --format json"},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int rc = strstr(cmds[i][0], "compare") ? run(cmds[i][0], p("esc.h5"), p("base.h5"))
                                                : run(cmds[i][0], p("esc.h5"));
        ok(rc <= 1 && output_safe(cmds[i][1]),
           "%s: no control byte but newline and tab, valid UTF-8 (exit %d)", cmds[i][1], rc);
    }
    int rc = run("info %s", p("esc.h5"));
    ok(rc == 0 && has("fc1\\x1b]0;pwned\\x07") && has("boom \\x1b[2J cleared") && has("inf in \\x1b[31mfc1"),
       "info shows the name, the message and the skip reason with \\xNN escapes");

    /* a layer name with a table pipe, invalid UTF-8 (FF FE), ESC and a C1 control (U+009B) */
    const char *name = "fc|1\xff\xfe\x1b[31m\xc2\x9b";
    ok(write_trace(p("utf.h5"), name, "bad \xc3\x28 utf8 \x07", NULL, 3, 1, 1e-3f) == 0 &&
           set_root_str(p("utf.h5"), "model", "m\xe9lange\x1b[2J") == 0 &&
           set_root_str(p("utf.h5"), "precision", "<img src=x>") == 0,
       "write a trace whose layer name, message and model hold invalid UTF-8 and controls, and "
       "whose precision (its label) is HTML");
    rc = run("info %s", p("utf.h5"));
    ok(rc == 0 && output_safe("info") && has("fc|1\\xff\\xfe\\x1b[31m\\xc2\\x9b") &&
           has("m\\xe9lange\\x1b[2J"),
       "info: invalid bytes and C1 as \\xNN (exit %d)", rc);
    rc = run("info --format json %s", p("utf.h5"));
    ok(rc == 0 && output_safe("info --format json"), "info --format json: terminal-safe (exit %d)", rc);
    json_ok("info --format json",
            "d['layers'][0]['name'] == 'fc|1\\ufffd\\ufffd\\x1b[31m\\x9b' and d['attributes']['model'] == "
            "'m\\ufffdlange\\x1b[2J' and d['events']['list'][0]['message'] == 'bad \\ufffd( utf8 \\x07'");
    rc = run("compare --format json %s %s", p("utf.h5"), p("base.h5"));
    ok(rc <= 1 && output_safe("compare --format json"), "compare --format json: terminal-safe (exit %d)", rc);
    json_ok("compare --format json",
            "d['runs'][0]['layers'][0]['name'] == 'fc|1\\ufffd\\ufffd\\x1b[31m\\x9b'");
    rc = run("compare --format markdown %s %s", p("utf.h5"), p("base.h5"));
    int head = md_row_pipes("| layer | kind |"), row = md_row_pipes("| fc\\|1");
    ok(rc <= 1 && output_safe("compare --format markdown") && head == 11 && row == head,
       "compare --format markdown: the row of layer 'fc|1...' has as many cells as the header (%d and %d "
       "separators)", row, head);
    int raw_tag = 0; /* a "<img" that is not escaped as "\<img" */
    const char *o = output();
    for (const char *q = strstr(o, "<img"); q; q = strstr(q + 1, "<img"))
        raw_tag |= q == o || q[-1] != '\\';
    ok(!raw_tag && has("<summary>Ranges per layer in &lt;img src=x&gt;") && has("\\<img src=x\\>"),
       "compare --format markdown: the label is no HTML tag, in the HTML block or in a table");
    rc = run("compare %s %s", p("utf.h5"), p("base.h5"));
    ok(rc <= 1 && output_safe("compare") && has("fc|1\\xff\\xfe"), "compare: the name escaped (exit %d)", rc);

    /* an error message that quotes an attribute's value */
    ok(write_trace(p("fmt.h5"), "fc1", "ok", NULL, 3, 1, 0) == 0 &&
           set_root_str(p("fmt.h5"), "format", "evil\x1b]0;pwned\x07") == 0,
       "write a trace whose 'format' attribute holds escapes");
    rc = run("info %s", p("fmt.h5"));
    ok(rc == 2 && output_safe("info") && has("evil\\x1b]0;pwned\\x07"),
       "info: the message quoting the attribute escapes it (exit %d)", rc);
    rc = run("compare %s %s", p("base.h5"), p("fmt.h5"));
    ok(rc == 2 && output_safe("compare") && has("evil\\x1b]0;pwned\\x07"),
       "compare: the same (exit %d)", rc);

    /* gnuplot: a layer name and a precision (the runs' label on every chart) built to break out
     * of a string, run a command or expand a macro */
    const char *gpname = "a'b\"c`d\nsystem(\"touch PWNED\")";
    ok(write_trace(p("gp.h5"), gpname, "m`touch PWNED`@x", NULL, 4, 1, 1e-3f) == 0 &&
           set_root_str(p("gp.h5"), "precision", "fp16'.system('touch PWNED').'@x`touch PWNED`\\") == 0,
       "write a trace with a layer name and a precision built against gnuplot");
    char plots[4200];
    snprintf(plots, sizeof plots, "%s", p("plots"));
    int have_gnuplot = system("gnuplot --version > /dev/null 2>&1") == 0;
    rc = run("plot %s -o %s%s", p("gp.h5"), plots, have_gnuplot ? "" : " --no-draw");
    ok(rc == 0 && output_safe("plot") && !has("FAILED") && !has("warned"),
       "plot: every chart %s, its output terminal-safe (exit %d)", have_gnuplot ? "drawn" : "written", rc);
    if (rc)
        diag("%s", output());
    char cmd[13000];
    snprintf(cmd, sizeof cmd, "cd %s && for f in *.gp *.dat; do cat \"$f\"; done > %s", plots, p("out.txt"));
    int st = system(cmd);
    size_t n, at = 0;
    const char *all = slurp(p("out.txt"), &n);
    ok(st == 0 && n > 0 && terminal_safe(all, n, &at) && strstr(all, "system(\"touch PWNED\")") &&
           !strstr(all, "\nsystem("),
       "plot: scripts and data hold the name on one line, without a control byte (first bad at %zu)", at);
    if (have_gnuplot) {
        snprintf(cmd, sizeof cmd, "cd %s && for f in *.gp; do gnuplot \"$f\" || exit 1; done > %s 2> %s",
                 plots, p("out.txt"), p("err.txt"));
        st = system(cmd);
        size_t ne;
        slurp(p("err.txt"), &ne);
        ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && ne == 0,
           "gnuplot runs every script without an error or a warning");
    } else {
        skip("gnuplot is not installed");
    }
    char pwned[4300];
    snprintf(pwned, sizeof pwned, "%s/PWNED", plots);
    ok(!exists(pwned) && !exists(p("PWNED")) && !exists("PWNED"), "no file PWNED was made");

    /* a layer name gnuplot would read as a format in a tic label (the heatmap's rows), drawn
     * into a directory whose name holds two quotes in a row and a newline */
    ok(write_trace(p("pct.h5"), "fc%d%s%n1", "ok", NULL, 4, 1, 1e-3f) == 0,
       "write a trace whose layer name is 'fc%%d%%s%%n1'");
    snprintf(plots, sizeof plots, "%s", p("q''q\nnl"));
    setenv("ODD_PLOTS", plots, 1);
    rc = run("plot %s -o \"$ODD_PLOTS\"%s", p("pct.h5"), have_gnuplot ? "" : " --no-draw");
    char heat[4400];
    snprintf(heat, sizeof heat, "%s/%s", plots, first_named(plots, "fp16-heatmap-", ".gp"));
    size_t hn = 0;
    const char *hs = slurp(heat, &hn);
    ok(rc == 0 && !has("FAILED") && hs && strstr(hs, "'fc%%d%%s%%n1'"),
       "plot: the name is a literal tic label ('fc%%%%d...'), every chart %s into a directory named "
       "q''q<newline>nl (exit %d)", have_gnuplot ? "drawn" : "written", rc);
    if (rc)
        diag("%s", output());
    if (have_gnuplot) {
        char png[4400];
        snprintf(png, sizeof png, "%s/%s", plots, first_named(plots, "fp16-heatmap-", ".png"));
        struct stat pst;
        ok(stat(png, &pst) == 0 && pst.st_size > 1000, "... the heatmap was drawn there");
    } else {
        skip("gnuplot is not installed");
    }

    /* a right-to-left override (U+202E) in a layer name and a message */
    ok(write_trace(p("bidi.h5"), "fc1\xe2\x80\xae" "gpj.exe", "x\xe2\x81\xa7y", NULL, 3, 1, 1e-3f) == 0,
       "write a trace whose layer name and message hold bidirectional controls");
    rc = run("info %s", p("bidi.h5"));
    ok(rc == 0 && has("fc1\\xe2\\x80\\xaegpj.exe") && !strstr(output(), "\xe2\x80\xae") &&
           !strstr(output(), "\xe2\x81\xa7"),
       "info: U+202E and U+2067 shown as \\xNN, never raw (exit %d)", rc);
    rc = run("info --format json %s", p("bidi.h5"));
    ok(rc == 0 && has("fc1\\u202egpj.exe") && !strstr(output(), "\xe2\x80\xae"),
       "info --format json: U+202E as \\u202e (exit %d)", rc);
    rc = run("compare %s %s", p("bidi.h5"), p("base.h5"));
    ok(rc <= 1 && !strstr(output(), "\xe2\x80\xae"), "compare: never raw (exit %d)", rc);

    /* two layer names that reduce to the same file name part each get their own charts */
    const char *twins[] = {"a|b", "a b"};
    ok(write_layers(p("twins.h5"), twins, 2) == 0, "write a trace with layers 'a|b' and 'a b'");
    snprintf(plots, sizeof plots, "%s", p("plots2"));
    rc = run("plot %s -o %s --no-draw --layers 'a|b,a b'", p("twins.h5"), plots);
    char first[4300], second[4300];
    snprintf(first, sizeof first, "%s/exponent-histogram-fp16-a-b.gp", plots);
    snprintf(second, sizeof second, "%s/exponent-histogram-fp16-a-b-2.gp", plots);
    ok(rc == 0 && exists(first) && exists(second) && has("exponent-histogram-fp16-a-b-2.gp"),
       "plot: the histograms of 'a|b' and 'a b' go to -a-b and -a-b-2 (exit %d)", rc);

    /* run: a model file's words and the trace's path are echoed */
    FILE *mf = fopen(p("model.txt"), "w");
    if (mf) {
        fprintf(mf, "input 4\nlin\x1b[2Jear fc1 8\n");
        fclose(mf);
    }
    rc = run("run --model %s -o %s --steps 2 --progress none", p("model.txt"), p("m.h5"));
    ok(rc == 2 && output_safe("run --model") && has("lin\\x1b[2Jear"),
       "run: a model file's bad word is quoted escaped (exit %d)", rc);
    rc = run("run -o '%s' --steps 3 --progress none", p("r\x1b[2J\x07.h5"));
    ok(rc == 0 && output_safe("run") && has("r\\x1b[2J\\x07.h5") && has("next: ampdiag info"),
       "run: its summary shows the trace's path escaped (exit %d)", rc);
}

/* ------------------------------------------------------------------------------------------
 * 4. run does not destroy its inputs; 5. NaN option values
 * ------------------------------------------------------------------------------------------ */

static long fsize(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

static void test_run_inputs(void)
{
    /* a valid data file */
    hid_t df = H5Fcreate(p("good.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t xd[2] = {20, 2}, yd = 20;
    float x[40];
    int32_t y[20];
    for (int i = 0; i < 40; i++) x[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 20; i++) y[i] = i % 2;
    hid_t sx = H5Screate_simple(2, xd, NULL), sy = H5Screate_simple(1, &yd, NULL);
    hid_t dx = H5Dcreate2(df, "x", H5T_IEEE_F32LE, sx, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t dy = H5Dcreate2(df, "y", H5T_STD_I32LE, sy, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(dx, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x);
    H5Dwrite(dy, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, y);
    H5Dclose(dx); H5Dclose(dy); H5Sclose(sx); H5Sclose(sy); H5Fclose(df);
    long before = fsize(p("good.h5"));

    int rc = run("run --data %s -o %s --overwrite --steps 2 --progress none", p("good.h5"), p("good.h5"));
    ok(rc == 2 && has("--data") && has("-o") && fsize(p("good.h5")) == before,
       "run --data d.h5 -o d.h5 --overwrite: refused with exit 2 naming both, file kept (exit %d)", rc);
    /* the same file under another name: a symlink */
    if (symlink(p("good.h5"), p("alias.h5")) != 0)
        diag("symlink: %s", strerror(errno));
    rc = run("run --data %s -o %s --overwrite --steps 2 --progress none", p("good.h5"), p("alias.h5"));
    ok(rc == 2 && fsize(p("good.h5")) == before, "the same through a symlink: refused (exit %d)", rc);
    rc = run("run -o %s --save-weights %s --overwrite --steps 2 --progress none", p("w.h5"), p("w.h5"));
    ok(rc == 2 && has("--save-weights") && has("-o"), "run -o X --save-weights X: refused with exit 2 (exit %d)", rc);
    rc = run("run --data %s -o %s --save-weights %s --overwrite --steps 2 --progress none", p("good.h5"),
             p("r.h5"), p("good.h5"));
    ok(rc == 2 && has("--save-weights") && has("--data") && fsize(p("good.h5")) == before,
       "run --save-weights equal to --data: refused (exit %d)", rc);
    /* --init-from X --save-weights X is allowed (continue training in place) */
    rc = run("run -o %s --save-weights %s --overwrite --steps 2 --progress none", p("r1.h5"), p("wts.h5"));
    ok(rc == 0, "run --save-weights writes weights (exit %d)", rc);
    rc = run("run -o %s --init-from %s --overwrite --steps 2 --progress none", p("wts.h5"), p("wts.h5"));
    ok(rc == 2 && has("--init-from"), "run -o equal to --init-from: refused (exit %d)", rc);

    rc = run("run -o %s --schedule cosine:1:nan --steps 2 --progress none", p("r3.h5"));
    ok(rc == 2 && has("--schedule"), "--schedule cosine:1:nan: exit 2 (exit %d)", rc);
    rc = run("run -o %s --schedule cosine:1:inf --steps 2 --progress none", p("r3.h5"));
    ok(rc == 2 && has("--schedule"), "--schedule cosine:1:inf: exit 2 (exit %d)", rc);
    rc = run("run -o %s --lr nan --steps 2 --progress none", p("r3.h5"));
    ok(rc == 2 && has("--lr"), "--lr nan: exit 2 (exit %d)", rc);
    rc = run("run -o %s --loss-scale static:inf --steps 2 --progress none", p("r3.h5"));
    ok(rc == 2, "--loss-scale static:inf: exit 2 (exit %d)", rc);
}

/* A data file with a valid /y (20 labels) and an /x made by how: "elink" an external link to
 * secret.h5, "extstore" stored in secret.txt, "huge" a chunked [2^30, 1024] float dataset of
 * which nothing is written. 0 when built. */
static int bad_data_file(const char *path, const char *how)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t yd = 20, xd[2] = {20, 2}, huge[2] = {(hsize_t)1 << 30, 1024}, chunk[2] = {1, 1024};
    int32_t y[20] = {0};
    hid_t sy = H5Screate_simple(1, &yd, NULL);
    hid_t dy = f >= 0 ? H5Dcreate2(f, "y", H5T_STD_I32LE, sy, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
    int ok_ = dy >= 0 && H5Dwrite(dy, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, y) >= 0;
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), sx = -1, dx = -1;
    if (ok_ && strcmp(how, "elink") == 0) {
        ok_ = H5Lcreate_external(p("secret.h5"), "/events", f, "x", H5P_DEFAULT, H5P_DEFAULT) >= 0;
    } else if (ok_) {
        int is_huge = strcmp(how, "huge") == 0;
        sx = H5Screate_simple(2, is_huge ? huge : xd, NULL);
        ok_ = is_huge ? H5Pset_chunk(dcpl, 2, chunk) >= 0
                      : H5Pset_external(dcpl, p("secret.txt"), 0, H5F_UNLIMITED) >= 0;
        dx = ok_ ? H5Dcreate2(f, "x", H5T_IEEE_F32LE, sx, H5P_DEFAULT, dcpl, H5P_DEFAULT) : -1;
        ok_ = dx >= 0;
    }
    if (dx >= 0) H5Dclose(dx);
    if (sx >= 0) H5Sclose(sx);
    H5Pclose(dcpl);
    if (dy >= 0) H5Dclose(dy);
    H5Sclose(sy);
    if (f >= 0 && H5Fclose(f) < 0)
        ok_ = 0;
    return ok_ ? 0 : -1;
}

/* Data and weights files are read as untrusted too: no link to another file followed, no
 * external storage, no allocation beyond what the file can hold. */
static void test_user_files(void)
{
    const char *cases[][3] = {{"elink", "data-elink.h5", "not a dataset stored in this file"},
                              {"extstore", "data-ext.h5", "external files"},
                              {"huge", "data-huge.h5", "1000 times the file's size"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ok(bad_data_file(p(cases[i][1]), cases[i][0]) == 0, "build a data file: %s", cases[i][0]);
        int rc = run("run --data %s -o %s --overwrite --steps 1 --progress none", p(cases[i][1]),
                     p("du.h5"));
        ok(rc == 2 && has(cases[i][2]) && !has(SECRET), "run --data (%s): exit 2 naming '%s' (exit %d)",
           cases[i][0], cases[i][2], rc);
        if (rc != 2 || !has(cases[i][2]))
            diag("%s", output());
    }
    /* weights whose /fc1/weight is an external link into the secret trace */
    int rc = run("run -o %s --save-weights %s --overwrite --steps 1 --progress none", p("wu.h5"),
                 p("w-elink.h5"));
    hid_t f = rc == 0 ? edit(p("w-elink.h5")) : -1;
    ok(f >= 0 && H5Ldelete(f, "fc1/weight", H5P_DEFAULT) >= 0 &&
           H5Lcreate_external(p("secret.h5"), "/events", f, "fc1/weight", H5P_DEFAULT, H5P_DEFAULT) >= 0,
       "build a weights file whose /fc1/weight is an external link");
    if (f >= 0) H5Fclose(f);
    rc = run("run -o %s --init-from %s --overwrite --steps 1 --progress none", p("wu.h5"), p("w-elink.h5"));
    ok(rc == 2 && has("/fc1/weight") && has("not a dataset stored in this file") && !has(SECRET),
       "run --init-from with an external link: exit 2 naming /fc1/weight (exit %d)", rc);
}

int main(void)
{
    setenv("COLUMNS", "1000", 1); /* text unwrapped: the checks look for whole messages */
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/t_hostile.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    test_disclosure();
    test_absurd();
    test_escapes();
    test_run_inputs();
    test_user_files();
    if (exit_status() == 0 && !getenv("T_HOSTILE_KEEP")) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            diag("could not remove %s", dir);
    } else {
        diag("files kept in %s", dir);
    }
    H5close();
    return done_testing();
}
