/*
 * test_cpu_adapt — the threads octo computes on for the CPU it really has
 * (runtime/cpu_adapt.h, issue 38): the pool's active count (jobs see it,
 * parked workers never run a job, growing and shrinking between jobs), the
 * choice for quotas and heat with its hysteresis, and a fake thermal tree
 * whose zone passes its passive trip while jobs run: the count changes and
 * the note says why.
 */
#include <dirent.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/threadpool.h"
#include "platform/platform.h"
#include "runtime/cpu_adapt.h"
#include "t.h"
#include "util.h"

#define T_STR_EQ(a, b) T_CHECKF(!strcmp((a), (b)), "\"%s\" is not \"%s\"", (a), (b))

typedef struct {
    atomic_int calls[4];
    atomic_int bad_nth;
    int want_nth;
} job;

static void count(void *ctx, int ith, int nth) {
    job *j = ctx;
    if (nth != j->want_nth || ith >= nth) atomic_fetch_add(&j->bad_nth, 1);
    if (ith < 4) atomic_fetch_add(&j->calls[ith], 1);
}

static void run_jobs(tpool *p, job *j, int n) {
    j->want_nth = tpool_active(p);
    for (int i = 0; i < n; i++) tpool_run(p, count, j);
}

/* Each job runs on exactly the active threads, with nth their count. */
static void test_active(void) {
    tpool *p = NULL;
    T_EQ_INT(tpool_new(3, &p, NULL), ERR_OK);
    if (!p) return;
    job j = {0};
    T_EQ_INT(tpool_active(p), 3);
    run_jobs(p, &j, 100);
    T_EQ_INT(tpool_set_active(p, 1), 1);
    run_jobs(p, &j, 100);
    T_EQ_INT(tpool_set_active(p, 2), 2);
    run_jobs(p, &j, 100);
    T_CHECK(atomic_load(&j.calls[0]) == 300 && atomic_load(&j.calls[1]) == 200 && atomic_load(&j.calls[2]) == 100);
    /* shrinking and growing between every few jobs: no job lost, none run twice */
    memset(&j, 0, sizeof j);
    int want[3] = {0};
    for (int i = 0; i < 600; i++) {
        const int a = tpool_set_active(p, 1 + i % 3);
        run_jobs(p, &j, 3);
        for (int t = 0; t < a; t++) want[t] += 3;
    }
    for (int t = 0; t < 3; t++) T_EQ_INT(atomic_load(&j.calls[t]), want[t]);
    T_EQ_INT(atomic_load(&j.bad_nth), 0);
    T_EQ_INT(tpool_set_active(p, 9), 3); /* clamped */
    T_EQ_INT(tpool_set_active(p, 0), 1);
    tpool_set_spin(p, 1); /* workers that barely spin still take every job */
    T_EQ_INT(tpool_set_active(p, 3), 3);
    memset(&j, 0, sizeof j);
    run_jobs(p, &j, 50);
    T_CHECK(atomic_load(&j.calls[1]) == 50 && atomic_load(&j.calls[2]) == 50);
    tpool_free(p);
}

static int pick(cpu_signals s, int n, bool *cooling, char *why) { return cpu_adapt_choose(&s, n, cooling, why, 200); }

/* The count for quotas, cores and heat; the hysteresis of heat. */
static void test_choose(void) {
    char why[200];
    bool cool = false;
    T_EQ_INT(pick((cpu_signals){0}, 2, &cool, why), 2);
    T_STR_EQ(why, "2 of 2 threads: no CPU quota or core count known");
    T_EQ_INT(pick((cpu_signals){.effective_cpus = 1.0, .quota_cpus = 1.0}, 2, &cool, why), 1);
    T_STR_EQ(why, "1 of 2 threads: a CPU quota of 1.00 CPUs");
    T_EQ_INT(pick((cpu_signals){.effective_cpus = 0.5, .quota_cpus = 0.5}, 2, &cool, why), 1);
    T_EQ_INT(pick((cpu_signals){.effective_cpus = 1.5, .quota_cpus = 1.5}, 2, &cool, why), 2); /* half up */
    T_EQ_INT(pick((cpu_signals){.effective_cpus = 1.49, .quota_cpus = 1.49}, 4, &cool, why), 1);
    T_EQ_INT(pick((cpu_signals){.effective_cpus = 3, .quota_cpus = 6, .allowed_cpus = 3}, 8, &cool, why), 3);
    T_STR_EQ(why, "3 of 8 threads: 3.00 CPUs to run on");
    T_EQ_INT(pick((cpu_signals){.effective_cpus = 8}, 4, &cool, why), 4); /* never past the pool */
    const cpu_signals hot = {.effective_cpus = 4, .thermal_known = true, .thermal_zone = 1, .thermal_headroom_mc = -1500};
    T_EQ_INT(pick(hot, 4, &cool, why), 3);
    T_CHECK(cool);
    T_STR_EQ(why, "3 of 4 threads: 4.00 CPUs to run on; one fewer: thermal zone 1 is past its passive trip (1.5 C over)");
    cpu_signals warm = hot;
    warm.thermal_headroom_mc = 2000; /* below the trip, not by 5 C: still one fewer */
    T_EQ_INT(pick(warm, 4, &cool, why), 3);
    T_CHECK(strstr(why, "has not cooled below its passive trip (2.0 C under)") != NULL);
    warm.thermal_headroom_mc = 5000;
    T_EQ_INT(pick(warm, 4, &cool, why), 4);
    T_CHECK(!cool);
    warm.thermal_headroom_mc = 2000; /* not cooling: 2 C under is fine */
    T_EQ_INT(pick(warm, 4, &cool, why), 4);
    cool = true;
    T_EQ_INT(pick((cpu_signals){.effective_cpus = 1, .thermal_known = true, .thermal_headroom_mc = -9000}, 4, &cool, why), 1);
}

