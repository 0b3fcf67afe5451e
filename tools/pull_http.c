/*
 * pull_http — one download with libcurl (pull.h): the partial file resumed
 * from its size with an HTTP range, up to PULL_RETRIES more attempts when
 * the connection drops or stalls, a range the server refuses started over,
 * the hub's X-Linked-Etag (the file's SHA-256) and X-Linked-Size captured
 * from whichever response of the redirect chain carries them, a progress
 * bar on a terminal, and Ctrl-C leaving the partial file for the next pull.
 * The bytes are hashed (SHA-256) as they are written, so that checking them
 * costs no second read of the file: a resumed file's kept bytes are read
 * once, at the start.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <libgen.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "notes.h"
#include "pull.h"
#include "core/sha256.h" /* internal: the digest of the bytes as they arrive */

#define PULL_RETRIES 5
#define PULL_STALL_S 60 /* no byte for this long: the connection is taken as dropped */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct {
    int fd;
    int write_errno;       /* a failed write's errno (a full disk) */
    uint64_t offset;       /* the bytes the file had when this attempt began */
    const http_job *job;
    http_found *found;
    double last_draw, start;
    uint64_t start_bytes;
    uint64_t need, avail;  /* a published size with no room for it: the bytes missing and free */
    uint64_t written;      /* the bytes this attempt wrote */
    uint64_t overrun;      /* the body went past this published size: stopped there */
    char validator[256];   /* the response's ETag (strong) or Last-Modified: a resume's If-Range */
    char error_code[64];   /* the hub's X-Error-Code (RepoNotFound, EntryNotFound, GatedRepo, ...) */
    sha256_ctx sha;        /* of the partial file's first hashed bytes */
    uint64_t hashed;
    bool hash_lost;        /* a read of the kept bytes failed: the caller hashes the file itself */
} transfer;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *user) {
    transfer *t = user;
    const size_t n = size * nmemb;
    const uint64_t published = t->job->size ? t->job->size : t->found->size;
    if (published && t->offset + t->written + n > published) { /* more than the hub said: an endless body */
        t->overrun = published;
        return 0;
    }
    for (size_t done = 0; done < n;) {
        const ssize_t w = write(t->fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            t->write_errno = w < 0 ? errno : EIO;
            return 0; /* libcurl stops with CURLE_WRITE_ERROR */
        }
        sha256_update(&t->sha, p + done, (size_t)w);
        t->hashed += (uint64_t)w;
        done += (size_t)w;
    }
    t->written += n;
    return n;
}

/* "name: value" when line is that header (any case), else NULL. */
static const char *header_value(const char *line, size_t len, const char *name) {
    const size_t nl = strlen(name);
    if (len <= nl || strncasecmp(line, name, nl) || line[nl] != ':') return NULL;
    const char *v = line + nl + 1;
    while (*v == ' ' || *v == '\t') v++;
    return v;
}

/* The hub's X-Linked-Etag: "\"<64 hex>\"" (a weak W/ prefix allowed); others are not a SHA-256. */
static void take_sha(const char *v, char out[65]) {
    if (!strncmp(v, "W/", 2)) v += 2;
    if (*v == '"') v++;
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)v[i])) return;
    if (isxdigit((unsigned char)v[64])) return;
    for (int i = 0; i < 64; i++) out[i] = (char)tolower((unsigned char)v[i]);
    out[64] = '\0';
}

/* Room in the partial file's folder for the size the server published; false (need and avail set) when not. */
static bool room_for(transfer *t, uint64_t size) {
    char dir[4096];
    struct statvfs v;
    snprintf(dir, sizeof dir, "%s", t->job->part);
    if (t->job->size || size <= t->offset || statvfs(dirname(dir), &v) != 0) return true; /* (the caller checked a known size) */
    const uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    if (avail >= size - t->offset) return true;
    t->avail = avail;
    t->need = size - t->offset;
    return false;
}

