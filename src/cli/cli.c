/*
 * cli.c - the option parser every subcommand uses (see cli.h): a table of options turned into
 * getopt_long's, long names matched in full here first (so that a typo is named with the
 * closest option instead of being taken as an abbreviation), "--" and positional arguments
 * handled here, values and short-option clusters by getopt_long.
 */
#include "cli/cli.h"
#include "backend/backend.h"
#include "util/escape.h"
#include "util/path.h"

#include <getopt.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* "ampdiag CMD: " (or "ampdiag: " for the program's own options) and the message, on stderr */
__attribute__((format(printf, 2, 3)))
static void say(const cli_parser *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf_text(stderr, "ampdiag%s%s: ", *p->cmd ? " " : "", p->cmd);
    vfprintf_text(stderr, fmt, ap);
    va_end(ap);
}

/* getopt_long's val for table entry i: its short letter, or 256 + i */
static int val_of(const cli_opt *o, int i) { return o->shortopt ? (unsigned char)o->shortopt : 256 + i; }

static const cli_opt *by_val(const cli_parser *p, int val)
{
    for (int i = 0; i < p->nopts; i++)
        if (val_of(&p->opts[i], i) == val)
            return &p->opts[i];
    return NULL;
}

int cli_parser_init(cli_parser *p, const char *cmd, const cli_opt *opts, int argc, char **argv,
                    unsigned flags)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->opts = opts;
    p->argc = argc;
    p->argv = argv;
    p->flags = flags;
    p->ind = 1;
    size_t k = 0;
    p->shortopts[k++] = '+'; /* stop at the first non-option: positionals are handled here */
    p->shortopts[k++] = ':'; /* ':' for a missing value, '?' for an unknown option */
    int n = 0;
    for (; opts[n].name; n++) {
        const cli_opt *o = &opts[n];
        if (n == CLI_MAX_OPTS || o->id <= 0 || strncmp(o->name, "--", 2) != 0 || !o->name[2]) {
            say(p, "internal error: bad option table at '%s'\n", o->name);
            return -1;
        }
        for (int j = 0; j < n; j++)
            if ((o->shortopt && o->shortopt == opts[j].shortopt) || strcmp(o->name, opts[j].name) == 0) {
                say(p, "internal error: option '%s' given twice\n", o->name);
                return -1;
            }
        if (o->shortopt) {
            p->shortopts[k++] = o->shortopt;
            if (o->has_arg)
                p->shortopts[k++] = ':';
        }
        p->longopts[n].name = o->name + 2;
        p->longopts[n].has_arg = o->has_arg ? required_argument : no_argument;
        p->longopts[n].flag = NULL;
        p->longopts[n].val = val_of(o, n);
    }
    p->shortopts[k] = 0;
    p->nopts = n;
    memset(&p->longopts[n], 0, sizeof p->longopts[n]);
    /* Reset getopt's state (optind = 0 re-initialises glibc's scanner) on an argv of one
     * element, so that every later call starts where optind says, at p->ind. */
    static char prog[] = "ampdiag";
    char *none[] = {prog, NULL};
    optind = 0;
    opterr = 0;
    (void)getopt_long(1, none, "+:", p->longopts, NULL);
    return 0;
}

const char *cli_opt_name(const cli_opt *opts, int id)
{
    for (; opts->name; opts++)
        if (opts->id == id)
            return opts->name;
    return "?";
}

/* Edit distance with adjacent transpositions ("optimal string alignment"); -1 if too long. */
static int distance(const char *a, const char *b)
{
    enum { MAXLEN = 64 };
    size_t n = strlen(a), m = strlen(b);
    if (n > MAXLEN || m > MAXLEN)
        return -1;
    int d[MAXLEN + 1][MAXLEN + 1];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[n][m];
}

const char *cli_suggest(const char *s, const char *const *cands, int n)
{
    size_t core = strlen(s + strspn(s, "-")), len = strlen(s);
    /* s abbreviates exactly one candidate */
    const char *prefix_of = NULL;
    int nprefix = 0;
    for (int i = 0; i < n && core >= 2; i++)
        if (strncmp(cands[i], s, len) == 0) {
            prefix_of = cands[i];
            nprefix++;
        }
    if (nprefix == 1)
        return prefix_of;
    /* else the closest, if the typo is small next to the word: at most 2 edits, and fewer
     * than half its letters */
    const char *best = NULL;
    int bestd = 3;
    for (int i = 0; i < n; i++) {
        int d = distance(s, cands[i]);
        if (d >= 0 && d < bestd && 2 * (size_t)d < core) {
            best = cands[i];
            bestd = d;
        }
    }
    return best;
}

static void unknown_option(const cli_parser *p, const char *a, size_t len)
{
    const char *names[CLI_MAX_OPTS];
    for (int i = 0; i < p->nopts; i++)
        names[i] = p->opts[i].name;
    char given[128];
    snprintf(given, sizeof given, "%.*s", (int)(len < sizeof given ? len : sizeof given - 1), a);
    const char *s = cli_suggest(given, names, p->nopts);
    if (s)
        say(p, "unknown option '%s'; did you mean '%s'?\n", given, s);
    else
        say(p, "unknown option '%s' (see ampdiag%s%s --help)\n", given, *p->cmd ? " " : "", p->cmd);
}

/* a long option given in full (up to '=' if any), or NULL */
static const cli_opt *find_long(const cli_parser *p, const char *a, size_t len)
{
    for (int i = 0; i < p->nopts; i++)
        if (strlen(p->opts[i].name) == len && strncmp(p->opts[i].name, a, len) == 0)
            return &p->opts[i];
    return NULL;
}

static int is_number(const char *s)
{
    char *end;
    (void)strtod(s, &end);
    return end != s && !*end;
}