/* ---- a fake thermal tree */

static void put(const char *root, const char *rel, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    mkdir(path, 0700);
    *slash = '/';
    FILE *f = fopen(path, "w");
    T_CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void remove_zone(const char *root) {
    static const char *const files[] = {"type", "temp", "trip_point_0_temp", "trip_point_0_type"};
    char path[1024];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/thermal_zone0/%s", root, files[i]);
        remove(path);
    }
    snprintf(path, sizeof path, "%s/thermal_zone0", root);
    rmdir(path);
    rmdir(root);
}

/* The signals the poll would make: this budget, the fake tree's heat. */
static cpu_signals read_fake(const char *root, const cpu_signals *prev) {
    const plat_cpu_budget b = {.quota_state = PLAT_CPU_QUOTA_NONE, .allowed_cpus = 2, .online_cpus = 2, .effective_cpus = 2};
    const plat_thermal th = plat_thermal_read_at(root);
    return cpu_signals_of(&b, &th, prev);
}

/* A zone passes its passive trip (70 C) while jobs run: a thread goes, and
 * comes back only once the zone is 5 C below the trip. */
static void test_thermal_mid_run(void) {
    char root[512];
    tu_tmp_path(root, sizeof root, "cpu_adapt_thermal");
    remove_zone(root);
    T_CHECK(mkdir(root, 0700) == 0);
    put(root, "thermal_zone0/type", "cpu-thermal\n");
    put(root, "thermal_zone0/trip_point_0_temp", "70000\n");
    put(root, "thermal_zone0/trip_point_0_type", "passive\n");
    put(root, "thermal_zone0/temp", "60000\n");
    tpool *p = NULL;
    T_EQ_INT(tpool_new(2, &p, NULL), ERR_OK);
    if (!p) return;
    cpu_adapt_state st;
    cpu_adapt_init(&st, p, false);
    job j = {0};
    static const struct {
        const char *temp;
        int threads;
        const char *why;
    } steps[] = {
        {"60000\n", 2, "2 of 2 threads: 2.00 CPUs to run on"},
        {"71000\n", 1, "1 of 2 threads: 2.00 CPUs to run on; one fewer: thermal zone 0 is past its passive trip (1.0 C over)"},
        {"67000\n", 1, "1 of 2 threads: 2.00 CPUs to run on; one fewer: thermal zone 0 has not cooled below its passive trip (3.0 C under)"},
        {"64000\n", 2, "2 of 2 threads: 2.00 CPUs to run on"},
    };
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        put(root, "thermal_zone0/temp", steps[i].temp);
        const cpu_signals s = read_fake(root, &st.sig);
        cpu_adapt_apply(&st, p, &s);
        run_jobs(p, &j, 20);
        printf("zone at %.1f C: %d threads (%s)\n", atoi(steps[i].temp) / 1000.0, st.threads, st.note);
        T_EQ_INT(st.threads, steps[i].threads);
        T_EQ_INT(tpool_active(p), steps[i].threads);
        T_STR_EQ(st.note, steps[i].why);
    }
    T_EQ_INT(st.changes, 2);
    T_EQ_INT(atomic_load(&j.calls[1]), 40); /* the two steps at 2 threads */
    T_EQ_INT(atomic_load(&j.bad_nth), 0);
    /* threads the app asked for are never changed */
    cpu_adapt_init(&st, p, true);
    put(root, "thermal_zone0/temp", "90000\n");
    const cpu_signals s = read_fake(root, &st.sig);
    T_CHECK(!cpu_adapt_apply(&st, p, &s));
    T_EQ_INT(tpool_active(p), 2);
    T_STR_EQ(st.note, "2 threads, as asked");
    T_CHECK(!cpu_adapt_poll(&st, p, 1e9));
    tpool_free(p);
    remove_zone(root);
}

