/*
 * bundle_dir — a deploy bundle on disk (written by octo deploy,
 * convert/deploy.c) and its load.
 *
 *   DIR/NAME/            one folder per device: a profile's name or "host"
 *     weights.octo       the model, its matrices already in the layout this
 *                        device's kernels read (GGUF container; model.h:
 *                        MODEL_LAYOUT_KEY); mapped read-only, never re-laid
 *     draft.octo         optional: the draft model, laid out the same way
 *     weights.octo.int2  optional: an MoE model's 2-bit expert copies
 *     plan.json          the plan made for the device (runtime/plan_json.c),
 *                        applied at load where the caller's options are automatic
 *     manifest           written last: "octo-bundle 1", then one line per
 *                        fact (device, cpu path, layout, source file's size
 *                        and hash) and per file (name, size, 64-bit hash)
 *
 * A load checks the manifest's format version and every file's size and
 * hash before anything is mapped: a bundle of another format, a file
 * missing, shortened or altered is an error naming it, never wrong output.
 * Whether this CPU reads the layout is the model's check (model_open).
 */
#ifndef OCTO_RUNTIME_BUNDLE_DIR_H
#define OCTO_RUNTIME_BUNDLE_DIR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "runtime/bundle.h"

#define BUNDLE_FORMAT 1
#define BUNDLE_MAX_FILES 8
#define BUNDLE_WEIGHTS "weights.octo"
#define BUNDLE_DRAFT "draft.octo"
#define BUNDLE_PLAN "plan.json"
#define BUNDLE_MANIFEST "manifest"
#define BUNDLE_MANIFEST_MAX (64 << 10) /* bytes: a longer one is not a manifest octo wrote */

typedef struct {
    char name[64];
    uint64_t size, hash;
} bundle_file;

typedef struct {
    char device[64], cpu[16], layout[16];
    char source[256];
    uint64_t source_size, source_hash;
    int n_files;
    bundle_file files[BUNDLE_MAX_FILES];
} bundle_manifest;

/* Hash the files named in m->files (their sizes and hashes filled) under dir
 * and write dir/manifest atomically. */
err_code bundle_manifest_write(const char *dir, bundle_manifest *m, err_t *err);
/* A manifest's text (len bytes, not NUL-terminated) into m: ERR_CORRUPT for
 * a line that is not a manifest line, ERR_UNSUPPORTED for another format. */
err_code bundle_manifest_parse(const char *text, size_t len, bundle_manifest *m, err_t *err);
/* Read dir/manifest and check every file it lists. */
err_code bundle_manifest_check(const char *dir, bundle_manifest *out, err_t *err);

/* path a directory: a bundle; else a model file (bundle_load). The folder is
 * DIR itself when it holds a manifest (which must then name device, if
 * given), else DIR/device (device NULL: DIR/host). */
err_code bundle_load_path(const char *path, const char *device, const bundle_options *o, bundle **out, err_t *err);

#endif
