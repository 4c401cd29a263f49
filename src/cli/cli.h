/*
 * cli.h - what the subcommands share: exit codes, the command table and the option parser.
 */
#ifndef AMPDIAG_CLI_H
#define AMPDIAG_CLI_H

#include <getopt.h>

/* Exit status (README.md, "Exit status" under "Commands"): only src/cli/ knows these. A run or
 * sweep stopped by SIGINT/SIGTERM exits 128 + the signal's number (130, 143), as shells report
 * a process killed by it. */
enum {
    EXIT_OK_ = 0,
    EXIT_FAIL_ON = 1, /* a --fail-on condition held */
    EXIT_USAGE = 2,   /* bad usage or bad input file */
    EXIT_IO = 3,      /* I/O or resource failure */
    EXIT_SIGNAL = 128 /* + the signal that stopped a run */
};

typedef int (*cmd_fn)(int argc, char **argv);

struct cmd {
    const char *name;
    cmd_fn fn;
    const char *summary;
};

/* ------------------------------------------------------------------------------------------
 * The option parser: one table per command, getopt_long (glibc) underneath.
 *
 *     static const cli_opt opts[] = {
 *         {"--steps", 's', CLI_ARG, O_STEPS}, {"--ftz", 0, CLI_NOARG, O_FTZ},
 *         {"--help", 'h', CLI_NOARG, O_HELP}, CLI_OPT_END};
 *     cli_parser p;
 *     if (cli_parser_init(&p, "run", opts, argc, argv, 0)) return EXIT_USAGE;
 *     for (int id; (id = cli_next(&p)) != CLI_DONE;)
 *         switch (id) { case O_STEPS: use(p.arg); break; case CLI_POS: file(p.arg); break;
 *                       case CLI_ERR: return EXIT_USAGE; ... }
 *
 * Accepted: --opt=V, --opt V, -s V, -sV, clusters of short options (-hv), positional arguments
 * anywhere among the options, and "--" after which every argument is positional (a file named
 * -x.h5). Long names must be given in full (no abbreviations: a new option must not break a
 * command line that worked). On an error cli_next prints one line on stderr naming the option
 * ("ampdiag run: unknown option '--step'; did you mean '--steps'?", "ampdiag run: option
 * '--steps' (-s) needs a value", "... takes no value") and returns CLI_ERR: exit 2.
 * ------------------------------------------------------------------------------------------ */

enum { CLI_NOARG = 0, CLI_ARG = 1 };

typedef struct cli_opt {
    const char *name; /* long name with its dashes: "--steps" */
    char shortopt;    /* 's' for -s, or 0 */
    int has_arg;      /* CLI_NOARG or CLI_ARG */
    int id;           /* what cli_next returns for it; > 0 */
} cli_opt;

#define CLI_OPT_END {0, 0, 0, 0}

/* cli_next's answers besides an option's id */
enum { CLI_DONE = 0, CLI_ERR = -1, CLI_POS = -2 };

/* flags */
enum {
    CLI_NUMBERS = 1 /* an argument that is a number ("-1e-8", "-inf") is positional */
};

enum { CLI_MAX_OPTS = 128 };

typedef struct cli_parser {
    const char *cmd;     /* "run": messages say "ampdiag run: ..." ("" for ampdiag's own) */
    const cli_opt *opts; /* the table, ended by CLI_OPT_END */
    int argc;
    char **argv;
    unsigned flags;
    /* after cli_next: */
    const char *arg;    /* the option's value (NULL if it takes none) or the positional argument */
    const cli_opt *opt; /* the option returned (NULL for a positional argument) */
    int ind;            /* index in argv of the next argument to look at */
    /* private */
    int nopts, rest, cluster;
    struct option longopts[CLI_MAX_OPTS + 1];
    char shortopts[3 * CLI_MAX_OPTS + 3];
} cli_parser;

/* argv[0] is the command's name and is skipped. Returns 0, or -1 (with a message) when the
 * table is malformed (too long, an id <= 0, a short letter used twice). */
int cli_parser_init(cli_parser *p, const char *cmd, const cli_opt *opts, int argc, char **argv,
                    unsigned flags);
/* The next option's id (p->arg its value), CLI_POS (p->arg the argument), CLI_DONE at the end,
 * or CLI_ERR after printing what is wrong. */
int cli_next(cli_parser *p);
/* Called by cli_next when the options of a parser are all read, just before it returns CLI_DONE;
 * NULL (nothing called) in the program. The option-parser fuzz target (fuzz/fuzz_cli.c) sets it
 * to leave there, so that argv is parsed as each command parses it and no work starts. */
extern void (*cli_parsed_hook)(const cli_parser *p);
/* The long name ("--steps") of the option with this id in a table; "?" if none. */
const char *cli_opt_name(const cli_opt *opts, int id);

/* The candidate closest to s by edit distance (adjacent swaps count 1) if it is close enough
 * to be a likely typo (or s is a prefix of it alone), else NULL. */
const char *cli_suggest(const char *s, const char *const *cands, int n);

/* A table for a command that passes `ampdiag run`'s options on (sweep, tune, lrfind): own, then
 * every run option own does not take (by long name or short letter), with the id id_of gives its
 * long name. 0, or -1 when it would not fit CLI_MAX_OPTS. t holds CLI_MAX_OPTS + 1. */
int cli_with_run_options(cli_opt *t, const cli_opt *own, int (*id_of)(const char *name));

/* A run option that a command passes on (sweep, tune, lrfind), checked before any run starts:
 * --device must name a backend that can run here (backend_available). 0, or EXIT_USAGE after a
 * message "PROG: --device D: why". */
int cli_check_passed_option(const char *prog, const cli_opt *opt, const char *value);

/* An output file of prog ("ampdiag run"), checked before any work (path_check_output: named,
 * not too long, nothing there or a regular file with overwrite, its directory writable; never
 * a directory, device, FIFO, socket or link). opt names it in the message ("--save-weights";
 * NULL: the path alone). 0, or EXIT_USAGE or EXIT_IO after a message. */
int cli_check_output(const char *prog, const char *opt, const char *path, int overwrite);

/* A message of several lines on stderr: "prog: " and its first line, then the others as they
 * are (a list of choices), each escaped as text. */
void cli_say_lines(const char *prog, const char *msg);

/* Run this program (/proc/self/exe, else ampdiag on PATH) with argv[1..] (argv[0] is set here),
 * its stdout to the file stdout_path (created or truncated; "/dev/null" to drop it; NULL: this
 * program's stdout), its stderr shared; wait for it. Returns its exit status, 128 + the signal that ended it, or EXIT_IO
 * (with a message naming prog) when it could not start. */
int cli_run_self(char **argv, const char *stdout_path, const char *prog);

/* Subcommands (src/cli/cmd_*.c). argv[0] is the subcommand name. */
int cmd_formats(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_lrfind(int argc, char **argv);
int cmd_selftest(int argc, char **argv);

/* `ampdiag run`'s options (cmd_run.c): the sweep passes them on and checks them first. */
extern const cli_opt run_options[];

#endif
