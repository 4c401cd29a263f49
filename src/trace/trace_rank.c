/*
 * trace_rank.c - the root attributes of one rank's trace in a distributed run (rank,
 * world_size, dist_backend, grad_reduce_dtype, sharding; traces/FORMAT.md, "Distributed
 * runs"): written together and checked (ampdiag_trace_set_rank), read back and checked
 * (ampdiag_trace_get_rank). They are ordinary root attributes: the writer's setters write them
 * and the reader keeps them like any other; this file only gives them one checked form.
 */
#include "ampdiag_trace.h"
#include "trace/trace_internal.h"

#include <string.h>

static const char *const sharding_names[] = {"replicated", "sharded", "hybrid", "none"};

static int sharding_known(const char *s)
{
    for (size_t i = 0; s && i < sizeof sharding_names / sizeof sharding_names[0]; i++)
        if (strcmp(s, sharding_names[i]) == 0)
            return 1;
    return 0;
}

int ampdiag_trace_set_rank(ampdiag_trace_writer *w, const ampdiag_trace_rank *d)
{
    if (!w || !d)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_set_rank: NULL argument");
    if (d->world_size < 1 || d->rank < 0 || d->rank >= d->world_size)
        return trace_fail(AMPDIAG_TRACE_EINVAL,
                          "ampdiag_trace_set_rank: rank %lld of world size %lld (expected 0 <= rank "
                          "< world_size)", (long long)d->rank, (long long)d->world_size);
    if (!sharding_known(d->sharding))
        return trace_fail(AMPDIAG_TRACE_EINVAL,
                          "ampdiag_trace_set_rank: sharding '%.32s' (expected replicated, sharded, "
                          "hybrid or none)", d->sharding ? d->sharding : "(null)");
    int rc;
    if ((rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_RANK, d->rank)) < 0 ||
        (rc = ampdiag_trace_set_attr_int(w, AMPDIAG_ATTR_WORLD_SIZE, d->world_size)) < 0 ||
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_SHARDING, d->sharding)) < 0)
        return rc;
    if (d->backend && *d->backend &&
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_DIST_BACKEND, d->backend)) < 0)
        return rc;
    if (d->reduce_dtype && *d->reduce_dtype &&
        (rc = ampdiag_trace_set_attr_str(w, AMPDIAG_ATTR_GRAD_REDUCE_DTYPE, d->reduce_dtype)) < 0)
        return rc;
    return 0;
}

int ampdiag_trace_get_rank(const ampdiag_trace_reader *r, ampdiag_trace_rank *d)
{
    if (!r || !d)
        return trace_fail(AMPDIAG_TRACE_EINVAL, "ampdiag_trace_get_rank: NULL argument");
    memset(d, 0, sizeof *d);
    const ampdiag_trace_attr *rk = ampdiag_trace_attr_find(r, AMPDIAG_ATTR_RANK);
    const ampdiag_trace_attr *ws = ampdiag_trace_attr_find(r, AMPDIAG_ATTR_WORLD_SIZE);
    if (!rk && !ws)
        return 0;
    const char *path = ampdiag_trace_path(r);
    if (!rk || !ws || rk->type != AMPDIAG_ATTR_INT || ws->type != AMPDIAG_ATTR_INT)
        return trace_fail(AMPDIAG_TRACE_ESCHEMA,
                          "'%s': root attributes 'rank' and 'world_size' must both be integers",
                          path);
    if (ws->i < 1 || rk->i < 0 || rk->i >= ws->i)
        return trace_fail(AMPDIAG_TRACE_ESCHEMA, "'%s': rank %lld of world size %lld (expected 0 "
                          "<= rank < world_size)", path, (long long)rk->i, (long long)ws->i);
    const char *sh = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_SHARDING);
    if (!sh)
        sh = "none";
    if (!sharding_known(sh))
        return trace_fail(AMPDIAG_TRACE_ESCHEMA, "'%s': root attribute 'sharding' is not replicated, "
                          "sharded, hybrid or none", path);
    const char *b = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_DIST_BACKEND);
    const char *rd = ampdiag_trace_attr_str(r, AMPDIAG_ATTR_GRAD_REDUCE_DTYPE);
    d->rank = rk->i;
    d->world_size = ws->i;
    d->sharding = sh;
    d->backend = b ? b : "";
    d->reduce_dtype = rd ? rd : "";
    return 1;
}
