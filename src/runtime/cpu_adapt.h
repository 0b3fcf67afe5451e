/*
 * cpu_adapt — how many threads octo computes on, for the CPU the process
 * really has (issue 38), re-decided while it runs.
 *
 * A CPU quota (a container's, or a phone's cgroup for background apps)
 * gives the process's threads together so many CPU-microseconds a period.
 * Threads that wait for each other at every job burn it faster than they
 * finish work: measured on a 2-vCPU EPYC with the 1.1B Q4_0 model, decode
 * under a one-CPU quota gives 27.9 tok/s on 2 threads and 41.8 on 1; under
 * one and a half CPUs, 56.1 on 2 threads and 35.0 on 1. So:
 *
 *   signal                                    threads
 *   a quota of q CPUs (cgroup, platform/     q rounded half up, at least 1,
 *   cpuquota.h), or fewer allowed cores      at most the pool's
 *   none known                                the pool's (as planned at load)
 *   a thermal zone past its passive trip      one fewer, until it is 5 C below
 *   (platform/thermal.h)                      the trip again
 *
 * How the workers wait. An idle worker spins for the next job before it
 * sleeps; on a free core that saves a wake-up, under a quota it burns CPU
 * time the working threads needed. With a quota under the threads in force
 * the workers spin CPU_ADAPT_SPIN_QUOTA rounds, else the pool's default.
 * Measured with the 1.1B Q4_0 model, 2 threads, 6 alternated runs each
 * (docs/adaptation.md): under a 1.5-CPU quota, 64 rounds decode at 45.0
 * tok/s against 42.6 with the default; with no quota they would lose 8 %.
 *
 * Pacing. A cgroup quota lets the process run so much of each period
 * (100 ms by default) and then stops it for the rest: tokens come in a
 * burst, then a gap. So while a quota is in force, each token waits until
 * the wall time since the last one covers the CPU time the process spent
 * (all its threads) over the quota: the same tokens a second, evenly
 * spaced. A step that was throttled anyway waits nothing; no wait is
 * longer than CPU_PACE_MAX_S.
 *
 * The threads asked by the app (octo_client_options.n_threads) are never
 * changed. The figures are read again every CPU_ADAPT_PERIOD_S (thermal
 * every CPU_ADAPT_THERMAL_S), between tokens; a change is applied with
 * tpool_set_active, and its reason kept for octo_stats (cpu_note).
 *
 * The measured signal (runtime/cpu_probe.h): a few decode steps on one
 * thread fewer (or more) now and then, or when the steps slow down; a count
 * found faster is kept as a cap under the files' count, until a later probe
 * finds more threads faster again or the files' count changes.
 *
 * The performance hint (platform/perfhint.h). Each generation's first
 * CPU_HINT_CALIBRATE decode steps set its target: the median time a token
 * took (a step's time over the tokens it delivered). A hint session is
 * then opened for the generating thread and the pool's, and told each
 * step's time a token, so that a device which slows down (clocks, a
 * little core) is asked to keep that pace. Where the system has no such
 * hint the session says why, and nothing else changes.
 */
#ifndef OCTO_RUNTIME_CPU_ADAPT_H
#define OCTO_RUNTIME_CPU_ADAPT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "platform/cpuquota.h"
#include "platform/perfhint.h"
#include "platform/thermal.h"
#include "runtime/cpu_probe.h"

#define CPU_ADAPT_PERIOD_S 0.5
#define CPU_ADAPT_THERMAL_S 2.0
#define CPU_ADAPT_SPIN_QUOTA 64
#define CPU_PACE_MAX_S 0.2
#define CPU_ADAPT_COOL_MC 5000 /* below the passive trip by this much before a thread comes back */
#define CPU_HINT_CALIBRATE 8
#define CPU_WHY_LEN 200 /* cpu_adapt_choose's reason */

/* What the platform said, last read. */
typedef struct {
    double effective_cpus; /* plat_cpu_budget's; 0: unknown */
    double quota_cpus;     /* > 0: a cgroup quota */
    int allowed_cpus;      /* 0: unknown */
    bool thermal_known;
    int thermal_zone;
    int64_t thermal_headroom_mc; /* to the nearest passive trip; < 0 past it */
} cpu_signals;

typedef struct {
    bool fixed;       /* the app asked for a thread count */
    int pool;         /* threads in the pool */
    int threads;      /* in force */
    bool cooling;     /* a thread given up for heat, not back yet */
    unsigned changes; /* times the count changed */
    double next_read_s, next_thermal_s;
    cpu_signals sig;
    char note[CPU_WHY_LEN + 200]; /* the count in force and why */
    /* the measured signal (above) */
    int files_threads; /* the count the files give (cpu_adapt_choose) */
    int cap;           /* a measured cap under it; 0: none */
    cpu_probe probe;
    double pace_cpu_s, pace_wall_s; /* the process's CPU time and the wall time when the last token was due; 0: none */
    unsigned paced;                 /* tokens that waited */
    /* the performance hint of the generation running */
    plat_perf_hint *hint;
    double cal[CPU_HINT_CALIBRATE]; /* the first steps' times a token, ms */
    int n_cal;
    char hint_note[160]; /* the last generation's hint: its target and state, or why none */
} cpu_adapt_state;

/* The signals of a budget and a thermal reading (th NULL: not read: the
 * thermal fields of prev kept). */
cpu_signals cpu_signals_of(const plat_cpu_budget *b, const plat_thermal *th, const cpu_signals *prev);

/* The threads for signals s on a pool of n (pure: no I/O). cooling is in
 * and out: whether a thread is held back for heat (the hysteresis). why
 * gets the reason. */
int cpu_adapt_choose(const cpu_signals *s, int n, bool *cooling, char *why, size_t why_n);

/* Starts on pool p: fixed when the app asked for its threads. */
void cpu_adapt_init(cpu_adapt_state *st, tpool *p, bool fixed);
/* Reads the signals when due and applies their count to p; true when the
 * count changed. Call between jobs, from the thread that runs them. */
bool cpu_adapt_poll(cpu_adapt_state *st, tpool *p, double now_s);
/* The same with the signals given (tests: a fake device). */
bool cpu_adapt_apply(cpu_adapt_state *st, tpool *p, const cpu_signals *s);

/* How long the next token should wait (seconds) so that the process's CPU
 * time cpu_s, at now_s, is spent evenly under the quota (0: none). */
double cpu_adapt_pace(cpu_adapt_state *st, double now_s, double cpu_s);

/* A decode step of the generation running took ms and delivered tokens,
 * at now_s: the measured signal's probe, and the hint (it calibrates the
 * target, opens the session, then reports). From the generating thread. */
void cpu_adapt_step(cpu_adapt_state *st, tpool *p, double ms, int tokens, double now_s);
/* The generation ended: its hint session closed (its note kept), a probe
 * not finished abandoned (the count it left restored). */
void cpu_adapt_end(cpu_adapt_state *st, tpool *p);

#endif
