/*
 * tracer.c - the tracing worker thread (tracer.h): a ring of jobs with one poster (the training
 * thread) and one consumer (the worker), handed over through two counters, `posted` and
 * `finished`, without a lock.
 *
 * Waking a thread that sleeps is a system call of the thread that wants it, and a dear one where
 * it matters: on the development VM it cost the poster about 11 us, 1.6% of a 0.7 ms mlp step
 * each time, and the worker woke 25-50 us later. So a post does not wake the worker; the caller
 * says when (tracer_kick), once for the jobs of several posts, and a wait wakes it if the job
 * waited for has not been taken yet.
 *
 * Training kicks at a steady rhythm, once a step. The worker learns the period and, while kicks
 * keep coming when they are due, it sleeps when idle with a timeout until shortly before the
 * next one, then watches for it with the CPU's pause hint for at most 2 x WATCH_NS: a kick that
 * finds it watching costs the poster no system call. A kick outside the window costs the
 * wake-up as before; where kicks come unevenly (sparse tracing, a slow transformer step whose
 * time wanders by more than the window) the worker stops watching. Measured on the mlp, 1000
 * steps: 73-92% of the kicks needed no wake-up, the worker watched 6-8 us per kick. (Spinning
 * all the time instead of sleeping was tried twice: it kept the second core busy and took more
 * time from the training thread, through the scheduler and the core's sibling, than it saved.)
 *
 * The sleeping side announces itself (`sleeping`, `waiting`) and then checks the counter once
 * more; the other side stores the counter and then reads the announcement; all four accesses are
 * sequentially consistent, so one of the two sees the other and no wake-up is lost. The mutex
 * only orders a signal after the sleeper's wait has begun.
 */
#include "train/tracer.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() atomic_signal_fence(memory_order_seq_cst)
#endif

#define TRACER_RING 64
#define WATCH_NS 50000LL          /* the worker watches from this long before a kick is due to as long after */
#define PREDICT_MAX_NS 20000000LL /* kicks further apart are not predicted: the wake-up is cheap beside them */

struct job {
    tracer_fn fn;
    void *arg;
};

struct tracer {
    int threaded;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work; /* signalled when jobs are queued or the thread must stop */
    pthread_cond_t done; /* signalled when a job has finished and the poster waits */
    struct job ring[TRACER_RING];
    double blocked_s;    /* the poster's */
    double inline_cpu_s; /* the poster's CPU time in jobs run inline (no thread) */
    uint64_t kicked;     /* the poster's: jobs posted at the last kick */
    /* each counter on its own cache line: the poster writes one, the worker the other */
    alignas(64) _Atomic uint64_t posted;   /* jobs queued so far; the ticket of job k is k + 1 */
    _Atomic uint64_t kicks;                /* tracer_kick calls so far */
    _Atomic long long kick_ns;             /* when the last one came */
    _Atomic int waiting;                   /* the poster waits on `done` (or is about to) */
    _Atomic int stop;
    alignas(64) _Atomic uint64_t finished; /* jobs finished so far */
    _Atomic int sleeping;                  /* the worker waits on `work` (or is about to) */
};

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Sleep until a job is posted, the thread must stop, or (until_ns > 0) that time comes. */
static void sleep_until(tracer *t, uint64_t f, long long until_ns)
{
    struct timespec ts = {(time_t)(until_ns / 1000000000LL), (long)(until_ns % 1000000000LL)};
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->sleeping, 1);
    while (atomic_load(&t->posted) == f && !atomic_load(&t->stop))
        if (until_ns > 0 ? pthread_cond_timedwait(&t->work, &t->mu, &ts) != 0 : pthread_cond_wait(&t->work, &t->mu) != 0)
            break; /* the time has come (or an error: the caller looks again) */
    atomic_store(&t->sleeping, 0);
    pthread_mutex_unlock(&t->mu);
}

/* What the worker knows of the rhythm of the kicks. */
struct rhythm {
    uint64_t seen;    /* kicks seen */
    long long last;   /* when the last one seen came */
    long long period; /* smoothed time between kicks; 0: unknown */
    int trust;        /* 0-8: up when a kick came within WATCH_NS of when it was due, down when not */
    int odd;          /* intervals in a row far from the period */
};

static void see_kicks(tracer *t, struct rhythm *r)
{
    uint64_t k = atomic_load(&t->kicks);
    if (k == r->seen)
        return;
    long long at = atomic_load_explicit(&t->kick_ns, memory_order_relaxed);
    if (k == r->seen + 1 && r->last > 0) { /* (after several kicks unseen, only `last` is news) */
        long long d = at - r->last, off = at - (r->last + r->period);
        if (r->period)
            r->trust = off <= WATCH_NS && off >= -WATCH_NS ? (r->trust < 8 ? r->trust + 1 : 8)
                                                            : (r->trust > 0 ? r->trust - 1 : 0);
        if (d > 0 && d < PREDICT_MAX_NS) {
            if (r->period && d < 2 * r->period && 2 * d > r->period) {
                r->period = (3 * r->period + d) / 4;
                r->odd = 0;
            } else if (!r->period || ++r->odd >= 4) {
                r->period = d; /* a new rhythm */
                r->odd = 0;
            } /* else an odd interval (an evaluation, a pause): the rhythm stands */
        }
    }
    r->seen = k;
    r->last = at;
}

