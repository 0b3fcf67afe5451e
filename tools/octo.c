/*
 * octo — the command line.
 *
 *   octo run        -m MODEL -p PROMPT [-n N] [sampling] [--chat] [--ids] [--stats]
 *   octo tokenize   -m MODEL (--text T | -f FILE) [--no-bos]
 *   octo detokenize -m MODEL --ids "1 2 3"
 *   octo inspect    -m MODEL [--kv-tokens N]     what a model is and what it costs
 *   octo logits     -m MODEL (--tokens "1 2 3" | --prompt TEXT) --out FILE.f32
 *   octo synth      -o FILE [shape and type options]
 *   octo plan, deploy (plan.c, deploy.c), bench, eval, quantize, upcycle, moe-prep (their files)
 *
 * Every failure is one line on stderr ("octo: ...") and a non-zero exit:
 * 1 for an error of the operation, 2 for a usage error.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "octo.h"
#include "cli.h"
#include "stats.h"
#include "model/synth.h" /* internal: synthetic model writer, used by `octo synth` */
#include "core/quant.h"  /* internal: type names for `octo synth --type` */
#include "core/atomic_write.h" /* internal: output files written whole or not at all */
#include "core/tempfiles.h"    /* internal: what an interrupted command removes */
#include "core/flatjson.h"     /* internal: inspect --json */
#ifdef OCTO_HAVE_EDITLINE
#include <editline/readline.h>
#endif

static void help_tools(FILE *f);

static void help(FILE *f) {
    fputs("usage: octo <command> [options]   (octo --version: the version)\n"
          "\n"
          "  run [-m] MODEL [-p] PROMPT | -f FILE | - [-n N] [-t THREADS] [--temp T] [--top-k K]\n"
          "      [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S] [--ctx N] [--chat] [--ids]\n"
          "      [--stats [--json]] [--spec MODE] [--draft MODEL] [--spec-k N] [--spec-tree auto|off|N]\n"
          "      [--lookahead W,N,G] [--prompt-compress R] [--cache-dir DIR] [--device NAME]\n"
          "      [-td N] [--spec-ahead on|off]\n"
          "      stream a continuation to stdout; the prompt from -p, a file (-f) or stdin (-);\n"
          "      sampling without --seed draws a new seed each run; --chat: an interactive\n"
          "      conversation (with -p as the system prompt; /stats, /reset, /exit; when the context\n"
          "      fills, the oldest exchanges are dropped); --ids: print the generated token ids\n"
          "      on one line; --stats: a table of speed and memory on stderr at the end (--json:\n"
          "      one JSON object); every command takes -h; MODE (speculative decoding): ",
          f);
    fputs(spec_mode_names(), f);
    fputs("\n"
          "  Mixture-of-Experts models: run, bench, eval, logits and inspect take\n"
          "      --moe-cache BYTES|PCT% (the expert cache: bytes with K/M/G, or a share of the\n"
          "      experts' bytes; default all of them), --moe-policy lhu|lru|lfu,\n"
          "      --moe-prefetch auto|on|off (read predicted experts ahead) and --moe-trace FILE\n"
          "      (one line per token and MoE layer: the experts used, each HIT, MISS or INT2);\n"
          "      --moe-int2 auto|on|off|all: serve a miss on an expert no token chose first by its\n"
          "      2-bit copy (auto: where moe-prep measured at most 0.01 nats; all: every such\n"
          "      lookup, to measure);\n"
          "      --moe-predict-margin SD: also read ahead experts within SD standard deviations\n"
          "      of the k-th predicted (default 0.25; 0: the top k only)\n"
          ,
          f);
    help_tools(f);
}

