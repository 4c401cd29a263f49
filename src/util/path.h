/* path.h - file names given on the command line, checked before any work starts. */
#ifndef AMPDIAG_UTIL_PATH_H
#define AMPDIAG_UTIL_PATH_H

#include <stddef.h>

/* 1 when path is longer than this system takes (the whole path, or one of its names): the
 * caller refuses it as bad input (exit 2). msg (n bytes) then says so, with the path shortened
 * to its first and last characters; 0 otherwise. */
int path_too_long(const char *path, char *msg, size_t n);

/* The path as it may appear in a message: itself when short, else its first 60 and last 40
 * characters around "...". Returns buf. */
const char *path_short(const char *path, char *buf, size_t n);

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
