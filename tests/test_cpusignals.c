/*
 * test_cpusignals — the CPU the process really has (issue 38), as the
 * platform room reads it. The quota parsers (v1's -1 and numbers, v2's
 * "max" and numbers, malformed texts); the CPU budget of fake v1 and v2
 * cgroup trees (a folder above tighter, none at all, throttle counters, a
 * malformed file making the answer unknown, the affinity mask's count as
 * the bound); cpufreq clocks present and absent; thermal zones with trip
 * points below and past; the performance-hint session over a fake system
 * call both ways: supported (the clamps follow the reported durations by
 * the documented law) and unsupported (the reason, calls that do nothing).
 * Then this build's own answers on this machine, checked for consistency.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/cpu.h"
#include "platform/cpuquota.h"
#include "platform/perfhint.h"
#include "platform/platform.h"
#include "platform/thermal.h"
#include "t.h"
#include "util.h"

static bool is_linux(void) { return !strcmp(plat_name(), "linux"); }

/* ---- fake trees */

/* root/rel = text, the folders on the way made. */
static void put(const char *root, const char *rel, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *s = strchr(path + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(path, 0700);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    T_CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void unput(const char *root, const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    T_CHECK(remove(path) == 0);
}

static void remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        remove(path);
        return;
    }
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        remove_tree(sub);
    }
    closedir(d);
    rmdir(path);
}

static void tree_new(char *root, size_t n, const char *name) {
    tu_tmp_path(root, n, name);
    remove_tree(root);
    T_CHECK(mkdir(root, 0700) == 0);
}

/* ---- the parsers */

