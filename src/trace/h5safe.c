/* h5safe.c - reading HDF5 files that may have been crafted (see h5safe.h). */
#include "trace/h5safe.h"
#include "trace/trace_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static herr_t deny_elink(const char *parent_file_name, const char *parent_group_name,
                         const char *child_file_name, const char *child_object_name,
                         unsigned *acc_flags, hid_t fapl_id, void *op_data)
{
    (void)parent_file_name; (void)parent_group_name; (void)child_file_name;
    (void)child_object_name; (void)acc_flags; (void)fapl_id; (void)op_data;
    return -1;
}

hid_t h5safe_lapl(void)
{
    hid_t lapl = H5Pcreate(H5P_DATASET_ACCESS); /* a link access list too */
    if (lapl >= 0 && H5Pset_elink_cb(lapl, deny_elink, NULL) < 0) {
        H5Pclose(lapl);
        return -1;
    }
    return lapl;
}

/* Every component of the path to name must itself be a hard link (a soft link in the middle
 * of a path could point anywhere in the file, an external one out of it). 0, or a code. */
static int check_path(hid_t loc, const char *name, hid_t lapl, char *why, size_t n)
{
    char part[1024];
    size_t len = 0;
    for (const char *p = name;; p++) {
        if ((*p == '/' || !*p) && len > 0) {
            part[len] = 0;
            H5L_info_t li;
            htri_t ex = H5Lexists(loc, part, lapl);
            if (ex <= 0 || H5Lget_info(loc, part, &li, lapl) < 0) {
                snprintf(why, n, "is missing");
                return ex < 0 ? H5SAFE_UNOPENABLE : H5SAFE_MISSING;
            }
            if (li.type != H5L_TYPE_HARD) {
                snprintf(why, n, "is %s link", li.type == H5L_TYPE_EXTERNAL ? "an external"
                                                : li.type == H5L_TYPE_SOFT ? "a soft"
                                                                           : "a user-defined");
                return H5SAFE_REFUSED;
            }
        }
        if (!*p)
            return 0;
        if (len + 1 >= sizeof part) {
            snprintf(why, n, "has a name too long");
            return H5SAFE_REFUSED;
        }
        part[len++] = *p;
    }
}

hid_t h5safe_open_dataset(hid_t loc, const char *name, hid_t lapl, char *why, size_t n)
{
    int rc = check_path(loc, name, lapl, why, n);
    if (rc)
        return rc;
    H5O_info_t oi;
    if (H5Oget_info_by_name(loc, name, &oi, lapl) < 0 || oi.type != H5O_TYPE_DATASET) {
        snprintf(why, n, "is not a dataset");
        return H5SAFE_REFUSED;
    }
    hid_t d = H5Dopen2(loc, name, lapl);
    if (d < 0) {
        snprintf(why, n, "cannot be opened (a corrupt file?)");
        return H5SAFE_UNOPENABLE;
    }
    const char *bad = h5safe_storage_problem(d);
    if (bad) {
        snprintf(why, n, "%s", bad);
        H5Dclose(d);
        return H5SAFE_REFUSED;
    }
    return d;
}

/* Bytes the data of d takes (points x type size); 0 when unknown or overflowing. */
static hsize_t data_bytes(hid_t d)
{
    hid_t sp = H5Dget_space(d), ty = H5Dget_type(d);
    hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    size_t ts = ty >= 0 ? H5Tget_size(ty) : 0;
    if (sp >= 0)
        H5Sclose(sp);
    if (ty >= 0)
        H5Tclose(ty);
    if (np < 0 || ts == 0 || (hsize_t)np > (hsize_t)-1 / ts)
        return 0;
    return (hsize_t)np * ts;
}

static hsize_t file_size_of(hid_t d)
{
    hsize_t size = 0;
    hid_t f = H5Iget_file_id(d);
    if (f < 0)
        return 0;
    if (H5Fget_filesize(f, &size) < 0)
        size = 0;
    H5Fclose(f);
    return size;
}

