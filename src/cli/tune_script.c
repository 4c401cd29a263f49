/*
 * tune_script.c - `ampdiag tune -o DIR -- CMD ARGS...`: tune's rounds as runs of the user's own
 * command (tune_script.h). Each configuration is the command run once with environment
 * variables that say what to change (docs/pytorch.md, "tune on your own script"):
 *
 *   AMPDIAG_TUNE_TRACE      the trace to write (DIR/NAME/run-PRECISION.h5)
 *   AMPDIAG_TUNE_PRECISION  fp32, fp16 or bf16 (autocast's dtype)
 *   AMPDIAG_TUNE_LR         the learning rate (unset: the script's own)
 *   AMPDIAG_TUNE_<OPTION>   every `ampdiag run` option tune gives a run (--clip 0.5 ->
 *                           AMPDIAG_TUNE_CLIP=0.5, --loss-scale dynamic, --scale-init,
 *                           --fp32-layers, --optim-state, --schedule, --steps, --seed, ...)
 *
 * The commands run through the launcher of sweep's rounds (launch.c: local, -j at once, or a Slurm
 * job array with --launcher slurm), their output into DIR/NAME/run-PRECISION.log.
 */
#include "cli/tune_script.h"

#include "cli/cli.h"
#include "cli/launch.h"
#include "util/escape.h"

#include "ampdiag_trace.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENV_PREFIX "AMPDIAG_TUNE_"
#define TS_MAX_ENV 40

enum { TS_NO_TRACE = 0, TS_INCOMPLETE = 1, TS_COMPLETE = 2 };

typedef struct ts_run {
    char *trace, *log, *command;
    char *env[TS_MAX_ENV + 1]; /* "NAME=VALUE", NULL-ended */
    char precision[16];
    double lr;                 /* AMPDIAG_TUNE_LR, NaN: the script's own */
    int status;                /* its exit status (128 + a signal), -1: none */
    int signal;                /* the signal that ended it, 0 */
    double secs;
    int trace_state;           /* TS_*: what it left at AMPDIAG_TUNE_TRACE */
    char trace_words[200];     /* "no trace", "trace incomplete (status interrupted)", ... */
    char how[96];              /* "exit 1", "killed by signal 6 (SIGABRT)", ... */
    char *failure;             /* NULL: it ended with exit 0 and a complete trace; else why not */
} ts_run;

struct tune_script {
    char **cmd; /* NULL-ended copy of the command */
    int ncmd;
    char *line; /* the command as a shell would read it */
    ts_run *runs;
    size_t n, cap;
    size_t last, nlast; /* the runs of the last round: runs[last .. last + nlast) */
};

int tune_script_split(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--") == 0)
            return i;
    return argc;
}

static int exec_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

/* The command's program found as execvp would find it. */
static int found(const char *c)
{
    if (strchr(c, '/'))
        return exec_file(c);
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/bin:/usr/bin";
    for (const char *p = path;;) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char buf[4200];
        if (len + strlen(c) + 2 < sizeof buf) {
            snprintf(buf, sizeof buf, "%.*s/%s", (int)len, len ? p : ".", c);
            if (len == 0)
                snprintf(buf, sizeof buf, "./%s", c);
            if (exec_file(buf))
                return 1;
        }
        if (!e)
            return 0;
        p = e + 1;
    }
}

/* s appended to buf (n bytes), single-quoted when a shell would split or expand it. */
static void quote_into(char *buf, size_t n, const char *s)
{
    size_t len = strlen(buf);
    int plain = *s != 0;
    for (const char *c = s; *c && plain; c++)
        plain = isalnum((unsigned char)*c) || strchr("-_./=:,+@%", *c);
    if (plain) {
        snprintf(buf + len, n - len, "%s%s", len ? " " : "", s);
        return;
    }
    snprintf(buf + len, n - len, "%s'", len ? " " : "");
    for (const char *c = s; *c; c++) {
        len = strlen(buf);
        if (*c == '\'')
            snprintf(buf + len, n - len, "'\\''");
        else
            snprintf(buf + len, n - len, "%c", *c);
    }
    len = strlen(buf);
    snprintf(buf + len, n - len, "'");
}

