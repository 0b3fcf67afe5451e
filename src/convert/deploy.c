/*
 * deploy — see deploy.h.
 */
#include "deploy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "convert/quantize.h"
#include "core/checksum.h"
#include "core/flatjson.h"
#include "core/gguf.h"
#include "core/kernels/kernels.h"
#include "core/kernels/packed.h"
#include "core/quant.h"
#include "core/tempfiles.h"
#include "model/model.h"
#include "moe/int2.h"
#include "platform/file.h"
#include "runtime/bundle.h"
#include "runtime/bundle_dir.h"
#include "runtime/device.h"

#define PATH_CAP 4096

static void say(const deploy_opts *o, const char *fmt, const char *a, const char *b) {
    char msg[2 * PATH_CAP + 256];
    if (!o->progress) return;
    snprintf(msg, sizeof msg, fmt, a, b);
    o->progress(o->progress_ctx, msg);
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

/* Are bundles written in the packed layout? The layout is one for every path
 * that packs (AVX2, AVX-512, NEON with or without SDOT: packed.h), and so are
 * the types packed, so the host writes it for itself and for every profile
 * (each an AArch64 phone) alike when its own path packs; a host that does not
 * (OCTO_CPU=scalar, OCTO_PACK=0) writes the GGUF layout, which every path
 * also reads. */
static bool writes_packed(void) { return packed_get(QT_Q4_0) != NULL; }

/* ---- a model file in a device's layout ---- */

typedef struct {
    const gguf_ctx *g;
} copy_ctx;

static err_code fill(void *user, uint64_t index, void *buf, uint64_t n_bytes, err_t *err) {
    const copy_ctx *c = user;
    (void)err;
    memcpy(buf, c->g->tensors[index].data, (size_t)n_bytes);
    return ERR_OK;
}

/* The layout keys: the packed types among the file's tensors, the bytes packed. */
static err_code layout_keys(gguf_writer *w, const model *m) {
    int32_t types[QT_COUNT];
    uint64_t n = 0;
    bool seen[QT_COUNT] = {false};
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const uint32_t t = m->gguf->tensors[i].type;
        if (t < QT_COUNT && !seen[t] && packed_get(t)) seen[t] = true, types[n++] = (int32_t)t;
    }
    err_code rc = gguf_writer_set_str(w, MODEL_LAYOUT_KEY, MODEL_LAYOUT_PACKED);
    if (!rc) rc = gguf_writer_set_arr_i32(w, MODEL_LAYOUT_KEY ".types", types, n);
    if (!rc) rc = gguf_writer_set_u64(w, MODEL_LAYOUT_KEY ".bytes", m->packed_bytes);
    return rc;
}

/* src rewritten at dst with its matrices packed (packed) or as they are. */
static err_code write_model(const char *src, const char *dst, bool packed, err_t *err) {
    model *m = NULL;
    err_code rc = model_open(src, &m, err);
    if (rc) return rc;
    const uint64_t want = packed ? model_packable_bytes(m) : 0;
    if (packed) model_pack(m);
    if (m->packed_bytes != want) { /* a mapping that could not be made writable, or memory short mid-way */
        err_set(err, ERR_NOMEM, "%s: %llu of %llu bytes could be packed", src, (unsigned long long)m->packed_bytes,
                (unsigned long long)want);
        model_free(m);
        return ERR_NOMEM;
    }
    const gguf_ctx *g = m->gguf;
    gguf_writer *w = gguf_writer_new();
    if (!w) rc = err_set(err, ERR_NOMEM, "out of memory");
    uint32_t align;
    if (!rc && gguf_get_u32(g, "general.alignment", &align)) gguf_writer_set_alignment(w, align);
    for (uint64_t i = 0; !rc && i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, "general.alignment") && strncmp(g->kv[i].key, MODEL_LAYOUT_KEY, strlen(MODEL_LAYOUT_KEY)))
            rc = gguf_writer_set_value(w, g->kv[i].key, &g->kv[i].value);
    if (!rc && m->packed_bytes) rc = layout_keys(w, m);
    if (!rc) rc = gguf_writer_set_str(w, "octo.deploy.source", base_name(src));
    if (rc && !err->code) err_set(err, rc, "out of memory");
    for (uint64_t i = 0; !rc && i < g->n_tensors; i++)
        rc = gguf_writer_add_tensor(w, g->tensors[i].name, g->tensors[i].type, g->tensors[i].n_dims, g->tensors[i].ne,
                                    NULL, err);
    copy_ctx c = {g};
    if (!rc) rc = gguf_writer_write(w, dst, fill, &c, err);
    gguf_writer_free(w);
    model_free(m);
    return rc;
}

