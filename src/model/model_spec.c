/*
 * model_spec.c - model specs: the built-in presets and the text format for users' own shapes.
 *
 * The format (docs/model-spec.md has the full description): one statement per line, words
 * separated by blanks, '#' starts a comment. Two forms, chosen by the first statement.
 *
 *   MLP form                              Transformer form (GPT-2 style)
 *     input 32                              transformer
 *     linear fc1 128                        vocab 64
 *     relu                                  ctx 32
 *     linear fc2 128 nobias                 d_model 64
 *     gelu                                  layers 2
 *     layernorm ln1                         heads 4
 *     linear out 10                         d_ff 256        # optional, default 4 * d_model
 *     loss softmax_ce
 *
 * MLP statements: `input FEATURES` (first), `linear [NAME] OUT_FEATURES [nobias]`,
 * `relu [NAME]`, `gelu [NAME]`, `layernorm [NAME]`, and `loss softmax_ce` (last); the width of
 * the last layer is the number of classes. Unnamed layers are called fc1, fc2, ... / relu1, ...
 * / gelu1, ... / ln1, ... by kind. Transformer keys are all optional (defaults: the preset).
 * Every error names the file and line and says what was expected.
 */
#include "model/model.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SPEC_MAX_BYTES (1u << 20)
#define SPEC_MAX_DIM 65536
#define SPEC_MAX_VOCAB (1 << 20)
#define SPEC_MAX_CTX 8192
#define SPEC_MAX_BLOCKS 256
#define SPEC_MAX_LAYERS 4096
#define SPEC_MAX_WORDS 8

/* Preset defaults. */
#define MLP_INPUT 32
#define MLP_HIDDEN 256
#define MLP_CLASSES 10


void model_spec_free(model_spec *s)
{
    free(s->layers);
    memset(s, 0, sizeof *s);
}

