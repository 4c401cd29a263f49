/*
 * t_trace_crash.c - traces survive their writer.
 *
 *   kills      a writer process appending steps (flushing every 1..5 steps) is SIGKILLed at a
 *              random moment, 20 times; each trace must open, say it was cut off, and hold
 *              every record up to the last flush the child reported (through a pipe), with
 *              exactly the values written, and nothing else
 *   early kill a writer killed before its first record leaves the file marked open-for-write:
 *              the reader clears the mark (or, told not to, says what is wrong)
 *   SIGTERM    the run loop's way to stop: a flag set by the handler, then
 *              ampdiag_trace_close(w, INTERRUPTED): status "interrupted", every record kept
 *   live       a reader follows a trace while it is written (SWMR) and refreshes
 *   disk full  a file size limit (RLIMIT_FSIZE) makes a write fail: the writer reports an I/O
 *              error naming the file, and what was flushed before stays readable
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "tap.h"
#include "trace_synth.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NLAYERS 4
#define MAX_STEPS 4000

static char dir[4096];
static const synth_spec *spec = &synth_specs[1]; /* step records with skips and scale changes */

static const char *tpath(const char *name)
{
    static char buf[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Read one int64 report; 0 on success, -1 at EOF. */
static int read_report(int fd, int64_t *v)
{
    size_t got = 0;
    char *p = (char *)v;
    while (got < sizeof *v) {
        ssize_t k = read(fd, p + got, sizeof *v - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

/* The records of step s, appended as a run loop would. */
static int append_step(ampdiag_trace_writer *w, int64_t s)
{
    float x[SYNTH_N];
    int rc = 0;
    for (int l = 0; l < NLAYERS && !rc; l++)
        for (int k = 0; k < AMPDIAG_NKINDS && !rc; k++) {
            ampdiag_tstats st;
            ampdiag_hist h;
            synth_tensor(NULL, s, l, k, x);
            ampdiag_tstats_compute(x, SYNTH_N, &st, &h);
            rc = ampdiag_trace_append_tensor(w, s, l, (ampdiag_tensor_kind)k, &st,
                                             synth_lost_updates(s, l, k));
            if (!rc && s % 5 == 0)
                rc = ampdiag_trace_append_hist(w, s, l, (ampdiag_tensor_kind)k, &h);
        }
    if (!rc && s % 7 == 3)
        rc = ampdiag_trace_append_event(w, s, (int)(s % NLAYERS), AMPDIAG_EV_NOTE, (double)s, "note");
    ampdiag_trace_step r;
    synth_step(spec, s, &r);
    r.loss = 1.0 / (double)(s + 1); /* keep the O(step) loss loop out of long runs */
    return rc ? rc : ampdiag_trace_append_step(w, &r);
}

static int background; /* writers created with opt.background */

static ampdiag_trace_writer *child_create(const char *path, unsigned every)
{
    ampdiag_trace_options o;
    ampdiag_trace_options_init(&o);
    o.overwrite = 1;
    o.background = background;
    o.flush_every_steps = every;
    o.flush_seconds = 0;
    ampdiag_trace_writer *w = NULL;
    if (ampdiag_trace_create(path, &o, &w))
        _exit(3);
    ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_PRECISION, "fp16");
    for (int l = 0; l < NLAYERS; l++)
        if (ampdiag_trace_add_layer(w, synth_layer_names[l], "linear", synth_layer_shapes[l],
                                    synth_layer_params[l]) != l)
            _exit(4);
    return w;
}

/* Check every record of the trace at path against what append_step wrote; *steps := rows. */
static int verify(const char *path, size_t min_steps, size_t *steps, ampdiag_trace_status *status,
                  int *repaired)
{
    ampdiag_trace_reader *r;
    if (ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &r)) {
        diag("%s", ampdiag_trace_errmsg());
        return 0;
    }
    *status = ampdiag_trace_status_of(r);
    *repaired = ampdiag_trace_was_repaired(r);
    ampdiag_trace_counts c;
    ampdiag_trace_get_counts(r, &c);
    *steps = c.steps;
    int good = c.layers == NLAYERS && c.steps >= min_steps;
    ampdiag_trace_step *S = NULL;
    ampdiag_trace_tensor *T = NULL;
    ampdiag_trace_hist *H = NULL;
    ampdiag_trace_event *E = NULL;
    size_t ns = 0, nt = 0, nh = 0, ne = 0;
    good = good && ampdiag_trace_read_steps(r, &S, &ns) == 0 &&
           ampdiag_trace_read_tensors(r, 0, SIZE_MAX, &T, &nt) == 0 &&
           ampdiag_trace_read_hists(r, 0, SIZE_MAX, &H, &nh) == 0 &&
           ampdiag_trace_read_events(r, &E, &ne) == 0;
    /* at least every record of the flushed steps; whatever else made it must be exact too */
    good = good && nt >= min_steps * NLAYERS * AMPDIAG_NKINDS;
    for (size_t i = 0; good && i < ns; i++) {
        ampdiag_trace_step e;
        synth_step(spec, (int64_t)i, &e);
        good = S[i].step == (int64_t)i && S[i].loss == 1.0 / (double)(i + 1) &&
               S[i].loss_scale == e.loss_scale && S[i].skipped == e.skipped &&
               strcmp(S[i].skip_reason, e.skip_reason) == 0 && S[i].wall_ms == e.wall_ms;
        if (!good)
            diag("step row %zu wrong", i);
    }
    for (size_t i = 0; good && i < nt; i++) {
        int64_t s = (int64_t)(i / (NLAYERS * AMPDIAG_NKINDS));
        int l = (int)(i / AMPDIAG_NKINDS) % NLAYERS, k = (int)(i % AMPDIAG_NKINDS);
        float x[SYNTH_N];
        ampdiag_tstats st;
        synth_tensor(NULL, s, l, k, x);
        ampdiag_tstats_compute(x, SYNTH_N, &st, NULL);
        good = T[i].step == s && T[i].layer == l && T[i].kind == k && T[i].count == st.count &&
               T[i].n_zero == st.n_zero && T[i].fp16_underflow == st.fp16_underflow &&
               T[i].absmax == st.absmax && T[i].min == st.min &&
               T[i].lost_updates == synth_lost_updates(s, l, k);
        if (!good)
            diag("tensor row %zu wrong", i);
    }
    for (size_t i = 0; good && i < nh; i++)
        good = H[i].step == (int64_t)(i / (NLAYERS * AMPDIAG_NKINDS)) * 5;
    for (size_t i = 0; good && i < ne; i++)
        good = E[i].step == (int64_t)(7 * i + 3) && E[i].code == AMPDIAG_EV_NOTE &&
               E[i].value == (double)E[i].step && strcmp(E[i].message, "note") == 0;
    if (good && min_steps > 0) {
        size_t hsteps = (min_steps + 4) / 5, esteps = min_steps > 3 ? (min_steps - 4) / 7 + 1 : 0;
        good = nh >= hsteps * NLAYERS * AMPDIAG_NKINDS && ne >= esteps;
    }
    free(S);
    free(T);
    free(H);
    free(E);
    ampdiag_trace_reader_close(r);
    return good;
}

static void test_kills(void)
{
    unsigned seed = 20240611u;
    int all_good = 1, cut = 0, mid = 0;
    size_t total_flushed = 0;
    for (int it = 0; it < 20; it++) {
        unsigned every = 1 + (unsigned)(rand_r(&seed) % 5);
        long wait_ms = rand_r(&seed) % 40;
        const char *path = tpath("kill.h5");
        int p[2];
        if (pipe(p) != 0) {
            ok(0, "pipe");
            return;
        }
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            ampdiag_trace_writer *w = child_create(path, every);
            uint64_t flushes = 0;
            for (int64_t s = 0; s < MAX_STEPS; s++) {
                if (append_step(w, s))
                    _exit(5);
                ampdiag_trace_writer_info info;
                ampdiag_trace_writer_get_info(w, &info);
                if (info.flushes != flushes) {
                    flushes = info.flushes;
                    int64_t v = (int64_t)info.steps_flushed;
                    if (write_all(p[1], &v, sizeof v))
                        _exit(6);
                }
            }
            for (;;)
                pause();
        }
        close(p[1]);
        int64_t v = -1, last = -1;
        if (read_report(p[0], &v) == 0)
            last = v;
        sleep_ms(wait_ms);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        while (read_report(p[0], &v) == 0)
            last = v;
        close(p[0]);
        if (last < 0) {
            all_good = 0;
            diag("kill %d: the child reported no flush (status %d)", it, st);
            continue;
        }
        size_t steps = 0;
        ampdiag_trace_status status;
        int repaired;
        int good = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL &&
                   verify(path, (size_t)last, &steps, &status, &repaired) &&
                   status == AMPDIAG_STATUS_RUNNING && !repaired;
        if (!good)
            diag("kill %d (flush every %u, after %ld ms): last flush reported at %lld steps, trace "
                 "holds %zu",
                 it, every, wait_ms, (long long)last, steps);
        all_good &= good;
        cut += status == AMPDIAG_STATUS_RUNNING;
        mid += steps > (size_t)last; /* a kill during a flush: part of it reached the disk */
        total_flushed += (size_t)last;
        unlink(path);
    }
    ok(all_good, "%s20 SIGKILLed writers: every trace opens as cut off ('running') and holds every "
                 "record up to the last reported flush, exactly", background ? "writing in the background: " : "");
    ok(cut == 20 && total_flushed > 0, "%d traces cut off, %zu flushed steps checked (%d kills "
                                        "landed after more rows reached the disk)",
       cut, total_flushed, mid);
}

static void test_early_kill(void)
{
    const char *path = tpath("early.h5");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        ampdiag_trace_writer *w = child_create(path, 10);
        (void)w;
        raise(SIGKILL); /* before the first record: not yet in SWMR mode */
        _exit(1);
    }
    int st;
    waitpid(pid, &st, 0);
    ampdiag_trace_reader *r = NULL;
    int rc = ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET | AMPDIAG_TRACE_READ_NO_REPAIR, &r);
    ok(rc == AMPDIAG_TRACE_ETRUNCATED && strstr(ampdiag_trace_errmsg(), "marked as open for writing") &&
           strstr(ampdiag_trace_errmsg(), "early.h5"),
       "killed before its first record, without repair: %s", ampdiag_trace_errmsg());
    rc = ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &r);
    ampdiag_trace_counts c;
    ampdiag_trace_get_counts(r, &c);
    ok(rc == 0 && ampdiag_trace_was_repaired(r) && ampdiag_trace_cut_off(r) && c.steps == 0,
       "... with repair: the mark is cleared, the trace opens cut off with 0 steps (%s)",
       rc ? ampdiag_trace_errmsg() : "ok");
    ampdiag_trace_reader_close(r);
    rc = ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET | AMPDIAG_TRACE_READ_NO_REPAIR, &r);
    ok(rc == 0 && !ampdiag_trace_was_repaired(r), "... and stays readable without repair");
    ampdiag_trace_reader_close(r);
    unlink(path);
}

