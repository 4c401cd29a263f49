/*
 * cmd_formats.c - `ampdiag formats`: the format table (limits and class thresholds of every
 * row), what rounding given values to each format does, and what block-scaled schemes
 * (--whatif: MX, NVFP4, FP8 blockwise, current scaling) do to them.
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
            "       ampdiag formats --whatif LIST [--shape ROWSxCOLS] VALUE ...\n"
            "\n"
            "Without values: the format table: for fp32, fp16, bf16, the OCP FP8 formats e4m3\n"
            "and e5m2 and the OCP MX formats e2m1, e2m3, e3m2 (elements) and e8m0 (the scale),\n"
            "the limits (max finite, min normal, min subnormal, unit roundoff), the overflow,\n"
            "underflow and normal thresholds, the layout and what an overflow becomes.\n"
            "With values: each value rounded to every format (round to nearest even; with --ftz,\n"
            "subnormal inputs and results flushed to zero), with the bit patterns and the class.\n"
            "E4M3 has no infinities: an overflow becomes NaN (OCP's non-saturating conversion);\n"
            "the MX elements saturate.\n"
            "With --whatif: what each block-scaled scheme of LIST (the list of ampdiag run\n"
            "--whatif: mxfp8, nvfp4, fp8-block, fp8-current, ...; docs/numerics.md) does to the\n"
            "values taken as one tensor (1-D, or a matrix with --shape, rows first): the value\n"
            "each decodes to and what happened to it, then per scheme its blocks, scales, counts\n"
            "and error.\n"
            "Negative numbers (-1e-8, -inf) are values, not options.\n"
            "\n"
            "options:\n"
            "  --ftz             flush subnormal inputs and results to zero\n"
            "  --whatif LIST     block-scaled schemes to apply (e.g. mxfp8,nvfp4@row)\n"
            "  --shape RxC       the values are an R x C matrix (row-major), then a 1-D tail\n"
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
    for (int f = 0; f < AMPDIAG_NFORMATS_ALL; f++) {
        const ampdiag_format_info *i = ampdiag_format_get((ampdiag_format)f);
        char layout[16];
        snprintf(layout, sizeof layout, "%d/%d/%d", f == AMPDIAG_E8M0 ? 0 : 1, i->exp_bits, i->mant_bits);
        printf("%-5s %-14.8g %-14.8g %-14.8g %-12.6g %-14.8g %-14.8g %-14.8g %-7s %-4d %s\n", i->name, i->max_finite,
               i->min_normal, i->min_subnormal, i->unit_roundoff, i->overflow_at, i->underflow_at, i->normal_at,
               layout, i->bias, i->has_inf ? "inf" : i->has_nan ? "NaN" : "max");
    }
    printf("\noverflow_at: the smallest float32 |x| that overflows (e4m3: |x| > 464, since 464 ties to 448);\n"
           "underflow_at: the largest |x| that rounds to 0; normal_at: the smallest that rounds to a normal.\n"
           "e2m1, e2m3 and e3m2 (MX elements) saturate: from overflow_at on they hold their max; e8m0 (the MX\n"
           "scale) is an unsigned power of two without zero (docs/numerics.md, \"Block formats\").\n");
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

/* The MX element formats: the same table for the saturating rows. */
static void print_mx_values(const float *vals, int nv, int ftz)
{
    char line[512];
    int len = snprintf(line, sizeof line, "%-16s", "value");
    for (int f = AMPDIAG_E2M1; f <= AMPDIAG_E3M2; f++) {
        const ampdiag_format_info *i = ampdiag_format_get((ampdiag_format)f);
        len += snprintf(line + len, sizeof line - (size_t)len, " %-12s %-4s %-10s", i->name, "bits", "");
    }
    put_trimmed(line);
    for (int k = 0; k < nv; k++) {
        float v = vals[k];
        len = isnan(v) ? snprintf(line, sizeof line, "%-16s", "nan") : snprintf(line, sizeof line, "%-16.9g", v);
        for (int f = AMPDIAG_E2M1; f <= AMPDIAG_E3M2; f++) {
            const ampdiag_format_info *i = ampdiag_format_get((ampdiag_format)f);
            float r = ftz ? i->round_ftz(v) : i->round(v);
            char rs[32] = "nan";
            if (!isnan(r))
                snprintf(rs, sizeof rs, "%.9g", r);
            const char *c = classify((ampdiag_format)f, v, r, ftz);
            len += snprintf(line + len, sizeof line - (size_t)len, " %-12s 0x%02x %-10s", rs, i->encode(r),
                            strcmp(c, "OVERFLOW") == 0 ? "SATURATED" : c);
        }
        put_trimmed(line);
    }
}

