/*
 * pull_ref — references and the cache's layout (pull.h). Under the root:
 *
 *   models/hf/ORG/REPO/REV/PATH           a hub file, with PATH.pull.json beside it
 *   models/url/HOST/H/NAME                a URL's file (H: 12 hex digits of the URL's SHA-256)
 *   refs/ORG/REPO/REV/QUANT               the file ORG/REPO:QUANT chose (lowercase; "_default": ORG/REPO)
 *
 * Names are checked before they become paths: no "..", no empty part, the
 * characters the hub allows in repository names.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pull.h"
#include "core/sha256.h" /* internal: the URL's digest names its folder */

/* A repository's owner or name, a revision, a quantization: [A-Za-z0-9._-], not "." or "..". */
static bool name_ok(const char *s, size_t len, size_t max) {
    if (!len || len > max || (len <= 2 && !strncmp(s, "..", len))) return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-') return false;
    return true;
}

bool pull_path_ok(const char *p) {
    if (!*p || strlen(p) >= 1024 || *p == '/') return false;
    for (const char *s = p; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f || *s == '\\') return false;
    for (const char *s = p; *s;) {
        const size_t n = strcspn(s, "/");
        if (!n || (n == 1 && s[0] == '.') || (n == 2 && !strncmp(s, "..", 2))) return false;
        s += n + (s[n] == '/');
        if (s[-1] == '/' && !*s) return false; /* a trailing slash */
    }
    return true;
}

static bool ends_with_gguf(const char *s, size_t n) { return n >= 5 && !strncasecmp(s + n - 5, ".gguf", 5); }

bool pull_ref_like(const char *s) {
    if (!strncmp(s, "hf://", 5) || !strncmp(s, "https://", 8) || !strncmp(s, "http://", 7)) return true;
    const char *slash = strchr(s, '/');
    if (!slash || strchr(slash + 1, '/') || slash == s) return false;
    const size_t n = strcspn(slash + 1, ":@");
    return name_ok(s, (size_t)(slash - s), 96) && name_ok(slash + 1, n, 96) && !ends_with_gguf(slash + 1, n);
}

/* ORG/REPO[@REV] at s, up to the next '/', ':' or the end; *rest: after it. */
static int parse_repo(const char *s, pull_ref *r, const char **rest, char *why, size_t n) {
    const char *slash = strchr(s, '/');
    if (!slash || !name_ok(s, (size_t)(slash - s), 96))
        return snprintf(why, n, "'%s': a hub reference starts ORG/REPO", s), -1;
    const char *name = slash + 1;
    const size_t len = strcspn(name, "/:@");
    if (!name_ok(name, len, 96)) return snprintf(why, n, "'%s': '%.*s' is not a repository name", s, (int)len, name), -1;
    snprintf(r->org, sizeof r->org, "%.*s", (int)(slash - s), s);
    snprintf(r->repo, sizeof r->repo, "%.*s", (int)len, name);
    const char *p = name + len;
    snprintf(r->rev, sizeof r->rev, "main");
    if (*p == '@') {
        const size_t rl = strcspn(p + 1, "/:");
        if (!name_ok(p + 1, rl, 64)) return snprintf(why, n, "'%s': a bad revision after '@'", s), -1;
        snprintf(r->rev, sizeof r->rev, "%.*s", (int)rl, p + 1);
        p += 1 + rl;
    }
    *rest = p;
    return 0;
}

int pull_ref_parse(const char *s, pull_ref *r, char *why, size_t n) {
    memset(r, 0, sizeof *r);
    if (!strncmp(s, "https://", 8) || !strncmp(s, "http://", 7)) {
        const char *host = strstr(s, "://") + 3;
        if (!*host || *host == '/' || strlen(s) >= sizeof r->url || strpbrk(s, " \t\r\n"))
            return snprintf(why, n, "'%s' is not a URL octo can fetch", s), -1;
        r->kind = PULL_URL;
        snprintf(r->url, sizeof r->url, "%s", s);
        return 0;
    }
    const char *p = !strncmp(s, "hf://", 5) ? s + 5 : s, *rest;
    if (parse_repo(p, r, &rest, why, n)) return -1;
    if (*rest == '/') {
        if (!pull_path_ok(rest + 1)) return snprintf(why, n, "'%s': a bad file path in the repository", s), -1;
        r->kind = PULL_HF_FILE;
        snprintf(r->path, sizeof r->path, "%s", rest + 1);
        return 0;
    }
    r->kind = PULL_HF_REPO;
    if (*rest == ':') {
        if (!name_ok(rest + 1, strlen(rest + 1), 64)) return snprintf(why, n, "'%s': a bad quantization after ':'", s), -1;
        snprintf(r->quant, sizeof r->quant, "%s", rest + 1);
    } else if (*rest) {
        return snprintf(why, n, "'%s' is not ORG/REPO[:QUANT]", s), -1;
    }
    return 0;
}

