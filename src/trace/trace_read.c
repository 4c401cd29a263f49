/*
 * trace_read.c - open, validate and read ampdiag traces (format v1, traces/FORMAT.md).
 *
 * Validation happens once, in ampdiag_trace_open, and names what is wrong: not a file, not
 * HDF5, HDF5 but not a trace, a newer format_version, a missing or mistyped attribute, dataset
 * or field, a truncated file. Reading converts by field name (HDF5 compound conversion), so
 * traces written by other programs (h5py) with other field order or wider types read the same;
 * integer columns may stand in for the enum columns. Fields marked optional in the schema
 * (added to v1 later: lost_if_fp16, lost_if_bf16) may be missing and then read as 0.
 *
 * Cut-off traces: files are opened for SWMR reading, which works on a trace whose writer was
 * killed after its first flush. A writer killed before that leaves the file marked
 * open-for-write; the mark is cleared the way `h5clear -s` does and the open retried. Rows at
 * the end of a table whose key is -1 are fill (allocated, never written) and are not counted.
 *
 * Untrusted files: before the reader opens a trace, a child process opens it the same way and
 * lets HDF5 parse its whole structure (probe_child, trace_sandbox.c); a crash, hang or runaway
 * allocation there refuses the file, and the root attributes come from the child.
 */
#include "trace/trace_chunks.h"
#include "trace/trace_internal.h"
#include "trace/trace_notes.h"
#include "util/path.h"
#include "trace/h5safe.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A private HDF5 file-access property (H5Fprivate.h) that h5clear -s sets: opening the file
 * read-write with it clears the superblock status flags. */
#define CLEAR_STATUS_FLAGS_PROP "clear_status_flags"

struct ampdiag_trace_reader {
    char *path;
    hid_t file;
    hid_t lapl; /* dataset and link access: external links are never traversed (h5safe_lapl) */
    off_t file_size;
    int swmr;
    int repaired;
    hid_t dset[TBL_N];
    hid_t mtype[TBL_N];  /* memory type matching this file's fields */
    uint64_t absent[TBL_N]; /* bit i: optional field i of the table is not in the file */
    trace_chunks *chunks[TBL_N]; /* read from the stored chunks on threads, or NULL: through HDF5
                                    (trace_chunks.h; never for a trace opened for SWMR reading,
                                    whose chunks a writer may be rewriting) */
    size_t rows[TBL_N];
    ampdiag_trace_attr *attrs;
    size_t nattrs, capattrs;
    int version;
    ampdiag_trace_status status;
    const char *status_text;
};

/* ------------------------------------------------------------------------------------------
 * Opening the file
 * ------------------------------------------------------------------------------------------ */

static int open_error(const char *path, const trace_h5err *e)
{
    if (e->not_hdf5)
        return trace_fail(AMPDIAG_TRACE_ENOTHDF5, "'%s' is not an HDF5 file (no HDF5 signature)", path);
    if (e->truncated)
        return trace_fail(AMPDIAG_TRACE_ETRUNCATED,
                          "'%s' is truncated: the file is shorter than its HDF5 superblock says (%s)",
                          path, e->detail);
    if (e->locked)
        return trace_fail(AMPDIAG_TRACE_EIO,
                          "cannot open '%s': the file is locked by another process (a run still "
                          "writing it without SWMR?); where file locks are unsupported, set "
                          "HDF5_USE_FILE_LOCKING=FALSE",
                          path);
    if (e->os_errno && e->os_errno != ENOENT)
        return trace_fail(AMPDIAG_TRACE_EIO, "cannot open '%s': %s", path, e->detail);
    return trace_fail(AMPDIAG_TRACE_ETRUNCATED, "cannot open '%s' as HDF5 (corrupt file?): %s", path,
                      e->detail);
}

/*
 * Open read-only: plainly first (a closed trace), then for SWMR reading (a trace still marked as
 * being written in SWMR mode: live, or cut off). A plain open of such a file fails with "already
 * open for write"; so does one of a file whose writer died before SWMR mode, which SWMR reading
 * cannot open either (that one needs the mark cleared).
 */
static hid_t try_open(const char *path, hid_t fapl, int *swmr, trace_h5err *e)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f >= 0) {
        *swmr = 0;
        return f;
    }
    trace_h5err_get(e);
    /* the end-of-file check comes before the status flags: a trace cut off by a failed write
     * can look truncated to a plain open (SWMR readers skip that check on such files) */
    if (!e->open_for_write && !e->truncated)
        return -1;
    f = H5Fopen(path, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    if (f >= 0) {
        *swmr = 1;
        return f;
    }
    trace_h5err e2;
    trace_h5err_get(&e2);
    /* keep the plain attempt's diagnosis unless the SWMR one says something more specific */
    if (e2.not_hdf5 || e2.locked || (e2.truncated && !e->truncated))
        *e = e2;
    return -1;
}

static int clear_mark(const char *path, hid_t fapl)
{
    hbool_t clear = 1;
    hid_t p = H5Pcopy(fapl);
    if (p < 0)
        return -1;
    hid_t f = -1;
    if (H5Pset(p, CLEAR_STATUS_FLAGS_PROP, &clear) >= 0)
        f = H5Fopen(path, H5F_ACC_RDWR, p);
    if (f < 0)
        trace_h5err_capture();
    H5Pclose(p);
    if (f < 0)
        return -1;
    return H5Fclose(f) < 0 ? -1 : 0;
}

/*
 * How often a SWMR reader re-reads a piece of metadata whose checksum fails (the writer may be
 * rewriting it). HDF5 waits 1, 2, 4, ... ns between attempts, and its default of 100 attempts
 * would make a damaged file take forever to refuse; 24 attempts wait about 17 ms in all.
 */
#define SWMR_READ_ATTEMPTS 24

static int open_file(ampdiag_trace_reader *r, unsigned flags)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    /* strong close: closing the file closes whatever an error path left open in it */
    if (fapl < 0 || H5Pset_metadata_read_attempts(fapl, SWMR_READ_ATTEMPTS) < 0 ||
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
        if (fapl >= 0)
            H5Pclose(fapl);
        return trace_fail(AMPDIAG_TRACE_ENOMEM, "cannot open '%s': HDF5 property list failed", r->path);
    }
    trace_h5err e;
    int rc = 0;
    r->file = try_open(r->path, fapl, &r->swmr, &e);
    if (r->file < 0 && e.open_for_write) {
        if (flags & AMPDIAG_TRACE_READ_NO_REPAIR) {
            rc = trace_fail(AMPDIAG_TRACE_ETRUNCATED,
                            "'%s' is still marked as open for writing: its writer is running or "
                            "died before its first flush (clear the mark with h5clear -s)",
                            r->path);
            goto done;
        }
        if (clear_mark(r->path, fapl) < 0) {
            trace_h5err e2;
            trace_h5err_take(&e2);
            if (e2.os_errno && e2.os_errno != ENOENT)
                rc = trace_fail(AMPDIAG_TRACE_EIO,
                                "'%s' is still marked as open for writing (its writer died before "
                                "its first flush) and the mark cannot be cleared: %s",
                                r->path, e2.detail);
            else
                rc = trace_fail(AMPDIAG_TRACE_ETRUNCATED,
                                "'%s' is incomplete: its writer died before its first flush (%s)",
                                r->path, e2.detail);
            goto done;
        }
        r->repaired = 1; /* the note is printed by ampdiag_trace_open */
        r->file = try_open(r->path, fapl, &r->swmr, &e);
    }
    if (r->file < 0) {
        if (r->repaired && !e.not_hdf5 && !e.locked && !(e.os_errno && e.os_errno != ENOENT))
            rc = trace_fail(AMPDIAG_TRACE_ETRUNCATED,
                            "'%s' is incomplete: its writer died before its first flush (%s)",
                            r->path, e.detail);
        else
            rc = open_error(r->path, &e);
    }
