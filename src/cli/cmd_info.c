/*
 * cmd_info.c - `ampdiag info run.h5`: what one trace says. The run (precision, model, data,
 * steps, status: complete, diverged, interrupted or cut off), the loss, the loss scale, skipped
 * steps, events, the layers with the least FP16/BF16 headroom, and the "what if" totals: how
 * many recorded values would overflow, underflow or be subnormal in FP16 and in BF16, whatever
 * precision the run used. Text for people, --format json for programs (documented in --help
 * and traces/FORMAT.md).
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "analysis/findings.h"
#include "analysis/load.h"
#include "analysis/ranks.h"
#include "analysis/recipe.h"
#include "cli/cli.h"
#include "report/info.h"
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
            "usage: ampdiag info TRACE.h5 [--format text|json] [--top N] [--what-if LIST] [--recipe NAME]\n"
            "                    [--alone]\n"
            "       ampdiag info 'RUN.rank*.h5'   (the ranks of a distributed run, read together)\n"
            "\n"
            "Summarise one trace: the run (precision, model, data, steps, status), the loss\n"
            "(first, last, minimum), the loss scale (initial, minimum, final, backoffs), skipped\n"
            "steps, events, the (layer, tensor kind) pairs with the least FP16 and BF16 headroom\n"
            "at each end of the range, and what-if totals: values that would overflow, underflow\n"
            "(round to zero) or be subnormal in FP16 and BF16, summed over the trace, per tensor\n"
            "kind, and the share of non-zero updates that would round away if the weights were\n"
            "stored in FP16 / BF16 (no FP32 master copy). An FP32 run so predicts both 16-bit runs.\n"
            "\n"
            "Headroom is in binades (factors of 2); negative means values beyond the range\n"
            "(on the underflow side: subnormal, and beyond 10 (fp16) or 7 (bf16) binades, zero):\n"
            "  overflow side   log2(max_finite / absmax)     (fp16 65504, bf16 3.39e38)\n"
            "  underflow side  log2(absmin_nz / min_normal)  (fp16 2^-14, bf16 2^-126)\n"
            "with absmax the largest and absmin_nz the smallest non-zero |value| recorded for that\n"
            "layer and kind over the whole trace.\n"
            "\n"
            "A trace whose status is still 'running' was cut off (its writer was killed or is\n"
            "still running): it holds every record up to the writer's last flush.\n"
            "\n"
            "The traces of a distributed run's ranks (one per rank, ampdiag.torch under\n"
            "torch.distributed) are read together as one run: a glob in quotes ('run.rank*.h5'),\n"
            "or rank 0's trace with the others beside it (run.rank0.h5: run.rank1.h5, ... are read\n"
            "with it). The ranks' records are merged into the run the ranks trained together, and\n"
            "a section 'ranks' names the first rank with NaN/inf, replicas or reduced gradients\n"
            "that differ across ranks, skips one rank took alone, a rank that stopped first,\n"
            "missing ranks or shards, and the spread of the loss, step time and activations\n"
            "(docs/pytorch.md, 'Reading ranks together').\n"
            "\n"
            "options:\n"
            "  --format text|json  output format (default text; json is described in\n"
            "                      traces/FORMAT.md, section 'ampdiag info --format json')\n"
            "  --top N             rows of the headroom tables in text output (default 5)\n"
            "  --what-if LIST      what-if columns beyond FP16 and BF16 to show: fp8, all, or\n"
            "                      column names (e4m3, e5m2_delayed, ...); JSON always has them all\n"
            "  --recipe NAME       a low-precision recipe the trace counted (mxfp8, mxfp8:rceil,\n"
            "                      nvfp4, fp8-block, fp8-current, fp8-delayed): the tensors it would\n"
            "                      hurt and why, and which layers can take it and which should stay\n"
            "                      BF16, ranked by the measured error (docs/numerics.md, \"Which layers\n"
            "                      can take a recipe\"); JSON always has every recipe counted\n"
            "  --alone             read a rank-0 trace by itself, not with the ranks beside it\n"
            "  -h, --help\n"
            "\n"
            "exit status: 0 success, 2 bad usage, not a valid trace, or rank traces that are not\n"
            "one run, 3 I/O error\n");
}

/* ------------------------------------------------------------------------------------------
 * Command
 * ------------------------------------------------------------------------------------------ */

static int exit_for(int err) { return ampdiag_trace_err_is_io(err) ? EXIT_IO : EXIT_USAGE; }

enum { O_FORMAT = 1, O_TOP, O_WHATIF, O_RECIPE, O_ALONE, O_HELP };

