/*
 * octo_jni — the JNI glue under the Java package dev.octo (bindings/jvm):
 * each native method of dev.octo.Native is one call of include/octo.h.
 *
 * Text crosses as UTF-8 byte arrays, never through JNI's modified UTF-8
 * (which writes a supplementary character as two surrogates and a NUL as two
 * bytes). A failure throws dev.octo.OctoException with octo's status and
 * message and returns 0/NULL; the Java side checks nothing twice. Handles
 * are the C pointers as jlong, held only inside the Java objects' private
 * state (dev.octo.Model.State, Stream.State), never handed to a caller.
 */
#include <jni.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "octo.h"

/* JNI 1.6: the newest version Android's runtime (ART) accepts, and all this file needs. */
#define OCTO_JNI_VERSION JNI_VERSION_1_6

static jclass octo_exception, stats_class, byte_array; /* global references, made in JNI_OnLoad */
static jmethodID octo_exception_init, stats_of;

/* A global reference to the class called name; NULL with an exception pending. */
static jclass global_class(JNIEnv *env, const char *name) {
    jclass c = (*env)->FindClass(env, name);
    if (!c) return NULL;
    jclass g = (*env)->NewGlobalRef(env, c);
    (*env)->DeleteLocalRef(env, c);
    return g;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    (void)reserved;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **)&env, OCTO_JNI_VERSION) != JNI_OK) return JNI_ERR;
    if (!(octo_exception = global_class(env, "dev/octo/OctoException")) ||
        !(octo_exception_init = (*env)->GetMethodID(env, octo_exception, "<init>", "(I[B)V")) ||
        !(stats_class = global_class(env, "dev/octo/Stats")) ||
        !(stats_of = (*env)->GetStaticMethodID(env, stats_class, "of", "([J[D[[B)Ldev/octo/Stats;")) ||
        !(byte_array = global_class(env, "[B")))
        return JNI_ERR;
    return OCTO_JNI_VERSION;
}

/* A Java byte[] holding the n bytes at s; NULL with OutOfMemoryError pending. */
static jbyteArray new_bytes(JNIEnv *env, const char *s, size_t n) {
    jbyteArray b = (*env)->NewByteArray(env, (jsize)n);
    if (b) (*env)->SetByteArrayRegion(env, b, 0, (jsize)n, (const jbyte *)s);
    return b;
}

/* Throw OctoException(status, message), the message as UTF-8 bytes (octo's messages quote paths
 * and names, which JNI's modified UTF-8 would garble); returns 0 for the caller's return. */
static jlong throw_octo(JNIEnv *env, int status, const char *message) {
    if ((*env)->ExceptionCheck(env)) return 0; /* one already pending: it stands */
    message = message ? message : "";
    jbyteArray m = new_bytes(env, message, strlen(message));
    if (!m) return 0; /* OutOfMemoryError pending */
    jobject e = (*env)->NewObject(env, octo_exception, octo_exception_init, (jint)status, m);
    if (e) (*env)->Throw(env, (jthrowable)e);
    (*env)->DeleteLocalRef(env, m);
    if (e) (*env)->DeleteLocalRef(env, e);
    return 0;
}

/* An optional string: NULL for a null array, else c_string's; *ok false when an exception is
 * pending (then no further JNI call may be made). */
static char *c_optional(JNIEnv *env, jbyteArray bytes, int *ok);

/* A Java byte[] of UTF-8 as a NUL-terminated C string (malloc'd); NULL with an exception pending. */
static char *c_string(JNIEnv *env, jbyteArray bytes) {
    if (!bytes) return throw_octo(env, OCTO_ERR_INVALID_ARG, "a null string"), NULL;
    const jsize n = (*env)->GetArrayLength(env, bytes);
    char *s = malloc((size_t)n + 1);
    if (!s) return throw_octo(env, OCTO_ERR_NOMEM, "out of memory"), NULL;
    (*env)->GetByteArrayRegion(env, bytes, 0, n, (jbyte *)s);
    s[n] = '\0';
    if (memchr(s, '\0', (size_t)n)) {
        free(s);
        return throw_octo(env, OCTO_ERR_INVALID_ARG, "a string with a NUL character, where C would end it"), NULL;
    }
    return s;
}

static char *c_optional(JNIEnv *env, jbyteArray bytes, int *ok) {
    if (!*ok || !bytes) return NULL;
    char *s = c_string(env, bytes);
    if (!s) *ok = 0;
    return s;
}

/* The Builder's strings, in this order (text_fields). */
enum { T_DRAFT, T_DEVICE, T_CACHE_DIR, T_KV_POLICY, T_MOE_POLICY, T_MOE_TRACE, T_COUNT };

