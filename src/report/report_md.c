/*
 * report_md.c - a comparison as Markdown for a pull request (report.h): the verdict, the table
 * of runs, each layer's ranges in a collapsed table, the evidence as lists, the charts.
 */
#include "report/info.h"
#include "report/report_internal.h"
#include "report/whatif.h"
#include "report/recipe.h"
#include "analysis/recipe.h"
#include "util/escape.h"
#include "util/util.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Markdown-safe text: nothing in it breaks a table cell or adds markup (util/escape.h). */
static void md(FILE *f, const char *s) { str_fputs(s, SINK_MD, f); }

static void items(FILE *f, const report_in *in, rec_sec sec, const char *prefix)
{
    char buf[2400];
    for (size_t i = 0; i < in->R->items.n; i++) {
        const rec_item *it = &in->R->items.v[i];
        if (it->sec != sec)
            continue;
        msg_item(buf, sizeof buf, &in->m, it);
        fputs("- ", f);
        if (prefix)
            fputs(prefix, f);
        md(f, buf);
        fputc('\n', f);
    }
}

static void pct_cell(FILE *f, double v)
{
    char a[32];
    msg_pct(a, sizeof a, isnan(v) ? 0 : v);
    fprintf(f, " %s |", a);
}

/* Per layer and kind of one run: FP16 headroom and what each shown what-if column would do to
 * the values as held (a collapsed table). */
static void md_ranges(FILE *f, const an_run *r, const char *list)
{
    static const int kinds[] = {AMPDIAG_KIND_ACTIVATION, AMPDIAG_KIND_WEIGHT, AMPDIAG_KIND_ACTIVATION_GRAD,
                                AMPDIAG_KIND_WEIGHT_GRAD};
    fprintf(f, "\n<details><summary>Ranges per layer in ");
    str_fputs(r->label, SINK_HTML, f); /* an HTML block: Markdown's escapes do not work there */
    fprintf(f, " (FP16 headroom in binades, what the formats would do to the values as held)</summary>\n\n");
    fprintf(f, "| layer | kind | absmax (step) | fp16 headroom over | fp16 headroom under | fp16 overflow | "
               "fp16 flushed | fp16 subnormal |");
    size_t ncol = 3;
    for (int col = 1; col < r->nwcol; col++)
        if (report_whatif_shown(r, col, list)) {
            fprintf(f, " %s overflow | %s flushed |", r->wcol[col].name, r->wcol[col].name);
            ncol += 2;
        }
    fprintf(f, "\n|---|---|---|---|---|");
    for (size_t k = 0; k < ncol; k++)
        fprintf(f, "---|");
    fputc('\n', f);
    for (size_t l = 0; l < r->nlayers; l++)
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            const an_cell *c = &r->layers[l].cell[kinds[k]];
            if (!c->records)
                continue;
            an_cell_figs h;
            an_cell_figs_of(r, c, AN_WI_FP16, &h);
            fprintf(f, "| ");
            md(f, r->layers[l].name);
            fprintf(f, " | %s | ", msg_kind_abbrev(kinds[k]));
            if (c->absmax >= 0)
                fprintf(f, "%.3g (%" PRId64 ") | %+.1f | ", c->absmax, c->absmax_step, h.over_headroom);
            else
                fprintf(f, "- | - | ");
            if (isnan(h.under_headroom))
                fprintf(f, "- |");
            else
                fprintf(f, "%+.1f |", h.under_headroom);
            pct_cell(f, h.overflow_share);
            pct_cell(f, h.underflow_nonzero_share);
            pct_cell(f, h.subnormal_share);
            for (int col = 1; col < r->nwcol; col++)
                if (report_whatif_shown(r, col, list)) {
                    an_cell_figs w;
                    an_cell_figs_of(r, c, col, &w);
                    pct_cell(f, w.overflow_share);
                    pct_cell(f, w.underflow_nonzero_share);
                }
            fputc('\n', f);
        }
    fprintf(f, "\n</details>\n");
}

static void md_headline(FILE *f, const report_in *in)
{
    const recommendation *R = in->R;
    char v[4000];
    msg_verdict(v, sizeof v, &in->m);
    fprintf(f, "## ampdiag compare\n\n**Verdict:** ");
    md(f, v);
    msg_section(v, sizeof v, &in->m, SEC_LR_LINE, "; ");
    fprintf(f, "  \n**LR:** ");
    md(f, v);
    msg_section(v, sizeof v, &in->m, SEC_CLIP_LINE, "; ");
    fprintf(f, "  \n**Clip:** ");
    md(f, v);
    msg_section(v, sizeof v, &in->m, SEC_CLAIM, "; ");
    if (v[0]) {
        fprintf(f, "  \n**Claim:** ");
        md(f, v);
    }
    fprintf(f, "\n");
    if (!(R->fail_held & R->fail_mask))
        return;
    fprintf(f, "\n**--fail-on held:**");
    char seen[600] = "";
    for (size_t i = 0; i < R->items.n; i++) {
        const rec_item *it = &R->items.v[i];
        if (it->sec != SEC_FAIL || !it->f || !(R->fail_mask & REC_FAIL_BIT(it->f->id)))
            continue;
        const char *nm = rec_fail_name(it->f->id);
        if (strstr(seen, nm))
            continue;
        snprintf(seen + strlen(seen), sizeof seen - strlen(seen), "%s,", nm);
        fprintf(f, " `%s`", nm);
    }
    fprintf(f, "\n");
}

