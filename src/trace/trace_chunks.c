/*
 * trace_chunks.c - a table read from its stored chunks on a few threads (trace_chunks.h).
 */
#include "trace/trace_chunks.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_THREADS 4
#define MAX_CHUNK_BYTES ((size_t)64 << 20) /* larger chunks are read through HDF5 */

/* ------------------------------------------------------------------------------------------
 * Inflating: libdeflate where the system has it (loaded at run time; about twice as fast as
 * zlib, and checks the Adler-32 sum as zlib does), else zlib
 * ------------------------------------------------------------------------------------------ */

struct libdeflate_decompressor;
static struct {
    struct libdeflate_decompressor *(*alloc)(void);
    int (*zlib)(struct libdeflate_decompressor *, const void *, size_t, void *, size_t, size_t *);
    void (*release)(struct libdeflate_decompressor *);
} ld;
static pthread_once_t ld_once = PTHREAD_ONCE_INIT;

static void ld_load(void)
{
    if (getenv("AMPDIAG_NO_LIBDEFLATE"))
        return;
    void *h = dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    void *a = dlsym(h, "libdeflate_alloc_decompressor"), *z = dlsym(h, "libdeflate_zlib_decompress"),
         *f = dlsym(h, "libdeflate_free_decompressor");
    if (!a || !z || !f)
        return; /* the library stays loaded: harmless */
    memcpy(&ld.alloc, &a, sizeof a);
    memcpy(&ld.zlib, &z, sizeof z);
    memcpy(&ld.release, &f, sizeof f);
}

/* Inflate a zlib stream of exactly size bytes. 0, or -1 when it is not one. */
static int inflate_exact(struct libdeflate_decompressor *d, const unsigned char *in, size_t n,
                         unsigned char *out, size_t size)
{
    if (d) {
        size_t got = 0;
        return ld.zlib(d, in, n, out, size, &got) == 0 && got == size ? 0 : -1;
    }
    uLongf len = (uLongf)size;
    return uncompress(out, &len, in, (uLong)n) == Z_OK && len == size ? 0 : -1;
}

/* How one field goes from its bytes in a stored row to the public record. */
enum op { OP_COPY, OP_INT, OP_F32_F64, OP_ENUM, OP_BYTES, OP_STR,
          OP_ZERO, OP_NAN /* an optional field the file lacks: 0, or NaN for a double */ };

struct fieldop {
    enum op op;
    size_t src, dst;   /* offsets in the stored row and in the record */
    size_t ssize, dsize;
    int is_signed;     /* OP_INT: the stored integer is signed */
    int32_t map[256];  /* OP_ENUM: stored value -> this version's value (-1: unknown) */
};

struct trace_chunks {
    const trace_table *tb;
    size_t chunk_rows, row_size; /* rows per chunk; bytes of a stored row */
    hsize_t file_size;           /* no stored chunk is larger than the file */
    int shuffle, deflate;
    struct fieldop *ops;
    size_t nops;
    uint64_t absent;             /* optional fields not in the file (OP_ZERO, OP_NAN) */
    int int_enums;               /* an enum field stored as an integer (trace_rows_fix maps
                                    negative values to -1) */
    int direct;                  /* shuffled, and every field fixed-size: each field is
                                    gathered from its byte planes straight into the records */
    struct batch *pre;           /* the rows being prefetched, or NULL */
    int nthreads;
};

static int little_endian_host(void)
{
    uint16_t x = 1;
    unsigned char b;
    memcpy(&b, &x, 1);
    return b == 1;
}

/* An integer field: a stored little-endian integer that fits the record's type whatever its
 * value (same size and sign, or wider; unsigned into a wider signed). */
static int plan_int(struct fieldop *o, hid_t mt, trace_ftype t)
{
    if (H5Tget_class(mt) != H5T_INTEGER || H5Tget_order(mt) != H5T_ORDER_LE)
        return -1;
    int s = H5Tget_sign(mt) == H5T_SGN_2;
    int dsigned = t != FT_U64;
    o->ssize = H5Tget_size(mt);
    o->is_signed = s;
    if (o->ssize != 1 && o->ssize != 2 && o->ssize != 4 && o->ssize != 8)
        return -1;
    if (s == dsigned ? o->ssize > o->dsize : (s || o->ssize >= o->dsize))
        return -1;
    o->op = o->ssize == o->dsize ? OP_COPY : OP_INT;
    return 0;
}