done:
    H5Pclose(fapl);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * Root attributes
 * ------------------------------------------------------------------------------------------ */

/*
 * Limits on the root attributes (traces/FORMAT.md, "Limits"). They are read by the probe's child
 * process (probe_child below; HDF5's attribute and global-heap code is the most fragile it has)
 * and come back through a pipe as records: type (1 byte), name length (4) and name, then the value:
 * int64 or double (8 bytes), or a string's length (4) and bytes. The stream ends with a record of
 * type ATTR_REC_END: the outcome of the child's whole open (an error code or 0, 4 bytes), whether
 * it cleared an open-for-write mark (1 byte), and the error message's length (4) and text.
 */
#define TRACE_MAX_ATTRS 1024
#define TRACE_MAX_ATTR_NAME 1024
#define TRACE_MAX_ATTR_STR 65536
#define TRACE_ATTR_STREAM_MAX \
    ((size_t)TRACE_MAX_ATTRS * (9 + TRACE_MAX_ATTR_NAME + TRACE_MAX_ATTR_STR) + 2048)
#define ATTR_REC_END 0xff

struct attr_iter {
    ampdiag_trace_reader *r;
    int rc;
    char msg[512];
};

__attribute__((format(printf, 3, 4)))
static int attr_fail(struct attr_iter *it, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(it->msg, sizeof it->msg, fmt, ap);
    va_end(ap);
    it->rc = rc;
    return -1;
}

static char *read_attr_string(struct attr_iter *it, const char *name, hid_t a, hid_t ftype)
{
    char *out = NULL;
    if (H5Tis_variable_str(ftype) > 0) {
        hid_t m = H5Tcopy(H5T_C_S1);
        char *p = NULL;
        if (m >= 0 && H5Tset_size(m, H5T_VARIABLE) >= 0 &&
            H5Tset_cset(m, H5Tget_cset(ftype)) >= 0 && H5Aread(a, m, &p) >= 0) {
            if (p && strnlen(p, TRACE_MAX_ATTR_STR + 1) > TRACE_MAX_ATTR_STR)
                attr_fail(it, AMPDIAG_TRACE_ESCHEMA, "attribute '%.64s' is longer than the limit "
                          "of %d bytes", name, TRACE_MAX_ATTR_STR);
            else
                out = strdup(p ? p : "");
            if (p)
                H5free_memory(p);
        }
        if (m >= 0)
            H5Tclose(m);
        return out;
    }
    size_t size = H5Tget_size(ftype);
    if (size > TRACE_MAX_ATTR_STR) {
        attr_fail(it, AMPDIAG_TRACE_ESCHEMA, "attribute '%.64s' is a string of %zu bytes, more "
                  "than the limit of %d", name, size, TRACE_MAX_ATTR_STR);
        return NULL;
    }
    if (size == 0)
        return strdup("");
    char *buf = calloc(1, size + 1);
    if (!buf)
        return NULL;
    if (H5Aread(a, ftype, buf) < 0) {
        free(buf);
        return NULL;
    }
    if (H5Tget_strpad(ftype) == H5T_STR_SPACEPAD)
        for (size_t n = strlen(buf); n > 0 && buf[n - 1] == ' '; n--)
            buf[n - 1] = 0;
    return buf;
}

/* The value of one attribute into at (left AMPDIAG_ATTR_OTHER when it is not a single string,
 * integer or float); -1 when a limit is passed. */
static int read_attr_value(struct attr_iter *it, ampdiag_trace_attr *at, hid_t a)
{
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    if (np == 1) {
        if (cls == H5T_STRING) {
            char *s = read_attr_string(it, at->name, a, t);
            if (s) {
                at->type = AMPDIAG_ATTR_STR;
                at->s = s;
            }
        } else if (cls == H5T_INTEGER) {
            int64_t v;
            if (H5Aread(a, H5T_NATIVE_INT64, &v) >= 0) {
                at->type = AMPDIAG_ATTR_INT;
                at->i = v;
                at->d = (double)v;
            }
        } else if (cls == H5T_FLOAT) {
            double v;
            if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0) {
                at->type = AMPDIAG_ATTR_DOUBLE;
                at->d = v;
            }
        }
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    return it->rc ? -1 : 0;
}

/* Make room for one more attribute in r->attrs; -1 when out of memory. */
static int attrs_grow(ampdiag_trace_reader *r)
{
    if (r->nattrs < r->capattrs)
        return 0;
    size_t cap = r->capattrs ? 2 * r->capattrs : 32;
    void *p = realloc(r->attrs, cap * sizeof *r->attrs);
    if (!p)
        return -1;
    r->attrs = p;
    r->capattrs = cap;
    return 0;
}

static ampdiag_trace_attr *attr_new(ampdiag_trace_reader *r)
{
    if (attrs_grow(r))
        return NULL;
    ampdiag_trace_attr *at = &r->attrs[r->nattrs++];
    memset(at, 0, sizeof *at);
    at->type = AMPDIAG_ATTR_OTHER;
    at->d = NAN;
    return at;
}

static herr_t attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    struct attr_iter *it = data;
    ampdiag_trace_reader *r = it->r;
    if (r->nattrs == TRACE_MAX_ATTRS)
        return attr_fail(it, AMPDIAG_TRACE_ESCHEMA, "more than the limit of %d root attributes",
                         TRACE_MAX_ATTRS);
    if (strlen(name) > TRACE_MAX_ATTR_NAME)
        return attr_fail(it, AMPDIAG_TRACE_ESCHEMA, "an attribute name is longer than the limit "
                         "of %d bytes", TRACE_MAX_ATTR_NAME);
    ampdiag_trace_attr *at = attr_new(r);
    if (!at || !(at->name = strdup(name)))
        return attr_fail(it, AMPDIAG_TRACE_ENOMEM, "out of memory");
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    if (a < 0)
        return attr_fail(it, AMPDIAG_TRACE_ETRUNCATED, "cannot open attribute '%.64s'", name);
    int rc = read_attr_value(it, at, a);
    H5Aclose(a);
    return rc;
}

static void put_u32(trace_buf *b, uint32_t v) { trace_buf_put(b, &v, sizeof v); }

static void put_text(trace_buf *b, const char *s)
{
    size_t n = strlen(s);
    put_u32(b, (uint32_t)n);
    trace_buf_put(b, s, n);
}

/* Read the root attributes into r->attrs with HDF5 (in the child). 0 or a trace error. */
static int load_attrs_h5(ampdiag_trace_reader *r)
{
    struct attr_iter it = {r, 0, ""};
    hsize_t idx = 0;
    herr_t hr = H5Aiterate2(r->file, H5_INDEX_NAME, H5_ITER_INC, &idx, attr_cb, &it);
    if (hr < 0 && !it.rc) {
        trace_h5err e;
        trace_h5err_take(&e);
        attr_fail(&it, AMPDIAG_TRACE_ETRUNCATED, "%s", e.detail);
    }
    if (!it.rc)
        return 0;
    if (it.rc == AMPDIAG_TRACE_ENOMEM)
        return trace_fail(it.rc, "out of memory reading '%s'", r->path);
    if (it.rc == AMPDIAG_TRACE_ESCHEMA)
        return trace_fail(it.rc, "trace '%s': %s", r->path, it.msg);
    return trace_fail(AMPDIAG_TRACE_ETRUNCATED, "cannot read the root attributes of '%s': %s",
                      r->path, it.msg);
}