/* An MoE model's 2-bit copies beside weights, the source's measured cost kept. */
static err_code write_int2(const char *source, const char *weights, err_t *err) {
    model *m = NULL, *sm = NULL;
    char why[160];
    err_code rc = model_open(weights, &m, err);
    if (rc || m->hp.n_expert <= 0 || !moe_int2_applicable(m, why, sizeof why)) {
        model_free(m);
        return rc;
    }
    if (!(rc = moe_int2_build(m, weights, err))) {
        moe_int2 *s = NULL;
        err_t e2 = {0};
        if (!model_open(source, &sm, &e2) && !moe_int2_open(sm, source, &s, &e2) && moe_int2_kld(s) >= 0.0)
            rc = moe_int2_set_kld(weights, moe_int2_kld(s), 0, err);
        moe_int2_close(s);
    }
    model_free(sm);
    model_free(m);
    return rc;
}

/* ---- the plan ---- */

/* A plan-only load of model (with draft, or deciding one when NULL and
 * auto) for device: its JSON into *json (malloc'd), whether it drafts and
 * with which kind ("model" found beside, "self"). */
static err_code plan_for(const char *model_path, const char *draft, bool auto_draft, const char *device,
                         const char *reason, char **json, char *kind, size_t kn, err_t *err) {
    bundle_options bo = {.kv = kv_config_default(), .moe = moe_cache_config_default(), .plan_only = true,
                         .draft_model = draft, .auto_draft = auto_draft ? BUNDLE_DRAFT_AUTO : BUNDLE_DRAFT_NONE};
    err_code rc = plan_device_of(device, NULL, PLAN_SPILL_AUTO, &bo.dev, err);
    bundle *b = NULL;
    if (!rc) rc = bundle_load(model_path, &bo, &b, err);
    if (rc) return rc;
    if (reason) snprintf(b->plan.spec_reason, sizeof b->plan.spec_reason, "%s", reason);
    const size_t n = bundle_plan_json(b, &bo.dev, NULL, 0) + 1;
    if (!(*json = malloc(n))) rc = err_set(err, ERR_NOMEM, "out of memory");
    else bundle_plan_json(b, &bo.dev, *json, n);
    snprintf(kind, kn, "%s", !bundle_draft_shape(b) ? "none" : b->draft_self ? "self" : "model");
    bundle_free(b);
    return rc;
}

static err_code write_text(const char *path, const char *text, err_t *err) {
    FILE *f = fopen(path, "w");
    if (!f) return err_set(err, errno == ENOSPC ? ERR_NO_SPACE : ERR_IO, "%s: %s", path, strerror(errno));
    const size_t n = strlen(text);
    const bool ok = fwrite(text, 1, n, f) == n;
    if (fclose(f) != 0 || !ok) return err_set(err, errno == ENOSPC ? ERR_NO_SPACE : ERR_IO, "%s: write failed", path);
    return ERR_OK;
}

/* ---- one device's folder ---- */

typedef struct {
    const deploy_opts *o;
    const char *source;       /* the model to lay out (the input, or its --type copy) */
    char self_draft[PATH_CAP + 32];
    char beside[PATH_CAP];     /* NAME.draft.gguf beside the input *//* the Q4_0 copy, made once when a plan wants it ("" until then) */
    char tmp_prefix[PATH_CAP]; /* DIR/.octo-deploy-PID */
    char self_draft_name[PATH_CAP + 32]; /* DIR/.octo-deploy-PID-selfdraft.gguf, where a self-draft is made */
    uint64_t source_size, source_hash;
} deploy_ctx;

