/*
 * launch.c - a round of `ampdiag run`s, run locally or through Slurm (launch.h,
 * docs/cluster.md).
 *
 * Local: each job is a child process of this program (/proc/self/exe, else ampdiag on PATH), its
 * output to its log, at most -j at once; SIGINT/SIGTERM are passed on to the runs (each finishes
 * its step and marks its trace interrupted) and no new one starts.
 *
 * Slurm: the round is one job script, DIR/ampdiag-sweep.sbatch, submitted once as a job array
 * (sbatch --array=0-N[%J]): array task i runs job i with this program's path (or
 * $AMPDIAG_SLURM_EXE), its output to the job's log, then writes its exit status to DIR/NAME.exit.
 * The launcher waits while squeue lists the array's tasks, polling every $AMPDIAG_SLURM_POLL
 * seconds (default 5); it reads each task's exit status file as it appears (on a shared file
 * system a file written on another node may show late: it waits up to $AMPDIAG_SLURM_SETTLE
 * seconds, default 60, after the queue is empty), and asks sacct what happened to a task that
 * left none (cancelled, timed out, node failure; sacct needs the cluster's accounting). SIGINT /
 * SIGTERM cancel the array (scancel: Slurm sends SIGTERM to the runs, which mark their traces
 * interrupted). sbatch takes the cluster's settings from its own environment variables
 * (SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_TIMELIMIT, ...); --emit DIR writes the script for a
 * user to edit and submit.
 */
#include "cli/cli.h"
#include "cli/launch.h"
#include "util/escape.h"
#include "util/path.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define SCRIPT_NAME "ampdiag-sweep.sbatch"

int launch_kind_parse(const char *s, launch_kind *k)
{
    if (strcmp(s, "local") == 0)
        *k = LAUNCH_LOCAL;
    else if (strcmp(s, "slurm") == 0)
        *k = LAUNCH_SLURM;
    else
        return -1;
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This program's path, for the runs. */
static void self_exe(char *exe, size_t n)
{
    ssize_t el = readlink("/proc/self/exe", exe, n - 1);
    if (el <= 0)
        snprintf(exe, n, "ampdiag");
    else
        exe[el] = 0;
}

void launch_log_tail(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    if (fseek(f, 0, SEEK_END) == 0) {
        long size = ftell(f);
        if (size > (long)sizeof buf - 1 && fseek(f, size - (long)sizeof buf + 1, SEEK_SET) == 0)
            n = fread(buf, 1, sizeof buf - 1, f);
    }
    fclose(f);
    buf[n] = 0;
    char *p = buf + n;
    int lines = 0;
    while (p > buf && lines < 9)
        if (*--p == '\n')
            lines++;
    if (*p == '\n')
        p++;
    while (*p) {
        size_t len = strcspn(p, "\n");
        fprintf_text(stderr, "%.*s\n", (int)len, p);
        p += len + (p[len] == '\n');
    }
}

/* ------------------------------------------------------------------------------------------
 * Signals: SIGINT/SIGTERM caught while a round runs (stop_signal), SIGCHLD too for the local
 * runs. The signals stay blocked but while waiting (sigsuspend, or the Slurm poll's sleep), so
 * none is missed.
 * ------------------------------------------------------------------------------------------ */

static volatile sig_atomic_t stop_signal;
static struct sigaction old_int, old_term, old_chld;
static sigset_t old_mask;

static void on_stop(int sig) { stop_signal = sig; }
static void on_child(int sig) { (void)sig; }

static void signals_catch(void)
{
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old_mask);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_stop;
    stop_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sa.sa_handler = on_child;
    sa.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, &old_chld);
}

static void signals_restore(void)
{
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGCHLD, &old_chld, NULL);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
}

/* The mask while waiting: the signals and SIGCHLD let through. */
static void wait_mask(sigset_t *m)
{
    *m = old_mask;
    sigdelset(m, SIGINT);
    sigdelset(m, SIGTERM);
    sigdelset(m, SIGCHLD);
}

/* A job ended with exit status st (its time secs; a signal sig > 0 that killed it): a line
 * saying so; for a failure not caused by a stop signal, the end of its log. */