/* Stream r's attributes, then the outcome record (code, repaired, message). */
static void put_outcome(trace_buf *out, const ampdiag_trace_reader *r, int rc)
{
    for (size_t i = 0; i < r->nattrs; i++) {
        const ampdiag_trace_attr *at = &r->attrs[i];
        unsigned char type = (unsigned char)at->type;
        trace_buf_put(out, &type, 1);
        put_text(out, at->name);
        if (at->type == AMPDIAG_ATTR_INT)
            trace_buf_put(out, &at->i, sizeof at->i);
        else if (at->type == AMPDIAG_ATTR_DOUBLE)
            trace_buf_put(out, &at->d, sizeof at->d);
        else if (at->type == AMPDIAG_ATTR_STR)
            put_text(out, at->s);
    }
    unsigned char type = ATTR_REC_END, repaired = (unsigned char)r->repaired;
    int32_t code = rc;
    trace_buf_put(out, &type, 1);
    trace_buf_put(out, &code, sizeof code);
    trace_buf_put(out, &repaired, 1);
    put_text(out, rc ? ampdiag_trace_errmsg() : "");
}

/* A length-prefixed text of at most max bytes from the stream, NUL-terminated; NULL if bad. */
static char *get_text(const trace_buf *b, size_t *pos, size_t max)
{
    uint32_t n;
    if (trace_buf_get(b, pos, &n, sizeof n) || n > max || n > b->len - *pos)
        return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s)
        return NULL;
    memcpy(s, b->data + *pos, n);
    s[n] = 0;
    *pos += n;
    return s;
}

/* One record of the stream into a new attribute of r; 0, 1 at the outcome record (its code in
 * *code, its message in msg, r->repaired set), -1 when the stream is malformed or memory ran
 * out. */
static int take_record(ampdiag_trace_reader *r, const trace_buf *b, size_t *pos, int *code,
                       char *msg, size_t msglen)
{
    unsigned char type;
    if (trace_buf_get(b, pos, &type, 1))
        return -1;
    if (type == ATTR_REC_END) {
        int32_t c;
        unsigned char repaired;
        char *text = NULL;
        if (trace_buf_get(b, pos, &c, sizeof c) || c > 0 || trace_buf_get(b, pos, &repaired, 1) ||
            !(text = get_text(b, pos, 2048)))
            return -1;
        *code = c;
        r->repaired = repaired != 0;
        snprintf(msg, msglen, "%s", text);
        free(text);
        return 1;
    }
    if (type > AMPDIAG_ATTR_OTHER || r->nattrs == TRACE_MAX_ATTRS)
        return -1;
    ampdiag_trace_attr *at = attr_new(r);
    if (!at || !(at->name = get_text(b, pos, TRACE_MAX_ATTR_NAME)))
        return -1;
    at->type = (ampdiag_attr_type)type;
    if (type == AMPDIAG_ATTR_INT) {
        if (trace_buf_get(b, pos, &at->i, sizeof at->i))
            return -1;
        at->d = (double)at->i;
    } else if (type == AMPDIAG_ATTR_DOUBLE) {
        if (trace_buf_get(b, pos, &at->d, sizeof at->d))
            return -1;
    } else if (type == AMPDIAG_ATTR_STR) {
        if (!(at->s = get_text(b, pos, TRACE_MAX_ATTR_STR)))
            return -1;
    }
    return 0;
}

static int sandbox_error(const ampdiag_trace_reader *r, int why)
{
    switch (why) {
    case TRACE_SANDBOX_CRASHED:
        return trace_fail(AMPDIAG_TRACE_ETRUNCATED, "cannot open '%s': HDF5 crashed reading its "
                          "structure (a corrupt file)", r->path);
    case TRACE_SANDBOX_TIMEOUT:
        return trace_fail(AMPDIAG_TRACE_ETRUNCATED, "cannot open '%s': HDF5 took more than %d s of CPU time "
                          "reading its structure (a corrupt file)", r->path,
                          TRACE_PROBE_MS / 1000);
    case TRACE_SANDBOX_MEMORY:
        return trace_fail(AMPDIAG_TRACE_ETRUNCATED, "cannot open '%s': HDF5 took more than %zu MiB "
                          "reading its structure (a corrupt file)", r->path,
                          TRACE_SANDBOX_MAX_RSS >> 20);
    case TRACE_SANDBOX_TOO_BIG:
        return trace_fail(AMPDIAG_TRACE_ESCHEMA, "'%s': the root attributes are larger than the "
                          "limits allow (%d attributes, names of %d bytes, strings of %d bytes)",
                          r->path, TRACE_MAX_ATTRS, TRACE_MAX_ATTR_NAME, TRACE_MAX_ATTR_STR);
    case TRACE_SANDBOX_NOMEM:
        return trace_fail(AMPDIAG_TRACE_ENOMEM, "cannot open '%s': no process or memory to check "
                          "it (%s)", r->path, strerror(errno));
    }
    return trace_fail(AMPDIAG_TRACE_ETRUNCATED, "cannot open '%s': HDF5 failed reading its "
                      "structure (a corrupt file)", r->path);
}

/* The child's stream into r (its attributes and repaired flag): 0, or the child's error. */
static int take_probe(ampdiag_trace_reader *r, const trace_buf *b)
{
    size_t pos = 0;
    int code = 0, rc = 0;
    char msg[2048] = "";
    while (pos < b->len && !rc)
        rc = take_record(r, b, &pos, &code, msg, sizeof msg);
    if (rc != 1 || pos != b->len) /* out of memory, or the stream was cut or malformed */
        return sandbox_error(r, TRACE_SANDBOX_FAILED);
    return code ? trace_fail(code, "%s", msg) : 0;
}

const ampdiag_trace_attr *ampdiag_trace_attr_find(const ampdiag_trace_reader *r, const char *name)
{
    if (!r || !name)
        return NULL;
    for (size_t i = 0; i < r->nattrs; i++)
        if (strcmp(r->attrs[i].name, name) == 0)
            return &r->attrs[i];
    return NULL;
}

size_t ampdiag_trace_nattrs(const ampdiag_trace_reader *r) { return r ? r->nattrs : 0; }

const ampdiag_trace_attr *ampdiag_trace_attr_at(const ampdiag_trace_reader *r, size_t i)
{
    return r && i < r->nattrs ? &r->attrs[i] : NULL;
}

const char *ampdiag_trace_attr_str(const ampdiag_trace_reader *r, const char *name)
{
    const ampdiag_trace_attr *a = ampdiag_trace_attr_find(r, name);
    return a && a->type == AMPDIAG_ATTR_STR ? a->s : NULL;
}

int64_t ampdiag_trace_attr_int(const ampdiag_trace_reader *r, const char *name, int64_t dflt)
{
    const ampdiag_trace_attr *a = ampdiag_trace_attr_find(r, name);
    return a && a->type == AMPDIAG_ATTR_INT ? a->i : dflt;
}

