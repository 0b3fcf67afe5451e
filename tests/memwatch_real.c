/*
 * memwatch_real — the memory watcher on the real system (a harness, not a
 * test: tests/memwatch_real.sh runs it under /work/shared/tools/pressure.sh).
 *
 *   memwatch_real idle SECONDS [POLL_MS]
 *       the watcher alone, the process otherwise asleep: the time its
 *       thread ran (the kernel's schedstat, in ns) and its source.
 *   memwatch_real hold FILE PRIVATE_MIB SECONDS [react]
 *       maps FILE and reads it whole (its page cache charged to this
 *       cgroup), fills PRIVATE_MIB of private memory (the packed weights),
 *       and watches for SECONDS. Every callback is a line of the timeline;
 *       (those that change the level or the events; the rest are counted),
 *       beside it a sampler reads the cgroup every 2 ms and notes when the
 *       unreclaimable share first crossed each threshold, so the reaction
 *       time of each level is printed. "react": at LOW the private memory
 *       is given back (munmap), as the runtime will.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "platform/memtree.h"
#include "platform/memwatch.h"

static double t0;
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct {
    plat_mem_thresholds t;
    double crossed[4];  /* when the sampler first saw the share reach each level's threshold (s), 0: not yet */
    double called[4];   /* when the watcher first called back with each level */
    double first_psi, first_vmp, first_avg; /* when a callback's reading first held each signal */
    _Atomic int react, gave_back, stop;
    void *priv;
    size_t priv_len;
    unsigned calls;
} g;

static void on_level(void *user, plat_mem_level level, const plat_mem_reading *r) {
    (void)user; /* the watcher's thread: the statics below are its own */
    const double t = now_s() - t0;
    g.calls++;
    if (!g.called[level]) g.called[level] = t;
    if (r->psi_events && !g.first_psi) g.first_psi = t;
    if (r->vmpressure_events && !g.first_vmp) g.first_vmp = t;
    plat_mem_reading quiet = *r;
    quiet.psi_events = quiet.vmpressure_events = 0;
    quiet.scope = PLAT_MEM_SCOPE_NONE;
    if (plat_mem_level_of(&quiet, &g.t) && !g.first_avg) g.first_avg = t;
    static plat_mem_level last_level = PLAT_MEM_OK;
    static unsigned last_psi, last_vmp;
    const bool news = level != last_level || r->psi_events != last_psi || r->vmpressure_events != last_vmp;
    last_level = level, last_psi = r->psi_events, last_vmp = r->vmpressure_events;
    if (news) printf("%7.3f s  %-8s  %5.1f %% of %4llu MiB (usage %4llu, file %4llu)  psi some %5.2f full %5.2f  events psi %u vmp %u\n",
           t, plat_mem_level_name(level), plat_mem_unreclaimable_pct(r), (unsigned long long)(r->limit >> 20),
           (unsigned long long)(r->usage >> 20), (unsigned long long)(r->file >> 20), r->psi_some_avg10,
           r->psi_full_avg10, r->psi_events, r->vmpressure_events);
    fflush(stdout);
    if (level >= PLAT_MEM_LOW && atomic_load(&g.react) && !atomic_exchange(&g.gave_back, 1)) {
        munmap(g.priv, g.priv_len);
        printf("%7.3f s  gave back %zu MiB of private memory (%.2f ms after the callback began)\n", now_s() - t0,
               g.priv_len >> 20, (now_s() - t0 - t) * 1e3);
    }
}

/* Every 2 ms: when the share first reached each threshold. */
static void *sampler(void *arg) {
    const memtree_cgroup *cg = arg;
    static memtree_fds fds;
    while (!atomic_load(&g.stop)) {
        plat_mem_reading r;
        memtree_read("", cg, NULL, &fds, &r);
        const double s = plat_mem_unreclaimable_pct(&r), t = now_s() - t0;
        const double th[4] = {0, g.t.low_pct, g.t.moderate_pct, g.t.critical_pct};
        for (int l = 1; l < 4; l++)
            if (s >= th[l] && !g.crossed[l]) g.crossed[l] = t;
        usleep(2000);
    }
    return NULL;
}

