/*
 * trace_internal.h - what the trace writer (trace.c) and reader (trace_read.c) share: the table
 * schema as data, HDF5 type construction, and error reporting. Only the sources of src/trace/
 * include it; with them, it is all of libampdiag that includes hdf5.h (elsewhere in src/, only
 * the data and weights files, src/train/data.c and src/train/weights.c, use HDF5).
 */
#ifndef AMPDIAG_TRACE_INTERNAL_H
#define AMPDIAG_TRACE_INTERNAL_H

#include "ampdiag_trace.h"

#include <hdf5.h>
#include <stddef.h>

/* Field types: each maps to a native memory type and a little-endian file type. */
typedef enum trace_ftype {
    FT_I64,  /* int64_t        <-> int64 */
    FT_I32,  /* int32_t        <-> int32 */
    FT_BOOL, /* int32_t        <-> uint8 (0/1) */
    FT_U64,  /* uint64_t       <-> uint64 */
    FT_F32,  /* float          <-> float32 */
    FT_F64,  /* double         <-> float64 */
    FT_STR,  /* char[size]     <-> fixed-length string of size bytes, NUL-terminated */
    FT_KIND, /* int32_t        <-> enum "tensor_kind" (uint8) */
    FT_CODE, /* int32_t        <-> enum "event_code" (uint8) */
    FT_SCALING, /* int32_t     <-> enum "whatif_scaling" (uint8) */
    FT_HIST,  /* uint64_t[281]  <-> uint64 array [281] */
    FT_QSCHEME, /* int32_t     <-> enum "quant_scheme" (uint8) */
    FT_QRULE,   /* int32_t     <-> enum "quant_rule" (uint8) */
    FT_QDIR,    /* int32_t     <-> enum "quant_direction" (uint8) */
    FT_QHIST,   /* uint64_t[32] <-> uint64 array [32] */
    FT_REASON   /* int32_t      <-> enum "record_reason" (uint8) */
} trace_ftype;

/* The enum field types (stored as HDF5 enums, or plain integers in files of other writers), and
 * the length of the array ones (0 for the others). */
static inline int trace_ftype_is_enum(trace_ftype t)
{
    return t == FT_KIND || t == FT_CODE || t == FT_SCALING || t == FT_QSCHEME || t == FT_QRULE || t == FT_QDIR ||
           t == FT_REASON;
}
#define FT_IS_ENUM(t) trace_ftype_is_enum(t)
static inline size_t trace_ftype_array_len(trace_ftype t)
{
    return t == FT_HIST ? AMPDIAG_HIST_BINS : t == FT_QHIST ? AMPDIAG_QHIST_BINS : 0;
}

typedef struct trace_field {
    const char *name;
    trace_ftype type;
    size_t offset; /* in the public record struct */
    size_t size;   /* FT_STR: bytes including the NUL */
    int optional;  /* added to format v1 after files without it existed: a reader accepts a table
                      without this field and reads it as 0 */
    int v1_only;   /* a field of version 1 that version 2 keeps elsewhere: the writer leaves it
                      out (the reader still reads it where a file has it) */
} trace_field;

enum { TBL_LAYERS, TBL_STEPS, TBL_TENSORS, TBL_HISTS, TBL_EVENTS, TBL_EVALS, TBL_FORMATS, TBL_WHATIF,
       TBL_QUANT, TBL_EVAL_EXAMPLES, TBL_TRACED, TBL_N };

typedef struct trace_table {
    const char *path;          /* "/steps" */
    const char *what;          /* "step" (for messages) */
    const trace_field *fields;
    size_t nfields;
    size_t rec_size;           /* sizeof the public record */
    hsize_t chunk_rows;
    size_t key_offset;         /* int64 step, or int32 index for /layers: -1 in fill rows */
    int key_is_i32;
    int since;                 /* the format version that made the table required: an older
                                  trace without it reads it as empty (/quant: 3, a version that
                                  does not exist yet: optional in version 2; 0: optional in every
                                  version, as /traced) */
} trace_table;

extern const trace_table trace_tables[TBL_N];

/* HDF5 types (the caller closes them). for_file: packed little-endian file type; otherwise the
 * native memory type laid out as the public struct. */
hid_t trace_field_type(trace_ftype t, size_t size, int for_file);
hid_t trace_table_type(const trace_table *tb, int for_file);
/* The same with only the fields this version writes (no v1_only field): the writer's types. */
hid_t trace_table_wtype(const trace_table *tb, int for_file);
/* This version's value of an enum member name of an enum field type (FT_IS_ENUM); -1 when it
 * does not know the name. */
int trace_enum_parse(trace_ftype t, const char *name);
/* Fill a record with the table's fill value (key = -1, floats NaN, the rest 0). */
void trace_fill_record(const trace_table *tb, void *rec);

/* Steps must lie in [-2^53, 2^53] (traces/FORMAT.md, "Limits"): differences of steps and their
 * conversion to double are then exact, and never overflow int64. */
#define AMPDIAG_TRACE_MAX_STEP (INT64_C(1) << 53)
/* Bytes a field takes in the public record (see trace_ftype). */
size_t trace_field_msize(const trace_field *f);
/* Rows as read, made what the public records promise: every fixed-length string ends within
 * its field (its last byte NUL); enum values this version does not know (negative) read as -1;
 * optional fields the file lacks (bit i of absent: field i) as 0, a float one as NaN (not
 * recorded: 0 would be a value). */