typedef struct {
    octo_client *client;
    octo_model *model;
    JavaVM *vm;
    jobject log_sink; /* a global reference to Builder.logSink (a Native.LogSink), or NULL */
    jmethodID log_message;
    char *texts[T_COUNT]; /* the Builder's strings, kept as long as octo may read them */
    atomic_int closing;   /* set by stopEach: a callback generation stops before its next piece */
} jni_model;

/* octo_client_options.log: the message to the app's Model.Log. octo calls it on the thread that
 * caused the message; one the JVM does not know is attached for the call, then detached. A Java
 * exception pending on the thread stands (the message is dropped); one the sink throws is cleared:
 * a log message cannot stop octo, and octo's next JNI call must not run with it pending. */
static void on_log(void *user, octo_log_level level, const char *message) {
    const jni_model *jm = user;
    JNIEnv *env = NULL;
    const jint got = (*jm->vm)->GetEnv(jm->vm, (void **)&env, OCTO_JNI_VERSION);
    if (got == JNI_EDETACHED ? (*jm->vm)->AttachCurrentThreadAsDaemon(jm->vm, (void **)&env, NULL) != JNI_OK
                             : got != JNI_OK)
        return;
    if (!(*env)->ExceptionCheck(env)) {
        jbyteArray b = new_bytes(env, message, strlen(message));
        if (b) (*env)->CallVoidMethod(env, jm->log_sink, jm->log_message, (jint)level, b);
        if (b) (*env)->DeleteLocalRef(env, b);
        if ((*env)->ExceptionCheck(env)) (*env)->ExceptionClear(env);
    }
    if (got == JNI_EDETACHED) (*jm->vm)->DetachCurrentThread(jm->vm);
}

/* jm's log sink from b's field logSink (none when null); 0 with an exception pending. */
static int take_log_sink(JNIEnv *env, jobject b, jclass bc, jni_model *jm) {
    jfieldID f = (*env)->GetFieldID(env, bc, "logSink", "Ldev/octo/Native$LogSink;");
    jobject sink = f ? (*env)->GetObjectField(env, b, f) : NULL;
    if (!sink) return !(*env)->ExceptionCheck(env);
    jclass sc = (*env)->GetObjectClass(env, sink);
    jm->log_message = sc ? (*env)->GetMethodID(env, sc, "message", "(I[B)V") : NULL;
    if (sc) (*env)->DeleteLocalRef(env, sc);
    if (jm->log_message && (*env)->GetJavaVM(env, &jm->vm) == JNI_OK) jm->log_sink = (*env)->NewGlobalRef(env, sink);
    (*env)->DeleteLocalRef(env, sink);
    if (!jm->log_sink && !(*env)->ExceptionCheck(env)) throw_octo(env, OCTO_ERR_NOMEM, "out of memory");
    return jm->log_sink != NULL;
}

/* Frees what load_with made (NULL is ignored): the model, then its client, then the log sink
 * neither can call any more. */
static void free_model(JNIEnv *env, jni_model *jm) {
    if (!jm) return;
    octo_model_free(jm->model);
    octo_client_free(jm->client);
    if (jm->log_sink) (*env)->DeleteGlobalRef(env, jm->log_sink);
    for (int i = 0; i < T_COUNT; i++) free(jm->texts[i]);
    free(jm);
}

/* Model.Builder's fields and where each goes in octo_model_options: a number the app set
 * replaces octo's default; one it did not set holds Builder.UNSET (Integer/Long.MIN_VALUE, NaN),
 * so every default stays octo's own (octo_model_options_defaults). */
static const struct {
    const char *field;
    char type; /* 'I' int, 'J' uint64_t, 'D' double */
    size_t offset;
} model_fields[] = {
/* each entry's size checked at compile time: a member of another size (a renamed or retyped field)
 * is an array of size -1 */
#define SIZE_OF(type) ((type) == 'I' ? sizeof(int) : (type) == 'J' ? sizeof(uint64_t) : sizeof(double))
#define F(field, type, member)                                                                  \
    {field, type,                                                                               \
     offsetof(octo_model_options, member) +                                                     \
         0 * sizeof(char[sizeof(((octo_model_options *)0)->member) == SIZE_OF(type) ? 1 : -1])}
    F("nCtx", 'I', n_ctx),
    F("maxSessions", 'I', max_sessions),
    F("autoDraft", 'I', auto_draft),
    F("draftThreads", 'I', draft_threads),
    F("memoryWatch", 'I', memory_watch),
    F("planOnly", 'I', plan_only),
    F("vocabOnly", 'I', vocab_only),
    F("kvCompress", 'I', kv.compress),
    F("kvHotTokens", 'I', kv.hot_tokens),
    F("kvWarmTokens", 'I', kv.warm_tokens),
    F("kvAnchorTokens", 'I', kv.anchor_tokens),
    F("kvRecentTokens", 'I', kv.recent_tokens),
    F("kvColdBits", 'I', kv.cold_bits),
    F("kvColdSymmetric", 'I', kv.cold_symmetric),
    F("kvPerTokenKeys", 'I', kv.per_token_keys),
    F("kvSpill", 'I', kv.spill),
    F("kvBudgetTokens", 'I', kv.budget_tokens),
    F("kvBudgetBytes", 'J', kv.budget_bytes),
    F("kvSpillMaxBytes", 'J', kv.spill_max_bytes),
    F("moeCacheBytes", 'J', moe.cache_bytes),
    F("moeCacheShare", 'D', moe.cache_share),
    F("moePredictMargin", 'D', moe.predict_margin),
#undef F
#undef SIZE_OF
};