double ampdiag_trace_attr_double(const ampdiag_trace_reader *r, const char *name, double dflt)
{
    const ampdiag_trace_attr *a = ampdiag_trace_attr_find(r, name);
    return a && (a->type == AMPDIAG_ATTR_INT || a->type == AMPDIAG_ATTR_DOUBLE) ? a->d : dflt;
}

static int check_identity(ampdiag_trace_reader *r)
{
    const ampdiag_trace_attr *f = ampdiag_trace_attr_find(r, "format");
    if (!f)
        return trace_fail(AMPDIAG_TRACE_ENOTTRACE,
                          "'%s' is an HDF5 file but not an ampdiag trace (no root attribute "
                          "'format' = \"%s\")",
                          r->path, AMPDIAG_TRACE_FORMAT);
    if (f->type != AMPDIAG_ATTR_STR || strcmp(f->s, AMPDIAG_TRACE_FORMAT) != 0)
        return trace_fail(AMPDIAG_TRACE_ENOTTRACE,
                          "'%s' is an HDF5 file but not an ampdiag trace (its 'format' attribute is "
                          "%s%s%s, expected \"%s\")",
                          r->path, f->type == AMPDIAG_ATTR_STR ? "\"" : "",
                          f->type == AMPDIAG_ATTR_STR ? f->s : "not a string",
                          f->type == AMPDIAG_ATTR_STR ? "\"" : "", AMPDIAG_TRACE_FORMAT);
    const ampdiag_trace_attr *v = ampdiag_trace_attr_find(r, "format_version");
    if (!v)
        return trace_fail(AMPDIAG_TRACE_ESCHEMA, "trace '%s' has no 'format_version' attribute",
                          r->path);
    if (!(v->type == AMPDIAG_ATTR_INT || (v->type == AMPDIAG_ATTR_DOUBLE && v->d == floor(v->d) &&
                                          fabs(v->d) < 1e9)))
        return trace_fail(AMPDIAG_TRACE_ESCHEMA,
                          "trace '%s': attribute 'format_version' is not an integer", r->path);
    int64_t ver = v->type == AMPDIAG_ATTR_INT ? v->i : (int64_t)v->d;
    if (ver > AMPDIAG_TRACE_FORMAT_VERSION)
        return trace_fail(AMPDIAG_TRACE_EVERSION,
                          "trace '%s' has format_version %lld, newer than this ampdiag (%s) reads "
                          "(%d): upgrade ampdiag",
                          r->path, (long long)ver, ampdiag_version(), AMPDIAG_TRACE_FORMAT_VERSION);
    if (ver < 1)
        return trace_fail(AMPDIAG_TRACE_ESCHEMA, "trace '%s' has an invalid format_version %lld",
                          r->path, (long long)ver);
    r->version = (int)ver;
    const ampdiag_trace_attr *s = ampdiag_trace_attr_find(r, "status");
    if (!s || s->type != AMPDIAG_ATTR_STR)
        return trace_fail(AMPDIAG_TRACE_ESCHEMA, "trace '%s' has %s 'status' attribute", r->path,
                          s ? "a non-string" : "no");
    r->status_text = s->s;
    r->status = (ampdiag_trace_status)ampdiag_status_parse(s->s);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Tables
 * ------------------------------------------------------------------------------------------ */

static const char *class_name(H5T_class_t c)
{
    switch (c) {
    case H5T_INTEGER: return "an integer";
    case H5T_FLOAT: return "a float";
    case H5T_STRING: return "a string";
    case H5T_ENUM: return "an enum";
    case H5T_ARRAY: return "an array";
    case H5T_COMPOUND: return "a compound";
    default: return "of another type";
    }
}

static const char *expected_name(trace_ftype t)
{
    switch (t) {
    case FT_I64: case FT_I32: case FT_BOOL: case FT_U64: return "an integer";
    case FT_F32: case FT_F64: return "a float";
    case FT_STR: return "a fixed-length string";
    case FT_KIND: return "the tensor_kind enum (or an integer)";
    case FT_CODE: return "the event_code enum (or an integer)";
    case FT_SCALING: return "the whatif_scaling enum (or an integer)";
    case FT_REASON: return "the record_reason enum (or an integer)";
    case FT_HIST: return "an integer array of 281 bins";
    case FT_QSCHEME: return "the quant_scheme enum (or an integer)";
    case FT_QRULE: return "the quant_rule enum (or an integer)";
    case FT_QDIR: return "the quant_direction enum (or an integer)";
    case FT_QHIST: return "an integer array of 32 bins";
    }
    return "?";
}

/*
 * Memory enum for an enum column: this version's names with their values, plus any name the
 * file's enum has that this version does not know (a later writer's) mapped to -1, -2, ...:
 * HDF5 refuses to convert an enum whose names the destination lacks. Rows with such a value
 * read as -1 (see trace_rows_fix).
 */
static hid_t enum_mtype(trace_ftype t, hid_t ft)
{
    hid_t m = trace_field_type(t, 0, 0);
    int n = H5Tget_nmembers(ft);
    if (m < 0 || n < 0)
        goto fail;
    int32_t next = -1;
    for (int i = 0; i < n; i++) {
        char *name = H5Tget_member_name(ft, (unsigned)i);
        if (!name)
            goto fail;
        int known = trace_enum_parse(t, name);
        herr_t rc = 0;
        if (known < 0) {
            int32_t v = next--;
            rc = H5Tenum_insert(m, name, &v);
        }
        H5free_memory(name);
        if (rc < 0)
            goto fail;
    }
    return m;
fail:
    if (m >= 0)
        H5Tclose(m);
    return -1;
}

/* Memory type of one field for this file's member type; -1 with *bad = 1 if mistyped. */
static hid_t member_mtype(const trace_field *f, hid_t ft, int *bad)
{
    H5T_class_t c = H5Tget_class(ft);
    *bad = 0;
    switch (f->type) {
    case FT_I64: case FT_I32: case FT_BOOL: case FT_U64:
        if (c != H5T_INTEGER)
            break;
        return trace_field_type(f->type, f->size, 0);
    case FT_F32: case FT_F64:
        if (c != H5T_FLOAT && c != H5T_INTEGER)
            break;
        return trace_field_type(f->type, f->size, 0);
    case FT_STR: {
        if (c != H5T_STRING || H5Tis_variable_str(ft) > 0)
            break;
        /* HDF5 converts between string sizes and paddings, not character sets */
        hid_t m = trace_field_type(f->type, f->size, 0);
        H5T_cset_t cs = H5Tget_cset(ft);
        if (m >= 0 && cs >= 0 && H5Tset_cset(m, cs) < 0) {
            H5Tclose(m);
            m = -1;
        }
        return m;
    }
    case FT_KIND: case FT_CODE: case FT_SCALING: case FT_QSCHEME: case FT_QRULE: case FT_QDIR: case FT_REASON:
        if (c == H5T_INTEGER)
            return H5Tcopy(H5T_NATIVE_INT32);
        if (c != H5T_ENUM)
            break;
        return enum_mtype(f->type, ft);
    case FT_HIST: case FT_QHIST: {
        if (c != H5T_ARRAY || H5Tget_array_ndims(ft) != 1)
            break;
        hsize_t dim = 0;
        H5Tget_array_dims2(ft, &dim);
        hid_t base = H5Tget_super(ft);
        H5T_class_t bc = base >= 0 ? H5Tget_class(base) : H5T_NO_CLASS;
        if (base >= 0)
            H5Tclose(base);
        if (dim != trace_ftype_array_len(f->type) || bc != H5T_INTEGER)
            break;
        return trace_field_type(f->type, f->size, 0);
    }
    }
    *bad = 1;
    return -1;
}

/* Every field of the file's record must lie inside the record: HDF5 converts the fields at the
 * offsets the file gives, without checking them against the record's size. */
static int check_record(ampdiag_trace_reader *r, int t, hid_t ftype)
{
    size_t rs = H5Tget_size(ftype);
    int n = H5Tget_nmembers(ftype);
    for (int i = 0; i < n; i++) {
        size_t off = H5Tget_member_offset(ftype, (unsigned)i);
        hid_t mt = H5Tget_member_type(ftype, (unsigned)i);
        size_t ms = mt >= 0 ? H5Tget_size(mt) : 0;
        if (mt >= 0)
            H5Tclose(mt);
        if (ms == 0 || off > rs || ms > rs - off) {
            char *name = H5Tget_member_name(ftype, (unsigned)i);
            int rc = trace_fail(AMPDIAG_TRACE_ESCHEMA, "trace '%s': field '%.64s' of %s lies outside "
                                "its record (offset %zu, %zu bytes, record of %zu bytes)", r->path,
                                name ? name : "?", trace_tables[t].path, off, ms, rs);
            H5free_memory(name);
            return rc;
        }
    }
    return n < 0 || rs == 0 ? trace_fail(AMPDIAG_TRACE_ESCHEMA, "trace '%s': the record type of %s "
                                         "cannot be read", r->path, trace_tables[t].path)
                            : 0;
}

static int build_mtype(ampdiag_trace_reader *r, int t, hid_t ftype)
{
    const trace_table *tb = &trace_tables[t];
    hid_t m = H5Tcreate(H5T_COMPOUND, tb->rec_size);
    if (m < 0)
        return trace_fail(AMPDIAG_TRACE_ENOMEM, "HDF5 type creation failed reading '%s'", r->path);
    for (size_t i = 0; i < tb->nfields; i++) {
        const trace_field *f = &tb->fields[i];
        int idx = H5Tget_member_index(ftype, f->name);
        if (idx < 0 && f->optional && i < 64) {
            r->absent[t] |= UINT64_C(1) << i; /* read as 0 (trace_rows_fix) */
            continue;
        }
        if (idx < 0) {
            H5Tclose(m);
            return trace_fail(AMPDIAG_TRACE_ESCHEMA, "trace '%s': dataset %s has no field '%s'",
                              r->path, tb->path, f->name);
        }
        hid_t ft = H5Tget_member_type(ftype, (unsigned)idx);
        int bad = 0;
        hid_t mt = ft >= 0 ? member_mtype(f, ft, &bad) : -1;
        H5T_class_t c = ft >= 0 ? H5Tget_class(ft) : H5T_NO_CLASS;
        if (ft >= 0)
            H5Tclose(ft);
        if (mt < 0 || H5Tinsert(m, f->name, f->offset, mt) < 0) {
            if (mt >= 0)
                H5Tclose(mt);
            H5Tclose(m);
            if (bad)
                return trace_fail(AMPDIAG_TRACE_ESCHEMA,
                                  "trace '%s': field '%s' of %s is %s%s, expected %s", r->path,
                                  f->name, tb->path, class_name(c),
                                  c == H5T_STRING ? " of variable length" : "",
                                  expected_name(f->type));
            return trace_fail(AMPDIAG_TRACE_ESCHEMA, "trace '%s': cannot map field '%s' of %s",
                              r->path, f->name, tb->path);
        }
        H5Tclose(mt);
    }
    r->mtype[t] = m;
    return 0;
}

/*
 * Limits on what a table may claim (traces/FORMAT.md, "Limits"): at most
 * AMPDIAG_TRACE_MAX_ROWS rows, and rows times the stored record size at most
 * TRACE_MAX_EXPANSION times the file size (compressed chunks can hold more than their size, but
 * not arbitrarily more): a small file cannot make the reader loop or allocate without bound.
 */
#define TRACE_MAX_ROWS (UINT64_C(1) << 32)
#define TRACE_MAX_EXPANSION 1000

static int check_extent(ampdiag_trace_reader *r, int t, hsize_t dim)
{
    const trace_table *tb = &trace_tables[t];
    if ((uint64_t)dim > TRACE_MAX_ROWS)
        return trace_fail(AMPDIAG_TRACE_ESCHEMA,
                          "trace '%s': %s claims %llu rows, more than the limit of 2^32 rows",
                          r->path, tb->path, (unsigned long long)dim);
    hid_t ft = H5Dget_type(r->dset[t]);
    size_t rs = ft >= 0 ? H5Tget_size(ft) : 0;
    if (ft >= 0)
        H5Tclose(ft);
    if (rs == 0)
        rs = 1;
    long double need = (long double)dim * (long double)rs;
    long double cap = (long double)(r->file_size > 0 ? r->file_size : 0) * TRACE_MAX_EXPANSION;
    if (need > cap)
        return trace_fail(AMPDIAG_TRACE_ESCHEMA,
                          "trace '%s': %s claims %llu rows of %zu bytes, more than %d times the "
                          "file's size (%lld bytes) can hold: refused",
                          r->path, tb->path, (unsigned long long)dim, rs, TRACE_MAX_EXPANSION,
                          (long long)r->file_size);
    return 0;
}

/* Before HDF5 reads rows [first, first + count) of table t (of rows rows): none of their
 * stored chunks inflates beyond its size (h5safe_check_chunks). 0 or AMPDIAG_TRACE_ETRUNCATED
 * after a message. */
static int check_chunks(ampdiag_trace_reader *r, int t, size_t first, size_t count, size_t rows)
{
    char why[160];
    if (h5safe_check_chunks(r->dset[t], first, count, rows, why, sizeof why) == 0)
        return 0;
    return trace_fail(AMPDIAG_TRACE_ETRUNCATED, "trace '%s': %s %s (a deflate bomb, or a corrupt "
                      "file): refused", r->path, trace_tables[t].path, why);
}

/* Number of rows of table t, without trailing fill rows (key -1). */
static int count_rows(ampdiag_trace_reader *r, int t)
{
    const trace_table *tb = &trace_tables[t];
    hid_t sp = H5Dget_space(r->dset[t]);
    hsize_t dim = 0;
    int rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    if (rank == 1)
        H5Sget_simple_extent_dims(sp, &dim, NULL);
    if (sp >= 0)
        H5Sclose(sp);
    if (rank != 1)
        return trace_fail(AMPDIAG_TRACE_ESCHEMA, "trace '%s': dataset %s is not one-dimensional",
                          r->path, tb->path);
    int lrc = check_extent(r, t, dim);
    if (lrc)
        return lrc;
    const char *key = tb->fields[0].name; /* "step" or "index" */
    size_t ksize = tb->key_is_i32 ? sizeof(int32_t) : sizeof(int64_t);
    hid_t kt = H5Tcreate(H5T_COMPOUND, ksize);
    if (kt < 0 || H5Tinsert(kt, key, 0, tb->key_is_i32 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT64) < 0) {
        if (kt >= 0)
            H5Tclose(kt);
        return trace_fail(AMPDIAG_TRACE_ENOMEM, "HDF5 type creation failed reading '%s'", r->path);
    }
    int rc = 0;
    enum { WINDOW = 1024 };
    unsigned char buf[WINDOW * sizeof(int64_t)];
    while (dim > 0) {
        hsize_t n = dim < WINDOW ? dim : WINDOW, start = dim - n;
        if ((rc = check_chunks(r, t, (size_t)start, (size_t)n, (size_t)dim)))
            break;
        hid_t fs = H5Dget_space(r->dset[t]), ms = H5Screate_simple(1, &n, NULL);
        int ok = fs >= 0 && ms >= 0 &&
                 H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &n, NULL) >= 0 &&
                 H5Dread(r->dset[t], kt, ms, fs, H5P_DEFAULT, buf) >= 0;
        trace_h5_io_end(ok, ms, fs);
        if (!ok) {
            trace_h5err e;
            trace_h5err_take(&e);
            rc = trace_fail(AMPDIAG_TRACE_ETRUNCATED, "trace '%s': cannot read %s (truncated or "
                            "corrupt file?): %s", r->path, tb->path, e.detail);
            break;
        }
        hsize_t keep = n;
        while (keep > 0) {
            int64_t k;
            if (tb->key_is_i32) {
                int32_t k32;
                memcpy(&k32, buf + (keep - 1) * ksize, sizeof k32);
                k = k32;
            } else {
                memcpy(&k, buf + (keep - 1) * ksize, sizeof k);
            }
            if (k != -1)
                break;
            keep--;
        }
        dim = start + keep;
        if (keep > 0)
            break;
    }
    H5Tclose(kt);
    if (!rc)
        r->rows[t] = (size_t)dim;
    return rc;
}

