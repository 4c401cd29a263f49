/*
 * expand.c - the message table's templates expanded (messages.h): names looked up in the item,
 * its finding, the runs and the constants, numbers formatted in their style, conditional parts.
 */
#include "analysis/recipe.h"
#include "messages/messages_internal.h"
#include "util/util.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------
 * An output buffer that never overflows
 * ------------------------------------------------------------------------------------------ */

typedef struct out {
    char *b;
    size_t n, len;
} out;

static void put(out *o, const char *s, size_t k)
{
    if (o->len + 1 >= o->n)
        return;
    size_t room = o->n - 1 - o->len;
    if (k > room)
        k = room;
    memcpy(o->b + o->len, s, k);
    o->len += k;
    o->b[o->len] = 0;
}

static void puts_(out *o, const char *s) { put(o, s, strlen(s)); }

/* ------------------------------------------------------------------------------------------
 * Numbers
 * ------------------------------------------------------------------------------------------ */

void msg_scale(char *buf, size_t n, double v)
{
    int e;
    double m = frexp(v, &e);
    if (isfinite(v) && v > 0 && m == 0.5)
        snprintf(buf, n, "2^%d", e - 1);
    else
        fmt_num(buf, n, v, 6);
}

void msg_duration(char *buf, size_t n, double ms)
{
    if (!isfinite(ms))
        snprintf(buf, n, "-");
    else if (ms >= 100)
        snprintf(buf, n, "%.3g s", ms / 1000);
    else
        snprintf(buf, n, "%.3g ms", ms);
}

void msg_bytes(char *buf, size_t n, double b)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    if (!isfinite(b) || b < 0) {
        snprintf(buf, n, "-");
        return;
    }
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, n, u ? "%.3g %s" : "%.0f %s", b, units[u]);
}

const char *msg_peak_memory_source(const char *source)
{
    if (strcmp(source, "torch.cuda.max_memory_allocated") == 0)
        return "CUDA";
    if (strcmp(source, "ru_maxrss") == 0)
        return "RSS";
    return source;
}

const char *msg_peak_memory_what(const char *source)
{
    if (strcmp(source, "torch.cuda.max_memory_allocated") == 0)
        return "CUDA: torch.cuda.max_memory_allocated, the peak of the tensors PyTorch allocated on the GPU since the "
               "tracer started";
    if (strcmp(source, "ru_maxrss") == 0)
        return "RSS: the process's peak resident set size since it started (getrusage ru_maxrss: the interpreter, "
               "the libraries and the data included), which says little about the precision; shown, never weighed";
    return "as the trace's peak_memory_source names it";
}

void msg_pct(char *buf, size_t n, double f)
{
    if (!isfinite(f))
        snprintf(buf, n, "%s", isnan(f) ? "?" : f > 0 ? "+inf" : "-inf");
    else if (f == 0)
        snprintf(buf, n, "0%%");
    else if (fabs(f) < 1e-4)
        snprintf(buf, n, "%.2g%%", 100 * f);
    else
        snprintf(buf, n, "%.3g%%", 100 * f);
}

/* "1e-07" -> "1e-7", "2e+03" -> "2e+3": a constant's exponent without its leading zeros. */
static void trim_exponent(char *s)
{
    char *e = strchr(s, 'e');
    if (!e || (e[1] != '-' && e[1] != '+'))
        return;
    char *d = e + 2;
    while (d[0] == '0' && d[1] >= '0' && d[1] <= '9')
        memmove(d, d + 1, strlen(d));
}

void msg_const(char *buf, size_t n, an_kid k)
{
    const an_const *c = an_const_get(k);
    if (!c) {
        snprintf(buf, n, "?");
        return;
    }
    double v = c->value;
    switch (c->style) {
    case KS_INT: snprintf(buf, n, "%.0f", v); break;
    case KS_PCT: snprintf(buf, n, "%g%%", 100 * v); break;
    case KS_RATIO: snprintf(buf, n, "1 in %g", 1 / v); break;
    case KS_POW2: snprintf(buf, n, "2^%d", (int)lround(log2(v))); break;
    case KS_FACTOR: snprintf(buf, n, "x%g", v); break;
    case KS_EXP: snprintf(buf, n, "%.0e", v); break;
    case KS_F1: snprintf(buf, n, "%.1f", v); break;
    default: snprintf(buf, n, "%g", v); break;
    }
    trim_exponent(buf);
}

static const char *const kind_words[AMPDIAG_NKINDS] = {
    "activations", "activation gradients", "weights", "weight gradients", "updates"};