/* The entries after run's: the other commands. */
static void help_tools(FILE *f) {
    fputs("  tokenize -m MODEL (--text T | -f FILE) [--no-bos] [--special]\n"
          "      the ids of the whole text, space-separated on one line\n"
          "  detokenize -m MODEL --ids \"1 2 3\"\n"
          "      the text of the ids, as raw bytes\n"
          "  bench -m MODEL [-p 512] [-n 128] [-t N] [-r REPS] [--batch 1,2,4,8,16] [--kv-plain] [--json]\n"
          "      prompt and generation tokens/s (median, spread), GB/s of weights read and the\n"
          "      percentage of the machine's read bandwidth (measured in the same run), the\n"
          "      cost of forwarding T tokens at once; 'octo bench --roofline' measures only that\n"
          "  bench -m MODEL --spec MODE [--draft MODEL] [--spec-k N] [--spec-tree auto|off|N] [--lookahead W,N,G]\n"
          "      [--prompt T | --prompt-file F] [-n 128] [-r REPS] [--temp T] [--seed S] [--versus-lines K | --versus-serial]\n"
          "      [-td N] [--spec-ahead on|off] [--json]\n"
          "      speculative decoding against plain, alternated: tokens/s, speedup, acceptance, the formula's figure;\n"
          "      --versus-lines K: a third arm with lines of K drafts (0: adaptive), alternated too (trees against lines);\n"
          "      --versus-serial: a third arm whose draft never drafts beside verification; -td N: N cores of the\n"
          "      draft's own (it then drafts while the model verifies, unless --spec-ahead off)\n"
          "  eval -m MODEL -f TEXT [--ctx N] [--batch N] [--prompt N] [--json] [--kv-plain] [--kv-policy P]\n"
          "       [--kv-budget BYTES|PCT%] [--kv-hot N] [--kv-warm N] [--kv-anchors N] [--kv-recent N]\n"
          "       [--kv-cold q4_1|q4_0|q8_0|f16] [--kv-keys channel|token]\n"
          "       [--cache-dir DIR] [--kv-spill auto|on|off] [--kv-spill-max BYTES] [--device NAME]\n"
          "       [--ref OTHER] [--kv-keep N|PCT%] [--draft MODEL] [--prompt-compress R]\n"
          "       [--prompt-lookahead N] [--prompt-random SEED]\n"
          "      perplexity over the text's first N tokens, fed N per step (default 1), and the\n"
          "      KV cache's cost in quality: KL divergence and top-1 agreement against an\n"
          "      uncompressed F16 cache, KV bytes used; P: ",
          f);
    char policies[256];
    fputs(kv_policy_names(OCTO_KV_POLICY_NONE, " ", policies, sizeof policies), f);
    fputs(".\n"
          "      --ref OTHER: the reference is OTHER (same vocabulary), e.g. the unquantized model.\n"
          "      --kv-keep: entries per layer the cache keeps (a percentage: of the prompt's); with\n"
          "      --prompt N, --draft MODEL scores the prompt with the draft's lookahead (speckv;\n"
          "      the default policy when the prompt does not fit) and --prompt-compress R lets the\n"
          "      model read R of the prompt, the draft choosing (SpecPC; --prompt-random: at random)\n"
          "      --prompt N: the first N tokens as one prompt (the cache compressed as its policy\n"
          "      decides, a budget % being of the prompt's cache), then only the rest is scored.\n"
          "      With a cache directory, cold blocks over budget spill there (auto: only on\n"
          "      fast storage); NAME: iphone-15-pro iphone-14 pixel-8 galaxy-s24 android-4gb-emmc\n"
          "  inspect -m MODEL [--kv-tokens N] [--device NAME] [--json]\n"
          "      architecture, hyperparameters, tensors, parameter count, file bytes,\n"
          "      memory for weights and for a KV cache of N tokens (default: trained context);\n"
          "      MODEL may be a GGUF file or a deploy bundle's folder\n"
          "  logits -m MODEL (--tokens \"1 2 3\" | --prompt TEXT) --out FILE.f32 [--ctx N]\n"
          "      logits of every position as little-endian float32, n_tokens x n_vocab;\n"
          "      row i = logits after consuming tokens 0..i\n"
          "  synth -o FILE [--arch A] [--type T] [--embd-type T] [--output-type T]\n"
          "        [--vocab N] [--embd N] [--layers N] [--heads N] [--kv-heads N] [--ff N]\n"
          "        [--head-dim N] [--ctx N] [--experts N --experts-used K] [--tied] [--seed S]\n"
          "        [--std X] [--rope-base X] [--rope-scale X] [--rope-yarn X] [--window N]\n"
          "        [--gguf-version 2|3]\n"
          "      write a synthetic model with seeded random weights; A is one of llama (default),\n"
          "      qwen2, qwen2moe, olmoe, granitemoe, phi3, gemma2, deepseek2 (the MoE ones need\n"
          "      --experts); --window: gemma2's sliding window; T is one of\n"
          "      f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k\n"
          "  upcycle -m DENSE -o MOE --experts E --experts-used K [-f TEXT] [--tokens N]\n"
          "        [--heldout N] [--split cluster|random|contiguous] [--router fit|uniform]\n"
          "        [--shared N] [--combine sum|weighted] [--seed S] [--threads N]\n"
          "      split a dense llama/qwen2 model's FFNs into E experts, K used per token;\n"
          "      learns the split and router from TEXT (its last fifth, up to --heldout\n"
          "      tokens, is held out) and reports perplexity, KLD and routing there;\n"
          "      --shared N: the N most often active neurons form an always-on expert\n"
          "  quantize -m IN.gguf -o OUT.gguf --type T [-f TEXT [--calib-tokens N]] [--types-from REF]\n"
          "           [-t N] [--quiet]\n"
          "      the model with its weight matrices in T: a plain type (f32 f16 bf16 q8_0 q4_0 q4_1\n"
          "      q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k) or a mix (q3_k_m q4_k_s q4_k_m q5_k_s q5_k_m);\n"
          "      -f: an importance matrix from TEXT (first N tokens, default 8192) weights the\n"
          "      rounding; --types-from: each tensor in the type REF has for it;\n"
          "      a tensor per line on stderr (docs/quantize.md)\n"
          "  plan -m MODEL [--device NAME|all] [--json] [--ctx N] [--draft MODEL] [--cache-dir DIR]\n"
          "      what octo switches on for the model on each device (host, or a profile):\n"
          "      weights packed or mapped, KV compression and budget, spill, draft, lookahead,\n"
          "      expert cache, each with its reason; --json: the same as deploy's plan.json\n"
          "  deploy -m MODEL.gguf --device NAME[,NAME...] -o DIR [--type T] [--draft DRAFT.gguf] [-t N] [--quiet]\n"
          "      DIR/NAME per device: the weights in the layout its kernels read (mapped\n"
          "      read-only at load, nothing re-laid), its draft, plan.json and a manifest of\n"
          "      checksums; 'octo run -m DIR' loads the host's folder (--device: another)\n"
          "      (docs/deploy.md)\n"
          "  serve [-m] MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY | --api-key-file PATH]\n"
          "        [--parallel N] [--ctx N] [--max-queue 16] [--max-body BYTES] [--max-prompt BYTES]\n"
          "        [--max-json-nodes 65536] [--max-json-depth 64] [--max-connections 256]\n"
          "        [--max-connections-per-ip 32] [--idle-timeout 10]\n"
          "      an OpenAI-compatible server: POST /v1/completions and /v1/chat/completions (stream\n"
          "      or not), GET /v1/models and /health; N conversations at once on one copy of the\n"
          "      weights, up to --max-queue more requests wait (then 503); the key may also come\n"
          "      from $OCTO_API_KEY; --port 0: any free port (docs/server.md, docs/limits.md)\n"
          "  moe-prep -m MOE [-f TEXT] [--ctx N]\n"
          "      write MOE.int2, the 2-bit copies of the experts; with TEXT, measure what they\n"
          "      cost (KL divergence over N tokens, default 512), which --moe-int2 auto reads\n",
          f);
}

/* `octo help` as one string (the caller frees it); NULL when out of memory. */
static char *help_text(void) {
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m) return NULL;
    help(m);
    fclose(m);
    return buf;
}

/* Calls fn on each line of cmd's entries in the help (from "  CMD " to the next entry). */
static void for_help_lines(const char *help, const char *cmd, void (*fn)(void *ctx, const char *line, size_t n),
                           void *ctx) {
    const size_t cl = strlen(cmd);
    bool in = false;
    for (const char *l = help; l && *l;) {
        const char *e = strchr(l, '\n');
        const size_t n = e ? (size_t)(e - l) : strlen(l);
        const bool entry = n > 2 && l[0] == ' ' && l[1] == ' ' && l[2] != ' ';
        if (entry) in = n > cl + 2 && !strncmp(l + 2, cmd, cl) && l[2 + cl] == ' ';
        if (in || (entry && !strncmp(l + 2, "Mixture", 7) && strstr("run bench eval logits inspect", cmd)))
            fn(ctx, l, n);
        l = e ? e + 1 : NULL;
    }
}

static void print_line(void *ctx, const char *line, size_t n) {
    printf("%.*s\n", (int)n, line);
    ++*(int *)ctx;
}

/* `octo CMD -h`: that command's entries of the help. */
static int help_for(const char *cmd) {
    char *h = help_text();
    int lines = 0;
    for_help_lines(h, cmd, print_line, &lines);
    free(h);
    return lines ? finish_stdout(0) : usage_error("no help for '%s'", cmd);
}

