/*
 * platform/linux/memwatch — see platform/memwatch.h. One thread sleeps in
 * poll() on up to three descriptors: an eventfd that stop writes, the PSI
 * trigger (POLLPRI when the kernel saw the stall it was given within its
 * window; at most one wake-up a window) and, on cgroup v1, the eventfd
 * registered through cgroup.event_control for memory.pressure_level
 * "medium" (the kernel's reclaim scanning far more than it frees). The
 * poll's timeout is the next re-read of the cgroup, meminfo and PSI
 * figures, every poll_ms. A push event brings the next reading forward to
 * MIN_GAP_NS after the last (at once, mostly; a burst of vmpressure events
 * costs one reading a gap, not one each). Idle, the thread wakes only for
 * the poll. The kernel's files are kept open and read again with pread
 * (platform/memtree.h: half the cost of opening them each poll). The
 * thread blocks every signal, so none of the process's handlers runs on it.
 */
#define _GNU_SOURCE /* eventfd */
#include "platform/memwatch.h"

#include "platform/memtree.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_POLL_MS 100u
#define DEFAULT_TRIGGER "some 100000 1000000"
#define UNPRIVILEGED_TRIGGER "some 200000 2000000" /* the same share, in a window the kernel allows anyone */
#define MIN_GAP_NS 10000000ull /* 10 ms */

typedef struct {
    unsigned count; /* wake-ups since the first of this burst */
    uint64_t last_ns;
} burst;

struct plat_mem_watch {
    pthread_t thread;
    bool running;
    int wake_fd, psi_fd, vmp_fd, vmp_level_fd;
    unsigned poll_ms;
    uint64_t hold_ns; /* how long a push event holds its level: the trigger's window */
    plat_mem_thresholds t;
    plat_mem_watch_fn cb;
    void *user;
    char root[512];
    memtree_cgroup cg;
    char psi_path[1100];
    burst psi, vmp;
    uint64_t mark_ns;            /* PSI totals as last marked (0: none yet) */
    int64_t mark_some, mark_full;
    double recent_some, recent_full; /* the share stalled between the last two marks; < 0: not yet */
    memtree_fds fds; /* the kernel's files kept open (not a fake tree's) */
    _Atomic int level;
    char source[768];
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void source_add(plat_mem_watch *w, const char *fmt, ...) {
    const size_t n = strlen(w->source);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->source + n, sizeof w->source - n, fmt, ap);
    va_end(ap);
}

/* "some|full STALL_US WINDOW_US" with 0 < stall <= window: the window in ns
 * into *hold_ns. The kernel's own limits (a window of 0.5 to 10 s) it checks. */
static bool trigger_parse(const char *trig, uint64_t *hold_ns) {
    char *end;
    if (strncmp(trig, "some ", 5) && strncmp(trig, "full ", 5)) return false;
    const unsigned long long stall = strtoull(trig + 5, &end, 10);
    if (end == trig + 5 || *end != ' ') return false;
    const char *w = end + 1;
    const unsigned long long window = strtoull(w, &end, 10);
    if (end == w || (*end && *end != '\n') || !stall || stall > window || window > 60000000ull) return false;
    *hold_ns = window * 1000ull;
    return true;
}

/* trig written to a new descriptor of the pressure file: the descriptor,
 * or -1 with why. */
static int trigger_open(const char *path, const char *trig, const char **why) {
    struct stat st;
    const int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    *why = fd < 0 ? strerror(errno) : NULL;
    if (!*why && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) *why = "a plain file, not the kernel's";
    if (!*why && write(fd, trig, strlen(trig) + 1) < 0) *why = strerror(errno);
    if (*why && fd >= 0) close(fd);
    return *why ? -1 : fd;
}

/* The PSI trigger on the pressure file; why not into the source when it
 * cannot be armed. Without CAP_SYS_RESOURCE the kernel takes only windows
 * that are whole multiples of 2 s: the default falls back to one. */