static int plan_float(struct fieldop *o, hid_t mt, trace_ftype t)
{
    if (H5Tget_class(mt) != H5T_FLOAT)
        return -1;
    o->ssize = H5Tget_size(mt);
    if (o->ssize == 4 && H5Tequal(mt, H5T_IEEE_F32LE) > 0)
        o->op = t == FT_F32 ? OP_COPY : OP_F32_F64;
    else if (o->ssize == 8 && t == FT_F64 && H5Tequal(mt, H5T_IEEE_F64LE) > 0)
        o->op = OP_COPY;
    else
        return -1;
    return 0;
}

/* An enum of one unsigned byte, mapped by name as HDF5 would (unknown names read -1). */
static int plan_enum(struct fieldop *o, hid_t mt, trace_ftype t)
{
    if (H5Tget_class(mt) == H5T_INTEGER)
        return plan_int(o, mt, FT_I32);
    if (H5Tget_class(mt) != H5T_ENUM || H5Tget_size(mt) != 1)
        return -1;
    hid_t base = H5Tget_super(mt);
    int ok = base >= 0 && H5Tget_sign(base) == H5T_SGN_NONE;
    if (base >= 0)
        H5Tclose(base);
    int n = H5Tget_nmembers(mt);
    if (!ok || n < 0)
        return -1;
    for (int v = 0; v < 256; v++)
        o->map[v] = -1;
    for (int i = 0; i < n; i++) {
        unsigned char v;
        char *name = H5Tget_member_name(mt, (unsigned)i);
        if (!name || H5Tget_member_value(mt, (unsigned)i, &v) < 0) {
            if (name)
                H5free_memory(name);
            return -1;
        }
        int known = trace_enum_parse(t, name);
        H5free_memory(name);
        o->map[v] = known < 0 ? -1 : known; /* as trace_rows_fix leaves an unknown name */
    }
    o->ssize = 1;
    o->op = OP_ENUM;
    return 0;
}

/* Histogram bins: an array of AMPDIAG_HIST_BINS (or, /quant's, AMPDIAG_QHIST_BINS) unsigned
 * little-endian 64-bit integers, copied. */
static int plan_bins(struct fieldop *o, hid_t mt, trace_ftype t)
{
    hsize_t dim = 0;
    if (H5Tget_class(mt) != H5T_ARRAY || H5Tget_array_ndims(mt) != 1 ||
        H5Tget_array_dims2(mt, &dim) != 1 || dim != trace_ftype_array_len(t))
        return -1;
    hid_t base = H5Tget_super(mt);
    int ok = base >= 0 && H5Tequal(base, H5T_STD_U64LE) > 0;
    if (base >= 0)
        H5Tclose(base);
    o->ssize = o->dsize;
    o->op = OP_BYTES;
    return ok ? 0 : -1;
}

/* A fixed-length string, NUL-terminated or NUL-padded in the file, read as HDF5 converts it:
 * its bytes up to the first NUL (at most the record's size), the rest of the record's bytes
 * NUL, the last one always. */
static int plan_str(struct fieldop *o, hid_t mt)
{
    if (H5Tget_class(mt) != H5T_STRING || H5Tis_variable_str(mt) != 0)
        return -1;
    H5T_str_t pad = H5Tget_strpad(mt);
    o->ssize = H5Tget_size(mt);
    o->op = OP_STR;
    return (pad == H5T_STR_NULLTERM || pad == H5T_STR_NULLPAD) && o->ssize > 0 ? 0 : -1;
}

