/*
 * cmd_tune.c - `ampdiag tune`: the closed loop. A recommendation is only as good as the run that
 * follows it, so tune runs the baseline and the candidate precisions (`ampdiag sweep` into
 * DIR/round-K), compares them (the rules of `ampdiag compare`), and, while the advice changes the
 * learning rate, runs the next round at the suggested lr; at most --rounds rounds. The last
 * round's run of the recommended configuration is its verification: it must be healthy against
 * the FP32 run of the same round (status complete, no NaN/inf, skips within the limit, eval
 * loss within the noise band) and must not be worse than the first baseline beyond that band.
 * The report (stdout as text, DIR/tune.md, DIR/tune.json) gives each round's evidence and says
 * whether the recommendation was verified.
 */
#include "analysis/analyze.h"
#include "analysis/recommend.h"
#include "cli/cli.h"
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
#define TUNE_MAX_ROUNDS 10
#define TUNE_JSON_VERSION 1

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag tune -o DIR [--precisions P,...] [--lr X] [--rounds N] [-j N]\n"
            "                    [run options]\n"
            "\n"
            "The closed loop: run the precisions at the lr (ampdiag sweep into DIR/round-1),\n"
            "compare them, and while the advice changes the lr, run the next round at the\n"
            "suggested lr (at most --rounds rounds). The recommended configuration's run in the\n"
            "last round verifies the advice: healthy against that round's FP32 run (complete, no\n"
            "NaN/inf, skips within 1 in 500 after calibration, eval loss within the noise band)\n"
            "and not worse than the first FP32 run beyond the band. The report goes to stdout,\n"
            "DIR/tune.md and DIR/tune.json; each round's runs and sweep report stay in\n"
            "DIR/round-K/.\n"
            "\n"
            "options:\n"
            "  -o, --out DIR       output directory (created if missing)\n"
            "  --precisions LIST   as ampdiag sweep (default fp32,fp16,bf16; fp32 is the baseline)\n"
            "  --lr X              the first round's learning rate (default: the runs' own, from\n"
            "                      --scenario or ampdiag run's default 1e-3)\n"
            "  --rounds N          at most N rounds (default 3, at most 10)\n"
            "  -j, --jobs N        runs at once in a round (default 1)\n"
            "  -h, --help\n"
            "Every option of `ampdiag run` goes to each run (--model, --data, -s/--steps,\n"
            "--optimizer, --scenario, ...), except --precision, --out and --lr, which tune sets.\n"
            "\n"
            "exit status: 0 the recommendation was verified, 1 it was not (the report says why),\n"
            "2 bad usage or a run refused its options, 3 I/O failure, 130 (143) stopped by SIGINT\n"
            "(SIGTERM)\n");
}

enum { T_OUT = 1, T_PRECISIONS, T_LR, T_ROUNDS, T_JOBS, T_HELP, T_REFUSE, T_PASS };

static const cli_opt own_options[] = {
    {"--out", 'o', CLI_ARG, T_OUT}, {"--precisions", 0, CLI_ARG, T_PRECISIONS},
    {"--lr", 0, CLI_ARG, T_LR}, {"--rounds", 0, CLI_ARG, T_ROUNDS}, {"--jobs", 'j', CLI_ARG, T_JOBS},
    {"--help", 'h', CLI_NOARG, T_HELP}, CLI_OPT_END};

/* run's options: --precision refused, the rest passed on to the sweeps. */
static int tune_id_of(const char *name) { return strcmp(name, "--precision") == 0 ? T_REFUSE : T_PASS; }

/* One round: the lr it ran at, its runs and what compare concluded. */
typedef struct tune_round {
    double lr;
    char dir[4096];
    an_run *runs;
    size_t n;
    size_t base;            /* the FP32 run (compare's baseline) */
    an_comparison c;
    recommendation R;
    int have;               /* runs loaded and the rules applied */
} tune_round;

static void round_free(tune_round *r)
{
    if (!r->have)
        return;
    rec_free(&r->R);
    an_comparison_free(&r->c);
    for (size_t i = 0; i < r->n; i++)
        an_free(&r->runs[i]);
    free(r->runs);
    r->have = 0;
}

/* Run `ampdiag sweep` for one round; its report goes to DIR/round-K/sweep.txt. Returns the
 * sweep's exit status (0, 1: a --fail-on condition, which tune does not ask for), or EXIT_IO. */
static int run_sweep(const char *dir, const char *precisions, double lr, const char *jobs,
                     char **pass, int npass)
{
    char lrs[64], out[4200];
    snprintf(lrs, sizeof lrs, "%.6g", lr);
    snprintf(out, sizeof out, "%s/sweep.txt", dir);
    char **argv = calloc((size_t)npass + 16, sizeof *argv);
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
    argv[k++] = "-j";
    argv[k++] = (char *)jobs;
    for (int i = 0; i < npass; i++)
        argv[k++] = pass[i];
    argv[k] = NULL;
    int rc = cli_run_self(argv, out, PROG);
    free(argv);
    return rc;
}