/* Levenshtein distance of two short strings (capped at 32 characters). */
static int edit_distance(const char *a, const char *b) {
    int prev[33], cur[33];
    const int la = (int)strlen(a) < 32 ? (int)strlen(a) : 32, lb = (int)strlen(b) < 32 ? (int)strlen(b) : 32;
    for (int j = 0; j <= lb; j++) prev[j] = j;
    for (int i = 1; i <= la; i++) {
        cur[0] = i;
        for (int j = 1; j <= lb; j++) {
            const int sub = prev[j - 1] + (a[i - 1] != b[j - 1]), del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
        memcpy(prev, cur, sizeof(int) * (size_t)(lb + 1));
    }
    return prev[lb];
}

typedef struct {
    const char *bad;
    char best[40];
    int dist;
} suggestion;

/* Every -x / --word in a help line, scored against the unknown option. */
static void score_flags(void *ctx, const char *line, size_t n) {
    suggestion *s = ctx;
    for (size_t i = 0; i < n; i++) {
        if (line[i] != '-' || (i > 0 && line[i - 1] != ' ' && line[i - 1] != '[' && line[i - 1] != '(')) continue;
        size_t k = i;
        while (k < n && (line[k] == '-' || (line[k] >= 'a' && line[k] <= 'z') || (line[k] >= '0' && line[k] <= '9'))) k++;
        char flag[40];
        if (k - i < 2 || k - i >= sizeof flag) continue;
        memcpy(flag, line + i, k - i);
        flag[k - i] = '\0';
        int d = edit_distance(s->bad, flag);
        if (!strncmp(s->bad, flag, strlen(flag)) && strlen(flag) > 2) d = d < 1 ? d : 1; /* --temperature: --temp */
        if (d < s->dist) s->dist = d, snprintf(s->best, sizeof s->best, "%s", flag);
        i = k;
    }
}

int unknown_option(const char *cmd, const char *arg) {
    char *h = help_text();
    suggestion s = {arg, "", 1 << 20};
    for_help_lines(h, cmd, score_flags, &s);
    free(h);
    const int limit = strlen(arg) > 6 ? 3 : 2;
    if (s.best[0] && s.dist <= limit) return usage_error("%s: unknown option '%s' (did you mean %s?)", cmd, arg, s.best);
    return usage_error("%s: unknown option '%s'", cmd, arg);
}

static int tokenize_all(octo_model *m, const char *text, size_t len, int add_special, int parse_special, int32_t **out,
                        int *n_out);


/* ---------------------------------------------------------------- inspect */

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

static int cmd_inspect(int argc, char **argv) {
    const char *path = NULL, *device = NULL;
    long kv_tokens = -1;
    int json = 0;
    octo_moe_options moe = octo_model_options_defaults().moe;
    for (int i = 0; i < argc; i++) {
        int used, rc = parse_moe(argv[i], i + 1 < argc ? argv[i + 1] : NULL, &moe, &used);
        if (rc) return rc;
        if (used) { i++; continue; }
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--kv-tokens") && i + 1 < argc) {
            if (!parse_long(argv[++i], 1, 1L << 24, &kv_tokens)) return usage_error("--kv-tokens takes a positive count");
        } else return unknown_option("inspect", argv[i]);
    }
    if (!path) return usage_error("inspect needs -m MODEL");
    octo_memory before = octo_memory_usage();
    octo_client_options co = octo_client_options_defaults();
    co.device = device;
    octo_client *c = octo_client_new(&co);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = 1; /* inspect does not need a cache */
    mo.moe = moe;
    mo.kv_type = OCTO_KV_F32; /* so kv_bytes_per_token is the f32 figure */
    mo.kv.compress = 0;
    octo_model *m = c ? octo_load_model(c, path, &mo) : NULL;
    if (!m) {
        const int rc = c ? explain_unrunnable(c, path, json) : fail("out of memory");
        octo_client_free(c);
        return rc;
    }
    octo_memory after = octo_memory_usage();
    octo_model_info in = octo_model_info_get(m);
    if (kv_tokens < 0) kv_tokens = in.n_ctx_train;
    if (json) {
        print_info_json(path, &in, after.rss_bytes > before.rss_bytes ? after.rss_bytes - before.rss_bytes : 0);
        octo_model_free(m);
        octo_client_free(c);
        return 0;
    }
    printf("model:          %s\n", path);
    printf("architecture:   %s%s\n", in.arch, in.n_expert ? " (mixture of experts)" : "");
    printf("vocabulary:     %d tokens\n", in.n_vocab);
    printf("context:        %d tokens (trained)\n", in.n_ctx_train);
    printf("layers:         %d\n", in.n_layer);
    printf("embedding:      %d\n", in.n_embd);
    printf("heads:          %d query, %d key/value, head size %d\n", in.n_head, in.n_head_kv, in.head_dim);
    printf("feed-forward:   %d\n", in.n_ff);
    if (in.n_expert) printf("experts:        %d, %d used per token\n", in.n_expert, in.n_expert_used);
    if (in.n_ff_shared) printf("shared expert:  %d wide, run by every token\n", in.n_ff_shared);
    if (in.origin[0]) printf("origin:         %s\n", in.origin);
    printf("features:       %s\n", in.features);
    printf("rope:           base %g, scale %g\n", in.rope_freq_base, in.rope_freq_scale);
    printf("rms epsilon:    %g\n", in.rms_eps);
    printf("output:         %s\n", in.output_tied ? "tied to token embedding" : "separate matrix");
    printf("tensors:        %llu (%s)\n", (unsigned long long)in.n_tensors, in.tensor_types);
    printf("parameters:     %llu (%.2f M)\n", (unsigned long long)in.n_params, in.n_params / 1e6);
    printf("file:           %llu bytes (%.2f MiB)\n", (unsigned long long)in.file_bytes, mib(in.file_bytes));
    printf("weights:        %llu bytes (%.2f MiB): %s\n", (unsigned long long)in.weight_bytes, mib(in.weight_bytes),
           in.weights);
    if (in.n_expert) {
        printf("experts:        %.2f MiB each, %.2f MiB in all, read into the expert cache as tokens need them; "
               "other weights %.2f MiB\n",
               mib(in.expert_bytes_one), mib(in.expert_bytes), mib(in.resident_weight_bytes));
        printf("expert cache:   %.2f MiB: %s\n", mib(in.expert_cache_budget), in.expert_plan);
        if (in.expert_int2[0]) printf("2-bit copies:   %s\n", in.expert_int2);
    }
    printf("kv cache:       %llu bytes (%.2f MiB) for %ld tokens at f32, %.2f MiB at f16\n",
           (unsigned long long)(in.kv_bytes_per_token * (uint64_t)kv_tokens),
           mib(in.kv_bytes_per_token * (uint64_t)kv_tokens), kv_tokens,
           mib(in.kv_bytes_per_token * (uint64_t)kv_tokens / 2));
    printf("compute:        %s kernels, %d threads\n", in.cpu_path, in.n_threads);
    printf("cores:          %s\n", in.cores);
    printf("speculation:    %s\n", in.speculation);
    printf("resident:       %.2f MiB after load (+%.2f MiB for this model; weights are paged in when used)\n",
           mib(after.rss_bytes), mib(after.rss_bytes > before.rss_bytes ? after.rss_bytes - before.rss_bytes : 0));
    octo_model_free(m);
    octo_client_free(c);
    return 0;
}

/* ---------------------------------------------------------------- logits */