static void test_parse_v1(void) {
    static const struct {
        const char *quota, *period;
        int want;
        uint64_t quota_us, period_us;
    } rows[] = {
        {"-1\n", "100000\n", 0, 0, 100000},     {"50000\n", "100000\n", 1, 50000, 100000},
        {"150000", "100000", 1, 150000, 100000}, {" 25000 \n", "50000\n", 1, 25000, 50000},
        {"abc\n", "100000\n", -1, 0, 0},         {"50000\n", "0\n", -1, 0, 0},
        {"0\n", "100000\n", -1, 0, 0},           {"-2\n", "100000\n", -1, 0, 0},
        {"-10\n", "100000\n", -1, 0, 0},         {"50000x\n", "100000\n", -1, 0, 0},
        {"", "100000\n", -1, 0, 0},              {"50000\n", "", -1, 0, 0},
        {"50000\n", "100000 5\n", -1, 0, 0},     {"99999999999999999999999\n", "100000\n", -1, 0, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        uint64_t q = 7, p = 7;
        const int got = plat_cpu_quota_parse_v1(rows[i].quota, rows[i].period, &q, &p);
        T_CHECKF(got == rows[i].want, "v1 \"%s\" / \"%s\": %d, want %d", rows[i].quota, rows[i].period, got, rows[i].want);
        if (rows[i].want >= 0) T_CHECK(q == rows[i].quota_us && p == rows[i].period_us);
        else T_CHECK(q == 7 && p == 7); /* untouched */
    }
}

static void test_parse_v2(void) {
    static const struct {
        const char *text;
        int want;
        uint64_t quota_us, period_us;
    } rows[] = {
        {"max 100000\n", 0, 0, 100000},   {"150000 100000\n", 1, 150000, 100000}, {"50000 100000", 1, 50000, 100000},
        {"max\n", -1, 0, 0},              {"50000\n", -1, 0, 0},                  {"maxi 100000\n", -1, 0, 0},
        {"50000 100000 7\n", -1, 0, 0},   {"", -1, 0, 0},                         {"50000 abc\n", -1, 0, 0},
        {"0 100000\n", -1, 0, 0},         {"max 0\n", -1, 0, 0},                  {"-1 100000\n", -1, 0, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        uint64_t q = 7, p = 7;
        const int got = plat_cpu_quota_parse_v2(rows[i].text, &q, &p);
        T_CHECKF(got == rows[i].want, "v2 \"%s\": %d, want %d", rows[i].text, got, rows[i].want);
        if (rows[i].want >= 0) T_CHECK(q == rows[i].quota_us && p == rows[i].period_us);
    }
}

/* ---- the budget of fake cgroup trees */

/* A v1 tree as this machine has it: cpu and cpuacct mounted together, the
 * cpuset hierarchy first (its "cpuset" must not read as "cpu"), the process
 * in /app whose root sets no quota; cgroup2 mounted too, without controllers. */
static void v1_tree(const char *root) {
    put(root, "proc/self/cgroup", "4:memory:/\n3:cpuset:/\n2:cpu,cpuacct:/app\n0::/\n");
    put(root, "proc/self/mounts",
        "tmpfs /fs/cgroup tmpfs rw 0 0\ncgroup /fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n"
        "cgroup /fs/cgroup/cpu,cpuacct cgroup rw,relatime,cpu,cpuacct 0 0\ncgroup2 /fs/cgroup/unified cgroup2 rw 0 0\n");
    put(root, "fs/cgroup/cpuset/cpu.cfs_quota_us", "10000\n"); /* a decoy: the wrong hierarchy */
    put(root, "fs/cgroup/cpuset/cpu.cfs_period_us", "100000\n");
    put(root, "fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    put(root, "fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    put(root, "fs/cgroup/cpu,cpuacct/cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n");
    put(root, "fs/cgroup/cpu,cpuacct/app/cpu.cfs_quota_us", "-1\n");
    put(root, "fs/cgroup/cpu,cpuacct/app/cpu.cfs_period_us", "100000\n");
    put(root, "fs/cgroup/cpu,cpuacct/app/cpu.stat", "nr_periods 40\nnr_throttled 12\nthrottled_time 3000000\n");
}

static void test_budget_v1(void) {
    char root[512];
    tree_new(root, sizeof root, "cpu_v1");
    v1_tree(root);
    plat_cpu_budget b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_NONE && b.cgroup_version == 1 && b.quota_cpus == 0);
    T_CHECK(b.allowed_cpus == 2 && b.online_cpus == 2 && b.effective_cpus == 2.0);
    T_CHECK(b.throttle_known && b.nr_periods == 40 && b.nr_throttled == 12 && b.throttled_us == 3000); /* the process's own */
    put(root, "fs/cgroup/cpu,cpuacct/app/cpu.cfs_quota_us", "50000\n");
    b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_LIMITED && b.quota_us == 50000 && b.period_us == 100000);
    T_CHECK(b.quota_cpus == 0.5 && b.effective_cpus == 0.5 && b.nr_throttled == 12);
    /* nested: the process in /app/job (1.5 CPUs), its parent /app tighter (1 CPU) */
    put(root, "proc/self/cgroup", "2:cpu,cpuacct:/app/job\n");
    put(root, "fs/cgroup/cpu,cpuacct/app/cpu.cfs_quota_us", "100000\n");
    put(root, "fs/cgroup/cpu,cpuacct/app/job/cpu.cfs_quota_us", "150000\n");
    put(root, "fs/cgroup/cpu,cpuacct/app/job/cpu.cfs_period_us", "100000\n");
    put(root, "fs/cgroup/cpu,cpuacct/app/job/cpu.stat", "nr_periods 5\nnr_throttled 0\nthrottled_time 0\n");
    b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_LIMITED && b.quota_cpus == 1.0 && b.quota_us == 100000);
    T_CHECK(b.effective_cpus == 1.0 && b.nr_periods == 40 && b.throttled_us == 3000); /* the tight folder's counters */
    /* the child tighter than the parent: its own */
    put(root, "fs/cgroup/cpu,cpuacct/app/job/cpu.cfs_quota_us", "75000\n");
    b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_cpus == 0.75 && b.effective_cpus == 0.75 && b.nr_periods == 5);
    /* the affinity mask tighter than the quota; unknown mask: the online cores */
    put(root, "fs/cgroup/cpu,cpuacct/app/job/cpu.cfs_quota_us", "400000\n");
    b = plat_cpu_budget_at(root, 1, 2);
    T_CHECK(b.quota_cpus == 1.0 && b.effective_cpus == 1.0);
    put(root, "fs/cgroup/cpu,cpuacct/app/cpu.cfs_quota_us", "-1\n");
    b = plat_cpu_budget_at(root, 0, 2);
    T_CHECK(b.quota_cpus == 4.0 && b.allowed_cpus == 0 && b.effective_cpus == 2.0);
    b = plat_cpu_budget_at(root, 0, 0);
    T_CHECK(b.effective_cpus == 4.0); /* nothing else known */
    remove_tree(root);
}

