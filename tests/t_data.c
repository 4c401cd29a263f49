/*
 * t_data.c - synthetic data sets, the HDF5 loader (valid files and every refusal), batches.
 */
#include "train/data.h"
#include "tap.h"

#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static void write_arr(hid_t f, const char *name, hid_t type, int rank, hsize_t d0, hsize_t d1, const void *buf)
{
    hsize_t dims[2] = {d0, d1};
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    H5Dclose(d);
    H5Sclose(sp);
}

static const char *path(const char *name)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void test_synthetic(void)
{
    dataset a, b, c;
    char err[512];
    ok(data_load(&a, "synthetic:blobs", 0, 1, err, sizeof err) == 0 && a.n == 4096 && a.n_val == 512 && a.d == 32 &&
       a.classes == 10, "synthetic:blobs: 4096 + 512 rows, 32 features, 10 classes");
    data_load(&b, "synthetic:blobs", 0, 1, err, sizeof err);
    data_load(&c, "synthetic:blobs", 0, 2, err, sizeof err);
    ok(memcmp(a.x, b.x, (size_t)a.n * a.d * 4) == 0 && memcmp(a.y, b.y, (size_t)a.n * 4) == 0, "same seed, same data");
    ok(memcmp(a.x, c.x, (size_t)a.n * a.d * 4) != 0, "another seed, other data");
    int cnt[10] = {0}, bad = 0;
    for (int i = 0; i < a.n; i++) { if (a.y[i] < 0 || a.y[i] > 9) bad++; else cnt[a.y[i]]++; }
    int minc = a.n;
    for (int k = 0; k < 10; k++) minc = cnt[k] < minc ? cnt[k] : minc;
    ok(!bad && minc > 300, "labels in 0..9, every class present (smallest %d rows)", minc);
    data_free(&b);
    ok(data_load(&b, "synthetic:blobs-raw", 0, 1, err, sizeof err) == 0 && fabsf(b.x[5] - 1e5f * a.x[5]) <= 1e-2f * fabsf(b.x[5]),
       "blobs-raw is blobs in units x 1e5");
    data_free(&b);
    ok(data_load(&b, "synthetic:blobs-valraw", 0, 1, err, sizeof err) == 0 && b.n == a.n && b.n_val == a.n_val &&
       memcmp(a.x, b.x, (size_t)a.n * a.d * 4) == 0 && memcmp(a.y_val, b.y_val, (size_t)a.n_val * 4) == 0 &&
       memcmp(a.x_val + a.d, b.x_val + b.d, (size_t)(a.n_val - 1) * a.d * 4) == 0,
       "blobs-valraw: blobs' training rows, labels and validation rows 1.. unchanged");
    float vmax = 0;
    for (int j = 0; j < b.d; j++)
        vmax = fabsf(b.x_val[j]) > vmax ? fabsf(b.x_val[j]) : vmax;
    ok(vmax >= 65520.0f && vmax < 1e6f, "blobs-valraw: validation row 0 in raw units reaches beyond FP16 (%g)", vmax);
    data_free(&a); data_free(&b); data_free(&c);
    ok(data_load(&a, "synthetic:tokens", 1, 3, err, sizeof err) == 0 && a.kind == DATA_TOKENS && a.vocab == 64 &&
       a.len == 33 && a.n == 2048, "synthetic:tokens: 2048 rows of 33 tokens over 64 symbols");
    int maxt = 0;
    for (int i = 0; i < a.n * a.len; i++) maxt = a.tok[i] > maxt ? a.tok[i] : maxt;
    ok(maxt < 64, "tokens below the vocabulary size");
    data_free(&a);
    ok(data_load(&a, "synthetic:tokens", 0, 3, err, sizeof err) == DATA_EBADINPUT && strstr(err, "does not fit"),
       "sequence data for an mlp is refused");
    ok(data_load(&a, "synthetic:nope", 0, 3, err, sizeof err) == DATA_EBADINPUT && strstr(err, "synthetic:blobs"),
       "an unknown synthetic set lists the known ones");
}