/* Remove a folder this run made or took over, links unfollowed; a part that
 * stays is said (the new bundle is in place either way). */
static void remove_folder(const deploy_opts *o, const char *dir) {
    const int e = tempfiles_remove_tree(dir);
    if (e) say(o, "deploy: warning: %s could not be removed whole (%s): remove it by hand", dir, strerror(e));
}

/* Which draft the device's folder gets: the one given, the one beside the
 * model, the self-draft when the plan for this device finds it pays, or none. */
static err_code choose_draft(deploy_ctx *c, const char *device, const char **draft, char *why, size_t wn,
                             err_t *err) {
    const deploy_opts *o = c->o;
    char *beside = c->beside;
    *draft = o->draft;
    snprintf(why, wn, "draft %.200s (given to octo deploy)", o->draft ? base_name(o->draft) : "");
    if (*draft) return ERR_OK;
    bundle_draft_beside(o->input, beside, sizeof c->beside);
    model *bm = NULL;
    err_t berr = {0};
    const bool usable = access(beside, R_OK) == 0 && model_open(beside, &bm, &berr) == ERR_OK && !bm->prepacked;
    model_free(bm);
    if (usable) {
        *draft = beside;
        snprintf(why, wn, "draft %.200s (found beside the model by octo deploy)", base_name(beside));
        return ERR_OK;
    }
    char *json = NULL, kind[16];
    err_code rc = plan_for(c->source, NULL, true, device, NULL, &json, kind, sizeof kind, err);
    if (!rc) flatjson_get_str(json, strlen(json), "draft_reason", why, wn);
    free(json);
    if (rc || strcmp(kind, "self")) return rc;
    if (!c->self_draft[0]) {
        quantize_opts q = {.input = o->input, .type = "q4_0", .n_threads = o->n_threads};
        quantize_report rep;
        snprintf(c->self_draft, sizeof c->self_draft, "%s", c->self_draft_name); /* not "beside" the source */
        q.output = c->self_draft;
        say(o, "deploy: a Q4_0 self-draft of %s%s", o->input, "");
        if ((rc = quantize_run(&q, &rep, err))) {
            c->self_draft[0] = '\0';
            return rc;
        }
    }
    *draft = c->self_draft;
    return ERR_OK;
}

/* The folder's files under tmp, the manifest last. */
static err_code fill_folder(deploy_ctx *c, const char *device, const char *tmp, err_t *err) {
    const bool packed = writes_packed();
    char path[2 * PATH_CAP], draft_path[2 * PATH_CAP], *json = NULL, kind[16];
    bundle_manifest man = {.n_files = 0, .source_size = c->source_size, .source_hash = c->source_hash};
    snprintf(man.device, sizeof man.device, "%s", device);
    snprintf(man.cpu, sizeof man.cpu, "%s", !strcmp(device, "host") ? cpu_path_name(kernels_path()) : "neon");
    snprintf(man.layout, sizeof man.layout, "%s", packed ? MODEL_LAYOUT_PACKED : "gguf");
    snprintf(man.source, sizeof man.source, "%s", base_name(c->o->input));
    snprintf(path, sizeof path, "%s/%s", tmp, BUNDLE_WEIGHTS);
    say(c->o, "deploy: %s: weights in the %s layout", device, man.layout);
    err_code rc = write_model(c->source, path, packed, err);
    snprintf(man.files[man.n_files++].name, sizeof man.files[0].name, "%s", BUNDLE_WEIGHTS);
    const char *draft = NULL;
    char why[256] = "";
    if (!rc) rc = choose_draft(c, device, &draft, why, sizeof why, err);
    snprintf(draft_path, sizeof draft_path, "%s/%s", tmp, BUNDLE_DRAFT);
    if (!rc && draft) {
        say(c->o, "deploy: %s: draft from %s", device, draft);
        rc = write_model(draft, draft_path, packed, err);
        snprintf(man.files[man.n_files++].name, sizeof man.files[0].name, "%s", BUNDLE_DRAFT);
    }
    if (!rc) rc = write_int2(c->source, path, err);
    snprintf(path, sizeof path, "%s/%s.int2", tmp, BUNDLE_WEIGHTS);
    if (!rc && access(path, F_OK) == 0)
        snprintf(man.files[man.n_files++].name, sizeof man.files[0].name, "%s.int2", BUNDLE_WEIGHTS);
    snprintf(path, sizeof path, "%s/%s", tmp, BUNDLE_WEIGHTS);
    if (!rc) rc = plan_for(path, draft ? draft_path : NULL, false, device, why, &json, kind, sizeof kind, err);
    snprintf(path, sizeof path, "%s/%s", tmp, BUNDLE_PLAN);
    if (!rc) rc = write_text(path, json, err);
    free(json);
    snprintf(man.files[man.n_files++].name, sizeof man.files[0].name, "%s", BUNDLE_PLAN);
    if (!rc) rc = bundle_manifest_write(tmp, &man, err);
    return rc;
}

