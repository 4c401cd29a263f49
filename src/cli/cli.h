/*
 * cli.h - what the subcommands share: exit codes and the command table.
 */
#ifndef AMPDIAG_CLI_H
#define AMPDIAG_CLI_H

/* Exit status (README.md, "Exit status" under "Commands"): only src/cli/ knows these. */
enum {
    EXIT_OK_ = 0,
    EXIT_FAIL_ON = 1, /* a --fail-on condition held */
    EXIT_USAGE = 2,   /* bad usage or bad input file */
    EXIT_IO = 3       /* I/O or resource failure */
};

typedef int (*cmd_fn)(int argc, char **argv);

struct cmd {
    const char *name;
    cmd_fn fn;
    const char *summary;
};

/* a is option name, alone or as "name=value". */
int cli_is_opt(const char *a, const char *name);
/* The value of option argv[*i] ("--opt=V", or "--opt V" advancing *i); NULL and a message on
 * stderr ("ampdiag CMD: --opt needs a value") when it has none. */
const char *cli_opt_value(const char *cmd, int argc, char **argv, int *i, const char *name);

/* Subcommands (src/cli/cmd_*.c). argv[0] is the subcommand name. */
int cmd_formats(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_sweep(int argc, char **argv);

#endif
