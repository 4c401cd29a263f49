/*
 * plot_draw.c - the output directory, draw-all.sh, and gnuplot run on every chart's script, a
 * few at a time, each with its stderr in NAME.log (removed when empty: anything gnuplot says is
 * a warning the caller hears about) (plot_internal.h).
 */
#include "plot/plot_internal.h"
#include "util/escape.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int plot_make_dirs(struct ctx *c, const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return plot_fail(c, PLOT_EINPUT, "output directory name too long: '%s'", dir);
    size_t len = strlen(p);
    while (len > 1 && p[len - 1] == '/')
        p[--len] = 0;
    for (char *s = p + 1; ; s++) {
        int end = *s == 0;
        if (*s == '/' || end) {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST)
                return plot_fail(c, PLOT_EIO, "cannot create the output directory '%s': %s", p,
                            strerror(errno));
            if (!end)
                *s = '/';
        }
        if (end)
            break;
    }
    struct stat st;
    if (stat(p, &st) != 0)
        return plot_fail(c, PLOT_EIO, "cannot use the output directory '%s': %s", p, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return plot_fail(c, PLOT_EINPUT, "-o '%s' exists and is not a directory", p);
    if (access(p, W_OK) != 0)
        return plot_fail(c, PLOT_EIO, "cannot write in the output directory '%s': %s", p,
                    strerror(errno));
    return 0;
}

int plot_write_draw_all(struct ctx *c)
{
    struct out o = {0};
    int rc = out_open(c, &o, "draw-all.sh", "w");
    if (rc)
        return rc;
    fprintf(o.f, "#!/bin/sh\n# Redraw every chart of this directory (written by ampdiag %s).\n"
                 "cd \"$(dirname \"$0\")\" || exit 1\nstatus=0\n", ampdiag_version());
    for (size_t i = 0; c->res && i < c->res->n; i++)
        fprintf(o.f, "gnuplot %s || status=1\n", c->res->charts[i].script);
    fprintf(o.f, "exit $status\n");
    rc = out_close(c, &o);
    if (!rc && chmod(o.path, 0755) != 0)
        return plot_fail(c, PLOT_EIO, "cannot make '%s' executable: %s", o.path, strerror(errno));
    return rc;
}

struct job {
    pid_t pid;
    size_t chart;
    char log[PATH_MAX];
};

/* Start gnuplot on one chart's script, in the output directory, stderr into NAME.log. */
static int job_start(struct ctx *c, struct job *j, size_t idx, int *missing)
{
    plot_chart *ch = &c->res->charts[idx];
    const char *prog = c->opt->gnuplot && *c->opt->gnuplot ? c->opt->gnuplot : "gnuplot";
    char stem[160];
    snprintf(stem, sizeof stem, "%s", ch->script);
    char *dot = strrchr(stem, '.');
    if (dot)
        *dot = 0;
    snprintf(j->log, sizeof j->log, "%s/%s.log", c->outdir, stem);
    /* gnuplot runs `cd` first so that the script's relative file names work (the directory's
     * name in a double-quoted string, any byte as an octal escape: nothing can end the command) */
    size_t cl = STR_ESCAPED_SIZE(strlen(c->outdir)) + 8;
    char *cdcmd = malloc(cl);
    if (!cdcmd)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    memcpy(cdcmd, "cd \"", 4);
    str_escape(cdcmd + 4, cl - 5, c->outdir, SINK_GP_PATH); /* every byte given back exactly */
    strcat(cdcmd, "\"");
    char *argv[] = {(char *)prog, (char *)"-d", (char *)"-e", cdcmd, ch->script, NULL};
    posix_spawn_file_actions_t fa;
    int e = posix_spawn_file_actions_init(&fa);
    if (e) {
        free(cdcmd);
        return plot_fail(c, PLOT_ENOMEM, "cannot run gnuplot: %s", strerror(e));
    }
    if ((e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) ||
        (e = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0)) ||
        (e = posix_spawn_file_actions_addopen(&fa, 2, j->log, O_WRONLY | O_CREAT | O_TRUNC, 0644))) {
        posix_spawn_file_actions_destroy(&fa);
        free(cdcmd);
        return plot_fail(c, PLOT_ENOMEM, "cannot run gnuplot: %s", strerror(e));
    }
    e = posix_spawnp(&j->pid, prog, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(cdcmd);
    j->chart = idx;
    if (e) {
        j->pid = -1;
        if (unlink(j->log) != 0 && errno != ENOENT) {
            /* the log is only a by-product */
        }
        if (e == ENOENT || e == EACCES || e == ENOTDIR) {
            *missing = 1;
            snprintf(ch->message, sizeof ch->message, "cannot run %s: %s", prog, strerror(e));
            return 0;
        }
        snprintf(ch->message, sizeof ch->message, "cannot run %s: %s", prog, strerror(e));
        return plot_fail(c, PLOT_EGNUPLOT, "cannot run %s for %s: %s", prog, ch->script, strerror(e));
    }
    return 0;
}