/* This machine: the poll reads the real files and picks a count in range. */
static void test_poll_real(void) {
    tpool *p = NULL;
    T_EQ_INT(tpool_new(2, &p, NULL), ERR_OK);
    if (!p) return;
    cpu_adapt_state st;
    cpu_adapt_init(&st, p, false);
    cpu_adapt_poll(&st, p, 1.0);
    printf("this machine: %s\n", st.note);
    T_CHECK(st.threads >= 1 && st.threads <= 2 && st.threads == tpool_active(p));
    T_CHECK(st.sig.effective_cpus >= 0);
    const unsigned changes = st.changes;
    T_CHECK(!cpu_adapt_poll(&st, p, 1.1)); /* not due: within CPU_ADAPT_PERIOD_S */
    T_EQ_INT(st.changes, changes);
    tpool_free(p);
}

/* The hint's target is the median time a token of the first 8 decode
 * steps (a step's time over its tokens); then a session is open, and the
 * end of the generation closes it. */
static void test_hint(void) {
    tpool *p = NULL;
    T_EQ_INT(tpool_new(3, &p, NULL), ERR_OK);
    if (!p) return;
    job j = {0};
    run_jobs(p, &j, 1); /* every worker has run, so its id is known */
    cpu_adapt_state st;
    cpu_adapt_init(&st, p, false);
    static const double ms[8] = {10, 30, 12, 8, 50, 11, 9, 14};
    static const int tokens[8] = {1, 3, 1, 1, 2, 1, 1, 1}; /* a token each: 10 10 12 8 25 11 9 14 */
    for (int i = 0; i < 7; i++) cpu_adapt_step(&st, p, ms[i], tokens[i], 0);
    T_STR_EQ(st.hint_note, "calibrating: 7 of 8 decode steps");
    T_CHECK(st.hint == NULL);
    cpu_adapt_step(&st, p, 0, 0, 0); /* no token: not a step */
    T_EQ_INT(st.n_cal, 7);
    cpu_adapt_step(&st, p, ms[7], tokens[7], 0);
    printf("hint: %s\n", st.hint_note);
    T_CHECK(!strncmp(st.hint_note, "target 11.00 ms a token, ", 25));
    if (!strcmp(plat_name(), "linux")) /* this thread and 2 workers; the POSIX fallback knows no thread ids */
        T_CHECK(!strncmp(st.hint_note, "target 11.00 ms a token, 3 threads: ", 36));
    else
        T_CHECK(!strncmp(st.hint_note, "target 11.00 ms a token, 0 threads: unsupported", 47));
    T_CHECK(st.hint != NULL);
    for (int i = 0; i < 20; i++) cpu_adapt_step(&st, p, 30, 1, 0); /* late tokens: reported, whatever the system does */
    cpu_adapt_end(&st, p);
    T_CHECK(st.hint == NULL && st.n_cal == 0);
    T_CHECK(!strncmp(st.hint_note, "target 11.00 ms", 15)); /* the note outlives the session */
    tpool_free(p);
}

/* A fake device: a step's time a token for each count of threads. */
static void steps(cpu_adapt_state *st, tpool *p, const double ms_at[3], int n, double *now) {
    for (int i = 0; i < n; i++, *now += 0.05) cpu_adapt_step(st, p, ms_at[tpool_active(p)], 1, *now);
}

/* The measured signal: another process on a core makes 2 threads slower
 * than 1 though the files say 2 CPUs; the probe finds it and keeps 1 as a
 * cap; when the steps get faster the cap is tried again and 2 come back;
 * steps that slow down start a probe before its time; a probe that does not
 * pay stops early and changes nothing; new files' figures drop the cap; a
 * generation ending mid-probe restores the count. */
