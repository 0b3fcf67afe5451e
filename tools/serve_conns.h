/*
 * serve_conns — the server's policy for connections from one address: at
 * most --max-connections-per-ip at once, and when a new one arrives past
 * that, the address's oldest idle connection (no request in progress, for
 * at least half a second) is closed to make room, so that a client that leaks keep-alive connections
 * (a browser tab, a library's pool) does not lock its own app out until the
 * idle timeout. Only when all of the address's connections are busy is the
 * new one refused. Other addresses are never touched: the limit still keeps
 * one address from taking the server's connections.
 *
 * libmicrohttpd calls serve_conns_accept before a connection exists and
 * serve_conns_notify when one starts and closes (the close comes before the
 * socket is closed, so a socket this file shuts down is still the
 * connection's); the request handler marks a connection busy and idle.
 */
#ifndef OCTO_TOOLS_SERVE_CONNS_H
#define OCTO_TOOLS_SERVE_CONNS_H

#include <microhttpd.h>
#include <stdbool.h>

typedef struct serve_conns serve_conns;

/* NULL when out of memory. */
serve_conns *serve_conns_new(unsigned max_per_ip, unsigned max_total);
void serve_conns_free(serve_conns *sc);

/* MHD_OPTION_ACCEPT_POLICY_CALLBACK: MHD_YES to take the connection (an idle one of the address
 * closed when it is at its limit), MHD_NO when all of its connections are busy. */
enum MHD_Result serve_conns_accept(void *cls, const struct sockaddr *addr, socklen_t len);
/* MHD_OPTION_NOTIFY_CONNECTION. */
void serve_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);
/* A request began (busy) or was answered (idle) on c. */
void serve_conns_busy(serve_conns *sc, struct MHD_Connection *c, bool busy);
/* c's request arrived whole and is being answered: never closed by serve_conns_sweep or for room. */
void serve_conns_handling(serve_conns *sc, struct MHD_Connection *c);
/* Shut down every connection whose request has not arrived whole within limit_s seconds of its
 * last answer (or its accept), trickled or not; how many. */
int serve_conns_sweep(serve_conns *sc, double limit_s);
long serve_conns_timed_out(serve_conns *sc);
/* Connections closed to make room since the start (for /metrics and the tests). */
long serve_conns_evicted(serve_conns *sc);

#endif
