/*
 * test_threadpool — the pool runs every share of every job once; cores are
 * classed by capacity (fake sysfs trees of phones and laptops); a pool
 * placed on a core runs there, and a pinned caller gets its cores back;
 * the plan places the model's and the draft's threads by class. In the
 * POSIX fallback build (platform/cpu.h: no allowed set, no capacities, no
 * pinning) a placed pool is refused as unsupported and the host's classes
 * are one class of the online cores.
 */
#define _GNU_SOURCE /* sched_getcpu, CPU_EQUAL */
#include <sched.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "core/threadpool.h"
#include "platform/cpu.h"
#include "runtime/plan.h"
#include "t.h"
#include "util.h"

typedef struct {
    atomic_int calls[8];
    atomic_int bad_nth;
    int cpu[8]; /* where each share ran */
} job;

static void count_share(void *ctx, int ith, int nth) {
    job *j = ctx;
    atomic_fetch_add(&j->calls[ith], 1);
    if (nth != 0 && ith >= nth) atomic_fetch_add(&j->bad_nth, 1);
    j->cpu[ith] = sched_getcpu();
}

static void test_run(void) {
    for (int n = 1; n <= 4; n++) {
        tpool *p = NULL;
        err_t err = {0};
        T_CHECK(tpool_new(n, &p, &err) == ERR_OK);
        if (!p) continue;
        T_EQ_INT(tpool_size(p), n);
        job j = {0};
        /* more threads than this machine's 2 cores: ~0.1 ms a job (spinners yield), not a time slice */
        const int jobs = n <= 2 ? 20000 : 2000;
        for (int i = 0; i < jobs; i++) tpool_run(p, count_share, &j);
        int wrong = 0;
        for (int t = 0; t < n; t++) wrong += atomic_load(&j.calls[t]) != jobs;
        for (int t = n; t < 8; t++) wrong += atomic_load(&j.calls[t]) != 0;
        T_CHECKF(wrong == 0 && atomic_load(&j.bad_nth) == 0, "%d threads: %d shares ran a wrong number of times", n, wrong);
        tpool_free(p);
    }
    tpool *p = NULL;
    err_t err = {0};
    T_EQ_INT(tpool_new(0, &p, &err), ERR_INVALID_ARG);
    T_EQ_INT(tpool_new_on(2, NULL, 0, &p, &err), ERR_INVALID_ARG);
    const short nocore[] = {-3};
    T_EQ_INT(tpool_new_on(2, nocore, 1, &p, &err), ERR_INVALID_ARG);
}

/* A fake of the kernel's cpu folder (sysfs devices/system/cpu, as the
 * platform room reads it): capacity[i] for cpu i, 0 = no such cpu,
 * -1 = a file that holds no number. */
static void fake_tree(const char *root, const int *capacity, int n) {
    mkdir(root, 0755);
    for (int i = 0; i < n; i++) {
        if (!capacity[i]) continue;
        char dir[600], file[700];
        snprintf(dir, sizeof dir, "%s/cpu%d", root, i);
        mkdir(dir, 0755);
        snprintf(file, sizeof file, "%s/cpu_capacity", dir);
        FILE *f = fopen(file, "w");
        if (capacity[i] < 0) fputs("max\n", f);
        else fprintf(f, "%d\n", capacity[i]);
        fclose(f);
    }
}

static void rm_tree(const char *root, int n) {
    for (int i = 0; i < n; i++) {
        char dir[600], file[700];
        snprintf(dir, sizeof dir, "%s/cpu%d", root, i);
        snprintf(file, sizeof file, "%s/cpu_capacity", dir);
        remove(file);
        rmdir(dir);
    }
    rmdir(root);
}

