/*
 * test_deploy — deploy bundles, the read-only weights path and the plan
 * (convert/deploy.h, runtime/bundle_dir.h, runtime/plan_json.c):
 *
 *   - flatjson writes what it reads back and rejects what is not one flat
 *     object; the file checksum is stable and sees a one-byte change;
 *   - for every packed type (Q4_0, Q8_0, Q4_K): the host bundle loads with
 *     its matrices marked packed in the read-only mapping (where the CPU has
 *     the packed kernels) and gives bit-identical logits and the same greedy
 *     text as the GGUF; the AArch64 profile's folder (GGUF layout) too;
 *   - weights that do not fit stay unpacked in the mapping, and compute the
 *     same function (within the two layouts' rounding);
 *   - an MoE bundle carries 2-bit expert copies that match its weights;
 *   - plan.json is applied at load; a plan-only load answers the plan and
 *     refuses to evaluate;
 *   - bad input: an unknown device or type, an output that is a file, a full
 *     disk (nothing half-written left), a file removed, shortened or
 *     altered, another format version, a draft of another vocabulary.
 */
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>

#include "convert/deploy.h"
#include "convert/quantize.h"
#include "core/checksum.h"
#include "core/flatjson.h"
#include "core/kernels/packed.h"
#include "core/quant.h"
#include "model/model.h"
#include "moe/int2.h"
#include "octo.h"
#include "runtime/bundle_dir.h"
#include "t.h"
#include "util.h"

#define N_TOK 24

static void check_flatjson(void) {
    char buf[512];
    flatjson_out o;
    flatjson_begin(&o, buf, sizeof buf);
    flatjson_u64(&o, "n", 18446744073709551615ull);
    flatjson_bool(&o, "b", true);
    flatjson_str(&o, "s", "a \"quoted\"\\ line\nand\ttab");
    const size_t n = flatjson_end(&o);
    T_EQ_INT(n, strlen(buf));
    err_t err = {0};
    T_EQ_INT(flatjson_check(buf, n, &err), ERR_OK);
    uint64_t v = 0;
    bool b = false;
    char s[64];
    T_CHECK(flatjson_get_u64(buf, n, "n", &v) && v == 18446744073709551615ull);
    T_CHECK(flatjson_get_bool(buf, n, "b", &b) && b);
    T_CHECK(flatjson_get_str(buf, n, "s", s, sizeof s) && !strcmp(s, "a \"quoted\"\\ line\nand\ttab"));
    T_CHECK(!flatjson_get_u64(buf, n, "missing", &v) && !flatjson_get_u64(buf, n, "s", &v));
    static const char frac[] = "{\"x\": 1.5, \"y\": 1e6, \"z\": -0.25e-3, \"w\": 7}";
    T_EQ_INT(flatjson_check(frac, strlen(frac), &err), ERR_OK);
    T_CHECK(!flatjson_get_u64(frac, strlen(frac), "x", &v) && !flatjson_get_u64(frac, strlen(frac), "y", &v));
    T_CHECK(flatjson_get_u64(frac, strlen(frac), "w", &v) && v == 7);
    static const char uni[] = "{\"s\": \"\\u0041\"}";
    T_CHECK(flatjson_check("{}", 2, &err) == ERR_OK && flatjson_check(uni, strlen(uni), &err) == ERR_OK);
    T_CHECK(flatjson_get_str(uni, strlen(uni), "s", s, sizeof s) && !strcmp(s, "A"));
    char small[8];
    flatjson_begin(&o, small, sizeof small);
    flatjson_str(&o, "key", "value");
    T_EQ_INT(flatjson_end(&o), n > 0 ? strlen("{\n  \"key\": \"value\"\n}\n") : 0); /* the length it needs */
    static const char *const bad[] = {"", "[]", "{", "{\"a\" 1}", "{\"a\": {\"b\": 1}}", "{\"a\": 1,}", "{\"a\": \"x}",
                                      "{\"a\": 1} x", "{\"a\": -}", "{\"a\": tru}", "{} x", "{\"a\": 1.2.3}",
                                      "{\"a\": +1}", "{\"a\": 1e}", "{\"a\": .5}", "{\"a\": \"\\q\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err_clear(&err);
        T_CHECKF(flatjson_check(bad[i], strlen(bad[i]), &err) == ERR_BAD_VALUE, "accepted: %s", bad[i]);
    }
}