/* Wait for a job; fill in its chart's outcome. Returns 1 when gnuplot was not found. */
static int job_finish(struct ctx *c, struct job *j)
{
    plot_chart *ch = &c->res->charts[j->chart];
    int status = 0;
    pid_t w;
    do
        w = waitpid(j->pid, &status, 0);
    while (w < 0 && errno == EINTR);
    j->pid = -1;
    if (w < 0) {
        snprintf(ch->message, sizeof ch->message, "lost track of gnuplot: %s", strerror(errno));
        return 0;
    }
    /* the first line of what gnuplot said */
    FILE *f = fopen(j->log, "r");
    long size = 0;
    if (f) {
        char line[256] = "";
        if (fseek(f, 0, SEEK_END) == 0)
            size = ftell(f);
        rewind(f);
        while (size > 0 && fgets(line, sizeof line, f)) {
            line[strcspn(line, "\r\n")] = 0;
            const char *t = line;
            while (*t == ' ' || *t == '\t' || *t == '^')
                t++;
            if (*t) {
                snprintf(ch->message, sizeof ch->message, "%s", t);
                /* gnuplot echoes the failing line, then a line with '^', then the message:
                 * prefer a line that says "warning" or names the script */
                if (strstr(t, "warning") || strstr(t, ch->script))
                    break;
            }
        }
        if (fclose(f) != 0) {
            /* read-only: nothing was lost */
        }
    }
    if (size == 0 && unlink(j->log) != 0 && errno != ENOENT) {
        /* an empty log left behind is harmless */
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127 && size == 0) {
        snprintf(ch->message, sizeof ch->message, "gnuplot could not be run");
        return 1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (!ch->message[0])
            snprintf(ch->message, sizeof ch->message, "gnuplot %s %d",
                     WIFEXITED(status) ? "exited with status" : "was killed by signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return 0;
    }
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", c->outdir, ch->file);
    if (stat(path, &st) != 0 || st.st_size == 0) {
        snprintf(ch->message, sizeof ch->message, "gnuplot exited 0 but wrote no %s", ch->file);
        return 0;
    }
    ch->drawn = 1;
    ch->warned = size > 0;
    return 0;
}

/* 1 when prog (a path, or a name looked up on PATH as execvp does) is an executable file. */
static int program_exists(const char *prog)
{
    if (strchr(prog, '/'))
        return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/bin:/usr/bin";
    size_t plen = strlen(prog);
    for (const char *p = path;;) {
        const char *e = strchr(p, ':');
        size_t dlen = e ? (size_t)(e - p) : strlen(p);
        char f[PATH_MAX];
        if (dlen + plen + 2 <= sizeof f) {
            if (dlen)
                memcpy(f, p, dlen);
            else
                f[dlen++] = '.'; /* an empty PATH entry is the current directory */
            f[dlen] = '/';
            memcpy(f + dlen + 1, prog, plen + 1);
            struct stat st;
            if (stat(f, &st) == 0 && S_ISREG(st.st_mode) && access(f, X_OK) == 0)
                return 1;
        }
        if (!e)
            return 0;
        p = e + 1;
    }
}

int plot_draw_all(struct ctx *c)
{
    size_t n = c->res->n;
    if (!n)
        return 0;
    const char *prog = c->opt->gnuplot && *c->opt->gnuplot ? c->opt->gnuplot : "gnuplot";
    if (!program_exists(prog)) {
        c->res->gnuplot_missing = 1;
        for (size_t i = 0; i < n; i++)
            snprintf(c->res->charts[i].message, sizeof c->res->charts[i].message,
                     "%s not found", prog);
        return plot_fail(c, PLOT_ENOGNUPLOT, "%s was not found (install gnuplot, e.g. apt-get install "
                    "gnuplot-nox); the data and scripts are in '%s': run draw-all.sh there where "
                    "gnuplot is installed", prog, c->outdir);
    }
    long jobs = c->opt->jobs > 0 ? c->opt->jobs : sysconf(_SC_NPROCESSORS_ONLN);
    if (jobs < 1)
        jobs = 1;
    if (jobs > 16)
        jobs = 16;
    struct job *job = calloc(n, sizeof *job);
    if (!job)
        return plot_fail(c, PLOT_ENOMEM, "out of memory");
    int missing = 0, rc = 0;
    size_t head = 0, next = 0; /* charts [head, next) are started and not yet waited for */
    while (head < n) {
        while (next < n && next - head < (size_t)jobs && !missing && !rc) {
            job[next].pid = -1;
            rc = job_start(c, &job[next], next, &missing);
            next++;
        }
        if (head == next)
            break;
        if (job[head].pid >= 0 && job_finish(c, &job[head]))
            missing = 1;
        head++;
    }
    free(job);
    if (rc)
        return rc;
    if (missing) {
        c->res->gnuplot_missing = 1;
        return plot_fail(c, PLOT_ENOGNUPLOT, "%s was not found (install gnuplot, e.g. apt-get install "
                    "gnuplot-nox); the data and scripts are in '%s': run draw-all.sh there where "
                    "gnuplot is installed", prog, c->outdir);
    }
    for (size_t i = 0; i < n; i++) {
        const plot_chart *ch = &c->res->charts[i];
        if (!ch->drawn)
            return plot_fail(c, PLOT_EGNUPLOT, "gnuplot failed on '%s/%s': %s", c->outdir, ch->script,
                        ch->message[0] ? ch->message : "no output");
    }
    return 0;
}