static int cmd_logits(int argc, char **argv) {
    const char *path = NULL, *tokens_arg = NULL, *out_path = NULL, *prompt = NULL;
    long n_ctx = 0;
    octo_moe_options moe = octo_model_options_defaults().moe;
    for (int i = 0; i < argc; i++) {
        int used, rc = parse_moe(argv[i], i + 1 < argc ? argv[i + 1] : NULL, &moe, &used);
        if (rc) return rc;
        if (used) { i++; continue; }
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens_arg = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) {
            if (!parse_long(argv[++i], 1, 1L << 24, &n_ctx)) return usage_error("--ctx takes a positive count");
        } else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) prompt = argv[++i];
        else return unknown_option("logits", argv[i]);
    }
    if (!path || (!tokens_arg && !prompt) || (tokens_arg && prompt) || !out_path)
        return usage_error("logits needs -m MODEL, one of --tokens \"IDS\" or --prompt TEXT, and --out FILE");
    int32_t *tokens = NULL;
    int n = 0;
    if (tokens_arg) {
        if (!parse_tokens(tokens_arg, &tokens, &n)) return usage_error("--tokens takes space-separated non-negative ids");
        if (n == 0) {
            free(tokens);
            return usage_error("--tokens is empty");
        }
    }
    octo_client *c = octo_client_new(NULL);
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = (int)n_ctx;
    mo.moe = moe;
    mo.kv_type = OCTO_KV_F32; /* logits for comparison with a reference: an exact cache */
    mo.kv.compress = 0;
    mo.auto_draft = OCTO_DRAFT_NONE;
    octo_model *m = c ? octo_load_model(c, path, &mo) : NULL;
    int rc = 0;
    float *logits = NULL;
    if (!m) rc = fail("%s", c ? octo_last_error(c) : "out of memory");
    err_t check = {0};
    if (!rc && atomic_file_check(out_path, &check)) rc = fail("%s", check.msg); /* before the work */
    if (!rc && prompt && tokenize_all(m, prompt, strlen(prompt), 1, 0, &tokens, &n)) rc = 1;
    if (!rc) {
        octo_model_info in = octo_model_info_get(m);
        logits = malloc(sizeof(float) * (size_t)n * (size_t)in.n_vocab);
        if (!logits) rc = fail("out of memory for %d x %d logits", n, in.n_vocab);
        else if (octo_eval(m, tokens, n, logits, OCTO_LOGITS_ALL) != OCTO_OK) rc = fail("%s", octo_model_error(m));
        if (!rc) {
            /* float32 little-endian: the host order on every target octo builds for */
            atomic_file f;
            err_t err = {0};
            if (atomic_file_open(&f, out_path, &err) ||
                atomic_file_write(&f, logits, sizeof(float) * (size_t)n * (size_t)in.n_vocab, &err) ||
                atomic_file_commit(&f, &err)) {
                atomic_file_abort(&f);
                rc = fail("%s", err.msg);
            }
        }
    }
    free(logits);
    free(tokens);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}

/* Tokenize text into a malloc'd array (one line on stderr on failure). */
static int tokenize_all(octo_model *m, const char *text, size_t len, int add_special, int parse_special, int32_t **out,
                        int *n_out) {
    if (len > (size_t)INT32_MAX) return fail("the text is too long (%zu bytes)", len);
    int cap = (int)len + 16;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) return fail("out of memory");
    int n = octo_tokenize(m, text, (int)len, add_special, parse_special, ids, cap);
    if (n > cap) { /* byte fallback can make more ids than bytes: ask again with room for all */
        int32_t *more = realloc(ids, sizeof *ids * (size_t)n);
        if (!more) { free(ids); return fail("out of memory"); }
        ids = more;
        cap = n;
        n = octo_tokenize(m, text, (int)len, add_special, parse_special, ids, cap);
        if (n > cap) n = -OCTO_ERR_INVALID_ARG; /* the library counted differently twice: never read past cap */
    }
    if (n < 0) {
        free(ids);
        return fail("%s", octo_model_error(m));
    }
    *out = ids;
    *n_out = n;
    return 0;
}

/* the client options `run` takes: where to spill, which device to plan for */
static const char *g_cache_dir, *g_device;
static int g_threads; /* -t: 0 = the performance cores */
static int g_draft_threads; /* -td: cores of the draft's own, 0 = automatic */

static octo_moe_options g_moe; /* run's --moe-cache / --moe-policy (zero: the defaults) */

/* auto_draft: OCTO_DRAFT_NONE for commands that never speculate */
static int g_vocab_only; /* tokenize, detokenize: the vocabulary alone */

static octo_model *open_model(const char *path, int n_ctx, const char *draft, int auto_draft, octo_client **client) {
    octo_client_options co = octo_client_options_defaults();
    co.cache_dir = g_cache_dir;
    co.device = g_device;
    co.n_threads = g_threads;
    *client = octo_client_new(&co);
    if (!*client) {
        fail("out of memory");
        return NULL;
    }
    octo_model_options mo = octo_model_options_defaults();
    mo.n_ctx = n_ctx;
    mo.moe = g_moe;
    mo.draft_model = draft;
    mo.auto_draft = auto_draft;
    mo.draft_threads = g_draft_threads;
    mo.vocab_only = g_vocab_only;
    const int tty = isatty(STDERR_FILENO) && !g_vocab_only; /* a load may take seconds (a self-draft, a big file) */
    if (tty) {
        fprintf(stderr, "loading %s ...", path);
        fflush(stderr);
    }
    octo_model *m = octo_load_model(*client, path, &mo);
    if (tty) fputs("\r\033[K", stderr);
    if (!m) fail("%s", octo_last_error(*client));
    return m;
}

/* ---------------------------------------------------------------- tokenize */

static int cmd_tokenize(int argc, char **argv) {
    const char *path = NULL, *text = NULL, *file = NULL;
    int no_bos = 0, special = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--text") && i + 1 < argc) text = argv[++i];
        else if (!strcmp(argv[i], "-f") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--no-bos")) no_bos = 1;
        else if (!strcmp(argv[i], "--special")) special = 1;
        else return unknown_option("tokenize", argv[i]);
    }
    if (!path || (!text == !file)) return usage_error("tokenize needs -m MODEL and one of --text T or -f FILE");
    char *buf = NULL;
    size_t len = 0;
    if (file) {
        if (read_text_file(file, &buf, &len)) return 1;
        text = buf;
    } else {
        len = strlen(text);
    }
    octo_client *c;
    g_vocab_only = 1; /* any architecture, or a vocabulary-only file */
    octo_model *m = open_model(path, 1, NULL, OCTO_DRAFT_NONE, &c);
    int rc = m ? 0 : 1;
    int32_t *ids = NULL;
    int n = 0;
    if (!rc) rc = tokenize_all(m, text, len, !no_bos, special, &ids, &n);
    if (!rc) {
        int32_t bos = octo_token_bos(m);
        int first = 1;
        for (int i = 0; i < n; i++) {
            if (no_bos && i == 0 && ids[i] == bos && !special) continue; /* a vocabulary that adds BOS anyway */
            printf(first ? "%d" : " %d", ids[i]);
            first = 0;
        }
        putchar('\n');
    }
    free(ids);
    free(buf);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}

static int cmd_detokenize(int argc, char **argv) {
    const char *path = NULL, *ids_arg = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--ids") && i + 1 < argc) ids_arg = argv[++i];
        else return unknown_option("detokenize", argv[i]);
    }
    if (!path || !ids_arg) return usage_error("detokenize needs -m MODEL and --ids \"IDS\"");
    int32_t *ids;
    int n;
    if (!parse_tokens(ids_arg, &ids, &n)) return usage_error("--ids takes space-separated non-negative ids");
    octo_client *c;
    g_vocab_only = 1; /* any architecture, or a vocabulary-only file */
    octo_model *m = open_model(path, 1, NULL, OCTO_DRAFT_NONE, &c);
    int rc = m ? 0 : 1;
    if (!rc) {
        int len = octo_detokenize(m, ids, n, NULL, 0);
        char *buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
        if (len < 0) rc = fail("%s", octo_model_error(m));
        else if (!buf) rc = fail("out of memory");
        else {
            octo_detokenize(m, ids, n, buf, len);
            if (fwrite(buf, 1, (size_t)len, stdout) != (size_t)len) rc = fail("write error");
        }
        free(buf);
    }
    free(ids);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}