/* cgroup2: the root has no cpu.max, "max" sets none, a folder above may set one. */
static void test_budget_v2(void) {
    char root[512];
    tree_new(root, sizeof root, "cpu_v2");
    put(root, "proc/self/cgroup", "0::/user.slice/app\n");
    put(root, "proc/self/mounts", "cgroup2 /fs/cgroup cgroup2 rw,nsdelegate 0 0\n");
    put(root, "fs/cgroup/cgroup.controllers", "cpu memory pids\n");
    put(root, "fs/cgroup/user.slice/cpu.max", "max 100000\n");
    put(root, "fs/cgroup/user.slice/app/cpu.max", "max 100000\n");
    put(root, "fs/cgroup/user.slice/app/cpu.stat",
        "usage_usec 900\nuser_usec 800\nsystem_usec 100\nnr_periods 10\nnr_throttled 2\nthrottled_usec 5000\n");
    plat_cpu_budget b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_NONE && b.cgroup_version == 2 && b.effective_cpus == 2.0);
    T_CHECK(b.throttle_known && b.nr_periods == 10 && b.nr_throttled == 2 && b.throttled_us == 5000);
    put(root, "fs/cgroup/user.slice/app/cpu.max", "150000 100000\n");
    b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_LIMITED && b.quota_cpus == 1.5 && b.effective_cpus == 1.5);
    T_CHECK(b.quota_us == 150000 && b.period_us == 100000 && b.throttled_us == 5000);
    put(root, "fs/cgroup/user.slice/cpu.max", "50000 100000\n"); /* the slice above: tighter */
    b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_cpus == 0.5 && b.effective_cpus == 0.5 && !b.throttle_known); /* the slice has no cpu.stat */
    /* a folder without the cpu controller (no cpu.max) sets none */
    unput(root, "fs/cgroup/user.slice/cpu.max");
    b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_cpus == 1.5);
    remove_tree(root);
}

/* Malformed or missing files: unknown, never a crash, the mask still the bound. */
static void test_budget_unknown(void) {
    char root[512];
    tree_new(root, sizeof root, "cpu_bad");
    plat_cpu_budget b = plat_cpu_budget_at(root, 2, 2); /* no cgroup file in the tree */
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_UNKNOWN && b.cgroup_version == 0 && b.effective_cpus == 2.0);
    put(root, "proc/self/cgroup", "garbage\n0::/app\n");
    b = plat_cpu_budget_at(root, 2, 2); /* no mounts */
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_UNKNOWN && b.cgroup_version == 0);
    put(root, "proc/self/mounts", "cgroup2 /fs/cgroup cgroup2 rw 0 0\n");
    put(root, "fs/cgroup/app/cpu.max", "garbage\n");
    put(root, "fs/cgroup/app/cpu.stat", "nr_periods 1\nnr_throttled 1\nthrottled_usec 1\n");
    b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_UNKNOWN && b.cgroup_version == 2 && b.effective_cpus == 2.0);
    T_CHECK(b.quota_cpus == 0 && !b.throttle_known);
    put(root, "fs/cgroup/app/cpu.max", "");
    T_CHECK(plat_cpu_budget_at(root, 2, 2).quota_state == PLAT_CPU_QUOTA_UNKNOWN);
    put(root, "fs/cgroup/app/cpu.max", "20000 100000\n");
    put(root, "fs/cgroup/app/cpu.stat", "nr_periods 1\n"); /* counters cut short: not known */
    b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_cpus == 0.2 && b.effective_cpus == 0.2 && !b.throttle_known && b.nr_periods == 0);
    /* the process's folder missing under the mount point: the mount point is its cgroup (a container's view) */
    put(root, "proc/self/cgroup", "0::/elsewhere\n");
    put(root, "fs/cgroup/cpu.max", "250000 100000\n");
    b = plat_cpu_budget_at(root, 4, 4);
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_LIMITED && b.quota_cpus == 2.5 && b.effective_cpus == 2.5);
    /* v1: a quota file without its period; a v1 cpu line whose hierarchy is not mounted reads cgroup2's */
    put(root, "proc/self/cgroup", "2:cpu:/\n0::/app\n");
    b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.cgroup_version == 2 && b.quota_cpus == 0.2);
    put(root, "proc/self/mounts", "cgroup /fs/v1 cgroup rw,cpu 0 0\n");
    put(root, "fs/v1/cpu.cfs_quota_us", "50000\n");
    b = plat_cpu_budget_at(root, 2, 2);
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_UNKNOWN && b.cgroup_version == 1);
    remove_tree(root);
}

/* ---- cpufreq */

