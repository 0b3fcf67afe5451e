/*
 * cpu_probe — the measured signal of cpu_adapt (issue 38): whether fewer (or
 * more) threads would decode faster, found by trying, where no file says so.
 *
 * The files (platform/cpuquota.h, thermal.h) do not show every slowdown:
 * another process busy on a core, clocks a phone lowers without a cgroup.
 * So the time a token of each decode step is kept, and the median of the
 * last CPU_PROBE_STEPS is weighed against the calibrated cost at the count
 * in force (the lowest such median since the count was set). A probe runs
 * CPU_PROBE_STEPS steps on one thread fewer (or, under a measured cap, one
 * more) and compares their median with the last steps' before it:
 *
 *   when                                          probe
 *   every CPU_PROBE_EVERY_S (the first            one fewer
 *   CPU_PROBE_FIRST_S after decoding starts)
 *   under a measured cap, every CPU_PROBE_UP_S    one more
 *   the steps CPU_PROBE_DRIFT slower than         the same, at most every
 *   calibrated (or faster, under a cap)           CPU_PROBE_MIN_S
 *
 * Under a cap the probes come often because being wrong costs more there:
 * measured with the 1.1B model, a neighbour spinning on one of two cores
 * makes 2 threads 0.7x of 1, but 1 thread on a quiet machine is 0.5x of 2,
 * and the neighbour leaving does not make the 1 thread any faster, so
 * only a probe can see it. The calibrated cost is the lowest median seen
 * at the count in force, drawn up CPU_PROBE_TRACK of the way to each
 * slower one (a longer context is slower work, not a slower device);
 * it is measured afresh when the count changes.
 *
 * The other count is kept when CPU_PROBE_GAIN faster; otherwise the count
 * goes back. A probe whose other count is slower at each of its first
 * CPU_PROBE_EARLY steps stops there: on a quiet machine a probe costs three
 * steps on one thread fewer every 10 s. Pure: no clock, no pool; the caller
 * applies the count returned.
 */
#ifndef OCTO_RUNTIME_CPU_PROBE_H
#define OCTO_RUNTIME_CPU_PROBE_H

#include <stdbool.h>

#define CPU_PROBE_STEPS 6
#define CPU_PROBE_EARLY 3
#define CPU_PROBE_FIRST_S 2.0
#define CPU_PROBE_EVERY_S 10.0
#define CPU_PROBE_MIN_S 2.0
#define CPU_PROBE_UP_S 2.0
#define CPU_PROBE_TRACK 0.05
#define CPU_PROBE_DRIFT 0.25
#define CPU_PROBE_GAIN 0.05

typedef struct {
    double ring[CPU_PROBE_STEPS]; /* the last steps' times a token, ms */
    int ring_n, ring_i;
    double ref_ms;                /* calibrated at the count in force; 0: not yet */
    bool started, trying;
    int from, to, n;
    double base_ms, trial[CPU_PROBE_STEPS];
    double next_s, last_s;
    unsigned probes, kept;
    char why[48];   /* what started the probe running or last run */
    char note[118]; /* the last probe that changed the count */
} cpu_probe;

/* A decode step took per_ms a token at now_s, on `threads` of the `files`
 * count the platform allows: returns the count the next step runs on.
 * *kept is set when that count is a measured one now in force (pr->note
 * says why). */
int cpu_probe_step(cpu_probe *pr, double per_ms, double now_s, int threads, int files, bool *kept);

/* The generation ended, or (recalibrate) the count changed for another
 * reason: a probe running is dropped; returns the count to restore
 * (threads when none ran). */
int cpu_probe_drop(cpu_probe *pr, int threads, bool recalibrate);

#endif
