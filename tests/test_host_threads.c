/*
 * test_host_threads — octo as a guest in its host's threads (issue 59, 8).
 *
 * The attention and AMX kernels kept 591 KiB of working memory in
 * thread-local storage. Static TLS is part of every thread of a process
 * that links the library, carved by glibc from each thread's stack: a
 * thread of 512 KiB could not be created at all, and `octo run` under
 * `ulimit -s 512` died of SIGSEGV. The kernels now take their working
 * memory from the forward's (and the product's) per-thread slots.
 *
 *   - octo's static TLS (the PT_TLS segment of the module holding it) is
 *     at most 4 KiB (605,120 bytes before);
 *   - on a thread of 256 KiB, a client, a model (the clone's stories260K)
 *     and a greedy generation on 1 and on 2 threads: the text of a thread
 *     of the default size (pthread_create failed before, EINVAL).
 */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "octo.h"
#include "t.h"
#include "util.h"

typedef struct {
    uintptr_t addr; /* a function of octo's */
    size_t tls;     /* the PT_TLS size of the module that holds it */
    int found;
} tls_probe;

static int tls_of(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    tls_probe *p = arg;
    size_t tls = 0;
    int mine = 0;
    for (int k = 0; k < info->dlpi_phnum; k++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
        const uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && p->addr >= lo && p->addr < lo + ph->p_memsz) mine = 1;
        if (ph->p_type == PT_TLS) tls = ph->p_memsz;
    }
    if (mine) p->tls = tls, p->found = 1;
    return mine;
}

typedef struct {
    const char *model;
    int n_threads;
    char text[512];
    int ok;
} gen_job;

static void *generate(void *arg) {
    gen_job *j = arg;
    octo_client_options co = octo_client_options_defaults();
    co.n_threads = j->n_threads;
    octo_client *c = octo_client_new(&co);
    octo_model *m = c ? octo_load_model(c, j->model, NULL) : NULL;
    octo_generate_params gp = octo_generate_params_defaults();
    gp.max_tokens = 24;
    gp.temperature = 0.0f;
    octo_stream *st = m ? octo_generate(m, "Once upon a time", &gp) : NULL;
    j->text[0] = '\0';
    for (const char *p; st && (p = octo_stream_next(st));) strncat(j->text, p, sizeof j->text - strlen(j->text) - 1);
    j->ok = st && octo_stream_status(st) == OCTO_OK && j->text[0];
    octo_stream_free(st);
    octo_model_free(m);
    octo_client_free(c);
    return NULL;
}

/* j on a thread of `stack` bytes (0: the default); false when the thread could not be made */
static int run_on(gen_job *j, size_t stack) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    if (stack) pthread_attr_setstacksize(&a, stack);
    pthread_t th;
    const int rc = pthread_create(&th, &a, generate, j);
    pthread_attr_destroy(&a);
    if (rc) return 0;
    pthread_join(th, NULL);
    return 1;
}

int main(void) {
    tls_probe p = {(uintptr_t)&octo_generate, 0, 0};
    dl_iterate_phdr(tls_of, &p);
    T_CHECKF(p.found && p.tls <= 4096, "octo's static TLS is %zu bytes, carved from every thread of its host", p.tls);
    printf("octo's static TLS: %zu bytes\n", p.tls);
    char model[512];
    tu_repo_model(model, sizeof model);
    /* sanitizers widen every frame (and keep their own stacks): there a thread of 1 MiB, the TLS check stands */
    const size_t kib = tu_quick() ? 1024 : 256;
    for (int n = 1; n <= 2; n++) {
        gen_job big = {.model = model, .n_threads = n}, small = {.model = model, .n_threads = n};
        T_CHECK(run_on(&big, 0) && big.ok);
        T_CHECKF(run_on(&small, kib << 10), "[%d threads] a thread of %zu KiB could not be created", n, kib);
        T_CHECKF(small.ok && !strcmp(small.text, big.text), "[%d threads] on %zu KiB: '%s' vs '%s'", n, kib,
                 small.text, big.text);
        printf("%d thread%s, on a thread of %zu KiB: '%s'\n", n, n > 1 ? "s" : "", kib, small.text);
    }
    T_DONE();
}
