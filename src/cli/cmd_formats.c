/*
 * cmd_formats.c - `ampdiag formats`: the format table (limits and class thresholds of every
 * row), and what rounding given values to each format does.
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
            "Without values: the format table: for fp32, fp16, bf16 and the OCP FP8 formats e4m3\n"
            "and e5m2, the limits (max finite, min normal, min subnormal, unit roundoff), the\n"
            "overflow, underflow and normal thresholds, the layout and what an overflow becomes.\n"
            "With values: each value rounded to every format (round to nearest even; with --ftz,\n"
            "subnormal inputs and results flushed to zero), with the bit patterns and the class.\n"
            "E4M3 has no infinities: an overflow becomes NaN (OCP's non-saturating conversion).\n"
            "Negative numbers (-1e-8, -inf) are values, not options.\n"
            "\n"
            "options:\n"
            "  --ftz       flush subnormal inputs and results to zero\n"
            "  -h, --help\n");
}

/* The class of in rounded to fmt (r, rounded with or without ftz), as the table prints it. */
static const char *classify(ampdiag_format fmt, float in, float r, int ftz)
{
    switch (ampdiag_classify(fmt, in)) {
    case AMPDIAG_CLASS_NAN: return "nan";
    case AMPDIAG_CLASS_INF: return "inf";
    case AMPDIAG_CLASS_OVERFLOW: return "OVERFLOW";
    case AMPDIAG_CLASS_UNDERFLOW: return "UNDERFLOW";
    case AMPDIAG_CLASS_SUBNORMAL: return ftz ? "UNDERFLOW" : "subnormal";
    default: return in != 0 && r == 0 ? "UNDERFLOW" : "";
    }
}

/* The format table, one row per format. */
static void print_limits(void)
{
    printf("%-5s %-14s %-14s %-14s %-12s %-14s %-14s %-14s %-7s %-4s %s\n", "fmt", "max_finite", "min_normal",
           "min_subnormal", "unit_round", "overflow_at", "underflow_at", "normal_at", "s/e/m", "bias", "overflow");
    for (int f = 0; f < AMPDIAG_NFORMATS; f++) {
        const ampdiag_format_info *i = ampdiag_format_get((ampdiag_format)f);
        char layout[16];
        snprintf(layout, sizeof layout, "1/%d/%d", i->exp_bits, i->mant_bits);
        printf("%-5s %-14.8g %-14.8g %-14.8g %-12.6g %-14.8g %-14.8g %-14.8g %-7s %-4d %s\n", i->name, i->max_finite,
               i->min_normal, i->min_subnormal, i->unit_roundoff, i->overflow_at, i->underflow_at, i->normal_at,
               layout, i->bias, i->has_inf ? "inf" : "NaN");
    }
    printf("\noverflow_at: the smallest float32 |x| that overflows (e4m3: |x| > 464, since 464 ties to 448);\n"
           "underflow_at: the largest |x| that rounds to 0; normal_at: the smallest that rounds to a normal.\n");
}

/* Print line without its trailing blanks. */
static void put_trimmed(char *line)
{
    size_t n = strlen(line);
    while (n > 0 && line[n - 1] == ' ')
        line[--n] = '\0';
    puts(line);
}

/* Each value rounded to every format but FP32 (whose rounding is the value itself): one line
 * per value, three columns per format (the value it becomes, its bit pattern, its class). */
static void print_values(const float *vals, int nv, int ftz)
{
    char line[512];
    int len = snprintf(line, sizeof line, "%-16s", "value");
    for (int f = AMPDIAG_FP32 + 1; f < AMPDIAG_NFORMATS; f++) {
        const ampdiag_format_info *i = ampdiag_format_get((ampdiag_format)f);
        len += snprintf(line + len, sizeof line - (size_t)len, " %-16s %-*s %-10s", i->name, i->bits / 4 + 2, "bits", "");
    }
    put_trimmed(line);
    for (int k = 0; k < nv; k++) {
        float v = vals[k];
        len = isnan(v) ? snprintf(line, sizeof line, "%-16s", "nan") : snprintf(line, sizeof line, "%-16.9g", v);
        for (int f = AMPDIAG_FP32 + 1; f < AMPDIAG_NFORMATS; f++) {
            const ampdiag_format_info *i = ampdiag_format_get((ampdiag_format)f);
            float r = ftz ? i->round_ftz(v) : i->round(v);
            char rs[32] = "nan"; /* whatever its sign: the bits show it */
            if (!isnan(r))
                snprintf(rs, sizeof rs, "%.9g", r);
            len += snprintf(line + len, sizeof line - (size_t)len, " %-16s 0x%0*x %-10s", rs, i->bits / 4,
                            i->encode(r), classify((ampdiag_format)f, v, r, ftz));
        }
        put_trimmed(line);
    }
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
        print_limits();
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
    print_values(vals, nv, ftz);
    free(vals);
    free(args);
    return 0;
}
