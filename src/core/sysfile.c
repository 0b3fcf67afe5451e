/*
 * sysfile — see sysfile.h.
 */
#include "sysfile.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool sysfile_u64(const char *path, uint64_t *out) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[64];
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    const char *p = buf + strspn(buf, " \t");
    if (*p < '0' || *p > '9') return false;
    *out = strtoull(p, NULL, 10);
    return true;
}

uint64_t sysfile_keyed(const char *path, const char *key) {
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    char line[256];
    const size_t n = strlen(key);
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 10); /* strtoull skips the blanks */
            break;
        }
    fclose(f);
    return v;
}

/* Decodes "\ooo" escapes of s in place. */
static void unescape(char *s) {
    char *w = s;
    for (const char *r = s; *r;) {
        const bool oct = r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
                         r[3] <= '7';
        if (oct) {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 4;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

int sysfile_fields(char *line, char **field, int n) {
    int k = 0;
    for (char *p = line; k < n;) {
        p += strspn(p, " \t\n");
        if (!*p) break;
        field[k++] = p;
        p += strcspn(p, " \t\n");
        if (*p) *p++ = '\0';
    }
    for (int i = 0; i < k; i++) unescape(field[i]);
    return k;
}
