/*
 * trace_sandbox.c - run a piece of HDF5 parsing in a child process and take back only bytes.
 *
 * HDF5 1.10 trusts much of what it decodes: a damaged file can make it read or write out of
 * bounds, crash or loop (for example on the global heap that holds variable-length strings).
 * ampdiag cannot fix HDF5, so the parts of a trace that are small but parsed by the most fragile
 * code (the root attributes) are read by a forked child: it does the HDF5 calls on the already
 * open file, writes what it read to a pipe and exits. Whatever HDF5 does wrong there stays in the
 * child; the parent gets bytes, which it checks like any other input, or a failure: the child
 * died on a signal, exited with an error, sent more than the limit, took more memory or longer
 * than the limits (then it is killed).
 */
#include "trace/trace_internal.h"
#include "trace/h5safe.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Under a sanitizer (and a fuzzer), a report in the child must go nowhere and must not run
 * the fuzzer's crash callback (it would save the input as a crash of the program). Weak: NULL
 * in a build without sanitizers. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));
extern void __sanitizer_set_report_fd(void *fd) __attribute__((weak));

static void child_run(int fd, trace_sandbox_fn fn, void *arg)
{
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) /* HDF5's and a sanitizer's messages go nowhere */
        dup2(null, STDERR_FILENO);
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(NULL);
    if (__sanitizer_set_report_fd && null >= 0)
        __sanitizer_set_report_fd((void *)(intptr_t)null);
    trace_buf b = {0};
    int rc = fn(arg, &b);
    size_t off = 0;
    while (!rc && !b.failed && off < b.len) {
        ssize_t w = write(fd, b.data + off, b.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            _exit(3);
        off += (size_t)w;
    }
    _exit(rc || b.failed ? 2 : 0);
}

static long ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)((t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000);
}

/* Resident memory of process pid in bytes (Linux /proc); 0 when it cannot be read. */
static size_t rss_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/statm", (long)pid);
    FILE *f = fopen(path, "r");
    unsigned long size = 0, res = 0;
    if (!f)
        return 0;
    int n = fscanf(f, "%lu %lu", &size, &res);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return n == 2 && page > 0 ? (size_t)res * (size_t)page : 0;
}

/* CPU time (user + system) process pid has used, in milliseconds (Linux /proc); -1 when it
 * cannot be read. */
static long cpu_ms_of(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = 0;
    const char *p = strrchr(line, ')'); /* the command name may hold spaces */
    unsigned long ut = 0, st = 0;
    long tick = sysconf(_SC_CLK_TCK);
    /* after ") ": state (field 3) ... utime is field 14, stime 15 */
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2 ||
        tick <= 0)
        return -1;
    return (long)((ut + st) * 1000 / (unsigned long)tick);
}

/* Read the child's bytes into out until end of file, checking its memory and CPU time every
 * POLL_MS; 0, or a TRACE_SANDBOX_* failure. The limit is on the child's CPU time, so that a busy
 * machine does not refuse a sound file; a child that uses none (blocked) is stopped after
 * TRACE_SANDBOX_WALL_FACTOR times the limit of wall time. */
static int collect(pid_t pid, int fd, size_t max, long timeout_ms, trace_buf *out)
{
    enum { POLL_MS = 20 };
    /* the child starts with the parent's pages (shared until written): count what it adds */
    size_t cap = rss_of(getpid()) + TRACE_SANDBOX_MAX_RSS;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char chunk[4096];
    for (;;) {
        long left = timeout_ms * TRACE_SANDBOX_WALL_FACTOR - ms_since(&t0);
        if (left <= 0 || cpu_ms_of(pid) > timeout_ms)
            return TRACE_SANDBOX_TIMEOUT;
        if (rss_of(pid) > cap)
            return TRACE_SANDBOX_MEMORY;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, left < POLL_MS ? (int)left : POLL_MS);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return TRACE_SANDBOX_FAILED;
        if (n == 0)
            continue;
        ssize_t got = read(fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return TRACE_SANDBOX_FAILED;
        if (got == 0)
            return 0;
        if (out->len + (size_t)got > max)
            return TRACE_SANDBOX_TOO_BIG;
        trace_buf_put(out, chunk, (size_t)got);
        if (out->failed)
            return TRACE_SANDBOX_NOMEM;
    }
}

