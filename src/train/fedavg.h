/*
 * fedavg — federated averaging: the updates of one round (train/fed.h) into
 * the round's global adapter, or into an aggregate of them (an update again).
 *
 * Each group is averaged over the updates that hold it, weighted by their
 * tokens for it:  mean_g = sum_i w_ig * d_ig / W_g,  W_g = sum_i w_ig,  the
 * dense weighted average where an update without the group counts with
 * weight 0. The global is the previous global (round 1: the base's starting
 * adapter, B = 0) plus mean_g in each group some update holds; the others
 * stay as they were. An aggregate holds mean_g with weight W_g, the sum of
 * the tokens and every device id: averaging aggregates gives the means of
 * averaging all their updates at once (up to the F32 rounding of the stored
 * means), so the work can be split as a backend likes.
 *
 * It streams: the updates are read through their mappings, one group at a
 * time, into one group's sums (double); what it holds is the global and that.
 * Nothing is written unless every update passes every check: its own
 * (fed_update_read), the base's identity, the round (the global's next), the
 * layout and shared A, the shapes of its groups, and no device twice.
 */
#ifndef OCTO_TRAIN_FEDAVG_H
#define OCTO_TRAIN_FEDAVG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "model/model.h"

typedef struct {
    const model *m;            /* the base (opened) */
    const char *from;          /* the previous round's global (NULL: round 1, from the base; an aggregate needs none) */
    const char *const *updates;
    int n_updates;
    const char *output;
    bool partial;              /* an aggregate (an update), not the global */
} fedavg_opts;

typedef struct {
    uint32_t round;
    int devices;
    uint64_t tokens;
    int groups, groups_sent;   /* the adapter's groups; those some update held */
} fedavg_result;

err_code fedavg_run(const fedavg_opts *o, fedavg_result *res, err_t *err);

#endif