static int open_tables(ampdiag_trace_reader *r)
{
    for (int t = 0; t < TBL_N; t++) {
        const trace_table *tb = &trace_tables[t];
        /* a hard link in this file, stored in this file: no external or soft link (whose
         * target could lead out of the file), no external raw storage, no virtual dataset,
         * storage that fits the file */
        char why[96];
        hid_t d = h5safe_open_dataset(r->file, tb->path + 1, r->lapl, why, sizeof why);
        if (d == H5SAFE_MISSING && (tb->since == 0 || r->version < tb->since))
            continue; /* a table of a later version, or an optional one: read as empty */
        if (d == H5SAFE_MISSING)
            return trace_fail(AMPDIAG_TRACE_ESCHEMA, "trace '%s' has no dataset %s%s", r->path,
                              tb->path, tb->since > 1 ? " (required since format_version 2)" : "");
        if (d == H5SAFE_REFUSED)
            return trace_fail(AMPDIAG_TRACE_ESCHEMA, "trace '%s': %s %s (refused: a trace's "
                              "tables must be datasets stored in the file itself)", r->path,
                              tb->path, why);
        if (d < 0) {
            trace_h5err e;
            trace_h5err_take(&e);
            return trace_fail(AMPDIAG_TRACE_ETRUNCATED, "trace '%s': cannot open %s: %s", r->path,
                              tb->path, e.detail);
        }
        r->dset[t] = d;
        hid_t ft = H5Dget_type(r->dset[t]);
        if (ft < 0)
            return trace_fail(AMPDIAG_TRACE_ETRUNCATED, "trace '%s': cannot read the type of %s",
                              r->path, tb->path);
        int rc = 0;
        if (H5Tget_class(ft) != H5T_COMPOUND)
            rc = trace_fail(AMPDIAG_TRACE_ESCHEMA,
                            "trace '%s': dataset %s is not a table (expected a compound type)",
                            r->path, tb->path);
        else if (!(rc = check_record(r, t, ft)))
            rc = build_mtype(r, t, ft);
        if (!rc && !r->swmr)
            r->chunks[t] = trace_chunks_plan(r->dset[t], ft, tb, r->absent[t]);
        H5Tclose(ft);
        if (rc || (rc = count_rows(r, t)))
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Public: open, close, queries
 * ------------------------------------------------------------------------------------------ */

static void reader_free(ampdiag_trace_reader *r)
{
    for (int t = 0; t < TBL_N; t++) {
        trace_chunks_free(r->chunks[t]);
        if (r->dset[t] >= 0)
            H5Dclose(r->dset[t]);
        if (r->mtype[t] >= 0)
            H5Tclose(r->mtype[t]);
    }
    if (r->file >= 0)
        H5Fclose(r->file);
    if (r->lapl >= 0)
        H5Pclose(r->lapl);
    for (size_t i = 0; i < r->nattrs; i++) {
        free((char *)r->attrs[i].name);
        free((char *)r->attrs[i].s);
    }
    free(r->attrs);
    free(r->path);
    free(r);
}

static ampdiag_trace_reader *reader_new(const char *path, off_t size)
{
    ampdiag_trace_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return NULL;
    }
    r->file = -1;
    r->file_size = size;
    for (int t = 0; t < TBL_N; t++)
        r->dset[t] = r->mtype[t] = -1;
    r->lapl = h5safe_lapl(); /* external links are never traversed */
    if (r->lapl < 0) {
        reader_free(r);
        return NULL;
    }
    return r;
}

/* Read the whole chunk index of each chunked table (H5Dget_num_chunks walks it). */
static int walk_chunks(ampdiag_trace_reader *r)
{
    for (int t = 0; t < TBL_N; t++) {
        hid_t dcpl = H5Dget_create_plist(r->dset[t]);
        H5D_layout_t lay = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
        if (dcpl >= 0)
            H5Pclose(dcpl);
        hsize_t n = 0;
        hid_t sp = lay == H5D_CHUNKED ? H5Dget_space(r->dset[t]) : -1;
        herr_t hr = sp >= 0 ? H5Dget_num_chunks(r->dset[t], sp, &n) : 0;
        if (sp >= 0)
            H5Sclose(sp);
        if (lay == H5D_CHUNKED && (sp < 0 || hr < 0)) {
            trace_h5err e;
            trace_h5err_take(&e);
            return trace_fail(AMPDIAG_TRACE_ETRUNCATED, "trace '%s': cannot read the chunk index "
                              "of %s: %s", r->path, trace_tables[t].path, e.detail);
        }
    }
    return 0;
}

struct probe {
    const char *path;
    unsigned flags;
    off_t size;
};

/*
 * The probe, in a child process (trace_sandbox.c): the whole open as the parent will do it
 * (clearing a stale open-for-write mark when allowed), the root attributes read, the chunk
 * indexes walked, and the attributes and outcome streamed back. HDF5 parses every piece of the
 * file's structure the parent will ask for here first; what crashes, hangs or runs away with
 * memory does so in the child.
 */
static int probe_child(void *arg, trace_buf *out)
{
    const struct probe *p = arg;
    ampdiag_trace_reader *r = reader_new(p->path, p->size);
    if (!r)
        return -1;
    trace_quiet q;
    trace_quiet_begin(&q);
    int rc = open_file(r, p->flags | AMPDIAG_TRACE_READ_QUIET);
    if (!rc)
        rc = load_attrs_h5(r);
    if (!rc)
        rc = check_identity(r);
    if (!rc)
        rc = open_tables(r);
    if (!rc)
        rc = walk_chunks(r);
    put_outcome(out, r, rc);
    return 0; /* the child exits: nothing to free */
}

void trace_note_repaired(const char *path)
{
    fprintf(stderr,
            "ampdiag: note: '%s' was still marked as open for writing (its writer died before "
            "its first flush); cleared the mark as 'h5clear -s' does\n",
            path);
}

/* Open r's file after the probe passed: the attributes come from the probe, the rest is done
 * again here (the same HDF5 calls, which the child survived). */
static int open_checked(ampdiag_trace_reader *r, unsigned flags)
{
    trace_buf b;
    struct probe pr = {r->path, flags, r->file_size};
    int why = trace_sandbox_run(probe_child, &pr, TRACE_ATTR_STREAM_MAX, TRACE_PROBE_MS, &b);
    int rc = why ? sandbox_error(r, why) : take_probe(r, &b);
    free(b.data);
    if (rc)
        return rc;
    if (r->repaired && !(flags & AMPDIAG_TRACE_READ_QUIET))
        trace_note_repaired(r->path);
    int repaired = r->repaired;
    rc = open_file(r, flags | AMPDIAG_TRACE_READ_NO_REPAIR); /* the child cleared the mark */
    r->repaired = repaired;
    if (!rc)
        rc = check_identity(r);
    if (!rc)
        rc = open_tables(r);
    return rc;
}

int ampdiag_trace_open(const char *path, unsigned flags, ampdiag_trace_reader **out)
{
    if (!out)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_open: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_open: empty file name");
    struct stat st;
    char lm[400];
    if (path_too_long(path, lm, sizeof lm))
        return trace_fail(AMPDIAG_TRACE_EINVAL, "%s", lm);
    if (stat(path, &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return trace_fail(AMPDIAG_TRACE_ENOENT, "'%s': no such file", path);
        return trace_fail(AMPDIAG_TRACE_EIO, "cannot open '%s': %s", path, strerror(errno));
    }
    if (S_ISDIR(st.st_mode))
        return trace_fail(AMPDIAG_TRACE_ENOENT, "'%s' is a directory, not a trace file", path);
    if (!S_ISREG(st.st_mode))
        return trace_fail(AMPDIAG_TRACE_ENOENT, "'%s' is not a regular file", path);
    if (access(path, R_OK) != 0)
        return trace_fail(AMPDIAG_TRACE_EIO, "cannot read '%s': %s", path, strerror(errno));
    if (st.st_size == 0)
        return trace_fail(AMPDIAG_TRACE_ENOTHDF5, "'%s' is empty, not an HDF5 file", path);

    trace_quiet q;
    trace_quiet_begin(&q);
    ampdiag_trace_reader *r = reader_new(path, st.st_size);
    int rc = r ? open_checked(r, flags)
               : trace_fail(AMPDIAG_TRACE_ENOMEM, "out of memory opening '%s'", path);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ampdiag_trace_errmsg());
        if (r)
            reader_free(r);
        trace_quiet_end(&q);
        return trace_fail(rc, "%s", msg);
    }
    trace_quiet_end(&q);
    *out = r;
    return 0;
}