static const char *const kind_abbrevs[AMPDIAG_NKINDS] = {"act", "agrad", "weight", "wgrad", "update"};

const char *msg_kind_words(int kind) { return kind >= 0 && kind < AMPDIAG_NKINDS ? kind_words[kind] : "values"; }
const char *msg_kind_abbrev(int kind) { return kind >= 0 && kind < AMPDIAG_NKINDS ? kind_abbrevs[kind] : "?"; }

/* ------------------------------------------------------------------------------------------
 * Names
 * ------------------------------------------------------------------------------------------ */

enum { V_NONE = 0, V_NUM, V_STR };

typedef struct val {
    int type;
    double d;
    const char *s;
    const char *style; /* the default style of the name */
} val;

static val num(double d, const char *style) { return (val){V_NUM, d, NULL, style}; }
static val str(const char *s) { return (val){s ? V_STR : V_NONE, NAN, s, NULL}; }

msg_ctx msg_ctx_run(const an_run *r)
{
    msg_ctx m = {r, 1, -1, NULL, 1};
    return m;
}

static const an_run *run_of(const msg_src *x, long i)
{
    if (x->c && x->c->alone && i >= 0)
        return x->c->runs;
    return x->c && x->c->runs && i >= 0 && (size_t)i < x->c->nruns ? &x->c->runs[i] : NULL;
}

static int src_run(const msg_src *x) { return x->run >= 0 ? x->run : x->f ? x->f->s.run : -1; }

static const char *label(const msg_src *x, long i)
{
    const an_run *r = run_of(x, i);
    return r ? r->label : "?";
}

/* The names of a finding's figures and strings, then the item's own figures. */
static int lookup_figure(const msg_src *x, const char *name, val *v)
{
    for (int i = 0; x->vnames && i < REC_MAXV && x->vnames[i]; i++)
        if (strcmp(x->vnames[i], name) == 0) {
            *v = num(x->v ? x->v[i] : NAN, NULL);
            return 1;
        }
    for (int i = 0; x->snames && i < MSG_TUNE_MAXS && x->snames[i]; i++)
        if (strcmp(x->snames[i], name) == 0) {
            *v = str(x->s && x->s[i] ? x->s[i] : "");
            return 1;
        }
    if (!x->f)
        return 0;
    const an_finding_def *d = an_finding_def_get(x->f->id);
    for (int i = 0; i < AN_MAXFIG && d->fig[i].name; i++)
        if (strcmp(d->fig[i].name, name) == 0) {
            an_unit u = d->fig[i].unit;
            *v = num(x->f->v[i], u == U_SHARE ? "pct" : u == U_SCALE ? "scale"
                                 : u == U_STEP || u == U_COUNT || u == U_INDEX ? "int" : NULL);
            return 1;
        }
    for (int i = 0; i < AN_MAXSTR && d->str[i]; i++)
        if (strcmp(d->str[i], name) == 0) {
            *v = str(x->f->str[i] ? x->f->str[i] : "");
            return 1;
        }
    return 0;
}

/* "fc1,fc2": the layers of every finding of f's id about f's run. */
static void all_layers(const msg_src *x, char *buf, size_t n)
{
    buf[0] = 0;
    const an_run *r = x->f ? run_of(x, x->f->s.run) : NULL;
    if (!r)
        return;
    for (const an_finding *g = NULL; (g = an_finding_next(an_run_findings(r), x->f->id, -1, g));) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%s", len ? "," : "", an_layer_name(r, g->s.layer));
    }
}

/* "85, 157, 299" (", ..." when more): the steps a clip value would clip. */
static void over_list(const msg_src *x, char *buf, size_t n)
{
    buf[0] = 0;
    int first = an_finding_fig(F_CLIP_VALUE, "over1"), listed = 0;
    for (int i = 0; x->f && x->f->id == F_CLIP_VALUE && i < 6; i++) {
        double s = x->f->v[first + i];
        if (isnan(s))
            break;
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, "%s%.0f", i ? ", " : "", s);
        listed++;
    }
    double over = x->f ? x->f->v[an_finding_fig(F_CLIP_VALUE, "n_over")] : 0;
    if (over > listed) {
        size_t len = strlen(buf);
        snprintf(buf + len, n - len, ", ...");
    }
}