/* The runs read from their ranks' traces: each group, its ranks, what they showed together. */
static void md_ranks(FILE *f, const report_in *in)
{
    int any = 0;
    for (size_t i = 0; i < in->n; i++)
        if (in->runs[i].ranks) {
            if (!any)
                fprintf(f, "\n### Ranks\n\n");
            any = 1;
            report_ranks_md(f, &in->runs[i], &in->m);
        }
}

static void md_note(const char *label, const char *text, void *arg)
{
    FILE *f = arg;
    fputs("- ", f);
    md(f, label);
    fputs(": ", f);
    md(f, text);
    fputc('\n', f);
}

static void md_table(FILE *f, const report_in *in)
{
    char cell[256];
    fprintf(f, "\n| |");
    for (size_t i = 0; i < in->n; i++) {
        report_run_header(cell, sizeof cell, in, i);
        fputc(' ', f);
        md(f, cell);
        fprintf(f, " |");
    }
    fprintf(f, "\n|---|");
    for (size_t i = 0; i < in->n; i++)
        fprintf(f, "---|");
    fputc('\n', f);
    for (int row = 0; row < NROWS; row++) {
        if (!report_row_wanted(in, row))
            continue;
        fprintf(f, "| ");
        md(f, report_row_label(in, row));
        fprintf(f, " |");
        for (size_t i = 0; i < in->n; i++) {
            report_cell(cell, sizeof cell, in, i, row);
            fputc(' ', f);
            md(f, cell);
            fprintf(f, " |");
        }
        fputc('\n', f);
    }
    fputc('\n', f);
    report_table_notes(in, md_note, f);
}

static void md_evidence(FILE *f, const report_in *in)
{
    char buf[1600];
    fprintf(f, "\n### Precision\n\n");
    items(f, in, SEC_WHY, NULL);
    items(f, in, SEC_FP16_AGAINST, "fp16 ✗ ");
    items(f, in, SEC_FP16_FOR, "fp16 ✓ ");
    items(f, in, SEC_BF16_AGAINST, "bf16 ✗ ");
    items(f, in, SEC_BF16_FOR, "bf16 ✓ ");
    if (in->R->scale) {
        fprintf(f, "\n### Loss scale\n\n");
        items(f, in, SEC_SCALE, NULL);
    }
    const rec_decision *d[16];
    size_t nr = rec_remedies(in->R, d, 16);
    if (nr)
        fprintf(f, "\n### Run with\n\n");
    for (size_t i = 0; i < nr; i++) {
        msg_remedy(buf, sizeof buf, &in->m, d[i]);
        fputs("- ", f);
        md(f, buf);
        fputc('\n', f);
    }
    msg_section(buf, sizeof buf, &in->m, SEC_LR_LINE, "; ");
    fprintf(f, "\n### Learning rate\n\n**");
    md(f, buf);
    fprintf(f, "**\n\n");
    items(f, in, SEC_LR, NULL);
    msg_section(buf, sizeof buf, &in->m, SEC_CLIP_LINE, "; ");
    fprintf(f, "\n### Clip\n\n**");
    md(f, buf);
    fprintf(f, "**\n\n");
    items(f, in, SEC_CLIP, NULL);
}

static void md_runs(FILE *f, const report_in *in)
{
    char buf[1200];
    int first = 1;
    for (size_t i = 0; i < in->c->list.n; i++) {
        const an_finding *fd = &in->c->list.v[i];
        if (!report_is_note(fd))
            continue;
        if (first)
            fprintf(f, "\n### Runs compared\n\n");
        first = 0;
        msg_finding(buf, sizeof buf, &in->m, fd);
        fputs("- ", f);
        md(f, buf);
        fputc('\n', f);
    }
    fprintf(f, "\n| run | file | precision | model | data | seed | lr |\n|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < in->n; i++) {
        const an_run *r = &in->runs[i];
        fprintf(f, "| ");
        md(f, r->label);
        fprintf(f, " | ");
        str_fputs_md_code(r->path, f);
        fprintf(f, " | ");
        md(f, r->precision);
        fprintf(f, " | ");
        md(f, r->model);
        fprintf(f, " | ");
        md(f, r->data);
        fprintf(f, " | %" PRId64 " | %g |\n", r->seed, r->lr);
    }
}