/* The number fields into mo; 0 with an exception pending (a field renamed on one side only). */
static int read_numbers(JNIEnv *env, jobject b, jclass bc, octo_model_options *mo) {
    for (size_t i = 0; i < sizeof model_fields / sizeof model_fields[0]; i++) {
        const char sig[2] = {model_fields[i].type, '\0'};
        jfieldID f = (*env)->GetFieldID(env, bc, model_fields[i].field, sig);
        if (!f) return 0;
        char *at = (char *)mo + model_fields[i].offset;
        if (sig[0] == 'I') {
            const jint v = (*env)->GetIntField(env, b, f);
            if (v != INT32_MIN) *(int *)at = v;
        } else if (sig[0] == 'J') {
            const jlong v = (*env)->GetLongField(env, b, f);
            if (v != INT64_MIN) *(uint64_t *)at = (uint64_t)v;
        } else {
            const jdouble v = (*env)->GetDoubleField(env, b, f);
            if (v == v) *(double *)at = v;
        }
    }
    return 1;
}

/* An int field of b; INT32_MIN (unset) when there is none (NoSuchFieldError pending) or an
 * exception is pending already. */
static jint int_field(JNIEnv *env, jobject b, jclass bc, const char *name) {
    if ((*env)->ExceptionCheck(env)) return INT32_MIN;
    jfieldID f = (*env)->GetFieldID(env, bc, name, "I");
    return f ? (*env)->GetIntField(env, b, f) : INT32_MIN;
}

/* "default, none, window, ...": every KV policy's name, for a message. */
static void kv_policy_names(char *out, size_t cap) {
    size_t n = (size_t)snprintf(out, cap, "default");
    for (int p = OCTO_KV_POLICY_NONE; n < cap && octo_kv_policy_name((octo_kv_policy)p); p++)
        n += (size_t)snprintf(out + n, cap - n, ", %s", octo_kv_policy_name((octo_kv_policy)p));
}

/* The enumerations, which Builder holds as octo.h's numbers (its enums' ordinals) or names. */
static int read_choices(JNIEnv *env, jobject b, jclass bc, octo_model_options *mo, const char *kv_policy,
                        const char *moe_policy) {
    const jint kv_type = int_field(env, b, bc, "kvType");
    const jint prefetch = int_field(env, b, bc, "moePrefetch"), int2 = int_field(env, b, bc, "moeInt2");
    if ((*env)->ExceptionCheck(env)) return 0;
    if (kv_type != INT32_MIN) mo->kv_type = (octo_kv_type)kv_type;
    if (prefetch != INT32_MIN) mo->moe.prefetch = (octo_moe_prefetch)prefetch;
    if (int2 != INT32_MIN) mo->moe.int2 = (octo_moe_int2)int2;
    char why[256], names[160];
    if (kv_policy && octo_kv_policy_from_name(kv_policy) < 0) {
        kv_policy_names(names, sizeof names);
        snprintf(why, sizeof why, "unknown KV policy '%.60s' (%s)", kv_policy, names);
    } else if (moe_policy && octo_moe_policy_from_name(moe_policy) < 0)
        snprintf(why, sizeof why, "unknown expert cache policy '%.60s' (default, lhu, lru, lfu)", moe_policy);
    else {
        if (kv_policy) mo->kv.policy = (octo_kv_policy)octo_kv_policy_from_name(kv_policy);
        if (moe_policy) mo->moe.policy = (octo_moe_policy)octo_moe_policy_from_name(moe_policy);
        return 1;
    }
    throw_octo(env, OCTO_ERR_INVALID_ARG, why);
    return 0;
}

