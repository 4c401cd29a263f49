/*
 * trace.c - the HDF5 trace writer (format v1, traces/FORMAT.md).
 *
 * Life of a writer:
 *   create      file with the latest format bounds, every dataset (empty, chunked, extendible,
 *               compressed, fill rows marked with key -1) and the attributes it manages
 *   setup       the caller adds root attributes and layers
 *   begin       at the first record (or flush): H5Fstart_swmr_write. From then on no object or
 *               attribute is added; readers may open the file while it grows
 *   record      rows are buffered per table and written in batches of a chunk; every N steps
 *               or T seconds everything buffered is written and the file flushed
 *   close       last rows, flush, then status and end_time, then H5Fclose
 * A process killed at any point after begin leaves every row up to the last flush readable,
 * with status "running". An I/O error (disk full, file size limit) stops the writer: later
 * calls return the same error and close releases everything without writing the status.
 */
#include "trace/trace_internal.h"
#include "util/path.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define STATUS_ATTR_LEN 16  /* fixed size of the status attribute (value overwritten in place) */
#define END_TIME_ATTR_LEN 32
#define DEFLATE_LEVEL 1 /* level 4 made 4% smaller files and cost the training thread ~5% of a traced step */

struct tbuf {
    hid_t dset;
    char *rows;          /* buffered rows in the memory layout */
    size_t n, cap;
    hsize_t written;     /* rows already in the dataset */
};

struct ampdiag_trace_writer {
    char *path;
    hid_t file;
    hid_t mtype[TBL_N];
    struct tbuf tb[TBL_N];
    ampdiag_trace_options opt;
    int swmr;                 /* H5Fstart_swmr_write done */
    int failed;               /* error code that stopped the writer, 0 while healthy */
    int frozen;               /* the file descriptor was made read-only after a failure */
    char failmsg[1024];
    char (*names)[AMPDIAG_TRACE_NAME_LEN];
    size_t nnames, capnames;
    unsigned steps_since_flush;
    double last_flush;
    ampdiag_trace_writer_info info;
    /* opt.background: full batches and flushes go to a thread of the writer (see bg_main) */
    int bg;                   /* the thread runs */
    pthread_t bg_thread;
    pthread_mutex_t bg_mu;
    pthread_cond_t bg_work;   /* a job was queued, or stop */
    pthread_cond_t bg_idle;   /* the queue is empty and no job runs */
    struct bgjob *bg_head, *bg_tail;
    int bg_running, bg_stop;
    int bg_failed;            /* the thread's first failure (its message in bg_msg) */
    char bg_msg[1024];
    uint64_t bg_flushes, bg_steps_flushed; /* flushes the thread has completed, and the steps
                                              they covered */
};

/* A batch of rows of one table, or (table < 0) a flush of the file after `count` steps. */
struct bgjob {
    struct bgjob *next;
    int table;
    char *rows;
    hsize_t start, count;
};

static const char *const reserved_attrs[] = {"format", "format_version", "tool_version", "status",
                                             "end_time"};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void iso_now(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else
        snprintf(buf, n, "unknown");
}

void ampdiag_trace_options_init(ampdiag_trace_options *opt)
{
    opt->flush_every_steps = 10;
    opt->flush_seconds = 2.0;
    opt->overwrite = 0;
    opt->compact_on_close = 1;
    opt->background = 0;
}

/*
 * After a failed write the file on disk is as the last successful flush left it (plus whatever
 * of the failed flush reached the disk in SWMR order), and readable. Closing it normally would
 * make HDF5 try to flush again and rewrite the superblock with an end-of-file address past
 * what could be written, turning the trace into a "truncated file". So the writer freezes the
 * file instead: HDF5's descriptor is replaced by a read-only one for the same file, every later
 * write fails harmlessly, and H5Fclose only releases memory.
 */
static void freeze_file(ampdiag_trace_writer *w)
{
    if (w->file < 0 || w->frozen)
        return;
    int *fdp = NULL;
    if (H5Fget_vfd_handle(w->file, H5P_DEFAULT, (void **)&fdp) < 0 || !fdp || *fdp < 0)
        return;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", *fdp);
    int ro = open(proc, O_RDONLY | O_CLOEXEC);
    if (ro < 0)
        ro = open(w->path, O_RDONLY | O_CLOEXEC);
    if (ro < 0)
        ro = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (ro < 0)
        return;
    if (dup2(ro, *fdp) >= 0)
        w->frozen = 1;
    close(ro);
}

/* Record an I/O failure from the current HDF5 error stack; the writer stops. */
static int io_fail(ampdiag_trace_writer *w, const char *what)
{
    trace_h5err e;
    trace_h5err_take(&e);
    snprintf(w->failmsg, sizeof w->failmsg, "cannot %s in trace '%s': %s", what, w->path, e.detail);
    w->failed = AMPDIAG_TRACE_EIO;
    freeze_file(w);
    return trace_fail(AMPDIAG_TRACE_EIO, "%s", w->failmsg);
}

static int bg_sync(ampdiag_trace_writer *w);

