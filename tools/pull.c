/*
 * pull — `octo pull`, `octo list`, `octo rm` and the references run and
 * serve take (pull.h). ORG/REPO:QUANT is resolved with the hub's listing of
 * the repository (GET /api/models/ORG/REPO/tree/REV): its GGUF files (a
 * projector, "mmproj", is not a model), the one whose name carries QUANT as
 * a word (any case), or with no QUANT the only one, else the Q4_K_M one.
 * The listing's LFS digest and size are what the download is checked
 * against; the choice is recorded so that the reference runs offline after.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "pull.h"
#include "core/json.h" /* internal: the hub's listing */

#define DEFAULT_QUANT "Q4_K_M" /* llama.cpp's -hf default too */

#define HUB_PAGES 100 /* a listing's pages at most (the hub's are about 1000 files each) */

static bool names_quant(const char *path, const char *quant);

/* What choose() needs of the listing, gathered as its pages go by: its size does not grow with the
 * listing's (100 pages of 5,000 files were 550 MiB of pull_known, 1.1 KiB each, before the choice). */
typedef struct {
    const char *q;         /* the type looked for: the reference's, else DEFAULT_QUANT */
    int n, hits, split;    /* GGUF files; those naming q; those of them split ("-of-") */
    pull_known first, hit; /* the first file (the one, when it is alone); the first naming q */
    char names[2048];      /* "a.gguf (1.2 MiB), b.gguf (...)" of the files, cut at its size, for messages */
    size_t names_len;
} hub_pick;

static void pick_add(hub_pick *p, const pull_known *k) {
    if (!p->n) p->first = *k;
    if (p->names_len + 1 < sizeof p->names) {
        const int w = snprintf(p->names + p->names_len, sizeof p->names - p->names_len, "%s%s (%.1f MiB)",
                               p->n ? ", " : "", k->path, k->size / 1048576.0);
        if (w > 0) p->names_len += (size_t)w; /* past the end once cut: nothing more is added */
    }
    p->n++;
    if (names_quant(k->path, p->q)) {
        if (!p->hits++) p->hit = *k;
        p->split += strstr(k->path, "-of-") != NULL;
    }
}

/* The GGUF files (not projectors) of one page of the listing, into p; 0, or 1 after printing why. */
static int hub_page(const pull_ref *r, const json_value *v, hub_pick *p) {
    for (int i = 0; i < v->n; i++) {
        const json_value *e = &v->items[i], *lfs = json_get(e, "lfs"), *size = json_get(lfs ? lfs : e, "size");
        const char *type = json_get_str(e, "type"), *path = json_get_str(e, "path"), *oid = lfs ? json_get_str(lfs, "oid") : NULL;
        const size_t pl = path ? strlen(path) : 0;
        if (!type || strcmp(type, "file") || pl < 6 || pl >= 1024 || strcasecmp(path + pl - 5, ".gguf") || strstr(path, "mmproj"))
            continue;
        if (!pull_path_ok(path)) /* a listing is the server's word, not a path to trust: never outside the cache */
            return fail("%s/%s: the hub's listing names a bad path '%.200s'", r->org, r->repo, path);
        pull_known known = {0}, *k = &known;
        snprintf(k->path, sizeof k->path, "%s", path);
        if (size && (size->kind != JSON_NUMBER || !(size->number >= 0 && size->number <= 9007199254740992.0) ||
                     size->number != (double)(uint64_t)size->number)) /* 2^53: whole, and exact in a double */
            return fail("%s/%s: the hub's listing gives '%.200s' the size %.*s, not a size", r->org, r->repo, path,
                        (int)(size->src_len < 40 ? size->src_len : 40), size->src);
        k->size = size ? (uint64_t)size->number : 0;
        if (oid && strlen(oid) == 64 && strspn(oid, "0123456789abcdefABCDEF") == 64)
            for (int c = 0; c <= 64; c++) k->sha256[c] = (char)tolower((unsigned char)oid[c]);
        pick_add(p, k);
    }
    return 0;
}