void ampdiag_trace_reader_close(ampdiag_trace_reader *r)
{
    if (!r)
        return;
    trace_quiet q;
    trace_quiet_begin(&q);
    reader_free(r);
    trace_quiet_end(&q);
}

int ampdiag_trace_refresh(ampdiag_trace_reader *r)
{
    if (!r)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_refresh: NULL reader");
    if (!r->swmr)
        return 0;
    trace_quiet q;
    trace_quiet_begin(&q);
    int rc = 0;
    for (int t = 0; t < TBL_N && !rc; t++) {
        if (r->dset[t] < 0)
            continue; /* absent from an older trace */
        if (H5Drefresh(r->dset[t]) < 0) {
            trace_h5err e;
            trace_h5err_take(&e);
            rc = trace_fail(AMPDIAG_TRACE_EIO, "cannot refresh %s of '%s': %s",
                            trace_tables[t].path, r->path, e.detail);
        } else {
            rc = count_rows(r, t);
        }
    }
    trace_quiet_end(&q);
    return rc;
}

const char *ampdiag_trace_path(const ampdiag_trace_reader *r) { return r ? r->path : NULL; }
int ampdiag_trace_format_version(const ampdiag_trace_reader *r) { return r ? r->version : 0; }
ampdiag_trace_status ampdiag_trace_status_of(const ampdiag_trace_reader *r)
{
    return r ? r->status : AMPDIAG_STATUS_UNKNOWN;
}
const char *ampdiag_trace_status_text(const ampdiag_trace_reader *r) { return r ? r->status_text : NULL; }
int ampdiag_trace_cut_off(const ampdiag_trace_reader *r)
{
    return r && r->status == AMPDIAG_STATUS_RUNNING;
}
int ampdiag_trace_was_repaired(const ampdiag_trace_reader *r) { return r ? r->repaired : 0; }