/* A header's value without its line end, into out. */
static void copy_value(const char *v, const char *end, char *out, size_t n) {
    size_t len = (size_t)(end - v);
    while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' || v[len - 1] == ' ')) len--;
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), v);
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *user) {
    transfer *t = user;
    const size_t n = size * nmemb;
    const char *v, *end = line + n;
    if (n > 5 && !strncmp(line, "HTTP/", 5)) t->validator[0] = t->error_code[0] = '\0'; /* a response of the chain begins */
    if ((v = header_value(line, n, "x-linked-etag")) && !t->found->sha256[0]) take_sha(v, t->found->sha256);
    if ((v = header_value(line, n, "x-linked-size")) && !t->found->size) {
        if (!room_for(t, strtoull(v, NULL, 10))) return 0; /* refused before the first byte: libcurl stops */
        t->found->size = strtoull(v, NULL, 10);
    }
    if ((v = header_value(line, n, "content-range")) && (v = strchr(v, '/')) && v[1] != '*' && !t->found->size)
        t->found->size = strtoull(v + 1, NULL, 10);
    if ((v = header_value(line, n, "etag")) && strncmp(v, "W/", 2)) copy_value(v, end, t->validator, sizeof t->validator);
    if ((v = header_value(line, n, "last-modified")) && !t->validator[0]) copy_value(v, end, t->validator, sizeof t->validator);
    if ((v = header_value(line, n, "x-error-code"))) copy_value(v, end, t->error_code, sizeof t->error_code);
    return n;
}

static void draw(const transfer *t, uint64_t have, uint64_t total) {
    const double mib = 1.0 / (1 << 20), el = now_s() - t->start;
    const double rate = el > 0 ? (double)(have - t->start_bytes) / el : 0;
    if (total) fprintf(stderr, "\r\033[Kpulling %s  %3.0f%%  %.1f / %.1f MiB  %.1f MiB/s", t->job->label,
                       100.0 * (double)have / (double)total, have * mib, total * mib, rate * mib);
    else fprintf(stderr, "\r\033[Kpulling %s  %.1f MiB  %.1f MiB/s", t->job->label, have * mib, rate * mib);
    fflush(stderr);
}

static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)ultotal, (void)ulnow;
    transfer *t = user;
    if (interrupted) return 1; /* CURLE_ABORTED_BY_CALLBACK */
    if (!t->job->progress || now_s() - t->last_draw < 0.1) return 0;
    t->last_draw = now_s();
    const uint64_t total = t->job->size ? t->job->size : dltotal ? t->offset + (uint64_t)dltotal : t->found->size;
    draw(t, t->offset + (uint64_t)dlnow, total);
    return 0;
}

/* Whether $HF_TOKEN may go with url: to the hub's own host, over https
 * (or plain http on this machine's loopback, a test's stand-in). */
static bool token_for(const char *url) {
    const char *e = pull_endpoint();
    const size_t el = strlen(e);
    const bool secure = !strncmp(e, "https://", 8) || !strncmp(e, "http://127.0.0.1", 16) || !strncmp(e, "http://localhost", 16);
    return secure && !strncmp(url, e, el) && url[el] == '/';
}

/* A handle for url with what every request of octo's sets. */
static CURL *handle_for(const char *url) {
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    /* HTTP(S) only, redirects included: a hub that redirects to ftp:// (or any other scheme libcurl
     * speaks) is refused, not followed */
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L); /* an error's body is never written as the model */
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)PULL_STALL_S);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "octo-pull");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    const char *token = getenv("HF_TOKEN");
    if (token && *token && token_for(url)) { /* libcurl keeps it from a redirect's other host (the CDN) */
        curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BEARER);
        curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, token);
    }
    return c;
}

static bool transient(CURLcode rc) {
    return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING ||
           rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_COULDNT_CONNECT || rc == CURLE_HTTP2_STREAM;
}

