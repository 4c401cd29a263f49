/*
 * cmd_compare.c - `ampdiag compare a.h5 b.h5 [...]`: read the traces, check that they are
 * comparable, match their layers by name, compare each with the baseline (the FP32 trace when
 * there is one), apply the recommendation rules and print the report (text, Markdown or JSON).
 * One trace alone works too: an FP32 trace then answers "what would FP16/BF16 do".
 */
#include "analysis/recipe.h"
#include "cli/compare.h"

#include "analysis/compare.h"
#include "analysis/findings.h"
#include "analysis/load.h"
#include "analysis/ranks.h"
#include "cli/cli.h"
#include "plot/plot.h"
#include "report/report.h"
#include "util/path.h"
#include "util/escape.h"
#include "util/wrap.h"
#include "messages/messages.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag compare TRACE.h5 [TRACE.h5 ...] [--baseline TRACE.h5]\n"
            "                       [--format text|md|json] [--plots DIR] [--target T]\n"
            "                       [--fail-on LIST] [--warmup N] [--what-if LIST] [--recipe NAME]\n"
            "                       [--alone]\n"
            "\n"
            "Compare runs of one model in different precisions (or learning rates, or seeds) and\n"
            "recommend a precision (fp32, fp16 + loss scaling with an initial scale, bf16, or a\n"
            "16-bit format with named FP32 layers), a learning rate and a clip value. Every\n"
            "recommendation prints the findings, numbers, steps and layers behind it; the rules and\n"
            "their sources are in docs/recommendations.md (ampdiag help rules), the terms in\n"
            "docs/glossary.md (ampdiag help terms). One FP32 trace alone already predicts what FP16\n"
            "and BF16 would do.\n"
            "\n"
            "The baseline is the first FP32 trace (else the first trace); layers are matched by\n"
            "name. Runs that differ in model, data, seed, steps or learning rate are compared with\n"
            "a note saying what the difference means.\n"
            "\n"
            "A distributed run's rank traces (one per rank, ampdiag.torch under torch.distributed)\n"
            "are one run: give a glob in quotes ('run.rank*.h5') or rank 0's trace (run.rank0.h5:\n"
            "the others beside it are read with it). Their records are merged into the run the\n"
            "ranks trained together, compared as any run, and the ranks' own findings come first\n"
            "(the first rank with NaN/inf, replicas or reduced gradients that differ, a rank's\n"
            "skips or early stop, missing ranks; docs/pytorch.md, 'Reading ranks together').\n");
    char def[800];
    msg_cfig_definition(def, sizeof def, MSG_NOISE_BAND);
    char para[1000];
    snprintf(para, sizeof para, "The %s: %s.", msg_cfig_name(MSG_NOISE_BAND), def);
    wrap_para(f, "", 0, para, 90);
    fprintf(f,
            "\n"
            "options:\n"
            "  --baseline TRACE    the run to compare against (one of the inputs, or an extra one)\n"
            "  --format F          text (default: verdict first, for a terminal), md (Markdown for a\n"
            "                      pull request), json (docs/compare-json.md, stable)\n"
            "  --plots DIR         link the charts DIR/<chart>.png in the Markdown (and list them in\n"
            "                      JSON); draw them with `ampdiag plot ... -o DIR`\n"
            "  --target T          hardware: sm70 | sm75 (no BF16) | sm80 | sm89 | sm90 | cpu\n"
            "                      (default: any GPU with BF16, i.e. sm80 or newer)\n"
            "  --fail-on LIST      exit 1 when a finding holds in any run (comma-separated): the id of\n"
            "                      a finding (ampdiag help rules lists them), or a group:\n"
            "                        nan         NaN/inf in the forward pass or the loss, NaN\n"
            "                                    gradients, non-finite weights or eval loss\n"
            "                        skips       skipped steps above the limit after the\n"
            "                                    calibration window, or a collapsed loss scale\n"
            "                        divergence  a run diverged\n"
            "                        overflow    activations or weights overflow the run's 16-bit\n"
            "                                    format (FP32 runs: would overflow FP16)\n"
            "                      all = every group\n"
            "  --warmup N          steps left out as scaler calibration and clip warm-up\n"
            "                      (default: min(100, steps / 5))\n"
            "  --what-if LIST      what-if sections beyond FP16 and BF16: fp8, all, or column names\n"
            "                      (e4m3, e5m2_delayed, ...); without it one line says which exist\n"
            "  --recipe NAME       a low-precision recipe the traces counted (mxfp8, mxfp8:rceil,\n"
            "                      nvfp4, fp8-block, fp8-current, fp8-delayed): per run the tensors it\n"
            "                      would hurt and why, and the per-layer plan (which layers can take it,\n"
            "                      which should stay BF16, ranked by the measured error), with the plan\n"
            "                      as a decision; without it one line says which recipes were counted\n"
            "  --alone             read a rank-0 trace by itself, not with the ranks beside it\n"
            "  -h, --help\n"
            "\n"
            "exit status: 0 success, 1 a --fail-on condition held, 2 bad usage, a file that is\n"
            "not a readable trace (named) or rank traces that are not one run, 3 I/O error\n");
}

