/*
 * octo.h — the public interface of octo, an on-device LLM inference runtime.
 *
 * This is the only public header. The whole promise:
 *
 *   octo_client *client = octo_client_new(NULL);
 *   octo_model  *model  = octo_load_model(client, "model.gguf", NULL);
 *   octo_stream *stream = octo_generate(model, "Summarize this document:", NULL);
 *   for (const char *piece; (piece = octo_stream_next(stream)); ) fputs(piece, stdout);
 *   octo_stats stats = octo_model_stats(model);
 *   octo_stream_free(stream);
 *   octo_model_free(model);
 *   octo_client_free(client);
 *
 * Every options/params struct has an octo_*_defaults() initializer, and NULL
 * anywhere a struct is taken means "defaults, chosen for this device".
 *
 * Errors: every function that can fail returns an octo_status or NULL and
 * leaves a message naming the problem in the object it was called on
 * (octo_model_error, octo_stream_error) or, when no object could be made, in
 * the client (octo_last_error). The library never prints, exits or aborts on
 * bad input.
 *
 * Lifetimes: a model keeps its client alive. octo_client_free may come before
 * octo_model_free; the client is released with the last model loaded from it.
 * A stream that outlives its model only reports an error.
 *
 * Threads: a client may be shared between threads; octo_last_error and
 * octo_last_status report the last failure of a call made on this client by
 * the calling thread, so threads never read each other's errors. A model
 * serves one stream at a time: while a stream is alive, octo_generate /
 * octo_chat / octo_eval / octo_truncate on the same model fail with
 * OCTO_ERR_BUSY. While a stream runs on one thread, other threads may call,
 * on that stream or its model, only: octo_stream_cancel,
 * octo_stream_token_count, octo_model_stats (a snapshot taken between tokens:
 * the stream pauses for it), octo_model_trim (likewise), octo_model_info_get
 * and octo_memory_usage. Every
 * other call on the stream or its model comes from one thread at a time.
 * Load one model object per concurrent conversation.
 *
 * Ranges: every size-like parameter has a documented range and is checked
 * (docs/limits.md lists them all); a value outside it is OCTO_ERR_INVALID_ARG.
 */
#ifndef OCTO_H
#define OCTO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; octo_version() gives the library's. */
#define OCTO_VERSION_MAJOR 0
#define OCTO_VERSION_MINOR 1
#define OCTO_VERSION_PATCH 0
#define OCTO_VERSION "0.1.0"

/* The library exports exactly the functions marked OCTO_API (everything
 * else is hidden), so it links beside other libraries, ggml included. */
#if defined(__GNUC__) || defined(__clang__)
#define OCTO_API __attribute__((visibility("default")))
#else
#define OCTO_API
#endif

/* "MAJOR.MINOR.PATCH" of the library in use: compare with OCTO_VERSION to
 * catch a header and a library from different releases. */
OCTO_API const char *octo_version(void);
/* sizeof of the public structs as the library was built, by name
 * ("octo_model_info", "octo_stats", ...; 0 for an unknown name): a binding
 * that lays the structs out itself checks its layout against these. */
OCTO_API int octo_struct_size(const char *name);

/* Upper bounds of the size-like parameters (docs/limits.md). */
#define OCTO_MAX_CONTEXT (1 << 24)       /* tokens: n_ctx and the KV windows */
#define OCTO_MAX_THREADS 1024            /* octo_client_options.n_threads */
#define OCTO_MAX_SESSIONS 64             /* octo_model_options.max_sessions */
#define OCTO_MAX_REPEAT_LAST_N (1 << 20) /* octo_generate_params.repeat_last_n */

typedef enum {
    OCTO_OK = 0,
    OCTO_ERR_INVALID_ARG = 1,
    OCTO_ERR_NOMEM = 2,
    OCTO_ERR_IO = 3,
    OCTO_ERR_NOT_FOUND = 4,
    OCTO_ERR_IS_DIR = 5,
    OCTO_ERR_EMPTY_FILE = 6,
    OCTO_ERR_TRUNCATED = 7,
    OCTO_ERR_BAD_MAGIC = 8,
    OCTO_ERR_BAD_VERSION = 9,
    OCTO_ERR_BAD_TENSOR_TYPE = 10,
    OCTO_ERR_BAD_METADATA = 11,
    OCTO_ERR_TENSOR_BOUNDS = 12,
    OCTO_ERR_OVERFLOW = 13,
    OCTO_ERR_MISSING_TENSOR = 14,
    OCTO_ERR_BAD_SHAPE = 15,
    OCTO_ERR_UNSUPPORTED_ARCH = 16,
    OCTO_ERR_MISSING_KEY = 17,
    OCTO_ERR_BAD_VALUE = 18,
    OCTO_ERR_UNSUPPORTED = 19,
    OCTO_ERR_CONTEXT_FULL = 20,
    OCTO_ERR_BUSY = 21,
    OCTO_ERR_CANCELLED = 22,
    OCTO_ERR_NO_SPACE = 23,
    OCTO_ERR_CORRUPT = 24,
} octo_status;

/* A short stable name for a status ("truncated file", ...). */
OCTO_API const char *octo_status_name(octo_status status);

/* ---- client ---- */

typedef struct octo_client octo_client;

typedef enum { OCTO_LOG_DEBUG = 0, OCTO_LOG_INFO = 1, OCTO_LOG_WARN = 2, OCTO_LOG_ERROR = 3 } octo_log_level;

typedef struct {
    int n_threads;         /* 0..OCTO_MAX_THREADS; 0 = the performance cores this process may use */
    /* NULL = this host. A known phone's profile ("iphone-15-pro", "iphone-14",
     * "pixel-8", "galaxy-s24", "android-4gb-emmc") replaces the host's memory
     * and storage in every plan; an unknown name fails octo_load_model.
     * "host" is this machine (the default), named (a deploy bundle's folder). */
    const char *device;
    /* NULL = none (features that spill to flash stay off). The KV cache's
     * spill file is created here (and unlinked at once: nothing is left). */
    const char *cache_dir;
    /* Optional: messages the library would otherwise keep to itself (warnings
     * such as an unknown chat template). Called on the thread that caused them. */
    void (*log)(void *user, octo_log_level level, const char *message);
    void *log_user;
} octo_client_options;

OCTO_API octo_client_options octo_client_options_defaults(void);
/* opts NULL = defaults. Returns NULL only when out of memory. The client keeps
 * copies of opts' strings: the caller's may change or go after the call. */
OCTO_API octo_client *octo_client_new(const octo_client_options *opts);
/* Releases the caller's hold: the client itself lives on while models loaded
 * from it do (their log callback keeps working). */
OCTO_API void octo_client_free(octo_client *client);
/* The message of the last failure of a call made on this client by the calling
 * thread ("" if none); valid until that thread's next call on the client. */
OCTO_API const char *octo_last_error(const octo_client *client);
OCTO_API octo_status octo_last_status(const octo_client *client);

/* ---- model ---- */

typedef struct octo_model octo_model;

typedef enum { OCTO_KV_F32 = 0, OCTO_KV_F16 = 1 } octo_kv_type;

typedef enum {
    OCTO_KV_POLICY_DEFAULT = 0, /* morphkv */
    OCTO_KV_POLICY_NONE,        /* keep every entry (no budget) */
    OCTO_KV_POLICY_WINDOW,      /* anchors + the most recent entries */
    OCTO_KV_POLICY_H2O,         /* the entries with the most accumulated attention */
    OCTO_KV_POLICY_SNAPKV,      /* the prompt entries the end of the prompt attends to */
    OCTO_KV_POLICY_MORPHKV,     /* recent window + the entries recent queries attend to */
    OCTO_KV_POLICY_SPECKV,      /* the prompt entries the end of the prompt and the draft's lookahead attend to */
    /* policies added later follow by number, without a name in this enum */
} octo_kv_policy;

/* A policy's name: "default", "none", "window", "h2o", "snapkv", "morphkv", "speckv",
 * then those of the policies that follow; NULL when p is not a policy (so
 * counting up from OCTO_KV_POLICY_NONE until NULL lists them all). */
OCTO_API const char *octo_kv_policy_name(octo_kv_policy p);
/* The policy called name ("default" is OCTO_KV_POLICY_DEFAULT); -1 when none is. */
OCTO_API int octo_kv_policy_from_name(const char *name);

