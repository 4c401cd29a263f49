/*
 * report_text.c - a comparison for a terminal (report.h): the verdict first, then the table of
 * runs side by side (its notes under it), then the evidence of each recommendation, all
 * wrapped to the width.
 */
#include "report/info.h"
#include "report/report_internal.h"
#include "report/whatif.h"
#include "report/recipe.h"
#include "analysis/recipe.h"
#include "util/escape.h"
#include "util/wrap.h"

#include <stdlib.h>
#include <string.h>

#define LABEL 11 /* the evidence's label column */

typedef struct text_out {
    FILE *f;
    int width;
} text_out;

/* Every item of a section, each wrapped after the label (on the first only), with a prefix. */
static void items(const text_out *t, const report_in *in, rec_sec sec, const char *label,
                  const char *prefix)
{
    char buf[2400], line[2500];
    int first = 1;
    for (size_t i = 0; i < in->R->items.n; i++) {
        const rec_item *it = &in->R->items.v[i];
        if (it->sec != sec)
            continue;
        msg_item(buf, sizeof buf, &in->m, it);
        snprintf(line, sizeof line, "%s%s", prefix, buf);
        wrap_para(t->f, first ? label : "", LABEL, line, t->width);
        first = 0;
    }
}

static int section_has(const report_in *in, rec_sec sec)
{
    for (size_t i = 0; i < in->R->items.n; i++)
        if (in->R->items.v[i].sec == sec)
            return 1;
    return 0;
}

static void headline(const text_out *t, const report_in *in)
{
    const recommendation *R = in->R;
    char v[4000], lr[800], clip[800], line[1700];
    msg_verdict(v, sizeof v, &in->m);
    wrap_para(t->f, "Verdict:", 9, v, t->width);
    msg_section(lr, sizeof lr, &in->m, SEC_LR_LINE, "; ");
    msg_section(clip, sizeof clip, &in->m, SEC_CLIP_LINE, "; ");
    snprintf(line, sizeof line, "LR %s. Clip %s.", lr, clip);
    wrap_para(t->f, "", 9, line, t->width);
    msg_section(line, sizeof line, &in->m, SEC_CLAIM, "; ");
    if (line[0])
        wrap_para(t->f, "Claim:", 9, line, t->width);
    if (R->fail_held & R->fail_mask) {
        line[0] = 0;
        for (size_t i = 0; i < R->items.n; i++) {
            const rec_item *it = &R->items.v[i];
            if (it->sec != SEC_FAIL || !it->f || !(R->fail_mask & REC_FAIL_BIT(it->f->id)))
                continue;
            const char *nm = rec_fail_name(it->f->id);
            if (!strstr(line, nm)) /* (the names: a group's or a finding's key) */
                snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s", line[0] ? "," : "", nm);
        }
        fprintf(t->f, "%-9s--fail-on: %s held (exit status 1)\n", "", line);
    }
    fputc('\n', t->f);
}

/* The runs read from their ranks' traces: each group, its ranks, what they showed together. */
static void ranks(const text_out *t, const report_in *in)
{
    int any = 0;
    for (size_t i = 0; i < in->n; i++)
        if (in->runs[i].ranks) {
            report_ranks_text(t->f, &in->runs[i], &in->m, any ? "" : "Ranks", LABEL, 8, t->width);
            any = 1;
        }
    if (any)
        fputc('\n', t->f);
}

static void note(const char *label, const char *text, void *arg)
{
    const text_out *t = arg;
    char l[200];
    snprintf(l, sizeof l, "%s:", label);
    wrap_para(t->f, "", 2, l, t->width);
    wrap_para(t->f, "", 6, text, t->width);
}

/* The table of runs: a column per run (the row's figure name first), wrapped to the width;
 * under it what the rows measure. */