/* cpu0 has all three files, cpu1 only its hardware maximum, cpu2 no cpufreq
 * (offline, or a virtual machine's), cpu3 the current clock under a policy
 * cap; cpu3 is left out of the set. */
static void test_freqs_at(void) {
    char root[512];
    tree_new(root, sizeof root, "cpufreq");
    plat_cpu_freq f[8];
    T_EQ_INT(plat_cpu_freqs_at(root, NULL, f, 8), 0); /* none: unknown */
    put(root, "cpu2/cpu_capacity", "1024\n");
    T_EQ_INT(plat_cpu_freqs_at(root, NULL, f, 8), 0);
    put(root, "cpu0/cpufreq/scaling_cur_freq", "1800000\n");
    put(root, "cpu0/cpufreq/scaling_max_freq", "2400000\n");
    put(root, "cpu0/cpufreq/cpuinfo_max_freq", "2400000\n");
    put(root, "cpu1/cpufreq/cpuinfo_max_freq", "3000000\n");
    put(root, "cpu3/cpufreq/scaling_cur_freq", "1200000\n");
    put(root, "cpu3/cpufreq/scaling_max_freq", "1500000\n");
    put(root, "cpu3/cpufreq/cpuinfo_max_freq", "garbage\n");
    T_EQ_INT(plat_cpu_freqs_at(root, NULL, f, 8), 3);
    T_CHECK(f[0].cpu == 0 && f[0].cur_khz == 1800000 && f[0].cap_khz == 2400000 && f[0].max_khz == 2400000);
    T_CHECK(f[1].cpu == 1 && f[1].cur_khz == 0 && f[1].cap_khz == 0 && f[1].max_khz == 3000000);
    T_CHECK(f[2].cpu == 3 && f[2].cur_khz == 1200000 && f[2].cap_khz == 1500000 && f[2].max_khz == 0);
    plat_cpuset only;
    plat_cpuset_zero(&only);
    plat_cpuset_add(&only, 0);
    plat_cpuset_add(&only, 1);
    T_EQ_INT(plat_cpu_freqs_at(root, &only, f, 8), 2);
    T_CHECK(f[0].cpu == 0 && f[1].cpu == 1);
    T_EQ_INT(plat_cpu_freqs_at(root, NULL, f, 1), 1); /* room for one */
    remove_tree(root);
}

/* ---- thermal zones and trips */

static void zone(const char *root, int id, const char *type, const char *temp) {
    char rel[64];
    snprintf(rel, sizeof rel, "thermal_zone%d/type", id);
    put(root, rel, type);
    snprintf(rel, sizeof rel, "thermal_zone%d/temp", id);
    put(root, rel, temp);
}

static void trip(const char *root, int id, int k, const char *temp, const char *type) {
    char rel[64];
    snprintf(rel, sizeof rel, "thermal_zone%d/trip_point_%d_temp", id, k);
    put(root, rel, temp);
    snprintf(rel, sizeof rel, "thermal_zone%d/trip_point_%d_type", id, k);
    put(root, rel, type);
}

/* zone0 (cpu) passive at 70 and 65 C, critical at 100; zone1 (battery)
 * passive at 45; zone2 (x86_pkg_temp) the hottest, its passive trips unset
 * (0); zone3 no trips. */
static void thermal_tree(const char *root) {
    zone(root, 0, "cpu-thermal\n", "60000\n");
    trip(root, 0, 0, "70000\n", "passive\n");
    trip(root, 0, 1, "65000\n", "passive\n");
    trip(root, 0, 2, "100000\n", "critical\n");
    trip(root, 0, 3, "90000\n", "hot\n");
    trip(root, 0, 4, "50000\n", "active\n");
    trip(root, 0, 5, "55000\n", "bogus\n");
    zone(root, 1, "battery\n", "38000\n");
    trip(root, 1, 0, "45000\n", "passive\n");
    zone(root, 2, "x86_pkg_temp\n", "80000\n");
    trip(root, 2, 0, "0\n", "passive\n");
    trip(root, 2, 1, "0\n", "passive\n");
    zone(root, 3, "skin\n", "-2000\n");
}