static void check_checksum(void) {
    char path[512];
    tu_tmp_path(path, sizeof path, "sum.bin");
    const size_t n = (9u << 20) + 3; /* three chunks, the last one short */
    unsigned char *p = malloc(n);
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 2654435761u) >> 13);
    FILE *f = fopen(path, "wb");
    T_CHECK(f && fwrite(p, 1, n, f) == n);
    if (f) fclose(f);
    uint64_t h1 = 0, h2 = 0, h3 = 0, sz = 0;
    err_t err = {0};
    T_EQ_INT(checksum_file(path, &h1, &sz, &err), ERR_OK);
    T_EQ_INT(sz, n);
    T_EQ_INT(checksum_file(path, &h2, &sz, &err), ERR_OK);
    T_CHECK(h1 == h2);
    f = fopen(path, "r+b"); /* one bit, in the middle chunk */
    fseek(f, (long)(5u << 20), SEEK_SET);
    fputc(p[5u << 20] ^ 1, f);
    fclose(f);
    T_EQ_INT(checksum_file(path, &h3, &sz, &err), ERR_OK);
    T_CHECK(h3 != h1);
    T_CHECK(checksum_bytes(p, 100, 0) != checksum_bytes(p, 101, 0) && checksum_bytes(p, 100, 0) != checksum_bytes(p, 100, 1));
    T_EQ_INT(checksum_file("/nonexistent/x", &h1, &sz, &err), ERR_NOT_FOUND);
    unlink(path);
    free(p);
}

static void synth(const char *path, uint32_t type, int seed) {
    synth_opts o = synth_defaults();
    o.type = type, o.n_embd = 256, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 512, o.n_vocab = 320, o.n_layer = 2;
    o.n_ctx = 128, o.seed = (uint32_t)seed;
    err_t err = {0};
    T_CHECKF(synth_write(&o, path, &err) == ERR_OK, "%s", err.msg);
}

static err_code deploy(const char *model, const char *dir, const char *devices, const char *type, const char *draft,
                       err_t *err) {
    deploy_opts o = {.input = model, .output_dir = dir, .type = type, .draft = draft, .n_threads = 2};
    char names[128];
    snprintf(names, sizeof names, "%s", devices);
    for (char *t = strtok(names, ","); t; t = strtok(NULL, ",")) o.devices[o.n_devices++] = t;
    return deploy_run(&o, err);
}

/* Every row of logits of N_TOK fixed tokens and the greedy text of a prompt,
 * through the public API with the client's device; NULL logits on failure
 * (*why says it). */
static float *run_public(const char *path, const char *device, char *text, size_t tn, octo_model_info *info,
                         char *why, size_t wn) {
    octo_client_options co = octo_client_options_defaults();
    co.device = device;
    octo_client *c = octo_client_new(&co);
    octo_model_options mo = octo_model_options_defaults();
    mo.auto_draft = OCTO_DRAFT_NONE;
    octo_model *m = octo_load_model(c, path, &mo);
    float *rows = NULL;
    snprintf(why, wn, "%s", m ? "" : octo_last_error(c));
    if (m) {
        *info = octo_model_info_get(m);
        int32_t tok[N_TOK];
        for (int i = 0; i < N_TOK; i++) tok[i] = 1 + (i * 37 + 5) % (info->n_vocab - 1);
        rows = malloc(sizeof(float) * N_TOK * (size_t)info->n_vocab);
        T_EQ_INT(octo_eval(m, tok, N_TOK, rows, OCTO_LOGITS_ALL), OCTO_OK);
        octo_reset(m);
        octo_generate_params gp = octo_generate_params_defaults();
        gp.temperature = 0, gp.max_tokens = 16;
        octo_stream *s = octo_generate(m, "Once upon a time", &gp);
        text[0] = '\0';
        for (const char *piece; s && (piece = octo_stream_next(s));) strncat(text, piece, tn - strlen(text) - 1);
        octo_stream_free(s);
    }
    octo_model_free(m);
    octo_client_free(c);
    return rows;
}

static bool same_rows(const float *a, const float *b, int n_vocab) {
    return a && b && !memcmp(a, b, sizeof(float) * N_TOK * (size_t)n_vocab);
}