/* Why a recipe hurts a tensor (F_RECIPE_HURT's, F_RECIPE_LAYER's "reason"). */
static const char *recipe_reason_words(const an_finding *f)
{
    int i = f ? an_finding_fig(f->id, "reason") : -1;
    switch (i >= 0 ? (int)f->v[i] : -1) {
    case AN_RC_OK: return "within its reference";
    case AN_RC_SATURATE: return "saturate";
    case AN_RC_FLUSH: return "flush to zero";
    case AN_RC_SQNR: return "lose precision (SQNR)";
    default: return "?";
    }
}

/* The subject of the words: runs, layer, kind, format, the recommendation's layer lists. */
static int lookup_subject(const msg_src *x, const char *name, val *v, char *tmp, size_t tn)
{
    const an_finding *f = x->f;
    const recommendation *R = x->c ? x->c->R : NULL;
    if (strcmp(name, "run") == 0)
        *v = str(label(x, src_run(x)));
    else if (strcmp(name, "run2") == 0)
        *v = str(label(x, f ? f->s.run2 : -1));
    else if (strcmp(name, "baseline") == 0)
        *v = str(label(x, x->c ? x->c->baseline : -1));
    else if (strcmp(name, "prec") == 0)
        *v = str(run_of(x, src_run(x)) ? run_of(x, src_run(x))->precision : "?");
    else if (strcmp(name, "layer") == 0)
        *v = num(f ? f->s.layer : -1, "layer");
    else if (strcmp(name, "kind") == 0)
        *v = num(f ? f->s.kind : -1, "kind");
    else if (strcmp(name, "kind_id") == 0)
        *v = str(f ? ampdiag_kind_name(f->s.kind) : "?");
    else if (strcmp(name, "fmt") == 0) {
        const an_run *r = f ? run_of(x, f->s.run) : NULL;
        const char *s = r && f->s.col >= 0 && f->s.col < r->nwcol ? r->wcol[f->s.col].format : "?";
        size_t i = 0;
        for (; s[i] && i + 1 < tn; i++)
            tmp[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 'a' + 'A' : s[i]);
        tmp[i] = 0;
        *v = str(tmp);
    } else if (strcmp(name, "to") == 0 && x->to)
        *v = str(x->to);
    else if (strcmp(name, "device") == 0) {
        /* the device type the baseline (else the run) ran on, as torch.autocast names it */
        const an_run *r = x->c && x->c->alone ? x->c->runs
                          : run_of(x, x->c && x->c->baseline >= 0 ? x->c->baseline : src_run(x));
        *v = str(r && r->device[0] ? r->device : "cuda");
    } else if (strcmp(name, "islands") == 0)
        *v = str(R ? R->islands : "?");
    else if (strcmp(name, "fp32_layers") == 0)
        *v = str(R ? R->fp32_layers : "?");
    else if (strcmp(name, "all_layers") == 0)
        all_layers(x, tmp, tn), *v = str(tmp);
    else if (strcmp(name, "over_list") == 0)
        over_list(x, tmp, tn), *v = str(tmp);
    else if (strcmp(name, "hurt_why") == 0 && f)
        msg_hurt_why(tmp, tn, run_of(x, f->s.run), f), *v = str(tmp);
    else if (strcmp(name, "colname") == 0) {
        const an_run *r = f ? run_of(x, f->s.run) : NULL;
        *v = str(r && f->s.col >= 0 && f->s.col < r->nwcol ? r->wcol[f->s.col].name : "?");
    } else if (strcmp(name, "reason_words") == 0)
        *v = str(recipe_reason_words(f));
    else
        return 0;
    return 1;
}

static int lookup(msg_src *x, const char *name, val *v, char *tmp, size_t tn)
{
    if (strncmp(name, "K.", 2) == 0) {
        for (int k = 0; k < AN_NCONSTS; k++)
            if (strcmp(an_const_get((an_kid)k)->key, name + 2) == 0) {
                *v = num(an_const_get((an_kid)k)->value, NULL);
                v->s = (const char *)an_const_get((an_kid)k); /* the constant: its own style */
                v->style = "const";
                return 1;
            }
        return 0;
    }
    if (lookup_figure(x, name, v))
        return 1;
    return lookup_subject(x, name, v, tmp, tn);
}

/* ------------------------------------------------------------------------------------------
 * Styles
 * ------------------------------------------------------------------------------------------ */

