/*
 * tracer.c - the tracing worker thread (tracer.h): a fixed ring of jobs under one mutex, a
 * condition variable for each direction, and counts of posted and finished jobs that tickets
 * are compared against.
 * The poster signals only a worker that sleeps, and a wait for a job that has finished takes
 * no lock. (Spinning before sleeping was tried: it saved no wall time, only burnt CPU.)
 */
#include "tracer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define TRACER_RING 64

struct job {
    tracer_fn fn;
    void *arg;
};

struct tracer {
    int threaded;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work;  /* signalled when a job is queued or the thread must stop */
    pthread_cond_t done;  /* signalled when a job has finished */
    struct job ring[TRACER_RING];
    _Atomic uint64_t posted;   /* jobs queued so far; the ticket of job k is k + 1 */
    _Atomic uint64_t finished; /* jobs finished so far */
    int sleeping;         /* the worker waits on `work` (under mu) */
    int stop;
    double blocked_s;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *worker(void *arg)
{
    tracer *t = arg;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        if (t->finished == t->posted && !t->stop) {
            t->sleeping = 1;
            while (t->finished == t->posted && !t->stop)
                pthread_cond_wait(&t->work, &t->mu);
            t->sleeping = 0;
        }
        if (t->finished == t->posted)
            break; /* stop, and nothing left */
        struct job j = t->ring[t->finished % TRACER_RING];
        pthread_mutex_unlock(&t->mu);
        j.fn(j.arg);
        pthread_mutex_lock(&t->mu);
        t->finished++;
        pthread_cond_broadcast(&t->done);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

tracer *tracer_create(int threads)
{
    tracer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (threads <= 0)
        return t;
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        free(t);
        return NULL;
    }
    if (pthread_cond_init(&t->work, NULL) != 0) {
        pthread_mutex_destroy(&t->mu);
        free(t);
        return NULL;
    }
    if (pthread_cond_init(&t->done, NULL) != 0) {
        pthread_cond_destroy(&t->work);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return NULL;
    }
    if (pthread_create(&t->thread, NULL, worker, t) != 0) {
        pthread_cond_destroy(&t->done);
        pthread_cond_destroy(&t->work);
        pthread_mutex_destroy(&t->mu);
        free(t);
        return NULL;
    }
    t->threaded = 1;
    return t;
}

uint64_t tracer_post(tracer *t, tracer_fn fn, void *arg)
{
    if (!t->threaded) {
        fn(arg);
        return ++t->finished;
    }
    pthread_mutex_lock(&t->mu);
    if (t->posted - t->finished >= TRACER_RING) {
        double t0 = now_s();
        while (t->posted - t->finished >= TRACER_RING)
            pthread_cond_wait(&t->done, &t->mu);
        t->blocked_s += now_s() - t0;
    }
    t->ring[t->posted % TRACER_RING] = (struct job){fn, arg};
    uint64_t ticket = ++t->posted;
    if (t->sleeping)
        pthread_cond_signal(&t->work);
    pthread_mutex_unlock(&t->mu);
    return ticket;
}

void tracer_wait(tracer *t, uint64_t ticket)
{
    if (!t || !t->threaded || ticket == 0 || atomic_load(&t->finished) >= ticket)
        return;
    pthread_mutex_lock(&t->mu);
    if (t->finished < ticket) {
        double t0 = now_s();
        while (t->finished < ticket)
            pthread_cond_wait(&t->done, &t->mu);
        t->blocked_s += now_s() - t0;
    }
    pthread_mutex_unlock(&t->mu);
}

void tracer_drain(tracer *t)
{
    if (!t || !t->threaded)
        return;
    pthread_mutex_lock(&t->mu);
    uint64_t last = t->posted;
    pthread_mutex_unlock(&t->mu);
    tracer_wait(t, last);
}

double tracer_blocked_s(const tracer *t) { return t ? t->blocked_s : 0; }

void tracer_free(tracer *t)
{
    if (!t)
        return;
    if (t->threaded) {
        pthread_mutex_lock(&t->mu);
        t->stop = 1;
        pthread_cond_signal(&t->work);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
        pthread_cond_destroy(&t->done);
        pthread_cond_destroy(&t->work);
        pthread_mutex_destroy(&t->mu);
    }
    free(t);
}