static void test_thermal_trips(void) {
    char root[512];
    tree_new(root, sizeof root, "thermal_trips");
    thermal_tree(root);
    plat_thermal t = plat_thermal_read_at(root);
    T_CHECK(t.known && t.n_zones == 4 && t.n_kept == 4 && t.hottest_millicelsius == 80000 && t.hottest_zone == 2);
    const plat_thermal_zone *z = &t.zones[0];
    T_CHECK(z->id == 0 && !strcmp(z->type, "cpu-thermal") && z->millicelsius == 60000 && z->n_trips == 6);
    T_CHECK(z->trips[1].millicelsius == 65000 && z->trips[1].type == PLAT_TRIP_PASSIVE);
    T_CHECK(z->trips[2].type == PLAT_TRIP_CRITICAL && z->trips[3].type == PLAT_TRIP_HOT);
    T_CHECK(z->trips[4].type == PLAT_TRIP_ACTIVE && z->trips[5].type == PLAT_TRIP_OTHER);
    T_CHECK(t.zones[2].n_trips == 2 && t.zones[3].n_trips == 0 && t.zones[3].millicelsius == -2000);
    /* below: zone0 is 5 C from its first passive trip (65), the battery 7 C */
    T_CHECK(t.passive_known && t.passive_zone == 0 && t.passive_headroom_millicelsius == 5000 && !t.passive_passed);
    /* past: the battery 1 C over its trip */
    zone(root, 1, "battery\n", "46000\n");
    t = plat_thermal_read_at(root);
    T_CHECK(t.passive_known && t.passive_zone == 1 && t.passive_headroom_millicelsius == -1000 && t.passive_passed);
    zone(root, 1, "battery\n", "45000\n"); /* at the trip: the kernel cools */
    t = plat_thermal_read_at(root);
    T_CHECK(t.passive_headroom_millicelsius == 0 && t.passive_passed);
    T_CHECK(!strcmp(plat_trip_type_name(PLAT_TRIP_PASSIVE), "passive") && !strcmp(plat_trip_type_name(9), "other"));
    remove_tree(root);
    tree_new(root, sizeof root, "thermal_trips");
    zone(root, 0, "cpu\n", "50000\n"); /* no passive trip anywhere */
    trip(root, 0, 0, "95000\n", "critical\n");
    t = plat_thermal_read_at(root);
    T_CHECK(t.known && !t.passive_known && !t.passive_passed && t.passive_headroom_millicelsius == 0);
    remove_tree(root);
}

/* ---- the performance-hint session over a fake system call */

typedef struct {
    int calls;
    int tid[64];
    unsigned min[64], max[64];
    int fail_errno;  /* the errno of every call from fail_from on (0: none) */
    int fail_from;
    int gone_tid;    /* ESRCH for this thread (0: none) */
} fake_sys;

static int fake_clamp(void *ctx, int tid, unsigned util_min, unsigned util_max) {
    fake_sys *f = ctx;
    if (f->fail_errno && f->calls >= f->fail_from) return f->calls++, f->fail_errno;
    if (tid == f->gone_tid) return ESRCH;
    if (f->calls < 64) f->tid[f->calls] = tid, f->min[f->calls] = util_min, f->max[f->calls] = util_max;
    f->calls++;
    return 0;
}

static plat_perf_hint *fake_open(fake_sys *f, const int *tids, int n) {
    const plat_perf_hint_ops ops = {.set_clamp = fake_clamp, .ctx = f};
    plat_perf_hint *h = NULL;
    err_t err = {0};
    T_EQ_INT(plat_perf_hint_open_with(&ops, "fake clamps", tids, n, 10000000, &h, &err), ERR_OK);
    return h;
}

/* Reports of ns; then util_min and the calls made are as wanted (the last
 * call's util_min too, on thread 102). */
static void report_expect(plat_perf_hint *h, const fake_sys *f, int64_t ns, unsigned want_min, int want_calls) {
    plat_perf_hint_report(h, ns);
    T_CHECKF(plat_perf_hint_util_min(h) == want_min && f->calls == want_calls, "after %lld ns: util_min %u, %d calls",
             (long long)ns, plat_perf_hint_util_min(h), f->calls);
    T_CHECK(f->tid[f->calls - 1] == 102 && f->min[f->calls - 1] == want_min && f->max[f->calls - 1] == 1024);
}

/* The law (platform/perfhint.h) step by step, target 10 ms: up 128 past
 * +5 %, hold in the band, down 64 after 3 reports below -20 %. */
