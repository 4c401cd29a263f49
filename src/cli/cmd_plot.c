/*
 * cmd_plot.c - `ampdiag plot run.h5 [...] -o DIR`: gnuplot charts of one or more traces.
 * The charts, their data and their scripts are made by plot.c; this file parses the options
 * and reports what was made (one line per chart on stdout).
 */
#include "cli/cli.h"
#include "plot/plot.h"
#include "util/escape.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag plot TRACE.h5 [TRACE.h5 ...] -o DIR [--format png|svg] [--clip X]\n"
            "                    [--layers NAME,...] [--hist-steps S,...] [--what-if LIST] [--alone]\n"
            "                    [--quant LIST [--quant-metric sqnr|flush]]\n"
            "\n"
            "Draw gnuplot charts of one or more traces into DIR, runs overlaid and coloured by\n"
            "precision (fp32 grey, fp16 blue, bf16 vermillion):\n"
            "  loss.EXT                  training and eval loss, skipped steps and NaN/inf events\n"
            "  loss-scale.EXT            loss scale (log2) of the runs that used one, backoffs\n"
            "  grad-norm.EXT             gradient norm (unscaled, before clipping), clip values\n"
            "  layer-ranges-KIND.EXT     per layer: largest and smallest non-zero |x| of\n"
            "                            activations, activation and weight gradients, with the\n"
            "                            FP16 and BF16 limits as bands (those the range shows)\n"
            "  fp16-heatmap-RUN.EXT      layer x step: fraction that would flush to zero (without\n"
            "                            loss scaling, cells a loss scale would keep marked) or\n"
            "                            overflow in FP16; an FP16 run: its increase of exact\n"
            "                            zeros over an FP32 run of the same model and data\n"
            "  FORMAT-heatmap-RUN.EXT    the same for each what-if format --what-if names\n"
            "  quant-heatmap-COLUMN-RUN.EXT   layer x step, a panel per tensor kind: the SQNR\n"
            "                            (or the share flushed to zero) of each /quant column\n"
            "                            --quant names (a block-scaled what-if: MX, NVFP4, ...)\n"
            "  exponent-histogram-RUN-LAYER.EXT   exponent histograms of a layer's gradients\n"
            "                            at a few steps, FP16 and BF16 windows shaded\n"
            "  ranks-RUN.EXT             a distributed run read from its ranks' traces: one line\n"
            "                            per rank of the training loss, the gradient norm and the\n"
            "                            loss scale\n"
            "\n"
            "A distributed run's rank traces are one run (a glob in quotes, 'run.rank*.h5', or\n"
            "rank 0's trace with the others beside it): its charts draw the ranks merged (their\n"
            "exponent histograms: the first rank's), and ranks-RUN.EXT each rank.\n"
            "\n"
            "Each chart NAME.EXT comes with its script NAME.gp and data (NAME*.dat, NAME*.bin);\n"
            "`cd DIR && gnuplot NAME.gp` redraws one, DIR/draw-all.sh all of them. The scripts\n"
            "are built from templates (plots/*.gp, installed with ampdiag; $AMPDIAG_PLOTS_DIR\n"
            "overrides where they are looked up): edit a template to restyle a chart.\n"
            "\n"
            "options:\n"
            "  -o, --out DIR       output directory (created if missing; charts are replaced)\n"
            "  --format png|svg    chart format (default png, 1200 pixels wide)\n"
            "  --clip X            draw the clip value X on the gradient-norm chart (e.g. the\n"
            "                      one ampdiag compare recommends)\n"
            "  --layers A,B,...    layers for the per-layer charts (default: every layer, or the\n"
            "                      12 with the least FP16 headroom; histograms: the layer whose\n"
            "                      gradients underflow most in FP16)\n"
            "  --hist-steps S,...  steps of the exponent histograms (the nearest step with a\n"
            "                      histogram is used; default: up to 4 spread over the run)\n"
            "  --what-if LIST      also chart these what-if columns of the traces (names or\n"
            "                      formats: e4m3,e5m2_delayed; fp8; all): their heatmaps, and\n"
            "                      their formats' bands on the range charts\n"
            "  --quant LIST        /quant columns to chart: their names (nvfp4:e4m3@row), a\n"
            "                      recipe's (mxfp8, nvfp4, fp8-block, fp8-current: its columns),\n"
            "                      or all\n"
            "  --quant-metric M    sqnr (default: the SQNR in dB) or flush (the share of values\n"
            "                      that decode as zero)\n"
            "  --no-draw           write data and scripts only\n"
            "  --alone             read a rank-0 trace by itself, not with the ranks beside it\n"
            "  -h, --help\n"
            "\n"
            "exit status: 0 success, 2 bad usage or not a valid trace, 3 I/O error or gnuplot\n"
            "missing or failing (the data and scripts are still written)\n");
}