static void arm_psi(plat_mem_watch *w, const char *trig, bool fallback) {
    const char *why;
    w->psi_fd = trigger_open(w->psi_path, trig, &why);
    if (w->psi_fd < 0 && fallback && strcmp(why, "a plain file, not the kernel's")) {
        trig = UNPRIVILEGED_TRIGGER;
        w->psi_fd = trigger_open(w->psi_path, trig, &why);
        if (w->psi_fd >= 0) trigger_parse(trig, &w->hold_ns);
    }
    if (w->psi_fd < 0) {
        source_add(w, "; no PSI trigger (%s: %s)", w->psi_path + strlen(w->root), why);
        return;
    }
    source_add(w, "; PSI trigger \"%s\" on %s", trig, w->psi_path + strlen(w->root));
}

/* memory.pressure_level "medium" of a v1 cgroup, through cgroup.event_control. */
static void arm_vmpressure(plat_mem_watch *w) {
    char path[1200], line[64];
    snprintf(path, sizeof path, "%s/memory.pressure_level", w->cg.dir);
    const int level_fd = open(path, O_RDONLY | O_CLOEXEC), efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    snprintf(path, sizeof path, "%s/cgroup.event_control", w->cg.dir);
    const int ctl = level_fd < 0 || efd < 0 ? -1 : open(path, O_WRONLY | O_CLOEXEC);
    const int n = snprintf(line, sizeof line, "%d %d medium", efd, level_fd);
    const bool ok = ctl >= 0 && write(ctl, line, (size_t)n) == n;
    const char *why = ok ? NULL : strerror(errno);
    if (ctl >= 0) close(ctl);
    if (ok) {
        w->vmp_fd = efd;
        w->vmp_level_fd = level_fd;
        source_add(w, "; vmpressure \"medium\" eventfd");
        return;
    }
    if (efd >= 0) close(efd);
    if (level_fd >= 0) close(level_fd);
    source_add(w, "; no vmpressure eventfd (%s)", why);
}

/* How many wake-ups of b fall in the hold window before now. */
static unsigned burst_now(const burst *b, uint64_t now, uint64_t hold) {
    return b->count && now - b->last_ns <= hold ? b->count : 0;
}

static void burst_add(burst *b, unsigned n, uint64_t now, uint64_t hold) {
    b->count = burst_now(b, now, hold) + n;
    b->last_ns = now;
}

/* PSI over the last second, from the totals (memwatch.h): each average
 * replaced by it when lower. */
static void recent_psi(plat_mem_watch *w, plat_mem_reading *r, uint64_t now) {
    if (r->psi_some_total_us < 0) return;
    if (w->mark_ns && now - w->mark_ns >= 1000000000ull) {
        const double ms = (double)(now - w->mark_ns) / 1e6;
        w->recent_some = (double)(r->psi_some_total_us - w->mark_some) / 10.0 / ms; /* us/ms/10: percent */
        w->recent_full = r->psi_full_total_us < 0 ? -1 : (double)(r->psi_full_total_us - w->mark_full) / 10.0 / ms;
        if (w->recent_some < 0) w->recent_some = 0; /* totals that went back (a file replaced): no stall seen */
        if (r->psi_full_total_us >= 0 && w->recent_full < 0) w->recent_full = 0;
    }
    if (!w->mark_ns || now - w->mark_ns >= 1000000000ull)
        w->mark_ns = now, w->mark_some = r->psi_some_total_us, w->mark_full = r->psi_full_total_us;
    if (w->recent_some >= 0 && w->recent_some < r->psi_some_avg10) r->psi_some_avg10 = w->recent_some;
    if (w->recent_full >= 0 && w->recent_full < r->psi_full_avg10) r->psi_full_avg10 = w->recent_full;
}