static int check_usable(const ampdiag_trace_writer *w, const char *fn)
{
    if (!w)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: no writer (NULL)", fn);
    if (w->failed)
        return trace_fail(w->failed, "%s (writing stopped at that error)", w->failmsg);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Attributes
 * ------------------------------------------------------------------------------------------ */

static hid_t str_type(size_t size)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return -1;
    if (H5Tset_size(t, size) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 ||
        H5Tset_cset(t, H5T_CSET_UTF8) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

/* Create (or replace) a scalar root attribute. size is the string size for strings. */
static herr_t attr_create(hid_t file, const char *name, hid_t ftype, hid_t mtype, const void *buf)
{
    herr_t rc = -1;
    hid_t sp = -1, a = -1;
    htri_t ex = H5Aexists(file, name);
    if (ex < 0 || (ex > 0 && H5Adelete(file, name) < 0))
        return -1;
    if ((sp = H5Screate(H5S_SCALAR)) < 0 ||
        (a = H5Acreate2(file, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT)) < 0 ||
        H5Awrite(a, mtype, buf) < 0) {
        trace_h5err_capture();
        goto done;
    }
    rc = 0;
done:
    if (a >= 0 && H5Aclose(a) < 0)
        rc = -1;
    if (sp >= 0)
        H5Sclose(sp);
    return rc;
}

static herr_t attr_create_str(hid_t file, const char *name, const char *value, size_t size)
{
    size_t len = strlen(value);
    if (size == 0)
        size = len + 1;
    char *buf = calloc(1, size);
    if (!buf)
        return -1;
    memcpy(buf, value, len < size ? len : size - 1);
    hid_t t = str_type(size);
    herr_t rc = t < 0 ? -1 : attr_create(file, name, t, t, buf);
    if (t >= 0)
        H5Tclose(t);
    free(buf);
    return rc;
}

/* Overwrite the value of an existing fixed-size string attribute (allowed in SWMR mode). */
static herr_t attr_overwrite_str(hid_t file, const char *name, const char *value, size_t size)
{
    char buf[64];
    if (size > sizeof buf)
        return -1;
    memset(buf, 0, sizeof buf);
    trace_copy_text(buf, size, value, SIZE_MAX);
    hid_t a = H5Aopen(file, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    hid_t t = str_type(size);
    herr_t rc = t < 0 ? -1 : H5Awrite(a, t, buf);
    if (rc < 0)
        trace_h5err_capture();
    if (t >= 0)
        H5Tclose(t);
    if (H5Aclose(a) < 0)
        rc = -1;
    return rc;
}

static int attr_check(ampdiag_trace_writer *w, const char *name, const char *fn)
{
    int rc = check_usable(w, fn);
    if (rc)
        return rc;
    if (!name || !*name)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: empty attribute name (trace '%s')", fn, w->path);
    for (size_t i = 0; i < sizeof reserved_attrs / sizeof reserved_attrs[0]; i++)
        if (strcmp(name, reserved_attrs[i]) == 0)
            return trace_fail(AMPDIAG_TRACE_EINVAL,
                              "%s: attribute '%s' is managed by the writer (trace '%s')", fn, name,
                              w->path);
    if (w->swmr)
        return trace_fail(AMPDIAG_TRACE_EINVAL,
                          "%s: attribute '%s' set after the first record of trace '%s' (HDF5 SWMR "
                          "mode allows no new attributes; set attributes first)",
                          fn, name, w->path);
    return 0;
}

int ampdiag_trace_set_attr_str(ampdiag_trace_writer *w, const char *name, const char *value)
{
    int rc = attr_check(w, name, "ampdiag_trace_set_attr_str");
    if (rc)
        return rc;
    trace_quiet q;
    trace_quiet_begin(&q);
    if (attr_create_str(w->file, name, value ? value : "", 0) < 0) {
        char what[128];
        snprintf(what, sizeof what, "write attribute '%.64s'", name);
        rc = io_fail(w, what);
    }
    trace_quiet_end(&q);
    return rc;
}

int ampdiag_trace_set_attr_double(ampdiag_trace_writer *w, const char *name, double value)
{
    int rc = attr_check(w, name, "ampdiag_trace_set_attr_double");
    if (rc)
        return rc;
    trace_quiet q;
    trace_quiet_begin(&q);
    if (attr_create(w->file, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value) < 0) {
        char what[128];
        snprintf(what, sizeof what, "write attribute '%.64s'", name);
        rc = io_fail(w, what);
    }
    trace_quiet_end(&q);
    return rc;
}

int ampdiag_trace_set_attr_int(ampdiag_trace_writer *w, const char *name, int64_t value)
{
    int rc = attr_check(w, name, "ampdiag_trace_set_attr_int");
    if (rc)
        return rc;
    trace_quiet q;
    trace_quiet_begin(&q);
    if (attr_create(w->file, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value) < 0) {
        char what[128];
        snprintf(what, sizeof what, "write attribute '%.64s'", name);
        rc = io_fail(w, what);
    }
    trace_quiet_end(&q);
    return rc;
}

int ampdiag_trace_update_attr_double(ampdiag_trace_writer *w, const char *name, double value)
{
    static const char *const fn = "ampdiag_trace_update_attr_double";
    int rc = check_usable(w, fn);
    if (rc)
        return rc;
    if (!name || !*name)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: empty attribute name (trace '%s')", fn, w->path);
    for (size_t i = 0; i < sizeof reserved_attrs / sizeof reserved_attrs[0]; i++)
        if (strcmp(name, reserved_attrs[i]) == 0)
            return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: attribute '%s' is managed by the writer (trace '%s')", fn,
                              name, w->path);
    if ((rc = bg_sync(w))) /* (HDF5 only once the background thread is idle) */
        return rc;
    trace_quiet q;
    trace_quiet_begin(&q);
    hid_t a = H5Aexists(w->file, name) > 0 ? H5Aopen(w->file, name, H5P_DEFAULT) : -1, t = -1;
    int is_double = a >= 0 && (t = H5Aget_type(a)) >= 0 && H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 8;
    if (!is_double) {
        rc = trace_fail(AMPDIAG_TRACE_EINVAL, "%s: trace '%s' has no double attribute '%s' (set it before the "
                        "first record)", fn, w->path, name);
    } else if (H5Awrite(a, H5T_NATIVE_DOUBLE, &value) < 0) {
        char what[128];
        snprintf(what, sizeof what, "update attribute '%.64s'", name);
        rc = io_fail(w, what);
    }
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0 && H5Aclose(a) < 0 && !rc)
        rc = io_fail(w, "close an attribute");
    trace_quiet_end(&q);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * Create
 * ------------------------------------------------------------------------------------------ */

static hid_t create_table(ampdiag_trace_writer *w, const trace_table *tb, hid_t mtype)
{
    hid_t ftype = -1, space = -1, dcpl = -1, d = -1;
    void *fill = malloc(tb->rec_size);
    hsize_t dim = 0, maxdim = H5S_UNLIMITED, chunk = tb->chunk_rows;
    if (!fill)
        goto done;
    trace_fill_record(tb, fill);
    if ((ftype = trace_table_wtype(tb, 1)) < 0)
        goto done;
    if ((space = H5Screate_simple(1, &dim, &maxdim)) < 0)
        goto done;
    if ((dcpl = H5Pcreate(H5P_DATASET_CREATE)) < 0)
        goto done;
    if (H5Pset_chunk(dcpl, 1, &chunk) < 0 || H5Pset_shuffle(dcpl) < 0 ||
        H5Pset_deflate(dcpl, DEFLATE_LEVEL) < 0 || H5Pset_fill_value(dcpl, mtype, fill) < 0 ||
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_IFSET) < 0 || H5Pset_obj_track_times(dcpl, 0) < 0)
        goto done;
    d = H5Dcreate2(w->file, tb->path, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
done:
    if (d < 0)
        trace_h5err_capture();
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    if (ftype >= 0)
        H5Tclose(ftype);
    free(fill);
    return d;
}

static void bg_start(ampdiag_trace_writer *w);
static void bg_stop(ampdiag_trace_writer *w);
static int write_rows(ampdiag_trace_writer *w, int t, const char *rows, hsize_t start, hsize_t count);

/* /formats: every row of libampdiag's format table, so that /whatif's and /quant's format is
 * the ampdiag_format value (0, or -1 with the HDF5 error captured). */
static int write_formats(ampdiag_trace_writer *w)
{
    ampdiag_trace_format rows[AMPDIAG_NFORMATS_ALL];
    memset(rows, 0, sizeof rows);
    for (int i = 0; i < AMPDIAG_NFORMATS_ALL; i++) {
        const ampdiag_format_info *f = ampdiag_format_get((ampdiag_format)i);
        rows[i].index = i;
        trace_copy_text(rows[i].name, sizeof rows[i].name, f->name, SIZE_MAX);
        rows[i].bits = f->bits;
        rows[i].exp_bits = f->exp_bits;
        rows[i].mant_bits = f->mant_bits;
        rows[i].max_finite = f->max_finite;
        rows[i].min_normal = f->min_normal;
        rows[i].min_subnormal = f->min_subnormal;
        rows[i].has_inf = f->has_inf ? 1 : 0;
    }
    if (write_rows(w, TBL_FORMATS, (const char *)rows, 0, AMPDIAG_NFORMATS_ALL) != 0)
        return -1;
    w->tb[TBL_FORMATS].written = AMPDIAG_NFORMATS_ALL;
    return 0;
}

static void writer_release(ampdiag_trace_writer *w)
{
    trace_quiet q;
    trace_quiet_begin(&q);
    bg_stop(w);
    for (int i = 0; i < TBL_N; i++) {
        if (w->tb[i].dset >= 0)
            H5Dclose(w->tb[i].dset);
        if (w->mtype[i] >= 0)
            H5Tclose(w->mtype[i]);
        free(w->tb[i].rows);
    }
    trace_quiet_end(&q);
    free(w->names);
    free(w->path);
    free(w);
}

/* Give the finished file tmp the name path: replacing what is there when overwrite, else
 * only if nothing is (link fails with EEXIST; where hard links are not supported, a rename
 * after checking). 0, or -1 with errno set. */
static int put_in_place(const char *tmp, const char *path, int overwrite)
{
    if (overwrite)
        return rename(tmp, path);
    if (link(tmp, path) == 0) {
        unlink(tmp); /* the trace is in place under both names: drop the temporary one */
        return 0;
    }
    if (errno == EEXIST)
        return -1;
    struct stat st;
    if (lstat(path, &st) == 0) {
        errno = EEXIST;
        return -1;
    }
    return rename(tmp, path);
}

int ampdiag_trace_create(const char *path, const ampdiag_trace_options *opt,
                         ampdiag_trace_writer **out)
{
    if (!out)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_create: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_create: empty file name");
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    if (opt)
        o = *opt;
    struct stat st;
    char lm[400];
    if (path_too_long(path, lm, sizeof lm))
        return trace_fail(AMPDIAG_TRACE_EINVAL, "cannot create trace %s", lm);
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return trace_fail(AMPDIAG_TRACE_EIO, "cannot create trace '%s': it is a directory", path);
        if (!o.overwrite)
            return trace_fail(AMPDIAG_TRACE_EEXIST,
                              "trace '%s' exists (ask to overwrite it, or choose another name)", path);
    }

    ampdiag_trace_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return trace_fail(AMPDIAG_TRACE_ENOMEM, "out of memory creating trace '%s'", path);
    }
    w->opt = o;
    w->file = -1;
    for (int i = 0; i < TBL_N; i++) {
        w->mtype[i] = -1;
        w->tb[i].dset = -1;
    }

    int rc = 0;
    char *tmp = NULL;
    trace_quiet q;
    trace_quiet_begin(&q);
    hid_t fapl = -1, fcpl = -1;
    if ((fapl = H5Pcreate(H5P_FILE_ACCESS)) < 0 ||
        H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) < 0 ||
        (fcpl = H5Pcreate(H5P_FILE_CREATE)) < 0 || H5Pset_obj_track_times(fcpl, 0) < 0) {
        rc = io_fail(w, "set up file properties");
        goto done;
    }
    /* Made under a temporary name next to it and renamed into place once its header is on
     * disk: a writer killed while HDF5 creates the file leaves no unreadable trace under the
     * name asked for (only the temporary file). The name is unpredictable (mkstemp) and the
     * file is created with O_EXCL, which refuses a symlink planted there in between. */
    tmp = path_tmp_name(path);
    if (!tmp) {
        rc = trace_fail(AMPDIAG_TRACE_EIO, "cannot create trace '%s': %s", path, strerror(errno));
        goto done;
    }
    w->file = H5Fcreate(tmp, H5F_ACC_EXCL, fcpl, fapl);
    if (w->file < 0) {
        trace_h5err e;
        trace_h5err_get(&e);
        if (e.locked)
            rc = trace_fail(AMPDIAG_TRACE_EIO,
                            "cannot create trace '%s': the file is locked (is another run writing "
                            "it? where file locks are unsupported, set HDF5_USE_FILE_LOCKING=FALSE)",
                            path);
        else
            rc = trace_fail(AMPDIAG_TRACE_EIO, "cannot create trace '%s': %s", path, e.detail);
        goto done;
    }
    for (int i = 0; i < TBL_N; i++) {
        if ((w->mtype[i] = trace_table_wtype(&trace_tables[i], 0)) < 0) {
            rc = io_fail(w, "build the record types");
            goto done;
        }
        if ((w->tb[i].dset = create_table(w, &trace_tables[i], w->mtype[i])) < 0) {
            char what[64];
            snprintf(what, sizeof what, "create dataset %s", trace_tables[i].path);
            rc = io_fail(w, what);
            goto done;
        }
    }
    if (write_formats(w) != 0) {
        rc = io_fail(w, "write /formats");
        goto done;
    }
    char start[40];
    iso_now(start, sizeof start);
    int64_t version = AMPDIAG_TRACE_FORMAT_VERSION;
    if (attr_create_str(w->file, "format", AMPDIAG_TRACE_FORMAT, 0) < 0 ||
        attr_create(w->file, "format_version", H5T_STD_I64LE, H5T_NATIVE_INT64, &version) < 0 ||
        attr_create_str(w->file, "tool_version", ampdiag_version(), 0) < 0 ||
        attr_create_str(w->file, "status", "running", STATUS_ATTR_LEN) < 0 ||
        attr_create_str(w->file, "end_time", "", END_TIME_ATTR_LEN) < 0 ||
        attr_create_str(w->file, AMPDIAG_ATTR_START_TIME, start, 0) < 0) {
        rc = io_fail(w, "write the root attributes");
        goto done;
    }
    /* on disk now, so that a writer killed during its setup leaves a readable (empty) trace */
    if (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0)
        rc = io_fail(w, "flush");
    else if (put_in_place(tmp, path, o.overwrite) != 0)
        rc = errno == EEXIST ? trace_fail(AMPDIAG_TRACE_EEXIST, "trace '%s' exists (ask to overwrite it, or "
                                          "choose another name)", path)
                             : trace_fail(AMPDIAG_TRACE_EIO, "cannot create trace '%s': %s", path, strerror(errno));
    else {
        free(tmp);
        tmp = NULL;
    }
