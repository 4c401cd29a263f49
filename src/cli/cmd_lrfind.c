/*
 * cmd_lrfind.c - `ampdiag lrfind`: the learning-rate range test (Smith 2015, as fastai's and
 * PyTorch Lightning's lr_find run it), in the instrumented loop: one run whose lr grows
 * exponentially from --lr-min to --lr-max (ampdiag run --schedule range:MIN), then, from the
 * trace's steps, the loss smoothed as those tools smooth it (EMA 0.98, debiased) up to where
 * it diverges (4x its minimum), and the suggestions their users know: "valley" (fastai's
 * default: two thirds down the longest descent), "steepest" (the most negative slope against
 * log lr) and "minimum / 10". The evidence a single run at one lr cannot give.
 */
#include "analysis/load.h"
#include "analysis/lrfind.h"
#include "cli/cli.h"
#include "util/escape.h"
#include "util/json.h"
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define PROG "ampdiag lrfind"
#define LRFIND_JSON_VERSION 1

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag lrfind [-o TRACE] [--lr-min X] [--lr-max X] [-s N] [--format text|json]\n"
            "                      [run options]\n"
            "\n"
            "The learning-rate range test: one run whose lr grows exponentially from --lr-min to\n"
            "--lr-max over the steps (ampdiag run --schedule range:MIN --lr MAX, traced into\n"
            "TRACE), then the suggestions fastai and PyTorch Lightning users know, from the\n"
            "training loss smoothed as they smooth it (EMA 0.98, debiased) up to where it exceeds\n"
            "4x its minimum:\n"
            "  valley    two thirds down the longest stretch where the loss keeps falling (fastai's\n"
            "            default suggestion)\n"
            "  steepest  where the loss falls fastest against log lr\n"
            "  minimum   a tenth of the lr of the lowest loss\n"
            "\n"
            "options:\n"
            "  -o, --out TRACE     trace to write (default lrfind.h5; --overwrite replaces it)\n"
            "  --lr-min X          the first step's lr (default 1e-7)\n"
            "  --lr-max X          the last step's lr (default 10)\n"
            "  -s, --steps N       steps of the test (default 100)\n"
            "  --format F          text (default) or json\n"
            "  -h, --help\n"
            "Every other option of `ampdiag run` goes to the run (--model, --data, --precision,\n"
            "--optimizer, --batch, ...); --lr and --schedule are set by lrfind. With --dry-run,\n"
            "lrfind prints the run's command and the run checks it, running nothing.\n"
            "\n"
            "exit status: 0 suggestions made, 1 the loss never fell (no suggestion), 2 bad usage or\n"
            "input, 3 I/O failure\n");
}

enum { L_OUT = 1, L_MIN, L_MAX, L_STEPS, L_FORMAT, L_HELP, L_REFUSE, L_PASS };

static const cli_opt own_options[] = {
    {"--out", 'o', CLI_ARG, L_OUT}, {"--lr-min", 0, CLI_ARG, L_MIN}, {"--lr-max", 0, CLI_ARG, L_MAX},
    {"--steps", 's', CLI_ARG, L_STEPS}, {"--format", 0, CLI_ARG, L_FORMAT},
    {"--help", 'h', CLI_NOARG, L_HELP}, CLI_OPT_END};

/* run's options: --lr and --schedule set by lrfind, the rest passed on. */
static int lrfind_id_of(const char *name)
{
    return strcmp(name, "--lr") == 0 || strcmp(name, "--schedule") == 0 ? L_REFUSE : L_PASS;
}


static int parse_pos(const char *what, const char *s, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end || errno || !(x > 0) || !isfinite(x)) {
        fprintf_text(stderr, "%s: %s: expected a positive number, got '%s'\n", PROG, what, s);
        return -1;
    }
    *v = x;
    return 0;
}

/* -s/--steps N: an integer of at least 10 (the smoothing needs some points). 0 or EXIT_USAGE
 * after a message. */