static void test_hint_supported(void) {
    fake_sys f = {0};
    const int tids[] = {101, 102};
    plat_perf_hint *h = fake_open(&f, tids, 2);
    T_CHECK(plat_perf_hint_supported(h) && !strcmp(plat_perf_hint_status(h), "fake clamps"));
    T_CHECK(f.calls == 2 && f.tid[0] == 101 && f.min[0] == 0 && f.max[0] == 1024 && f.tid[1] == 102); /* the probe */
    report_expect(h, &f, 12000000, 128, 4);
    report_expect(h, &f, 10500000, 128, 4); /* exactly +5 %: in the band */
    report_expect(h, &f, 10600000, 256, 6);
    report_expect(h, &f, 7000000, 256, 6);
    report_expect(h, &f, 7999999, 256, 6);
    report_expect(h, &f, 7000000, 192, 8); /* the third below: down one step */
    report_expect(h, &f, 7000000, 192, 8);
    report_expect(h, &f, 8000000, 192, 8); /* exactly -20 %: in the band, the count starts again */
    report_expect(h, &f, 7000000, 192, 8);
    report_expect(h, &f, 7000000, 192, 8);
    report_expect(h, &f, 7000000, 128, 10);
    plat_perf_hint_update_target(h, 5000000);
    report_expect(h, &f, 6000000, 256, 12);
    for (int i = 0; i < 10; i++) plat_perf_hint_report(h, 50000000);
    T_CHECK(plat_perf_hint_util_min(h) == 1024 && f.calls == 24); /* six steps to the top, then held there */
    plat_perf_hint_report(h, 0);
    plat_perf_hint_report(h, -5);
    plat_perf_hint_update_target(h, 0);
    T_EQ_INT(f.calls, 24); /* ignored */
    plat_perf_hint_close(h);
    T_CHECK(f.calls == 26 && f.min[25] == 0 && f.max[25] == 1024); /* given back */
    /* a thread that has exited is dropped; the others are still hinted */
    fake_sys g = {.gone_tid = 102};
    h = fake_open(&g, tids, 2);
    T_CHECK(plat_perf_hint_supported(h) && g.calls == 1);
    plat_perf_hint_report(h, 20000000);
    T_CHECK(g.calls == 2 && g.tid[1] == 101 && g.min[1] == 128);
    plat_perf_hint_close(h);
    const int gone[] = {102};
    fake_sys k = {.gone_tid = 102};
    h = fake_open(&k, gone, 1);
    T_CHECK(!plat_perf_hint_supported(h) && strstr(plat_perf_hint_status(h), "ESRCH"));
    plat_perf_hint_close(h);
}

/* Each errno of a kernel without clamps: the session says why, and every
 * call after is a no-op; one that fails later does the same from then on. */
static void test_hint_unsupported(void) {
    static const struct {
        int e;
        const char *status;
    } rows[] = {
        {EOPNOTSUPP, "unsupported: utilization clamps: EOPNOTSUPP (a kernel built without CONFIG_UCLAMP_TASK)"},
        {EINVAL, "unsupported: utilization clamps: EINVAL (a kernel without them: before Linux 5.3)"},
        {ENOSYS, "unsupported: utilization clamps: ENOSYS (no sched_setattr system call)"},
        {EPERM, "unsupported: utilization clamps: EPERM (not permitted here: a sandbox or a security policy)"},
        {EIO, "unsupported: utilization clamps: errno 5"},
    };
    const int tids[] = {101, 102};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        fake_sys f = {.fail_errno = rows[i].e};
        plat_perf_hint *h = fake_open(&f, tids, 2);
        T_CHECK(h && !plat_perf_hint_supported(h) && f.calls == 1);
        T_CHECKF(!strcmp(plat_perf_hint_status(h), rows[i].status), "status \"%s\"", plat_perf_hint_status(h));
        plat_perf_hint_report(h, 50000000);
        plat_perf_hint_update_target(h, 1000);
        plat_perf_hint_report(h, 50000000);
        T_CHECK(f.calls == 1 && plat_perf_hint_util_min(h) == 0);
        plat_perf_hint_close(h);
        T_EQ_INT(f.calls, 1);
    }
    fake_sys late = {.fail_errno = EPERM, .fail_from = 2}; /* the probe passes, the first boost is refused */
    plat_perf_hint *h = fake_open(&late, tids, 2);
    T_CHECK(plat_perf_hint_supported(h));
    plat_perf_hint_report(h, 50000000);
    T_CHECK(!plat_perf_hint_supported(h) && late.calls == 3 && plat_perf_hint_util_min(h) == 0);
    T_CHECK(strstr(plat_perf_hint_status(h), "EPERM") != NULL);
    plat_perf_hint_report(h, 50000000);
    plat_perf_hint_close(h);
    T_EQ_INT(late.calls, 3);
    T_CHECK(!plat_perf_hint_open_unsupported("no hint here", &h, NULL) && !plat_perf_hint_supported(h));
    T_CHECK(!strcmp(plat_perf_hint_status(h), "unsupported: no hint here"));
    plat_perf_hint_report(h, 5);
    plat_perf_hint_close(h);
    plat_perf_hint_close(NULL);
    T_CHECK(!plat_perf_hint_supported(NULL) && plat_perf_hint_util_min(NULL) == 0);
}