/* ---------------------------------------------------------------- run */

/* The stream Ctrl-C cancels (a CLI-only global: the signal handler needs it). */
static octo_stream *volatile g_running;

static void on_sigint(int sig) {
    (void)sig;
    octo_stream *st = g_running;
    if (st) octo_stream_cancel(st); /* an atomic store: async-signal-safe */
}

static void show_prefill(void *user, int done, int total) {
    (void)user;
    if (total < 256) return; /* short prompts need no progress line */
    fprintf(stderr, "\rprompt: %d/%d tokens", done, total);
    if (done == total) fputs("\r\033[K", stderr);
    fflush(stderr);
}

/* --stats --json: the figures as one JSON object on stderr (the list's run
 * column, OCTO_STATS in octo.h). */
static void print_stats_json(const octo_stats *s) {
    fputc('{', stderr);
    stats_print_json(stderr, s, STATS_RUN, 1, 99, 0);
    fputs("}\n", stderr);
}

static void print_stats(const octo_stats *s) {
    fprintf(stderr, "prompt       %6d tokens (%d evaluated) in %8.1f ms  %9.1f tokens/s\n", s->prompt_tokens,
            s->prefill_tokens, s->prefill_ms, s->prefill_tokens_per_s);
    fprintf(stderr, "generation   %6d tokens in %8.1f ms  %9.1f tokens/s\n", s->decode_tokens, s->decode_ms,
            s->decode_tokens_per_s);
    fprintf(stderr, "first token  %8.1f ms\n", s->time_to_first_token_ms);
    fprintf(stderr, "context      %6d / %d tokens, KV cache %.2f MiB (%.0f%% of %.2f MiB)", s->context_tokens,
            s->context_size, mib(s->kv_bytes), 100.0 * s->kv_cache_utilization, mib(s->kv_budget_bytes));
    if (s->kv_draft_bytes) fprintf(stderr, ", the draft's %.2f MiB of it", mib(s->kv_draft_bytes));
    fputc('\n', stderr);
    if (s->speculative_acceptance_rate >= 0 && s->spec_tree_passes)
        fprintf(stderr,
                "speculation  %s: %d of %d tree nodes accepted in %d verify passes (%.2f tokens a pass, %d off "
                "the first line), last tree %d nodes; %.0f ms proposing, %.0f ms verifying\n",
                s->spec_proposer, s->spec_accepted, s->spec_proposed, s->spec_steps,
                s->spec_steps ? 1.0 + (double)s->spec_accepted / s->spec_steps : 0.0, s->spec_off_line, s->spec_k,
                s->spec_draft_ms, s->spec_ms - s->spec_draft_ms);
    else if (s->speculative_acceptance_rate >= 0)
        fprintf(stderr,
                "speculation  %s: %d of %d drafted tokens accepted (%.1f%%) in %d verify passes, k now %d; "
                "%.0f ms proposing, %.0f ms verifying\n",
                s->spec_proposer, s->spec_accepted, s->spec_proposed, 100.0 * s->speculative_acceptance_rate,
                s->spec_steps, s->spec_k, s->spec_draft_ms, s->spec_ms - s->spec_draft_ms);
    if (s->lookahead_ngrams)
        fprintf(stderr, "lookahead    the window made %d n-grams, %d of them new to the pool; %d of %d drafts from the pool accepted\n",
                s->lookahead_ngrams, s->lookahead_new, s->lookahead_pool_accepted, s->lookahead_pool_proposed);
    if (s->spec_ahead_used + s->spec_ahead_dropped)
        fprintf(stderr, "beside       %d draft steps run while the model verified: %d used by the next pass, %d dropped\n",
                s->spec_ahead_used + s->spec_ahead_dropped, s->spec_ahead_used, s->spec_ahead_dropped);
    if (s->spec_note[0]) fprintf(stderr, "speculation  %s\n", s->spec_note);
    if (s->prefill_lookahead_tokens || s->prompt_tokens_dropped)
        fprintf(stderr, "prompt       the draft read it and wrote %d tokens ahead in %.1f ms%s; %d prompt tokens dropped\n",
                s->prefill_lookahead_tokens, s->prefill_draft_ms,
                s->prefill_speckv ? ", its lookahead chose the entries kept" : "", s->prompt_tokens_dropped);
    if (s->expert_cache_hit_rate >= 0)
        fprintf(stderr,
                "experts      %.1f%% cache hits; %.2f MiB read from the file and %.2f ms waited on it per token; "
                "cache %.2f of %.2f MiB (experts: %.2f MiB)\n",
                100.0 * s->expert_cache_hit_rate, mib((uint64_t)s->expert_bytes_read_per_token),
                s->expert_stall_ms_per_token, mib(s->expert_cache_bytes), mib(s->expert_cache_capacity),
                mib(s->expert_bytes));
    if (s->expert_int2_loads || s->expert_int2_errors)
        fprintf(stderr, "experts      %llu 2-bit copies read, %llu lookups served by one, %llu promoted, %llu failed\n",
                (unsigned long long)s->expert_int2_loads, (unsigned long long)s->expert_int2_served,
                (unsigned long long)s->expert_int2_promotions, (unsigned long long)s->expert_int2_errors);
    if (s->expert_prefetch_recall >= 0)
        fprintf(stderr,
                "experts      %llu predicted ones read ahead (in %.0f%% of the decode passes); reads ahead served "
                "%.1f%% of the lookups that needed the file in time\n",
                (unsigned long long)s->expert_prefetched, 100.0 * (s->expert_readahead_share > 0 ? s->expert_readahead_share : 0),
                100.0 * s->expert_prefetch_recall);
    if (s->expert_lookups)
        fprintf(stderr,
                "experts      %llu fetched; the next-layer prediction named %.1f%% of the routed experts "
                "(%.1f%% of what it named was routed)\n",
                (unsigned long long)s->expert_lookups, 100.0 * s->expert_prediction_rate,
                100.0 * s->expert_prediction_precision);
    if (s->expert_batch_saved_bytes_per_token >= 0)
        fprintf(stderr, "experts      a token fed in a batch (prompt, verification) saved %.2f MiB of expert reads: "
                "its batch fetched each expert once\n", mib((uint64_t)s->expert_batch_saved_bytes_per_token));
    if (s->kv_spill_on)
        fprintf(stderr, "KV spill     %lld blocks on file, %lld written, %lld read back (%.0f%% hits, %.1f us each)%s%s\n",
                (long long)s->kv_blocks_spilled, (long long)s->kv_spill_writes, (long long)s->kv_spill_reads,
                100.0 * s->kv_spill_hit_rate, s->kv_spill_read_us, s->kv_spill_note[0] ? "; " : "", s->kv_spill_note);
    fprintf(stderr, "memory       %.1f MiB resident (PSS %.1f MiB), %.1f MiB peak\n", mib(s->rss_bytes),
            mib(octo_memory_usage().pss_bytes), mib(s->peak_rss_bytes));
    if (s->warning[0]) fprintf(stderr, "warning      %s\n", s->warning);
}

/* A stream that ended short of what was asked is not a success: Ctrl-C
 * exits 130 as a shell expects, a full context 1; each with one line. */