static volatile sig_atomic_t stop_requested;
static void on_term(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void test_sigterm(void)
{
    const char *path = tpath("term.h5");
    int p[2];
    if (pipe(p) != 0)
        return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigaction(SIGTERM, &sa, NULL);
        ampdiag_trace_writer *w = child_create(path, 10);
        int64_t s = 0;
        for (; s < MAX_STEPS && !stop_requested; s++) {
            if (append_step(w, s))
                _exit(5);
            if (s == 20) {
                int64_t v = 0;
                write_all(p[1], &v, sizeof v);
            }
        }
        /* the run loop's reaction to the flag */
        int rc = ampdiag_trace_close(w, AMPDIAG_STATUS_INTERRUPTED);
        int64_t v = rc == 0 ? s : -1;
        write_all(p[1], &v, sizeof v);
        _exit(0);
    }
    close(p[1]);
    int64_t v = -1, steps = -1;
    read_report(p[0], &v);
    kill(pid, SIGTERM);
    read_report(p[0], &steps);
    int st;
    waitpid(pid, &st, 0);
    close(p[0]);
    size_t n = 0;
    ampdiag_trace_status status = AMPDIAG_STATUS_UNKNOWN;
    int repaired = 0;
    int good = steps > 20 && WIFEXITED(st) && verify(path, (size_t)steps, &n, &status, &repaired);
    ok(good && status == AMPDIAG_STATUS_INTERRUPTED && n == (size_t)steps,
       "SIGTERM -> flag -> close(INTERRUPTED): status %s, all %lld appended steps kept (%zu)",
       ampdiag_status_name(status) ? ampdiag_status_name(status) : "?", (long long)steps, n);
    unlink(path);
}

