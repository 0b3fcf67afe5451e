/*
 * pull_cache — the cache's files (pull.h). A pull writes FILE.part beside
 * FILE under an exclusive lock on FILE.lock (a second pull of the same file
 * waits, then finds it there), checks the size and the SHA-256 the hub
 * published, then fsyncs and renames FILE.part to FILE and writes
 * FILE.pull.json: the reference, the URL, the size, the digest and where it
 * came from. A failed write (a full disk) or a wrong digest removes the
 * partial file; a dropped connection or Ctrl-C keeps it for the next pull.
 */
#define _XOPEN_SOURCE 700 /* nftw (with _DEFAULT_SOURCE from CMake: flock) */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "pull.h"
#include "stats.h"
#include "core/atomic_write.h" /* internal: the one way octo writes a file */
#include "core/json.h"   /* internal: reading FILE.pull.json back */
#include "core/sha256.h" /* internal: the digest of what arrived */

#define META_SUFFIX ".pull.json"

/* Every folder above path, made as needed; 0, or 1 after printing why. */
static int make_parents(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return fail("cannot make %s: %s", buf, strerror(errno));
        *p = '/';
    }
    return 0;
}

/* fsync of the folder holding path, so that a rename in it lasts a crash. */
static void sync_parent(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    const int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) fsync(fd), close(fd);
}

/* text written to path through core/atomic_write (a temporary file, synced, renamed). */
static int write_atomic(const char *path, const char *text) {
    atomic_file af;
    err_t err = {0};
    if (atomic_file_open(&af, path, &err)) return fail("cannot write %s: %s", path, err.msg);
    if (atomic_file_write(&af, text, strlen(text), &err)) {
        atomic_file_abort(&af);
        return fail("cannot write %s: %s", path, err.msg);
    }
    return atomic_file_commit(&af, &err) ? fail("cannot write %s: %s", path, err.msg) : 0;
}

static int write_meta(const char *path, const char *shown, const char *url, uint64_t size, const char *sha,
                      const char *from) {
    char *text = NULL, mp[4200], when[32];
    size_t len = 0;
    const time_t t = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    FILE *m = open_memstream(&text, &len);
    if (!m) return fail("out of memory");
    fputs("{\"ref\": ", m), stats_print_text(m, shown);
    fputs(", \"url\": ", m), stats_print_text(m, url);
    fprintf(m, ", \"size\": %llu, \"sha256\": \"%s\", \"sha256_from\": \"%s\", \"pulled\": \"%s\"}\n",
            (unsigned long long)size, sha, from, when);
    fclose(m);
    snprintf(mp, sizeof mp, "%s" META_SUFFIX, path);
    const int rc = text ? write_atomic(mp, text) : fail("out of memory");
    free(text);
    return rc;
}

/* An exclusive lock on path.lock (waiting, and saying so, while another pull holds it); the fd or -1. */
static int lock_file(const char *path, const char *label) {
    char lp[4200];
    snprintf(lp, sizeof lp, "%s.lock", path);
    const int fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) return fail("cannot open %s: %s", lp, strerror(errno)), -1;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    fprintf(stderr, "octo: another octo is pulling %s: waiting for it\n", label);
    if (flock(fd, LOCK_EX) == 0) return fd;
    fail("cannot lock %s: %s", lp, strerror(errno));
    close(fd);
    return -1;
}

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Room for need more bytes in path's folder; 0, or 1 after printing why. */
static int check_room(const char *path, uint64_t need) {
    char buf[4096];
    struct statvfs v;
    snprintf(buf, sizeof buf, "%s", path);
    if (!need || statvfs(dirname(buf), &v) != 0) return 0;
    const uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    if (avail >= need) return 0;
    snprintf(buf, sizeof buf, "%s", path);
    return fail("%s needs %.1f MiB more and %s has %.1f MiB free", path, need / 1048576.0, dirname(buf), avail / 1048576.0);
}

/* The partial file and its validator (pull_http.c's If-Range) removed. */
static void drop_part(const char *part) {
    char v[4300];
    snprintf(v, sizeof v, "%s.etag", part);
    remove(part);
    remove(v);
}

/* The partial file's size and digest against what the server published: 0, or 1 after removing it and saying why. */
/* What arrived is a GGUF file (its magic), not an error page or another format: only models enter
 * the cache, so a bad file is said at pull, not at the first run. */
static int gguf_magic(const char *part) {
    char magic[4] = {0};
    FILE *f = fopen(part, "rb");
    const size_t got = f ? fread(magic, 1, 4, f) : 0;
    if (f) fclose(f);
    if (got == 4 && !memcmp(magic, "GGUF", 4)) return 0;
    char shown[20] = "", *at = shown; /* its first bytes, printable ones as they are */
    for (size_t i = 0; i < got; i++, at += strlen(at))
        snprintf(at, 5, isprint((unsigned char)magic[i]) ? "%c" : "\\x%02x", (unsigned char)magic[i]);
    drop_part(part);
    return fail("%s: what arrived is not a GGUF file (it starts '%s', not 'GGUF'); removed: octo runs GGUF models",
                part, shown);
}

