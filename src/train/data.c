/*
 * data — text files, folders and chat JSONL as training sequences (train/data.h).
 */
#include "train/data.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/checksum.h"
#include "core/inputs.h"
#include "core/json.h"
#include "platform/file.h"

/* ---------------------------------------------------------------- growing the set */

typedef struct {
    train_data *d;
    int64_t cap, seq_cap;
    const tokenizer *tok;
    chat_family chat;
    int seq;
} builder;

static err_code push(builder *b, int32_t id, uint8_t counts, err_t *err) {
    train_data *d = b->d;
    if (d->n_tokens == b->cap) {
        const int64_t cap = b->cap ? 2 * b->cap : 4096;
        int32_t *t = realloc(d->tokens, sizeof(int32_t) * (size_t)cap);
        if (t) d->tokens = t;
        uint8_t *m = t ? realloc(d->mask, (size_t)cap) : NULL;
        if (!m) return err_set(err, ERR_NOMEM, "out of memory for %lld training tokens", (long long)cap);
        d->mask = m, b->cap = cap;
    }
    d->tokens[d->n_tokens] = id;
    d->mask[d->n_tokens++] = counts;
    return ERR_OK;
}

/* The tokens from the last start on end a sequence (dropped when none of its positions counts). */
static err_code end_seq(builder *b, err_t *err) {
    train_data *d = b->d;
    const int64_t from = d->start[d->n_seq];
    int64_t counted = 0;
    if (d->n_tokens > from) d->mask[d->n_tokens - 1] = 0; /* nothing follows the last token */
    for (int64_t i = from; i < d->n_tokens; i++) counted += d->mask[i];
    if (!counted) { /* too short, or a conversation cut before its assistant's turn: nothing to learn */
        d->n_tokens = from;
        return ERR_OK;
    }
    if (d->n_seq + 2 > b->seq_cap) {
        const int64_t cap = b->seq_cap * 2 + 64;
        int64_t *s = realloc(d->start, sizeof(int64_t) * (size_t)cap);
        if (!s) return err_set(err, ERR_NOMEM, "out of memory for %d training sequences", d->n_seq);
        d->start = s, b->seq_cap = cap;
    }
    d->n_counted += counted;
    d->start[++d->n_seq] = d->n_tokens;
    return ERR_OK;
}

/* ---------------------------------------------------------------- text */

static err_code add_text(builder *b, const char *text, size_t len, err_t *err) {
    tok_list ids = {0};
    err_code rc = tokenizer_encode(b->tok, text, len, true, false, &ids, err);
    for (int i = 0; i < ids.n && !rc; i++) {
        rc = push(b, ids.ids[i], 1, err);
        if (!rc && b->d->n_tokens - b->d->start[b->d->n_seq] == b->seq) rc = end_seq(b, err);
    }
    if (!rc) rc = end_seq(b, err);
    tok_list_free(&ids);
    return rc;
}

/* ---------------------------------------------------------------- chat */

/* Tokens of text[0..len) pushed, each counted (its prediction from the position before) when counts;
 * first: the sequence's start (BOS as the vocabulary says). */
static err_code push_part(builder *b, const char *text, size_t len, bool first, bool counts, err_t *err) {
    tok_list ids = {0};
    err_code rc = tokenizer_encode(b->tok, text, len, first, !counts, &ids, err);
    for (int i = 0; i < ids.n && !rc; i++) {
        /* a counted token's prediction is made at the position before it */
        if (counts && b->d->n_tokens > b->d->start[b->d->n_seq]) b->d->mask[b->d->n_tokens - 1] = 1;
        rc = push(b, ids.ids[i], 0, err);
    }
    tok_list_free(&ids);
    return rc;
}

/* The end-of-turn token after an assistant's content: counted when the template's next token ends a turn. */
static err_code push_turn_end(builder *b, const char *rest, size_t len, err_t *err) {
    tok_list ids = {0};
    err_code rc = tokenizer_encode(b->tok, rest, len, false, true, &ids, err);
    if (!rc && ids.n > 0 && tokenizer_is_eog(b->tok, ids.ids[0])) {
        b->d->mask[b->d->n_tokens - 1] = 1;
        rc = push(b, ids.ids[0], 0, err);
    }
    tok_list_free(&ids);
    return rc;
}

