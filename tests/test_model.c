/*
 * test_model — loading through the public API: every kind of bad input is a
 * distinct error whose message names the problem, and loading maps weights
 * without reading them (resident memory stays far below the file size until
 * a forward pass touches the tensors).
 */
#include <stdint.h>

#include "core/gguf.h"
#include "core/quant.h"
#include "octo.h"
#include "platform/platform.h"
#include "t.h"
#include "util.h"

/* Copy src to dst through the writer, leaving out tensor `skip`, giving
 * tensor `reshape` its dimensions reversed, and overriding the architecture. */
static int rewrite(const char *src, const char *dst, const char *skip, const char *reshape, const char *arch,
                   const char *drop_key) {
    gguf_ctx *g;
    err_t err = {0};
    if (gguf_open(src, &g, &err)) return 0;
    gguf_writer *w = gguf_writer_new();
    for (uint64_t i = 0; i < g->n_kv; i++) {
        if (drop_key && !strcmp(g->kv[i].key, drop_key)) continue;
        gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
    }
    if (arch) gguf_writer_set_str(w, "general.architecture", arch);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (skip && !strcmp(t->name, skip)) continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (reshape && !strcmp(t->name, reshape)) {
            ne[0] = t->ne[1];
            ne[1] = t->ne[0];
        }
        gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, t->data, &err);
    }
    int ok = gguf_writer_write(w, dst, NULL, NULL, &err) == ERR_OK;
    gguf_writer_free(w);
    gguf_close(g);
    return ok;
}

static octo_status load_status(octo_client *c, const char *path, const char *must_mention) {
    octo_model *m = octo_load_model(c, path, NULL);
    octo_status st = m ? OCTO_OK : octo_last_status(c);
    if (m) octo_model_free(m);
    else if (must_mention) T_CHECKF(strstr(octo_last_error(c), must_mention) != NULL, "'%s' should mention '%s'",
                                    octo_last_error(c), must_mention);
    return st;
}