static int stop_status(octo_stream *st) {
    switch (octo_stream_stop_reason(st)) {
    case OCTO_STOP_CANCELLED:
        fail("interrupted");
        return 130;
    case OCTO_STOP_CONTEXT_FULL:
        return fail("stopped after %d tokens: the context is full (a larger --ctx holds more)",
                    octo_stream_token_count(st));
    default: return 0;
    }
}

/* Drain a stream to stdout (text, or ids on one line). Returns 0 or 1 after printing the error. */
static int drain(octo_stream *st, int ids, char **reply, size_t *reply_len) {
    g_running = st;
    int printed = 0; /* ids printed so far */
    for (const char *piece; (piece = octo_stream_next(st));) {
        if (ids) {
            const int32_t *all;
            int n = octo_stream_tokens(st, &all);
            for (; printed < n; printed++) printf(printed ? " %d" : "%d", all[printed]);
        } else {
            fwrite(piece, 1, (size_t)octo_stream_piece_size(st), stdout);
        }
        fflush(stdout);
        if (reply) {
            size_t n = strlen(piece);
            char *more = realloc(*reply, *reply_len + n + 1);
            if (more) {
                memcpy(more + *reply_len, piece, n + 1);
                *reply = more;
                *reply_len += n;
            }
        }
    }
    g_running = NULL;
    if (ids) {
        const int32_t *all;
        int n = octo_stream_tokens(st, &all);
        for (; printed < n; printed++) printf(printed ? " %d" : "%d", all[printed]);
        putchar('\n');
    }
    fflush(stdout);
    if (octo_stream_status(st) != OCTO_OK) return fail("%s", octo_stream_error(st));
    return stop_status(st);
}

static int parse_sampling(const char *a, const char *v, octo_generate_params *gp, int *consumed) {
    long n;
    *consumed = 1;
    if (!strcmp(a, "-n")) { if (!v || !parse_long(v, 1, 1L << 24, &n)) return usage_error("-n takes a positive count"); gp->max_tokens = (int)n; }
    else if (!strcmp(a, "--temp")) { if (!v || !parse_float(v, &gp->temperature)) return usage_error("--temp takes a number"); }
    else if (!strcmp(a, "--top-k")) { if (!v || !parse_long(v, 0, 1L << 24, &n)) return usage_error("--top-k takes a count >= 0"); gp->top_k = (int)n; }
    else if (!strcmp(a, "--top-p")) { if (!v || !parse_float(v, &gp->top_p)) return usage_error("--top-p takes a number"); }
    else if (!strcmp(a, "--min-p")) { if (!v || !parse_float(v, &gp->min_p)) return usage_error("--min-p takes a number"); }
    else if (!strcmp(a, "--repeat-penalty")) { if (!v || !parse_float(v, &gp->repeat_penalty)) return usage_error("--repeat-penalty takes a number"); }
    else if (!strcmp(a, "--seed")) {
        char *end;
        errno = 0;
        unsigned long long s = v ? strtoull(v, &end, 10) : 0;
        if (!v || errno || end == v || *end) return usage_error("--seed takes a whole number");
        gp->seed = s;
    } else {
        *consumed = 0;
        return 0;
    }
    return 0;
}

/* The conversation so far: messages and the strings they point at. */
typedef struct {
    octo_message *msgs;
    char **owned; /* [i] is msgs[i].content's own copy (NULL for the system prompt) */
    int n;
} chat_history;

static int history_add(chat_history *h, const char *role, char *content) {
    octo_message *m = realloc(h->msgs, sizeof *m * (size_t)(h->n + 1));
    if (m) h->msgs = m;
    char **o = m ? realloc(h->owned, sizeof *o * (size_t)(h->n + 1)) : NULL;
    if (o) h->owned = o;
    if (!m || !o) return 0;
    h->msgs[h->n] = (octo_message){role, content};
    h->owned[h->n++] = strcmp(role, "system") ? content : NULL;
    return 1;
}

/* Forget the k oldest messages after the system prompt. */
static void history_drop(chat_history *h, int k) {
    const int first = h->n && !strcmp(h->msgs[0].role, "system");
    for (int i = first; i < first + k; i++) free(h->owned[i]);
    memmove(h->msgs + first, h->msgs + first + k, sizeof *h->msgs * (size_t)(h->n - first - k));
    memmove(h->owned + first, h->owned + first + k, sizeof *h->owned * (size_t)(h->n - first - k));
    h->n -= k;
}

static void history_free(chat_history *h) {
    for (int i = 0; i < h->n; i++) free(h->owned[i]);
    free(h->owned);
    free(h->msgs);
}

/* Room for a reply of max_tokens before the turn, so that a full context does
 * not cut it: the oldest exchanges (a user line and its reply) go, as many as
 * octo_chat_fit says; all but the newest line when even that one leaves less
 * room. OCTO_OK, or the status of the failure (CONTEXT_FULL: the newest line
 * does not fit alone). */
static octo_status make_room(octo_model *m, chat_history *h, int max_tokens) {
    const int first = h->n && !strcmp(h->msgs[0].role, "system");
    int drop = octo_chat_fit(m, h->msgs, h->n, max_tokens);
    if (drop == -OCTO_ERR_CONTEXT_FULL && (drop = octo_chat_fit(m, h->msgs, h->n, 0)) >= 0) drop = h->n - first - 1;
    if (drop < 0) return (octo_status)-drop;
    drop += drop % 2; /* whole exchanges: after the system prompt, user and assistant alternate */
    if (drop > h->n - first - 1) drop = h->n - first - 1;
    if (drop) { /* what the context shift cost, on stderr beside the conversation */
        history_drop(h, drop);
        fprintf(stderr, "octo: the %d oldest exchange%s dropped to make room for the reply (%d messages kept)\n",
                (drop + 1) / 2, drop > 2 ? "s were" : " was", h->n);
    }
    return OCTO_OK;
}

/* One turn: room made (make_room), then the reply to the history's last
 * message, printed and added. A message that does not fit alone is dropped
 * with one line. */
static int chat_turn(octo_model *m, chat_history *h, int ids, const octo_generate_params *gp, int *started) {
    const octo_status room = make_room(m, h, gp->max_tokens);
    octo_stream *st = room ? NULL : octo_chat(m, h->msgs, h->n, gp);
    if (!st) {
        fail("%s", octo_model_error(m));
        if (octo_model_status(m) != OCTO_ERR_CONTEXT_FULL) return 1;
        free(h->owned[--h->n]); /* this message alone is too long: the session goes on without it */
        return 0;
    }
    (*started)++;
    char *reply = calloc(1, 1);
    size_t reply_len = 0;
    int rc = drain(st, ids, &reply, &reply_len);
    if (octo_stream_stop_reason(st) == OCTO_STOP_CONTEXT_FULL) rc = 0; /* a reply cut short: the next turn makes room */
    octo_stream_free(st);
    putchar('\n');
    if (rc || !reply || !history_add(h, "assistant", reply)) {
        free(reply);
        return rc ? rc : fail("out of memory");
    }
    return 0;
}

/* One line of the conversation into *line; false at the end of input. On a
 * terminal with libedit: line editing and history (arrows, Ctrl-R). */
