/* path.h - file names given on the command line, checked before any work starts. */
#ifndef AMPDIAG_UTIL_PATH_H
#define AMPDIAG_UTIL_PATH_H

#include <stddef.h>
#include <stdio.h>

/* 1 when path is longer than this system takes (the whole path, or one of its names): the
 * caller refuses it as bad input (exit 2). msg (n bytes) then says so, with the path shortened
 * to its first and last characters; 0 otherwise. */
int path_too_long(const char *path, char *msg, size_t n);

/* The path as it may appear in a message: itself when short, else its first 60 and last 40
 * characters around "...". Returns buf. */
const char *path_short(const char *path, char *buf, size_t n);

/* An output file a command will write (a trace, weights, a report), checked before any work:
 * 0 when the command can write it, that is when path is a non-empty name that is not too long,
 * names nothing or (with overwrite) a regular file, and a file can be created in its directory
 * (tried: a temporary file made and removed there). Nothing but a regular file is ever
 * replaced: a directory, a device, a FIFO, a socket or a symbolic link is refused with or
 * without overwrite. Otherwise msg (n bytes) says what is wrong, naming the path ("'x' is a
 * directory, not a file", "'x' exists (use --overwrite to replace it)", "cannot create files in
 * '/proc': Permission denied"), and the result is 2 (bad usage) or 3 (the system failed: no
 * space, an I/O error, no file descriptors). */
int path_check_output(const char *path, int overwrite, char *msg, size_t n);

/* Open an output file for writing ("w"), replacing only a regular file: it is created when
 * missing, truncated when it is a regular file, and refused otherwise (a directory, a device, a
 * FIFO, a socket, a symbolic link), without blocking on a FIFO. NULL on failure, with why (n
 * bytes) saying what is wrong ("is a FIFO, not a regular file", or strerror's text). */
FILE *path_fopen_output(const char *path, char *why, size_t n);

/* Make directory path and its missing parents (an existing directory is fine). 0 on success;
 * otherwise msg (n bytes) names the directory and what went wrong, and the result is 2 for a
 * name that cannot be a directory (too long, or an existing file on the way) or 3 for an I/O
 * failure (permissions, a full disk). */
int path_make_dir(const char *path, char *msg, size_t n);

/* A fresh name "<path>.tmp-XXXXXX" next to path that nothing holds: made by mkstemp (so it is
 * unpredictable), then removed, so that the caller creates it with O_EXCL (HDF5's
 * H5F_ACC_EXCL), which refuses a symlink planted there in between. malloc'd; NULL with errno
 * set. */
char *path_tmp_name(const char *path);

#endif
