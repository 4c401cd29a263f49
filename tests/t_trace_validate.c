/*
 * t_trace_validate.c - every way a file can fail to be a trace gets its own error class and a
 * message naming the file, and never a crash: missing file, directory, empty file, text,
 * garbage, HDF5 without the attributes, another format, a newer format_version, missing or
 * mistyped attributes, datasets and fields, truncated copies of a trace.
 *
 * It also writes "foreign" traces with the plain HDF5 API the way another program would from
 * traces/FORMAT.md alone (h5py-like: default file format, variable-length string attributes,
 * NUL-padded strings, other field order, an extra field, integer kind/code columns, an enum
 * name this version does not know) and checks that they read with the right values.
 * (This test includes hdf5.h to build those files; libampdiag keeps it to src/trace/.)
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "tap.h"
#include "trace_synth.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdlib.h>
#include <zlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[4096];

static const char *tpath(const char *name)
{
    static char buf[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_file(const char *name, const void *data, size_t n)
{
    FILE *f = fopen(tpath(name), "wb");
    if (f) {
        if (n)
            fwrite(data, 1, n, f);
        fclose(f);
    }
}

/* Open name, expect error class want; the message must name the file. */
static void expect_open(const char *name, int want, const char *what)
{
    ampdiag_trace_reader *r = NULL;
    int rc = ampdiag_trace_open(tpath(name), AMPDIAG_TRACE_READ_QUIET | AMPDIAG_TRACE_READ_NO_REPAIR, &r);
    ok(rc == want && r == NULL && strstr(ampdiag_trace_errmsg(), name) != NULL,
       "%s -> %s (got %s): %s", what, ampdiag_trace_strerror(want), ampdiag_trace_strerror(rc),
       ampdiag_trace_errmsg());
    ampdiag_trace_reader_close(r);
}

/* ------------------------------------------------------------------------------------------
 * Foreign traces built column by column
 * ------------------------------------------------------------------------------------------ */

enum ctype { C_I64, C_I32, C_U8, C_U64, C_F32, C_F64, C_STR, C_KIND, C_CODE, C_BINS, C_VSTR };

struct col {
    const char *name;
    enum ctype t;
    size_t size; /* C_STR */
};

struct foreign {
    const char *omit_dataset;
    const char *omit_table, *omit_field;
    const char *mistype_table, *mistype_field; /* written as float64 (strings: variable length) */
    int version;            /* 0: no format_version attribute */
    const char *format;     /* NULL: no format attribute */
    const char *status;     /* NULL: no status attribute */
    int int_kinds;          /* kind / code as plain integers */
    int unknown_enum;       /* the kind enum has a name "doom" = 9, used in row 1 */
    int bins;               /* number of histogram bins */
    int eval_not_table;     /* /eval is a float64 vector */
    int steps_2d;           /* /steps is two-dimensional */
    int reverse;            /* fields in reverse order, plus an extra field */
    int lost_if;            /* /tensors also has the optional fields: 1 both lost_if_fp16 and
                               lost_if_bf16, 2 lost_if_bf16 only (0: neither, as older writers) */
    int chunked;            /* tables chunked, shuffled and deflated (read from their stored
                               chunks, not through HDF5's conversion) */
    int rows;               /* rows per table (0: 2), all in one chunk */
    int narrow;             /* /tensors' float64 fields (mean, rms) stored as float32 */
    int nullterm;           /* strings NUL-terminated UTF-8, as ampdiag's writer stores them
                               (then HDF5 copies them without converting) ... */
    int full_strings;       /* ... and every string of row 1 fills its width, with no NUL */
    int deflate2;           /* chunked tables deflated twice: a pipeline the chunk reader does
                               not take, so HDF5 reads them */
};

static const struct col layer_cols[] = {
    {"index", C_I32, 0}, {"name", C_STR, 64}, {"op", C_STR, 32}, {"shape", C_STR, 64}, {"params", C_U64, 0}};
static const struct col step_cols[] = {
    {"step", C_I64, 0}, {"loss", C_F64, 0}, {"loss_scale", C_F64, 0}, {"grad_norm", C_F64, 0},
    {"clip_coef", C_F64, 0}, {"skipped", C_U8, 0}, {"skip_reason", C_STR, 96}, {"lr", C_F64, 0},
    {"update_ratio", C_F64, 0}, {"nonfinite_grads", C_U64, 0}, {"wall_ms", C_F64, 0}};
static const struct col tensor_cols[] = {
    {"step", C_I64, 0}, {"layer", C_I32, 0}, {"kind", C_KIND, 0}, {"count", C_U64, 0},
    {"n_nan", C_U64, 0}, {"n_posinf", C_U64, 0}, {"n_neginf", C_U64, 0}, {"n_zero", C_U64, 0},
    {"n_neg", C_U64, 0}, {"n_pos", C_U64, 0}, {"min", C_F32, 0}, {"max", C_F32, 0},
    {"absmax", C_F32, 0}, {"absmin_nz", C_F32, 0}, {"mean", C_F64, 0}, {"rms", C_F64, 0},
    {"fp16_overflow", C_U64, 0}, {"fp16_underflow", C_U64, 0}, {"fp16_subnormal", C_U64, 0},
    {"bf16_overflow", C_U64, 0}, {"bf16_underflow", C_U64, 0}, {"bf16_subnormal", C_U64, 0},
    {"lost_updates", C_U64, 0}};
