/*
 * data.c - synthetic data sets and the HDF5 data loader (data.h).
 */
#include "train/data.h"
#include "trace/h5safe.h"
#include "util/path.h"
#include "util/rng.h"
#include "util/util.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void data_free(dataset *ds)
{
    free(ds->x); free(ds->x_val);
    free(ds->y); free(ds->y_val);
    free(ds->tok); free(ds->tok_val);
    memset(ds, 0, sizeof *ds);
}

const char *data_synthetic_help(void)
{
    return "  synthetic:blobs         10 Gaussian classes in 32 features, 4096 + 512 rows\n"
           "                          (mlp default)\n"
           "  synthetic:blobs-raw     the same features in raw units (x 1e5): unnormalised\n"
           "                          inputs\n"
           "  synthetic:blobs-tiny    the same features x 1e-6: tiny activations and gradients\n"
           "  synthetic:blobs-valraw  blobs whose first validation row is its class's centre in\n"
           "                          raw units (x 1e5, preprocessing skipped): only the\n"
           "                          evaluation's forward pass sees values beyond FP16's range\n"
           "  synthetic:tokens        sequences of 33 tokens over 64 symbols from a sparse Markov\n"
           "                          chain, 2048 + 256 rows (transformer default)\n";
}

/* --------------------------------------------------------------------------- synthetic */

/* scale multiplies every row. The first raw_val validation rows are their class's centre in
 * raw units (x 1e5, the preprocessing skipped): a ReLU network classifies such a scaled
 * prototype as its unscaled direction, so in FP32 its loss is ~0, while FP16 overflows on it. */
static int make_blobs(dataset *ds, uint64_t seed, float scale, int raw_val)
{
    enum { D = 32, K = 10, N = 4096, NV = 512 };
    ds->kind = DATA_CLASSIFICATION;
    ds->d = D;
    ds->classes = K;
    ds->n = N;
    ds->n_val = NV;
    ds->x = malloc((size_t)N * D * sizeof *ds->x);
    ds->x_val = malloc((size_t)NV * D * sizeof *ds->x_val);
    ds->y = malloc((size_t)N * sizeof *ds->y);
    ds->y_val = malloc((size_t)NV * sizeof *ds->y_val);
    if (!ds->x || !ds->x_val || !ds->y || !ds->y_val)
        return -1;
    rng r = rng_seed(seed ^ 0xb10b5ull);
    float centers[K][D];
    for (int k = 0; k < K; k++)
        for (int j = 0; j < D; j++)
            centers[k][j] = (float)(0.6 * rng_normal(&r));
    for (int i = 0; i < N + NV; i++) {
        int k = (int)rng_below(&r, K);
        float *row = i < N ? ds->x + (size_t)i * D : ds->x_val + (size_t)(i - N) * D;
        for (int j = 0; j < D; j++)
            row[j] = scale * (float)(centers[k][j] + rng_normal(&r));
        if (i >= N && i - N < raw_val) /* its class's centre, in raw units */
            for (int j = 0; j < D; j++)
                row[j] = 1e5f * centers[k][j];
        if (i < N) ds->y[i] = k; else ds->y_val[i - N] = k;
    }
    return 0;
}

static int make_tokens(dataset *ds, uint64_t seed)
{
    enum { V = 64, L = 33, N = 2048, NV = 256, SUCC = 3 };
    static const double p[SUCC] = {0.7, 0.2, 0.1};
    ds->kind = DATA_TOKENS;
    ds->vocab = V;
    ds->len = L;
    ds->n = N;
    ds->n_val = NV;
    ds->tok = malloc((size_t)N * L * sizeof *ds->tok);
    ds->tok_val = malloc((size_t)NV * L * sizeof *ds->tok_val);
    if (!ds->tok || !ds->tok_val)
        return -1;
    rng r = rng_seed(seed ^ 0x70c3ull);
    int succ[V][SUCC];
    for (int v = 0; v < V; v++)
        for (int s = 0; s < SUCC; s++)
            succ[v][s] = (int)rng_below(&r, V);
    for (int i = 0; i < N + NV; i++) {
        int32_t *row = i < N ? ds->tok + (size_t)i * L : ds->tok_val + (size_t)(i - N) * L;
        int t = (int)rng_below(&r, V);
        for (int j = 0; j < L; j++) {
            row[j] = t;
            double u = rng_uniform(&r);
            int s = u < p[0] ? 0 : u < p[0] + p[1] ? 1 : 2;
            t = succ[t][s];
        }
    }
    return 0;
}

