/*
 * cmd_tune.c - `ampdiag tune`: the closed loop. A recommendation is only as good as the run that
 * follows it, so tune runs the baseline and the candidate precisions (`ampdiag sweep` into
 * DIR/round-K), compares them (the rules of `ampdiag compare`), and, while the advice changes the
 * learning rate or names a remedy for every run (--optim-state fp32), runs the next round with
 * them; at most --rounds rounds. The recommended configuration (its precision and the remedies
 * for its run: --fp32-layers, --loss-scale dynamic --scale-init S) is run beside FP32 in
 * DIR/verify when the last round did not run it as it is; that run verifies the advice: it
 * must be healthy against the FP32 run of its round (status complete, no NaN/inf in its loss,
 * forward pass or evaluation, skips within the limit, eval loss within the noise band) and must
 * not be worse than the first baseline beyond that band. The report (stdout as text,
 * DIR/tune.md, DIR/tune.json) gives each round's evidence and the remedies applied, and says
 * whether the recommendation was verified.
 */
#include "analysis/compare.h"
#include "analysis/findings.h"
#include "analysis/load.h"
#include "analysis/recommend.h"
#include "messages/messages.h"
#include "cli/cli.h"
#include "cli/launch.h"
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
            "                    [--target T] [--launcher local|slurm] [run options]\n"
            "\n"
            "The closed loop: run the precisions at the lr (ampdiag sweep into DIR/round-1),\n"
            "compare them, and while the advice changes the lr or names an option for every run\n"
            "(--optim-state fp32), run the next round with it (at most --rounds rounds). The\n"
            "recommended configuration, with the options the advice names for its run\n"
            "(--fp32-layers, --loss-scale dynamic --scale-init S), is run beside FP32 in\n"
            "DIR/verify unless the last round ran it as it is. Its run verifies the advice:\n"
            "healthy against the FP32 run of its round (complete, no NaN/inf in loss, forward\n"
            "pass or evaluation, skips within 1 in 500 after calibration, eval loss within the\n"
            "noise band) and not worse than the first FP32 run beyond the band. The report goes\n"
            "to stdout, DIR/tune.md and DIR/tune.json; each round's runs and sweep reports stay\n"
            "in DIR/round-K/ (DIR/verify/).\n"
            "\n"
            "options:\n"
            "  -o, --out DIR       output directory (created if missing)\n"
            "  --precisions LIST   as ampdiag sweep (default fp32,fp16,bf16; fp32 is the baseline)\n"
            "  --lr X              the first round's learning rate (default: the runs' own, from\n"
            "                      --scenario or ampdiag run's default 1e-3)\n"
            "  --rounds N          at most N rounds (default 3, at most 10)\n"
            "  -j, --jobs N        runs at once in a round (default 1; slurm: no limit)\n"
            "  --launcher L        local (default) or slurm: each round's runs as one Slurm job\n"
            "                      array, DIR on a file system the nodes share (ampdiag sweep\n"
            "                      --help, docs/cluster.md)\n"
            "  --target T          hardware the advice is for (as ampdiag compare; default any)\n"
            "  -h, --help\n"
            "Every option of `ampdiag run` goes to each run (--model, --data, -s/--steps,\n"
            "--optimizer, --scenario, ...), except --precision, --out and --lr, which tune sets.\n"
            "\n"
            "exit status: 0 the recommendation was verified, 1 it was not (the report says why),\n"
            "2 bad usage or a run refused its options, 3 I/O failure, 130 (143) stopped by SIGINT\n"
            "(SIGTERM)\n");
}

enum { T_OUT = 1, T_PRECISIONS, T_LR, T_ROUNDS, T_JOBS, T_TARGET, T_HELP, T_REFUSE, T_PASS, T_LAUNCHER };

static const cli_opt own_options[] = {
    {"--out", 'o', CLI_ARG, T_OUT}, {"--precisions", 0, CLI_ARG, T_PRECISIONS},
    {"--lr", 0, CLI_ARG, T_LR}, {"--rounds", 0, CLI_ARG, T_ROUNDS}, {"--jobs", 'j', CLI_ARG, T_JOBS},
    {"--target", 0, CLI_ARG, T_TARGET}, {"--help", 'h', CLI_NOARG, T_HELP}, {"--launcher", 0, CLI_ARG, T_LAUNCHER},
    CLI_OPT_END};