static void test_bad_inputs(void) {
    char good[256], bad[256];
    tu_tmp_path(good, sizeof good, "good.gguf");
    tu_tmp_path(bad, sizeof bad, "bad.gguf");
    synth_opts o = synth_defaults();
    o.type = QT_Q8_0;
    err_t err = {0};
    T_EQ_INT(synth_write(&o, good, &err), ERR_OK);
    octo_client *c = octo_client_new(NULL);
    T_EQ_INT(load_status(c, good, NULL), OCTO_OK);

    size_t n = 0;
    unsigned char *bytes = tu_read_file(good, &n);
    T_CHECK(bytes != NULL && n > 1000);
    if (!bytes) return;
    /* truncated in the metadata, and in the tensor data */
    T_CHECK(tu_write_file(bad, bytes, 100));
    T_EQ_INT(load_status(c, bad, "truncated"), OCTO_ERR_TRUNCATED);
    T_CHECK(tu_write_file(bad, bytes, n - 100));
    T_EQ_INT(load_status(c, bad, "runs past the end"), OCTO_ERR_TENSOR_BOUNDS);
    /* wrong magic, unknown version */
    unsigned char *copy = malloc(n);
    memcpy(copy, bytes, n);
    copy[0] = 'X';
    T_CHECK(tu_write_file(bad, copy, n));
    T_EQ_INT(load_status(c, bad, "magic"), OCTO_ERR_BAD_MAGIC);
    memcpy(copy, bytes, n);
    copy[4] = 9;
    T_CHECK(tu_write_file(bad, copy, n));
    T_EQ_INT(load_status(c, bad, "version 9"), OCTO_ERR_BAD_VERSION);
    /* unknown tensor type: patch the type id of the first tensor info */
    gguf_ctx *g;
    T_EQ_INT(gguf_open_buffer(bytes, n, &g, &err), ERR_OK);
    const char *name = g->tensors[0].name;
    size_t name_len = strlen(name);
    for (size_t i = 0; i + name_len + 8 < n; i++) {
        uint64_t len;
        memcpy(&len, bytes + i, 8);
        if (len == name_len && !memcmp(bytes + i + 8, name, name_len)) {
            uint32_t nd;
            memcpy(&nd, bytes + i + 8 + name_len, 4);
            size_t type_off = i + 8 + name_len + 4 + 8 * nd;
            memcpy(copy, bytes, n);
            uint32_t unknown = 77;
            memcpy(copy + type_off, &unknown, 4);
            break;
        }
    }
    gguf_close(g);
    T_CHECK(tu_write_file(bad, copy, n));
    T_EQ_INT(load_status(c, bad, "unknown type id 77"), OCTO_ERR_BAD_TENSOR_TYPE);
    free(copy);
    free(bytes);

    /* model-level problems */
    T_CHECK(rewrite(good, bad, "blk.1.ffn_up.weight", NULL, NULL, NULL));
    T_EQ_INT(load_status(c, bad, "blk.1.ffn_up.weight"), OCTO_ERR_MISSING_TENSOR);
    T_CHECK(rewrite(good, bad, NULL, "blk.0.attn_k.weight", NULL, NULL));
    T_EQ_INT(load_status(c, bad, "blk.0.attn_k.weight"), OCTO_ERR_BAD_SHAPE);
    T_CHECK(rewrite(good, bad, NULL, NULL, "gptx", NULL));
    T_EQ_INT(load_status(c, bad, "gptx"), OCTO_ERR_UNSUPPORTED_ARCH);
    /* the list of what is supported is made from the architecture table: every row, in order */
    T_EQ_INT(load_status(c, bad, "(supported: llama, qwen2, qwen2moe, olmoe, granitemoe, phi3, gemma2, deepseek2)"),
             OCTO_ERR_UNSUPPORTED_ARCH);
    T_CHECK(rewrite(good, bad, NULL, NULL, NULL, "llama.block_count"));
    T_EQ_INT(load_status(c, bad, "llama.block_count"), OCTO_ERR_MISSING_KEY);
    /* files that are not models at all */
    T_CHECK(tu_write_file(bad, "", 0));
    T_EQ_INT(load_status(c, bad, "empty"), OCTO_ERR_EMPTY_FILE);
    const char *dir = getenv("OCTO_TMP") ? getenv("OCTO_TMP") : "/tmp";
    T_EQ_INT(load_status(c, dir, "directory"), OCTO_ERR_IS_DIR);
    T_EQ_INT(load_status(c, "/nonexistent/model.gguf", "no such file"), OCTO_ERR_NOT_FOUND);
    T_CHECK(octo_load_model(c, NULL, NULL) == NULL);
    T_EQ_INT(octo_last_status(c), OCTO_ERR_INVALID_ARG);

    /* evaluation errors leave the model usable */
    octo_model *m = octo_load_model(c, good, NULL);
    T_CHECK(m != NULL);
    float *logits = malloc(sizeof(float) * 300 * 4);
    int32_t toks[4] = {1, 50, 299, 300};
    T_EQ_INT(octo_eval(m, toks, 4, logits, OCTO_LOGITS_ALL), OCTO_ERR_INVALID_ARG);
    T_CHECK(strstr(octo_model_error(m), "300") != NULL);
    T_EQ_INT(octo_n_past(m), 0);
    T_EQ_INT(octo_eval(m, toks, 3, logits, OCTO_LOGITS_ALL), OCTO_OK);
    T_EQ_INT(octo_n_past(m), 3);
    /* the last row of a batch equals the same position decoded after the first two */
    float last[300];
    octo_reset(m);
    T_EQ_INT(octo_eval(m, toks, 2, logits + 300 * 3, OCTO_LOGITS_LAST), OCTO_OK);
    T_EQ_INT(octo_eval(m, toks + 2, 1, last, OCTO_LOGITS_LAST), OCTO_OK);
    double md = 0;
    for (int i = 0; i < 300; i++) md = fmax(md, fabs(last[i] - logits[2 * 300 + i]));
    T_CHECKF(md < 1e-4, "batch vs decode differ by %g", md);
    octo_model_free(m);
    /* a context that is full is an error, not an overflow */
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = 2;
    m = octo_load_model(c, good, &mo);
    T_EQ_INT(octo_eval(m, toks, 3, logits, OCTO_LOGITS_ALL), OCTO_ERR_CONTEXT_FULL);
    T_EQ_INT(octo_n_past(m), 0);
    octo_model_free(m);
    free(logits);
    octo_client_free(c);
    remove(good);
    remove(bad);
}