static int parse_steps(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < 10 || v > 100000000) {
        fprintf_text(stderr, "%s: --steps '%s': expected an integer in [10, 100000000] (the test "
                     "needs at least 10 steps)\n", PROG, s);
        return EXIT_USAGE;
    }
    return 0;
}

/* What the run passed on would write, checked here (so that the messages name lrfind): the trace
 * and --save-weights. 0, or the exit status after a message. */
static int check_outputs(const char *out, const char *save, int overwrite)
{
    int rc = cli_check_output(PROG, "-o", out, overwrite);
    if (!rc && save)
        rc = cli_check_output(PROG, "--save-weights", save, overwrite);
    return rc;
}

static void print_text(const char *path, const an_run *r, const lr_suggest *s, double lo, double hi)
{
    char a[32];
    fprintf_text(stdout, "LR range test: %zu steps, lr %g -> %g (%s, %s)\n", r->nsteps, lo, hi, path,
                 r->precision);
    if (isfinite(s->diverged_at))
        printf("  the smoothed loss passed 4x its minimum (%s) at lr %.3g\n",
               fmt_num(a, sizeof a, s->min_loss, 4), s->diverged_at);
    printf("  valley    %-10.3g two thirds down the longest descent (fastai's default)\n", s->valley);
    printf("  steepest  %-10.3g steepest fall of the smoothed loss against log lr\n", s->steepest);
    printf("  minimum   %-10.3g a tenth of the lr of the lowest smoothed loss\n", s->minimum);
    if (isfinite(s->valley))
        printf("suggested: --lr %.3g (valley)\n", s->valley);
    else
        printf("no suggestion: the loss never fell over the range\n");
}

static void print_json(const char *path, const an_run *r, const lr_suggest *s, double lo, double hi)
{
    jw w;
    jw_begin(&w, stdout);
    jw_open(&w, NULL, '{');
    jw_str(&w, "format", "ampdiag-lrfind");
    jw_int(&w, "format_version", LRFIND_JSON_VERSION);
    jw_str(&w, "trace", path);
    jw_u64(&w, "steps", r->nsteps);
    jw_u64(&w, "points_used", s->n);
    jw_num(&w, "lr_min", lo);
    jw_num(&w, "lr_max", hi);
    jw_num(&w, "min_smoothed_loss", s->min_loss);
    jw_num(&w, "diverged_at_lr", s->diverged_at);
    jw_num(&w, "valley", s->valley);
    jw_num(&w, "steepest", s->steepest);
    jw_num(&w, "minimum", s->minimum);
    jw_num(&w, "suggested", s->valley);
    jw_close(&w, '}');
    jw_end(&w);
}

