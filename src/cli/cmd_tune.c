/*
 * cmd_tune.c - `ampdiag tune`: the advice settled by measurement. A recommendation is only as good
 * as the run that follows it, so tune runs what compare would judge and measures what it would
 * guess:
 *
 *   1. the precisions as given (round-1), and compare's advice on them;
 *   2. the options the advice names for every run (--standardize on, --optim-state fp32), tested:
 *      FP32 with them, kept where it measures better;
 *   3. the learning rate, measured: where the FP32 baseline diverges or does not learn, the LR
 *      range test (a run of ampdiag lrfind's, from the same initial weights) says where to start;
 *      FP32 runs around the start (x sqrt(10) each way), then beside the best one the way it
 *      improves, until the best has been measured on both sides and neither side ends within its
 *      noise band (at most --rounds rounds); while nothing learns, toward the run whose eval loss
 *      is the lowest; an every-run option rejected at an lr that does not learn is tried again at
 *      the lr measured best. The
 *      best FP32 run that learns is the yardstick; when none learns, tune says so and exits 1;
 *   4. the advice's hypotheses at the yardstick (a clip value, a longer warm-up): tested the same
 *      way, kept where they measure better;
 *   5. the 16-bit precisions at the yardstick's lr and options, compare's advice on them, and the
 *      recommended precision with the options for its run (--fp32-layers, --loss-scale ...);
 *   6. the verification: the recommended configuration, else another 16-bit run, else the
 *      yardstick itself: the first that learns (measured against its start), is healthy and whose
 *      eval loss is within the paired noise band of the yardstick's, verified.
 *
 * No configuration is run twice. Every round is a sweep (ampdiag sweep: local runs or one Slurm
 * job array, src/cli/launch.c) into DIR/NAME. The report (stdout, DIR/tune.md, DIR/tune.json)
 * lists every run and why it was made, what was kept, and what was verified; its words are the
 * message table's (src/messages/: msg_tune).
 */
#include "analysis/compare.h"
#include "analysis/findings.h"
#include "analysis/load.h"
#include "analysis/lrfind.h"
#include "analysis/recommend.h"
#include "messages/messages.h"
#include "cli/cli.h"
#include "cli/launch.h"
#include "cli/tune_script.h"
#include "util/escape.h"
#include "util/json.h"
#include "util/path.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PROG "ampdiag tune"
#define TUNE_JSON_VERSION 2
#define TUNE_MAX_RUNS 96         /* runs tune makes at most */
#define TUNE_MAX_ROUNDS 48       /* sweeps */
#define TUNE_MAX_SEARCH 10       /* --rounds at most */
#define TUNE_MAX_REMEDIES 8
#define TUNE_MAX_NOTES 24
#define LR_STEP 3.1622776601683795 /* sqrt(10): the lr search's step */
#define LR_HALF 1.7782794100389228 /* 10^(1/4): half a step, the finest gap toward the lowest loss */
#define LR_FINE 1.3335214321633240 /* 10^(1/8): the finest gap toward a cliff */
#define LRFIND_MIN 1e-7            /* the range test's span and steps (ampdiag lrfind's defaults) */
#define LRFIND_MAX 10.0
#define LRFIND_STEPS 100

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag tune -o DIR [--precisions P,...] [--lr X] [--rounds N] [-j N]\n"
            "                    [--target T] [--launcher local|slurm] [run options]\n"
            "\n"
            "The advice settled by measurement. tune runs the precisions as given (DIR/round-1)\n"
            "and compares them; tests the options the advice names for every run (FP32 with\n"
            "them, kept where it measures better); measures the learning rate: where FP32\n"
            "diverges or does not learn, the LR range test from the same initial weights says\n"
            "where to start, then FP32 runs around it (x sqrt(10) each way) and beside the best\n"
            "until it is measured on both sides; the best FP32 run that learns is the yardstick\n"
            "(none: tune says so and exits 1). It tests the advice's hypotheses (a clip value, a\n"
            "longer warm-up) the same way, runs the 16-bit precisions at the yardstick's lr and\n"
            "the recommended one with the options for its run, and verifies the first of them\n"
            "(else the yardstick itself) that learns (its final eval loss below its initial one\n"
            "beyond the paired noise), is healthy (complete, no NaN/inf, skips within the limit)\n"
            "and is within the paired noise band of the yardstick. No configuration is run twice.\n"
            "The report goes to stdout, DIR/tune.md and DIR/tune.json (every run and why it was\n"
            "made); each round's runs stay in DIR/NAME/.\n"
            "\n"
            "options:\n"
            "  -o, --out DIR       output directory (created if missing)\n"
            "  --precisions LIST   as ampdiag sweep (default fp32,fp16,bf16; fp32 is the baseline and\n"
            "                      always run)\n"
            "  --lr X              the learning rate to start from (default: the runs' own, from\n"
            "                      --scenario or ampdiag run's default 1e-3)\n"
            "  --rounds N          at most N rounds of the lr search beyond its first (default 4, at\n"
            "                      most 10)\n"
            "  -j, --jobs N        runs at once in a round (default 1; slurm: no limit)\n"
            "  --launcher L        local (default) or slurm: each round's runs as one Slurm job\n"
            "                      array, DIR on a file system the nodes share (ampdiag sweep\n"
            "                      --help, docs/cluster.md)\n"
            "  --target T          hardware the advice is for (as ampdiag compare; default any)\n"
            "  --fp32-search       then find the smallest set of layers that must stay in FP32 for\n"
            "                      the first 16-bit precision to pass (bisected; at most 16 runs)\n"
            "  -h, --help\n"
            "Every option of `ampdiag run` goes to each run (--model, --data, -s/--steps,\n"
            "--optimizer, --scenario, ...), except --precision, --out and --lr, which tune sets.\n"
            "\n"
            "exit status: 0 a configuration was verified, 1 none was (nothing learns; the report\n"
            "says why), 2 bad usage or a run refused its options, 3 I/O failure, 130 (143)\n"
            "stopped by SIGINT (SIGTERM)\n");
    tune_script_usage(f);
}

enum { T_OUT = 1, T_PRECISIONS, T_LR, T_ROUNDS, T_JOBS, T_TARGET, T_HELP, T_REFUSE, T_PASS, T_LAUNCHER,
       T_FP32_SEARCH };

static const cli_opt own_options[] = {
    {"--out", 'o', CLI_ARG, T_OUT}, {"--precisions", 0, CLI_ARG, T_PRECISIONS},
    {"--lr", 0, CLI_ARG, T_LR}, {"--rounds", 0, CLI_ARG, T_ROUNDS}, {"--jobs", 'j', CLI_ARG, T_JOBS},
    {"--target", 0, CLI_ARG, T_TARGET}, {"--help", 'h', CLI_NOARG, T_HELP}, {"--launcher", 0, CLI_ARG, T_LAUNCHER},
    {"--fp32-search", 0, CLI_NOARG, T_FP32_SEARCH}, CLI_OPT_END};

/* run's options: --precision refused, the rest passed on to the sweeps. */
static int tune_id_of(const char *name)
{
    return strcmp(name, "--precision") == 0 || strcmp(name, "--dry-run") == 0 ? T_REFUSE : T_PASS;
}

/* ------------------------------------------------------------------------------------------
 * Options tune adds to runs: the advice's remedies and hypotheses
 * ------------------------------------------------------------------------------------------ */

typedef struct tune_opt {
    rec_scope scope;
    char option[32];
    char value[256];
    char why[512];      /* the advice's words for it */
} tune_opt;

typedef struct opt_set {
    tune_opt m[TUNE_MAX_REMEDIES];
    size_t n;
} opt_set;

static int set_has(const opt_set *s, const char *option)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->m[i].option, option) == 0)
            return 1;
    return 0;
}

/* Add (or replace) an option of the set. */
static void set_put(opt_set *s, rec_scope scope, const char *option, const char *value, const char *why)
{
    tune_opt *t = NULL;
    for (size_t i = 0; i < s->n && !t; i++)
        if (strcmp(s->m[i].option, option) == 0)
            t = &s->m[i];
    if (!t) {
        if (s->n >= TUNE_MAX_REMEDIES)
            return;
        t = &s->m[s->n++];
    }
    t->scope = scope;
    snprintf(t->option, sizeof t->option, "%s", option);
    snprintf(t->value, sizeof t->value, "%s", value);
    snprintf(t->why, sizeof t->why, "%s", why ? why : "");
}

/* "--standardize on --clip 0.5" (the sets in order; "" when empty). */
static void set_text(char *buf, size_t n, const opt_set *a, const opt_set *b)
{
    buf[0] = 0;
    const opt_set *sets[2] = {a, b};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; sets[k] && i < sets[k]->n; i++) {
            size_t len = strlen(buf);
            snprintf(buf + len, n - len, "%s%s %s", len ? " " : "", sets[k]->m[i].option, sets[k]->m[i].value);
        }
}

/* ------------------------------------------------------------------------------------------
 * The state: every run tune made and every round it ran
 * ------------------------------------------------------------------------------------------ */

/* What every round shares: the output directory, -j, the target, the run options passed on. */
typedef struct tune_cfg {
    const char *out, *jobs;  /* jobs: NULL = the sweep's default */
    char precisions[128];    /* fp32 first */
    const char *launcher;    /* --launcher, passed to the sweeps (NULL: local) */
    rec_target target;
    char **pass;
    int npass;
    int search_rounds;
    tune_script *script;     /* `-- CMD ARGS`: the rounds run the user's command (tune_script.c) */
    int fp32_search;         /* --fp32-search */
} tune_cfg;

enum { K_RUN = 0, K_LRFIND = 1 };

/* One run tune made, and what one load of its trace measured. */
typedef struct trun {
    char path[4400];
    char precision[16];
    double lr;                 /* as the trace recorded it */
    char options[1024];        /* what tune added (the every-run options, then the run's own) */
    int kind;                  /* K_RUN, or K_LRFIND (the range test: no candidate) */
    int round;                 /* the round that made it */
    msg_tune_id why_id;
    char why[800];
    char command_line[1024];
    char status[32];
    double eval, eval0, metric; /* final and initial eval loss, final accuracy */
    int learns;                /* an_run_learns: 1, 0, -1 */
    char unhealthy[700];       /* why it is not healthy ("" when it is) */
    char learning[900];        /* the words of its learning finding */
    char degenerate[900];      /* the words of F_VAL_DEGENERATE ("" when its validation set judges) */
    int64_t steps_planned;
    char optim_state[16];      /* the optimizer state's format */
    char failed[1200];         /* `-- CMD`: why its command failed (exit status, trace, log), "" when
                                  it did not: a failed run is measured as nothing (learns -1, not
                                  healthy) and never passes */
} trun;