void compare_opts_init(compare_opts *o)
{
    memset(o, 0, sizeof *o);
    o->format = CMP_TEXT;
    o->target = TGT_ANY;
    o->warmup = -1;
    o->recipe = -1;
    o->prog = "ampdiag compare";
}

int compare_format_parse(const char *s, compare_format *f)
{
    if (strcmp(s, "text") == 0)
        *f = CMP_TEXT;
    else if (strcmp(s, "md") == 0 || strcmp(s, "markdown") == 0)
        *f = CMP_MARKDOWN;
    else if (strcmp(s, "json") == 0)
        *f = CMP_JSON;
    else
        return -1;
    return 0;
}

static int render(FILE *f, compare_format fmt, const an_run *runs, size_t n, const an_comparison *c,
                  const recommendation *R, const report_opts *ro)
{
    switch (fmt) {
    case CMP_MARKDOWN: return report_markdown(f, runs, n, c, R, ro);
    case CMP_JSON: return report_json(f, runs, n, c, R, ro);
    default: return report_text(f, runs, n, c, R, ro);
    }
}

static int write_file(const char *prog, const char *path, compare_format fmt, const an_run *runs,
                      size_t n, const an_comparison *c, const recommendation *R, const report_opts *ro)
{
    char why[160];
    FILE *f = path_fopen_output(path, why, sizeof why);
    if (!f) {
        fprintf_text(stderr, "%s: cannot write '%s': %s\n", prog, path, why);
        return EXIT_IO;
    }
    int rc = render(f, fmt, runs, n, c, R, ro);
    if (fclose(f) != 0 || rc) {
        fprintf_text(stderr, "%s: cannot write '%s': %s\n", prog, path, strerror(errno));
        return EXIT_IO;
    }
    return 0;
}

/* One comparison's inputs as compare_files goes through them. */
typedef struct cmp_inputs {
    const char *prog;
    const char **args;           /* the arguments: the baseline first where it is not one of them */
    size_t nargs;
    an_inputs in;                /* what they name: one run each (a distributed run's ranks, one) */
    const char **all;            /* = in.names: the run's argument */
    an_run *runs;                /* = in.runs */
    size_t total;                /* = in.n */
    size_t bidx;                 /* the baseline's index; (size_t)-1 until known */
} cmp_inputs;

/* The arguments to read: the inputs, after the baseline where it is an extra trace. 0 or
 * EXIT_IO after a message; free_inputs frees them. */
static int list_inputs(cmp_inputs *in, const char *const *paths, size_t n, const compare_opts *o)
{
    int extra = o->baseline != NULL;
    for (size_t i = 0; i < n && extra; i++)
        extra = strcmp(paths[i], o->baseline) != 0;
    in->nargs = n + (size_t)extra;
    in->bidx = (size_t)-1;
    in->args = malloc((in->nargs ? in->nargs : 1) * sizeof *in->args);
    if (!in->args) {
        fprintf_text(stderr, "%s: out of memory\n", in->prog);
        return EXIT_IO;
    }
    size_t k = 0;
    if (extra)
        in->args[k++] = o->baseline;
    for (size_t i = 0; i < n; i++)
        in->args[k++] = paths[i];
    return 0;
}