/* The KV cache. Every field has a working default (octo_model_options_defaults). */
typedef struct {
    int compress;            /* 1 (default): tiers by age and eviction within a budget; 0: every entry kept at kv_type */
    octo_kv_policy policy;
    uint64_t budget_bytes;   /* 0 (default) = 0.6 x (free memory - weights - 256 MiB), at most the full F16 cache */
    /* windows in tokens, each 0..OCTO_MAX_CONTEXT, hot <= warm */
    int hot_tokens;          /* newest entries kept at F16: default 128 */
    int warm_tokens;         /* entries younger than this kept at INT8: default 512 */
    int anchor_tokens;       /* first entries never evicted: default 64 */
    int recent_tokens;       /* newest entries never evicted: default 128 */
    int cold_bits;           /* 4 (default), 8 (no INT4 tier) or 16 (no quantization) */
    int cold_symmetric;      /* 0 (default): INT4 groups with a minimum (asymmetric); 1: symmetric */
    int per_token_keys;      /* 0 (default): quantized keys by channel (KIVI); 1: by token, as values */
    /* Over budget, cold blocks go to a file in the client's cache_dir instead
     * of being evicted, and come back when a query needs them.
     * 0 (default): when there is a cache_dir on fast storage (NVMe, UFS, SSD;
     * not eMMC, a spinning disk or tmpfs); 1: whenever there is a cache_dir;
     * -1: never. */
    int spill;
    uint64_t spill_max_bytes; /* the spill file's limit; 0 (default) = what the disk holds */
    /* 0 (default): no limit; else the entries each layer of the model's cache keeps (as well as
     * budget_bytes): at least anchor_tokens + recent_tokens + 1. The budget eviction papers state. */
    int budget_tokens;
} octo_kv_options;

/* How a Mixture-of-Experts model's expert cache picks what to evict. */
typedef enum {
    OCTO_MOE_POLICY_DEFAULT = 0, /* lhu */
    OCTO_MOE_POLICY_LHU,         /* least hit-used: uses fading with age, and a floor per layer */
    OCTO_MOE_POLICY_LRU,         /* least recently used */
    OCTO_MOE_POLICY_LFU,         /* least frequently used */
} octo_moe_policy;

/* A policy's name ("default", "lhu", "lru", "lfu"); NULL when p is none. */
OCTO_API const char *octo_moe_policy_name(octo_moe_policy p);
/* The policy called name; -1 when none is. */
OCTO_API int octo_moe_policy_from_name(const char *name);

/* A Mixture-of-Experts model's experts are read from the file into a cache
 * of slots as tokens need them (nothing is read at load); these size it.
 * Ignored for dense models. */
typedef enum {
    OCTO_MOE_PREFETCH_AUTO = 0, /* an I/O thread reads the routed experts; the predicted next-layer ones too
                                   where that is measured to pay (decode alternates, docs/moe.md) */
    OCTO_MOE_PREFETCH_ON,       /* ... the predicted ones always */
    OCTO_MOE_PREFETCH_OFF,      /* no I/O thread: every miss is read when the forward pass asks for it */
} octo_moe_prefetch;

/* The 2-bit copies of the experts (docs/moe.md): a miss on an expert no
 * token chose first reads its copy (10 bytes per 32 weights, in the sidecar
 * MODEL.int2 that `octo moe-prep` writes) and serves the token with it; a
 * copy used again is replaced by the whole expert. */
typedef enum {
    OCTO_MOE_INT2_AUTO = 0, /* on where the sidecar's measured cost is at most 0.01 nats of KL divergence and the
                               cache cannot hold every expert */
    OCTO_MOE_INT2_ON,       /* on (the sidecar made at load when missing, stale or damaged) */
    OCTO_MOE_INT2_OFF,      /* off: exact */
    OCTO_MOE_INT2_ALL,      /* every such lookup served by its copy, never replaced: the worst case, to measure */
} octo_moe_int2;

typedef struct {
    uint64_t cache_bytes;    /* 0 (default): room for every expert; else the budget, at least a token's experts */
    double cache_share;      /* (0, 1]: that share of the model's expert bytes instead (cache_bytes 0) */
    octo_moe_policy policy;
    octo_moe_prefetch prefetch;
    double predict_margin;   /* read ahead, beside the next layer's predicted top k, up to two more experts whose
                                router logit is within this many standard deviations of the k-th's;
                                0: the default (0.25), < 0: the top k only */
    const char *trace;       /* a file to write one line per token and MoE layer to: the experts used and
                                whether each was a HIT, a MISS or served by its 2-bit copy (INT2,
                                docs/moe.md); NULL: none */
    octo_moe_int2 int2;
} octo_moe_options;

typedef struct {
    int n_ctx;               /* context in tokens, 0..OCTO_MAX_CONTEXT; 0 = the model's trained context */
    octo_kv_type kv_type;    /* the type of new entries (F16 by default); the only type when kv.compress = 0 */
    octo_kv_options kv;
    /* Optional: a smaller model with the same vocabulary (checked token by
     * token; a mismatch fails the load) that proposes tokens for speculative
     * decoding and scores long prompts (octo_eval_prompt). One that is not
     * smaller than the model only scores prompts: it never speculates.
     * NULL: NAME.draft.gguf beside the model NAME.gguf if there is one that
     * qualifies (smaller; one that does not is skipped, with a warning in the
     * log and the reason in octo_model_info.speculation). */
    const char *draft_model;
    /* With no draft_model:
     *   OCTO_DRAFT_AUTO (default): NAME.draft.gguf beside the model, else a
     *     self-draft (a Q4_0 copy of the model made at load) when the plan
     *     finds that it pays (a memory-bound model with F16/BF16/F32
     *     weights) and fits in free memory, else none (n-gram);
     *   OCTO_DRAFT_SELF: a self-draft whenever the weights can get smaller
     *     (an error otherwise), without looking beside the model;
     *   OCTO_DRAFT_NONE: neither, for a model that will not speculate (it
     *     loads faster and takes less memory). */
    int auto_draft;
    /* Cores of the draft model's own: 0 = automatic (on cores of different capacity, the
     * efficiency cores; else none, and the draft computes on the model's threads); N > 0 = N cores
     * (where there are two classes, N threads on the efficiency cores, at most one per core; else
     * the last N cores the process may use, the model's threads on the others: asking for all of
     * them, or for more model threads than the others, is an error). A draft with cores of its own
     * drafts while the model verifies
     * (octo_generate_params.spec_ahead). Without a draft model it does nothing. */
    int draft_threads;
    octo_moe_options moe;
    /* 1: decide everything a load decides (the plan) and make nothing: no
     * packing, no self-draft copy, no KV cache, no expert store. Such a model
     * answers octo_model_info_get and octo_model_plan_json (octo plan); eval
     * and generation fail with OCTO_ERR_INVALID_ARG. */
    int plan_only;
    /* Conversations the model serves at once (octo_session_new), its own
     * included: 0 or 1 (default) = its own only, up to OCTO_MAX_SESSIONS. The
     * KV budget is planned for that many contexts and each session's cache
     * takes its share; the weights are loaded once. */
    int max_sessions;
    /* 1: read the file's vocabulary only: tokenize and detokenize work on a
     * file of any architecture (or a vocabulary-only GGUF); octo_model_info
     * has what the metadata says; evaluation and generation fail. */
    int vocab_only;
    /* Memory pressure (docs/adaptation.md): 0 (default) = watch for it where
     * the system says it (PSI, the memory cgroup) and give memory back by
     * itself; -1 = do not watch (octo_model_trim still works). */
    int memory_watch;
} octo_model_options;

enum { OCTO_DRAFT_NONE = -1, OCTO_DRAFT_AUTO = 0, OCTO_DRAFT_SELF = 1 };

OCTO_API octo_model_options octo_model_options_defaults(void);

/* How much memory to give back (docs/adaptation.md), from the cheapest:
 *   LOW       packed weights back to the file's pages, a self-draft dropped
 *             (Android onTrimMemory RUNNING_MODERATE, UI_HIDDEN, BACKGROUND);
 *   MODERATE  + the expert cache halved, no read-ahead (RUNNING_LOW);
 *   CRITICAL  + every KV cache down to its anchors and recent window, which
 *             evicts (RUNNING_CRITICAL, COMPLETE; iOS's memory warning);
 *   NONE      memory is back: what was given back is taken again.
 * LOW and MODERATE change no output; CRITICAL can. */
typedef enum {
    OCTO_TRIM_NONE = 0,
    OCTO_TRIM_LOW = 1,
    OCTO_TRIM_MODERATE = 2,
    OCTO_TRIM_CRITICAL = 3,
} octo_trim_level;

/* Map the GGUF file at path and bind it. opts NULL = automatic. On failure
 * returns NULL; octo_last_error(client) says why.
 * path may also be a bundle written by `octo deploy` (docs/deploy.md): the
 * folder for the client's device (its profile's name, or "host" when none is
 * set) is checked against its manifest and loaded with its weights mapped
 * read-only as they are, its draft, and its plan.json applied where opts are
 * automatic. */