/* Why a request failed, in words a person acts on (the hub's X-Error-Code first). */
static void explain(CURL *c, CURLcode rc, const char *url, const char *code, char *why, size_t n) {
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (rc == CURLE_HTTP_RETURNED_ERROR && !strcmp(code, "RepoNotFound"))
        snprintf(why, n, "%s: HTTP %ld: no such repository on the hub (or a private one: set HF_TOKEN)", url, status);
    else if (rc == CURLE_HTTP_RETURNED_ERROR && !strcmp(code, "RevisionNotFound"))
        snprintf(why, n, "%s: HTTP %ld: no such revision of the repository", url, status);
    else if (rc == CURLE_HTTP_RETURNED_ERROR && !strcmp(code, "EntryNotFound"))
        snprintf(why, n, "%s: HTTP %ld: no such file in the repository", url, status);
    else if (rc == CURLE_HTTP_RETURNED_ERROR && status == 404) snprintf(why, n, "%s: not found (HTTP 404)", url);
    else if (rc == CURLE_HTTP_RETURNED_ERROR && (status == 401 || status == 403))
        snprintf(why, n, "%s: HTTP %ld: the repository is gated or private (set HF_TOKEN to a token that may read it)", url, status);
    else if (rc == CURLE_HTTP_RETURNED_ERROR) snprintf(why, n, "%s: HTTP %ld", url, status);
    else if (rc == CURLE_UNSUPPORTED_PROTOCOL) {
        char *to = NULL; /* where it was sent: the last redirect's target */
        curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &to);
        snprintf(why, n, "%s: redirected to %.300s: only http and https are followed", url, to ? to : "another scheme");
    } else snprintf(why, n, "%s: %s", url, curl_easy_strerror(rc));
}

/* "If-Range: V" from the validator file beside the partial one; false when there is none. Like
 * the partial file, never through a link someone planted in the cache. */
static bool read_validator(const char *vpath, char *out, size_t n) {
    char v[256] = "";
    const int fd = open(vpath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0) close(fd);
        return false;
    }
    const bool got = fgets(v, sizeof v, f) != NULL;
    fclose(f);
    v[strcspn(v, "\r\n")] = '\0';
    return got && v[0] && snprintf(out, n, "If-Range: %s", v) < (int)n;
}

/* A new file each time (whatever was at vpath, a link included, is removed first, and O_EXCL
 * with O_NOFOLLOW refuses one planted between): the server's text never lands outside the cache. */
static void write_validator(const char *vpath, const char *v) {
    unlink(vpath);
    const int fd = open(vpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f) fprintf(f, "%s\n", v), fclose(f);
    else if (fd >= 0) close(fd);
}

/* One attempt from the partial file's current size (t->offset); a failure
 * no retry mends is explained in why. */
static CURLcode attempt(const http_job *j, transfer *t, char *why, size_t n) {
    CURL *c = handle_for(j->url);
    if (!c) return snprintf(why, n, "out of memory"), CURLE_OUT_OF_MEMORY;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, t);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, t);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    char if_range[300], vpath[4200];
    struct curl_slist *hdr = NULL;
    snprintf(vpath, sizeof vpath, "%s.etag", j->part);
    if (t->offset) {
        curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)t->offset);
        if (read_validator(vpath, if_range, sizeof if_range)) /* changed since: the whole file (200), started over */
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr = curl_slist_append(NULL, if_range));
    }
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status == 416) rc = CURLE_RANGE_ERROR; /* the range is past the end (libcurl may call it a success) */
    if (!t->offset && t->validator[0]) write_validator(vpath, t->validator);
    if (t->overrun)
        snprintf(why, n, "%s: the server sent more than the %llu bytes it published for the file; stopped there",
                 j->url, (unsigned long long)t->overrun), rc = CURLE_WRITE_ERROR;
    else if (t->need)
        snprintf(why, n, "%s needs %.1f MiB more and its folder has %.1f MiB free", j->part, t->need / 1048576.0,
                 t->avail / 1048576.0), rc = CURLE_WRITE_ERROR;
    else if (rc == CURLE_WRITE_ERROR && t->write_errno)
        snprintf(why, n, "writing %s: %s", j->part, strerror(t->write_errno));
    else if (rc != CURLE_OK) explain(c, rc, j->url, t->error_code, why, n);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    return rc;
}