/* run's options: --precision refused, the rest passed on to the sweeps. */
static int tune_id_of(const char *name)
{
    return strcmp(name, "--precision") == 0 || strcmp(name, "--dry-run") == 0 ? T_REFUSE : T_PASS;
}

/* Remedies (the decisions of recommend.h that are run options) as tune applies them: those for
 * every run stay in force from the round whose advice named them on; those for the recommended
 * precision's run go to its run in the verification round. */
#define TUNE_MAX_REMEDIES 8

typedef struct tune_remedy {
    rec_scope scope;
    char option[32];
    char value[256];
    char why[512];
} tune_remedy;

typedef struct remedy_set {
    tune_remedy m[TUNE_MAX_REMEDIES];
    size_t n;
} remedy_set;

static int set_has(const remedy_set *s, const char *option)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->m[i].option, option) == 0)
            return 1;
    return 0;
}

/* "--optim-state fp32 --fp32-layers fc1" (or "" when both sets are empty). */
static void set_text(char *buf, size_t n, const remedy_set *a, const remedy_set *b)
{
    buf[0] = 0;
    const remedy_set *sets[2] = {a, b};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; sets[k] && i < sets[k]->n; i++) {
            size_t len = strlen(buf);
            snprintf(buf + len, n - len, "%s%s %s", len ? " " : "", sets[k]->m[i].option, sets[k]->m[i].value);
        }
}

/* What every round shares: the output directory, -j, the target, the run options passed on. */
typedef struct tune_cfg {
    const char *out, *precisions, *jobs; /* jobs: NULL = the sweep's default */
    const char *launcher;                /* --launcher, passed to the sweeps (NULL: local) */
    rec_target target;
    char **pass;
    int npass;
} tune_cfg;

/* One round: the lr it ran at, the remedies its runs got, its runs and what compare
 * concluded. */
typedef struct tune_round {
    double lr;
    char dir[4096];
    remedy_set every;       /* remedies all its runs got */
    remedy_set own;         /* remedies only the run of own_prec got (the verification) */
    char own_prec[16];
    an_run *runs;
    size_t n;
    size_t base;            /* the FP32 run (compare's baseline) */
    an_comparison c;
    recommendation R;
    int have;               /* runs loaded and the rules applied */
} tune_round;

/* What the message table may name in a round's words: its runs, its baseline, its advice. */
static msg_ctx round_ctx(const tune_round *r)
{
    msg_ctx m = {.runs = r->runs, .nruns = r->n, .baseline = (long)r->base, .R = &r->R};
    return m;
}

/* The remedies of round r of this scope whose option *have does not hold yet, added to *to (when
 * it does not hold them either). Returns how many were new. */
static size_t take_new(const tune_round *r, rec_scope scope, const remedy_set *have, remedy_set *to)
{
    const rec_decision *d[TUNE_MAX_REMEDIES];
    size_t n = rec_remedies(&r->R, d, TUNE_MAX_REMEDIES), added = 0;
    msg_ctx m = round_ctx(r);
    for (size_t i = 0; i < n; i++) {
        if (d[i]->scope != scope || set_has(have, d[i]->option) || set_has(to, d[i]->option) ||
            to->n >= TUNE_MAX_REMEDIES)
            continue;
        tune_remedy *t = &to->m[to->n++];
        t->scope = d[i]->scope;
        snprintf(t->option, sizeof t->option, "%s", d[i]->option);
        snprintf(t->value, sizeof t->value, "%s", d[i]->option_value);
        msg_decision_why(t->why, sizeof t->why, &m, d[i]);
        added++;
    }
    return added;
}

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

/* Run `ampdiag sweep` of precisions into the round's directory, with the remedies of sets a and
 * b after the options passed on (so they override them); its report goes to DIR/sweep.txt
 * (DIR/sweep-TAG.txt). Returns the sweep's exit status (0, 1: a --fail-on condition, which tune
 * does not ask for), or EXIT_IO. */