/* A byte[] field of b as an optional C string (c_optional's rules). */
static char *text_field(JNIEnv *env, jobject b, jclass bc, const char *name, int *ok) {
    if (!*ok) return NULL;
    jfieldID f = (*env)->GetFieldID(env, bc, name, "[B");
    if (!f) return *ok = 0, NULL;
    jbyteArray a = (jbyteArray)(*env)->GetObjectField(env, b, f);
    char *s = c_optional(env, a, ok);
    if (a) (*env)->DeleteLocalRef(env, a);
    return s;
}

static const char *const text_fields[T_COUNT] = {"draft", "device", "cacheDir", "kvPolicy", "moePolicy", "moeTrace"};

/* Loads jm's client and model as the Builder b describes them, its strings already in
 * jm->texts; 0 with OctoException pending when octo refuses them (its message) or a field
 * cannot be read. */
static int load_with(JNIEnv *env, const char *path, jobject b, jclass bc, jni_model *jm) {
    char *const *t = jm->texts;
    octo_client_options co = octo_client_options_defaults();
    octo_model_options mo = octo_model_options_defaults();
    const jint threads = int_field(env, b, bc, "threads");
    if ((*env)->ExceptionCheck(env) || !read_numbers(env, b, bc, &mo) ||
        !read_choices(env, b, bc, &mo, t[T_KV_POLICY], t[T_MOE_POLICY]) || !take_log_sink(env, b, bc, jm))
        return 0;
    if (threads != INT32_MIN) co.n_threads = threads;
    co.device = t[T_DEVICE], co.cache_dir = t[T_CACHE_DIR];
    mo.draft_model = t[T_DRAFT], mo.moe.trace = t[T_MOE_TRACE];
    if (jm->log_sink) co.log = on_log, co.log_user = jm;
    jm->client = octo_client_new(&co);
    if (jm->client) jm->model = octo_load_model(jm->client, path, &mo);
    if (jm->model) return 1;
    throw_octo(env, jm->client ? (int)octo_last_status(jm->client) : OCTO_ERR_NOMEM,
               jm->client ? octo_last_error(jm->client) : "out of memory");
    return 0;
}

JNIEXPORT jlong JNICALL Java_dev_octo_Native_load(JNIEnv *env, jclass cls, jbyteArray path, jobject builder) {
    (void)cls;
    char *p = c_string(env, path);
    jclass bc = p ? (*env)->GetObjectClass(env, builder) : NULL;
    jni_model *jm = bc ? calloc(1, sizeof *jm) : NULL;
    if (bc && !jm) throw_octo(env, OCTO_ERR_NOMEM, "out of memory");
    int ok = jm != NULL;
    for (int i = 0; jm && i < T_COUNT; i++) jm->texts[i] = text_field(env, builder, bc, text_fields[i], &ok);
    if (jm && !(ok && load_with(env, p, builder, bc, jm))) free_model(env, jm), jm = NULL;
    if (bc) (*env)->DeleteLocalRef(env, bc);
    free(p);
    return (jlong)(intptr_t)jm;
}

/* octo_model_plan_json: the plan as UTF-8 JSON. */
JNIEXPORT jbyteArray JNICALL Java_dev_octo_Native_planJson(JNIEnv *env, jclass cls, jlong handle) {
    (void)cls;
    const jni_model *jm = (const jni_model *)(intptr_t)handle;
    const int n = octo_model_plan_json(jm->model, NULL, 0);
    char *buf = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (!buf) {
        throw_octo(env, n > 0 ? OCTO_ERR_NOMEM : OCTO_ERR_INVALID_ARG, n > 0 ? "out of memory" : "no plan");
        return NULL;
    }
    octo_model_plan_json(jm->model, buf, n + 1);
    jbyteArray out = new_bytes(env, buf, strlen(buf));
    free(buf);
    return out;
}

JNIEXPORT void JNICALL Java_dev_octo_Native_freeModel(JNIEnv *env, jclass cls, jlong handle) {
    (void)cls;
    free_model(env, (jni_model *)(intptr_t)handle);
}

/* A stream on the model's own conversation (session 0) or on a session; the options as
 * GenerateOptions.java holds them. */
JNIEXPORT jlong JNICALL Java_dev_octo_Native_generate(JNIEnv *env, jclass cls, jlong handle, jlong session,
                                                      jbyteArray prompt, jint max_tokens, jfloat temperature,
                                                      jint top_k, jfloat top_p, jfloat min_p, jfloat repeat_penalty,
                                                      jlong seed, jbyteArray grammar, jbyteArray schema) {
    (void)cls;
    jni_model *jm = (jni_model *)(intptr_t)handle;
    octo_session *ss = (octo_session *)(intptr_t)session;
    char *p = c_string(env, prompt);
    int ok = p != NULL;
    char *g = c_optional(env, grammar, &ok), *js = c_optional(env, schema, &ok);
    octo_stream *st = NULL;
    if (ok) {
        octo_generate_params gp = octo_generate_params_defaults();
        gp.max_tokens = max_tokens, gp.temperature = temperature, gp.top_k = top_k, gp.top_p = top_p;
        gp.min_p = min_p, gp.repeat_penalty = repeat_penalty, gp.seed = (uint64_t)seed;
        gp.grammar = g, gp.json_schema = js;
        st = ss ? octo_session_generate(ss, p, &gp) : octo_generate(jm->model, p, &gp);
        if (!st && ss) throw_octo(env, (int)octo_session_status(ss), octo_session_error(ss));
        else if (!st) throw_octo(env, (int)octo_model_status(jm->model), octo_model_error(jm->model));
    }
    free(p), free(g), free(js);
    return (jlong)(intptr_t)st;
}