static int is_trace(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return n > 7 && strncmp(e->d_name, "run-", 4) == 0 && strcmp(e->d_name + n - 3, ".h5") == 0;
}

/* Load the round's traces (FP32 first: compare's baseline) and apply the rules. */
static int round_analyse(tune_round *r)
{
    struct dirent **ents = NULL;
    int ne = scandir(r->dir, &ents, is_trace, alphasort);
    if (ne <= 0) {
        fprintf_text(stderr, "%s: no traces in '%s'\n", PROG, r->dir);
        free(ents);
        return EXIT_IO;
    }
    r->runs = calloc((size_t)ne, sizeof *r->runs);
    int rc = r->runs ? 0 : EXIT_IO;
    an_options ao = {-1, 1, 0};
    char err[1024];
    for (int i = 0; i < ne; i++) {
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", r->dir, ents[i]->d_name);
        if (!rc && an_load(p, &ao, &r->runs[r->n], err, sizeof err) != 0) {
            fprintf_text(stderr, "%s: %s\n", PROG, err);
            rc = EXIT_IO;
        }
        if (r->runs)
            r->n += !rc;
        free(ents[i]);
    }
    free(ents);
    if (rc)
        return rc;
    r->base = 0;
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->runs[i].precision, "fp32") == 0) {
            r->base = i;
            break;
        }
    if (an_compare(r->runs, r->n, r->base, &r->c) ||
        recommend(r->runs, r->n, &r->c, TGT_ANY, 0, &r->R))
        return EXIT_IO;
    r->lr = r->runs[r->base].lr; /* as the runs recorded it */
    r->have = 1;
    return 0;
}

/* The run of precision p in a round, or NULL. */
static const an_run *run_of(const tune_round *r, rec_precision p, size_t *idx)
{
    const char *want = rec_precision_name(p);
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->runs[i].precision, want) == 0) {
            *idx = i;
            return &r->runs[i];
        }
    return NULL;
}

/* The verification of the last round's recommendation. */
typedef struct verdict {
    int verified;
    char why[512];       /* what held or failed */
    double eval, base_eval, first_eval, band;
} verdict;

/* Verify the recommendation of round adv with the runs of round last (the same round, or the
 * verification round that ran the recommended precision beside FP32). */
static void verify(const tune_round *first, const tune_round *adv, const tune_round *last, verdict *v)
{
    memset(v, 0, sizeof *v);
    v->eval = v->base_eval = v->first_eval = NAN;
    v->band = last->c.band;
    size_t i;
    const an_run *r = run_of(last, adv->R.precision, &i);
    if (adv->R.precision == REC_UNDECIDED || !r) {
        snprintf(v->why, sizeof v->why, "no configuration to verify: %s", adv->R.verdict);
        return;
    }
    const an_run *b = &last->runs[last->base];
    const an_run *b0 = &first->runs[first->base];
    v->eval = r->find.last_eval ? r->find.last_eval->loss : NAN;
    v->base_eval = b->find.last_eval ? b->find.last_eval->loss : NAN;
    v->first_eval = b0->find.last_eval ? b0->find.last_eval->loss : NAN;
    double skip_rate = r->steps_after ? (double)r->skipped_after / (double)r->steps_after : 0;
    const an_gap *g = &last->c.gap[i];
    const char *bad = NULL;
    if (r->status != AMPDIAG_STATUS_COMPLETE)
        bad = "its run did not complete";
    else if (r->loss_nonfinite || r->fwd_nonfinite_step >= 0)
        bad = "its run has NaN/inf";
    else if (r->skipped_after >= 2 && skip_rate > 1.0 / 500)
        bad = "its run skips more than 1 step in 500 after calibration";
    else if (i != last->base && g->have && g->rel > last->c.band)
        bad = "its eval loss is worse than the FP32 run's beyond the noise band";
    else if (isfinite(v->first_eval) && !(v->eval <= v->first_eval * (1 + last->c.band)))
        bad = "its eval loss is worse than the first baseline's beyond the noise band";
    char e[32], be[32], fe[32];
    fmt_num(e, sizeof e, v->eval, 4);
    fmt_num(be, sizeof be, v->base_eval, 4);
    fmt_num(fe, sizeof fe, v->first_eval, 4);
    v->verified = bad == NULL;
    snprintf(v->why, sizeof v->why, "%s at lr %g (%s): %s; eval loss %s vs fp32 %s at that lr and %s "
             "at the first lr, noise band +-%.3g%%", rec_precision_name(adv->R.precision), last->lr,
             r->path, bad ? bad : "complete, no NaN/inf, skips within the limit, eval loss within the "
                                 "noise band", e, be, fe, 100 * last->c.band);
}

