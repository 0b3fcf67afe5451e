/*
 * util.h — helpers shared by the tests: where the data folder and the
 * scratch folder are, reading whole files, and writing synthetic models.
 */
#ifndef OCTO_TESTS_UTIL_H
#define OCTO_TESTS_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/synth.h"

/* ../shared (or $OCTO_TEST_DATA); NULL when it does not exist. */
static inline const char *tu_data_dir(void) {
    const char *d = getenv("OCTO_TEST_DATA");
    if (!d || !*d) d = "../shared";
    struct stat st;
    return stat(d, &st) == 0 && S_ISDIR(st.st_mode) ? d : NULL;
}

/* A unique path in the scratch folder ($OCTO_TMP or /tmp). */
static inline void tu_tmp_path(char *buf, size_t n, const char *name) {
    const char *d = getenv("OCTO_TMP");
    if (!d || !*d) d = "/tmp";
    snprintf(buf, n, "%s/octo-%ld-%s", d, (long)getpid(), name);
}

/* Whole file into a malloc'd buffer; NULL on failure. */
static inline unsigned char *tu_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc(n > 0 ? (size_t)n : 1);
    if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    if (p) *size = (size_t)n;
    return p;
}

static inline int tu_write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n;
}

#endif