typedef struct {
    int64_t target_ns, actual_ns;
    int closed;
} fake_native;

static int native_target(void *ctx, int64_t ns) { return ((fake_native *)ctx)->target_ns = ns, 0; }
static int native_report(void *ctx, int64_t ns) { return ((fake_native *)ctx)->actual_ns = ns, 0; }
static void native_close(void *ctx) { ((fake_native *)ctx)->closed++; }

/* A system's own session (Android's) is passed the target and the durations as they are. */
static void test_hint_native(void) {
    fake_native n = {0};
    const plat_perf_hint_ops ops = {.native_target = native_target, .native_report = native_report,
                                    .native_close = native_close, .ctx = &n};
    const int tid = 7;
    plat_perf_hint *h = NULL;
    T_EQ_INT(plat_perf_hint_open_with(&ops, "APerformanceHint", &tid, 1, 3000, &h, NULL), ERR_OK);
    T_CHECK(plat_perf_hint_supported(h) && !strcmp(plat_perf_hint_status(h), "APerformanceHint"));
    plat_perf_hint_report(h, 4500);
    plat_perf_hint_update_target(h, 2500);
    T_CHECK(n.actual_ns == 4500 && n.target_ns == 2500 && plat_perf_hint_util_min(h) == 0);
    plat_perf_hint_close(h);
    T_EQ_INT(n.closed, 1);
}

static void test_hint_args(void) {
    const int tids[PLAT_PERF_HINT_MAX_TIDS + 1] = {1};
    const plat_perf_hint_ops ops = {.set_clamp = fake_clamp};
    const plat_perf_hint_ops half = {.native_report = native_report};
    plat_perf_hint *h = (plat_perf_hint *)1;
    err_t err = {0};
    T_EQ_INT(plat_perf_hint_open_with(&ops, NULL, tids, 0, 1000, &h, &err), ERR_INVALID_ARG);
    T_CHECK(h == NULL && strstr(err.msg, "0 threads"));
    T_EQ_INT(plat_perf_hint_open_with(&ops, NULL, tids, PLAT_PERF_HINT_MAX_TIDS + 1, 1000, &h, &err), ERR_INVALID_ARG);
    T_EQ_INT(plat_perf_hint_open_with(&ops, NULL, tids, 1, 0, &h, &err), ERR_INVALID_ARG);
    T_EQ_INT(plat_perf_hint_open_with(&ops, NULL, tids, 1, 1000, NULL, &err), ERR_INVALID_ARG);
    T_EQ_INT(plat_perf_hint_open_with(NULL, NULL, tids, 1, 1000, &h, &err), ERR_INVALID_ARG);
    T_EQ_INT(plat_perf_hint_open_with(&half, NULL, tids, 1, 1000, &h, &err), ERR_INVALID_ARG);
    T_EQ_INT(plat_perf_hint_open(tids, 0, 1000, &h, &err), ERR_INVALID_ARG);
    T_EQ_INT(plat_perf_hint_open(tids, 1, -1, &h, &err), ERR_INVALID_ARG);
}

/* ---- this build's answers on this machine: consistent, whatever they are */