/* The messages of one line, checked; *n of them in msgs (the strings point into v). */
static err_code read_messages(const json_value *v, chat_message **msgs, int *n, err_t *err) {
    const json_value *list = v->kind == JSON_OBJECT ? json_get(v, "messages") : NULL;
    if (!list || list->kind != JSON_ARRAY || list->n == 0)
        return err_set(err, ERR_INVALID_ARG, "a conversation is an object with a non-empty \"messages\" array");
    if (!(*msgs = calloc((size_t)list->n, sizeof **msgs))) return err_set(err, ERR_NOMEM, "out of memory");
    bool assistant = false;
    for (int i = 0; i < list->n; i++) {
        const json_value *m = &list->items[i];
        (*msgs)[i].role = m->kind == JSON_OBJECT ? json_get_str(m, "role") : NULL;
        (*msgs)[i].content = m->kind == JSON_OBJECT ? json_get_str(m, "content") : NULL;
        assistant |= (*msgs)[i].role && !strcmp((*msgs)[i].role, "assistant");
    }
    *n = list->n;
    err_code rc = chat_check(*msgs, *n, err);
    if (!rc && !assistant) rc = err_set(err, ERR_INVALID_ARG, "the conversation has no assistant message to learn from");
    return rc;
}

/* One conversation: the prompt before each assistant turn, the turn (counted), its end. */
static err_code add_chat(builder *b, const chat_message *msgs, int n, err_t *err) {
    char *full = NULL, *pre = NULL;
    err_code rc = chat_format(b->chat, msgs, n, &full, err);
    size_t at = 0; /* full's bytes pushed so far */
    for (int i = 0; i < n && !rc; i++) {
        if (strcmp(msgs[i].role, "assistant")) continue;
        free(pre), pre = NULL;
        if ((rc = chat_format(b->chat, msgs, i, &pre, err))) break;
        /* the turn's content follows the prompt before it (after the template's separator, if any) */
        const size_t p = strlen(pre), c = strlen(msgs[i].content);
        const char *q = p >= at && !strncmp(full, pre, p) ? strstr(full + p, msgs[i].content) : NULL;
        if (!q) {
            rc = err_set(err, ERR_UNSUPPORTED, "the %s chat template does not put an assistant's turn after the "
                         "prompt before it: octo cannot tell which tokens to learn", chat_family_name(b->chat));
            break;
        }
        const size_t from = (size_t)(q - full);
        if (!(rc = push_part(b, full + at, from - at, at == 0, false, err)) &&
            !(rc = push_part(b, q, c, false, true, err)))
            rc = push_turn_end(b, q + c, strlen(q + c), err);
        at = from + c;
    }
    free(pre), free(full);
    if (rc) return rc;
    train_data *d = b->d;
    if (d->n_tokens - d->start[d->n_seq] > b->seq) {
        d->n_tokens = d->start[d->n_seq] + b->seq;
        d->n_cut++;
    }
    d->n_chats++;
    return end_seq(b, err);
}

static err_code add_jsonl(builder *b, const char *text, size_t len, err_t *err) {
    err_code rc = ERR_OK;
    int line = 0;
    for (size_t at = 0; at < len && !rc; line++) {
        const char *nl = memchr(text + at, '\n', len - at);
        const size_t l = nl ? (size_t)(nl - (text + at)) : len - at;
        size_t blank = 0;
        while (blank < l && strchr(" \t\r", text[at + blank])) blank++;
        if (blank < l) {
            json_value *v = NULL;
            chat_message *msgs = NULL;
            int n = 0;
            if (!(rc = json_parse(text + at, l, &v, err)) && !(rc = read_messages(v, &msgs, &n, err)))
                rc = add_chat(b, msgs, n, err);
            if (rc) err_prefix(err, "line %d", line + 1);
            free(msgs);
            json_free(v);
        }
        at += l + 1;
    }
    return rc;
}

/* ---------------------------------------------------------------- files and folders */