done:
    if (fapl >= 0)
        H5Pclose(fapl);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ampdiag_trace_errmsg());
        if (w->file >= 0) {
            for (int i = 0; i < TBL_N; i++)
                if (w->tb[i].dset >= 0) {
                    H5Dclose(w->tb[i].dset);
                    w->tb[i].dset = -1;
                }
            H5Fclose(w->file);
        }
        if (tmp && unlink(tmp) == 0 && w->file >= 0) {
            /* holding no record: no unreadable file is left (said as close says it) */
            size_t l = strlen(msg);
            snprintf(msg + l, sizeof msg - l, "; the trace held no record and was removed");
        }
        free(tmp);
        writer_release(w);
        trace_quiet_end(&q);
        return trace_fail(rc, "%s", msg);
    }
    trace_quiet_end(&q);
    w->last_flush = now_s();
    if (o.background)
        bg_start(w);
    *out = w;
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Buffers, batches, flush
 * ------------------------------------------------------------------------------------------ */

/* Write count rows of table t at row start (0, or -1 with the HDF5 error captured). */
static int write_rows(ampdiag_trace_writer *w, int t, const char *rows, hsize_t start, hsize_t count)
{
    hid_t dset = w->tb[t].dset;
    hsize_t size = start + count;
    hid_t fs = -1, ms = -1;
    int ok = H5Dset_extent(dset, &size) >= 0 && (fs = H5Dget_space(dset)) >= 0 &&
             H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL) >= 0 &&
             (ms = H5Screate_simple(1, &count, NULL)) >= 0 &&
             H5Dwrite(dset, w->mtype[t], ms, fs, H5P_DEFAULT, rows) >= 0;
    trace_h5_io_end(ok, ms, fs);
    return ok ? 0 : -1;
}

