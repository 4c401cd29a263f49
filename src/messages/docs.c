/*
 * docs.c - the message table as documentation (messages.h): the reference of the constants,
 * findings and rule items that docs/recommendations.md carries (generated: `ampdiag help rules
 * --format md`, compared by make check), the glossary (`ampdiag help terms`, docs/glossary.md),
 * and the check that every template names only what its row provides.
 */
#include "messages/messages_internal.h"
#include "util/escape.h"
#include "util/wrap.h"

#include <stdio.h>
#include <string.h>

/* A template as documentation: its constants printed, its other names kept in braces and its
 * conditional parts in brackets; '|' escaped for a Markdown table. */
static void doc_text(FILE *f, const char *t)
{
    char buf[4096];
    msg_src x;
    memset(&x, 0, sizeof x);
    x.run = -1;
    x.doc = 1;
    msg_expand(buf, sizeof buf, t, &x);
    for (const char *p = buf; *p; p++) {
        if (*p == '|')
            fputs("\\|", f);
        else
            fputc(*p, f);
    }
}

/* Text in a Markdown table cell: '|' escaped. */
static void md_cell(FILE *f, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '|')
            fputc('\\', f);
        fputc(*p, f);
    }
}

static void constants_md(FILE *f)
{
    fprintf(f, "### Constants\n\n| name | value | what it bounds |\n|---|---|---|\n");
    for (int k = 0; k < AN_NCONSTS; k++) {
        char v[64];
        const an_const *c = an_const_get((an_kid)k);
        msg_const(v, sizeof v, (an_kid)k);
        fprintf(f, "| `%s` | %s | ", c->key, v);
        md_cell(f, c->why);
        fprintf(f, " |\n");
    }
}

static void findings_md(FILE *f)
{
    fprintf(f, "\n### Findings\n\n| id | figures (unit) | judged against | words |\n|---|---|---|---|\n");
    for (int i = 1; i < AN_NFINDINGS; i++) {
        const an_finding_def *d = an_finding_def_get((an_fid)i);
        fprintf(f, "| `%s` | ", d->key);
        for (int k = 0; k < AN_MAXFIG && d->fig[k].name; k++)
            fprintf(f, "%s%s (%s)", k ? ", " : "", d->fig[k].name, an_unit_key(d->fig[k].unit));
        for (int k = 0; k < AN_MAXSTR && d->str[k]; k++)
            fprintf(f, "%s%s (text)", k || d->fig[0].name ? ", " : "", d->str[k]);
        fprintf(f, " | ");
        for (int k = 0; k < d->nk; k++)
            fprintf(f, "%s`%s`", k ? ", " : "", an_const_get(d->k[k])->key);
        fprintf(f, " | ");
        doc_text(f, msg_finding_rows[i].text);
        fprintf(f, " |\n");
    }
}

static const char *const sec_words[REC_NSECS] = {
    "the verdict line", "the verdict's reasons", "against fp16", "for fp16", "against bf16", "for bf16",
    "the loss scale", "the lr line", "the lr's evidence", "the clip line", "the clip's evidence", "warnings", "--fail-on",
    "the step times of viable precisions",
};

static void items_md(FILE *f)
{
    fprintf(f, "\n### What the rules say\n\nEach rule's words: the finding it reads (its figures and "
               "subject are named as in the table above) and its own figures.\n\n"
               "| id | reads | own figures | words |\n|---|---|---|---|\n");
    for (int i = 1; i < REC_NMIDS; i++) {
        const msg_row *r = &msg_item_rows[i];
        fprintf(f, "| `%s` | %s | ", r->key, r->f ? an_finding_def_get(r->f)->key : "-");
        for (int k = 0; k < REC_MAXV && r->fig[k]; k++)
            fprintf(f, "%s%s", k ? ", " : "", r->fig[k]);
        fprintf(f, " | ");
        doc_text(f, r->text);
        fprintf(f, " |\n");
    }
    fprintf(f, "\nThe sections a report prints them in:");
    for (int s = 0; s < REC_NSECS; s++)
        fprintf(f, "%s`%s` (%s)", s ? ", " : " ", rec_sec_key((rec_sec)s), sec_words[s]);
    fprintf(f, ".\n");
}

