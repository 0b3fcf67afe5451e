/*
 * synth — `octo synth`: a synthetic model with seeded random weights, of any
 * architecture, shape and tensor type octo reads (its options are rows of
 * options.c's table, each written into synth_opts).
 */
#include "cli.h"
#include "options.h"
#include "convert/adapter_synth.h" /* internal: the synthetic adapter writer */
#include "model/synth.h" /* internal: the synthetic model writer */

int cmd_synth(int argc, char **argv) {
    cli_args a = cli_defaults();
    a.synth = synth_defaults();
    const int rc = cli_parse(CMD_SYNTH, argc, argv, &a);
    if (rc) return rc;
    if (!a.out) return usage_error("synth needs -o FILE");
    err_t err = {0};
    if (a.lora_for) { /* an adapter for a model: --rank, --alpha (the rank), --type, --seed, --std */
        adapter_synth_opts o = adapter_synth_defaults();
        o.rank = (int)a.lora_rank;
        o.alpha = a.lora_alpha < 0.0f ? (float)o.rank : a.lora_alpha;
        if (cli_given(&a, CMD_SYNTH, "--type")) o.type = a.synth.type;
        if (cli_given(&a, CMD_SYNTH, "--seed")) o.seed = a.synth.seed;
        if (cli_given(&a, CMD_SYNTH, "--std")) o.std = a.synth.weight_std;
        return adapter_synth(a.lora_for, &o, a.out, &err) ? fail("%s", err.msg) : 0;
    }
    if (synth_write(&a.synth, a.out, &err)) return fail("%s", err.msg);
    return 0;
}