static void report_end(const launch_opts *o, launch_job *j, int done, int n, int sig, const char *extra)
{
    if (j->status == 0) {
        if (j->secs > 0)
            fprintf_text(stderr, "%s: [%d/%d] %s done in %.1f s\n", o->prog, done, n, j->name, j->secs);
        else
            fprintf_text(stderr, "%s: [%d/%d] %s done\n", o->prog, done, n, j->name);
    } else if (stop_signal) {
        fprintf_text(stderr, "%s: %s stopped (exit %d); its log is %s\n", o->prog, j->name, j->status, j->log);
    } else {
        const char *is = o->no_log_tail ? "is " : "", *ends = o->no_log_tail ? "" : " ends:";
        if (sig > 0)
            fprintf_text(stderr, "%s: %s was killed by signal %d; its log %s%s%s\n", o->prog, j->name, sig, is, j->log,
                         ends);
        else if (j->status < 0)
            fprintf_text(stderr, "%s: %s left no exit status%s; its log %s%s%s\n", o->prog, j->name,
                         extra ? extra : "", is, j->log, ends);
        else
            fprintf_text(stderr, "%s: %s failed (exit %d); its log %s%s%s\n", o->prog, j->name, j->status, is, j->log,
                         ends);
        if (!o->no_log_tail)
            launch_log_tail(j->log);
    }
}

/* ------------------------------------------------------------------------------------------
 * Local
 * ------------------------------------------------------------------------------------------ */

typedef struct local_state {
    pid_t *pid;
    double *t0;
    int next, running, done, passed_on;
} local_state;

static pid_t start_local(const launch_job *j, const char *exe, long jobs, const char *prog)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid; /* parent, or -1 */
    signals_restore();
    int fd = open(j->log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) {
        fprintf_text(stderr, "%s: cannot write '%s': %s\n", prog, j->log, strerror(errno));
        _exit(EXIT_IO);
    }
    if (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
        _exit(EXIT_IO);
    close(fd);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        close(devnull);
    }
    if (jobs > 1) {
        setenv("OPENBLAS_NUM_THREADS", "1", 0);
        setenv("OMP_NUM_THREADS", "1", 0);
    }
    for (size_t k = 0; j->env && j->env[k]; k++)
        putenv(j->env[k]);
    if (j->external) {
        execvp(j->argv[0], j->argv);
        fprintf_text(stderr, "%s: cannot run '%s': %s\n", prog, j->argv[0], strerror(errno));
        _exit(EXIT_IO);
    }
    j->argv[0] = (char *)"ampdiag";
    execv(exe, j->argv);
    execvp("ampdiag", j->argv);
    fprintf_text(stderr, "%s: cannot run '%s' (or ampdiag on PATH): %s\n", prog, exe, strerror(errno));
    _exit(EXIT_IO);
}

/* Start runs while fewer than -j run and no signal came (a dry run prints each command line
 * instead). A run that cannot be started counts as failed (EXIT_IO). */
static void start_runs(launch_job *js, int n, const launch_opts *o, local_state *ls, const char *exe)
{
    while (!stop_signal && ls->running < o->jobs && ls->next < n) {
        int q = ls->next++;
        launch_job *j = &js[q];
        if (o->dry) {
            if (!j->external)
                j->argv[0] = (char *)"ampdiag";
            for (int k = 0; j->argv[k]; k++)
                fprintf_text(stdout, "%s%s", k ? " " : "", j->argv[k]);
            printf("\n");
            j->status = 0;
            ls->done++;
            continue;
        }
        fflush(NULL);
        ls->t0[q] = now();
        ls->pid[q] = start_local(j, exe, o->jobs, o->prog);
        if (ls->pid[q] < 0) {
            fprintf_text(stderr, "%s: cannot start a run: %s\n", o->prog, strerror(errno));
            j->status = EXIT_IO;
            ls->done++;
            continue;
        }
        ls->running++;
        fprintf_text(stderr, "%s: started %s -> %s\n", o->prog, j->name, j->trace);
    }
}

/* The signal caught, passed on to the runs still running (once). */
static void pass_on_signal(launch_job *js, const launch_opts *o, local_state *ls)
{
    fprintf_text(stderr, "%s: signal %d: stopping the runs (each finishes its step and marks its trace "
                 "interrupted)\n", o->prog, (int)stop_signal);
    for (int q = 0; q < ls->next; q++)
        if (ls->pid[q] > 0 && js[q].status < 0)
            kill(ls->pid[q], (int)stop_signal);
    ls->passed_on = 1;
}