/* The advice of compare on a set of runs, as text and as the numbers tune follows. */
typedef struct advice {
    int have;
    rec_precision precision;
    int keep_pure;             /* bf16: the bf16-pure run given, kept as run */
    char verdict[2400];
    rec_lr_verdict lr;
    double lr_suggested;
    char lr_text[900];
    opt_set every, own;        /* the options it names for every run / for the recommended run */
    double clip;               /* a clip value it offers (a hypothesis), NaN */
    int warmup;                /* it names a longer warm-up (a hypothesis) */
    size_t nruns;
} advice;

typedef struct tround {
    char name[64];
    char dir[4300];
    msg_tune_id why_id;
    char why[800];
    double lr;                 /* the round's (first) lr */
    char options[1024];
    size_t first_run, nruns;   /* its runs in the state's list */
    advice adv;                /* compare's advice where tune asked for it */
} tround;

typedef struct note {
    msg_tune_id id;
    char text[900];
} note;

typedef struct tune_state {
    const tune_cfg *cfg;
    trun runs[TUNE_MAX_RUNS];
    size_t nruns;
    tround rounds[TUNE_MAX_ROUNDS];
    size_t nrounds;
    opt_set every;             /* the every-run options kept so far */
    opt_set rejected;          /* the last every-run options rejected at the lr given ... */
    int have_rejected;         /* ... (tried again at the lr measured) */
    note notes[TUNE_MAX_NOTES];
    size_t nnotes;
    long first_base;           /* round 1's FP32 run */
    long yard;                 /* the yardstick (-1: none) */
    long chosen;               /* the verified run (-1: none) */
    int verified;
    msg_tune_id verification_id;
    char verification[2400];
    double band;               /* the band the chosen run was judged against */
    char failures[4][900];     /* why candidates failed, in order */
    size_t nfail;
    struct {                   /* --fp32-search (stage_fp32_search) */
        int done, found, runs, nlayers;
        char precision[16], layers[256], text[900];
        long run;
    } search;
} tune_state;

static void add_note(tune_state *S, msg_tune_id id, const char *text)
{
    if (S->nnotes < TUNE_MAX_NOTES) {
        S->notes[S->nnotes].id = id;
        snprintf(S->notes[S->nnotes].text, sizeof S->notes[S->nnotes].text, "%s", text);
        S->nnotes++;
    }
    fprintf_text(stderr, "%s: %s\n", PROG, text);
}

/* Two learning rates are the same (as written with %.6g on a command line and read back). */
static int same_lr(double a, double b) { return fabs(a - b) <= 1e-5 * fmax(fabs(a), fabs(b)); }

/* The run of precision prec, lr and options, or -1. */
static long find_run(const tune_state *S, const char *prec, double lr, const char *options, int kind)
{
    for (size_t i = 0; i < S->nruns; i++) {
        const trun *t = &S->runs[i];
        if (t->kind == kind && strcmp(t->precision, prec) == 0 && same_lr(t->lr, lr) &&
            strcmp(t->options, options) == 0)
            return (long)i;
    }
    return -1;
}

/* ------------------------------------------------------------------------------------------
 * Running a round: ampdiag sweep into DIR/NAME
 * ------------------------------------------------------------------------------------------ */

/* Run `ampdiag sweep` of precisions at lr (NaN: the runs' own) into dir, with the options tune
 * adds and extra ones after those passed on (so they override them); its report goes to
 * DIR/sweep-TAG.txt. Returns the sweep's exit status (0, 1: a --fail-on condition, which tune
 * does not ask for), or EXIT_IO. */
static int run_sweep(const tune_cfg *t, const char *dir, const char *tag, const char *precisions, double lr,
                     const opt_set *a, const opt_set *b, const char *const *extra, size_t nextra)
{
    char lrs[64], out[4500];
    snprintf(lrs, sizeof lrs, "%.6g", lr);
    snprintf(out, sizeof out, "%s/sweep-%s.txt", dir, tag);
    size_t nrem = 2 * (a->n + (b ? b->n : 0));
    char **argv = calloc((size_t)t->npass + nrem + nextra + 16, sizeof *argv);
    if (!argv)
        return EXIT_IO;
    int k = 1;
    argv[k++] = "sweep";
    argv[k++] = "--precisions";
    argv[k++] = (char *)precisions;
    if (isfinite(lr)) { /* else the runs' own lr (given, a scenario's, or the default) */
        argv[k++] = "--lrs";
        argv[k++] = lrs;
    }
    argv[k++] = "-o";
    argv[k++] = (char *)dir;
    if (t->jobs) {
        argv[k++] = "-j";
        argv[k++] = (char *)t->jobs;
    }
    if (t->launcher) {
        argv[k++] = "--launcher";
        argv[k++] = (char *)t->launcher;
    }
    for (int i = 0; i < t->npass; i++)
        argv[k++] = t->pass[i];
    const opt_set *sets[2] = {a, b};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; sets[s] && i < sets[s]->n; i++) {
            argv[k++] = (char *)sets[s]->m[i].option;
            argv[k++] = (char *)sets[s]->m[i].value;
        }
    for (size_t i = 0; i < nextra; i++)
        argv[k++] = (char *)extra[i];
    argv[k] = NULL;
    int rc = t->script ? tune_script_round(t->script, argv, out, PROG) : cli_run_self(argv, out, PROG);
    free(argv);
    return rc;
}

static int is_trace(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return n > 7 && strncmp(e->d_name, "run-", 4) == 0 && strcmp(e->d_name + n - 3, ".h5") == 0;
}

/* A trace loaded for tune's measures (no per-step points; the activation rms series only where a
 * comparison reads them). 0, or EXIT_IO said with *r left empty (an_free on it does nothing). */
static int load_run(const char *path, an_run *r, int rms)
{
    an_options ao = {.warmup = -1, .quiet = 1, .keep_points = 0, .no_rms_series = !rms};
    char err[1024];
    if (an_load(path, &ao, r, err, sizeof err) == 0)
        return 0;
    fprintf_text(stderr, "%s: %s\n", PROG, err);
    an_free(r);
    memset(r, 0, sizeof *r);
    return EXIT_IO;
}

/* What one load of run t's trace measures: status, evaluations, learning, health. 0 or EXIT_IO. */
static int measure(trun *t)
{
    an_run r;
    if (load_run(t->path, &r, 0))
        return EXIT_IO;
    snprintf(t->precision, sizeof t->precision, "%s", r.precision);
    t->lr = r.lr;
    snprintf(t->command_line, sizeof t->command_line, "%s", r.command_line);
    snprintf(t->status, sizeof t->status, "%s", r.status_text);
    t->steps_planned = r.steps_planned;
    snprintf(t->optim_state, sizeof t->optim_state, "%s", r.optim_state);
    const ampdiag_trace_eval *e = an_final_eval(&r), *e0 = an_initial_eval(&r);
    t->eval = e ? (isfinite(e->loss) ? e->loss : INFINITY) : NAN;
    t->metric = e ? e->metric : NAN;
    t->eval0 = e0 ? e0->loss : NAN;
    t->learns = an_run_learns(&r);
    msg_ctx m = msg_ctx_run(&r);
    const an_finding *bad = an_run_unhealthy(&r);
    t->unhealthy[0] = 0;
    if (bad)
        msg_finding(t->unhealthy, sizeof t->unhealthy, &m, bad);
    const an_finding *lf = an_run_finding(&r, F_LEARNS);
    if (!lf)
        lf = an_run_finding(&r, F_DOES_NOT_LEARN);
    if (!lf)
        lf = an_run_finding(&r, F_LEARNS_NOTHING);
    t->learning[0] = 0;
    if (lf)
        msg_finding(t->learning, sizeof t->learning, &m, lf);
    const an_finding *dg = an_run_finding(&r, F_VAL_DEGENERATE);
    t->degenerate[0] = 0;
    if (dg)
        msg_finding(t->degenerate, sizeof t->degenerate, &m, dg);
    an_free(&r);
    return 0;
}

/* The next run slot of round's, cleared and named (path, options, why); not yet counted. NULL
 * (said) when tune has made as many runs as it may. */
static trun *new_run(tune_state *S, size_t round, int kind, const char *path, const char *options, const char *why)
{
    if (S->nruns >= TUNE_MAX_RUNS) {
        fprintf_text(stderr, "%s: more than %d runs: stopping\n", PROG, TUNE_MAX_RUNS);
        return NULL;
    }
    trun *t = &S->runs[S->nruns];
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    snprintf(t->options, sizeof t->options, "%s", options);
    t->kind = kind;
    t->round = (int)round;
    t->why_id = S->rounds[round].why_id;
    snprintf(t->why, sizeof t->why, "%s", why);
    return t;
}

/* `-- CMD`: the runs of the last round (tune_script.c), registered as the round's: a run whose
 * command failed as a failed run (its failure in ->failed and ->unhealthy), the others measured.
 * 0 or an exit status. */
static int register_script_runs(tune_state *S, size_t round, int kind, const char *options)
{
    tround *rd = &S->rounds[round];
    const tune_script *ts = S->cfg->script;
    char why[800];
    snprintf(why, sizeof why, "%s", rd->why);
    int rc = 0;
    for (size_t i = 0; i < tune_script_last(ts) && !rc; i++) {
        const char *prec, *failure;
        double lr;
        const char *p = tune_script_last_run(ts, i, &prec, &lr, &failure);
        int known = 0;
        for (size_t k = 0; k < S->nruns && !known; k++)
            known = strcmp(S->runs[k].path, p) == 0;
        if (known)
            continue;
        trun *t = new_run(S, round, kind, p, options, why);
        if (!t)
            return EXIT_IO;
        if (failure) {
            snprintf(t->precision, sizeof t->precision, "%s", prec);
            t->lr = isfinite(lr) ? lr : rd->lr; /* (round 1 at the script's own: set from the baseline's) */
            snprintf(t->failed, sizeof t->failed, "%s", failure);
            snprintf(t->unhealthy, sizeof t->unhealthy, "the command failed: %.600s", failure);
            snprintf(t->status, sizeof t->status, "failed");
            t->eval = t->eval0 = t->metric = NAN;
            t->learns = -1;
        } else if ((rc = measure(t))) {
            break;
        }
        S->nruns++;
        rd->nruns++;
    }
    return rc;
}

/* The traces of dir not yet in the state, registered as the round's runs. 0 or an exit status. */
static int register_runs(tune_state *S, size_t round, int kind, const char *opts)
{
    if (S->cfg->script)
        return register_script_runs(S, round, kind, opts);
    tround *rd = &S->rounds[round];
    char options[1024], why[800];
    snprintf(options, sizeof options, "%s", opts);
    snprintf(why, sizeof why, "%s", rd->why);
    struct dirent **ents = NULL;
    int ne = scandir(rd->dir, &ents, is_trace, alphasort);
    if (ne < 0) {
        fprintf_text(stderr, "%s: cannot read '%s': %s\n", PROG, rd->dir, strerror(errno));
        return EXIT_IO;
    }
    int rc = 0;
    for (int i = 0; i < ne; i++) {
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", rd->dir, ents[i]->d_name);
        int known = 0;
        for (size_t k = 0; k < S->nruns && !known; k++)
            known = strcmp(S->runs[k].path, p) == 0;
        if (!rc && !known) {
            trun *t = new_run(S, round, kind, p, options, why);
            if (!t)
                rc = EXIT_IO;
            else if (!(rc = measure(t))) {
                S->nruns++;
                rd->nruns++;
            }
        }
        free(ents[i]);
    }
    free(ents);
    return rc;
}

