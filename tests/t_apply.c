/*
 * t_apply.c - advice in the run's terms (src/messages/apply.c, the renderers of src/report/): a
 * comparison whose baseline ampdiag.torch wrote (root attribute writer "ampdiag.torch ...") says
 * how to apply each decision in PyTorch's code, with the decisions' own numbers (a loss scale of
 * 2^22 as GradScaler(init_scale=2.0**22), the clip value as clip_grad_norm_'s max_norm), in text,
 * Markdown and JSON; a trace of ampdiag run still gets ampdiag run's options. And the figures
 * compare's table adds: the median step time (of the steps' wall_ms that were recorded), the final
 * eval accuracy, and the Speed item that names the faster of two viable precisions.
 */
#include "analysis/compare.h"
#include "analysis/figures.h"
#include "analysis/load.h"
#include "analysis/recommend.h"
#include "messages/messages.h"
#include "report/info.h"
#include "report/report.h"

#include "compare_synth.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "t_apply.XXXXXX";
static char paths[16][256];
static int npaths;

static const char *write_trace(const char *name, const cs_spec *s)
{
    if (npaths == (int)(sizeof paths / sizeof paths[0])) {
        printf("Bail out! too many traces\n");
        exit(1);
    }
    char *p = paths[npaths++];
    snprintf(p, 256, "%s/%s.h5", dir, name);
    if (cs_write(p, s) < 0) {
        printf("Bail out! cannot write %s: %s\n", p, ampdiag_trace_errmsg());
        exit(1);
    }
    return p;
}

static void load(const char *path, an_run *r)
{
    char err[512];
    if (an_load(path, NULL, r, err, sizeof err)) {
        printf("Bail out! an_load %s: %s\n", path, err);
        exit(1);
    }
}

/* A report of the runs (0 text, 1 Markdown, 2 JSON) as a string (free it). */
static char *render(int how, const an_run *runs, size_t n, const an_comparison *c, const recommendation *R)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        printf("Bail out! open_memstream\n");
        exit(1);
    }
    report_opts o = {0};
    o.width = 100;
    int rc = how == 0 ? report_text(f, runs, n, c, R, &o) : how == 1 ? report_markdown(f, runs, n, c, R, &o)
                                                                     : report_json(f, runs, n, c, R, &o);
    if (fclose(f) || rc) {
        printf("Bail out! report %d failed\n", how);
        exit(1);
    }
    return buf;
}

/* Text as it was before wrapping: every line break with the indentation after it becomes one
 * space (the wrapper breaks lines at spaces). In place. */
static char *unwrap(char *s)
{
    char *o = s;
    for (const char *p = s; *p;) {
        if (*p == '\n') {
            while (*p == '\n' || *p == ' ')
                p++;
            *o++ = ' ';
        } else {
            *o++ = *p++;
        }
    }
    *o = 0;
    return s;
}

/* The text report's section that starts with label: from its line to the blank line after it,
 * unwrapped ("" when there is none; static). */
static const char *section(const char *text, const char *label)
{
    static char out[8192];
    char key[64];
    out[0] = 0;
    snprintf(key, sizeof key, "\n%s", label);
    const char *p = strstr(text, key);
    if (!p)
        return out;
    const char *end = strstr(p + 1, "\n\n");
    size_t k = end ? (size_t)(end - p) : strlen(p);
    snprintf(out, sizeof out, "%.*s", (int)(k < sizeof out ? k : sizeof out - 1), p + 1);
    return unwrap(out);
}

static const char *apply_section(const char *text) { return section(text, "Apply "); }

