/*
 * messages_internal.h - what the files of src/messages/ share: the rows of the message table
 * (msgtab.c) and the template expansion (expand.c). Not for use outside src/messages/.
 */
#ifndef AMPDIAG_MESSAGES_INTERNAL_H
#define AMPDIAG_MESSAGES_INTERNAL_H

#include "messages/messages.h"

/* A row of words: a finding's (msg_finding_rows, by an_fid) or a rule item's (msg_item_rows, by
 * rec_mid). */
typedef struct msg_row {
    const char *key;             /* stable id (JSON) of an item; NULL for a finding (its key) */
    an_fid f;                    /* the finding an item reads (F_NONE: none, or any) */
    const char *fig[REC_MAXV];   /* the names of the item's own figures, in v[] order */
    const char *text;            /* the words */
    const char *brief;           /* the short words (a format's first problem), or NULL */
    an_fid covered[2];           /* a finding's row: findings that say the same and more; where
                                    the run has one about the same layer, lists leave this out */
} msg_row;

extern const msg_row msg_finding_rows[AN_NFINDINGS];
extern const msg_row msg_item_rows[REC_NMIDS];
extern const msg_row msg_decision_rows[REC_NWHATS];

/* A row of ampdiag tune's words: its figures and its strings by name. */
#define MSG_TUNE_MAXS 4
typedef struct msg_tune_row {
    const char *key;
    const char *fig[REC_MAXV];
    const char *str[MSG_TUNE_MAXS];
    const char *text;
} msg_tune_row;
extern const msg_tune_row msg_tune_rows[MT_N];

/* What a template may name. */
typedef struct msg_src {
    const msg_ctx *c;
    const an_finding *f;        /* the finding (or NULL) */
    const double *v;            /* the item's or decision's own figures (or NULL) */
    const char *const *vnames;  /* their names */
    int run;                    /* the run the words are about (-1: f's) */
    int doc;                    /* 1: documentation: constants printed, other names kept */
    int check;                  /* 1: count names that resolve to nothing in *bad */
    int bad;
    FILE *report;               /* where check mode describes them (may be NULL) */
    const char *to;             /* a decision's "to" (or NULL) */
    const char *const *s;       /* strings by name (tune's words), or NULL */
    const char *const *snames;
} msg_src;

/* Expand template t into buf[0..n) (always terminated). */
void msg_expand(char *buf, size_t n, const char *t, msg_src *x);

#endif
