/*
 * run — what `octo run` (tools/run.c) and its --chat (tools/chat.c) share.
 */
#ifndef OCTO_TOOLS_RUN_H
#define OCTO_TOOLS_RUN_H

#include <stddef.h>

#include "octo.h"

/* A stream to stdout (its text, or with ids its token ids on one line), each
 * piece appended to *reply when reply is not NULL; 0, 1 after printing the
 * error, or 130 when Ctrl-C cancelled it; until_full: a full context is
 * the end asked for (-n -1), not an error. */
int drain(octo_stream *st, int ids, int until_full, char **reply, size_t *reply_len);
/* The --stats table (and chat's /stats) on stderr. */
void print_stats(const octo_stats *s);
/* --chat: a conversation on stdin with system as its system prompt (or
 * NULL); *started counts the streams that ran. 0 or 1 (printed). */
int chat_session(octo_model *m, const char *system, int ids, const octo_generate_params *gp, int *started);

#endif
