/*
 * fuzz_file.h - what the file-reading fuzz targets share: the input written to a temporary
 * file of this process (the readers under test take a path, as the commands do), and stdout
 * sent to /dev/null (renderers and --help print there).
 */
#ifndef AMPDIAG_FUZZ_FILE_H
#define AMPDIAG_FUZZ_FILE_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The path of this process's input file, rewritten with data[0..size) on each call; NULL when
 * it cannot be written (the input is then skipped). The file is removed at exit. */
static char fuzz_path[4096];

static void fuzz_remove(void)
{
    if (fuzz_path[0])
        unlink(fuzz_path);
}

static const char *fuzz_write(const uint8_t *data, size_t size, const char *suffix)
{
    if (!fuzz_path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(fuzz_path, sizeof fuzz_path, "%s/ampdiag-fuzz-XXXXXX%s", dir && *dir ? dir : "/tmp",
                 suffix);
        int fd = mkstemps(fuzz_path, (int)strlen(suffix));
        if (fd < 0) {
            perror("fuzz: mkstemps");
            abort();
        }
        close(fd);
        atexit(fuzz_remove);
    }
    int fd = open(fuzz_path, O_WRONLY | O_TRUNC);
    if (fd < 0)
        return NULL;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return NULL;
        }
        off += (size_t)w;
    }
    return close(fd) == 0 ? fuzz_path : NULL;
}

/* stdout to /dev/null once (what the renderers print is not checked here) */
static FILE *fuzz_devnull(void)
{
    static FILE *f;
    if (!f && !(f = fopen("/dev/null", "w")))
        abort();
    return f;
}

#endif