static void md_charts(FILE *f, const report_opts *o)
{
    fprintf(f, "\n### Charts\n\n");
    for (size_t i = 0; i < o->ncharts; i++) {
        const report_chart *ch = &o->charts[i];
        const char *dir = o->md_plots_dir ? o->md_plots_dir : o->plots_dir;
        if (ch->drawn) {
            fprintf(f, "![");
            md(f, ch->desc);
            fputs("](", f);
            str_fputs(dir, SINK_TEXT, f);
            fprintf(f, "/%s)\n\n", ch->file);
        } else {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, ch->file);
            fputs("- ", f);
            str_fputs_md_code(path, f);
            fputs(" (not drawn): ", f);
            md(f, ch->desc);
            fputc('\n', f);
        }
    }
    if (o->charts_note) {
        fputc('\n', f);
        md(f, o->charts_note);
        fputc('\n', f);
    }
}

static void md_fail_on(FILE *f, const report_in *in)
{
    char buf[1200];
    int first = 1;
    for (size_t i = 0; i < in->R->items.n; i++) {
        const rec_item *it = &in->R->items.v[i];
        if (it->sec != SEC_FAIL || !it->f)
            continue;
        if (first)
            fprintf(f, "\n### --fail-on\n\n");
        first = 0;
        msg_item(buf, sizeof buf, &in->m, it);
        fprintf(f, "- %s: ", rec_fail_name(it->f->id));
        md(f, buf);
        fputc('\n', f);
    }
}

/* The recipe --recipe names: the plan's decision, then each run's section; else the line that
 * says which recipes the traces counted. */
static void md_recipes(FILE *f, const report_in *in, const report_opts *o)
{
    int rc = o && o->recipe ? an_recipe_parse(o->recipe) : -1;
    char line[1700];
    if (rc < 0) {
        report_recipes_line(line, sizeof line, in->runs, in->n, o ? o->whatif : NULL, 0);
        if (line[0]) {
            fprintf(f, "\n");
            md(f, line);
            fprintf(f, "\n");
        }
        return;
    }
    fprintf(f, "\n### Recipe %s\n\n", an_recipe_name(rc));
    for (size_t i = 0; i < in->R->decisions.n; i++) {
        const rec_decision *d = &in->R->decisions.v[i];
        if (d->what != WHAT_RECIPE_BF16)
            continue;
        char what[600], why[1000];
        msg_decision(what, sizeof what, &in->m, d);
        msg_decision_why(why, sizeof why, &in->m, d);
        snprintf(line, sizeof line, "%s: %s", what, why);
        fputs("**", f);
        md(f, line);
        fputs("**\n", f);
    }
    for (size_t i = 0; i < in->n; i++)
        report_md_recipe(f, &in->runs[i], rc);
}

static void md_apply_line(const char *what, const char *how, void *arg)
{
    FILE *f = arg;
    fputs("- ", f);
    md(f, what);
    fputs(": ", f);
    str_fputs_md_code(how, f);
    fputs("\n", f);
}

/* How to apply the decisions, in the vocabulary of the baseline's writer. */
static void md_apply(FILE *f, const report_in *in)
{
    msg_vocab v = report_vocab(in);
    FILE *mem;
    char *buf = NULL;
    size_t len = 0;
    if (!(mem = open_memstream(&buf, &len)))
        return;
    size_t n = report_apply_lines(in, md_apply_line, mem);
    if (fclose(mem) == 0 && n) {
        fprintf(f, "\n### Apply (%s)\n\n", msg_vocab_name(v));
        if (v == MSG_VOCAB_PYTORCH)
            fprintf(f, "The baseline was traced by ampdiag.torch: the changes in PyTorch's terms.\n\n");
        fputs(buf, f);
    }
    free(buf);
}

int report_markdown(FILE *f, const an_run *runs, size_t n, const an_comparison *c,
                    const recommendation *R, const report_opts *o)
{
    report_in in;
    report_in_init(&in, runs, n, c, R);
    const char *list = o ? o->whatif : NULL;
    md_headline(f, &in);
    md_ranks(f, &in);
    md_apply(f, &in);
    md_table(f, &in);
    if (rec_find_item(R, SEC_SPEED, R_NONE, F_NONE)) {
        fprintf(f, "\n### Speed\n\n");
        items(f, &in, SEC_SPEED, NULL);
    }
    md_ranges(f, &runs[c->baseline], list);
    md_evidence(f, &in);
    if (R->items.n && rec_find_item(R, SEC_WARN, R_NONE, F_NONE)) {
        fprintf(f, "\n### Warnings\n\n");
        items(f, &in, SEC_WARN, NULL);
    }
    char hidden[600], line[800];
    report_whatif_hidden_names(hidden, sizeof hidden, runs, n, list);
    msg_whatif_hidden(line, sizeof line, hidden);
    if (line[0]) {
        fprintf(f, "\n");
        md(f, line);
        fprintf(f, "\n");
    }
    md_recipes(f, &in, o);
    md_runs(f, &in);
    if (o && o->plots_dir)
        md_charts(f, o);
    if (R->fail_mask)
        md_fail_on(f, &in);
    return ferror(f) ? -1 : 0;
}
