/*
 * vec.c - the growable array's growing (vec.h).
 */
#include "util/vec.h"

#include <stdint.h>
#include <string.h>

int vec_reserve_(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : 8;
    while (nc < need) {
        if (nc > SIZE_MAX / 2)
            return -1;
        nc *= 2;
    }
    if (size && nc > SIZE_MAX / size)
        return -1;
    void *p = realloc(*v, nc * size);
    if (!p)
        return -1;
    *v = p;
    *cap = nc;
    return 0;
}

void *vec_zero_(void *p, size_t size) { return memset(p, 0, size); }

void vec_make_gap_(void *v, size_t i, size_t n, size_t size)
{
    char *b = v;
    memmove(b + (i + 1) * size, b + i * size, (n - i) * size);
}
