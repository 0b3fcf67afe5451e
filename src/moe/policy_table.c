/*
 * policy_table — the one list of expert-cache policies; a policy's id is its
 * row. The first row is the default. Adding one: its file (policy_foo.c,
 * defining moe_policy_foo) and X(foo) in MOE_POLICIES.
 */
#include <string.h>

#include "policy.h"

#define MOE_POLICIES(X) \
    X(lhu)              \
    X(lru)              \
    X(lfu)

#define DECLARE(name) extern const moe_policy moe_policy_##name;
MOE_POLICIES(DECLARE)

#define ROW(name) &moe_policy_##name,
static const moe_policy *const policies[] = {MOE_POLICIES(ROW)};

int moe_policy_count(void) { return (int)(sizeof policies / sizeof *policies); }

const moe_policy *moe_policy_get(int id) { return id >= 0 && id < moe_policy_count() ? policies[id] : NULL; }

int moe_policy_from_name(const char *name) {
    for (int i = 0; name && i < moe_policy_count(); i++)
        if (!strcmp(policies[i]->name, name)) return i;
    return -1;
}