static err_code read_whole(const char *path, char **text, size_t *len, err_t *err) {
    int fd = -1;
    struct stat st;
    err_code rc = input_open(path, &fd, &st, err);
    if (rc) return rc;
    *len = (size_t)st.st_size;
    if (!(*text = malloc(*len + 1))) rc = err_set(err, ERR_NOMEM, "out of memory for %zu bytes", *len);
    for (size_t got = 0; !rc && got < *len;) {
        const ssize_t k = read(fd, *text + got, *len - got);
        if (k <= 0) rc = err_set(err, ERR_IO, "reading: %s", k < 0 ? strerror(errno) : "the file shrank");
        else got += (size_t)k;
    }
    close(fd);
    if (!rc) (*text)[*len] = '\0';
    return rc;
}

static bool ends_with(const char *s, const char *sfx) {
    const size_t n = strlen(s), k = strlen(sfx);
    return n >= k && !strcmp(s + n - k, sfx);
}

static err_code add_file(builder *b, const char *path, err_t *err) {
    char *text = NULL;
    size_t len = 0;
    err_code rc = read_whole(path, &text, &len, err); /* its errors name the path */
    if (rc) return rc;
    rc = ends_with(path, ".jsonl") ? add_jsonl(b, text, len, err) : add_text(b, text, len, err);
    if (!rc) b->d->n_files++;
    free(text);
    return rc ? err_prefix(err, "%s", path), rc : ERR_OK;
}

typedef struct {
    char **names;
    int n, cap;
} name_list;

static int collect_name(void *ctx, const char *name) {
    name_list *l = ctx;
    if (name[0] == '.') return 0;
    if (l->n == l->cap) {
        char **p = realloc(l->names, sizeof(char *) * (size_t)(l->cap = l->cap * 2 + 16));
        if (!p) return ENOMEM;
        l->names = p;
    }
    return (l->names[l->n] = strdup(name)) ? (l->n++, 0) : ENOMEM;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static err_code add_folder(builder *b, const char *path, int fd, err_t *err) {
    name_list l = {0};
    const int e = plat_dir_each(fd, collect_name, &l);
    err_code rc = e ? err_set(err, e == ENOMEM ? ERR_NOMEM : ERR_IO, "%s: %s", path, strerror(e)) : ERR_OK;
    if (l.n) qsort(l.names, (size_t)l.n, sizeof *l.names, by_name);
    for (int i = 0; i < l.n && !rc; i++) {
        char *p = malloc(strlen(path) + strlen(l.names[i]) + 2);
        struct stat st;
        if (!p) rc = err_set(err, ERR_NOMEM, "out of memory");
        else sprintf(p, "%s/%s", path, l.names[i]);
        if (!rc && stat(p, &st) == 0 && S_ISREG(st.st_mode)) rc = add_file(b, p, err);
        free(p);
    }
    for (int i = 0; i < l.n; i++) free(l.names[i]);
    free(l.names);
    if (!rc && !b->d->n_files) rc = err_set(err, ERR_INVALID_ARG, "%s: no files to learn from in this folder", path);
    return rc;
}

err_code train_data_load(const tokenizer *tok, chat_family chat, const char *path, int seq, train_data *out,
                         err_t *err) {
    memset(out, 0, sizeof *out);
    if (seq < 2) return err_set(err, ERR_INVALID_ARG, "a training sequence needs 2 tokens or more, not %d", seq);
    builder b = {.d = out, .tok = tok, .chat = chat, .seq = seq, .seq_cap = 64};
    if (!(out->start = calloc((size_t)b.seq_cap, sizeof(int64_t)))) return err_set(err, ERR_NOMEM, "out of memory");
    err_code rc = ERR_OK;
    const int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        rc = add_folder(&b, path, fd, err);
        close(fd);
    } else rc = add_file(&b, path, err);
    if (!rc && !out->n_counted)
        rc = err_set(err, ERR_INVALID_ARG, "%s: no tokens to learn from (empty, or no assistant turns)", path);
    if (rc) {
        train_data_free(out);
        return rc;
    }
    out->fingerprint = checksum_bytes(out->tokens, sizeof(int32_t) * (uint64_t)out->n_tokens, 0x6f63746f);
    out->fingerprint = checksum_bytes(out->mask, (uint64_t)out->n_tokens, out->fingerprint);
    return ERR_OK;
}

void train_data_free(train_data *d) {
    free(d->tokens), free(d->mask), free(d->start);
    memset(d, 0, sizeof *d);
}