int trace_sandbox_run(trace_sandbox_fn fn, void *arg, size_t max, long timeout_ms, trace_buf *out)
{
    memset(out, 0, sizeof *out);
    int fds[2];
    if (pipe(fds) != 0)
        return TRACE_SANDBOX_NOMEM;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return TRACE_SANDBOX_NOMEM;
    }
    if (pid == 0) {
        close(fds[0]);
        child_run(fds[1], fn, arg);
    }
    close(fds[1]);
    /* a reader forks inside its HDF5 section (holding the lock: the child's copy of HDF5's
     * state is whole) and before any other thread of the loaders runs (an_load_many opens every
     * trace first: a child forked while another thread holds the allocator's lock would wait for
     * it for ever); this write end is closed: other readers may use HDF5 while this one waits */
    int depth = trace_h5_release();
    int rc = collect(pid, fds[0], max, timeout_ms, out);
    close(fds[0]);
    if (rc)
        kill(pid, SIGKILL);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    trace_h5_reacquire(depth);
    if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        rc = WIFSIGNALED(st) ? TRACE_SANDBOX_CRASHED : TRACE_SANDBOX_FAILED;
    if (rc) {
        free(out->data);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

void trace_buf_put(trace_buf *b, const void *p, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->failed = 1;
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

int trace_buf_get(const trace_buf *b, size_t *pos, void *p, size_t n)
{
    if (*pos > b->len || n > b->len - *pos)
        return -1;
    memcpy(p, b->data + *pos, n);
    *pos += n;
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * h5safe_probe (h5safe.h): fn's result (4 bytes) and message (the rest) through the pipe
 * ------------------------------------------------------------------------------------------ */

struct probe_call {
    int (*fn)(void *arg, char *msg, size_t msglen);
    void *arg;
};

static int probe_in_child(void *arg, trace_buf *out)
{
    const struct probe_call *c = arg;
    char msg[1024] = "";
    int32_t rc = c->fn(c->arg, msg, sizeof msg);
    trace_buf_put(out, &rc, sizeof rc);
    trace_buf_put(out, msg, strnlen(msg, sizeof msg - 1));
    return 0;
}

int h5safe_probe(int (*fn)(void *arg, char *msg, size_t msglen), void *arg, const char *what,
                 char *msg, size_t msglen)
{
    struct probe_call c = {fn, arg};
    trace_buf b;
    int why = trace_sandbox_run(probe_in_child, &c, 4096, TRACE_PROBE_MS, &b);
    int32_t rc = 0;
    size_t pos = 0;
    if (!why && trace_buf_get(&b, &pos, &rc, sizeof rc) == 0) {
        snprintf(msg, msglen, "%.*s", (int)(b.len - pos), b.data + pos);
        free(b.data);
        return rc;
    }
    free(b.data);
    if (why == TRACE_SANDBOX_TIMEOUT)
        snprintf(msg, msglen, "%s: HDF5 took more than %d s of CPU time reading it (a corrupt file)", what,
                 TRACE_PROBE_MS / 1000);
    else if (why == TRACE_SANDBOX_MEMORY)
        snprintf(msg, msglen, "%s: HDF5 took more than %zu MiB reading it (a corrupt file)", what,
                 TRACE_SANDBOX_MAX_RSS >> 20);
    else
        snprintf(msg, msglen, "%s: HDF5 %s reading it (a corrupt file)", what,
                 why == TRACE_SANDBOX_CRASHED ? "crashed" : "failed");
    return H5SAFE_PROBE_FAILED;
}
