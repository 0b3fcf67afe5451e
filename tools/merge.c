/*
 * merge — `octo merge -m BASE --lora A [--lora-scaled B S] -o OUT`: adapters
 * folded into a copy of their base, as llama-export-lora does (convert/merge.h).
 */
#include <stdio.h>

#include "cli.h"
#include "options.h"
#include "convert/merge.h" /* internal: the merge itself */

int cmd_merge(int argc, char **argv) {
    cli_args a = cli_defaults();
    const int bad = cli_parse(CMD_MERGE, argc, argv, &a);
    if (bad) return bad;
    if (!a.model || !a.out || !a.lora.n) return usage_error("merge needs -m BASE, --lora FILE (or --lora-scaled FILE S) and -o OUT");
    const merge_opts o = {.base = a.model, .output = a.out, .adapters = a.lora.path, .scales = a.lora.scale, .n = a.lora.n};
    merge_report rep;
    err_t err = {0};
    if (merge_run(&o, &rep, &err)) return fail("%s", err.msg);
    fprintf(stderr, "%s: %d tensors merged, %d copied\n", a.out, rep.merged, rep.copied);
    return 0;
}