OCTO_API octo_model *octo_load_model(octo_client *client, const char *path, const octo_model_options *opts);
OCTO_API void octo_model_free(octo_model *model);
OCTO_API const char *octo_model_error(const octo_model *model);
/* The status of the last call on this model that failed (OCTO_OK after a success). */
OCTO_API octo_status octo_model_status(const octo_model *model);

typedef struct {
    char arch[32];            /* general.architecture */
    int n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_expert, n_expert_used; /* 0 for dense models */
    float rope_freq_base, rope_freq_scale, rms_eps;
    int output_tied;          /* 1 when logits reuse the token embedding */
    uint64_t n_tensors;
    char tensor_types[256];   /* e.g. "F32=9 Q4_0=29 Q6_K=1" */
    uint64_t n_params;
    uint64_t file_bytes;
    uint64_t weight_bytes;    /* bytes of tensor data the forward pass reads */
    uint64_t weight_bytes_per_token; /* of those, read to decode one token (one embedding row,
                                        for MoE only the used experts' share) */
    int n_threads;            /* threads the model computes with */
    int draft_threads;        /* threads of the draft model's own (0: none, or it shares the model's) */
    char cores[160];          /* where they run: on cores of different capacity, the model's on the
                                 performance cores and a draft model's on the efficiency cores */
    char cpu_path[16];        /* kernels in use: "scalar", "avx2", "avx512" or "neon" */
    uint64_t kv_bytes_per_token; /* at the type of new entries */
    int n_ctx;                /* the context this model was opened with */
    uint64_t kv_budget_bytes; /* 0 = none; with a draft model, its cache's share included */
    char kv_spill[128];        /* whether the KV cache spills to flash, and why */
    char kv_plan[256];        /* how the KV budget was chosen (and shared with a draft) */
    char speculation[256];    /* the proposer OCTO_SPEC_AUTO uses, and why: a draft given in
                                 the options, else NAME.draft.gguf beside the model when it
                                 fits, else a self-draft when it pays and fits, else n-gram */
    int n_ff_shared;          /* MoE: width of the always-on shared expert (0: none) */
    char origin[320];         /* "" or how the file was made (octo upcycle: from what, with which
                                 split, router and combination) and what other runtimes compute */
    /* Mixture-of-Experts models (0 / "" otherwise) */
    uint64_t expert_bytes_one;  /* the largest expert (gate + up + down) */
    uint64_t expert_bytes;      /* all the experts: read from the file into the expert cache as tokens need them */
    uint64_t resident_weight_bytes; /* the other weights, resident as with a dense model */
    uint64_t expert_cache_budget;   /* the expert cache's size when full */
    char expert_plan[256];      /* how the expert cache was sized, and why */
    char expert_int2[160];      /* whether the 2-bit copies are used, and why */
    char weights[224];          /* how the weights are held: packed at load for this CPU's kernels (when
                                   they fit in free memory), packed in a deploy bundle's file, or left in
                                   the read-only mapping (pages the OS can drop and read again) */
    char features[512];         /* what the architecture adds to a plain llama: gating, shared
                                   experts, latent attention (ranks), soft-caps, sliding window, ... */
} octo_model_info;

OCTO_API octo_model_info octo_model_info_get(const octo_model *model);

/* The app's memory signal: give back (or, with OCTO_TRIM_NONE, take again)
 * what `level` says, between two tokens of a stream that runs (safe from any
 * thread). The memory watcher's level, when higher, still rules. Returns
 * OCTO_ERR_INVALID_ARG for a level outside NONE..CRITICAL or a model loaded
 * to plan only; octo_model_stats says what was given back (mem_*). */
OCTO_API octo_status octo_model_trim(octo_model *model, octo_trim_level level);

/* The plan the load made (weights, KV budget and compression, spill, draft,
 * lookahead, expert cache, threads, each with its reason) as one flat JSON
 * object, the same as a deploy bundle's plan.json. Writes at most cap bytes
 * (NUL included) and returns the length the whole text needs, like snprintf;
 * -1 on bad arguments. */
OCTO_API int octo_model_plan_json(const octo_model *model, char *buf, int cap);

/* ---- evaluation ---- */

typedef enum {
    OCTO_LOGITS_LAST = 0, /* logits of the last token only: n_vocab floats */
    OCTO_LOGITS_ALL = 1,  /* logits of every token: n_tokens * n_vocab floats */
} octo_logits_mode;

/* Continue the model's sequence with n_tokens tokens and write logits
 * (row i = distribution of the token after tokens 0..i). A failed call leaves
 * the sequence unchanged, with one exception: on a model with sliding-window
 * layers (gemma2) a failure after more than 512 of the call's tokens may have
 * let the windows drop entries the sequence needs; the sequence is then
 * empty (octo_n_past 0) rather than wrong. */
OCTO_API octo_status octo_eval(octo_model *model, const int32_t *tokens, int n_tokens, float *logits, octo_logits_mode mode);
/* Tokens consumed so far. */
OCTO_API int octo_n_past(const octo_model *model);
/* Forget the sequence (the cache is kept allocated). */
OCTO_API void octo_reset(octo_model *model);
/* Keep only the first n_tokens of the sequence (n_tokens <= octo_n_past):
 * evaluation continues from there, as if the rest had never been seen. */
OCTO_API octo_status octo_truncate(octo_model *model, int n_tokens);

/* ---- text ---- */

/* Tokenize text (len bytes; need not be NUL-terminated). add_special adds
 * BOS/EOS as the vocabulary says; parse_special recognises special-token
 * text such as "<|im_end|>". Writes at most cap ids and returns the total
 * number of ids (call again with a larger buffer when it exceeds cap), or a
 * negative octo_status on error. */
OCTO_API int octo_tokenize(octo_model *model, const char *text, int len, int add_special, int parse_special, int32_t *ids,
                  int cap);
/* The bytes of one token (may be part of a UTF-8 character). Writes at most
 * cap bytes (no NUL) and returns the piece's length, or a negative status.
 * octo_tokenize and octo_token_piece write the model's error only when they
 * fail (a success leaves the last one), so they may run on other threads
 * beside a stream, for valid input. */
OCTO_API int octo_token_piece(octo_model *model, int32_t id, char *buf, int cap);
/* The text of a token sequence: pieces concatenated, control tokens left
 * out, and the leading space SentencePiece adds to the first word removed, so
 * that detokenize(tokenize(text)) == text. Same return convention as
 * octo_token_piece. */
OCTO_API int octo_detokenize(octo_model *model, const int32_t *ids, int n_ids, char *buf, int cap);
/* Special ids of the vocabulary (-1 when absent). */
OCTO_API int32_t octo_token_bos(const octo_model *model);
OCTO_API int32_t octo_token_eos(const octo_model *model);

/* ---- generation ---- */

typedef enum {
    OCTO_SPEC_AUTO = 0,  /* the draft model if one was loaded or made (and is smaller than the model), else
                            n-gram / prompt lookup; switched off
                            during a generation where it does not pay. Lossless under any sampling: greedy
                            gives exactly the text of plain decoding, sampled the same distribution
                            (rejection sampling; the random draws differ, so the text for a seed does) */
    OCTO_SPEC_NONE = 1,  /* plain decoding */
    OCTO_SPEC_NGRAM = 2, /* n-gram / prompt lookup */
    OCTO_SPEC_DRAFT = 3, /* the draft model loaded with octo_model_options.draft_model (AUTO prefers it) */
    OCTO_SPEC_SELF = 4,  /* the self-draft made at load (octo_model_options.auto_draft) */
    OCTO_SPEC_LOOKAHEAD = 5, /* lookahead decoding: Jacobi iteration with an n-gram pool, in the verify pass
                                (prompt lookup's draft first when there is one); never chosen by AUTO */
    /* A proposer added after these has the next number, and its name works
     * everywhere a name does (octo_spec_mode_from_name, the CLI's --spec). */
} octo_spec_mode;

/* The name of a mode ("auto", "none", "ngram", "draft", "self", "lookahead",
 * ...), or NULL for a number that is none: counting from 0 up to the first
 * NULL lists them all. */
OCTO_API const char *octo_spec_mode_name(int mode);
/* The mode of a name, or -1 when there is no such mode. */
OCTO_API int octo_spec_mode_from_name(const char *name);

