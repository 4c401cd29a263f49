/* path.c - file names given on the command line, checked before any work starts. */
#include "util/path.h"

#include <errno.h>
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