/* The time on CPU of every thread but the calling one, in s (schedstat: ns, exact). */
static double others_cpu_s(void) {
    DIR *d = opendir("/proc/self/task");
    double sum = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char path[300], line[128];
        if (e->d_name[0] == '.' || atoi(e->d_name) == gettid()) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(line, sizeof line, f)) sum += strtod(line, NULL) * 1e-9;
        if (f) fclose(f);
    }
    if (d) closedir(d);
    return sum;
}

static int idle(int seconds, unsigned poll_ms) {
    plat_mem_watch *w;
    err_t err;
    const plat_mem_watch_config cfg = {.poll_ms = poll_ms};
    if (plat_mem_watch_start(&cfg, on_level, NULL, &w, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    const double t0w = others_cpu_s(), w0 = now_s();
    sleep((unsigned)seconds);
    const double tw = others_cpu_s() - t0w, wall = now_s() - w0, polls = wall * 1000.0 / poll_ms;
    printf("idle %.1f s, poll %u ms: the watcher thread ran %.2f ms (schedstat; %.4f %% of one core, %.1f us a poll)\n"
           "source: %s\n", wall, poll_ms, tw * 1e3, 100 * tw / wall, 1e6 * tw / polls, plat_mem_watch_source(w));
    plat_mem_watch_stop(w);
    return 0;
}

/* The file mapped and read whole, and private memory filled. */
static int load(const char *file, size_t priv_mib) {
    const int fd = open(file, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) return perror(file), 1;
    const unsigned char *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return perror("mmap"), 1;
    unsigned sum = 0;
    for (off_t i = 0; i < st.st_size; i += 4096) sum += map[i];
    g.priv_len = priv_mib << 20;
    g.priv = mmap(NULL, g.priv_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g.priv == MAP_FAILED) return perror("mmap"), 1;
    memset(g.priv, 1 + (int)(sum & 1), g.priv_len);
    printf("%7.3f s  loaded: %lld MiB of file in page cache, %zu MiB private\n", now_s() - t0,
           (long long)(st.st_size >> 20), priv_mib);
    return 0;
}

static void summary(void) {
    static const char *const names[] = {"", "LOW", "MODERATE", "CRITICAL"};
    for (int l = 1; l < 4; l++) {
        if (!g.crossed[l] && !g.called[l]) continue;
        printf("%-8s ", names[l]);
        if (g.crossed[l]) printf("share crossed at %.3f s, ", g.crossed[l]);
        else printf("share never crossed, ");
        if (g.called[l]) printf("first callback at %.3f s", g.called[l]);
        else printf("no callback");
        if (g.crossed[l] && g.called[l]) printf(": %+.1f ms", (g.called[l] - g.crossed[l]) * 1e3);
        printf("\n");
    }
    printf("first PSI trigger event %.3f s, first vmpressure event %.3f s, first PSI avg10 level %.3f s (0: never); %u callbacks\n",
           g.first_psi, g.first_vmp, g.first_avg, g.calls);
}

static int hold(const char *file, size_t priv_mib, int seconds, bool react) {
    g.react = react;
    if (load(file, priv_mib)) return 1;
    memtree_cgroup cg;
    memtree_find("", &cg);
    pthread_t s;
    pthread_create(&s, NULL, sampler, &cg);
    plat_mem_watch *w;
    err_t err;
    if (plat_mem_watch_start(NULL, on_level, NULL, &w, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    printf("%7.3f s  watching: %s\n", now_s() - t0, plat_mem_watch_source(w));
    fflush(stdout);
    sleep((unsigned)seconds);
    plat_mem_watch_stop(w);
    atomic_store(&g.stop, 1);
    pthread_join(s, NULL);
    summary();
    return 0;
}

int main(int argc, char **argv) {
    t0 = now_s();
    g.t = plat_mem_thresholds_default();
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && !strcmp(argv[1], "idle")) return idle(atoi(argv[2]), argc > 3 ? (unsigned)atoi(argv[3]) : 100);
    if (argc >= 5 && !strcmp(argv[1], "hold"))
        return hold(argv[2], (size_t)atoll(argv[3]), atoi(argv[4]), argc > 5 && !strcmp(argv[5], "react"));
    fprintf(stderr, "usage: memwatch_real idle SECONDS [POLL_MS] | hold FILE PRIVATE_MIB SECONDS [react]\n");
    return 2;
}
