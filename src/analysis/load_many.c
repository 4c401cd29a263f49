/*
 * load_many.c - several traces read at once (compare, plot): each trace opened on the calling
 * thread (an open forks a probe of the file: no other thread may be running then), then read
 * and analysed on a thread of its own, up to the machine's cores. The reader takes turns in
 * HDF5 (it is not thread-safe here) and lets the other loads in while its chunks are decoded
 * and while the loader analyses what it read, so two traces take little more wall time than
 * one. The notes a reader prints (a repaired trace) are printed afterwards in the order of the
 * files, as one load after another printed them.
 */
#include "analysis/load.h"
#include "trace/trace_notes.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_LOADERS 4

struct load_job {
    const char *path;
    an_run *run;
    ampdiag_trace_reader *rd; /* opened before the threads start (an_load_begin) */
    int rc;
    char err[1024];
};

struct loader {
    struct load_job *jobs;
    size_t n;
    _Atomic size_t next;
    an_options opt;
};

static void *load_loop(void *arg)
{
    struct loader *L = arg;
    for (size_t i; (i = atomic_fetch_add(&L->next, 1)) < L->n;) {
        struct load_job *j = &L->jobs[i];
        if (!j->rc)
            j->rc = an_load_finish(j->rd, &L->opt, j->run, j->err, sizeof j->err);
    }
    return NULL;
}

size_t an_load_many(const char *const *paths, size_t n, const an_options *opt, an_run *runs,
                    int *rc, char *err, size_t errlen)
{
    *rc = 0;
    if (err && errlen)
        err[0] = 0;
    if (n == 0)
        return 0;
    struct load_job *jobs = calloc(n, sizeof *jobs);
    struct loader L = {.jobs = jobs, .n = n};
    if (opt)
        L.opt = *opt;
    int quiet = L.opt.quiet;
    L.opt.quiet = 1; /* notes below, in order */
    if (!jobs) { /* one after another, as an_load alone */
        L.opt.quiet = quiet;
        for (size_t i = 0; i < n; i++)
            if ((*rc = an_load(paths[i], &L.opt, &runs[i], err, errlen)))
                return i;
        return n;
    }
    atomic_init(&L.next, 0);
    for (size_t i = 0; i < n; i++)
        jobs[i] = (struct load_job){.path = paths[i], .run = &runs[i]};
    /* every trace opened here, one after another, before any thread starts: an open forks a
     * probe of the file, and a child forked while another thread holds a lock (the allocator's,
     * stdio's) would wait for it for ever (then be killed as a hung probe) */
    for (size_t i = 0; i < n; i++)
        jobs[i].rc = an_load_begin(paths[i], &L.opt, &runs[i], &jobs[i].rd, jobs[i].err,
                                   sizeof jobs[i].err);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t nt = cpus < 1 ? 1 : (size_t)cpus;
    nt = nt > MAX_LOADERS ? MAX_LOADERS : nt;
    nt = nt > n ? n : nt;
    pthread_t th[MAX_LOADERS];
    int started[MAX_LOADERS] = {0};
    for (size_t t = 1; t < nt; t++)
        started[t] = pthread_create(&th[t], NULL, load_loop, &L) == 0;
    load_loop(&L); /* this thread too (and all of them where no thread started) */
    for (size_t t = 1; t < nt; t++)
        if (started[t])
            pthread_join(th[t], NULL);
    size_t first = n;
    for (size_t i = 0; i < n && first == n; i++) {
        if (!quiet && runs[i].repaired)
            trace_note_repaired(paths[i]);
        if (jobs[i].rc) {
            first = i;
            *rc = jobs[i].rc;
            if (err && errlen)
                snprintf(err, errlen, "%s", jobs[i].err);
        }
    }
    free(jobs);
    return first;
}
