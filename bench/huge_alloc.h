/*
 * huge_alloc.h - benchmark buffers in 2 MiB pages or in 4 KiB pages, chosen by advice
 * (bench_tstats, ab_tstats). Large arrays in numpy are allocated this way: aligned to 2 MiB,
 * with madvise(MADV_HUGEPAGE), so that transparent huge pages back them where the system's
 * setting (/sys/kernel/mm/transparent_hugepage/enabled) is "madvise" or "always".
 * Needs _DEFAULT_SOURCE (madvise) and _POSIX_C_SOURCE >= 200112L (posix_memalign).
 */
#ifndef AMPDIAG_BENCH_HUGE_ALLOC_H
#define AMPDIAG_BENCH_HUGE_ALLOC_H

#include <stdlib.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#define BENCH_HUGE_PAGE ((size_t)2 << 20)

/* n floats aligned to 2 MiB, advised to be backed by huge pages (huge != 0) or by 4 KiB pages
 * (huge == 0, whatever the system's default); NULL when out of memory. Release with free(). */
static inline float *bench_alloc_floats(size_t n, int huge)
{
    size_t bytes = (n * sizeof(float) + BENCH_HUGE_PAGE - 1) / BENCH_HUGE_PAGE * BENCH_HUGE_PAGE;
    void *p = NULL;
    if (bytes == 0 || posix_memalign(&p, BENCH_HUGE_PAGE, bytes) != 0)
        return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE); /* advice only */
#else
    (void)huge;
#endif
    return p;
}

#endif