static const cli_opt options[] = {
    {"--format", 0, CLI_ARG, O_FORMAT}, {"--top", 0, CLI_ARG, O_TOP}, {"--what-if", 0, CLI_ARG, O_WHATIF},
    {"--recipe", 0, CLI_ARG, O_RECIPE}, {"--alone", 0, CLI_NOARG, O_ALONE}, {"--help", 'h', CLI_NOARG, O_HELP},
    CLI_OPT_END};

/* The run the arguments name: one trace, or the ranks of one distributed run (several
 * arguments only where they are: a glob the shell expanded). 0 or the exit status after a
 * message. */
static int load_one(const char *const *args, size_t n, unsigned flags, an_inputs *in)
{
    an_options ao = {.warmup = -1, .quiet = 0, .keep_points = 0, .no_rms_series = 1};
    char err[1024] = "";
    int rc = an_load_args(args, n, &ao, flags, in, err, sizeof err);
    for (size_t i = 0; i < in->nnotes; i++)
        fprintf_text(stderr, "ampdiag info: %s\n", in->notes[i]);
    if (rc) {
        fprintf_text(stderr, "ampdiag info: %s\n", err);
        return exit_for(rc);
    }
    if (in->n != 1) {
        fprintf_text(stderr, "ampdiag info: one trace at a time ('%s' and '%s'); to compare traces use "
                             "ampdiag compare\n", in->names[0], in->names[1]);
        return EXIT_USAGE;
    }
    return 0;
}

/* The options and the traces. 0, -1 (--help: done), or the exit status after a message. */
static int info_args(int argc, char **argv, const char **format_, long *top_, const char **whatif_,
                     int *recipe_, unsigned *flags, const char **paths, size_t *npaths)
{
    const char *format = "text";
    long top = 5;
    int recipe = -1;
    cli_parser p;
    if (cli_parser_init(&p, "info", options, argc, argv, 0))
        return EXIT_USAGE;
    for (int id; (id = cli_next(&p)) != CLI_DONE;) {
        const char *a = p.arg;
        if (id == O_HELP) {
            usage(stdout);
            return -1;
        } else if (id == O_FORMAT) {
            format = a;
            if (strcmp(format, "text") != 0 && strcmp(format, "json") != 0) {
                fprintf_text(stderr, "ampdiag info: unknown --format '%s' (expected text or json)\n",
                             format);
                return EXIT_USAGE;
            }
        } else if (id == O_TOP) {
            char *end;
            errno = 0;
            top = strtol(a, &end, 10);
            if (end == a || *end || errno || top < 0 || top > 1000000) {
                fprintf_text(stderr, "ampdiag info: --top needs a count (0..1000000), got '%s'\n", a);
                return EXIT_USAGE;
            }
        } else if (id == O_WHATIF) {
            *whatif_ = a;
        } else if (id == O_ALONE) {
            *flags |= AN_ARGS_ALONE;
        } else if (id == O_RECIPE) {
            if ((recipe = an_recipe_parse(a)) < 0) {
                fprintf_text(stderr, "ampdiag info: unknown --recipe '%s' (expected one of %s)\n", a,
                             an_recipe_names());
                return EXIT_USAGE;
            }
        } else if (id != CLI_POS) {
            return EXIT_USAGE;
        } else {
            paths[(*npaths)++] = a;
        }
    }
    if (!*npaths) {
        fprintf(stderr, "ampdiag info: no trace given (usage: ampdiag info TRACE.h5 [--format "
                        "text|json])\n");
        return EXIT_USAGE;
    }
    *format_ = format;
    *top_ = top;
    *recipe_ = recipe;
    return 0;
}

int cmd_info(int argc, char **argv)
{
    const char *format = "text", *whatif = NULL;
    long top = 5;
    unsigned flags = 0;
    const char **paths = calloc((size_t)(argc > 0 ? argc : 1), sizeof *paths);
    size_t npaths = 0;
    if (!paths) {
        fprintf(stderr, "ampdiag info: out of memory\n");
        return EXIT_IO;
    }
    int recipe = -1;
    int rc = info_args(argc, argv, &format, &top, &whatif, &recipe, &flags, paths, &npaths);
    if (rc) {
        free(paths);
        return rc < 0 ? 0 : rc;
    }
    an_inputs in;
    rc = load_one(paths, npaths, flags, &in);
    free(paths);
    if (rc) {
        an_inputs_free(&in);
        return rc;
    }
    const an_run *run = &in.runs[0];
    info_opts io = {(size_t)top, whatif, recipe, 0};
    if (strcmp(format, "json") == 0)
        report_info_json(stdout, run);
    else
        report_info_text(stdout, run, &io);
    an_inputs_free(&in);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf_text(stderr, "ampdiag info: cannot write the output: %s\n", strerror(errno));
        return EXIT_IO;
    }
    return 0;
}