static int run_sweep(const tune_cfg *t, const tune_round *r, const char *tag, const char *precisions,
                     const remedy_set *a, const remedy_set *b)
{
    char lrs[64], out[4200];
    snprintf(lrs, sizeof lrs, "%.6g", r->lr);
    snprintf(out, sizeof out, "%s/sweep%s%s.txt", r->dir, tag ? "-" : "", tag ? tag : "");
    size_t nrem = 2 * (a->n + (b ? b->n : 0));
    char **argv = calloc((size_t)t->npass + nrem + 16, sizeof *argv);
    if (!argv)
        return EXIT_IO;
    int k = 1;
    argv[k++] = "sweep";
    argv[k++] = "--precisions";
    argv[k++] = (char *)precisions;
    if (isfinite(r->lr)) { /* else the runs' own lr (given, a scenario's, or the default) */
        argv[k++] = "--lrs";
        argv[k++] = lrs;
    }
    argv[k++] = "-o";
    argv[k++] = (char *)r->dir;
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
    const remedy_set *sets[2] = {a, b};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; sets[s] && i < sets[s]->n; i++) {
            argv[k++] = (char *)sets[s]->m[i].option;
            argv[k++] = (char *)sets[s]->m[i].value;
        }
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
static int round_analyse(tune_round *r, rec_target target)
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
    an_options ao = {.warmup = -1, .quiet = 1, .keep_points = 0};
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
        if (r->runs[i].prec == PREC_FP32) {
            r->base = i;
            break;
        }
    if (an_compare(r->runs, r->n, r->base, &r->c) ||
        recommend(r->runs, r->n, &r->c, target, 0, &r->R))
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
    char why[2048];      /* what held or failed */
    const char *path;    /* the run verified (NULL when none) */
    double eval, base_eval, first_eval, band;
} verdict;

/* Why run r (index i of round last) is not healthy, or "" when it is: the analysis's own health
 * verdict (an_run_unhealthy: complete, no NaN/inf in its loss, forward pass or evaluation,
 * skips within the limit), then its eval loss against the FP32 run's of its round (its
 * F_CMP_GAP finding: outside the noise band) and against the first baseline's (first_eval). */
static void unhealthy(char *buf, size_t n, const tune_round *last, size_t i, double eval, double first_eval)
{
    msg_ctx m = round_ctx(last);
    const an_run *r = &last->runs[i];
    const an_finding *f = an_run_unhealthy(r);
    const an_finding *g = an_finding_find(&last->c.list, F_CMP_GAP, (int)i);
    buf[0] = 0;
    if (f)
        msg_finding(buf, n, &m, f);
    else if (i != last->base && g && g->v[an_finding_fig(F_CMP_GAP, "outside")] > 0)
        snprintf(buf, n, "its eval loss is worse than the FP32 run's beyond the noise band");
    else if (isfinite(first_eval) && !(eval <= first_eval * (1 + last->c.band)))
        snprintf(buf, n, "its eval loss is worse than the first baseline's beyond the noise band");
}

static double last_eval(const an_run *r) { return r->find->last_eval ? r->find->last_eval->loss : NAN; }

/* Verify the recommendation of round adv with the runs of round last (the same round, or the
 * verification round that ran the recommended configuration beside FP32). */
static void verify(const tune_round *first, const tune_round *adv, const tune_round *last, verdict *v)
{
    memset(v, 0, sizeof *v);
    v->eval = v->base_eval = v->first_eval = NAN;
    v->band = last->c.band;
    size_t i;
    const an_run *r = run_of(last, adv->R.precision, &i);
    if (adv->R.precision == REC_UNDECIDED || !r) {
        char vt[1500];
        msg_ctx m = round_ctx(adv);
        msg_verdict(vt, sizeof vt, &m);
        snprintf(v->why, sizeof v->why, "no configuration to verify: %s", vt);
        return;
    }
    v->path = r->path;
    v->eval = last_eval(r);
    v->base_eval = last_eval(&last->runs[last->base]);
    v->first_eval = last_eval(&first->runs[first->base]);
    char bad[600], e[32], be[32], fe[32], with[700] = "";
    unhealthy(bad, sizeof bad, last, i, v->eval, v->first_eval);
    fmt_num(e, sizeof e, v->eval, 4);
    fmt_num(be, sizeof be, v->base_eval, 4);
    fmt_num(fe, sizeof fe, v->first_eval, 4);
    set_text(with, sizeof with, &last->every, strcmp(last->own_prec, r->precision) == 0 ? &last->own : NULL);
    v->verified = bad[0] == 0;
    snprintf(v->why, sizeof v->why, "%s at lr %g%s%s (%s): %s; eval loss %s vs fp32 %s at that lr and "
             "%s at the first lr, noise band +-%.3g%%", rec_precision_name(adv->R.precision), last->lr,
             with[0] ? " with " : "", with, r->path,
             bad[0] ? bad : "complete, no NaN/inf, skips within the limit, eval loss within the noise band",
             e, be, fe, 100 * last->c.band);
}

