/*
 * inspect — `octo inspect`: what a model is and what it costs; for a file
 * octo cannot run, what it is and why not.
 */
#include <stdio.h>
#include <string.h>

#include "octo.h"
#include "cli.h"
#include "options.h"
#include "core/flatjson.h" /* internal: inspect --json */

/* inspect --json: the model's description as one flat JSON object. */
static void print_info_json(const char *path, const octo_model_info *in, uint64_t resident) {
    char buf[8192];
    flatjson_out o;
    flatjson_begin(&o, buf, sizeof buf);
    flatjson_str(&o, "model", path);
    flatjson_str(&o, "arch", in->arch);
    const struct { const char *k; uint64_t v; } nums[] = {
        {"n_vocab", (uint64_t)in->n_vocab}, {"n_ctx_train", (uint64_t)in->n_ctx_train}, {"n_embd", (uint64_t)in->n_embd},
        {"n_layer", (uint64_t)in->n_layer}, {"n_head", (uint64_t)in->n_head}, {"n_head_kv", (uint64_t)in->n_head_kv},
        {"head_dim", (uint64_t)in->head_dim}, {"n_ff", (uint64_t)in->n_ff}, {"n_expert", (uint64_t)in->n_expert},
        {"n_expert_used", (uint64_t)in->n_expert_used}, {"n_params", in->n_params}, {"file_bytes", in->file_bytes},
        {"weight_bytes", in->weight_bytes}, {"weight_bytes_per_token", in->weight_bytes_per_token},
        {"kv_bytes_per_token_f32", in->kv_bytes_per_token}, {"n_threads", (uint64_t)in->n_threads},
        {"expert_bytes", in->expert_bytes}, {"resident_bytes_after_load", resident}};
    for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) flatjson_u64(&o, nums[i].k, nums[i].v);
    flatjson_bool(&o, "output_tied", in->output_tied);
    const struct { const char *k, *v; } strs[] = {
        {"tensor_types", in->tensor_types}, {"features", in->features}, {"weights", in->weights},
        {"cpu_path", in->cpu_path}, {"cores", in->cores}, {"speculation", in->speculation}, {"origin", in->origin},
        {"expert_plan", in->expert_plan}};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++) flatjson_str(&o, strs[i].k, strs[i].v);
    flatjson_end(&o);
    fputs(buf, stdout);
}

/* A file octo cannot run: what it is (read for its vocabulary alone) and why, then the error. */
static int explain_unrunnable(octo_client *c, const char *path, int json) {
    char why[512];
    snprintf(why, sizeof why, "%s", octo_last_error(c));
    octo_model_options vo = octo_model_options_defaults();
    vo.vocab_only = 1;
    octo_model *v = octo_load_model(c, path, &vo);
    if (!v) return fail("%s", why); /* not even a readable GGUF: the first error says it */
    const octo_model_info in = octo_model_info_get(v);
    if (json) {
        char buf[2048];
        flatjson_out o;
        flatjson_begin(&o, buf, sizeof buf);
        flatjson_str(&o, "model", path);
        flatjson_bool(&o, "runnable", false);
        flatjson_str(&o, "error", why);
        flatjson_str(&o, "arch", in.arch);
        flatjson_u64(&o, "n_vocab", (uint64_t)in.n_vocab);
        flatjson_u64(&o, "n_tensors", in.n_tensors);
        flatjson_str(&o, "tensor_types", in.tensor_types);
        flatjson_u64(&o, "file_bytes", in.file_bytes);
        flatjson_end(&o);
        fputs(buf, stdout);
    } else {
        printf("model:          %s\n", path);
        printf("architecture:   %s\n", in.arch[0] ? in.arch : "(none given)");
        printf("runs:           no: %s\n", why);
        printf("vocabulary:     %d tokens (octo tokenize and detokenize work on it)\n", in.n_vocab);
        printf("tensors:        %llu (%s)\n", (unsigned long long)in.n_tensors, in.tensor_types);
        printf("file:           %llu bytes (%.2f MiB)\n", (unsigned long long)in.file_bytes, mib(in.file_bytes));
    }
    octo_model_free(v);
    return fail("%s", why);
}

/* inspect's table: what the model is, then what it costs (kv_tokens: the KV
 * cache's size in tokens; rss: the process's resident bytes before and after the load). */
