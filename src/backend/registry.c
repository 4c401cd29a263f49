/* registry.c - the backends this build has, chosen by name (--device). */
#include "config.h"
#include "backend/backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    const char *name;
    /* the backend for the full name ("cuda:1"); NULL: not built */
    const backend *(*get)(const char *name, char *err, size_t errlen);
} entry;

static const backend *get_cpu(const char *name, char *err, size_t errlen)
{
    if (strchr(name, ':')) {
        snprintf(err, errlen, "'%s': the cpu backend has no device number", name);
        return NULL;
    }
    return backend_cpu();
}

#ifdef AMPDIAG_HAVE_CUDA
/* "cuda" is device 0, "cuda:N" device N. */
static const backend *get_cuda(const char *name, char *err, size_t errlen)
{
    const char *colon = strchr(name, ':');
    long dev = 0;
    if (colon) {
        char *end;
        errno = 0;
        dev = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || errno || dev < 0 || dev > 4096 || colon[1] == '+' || colon[1] == '-') {
            snprintf(err, errlen, "'%s': expected cuda or cuda:N with N a device number (0, 1, ...)", name);
            return NULL;
        }
    }
    return backend_cuda((int)dev, err, errlen);
}
#define CUDA_GET get_cuda
#else
#define CUDA_GET NULL
#endif

static const entry entries[] = {
    {"cpu", get_cpu},
    {"cuda", CUDA_GET}, /* src/backend/cuda/, built when configure finds nvcc and cuBLAS */
};

#define NENTRIES ((int)(sizeof entries / sizeof entries[0]))

int backend_count(void) { return NENTRIES; }

const char *backend_name_at(int i, int *built)
{
    if (i < 0 || i >= NENTRIES)
        return NULL;
    if (built)
        *built = entries[i].get != NULL;
    return entries[i].name;
}

const backend *backend_by_name(const char *name, char *err, size_t errlen)
{
    /* "cuda:1" names a device of the cuda backend */
    size_t len = strcspn(name, ":");
    for (int i = 0; i < NENTRIES; i++) {
        if (strlen(entries[i].name) != len || strncmp(entries[i].name, name, len) != 0)
            continue;
        if (!entries[i].get) {
            snprintf(err, errlen, "the %s backend is not built into this ampdiag (it trains on: cpu)",
                     entries[i].name);
            return NULL;
        }
        return entries[i].get(name, err, errlen);
    }
    snprintf(err, errlen, "unknown device '%s' (expected cpu or cuda[:N])", name);
    return NULL;
}
