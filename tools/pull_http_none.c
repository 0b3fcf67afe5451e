/*
 * pull_http_none — the downloads of an octo built without libcurl (a musl
 * build, a system without libcurl4-openssl-dev): every one an error that
 * says so. The cache, list and rm work the same.
 */
#include <stdio.h>

#include "pull.h"

#define WITHOUT "this octo was built without libcurl (scripts/setup.sh installs libcurl4-openssl-dev)"

int http_download(const http_job *j, http_found *f, char *why, size_t n) {
    (void)j;
    *f = (http_found){0};
    snprintf(why, n, "%s", WITHOUT);
    return 1;
}

int http_get_text(const char *url, char **body, size_t *len, char *next, size_t next_n, char *why, size_t n) {
    (void)url, (void)body, (void)len, (void)next, (void)next_n;
    snprintf(why, n, "%s", WITHOUT);
    return 1;
}
