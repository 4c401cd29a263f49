/*
 * main.c - the command line: dispatch to one subcommand per src/cli/cmd_*.c file.
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "cli/cli.h"
#include "messages/messages.h"
#include "util/escape.h"
#include "util/wrap.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static const struct cmd commands[] = {
    {"run", cmd_run, "train a model in the instrumented loop and write an HDF5 trace"},
    {"formats", cmd_formats, "limits of fp32/fp16/bf16 and what rounding values to them does"},
    {"info", cmd_info, "summary of one trace: status, loss, scale, events, fp16/bf16 headroom"},
    {"plot", cmd_plot, "gnuplot charts of one or more traces (loss, scale, layer ranges, ...)"},
    {"compare", cmd_compare, "compare traces; recommend a precision, loss scale, lr and clip"},
    {"sweep", cmd_sweep, "run several precisions / learning rates, then compare them"},
    {"tune", cmd_tune, "the closed loop: run, compare, re-run at the advised lr, verify the advice"},
    {"lrfind", cmd_lrfind, "the learning-rate range test: valley, steepest and minimum suggestions"},
    {"selftest", cmd_selftest, "check this build here: rounding, short runs, a GPU against the CPU"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* Read by help2man to make the man page (ampdiag.1): "Usage:", the description with its
 * subsections ("Commands:", "Exit status:": a line ending in ':', then indented items), then
 * "Options:". scripts/man-commands.sh finds the commands under "Commands:". */
static void usage(FILE *f)
{
    fprintf(f,
            "Usage: ampdiag COMMAND [OPTION]... [ARGUMENT]...\n"
            "  or:  ampdiag help [COMMAND]\n"
            "  or:  ampdiag help terms|rules [--format md]\n"
            "  or:  ampdiag --version\n"
            "Numerical-stability diagnostics for mixed-precision (FP16 / BF16) training: train a\n"
            "model in an instrumented loop recording what the 16-bit formats do to it into an HDF5\n"
            "trace, then compare traces and recommend a precision, a loss scale, a learning rate\n"
            "and a clip value.\n"
            "\n"
            "Commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "`ampdiag COMMAND --help` (or `ampdiag help COMMAND`) lists a command's options.\n"
            "`ampdiag help terms` defines every figure and term the reports use; `ampdiag help\n"
            "rules` lists the constants, findings and rules' words (Markdown). Every\n"
            "command takes --opt=VALUE or --opt VALUE, the short options it lists (-o FILE),\n"
            "arguments among the options, and -- to end the options (for a file named -x.h5).\n"
            "\n"
            "Exit status:\n"
            "  0      success (a run that diverged is data and exits 0)\n"
            "  1      a --fail-on condition held\n"
            "  2      bad usage or input\n"
            "  3      I/O or resource failure\n"
            "  130    run or sweep stopped by SIGINT (143: by SIGTERM) after marking its traces\n"
            "         interrupted\n"
            "\n"
            "Options:\n"
            "  -h, --help     print this help and exit\n"
            "  --version      print the version and exit\n");
}

static const struct cmd *find_cmd(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0)
            return &commands[i];
    return NULL;
}

/* "ampdiag[ CMD]: unknown command 'X'; did you mean 'Y'?" */
static void unknown_command(const char *who, const char *name)
{
    const char *names[NCOMMANDS + 2];
    for (size_t i = 0; i < NCOMMANDS; i++)
        names[i] = commands[i].name;
    names[NCOMMANDS] = "help";
    names[NCOMMANDS + 1] = "version";
    const char *s = cli_suggest(name, names, (int)NCOMMANDS + 2);
    if (s)
        fprintf_text(stderr, "%s: unknown command '%s'; did you mean '%s'?\n", who, name, s);
    else
        fprintf_text(stderr, "%s: unknown command '%s' (see ampdiag --help)\n", who, name);
}