static bool read_line(int tty, char **line, size_t *cap) {
#ifdef OCTO_HAVE_EDITLINE
    if (tty) {
        char *l = readline("> ");
        if (!l) return false;
        if (*l) add_history(l);
        free(*line);
        *line = l;
        *cap = strlen(l) + 1;
        return true;
    }
#endif
    if (tty) {
        fputs("> ", stderr);
        fflush(stderr);
    }
    return getline(line, cap, stdin) >= 0;
}

/* /exit (1), /reset and /stats (0), else -1: a message. */
static int chat_command(octo_model *m, chat_history *h, const char *line) {
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) return 1;
    if (!strcmp(line, "/reset")) { /* the system prompt stays */
        history_drop(h, h->n - (h->n && !strcmp(h->msgs[0].role, "system")));
        octo_reset(m);
        fputs("octo: the conversation was reset\n", stderr);
        return 0;
    }
    if (!strcmp(line, "/stats")) {
        octo_stats s = octo_model_stats(m);
        print_stats(&s);
        return 0;
    }
    return -1;
}

/* interactive: one user line per turn (any length); the history is resent and the cache reuses its prefix;
 * /reset, /stats and /exit are commands */
static int chat_session(octo_model *m, const char *system, int ids, const octo_generate_params *gp, int *started) {
    chat_history h = {0};
    int rc = system && !history_add(&h, "system", (char *)system) ? fail("out of memory") : 0;
    const int tty = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t line_cap = 0;
    while (!rc) {
        if (!read_line(tty, &line, &line_cap)) break;
        line[strcspn(line, "\n")] = '\0';
        if (!line[0]) continue;
        const int cmd = chat_command(m, &h, line);
        if (cmd > 0) break; /* /exit */
        if (cmd == 0) continue;
        char *user = strdup(line);
        if (!user || !history_add(&h, "user", user)) {
            free(user);
            rc = fail("out of memory");
            break;
        }
        rc = chat_turn(m, &h, ids, gp, started);
    }
    free(line);
    history_free(&h);
    return rc;
}

/* A prompt from a file, or from stdin for "-"; NULL after printing why not. */
static char *read_prompt(const char *file) {
    char *text = NULL;
    size_t len = 0;
    if (read_text_file(!strcmp(file, "-") ? "/dev/stdin" : file, &text, &len)) return NULL;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r')) text[--len] = '\0'; /* a file's last newline */
    return text;
}

/* run's options; positional MODEL and PROMPT as well as -m / -p. */
typedef struct {
    const char *path, *prompt, *prompt_file, *draft;
    int chat, ids, stats, json, seeded;
    long n_ctx, threads;
} run_args;

static int parse_run(int argc, char **argv, run_args *r, octo_generate_params *gp) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int used, rc = parse_sampling(a, v, gp, &used);
        if (!rc && !used) rc = parse_moe(a, v, &g_moe, &used);
        if (rc) return rc;
        if (used) {
            r->seeded |= !strcmp(a, "--seed");
            i++;
            continue;
        }
        if (!strcmp(a, "-m") && v) { r->path = v; i++; }
        else if (!strcmp(a, "-p") && v) { r->prompt = v; i++; }
        else if (!strcmp(a, "-f") && v) { r->prompt_file = v; i++; }
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) {
            if (!parse_long(v, 1, OCTO_MAX_THREADS, &r->threads)) return usage_error("-t takes 1..%d", OCTO_MAX_THREADS);
            i++;
        }
        else if (!strcmp(a, "--json")) r->json = 1;
        else if (a[0] != '-' || !strcmp(a, "-")) { /* positional: the model, then the prompt ("-": stdin) */
            if (!r->path) r->path = a;
            else if (!r->prompt && !r->prompt_file) *(strcmp(a, "-") ? &r->prompt : &r->prompt_file) = a;
            else return usage_error("run: one model and one prompt, not also '%s'", a);
        }
        else if (!strcmp(a, "--ctx") && v) { if (!parse_long(v, 1, 1L << 24, &r->n_ctx)) return usage_error("--ctx takes a positive count"); i++; }
        else if (!strcmp(a, "--chat")) r->chat = 1;
        else if (!strcmp(a, "--ids")) r->ids = 1;
        else if (!strcmp(a, "--stats")) r->stats = 1;
        else if (!strcmp(a, "--spec") && v) {
            int mode;
            if (!parse_spec_mode(v, &mode)) return usage_error("--spec is one of %s", spec_mode_names());
            gp->spec = (octo_spec_mode)mode;
            i++;
        }
        else if (!strcmp(a, "--lookahead") && v) {
            if (!parse_lookahead(v, &gp->lookahead_w, &gp->lookahead_n, &gp->lookahead_g))
                return usage_error("--lookahead takes W,N,G (e.g. 5,3,4)");
            i++;
        }
        else if (!strcmp(a, "--draft") && v) { r->draft = v; i++; }
        else if (!strcmp(a, "--cache-dir") && v) { g_cache_dir = v; i++; }
        else if (!strcmp(a, "--device") && v) { g_device = v; i++; }
        else if (!strcmp(a, "--spec-tree") && v) {
            if (!parse_spec_tree(v, &gp->spec_tree)) return usage_error("--spec-tree takes auto, off or 1..31 nodes");
            i++;
        }
        else if (!strcmp(a, "--spec-ahead") && v) {
            if (!parse_on_off(v, &gp->spec_ahead)) return usage_error("--spec-ahead takes on or off");
            i++;
        }
        else if ((!strcmp(a, "-td") || !strcmp(a, "--threads-draft")) && v) {
            long t;
            if (!parse_long(v, 1, OCTO_MAX_THREADS, &t)) return usage_error("-td takes 1..%d", OCTO_MAX_THREADS);
            g_draft_threads = (int)t;
            i++;
        }
        else if (!strcmp(a, "--spec-k") && v) {
            long k;
            if (!parse_long(v, 1, 10, &k)) return usage_error("--spec-k takes 1..10");
            gp->spec_k = (int)k;
            i++;
        }
        else if (!strcmp(a, "--prompt-compress") && v) {
            if (!parse_float(v, &gp->prompt_compress) || !(gp->prompt_compress > 0.0f && gp->prompt_compress <= 1.0f))
                return usage_error("--prompt-compress takes the share of the prompt to keep, in (0, 1], not '%s'", v);
            i++;
        }
        else return unknown_option("run", a);
    }
    if (!r->path) return usage_error("run needs a model: octo run MODEL \"PROMPT\" (or -m MODEL -p PROMPT)");
    if (r->prompt && r->prompt_file) return usage_error("run: a prompt (-p) or a prompt file (-f), not both");
    if (!r->chat && !r->prompt && !r->prompt_file) return usage_error("run needs a prompt: -p PROMPT, -f FILE, - (stdin) or --chat");
    return 0;
}

