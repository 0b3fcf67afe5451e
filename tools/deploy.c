/*
 * octo deploy — one folder per target device that loads without re-laying
 * anything (convert/deploy.h has what goes in it). Progress on stderr.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "options.h"
#include "convert/deploy.h" /* internal: the bundle writer */

static void show(void *ctx, const char *msg) {
    (void)ctx;
    fprintf(stderr, "%s\n", msg);
}

int cmd_deploy(int argc, char **argv) {
    cli_args a = cli_defaults();
    const int bad = cli_parse(CMD_DEPLOY, argc, argv, &a);
    if (bad) return bad;
    deploy_opts o = {.input = a.model, .output_dir = a.out, .n_devices = a.n_devices, .type = a.type, .draft = a.draft,
                     .n_threads = (int)a.threads, .progress = a.quiet ? NULL : show};
    memcpy(o.devices, a.devices, sizeof o.devices);
    if (!o.input || !o.output_dir || !o.n_devices)
        return usage_error("deploy needs -m MODEL.gguf --device NAME[,NAME...] -o DIR");
    err_t err = {0};
    if (deploy_run(&o, &err)) return fail("deploy: %s", err.msg);
    for (int i = 0; i < o.n_devices; i++) printf("deployed:   %s/%s\n", o.output_dir, o.devices[i]);
    return 0;
}