int ampdiag_trace_has_field(const ampdiag_trace_reader *r, const char *table, const char *field)
{
    if (!r || !table || !field)
        return 0;
    int t = 0;
    while (t < TBL_N && strcmp(trace_tables[t].path, table) != 0 &&
           strcmp(trace_tables[t].path + 1, table) != 0)
        t++;
    if (t == TBL_N || r->dset[t] < 0)
        return 0;
    trace_quiet q;
    trace_quiet_begin(&q);
    hid_t ft = H5Dget_type(r->dset[t]);
    int has = ft >= 0 && H5Tget_member_index(ft, field) >= 0;
    if (ft >= 0)
        H5Tclose(ft);
    trace_quiet_end(&q);
    return has;
}

void ampdiag_trace_get_counts(const ampdiag_trace_reader *r, ampdiag_trace_counts *c)
{
    memset(c, 0, sizeof *c);
    if (!r)
        return;
    c->layers = r->rows[TBL_LAYERS];
    c->steps = r->rows[TBL_STEPS];
    c->tensors = r->rows[TBL_TENSORS];
    c->hists = r->rows[TBL_HISTS];
    c->events = r->rows[TBL_EVENTS];
    c->evals = r->rows[TBL_EVALS];
    c->formats = r->rows[TBL_FORMATS];
    c->whatifs = r->rows[TBL_WHATIF];
    c->quants = r->rows[TBL_QUANT];
    c->eval_examples = r->rows[TBL_EVAL_EXAMPLES];
}

/* ------------------------------------------------------------------------------------------
 * Reading tables
 * ------------------------------------------------------------------------------------------ */

/* The first row whose step lies outside [-2^53, 2^53] (traces/FORMAT.md, "Limits"), named. */
static int check_steps(const ampdiag_trace_reader *r, int t, const void *rows, size_t first,
                       size_t n)
{
    const trace_table *tb = &trace_tables[t];
    for (size_t i = 0; i < n; i++) {
        int64_t k;
        memcpy(&k, (const char *)rows + i * tb->rec_size + tb->key_offset, sizeof k);
        if (k > AMPDIAG_TRACE_MAX_STEP || k < -AMPDIAG_TRACE_MAX_STEP)
            return trace_fail(AMPDIAG_TRACE_ESCHEMA,
                              "trace '%s': %s row %zu has step %lld, outside the limit of "
                              "+-2^53",
                              r->path, tb->path, first + i, (long long)k);
    }
    return 0;
}

/* Rows [first, first + count) of table t into buf, fixed up (trace_rows_fix): from the stored
 * chunks where that works, else through HDF5 (which converts) once no chunk they touch inflates
 * beyond its size. 1 when read, 0 when HDF5 failed, -1 when refused (the message set); *bad_step
 * is set when a step lies outside the limit. */