/* A round: the precisions (comma-separated) at lr with the options (a: every run; b: the run's own;
 * extra: after them, not recorded as tune's options), into DIR/name, leaving out every precision
 * already run with that lr and those options; why says why. *round := its index (-1 when nothing
 * was new). 0 or an exit status. */
static int do_round(tune_state *S, const char *name, const char *precisions, double lr, const opt_set *a,
                    const opt_set *b, const char *const *extra, size_t nextra, int kind, msg_tune_id why_id,
                    const char *why, long *round)
{
    const tune_cfg *t = S->cfg;
    *round = -1;
    char options[1024], to_run[128] = "", copy[128];
    set_text(options, sizeof options, a, b);
    snprintf(copy, sizeof copy, "%s", precisions);
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save))
        if (!isfinite(lr) || find_run(S, p, lr, options, kind) < 0) {
            size_t len = strlen(to_run);
            snprintf(to_run + len, sizeof to_run - len, "%s%s", len ? "," : "", p);
        }
    if (!to_run[0])
        return 0;
    if (S->nrounds >= TUNE_MAX_ROUNDS) {
        fprintf_text(stderr, "%s: more than %d rounds: stopping\n", PROG, TUNE_MAX_ROUNDS);
        return EXIT_IO;
    }
    tround *rd = &S->rounds[S->nrounds];
    memset(rd, 0, sizeof *rd);
    /* a name used before (the lr measured again after a remedy was kept) gets a suffix: a run of
     * the new round must never overwrite one of the old (same precision and lr, other options) */
    char uname[sizeof rd->name];
    snprintf(uname, sizeof uname, "%s", name);
    for (int k = 2, taken = 1; taken; k++) {
        taken = 0;
        for (size_t i = 0; i < S->nrounds && !taken; i++)
            taken = strcmp(S->rounds[i].name, uname) == 0;
        if (taken)
            snprintf(uname, sizeof uname, "%.50s.%d", name, k);
    }
    memcpy(rd->name, uname, sizeof uname);
    snprintf(rd->dir, sizeof rd->dir, "%s/%s", t->out, uname);
    snprintf(rd->why, sizeof rd->why, "%s", why);
    snprintf(rd->options, sizeof rd->options, "%s", options);
    rd->why_id = why_id;
    rd->lr = lr;
    rd->first_run = S->nruns;
    fprintf_text(stderr, "%s: %s: %s at lr %g%s%s -> %s\n", PROG, rd->name, to_run, lr, options[0] ? " with " : "",
                 options, rd->dir);
    if (mkdir(rd->dir, 0777) != 0 && errno != EEXIST) {
        fprintf_text(stderr, "%s: cannot create '%s': %s\n", PROG, rd->dir, strerror(errno));
        return EXIT_IO;
    }
    int st = run_sweep(t, rd->dir, "runs", to_run, lr, a, b, extra, nextra);
    if (st == EXIT_USAGE && t->script) /* the FP32 baseline failed: said (tune_script_round) */
        return st;
    if (st != 0 && st != EXIT_FAIL_ON) {
        fprintf_text(stderr, "%s: the sweep of %s failed (exit %d; see %s/sweep-runs.txt and the run logs "
                     "there)\n", PROG, rd->name, st, rd->dir);
        return st;
    }
    *round = (long)S->nrounds++;
    return register_runs(S, (size_t)*round, kind, options);
}

/* ------------------------------------------------------------------------------------------
 * compare's advice on a set of tune's runs (the first the baseline)
 * ------------------------------------------------------------------------------------------ */

static int advise(const tune_state *S, const long *idx, size_t n, advice *A)
{
    memset(A, 0, sizeof *A);
    A->clip = NAN;
    A->lr_suggested = NAN;
    an_run *runs = calloc(n ? n : 1, sizeof *runs);
    if (!runs)
        return EXIT_IO;
    int rc = 0;
    size_t loaded = 0;
    for (size_t i = 0; i < n && !rc; i++, loaded++)
        rc = load_run(S->runs[idx[i]].path, &runs[i], 1);
    an_comparison c;
    recommendation R;
    int have_c = 0, have_r = 0;
    if (!rc && !(have_c = an_compare(runs, n, 0, &c) == 0))
        rc = EXIT_IO;
    if (have_c) /* the yardstick's lr is the best tune measured: still falling is no reason to decline */
        c.lr_measured = S->yard >= 0 && n > 0 && idx[0] == S->yard;
    if (!rc && !(have_r = recommend(runs, n, &c, S->cfg->target, 0, &R) == 0))
        rc = EXIT_IO;
    if (!rc) {
        msg_ctx m = {.runs = runs, .nruns = n, .baseline = 0, .R = &R};
        A->have = 1;
        A->nruns = n;
        A->precision = R.precision;
        A->keep_pure = R.keep_pure;
        msg_verdict(A->verdict, sizeof A->verdict, &m);
        A->lr = R.lr;
        A->lr_suggested = R.lr_suggested;
        msg_section(A->lr_text, sizeof A->lr_text, &m, SEC_LR_LINE, " ");
        const rec_decision *d[TUNE_MAX_REMEDIES];
        size_t nd = rec_remedies(&R, d, TUNE_MAX_REMEDIES);
        for (size_t i = 0; i < nd; i++) {
            char why[512];
            msg_decision_why(why, sizeof why, &m, d[i]);
            set_put(d[i]->scope == REM_EVERY_RUN ? &A->every : &A->own, d[i]->scope, d[i]->option,
                    d[i]->option_value, why);
        }
        for (size_t i = 0; i < R.decisions.n; i++) {
            const rec_decision *x = &R.decisions.v[i];
            if (x->what == WHAT_CLIP && isfinite(x->value) && x->value > 0)
                A->clip = x->value;
            if (x->what == WHAT_WARMUP)
                A->warmup = 1;
        }
    }
    if (have_r)
        rec_free(&R);
    if (have_c)
        an_comparison_free(&c);
    for (size_t i = 0; i < loaded; i++)
        an_free(&runs[i]);
    free(runs);
    return rc;
}

/* The pair (yardstick y, candidate k) compared: k's eval loss against y's paired noise band.
 * *outside := worse beyond the band; *band, *paired, *rel of the gap. 0 or EXIT_IO. */
static int gap_of(const tune_state *S, long y, long k, int *outside, double *band, int *paired, double *rel)
{
    an_run runs[2];
    memset(runs, 0, sizeof runs);
    int rc = 0;
    for (int i = 0; i < 2 && !rc; i++)
        rc = load_run(S->runs[i ? k : y].path, &runs[i], 1);
    an_comparison c;
    if (!rc && an_compare(runs, 2, 0, &c) != 0)
        rc = EXIT_IO;
    else if (!rc) {
        const an_finding *g = an_finding_find(&c.list, F_CMP_GAP, 1);
        *outside = g ? g->v[an_finding_fig(F_CMP_GAP, "outside")] != 0 : 1;
        *band = g ? g->v[an_finding_fig(F_CMP_GAP, "band")] : c.band;
        *paired = g ? g->v[an_finding_fig(F_CMP_GAP, "paired")] != 0 : 0;
        *rel = g ? g->v[an_finding_fig(F_CMP_GAP, "rel")] : NAN;
        an_comparison_free(&c);
    }
    an_free(&runs[0]);
    an_free(&runs[1]);
    return rc;
}

/* ------------------------------------------------------------------------------------------
 * The stages
 * ------------------------------------------------------------------------------------------ */

/* a run that completed with a finite final eval loss (it may still not learn) */
static int ends_finite(const trun *a)
{
    return strcmp(a->status, "complete") == 0 && isfinite(a->eval);
}

/* a measures better than b: it learns, and b does not or its final eval loss is higher; or neither
 * learns and a ends finite where b does not (a NaN or a divergence is the worse of two runs that do
 * not learn: an option that removes it is measured progress, whatever the lr does next). */
static int better(const trun *a, const trun *b)
{
    if (a->learns == 1)
        return b->learns != 1 || a->eval < b->eval;
    return b->learns != 1 && ends_finite(a) && !ends_finite(b);
}

/* The FP32 run of a round (-1: none). */
static long fp32_of_round(const tune_state *S, long round)
{
    const tround *rd = &S->rounds[round];
    for (size_t i = rd->first_run; i < rd->first_run + rd->nruns; i++)
        if (strcmp(S->runs[i].precision, "fp32") == 0)
            return (long)i;
    return -1;
}

/* 1. The precisions as given, and compare's advice on them. */
static int stage_given(tune_state *S, double lr, long *base)
{
    char why[800];
    const char *s[2] = {S->cfg->precisions, ""};
    msg_tune(why, sizeof why, MT_WHY_GIVEN, (const double[]){lr}, 1, s, 2);
    long rd;
    opt_set none = {.n = 0};
    int rc = do_round(S, "round-1", S->cfg->precisions, lr, &none, NULL, NULL, 0, K_RUN, MT_WHY_GIVEN, why, &rd);
    if (rc)
        return rc;
    if (rd < 0 || (*base = fp32_of_round(S, rd)) < 0) {
        fprintf_text(stderr, "%s: round 1 left no FP32 trace in '%s'\n", PROG, S->cfg->out);
        return EXIT_IO;
    }
    tround *r = &S->rounds[rd];
    if (!isfinite(lr)) { /* the runs' own lr: say which */
        r->lr = S->runs[*base].lr;
        msg_tune(why, sizeof why, MT_WHY_GIVEN, &r->lr, 1, s, 2);
        snprintf(r->why, sizeof r->why, "%s", why);
        for (size_t i = r->first_run; i < r->first_run + r->nruns; i++) {
            snprintf(S->runs[i].why, sizeof S->runs[i].why, "%s", why);
            if (S->runs[i].failed[0] && !isfinite(S->runs[i].lr))
                S->runs[i].lr = r->lr; /* told nothing: the script's own, the baseline's */
        }
    }
    long idx[16];
    size_t n = 0;
    idx[n++] = *base;
    for (size_t i = r->first_run; i < r->first_run + r->nruns && n < 16; i++)
        if ((long)i != *base && !S->runs[i].failed[0]) /* (a failed run has nothing to compare) */
            idx[n++] = (long)i;
    return advise(S, idx, n, &r->adv);
}

/* 2. The options an advice names for every run, tested: FP32 with them at base's lr, kept where it
 * measures better than base. *base := the FP32 run the search goes on from. */
