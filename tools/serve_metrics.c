/*
 * serve_metrics — GET /metrics in the Prometheus text format (0.0.4), the
 * de-facto convention of monitoring: the requests answered and their tokens,
 * time to first token (a histogram), completion tokens per second over the
 * last RECENT_S seconds, the slots and the queue for them, and the shared
 * steps of continuous batching (runtime/batch.h) with their batch size.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "serve.h"

#define RECENT_S 10.0 /* the window of the tokens-per-second gauge */

static const double ttft_le[SERVE_TTFT_BUCKETS] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

double serve_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void serve_record(server *s, const octo_stats *st, serve_outcome how) {
    pthread_mutex_lock(&s->mu);
    serve_counters *c = &s->count;
    if (how != SERVE_DONE) {
        if (how == SERVE_FAILED) c->failed++;
        else c->cancelled++;
        pthread_mutex_unlock(&s->mu);
        return;
    }
    c->requests++;
    c->prompt_tokens += st->prompt_tokens;
    c->completion_tokens += st->decode_tokens;
    const double ttft = st->time_to_first_token_ms / 1e3;
    int b = 0;
    while (b < SERVE_TTFT_BUCKETS && ttft > ttft_le[b]) b++;
    c->ttft[b]++;
    c->ttft_sum_s += ttft;
    c->recent_t[c->recent_at] = serve_now();
    c->recent_tokens[c->recent_at] = st->decode_tokens;
    c->recent_at = (c->recent_at + 1) % SERVE_RECENT;
    pthread_mutex_unlock(&s->mu);
}

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    for (int tries = 0; tries < 2 && !t->oom; tries++) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        const size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *q = realloc(t->p, cap);
        if (!q) t->oom = true;
        else t->p = q, t->cap = cap;
    }
}

/* One metric: its help, its type, and one unlabelled sample. */
static void metric(text *t, const char *name, const char *type, const char *help, double v) {
    put(t, "# HELP octo_%s %s\n# TYPE octo_%s %s\nocto_%s %.17g\n", name, help, name, type, name, v);
}

/* The counters, the slots and the queue, copied under the server's lock. */
static void requests(text *t, server *s) {
    pthread_mutex_lock(&s->mu);
    const serve_counters c = s->count;
    int busy = 0;
    for (int i = 0; i < s->n; i++) busy += s->busy[i];
    const int waiting = s->waiting;
    pthread_mutex_unlock(&s->mu);
    metric(t, "requests_total", "counter", "Completions answered whole.", (double)c.requests);
    metric(t, "requests_failed_total", "counter", "Completions that ended with an error.", (double)c.failed);
    metric(t, "requests_cancelled_total", "counter", "Completions whose client hung up before the end.",
           (double)c.cancelled);
    metric(t, "connections_evicted_total", "counter",
           "Connections closed to make room: an address's idle one, or the longest wait for a whole request when full.",
           (double)serve_conns_evicted(s->conns));
    metric(t, "connections_timed_out_total", "counter",
           "Connections closed because their request did not arrive whole within --idle-timeout + --request-timeout.",
           (double)serve_conns_timed_out(s->conns));
    metric(t, "prompt_tokens_total", "counter", "Prompt tokens of the completions answered.", (double)c.prompt_tokens);
    metric(t, "completion_tokens_total", "counter", "Tokens generated for the completions answered.",
           (double)c.completion_tokens);
    const double now = serve_now();
    double recent = 0.0;
    for (int i = 0; i < SERVE_RECENT; i++)
        if (c.recent_t[i] > 0.0 && now - c.recent_t[i] <= RECENT_S) recent += c.recent_tokens[i];
    const double window = now - s->count.started < RECENT_S ? now - s->count.started : RECENT_S;
    metric(t, "completion_tokens_per_second", "gauge",
           "Tokens of the completions that ended in the last 10 s, per second.", window > 0 ? recent / window : 0.0);
    metric(t, "slots", "gauge", "Conversations served at once (--parallel).", (double)s->n);
    metric(t, "slots_busy", "gauge", "Of those, serving a request now.", (double)busy);
    metric(t, "queue_length", "gauge", "Requests waiting for a free slot.", (double)waiting);
    put(t, "# HELP octo_time_to_first_token_seconds From a generation's start (after any wait for a free conversation) "
           "to its first token.\n"
           "# TYPE octo_time_to_first_token_seconds histogram\n");
    long cum = 0;
    for (int b = 0; b <= SERVE_TTFT_BUCKETS; b++) {
        cum += c.ttft[b];
        if (b < SERVE_TTFT_BUCKETS) put(t, "octo_time_to_first_token_seconds_bucket{le=\"%g\"} %ld\n", ttft_le[b], cum);
        else put(t, "octo_time_to_first_token_seconds_bucket{le=\"+Inf\"} %ld\n", cum);
    }
    put(t, "octo_time_to_first_token_seconds_sum %.6f\nocto_time_to_first_token_seconds_count %ld\n", c.ttft_sum_s,
        c.requests);
}

/* Continuous batching: the model's shared steps (octo_stats, batch group). */
static void batching(text *t, server *s) {
    const octo_stats st = octo_model_stats(s->m);
    metric(t, "batch_steps_total", "counter", "Forward passes shared by two or more conversations.",
           (double)st.batch_model_steps);
    metric(t, "batch_sessions_total", "counter",
           "Conversations in those passes, summed (over batch_steps_total: the mean batch size).",
           (double)llround(st.batch_model_mean * (double)st.batch_model_steps));
    metric(t, "batch_size", "gauge", "Conversations in the last shared pass.", (double)st.batch_model_last);
    metric(t, "batch_size_max", "gauge", "The most conversations in one pass so far.", (double)st.batch_model_max);
    metric(t, "batch_prompt_tokens_total", "counter", "Prompt tokens read in passes shared with other conversations.",
           (double)st.batch_model_prompt_rows);
    metric(t, "batch_verify_passes_total", "counter",
           "Speculative verify passes that went into shared passes (where they paid for the rows all wait for).",
           (double)st.batch_model_verify);
    metric(t, "expert_bytes_read_total", "counter",
           "Bytes of Mixture-of-Experts experts read from the model file into the expert cache (0: a dense model).",
           (double)st.expert_bytes_read);
}

struct MHD_Response *serve_metrics(server *s) {
    text t = {0};
    requests(&t, s);
    batching(&t, s);
    if (t.oom || !t.p) {
        free(t.p);
        return NULL;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(t.len, t.p, MHD_RESPMEM_MUST_FREE);
    if (!r) free(t.p);
    else MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
    return r;
}