/* A reading with the push events of the hold window, a new level, and the callback. */
static void take_reading(plat_mem_watch *w, uint64_t now) {
    plat_mem_reading r;
    memtree_read(w->root, &w->cg, w->psi_path, w->root[0] ? NULL : &w->fds, &r);
    recent_psi(w, &r, now);
    r.psi_events = burst_now(&w->psi, now, w->hold_ns);
    r.vmpressure_events = burst_now(&w->vmp, now, w->hold_ns);
    const plat_mem_level prev = (plat_mem_level)atomic_load(&w->level),
                         level = plat_mem_level_after(prev, &r, &w->t);
    atomic_store(&w->level, (int)level);
    if (level != prev || level != PLAT_MEM_OK) w->cb(w->user, level, &r);
}

/* The push descriptors that woke the poll: counted into their bursts;
 * true when one fired. A PSI file that reports an error is gone (its cgroup
 * removed): it is closed and the poll goes on. */
static bool drain(plat_mem_watch *w, const struct pollfd *p, int n, uint64_t now) {
    bool pushed = false;
    for (int i = 1; i < n; i++) {
        if (!p[i].revents) continue;
        if (p[i].fd == w->psi_fd && (p[i].revents & POLLPRI)) {
            burst_add(&w->psi, 1, now, w->hold_ns);
            pushed = true;
        } else if (p[i].fd == w->vmp_fd && (p[i].revents & POLLIN)) {
            uint64_t c = 0;
            if (read(w->vmp_fd, &c, sizeof c) == (ssize_t)sizeof c && c) burst_add(&w->vmp, (unsigned)c, now, w->hold_ns);
            pushed = true;
        }
        if (p[i].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            close(p[i].fd);
            if (p[i].fd == w->psi_fd) w->psi_fd = -1;
            else w->vmp_fd = -1;
        }
    }
    return pushed;
}

static void *watch_main(void *arg) {
    plat_mem_watch *w = arg;
    const uint64_t period = (uint64_t)w->poll_ms * 1000000ull;
    uint64_t last = now_ns(), next = last;
    for (;;) {
        struct pollfd p[3] = {{.fd = w->wake_fd, .events = POLLIN}};
        int n = 1;
        if (w->psi_fd >= 0) p[n++] = (struct pollfd){.fd = w->psi_fd, .events = POLLPRI};
        if (w->vmp_fd >= 0) p[n++] = (struct pollfd){.fd = w->vmp_fd, .events = POLLIN};
        uint64_t now = now_ns();
        const int timeout = next > now ? (int)((next - now + 999999) / 1000000) : 0;
        if (poll(p, (nfds_t)n, timeout) < 0 && errno != EINTR) /* ENOMEM, say: on with the polls */
            nanosleep(&(struct timespec){.tv_nsec = (long)MIN_GAP_NS}, NULL);
        if (p[0].revents) return NULL; /* stop */
        now = now_ns();
        if (drain(w, p, n, now) && last + MIN_GAP_NS < next) next = last + MIN_GAP_NS; /* soon, not at once again */
        if (now >= next) {
            take_reading(w, now);
            last = now;
            next = now + period;
        }
    }
}

/* The source's opening: what is read every poll (false: nothing, "off: ..."). */
static bool describe(plat_mem_watch *w) {
    char cg[700] = "", lim[48] = "no limit yet", mi[1024];
    const bool meminfo = memtree_path(mi, sizeof mi, w->root, "/proc/meminfo") && access(mi, R_OK) == 0;
    if (w->cg.version) {
        const memtree_figures f = memtree_walk(&w->cg, false, NULL);
        if (f.limited) snprintf(lim, sizeof lim, "limit %llu MiB", (unsigned long long)(f.limit >> 20));
        snprintf(cg, sizeof cg, "cgroup v%d %s (%s)", w->cg.version, w->cg.dir + strlen(w->root), lim);
    }
    if (!w->cg.version && !meminfo && !w->psi_path[0]) {
        snprintf(w->source, sizeof w->source, "off: no memory cgroup, /proc/meminfo or PSI to read");
        return false;
    }
    snprintf(w->source, sizeof w->source, "every %u ms: %s%s%s%s%s", w->poll_ms, cg, *cg && meminfo ? ", " : "",
             meminfo ? "/proc/meminfo" : "", !w->psi_path[0] ? "" : *cg || meminfo ? ", PSI avg10 of " : "PSI avg10 of ",
             w->psi_path[0] ? w->psi_path + strlen(w->root) : "");
    return true;
}