static int run_local(launch_job *js, int n, const launch_opts *o)
{
    local_state ls = {0};
    ls.pid = calloc((size_t)n, sizeof *ls.pid);
    ls.t0 = calloc((size_t)n, sizeof *ls.t0);
    if (!ls.pid || !ls.t0) {
        free(ls.pid);
        free(ls.t0);
        fprintf_text(stderr, "%s: out of memory\n", o->prog);
        return EXIT_IO;
    }
    char exe[4096];
    self_exe(exe, sizeof exe);
    sigset_t wm;
    if (!o->dry) {
        signals_catch();
        wait_mask(&wm);
    }
    int rc = 0;
    while (ls.done < n) {
        if (stop_signal && !ls.passed_on)
            pass_on_signal(js, o, &ls);
        start_runs(js, n, o, &ls, exe);
        if (ls.running == 0)
            break;
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid == 0) {
            sigsuspend(&wm); /* a run ended, or a signal came */
            continue;
        }
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            fprintf_text(stderr, "%s: waiting for the runs: %s\n", o->prog, strerror(errno));
            rc = EXIT_IO;
            break;
        }
        for (int q = 0; q < ls.next; q++) {
            launch_job *j = &js[q];
            if (ls.pid[q] != pid || j->status >= 0)
                continue;
            j->secs = now() - ls.t0[q];
            j->status = WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_SIGNAL + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
            j->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
            ls.running--;
            ls.done++;
            report_end(o, j, ls.done, n, WIFSIGNALED(st) ? WTERMSIG(st) : 0, NULL);
        }
    }
    if (!o->dry)
        signals_restore();
    free(ls.pid);
    free(ls.t0);
    if (!rc && stop_signal)
        rc = EXIT_SIGNAL + stop_signal;
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * Slurm
 * ------------------------------------------------------------------------------------------ */

/* s single-quoted for the shell ('it'\''s'). */
static void sh_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++)
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    fputc('\'', f);
}

/* "DIR/NAME.exit" into buf. */
static int exit_path(char *buf, size_t n, const launch_opts *o, const launch_job *j)
{
    return snprintf(buf, n, "%s/%s.exit", o->dir, j->name) >= (int)n ? -1 : 0;
}

/* An #SBATCH line with a path: double-quoted (sbatch reads quotes there); a path holding a
 * double quote or a line break is left to the sbatch command line (submit passes both). */
static void sbatch_path_line(FILE *f, const char *opt, const char *path, const char *tail)
{
    if (strpbrk(path, "\"\n\r"))
        fprintf(f, "# %s: its path holds a quote or a line break; give it on sbatch's command line\n", opt);
    else
        fprintf_text(f, "#SBATCH %s=\"%s%s\"\n", opt, path, tail);
}

/* The job script: one array task per job. */
static int write_script(FILE *f, const launch_job *js, int n, const launch_opts *o, const char *exe,
                        const char *cwd)
{
    char ep[4200];
    fprintf(f, "#!/bin/sh\n");
    fprintf(f, "#SBATCH --job-name=ampdiag-sweep\n");
    if (o->jobs > 0)
        fprintf(f, "#SBATCH --array=0-%d%%%ld\n", n - 1, o->jobs);
    else
        fprintf(f, "#SBATCH --array=0-%d\n", n - 1);
    sbatch_path_line(f, "--output", o->dir, "/slurm-%A_%a.out");
    sbatch_path_line(f, "--chdir", cwd, "");
    fprintf(f, "#\n# Written by %s (docs/cluster.md): one array task per configuration. Each runs\n"
               "# %s into its trace, its output to its log, then writes its exit status to\n"
               "# DIR/NAME.exit, which %s reads. Add the headers your cluster needs above\n"
               "# (partition, account, time, cpus-per-task), or set SBATCH_PARTITION and the like.\n",
            o->prog, n > 0 && js[0].external ? "your command (with the variables it is told)" : "`ampdiag run`",
            n > 0 && js[0].external ? "tune" : "the sweep");
    fprintf(f, "export OPENBLAS_NUM_THREADS=\"${OPENBLAS_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}\"\n");
    fprintf(f, "export OMP_NUM_THREADS=\"${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}\"\n");
    fputs("AMPDIAG=", f);
    sh_quote(f, exe);
    fputs("\ncase \"$SLURM_ARRAY_TASK_ID\" in\n", f);
    for (int q = 0; q < n; q++) {
        if (exit_path(ep, sizeof ep, o, &js[q]))
            return -1;
        fprintf(f, "%d)\n    log=", q);
        sh_quote(f, js[q].log);
        fputs(" st=", f);
        sh_quote(f, ep);
        for (size_t k = 0; js[q].env && js[q].env[k]; k++) {
            fputs(k ? " " : "\n    export ", f);
            sh_quote(f, js[q].env[k]);
        }
        /* this program's runs: "$AMPDIAG" run ...; another program's (tune -- CMD): as given */
        fputs(js[q].external ? "\n    set --" : "\n    set -- \"$AMPDIAG\"", f);
        for (int k = js[q].external ? 0 : 1; js[q].argv[k]; k++) {
            fputc(' ', f);
            sh_quote(f, js[q].argv[k]);
        }
        fputs(" ;;\n", f);
    }
    fputs("*) echo \"ampdiag: no configuration for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 2 ;;\nesac\n", f);
    /* the run in the background, so that the shell lives until it has closed its trace: a
     * cancelled job's processes get SIGTERM, and once the script ends Slurm kills what is left */
    fputs("\"$@\" >\"$log\" 2>&1 </dev/null &\nrun=$!\n"
          "trap 'kill -TERM \"$run\" 2>/dev/null' TERM INT\n"
          "wait \"$run\"\nrc=$?\n"
          "while kill -0 \"$run\" 2>/dev/null; do wait \"$run\"; rc=$?; done\n", f);
    fputs("echo \"$rc\" >\"$st.tmp\" && mv -f \"$st.tmp\" \"$st\"\nexit \"$rc\"\n", f);
    return ferror(f) ? -1 : 0;
}