/* Write the buffered rows of one table to its dataset. */
static int write_batch(ampdiag_trace_writer *w, int t)
{
    struct tbuf *b = &w->tb[t];
    if (b->n == 0)
        return 0;
    if (write_rows(w, t, b->rows, b->written, b->n) != 0) {
        char what[64];
        snprintf(what, sizeof what, "write %s", trace_tables[t].path);
        return io_fail(w, what);
    }
    b->written += b->n;
    b->n = 0;
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Background writing (opt.background). The caller's appends only fill buffers; a full buffer is
 * handed over whole (the writer starts a new one) with the row where it goes, and a flush is a
 * job after the batches before it. One thread runs the jobs in order, so the file sees the same
 * writes in the same order as without it. Every other HDF5 call of the writer first waits until
 * that thread is idle (bg_sync), so HDF5 is never entered by two threads at once. A failure in
 * the thread stops the writer at the next call that hands something over or waits.
 * ------------------------------------------------------------------------------------------ */

static void *bg_main(void *arg)
{
    ampdiag_trace_writer *w = arg;
    pthread_mutex_lock(&w->bg_mu);
    for (;;) {
        while (!w->bg_head && !w->bg_stop)
            pthread_cond_wait(&w->bg_work, &w->bg_mu);
        struct bgjob *j = w->bg_head;
        if (!j)
            break;
        w->bg_head = j->next;
        if (!w->bg_head)
            w->bg_tail = NULL;
        w->bg_running = 1;
        int failed = w->bg_failed;
        pthread_mutex_unlock(&w->bg_mu);

        char msg[sizeof w->bg_msg];
        int bad = 0;
        if (!failed) {
            trace_quiet q;
            trace_quiet_begin(&q);
            char what[64];
            if (j->table >= 0) {
                bad = write_rows(w, j->table, j->rows, j->start, j->count) != 0;
                snprintf(what, sizeof what, "write %s", trace_tables[j->table].path);
            } else {
                bad = H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0;
                if (bad)
                    trace_h5err_capture();
                snprintf(what, sizeof what, "flush");
            }
            if (bad) {
                trace_h5err e;
                trace_h5err_take(&e);
                snprintf(msg, sizeof msg, "cannot %s in trace '%s': %s", what, w->path, e.detail);
                freeze_file(w);
            }
            trace_quiet_end(&q);
        }
        int table = j->table;
        uint64_t steps = j->count;
        free(j->rows);
        free(j);

        pthread_mutex_lock(&w->bg_mu);
        if (bad) {
            w->bg_failed = AMPDIAG_TRACE_EIO;
            snprintf(w->bg_msg, sizeof w->bg_msg, "%s", msg);
        } else if (!failed && table < 0) {
            w->bg_flushes++;
            w->bg_steps_flushed = steps;
        }
        w->bg_running = 0;
        if (!w->bg_head)
            pthread_cond_broadcast(&w->bg_idle);
    }
    pthread_mutex_unlock(&w->bg_mu);
    return NULL;
}

static void bg_start(ampdiag_trace_writer *w)
{
    if (pthread_mutex_init(&w->bg_mu, NULL) != 0)
        return;
    if (pthread_cond_init(&w->bg_work, NULL) != 0) {
        pthread_mutex_destroy(&w->bg_mu);
        return;
    }
    if (pthread_cond_init(&w->bg_idle, NULL) != 0) {
        pthread_cond_destroy(&w->bg_work);
        pthread_mutex_destroy(&w->bg_mu);
        return;
    }
    if (pthread_create(&w->bg_thread, NULL, bg_main, w) != 0) {
        pthread_cond_destroy(&w->bg_idle);
        pthread_cond_destroy(&w->bg_work);
        pthread_mutex_destroy(&w->bg_mu);
        return; /* no thread: the writer writes in the caller, as without the option */
    }
    w->bg = 1;
}

/* Adopt a failure of the thread (on the caller's side of the writer). */
static int bg_check(ampdiag_trace_writer *w)
{
    pthread_mutex_lock(&w->bg_mu);
    if (w->bg_failed && !w->failed) {
        w->failed = w->bg_failed;
        snprintf(w->failmsg, sizeof w->failmsg, "%s", w->bg_msg);
    }
    pthread_mutex_unlock(&w->bg_mu);
    return w->failed ? trace_fail(w->failed, "%s", w->failmsg) : 0;
}

/* Wait until every job handed over has run. */
static int bg_sync(ampdiag_trace_writer *w)
{
    if (!w->bg)
        return 0;
    int depth = trace_h5_release(); /* the thread takes the HDF5 lock for its jobs */
    pthread_mutex_lock(&w->bg_mu);
    while (w->bg_head || w->bg_running)
        pthread_cond_wait(&w->bg_idle, &w->bg_mu);
    pthread_mutex_unlock(&w->bg_mu);
    trace_h5_reacquire(depth);
    return bg_check(w);
}

static int bg_post(ampdiag_trace_writer *w, int t, char *rows, hsize_t start, hsize_t count)
{
    struct bgjob *j = malloc(sizeof *j);
    if (!j) {
        free(rows);
        return trace_fail(AMPDIAG_TRACE_ENOMEM, "out of memory writing trace '%s'", w->path);
    }
    *j = (struct bgjob){NULL, t, rows, start, count};
    pthread_mutex_lock(&w->bg_mu);
    if (w->bg_tail)
        w->bg_tail->next = j;
    else
        w->bg_head = j;
    w->bg_tail = j;
    pthread_cond_signal(&w->bg_work);
    pthread_mutex_unlock(&w->bg_mu);
    return bg_check(w);
}

/* Hand the buffered rows of table t over to the thread; the table starts a new buffer. */
static int bg_hand_over(ampdiag_trace_writer *w, int t)
{
    struct tbuf *b = &w->tb[t];
    if (b->n == 0)
        return 0;
    char *rows = b->rows;
    hsize_t start = b->written, count = b->n;
    b->rows = NULL;
    b->cap = 0;
    b->n = 0;
    b->written += count;
    return bg_post(w, t, rows, start, count);
}

static void bg_stop(ampdiag_trace_writer *w)
{
    if (!w->bg)
        return;
    pthread_mutex_lock(&w->bg_mu);
    w->bg_stop = 1;
    pthread_cond_signal(&w->bg_work);
    pthread_mutex_unlock(&w->bg_mu);
    int depth = trace_h5_release(); /* its last jobs take the HDF5 lock */
    pthread_join(w->bg_thread, NULL);
    trace_h5_reacquire(depth);
    pthread_cond_destroy(&w->bg_idle);
    pthread_cond_destroy(&w->bg_work);
    pthread_mutex_destroy(&w->bg_mu);
    w->bg = 0;
}

static int begin(ampdiag_trace_writer *w)
{
    if (w->swmr)
        return 0;
    /* (no job can be queued yet: jobs start with SWMR mode) */
    if (H5Fstart_swmr_write(w->file) < 0)
        return io_fail(w, "start SWMR writing");
    w->swmr = 1;
    w->last_flush = now_s();
    return 0;
}

/* Write every buffered row and flush the file; with the background thread the batches and the
 * flush are handed over, and wait says whether to wait until they are done. */
static int flush_all(ampdiag_trace_writer *w, int wait)
{
    int rc = begin(w);
    if (w->bg) {
        /* at most one window in flight: the last flush must be done before this one is handed
         * over (it was handed over a window ago, so this rarely waits), which bounds what a
         * kill can lose to that window and the one being filled, and the writer's memory to
         * two windows, however far behind the thread falls */
        if (!rc)
            rc = bg_sync(w);
        for (int t = 0; t < TBL_N && !rc; t++)
            rc = bg_hand_over(w, t);
        if (!rc)
            rc = bg_post(w, -1, NULL, 0, w->info.steps);
        if (!rc && wait)
            rc = bg_sync(w);
        w->steps_since_flush = 0;
        w->last_flush = now_s();
        return rc; /* (info.flushes and steps_flushed count the flushes the thread completed) */
    } else {
        for (int t = 0; t < TBL_N && !rc; t++)
            rc = write_batch(w, t);
        if (rc)
            return rc;
        if (H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0)
            return io_fail(w, "flush");
    }
    w->info.flushes++;
    w->info.steps_flushed = w->info.steps;
    w->steps_since_flush = 0;
    w->last_flush = now_s();
    return 0;
}

int ampdiag_trace_flush(ampdiag_trace_writer *w)
{
    int rc = check_usable(w, "ampdiag_trace_flush");
    if (rc || (rc = bg_sync(w))) /* (HDF5 only once the background thread is idle) */
        return rc;
    trace_quiet q;
    trace_quiet_begin(&q);
    rc = flush_all(w, 1);
    trace_quiet_end(&q);
    return rc;
}

/* A slot for one more row of table t (NULL on error, with the error returned in *rc). Writes a
 * full batch first; switches to SWMR mode at the first record. */
static void *push_row(ampdiag_trace_writer *w, int t, int *rc)
{
    struct tbuf *b = &w->tb[t];
    *rc = 0;
    if (!w->swmr || b->n >= trace_tables[t].chunk_rows) {
        /* HDF5 is entered here only where the background thread cannot be in it: before SWMR
         * mode (no job exists yet) or without that thread; a hand-over does not enter it */
        if (!w->swmr || !w->bg) {
            trace_quiet q;
            trace_quiet_begin(&q);
            *rc = begin(w);
            if (!*rc && b->n >= trace_tables[t].chunk_rows)
                *rc = write_batch(w, t);
            trace_quiet_end(&q);
        } else {
            *rc = bg_hand_over(w, t);
        }
        if (*rc)
            return NULL;
    }
    if (b->n == b->cap) {
        /* (a buffer handed to the background thread is replaced by one of a whole batch) */
        size_t cap = b->cap ? b->cap * 2 : w->bg ? trace_tables[t].chunk_rows : 64;
        if (cap > trace_tables[t].chunk_rows)
            cap = trace_tables[t].chunk_rows;
        char *p = realloc(b->rows, cap * trace_tables[t].rec_size);
        if (!p) {
            *rc = trace_fail(AMPDIAG_TRACE_ENOMEM, "out of memory buffering trace '%s'", w->path);
            return NULL;
        }
        b->rows = p;
        b->cap = cap;
    }
    void *row = b->rows + b->n * trace_tables[t].rec_size;
    memset(row, 0, trace_tables[t].rec_size);
    return row;
}

static void commit_row(ampdiag_trace_writer *w, int t) { w->tb[t].n++; }

/* ------------------------------------------------------------------------------------------
 * Records
 * ------------------------------------------------------------------------------------------ */

/* The formats a layer may compute in (the /layers compute column), "" = not recorded. */
static int valid_compute(const char *compute)
{
    static const char *const known[] = {"", "fp32", "fp16", "bf16"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(compute, known[i]) == 0)
            return 1;
    return 0;
}

int ampdiag_trace_add_layer(ampdiag_trace_writer *w, const char *name, const char *op,
                            const char *shape, uint64_t params)
{
    return ampdiag_trace_add_layer_compute(w, name, op, shape, params, NULL);
}

int ampdiag_trace_add_layer_compute(ampdiag_trace_writer *w, const char *name, const char *op,
                                    const char *shape, uint64_t params, const char *compute)
{
    int rc = check_usable(w, "ampdiag_trace_add_layer");
    if (rc)
        return rc;
    if (!name || !*name)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_add_layer: empty layer name (trace '%s')",
                          w->path);
    if (strlen(name) >= AMPDIAG_TRACE_NAME_LEN)
        return trace_fail(AMPDIAG_TRACE_EINVAL,
                          "ampdiag_trace_add_layer: layer name '%.40s...' is longer than %d bytes "
                          "(trace '%s')", name, AMPDIAG_TRACE_NAME_LEN - 1, w->path);
    for (size_t i = 0; i < w->nnames; i++)
        if (strcmp(w->names[i], name) == 0)
            return trace_fail(AMPDIAG_TRACE_EINVAL,
                              "ampdiag_trace_add_layer: layer '%s' declared twice (trace '%s')", name,
                              w->path);
    if (compute && !valid_compute(compute))
        return trace_fail(AMPDIAG_TRACE_EINVAL,
                          "ampdiag_trace_add_layer: layer '%s': compute format '%.16s' is not fp32, fp16, "
                          "bf16 or empty (trace '%s')", name, compute, w->path);
    if (w->nnames >= INT32_MAX)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_add_layer: too many layers");
    if (w->nnames == w->capnames) {
        size_t cap = w->capnames ? 2 * w->capnames : 16;
        void *p = realloc(w->names, cap * sizeof *w->names);
        if (!p)
            return trace_fail(AMPDIAG_TRACE_ENOMEM, "out of memory adding a layer to trace '%s'", w->path);
        w->names = p;
        w->capnames = cap;
    }
    /* layers are buffered without starting SWMR mode: they belong to the setup */
    struct tbuf *b = &w->tb[TBL_LAYERS];
    if (b->n >= trace_tables[TBL_LAYERS].chunk_rows) {
        trace_quiet q;
        trace_quiet_begin(&q);
        rc = write_batch(w, TBL_LAYERS);
        trace_quiet_end(&q);
        if (rc)
            return rc;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16;
        void *p = realloc(b->rows, cap * sizeof(ampdiag_trace_layer));
        if (!p)
            return trace_fail(AMPDIAG_TRACE_ENOMEM, "out of memory adding a layer to trace '%s'", w->path);
        b->rows = p;
        b->cap = cap;
    }
    ampdiag_trace_layer *l = (ampdiag_trace_layer *)(void *)b->rows + b->n;
    memset(l, 0, sizeof *l);
    l->index = (int32_t)w->nnames;
    trace_copy_text(l->name, sizeof l->name, name, SIZE_MAX);
    trace_copy_text(l->op, sizeof l->op, op, SIZE_MAX);
    trace_copy_text(l->shape, sizeof l->shape, shape, SIZE_MAX);
    l->params = params;
    trace_copy_text(l->compute, sizeof l->compute, compute, SIZE_MAX);
    b->n++;
    trace_copy_text(w->names[w->nnames], AMPDIAG_TRACE_NAME_LEN, name, SIZE_MAX);
    w->info.layers++;
    return (int)w->nnames++;
}

