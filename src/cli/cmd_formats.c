/*
 * cmd_formats.c - `ampdiag formats`: the limits of each number format, and what rounding
 * given values to each format does.
 */
#include "ampdiag.h"
#include "cli/cli.h"
#include "util/escape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag formats [--ftz] [VALUE ...]\n"
            "\n"
            "Without values: the limits of fp32, fp16 and bf16 (max finite, min normal, min\n"
            "subnormal, unit roundoff, overflow and underflow thresholds).\n"
            "With values: each value rounded to every format (round to nearest even; with --ftz,\n"
            "subnormal inputs and results flushed to zero), with the FP16/BF16 bit patterns.\n"
            "Negative numbers (-1e-8, -inf) are values, not options.\n"
            "\n"
            "options:\n"
            "  --ftz       flush subnormal inputs and results to zero\n"
            "  -h, --help\n");
}

static const char *classify(ampdiag_format fmt, float in, float r)
{
    if (isnan(in)) return "nan";
    if (isinf(in)) return "inf";
    if (isinf(r)) return "OVERFLOW";
    if (in != 0 && r == 0) return "UNDERFLOW";
    if (r != 0 && fabsf(r) < ampdiag_format_get(fmt)->min_normal) return "subnormal";
    return "";
}

enum { O_FTZ = 1, O_HELP };

static const cli_opt options[] = {
    {"--ftz", 0, CLI_NOARG, O_FTZ}, {"--help", 'h', CLI_NOARG, O_HELP}, CLI_OPT_END};

int cmd_formats(int argc, char **argv)
{
    int ftz = 0, nv = 0;
    /* the values, in order; negative numbers are values, not options */
    const char **args = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *args);
    if (!args) {
        fprintf(stderr, "ampdiag formats: out of memory\n");
        return EXIT_IO;
    }
    cli_parser p;
    if (cli_parser_init(&p, "formats", options, argc, argv, CLI_NUMBERS)) {
        free(args);
        return EXIT_USAGE;
    }
    for (int id; (id = cli_next(&p)) != CLI_DONE;) {
        switch (id) {
        case O_FTZ: ftz = 1; break;
        case O_HELP: usage(stdout); free(args); return 0;
        case CLI_POS: args[nv++] = p.arg; break;
        default: free(args); return EXIT_USAGE;
        }
    }
    if (nv == 0) {
        printf("%-5s %-14s %-14s %-14s %-12s %-14s %s\n", "fmt", "max_finite", "min_normal",
               "min_subnormal", "unit_round", "overflow_at", "underflow_at");
        for (int f = 0; f < AMPDIAG_NFORMATS; f++) {
            const ampdiag_format_info *i = ampdiag_format_get((ampdiag_format)f);
            printf("%-5s %-14.8g %-14.8g %-14.8g %-12.6g %-14.8g %.8g\n", i->name, i->max_finite,
                   i->min_normal, i->min_subnormal, i->unit_roundoff, i->overflow_at, i->underflow_at);
        }
        free(args);
        return 0;
    }
    float *vals = malloc((size_t)nv * sizeof *vals);
    if (!vals) {
        fprintf(stderr, "ampdiag formats: out of memory\n");
        free(args);
        return EXIT_IO;
    }
    for (int i = 0; i < nv; i++) {
        char *end;
        const char *arg = args[i];
        vals[i] = strtof(arg, &end);
        if (end == arg || *end) {
            fprintf_text(stderr, "ampdiag formats: '%s' is not a number (expected e.g. 65520, 1e-8, -inf)\n", arg);
            free(vals);
            free(args);
            return EXIT_USAGE;
        }
    }
    printf("%-16s %-16s %-6s %-10s %-16s %-6s %s\n", "value", "fp16", "bits", "", "bf16", "bits", "");
    for (int i = 0; i < nv; i++) {
        float v = vals[i];
        float h = ftz ? ampdiag_round_ftz(AMPDIAG_FP16, v) : ampdiag_round(AMPDIAG_FP16, v);
        float b = ftz ? ampdiag_round_ftz(AMPDIAG_BF16, v) : ampdiag_round(AMPDIAG_BF16, v);
        printf("%-16.9g %-16.9g 0x%04x %-10s %-16.9g 0x%04x %s\n", v, h, ampdiag_fp16_encode(h),
               classify(AMPDIAG_FP16, v, h), b, ampdiag_bf16_encode(b), classify(AMPDIAG_BF16, v, b));
    }
    free(vals);
    free(args);
    return 0;
}