/* Run argv (argv[0] looked up on PATH), its stdout and stderr into out (n bytes, NUL-ended, the
 * rest dropped). Returns its exit status, 128 + a signal, or -1 when it could not be started
 * (errno kept). */
static int capture(char *const argv[], char *out, size_t n)
{
    int p[2];
    out[0] = 0;
    if (pipe(p) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int rc = posix_spawn_file_actions_init(&fa);
    if (!rc)
        rc = posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    if (!rc)
        rc = posix_spawn_file_actions_adddup2(&fa, p[1], STDERR_FILENO);
    if (!rc)
        rc = posix_spawn_file_actions_addclose(&fa, p[0]);
    if (!rc)
        rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t at;
    sigset_t none;
    sigemptyset(&none);
    if (!rc)
        rc = posix_spawnattr_init(&at);
    if (!rc) { /* the child starts with no signal blocked, whatever the round blocks */
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
        rc = posix_spawnp(&pid, argv[0], &fa, &at, argv, environ);
        posix_spawnattr_destroy(&at);
    }
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc) {
        close(p[0]);
        errno = rc;
        return -1;
    }
    size_t got = 0;
    char drop[512];
    for (;;) {
        ssize_t r = got + 1 < n ? read(p[0], out + got, n - 1 - got) : read(p[0], drop, sizeof drop);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (got + 1 < n)
            got += (size_t)r;
    }
    out[got] = 0;
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_SIGNAL + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* A positive number of seconds from the environment, else dflt. */
static double env_seconds(const char *name, double dflt)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return dflt;
    double x = strtod(v, &end);
    return (end != v && !*end && x > 0 && x < 86400) ? x : dflt;
}

/* Sleep up to s seconds with SIGINT/SIGTERM let through (returns early on one). */
static void pause_for(double s)
{
    sigset_t wm;
    wait_mask(&wm);
    sigprocmask(SIG_SETMASK, &wm, NULL);
    struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
    if (!stop_signal)
        nanosleep(&ts, NULL);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, NULL);
}

/* Read the exit status files that appeared; report each job the first time. Returns how many
 * jobs have one. */
static int collect(launch_job *js, int n, const launch_opts *o, int *done)
{
    char ep[4200];
    int have = 0;
    for (int q = 0; q < n; q++) {
        launch_job *j = &js[q];
        if (j->status >= 0) {
            have++;
            continue;
        }
        if (exit_path(ep, sizeof ep, o, j))
            continue;
        FILE *f = fopen(ep, "r");
        if (!f)
            continue;
        int v;
        int got = fscanf(f, "%d", &v);
        fclose(f);
        if (got != 1 || v < 0 || v > 255)
            continue;
        j->status = v;
        j->signal = v > EXIT_SIGNAL && v < EXIT_SIGNAL + 65 ? v - EXIT_SIGNAL : 0;
        have++;
        (*done)++;
        report_end(o, j, *done, n, j->signal, NULL);
    }
    return have;
}

