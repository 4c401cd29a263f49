/*
 * h5safe.h - reading HDF5 files that may have been crafted (traces, data files, weights files;
 * not part of the installed API). Two defences:
 *
 * - Datasets must be stored in the file that was named: reached through hard links only (no
 *   external or soft link is followed), no external raw storage, no virtual dataset, and compact
 *   or contiguous storage of the data's size inside the file (HDF5 1.10 reads such datasets out
 *   of bounds). So reading one never reads another local file or past the file.
 * - A probe: the same HDF5 calls run first in a child process (trace_sandbox.c), where HDF5's
 *   faults on a damaged file (crashes, overflows, endless loops, runaway memory) cannot reach
 *   the caller.
 */
#ifndef AMPDIAG_TRACE_H5SAFE_H
#define AMPDIAG_TRACE_H5SAFE_H

#include <hdf5.h>
#include <stddef.h>

/* A dataset-access property list (which is also a link-access one) that never traverses
 * external links (close with H5Pclose); -1 on failure. */
hid_t h5safe_lapl(void);

/* What h5safe_open_dataset returns when it returns no dataset. */
enum {
    H5SAFE_MISSING = -1,   /* no such name */
    H5SAFE_REFUSED = -2,   /* a link, not a dataset, or stored elsewhere: why says which */
    H5SAFE_UNOPENABLE = -3 /* HDF5 could not open it (a corrupt file) */
};

/* Open dataset `name` (relative to loc; every component of the path a hard link) whose data
 * lives in this file. Otherwise one of the codes above, with why (n bytes) a phrase that
 * follows the name: "is an external link", "is a soft link", "keeps its data in external
 * files", "is a virtual dataset (its data lies in other files)", ... */
hid_t h5safe_open_dataset(hid_t loc, const char *name, hid_t lapl, char *why, size_t n);

/* NULL when dataset d keeps its data in its own file, consistently with its shape and type;
 * otherwise what is wrong, as a static phrase ("keeps its data in external files"). */
const char *h5safe_storage_problem(hid_t d);

/* After an H5Fopen that failed: 1 when HDF5 met an operating-system error other than "no
 * such file" (an I/O failure: exit 3), 0 when the file's contents are the problem (corrupt or
 * truncated: bad input, exit 2). detail (n bytes) gets HDF5's innermost message. */
int h5safe_open_failed_io(char *detail, size_t n);

/*
 * Run fn(arg, msg, msglen) first in a child process (trace_sandbox.c). Returns what fn
 * returned there, with the message it left in msg; or H5SAFE_PROBE_FAILED with msg saying what
 * happened to the child (prefixed by what, e.g. the file's name). The caller then does the
 * real work in its own process: the same HDF5 calls the child survived. fn must not touch a
 * device (a forked child may not use the parent's CUDA context).
 */
/*
 * Chunks that inflate beyond their size. HDF5's deflate filter inflates a chunk to whatever
 * size its stream makes (a few kilobytes can make gigabytes) and then keeps the part the chunk
 * needs. h5safe_check_chunks undoes the filters of each stored chunk of dataset d that rows
 * [first, first + count) touch (deflate, shuffle and Fletcher-32, in HDF5's order, each stage's
 * output bounded) before HDF5 reads them: a chunk must decode to at most its declared size (its
 * rows times the size of a stored row), and that size must be at most what the table's `rows`
 * rows need, or 64 MiB. Returns 0 (also for a dataset that is not chunked or not deflated, and
 * for a chunk that cannot be read: HDF5 then reports it), or H5SAFE_OVERSIZE with why (n bytes)
 * a phrase that follows the dataset's name: "has a chunk (rows 0 to 36) that inflates beyond
 * its 10360 bytes", "is deflated together with filter 307, which is not read".
 */
#define H5SAFE_OVERSIZE (-4)
int h5safe_check_chunks(hid_t d, size_t first, size_t count, size_t rows, char *why, size_t n);

#define H5SAFE_PROBE_FAILED (-1000)
int h5safe_probe(int (*fn)(void *arg, char *msg, size_t msglen), void *arg, const char *what,
                 char *msg, size_t msglen);

#endif
