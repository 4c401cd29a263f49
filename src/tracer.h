/*
 * tracer.h - a worker thread that takes the tracing work (tensor statistics, lost-update
 * what-ifs) off the training thread.
 *
 * Jobs run one at a time in the order they were posted. tracer_post returns a ticket; when
 * tracer_wait(t, ticket) returns, that job and every job posted before it has finished, and
 * everything they wrote is visible to the caller. With zero threads (one core, or asked for) a
 * job runs inside tracer_post, so the results are the same either way: only the timing differs.
 */
#ifndef AMPDIAG_TRACER_H
#define AMPDIAG_TRACER_H

#include <stdint.h>

typedef struct tracer tracer;
typedef void (*tracer_fn)(void *arg);

/* threads: 0 (run jobs in the caller) or 1. Returns NULL when out of memory or when the thread
 * cannot be started. */
tracer *tracer_create(int threads);
/* Queue fn(arg); blocks while the queue is full. */
uint64_t tracer_post(tracer *t, tracer_fn fn, void *arg);
/* Wait until job `ticket` (and all before it) has run; ticket 0 or t NULL returns at once. */
void tracer_wait(tracer *t, uint64_t ticket);
/* Wait for every job posted so far (t may be NULL). */
void tracer_drain(tracer *t);
/* Seconds the caller spent blocked in tracer_wait/tracer_drain/tracer_post (a full queue). */
double tracer_blocked_s(const tracer *t);
/* Finish the queued jobs and stop the thread. NULL is allowed. */
void tracer_free(tracer *t);

#endif
