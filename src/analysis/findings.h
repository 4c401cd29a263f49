/*
 * findings.h - what one trace says, computed once from the loaded run (analyze.h) for every
 * renderer: the run summary printed by `ampdiag run`, `ampdiag info` (text and JSON) and the
 * per-run figures of `ampdiag compare`. A renderer prints these; it does not count again.
 */
#ifndef AMPDIAG_FINDINGS_H
#define AMPDIAG_FINDINGS_H

#include "analysis/analyze.h"

/* Compute (an_load does, into run->find). Returns 0 or -1 (out of memory); f is always left
 * for an_findings_free. */
int an_findings_of(const an_run *r, an_findings *f);
void an_findings_free(an_findings *f);

#endif