/* Split "a,b,c" in place; returns the number of items (0 when one is empty). */
static size_t split_list(char *s, char **items, size_t max)
{
    size_t n = 0;
    for (char *p = s;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = 0;
        if (!*p || n == max)
            return 0;
        items[n++] = p;
        if (!comma)
            break;
        p = comma + 1;
    }
    return n;
}



enum { MAX_LIST = 256 };

enum { O_OUT = 1, O_FORMAT, O_CLIP, O_LAYERS, O_HIST_STEPS, O_NO_DRAW, O_WHATIF, O_QUANT, O_QMETRIC, O_ALONE, O_HELP };

static const cli_opt options[] = {
    {"--out", 'o', CLI_ARG, O_OUT}, {"--format", 0, CLI_ARG, O_FORMAT}, {"--clip", 0, CLI_ARG, O_CLIP},
    {"--layers", 0, CLI_ARG, O_LAYERS}, {"--hist-steps", 0, CLI_ARG, O_HIST_STEPS},
    {"--no-draw", 0, CLI_NOARG, O_NO_DRAW}, {"--what-if", 0, CLI_ARG, O_WHATIF},
    {"--quant", 0, CLI_ARG, O_QUANT}, {"--quant-metric", 0, CLI_ARG, O_QMETRIC},
    {"--alone", 0, CLI_NOARG, O_ALONE}, {"--help", 'h', CLI_NOARG, O_HELP}, CLI_OPT_END};

/* The command line, parsed: the options, the output directory, the traces. */
typedef struct plot_args {
    plot_options opt;
    const char *out;
    const char **paths;
    int npaths;
    char *layer_buf, *steps_buf;
    char *layers[MAX_LIST];
    int64_t steps[MAX_LIST];
} plot_args;

/* --hist-steps LIST into a->steps. 0 or the exit status after a message. */
static int hist_steps_option(plot_args *a, const char *v)
{
    free(a->steps_buf);
    a->steps_buf = strdup(v);
    if (!a->steps_buf) {
        fprintf(stderr, "ampdiag plot: out of memory\n");
        return EXIT_IO;
    }
    char *items[MAX_LIST];
    size_t n = split_list(a->steps_buf, items, 6);
    if (!n) {
        fprintf_text(stderr, "ampdiag plot: --hist-steps needs 1 to 6 steps separated by commas, got '%s'\n", v);
        return EXIT_USAGE;
    }
    for (size_t k = 0; k < n; k++) {
        char *end;
        errno = 0;
        long long s = strtoll(items[k], &end, 10);
        if (end == items[k] || *end || errno || s < 0) {
            fprintf_text(stderr, "ampdiag plot: --hist-steps: '%s' is not a step number\n", items[k]);
            return EXIT_USAGE;
        }
        a->steps[k] = s;
    }
    a->opt.hist_steps = a->steps;
    a->opt.nhist_steps = n;
    return 0;
}

/* --layers LIST into a->layers. 0 or the exit status after a message. */
static int layers_option(plot_args *a, const char *v)
{
    free(a->layer_buf);
    a->layer_buf = strdup(v);
    if (!a->layer_buf) {
        fprintf(stderr, "ampdiag plot: out of memory\n");
        return EXIT_IO;
    }
    a->opt.nlayers = split_list(a->layer_buf, a->layers, MAX_LIST);
    if (!a->opt.nlayers) {
        fprintf_text(stderr, "ampdiag plot: --layers needs layer names separated by commas (at most %d), got '%s'\n",
                     MAX_LIST, v);
        return EXIT_USAGE;
    }
    a->opt.layers = (const char *const *)a->layers;
    return 0;
}

