/*
 * platform/memlevel — see platform/memwatch.h: the table that turns a
 * reading into a level, and the reading of a tree of files. Shared by every
 * build: pure functions, and plain files a test fakes.
 */
#include "platform/memtree.h"
#include "platform/memwatch.h"

#include <string.h>

plat_mem_thresholds plat_mem_thresholds_default(void) {
    return (plat_mem_thresholds){
        .low_pct = 75,
        .moderate_pct = 85,
        .critical_pct = 93,
        .release_pct = 3,
        .psi_some_low_pct = 10,
        .psi_full_low_pct = 0,
        .psi_full_moderate_pct = 5,
        .psi_full_critical_pct = 15,
        .psi_event_level = PLAT_MEM_LOW,
        .vmpressure_event_level = PLAT_MEM_MODERATE,
        .vmpressure_min_events = 8,
    };
}

double plat_mem_unreclaimable_pct(const plat_mem_reading *r) {
    if (r->scope == PLAT_MEM_SCOPE_NONE || !r->limit) return 0.0;
    return 100.0 * (double)(r->usage > r->file ? r->usage - r->file : 0) / (double)r->limit;
}

/* The level value reaches on a row of thresholds th[0..2] (LOW, MODERATE,
 * CRITICAL), each lowered by drop points, but never below half its value;
 * a threshold of 0 is off. */
static plat_mem_level row(double value, const double th[3], double drop) {
    plat_mem_level l = PLAT_MEM_OK;
    for (int i = 0; i < 3; i++) {
        const double at = th[i] - drop > th[i] / 2 ? th[i] - drop : th[i] / 2;
        if (th[i] > 0 && value >= at) l = (plat_mem_level)(i + 1);
    }
    return l;
}

static plat_mem_level max_level(plat_mem_level a, plat_mem_level b) { return a > b ? a : b; }

/* The level the signals other than the share give. */
static plat_mem_level signals(const plat_mem_reading *r, const plat_mem_thresholds *t) {
    plat_mem_level l = PLAT_MEM_OK;
    if (r->psi_known) {
        const double some[3] = {t->psi_some_low_pct, 0, 0},
                     full[3] = {t->psi_full_low_pct, t->psi_full_moderate_pct, t->psi_full_critical_pct};
        l = max_level(row(r->psi_some_avg10, some, 0), row(r->psi_full_avg10, full, 0));
    }
    if (r->psi_events) l = max_level(l, t->psi_event_level);
    if (r->vmpressure_events && r->vmpressure_events >= t->vmpressure_min_events)
        l = max_level(l, t->vmpressure_event_level);
    return l;
}

/* The level of the unreclaimable share, each threshold lowered by drop. */
static plat_mem_level share_level(const plat_mem_reading *r, const plat_mem_thresholds *t, double drop) {
    const double th[3] = {t->low_pct, t->moderate_pct, t->critical_pct};
    if (r->scope == PLAT_MEM_SCOPE_NONE || !r->limit) return PLAT_MEM_OK;
    return row(plat_mem_unreclaimable_pct(r), th, drop);
}

plat_mem_level plat_mem_level_of(const plat_mem_reading *r, const plat_mem_thresholds *t) {
    return max_level(share_level(r, t, 0), signals(r, t));
}

plat_mem_level plat_mem_level_after(plat_mem_level prev, const plat_mem_reading *r, const plat_mem_thresholds *t) {
    const plat_mem_level now = plat_mem_level_of(r, t);
    if (now >= prev) return now;
    const plat_mem_level held = share_level(r, t, t->release_pct > 0 ? t->release_pct : 0);
    return max_level(now, held < prev ? held : prev);
}

const char *plat_mem_level_name(plat_mem_level level) {
    static const char *const names[] = {"ok", "low", "moderate", "critical"};
    return (unsigned)level < 4 ? names[level] : "?";
}

bool plat_mem_reading_at(const char *root, plat_mem_reading *out) {
    memtree_cgroup cg;
    char psi[1100];
    memtree_find(root, &cg);
    const bool has_psi = memtree_psi_path(root, &cg, psi, sizeof psi);
    memtree_read(root, &cg, has_psi ? psi : NULL, NULL, out);
    return out->scope != PLAT_MEM_SCOPE_NONE || out->psi_known;
}
