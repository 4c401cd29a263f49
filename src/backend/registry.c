/* registry.c - the backends this build has, chosen by name (--device). */
#include "config.h"
#include "backend/backend.h"

#include <stdio.h>
#include <string.h>

typedef struct entry {
    const char *name;
    const backend *(*get)(char *err, size_t errlen); /* NULL: not built */
} entry;

static const backend *get_cpu(char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    return backend_cpu();
}

static const entry entries[] = {
    {"cpu", get_cpu},
    /* the CUDA backend's table is not part of this version: configure may find nvcc and build
     * the CUDA checks (src/backend/cuda/), but no training runs on a GPU yet */
    {"cuda", NULL},
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
        if (name[len] && strcmp(entries[i].name, "cpu") == 0) {
            snprintf(err, errlen, "'%s': the cpu backend has no device number", name);
            return NULL;
        }
        return entries[i].get(err, errlen);
    }
    snprintf(err, errlen, "unknown device '%s' (expected cpu or cuda[:N])", name);
    return NULL;
}
