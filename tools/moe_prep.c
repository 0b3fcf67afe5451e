/*
 * octo moe-prep — the 2-bit copies of an MoE model's experts, written into
 * the sidecar MODEL.int2 (moe/int2.h), and with -f TEXT their quality cost
 * measured and recorded in it: the cost decides whether `--moe-int2 auto`
 * (the default) uses them.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "options.h"
#include "model/model.h" /* internal: the model whose experts are copied */
#include "moe/expert_cache.h" /* internal: the experts' bytes */
#include "moe/int2.h"    /* internal: the sidecar */

static int parse_prep(int argc, char **argv, cli_args *a) {
    *a = cli_defaults();
    a->n_ctx = 512;
    const int rc = cli_parse(CMD_MOE_PREP, argc, argv, a);
    if (rc) return rc;
    if (!a->model) return usage_error("moe-prep needs -m MODEL");
    return 0;
}

/* Write the sidecar; 0 or 1 (printed). */
static int build(const char *path) {
    model *m = NULL;
    err_t err = {0};
    if (model_load(path, &m, &err)) return fail("%s", err.msg);
    int rc = 0;
    char why[160], out[4096];
    if (m->hp.n_expert <= 0) rc = fail("moe-prep: %s has no experts", path);
    else if (!moe_int2_applicable(m, why, sizeof why)) rc = fail("moe-prep: no 2-bit copies for %s: %s", path, why);
    uint64_t copies = 0;
    for (int l = 0; !rc && l < m->hp.n_layer; l++) copies += moe_int2_record_bytes(m, l) * (uint64_t)m->hp.n_expert;
    const uint64_t whole = rc ? 0 : moe_expert_bytes_all(m);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!rc && moe_int2_build(m, path, &err)) rc = fail("moe-prep: %s", err.msg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    moe_int2_path(path, out, sizeof out);
    if (!rc)
        printf("wrote %s: %.2f MiB of 2-bit copies (%.0f %% of the experts' %.2f MiB) in %.1f s\n", out,
               copies / 1048576.0, 100.0 * (double)copies / (double)whole, whole / 1048576.0,
               (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    model_free(m);
    return rc;
}

int cmd_moe_prep(int argc, char **argv) {
    cli_args a;
    int rc = parse_prep(argc, argv, &a);
    if (rc || (rc = build(a.model))) return rc;
    if (!a.file) {
        printf("cost not measured: --moe-int2 auto leaves the copies off (measure it with -f TEXT; --moe-int2 on "
               "uses them)\n");
        return 0;
    }
    double kld = 0.0;
    int n = 0;
    if ((rc = eval_int2_kld(a.model, a.file, a.n_ctx, &kld, &n))) return rc;
    err_t err = {0};
    if (moe_int2_set_kld(a.model, kld, (uint32_t)n, &err)) return fail("moe-prep: %s", err.msg);
    printf("cost: %.4f nats of KL divergence per token over %d positions, with every expert no token chose first "
           "served by its copy; --moe-int2 auto %s (at most %.2f)\n",
           kld, n, kld <= MOE_INT2_KLD_AUTO ? "uses them" : "leaves them off", MOE_INT2_KLD_AUTO);
    return 0;
}