static int check_part(const char *part, uint64_t size, const char *sha, const char *computed, char hex[65]) {
    struct stat st;
    err_t err = {0};
    if (stat(part, &st) != 0) return fail("%s: %s", part, strerror(errno));
    if (size && (uint64_t)st.st_size != size) {
        drop_part(part);
        return fail("%s: %llu bytes arrived where the server said %llu; removed", part, (unsigned long long)st.st_size,
                    (unsigned long long)size);
    }
    if (computed[0]) memcpy(hex, computed, 65); /* hashed as it was written (pull_http.c) */
    else if (sha256_file(part, hex, &err)) return fail("%s", err.msg);
    if (sha[0] && strcmp(sha, hex)) {
        drop_part(part);
        return fail("%s: checksum mismatch: the hub published sha256 %s, the bytes that arrived hash to %s; removed",
                    part, sha, hex);
    }
    return gguf_magic(part);
}

/* Download onto path.part and move it into place; 0, 1 or 130 (after printing why). */
static int fetch(const pull_ref *r, const char *shown, const pull_known *k, const char *path) {
    char url[4096], part[4200], why[1024], hex[65];
    http_found f;
    if (pull_file_url(r, url, sizeof url)) return fail("%s: the reference is too long", shown);
    snprintf(part, sizeof part, "%s.part", path);
    struct stat st;
    uint64_t have = stat(part, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (k && k->size && have > k->size) drop_part(part), have = 0; /* more than the file: not a start of it */
    if (k && k->size > have && check_room(path, k->size - have)) return 1;
    const char *label = strrchr(path, '/') + 1;
    const http_job j = {.url = url, .part = part, .label = label, .size = k ? k->size : 0, .progress = isatty(STDERR_FILENO)};
    const int rc = http_download(&j, &f, why, sizeof why);
    if (rc == 1 && (f.write_errno || (stat(part, &st) == 0 && st.st_size == 0))) drop_part(part); /* a failed write; nothing came */
    if (rc) {
        fail("%s: %s%s", shown, why, rc == 1 && f.write_errno ? "; the partial file was removed" : "");
        return rc;
    }
    const char *sha = k && k->sha256[0] ? k->sha256 : f.sha256;
    if (check_part(part, k && k->size ? k->size : f.size, sha, f.computed, hex)) return 1;
    const int fd = open(part, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) fsync(fd), close(fd);
    if (rename(part, path) != 0) return fail("cannot move %s into place: %s", part, strerror(errno));
    sync_parent(path);
    if (stat(path, &st) != 0) return fail("%s: %s", path, strerror(errno));
    if (write_meta(path, shown, url, (uint64_t)st.st_size, hex, sha[0] ? "hub" : "computed")) return 1;
    fprintf(stderr, "octo: pulled %s (%.1f MiB, sha256 %.16s...: %s%s)\n", shown, st.st_size / 1048576.0, hex,
            sha[0] ? "as the hub published it" : "computed, the server published none", f.resumed_from ? "; resumed" : "");
    return 0;
}

int pull_cache_fetch(const char *root, const pull_ref *r, const char *shown, const pull_known *k, char *out, size_t n) {
    if (pull_file_path(root, r, out, n)) return fail("%s: the reference is too long for a path", shown);
    char meta[4200];
    snprintf(meta, sizeof meta, "%s" META_SUFFIX, out);
    if (is_file(out) && is_file(meta)) return 0;
    if (make_parents(out)) return 1;
    const int lock = lock_file(out, shown);
    if (lock < 0) return 1;
    const int rc = is_file(out) && is_file(meta) ? 0 : fetch(r, shown, k, out); /* the pull waited on may have done it */
    close(lock);
    return rc;
}

int pull_cache_alias(const char *root, const pull_ref *r, const char *path) {
    char ap[4096], text[4200];
    if (pull_alias_path(root, r, ap, sizeof ap)) return fail("the reference is too long for a path");
    snprintf(text, sizeof text, "%s\n", path + strlen(root) + 1); /* relative: the cache may move with OCTO_CACHE */
    return make_parents(ap) || write_atomic(ap, text);
}

/* The file an alias file names (absolute, under root), into out; false when unreadable. */
static bool alias_file(const char *root, const char *alias, char *out, size_t n) {
    char line[4096] = "";
    FILE *f = fopen(alias, "r");
    if (!f) return false;
    const bool got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    line[strcspn(line, "\n")] = '\0';
    return got && pull_path_ok(line) && snprintf(out, n, "%s/%s", root, line) < (int)n;
}

bool pull_cache_alias_target(const char *root, const pull_ref *r, char *out, size_t n) {
    char ap[4096];
    return !pull_alias_path(root, r, ap, sizeof ap) && alias_file(root, ap, out, n) && is_file(out);
}

/* ---------------------------------------------------------------- list and rm (nftw gives no user pointer) */

static struct {
    const char *root;
    const char *target; /* rm: the file whose aliases go */
    int count;
    char **listed; /* list: "REF\nFILE" of each file's line, so an alias saying the same is not said twice */
    int n_listed;
} walk;

static void remember_listed(const char *ref, const char *file) {
    char **more = realloc(walk.listed, sizeof *more * (size_t)(walk.n_listed + 1));
    if (!more) return; /* then the alias line comes too: a repeat, nothing lost */
    walk.listed = more;
    const size_t n = strlen(ref) + strlen(file) + 2;
    if ((walk.listed[walk.n_listed] = malloc(n))) snprintf(walk.listed[walk.n_listed++], n, "%s\n%s", ref, file);
}

static bool was_listed(const char *ref, const char *file) {
    const size_t lr = strlen(ref);
    for (int i = 0; i < walk.n_listed; i++)
        if (!strncmp(walk.listed[i], ref, lr) && walk.listed[i][lr] == '\n' && !strcmp(walk.listed[i] + lr + 1, file))
            return true;
    return false;
}

/* An alias file's reference, from its place under root/refs: ORG/REPO[@REV][:QUANT]. */
static void alias_name(const char *path, char *out, size_t n) {
    char org[97] = "", repo[97] = "", rev[65] = "", quant[65] = "";
    const char *rel = path + strlen(walk.root) + strlen("/refs/");
    sscanf(rel, "%96[^/]/%96[^/]/%64[^/]/%64s", org, repo, rev, quant);
    const bool main_rev = !strcmp(rev, "main"), def = !strcmp(quant, "_default");
    snprintf(out, n, "%s/%s%s%s%s%s", org, repo, main_rev ? "" : "@", main_rev ? "" : rev, def ? "" : ":", def ? "" : quant);
}

static int list_alias(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)ftw;
    char name[300], target[4096];
    if (type != FTW_F || !alias_file(walk.root, path, target, sizeof target)) return 0;
    alias_name(path, name, sizeof name);
    if (was_listed(name, target)) return 0; /* the file's own line says it */
    printf("%s -> %s%s\n", name, target, is_file(target) ? "" : " (gone)");
    return 0;
}