static const struct col hist_cols[] = {
    {"step", C_I64, 0}, {"layer", C_I32, 0}, {"kind", C_KIND, 0}, {"bins", C_BINS, 0}};
static const struct col event_cols[] = {
    {"step", C_I64, 0}, {"layer", C_I32, 0}, {"code", C_CODE, 0}, {"value", C_F64, 0},
    {"message", C_STR, 128}};
static const struct col eval_cols[] = {{"step", C_I64, 0}, {"loss", C_F64, 0}, {"metric", C_F64, 0}};

static const struct {
    const char *name;
    const struct col *cols;
    size_t ncols;
} tables[] = {
    {"layers", layer_cols, sizeof layer_cols / sizeof layer_cols[0]},
    {"steps", step_cols, sizeof step_cols / sizeof step_cols[0]},
    {"tensors", tensor_cols, sizeof tensor_cols / sizeof tensor_cols[0]},
    {"histograms", hist_cols, sizeof hist_cols / sizeof hist_cols[0]},
    {"events", event_cols, sizeof event_cols / sizeof event_cols[0]},
    {"eval", eval_cols, sizeof eval_cols / sizeof eval_cols[0]},
};

/* The value of column c in row r (documented so the checks below can recompute it). */
static int64_t ival(const char *c, int r)
{
    if (!strcmp(c, "step") || !strcmp(c, "index")) return r;
    if (!strcmp(c, "layer")) return r % 2;
    if (!strcmp(c, "skipped")) return r;
    return 100 * r + (int64_t)strlen(c);
}
static double fval(const char *c, int r) { return 0.5 + r + (double)strlen(c) / 16.0; }

static hid_t kind_enum(const struct foreign *o, int code)
{
    hid_t e = H5Tenum_create(H5T_STD_U8LE);
    int n = code ? AMPDIAG_NEVENT_CODES : AMPDIAG_NKINDS;
    for (int i = 0; i < n; i++) {
        uint8_t v = (uint8_t)i;
        H5Tenum_insert(e, code ? ampdiag_event_name(i) : ampdiag_kind_name(i), &v);
    }
    if (!code && o->unknown_enum) {
        uint8_t v = 9;
        H5Tenum_insert(e, "doom", &v);
    }
    return e;
}

static hid_t col_type(const struct foreign *o, const char *table, const struct col *c, enum ctype *eff)
{
    enum ctype t = c->t;
    if (o->mistype_table && !strcmp(o->mistype_table, table) && !strcmp(o->mistype_field, c->name))
        t = t == C_STR ? C_VSTR : C_F64;
    if (o->int_kinds && (t == C_KIND || t == C_CODE))
        t = C_I32;
    if (o->narrow && t == C_F64 && !strcmp(table, "tensors"))
        t = C_F32;
    *eff = t;
    switch (t) {
    case C_I64: return H5Tcopy(H5T_STD_I64LE);
    case C_I32: return H5Tcopy(H5T_STD_I32LE);
    case C_U8: return H5Tcopy(H5T_STD_U8LE);
    case C_U64: return H5Tcopy(H5T_STD_U64LE);
    case C_F32: return H5Tcopy(H5T_IEEE_F32LE);
    case C_F64: return H5Tcopy(H5T_IEEE_F64LE);
    case C_STR: {
        hid_t s = H5Tcopy(H5T_C_S1);
        H5Tset_size(s, c->size);
        H5Tset_strpad(s, o->nullterm ? H5T_STR_NULLTERM : H5T_STR_NULLPAD); /* NULLPAD: as numpy 'S' */
        if (o->nullterm)
            H5Tset_cset(s, H5T_CSET_UTF8);
        return s;
    }
    case C_VSTR: {
        hid_t s = H5Tcopy(H5T_C_S1);
        H5Tset_size(s, H5T_VARIABLE);
        return s;
    }
    case C_KIND: return kind_enum(o, 0);
    case C_CODE: return kind_enum(o, 1);
    case C_BINS: {
        hsize_t d = (hsize_t)o->bins;
        return H5Tarray_create2(H5T_STD_U64LE, 1, &d);
    }
    }
    return -1;
}

static char strbuf[2][8][64]; /* the values of variable-length string cells */

static void put_cell(unsigned char *p, enum ctype t, const struct col *c, int r, hid_t ft,
                     const struct foreign *o)
{
    switch (t) {
    case C_I64: { int64_t v = ival(c->name, r); memcpy(p, &v, 8); break; }
    case C_I32: {
        int32_t v = (int32_t)ival(c->name, r);
        if (!strcmp(c->name, "kind")) v = r % AMPDIAG_NKINDS;
        if (!strcmp(c->name, "code")) v = (r + 5) % AMPDIAG_NEVENT_CODES;
        memcpy(p, &v, 4);
        break;
    }
    case C_U8: { uint8_t v = (uint8_t)ival(c->name, r); memcpy(p, &v, 1); break; }
    case C_U64: { uint64_t v = (uint64_t)ival(c->name, r); memcpy(p, &v, 8); break; }
    case C_F32: { float v = (float)fval(c->name, r); memcpy(p, &v, 4); break; }
    case C_F64: { double v = fval(c->name, r); memcpy(p, &v, 8); break; }
    case C_STR: {
        char s[200];
        memset(s, 0, sizeof s);
        if (!strcmp(c->name, "name")) snprintf(s, sizeof s, "L%d", r);
        else if (!strcmp(c->name, "skip_reason")) snprintf(s, sizeof s, "%s", r ? "inf in L1" : "");
        else snprintf(s, sizeof s, "%s %d", c->name, r);
        if (!strcmp(c->name, "op"))
            memcpy(s + strlen(s) + 1, "junk", 4); /* bytes after the NUL are not read */
        if ((!strcmp(c->name, "shape") || o->full_strings) && r == 1)
            memset(s, 'x', c->size); /* no NUL: the last byte is cut */
        memcpy(p, s, c->size);
        break;
    }
    case C_VSTR: {
        char *s = strbuf[r % 2][0];
        snprintf(s, 64, "v%d", r);
        memcpy(p, &s, sizeof s);
        break;
    }
    case C_KIND: {
        uint8_t v = (uint8_t)(r % AMPDIAG_NKINDS);
        if (o->unknown_enum && r == 1) v = 9;
        memcpy(p, &v, 1);
        break;
    }
    case C_CODE: { uint8_t v = (uint8_t)((r + 5) % AMPDIAG_NEVENT_CODES); memcpy(p, &v, 1); break; }
    case C_BINS: {
        size_t n = H5Tget_size(ft) / 8;
        for (size_t b = 0; b < n; b++) {
            uint64_t v = b + (uint64_t)r;
            memcpy(p + 8 * b, &v, 8);
        }
        break;
    }
    }
}

