/*
 * octo.c — the public API: argument checks, error strings, and the mapping
 * from public types to the runtime's. Nothing here computes; it only checks
 * and delegates.
 */
#include "octo.h"
#include "octo_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "core/err.h"
#include "core/kernels/kernels.h"
#include "core/kernels/packed.h"
#include "core/membw.h"
#include "core/quant.h"
#include "platform/cpuquota.h"
#include "platform/mem.h"
#include "platform/memwatch.h"
#include "model/chat_template.h"
#include "model/grammar.h"
#include "model/json_schema.h"
#include "model/lora.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "moe/policy.h"
#include "runtime/adapt.h"
#include "runtime/batch.h"
#include "runtime/bundle.h"
#include "runtime/bundle_dir.h"
#include "runtime/chat_fit.h"
#include "runtime/cpu_adapt.h"
#include "runtime/embed.h"
#include "runtime/generate.h"
#include "runtime/plan.h"
#include "runtime/session.h"
#include "speculative/proposer.h"

/* The public status numbers are the internal error codes. */
_Static_assert((int)OCTO_ERR_CORRUPT == (int)ERR_CORRUPT && (int)ERR_COUNT_ == OCTO_ERR_CORRUPT + 1,
               "octo_status and err_code must list the same codes");
_Static_assert((int)OCTO_ERR_TENSOR_BOUNDS == (int)ERR_TENSOR_BOUNDS && (int)OCTO_ERR_BAD_SHAPE == (int)ERR_BAD_SHAPE,
               "octo_status and err_code must agree");
_Static_assert(OCTO_MAX_REPEAT_LAST_N == SAMPLER_MAX_HISTORY, "one bound for the penalty window");
_Static_assert((int)OCTO_DRAFT_NONE == (int)BUNDLE_DRAFT_NONE && (int)OCTO_DRAFT_SELF == (int)BUNDLE_DRAFT_SELF,
               "the draft choices are the bundle's");

/* A client lives while its caller holds it or a model loaded from it exists
 * (refs). Its errors are per thread: see client_err. */
struct octo_client {
    octo_client_options opts; /* its device and cache_dir are the copies below */
    char *device, *cache_dir;
    atomic_int refs;
    uint64_t id; /* never reused, unlike the address */
};

/* The last failure of a call on a client, kept per thread: two threads
 * loading through one client never see each other's message. */
static _Thread_local struct {
    uint64_t client_id;
    err_t err;
} tl_client_err;

/* This thread's error record for client c, cleared for a new call. */
static err_t *client_err(const octo_client *c) {
    tl_client_err.client_id = c->id;
    err_clear(&tl_client_err.err);
    return &tl_client_err.err;
}

err_t *api_client_err(const octo_client *c) { return client_err(c); } /* octo_internal.h */

static void client_release(octo_client *c) {
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
    free(c->device);
    free(c->cache_dir);
    free(c);
}

/* One conversation: its KV caches (the model's and its draft's), its stream. A model's
 * own is `main`; octo_session_new makes more, up to octo_model_options.max_sessions. */
struct octo_session {
    octo_model *om;          /* NULL once its model was freed */
    session *s, *draft_s;
    atomic_bool busy;        /* a stream is alive */
    octo_stream *stream;     /* that stream */
    gen_stats last;          /* of the last finished stream */
    octo_adapter *adapters[OCTO_MAX_ADAPTERS]; /* its adapters (s->lora the same), under the model's lock */
    int n_adapters;
    err_t *err;              /* the model's error for `main`, else own_err */
    err_t own_err;
};

struct octo_model {
    octo_client *client;
    bundle *b;               /* the model, its draft, threads, plan and sessions (runtime/bundle.h) */
    octo_model_options opts;
    octo_session main;       /* the conversation the octo_model calls use */
    octo_session **extra;    /* [max_sessions - 1]: those made by octo_session_new, NULL where free */
    pthread_mutex_t lock;    /* held while a token is made or stats are read: every session's tokens in turn */
    char warning[160];       /* the tokenizer's, or the chat template's */
    err_t err;
    plan_device dev;         /* what the plan was made for */
    adapt_state adapt;       /* memory given back and taken again (runtime/adapt.h), under lock */
    char watch_source[384];  /* the memory watcher's signals, or off and why */
    cpu_adapt_state cpu;     /* the threads for the CPU there is (runtime/cpu_adapt.h), under lock */
    plat_mem_watch *watch;   /* NULL: not watching (options.memory_watch -1, a plan-only load) */
    atomic_int watch_seen;   /* the watcher's last level, for the stream to apply between tokens */
    batch_state batch;       /* the sessions' shared steps (runtime/batch.h), under lock */
    bool stepping;           /* a shared step is being gathered or run, under lock */
    atomic_int lock_wanted;  /* threads waiting in model_lock: a lone prompt lets them in between its chunks */
    pthread_cond_t step_cv;  /* a step ended, or a stream took its piece */
    grammar_vocab *gvocab;   /* the vocabulary's trie for grammars, made by the first one, under lock */
    octo_adapter *adapters;  /* loaded against it, a list, under lock */
};

struct octo_adapter {
    octo_model *om;          /* NULL once its model was freed */
    lora_adapter *lora;      /* NULL once its model was freed, or dropped under memory pressure (path read again) */
    int users;               /* conversations whose set holds it, under the model's lock */
    bool released;           /* octo_adapter_free was called: gone when users reach 0 */
    octo_adapter *next;
    octo_adapter_info info;  /* as loaded */
    char path[];             /* its file */
};

struct octo_stream {
    octo_model *om;          /* NULL once the model was freed */
    octo_session *ss;
    generation *g;
    grammar *grammar;        /* octo_generate_params.grammar / json_schema compiled (NULL: none) */
    atomic_bool asking;      /* its caller is in octo_stream_next */
};

static void client_log(const octo_client *c, octo_log_level level, const char *msg) {
    if (c && c->opts.log && msg && *msg) c->opts.log(c->opts.log_user, level, msg);
}

const char *octo_status_name(octo_status status) { return err_code_name((err_code)status); }

const char *octo_version(void) { return OCTO_VERSION; }

int octo_struct_size(const char *name) {
#define OCTO_STRUCT(t) {#t, (int)sizeof(t)}
    static const struct {
        const char *name;
        int size;
    } structs[] = {OCTO_STRUCT(octo_client_options), OCTO_STRUCT(octo_kv_options),   OCTO_STRUCT(octo_moe_options),
                   OCTO_STRUCT(octo_model_options),  OCTO_STRUCT(octo_model_info),   OCTO_STRUCT(octo_generate_params),
                   OCTO_STRUCT(octo_message),        OCTO_STRUCT(octo_stats),        OCTO_STRUCT(octo_memory),
                   OCTO_STRUCT(octo_token_logprob), OCTO_STRUCT(octo_adapter_info),
                   OCTO_STRUCT(octo_finetune_params), OCTO_STRUCT(octo_finetune_progress),
                   OCTO_STRUCT(octo_finetune_result), OCTO_STRUCT(octo_fedavg_params),
                   OCTO_STRUCT(octo_fedavg_result)};
#undef OCTO_STRUCT
    for (size_t i = 0; name && i < sizeof structs / sizeof *structs; i++)
        if (!strcmp(name, structs[i].name)) return structs[i].size;
    return 0;
}

octo_client_options octo_client_options_defaults(void) { return (octo_client_options){.n_threads = 0}; }

octo_client *octo_client_new(const octo_client_options *opts) {
    static atomic_uint_fast64_t next_id = 1;
    octo_client *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->opts = opts ? *opts : octo_client_options_defaults();
    /* kept for every later load and session (a spill file opens with each session's cache) */
    c->device = c->opts.device ? strdup(c->opts.device) : NULL;
    c->cache_dir = c->opts.cache_dir ? strdup(c->opts.cache_dir) : NULL;
    if ((c->opts.device && !c->device) || (c->opts.cache_dir && !c->cache_dir)) {
        free(c->device);
        free(c->cache_dir);
        free(c);
        return NULL;
    }
    c->opts.device = c->device, c->opts.cache_dir = c->cache_dir;
    atomic_init(&c->refs, 1);
    c->id = atomic_fetch_add(&next_id, 1);
    return c;
}

void octo_client_free(octo_client *c) { client_release(c); }

static bool err_is_for(const octo_client *c) { return c && tl_client_err.client_id == c->id; }

const char *octo_last_error(const octo_client *c) {
    if (!c) return "no client";
    return err_is_for(c) ? tl_client_err.err.msg : "";
}

octo_status octo_last_status(const octo_client *c) {
    if (!c) return OCTO_ERR_INVALID_ARG;
    return err_is_for(c) ? (octo_status)tl_client_err.err.code : OCTO_OK;
}

octo_model_options octo_model_options_defaults(void) {
    const kv_config k = kv_config_default();
    return (octo_model_options){
        .n_ctx = 0, .kv_type = OCTO_KV_F16,
        .kv = {.compress = 1, .policy = OCTO_KV_POLICY_DEFAULT, .budget_bytes = 0, .hot_tokens = k.hot_tokens,
               .warm_tokens = k.warm_tokens, .anchor_tokens = k.anchor_tokens, .recent_tokens = k.recent_tokens,
               .cold_bits = 4, .cold_symmetric = 0},
    };
}

const char *octo_moe_policy_name(octo_moe_policy p) {
    if (p == OCTO_MOE_POLICY_DEFAULT) return "default";
    const moe_policy *m = moe_policy_get((int)p - 1);
    return m ? m->name : NULL;
}

int octo_moe_policy_from_name(const char *name) {
    if (name && !strcmp(name, "default")) return OCTO_MOE_POLICY_DEFAULT;
    const int id = moe_policy_from_name(name);
    return id < 0 ? -1 : id + 1;
}