/* 1 while squeue lists a task of the job, 0 when none, -1 when squeue failed. */
static int queued(const char *jobid, char *msg, size_t n)
{
    char out[8192];
    char *argv[] = {"squeue", "-h", "-r", "-j", (char *)jobid, "-o", "%i %T", NULL};
    int rc = capture(argv, out, sizeof out);
    if (rc != 0) {
        if (strstr(out, "Invalid job id")) /* gone from the controller's memory: done */
            return 0;
        snprintf(msg, n, "squeue %s", rc < 0 ? strerror(errno) : out);
        return -1;
    }
    for (char *p = out; *p; p++)
        if (*p != ' ' && *p != '\n' && *p != '\t')
            return 1;
    return 0;
}

/* What sacct says of task q of the job, as " (Slurm: STATE, exit code X:Y)", or "" when sacct
 * cannot tell (no accounting on this cluster). */
static void sacct_state(const char *jobid, int q, char *buf, size_t n)
{
    char out[16384], want[96];
    char *argv[] = {"sacct", "-n", "-P", "-X", "-j", (char *)jobid, "--format=JobID,State,ExitCode", NULL};
    buf[0] = 0;
    if (capture(argv, out, sizeof out) != 0)
        return;
    snprintf(want, sizeof want, "%s_%d|", jobid, q);
    char *line = strstr(out, want);
    if (!line || (line != out && line[-1] != '\n'))
        return;
    line += strlen(want);
    size_t len = strcspn(line, "\n");
    char st[128];
    snprintf(st, sizeof st, "%.*s", (int)(len < 100 ? len : 100), line);
    char *bar = strchr(st, '|');
    if (bar)
        *bar = 0;
    snprintf(buf, n, " (Slurm: %s%s%s)", st, bar ? ", exit code " : "", bar ? bar + 1 : "");
}

/* Where the job script goes: o->emit_dir or o->dir. 0, or an exit status after a message. */
static int script_path(const launch_opts *o, char *buf, size_t n)
{
    const char *d = o->emit_dir ? o->emit_dir : o->dir;
    if (o->emit_dir) {
        char msg[600];
        int mrc = path_make_dir(o->emit_dir, msg, sizeof msg);
        if (mrc) {
            fprintf_text(stderr, "%s: --emit: %s\n", o->prog, msg);
            return mrc == 2 ? EXIT_USAGE : EXIT_IO;
        }
    }
    if (snprintf(buf, n, "%s/%s", d, SCRIPT_NAME) >= (int)n) {
        fprintf_text(stderr, "%s: the path '%s' is too long\n", o->prog, d);
        return EXIT_USAGE;
    }
    return 0;
}

/* Write the job script (stdout for a dry run). 0, or an exit status after a message. */
static int make_script(launch_job *js, int n, const launch_opts *o, char *path, size_t pn)
{
    char exe[4096], cwd[4096];
    const char *env_exe = getenv("AMPDIAG_SLURM_EXE");
    if (env_exe && *env_exe)
        snprintf(exe, sizeof exe, "%s", env_exe);
    else
        self_exe(exe, sizeof exe);
    if (!getcwd(cwd, sizeof cwd)) {
        fprintf_text(stderr, "%s: the current directory: %s\n", o->prog, strerror(errno));
        return EXIT_IO;
    }
    if (o->dry)
        return write_script(stdout, js, n, o, exe, cwd) ? EXIT_IO : 0;
    int rc = script_path(o, path, pn);
    if (rc)
        return rc;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf_text(stderr, "%s: cannot write '%s': %s\n", o->prog, path, strerror(errno));
        return EXIT_IO;
    }
    int bad = write_script(f, js, n, o, exe, cwd);
    if ((fclose(f) != 0) | bad) {
        fprintf_text(stderr, "%s: cannot write '%s'\n", o->prog, path);
        return EXIT_IO;
    }
    return 0;
}

/* sbatch --parsable --output=DIR/slurm-%A_%a.out --chdir=CWD SCRIPT (the paths as arguments
 * too: no quoting to go wrong): the job id into jobid. 0, or an exit status after a message. */