/* The callback form: each piece handed to Java on the calling thread (a thread the JVM
 * knows: the one that called generateEach). A Java exception pending after a piece stops the
 * generation; it is left pending, so Java sees it when the native method returns. */
typedef struct {
    JNIEnv *env;
    jobject consumer;
    jmethodID accept;
    jni_model *jm;
} piece_sink;

/* Each piece to the consumer, until it throws or the model is closing: octo may still hand over
 * a piece after the cancel (the bytes of a character the cancel cut), which is not passed on. */
static int on_piece(void *user, const char *piece) {
    piece_sink *k = user;
    JNIEnv *env = k->env;
    if ((*env)->ExceptionCheck(env) || atomic_load(&k->jm->closing)) return 1;
    jbyteArray b = new_bytes(env, piece, strlen(piece));
    if (!b) return 1;
    (*env)->CallVoidMethod(env, k->consumer, k->accept, b);
    (*env)->DeleteLocalRef(env, b); /* one per piece: never a pile of local references */
    return (*env)->ExceptionCheck(env) ? 1 : 0;
}

JNIEXPORT jint JNICALL Java_dev_octo_Native_generateEach(JNIEnv *env, jclass cls, jlong handle, jbyteArray prompt,
                                                         jint max_tokens, jfloat temperature, jlong seed,
                                                         jobject consumer) {
    (void)cls;
    jni_model *jm = (jni_model *)(intptr_t)handle;
    char *p = c_string(env, prompt);
    if (!p) return -1;
    jclass cc = (*env)->GetObjectClass(env, consumer);
    piece_sink k = {env, consumer, cc ? (*env)->GetMethodID(env, cc, "accept", "([B)V") : NULL, jm};
    if (cc) (*env)->DeleteLocalRef(env, cc);
    if (!k.accept) return free(p), -1; /* NoSuchMethodError pending */
    octo_generate_params gp = octo_generate_params_defaults();
    gp.max_tokens = max_tokens, gp.temperature = temperature, gp.seed = (uint64_t)seed;
    const octo_status rc = octo_generate_cb(jm->model, p, &gp, on_piece, &k);
    free(p);
    if ((*env)->ExceptionCheck(env)) return -1; /* the callback's exception stands */
    if (atomic_load(&jm->closing)) { /* stopped by Model.close on another thread: the text is cut, not done */
        jclass ise = (*env)->FindClass(env, "java/lang/IllegalStateException");
        if (ise) (*env)->ThrowNew(env, ise, "the model was closed during the generation");
        return -1;
    }
    if (rc != OCTO_OK) throw_octo(env, (int)rc, octo_model_error(jm->model));
    return (jint)rc;
}

/* octo_tokenize with BOS/EOS as the vocabulary says, special-token text left as text. */
JNIEXPORT jintArray JNICALL Java_dev_octo_Native_tokenize(JNIEnv *env, jclass cls, jlong handle, jbyteArray text) {
    (void)cls;
    const jni_model *jm = (const jni_model *)(intptr_t)handle;
    if (!text) return throw_octo(env, OCTO_ERR_INVALID_ARG, "a null string"), NULL;
    const int len = (int)(*env)->GetArrayLength(env, text); /* octo_tokenize takes a length: a NUL is text too */
    char *t = malloc((size_t)len + 1);
    if (!t) return throw_octo(env, OCTO_ERR_NOMEM, "out of memory"), NULL;
    (*env)->GetByteArrayRegion(env, text, 0, len, (jbyte *)t);
    int32_t small[256], *ids = small;
    int n = octo_tokenize(jm->model, t, len, 1, 0, ids, 256);
    if (n > 256 && (ids = malloc((size_t)n * sizeof *ids)) != NULL) n = octo_tokenize(jm->model, t, len, 1, 0, ids, n);
    jintArray out = NULL;
    if (!ids) throw_octo(env, OCTO_ERR_NOMEM, "out of memory");
    else if (n < 0) throw_octo(env, -n, octo_model_error(jm->model));
    else if ((out = (*env)->NewIntArray(env, n)) != NULL) (*env)->SetIntArrayRegion(env, out, 0, n, (const jint *)ids);
    if (ids != small) free(ids);
    free(t);
    return out;
}

