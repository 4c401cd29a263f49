/*
 * trace_notes.h - the notes the reader prints on stderr, for callers that open traces with
 * AMPDIAG_TRACE_READ_QUIET and print them later themselves (an_load_many: traces read on
 * several threads, notes printed in the order of the files).
 */
#ifndef AMPDIAG_TRACE_NOTES_H
#define AMPDIAG_TRACE_NOTES_H

/* "ampdiag: note: 'PATH' was still marked as open for writing ..." (ampdiag_trace_was_repaired) */
void trace_note_repaired(const char *path);

#endif