/* One option (id, its argument v). 0, -1 (--help: done) or the exit status after a message. */
static int plot_option(plot_args *a, int id, const char *v)
{
    switch (id) {
    case O_HELP:
        usage(stdout);
        return -1;
    case O_OUT:
        if (!*v) {
            fprintf(stderr, "ampdiag plot: -o needs a directory name\n");
            return EXIT_USAGE;
        }
        a->out = v;
        return 0;
    case O_FORMAT:
        if (strcmp(v, "png") != 0 && strcmp(v, "svg") != 0) {
            fprintf_text(stderr, "ampdiag plot: unknown --format '%s' (expected png or svg)\n", v);
            return EXIT_USAGE;
        }
        a->opt.format = strcmp(v, "png") == 0 ? PLOT_PNG : PLOT_SVG;
        return 0;
    case O_CLIP: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(x) || !(x > 0)) {
            fprintf_text(stderr, "ampdiag plot: --clip needs a positive number, got '%s'\n", v);
            return EXIT_USAGE;
        }
        a->opt.clip = x;
        return 0;
    }
    case O_LAYERS:
        return layers_option(a, v);
    case O_HIST_STEPS:
        return hist_steps_option(a, v);
    case O_NO_DRAW:
        a->opt.draw = 0;
        return 0;
    case O_WHATIF:
        a->opt.whatif = v;
        return 0;
    case O_ALONE:
        a->opt.alone = 1;
        return 0;
    case O_QUANT:
        a->opt.quant = v;
        return 0;
    case O_QMETRIC:
        if (strcmp(v, "sqnr") != 0 && strcmp(v, "flush") != 0) {
            fprintf_text(stderr, "ampdiag plot: unknown --quant-metric '%s' (expected sqnr or flush)\n", v);
            return EXIT_USAGE;
        }
        a->opt.quant_flush = strcmp(v, "flush") == 0;
        return 0;
    case CLI_POS:
        a->paths[a->npaths++] = v;
        return 0;
    default:
        return EXIT_USAGE;
    }
}

/* Draw the charts and list them (gnuplot's warnings on stderr). The exit status. */
static int draw(const plot_args *a)
{
    const char *out = a->out;
    plot_result res;
    char err[1024];
    int rc = plot_traces(a->paths, a->npaths, out, &a->opt, &res, err, sizeof err);
    for (size_t i = 0; i < res.n; i++) {
        const plot_chart *ch = &res.charts[i];
        const char *mark = !a->opt.draw || res.gnuplot_missing ? "script" : ch->drawn ? "" : "FAILED";
        fprintf_text(stdout, "%s/%s%s%s%s\n", out, ch->drawn || !*mark ? ch->file : ch->script,
                     *mark ? " (" : "", mark, *mark ? ")" : "");
        fprintf_text(stdout, "    %s\n", ch->desc);
        if (ch->warned)
            fprintf_text(stderr, "ampdiag plot: gnuplot warned on %s/%s: %s (see %s/%.*s.log)\n", out,
                         ch->script, ch->message, out, (int)(strlen(ch->script) - 3), ch->script);
    }
    if (res.notes[0])
        fprintf_text(stdout, "not drawn: %s\n", res.notes);
    plot_result_free(&res);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf_text(stderr, "ampdiag plot: cannot write the output: %s\n", strerror(errno));
        return EXIT_IO;
    }
    if (rc) {
        fprintf_text(stderr, "ampdiag plot: %s\n", err);
        return plot_exit_status(rc);
    }
    return 0;
}

int cmd_plot(int argc, char **argv)
{
    plot_args a = {0};
    plot_options_init(&a.opt);
    a.paths = calloc((size_t)argc, sizeof *a.paths);
    int status = EXIT_USAGE;
    if (!a.paths) {
        fprintf(stderr, "ampdiag plot: out of memory\n");
        return EXIT_IO;
    }
    cli_parser p;
    if (cli_parser_init(&p, "plot", options, argc, argv, 0))
        goto done;
    for (int id; (id = cli_next(&p)) != CLI_DONE;) {
        int rc = plot_option(&a, id, p.arg);
        if (rc) {
            status = rc < 0 ? 0 : rc;
            goto done;
        }
    }
    if (!a.npaths) {
        fprintf(stderr, "ampdiag plot: no trace given (usage: ampdiag plot TRACE.h5 [...] -o DIR)\n");
        goto done;
    }
    if (!a.out) {
        fprintf(stderr, "ampdiag plot: no output directory (-o DIR)\n");
        goto done;
    }
    status = draw(&a);
done:
    free(a.paths);
    free(a.layer_buf);
    free(a.steps_buf);
    return status;
}
