/*
 * platform/sysfile — see platform/sysfile.h. Each file is opened, read
 * and closed at once: the kernel computes these files when they are read.
 */
#include "platform/sysfile.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool sysfile_text(const char *path, char *buf, size_t n) {
    const int fd = n < 2 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const ssize_t got = read(fd, buf, n - 1);
    close(fd);
    if (got <= 0) return false;
    buf[got] = '\0';
    return true;
}

bool sysfile_u64_text(const char *text, uint64_t *out) {
    const char *p = text + strspn(text, " \t");
    if (*p < '0' || *p > '9') return false;
    *out = strtoull(p, NULL, 10);
    return true;
}

bool sysfile_u64(const char *path, uint64_t *out) {
    char buf[64];
    return sysfile_text(path, buf, sizeof buf) && sysfile_u64_text(buf, out);
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

bool sysfile_value(const char *text, const char *key, uint64_t *out) {
    const size_t n = strlen(key);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, key, n) || (line[n] != ':' && line[n] != ' ' && line[n] != '\t')) continue;
        const char *p = line + n + 1;
        p += strspn(p, " \t");
        if (*p < '0' || *p > '9') return false;
        *out = strtoull(p, NULL, 10);
        return true;
    }
    return false;
}

/* Where "key" starts on the line of text that begins with kind and a
 * space (a pressure file's "some ..." or "full ..."), its value after it;
 * NULL when there is no such line or key. */
static const char *psi_field(const char *text, const char *kind, const char *key) {
    const size_t n = strlen(kind);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, kind, n) || line[n] != ' ') continue;
        const char *eol = strchr(line, '\n'), *a = strstr(line, key);
        return !a || (eol && a > eol) ? NULL : a + strlen(key);
    }
    return NULL;
}

double sysfile_avg10(const char *text, const char *kind) {
    const char *a = psi_field(text, kind, "avg10=");
    char *end;
    const double v = a ? strtod(a, &end) : 0;
    return !a || end == a ? -1.0 : v;
}

int64_t sysfile_psi_total(const char *text, const char *kind) {
    const char *a = psi_field(text, kind, "total=");
    char *end;
    const long long v = a ? strtoll(a, &end, 10) : 0;
    return !a || end == a || v < 0 ? -1 : (int64_t)v;
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