/* The number after key in s (NaN when absent). */
static double num_after(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

static const rec_decision *decision(const recommendation *R, rec_what w)
{
    for (size_t i = 0; i < R->decisions.n; i++)
        if (R->decisions.v[i].what == w)
            return &R->decisions.v[i];
    return NULL;
}

static size_t count(const char *s, const char *what)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

/* The FP32 trace whose largest gradient (0.005) allows a loss scale of exactly 2^22 (0.005 x 2^22
 * = 20972 under 65504/2, x 2^23 above it), judged for sm75 (no BF16): fp16 with dynamic loss
 * scaling from 2^22, the clip value 2.60695 of the norm ramp (t_compare.c), lr kept. A clip is a
 * decision only where the gradient-norm history shows a spike it would catch (issue 26): one
 * norm of 100 at step 777 followed by a loss spike, which leave the ramp's P99 and MAD, so the
 * value, as they were. */
static void spec_scale22(cs_spec *s, const char *writer)
{
    cs_spec_init(s);
    for (int l = 0; l < s->nlayers; l++)
        s->grad_absmax[l] = 0.005;
    s->norm_spike_at = 777;
    s->spike_at = 778;
    s->writer = writer;
    s->device = "cpu";
}

static void test_pytorch_terms(void)
{
    cs_spec s;
    spec_scale22(&s, "ampdiag.torch (torch 2.5.1)");
    an_run r;
    load(write_trace("torch-fp32", &s), &r);
    ok(msg_run_vocab(&r) == MSG_VOCAB_PYTORCH, "a trace whose writer is ampdiag.torch: PyTorch's vocabulary");
    an_comparison c;
    recommendation R;
    if (an_compare(&r, 1, 0, &c) || recommend(&r, 1, &c, TGT_SM75, 0, &R)) {
        printf("Bail out! compare/recommend failed\n");
        exit(1);
    }
    const rec_decision *ls = decision(&R, WHAT_LOSS_SCALE), *cl = decision(&R, WHAT_CLIP);
    ok(R.precision == REC_FP16 && ls && ls->value == ldexp(1.0, 22) && cl && fabs(cl->value - 2.60695) < 1e-9,
       "sm75: fp16, a loss-scale decision of 2^22 (%g) and a clip decision of 2.60695 (%g)", ls ? ls->value : NAN,
       cl ? cl->value : NAN);

    char *text = render(0, &r, 1, &c, &R);
    const char *ap = apply_section(text);
    ok(strstr(ap, "in PyTorch") != NULL, "text: an Apply section in PyTorch's terms");
    ok(strstr(ap, "torch.amp.GradScaler(\"cpu\", init_scale=2.0**22)") != NULL,
       "text: the loss scale 2^22 as GradScaler(\"cpu\", init_scale=2.0**22)");
    ok(fabs(num_after(ap, "max_norm=") - cl->value) < 1e-5 * cl->value && strstr(ap, "scaler.unscale_(opt)"),
       "text: clip_grad_norm_'s max_norm is the clip decision's value (%g), after scaler.unscale_(opt)",
       num_after(ap, "max_norm="));
    ok(strstr(ap, "torch.autocast(device_type=\"cpu\", dtype=torch.float16)") != NULL,
       "text: the precision as torch.autocast on the baseline's device, dtype=torch.float16");
    ok(!strstr(ap, "--") && !strstr(ap, "ampdiag run") && !strstr(ap, "sweep"),
       "text: the Apply section names no ampdiag option");
    ok(count(ap, "GradScaler(") == 1, "text: the two loss-scale options (--loss-scale, --scale-init) are one line "
                                      "in PyTorch's terms");
    if (!strstr(ap, "init_scale=2.0**22") || strstr(ap, "--"))
        diag("%s", ap);
    free(text);

    char *md = render(1, &r, 1, &c, &R);
    ok(strstr(md, "### Apply (PyTorch)") && strstr(md, "clip_grad_norm_") && strstr(md, ": `scaler = torch.amp.GradScaler(\"cpu\", init_scale=2.0**22), given"),
       "Markdown: an Apply (PyTorch) section, the code as inline code");
    free(md);

    char *js = render(2, &r, 1, &c, &R);
    ok(strstr(js, "\"vocabulary\":\"pytorch\"") != NULL, "JSON: the vocabulary its text used is pytorch");
    ok(count(js, "\"apply\":{\"ampdiag\":") == R.decisions.n,
       "JSON: every decision has apply {ampdiag, pytorch} (%zu of %zu)", count(js, "\"apply\":{\"ampdiag\":"),
       R.decisions.n);
    ok(strstr(js, "\"pytorch\":\"scaler = torch.amp.GradScaler(\\\"cpu\\\", init_scale=2.0**22)") &&
           strstr(js, "\"ampdiag\":\"--loss-scale dynamic --scale-init 4194304\""),
       "JSON: the loss-scale decision's apply in both vocabularies, with 2^22");
    const char *cj = strstr(js, "\"pytorch\":\"torch.nn.utils.clip_grad_norm_(");
    ok(cj && fabs(num_after(cj, "max_norm=") - cl->value) < 1e-5 * cl->value,
       "JSON: the clip decision's pytorch apply carries max_norm=%g", cj ? num_after(cj, "max_norm=") : NAN);
    free(js);

    /* info: what the findings suggest, in PyTorch's terms */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    info_opts io = {10, NULL, -1, 100};
    int rc = f ? report_info_text(f, &r, &io) : -1;
    if (f)
        fclose(f);
    const char *ia = buf ? strstr(unwrap(buf), "apply in PyTorch") : NULL;
    ok(rc == 0 && ia && strstr(ia, "clip_grad_norm_(model.parameters(), max_norm=2.60695)") &&
           !strstr(ia, "GradScaler("),
       "info: an apply line in PyTorch's terms for the clip value (no GradScaler for an FP32 run)");
    if (!ia || !strstr(ia, "max_norm=2.60695)") || strstr(ia, "GradScaler("))
        diag("info (rc %d): %s", rc, ia ? ia : buf ? buf : "(nothing)");
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    rc = f ? report_info_json(f, &r) : -1;
    if (f)
        fclose(f);
    ok(rc == 0 && buf && strstr(buf, "\"apply\":{\"vocabulary\":\"pytorch\",\"lines\":[\"clip the gradient norm at "
                                     "2.61 (untested): torch.nn.utils.clip_grad_norm_(model.parameters(), "
                                     "max_norm=2.60695)"),
       "info JSON: apply {vocabulary pytorch, lines} with the clip value (a hypothesis: untested)");
    const char *aj = buf ? strstr(buf, "\"apply\":{") : NULL;
    if (!aj || !strstr(aj, "\"lines\":[\"clip the gradient norm at 2.61 (untested): "))
        diag("info JSON's apply: %.400s", aj ? aj : buf ? buf : "(nothing)");
    free(buf);

    /* an FP16 run: its loss scale too, as GradScaler's init_scale */
    s.precision = "fp16";
    s.scale = 1024;
    an_run h;
    load(write_trace("torch-fp16", &s), &h);
    const an_finding *lsf = an_run_finding(&h, F_LOSS_SCALE);
    int k = lsf ? (int)lsf->v[an_finding_fig(F_LOSS_SCALE, "log2")] : -1;
    char want[96];
    snprintf(want, sizeof want, "torch.amp.GradScaler(\"cpu\", init_scale=2.0**%d)", k);
    buf = NULL;
    f = open_memstream(&buf, &len);
    rc = f ? report_info_text(f, &h, &io) : -1;
    if (f)
        fclose(f);
    ia = buf ? strstr(unwrap(buf), "apply in PyTorch") : NULL;
    ok(rc == 0 && k == 22 && ia && strstr(ia, want), "info, an fp16 run: its loss scale 2^%d as %s", k, want);
    free(buf);
    an_free(&h);
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&r);
}

