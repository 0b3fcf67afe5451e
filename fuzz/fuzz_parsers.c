/*
 * fuzz_parsers — libFuzzer target: the chat-template detector and
 * formatter, and the command line's number, id-list, lookahead and mode
 * parsers, on arbitrary bytes.
 *
 * First byte: which parser. Chat: the rest is a template to detect, then
 * NUL-separated role/content pairs to format with every family. The CLI
 * parsers get the rest as one NUL-terminated argument. Each must accept or
 * refuse it; never crash or read past it.
 */
#include <stdlib.h>
#include <string.h>

#include "../tools/cli.h"
#include "model/chat_template.h"

static void chat(const char *p, size_t n) {
    const size_t tl = strnlen(p, n);
    (void)chat_detect(p, tl);
    chat_message msgs[8];
    int nm = 0;
    for (size_t at = tl + 1; at < n && nm < 8;) {
        const char *role = p + at;
        at += strnlen(role, n - at) + 1;
        if (at >= n) break;
        const char *content = p + at;
        at += strnlen(content, n - at) + 1;
        if (at > n) break; /* the last content must end inside the input (its NUL) */
        msgs[nm++] = (chat_message){role, content};
    }
    for (int f = CHAT_PLAIN; f <= CHAT_TULU; f++) {
        char *out = NULL;
        if (chat_format((chat_family)f, msgs, nm, &out, NULL) == ERR_OK && !out) __builtin_trap();
        free(out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char *s = malloc(size); /* the rest, NUL-terminated (the chat parser reads its own NULs) */
    if (!s) return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    long l;
    float f;
    int32_t *ids = NULL;
    int n, a, b, c;
    switch (data[0] % 6) {
    case 0: chat(s, size); break;
    case 1: (void)parse_long(s, -5, 1L << 40, &l); break;
    case 2: (void)parse_float(s, &f); break;
    case 3:
        if (parse_tokens(s, &ids, &n)) free(ids);
        break;
    case 4: (void)parse_lookahead(s, &a, &b, &c); break;
    default: (void)parse_spec_mode(s, &a); break;
    }
    free(s);
    return 0;
}