/* The public expert-cache options as the cache's configuration (checked). */
static err_code moe_config_of(const octo_moe_options *o, moe_cache_config *out, err_t *err) {
    if (!(o->cache_share >= 0.0 && o->cache_share <= 1.0))
        return err_set(err, ERR_INVALID_ARG, "moe.cache_share %g is not a share between 0 and 1", o->cache_share);
    if (o->cache_share > 0.0 && o->cache_bytes)
        return err_set(err, ERR_INVALID_ARG, "moe: give cache_bytes or cache_share, not both");
    const int id = o->policy == OCTO_MOE_POLICY_DEFAULT ? 0 : (int)o->policy - 1;
    if (!moe_policy_get(id)) return err_set(err, ERR_INVALID_ARG, "moe.policy %d is not a policy", (int)o->policy);
    if ((unsigned)o->prefetch > OCTO_MOE_PREFETCH_OFF)
        return err_set(err, ERR_INVALID_ARG, "moe.prefetch %d is not auto, on or off", (int)o->prefetch);
    *out = moe_cache_config_default();
    out->budget_bytes = o->cache_bytes;
    out->share = o->cache_share;
    out->policy = id;
    out->prefetch = o->prefetch == OCTO_MOE_PREFETCH_ON ? MOE_PREFETCH_ON
                    : o->prefetch == OCTO_MOE_PREFETCH_OFF ? MOE_PREFETCH_OFF
                                                           : MOE_PREFETCH_AUTO;
    if (!isfinite(o->predict_margin) || o->predict_margin > 100.0)
        return err_set(err, ERR_INVALID_ARG, "moe.predict_margin %g is not a margin of at most 100", o->predict_margin);
    if (o->predict_margin != 0.0) out->predict_margin = o->predict_margin;
    out->trace = o->trace;
    if ((unsigned)o->int2 > OCTO_MOE_INT2_ALL)
        return err_set(err, ERR_INVALID_ARG, "moe.int2 %d is not auto, on, off or all", (int)o->int2);
    const moe_int2_mode int2[] = {MOE_INT2_AUTO, MOE_INT2_ON, MOE_INT2_OFF, MOE_INT2_ALL};
    out->int2 = int2[o->int2];
    return ERR_OK;
}

/* The public KV options as the cache's configuration (checked). */
static err_code kv_config_of(const octo_model_options *o, kv_config *out, err_t *err) {
    const octo_kv_options *k = &o->kv;
    const uint32_t hot = o->kv_type == OCTO_KV_F16 ? QT_F16 : QT_F32;
    if (!k->compress) {
        *out = kv_config_plain(hot);
        return ERR_OK;
    }
    if (k->spill < -1 || k->spill > 1) return err_set(err, ERR_INVALID_ARG, "KV spill is -1, 0 or 1, not %d", k->spill);
    if ((int)k->policy < OCTO_KV_POLICY_DEFAULT || (int)k->policy > kv_policy_count())
        return err_set(err, ERR_INVALID_ARG, "unknown KV policy %d", (int)k->policy);
    if (k->budget_tokens < 0 || k->budget_tokens > OCTO_MAX_CONTEXT)
        return err_set(err, ERR_INVALID_ARG, "KV budget_tokens must be 0..%d, not %d", OCTO_MAX_CONTEXT, k->budget_tokens);
    if (k->cold_bits != 4 && k->cold_bits != 8 && k->cold_bits != 16)
        return err_set(err, ERR_INVALID_ARG, "KV cold_bits must be 4, 8 or 16, not %d", k->cold_bits);
    if (k->hot_tokens < 0 || k->warm_tokens < k->hot_tokens || k->anchor_tokens < 0 || k->recent_tokens < 0 ||
        k->warm_tokens > OCTO_MAX_CONTEXT || k->anchor_tokens > OCTO_MAX_CONTEXT || k->recent_tokens > OCTO_MAX_CONTEXT)
        return err_set(err, ERR_INVALID_ARG,
                       "KV windows must satisfy 0 <= hot <= warm <= %d, 0 <= anchors, recent <= %d (got %d, %d, %d, %d)",
                       OCTO_MAX_CONTEXT, OCTO_MAX_CONTEXT, k->hot_tokens, k->warm_tokens, k->anchor_tokens,
                       k->recent_tokens);
    kv_config c = kv_config_default();
    if (k->policy != OCTO_KV_POLICY_DEFAULT) c.policy = (kv_policy_id)(k->policy - 1); /* kv/policy_table.c */
    c.hot_type = hot;
    c.warm_type = k->cold_bits == 16 ? hot : QT_Q8_0;
    c.cold_type = k->cold_bits == 16 ? hot : k->cold_bits == 8 ? QT_Q8_0 : k->cold_symmetric ? QT_Q4_0 : QT_Q4_1;
    c.hot_tokens = k->hot_tokens;
    c.warm_tokens = k->warm_tokens;
    c.anchor_tokens = k->anchor_tokens;
    c.recent_tokens = k->recent_tokens;
    c.budget_bytes = k->budget_bytes;
    c.budget_tokens = k->budget_tokens;
    c.key_channels = !k->per_token_keys;
    c.spill_max_bytes = k->spill_max_bytes;
    *out = c;
    return ERR_OK;
}

const char *octo_kv_policy_name(octo_kv_policy p) {
    if (p == OCTO_KV_POLICY_DEFAULT) return "default";
    return (int)p >= 1 && (int)p <= kv_policy_count() ? kv_policy_name((kv_policy_id)(p - 1)) : NULL;
}

int octo_kv_policy_from_name(const char *name) {
    if (name && !strcmp(name, "default")) return OCTO_KV_POLICY_DEFAULT;
    const int id = kv_policy_from_name(name);
    return id < 0 ? -1 : id + 1;
}

/* A model object with checked options, holding its client, not yet loaded; NULL with cerr set. */
static octo_model *model_new(octo_client *c, const octo_model_options *opts, err_t *cerr) {
    const octo_model_options o = opts ? *opts : octo_model_options_defaults();
    if (o.n_ctx < 0 || o.n_ctx > OCTO_MAX_CONTEXT || c->opts.n_threads < 0 || c->opts.n_threads > OCTO_MAX_THREADS ||
        (o.kv_type != OCTO_KV_F32 && o.kv_type != OCTO_KV_F16) || o.auto_draft < OCTO_DRAFT_NONE ||
        o.auto_draft > OCTO_DRAFT_SELF || o.max_sessions < 0 || o.max_sessions > OCTO_MAX_SESSIONS ||
        o.draft_threads < 0 || o.draft_threads > OCTO_MAX_THREADS) {
        err_set(cerr, ERR_INVALID_ARG,
                "bad model options (n_ctx %d of 0..%d, n_threads %d of 0..%d, kv_type %d, auto_draft %d, "
                "max_sessions %d of 0..%d, draft_threads %d of 0..%d)", o.n_ctx, OCTO_MAX_CONTEXT, c->opts.n_threads,
                OCTO_MAX_THREADS, (int)o.kv_type, o.auto_draft, o.max_sessions, OCTO_MAX_SESSIONS, o.draft_threads,
                OCTO_MAX_THREADS);
        return NULL;
    }
    octo_model *om = calloc(1, sizeof *om);
    if (om && o.max_sessions > 1 && !(om->extra = calloc((size_t)o.max_sessions - 1, sizeof *om->extra))) {
        free(om);
        om = NULL;
    }
    if (!om) {
        err_set(cerr, ERR_NOMEM, "out of memory");
        return NULL;
    }
    om->opts = o;
    om->client = c;
    atomic_fetch_add(&c->refs, 1); /* released by octo_model_free */
    pthread_mutexattr_t ma; /* recursive: a progress or log callback may ask for stats inside a token */
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&om->lock, &ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* gather_callers' timed waits */
    pthread_cond_init(&om->step_cv, &ca);
    pthread_condattr_destroy(&ca);
    batch_init(&om->batch);
    pthread_mutexattr_destroy(&ma);
    atomic_init(&om->main.busy, false);
    atomic_init(&om->lock_wanted, 0);
    om->main.om = om;
    om->main.err = &om->err;
    return om;
}

static void watch_memory(octo_model *om);

static void warn_client(void *client, const char *msg) { client_log(client, OCTO_LOG_WARN, msg); }

/* A session's caches freed (its model is going); a stream left on it only reports an error. */
static void adapters_release(octo_model *om, octo_session *ss);

static void session_detach(octo_session *ss) {
    if (ss->om) adapters_release(ss->om, ss);
    if (ss->stream) ss->stream->om = NULL;
    session_free(ss->draft_s);
    session_free(ss->s);
    ss->s = ss->draft_s = NULL;
    ss->om = NULL;
}

octo_model *octo_load_model(octo_client *c, const char *path, const octo_model_options *opts) {
    if (!c) return NULL;
    err_t *cerr = client_err(c);
    if (!path) {
        err_set(cerr, ERR_INVALID_ARG, "no model path given");
        return NULL;
    }
    octo_model *om = model_new(c, opts, cerr);
    if (!om) return NULL;
    bundle_options bo = {.n_ctx = om->opts.n_ctx, .n_threads = c->opts.n_threads,
                         .draft_model = om->opts.draft_model, .auto_draft = (bundle_draft)om->opts.auto_draft,
                         .plan_only = om->opts.plan_only != 0, .warn = warn_client, .warn_user = c,
                         .n_sessions = om->opts.max_sessions > 1 ? om->opts.max_sessions : 1,
                         .vocab_only = om->opts.vocab_only != 0, .draft_threads = om->opts.draft_threads};
    err_code rc = kv_config_of(&om->opts, &bo.kv, cerr);
    if (!rc) rc = moe_config_of(&om->opts.moe, &bo.moe, cerr);
    if (!rc)
        rc = plan_device_of(c->opts.device, c->opts.cache_dir,
                            om->opts.kv.compress ? (plan_spill)om->opts.kv.spill : PLAN_SPILL_OFF, &bo.dev, cerr);
    if (!rc) rc = bundle_load_path(path, c->opts.device, &bo, &om->b, cerr);
    if (rc) {
        octo_model_free(om);
        return NULL;
    }
    om->dev = bo.dev;
    om->main.s = om->b->s;
    om->main.draft_s = om->b->draft_s;
    snprintf(om->warning, sizeof om->warning, "%s", om->b->warning);
    if (!om->opts.vocab_only) watch_memory(om);
    cpu_adapt_init(&om->cpu, om->b->pool, c->opts.n_threads > 0);
    return om;
}

