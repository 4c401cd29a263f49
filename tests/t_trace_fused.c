/*
 * t_trace_fused.c - a traced run writes the same records whichever way its statistics are
 * taken: the default way, which leaves out work whose result is already known (the FP8
 * delayed-scaling counts that a tensor's statistics settle, the amax history's maximum kept as
 * the window slides: src/train/fp8.c), against the plain way that does all of it
 * (AMPDIAG_TRACE_PLAIN=1), on the tracer thread and inline. Every dataset of the two traces is
 * compared byte for byte as stored, /steps without its wall-clock column, on runs that reach
 * every branch: FP16 and BF16 mlp and transformer runs, FP16 overflow (NaN tensors), a
 * diverging run (inf among finite values), tiny values (FP8 underflow), a short amax history
 * with a negative margin (FP8 overflow).
 */
#include "tap.h"

#include <hdf5.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[128];

/* Run ./ampdiag run with the arguments into dir/NAME, AMPDIAG_TRACE_PLAIN set to plain. 0 when
 * it exited 0. */
__attribute__((format(printf, 3, 4)))
static int run(const char *name, int plain, const char *fmt, ...)
{
    char args[1024], cmd[1600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "AMPDIAG_TRACE_PLAIN=%d ./ampdiag run --progress none --eval-every 0 --trace-every 1 -o %s/%s --overwrite %s "
             "> %s/out.txt 2>&1", plain, dir, name, args, dir);
    int st = system(cmd);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* The members that hold measured times (/steps' wall_ms, /traced's record_ms and step_ms): the
 * values a rerun changes. */
static int timing_member(const char *name)
{
    return strcmp(name, "wall_ms") == 0 || strcmp(name, "record_ms") == 0 || strcmp(name, "step_ms") == 0;
}

/* The memory type that reads a dataset's values as stored: the file's compound without its
 * timing members, else the file's type itself. */
static hid_t read_type(hid_t ftype)
{
    if (H5Tget_class(ftype) != H5T_COMPOUND ||
        (H5Tget_member_index(ftype, "wall_ms") < 0 && H5Tget_member_index(ftype, "record_ms") < 0))
        return H5Tcopy(ftype);
    int nm = H5Tget_nmembers(ftype);
    size_t size = 0;
    for (int i = 0; i < nm; i++) {
        hid_t mt = H5Tget_member_type(ftype, (unsigned)i);
        size += H5Tget_size(mt);
        H5Tclose(mt);
    }
    hid_t t = H5Tcreate(H5T_COMPOUND, size);
    size_t off = 0;
    for (int i = 0; t >= 0 && i < nm; i++) {
        char *name = H5Tget_member_name(ftype, (unsigned)i);
        hid_t mt = H5Tget_member_type(ftype, (unsigned)i);
        if (!timing_member(name)) {
            H5Tinsert(t, name, off, mt);
            off += H5Tget_size(mt);
        }
        H5Tclose(mt);
        H5free_memory(name);
    }
    if (t >= 0)
        H5Tpack(t);
    return t;
}

/* The bytes of dataset `name` of file f as read_type reads them (malloc'd) and their count;
 * NULL when it cannot be read. */
static unsigned char *read_all(hid_t f, const char *name, size_t *bytes)
{
    unsigned char *buf = NULL;
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t ft = d >= 0 ? H5Dget_type(d) : -1, sp = d >= 0 ? H5Dget_space(d) : -1;
    hid_t mt = ft >= 0 ? read_type(ft) : -1;
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (mt >= 0 && n >= 0) {
        *bytes = (size_t)n * H5Tget_size(mt);
        buf = calloc(*bytes ? *bytes : 1, 1);
        if (buf && n > 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
            free(buf);
            buf = NULL;
        }
    }
    if (mt >= 0) H5Tclose(mt);
    if (ft >= 0) H5Tclose(ft);
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    return buf;
}

struct walk {
    hid_t other;
    int datasets, differ;
    char first[128];
};

/* One object of the first trace: a dataset is compared with the other trace's of that name. */
static herr_t visit(hid_t f, const char *name, const H5O_info_t *info, void *arg)
{
    struct walk *w = arg;
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    size_t na = 0, nb = 0;
    unsigned char *a = read_all(f, name, &na), *b = read_all(w->other, name, &nb);
    w->datasets++;
    if (!a || !b || na != nb || memcmp(a, b, na) != 0) {
        if (!w->differ++)
            snprintf(w->first, sizeof w->first, "%s", name);
    }
    free(a);
    free(b);
    return 0;
}

/* Whether traces dir/A and dir/B hold the same datasets with the same bytes; *n: how many. */
static int same_records(const char *a, const char *b, int *n, char *first, size_t firstlen)
{
    char pa[256], pb[256];
    snprintf(pa, sizeof pa, "%s/%s", dir, a);
    snprintf(pb, sizeof pb, "%s/%s", dir, b);
    hid_t fa = H5Fopen(pa, H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(pb, H5F_ACC_RDONLY, H5P_DEFAULT);
    struct walk w = {fb, 0, 0, ""};
    int ok_ = fa >= 0 && fb >= 0 && H5Ovisit(fa, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &w) >= 0;
    struct walk back = {fa, 0, 0, ""}; /* and no dataset only in the second */
    ok_ = ok_ && H5Ovisit(fb, H5_INDEX_NAME, H5_ITER_NATIVE, visit, &back) >= 0;
    if (fa >= 0) H5Fclose(fa);
    if (fb >= 0) H5Fclose(fb);
    *n = w.datasets;
    snprintf(first, firstlen, "%s", w.differ ? w.first : back.first);
    return ok_ && w.differ == 0 && back.differ == 0 && w.datasets == back.datasets && w.datasets >= 6;
}

/* The run with arguments `args` the default way and the plain way, on the tracer thread and
 * inline: the four traces' records agree. */
static void check(const char *label, const char *args)
{
    static const char *names[4] = {"fused1.h5", "plain1.h5", "fused0.h5", "plain0.h5"};
    int rc = 0;
    for (int k = 0; k < 4; k++)
        rc |= run(names[k], k % 2, "--trace-threads %d %s", k < 2 ? 1 : 0, args);
    if (rc) {
        ok(0, "%s: the runs (%s)", label, args);
        return;
    }
    int n = 0;
    char first[128] = "";
    int same = same_records("fused1.h5", "plain1.h5", &n, first, sizeof first);
    int n0 = 0;
    char first0[128] = "";
    same = same_records("fused0.h5", "plain0.h5", &n0, first0, sizeof first0) && same;
    int n01 = 0;
    char first01[128] = "";
    same = same_records("fused1.h5", "fused0.h5", &n01, first01, sizeof first01) && same;
    ok(same, "%s: the same records taken both ways, on the tracer thread and inline (%d datasets)", label, n);
    if (!same)
        diag("first difference: '%s' / '%s' / '%s'", first, first0, first01);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/t_trace_fused.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    check("mlp fp16", "--model mlp --precision fp16 --steps 40 --hist-every 7");
    check("transformer bf16", "--model transformer --precision bf16 --batch 4 --steps 12 --hist-every 5");
    check("mlp fp16 overflowing", "--scenario fp16-forward-overflow --steps 12 --hist-every 4");
    check("mlp fp16 diverging (inf among finite values)", "--scenario lr-diverge --precision fp16 --steps 30 --hist-every 10");
    check("mlp fp16 tiny values", "--scenario fp16-grad-underflow --steps 25 --hist-every 10");
    check("mlp fp32, amax history 2, margin -2", "--model mlp --steps 30 --fp8-amax-history 2 --fp8-margin -2 --hist-every 0");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        diag("could not remove %s", dir);
    return done_testing();
}