static int plan_field(struct fieldop *o, const trace_field *f, hid_t ftype, size_t row_size)
{
    int idx = H5Tget_member_index(ftype, f->name);
    if (idx < 0)
        return -1;
    o->src = H5Tget_member_offset(ftype, (unsigned)idx);
    o->dst = f->offset;
    o->dsize = trace_field_msize(f);
    hid_t mt = H5Tget_member_type(ftype, (unsigned)idx);
    if (mt < 0 || !o->dsize) {
        if (mt >= 0)
            H5Tclose(mt);
        return -1;
    }
    int rc;
    switch (f->type) {
    case FT_F32: case FT_F64: rc = plan_float(o, mt, f->type); break;
    case FT_KIND: case FT_CODE: case FT_SCALING: case FT_QSCHEME: case FT_QRULE: case FT_QDIR: case FT_REASON:
        rc = plan_enum(o, mt, f->type);
        break;
    case FT_HIST: case FT_QHIST: rc = plan_bins(o, mt, f->type); break;
    case FT_STR: rc = plan_str(o, mt); break;
    default: rc = plan_int(o, mt, f->type); break;
    }
    H5Tclose(mt);
    /* every byte a conversion reads lies inside the stored row */
    return rc || o->ssize > row_size || o->src > row_size - o->ssize ? -1 : 0;
}

/* The filters: none, shuffle, deflate, or shuffle then deflate. */
static int plan_filters(trace_chunks *p, hid_t dcpl)
{
    int n = H5Pget_nfilters(dcpl);
    if (n < 0 || n > 2)
        return -1;
    for (int i = 0; i < n; i++) {
        unsigned flags, cd[8];
        size_t ncd = 8;
        char name[64];
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &ncd, cd, sizeof name, name, NULL);
        if (id == H5Z_FILTER_SHUFFLE && i == 0 && !p->shuffle)
            p->shuffle = 1;
        else if (id == H5Z_FILTER_DEFLATE && !p->deflate)
            p->deflate = 1;
        else
            return -1;
    }
    return 0;
}

static int plan_storage(trace_chunks *p, hid_t d, hid_t ftype)
{
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return -1;
    hsize_t dim = 0;
    int ok = H5Pget_layout(dcpl) == H5D_CHUNKED && H5Pget_chunk(dcpl, 1, &dim) == 1 && dim > 0 &&
             plan_filters(p, dcpl) == 0;
    H5Pclose(dcpl);
    p->chunk_rows = (size_t)dim;
    p->row_size = H5Tget_size(ftype);
    hid_t f = H5Iget_file_id(d);
    if (f < 0 || H5Fget_filesize(f, &p->file_size) < 0)
        ok = 0;
    if (f >= 0)
        H5Fclose(f);
    /* a damaged file may claim any chunk size: the scratch buffers stay small (this writer's
     * chunks are a few hundred kilobytes; HDF5 reads anything larger) */
    return ok && p->row_size > 0 && p->chunk_rows <= MAX_CHUNK_BYTES / p->row_size ? 0 : -1;
}

