/*
 * bundle_dir — see bundle_dir.h.
 */
#include "bundle_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_write.h"
#include "core/checksum.h"
#include "core/inputs.h"

static err_code write_whole(const char *path, const char *text, size_t n, err_t *err) {
    atomic_file af;
    err_code rc = atomic_file_open(&af, path, err);
    if (rc) return rc;
    if ((rc = atomic_file_write(&af, text, n, err))) {
        atomic_file_abort(&af);
        return rc;
    }
    return atomic_file_commit(&af, err);
}

/* A small file whole (at most max bytes), NUL-terminated; the caller frees. */
static err_code read_whole(const char *path, char **out, size_t *len, size_t max, err_t *err) {
    int fd;
    struct stat st;
    err_code rc = input_open(path, &fd, &st, err); /* a regular file only: a FIFO would block */
    if (rc) return rc;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
    const bool bad = ferror(f);
    fclose(f);
    if (!buf) return err_set(err, ERR_NOMEM, "out of memory");
    if (bad || n > max) {
        free(buf);
        return err_set(err, bad ? ERR_IO : ERR_BAD_VALUE, "%s: %s", path, bad ? "read failed" : "too large");
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return ERR_OK;
}

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

err_code bundle_manifest_write(const char *dir, bundle_manifest *m, err_t *err) {
    char path[4096], text[4096];
    int off = snprintf(text, sizeof text, "octo-bundle %d\ndevice %s\ncpu %s\nlayout %s\nsource %llu %016llx %s\n",
                       BUNDLE_FORMAT, m->device, m->cpu, m->layout, (unsigned long long)m->source_size,
                       (unsigned long long)m->source_hash, m->source);
    for (int i = 0; i < m->n_files; i++) {
        bundle_file *f = &m->files[i];
        snprintf(path, sizeof path, "%s/%s", dir, f->name);
        err_code rc = checksum_file(path, &f->hash, &f->size, err);
        if (rc) return rc;
        if (off >= (int)sizeof text) break;
        off += snprintf(text + off, sizeof text - (size_t)off, "file %s %llu %016llx\n", f->name,
                        (unsigned long long)f->size, (unsigned long long)f->hash);
    }
    if (off >= (int)sizeof text) return err_set(err, ERR_INVALID_ARG, "manifest too long");
    snprintf(path, sizeof path, "%s/%s", dir, BUNDLE_MANIFEST);
    return write_whole(path, text, (size_t)off, err);
}

/* One manifest line into m; false when it is not one. */
static bool parse_line(const char *line, bundle_manifest *m) {
    unsigned long long a, b;
    char name[256];
    if (sscanf(line, "device %63s", m->device) == 1 || sscanf(line, "cpu %15s", m->cpu) == 1 ||
        sscanf(line, "layout %15s", m->layout) == 1)
        return true;
    if (sscanf(line, "source %llu %llx %255[^\n]", &a, &b, name) == 3) {
        m->source_size = a, m->source_hash = b;
        snprintf(m->source, sizeof m->source, "%s", name);
        return true;
    }
    if (sscanf(line, "file %255s %llu %llx", name, &a, &b) != 3 || m->n_files >= BUNDLE_MAX_FILES ||
        strlen(name) >= sizeof m->files[0].name || strchr(name, '/') || name[0] == '.')
        return false;
    bundle_file *f = &m->files[m->n_files++];
    snprintf(f->name, sizeof f->name, "%s", name);
    f->size = a, f->hash = b;
    return true;
}

err_code bundle_manifest_parse(const char *text, size_t len, bundle_manifest *m, err_t *err) {
    memset(m, 0, sizeof *m);
    if (memchr(text, '\0', len)) return err_set(err, ERR_CORRUPT, "not an octo bundle manifest (a NUL byte)");
    char line[512];
    int version = -1;
    for (int n = 1; len; n++) {
        const char *nl = memchr(text, '\n', len);
        const size_t ll = nl ? (size_t)(nl - text) : len;
        if (ll >= sizeof line) return err_set(err, ERR_CORRUPT, "line %d is not a manifest line (too long)", n);
        memcpy(line, text, ll);
        line[ll] = '\0';
        text += ll + (nl != NULL), len -= ll + (nl != NULL);
        if (n > 1 && !parse_line(line, m)) return err_set(err, ERR_CORRUPT, "line %d is not a manifest line", n);
        if (n == 1 && sscanf(line, "octo-bundle %d", &version) != 1)
            return err_set(err, ERR_CORRUPT, "not an octo bundle manifest");
        if (n == 1 && version != BUNDLE_FORMAT)
            return err_set(err, ERR_UNSUPPORTED, "bundle format %d, this octo reads format %d: deploy it again",
                           version, BUNDLE_FORMAT);
    }
    return version < 0 ? err_set(err, ERR_CORRUPT, "not an octo bundle manifest (empty)") : ERR_OK;
}

static err_code read_manifest(const char *dir, bundle_manifest *m, err_t *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, BUNDLE_MANIFEST);
    char *text = NULL;
    size_t len = 0;
    err_code rc = read_whole(path, &text, &len, BUNDLE_MANIFEST_MAX, err);
    if (rc == ERR_NOT_FOUND) return err_set(err, rc, "%s: no such file (not an octo deploy bundle?)", path);
    if (!rc) rc = bundle_manifest_parse(text, len, m, err);
    free(text);
    if (rc) err_prefix(err, "%s", path);
    return rc;
}

