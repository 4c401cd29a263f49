/*
 * t_messages.c - the message table (src/messages/): every template names only figures its row
 * provides and constants that exist; the styles print numbers as the reports promise; the
 * conditional parts; findings that another says more fully are left out of lists; every
 * finding and item id has words and a stable key; the glossary defines every figure.
 */
#include "analysis/evidence.h"
#include "analysis/figures.h"
#include "messages/messages.h"

#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void test_templates(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int bad = msg_check_templates(f);
    if (f)
        fclose(f);
    ok(f && bad == 0, "every template names only what its row provides (%d problems)", bad);
    if (bad && buf)
        diag("%s", buf);
    free(buf);
}

static void test_numbers(void)
{
    char b[64];
    msg_pct(b, sizeof b, 0);
    ok(strcmp(b, "0%") == 0, "a zero share: 0%% (%s)", b);
    msg_pct(b, sizeof b, 0.1234);
    ok(strcmp(b, "12.3%") == 0, "12.3%% (%s)", b);
    msg_pct(b, sizeof b, 1.5e-7);
    ok(strcmp(b, "1.5e-05%") == 0, "a tiny share keeps two digits (%s)", b);
    msg_scale(b, sizeof b, 65536);
    ok(strcmp(b, "2^16") == 0, "a power-of-two scale: 2^16 (%s)", b);
    msg_scale(b, sizeof b, 3);
    ok(strcmp(b, "3") == 0, "another scale: %%g (%s)", b);
    msg_const(b, sizeof b, K_SKIP_RATE_MAX);
    ok(strcmp(b, "1 in 500") == 0, "SKIP_RATE_MAX prints as a ratio (%s)", b);
    msg_const(b, sizeof b, K_FP16_UNDERFLOW_AT);
    ok(strcmp(b, "2^-25") == 0, "FP16_UNDERFLOW_AT as a power of two (%s)", b);
    msg_const(b, sizeof b, K_ADAM_EPS_SAFE);
    ok(strcmp(b, "1e-7") == 0, "ADAM_EPS_SAFE with its exponent trimmed (%s)", b);
    msg_const(b, sizeof b, K_FLUSH_MAX);
    ok(strcmp(b, "1%") == 0, "FLUSH_MAX as a percentage (%s)", b);
    ok(an_k(K_FP16_MAX) == 65504 && an_k(K_FP16_MARGIN_AT) == 32752,
       "the format constants come from the format table (65504, 32752)");
}

/* A finding's words with the figures it has: the conditional parts follow them. */
static void test_words(void)
{
    an_finding_list l = {0};
    an_finding *f = an_finding_add(&l, F_GRAD_SPAN, 0);
    ok(f != NULL, "a finding added");
    if (!f)
        return;
    f->v[an_finding_fig(F_GRAD_SPAN, "range_log2")] = 21;
    f->v[an_finding_fig(F_GRAD_SPAN, "wide")] = 0;
    char b[600];
    msg_finding(b, sizeof b, &(msg_ctx){0}, &l.v[0]);
    ok(strstr(b, "span 2^21.0") && strstr(b, "within FP16's 2^40"), "a span within FP16's: says so (%s)", b);
    l.v[0].v[1] = 1;
    msg_finding(b, sizeof b, &(msg_ctx){0}, &l.v[0]);
    ok(strstr(b, "more than FP16's 2^40") != NULL, "a wider one: more than (%s)", b);

    /* an activation overflow is left out of lists where the forward overflow names the layer */
    an_finding *a = an_finding_add(&l, F_ACT_OVERFLOW, 0);
    if (a)
        a->s.layer = 2;
    ok(a && !msg_finding_covered(&l, &l.v[1]), "alone, an activation overflow is listed");
    an_finding *w = an_finding_add(&l, F_FWD_OVERFLOW, 0);
    if (w)
        w->s.layer = 2;
    ok(w && msg_finding_covered(&l, &l.v[1]), "with the forward overflow of its layer, it is not");
    l.v[2].s.layer = 3;
    ok(!msg_finding_covered(&l, &l.v[1]), "... of another layer, it is");
    vec_free(&l);
}

static void test_ids(void)
{
    int dup = 0, missing = 0;
    for (int i = 1; i < AN_NFINDINGS; i++) {
        const char *k = an_finding_def_get((an_fid)i)->key;
        missing += !k || !*k || an_finding_parse(k) == F_NONE;
        for (int j = 1; j < i; j++)
            dup += strcmp(k, an_finding_def_get((an_fid)j)->key) == 0 &&
                   !(i >= F_CMP_MODEL && j < F_CMP_MODEL); /* cut_off / interrupted: per run and per comparison */
    }
    ok(missing == 0 && dup == 0, "every finding has a key that parses back (%d missing, %d duplicated)", missing, dup);
    int nofig = 0;
    for (int i = 0; i < AN_NFIGS; i++) {
        char def[1024];
        msg_fig_definition(def, sizeof def, (an_figid)i);
        nofig += !msg_fig_name((an_figid)i)[0] || !def[0] || strchr(def, '{') != NULL ||
                 !an_fig_row_get((an_figid)i)->key;
    }
    ok(nofig == 0, "every headline figure has a name, a JSON key and a definition with its constants printed (%d not)",
       nofig);
}

int main(void)
{
    test_templates();
    test_numbers();
    test_words();
    test_ids();
    return done_testing();
}
