/*
 * pull — models from the Hugging Face hub or any URL into a local cache:
 * `octo pull REF`, `octo list`, `octo rm REF`, and the references `octo run`
 * and `octo serve` take in place of a file.
 *
 *   pull_ref.c   what a reference is, the hub's endpoint, and where a file
 *                lives in the cache (nothing here touches the network)
 *   pull_http.c  one download with libcurl: resumed from a partial file
 *                (HTTP range), retried when the connection drops, the
 *                SHA-256 the server publishes captured
 *   pull_cache.c the cache's files: the lock that makes two pulls of a file
 *                one download, the digest and size checked, the atomic move
 *                into place, the metadata beside each file, list and rm
 *   pull.c       the commands, and ORG/REPO:QUANT resolved against the
 *                hub's listing of the repository
 *
 * References: hf://ORG/REPO/PATH.gguf (hf://ORG/REPO@REV/PATH for another
 * revision than main), ORG/REPO:QUANT or ORG/REPO (the hub's listing names
 * the file), https:// or http:// URLs. The cache is $OCTO_CACHE, else
 * $XDG_CACHE_HOME/octo, else ~/.cache/octo; the hub is $OCTO_HF_ENDPOINT,
 * else https://huggingface.co; $HF_TOKEN, when set, is sent as a bearer
 * token (to the hub's host only).
 */
#ifndef OCTO_TOOLS_PULL_H
#define OCTO_TOOLS_PULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { PULL_HF_FILE, PULL_HF_REPO, PULL_URL } pull_kind;

typedef struct {
    pull_kind kind;
    char org[97], repo[97], rev[65]; /* hf: the repository and revision (default main) */
    char quant[65];                  /* PULL_HF_REPO: the quantization named, "" for the default */
    char path[1024];                 /* PULL_HF_FILE: the file's path in the repository */
    char url[2048];                  /* PULL_URL: the URL */
} pull_ref;

/* s as a reference; 0, or -1 with why. */
int pull_ref_parse(const char *s, pull_ref *r, char *why, size_t n);
/* Whether s reads as a reference rather than a file name (ORG/REPO with no
 * ".gguf" at its end, or a scheme); the caller checks a file is not there. */
bool pull_ref_like(const char *s);
/* The reference in its one written form: hf://ORG/REPO[@REV]/PATH, ORG/REPO[:QUANT], the URL. */
void pull_ref_text(const pull_ref *r, char *out, size_t n);
/* The hub's base URL, without a trailing slash. */
const char *pull_endpoint(void);
/* The URL of a file reference (hf: the hub's resolve URL, path percent-encoded). */
int pull_file_url(const pull_ref *r, char *out, size_t n);
/* The cache's root folder; 0, or -1 with why (no $HOME and nothing set). */
int pull_cache_root(char *out, size_t n, char *why, size_t wn);
/* Where a file reference's file lives under root (PULL_HF_FILE, PULL_URL). */
int pull_file_path(const char *root, const pull_ref *r, char *out, size_t n);
/* Where a repository reference's choice is recorded under root (PULL_HF_REPO). */
int pull_alias_path(const char *root, const pull_ref *r, char *out, size_t n);

/* What one download is to do. */
typedef struct {
    const char *url;
    const char *part;  /* the partial file: appended to, resumed from its size */
    const char *label; /* the progress bar's name */
    uint64_t size;     /* the size expected, 0 when unknown */
    bool progress;     /* a progress bar on stderr */
} http_job;

/* What the server said of the file. */
typedef struct {
    char sha256[65];        /* the SHA-256 it published (X-Linked-Etag), "" when none */
    uint64_t size;          /* the size it published, 0 when unknown */
    uint64_t resumed_from;  /* the bytes of the partial file kept at the start */
    int retries;            /* attempts after the first (a dropped connection, a range refused) */
    int write_errno;        /* a failed write's errno (ENOSPC: a full disk), else 0 */
    char computed[65];      /* the SHA-256 of the whole partial file, hashed as it was written, "" when not */
} http_found;

/* Download j->url onto j->part; 0, 1 with why, 130 when interrupted (SIGINT:
 * the partial file stays for a resume). A server's error (404) removes nothing. */
int http_download(const http_job *j, http_found *f, char *why, size_t n);
/* A listing's page: at most PULL_MAX_PAGE bytes (the hub's 1,000 files are about 300 KB), parsed
 * into at most PULL_MAX_PAGE_VALUES JSON values (about 15,000 for 1,000 files; each value costs
 * ~80 bytes parsed, so a page of zeros would cost 2.3 GB at 60 MiB): a hostile page is refused
 * in bounded memory. */
#define PULL_MAX_PAGE (16u << 20)
#define PULL_MAX_PAGE_VALUES (1L << 18)
/* A small text (the hub's listing) into *body (malloc'd), and in next the URL
 * its Link header names rel="next" (the listing's next page; "" on the last).
 * 0, or 1 with why (an HTTP error names its status). */
int http_get_text(const char *url, char **body, size_t *len, char *next, size_t next_n, char *why, size_t n);

/* ---- the cache (pull_cache.c) */

/* What is known of a file before it is fetched (the hub's listing), 0/"" where nothing. */
typedef struct {
    char path[1024]; /* in the repository */
    uint64_t size;
    char sha256[65];
} pull_known;

/* The file of reference r (PULL_HF_FILE or PULL_URL) into the cache under
 * root, unless it is there; its path in out. shown: the reference as the
 * user wrote it (recorded beside the file). 0, 1 after printing why, 130
 * when interrupted. */
int pull_cache_fetch(const char *root, const pull_ref *r, const char *shown, const pull_known *k, char *out, size_t n);
/* Record that repository reference r chose the file at path (an alias under refs/). */
int pull_cache_alias(const char *root, const pull_ref *r, const char *path);
/* The file an alias names, into out; false when there is none or it is gone. */
bool pull_cache_alias_target(const char *root, const pull_ref *r, char *out, size_t n);
/* `octo list`'s lines on stdout; the count of files. */
int pull_cache_list(const char *root);
/* Remove the cached file at path, what lies beside it and the aliases that
 * name it; 0, or 1 after printing why. */
int pull_cache_remove(const char *root, const char *path, const char *shown);

/* For every command's -m and --draft (cli_resolve_model): *path = model
 * itself when it is a file, a folder or not a reference (a bare ORG/REPO
 * whose ORG is a local folder is a mistyped path, not a reference); else the
 * cached file of the reference in buf, pulled first when it is not there.
 * 0, or 1 / 130 after printing why. */
int pull_model_path(const char *model, const char **path, char *buf, size_t n);

/* A file's path in a repository: printable, relative, no empty, "." or ".." part. */
bool pull_path_ok(const char *p);

int cmd_pull(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_rm(int argc, char **argv);

#endif
