/*
 * platform/perfhint — see platform/perfhint.h: the session, the clamp law
 * and the answers of an unsupported session, shared by every build; the
 * system calls come through plat_perf_hint_ops (platform/linux/perfhint.c
 * gives sched_setattr's and Android's, a test its fake).
 */
#include "platform/perfhint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct plat_perf_hint {
    plat_perf_hint_ops ops;
    bool supported;
    char status[160];
    int64_t target_ns;
    unsigned util_min;
    int fast_streak; /* reports in a row below the band */
    int n_tids;
    int tids[PLAT_PERF_HINT_MAX_TIDS];
};

/* Why the clamps cannot be set, from set_clamp's errno. */
static void why_not(plat_perf_hint *h, int e) {
    const char *why = e == EOPNOTSUPP ? "EOPNOTSUPP (a kernel built without CONFIG_UCLAMP_TASK)"
                      : e == EINVAL   ? "EINVAL (a kernel without them: before Linux 5.3)"
                      : e == ENOSYS   ? "ENOSYS (no sched_setattr system call)"
                      : e == EPERM    ? "EPERM (not permitted here: a sandbox or a security policy)"
                      : e == ESRCH    ? "ESRCH (every thread of the session has exited)"
                                      : NULL;
    if (why) snprintf(h->status, sizeof h->status, "unsupported: utilization clamps: %s", why);
    else snprintf(h->status, sizeof h->status, "unsupported: utilization clamps: errno %d", e);
    h->supported = false;
}

/* util_min on every thread; a thread that has exited is dropped, any other
 * error ends the session's support. */
static void apply(plat_perf_hint *h, unsigned util_min) {
    for (int i = 0; h->supported && i < h->n_tids;) {
        const int e = h->ops.set_clamp(h->ops.ctx, h->tids[i], util_min, PLAT_UCLAMP_MAX);
        if (e == ESRCH) h->tids[i] = h->tids[--h->n_tids];
        else if (e) why_not(h, e);
        else i++;
    }
    if (h->supported && !h->n_tids) why_not(h, ESRCH);
    h->util_min = h->supported ? util_min : 0;
}

static err_code check_args(const plat_perf_hint_ops *ops, const int *tids, int n_tids, int64_t target_ns,
                           plat_perf_hint **out, err_t *err) {
    if (!out) return err_set(err, ERR_INVALID_ARG, "performance hint: no place for the session");
    *out = NULL;
    if (!ops || (!ops->set_clamp && (!ops->native_target || !ops->native_report || !ops->native_close)))
        return err_set(err, ERR_INVALID_ARG, "performance hint: no calls to make");
    if (!tids || n_tids < 1 || n_tids > PLAT_PERF_HINT_MAX_TIDS)
        return err_set(err, ERR_INVALID_ARG, "performance hint: %d threads (1 to %d)", n_tids, PLAT_PERF_HINT_MAX_TIDS);
    if (target_ns <= 0)
        return err_set(err, ERR_INVALID_ARG, "performance hint: a target of %lld ns", (long long)target_ns);
    return ERR_OK;
}

err_code plat_perf_hint_open_with(const plat_perf_hint_ops *ops, const char *named, const int *tids, int n_tids,
                                  int64_t target_ns, plat_perf_hint **out, err_t *err) {
    const err_code rc = check_args(ops, tids, n_tids, target_ns, out, err);
    if (rc) return rc;
    plat_perf_hint *h = calloc(1, sizeof *h);
    if (!h) return err_set(err, ERR_NOMEM, "performance hint: out of memory");
    h->ops = *ops;
    h->supported = true;
    h->target_ns = target_ns;
    h->n_tids = n_tids;
    memcpy(h->tids, tids, (size_t)n_tids * sizeof *tids);
    snprintf(h->status, sizeof h->status, "%s", named ? named : "supported");
    if (h->ops.set_clamp) apply(h, 0); /* the probe: does the system take clamps at all */
    *out = h;
    return ERR_OK;
}

err_code plat_perf_hint_open_unsupported(const char *why, plat_perf_hint **out, err_t *err) {
    if (!out) return err_set(err, ERR_INVALID_ARG, "performance hint: no place for the session");
    *out = calloc(1, sizeof **out);
    if (!*out) return err_set(err, ERR_NOMEM, "performance hint: out of memory");
    snprintf((*out)->status, sizeof (*out)->status, "unsupported: %s", why ? why : "no reason given");
    return ERR_OK;
}

void plat_perf_hint_update_target(plat_perf_hint *h, int64_t target_ns) {
    if (!h || !h->supported || target_ns <= 0) return;
    h->target_ns = target_ns;
    h->fast_streak = 0;
    if (!h->ops.set_clamp) h->ops.native_target(h->ops.ctx, target_ns);
}

/* The clamp law (platform/perfhint.h): the util_min after a report. */
static unsigned law(plat_perf_hint *h, int64_t actual_ns) {
    const int64_t t = h->target_ns;
    if (actual_ns * 100 > t * (100 + PLAT_PERF_HINT_UP_MARGIN_PCT)) {
        h->fast_streak = 0;
        return h->util_min + PLAT_PERF_HINT_STEP_UP < PLAT_UCLAMP_MAX ? h->util_min + PLAT_PERF_HINT_STEP_UP
                                                                      : PLAT_UCLAMP_MAX;
    }
    if (actual_ns * 100 >= t * (100 - PLAT_PERF_HINT_DOWN_MARGIN_PCT)) {
        h->fast_streak = 0; /* in the band: hold */
        return h->util_min;
    }
    if (++h->fast_streak < PLAT_PERF_HINT_DOWN_AFTER) return h->util_min;
    h->fast_streak = 0;
    return h->util_min > PLAT_PERF_HINT_STEP_DOWN ? h->util_min - PLAT_PERF_HINT_STEP_DOWN : 0;
}

void plat_perf_hint_report(plat_perf_hint *h, int64_t actual_ns) {
    if (!h || !h->supported || actual_ns <= 0) return;
    if (!h->ops.set_clamp) {
        h->ops.native_report(h->ops.ctx, actual_ns);
        return;
    }
    const unsigned next = law(h, actual_ns);
    if (next != h->util_min) apply(h, next);
}

void plat_perf_hint_close(plat_perf_hint *h) {
    if (!h) return;
    if (h->supported && h->ops.set_clamp && h->util_min) apply(h, 0);
    if (h->supported && !h->ops.set_clamp) h->ops.native_close(h->ops.ctx);
    free(h);
}

bool plat_perf_hint_supported(const plat_perf_hint *h) { return h && h->supported; }
const char *plat_perf_hint_status(const plat_perf_hint *h) { return h ? h->status : "unsupported: no session"; }
unsigned plat_perf_hint_util_min(const plat_perf_hint *h) { return h ? h->util_min : 0; }