static void test_ampdiag_terms(void)
{
    cs_spec s;
    spec_scale22(&s, NULL);
    an_run r;
    load(write_trace("run-fp32", &s), &r);
    ok(msg_run_vocab(&r) == MSG_VOCAB_AMPDIAG, "a trace without the writer attribute: ampdiag's vocabulary");
    an_comparison c;
    recommendation R;
    if (an_compare(&r, 1, 0, &c) || recommend(&r, 1, &c, TGT_SM75, 0, &R)) {
        printf("Bail out! compare/recommend failed\n");
        exit(1);
    }
    char *text = render(0, &r, 1, &c, &R);
    const char *ap = apply_section(text);
    ok(strstr(ap, "in ampdiag run's options") && strstr(ap, "--loss-scale dynamic --scale-init 4194304") &&
           fabs(num_after(ap, "--clip ") - 2.60695) < 1e-5 && strstr(ap, "--precision fp16"),
       "text: the Apply section in ampdiag run's options (--scale-init 4194304, --clip 2.60695)");
    ok(!strstr(ap, "torch."), "text: ... and no PyTorch code");
    free(text);
    char *js = render(2, &r, 1, &c, &R);
    ok(strstr(js, "\"vocabulary\":\"ampdiag\"") && strstr(js, "init_scale=2.0**22"),
       "JSON: vocabulary ampdiag; the decisions still carry the PyTorch form");
    free(js);
    rec_free(&R);
    an_comparison_free(&c);
    an_free(&r);
}

/* Median step time: of the recorded wall_ms (finite, > 0), whatever their order. */
static void test_step_time(void)
{
    cs_spec s;
    cs_spec_init(&s);
    static const double w1[5] = {5, 1, 100, 2, 3};
    s.wall = w1;
    s.nwall = 5;
    an_run a, b;
    load(write_trace("time-a", &s), &a);
    static const double w2[5] = {0, 4, NAN, 8, 6}; /* 0 and NaN: not recorded */
    s.wall = w2;
    load(write_trace("time-b", &s), &b);
    ok(an_fig(&a, FIG_STEP_TIME).v == 3, "median of 200 x {5, 1, 100, 2, 3} ms: 3 (%g)", an_fig(&a, FIG_STEP_TIME).v);
    ok(an_fig(&b, FIG_STEP_TIME).v == 6, "steps without a time (0, NaN) left out: median of {4, 8, 6}: 6 (%g)",
       an_fig(&b, FIG_STEP_TIME).v);
    char v[32];
    msg_fig_value(v, sizeof v, &a, FIG_STEP_TIME);
    ok(strcmp(v, "3 ms") == 0, "printed as 3 ms (%s)", v);
    msg_duration(v, sizeof v, 8400);
    char v2[32];
    msg_duration(v2, sizeof v2, 210);
    ok(strcmp(v, "8.4 s") == 0 && strcmp(v2, "0.21 s") == 0, "durations: 8.4 s, 0.21 s (%s, %s)", v, v2);
    an_free(&a);
    an_free(&b);
}