/* --------------------------------------------------------------------------- HDF5 files */

/* Read dataset `name` of rank `rank` whose type class is `cls` into a new buffer of memory
 * type mtype (elem bytes each). dims receives the shape. Returns 1 read, 0 absent, -1 bad
 * input, -2 I/O error (message in err). */
static int read_array(hid_t f, const char *fname, const char *name, int rank, H5T_class_t cls,
                      hid_t mtype, size_t elem, hsize_t dims[2], void **out, char *err, size_t errlen)
{
    *out = NULL;
    /* stored in this file: no link followed, no storage that would read another file */
    char why[96];
    hid_t lapl = h5safe_lapl();
    if (lapl < 0)
        return errf(err, errlen, "%s: HDF5 property list failed", fname), -2;
    hid_t d = h5safe_open_dataset(f, name, lapl, why, sizeof why);
    H5Pclose(lapl);
    if (d == H5SAFE_MISSING)
        return 0;
    if (d < 0)
        return errf(err, errlen, "%s: %s %s: not a dataset stored in this file (refused: a data "
                    "file may not refer to other files)", fname, name, why), -1;
    int rc = -1;
    hid_t sp = H5Dget_space(d), ty = H5Dget_type(d);
    if (sp < 0 || ty < 0) {
        errf(err, errlen, "%s: cannot read the shape or type of %s", fname, name);
        rc = -2;
        goto done;
    }
    if (H5Tget_class(ty) != cls) {
        errf(err, errlen, "%s: %s must hold %s values", fname, name,
             cls == H5T_FLOAT ? "floating-point" : "integer");
        goto done;
    }
    int r = H5Sget_simple_extent_ndims(sp);
    if (r != rank) {
        errf(err, errlen, "%s: %s must have %d dimension%s, it has %d", fname, name, rank, rank > 1 ? "s" : "", r);
        goto done;
    }
    H5Sget_simple_extent_dims(sp, dims, NULL);
    hsize_t total = dims[0] * (rank > 1 ? dims[1] : 1);
    if (total == 0 || dims[0] > (hsize_t)INT32_MAX || (rank > 1 && dims[1] > (hsize_t)INT32_MAX)) {
        errf(err, errlen, "%s: %s is empty or too large", fname, name);
        goto done;
    }
    /* as for traces (traces/FORMAT.md, "Limits"): compressed chunks hold more than their size,
     * not arbitrarily more; a small file must not make us allocate without bound */
    hsize_t fsize = 0;
    if (H5Fget_filesize(f, &fsize) < 0 || (long double)total * elem > 1000.0L * fsize) {
        errf(err, errlen, "%s: %s claims %llu values, more than 1000 times the file's size (%llu "
             "bytes) can hold: refused", fname, name, (unsigned long long)total,
             (unsigned long long)fsize);
        goto done;
    }
    *out = malloc((size_t)total * elem);
    if (!*out) {
        errf(err, errlen, "%s: out of memory reading %s", fname, name);
        rc = -2;
        goto done;
    }
    if (H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out) < 0) {
        errf(err, errlen, "%s: reading %s failed (damaged file, or values that do not convert to %s)", fname,
             name, cls == H5T_FLOAT ? "float32" : "int32");
        free(*out);
        *out = NULL;
        rc = -2;
        goto done;
    }
    rc = 1;
done:
    if (sp >= 0) H5Sclose(sp);
    if (ty >= 0) H5Tclose(ty);
    H5Dclose(d);
    return rc;
}

/* Keep the first n rows of a [rows, width] array in a and move the rest to b. */
static int split_rows(void *a, void **b, size_t width_bytes, int rows, int nval)
{
    *b = malloc((size_t)nval * width_bytes);
    if (!*b)
        return -1;
    memcpy(*b, (char *)a + (size_t)(rows - nval) * width_bytes, (size_t)nval * width_bytes);
    return 0;
}

/* The largest vocabulary / number of classes a data file may imply (labels and tokens are
 * indices into a model's output: 2^31 - 1 would overflow int and ask for a huge model). */