/* The partial file opened for appending, emptied first when restart; its size in *size. */
static int open_part(const char *part, bool restart, uint64_t *size, char *why, size_t n) {
    const int fd = open(part, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (restart ? O_TRUNC : 0), 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, n, "%s: %s", part, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}

/* The hash brought to the partial file's size (t->offset) before an attempt:
 * started over when the file was emptied, the kept bytes read once. */
static void catch_up(transfer *t, const char *part) {
    if (t->offset < t->hashed) sha256_init(&t->sha), t->hashed = 0;
    if (t->hash_lost || t->hashed == t->offset) return;
    const int fd = open(part, O_RDONLY | O_CLOEXEC);
    char *buf = malloc(1 << 20);
    if (fd < 0 || !buf || lseek(fd, (off_t)t->hashed, SEEK_SET) < 0) t->hash_lost = true;
    while (!t->hash_lost && t->hashed < t->offset) {
        const uint64_t want = t->offset - t->hashed < (1u << 20) ? t->offset - t->hashed : (1u << 20);
        const ssize_t r = read(fd, buf, (size_t)want);
        if (r <= 0) t->hash_lost = true;
        else sha256_update(&t->sha, buf, (size_t)r), t->hashed += (uint64_t)r;
    }
    free(buf);
    if (fd >= 0) close(fd);
}

/* What to do after an attempt that returned rc: 0 done, 1 failed (why says), 2 again from where
 * the file is, 3 again from nothing, 130 interrupted. */
static int next_step(CURLcode rc, const transfer *t, int tries) {
    const uint64_t size = t->job->size ? t->job->size : t->found->size;
    if (rc == CURLE_OK && size && t->offset + t->written < size && tries < PULL_RETRIES) return 2; /* ended early: resume */
    if (rc == CURLE_OK) return 0;
    if (rc == CURLE_ABORTED_BY_CALLBACK && interrupted) return 130;
    if (tries >= PULL_RETRIES) return 1;
    if (rc == CURLE_RANGE_ERROR) return size && t->offset == size ? 0 : 3; /* complete already, or refused: start over */
    return transient(rc) ? 2 : 1;
}

static void install_sigint(struct sigaction *was) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    interrupted = 0;
    sigaction(SIGINT, &sa, was);
}

int http_download(const http_job *j, http_found *f, char *why, size_t n) {
    memset(f, 0, sizeof *f);
    struct sigaction was;
    install_sigint(&was);
    transfer t = {.job = j, .found = f, .start = now_s()};
    sha256_init(&t.sha);
    bool restart = false;
    int step = 1;
    for (int tries = 0;; tries++) {
        if ((t.fd = open_part(j->part, restart, &t.offset, why, n)) < 0) {
            step = 1;
            break;
        }
        if (tries == 0) f->resumed_from = t.start_bytes = t.offset;
        catch_up(&t, j->part);
        t.write_errno = 0;
        t.written = 0;
        const CURLcode rc = attempt(j, &t, why, n);
        close(t.fd);
        f->write_errno = t.write_errno;
        step = next_step(rc, &t, tries);
        if (step == 0 || step == 1 || step == 130) break;
        restart = step == 3;
        f->retries++;
        if (j->progress) fputs("\r\033[K", stderr);
        note("%s: %s; again from %s (attempt %d of %d)", j->label, step == 3 ? "the server would not resume" : why,
             step == 3 ? "the start" : "where it stopped", tries + 2, PULL_RETRIES + 1);
        if (step == 2) sleep(tries < 3 ? 1u << tries : 8u); /* 1, 2, 4, 8 s: a dropped link may come back */
    }
    if (j->progress) fputs("\r\033[K", stderr);
    sigaction(SIGINT, &was, NULL);
    struct stat st;
    if (step == 0 && !t.hash_lost && stat(j->part, &st) == 0 && (uint64_t)st.st_size == t.hashed)
        sha256_hex(&t.sha, f->computed); /* every byte of the file, in order */
    if (step == 0) { /* the validator's work is done */
        char vpath[4200];
        snprintf(vpath, sizeof vpath, "%s.etag", j->part);
        remove(vpath);
    }
    if (step == 130) snprintf(why, n, "interrupted; the bytes so far are kept: the next pull of it resumes");
    return step;
}

