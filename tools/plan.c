/*
 * octo plan — what the runtime would switch on for a model on each device:
 * weights packed or mapped, KV compression and its budget, spill, the draft,
 * lookahead, the expert cache, each with its reason. The plan comes from a
 * plan-only load (octo_model_options.plan_only), one per device, as JSON
 * (octo_model_plan_json, the same as a deploy bundle's plan.json); the table
 * is read back from that JSON, so the two never disagree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "core/flatjson.h" /* internal: reads back the plan's JSON for the table */
#include "octo.h"

#define PLAN_JSON_CAP 8192

static const char *const DEVICES[] = {"host", "iphone-15-pro", "iphone-14", "pixel-8", "galaxy-s24", "android-4gb-emmc"};
#define N_DEVICES (int)(sizeof DEVICES / sizeof *DEVICES)

/* The plan for one device into json (PLAN_JSON_CAP bytes); non-zero after printing the error. */
static int plan_one(const cli_args *a, const char *device, char *json) {
    octo_client_options co = octo_client_options_defaults();
    co.device = device;
    co.cache_dir = a->cache_dir;
    octo_client *c = octo_client_new(&co);
    octo_model_options mo = octo_model_options_defaults();
    mo.plan_only = 1;
    mo.n_ctx = (int)a->n_ctx;
    mo.draft_model = a->draft;
    octo_model *m = c ? octo_load_model(c, a->model, &mo) : NULL;
    int rc = 0;
    if (!m) rc = fail("plan: %s", c ? octo_last_error(c) : "out of memory");
    else if (octo_model_plan_json(m, json, PLAN_JSON_CAP) >= PLAN_JSON_CAP) rc = fail("plan: the plan is too long");
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}

static uint64_t num(const char *j, const char *key) {
    uint64_t v = 0;
    flatjson_get_u64(j, strlen(j), key, &v);
    return v;
}

static bool yes(const char *j, const char *key) {
    bool v = false;
    flatjson_get_bool(j, strlen(j), key, &v);
    return v;
}

static void row(const char *j) {
    char dev[64] = "", policy[32] = "", draft[16] = "", cell[5][48];
    const size_t n = strlen(j);
    flatjson_get_str(j, n, "device", dev, sizeof dev);
    flatjson_get_str(j, n, "kv_policy", policy, sizeof policy);
    flatjson_get_str(j, n, "draft", draft, sizeof draft);
    snprintf(cell[0], sizeof cell[0], "%s %.0f", yes(j, "weights_packed") ? "packed" : "mapped",
             mib(num(j, "weights_bytes")));
    if (num(j, "kv_budget_bytes"))
        snprintf(cell[1], sizeof cell[1], "%s %s %.0f", yes(j, "kv_compress") ? "tiers" : "f16", policy,
                 mib(num(j, "kv_budget_bytes")));
    else snprintf(cell[1], sizeof cell[1], "%s, no budget", yes(j, "kv_compress") ? "tiers" : "f16");
    snprintf(cell[2], sizeof cell[2], "%s", yes(j, "kv_spill") ? "on" : "off");
    if (strcmp(draft, "none")) snprintf(cell[3], sizeof cell[3], "%s %.0f", draft, mib(num(j, "draft_bytes")));
    else snprintf(cell[3], sizeof cell[3], "n-gram");
    if (yes(j, "moe_offload"))
        snprintf(cell[4], sizeof cell[4], "%.0f of %.0f", mib(num(j, "moe_cache_bytes")), mib(num(j, "moe_expert_bytes")));
    else snprintf(cell[4], sizeof cell[4], "-");
    printf("%-17s %8.0f  %-14s %-22s %-5s %-14s %-9s %s\n", dev, mib(num(j, "mem_available")), cell[0], cell[1],
           cell[2], cell[3], yes(j, "lookahead") ? "on" : "off", cell[4]);
}

static void reasons(const char *j) {
    static const char *const keys[][2] = {{"weights", "weights_reason"}, {"kv", "kv_reason"},
                                          {"spill", "kv_spill_reason"},  {"draft", "draft_reason"},
                                          {"lookahead", "lookahead_reason"}, {"experts", "moe_reason"},
                                          {"threads", "cores_reason"},  {"if low", "pressure_low"},
                                          {"if moderate", "pressure_moderate"}, {"if critical", "pressure_critical"}};
    char dev[64] = "", v[512];
    flatjson_get_str(j, strlen(j), "device", dev, sizeof dev);
    printf("\n%s:\n", dev);
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        if (flatjson_get_str(j, strlen(j), keys[k][1], v, sizeof v) && *v) printf("  %-12s %s\n", keys[k][0], v);
}

int cmd_plan(int argc, char **argv) {
    cli_args a = cli_defaults();
    int rc = cli_parse(CMD_PLAN, argc, argv, &a);
    if (rc) return rc;
    if (!a.model) return usage_error("plan needs -m MODEL");
    const char *device = a.device ? a.device : "host";
    const bool json = a.json;
    const bool all = !strcmp(device, "all");
    const int n = all ? N_DEVICES : 1;
    char(*out)[PLAN_JSON_CAP] = calloc((size_t)n, PLAN_JSON_CAP);
    if (!out) return fail("plan: out of memory");
    for (int d = 0; d < n && !rc; d++) rc = plan_one(&a, all ? DEVICES[d] : device, out[d]);
    if (!rc && json) {
        for (int d = 0; d < n; d++) printf("%s%s", all ? (d ? ",\n" : "[\n") : "", out[d]);
        if (all) printf("]\n");
    } else if (!rc) {
        printf("%-17s %8s  %-14s %-22s %-5s %-14s %-9s %s\n", "device", "free MiB", "weights MiB", "KV cache MiB",
               "spill", "draft MiB", "lookahead", "expert cache MiB");
        for (int d = 0; d < n; d++) row(out[d]);
        for (int d = 0; d < n; d++) reasons(out[d]);
    }
    free(out);
    return rc;
}
