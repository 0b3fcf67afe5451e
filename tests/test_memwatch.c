/*
 * test_memwatch — memory pressure levels (src/platform/memwatch.h). The
 * table of thresholds, each on both sides, and its hysteresis; one reading
 * of fake v1 and v2 cgroup trees (limits of "max", folders above tighter,
 * memory.stat's file pages, missing files, meminfo when there is no limit,
 * the tighter of cgroup and system); then, on Linux, the watcher over a
 * fake tree whose figures are rewritten under it (LOW, CRITICAL, OK in
 * that order), a stop that does not wait out the poll, a watcher with
 * nothing to read starting "off", and the real system's answer. The POSIX
 * fallback's watcher starts "off" and never calls back.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "platform/mem.h"
#include "platform/memtree.h"
#include "platform/memwatch.h"
#include "platform/platform.h"
#include "t.h"
#include "util.h"

#define MIB (1ull << 20)

static bool is_linux(void) { return !strcmp(plat_name(), "linux"); }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the table */

static plat_mem_reading cg_reading(uint64_t usage, uint64_t file) {
    return (plat_mem_reading){.scope = PLAT_MEM_SCOPE_CGROUP, .limit = 1000, .usage = usage, .file = file};
}

/* Each share threshold on both sides; page cache is not pressure. */
static void test_level_share(void) {
    const plat_mem_thresholds t = plat_mem_thresholds_default();
    static const struct {
        uint64_t usage, file;
        plat_mem_level want;
    } rows[] = {
        {0, 0, PLAT_MEM_OK},          {749, 0, PLAT_MEM_OK},         {750, 0, PLAT_MEM_LOW},
        {849, 0, PLAT_MEM_LOW},       {850, 0, PLAT_MEM_MODERATE},   {929, 0, PLAT_MEM_MODERATE},
        {930, 0, PLAT_MEM_CRITICAL},  {1200, 0, PLAT_MEM_CRITICAL},  {1000, 500, PLAT_MEM_OK},
        {1000, 251, PLAT_MEM_OK},     {1000, 250, PLAT_MEM_LOW},     {1000, 70, PLAT_MEM_CRITICAL},
        {100, 400, PLAT_MEM_OK}, /* file above usage: nothing unreclaimable */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const plat_mem_reading r = cg_reading(rows[i].usage, rows[i].file);
        T_CHECKF(plat_mem_level_of(&r, &t) == rows[i].want, "usage %llu file %llu: %s, want %s",
                 (unsigned long long)rows[i].usage, (unsigned long long)rows[i].file,
                 plat_mem_level_name(plat_mem_level_of(&r, &t)), plat_mem_level_name(rows[i].want));
    }
    const plat_mem_reading none = {.scope = PLAT_MEM_SCOPE_NONE, .limit = 1000, .usage = 990};
    T_EQ_INT(plat_mem_level_of(&none, &t), PLAT_MEM_OK); /* no scope: the figures mean nothing */
    const plat_mem_reading zero = {.scope = PLAT_MEM_SCOPE_CGROUP, .limit = 0, .usage = 990};
    T_EQ_INT(plat_mem_level_of(&zero, &t), PLAT_MEM_OK);
    T_NEAR(plat_mem_unreclaimable_pct(&(plat_mem_reading){.scope = PLAT_MEM_SCOPE_SYSTEM, .limit = 200, .usage = 150, .file = 50}), 50.0, 1e-9);
    plat_mem_thresholds off = t;
    off.low_pct = 0;
    const plat_mem_reading r80 = cg_reading(800, 0);
    T_EQ_INT(plat_mem_level_of(&r80, &off), PLAT_MEM_OK); /* a threshold of 0 is off */
}