static int submit(const char *script, const launch_opts *o, char *jobid, size_t n)
{
    char out[4096], opath[4200], cwd[4096], chdir_opt[4200];
    if (!getcwd(cwd, sizeof cwd) ||
        snprintf(opath, sizeof opath, "--output=%s/slurm-%%A_%%a.out", o->dir) >= (int)sizeof opath ||
        snprintf(chdir_opt, sizeof chdir_opt, "--chdir=%s", cwd) >= (int)sizeof chdir_opt) {
        fprintf_text(stderr, "%s: the current directory or '%s' is too long to submit\n", o->prog, o->dir);
        return EXIT_IO;
    }
    char *argv[] = {"sbatch", "--parsable", opath, chdir_opt, (char *)script, NULL};
    int rc = capture(argv, out, sizeof out);
    if (rc < 0) {
        fprintf_text(stderr, "%s: --launcher slurm: cannot run sbatch (%s): is Slurm's client on PATH? "
                     "(docs/cluster.md)\n", o->prog, strerror(errno));
        return EXIT_USAGE;
    }
    /* the id is the line of digits (";cluster" may follow); warnings may come before it */
    for (char *line = out; *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] == '\n')) {
        size_t d = strspn(line, "0123456789");
        if (rc == 0 && d > 0 && d < n && (line[d] == ';' || line[d] == '\n' || line[d] == 0)) {
            snprintf(jobid, n, "%.*s", (int)d, line);
            return 0;
        }
    }
    fprintf_text(stderr, "%s: sbatch %s refused the job array (exit %d): %s\n", o->prog, script, rc, out);
    return EXIT_IO;
}

static int run_slurm(launch_job *js, int n, const launch_opts *o)
{
    char script[4200], jobid[64], ep[4200], msg[8400];
    int rc = make_script(js, n, o, script, sizeof script);
    if (rc || o->dry)
        return rc;
    if (o->emit_dir) {
        fprintf_text(stderr, "%s: wrote %s (%d configurations); submit it with `sbatch %s`, then compare the "
                     "traces with `ampdiag compare`\n", o->prog, script, n, script);
        return 0;
    }
    for (int q = 0; q < n; q++) /* no status of an earlier sweep into the same directory */
        if (!exit_path(ep, sizeof ep, o, &js[q]) && unlink(ep) != 0 && errno != ENOENT) {
            fprintf_text(stderr, "%s: cannot remove '%s': %s\n", o->prog, ep, strerror(errno));
            return EXIT_IO;
        }
    if ((rc = submit(script, o, jobid, sizeof jobid)))
        return rc;
    fprintf_text(stderr, "%s: submitted job array %s (%d tasks, %s)\n", o->prog, jobid, n, script);
    double poll = env_seconds("AMPDIAG_SLURM_POLL", 5), settle = env_seconds("AMPDIAG_SLURM_SETTLE", 60);
    signals_catch();
    int done = 0, fails = 0;
    rc = 0;
    for (;;) {
        collect(js, n, o, &done);
        if (stop_signal)
            break;
        int q = queued(jobid, msg, sizeof msg);
        if (q < 0) {
            if (++fails >= 5) {
                fprintf_text(stderr, "%s: cannot read the queue of job %s: %s\n", o->prog, jobid, msg);
                rc = EXIT_IO;
                break;
            }
        } else {
            fails = 0;
            if (q == 0)
                break;
        }
        pause_for(poll);
    }
    if (stop_signal) {
        fprintf_text(stderr, "%s: signal %d: cancelling job array %s (its runs mark their traces "
                     "interrupted)\n", o->prog, (int)stop_signal, jobid);
        char *argv[] = {"scancel", jobid, NULL};
        if (capture(argv, msg, sizeof msg) != 0)
            fprintf_text(stderr, "%s: scancel %s failed: %s\n", o->prog, jobid, msg);
        rc = EXIT_SIGNAL + stop_signal;
    } else if (!rc) {
        /* the queue is empty: the status files may still be on their way (a shared file system) */
        double t0 = now();
        while (collect(js, n, o, &done) < n && now() - t0 < settle && !stop_signal)
            pause_for(poll < 1 ? poll : 1);
        for (int q = 0; q < n; q++)
            if (js[q].status < 0) {
                char why[256];
                sacct_state(jobid, q, why, sizeof why);
                report_end(o, &js[q], done, n, 0, why);
            }
        if (stop_signal)
            rc = EXIT_SIGNAL + stop_signal;
    }
    signals_restore();
    return rc;
}

int launch_round(launch_job *js, int n, const launch_opts *o)
{
    stop_signal = 0;
    for (int q = 0; q < n; q++) {
        js[q].status = -1;
        js[q].signal = 0;
        js[q].secs = 0;
    }
    if (n <= 0)
        return 0;
    return o->kind == LAUNCH_SLURM ? run_slurm(js, n, o) : run_local(js, n, o);
}