/* ampdiag help terms|rules [--format md|text]: the glossary (text wrapped to the terminal, or
 * Markdown: docs/glossary.md) or the rules' reference (Markdown: docs/recommendations.md's
 * generated part). */
static int help_topic(int argc, char **argv)
{
    int md = argv[1][0] == 'r'; /* the rules' reference is Markdown only */
    for (int i = 2; i < argc; i++) {
        const char *v = strncmp(argv[i], "--format=", 9) == 0 ? argv[i] + 9
                        : strcmp(argv[i], "--format") == 0 && i + 1 < argc ? argv[++i] : NULL;
        if (v && (strcmp(v, "md") == 0 || strcmp(v, "markdown") == 0)) {
            md = 1;
        } else if (v && strcmp(v, "text") == 0 && argv[1][0] == 't') {
            md = 0;
        } else {
            fprintf_text(stderr, "ampdiag help %s: unexpected '%s' (usage: ampdiag help %s [--format md])\n",
                         argv[1], argv[i], argv[1]);
            return EXIT_USAGE;
        }
    }
    int rc = argv[1][0] == 'r' ? msg_rules_markdown(stdout)
             : md             ? msg_glossary_markdown(stdout)
                              : msg_glossary_text(stdout, wrap_width(stdout));
    return rc || fflush(stdout) ? EXIT_IO : 0;
}

/* ampdiag help [COMMAND]: as COMMAND --help */
static int help(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "terms") == 0 || strcmp(argv[1], "rules") == 0))
        return help_topic(argc, argv);
    if (argc == 1 || (argc == 2 && (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "version") == 0 ||
                                    strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))) {
        usage(stdout);
        return 0;
    }
    if (argc > 2) {
        fprintf(stderr, "ampdiag help: one command at a time (usage: ampdiag help [COMMAND])\n");
        return EXIT_USAGE;
    }
    const struct cmd *c = find_cmd(argv[1]);
    if (!c) {
        unknown_command("ampdiag help", argv[1]);
        return EXIT_USAGE;
    }
    static char opt_help[] = "--help";
    char *hv[] = {argv[1], opt_help, NULL};
    return c->fn(2, hv);
}

enum { O_HELP = 1, O_VERSION };

static const cli_opt options[] = {
    {"--help", 'h', CLI_NOARG, O_HELP}, {"--version", 0, CLI_NOARG, O_VERSION}, CLI_OPT_END};

int main(int argc, char **argv)
{
    /* a full disk or a file-size limit is an I/O error to report (exit 3), not a crash: writes
     * fail with EFBIG instead of SIGXFSZ killing the process, and HDF5's exit handler (which
     * crashes on a file whose close failed) is not installed */
    signal(SIGXFSZ, SIG_IGN);
    if (ampdiag_trace_process_init() < 0)
        fprintf(stderr, "ampdiag: warning: could not switch off HDF5's exit handler\n");
    cli_parser p;
    if (cli_parser_init(&p, "", options, argc, argv, 0))
        return EXIT_USAGE;
    for (;;) {
        switch (cli_next(&p)) {
        case O_HELP:
            usage(stdout);
            return 0;
        case O_VERSION:
            printf("ampdiag %s\n", ampdiag_version());
            return 0;
        case CLI_DONE:
            usage(stderr);
            return EXIT_USAGE;
        case CLI_POS: {
            /* the command: it gets the arguments from its name on */
            int k = p.ind - 1;
            const char *name = argv[k];
            if (strcmp(name, "help") == 0)
                return help(argc - k, argv + k);
            if (strcmp(name, "version") == 0) {
                printf("ampdiag %s\n", ampdiag_version());
                return 0;
            }
            const struct cmd *c = find_cmd(name);
            if (!c) {
                unknown_command("ampdiag", name);
                return EXIT_USAGE;
            }
            return c->fn(argc - k, argv + k);
        }
        default:
            return EXIT_USAGE;
        }
    }
}