static void test_live_reader(void)
{
    const char *path = tpath("live.h5");
    int p[2];
    if (pipe(p) != 0)
        return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        ampdiag_trace_writer *w = child_create(path, 5);
        uint64_t flushes = 0;
        for (int64_t s = 0; s < 60; s++) {
            if (append_step(w, s))
                _exit(5);
            ampdiag_trace_writer_info info;
            ampdiag_trace_writer_get_info(w, &info);
            if (info.flushes != flushes) {
                flushes = info.flushes;
                int64_t v = (int64_t)info.steps_flushed;
                write_all(p[1], &v, sizeof v);
            }
            sleep_ms(2);
        }
        _exit(ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE) == 0 ? 0 : 7);
    }
    close(p[1]);
    int64_t v = 0;
    while (v < 10 && read_report(p[0], &v) == 0)
        ;
    ampdiag_trace_reader *r = NULL;
    int rc = ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, &r);
    ampdiag_trace_counts c1, c2;
    ampdiag_trace_get_counts(r, &c1);
    ok(rc == 0 && ampdiag_trace_cut_off(r) && c1.steps >= 10,
       "a reader opens a trace while it is written: %zu steps so far", c1.steps);
    while (v < 40 && read_report(p[0], &v) == 0)
        ;
    rc = ampdiag_trace_refresh(r);
    ampdiag_trace_get_counts(r, &c2);
    ampdiag_trace_step *S = NULL;
    size_t n = 0;
    int good = rc == 0 && c2.steps >= 40 && c2.tensors >= 40 * NLAYERS * AMPDIAG_NKINDS &&
               ampdiag_trace_read_steps(r, &S, &n) == 0 && n == c2.steps;
    for (size_t i = 0; good && i < n; i++)
        good = S[i].step == (int64_t)i && S[i].loss == 1.0 / (double)(i + 1);
    free(S);
    ok(good, "... and after a refresh sees it grow to %zu steps", c2.steps);
    ampdiag_trace_reader_close(r);
    int st;
    waitpid(pid, &st, 0);
    close(p[0]);
    size_t steps = 0;
    ampdiag_trace_status status = AMPDIAG_STATUS_UNKNOWN;
    int repaired = 0;
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && verify(path, 60, &steps, &status, &repaired) &&
           status == AMPDIAG_STATUS_COMPLETE && steps == 60,
       "the writer completes while it was being read");
    unlink(path);
}