void pull_ref_text(const pull_ref *r, char *out, size_t n) {
    const bool main_rev = !strcmp(r->rev, "main");
    switch (r->kind) {
    case PULL_URL: snprintf(out, n, "%s", r->url); break;
    case PULL_HF_FILE: snprintf(out, n, "hf://%s/%s%s%s/%s", r->org, r->repo, main_rev ? "" : "@", main_rev ? "" : r->rev, r->path); break;
    case PULL_HF_REPO:
        snprintf(out, n, "%s/%s%s%s%s%s", r->org, r->repo, main_rev ? "" : "@", main_rev ? "" : r->rev, r->quant[0] ? ":" : "", r->quant);
        break;
    }
}

const char *pull_endpoint(void) {
    static char base[512];
    const char *e = getenv("OCTO_HF_ENDPOINT");
    snprintf(base, sizeof base, "%s", e && *e ? e : "https://huggingface.co");
    for (size_t l = strlen(base); l && base[l - 1] == '/';) base[--l] = '\0';
    return base;
}

/* s percent-encoded into out, '/' kept; false when out is too small. */
static bool encode_path(const char *s, char *out, size_t n) {
    size_t k = 0;
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        const bool plain = isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
        const int w = plain ? snprintf(out + k, n - k, "%c", c) : snprintf(out + k, n - k, "%%%02X", c);
        if (w < 0 || (size_t)w >= n - k) return false;
        k += (size_t)w;
    }
    return true;
}

int pull_file_url(const pull_ref *r, char *out, size_t n) {
    if (r->kind == PULL_URL) return snprintf(out, n, "%s", r->url) < (int)n ? 0 : -1;
    char path[3200];
    if (r->kind != PULL_HF_FILE || !encode_path(r->path, path, sizeof path)) return -1;
    return snprintf(out, n, "%s/%s/%s/resolve/%s/%s", pull_endpoint(), r->org, r->repo, r->rev, path) < (int)n ? 0 : -1;
}

int pull_cache_root(char *out, size_t n, char *why, size_t wn) {
    const char *o = getenv("OCTO_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int w;
    if (o && *o) w = snprintf(out, n, "%s", o);
    else if (x && *x == '/') w = snprintf(out, n, "%s/octo", x);
    else if (h && *h) w = snprintf(out, n, "%s/.cache/octo", h);
    else return snprintf(why, wn, "no cache folder: set OCTO_CACHE (or HOME)"), -1;
    if (w < 0 || (size_t)w >= n) return snprintf(why, wn, "the cache folder's name is too long"), -1;
    return 0;
}

int pull_file_path(const char *root, const pull_ref *r, char *out, size_t n) {
    int w = -1;
    if (r->kind == PULL_HF_FILE && pull_path_ok(r->path)) {
        w = snprintf(out, n, "%s/models/hf/%s/%s/%s/%s", root, r->org, r->repo, r->rev, r->path);
    } else if (r->kind == PULL_URL) {
        const char *host = strstr(r->url, "://") + 3;
        const size_t hl = strcspn(host, "/:?#");
        const char *q = r->url + strcspn(r->url, "?#"), *base = q;
        while (base > host + hl && base[-1] != '/') base--;
        sha256_ctx c;
        char hex[65];
        sha256_init(&c);
        sha256_update(&c, r->url, strlen(r->url));
        sha256_hex(&c, hex);
        int bl = (int)(q - base);
        char name[256];
        snprintf(name, sizeof name, "%.*s", bl > 200 ? 200 : bl, base);
        if (!name_ok(name, strlen(name), 200)) snprintf(name, sizeof name, "model.gguf"); /* a URL's name may be anything */
        char h[97];
        snprintf(h, sizeof h, "%.*s", (int)hl, host);
        if (!name_ok(h, strlen(h), 96)) snprintf(h, sizeof h, "host");
        w = snprintf(out, n, "%s/models/url/%s/%.12s/%s", root, h, hex, name);
    }
    return w >= 0 && (size_t)w < n ? 0 : -1;
}

int pull_alias_path(const char *root, const pull_ref *r, char *out, size_t n) {
    char quant[65];
    size_t i = 0;
    for (; r->quant[i] && i + 1 < sizeof quant; i++) quant[i] = (char)tolower((unsigned char)r->quant[i]);
    quant[i] = '\0';
    const int w = snprintf(out, n, "%s/refs/%s/%s/%s/%s", root, r->org, r->repo, r->rev, i ? quant : "_default");
    return r->kind == PULL_HF_REPO && w >= 0 && (size_t)w < n ? 0 : -1;
}