/* What a round's runs got beyond the options passed on: "--optim-state fp32 (every run);
 * --fp32-layers fc1 (fp16 run)", or "". */
static void applied_text(char *buf, size_t n, const tune_round *r)
{
    char a[600], b[600];
    set_text(a, sizeof a, &r->every, NULL);
    set_text(b, sizeof b, &r->own, NULL);
    snprintf(buf, n, "%s%s%s%s%s%s%s", a, a[0] ? " (every run)" : "", a[0] && b[0] ? "; " : "", b,
             b[0] ? " (" : "", b[0] ? r->own_prec : "", b[0] ? " run)" : "");
}

static void report_text(FILE *f, const tune_round *rs, int nr, const verdict *v)
{
    char ap[1300], line[2000];
    for (int k = 0; k < nr; k++) {
        const tune_round *r = &rs[k];
        msg_ctx m = round_ctx(r);
        fprintf_text(f, "round %d: lr %g (%s)\n", k + 1, r->lr, r->dir);
        applied_text(ap, sizeof ap, r);
        if (ap[0])
            fprintf_text(f, "  applied  %s\n", ap);
        msg_verdict(line, sizeof line, &m);
        fprintf_text(f, "  verdict  %s\n", line);
        const rec_decision *d[TUNE_MAX_REMEDIES];
        size_t nd = rec_remedies(&r->R, d, TUNE_MAX_REMEDIES);
        for (size_t i = 0; i < nd; i++) {
            msg_remedy(line, sizeof line, &m, d[i]);
            fprintf_text(f, "  remedy   %s\n", line);
        }
        msg_section(line, sizeof line, &m, SEC_LR_LINE, " ");
        fprintf_text(f, "  lr       %s\n", line);
        for (size_t i = 0; i < r->R.items.n; i++)
            if (r->R.items.v[i].sec == SEC_LR) {
                msg_item(line, sizeof line, &m, &r->R.items.v[i]);
                fprintf_text(f, "           %s\n", line);
            }
    }
    fprintf_text(f, "%s: %s\n", v->verified ? "Verified" : "NOT verified", v->why);
}

static void report_md(FILE *f, const tune_round *rs, int nr, const verdict *v)
{
    char ap[1300], line[2000];
    fprintf(f, "# ampdiag tune\n\n**%s**: ", v->verified ? "Verified" : "Not verified");
    str_fputs(v->why, SINK_MD, f);
    fprintf(f, "\n\n| round | lr | applied | verdict | lr advice |\n|---|---|---|---|---|\n");
    for (int k = 0; k < nr; k++) {
        applied_text(ap, sizeof ap, &rs[k]);
        fprintf(f, "| %d | %g | ", k + 1, rs[k].lr);
        str_fputs(ap[0] ? ap : "-", SINK_MD, f);
        fputs(" | ", f);
        msg_ctx m = round_ctx(&rs[k]);
        msg_verdict(line, sizeof line, &m);
        str_fputs(line, SINK_MD, f);
        fputs(" | ", f);
        msg_section(line, sizeof line, &m, SEC_LR_LINE, " ");
        str_fputs(line, SINK_MD, f);
        fputs(" |\n", f);
    }
}

/* The remedies of set s as JSON objects {option, value, runs} ("every" or the precision). */
static void json_applied(jw *w, const remedy_set *s, const char *runs)
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

/* One round: its lr, directory, the remedies applied, its runs with their command lines, and
 * what compare advised. */
