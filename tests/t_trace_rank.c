/*
 * t_trace_rank.c - one rank's trace of a distributed run (include/ampdiag_trace.h,
 * ampdiag_trace_set_rank / ampdiag_trace_get_rank; traces/FORMAT.md, "Distributed runs"): the
 * five attributes written and read back; a rank out of range or an unknown sharding refused by
 * the writer, with nothing written; a trace without them read as a single process; mistyped or
 * out-of-range attributes written by another program refused by the reader.
 */
#include "ampdiag_trace.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/t_trace_rank.XXXXXX";

/* A trace at dir/name with one step; set() adds attributes before it. 0 on success. */
static int make(const char *name, int (*set)(ampdiag_trace_writer *), char *path, size_t n)
{
    snprintf(path, n, "%s/%s", dir, name);
    ampdiag_trace_writer *w;
    if (ampdiag_trace_create(path, NULL, &w) < 0)
        return -1;
    int rc = set ? set(w) : 0;
    ampdiag_trace_step st;
    memset(&st, 0, sizeof st);
    st.loss_scale = st.clip_coef = 1;
    if (rc >= 0)
        rc = ampdiag_trace_append_step(w, &st);
    int crc = ampdiag_trace_close(w, AMPDIAG_STATUS_COMPLETE);
    return rc < 0 ? rc : crc;
}

static int set_good(ampdiag_trace_writer *w)
{
    ampdiag_trace_rank d = {.rank = 1, .world_size = 2, .backend = "gloo", .reduce_dtype = "bf16",
                            .sharding = "sharded"};
    return ampdiag_trace_set_rank(w, &d);
}

/* Refused calls write nothing: the trace then reads as a single process. */
static int set_bad(ampdiag_trace_writer *w)
{
    ampdiag_trace_rank d = {.rank = 2, .world_size = 2, .sharding = "replicated"};
    int a = ampdiag_trace_set_rank(w, &d);
    d.rank = -1;
    int b = ampdiag_trace_set_rank(w, &d);
    d.rank = 0;
    d.world_size = 0;
    int c = ampdiag_trace_set_rank(w, &d);
    d.world_size = 4;
    d.sharding = "zero3";
    int e = ampdiag_trace_set_rank(w, &d);
    d.sharding = NULL;
    int f = ampdiag_trace_set_rank(w, &d);
    ok(a == AMPDIAG_TRACE_EINVAL && b == AMPDIAG_TRACE_EINVAL && c == AMPDIAG_TRACE_EINVAL &&
           e == AMPDIAG_TRACE_EINVAL && f == AMPDIAG_TRACE_EINVAL,
       "set_rank refuses rank >= world_size, rank < 0, world_size 0, an unknown or no sharding (%d %d %d %d %d)",
       a, b, c, e, f);
    ok(strstr(ampdiag_trace_errmsg(), "sharding") != NULL, "its message names what is wrong: %s",
       ampdiag_trace_errmsg());
    return 0;
}

static int set_string_rank(ampdiag_trace_writer *w)
{
    int rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_RANK, "0");
    return rc < 0 ? rc : ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_WORLD_SIZE, 2);
}

static int set_out_of_range(ampdiag_trace_writer *w)
{
    int rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_RANK, 3);
    return rc < 0 ? rc : ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_WORLD_SIZE, 2);
}

static int set_bad_sharding(ampdiag_trace_writer *w)
{
    int rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_RANK, 0);
    if (rc >= 0)
        rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_WORLD_SIZE, 2);
    return rc < 0 ? rc : ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_SHARDING, "diagonal");
}

/* Open path and get its rank attributes; returns get_rank's result (or -100 when the open
 * failed). */
static int read_rank(const char *path, ampdiag_trace_rank *d, ampdiag_trace_reader **r)
{
    if (ampdiag_trace_open(path, AMPDIAG_TRACE_READ_QUIET, r) < 0) {
        diag("open %s: %s", path, ampdiag_trace_errmsg());
        return -100;
    }
    return ampdiag_trace_get_rank(*r, d);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp\n");
        return 1;
    }
    char p[256];
    ampdiag_trace_rank d;
    ampdiag_trace_reader *r = NULL;

    ok(make("good.h5", set_good, p, sizeof p) == 0, "a trace with set_rank written");
    int rc = read_rank(p, &d, &r);
    ok(rc == 1 && d.rank == 1 && d.world_size == 2 && strcmp(d.backend, "gloo") == 0 &&
           strcmp(d.reduce_dtype, "bf16") == 0 && strcmp(d.sharding, "sharded") == 0,
       "get_rank reads rank 1 of 2, gloo, bf16, sharded (rc %d)", rc);
    ok(ampdiag_trace_attr_int(r, "rank", -1) == 1 && ampdiag_trace_attr_int(r, "world_size", -1) == 2 &&
           strcmp(ampdiag_trace_attr_str(r, "sharding"), "sharded") == 0,
       "they are plain root attributes (rank, world_size, sharding)");
    ampdiag_trace_reader_close(r);

    ok(make("refused.h5", set_bad, p, sizeof p) == 0, "a trace whose set_rank calls were refused");
    rc = read_rank(p, &d, &r);
    ok(rc == 0 && d.rank == 0 && d.world_size == 0 && d.sharding == NULL,
       "it reads as a single process: nothing was written (rc %d)", rc);
    ampdiag_trace_reader_close(r);

    ok(make("single.h5", NULL, p, sizeof p) == 0, "a trace without rank attributes");
    ok(read_rank(p, &d, &r) == 0, "get_rank: 0 (a single process)");
    ampdiag_trace_reader_close(r);

    static const struct {
        const char *name;
        int (*set)(ampdiag_trace_writer *);
        const char *what;
    } bad[] = {{"string.h5", set_string_rank, "a rank written as a string"},
               {"range.h5", set_out_of_range, "rank 3 of world size 2"},
               {"sharding.h5", set_bad_sharding, "sharding 'diagonal'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ok(make(bad[i].name, bad[i].set, p, sizeof p) == 0, "written through set_attr: %s", bad[i].what);
        rc = read_rank(p, &d, &r);
        ok(rc == AMPDIAG_TRACE_ESCHEMA && strstr(ampdiag_trace_errmsg(), bad[i].name) != NULL,
           "get_rank refuses %s, naming the file (rc %d: %s)", bad[i].what, rc, ampdiag_trace_errmsg());
        ampdiag_trace_reader_close(r);
        unlink(p);
    }
    ok(ampdiag_trace_set_rank(NULL, NULL) == AMPDIAG_TRACE_EINVAL &&
           ampdiag_trace_get_rank(NULL, &d) == AMPDIAG_TRACE_EINVAL, "NULL arguments refused");
    static const char *const left[] = {"good.h5", "refused.h5", "single.h5"};
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, left[i]);
        unlink(p);
    }
    rmdir(dir);
    return done_testing();
}