#define DATA_MAX_SYMBOLS (1 << 20)

static int check_labels(const int32_t *y, int n, int classes, const char *fname, const char *what, char *err,
                        size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= classes)
            return errf(err, errlen, "%s: %s[%d] = %d is outside 0..%d", fname, what, i, (int)y[i], classes - 1), -1;
    return 0;
}

/* Non-finite inputs are refused: the first layer would turn them into NaN activations that no
 * format or learning rate explains. 0, or -1 with the first one named. */
static int check_inputs(const dataset *ds, const char *fname, char *err, size_t errlen)
{
    for (int v = 0; v < 2; v++) {
        const float *x = v ? ds->x_val : ds->x;
        size_t n = (size_t)(v ? ds->n_val : ds->n) * (size_t)ds->d;
        for (size_t i = 0; i < n; i++)
            if (!isfinite(x[i]))
                return errf(err, errlen, "%s: %s row %zu, feature %zu is %s: inputs must be finite",
                            fname, v ? "the validation set's" : "/x", i / (size_t)ds->d,
                            i % (size_t)ds->d, isnan(x[i]) ? "NaN" : "infinite"), -1;
    }
    return 0;
}

static void warnf(dataset *ds, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(dataset *ds, const char *fmt, ...)
{
    size_t len = strlen(ds->warnings);
    if (len + 2 >= sizeof ds->warnings)
        return;
    if (len)
        ds->warnings[len++] = '\n';
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ds->warnings + len, sizeof ds->warnings - len, fmt, ap);
    va_end(ap);
}

/* Warnings about labels and the validation split (split: the last rows of the file were held
 * out): a class 0 with no examples (labels 1..K give K+1 outputs), a validation set of one class
 * while training has several, and labels in sorted order (unshuffled rows: the held-out tail
 * is not a sample of the whole). */
static void check_split(dataset *ds, const char *fname, int split)
{
    int zero = 0, sorted = 1;
    for (int i = 0; i < ds->n && !zero; i++)
        zero = ds->y[i] == 0;
    if (!zero)
        warnf(ds, "%s: no training label is 0: labels 1..%d make %d classes, one of them empty "
              "(labels are 0..K-1)", fname, ds->classes - 1, ds->classes);
    int one_class = ds->n_val > 1;
    for (int i = 1; i < ds->n_val && one_class; i++)
        one_class = ds->y_val[i] == ds->y_val[0];
    if (one_class)
        warnf(ds, "%s: every one of the %d validation rows%s has label %d: its loss and accuracy "
              "judge one class only%s", fname, ds->n_val, split ? " (the last 10% of the file)" : "",
              (int)ds->y_val[0], split ? "; shuffle the file or give /x_val and /y_val" : "");
    for (int i = 1; i < ds->n && sorted; i++)
        sorted = ds->y[i] >= ds->y[i - 1];
    if (split && sorted && !one_class)
        warnf(ds, "%s: the labels are sorted in file order, so the validation rows (the last 10%%) "
              "are not a sample of the data; shuffle the file or give /x_val and /y_val", fname);
}