/* Read every trace the arguments name (an_load_args: several at once, the ranks of a
 * distributed run as one run); the first that fails is reported (its message names the file).
 * 0, EXIT_USAGE (not a readable trace, or rank traces that are not one run) or EXIT_IO. */
static int load_inputs(cmp_inputs *in, const compare_opts *o)
{
    an_options ao = {.warmup = o->warmup, .quiet = 0, .keep_points = 0};
    char err[1024];
    int e = an_load_args(in->args, in->nargs, &ao, o->alone ? AN_ARGS_ALONE : 0, &in->in, err, sizeof err);
    for (size_t i = 0; i < in->in.nnotes; i++)
        fprintf_text(stderr, "%s: %s\n", in->prog, in->in.notes[i]);
    in->all = in->in.names;
    in->runs = in->in.runs;
    in->total = in->in.n;
    if (e) {
        fprintf_text(stderr, "%s: %s\n", in->prog, err);
        return ampdiag_trace_err_is_io(e) ? EXIT_IO : EXIT_USAGE;
    }
    /* --baseline: the run of that argument; else the first FP32 run, else the first */
    for (size_t k = 0; o->baseline && k < in->total; k++)
        if (strcmp(in->all[k], o->baseline) == 0)
            in->bidx = k;
    if (in->bidx == (size_t)-1) {
        in->bidx = 0;
        for (size_t k = 0; k < in->total; k++)
            if (in->runs[k].prec == PREC_FP32) {
                in->bidx = k;
                break;
            }
    }
    return 0;
}

/* The runs loaded and the lists of list_inputs. */
static void free_inputs(cmp_inputs *in)
{
    an_inputs_free(&in->in);
    free(in->args);
}

/* The charts a report links (--plots DIR). */
typedef struct cmp_charts {
    plot_result pres;
    report_chart *charts;        /* [pres.n] */
    char note[768];
} cmp_charts;

/* Draw the charts into o->plots_dir, the recommended clip value on the gradient norms, and
 * point the report options at them (with a note on what could not be drawn). Returns 0, or
 * the exit status a failure to plot gives (the report is written all the same); the caller
 * frees ch->charts and ch->pres. */
static int draw_charts(const cmp_inputs *in, const compare_opts *o, const recommendation *R, cmp_charts *ch,
                       report_opts *ro)
{
    plot_options po;
    plot_options_init(&po);
    po.whatif = o->whatif;
    po.alone = o->alone;
    char clip_label[96];
    char err[1024];
    int plot_rc = 0;
    if (R->clip_have) {
        po.clip = R->clip_value;
        snprintf(clip_label, sizeof clip_label, "recommended clip %.3g", R->clip_value);
        po.clip_label = clip_label;
    }
    int prc = plot_traces(in->all, (int)in->total, o->plots_dir, &po, &ch->pres, err, sizeof err);
    if (prc == PLOT_ENOGNUPLOT)
        snprintf(ch->note, sizeof ch->note, "gnuplot could not be run: the chart data and scripts are in %s "
                 "(cd there and run gnuplot NAME.gp)", o->plots_dir);
    else if (prc == PLOT_EGNUPLOT)
        snprintf(ch->note, sizeof ch->note, "gnuplot failed on some charts: %.600s", err);
    else if (prc != PLOT_OK) {
        snprintf(ch->note, sizeof ch->note, "no charts: %.600s", err);
        fprintf_text(stderr, "%s: --plots %s: %s\n", in->prog, o->plots_dir, err);
        plot_rc = plot_exit_status(prc);
    }
    if (ch->pres.n && !(ch->charts = calloc(ch->pres.n, sizeof *ch->charts))) {
        fprintf_text(stderr, "%s: out of memory\n", in->prog);
        plot_rc = EXIT_IO;
    }
    for (size_t i = 0; ch->charts && i < ch->pres.n; i++) {
        ch->charts[i].file = ch->pres.charts[i].file;
        ch->charts[i].desc = ch->pres.charts[i].desc;
        ch->charts[i].drawn = ch->pres.charts[i].drawn;
    }
    ro->plots_dir = o->plots_dir;
    ro->charts = ch->charts;
    ro->ncharts = ch->charts ? ch->pres.n : 0;
    if (ch->pres.notes[0] && !ch->note[0])
        snprintf(ch->note, sizeof ch->note, "%s", ch->pres.notes);
    ro->charts_note = ch->note[0] ? ch->note : NULL;
    return plot_rc;
}