static void test_classes(void) {
    static const struct {
        const char *what;
        int cap[12];
        int n;
        int n_perf, n_eff, perf_capacity, eff_capacity;
        int first_eff; /* the lowest-numbered efficiency core, -1 for none */
    } cases[] = {
        /* little, mid and prime cores: the mid cores are performance cores */
        {"phone 4+4+1", {325, 325, 325, 325, 729, 729, 729, 729, 1024}, 9, 5, 4, 729, 325, 0},
        {"phone 4+2+2", {160, 160, 160, 160, 498, 498, 1024, 1024}, 8, 4, 4, 498, 160, 0},
        {"laptop 2P+8E", {1024, 1024, 700, 700, 700, 700, 700, 700, 700, 700}, 10, 2, 8, 1024, 700, 2},
        {"one class", {1024, 1024, 1024, 1024}, 4, 4, 0, 1024, 0, -1},
        /* cpu 2 offline (no file), cpu 3 unreadable: skipped, the rest classed */
        {"gaps", {1024, 1024, 0, -1, 400}, 5, 2, 1, 1024, 400, 4},
        {"no capacities", {0}, 1, 0, 0, 0, 0, -1},
    };
    char root[512];
    tu_tmp_path(root, sizeof root, "cpus");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fake_tree(root, cases[i].cap, cases[i].n);
        cpu_classes cc;
        cpu_classes_read(root, &cc);
        printf("cores, %-14s: %d performance (capacity %d+), %d efficiency (capacity %d+)\n", cases[i].what, cc.n_perf,
               cc.perf_capacity, cc.n_eff, cc.eff_capacity);
        T_CHECKF(cc.n_perf == cases[i].n_perf && cc.n_eff == cases[i].n_eff, "%s: %d + %d", cases[i].what, cc.n_perf,
                 cc.n_eff);
        T_CHECKF(cc.perf_capacity == cases[i].perf_capacity && cc.eff_capacity == cases[i].eff_capacity,
                 "%s: capacities %d, %d", cases[i].what, cc.perf_capacity, cc.eff_capacity);
        if (cases[i].first_eff >= 0) T_EQ_INT(cc.eff[0], cases[i].first_eff);
        int wrong = 0; /* every performance core at least as strong as every efficiency core */
        for (int a = 0; a < cc.n_perf; a++)
            for (int b = 0; b < cc.n_eff; b++) wrong += cases[i].cap[cc.perf[a]] <= cases[i].cap[cc.eff[b]];
        T_EQ_INT(wrong, 0);
        rm_tree(root, cases[i].n);
    }
}

/* A pool placed on one core computes there; a caller pinned to it runs its
 * share there too, and gets its own cores back after. */
static void test_placed(void) {
    if (!plat_pin_available()) {
        tpool *p = NULL;
        err_t err = {0};
        const short core0 = 0;
        T_EQ_INT(tpool_new_on(2, &core0, 1, &p, &err), ERR_UNSUPPORTED);
        T_CHECK(p == NULL && strstr(err.msg, "cannot place threads"));
        T_CHECK(tpool_new(2, &p, &err) == ERR_OK);
        tpool_affinity prev;
        tpool_pin_caller(p, &prev);
        T_EQ_INT(prev.saved, 0);
        tpool_free(p);
        printf("placed pool: this build cannot pin (%s): refused as unsupported\n", err.msg);
        return;
    }
    cpu_set_t mine;
    T_CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0);
    int cores[2], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &mine)) cores[n++] = c;
    if (n < 2) {
        printf("placed pool: one core to run on, not checked\n");
        return;
    }
    const short last = (short)cores[1];
    tpool *p = NULL;
    err_t err = {0};
    T_CHECKF(tpool_new_on(2, &last, 1, &p, &err) == ERR_OK, "%s", err.msg);
    if (!p) return;
    job j = {0};
    int off = 0;
    for (int i = 0; i < 40; i++) { /* two threads on one core: each job waits for a time slice */
        tpool_affinity prev;
        tpool_pin_caller(p, &prev);
        tpool_run(p, count_share, &j);
        off += j.cpu[0] != last || j.cpu[1] != last;
        tpool_unpin_caller(&prev);
    }
    cpu_set_t after;
    T_CHECK(sched_getaffinity(0, sizeof after, &after) == 0);
    printf("placed pool: 40 jobs on core %d, %d shares ran elsewhere; the caller's cores restored: %s\n", last, off,
           CPU_EQUAL(&after, &mine) ? "yes" : "no");
    T_EQ_INT(off, 0);
    T_CHECK(CPU_EQUAL(&after, &mine));
    tpool_free(p);
    /* a pool made without cores does not move its caller */
    T_CHECK(tpool_new(2, &p, &err) == ERR_OK);
    tpool_affinity prev;
    tpool_pin_caller(p, &prev);
    T_EQ_INT(prev.saved, 0);
    tpool_free(p);
    /* a core this process may not use: an error, not a pool */
    for (int c = CPU_SETSIZE - 1; c >= 0; c--)
        if (!CPU_ISSET(c, &mine)) {
            const short bad = (short)c;
            T_EQ_INT(tpool_new_on(2, &bad, 1, &p, &err), ERR_INVALID_ARG);
            printf("pool on core %d: %s\n", c, err.msg);
            break;
        }
}

