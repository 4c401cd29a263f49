/*
 * t_tracer.c - the tracing worker (tracer.h): jobs run in the order posted, a ticket's job and
 * all before it have run when tracer_wait returns, a wait or a full ring wakes a worker nobody
 * kicked, tracer_done never blocks, tracer_free runs what is queued, and the inline tracer runs
 * jobs in tracer_post. A lost wake-up would hang a test: an alarm turns that into a failure.
 */
#include "train/tracer.h"
#include "tap.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NJOBS 5000

static int order[NJOBS];
static atomic_int nrun;

struct arg {
    int index;
};
static struct arg args[NJOBS];

static void job_record(void *p)
{
    const struct arg *a = p;
    order[atomic_fetch_add(&nrun, 1)] = a->index;
}

static atomic_int gate; /* job_gated spins until it is set */
static void job_gated(void *p)
{
    (void)p;
    while (!atomic_load(&gate))
        ;
    atomic_fetch_add(&nrun, 1);
}

static void job_slow(void *p)
{
    (void)p;
    struct timespec ts = {0, 2000000}; /* 2 ms */
    nanosleep(&ts, NULL);
    atomic_fetch_add(&nrun, 1);
}

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* busy for us microseconds, like a training step between two kicks */
static void busy_us(long us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static int in_order(int n)
{
    for (int i = 0; i < n; i++)
        if (order[i] != i)
            return 0;
    return 1;
}

static void reset(void)
{
    atomic_store(&nrun, 0);
    for (int i = 0; i < NJOBS; i++) {
        order[i] = -1;
        args[i].index = i;
    }
}

/* Fresh records and a tracer with its thread (a failed start is a failed test). */
static tracer *start(void)
{
    reset();
    tracer *t = tracer_create(1);
    if (!t)
        ok(0, "tracer thread started");
    return t;
}

static void test_inline(void)
{
    reset();
    tracer *t = tracer_create(0);
    ok(t != NULL, "inline tracer created");
    if (!t)
        return;
    uint64_t k1 = tracer_post(t, job_record, &args[0]);
    int ran = atomic_load(&nrun);
    uint64_t k2 = tracer_post(t, job_record, &args[1]);
    ok(ran == 1 && k1 == 1 && k2 == 2, "inline: the job runs inside tracer_post; tickets 1, 2");
    ok(tracer_done(t, k2) && tracer_done(t, 0) && !tracer_done(t, k2 + 1), "inline: tracer_done of ticket 2 (not 3)");
    tracer_kick(t);
    tracer_wait(t, k2);
    tracer_drain(t);
    ok(in_order(2) && tracer_blocked_s(t) == 0, "inline: both ran in order, nothing blocked");
    tracer_free(t);
}

static void test_order_full_ring(void)
{
    reset();
    tracer *t = tracer_create(1);
    ok(t != NULL, "tracer thread started");
    if (!t)
        return;
    /* no kick at all: the ring (64) fills and the post that finds it full wakes the worker */
    uint64_t last = 0;
    for (int i = 0; i < NJOBS; i++)
        last = tracer_post(t, job_record, &args[i]);
    ok(last == NJOBS, "tickets count the posts (%llu)", (unsigned long long)last);
    tracer_drain(t);
    ok(atomic_load(&nrun) == NJOBS && in_order(NJOBS), "%d jobs posted without a kick all ran, in order", NJOBS);
    tracer_free(t);
}

static void test_wait_wakes(void)
{
    tracer *t = start();
    if (!t)
        return;
    /* the worker is asleep when each job is posted; only tracer_wait wakes it */
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        pause_us(i % 7 == 0 ? 300 : 20);
        uint64_t k = tracer_post(t, job_record, &args[i]);
        tracer_wait(t, k);
        bad += atomic_load(&nrun) != i + 1 || order[i] != i;
    }
    ok(bad == 0, "200 posts without a kick, each waited for: each had run when tracer_wait returned");
    ok(tracer_blocked_s(t) > 0, "the time blocked is counted (%.6f s)", tracer_blocked_s(t));
    tracer_free(t);
}

static void test_done_never_blocks(void)
{
    reset();
    atomic_store(&gate, 0);
    tracer *t = start();
    if (!t)
        return;
    uint64_t k1 = tracer_post(t, job_gated, NULL);
    uint64_t k2 = tracer_post(t, job_record, &args[0]);
    tracer_kick(t);
    pause_us(2000);
    ok(!tracer_done(t, k1) && !tracer_done(t, k2) && atomic_load(&nrun) == 0,
       "tracer_done: a job held up and the one behind it are not done, and asking did not block");
    atomic_store(&gate, 1);
    tracer_wait(t, k1);
    tracer_wait(t, k2);
    ok(tracer_done(t, k1) && tracer_done(t, k2) && atomic_load(&nrun) == 2 && tracer_done(t, 0),
       "once released both are done");
    tracer_free(t);
}

/* Kicks at a steady rhythm, as training gives them (the worker learns the period and watches
 * for the next kick), then irregular ones, a long gap and a burst: every job runs, in order. */
static void test_rhythm(void)
{
    tracer *t = start();
    if (!t)
        return;
    int n = 0, late = 0;
    uint64_t prev = 0;
    for (int i = 0; i < 1500; i++, n++) {
        uint64_t k = tracer_post(t, job_record, &args[n]);
        tracer_kick(t);
        tracer_kick(t); /* a second kick with nothing new posted does nothing */
        busy_us(i < 1000 ? 300 : 50 + (i * 37) % 400);
        tracer_wait(t, prev); /* the last step's job, as training waits for it */
        late += !tracer_done(t, prev);
        prev = k;
    }
    pause_us(30000); /* longer than any period the worker predicts */
    for (int i = 0; i < 500; i++, n++)
        prev = tracer_post(t, job_record, &args[n]);
    tracer_kick(t);
    tracer_drain(t);
    ok(late == 0 && atomic_load(&nrun) == n && in_order(n),
       "%d jobs with steady, irregular and bursty kicks: all ran, in order, each done when waited for", n);
    diag("time blocked waiting for the worker: %.3f ms over %d jobs", tracer_blocked_s(t) * 1e3, n);
    tracer_free(t);
}

static void test_free_runs_queue(void)
{
    tracer *t = start();
    if (!t)
        return;
    for (int i = 0; i < 10; i++)
        tracer_post(t, job_slow, NULL);
    tracer_free(t); /* nobody kicked or waited */
    ok(atomic_load(&nrun) == 10, "tracer_free runs the 10 jobs still queued (ran %d)", atomic_load(&nrun));
    tracer_free(NULL);
    tracer_kick(NULL);
    tracer_drain(NULL);
    tracer_wait(NULL, 5);
    ok(tracer_done(NULL, 5) && tracer_blocked_s(NULL) == 0, "NULL tracer: every call is a no-op");
}

int main(void)
{
    alarm(600); /* a lost wake-up hangs: fail instead (long: a loaded machine is no failure) */
    test_inline();
    test_order_full_ring();
    test_wait_wakes();
    test_done_never_blocks();
    test_rhythm();
    test_free_runs_queue();
    return done_testing();
}