static void test_disk_full(void)
{
    const char *path = tpath(background ? "full-bg.h5" : "full.h5");
    int p[2];
    if (pipe(p) != 0)
        return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {150 * 1024, 150 * 1024};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(9);
        ampdiag_trace_writer *w = child_create(path, 5);
        int rc = 0;
        int64_t s = 0;
        for (; s < 100000 && rc == 0; s++)
            rc = append_step(w, s);
        ampdiag_trace_writer_info info;
        ampdiag_trace_writer_get_info(w, &info);
        int named = strstr(ampdiag_trace_errmsg(), path) != NULL;
        int again = append_step(w, s) == rc; /* the writer stays stopped */
        int crc = ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE);
        int64_t rep[5] = {rc, (int64_t)info.steps_flushed, named, again, crc};
        write_all(p[1], rep, sizeof rep);
        _exit(0);
    }
    close(p[1]);
    int64_t rep[5] = {0, 0, 0, 0, 0};
    int got = 1;
    for (int i = 0; i < 5; i++)
        got &= read_report(p[0], &rep[i]) == 0;
    int st;
    waitpid(pid, &st, 0);
    close(p[0]);
    if (!got || !WIFEXITED(st) || WEXITSTATUS(st) == 9) {
        skip("file size limit (RLIMIT_FSIZE) not available");
        return;
    }
    ok(rep[0] == AMPDIAG_TRACE_EIO && ampdiag_trace_err_is_io((int)rep[0]) && rep[2],
       "%sa write beyond the file size limit is an I/O error naming the file (after %lld flushed steps)",
       background ? "writing in the background: " : "", (long long)rep[1]);
    ok(rep[3] && rep[4] == AMPDIAG_TRACE_EIO, "later appends and close report the same error");
    size_t steps = 0;
    ampdiag_trace_status status = AMPDIAG_STATUS_UNKNOWN;
    int repaired = 0;
    int readable = rep[1] > 0 && verify(path, (size_t)rep[1], &steps, &status, &repaired) &&
                   status == AMPDIAG_STATUS_RUNNING;
    ok(readable, "what was flushed before the failure stays readable: %zu steps (>= %lld), status running",
       steps, (long long)rep[1]);
    unlink(path);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/t_trace_crash.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    test_kills();
    test_early_kill();
    test_sigterm();
    test_live_reader();
    test_disk_full();
    /* the same with batches and flushes written by the writer's thread: a killed writer still
     * leaves every flush it reported as done, and a failure there comes back all the same */
    background = 1;
    test_kills();
    test_disk_full();
    background = 0;
    rmdir(dir);
    return done_testing();
}