static void print_info_text(const char *path, const octo_model_info *in, const char *kernels, long kv_tokens,
                            octo_memory before, octo_memory after) {
    printf("model:          %s\n", path);
    printf("architecture:   %s%s\n", in->arch, in->n_expert ? " (mixture of experts)" : "");
    printf("vocabulary:     %d tokens\n", in->n_vocab);
    printf("context:        %d tokens (trained)\n", in->n_ctx_train);
    printf("layers:         %d\n", in->n_layer);
    printf("embedding:      %d\n", in->n_embd);
    printf("heads:          %d query, %d key/value, head size %d\n", in->n_head, in->n_head_kv, in->head_dim);
    printf("feed-forward:   %d\n", in->n_ff);
    if (in->n_expert) printf("experts:        %d, %d used per token\n", in->n_expert, in->n_expert_used);
    if (in->n_ff_shared) printf("shared expert:  %d wide, run by every token\n", in->n_ff_shared);
    if (in->origin[0]) printf("origin:         %s\n", in->origin);
    printf("features:       %s\n", in->features);
    printf("rope:           base %g, scale %g\n", in->rope_freq_base, in->rope_freq_scale);
    printf("rms epsilon:    %g\n", in->rms_eps);
    printf("output:         %s\n", in->output_tied ? "tied to token embedding" : "separate matrix");
    printf("tensors:        %llu (%s)\n", (unsigned long long)in->n_tensors, in->tensor_types);
    printf("parameters:     %llu (%.2f M)\n", (unsigned long long)in->n_params, in->n_params / 1e6);
    printf("file:           %llu bytes (%.2f MiB)\n", (unsigned long long)in->file_bytes, mib(in->file_bytes));
    printf("weights:        %llu bytes (%.2f MiB): %s\n", (unsigned long long)in->weight_bytes, mib(in->weight_bytes),
           in->weights);
    if (in->n_expert) {
        printf("experts:        %.2f MiB each, %.2f MiB in all, read into the expert cache as tokens need them; "
               "other weights %.2f MiB\n",
               mib(in->expert_bytes_one), mib(in->expert_bytes), mib(in->resident_weight_bytes));
        printf("expert cache:   %.2f MiB: %s\n", mib(in->expert_cache_budget), in->expert_plan);
        if (in->expert_int2[0]) printf("2-bit copies:   %s\n", in->expert_int2);
    }
    printf("kv cache:       %llu bytes (%.2f MiB) for %ld tokens at f32, %.2f MiB at f16\n",
           (unsigned long long)(in->kv_bytes_per_token * (uint64_t)kv_tokens),
           mib(in->kv_bytes_per_token * (uint64_t)kv_tokens), kv_tokens,
           mib(in->kv_bytes_per_token * (uint64_t)kv_tokens / 2));
    printf("compute:        %s kernels, %d threads\n", in->cpu_path, in->n_threads);
    printf("kernels:        %s\n", kernels);
    printf("cores:          %s\n", in->cores);
    printf("speculation:    %s\n", in->speculation);
    printf("resident:       %.2f MiB after load (+%.2f MiB for this model; weights are paged in when used)\n",
           mib(after.rss_bytes), mib(after.rss_bytes > before.rss_bytes ? after.rss_bytes - before.rss_bytes : 0));
}

int cmd_inspect(int argc, char **argv) {
    cli_args a = cli_defaults();
    a.kv_tokens = -1; /* the trained context */
    const int bad = cli_parse(CMD_INSPECT, argc, argv, &a);
    if (bad) return bad;
    const char *path = a.model;
    if (!path) return usage_error("inspect needs -m MODEL");
    const octo_memory before = octo_memory_usage();
    octo_client_options co = octo_client_options_defaults();
    co.device = a.device;
    octo_client *c = octo_client_new(&co);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = 1; /* inspect does not need a cache */
    mo.moe = a.mo.moe;
    mo.kv_type = OCTO_KV_F32; /* so kv_bytes_per_token is the f32 figure */
    mo.kv.compress = 0;
    octo_model *m = c ? octo_load_model(c, path, &mo) : NULL;
    if (!m) {
        const int rc = c ? explain_unrunnable(c, path, a.json) : fail("out of memory");
        octo_client_free(c);
        return rc;
    }
    const octo_memory after = octo_memory_usage();
    const octo_model_info in = octo_model_info_get(m);
    if (a.json) print_info_json(path, &in, after.rss_bytes > before.rss_bytes ? after.rss_bytes - before.rss_bytes : 0);
    else print_info_text(path, &in, octo_model_stats(m).cpu_kernels, a.kv_tokens < 0 ? in.n_ctx_train : a.kv_tokens,
                         before, after);
    octo_model_free(m);
    octo_client_free(c);
    return 0;
}
