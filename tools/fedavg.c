/*
 * fedavg — `octo fedavg -m BASE [--from GLOBAL] -o OUT [--partial] UPDATE...`:
 * a federated round's updates averaged into its global adapter, or into an
 * aggregate of them (octo.h: octo_fedavg; docs/federated.md).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "options.h"

static int run(const cli_args *a) {
    if (!a->model || !a->out || !a->n_updates)
        return usage_error("fedavg needs -m BASE, -o OUT and the round's updates (fedavg -m BASE -o OUT UPDATE...)");
    const octo_fedavg_params p = {.from = a->ft.fl_from, .updates = a->updates, .n_updates = a->n_updates,
                                  .output = a->out, .partial = a->fl_partial};
    octo_client *c = octo_client_new(NULL);
    if (!c) return fail("out of memory");
    octo_fedavg_result r;
    int rc = 0;
    if (octo_fedavg(c, a->model, &p, &r)) rc = fail("%s", octo_last_error(c));
    else
        fprintf(stderr, "%s: round %d, %s of %d updates from %d devices (%llu training tokens); %d of %d groups "
                "changed, in %.2f s\n", a->out, r.round, a->fl_partial ? "an aggregate" : "the global adapter",
                a->n_updates, r.devices, (unsigned long long)r.tokens, r.groups_sent, r.groups, r.seconds);
    octo_client_free(c);
    return rc;
}

int cmd_fedavg(int argc, char **argv) {
    cli_args a = cli_defaults();
    const int bad = cli_parse(CMD_FEDAVG, argc, argv, &a);
    const int rc = bad ? bad : run(&a);
    free(a.updates);
    return rc;
}