static void test_real_budget(void) {
    const plat_cpu_budget b = plat_cpu_budget_read();
    static const char *const states[] = {"unknown", "none", "limited"};
    printf("%s: cpu quota %s (cgroup v%d, %.2f CPUs, %llu/%llu us), allowed %d, online %d, effective %.2f; "
           "throttled %llu of %llu periods (%s)\n",
           plat_name(), states[b.quota_state], b.cgroup_version, b.quota_cpus, (unsigned long long)b.quota_us,
           (unsigned long long)b.period_us, b.allowed_cpus, b.online_cpus, b.effective_cpus,
           (unsigned long long)b.nr_throttled, (unsigned long long)b.nr_periods, b.throttle_known ? "known" : "unknown");
    T_CHECK(b.online_cpus >= 1 && b.effective_cpus > 0 && b.effective_cpus <= b.online_cpus);
    T_CHECK(b.nr_throttled <= b.nr_periods);
    if (b.quota_state == PLAT_CPU_QUOTA_LIMITED)
        T_CHECK(b.quota_cpus > 0 && b.quota_cpus == (double)b.quota_us / (double)b.period_us && b.effective_cpus <= b.quota_cpus);
    else T_CHECK(b.quota_cpus == 0 && b.quota_us == 0);
    if (is_linux()) {
        T_CHECK(b.allowed_cpus >= 1 && b.allowed_cpus <= b.online_cpus && b.effective_cpus <= b.allowed_cpus);
        return;
    }
    T_CHECK(b.quota_state == PLAT_CPU_QUOTA_UNKNOWN && b.cgroup_version == 0 && b.allowed_cpus == 0);
    T_CHECK(b.effective_cpus == b.online_cpus && !b.throttle_known);
}

static void test_real_freqs_thermal(void) {
    plat_cpu_freq f[PLAT_MAX_CPUS];
    const int n = plat_cpu_freqs(NULL, f, PLAT_MAX_CPUS);
    printf("%s: cpufreq %s (%d cores)", plat_name(), n ? "known" : "unknown: this system reports no clocks", n);
    if (n) printf(", cpu%d at %u kHz of %u (cap %u)", f[0].cpu, f[0].cur_khz, f[0].max_khz, f[0].cap_khz);
    printf("\n");
    T_CHECK(n >= 0 && n <= plat_cpu_online());
    for (int i = 0; i < n; i++) {
        T_CHECK(f[i].cur_khz || f[i].cap_khz || f[i].max_khz);
        T_CHECK(!f[i].cap_khz || !f[i].max_khz || f[i].cap_khz <= f[i].max_khz);
        T_CHECK(i == 0 || f[i].cpu > f[i - 1].cpu);
    }
    const plat_thermal t = plat_thermal_read();
    printf("%s: thermal %s (%d zones, hottest %lld mC; passive trip %s, headroom %lld mC)\n", plat_name(),
           t.known ? "known" : "unknown", t.n_zones, (long long)t.hottest_millicelsius,
           t.passive_known ? "known" : "none", (long long)t.passive_headroom_millicelsius);
    T_CHECK(t.known == (t.n_zones > 0) && t.n_kept <= t.n_zones && t.n_kept <= PLAT_THERMAL_MAX_ZONES);
    T_CHECK(t.passive_passed == (t.passive_known && t.passive_headroom_millicelsius <= 0));
    if (!is_linux()) T_CHECK(!t.known && n == 0);
}

/* The session on this machine's own thread: supported (a boost follows a
 * late token) or unsupported with the kernel's reason; never an error. */
static void test_real_hint(void) {
    const int tid = plat_thread_id();
    plat_perf_hint *h = NULL;
    err_t err = {0};
    T_EQ_INT(plat_perf_hint_open(&tid, 1, 20000000, &h, &err), ERR_OK);
    printf("%s: performance hint: %s\n", plat_name(), plat_perf_hint_status(h));
    if (!is_linux()) {
        T_CHECK(tid == 0 && !plat_perf_hint_supported(h));
        T_CHECK(!strcmp(plat_perf_hint_status(h), "unsupported: this build has no performance hint"));
    } else if (plat_perf_hint_supported(h)) {
        T_CHECK(tid > 0 && !strcmp(plat_perf_hint_status(h), "utilization clamps (sched_setattr)"));
        plat_perf_hint_report(h, 40000000);
        T_EQ_INT(plat_perf_hint_util_min(h), 128);
    } else {
        T_CHECK(tid > 0 && !strncmp(plat_perf_hint_status(h), "unsupported: utilization clamps: ", 33));
    }
    plat_perf_hint_report(h, 40000000);
    plat_perf_hint_close(h);
}

int main(void) {
    test_parse_v1();
    test_parse_v2();
    test_budget_v1();
    test_budget_v2();
    test_budget_unknown();
    test_freqs_at();
    test_thermal_trips();
    test_hint_supported();
    test_hint_unsupported();
    test_hint_native();
    test_hint_args();
    test_real_budget();
    test_real_freqs_thermal();
    test_real_hint();
    T_DONE();
}
