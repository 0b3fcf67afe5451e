/* serve_conns — serve_conns.h. A list of the open connections under a lock; an accept scans it (the
 * connections are at most --max-connections, 65536). */
#include "serve_conns.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* An idle connection is closed for a new one only once it has been idle this long: a flood of new
 * connections from one address is then refused as cheaply as before, not turned into a churn of
 * connections opened and closed (each close wakes every connection thread of libmicrohttpd). */
#define SERVE_EVICT_IDLE_S 0.5

typedef struct conn {
    struct conn *prev, *next;
    struct sockaddr_storage addr;
    int fd;
    bool busy, closing; /* closing: shut down to make room, not closed yet */
    bool handling;      /* its request arrived whole: being answered */
    double idle_since;  /* monotonic seconds */
} conn;

struct serve_conns {
    pthread_mutex_t mu;
    conn *head;
    unsigned max_per_ip, max_total;
    long evicted, timed_out;
};

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The same address (not port), as MHD's own per-address limit compares. */
static bool same_host(const struct sockaddr *a, const struct sockaddr_storage *b) {
    if (a->sa_family != b->ss_family) return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                       sizeof(struct in6_addr));
    return false;
}

serve_conns *serve_conns_new(unsigned max_per_ip, unsigned max_total) {
    serve_conns *sc = calloc(1, sizeof *sc);
    if (!sc) return NULL;
    pthread_mutex_init(&sc->mu, NULL);
    sc->max_per_ip = max_per_ip, sc->max_total = max_total;
    return sc;
}

void serve_conns_free(serve_conns *sc) {
    if (!sc) return;
    for (conn *c = sc->head, *next; c; c = next) next = c->next, free(c);
    pthread_mutex_destroy(&sc->mu);
    free(sc);
}

static void close_for_room(serve_conns *sc, conn *c) { /* its thread sees the end of its socket and closes it */
    shutdown(c->fd, SHUT_RDWR);
    c->closing = true;
    sc->evicted++;
}

/* Bytes waiting on c: a request arriving (a proxy's pool reuses its longest-idle connection). */
static bool arriving(const conn *c) {
    char byte;
    return recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* The server is full: of every address, the connection waiting longest for its request to arrive
 * whole (a trickle), for at least SERVE_EVICT_IDLE_S, whose next bytes are not arriving just now. */
static conn *longest_wait(serve_conns *sc, double now) {
    conn *best = NULL;
    for (conn *c = sc->head; c; c = c->next)
        if (!c->closing && !c->handling && now - c->idle_since >= SERVE_EVICT_IDLE_S &&
            (!best || c->idle_since < best->idle_since) && !arriving(c))
            best = c;
    return best;
}

enum MHD_Result serve_conns_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
    (void)len;
    serve_conns *sc = cls;
    pthread_mutex_lock(&sc->mu);
    unsigned n = 0, all = 0;
    conn *oldest = NULL; /* the address's longest idle connection */
    for (conn *c = sc->head; c; c = c->next) {
        if (c->closing) continue;
        all++;
        if (!same_host(addr, &c->addr)) continue;
        n++;
        if (!c->busy && (!oldest || c->idle_since < oldest->idle_since)) oldest = c;
    }
    bool take = n < sc->max_per_ip;
    const double now = mono_s();
    if (!take && oldest && !arriving(oldest) && now - oldest->idle_since >= SERVE_EVICT_IDLE_S) {
        close_for_room(sc, oldest);
        take = true, all--;
    }
    if (take && all >= sc->max_total) { /* the server is full: the longest wait for a request makes room */
        conn *waiting = longest_wait(sc, now);
        if ((take = waiting != NULL)) close_for_room(sc, waiting);
    }
    pthread_mutex_unlock(&sc->mu);
    return take ? MHD_YES : MHD_NO;
}

static void track(serve_conns *sc, struct MHD_Connection *mc, void **socket_context) {
    conn *c = calloc(1, sizeof *c);
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ad = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    *socket_context = c;
    if (!c) return; /* untracked: counted against no limit, never closed early */
    c->fd = fd ? fd->connect_fd : -1;
    if (ad && ad->client_addr) {
        const socklen_t n = ad->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                   : sizeof(struct sockaddr_in);
        memcpy(&c->addr, ad->client_addr, n);
    }
    c->idle_since = mono_s();
    pthread_mutex_lock(&sc->mu);
    c->next = sc->head;
    if (sc->head) sc->head->prev = c;
    sc->head = c;
    pthread_mutex_unlock(&sc->mu);
}

void serve_conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                        enum MHD_ConnectionNotificationCode code) {
    serve_conns *sc = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        track(sc, mc, socket_context);
        return;
    }
    conn *c = *socket_context;
    *socket_context = NULL;
    if (!c) return;
    pthread_mutex_lock(&sc->mu);
    if (c->prev) c->prev->next = c->next;
    else sc->head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&sc->mu);
    free(c);
}

void serve_conns_busy(serve_conns *sc, struct MHD_Connection *mc, bool busy) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn *c = ci ? ci->socket_context : NULL;
    if (!c) return;
    pthread_mutex_lock(&sc->mu);
    c->busy = busy;
    if (!busy) c->idle_since = mono_s(), c->handling = false;
    pthread_mutex_unlock(&sc->mu);
}

long serve_conns_evicted(serve_conns *sc) {
    pthread_mutex_lock(&sc->mu);
    const long n = sc->evicted;
    pthread_mutex_unlock(&sc->mu);
    return n;
}

void serve_conns_handling(serve_conns *sc, struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    conn *c = ci ? ci->socket_context : NULL;
    if (!c) return;
    pthread_mutex_lock(&sc->mu);
    c->handling = true;
    pthread_mutex_unlock(&sc->mu);
}

int serve_conns_sweep(serve_conns *sc, double limit_s) {
    int n = 0;
    pthread_mutex_lock(&sc->mu);
    const double now = mono_s();
    for (conn *c = sc->head; c; c = c->next)
        if (!c->closing && !c->handling && now - c->idle_since > limit_s) {
            shutdown(c->fd, SHUT_RDWR); /* as for room: its thread sees the end and closes it */
            c->closing = true;
            n++;
        }
    sc->timed_out += n;
    pthread_mutex_unlock(&sc->mu);
    return n;
}

long serve_conns_timed_out(serve_conns *sc) {
    pthread_mutex_lock(&sc->mu);
    const long n = sc->timed_out;
    pthread_mutex_unlock(&sc->mu);
    return n;
}