static int cmd_run(int argc, char **argv) {
    run_args r = {0};
    octo_generate_params gp = octo_generate_params_defaults();
    int rc = parse_run(argc, argv, &r, &gp);
    if (rc) return rc;
    char *file_prompt = r.prompt_file ? read_prompt(r.prompt_file) : NULL;
    if (r.prompt_file && !file_prompt) return 1;
    const char *prompt = file_prompt ? file_prompt : r.prompt;
    const int chat = r.chat, ids = r.ids;
    /* sampling without --seed: a new text each run (a fixed seed repeats one) */
    if (!r.seeded) gp.seed = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
    if (isatty(STDERR_FILENO)) gp.on_prefill = show_prefill; /* progress only where a person reads stderr */
    octo_client *c;
    g_threads = (int)r.threads;
    octo_model *m = open_model(r.path, (int)r.n_ctx, r.draft, gp.spec == OCTO_SPEC_SELF ? OCTO_DRAFT_SELF : gp.spec == OCTO_SPEC_NONE || gp.spec == OCTO_SPEC_LOOKAHEAD ? OCTO_DRAFT_NONE : OCTO_DRAFT_AUTO, &c);
    if (!m) {
        free(file_prompt);
        octo_client_free(c);
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    int started = 0; /* streams that ran: without one there are no stats to show */
    if (!chat) {
        octo_stream *st = octo_generate(m, prompt, &gp);
        if (!st) rc = fail("%s", octo_model_error(m));
        else {
            started++;
            rc = drain(st, ids, NULL, NULL);
            octo_stream_free(st);
        }
        if (!ids) putchar('\n');
    } else {
        rc = chat_session(m, prompt, ids, &gp, &started);
    }
    if (r.stats && started) {
        fflush(stdout);
        octo_stats s = octo_model_stats(m);
        if (r.json) print_stats_json(&s);
        else print_stats(&s);
    }
    free(file_prompt);
    if (!rc && started && g_moe.trace && octo_model_stats(m).expert_trace_failed)
        rc = fail("could not write the whole expert trace to %s", g_moe.trace);
    octo_model_free(m);
    octo_client_free(c);
    return rc;
}

/* ---------------------------------------------------------------- synth */

static int cmd_synth(int argc, char **argv) {
    synth_opts o = synth_defaults();
    const char *out = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        struct { const char *flag; int *dst; long min, max; } ints[] = {
            {"--vocab", &o.n_vocab, 259, 1 << 22}, {"--embd", &o.n_embd, 1, 1 << 16},
            {"--layers", &o.n_layer, 1, 1024}, {"--heads", &o.n_head, 1, 1024},
            {"--kv-heads", &o.n_head_kv, 1, 1024}, {"--ff", &o.n_ff, 1, 1 << 20},
            {"--head-dim", &o.head_dim, 2, 1 << 14}, {"--ctx", &o.n_ctx, 1, 1 << 24},
            {"--experts", &o.n_expert, 0, 1024}, {"--experts-used", &o.n_expert_used, 0, 1024},
            {"--window", &o.swa_window, 0, 1 << 24},
        };
        int matched = 0;
        for (size_t k = 0; k < sizeof ints / sizeof *ints; k++)
            if (!strcmp(a, ints[k].flag)) {
                if (!v || !parse_long(v, ints[k].min, ints[k].max, &n))
                    return usage_error("%s takes a whole number from %ld to %ld", a, ints[k].min, ints[k].max);
                *ints[k].dst = (int)n;
                matched = 1;
                i++;
            }
        if (matched) continue;
        if (!strcmp(a, "-o") && v) { out = v; i++; }
        else if (!strcmp(a, "--arch") && v) { o.arch = v; i++; }
        else if ((!strcmp(a, "--type") || !strcmp(a, "--embd-type") || !strcmp(a, "--output-type")) && v) {
            int t = quant_type_from_name(v);
            if (t < 0 || !quant_type_supported((uint32_t)t) || t == QT_Q8_K) return usage_error("unknown tensor type '%s'", v);
            if (!strcmp(a, "--type")) o.type = (uint32_t)t;
            else if (!strcmp(a, "--embd-type")) o.embd_type = (uint32_t)t;
            else o.output_type = (uint32_t)t;
            i++;
        } else if (!strcmp(a, "--tied")) o.tied_output = true;
        else if (!strcmp(a, "--seed") && v) {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end) return usage_error("--seed takes a whole number");
            o.seed = s;
            i++;
        } else if (!strcmp(a, "--std") && v) { if (!parse_float(v, &o.weight_std) || o.weight_std < 0) return usage_error("--std takes a number >= 0"); i++; }
        else if (!strcmp(a, "--rope-base") && v) { if (!parse_float(v, &o.rope_freq_base) || o.rope_freq_base <= 0) return usage_error("--rope-base takes a positive number"); i++; }
        else if (!strcmp(a, "--rope-scale") && v) { if (!parse_float(v, &o.rope_scale_linear) || o.rope_scale_linear < 0) return usage_error("--rope-scale takes a number >= 0"); i++; }
        else if (!strcmp(a, "--rope-yarn") && v) { if (!parse_float(v, &o.rope_yarn) || o.rope_yarn < 0) return usage_error("--rope-yarn takes a number >= 0"); i++; }
        else if (!strcmp(a, "--gguf-version") && v) {
            if (!parse_long(v, 2, 3, &n)) return usage_error("--gguf-version is 2 or 3");
            o.gguf_version = (uint32_t)n;
            i++;
        } else return unknown_option("synth", a);
    }
    if (!out) return usage_error("synth needs -o FILE");
    err_t err = {0};
    if (synth_write(&o, out, &err)) return fail("%s", err.msg);
    return 0;
}

#ifndef OCTO_HAVE_SERVE
int cmd_serve(int argc, char **argv) {
    (void)argc, (void)argv;
    return fail("serve: this octo was built without libmicrohttpd and cJSON (scripts/setup.sh installs them)");
}
#endif

/* An interrupted or terminated command removes the temporary files and
 * folders it named (core/tempfiles.h), then dies of the signal as it would
 * have. run and serve put their own handlers over this one. */
static void on_interrupt(int sig) {
    tempfiles_remove_all(); /* async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void remove_temporaries_on_interrupt(void) {
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction sa, was;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_interrupt;
        if (sigs[i] == SIGHUP && sigaction(SIGHUP, NULL, &was) == 0 && was.sa_handler == SIG_IGN)
            continue; /* under nohup: a hang-up is not the end */
        sigaction(sigs[i], &sa, NULL);
    }
}

int main(int argc, char **argv) {
    remove_temporaries_on_interrupt();
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
        printf("octo %s\n", octo_version());
        return finish_stdout(0);
    }
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        help(argc < 2 ? stderr : stdout);
        return finish_stdout(argc < 2 ? 2 : 0);
    }
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } cmds[] = {{"run", cmd_run},         {"tokenize", cmd_tokenize}, {"detokenize", cmd_detokenize},
                {"inspect", cmd_inspect}, {"bench", cmd_bench},       {"eval", cmd_eval},
                {"logits", cmd_logits},   {"synth", cmd_synth},       {"upcycle", cmd_upcycle},
                {"moe-prep", cmd_moe_prep}, {"quantize", cmd_quantize}, {"plan", cmd_plan},
                {"deploy", cmd_deploy}, {"serve", cmd_serve}};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        if (strcmp(argv[1], cmds[i].name)) continue;
        for (int k = 2; k < argc; k++) /* -h / --help anywhere: this command's help */
            if (!strcmp(argv[k], "-h") || !strcmp(argv[k], "--help")) return help_for(cmds[i].name);
        return finish_stdout(cmds[i].run(argc - 2, argv + 2));
    }
    return usage_error("unknown command '%s'", argv[1]);
}