/* The old bundle's folder out of the way, the new one in: one exchange where
 * the file system has it (never no folder), else two renames. */
static err_code swap_in(deploy_ctx *c, const char *tmp, const char *final, const char *old, err_t *err) {
    if (plat_rename_exchange(tmp, final) == 0) {
        remove_folder(c->o, tmp); /* the old bundle, now under the temporary name */
        return ERR_OK;
    }
    const int slot = tempfiles_add(old);
    err_code rc = ERR_OK;
    if (rename(final, old) != 0) rc = err_set(err, ERR_IO, "%s: %s", final, strerror(errno));
    if (!rc && rename(tmp, final) != 0) {
        rc = err_set(err, ERR_IO, "%s: %s", final, strerror(errno));
        rename(old, final);
    }
    if (!rc) remove_folder(c->o, old);
    tempfiles_forget(slot);
    return rc;
}

/* DIR/device written under a temporary name, then renamed over any old one. */
static err_code deploy_device(deploy_ctx *c, const char *device, err_t *err) {
    char tmp[PATH_CAP + 64], final[PATH_CAP + 64], old[PATH_CAP + 64];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp-%ld", c->o->output_dir, device, (long)getpid());
    snprintf(final, sizeof final, "%s/%s", c->o->output_dir, device);
    snprintf(old, sizeof old, "%s/.%s.old-%ld", c->o->output_dir, device, (long)getpid());
    if (mkdir(tmp, 0755) != 0)
        return err_set(err, errno == ENOSPC ? ERR_NO_SPACE : ERR_IO, "%s: %s", tmp, strerror(errno));
    const int slot = tempfiles_add(tmp); /* an interrupt removes the half-made folder */
    err_code rc = fill_folder(c, device, tmp, err);
    struct stat st;
    const bool had = !rc && lstat(final, &st) == 0;
    if (had) rc = swap_in(c, tmp, final, old, err);
    else if (!rc && rename(tmp, final) != 0) rc = err_set(err, ERR_IO, "%s: %s", final, strerror(errno));
    if (rc) remove_folder(c->o, tmp);
    tempfiles_forget(slot);
    return rc;
}

/* An existing DIR/NAME is replaced only if it is a bundle's own folder: a
 * real folder (not a link to one) with a manifest. */
static err_code check_targets(const deploy_opts *o, err_t *err) {
    for (int i = 0; i < o->n_devices; i++) {
        char final[PATH_CAP + 64], man[PATH_CAP + 128];
        struct stat st;
        snprintf(final, sizeof final, "%s/%s", o->output_dir, o->devices[i]);
        snprintf(man, sizeof man, "%s/%s", final, BUNDLE_MANIFEST);
        if (lstat(final, &st) != 0) continue;
        if (S_ISLNK(st.st_mode))
            return err_set(err, ERR_INVALID_ARG,
                           "%s is a symbolic link: octo replaces only a bundle folder itself, never what a link "
                           "points at",
                           final);
        if (!S_ISDIR(st.st_mode) || lstat(man, &st) != 0 || !S_ISREG(st.st_mode))
            return err_set(err, ERR_INVALID_ARG, "%s exists and is not an octo bundle: remove it or deploy elsewhere",
                           final);
    }
    return ERR_OK;
}