/* A bundle of this type for the host and a phone: same logits and text as the GGUF. */
static void check_type(uint32_t type) {
    char gguf[512], dir[512], path[700], why[256], t_gguf[512], t_bundle[512];
    const char *name = quant_traits_of(type)->name;
    tu_tmp_path(gguf, sizeof gguf, "model.gguf");
    tu_tmp_path(dir, sizeof dir, "bundle");
    synth(gguf, type, 7);
    err_t err = {0};
    T_CHECKF(deploy(gguf, dir, "host,pixel-8", NULL, NULL, &err) == ERR_OK, "[%s] %s", name, err.msg);
    octo_model_info ig, ib, ip;
    float *g = run_public(gguf, NULL, t_gguf, sizeof t_gguf, &ig, why, sizeof why);
    T_CHECKF(g, "[%s] %s", name, why);
    float *b = run_public(dir, NULL, t_bundle, sizeof t_bundle, &ib, why, sizeof why);
    T_CHECKF(b, "[%s] %s", name, why);
    T_CHECKF(same_rows(g, b, ig.n_vocab), "[%s] the host bundle's logits differ from the GGUF's", name);
    T_CHECKF(!strcmp(t_gguf, t_bundle) && strlen(t_gguf) > 0, "[%s] '%s' vs '%s'", name, t_gguf, t_bundle);
    const bool packs = packed_get(type) != NULL;
    T_CHECKF(!packs || strstr(ib.weights, "packed in the file"), "[%s] %s", name, ib.weights);
    /* the layout in the file is the one this build packs, and nothing is re-laid */
    model *mg = NULL, *mb = NULL;
    snprintf(path, sizeof path, "%s/host/%s", dir, BUNDLE_WEIGHTS);
    T_EQ_INT(model_open(gguf, &mg, &err), ERR_OK);
    T_EQ_INT(model_open(path, &mb, &err), ERR_OK);
    if (mg && mb) {
        T_CHECKF(mb->prepacked == packs && mb->packed_bytes == (packs ? model_packable_bytes(mg) : 0),
                 "[%s] prepacked %d, %llu bytes packed", name, mb->prepacked, (unsigned long long)mb->packed_bytes);
        T_CHECK(!packs || mb->layers[0].wq.packed);
    }
    model_free(mg);
    model_free(mb);
    /* the phone's folder against the GGUF planned for the same phone: the folder
     * packed when this host packs (the one layout of every path), the GGUF packed at load */
    free(g);
    g = run_public(gguf, "pixel-8", t_gguf, sizeof t_gguf, &ig, why, sizeof why);
    T_CHECKF(g, "[%s] %s", name, why);
    float *p = run_public(dir, "pixel-8", t_bundle, sizeof t_bundle, &ip, why, sizeof why);
    T_CHECKF(p, "[%s] %s", name, why);
    T_CHECKF(same_rows(g, p, ig.n_vocab) && !strcmp(t_gguf, t_bundle), "[%s] the phone's folder differs", name);
    T_CHECKF(strstr(ip.weights, packs ? "packed in the file" : "read-only"), "[%s] %s", name, ip.weights);
    T_CHECKF(!packs || strstr(ig.weights, "pixel-8's NEON kernels"), "[%s] %s", name, ig.weights);
    free(g), free(b), free(p);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    T_EQ_INT(system(path), 0);
    unlink(gguf);
}

/* Weights that do not fit stay in the GGUF layout, read-only: the same
 * function within the two kernels' rounding. */
