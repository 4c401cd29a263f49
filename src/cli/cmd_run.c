/*
 * cmd_run.c - `ampdiag run`: train a model in the instrumented loop and write a trace.
 */
#include "ampdiag.h"
#include "ampdiag_trace.h"
#include "analysis/findings.h"
#include "analysis/load.h"
#include "backend/backend.h"
#include "cli/cli.h"
#include "report/info.h"
#include "train/data.h"
#include "train/train.h"
#include "util/path.h"
#include "util/escape.h"
#include "util/wrap.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Named scenarios: the failure modes users meet, as option presets. Options given on the
 * command line after them override them. */
static const struct scenario {
    const char *name, *args, *what;
} scenarios[] = {
    {"healthy", "--precision fp16 --steps 300",
     "fp16 + dynamic loss scaling on normalised data: nothing goes wrong"},
    {"fp16-forward-overflow", "--precision fp16 --data synthetic:blobs-raw --steps 200",
     "unnormalised inputs (x 1e5) overflow FP16 in the first GEMM: inf/NaN in fc1, every step skipped"},
    {"fp16-grad-underflow", "--precision fp16 --data synthetic:blobs-tiny --loss-scale none --steps 300",
     "tiny inputs (x 1e-6), no loss scaling: weight gradients flush to zero in FP16"},
    {"fp16-scale-collapse", "--precision fp16 --data synthetic:blobs-raw --scale-min 1 --steps 200",
     "DeepSpeed-style minimum scale 1: overflow on every step drives the scale to its minimum and keeps it there"},
    {"bf16-pure-lost-updates", "--precision bf16-pure --optimizer sgd --momentum 0 --lr 0.01 --steps 300",
     "weights stored in BF16 without FP32 master copy: small updates round away (fl(w + dw) == w)"},
    {"lr-diverge", "--optimizer sgd --lr 20 --steps 100",
     "a learning rate so large that training diverges in every precision"},
    {"fp16-adam-eps", "--precision fp16 --optim-state fp16 --steps 200",
     "AdamW state held in FP16: eps 1e-8 rounds to 0, zero gradients give 0/0 = NaN weights"},
    {"lr-too-low", "--optimizer sgd --momentum 0 --lr 1e-6 --steps 300",
     "a learning rate ~10^4.7 below a working one (SGD without momentum): updates are ~2e-8 of "
     "the weights, most round away even in FP32, and the loss stays at its first value in every "
     "precision"},
    {"fp16-eval-overflow", "--precision fp16 --data synthetic:blobs-valraw --steps 300",
     "one validation example in raw units (x 1e5, its preprocessing skipped): training stays "
     "finite in FP16, but the evaluation's forward pass overflows and the eval loss is NaN"},
    {"fp16-tail-underflow", "--precision fp16 --lr 3e-3 --steps 1500",
     "long training: confidently classified examples' gradients are tiny and a fifth of fc4's "
     "activation gradients would flush in FP16, but they carry none of the gradient's norm: "
     "FP16 trains fine"},
};
#define NSCENARIOS (sizeof scenarios / sizeof scenarios[0])