static err_code setup(plat_mem_watch *w, const plat_mem_watch_config *cfg, err_t *err) {
    const char *trig = cfg && cfg->psi_trigger ? cfg->psi_trigger : DEFAULT_TRIGGER;
    if (!trigger_parse(trig, &w->hold_ns))
        return err_set(err, ERR_INVALID_ARG, "memory watcher: bad PSI trigger \"%s\" (want \"some|full STALL_US WINDOW_US\")", trig);
    w->poll_ms = cfg && cfg->poll_ms ? cfg->poll_ms : DEFAULT_POLL_MS;
    if (w->poll_ms > 3600000u) return err_set(err, ERR_INVALID_ARG, "memory watcher: a poll of %u ms (at most an hour)", w->poll_ms);
    w->t = cfg && cfg->thresholds ? *cfg->thresholds : plat_mem_thresholds_default();
    if (cfg && cfg->root && strlen(cfg->root) >= sizeof w->root)
        return err_set(err, ERR_INVALID_ARG, "memory watcher: root path too long");
    snprintf(w->root, sizeof w->root, "%s", cfg && cfg->root ? cfg->root : "");
    memtree_find(w->root, &w->cg);
    if (!memtree_psi_path(w->root, &w->cg, w->psi_path, sizeof w->psi_path)) w->psi_path[0] = '\0';
    if (!describe(w)) return ERR_OK;
    if (!(cfg && cfg->poll_only) && w->psi_path[0]) arm_psi(w, trig, !(cfg && cfg->psi_trigger));
    if (!(cfg && cfg->poll_only) && w->cg.version == 1) arm_vmpressure(w);
    w->wake_fd = eventfd(0, EFD_CLOEXEC);
    if (w->wake_fd < 0) return err_set(err, ERR_IO, "memory watcher: eventfd: %s", strerror(errno));
    sigset_t all, old; /* the thread takes no signal: the process's handlers run on the app's threads */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    const int rc = pthread_create(&w->thread, NULL, watch_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) return err_set(err, ERR_IO, "memory watcher: pthread_create: %s", strerror(rc));
    w->running = true;
    return ERR_OK;
}

err_code plat_mem_watch_start(const plat_mem_watch_config *cfg, plat_mem_watch_fn cb, void *user,
                              plat_mem_watch **out, err_t *err) {
    if (!cb || !out) return err_set(err, ERR_INVALID_ARG, "memory watcher: no callback or no place for it");
    *out = NULL;
    plat_mem_watch *w = calloc(1, sizeof *w);
    if (!w) return err_set(err, ERR_NOMEM, "memory watcher: out of memory");
    w->wake_fd = w->psi_fd = w->vmp_fd = w->vmp_level_fd = -1;
    w->recent_some = w->recent_full = -1;
    w->cb = cb;
    w->user = user;
    atomic_init(&w->level, PLAT_MEM_OK);
    const err_code rc = setup(w, cfg, err);
    if (rc) {
        plat_mem_watch_stop(w);
        return rc;
    }
    *out = w;
    return ERR_OK;
}

void plat_mem_watch_stop(plat_mem_watch *w) {
    if (!w) return;
    if (w->running) {
        const uint64_t one = 1;
        while (write(w->wake_fd, &one, sizeof one) < 0 && errno == EINTR) {}
        pthread_join(w->thread, NULL);
    }
    const int fds[] = {w->wake_fd, w->psi_fd, w->vmp_fd, w->vmp_level_fd};
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0) close(fds[i]);
    memtree_fds_close(&w->fds);
    free(w);
}

const char *plat_mem_watch_source(const plat_mem_watch *w) { return w ? w->source : "off: no watcher"; }

plat_mem_level plat_mem_watch_level(const plat_mem_watch *w) {
    return w ? (plat_mem_level)atomic_load(&((plat_mem_watch *)w)->level) : PLAT_MEM_OK;
}