static void test_files(void)
{
    char err[512];
    dataset ds;
    /* classification, no validation arrays: the last 10% are held out */
    float x[20 * 3];
    int32_t y[20];
    for (int i = 0; i < 20; i++) { y[i] = i % 4; for (int j = 0; j < 3; j++) x[i * 3 + j] = (float)(i * 10 + j); }
    hid_t f = H5Fcreate(path("c.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/x", H5T_NATIVE_FLOAT, 2, 20, 3, x);
    write_arr(f, "/y", H5T_NATIVE_INT32, 1, 20, 0, y);
    H5Fclose(f);
    ok(data_load(&ds, path("c.h5"), 0, 0, err, sizeof err) == 0 && ds.n == 18 && ds.n_val == 2 && ds.d == 3 &&
       ds.classes == 4, "file: 20 rows -> 18 train + 2 validation, 3 features, 4 classes");
    ok(ds.x_val[0] == 180.0f && ds.y_val[1] == 19 % 4 && ds.x[17 * 3 + 2] == 172.0f, "validation rows are the last ones, in order");
    ok(ds.warnings[0] == 0, "shuffled labels 0..3: no warning (%s)", ds.warnings);
    data_free(&ds);
    /* checks at load: sorted labels (the held-out tail is one class), labels 1..K, NaN inputs */
    for (int i = 0; i < 20; i++) y[i] = i / 5;
    f = H5Fcreate(path("sorted.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/x", H5T_NATIVE_FLOAT, 2, 20, 3, x);
    write_arr(f, "/y", H5T_NATIVE_INT32, 1, 20, 0, y);
    H5Fclose(f);
    ok(data_load(&ds, path("sorted.h5"), 0, 0, err, sizeof err) == 0 &&
       strstr(ds.warnings, "sorted.h5: every one of the 2 validation rows (the last 10% of the file) has label 3"),
       "sorted labels: a warning names the file and the one-class validation split (%s)", ds.warnings);
    data_free(&ds);
    for (int i = 0; i < 20; i++) y[i] = 1 + i % 4;
    f = H5Fcreate(path("onebased.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/x", H5T_NATIVE_FLOAT, 2, 20, 3, x);
    write_arr(f, "/y", H5T_NATIVE_INT32, 1, 20, 0, y);
    H5Fclose(f);
    ok(data_load(&ds, path("onebased.h5"), 0, 0, err, sizeof err) == 0 &&
       strstr(ds.warnings, "no training label is 0: labels 1..4 make 5 classes"),
       "labels 1..K: a warning says class 0 is empty (%s)", ds.warnings);
    data_free(&ds);
    for (int i = 0; i < 20; i++) y[i] = i % 4;
    x[7 * 3 + 1] = NAN;
    f = H5Fcreate(path("nanx.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/x", H5T_NATIVE_FLOAT, 2, 20, 3, x);
    write_arr(f, "/y", H5T_NATIVE_INT32, 1, 20, 0, y);
    H5Fclose(f);
    ok(data_load(&ds, path("nanx.h5"), 0, 0, err, sizeof err) == DATA_EBADINPUT &&
       strstr(err, "nanx.h5: /x row 7, feature 1 is NaN"),
       "a NaN input is refused, naming the file, row and feature (%s)", err);
    x[7 * 3 + 1] = 71.0f;
    /* with validation arrays, double features and 8-bit labels (converted) */
    double xd[4 * 2] = {1, 2, 3, 4, 5, 6, 7, 8};
    int8_t y8[4] = {0, 1, 1, 0};
    f = H5Fcreate(path("v.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/x", H5T_NATIVE_DOUBLE, 2, 4, 2, xd);
    write_arr(f, "/y", H5T_NATIVE_INT8, 1, 4, 0, y8);
    write_arr(f, "/x_val", H5T_NATIVE_DOUBLE, 2, 2, 2, xd);
    write_arr(f, "/y_val", H5T_NATIVE_INT8, 1, 2, 0, y8);
    H5Fclose(f);
    ok(data_load(&ds, path("v.h5"), 0, 0, err, sizeof err) == 0 && ds.n == 4 && ds.n_val == 2 && ds.x[3] == 4.0f &&
       ds.y[2] == 1, "file with /x_val, /y_val; double features and int8 labels converted");
    data_free(&ds);
    /* tokens */
    int32_t tok[5 * 4];
    for (int i = 0; i < 20; i++) tok[i] = i % 7;
    f = H5Fcreate(path("t.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/tokens", H5T_NATIVE_INT32, 2, 5, 4, tok);
    H5Fclose(f);
    ok(data_load(&ds, path("t.h5"), 1, 0, err, sizeof err) == 0 && ds.len == 4 && ds.vocab == 7 && ds.n == 4 && ds.n_val == 1,
       "tokens file: 5 rows of 4 -> 4 + 1, vocabulary 7");
    int rows[2] = {1, 0};
    int32_t in[6], tg[6];
    data_gather(&ds, 0, rows, 2, NULL, NULL, in, tg);
    ok(in[0] == tok[4] && tg[0] == tok[5] && in[3] == tok[0] && tg[5] == tok[3], "gather: inputs and targets shifted by one");
    data_free(&ds);

    /* refusals */
    FILE *t = fopen(path("text.h5"), "w");
    fputs("not hdf5\n", t);
    fclose(t);
    ok(data_load(&ds, path("text.h5"), 0, 0, err, sizeof err) == DATA_EBADINPUT && strstr(err, "not an HDF5 file") &&
       strstr(err, "text.h5"), "a text file: 'not an HDF5 file', naming it");
    ok(data_load(&ds, path("missing.h5"), 0, 0, err, sizeof err) == DATA_EBADINPUT && strstr(err, "cannot open"),
       "a missing file is refused");
    ok(data_load(&ds, path("t.h5"), 0, 0, err, sizeof err) == DATA_EBADINPUT && strstr(err, "for a transformer"),
       "a tokens file for an mlp: says what it holds");
    ok(data_load(&ds, path("c.h5"), 1, 0, err, sizeof err) == DATA_EBADINPUT && strstr(err, "/tokens"),
       "a classification file for a transformer is refused");
    f = H5Fcreate(path("noy.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/x", H5T_NATIVE_FLOAT, 2, 20, 3, x);
    H5Fclose(f);
    ok(data_load(&ds, path("noy.h5"), 0, 0, err, sizeof err) == DATA_EBADINPUT && strstr(err, "/y"), "missing /y is refused");
    f = H5Fcreate(path("fy.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/x", H5T_NATIVE_FLOAT, 2, 20, 3, x);
    write_arr(f, "/y", H5T_NATIVE_FLOAT, 1, 20, 0, x);
    H5Fclose(f);
    ok(data_load(&ds, path("fy.h5"), 0, 0, err, sizeof err) == DATA_EBADINPUT && strstr(err, "integer"),
       "float labels are refused: /y must hold integers");
    f = H5Fcreate(path("r1.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/x", H5T_NATIVE_FLOAT, 1, 20, 0, x);
    write_arr(f, "/y", H5T_NATIVE_INT32, 1, 20, 0, y);
    H5Fclose(f);
    ok(data_load(&ds, path("r1.h5"), 0, 0, err, sizeof err) == DATA_EBADINPUT && strstr(err, "2 dimensions"),
       "a 1-D /x is refused: must have 2 dimensions");
    f = H5Fcreate(path("n.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/x", H5T_NATIVE_FLOAT, 2, 20, 3, x);
    write_arr(f, "/y", H5T_NATIVE_INT32, 1, 19, 0, y);
    H5Fclose(f);
    ok(data_load(&ds, path("n.h5"), 0, 0, err, sizeof err) == DATA_EBADINPUT && strstr(err, "20 rows but /y has 19"),
       "row count mismatch is named");
    tok[3] = -1;
    f = H5Fcreate(path("neg.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    write_arr(f, "/tokens", H5T_NATIVE_INT32, 2, 5, 4, tok);
    H5Fclose(f);
    ok(data_load(&ds, path("neg.h5"), 1, 0, err, sizeof err) == DATA_EBADINPUT && strstr(err, "negative"),
       "a negative token is refused");
}

static void test_batcher(void)
{
    batcher b;
    batcher_init(&b, 10, 1, 42);
    int rows[25], seen[10] = {0};
    batcher_next(&b, rows, 10);
    for (int i = 0; i < 10; i++) seen[rows[i]]++;
    int perm = 1, moved = 0;
    for (int i = 0; i < 10; i++) { perm &= seen[i] == 1; moved += rows[i] != i; }
    ok(perm && moved > 0, "an epoch visits every row once, shuffled");
    int first[10];
    memcpy(first, rows, sizeof first);
    batcher_next(&b, rows, 10);
    ok(memcmp(first, rows, sizeof first) != 0, "the next epoch has another order");
    batcher_free(&b);
    batcher_init(&b, 10, 1, 42);
    batcher_next(&b, rows, 10);
    ok(memcmp(first, rows, sizeof first) == 0, "the same seed gives the same order");
    batcher_free(&b);
    batcher_init(&b, 10, 0, 42);
    batcher_next(&b, rows, 25);
    ok(rows[0] == 0 && rows[9] == 9 && rows[10] == 0 && rows[24] == 4, "--shuffle off: file order, wrapping");
    batcher_free(&b);
}

int main(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    snprintf(dir, sizeof dir, "t_data.tmp.%d", (int)getpid());
    if (mkdir(dir, 0755) != 0) { ok(0, "create %s", dir); return done_testing(); }
    test_synthetic();
    test_files();
    test_batcher();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) diag("could not remove %s", dir);
    H5close();
    return done_testing();
}