typedef struct {
    int max_tokens;         /* >= 0 (0: the prompt is read, nothing generated); default 256 */
    float temperature;      /* >= 0; 0 = greedy; default 0.8 */
    int top_k;              /* >= 0; 0 = off; default 40 */
    float top_p;            /* (0, 1]; 1 = off; default 0.95 */
    float min_p;            /* [0, 1]; 0 = off; default 0.05 */
    float repeat_penalty;   /* > 0; 1 = off (default) */
    float presence_penalty; /* 0 = off (default) */
    int repeat_last_n;      /* tokens the penalties look at, 0..OCTO_MAX_REPEAT_LAST_N; default 64 */
    uint64_t seed;          /* the same seed gives the same text; default 0 */
    int parse_special;      /* recognise special-token text in the prompt; default 0 (octo_chat: always) */
    /* Optional progress of the prompt's evaluation (called from octo_stream_next). */
    void (*on_prefill)(void *user, int done_tokens, int total_tokens);
    void *user;
    octo_spec_mode spec;    /* speculative decoding; default OCTO_SPEC_AUTO */
    int spec_k;             /* fixed draft length 1..10, for experiments: speculation then also stays on when it
                               does not pay; 0 = adaptive and switched off where it does not pay (default) */
    int spec_tree;          /* draft and self-draft: 0 = greedy passes verify a token tree, its size chosen by
                               the passes' measured cost, and sampled ones a line (default); -1 = lines; 1..31 =
                               trees of this many nodes, for experiments (kept on like spec_k); spec_k > 0: lines */
    int spec_ahead;         /* draft and self-draft with cores of their own (octo_model_options.draft_threads):
                               0 = the draft goes on drafting while the model verifies, and the next pass starts
                               from those steps when the model kept the whole line and chose the token the draft
                               guessed after it (default); -1 = never */
    /* OCTO_SPEC_LOOKAHEAD: window columns W (1..16), n-gram size N (2..6),
     * n-grams kept per first token G (1..16), a pass being 1 + (N-1)(W+1)
     * tokens at most 63; all 0 = 5, 3, 4 (default) */
    int lookahead_w, lookahead_n, lookahead_g;
    /* The share of the prompt's tokens the model reads, in (0, 1], after the draft model
     * (octo_model_options.draft_model or auto_draft) has dropped those it attends to least
     * (SpecPC); 0 = off (default), 1 reads them all. A share below 1 without a draft model is
     * an error (OCTO_ERR_INVALID_ARG). */
    float prompt_compress;
    /* Tokens the draft writes ahead to score the prompt (SpecKV, SpecPC): 1..256; 0 = 64 (default,
     * fewer when the context has less room); -1 = none, the prompt's last 32 tokens vote alone. */
    int prompt_lookahead;
    /* Constrained output (docs/structured-output.md). grammar: GBNF text (llama.cpp's format, start
     * rule `root`) the generated text follows; json_schema: a JSON schema (text) the generated text
     * validates against, turned into such a grammar. NULL = free text (default); both set is an error.
     * Tokens the grammar forbids get no probability before every other transform; end of turn comes
     * only where the text is complete. A bad grammar or an unsupported schema keyword fails
     * octo_generate with the reason. Speculation stays lossless. Read when the stream starts. */
    const char *grammar;
    const char *json_schema;
    float frequency_penalty; /* subtracted once per occurrence of a token in the penalty window; 0 = off (default) */
    /* 1: record each generated token's log-probability (octo_stream_logprob), with the top_logprobs
     * (0..OCTO_MAX_TOP_LOGPROBS) likeliest tokens at its place; speculation is then off for the
     * stream (a verify pass's rows are not kept). 0 = off (default). */
    int logprobs;
    int top_logprobs;
} octo_generate_params;

OCTO_API octo_generate_params octo_generate_params_defaults(void);

/* A prompt's prefill as octo_generate does it, on tokens: with a draft model
 * loaded, the draft's lookahead scores the prompt's cache entries (policy
 * speckv; the default policy when the prompt does not fit the KV budget:
 * SpecKV), and params->prompt_compress in (0, 1) drops the prompt tokens the
 * draft attends to least before the model reads the rest (SpecPC). Only
 * params' prompt_compress and prompt_lookahead are read (NULL: defaults).
 * logits: [n_vocab], the last token's. octo_n_past says how many positions
 * the prompt took; octo_model_stats what the draft did. */
OCTO_API octo_status octo_eval_prompt(octo_model *model, const int32_t *tokens, int n,
                                      const octo_generate_params *params, float *logits);

typedef struct octo_stream octo_stream;

typedef enum {
    OCTO_STOP_NONE = 0,         /* still running */
    OCTO_STOP_END_OF_TURN = 1,  /* the model produced EOS / end of turn */
    OCTO_STOP_MAX_TOKENS = 2,
    OCTO_STOP_CANCELLED = 3,
    OCTO_STOP_CONTEXT_FULL = 4,
    OCTO_STOP_ERROR = 5,        /* octo_stream_status / octo_stream_error say why */
} octo_stop_reason;

/* Start generating a continuation of prompt. Returns NULL on error
 * (octo_model_error says why: empty prompt, prompt longer than the context,
 * invalid parameters, model busy, ...). Nothing is computed until the first
 * octo_stream_next. */
OCTO_API octo_stream *octo_generate(octo_model *model, const char *prompt, const octo_generate_params *params);

typedef struct {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content;
} octo_message;

/* Format messages with the model's chat template (recognised families:
 * ChatML, Llama 2, Llama 3, Mistral, Phi-3, Gemma, Zephyr; anything else is a
 * plain prompt and a warning in octo_stats.warning), then generate the
 * assistant's reply. */
OCTO_API octo_stream *octo_chat(octo_model *model, const octo_message *messages, int n_messages,
                       const octo_generate_params *params);

/* How many of the oldest messages to leave out so that the chat fits the
 * context with reserve_tokens (0..OCTO_MAX_CONTEXT; 0 and 1 alike: a reply
 * needs one) left for the reply. A leading "system" message and the last
 * message always stay; the count is of those after the system message, from
 * the oldest: octo_chat(model, [system] + messages[system + count ..]) then
 * fits, and with one message fewer left out it would not. Counted on the
 * chat as octo_chat formats and tokenizes it, in a few passes over what is
 * kept (not one per message dropped). Returns the count, or a negative
 * octo_status: -OCTO_ERR_CONTEXT_FULL when the system message and the last
 * message alone do not fit (octo_model_error says by how much). */
OCTO_API int octo_chat_fit(octo_model *model, const octo_message *messages, int n_messages, int reserve_tokens);

/* The next piece of UTF-8 text, or NULL at the end. A piece never ends in the
 * middle of a character. The pointer is valid until the next call. Pieces are
 * NUL-terminated; a model that emits U+0000 puts a NUL byte inside one, so
 * code that must keep every byte uses octo_stream_piece_size. */
OCTO_API const char *octo_stream_next(octo_stream *stream);
/* Bytes of the piece the last octo_stream_next returned. */
OCTO_API int octo_stream_piece_size(const octo_stream *stream);
/* OCTO_OK unless the stream stopped on an error. */
OCTO_API octo_status octo_stream_status(const octo_stream *stream);
OCTO_API const char *octo_stream_error(const octo_stream *stream);
OCTO_API octo_stop_reason octo_stream_stop_reason(const octo_stream *stream);
/* The token id of the last piece returned (-1 before the first). */
OCTO_API int32_t octo_stream_last_token(const octo_stream *stream);
/* Every token generated so far, including those that have no text (control
 * tokens); the end-of-turn token itself is not included. Returns the count and
 * points *ids at them (valid until the next call on the stream). */
OCTO_API int octo_stream_tokens(const octo_stream *stream, const int32_t **ids);
/* A generated token's log-probability under the model: the log-softmax of its
 * raw logits at that place (before penalties, a grammar, temperature or any
 * other transform), with the top_logprobs likeliest tokens there, best first. */
#define OCTO_MAX_TOP_LOGPROBS 20
typedef struct {
    int32_t token;
    float logprob;
    int n_top;
    int32_t top_token[OCTO_MAX_TOP_LOGPROBS];
    float top_logprob[OCTO_MAX_TOP_LOGPROBS];
} octo_token_logprob;
/* Token i of octo_stream_tokens (0-based); OCTO_ERR_INVALID_ARG when i is out
 * of range or the stream was started without octo_generate_params.logprobs. */
OCTO_API octo_status octo_stream_logprob(const octo_stream *stream, int i, octo_token_logprob *out);
/* Safe from any thread: the stream stops before its next token. */
OCTO_API void octo_stream_cancel(octo_stream *stream);
/* Tokens generated so far (for progress displays); safe from any thread. */
OCTO_API int octo_stream_token_count(octo_stream *stream);
/* Frees the stream and makes the model available again. */
OCTO_API void octo_stream_free(octo_stream *stream);

