/*
 * rules_recipe.c - the per-layer plan of a low-precision recipe as a decision (recommend.h):
 * which layers should stay BF16 under the recipe --recipe names, from the first run (the
 * baseline first) whose trace counted it. Reads F_RECIPE_PLAN and F_RECIPE_LAYER (recipe.c).
 */
#include "analysis/recipe.h"
#include "analysis/rules.h"

#include <string.h>

/* The run whose findings the plan comes from: the baseline when it counted the recipe, else
 * the first that did; -1 when none did. */
static long plan_source(const an_run *runs, size_t n, const an_comparison *c, int rc)
{
    for (size_t k = 0; k <= n; k++) {
        size_t i = k == 0 ? c->baseline : k - 1;
        if (i >= n || (k > 0 && i == c->baseline))
            continue;
        for (const an_finding *f = NULL; (f = an_finding_next(an_run_findings(&runs[i]), F_RECIPE_PLAN, -1, f));)
            if ((int)rec_fv(f, "recipe") == rc)
                return (long)i;
    }
    return -1;
}

void rec_recipe_rules(const an_run *runs, size_t n, const an_comparison *c, int rc, recommendation *R)
{
    long src = rc >= 0 && rc < AN_NRECIPES ? plan_source(runs, n, c, rc) : -1;
    if (src < 0)
        return;
    const an_finding_list *L = an_run_findings(&runs[src]);
    const an_finding *plan = NULL;
    for (const an_finding *f = NULL; !plan && (f = an_finding_next(L, F_RECIPE_PLAN, -1, f));)
        if ((int)rec_fv(f, "recipe") == rc)
            plan = f;
    rec_decision *d = rec_decide(R, WHAT_RECIPE_BF16, CONF_HYPOTHESIS);
    if (!d)
        return;
    d->value = rc;
    d->why = R_RECIPE_PLAN;
    rec_because(d, plan);
    for (const an_finding *f = NULL; (f = an_finding_next(L, F_RECIPE_LAYER, -1, f));)
        if ((int)rec_fv(f, "recipe") == rc && rec_fv(f, "keep") != 0) {
            rec_append_name(d->to, sizeof d->to, an_layer_name(&runs[src], f->s.layer));
            rec_because(d, f);
        }
}
