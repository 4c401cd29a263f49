/* h5safe.h - reading HDF5 files that may have been crafted: datasets must be stored in the
 * file that was named (no external or soft links, no external raw storage, no virtual
 * datasets), so that reading one never reads another local file. Used for traces, data and
 * weights files. */
#ifndef AMPDIAG_TRACE_H5SAFE_H
#define AMPDIAG_TRACE_H5SAFE_H

#include <hdf5.h>
#include <stddef.h>

/* A dataset-access property list (which is also a link-access one) that never traverses
 * external links (close with H5Pclose); -1 on failure. */
hid_t h5safe_lapl(void);

/* 0 when `name` (relative to loc) is a hard link to a dataset whose data lives in this file.
 * Otherwise -1 with why (n bytes) saying what it is instead ("an external link", "a virtual
 * dataset", ...); a missing name is reported too ("missing"). */
int h5safe_check_dataset(hid_t loc, const char *name, hid_t lapl, char *why, size_t n);

/* Open a dataset after h5safe_check_dataset; -1 (with why) when refused or unopenable. */
hid_t h5safe_open_dataset(hid_t loc, const char *name, hid_t lapl, char *why, size_t n);

/* After an H5Fopen that failed: 1 when HDF5 met an operating-system error other than "no
 * such file" (an I/O failure: exit 3), 0 when the file's contents are the problem (corrupt or
 * truncated: bad input, exit 2). detail (n bytes) gets HDF5's innermost message. */
int h5safe_open_failed_io(char *detail, size_t n);

#endif