static int load_file(dataset *ds, const char *fname, int want_tokens, char *err, size_t errlen)
{
    if (path_too_long(fname, err, errlen))
        return DATA_EBADINPUT;
    FILE *probe = fopen(fname, "rb");
    if (!probe) {
        int e = errno; /* a name that is not there is bad input; a file that cannot be read, I/O */
        errf(err, errlen, "%s: cannot open (%s)", fname, strerror(e));
        return e == ENOENT || e == ENOTDIR || e == EISDIR ? DATA_EBADINPUT : DATA_EIO;
    }
    fclose(probe);
    htri_t is = H5Fis_hdf5(fname);
    if (is <= 0)
        return errf(err, errlen, "%s: not an HDF5 file (expected /x and /y, or /tokens)", fname), DATA_EBADINPUT;
    hid_t f = H5Fopen(fname, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) {
        char d[256];
        int io = h5safe_open_failed_io(d, sizeof d);
        errf(err, errlen, "%s: %s (%s)", fname, io ? "cannot read it" : "corrupt or truncated HDF5 file", d);
        return io ? DATA_EIO : DATA_EBADINPUT;
    }
    snprintf(ds->name, sizeof ds->name, "%s", fname);
    int rc = DATA_EBADINPUT;
    hsize_t d1[2], d2[2];
    void *a = NULL, *b = NULL, *va = NULL, *vb = NULL;
    int r;
    htri_t has_tok = H5Lexists(f, "/tokens", H5P_DEFAULT), has_x = H5Lexists(f, "/x", H5P_DEFAULT);
    if (want_tokens && has_tok <= 0) {
        errf(err, errlen, "%s: the transformer reads /tokens (integer, [N, L]); the file has none%s", fname,
             has_x > 0 ? " (it holds /x: classification data, for an mlp)" : "");
        goto done;
    }
    if (!want_tokens && has_x <= 0) {
        errf(err, errlen, "%s: an mlp reads /x (float, [N, D]) and /y (integer, [N]); the file has no /x%s", fname,
             has_tok > 0 ? " (it holds /tokens: sequence data, for a transformer)" : "");
        goto done;
    }
    if (want_tokens) {
        ds->kind = DATA_TOKENS;
        if ((r = read_array(f, fname, "/tokens", 2, H5T_INTEGER, H5T_NATIVE_INT32, 4, d1, &a, err, errlen)) != 1) {
            rc = r == -2 ? DATA_EIO : DATA_EBADINPUT;
            goto done;
        }
        if (d1[1] < 2) {
            errf(err, errlen, "%s: /tokens rows must hold at least 2 tokens (input and next token)", fname);
            goto done;
        }
        ds->len = (int)d1[1];
        r = read_array(f, fname, "/tokens_val", 2, H5T_INTEGER, H5T_NATIVE_INT32, 4, d2, &va, err, errlen);
        if (r < 0) { rc = r == -2 ? DATA_EIO : DATA_EBADINPUT; goto done; }
        int n = (int)d1[0];
        if (r == 1) {
            if (d2[1] != d1[1]) {
                errf(err, errlen, "%s: /tokens_val rows have %d tokens, /tokens rows %d", fname, (int)d2[1], ds->len);
                goto done;
            }
            ds->n = n;
            ds->n_val = (int)d2[0];
            ds->tok = a; a = NULL;
            ds->tok_val = va; va = NULL;
        } else {
            if (n < 2) {
                errf(err, errlen, "%s: /tokens needs at least 2 rows to hold one out for validation", fname);
                goto done;
            }
            int nv = n / 10 > 0 ? n / 10 : 1;
            void *tv;
            if (split_rows(a, &tv, (size_t)ds->len * 4, n, nv)) { rc = DATA_EIO; goto done; }
            ds->tok = a; a = NULL;
            ds->tok_val = tv;
            ds->n = n - nv;
            ds->n_val = nv;
        }
        int32_t vmax = -1;
        size_t tot = (size_t)ds->n * ds->len, totv = (size_t)ds->n_val * ds->len;
        for (size_t i = 0; i < tot + totv; i++) {
            int32_t t = i < tot ? ds->tok[i] : ds->tok_val[i - tot];
            if (t < 0) {
                errf(err, errlen, "%s: token %d at position %zu is negative", fname, (int)t, i);
                goto done;
            }
            if (t > vmax) vmax = t;
        }
        if ((int64_t)vmax + 1 > DATA_MAX_SYMBOLS) {
            errf(err, errlen, "%s: token %lld is above the largest vocabulary this reads (%d symbols)",
                 fname, (long long)vmax, DATA_MAX_SYMBOLS);
            goto done;
        }
        ds->vocab = (int)((int64_t)vmax + 1);
        rc = 0;
        goto done;
    }
    ds->kind = DATA_CLASSIFICATION;
    if ((r = read_array(f, fname, "/x", 2, H5T_FLOAT, H5T_NATIVE_FLOAT, 4, d1, &a, err, errlen)) != 1) {
        rc = r == -2 ? DATA_EIO : DATA_EBADINPUT;
        goto done;
    }
    r = read_array(f, fname, "/y", 1, H5T_INTEGER, H5T_NATIVE_INT32, 4, d2, &b, err, errlen);
    if (r != 1) {
        if (r == 0) errf(err, errlen, "%s: /x needs labels /y (integer, [N])", fname);
        rc = r == -2 ? DATA_EIO : DATA_EBADINPUT;
        goto done;
    }
    if (d2[0] != d1[0]) {
        errf(err, errlen, "%s: /x has %d rows but /y has %d labels", fname, (int)d1[0], (int)d2[0]);
        goto done;
    }
    ds->d = (int)d1[1];
    int n = (int)d1[0];
    hsize_t e1[2], e2[2];
    r = read_array(f, fname, "/x_val", 2, H5T_FLOAT, H5T_NATIVE_FLOAT, 4, e1, &va, err, errlen);
    if (r < 0) { rc = r == -2 ? DATA_EIO : DATA_EBADINPUT; goto done; }
    if (r == 1) {
        int r2 = read_array(f, fname, "/y_val", 1, H5T_INTEGER, H5T_NATIVE_INT32, 4, e2, &vb, err, errlen);
        if (r2 != 1) {
            if (r2 == 0) errf(err, errlen, "%s: /x_val needs labels /y_val", fname);
            rc = r2 == -2 ? DATA_EIO : DATA_EBADINPUT;
            goto done;
        }
        if (e1[1] != d1[1] || e2[0] != e1[0]) {
            errf(err, errlen, "%s: /x_val must be [M, %d] with M labels in /y_val", fname, ds->d);
            goto done;
        }
        ds->n = n;
        ds->n_val = (int)e1[0];
        ds->x = a; ds->y = b; ds->x_val = va; ds->y_val = vb;
        a = b = va = vb = NULL;
    } else {
        if (n < 2) {
            errf(err, errlen, "%s: /x needs at least 2 rows to hold one out for validation", fname);
            goto done;
        }
        int nv = n / 10 > 0 ? n / 10 : 1;
        void *xv, *yv;
        if (split_rows(a, &xv, (size_t)ds->d * 4, n, nv)) { rc = DATA_EIO; goto done; }
        if (split_rows(b, &yv, 4, n, nv)) { free(xv); rc = DATA_EIO; goto done; }
        ds->x = a; ds->y = b; ds->x_val = xv; ds->y_val = yv;
        a = b = NULL;
        ds->n = n - nv;
        ds->n_val = nv;
    }
    int32_t ymax = -1;
    for (int i = 0; i < ds->n; i++) ymax = ds->y[i] > ymax ? ds->y[i] : ymax;
    if ((int64_t)ymax + 1 > DATA_MAX_SYMBOLS) {
        errf(err, errlen, "%s: label %lld in /y is above the largest number of classes this reads (%d)",
             fname, (long long)ymax, DATA_MAX_SYMBOLS);
        goto done;
    }
    ds->classes = (int)((int64_t)ymax + 1);
    if (ds->classes < 2) {
        errf(err, errlen, "%s: /y must hold at least 2 classes (labels 0..K-1)", fname);
        goto done;
    }
    if (check_labels(ds->y, ds->n, ds->classes, fname, "/y", err, errlen) ||
        check_labels(ds->y_val, ds->n_val, ds->classes, fname, "validation labels", err, errlen) ||
        check_inputs(ds, fname, err, errlen))
        goto done;
    check_split(ds, fname, r != 1);
    rc = 0;
done:
    free(a); free(b); free(va); free(vb);
    if (H5Fclose(f) < 0 && rc == 0) {
        errf(err, errlen, "%s: closing failed", fname);
        rc = DATA_EIO;
    }
    return rc;
}