/* What each scheme of the list does to the values as one tensor: a line per value (the decoded
 * value and what happened to it, per scheme), then a line per scheme (blocks, scales, counts,
 * error). 0, or EXIT_USAGE / EXIT_IO after a message. */
static int print_whatif(const char *list, const float *vals, int nv, size_t rows, size_t cols)
{
    ampdiag_qspec sp[64];
    size_t ns;
    char why[200];
    if (ampdiag_qspec_parse(list, sp, 64, &ns, why, sizeof why) != 0) {
        fprintf_text(stderr, "ampdiag formats: --whatif %s\n", why);
        return EXIT_USAGE;
    }
    if (ns == 0) {
        fprintf(stderr, "ampdiag formats: --whatif: no scheme in the list\n");
        return EXIT_USAGE;
    }
    double *dec = malloc((size_t)nv * ns * sizeof *dec);
    ampdiag_qstats *q = malloc(ns * sizeof *q);
    if (!dec || !q) {
        fprintf(stderr, "ampdiag formats: out of memory\n");
        free(dec);
        free(q);
        return EXIT_IO;
    }
    for (size_t k = 0; k < ns; k++)
        if (ampdiag_quant_values(vals, (size_t)nv, rows, cols, -1.0f, &sp[k], dec + k * (size_t)nv, &q[k]) != 0) {
            fprintf(stderr, "ampdiag formats: --shape %zux%zu does not fit %d values\n", rows, cols, nv);
            free(dec);
            free(q);
            return EXIT_USAGE;
        }
    size_t skipped = 0;
    for (size_t k = 0; k < ns; k++)
        skipped += !q[k].computed;
    char line[4096], name[64];
    int len = snprintf(line, sizeof line, "%-16s", "value");
    for (size_t k = 0; k < ns; k++) {
        if (!q[k].computed)
            continue;
        ampdiag_qspec_name(&sp[k], name, sizeof name);
        len += snprintf(line + len, sizeof line - (size_t)len, " %-28s", name);
    }
    put_trimmed(line);
    for (int i = 0; i < nv; i++) {
        float v = vals[i];
        len = isnan(v) ? snprintf(line, sizeof line, "%-16s", "nan") : snprintf(line, sizeof line, "%-16.9g", v);
        for (size_t k = 0; k < ns && len < (int)sizeof line - 40; k++) {
            if (!q[k].computed)
                continue;
            double d = dec[k * (size_t)nv + (size_t)i];
            char cell[48];
            const char *what = !isfinite(v) ? "" : isnan(d) ? "POISONED" : v != 0 && d == 0 ? "FLUSHED" : "";
            if (isnan(d))
                snprintf(cell, sizeof cell, "nan %s", what);
            else
                snprintf(cell, sizeof cell, "%.9g %s", d, what);
            len += snprintf(line + len, sizeof line - (size_t)len, " %-28s", cell);
        }
        put_trimmed(line);
    }
    printf("\n%-28s %-7s %-13s %-9s %-9s %-9s %-10s %-10s %s\n", "scheme", "blocks", "scale_exp", "flushed", "saturated",
           "subnormal", "SQNR_dB", "max_rel", "notes");
    for (size_t k = 0; k < ns; k++) {
        if (!q[k].computed)
            continue;
        ampdiag_qspec_name(&sp[k], name, sizeof name);
        char se[32] = "-", notes[160] = "";
        uint64_t scaled = 0;
        for (int b = 0; b < AMPDIAG_QHIST_BINS; b++)
            scaled += q[k].scale_hist[b];
        if (scaled)
            snprintf(se, sizeof se, "%d..%d", q[k].scale_emin, q[k].scale_emax);
        int nl = 0;
        if (q[k].scale_underflow)
            nl += snprintf(notes + nl, sizeof notes - (size_t)nl, "%llu scale(s) underflowed; ",
                           (unsigned long long)q[k].scale_underflow);
        if (q[k].scale_clamped)
            nl += snprintf(notes + nl, sizeof notes - (size_t)nl, "%llu scale(s) clamped; ",
                           (unsigned long long)q[k].scale_clamped);
        if (q[k].poisoned)
            nl += snprintf(notes + nl, sizeof notes - (size_t)nl, "%llu poisoned by a NaN scale; ",
                           (unsigned long long)q[k].poisoned);
        if (q[k].spec.scheme == AMPDIAG_QS_NVFP4 || q[k].spec.scheme == AMPDIAG_QS_CURRENT)
            nl += snprintf(notes + nl, sizeof notes - (size_t)nl, "tensor scale %.9g; ", (double)q[k].scale);
        if (nl >= 2)
            notes[nl - 2] = '\0';
        snprintf(line, sizeof line, "%-28s %-7llu %-13s %-9llu %-9llu %-9llu %-10.4g %-10.4g %s", name,
                 (unsigned long long)q[k].blocks, se, (unsigned long long)q[k].flushed,
                 (unsigned long long)q[k].saturated, (unsigned long long)q[k].subnormal, ampdiag_qstats_sqnr_db(&q[k]),
                 q[k].max_rel_err, notes);
        put_trimmed(line);
    }
    if (skipped)
        printf("(%zu columnwise or 2-D scheme(s) left out: the values are a 1-D tensor; give --shape)\n", skipped);
    printf("\nscale_exp: the exponents of the blocks' decode scales (MX: E8M0; NVFP4: its E4M3 block scale;\n"
           "blockwise, current: 1/scale). A value decodes to q x scale; docs/numerics.md, \"Block formats\".\n");
    free(dec);
    free(q);
    return 0;
}