static void check_mapped(void) {
    char gguf[512];
    tu_tmp_path(gguf, sizeof gguf, "mapped.gguf");
    synth(gguf, QT_Q4_0, 9);
    err_t err = {0};
    bundle *big = NULL, *small = NULL;
    bundle_options o = {.kv = kv_config_plain(QT_F32), .moe = moe_cache_config_default(), .auto_draft = BUNDLE_DRAFT_NONE};
    T_EQ_INT(plan_device_of(NULL, NULL, PLAN_SPILL_OFF, &o.dev, &err), ERR_OK);
    T_EQ_INT(bundle_load(gguf, &o, &big, &err), ERR_OK);
    o.dev.mem_available = 64u << 20; /* less than the weights and the margin */
    T_EQ_INT(bundle_load(gguf, &o, &small, &err), ERR_OK);
    if (big && small) {
        T_CHECKF(small->m->packed_bytes == 0 && !small->weights_packed && strstr(small->weights_reason, "read-only"),
                 "%s", small->weights_reason);
        T_CHECK(big->m->packed_bytes == (packed_get(QT_Q4_0) ? model_packable_bytes(small->m) : 0));
        const int nv = big->m->hp.n_vocab;
        int32_t tok[N_TOK];
        for (int i = 0; i < N_TOK; i++) tok[i] = 1 + (i * 29 + 3) % (nv - 1);
        float *a = malloc(sizeof(float) * N_TOK * (size_t)nv), *c = malloc(sizeof(float) * N_TOK * (size_t)nv);
        T_EQ_INT(session_eval(big->s, tok, N_TOK, true, a, &err), ERR_OK);
        T_EQ_INT(session_eval(small->s, tok, N_TOK, true, c, &err), ERR_OK);
        double worst = 0, scale = 0;
        int agree = 0;
        for (int t = 0; t < N_TOK; t++) {
            int ia = 0, ic = 0;
            for (int v = 0; v < nv; v++) {
                const double d = fabs(a[t * nv + v] - c[t * nv + v]);
                worst = d > worst ? d : worst;
                scale = fabs(a[t * nv + v]) > scale ? fabs(a[t * nv + v]) : scale;
                if (a[t * nv + v] > a[t * nv + ia]) ia = v;
                if (c[t * nv + v] > c[t * nv + ic]) ic = v;
            }
            agree += ia == ic;
        }
        T_CHECKF(worst <= 1e-3 * scale && agree >= N_TOK - 1, "max diff %.3g of %.3g, argmax %d/%d", worst, scale,
                 agree, N_TOK);
        free(a), free(c);
    }
    bundle_free(big);
    bundle_free(small);
    unlink(gguf);
}

/* An MoE model: its bundle carries the 2-bit copies, which match the bundle's
 * weights, and computes what the GGUF computes. */
static void check_moe(void) {
    char gguf[512], dir[512], path[700], why[256], t1[256], t2[256];
    tu_tmp_path(gguf, sizeof gguf, "moe.gguf");
    tu_tmp_path(dir, sizeof dir, "moeb");
    synth_opts o = synth_defaults();
    o.type = QT_Q4_0, o.n_embd = 256, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 256, o.n_vocab = 320, o.n_layer = 2;
    o.n_ctx = 128, o.seed = 17, o.n_expert = 4, o.n_expert_used = 2;
    err_t err = {0};
    T_EQ_INT(synth_write(&o, gguf, &err), ERR_OK);
    T_CHECKF(deploy(gguf, dir, "host", NULL, NULL, &err) == ERR_OK, "%s", err.msg);
    bundle_manifest man;
    snprintf(path, sizeof path, "%s/host", dir);
    T_EQ_INT(bundle_manifest_check(path, &man, &err), ERR_OK);
    bool listed = false;
    for (int i = 0; i < man.n_files; i++) listed = listed || !strcmp(man.files[i].name, BUNDLE_WEIGHTS ".int2");
    T_CHECK(listed);
    snprintf(path, sizeof path, "%s/host/%s", dir, BUNDLE_WEIGHTS);
    model *m = NULL;
    moe_int2 *s2 = NULL;
    T_EQ_INT(model_open(path, &m, &err), ERR_OK);
    if (m) T_CHECKF(moe_int2_open(m, path, &s2, &err) == ERR_OK, "%s", err.msg);
    moe_int2_close(s2);
    model_free(m);
    octo_model_info ig, ib;
    float *g = run_public(gguf, NULL, t1, sizeof t1, &ig, why, sizeof why);
    float *b = run_public(dir, NULL, t2, sizeof t2, &ib, why, sizeof why);
    T_CHECKF(g && b && same_rows(g, b, ig.n_vocab) && !strcmp(t1, t2), "MoE bundle: %s", why);
    free(g), free(b);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    T_EQ_INT(system(path), 0);
    unlink(gguf);
}

/* A bundle with a draft: loaded with it by default, without it when the
 * caller says no draft (options the caller set win over plan.json). */
