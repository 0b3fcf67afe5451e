/*
 * cpu_probe — see cpu_probe.h.
 */
#include "cpu_probe.h"

#include "core/latency.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(CPU_PROBE_STEPS <= LAT_FEW, "lat_middle takes the probe's steps");

/* A probe is over: the count in force is calibrated afresh from ref_ms. */
static int finish(cpu_probe *pr, int count, double ref_ms) {
    pr->trying = false;
    pr->probes++;
    pr->ref_ms = ref_ms;
    pr->ring_n = pr->ring_i = 0;
    return count;
}

static int trial_step(cpu_probe *pr, double per_ms, double now_s, int files, bool *kept) {
    pr->trial[pr->n++] = per_ms;
    if (pr->n == CPU_PROBE_EARLY) {
        bool lost = true;
        for (int i = 0; i < CPU_PROBE_EARLY; i++) lost = lost && pr->trial[i] > pr->base_ms;
        if (lost) return finish(pr, pr->from, pr->base_ms);
    }
    if (pr->n < CPU_PROBE_STEPS) return pr->to;
    const double other = lat_middle(pr->trial, CPU_PROBE_STEPS);
    if (!(other < pr->base_ms * (1.0 - CPU_PROBE_GAIN))) return finish(pr, pr->from, pr->base_ms);
    pr->kept++;
    *kept = true;
    if (pr->to < files && pr->next_s > now_s + CPU_PROBE_UP_S) pr->next_s = now_s + CPU_PROBE_UP_S; /* a cap now */
    snprintf(pr->note, sizeof pr->note, "measured: %d thread%s %.1f ms a token against %d %.1f (%s)", pr->to,
             pr->to == 1 ? "" : "s", other, pr->from, pr->base_ms, pr->why);
    return finish(pr, pr->to, other);
}

/* Whether a probe is due on the last steps' median m, and why. */
static bool due(cpu_probe *pr, double m, double now_s, bool capped) {
    const double ref = pr->ref_ms;
    pr->ref_ms = ref == 0 || m < ref ? m : ref + (m - ref) * CPU_PROBE_TRACK;
    if (ref > 0 && now_s >= pr->last_s + CPU_PROBE_MIN_S &&
        (m > ref * (1.0 + CPU_PROBE_DRIFT) || (capped && m < ref * (1.0 - CPU_PROBE_DRIFT)))) {
        snprintf(pr->why, sizeof pr->why, "steps %.0f %% %s than calibrated", 100.0 * (m > ref ? m / ref - 1 : 1 - m / ref),
                 m > ref ? "slower" : "faster");
        return true;
    }
    if (now_s < pr->next_s) return false;
    snprintf(pr->why, sizeof pr->why, "every %.0f s", capped ? CPU_PROBE_UP_S : CPU_PROBE_EVERY_S);
    return true;
}

int cpu_probe_step(cpu_probe *pr, double per_ms, double now_s, int threads, int files, bool *kept) {
    *kept = false;
    if (pr->trying) return trial_step(pr, per_ms, now_s, files, kept);
    if (!pr->started) pr->started = true, pr->next_s = now_s + CPU_PROBE_FIRST_S, pr->last_s = now_s;
    pr->ring[pr->ring_i] = per_ms;
    pr->ring_i = (pr->ring_i + 1) % CPU_PROBE_STEPS;
    if (++pr->ring_n < CPU_PROBE_STEPS) return threads;
    pr->ring_n = CPU_PROBE_STEPS;
    const bool capped = threads < files;
    if (!due(pr, lat_middle(pr->ring, CPU_PROBE_STEPS), now_s, capped)) return threads;
    pr->next_s = now_s + (capped ? CPU_PROBE_UP_S : CPU_PROBE_EVERY_S), pr->last_s = now_s;
    const int to = capped ? threads + 1 : threads - 1;
    if (to < 1) return threads;
    pr->trying = true, pr->from = threads, pr->to = to, pr->n = 0;
    pr->base_ms = lat_middle(pr->ring, CPU_PROBE_STEPS);
    return to;
}

int cpu_probe_drop(cpu_probe *pr, int threads, bool recalibrate) {
    const int restore = pr->trying ? pr->from : threads;
    pr->trying = false;
    if (recalibrate) pr->ring_n = pr->ring_i = 0, pr->ref_ms = 0;
    return restore;
}