void trace_rows_fix(const trace_table *tb, uint64_t absent, void *rows, size_t n);
/* Events read (rows of /events, after trace_rows_fix): their phase and rows made what the
 * record promises; a trace older than those fields has them from its messages (once, here).
 * Nothing for another table. */
void trace_events_fix(const trace_table *tb, uint64_t absent, void *rows, size_t n);
/* 1 when a row's step lies outside [-AMPDIAG_TRACE_MAX_STEP, AMPDIAG_TRACE_MAX_STEP] (tables
 * keyed by step), else 0. */
int trace_rows_bad_step(const trace_table *tb, const void *rows, size_t n);

/* Errors: a per-thread message buffer. trace_fail formats it and returns code. */
int trace_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What the current HDF5 error stack says: the innermost description, the OS error text when
 * one is quoted, and flags for the conditions the reader distinguishes. */
typedef struct trace_h5err {
    char detail[256];  /* short human text: OS error if any, else the innermost description */
    int not_hdf5;      /* "file signature not found" */
    int truncated;     /* "truncated file" */
    int open_for_write;/* "file is already open for write" */
    int locked;        /* "unable to lock the file" */
    int os_errno;      /* errno quoted by the stack, 0 if none */
} trace_h5err;
void trace_h5err_get(trace_h5err *e);
/* Cleanup calls (H5Sclose, ...) clear HDF5's error stack: capture it at the failing call, take it
 * where the error is reported (take falls back to the current stack if nothing was captured).
 * trace_quiet_begin forgets a capture. */
void trace_h5err_capture(void);
void trace_h5err_take(trace_h5err *e);
/* The end of a hyperslab read or write: capture the error stack when it failed (!ok), then close
 * the memory and file dataspaces (each when >= 0). */
void trace_h5_io_end(int ok, hid_t ms, hid_t fs);

/* A public call's use of HDF5: trace_quiet_begin takes the process's HDF5 lock (HDF5 1.10 as
 * Debian builds it is not thread-safe: two readers on two threads take turns in it) and
 * silences HDF5's automatic error printing; trace_quiet_end undoes both. Sections nest on one
 * thread (the lock is taken and the printing silenced by the outermost). */
typedef struct trace_quiet {
    int unused;
} trace_quiet;
/* A growing byte buffer (trace_sandbox.c); failed is set when memory ran out. */
typedef struct trace_buf {
    char *data;
    size_t len, cap;
    int failed;
} trace_buf;
void trace_buf_put(trace_buf *b, const void *p, size_t n);
/* Take n bytes at *pos (advanced); -1 when fewer are left. */
int trace_buf_get(const trace_buf *b, size_t *pos, void *p, size_t n);

/* Run fn(arg, out) in a forked child (stderr to /dev/null) and take back what it put in out:
 * at most max bytes within timeout_ms of the child's CPU time (and TRACE_SANDBOX_WALL_FACTOR
 * times that of wall time; trace_sandbox.c). fn returns 0, or non-zero to fail. 0
 * with *out filled (free out->data), or one of the failures below. */
typedef int (*trace_sandbox_fn)(void *arg, trace_buf *out);
#define TRACE_SANDBOX_MAX_RSS ((size_t)512 << 20)
#define TRACE_PROBE_MS 5000 /* the CPU-time limit of a probe of a file's structure */
#define TRACE_SANDBOX_WALL_FACTOR 12 /* a child using no CPU (blocked) is stopped after 12 x the
                                        limit of wall time */
enum {
    TRACE_SANDBOX_CRASHED = 1, /* the child died on a signal */
    TRACE_SANDBOX_FAILED,      /* it exited with an error, or the pipe failed */
    TRACE_SANDBOX_TIMEOUT,     /* it used more than timeout_ms of CPU time (killed) */
    TRACE_SANDBOX_TOO_BIG,     /* it sent more than max bytes (killed) */
    TRACE_SANDBOX_MEMORY,      /* it took TRACE_SANDBOX_MAX_RSS more memory than the parent has
                                  (killed) */
    TRACE_SANDBOX_NOMEM        /* no pipe, process or memory */
};
int trace_sandbox_run(trace_sandbox_fn fn, void *arg, size_t max, long timeout_ms, trace_buf *out);

void trace_quiet_begin(trace_quiet *q);
void trace_quiet_end(const trace_quiet *q);
/* Let other threads into HDF5 while this one waits for work that makes no HDF5 call (the chunk
 * decoders): trace_h5_release returns how deep this thread was in quiet sections and leaves
 * them; trace_h5_reacquire(depth) enters them again. No-ops outside a section. */
int trace_h5_release(void);
void trace_h5_reacquire(int depth);

/* Copy src (at most srcmax bytes: it need not be NUL-terminated within them) into dst[size]
 * (size includes the NUL), cutting at a UTF-8 character boundary; returns 1 if src was cut. */
int trace_copy_text(char *dst, size_t size, const char *src, size_t srcmax);

#endif /* AMPDIAG_TRACE_INTERNAL_H */
