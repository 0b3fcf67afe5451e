/*
 * strmap — a map from byte strings to int32 values, by hash (open
 * addressing, at most half full): a name looked up among N costs the same
 * for N = 10 or 1,000,000. The map keeps its own copy of each key. For the
 * compilers of grammars and schemas, whose inputs a client chooses: a linear
 * scan of every name per lookup made their work quadratic in the input.
 */
#ifndef OCTO_CORE_STRMAP_H
#define OCTO_CORE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *key;
    size_t len;
    uint64_t hash;
    int32_t val;
} strmap_slot;

typedef struct {
    strmap_slot *slot; /* key NULL: empty */
    size_t cap, n;
} strmap;

/* The value of s[0..n), or -1 when absent. */
int32_t strmap_get(const strmap *m, const char *s, size_t n);
/* Set s[0..n) to val (replacing any value); false when out of memory (the map is unchanged). */
bool strmap_put(strmap *m, const char *s, size_t n, int32_t val);
void strmap_free(strmap *m);

#endif