/* A text's embedding: the mean over its tokens of the model's last hidden
 * state (after the final norm), unit length (docs/server.md: /v1/embeddings).
 * Writes n_embd floats to out when cap allows and returns n_embd (out NULL:
 * only returns it), or -octo_status. The conversation's cache is used and
 * left empty: the next prompt is read whole. */
OCTO_API int octo_embed(octo_model *model, const char *text, float *out, int cap);

/* ---- sessions: several conversations on one copy of the weights ----
 *
 * A model loaded with octo_model_options.max_sessions = N serves up to N
 * independent conversations: its own (the octo_model calls above) and up to
 * N - 1 sessions. Each has its own KV cache (and its draft's), within the one
 * budget, and its own stream. Sessions may be used from different threads at
 * once: their tokens are computed in turn on the model's threads. Free the
 * sessions before their model (one left open is closed with it: its calls
 * then fail). */
typedef struct octo_session octo_session;

/* NULL when all N are open or on error: octo_model_error says why. */
OCTO_API octo_session *octo_session_new(octo_model *model);
OCTO_API void octo_session_free(octo_session *session);
/* The message of the session's last failure ("" if none). */
OCTO_API const char *octo_session_error(const octo_session *session);
/* Its status (OCTO_OK if none): a session's failures are its own, never the model's. */
OCTO_API octo_status octo_session_status(const octo_session *session);
/* As octo_generate and octo_chat, in this session (one stream at a time per session). */
OCTO_API octo_stream *octo_session_generate(octo_session *session, const char *prompt,
                                            const octo_generate_params *params);
OCTO_API octo_stream *octo_session_chat(octo_session *session, const octo_message *messages, int n_messages,
                                        const octo_generate_params *params);
/* As octo_chat_fit, for this session (its error in octo_session_error): safe
 * while other sessions of the model stream. */
OCTO_API int octo_session_chat_fit(octo_session *session, const octo_message *messages, int n_messages,
                                   int reserve_tokens);
/* Forget the conversation (its cache emptied); not while it streams. */
OCTO_API void octo_session_reset(octo_session *session);
/* octo_embed in a session (its cache is used and left empty). */
OCTO_API int octo_session_embed(octo_session *session, const char *text, float *out, int cap);

/* ---- LoRA adapters: one base, many small adapters, per conversation ----
 *
 * An adapter is llama.cpp's LoRA adapter GGUF (general.type "adapter",
 * adapter.type "lora", tensors NAME.lora_a / NAME.lora_b for matrices of the
 * base, experts included; F32, F16, BF16 or Q8_0). Loaded once against a
 * model, checked against it (architecture, every tensor's name and shape,
 * finite values), it is applied beside the base's products (W·x + s·B·(A·x),
 * s = scale × alpha / rank) without touching the base: sessions of one model
 * may run different adapters at once, batched together. docs/adapters.md. */
#define OCTO_MAX_ADAPTERS 8 /* adapters one conversation runs at once */
typedef struct octo_adapter octo_adapter;

/* NULL on error: octo_model_error says why. */
OCTO_API octo_adapter *octo_adapter_load(octo_model *model, const char *path);
/* The caller's handle is given up; a conversation using it keeps it until
 * it sets others (or is freed). After its model is freed, only frees. */
OCTO_API void octo_adapter_free(octo_adapter *adapter);
typedef struct {
    int n_matrices;     /* base matrices it changes (an expert stack counts once) */
    int rank_min, rank_max;
    float alpha;        /* adapter.lora.alpha (0: the scale alone) */
    uint64_t bytes;     /* its memory (its tensors read to F32) */
} octo_adapter_info;
OCTO_API octo_adapter_info octo_adapter_info_get(const octo_adapter *adapter);
/* The adapters of the model's own conversation (octo_generate, octo_chat,
 * octo_eval ...) or of a session, from its next token on: n of them (0:
 * none, the base alone), each with its scale (scales NULL: 1 each; 0 leaves
 * the base's output bit for bit). A different set empties the
 * conversation's cache (what it holds was computed with the old one).
 * OCTO_ERR_BUSY while it streams; OCTO_ERR_INVALID_ARG for an adapter of
 * another model or freed, more than OCTO_MAX_ADAPTERS, a scale that is not finite. */
OCTO_API octo_status octo_set_adapters(octo_model *model, octo_adapter *const *adapters, const float *scales, int n);
OCTO_API octo_status octo_session_set_adapters(octo_session *session, octo_adapter *const *adapters,
                                               const float *scales, int n);

/* The callback variant: on_piece is called for each piece; returning
 * non-zero stops the generation (OCTO_STOP_CANCELLED). Returns the final status. */
OCTO_API octo_status octo_generate_cb(octo_model *model, const char *prompt, const octo_generate_params *params,
                             int (*on_piece)(void *user, const char *piece), void *user);

/* ---- learning on the device: training a LoRA adapter or a draft (docs/training.md) ----
 *
 * octo_finetune trains a new LoRA adapter of the model file at model_path
 * on a text file, a folder of them, or chat JSONL ({"messages": [...]} per
 * line: only the assistants' turns are learnt), and writes it as llama.cpp's
 * adapter GGUF (octo_adapter_load, llama.cpp's --lora); or, with full, every
 * weight of a small model, written as a whole GGUF; with distill, against a
 * target's next-token distributions (a draft for that target). The model is opened
 * for training on its own (its file's layout; any loaded octo_model is
 * untouched). Covers dense llama-family models so far; others are refused
 * by name (OCTO_ERR_UNSUPPORTED). A checkpoint is written every
 * checkpoint_every steps and when on_progress stops the run; the same call
 * again resumes from it and ends with the same adapter bytes as a run never
 * stopped. Errors: octo_last_error(client). */
typedef struct {
    int64_t step, steps;          /* steps done, all */
    double loss;                  /* this step's mean loss (nats per counted token) */
    double lr, grad_norm;         /* its learning rate; its gradient's norm before clipping */
    int64_t tokens;               /* tokens learnt from since this call started */
    double elapsed_s, tokens_per_s, eta_s;
    int64_t resumed_at;           /* the step a checkpoint gave (0: a fresh start) */
} octo_finetune_progress;

typedef struct {
    const char *data;             /* a text file, a folder of them, or a .jsonl of conversations */
    const char *valid;            /* held-out data of the same kinds: its loss before and after (NULL: none) */
    const char *output;           /* the adapter GGUF written at the end */
    const char *checkpoint;       /* NULL: OUTPUT.ckpt (removed once the adapter is written) */
    const char *targets;          /* matrices adapted, comma-separated: q,k,v,o,gate,up,down,router (NULL: the first seven; router: an MoE's) */
    const char *type;             /* the adapter's values: "f32" (default), "f16", "bf16", "q8_0" */
    int steps;                    /* optimizer steps (100) */
    int batch;                    /* sequences per step, their gradients averaged (4) */
    int seq_len;                  /* tokens per sequence (256) */
    int rank;                     /* the adapter's rank (16) */
    float alpha;                  /* scale alpha / rank (32) */
    float lr, lr_min;             /* the schedule's peak and floor (1e-3, 1e-4) */
    int warmup;                   /* steps of linear warm-up (-1: a tenth of the steps, at most 100) */
    float clip;                   /* the gradient's largest norm (1; 0: none) */
    float weight_decay;           /* AdamW's decoupled decay (0.01) */
    uint64_t seed;                /* the adapter's start and the data order (1) */
    int checkpoint_every;         /* steps between checkpoints (10) */
    int restart;                  /* non-zero: ignore an existing checkpoint */
    /* called after each step; non-zero stops (the checkpoint written, OCTO_ERR_CANCELLED) */
    int (*on_progress)(void *user, const octo_finetune_progress *progress);
    void *user;
    /* distillation: a target model of the same vocabulary; the loss is the KL divergence from its
     * next-token distributions, computed by octo's forward of it on the data (NULL: the data's
     * next tokens) */
    const char *distill;
    /* 1: train every weight and write a whole model GGUF (F32 tensors) at output; -1: an adapter;
     * 0: every weight when distilling a model of at most 64 M parameters (a draft), else an adapter */
    int full;
    /* bytes a sequence's activations may take (0: what is free when the run starts, less the trained
     * state and, to keep every activation, less the weights). Past it each layer is computed again in
     * the backward (a third more work, the same numbers); a sequence that does not fit even so is
     * refused, saying which seq_len would */
    uint64_t memory_budget;
    /* Federated learning (docs/federated.md). fl_round > 0: train round fl_round's adapter, its A
     * matrices frozen (shared by every device), and write at output an update: B's change per group,
     * an expert's only when training tokens reached it. fl_from: the global of round fl_round - 1
     * (its layout and values are the start; NULL: round 1, from the base with rank, alpha, targets and
     * seed). fl_device: this device's id in the update (NULL: a random one). */
    int fl_round;
    const char *fl_from;
    const char *fl_device;
    /* An update's differential privacy (docs/federated.md; 0, 0: off): fl_clip > 0 bounds the L2 norm of
     * its values; fl_noise > 0 (with fl_clip) adds Gaussian noise of deviation fl_noise x fl_clip to each
     * and sends every group; the result states the (epsilon, fl_delta) it gives (fl_delta 0: 1e-5). */
    float fl_clip, fl_noise, fl_delta;
} octo_finetune_params;