static int write_table(hid_t f, const struct foreign *o, int ti)
{
    const char *tn = tables[ti].name;
    if (o->omit_dataset && !strcmp(o->omit_dataset, tn))
        return 0;
    if (o->eval_not_table && !strcmp(tn, "eval")) {
        hsize_t d = 2;
        double v[2] = {1, 2};
        hid_t sp = H5Screate_simple(1, &d, NULL);
        hid_t ds = H5Dcreate2(f, tn, H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
        H5Dclose(ds);
        H5Sclose(sp);
        return 0;
    }
    size_t nc = tables[ti].ncols;
    struct col cols[32];
    size_t k = 0;
    for (size_t i = 0; i < nc; i++) {
        const struct col *c = &tables[ti].cols[o->reverse ? nc - 1 - i : i];
        if (o->omit_table && !strcmp(o->omit_table, tn) && !strcmp(o->omit_field, c->name))
            continue;
        cols[k++] = *c;
    }
    if (o->reverse)
        cols[k++] = (struct col){"extra_field", C_F64, 0};
    if (o->lost_if && !strcmp(tn, "tensors")) {
        if (o->lost_if == 1)
            cols[k++] = (struct col){"lost_if_fp16", C_U64, 0};
        cols[k++] = (struct col){"lost_if_bf16", C_U64, 0};
    }
    hid_t ft[32];
    enum ctype eff[32];
    size_t size = 0, off[32];
    for (size_t i = 0; i < k; i++) {
        ft[i] = col_type(o, tn, &cols[i], &eff[i]);
        off[i] = size;
        size += H5Tget_size(ft[i]);
    }
    hid_t ct = H5Tcreate(H5T_COMPOUND, size);
    for (size_t i = 0; i < k; i++)
        H5Tinsert(ct, cols[i].name, off[i], ft[i]);
    const int ROWS = o->rows ? o->rows : 2;
    unsigned char *buf = calloc((size_t)ROWS, size);
    for (int r = 0; r < ROWS; r++)
        for (size_t i = 0; i < k; i++)
            put_cell(buf + (size_t)r * size + off[i], eff[i], &cols[i], r, ft[i], o);
    hsize_t dims[2] = {(hsize_t)ROWS, 1};
    int rank = o->steps_2d && !strcmp(tn, "steps") ? 2 : 1;
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk = (hsize_t)ROWS; /* one chunk: the shuffle interleaves the rows' bytes */
    int plist_ok = !o->chunked || rank != 1 ||
                   (H5Pset_chunk(dcpl, 1, &chunk) >= 0 && H5Pset_shuffle(dcpl) >= 0 &&
                    H5Pset_deflate(dcpl, 4) >= 0 && (!o->deflate2 || H5Pset_deflate(dcpl, 1) >= 0));
    hid_t ds = plist_ok ? H5Dcreate2(f, tn, ct, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT) : -1;
    int rc = ds >= 0 && H5Dwrite(ds, ct, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0 ? 0 : -1;
    if (ds >= 0)
        H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Tclose(ct);
    for (size_t i = 0; i < k; i++)
        H5Tclose(ft[i]);
    free(buf);
    return rc;
}

static void attr_vstr(hid_t f, const char *name, const char *value)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, &value);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
}

