/*
 * tokenize — `octo tokenize` and `octo detokenize`: text to ids and back,
 * with the model's vocabulary alone (any architecture loads for it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octo.h"
#include "cli.h"

int cmd_tokenize(int argc, char **argv) {
    const char *path = NULL, *text = NULL, *file = NULL;
    int no_bos = 0, special = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--text") && i + 1 < argc) text = argv[++i];
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--no-bos")) no_bos = 1;
        else if (!strcmp(argv[i], "--special")) special = 1;
        else return unknown_option("tokenize", argv[i]);
    }
    if (!path || (!text == !file)) return usage_error("tokenize needs -m MODEL and one of --text T or -f FILE");
    char *buf = NULL;
    size_t len = 0;
    if (file) {
        if (read_text_file(file, &buf, &len)) return 1;
        text = buf;
    } else {
        len = strlen(text);
    }
    octo_client *c = NULL;
    const model_request req = {.path = path, .n_ctx = 1, .auto_draft = OCTO_DRAFT_NONE, .vocab_only = 1}; /* any architecture, or a vocabulary-only file */
    octo_model *m = open_model(&req, &c);
    int rc = m ? 0 : 1;
    int32_t *ids = NULL;
    int n = 0;
    if (!rc) rc = tokenize_all(m, text, len, !no_bos, special, &ids, &n);
    if (!rc) {
        int32_t bos = octo_token_bos(m);
        int first = 1;
        for (int i = 0; i < n; i++) {
            if (no_bos && i == 0 && ids[i] == bos && !special) continue; /* a vocabulary that adds BOS anyway */
            printf(first ? "%d" : " %d", ids[i]);
            first = 0;
        }
        putchar('\n');
    }
    free(ids);
    free(buf);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}

int cmd_detokenize(int argc, char **argv) {
    const char *path = NULL, *ids_arg = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc) ids_arg = argv[++i];
        else return unknown_option("detokenize", argv[i]);
    }
    if (!path || !ids_arg) return usage_error("detokenize needs -m MODEL and --ids \"IDS\"");
    int32_t *ids;
    int n;
    if (!parse_tokens(ids_arg, &ids, &n)) return usage_error("--ids takes space-separated non-negative ids");
    octo_client *c = NULL;
    const model_request req = {.path = path, .n_ctx = 1, .auto_draft = OCTO_DRAFT_NONE, .vocab_only = 1}; /* any architecture, or a vocabulary-only file */
    octo_model *m = open_model(&req, &c);
    int rc = m ? 0 : 1;
    if (!rc) {
        int len = octo_detokenize(m, ids, n, NULL, 0);
        char *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (len < 0) rc = fail("%s", octo_model_error(m));
        else if (!buf) rc = fail("out of memory");
        else {
            octo_detokenize(m, ids, n, buf, len);
            if (fwrite(buf, 1, (size_t)len, stdout) != (size_t)len) rc = fail("write error");
        }
        free(buf);
    }
    free(ids);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}
