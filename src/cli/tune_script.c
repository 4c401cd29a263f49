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
 * The commands run through the launcher of sweep's rounds (launch.c: local, -j at once), their
 * output into DIR/NAME/run-PRECISION.log.
 */
#include "cli/tune_script.h"

#include "cli/cli.h"
#include "cli/launch.h"
#include "util/escape.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENV_PREFIX "AMPDIAG_TUNE_"
#define TS_MAX_ENV 40

typedef struct ts_run {
    char *trace, *log, *command;
    char *env[TS_MAX_ENV + 1]; /* "NAME=VALUE", NULL-ended */
    int status;
    double secs;
} ts_run;

struct tune_script {
    char **cmd; /* NULL-ended copy of the command */
    int ncmd;
    char *line; /* the command as a shell would read it */
    ts_run *runs;
    size_t n, cap;
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

int tune_script_round(tune_script *s, char **argv, const char *report, const char *prog)
{
    const char *precisions = NULL, *lrs = NULL, *dir = NULL, *jobs = NULL;
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
            if (strcmp(v, "local")) {
                fprintf_text(stderr, "%s: --launcher %s: a command after '--' runs locally only\n", prog, v);
                return EXIT_USAGE;
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
    for (char *save = NULL, *p = strtok_r(copy, ",", &save); p && !rc; p = strtok_r(NULL, ",", &save)) {
        ts_run *r = new_run(s);
        if (!r) {
            rc = EXIT_IO;
            break;
        }
        char base[160];
        snprintf(base, sizeof base, "/run-%s", p);
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
    launch_opts lo = {.kind = LAUNCH_LOCAL, .jobs = jobs ? atol(jobs) : 1, .dir = dir, .prog = prog};
    if (lo.jobs < 1)
        lo.jobs = 1;
    rc = launch_round(js, (int)nj, &lo);
    FILE *f = fopen(report, "w");
    for (size_t q = 0; q < nj; q++) {
        ts_run *r = &s->runs[first + q];
        r->status = js[q].status;
        r->secs = js[q].secs;
        int have = regular(r->trace);
        if (f) {
            fprintf(f, "%s: exit %d in %.1f s; trace %s%s; log %s\n  ", names[q], r->status, r->secs, r->trace,
                    have ? "" : " (none)", r->log);
            for (size_t k = 0; r->env[k]; k++)
                fprintf(f, "%s ", r->env[k]);
            fprintf(f, "%s\n", r->command);
        }
        if (rc)
            continue;
        if (r->status != 0 && have) {
            fprintf_text(stderr, "%s: %s: the command failed (exit %d) but left its trace: judged as it is (its "
                         "log is %s)\n", prog, names[q], r->status, r->log);
        } else if (r->status != 0) {
            fprintf_text(stderr, "%s: %s: the command `%s` failed (exit %d) and left no trace; its log is %s\n",
                         prog, names[q], r->command, r->status, r->log);
            rc = EXIT_IO;
        } else if (!have) {
            fprintf_text(stderr, "%s: %s: the command `%s` ended (exit 0) without writing %s: does it call "
                         "ampdiag.torch.tune_config() and cfg.trace(...)? (docs/pytorch.md, \"tune on your own "
                         "script\"); its log is %s\n", prog, names[q], r->command, r->trace, r->log);
            rc = EXIT_IO;
        }
    }
    if (!f || ferror(f) | fclose(f)) {
        fprintf_text(stderr, "%s: cannot write '%s'\n", prog, report);
        if (!rc)
            rc = EXIT_IO;
    }
    free(js);
    free(argvs);
    return rc;
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
            "  own script\"); its output goes to DIR/NAME/run-PRECISION.log. Local runs only; a\n"
            "  command that fails and leaves no trace stops tune (exit 3) with its log named.\n");
}