typedef struct {
    int64_t resumed_at, steps_run;        /* where this call started; steps it took */
    double first_loss, last_loss;         /* its first and last steps' losses */
    double valid_before, valid_after;     /* held-out mean losses (NAN: no held-out data; before: not on a resume) */
    double seconds;
    int64_t sequences, tokens, counted;   /* the training data: sequences, tokens, positions whose next token is learnt */
    int conversations, conversations_cut; /* chat data: conversations, and those longer than seq_len (cut) */
    int n_matrices;                       /* matrices the adapter changes (full: tensors trained) */
    uint64_t adapter_values;              /* its trained values (full: the weights') */
    int full;                             /* 1: output is a whole model, every weight trained */
    int recompute;                        /* 1: each layer computed again in the backward (the budget asked) */
    uint64_t activation_bytes;            /* a longest sequence's activations (and a teacher's distributions) */
    uint64_t memory_budget;               /* the budget they were held to (0: none known) */
    int64_t pressed;                      /* sequences computed again because memory was pressed */
    /* A mixture of experts: its layers' experts (n_layer x n_expert), and how many of them any training
     * token reached. The others are unchanged, bit for bit; the output's "training.expert_tokens" (i32,
     * layer by layer) holds each one's tokens. 0, 0 for a dense model. */
    int experts, experts_reached;
    /* The threads training ran on at its end (followed before each sequence: a CPU quota or heat takes
     * some, their return gives them back; 0: one thread, none followed), and how often that changed. */
    int threads, thread_changes;
    /* An update (fl_round): the adapter's groups (matrices; an expert of a stack each), those sent, and
     * the bytes of their values against a dense update's (every group). */
    int fl_groups, fl_groups_sent;
    uint64_t fl_bytes, fl_dense_bytes;
    /* Its norm before any clipping; with noise, the epsilon of (epsilon, fl_delta)-DP of this round, and of
     * fl_round rounds of this device (INFINITY without noise). */
    double fl_norm, fl_epsilon, fl_epsilon_rounds;
} octo_finetune_result;

OCTO_API octo_finetune_params octo_finetune_params_defaults(void);
/* result may be NULL. */
OCTO_API octo_status octo_finetune(octo_client *client, const char *model_path, const octo_finetune_params *params,
                                   octo_finetune_result *result);

/* Federated averaging (docs/federated.md): the updates of one round, each group averaged over the
 * updates that hold it weighted by their tokens for it, into the round's global adapter (it loads as any
 * adapter does, and is the next round's fl_from), or with partial into an aggregate: an update of the
 * same means, their weights and every device, which averages with others as its updates would. Every
 * update is checked (round, base, layout, shapes, values, token counts, no device twice) before
 * anything is written. */
typedef struct {
    const char *from;             /* the previous round's global (NULL: round 1) */
    const char *const *updates;   /* the updates (or aggregates) of the round */
    int n_updates;
    const char *output;
    int partial;                  /* non-zero: write an aggregate, not the global */
} octo_fedavg_params;

typedef struct {
    int round, devices;           /* the round; the devices behind the updates */
    uint64_t tokens;              /* their training tokens */
    int groups, groups_sent;      /* the adapter's groups; those some update held */
    double seconds;
} octo_fedavg_result;

/* result may be NULL. */
OCTO_API octo_status octo_fedavg(octo_client *client, const char *base_model, const octo_fedavg_params *params,
                                 octo_fedavg_result *result);

/* ---- statistics ---- */

/*
 * OCTO_STATS: every statistic, one line each, in the order of octo_stats's
 * fields, by section (the generation, the KV cache, its spill file,
 * speculation, experts, memory, the prompt read with the draft, memory given
 * back, token latency). The struct below is made from it, and so are the
 * figures octo's own tools print (the
 * run --stats --json object, bench --json, eval --json, the server's `octo`
 * object) and the Python binding's field list is checked against it. Adding a
 * statistic is one line here and the code that counts it (docs/architecture.md).
 *
 *   NUM(group, type, name, unit, run, bench, eval, serve, description)   a number
 *   TEXT(group, size, name, unit, run, bench, eval, serve, description)  char name[size]
 *
 * run, bench, eval and serve say where the tool of that name shows the figure:
 * (0) not at all, else (position [, format [, key]]): its place in that
 * tool's JSON object (eval: 1-99 before its own cache figures, 100-199
 * after), the printf format of a double ("" or absent for other types), and
 * the key when it is not the name.
 */
