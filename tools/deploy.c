/*
 * octo deploy — one folder per target device that loads without re-laying
 * anything (convert/deploy.h has what goes in it). Progress on stderr.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "convert/deploy.h" /* internal: the bundle writer */

static void show(void *ctx, const char *msg) {
    (void)ctx;
    fprintf(stderr, "%s\n", msg);
}

/* "a,b,c" into o->devices (pointers into s, which is modified). */
static int split_devices(char *s, deploy_opts *o) {
    for (char *t = strtok(s, ","); t; t = strtok(NULL, ",")) {
        if (o->n_devices == DEPLOY_MAX_DEVICES) return usage_error("--device: at most %d devices", DEPLOY_MAX_DEVICES);
        o->devices[o->n_devices++] = t;
    }
    return o->n_devices ? 0 : usage_error("--device needs a name");
}

int cmd_deploy(int argc, char **argv) {
    deploy_opts o = {.progress = show};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        int rc = 0;
        if (!strcmp(a, "-m") && v) o.input = argv[++i];
        else if (!strcmp(a, "-o") && v) o.output_dir = argv[++i];
        else if (!strcmp(a, "--device") && v) rc = split_devices(argv[++i], &o);
        else if (!strcmp(a, "--type") && v) o.type = argv[++i];
        else if (!strcmp(a, "--draft") && v) o.draft = argv[++i];
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) {
            if (!parse_long(v, 1, 1024, &n)) return usage_error("%s takes a whole number from 1 to 1024", a);
            o.n_threads = (int)n;
            i++;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) o.progress = NULL;
        else return unknown_option("deploy", a);
        if (rc) return rc;
    }
    if (!o.input || !o.output_dir || !o.n_devices)
        return usage_error("deploy needs -m MODEL.gguf --device NAME[,NAME...] -o DIR");
    err_t err = {0};
    if (deploy_run(&o, &err)) return fail("deploy: %s", err.msg);
    for (int i = 0; i < o.n_devices; i++) printf("deployed:   %s/%s\n", o.output_dir, o.devices[i]);
    return 0;
}
