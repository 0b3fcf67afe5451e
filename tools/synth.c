/*
 * synth — `octo synth`: a synthetic model with seeded random weights, of any
 * architecture, shape and tensor type octo reads (its options are rows of
 * options.c's table, each written into synth_opts).
 */
#include "cli.h"
#include "options.h"
#include "model/synth.h" /* internal: the synthetic model writer */

int cmd_synth(int argc, char **argv) {
    cli_args a = cli_defaults();
    a.synth = synth_defaults();
    const int rc = cli_parse(CMD_SYNTH, argc, argv, &a);
    if (rc) return rc;
    if (!a.out) return usage_error("synth needs -o FILE");
    err_t err = {0};
    if (synth_write(&a.synth, a.out, &err)) return fail("%s", err.msg);
    return 0;
}