/* A number in a style that names something: a layer, kind, run, format, target, event. */
static int named_style(const msg_src *x, const char *style, double d, char *buf, size_t n)
{
    long i = isfinite(d) ? (long)d : -1;
    const an_run *r = run_of(x, src_run(x));
    if (strcmp(style, "layer") == 0 || strcmp(style, "q") == 0)
        snprintf(buf, n, "%s", i < 0 && style[0] == 'q' ? "?" : r ? an_layer_name(r, (int)i) : "?");
    else if (strcmp(style, "kind") == 0)
        snprintf(buf, n, "%s", msg_kind_words((int)i));
    else if (strcmp(style, "kab") == 0)
        snprintf(buf, n, "%s", msg_kind_abbrev((int)i));
    else if (strcmp(style, "run") == 0)
        snprintf(buf, n, "%s", label(x, i));
    else if (strcmp(style, "fmt") == 0) {
        const ampdiag_format_info *fi = ampdiag_format_get((ampdiag_format)i);
        const char *s = fi ? fi->name : "?";
        size_t k = 0;
        for (; s[k] && k + 1 < n; k++)
            buf[k] = (char)(s[k] >= 'a' && s[k] <= 'z' ? s[k] - 'a' + 'A' : s[k]);
        buf[k] = 0;
    } else if (strcmp(style, "recipe") == 0)
        snprintf(buf, n, "%s", an_recipe_name((int)i));
    else if (strcmp(style, "target") == 0)
        snprintf(buf, n, "%s", rec_target_name((rec_target)i));
    else if (strcmp(style, "event") == 0)
        snprintf(buf, n, "%s", ampdiag_event_name((int)i) ? ampdiag_event_name((int)i) : "unknown");
    else
        return 0;
    return 1;
}

/* Styles beyond msgtab.c's list: dur (milliseconds as "8.4 s" / "12.3 ms", msg_duration), py2 (a
 * Python literal: "2.0**22" for a power of two); for a string, pylist (format_val). */
static void style_num(const msg_src *x, const char *style, double d, char *buf, size_t n)
{
    if (!style || !*style)
        style = fabs(d) < 1e15 && d == floor(d) ? "int" : "g";
    if (named_style(x, style, d, buf, n))
        return;
    if (!isfinite(d) && strcmp(style, "pct") && strcmp(style, "spct")) {
        fmt_num(buf, n, d, 3);
        return;
    }
    if (style[0] == 'g')
        fmt_num(buf, n, d, style[1] ? style[1] - '0' : 6);
    else if (style[0] == 'f' && style[1])
        snprintf(buf, n, "%.*f", style[1] - '0', d);
    else if (strcmp(style, "int") == 0)
        snprintf(buf, n, "%.0f", d);
    else if (strcmp(style, "pct") == 0)
        msg_pct(buf, n, d);
    else if (strcmp(style, "spct") == 0) {
        char p[32];
        if (isinf(d))
            snprintf(p, sizeof p, "inf%%");
        else
            msg_pct(p, sizeof p, fabs(d));
        snprintf(buf, n, "%s%s", d < 0 ? "-" : "+", p);
    } else if (strncmp(style, "pc", 2) == 0 && style[2] >= '0' && style[2] <= '9')
        snprintf(buf, n, style[2] == '0' ? "%.0f%%" : style[2] == '2' ? "%.2g%%" : "%.3g%%", 100 * d);
    else if (strcmp(style, "pint") == 0)
        snprintf(buf, n, "%.0f", 100 * d);
    else if (strcmp(style, "pctc") == 0)
        snprintf(buf, n, "%g%%", 100 * (1 - d));
    else if (strcmp(style, "scale") == 0)
        msg_scale(buf, n, d);
    else if (strcmp(style, "dur") == 0)
        msg_duration(buf, n, d);
    else if (strcmp(style, "py2") == 0) {
        /* a Python literal: 2.0**22 for a power of two, else the shortest exact repr */
        int e;
        if (isfinite(d) && d > 0 && frexp(d, &e) == 0.5)
            snprintf(buf, n, "2.0**%d", e - 1);
        else
            snprintf(buf, n, "%.17g", d);
    }
    else if (strcmp(style, "pow2") == 0)
        snprintf(buf, n, "2^%.0f", d);
    else if (strcmp(style, "l2") == 0)
        snprintf(buf, n, "%.1f", log2(d));
    else
        fmt_num(buf, n, d, 6);
}

/* "a,b" -> "\"a\", \"b\"": a comma list as the items of a Python list of strings. */
static void py_list(char *buf, size_t n, const char *s)
{
    out o = {buf, n, 0};
    buf[0] = 0;
    for (const char *p = s; *p;) {
        size_t k = strcspn(p, ",");
        if (o.len)
            puts_(&o, ", ");
        puts_(&o, "\"");
        for (size_t i = 0; i < k; i++) {
            if (p[i] == '"' || p[i] == '\\')
                put(&o, "\\", 1);
            put(&o, p + i, 1);
        }
        puts_(&o, "\"");
        p += k + (p[k] == ',');
    }
}

