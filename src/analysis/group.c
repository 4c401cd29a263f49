/*
 * group.c - the traces a command's arguments name (ranks.h): a trace; a glob in quotes whose
 * matches are the traces of one distributed run's ranks; a rank-0 trace read with the traces
 * of the other ranks beside it. Each group is read, checked to be one run (rank attributes,
 * world size, distinct ranks, the same model, precision, optimizer, lr and layers) and made one
 * run (an_rank_view).
 */
#include "analysis/findings.h"
#include "analysis/ranks.h"

#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One argument and the traces it names. */
typedef struct arg_in {
    const char *arg;
    char **paths;         /* [npaths] (owned): the trace, a glob's matches, or rank 0 and its
                             siblings */
    size_t npaths;
    int glob;             /* a glob: its matches are a group where they are rank traces */
    int group;            /* paths are one run's ranks */
    int dropped;          /* a trace another argument's group reads */
    size_t loaded;        /* paths[0..loaded) are read */
    an_run *runs;         /* [npaths] */
} arg_in;

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

/* ------------------------------------------------------------------------------------------
 * Arguments into paths
 * ------------------------------------------------------------------------------------------ */

static int is_pattern(const char *s) { return strpbrk(s, "*?[") != NULL; }

/* The argument's paths: a glob's matches (glob(3), in its sorted order), else the argument. */
static int expand(arg_in *a, char *err, size_t errlen)
{
    struct stat st;
    if (!is_pattern(a->arg) || stat(a->arg, &st) == 0) {
        a->paths = malloc(sizeof *a->paths);
        if (!a->paths || !(a->paths[0] = dup_str(a->arg)))
            return fail(err, errlen, AMPDIAG_TRACE_ENOMEM, "out of memory");
        a->npaths = 1;
        return 0;
    }
    glob_t g;
    memset(&g, 0, sizeof g);
    int rc = glob(a->arg, 0, NULL, &g);
    if (rc == GLOB_NOMATCH) {
        globfree(&g);
        return fail(err, errlen, AMPDIAG_TRACE_ENOENT, "'%s': no file matches this pattern (a glob in quotes "
                    "names the traces of one run's ranks)", a->arg);
    }
    if (rc) {
        globfree(&g);
        return fail(err, errlen, rc == GLOB_NOSPACE ? AMPDIAG_TRACE_ENOMEM : AMPDIAG_TRACE_EIO,
                    "'%s': cannot list the files it matches", a->arg);
    }
    a->glob = 1;
    a->group = g.gl_pathc > 1; /* one match: a group where it is a rank's trace (group_or_not) */
    a->paths = calloc(g.gl_pathc, sizeof *a->paths);
    for (size_t i = 0; a->paths && i < g.gl_pathc; i++)
        if ((a->paths[a->npaths] = dup_str(g.gl_pathv[i])))
            a->npaths++;
    size_t want = g.gl_pathc;
    globfree(&g);
    if (!a->paths || a->npaths < want)
        return fail(err, errlen, AMPDIAG_TRACE_ENOMEM, "out of memory");
    return 0;
}

/* The path of rank k beside rank 0's (<stem>.rank0<ext> -> <stem>.rank<k><ext>): 0, or -1 when
 * the path does not name rank 0 so. */
