/* strmap — strmap.h. FNV-1a hashes; linear probing in a power-of-two table. */
#include "core/strmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_of(const char *s, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001B3ull;
    return h ^ h >> 32;
}

/* The slot holding s, or the empty slot where it would go. */
static strmap_slot *find(const strmap *m, const char *s, size_t n, uint64_t h) {
    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        strmap_slot *e = &m->slot[i];
        if (!e->key || (e->hash == h && e->len == n && memcmp(e->key, s, n) == 0)) return e;
    }
}

int32_t strmap_get(const strmap *m, const char *s, size_t n) {
    if (m->n == 0) return -1;
    const strmap_slot *e = find(m, s, n, hash_of(s, n));
    return e->key ? e->val : -1;
}

static bool grow(strmap *m) {
    const size_t cap = m->cap ? 2 * m->cap : 64;
    strmap_slot *v = calloc(cap, sizeof *v);
    if (!v) return false;
    const strmap old = *m;
    m->slot = v;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++)
        if (old.slot[i].key) *find(m, old.slot[i].key, old.slot[i].len, old.slot[i].hash) = old.slot[i];
    free(old.slot);
    return true;
}

bool strmap_put(strmap *m, const char *s, size_t n, int32_t val) {
    if (2 * (m->n + 1) > m->cap && !grow(m)) return false;
    const uint64_t h = hash_of(s, n);
    strmap_slot *e = find(m, s, n, h);
    if (!e->key) {
        char *k = malloc(n + 1);
        if (!k) return false;
        if (n) memcpy(k, s, n);
        k[n] = '\0';
        *e = (strmap_slot){k, n, h, 0};
        m->n++;
    }
    e->val = val;
    return true;
}

void strmap_free(strmap *m) {
    for (size_t i = 0; i < m->cap; i++) free(m->slot[i].key);
    free(m->slot);
    *m = (strmap){0};
}
