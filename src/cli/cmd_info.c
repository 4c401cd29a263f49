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
            "options:\n"
            "  --format text|json  output format (default text; json is described in\n"
            "                      traces/FORMAT.md, section 'ampdiag info --format json')\n"
            "  --top N             rows of the headroom tables in text output (default 5)\n"
            "  --what-if LIST      what-if columns beyond FP16 and BF16 to show: fp8, all, or\n"
            "                      column names (e4m3, e5m2_delayed, ...); JSON always has them all\n"            "  --recipe NAME       a low-precision recipe the trace counted (mxfp8, mxfp8:rceil,\n"
            "                      nvfp4, fp8-block, fp8-current, fp8-delayed): the tensors it would\n"
            "                      hurt and why, and which layers can take it and which should stay\n"
            "                      BF16, ranked by the measured error (docs/numerics.md, \"Which layers\n"
            "                      can take a recipe\"); JSON always has every recipe counted\n"
            "  -h, --help\n"
            "\n"
            "exit status: 0 success, 2 bad usage or not a valid trace, 3 I/O error\n");
}

/* ------------------------------------------------------------------------------------------
 * Command
 * ------------------------------------------------------------------------------------------ */

static int exit_for(int err) { return ampdiag_trace_err_is_io(err) ? EXIT_IO : EXIT_USAGE; }

enum { O_FORMAT = 1, O_TOP, O_WHATIF, O_RECIPE, O_HELP };

static const cli_opt options[] = {
    {"--format", 0, CLI_ARG, O_FORMAT}, {"--top", 0, CLI_ARG, O_TOP}, {"--what-if", 0, CLI_ARG, O_WHATIF},
    {"--recipe", 0, CLI_ARG, O_RECIPE}, {"--help", 'h', CLI_NOARG, O_HELP}, CLI_OPT_END};

int cmd_info(int argc, char **argv)
{
    const char *path = NULL, *format = "text", *whatif = NULL;
    long top = 5;
    int recipe = -1;
    cli_parser p;
    if (cli_parser_init(&p, "info", options, argc, argv, 0))
        return EXIT_USAGE;
    for (int id; (id = cli_next(&p)) != CLI_DONE;) {
        const char *a = p.arg;
        if (id == O_HELP) {
            usage(stdout);
            return 0;
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
            whatif = a;
        } else if (id == O_RECIPE) {
            if ((recipe = an_recipe_parse(a)) < 0) {
                fprintf_text(stderr, "ampdiag info: unknown --recipe '%s' (expected one of %s)\n", a,
                             an_recipe_names());
                return EXIT_USAGE;
            }
        } else if (id != CLI_POS) {
            return EXIT_USAGE;
        } else if (path) {
            fprintf_text(stderr, "ampdiag info: one trace at a time ('%s' and '%s'); to compare traces "
                                 "use ampdiag compare\n", path, a);
            return EXIT_USAGE;
        } else {
            path = a;
        }
    }
    if (!path) {
        fprintf(stderr, "ampdiag info: no trace given (usage: ampdiag info TRACE.h5 [--format "
                        "text|json])\n");
        return EXIT_USAGE;
    }

    /* one loader, one set of findings: the same figures as run, compare and plot */
    an_run run;
    an_options ao = {.warmup = -1, .quiet = 0, .keep_points = 0, .no_rms_series = 1};
    char err[512] = "";
    int rc = an_load(path, &ao, &run, err, sizeof err);
    if (rc) {
        fprintf_text(stderr, "ampdiag info: %s\n", err);
        an_free(&run);
        return exit_for(rc);
    }
    info_opts io = {(size_t)top, whatif, recipe, 0};
    if (strcmp(format, "json") == 0)
        report_info_json(stdout, &run);
    else
        report_info_text(stdout, &run, &io);
    an_free(&run);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf_text(stderr, "ampdiag info: cannot write the output: %s\n", strerror(errno));
        return EXIT_IO;
    }
    return 0;
}
