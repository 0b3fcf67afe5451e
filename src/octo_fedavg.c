/*
 * octo_fedavg.c — the public API's federated averaging (octo.h: octo_fedavg):
 * the base opened, the round's updates averaged (train/fedavg.h).
 */
#include "octo.h"
#include "octo_internal.h"
#include "core/atomic_write.h"
#include "core/clock.h"
#include "model/model.h"
#include "train/fedavg.h"

octo_status octo_fedavg(octo_client *client, const char *base_model, const octo_fedavg_params *params,
                        octo_fedavg_result *result) {
    if (!client) return OCTO_ERR_INVALID_ARG;
    err_t *err = api_client_err(client);
    const uint64_t t0 = clock_ns();
    if (!base_model || !params || !params->output || !params->updates || params->n_updates < 1)
        return (octo_status)err_set(err, ERR_INVALID_ARG, "fedavg needs the base model, the updates and the output");
    err_code rc = atomic_file_check(params->output, err);
    model *m = NULL;
    if (!rc && (rc = model_open(base_model, &m, err))) err_prefix(err, "%s", base_model);
    const fedavg_opts o = {.m = m, .from = params->from, .updates = params->updates, .n_updates = params->n_updates,
                           .output = params->output, .partial = params->partial != 0};
    fedavg_result r = {0};
    if (!rc) rc = fedavg_run(&o, &r, err);
    model_free(m);
    if (!rc && result)
        *result = (octo_fedavg_result){.round = (int)r.round, .devices = r.devices, .tokens = r.tokens,
                                       .groups = r.groups, .groups_sent = r.groups_sent,
                                       .seconds = (double)(clock_ns() - t0) / 1e9};
    return (octo_status)rc;
}