/* The listing's next page, as the Link header named it, into url: on the endpoint (a path
 * alone is taken on it), never elsewhere; 0, or 1 after printing why. */
static int hub_next(const pull_ref *r, const char *next, char *url, size_t n) {
    const char *base = pull_endpoint();
    const size_t bl = strlen(base);
    int w = -1;
    if (next[0] == '/') w = snprintf(url, n, "%s%s", base, next);
    else if (!strncmp(next, base, bl) && next[bl] == '/') w = snprintf(url, n, "%s", next);
    if (w < 0 || (size_t)w >= n)
        return fail("%s/%s: the hub's listing goes on at '%.300s', not on %s", r->org, r->repo, next, base);
    return 0;
}

/* The listing's GGUF files (not projectors), every page of it, into p (one page in memory at a time);
 * 0, or 1 after printing why. */
static int hub_listing(const pull_ref *r, hub_pick *p) {
    char url[2048], next[2048], why[2400];
    int rc = 0;
    snprintf(url, sizeof url, "%s/api/models/%s/%s/tree/%s?recursive=true", pull_endpoint(), r->org, r->repo, r->rev);
    for (int page = 0; !rc; page++) {
        char *body = NULL;
        size_t len = 0;
        if (page == HUB_PAGES) {
            rc = fail("%s/%s: the hub's listing goes on past %d pages", r->org, r->repo, HUB_PAGES);
            break;
        }
        if (http_get_text(url, &body, &len, next, sizeof next, why, sizeof why)) {
            rc = fail("%s/%s: %s", r->org, r->repo, why);
            break;
        }
        json_value *v = NULL;
        err_t err = {0};
        const int bad = json_parse_max(body, len, PULL_MAX_PAGE_VALUES, &v, &err) || v->kind != JSON_ARRAY;
        if (bad) rc = fail("%s/%s: the hub's listing is not a JSON array (%s)", r->org, r->repo, err.msg);
        else rc = hub_page(r, v, p); /* its messages quote the text: body freed after */
        json_free(v);
        free(body);
        if (!rc && !next[0]) return 0;
        if (!rc) rc = hub_next(r, next, url, sizeof url);
    }
    return rc;
}

/* Whether the file's name (after its last '/') carries quant as a word: Q4_K_M in model-Q4_K_M.gguf, not in model-IQ4_K_M. */
static bool names_quant(const char *path, const char *quant) {
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const size_t q = strlen(quant);
    for (const char *p = base; *p; p++) {
        if (strncasecmp(p, quant, q)) continue;
        /* Q4_K is not Q4_K_M: '_' continues a type's name on the right */
        const bool left = p == base || !isalnum((unsigned char)p[-1]), right = !isalnum((unsigned char)p[q]) && p[q] != '_';
        if (left && right) return true;
    }
    return false;
}

/* The one file r names among the listing's; 0, or 1 after printing why. */
static int choose(const pull_ref *r, const hub_pick *p, pull_known *out) {
    const char *q = p->q, *names = p->names;
    if (!p->n) return fail("%s/%s has no GGUF file", r->org, r->repo);
    if (!r->quant[0] && p->n == 1) return *out = p->first, 0;
    if (p->hits == 1) return *out = p->hit, 0;
    if (p->hits && p->split == p->hits)
        return fail("%s/%s:%s is split into %d files, which octo does not read: merge them into one (llama-gguf-split --merge)",
                    r->org, r->repo, q, p->hits);
    if (p->hits) return fail("%s/%s: %d files name %s; pull one by its path (hf://%s/%s/FILE): %s", r->org, r->repo,
                             p->hits, q, r->org, r->repo, names);
    if (r->quant[0]) return fail("%s/%s has no GGUF file named for %s; it has: %s", r->org, r->repo, q, names);
    return fail("%s/%s has %d GGUF files and none is %s: name one (%s/%s:QUANT): %s", r->org, r->repo, p->n, q, r->org,
                r->repo, names);
}