/* The report on stdout in the chosen format, then the Markdown and JSON files asked for. 0 or
 * EXIT_IO after a message. */
static int write_reports(const cmp_inputs *in, const compare_opts *o, const an_comparison *c,
                         const recommendation *R, const report_opts *ro)
{
    int rc = 0;
    if (render(stdout, o->format, in->runs, in->total, c, R, ro) || fflush(stdout) != 0) {
        fprintf_text(stderr, "%s: cannot write the report: %s\n", in->prog, strerror(errno));
        rc = EXIT_IO;
    }
    if (!rc && o->md_path) {
        report_opts rm = *ro;
        rm.md_plots_dir = o->md_plots_dir;
        rc = write_file(in->prog, o->md_path, CMP_MARKDOWN, in->runs, in->total, c, R, &rm);
    }
    if (!rc && o->json_path)
        rc = write_file(in->prog, o->json_path, CMP_JSON, in->runs, in->total, c, R, ro);
    return rc;
}

/* --fail-on: the findings asked for that held, one line each on stderr with the name --fail-on
 * gives them. EXIT_FAIL_ON when one held, else 0. */
static int fail_on(const an_run *runs, size_t n, const an_comparison *c, const recommendation *R,
                   const char *prog)
{
    if (!(R->fail_held & R->fail_mask))
        return 0;
    msg_ctx m = {.runs = runs, .nruns = n, .baseline = (long)c->baseline, .R = R};
    char buf[2400];
    for (size_t i = 0; i < R->items.n; i++) {
        const rec_item *it = &R->items.v[i];
        if (it->sec != SEC_FAIL || !it->f || !(R->fail_mask & REC_FAIL_BIT(it->f->id)))
            continue;
        msg_item(buf, sizeof buf, &m, it);
        fprintf_text(stderr, "%s: --fail-on %s: %s\n", prog, rec_fail_name(it->f->id), buf);
    }
    return EXIT_FAIL_ON;
}

/* The loaded runs compared and the recommendations made, the charts drawn (--plots), the
 * reports written, --fail-on checked. Returns the exit status. */
static int compare_and_report(const cmp_inputs *in, const compare_opts *o)
{
    an_comparison c;
    recommendation R;
    memset(&R, 0, sizeof R);
    if (an_compare(in->runs, in->total, in->bidx, &c) ||
        recommend(in->runs, in->total, &c, o->target, o->fail_mask, &R) ||
        (o->recipe >= 0 && (rec_recipe_rules(in->runs, in->total, &c, o->recipe, &R), R.oom))) {
        fprintf_text(stderr, "%s: out of memory\n", in->prog);
        an_comparison_free(&c);
        rec_free(&R);
        return EXIT_IO;
    }
    report_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.width = 0; /* the terminal's, or 100 */
    ro.whatif = o->whatif;
    ro.recipe = o->recipe >= 0 ? an_recipe_name(o->recipe) : NULL;
    cmp_charts ch;
    memset(&ch, 0, sizeof ch);
    int plot_rc = o->plots_dir ? draw_charts(in, o, &R, &ch, &ro) : 0;
    int rc = write_reports(in, o, &c, &R, &ro);
    if (!rc)
        rc = fail_on(in->runs, in->total, &c, &R, in->prog);
    if (!rc && plot_rc)
        rc = plot_rc;
    free(ch.charts);
    plot_result_free(&ch.pres);
    an_comparison_free(&c);
    rec_free(&R);
    return rc;
}

int compare_files(const char *const *paths, size_t n, const compare_opts *o)
{
    cmp_inputs in;
    memset(&in, 0, sizeof in);
    in.prog = o->prog ? o->prog : "ampdiag compare";
    int rc = list_inputs(&in, paths, n, o);
    if (!rc)
        rc = load_inputs(&in, o);
    if (!rc)
        rc = compare_and_report(&in, o);
    free_inputs(&in);
    return rc;
}



