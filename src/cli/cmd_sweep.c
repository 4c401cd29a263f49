/*
 * cmd_sweep.c - `ampdiag sweep --precisions fp32,fp16,bf16 [--lrs X,Y] [-j N] -o DIR [run
 * options]`: run `ampdiag run` once per (precision, learning rate) as child processes (this
 * same program, /proc/self/exe, up to N at once), each writing DIR/run-PREC[-lrX].h5 and its
 * log DIR/run-PREC[-lrX].log, then compare the traces: the text report on stdout, Markdown in
 * DIR/report.md, JSON in DIR/report.json. With --launcher slurm the runs are one Slurm job array
 * (src/cli/launch.c runs them either way; docs/cluster.md).
 */
#include "cli/cli.h"
#include "cli/compare.h"
#include "cli/launch.h"
#include "util/path.h"
#include "util/escape.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define PROG "ampdiag sweep"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag sweep --precisions P,... [--lrs X,...] [-j N] -o DIR [run options]\n"
            "                     [--format text|md|json] [--target T] [--fail-on LIST]\n"
            "                     [--launcher local|slurm] [--emit DIR]\n"
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
            "                      (slurm: at most N array tasks at once; default no limit)\n"
            "  --launcher L        local (default): child processes of this program; slurm: one\n"
            "                      Slurm job array (sbatch --array), waited for (squeue, sacct);\n"
            "                      DIR must be on a file system the cluster's nodes share\n"
            "                      (docs/cluster.md)\n"
            "  --emit EDIR         with slurm: write the job script EDIR/ampdiag-sweep.sbatch and\n"
            "                      stop (submit it yourself, then ampdiag compare DIR/run-*.h5)\n"
            "  -o, --out DIR       output directory (created if missing; runs in it are replaced)\n"
            "  --format F          report on stdout: text (default), md or json\n"
            "  --target T          hardware for the recommendation (see ampdiag compare --help)\n"
            "  --fail-on LIST      as ampdiag compare: exit 1 when a condition holds\n"
            "  --warmup N          as ampdiag compare\n"
            "  --what-if LIST      as ampdiag compare: what-if sections beyond FP16 and BF16\n"
            "  --plots             draw the charts into DIR/charts and link them from report.md\n"
            "  --dry-run           check every run as ampdiag run --dry-run does, print the run\n"
            "                      commands and stop\n"
            "  -h, --help\n"
            "Every option of `ampdiag run` goes to each run unchanged (--model, --data, -s/--steps,\n"
            "--scenario, --seed, --optimizer, --loss-scale, ...; see ampdiag run --help), except\n"
            "--precision, --out/-o and (with --lrs) --lr, which the sweep sets, and --save-weights\n"
            "(every run would write the same file). Every run is checked before any starts (an\n"
            "option, a model, data or weights file a run would refuse stops the sweep there).\n"
            "\n"
            "exit status: 0 success, 1 a --fail-on condition held, 2 bad usage or a run refused\n"
            "its options, 3 I/O failure or a run that failed to write its trace, 130 (143)\n"
            "stopped by SIGINT (SIGTERM): passed on to the runs (slurm: the job array cancelled),\n"
            "whose traces are kept, marked interrupted; no comparison\n");
}

typedef struct job {
    char prec[16];
    char lr[32];      /* "" = the run options' lr */
    char name[96];    /* run-fp16 or run-fp16-lr0.01 */
    char *trace, *log;
} job;

