/*
 * notes — nothing silent: each option that does not take effect and each
 * automatic choice that overrides what was asked (the library's warnings
 * among them) is said once on stderr, "octo: note: ...", and kept for
 * --stats --json's "notes" (tools/notes.c).
 */
#ifndef OCTO_TOOLS_NOTES_H
#define OCTO_TOOLS_NOTES_H

#include <stdio.h>

#include "octo.h"

/* Say a note once (the same text again is not repeated); any thread. */
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The client's log (octo_client_options.log): warnings and errors become notes. */
void note_log(void *user, octo_log_level level, const char *message);
/* The notes said so far as a JSON array of strings. */
void notes_print_json(FILE *out);
/* How many notes were said. */
int notes_count(void);

#endif