/* PSI avg10 rows and the push events, each on both sides. */
static void test_level_signals(void) {
    const plat_mem_thresholds t = plat_mem_thresholds_default();
    static const struct {
        double some, full;
        plat_mem_level want;
    } rows[] = {
        {9.99, 0, PLAT_MEM_OK},  {10, 0, PLAT_MEM_LOW},       {50, 1.99, PLAT_MEM_LOW},       {50, 2, PLAT_MEM_LOW},
        {50, 4.99, PLAT_MEM_LOW}, {50, 5, PLAT_MEM_MODERATE}, {50, 14.99, PLAT_MEM_MODERATE}, {50, 15, PLAT_MEM_CRITICAL},
        {0, 4.99, PLAT_MEM_OK},  {0, 5, PLAT_MEM_MODERATE}, /* full has no LOW row by default */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        plat_mem_reading r = cg_reading(100, 0);
        r.psi_known = true;
        r.psi_some_avg10 = rows[i].some;
        r.psi_full_avg10 = rows[i].full;
        T_CHECKF(plat_mem_level_of(&r, &t) == rows[i].want, "some %.2f full %.2f: %s", rows[i].some, rows[i].full,
                 plat_mem_level_name(plat_mem_level_of(&r, &t)));
        r.psi_known = false; /* unknown PSI counts for nothing */
        T_EQ_INT(plat_mem_level_of(&r, &t), PLAT_MEM_OK);
    }
    plat_mem_reading r = cg_reading(100, 0);
    r.psi_events = 1;
    T_EQ_INT(plat_mem_level_of(&r, &t), t.psi_event_level);
    r.psi_events = 0;
    r.vmpressure_events = 7; /* below vmpressure_min_events: the burst as reclaim starts */
    T_EQ_INT(plat_mem_level_of(&r, &t), PLAT_MEM_OK);
    r.vmpressure_events = 8;
    T_EQ_INT(plat_mem_level_of(&r, &t), PLAT_MEM_MODERATE);
    plat_mem_thresholds loud = t;
    loud.vmpressure_event_level = PLAT_MEM_CRITICAL;
    loud.vmpressure_min_events = 0; /* any event */
    r.vmpressure_events = 1;
    T_EQ_INT(plat_mem_level_of(&r, &loud), PLAT_MEM_CRITICAL);
    loud.psi_full_low_pct = 2; /* the full row's LOW turned on */
    r = cg_reading(100, 0);
    r.psi_known = true;
    r.psi_full_avg10 = 2;
    T_EQ_INT(plat_mem_level_of(&r, &loud), PLAT_MEM_LOW);
    r.vmpressure_events = 1;
    loud.vmpressure_event_level = PLAT_MEM_OK; /* the row off */
    r.psi_full_avg10 = 0;
    T_EQ_INT(plat_mem_level_of(&r, &loud), PLAT_MEM_OK);
    r = cg_reading(860, 0); /* the highest row wins */
    r.psi_events = 1;
    T_EQ_INT(plat_mem_level_of(&r, &t), PLAT_MEM_MODERATE);
}