const char *h5safe_storage_problem(hid_t d)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return "has a storage description HDF5 cannot read";
    int next = H5Pget_external_count(dcpl);
    H5D_layout_t lay = H5Pget_layout(dcpl);
    H5Pclose(dcpl);
    if (next != 0)
        return next < 0 ? "has a storage description HDF5 cannot read"
                        : "keeps its data in external files";
    if (lay == H5D_VIRTUAL)
        return "is a virtual dataset (its data lies in other files)";
    if (lay != H5D_COMPACT && lay != H5D_CONTIGUOUS)
        return lay == H5D_CHUNKED ? NULL : "has an unknown storage layout";
    hsize_t need = data_bytes(d), have = H5Dget_storage_size(d);
    haddr_t at = lay == H5D_CONTIGUOUS ? H5Dget_offset(d) : HADDR_UNDEF;
    if (need == 0)
        return NULL; /* nothing to read (or HDF5 refuses the read itself) */
    if (lay == H5D_COMPACT)
        return have == need ? NULL : "is compact with a buffer of the wrong size";
    if (at == HADDR_UNDEF && have == 0)
        return NULL; /* never written: reads as the fill value */
    hsize_t fsize = file_size_of(d);
    if (fsize == 0 || at == HADDR_UNDEF || have < need || at > fsize || have > fsize - at)
        return "is contiguous with a size or place that does not fit the file";
    return NULL;
}

int h5safe_open_failed_io(char *detail, size_t n)
{
    trace_h5err e;
    trace_h5err_get(&e);
    snprintf(detail, n, "%s", e.detail);
    return e.os_errno != 0 && e.os_errno != ENOENT && !e.truncated;
}

/* ------------------------------------------------------------------------------------------
 * Chunks that inflate beyond their size (h5safe_check_chunks)
 * ------------------------------------------------------------------------------------------ */

#define MAX_UNCHECKED_CHUNK ((size_t)64 << 20) /* a chunk may be this large whatever the rows */

/* A buffer of at most cap bytes. */
typedef struct sbuf {
    unsigned char *p;
    size_t len, cap;
} sbuf;

/* Inflate in into out, making at most cap bytes: 0, 1 when the stream makes more (nothing more
 * is made), -1 when it is no zlib stream (HDF5 will say so) or memory ran out. */
static int inflate_capped(const sbuf *in, sbuf *out, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (in->len > UINT_MAX || inflateInit(&z) != Z_OK)
        return -1;
    z.next_in = in->p;
    z.avail_in = (uInt)in->len;
    size_t alloc = in->len < cap / 4 ? 4 * in->len + 64 : cap + 1; /* + 1: room to see more */
    int rc = -1;
    out->len = 0;
    for (;;) {
        if (out->len == alloc) {
            if (alloc > cap) { /* the byte beyond cap was made */
                rc = 1;
                break;
            }
            alloc = alloc > cap / 2 ? cap + 1 : 2 * alloc;
        }
        if (alloc != out->cap) {
            unsigned char *np = realloc(out->p, alloc);
            if (!np)
                break;
            out->p = np;
            out->cap = alloc;
        }
        size_t room = alloc - out->len;
        z.next_out = out->p + out->len;
        z.avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
        int st = inflate(&z, Z_NO_FLUSH);
        out->len = z.total_out;
        if (out->len > cap) {
            rc = 1;
            break;
        }
        if (st == Z_STREAM_END) {
            rc = 0;
            break;
        }
        if (st != Z_OK && !(st == Z_BUF_ERROR && z.avail_out == 0))
            break;
    }
    inflateEnd(&z);
    return rc;
}

/* HDF5's shuffle undone: byte b of element i is at b * n + i (n whole elements of size e; the
 * bytes after them as they are). */
static int unshuffle(const sbuf *in, sbuf *out, size_t e)
{
    if (!(out->p = malloc(in->len ? in->len : 1)))
        return -1;
    out->len = out->cap = in->len;
    size_t n = e ? in->len / e : 0;
    if (n < 2 || e < 2) {
        memcpy(out->p, in->p, in->len);
        return 0;
    }
    for (size_t b = 0; b < e; b++)
        for (size_t i = 0; i < n; i++)
            out->p[i * e + b] = in->p[b * n + i];
    memcpy(out->p + n * e, in->p + n * e, in->len - n * e);
    return 0;
}

/* The filters of a pipeline, in the order HDF5 applied them when writing. */
typedef struct pipeline {
    int n, deflated;
    H5Z_filter_t id[16];
    size_t elem[16]; /* shuffle's element size */
} pipeline;

/* d's pipeline; 0, or H5SAFE_OVERSIZE (why says so) when it deflates and also holds a filter
 * this check cannot undo. */
