/*
 * data.h - training data: deterministic synthetic sets and users' HDF5 files.
 *
 * Classification data is x [N, D] float32 with labels y [N]; sequence data is tokens [N, L]
 * (the model reads positions 0..L-2 and predicts 1..L-1). Files: /x and /y, or /tokens, with
 * optional /x_val + /y_val or /tokens_val; without them the last 10% of rows (at least one) are
 * held out for validation. See docs/usage.md, "Data files".
 */
#ifndef AMPDIAG_DATA_H
#define AMPDIAG_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef enum { DATA_CLASSIFICATION = 0, DATA_TOKENS = 1 } data_kind;

typedef struct dataset {
    data_kind kind;
    char name[256];       /* "synthetic:blobs" or the file name */
    /* classification */
    int d, classes;
    /* tokens */
    int len, vocab;       /* sequence length L (the model's context is L - 1) and vocabulary */
    /* rows: train then validation */
    int n, n_val;
    float *x, *x_val;     /* [n, d], [n_val, d] */
    int32_t *y, *y_val;   /* [n], [n_val] */
    int32_t *tok, *tok_val; /* [n, len], [n_val, len] */
    char warnings[1024];  /* what the checks at load found, one line each ("" when nothing) */
} dataset;

/* What a run records about its data (traces/FORMAT.md, "Root attributes": data_*, input_*), so
 * that the reading side can judge the validation set and name the inputs as a cause: the labels
 * (classification) or target tokens (sequences), and the inputs as the model sees them (after
 * data_standardize), over the training rows. */
typedef struct data_facts {
    int rows, val_rows;
    int64_t val_targets;  /* the predictions the validation accuracy counts: a row each, or the
                             target tokens of each row */
    int classes;          /* classes (labels 0..K-1), or the vocabulary of a token set */
    int val_classes;      /* distinct labels (target tokens) among the validation rows */
    double val_chance;    /* share of the validation labels (targets) in their most common class:
                             the accuracy of always predicting it */
    int labels_sorted;    /* classification: the training labels are in sorted file order */
    int have_inputs;      /* classification: the input fields below are known */
    double input_min, input_max;
    double input_rms;     /* root mean square of every training input value */
    double input_std_min, input_std_max; /* the features' standard deviations: the smallest
                                            (of those not constant) and the largest */
} data_facts;

void data_facts_of(const dataset *ds, data_facts *f);

/* Standardise the inputs of a classification set: each feature minus its training mean,
 * divided by its training standard deviation (a constant feature only centred), the validation
 * rows with the training rows' figures. Returns 0, or -1 for a token set (nothing to
 * standardise; message in err). */
int data_standardize(dataset *ds, char *err, size_t errlen);

/* Error classes, as the command line's exit codes. */
#define DATA_EBADINPUT (-2)
#define DATA_EIO (-3)

/*
 * Load "synthetic:NAME" (see data_synthetic_names) or an HDF5 file. want_tokens says what the
 * model reads (a transformer wants tokens); a file of the other kind is refused. seed makes
 * synthetic data. Returns 0, or DATA_EBADINPUT / DATA_EIO with a message in err naming the file
 * and what was expected.
 */
int data_load(dataset *ds, const char *spec, int want_tokens, uint64_t seed, char *err, size_t errlen);
void data_free(dataset *ds);
/* "blobs, blobs-wide, tokens" and what each is, for --help. */
const char *data_synthetic_help(void);

/* Batches: a deterministic order of rows per epoch (shuffled by seed, or file order). */
typedef struct batcher {
    int n;
    int *perm;
    int pos, epoch;
    int shuffle;
    uint64_t seed;
} batcher;

int batcher_init(batcher *b, int n, int shuffle, uint64_t seed);
void batcher_free(batcher *b);
/* Fill rows[0..B) with the next B row indices (wrapping into the next epoch). */
void batcher_next(batcher *b, int *rows, int B);

/* Gather rows into contiguous batch buffers: x [B, d] + y [B], or inputs [B, len-1] + targets
 * [B, len-1] (the targets are the inputs shifted by one). val selects the validation rows. */
void data_gather(const dataset *ds, int val, const int *rows, int B, float *x, int32_t *y,
                 int32_t *inputs, int32_t *targets);

#endif