/* octo_detokenize: the ids' text as UTF-8 bytes. */
JNIEXPORT jbyteArray JNICALL Java_dev_octo_Native_detokenize(JNIEnv *env, jclass cls, jlong handle, jintArray ids) {
    (void)cls;
    const jni_model *jm = (const jni_model *)(intptr_t)handle;
    if (!ids) return throw_octo(env, OCTO_ERR_INVALID_ARG, "null ids"), NULL;
    const jsize n = (*env)->GetArrayLength(env, ids);
    int32_t *in = malloc((size_t)n * sizeof *in + 1);
    char small[1024], *text = small;
    if (in) (*env)->GetIntArrayRegion(env, ids, 0, n, (jint *)in);
    int len = in ? octo_detokenize(jm->model, in, n, text, (int)sizeof small) : 0;
    if (len > (int)sizeof small && (text = malloc((size_t)len)) != NULL) len = octo_detokenize(jm->model, in, n, text, len);
    jbyteArray out = NULL;
    if (!in || !text) throw_octo(env, OCTO_ERR_NOMEM, "out of memory");
    else if (len < 0) throw_octo(env, -len, octo_model_error(jm->model));
    else out = new_bytes(env, text, (size_t)len);
    if (text != small) free(text);
    free(in);
    return out;
}

/* Model.close from another thread: a callback generation running on the model stops before its
 * next piece (the model is freed once it has returned). */
JNIEXPORT void JNICALL Java_dev_octo_Native_stopEach(JNIEnv *env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    atomic_store(&((jni_model *)(intptr_t)handle)->closing, 1);
}

JNIEXPORT jlong JNICALL Java_dev_octo_Native_sessionNew(JNIEnv *env, jclass cls, jlong handle) {
    (void)cls;
    jni_model *jm = (jni_model *)(intptr_t)handle;
    octo_session *ss = octo_session_new(jm->model);
    if (!ss) return throw_octo(env, (int)octo_model_status(jm->model), octo_model_error(jm->model));
    return (jlong)(intptr_t)ss;
}

JNIEXPORT void JNICALL Java_dev_octo_Native_sessionFree(JNIEnv *env, jclass cls, jlong session) {
    (void)env, (void)cls;
    octo_session_free((octo_session *)(intptr_t)session);
}

JNIEXPORT void JNICALL Java_dev_octo_Native_sessionReset(JNIEnv *env, jclass cls, jlong session) {
    (void)env, (void)cls;
    octo_session_reset((octo_session *)(intptr_t)session);
}

JNIEXPORT jlong JNICALL Java_dev_octo_Native_adapterLoad(JNIEnv *env, jclass cls, jlong handle, jbyteArray path) {
    (void)cls;
    jni_model *jm = (jni_model *)(intptr_t)handle;
    char *p = c_string(env, path);
    if (!p) return 0;
    octo_adapter *a = octo_adapter_load(jm->model, p);
    free(p);
    if (!a) return throw_octo(env, (int)octo_model_status(jm->model), octo_model_error(jm->model));
    return (jlong)(intptr_t)a;
}

JNIEXPORT void JNICALL Java_dev_octo_Native_adapterFree(JNIEnv *env, jclass cls, jlong adapter) {
    (void)env, (void)cls;
    octo_adapter_free((octo_adapter *)(intptr_t)adapter);
}

/* The adapters (handles) and scales of the model's own conversation (session 0) or a session's. */
JNIEXPORT void JNICALL Java_dev_octo_Native_setAdapters(JNIEnv *env, jclass cls, jlong handle, jlong session,
                                                        jlongArray adapters, jfloatArray scales) {
    (void)cls;
    jni_model *jm = (jni_model *)(intptr_t)handle;
    const jsize n = adapters ? (*env)->GetArrayLength(env, adapters) : 0;
    if (n > OCTO_MAX_ADAPTERS || !scales || (*env)->GetArrayLength(env, scales) != n) {
        throw_octo(env, OCTO_ERR_INVALID_ARG, n > OCTO_MAX_ADAPTERS ? "more adapters than OCTO_MAX_ADAPTERS"
                                                                    : "as many scales as adapters are needed");
        return;
    }
    jlong h[OCTO_MAX_ADAPTERS];
    float sc[OCTO_MAX_ADAPTERS];
    octo_adapter *as[OCTO_MAX_ADAPTERS];
    if (n) (*env)->GetLongArrayRegion(env, adapters, 0, n, h);
    if (n) (*env)->GetFloatArrayRegion(env, scales, 0, n, sc);
    for (jsize i = 0; i < n; i++) as[i] = (octo_adapter *)(intptr_t)h[i];
    octo_session *ss = (octo_session *)(intptr_t)session;
    const octo_status rc = ss ? octo_session_set_adapters(ss, as, sc, (int)n) : octo_set_adapters(jm->model, as, sc, (int)n);
    if (rc) throw_octo(env, (int)rc, ss ? octo_session_error(ss) : octo_model_error(jm->model));
}