static int get_pipeline(hid_t dcpl, pipeline *pl, char *why, size_t n)
{
    memset(pl, 0, sizeof *pl);
    int nf = H5Pget_nfilters(dcpl);
    for (int i = 0; i < nf && i < 16; i++) {
        unsigned flags, cd[8] = {0};
        size_t ncd = 8;
        char name[64];
        pl->id[i] = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof name, name, NULL);
        pl->elem[i] = ncd > 0 ? cd[0] : 0;
        pl->deflated |= pl->id[i] == H5Z_FILTER_DEFLATE;
        pl->n = i + 1;
    }
    for (int i = 0; pl->deflated && i < pl->n; i++)
        if (pl->id[i] != H5Z_FILTER_DEFLATE && pl->id[i] != H5Z_FILTER_SHUFFLE &&
            pl->id[i] != H5Z_FILTER_FLETCHER32) {
            snprintf(why, n, "is deflated together with filter %d, which is not read", (int)pl->id[i]);
            return H5SAFE_OVERSIZE;
        }
    if (nf > 16 && pl->deflated) {
        snprintf(why, n, "has %d filters, more than are read", nf);
        return H5SAFE_OVERSIZE;
    }
    return 0;
}

/* The stored bytes of one chunk undone (filters skipped by mask left alone): 0 when they make
 * at most size bytes, 1 when a stage makes more, -1 when they could not be undone here. */
static int chunk_fits(const pipeline *pl, unsigned mask, sbuf *cur, size_t size)
{
    size_t stage_cap = (size_t)compressBound((uLong)size) + 64; /* what a stage before the last may make */
    for (int i = pl->n - 1; i >= 0; i--) {
        if (mask & (1u << i))
            continue;
        sbuf next = {NULL, 0, 0};
        int rc = 0;
        if (pl->id[i] == H5Z_FILTER_FLETCHER32) {
            if (cur->len < 4)
                return -1;
            cur->len -= 4;
            continue;
        }
        if (pl->id[i] == H5Z_FILTER_SHUFFLE)
            rc = unshuffle(cur, &next, pl->elem[i]);
        else
            rc = inflate_capped(cur, &next, stage_cap);
        free(cur->p);
        *cur = next;
        if (rc)
            return rc;
    }
    return cur->len > size ? 1 : 0;
}

int h5safe_check_chunks(hid_t d, size_t first, size_t count, size_t rows, char *why, size_t n)
{
    hid_t dcpl = H5Dget_create_plist(d), ft = H5Dget_type(d);
    hsize_t crows = 0;
    size_t row = ft >= 0 ? H5Tget_size(ft) : 0;
    int chunked = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
                  H5Pget_chunk(dcpl, 1, &crows) == 1 && crows > 0 && row > 0;
    pipeline pl;
    int rc = chunked ? get_pipeline(dcpl, &pl, why, n) : 0;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (ft >= 0)
        H5Tclose(ft);
    if (!chunked || rc)
        return rc;
    size_t size = crows > SIZE_MAX / row ? SIZE_MAX : (size_t)crows * row;
    size_t need = rows > SIZE_MAX / row ? SIZE_MAX : rows * row;
    if (size > MAX_UNCHECKED_CHUNK && size > need) {
        snprintf(why, n, "declares chunks of %llu rows (%zu bytes) for %zu rows",
                 (unsigned long long)crows, size, rows);
        return H5SAFE_OVERSIZE;
    }
    if (!pl.deflated || count == 0)
        return 0;
    hsize_t fsize = 0;
    hid_t f = H5Iget_file_id(d);
    if (f < 0 || H5Fget_filesize(f, &fsize) < 0)
        fsize = 0;
    if (f >= 0)
        H5Fclose(f);
    for (size_t c = first / (size_t)crows; c <= (first + count - 1) / (size_t)crows; c++) {
        hsize_t off = (hsize_t)c * crows, nbytes = 0;
        uint32_t mask = 0;
        sbuf cur = {NULL, 0, 0};
        if (H5Dget_chunk_storage_size(d, &off, &nbytes) < 0 || nbytes == 0 || nbytes > fsize ||
            !(cur.p = malloc((size_t)nbytes)) || H5Dread_chunk(d, H5P_DEFAULT, &off, &mask, cur.p) < 0) {
            free(cur.p);
            H5Eclear2(H5E_DEFAULT);
            continue; /* not stored, or unreadable: HDF5's read says so */
        }
        cur.len = cur.cap = (size_t)nbytes;
        int fits = chunk_fits(&pl, mask, &cur, size);
        free(cur.p);
        if (fits == 1) {
            snprintf(why, n, "has a chunk (rows %llu to %llu) that inflates beyond its %zu bytes",
                     (unsigned long long)off, (unsigned long long)(off + crows - 1), size);
            return H5SAFE_OVERSIZE;
        }
    }
    return 0;
}
