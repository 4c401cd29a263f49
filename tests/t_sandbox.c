/*
 * t_sandbox.c - the child process that parses untrusted files first (src/trace/trace_sandbox.c):
 * what comes back, and which children are stopped. Its limit is CPU time, not wall time, so a
 * busy machine does not refuse a sound file: a child that sleeps longer than the limit without
 * using the CPU still finishes, one that spins is stopped, one that crashes or grows is refused.
 */
#include "trace/trace_internal.h"
#include "tap.h"

#include <signal.h>
#include <time.h>

static int say_hello(void *arg, trace_buf *out)
{
    (void)arg;
    trace_buf_put(out, "hello", 5);
    return 0;
}

static int sleep_ms(void *arg, trace_buf *out)
{
    long ms = *(const long *)arg;
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0)
        ;
    trace_buf_put(out, "slept", 5);
    return 0;
}

static int spin(void *arg, trace_buf *out)
{
    (void)arg;
    (void)out;
    volatile unsigned long x = 0;
    for (;;)
        x++;
    return 0;
}

static int crash(void *arg, trace_buf *out)
{
    (void)arg;
    (void)out;
    raise(SIGSEGV);
    return 0;
}

static int grow(void *arg, trace_buf *out)
{
    (void)arg;
    (void)out;
    for (;;) { /* touch every page so that it counts as resident */
        char *p = malloc(64 << 20);
        if (!p)
            return 1;
        memset(p, 1, 64 << 20);
    }
}

static int fail(void *arg, trace_buf *out)
{
    (void)arg;
    (void)out;
    return 1;
}

int main(void)
{
    trace_buf b;
    int rc = trace_sandbox_run(say_hello, NULL, 100, 1000, &b);
    ok(rc == 0 && b.len == 5 && memcmp(b.data, "hello", 5) == 0, "the child's bytes come back (rc %d)", rc);
    free(b.data);
    rc = trace_sandbox_run(say_hello, NULL, 4, 1000, &b);
    ok(rc == TRACE_SANDBOX_TOO_BIG && b.data == NULL, "more bytes than allowed: refused (rc %d)", rc);
    long ms = 1500; /* (its wall-time stop at 12 s leaves a loaded machine 10 s to spare) */
    rc = trace_sandbox_run(sleep_ms, &ms, 100, 1000, &b);
    ok(rc == 0 && b.len == 5, "a child that waits 1.5 s with a 1 s CPU limit finishes (rc %d)", rc);
    free(b.data);
    ms = 8000; /* 12 x 0.5 s of wall time without CPU: stopped */
    rc = trace_sandbox_run(sleep_ms, &ms, 100, 500, &b);
    ok(rc == TRACE_SANDBOX_TIMEOUT, "... but not one that waits past 12 x the limit (rc %d)", rc);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = trace_sandbox_run(spin, NULL, 100, 300, &b);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    ok(rc == TRACE_SANDBOX_TIMEOUT, "a spinning child is stopped at its CPU limit of 0.3 s (rc %d)", rc);
    diag("the spinning child was stopped after %.2f s of wall time", s);
    rc = trace_sandbox_run(crash, NULL, 100, 1000, &b);
    ok(rc == TRACE_SANDBOX_CRASHED, "a child that dies on a signal: crashed (rc %d)", rc);
    rc = trace_sandbox_run(grow, NULL, 100, 20000, &b);
    ok(rc == TRACE_SANDBOX_MEMORY, "a child that grows past %zu MiB: stopped (rc %d)", TRACE_SANDBOX_MAX_RSS >> 20, rc);
    rc = trace_sandbox_run(fail, NULL, 100, 1000, &b);
    ok(rc == TRACE_SANDBOX_FAILED, "a child that reports failure: failed (rc %d)", rc);
    return done_testing();
}
