/*
 * tracer.h - a worker thread that takes the tracing work (tensor statistics, lost-update
 * what-ifs) off the training thread.
 *
 * Jobs run one at a time in the order they were posted. tracer_post returns a ticket; when
 * tracer_wait(t, ticket) returns, that job and every job posted before it has finished, and
 * everything they wrote is visible to the caller. With zero threads (one core, or asked for) a
 * job runs inside tracer_post, so the results are the same either way: only the timing differs.
 *
 * A post does not wake a sleeping worker (that is a system call, dear on a VM): the worker takes
 * the job at once if it is busy, else at the next tracer_kick, or when tracer_wait waits for it.
 * One thread posts, kicks and waits.
 */
#ifndef AMPDIAG_TRACER_H
#define AMPDIAG_TRACER_H

#include <stdint.h>

typedef struct tracer tracer;
typedef void (*tracer_fn)(void *arg);

/* threads: 0 (run jobs in the caller) or 1. Returns NULL when out of memory or when the thread
 * cannot be started. */
tracer *tracer_create(int threads);
/* Queue fn(arg) without waking the worker; blocks while the queue is full. */
uint64_t tracer_post(tracer *t, tracer_fn fn, void *arg);
/* Wake the worker if it sleeps, for the jobs posted so far (t may be NULL; nothing happens when
 * no job was posted since the last kick). */
void tracer_kick(tracer *t);
/* 1 when job `ticket` has finished (or t is NULL): a check that never blocks. */
int tracer_done(const tracer *t, uint64_t ticket);
/* Wait until job `ticket` (and all before it) has run; ticket 0 or t NULL returns at once. */
void tracer_wait(tracer *t, uint64_t ticket);
/* Wait for every job posted so far (t may be NULL). */
void tracer_drain(tracer *t);
/* CPU seconds the jobs run inside tracer_post took (zero threads), on the caller's thread. */
double tracer_inline_cpu_s(const tracer *t);
/* Seconds the caller spent blocked in tracer_wait/tracer_drain/tracer_post (a full queue). */
double tracer_blocked_s(const tracer *t);
/* Finish the queued jobs and stop the thread. NULL is allowed. */
void tracer_free(tracer *t);

#endif
