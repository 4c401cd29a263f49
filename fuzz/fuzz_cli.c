/*
 * fuzz_cli.c - libFuzzer target: the command line. The input is one argument per line; the
 * program's own main (src/cli/main.c, built with main renamed ampdiag_main) dispatches them
 * to the subcommand, which parses them with its real option table and value checks. When a
 * subcommand's options are all read (cli_parsed_hook), the target leaves: no trace is opened,
 * no file written, no training started. Errors go to stderr (run with -close_fd_mask=3).
 *
 * Leaving by longjmp skips what the command would free after its work: leak detection is off
 * for this target (here and with -detect_leaks=0 in fuzz.mk).
 */
#include "cli/cli.h"

#include <getopt.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ampdiag_main(int argc, char **argv);

/* read by AddressSanitizer at start: no leak report at exit either */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

enum { MAX_ARGS = 64, MAX_BYTES = 4096 };

static jmp_buf parsed;

static void leave(const cli_parser *p)
{
    if (*p->cmd) /* a subcommand's parser, not the program's own */
        longjmp(parsed, 1);
}

/* getopt keeps a pointer into the last argv when a cluster ("-xyz") was cut short by an error:
 * start every input from a clean state */
static void reset_getopt(void)
{
    static char prog[] = "ampdiag";
    char *av[] = {prog, NULL};
    optind = 0;
    opterr = 0;
    (void)getopt(1, av, "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_BYTES)
        return 0;
    char *buf = malloc(size + 1);
    char *argv[MAX_ARGS + 2];
    static char prog[] = "ampdiag";
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\n';
    int argc = 0;
    argv[argc++] = prog;
    for (char *s = buf, *end = buf + size; s <= end && argc <= MAX_ARGS;) {
        char *nl = memchr(s, '\n', (size_t)(end - s) + 1);
        *nl = 0;
        argv[argc++] = s;
        s = nl + 1;
    }
    argv[argc] = NULL;
    reset_getopt();
    cli_parsed_hook = leave;
    if (setjmp(parsed) == 0)
        (void)ampdiag_main(argc, argv);
    cli_parsed_hook = NULL;
    free(buf);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* --help and the like print to stdout */
    if (!freopen("/dev/null", "w", stdout))
        abort();
    return 0;
}