trace_chunks *trace_chunks_plan(hid_t d, hid_t ftype, const trace_table *tb, uint64_t absent)
{
    if (!little_endian_host() || getenv("AMPDIAG_NO_CHUNK_READER"))
        return NULL;
    trace_chunks *p = calloc(1, sizeof *p);
    if (!p || !(p->ops = calloc(tb->nfields, sizeof *p->ops))) {
        free(p);
        return NULL;
    }
    p->tb = tb;
    p->absent = absent;
    int ok = plan_storage(p, d, ftype) == 0;
    p->direct = p->shuffle;
    for (size_t i = 0; ok && i < tb->nfields; i++) {
        const trace_field *f = &tb->fields[i];
        struct fieldop *o = &p->ops[p->nops++];
        if (i < 64 && (absent & (UINT64_C(1) << i))) { /* as trace_rows_fix clears it */
            size_t size = trace_field_msize(f);
            *o = (struct fieldop){.op = f->type == FT_F64 ? OP_NAN : OP_ZERO, .dst = f->offset,
                                  .dsize = size};
            ok = size > 0;
            continue;
        }
        ok = plan_field(o, f, ftype, p->row_size) == 0;
        if (o->op != OP_ENUM && trace_ftype_is_enum(f->type))
            p->int_enums = 1;
        if (o->op == OP_BYTES || o->op == OP_STR)
            p->direct = 0;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    p->nthreads = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
    if (!ok) {
        trace_chunks_free(p);
        return NULL;
    }
    return p;
}

void trace_chunks_free(trace_chunks *p)
{
    if (!p)
        return;
    trace_chunks_cancel(p);
    free(p->ops);
    free(p);
}

/* ------------------------------------------------------------------------------------------
 * Decoding
 * ------------------------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------------------------
 * Unshuffling: byte b of row i of a shuffled chunk of `rows` rows is at b * rows + i. Rows are
 * put back together BLOCK_ROWS at a time into a small row-major scratch buffer (SSE2 transposes
 * 8 bytes of 16 rows in registers), from which the fields are converted.
 * ------------------------------------------------------------------------------------------ */

#define BLOCK_ROWS 16
#define BLOCK_MAX_ROW 4096 /* longer rows are unshuffled one at a time */

#ifdef __SSE2__
#include <emmintrin.h>

/* 16 values of 8 bytes from 8 byte planes (plane k at pl + k * rows) into out, stride apart. */
static inline void planes8_x16(const unsigned char *pl, size_t rows, unsigned char *out, size_t stride)
{
    __m128i v[8], a[8], c[8];
    for (int k = 0; k < 8; k++)
        v[k] = _mm_loadu_si128((const __m128i *)(const void *)(pl + (size_t)k * rows));
    for (int k = 0; k < 4; k++) { /* pairs of bytes: a[2k] rows 0-7, a[2k+1] rows 8-15 */
        a[2 * k] = _mm_unpacklo_epi8(v[2 * k], v[2 * k + 1]);
        a[2 * k + 1] = _mm_unpackhi_epi8(v[2 * k], v[2 * k + 1]);
    }
    for (int k = 0; k < 2; k++) { /* four bytes: c[4k + q] rows 4q..4q+3 of bytes 4k..4k+3 */
        c[4 * k] = _mm_unpacklo_epi16(a[4 * k], a[4 * k + 2]);
        c[4 * k + 1] = _mm_unpackhi_epi16(a[4 * k], a[4 * k + 2]);
        c[4 * k + 2] = _mm_unpacklo_epi16(a[4 * k + 1], a[4 * k + 3]);
        c[4 * k + 3] = _mm_unpackhi_epi16(a[4 * k + 1], a[4 * k + 3]);
    }
    for (int q = 0; q < 4; q++) { /* eight bytes: rows 4q .. 4q+3 */
        __m128i lo = _mm_unpacklo_epi32(c[q], c[4 + q]), hi = _mm_unpackhi_epi32(c[q], c[4 + q]);
        unsigned char *o = out + (size_t)(4 * q) * stride;
        _mm_storel_epi64((__m128i *)(void *)o, lo);
        _mm_storel_epi64((__m128i *)(void *)(o + stride), _mm_unpackhi_epi64(lo, lo));
        _mm_storel_epi64((__m128i *)(void *)(o + 2 * stride), hi);
        _mm_storel_epi64((__m128i *)(void *)(o + 3 * stride), _mm_unpackhi_epi64(hi, hi));
    }
}

/* Bytes [b, b + 8) of 16 rows (from row i0) into out (rows row_size apart). */
static void unshuffle_8x16(const unsigned char *data, size_t rows, size_t row_size, size_t i0,
                           size_t b, unsigned char *out)
{
    planes8_x16(data + b * rows + i0, rows, out + b, row_size);
}

/* 16 values of 4 bytes from 4 byte planes: c[q] holds rows 4q .. 4q+3. */
static inline void planes4_x16(const unsigned char *pl, size_t rows, __m128i c[4])
{
    __m128i v[4];
    for (int k = 0; k < 4; k++)
        v[k] = _mm_loadu_si128((const __m128i *)(const void *)(pl + (size_t)k * rows));
    __m128i a0 = _mm_unpacklo_epi8(v[0], v[1]), a1 = _mm_unpackhi_epi8(v[0], v[1]);
    __m128i a2 = _mm_unpacklo_epi8(v[2], v[3]), a3 = _mm_unpackhi_epi8(v[2], v[3]);
    c[0] = _mm_unpacklo_epi16(a0, a2);
    c[1] = _mm_unpackhi_epi16(a0, a2);
    c[2] = _mm_unpacklo_epi16(a1, a3);
    c[3] = _mm_unpackhi_epi16(a1, a3);
}
#endif

/* Rows [i0, i0 + n) of a shuffled chunk of `rows` rows into n rows of row_size bytes at out. */
static void unshuffle_rows(const unsigned char *data, size_t rows, size_t row_size, size_t i0,
                           size_t n, unsigned char *out)
{
    size_t b = 0;
#ifdef __SSE2__
    if (n == 16)
        for (; b + 8 <= row_size; b += 8)
            unshuffle_8x16(data, rows, row_size, i0, b, out);
#endif
    for (; b < row_size; b++)
        for (size_t i = 0; i < n; i++)
            out[i * row_size + b] = data[b * rows + i0 + i];
}

/* The ssize bytes of a little-endian value at p (the host is little-endian). */
static inline uint64_t load_le(const unsigned char *p, size_t ssize)
{
    uint64_t u8;
    uint32_t u4;
    uint16_t u2;
    switch (ssize) { /* constant sizes: single loads */
    case 8: memcpy(&u8, p, 8); return u8;
    case 4: memcpy(&u4, p, 4); return u4;
    case 2: memcpy(&u2, p, 2); return u2;
    default: return p[0];
    }
}

/* The low size bytes of u at p. */
static inline void store_le(unsigned char *p, uint64_t u, size_t size)
{
    uint32_t u4 = (uint32_t)u;
    uint16_t u2 = (uint16_t)u;
    switch (size) {
    case 8: memcpy(p, &u, 8); break;
    case 4: memcpy(p, &u4, 4); break;
    case 2: memcpy(p, &u2, 2); break;
    default: p[0] = (unsigned char)u; break;
    }
}

/* A field's stored value u (its ssize low bytes) into rec, for the ops of fixed size. */
static inline void convert_value(const struct fieldop *o, uint64_t u, unsigned char *rec)
{
    if (o->op == OP_COPY) { /* same size (1, 2, 4 or 8 bytes) */
        store_le(rec + o->dst, u, o->ssize);
        return;
    }
    if (o->op == OP_ENUM) {
        int32_t v = o->map[u & 0xff];
        memcpy(rec + o->dst, &v, 4);
        return;
    }
    if (o->op == OP_F32_F64) {
        uint32_t b = (uint32_t)u;
        float f;
        memcpy(&f, &b, 4);
        double v = f;
        memcpy(rec + o->dst, &v, 8);
        return;
    }
    if (o->is_signed && ((u >> (8 * o->ssize - 1)) & 1))
        u |= ~UINT64_C(0) << (8 * o->ssize);
    store_le(rec + o->dst, u, o->dsize);
}

/* An optional field the file lacks, as trace_rows_fix clears it. */
static inline void absent_field(const struct fieldop *o, unsigned char *rec)
{
    if (o->op == OP_NAN) {
        double nan = NAN;
        memcpy(rec + o->dst, &nan, 8);
    } else if (o->dsize == 8) { /* the common case: one store */
        uint64_t zero = 0;
        memcpy(rec + o->dst, &zero, 8);
    } else {
        memset(rec + o->dst, 0, o->dsize);
    }
}

/* One field of a stored row (row-major) into rec. */
static inline void convert_field(const struct fieldop *o, const unsigned char *row, unsigned char *rec)
{
    if (o->op == OP_ZERO || o->op == OP_NAN) {
        absent_field(o, rec);
        return;
    }
    if (o->op == OP_BYTES) {
        memcpy(rec + o->dst, row + o->src, o->ssize);
        return;
    }
    if (o->op == OP_STR) {
        const unsigned char *nul = memchr(row + o->src, 0, o->ssize);
        size_t n = nul ? (size_t)(nul - (row + o->src)) : o->ssize;
        n = n < o->dsize ? n : o->dsize;
        memcpy(rec + o->dst, row + o->src, n);
        memset(rec + o->dst + n, 0, o->dsize - n);
        rec[o->dst + o->dsize - 1] = 0;
        return;
    }
    convert_value(o, load_le(row + o->src, o->ssize), rec);
}

/* A field of size bytes copied from n rows (ss bytes apart) to n records (ds apart); size is a
 * constant where it is called, so each copy is one load and one store. */
static inline void copy_fixed(unsigned char *d, size_t ds, const unsigned char *s, size_t ss, size_t n,
                              size_t size)
{
    for (size_t i = 0; i < n; i++)
        memcpy(d + i * ds, s + i * ss, size);
}

/* n row-major stored rows into records at out, field by field. */
static void convert_rows(const trace_chunks *p, const unsigned char *rows, size_t n, unsigned char *out)
{
    size_t ss = p->row_size, ds = p->tb->rec_size;
    for (size_t k = 0; k < p->nops; k++) {
        const struct fieldop *o = &p->ops[k];
        unsigned char *d = out + o->dst;
        const unsigned char *s = rows + o->src;
        if (o->op == OP_COPY && o->ssize == 8)
            copy_fixed(d, ds, s, ss, n, 8);
        else if (o->op == OP_COPY && o->ssize == 4)
            copy_fixed(d, ds, s, ss, n, 4);
        else
            for (size_t i = 0; i < n; i++)
                convert_field(o, rows + i * ss, out + i * ds);
    }
}

/* n rows (from row i0) of a shuffled chunk of `rows` rows into records at out, each field
 * gathered from its byte planes (p->direct: fixed-size fields only). */
static void gather_rows(const trace_chunks *p, const unsigned char *data, size_t rows, size_t i0,
                        size_t n, unsigned char *out)
{
    size_t ds = p->tb->rec_size;
    for (size_t k = 0; k < p->nops; k++) {
        const struct fieldop *o = &p->ops[k];
        const unsigned char *pl = data + o->src * rows + i0;
        unsigned char *d = out + o->dst;
        if (o->op == OP_ZERO || o->op == OP_NAN) {
            for (size_t i = 0; i < n; i++)
                absent_field(o, out + i * ds);
            continue;
        }
#ifdef __SSE2__
        if (n == 16 && o->op == OP_COPY && o->ssize == 8) {
            planes8_x16(pl, rows, d, ds);
            continue;
        }
        if (n == 16 && o->ssize == 4 && (o->op == OP_COPY || o->op == OP_F32_F64)) {
            __m128i c[4];
            planes4_x16(pl, rows, c);
            for (int q = 0; q < 4; q++) {
                unsigned char *r = d + (size_t)(4 * q) * ds;
                if (o->op == OP_F32_F64) {
                    __m128d lo = _mm_cvtps_pd(_mm_castsi128_ps(c[q]));
                    __m128d hi = _mm_cvtps_pd(_mm_castsi128_ps(_mm_unpackhi_epi64(c[q], c[q])));
                    _mm_storel_pd((double *)(void *)r, lo);
                    _mm_storeh_pd((double *)(void *)(r + ds), lo);
                    _mm_storel_pd((double *)(void *)(r + 2 * ds), hi);
                    _mm_storeh_pd((double *)(void *)(r + 3 * ds), hi);
                } else {
                    for (int j = 0; j < 4; j++) {
                        uint32_t u = (uint32_t)_mm_cvtsi128_si32(c[q]);
                        memcpy(r + (size_t)j * ds, &u, 4);
                        c[q] = _mm_srli_si128(c[q], 4);
                    }
                }
            }
            continue;
        }
#endif
        for (size_t i = 0; i < n; i++) {
            uint64_t u = 0;
            for (size_t b = 0; b < o->ssize; b++)
                u |= (uint64_t)pl[b * rows + i] << (8 * b);
            convert_value(o, u, out + i * ds);
        }
    }
}

/* One stored chunk: raw bytes in, rows [from, to) of it out as records at out. */
struct chunk_job {
    const unsigned char *raw;
    size_t raw_size;
    size_t from, to;
    unsigned char *out;
};

struct worker {
    const trace_chunks *p;
    struct chunk_job *jobs;
    size_t njobs, first, step; /* jobs first, first + step, ... */
    unsigned char *plain;        /* scratch: one chunk inflated */
    unsigned char *block;        /* scratch: block_rows(p) rows unshuffled */
    struct libdeflate_decompressor *d; /* NULL: zlib */
    int failed;
    int bad_step;
};

static size_t block_rows(const trace_chunks *p)
{
    return p->row_size <= BLOCK_MAX_ROW ? BLOCK_ROWS : 1;
}

static int decode_chunk(const trace_chunks *p, const struct chunk_job *j, unsigned char *plain,
                        unsigned char *block, struct libdeflate_decompressor *d)
{
    size_t size = p->chunk_rows * p->row_size;
    const unsigned char *data = j->raw;
    if (p->deflate) {
        if (inflate_exact(d, j->raw, j->raw_size, plain, size))
            return -1;
        data = plain;
    } else if (j->raw_size != size) {
        return -1;
    }
    if (!p->shuffle) {
        convert_rows(p, data + j->from * p->row_size, j->to - j->from, j->out);
        return 0;
    }
    if (p->direct) {
        for (size_t i = j->from; i < j->to; i += BLOCK_ROWS) {
            size_t n = j->to - i < BLOCK_ROWS ? j->to - i : BLOCK_ROWS;
            gather_rows(p, data, p->chunk_rows, i, n, j->out + (i - j->from) * p->tb->rec_size);
        }
        return 0;
    }
    size_t nb = block_rows(p);
    for (size_t i = j->from; i < j->to; i += nb) {
        size_t n = j->to - i < nb ? j->to - i : nb;
        unshuffle_rows(data, p->chunk_rows, p->row_size, i, n, block);
        convert_rows(p, block, n, j->out + (i - j->from) * p->tb->rec_size);
    }
    return 0;
}

/* A chunk's rows decoded, then fixed up as the HDF5 path fixes them (while they are in cache);
 * *bad_step set when a step is outside the limit. */
static int decode_job(const trace_chunks *p, const struct chunk_job *j, unsigned char *plain,
                      unsigned char *block, struct libdeflate_decompressor *d, int *bad_step)
{
    if (decode_chunk(p, j, plain, block, d))
        return -1;
    if (p->int_enums) /* the absent fields and the enums' unknown names are done */
        trace_rows_fix(p->tb, 0, j->out, j->to - j->from);
    trace_events_fix(p->tb, p->absent, j->out, j->to - j->from);
    *bad_step |= trace_rows_bad_step(p->tb, j->out, j->to - j->from);
    return 0;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    for (size_t k = w->first; k < w->njobs && !w->failed; k += w->step)
        if (decode_job(w->p, &w->jobs[k], w->plain, w->block, w->d, &w->bad_step))
            w->failed = 1;
    return NULL;
}

/* The chunks' stored bytes, read through HDF5 (one thread). */
static int read_raw(trace_chunks *p, hid_t d, size_t first, size_t count, void *buf,
                    struct chunk_job *jobs, size_t njobs, unsigned char **raw)
{
    size_t c0 = first / p->chunk_rows;
    for (size_t k = 0; k < njobs; k++) {
        hsize_t off = (hsize_t)(c0 + k) * p->chunk_rows, nbytes = 0;
        uint32_t mask = 0;
        if (H5Dget_chunk_storage_size(d, &off, &nbytes) < 0 || nbytes == 0 ||
            nbytes > p->file_size || !(raw[k] = malloc((size_t)nbytes)) ||
            H5Dread_chunk(d, H5P_DEFAULT, &off, &mask, raw[k]) < 0 || mask != 0)
            return -1;
        size_t a = (size_t)off > first ? (size_t)off : first;
        size_t b = (size_t)off + p->chunk_rows < first + count ? (size_t)off + p->chunk_rows
                                                               : first + count;
        jobs[k] = (struct chunk_job){raw[k], (size_t)nbytes, a - (size_t)off, b - (size_t)off,
                                     (unsigned char *)buf + (a - first) * p->tb->rec_size};
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Batches: the rows of one read, their chunks' stored bytes and the workers that decode them.
 * A read decodes its batch on the workers' threads and its own; a prefetch (the rows a reader
 * reading the table in order asks for next) starts every worker on a thread of its own and
 * returns: the caller works on the rows it has while the next ones are decoded.
 * ------------------------------------------------------------------------------------------ */

struct batch {
    size_t first, count;
    unsigned char *buf; /* the records */
    struct chunk_job *jobs;
    unsigned char **raw;
    size_t njobs;
    int nt;
    struct worker w[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    int started[MAX_THREADS];
};

/* Free what a batch holds but its records (all threads joined). */
static void batch_release(struct batch *b)
{
    for (int t = 0; t < b->nt; t++) {
        free(b->w[t].plain);
        free(b->w[t].block);
        if (b->w[t].d)
            ld.release(b->w[t].d);
    }
    for (size_t k = 0; b->raw && k < b->njobs; k++)
        free(b->raw[k]);
    free(b->raw);
    free(b->jobs);
    b->nt = 0;
    b->raw = NULL;
    b->jobs = NULL;
}

/* Read the stored bytes of rows [first, first + count) (through HDF5, on this thread) and make
 * the workers that decode them into buf. 0, or -1 (b released). */
static int batch_setup(trace_chunks *p, hid_t d, size_t first, size_t count, void *buf,
                       struct batch *b)
{
    memset(b, 0, sizeof *b);
    b->first = first;
    b->count = count;
    b->buf = buf;
    b->njobs = (first + count - 1) / p->chunk_rows - first / p->chunk_rows + 1;
    b->jobs = calloc(b->njobs, sizeof *b->jobs);
    b->raw = calloc(b->njobs, sizeof *b->raw);
    int rc = !b->jobs || !b->raw ? -1 : read_raw(p, d, first, count, buf, b->jobs, b->njobs, b->raw);
    size_t size = p->chunk_rows * p->row_size;
    pthread_once(&ld_once, ld_load);
    b->nt = rc ? 0 : (size_t)p->nthreads < b->njobs ? p->nthreads : (int)b->njobs;
    for (int t = 0; t < b->nt; t++) {
        b->w[t] = (struct worker){p, b->jobs, b->njobs, (size_t)t, (size_t)b->nt, malloc(size),
                                  malloc(block_rows(p) * p->row_size), ld.alloc ? ld.alloc() : NULL,
                                  0, 0};
        if (!b->w[t].plain || !b->w[t].block || (ld.alloc && !b->w[t].d))
            rc = -1;
    }
    if (rc)
        batch_release(b);
    return rc;
}

/* Start workers [from, nt) on threads of their own. */
static void batch_start(struct batch *b, int from)
{
    for (int t = from; t < b->nt; t++)
        b->started[t] = pthread_create(&b->th[t], NULL, work, &b->w[t]) == 0;
}

/* Do here what no thread does, wait for the threads, release b. 0, or -1 when a chunk did not
 * decode; *bad_step as trace_chunks_read says. */
static int batch_finish(struct batch *b, int *bad_step)
{
    int rc = 0;
    int depth = trace_h5_release(); /* decoding makes no HDF5 call: other readers may go on */
    for (int t = 0; t < b->nt; t++)
        if (!b->started[t])
            work(&b->w[t]);
    for (int t = 0; t < b->nt; t++) {
        if (b->started[t])
            pthread_join(b->th[t], NULL);
        rc |= b->w[t].failed ? -1 : 0;
        *bad_step |= b->w[t].bad_step;
    }
    batch_release(b);
    trace_h5_reacquire(depth);
    return rc;
}

int trace_chunks_read(trace_chunks *p, hid_t d, size_t first, size_t count, void *buf, int *bad_step)
{
    *bad_step = 0;
    if (!p || count == 0)
        return -1;
    trace_chunks_cancel(p); /* a read the prefetch did not foresee */
    struct batch b;
    if (batch_setup(p, d, first, count, buf, &b))
        return -1;
    batch_start(&b, 1); /* worker 0 on this thread */
    return batch_finish(&b, bad_step);
}

void trace_chunks_prefetch(trace_chunks *p, hid_t d, size_t first, size_t count)
{
    if (!p)
        return;
    trace_chunks_cancel(p);
    if (count < 2 * p->chunk_rows || count > SIZE_MAX / p->tb->rec_size)
        return; /* small reads are not worth a thread */
    struct batch *b = malloc(sizeof *b);
    void *buf = malloc(count * p->tb->rec_size);
    if (!b || !buf || batch_setup(p, d, first, count, buf, b)) {
        free(b);
        free(buf);
        return;
    }
    batch_start(b, 0);
    p->pre = b;
}

void *trace_chunks_take(trace_chunks *p, size_t first, size_t count, int *bad_step)
{
    *bad_step = 0;
    if (!p || !p->pre)
        return NULL;
    if (p->pre->first != first || p->pre->count != count) {
        trace_chunks_cancel(p);
        return NULL;
    }
    struct batch *b = p->pre;
    p->pre = NULL;
    void *buf = b->buf;
    if (batch_finish(b, bad_step)) {
        free(buf);
        buf = NULL; /* read again: that read reports the error */
        *bad_step = 0;
    }
    free(b);
    return buf;
}

void trace_chunks_cancel(trace_chunks *p)
{
    if (!p || !p->pre)
        return;
    int bad_step = 0;
    batch_finish(p->pre, &bad_step);
    free(p->pre->buf);
    free(p->pre);
    p->pre = NULL;
}