/* The scenarios, each name with what it shows and its options, wrapped to the width. */
static void list_scenarios(FILE *f)
{
    int width = wrap_width(f);
    for (size_t i = 0; i < NSCENARIOS; i++) {
        char label[40], args[600];
        snprintf(label, sizeof label, "  %s", scenarios[i].name);
        snprintf(args, sizeof args, "(%s)", scenarios[i].args);
        wrap_para(f, label, 27, scenarios[i].what, width);
        wrap_para(f, "", 27, args, width);
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ampdiag run [options]\n"
            "\n"
            "Train a model in an instrumented loop and record, per layer and step, what FP16 and\n"
            "BF16 do to its activations, gradients, weights and updates, into an HDF5 trace.\n"
            "Progress goes to stderr; the summary to stdout.\n"
            "\n"
            "  --precision P        fp32 | fp16 | bf16 | bf16-pure (default fp32)\n"
            "  -o, --out FILE       trace to write (default run-PRECISION.h5); --overwrite replaces it\n"
            "  --model M            mlp (default) | transformer | a model file (docs/model-spec.md)\n"
            "  --data D             synthetic:NAME or FILE.h5 (default: synthetic:blobs for an mlp,\n"
            "                       synthetic:tokens for a transformer)\n"
            "  -s, --steps N        optimizer steps (default 500)\n"
            "  --batch N            examples per step (default 64)\n"
            "  --lr X               peak learning rate (default 1e-3)\n"
            "  --schedule S         constant | cosine[:WARMUP[:MIN_LR]] | range:MIN_LR (MIN_LR growing\n"
            "                       to --lr over the steps: ampdiag lrfind) (default constant)\n"
            "  --optimizer O        adamw (default) | sgd\n"
            "  --momentum X         sgd momentum (0.9)    --weight-decay X (0)\n"
            "  --beta1 X --beta2 X --eps X   adamw (0.9, 0.999, 1e-8)\n"
            "  --optim-state F      fp32 (default) | fp16 | bf16: format of the optimizer state\n"
            "  --clip X             clip the global gradient norm to X (default 0: off)\n"
            "  --loss-scale S       dynamic | static:S | none (default: dynamic for fp16, none otherwise)\n"
            "  --scale-init X --scale-growth X --scale-backoff X --scale-growth-interval N\n"
            "  --scale-min X --scale-hysteresis N   dynamic scaler (2^16, 2, 0.5, 2000, none, 1)\n"
            "  --fp32-layers L,...  keep these layers (names or patterns) in FP32 in a 16-bit run\n"
            "  --ftz                flush subnormals to zero wherever a value is rounded to FP16/BF16\n"
            "  --device D           the backend: cpu (default); cuda[:N] where built (GPU N; its\n"
            "                       GEMMs use TF32 only with AMPDIAG_TF32=1 in the environment)\n"
            "  --seed N             initialisation, data and batch order (default 1)\n"
            "  --shuffle on|off     shuffle batches by seed (default on) or take them in file order\n"
            "  --standardize on|off standardise the inputs before training: each feature minus its\n"
            "                       training mean, over its training standard deviation (default\n"
            "                       off; recorded in the trace)\n"
            "  --trace-budget PCT   full tensor records at a cadence the tracer chooses from its own\n"
            "                       measured cost, to take at most PCT%% of the CPU time of untraced\n"
            "                       steps (default 5; 0 = only on events and the first and last step);\n"
            "                       every step records loss, scale, skips, gradient norm and\n"
            "                       non-finite counts, and an event (non-finite value, skipped step,\n"
            "                       loss or gradient-norm spike) records its step in full\n"
            "  --trace-every N      full tensor records every N steps instead (and on events; 0 =\n"
            "                       step records only); the last of the two options given counts\n"
            "  --trace-after-event N   steps after an event recorded in full too (default 3)\n"
            "  --hist-every N       exponent histograms with the first full record at or after\n"
            "                       every N steps (default 50; 0 = none)\n"
            "  --fp8-amax-history N --fp8-margin M   FP8 what-if under Transformer Engine's delayed\n"
            "                       scaling: amax history of N traced steps (default 1024, TE's;\n"
            "                       0 = not counted) and margin M (default 0)\n"
            "  --whatif LIST        block-scaled what-if (/quant rows): comma-separated schemes\n"
            "                       fp8-current, mxfp8, mxfp8-e5m2, mxfp6, mxfp6-e3m2, mxfp4, nvfp4,\n"
            "                       fp8-block, each SCHEME[:RULE][@row+col+2d]; none; all (default\n"
            "                       mxfp8@row,nvfp4@row; docs/numerics.md, \"Choosing what to count\")\n"
            "  --whatif-every N     count them on traced steps every N steps (default: with the\n"
            "                       histograms, --hist-every; 0 = never)\n"
            "  --trace-threads N    1: take tensor statistics and write the trace on other threads\n"
            "                       while training goes on; 0: on the training thread (default 1\n"
            "                       with 2+ cores)\n"
            "  --eval-every N       evaluate on the validation rows every N steps (default 100)\n"
            "  --patience N         stop as diverged after N updated steps with non-finite or exploded\n"
            "                       (> 100x the first) loss (20; skipped steps do not count), or after\n"
            "                       N skipped steps in a row with the loss scale at its floor (static,\n"
            "                       or dynamic at or below max(--scale-min, 1))\n"
            "  --flush-every N      flush the trace every N steps (100) ...\n"
            "  --flush-seconds T    ... or every T seconds (2)\n"
            "  --init-from W.h5     start from these weights (/<layer>/<param>, PyTorch shapes)\n"
            "  --save-weights W.h5  write the final weights\n"
            "  --progress MODE      auto (default: a bar on a terminal, lines otherwise) | bar | lines | none\n"
            "  --scenario NAME      start from a named failure-mode preset (below); later options override it\n"
            "  --dry-run            check the options, the model, data and weights files and the outputs,\n"
            "                       say what would run, and stop: no step, nothing written\n"
            "  -h, --help\n"
            "\n"
            "Synthetic data sets:\n%s"
            "\n"
            "Exit status: 0 the run finished (a run that diverged is data and exits 0), 2 bad\n"
            "option or input file, 3 I/O failure, 130 (143) stopped by SIGINT (SIGTERM): the step\n"
            "in progress is finished and the trace kept, marked interrupted.\n",
            data_synthetic_help());
    fprintf(f, "\nScenarios (--scenario NAME):\n");
    list_scenarios(f);
}