/* ORG/REPO[:QUANT]: the file the listing names, fetched, and the choice recorded. */
static int pull_repo(const char *root, const pull_ref *r, const char *shown, char *out, size_t n) {
    hub_pick p = {.q = r->quant[0] ? r->quant : DEFAULT_QUANT};
    pull_known pick;
    if (hub_listing(r, &p) || choose(r, &p, &pick)) return 1;
    pull_ref fr = *r;
    fr.kind = PULL_HF_FILE;
    snprintf(fr.path, sizeof fr.path, "%s", pick.path);
    const int rc = pull_cache_fetch(root, &fr, shown, &pick, out, n);
    return rc ? rc : pull_cache_alias(root, r, out);
}

/* One reference into the cache (or found there); its file in out; 0, 1, 2 (a bad reference) or 130. */
static int pull_one(const char *root, const char *text, char *out, size_t n) {
    pull_ref r;
    char why[600];
    if (pull_ref_parse(text, &r, why, sizeof why)) return usage_error("%s", why);
    if (r.kind == PULL_HF_REPO) return pull_cache_alias_target(root, &r, out, n) ? 0 : pull_repo(root, &r, text, out, n);
    return pull_cache_fetch(root, &r, text, NULL, out, n);
}

int cmd_pull(int argc, char **argv) {
    char root[4096], why[256], path[4096];
    if (!argc) return usage_error("pull needs a reference: hf://ORG/REPO/FILE.gguf, ORG/REPO:QUANT or a URL");
    if (pull_cache_root(root, sizeof root, why, sizeof why)) return fail("%s", why);
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] == '-') return usage_error("pull: unknown option '%s'", argv[i]);
        const int rc = pull_one(root, argv[i], path, sizeof path);
        if (rc) return rc;
        puts(path); /* one line per reference, the file's path: for scripts */
    }
    return 0;
}

int cmd_list(int argc, char **argv) {
    char root[4096], why[256];
    if (argc) return usage_error("list takes no %s", argv[0][0] == '-' ? "option" : "word");
    if (pull_cache_root(root, sizeof root, why, sizeof why)) return fail("%s", why);
    if (!pull_cache_list(root)) fprintf(stderr, "octo: nothing pulled yet (the cache is %s)\n", root);
    return 0;
}

int cmd_rm(int argc, char **argv) {
    char root[4096], why[600], path[4096];
    if (argc != 1 || argv[0][0] == '-') return usage_error("rm takes one reference ('octo list' shows them)");
    if (pull_cache_root(root, sizeof root, why, sizeof why)) return fail("%s", why);
    pull_ref r;
    if (pull_ref_parse(argv[0], &r, why, sizeof why)) return usage_error("%s", why);
    if (r.kind == PULL_HF_REPO ? !pull_cache_alias_target(root, &r, path, sizeof path)
                               : pull_file_path(root, &r, path, sizeof path) != 0)
        return fail("%s is not in the cache ('octo list' shows what is)", argv[0]);
    return pull_cache_remove(root, path, argv[0]);
}

/* A bare ORG/REPO (no scheme, no :QUANT) whose ORG is a folder here: a path mistyped, not a reference. */
static bool local_path(const char *model) {
    char org[128];
    if (strstr(model, "://") || strchr(model, ':')) return false;
    snprintf(org, sizeof org, "%.*s", (int)strcspn(model, "/"), model);
    return access(org, F_OK) == 0;
}

int pull_model_path(const char *model, const char **path, char *buf, size_t n) {
    char root[4096], why[256];
    *path = model;
    if (access(model, F_OK) == 0 || !pull_ref_like(model) || local_path(model)) return 0; /* the loader says what is wrong */
    if (pull_cache_root(root, sizeof root, why, sizeof why)) return fail("%s", why);
    const int rc = pull_one(root, model, buf, n);
    if (!rc) *path = buf;
    return rc;
}
