/*
 * cmd_selftest.c - `ampdiag selftest`: the checks of src/train/selftest.h, one line each.
 */
#include "cli/cli.h"
#include "train/selftest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define PROG "ampdiag selftest"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag selftest [--device D] [-s N] [-o DIR]\n"
            "\n"
            "Checks that this build computes here what it should, one line per check:\n"
            "  - the CPU backend's FP16/BF16 rounding (the SIMD code this CPU runs) against the\n"
            "    exact definition, on every 256th float32 bit pattern;\n"
            "  - every operation of the CPU backend (its SIMD code) against its portable code on\n"
            "    the same inputs (NaN, inf, subnormals, every FP16/BF16 threshold), bit for bit\n"
            "    or within a documented bound (sums in another order);\n"
            "  - N-step runs of the mlp and transformer presets in fp32, fp16 and bf16 on the CPU\n"
            "    (finite losses), and a repeated run that gives the same losses bit for bit;\n"
            "  - on a device (--device, or cuda by default where it is built and can run): its\n"
            "    exhaustive format check (all 2^32 float32 patterns against CUDA's conversions),\n"
            "    its statistics of crafted tensors against the CPU's (exact counts), every\n"
            "    operation of its table against the CPU's portable code, and the same\n"
            "    runs, whose per-step losses must agree with the CPU's within a tolerance per\n"
            "    precision (1e-4 fp32, 1e-2 fp16 and bf16, relative to max(1, |loss|): the GEMMs\n"
            "    sum in another order; 1e-2 for fp32 too with AMPDIAG_TF32=1), and a repeated\n"
            "    device run, bit for bit.\n"
            "Without a device the device parts are skipped, and the output says so.\n"
            "\n"
            "options:\n"
            "  --device D         the backend to check against the CPU: cuda, cuda:N (or cpu)\n"
            "  -s, --steps N      steps per run (default 20)\n"
            "  -o, --out DIR      keep the runs' traces in DIR (default: a temporary folder,\n"
            "                     removed)\n"
            "  -h, --help\n"
            "\n"
            "exit status: 0 every check that ran passed, 1 a check failed, 2 bad usage or the\n"
            "device named cannot run here (no GPU, no driver), 3 I/O failure\n");
}

static void print_report(const st_report *r, void *arg)
{
    (void)arg;
    static const char *const tag[3] = {"ok  ", "FAIL", "skip"};
    printf("%s %s: %s\n", tag[r->status], r->what, r->detail);
    fflush(stdout);
}

enum { O_DEVICE = 1, O_STEPS, O_OUT, O_HELP };

static const cli_opt options[] = {
    {"--device", 0, CLI_ARG, O_DEVICE}, {"--steps", 's', CLI_ARG, O_STEPS}, {"--out", 'o', CLI_ARG, O_OUT},
    {"--help", 'h', CLI_NOARG, O_HELP}, CLI_OPT_END};

static int parse_steps(const char *v, long *steps)
{
    char *end;
    errno = 0;
    *steps = strtol(v, &end, 10);
    if (end == v || *end || errno || *steps < 1 || *steps > 100000) {
        fprintf(stderr, PROG ": --steps needs a number of steps in 1..100000, got '%s'\n", v);
        return EXIT_USAGE;
    }
    return 0;
}

int cmd_selftest(int argc, char **argv)
{
    selftest_options o = {NULL, NULL, 20, NULL};
    cli_parser p;
    int rc = 0;
    if (cli_parser_init(&p, "selftest", options, argc, argv, 0))
        return EXIT_USAGE;
    for (int id; !rc && (id = cli_next(&p)) != CLI_DONE;) {
        switch (id) {
        case O_DEVICE: o.device = p.arg; break;
        case O_STEPS: rc = parse_steps(p.arg, &o.steps); break;
        case O_OUT: o.dir = p.arg; break;
        case O_HELP: usage(stdout); return 0;
        case CLI_POS:
            fprintf(stderr, PROG ": unexpected argument '%s' (see ampdiag selftest --help)\n", p.arg);
            return EXIT_USAGE;
        default: return EXIT_USAGE;
        }
    }
    if (rc)
        return rc;
    char err[512];
    int failed = 0;
    rc = selftest_run(&o, print_report, NULL, &failed, err, sizeof err);
    if (rc) {
        fprintf(stderr, PROG ": %s\n", err);
        return rc == SELFTEST_EUSAGE ? EXIT_USAGE : EXIT_IO;
    }
    if (failed)
        printf("selftest: %d check%s FAILED\n", failed, failed == 1 ? "" : "s");
    else
        printf("selftest: passed\n");
    return failed ? EXIT_FAIL_ON : 0;
}