static int read_rows(ampdiag_trace_reader *r, int t, size_t first, size_t count, void *buf,
                     int *bad_step)
{
    const trace_table *tb = &trace_tables[t];
    if (r->chunks[t] && trace_chunks_read(r->chunks[t], r->dset[t], first, count, buf, bad_step) == 0)
        return 1;
    if (r->chunks[t])
        H5Eclear2(H5E_DEFAULT);
    if (check_chunks(r, t, first, count, r->rows[t]))
        return -1; /* refused: the message is set */
    hsize_t start = first, cnt = count;
    hid_t fs = H5Dget_space(r->dset[t]), ms = H5Screate_simple(1, &cnt, NULL);
    int ok = fs >= 0 && ms >= 0 &&
             H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &cnt, NULL) >= 0 &&
             H5Dread(r->dset[t], r->mtype[t], ms, fs, H5P_DEFAULT, buf) >= 0;
    trace_h5_io_end(ok, ms, fs);
    if (ok) {
        trace_rows_fix(tb, r->absent[t], buf, count);
        trace_events_fix(tb, r->absent[t], buf, count);
        *bad_step = trace_rows_bad_step(tb, buf, count);
    }
    return ok;
}

/* A table read in order is read on: the next rows of the same number (or those left) start
 * decoding now (trace_chunks_prefetch). */
static void prefetch_next(ampdiag_trace_reader *r, int t, size_t next, size_t count)
{
    size_t left = r->rows[t] - next;
    trace_chunks_prefetch(r->chunks[t], r->dset[t], next, left < count ? left : count);
    H5Eclear2(H5E_DEFAULT);
}

static int read_table(ampdiag_trace_reader *r, int t, size_t first, size_t max, void **out,
                      size_t *n)
{
    const trace_table *tb = &trace_tables[t];
    *out = NULL;
    if (n)
        *n = 0;
    if (!r || !n)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "reading %s: NULL argument", tb->path);
    size_t rows = r->rows[t];
    if (first > rows)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "reading %s of '%s': row %zu is past the end (%zu rows)",
                          tb->path, r->path, first, rows);
    size_t count = rows - first < max ? rows - first : max;
    if (count == 0)
        return 0;
    if (count > SIZE_MAX / tb->rec_size)
        return trace_fail(AMPDIAG_TRACE_ENOMEM, "reading %s of '%s': too many rows", tb->path, r->path);
    int bad_step = 0;
    void *buf = trace_chunks_take(r->chunks[t], first, count, &bad_step);
    int ok = buf != NULL;
    if (!buf && !(buf = malloc(count * tb->rec_size)))
        return trace_fail(AMPDIAG_TRACE_ENOMEM, "out of memory reading %zu rows of %s from '%s'",
                          count, tb->path, r->path);
    trace_quiet q;
    trace_quiet_begin(&q);
    if (!ok)
        ok = read_rows(r, t, first, count, buf, &bad_step);
    if (ok > 0 && r->chunks[t] && first + count < rows)
        prefetch_next(r, t, first + count, count);
    int rc = 0;
    if (ok < 0) {
        rc = AMPDIAG_TRACE_ETRUNCATED; /* refused by read_rows, which said why */
        free(buf);
        buf = NULL;
    } else if (!ok) {
        trace_h5err e;
        trace_h5err_take(&e);
        if (e.os_errno && e.os_errno != ENOENT)
            rc = trace_fail(AMPDIAG_TRACE_EIO, "cannot read %s of '%s': %s", tb->path, r->path,
                            e.detail);
        else
            rc = trace_fail(AMPDIAG_TRACE_ETRUNCATED,
                            "cannot read %s of '%s' (truncated or corrupt file?): %s", tb->path,
                            r->path, e.detail);
        free(buf);
        buf = NULL;
    }
    trace_quiet_end(&q);
    if (rc)
        return rc;
    if (bad_step && (rc = check_steps(r, t, buf, first, count))) {
        free(buf);
        return rc;
    }
    *out = buf;
    *n = count;
    return 0;
}

/* The typed readers: read_table fills a void pointer, assigned to the typed one here. */
#define READ_WRAPPER(T, t, first, max)                                                         \
    {                                                                                          \
        void *p = NULL;                                                                        \
        if (!out)                                                                              \
            return trace_fail(AMPDIAG_TRACE_EINVAL, "reading %s: NULL argument",               \
                              trace_tables[t].path);                                           \
        int rc = read_table(r, t, first, max, &p, n);                                          \
        *out = (T *)p;                                                                         \
        return rc;                                                                             \
    }

int ampdiag_trace_read_layers(ampdiag_trace_reader *r, ampdiag_trace_layer **out, size_t *n)
READ_WRAPPER(ampdiag_trace_layer, TBL_LAYERS, 0, SIZE_MAX)

int ampdiag_trace_read_steps(ampdiag_trace_reader *r, ampdiag_trace_step **out, size_t *n)
READ_WRAPPER(ampdiag_trace_step, TBL_STEPS, 0, SIZE_MAX)

int ampdiag_trace_read_events(ampdiag_trace_reader *r, ampdiag_trace_event **out, size_t *n)
READ_WRAPPER(ampdiag_trace_event, TBL_EVENTS, 0, SIZE_MAX)

int ampdiag_trace_read_evals(ampdiag_trace_reader *r, ampdiag_trace_eval **out, size_t *n)
READ_WRAPPER(ampdiag_trace_eval, TBL_EVALS, 0, SIZE_MAX)

int ampdiag_trace_read_tensors(ampdiag_trace_reader *r, size_t first, size_t max,
                               ampdiag_trace_tensor **out, size_t *n)
READ_WRAPPER(ampdiag_trace_tensor, TBL_TENSORS, first, max)

int ampdiag_trace_read_hists(ampdiag_trace_reader *r, size_t first, size_t max,
                             ampdiag_trace_hist **out, size_t *n)
READ_WRAPPER(ampdiag_trace_hist, TBL_HISTS, first, max)

int ampdiag_trace_read_steps_range(ampdiag_trace_reader *r, size_t first, size_t max,
                                   ampdiag_trace_step **out, size_t *n)
READ_WRAPPER(ampdiag_trace_step, TBL_STEPS, first, max)

int ampdiag_trace_read_formats(ampdiag_trace_reader *r, ampdiag_trace_format **out, size_t *n)
READ_WRAPPER(ampdiag_trace_format, TBL_FORMATS, 0, SIZE_MAX)

int ampdiag_trace_read_whatif(ampdiag_trace_reader *r, size_t first, size_t max,
                              ampdiag_trace_whatif **out, size_t *n)
READ_WRAPPER(ampdiag_trace_whatif, TBL_WHATIF, first, max)

int ampdiag_trace_read_quant(ampdiag_trace_reader *r, size_t first, size_t max, ampdiag_trace_quant **out,
                             size_t *n)
READ_WRAPPER(ampdiag_trace_quant, TBL_QUANT, first, max)

int ampdiag_trace_read_eval_examples(ampdiag_trace_reader *r, size_t first, size_t max,
                                     ampdiag_trace_eval_example **out, size_t *n)
READ_WRAPPER(ampdiag_trace_eval_example, TBL_EVAL_EXAMPLES, first, max)

int ampdiag_trace_read_traced(ampdiag_trace_reader *r, ampdiag_trace_traced **out, size_t *n)
READ_WRAPPER(ampdiag_trace_traced, TBL_TRACED, 0, SIZE_MAX)

int ampdiag_trace_has_traced(const ampdiag_trace_reader *r) { return r && r->dset[TBL_TRACED] >= 0; }