static char *join(const char *dir, const char *name, const char *ext)
{
    size_t n = strlen(dir) + strlen(name) + strlen(ext) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s%s", dir, name, ext);
    return s;
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

/* The sweep's own options; every option of `ampdiag run` is accepted too and passed on. */
enum {
    S_PRECISIONS = 1, S_LRS, S_OUT, S_JOBS, S_FORMAT, S_TARGET, S_FAIL_ON, S_WARMUP, S_WHATIF, S_PLOTS, S_DRY,
    S_HELP, S_PRECISION, S_SET, S_PASS, S_LAUNCHER, S_EMIT
};

static const cli_opt own_options[] = {
    {"--precisions", 0, CLI_ARG, S_PRECISIONS}, {"--lrs", 0, CLI_ARG, S_LRS}, {"--out", 'o', CLI_ARG, S_OUT},
    {"--jobs", 'j', CLI_ARG, S_JOBS}, {"--format", 0, CLI_ARG, S_FORMAT}, {"--target", 0, CLI_ARG, S_TARGET},
    {"--fail-on", 0, CLI_ARG, S_FAIL_ON}, {"--warmup", 0, CLI_ARG, S_WARMUP}, {"--plots", 0, CLI_NOARG, S_PLOTS},
    {"--what-if", 0, CLI_ARG, S_WHATIF}, {"--dry-run", 0, CLI_NOARG, S_DRY}, {"--help", 'h', CLI_NOARG, S_HELP},
    {"--launcher", 0, CLI_ARG, S_LAUNCHER}, {"--emit", 0, CLI_ARG, S_EMIT}, CLI_OPT_END};

/* run's options: --precision refused, --overwrite and --progress set by the sweep, the others
 * passed on (cli_with_run_options). */
static int sweep_id_of(const char *name)
{
    return strcmp(name, "--precision") == 0 ? S_PRECISION
           : strcmp(name, "--overwrite") == 0 || strcmp(name, "--progress") == 0 ? S_SET
           : S_PASS;
}

/* A sweep as cmd_sweep goes through it: its options, the runs and their progress. */
typedef struct sweep {
    const char *precisions, *lrs, *dir;
    long jobs;                   /* runs at once */
    int dry, plots, lr_given, jobs_given;
    launch_kind launcher;        /* --launcher */
    const char *emit;            /* --emit DIR */
    compare_opts co;
    char **pass;                 /* the run options as given ("-s5" becomes "--steps" "5") */
    int npass;
    char *pcopy, *lcopy;         /* the lists, split: plist and llist point into them */
    const char *plist[16], *llist[32];
    int np, nl;
    job *js;                     /* [nj]: the FP32 runs first */
    int nj;
    const char **paths;          /* [nj]: their traces, for the comparison */
    char **cargv;                /* [nj][npass + 16]: each run's argv */
    launch_job *lj;              /* [nj]: the runs as the launcher runs them */
    int failed, worst;
} sweep;

/* The defaults, and room for the run options to pass on. 0 or EXIT_IO after a message. */
static int sweep_init(sweep *sw, int argc)
{
    memset(sw, 0, sizeof *sw);
    sw->precisions = "fp32,fp16,bf16";
    sw->jobs = 1;
    compare_opts_init(&sw->co);
    sw->co.prog = PROG;
    sw->pass = malloc((size_t)(2 * argc + 1) * sizeof *sw->pass);
    if (!sw->pass) {
        fprintf_text(stderr, "%s: out of memory\n", PROG);
        return EXIT_IO;
    }
    return 0;
}

/* Everything the sweep allocated. */
static void sweep_free(sweep *sw)
{
    if (sw->js)
        for (int q = 0; q < sw->nj; q++) {
            free(sw->js[q].trace);
            free(sw->js[q].log);
        }
    free(sw->js);
    free(sw->paths);
    free(sw->cargv);
    free(sw->lj);
    free(sw->pass);
    free(sw->pcopy);
    free(sw->lcopy);
}

/* -j N. 0 or EXIT_USAGE after a message. */
static int parse_jobs(sweep *sw, const char *v)
{
    char *end;
    errno = 0;
    sw->jobs = strtol(v, &end, 10);
    if (end == v || *end || errno || sw->jobs < 1 || sw->jobs > 256) {
        fprintf_text(stderr, "%s: -j needs a number of jobs in 1..256, got '%s'\n", PROG, v);
        return EXIT_USAGE;
    }
    return 0;
}

/* --warmup N. 0 or EXIT_USAGE after a message. */
static int parse_warmup(sweep *sw, const char *v)
{
    char *end;
    errno = 0;
    sw->co.warmup = strtol(v, &end, 10);
    if (end == v || *end || errno || sw->co.warmup < 0) {
        fprintf_text(stderr, "%s: --warmup needs a step count >= 0, got '%s'\n", PROG, v);
        return EXIT_USAGE;
    }
    return 0;
}

/* The comparison's options (as ampdiag compare's). 0, EXIT_USAGE after a message, or -1: not
 * one of them. */
static int compare_option(sweep *sw, int id, const char *v)
{
    char err[256];
    switch (id) {
    case S_FORMAT:
        if (compare_format_parse(v, &sw->co.format)) {
            fprintf_text(stderr, "%s: unknown --format '%s' (expected text, md or json)\n", PROG, v);
            return EXIT_USAGE;
        }
        return 0;
    case S_TARGET:
        if (rec_target_parse(v, &sw->co.target) || sw->co.target == TGT_ANY) {
            fprintf_text(stderr, "%s: unknown --target '%s' (expected sm70, sm75, sm80, sm89, sm90 or "
                         "cpu)\n", PROG, v);
            return EXIT_USAGE;
        }
        return 0;
    case S_FAIL_ON:
        if (rec_fail_parse(v, &sw->co.fail_mask, err, sizeof err)) {
            fprintf_text(stderr, "%s: %s\n", PROG, err);
            return EXIT_USAGE;
        }
        return 0;
    case S_WARMUP: return parse_warmup(sw, v);
    case S_WHATIF: sw->co.whatif = v; return 0;
    default: return -1;
    }
}

/* One option (opt the table entry, v its value or the argument): the sweep's own, the
 * comparison's, or a run option to pass on. 0 or EXIT_USAGE after a message. */
static int sweep_option(sweep *sw, int id, const cli_opt *opt, const char *v)
{
    switch (id) {
    case S_PRECISIONS: sw->precisions = v; return 0;
    case S_LRS: sw->lrs = v; return 0;
    case S_OUT: sw->dir = v; return 0;
    case S_JOBS: sw->jobs_given = 1; return parse_jobs(sw, v);
    case S_LAUNCHER:
        if (launch_kind_parse(v, &sw->launcher)) {
            fprintf_text(stderr, "%s: unknown --launcher '%s' (expected local or slurm)\n", PROG, v);
            return EXIT_USAGE;
        }
        return 0;
    case S_EMIT: sw->emit = v; return 0;
    case S_DRY: sw->dry = 1; return 0;
    case S_PLOTS: sw->plots = 1; return 0;
    case S_PRECISION:
        fprintf_text(stderr, "%s: use --precisions LIST (the sweep sets each run's --precision)\n", PROG);
        return EXIT_USAGE;
    case S_SET: return 0; /* the sweep sets these */
    case S_PASS:
        if (strcmp(opt->name, "--save-weights") == 0) {
            fprintf_text(stderr, "%s: --save-weights: every run of the sweep would write the same file "
                         "(save weights with ampdiag run)\n", PROG);
            return EXIT_USAGE;
        }
        sw->lr_given |= strcmp(opt->name, "--lr") == 0;
        sw->pass[sw->npass++] = (char *)opt->name;
        if (v)
            sw->pass[sw->npass++] = (char *)v;
        return cli_check_passed_option(PROG, opt, v);
    case CLI_POS:
        fprintf_text(stderr, "%s: unexpected argument '%s' (see ampdiag sweep --help)\n", PROG, v);
        return EXIT_USAGE;
    default: {
        int rc = compare_option(sw, id, v);
        return rc < 0 ? EXIT_USAGE : rc; /* CLI_ERR: the message is printed */
    }
    }
}

/* Parse the command line into *sw; --help prints the usage and sets *help. 0 or EXIT_USAGE
 * (the message printed). */
static int parse_sweep_args(sweep *sw, int argc, char **argv, int *help)
{
    cli_opt table[CLI_MAX_OPTS + 1];
    cli_parser cp;
    int rc = 0;
    *help = 0;
    if (cli_with_run_options(table, own_options, sweep_id_of) || cli_parser_init(&cp, "sweep", table, argc, argv, 0))
        rc = EXIT_USAGE;
    for (int id; !rc && (id = cli_next(&cp)) != CLI_DONE;) {
        if (id == S_HELP) {
            usage(stdout);
            *help = 1;
            return 0;
        }
        rc = sweep_option(sw, id, cp.opt, cp.arg);
    }
    return rc;
}

/* --precisions and --lrs split into plist and llist. 0, EXIT_IO or EXIT_USAGE after a
 * message. */
static int split_lists(sweep *sw)
{
    sw->np = split(sw->precisions, &sw->pcopy, sw->plist, 16);
    sw->nl = sw->lrs ? split(sw->lrs, &sw->lcopy, sw->llist, 32) : 0;
    if (sw->np == -1 || sw->nl == -1) {
        fprintf_text(stderr, "%s: out of memory\n", PROG);
        return EXIT_IO;
    }
    if (sw->np <= 0 || sw->np == -2 || sw->nl == -2 || (sw->lrs && sw->nl <= 0)) {
        fprintf_text(stderr, "%s: --precisions takes 1..16 and --lrs 1..32 comma-separated values\n", PROG);
        return EXIT_USAGE;
    }
    return 0;
}

/* Each precision known and given once, each learning rate a positive number. 0 or EXIT_USAGE
 * after a message (about the first that is not). */
static int check_values(const sweep *sw)
{
    static const char *const ok[] = {"fp32", "fp16", "bf16", "bf16-pure"};
    for (int p = 0; p < sw->np; p++) {
        int good = 0;
        for (size_t k = 0; k < sizeof ok / sizeof ok[0]; k++)
            good |= strcmp(sw->plist[p], ok[k]) == 0;
        for (int q = 0; q < p; q++)
            if (strcmp(sw->plist[p], sw->plist[q]) == 0)
                good = 0;
        if (!good) {
            fprintf_text(stderr, "%s: --precisions: '%s' is not one of fp32, fp16, bf16, bf16-pure (or is "
                         "repeated)\n", PROG, sw->plist[p]);
            return EXIT_USAGE;
        }
    }
    for (int l = 0; l < sw->nl; l++) {
        char *end;
        errno = 0;
        double x = strtod(sw->llist[l], &end);
        if (end == sw->llist[l] || *end || errno || !(x > 0)) {
            fprintf_text(stderr, "%s: --lrs: '%s' is not a positive number\n", PROG, sw->llist[l]);
            return EXIT_USAGE;
        }
    }
    return 0;
}

/* What the options say together: --lr with --lrs, -o, the lists. 0, EXIT_USAGE or EXIT_IO
 * after a message. */
static int check_sweep(sweep *sw)
{
    int rc;
    if (sw->lrs && sw->lr_given) {
        fprintf_text(stderr, "%s: --lr and --lrs together: give the learning rates in --lrs\n", PROG);
        return EXIT_USAGE;
    }
    if (!sw->dir) {
        fprintf_text(stderr, "%s: no output directory (-o DIR)\n", PROG);
        return EXIT_USAGE;
    }
    if (sw->emit && sw->launcher != LAUNCH_SLURM) {
        fprintf_text(stderr, "%s: --emit writes a Slurm job script: give --launcher slurm too\n", PROG);
        return EXIT_USAGE;
    }
    if ((rc = split_lists(sw)))
        return rc;
    return check_values(sw);
}

/* Job j: precision plist[p] (and learning rate llist[l] with --lrs), its name, trace and log.
 * 0 or EXIT_IO after a message. */
static int name_job(sweep *sw, job *j, int p, int l)
{
    snprintf(j->prec, sizeof j->prec, "%s", sw->plist[p]);
    if (sw->nl)
        snprintf(j->lr, sizeof j->lr, "%s", sw->llist[l]);
    char lrname[40];
    snprintf(lrname, sizeof lrname, "%s", j->lr);
    sanitize(lrname);
    snprintf(j->name, sizeof j->name, "run-%s%s%s", j->prec, sw->nl ? "-lr" : "", sw->nl ? lrname : "");
    j->trace = join(sw->dir, j->name, ".h5");
    j->log = join(sw->dir, j->name, ".log");
    if (!j->trace || !j->log) {
        fprintf_text(stderr, "%s: out of memory\n", PROG);
        return EXIT_IO;
    }
    return 0;
}

/* The jobs, one per (precision, learning rate), the FP32 runs first: the first FP32 trace is
 * the baseline. 0 or EXIT_IO after a message. */
static int make_jobs(sweep *sw)
{
    int rc;
    sw->nj = sw->np * (sw->nl ? sw->nl : 1);
    sw->js = calloc((size_t)sw->nj, sizeof *sw->js);
    sw->paths = calloc((size_t)sw->nj, sizeof *sw->paths);
    sw->cargv = malloc((size_t)sw->nj * (size_t)(sw->npass + 16) * sizeof *sw->cargv);
    sw->lj = calloc((size_t)sw->nj, sizeof *sw->lj);
    if (!sw->js || !sw->paths || !sw->cargv || !sw->lj) {
        fprintf_text(stderr, "%s: out of memory\n", PROG);
        return EXIT_IO;
    }
    int k = 0;
    for (int pass_fp32 = 1; pass_fp32 >= 0; pass_fp32--)
        for (int p = 0; p < sw->np; p++) {
            if ((strcmp(sw->plist[p], "fp32") == 0) != pass_fp32)
                continue;
            for (int l = 0; l < (sw->nl ? sw->nl : 1); l++)
                if ((rc = name_job(sw, &sw->js[k++], p, l)))
                    return rc;
        }
    return 0;
}

/* The output directory (not for a dry run). 0 or EXIT_IO after a message. */
static int prepare_runs(sweep *sw)
{
    char msg[600];
    int mrc = sw->dry ? 0 : path_make_dir(sw->dir, msg, sizeof msg);
    if (mrc) {
        fprintf_text(stderr, "%s: -o: %s\n", PROG, msg);
        return mrc == 2 ? EXIT_USAGE : EXIT_IO;
    }
    return 0;
}

static int run_argv(sweep *sw, job *j, char **cargv);

/* The sweep's own files in DIR (when it exists): each run's log, the reports, the charts'
 * directory; replaced only where they are regular files. 0, or the exit status after a
 * message. */
static int check_own_files(sweep *sw)
{
    int rc = 0;
    for (int q = 0; !rc && q < sw->nj; q++)
        rc = cli_check_output(PROG, NULL, sw->js[q].log, 1);
    const char *names[] = {"report.md", "report.json"};
    for (size_t k = 0; !rc && k < 2; k++) {
        char *p = join(sw->dir, names[k], "");
        rc = p ? cli_check_output(PROG, NULL, p, 1) : EXIT_IO;
        free(p);
    }
    struct stat st;
    char *charts = sw->plots ? join(sw->dir, "charts", "") : NULL;
    if (!rc && charts && lstat(charts, &st) == 0 && !S_ISDIR(st.st_mode)) {
        fprintf_text(stderr, "%s: '%s' exists and is not a directory (--plots draws into it)\n", PROG, charts);
        rc = EXIT_USAGE;
    }
    free(charts);
    return rc;
}

/* Every run checked before any starts, as `ampdiag run ... --dry-run` checks it (its options,
 * model, data and weights files, its trace), and the sweep's own files. Where DIR does not
 * exist yet (a dry run), the runs' traces are checked in a temporary directory instead. 0, or
 * the exit status of the first refusal (the run's message names the option). */
static int check_runs(sweep *sw)
{
    struct stat st;
    int have_dir = stat(sw->dir, &st) == 0 && S_ISDIR(st.st_mode);
    const char *tmp = getenv("TMPDIR");
    char tdir[4096];
    snprintf(tdir, sizeof tdir, "%s/ampdiag-sweep-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!have_dir && !mkdtemp(tdir)) {
        fprintf_text(stderr, "%s: cannot make a temporary directory '%s': %s\n", PROG, tdir, strerror(errno));
        return EXIT_IO;
    }
    int rc = have_dir ? check_own_files(sw) : 0;
    for (int q = 0; !rc && q < sw->nj; q++) {
        job *j = &sw->js[q];
        char *trace = j->trace, *alt = have_dir ? NULL : join(tdir, j->name, ".h5");
        if (!have_dir && !alt)
            rc = EXIT_IO;
        j->trace = alt ? alt : trace;
        char **argv = sw->cargv + (size_t)q * (size_t)(sw->npass + 16);
        int c = rc ? 0 : run_argv(sw, j, argv);
        if (!rc) {
            argv[c++] = (char *)"--dry-run";
            argv[c] = NULL;
            rc = cli_run_self(argv, "/dev/null", PROG);
        }
        j->trace = trace;
        free(alt);
        if (rc)
            fprintf_text(stderr, "%s: the %s run would be refused (exit %d): no run started\n", PROG,
                         j->name, rc);
    }
    if (!have_dir)
        rmdir(tdir);
    return rc;
}

/* Job j's command line into cargv: ampdiag run, the options passed on, then what the sweep
 * sets. Returns its length. */
static int run_argv(sweep *sw, job *j, char **cargv)
{
    int c = 0;
    cargv[c++] = (char *)"ampdiag";
    cargv[c++] = (char *)"run";
    for (int q = 0; q < sw->npass; q++)
        cargv[c++] = sw->pass[q];
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
    return c;
}

/* The round for the launcher: each job's command line, trace, log and name. */
static void launch_jobs(sweep *sw)
{
    for (int q = 0; q < sw->nj; q++) {
        job *j = &sw->js[q];
        char **argv = sw->cargv + (size_t)q * (size_t)(sw->npass + 16);
        run_argv(sw, j, argv);
        sw->lj[q] = (launch_job){.argv = argv, .name = j->name, .trace = j->trace, .log = j->log, .status = -1};
    }
}

/* Compare the traces: the report on stdout, DIR/report.md and DIR/report.json, the charts in
 * DIR/charts with --plots. Returns compare_files's exit status, or EXIT_IO after a message. */
static int compare_runs(sweep *sw)
{
    for (int q = 0; q < sw->nj; q++)
        sw->paths[q] = sw->js[q].trace;
    char *md = join(sw->dir, "report", ".md"), *json = join(sw->dir, "report", ".json");
    char *charts = sw->plots ? join(sw->dir, "charts", "") : NULL;
    if (!md || !json || (sw->plots && !charts)) {
        free(md);
        free(json);
        free(charts);
        fprintf_text(stderr, "%s: out of memory\n", PROG);
        return EXIT_IO;
    }
    sw->co.md_path = md;
    sw->co.json_path = json;
    sw->co.plots_dir = charts;
    sw->co.md_plots_dir = sw->plots ? "charts" : NULL;
    int rc = compare_files(sw->paths, (size_t)sw->nj, &sw->co);
    free(charts);
    if (rc == 0 || rc == EXIT_FAIL_ON)
        fprintf_text(stderr, "%s: reports in %s and %s\n", PROG, md, json);
    free(md);
    free(json);
    return rc;
}

/* Run the jobs through the launcher (src/cli/launch.c), then compare them: not after a signal
 * (EXIT_SIGNAL + it), a failed run (the worst failure's exit status), a dry run or --emit.
 * Returns the exit status. */
static int run_and_compare(sweep *sw)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    launch_jobs(sw);
    launch_opts lo = {.kind = sw->launcher, .jobs = sw->launcher == LAUNCH_SLURM && !sw->jobs_given ? 0 : sw->jobs,
                      .dir = sw->dir, .emit_dir = sw->emit, .prog = PROG, .dry = sw->dry};
    int rc = launch_round(sw->lj, sw->nj, &lo);
    if (rc > EXIT_SIGNAL) {
        fprintf_text(stderr, "%s: interrupted by signal %d: no comparison\n", PROG, rc - EXIT_SIGNAL);
        return rc;
    }
    if (rc || sw->dry || sw->emit)
        return rc;
    for (int q = 0; q < sw->nj; q++)
        if (sw->lj[q].status != 0) {
            sw->failed++;
            int code = sw->lj[q].status == EXIT_USAGE ? EXIT_USAGE : EXIT_IO;
            if (code > sw->worst)
                sw->worst = code;
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf_text(stderr, "%s: %d runs in %.1f s\n", PROG, sw->nj,
                 (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    if (sw->failed) {
        fprintf_text(stderr, "%s: %d of %d runs failed: no comparison\n", PROG, sw->failed, sw->nj);
        return sw->worst ? sw->worst : EXIT_IO;
    }
    return compare_runs(sw);
}

int cmd_sweep(int argc, char **argv)
{
    sweep sw;
    int rc, help;
    if ((rc = sweep_init(&sw, argc)))
        return rc;
    if (!(rc = parse_sweep_args(&sw, argc, argv, &help)) && !help &&
        !(rc = check_sweep(&sw)) && !(rc = make_jobs(&sw)) && !(rc = prepare_runs(&sw)) &&
        !(rc = check_runs(&sw)))
        rc = run_and_compare(&sw);
    sweep_free(&sw);
    return rc;
}
