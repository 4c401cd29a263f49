/* path.c - file names given on the command line, checked before any work starts. */
#include "util/path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif
#ifndef NAME_MAX
#define NAME_MAX 255
#endif

const char *path_short(const char *path, char *buf, size_t n)
{
    size_t len = strlen(path);
    if (len <= 120)
        snprintf(buf, n, "%s", path);
    else
        snprintf(buf, n, "%.60s...%s", path, path + len - 40);
    return buf;
}

/* The longest name between slashes. */
static size_t longest_name(const char *path)
{
    size_t best = 0;
    while (*path) {
        size_t k = strcspn(path, "/");
        if (k > best)
            best = k;
        path += k;
        path += strspn(path, "/");
    }
    return best;
}

int path_make_dir(const char *path, char *msg, size_t n)
{
    char s[128];
    if (!*path) {
        snprintf(msg, n, "'': an empty directory name");
        return 2;
    }
    if (path_too_long(path, msg, n))
        return 2;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *c = p + 1;; c++) {
        if (*c && *c != '/')
            continue;
        char keep = *c;
        *c = 0;
        struct stat st;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            snprintf(msg, n, "cannot create the directory '%s': %s", path_short(p, s, sizeof s), strerror(e));
            return e == ENOTDIR || e == ENAMETOOLONG ? 2 : 3;
        }
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(msg, n, "'%s' exists and is not a directory", path_short(p, s, sizeof s));
            return 2;
        }
        if (!keep)
            return 0;
        *c = keep;
    }
}

int path_too_long(const char *path, char *msg, size_t n)
{
    size_t len = strlen(path), name = longest_name(path);
    struct stat st;
    int too_long = len >= PATH_MAX || name > NAME_MAX ||
                   (stat(path, &st) != 0 && errno == ENAMETOOLONG);
    if (!too_long)
        return 0;
    char s[128];
    snprintf(msg, n, "'%s': file name too long (%zu characters, the longest name %zu; this system "
             "takes at most %d in a path and %d in a name)",
             path_short(path, s, sizeof s), len, name, PATH_MAX - 1, NAME_MAX);
    return 1;
}

char *path_tmp_name(const char *path)
{
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp)
        return NULL;
    snprintf(tmp, n, "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        errno = e;
        return NULL;
    }
    close(fd);
    unlink(tmp);
    return tmp;
}

/* What a file that is not a regular one is, for a message. */
static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
           : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISLNK(m) ? "a symbolic link"
           : "not a regular file";
}

/* 2 for a name that cannot be a file to write (what path_make_dir says of a directory), 3 for
 * a failure of the system (permissions, a read-only or full file system, an I/O error). */
static int output_errno_code(int e)
{
    return e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG || e == ELOOP || e == EISDIR ||
                   e == EINVAL || e == EEXIST
               ? 2 : 3;
}

int path_check_output(const char *path, int overwrite, char *msg, size_t n)
{
    char s[128], d[128];
    if (!path || !*path) {
        snprintf(msg, n, "'': an empty file name");
        return 2;
    }
    if (path_too_long(path, msg, n))
        return 2;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(msg, n, "'%s' is a directory, not a file name", path_short(path, s, sizeof s));
            return 2;
        }
        if (!S_ISREG(st.st_mode)) {
            snprintf(msg, n, "'%s' is %s: only a regular file is ever replaced",
                     path_short(path, s, sizeof s), file_kind(st.st_mode));
            return 2;
        }
        if (!overwrite) {
            snprintf(msg, n, "'%s' exists (use --overwrite to replace it)", path_short(path, s, sizeof s));
            return 2;
        }
    } else if (errno != ENOENT && errno != ENOTDIR) { /* (ENOTDIR: said of its directory below) */
        int e = errno;
        snprintf(msg, n, "'%s': %s", path_short(path, s, sizeof s), strerror(e));
        return output_errno_code(e);
    }
    /* the writers make the file under a temporary name next to it, then rename it */
    char *tmp = path_tmp_name(path);
    if (!tmp) {
        int e = errno;
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (!slash)
            snprintf(dir, sizeof dir, ".");
        else if (slash == dir)
            dir[1] = 0;
        else
            *slash = 0;
        snprintf(msg, n, "'%s': cannot create files in '%s': %s", path_short(path, s, sizeof s),
                 path_short(dir, d, sizeof d), strerror(e));
        return output_errno_code(e);
    }
    free(tmp);
    return 0;
}

FILE *path_fopen_output(const char *path, char *why, size_t n)
{
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(why, n, "is %s, not a regular file (only a regular file is ever replaced)",
                 file_kind(st.st_mode));
        return NULL;
    }
    /* O_NOFOLLOW and O_NONBLOCK: what was put there since is refused, not followed or waited on */
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        snprintf(why, n, "is not a regular file (only a regular file is ever replaced)");
        return NULL;
    }
    FILE *f = NULL;
    if (fd >= 0 && flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 && ftruncate(fd, 0) == 0)
        f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        snprintf(why, n, "%s", e == ELOOP || e == ENXIO ? "is not a regular file (only a regular "
                 "file is ever replaced)" : strerror(e));
    }
    return f;
}