enum { O_FTZ = 1, O_HELP, O_WHATIF, O_SHAPE };

static const cli_opt options[] = {
    {"--ftz", 0, CLI_NOARG, O_FTZ}, {"--whatif", 0, CLI_ARG, O_WHATIF}, {"--shape", 0, CLI_ARG, O_SHAPE},
    {"--help", 'h', CLI_NOARG, O_HELP}, CLI_OPT_END};

int cmd_formats(int argc, char **argv)
{
    int ftz = 0, nv = 0;
    const char *whatif = NULL;
    size_t rows = 0, cols = 0;
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
        case O_WHATIF: whatif = p.arg; break;
        case O_SHAPE: {
            char *x = NULL, *end = NULL;
            unsigned long long r = strtoull(p.arg, &x, 10), c = 0;
            if (x && (*x == 'x' || *x == 'X'))
                c = strtoull(x + 1, &end, 10);
            if (!end || *end || r < 1 || c < 1 || r > 1000000 || c > 1000000 || p.arg[0] == '-') {
                fprintf_text(stderr, "ampdiag formats: --shape '%s': expected ROWSxCOLS, e.g. 4x32\n", p.arg);
                free(args);
                return EXIT_USAGE;
            }
            rows = (size_t)r;
            cols = (size_t)c;
            break;
        }
        case O_HELP: usage(stdout); free(args); return 0;
        case CLI_POS: args[nv++] = p.arg; break;
        default: free(args); return EXIT_USAGE;
        }
    }
    if (nv == 0) {
        if (whatif || rows) {
            fprintf(stderr, "ampdiag formats: --whatif and --shape need values\n");
            free(args);
            return EXIT_USAGE;
        }
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
    int rc = 0;
    if (whatif) {
        if (ftz)
            fprintf(stderr, "ampdiag formats: --ftz does not apply to --whatif (the recipes keep subnormals)\n");
        rc = print_whatif(whatif, vals, nv, rows, cols);
    } else {
        print_values(vals, nv, ftz);
        printf("\n");
        print_mx_values(vals, nv, ftz);
    }
    free(vals);
    free(args);
    return rc;
}