static int spec_push(model_spec *s, layer_op op, const char *name, int out, int bias, int line)
{
    if (s->nlayers == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        spec_layer *p = realloc(s->layers, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        s->layers = p;
        s->cap = cap;
    }
    spec_layer *l = &s->layers[s->nlayers++];
    memset(l, 0, sizeof *l);
    l->op = op;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->out = out;
    l->bias = bias;
    l->line = line;
    return 0;
}

/* ------------------------------------------------------------------------------- presets */

static void transformer_defaults(model_spec *s)
{
    s->transformer = 1;
    s->vocab = 64;
    s->ctx = 32;
    s->d_model = 64;
    s->n_layer = 2;
    s->n_head = 4;
    s->d_ff = 0; /* 4 * d_model */
}

static int preset_mlp(model_spec *s)
{
    s->input_dim = MLP_INPUT;
    static const char *const fc[] = {"fc1", "fc2", "fc3"};
    static const char *const relu[] = {"relu1", "relu2", "relu3"};
    for (int i = 0; i < 3; i++)
        if (spec_push(s, OP_LINEAR, fc[i], MLP_HIDDEN, 1, 0)
            || spec_push(s, OP_RELU, relu[i], 0, 0, 0))
            return -1;
    return spec_push(s, OP_LINEAR, "fc4", MLP_CLASSES, 1, 0);
}

/* ------------------------------------------------------------------------------- parsing */

typedef struct parser {
    model_spec *s;
    const char *fname;
    int line;
    char *err;
    size_t errlen;
    int counts[OP_COUNT]; /* for default names */
    int seen_loss;
    int seen_key[6];      /* transformer keys */
    int key_line[6];
} parser;

__attribute__((format(printf, 2, 3)))
static int perr(parser *p, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    errf(p->err, p->errlen, "%s:%d: %s", p->fname, p->line, msg);
    return -1;
}

/* A whole-word positive integer in [1, max]; -1 otherwise. */
static long parse_pos(const char *w, long max)
{
    if (!w || !*w || *w == '-' || *w == '+')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(w, &end, 10);
    if (errno || *end || v < 1 || v > max)
        return -1;
    return v;
}

static int is_integer_word(const char *w)
{
    if (!*w)
        return 0;
    for (; *w; w++)
        if (*w < '0' || *w > '9')
            return 0;
    return 1;
}

static int valid_name(const char *w)
{
    size_t n = strlen(w);
    if (n == 0 || n >= LAYER_NAME_MAX || is_integer_word(w))
        return 0;
    for (; *w; w++) {
        char ch = *w;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')
                 || ch == '_' || ch == '.' || ch == '-';
        if (!ok)
            return 0;
    }
    return 1;
}

/* The name for a new layer: given, or the default "<prefix><k>"; checked for uniqueness. */
static int layer_name(parser *p, layer_op op, const char *given, const char *prefix, char *out)
{
    p->counts[op]++;
    if (given) {
        if (!valid_name(given))
            return perr(p, "expected a layer name (letters, digits, '_', '.', '-'; at most %d "
                           "characters, not a number), got '%s'", LAYER_NAME_MAX - 1, given);
        snprintf(out, LAYER_NAME_MAX, "%s", given);
    } else {
        snprintf(out, LAYER_NAME_MAX, "%s%d", prefix, p->counts[op]);
    }
    if (strcmp(out, "loss") == 0)
        return perr(p, "the name 'loss' is reserved for the loss layer");
    for (int i = 0; i < p->s->nlayers; i++)
        if (strcmp(p->s->layers[i].name, out) == 0) {
            if (p->s->layers[i].line)
                return perr(p, "layer name '%s' is already used on line %d", out,
                            p->s->layers[i].line);
            return perr(p, "layer name '%s' is already used", out);
        }
    return 0;
}

static int mlp_statement(parser *p, char **w, int nw)
{
    model_spec *s = p->s;
    char name[LAYER_NAME_MAX];
    if (p->seen_loss)
        return perr(p, "expected nothing after 'loss softmax_ce', got '%s'", w[0]);
    if (s->nlayers >= SPEC_MAX_LAYERS)
        return perr(p, "too many layers (at most %d)", SPEC_MAX_LAYERS);
    if (strcmp(w[0], "linear") == 0) {
        int bias = 1;
        if (nw >= 2 && strcmp(w[nw - 1], "nobias") == 0) {
            bias = 0;
            nw--;
        }
        if (nw < 2 || nw > 3)
            return perr(p, "expected 'linear [NAME] OUT_FEATURES [nobias]'");
        long out = parse_pos(w[nw - 1], SPEC_MAX_DIM);
        if (out < 0)
            return perr(p, "expected OUT_FEATURES, an integer from 1 to %d, got '%s'",
                        SPEC_MAX_DIM, w[nw - 1]);
        if (layer_name(p, OP_LINEAR, nw == 3 ? w[1] : NULL, "fc", name))
            return -1;
        if (spec_push(s, OP_LINEAR, name, (int)out, bias, p->line))
            return perr(p, "out of memory");
        return 0;
    }
    static const struct { const char *word; layer_op op; const char *prefix; } unary[] = {
        {"relu", OP_RELU, "relu"}, {"gelu", OP_GELU, "gelu"}, {"layernorm", OP_LAYERNORM, "ln"}};
    for (size_t i = 0; i < sizeof unary / sizeof unary[0]; i++)
        if (strcmp(w[0], unary[i].word) == 0) {
            if (nw > 2)
                return perr(p, "expected '%s [NAME]', got %d words", unary[i].word, nw);
            if (layer_name(p, unary[i].op, nw == 2 ? w[1] : NULL, unary[i].prefix, name))
                return -1;
            return spec_push(s, unary[i].op, name, 0, 0, p->line) ? perr(p, "out of memory") : 0;
        }
    if (strcmp(w[0], "loss") == 0) {
        if (nw != 2 || strcmp(w[1], "softmax_ce") != 0)
            return perr(p, "expected 'loss softmax_ce' (the only loss)");
        p->seen_loss = 1;
        return 0;
    }
    if (strcmp(w[0], "input") == 0)
        return perr(p, "'input' must be the first statement and appear once");
    return perr(p, "expected 'linear', 'relu', 'gelu', 'layernorm' or 'loss', got '%s'", w[0]);
}

static int transformer_statement(parser *p, char **w, int nw)
{
    static const char *const keys[6] = {"vocab", "ctx", "d_model", "layers", "heads", "d_ff"};
    static const long max[6] = {SPEC_MAX_VOCAB, SPEC_MAX_CTX, SPEC_MAX_DIM, SPEC_MAX_BLOCKS,
                                SPEC_MAX_DIM, SPEC_MAX_DIM};
    model_spec *s = p->s;
    int *field[6] = {&s->vocab, &s->ctx, &s->d_model, &s->n_layer, &s->n_head, &s->d_ff};
    for (int k = 0; k < 6; k++) {
        if (strcmp(w[0], keys[k]) != 0)
            continue;
        if (p->seen_key[k])
            return perr(p, "'%s' is already given on line %d", keys[k], p->key_line[k]);
        if (nw != 2)
            return perr(p, "expected '%s N'", keys[k]);
        long v = parse_pos(w[1], max[k]);
        if (v < 0)
            return perr(p, "expected '%s N' with N an integer from 1 to %ld, got '%s'", keys[k],
                        max[k], w[1]);
        *field[k] = (int)v;
        p->seen_key[k] = 1;
        p->key_line[k] = p->line;
        return 0;
    }
    return perr(p, "expected one of 'vocab', 'ctx', 'd_model', 'layers', 'heads', 'd_ff' "
                   "(transformer form), got '%s'", w[0]);
}

/* Split one line (modified in place) into words; comments dropped. */
static int split_words(char *line, char **w)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(line, " \t\r\f\v", &save); tok;
         tok = strtok_r(NULL, " \t\r\f\v", &save)) {
        if (n == SPEC_MAX_WORDS)
            return -1;
        w[n++] = tok;
    }
    return n;
}