/* load_file with our messages instead of HDF5's error stack printout; ds freed on failure */
static int load_quiet(dataset *ds, const char *fname, int want_tokens, char *err, size_t errlen)
{
    H5E_auto2_t efunc;
    void *edata;
    H5Eget_auto2(H5E_DEFAULT, &efunc, &edata);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = load_file(ds, fname, want_tokens, err, errlen);
    H5Eset_auto2(H5E_DEFAULT, efunc, edata);
    if (rc)
        data_free(ds);
    return rc;
}

struct load_probe {
    const char *fname;
    int want_tokens;
};

/* The whole load in the probe's child process; its result and message go back. */
static int probe_load(void *arg, char *msg, size_t msglen)
{
    const struct load_probe *p = arg;
    dataset ds;
    memset(&ds, 0, sizeof ds);
    int rc = load_quiet(&ds, p->fname, p->want_tokens, msg, msglen);
    if (!rc)
        data_free(&ds);
    return rc;
}

int data_load(dataset *ds, const char *spec, int want_tokens, uint64_t seed, char *err, size_t errlen)
{
    memset(ds, 0, sizeof *ds);
    if (!spec)
        spec = want_tokens ? "synthetic:tokens" : "synthetic:blobs";
    int rc;
    if (strncmp(spec, "synthetic:", 10) == 0) {
        const char *name = spec + 10;
        snprintf(ds->name, sizeof ds->name, "%s", spec);
        int is_tok = strcmp(name, "tokens") == 0;
        float scale = strcmp(name, "blobs-raw") == 0 ? 1e5f : strcmp(name, "blobs-tiny") == 0 ? 1e-6f : 1.0f;
        int raw_val = strcmp(name, "blobs-valraw") == 0;
        if (!is_tok && strcmp(name, "blobs") != 0 && scale == 1.0f && !raw_val) {
            errf(err, errlen, "--data %s: unknown synthetic set; expected one of:\n%s", spec, data_synthetic_help());
            return DATA_EBADINPUT;
        }
        if (is_tok != (want_tokens != 0)) {
            errf(err, errlen, "--data %s: %s data does not fit a %s model", spec, is_tok ? "sequence" : "classification",
                 want_tokens ? "transformer" : "mlp");
            return DATA_EBADINPUT;
        }
        rc = is_tok ? make_tokens(ds, seed) : make_blobs(ds, seed, scale, raw_val);
        if (rc) {
            data_free(ds);
            errf(err, errlen, "--data %s: out of memory", spec);
            return DATA_EIO;
        }
        return 0;
    }
    /* HDF5 reads the file first in a child process (trace/h5safe.h), then here */
    struct load_probe p = {spec, want_tokens};
    rc = h5safe_probe(probe_load, &p, spec, err, errlen);
    if (rc == H5SAFE_PROBE_FAILED)
        return DATA_EBADINPUT;
    return rc ? rc : load_quiet(ds, spec, want_tokens, err, errlen);
}