/* Idle workers spin briefly only while a quota is under the threads in force. */
static void test_spin(void) {
    tpool *p = NULL;
    T_EQ_INT(tpool_new(2, &p, NULL), ERR_OK);
    if (!p) return;
    cpu_adapt_state st;
    cpu_adapt_init(&st, p, false);
    const cpu_signals q15 = {.effective_cpus = 1.5, .quota_cpus = 1.5}, q1 = {.effective_cpus = 1, .quota_cpus = 1},
                      none = {.effective_cpus = 2};
    cpu_adapt_apply(&st, p, &q15);
    T_CHECK(st.threads == 2 && tpool_spin(p) == CPU_ADAPT_SPIN_QUOTA);
    cpu_adapt_apply(&st, p, &q1);
    T_CHECK(st.threads == 1 && tpool_spin(p) == tpool_spin_default());
    cpu_adapt_apply(&st, p, &q15);
    T_EQ_INT(tpool_spin(p), CPU_ADAPT_SPIN_QUOTA);
    cpu_adapt_apply(&st, p, &none);
    T_CHECK(st.threads == 2 && tpool_spin(p) == tpool_spin_default());
    tpool_free(p);
}

/* Pacing: under a half-CPU quota a token that used 27 ms of CPU in 27 ms
 * waits 27 more; one that was throttled anyway waits nothing; no quota, no
 * wait; at most CPU_PACE_MAX_S; the app's own threads never. */
static void test_pace(void) {
    tpool *p = NULL;
    T_EQ_INT(tpool_new(2, &p, NULL), ERR_OK);
    if (!p) return;
    cpu_adapt_state st;
    cpu_adapt_init(&st, p, false);
    const cpu_signals half = {.effective_cpus = 0.5, .quota_cpus = 0.5}, none = {.effective_cpus = 2};
    cpu_adapt_apply(&st, p, &none);
    T_NEAR(cpu_adapt_pace(&st, 1.0, 1.0), 0, 0);
    T_NEAR(cpu_adapt_pace(&st, 1.1, 1.2), 0, 0);
    cpu_adapt_apply(&st, p, &half);
    T_NEAR(cpu_adapt_pace(&st, 2.0, 2.0), 0, 0);          /* the first token under the quota: the mark */
    T_NEAR(cpu_adapt_pace(&st, 2.027, 2.027), 0.027, 1e-9); /* 27 ms of CPU: 54 ms of wall */
    T_NEAR(cpu_adapt_pace(&st, 2.081, 2.054), 0.027, 1e-9); /* after the wait, the same */
    T_NEAR(cpu_adapt_pace(&st, 2.185, 2.081), 0, 0);      /* throttled: 27 ms of CPU took 77 */
    T_NEAR(cpu_adapt_pace(&st, 2.2, 3.081), CPU_PACE_MAX_S, 1e-9);
    T_EQ_INT((int)st.paced, 3);
    cpu_adapt_apply(&st, p, &none);
    T_NEAR(cpu_adapt_pace(&st, 3.0, 4.0), 0, 0);
    cpu_adapt_state fixed;
    cpu_adapt_init(&fixed, p, true);
    cpu_adapt_apply(&fixed, p, &half);
    cpu_adapt_pace(&fixed, 1.0, 1.0);
    T_NEAR(cpu_adapt_pace(&fixed, 1.027, 1.027), 0, 0);
    tpool_free(p);
}

/* The calibrated cost follows work that slowly gets longer (a context that
 * grows: twice as slow over 150 steps) without a probe, and a sudden
 * slowdown (a neighbour) starts one within a few steps. */
static void test_probe_drift(void) {
    cpu_probe pr = {0};
    bool kept = false;
    double now = 0, ms = 12;
    for (; now < CPU_PROBE_FIRST_S; now += 0.05) T_EQ_INT(cpu_probe_step(&pr, ms, now, 2, 2, &kept), 2);
    T_EQ_INT(cpu_probe_step(&pr, ms, now, 2, 2, &kept), 1); /* the first probe: 1 thread is slower */
    for (int i = 0; i < CPU_PROBE_EARLY; i++) cpu_probe_step(&pr, 20, now += 0.05, 1, 2, &kept);
    T_CHECK(!pr.trying && pr.probes == 1 && !kept);
    int moved = 0;
    for (int i = 0; i < 150; i++, now += 0.05) moved += cpu_probe_step(&pr, ms *= 1.005, now, 2, 2, &kept) != 2;
    T_CHECK(moved == 0 && pr.probes == 1 && now < CPU_PROBE_FIRST_S + CPU_PROBE_EVERY_S);
    printf("drift: %.1f ms a token, calibrated %.1f\n", ms, pr.ref_ms);
    int step = 0;
    while (cpu_probe_step(&pr, ms * 2.5, now += 0.05, 2, 2, &kept) == 2 && step < 10) step++;
    T_CHECK(pr.trying && step == CPU_PROBE_STEPS / 2 - 1 && !strncmp(pr.why, "steps 1", 7)); /* the median: half the ring */
    printf("jump: started after %d steps: %s\n", step + 1, pr.why);
}