static void json_round(jw *w, const tune_round *r)
{
    jw_open(w, NULL, '{');
    jw_num(w, "lr", r->lr);
    jw_str(w, "dir", r->dir);
    jw_open(w, "applied", '[');
    json_applied(w, &r->every, "every");
    json_applied(w, &r->own, r->own_prec);
    jw_close(w, ']');
    jw_open(w, "runs", '[');
    for (size_t i = 0; i < r->n; i++) {
        jw_open(w, NULL, '{');
        jw_str(w, "precision", r->runs[i].precision);
        jw_str(w, "path", r->runs[i].path);
        jw_str(w, "command_line", r->runs[i].command_line);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    msg_ctx m = round_ctx(r);
    char line[2000];
    jw_str(w, "precision", rec_precision_name(r->R.precision));
    msg_verdict(line, sizeof line, &m);
    jw_str(w, "verdict", line);
    jw_open(w, "remedies", '[');
    const rec_decision *d[TUNE_MAX_REMEDIES];
    size_t nd = rec_remedies(&r->R, d, TUNE_MAX_REMEDIES);
    for (size_t i = 0; i < nd; i++) {
        jw_open(w, NULL, '{');
        jw_str(w, "option", d[i]->option);
        jw_str(w, "value", d[i]->option_value);
        jw_str(w, "scope", rec_scope_name(d[i]->scope));
        msg_decision_why(line, sizeof line, &m, d[i]);
        jw_str(w, "why", line);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_str(w, "lr_advice", rec_lr_name(r->R.lr));
    jw_num(w, "lr_suggested", r->R.lr_suggested);
    msg_section(line, sizeof line, &m, SEC_LR_LINE, " ");
    jw_str(w, "lr_text", line);
    jw_close(w, '}');
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
    jw_str(&w, "run", v->path);
    jw_num(&w, "eval_loss", v->eval);
    jw_num(&w, "fp32_eval_loss", v->base_eval);
    jw_num(&w, "first_fp32_eval_loss", v->first_eval);
    jw_num(&w, "noise_band", v->band);
    jw_open(&w, "remedies_applied", '[');
    if (nr > 0) {
        json_applied(&w, &rs[nr - 1].every, "every");
        json_applied(&w, &rs[nr - 1].own, rs[nr - 1].own_prec);
    }
    jw_close(&w, ']');
    jw_open(&w, "rounds", '[');
    for (int k = 0; k < nr; k++)
        json_round(&w, &rs[k]);
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
static int write_reports(const char *dir, const tune_round *rs, int nr, const verdict *v)
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

/* Run and analyse one round into DIR/round-K (or DIR/NAME): the precisions with the every-run
 * remedies (r->every); with remedies for one precision's run (r->own), that precision runs in
 * a second sweep that adds them. r->lr, r->every, r->own and r->own_prec are set by the caller.
 * 0 or an exit status. */
static int do_round(const tune_cfg *t, tune_round *r, int k, const char *name, const char *precisions)
{
    if (name)
        snprintf(r->dir, sizeof r->dir, "%s/%s", t->out, name);
    else
        snprintf(r->dir, sizeof r->dir, "%s/round-%d", t->out, k);
    char ap[1300];
    applied_text(ap, sizeof ap, r);
    fprintf_text(stderr, "%s: %s %d (%s%s%s) at lr %g%s%s -> %s\n", PROG, name ? name : "round", k, precisions,
                 r->own.n ? "," : "", r->own.n ? r->own_prec : "", r->lr, ap[0] ? " with " : "", ap, r->dir);
    if (mkdir(r->dir, 0777) != 0 && errno != EEXIST) {
        fprintf_text(stderr, "%s: cannot create '%s': %s\n", PROG, r->dir, strerror(errno));
        return EXIT_IO;
    }
    int st = run_sweep(t, r, r->own.n ? precisions : NULL, precisions, &r->every, NULL);
    if ((st == 0 || st == EXIT_FAIL_ON) && r->own.n)
        st = run_sweep(t, r, r->own_prec, r->own_prec, &r->every, &r->own);
    if (st != 0 && st != EXIT_FAIL_ON) {
        fprintf_text(stderr, "%s: the sweep of round %d failed (exit %d; see %s/sweep*.txt and the run logs "
                     "there)\n", PROG, k, st, r->dir);
        return st;
    }
    return round_analyse(r, t->target);
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

/* The rounds: each runs at the lr and with the every-run remedies in force; the next one follows
 * while the advice moves the lr or names a new every-run remedy (at most rounds). Returns 0 or
 * an exit status; *nr the rounds run. */
static int tune_rounds(const tune_cfg *t, tune_round *rs, int rounds, double lr, int *nr)
{
    remedy_set every = {.n = 0};
    int rc = 0;
    while (!rc && *nr < rounds) {
        tune_round *r = &rs[*nr];
        r->lr = lr;
        r->every = every;
        if ((rc = do_round(t, r, *nr + 1, NULL, t->precisions)))
            break;
        (*nr)++;
        int moves = (r->R.lr == LR_LOWER || r->R.lr == LR_RAISE) && isfinite(r->R.lr_suggested) &&
                    r->R.lr_suggested > 0;
        size_t added = take_new(r, REM_EVERY_RUN, &every, &every);
        if (!moves && !added)
            break;
        if (moves)
            lr = r->R.lr_suggested;
        else
            lr = r->lr; /* the same lr, as the runs recorded it */
    }
    return rc;
}

/* The recommended configuration of the last round, when that round did not run it as it is (a
 * predicted precision, or remedies for its run): run it beside FP32 into DIR/verify. 0 or an
 * exit status; *nr counts the round. */
static int tune_verify_round(const tune_cfg *t, tune_round *rs, int *nr)
{
    const tune_round *last = &rs[*nr - 1];
    rec_precision p = last->R.precision;
    size_t ri;
    if (p == REC_UNDECIDED || *nr >= TUNE_MAX_ROUNDS)
        return 0;
    tune_round *v = &rs[*nr];
    v->lr = last->lr;
    v->every = last->every;
    take_new(last, REM_RECOMMENDED, &v->every, &v->own);
    if (run_of(last, p, &ri) && v->own.n == 0)
        return 0;
    snprintf(v->own_prec, sizeof v->own_prec, "%s", rec_precision_name(p));
    char prec[64];
    snprintf(prec, sizeof prec, v->own.n ? "fp32" : "fp32,%s", rec_precision_name(p));
    int rc = do_round(t, v, *nr + 1, "verify", prec);
    if (!rc)
        (*nr)++;
    return rc;
}

int cmd_tune(int argc, char **argv)
{
    cli_opt table[CLI_MAX_OPTS + 1];
    if (cli_with_run_options(table, own_options, tune_id_of))
        return EXIT_USAGE;
    tune_cfg t = {.out = NULL, .precisions = "fp32,fp16,bf16", .jobs = NULL, .target = TGT_ANY};
    double lr = NAN, rounds = 3, jv;
    t.pass = calloc((size_t)argc * 2 + 1, sizeof *t.pass);
    if (!t.pass)
        return EXIT_IO;
    cli_parser p;
    int rc = cli_parser_init(&p, "tune", table, argc, argv, 0) ? EXIT_USAGE : 0;
    for (int id; !rc && (id = cli_next(&p)) != CLI_DONE;) {
        switch (id) {
        case T_OUT: t.out = p.arg; break;
        case T_PRECISIONS: t.precisions = p.arg; break;
        case T_LR: rc = parse_num("--lr", p.arg, 1e-12, 1e6, &lr) ? EXIT_USAGE : 0; break;
        case T_ROUNDS: rc = parse_num("--rounds", p.arg, 1, TUNE_MAX_ROUNDS, &rounds) ? EXIT_USAGE : 0; break;
        case T_JOBS: rc = parse_num("--jobs", p.arg, 1, 64, &jv) ? EXIT_USAGE : 0; t.jobs = p.arg; break;
        case T_TARGET:
            if (rec_target_parse(p.arg, &t.target) != 0) {
                fprintf_text(stderr, "%s: --target '%s': expected any, sm70, sm75, sm80, sm89, sm90 or cpu\n",
                             PROG, p.arg);
                rc = EXIT_USAGE;
            }
            break;
        case T_HELP: usage(stdout); free(t.pass); return 0;
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
            rc = cli_check_passed_option(PROG, p.opt, p.arg);
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
    tune_round *rs = calloc(TUNE_MAX_ROUNDS, sizeof *rs);
    int nr = 0;
    if (!rs && !rc)
        rc = EXIT_IO;
    if (!rc)
        rc = tune_rounds(&t, rs, (int)rounds, lr, &nr);
    int adv = nr - 1; /* the round whose recommendation is verified */
    if (!rc && nr > 0)
        rc = tune_verify_round(&t, rs, &nr);
    if (!rc && nr > 0) {
        verdict v;
        verify(&rs[0], &rs[adv], &rs[nr - 1], &v);
        report_text(stdout, rs, nr, &v);
        rc = write_reports(t.out, rs, nr, &v);
        if (!rc && !v.verified)
            rc = EXIT_FAIL_ON;
    }
    for (int k = 0; k < nr; k++)
        round_free(&rs[k]);
    free(rs);
    free(t.pass);
    if (fflush(stdout) != 0 && !rc)
        rc = EXIT_IO;
    return rc;
}
