/*
 * cmd_sweep.c - `ampdiag sweep --precisions fp32,fp16,bf16 [--lrs X,Y] [-j N] -o DIR [run
 * options]`: run `ampdiag run` once per (precision, learning rate) as child processes (this
 * same program, /proc/self/exe, up to N at once), each writing DIR/run-PREC[-lrX].h5 and its
 * log DIR/run-PREC[-lrX].log, then compare the traces: the text report on stdout, Markdown in
 * DIR/report.md, JSON in DIR/report.json.
 */
#include "cli/cli.h"
#include "cli/compare.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "ampdiag sweep"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag sweep --precisions P,... [--lrs X,...] [-j N] -o DIR [run options]\n"
            "                     [--format text|md|json] [--target T] [--fail-on LIST]\n"
            "\n"
            "Run `ampdiag run` for every precision (and learning rate) into DIR, then compare the\n"
            "runs (as `ampdiag compare`): the report goes to stdout, DIR/report.md and\n"
            "DIR/report.json. Each run writes DIR/run-PREC.h5 (DIR/run-PREC-lrX.h5 with --lrs) and\n"
            "its output to the .log file beside it.\n"
            "\n"
            "options:\n"
            "  --precisions LIST   fp32, fp16, bf16, bf16-pure, comma-separated (default\n"
            "                      fp32,fp16,bf16); the FP32 run is the baseline\n"
            "  --lrs LIST          learning rates to try, comma-separated (default: the run's --lr)\n"
            "  -j, --jobs N        runs at once (default 1); with N > 1 each run gets\n"
            "                      OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1 unless they are set\n"
            "  -o, --out DIR       output directory (created if missing; runs in it are replaced)\n"
            "  --format F          report on stdout: text (default), md or json\n"
            "  --target T          hardware for the recommendation (see ampdiag compare --help)\n"
            "  --fail-on LIST      as ampdiag compare: exit 1 when a condition holds\n"
            "  --warmup N          as ampdiag compare\n"
            "  --plots             draw the charts into DIR/charts and link them from report.md\n"
            "  --dry-run           print the run commands and stop\n"
            "  -h, --help\n"
            "Every option of `ampdiag run` goes to each run unchanged (--model, --data, -s/--steps,\n"
            "--scenario, --seed, --optimizer, --loss-scale, ...; see ampdiag run --help), except\n"
            "--precision, --out/-o and (with --lrs) --lr, which the sweep sets; an option that\n"
            "ampdiag run does not know is refused before any run starts.\n"
            "\n"
            "exit status: 0 success, 1 a --fail-on condition held, 2 bad usage or a run refused\n"
            "its options, 3 I/O failure or a run that failed to write its trace, 130 (143)\n"
            "stopped by SIGINT (SIGTERM): passed on to the runs, whose traces are kept, marked\n"
            "interrupted; no comparison\n");
}

typedef struct job {
    char prec[16];
    char lr[32];      /* "" = the run options' lr */
    char name[96];    /* run-fp16 or run-fp16-lr0.01 */
    char *trace, *log;
    pid_t pid;
    int status;       /* exit status once done; -1 while not */
    double t0, secs;
} job;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *join(const char *dir, const char *name, const char *ext)
{
    size_t n = strlen(dir) + strlen(name) + strlen(ext) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s%s", dir, name, ext);
    return s;
}

/* mkdir -p */
static int make_dir(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            free(p);
            return -1;
        }
        *s = '/';
    }
    int rc = mkdir(p, 0777) != 0 && errno != EEXIST ? -1 : 0;
    free(p);
    if (rc == 0) {
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            errno = ENOTDIR;
            return -1;
        }
    }
    return rc;
}

/* Split a comma list into at most max items (pointers into a copy the caller frees). */
static int split(const char *list, char **copy, const char **items, int max)
{
    *copy = strdup(list);
    if (!*copy)
        return -1;
    int n = 0;
    for (char *tok = strtok(*copy, ","); tok; tok = strtok(NULL, ",")) {
        if (n == max)
            return -2;
        items[n++] = tok;
    }
    return n;
}

/* Characters safe in a file name. */
static void sanitize(char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '-' || *s == '_'))
            *s = '_';
}