static void report_text(FILE *f, const tune_round *rs, int nr, const verdict *v)
{
    for (int k = 0; k < nr; k++) {
        const tune_round *r = &rs[k];
        fprintf_text(f, "round %d: lr %g (%s)\n", k + 1, r->lr, r->dir);
        fprintf_text(f, "  verdict  %s\n", r->R.verdict);
        fprintf_text(f, "  lr       %s\n", r->R.lr_line);
        for (size_t i = 0; i < r->R.lr_why.n; i++)
            fprintf_text(f, "           %s\n", r->R.lr_why.s[i]);
    }
    fprintf_text(f, "%s: %s\n", v->verified ? "Verified" : "NOT verified", v->why);
}

static void report_md(FILE *f, const tune_round *rs, int nr, const verdict *v)
{
    fprintf(f, "# ampdiag tune\n\n**%s**: ", v->verified ? "Verified" : "Not verified");
    str_fputs(v->why, SINK_MD, f);
    fprintf(f, "\n\n| round | lr | verdict | lr advice |\n|---|---|---|---|\n");
    for (int k = 0; k < nr; k++) {
        fprintf(f, "| %d | %g | ", k + 1, rs[k].lr);
        str_fputs(rs[k].R.verdict, SINK_MD, f);
        fputs(" | ", f);
        str_fputs(rs[k].R.lr_line, SINK_MD, f);
        fputs(" |\n", f);
    }
}

static void report_json(FILE *f, const tune_round *rs, int nr, const verdict *v)
{
    jw w;
    jw_begin(&w, f);
    jw_open(&w, NULL, '{');
    jw_str(&w, "format", "ampdiag-tune");
    jw_int(&w, "format_version", TUNE_JSON_VERSION);
    jw_bool(&w, "verified", v->verified);
    jw_str(&w, "verification", v->why);
    jw_num(&w, "eval_loss", v->eval);
    jw_num(&w, "fp32_eval_loss", v->base_eval);
    jw_num(&w, "first_fp32_eval_loss", v->first_eval);
    jw_num(&w, "noise_band", v->band);
    jw_open(&w, "rounds", '[');
    for (int k = 0; k < nr; k++) {
        jw_open(&w, NULL, '{');
        jw_num(&w, "lr", rs[k].lr);
        jw_str(&w, "dir", rs[k].dir);
        jw_str(&w, "precision", rec_precision_name(rs[k].R.precision));
        jw_str(&w, "verdict", rs[k].R.verdict);
        jw_str(&w, "lr_advice", rec_lr_name(rs[k].R.lr));
        jw_num(&w, "lr_suggested", rs[k].R.lr_suggested);
        jw_str(&w, "lr_text", rs[k].R.lr_line);
        jw_close(&w, '}');
    }
    jw_close(&w, ']');
    jw_close(&w, '}');
    jw_end(&w);
}

/* Write the Markdown and JSON reports into dir. 0 or EXIT_IO. */
static int write_reports(const char *dir, const tune_round *rs, int nr, const verdict *v)
{
    static const char *const names[2] = {"tune.md", "tune.json"};
    for (int k = 0; k < 2; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, names[k]);
        FILE *f = fopen(p, "w");
        if (!f) {
            fprintf_text(stderr, "%s: cannot write '%s': %s\n", PROG, p, strerror(errno));
            return EXIT_IO;
        }
        if (k)
            report_json(f, rs, nr, v);
        else
            report_md(f, rs, nr, v);
        if (ferror(f) | fclose(f)) {
            fprintf_text(stderr, "%s: cannot write '%s'\n", PROG, p);
            return EXIT_IO;
        }
    }
    return 0;
}

/* Run and analyse one round into DIR/round-K (or DIR/NAME). 0 or an exit status. */
static int do_round(tune_round *r, const char *out, int k, const char *name, const char *precisions,
                    double lr, const char *jobs, char **pass, int npass)
{
    r->lr = lr;
    if (name)
        snprintf(r->dir, sizeof r->dir, "%s/%s", out, name);
    else
        snprintf(r->dir, sizeof r->dir, "%s/round-%d", out, k);
    fprintf_text(stderr, "%s: %s %d (%s) at lr %g -> %s\n", PROG, name ? name : "round", k, precisions, lr,
                 r->dir);
    if (mkdir(r->dir, 0777) != 0 && errno != EEXIST) {
        fprintf_text(stderr, "%s: cannot create '%s': %s\n", PROG, r->dir, strerror(errno));
        return EXIT_IO;
    }
    int st = run_sweep(r->dir, precisions, lr, jobs, pass, npass);
    if (st != 0 && st != EXIT_FAIL_ON) {
        fprintf_text(stderr, "%s: the sweep of round %d failed (exit %d; see %s/sweep.txt and the run logs "
                     "there)\n", PROG, k, st, r->dir);
        return st;
    }
    return round_analyse(r);
}

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