static void check_draft(void) {
    char gguf[512], draft[512], dir[512], cmd[700];
    tu_tmp_path(gguf, sizeof gguf, "dtarget.gguf");
    tu_tmp_path(draft, sizeof draft, "ddraft.gguf");
    tu_tmp_path(dir, sizeof dir, "draftb");
    synth(gguf, QT_Q8_0, 21);
    synth_opts o = synth_defaults();
    o.type = QT_Q4_0, o.n_embd = 256, o.n_head = 4, o.n_head_kv = 2, o.n_ff = 256, o.n_vocab = 320, o.n_layer = 1;
    o.n_ctx = 128, o.seed = 22;
    err_t err = {0};
    T_EQ_INT(synth_write(&o, draft, &err), ERR_OK);
    T_CHECKF(deploy(gguf, dir, "host", NULL, draft, &err) == ERR_OK, "%s", err.msg);
    bundle_options bo = {.kv = kv_config_default(), .moe = moe_cache_config_default(), .plan_only = true};
    T_EQ_INT(plan_device_of(NULL, NULL, PLAN_SPILL_AUTO, &bo.dev, &err), ERR_OK);
    bundle *b = NULL;
    T_EQ_INT(bundle_load_path(dir, NULL, &bo, &b, &err), ERR_OK);
    T_CHECKF(b && b->draft_m && strstr(b->plan.spec_reason, "draft.octo"), "%s", b ? b->plan.spec_reason : err.msg);
    bundle_free(b);
    bo.auto_draft = BUNDLE_DRAFT_NONE;
    T_EQ_INT(bundle_load_path(dir, NULL, &bo, &b, &err), ERR_OK);
    T_CHECK(b && !b->draft_m);
    bundle_free(b);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    T_EQ_INT(system(cmd), 0);
    unlink(gguf), unlink(draft);
}

/* plan.json applied at load (a budget written into it, the manifest made
 * again); a plan-only load answers the plan and refuses to evaluate. */
static void check_plan(void) {
    char gguf[512], dir[512], folder[600], path[700], why[256], text[256];
    tu_tmp_path(gguf, sizeof gguf, "plan.gguf");
    tu_tmp_path(dir, sizeof dir, "planb");
    synth(gguf, QT_Q8_0, 11);
    err_t err = {0};
    T_EQ_INT(deploy(gguf, dir, "android-4gb-emmc", NULL, NULL, &err), ERR_OK);
    snprintf(folder, sizeof folder, "%s/android-4gb-emmc", dir);
    snprintf(path, sizeof path, "%s/%s", folder, BUNDLE_PLAN);
    size_t n = 0;
    char *json = (char *)tu_read_file(path, &n);
    T_CHECK(json && flatjson_check(json, n, &err) == ERR_OK);
    char dev[64] = "";
    uint64_t budget = 1;
    T_CHECK(json && flatjson_get_str(json, n, "device", dev, sizeof dev) && !strcmp(dev, "android-4gb-emmc"));
    T_CHECK(json && flatjson_get_u64(json, n, "kv_budget_bytes", &budget) && budget == 0); /* a tiny model: none */
    free(json);
    char buf[4096];
    flatjson_out o; /* the plan with a budget, as a deploy for a smaller device would write it */
    flatjson_begin(&o, buf, sizeof buf);
    flatjson_u64(&o, "octo_plan", 1);
    flatjson_u64(&o, "n_ctx", 96);
    flatjson_u64(&o, "kv_budget_bytes", 400000);
    flatjson_str(&o, "draft", "none");
    FILE *f = fopen(path, "w");
    T_CHECK(f && fwrite(buf, 1, flatjson_end(&o), f) == o.len);
    if (f) fclose(f);
    bundle_manifest man;
    T_CHECKF(bundle_manifest_check(folder, &man, &err) == ERR_CORRUPT && strstr(err.msg, "plan.json"), "%s", err.msg);
    err_clear(&err);
    T_EQ_INT(bundle_manifest_write(folder, &man, &err), ERR_OK);
    octo_model_info in;
    float *rows = run_public(dir, "android-4gb-emmc", text, sizeof text, &in, why, sizeof why);
    T_CHECKF(rows, "%s", why);
    T_CHECKF(in.n_ctx == 96 && in.kv_budget_bytes == 400000, "n_ctx %d, budget %llu", in.n_ctx,
             (unsigned long long)in.kv_budget_bytes);
    free(rows);
    /* plan only */
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.plan_only = 1;
    octo_model *m = octo_load_model(c, gguf, &mo);
    T_CHECKF(m, "%s", octo_last_error(c));
    if (m) {
        const int need = octo_model_plan_json(m, NULL, 0);
        char *pj = malloc((size_t)need + 1);
        T_EQ_INT(octo_model_plan_json(m, pj, need + 1), need);
        bool packed = false;
        T_CHECK(flatjson_check(pj, (size_t)need, &err) == ERR_OK &&
                flatjson_get_bool(pj, (size_t)need, "weights_packed", &packed) && packed == (packed_get(QT_Q8_0) != NULL));
        free(pj);
        float l[320];
        int32_t t = 5;
        T_EQ_INT(octo_eval(m, &t, 1, l, OCTO_LOGITS_LAST), OCTO_ERR_INVALID_ARG);
        T_CHECK(strstr(octo_model_error(m), "plan only") != NULL);
        T_CHECK(octo_generate(m, "Once", NULL) == NULL);
    }
    octo_model_free(m);
    octo_client_free(c);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    T_EQ_INT(system(path), 0);
    unlink(gguf);
}