static int stage_every(tune_state *S, const advice *A, long *base, int k)
{
    opt_set cand = S->every;
    size_t added = 0;
    for (size_t i = 0; i < A->every.n; i++)
        if (!set_has(&cand, A->every.m[i].option)) {
            set_put(&cand, REM_EVERY_RUN, A->every.m[i].option, A->every.m[i].value, A->every.m[i].why);
            added++;
        }
    /* an optimizer state held in 16 bits: its rounding may cost the training (a hypothesis,
     * measured like the rest) */
    const char *st = S->runs[*base].optim_state;
    if (st[0] && strcmp(st, "fp32") && !set_has(&cand, "--optim-state")) {
        set_put(&cand, REM_EVERY_RUN, "--optim-state", "fp32", "the optimizer state is held in 16 bits");
        added++;
    }
    if (!added)
        return 0;
    char name[32], why[800], opts[1024];
    set_text(opts, sizeof opts, &cand, NULL);
    const char *s[1] = {opts};
    double lr = S->runs[*base].lr;
    msg_tune(why, sizeof why, MT_WHY_REMEDY, &lr, 1, s, 1);
    snprintf(name, sizeof name, "remedy-%d", k);
    long rd;
    int rc = do_round(S, name, "fp32", lr, &cand, NULL, NULL, 0, K_RUN, MT_WHY_REMEDY, why, &rd);
    if (rc)
        return rc;
    long r = find_run(S, "fp32", lr, opts, K_RUN);
    if (r < 0)
        return 0;
    char txt[900];
    const double v[3] = {S->runs[r].eval, S->runs[*base].eval, S->runs[r].learns == 1};
    if (better(&S->runs[r], &S->runs[*base])) {
        S->every = cand;
        *base = r;
        msg_tune(txt, sizeof txt, MT_ADOPTED, v, 2, s, 1);
        add_note(S, MT_ADOPTED, txt);
        /* what the advice says of the run with them: more options for every run? */
        advice B;
        long one = r;
        if ((rc = advise(S, &one, 1, &B)))
            return rc;
        if (rd >= 0)
            S->rounds[rd].adv = B;
        if (k < 3)
            return stage_every(S, &B, base, k + 1);
    } else {
        msg_tune(txt, sizeof txt, MT_REJECTED, v, 3, s, 1);
        add_note(S, MT_REJECTED, txt);
        S->rejected = cand;
        S->have_rejected = 1;
    }
    return 0;
}

/* The LR range test (fp32, from the same initial weights): its suggestion into *start (NaN: none),
 * the words into a note. 0 or an exit status. */
static int stage_lrfind(tune_state *S, const char *reason, double *start)
{
    *start = NAN;
    char why[800], sched[64], steps[32];
    const char *s[1] = {reason};
    msg_tune(why, sizeof why, MT_WHY_LRFIND, (const double[]){LRFIND_MIN, LRFIND_MAX, LRFIND_STEPS}, 3, s, 1);
    snprintf(sched, sizeof sched, "range:%.17g", LRFIND_MIN);
    snprintf(steps, sizeof steps, "%d", LRFIND_STEPS);
    const char *extra[] = {"--schedule", sched, "--steps", steps, "--eval-every", "0", "--trace-every", "0",
                           "--hist-every", "0"};
    long rd;
    int rc = do_round(S, "lrfind", "fp32", LRFIND_MAX, &S->every, NULL, extra, sizeof extra / sizeof extra[0],
                      K_LRFIND, MT_WHY_LRFIND, why, &rd);
    if (rc || rd < 0)
        return rc;
    const trun *t = &S->runs[S->rounds[rd].first_run];
    if (t->failed[0]) { /* no suggestion: the search starts as without one */
        char txt[900];
        snprintf(txt, sizeof txt, "the LR range test failed (%.700s): no suggestion", t->failed);
        add_note(S, MT_LRFIND, txt);
        return 0;
    }
    an_run r;
    if (load_run(t->path, &r, 0))
        return EXIT_IO;
    double *lr = malloc((r.nsteps ? r.nsteps : 1) * sizeof *lr), *loss = malloc((r.nsteps ? r.nsteps : 1) * sizeof *loss);
    size_t n = 0;
    for (size_t i = 0; lr && loss && i < r.nsteps; i++)
        if (!r.steps[i].skipped && r.steps[i].lr > 0 && isfinite(r.steps[i].loss)) {
            lr[n] = r.steps[i].lr;
            loss[n++] = r.steps[i].loss;
        }
    lr_suggest sg;
    lr_suggest_from(lr ? lr : (double[]){0}, loss ? loss : (double[]){0}, lr && loss ? n : 0, &sg);
    free(lr);
    free(loss);
    an_free(&r);
    const char *source = isfinite(sg.valley) ? "valley" : isfinite(sg.steepest) ? "steepest" : "minimum / 10";
    *start = isfinite(sg.valley) ? sg.valley : isfinite(sg.steepest) ? sg.steepest : sg.minimum;
    char txt[900];
    const char *ss[1] = {isfinite(*start) ? source : "no suggestion: the loss never fell"};
    msg_tune(txt, sizeof txt, MT_LRFIND, (const double[]){sg.valley, sg.steepest, sg.minimum, *start}, 4, ss, 1);
    add_note(S, MT_LRFIND, txt);
    return 0;
}

/* The FP32 runs with the every-run options kept: the best that learns (-1: none), the lowest and
 * highest lr tried. */
static long best_fp32(const tune_state *S, double *lo, double *hi, size_t *count)
{
    char opts[1024];
    set_text(opts, sizeof opts, &S->every, NULL);
    long best = -1;
    *lo = INFINITY;
    *hi = -INFINITY;
    *count = 0;
    for (size_t i = 0; i < S->nruns; i++) {
        const trun *t = &S->runs[i];
        if (t->kind != K_RUN || strcmp(t->precision, "fp32") || strcmp(t->options, opts))
            continue;
        (*count)++;
        *lo = fmin(*lo, t->lr);
        *hi = fmax(*hi, t->lr);
        if (t->learns == 1 && t->unhealthy[0] == 0 && (best < 0 || t->eval < S->runs[best].eval))
            best = (long)i;
    }
    return best;
}

/* The FP32 runs (best's options) nearest to best's lr above and below it (-1: none). */
static void nearest_sides(const tune_state *S, long best, long *up, long *down)
{
    const trun *b = &S->runs[best];
    *up = *down = -1;
    for (size_t i = 0; i < S->nruns; i++) {
        const trun *t = &S->runs[i];
        if (t->kind != K_RUN || strcmp(t->precision, "fp32") || strcmp(t->options, b->options))
            continue;
        if (t->lr > b->lr * (1 + 1e-9) && (*up < 0 || t->lr < S->runs[*up].lr))
            *up = (long)i;
        else if (t->lr < b->lr * (1 - 1e-9) && (*down < 0 || t->lr > S->runs[*down].lr))
            *down = (long)i;
    }
}

/* Nothing learns yet: the next lrs toward the FP32 run (every-run options kept) whose final eval
 * loss is the lowest of those that end finite, the run closest to learning. Beside it, up and
 * down, a decade at a time (ground is covered fast while nothing learns) or half-way (in log) to
 * the nearest lr tried on that side, and not where that gap is already a step (sqrt(10)) or less;
 * once both sides are measured within a step, half-way down to half a step (10^(1/4)): a valley
 * narrower than a step (a short run with SGD), within the range test's span. The count (0: no
 * run ends finite, or nothing left to try); its lr in *at. */
static size_t toward_lowest(const tune_state *S, double *next, double *at)
{
    char opts[1024];
    set_text(opts, sizeof opts, &S->every, NULL);
    long b = -1;
    for (size_t i = 0; i < S->nruns; i++) {
        const trun *t = &S->runs[i];
        if (t->kind == K_RUN && !strcmp(t->precision, "fp32") && !strcmp(t->options, opts) && ends_finite(t) &&
            (b < 0 || t->eval < S->runs[b].eval))
            b = (long)i;
    }
    if (b < 0)
        return 0;
    double bl = *at = S->runs[b].lr;
    long hi_i, lo_i;
    nearest_sides(S, b, &hi_i, &lo_i);
    double above = hi_i >= 0 ? S->runs[hi_i].lr : INFINITY, below = lo_i >= 0 ? S->runs[lo_i].lr : 0;
    size_t n = 0;
    /* a side still open (its nearest lr more than a step away) is walked; once both are measured
     * within a step, the gaps are halved down to half a step (a valley narrower than a step) */
    int up_open = above / bl > LR_STEP * 1.001, down_open = below <= 0 || bl / below > LR_STEP * 1.001;
    double gap = up_open || down_open ? LR_STEP : LR_HALF;
    if (above / bl > gap * 1.001) {
        double up = bl * fmin(10.0, sqrt(above / bl));
        if (up <= LRFIND_MAX && find_run(S, "fp32", up, opts, K_RUN) < 0)
            next[n++] = up;
    }
    if (below <= 0 || bl / below > gap * 1.001) {
        double down = below > 0 ? bl / fmin(10.0, sqrt(bl / below)) : bl / 10;
        if (down >= LRFIND_MIN && find_run(S, "fp32", down, opts, K_RUN) < 0)
            next[n++] = down;
    }
    return n;
}

/* FP32 at the lrs (those not run yet), a round of the search. */
static int search_round(tune_state *S, int k, const double *lrs, size_t n, msg_tune_id id, const double *v,
                        size_t nv, const char *source)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        char name[48], why[800];
        double vv[2] = {lrs[i], nv > 0 ? v[0] : NAN};
        const char *s[1] = {source};
        msg_tune(why, sizeof why, id, vv, 2, s, 1);
        snprintf(name, sizeof name, "lr-%d-%zu", k, i + 1);
        long rd;
        rc = do_round(S, name, "fp32", lrs[i], &S->every, NULL, NULL, 0, K_RUN, id, why, &rd);
    }
    return rc;
}

/* The best FP32 run measured on both sides (its nearest runs, within a step): where a side's run
 * ends within the paired noise band of the best (not worse beyond it: a plateau, or a noisy
 * valley), the lr a step past that run, where no run lies within a step past it yet, within the
 * range test's span (into next, *nn of them). A best that is worse than its neighbour beyond the noise
 * on both sides is settled. 0 or an exit status. */
static int past_plateau(const tune_state *S, long best, double *next, size_t *nn)
{
    *nn = 0;
    long sides[2];
    nearest_sides(S, best, &sides[0], &sides[1]);
    for (int j = 0; j < 2; j++) {
        long nb = sides[j];
        if (nb < 0)
            continue;
        double side = S->runs[nb].lr, past = j == 0 ? side * LR_STEP : side / LR_STEP;
        long beyond[2];
        nearest_sides(S, nb, &beyond[0], &beyond[1]);
        if (past > LRFIND_MAX || past < LRFIND_MIN || S->runs[nb].learns != 1 ||
            (beyond[j] >= 0 && (j == 0 ? S->runs[beyond[j]].lr / side : side / S->runs[beyond[j]].lr) <= LR_STEP * 1.001))
            continue; /* (a run already measured within a step past it: the plateau's edge is known) */
        int outside, paired;
        double band, rel;
        if (gap_of(S, best, nb, &outside, &band, &paired, &rel))
            return EXIT_IO;
        if (!outside)
            next[(*nn)++] = past;
    }
    return 0;
}