static int check_layer(const ampdiag_trace_writer *w, int layer, int allow_global, const char *fn)
{
    if ((layer < 0 && !(allow_global && layer == -1)) || (layer >= 0 && (size_t)layer >= w->nnames))
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: layer %d is not declared (trace '%s' has %zu)",
                          fn, layer, w->path, w->nnames);
    return 0;
}

static int check_step(const ampdiag_trace_writer *w, int64_t step, const char *fn)
{
    if (step < 0)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: negative step %lld (trace '%s')", fn,
                          (long long)step, w->path);
    return 0;
}

/* An evaluation's step: a step, or -1 (before the first step: the initial weights). */
static int check_eval_step(const ampdiag_trace_writer *w, int64_t step, const char *fn)
{
    return step == -1 ? 0 : check_step(w, step, fn);
}

int ampdiag_trace_append_step(ampdiag_trace_writer *w, const ampdiag_trace_step *rec)
{
    int rc = check_usable(w, "ampdiag_trace_append_step");
    if (rc)
        return rc;
    if (!rec)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_append_step: NULL record");
    if ((rc = check_step(w, rec->step, "ampdiag_trace_append_step")))
        return rc;
    ampdiag_trace_step *row = push_row(w, TBL_STEPS, &rc);
    if (!row)
        return rc;
    *row = *rec;
    row->skipped = rec->skipped ? 1 : 0;
    trace_copy_text(row->skip_reason, sizeof row->skip_reason, rec->skip_reason,
                    sizeof rec->skip_reason);
    commit_row(w, TBL_STEPS);
    w->info.steps++;
    w->steps_since_flush++;
    if ((w->opt.flush_every_steps && w->steps_since_flush >= w->opt.flush_every_steps) ||
        (w->opt.flush_seconds > 0 && now_s() - w->last_flush >= w->opt.flush_seconds)) {
        if (w->bg && w->swmr) {
            rc = flush_all(w, 0); /* the periodic flush: handed over, no waiting, no HDF5 call */
        } else {
            trace_quiet q;
            trace_quiet_begin(&q);
            rc = flush_all(w, 0);
            trace_quiet_end(&q);
        }
    }
    return rc;
}

