/*
 * tune_script.h - `ampdiag tune -o DIR [options] -- CMD ARGS...`: tune's rounds run the user's own
 * training command instead of `ampdiag run`, once per configuration, telling it what to change
 * through environment variables (AMPDIAG_TUNE_*, docs/pytorch.md "tune on your own script") that
 * ampdiag.torch's tune_config() applies. Everything else (the stages, the measurements, the
 * comparisons and the verification) is cmd_tune.c's, unchanged: a round here writes the traces
 * DIR/NAME/run-PRECISION.h5 where tune reads them after a sweep.
 */
#ifndef AMPDIAG_CLI_TUNE_SCRIPT_H
#define AMPDIAG_CLI_TUNE_SCRIPT_H

#include "util/json.h"

#include <stdio.h>

typedef struct tune_script tune_script;

/* The index of the first "--" in argv[1..argc-1], or argc when there is none. */
int tune_script_split(int argc, char **argv);

/* The command after "--" (cmd[0..ncmd-1]), checked before any work: something to run, found
 * (a path that is an executable file, or a name on PATH). *out := the state (free it with
 * tune_script_free). 0, or EXIT_USAGE after a message naming what is wrong. */
int tune_script_open(tune_script **out, char **cmd, int ncmd, const char *prog);
void tune_script_free(tune_script *s);

/* An option of `ampdiag run` given to tune with a command: only those a script can be told
 * (docs/pytorch.md). 0, or EXIT_USAGE after a message naming it. */
int tune_script_check_option(const char *prog, const char *name);
/* --precisions with a command: fp32, fp16 and bf16 (autocast). 0 or EXIT_USAGE after a message. */
int tune_script_check_precisions(const char *prog, const char *list);

/* A round of tune's: argv is the `ampdiag sweep` command line tune would run (argv[1] =
 * "sweep", then --precisions P, [--lrs X], -o DIR, [-j N], [--launcher L], then option/value
 * pairs), run instead as the command once per precision, the options as environment variables,
 * through launch.c (locally, or as a Slurm job array); report (a file) lists the runs and how
 * each ended. A run fails when it ends with a status other than 0 or without a complete trace
 * (none, or one cut off or interrupted): tune_script_last_run says why. The first round's FP32
 * run (the baseline) runs alone first: when it fails, nothing else is run and the message names
 * the command, how it ended and the end of its log. Returns 0 (failed candidates included),
 * EXIT_USAGE when the baseline failed (the user's command is what is wrong), EXIT_IO on tune's own
 * I/O failures, EXIT_SIGNAL + the signal when stopped. */
int tune_script_round(tune_script *s, char **argv, const char *report, const char *prog);

/* The runs of the last round: their number; run i's trace, *precision, *lr (the lr it was told:
 * NaN for the script's own) and *failure (NULL when it ended with exit 0 and a complete trace;
 * else how it ended, what trace it left and its log, in words). */
size_t tune_script_last(const tune_script *s);
const char *tune_script_last_run(const tune_script *s, size_t i, const char **precision, double *lr,
                                 const char **failure);

/* tune.json: the command, and for the verified run (its trace chosen; NULL: none) what it sets
 * in PyTorch's words ("pytorch") and the command line that runs it again ("reproduce") at the
 * top level; for the run whose trace is trace: its command line as run, the variables set, its
 * log, exit status, the signal that ended it, the trace it left ("complete", "incomplete",
 * "none") and, for a failed run, why (nothing when it is not a script's run). */
void tune_script_json(jw *w, const tune_script *s, const char *chosen);
void tune_script_json_run(jw *w, const tune_script *s, const char *trace);

/* The text report's lines on the verified run (chosen: its trace; NULL: nothing): in PyTorch
 * terms, and the command line that runs it again. */
void tune_script_report(FILE *f, const tune_script *s, const char *chosen);

/* The lines of `ampdiag tune --help` about "-- CMD". */
void tune_script_usage(FILE *f);

#endif /* AMPDIAG_CLI_TUNE_SCRIPT_H */
