/*
 * adapt — see adapt.h. Each level is one step with a give and a take; a
 * change of level runs the steps between the two levels, giving from the
 * cheapest up, taking back from the dearest down.
 */
#include "adapt.h"

#include <stdio.h>
#include <string.h>

static const char *const level_names[ADAPT_LEVELS] = {"none", "low", "moderate", "critical"};

static uint64_t kv_bytes_all(const adapt_target *t) {
    uint64_t bytes = 0;
    for (int i = 0; i < t->n; i++) bytes += kv_cache_stats(t->s[i]->kv).bytes;
    return bytes;
}

static uint64_t expert_bytes(const adapt_target *t) { return bundle_experts_stats(t->b).cache_bytes; }

/* Step 1, give: the packed weights back to the file's pages; a self-draft
 * (which shares the model's matrices) follows their layout, then goes when
 * no stream uses it. */
static void give_weights(adapt_state *a, const adapt_target *t) {
    bundle *b = t->b;
    if (b->weights_packed) {
        const uint64_t bytes = model_unpack(b->m) + (b->draft_m && !b->draft_self ? model_unpack(b->draft_m) : 0);
        if (bytes) {
            a->released_weights += bytes;
            a->weights_unpacked = true;
            b->weights_packed = false;
            snprintf(b->weights_reason, sizeof b->weights_reason,
                     "mapped read-only: %.0f MiB of packed weights went back to the file's pages under memory pressure",
                     (double)bytes / (1 << 20));
        }
        if (b->draft_m && b->draft_self) model_sync_shared(b->draft_m, b->m);
    }
    if (t->drop_adapters) a->released_adapters += t->drop_adapters(t->user);
    a->draft_pending = b->draft_self && b->draft_m;
    if (a->draft_pending && t->idle && t->drop_draft) {
        a->released_draft += b->draft_m->owned_bytes;
        t->drop_draft(t->user);
        a->draft_pending = false;
    }
}

/* Step 1, take: pack again when what can still be had holds the packed
 * bytes and the plan's margin (a self-draft dropped is not made again). */
static void take_weights(adapt_state *a, const adapt_target *t) {
    bundle *b = t->b;
    a->draft_pending = false;
    if (!a->weights_unpacked) return;
    const uint64_t need = model_packable_bytes(b->m) + PLAN_SAFETY_MARGIN;
    if (t->room < need) {
        snprintf(a->note, sizeof a->note, "weights stay mapped: %.0f MiB can be had, packing needs %.0f MiB",
                 (double)t->room / (1 << 20), (double)need / (1 << 20));
        return;
    }
    model_pack(b->m);
    if (b->draft_m && !b->draft_self) model_pack(b->draft_m);
    if (b->draft_m && b->draft_self) model_sync_shared(b->draft_m, b->m);
    b->weights_packed = true;
    a->weights_unpacked = false;
    snprintf(b->weights_reason, sizeof b->weights_reason, "%.0f MiB packed again after memory pressure",
             (double)b->m->packed_bytes / (1 << 20));
}

/* Steps 2 and 3 set the sessions' live budgets (session.h) and apply
 * them: the KV caches to their cap first (at critical: every entry out of
 * the hot window to the cold tier, then the floor), then the experts to half of what
 * they hold (moderate) or a token's (critical), the shared bytes being
 * what the KV cache holds, room for a token's entries, and that. */
static void set_budgets(const adapt_target *t, int level) {
    const plan *p = &t->b->plan;
    for (int i = 0; i < t->n; i++) {
        session *s = t->s[i];
        err_t e = {0}; /* a spill that failed degrades to eviction; the stats say so */
        kv_cache_set_cold(s->kv, level >= 3, &e); /* colder tiers first: nothing evicted yet */
        s->kv_cap = level >= 3 ? 1 : 0;           /* then the cache's floor: spill where it may, then evict */
        s->readahead_paused = level >= 2;
        if (s->experts) s->shared_bytes = p->moe_shared;
        if (s->experts && !p->moe_shared && s->experts->set_budget) /* back to the plan's unshared cache */
            s->experts->set_budget(s->experts->self, p->moe.budget_bytes ? p->moe.budget_bytes : UINT64_MAX);
        session_rebalance(s, 1);
        if (!s->experts || level < 2) continue;
        const uint64_t held = expert_bytes(t);
        uint64_t keep = level >= 3 ? s->experts_least : held / 2;
        if (keep < s->experts_least) keep = s->experts_least;
        s->shared_bytes = kv_cache_stats(s->kv).bytes + 65 * s->token_bytes + keep; /* session_rebalance's room */
        session_rebalance(s, 1);
    }
}