static void test_probe(void) {
    tpool *p = NULL;
    T_EQ_INT(tpool_new(2, &p, NULL), ERR_OK);
    if (!p) return;
    cpu_adapt_state st;
    cpu_adapt_init(&st, p, false);
    const cpu_signals two = {.effective_cpus = 2};
    cpu_adapt_apply(&st, p, &two);
    T_EQ_INT(st.threads, 2);
    double now = 0;
    const double busy[3] = {0, 30, 40}, free_[3] = {0, 20, 12};
    steps(&st, p, busy, 40, &now); /* the first CPU_PROBE_FIRST_S of decoding: no probe */
    T_CHECK(!st.probe.trying && tpool_active(p) == 2 && st.probe.probes == 0);
    now = CPU_PROBE_FIRST_S; /* due: the last steps are the baseline, the next on 1 */
    steps(&st, p, busy, 1, &now);
    T_CHECK(st.probe.trying && tpool_active(p) == 1 && st.threads == 2);
    steps(&st, p, busy, CPU_PROBE_STEPS, &now);
    printf("probe: %s\n", st.note);
    T_CHECK(st.threads == 1 && st.cap == 1 && tpool_active(p) == 1 && st.probe.probes == 1 && st.probe.kept == 1);
    T_STR_EQ(st.note, "1 of 2 threads: measured: 1 thread 30.0 ms a token against 2 40.0 (every 10 s); the files allow "
                      "2 of 2 threads: 2.00 CPUs to run on");
    cpu_adapt_apply(&st, p, &two); /* the files say the same: the cap holds */
    T_EQ_INT(tpool_active(p), 1);
    steps(&st, p, busy, 30, &now); /* steady, within CPU_PROBE_UP_S: no probe */
    T_EQ_INT(st.probe.probes, 1);
    steps(&st, p, free_, 3 * CPU_PROBE_STEPS, &now); /* the other process left: under a cap, 2 are tried again */
    printf("back: %s\n", st.probe.note);
    T_CHECK(st.threads == 2 && st.cap == 0 && tpool_active(p) == 2 && st.probe.probes == 2 && st.probe.kept == 2);
    T_CHECK(!strncmp(st.probe.note, "measured: 2 threads 12.0 ms a token against 1 ", strlen("measured: 2 threads 12.0 ms a token against 1 ")));
    now += CPU_PROBE_MIN_S; /* it came back: steps slower than calibrated start a probe */
    steps(&st, p, busy, 2 * CPU_PROBE_STEPS, &now);
    T_CHECK(st.threads == 1 && st.cap == 1 && st.probe.probes == 3 && strstr(st.note, "233 % slower") != NULL);
    cpu_adapt_end(&st, p);
    cpu_adapt_apply(&st, p, &two);
    now += CPU_PROBE_EVERY_S; /* a probe that does not pay stops after CPU_PROBE_EARLY steps */
    for (int i = 0; i < 2 * CPU_PROBE_STEPS && !st.probe.trying; i++) steps(&st, p, busy, 1, &now);
    steps(&st, p, busy, CPU_PROBE_EARLY - 1, &now);
    T_CHECK(st.probe.trying && tpool_active(p) == 2);
    steps(&st, p, busy, 1, &now);
    T_CHECK(!st.probe.trying && st.threads == 1 && tpool_active(p) == 1 && st.probe.probes == 4 && st.probe.kept == 3);
    const cpu_signals quota = {.effective_cpus = 1, .quota_cpus = 1}; /* the files' new count drops the cap */
    cpu_adapt_apply(&st, p, &quota);
    T_CHECK(st.cap == 0 && st.threads == 1 && tpool_active(p) == 1);
    T_STR_EQ(st.note, "1 of 2 threads: a CPU quota of 1.00 CPUs");
    cpu_adapt_apply(&st, p, &two); /* the quota lifted: 2, no cap left */
    T_CHECK(st.cap == 0 && st.threads == 2 && tpool_active(p) == 2);
    now += CPU_PROBE_EVERY_S; /* a generation that ends in the middle of a probe leaves the count as it was */
    steps(&st, p, free_, CPU_PROBE_STEPS + 2, &now);
    T_CHECK(st.probe.trying && tpool_active(p) == 1);
    cpu_adapt_end(&st, p);
    T_CHECK(tpool_active(p) == 2 && !st.probe.trying && st.threads == 2);
    tpool_free(p);
}

int main(void) {
    test_active();
    test_probe();
    test_probe_drift();
    test_spin();
    test_pace();
    test_hint();
    test_choose();
    test_thermal_mid_run();
    test_poll_real();
    T_DONE();
}