#define OCTO_STATS(NUM, TEXT) \
    /* the last (or current) generation */ \
    NUM(gen, int, prompt_tokens, "tokens", (1), (0), (0), (0), "tokens of the prompt") \
    NUM(gen, int, prefill_tokens, "tokens", (2), (0), (0), (0), "of those, evaluated (the rest were already cached)") \
    NUM(gen, double, prefill_ms, "ms", (3, "%.3f"), (0), (100, "%.3f"), (0), "time evaluating the prompt") \
    NUM(gen, double, prefill_tokens_per_s, "tokens/s", (4, "%.3f"), (0), (0), (1), "0 when nothing was evaluated") \
    NUM(gen, int, decode_tokens, "tokens", (5), (0), (0), (0), "tokens generated") \
    NUM(gen, double, decode_ms, "ms", (6, "%.3f"), (0), (0), (0), "time generating them") \
    NUM(gen, double, decode_tokens_per_s, "tokens/s", (7, "%.3f"), (0), (0), (2), "0 before the second token") \
    NUM(gen, double, time_to_first_token_ms, "ms", (8, "%.3f"), (0), (0), (3), "from the call to the first token") \
    /* context and KV cache */ \
    NUM(kv, int, context_tokens, "tokens", (9), (0), (0), (9), "tokens in the KV cache now") \
    NUM(kv, int, context_size, "tokens", (10), (0), (0), (0), "tokens it can hold") \
    NUM(kv, uint64_t, kv_bytes, "bytes", (11), (0), (0), (6), "bytes the cache holds resident: whole 64-entry blocks, page-rounded, with their bookkeeping; what the budget bounds (the draft model's cache included: one budget)") \
    NUM(kv, uint64_t, kv_draft_bytes, "bytes", (0), (0), (0), (0), "of those, the draft model's") \
    NUM(kv, uint64_t, kv_budget_bytes, "bytes", (12), (0), (0), (7), "bytes the caches may use (without a budget: their full size at kv_type)") \
    NUM(kv, double, kv_cache_utilization, "share", (0), (0), (0), (0), "kv_bytes / kv_budget_bytes, 0..1") \
    NUM(kv, uint64_t, kv_bytes_hot, "bytes", (0), (0), (0), (0), "by tier: F16 (or kv_type), both caches") \
    NUM(kv, uint64_t, kv_bytes_warm, "bytes", (0), (0), (0), (0), "by tier: INT8, both caches") \
    NUM(kv, uint64_t, kv_bytes_cold, "bytes", (0), (0), (0), (0), "by tier: INT4, both caches") \
    NUM(kv, int64_t, kv_tokens_retained, "tokens", (0), (0), (0), (0), "entries the model's cache holds per layer") \
    NUM(kv, int64_t, kv_tokens_evicted, "tokens", (13), (0), (0), (8), "entries evicted per layer so far") \
    TEXT(kv, 12, kv_policy, "name", (14), (0), (0), (0), "the eviction policy: \"morphkv\", ...") \
    /* KV spill (when on); each failure degrades to eviction */ \
    NUM(spill, int, kv_spill_on, "flag", (0), (0), (1, "", "spill"), (0), "1: cold blocks go to a spill file") \
    NUM(spill, int64_t, kv_blocks_spilled, "blocks", (0), (0), (2, "", "blocks_spilled"), (0), "blocks on file now") \
    NUM(spill, int64_t, kv_spill_writes, "blocks", (0), (0), (3, "", "spill_writes"), (0), "blocks written") \
    NUM(spill, int64_t, kv_spill_clean, "blocks", (0), (0), (0), (0), "blocks re-spilled with no write (still on file)") \
    NUM(spill, int64_t, kv_spill_reads, "blocks", (0), (0), (4, "", "spill_reads"), (0), "blocks read back") \
    NUM(spill, int64_t, kv_spill_hits, "blocks", (0), (0), (0), (0), "of those, hits: the block read held a key the query scored above every key of the block it displaced") \
    NUM(spill, int64_t, kv_spill_errors, "count", (0), (0), (7, "", "spill_errors"), (0), "failures, each degraded to eviction") \
    NUM(spill, int64_t, kv_spill_prefetched, "blocks", (0), (0), (0), (0), "reads that found their block read ahead in the background") \
    NUM(spill, double, kv_spill_read_us, "us", (0), (0), (6, "%.2f", "spill_read_us"), (0), "average read latency") \
    NUM(spill, double, kv_spill_hit_rate, "share", (0), (0), (5, "%.4f", "spill_hit_rate"), (0), "hits / reads, 0 before the first read") \
    NUM(spill, uint64_t, kv_spill_file_bytes, "bytes", (0), (0), (0), (0), "the spill file's size") \
    TEXT(spill, 160, kv_spill_note, "text", (0), (0), (0), (0), "the last failure") \
    /* speculation: -1 when it is off or does not apply */ \
    NUM(spec, double, speculative_acceptance_rate, "share", (26, "%.4f"), (0), (0), (5, "", "spec_acceptance_rate"), "accepted / proposed draft tokens") \
    NUM(spec, int, spec_proposed, "tokens", (16), (0), (0), (0), "draft tokens of the last generation") \
    NUM(spec, int, spec_accepted, "tokens", (17), (0), (0), (0), "of those, accepted") \
    NUM(spec, int, spec_steps, "passes", (18), (0), (0), (0), "its verify passes") \
    NUM(spec, int, spec_k, "tokens", (19), (0), (0), (0), "its draft length, or its last tree's nodes, at the end (0: off)") \
    NUM(spec, int, spec_tree_passes, "passes", (20), (0), (0), (0), "verify passes of token trees (spec_proposed counts their nodes)") \
    NUM(spec, int, spec_off_line, "passes", (21), (0), (0), (0), "of those, passes that kept a path other than the tree's first line") \
    NUM(spec, int, spec_ahead_used, "steps", (22), (0), (0), (0), "draft steps run while the model verified, used by the next pass") \
    NUM(spec, int, spec_ahead_dropped, "steps", (23), (0), (0), (0), "... and not (the model did not keep the line or chose another token after it, or the next pass needed fewer)") \
    NUM(spec, double, spec_ms, "ms", (25, "%.3f"), (0), (0), (0), "time in speculative steps, proposing and verifying") \
    NUM(spec, double, spec_draft_ms, "ms", (24, "%.3f"), (0), (0), (0), "of spec_ms, the time proposing (the draft's steps, a lookup)") \
    TEXT(spec, 12, spec_proposer, "name", (15), (0), (0), (4), "\"ngram\", \"draft\", \"self\", \"lookahead\" or \"none\"") \
    NUM(spec, int, lookahead_ngrams, "n-grams", (0), (0), (0), (0), "lookahead: n-grams its window made") \
    NUM(spec, int, lookahead_new, "n-grams", (0), (0), (0), (0), "of those, new to its pool") \
    NUM(spec, int, lookahead_pool_proposed, "tokens", (0), (0), (0), (0), "drafts taken from that pool (the rest are prompt lookup's)") \
    NUM(spec, int, lookahead_pool_accepted, "tokens", (0), (0), (0), (0), "of those, accepted") \
    TEXT(spec, 96, spec_note, "text", (0), (0), (0), (0), "why speculation stopped, e.g. \"off: 12.1 ms/token verified vs 9.8 plain\"") \
    /* MoE (since the load): -1 / 0 for a dense model */ \
    NUM(experts, double, expert_cache_hit_rate, "share", (27, "%.4f"), (1, "%.4f"), (8, "%.6f"), (0), "expert lookups served from memory by a budgeted expert cache; -1 while there is none (every expert is read from the file's mapping)") \
    NUM(experts, uint64_t, expert_lookups, "experts", (0), (0), (0), (0), "experts the forward passes fetched (one per expert and batch)") \
    NUM(experts, uint64_t, expert_bytes_read, "bytes", (28), (0), (0), (0), "read from the model file into the expert cache") \
    NUM(experts, double, expert_stall_ms, "ms", (0), (0), (0), (0), "time the forward passes waited on those reads") \
    NUM(experts, uint64_t, expert_cache_bytes, "bytes", (0), (7), (11), (0), "memory the cache's slots hold now") \
    NUM(experts, uint64_t, expert_cache_capacity, "bytes", (0), (0), (0), (0), "... when all its slots are in use") \
    NUM(experts, uint64_t, expert_bytes, "bytes", (0), (0), (0), (0), "all the model's experts") \
    NUM(experts, double, expert_prediction_rate, "share", (0), (3, "%.4f"), (13, "%.4f"), (0), "of the experts tokens were routed to, the share the next-layer prediction (the layer's router applied to the layer before) had named; -1: none") \
    NUM(experts, double, expert_prediction_precision, "share", (0), (4, "%.4f"), (14, "%.4f"), (0), "of the experts the prediction named, the share then routed to; -1: none") \
    NUM(experts, double, expert_prefetch_recall, "share", (0), (2, "%.4f"), (12, "%.4f"), (0), "of the lookups that had to come from the file, the share a read-ahead had brought in time; -1: no read-ahead") \
    NUM(experts, uint64_t, expert_prefetched, "experts", (0), (0), (0), (0), "experts read ahead") \
    NUM(experts, double, expert_readahead_share, "share", (0), (0), (0), (0), "of the decode passes, the share that read predicted experts ahead; -1: none") \
    NUM(experts, uint64_t, expert_tokens, "tokens", (0), (0), (0), (0), "tokens that went through the MoE layers (the per-token figures' divisor)") \
    NUM(experts, double, expert_batch_saved_bytes_per_token, "bytes", (0), (11, "%.0f"), (0), (0), "of tokens fed several at once (prefill, speculative verification): expert bytes not fetched per token because a batch fetches each expert once for all its tokens; -1: no such batch yet") \
    NUM(experts, double, expert_bytes_read_per_token, "bytes", (0), (5, "%.0f"), (9, "%.0f"), (0), "expert_bytes_read / expert_tokens") \
    NUM(experts, double, expert_stall_ms_per_token, "ms", (0), (6, "%.4f"), (10, "%.4f"), (0), "expert_stall_ms / expert_tokens") \
    NUM(experts, int, expert_trace_failed, "flag", (0), (0), (0), (0), "1: --moe-trace's file could not be written whole") \
    NUM(experts, uint64_t, expert_int2_loads, "experts", (0), (8), (15), (0), "2-bit copies read on a miss") \
    NUM(experts, uint64_t, expert_int2_served, "lookups", (0), (9), (16), (0), "lookups a 2-bit copy served") \
    NUM(experts, uint64_t, expert_int2_promotions, "experts", (0), (10), (17), (0), "copies replaced by the whole expert after they were used again") \
    NUM(experts, uint64_t, expert_int2_errors, "experts", (0), (0), (0), (0), "copies that failed their check (read whole instead; copies then off)") \
    /* process memory (0 where the system does not report it); PSS, which \
     * costs a walk of the page tables, is in octo_memory_usage() */ \
    NUM(memory, uint64_t, rss_bytes, "bytes", (29), (0), (0), (0), "resident now") \
    NUM(memory, uint64_t, peak_rss_bytes, "bytes", (30), (0), (0), (0), "resident at the most") \
    TEXT(model, 16, chat_template, "name", (31), (0), (0), (0), "the chat template family in use (\"plain\" when none matched)") \
    TEXT(model, 160, warning, "text", (0), (0), (0), (0), "\"\" or a problem worth showing, e.g. an unknown chat template") \
    /* the prompt read with the draft model (octo_eval_prompt, octo_generate): SpecKV, SpecPC */ \
    NUM(prefill, int, prefill_speckv, "flag", (32), (0), (101, "", "speckv"), (0), "1: the prompt's entries were kept by the votes of the draft's lookahead") \
    NUM(prefill, int, prefill_lookahead_tokens, "tokens", (33), (0), (102, "", "lookahead_tokens"), (0), "tokens the draft wrote ahead") \
    NUM(prefill, double, prefill_draft_ms, "ms", (34, "%.3f"), (0), (103, "%.3f", "draft_ms"), (0), "the draft's time: reading the prompt, writing the lookahead") \
    NUM(prefill, int64_t, kv_tokens_kept_by_score, "tokens", (0), (0), (104, "", "kept_by_score"), (0), "prompt entries per layer kept by their votes (not anchors or recent)") \
    NUM(prefill, int, prompt_tokens_dropped, "tokens", (35), (0), (105, "", "prompt_dropped"), (0), "prompt tokens SpecPC dropped before the model read the rest") \
    NUM(prefill, double, prefill_ms_saved, "ms", (0), (0), (106, "%.3f"), (0), "SpecPC, estimated: the model's prefill time per token x tokens dropped, less the draft's time") \
    /* memory given back under pressure and taken again (docs/adaptation.md) */ \
    NUM(adapt, int, mem_level, "level", (36), (12), (0), (10), "the memory level in force: 0 none, 1 low, 2 moderate, 3 critical (octo_trim_level)") \
    NUM(adapt, int, mem_trims, "count", (37), (13), (0), (11), "times the level rose: memory given back") \
    NUM(adapt, int, mem_regrows, "count", (38), (14), (0), (0), "times it fell: memory taken again") \
    NUM(adapt, int, mem_pressure_events, "count", (39), (15), (0), (12), "times the memory watcher saw pressure begin") \
    NUM(adapt, uint64_t, mem_released_weights_bytes, "bytes", (40), (16), (0), (0), "packed weights given back to the file's pages, summed over trims") \
    NUM(adapt, uint64_t, mem_released_draft_bytes, "bytes", (41), (0), (0), (0), "a self-draft copy dropped") \
    NUM(adapt, uint64_t, mem_released_experts_bytes, "bytes", (42), (17), (0), (0), "expert cache memory given back, summed") \
    NUM(adapt, uint64_t, mem_released_kv_bytes, "bytes", (43), (18), (0), (0), "KV cache memory given back (entries evicted to the floor), summed") \
    NUM(adapt, uint64_t, weights_packed_bytes, "bytes", (44), (19), (0), (0), "weights in the packed layout now, in private memory (0: all read from the file's mapping)") \
    NUM(adapt, uint64_t, mem_room_bytes, "bytes", (45), (0), (0), (0), "memory the process could still get, reclaimable file pages counted, when last read") \
    NUM(adapt, uint64_t, adapter_bytes, "bytes", (64), (0), (0), (0), "LoRA adapters' memory now (those loaded and not dropped)") \
    NUM(adapt, uint64_t, mem_released_adapter_bytes, "bytes", (65), (0), (0), (0), "adapters no conversation used, dropped under pressure (read again when set), summed") \
    TEXT(adapt, 384, mem_watch, "text", (46), (0), (0), (0), "the memory watcher: the signals it follows, or off and why") \
    TEXT(adapt, 200, mem_note, "text", (47), (0), (0), (0), "the last change of level and why, or what waits") \
    /* token latency of the last generation (bench: of its decode runs). A token's \
     * latency is the decode work it waited for since the token before it: the \
     * plain pass that computed its logits, or the whole speculative step \
     * (proposing, verifying) that delivered it; the pass's other accepted tokens \
     * come with it at 0 ms, the burst an app receives. Not counted: the first \
     * token (time_to_first_token_ms), sampling and detokenizing (as decode_ms), \
     * the app's time between calls. Percentiles are nearest-rank over every \
     * token: the sample of rank ceil(p n / 100) in ascending order. -1: unknown \
     * (fewer than 2 tokens, or no memory to keep the samples) */ \
    NUM(latency, int, decode_latency_tokens, "tokens", (48), (20), (0), (0), "tokens the latency figures are over: decode_tokens - 1 (0: unknown)") \
    NUM(latency, double, decode_latency_p50_ms, "ms", (49, "%.3f"), (21, "%.3f"), (0), (13), "median token latency") \
    NUM(latency, double, decode_latency_p90_ms, "ms", (50, "%.3f"), (22, "%.3f"), (0), (14), "90th percentile") \
    NUM(latency, double, decode_latency_p95_ms, "ms", (51, "%.3f"), (23, "%.3f"), (0), (15), "95th percentile") \
    NUM(latency, double, decode_latency_p99_ms, "ms", (52, "%.3f"), (24, "%.3f"), (0), (16), "99th percentile") \
    NUM(latency, double, decode_latency_max_ms, "ms", (53, "%.3f"), (25, "%.3f"), (0), (17), "the longest a token waited") \
    NUM(latency, double, decode_latency_cv, "ratio", (54, "%.4f"), (26, "%.4f"), (0), (18), "the spread: standard deviation of the token latencies over their mean (population, divided by n); 0 steady, about 1.4 for a pass of 8 ms delivering 3 tokens each time; -1 unknown or a mean of 0") \
    /* the CPU the process really has, and the threads octo computes on for it \
     * (runtime/cpu_adapt.h): re-read between tokens while it runs */ \
    NUM(cpu, int, cpu_threads, "threads", (55), (27), (0), (19), "threads the model computes on now") \
    NUM(cpu, double, cpu_effective, "cpus", (56, "%.2f"), (28, "%.2f"), (0), (20), "CPUs the process may use, last read: a cgroup quota or the allowed cores, the lesser (0: unknown)") \
    NUM(cpu, int, cpu_changes, "count", (57), (29), (0), (0), "times the thread count changed while running") \
    NUM(cpu, int, cpu_probes, "count", (58), (30), (0), (0), "measured probes: a few decode steps on one thread fewer or more, to find a slowdown the files do not show") \
    NUM(cpu, int, cpu_spin, "rounds", (59), (31), (0), (0), "how long an idle worker spins for the next job before it sleeps: short while a CPU quota is under the threads") \
    NUM(cpu, int, cpu_paced, "tokens", (60), (32), (0), (0), "tokens that waited so that a CPU quota's budget is spent evenly, not in a burst then a gap") \
    TEXT(cpu, 400, cpu_note, "text", (61), (0), (0), (0), "the thread count in force and why") \
    TEXT(cpu, 160, cpu_hint, "text", (62), (0), (0), (0), "the performance hint of the last generation: its target a token and state, or why there is none") \
    TEXT(cpu, 96, cpu_kernels, "text", (63), (33), (0), (0), "the kernels in use: the path, and which kernels read the packed layout, e.g. \"avx2; packed q4_0 q8_0 q4_K: avx2\"") \
    /* continuous batching (runtime/batch.h): sessions that step together in \
     * one forward pass; the last generation's share, then the model's */ \
    NUM(batch, int, batch_steps, "count", (0), (0), (0), (21), "passes the last generation shared with other sessions") \
    NUM(batch, double, batch_mean, "sessions", (0), (0), (0), (22), "the mean sessions in those passes (0: none shared)") \
    NUM(batch, int64_t, batch_model_steps, "count", (0), (0), (0), (0), "shared steps the model ran, every session's") \
    NUM(batch, double, batch_model_mean, "sessions", (0), (0), (0), (0), "their mean sessions (0: none yet)") \
    NUM(batch, int, batch_model_max, "sessions", (0), (0), (0), (0), "the largest") \
    NUM(batch, int, batch_model_last, "sessions", (0), (0), (0), (0), "the last one's") \
    NUM(batch, int64_t, batch_model_prompt_rows, "tokens", (0), (0), (0), (0), "prompt tokens read in shared steps, beside other sessions' decoding") \
    NUM(batch, int64_t, batch_model_verify, "count", (0), (0), (0), (0), "speculative verify passes that went into shared steps, where they paid for the rows every session waits for") \
    NUM(batch, int64_t, batch_model_retried, "count", (0), (0), (0), (0), "shared steps whose pass failed and ran again one session at a time")

#define OCTO_STATS_FIELD_(group, type, name, ...) type name;
#define OCTO_STATS_TEXT_(group, size, name, ...) char name[size];
typedef struct {
    OCTO_STATS(OCTO_STATS_FIELD_, OCTO_STATS_TEXT_)
} octo_stats;
#undef OCTO_STATS_FIELD_
#undef OCTO_STATS_TEXT_

OCTO_API octo_stats octo_model_stats(const octo_model *model);
/* The same for a session: its generation, its caches (the model's figures for the rest). */
OCTO_API octo_stats octo_session_stats(const octo_session *session);

/* ---- process ---- */

typedef struct {
    uint64_t rss_bytes, peak_rss_bytes, pss_bytes; /* 0 where the system does not say */
} octo_memory;

OCTO_API octo_memory octo_memory_usage(void);

/* The machine's memory read bandwidth in GB/s, measured now by streaming
 * `bytes` (0 = 1 GiB) with n_threads threads (0 = default): the roofline that
 * decode speed is judged against. Returns 0 and fills nothing on failure. */
OCTO_API double octo_measure_read_bandwidth(int n_threads, uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif
