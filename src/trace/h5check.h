/*
 * h5check.h - checks on HDF5 files read from untrusted sources, before HDF5 is asked to read
 * data: the trace reader uses them, and so do the readers of `ampdiag run`'s data and weights
 * files (src/train/data.c, weights.c). Not part of the installed API.
 */
#ifndef AMPDIAG_H5CHECK_H
#define AMPDIAG_H5CHECK_H

#include <hdf5.h>
#include <stddef.h>

/* Whether every component of path ("/a/b") in file f is a hard link: 1 yes, 0 a component is
 * missing, -2 one is a soft, external or user-defined link (not followed), -1 HDF5 failed. */
int trace_h5_hard_path(hid_t f, const char *path);

/* NULL when dataset d of file f keeps its data in f itself, consistently with its shape and
 * type: no external raw storage, not virtual, a compact buffer of the data's size, contiguous
 * data of the data's size inside the file. Otherwise what is wrong, as a static text ("keeps
 * its data in external files"). HDF5 1.10 reads such datasets out of bounds. */
const char *trace_h5_storage_problem(hid_t f, hid_t d);

/*
 * Run fn(arg, msg, msglen) first in a child process (trace_sandbox.c), where HDF5's faults on a
 * damaged file (crashes, overflows, endless loops, runaway memory) cannot reach the caller.
 * Returns what fn returned there, with the message it left in msg; or TRACE_H5_PROBE_FAILED
 * with msg saying what happened to the child (prefixed by what, e.g. the file's name). The
 * caller then does the real work in its own process: the same HDF5 calls the child survived.
 */
#define TRACE_H5_PROBE_FAILED (-1000)
int trace_h5_probe(int (*fn)(void *arg, char *msg, size_t msglen), void *arg, const char *what,
                   char *msg, size_t msglen);

#endif