/* The best FP32 run measured on both sides, where the nearest run on a side does not learn or is
 * not healthy (a cliff: a sharp valley, whose best lr often lies near its edge, as SGD's does in a
 * short run): half-way (in log) between them, while that gap is more than 10^(1/8) (into next,
 * *nn of them). */
static void toward_cliff(const tune_state *S, long best, double *next, size_t *nn)
{
    long side[2];
    nearest_sides(S, best, &side[0], &side[1]);
    double bl = S->runs[best].lr;
    for (int j = 0; j < 2; j++) {
        if (side[j] < 0)
            continue;
        const trun *c = &S->runs[side[j]];
        double ratio = j == 0 ? c->lr / bl : bl / c->lr, mid = sqrt(bl * c->lr);
        if ((c->learns == 1 && !c->unhealthy[0]) || ratio <= LR_FINE * 1.001 ||
            find_run(S, "fp32", mid, S->runs[best].options, K_RUN) >= 0)
            continue;
        next[(*nn)++] = mid;
    }
}

/* 3. The lr, measured: the search, and the yardstick it leaves. */
static int stage_lr(tune_state *S, long base, const advice *A)
{
    const trun *b = &S->runs[base];
    double start = b->lr;
    const char *source = "the lr given";
    int rc;
    if (b->learns != 1 || b->unhealthy[0]) {
        const char *reason = b->learns != 1 ? "the FP32 baseline does not learn" : "the FP32 baseline is not healthy";
        if ((rc = stage_lrfind(S, reason, &start)))
            return rc;
        source = "the LR range test's suggestion";
        if (!(start > 0 && isfinite(start))) {
            start = b->lr / 10;
            source = "a tenth of the lr given: the range test suggests none";
        }
    }
    double br[3] = {start, start * LR_STEP, start / LR_STEP};
    if ((rc = search_round(S, 1, br, 3, MT_WHY_LR_BRACKET, &start, 1, source)))
        return rc;
    for (int k = 2; k <= S->cfg->search_rounds + 1; k++) {
        double lo, hi;
        size_t count;
        long best = best_fp32(S, &lo, &hi, &count);
        double next[2];
        size_t nn = 0;
        if (best < 0) {
            double at;
            if ((nn = toward_lowest(S, next, &at))) { /* nothing learns: toward the lowest eval loss */
                if ((rc = search_round(S, k, next, nn, MT_WHY_LR_TOWARD, &at, 1, "")))
                    return rc;
                continue;
            }
            /* no run ends finite: go the way the history says (too low: up), else down */
            int up = A && A->lr == LR_RAISE;
            next[nn++] = up ? hi * LR_STEP : lo / LR_STEP;
            if ((rc = search_round(S, k, next, nn, MT_WHY_LR_LOWER, up ? &hi : &lo, 1, "")))
                return rc;
            continue;
        }
        double bl = S->runs[best].lr, cand[2] = {bl * LR_STEP, bl / LR_STEP};
        long side[2];
        nearest_sides(S, best, &side[0], &side[1]);
        for (int j = 0; j < 2; j++) { /* a side is measured where a run lies within a step of the best */
            double ratio = side[j] < 0 ? 0 : j == 0 ? S->runs[side[j]].lr / bl : bl / S->runs[side[j]].lr;
            if (side[j] < 0) { /* the edge of the lrs measured, better than the other side: a decade */
                double dec = j == 0 ? bl * 10 : bl / 10;
                next[nn++] = side[1 - j] >= 0 && dec <= LRFIND_MAX && dec >= LRFIND_MIN ? dec : cand[j];
            } else if (ratio > LR_STEP * 1.001) { /* half-way (in log) to the run on that side, at most a decade */
                double step = fmin(10.0, sqrt(ratio));
                next[nn++] = j == 0 ? bl * step : bl / step;
            }
        }
        if (!nn) { /* measured on both sides: on past a side that is within the noise of the best */
            if ((rc = past_plateau(S, best, next, &nn)))
                return rc;
            if (nn) {
                if ((rc = search_round(S, k, next, nn, MT_WHY_LR_PLATEAU, &bl, 1, "")))
                    return rc;
                continue;
            }
            toward_cliff(S, best, next, &nn); /* else toward a side that does not learn */
            if (!nn)
                break;
            if ((rc = search_round(S, k, next, nn, MT_WHY_LR_CLIFF, &bl, 1, "")))
                return rc;
            continue;
        }
        if ((rc = search_round(S, k, next, nn, MT_WHY_LR_NEIGHBOUR, &bl, 1, "")))
            return rc;
    }
    return 0;
}

/* 4. The advice's hypotheses at the yardstick: a clip value, a longer warm-up; each kept where FP32
 * with it measures better than the yardstick. */
static int stage_hypotheses(tune_state *S)
{
    long one = S->yard;
    advice A;
    int rc = advise(S, &one, 1, &A);
    if (rc)
        return rc;
    for (int h = 0; h < 2; h++) {
        char value[64];
        const char *option, *what;
        if (h == 0) {
            if (!isfinite(A.clip))
                continue;
            option = "--clip";
            what = "clip";
            snprintf(value, sizeof value, "%.6g", A.clip);
        } else {
            if (!A.warmup)
                continue;
            option = "--schedule";
            what = "a longer warm-up";
            long w = S->runs[S->yard].steps_planned > 0 ? S->runs[S->yard].steps_planned / 10 : 0;
            snprintf(value, sizeof value, "cosine:%ld", w > 10 ? w : 10);
        }
        opt_set cand = S->every;
        set_put(&cand, REM_EVERY_RUN, option, value, what);
        char opts[1024], why[800], name[32], txt[900];
        set_text(opts, sizeof opts, &cand, NULL);
        char one_opt[320];
        snprintf(one_opt, sizeof one_opt, "%s %s", option, value);
        const char *s[2] = {opts, what};
        double lr = S->runs[S->yard].lr;
        msg_tune(why, sizeof why, MT_WHY_HYPOTHESIS, &lr, 1, s, 2);
        snprintf(name, sizeof name, "hypothesis-%d", h + 1);
        long rd;
        if ((rc = do_round(S, name, "fp32", lr, &cand, NULL, NULL, 0, K_RUN, MT_WHY_HYPOTHESIS, why, &rd)))
            return rc;
        long r = find_run(S, "fp32", lr, opts, K_RUN);
        if (r < 0)
            continue;
        const char *so[1] = {one_opt};
        const double v[3] = {S->runs[r].eval, S->runs[S->yard].eval, S->runs[r].learns == 1};
        if (better(&S->runs[r], &S->runs[S->yard]) && S->runs[r].unhealthy[0] == 0) {
            S->every = cand;
            S->yard = r;
            msg_tune(txt, sizeof txt, MT_ADOPTED, v, 2, so, 1);
            add_note(S, MT_ADOPTED, txt);
        } else {
            msg_tune(txt, sizeof txt, MT_REJECTED, v, 3, so, 1);
            add_note(S, MT_REJECTED, txt);
        }
    }
    return 0;
}

/* The precisions of the configuration but fp32 ("fp16,bf16"). */
static void sixteen_bit(const tune_cfg *t, char *buf, size_t n)
{
    char copy[128];
    buf[0] = 0;
    snprintf(copy, sizeof copy, "%s", t->precisions);
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save))
        if (strcmp(p, "fp32")) {
            size_t len = strlen(buf);
            snprintf(buf + len, n - len, "%s%s", len ? "," : "", p);
        }
}

/* One candidate against the yardstick: 1 verified (the words in S->verification), 0 not (the
 * words of why appended to S->failures); or an exit status as -1 - status. */
static int check_candidate(tune_state *S, long k)
{
    const trun *c = &S->runs[k], *y = &S->runs[S->yard];
    char why[900];
    const char *s2[2] = {c->precision, c->unhealthy};
    if (c->failed[0]) {
        const char *sf[2] = {c->precision, c->failed};
        msg_tune(why, sizeof why, MT_FAIL_COMMAND, &c->lr, 1, sf, 2);
    } else if (c->unhealthy[0]) {
        msg_tune(why, sizeof why, MT_FAIL_UNHEALTHY, &c->lr, 1, s2, 2);
    } else if (c->learns != 1) {
        const char *s3[2] = {c->precision, c->learning};
        msg_tune(why, sizeof why, MT_FAIL_NOT_LEARNING, &c->lr, 1, s3, 2);
    } else {
        int outside = 0, paired = 0;
        double band = NAN, rel = NAN;
        if (k != S->yard) {
            int rc = gap_of(S, S->yard, k, &outside, &band, &paired, &rel);
            if (rc)
                return -1 - rc;
        }
        if (!outside) {
            char opts[1024];
            snprintf(opts, sizeof opts, "%s", c->options);
            const char *s[3] = {c->precision, opts, c->path};
            const double v[7] = {c->lr, c->eval, c->eval0, y->eval, band, paired, k == S->yard};
            msg_tune(S->verification, sizeof S->verification, MT_VERIFIED, v, 7, s, 3);
            S->verification_id = MT_VERIFIED;
            S->band = band;
            return 1;
        }
        const char *s1[1] = {c->precision};
        const double v[6] = {c->lr, c->eval, y->eval, rel, band, paired};
        msg_tune(why, sizeof why, MT_FAIL_GAP, v, 6, s1, 1);
    }
    if (S->nfail < 4)
        snprintf(S->failures[S->nfail++], sizeof S->failures[0], "%s", why);
    fprintf_text(stderr, "%s: %s\n", PROG, why);
    return 0;
}

/* 5 and 6. The 16-bit precisions at the yardstick's lr and options, compare's advice on them, the
 * recommended precision with the options for its run; then the verification. */