static void format_val(msg_src *x, const val *v, const char *style, char *buf, size_t n)
{
    if (v->type == V_STR) {
        if (style && strcmp(style, "pylist") == 0)
            py_list(buf, n, v->s);
        else
            snprintf(buf, n, "%s", v->s);
        return;
    }
    if (v->style && strcmp(v->style, "const") == 0) {
        const an_const *k = (const an_const *)v->s;
        if (style && *style)
            style_num(x, style, k->value, buf, n);
        else
            msg_const(buf, n, (an_kid)(k - an_const_get((an_kid)0)));
        return;
    }
    style_num(x, style && *style ? style : v->style, v->d, buf, n);
}

/* ------------------------------------------------------------------------------------------
 * Templates
 * ------------------------------------------------------------------------------------------ */

/* The end of the brace opened at t[0] ('{'): the matching '}', or NULL. */
static const char *closing(const char *t)
{
    int depth = 0;
    for (const char *p = t; *p; p++) {
        if (*p == '{')
            depth++;
        else if (*p == '}' && --depth == 0)
            return p;
    }
    return NULL;
}

static int truthy(const val *v, char op)
{
    if (op == '#')
        return v->type == V_STR || (v->type == V_NUM && !isnan(v->d));
    int t = (v->type == V_STR && v->s[0]) || (v->type == V_NUM && !isnan(v->d) && v->d != 0);
    return op == '!' ? !t : t;
}

static void expand_into(out *o, const char *t, size_t len, msg_src *x);

/* One "{...}" of len bytes (without the braces). */
static void placeholder(out *o, const char *in, size_t len, msg_src *x)
{
    char name[64], tmp[512], buf[600];
    int cond = in[0] == '?' || in[0] == '!' || in[0] == '#';
    const char *p = in + cond, *colon = memchr(p, ':', len - (size_t)cond);
    size_t nl = colon ? (size_t)(colon - p) : len - (size_t)cond;
    snprintf(name, sizeof name, "%.*s", (int)(nl < sizeof name ? nl : sizeof name - 1), p);
    val v = {V_NONE, NAN, NULL, NULL};
    int found = lookup(x, name, &v, tmp, sizeof tmp);
    if (!found && x->check && !x->doc) {
        x->bad++;
        if (x->report)
            fprintf(x->report, "unknown name '%s'\n", name);
    }
    if (x->doc && (!found || strncmp(name, "K.", 2))) { /* docs: names stay, parts in [ ] */
        if (cond) {
            put(o, "[", 1);
            expand_into(o, colon ? colon + 1 : p + nl, colon ? len - (size_t)(colon + 1 - in) : 0, x);
            put(o, "]", 1);
        } else {
            put(o, "{", 1);
            put(o, in, len);
            put(o, "}", 1);
        }
        return;
    }
    if (cond) {
        if (colon && (x->check || truthy(&v, in[0])))
            expand_into(o, colon + 1, len - (size_t)(colon + 1 - in), x);
        return;
    }
    if (!found) {
        puts_(o, "?");
        return;
    }
    char style[16] = "";
    if (colon)
        snprintf(style, sizeof style, "%.*s", (int)(len - (size_t)(colon + 1 - in)), colon + 1);
    format_val(x, &v, style, buf, sizeof buf);
    puts_(o, buf);
}

static void expand_into(out *o, const char *t, size_t len, msg_src *x)
{
    const char *end = t + len;
    while (t < end) {
        const char *b = memchr(t, '{', (size_t)(end - t));
        if (!b) {
            put(o, t, (size_t)(end - t));
            return;
        }
        put(o, t, (size_t)(b - t));
        const char *c = closing(b);
        if (!c || c >= end) {
            put(o, b, (size_t)(end - b));
            return;
        }
        placeholder(o, b + 1, (size_t)(c - b - 1), x);
        t = c + 1;
    }
}

void msg_expand(char *buf, size_t n, const char *t, msg_src *x)
{
    out o = {buf, n, 0};
    if (n)
        buf[0] = 0;
    if (t)
        expand_into(&o, t, strlen(t), x);
}

/* ------------------------------------------------------------------------------------------
 * The words of findings, items, decisions
 * ------------------------------------------------------------------------------------------ */