JNIEXPORT jint JNICALL Java_dev_octo_Native_trim(JNIEnv *env, jclass cls, jlong handle, jint level) {
    (void)cls;
    jni_model *jm = (jni_model *)(intptr_t)handle;
    const octo_status rc = octo_model_trim(jm->model, (octo_trim_level)level);
    if (rc != OCTO_OK) throw_octo(env, (int)rc, octo_model_error(jm->model));
    return (jint)rc;
}

/* The next piece as UTF-8 bytes; NULL at the end (or with an exception pending on a failure). */
JNIEXPORT jbyteArray JNICALL Java_dev_octo_Native_next(JNIEnv *env, jclass cls, jlong handle) {
    (void)cls;
    octo_stream *st = (octo_stream *)(intptr_t)handle;
    const char *piece = octo_stream_next(st);
    if (!piece) {
        if (octo_stream_status(st) != OCTO_OK) throw_octo(env, (int)octo_stream_status(st), octo_stream_error(st));
        return NULL;
    }
    return new_bytes(env, piece, octo_stream_piece_size(st));
}

JNIEXPORT jint JNICALL Java_dev_octo_Native_stopReason(JNIEnv *env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    return (jint)octo_stream_stop_reason((octo_stream *)(intptr_t)handle);
}

JNIEXPORT void JNICALL Java_dev_octo_Native_cancel(JNIEnv *env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    octo_stream_cancel((octo_stream *)(intptr_t)handle); /* an atomic store: any thread */
}

JNIEXPORT void JNICALL Java_dev_octo_Native_freeStream(JNIEnv *env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    octo_stream_free((octo_stream *)(intptr_t)handle);
}

#define STATS_MAX 256 /* more than OCTO_STATS has, of each kind */
#define STATS_ONE(...) +1
_Static_assert(0 OCTO_STATS(STATS_ONE, STATS_ONE) <= STATS_MAX, "OCTO_STATS outgrew stats_object's arrays");
#undef STATS_ONE

/* octo_stats as dev.octo.Stats (made by gen_stats.c from the same list): whole numbers, the
 * others and the texts, each in the list's order. */
static jobject stats_object(JNIEnv *env, const octo_stats *s) {
    jlong w[STATS_MAX];
    jdouble r[STATS_MAX];
    const char *t[STATS_MAX];
    int nw = 0, nr = 0, nt = 0;
#define NUM(group, type, name, ...)                                                          \
    if (_Generic(s->name, double: 1, float: 1, default: 0)) r[nr++] = (jdouble)s->name; \
    else w[nw++] = (jlong)s->name;
#define TEXT(group, size, name, ...) t[nt++] = s->name;
    OCTO_STATS(NUM, TEXT)
#undef NUM
#undef TEXT
    jlongArray wa = (*env)->NewLongArray(env, nw);
    jdoubleArray ra = wa ? (*env)->NewDoubleArray(env, nr) : NULL;
    jobjectArray ta = ra ? (*env)->NewObjectArray(env, nt, byte_array, NULL) : NULL;
    jobject out = NULL;
    if (wa && ra && ta) {
        (*env)->SetLongArrayRegion(env, wa, 0, nw, w);
        (*env)->SetDoubleArrayRegion(env, ra, 0, nr, r);
        for (int i = 0; i < nt && !(*env)->ExceptionCheck(env); i++) {
            jbyteArray x = new_bytes(env, t[i], strlen(t[i])); /* UTF-8, not modified UTF-8 */
            if (x) (*env)->SetObjectArrayElement(env, ta, i, x), (*env)->DeleteLocalRef(env, x); /* one per loop */
        }
        if (!(*env)->ExceptionCheck(env)) out = (*env)->CallStaticObjectMethod(env, stats_class, stats_of, wa, ra, ta);
    }
    if (wa) (*env)->DeleteLocalRef(env, wa);
    if (ra) (*env)->DeleteLocalRef(env, ra);
    if (ta) (*env)->DeleteLocalRef(env, ta);
    return out;
}

JNIEXPORT jobject JNICALL Java_dev_octo_Native_stats(JNIEnv *env, jclass cls, jlong handle, jlong session) {
    (void)cls;
    jni_model *jm = (jni_model *)(intptr_t)handle;
    const octo_stats s = session ? octo_session_stats((octo_session *)(intptr_t)session) : octo_model_stats(jm->model);
    return stats_object(env, &s);
}