enum { O_BASELINE = 1, O_FORMAT, O_PLOTS, O_TARGET, O_FAIL_ON, O_WARMUP, O_WHATIF, O_RECIPE, O_ALONE, O_HELP };

static const cli_opt options[] = {
    {"--baseline", 0, CLI_ARG, O_BASELINE}, {"--format", 0, CLI_ARG, O_FORMAT}, {"--plots", 0, CLI_ARG, O_PLOTS},
    {"--target", 0, CLI_ARG, O_TARGET}, {"--fail-on", 0, CLI_ARG, O_FAIL_ON}, {"--warmup", 0, CLI_ARG, O_WARMUP},
    {"--what-if", 0, CLI_ARG, O_WHATIF}, {"--recipe", 0, CLI_ARG, O_RECIPE}, {"--alone", 0, CLI_NOARG, O_ALONE},
    {"--help", 'h', CLI_NOARG, O_HELP},
    CLI_OPT_END};

/* One option other than --help and a trace (id, its argument v) into o. 0 or EXIT_USAGE after a
 * message. */
static int compare_option(compare_opts *o, int id, const char *v)
{
    char err[256];
    switch (id) {
    case O_BASELINE:
        o->baseline = v;
        return 0;
    case O_FORMAT:
        if (compare_format_parse(v, &o->format)) {
            fprintf_text(stderr, "ampdiag compare: unknown --format '%s' (expected text, md or json)\n", v);
            return EXIT_USAGE;
        }
        return 0;
    case O_PLOTS:
        o->plots_dir = v;
        return 0;
    case O_TARGET:
        if (rec_target_parse(v, &o->target) || o->target == TGT_ANY) {
            fprintf_text(stderr, "ampdiag compare: unknown --target '%s' (expected sm70, sm75, sm80, "
                         "sm89, sm90 or cpu)\n", v);
            return EXIT_USAGE;
        }
        return 0;
    case O_FAIL_ON:
        if (rec_fail_parse(v, &o->fail_mask, err, sizeof err)) {
            fprintf_text(stderr, "ampdiag compare: %s\n", err);
            return EXIT_USAGE;
        }
        return 0;
    case O_WARMUP: {
        char *end;
        errno = 0;
        long w = strtol(v, &end, 10);
        if (end == v || *end || errno || w < 0 || w > 1000000000L) {
            fprintf_text(stderr, "ampdiag compare: --warmup needs a step count >= 0, got '%s'\n", v);
            return EXIT_USAGE;
        }
        o->warmup = w;
        return 0;
    }
    case O_WHATIF:
        o->whatif = v;
        return 0;
    case O_ALONE:
        o->alone = 1;
        return 0;
    case O_RECIPE:
        if ((o->recipe = an_recipe_parse(v)) < 0) {
            fprintf_text(stderr, "ampdiag compare: unknown --recipe '%s' (expected one of %s)\n", v,
                         an_recipe_names());
            return EXIT_USAGE;
        }
        return 0;
    default:
        return EXIT_USAGE;
    }
}

int cmd_compare(int argc, char **argv)
{
    compare_opts o;
    compare_opts_init(&o);
    const char **paths = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *paths);
    if (!paths) {
        fprintf(stderr, "ampdiag compare: out of memory\n");
        return EXIT_IO;
    }
    size_t n = 0;
    int rc = 0;
    cli_parser p;
    if (cli_parser_init(&p, "compare", options, argc, argv, 0))
        rc = EXIT_USAGE;
    for (int id; !rc && (id = cli_next(&p)) != CLI_DONE;) {
        if (id == O_HELP) {
            usage(stdout);
            free(paths);
            return 0;
        }
        if (id == CLI_POS)
            paths[n++] = p.arg;
        else
            rc = compare_option(&o, id, p.arg);
    }
    if (!rc && n == 0 && !o.baseline) {
        fprintf(stderr, "ampdiag compare: no trace given (usage: ampdiag compare A.h5 [B.h5 ...])\n");
        rc = EXIT_USAGE;
    }
    if (!rc)
        rc = compare_files(paths, n, &o);
    free(paths);
    return rc;
}