typedef struct {
    char *buf;
    size_t len, cap;
} text_sink;

static size_t on_text(char *p, size_t size, size_t nmemb, void *user) {
    text_sink *s = user;
    const size_t n = size * nmemb;
    if (s->len + n + 1 > PULL_MAX_PAGE) return 0; /* a listing's page is never this big */
    if (s->len + n + 1 > s->cap) {
        const size_t cap = (s->len + n + 1) * 2;
        char *more = realloc(s->buf, cap);
        if (!more) return 0;
        s->buf = more, s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = '\0';
    return n;
}

/* Whether a link's parameters (after its <URL>, up to end) say rel="next" (or rel=next). */
static bool rel_next(const char *p, const char *end) {
    for (; p + 8 <= end; p++) {
        if (strncasecmp(p, "rel=", 4)) continue;
        const char *v = p + 4 + (p[4] == '"');
        if (v + 4 <= end && !strncasecmp(v, "next", 4) && (v + 4 == end || strchr("\"; \t\r\n", v[4]))) return true;
    }
    return false;
}

/* The URL of the rel="next" link in a Link header's value (RFC 8288: "<URL>; rel=\"next\"",
 * several separated by commas) into out; "" when there is none, or it does not fit. */
static void link_next(const char *v, const char *end, char *out, size_t n) {
    out[0] = '\0';
    for (const char *lt; v < end && (lt = memchr(v, '<', (size_t)(end - v))) != NULL;) {
        const char *gt = memchr(lt, '>', (size_t)(end - lt));
        if (!gt) return;
        const char *stop = memchr(gt, ',', (size_t)(end - gt));
        if (!stop) stop = end;
        if (rel_next(gt + 1, stop)) {
            if ((size_t)(gt - lt - 1) < n) snprintf(out, n, "%.*s", (int)(gt - lt - 1), lt + 1);
            return;
        }
        v = stop + 1;
    }
}

typedef struct {
    char code[64];  /* X-Error-Code */
    char *next;     /* Link's rel="next" */
    size_t next_n;
} text_headers;

static size_t on_text_header(char *line, size_t size, size_t nmemb, void *user) {
    text_headers *h = user;
    const size_t n = size * nmemb;
    const char *v;
    if (n > 5 && !strncmp(line, "HTTP/", 5)) h->code[0] = h->next[0] = '\0'; /* a response of the chain begins */
    if ((v = header_value(line, n, "x-error-code"))) copy_value(v, line + n, h->code, sizeof h->code);
    if ((v = header_value(line, n, "link"))) link_next(v, line + n, h->next, h->next_n);
    return n;
}

int http_get_text(const char *url, char **body, size_t *len, char *next, size_t next_n, char *why, size_t n) {
    CURL *c = handle_for(url);
    if (!c) return snprintf(why, n, "out of memory"), 1;
    text_sink s = {0};
    next[0] = '\0';
    text_headers h = {.next = next, .next_n = next_n};
    char *code = h.code;
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_text);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_text_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    CURLcode rc = CURLE_OK;
    for (int tries = 0; tries <= PULL_RETRIES; tries++) {
        s.len = 0;
        if ((rc = curl_easy_perform(c)) == CURLE_OK || !transient(rc)) break;
        sleep(1);
    }
    if (rc != CURLE_OK) explain(c, rc, url, code, why, n);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK || !s.buf) {
        if (rc == CURLE_OK) snprintf(why, n, "%s: an empty answer", url);
        free(s.buf);
        return 1;
    }
    *body = s.buf;
    *len = s.len;
    return 0;
}
