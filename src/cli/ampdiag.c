/*
 * ampdiag.c - the command line: dispatch to one subcommand per src/cli/cmd_*.c file.
 */
#include "ampdiag.h"
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const struct cmd commands[] = {
    {"run", cmd_run, "train a model in the instrumented loop and write an HDF5 trace"},
    {"formats", cmd_formats, "limits of fp32/fp16/bf16 and what rounding values to them does"},
    {"info", cmd_info, "summary of one trace: status, loss, scale, events, fp16/bf16 headroom"},
    {"plot", cmd_plot, "gnuplot charts of one or more traces (loss, scale, layer ranges, ...)"},
    {"compare", cmd_compare, "compare traces; recommend a precision, loss scale, lr and clip"},
    {"sweep", cmd_sweep, "run several precisions / learning rates, then compare them"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f,
            "ampdiag %s - numerical-stability diagnostics for mixed-precision training\n"
            "\n"
            "usage: ampdiag COMMAND [options]   (ampdiag COMMAND --help for its options)\n"
            "\n"
            "commands:\n",
            ampdiag_version());
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "exit status: 0 success, 1 a --fail-on condition held, 2 bad usage or input,\n"
            "3 I/O or resource failure\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("ampdiag %s\n", ampdiag_version());
        return 0;
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "ampdiag: unknown command '%s' (see ampdiag --help)\n", argv[1]);
    return EXIT_USAGE;
}