int cmd_lrfind(int argc, char **argv)
{
    cli_opt table[CLI_MAX_OPTS + 1];
    if (cli_with_run_options(table, own_options, lrfind_id_of))
        return EXIT_USAGE;
    const char *out = "lrfind.h5", *steps = "100", *format = "text", *save = NULL;
    double lo = 1e-7, hi = 10;
    int overwrite = 0, dry = 0;
    char **rargv = calloc((size_t)argc * 2 + 16, sizeof *rargv);
    if (!rargv)
        return EXIT_IO;
    int k = 1, rc = 0;
    rargv[k++] = "run";
    cli_parser p;
    if (cli_parser_init(&p, "lrfind", table, argc, argv, 0))
        rc = EXIT_USAGE;
    for (int id; !rc && (id = cli_next(&p)) != CLI_DONE;) {
        switch (id) {
        case L_OUT: out = p.arg; break;
        case L_MIN: rc = parse_pos("--lr-min", p.arg, &lo) ? EXIT_USAGE : 0; break;
        case L_MAX: rc = parse_pos("--lr-max", p.arg, &hi) ? EXIT_USAGE : 0; break;
        case L_STEPS: rc = parse_steps(p.arg); steps = p.arg; break;
        case L_FORMAT:
            format = p.arg;
            if (strcmp(format, "text") && strcmp(format, "json")) {
                fprintf_text(stderr, "%s: --format: expected text or json, got '%s'\n", PROG, format);
                rc = EXIT_USAGE;
            }
            break;
        case L_HELP: usage(stdout); free(rargv); return 0;
        case L_REFUSE:
            fprintf_text(stderr, "%s: %s is set by lrfind (use --lr-min and --lr-max)\n", PROG, p.opt->name);
            rc = EXIT_USAGE;
            break;
        case L_PASS:
            rc = cli_check_passed_option(PROG, p.opt, p.arg);
            overwrite |= strcmp(p.opt->name, "--overwrite") == 0;
            dry |= strcmp(p.opt->name, "--dry-run") == 0;
            if (strcmp(p.opt->name, "--save-weights") == 0)
                save = p.arg;
            rargv[k++] = (char *)p.opt->name;
            if (p.arg)
                rargv[k++] = (char *)p.arg;
            break;
        case CLI_POS:
            fprintf_text(stderr, "%s: unexpected argument '%s' (see ampdiag lrfind --help)\n", PROG, p.arg);
            rc = EXIT_USAGE;
            break;
        default: rc = EXIT_USAGE; break;
        }
    }
    if (!rc && !(lo < hi)) {
        fprintf_text(stderr, "%s: --lr-min %g must be below --lr-max %g\n", PROG, lo, hi);
        rc = EXIT_USAGE;
    }
    char sched[64], lrs[32];
    snprintf(sched, sizeof sched, "range:%.17g", lo);
    snprintf(lrs, sizeof lrs, "%.17g", hi);
    const char *extra[] = {"--schedule", sched, "--lr", lrs, "--steps", steps, "--eval-every", "0",
                           "--trace-every", "0", "--hist-every", "0", "-o", out};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        rargv[k++] = (char *)extra[i];
    rargv[k] = NULL;
    if (!rc)
        rc = check_outputs(out, save, overwrite);
    if (!rc && dry) { /* the run checks itself and says what it would do */
        rargv[0] = (char *)"ampdiag";
        for (int q = 0; q < k; q++)
            fprintf_text(stdout, "%s%s", q ? " " : "", rargv[q]);
        printf("\n");
        fflush(stdout);
        rc = cli_run_self(rargv, NULL, PROG);
        free(rargv);
        return rc;
    }
    if (!rc)
        rc = cli_run_self(rargv, "/dev/null", PROG); /* its summary dropped, its stderr kept */
    free(rargv);
    if (rc)
        return rc;
    an_run r;
    an_options ao = {.warmup = -1, .quiet = 1, .keep_points = 0, .no_rms_series = 1};
    char err[1024];
    if ((rc = an_load(out, &ao, &r, err, sizeof err)) != 0) {
        fprintf_text(stderr, "%s: %s\n", PROG, err);
        an_free(&r);
        return EXIT_IO;
    }
    double *lr = malloc((r.nsteps ? r.nsteps : 1) * sizeof *lr);
    double *loss = malloc((r.nsteps ? r.nsteps : 1) * sizeof *loss);
    size_t n = 0;
    for (size_t i = 0; lr && loss && i < r.nsteps; i++) {
        const an_step *st = &r.steps[i];
        if (st->skipped || !(st->lr > 0) || !isfinite(st->loss))
            continue;
        lr[n] = st->lr;
        loss[n++] = st->loss;
    }
    lr_suggest s;
    lr_suggest_from(lr, loss, n, &s);
    if (strcmp(format, "json") == 0)
        print_json(out, &r, &s, lo, hi);
    else
        print_text(out, &r, &s, lo, hi);
    rc = lr && loss ? (isfinite(s.valley) ? 0 : EXIT_FAIL_ON) : EXIT_IO;
    free(lr);
    free(loss);
    an_free(&r);
    if (fflush(stdout) != 0 && !rc)
        rc = EXIT_IO;
    return rc;
}