/* Up at once; down only release_pct points below the threshold crossed. */
static void test_level_after(void) {
    const plat_mem_thresholds t = plat_mem_thresholds_default();
    static const struct {
        plat_mem_level prev;
        uint64_t usage;
        plat_mem_level want;
    } rows[] = {
        {PLAT_MEM_OK, 760, PLAT_MEM_LOW},          {PLAT_MEM_OK, 940, PLAT_MEM_CRITICAL},
        {PLAT_MEM_LOW, 730, PLAT_MEM_LOW},         {PLAT_MEM_LOW, 720, PLAT_MEM_LOW},
        {PLAT_MEM_LOW, 719, PLAT_MEM_OK},          {PLAT_MEM_CRITICAL, 910, PLAT_MEM_CRITICAL},
        {PLAT_MEM_CRITICAL, 899, PLAT_MEM_MODERATE}, {PLAT_MEM_CRITICAL, 800, PLAT_MEM_LOW},
        {PLAT_MEM_CRITICAL, 100, PLAT_MEM_OK},     {PLAT_MEM_MODERATE, 840, PLAT_MEM_MODERATE},
        {PLAT_MEM_MODERATE, 960, PLAT_MEM_CRITICAL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const plat_mem_reading r = cg_reading(rows[i].usage, 0);
        const plat_mem_level got = plat_mem_level_after(rows[i].prev, &r, &t);
        T_CHECKF(got == rows[i].want, "after %s at %llu: %s, want %s", plat_mem_level_name(rows[i].prev),
                 (unsigned long long)rows[i].usage, plat_mem_level_name(got), plat_mem_level_name(rows[i].want));
    }
    plat_mem_reading r = cg_reading(100, 0); /* an event's level is not held by the share's margin */
    T_EQ_INT(plat_mem_level_after(PLAT_MEM_LOW, &r, &t), PLAT_MEM_OK);
    plat_mem_thresholds wide = t;
    wide.release_pct = 500; /* never below half a threshold: 37.5 for LOW */
    r = cg_reading(380, 0);
    T_EQ_INT(plat_mem_level_after(PLAT_MEM_LOW, &r, &wide), PLAT_MEM_LOW);
    r = cg_reading(370, 0);
    T_EQ_INT(plat_mem_level_after(PLAT_MEM_LOW, &r, &wide), PLAT_MEM_OK);
    T_CHECK(!strcmp(plat_mem_level_name(PLAT_MEM_MODERATE), "moderate") && !strcmp(plat_mem_level_name(9), "?"));
}

/* ---- fake trees */

/* root/rel = text, the folders on the way made, written through a rename so a
 * reader sees the old file or the new, never half of one. */
static void put(const char *root, const char *rel, const char *text) {
    char path[1024], tmp[1100];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *s = strchr(path + strlen(root) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(path, 0700);
        *s = '/';
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    T_CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
    T_CHECK(rename(tmp, path) == 0);
}

static void put_u64(const char *root, const char *rel, uint64_t v) {
    char text[32];
    snprintf(text, sizeof text, "%llu\n", (unsigned long long)v);
    put(root, rel, text);
}

static void put_stat(const char *root, const char *rel, const char *prefix, uint64_t active, uint64_t inactive) {
    char text[512];
    snprintf(text, sizeof text, "cache 1\nrss 2\n%sactive_anon 4096\n%sinactive_file %llu\n%sactive_file %llu\nunevictable 0\n",
             prefix, prefix, (unsigned long long)inactive, prefix, (unsigned long long)active);
    put(root, rel, text);
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

/* root/rel in a buffer of its own (one at a time). */
static const char *at(const char *root, const char *rel) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    return path;
}

static void tree_new(char *root, size_t n, const char *name) {
    tu_tmp_path(root, n, name);
    remove_tree(root);
    T_CHECK(mkdir(root, 0700) == 0);
}

static const char *const MEMINFO = "MemTotal:       16000000 kB\nMemFree:         8000000 kB\nMemAvailable:   12000000 kB\n";
static const char *const PSI = "some avg10=1.25 avg60=0.50 avg300=0.00 total=12345\nfull avg10=0.75 avg60=0.00 avg300=0.00 total=99\n";

/* A v1 tree: the process in /app under the memory hierarchy, whose root is
 * unlimited; cgroup2 mounted too without the controller (as on this machine). */
static void v1_tree(const char *root) {
    put(root, "proc/self/cgroup", "9:pids:/\n4:memory:/app\n1:cpu,cpuacct:/\n0::/\n");
    put(root, "proc/self/mounts",
        "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
        "cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n");
    put(root, "proc/meminfo", MEMINFO);
    put(root, "proc/pressure/memory", PSI);
    put_u64(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", 9223372036854771712ull);
    put_u64(root, "sys/fs/cgroup/memory/memory.usage_in_bytes", 3000 * MIB);
    put_stat(root, "sys/fs/cgroup/memory/memory.stat", "total_", 1000 * MIB, 1000 * MIB);
    put_u64(root, "sys/fs/cgroup/memory/app/memory.limit_in_bytes", 1400 * MIB);
    put_u64(root, "sys/fs/cgroup/memory/app/memory.usage_in_bytes", 1390 * MIB);
    put_stat(root, "sys/fs/cgroup/memory/app/memory.stat", "total_", 300 * MIB, 220 * MIB);
    mkdir(at(root, "sys/fs/cgroup/unified"), 0700);
}

static void test_reader_v1(void) {
    char root[512];
    tree_new(root, sizeof root, "mw_v1");
    v1_tree(root);
    plat_mem_reading r;
    T_CHECK(plat_mem_reading_at(root, &r));
    T_EQ_INT(r.scope, PLAT_MEM_SCOPE_CGROUP);
    T_EQ_INT(r.cgroup_version, 1);
    T_CHECK(r.limit == 1400 * MIB && r.usage == 1390 * MIB && r.file == 520 * MIB); /* the total_ lines */
    T_CHECK(r.psi_known && r.psi_some_avg10 == 1.25 && r.psi_full_avg10 == 0.75 && !r.psi_events && !r.vmpressure_events);
    T_CHECK(r.psi_some_total_us == 12345 && r.psi_full_total_us == 99);
    T_NEAR(plat_mem_unreclaimable_pct(&r), 100.0 * 870 / 1400, 1e-9);
    memtree_cgroup cg;
    T_CHECK(memtree_find(root, &cg) && cg.version == 1);
    memtree_figures f = memtree_walk(&cg, true, NULL);
    T_CHECK(f.limited && f.room == 10 * MIB && f.headroom == 530 * MIB);
    f = memtree_walk(&cg, false, NULL); /* without memory.stat: room only */
    T_CHECK(f.limited && f.room == 10 * MIB && f.headroom == 10 * MIB && f.file == 0);
    /* no limit on the folder: the system's share (meminfo: 4 of 16 GB cannot be reclaimed) */
    put_u64(root, "sys/fs/cgroup/memory/app/memory.limit_in_bytes", 9223372036854771712ull);
    T_CHECK(plat_mem_reading_at(root, &r) && r.scope == PLAT_MEM_SCOPE_SYSTEM && r.cgroup_version == 1);
    T_CHECK(r.limit == 16000000ull * 1024 && r.usage == 8000000ull * 1024 && r.file == 4000000ull * 1024);
    T_NEAR(plat_mem_unreclaimable_pct(&r), 25.0, 1e-9);
    T_CHECK(memtree_walk(&cg, true, NULL).headroom == UINT64_MAX);
    /* a limit far above the system's memory: the system's share is the tighter */
    put_u64(root, "sys/fs/cgroup/memory/app/memory.limit_in_bytes", 1ull << 50);
    T_CHECK(plat_mem_reading_at(root, &r) && r.scope == PLAT_MEM_SCOPE_SYSTEM);
    remove_tree(root);
}

/* Kept descriptors: read again at offset 0 they give the file's text now
 * (the kernel's files are made at each read; here a file rewritten in place). */
static void test_reader_fds(void) {
    char root[512];
    tree_new(root, sizeof root, "mw_fds");
    v1_tree(root);
    memtree_cgroup cg;
    T_CHECK(memtree_find(root, &cg));
    memtree_fds fds = {0};
    plat_mem_reading r;
    memtree_read(root, &cg, at(root, "proc/pressure/memory"), &fds, &r);
    T_CHECK(r.scope == PLAT_MEM_SCOPE_CGROUP && r.usage == 1390 * MIB && r.psi_known);
    T_EQ_INT(fds.n, 6); /* meminfo; the folder's limit, usage and stat; the root's limit; PSI */
    FILE *f = fopen(at(root, "sys/fs/cgroup/memory/app/memory.usage_in_bytes"), "r+");
    T_CHECK(f != NULL);
    if (f) fprintf(f, "%llu\n", (unsigned long long)(1000 * MIB)), fclose(f); /* same length: in place */
    memtree_read(root, &cg, at(root, "proc/pressure/memory"), &fds, &r);
    T_CHECK(r.usage == 1000 * MIB && fds.n == 6);
    memtree_fds_close(&fds);
    T_EQ_INT(fds.n, 0);
    remove_tree(root);
}

/* A folder above the process's, limited more tightly, gives the reading;
 * files missing read as no cgroup. */
static void test_reader_v1_nested(void) {
    char root[512];
    tree_new(root, sizeof root, "mw_v1n");
    v1_tree(root);
    put(root, "proc/self/cgroup", "4:memory:/app/job\n");
    put_u64(root, "sys/fs/cgroup/memory/app/job/memory.limit_in_bytes", 9223372036854771712ull);
    put_u64(root, "sys/fs/cgroup/memory/app/job/memory.usage_in_bytes", 100 * MIB);
    put_stat(root, "sys/fs/cgroup/memory/app/job/memory.stat", "total_", 0, 0);
    plat_mem_reading r;
    T_CHECK(plat_mem_reading_at(root, &r) && r.scope == PLAT_MEM_SCOPE_CGROUP && r.limit == 1400 * MIB);
    /* the process's folder missing under the mount point: the mount point is its cgroup (a container's view) */
    put(root, "proc/self/cgroup", "4:memory:/docker/abc\n");
    memtree_cgroup cg;
    T_CHECK(memtree_find(root, &cg) && cg.version == 1 && strlen(cg.dir) == cg.top_len);
    T_CHECK(plat_mem_reading_at(root, &r) && r.scope == PLAT_MEM_SCOPE_SYSTEM); /* its root has no limit */
    /* no usage file anywhere: no cgroup; no meminfo: no scope; no PSI either: nothing */
    remove_tree(at(root, "sys"));
    T_CHECK(!memtree_find(root, &cg) && cg.version == 0);
    T_CHECK(plat_mem_reading_at(root, &r) && r.scope == PLAT_MEM_SCOPE_SYSTEM && r.cgroup_version == 0);
    remove_tree(at(root, "proc/meminfo"));
    T_CHECK(plat_mem_reading_at(root, &r) && r.scope == PLAT_MEM_SCOPE_NONE && r.psi_known);
    remove_tree(at(root, "proc/pressure"));
    T_CHECK(!plat_mem_reading_at(root, &r) && r.scope == PLAT_MEM_SCOPE_NONE && !r.psi_known && r.limit == 0);
    remove_tree(root);
    T_CHECK(!plat_mem_reading_at(root, &r));
}

/* cgroup2: "max" is no limit, the folder above may set one, memory.stat's
 * own lines (no total_), memory.pressure when the system has no PSI file. */
static void test_reader_v2(void) {
    char root[512];
    tree_new(root, sizeof root, "mw_v2");
    put(root, "proc/self/cgroup", "0::/user.slice/app\n");
    put(root, "proc/self/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n");
    put(root, "proc/meminfo", MEMINFO);
    put(root, "sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n"); /* the root: no memory.current */
    put(root, "sys/fs/cgroup/user.slice/memory.max", "max\n");
    put_u64(root, "sys/fs/cgroup/user.slice/memory.current", 2000 * MIB);
    put(root, "sys/fs/cgroup/user.slice/app/memory.max", "max\n");
    put_u64(root, "sys/fs/cgroup/user.slice/app/memory.current", 900 * MIB);
    put_stat(root, "sys/fs/cgroup/user.slice/app/memory.stat", "", 100 * MIB, 200 * MIB);
    put(root, "sys/fs/cgroup/user.slice/app/memory.pressure", "some avg10=30.00 avg60=1 avg300=0 total=5\nfull avg10=20.00 avg60=0 avg300=0 total=1\n");
    plat_mem_reading r;
    T_CHECK(plat_mem_reading_at(root, &r) && r.scope == PLAT_MEM_SCOPE_SYSTEM && r.cgroup_version == 2);
    T_CHECK(r.psi_known && r.psi_some_avg10 == 30.0 && r.psi_full_avg10 == 20.0); /* the cgroup's pressure file */
    const plat_mem_thresholds t = plat_mem_thresholds_default();
    T_EQ_INT(plat_mem_level_of(&r, &t), PLAT_MEM_CRITICAL); /* full 20 % */
    put_u64(root, "sys/fs/cgroup/user.slice/app/memory.max", 1000 * MIB);
    T_CHECK(plat_mem_reading_at(root, &r) && r.scope == PLAT_MEM_SCOPE_CGROUP && r.cgroup_version == 2);
    T_CHECK(r.limit == 1000 * MIB && r.usage == 900 * MIB && r.file == 300 * MIB);
    put(root, "proc/pressure/memory", PSI); /* the system's PSI file comes first */
    T_CHECK(plat_mem_reading_at(root, &r) && r.psi_some_avg10 == 1.25);
    put(root, "proc/pressure/memory", "bogus\n"); /* unreadable numbers: PSI unknown, not 0 % */
    T_CHECK(plat_mem_reading_at(root, &r) && !r.psi_known && r.psi_some_avg10 == 0);
    T_CHECK(r.psi_some_total_us == -1 && r.psi_full_total_us == -1);
    /* the slice above: 2000 MiB of 2100 (no memory.stat there: no file pages counted) */
    put_u64(root, "sys/fs/cgroup/user.slice/memory.max", 2100 * MIB);
    T_CHECK(plat_mem_reading_at(root, &r) && r.limit == 2100 * MIB && r.usage == 2000 * MIB && r.file == 0);
    memtree_cgroup cg;
    T_CHECK(memtree_find(root, &cg));
    const memtree_figures f = memtree_walk(&cg, true, NULL);
    T_CHECK(f.room == 100 * MIB && f.headroom == 100 * MIB); /* the slice's, tighter than the folder's 400 */
    put(root, "proc/self/cgroup", "0::/\n"); /* cgroup2's root: no usage file, no cgroup */
    T_CHECK(!memtree_find(root, &cg));
    remove_tree(root);
}

/* ---- the watcher (Linux) */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    plat_mem_level seen[16]; /* the levels, each change once */
    int n, calls;
} record;

static void on_level(void *user, plat_mem_level level, const plat_mem_reading *r) {
    record *rec = user;
    (void)r;
    pthread_mutex_lock(&rec->mu);
    rec->calls++;
    if ((!rec->n || rec->seen[rec->n - 1] != level) && rec->n < 16) rec->seen[rec->n++] = level;
    pthread_cond_broadcast(&rec->cv);
    pthread_mutex_unlock(&rec->mu);
}

static int calls_of(record *rec) {
    pthread_mutex_lock(&rec->mu);
    const int n = rec->calls;
    pthread_mutex_unlock(&rec->mu);
    return n;
}

/* Waits until the last level recorded is want, at most seconds; true when it came. */
static bool wait_level(record *rec, plat_mem_level want, double seconds) {
    const double end = now_s() + seconds;
    pthread_mutex_lock(&rec->mu);
    while (!(rec->n && rec->seen[rec->n - 1] == want) && now_s() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&rec->cv, &rec->mu, &ts);
    }
    const bool ok = rec->n && rec->seen[rec->n - 1] == want;
    pthread_mutex_unlock(&rec->mu);
    return ok;
}

static void set_usage(const char *root, uint64_t usage_mib) {
    put_u64(root, "sys/fs/cgroup/memory/app/memory.usage_in_bytes", usage_mib * MIB);
}

/* Poll mode over a fake v1 tree: 1400 MiB limit, 520 MiB of file pages.
 * OK at 900 (27 %), LOW at 1600 (77 %), CRITICAL at 1850 (95 %), OK at 900. */
static void test_watch_poll(void) {
    char root[512];
    tree_new(root, sizeof root, "mw_watch");
    v1_tree(root);
    put(root, "proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    set_usage(root, 900);
    record rec = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    const plat_mem_watch_config cfg = {.poll_ms = 10, .root = root, .poll_only = true};
    plat_mem_watch *w = NULL;
    err_t err = {0};
    T_EQ_INT(plat_mem_watch_start(&cfg, on_level, &rec, &w, &err), ERR_OK);
    const char *src = plat_mem_watch_source(w);
    printf("poll-mode source: %s\n", src);
    T_CHECK(!strncmp(src, "every 10 ms: cgroup v1 /sys/fs/cgroup/memory/app (limit 1400 MiB), /proc/meminfo, PSI avg10 of /proc/pressure/memory", 110));
    usleep(100000);
    T_EQ_INT(calls_of(&rec), 0); /* OK from the start: no callback */
    set_usage(root, 1600);
    T_CHECK(wait_level(&rec, PLAT_MEM_LOW, 5));
    T_EQ_INT(plat_mem_watch_level(w), PLAT_MEM_LOW);
    set_usage(root, 1850);
    T_CHECK(wait_level(&rec, PLAT_MEM_CRITICAL, 5));
    const int calls = calls_of(&rec);
    usleep(100000);
    T_CHECKF(calls_of(&rec) > calls + 2, "%d calls in 100 ms at CRITICAL, want one a poll", calls_of(&rec) - calls);
    set_usage(root, 900);
    T_CHECK(wait_level(&rec, PLAT_MEM_OK, 5));
    plat_mem_watch_stop(w);
    T_EQ_INT(rec.n, 3);
    T_CHECK(rec.seen[0] == PLAT_MEM_LOW && rec.seen[1] == PLAT_MEM_CRITICAL && rec.seen[2] == PLAT_MEM_OK);
    remove_tree(root);
}

/* PSI's 10 s averages decay slowly after stalls stop: the watcher reads the
 * totals, and once they stand still for a second the level falls although
 * avg10 still says 20 %. */
static void test_watch_psi_recent(void) {
    char root[512];
    tree_new(root, sizeof root, "mw_recent");
    v1_tree(root);
    set_usage(root, 900); /* 27 %: the share says nothing */
    put(root, "proc/pressure/memory", "some avg10=25.00 avg60=5.00 avg300=1.00 total=9000000\n"
                                      "full avg10=20.00 avg60=4.00 avg300=1.00 total=8000000\n");
    record rec = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    const plat_mem_watch_config cfg = {.poll_ms = 10, .root = root, .poll_only = true};
    plat_mem_watch *w = NULL;
    err_t err = {0};
    T_EQ_INT(plat_mem_watch_start(&cfg, on_level, &rec, &w, &err), ERR_OK);
    T_CHECK(wait_level(&rec, PLAT_MEM_CRITICAL, 5)); /* full avg10 20 % >= 15 % */
    const double t0 = now_s();
    T_CHECK(wait_level(&rec, PLAT_MEM_OK, 5)); /* the totals stood still for a second */
    const double took = now_s() - t0;
    printf("PSI avg10 20 %%, totals still: back to OK after %.2f s\n", took);
    T_CHECKF(took >= 0.9 && took < 4.0, "back to OK after %.2f s, want about one second", took);
    plat_mem_watch_stop(w);
    remove_tree(root);
}

/* Not in poll mode over a fake tree: the trigger and the eventfd are not
 * armed on plain files (the fake PSI file is left as it was), and a stop
 * ends a 60 s poll at once. */
static void test_watch_stop(void) {
    char root[512];
    tree_new(root, sizeof root, "mw_stop");
    v1_tree(root);
    record rec = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    const plat_mem_watch_config cfg = {.poll_ms = 60000, .root = root};
    plat_mem_watch *w = NULL;
    T_EQ_INT(plat_mem_watch_start(&cfg, on_level, &rec, &w, NULL), ERR_OK);
    printf("fake-tree source: %s\n", plat_mem_watch_source(w));
    T_CHECK(strstr(plat_mem_watch_source(w), "no PSI trigger (/proc/pressure/memory: a plain file") != NULL);
    T_CHECK(strstr(plat_mem_watch_source(w), "no vmpressure eventfd") != NULL);
    usleep(50000); /* the first reading made: 870 of 1400 MiB (62 %), OK */
    T_EQ_INT(calls_of(&rec), 0);
    const double t0 = now_s();
    plat_mem_watch_stop(w);
    const double took = now_s() - t0;
    printf("stop took %.2f ms\n", took * 1e3);
    T_CHECKF(took < 0.5, "stop took %.3f s", took);
    size_t n = 0;
    unsigned char *text = tu_read_file(at(root, "proc/pressure/memory"), &n);
    T_CHECK(text && !strcmp((char *)text, PSI));
    free(text);
    remove_tree(root);
}

/* Nothing to read: "off", no callback; bad arguments refused. */
static void test_watch_off(void) {
    char root[512];
    tree_new(root, sizeof root, "mw_off");
    record rec = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    plat_mem_watch_config cfg = {.poll_ms = 10, .root = root};
    plat_mem_watch *w = NULL;
    T_EQ_INT(plat_mem_watch_start(&cfg, on_level, &rec, &w, NULL), ERR_OK);
    T_CHECK(w && !strncmp(plat_mem_watch_source(w), "off: ", 5));
    usleep(50000);
    T_EQ_INT(rec.calls, 0);
    plat_mem_watch_stop(w);
    err_t err = {0};
    cfg.psi_trigger = "some 100000";
    T_EQ_INT(plat_mem_watch_start(&cfg, on_level, &rec, &w, &err), ERR_INVALID_ARG);
    T_CHECK(strstr(err.msg, "PSI trigger") != NULL);
    cfg.psi_trigger = "full 2000000 1000000"; /* more stall than window */
    T_EQ_INT(plat_mem_watch_start(&cfg, on_level, &rec, &w, &err), ERR_INVALID_ARG);
    cfg.psi_trigger = NULL;
    T_EQ_INT(plat_mem_watch_start(&cfg, NULL, &rec, &w, &err), ERR_INVALID_ARG);
    cfg.poll_ms = 3600001;
    T_EQ_INT(plat_mem_watch_start(&cfg, on_level, &rec, &w, &err), ERR_INVALID_ARG);
    plat_mem_watch_stop(NULL);
    remove_tree(root);
}

/* The real system: a reading, the headroom beside the room, a watcher's sentence. */
static void test_watch_real(void) {
    plat_mem_reading r;
    T_CHECK(plat_mem_reading_at(NULL, &r) && r.scope != PLAT_MEM_SCOPE_NONE);
    const uint64_t room = plat_mem_cgroup_room(), head = plat_mem_cgroup_headroom();
    printf("this system: scope %d, cgroup v%d, %.1f %% unreclaimable of %llu MiB, PSI some %.2f full %.2f; room %llu, headroom %llu\n",
           r.scope, r.cgroup_version, plat_mem_unreclaimable_pct(&r), (unsigned long long)(r.limit >> 20), r.psi_some_avg10,
           r.psi_full_avg10, (unsigned long long)room, (unsigned long long)head);
    T_CHECK((room == UINT64_MAX) == (head == UINT64_MAX));
    record rec = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    plat_mem_watch *w = NULL;
    T_EQ_INT(plat_mem_watch_start(NULL, on_level, &rec, &w, NULL), ERR_OK);
    printf("real source: %s\n", plat_mem_watch_source(w));
    T_CHECK(!strncmp(plat_mem_watch_source(w), "every 100 ms: ", 14));
    plat_mem_watch_stop(w);
}

/* The POSIX fallback: "off", ERR_OK, never a callback, no cgroup limit. */
static void test_watch_posix(void) {
    record rec = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    const plat_mem_watch_config cfg = {.poll_ms = 10};
    plat_mem_watch *w = NULL;
    T_EQ_INT(plat_mem_watch_start(&cfg, on_level, &rec, &w, NULL), ERR_OK);
    T_CHECK(w && !strcmp(plat_mem_watch_source(w), "off: this build has no memory pressure signal"));
    usleep(50000);
    T_CHECK(rec.calls == 0 && plat_mem_watch_level(w) == PLAT_MEM_OK);
    plat_mem_watch_stop(w);
    T_CHECK(plat_mem_cgroup_headroom() == UINT64_MAX);
    T_EQ_INT(plat_mem_watch_start(&cfg, NULL, &rec, &w, NULL), ERR_INVALID_ARG);
}

int main(void) {
    test_level_share();
    test_level_signals();
    test_level_after();
    test_reader_v1();
    test_reader_v1_nested();
    test_reader_fds();
    test_reader_v2();
    if (is_linux()) {
        test_watch_poll();
        test_watch_psi_recent();
        test_watch_stop();
        test_watch_off();
        test_watch_real();
    } else {
        test_watch_posix();
    }
    T_DONE();
}