enum {
    O_PRECISION = 1, O_OUT, O_HELP, O_MODEL, O_DATA, O_STEPS, O_BATCH, O_LR, O_SCHEDULE, O_OPTIMIZER, O_MOMENTUM,
    O_WD, O_BETA1, O_BETA2, O_EPS, O_OSTATE, O_CLIP, O_LOSS_SCALE, O_SINIT, O_SGROWTH, O_SBACKOFF,
    O_SINTERVAL, O_SMIN, O_SHYST, O_FP32, O_FTZ, O_DEVICE, O_SEED, O_SHUFFLE, O_TRACE_EVERY, O_TRACE_THREADS,
    O_HIST_EVERY, O_EVAL_EVERY, O_PATIENCE, O_FLUSH_EVERY, O_FLUSH_SECONDS, O_INIT, O_SAVE,
    O_PROGRESS, O_OVERWRITE, O_SCENARIO, O_FP8_HISTORY, O_FP8_MARGIN, O_DRY_RUN, O_WHATIF, O_WHATIF_EVERY,
    O_TRACE_BUDGET, O_TRACE_AFTER, O_STANDARDIZE
};

/* Every option of `ampdiag run` (the sweep passes them on: see cmd_sweep.c). */
const cli_opt run_options[] = {
    {"--precision", 0, CLI_ARG, O_PRECISION}, {"--out", 'o', CLI_ARG, O_OUT},
    {"--model", 0, CLI_ARG, O_MODEL}, {"--data", 0, CLI_ARG, O_DATA},
    {"--steps", 's', CLI_ARG, O_STEPS}, {"--batch", 0, CLI_ARG, O_BATCH},
    {"--lr", 0, CLI_ARG, O_LR}, {"--schedule", 0, CLI_ARG, O_SCHEDULE},
    {"--optimizer", 0, CLI_ARG, O_OPTIMIZER}, {"--momentum", 0, CLI_ARG, O_MOMENTUM},
    {"--weight-decay", 0, CLI_ARG, O_WD}, {"--beta1", 0, CLI_ARG, O_BETA1},
    {"--beta2", 0, CLI_ARG, O_BETA2}, {"--eps", 0, CLI_ARG, O_EPS},
    {"--optim-state", 0, CLI_ARG, O_OSTATE}, {"--clip", 0, CLI_ARG, O_CLIP},
    {"--loss-scale", 0, CLI_ARG, O_LOSS_SCALE}, {"--scale-init", 0, CLI_ARG, O_SINIT},
    {"--scale-growth", 0, CLI_ARG, O_SGROWTH}, {"--scale-backoff", 0, CLI_ARG, O_SBACKOFF},
    {"--scale-growth-interval", 0, CLI_ARG, O_SINTERVAL}, {"--scale-min", 0, CLI_ARG, O_SMIN},
    {"--scale-hysteresis", 0, CLI_ARG, O_SHYST}, {"--fp32-layers", 0, CLI_ARG, O_FP32},
    {"--ftz", 0, CLI_NOARG, O_FTZ}, {"--device", 0, CLI_ARG, O_DEVICE},
    {"--seed", 0, CLI_ARG, O_SEED}, {"--shuffle", 0, CLI_ARG, O_SHUFFLE},
    {"--standardize", 0, CLI_ARG, O_STANDARDIZE},
    {"--trace-every", 0, CLI_ARG, O_TRACE_EVERY}, {"--trace-threads", 0, CLI_ARG, O_TRACE_THREADS},
    {"--trace-budget", 0, CLI_ARG, O_TRACE_BUDGET}, {"--trace-after-event", 0, CLI_ARG, O_TRACE_AFTER},
    {"--hist-every", 0, CLI_ARG, O_HIST_EVERY},
    {"--fp8-amax-history", 0, CLI_ARG, O_FP8_HISTORY}, {"--fp8-margin", 0, CLI_ARG, O_FP8_MARGIN},
    {"--whatif", 0, CLI_ARG, O_WHATIF}, {"--whatif-every", 0, CLI_ARG, O_WHATIF_EVERY},
    {"--eval-every", 0, CLI_ARG, O_EVAL_EVERY}, {"--patience", 0, CLI_ARG, O_PATIENCE},
    {"--flush-every", 0, CLI_ARG, O_FLUSH_EVERY}, {"--flush-seconds", 0, CLI_ARG, O_FLUSH_SECONDS},
    {"--init-from", 0, CLI_ARG, O_INIT}, {"--save-weights", 0, CLI_ARG, O_SAVE},
    {"--progress", 0, CLI_ARG, O_PROGRESS}, {"--overwrite", 0, CLI_NOARG, O_OVERWRITE},
    {"--scenario", 0, CLI_ARG, O_SCENARIO}, {"--dry-run", 0, CLI_NOARG, O_DRY_RUN},
    {"--help", 'h', CLI_NOARG, O_HELP}, CLI_OPT_END};

static const char *optname(int code) { return cli_opt_name(run_options, code); }

