/*
 * octo serve — see serve.h. The daemon, the routes, the API key, the slots.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "serve.h"

/* ---- slots ---- */

int serve_acquire(server *s) {
    pthread_mutex_lock(&s->mu);
    for (;;) {
        for (int i = 0; i < s->n; i++)
            if (!s->busy[i]) {
                s->busy[i] = true;
                pthread_mutex_unlock(&s->mu);
                return i;
            }
        pthread_cond_wait(&s->freed, &s->mu); /* queued until a response is done */
    }
}

void serve_release(server *s, int slot) {
    pthread_mutex_lock(&s->mu);
    s->busy[slot] = false;
    pthread_cond_signal(&s->freed);
    pthread_mutex_unlock(&s->mu);
}

octo_stream *serve_generate(server *s, int slot, const char *prompt, const octo_generate_params *p) {
    return s->sessions[slot] ? octo_session_generate(s->sessions[slot], prompt, p) : octo_generate(s->m, prompt, p);
}

octo_stream *serve_chat(server *s, int slot, const octo_message *msgs, int n, const octo_generate_params *p) {
    return s->sessions[slot] ? octo_session_chat(s->sessions[slot], msgs, n, p) : octo_chat(s->m, msgs, n, p);
}

const char *serve_error(server *s, int slot) {
    return s->sessions[slot] ? octo_session_error(s->sessions[slot]) : octo_model_error(s->m);
}

octo_stats serve_stats(server *s, int slot) {
    return s->sessions[slot] ? octo_session_stats(s->sessions[slot]) : octo_model_stats(s->m);
}

/* ---- requests ---- */

typedef struct {
    char *body;
    size_t len, cap;
    bool too_large;
} upload;

/* Append a chunk of the body; past the limit the rest is read and dropped. */
static void upload_add(server *s, upload *u, const char *data, size_t n) {
    if (u->too_large || u->len + n > s->max_body) {
        u->too_large = true;
        return;
    }
    if (u->len + n + 1 > u->cap) {
        size_t cap = (u->len + n + 1) * 2;
        char *b = realloc(u->body, cap);
        if (!b) {
            u->too_large = true;
            return;
        }
        u->body = b, u->cap = cap;
    }
    memcpy(u->body + u->len, data, n);
    u->len += n;
}

static bool authorized(server *s, struct MHD_Connection *c) {
    if (!s->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, s->api_key);
}

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
    if (!r) return MHD_NO;
    const enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result route(server *s, struct MHD_Connection *c, const char *url, const char *method, upload *u) {
    unsigned status = MHD_HTTP_OK;
    if (!strcmp(url, "/health"))
        return queue(c, status, serve_json_response("{\"status\":\"ok\"}"));
    if (!authorized(s, c))
        return queue(c, MHD_HTTP_UNAUTHORIZED,
                     serve_error_response("invalid_request_error", "invalid_api_key", "a valid API key is required"));
    if (u->too_large)
        return queue(c, MHD_HTTP_CONTENT_TOO_LARGE,
                     serve_error_response("invalid_request_error", "request_too_large",
                                          "the request body is larger than this server takes (--max-body)"));
    const bool post = !strcmp(method, "POST");
    if (!strcmp(url, "/v1/models") && !post) return queue(c, status, serve_models(s, &status));
    if (post && (!strcmp(url, "/v1/completions") || !strcmp(url, "/v1/chat/completions"))) {
        const bool chat = !strcmp(url, "/v1/chat/completions");
        struct MHD_Response *r = serve_completion(s, u->body ? u->body : "", u->len, chat, &status);
        return queue(c, status, r);
    }
    return queue(c, MHD_HTTP_NOT_FOUND, serve_error_response("invalid_request_error", "not_found", "no such endpoint"));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *data, size_t *data_size, void **con_cls) {
    (void)version;
    server *s = cls;
    upload *u = *con_cls;
    if (!u) { /* the headers: make room for the body */
        if (!(u = calloc(1, sizeof *u))) return MHD_NO;
        *con_cls = u;
        return MHD_YES;
    }
    if (*data_size) {
        upload_add(s, u, data, *data_size);
        *data_size = 0;
        return MHD_YES;
    }
    return route(s, c, url, method, u);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why) {
    (void)cls, (void)c, (void)why;
    upload *u = *con_cls;
    if (u) free(u->body);
    free(u);
    *con_cls = NULL;
}