int tune_script_open(tune_script **out, char **cmd, int ncmd, const char *prog)
{
    *out = NULL;
    if (ncmd <= 0 || !cmd[0][0]) {
        fprintf_text(stderr, "%s: nothing after '--': expected the command to run, as in `ampdiag tune -o DIR -- "
                     "python train.py ARGS` (docs/pytorch.md, \"tune on your own script\")\n", prog);
        return EXIT_USAGE;
    }
    if (!found(cmd[0])) {
        fprintf_text(stderr, "%s: -- %s: %s\n", prog, cmd[0],
                     strchr(cmd[0], '/') ? "no such executable file" : "command not found on PATH");
        return EXIT_USAGE;
    }
    tune_script *s = calloc(1, sizeof *s);
    if (!s || !(s->cmd = calloc((size_t)ncmd + 1, sizeof *s->cmd)) || !(s->line = calloc(8192, 1))) {
        if (s)
            free(s->cmd);
        free(s);
        fprintf_text(stderr, "%s: out of memory\n", prog);
        return EXIT_IO;
    }
    s->ncmd = ncmd;
    for (int i = 0; i < ncmd; i++) {
        s->cmd[i] = cmd[i];
        quote_into(s->line, 8192, cmd[i]);
    }
    /* variables of an earlier tune left in this environment would reach every run */
    extern char **environ;
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; e && *e; e++)
            if (strncmp(*e, ENV_PREFIX, strlen(ENV_PREFIX)) == 0) {
                char name[256];
                size_t len = strcspn(*e, "=");
                snprintf(name, sizeof name, "%.*s", (int)(len < 255 ? len : 255), *e);
                fprintf_text(stderr, "%s: %s was set in this environment: unset for the runs (tune sets "
                             "those it means)\n", prog, name);
                unsetenv(name);
                again = 1;
                break;
            }
    }
    *out = s;
    return 0;
}

void tune_script_free(tune_script *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->runs[i].trace);
        free(s->runs[i].log);
        free(s->runs[i].command);
        free(s->runs[i].failure);
        for (size_t k = 0; s->runs[i].env[k]; k++)
            free(s->runs[i].env[k]);
    }
    free(s->runs);
    free(s->cmd);
    free(s->line);
    free(s);
}

/* The options a script can be told (tune's own and the user's): docs/pytorch.md. */
static const char *const script_options[] = {"--steps", "--seed", "--clip", "--loss-scale", "--scale-init",
                                             "--fp32-layers", "--optim-state", "--schedule", "--eval-every",
                                             "--trace-every", "--hist-every"};

int tune_script_check_option(const char *prog, const char *name)
{
    for (size_t i = 0; i < sizeof script_options / sizeof script_options[0]; i++)
        if (strcmp(name, script_options[i]) == 0)
            return 0;
    fprintf_text(stderr, "%s: %s: not for a command after '--' (it is ampdiag run's; a script is told only "
                 "--steps, --seed, --clip, --loss-scale, --scale-init, --fp32-layers, --optim-state, --schedule "
                 "and --eval-every/--trace-every/--hist-every, as AMPDIAG_TUNE_* variables)\n", prog, name);
    return EXIT_USAGE;
}

int tune_script_check_precisions(const char *prog, const char *list)
{
    char copy[128];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save))
        if (strcmp(p, "fp32") && strcmp(p, "fp16") && strcmp(p, "bf16")) {
            fprintf_text(stderr, "%s: --precisions: '%s' is not for a command after '--' (fp32, fp16 or bf16: "
                         "autocast's dtype)\n", prog, p);
            return EXIT_USAGE;
        }
    return 0;
}

/* "--fp32-layers" -> "AMPDIAG_TUNE_FP32_LAYERS=" + value, into env (replacing one of that name). */
static int env_put(char **env, size_t *n, const char *option, const char *value)
{
    char name[128];
    size_t k = strlen(ENV_PREFIX);
    memcpy(name, ENV_PREFIX, k);
    for (const char *c = option + strspn(option, "-"); *c && k < sizeof name - 2; c++)
        name[k++] = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
    name[k++] = '=';
    name[k] = 0;
    size_t len = strlen(name) + strlen(value) + 1;
    char *e = malloc(len);
    if (!e)
        return -1;
    snprintf(e, len, "%s%s", name, value);
    for (size_t i = 0; i < *n; i++)
        if (strncmp(env[i], name, k) == 0) {
            free(env[i]);
            env[i] = e;
            return 0;
        }
    if (*n >= TS_MAX_ENV) {
        free(e);
        return -1;
    }
    env[(*n)++] = e;
    env[*n] = NULL;
    return 0;
}

static int regular(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* A new run of the registry (zeroed), or NULL. */
static ts_run *new_run(tune_script *s)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        ts_run *r = realloc(s->runs, cap * sizeof *r);
        if (!r)
            return NULL;
        s->runs = r;
        s->cap = cap;
    }
    ts_run *r = &s->runs[s->n++];
    memset(r, 0, sizeof *r);
    r->status = -1;
    return r;
}

static char *dup_printf(const char *a, const char *b, const char *c)
{
    size_t len = strlen(a) + strlen(b) + strlen(c) + 1;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s%s%s", a, b, c);
    return p;
}

/* The name of a signal a training command dies of ("SIGABRT"), or NULL. */
static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGABRT: return "SIGABRT";
    case SIGSEGV: return "SIGSEGV";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGHUP: return "SIGHUP";
    default: return NULL;
    }
}

/* The last line of the log that is not blank, into buf (at most n - 1 bytes, cut at a character
 * boundary); "" when it has none or cannot be read. */
static void log_last_line(const char *path, char *buf, size_t n)
{
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    char tail[2048];
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size > (long)sizeof tail - 1 && fseek(f, size - (long)sizeof tail + 1, SEEK_SET) != 0)
        size = -1;
    else if (size >= 0 && size <= (long)sizeof tail - 1 && fseek(f, 0, SEEK_SET) != 0)
        size = -1;
    size_t got = size >= 0 ? fread(tail, 1, sizeof tail - 1, f) : 0;
    fclose(f);
    tail[got] = 0;
    char *end = tail + strlen(tail); /* (a NUL in the log ends it there) */
    while (end > tail && isspace((unsigned char)end[-1]))
        end--;
    char *start = end;
    while (start > tail && start[-1] != '\n' && start[-1] != '\r')
        start--;
    while (start < end && isspace((unsigned char)*start))
        start++;
    size_t len = (size_t)(end - start);
    if (len > n - 1) {
        len = n - 1;
        while (len > 0 && ((unsigned char)start[len] & 0xC0) == 0x80) /* not inside a character */
            len--;
    }
    memcpy(buf, start, len);
    buf[len] = 0;
}

/* What run r left (its trace) and how it ended: r->trace_state, trace_words, how, failure. 0, or
 * -1 when out of memory. */
static int judge_run(ts_run *r)
{
    if (!regular(r->trace)) {
        r->trace_state = TS_NO_TRACE;
        snprintf(r->trace_words, sizeof r->trace_words, "no trace");
    } else {
        ampdiag_trace_reader *rd = NULL;
        int e = ampdiag_trace_open(r->trace, AMPDIAG_TRACE_READ_QUIET | AMPDIAG_TRACE_READ_NO_REPAIR, &rd);
        if (e) {
            r->trace_state = TS_INCOMPLETE;
            snprintf(r->trace_words, sizeof r->trace_words, "trace incomplete (it cannot be read: %s)",
                     ampdiag_trace_strerror(e));
        } else {
            ampdiag_trace_status st = ampdiag_trace_status_of(rd);
            const char *text = ampdiag_trace_status_text(rd);
            if (st == AMPDIAG_STATUS_COMPLETE || st == AMPDIAG_STATUS_DIVERGED) {
                r->trace_state = TS_COMPLETE;
                snprintf(r->trace_words, sizeof r->trace_words, "trace %s", text);
            } else {
                r->trace_state = TS_INCOMPLETE;
                snprintf(r->trace_words, sizeof r->trace_words, "trace incomplete (status %s%s)", text,
                         st == AMPDIAG_STATUS_RUNNING ? ": cut off" : "");
            }
            ampdiag_trace_reader_close(rd);
        }
    }
    const char *sn = signal_name(r->signal);
    if (r->signal > 0)
        snprintf(r->how, sizeof r->how, "killed by signal %d%s%s%s", r->signal, sn ? " (" : "", sn ? sn : "",
                 sn ? ")" : "");
    else if (r->status < 0)
        snprintf(r->how, sizeof r->how, "left no exit status");
    else
        snprintf(r->how, sizeof r->how, "exit %d", r->status);
    free(r->failure);
    r->failure = NULL;
    if (r->status == 0 && r->trace_state == TS_COMPLETE)
        return 0;
    char last[240], buf[1200];
    log_last_line(r->log, last, sizeof last);
    snprintf(buf, sizeof buf, "%s, %s; log %s%s%s%s", r->how, r->trace_words, r->log, last[0] ? " (it ends: \"" : "",
             last, last[0] ? "\")" : "");
    r->failure = dup_printf(buf, "", "");
    return r->failure ? 0 : -1;
}

/* The FP32 baseline failed: say so (the command, how it ended, what it left, the end of its
 * log). */
static void baseline_failed(const tune_script *s, const ts_run *r, const char *prog)
{
    char last[8];
    log_last_line(r->log, last, sizeof last);
    fprintf_text(stderr, "%s: the FP32 baseline failed: `%s` (run with AMPDIAG_TUNE_PRECISION=fp32): %s, %s. "
                 "Nothing else was run: the command must run to its end unchanged, in FP32, and write its trace "
                 "before tune can compare anything%s. Its log %s%s\n", prog, s->line, r->how, r->trace_words,
                 r->status == 0 && r->trace_state == TS_NO_TRACE
                     ? " (does it call ampdiag.torch.tune_config() and write cfg.trace(...)? docs/pytorch.md, "
                       "\"tune on your own script\")"
                     : "", r->log, last[0] ? " ends:" : " is empty");
    launch_log_tail(r->log);
}

