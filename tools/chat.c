/*
 * chat — `octo run --chat`: a conversation, one user line a turn. The
 * history is resent each turn (the cache reuses its prefix); when the context
 * fills, the oldest exchanges are dropped to make room for the reply.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "octo.h"
#include "cli.h"
#include "run.h"
#ifdef OCTO_HAVE_EDITLINE
#include <editline/readline.h>
#endif

/* The conversation so far: messages and the strings they point at. */
typedef struct {
    octo_message *msgs;
    char **owned; /* [i] is msgs[i].content's own copy (NULL for the system prompt) */
    int n;
} chat_history;

static int history_add(chat_history *h, const char *role, char *content) {
    octo_message *m = realloc(h->msgs, sizeof *m * (size_t)(h->n + 1));
    if (m) h->msgs = m;
    char **o = m ? realloc(h->owned, sizeof *o * (size_t)(h->n + 1)) : NULL;
    if (o) h->owned = o;
    if (!m || !o) return 0;
    h->msgs[h->n] = (octo_message){role, content};
    h->owned[h->n++] = strcmp(role, "system") ? content : NULL;
    return 1;
}

/* Forget the k oldest messages after the system prompt. */
static void history_drop(chat_history *h, int k) {
    const int first = h->n && !strcmp(h->msgs[0].role, "system");
    for (int i = first; i < first + k; i++) free(h->owned[i]);
    memmove(h->msgs + first, h->msgs + first + k, sizeof *h->msgs * (size_t)(h->n - first - k));
    memmove(h->owned + first, h->owned + first + k, sizeof *h->owned * (size_t)(h->n - first - k));
    h->n -= k;
}

static void history_free(chat_history *h) {
    for (int i = 0; i < h->n; i++) free(h->owned[i]);
    free(h->owned);
    free(h->msgs);
}

/* Room for a reply of max_tokens before the turn, so that a full context does
 * not cut it: the oldest exchanges (a user line and its reply) go, as many as
 * octo_chat_fit says; all but the newest line when even that one leaves less
 * room. OCTO_OK, or the status of the failure (CONTEXT_FULL: the newest line
 * does not fit alone). */
static octo_status make_room(octo_model *m, chat_history *h, int max_tokens) {
    const int first = h->n && !strcmp(h->msgs[0].role, "system");
    int drop = octo_chat_fit(m, h->msgs, h->n, max_tokens);
    if (drop == -OCTO_ERR_CONTEXT_FULL && (drop = octo_chat_fit(m, h->msgs, h->n, 0)) >= 0) drop = h->n - first - 1;
    if (drop < 0) return (octo_status)-drop;
    drop += drop % 2; /* whole exchanges: after the system prompt, user and assistant alternate */
    if (drop > h->n - first - 1) drop = h->n - first - 1;
    if (drop) { /* what the context shift cost, on stderr beside the conversation */
        history_drop(h, drop);
        fprintf(stderr, "octo: the %d oldest exchange%s dropped to make room for the reply (%d messages kept)\n",
                (drop + 1) / 2, drop > 2 ? "s were" : " was", h->n);
    }
    return OCTO_OK;
}

/* One turn: room made (make_room), then the reply to the history's last
 * message, printed and added. A message that does not fit alone is dropped
 * with one line. */
static int chat_turn(octo_model *m, chat_history *h, int ids, const octo_generate_params *gp, int *started) {
    const octo_status room = make_room(m, h, gp->max_tokens);
    octo_stream *st = room ? NULL : octo_chat(m, h->msgs, h->n, gp);
    if (!st) {
        fail("%s", octo_model_error(m));
        if (octo_model_status(m) != OCTO_ERR_CONTEXT_FULL) return 1;
        free(h->owned[--h->n]); /* this message alone is too long: the session goes on without it */
        return 0;
    }
    (*started)++;
    char *reply = calloc(1, 1);
    size_t reply_len = 0;
    int rc = drain(st, ids, 0, &reply, &reply_len);
    if (octo_stream_stop_reason(st) == OCTO_STOP_CONTEXT_FULL) rc = 0; /* a reply cut short: the next turn makes room */
    octo_stream_free(st);
    putchar('\n');
    if (rc || !reply || !history_add(h, "assistant", reply)) {
        free(reply);
        return rc ? rc : fail("out of memory");
    }
    return 0;
}

/* One line of the conversation into *line; false at the end of input. On a
 * terminal with libedit: line editing and history (arrows, Ctrl-R). */
static bool read_line(int tty, char **line, size_t *cap) {
#ifdef OCTO_HAVE_EDITLINE
    if (tty) {
        char *l = readline("> ");
        if (!l) return false;
        if (*l) add_history(l);
        free(*line);
        *line = l;
        *cap = strlen(l) + 1;
        return true;
    }
#endif
    if (tty) {
        fputs("> ", stderr);
        fflush(stderr);
    }
    return getline(line, cap, stdin) >= 0;
}

/* /exit (1), /reset and /stats (0), else -1: a message. */
static int chat_command(octo_model *m, chat_history *h, const char *line) {
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return 1;
    if (!strcmp(line, "/reset")) { /* the system prompt stays */
        history_drop(h, h->n - (h->n && !strcmp(h->msgs[0].role, "system")));
        octo_reset(m);
        fputs("octo: the conversation was reset\n", stderr);
        return 0;
    }
    if (!strcmp(line, "/stats")) {
        octo_stats s = octo_model_stats(m);
        print_stats(&s);
        return 0;
    }
    return -1;
}

/* interactive: one user line per turn (any length); the history is resent and the cache reuses its prefix;
 * /reset, /stats and /exit are commands */
int chat_session(octo_model *m, const char *system, int ids, const octo_generate_params *gp, int *started) {
    chat_history h = {0};
    int rc = system && !history_add(&h, "system", (char *)system) ? fail("out of memory") : 0;
    const int tty = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t line_cap = 0;
    while (!rc) {
        if (!read_line(tty, &line, &line_cap)) break;
        line[strcspn(line, "\n")] = '\0';
        if (!line[0]) continue;
        const int cmd = chat_command(m, &h, line);
        if (cmd > 0) break; /* /exit */
        if (cmd == 0) continue;
        char *user = strdup(line);
        if (!user || !history_add(&h, "user", user)) {
            free(user);
            rc = fail("out of memory");
            break;
        }
        rc = chat_turn(m, &h, ids, gp, started);
    }
    free(line);
    history_free(&h);
    return rc;
}