void msg_finding(char *buf, size_t n, const msg_ctx *c, const an_finding *f)
{
    msg_src x = {c, f, NULL, NULL, -1, 0, 0, 0, NULL, NULL, NULL, NULL};
    msg_expand(buf, n, msg_finding_rows[f->id].text, &x);
}

int msg_finding_covered(const an_finding_list *l, const an_finding *f)
{
    const an_fid *cov = msg_finding_rows[f->id].covered;
    for (int k = 0; k < 2 && cov[k] != F_NONE; k++)
        for (const an_finding *g = an_finding_next(l, cov[k], f->s.run, NULL); g;
             g = an_finding_next(l, cov[k], f->s.run, g))
            if (f->s.layer < 0 || g->s.layer == f->s.layer)
                return 1;
    return 0;
}

static const char *item_text(const rec_item *it, int brief)
{
    if (it->msg == R_NONE)
        return it->f ? (brief ? msg_finding_rows[it->f->id].brief : msg_finding_rows[it->f->id].text) : "";
    return brief ? msg_item_rows[it->msg].brief : msg_item_rows[it->msg].text;
}

void msg_item(char *buf, size_t n, const msg_ctx *c, const rec_item *it)
{
    msg_src x = {c, it->f, it->v, msg_item_rows[it->msg].fig, it->run, 0, 0, 0, NULL, NULL, NULL, NULL};
    msg_expand(buf, n, item_text(it, 0), &x);
}

void msg_item_short(char *buf, size_t n, const msg_ctx *c, const rec_item *it)
{
    msg_src x = {c, it->f, it->v, msg_item_rows[it->msg].fig, it->run, 0, 0, 0, NULL, NULL, NULL, NULL};
    const char *t = item_text(it, 1);
    msg_expand(buf, n, t ? t : "", &x);
}

const char *msg_item_key(const rec_item *it)
{
    if (it->msg == R_NONE)
        return it->f ? an_finding_def_get(it->f->id)->key : "none";
    return msg_item_rows[it->msg].key;
}

void msg_section(char *buf, size_t n, const msg_ctx *c, rec_sec sec, const char *sep)
{
    out o = {buf, n, 0};
    if (n)
        buf[0] = 0;
    if (!c->R)
        return;
    int first = 1;
    char one[1600];
    for (size_t i = 0; i < c->R->items.n; i++) {
        const rec_item *it = &c->R->items.v[i];
        if (it->sec != sec)
            continue;
        msg_item(one, sizeof one, c, it);
        if (!first)
            puts_(&o, sep);
        puts_(&o, one);
        first = 0;
    }
}

void msg_decision(char *buf, size_t n, const msg_ctx *c, const rec_decision *d)
{
    static const char *const names[REC_MAXV] = {"value"};
    const double v[REC_MAXV] = {d->value};
    msg_src x = {c, NULL, v, names, -1, 0, 0, 0, NULL, d->to, NULL, NULL};
    msg_expand(buf, n, msg_decision_rows[d->what].text, &x);
}

void msg_decision_why(char *buf, size_t n, const msg_ctx *c, const rec_decision *d)
{
    msg_src x = {c, d->nbecause ? d->because[0] : NULL, d->v, msg_item_rows[d->why].fig, -1, 0, 0, 0, NULL, NULL, NULL, NULL};
    msg_expand(buf, n, d->why == R_NONE ? "" : msg_item_rows[d->why].text, &x);
}

/* ------------------------------------------------------------------------------------------
 * ampdiag tune's words
 * ------------------------------------------------------------------------------------------ */

void msg_tune(char *buf, size_t n, msg_tune_id id, const double *v, size_t nv, const char *const *s,
              size_t ns)
{
    double vv[REC_MAXV];
    const char *ss[MSG_TUNE_MAXS] = {NULL};
    for (size_t i = 0; i < REC_MAXV; i++)
        vv[i] = v && i < nv ? v[i] : NAN;
    for (size_t i = 0; i < MSG_TUNE_MAXS; i++)
        ss[i] = s && i < ns ? s[i] : NULL;
    const msg_tune_row *r = &msg_tune_rows[(int)id >= 0 && id < MT_N ? id : 0];
    msg_src x = {NULL, NULL, vv, r->fig, -1, 0, 0, 0, NULL, NULL, ss, r->str};
    msg_expand(buf, n, r->text, &x);
}

const char *msg_tune_key(msg_tune_id id) { return (int)id >= 0 && id < MT_N ? msg_tune_rows[id].key : "?"; }