/* One /whatif row (arguments checked by the caller). */
static int push_whatif(ampdiag_trace_writer *w, int64_t step, int layer, ampdiag_tensor_kind kind,
                       ampdiag_format fmt, ampdiag_whatif_scaling scaling, float scale,
                       uint64_t count, const uint64_t counts[AMPDIAG_WHATIF_NCLASSES])
{
    int rc;
    ampdiag_trace_whatif *row = push_row(w, TBL_WHATIF, &rc);
    if (!row)
        return rc;
    row->step = step;
    row->layer = layer;
    row->kind = (int32_t)kind;
    row->format = (int32_t)fmt;
    row->scaling = (int32_t)scaling;
    row->scale = scale;
    row->count = count;
    row->overflow = counts[AMPDIAG_WHATIF_OVERFLOW];
    row->underflow = counts[AMPDIAG_WHATIF_UNDERFLOW];
    row->subnormal = counts[AMPDIAG_WHATIF_SUBNORMAL];
    commit_row(w, TBL_WHATIF);
    w->info.whatifs++;
    return 0;
}

int ampdiag_trace_append_whatif(ampdiag_trace_writer *w, int64_t step, int layer,
                                ampdiag_tensor_kind kind, ampdiag_format fmt,
                                ampdiag_whatif_scaling scaling, float scale, uint64_t count,
                                const uint64_t counts[AMPDIAG_WHATIF_NCLASSES])
{
    static const char fn[] = "ampdiag_trace_append_whatif";
    int rc = check_usable(w, fn);
    if (rc)
        return rc;
    if (!counts)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: NULL counts", fn);
    if ((rc = check_step(w, step, fn)) || (rc = check_layer(w, layer, 0, fn)))
        return rc;
    if ((int)kind < 0 || kind >= AMPDIAG_NKINDS)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: unknown tensor kind %d", fn, (int)kind);
    if ((int)fmt <= (int)AMPDIAG_FP32 || fmt >= AMPDIAG_NFORMATS)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: format %d is not a what-if format (trace '%s')",
                          fn, (int)fmt, w->path);
    if ((int)scaling < 0 || scaling >= AMPDIAG_NSCALINGS)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: unknown scaling %d", fn, (int)scaling);
    if (!(scale > 0.0f) || !isfinite(scale) || (scaling == AMPDIAG_SCALING_NONE && scale != 1.0f))
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: scale %g is not finite and > 0 (1 when unscaled)",
                          fn, (double)scale);
    return push_whatif(w, step, layer, kind, fmt, scaling, scale, count, counts);
}

int ampdiag_trace_append_quant(ampdiag_trace_writer *w, int64_t step, int layer, ampdiag_tensor_kind kind,
                               const ampdiag_qstats *q)
{
    static const char fn[] = "ampdiag_trace_append_quant";
    int rc = check_usable(w, fn);
    if (rc)
        return rc;
    if (!q)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: NULL stats", fn);
    if ((rc = check_step(w, step, fn)) || (rc = check_layer(w, layer, 0, fn)))
        return rc;
    if ((int)kind < 0 || kind >= AMPDIAG_NKINDS)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: unknown tensor kind %d", fn, (int)kind);
    if (!q->computed)
        return 0;
    ampdiag_qspec c = q->spec;
    char why[160];
    if (ampdiag_qspec_check(&c, why, sizeof why) != 0)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: %s (trace '%s')", fn, why, w->path);
    ampdiag_trace_quant *row = push_row(w, TBL_QUANT, &rc);
    if (!row)
        return rc;
    ampdiag_trace_quant_from_qstats(row, q);
    row->step = step;
    row->layer = layer;
    row->kind = (int32_t)kind;
    row->block = c.block;
    commit_row(w, TBL_QUANT);
    w->info.quants++;
    return 0;
}

static int append_tensor(ampdiag_trace_writer *w, const char *fn, int64_t step, int layer,
                         ampdiag_tensor_kind kind, const ampdiag_tstats *s, uint64_t lost_updates,
                         uint64_t lost_if_fp16, uint64_t lost_if_bf16)
{
    int rc = check_usable(w, fn);
    if (rc)
        return rc;
    if (!s)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: NULL statistics", fn);
    if ((rc = check_step(w, step, fn)) || (rc = check_layer(w, layer, 0, fn)))
        return rc;
    if ((int)kind < 0 || kind >= AMPDIAG_NKINDS)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: unknown tensor kind %d", fn, (int)kind);
    ampdiag_trace_tensor *row = push_row(w, TBL_TENSORS, &rc);
    if (!row)
        return rc;
    row->step = step;
    row->layer = layer;
    row->kind = (int32_t)kind;
    ampdiag_trace_tensor_from_tstats(row, s);
    row->lost_updates = lost_updates;
    row->lost_if_fp16 = lost_if_fp16;
    row->lost_if_bf16 = lost_if_bf16;
    commit_row(w, TBL_TENSORS);
    w->info.tensors++;
    /* the unscaled what-if counts of the formats /tensors has no fields for */
    static const ampdiag_format fp8[2] = {AMPDIAG_E4M3, AMPDIAG_E5M2};
    for (int i = 0; i < 2; i++)
        if ((rc = push_whatif(w, step, layer, kind, fp8[i], AMPDIAG_SCALING_NONE, 1.0f, s->count,
                              s->whatif[fp8[i]])))
            return rc;
    return 0;
}

