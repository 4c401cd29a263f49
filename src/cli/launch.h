/*
 * launch.h - running a round of `ampdiag run`s (docs/cluster.md): locally, as child processes of
 * this program, at most N at once; or on a Slurm cluster, as one job array (sbatch --array),
 * waited for with squeue and sacct, the traces written to a directory the cluster's nodes share.
 * `ampdiag sweep` runs its configurations through it (and `ampdiag tune`, whose rounds are
 * sweeps).
 *
 * A round is a list of jobs: each an argument vector for this program (argv[1] = "run", ...),
 * the trace it writes, the file its output goes to and a name. launch_round runs them all and
 * says, per job, how it ended; it prints one progress line per job on stderr, and for a failed
 * job the end of its log. What to do with the traces is the caller's.
 */
#ifndef AMPDIAG_CLI_LAUNCH_H
#define AMPDIAG_CLI_LAUNCH_H

typedef enum { LAUNCH_LOCAL = 0, LAUNCH_SLURM = 1 } launch_kind;

typedef struct launch_job {
    char **argv;       /* NULL-terminated; argv[0] is replaced by this program, argv[1] = "run" */
    const char *name;  /* "run-fp16-lr0.01": unique in the round, safe in a file name */
    const char *trace; /* the trace the job writes (for messages) */
    const char *log;   /* its stdout and stderr */
    int status;        /* out: its exit status (128 + a signal that ended it), -1 when it did not
                          run or (Slurm) left no exit status */
    int signal;        /* out: the signal that ended it (local: as waitpid says; Slurm: read from
                          a status over 128), 0 when none did */
    double secs;       /* out: its wall time (local runs) */
    int external;      /* argv is another program's (argv[0] looked up on PATH, kept as given):
                          `ampdiag tune -- CMD` */
    char **env;        /* NULL, or "NAME=VALUE" entries (NULL-ended) set in the job's environment */
} launch_job;

typedef struct launch_opts {
    launch_kind kind;
    long jobs;            /* local: runs at once (>= 1; with more than 1 each run gets
                             OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1 unless set);
                             Slurm: at most this many array tasks at once (sbatch --array=0-N%J),
                             0 = as many as the cluster gives */
    const char *dir;      /* the round's directory: Slurm's job script (ampdiag-sweep.sbatch), its
                             output files and the jobs' exit status files go there */
    const char *emit_dir; /* Slurm: write the job script into this directory, submit nothing */
    const char *prog;     /* "ampdiag sweep": the prefix of every message */
    int dry;              /* print what would run (local: the command lines; Slurm: the job
                             script) on stdout, run nothing */
    int no_log_tail;      /* a failed job's line only: the caller shows the end of its log */
} launch_opts;

/* "local" or "slurm" -> *k. 0, or -1 when the name is neither. */
int launch_kind_parse(const char *s, launch_kind *k);

/* Run the round. Returns 0 when it was run to its end (each job's status then says how it
 * ended: 0 success), or with emit_dir / dry when the script or the commands were written;
 * EXIT_SIGNAL + the signal when SIGINT or SIGTERM stopped it (passed on to the local runs, or
 * the job array cancelled with scancel: the runs mark their traces interrupted); EXIT_USAGE or
 * EXIT_IO after a message when the round could not be launched or waited for (no sbatch on
 * PATH, sbatch refused the script, the queue could not be read). */
int launch_round(launch_job *js, int n, const launch_opts *o);

/* The last lines (at most 8) of a job's log on stderr, each escaped; nothing when it cannot be
 * read. */
void launch_log_tail(const char *path);

#endif /* AMPDIAG_CLI_LAUNCH_H */
