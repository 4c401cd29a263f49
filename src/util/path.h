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

#endif