static int table(const text_out *t, const report_in *in)
{
    size_t ncols = in->n + 1, nrows = 1;
    char *cells = malloc((NROWS + 1) * ncols * 256);
    const char **p = malloc((NROWS + 1) * ncols * sizeof *p);
    if (!cells || !p) {
        free(cells);
        free(p);
        return -1;
    }
#define CELL(r, c) (cells + ((r) * ncols + (c)) * 256)
    CELL(0, 0)[0] = 0;
    for (size_t i = 0; i < in->n; i++)
        report_run_header(CELL(0, i + 1), 256, in, i);
    for (int row = 0; row < NROWS; row++) {
        if (!report_row_wanted(in, row))
            continue;
        snprintf(CELL(nrows, 0), 256, "%s", report_row_label(in, row));
        for (size_t i = 0; i < in->n; i++)
            report_cell(CELL(nrows, i + 1), 256, in, i, row);
        nrows++;
    }
    for (size_t k = 0; k < nrows * ncols; k++)
        p[k] = cells + k * 256;
#undef CELL
    int rc = wrap_table(t->f, p, nrows, ncols, 0, t->width, 10);
    free(cells);
    free(p);
    report_table_notes(in, note, (void *)t);
    fputc('\n', t->f);
    return rc;
}

/* The precision's evidence: the verdict, its reasons, then against and for each format. */
static void precision_section(const text_out *t, const report_in *in)
{
    char v[2000];
    msg_section(v, sizeof v, &in->m, SEC_VERDICT, "; ");
    wrap_para(t->f, "Precision", LABEL, v, t->width);
    items(t, in, SEC_WHY, "", "");
    static const struct {
        rec_sec against, pro;
        const char *name;
    } fmts[2] = {{SEC_FP16_AGAINST, SEC_FP16_FOR, " fp16"}, {SEC_BF16_AGAINST, SEC_BF16_FOR, " bf16"}};
    for (int k = 0; k < 2; k++) {
        items(t, in, fmts[k].against, fmts[k].name, "- ");
        items(t, in, fmts[k].pro, section_has(in, fmts[k].against) ? "" : fmts[k].name, "+ ");
    }
}

static void apply_line(const char *what, const char *how, void *arg)
{
    const text_out *t = arg;
    char line[1700];
    snprintf(line, sizeof line, "- %s: %s", what, how);
    wrap_para(t->f, "", LABEL, line, t->width);
}

/* How to apply the decisions, in the vocabulary of the baseline's writer. */
static void apply(const text_out *t, const report_in *in)
{
    char head[200];
    msg_vocab v = report_vocab(in);
    snprintf(head, sizeof head, "in %s%s:", msg_vocab_name(v),
             v == MSG_VOCAB_PYTORCH ? " (the baseline was traced by ampdiag.torch)" : "");
    FILE *mem;
    char *buf = NULL;
    size_t len = 0;
    if (!(mem = open_memstream(&buf, &len)))
        return;
    text_out m = {mem, t->width};
    size_t n = report_apply_lines(in, apply_line, &m);
    if (fclose(mem) == 0 && n) {
        wrap_para(t->f, "Apply", LABEL, head, t->width);
        fputs(buf, t->f);
        fputc('\n', t->f);
    }
    free(buf);
}

static void speed(const text_out *t, const report_in *in) { items(t, in, SEC_SPEED, "Speed", ""); }

static void remedies(const text_out *t, const report_in *in)
{
    const rec_decision *d[16];
    size_t n = rec_remedies(in->R, d, 16);
    char line[1200];
    for (size_t i = 0; i < n; i++) {
        msg_remedy(line, sizeof line, &in->m, d[i]);
        wrap_para(t->f, i ? "" : "Run with", LABEL, line, t->width);
    }
}

/* The what-if sections the options ask for, else the line that says they exist. */
static void whatif(const text_out *t, const report_in *in, const char *list)
{
    char hidden[600], line[800];
    for (size_t i = 0; i < in->n; i++) {
        char esc[STR_ESCAPED_SIZE(sizeof in->runs[i].label)];
        FILE *mem;
        char *buf = NULL;
        size_t len = 0;
        if (!(mem = open_memstream(&buf, &len)))
            continue;
        report_text_whatif_hurt(mem, &in->runs[i], list, LABEL, t->width);
        fclose(mem);
        if (len) {
            fprintf(t->f, "%-11s%s:\n", "What-if", str_escape_ctl(esc, sizeof esc, in->runs[i].label));
            fputs(buf, t->f);
        }
        free(buf);
    }
    report_whatif_hidden_names(hidden, sizeof hidden, in->runs, in->n, list);
    msg_whatif_hidden(line, sizeof line, hidden);
    if (line[0])
        wrap_para(t->f, "What-if", LABEL, line, t->width);
}

