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
#include <stdlib.h>
#include <string.h>

#include "octo.h"

static jclass octo_exception, stats_class; /* global references, made in JNI_OnLoad */
static jmethodID octo_exception_init, stats_of;

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved) {
    (void)reserved;
    JNIEnv *env;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
    jclass c = (*env)->FindClass(env, "dev/octo/OctoException");
    if (!c) return JNI_ERR;
    octo_exception = (*env)->NewGlobalRef(env, c);
    (*env)->DeleteLocalRef(env, c);
    octo_exception_init = (*env)->GetMethodID(env, octo_exception, "<init>", "(ILjava/lang/String;)V");
    jclass sc = (*env)->FindClass(env, "dev/octo/Stats");
    if (!sc) return JNI_ERR;
    stats_class = (*env)->NewGlobalRef(env, sc);
    (*env)->DeleteLocalRef(env, sc);
    stats_of = (*env)->GetStaticMethodID(env, stats_class, "of", "([J[D[Ljava/lang/String;)Ldev/octo/Stats;");
    return octo_exception && octo_exception_init && stats_class && stats_of ? JNI_VERSION_1_8 : JNI_ERR;
}

/* Throw OctoException(status, message); returns 0 for the caller's return. */
static jlong throw_octo(JNIEnv *env, int status, const char *message) {
    if ((*env)->ExceptionCheck(env)) return 0; /* one already pending: it stands */
    jstring m = (*env)->NewStringUTF(env, message ? message : "");
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

typedef struct {
    octo_client *client;
    octo_model *model;
} jni_model;

/* The options as Model.Builder holds them (octo_model_options, octo_client_options). */
JNIEXPORT jlong JNICALL Java_dev_octo_Native_load(JNIEnv *env, jclass cls, jbyteArray path, jint n_ctx, jint threads,
                                                  jbyteArray draft, jint max_sessions, jbyteArray device,
                                                  jint auto_draft, jint draft_threads, jbyteArray cache_dir,
                                                  jint memory_watch, jlong moe_cache_bytes) {
    (void)cls;
    char *p = c_string(env, path);
    int ok = p != NULL;
    char *d = c_optional(env, draft, &ok), *dev = c_optional(env, device, &ok), *cd = c_optional(env, cache_dir, &ok);
    jni_model *jm = ok ? calloc(1, sizeof *jm) : NULL;
    if (!ok || !jm) {
        if (ok) throw_octo(env, OCTO_ERR_NOMEM, "out of memory");
        free(p), free(d), free(dev), free(cd), free(jm);
        return 0;
    }
    octo_client_options co = octo_client_options_defaults();
    co.n_threads = threads;
    co.device = dev;
    co.cache_dir = cd;
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = n_ctx;
    mo.draft_model = d;
    mo.max_sessions = max_sessions;
    mo.auto_draft = auto_draft;
    mo.draft_threads = draft_threads;
    mo.memory_watch = memory_watch;
    if (moe_cache_bytes > 0) mo.moe.cache_bytes = (uint64_t)moe_cache_bytes;
    jm->client = octo_client_new(&co);
    if (jm->client) jm->model = octo_load_model(jm->client, p, &mo);
    if (!jm->model) {
        throw_octo(env, jm->client ? (int)octo_last_status(jm->client) : OCTO_ERR_NOMEM,
                   jm->client ? octo_last_error(jm->client) : "out of memory");
        octo_client_free(jm->client);
        free(jm);
        jm = NULL;
    }
    free(p), free(d), free(dev), free(cd);
    return (jlong)(intptr_t)jm;
}

JNIEXPORT void JNICALL Java_dev_octo_Native_freeModel(JNIEnv *env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    jni_model *jm = (jni_model *)(intptr_t)handle;
    if (!jm) return;
    octo_model_free(jm->model);
    octo_client_free(jm->client);
    free(jm);
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
        if (!st && ss) throw_octo(env, (int)octo_model_status(jm->model), octo_session_error(ss));
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
} piece_sink;

static int on_piece(void *user, const char *piece) {
    piece_sink *k = user;
    JNIEnv *env = k->env;
    const jsize n = (jsize)strlen(piece);
    jbyteArray b = (*env)->NewByteArray(env, n);
    if (!b) return 1;
    (*env)->SetByteArrayRegion(env, b, 0, n, (const jbyte *)piece);
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
    piece_sink k = {env, consumer, cc ? (*env)->GetMethodID(env, cc, "accept", "([B)V") : NULL};
    if (cc) (*env)->DeleteLocalRef(env, cc);
    if (!k.accept) return free(p), -1; /* NoSuchMethodError pending */
    octo_generate_params gp = octo_generate_params_defaults();
    gp.max_tokens = max_tokens, gp.temperature = temperature, gp.seed = (uint64_t)seed;
    const octo_status rc = octo_generate_cb(jm->model, p, &gp, on_piece, &k);
    free(p);
    if ((*env)->ExceptionCheck(env)) return -1; /* the callback's exception stands */
    if (rc != OCTO_OK) throw_octo(env, (int)rc, octo_model_error(jm->model));
    return (jint)rc;
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
    const jsize n = (jsize)octo_stream_piece_size(st);
    jbyteArray out = (*env)->NewByteArray(env, n);
    if (out) (*env)->SetByteArrayRegion(env, out, 0, n, (const jbyte *)piece);
    return out;
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
    jdoubleArray ra = (*env)->NewDoubleArray(env, nr);
    jclass string = (*env)->FindClass(env, "java/lang/String");
    jobjectArray ta = string ? (*env)->NewObjectArray(env, nt, string, NULL) : NULL;
    jobject out = NULL;
    if (wa && ra && ta) {
        (*env)->SetLongArrayRegion(env, wa, 0, nw, w);
        (*env)->SetDoubleArrayRegion(env, ra, 0, nr, r);
        for (int i = 0; i < nt && !(*env)->ExceptionCheck(env); i++) {
            jstring x = (*env)->NewStringUTF(env, t[i]);
            if (x) (*env)->SetObjectArrayElement(env, ta, i, x), (*env)->DeleteLocalRef(env, x); /* one per loop */
        }
        if (!(*env)->ExceptionCheck(env)) out = (*env)->CallStaticObjectMethod(env, stats_class, stats_of, wa, ra, ta);
    }
    if (wa) (*env)->DeleteLocalRef(env, wa);
    if (ra) (*env)->DeleteLocalRef(env, ra);
    if (ta) (*env)->DeleteLocalRef(env, ta);
    if (string) (*env)->DeleteLocalRef(env, string);
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