void (*cli_parsed_hook)(const cli_parser *p);

/* CLI_DONE, after telling the hook */
static int done(const cli_parser *p)
{
    if (cli_parsed_hook)
        cli_parsed_hook(p);
    return CLI_DONE;
}

int cli_next(cli_parser *p)
{
    p->arg = NULL;
    p->opt = NULL;
    if (!p->cluster) {
        /* a new argument: positional, "--", a long option (checked here) or short ones */
        for (;;) {
            if (p->ind >= p->argc)
                return done(p);
            char *a = p->argv[p->ind];
            if (p->rest || a[0] != '-' || a[1] == 0 || ((p->flags & CLI_NUMBERS) && is_number(a))) {
                p->ind++;
                p->arg = a;
                return CLI_POS;
            }
            if (strcmp(a, "--") != 0)
                break;
            p->rest = 1;
            p->ind++;
        }
        const char *a = p->argv[p->ind];
        size_t len = strcspn(a, "=");
        if (a[1] == '-') {
            const cli_opt *o = find_long(p, a, len);
            if (!o) {
                unknown_option(p, a, len);
                return CLI_ERR;
            }
            if (a[len] == '=' && !o->has_arg) {
                say(p, "option '%s' takes no value (got '%s')\n", o->name, a);
                return CLI_ERR;
            }
        } else if (len > 2) {
            /* -steps for --steps: say so rather than read it as -s teps */
            char dashed[128];
            snprintf(dashed, sizeof dashed, "-%.*s", (int)(len < 120 ? len : 120), a);
            const cli_opt *o = find_long(p, dashed, strlen(dashed));
            if (o) {
                say(p, "unknown option '%.*s'; did you mean '%s'?\n", (int)len, a, o->name);
                return CLI_ERR;
            }
        }
        optind = p->ind;
    }
    int before = optind;
    int c = getopt_long(p->argc, p->argv, p->shortopts, p->longopts, NULL);
    p->cluster = c != -1 && optind == before; /* the rest of "-abc" comes next */
    p->ind = optind;
    if (c == -1)
        return done(p);
    if (c == ':') {
        const cli_opt *o = by_val(p, optopt);
        char sh[8] = "";
        if (o && o->shortopt)
            snprintf(sh, sizeof sh, " (-%c)", o->shortopt);
        say(p, "option '%s'%s needs a value\n", o ? o->name : "?", sh);
        return CLI_ERR;
    }
    const cli_opt *o = c == '?' ? NULL : by_val(p, c);
    if (!o) {
        if (optopt > 0 && optopt < 256)
            say(p, "unknown option '-%c' (see ampdiag%s%s --help)\n", optopt, *p->cmd ? " " : "", p->cmd);
        else
            say(p, "bad option '%s' (see ampdiag%s%s --help)\n", p->argv[p->ind > 0 ? p->ind - 1 : 0],
                *p->cmd ? " " : "", p->cmd);
        return CLI_ERR;
    }
    p->opt = o;
    p->arg = o->has_arg ? optarg : NULL;
    return o->id;
}

int cli_with_run_options(cli_opt *t, const cli_opt *own, int (*id_of)(const char *name))
{
    int n = 0;
    for (const cli_opt *o = own; o->name; o++) {
        if (n == CLI_MAX_OPTS)
            return -1;
        t[n++] = *o;
    }
    for (const cli_opt *r = run_options; r->name; r++) {
        int taken = 0;
        for (int i = 0; i < n; i++)
            taken |= strcmp(t[i].name, r->name) == 0 || (r->shortopt && r->shortopt == t[i].shortopt);
        if (taken)
            continue;
        if (n == CLI_MAX_OPTS)
            return -1;
        t[n] = *r;
        t[n++].id = id_of(r->name);
    }
    t[n] = (cli_opt)CLI_OPT_END;
    return 0;
}

int cli_check_passed_option(const char *prog, const cli_opt *opt, const char *value)
{
    char err[256];
    if (!opt || !value || strcmp(opt->name, "--device") != 0 || backend_available(value, err, sizeof err) == 0)
        return 0;
    fprintf(stderr, "%s: --device %s: %s\n", prog, value, err);
    return EXIT_USAGE;
}

int cli_check_output(const char *prog, const char *opt, const char *path, int overwrite)
{
    char msg[700];
    int rc = path_check_output(path, overwrite, msg, sizeof msg);
    if (!rc)
        return 0;
    fprintf_text(stderr, "%s: %s%s%s\n", prog, opt ? opt : "", opt ? " " : "", msg);
    return rc == 2 ? EXIT_USAGE : EXIT_IO;
}

void cli_say_lines(const char *prog, const char *msg)
{
    for (int first = 1; *msg; first = 0) {
        size_t len = strcspn(msg, "\n");
        fprintf_text(stderr, "%s%s%.*s\n", first ? prog : "", first ? ": " : "", (int)len, msg);
        msg += len + (msg[len] == '\n');
    }
}

int cli_run_self(char **argv, const char *stdout_path, const char *prog)
{
    char exe[4096];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el <= 0)
        snprintf(exe, sizeof exe, "ampdiag");
    else
        exe[el] = 0;
    argv[0] = exe;
    posix_spawn_file_actions_t fa;
    pid_t pid;
    int rc = posix_spawn_file_actions_init(&fa);
    if (!rc && stdout_path)
        rc = posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, stdout_path,
                                              O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (!rc)
        rc = el > 0 ? posix_spawn(&pid, exe, &fa, NULL, argv, environ)
                    : posix_spawnp(&pid, exe, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc) {
        fprintf_text(stderr, "%s: cannot run '%s': %s\n", prog, exe, strerror(rc));
        return EXIT_IO;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return EXIT_IO;
    return WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_SIGNAL + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}