/* The recipe --recipe names: the plan's decision, then each run's section; else the line that
 * says which recipes the traces counted. */
static void recipes(const text_out *t, const report_in *in, const report_opts *o)
{
    int rc = o && o->recipe ? an_recipe_parse(o->recipe) : -1;
    char line[1700];
    if (rc < 0) {
        report_recipes_line(line, sizeof line, in->runs, in->n, o ? o->whatif : NULL, 0);
        if (line[0])
            wrap_para(t->f, "Recipes", LABEL, line, t->width);
        return;
    }
    for (size_t i = 0; i < in->R->decisions.n; i++) {
        const rec_decision *d = &in->R->decisions.v[i];
        if (d->what != WHAT_RECIPE_BF16)
            continue;
        char what[600], why[1000];
        msg_decision(what, sizeof what, &in->m, d);
        msg_decision_why(why, sizeof why, &in->m, d);
        snprintf(line, sizeof line, "%s: %s", what, why);
        wrap_para(t->f, "Recipe", LABEL, line, t->width);
    }
    for (size_t i = 0; i < in->n; i++) {
        char esc[STR_ESCAPED_SIZE(sizeof in->runs[i].label)];
        fprintf(t->f, "%-11s%s:\n", "Recipe", str_escape_ctl(esc, sizeof esc, in->runs[i].label));
        report_text_recipe(t->f, &in->runs[i], rc, LABEL, t->width);
    }
}

static void notes(const text_out *t, const report_in *in)
{
    char buf[1200];
    int first = 1;
    for (size_t i = 0; i < in->c->list.n; i++) {
        const an_finding *f = &in->c->list.v[i];
        if (!report_is_note(f))
            continue;
        msg_finding(buf, sizeof buf, &in->m, f);
        wrap_para(t->f, first ? "Runs" : "", LABEL, buf, t->width);
        first = 0;
    }
}

static void charts(const text_out *t, const report_opts *o)
{
    char line[1400];
    size_t drawn = 0;
    for (size_t i = 0; i < o->ncharts; i++)
        drawn += o->charts[i].drawn != 0;
    snprintf(line, sizeof line, "%zu of %zu drawn in %s%s%s", drawn, o->ncharts, o->plots_dir,
             o->charts_note ? ": " : "", o->charts_note ? o->charts_note : "");
    wrap_para(t->f, "Charts", LABEL, line, t->width);
}

/* --fail-on: the findings asked for that held, each with its condition's name. */
static void fail_on(const text_out *t, const report_in *in)
{
    char buf[1200], line[1300];
    int first = 1;
    for (size_t i = 0; i < in->R->items.n; i++) {
        const rec_item *it = &in->R->items.v[i];
        if (it->sec != SEC_FAIL || !it->f)
            continue;
        msg_item(buf, sizeof buf, &in->m, it);
        snprintf(line, sizeof line, "%s: %s", rec_fail_name(it->f->id), buf);
        wrap_para(t->f, first ? "Fail-on" : "", LABEL, line, t->width);
        first = 0;
    }
}

int report_text(FILE *f, const an_run *runs, size_t n, const an_comparison *c, const recommendation *R,
                const report_opts *o)
{
    report_in in;
    report_in_init(&in, runs, n, c, R);
    text_out t = {f, o && o->width >= WRAP_MIN ? o->width : wrap_width(f)};
    headline(&t, &in);
    ranks(&t, &in);
    apply(&t, &in);
    if (table(&t, &in))
        return -1;
    speed(&t, &in);
    precision_section(&t, &in);
    items(&t, &in, SEC_SCALE, "Loss scale", "");
    remedies(&t, &in);
    items(&t, &in, SEC_LR_LINE, "LR", "");
    items(&t, &in, SEC_LR, "", "");
    items(&t, &in, SEC_CLIP_LINE, "Clip", "");
    items(&t, &in, SEC_CLIP, "", "");
    whatif(&t, &in, o ? o->whatif : NULL);
    recipes(&t, &in, o);
    items(&t, &in, SEC_WARN, "Warnings", "");
    notes(&t, &in);
    if (o && o->plots_dir)
        charts(&t, o);
    if (R->fail_mask)
        fail_on(&t, &in);
    return ferror(f) ? -1 : 0;
}