static int sibling(const char *p0, int64_t k, char *out, size_t n)
{
    const char *base = strrchr(p0, '/');
    base = base ? base + 1 : p0;
    const char *at = NULL;
    for (const char *q = base; (q = strstr(q, ".rank0")); q++)
        if (q[6] == '.' || q[6] == 0)
            at = q;
    if (!at)
        return -1;
    int len = snprintf(out, n, "%.*s.rank%" PRId64 "%s", (int)(at - p0), p0, k, at + 6);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

/* A trace of rank 0 of W > 1 ranks with siblings beside it: its paths become rank 0's and the
 * siblings' that exist. 1 when so, 0 when not, -1 out of memory. */
static int find_siblings(arg_in *a, const an_run *r0)
{
    const an_rank_attrs *d = &r0->dist;
    if (d->have != 1 || d->rank != 0 || d->world_size < 2 || d->world_size > AN_MAX_WORLD)
        return 0;
    char p[4096];
    size_t found = 0;
    char **paths = calloc((size_t)d->world_size, sizeof *paths);
    if (!paths)
        return -1;
    paths[found++] = a->paths[0];
    for (int64_t k = 1; k < d->world_size; k++) {
        struct stat st;
        if (sibling(a->paths[0], k, p, sizeof p) || stat(p, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (!(paths[found] = dup_str(p))) {
            for (size_t i = 1; i < found; i++)
                free(paths[i]);
            free(paths);
            return -1;
        }
        found++;
    }
    if (found == 1) {
        free(paths);
        return 0;
    }
    an_run *runs = realloc(a->runs, found * sizeof *runs);
    if (!runs) {
        for (size_t i = 1; i < found; i++)
            free(paths[i]);
        free(paths);
        return -1;
    }
    memset(runs + 1, 0, (found - 1) * sizeof *runs);
    free(a->paths);
    a->runs = runs;
    a->paths = paths;
    a->npaths = found;
    a->group = 1;
    return 1;
}

/* ------------------------------------------------------------------------------------------
 * Checks
 * ------------------------------------------------------------------------------------------ */

static int same_double(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* Why run r is not a rank of the same run as ref ("" when it is). */
static void not_one_run(const an_run *ref, const an_run *r, char *why, size_t n)
{
    why[0] = 0;
    if (strcmp(ref->model, r->model))
        snprintf(why, n, "model '%s', not '%s'", r->model, ref->model);
    else if (strcmp(ref->precision, r->precision))
        snprintf(why, n, "precision '%s', not '%s'", r->precision, ref->precision);
    else if (strcmp(ref->optimizer, r->optimizer))
        snprintf(why, n, "optimizer '%s', not '%s'", r->optimizer, ref->optimizer);
    else if (!same_double(ref->lr, r->lr))
        snprintf(why, n, "lr %g, not %g", r->lr, ref->lr);
    else if (ref->nlayers != r->nlayers)
        snprintf(why, n, "%zu layers, not %zu", r->nlayers, ref->nlayers);
    for (size_t l = 0; !why[0] && l < r->nlayers; l++) {
        int found = 0;
        for (size_t m = 0; m < ref->nlayers && !found; m++)
            found = strcmp(r->layers[l].name, ref->layers[m].name) == 0;
        if (!found)
            snprintf(why, n, "a layer '%s' the other has not", r->layers[l].name);
    }
}

/* Each of the group's traces is one rank's (valid attributes), of one world size, each rank
 * once, all of one run; sorted by rank. 0 or AMPDIAG_TRACE_ESCHEMA (message in err). */
static int check_group(const arg_in *a, an_run **sorted, char *err, size_t errlen)
{
    for (size_t i = 0; i < a->npaths; i++) {
        const an_run *r = &a->runs[i];
        if (r->dist.have < 0)
            return fail(err, errlen, AMPDIAG_TRACE_ESCHEMA, "%s", r->dist.err);
        if (r->dist.have == 0)
            return fail(err, errlen, AMPDIAG_TRACE_ESCHEMA, "'%s' (matched by '%s') is not one rank's trace of a "
                        "distributed run (no rank and world_size attributes)", r->path, a->arg);
        sorted[i] = &a->runs[i];
        for (size_t j = i; j > 0 && sorted[j]->dist.rank < sorted[j - 1]->dist.rank; j--) {
            an_run *t = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = t;
        }
    }
    const an_run *ref = sorted[0];
    if (ref->dist.world_size > AN_MAX_WORLD)
        return fail(err, errlen, AMPDIAG_TRACE_ESCHEMA, "'%s': world_size %" PRId64 " (this reader takes up to %d "
                    "ranks)", ref->path, ref->dist.world_size, AN_MAX_WORLD);
    char why[400];
    for (size_t i = 1; i < a->npaths; i++) {
        const an_run *r = sorted[i];
        if (r->dist.world_size != ref->dist.world_size)
            return fail(err, errlen, AMPDIAG_TRACE_ESCHEMA, "'%s' is rank %" PRId64 " of %" PRId64 ", '%s' of %"
                        PRId64 ": not one run", r->path, r->dist.rank, r->dist.world_size, ref->path,
                        ref->dist.world_size);
        if (r->dist.rank == sorted[i - 1]->dist.rank)
            return fail(err, errlen, AMPDIAG_TRACE_ESCHEMA, "'%s' and '%s' are both rank %" PRId64 ": not one run",
                        sorted[i - 1]->path, r->path, r->dist.rank);
        not_one_run(ref, r, why, sizeof why);
        if (why[0])
            return fail(err, errlen, AMPDIAG_TRACE_ESCHEMA, "'%s' is not a rank of the same run as '%s': %s",
                        r->path, ref->path, why);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * A group into one run
 * ------------------------------------------------------------------------------------------ */

void an_ranks_free(an_ranks *R)
{
    if (!R)
        return;
    for (size_t r = 0; R->rank && r < R->n; r++)
        an_free(&R->rank[r].run);
    free(R->rank);
    free(R->missing);
    free(R->spread);
    vec_free(&R->list);
    free(R);
}

static an_sharding sharding_of(const char *s)
{
    return strcmp(s, "replicated") == 0 ? AN_SH_REPLICATED : strcmp(s, "sharded") == 0 ? AN_SH_SHARDED
           : strcmp(s, "hybrid") == 0 ? AN_SH_HYBRID : AN_SH_NONE;
}

/* The group's runs (checked, sorted) handed to a new an_ranks, the ranks without a trace
 * listed. NULL when out of memory (the runs stay with the argument). */
static an_ranks *make_ranks(arg_in *a, an_run **sorted)
{
    an_ranks *R = calloc(1, sizeof *R);
    const an_rank_attrs *d = &sorted[0]->dist;
    if (!R || !(R->rank = calloc(a->npaths, sizeof *R->rank)) ||
        !(R->missing = calloc((size_t)d->world_size, sizeof *R->missing))) {
        an_ranks_free(R);
        return NULL;
    }
    snprintf(R->pattern, sizeof R->pattern, "%s", a->arg);
    R->world_size = d->world_size;
    R->sharding = sharding_of(d->sharding);
    snprintf(R->sharding_name, sizeof R->sharding_name, "%s", d->sharding);
    snprintf(R->backend, sizeof R->backend, "%s", d->backend);
    snprintf(R->reduce_dtype, sizeof R->reduce_dtype, "%s", d->reduce_dtype);
    for (size_t i = 0; i < a->npaths; i++) {
        R->rank[i].run = *sorted[i];
        an_run_moved(&R->rank[i].run, sorted[i]);
        R->rank[i].rank = sorted[i]->dist.rank;
        memset(sorted[i], 0, sizeof *sorted[i]);
    }
    R->n = a->npaths;
    for (int64_t k = 0, i = 0; k < R->world_size; k++) {
        while ((size_t)i < R->n && R->rank[i].rank < k)
            i++;
        if ((size_t)i >= R->n || R->rank[i].rank != k)
            R->missing[R->nmissing++] = k;
    }
    return R;
}

/* ------------------------------------------------------------------------------------------
 * Reading the arguments
 * ------------------------------------------------------------------------------------------ */

static int add_note(an_inputs *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int add_note(an_inputs *in, const char *fmt, ...)
{
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char **n = realloc(in->notes, (in->nnotes + 1) * sizeof *n);
    if (!n)
        return -1;
    in->notes = n;
    if (!(n[in->nnotes] = dup_str(line)))
        return -1;
    in->nnotes++;
    return 0;
}

/* Read the paths not read yet of the arguments that are groups (groups 1) or not (0), several
 * at once. 0 or the error of the first that failed (message in err). */
static int load_paths(arg_in *A, size_t nargs, int groups, const an_options *opt, char *err, size_t errlen)
{
    size_t total = 0;
    for (size_t i = 0; i < nargs; i++)
        if (!A[i].dropped && A[i].group == groups)
            total += A[i].npaths - A[i].loaded;
    if (!total)
        return 0;
    const char **paths = malloc(total * sizeof *paths);
    an_run *runs = calloc(total, sizeof *runs);
    if (!paths || !runs) {
        free(paths);
        free(runs);
        return fail(err, errlen, AMPDIAG_TRACE_ENOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < nargs; i++)
        if (!A[i].dropped && A[i].group == groups)
            for (size_t j = A[i].loaded; j < A[i].npaths; j++)
                paths[k++] = A[i].paths[j];
    int rc = 0;
    an_load_many(paths, total, opt, runs, &rc, err, errlen);
    k = 0;
    for (size_t i = 0; i < nargs; i++)
        if (!A[i].dropped && A[i].group == groups) {
            for (size_t j = A[i].loaded; j < A[i].npaths; j++, k++) {
                A[i].runs[j] = runs[k];
                an_run_moved(&A[i].runs[j], &runs[k]);
            }
            A[i].loaded = A[i].npaths;
        }
    free(paths);
    free(runs);
    return rc;
}

/* Arguments that name a trace another argument's group reads (the shell expanded a glob). */
static int drop_siblings(arg_in *A, size_t nargs, an_inputs *in)
{
    for (size_t i = 0; i < nargs; i++) {
        if (!A[i].group || A[i].glob)
            continue;
        for (size_t j = 0; j < nargs; j++) {
            struct stat a, b;
            if (j == i || A[j].group || A[j].dropped || stat(A[j].paths[0], &b))
                continue;
            for (size_t k = 1; k < A[i].npaths && !A[j].dropped; k++)
                if (stat(A[i].paths[k], &a) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
                    A[j].dropped = 1;
                    an_free(&A[j].runs[0]);
                    if (add_note(in, "'%s' is read as a rank of '%s'", A[j].arg, A[i].arg))
                        return -1;
                }
        }
    }
    return 0;
}

static void free_args(arg_in *A, size_t nargs)
{
    for (size_t i = 0; A && i < nargs; i++) {
        for (size_t j = 0; j < A[i].npaths; j++) {
            free(A[i].paths[j]);
            if (A[i].runs)
                an_free(&A[i].runs[j]);
        }
        free(A[i].paths);
        free(A[i].runs);
    }
    free(A);
}

/* The plain arguments that name a group: rank 0 with siblings beside it (not alone), a glob's
 * one match that is one rank's trace; the notes that say so. 0 or -1 (out of memory). */
static int find_groups(arg_in *A, size_t nargs, unsigned flags, an_inputs *in)
{
    for (size_t i = 0; i < nargs; i++) {
        arg_in *a = &A[i];
        if (a->group)
            continue;
        int64_t world = a->runs[0].dist.world_size;
        if (a->glob) {
            a->group = a->runs[0].dist.have != 0;
            continue;
        }
        if (flags & AN_ARGS_ALONE)
            continue;
        int rc = find_siblings(a, &a->runs[0]); /* (a->runs may move) */
        if (rc < 0)
            return -1;
        if (rc && add_note(in, "'%s' is rank 0 of %" PRId64 ": read with the %zu other rank trace%s beside it as "
                           "one run (--alone reads it by itself)", a->arg, world, a->npaths - 1,
                           a->npaths == 2 ? "" : "s"))
            return -1;
    }
    return 0;
}

/* Each group checked and made one run, into in->runs[k]. 0 or an error (message in err). */
static int merge_group(arg_in *a, const an_options *opt, an_run *out, char *err, size_t errlen)
{
    an_run **sorted = malloc(a->npaths * sizeof *sorted);
    if (!sorted)
        return fail(err, errlen, AMPDIAG_TRACE_ENOMEM, "out of memory");
    int rc = check_group(a, sorted, err, errlen);
    an_ranks *R = rc ? NULL : make_ranks(a, sorted);
    free(sorted);
    if (rc)
        return rc;
    if (!R)
        return fail(err, errlen, AMPDIAG_TRACE_ENOMEM, "out of memory");
    return an_rank_view(R, opt, out, err, errlen);
}

void an_inputs_free(an_inputs *in)
{
    for (size_t i = 0; in->runs && i < in->n; i++)
        an_free(&in->runs[i]);
    free(in->runs);
    free(in->names);
    for (size_t i = 0; i < in->nnotes; i++)
        free(in->notes[i]);
    free(in->notes);
    memset(in, 0, sizeof *in);
}

/* The arguments' runs into in: a plain trace's run moved, a group's merged. */
static int collect(arg_in *A, size_t nargs, const an_options *opt, an_inputs *in, char *err, size_t errlen)
{
    in->runs = calloc(nargs, sizeof *in->runs);
    in->names = calloc(nargs, sizeof *in->names);
    if (!in->runs || !in->names)
        return fail(err, errlen, AMPDIAG_TRACE_ENOMEM, "out of memory");
    for (size_t i = 0; i < nargs; i++) {
        if (A[i].dropped)
            continue;
        in->names[in->n] = A[i].arg;
        an_run *out = &in->runs[in->n++];
        if (!A[i].group) {
            *out = A[i].runs[0];
            an_run_moved(out, &A[i].runs[0]);
            memset(&A[i].runs[0], 0, sizeof A[i].runs[0]);
            continue;
        }
        int rc = merge_group(&A[i], opt, out, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

int an_load_args(const char *const *args, size_t nargs, const an_options *opt, unsigned flags,
                 an_inputs *in, char *err, size_t errlen)
{
    memset(in, 0, sizeof *in);
    if (err && errlen)
        err[0] = 0;
    arg_in *A = calloc(nargs ? nargs : 1, sizeof *A);
    if (!A)
        return fail(err, errlen, AMPDIAG_TRACE_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < nargs && !rc; i++) {
        A[i].arg = args[i];
        if (!(rc = expand(&A[i], err, errlen)) && !(A[i].runs = calloc(A[i].npaths, sizeof *A[i].runs)))
            rc = fail(err, errlen, AMPDIAG_TRACE_ENOMEM, "out of memory");
    }
    an_options ro = {.warmup = opt ? opt->warmup : -1, .quiet = opt ? opt->quiet : 0, .no_rms_series = 1};
    if (!rc)
        rc = load_paths(A, nargs, 0, opt, err, errlen);
    if (!rc && (find_groups(A, nargs, flags, in) || drop_siblings(A, nargs, in)))
        rc = fail(err, errlen, AMPDIAG_TRACE_ENOMEM, "out of memory");
    if (!rc)
        rc = load_paths(A, nargs, 1, &ro, err, errlen);
    if (!rc)
        rc = collect(A, nargs, opt, in, err, errlen);
    free_args(A, nargs);
    return rc;
}