static int make_foreign(const char *name, const struct foreign *o)
{
    hid_t f = H5Fcreate(tpath(name), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0)
        return -1;
    if (o->format)
        attr_vstr(f, "format", o->format);
    if (o->version) {
        hid_t sp = H5Screate(H5S_SCALAR);
        hid_t a = H5Acreate2(f, "format_version", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        int v = o->version;
        H5Awrite(a, H5T_NATIVE_INT, &v);
        H5Aclose(a);
        H5Sclose(sp);
    }
    if (o->status)
        attr_vstr(f, "status", o->status);
    attr_vstr(f, "precision", "bf16");
    int rc = 0;
    for (int t = 0; t < 6; t++)
        rc |= write_table(f, o, t);
    H5Fclose(f);
    return rc;
}

static struct foreign base(void)
{
    struct foreign o;
    memset(&o, 0, sizeof o);
    o.version = 1;
    o.format = "ampdiag-trace";
    o.status = "complete";
    o.bins = AMPDIAG_HIST_BINS;
    return o;
}

/* 37 rows in one chunk (two blocks of 16 rows and 5 more: trace_chunks.c gathers each field of
 * 16 rows from its byte planes at once, fewer one by one): the records read from the stored
 * chunks are those HDF5's conversion gives, byte for byte, with enums stored as enums or as
 * integers, fields in reverse order, optional fields absent (0) or present, and float64 fields
 * stored as float32. */
static void test_chunk_blocks(void)
{
    static const char *const what[] = {"enums, fields in order, optional fields absent",
                                       "integer kinds, fields reversed, an extra field",
                                       "mean and rms stored as float32, lost_if_bf16 present"};
    for (int v = 0; v < 3; v++) {
        ampdiag_trace_tensor *T[2] = {NULL, NULL};
        ampdiag_trace_step *S[2] = {NULL, NULL};
        size_t nt[2] = {0, 0}, ns[2] = {0, 0};
        int rc[2] = {-1, -1};
        for (int chunked = 0; chunked < 2; chunked++) {
            struct foreign o = base();
            o.rows = 37;
            o.chunked = chunked;
            o.int_kinds = v == 1;
            o.reverse = v == 1;
            o.narrow = v == 2;
            o.lost_if = v == 2 ? 2 : 0;
            ampdiag_trace_reader *r = NULL;
            if (make_foreign("blocks.h5", &o) == 0 &&
                ampdiag_trace_open(tpath("blocks.h5"), AMPDIAG_TRACE_READ_QUIET, &r) == 0)
                rc[chunked] = ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T[chunked], &nt[chunked]) |
                              ampdiag_trace_read_steps(r, &S[chunked], &ns[chunked]);
            ampdiag_trace_reader_close(r);
        }
        int same = !rc[0] && !rc[1] && nt[0] == 37 && nt[1] == 37 && ns[0] == 37 && ns[1] == 37 &&
                   memcmp(T[0], T[1], 37 * sizeof *T[0]) == 0;
        for (size_t i = 0; same && i < 37; i++)
            same = S[0][i].step == S[1][i].step && S[0][i].loss == S[1][i].loss &&
                   !strcmp(S[0][i].skip_reason, S[1][i].skip_reason);
        double rms = v == 2 ? (double)(float)fval("rms", 20) : fval("rms", 20);
        ok(same && T[1][20].step == 20 && T[1][20].count == 2000 + 5 &&
               T[1][20].kind == 20 % AMPDIAG_NKINDS && T[1][20].rms == rms &&
               T[1][36].lost_updates == 3600 + 12 &&
               T[1][33].lost_if_bf16 == (v == 2 ? 3300 + 12 : 0) &&
               T[1][20].lost_if_fp16 == 0 && T[1][20].e4m3_overflow == 0,
           "chunked, 37 rows (%s): every record as HDF5 converts it", what[v]);
        free(T[0]); free(T[1]); free(S[0]); free(S[1]);
    }
    unlink(tpath("blocks.h5"));
}

/* chunked: the same traces with chunked tables, read from their stored chunks (trace_chunks.c)
 * instead of through HDF5's conversion: the values must be the same. */