static void set_level(adapt_state *a, const adapt_target *t, int level, double now_s) {
    if (level < 0) level = 0;
    if (level >= ADAPT_LEVELS) level = ADAPT_LEVELS - 1;
    const int from = a->level;
    if (level > from) {
        a->trims++;
        if (from < 1) give_weights(a, t);
        const uint64_t e0 = expert_bytes(t), k0 = kv_bytes_all(t);
        set_budgets(t, level);
        const uint64_t e1 = expert_bytes(t), k1 = kv_bytes_all(t);
        a->released_experts += e0 > e1 ? e0 - e1 : 0;
        a->released_kv += k0 > k1 ? k0 - k1 : 0;
    } else if (level < from) {
        a->regrows++;
        set_budgets(t, level);
        if (level < 1) take_weights(a, t);
    } else {
        if (level >= 1 && a->draft_pending) give_weights(a, t); /* a draft that was in use */
        if (level == 0 && a->weights_unpacked) take_weights(a, t);
        return;
    }
    a->level = level;
    a->last_change_s = now_s;
    if (level > from || !a->weights_unpacked)
        snprintf(a->note, sizeof a->note, "%s -> %s (app %s, watcher %s)%s", level_names[from], level_names[level],
                 level_names[a->app_level], level_names[a->watch_level],
                 a->draft_pending ? "; the self-draft goes when no stream uses it" : "");
}

void adapt_app(adapt_state *a, const adapt_target *t, int level, double now_s) {
    a->app_level = level < 0 ? 0 : level >= ADAPT_LEVELS ? ADAPT_LEVELS - 1 : level;
    set_level(a, t, a->app_level > a->watch_level ? a->app_level : a->watch_level, now_s);
}

/* The watcher's level after hysteresis: up at once, down after calm. */
static int watch_wanted(const adapt_state *a, int seen, double now_s) {
    if (seen >= a->watch_level) return seen;
    return now_s - a->last_pressure_s >= ADAPT_CALM_S ? seen : a->watch_level;
}

bool adapt_watch_acts(const adapt_state *a, int seen, double now_s) {
    const int w = watch_wanted(a, seen, now_s), want = w > a->app_level ? w : a->app_level;
    const bool waiting = a->draft_pending || (a->level == 0 && a->weights_unpacked);
    return want != a->level || seen != a->last_seen || (waiting && now_s - a->last_retry_s >= 1.0);
}

void adapt_watch(adapt_state *a, const adapt_target *t, int seen, double now_s) {
    if (seen > 0 && a->last_seen == 0) a->events++;
    if (seen > 0) a->last_pressure_s = now_s;
    a->last_seen = seen;
    a->last_retry_s = now_s;
    a->watch_level = watch_wanted(a, seen, now_s);
    set_level(a, t, a->app_level > a->watch_level ? a->app_level : a->watch_level, now_s);
}

void adapt_describe(const bundle *b, int level, char *buf, size_t n) {
    const double mib = 1.0 / (1 << 20);
    const model *d = bundle_draft_shape(b);
    const uint64_t packed = !b->weights_packed ? 0 : b->m->packed_bytes ? b->m->packed_bytes : model_packable_bytes(b->m);
    const uint64_t kv = b->plan.kv.budget_bytes + b->plan.draft_kv.budget_bytes;
    const uint64_t floor = plan_kv_least(b->m, &b->plan.kv, b->n_ctx) + (d ? plan_kv_least(d, &b->plan.draft_kv, b->n_ctx) : 0);
    const uint64_t experts = b->m->hp.n_expert ? (b->plan.moe.budget_bytes ? b->plan.moe.budget_bytes : moe_expert_bytes_all(b->m)) : 0;
    size_t len = (size_t)snprintf(buf, n, "%.0f MiB of packed weights back to the file%s", packed * mib,
                                  b->draft_self && d ? ", the self-draft dropped" : "");
    if (level >= 2 && len < n)
        len += (size_t)snprintf(buf + len, n - len, experts ? "; expert cache %.0f -> %.0f MiB, no read-ahead" : "; no experts",
                                experts * mib, experts / 2 * mib);
    if (level >= 3 && len < n)
        snprintf(buf + len, n - len, "; KV entries out of the hot window to the cold tier, then the %s -> %.1f MiB (evicts: output can change)",
                 kv ? "budget" : "unbounded cache", floor * mib);
}