JNIEXPORT jstring JNICALL Java_dev_octo_Native_version(JNIEnv *env, jclass cls) {
    (void)cls;
    return (*env)->NewStringUTF(env, octo_version());
}

/* ---- finetune: Finetune.run ---- */

typedef struct {
    JNIEnv *env;
    jobject sink;
    jmethodID step;
} ft_sink;

/* Each step to the sink's step(...); true back (or an exception) stops the run. */
static int on_finetune_step(void *user, const octo_finetune_progress *p) {
    ft_sink *s = user;
    if (!s->sink) return 0;
    const jboolean stop = (*s->env)->CallBooleanMethod(s->env, s->sink, s->step, (jlong)p->step, (jlong)p->steps,
                                                       p->loss, p->lr, p->grad_norm, (jlong)p->tokens, p->elapsed_s,
                                                       p->tokens_per_s, p->eta_s, (jlong)p->resumed_at);
    return stop || (*s->env)->ExceptionCheck(s->env);
}

/* texts: model, data, valid, output, checkpoint, targets, type, distill (null: the default); ints: steps, batch,
 * seqLen, rank, warmup, checkpointEvery, restart, full; floats: alpha, lr, lrMin, clip, weightDecay. The result's numbers in
 * octo_finetune_result's order up to full, then experts and experts_reached, as doubles. */
JNIEXPORT jdoubleArray JNICALL Java_dev_octo_Native_finetune(JNIEnv *env, jclass cls, jobjectArray texts, jintArray ints,
                                                            jfloatArray floats, jlong seed, jobject sink) {
    (void)cls;
    char *t[8] = {0};
    int ok = (*env)->GetArrayLength(env, texts) == 8 && (*env)->GetArrayLength(env, ints) == 8 &&
             (*env)->GetArrayLength(env, floats) == 5;
    if (!ok) return throw_octo(env, OCTO_ERR_INVALID_ARG, "finetune: 8 texts, 8 numbers, 5 rates"), NULL;
    for (int i = 0; i < 8 && ok; i++) {
        jbyteArray b = (jbyteArray)(*env)->GetObjectArrayElement(env, texts, i);
        t[i] = c_optional(env, b, &ok);
        if (b) (*env)->DeleteLocalRef(env, b);
    }
    jint n[8];
    jfloat f[5];
    jdoubleArray out = NULL;
    ft_sink s = {env, sink, NULL};
    if (ok && sink) {
        jclass sc = (*env)->GetObjectClass(env, sink);
        s.step = (*env)->GetMethodID(env, sc, "step", "(JJDDDJDDDJ)Z");
        (*env)->DeleteLocalRef(env, sc);
        ok = s.step != NULL;
    }
    if (ok) {
        (*env)->GetIntArrayRegion(env, ints, 0, 8, n);
        (*env)->GetFloatArrayRegion(env, floats, 0, 5, f);
        octo_finetune_params p = octo_finetune_params_defaults();
        p.data = t[1], p.valid = t[2], p.output = t[3], p.checkpoint = t[4], p.targets = t[5], p.type = t[6];
        p.steps = n[0], p.batch = n[1], p.seq_len = n[2], p.rank = n[3], p.warmup = n[4];
        p.checkpoint_every = n[5], p.restart = n[6], p.distill = t[7], p.full = n[7];
        p.alpha = f[0], p.lr = f[1], p.lr_min = f[2], p.clip = f[3], p.weight_decay = f[4], p.seed = (uint64_t)seed;
        p.on_progress = on_finetune_step, p.user = &s;
        octo_client *c = octo_client_new(NULL);
        octo_finetune_result r;
        const octo_status st = c ? octo_finetune(c, t[0], &p, &r) : OCTO_ERR_NOMEM;
        if (st && !(*env)->ExceptionCheck(env)) throw_octo(env, (int)st, c ? octo_last_error(c) : "out of memory");
        if (!st) {
            const jdouble v[17] = {(double)r.resumed_at, (double)r.steps_run, r.first_loss, r.last_loss,
                                   r.valid_before, r.valid_after, r.seconds, (double)r.sequences, (double)r.tokens,
                                   (double)r.counted, r.conversations, r.conversations_cut, r.n_matrices,
                                   (double)r.adapter_values, r.full, r.experts, r.experts_reached};
            if ((out = (*env)->NewDoubleArray(env, 17))) (*env)->SetDoubleArrayRegion(env, out, 0, 17, v);
        }
        octo_client_free(c);
    }
    for (int i = 0; i < 8; i++) free(t[i]);
    return out;
}