/* Three runs, fp16 and bf16 both viable: the table's step time and eval accuracy; the Speed item
 * names the faster of the two with both times where they differ by more than the constant. */
static void speed_case(double t16, double tb, int want, double acc16)
{
    const double w[3][1] = {{250}, {t16}, {tb}};
    static const char *const prec[3] = {"fp32", "fp16", "bf16"};
    an_run runs[3];
    for (int i = 0; i < 3; i++) {
        cs_spec s;
        cs_spec_init(&s);
        s.precision = prec[i];
        s.scale = i == 1 ? 1024 : 1;
        s.wall = w[i];
        s.nwall = 1;
        s.eval_metric = "accuracy";
        s.eval_acc = i == 1 ? acc16 : 0.654;
        char name[32];
        snprintf(name, sizeof name, "speed-%s-%g", prec[i], t16);
        load(write_trace(name, &s), &runs[i]);
    }
    an_comparison c;
    recommendation R;
    if (an_compare(runs, 3, 0, &c) || recommend(runs, 3, &c, TGT_ANY, 0, &R)) {
        printf("Bail out! compare/recommend failed\n");
        exit(1);
    }
    char *text = render(0, runs, 3, &c, &R);
    const char *row = strstr(text, "\nmedian step time");
    const char *row_end = row ? strchr(row + 1, '\n') : NULL;
    const char *acc = strstr(text, "\nfinal eval accuracy");
    char speed_text[8192];
    snprintf(speed_text, sizeof speed_text, "%s", section(text, "Speed"));
    int speed = speed_text[0] != 0;
    const rec_item *it = NULL;
    for (size_t i = 0; i < R.items.n; i++)
        if (R.items.v[i].sec == SEC_SPEED && R.items.v[i].run == 2)
            it = &R.items.v[i];
    char a16[32];
    snprintf(a16, sizeof a16, "%.3g%%", 100 * acc16);
    if (want) {
        ok(R.fp16.viable && R.bf16.viable, "fp16 and bf16 both viable");
        ok(row && row_end && strstr(row, "0.25 s") && strstr(row, "8.4 s") && strstr(row, "0.21 s") < row_end,
           "table: the median step time of each run (0.25 s, 8.4 s, 0.21 s)");
        ok(acc && strstr(acc, "65.4%") && strstr(acc, a16), "table: the final eval accuracy of each run (65.4%%, %s)",
           a16);
        ok(speed && it && it->msg == R_SPEED_FASTER && it->v[0] == 1 && it->v[1] == 210 && it->v[2] == 8400 &&
               strstr(speed_text, "bf16 is the faster of two viable precisions: 0.21 s a step against fp16's 8.4 "
                                  "s on this machine (40x"),
           "Speed: bf16 named the faster, 0.21 s a step against fp16's 8.4 s (40x)");
        ok(!strstr(speed_text, "against fp32") && !strstr(speed_text, "against bf16"),
           "... fp32 (0.25 s) and bf16 within the factor of each other: no item between them");
        ok(R.precision == REC_BF16, "the verdict is what the numerics say (bf16), speed reported beside it");
        char *js = render(2, runs, 3, &c, &R);
        ok(strstr(js, "\"speed\":[\"") && strstr(js, "\"bf16 is the faster") && strstr(js, "\"median_step_time_ms\""),
           "JSON: the speed section and the median_step_time_ms figure");
        free(js);
    } else {
        ok(!speed && !rec_find_item(&R, SEC_SPEED, R_NONE, F_NONE),
           "step times 250, %g and %g ms (under the factor of each other): no Speed item", t16, tb);
    }
    free(text);
    rec_free(&R);
    an_comparison_free(&c);
    for (int i = 0; i < 3; i++)
        an_free(&runs[i]);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp: cannot create a scratch directory\n");
        return 1;
    }
    test_pytorch_terms();
    test_ampdiag_terms();
    test_step_time();
    speed_case(8400, 210, 1, 0.652);
    speed_case(300, 210, 0, 0.654);
    for (int i = 0; i < npaths; i++)
        remove(paths[i]);
    rmdir(dir);
    return done_testing();
}