static void test_foreign_ok(int chunked)
{
    const char *how = chunked ? "chunked: " : "";
    struct foreign o = base();
    o.reverse = 1;
    o.int_kinds = 0;
    o.chunked = chunked;
    if (!ok(make_foreign("foreign.h5", &o) == 0, "%swrite a foreign trace with the plain HDF5 API", how))
        return;
    ampdiag_trace_reader *r = NULL;
    int rc = ampdiag_trace_open(tpath("foreign.h5"), AMPDIAG_TRACE_READ_QUIET, &r);
    if (!ok(rc == 0, "%sa foreign trace (old file format, variable-length attributes, fields reversed, "
                     "an extra field) opens: %s", how, rc ? ampdiag_trace_errmsg() : "ok"))
        return;
    const char *p = ampdiag_trace_attr_str(r, "precision");
    ok(p && !strcmp(p, "bf16") && ampdiag_trace_status_of(r) == AMPDIAG_STATUS_COMPLETE &&
           ampdiag_trace_format_version(r) == 1,
       "%svariable-length string attributes read", how);
    ampdiag_trace_layer *L;
    ampdiag_trace_step *S;
    ampdiag_trace_tensor *T;
    ampdiag_trace_hist *H;
    ampdiag_trace_event *E;
    ampdiag_trace_eval *V;
    size_t nl, ns, nt, nh, ne, nv;
    rc = ampdiag_trace_read_layers(r, &L, &nl) | ampdiag_trace_read_steps(r, &S, &ns) |
         ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T, &nt) |
         ampdiag_trace_read_hists(r, 0, SIZE_MAX, &H, &nh) | ampdiag_trace_read_events(r, &E, &ne) |
         ampdiag_trace_read_evals(r, &V, &nv);
    if (!ok(rc == 0 && nl == 2 && ns == 2 && nt == 2 && nh == 2 && ne == 2 && nv == 2,
            "%sall tables read", how))
        diag("rc %d: %s; rows %zu %zu %zu %zu %zu %zu", rc, ampdiag_trace_errmsg(), nl, ns, nt, nh,
             ne, nv);
    if (rc == 0 && nl == 2 && nt == 2 && nh == 2 && ne == 2) {
        ok(L[1].index == 1 && !strcmp(L[1].name, "L1") && !strcmp(L[1].op, "op 1") &&
               L[1].params == 100 + 6 && strspn(L[1].shape, "x") == 63 && !L[1].shape[63],
           "%slayers by field name (NUL-padded strings; a string without NUL cut to 63 bytes)", how);
        ok(S[1].step == 1 && S[1].loss == fval("loss", 1) && S[1].skipped == 1 &&
               !strcmp(S[1].skip_reason, "inf in L1") && S[1].nonfinite_grads == 100 + 15,
           "%ssteps", how);
        ok(T[1].step == 1 && T[1].layer == 1 && T[1].kind == 1 && T[1].count == 105 &&
               T[1].absmax == (float)fval("absmax", 1) && T[1].rms == fval("rms", 1) &&
               T[1].lost_updates == 100 + 12,
           "%stensors (enum kind)", how);
        ok(T[0].lost_if_fp16 == 0 && T[1].lost_if_fp16 == 0 && T[0].lost_if_bf16 == 0 &&
               T[1].lost_if_bf16 == 0 && !ampdiag_trace_has_field(r, "/tensors", "lost_if_fp16") &&
               !ampdiag_trace_has_field(r, "tensors", "lost_if_bf16") &&
               ampdiag_trace_has_field(r, "tensors", "lost_updates") &&
               ampdiag_trace_has_field(r, "/tensors", "extra_field") &&
               !ampdiag_trace_has_field(r, "/nope", "step") && !ampdiag_trace_has_field(NULL, "tensors", "step"),
           "%swithout the optional lost_if_fp16 / lost_if_bf16 fields: they read as 0, has_field says absent", how);
        ok(H[1].kind == 1 && H[1].bin[0] == 1 && H[1].bin[280] == 281, "%shistogram bins", how);
        ok(E[0].code == 5 && E[1].code == 6 && !strcmp(E[1].message, "message 1"), "%sevents (enum code)", how);
        ok(V[1].metric == fval("metric", 1), "%sevals", how);
        ampdiag_trace_step *S1 = NULL, *S3 = NULL;
        size_t n1 = 0, n3 = 0;
        ok(ampdiag_trace_read_steps_range(r, 1, 5, &S1, &n1) == 0 && n1 == 1 && S1[0].step == 1 &&
               S1[0].loss == S[1].loss && !strcmp(S1[0].skip_reason, S[1].skip_reason) &&
               ampdiag_trace_read_steps_range(r, 3, 1, &S3, &n3) == AMPDIAG_TRACE_EINVAL && !S3,
           "%s/steps in a range: row 1 to the end is the last row; row 3 is past the end", how);
        free(S1);
    }
    free(L); free(S); free(T); free(H); free(E); free(V);
    ampdiag_trace_reader_close(r);

    /* the optional fields present (both, or only one of them) */
    for (int which = 1; which <= 2; which++) {
        o = base();
        o.chunked = chunked;
        o.reverse = which == 2;
        o.lost_if = which;
        make_foreign("lostif.h5", &o);
        rc = ampdiag_trace_open(tpath("lostif.h5"), AMPDIAG_TRACE_READ_QUIET, &r);
        T = NULL;
        nt = 0;
        ok(rc == 0 && ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T, &nt) == 0 && nt == 2 &&
               T[1].lost_updates == 100 + 12 && T[1].lost_if_bf16 == 100 + 12 &&
               T[0].lost_if_bf16 == 12 &&
               T[1].lost_if_fp16 == (which == 1 ? 100 + 12 : 0) &&
               ampdiag_trace_has_field(r, "/tensors", "lost_if_bf16") &&
               ampdiag_trace_has_field(r, "/tensors", "lost_if_fp16") == (which == 1),
           "%s%s: read by name; has_field says which are present", how,
           which == 1 ? "lost_if_fp16 and lost_if_bf16" : "only lost_if_bf16 (fields reversed)");
        free(T);
        ampdiag_trace_reader_close(r);
    }
    unlink(tpath("lostif.h5"));

    o = base();
    o.chunked = chunked;
    o.int_kinds = 1;
    make_foreign("intkinds.h5", &o);
    rc = ampdiag_trace_open(tpath("intkinds.h5"), AMPDIAG_TRACE_READ_QUIET, &r);
    T = NULL;
    E = NULL;
    nt = ne = 0;
    ok(rc == 0 && ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T, &nt) == 0 &&
           ampdiag_trace_read_events(r, &E, &ne) == 0 && nt == 2 && T[1].kind == 1 && ne == 2 &&
           E[1].code == 6,
       "%sinteger kind and code columns read as the enum values", how);
    free(T);
    free(E);
    ampdiag_trace_reader_close(r);

    o = base();
    o.chunked = chunked;
    o.unknown_enum = 1;
    make_foreign("doom.h5", &o);
    rc = ampdiag_trace_open(tpath("doom.h5"), AMPDIAG_TRACE_READ_QUIET, &r);
    T = NULL;
    nt = 0;
    ok(rc == 0 && ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T, &nt) == 0 && nt == 2 &&
           T[0].kind == 0 && T[1].kind == -1,
       "%san enum name this version does not know reads as -1, the others as usual", how);
    free(T);
    ampdiag_trace_reader_close(r);

    o = base();
    o.status = "paused";
    make_foreign("paused.h5", &o);
    rc = ampdiag_trace_open(tpath("paused.h5"), AMPDIAG_TRACE_READ_QUIET, &r);
    ok(rc == 0 && ampdiag_trace_status_of(r) == AMPDIAG_STATUS_UNKNOWN &&
           !strcmp(ampdiag_trace_status_text(r), "paused") && !ampdiag_trace_cut_off(r),
       "an unknown status string is kept, status UNKNOWN");
    ampdiag_trace_reader_close(r);
}