static void test_place(void) {
    cpu_classes one = {.n_perf = 2, .perf_capacity = 1024};
    plan_cores c = plan_place(&one, 2, true);
    printf("place, one class: %s\n", c.reason);
    T_CHECK(!c.on_perf && c.draft_threads == 0 && c.threads == 2 && strstr(c.reason, "one class"));
    cpu_classes two = {.n_perf = 4, .n_eff = 4, .perf_capacity = 729, .eff_capacity = 325};
    c = plan_place(&two, 4, true);
    printf("place, 4+4 with a draft: %s\n", c.reason);
    T_CHECK(c.on_perf && c.threads == 4 && c.draft_threads == 4 && strstr(c.reason, "efficiency"));
    c = plan_place(&two, 0, true); /* the default: the performance cores of these classes, not this host's */
    T_CHECK(c.on_perf && c.threads == 4 && c.draft_threads == 4);
    c = plan_place(&two, 3, false);
    T_CHECK(c.on_perf && c.threads == 3 && c.draft_threads == 0 && !strstr(c.reason, "draft"));
    c = plan_place(&two, 6, true); /* more than the performance cores: not placed */
    printf("place, 6 asked of 4+4: %s\n", c.reason);
    T_CHECK(!c.on_perf && c.draft_threads == 0 && c.threads == 6);
    /* a draft asked to have cores of its own (draft_threads) on one class: the last ones */
    cpu_classes same = {.n_perf = 4, .perf = {2, 3, 5, 7}, .perf_capacity = 1024};
    T_CHECK(!cpu_classes_split(&same, 4) && same.n_eff == 0); /* none would be left for the model */
    T_CHECK(cpu_classes_split(&same, 1));
    T_CHECK(same.n_perf == 3 && same.n_eff == 1 && same.perf[2] == 5 && same.eff[0] == 7);
    c = plan_place(&same, 0, true);
    T_CHECK(c.on_perf && c.threads == 3 && c.draft_threads == 1);
    T_CHECK(!cpu_classes_split(&two, 1)); /* two classes already: the efficiency cores are the draft's */
    cpu_classes none = {0};
    cpu_set_t allowed;
    T_CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    /* the cores the library sees this process may use: none known in the POSIX fallback */
    const int n_allowed = plat_pin_available() ? CPU_COUNT(&allowed) : 0;
    T_EQ_INT(cpu_classes_split(&none, 1), n_allowed > 1); /* no capacities: the cores this process may use */
    if (n_allowed > 1) T_CHECK(none.n_perf == n_allowed - 1 && none.n_eff == 1 && CPU_ISSET(none.eff[0], &allowed));
    /* this host: the default is every core it may use when capacities are one class */
    cpu_classes host;
    cpu_classes_read(NULL, &host);
    const int n_mine = plat_pin_available() ? CPU_COUNT(&allowed) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    printf("this host: %d performance, %d efficiency cores; %d threads by default\n", host.n_perf, host.n_eff,
           tpool_default_threads());
    T_EQ_INT(tpool_default_threads(), host.n_eff && host.n_perf < n_mine ? host.n_perf : n_mine);
    if (!plat_pin_available()) T_CHECK(host.n_perf == 0 && host.n_eff == 0 && host.n_allowed == n_mine);
}

int main(void) {
    test_run();
    test_classes();
    test_placed();
    test_place();
    T_DONE();
}
