/*
 * cpu_adapt — see cpu_adapt.h.
 */
#include "cpu_adapt.h"

#include "core/latency.h"
#include "platform/cpuquota.h"
#include "platform/perfhint.h"
#include "platform/thermal.h"
#include "runtime/cpu_probe.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

_Static_assert(CPU_HINT_CALIBRATE <= LAT_FEW, "lat_middle takes the calibration's steps");

static int clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The count the CPU budget allows, and why, before heat. */
static int budget_threads(const cpu_signals *s, int n, char *why, size_t why_n) {
    if (s->effective_cpus <= 0) {
        snprintf(why, why_n, "no CPU quota or core count known");
        return n;
    }
    if (s->quota_cpus > 0 && s->quota_cpus <= s->effective_cpus + 1e-9)
        snprintf(why, why_n, "a CPU quota of %.2f CPUs", s->quota_cpus);
    else
        snprintf(why, why_n, "%.2f CPUs to run on", s->effective_cpus);
    return clamp((int)floor(s->effective_cpus + 0.5), 1, n);
}

/* Heat's part: whether a thread is held back (cooling, with hysteresis), and why. */
static bool heat(const cpu_signals *s, bool *cooling, char *why, size_t why_n) {
    if (!s->thermal_known) return *cooling = false;
    if (s->thermal_headroom_mc <= 0) *cooling = true;
    else if (s->thermal_headroom_mc >= CPU_ADAPT_COOL_MC) *cooling = false;
    if (*cooling)
        snprintf(why, why_n, "; one fewer: thermal zone %d %s its passive trip (%.1f C %s)", s->thermal_zone,
                 s->thermal_headroom_mc <= 0 ? "is past" : "has not cooled below",
                 fabs((double)s->thermal_headroom_mc) / 1000.0, s->thermal_headroom_mc <= 0 ? "over" : "under");
    return *cooling;
}

int cpu_adapt_choose(const cpu_signals *s, int n, bool *cooling, char *why, size_t why_n) {
    char budget[120], hot[120] = "";
    int t = budget_threads(s, n, budget, sizeof budget);
    if (heat(s, cooling, hot, sizeof hot) && t > 1) t--;
    else hot[0] = '\0';
    snprintf(why, why_n, "%d of %d threads: %s%s", t, n, budget, hot);
    return t;
}

void cpu_adapt_init(cpu_adapt_state *st, tpool *p, bool fixed) {
    memset(st, 0, sizeof *st);
    st->fixed = fixed;
    st->pool = tpool_size(p);
    st->threads = tpool_active(p);
    snprintf(st->note, sizeof st->note, fixed ? "%d threads, as asked" : "%d threads: not read yet", st->threads);
}

/* The note: the files' reason, and the measured cap's when one holds. */
static void set_note(cpu_adapt_state *st, const char *why) {
    if (st->cap && st->cap < st->files_threads)
        snprintf(st->note, sizeof st->note, "%d of %d threads: %s; the files allow %s", st->cap, st->pool,
                 st->probe.note, why);
    else
        snprintf(st->note, sizeof st->note, "%s", why);
}

/* How long idle workers spin: briefly while a quota is under the threads in force. */
static void set_spin(const cpu_adapt_state *st, tpool *p) {
    const bool over = st->sig.quota_cpus > 0 && st->sig.quota_cpus < st->threads;
    tpool_set_spin(p, over ? CPU_ADAPT_SPIN_QUOTA : tpool_spin_default());
}

bool cpu_adapt_apply(cpu_adapt_state *st, tpool *p, const cpu_signals *s) {
    st->sig = *s;
    if (st->fixed) return false;
    char why[CPU_WHY_LEN];
    const int f = cpu_adapt_choose(s, st->pool, &st->cooling, why, sizeof why);
    if (f != st->files_threads && st->files_threads) { /* the device changed: measure again */
        st->cap = 0;
        cpu_probe_drop(&st->probe, st->threads, true);
    }
    st->files_threads = f;
    if (st->probe.trying) return false; /* a probe holds the count for its steps */
    const int t = tpool_set_active(p, st->cap && st->cap < f ? st->cap : f);
    set_note(st, why);
    const bool changed = t != st->threads;
    st->threads = t;
    st->changes += changed;
    set_spin(st, p);
    return changed;
}

cpu_signals cpu_signals_of(const plat_cpu_budget *b, const plat_thermal *th, const cpu_signals *prev) {
    cpu_signals s = *prev;
    s.effective_cpus = b->effective_cpus;
    s.quota_cpus = b->quota_state == PLAT_CPU_QUOTA_LIMITED ? b->quota_cpus : 0;
    s.allowed_cpus = b->allowed_cpus;
    if (th) {
        s.thermal_known = th->known && th->passive_known;
        s.thermal_zone = th->passive_zone;
        s.thermal_headroom_mc = th->passive_headroom_millicelsius;
    }
    return s;
}