int msg_rules_markdown(FILE *f)
{
    constants_md(f);
    findings_md(f);
    items_md(f);
    fprintf(f, "\n### Decisions\n\n| what | words | confidence |\n|---|---|---|\n");
    for (int w = 0; w < REC_NWHATS; w++) {
        fprintf(f, "| `%s` | ", rec_what_key((rec_what)w));
        doc_text(f, msg_decision_rows[w].text);
        fprintf(f, " | observed, measured or hypothesis |\n");
    }
    fprintf(f, "\n### ampdiag tune's words\n\nWhy tune made each run, what it kept, and its verification "
            "(`tune.json`: `runs[].why_id`, `verification_id`).\n\n| id | words |\n|---|---|\n");
    for (int t = 0; t < MT_N; t++) {
        fprintf(f, "| `%s` | ", msg_tune_rows[t].key);
        doc_text(f, msg_tune_rows[t].text);
        fprintf(f, " |\n");
    }
    if (msg_apply_markdown(f))
        return -1;
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------
 * The glossary
 * ------------------------------------------------------------------------------------------ */

int msg_glossary_text(FILE *f, int width)
{
    char def[1024];
    fprintf(f, "Figures (every command prints each under this name):\n");
    for (int i = 0; i < AN_NFIGS; i++) {
        msg_fig_definition(def, sizeof def, (an_figid)i);
        wrap_para(f, "", 2, msg_fig_name((an_figid)i), width);
        wrap_para(f, "", 6, def, width);
    }
    for (int i = 0; i < MSG_NCFIGS; i++) {
        msg_cfig_definition(def, sizeof def, (msg_cfig)i);
        wrap_para(f, "", 2, msg_cfig_name((msg_cfig)i), width);
        wrap_para(f, "", 6, def, width);
    }
    fprintf(f, "\nTerms:\n");
    size_t n;
    const msg_term *t = msg_glossary(&n);
    for (size_t i = 0; i < n; i++) {
        msg_term_definition(def, sizeof def, &t[i]);
        wrap_para(f, "", 2, t[i].term, width);
        wrap_para(f, "", 6, def, width);
    }
    return ferror(f) ? -1 : 0;
}

int msg_glossary_markdown(FILE *f)
{
    char def[1024];
    fprintf(f, "# Glossary\n\n<!-- generated by `ampdiag help terms --format md` (make docs); make check "
               "compares -->\n\n"
               "## Figures\n\nEvery command (the run summary, info, compare, sweep, tune, plot) prints each "
               "figure under this name, with this definition; JSON names it by its key.\n\n"
               "| figure | JSON key | unit | definition |\n|---|---|---|---|\n");
    for (int i = 0; i < AN_NFIGS; i++) {
        const an_fig_row *row = an_fig_row_get((an_figid)i);
        msg_fig_definition(def, sizeof def, (an_figid)i);
        fprintf(f, "| %s | `%s` | %s | ", msg_fig_name((an_figid)i), row->key, an_unit_key(row->unit));
        md_cell(f, def);
        fprintf(f, " |\n");
    }
    fprintf(f, "\nA comparison's figures (compare, sweep, tune):\n\n| figure | definition |\n|---|---|\n");
    for (int i = 0; i < MSG_NCFIGS; i++) {
        msg_cfig_definition(def, sizeof def, (msg_cfig)i);
        fprintf(f, "| %s | ", msg_cfig_name((msg_cfig)i));
        md_cell(f, def);
        fprintf(f, " |\n");
    }
    fprintf(f, "\n## Terms\n\n| term | meaning |\n|---|---|\n");
    size_t n;
    const msg_term *t = msg_glossary(&n);
    for (size_t i = 0; i < n; i++) {
        msg_term_definition(def, sizeof def, &t[i]);
        fprintf(f, "| %s | ", t[i].term);
        md_cell(f, def);
        fprintf(f, " |\n");
    }
    return ferror(f) ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------
 * The check of the templates
 * ------------------------------------------------------------------------------------------ */

/* Expand t in check mode with a finding of id f and the item's figures names: the problems. */
static int check_one(FILE *out, const char *what, const char *t, an_fid f, const char *const *names)
{
    static const double v[REC_MAXV] = {0};
    an_finding fd;
    memset(&fd, 0, sizeof fd);
    fd.id = f;
    fd.s.run = fd.s.run2 = fd.s.layer = fd.s.kind = fd.s.col = -1;
    msg_src x;
    memset(&x, 0, sizeof x);
    x.run = -1;
    x.check = 1;
    x.f = f != F_NONE ? &fd : NULL;
    x.v = v;
    x.vnames = names;
    x.report = out;
    x.to = "";
    char buf[4096];
    x.report = NULL;
    msg_expand(buf, sizeof buf, t, &x);
    if (x.bad && out && t) { /* again, saying what */
        int bad = x.bad;
        x.bad = 0;
        x.report = out;
        fprintf(out, "%s: ", what);
        msg_expand(buf, sizeof buf, t, &x);
        x.bad = bad;
    }
    return x.bad;
}

/* A row of tune's words in check mode: its figures and strings. */
static int check_tune(FILE *out, const msg_tune_row *r)
{
    static const double v[REC_MAXV] = {0};
    static const char *const sv[MSG_TUNE_MAXS] = {"", "", "", ""};
    msg_src x;
    memset(&x, 0, sizeof x);
    x.run = -1;
    x.check = 1;
    x.v = v;
    x.vnames = r->fig;
    x.s = sv;
    x.snames = r->str;
    char buf[4096];
    msg_expand(buf, sizeof buf, r->text, &x);
    if (x.bad && out) {
        int bad = x.bad;
        x.bad = 0;
        x.report = out;
        fprintf(out, "tune %s: ", r->key);
        msg_expand(buf, sizeof buf, r->text, &x);
        x.bad = bad;
    }
    return x.bad;
}

int msg_check_templates(FILE *out)
{
    int bad = 0;
    for (int i = 1; i < AN_NFINDINGS; i++)
        bad += check_one(out, an_finding_def_get((an_fid)i)->key, msg_finding_rows[i].text, (an_fid)i, NULL) +
               check_one(out, an_finding_def_get((an_fid)i)->key, msg_finding_rows[i].brief, (an_fid)i, NULL);
    for (int i = 1; i < REC_NMIDS; i++) {
        const msg_row *r = &msg_item_rows[i];
        if (!r->key || !r->text) {
            if (out)
                fprintf(out, "item %d has no row\n", i);
            bad++;
            continue;
        }
        bad += check_one(out, r->key, r->text, r->f, r->fig) + check_one(out, r->key, r->brief, r->f, r->fig);
    }
    static const char *const value[REC_MAXV] = {"value"};
    for (int w = 0; w < REC_NWHATS; w++)
        bad += check_one(out, rec_what_key((rec_what)w), msg_decision_rows[w].text, F_NONE, value);
    for (int t = 0; t < MT_N; t++) {
        const msg_tune_row *r = &msg_tune_rows[t];
        if (!r->key || !r->text) {
            if (out)
                fprintf(out, "tune row %d has no row\n", t);
            bad++;
            continue;
        }
        bad += check_tune(out, r);
    }
    return bad + msg_apply_check(out);
}
