/*
 * tokenize — `octo tokenize` and `octo detokenize`: text to ids and back,
 * with the model's vocabulary alone (any architecture loads for it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octo.h"
#include "cli.h"
#include "options.h"

/* The model's vocabulary alone: any architecture, or a vocabulary-only file. */
static octo_model *open_vocabulary(const char *path, octo_client **c) {
    const model_request req = {.path = path, .n_ctx = 1, .auto_draft = OCTO_DRAFT_NONE, .vocab_only = 1};
    return open_model(&req, c);
}

int cmd_tokenize(int argc, char **argv) {
    cli_args a = cli_defaults();
    const int bad = cli_parse(CMD_TOKENIZE, argc, argv, &a);
    if (bad) return bad;
    const char *path = a.model, *text = a.text, *file = a.file;
    const int no_bos = a.no_bos, special = a.special;
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
    octo_model *m = open_vocabulary(path, &c);
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
    cli_args a = cli_defaults();
    const int bad = cli_parse(CMD_DETOKENIZE, argc, argv, &a);
    if (bad) return bad;
    const char *path = a.model, *ids_arg = a.ids;
    if (!path || !ids_arg) return usage_error("detokenize needs -m MODEL and --ids \"IDS\"");
    int32_t *ids;
    int n;
    if (!parse_tokens(ids_arg, &ids, &n)) return usage_error("--ids takes space-separated non-negative ids");
    octo_client *c = NULL;
    octo_model *m = open_vocabulary(path, &c);
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