/* Names in dir (none starting with '.' may be left: temporaries). */
static int entries(const char *dir, bool *hidden) {
    DIR *d = opendir(dir);
    int n = 0;
    *hidden = false;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++, *hidden = *hidden || e->d_name[0] == '.';
    if (d) closedir(d);
    return n;
}

static void check_bad_writes(const char *gguf, const char *dir) {
    err_t err = {0};
    bool hidden;
    T_CHECKF(deploy(gguf, dir, "host,nokia-3310", NULL, NULL, &err) == ERR_INVALID_ARG && strstr(err.msg, "nokia"),
             "%s", err.msg);
    err_clear(&err);
    T_CHECKF(deploy(gguf, dir, "host", "q9_9", NULL, &err) == ERR_INVALID_ARG && strstr(err.msg, "q9_9"), "%s", err.msg);
    err_clear(&err);
    T_CHECKF(deploy(gguf, gguf, "host", NULL, NULL, &err) != ERR_OK && strstr(err.msg, "not a folder"), "%s", err.msg);
    err_clear(&err);
    T_CHECK(entries(dir, &hidden) == 0); /* nothing written by the refused runs (dir may not exist) */
    /* a full disk: files limited to 64 KiB; the weights cannot be written */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 64 << 10;
    T_EQ_INT(setrlimit(RLIMIT_FSIZE, &lim), 0);
    const err_code rc = deploy(gguf, dir, "host", NULL, NULL, &err);
    setrlimit(RLIMIT_FSIZE, &old);
    T_CHECKF(rc != ERR_OK, "a deploy beyond the file size limit succeeded");
    T_CHECKF(entries(dir, &hidden) == 0, "left behind in %s after: %s", dir, err.msg);
    err_clear(&err);
    /* another draft's vocabulary: refused, nothing left */
    char other[512];
    tu_tmp_path(other, sizeof other, "other.gguf");
    synth_opts so = synth_defaults();
    so.n_vocab = 300;
    T_EQ_INT(synth_write(&so, other, &err), ERR_OK);
    T_CHECKF(deploy(gguf, dir, "host", NULL, other, &err) != ERR_OK && strstr(err.msg, "vocabulary"), "%s", err.msg);
    T_CHECK(entries(dir, &hidden) == 0);
    unlink(other);
}