static int list_file(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)ftw;
    const size_t len = strlen(path), sl = strlen(META_SUFFIX);
    if (type != FTW_F || len <= sl || strcmp(path + len - sl, META_SUFFIX)) return 0;
    char *text = NULL, file[4096];
    size_t tl;
    json_value *v = NULL;
    err_t err = {0};
    if (read_text_file(path, &text, &tl) || json_parse(text, tl, &v, &err) || !v) {
        free(text);
        return 0; /* (read_text_file said why) */
    }
    const json_value *size = json_get(v, "size");
    const char *ref = json_get_str(v, "ref"), *sha = json_get_str(v, "sha256"), *from = json_get_str(v, "sha256_from");
    snprintf(file, sizeof file, "%.*s", (int)(len - sl), path);
    printf("%s  %.1f MiB  sha256 %.16s (%s)  %s\n", ref ? ref : "?", size ? size->number / 1048576.0 : 0.0,
           sha ? sha : "?", from ? from : "?", file);
    if (ref) remember_listed(ref, file);
    walk.count++;
    json_free(v);
    free(text);
    return 0;
}

int pull_cache_list(const char *root) {
    char dir[4096];
    walk.root = root;
    walk.count = 0;
    snprintf(dir, sizeof dir, "%s/models", root);
    if (access(dir, F_OK) == 0) nftw(dir, list_file, 16, FTW_PHYS);
    snprintf(dir, sizeof dir, "%s/refs", root);
    if (access(dir, F_OK) == 0) nftw(dir, list_alias, 16, FTW_PHYS);
    for (int i = 0; i < walk.n_listed; i++) free(walk.listed[i]);
    free(walk.listed);
    walk.listed = NULL, walk.n_listed = 0;
    return walk.count;
}

static int drop_alias(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)ftw;
    char target[4096];
    if (type == FTW_F && alias_file(walk.root, path, target, sizeof target) && !strcmp(target, walk.target)) remove(path);
    return 0;
}

int pull_cache_remove(const char *root, const char *path, const char *shown) {
    struct stat st;
    char side[4200], dir[4096];
    const bool there = stat(path, &st) == 0;
    if (!there) return fail("%s is not in the cache ('octo list' shows what is)", shown);
    snprintf(side, sizeof side, "%s.lock", path); /* kept: a pull waiting on it must lock what the next one locks */
    const int lock = open(side, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) != 0) {
        close(lock);
        return fail("%s is being pulled now: remove it when that pull is done", shown);
    }
    const int rc = remove(path) != 0 ? fail("cannot remove %s: %s", path, strerror(errno)) : 0;
    if (!rc) {
        snprintf(side, sizeof side, "%s" META_SUFFIX, path);
        remove(side);
        snprintf(side, sizeof side, "%s.part", path);
        drop_part(side);
    }
    if (lock >= 0) close(lock);
    if (rc) return rc;
    walk.root = root;
    walk.target = path;
    snprintf(dir, sizeof dir, "%s/refs", root);
    if (access(dir, F_OK) == 0) nftw(dir, drop_alias, 16, FTW_PHYS);
    printf("removed %s: %s (%.1f MiB)\n", shown, path, st.st_size / 1048576.0);
    return 0;
}