int tune_script_round(tune_script *s, char **argv, const char *report, const char *prog)
{
    const char *precisions = NULL, *lrs = NULL, *dir = NULL, *jobs = NULL;
    launch_kind kind = LAUNCH_LOCAL;
    char *opts[2 * TS_MAX_ENV];
    size_t nopt = 0;
    for (int k = 2; argv[k] && argv[k + 1]; k += 2) {
        const char *o = argv[k], *v = argv[k + 1];
        if (!strcmp(o, "--precisions"))
            precisions = v;
        else if (!strcmp(o, "--lrs"))
            lrs = v;
        else if (!strcmp(o, "-o"))
            dir = v;
        else if (!strcmp(o, "-j"))
            jobs = v;
        else if (!strcmp(o, "--launcher")) {
            if (launch_kind_parse(v, &kind) != 0) {
                fprintf_text(stderr, "%s: internal: --launcher %s\n", prog, v);
                return EXIT_IO;
            }
        } else if (nopt + 2 <= sizeof opts / sizeof opts[0]) {
            opts[nopt++] = (char *)o;
            opts[nopt++] = (char *)v;
        }
    }
    if (!precisions || !dir) {
        fprintf_text(stderr, "%s: internal: a round without precisions or directory\n", prog);
        return EXIT_IO;
    }
    char copy[128];
    snprintf(copy, sizeof copy, "%s", precisions);
    size_t first = s->n, nj = 0;
    int rc = 0, said = 0;
    s->last = first;
    s->nlast = 0;
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p && !rc; p = strtok_r(NULL, ",", &save)) {
        ts_run *r = new_run(s);
        if (!r) {
            rc = EXIT_IO;
            break;
        }
        char base[160];
        snprintf(base, sizeof base, "/run-%s", p);
        snprintf(r->precision, sizeof r->precision, "%s", p);
        r->lr = lrs ? strtod(lrs, NULL) : NAN;
        r->trace = dup_printf(dir, base, ".h5");
        r->log = dup_printf(dir, base, ".log");
        r->command = dup_printf(s->line, "", "");
        size_t ne = 0;
        r->env[0] = NULL;
        if (!r->trace || !r->log || !r->command || env_put(r->env, &ne, "trace", r->trace ? r->trace : "") ||
            env_put(r->env, &ne, "precision", p) || (lrs && env_put(r->env, &ne, "lr", lrs)))
            rc = EXIT_IO;
        for (size_t i = 0; !rc && i < nopt; i += 2)
            if (env_put(r->env, &ne, opts[i], opts[i + 1]))
                rc = EXIT_IO;
        /* a trace of an earlier tune into DIR would pass for this run's */
        if (!rc && regular(r->trace) && unlink(r->trace) != 0) {
            fprintf_text(stderr, "%s: cannot remove the earlier '%s': %s\n", prog, r->trace, strerror(errno));
            rc = EXIT_IO;
            said = 1;
        }
        nj++;
    }
    if (rc) {
        if (!said)
            fprintf_text(stderr, "%s: out of memory (or more than %d variables for a run)\n", prog, TS_MAX_ENV);
        return rc;
    }
    launch_job *js = calloc(nj, sizeof *js);
    char **argvs = calloc((size_t)(nj * ((size_t)s->ncmd + 1)), sizeof *argvs);
    char names[64][40];
    if (!js || !argvs || nj > 64) {
        free(js);
        free(argvs);
        fprintf_text(stderr, "%s: out of memory\n", prog);
        return EXIT_IO;
    }
    for (size_t q = 0; q < nj; q++) {
        ts_run *r = &s->runs[first + q];
        char **av = argvs + q * ((size_t)s->ncmd + 1);
        for (int i = 0; i < s->ncmd; i++)
            av[i] = s->cmd[i];
        const char *slash = strrchr(r->trace, '/');
        snprintf(names[q], sizeof names[q], "%.*s", (int)(strlen(slash + 1) - 3), slash + 1);
        js[q] = (launch_job){.argv = av, .name = names[q], .trace = r->trace, .log = r->log, .status = -1,
                             .external = 1, .env = r->env};
    }
    s->nlast = nj;
    /* Slurm: -j caps the array's tasks at once (0: as many as the cluster gives) */
    launch_opts lo = {.kind = kind, .jobs = jobs ? atol(jobs) : kind == LAUNCH_SLURM ? 0 : 1, .dir = dir,
                      .prog = prog};
    if (lo.jobs < 1 && kind == LAUNCH_LOCAL)
        lo.jobs = 1;
    /* the first round's FP32 run is the baseline: alone first, so that a command that does not
     * run stops tune before anything else is run */
    size_t nb = first == 0 && !strcmp(s->runs[first].precision, "fp32") ? 1 : 0, ran = 0;
    int baseline_bad = 0;
    if (nb) {
        lo.no_log_tail = 1;
        rc = launch_round(js, 1, &lo);
        lo.no_log_tail = 0;
        ran = 1;
        ts_run *r = &s->runs[first];
        r->status = js[0].status;
        r->signal = js[0].signal;
        r->secs = js[0].secs;
        if (!rc && judge_run(r) != 0)
            rc = EXIT_IO;
        if (!rc && r->failure) {
            baseline_failed(s, r, prog);
            baseline_bad = 1;
        }
    }
    if (!rc && !baseline_bad && nj > nb) {
        rc = launch_round(js + nb, (int)(nj - nb), &lo);
        ran = nj;
    }
    FILE *f = fopen(report, "w");
    for (size_t q = 0; q < ran; q++) {
        ts_run *r = &s->runs[first + q];
        r->status = js[q].status;
        r->signal = js[q].signal;
        r->secs = js[q].secs;
        if (!rc && q >= nb && judge_run(r) != 0)
            rc = EXIT_IO;
        if (f) {
            fprintf(f, "%s: %s in %.1f s; %s %s; log %s%s%s\n  ", names[q], r->how, r->secs, r->trace_words, r->trace,
                    r->log, r->failure ? ": FAILED: " : "", r->failure ? r->failure : "");
            for (size_t k = 0; r->env[k]; k++)
                fprintf(f, "%s ", r->env[k]);
            fprintf(f, "%s\n", r->command);
        }
        if (!rc && q >= nb && r->failure)
            fprintf_text(stderr, "%s: %s: a failed candidate (tune goes on): %s\n", prog, names[q], r->failure);
    }
    if (!f || ferror(f) | fclose(f)) {
        fprintf_text(stderr, "%s: cannot write '%s'\n", prog, report);
        if (!rc)
            rc = EXIT_IO;
    }
    free(js);
    free(argvs);
    return rc ? rc : baseline_bad ? EXIT_USAGE : 0;
}