int cmd_tune(int argc, char **argv)
{
    cli_opt table[CLI_MAX_OPTS + 1];
    if (cli_with_run_options(table, own_options, tune_id_of))
        return EXIT_USAGE;
    const char *out = NULL, *precisions = "fp32,fp16,bf16", *jobs = "1";
    double lr = NAN, rounds = 3, jv;
    char **pass = calloc((size_t)argc * 2 + 1, sizeof *pass);
    int npass = 0;
    if (!pass)
        return EXIT_IO;
    cli_parser p;
    int rc = cli_parser_init(&p, "tune", table, argc, argv, 0) ? EXIT_USAGE : 0;
    for (int id; !rc && (id = cli_next(&p)) != CLI_DONE;) {
        switch (id) {
        case T_OUT: out = p.arg; break;
        case T_PRECISIONS: precisions = p.arg; break;
        case T_LR: rc = parse_num("--lr", p.arg, 1e-12, 1e6, &lr) ? EXIT_USAGE : 0; break;
        case T_ROUNDS: rc = parse_num("--rounds", p.arg, 1, TUNE_MAX_ROUNDS, &rounds) ? EXIT_USAGE : 0; break;
        case T_JOBS: rc = parse_num("--jobs", p.arg, 1, 64, &jv) ? EXIT_USAGE : 0; jobs = p.arg; break;
        case T_HELP: usage(stdout); free(pass); return 0;
        case T_REFUSE:
            fprintf_text(stderr, "%s: --precision is set by tune (use --precisions)\n", PROG);
            rc = EXIT_USAGE;
            break;
        case T_PASS:
            pass[npass++] = (char *)p.opt->name;
            if (p.arg)
                pass[npass++] = (char *)p.arg;
            break;
        case CLI_POS:
            fprintf_text(stderr, "%s: unexpected argument '%s' (see ampdiag tune --help)\n", PROG, p.arg);
            rc = EXIT_USAGE;
            break;
        default: rc = EXIT_USAGE; break;
        }
    }
    if (!rc && !out) {
        fprintf_text(stderr, "%s: no output directory (-o DIR)\n", PROG);
        rc = EXIT_USAGE;
    }
    char msg[600];
    int mrc = rc ? 0 : path_make_dir(out, msg, sizeof msg);
    if (mrc) {
        fprintf_text(stderr, "%s: -o: %s\n", PROG, msg);
        rc = mrc == 2 ? EXIT_USAGE : EXIT_IO;
    }
    tune_round rs[TUNE_MAX_ROUNDS];
    memset(rs, 0, sizeof rs);
    int nr = 0;
    while (!rc && nr < (int)rounds) {
        tune_round *r = &rs[nr];
        if ((rc = do_round(r, out, nr + 1, NULL, precisions, lr, jobs, pass, npass)))
            break;
        nr++;
        int moves = (r->R.lr == LR_LOWER || r->R.lr == LR_RAISE) && isfinite(r->R.lr_suggested) &&
                    r->R.lr_suggested > 0;
        if (!moves)
            break;
        lr = r->R.lr_suggested;
    }
    /* a recommended precision that was predicted, not run: run it beside FP32 to verify it */
    size_t ri;
    int adv = nr - 1; /* the round whose recommendation is verified */
    if (!rc && nr > 0 && nr < TUNE_MAX_ROUNDS && rs[nr - 1].R.precision != REC_UNDECIDED &&
        !run_of(&rs[nr - 1], rs[nr - 1].R.precision, &ri)) {
        char verify_prec[64];
        snprintf(verify_prec, sizeof verify_prec, "fp32,%s", rec_precision_name(rs[nr - 1].R.precision));
        if (!(rc = do_round(&rs[nr], out, nr + 1, "verify", verify_prec, rs[nr - 1].lr, jobs, pass, npass)))
            nr++;
    }
    if (!rc && nr > 0) {
        verdict v;
        verify(&rs[0], &rs[adv], &rs[nr - 1], &v);
        report_text(stdout, rs, nr, &v);
        rc = write_reports(out, rs, nr, &v);
        if (!rc && !v.verified)
            rc = EXIT_FAIL_ON;
    }
    for (int k = 0; k < nr; k++)
        round_free(&rs[k]);
    free(pass);
    if (fflush(stdout) != 0 && !rc)
        rc = EXIT_IO;
    return rc;
}