/* --------------------------------------------------------------------------- batches */

static void shuffle(batcher *b)
{
    for (int i = 0; i < b->n; i++)
        b->perm[i] = i;
    if (!b->shuffle)
        return;
    rng r = rng_seed(b->seed ^ (0x5eedull * (uint64_t)(b->epoch + 1)));
    for (int i = b->n - 1; i > 0; i--) {
        int j = (int)rng_below(&r, (uint32_t)i + 1);
        int t = b->perm[i];
        b->perm[i] = b->perm[j];
        b->perm[j] = t;
    }
}

int batcher_init(batcher *b, int n, int shuffle_rows, uint64_t seed)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->shuffle = shuffle_rows;
    b->seed = seed;
    b->perm = malloc((size_t)(n > 0 ? n : 1) * sizeof *b->perm);
    if (!b->perm)
        return -1;
    shuffle(b);
    return 0;
}

void batcher_free(batcher *b)
{
    free(b->perm);
    b->perm = NULL;
}

void batcher_next(batcher *b, int *rows, int B)
{
    for (int i = 0; i < B; i++) {
        if (b->pos == b->n) {
            b->epoch++;
            b->pos = 0;
            shuffle(b);
        }
        rows[i] = b->perm[b->pos++];
    }
}

void data_gather(const dataset *ds, int val, const int *rows, int B, float *x, int32_t *y, int32_t *inputs,
                 int32_t *targets)
{
    if (ds->kind == DATA_CLASSIFICATION) {
        const float *X = val ? ds->x_val : ds->x;
        const int32_t *Y = val ? ds->y_val : ds->y;
        for (int i = 0; i < B; i++) {
            memcpy(x + (size_t)i * ds->d, X + (size_t)rows[i] * ds->d, (size_t)ds->d * sizeof *x);
            y[i] = Y[rows[i]];
        }
        return;
    }
    const int32_t *tok = val ? ds->tok_val : ds->tok;
    int T = ds->len - 1;
    for (int i = 0; i < B; i++) {
        const int32_t *row = tok + (size_t)rows[i] * ds->len;
        memcpy(inputs + (size_t)i * T, row, (size_t)T * sizeof *inputs);
        memcpy(targets + (size_t)i * T, row + 1, (size_t)T * sizeof *targets);
    }
}

/* --------------------------------------------------------------------------- facts */

