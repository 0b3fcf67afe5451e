/*
 * notes — the notes said so far (notes.h): a short list behind a lock, as
 * the library may warn from a thread of its own.
 */
#include "notes.h"

#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include "stats.h"

#define NOTES_MAX 64 /* past it a note is still said, and may be said again */
#define NOTE_BYTES 384

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char said[NOTES_MAX][NOTE_BYTES];
static int n_said;

/* 1 when text is new (then kept, if there is room), 0 when it was said. */
static int keep(const char *text) {
    for (int i = 0; i < n_said; i++)
        if (!strcmp(said[i], text)) return 0;
    if (n_said < NOTES_MAX) snprintf(said[n_said++], NOTE_BYTES, "%s", text);
    return 1;
}

void note(const char *fmt, ...) {
    char text[NOTE_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&lock);
    if (keep(text)) fprintf(stderr, "octo: note: %s\n", text);
    pthread_mutex_unlock(&lock);
}

void note_log(void *user, octo_log_level level, const char *message) {
    (void)user;
    if (level >= OCTO_LOG_WARN && message && *message) note("%s", message);
}

void notes_print_json(FILE *out) {
    pthread_mutex_lock(&lock);
    fputc('[', out);
    for (int i = 0; i < n_said; i++) {
        if (i) fputs(", ", out);
        stats_print_text(out, said[i]);
    }
    fputc(']', out);
    pthread_mutex_unlock(&lock);
}

int notes_count(void) {
    pthread_mutex_lock(&lock);
    const int n = n_said;
    pthread_mutex_unlock(&lock);
    return n;
}