/* ---- the command ---- */

typedef struct {
    const char *path, *host, *api_key;
    long port, parallel, n_ctx, max_body, max_prompt;
} serve_args;

static int parse_args(int argc, char **argv, serve_args *a) {
    *a = (serve_args){.host = "127.0.0.1", .port = 8080, .parallel = 1, .max_body = 1 << 20, .max_prompt = 256 << 10};
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *num = !v ? NULL : !strcmp(o, "--port") ? &a->port : !strcmp(o, "--parallel") ? &a->parallel
                    : !strcmp(o, "--ctx") ? &a->n_ctx : !strcmp(o, "--max-body") ? &a->max_body
                    : !strcmp(o, "--max-prompt") ? &a->max_prompt : NULL;
        if (num) {
            const long lo = num == &a->port || num == &a->n_ctx ? 0 : 1;
            const long hi = num == &a->port ? 65535 : num == &a->parallel ? OCTO_MAX_SESSIONS : 1L << 30;
            if (!parse_long(v, lo, hi, num)) return usage_error("%s takes a number from %ld to %ld", o, lo, hi);
            i++;
        } else if (!strcmp(o, "-m") && v) a->path = argv[++i];
        else if (!strcmp(o, "--host") && v) a->host = argv[++i];
        else if (!strcmp(o, "--api-key") && v) a->api_key = argv[++i];
        else if (o[0] != '-' && !a->path) a->path = o;
        else return unknown_option("serve", o);
    }
    return a->path ? 0 : usage_error("serve needs a model: octo serve -m MODEL");
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { (void)sig, g_stop = 1; }

/* The model with --parallel slots: its own conversation and parallel - 1 sessions. */
static int open_slots(server *s, const serve_args *a, octo_client *c) {
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = (int)a->n_ctx;
    mo.max_sessions = (int)a->parallel;
    if (!(s->m = octo_load_model(c, a->path, &mo))) return fail("%s", octo_last_error(c));
    s->n = (int)a->parallel;
    s->sessions = calloc((size_t)s->n, sizeof *s->sessions);
    s->busy = calloc((size_t)s->n, sizeof *s->busy);
    if (!s->sessions || !s->busy) return fail("out of memory");
    for (int i = 1; i < s->n; i++)
        if (!(s->sessions[i] = octo_session_new(s->m))) return fail("%s", octo_model_error(s->m));
    return 0;
}

static void close_slots(server *s) {
    for (int i = 1; s->sessions && i < s->n; i++) octo_session_free(s->sessions[i]);
    octo_model_free(s->m);
    free(s->sessions);
    free(s->busy);
}

static struct MHD_Daemon *start_daemon(server *s, const serve_args *a) {
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)a->port)};
    if (inet_pton(AF_INET, a->host, &addr.sin_addr) != 1) {
        fail("serve: --host %s is not an IPv4 address", a->host);
        return NULL;
    }
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL,
                                            NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                            MHD_OPTION_NOTIFY_COMPLETED, on_done, s, MHD_OPTION_CONNECTION_TIMEOUT,
                                            (unsigned)120, MHD_OPTION_END);
    if (!d) fail("serve: cannot listen on %s:%ld (in use, or not allowed)", a->host, a->port);
    return d;
}

int cmd_serve(int argc, char **argv) {
    serve_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    server s = {.api_key = a.api_key, .max_body = (size_t)a.max_body, .max_prompt = (size_t)a.max_prompt};
    const char *base = strrchr(a.path, '/');
    s.model_name = base ? base + 1 : a.path;
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.freed, NULL);
    octo_client *c = octo_client_new(NULL);
    rc = c ? open_slots(&s, &a, c) : fail("out of memory");
    struct MHD_Daemon *d = rc ? NULL : start_daemon(&s, &a);
    if (!rc && d) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
        fprintf(stderr, "octo serve: %s on http://%s:%u (%ld parallel, OpenAI API under /v1)\n", s.model_name, a.host,
                info ? info->port : (unsigned)a.port, a.parallel);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        signal(SIGPIPE, SIG_IGN); /* a client that hangs up is not the server's end */
        while (!g_stop) pause();
        MHD_stop_daemon(d);
    } else if (!rc) rc = 1;
    close_slots(&s);
    octo_client_free(c);
    return rc;
}