size_t tune_script_last(const tune_script *s) { return s->nlast; }

const char *tune_script_last_run(const tune_script *s, size_t i, const char **precision, double *lr,
                                 const char **failure)
{
    const ts_run *r = &s->runs[s->last + i];
    *precision = r->precision;
    *lr = r->lr;
    *failure = r->failure;
    return r->trace;
}

static const ts_run *run_of(const tune_script *s, const char *trace)
{
    for (size_t i = s->n; trace && i-- > 0;)
        if (strcmp(s->runs[i].trace, trace) == 0)
            return &s->runs[i];
    return NULL;
}

/* The value of variable NAME (without the prefix) in a run's environment, or NULL. */
static const char *env_of(const ts_run *r, const char *name)
{
    size_t k = strlen(ENV_PREFIX), len = strlen(name);
    for (size_t i = 0; r->env[i]; i++)
        if (strncmp(r->env[i] + k, name, len) == 0 && r->env[i][k + len] == '=')
            return r->env[i] + k + len + 1;
    return NULL;
}

/* What a run's variables say in PyTorch's words: "torch.autocast(device_type,
 * dtype=torch.bfloat16); the optimizer's lr=0.001; ...". */
static void pytorch_terms(char *buf, size_t n, const ts_run *r)
{
    buf[0] = 0;
#define ADD(...) do { size_t l_ = strlen(buf); snprintf(buf + l_, n - l_, "%s", l_ ? "; " : ""); \
                      l_ = strlen(buf); snprintf(buf + l_, n - l_, __VA_ARGS__); } while (0)
    const char *p = env_of(r, "PRECISION"), *v;
    if (p && !strcmp(p, "fp32"))
        ADD("no autocast (FP32)");
    else if (p)
        ADD("torch.autocast(device_type, dtype=torch.%s)", !strcmp(p, "fp16") ? "float16" : "bfloat16");
    if ((v = env_of(r, "LR")))
        ADD("the optimizer's lr=%s", v);
    else
        ADD("the script's own lr");
    const char *ls = env_of(r, "LOSS_SCALE"), *si = env_of(r, "SCALE_INIT");
    if (ls && !strcmp(ls, "none"))
        ADD("no GradScaler");
    else if (ls && strcmp(ls, "dynamic"))
        ADD("torch.amp.GradScaler(init_scale=%s, growth_interval=2**31-1) (a static scale)", ls);
    else if (ls || si)
        ADD("torch.amp.GradScaler(%s%s)", si ? "init_scale=" : "", si ? si : "");
    if ((v = env_of(r, "CLIP")))
        ADD("torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=%s)", v);
    if ((v = env_of(r, "FP32_LAYERS")))
        ADD("modules %s kept in FP32 (their forward under torch.autocast(device_type, enabled=False), "
            "inputs cast to float32)", v);
    if ((v = env_of(r, "OPTIM_STATE")))
        ADD("the optimizer state in %s (the parameters' dtype in PyTorch)", v);
    if ((v = env_of(r, "SCHEDULE")))
        ADD("lr schedule %s (warm-up steps[:minimum lr])", v);
    if ((v = env_of(r, "STEPS")))
        ADD("%s steps", v);
