/*
 * policy_table — the one list of KV eviction policies. A policy's id
 * (kv_config.policy) is its row here, and its public number (octo_kv_policy)
 * is the row + 1, after OCTO_KV_POLICY_DEFAULT: the rows follow the public
 * enum's order. The names the cache reports, the API parses and the tools
 * list are the policies' own (kv_policy.name, at most 11 characters: they
 * fit octo_stats.kv_policy). A row past the public enum's last named value
 * is reachable all the same, by its number and by its name.
 *
 * Adding a policy: its file (policy_foo.c, defining kv_policy_foo) and one
 * row, X(foo), at the end of KV_POLICIES.
 */
#include <string.h>

#include "kv_cache.h"
#include "policy.h"

#define KV_POLICIES(X) \
    X(none)            \
    X(window)          \
    X(h2o)             \
    X(snapkv)          \
    X(morphkv)         \
    X(speckv)

#define DECLARE(name) extern const kv_policy kv_policy_##name;
KV_POLICIES(DECLARE)

#define ROW(name) &kv_policy_##name,
static const kv_policy *const policies[] = {KV_POLICIES(ROW)};

int kv_policy_count(void) { return (int)(sizeof policies / sizeof *policies); }

const kv_policy *kv_policy_get(int id) {
    return id >= 0 && id < kv_policy_count() ? policies[id] : NULL;
}

const char *kv_policy_name(kv_policy_id id) {
    const kv_policy *p = kv_policy_get(id);
    return p ? p->name : "?";
}

int kv_policy_from_name(const char *name) {
    for (int i = 0; name && i < kv_policy_count(); i++)
        if (!strcmp(name, policies[i]->name)) return i;
    return -1;
}