/* Everything that can be checked before writing. */
static err_code check_opts(const deploy_opts *o, err_t *err) {
    if (!o->input || !o->output_dir || o->n_devices < 1 || o->n_devices > DEPLOY_MAX_DEVICES)
        return err_set(err, ERR_INVALID_ARG, "deploy needs a model, an output folder and 1 to %d devices",
                       DEPLOY_MAX_DEVICES);
    for (int i = 0; i < o->n_devices; i++) {
        if (strcmp(o->devices[i], "host") && !device_find(o->devices[i]))
            return err_set(err, ERR_INVALID_ARG, "unknown device '%s' (known: host, %s)", o->devices[i], device_names());
        for (int j = 0; j < i; j++)
            if (!strcmp(o->devices[i], o->devices[j]))
                return err_set(err, ERR_INVALID_ARG, "device '%s' is named twice", o->devices[i]);
    }
    if (o->type && quantize_type_of(o->type) < 0) {
        quantize_opts q = {.type = o->type};
        quantize_report rep;
        return quantize_run(&q, &rep, err); /* its message names the types */
    }
    const char *files[2] = {o->input, o->draft};
    err_code rc = ERR_OK;
    for (int i = 0; i < 2 && !rc && files[i]; i++) {
        model *m = NULL;
        rc = model_open(files[i], &m, err);
        if (!rc && m->prepacked) rc = err_set(err, ERR_INVALID_ARG, "%s is already a deployed file: give its GGUF", files[i]);
        model_free(m);
    }
    return rc;
}

/* The output folder, made if missing, and writable. */
static err_code output_folder(const char *dir, err_t *err) {
    struct stat st;
    if (stat(dir, &st) != 0 && mkdir(dir, 0755) != 0)
        return err_set(err, ERR_IO, "cannot create %s: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return err_set(err, ERR_INVALID_ARG, "%s is not a folder", dir);
    if (access(dir, W_OK | X_OK) != 0) return err_set(err, ERR_IO, "%s is not writable: %s", dir, strerror(errno));
    return ERR_OK;
}

err_code deploy_run(const deploy_opts *o, err_t *err) {
    err_code rc = check_opts(o, err);
    if (!rc) rc = output_folder(o->output_dir, err);
    if (!rc) rc = check_targets(o, err);
    if (rc) return rc;
    deploy_ctx c = {.o = o, .source = o->input};
    snprintf(c.tmp_prefix, sizeof c.tmp_prefix, "%s/.octo-deploy-%ld", o->output_dir, (long)getpid());
    char quantized[PATH_CAP + 16];
    snprintf(quantized, sizeof quantized, "%s.gguf", c.tmp_prefix);
    snprintf(c.self_draft_name, sizeof c.self_draft_name, "%s-selfdraft.gguf", c.tmp_prefix);
    const int slots[2] = {tempfiles_add(quantized), tempfiles_add(c.self_draft_name)};
    rc = checksum_file(o->input, &c.source_hash, &c.source_size, err);
    if (!rc && o->type) {
        quantize_opts q = {.input = o->input, .output = quantized, .type = o->type, .n_threads = o->n_threads};
        quantize_report rep;
        say(o, "deploy: quantizing %s to %s", o->input, o->type);
        rc = quantize_run(&q, &rep, err);
        c.source = quantized;
    }
    for (int i = 0; !rc && i < o->n_devices; i++) {
        rc = deploy_device(&c, o->devices[i], err);
        if (rc) err_prefix(err, "device %s", o->devices[i]);
    }
    if (o->type) unlink(quantized);
    if (c.self_draft[0]) unlink(c.self_draft);
    tempfiles_forget(slots[0]), tempfiles_forget(slots[1]);
    return rc;
}