/* Loading maps; reading happens on first use. */
static void test_lazy_residency(void) {
    char path[256];
    tu_tmp_path(path, sizeof path, "big.gguf");
    synth_opts o = synth_defaults();
    o.n_embd = 512;
    o.n_layer = 8;
    o.n_head = 8;
    o.n_head_kv = 8;
    o.n_ff = 1536;
    o.n_vocab = 4096;
    o.type = QT_F32;
    err_t err = {0};
    T_EQ_INT(synth_write(&o, path, &err), ERR_OK);
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = 8;
    uint64_t rss0 = octo_memory_usage().rss_bytes;
    if (strcmp(plat_name(), "linux")) { /* the POSIX fallback knows no RSS (platform/mem.h) */
        T_EQ_INT(rss0, 0);
        printf("resident memory: unknown in the %s platform build, not checked\n", plat_name());
        octo_client_free(c);
        remove(path);
        return;
    }
    octo_model *m = octo_load_model(c, path, &mo);
    T_CHECK(m != NULL);
    if (!m) return;
    uint64_t rss1 = octo_memory_usage().rss_bytes;
    octo_model_info in = octo_model_info_get(m);
    float *logits = malloc(sizeof(float) * (size_t)in.n_vocab);
    int32_t tok = 7;
    T_EQ_INT(octo_eval(m, &tok, 1, logits, OCTO_LOGITS_LAST), OCTO_OK);
    uint64_t rss2 = octo_memory_usage().rss_bytes;
    double load_mib = (double)(rss1 - rss0) / 1048576.0, used_mib = (double)(rss2 - rss0) / 1048576.0;
    printf("file %.1f MiB: resident +%.2f MiB after load, +%.1f MiB after one token\n",
           (double)in.file_bytes / 1048576.0, load_mib, used_mib);
    T_CHECK(rss0 > 0);
    /* after load: far below the file (metadata and the vocab arrays only) */
    T_CHECKF((double)(rss1 - rss0) < 0.05 * (double)in.file_bytes, "load made %.1f MiB resident", load_mib);
    /* after a token every weight has been read: the measurement sees it */
    T_CHECKF((double)(rss2 - rss0) > 0.8 * (double)in.weight_bytes, "a token made only %.1f MiB resident", used_mib);
    free(logits);
    octo_model_free(m);
    octo_client_free(c);
    remove(path);
}

/* The client keeps copies of its strings: the caller's buffers may change and go once
 * octo_client_new returns, and a load and a session after that still see what was given. */
static void test_client_copies_strings(void) {
    char path[256], dir[256];
    tu_tmp_path(path, sizeof path, "copies.gguf");
    const char *scratch = getenv("OCTO_TMP");
    snprintf(dir, sizeof dir, "%s", scratch && *scratch ? scratch : "/tmp");
    synth_opts o = synth_defaults();
    err_t err = {0};
    T_EQ_INT(synth_write(&o, path, &err), ERR_OK);
    char *device = strdup("pixel-8"), *cache = strdup(dir);
    octo_client_options co = octo_client_options_defaults();
    co.device = device, co.cache_dir = cache;
    octo_client *c = octo_client_new(&co);
    memset(device, 'x', strlen(device)), memset(cache, 'x', strlen(cache));
    free(device), free(cache);
    octo_model_options mo = octo_model_options_defaults();
    mo.kv.spill = 1, mo.kv.budget_bytes = 1 << 20, mo.max_sessions = 2;
    octo_model *m = octo_load_model(c, path, &mo);
    T_CHECKF(m != NULL, "load: %s", octo_last_error(c));
    char plan[8192];
    T_CHECK(m && octo_model_plan_json(m, plan, sizeof plan) < (int)sizeof plan);
    T_CHECKF(m && strstr(plan, "\"device\": \"pixel-8\",") != NULL, "%s", plan);
    T_CHECKF(m && strstr(plan, "\"kv_spill\": true,") != NULL, "%s", plan);
    octo_session *ss = m ? octo_session_new(m) : NULL; /* its cache opens a spill file in the copy of dir */
    T_CHECKF(ss != NULL, "session: %s", m ? octo_model_error(m) : "");
    T_EQ_INT(ss ? octo_session_stats(ss).kv_spill_on : 0, 1);
    octo_session_free(ss);
    octo_model_free(m);
    octo_client_free(c);
    remove(path);
}

int main(void) {
    test_client_copies_strings();
    test_bad_inputs();
    test_lazy_residency();
    T_DONE();
}