static int first_statement(parser *p, char **w, int nw)
{
    model_spec *s = p->s;
    if (strcmp(w[0], "transformer") == 0) {
        if (nw != 1)
            return perr(p, "expected 'transformer' alone on its line");
        transformer_defaults(s);
        return 0;
    }
    if (strcmp(w[0], "input") == 0) {
        long d = nw == 2 ? parse_pos(w[1], SPEC_MAX_DIM) : -1;
        if (d < 0)
            return perr(p, "expected 'input FEATURES' with FEATURES an integer from 1 to %d",
                        SPEC_MAX_DIM);
        s->input_dim = (int)d;
        return 0;
    }
    return perr(p, "expected 'input FEATURES' (MLP form) or 'transformer' as the first "
                   "statement, got '%s'", w[0]);
}

static int finish(parser *p)
{
    model_spec *s = p->s;
    if (s->transformer) {
        if (s->d_model % s->n_head == 0)
            return 0;
        errf(p->err, p->errlen, "%s: d_model %d is not a multiple of heads %d", p->fname,
                s->d_model, s->n_head);
        return -1;
    }
    if (!p->seen_loss) {
        errf(p->err, p->errlen, "%s: expected 'loss softmax_ce' as the last statement",
                p->fname);
        return -1;
    }
    for (int i = 0; i < s->nlayers; i++)
        if (s->layers[i].op == OP_LINEAR)
            return 0;
    errf(p->err, p->errlen, "%s: expected at least one 'linear' layer (the last one gives "
            "the classes)", p->fname);
    return -1;
}

int model_spec_parse(model_spec *s, const char *text, const char *fname, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    parser p = {.s = s, .fname = fname ? fname : "(spec)", .err = err, .errlen = errlen};
    size_t len = strlen(text);
    char *buf = malloc(len + 1);
    if (!buf) {
        errf(err, errlen, "%s: out of memory", p.fname);
        return -1;
    }
    memcpy(buf, text, len + 1);
    int rc = 0, started = 0;
    char *save = buf;
    while (rc == 0 && save) {
        char *line = save;
        char *nl = strchr(line, '\n');
        save = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        p.line++;
        char *w[SPEC_MAX_WORDS];
        int nw = split_words(line, w);
        if (nw < 0) {
            rc = perr(&p, "too many words (at most %d)", SPEC_MAX_WORDS);
        } else if (nw == 0) {
            continue;
        } else if (!started) {
            rc = first_statement(&p, w, nw);
            started = 1;
        } else if (s->transformer) {
            rc = transformer_statement(&p, w, nw);
        } else {
            rc = mlp_statement(&p, w, nw);
        }
    }
    free(buf);
    if (rc == 0 && !started) {
        errf(err, errlen, "%s: empty spec: expected 'input FEATURES' or 'transformer'",
                p.fname);
        rc = -1;
    }
    if (rc == 0)
        rc = finish(&p);
    if (rc)
        model_spec_free(s);
    return rc;
}

/* Read a whole (small) text file; NULL with a message. */
static char *read_text(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        errf(err, errlen, "%s: cannot open the model spec: %s (expected 'mlp', "
                "'transformer' or a spec file)", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(SPEC_MAX_BYTES + 1);
    if (!buf) {
        fclose(f);
        errf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    size_t n = fread(buf, 1, SPEC_MAX_BYTES + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > SPEC_MAX_BYTES) {
        free(buf);
        errf(err, errlen, bad ? "%s: read error" : "%s: larger than 1 MiB, not a model spec",
                path);
        return NULL;
    }
    if (memchr(buf, '\0', n)) {
        free(buf);
        errf(err, errlen, "%s: contains NUL bytes: expected a text model spec", path);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

int model_spec_load(model_spec *s, const char *spec, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    if (!spec || strcmp(spec, "mlp") == 0) {
        s->preset = 1;
        if (preset_mlp(s)) {
            model_spec_free(s);
            errf(err, errlen, "out of memory");
            return -1;
        }
        return 0;
    }
    if (strcmp(spec, "transformer") == 0) {
        transformer_defaults(s);
        s->preset = 1;
        return 0;
    }
    char *text = read_text(spec, err, errlen);
    if (!text)
        return -1;
    int rc = model_spec_parse(s, text, spec, err, errlen);
    free(text);
    return rc;
}