static void print_log_tail(const char *path)
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
    /* the last 8 lines */
    char *p = buf + n;
    int lines = 0;
    while (p > buf && lines < 9)
        if (*--p == '\n')
            lines++;
    if (*p == '\n')
        p++;
    fprintf(stderr, "%s", p);
    if (n && buf[n - 1] != '\n')
        fputc('\n', stderr);
}

/* SIGINT/SIGTERM: passed on to the running runs (each finishes its step and marks its trace
 * interrupted), no new run is started, and the sweep exits 128 + the signal once they are done.
 * The signals and SIGCHLD stay blocked but while waiting (sigsuspend), so none is missed. */
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

static pid_t start(job *j, const char *exe, char **argv, int jobs)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid; /* parent, or -1 */
    signals_restore();
    int fd = open(j->log, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot write '%s': %s\n", PROG, j->log, strerror(errno));
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
    execv(exe, argv);
    execvp("ampdiag", argv);
    fprintf(stderr, "%s: cannot run '%s' (or ampdiag on PATH): %s\n", PROG, exe, strerror(errno));
    _exit(EXIT_IO);
}


/* The sweep's own options; every option of `ampdiag run` is accepted too and passed on. */
enum {
    S_PRECISIONS = 1, S_LRS, S_OUT, S_JOBS, S_FORMAT, S_TARGET, S_FAIL_ON, S_WARMUP, S_PLOTS, S_DRY,
    S_HELP, S_PRECISION, S_SET, S_PASS
};

static const cli_opt own_options[] = {
    {"--precisions", 0, CLI_ARG, S_PRECISIONS}, {"--lrs", 0, CLI_ARG, S_LRS}, {"--out", 'o', CLI_ARG, S_OUT},
    {"--jobs", 'j', CLI_ARG, S_JOBS}, {"--format", 0, CLI_ARG, S_FORMAT}, {"--target", 0, CLI_ARG, S_TARGET},
    {"--fail-on", 0, CLI_ARG, S_FAIL_ON}, {"--warmup", 0, CLI_ARG, S_WARMUP}, {"--plots", 0, CLI_NOARG, S_PLOTS},
    {"--dry-run", 0, CLI_NOARG, S_DRY}, {"--help", 'h', CLI_NOARG, S_HELP}, CLI_OPT_END};

/* own_options, then run's options not among them: --precision refused, --overwrite and
 * --progress set by the sweep, the others passed on. 0, or -1 if the table is too long. */
static int sweep_options(cli_opt *t)
{
    int n = 0;
    for (const cli_opt *o = own_options; o->name; o++)
        t[n++] = *o;
    for (const cli_opt *r = run_options; r->name; r++) {
        int taken = 0;
        for (int i = 0; i < n; i++)
            taken |= strcmp(t[i].name, r->name) == 0 || (r->shortopt && r->shortopt == t[i].shortopt);
        if (taken)
            continue;
        if (n == CLI_MAX_OPTS)
            return -1;
        t[n] = *r;
        t[n++].id = strcmp(r->name, "--precision") == 0 ? S_PRECISION
                    : strcmp(r->name, "--overwrite") == 0 || strcmp(r->name, "--progress") == 0 ? S_SET
                    : S_PASS;
    }
    t[n] = (cli_opt)CLI_OPT_END;
    return 0;
}

