/*
 * trace_chunks.h - reading a table straight from its stored chunks, in parallel.
 *
 * The long tables of a trace (/tensors: one row per layer and tensor kind per step; /whatif,
 * two to four rows per tensor row) are read mostly by inflating deflated chunks. HDF5 does
 * that, the shuffle and the conversion of every field on one thread; for tables stored the
 * plain way (chunked, shuffle and deflate or less, little-endian fields that convert without
 * loss, enums of one byte, fixed-length NUL-terminated or NUL-padded strings) this reads each
 * chunk's stored bytes with H5Dread_chunk and inflates and converts the chunks on a few
 * threads: where every field has a fixed size, each field of 16 rows is gathered from its
 * shuffled byte planes straight into the records (absent optional fields and unknown enum names
 * written as trace_rows_fix writes them); tables with strings or histogram bins are unshuffled
 * 16 rows at a time into a scratch block and converted from there, then fixed up by
 * trace_rows_fix. Anything else (other filters, other types, a chunk not stored, a chunk that
 * does not inflate to its size) makes the caller read through HDF5 as before, which reports
 * errors its own way. A reader reading a table in order has the next rows decoded while it
 * works on the current ones (trace_chunks_prefetch).
 *
 * Chunks are inflated with libdeflate where the system has libdeflate.so.0 (loaded at run time;
 * it checks the Adler-32 sum as zlib does, in about half the time), else with zlib; setting
 * AMPDIAG_NO_LIBDEFLATE in the environment uses zlib (tests/t_long_trace.sh checks both).
 * Setting AMPDIAG_NO_CHUNK_READER reads every table through HDF5 (fuzz/fuzz_trace_h5.c fuzzes
 * that path; before HDF5 reads a deflated chunk, h5safe_check_chunks checks that it does not
 * inflate beyond its size).
 */
#ifndef AMPDIAG_TRACE_CHUNKS_H
#define AMPDIAG_TRACE_CHUNKS_H

#include "trace/trace_internal.h"

typedef struct trace_chunks trace_chunks;

/* A plan for table tb stored as dataset d with compound file type ftype (absent: bit i set when
 * optional field i is not in the file), or NULL when the table is not stored the plain way (or
 * out of memory): the caller then reads through HDF5. */
trace_chunks *trace_chunks_plan(hid_t d, hid_t ftype, const trace_table *tb, uint64_t absent);
void trace_chunks_free(trace_chunks *p);

/* Rows [first, first + count) as public records into buf (count * tb->rec_size bytes), as
 * trace_rows_fix leaves them; *bad_step set when a row's step lies outside the limit
 * (trace_rows_bad_step). 0, or -1 when this way cannot read them (read through HDF5). */
int trace_chunks_read(trace_chunks *p, hid_t d, size_t first, size_t count, void *buf, int *bad_step);

/* Start decoding rows [first, first + count) on threads of their own, for the next read
 * (trace_chunks_take) while the caller works on the rows it has: a reader reading a table in
 * order. Any earlier prefetch is cancelled; nothing happens for a read of fewer than two
 * chunks, or when it cannot start (the read then reads). Reads the chunks' stored bytes through
 * HDF5 on this thread: its errors are left on HDF5's error stack (clear it). */
void trace_chunks_prefetch(trace_chunks *p, hid_t d, size_t first, size_t count);
/* The records of rows [first, first + count) if they were prefetched and decoded (the caller
 * frees them), with *bad_step as trace_chunks_read sets it; else NULL (any prefetch of other
 * rows is cancelled): read them. */
void *trace_chunks_take(trace_chunks *p, size_t first, size_t count, int *bad_step);
/* Wait for a prefetch and drop it (nothing when none). */
void trace_chunks_cancel(trace_chunks *p);

#endif