static void test_foreign_bad(void)
{
    struct {
        const char *file;
        struct foreign o;
        int want;
        const char *what, *mention;
    } cases[20];
    int n = 0;
#define CASE(f, w, text, m, ...)                                                                   \
    do {                                                                                           \
        cases[n].file = f;                                                                         \
        cases[n].o = base();                                                                       \
        __VA_ARGS__;                                                                               \
        cases[n].want = w;                                                                         \
        cases[n].what = text;                                                                      \
        cases[n].mention = m;                                                                      \
        n++;                                                                                       \
    } while (0)
    CASE("noformat.h5", AMPDIAG_TRACE_ENOTTRACE, "HDF5 without a format attribute", "format",
         cases[n].o.format = NULL);
    CASE("otherformat.h5", AMPDIAG_TRACE_ENOTTRACE, "another format", "other-format",
         cases[n].o.format = "other-format");
    CASE("v3.h5", AMPDIAG_TRACE_EVERSION, "format_version 3", "format_version 3", cases[n].o.version = 3);
    CASE("v2-no-whatif.h5", AMPDIAG_TRACE_ESCHEMA, "format_version 2 without its tables /formats and /whatif",
         "/formats", cases[n].o.version = 2);
    CASE("v0.h5", AMPDIAG_TRACE_ESCHEMA, "format_version 0", "format_version 0",
         cases[n].o.version = 0); /* the attribute is added below, with value 0 */
    CASE("noversion.h5", AMPDIAG_TRACE_ESCHEMA, "no format_version", "format_version",
         cases[n].o.version = 0);
    CASE("nostatus.h5", AMPDIAG_TRACE_ESCHEMA, "no status", "status", cases[n].o.status = NULL);
    CASE("noeval.h5", AMPDIAG_TRACE_ESCHEMA, "dataset /eval missing", "/eval",
         cases[n].o.omit_dataset = "eval");
    CASE("nosteps.h5", AMPDIAG_TRACE_ESCHEMA, "dataset /steps missing", "/steps",
         cases[n].o.omit_dataset = "steps");
    CASE("noabsmax.h5", AMPDIAG_TRACE_ESCHEMA, "field absmax missing", "absmax",
         (cases[n].o.omit_table = "tensors", cases[n].o.omit_field = "absmax"));
    CASE("floatlostif.h5", AMPDIAG_TRACE_ESCHEMA, "the optional tensors.lost_if_bf16 is a float",
         "'lost_if_bf16'",
         (cases[n].o.lost_if = 1, cases[n].o.mistype_table = "tensors",
          cases[n].o.mistype_field = "lost_if_bf16"));
    CASE("floatstep.h5", AMPDIAG_TRACE_ESCHEMA, "steps.step is a float", "'step'",
         (cases[n].o.mistype_table = "steps", cases[n].o.mistype_field = "step"));
    CASE("vlenname.h5", AMPDIAG_TRACE_ESCHEMA, "layers.name is a variable-length string", "'name'",
         (cases[n].o.mistype_table = "layers", cases[n].o.mistype_field = "name"));
    CASE("bins280.h5", AMPDIAG_TRACE_ESCHEMA, "280 histogram bins", "'bins'", cases[n].o.bins = 280);
    CASE("evalvector.h5", AMPDIAG_TRACE_ESCHEMA, "/eval not a table", "/eval",
         cases[n].o.eval_not_table = 1);
    CASE("steps2d.h5", AMPDIAG_TRACE_ESCHEMA, "/steps two-dimensional", "/steps",
         cases[n].o.steps_2d = 1);
#undef CASE
    for (int i = 0; i < n; i++) {
        make_foreign(cases[i].file, &cases[i].o);
        if (!strcmp(cases[i].file, "v0.h5")) {
            /* format_version 0: rewrite the attribute */
            hid_t f = H5Fopen(tpath("v0.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
            hid_t sp = H5Screate(H5S_SCALAR);
            hid_t a = H5Acreate2(f, "format_version", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
            int v = 0;
            H5Awrite(a, H5T_NATIVE_INT, &v);
            H5Aclose(a);
            H5Sclose(sp);
            H5Fclose(f);
        }
        expect_open(cases[i].file, cases[i].want, cases[i].what);
        ok(strstr(ampdiag_trace_errmsg(), cases[i].mention) != NULL, "... the message says %s",
           cases[i].mention);
        unlink(tpath(cases[i].file));
    }
}

static void test_not_traces(void)
{
    expect_open("does-not-exist.h5", AMPDIAG_TRACE_ENOENT, "a missing file");
    mkdir(tpath("adir.h5"), 0755);
    expect_open("adir.h5", AMPDIAG_TRACE_ENOENT, "a directory");
    rmdir(tpath("adir.h5"));
    write_file("empty.h5", "", 0);
    expect_open("empty.h5", AMPDIAG_TRACE_ENOTHDF5, "an empty file");
    const char text[] = "step,loss\n0,2.3\n1,2.1\n";
    write_file("text.h5", text, sizeof text - 1);
    expect_open("text.h5", AMPDIAG_TRACE_ENOTHDF5, "a text file");
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)synth_hash((uint32_t)i, 1, 2, 3);
    write_file("junk.h5", junk, sizeof junk);
    expect_open("junk.h5", AMPDIAG_TRACE_ENOTHDF5, "4 KB of random bytes");
    /* an HDF5 file with data but none of the trace's attributes */
    hid_t f = H5Fcreate(tpath("plain.h5"), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t d = 3;
    hid_t sp = H5Screate_simple(1, &d, NULL);
    hid_t ds = H5Dcreate2(f, "x", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    float v[3] = {1, 2, 3};
    H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
    expect_open("plain.h5", AMPDIAG_TRACE_ENOTTRACE, "an HDF5 data file");
    ampdiag_trace_reader *r = NULL;
    ok(ampdiag_trace_open(NULL, 0, &r) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_open(tpath("plain.h5"), 0, NULL) == AMPDIAG_TRACE_EINVAL,
       "NULL arguments refused");
    unlink(tpath("empty.h5"));
    unlink(tpath("text.h5"));
    unlink(tpath("junk.h5"));
    unlink(tpath("plain.h5"));
}

/* Read everything the reader will give; returns the first error (0 when all reads worked). */
static int read_all(ampdiag_trace_reader *r)
{
    void *p = NULL;
    size_t n;
    int rc = 0, e;
#define READ(call)                                                                                 \
    do {                                                                                           \
        e = (call);                                                                                \
        if (e && !rc)                                                                              \
            rc = e;                                                                                \
        free(p);                                                                                   \
        p = NULL;                                                                                  \
    } while (0)
    READ(ampdiag_trace_read_layers(r, (ampdiag_trace_layer **)&p, &n));
    READ(ampdiag_trace_read_steps(r, (ampdiag_trace_step **)&p, &n));
    READ(ampdiag_trace_read_tensors(r, 0, SIZE_MAX, (ampdiag_trace_tensor **)&p, &n));
    READ(ampdiag_trace_read_hists(r, 0, SIZE_MAX, (ampdiag_trace_hist **)&p, &n));
    READ(ampdiag_trace_read_events(r, (ampdiag_trace_event **)&p, &n));
    READ(ampdiag_trace_read_evals(r, (ampdiag_trace_eval **)&p, &n));
#undef READ
    return rc;
}

/* Cut a copy of the trace at src at several lengths: every copy is refused with a truncated or
 * not-HDF5 error naming it, or opens and then reads or fails to read cleanly. */
static void test_truncated(const char *src, int complete)
{
    FILE *f = fopen(src, "rb");
    static unsigned char buf[1 << 20];
    size_t size = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f)
        fclose(f);
    if (!ok(size > 0 && size < sizeof buf, "read %s (%zu bytes)", src, size))
        return;
    static const double fracs[] = {0.001, 0.02, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999};
    int good = 1, opened = 0, failed_open = 0, failed_read = 0;
    for (size_t i = 0; i < sizeof fracs / sizeof fracs[0]; i++) {
        size_t len = (size_t)((double)size * fracs[i]);
        write_file("cut.h5", buf, len);
        ampdiag_trace_reader *r = NULL;
        int rc = ampdiag_trace_open(tpath("cut.h5"),
                                    AMPDIAG_TRACE_READ_QUIET | AMPDIAG_TRACE_READ_NO_REPAIR, &r);
        if (rc) {
            failed_open++;
            good &= (rc == AMPDIAG_TRACE_ETRUNCATED || rc == AMPDIAG_TRACE_ENOTHDF5) &&
                    strstr(ampdiag_trace_errmsg(), "cut.h5") != NULL;
            if (i == 4)
                diag("half a trace: %s", ampdiag_trace_errmsg());
        } else {
            opened++;
            rc = read_all(r);
            if (rc) {
                failed_read++;
                good &= rc == AMPDIAG_TRACE_ETRUNCATED && strstr(ampdiag_trace_errmsg(), "cut.h5");
            }
            ampdiag_trace_reader_close(r);
        }
    }
    ok(good, "%s cut at 9 lengths: %d refused at open, %d opened (%d of them then failed to read), "
             "each error a truncated/not-HDF5 one naming the file", src, failed_open, opened,
       failed_read);
    if (complete)
        ok(failed_open == 9, "a complete trace cut short is always refused at open");
    unlink(tpath("cut.h5"));
}


/* Strings that fill their width with no NUL, stored NUL-terminated UTF-8 as ampdiag's own
 * writer stores them: HDF5 then copies them as they are, without converting (and so without
 * terminating them). Read through HDF5 (a contiguous table; chunks deflated twice, a pipeline
 * the chunk reader leaves to HDF5) and from the stored chunks, every string of every record
 * ends within its field, cut to its width less one as a converted one is. */
static void test_full_strings(void)
{
    static const char *const how[] = {"contiguous tables (read through HDF5)",
                                      "chunked tables deflated twice (read through HDF5)",
                                      "chunked tables (read from the stored chunks)"};
    for (int v = 0; v < 3; v++) {
        struct foreign o = base();
        o.nullterm = 1;
        o.full_strings = 1;
        o.chunked = v > 0;
        o.deflate2 = v == 1;
        ampdiag_trace_reader *r = NULL;
        ampdiag_trace_layer *L = NULL;
        ampdiag_trace_step *S = NULL;
        ampdiag_trace_event *E = NULL;
        size_t nl = 0, ns = 0, ne = 0;
        int rc = make_foreign("fullstr.h5", &o);
        if (!rc)
            rc = ampdiag_trace_open(tpath("fullstr.h5"), AMPDIAG_TRACE_READ_QUIET, &r);
        if (!rc)
            rc = ampdiag_trace_read_layers(r, &L, &nl) | ampdiag_trace_read_steps(r, &S, &ns) |
                 ampdiag_trace_read_events(r, &E, &ne);
        int ended = !rc && nl == 2 && ns == 2 && ne == 2;
        for (size_t i = 0; ended && i < 2; i++)
            ended = memchr(L[i].name, 0, sizeof L[i].name) && memchr(L[i].op, 0, sizeof L[i].op) &&
                    memchr(L[i].shape, 0, sizeof L[i].shape) &&
                    memchr(L[i].compute, 0, sizeof L[i].compute) &&
                    memchr(S[i].skip_reason, 0, sizeof S[i].skip_reason) &&
                    memchr(E[i].message, 0, sizeof E[i].message);
        ok(ended && strspn(L[1].name, "x") == 63 && strspn(L[1].op, "x") == 31 &&
               strspn(S[1].skip_reason, "x") == 95 && strspn(E[1].message, "x") == 127 &&
               !strcmp(L[0].name, "L0") && L[1].params == 100 + 6,
           "full-width strings without NUL, %s: every string ends in its field (rc %d: %s)",
           how[v], rc, rc ? ampdiag_trace_errmsg() : "read");
        free(L);
        free(S);
        free(E);
        ampdiag_trace_reader_close(r);
        unlink(tpath("fullstr.h5"));
    }
}

/* n zero bytes deflated as a zlib stream, times times (malloc'd; its length in *len). */
static unsigned char *zeros_deflated(size_t n, int times, size_t *len)
{
    unsigned char *in = calloc(n, 1);
    for (int k = 0; in && k < times; k++) {
        uLongf cap = compressBound((uLong)n);
        unsigned char *out = malloc(cap);
        if (!out || compress2(out, &cap, in, (uLong)n, 9) != Z_OK) {
            free(out);
            free(in);
            return NULL;
        }
        free(in);
        in = out;
        n = cap;
    }
    *len = n;
    return in;
}

/* A deflate bomb: chunk 0 of /tensors replaced by a few kilobytes that inflate to 64 MiB, far
 * beyond the chunk's declared size (37 rows). Read from the stored chunks, and through HDF5
 * (the table deflated twice: a pipeline only HDF5 reads), the table is refused as corrupt,
 * naming the table; neither way inflates more than the table's extent needs. */
static void test_deflate_bomb(void)
{
    static const char *const how[] = {"read from the stored chunks", "read through HDF5"};
    for (int v = 0; v < 2; v++) {
        struct foreign o = base();
        o.chunked = 1;
        o.rows = 37;
        o.deflate2 = v == 1;
        size_t zlen = 0;
        unsigned char *z = zeros_deflated((size_t)64 << 20, v + 1, &zlen);
        int made = z && make_foreign("bomb.h5", &o) == 0;
        if (made) {
            hid_t f = H5Fopen(tpath("bomb.h5"), H5F_ACC_RDWR, H5P_DEFAULT);
            hid_t d = f >= 0 ? H5Dopen2(f, "tensors", H5P_DEFAULT) : -1;
            hsize_t off = 0;
            made = d >= 0 && H5Dwrite_chunk(d, H5P_DEFAULT, 0, &off, zlen, z) >= 0;
            if (d >= 0)
                H5Dclose(d);
            if (f >= 0)
                H5Fclose(f);
        }
        free(z);
        if (!ok(made, "a trace whose /tensors chunk (%zu bytes) inflates to 64 MiB (%s)", zlen, how[v]))
            continue;
        ampdiag_trace_reader *r = NULL;
        ampdiag_trace_tensor *T = NULL;
        size_t nt = 0;
        int rc = ampdiag_trace_open(tpath("bomb.h5"), AMPDIAG_TRACE_READ_QUIET, &r);
        if (!rc)
            rc = ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T, &nt);
        const char *msg = rc ? ampdiag_trace_errmsg() : "";
        ok(rc == AMPDIAG_TRACE_ETRUNCATED && strstr(msg, "/tensors") && strstr(msg, "inflates"),
           "the deflate bomb, %s: refused, naming the table (%d: %s)", how[v], rc, msg);
        free(T);
        ampdiag_trace_reader_close(r);
        unlink(tpath("bomb.h5"));
    }
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/t_trace_validate.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the builders' own HDF5 calls */
    test_not_traces();
    test_foreign_ok(0);
    test_foreign_ok(1);
    test_chunk_blocks();
    test_full_strings();
    test_deflate_bomb();
    test_foreign_bad();
    /* a complete trace (its superblock records the end of file: every cut is caught at open) */
    if (ok(synth_write(&synth_specs[0], tpath("full.h5"), NULL) == 0, "write a complete trace"))
        test_truncated(tpath("full.h5"), 1);
    unlink(tpath("full.h5"));
    /* a cut-off trace, still marked as being written (SWMR readers skip the end-of-file check) */
    const char *srcdir = getenv("srcdir");
    char ref[4200];
    snprintf(ref, sizeof ref, "%s/traces/%s", srcdir ? srcdir : ".", synth_specs[2].file);
    test_truncated(ref, 0);
    const char *left[] = {"foreign.h5", "intkinds.h5", "doom.h5", "paused.h5"};
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++)
        unlink(tpath(left[i]));
    rmdir(dir);
    H5close();
    return done_testing();
}