bool cpu_adapt_poll(cpu_adapt_state *st, tpool *p, double now_s) {
    if (st->fixed || st->pool < 2 || now_s < st->next_read_s) return false;
    st->next_read_s = now_s + CPU_ADAPT_PERIOD_S;
    const plat_cpu_budget b = plat_cpu_budget_read();
    const bool thermal = now_s >= st->next_thermal_s;
    if (thermal) st->next_thermal_s = now_s + CPU_ADAPT_THERMAL_S;
    if (!thermal) {
        const cpu_signals s = cpu_signals_of(&b, NULL, &st->sig);
        return cpu_adapt_apply(st, p, &s);
    }
    const plat_thermal th = plat_thermal_read(); /* 15 KB, every CPU_ADAPT_THERMAL_S */
    const cpu_signals s = cpu_signals_of(&b, &th, &st->sig);
    return cpu_adapt_apply(st, p, &s);
}

/* The target is set: the session for the generating thread and the pool's. */
static void hint_open(cpu_adapt_state *st, tpool *p) {
    const double target_ms = lat_middle(st->cal, CPU_HINT_CALIBRATE);
    int tids[PLAT_PERF_HINT_MAX_TIDS];
    tids[0] = plat_thread_id(); /* 0 where the platform has no thread ids (POSIX): the hint is unsupported there */
    const int n = (tids[0] > 0) + tpool_thread_ids(p, tids + (tids[0] > 0), PLAT_PERF_HINT_MAX_TIDS - 1);
    err_t e = {0};
    const err_code rc = n ? plat_perf_hint_open(tids, n, (int64_t)(target_ms * 1e6), &st->hint, &e)
                          : plat_perf_hint_open_unsupported("no thread ids on this platform", &st->hint, &e);
    if (rc) {
        snprintf(st->hint_note, sizeof st->hint_note, "none: %.120s", e.msg);
        st->hint = NULL;
        return;
    }
    snprintf(st->hint_note, sizeof st->hint_note, "target %.2f ms a token, %d threads: %.100s", target_ms, n,
             plat_perf_hint_status(st->hint));
}

double cpu_adapt_pace(cpu_adapt_state *st, double now_s, double cpu_s) {
    const double q = st->sig.quota_cpus;
    if (st->fixed || q <= 0) return st->pace_wall_s = 0;
    double wait = 0;
    if (st->pace_wall_s > 0) {
        wait = (cpu_s - st->pace_cpu_s) / q - (now_s - st->pace_wall_s);
        wait = wait < 0 ? 0 : wait > CPU_PACE_MAX_S ? CPU_PACE_MAX_S : wait;
    }
    st->paced += wait > 0;
    st->pace_cpu_s = cpu_s, st->pace_wall_s = now_s + wait;
    return wait;
}

/* The probe's count, applied; a measured count kept becomes the one in force. */
static void probe(cpu_adapt_state *st, tpool *p, double per, double now_s) {
    if (st->fixed || st->pool < 2 || !st->files_threads) return; /* the files not read yet */
    bool kept = false;
    const int want = cpu_probe_step(&st->probe, per, now_s, st->threads, st->files_threads, &kept);
    if (want != tpool_active(p)) tpool_set_active(p, want);
    if (!kept) return;
    st->threads = want;
    st->changes++;
    st->cap = want < st->files_threads ? want : 0;
    set_spin(st, p);
    char why[CPU_WHY_LEN];
    bool cooling = st->cooling;
    cpu_adapt_choose(&st->sig, st->pool, &cooling, why, sizeof why);
    set_note(st, why);
}

void cpu_adapt_step(cpu_adapt_state *st, tpool *p, double ms, int tokens, double now_s) {
    if (tokens < 1 || !(ms >= 0)) return;
    const double per = ms / tokens;
    probe(st, p, per, now_s);
    if (st->n_cal < CPU_HINT_CALIBRATE) {
        st->cal[st->n_cal++] = per;
        if (st->n_cal == CPU_HINT_CALIBRATE) hint_open(st, p);
        else snprintf(st->hint_note, sizeof st->hint_note, "calibrating: %d of %d decode steps", st->n_cal, CPU_HINT_CALIBRATE);
        return;
    }
    if (st->hint && plat_perf_hint_supported(st->hint)) plat_perf_hint_report(st->hint, (int64_t)(per * 1e6));
}

void cpu_adapt_end(cpu_adapt_state *st, tpool *p) {
    if (!st->fixed && st->pool >= 2) tpool_set_active(p, cpu_probe_drop(&st->probe, st->threads, false));
    if (st->hint && plat_perf_hint_supported(st->hint)) {
        const size_t len = strlen(st->hint_note);
        snprintf(st->hint_note + len, sizeof st->hint_note - len, "; util_min %u at the end",
                 plat_perf_hint_util_min(st->hint));
    }
    plat_perf_hint_close(st->hint);
    st->hint = NULL;
    st->n_cal = 0;
}
