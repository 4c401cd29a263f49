/*
 * cli.c - what the subcommands' option parsers share.
 */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

int cli_is_opt(const char *a, const char *name)
{
    size_t len = strlen(name);
    return strncmp(a, name, len) == 0 && (a[len] == 0 || a[len] == '=');
}

const char *cli_opt_value(const char *cmd, int argc, char **argv, int *i, const char *name)
{
    const char *a = argv[*i];
    size_t len = strlen(name);
    if (a[len] == '=')
        return a + len + 1;
    if (*i + 1 < argc)
        return argv[++*i];
    fprintf(stderr, "ampdiag %s: %s needs a value (see ampdiag %s --help)\n", cmd, name, cmd);
    return NULL;
}