/* No job to run: wait for one, watching for the kick where one is due, sleeping otherwise. */
static void idle(tracer *t, uint64_t f, struct rhythm *r)
{
    for (;;) {
        see_kicks(t, r);
        if (atomic_load(&t->posted) != f || atomic_load(&t->stop))
            return;
        long long due = r->period && r->trust >= 2 ? r->last + r->period : 0, now = now_ns();
        if (!due || now >= due + WATCH_NS) {
            sleep_until(t, f, 0);
            return;
        }
        if (now < due - WATCH_NS) {
            sleep_until(t, f, due - WATCH_NS);
            continue;
        }
        uint64_t k = r->seen;
        while (atomic_load_explicit(&t->posted, memory_order_relaxed) == f &&
               atomic_load_explicit(&t->kicks, memory_order_relaxed) == k &&
               !atomic_load_explicit(&t->stop, memory_order_relaxed) && now_ns() < due + WATCH_NS)
            for (int i = 0; i < 16; i++)
                cpu_relax();
    }
}

static void *worker(void *arg)
{
    tracer *t = arg;
    uint64_t f = 0; /* = finished; only this thread writes it */
    struct rhythm r = {0, 0, 0, 0, 0};
#ifdef __linux__
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); /* timed sleeps end within 1 us, not 50 */
#endif
    for (;;) {
        see_kicks(t, &r);
        if (atomic_load(&t->posted) == f) {
            idle(t, f, &r);
            if (atomic_load(&t->posted) == f)
                break; /* stop, and nothing left */
        }
        struct job j = t->ring[f % TRACER_RING];
        j.fn(j.arg);
        atomic_store(&t->finished, ++f);
        if (atomic_load(&t->waiting)) {
            pthread_mutex_lock(&t->mu);
            pthread_cond_broadcast(&t->done);
            pthread_mutex_unlock(&t->mu);
        }
    }
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
    pthread_condattr_t ca;
    int bad = pthread_condattr_init(&ca) != 0;
    if (!bad) {
        bad = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&t->work, &ca) != 0;
        pthread_condattr_destroy(&ca);
    }
    if (bad) {
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

/* Wake the worker if it sleeps. */
static void wake(tracer *t)
{
    if (atomic_load(&t->sleeping)) {
        pthread_mutex_lock(&t->mu);
        pthread_cond_signal(&t->work);
        pthread_mutex_unlock(&t->mu);
    }
}

void tracer_kick(tracer *t)
{
    if (!t || !t->threaded)
        return;
    uint64_t p = atomic_load_explicit(&t->posted, memory_order_relaxed);
    if (p == t->kicked)
        return; /* nothing new */
    t->kicked = p;
    atomic_store_explicit(&t->kick_ns, now_ns(), memory_order_relaxed);
    atomic_fetch_add(&t->kicks, 1);
    wake(t);
}

/* Wait until job `ticket` has finished, waking the worker first if it sleeps. */
static void wait_finished(tracer *t, uint64_t ticket)
{
    long long t0 = now_ns();
    wake(t); /* (not a kick: it does not tell the rhythm) */
    pthread_mutex_lock(&t->mu);
    atomic_store(&t->waiting, 1);
    while (atomic_load(&t->finished) < ticket)
        pthread_cond_wait(&t->done, &t->mu);
    atomic_store(&t->waiting, 0);
    pthread_mutex_unlock(&t->mu);
    t->blocked_s += 1e-9 * (double)(now_ns() - t0);
}

uint64_t tracer_post(tracer *t, tracer_fn fn, void *arg)
{
    uint64_t p = atomic_load_explicit(&t->posted, memory_order_relaxed); /* only this thread writes it */
    if (!t->threaded) {
        struct timespec c0, c1;
        int timed = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0) == 0;
        fn(arg);
        if (timed && clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1) == 0)
            t->inline_cpu_s += (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
        atomic_store_explicit(&t->finished, p + 1, memory_order_relaxed);
        atomic_store_explicit(&t->posted, p + 1, memory_order_relaxed);
        return p + 1;
    }
    if (p - atomic_load(&t->finished) >= TRACER_RING)
        wait_finished(t, p - TRACER_RING + 1); /* the ring is full */
    t->ring[p % TRACER_RING] = (struct job){fn, arg};
    atomic_store(&t->posted, p + 1);
    return p + 1;
}

int tracer_done(const tracer *t, uint64_t ticket)
{
    return !t || atomic_load(&((tracer *)t)->finished) >= ticket;
}

void tracer_wait(tracer *t, uint64_t ticket)
{
    if (!t || !t->threaded || ticket == 0 || atomic_load(&t->finished) >= ticket)
        return;
    wait_finished(t, ticket);
}

void tracer_drain(tracer *t)
{
    if (t)
        tracer_wait(t, atomic_load_explicit(&t->posted, memory_order_relaxed));
}

double tracer_blocked_s(const tracer *t) { return t ? t->blocked_s : 0; }

double tracer_inline_cpu_s(const tracer *t) { return t ? t->inline_cpu_s : 0; }

void tracer_free(tracer *t)
{
    if (!t)
        return;
    if (t->threaded) {
        atomic_store(&t->stop, 1);
        pthread_mutex_lock(&t->mu);
        pthread_cond_signal(&t->work);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
        pthread_cond_destroy(&t->done);
        pthread_cond_destroy(&t->work);
        pthread_mutex_destroy(&t->mu);
    }
    free(t);
}