int ampdiag_trace_append_tensor(ampdiag_trace_writer *w, int64_t step, int layer,
                                ampdiag_tensor_kind kind, const ampdiag_tstats *s,
                                uint64_t lost_updates)
{
    return append_tensor(w, "ampdiag_trace_append_tensor", step, layer, kind, s, lost_updates, 0, 0);
}

int ampdiag_trace_append_update(ampdiag_trace_writer *w, int64_t step, int layer,
                                const ampdiag_tstats *s, uint64_t lost_updates,
                                uint64_t lost_if_fp16, uint64_t lost_if_bf16)
{
    return append_tensor(w, "ampdiag_trace_append_update", step, layer, AMPDIAG_KIND_UPDATE, s,
                         lost_updates, lost_if_fp16, lost_if_bf16);
}

int ampdiag_trace_append_hist(ampdiag_trace_writer *w, int64_t step, int layer,
                              ampdiag_tensor_kind kind, const ampdiag_hist *h)
{
    static const char fn[] = "ampdiag_trace_append_hist";
    int rc = check_usable(w, fn);
    if (rc)
        return rc;
    if (!h)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: NULL histogram", fn);
    if ((rc = check_step(w, step, fn)) || (rc = check_layer(w, layer, 0, fn)))
        return rc;
    if ((int)kind < 0 || kind >= AMPDIAG_NKINDS)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: unknown tensor kind %d", fn, (int)kind);
    ampdiag_trace_hist *row = push_row(w, TBL_HISTS, &rc);
    if (!row)
        return rc;
    row->step = step;
    row->layer = layer;
    row->kind = (int32_t)kind;
    memcpy(row->bin, h->bin, sizeof row->bin);
    commit_row(w, TBL_HISTS);
    w->info.hists++;
    return 0;
}

int ampdiag_trace_append_event(ampdiag_trace_writer *w, int64_t step, int layer,
                               ampdiag_event_code code, double value, const char *msg)
{
    return ampdiag_trace_append_event_in(w, step, layer, code, value, msg, AMPDIAG_PHASE_TRAIN, -1, -1);
}

int ampdiag_trace_append_event_in(ampdiag_trace_writer *w, int64_t step, int layer,
                                  ampdiag_event_code code, double value, const char *msg,
                                  ampdiag_event_phase phase, int64_t rows_from, int64_t rows_to)
{
    static const char fn[] = "ampdiag_trace_append_event";
    int rc = check_usable(w, fn);
    if (rc)
        return rc;
    if ((rc = check_step(w, step, fn)) || (rc = check_layer(w, layer, 1, fn)))
        return rc;
    if ((int)code < 0 || code >= AMPDIAG_NEVENT_CODES)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: unknown event code %d", fn, (int)code);
    if (phase != AMPDIAG_PHASE_TRAIN && phase != AMPDIAG_PHASE_EVAL)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: unknown phase %d", fn, (int)phase);
    ampdiag_trace_event *row = push_row(w, TBL_EVENTS, &rc);
    if (!row)
        return rc;
    row->step = step;
    row->layer = layer;
    row->code = (int32_t)code;
    row->value = value;
    row->phase = (int32_t)phase;
    row->rows_from = rows_from < 0 ? -1 : rows_from;
    row->rows_to = rows_to < 0 ? -1 : rows_to;
    trace_copy_text(row->message, sizeof row->message, msg, SIZE_MAX);
    commit_row(w, TBL_EVENTS);
    w->info.events++;
    return 0;
}

int ampdiag_trace_append_eval(ampdiag_trace_writer *w, int64_t step, double loss, double metric)
{
    return ampdiag_trace_append_eval_se(w, step, loss, metric, NAN);
}

int ampdiag_trace_append_eval_se(ampdiag_trace_writer *w, int64_t step, double loss, double metric,
                                 double loss_se)
{
    static const char fn[] = "ampdiag_trace_append_eval";
    int rc = check_usable(w, fn);
    if (rc)
        return rc;
    if ((rc = check_eval_step(w, step, fn)))
        return rc;
    ampdiag_trace_eval *row = push_row(w, TBL_EVALS, &rc);
    if (!row)
        return rc;
    row->step = step;
    row->loss = loss;
    row->metric = metric;
    row->loss_se = loss_se;
    commit_row(w, TBL_EVALS);
    w->info.evals++;
    return 0;
}

int ampdiag_trace_append_eval_examples(ampdiag_trace_writer *w, int64_t step, const double *loss,
                                       const double *metric, size_t n)
{
    static const char fn[] = "ampdiag_trace_append_eval_examples";
    int rc = check_usable(w, fn);
    if (rc)
        return rc;
    if ((rc = check_eval_step(w, step, fn)))
        return rc;
    if (n && !loss)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: NULL losses", fn);
    for (size_t i = 0; i < n; i++) {
        ampdiag_trace_eval_example *row = push_row(w, TBL_EVAL_EXAMPLES, &rc);
        if (!row)
            return rc;
        row->step = step;
        row->example = (int64_t)i;
        row->loss = loss[i];
        row->metric = metric ? metric[i] : NAN;
        commit_row(w, TBL_EVAL_EXAMPLES);
        w->info.eval_examples++;
    }
    return 0;
}

int ampdiag_trace_append_traced(ampdiag_trace_writer *w, const ampdiag_trace_traced *rec)
{
    static const char fn[] = "ampdiag_trace_append_traced";
    int rc = check_usable(w, fn);
    if (rc)
        return rc;
    if (!rec)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: NULL record", fn);
    if ((rc = check_step(w, rec->step, fn)))
        return rc;
    if (!ampdiag_reason_name(rec->reason))
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s: step %lld: reason %d is not a record_reason (trace '%s')",
                          fn, (long long)rec->step, (int)rec->reason, w->path);
    if (rec->event_step < -1 || rec->event_step > rec->step || rec->cadence < 0)
        return trace_fail(AMPDIAG_TRACE_EINVAL,
                          "%s: step %lld: event step %lld or cadence %d out of range (trace '%s')", fn,
                          (long long)rec->step, (long long)rec->event_step, (int)rec->cadence, w->path);
    ampdiag_trace_traced *row = push_row(w, TBL_TRACED, &rc);
    if (!row)
        return rc;
    *row = *rec;
    commit_row(w, TBL_TRACED);
    return 0;
}