void octo_model_free(octo_model *om) {
    if (!om) return;
    plat_mem_watch_stop(om->watch); /* first: its thread takes the lock and reads the sessions */
    if (om->main.stream) om->main.stream->om = NULL; /* a stream outliving its model only reports an error */
    for (int i = 0; om->extra && i < om->opts.max_sessions - 1; i++)
        if (om->extra[i]) session_detach(om->extra[i]); /* sessions left open: their caches go with the model */
    free(om->extra);
    for (octo_adapter *a = om->adapters, *next; a; a = next) { /* the handles still held only free */
        next = a->next;
        lora_free(a->lora);
        a->lora = NULL;
        a->om = NULL;
        if (a->released) free(a);
    }
    grammar_vocab_free(om->gvocab);
    bundle_free(om->b);
    pthread_mutex_destroy(&om->lock);
    pthread_cond_destroy(&om->step_cv);
    client_release(om->client);
    free(om);
}

/* ---- memory pressure: the api gathers what runtime/adapt.h acts on ---- */

/* What the process could still get, reclaimable file pages counted. */
static uint64_t mem_room(void) {
    const uint64_t h = plat_mem_cgroup_headroom();
    return h == UINT64_MAX ? plat_mem_available() : h;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The model's lock, counted while waited for: a lone prompt read in chunks lets the waiters in between
 * (octo_stream_next). */
static void model_lock(octo_model *om) {
    atomic_fetch_add(&om->lock_wanted, 1);
    pthread_mutex_lock(&om->lock);
    atomic_fetch_sub(&om->lock_wanted, 1);
}

/* Under om->lock, with threads waiting for it: let them have it (a mutex does not hand itself over: the
 * thread that lets go takes it back first), then take it again. At most 20 ms for them to come. */
static void yield_lock(octo_model *om) {
    const int waiting = atomic_load(&om->lock_wanted);
    const double until = now_s() + 0.02;
    pthread_mutex_unlock(&om->lock);
    while (atomic_load(&om->lock_wanted) >= waiting && now_s() < until) {
        const struct timespec ts = {0, 50000}; /* 50 us */
        nanosleep(&ts, NULL);
    }
    model_lock(om);
}

/* The sessions octo_session_new may make beside the model's own. */
static int n_extra(const octo_model *om) { return om->extra && om->opts.max_sessions > 1 ? om->opts.max_sessions - 1 : 0; }

/* Every open session's caches, into s[] (room for 2 * max_sessions). */
static int open_sessions(octo_model *om, session **s, bool *idle) {
    int n = 0;
    *idle = true;
    for (int i = -1; i < n_extra(om); i++) {
        octo_session *ss = i < 0 ? &om->main : om->extra[i];
        if (!ss || !ss->s) continue;
        s[n++] = ss->s;
        if (ss->draft_s) s[n++] = ss->draft_s;
        if (atomic_load(&ss->busy)) *idle = false;
    }
    return n;
}

static void drop_self_draft(void *user) {
    octo_model *om = user;
    for (int i = -1; i < n_extra(om); i++) {
        octo_session *ss = i < 0 ? &om->main : om->extra[i];
        if (!ss || !ss->draft_s) continue;
        session_free(ss->draft_s);
        ss->draft_s = NULL;
    }
    bundle_forget_self_draft(om->b);
}

static uint64_t drop_idle_adapters(void *user);

/* Under om->lock. */
static void adapt_now(octo_model *om, int level, bool from_app) {
    session *s[2 * OCTO_MAX_SESSIONS];
    adapt_target t = {.b = om->b, .s = s, .drop_draft = drop_self_draft, .drop_adapters = drop_idle_adapters, .user = om,
                      .room = mem_room()};
    t.n = open_sessions(om, s, &t.idle);
    if (from_app) adapt_app(&om->adapt, &t, level, now_s());
    else adapt_watch(&om->adapt, &t, level, now_s());
}

/* Under om->lock: the watcher's last level, when adapt would act on it
 * (cheap: no system call unless it acts). */
static void adapt_poll(octo_model *om) {
    if (!om->watch) return;
    const int seen = atomic_load(&om->watch_seen);
    if (adapt_watch_acts(&om->adapt, seen, now_s())) adapt_now(om, seen, false);
}

/* The watcher's thread: applied now when no token is being made, else by
 * the stream between its tokens (octo_stream_next). */
static void on_memory(void *user, plat_mem_level level, const plat_mem_reading *r) {
    (void)r;
    octo_model *om = user;
    atomic_store(&om->watch_seen, (int)level);
    if (pthread_mutex_trylock(&om->lock) != 0) return;
    adapt_poll(om);
    pthread_mutex_unlock(&om->lock);
}

static void watch_memory(octo_model *om) {
    if (om->opts.memory_watch < 0 || om->b->plan_only) {
        snprintf(om->watch_source, sizeof om->watch_source, "off: %s",
                 om->b->plan_only ? "loaded to plan only" : "memory_watch -1 (octo_model_trim still works)");
        return;
    }
    err_t e = {0};
    if (plat_mem_watch_start(NULL, on_memory, om, &om->watch, &e)) {
        snprintf(om->watch_source, sizeof om->watch_source, "off: %.120s", e.msg);
        client_log(om->client, OCTO_LOG_WARN, om->watch_source);
        return;
    }
    snprintf(om->watch_source, sizeof om->watch_source, "%s", plat_mem_watch_source(om->watch));
}

octo_status octo_model_trim(octo_model *om, octo_trim_level level) {
    if (!om) return OCTO_ERR_INVALID_ARG;
    if ((int)level < OCTO_TRIM_NONE || (int)level > OCTO_TRIM_CRITICAL)
        return (octo_status)err_set(&om->err, ERR_INVALID_ARG, "trim level %d is not one of 0 (none) to 3 (critical)",
                                    (int)level);
    if (!om->b || om->b->plan_only)
        return (octo_status)err_set(&om->err, ERR_INVALID_ARG, "the model was loaded to plan only: nothing to trim");
    model_lock(om);
    adapt_now(om, (int)level, true);
    pthread_mutex_unlock(&om->lock);
    return OCTO_OK;
}

const char *octo_model_error(const octo_model *om) { return om ? om->err.msg : "no model"; }
octo_status octo_model_status(const octo_model *om) { return om ? (octo_status)om->err.code : OCTO_ERR_INVALID_ARG; }

int octo_model_plan_json(const octo_model *om, char *buf, int cap) {
    if (!om || cap < 0 || (cap && !buf) || !om->b->m) return -1;
    const size_t n = bundle_plan_json(om->b, &om->dev, buf, (size_t)cap);
    return n > INT32_MAX ? -1 : (int)n;
}

/* A file loaded for its vocabulary only: what its metadata says. */
static octo_model_info vocab_info(const octo_model *om) {
    octo_model_info info;
    memset(&info, 0, sizeof info);
    const gguf_ctx *g = om->b->vocab_gguf;
    gguf_str arch = {0, NULL};
    if (gguf_get_str(g, "general.architecture", &arch))
        snprintf(info.arch, sizeof info.arch, "%.*s", (int)(arch.len < 31 ? arch.len : 31), arch.ptr);
    info.n_vocab = om->b->tok ? tokenizer_n_vocab(om->b->tok) : 0;
    info.n_tensors = g->n_tensors;
    info.file_bytes = g->size;
    model_type_histogram(g, info.tensor_types, sizeof info.tensor_types);
    snprintf(info.weights, sizeof info.weights, "not loaded (vocabulary only)");
    return info;
}

octo_model_info octo_model_info_get(const octo_model *om) {
    octo_model_info info;
    memset(&info, 0, sizeof info);
    if (!om) return info;
    if (!om->b->m) return vocab_info(om);
    const model *m = om->b->m;
    const model_hparams *hp = &m->hp;
    memcpy(info.arch, hp->arch_name, sizeof info.arch);
    info.n_vocab = hp->n_vocab;
    info.n_ctx_train = hp->n_ctx_train;
    info.n_embd = hp->n_embd;
    info.n_layer = hp->n_layer;
    info.n_head = hp->n_head;
    info.n_head_kv = hp->n_head_kv;
    info.head_dim = hp->head_dim;
    info.n_ff = hp->n_ff;
    info.n_expert = hp->n_expert;
    info.n_expert_used = hp->n_expert_used;
    info.rope_freq_base = hp->rope_freq_base;
    info.rope_freq_scale = hp->rope_freq_scale;
    info.rms_eps = hp->rms_eps;
    info.output_tied = m->output_tied;
    info.n_tensors = m->gguf->n_tensors;
    info.n_params = m->n_params;
    info.file_bytes = m->gguf->size;
    info.weight_bytes = m->weight_bytes;
    info.weight_bytes_per_token = m->weight_bytes_per_token;
    info.n_threads = tpool_size(om->b->pool);
    info.draft_threads = om->b->draft_pool ? tpool_size(om->b->draft_pool) : 0;
    snprintf(info.cores, sizeof info.cores, "%s", om->b->cores.reason);
    snprintf(info.cpu_path, sizeof info.cpu_path, "%s", cpu_path_name(kernels_path()));
    info.kv_bytes_per_token = kv_token_bytes(plan_kv_shape(hp), om->b->plan.kv.hot_type);
    info.kv_budget_bytes = om->b->plan.kv.budget_bytes + om->b->plan.draft_kv.budget_bytes;
    snprintf(info.kv_plan, sizeof info.kv_plan, "%s", om->b->plan.kv_reason);
    snprintf(info.kv_spill, sizeof info.kv_spill, "%s", om->b->plan.spill_reason);
    snprintf(info.weights, sizeof info.weights, "%s", om->b->weights_reason);
    snprintf(info.speculation, sizeof info.speculation, "%s", om->b->plan.spec_reason);
    info.n_ctx = om->b->n_ctx;
    info.n_ff_shared = hp->n_ff_shexp;
    model_describe_origin(m, info.origin, sizeof info.origin);
    model_features(hp, info.features, sizeof info.features);
    info.resident_weight_bytes = plan_resident_weights(m);
    if (hp->n_expert > 0) {
        info.expert_bytes_one = moe_expert_bytes_max(m);
        info.expert_bytes = moe_expert_bytes_all(m);
        info.expert_cache_budget = bundle_experts_stats(om->b).cache_capacity;
        snprintf(info.expert_plan, sizeof info.expert_plan, "%s", om->b->plan.moe_reason);
        snprintf(info.expert_int2, sizeof info.expert_int2, "%s", bundle_experts_stats(om->b).int2_why);
    }
    model_type_histogram(m->gguf, info.tensor_types, sizeof info.tensor_types);
    return info;
}

/* A model loaded with plan_only has no session: what needs one fails. */
static bool plan_only(octo_model *om) {
    if (!om->b->plan_only) return false;
    err_set(&om->err, ERR_INVALID_ARG, "%s", om->b->m ? "the model was loaded to plan only (octo_model_options.plan_only)"
                                                      : "the file was loaded for its vocabulary only (octo_model_options.vocab_only)");
    return true;
}

octo_status octo_eval(octo_model *om, const int32_t *tokens, int n, float *logits, octo_logits_mode mode) {
    if (!om) return OCTO_ERR_INVALID_ARG;
    err_clear(&om->err);
    if (plan_only(om)) return (octo_status)om->err.code;
    if (atomic_load(&om->main.busy)) return (octo_status)err_set(&om->err, ERR_BUSY, "the model is serving a stream");
    if (!tokens || !logits || (mode != OCTO_LOGITS_LAST && mode != OCTO_LOGITS_ALL))
        return (octo_status)err_set(&om->err, ERR_INVALID_ARG, "octo_eval: tokens and logits are required");
    model_lock(om); /* the pool and the shared budgets: one session's work at a time */
    cpu_adapt_poll(&om->cpu, om->b->pool, now_s());
    const err_code rc = session_eval(om->main.s, tokens, n, mode == OCTO_LOGITS_ALL, logits, &om->err);
    pthread_mutex_unlock(&om->lock);
    return (octo_status)rc;
}

/* The caller left the KV policy to octo: SpecKV scores a prompt that does not fit (runtime/prefill.h). */
static bool auto_kv_policy(const octo_model *om) {
    return om->opts.kv.compress && om->opts.kv.policy == OCTO_KV_POLICY_DEFAULT;
}

octo_status octo_eval_prompt(octo_model *om, const int32_t *tokens, int n, const octo_generate_params *params,
                             float *logits) {
    if (!om) return OCTO_ERR_INVALID_ARG;
    err_clear(&om->err);
    if (plan_only(om)) return (octo_status)om->err.code;
    if (atomic_load(&om->main.busy)) return (octo_status)err_set(&om->err, ERR_BUSY, "the model is serving a stream");
    if (!tokens || !logits || n <= 0)
        return (octo_status)err_set(&om->err, ERR_INVALID_ARG, "octo_eval_prompt: tokens (n > 0) and logits are required");
    const octo_generate_params gp = params ? *params : octo_generate_params_defaults();
    const prefill_params pp = {.compress = gp.prompt_compress, .lookahead = gp.prompt_lookahead,
                               .auto_policy = auto_kv_policy(om)};
    prefill_stats st;
    model_lock(om); /* as octo_eval */
    err_code rc = prefill_run(om->main.s, om->main.draft_s, tokens, n, &pp, logits, &st, &om->err);
    pthread_mutex_unlock(&om->lock);
    if (!rc)
        om->main.last = (gen_stats){.prompt_tokens = n, .prefill_tokens = n - st.prompt_dropped,
                                    .prefill_ms = st.draft_ms + st.prefill_ms, .pre = st};
    return (octo_status)rc;
}

int octo_n_past(const octo_model *om) { return om && om->main.s ? om->main.s->n_past : 0; }

octo_status octo_truncate(octo_model *om, int n) {
    if (!om) return OCTO_ERR_INVALID_ARG;
    err_clear(&om->err);
    if (plan_only(om)) return (octo_status)om->err.code;
    if (atomic_load(&om->main.busy)) return (octo_status)err_set(&om->err, ERR_BUSY, "the model is serving a stream");
    if (n < 0 || n > om->main.s->n_past)
        return (octo_status)err_set(&om->err, ERR_INVALID_ARG, "cannot truncate %d tokens to %d", om->main.s->n_past, n);
    model_lock(om); /* as octo_reset */
    const err_code rc = session_rewind(om->main.s, n, &om->err);
    pthread_mutex_unlock(&om->lock);
    return (octo_status)rc;
}

void octo_reset(octo_model *om) {
    if (!om || !om->main.s || atomic_load(&om->main.busy)) return;
    model_lock(om); /* other sessions' streams weigh the shared budget between tokens */
    session_reset(om->main.s);
    pthread_mutex_unlock(&om->lock);
}

/* ---------------------------------------------------------------- text */

static err_code need_tokenizer(octo_model *om) {
    if (om->b->tok) return ERR_OK;
    return err_set(&om->err, om->b->tok_err.code ? om->b->tok_err.code : ERR_UNSUPPORTED, "%s",
                   om->b->tok_err.msg[0] ? om->b->tok_err.msg : "the model has no vocabulary");
}

int octo_tokenize(octo_model *om, const char *text, int len, int add_special, int parse_special, int32_t *ids,
                  int cap) {
    if (!om) return -OCTO_ERR_INVALID_ARG;
    /* no err_clear: the model's error is written only on failure, so another thread may call
     * this while a stream runs (octo serve's slots: usage counts, logprobs' token texts) */
    if (!text || len < 0 || cap < 0 || (cap > 0 && !ids))
        return -(int)err_set(&om->err, ERR_INVALID_ARG, "octo_tokenize: text, len >= 0 and a buffer are required");
    err_code rc = need_tokenizer(om);
    if (rc) return -(int)rc;
    tok_list l = {0};
    rc = tokenizer_encode(om->b->tok, text, (size_t)len, add_special != 0, parse_special != 0, &l, &om->err);
    if (rc) {
        tok_list_free(&l);
        return -(int)rc;
    }
    if (cap > 0 && l.n > 0) memcpy(ids, l.ids, sizeof(int32_t) * (size_t)(l.n < cap ? l.n : cap));
    int n = l.n;
    tok_list_free(&l);
    return n;
}

int octo_token_piece(octo_model *om, int32_t id, char *buf, int cap) {
    if (!om) return -OCTO_ERR_INVALID_ARG; /* the error written only on failure, as octo_tokenize */
    if (cap < 0 || (cap > 0 && !buf)) return -(int)err_set(&om->err, ERR_INVALID_ARG, "octo_token_piece: no buffer");
    err_code rc = need_tokenizer(om);
    if (rc) return -(int)rc;
    int n = tokenizer_piece(om->b->tok, id, false, buf, cap);
    if (n < 0)
        return -(int)err_set(&om->err, ERR_INVALID_ARG, "token id %d is outside the vocabulary of %d", id,
                             tokenizer_n_vocab(om->b->tok));
    return n;
}

int octo_detokenize(octo_model *om, const int32_t *ids, int n, char *buf, int cap) {
    if (!om) return -OCTO_ERR_INVALID_ARG;
    err_clear(&om->err);
    if (n < 0 || (n > 0 && !ids) || cap < 0 || (cap > 0 && !buf))
        return -(int)err_set(&om->err, ERR_INVALID_ARG, "octo_detokenize: bad arguments");
    err_code rc = need_tokenizer(om);
    if (rc) return -(int)rc;
    int total = tokenizer_decode(om->b->tok, ids, n, buf, cap);
    if (total < 0) {
        for (int i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= tokenizer_n_vocab(om->b->tok))
                return -(int)err_set(&om->err, ERR_INVALID_ARG, "token id %d is outside the vocabulary of %d", ids[i],
                                     tokenizer_n_vocab(om->b->tok));
    }
    return total;
}

int32_t octo_token_bos(const octo_model *om) { return om && om->b->tok ? tokenizer_bos(om->b->tok) : -1; }
int32_t octo_token_eos(const octo_model *om) { return om && om->b->tok ? tokenizer_eos(om->b->tok) : -1; }

/* ---------------------------------------------------------------- generation */

octo_generate_params octo_generate_params_defaults(void) {
    sampler_params sp = sampler_defaults();
    return (octo_generate_params){
        .max_tokens = 256, .temperature = sp.temperature, .top_k = sp.top_k, .top_p = sp.top_p, .min_p = sp.min_p,
        .repeat_penalty = sp.repeat_penalty, .presence_penalty = sp.presence_penalty,
        .repeat_last_n = sp.repeat_last_n, .seed = sp.seed, .parse_special = 0,
    };
}

static gen_params to_gen_params(const octo_generate_params *p) {
    return (gen_params){
        .max_tokens = p->max_tokens,
        .sampling = {.temperature = p->temperature, .top_k = p->top_k, .top_p = p->top_p, .min_p = p->min_p,
                     .repeat_penalty = p->repeat_penalty, .presence_penalty = p->presence_penalty,
                     .repeat_last_n = p->repeat_last_n, .seed = p->seed,
                     .frequency_penalty = p->frequency_penalty},
        .on_prefill = p->on_prefill,
        .user = p->user,
        .spec_k = p->spec_k,
        .spec_tree = p->spec_tree,
        .spec_ahead = p->spec_ahead,
        .lookahead = {.w = p->lookahead_w, .n = p->lookahead_n, .g = p->lookahead_g},
        .prefill = {.compress = p->prompt_compress, .lookahead = p->prompt_lookahead},
        .logprobs = p->logprobs ? 1 + p->top_logprobs : 0,
    };
}

const char *octo_spec_mode_name(int mode) {
    if (mode == OCTO_SPEC_AUTO) return "auto";
    if (mode == OCTO_SPEC_NONE) return "none";
    const proposer_ops *p = spec_proposer_at(mode - OCTO_SPEC_NONE - 1);
    return p ? p->name : NULL;
}

int octo_spec_mode_from_name(const char *name) {
    if (!name) return -1;
    for (int m = 0; octo_spec_mode_name(m); m++)
        if (!strcmp(name, octo_spec_mode_name(m))) return m;
    return -1;
}

/* A decode step of a stream: the measured signal and the performance hint (runtime/cpu_adapt.h). */
static void on_step(void *user, double ms, int tokens) {
    octo_model *om = user;
    cpu_adapt_step(&om->cpu, om->b->pool, ms, tokens, now_s());
}

/* The grammar params ask for (NULL when none), and the model's vocabulary
 * as grammars see it (made once). */
static err_code stream_grammar(octo_model *om, const octo_generate_params *p, grammar **out, gen_params *gp,
                               err_t *err) {
    *out = NULL;
    if (!p->grammar && !p->json_schema) return ERR_OK;
    if (p->grammar && p->json_schema) return err_set(err, ERR_INVALID_ARG, "give a grammar or a JSON schema, not both");
    char *text = NULL;
    err_code rc = p->json_schema ? json_schema_to_gbnf(p->json_schema, strlen(p->json_schema), &text, err) : ERR_OK;
    const char *gbnf = p->json_schema ? text : p->grammar;
    if (!rc) rc = grammar_parse(gbnf, strlen(gbnf), out, err);
    free(text);
    model_lock(om);
    if (!rc && !om->gvocab) rc = grammar_vocab_new(om->b->tok, &om->gvocab, err);
    pthread_mutex_unlock(&om->lock);
    if (rc) {
        grammar_free(*out);
        *out = NULL;
        return rc;
    }
    gp->grammar = *out;
    gp->grammar_vocab = om->gvocab;
    return ERR_OK;
}

/* Tokenize text and start a stream on it; the model is marked busy on success. */
static octo_stream *start_stream(octo_session *ss, const char *text, bool parse_special,
                                 const octo_generate_params *params) {
    octo_model *om = ss->om;
    err_t *err = ss->err;
    octo_generate_params p = params ? *params : octo_generate_params_defaults();
    gen_params gp = to_gen_params(&p);
    if (p.logprobs < 0 || p.logprobs > 1 || p.top_logprobs < 0 || p.top_logprobs > OCTO_MAX_TOP_LOGPROBS) {
        err_set(err, ERR_INVALID_ARG, "logprobs is 0 or 1 and top_logprobs 0..%d (got %d, %d)", OCTO_MAX_TOP_LOGPROBS,
                p.logprobs, p.top_logprobs);
        return NULL;
    }
    if (p.logprobs) p.spec = OCTO_SPEC_NONE; /* a verify pass's rows are not kept */
    if ((int)p.spec < OCTO_SPEC_AUTO || (int)p.spec > OCTO_SPEC_NONE + spec_proposer_count()) {
        err_set(err, ERR_INVALID_ARG, "unknown speculative mode %d", (int)p.spec);
        return NULL;
    }
    /* AUTO: the bundle's choice; a named mode: its row of the proposer table */
    if (p.spec != OCTO_SPEC_NONE &&
        bundle_proposer(om->b, p.spec == OCTO_SPEC_AUTO ? NULL : spec_proposer_at((int)p.spec - OCTO_SPEC_NONE - 1),
                        &gp.proposer, err))
        return NULL;
    gp.draft = ss->draft_s;
    gp.prefill.auto_policy = auto_kv_policy(om);
    gp.on_step = on_step;
    gp.step_user = om;
    if (sampler_check(&gp.sampling, err)) return NULL;
    if (p.max_tokens < 0) {
        err_set(err, ERR_INVALID_ARG, "max_tokens must be 0 or more, not %d", p.max_tokens);
        return NULL;
    }
    if (!om->b->tok || om->b->plan_only) { /* the model's reason, in this session's error */
        if (!need_tokenizer(om)) plan_only(om);
        if (err != &om->err) *err = om->err;
        return NULL;
    }
    if (!*text) {
        err_set(err, ERR_INVALID_ARG, "the prompt is empty");
        return NULL;
    }
    bool expected = false;
    if (!atomic_compare_exchange_strong(&ss->busy, &expected, true)) {
        err_set(err, ERR_BUSY, "the model is already serving a stream; free it, or open another session (octo_session_new)");
        return NULL;
    }
    tok_list l = {0};
    octo_stream *st = NULL;
    grammar *gr = NULL;
    err_code rc = tokenizer_encode(om->b->tok, text, strlen(text), true, parse_special, &l, err);
    if (!rc && !(st = calloc(1, sizeof *st))) rc = err_set(err, ERR_NOMEM, "out of memory");
    if (!rc) rc = stream_grammar(om, &p, &gr, &gp, err);
    if (!rc) rc = gen_start(ss->s, om->b->tok, l.ids, l.n, &gp, &st->g, err);
    tok_list_free(&l);
    if (!rc) st->grammar = gr;
    if (rc) {
        grammar_free(gr);
        free(st);
        atomic_store(&ss->busy, false);
        return NULL;
    }
    st->om = om;
    st->ss = ss;
    model_lock(om);
    ss->stream = st;
    pthread_mutex_unlock(&om->lock);
    return st;
}

static octo_stream *generate_in(octo_session *ss, const char *prompt, const octo_generate_params *params) {
    err_clear(ss->err);
    if (!prompt) {
        err_set(ss->err, ERR_INVALID_ARG, "no prompt given");
        return NULL;
    }
    return start_stream(ss, prompt, params && params->parse_special, params);
}

/* The public messages as the template's; NULL (and the error set) when out of memory. */
static chat_message *chat_messages(const octo_message *msgs, int n, err_t *err) {
    chat_message *cm = malloc(sizeof *cm * (size_t)n);
    if (!cm) err_set(err, ERR_NOMEM, "out of memory");
    for (int i = 0; cm && i < n; i++) cm[i] = (chat_message){msgs[i].role, msgs[i].content};
    return cm;
}

static octo_stream *chat_in(octo_session *ss, const octo_message *msgs, int n, const octo_generate_params *params) {
    octo_model *om = ss->om;
    err_clear(ss->err);
    if (!msgs || n <= 0) {
        err_set(ss->err, ERR_INVALID_ARG, "octo_chat needs at least one message");
        return NULL;
    }
    chat_message *cm = chat_messages(msgs, n, ss->err);
    if (!cm) return NULL;
    char *text = NULL;
    err_code rc = chat_format(om->b->chat, cm, n, &text, ss->err);
    free(cm);
    if (rc) return NULL;
    if (om->b->chat == CHAT_PLAIN) {
        model_lock(om);
        snprintf(om->warning, sizeof om->warning,
                 "the model's chat template is missing or not recognised; messages were joined as a plain prompt");
        pthread_mutex_unlock(&om->lock);
        client_log(om->client, OCTO_LOG_WARN, om->warning);
    }
    octo_stream *st = start_stream(ss, text, true, params);
    free(text);
    return st;
}

/* octo_chat_fit in session ss, its error in ss->err. */
static int chat_fit_in(octo_session *ss, const octo_message *msgs, int n, int reserve) {
    octo_model *om = ss->om;
    err_clear(ss->err);
    if (!msgs || n <= 0) return -(int)err_set(ss->err, ERR_INVALID_ARG, "octo_chat_fit needs at least one message");
    if (reserve < 0 || reserve > OCTO_MAX_CONTEXT)
        return -(int)err_set(ss->err, ERR_INVALID_ARG, "reserve_tokens must be within 0..%d, not %d",
                             OCTO_MAX_CONTEXT, reserve);
    if (!om->b->tok || om->b->plan_only) { /* the model's reason, in this session's error */
        if (!need_tokenizer(om)) plan_only(om);
        if (ss->err != &om->err) *ss->err = om->err;
        return -(int)ss->err->code;
    }
    chat_message *cm = chat_messages(msgs, n, ss->err);
    if (!cm) return -OCTO_ERR_NOMEM;
    int drop = 0;
    err_code rc = chat_fit(om->b->tok, om->b->chat, cm, n, ss->s->n_ctx, reserve, &drop, ss->err);
    free(cm);
    return rc ? -(int)rc : drop;
}

octo_session *octo_session_new(octo_model *om) {
    if (!om) return NULL;
    err_clear(&om->err);
    model_lock(om);
    int slot = -1;
    for (int i = 0; om->extra && i < om->opts.max_sessions - 1 && slot < 0; i++)
        if (!om->extra[i]) slot = i;
    octo_session *ss = slot < 0 ? NULL : calloc(1, sizeof *ss);
    if (slot < 0)
        err_set(&om->err, ERR_BUSY, "all %d sessions are open (octo_model_options.max_sessions)",
                om->opts.max_sessions > 1 ? om->opts.max_sessions : 1);
    else if (!ss) err_set(&om->err, ERR_NOMEM, "out of memory");
    else if (bundle_session_open(om->b, &ss->s, &ss->draft_s, &om->err)) {
        free(ss);
        ss = NULL;
    } else {
        ss->om = om;
        ss->err = &ss->own_err;
        atomic_init(&ss->busy, false);
        om->extra[slot] = ss;
    }
    pthread_mutex_unlock(&om->lock);
    return ss;
}

void octo_session_free(octo_session *ss) {
    if (!ss) return;
    octo_model *om = ss->om;
    if (om) {
        model_lock(om);
        for (int i = 0; i < om->opts.max_sessions - 1; i++)
            if (om->extra[i] == ss) om->extra[i] = NULL;
        pthread_mutex_unlock(&om->lock);
        session_detach(ss);
    }
    free(ss);
}

const char *octo_session_error(const octo_session *ss) { return ss ? ss->own_err.msg : "no session"; }

octo_status octo_session_status(const octo_session *ss) { return ss ? (octo_status)ss->own_err.code : OCTO_ERR_INVALID_ARG; }

octo_stream *octo_session_generate(octo_session *ss, const char *prompt, const octo_generate_params *params) {
    if (!ss || !ss->om) return NULL;
    return generate_in(ss, prompt, params);
}

octo_stream *octo_session_chat(octo_session *ss, const octo_message *msgs, int n, const octo_generate_params *params) {
    if (!ss || !ss->om) return NULL;
    return chat_in(ss, msgs, n, params);
}

int octo_session_chat_fit(octo_session *ss, const octo_message *msgs, int n, int reserve_tokens) {
    if (!ss || !ss->om) return -OCTO_ERR_INVALID_ARG;
    return chat_fit_in(ss, msgs, n, reserve_tokens);
}

/* octo_embed in session ss, its error in ss->err. */
static int embed_in(octo_session *ss, const char *text, float *out, int cap) {
    octo_model *om = ss->om;
    err_t *err = ss->err;
    err_clear(err);
    if (!om->b->tok || om->b->plan_only) { /* the model's reason, in this session's error */
        if (!need_tokenizer(om)) plan_only(om);
        if (err != &om->err) *err = om->err;
        return -(int)err->code;
    }
    if (!ss->s) return -(int)err_set(err, ERR_INVALID_ARG, "the model was loaded without weights to compute with");
    const int dim = om->b->m->hp.n_embd;
    if (!text || !*text) return -(int)err_set(err, ERR_INVALID_ARG, "nothing to embed: the text is empty");
    if (!out) return dim;
    if (cap < dim) return -(int)err_set(err, ERR_INVALID_ARG, "the embedding has %d values; out holds %d", dim, cap);
    bool expected = false;
    if (!atomic_compare_exchange_strong(&ss->busy, &expected, true))
        return -(int)err_set(err, ERR_BUSY, "the session is serving a stream");
    tok_list l = {0};
    err_code rc = tokenizer_encode(om->b->tok, text, strlen(text), true, false, &l, err);
    if (!rc) {
        model_lock(om); /* every session's tokens in turn */
        rc = session_embed(ss->s, l.ids, l.n, out, err);
        pthread_mutex_unlock(&om->lock);
    }
    tok_list_free(&l);
    atomic_store(&ss->busy, false);
    return rc ? -(int)rc : dim;
}

int octo_embed(octo_model *om, const char *text, float *out, int cap) {
    return om ? embed_in(&om->main, text, out, cap) : -OCTO_ERR_INVALID_ARG;
}

int octo_session_embed(octo_session *ss, const char *text, float *out, int cap) {
    return ss && ss->om ? embed_in(ss, text, out, cap) : -OCTO_ERR_INVALID_ARG;
}

void octo_session_reset(octo_session *ss) {
    if (!ss || !ss->s || !ss->om || atomic_load(&ss->busy)) return;
    model_lock(ss->om); /* as octo_reset */
    session_reset(ss->s);
    pthread_mutex_unlock(&ss->om->lock);
}

/* ---- LoRA adapters ---- */

static void adapters_reserve(octo_model *om);

/* a's entry leaves the model's list and memory (lock held). */
static void adapter_drop(octo_model *om, octo_adapter *a) {
    for (octo_adapter **p = &om->adapters; *p; p = &(*p)->next)
        if (*p == a) {
            *p = a->next;
            break;
        }
    lora_free(a->lora);
    free(a);
    adapters_reserve(om);
}

/* The conversation's adapters given up (lock held). */
static void adapters_unuse(octo_model *om, octo_session *ss) {
    for (int i = 0; i < ss->n_adapters; i++) {
        octo_adapter *a = ss->adapters[i];
        if (--a->users == 0 && a->released) adapter_drop(om, a);
    }
    ss->n_adapters = 0;
}

static void adapters_release(octo_model *om, octo_session *ss) {
    model_lock(om);
    adapters_unuse(om, ss);
    pthread_mutex_unlock(&om->lock);
}

octo_adapter *octo_adapter_load(octo_model *om, const char *path) {
    if (!om) return NULL;
    err_clear(&om->err);
    if (!path) {
        err_set(&om->err, ERR_INVALID_ARG, "no adapter path given");
        return NULL;
    }
    if (!om->b->m || om->b->plan_only || !om->main.s) {
        err_set(&om->err, ERR_INVALID_ARG, "the model was loaded without weights to compute with");
        return NULL;
    }
    octo_adapter *a = calloc(1, sizeof *a + strlen(path) + 1);
    if (!a) {
        err_set(&om->err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    err_t e = {0};
    if (lora_open(om->b->m, path, &a->lora, &e)) {
        err_set(&om->err, e.code, "adapter %s: %s", path, e.msg);
        free(a);
        return NULL;
    }
    a->om = om;
    memcpy(a->path, path, strlen(path) + 1);
    a->info.n_matrices = lora_n_matrices(a->lora);
    lora_ranks(a->lora, &a->info.rank_min, &a->info.rank_max);
    a->info.alpha = lora_alpha(a->lora);
    a->info.bytes = lora_bytes(a->lora);
    model_lock(om);
    a->next = om->adapters;
    om->adapters = a;
    adapters_reserve(om);
    pthread_mutex_unlock(&om->lock);
    return a;
}

void octo_adapter_free(octo_adapter *a) {
    if (!a) return;
    octo_model *om = a->om;
    if (!om) {
        free(a);
        return;
    }
    model_lock(om);
    a->released = true;
    if (a->users == 0) adapter_drop(om, a);
    pthread_mutex_unlock(&om->lock);
}

octo_adapter_info octo_adapter_info_get(const octo_adapter *a) {
    return a ? a->info : (octo_adapter_info){0};
}

/* The memory of the adapters loaded and not dropped. */
static uint64_t adapters_bytes(const octo_model *om) {
    uint64_t bytes = 0;
    for (const octo_adapter *a = om->adapters; a; a = a->next) bytes += a->lora ? lora_bytes(a->lora) : 0;
    return bytes;
}

/* The adapters' memory counted in the plan (runtime/bundle.h: bundle_reserve); lock held. */
static void adapters_reserve(octo_model *om) {
    session *s[2 * OCTO_MAX_SESSIONS];
    bool idle;
    const int n = open_sessions(om, s, &idle);
    bundle_reserve(om->b, adapters_bytes(om), s, n);
}

/* Memory pressure (runtime/adapt.h): the adapters no conversation holds are freed; set again, they are read again. */
static uint64_t drop_idle_adapters(void *user) {
    octo_model *om = user;
    uint64_t bytes = 0;
    for (octo_adapter *a = om->adapters; a; a = a->next)
        if (a->users == 0 && a->lora) {
            bytes += lora_bytes(a->lora);
            lora_free(a->lora);
            a->lora = NULL;
        }
    if (bytes) adapters_reserve(om);
    return bytes;
}

/* An adapter dropped under memory pressure, read again (lock held). */
static err_code adapter_back(octo_model *om, octo_adapter *a, err_t *err) {
    if (a->lora) return ERR_OK;
    err_code rc = lora_open(om->b->m, a->path, &a->lora, err);
    if (rc) return err_prefix(err, "adapter %s, read again after memory pressure", a->path), rc;
    adapters_reserve(om);
    return ERR_OK;
}

/* The request's set, each adapter the model's own and held. */
static err_code adapters_check(octo_model *om, octo_adapter *const *as, const float *scales, int n, lora_set *set,
                               err_t *err) {
    if (n < 0 || n > OCTO_MAX_ADAPTERS)
        return err_set(err, ERR_INVALID_ARG, "%d adapters at once (%d at most)", n, OCTO_MAX_ADAPTERS);
    if (n > 0 && !as) return err_set(err, ERR_INVALID_ARG, "no adapters given for %d", n);
    set->n = n;
    for (int i = 0; i < n; i++) {
        if (!as[i] || as[i]->om != om || as[i]->released)
            return err_set(err, ERR_INVALID_ARG, "adapter %d is %s", i,
                           !as[i] ? "NULL" : as[i]->om != om ? "another model's" : "freed");
        err_code rc = adapter_back(om, as[i], err);
        if (rc) return rc;
        set->a[i] = as[i]->lora;
        set->scale[i] = scales ? scales[i] : 1.0f;
        if (!isfinite(set->scale[i]))
            return err_set(err, ERR_INVALID_ARG, "adapter %d's scale is not a finite number", i);
    }
    return ERR_OK;
}

static bool same_set(const lora_set *a, const lora_set *b) {
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (a->a[i] != b->a[i] || a->scale[i] != b->scale[i]) return false;
    return true;
}

static octo_status set_adapters_in(octo_session *ss, octo_adapter *const *as, const float *scales, int n) {
    octo_model *om = ss->om;
    err_t *err = ss->err;
    err_clear(err);
    if (!ss->s) return (octo_status)err_set(err, ERR_INVALID_ARG, "the model was loaded without weights to compute with");
    lora_set set = {0};
    bool expected = false;
    model_lock(om);
    err_code rc = adapters_check(om, as, scales, n, &set, err);
    if (!rc && !atomic_compare_exchange_strong(&ss->busy, &expected, true))
        rc = err_set(err, ERR_BUSY, "the conversation is serving a stream");
    if (!rc) {
        if (!same_set(&set, &ss->s->lora)) session_reset(ss->s); /* its cache was computed with the old set */
        session_set_lora(ss->s, &set, err);
        if (ss->draft_s && om->b->draft_self) session_set_lora(ss->draft_s, &set, err); /* the copy drafts as it */
        for (int i = 0; i < n; i++) as[i]->users++;
        adapters_unuse(om, ss);
        for (int i = 0; i < n; i++) ss->adapters[i] = as[i];
        ss->n_adapters = n;
        atomic_store(&ss->busy, false);
    }
    pthread_mutex_unlock(&om->lock);
    return (octo_status)rc;
}

octo_status octo_set_adapters(octo_model *om, octo_adapter *const *as, const float *scales, int n) {
    return om ? set_adapters_in(&om->main, as, scales, n) : OCTO_ERR_INVALID_ARG;
}

octo_status octo_session_set_adapters(octo_session *ss, octo_adapter *const *as, const float *scales, int n) {
    return ss && ss->om ? set_adapters_in(ss, as, scales, n) : OCTO_ERR_INVALID_ARG;
}

octo_stream *octo_generate(octo_model *om, const char *prompt, const octo_generate_params *params) {
    return om ? generate_in(&om->main, prompt, params) : NULL;
}

octo_stream *octo_chat(octo_model *om, const octo_message *msgs, int n, const octo_generate_params *params) {
    return om ? chat_in(&om->main, msgs, n, params) : NULL;
}

int octo_chat_fit(octo_model *om, const octo_message *msgs, int n, int reserve_tokens) {
    return om ? chat_fit_in(&om->main, msgs, n, reserve_tokens) : -OCTO_ERR_INVALID_ARG;
}

/* Under om->lock: the generations of every open stream, and whether each
 * one's caller is asking for its next piece. */
static int active_streams(octo_model *om, generation **g, bool *asking) {
    int n = 0;
    for (int i = -1; i < n_extra(om); i++) {
        octo_session *ss = i < 0 ? &om->main : om->extra[i];
        if (!ss || !ss->stream) continue;
        asking[n] = atomic_load(&ss->stream->asking);
        g[n++] = ss->stream->g;
    }
    return n;
}

/* Under om->lock: wait a moment (runtime/batch.h: BATCH_GATHER_MS) for
 * callers about to sample, so that they join the step. */
static void gather_callers(octo_model *om, generation **g, bool *asking, int *n) {
    const double until = now_s() + BATCH_GATHER_MS / 1e3;
    while (batch_gather(g, asking, *n) && now_s() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 500000; /* half a millisecond, then look again */
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&om->step_cv, &om->lock, &ts);
        *n = active_streams(om, g, asking);
    }
}

/* Under om->lock: shared steps (runtime/batch.h) until st's next piece
 * needs no model work, or st is the only one that wants any (then
 * gen_next does its own, speculation included). */
static void shared_steps(octo_model *om, octo_stream *st) {
    generation *g[OCTO_MAX_SESSIONS];
    bool asking[OCTO_MAX_SESSIONS];
    while (!gen_ready(st->g)) {
        if (om->stepping) { /* another caller's step: it takes this one's rows too */
            pthread_cond_wait(&om->step_cv, &om->lock);
            continue;
        }
        int n = active_streams(om, g, asking);
        if (n < 2) return;
        om->stepping = true;
        gather_callers(om, g, asking, &n);
        bool served;
        tpool_affinity prev;
        tpool_pin_caller(om->b->pool, &prev); /* the step computes on the model's cores, as gen_next does */
        const int ran = batch_step(&om->batch, g, n, st->g, &served);
        tpool_unpin_caller(&prev);
        om->stepping = false;
        pthread_cond_broadcast(&om->step_cv);
        if (!ran || (!served && !gen_prompt_waits(st->g))) return; /* st's work is its own */
    }
}

const char *octo_stream_next(octo_stream *st) {
    if (!st || !st->om) return NULL;
    atomic_store(&st->asking, true);
    model_lock(st->om); /* octo_model_stats reads between tokens */
    adapt_poll(st->om);                /* memory pressure is answered between tokens */
    cpu_adapt_poll(&st->om->cpu, st->om->b->pool, now_s()); /* and the CPU there is */
    const double wait = cpu_adapt_pace(&st->om->cpu, now_s(), plat_process_cpu_s());
    if (wait > 0) { /* a quota's budget spent evenly: not in a burst, then a gap */
        pthread_mutex_unlock(&st->om->lock);
        const struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
        model_lock(st->om);
        gen_add_wait(st->g, wait * 1e3); /* the app waited: decode time and the token's latency */
    }
    shared_steps(st->om, st);
    while (gen_prefill_step(st->g)) /* a lone prompt a chunk at a time: a request that comes meanwhile */
        if (atomic_load(&st->om->lock_wanted) > 0) yield_lock(st->om), shared_steps(st->om, st); /* joins */
    const char *piece = gen_next(st->g);
    atomic_store(&st->asking, false);
    pthread_cond_broadcast(&st->om->step_cv); /* a step gathering callers may go on */
    pthread_mutex_unlock(&st->om->lock);
    return piece;
}

int octo_stream_piece_size(const octo_stream *st) { return st && st->om ? gen_piece_size(st->g) : 0; }

octo_status octo_stream_status(const octo_stream *st) {
    if (!st) return OCTO_ERR_INVALID_ARG;
    if (!st->om) return OCTO_ERR_INVALID_ARG;
    return (octo_status)gen_error(st->g)->code;
}

const char *octo_stream_error(const octo_stream *st) {
    if (!st) return "no stream";
    if (!st->om) return "the stream's model was freed";
    return gen_error(st->g)->msg;
}

octo_stop_reason octo_stream_stop_reason(const octo_stream *st) {
    if (!st || !st->om) return OCTO_STOP_ERROR;
    switch (gen_stop_reason(st->g)) {
    case GEN_RUNNING: return OCTO_STOP_NONE;
    case GEN_STOP_EOG: return OCTO_STOP_END_OF_TURN;
    case GEN_STOP_MAX_TOKENS: return OCTO_STOP_MAX_TOKENS;
    case GEN_STOP_CANCELLED: return OCTO_STOP_CANCELLED;
    case GEN_STOP_CONTEXT_FULL: return OCTO_STOP_CONTEXT_FULL;
    default: return OCTO_STOP_ERROR;
    }
}

int32_t octo_stream_last_token(const octo_stream *st) { return st && st->om ? gen_last_token(st->g) : -1; }

int octo_stream_tokens(const octo_stream *st, const int32_t **ids) {
    int n = 0;
    const int32_t *all = st && st->om ? gen_tokens(st->g, &n) : NULL;
    if (ids) *ids = all; /* NULL ids: the count alone */
    return n;
}

octo_status octo_stream_logprob(const octo_stream *st, int i, octo_token_logprob *out) {
    gen_token_lp lp;
    if (!st || !st->om || !out || !gen_logprob(st->g, i, &lp)) return OCTO_ERR_INVALID_ARG;
    *out = (octo_token_logprob){.token = lp.token, .logprob = lp.logprob, .n_top = lp.n_top};
    memcpy(out->top_token, lp.top_token, sizeof lp.top_token);
    memcpy(out->top_logprob, lp.top_logprob, sizeof lp.top_logprob);
    return OCTO_OK;
}

int octo_stream_token_count(octo_stream *st) { return st && st->om ? gen_token_count(st->g) : 0; }

void octo_stream_cancel(octo_stream *st) {
    if (st) gen_cancel(st->g);
}

void octo_stream_free(octo_stream *st) {
    if (!st) return;
    if (st->om) {
        model_lock(st->om);
        st->ss->last = gen_get_stats(st->g);
        st->ss->stream = NULL;
        cpu_adapt_end(&st->om->cpu, st->om->b->pool);
        pthread_mutex_unlock(&st->om->lock);
        atomic_store(&st->ss->busy, false);
    }
    gen_free(st->g);
    grammar_free(st->grammar);
    free(st);
}

octo_status octo_generate_cb(octo_model *om, const char *prompt, const octo_generate_params *params,
                             int (*on_piece)(void *user, const char *piece), void *user) {
    if (!on_piece) {
        if (om) err_set(&om->err, ERR_INVALID_ARG, "octo_generate_cb needs a callback");
        return OCTO_ERR_INVALID_ARG;
    }
    octo_stream *st = octo_generate(om, prompt, params);
    if (!st) return om ? (octo_status)om->err.code : OCTO_ERR_INVALID_ARG;
    for (const char *piece; (piece = octo_stream_next(st));)
        if (on_piece(user, piece)) octo_stream_cancel(st);
    octo_status rc = octo_stream_status(st);
    if (rc) err_set(&om->err, (err_code)rc, "%s", octo_stream_error(st));
    octo_stream_free(st);
    return rc;
}

static octo_stats stats_snapshot(const octo_model *om, const octo_session *ss);

octo_stats octo_session_stats(const octo_session *ss) {
    if (!ss || !ss->om) return stats_snapshot(NULL, NULL);
    octo_model *m = ss->om;
    pthread_mutex_lock(&m->lock);
    octo_stats st = stats_snapshot(m, ss);
    pthread_mutex_unlock(&m->lock);
    return st;
}

/* Taken between tokens: a stream running on another thread pauses for it. */
octo_stats octo_model_stats(const octo_model *om) {
    if (!om) return stats_snapshot(NULL, NULL);
    octo_model *m = (octo_model *)om; /* the lock is not part of the model's value */
    pthread_mutex_lock(&m->lock);
    octo_stats st = stats_snapshot(om, &om->main);
    pthread_mutex_unlock(&m->lock);
    return st;
}

/* Token latency (core/latency.h): -1 each while unknown. */
static void latency_stats(octo_stats *st, const lat_summary *l) {
    const bool known = l->n > 0;
    st->decode_latency_tokens = l->n;
    st->decode_latency_p50_ms = known ? l->p50_ms : -1.0;
    st->decode_latency_p90_ms = known ? l->p90_ms : -1.0;
    st->decode_latency_p95_ms = known ? l->p95_ms : -1.0;
    st->decode_latency_p99_ms = known ? l->p99_ms : -1.0;
    st->decode_latency_max_ms = known ? l->max_ms : -1.0;
    st->decode_latency_cv = known ? l->cv : -1.0;
}

/* The figures of a generation (or of octo_eval_prompt's prompt) into st. */
static void generation_stats(octo_stats *st, const gen_stats *g) {
    st->prompt_tokens = g->prompt_tokens;
    st->prefill_tokens = g->prefill_tokens;
    st->prefill_ms = g->prefill_ms;
    st->prefill_tokens_per_s = g->prefill_ms > 0 && g->prefill_tokens ? g->prefill_tokens * 1e3 / g->prefill_ms : 0.0;
    st->decode_tokens = g->decode_tokens;
    st->decode_ms = g->decode_ms;
    /* tokens the decode passes produced: one per plain pass, accepted drafts + 1 per verify pass */
    const int decoded = g->decode_evals + g->batch_decodes + g->spec_accepted + g->spec_steps;
    st->decode_tokens_per_s = g->decode_ms > 0 && decoded ? decoded * 1e3 / g->decode_ms : 0.0;
    st->time_to_first_token_ms = g->time_to_first_token_ms;
    st->batch_steps = g->batch_steps;
    st->batch_mean = g->batch_steps ? (double)g->batch_peers / g->batch_steps : 0.0;
    if (g->spec_k) {
        st->speculative_acceptance_rate = g->spec_proposed ? (double)g->spec_accepted / g->spec_proposed : 0.0;
        st->spec_proposed = g->spec_proposed;
        st->spec_accepted = g->spec_accepted;
        st->spec_steps = g->spec_steps;
        st->spec_k = g->spec_k;
        st->spec_tree_passes = g->spec_tree_passes;
        st->spec_off_line = g->spec_off_line;
        st->spec_ahead_used = g->proposer.ahead_used;
        st->spec_ahead_dropped = g->proposer.ahead_dropped;
        st->spec_ms = g->spec_ms;
        st->spec_draft_ms = g->spec_draft_ms;
        snprintf(st->spec_proposer, sizeof st->spec_proposer, "%s", g->spec_proposer);
        st->lookahead_ngrams = g->proposer.ngrams;
        st->lookahead_new = g->proposer.ngrams_new;
        st->lookahead_pool_proposed = g->proposer.pool_proposed;
        st->lookahead_pool_accepted = g->proposer.pool_accepted;
        if (g->spec_off && !g->spec_accepted)
            snprintf(st->spec_note, sizeof st->spec_note, "off: no draft accepted in %d verify passes", g->spec_steps);
        else if (g->spec_off)
            snprintf(st->spec_note, sizeof st->spec_note, "off: %.1f ms/token verified vs %.1f plain",
                     g->spec_ms_per_token, g->plain_ms_per_token);
    }
    st->prefill_speckv = g->pre.speckv;
    st->prefill_lookahead_tokens = g->pre.lookahead_tokens;
    st->prefill_draft_ms = g->pre.draft_ms;
    st->kv_tokens_kept_by_score = g->pre.kept_by_score;
    st->prompt_tokens_dropped = g->pre.prompt_dropped;
    st->prefill_ms_saved = g->pre.saved_ms;
    latency_stats(st, &g->latency);
}

/* Memory given back and taken again (runtime/adapt.h), the adapters' memory. */
static void memory_stats(octo_stats *st, const octo_model *om) {
    const adapt_state *a = &om->adapt;
    st->mem_level = a->level;
    st->mem_trims = (int)a->trims;
    st->mem_regrows = (int)a->regrows;
    st->mem_pressure_events = (int)a->events;
    st->mem_released_weights_bytes = a->released_weights;
    st->mem_released_draft_bytes = a->released_draft;
    st->mem_released_experts_bytes = a->released_experts;
    st->mem_released_kv_bytes = a->released_kv;
    st->weights_packed_bytes = om->b->m->packed_bytes;
    st->mem_room_bytes = mem_room();
    st->mem_released_adapter_bytes = a->released_adapters;
    st->adapter_bytes = adapters_bytes(om);
    snprintf(st->mem_watch, sizeof st->mem_watch, "%s", om->watch_source);
    snprintf(st->mem_note, sizeof st->mem_note, "%s", a->note);
}

static octo_stats stats_snapshot(const octo_model *om, const octo_session *ss) {
    octo_stats st;
    memset(&st, 0, sizeof st);
    st.speculative_acceptance_rate = -1.0;
    snprintf(st.spec_proposer, sizeof st.spec_proposer, "none");
    st.expert_cache_hit_rate = -1.0;
    st.expert_prediction_rate = -1.0;
    st.expert_batch_saved_bytes_per_token = -1.0;
    latency_stats(&st, &(lat_summary){0});
    if (!om) return st;
    const experts_stats ex = bundle_experts_stats(om->b);
    st.expert_lookups = ex.lookups;
    if (ex.cached && ex.lookups) st.expert_cache_hit_rate = (double)ex.hits / (double)ex.lookups;
    st.expert_bytes_read = ex.bytes_read;
    st.expert_stall_ms = (double)ex.stall_ns / 1e6;
    st.expert_cache_bytes = ex.cache_bytes;
    st.expert_cache_capacity = ex.cache_capacity;
    st.expert_bytes = ex.expert_bytes;
    if (ex.predicted) st.expert_prediction_rate = (double)ex.predicted_right / (double)ex.predicted;
    st.expert_prediction_precision = ex.predicted_named ? (double)ex.predicted_right / (double)ex.predicted_named : -1.0;
    const uint64_t from_file = ex.lookups - ex.hits + ex.prefetch_in_time;
    st.expert_prefetch_recall = ex.prefetching && from_file ? (double)ex.prefetch_in_time / (double)from_file : -1.0;
    st.expert_prefetched = ex.prefetched;
    st.expert_tokens = ex.tokens;
    st.expert_batch_saved_bytes_per_token =
        ex.batch_tokens ? (double)ex.batch_saved_bytes / (double)ex.batch_tokens : -1.0;
    st.expert_bytes_read_per_token = ex.tokens ? (double)ex.bytes_read / (double)ex.tokens : 0.0;
    st.expert_stall_ms_per_token = ex.tokens ? (double)ex.stall_ns / 1e6 / (double)ex.tokens : 0.0;
    st.expert_trace_failed = ex.trace_failed;
    st.expert_int2_loads = ex.int2_loads;
    st.expert_int2_served = ex.int2_served;
    st.expert_int2_promotions = ex.int2_promotions;
    st.expert_int2_errors = ex.int2_errors;
    st.expert_readahead_share = ex.readahead_passes ? (double)ex.readahead_passes_on / (double)ex.readahead_passes : -1.0;
    gen_stats g = ss->stream ? gen_get_stats(ss->stream->g) : ss->last;
    generation_stats(&st, &g);
    st.context_tokens = ss->s ? ss->s->n_past : 0;
    st.context_size = om->b->n_ctx;
    const bundle_kv_stats bk = bundle_kv_stats_of(om->b, ss->s, ss->draft_s);
    const kv_stats kv = bk.kv; /* the draft's bytes included */
    st.kv_bytes = kv.bytes;
    st.kv_draft_bytes = bk.draft_bytes;
    st.kv_budget_bytes = bk.budget_bytes;
    st.kv_cache_utilization = st.kv_budget_bytes ? (double)st.kv_bytes / (double)st.kv_budget_bytes : 0.0;
    st.kv_bytes_hot = kv.bytes_hot;
    st.kv_bytes_warm = kv.bytes_warm;
    st.kv_bytes_cold = kv.bytes_cold;
    st.kv_tokens_retained = kv.tokens;
    st.kv_tokens_evicted = kv.tokens_evicted;
    snprintf(st.kv_policy, sizeof st.kv_policy, "%s", kv_policy_name(om->b->plan.kv.policy));
    st.kv_spill_on = kv.spill_on;
    st.kv_blocks_spilled = kv.blocks_spilled;
    st.kv_spill_writes = kv.spill_writes;
    st.kv_spill_clean = kv.spill_clean;
    st.kv_spill_reads = kv.spill_reads;
    st.kv_spill_hits = kv.spill_hits;
    st.kv_spill_prefetched = kv.spill_prefetch_hits;
    st.kv_spill_errors = kv.spill_errors;
    st.kv_spill_read_us = kv.spill_reads ? kv.spill_read_ns / 1e3 / (double)kv.spill_reads : 0.0;
    st.kv_spill_hit_rate = kv.spill_reads ? (double)kv.spill_hits / (double)kv.spill_reads : 0.0;
    st.kv_spill_file_bytes = kv.spill_file_bytes;
    snprintf(st.kv_spill_note, sizeof st.kv_spill_note, "%s", kv.spill_note);
    const plat_mem_usage u = plat_mem_read_rss(); /* PSS would walk the page tables on every call */
    st.rss_bytes = u.rss_bytes;
    st.peak_rss_bytes = u.peak_rss_bytes;
    snprintf(st.chat_template, sizeof st.chat_template, "%s", chat_family_name(om->b->chat));
    snprintf(st.warning, sizeof st.warning, "%s", om->warning);
    memory_stats(&st, om);
    st.cpu_threads = om->cpu.threads;
    st.cpu_effective = om->cpu.sig.effective_cpus;
    st.cpu_changes = (int)om->cpu.changes;
    st.cpu_probes = (int)om->cpu.probe.probes;
    st.cpu_spin = tpool_spin(om->b->pool);
    st.cpu_paced = (int)om->cpu.paced;
    const batch_state *bs = &om->batch;
    st.batch_model_steps = bs->steps;
    st.batch_model_mean = bs->steps ? (double)bs->sessions / (double)bs->steps : 0.0;
    st.batch_model_max = bs->max_sessions;
    st.batch_model_last = bs->last_sessions;
    st.batch_model_prompt_rows = bs->prompt_rows;
    st.batch_model_retried = bs->retried;
    st.batch_model_verify = bs->verify_passes;
    snprintf(st.cpu_note, sizeof st.cpu_note, "%s", om->cpu.note);
    snprintf(st.cpu_hint, sizeof st.cpu_hint, "%s", om->cpu.hint_note);
    packed_describe(st.cpu_kernels, sizeof st.cpu_kernels);
    return st;
}

double octo_measure_read_bandwidth(int n_threads, uint64_t bytes) {
    if (n_threads < 0) return 0.0;
    tpool *pool = NULL;
    if (tpool_new(n_threads ? n_threads : tpool_default_threads(), &pool, NULL)) return 0.0;
    double gbps = membw_read_gbps(pool, bytes ? (size_t)bytes : (size_t)1 << 30, 5, NULL);
    tpool_free(pool);
    return gbps;
}

octo_memory octo_memory_usage(void) {
    plat_mem_usage u = plat_mem_read();
    return (octo_memory){.rss_bytes = u.rss_bytes, .peak_rss_bytes = u.peak_rss_bytes, .pss_bytes = u.pss_bytes};
}