/* Number parsers that name the option and the expected range. */
static int num(int code, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= lo && v <= hi)) {
        fprintf_text(stderr, "ampdiag run: %s '%s': expected a number in [%g, %g]\n", optname(code), s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int integer(int code, const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < lo || v > hi) {
        fprintf_text(stderr, "ampdiag run: %s '%s': expected an integer in [%ld, %ld]\n", optname(code), s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_fmt(int code, const char *s, ampdiag_format *f)
{
    if (ampdiag_format_parse(s, f) != 0) {
        fprintf_text(stderr, "ampdiag run: %s '%s': expected fp32, fp16 or bf16\n", optname(code), s);
        return -1;
    }
    return 0;
}

static char *join_args(int argc, char **argv)
{
    size_t n = 16;
    for (int i = 0; i < argc; i++)
        n += strlen(argv[i]) + 1;
    char *s = malloc(n);
    if (!s)
        return NULL;
    strcpy(s, "ampdiag");
    for (int i = 0; i < argc; i++) {
        strcat(s, " ");
        strcat(s, argv[i]);
    }
    return s;
}

/* The closing summary: the trace just written, read back through the one loader and findings
 * that info and compare use, so that every figure agrees with them; plus what only this process
 * knows (time, trace size, the tracer's waits). Returns 0 or EXIT_IO. */
static int print_summary(const train_config *c, const train_result *r)
{
    an_run run;
    an_options ao = {.warmup = -1, .quiet = 1, .keep_points = 0, .no_rms_series = 1};
    char err[512] = "";
    int rc = an_load(c->out, &ao, &run, err, sizeof err);
    if (rc) {
        fprintf_text(stderr, "ampdiag run: the trace was written but cannot be read back: %s\n", err);
        an_free(&run);
        return EXIT_IO;
    }
    report_run_extra x = {r->wall_s, r->trace_bytes, r->trace_threads, r->trace_wait_s, c->trace_every != 0,
                          c->trace_every < 0 ? c->trace_budget : NAN, r->full_steps, r->event_steps, r->cadence};
    report_run_summary(stdout, &run, &x, 0);
    an_free(&run);
    return 0;
}

/* argv with a scenario's options inserted after argv[0]: a new array of pointers into the
 * scenario text copy (*buf) and argv. NULL and a message when the scenario is unknown. */
static char **expand_scenario(int argc, char **argv, int *nargc, char **buf, const char **name)
{
    const char *want = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc)
            want = argv[i + 1];
        else if (strncmp(argv[i], "--scenario=", 11) == 0)
            want = argv[i] + 11;
    }
    *buf = NULL;
    *name = NULL;
    const struct scenario *sc = NULL;
    if (want) {
        for (size_t i = 0; i < NSCENARIOS; i++)
            if (strcmp(scenarios[i].name, want) == 0)
                sc = &scenarios[i];
        if (!sc) {
            fprintf_text(stderr, "ampdiag run: --scenario '%s': unknown; the scenarios are:\n", want);
            list_scenarios(stderr);
            return NULL;
        }
        *name = sc->name;
    }
    size_t extra = 0;
    if (sc) {
        *buf = strdup(sc->args);
        if (!*buf)
            return NULL;
        for (char *p = *buf; *p; p++)
            extra += *p == ' ';
        extra++;
    }
    char **nv = malloc((size_t)(argc + (int)extra + 1) * sizeof *nv);
    if (!nv) {
        free(*buf);
        *buf = NULL;
        return NULL;
    }
    int k = 0;
    nv[k++] = argv[0];
    if (sc)
        for (char *tok = strtok(*buf, " "); tok; tok = strtok(NULL, " "))
            nv[k++] = tok;
    for (int i = 1; i < argc; i++)
        nv[k++] = argv[i];
    nv[k] = NULL;
    *nargc = k;
    return nv;
}

static int run_main(int argc, char **argv, const char *scenario, char *cmdline);

int cmd_run(int argc, char **argv)
{
    int nargc;
    char *buf;
    const char *scenario;
    char **nv = expand_scenario(argc, argv, &nargc, &buf, &scenario);
    if (!nv)
        return EXIT_USAGE;
    char *cmdline = join_args(argc, argv);
    int rc = run_main(nargc, nv, scenario, cmdline);
    free(cmdline);
    free(nv);
    free(buf);
    return rc;
}

/* What the command line says, before it becomes a train_config: the optimizer and scaler
 * options given (the set_* and s_* flags) apply on top of the defaults of the kind chosen. */
typedef struct run_args {
    train_config c;
    const char *out;             /* -o, or NULL: run-PRECISION.h5 */
    char defout[64];
    int scale_given, progress_mode; /* progress_mode -1: auto */
    optim_kind okind;
    optim_config ov;
    int set_mom, set_wd, set_b1, set_b2, set_eps, set_state;
    scaler_config sv;
    int s_init, s_growth, s_back, s_int, s_min, s_hyst;
} run_args;

enum { NOT_MINE = -1 }; /* an option another group of *_option parses */

/* The defaults: train_config_default's, AdamW, dynamic scaling, automatic progress. */
static void run_args_init(run_args *a)
{
    memset(a, 0, sizeof *a);
    train_config_default(&a->c);
    a->progress_mode = -1;
    a->okind = OPT_ADAMW;
    optim_config_default(&a->ov, OPT_ADAMW);
    scaler_config_default(&a->sv, SCALER_DYNAMIC);
}

/* What is trained, on what, how: precision, model, data, steps, batch, layers, seed, order.
 * 0, EXIT_USAGE after a message, or NOT_MINE. */
static int model_option(run_args *a, int ch, const char *arg)
{
    train_config *c = &a->c;
    long v;
    switch (ch) {
    case O_PRECISION:
        if (precision_parse(arg, &c->mo.precision) != 0) {
            fprintf_text(stderr, "ampdiag run: --precision '%s': expected fp32, fp16, bf16 or bf16-pure\n", arg);
            return EXIT_USAGE;
        }
        return 0;
    case O_MODEL: c->mo.spec = arg; return 0;
    case O_DATA: c->data = arg; return 0;
    case O_STEPS: if (integer(ch, arg, 1, 100000000, &v)) return EXIT_USAGE; c->steps = v; return 0;
    case O_BATCH: if (integer(ch, arg, 1, 1 << 20, &v)) return EXIT_USAGE; c->batch = (int)v; return 0;
    case O_FP32: c->mo.fp32_layers = arg; return 0;
    case O_FTZ: c->mo.round_flags |= AMPDIAG_ROUND_FTZ; return 0;
    case O_DEVICE: {
        char berr[256];
        if (!backend_by_name(arg, berr, sizeof berr)) {
            fprintf_text(stderr, "ampdiag run: --device %s: %s\n", arg, berr);
            return EXIT_USAGE;
        }
        c->device = arg;
        return 0;
    }
    case O_SEED: if (integer(ch, arg, 0, 0x7fffffffffffffffL, &v)) return EXIT_USAGE; c->seed = (uint64_t)v; return 0;
    case O_SHUFFLE:
        if (strcmp(arg, "on") == 0) c->shuffle = 1;
        else if (strcmp(arg, "off") == 0) c->shuffle = 0;
        else { fprintf_text(stderr, "ampdiag run: --shuffle '%s': expected on or off\n", arg); return EXIT_USAGE; }
        return 0;
    case O_STANDARDIZE:
        if (strcmp(arg, "on") == 0) c->standardize = 1;
        else if (strcmp(arg, "off") == 0) c->standardize = 0;
        else { fprintf_text(stderr, "ampdiag run: --standardize '%s': expected on or off\n", arg); return EXIT_USAGE; }
        return 0;
    default: return NOT_MINE;
    }
}

/* The learning rate, its schedule, the optimizer and its options, clipping. 0, EXIT_USAGE
 * after a message, or NOT_MINE. */
static int optim_option(run_args *a, int ch, const char *arg)
{
    train_config *c = &a->c;
    optim_config *ov = &a->ov;
    switch (ch) {
    case O_LR: if (num(ch, arg, 0, 1e6, &c->lr)) return EXIT_USAGE; return 0;
    case O_SCHEDULE: c->schedule = arg; return 0;
    case O_OPTIMIZER:
        if (optim_kind_parse(arg, &a->okind) != 0) {
            fprintf_text(stderr, "ampdiag run: --optimizer '%s': expected adamw or sgd\n", arg);
            return EXIT_USAGE;
        }
        return 0;
    case O_MOMENTUM: if (num(ch, arg, 0, 1, &ov->momentum)) return EXIT_USAGE; a->set_mom = 1; return 0;
    case O_WD: if (num(ch, arg, 0, 1e3, &ov->weight_decay)) return EXIT_USAGE; a->set_wd = 1; return 0;
    case O_BETA1: if (num(ch, arg, 0, 0.999999, &ov->beta1)) return EXIT_USAGE; a->set_b1 = 1; return 0;
    case O_BETA2: if (num(ch, arg, 0, 0.99999999, &ov->beta2)) return EXIT_USAGE; a->set_b2 = 1; return 0;
    case O_EPS: if (num(ch, arg, 0, 1, &ov->eps)) return EXIT_USAGE; a->set_eps = 1; return 0;
    case O_OSTATE: if (parse_fmt(ch, arg, &ov->state_fmt)) return EXIT_USAGE; a->set_state = 1; return 0;
    case O_CLIP: if (num(ch, arg, 0, 1e30, &c->clip)) return EXIT_USAGE; return 0;
    default: return NOT_MINE;
    }
}

/* --loss-scale dynamic | static:S | none. 0 or EXIT_USAGE after a message. */
static int loss_scale_option(run_args *a, int ch, const char *arg)
{
    a->scale_given = 1;
    a->c.loss_scale = arg;
    if (strcmp(arg, "dynamic") == 0) {
        a->sv.kind = SCALER_DYNAMIC;
    } else if (strcmp(arg, "none") == 0) {
        a->sv.kind = SCALER_NONE;
    } else if (strncmp(arg, "static:", 7) == 0) {
        a->sv.kind = SCALER_STATIC;
        if (num(ch, arg + 7, 1e-30, 1e30, &a->sv.init)) return EXIT_USAGE;
        a->s_init = 1;
    } else {
        fprintf_text(stderr, "ampdiag run: --loss-scale '%s': expected dynamic, static:S or none\n", arg);
        return EXIT_USAGE;
    }
    return 0;
}

/* The loss scaler's options. 0, EXIT_USAGE after a message, or NOT_MINE. */
static int scaler_option(run_args *a, int ch, const char *arg)
{
    scaler_config *sv = &a->sv;
    long v;
    switch (ch) {
    case O_LOSS_SCALE: return loss_scale_option(a, ch, arg);
    case O_SINIT: if (num(ch, arg, 1e-30, 1e30, &sv->init)) return EXIT_USAGE; a->s_init = 1; return 0;
    case O_SGROWTH: if (num(ch, arg, 1, 1e6, &sv->growth_factor)) return EXIT_USAGE; a->s_growth = 1; return 0;
    case O_SBACKOFF: if (num(ch, arg, 1e-6, 1, &sv->backoff_factor)) return EXIT_USAGE; a->s_back = 1; return 0;
    case O_SINTERVAL: if (integer(ch, arg, 1, 1000000000, &v)) return EXIT_USAGE; sv->growth_interval = (int)v; a->s_int = 1; return 0;
    case O_SMIN: if (num(ch, arg, 0, 1e30, &sv->min_scale)) return EXIT_USAGE; a->s_min = 1; return 0;
    case O_SHYST: if (integer(ch, arg, 1, 1000000, &v)) return EXIT_USAGE; sv->hysteresis = (int)v; a->s_hyst = 1; return 0;
    default: return NOT_MINE;
    }
}

/* --progress auto | bar | lines | none. 0 or EXIT_USAGE after a message. */
static int progress_option(run_args *a, const char *arg)
{
    if (strcmp(arg, "auto") == 0) a->progress_mode = -1;
    else if (strcmp(arg, "bar") == 0) a->progress_mode = 2;
    else if (strcmp(arg, "lines") == 0) a->progress_mode = 1;
    else if (strcmp(arg, "none") == 0) a->progress_mode = 0;
    else { fprintf_text(stderr, "ampdiag run: --progress '%s': expected auto, bar, lines or none\n", arg); return EXIT_USAGE; }
    return 0;
}

/* What is recorded and written where: the trace, tracing, evaluation, patience, flushes,
 * weights files, progress. 0, EXIT_USAGE after a message, or NOT_MINE. */
static int output_option(run_args *a, int ch, const char *arg)
{
    train_config *c = &a->c;
    long v;
    double d;
    switch (ch) {
    case O_OUT: a->out = arg; return 0;
    case O_TRACE_EVERY: if (integer(ch, arg, 0, 1000000000, &v)) return EXIT_USAGE; c->trace_every = (int)v; return 0;
    case O_TRACE_BUDGET: if (num(ch, arg, 0, 10000, &d)) return EXIT_USAGE; c->trace_budget = d; c->trace_every = -1; return 0;
    case O_TRACE_AFTER: if (integer(ch, arg, 0, 1000000000, &v)) return EXIT_USAGE; c->trace_after = (int)v; return 0;
    case O_TRACE_THREADS: if (integer(ch, arg, 0, 1, &v)) return EXIT_USAGE; c->trace_threads = (int)v; return 0;
    case O_HIST_EVERY: if (integer(ch, arg, 0, 1000000000, &v)) return EXIT_USAGE; c->hist_every = (int)v; return 0;
    case O_FP8_HISTORY: if (integer(ch, arg, 0, 1000000, &v)) return EXIT_USAGE; c->fp8_history = (int)v; return 0;
    case O_FP8_MARGIN: if (integer(ch, arg, -64, 64, &v)) return EXIT_USAGE; c->fp8_margin = (int)v; return 0;
    case O_WHATIF: {
        ampdiag_qspec sp[64];
        size_t ns;
        char why[200];
        if (ampdiag_qspec_parse(arg, sp, 64, &ns, why, sizeof why) != 0) {
            fprintf_text(stderr, "ampdiag run: --whatif %s\n", why);
            return EXIT_USAGE;
        }
        c->whatif = arg;
        return 0;
    }
    case O_WHATIF_EVERY: if (integer(ch, arg, 0, 1000000000, &v)) return EXIT_USAGE; c->whatif_every = (int)v; return 0;
    case O_EVAL_EVERY: if (integer(ch, arg, 0, 1000000000, &v)) return EXIT_USAGE; c->eval_every = (int)v; return 0;
    case O_PATIENCE: if (integer(ch, arg, 1, 1000000000, &v)) return EXIT_USAGE; c->patience = (int)v; return 0;
    case O_FLUSH_EVERY: if (integer(ch, arg, 1, 1000000, &v)) return EXIT_USAGE; c->flush_every = (unsigned)v; return 0;
    case O_FLUSH_SECONDS: if (num(ch, arg, 0.01, 3600, &d)) return EXIT_USAGE; c->flush_seconds = d; return 0;
    case O_INIT: c->init_from = arg; return 0;
    case O_SAVE: c->save_weights = arg; return 0;
    case O_OVERWRITE: c->overwrite = 1; return 0;
    case O_DRY_RUN: c->dry_run = 1; return 0;
    case O_PROGRESS: return progress_option(a, arg);
    default: return NOT_MINE;
    }
}

/* Parse the options into *a; --help prints the usage and sets *help. 0 or EXIT_USAGE (the
 * message printed). */
static int parse_args(run_args *a, int argc, char **argv, int *help)
{
    cli_parser p;
    int ch;
    *help = 0;
    if (cli_parser_init(&p, "run", run_options, argc, argv, 0))
        return EXIT_USAGE;
    while ((ch = cli_next(&p)) != CLI_DONE) {
        const char *arg = p.arg;
        if (ch == O_HELP) {
            usage(stdout);
            *help = 1;
            return 0;
        }
        if (ch == O_SCENARIO)
            continue; /* applied before parsing */
        if (ch == CLI_POS) {
            fprintf_text(stderr, "ampdiag run: unexpected argument '%s' (see ampdiag run --help)\n", arg);
            return EXIT_USAGE;
        }
        int rc = model_option(a, ch, arg);
        if (rc == NOT_MINE) rc = optim_option(a, ch, arg);
        if (rc == NOT_MINE) rc = scaler_option(a, ch, arg);
        if (rc == NOT_MINE) rc = output_option(a, ch, arg);
        if (rc)
            return EXIT_USAGE; /* a bad value, or CLI_ERR (which no group knows) */
    }
    return 0;
}

/* The train_config from the options: the optimizer's and the scaler's defaults for the kinds
 * chosen (loss scaling dynamic for fp16, none otherwise, unless given), then what was given;
 * the trace's default name. */
static void resolve_config(run_args *a)
{
    train_config *c = &a->c;
    optim_config_default(&c->opt, a->okind);
    if (a->set_mom) c->opt.momentum = a->ov.momentum;
    if (a->set_wd) c->opt.weight_decay = a->ov.weight_decay;
    if (a->set_b1) c->opt.beta1 = a->ov.beta1;
    if (a->set_b2) c->opt.beta2 = a->ov.beta2;
    if (a->set_eps) c->opt.eps = a->ov.eps;
    if (a->set_state) c->opt.state_fmt = a->ov.state_fmt;
    scaler_kind kind = a->scale_given ? a->sv.kind : (c->mo.precision == PREC_FP16 ? SCALER_DYNAMIC : SCALER_NONE);
    scaler_config_default(&c->scaler, kind);
    if (!a->scale_given) c->loss_scale = kind == SCALER_DYNAMIC ? "dynamic" : "none";
    if (a->s_init) c->scaler.init = a->sv.init;
    if (a->s_growth) c->scaler.growth_factor = a->sv.growth_factor;
    if (a->s_back) c->scaler.backoff_factor = a->sv.backoff_factor;
    if (a->s_int) c->scaler.growth_interval = a->sv.growth_interval;
    if (a->s_min) c->scaler.min_scale = a->sv.min_scale;
    if (a->s_hyst) c->scaler.hysteresis = a->sv.hysteresis;
    if (!a->out) {
        snprintf(a->defout, sizeof a->defout, "run-%s.h5", precision_name(c->mo.precision));
        a->out = a->defout;
    }
    c->out = a->out;
}

/* Whether a and b name the same file: by device and inode when both exist, else by path. */
static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    return strcmp(a, b) == 0;
}

/* An output that is also an input would be destroyed by the run: -o or --save-weights equal to
 * --data, --init-from or --model (a file), or to each other. (--init-from X --save-weights X is
 * allowed: the weights are read before the run and replaced at its end.) 0 or EXIT_USAGE after
 * a message naming both options. */
static int refuse_clobber(const train_config *c)
{
    const char *data = c->data && strncmp(c->data, "synthetic:", 10) != 0 ? c->data : NULL;
    const char *mfile = c->mo.spec && access(c->mo.spec, F_OK) == 0 ? c->mo.spec : NULL;
    const struct { const char *opt, *path; } outs[] = {{"-o/--out", c->out},
                                                       {"--save-weights", c->save_weights}};
    const struct { const char *opt, *path; } ins[] = {
        {"--data", data}, {"--init-from", c->init_from}, {"--model", mfile}};
    for (size_t i = 0; i < 5; i++) {
        const char *opt = i < 2 ? outs[i].opt : ins[i - 2].opt;
        const char *path = i < 2 ? outs[i].path : ins[i - 2].path;
        char msg[400];
        if (path && path_too_long(path, msg, sizeof msg)) {
            fprintf_text(stderr, "ampdiag run: %s %s\n", opt, msg);
            return EXIT_USAGE;
        }
    }
    for (size_t i = 0; i < 2; i++) {
        if (!outs[i].path)
            continue;
        for (size_t j = 0; j < sizeof ins / sizeof ins[0]; j++) {
            if (!ins[j].path || (i == 1 && j == 1))
                continue;
            if (same_file(outs[i].path, ins[j].path)) {
                fprintf_text(stderr, "ampdiag run: %s '%s' and %s '%s' are the same file: the run would "
                             "destroy its own input\n", outs[i].opt, outs[i].path, ins[j].opt, ins[j].path);
                return EXIT_USAGE;
            }
        }
    }
    if (c->save_weights && same_file(c->out, c->save_weights)) {
        fprintf_text(stderr, "ampdiag run: -o/--out '%s' and --save-weights '%s' are the same file\n",
                     c->out, c->save_weights);
        return EXIT_USAGE;
    }
    return 0;
}

/* The files the run writes, checked before training (cli_check_output): refused when they
 * exist without --overwrite, and always when they are not regular files or cannot be written.
 * 0, or EXIT_USAGE or EXIT_IO after a message. */
static int refuse_existing(const train_config *c)
{
    int rc = refuse_clobber(c);
    if (!rc)
        rc = cli_check_output("ampdiag run", NULL, c->out, c->overwrite);
    if (!rc && c->save_weights)
        rc = cli_check_output("ampdiag run", "--save-weights", c->save_weights, c->overwrite);
    return rc;
}

/* With progress shown: one line on stderr saying what is trained. */
static void announce(const train_config *c)
{
    if (c->progress)
        fprintf_text(stderr, "ampdiag run: model %s, data %s, %s%s, %ld steps of %d\n", c->mo.spec ? c->mo.spec : "mlp",
                     c->data ? c->data : "(default synthetic)", precision_name(c->mo.precision),
                     c->scaler.kind == SCALER_DYNAMIC ? " + dynamic loss scale" : c->scaler.kind == SCALER_STATIC ? " + static loss scale" : "",
                     c->steps, c->batch);
}

/* Train as configured and print the summary. The exit status: 0, EXIT_USAGE or EXIT_IO (the
 * message printed), or EXIT_SIGNAL + the signal that stopped the run. */
static int train_and_report(const train_config *c)
{
    train_result r;
    char err[4096] = "";
    int rc = train_run(c, &r, err, sizeof err);
    if (rc != TRAIN_OK) {
        cli_say_lines("ampdiag run", err); /* a list of choices keeps its lines */
        return rc == TRAIN_EIO ? EXIT_IO : EXIT_USAGE;
    }
    if (c->dry_run) {
        fprintf_text(stdout, "dry run: model %s (%s), data %s, %s, %ld steps of %d -> %s%s%s "
                     "(checked; nothing run or written)\n", c->mo.spec ? c->mo.spec : "mlp",
                     r.model_desc, c->data ? c->data : "(the model's default)",
                     precision_name(c->mo.precision), c->steps, c->batch, c->out,
                     c->save_weights ? ", weights -> " : "", c->save_weights ? c->save_weights : "");
        return fflush(stdout) == 0 ? 0 : EXIT_IO;
    }
    int st = print_summary(c, &r);
    /* stopped by SIGINT/SIGTERM: the trace is closed and marked interrupted; exit as a shell
     * reports a process killed by that signal (130, 143) */
    if (st == 0 && r.status == AMPDIAG_STATUS_INTERRUPTED && r.stop_signal > 0)
        return EXIT_SIGNAL + r.stop_signal;
    return st;
}

/* `ampdiag run` after the scenario's options were put in front: parse, configure, refuse what
 * would be replaced, train, report. Returns the exit status. */
static int run_main(int argc, char **argv, const char *scenario, char *cmdline)
{
    run_args a;
    int help, rc;
    run_args_init(&a);
    if ((rc = parse_args(&a, argc, argv, &help)) || help)
        return rc;
    resolve_config(&a);
    if ((rc = refuse_existing(&a.c)))
        return rc;
    a.c.progress = a.progress_mode >= 0 ? a.progress_mode : (isatty(2) ? 2 : 1);
    a.c.command_line = cmdline;
    a.c.scenario = scenario;
    if (!a.c.dry_run)
        announce(&a.c);
    return train_and_report(&a.c);
}