/* The share of the most common of n values in 0..k-1, and how many distinct ones there are. */
static double majority(const int32_t *v, size_t n, int k, int *distinct)
{
    *distinct = 0;
    if (n == 0 || k <= 0)
        return NAN;
    size_t *cnt = calloc((size_t)k, sizeof *cnt), best = 0;
    if (!cnt)
        return NAN;
    for (size_t i = 0; i < n; i++)
        if (v[i] >= 0 && v[i] < k)
            cnt[v[i]]++;
    for (int c = 0; c < k; c++) {
        *distinct += cnt[c] > 0;
        if (cnt[c] > best)
            best = cnt[c];
    }
    free(cnt);
    return (double)best / (double)n;
}

void data_facts_of(const dataset *ds, data_facts *f)
{
    memset(f, 0, sizeof *f);
    f->rows = ds->n;
    f->val_rows = ds->n_val;
    f->val_targets = ds->n_val;
    f->input_min = f->input_max = f->input_rms = f->input_std_min = f->input_std_max = NAN;
    if (ds->kind == DATA_TOKENS) {
        f->classes = ds->vocab;
        /* the targets of the validation rows: positions 1..len-1 */
        size_t T = ds->len > 1 ? (size_t)ds->len - 1 : 0, n = (size_t)ds->n_val * T;
        f->val_targets = (int64_t)n;
        int32_t *t = malloc((n ? n : 1) * sizeof *t);
        if (t) {
            for (size_t i = 0; i < (size_t)ds->n_val; i++)
                memcpy(t + i * T, ds->tok_val + i * (size_t)ds->len + 1, T * sizeof *t);
            f->val_chance = majority(t, n, ds->vocab, &f->val_classes);
            free(t);
        } else {
            f->val_chance = NAN;
        }
        return;
    }
    f->classes = ds->classes;
    f->val_chance = majority(ds->y_val, (size_t)ds->n_val, ds->classes, &f->val_classes);
    f->labels_sorted = ds->n > 1;
    for (int i = 1; i < ds->n && f->labels_sorted; i++)
        f->labels_sorted = ds->y[i] >= ds->y[i - 1];
    size_t d = (size_t)ds->d, n = (size_t)ds->n;
    if (n == 0 || d == 0)
        return;
    f->have_inputs = 1;
    double lo = INFINITY, hi = -INFINITY, ss = 0, smin = INFINITY, smax = 0;
    for (size_t j = 0; j < d; j++) {
        double m = 0, q = 0;
        for (size_t i = 0; i < n; i++) {
            double x = ds->x[i * d + j];
            m += x;
            ss += x * x;
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
        }
        m /= (double)n;
        for (size_t i = 0; i < n; i++) {
            double e = ds->x[i * d + j] - m;
            q += e * e;
        }
        double sd = sqrt(q / (double)n);
        if (sd > smax)
            smax = sd;
        if (sd > 0 && sd < smin)
            smin = sd;
    }
    f->input_min = lo;
    f->input_max = hi;
    f->input_rms = sqrt(ss / ((double)n * (double)d));
    f->input_std_max = smax;
    f->input_std_min = isinf(smin) ? 0 : smin;
}

int data_standardize(dataset *ds, char *err, size_t errlen)
{
    if (ds->kind != DATA_CLASSIFICATION) {
        errf(err, errlen, "--standardize: %s holds tokens, not input features: nothing to standardise",
             ds->name);
        return -1;
    }
    size_t d = (size_t)ds->d, n = (size_t)ds->n, nv = (size_t)ds->n_val;
    for (size_t j = 0; j < d && n > 0; j++) {
        double m = 0, q = 0;
        for (size_t i = 0; i < n; i++)
            m += ds->x[i * d + j];
        m /= (double)n;
        for (size_t i = 0; i < n; i++) {
            double e = ds->x[i * d + j] - m;
            q += e * e;
        }
        double sd = sqrt(q / (double)n);
        double inv = sd > 0 ? 1.0 / sd : 1.0;
        for (size_t i = 0; i < n; i++)
            ds->x[i * d + j] = (float)((ds->x[i * d + j] - m) * inv);
        for (size_t i = 0; i < nv; i++)
            ds->x_val[i * d + j] = (float)((ds->x_val[i * d + j] - m) * inv);
    }
    return 0;
}