static int stage_precisions(tune_state *S)
{
    const trun *y = &S->runs[S->yard];
    double lr = y->lr;
    char p16[128], why[800], opts[1024];
    sixteen_bit(S->cfg, p16, sizeof p16);
    set_text(opts, sizeof opts, &S->every, NULL);
    int rc;
    long rd = -1;
    advice A;
    memset(&A, 0, sizeof A);
    if (p16[0]) {
        const char *s[2] = {p16, opts};
        msg_tune(why, sizeof why, MT_WHY_PRECISIONS, &lr, 1, s, 2);
        if ((rc = do_round(S, "precisions", p16, lr, &S->every, NULL, NULL, 0, K_RUN, MT_WHY_PRECISIONS, why, &rd)))
            return rc;
        /* the yardstick and the 16-bit runs at its lr and options */
        long idx[16];
        size_t n = 0;
        idx[n++] = S->yard;
        for (size_t i = 0; i < S->nruns && n < 16; i++)
            if ((long)i != S->yard && S->runs[i].kind == K_RUN && strcmp(S->runs[i].precision, "fp32") &&
                same_lr(S->runs[i].lr, lr) && strcmp(S->runs[i].options, opts) == 0 && !S->runs[i].failed[0])
                idx[n++] = (long)i;
        if ((rc = advise(S, idx, n, &A)))
            return rc;
        if (rd >= 0)
            S->rounds[rd].adv = A;
    }
    /* the candidates: the recommended precision (with the options for its run), the other 16-bit
     * runs (bf16 before fp16), the yardstick */
    long cand[20];
    size_t nc = 0;
    if (A.have && (A.precision == REC_FP16 || A.precision == REC_BF16)) {
        const char *p = A.keep_pure ? "bf16-pure" : rec_precision_name(A.precision);
        if (A.own.n) {
            char own[1024];
            set_text(own, sizeof own, &A.own, NULL);
            const char *s[2] = {p, own};
            msg_tune(why, sizeof why, MT_WHY_RECOMMENDED, &lr, 1, s, 2);
            long r2;
            if ((rc = do_round(S, "recommended", p, lr, &S->every, &A.own, NULL, 0, K_RUN, MT_WHY_RECOMMENDED, why,
                               &r2)))
                return rc;
            char both[1024];
            set_text(both, sizeof both, &S->every, &A.own);
            long k = find_run(S, p, lr, both, K_RUN);
            if (k >= 0)
                cand[nc++] = k;
        }
        long k = find_run(S, p, lr, opts, K_RUN);
        if (k >= 0)
            cand[nc++] = k;
    }
    static const char *const order[] = {"bf16", "fp16", "bf16-pure"};
    for (size_t o = 0; o < sizeof order / sizeof order[0]; o++) {
        long k = find_run(S, order[o], lr, opts, K_RUN);
        int dup = 0;
        for (size_t j = 0; j < nc; j++)
            dup |= cand[j] == k;
        if (k >= 0 && !dup && nc < 19)
            cand[nc++] = k;
    }
    cand[nc++] = S->yard;
    for (size_t j = 0; j < nc; j++) {
        int v = check_candidate(S, cand[j]);
        if (v < 0)
            return -1 - v;
        if (v == 1) {
            S->chosen = cand[j];
            S->verified = 1;
            return 0;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Reports
 * ------------------------------------------------------------------------------------------ */

static void run_line(char *buf, size_t n, const trun *t)
{
    if (t->failed[0]) {
        snprintf(buf, n, "%-9s lr %-10g FAILED: %s", t->precision, t->lr, t->failed);
        return;
    }
    char e[32], e0[32];
    fmt_num(e, sizeof e, t->eval, 4);
    fmt_num(e0, sizeof e0, t->eval0, 4);
    snprintf(buf, n, "%-9s lr %-10g %s eval %s from %s%s%s", t->precision, t->lr,
             t->kind == K_LRFIND ? "(range test)" : t->learns == 1 ? "learns" : "does not learn", e, e0,
             t->unhealthy[0] ? "; not healthy" : "", t->options[0] ? "" : "");
}

static void report_text(FILE *f, const tune_state *S)
{
    char line[1200];
    for (size_t k = 0; k < S->nrounds; k++) {
        const tround *r = &S->rounds[k];
        fprintf_text(f, "%s (%s): %s\n", r->name, r->dir, r->why);
        for (size_t i = r->first_run; i < r->first_run + r->nruns; i++) {
            run_line(line, sizeof line, &S->runs[i]);
            fprintf_text(f, "  %s%s%s\n", line, S->runs[i].options[0] ? " with " : "", S->runs[i].options);
        }
        if (r->adv.have) {
            fprintf_text(f, "  verdict  %s\n", r->adv.verdict);
            fprintf_text(f, "  lr       %s\n", r->adv.lr_text);
        }
    }
    for (size_t i = 0; i < S->nnotes; i++)
        fprintf_text(f, "%s\n", S->notes[i].text);
    fprintf_text(f, "%s: %s\n", S->verified ? "Verified" : "NOT verified", S->verification);
    if (S->cfg->script)
        tune_script_report(f, S->cfg->script, S->chosen >= 0 ? S->runs[S->chosen].path : NULL);
}

static void report_md(FILE *f, const tune_state *S)
{
    fprintf(f, "# ampdiag tune\n\n**%s**: ", S->verified ? "Verified" : "Not verified");
    str_fputs(S->verification, SINK_MD, f);
    fprintf(f, "\n\n| round | run | lr | options | eval loss | learns | why |\n|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < S->nruns; i++) {
        const trun *t = &S->runs[i];
        char e[32];
        fprintf(f, "| ");
        str_fputs(S->rounds[t->round].name, SINK_MD, f);
        fprintf(f, " | ");
        str_fputs(t->precision, SINK_MD, f);
        fprintf(f, " | %g | ", t->lr);
        str_fputs(t->options[0] ? t->options : "-", SINK_MD, f);
        fprintf(f, " | %s | %s | ", fmt_num(e, sizeof e, t->eval, 4),
                t->failed[0] ? "failed" : t->kind == K_LRFIND ? "-" : t->learns == 1 ? "yes" : "no");
        str_fputs(t->why, SINK_MD, f);
        if (t->failed[0]) {
            fprintf(f, "; the command failed: ");
            str_fputs(t->failed, SINK_MD, f);
        }
        fprintf(f, " |\n");
    }
    if (S->nnotes)
        fprintf(f, "\n");
    for (size_t i = 0; i < S->nnotes; i++) {
        fprintf(f, "- ");
        str_fputs(S->notes[i].text, SINK_MD, f);
        fprintf(f, "\n");
    }
    for (size_t k = 0; k < S->nrounds; k++)
        if (S->rounds[k].adv.have) {
            fprintf(f, "\n%s: ", S->rounds[k].name);
            str_fputs(S->rounds[k].adv.verdict, SINK_MD, f);
            fprintf(f, " LR: ");
            str_fputs(S->rounds[k].adv.lr_text, SINK_MD, f);
            fprintf(f, "\n");
        }
}

static void json_opts(jw *w, const opt_set *s, const char *runs)
{
    for (size_t i = 0; i < s->n; i++) {
        jw_open(w, NULL, '{');
        jw_str(w, "option", s->m[i].option);
        jw_str(w, "value", s->m[i].value);
        jw_str(w, "runs", runs);
        jw_str(w, "why", s->m[i].why);
        jw_close(w, '}');
    }
}

static void json_run(jw *w, const tune_state *S, size_t i)
{
    const trun *t = &S->runs[i];
    jw_open(w, NULL, '{');
    jw_str(w, "path", t->path);
    jw_str(w, "precision", t->precision);
    jw_num(w, "lr", t->lr);
    jw_str(w, "options", t->options);
    jw_str(w, "round", S->rounds[t->round].name);
    jw_str(w, "why_id", msg_tune_key(t->why_id));
    jw_str(w, "why", t->why);
    jw_bool(w, "range_test", t->kind == K_LRFIND);
    jw_str(w, "status", t->status);
    jw_num(w, "eval_loss", t->eval);
    jw_num(w, "initial_eval_loss", t->eval0);
    jw_num(w, "accuracy", t->metric);
    if (t->learns < 0)
        jw_null(w, "learns");
    else
        jw_bool(w, "learns", t->learns == 1);
    jw_str(w, "learning", t->learning);
    jw_bool(w, "healthy", t->unhealthy[0] == 0);
    jw_str(w, "unhealthy", t->unhealthy[0] ? t->unhealthy : NULL);
    jw_str(w, "command_line", t->command_line);
    if (S->cfg->script)
        tune_script_json_run(w, S->cfg->script, t->path);
    jw_bool(w, "yardstick", (long)i == S->yard);
    jw_bool(w, "verified", (long)i == S->chosen);
    jw_close(w, '}');
}

static void json_round(jw *w, const tune_state *S, size_t k)
{
    const tround *r = &S->rounds[k];
    jw_open(w, NULL, '{');
    jw_str(w, "name", r->name);
    jw_num(w, "lr", r->lr);
    jw_str(w, "dir", r->dir);
    jw_str(w, "why_id", msg_tune_key(r->why_id));
    jw_str(w, "why", r->why);
    jw_str(w, "options", r->options);
    jw_open(w, "runs", '[');
    for (size_t i = r->first_run; i < r->first_run + r->nruns; i++) {
        jw_open(w, NULL, '{');
        jw_str(w, "precision", S->runs[i].precision);
        jw_str(w, "path", S->runs[i].path);
        jw_str(w, "command_line", S->runs[i].command_line);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    if (r->adv.have) {
        jw_str(w, "precision", rec_precision_name(r->adv.precision));
        jw_str(w, "verdict", r->adv.verdict);
        jw_open(w, "remedies", '[');
        const opt_set *sets[2] = {&r->adv.every, &r->adv.own};
        for (int s = 0; s < 2; s++)
            for (size_t i = 0; i < sets[s]->n; i++) {
                jw_open(w, NULL, '{');
                jw_str(w, "option", sets[s]->m[i].option);
                jw_str(w, "value", sets[s]->m[i].value);
                jw_str(w, "scope", rec_scope_name(sets[s]->m[i].scope));
                jw_str(w, "why", sets[s]->m[i].why);
                jw_close(w, '}');
            }
        jw_close(w, ']');
        jw_str(w, "lr_advice", rec_lr_name(r->adv.lr));
        jw_num(w, "lr_suggested", r->adv.lr_suggested);
        jw_str(w, "lr_text", r->adv.lr_text);
    } else {
        jw_str(w, "verdict", "");
    }
    jw_close(w, '}');
}

static void report_json(FILE *f, const tune_state *S)
{
    jw w;
    jw_begin(&w, f);
    jw_open(&w, NULL, '{');
    jw_str(&w, "format", "ampdiag-tune");
    jw_int(&w, "format_version", TUNE_JSON_VERSION);
    jw_bool(&w, "verified", S->verified);
    if (S->cfg->script)
        tune_script_json(&w, S->cfg->script, S->chosen >= 0 ? S->runs[S->chosen].path : NULL);
    jw_str(&w, "verification_id", msg_tune_key(S->verification_id));
    jw_str(&w, "verification", S->verification);
    const trun *c = S->chosen >= 0 ? &S->runs[S->chosen] : NULL, *y = S->yard >= 0 ? &S->runs[S->yard] : NULL;
    jw_str(&w, "run", c ? c->path : NULL);
    jw_str(&w, "precision", c ? c->precision : NULL);
    jw_num(&w, "lr", c ? c->lr : NAN);
    jw_num(&w, "eval_loss", c ? c->eval : NAN);
    jw_num(&w, "fp32_eval_loss", y ? y->eval : NAN);
    jw_num(&w, "first_fp32_eval_loss", S->first_base >= 0 ? S->runs[S->first_base].eval : NAN);
    jw_num(&w, "noise_band", S->band);
    jw_open(&w, "yardstick", '{');
    jw_str(&w, "run", y ? y->path : NULL);
    jw_num(&w, "lr", y ? y->lr : NAN);
    jw_num(&w, "eval_loss", y ? y->eval : NAN);
    jw_close(&w, '}');
    jw_open(&w, "remedies_applied", '[');
    json_opts(&w, &S->every, "every");
    if (c && S->chosen != S->yard) {
        /* the options of the verified run beyond the every-run ones */
        for (size_t k = 0; k < S->nrounds; k++)
            if (S->rounds[k].adv.have && !strcmp(S->rounds[k].name, "precisions") && c->options[0]) {
                char every[1024];
                set_text(every, sizeof every, &S->every, NULL);
                if (strcmp(c->options, every))
                    json_opts(&w, &S->rounds[k].adv.own, c->precision);
            }
    }
    jw_close(&w, ']');
    jw_open(&w, "notes", '[');
    for (size_t i = 0; i < S->nnotes; i++) {
        jw_open(&w, NULL, '{');
        jw_str(&w, "id", msg_tune_key(S->notes[i].id));
        jw_str(&w, "text", S->notes[i].text);
        jw_close(&w, '}');
    }
    jw_close(&w, ']');
    if (S->search.done) {
        jw_open(&w, "fp32_search", '{');
        jw_str(&w, "precision", S->search.precision);
        jw_bool(&w, "found", S->search.found);
        jw_str(&w, "layers", S->search.found ? S->search.layers : NULL);
        jw_str(&w, "run", S->search.run >= 0 ? S->runs[S->search.run].path : NULL);
        jw_int(&w, "runs", S->search.runs);
        jw_int(&w, "layers_searched", S->search.nlayers);
        jw_str(&w, "text", S->search.text);
        jw_close(&w, '}');
    } else {
        jw_null(&w, "fp32_search");
    }
    jw_open(&w, "failed_candidates", '[');
    for (size_t i = 0; i < S->nfail; i++)
        jw_str(&w, NULL, S->failures[i]);
    jw_close(&w, ']');
    jw_open(&w, "runs", '[');
    for (size_t i = 0; i < S->nruns; i++)
        json_run(&w, S, i);
    jw_close(&w, ']');
    jw_open(&w, "rounds", '[');
    for (size_t k = 0; k < S->nrounds; k++)
        json_round(&w, S, k);
    jw_close(&w, ']');
    jw_close(&w, '}');
    jw_end(&w);
}

/* The reports tune will write into dir, checked before any run (replaced only where they are
 * regular files). 0, or the exit status after a message. */
static int check_reports(const char *dir)
{
    static const char *const names[2] = {"tune.md", "tune.json"};
    int rc = 0;
    for (int k = 0; !rc && k < 2; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        rc = cli_check_output(PROG, NULL, p, 1);
    }
    return rc;
}

/* Write the Markdown and JSON reports into dir. 0 or EXIT_IO. */
static int write_reports(const char *dir, const tune_state *S)
{
    static const char *const names[2] = {"tune.md", "tune.json"};
    for (int k = 0; k < 2; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        char why[160];
        FILE *f = path_fopen_output(p, why, sizeof why);
        if (!f) {
            fprintf_text(stderr, "%s: cannot write '%s': %s\n", PROG, p, why);
            return EXIT_IO;
        }
        if (k)
            report_json(f, S);
        else
            report_md(f, S);
        if (ferror(f) | fclose(f)) {
            fprintf_text(stderr, "%s: cannot write '%s'\n", PROG, p);
            return EXIT_IO;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */

static int parse_num(const char *what, const char *s, double lo, double hi, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end || errno || !(x >= lo && x <= hi)) {
        fprintf_text(stderr, "%s: %s: expected a number in [%g, %g], got '%s'\n", PROG, what, lo, hi, s);
        return -1;
    }
    *v = x;
    return 0;
}

/* --precisions with fp32 first (the baseline, always run). 0 or EXIT_USAGE after a message. */
static int set_precisions(tune_cfg *t, const char *list)
{
    char copy[128];
    if (strlen(list) >= sizeof copy - 8) {
        fprintf_text(stderr, "%s: --precisions '%s': too long\n", PROG, list);
        return EXIT_USAGE;
    }
    snprintf(t->precisions, sizeof t->precisions, "fp32");
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save))
        if (strcmp(p, "fp32")) {
            size_t len = strlen(t->precisions);
            snprintf(t->precisions + len, sizeof t->precisions - len, ",%s", p);
        }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * --fp32-search: the smallest set of layers that must stay in FP32 for a 16-bit run to pass
 * (as Polygraphy's `debug precision` does for inference)
 * ------------------------------------------------------------------------------------------ */

#define SEARCH_MAX_RUNS 16 /* runs the search makes at most */
#define SEARCH_MAX_LAYERS 128

/* Run k passes against the yardstick: healthy, learns, not worse beyond the noise band. 1 or 0,
 * or -1 - an exit status. */
static int passes(const tune_state *S, long k)
{
    if (k < 0 || S->runs[k].unhealthy[0] || S->runs[k].learns != 1)
        return 0;
    int outside = 1, paired = 0;
    double band, rel;
    int rc = gap_of(S, S->yard, k, &outside, &band, &paired, &rel);
    return rc ? -1 - rc : !outside;
}

/* The layers of names whose bit in keep is set, comma-separated. */
static void layer_list(char *buf, size_t n, char (*names)[AMPDIAG_TRACE_NAME_LEN], const int *keep, int nl)
{
    buf[0] = 0;
    for (int i = 0; i < nl; i++)
        if (keep[i]) {
            size_t len = strlen(buf);
            snprintf(buf + len, n - len, "%s%s", len ? "," : "", names[i]);
        }
}

/* precision P at the yardstick's lr and options with the layers keep in FP32: a round
 * fp32-search-K (none when that configuration was run). *ok := it passes. 0 or an exit status. */
static int search_try(tune_state *S, const char *P, char (*names)[AMPDIAG_TRACE_NAME_LEN], const int *keep, int nl,
                      int *ok, long *k)
{
    char layers[4096], why[800], name[48], both[1024];
    layer_list(layers, sizeof layers, names, keep, nl);
    if (strlen(layers) >= sizeof S->search.layers) {
        *ok = 0;
        *k = -1;
        return 0;
    }
    opt_set own = {.n = 0};
    set_put(&own, REM_RECOMMENDED, "--fp32-layers", layers, "--fp32-search");
    double lr = S->runs[S->yard].lr;
    snprintf(why, sizeof why, "--fp32-search: %s at the yardstick's lr %g with %s in FP32 (the smallest set of "
             "layers that must stay in FP32 for %s to pass)", P, lr, layers, P);
    snprintf(name, sizeof name, "fp32-search-%d", S->search.runs + 1);
    long rd;
    int rc = do_round(S, name, P, lr, &S->every, &own, NULL, 0, K_RUN, MT_WHY_HYPOTHESIS, why, &rd);
    if (rc)
        return rc;
    if (rd >= 0)
        S->search.runs++;
    set_text(both, sizeof both, &S->every, &own);
    *k = find_run(S, P, lr, both, K_RUN);
    int v = passes(S, *k);
    if (v < 0)
        return -1 - v;
    *ok = v;
    fprintf_text(stderr, "%s: --fp32-search: %s with %s in FP32: %s\n", PROG, P, layers, v ? "passes" : "fails");
    return 0;
}

/* The first 16-bit precision of --precisions at the yardstick's lr and options: which of its
 * layers must stay in FP32 for it to pass (learn, healthy, within the yardstick's band)? Every
 * layer with parameters in FP32 first (none pass: not the layers' compute), then the shortest
 * prefix (in the trace's order) that passes, bisected, then each of its layers left out in turn
 * where the run still passes without it. A set found that passes is verified when only the
 * yardstick itself was. 0 or an exit status. */
static int stage_fp32_search(tune_state *S)
{
    char p16[128], P[16] = "", opts[1024];
    sixteen_bit(S->cfg, p16, sizeof p16);
    snprintf(P, sizeof P, "%.*s", (int)strcspn(p16, ","), p16);
    S->search.done = 1;
    S->search.run = -1;
    snprintf(S->search.precision, sizeof S->search.precision, "%s", P);
    if (!P[0]) {
        snprintf(S->search.text, sizeof S->search.text, "--fp32-search: no 16-bit precision to search (--precisions)");
        add_note(S, MT_YARDSTICK, S->search.text);
        return 0;
    }
    set_text(opts, sizeof opts, &S->every, NULL);
    double lr = S->runs[S->yard].lr;
    long base = find_run(S, P, lr, opts, K_RUN);
    if (base < 0)
        return 0;
    int v = passes(S, base);
    if (v < 0)
        return -1 - v;
    if (v) {
        S->search.found = 1;
        S->search.run = base;
        snprintf(S->search.text, sizeof S->search.text, "--fp32-search: %s at lr %g passes with no layer in FP32: "
                 "none must stay in FP32", P, lr);
        add_note(S, MT_YARDSTICK, S->search.text);
        return 0;
    }
    /* the layers with parameters that run in 16 bits, in the trace's order */
    static char names[SEARCH_MAX_LAYERS][AMPDIAG_TRACE_NAME_LEN];
    int keep[SEARCH_MAX_LAYERS], nl = 0;
    an_run r;
    /* a run whose command failed left no trace to read: the yardstick's layers (the same model) */
    long from = S->runs[base].failed[0] ? S->yard : base;
    if (load_run(S->runs[from].path, &r, 0))
        return EXIT_IO;
    for (size_t i = 0; i < r.nlayers && nl < SEARCH_MAX_LAYERS; i++)
        if (r.layers[i].params > 0 && !r.layers[i].fp32_op)
            snprintf(names[nl++], sizeof names[0], "%s", r.layers[i].name);
    an_free(&r);
    S->search.nlayers = nl;
    int rc, ok = 0;
    long k = -1;
    for (int i = 0; i < nl; i++)
        keep[i] = 1;
    if (nl > 0 && (rc = search_try(S, P, names, keep, nl, &ok, &k)))
        return rc;
    if (!ok) {
        snprintf(S->search.text, sizeof S->search.text, "--fp32-search: %s at lr %g does not pass even with its %d "
                 "layers with parameters in FP32%s: what fails is not their compute (see the advice on the "
                 "precisions round)", P, lr, nl, k < 0 && nl > 0 ? " (too many to name)" : "");
        add_note(S, MT_YARDSTICK, S->search.text);
        return 0;
    }
    /* the shortest prefix that passes: prefix lo fails, prefix hi passes */
    int lo = 0, hi = nl;
    long khi = k;
    while (hi - lo > 1 && S->search.runs < SEARCH_MAX_RUNS) {
        int mid = (lo + hi) / 2;
        for (int i = 0; i < nl; i++)
            keep[i] = i < mid;
        if ((rc = search_try(S, P, names, keep, nl, &ok, &k)))
            return rc;
        if (ok) {
            hi = mid;
            khi = k;
        } else {
            lo = mid;
        }
    }
    /* each layer of the prefix but its last left out in turn, kept out where it still passes */
    for (int i = 0; i < nl; i++)
        keep[i] = i < hi;
    for (int i = 0; i + 1 < hi && S->search.runs < SEARCH_MAX_RUNS; i++) {
        keep[i] = 0;
        if ((rc = search_try(S, P, names, keep, nl, &ok, &k)))
            return rc;
        if (ok)
            khi = k;
        else
            keep[i] = 1;
    }
    layer_list(S->search.layers, sizeof S->search.layers, names, keep, nl);
    int count = 0;
    for (int i = 0; i < nl; i++)
        count += keep[i];
    S->search.found = 1;
    S->search.run = khi;
    snprintf(S->search.text, sizeof S->search.text, "--fp32-search: %s at lr %g passes with %s in FP32 (%d of its %d "
             "layers with parameters; %d runs%s; %s)", P, lr, S->search.layers, count, nl, S->search.runs,
             S->search.runs >= SEARCH_MAX_RUNS ? ", the most the search makes: maybe not the smallest" : "",
             S->runs[khi].path);
    add_note(S, MT_YARDSTICK, S->search.text);
    if (S->chosen == S->yard) { /* only FP32 passed: the 16-bit run with the set does too */
        int c = check_candidate(S, khi);
        if (c < 0)
            return -1 - c;
        if (c == 1)
            S->chosen = khi;
    }
    return 0;
}

/* 3b. Every-run options the advice named that measured worse at the lr given, where that lr did
 * not learn (an lr far off hides what standardised inputs or an FP32 optimizer state are worth):
 * FP32 with them at the lr the search measured best (else at the lr of the run closest to
 * learning; where no run ends finite, the lowest lr tried); kept where it measures better, and
 * the lr measured again from there. 0 or an exit status. */
static int stage_retest(tune_state *S, long base)
{
    if (!S->have_rejected || S->runs[base].learns == 1)
        return 0;
    double lo, hi, at = NAN;
    size_t count;
    long ref = best_fp32(S, &lo, &hi, &count);
    if (ref < 0) {
        double next[2];
        toward_lowest(S, next, &at);
        if (!isfinite(at)) /* no run ends finite: the lowest lr tried, the least likely to diverge */
            at = lo;
        if (!isfinite(at))
            return 0;
        char opts[1024];
        set_text(opts, sizeof opts, &S->every, NULL);
        ref = find_run(S, "fp32", at, opts, K_RUN);
        if (ref < 0)
            return 0;
    }
    double lr = S->runs[ref].lr;
    char opts[1024], why[800], txt[900];
    set_text(opts, sizeof opts, &S->rejected, NULL);
    if (find_run(S, "fp32", lr, opts, K_RUN) >= 0)
        return 0;
    const char *s[1] = {opts};
    msg_tune(why, sizeof why, MT_WHY_REMEDY_AGAIN, (const double[]){lr, S->runs[base].lr}, 2, s, 1);
    long rd;
    int rc = do_round(S, "remedy-again", "fp32", lr, &S->rejected, NULL, NULL, 0, K_RUN, MT_WHY_REMEDY_AGAIN, why,
                      &rd);
    if (rc)
        return rc;
    long r = find_run(S, "fp32", lr, opts, K_RUN);
    if (r < 0)
        return 0;
    const double v[3] = {S->runs[r].eval, S->runs[ref].eval, S->runs[r].learns == 1};
    if (!better(&S->runs[r], &S->runs[ref])) {
        msg_tune(txt, sizeof txt, MT_REJECTED, v, 3, s, 1);
        add_note(S, MT_REJECTED, txt);
        return 0;
    }
    S->every = S->rejected;
    S->have_rejected = 0;
    msg_tune(txt, sizeof txt, MT_ADOPTED, v, 2, s, 1);
    add_note(S, MT_ADOPTED, txt);
    return stage_lr(S, r, &S->rounds[0].adv);
}

/* The whole loop. 0 or an exit status. */
static int tune(tune_state *S, double lr)
{
    long base;
    int rc = stage_given(S, lr, &base);
    if (rc)
        return rc;
    S->first_base = base;
    if (S->runs[base].degenerate[0]) { /* nothing measured on it says anything: stop here */
        const char *s[1] = {S->runs[base].degenerate};
        msg_tune(S->verification, sizeof S->verification, MT_CANNOT_JUDGE, NULL, 0, s, 1);
        S->verification_id = MT_CANNOT_JUDGE;
        return 0;
    }
    if ((rc = stage_every(S, &S->rounds[0].adv, &base, 1)))
        return rc;
    if ((rc = stage_lr(S, base, &S->rounds[0].adv)))
        return rc;
    if ((rc = stage_retest(S, base)))
        return rc;
    double lo, hi;
    size_t count;
    S->yard = best_fp32(S, &lo, &hi, &count);
    if (S->yard < 0) {
        const trun *b = &S->runs[base];
        const char *s[1] = {b->learning[0] ? b->learning : b->unhealthy};
        msg_tune(S->verification, sizeof S->verification, MT_NOTHING_LEARNS, (const double[]){(double)count, lo, hi},
                 3, s, 1);
        S->verification_id = MT_NOTHING_LEARNS;
        return 0;
    }
    char txt[900], opts[1024];
    set_text(opts, sizeof opts, &S->every, NULL);
    const trun *y = &S->runs[S->yard];
    const char *s[1] = {opts};
    msg_tune(txt, sizeof txt, MT_YARDSTICK, (const double[]){y->lr, y->eval, y->eval0, (double)count}, 4, s, 1);
    add_note(S, MT_YARDSTICK, txt);
    if ((rc = stage_hypotheses(S)))
        return rc;
    if ((rc = stage_precisions(S)))
        return rc;
    if (S->cfg->fp32_search && S->yard >= 0 && (rc = stage_fp32_search(S)))
        return rc;
    if (!S->verified) {
        char all[2400] = "";
        for (size_t i = 0; i < S->nfail; i++) {
            size_t len = strlen(all);
            snprintf(all + len, sizeof all - len, "%s%s", i ? "; " : "", S->failures[i]);
        }
        const char *s2[1] = {all};
        msg_tune(S->verification, sizeof S->verification, MT_NOT_VERIFIED, NULL, 0, s2, 1);
        S->verification_id = MT_NOT_VERIFIED;
    }
    return 0;
}

int cmd_tune(int argc, char **argv)
{
    cli_opt table[CLI_MAX_OPTS + 1];
    if (cli_with_run_options(table, own_options, tune_id_of))
        return EXIT_USAGE;
    tune_cfg t = {.out = NULL, .jobs = NULL, .target = TGT_ANY, .search_rounds = 4};
    double lr = NAN, rounds = 4, jv;
    int rc = set_precisions(&t, "fp32,fp16,bf16");
    int split = tune_script_split(argc, argv); /* `-- CMD ARGS`: the user's command */
    if (split < argc) {
        rc = tune_script_open(&t.script, argv + split + 1, argc - split - 1, PROG);
        argc = split;
    }
    t.pass = calloc((size_t)argc * 2 + 1, sizeof *t.pass);
    if (!t.pass)
        return EXIT_IO;
    cli_parser p;
    if (!rc && cli_parser_init(&p, "tune", table, argc, argv, 0))
        rc = EXIT_USAGE;
    for (int id; !rc && (id = cli_next(&p)) != CLI_DONE;) {
        switch (id) {
        case T_OUT: t.out = p.arg; break;
        case T_PRECISIONS:
            rc = t.script ? tune_script_check_precisions(PROG, p.arg) : 0;
            rc = rc ? rc : set_precisions(&t, p.arg);
            break;
        case T_LR: rc = parse_num("--lr", p.arg, 1e-12, 1e6, &lr) ? EXIT_USAGE : 0; break;
        case T_ROUNDS: rc = parse_num("--rounds", p.arg, 1, TUNE_MAX_SEARCH, &rounds) ? EXIT_USAGE : 0; break;
        case T_JOBS: rc = parse_num("--jobs", p.arg, 1, 64, &jv) ? EXIT_USAGE : 0; t.jobs = p.arg; break;
        case T_TARGET:
            if (rec_target_parse(p.arg, &t.target) != 0) {
                fprintf_text(stderr, "%s: --target '%s': expected any, sm70, sm75, sm80, sm89, sm90 or cpu\n",
                             PROG, p.arg);
                rc = EXIT_USAGE;
            }
            break;
        case T_FP32_SEARCH: t.fp32_search = 1; break;
        case T_HELP: usage(stdout); free(t.pass); tune_script_free(t.script); return 0;
        case T_LAUNCHER: {
            launch_kind k;
            if (launch_kind_parse(p.arg, &k) != 0) {
                fprintf_text(stderr, "%s: unknown --launcher '%s' (expected local or slurm)\n", PROG, p.arg);
                rc = EXIT_USAGE;
            }
            t.launcher = p.arg;
            break;
        }
        case T_REFUSE:
            fprintf_text(stderr, "%s: %s\n", PROG, strcmp(p.opt->name, "--dry-run") == 0
                         ? "--dry-run: tune decides its later runs from the earlier ones (ampdiag sweep "
                           "--dry-run checks the first round's runs)"
                         : "--precision is set by tune (use --precisions)");
            rc = EXIT_USAGE;
            break;
        case T_PASS:
            rc = t.script ? tune_script_check_option(PROG, p.opt->name) : cli_check_passed_option(PROG, p.opt, p.arg);
            t.pass[t.npass++] = (char *)p.opt->name;
            if (p.arg)
                t.pass[t.npass++] = (char *)p.arg;
            break;
        case CLI_POS:
            fprintf_text(stderr, "%s: unexpected argument '%s' (see ampdiag tune --help)\n", PROG, p.arg);
            rc = EXIT_USAGE;
            break;
        default: rc = EXIT_USAGE; break;
        }
    }
    t.search_rounds = (int)rounds;
    if (!rc && !t.out) {
        fprintf_text(stderr, "%s: no output directory (-o DIR)\n", PROG);
        rc = EXIT_USAGE;
    }
    char msg[600];
    int mrc = rc ? 0 : path_make_dir(t.out, msg, sizeof msg);
    if (mrc) {
        fprintf_text(stderr, "%s: -o: %s\n", PROG, msg);
        rc = mrc == 2 ? EXIT_USAGE : EXIT_IO;
    }
    if (!rc)
        rc = check_reports(t.out);
    tune_state *S = rc ? NULL : calloc(1, sizeof *S);
    if (!rc && !S)
        rc = EXIT_IO;
    if (!rc) {
        S->cfg = &t;
        S->first_base = S->yard = S->chosen = -1;
        rc = tune(S, lr);
        if (!rc && S->nruns > 0) {
            report_text(stdout, S);
            rc = write_reports(t.out, S);
            if (!rc && !S->verified)
                rc = EXIT_FAIL_ON;
        }
    }
    free(S);
    free(t.pass);
    tune_script_free(t.script);
    if (fflush(stdout) != 0 && !rc)
        rc = EXIT_IO;
    return rc;
}