#undef ADD
}

/* The run's variables but the trace, then the command: what runs it again by hand. */
static void reproduce(char *buf, size_t n, const tune_script *s, const ts_run *r)
{
    buf[0] = 0;
    for (size_t i = 0; r->env[i]; i++)
        if (strncmp(r->env[i], ENV_PREFIX "TRACE=", strlen(ENV_PREFIX "TRACE=")))
            quote_into(buf, n, r->env[i]);
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s", len ? " " : "", s->line);
}

void tune_script_json(jw *w, const tune_script *s, const char *chosen)
{
    jw_str(w, "command", s->line);
    const ts_run *r = run_of(s, chosen);
    char buf[4096];
    if (r)
        pytorch_terms(buf, sizeof buf, r);
    jw_str(w, "pytorch", r ? buf : NULL);
    if (r)
        reproduce(buf, sizeof buf, s, r);
    jw_str(w, "reproduce", r ? buf : NULL);
}

void tune_script_report(FILE *f, const tune_script *s, const char *chosen)
{
    const ts_run *r = run_of(s, chosen);
    if (!r)
        return;
    char buf[4096];
    pytorch_terms(buf, sizeof buf, r);
    fprintf_text(f, "In PyTorch terms: %s.\n", buf);
    reproduce(buf, sizeof buf, s, r);
    fprintf_text(f, "Run it again (tune_config() applies the variables; add AMPDIAG_TUNE_TRACE=PATH to trace "
                 "it): %s\n", buf);
}

void tune_script_json_run(jw *w, const tune_script *s, const char *trace)
{
    const ts_run *r = run_of(s, trace);
    if (r) {
        jw_str(w, "command", r->command);
        jw_open(w, "env", '{');
        for (size_t k = 0; r->env[k]; k++) {
            char name[128];
            size_t len = strcspn(r->env[k], "=");
            snprintf(name, sizeof name, "%.*s", (int)(len < 127 ? len : 127), r->env[k]);
            jw_str(w, name, r->env[k] + len + (r->env[k][len] ? 1 : 0));
        }
        jw_close(w, '}');
        jw_str(w, "log", r->log);
        jw_int(w, "exit_status", r->status);
        if (r->signal > 0)
            jw_int(w, "signal", r->signal);
        else
            jw_null(w, "signal");
        jw_str(w, "trace", r->trace_state == TS_COMPLETE ? "complete" : r->trace_state == TS_INCOMPLETE ? "incomplete"
                                                                                                      : "none");
        jw_str(w, "trace_status", r->trace_words);
        jw_bool(w, "failed", r->failure != NULL);
        jw_str(w, "failure", r->failure);
    }
}

void tune_script_usage(FILE *f)
{
    fprintf(f,
            "\n"
            "ampdiag tune -o DIR [--precisions P,...] [--lr X] [--rounds N] [-j N] [--steps N]\n"
            "             [--seed N] -- CMD ARGS...\n"
            "  tunes your own training script: each configuration runs CMD ARGS once, with the\n"
            "  environment variables AMPDIAG_TUNE_TRACE (the trace to write), AMPDIAG_TUNE_PRECISION\n"
            "  (fp32, fp16, bf16), AMPDIAG_TUNE_LR and AMPDIAG_TUNE_<OPTION> for each option tune\n"
            "  gives the run (CLIP, LOSS_SCALE, SCALE_INIT, FP32_LAYERS, OPTIM_STATE, SCHEDULE, STEPS,\n"
            "  SEED, ...), which ampdiag.torch.tune_config() applies (docs/pytorch.md, \"tune on your\n"
            "  own script\"); its output goes to DIR/NAME/run-PRECISION.log. --launcher slurm runs\n"
            "  each round as a Slurm job array. The FP32 baseline runs first: when it fails (an exit\n"
            "  status other than 0, or no complete trace) tune stops (exit 2) with its log; a later\n"
            "  run that fails is a failed candidate (tune.json says how) and tune goes on.\n");
}