int cmd_sweep(int argc, char **argv)
{
    const char *precisions = "fp32,fp16,bf16", *lrs = NULL, *dir = NULL;
    long jobs = 1;
    int dry = 0, plots = 0, lr_given = 0;
    compare_opts co;
    compare_opts_init(&co);
    co.prog = PROG;
    /* the run options as given ("-s5" becomes "--steps" "5") */
    char **pass = malloc((size_t)(2 * argc + 1) * sizeof *pass);
    if (!pass) {
        fprintf(stderr, "%s: out of memory\n", PROG);
        return EXIT_IO;
    }
    int npass = 0, rc = 0, caught = 0;
    char err[256];
    cli_opt table[CLI_MAX_OPTS + 1];
    cli_parser cp;
    if (sweep_options(table) || cli_parser_init(&cp, "sweep", table, argc, argv, 0))
        rc = EXIT_USAGE;
    for (int id; !rc && (id = cli_next(&cp)) != CLI_DONE;) {
        const char *v = cp.arg;
        switch (id) {
        case S_HELP:
            usage(stdout);
            free(pass);
            return 0;
        case S_PRECISIONS: precisions = v; break;
        case S_LRS: lrs = v; break;
        case S_OUT: dir = v; break;
        case S_JOBS: {
            char *end;
            errno = 0;
            jobs = strtol(v, &end, 10);
            if (end == v || *end || errno || jobs < 1 || jobs > 256) {
                fprintf(stderr, "%s: -j needs a number of jobs in 1..256, got '%s'\n", PROG, v);
                rc = EXIT_USAGE;
            }
            break;
        }
        case S_FORMAT:
            if (compare_format_parse(v, &co.format)) {
                fprintf(stderr, "%s: unknown --format '%s' (expected text, md or json)\n", PROG, v);
                rc = EXIT_USAGE;
            }
            break;
        case S_TARGET:
            if (rec_target_parse(v, &co.target) || co.target == TGT_ANY) {
                fprintf(stderr, "%s: unknown --target '%s' (expected sm70, sm75, sm80, sm89, sm90 or "
                        "cpu)\n", PROG, v);
                rc = EXIT_USAGE;
            }
            break;
        case S_FAIL_ON:
            if (rec_fail_parse(v, &co.fail_mask, err, sizeof err)) {
                fprintf(stderr, "%s: %s\n", PROG, err);
                rc = EXIT_USAGE;
            }
            break;
        case S_WARMUP: {
            char *end;
            errno = 0;
            co.warmup = strtol(v, &end, 10);
            if (end == v || *end || errno || co.warmup < 0) {
                fprintf(stderr, "%s: --warmup needs a step count >= 0, got '%s'\n", PROG, v);
                rc = EXIT_USAGE;
            }
            break;
        }
        case S_DRY: dry = 1; break;
        case S_PLOTS: plots = 1; break;
        case S_PRECISION:
            fprintf(stderr, "%s: use --precisions LIST (the sweep sets each run's --precision)\n", PROG);
            rc = EXIT_USAGE;
            break;
        case S_SET: break; /* the sweep sets these */
        case S_PASS:
            lr_given |= strcmp(cp.opt->name, "--lr") == 0;
            pass[npass++] = (char *)cp.opt->name;
            if (v)
                pass[npass++] = (char *)v;
            break;
        case CLI_POS:
            fprintf(stderr, "%s: unexpected argument '%s' (see ampdiag sweep --help)\n", PROG, v);
            rc = EXIT_USAGE;
            break;
        default:
            rc = EXIT_USAGE;
        }
    }
    if (!rc && lrs && lr_given) {
        fprintf(stderr, "%s: --lr and --lrs together: give the learning rates in --lrs\n", PROG);
        rc = EXIT_USAGE;
    }
    if (!rc && !dir) {
        fprintf(stderr, "%s: no output directory (-o DIR)\n", PROG);
        rc = EXIT_USAGE;
    }
    char *pcopy = NULL, *lcopy = NULL;
    const char *plist[16], *llist[32];
    int np = 0, nl = 0;
    if (!rc) {
        np = split(precisions, &pcopy, plist, 16);
        nl = lrs ? split(lrs, &lcopy, llist, 32) : 0;
        if (np == -1 || nl == -1) {
            fprintf(stderr, "%s: out of memory\n", PROG);
            rc = EXIT_IO;
        } else if (np <= 0 || np == -2 || nl == -2 || (lrs && nl <= 0)) {
            fprintf(stderr, "%s: --precisions takes 1..16 and --lrs 1..32 comma-separated values\n", PROG);
            rc = EXIT_USAGE;
        }
    }
    for (int p = 0; !rc && p < np; p++) {
        static const char *const ok[] = {"fp32", "fp16", "bf16", "bf16-pure"};
        int good = 0;
        for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++)
            good |= strcmp(plist[p], ok[k]) == 0;
        for (int q = 0; q < p; q++)
            if (strcmp(plist[p], plist[q]) == 0)
                good = 0;
        if (!good) {
            fprintf(stderr, "%s: --precisions: '%s' is not one of fp32, fp16, bf16, bf16-pure (or is "
                    "repeated)\n", PROG, plist[p]);
            rc = EXIT_USAGE;
        }
    }
    for (int l = 0; !rc && l < nl; l++) {
        char *end;
        errno = 0;
        double x = strtod(llist[l], &end);
        if (end == llist[l] || *end || errno || !(x > 0)) {
            fprintf(stderr, "%s: --lrs: '%s' is not a positive number\n", PROG, llist[l]);
            rc = EXIT_USAGE;
        }
    }
    if (rc) {
        free(pass);
        free(pcopy);
        free(lcopy);
        return rc;
    }

    /* the FP32 runs first: the first FP32 trace is the baseline */
    int nj = np * (nl ? nl : 1);
    job *js = calloc((size_t)nj, sizeof *js);
    const char **paths = calloc((size_t)nj, sizeof *paths);
    char **cargv = malloc((size_t)(npass + 16) * sizeof *cargv);
    if (!js || !paths || !cargv) {
        fprintf(stderr, "%s: out of memory\n", PROG);
        rc = EXIT_IO;
        goto out;
    }
    int k = 0;
    for (int pass_fp32 = 1; pass_fp32 >= 0; pass_fp32--)
        for (int p = 0; p < np; p++) {
            if ((strcmp(plist[p], "fp32") == 0) != pass_fp32)
                continue;
            for (int l = 0; l < (nl ? nl : 1); l++) {
                job *j = &js[k++];
                snprintf(j->prec, sizeof j->prec, "%s", plist[p]);
                if (nl)
                    snprintf(j->lr, sizeof j->lr, "%s", llist[l]);
                char lrname[40];
                snprintf(lrname, sizeof lrname, "%s", j->lr);
                sanitize(lrname);
                snprintf(j->name, sizeof j->name, "run-%s%s%s", j->prec, nl ? "-lr" : "", nl ? lrname : "");
                j->trace = join(dir, j->name, ".h5");
                j->log = join(dir, j->name, ".log");
                j->status = -1;
                if (!j->trace || !j->log) {
                    fprintf(stderr, "%s: out of memory\n", PROG);
                    rc = EXIT_IO;
                    goto out;
                }
            }
        }
    if (!dry && make_dir(dir) != 0) {
        fprintf(stderr, "%s: cannot create the output directory '%s': %s\n", PROG, dir, strerror(errno));
        rc = EXIT_IO;
        goto out;
    }
    char exe[4096];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el <= 0)
        snprintf(exe, sizeof exe, "ampdiag");
    else
        exe[el] = 0;

    int next = 0, running = 0, done = 0, failed = 0, worst = 0, passed_on = 0;
    double t_all = now();
    sigset_t wait_mask;
    if (!dry) {
        signals_catch();
        caught = 1;
        wait_mask = old_mask;
        sigdelset(&wait_mask, SIGINT);
        sigdelset(&wait_mask, SIGTERM);
        sigdelset(&wait_mask, SIGCHLD);
    }
    while (done < nj) {
        if (stop_signal && !passed_on) {
            fprintf(stderr, "%s: signal %d: stopping the runs (each finishes its step and marks its trace "
                    "interrupted)\n", PROG, (int)stop_signal);
            for (int q = 0; q < next; q++)
                if (js[q].pid > 0 && js[q].status < 0)
                    kill(js[q].pid, (int)stop_signal);
            passed_on = 1;
        }
        while (!stop_signal && running < jobs && next < nj) {
            job *j = &js[next++];
            int c = 0;
            cargv[c++] = (char *)"ampdiag";
            cargv[c++] = (char *)"run";
            for (int q = 0; q < npass; q++)
                cargv[c++] = pass[q];
            cargv[c++] = (char *)"--precision";
            cargv[c++] = j->prec;
            if (j->lr[0]) {
                cargv[c++] = (char *)"--lr";
                cargv[c++] = j->lr;
            }
            cargv[c++] = (char *)"-o";
            cargv[c++] = j->trace;
            cargv[c++] = (char *)"--overwrite";
            cargv[c++] = (char *)"--progress";
            cargv[c++] = (char *)"none";
            cargv[c] = NULL;
            if (dry) {
                for (int q = 0; q < c; q++)
                    printf("%s%s", q ? " " : "", cargv[q]);
                printf("\n");
                j->status = 0;
                done++;
                continue;
            }
            fflush(NULL);
            j->t0 = now();
            j->pid = start(j, exe, cargv, (int)jobs);
            if (j->pid < 0) {
                fprintf(stderr, "%s: cannot start a run: %s\n", PROG, strerror(errno));
                j->status = EXIT_IO;
                done++;
                failed++;
                worst = EXIT_IO;
                continue;
            }
            running++;
            fprintf(stderr, "%s: started %s -> %s\n", PROG, j->name, j->trace);
        }
        if (running == 0)
            break;
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid == 0) {
            sigsuspend(&wait_mask); /* a run ended, or a signal came */
            continue;
        }
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "%s: waiting for the runs: %s\n", PROG, strerror(errno));
            rc = EXIT_IO;
            goto out;
        }
        for (int q = 0; q < nj; q++) {
            job *j = &js[q];
            if (j->pid != pid || j->status >= 0)
                continue;
            j->secs = now() - j->t0;
            j->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
            running--;
            done++;
            if (j->status == 0) {
                fprintf(stderr, "%s: [%d/%d] %s done in %.1f s\n", PROG, done, nj, j->name, j->secs);
            } else if (stop_signal) {
                fprintf(stderr, "%s: %s stopped (exit %d); its log is %s\n", PROG, j->name, j->status, j->log);
            } else {
                failed++;
                int code = j->status == EXIT_USAGE ? EXIT_USAGE : EXIT_IO;
                if (code > worst)
                    worst = code;
                if (WIFSIGNALED(st))
                    fprintf(stderr, "%s: %s was killed by signal %d; its log %s ends:\n", PROG, j->name,
                            WTERMSIG(st), j->log);
                else
                    fprintf(stderr, "%s: %s failed (exit %d); its log %s ends:\n", PROG, j->name,
                            j->status, j->log);
                print_log_tail(j->log);
            }
        }
    }
    if (caught) {
        signals_restore();
        caught = 0;
    }
    if (dry)
        goto out;
    if (stop_signal) {
        fprintf(stderr, "%s: interrupted by signal %d: %d of %d runs started, no comparison\n", PROG,
                (int)stop_signal, next, nj);
        rc = EXIT_SIGNAL + stop_signal;
        goto out;
    }
    fprintf(stderr, "%s: %d runs in %.1f s\n", PROG, nj, now() - t_all);
    if (failed) {
        fprintf(stderr, "%s: %d of %d runs failed: no comparison\n", PROG, failed, nj);
        rc = worst ? worst : EXIT_IO;
        goto out;
    }
    for (int q = 0; q < nj; q++)
        paths[q] = js[q].trace;
    char *md = join(dir, "report", ".md"), *json = join(dir, "report", ".json");
    if (!md || !json) {
        free(md);
        free(json);
        fprintf(stderr, "%s: out of memory\n", PROG);
        rc = EXIT_IO;
        goto out;
    }
    co.md_path = md;
    co.json_path = json;
    char *charts = plots ? join(dir, "charts", "") : NULL;
    if (plots && !charts) {
        free(md);
        free(json);
        fprintf(stderr, "%s: out of memory\n", PROG);
        rc = EXIT_IO;
        goto out;
    }
    co.plots_dir = charts;
    co.md_plots_dir = plots ? "charts" : NULL;
    rc = compare_files(paths, (size_t)nj, &co);
    free(charts);
    if (rc == 0 || rc == EXIT_FAIL_ON)
        fprintf(stderr, "%s: reports in %s and %s\n", PROG, md, json);
    free(md);
    free(json);
out:
    if (caught)
        signals_restore();
    if (js)
        for (int q = 0; q < nj; q++) {
            free(js[q].trace);
            free(js[q].log);
        }
    free(js);
    free(paths);
    free(cargv);
    free(pass);
    free(pcopy);
    free(lcopy);
    return rc;
}
