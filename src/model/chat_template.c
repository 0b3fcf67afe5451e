/*
 * chat_template — see chat_template.h.
 *
 * Detection looks for each family's distinctive markers in the Jinja text,
 * most specific first (Llama 3's header tokens before ChatML, Phi-3's <|end|>
 * and Tulu's newline after a user turn before Zephyr's <|user|>, Llama 2's
 * <<SYS>> before Mistral's bare [INST]).
 * Formatting follows each model card's documented layout.
 */
#include "chat_template.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool has(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp(s + i, needle, m)) return true;
    return false;
}

chat_family chat_detect(const char *t, size_t n) {
    if (!t || !n) return CHAT_PLAIN;
    if (has(t, n, "<|start_header_id|>")) return CHAT_LLAMA3;
    if (has(t, n, "<|start_of_role|>")) return CHAT_GRANITE;
    if (has(t, n, "'Assistant: ' + message['content'] + eos_token")) return CHAT_DEEPSEEK2;
    if (has(t, n, "'<|user|>\\n' + message['content'] + '\\n'")) return CHAT_TULU;
    if (has(t, n, "<|im_start|>")) return CHAT_CHATML;
    if (has(t, n, "<start_of_turn>")) return CHAT_GEMMA;
    if (has(t, n, "<|user|>") && has(t, n, "<|end|>")) return CHAT_PHI3;
    if (has(t, n, "<|user|>")) return CHAT_ZEPHYR;
    if (has(t, n, "[INST]") && has(t, n, "<<SYS>>")) return CHAT_LLAMA2;
    if (has(t, n, "[INST]")) return CHAT_MISTRAL;
    return CHAT_PLAIN;
}

const char *chat_family_name(chat_family f) {
    static const char *const names[] = {"plain", "chatml", "llama2", "llama3",   "mistral",
                                        "phi3",  "gemma",  "zephyr", "granite", "deepseek2", "tulu"};
    return (unsigned)f < sizeof names / sizeof *names ? names[f] : "?";
}

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void add(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0 || b->oom) return;
    if (b->n + (size_t)need + 1 > b->cap) {
        size_t cap = (b->n + (size_t)need + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)need + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

static bool is(const chat_message *m, const char *role) { return !strcmp(m->role, role); }

err_code chat_check(const chat_message *msgs, int n, err_t *err) {
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content ||
            (!is(&msgs[i], "system") && !is(&msgs[i], "user") && !is(&msgs[i], "assistant")))
            return err_set(err, ERR_INVALID_ARG, "chat message %d needs role system/user/assistant and content", i);
    return ERR_OK;
}

err_code chat_format(chat_family f, const chat_message *msgs, int n, char **out, err_t *err) {
    *out = NULL;
    err_code rc = chat_check(msgs, n, err);
    if (rc) return rc;
    sbuf b = {0};
    add(&b, "%s", "");
    const char *sys = NULL;
    int first = 0;
    if (n > 0 && is(&msgs[0], "system")) {
        sys = msgs[0].content;
        first = 1;
    }
    switch (f) {
    case CHAT_CHATML:
        for (int i = 0; i < n; i++) add(&b, "<|im_start|>%s\n%s<|im_end|>\n", msgs[i].role, msgs[i].content);
        add(&b, "<|im_start|>assistant\n");
        break;
    case CHAT_LLAMA3:
        for (int i = 0; i < n; i++)
            add(&b, "<|start_header_id|>%s<|end_header_id|>\n\n%s<|eot_id|>", msgs[i].role, msgs[i].content);
        add(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case CHAT_LLAMA2:
    case CHAT_MISTRAL:
        /* [INST] (<<SYS>>\n sys \n<</SYS>>\n\n) user [/INST] assistant</s><s>[INST] ... */
        for (int i = first; i < n; i++) {
            if (is(&msgs[i], "user")) {
                if (i > first) add(&b, "<s>");
                if (i == first && sys && f == CHAT_LLAMA2) add(&b, "[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", sys, msgs[i].content);
                else if (i == first && sys) add(&b, "[INST] %s\n\n%s [/INST]", sys, msgs[i].content);
                else add(&b, "[INST] %s [/INST]", msgs[i].content);
            } else if (is(&msgs[i], "assistant")) {
                add(&b, " %s</s>", msgs[i].content);
            }
        }
        break;
    case CHAT_PHI3:
        for (int i = 0; i < n; i++) add(&b, "<|%s|>\n%s<|end|>\n", msgs[i].role, msgs[i].content);
        add(&b, "<|assistant|>\n");
        break;
    case CHAT_ZEPHYR:
        for (int i = 0; i < n; i++) add(&b, "<|%s|>\n%s</s>\n", msgs[i].role, msgs[i].content);
        add(&b, "<|assistant|>\n");
        break;
    case CHAT_GEMMA:
        /* Gemma has no system role: the system text leads the first user turn */
        for (int i = first; i < n; i++) {
            const char *role = is(&msgs[i], "assistant") ? "model" : "user";
            if (i == first && sys && is(&msgs[i], "user"))
                add(&b, "<start_of_turn>user\n%s\n\n%s<end_of_turn>\n", sys, msgs[i].content);
            else add(&b, "<start_of_turn>%s\n%s<end_of_turn>\n", role, msgs[i].content);
        }
        add(&b, "<start_of_turn>model\n");
        break;
    case CHAT_GRANITE:
        for (int i = 0; i < n; i++)
            add(&b, "<|start_of_role|>%s<|end_of_role|>%s<|end_of_text|>\n", msgs[i].role, msgs[i].content);
        add(&b, "<|start_of_role|>assistant<|end_of_role|>");
        break;
    case CHAT_DEEPSEEK2:
        for (int i = 0; i < n; i++) {
            if (is(&msgs[i], "user")) add(&b, "User: %s\n\n", msgs[i].content);
            else if (is(&msgs[i], "assistant")) add(&b, "Assistant: %s<｜end▁of▁sentence｜>", msgs[i].content);
            else add(&b, "%s\n\n", msgs[i].content);
        }
        add(&b, "Assistant:");
        break;
    case CHAT_TULU:
        for (int i = 0; i < n; i++) {
            if (is(&msgs[i], "assistant")) add(&b, "<|assistant|>\n%s<|endoftext|>\n", msgs[i].content);
            else add(&b, "<|%s|>\n%s\n", msgs[i].role, msgs[i].content);
        }
        add(&b, "<|assistant|>\n");
        break;
    case CHAT_PLAIN:
    default:
        for (int i = 0; i < n; i++) add(&b, "%s%s", i ? "\n\n" : "", msgs[i].content);
        break;
    }
    if (b.oom) {
        free(b.p);
        return err_set(err, ERR_NOMEM, "out of memory formatting a chat");
    }
    *out = b.p;
    return ERR_OK;
}
