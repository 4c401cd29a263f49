/* registry.c - the backends this build has, chosen by name (--device). */
#include "config.h"
#include "backend/backend.h"
/* Messages do not repeat the name: callers print "--device NAME: message". */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    const char *name;
    /* the backend for the full name ("cuda:1"); NULL: not built */
    const backend *(*get)(const char *name, char *err, size_t errlen);
    /* 0 when get would give one, without making it */
    int (*available)(const char *name, char *err, size_t errlen);
} entry;

static const backend *get_cpu(const char *name, char *err, size_t errlen)
{
    if (strchr(name, ':')) {
        snprintf(err, errlen, "the cpu backend has no device number");
        return NULL;
    }
    return backend_cpu();
}

static int cpu_available(const char *name, char *err, size_t errlen)
{
    return get_cpu(name, err, errlen) ? 0 : -1;
}

/* AMPDIAG_NO_DEVICE_BACKENDS: builds of the host code alone (fuzz/fuzz.mk's) list the CUDA
 * backend as not built even where configure found CUDA */
#if defined(AMPDIAG_HAVE_CUDA) && !defined(AMPDIAG_NO_DEVICE_BACKENDS)
/* "cuda" is device 0, "cuda:N" device N: its number, or -1 with a message. */
static int cuda_device(const char *name, char *err, size_t errlen)
{
    const char *colon = strchr(name, ':');
    long dev = 0;
    if (colon) {
        char *end;
        errno = 0;
        dev = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || errno || dev < 0 || dev > 4096 || colon[1] == '+' || colon[1] == '-') {
            snprintf(err, errlen, "expected cuda or cuda:N with N a device number (0, 1, ...)");
            return -1;
        }
    }
    return (int)dev;
}

static const backend *get_cuda(const char *name, char *err, size_t errlen)
{
    int dev = cuda_device(name, err, errlen);
    return dev < 0 ? NULL : backend_cuda(dev, err, errlen);
}

static int cuda_available(const char *name, char *err, size_t errlen)
{
    int dev = cuda_device(name, err, errlen);
    return dev < 0 ? -1 : backend_cuda_available(dev, err, errlen);
}
#define CUDA_GET get_cuda
#define CUDA_AVAILABLE cuda_available
#else
#define CUDA_GET NULL
#define CUDA_AVAILABLE NULL
#endif

static const entry entries[] = {
    {"cpu", get_cpu, cpu_available},
    {"cuda", CUDA_GET, CUDA_AVAILABLE}, /* src/backend/cuda/, built when configure finds nvcc and cuBLAS */
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

/* The entry for a name ("cuda:1" is the cuda entry's), or NULL with a message. */
static const entry *find(const char *name, char *err, size_t errlen)
{
    size_t len = strcspn(name, ":");
    for (int i = 0; i < NENTRIES; i++) {
        if (strlen(entries[i].name) != len || strncmp(entries[i].name, name, len) != 0)
            continue;
        if (!entries[i].get) {
            snprintf(err, errlen, "the %s backend is not built into this ampdiag (it trains on: cpu)",
                     entries[i].name);
            return NULL;
        }
        return &entries[i];
    }
    snprintf(err, errlen, "unknown device (expected cpu or cuda[:N])");
    return NULL;
}

const backend *backend_by_name(const char *name, char *err, size_t errlen)
{
    const entry *e = find(name, err, errlen);
    return e ? e->get(name, err, errlen) : NULL;
}

int backend_available(const char *name, char *err, size_t errlen)
{
    const entry *e = find(name, err, errlen);
    return e ? e->available(name, err, errlen) : -1;
}
