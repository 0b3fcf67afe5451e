/*
 * platform/cgroup — see platform/cgroup.h. Mount lines are split by hand
 * (platform/sysfile.h says why) and read whole however long: overlay mounts
 * can pass 4 KiB.
 */
#include "platform/cgroup.h"

#include "platform/sysfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static bool prefixed(char *buf, size_t n, const char *root, const char *path) {
    const int k = snprintf(buf, n, "%s%s", root ? root : "", path);
    return k >= 0 && (size_t)k < n;
}

/* word is one of list's comma-separated words. */
static bool has_word(const char *list, const char *word) {
    const size_t n = strlen(word);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == '\0')) return true;
    return false;
}

bool cgroup_self(const char *root, const char *controller, char *v1, char *v2, size_t n) {
    char path[1024], line[1024];
    *v1 = *v2 = '\0';
    FILE *f = prefixed(path, sizeof path, root, "/proc/self/cgroup") ? fopen(path, "re") : NULL;
    if (!f) return false;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        if (!c1[1]) snprintf(v2, n, "%s", c2 + 1);
        else if (has_word(c1 + 1, controller)) snprintf(v1, n, "%s", c2 + 1);
    }
    fclose(f);
    return true;
}

bool cgroup_mount(const char *root, const char *controller, char *out, size_t n) {
    char path[1024];
    FILE *f = prefixed(path, sizeof path, root, "/proc/self/mounts") ? fopen(path, "re") : NULL;
    if (!f) return false;
    char *line = NULL, *fld[4];
    size_t cap = 0;
    bool found = false;
    while (!found && getline(&line, &cap, f) > 0) {
        if (sysfile_fields(line, fld, 4) < 4) continue;
        found = !controller ? !strcmp(fld[2], "cgroup2") : !strcmp(fld[2], "cgroup") && has_word(fld[3], controller);
        if (found) found = prefixed(out, n, root, fld[1]);
    }
    free(line);
    fclose(f);
    return found;
}

bool cgroup_has(const char *dir, const char *file) {
    char path[1200];
    struct stat st;
    return snprintf(path, sizeof path, "%s/%s", dir, file) < (int)sizeof path && stat(path, &st) == 0;
}