static void check_bad_bundles(const char *gguf, const char *dir) {
    err_t err = {0};
    char path[700], folder[600], why[256], text[64];
    octo_model_info in;
    T_EQ_INT(deploy(gguf, dir, "host", NULL, NULL, &err), ERR_OK);
    T_EQ_INT(deploy(gguf, dir, "host", NULL, NULL, &err), ERR_OK); /* again: replaces it, nothing else left */
    bool hidden;
    T_CHECK(entries(dir, &hidden) == 1 && !hidden);
    snprintf(folder, sizeof folder, "%s/host", dir);
    float *r = run_public(dir, "pixel-8", text, sizeof text, &in, why, sizeof why);
    T_CHECKF(!r && strstr(why, "no folder for device pixel-8"), "%s", why);
    free(r);
    /* altered: one byte of the weights */
    snprintf(path, sizeof path, "%s/%s", folder, BUNDLE_WEIGHTS);
    FILE *f = fopen(path, "r+b");
    fseek(f, -100, SEEK_END);
    const int ch = fgetc(f);
    fseek(f, -100, SEEK_END);
    fputc(ch ^ 0x40, f);
    fclose(f);
    r = run_public(dir, NULL, text, sizeof text, &in, why, sizeof why);
    T_CHECKF(!r && strstr(why, "fails its checksum"), "%s", why);
    free(r);
    /* shortened */
    T_EQ_INT(truncate(path, 4096), 0);
    r = run_public(dir, NULL, text, sizeof text, &in, why, sizeof why);
    T_CHECKF(!r && strstr(why, "manifest says"), "%s", why);
    free(r);
    /* removed */
    unlink(path);
    r = run_public(dir, NULL, text, sizeof text, &in, why, sizeof why);
    T_CHECKF(!r && strstr(why, "missing"), "%s", why);
    free(r);
    /* another format version */
    snprintf(path, sizeof path, "%s/%s", folder, BUNDLE_MANIFEST);
    f = fopen(path, "w");
    fputs("octo-bundle 99\ndevice host\n", f);
    fclose(f);
    r = run_public(dir, NULL, text, sizeof text, &in, why, sizeof why);
    T_CHECKF(!r && strstr(why, "format 99"), "%s", why);
    free(r);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    T_EQ_INT(system(path), 0);
}

/* The manifest reader on text (what fuzz_parsers feeds it): a good one whole,
 * then a NUL, an over-long line, another format and a path in a name refused. */
static void check_manifest_parse(void) {
    const char good[] = "octo-bundle 1\ndevice host\ncpu avx512\nlayout gguf\nsource 10 00000000000000ff m.gguf\n"
                        "file weights.octo 12 0000000000000abc\nfile plan.json 3 0000000000000001\n";
    bundle_manifest m;
    err_t err = {0};
    T_EQ_INT(bundle_manifest_parse(good, sizeof good - 1, &m, &err), ERR_OK);
    T_EQ_INT(m.n_files, 2);
    T_CHECK(!strcmp(m.device, "host") && !strcmp(m.files[0].name, "weights.octo") && m.files[0].size == 12 &&
            m.files[0].hash == 0xabc && m.source_size == 10 && !strcmp(m.source, "m.gguf"));
    T_EQ_INT(bundle_manifest_parse(good, 20, &m, &err), ERR_CORRUPT); /* cut inside a line */
    char bad[1024];
    memcpy(bad, good, sizeof good);
    bad[30] = '\0';
    T_EQ_INT(bundle_manifest_parse(bad, sizeof good - 1, &m, &err), ERR_CORRUPT);
    T_CHECKF(strstr(err.msg, "NUL") != NULL, "%s", err.msg);
    snprintf(bad, sizeof bad, "octo-bundle 1\ndevice %0600d\n", 7);
    T_EQ_INT(bundle_manifest_parse(bad, strlen(bad), &m, &err), ERR_CORRUPT);
    T_EQ_INT(bundle_manifest_parse("octo-bundle 9\n", 14, &m, &err), ERR_UNSUPPORTED);
    T_EQ_INT(bundle_manifest_parse("octo-bundle 1\nfile ../x 1 1\n", 29, &m, &err), ERR_CORRUPT);
    T_EQ_INT(bundle_manifest_parse("", 0, &m, &err), ERR_CORRUPT);
}

int main(void) {
    check_manifest_parse();
    check_flatjson();
    check_checksum();
    const uint32_t types[] = {QT_Q4_0, QT_Q8_0, QT_Q4_K};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) check_type(types[i]);
    check_mapped();
    check_moe();
    check_draft();
    check_plan();
    char gguf[512], dir[512];
    tu_tmp_path(gguf, sizeof gguf, "bad.gguf");
    tu_tmp_path(dir, sizeof dir, "badb");
    synth(gguf, QT_Q4_0, 13);
    check_bad_writes(gguf, dir);
    check_bad_bundles(gguf, dir);
    rmdir(dir);
    unlink(gguf);
    T_DONE();
}