void ampdiag_trace_writer_get_info(const ampdiag_trace_writer *w, ampdiag_trace_writer_info *info)
{
    if (!w) {
        memset(info, 0, sizeof *info);
        return;
    }
    *info = w->info;
    if (w->bg) {
        pthread_mutex_t *mu = (pthread_mutex_t *)&w->bg_mu; /* (the lock, not the writer, changes) */
        pthread_mutex_lock(mu);
        info->flushes = w->bg_flushes;
        info->steps_flushed = w->bg_steps_flushed;
        pthread_mutex_unlock(mu);
    }
}

/* ------------------------------------------------------------------------------------------
 * Status and close
 * ------------------------------------------------------------------------------------------ */

static int write_status(ampdiag_trace_writer *w, ampdiag_trace_status status)
{
    if (attr_overwrite_str(w->file, "status", ampdiag_status_name(status), STATUS_ATTR_LEN) < 0)
        return io_fail(w, "write the status");
    return 0;
}

int ampdiag_trace_set_status(ampdiag_trace_writer *w, ampdiag_trace_status status)
{
    int rc = check_usable(w, "ampdiag_trace_set_status");
    if (rc)
        return rc;
    if (!ampdiag_status_name(status))
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_set_status: unknown status %d",
                          (int)status);
    if ((rc = bg_sync(w))) /* (HDF5 only once the background thread is idle) */
        return rc;
    trace_quiet q;
    trace_quiet_begin(&q);
    /* records first, then the status: a status other than running promises complete tables */
    rc = flush_all(w, 1);
    if (!rc)
        rc = write_status(w, status);
    if (!rc && H5Fflush(w->file, H5F_SCOPE_LOCAL) < 0)
        rc = io_fail(w, "flush");
    trace_quiet_end(&q);
    return rc;
}

/* Copy the root attributes of src to dst (all of fixed-size types: the writer makes no other). */
static herr_t copy_attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    hid_t dst = *(hid_t *)data;
    herr_t rc = -1;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), t = -1, sp = -1, b = -1;
    void *buf = NULL;
    if (a < 0 || (t = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0)
        goto done;
    hssize_t np = H5Sget_simple_extent_npoints(sp);
    size_t size = H5Tget_size(t);
    if (np < 0 || size == 0 || H5Tdetect_class(t, H5T_VLEN) != 0 || H5Tis_variable_str(t) != 0)
        goto done;
    if (!(buf = calloc((size_t)(np ? np : 1), size)) || H5Aread(a, t, buf) < 0)
        goto done;
    if ((b = H5Acreate2(dst, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) < 0 || H5Awrite(b, t, buf) < 0)
        goto done;
    rc = 0;
done:
    free(buf);
    if (b >= 0 && H5Aclose(b) < 0)
        rc = -1;
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return rc;
}

/*
 * Rewrite a closed trace without dead space: H5Ocopy moves each dataset's compressed chunks as
 * they are (no recompression) into a new file in the same directory, which is synced and
 * renamed over the trace. Best effort: on any failure the temporary file is removed and the
 * trace stays as it was (valid, only larger).
 */
/* 1 when a copy of a file of `size` bytes fits in its directory's free space (with 1 MiB to
 * spare) and under this process's file-size limit. HDF5 1.10's H5Ocopy crashes when a write of
 * the copy fails, so the copy is made only where it cannot run out of room. */
static int room_for_copy(const char *path, off_t size)
{
    struct statvfs vfs;
    struct rlimit rl;
    if (statvfs(path, &vfs) != 0)
        return 0;
    double avail = (double)vfs.f_bavail * (double)vfs.f_frsize;
    if (avail < (double)size + 1048576.0)
        return 0;
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (double)rl.rlim_cur < (double)size + 1048576.0)
        return 0;
    return 1;
}

static void compact_file(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
        !room_for_copy(path, st.st_size))
        return;
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return;
    snprintf(tmp, n, "%s.compact-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        free(tmp);
        return;
    }
    close(fd);
    int ok = 0;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE), src = -1, dst = -1;
    if (fapl < 0 || fcpl < 0 || H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST) < 0 ||
        H5Pset_obj_track_times(fcpl, 0) < 0)
        goto done;
    if ((src = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0 ||
        (dst = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl)) < 0)
        goto done;
    for (int t = 0; t < TBL_N; t++)
        if (H5Ocopy(src, trace_tables[t].path + 1, dst, trace_tables[t].path + 1, H5P_DEFAULT,
                    H5P_DEFAULT) < 0)
            goto done;
    hsize_t idx = 0;
    if (H5Aiterate2(src, H5_INDEX_NAME, H5_ITER_INC, &idx, copy_attr_cb, &dst) < 0)
        goto done;
    ok = 1;
done:
    if (dst >= 0 && H5Fclose(dst) < 0)
        ok = 0;
    if (src >= 0)
        H5Fclose(src);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (ok) {
        fd = open(tmp, O_RDONLY | O_CLOEXEC);
        ok = fd >= 0 && fsync(fd) == 0;
        if (fd >= 0)
            close(fd);
    }
    if (ok && (chmod(tmp, st.st_mode & 07777) != 0 || rename(tmp, path) != 0))
        ok = 0;
    if (!ok)
        unlink(tmp);
    free(tmp);
}

int ampdiag_trace_close(ampdiag_trace_writer *w, ampdiag_trace_status status)
{
    if (!w)
        return 0;
    int rc = 0;
    if (w->bg)
        bg_sync(w); /* every job run (a failure in the thread becomes the writer's); and HDF5 is
                     * entered below only once that thread is idle */
    trace_quiet q;
    trace_quiet_begin(&q);
    if (status != AMPDIAG_STATUS_UNKNOWN && !ampdiag_status_name(status))
        rc = trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_close: unknown status %d (trace '%s')",
                        (int)status, w->path);
    if (!w->failed) {
        int r = flush_all(w, 1);
        if (!r && status != AMPDIAG_STATUS_UNKNOWN && !rc)
            r = write_status(w, status);
        if (!r) {
            char end[40];
            iso_now(end, sizeof end);
            if (attr_overwrite_str(w->file, "end_time", end, END_TIME_ATTR_LEN) < 0)
                r = io_fail(w, "write end_time");
        }
        if (r && !rc)
            rc = r;
    } else if (!rc) {
        rc = trace_fail(w->failed, "%s (writing stopped at that error)", w->failmsg);
    }
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ampdiag_trace_errmsg());
    for (int i = 0; i < TBL_N; i++)
        if (w->tb[i].dset >= 0) {
            H5Dclose(w->tb[i].dset);
            w->tb[i].dset = -1;
        }
    if (w->file >= 0 && H5Fclose(w->file) < 0 && !rc) {
        rc = io_fail(w, "close");
        snprintf(msg, sizeof msg, "%s", ampdiag_trace_errmsg());
    }
    w->file = -1;
    if (!rc && !w->failed && w->opt.compact_on_close)
        compact_file(w->path);
    if (rc && !w->swmr && unlink(w->path) == 0) {
        /* it failed before its first flush (a full disk at the start): the file holds no
         * record and may not even open, so it is not left behind as if it were a trace */
        size_t l = strlen(msg);
        snprintf(msg + l, sizeof msg - l, "; the trace held no record and was removed");
    }
    trace_quiet_end(&q);
    writer_release(w);
    if (rc)
        trace_fail(rc, "%s", msg);
    return rc;
}