err_code bundle_manifest_check(const char *dir, bundle_manifest *m, err_t *err) {
    err_code rc = read_manifest(dir, m, err);
    bool weights = false;
    for (int i = 0; !rc && i < m->n_files; i++) {
        const bundle_file *f = &m->files[i];
        char path[4096];
        uint64_t hash = 0, size = 0;
        snprintf(path, sizeof path, "%s/%s", dir, f->name);
        weights = weights || !strcmp(f->name, BUNDLE_WEIGHTS);
        if ((rc = checksum_file(path, &hash, &size, err))) {
            if (rc == ERR_NOT_FOUND) err_set(err, ERR_CORRUPT, "%s is missing from the bundle", path);
            rc = ERR_CORRUPT;
        } else if (size != f->size)
            rc = err_set(err, ERR_CORRUPT, "%s has %llu bytes, the manifest says %llu: the bundle is damaged", path,
                         (unsigned long long)size, (unsigned long long)f->size);
        else if (hash != f->hash)
            rc = err_set(err, ERR_CORRUPT, "%s fails its checksum: the bundle is damaged or was altered", path);
    }
    if (!rc && !weights) rc = err_set(err, ERR_CORRUPT, "%s/%s lists no %s", dir, BUNDLE_MANIFEST, BUNDLE_WEIGHTS);
    return rc;
}

/* The device's folder under dir; an error lists the folders there are. */
static err_code pick_folder(const char *dir, const char *device, char *out, size_t n, err_t *err) {
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/%s", dir, BUNDLE_MANIFEST);
    struct stat st;
    if (stat(probe, &st) == 0) { /* a device folder itself (its manifest names the device, checked after) */
        snprintf(out, n, "%s", dir);
        return ERR_OK;
    }
    if ((size_t)snprintf(out, n, "%s/%s", dir, device ? device : "host") >= n)
        return err_set(err, ERR_INVALID_ARG, "bundle path too long");
    if (is_dir(out)) return ERR_OK;
    DIR *d = opendir(dir);
    bool any = false; /* a folder with a manifest: a bundle, else just a directory */
    for (struct dirent *e; d && !any && (e = readdir(d));) {
        snprintf(probe, sizeof probe, "%s/%.255s/%s", dir, e->d_name, BUNDLE_MANIFEST);
        any = e->d_name[0] != '.' && stat(probe, &st) == 0;
    }
    if (d) closedir(d);
    if (!any) return err_set(err, ERR_IS_DIR, "%s is a directory, not a model file or an octo deploy bundle", dir);
    return err_set(err, ERR_NOT_FOUND, "bundle %s has no folder for %s%s (octo deploy --device %s makes one)", dir,
                   device ? "device " : "this host", device ? device : "", device ? device : "host");
}

/* plan.json applied to a copy of the options, the draft file named. */
static err_code apply_plan(const char *folder, const bundle_manifest *m, bundle_options *o, char *draft, size_t dn,
                           err_t *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", folder, BUNDLE_PLAN);
    bool has_plan = false, has_draft = false;
    for (int i = 0; i < m->n_files; i++) {
        has_plan = has_plan || !strcmp(m->files[i].name, BUNDLE_PLAN);
        has_draft = has_draft || !strcmp(m->files[i].name, BUNDLE_DRAFT);
    }
    bool want_draft = has_draft;
    if (has_plan) {
        size_t len = 0;
        char *json = NULL;
        err_code rc = read_whole(path, &json, &len, 1 << 20, err);
        if (!rc) rc = bundle_plan_apply(json, len, o, &want_draft, err);
        free(json);
        if (rc) err_prefix(err, "%s", path);
        if (rc) return rc;
    }
    if (!o->draft_model && o->auto_draft != BUNDLE_DRAFT_NONE && want_draft && has_draft) {
        snprintf(draft, dn, "%s/%s", folder, BUNDLE_DRAFT);
        o->draft_model = draft;
    } else if (!o->draft_model && o->auto_draft == BUNDLE_DRAFT_AUTO) {
        o->auto_draft = BUNDLE_DRAFT_NONE; /* the plan decided at deploy: nothing to look for or make */
    }
    return ERR_OK;
}

err_code bundle_load_path(const char *path, const char *device, const bundle_options *o, bundle **out, err_t *err) {
    if (!is_dir(path)) return bundle_load(path, o, out, err);
    char folder[4096], weights[4200], draft[4200];
    bundle_manifest m;
    bundle_options bo = *o;
    err_code rc = pick_folder(path, device, folder, sizeof folder, err);
    if (!rc) rc = bundle_manifest_check(folder, &m, err);
    if (!rc && device && strcmp(m.device, device))
        rc = err_set(err, ERR_BAD_VALUE, "%s was made for device %s, not %s", folder, m.device, device);
    if (!rc) rc = apply_plan(folder, &m, &bo, draft, sizeof draft, err);
    if (rc) return rc;
    snprintf(weights, sizeof weights, "%s/%s", folder, BUNDLE_WEIGHTS);
    return bundle_load(weights, &bo, out, err);
}
