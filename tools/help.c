/*
 * help — `octo help` and each command's -h (the text, written by hand), and
 * the nearest option to one a command does not take, from the option table
 * (options.c).
 */
#include "help.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void help_tools(FILE *f);
static void help_converters(FILE *f);

void help(FILE *f) {
    fputs("usage: octo <command> [options]   (octo --version: the version)\n"
          "\n"
          "  run [-m] MODEL [-p] PROMPT | -f FILE | - [-n N] [-t THREADS] [--temp T] [--top-k K]\n"
          "      [--top-p P] [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--presence-penalty P]\n"
          "      [--frequency-penalty F] [--seed S] [--ctx N] [--chat] [--ids] [--grammar FILE | --json-schema FILE]\n"
          "      [--stats [--json]] [--spec MODE] [--draft MODEL] [--spec-k N] [--spec-tree auto|off|N]\n"
          "      [--lookahead W,N,G] [--prompt-compress R] [--cache-dir DIR] [--device NAME]\n"
          "      [-td N] [--spec-ahead on|off]\n"
          "      stream a continuation to stdout; the prompt from -p, a file (-f) or stdin (-); without\n"
          "      a model, the embedded stories260K (models/); -n -1: until the context is full (and\n"
          "      --repeat-last-n -1: all of it);\n"
          "      llama.cpp's spellings work too (-c, --n-predict, -s, -md, ...: the README's table);\n"
          "      sampling without --seed draws a new seed each run; --chat: an interactive\n"
          "      conversation (with -p as the system prompt; /stats, /reset, /exit; when the context\n"
          "      fills, the oldest exchanges are dropped); --ids: print the generated token ids\n"
          "      on one line; --grammar: the text follows a GBNF grammar (llama.cpp's format),\n"
          "      --json-schema: the text is JSON valid against the schema (docs/structured-output.md);\n"
          "      --stats: a table of speed, token latency, memory and the CPU threads\n"
          "      in force (and why) on stderr at the end (--json: one JSON object); every command\n"
          "      takes -h; MODE (speculative decoding): ",
          f);
    fputs(spec_mode_names(), f);
    fputs("\n"
          "  LoRA adapters: run, bench, eval, logits and serve take --lora FILE and\n"
          "      --lora-scaled FILE SCALE (llama.cpp's adapter GGUF; several stack, each\n"
          "      scaled by SCALE x alpha / rank), applied beside the base's weights (docs/adapters.md)\n"
          "  Mixture-of-Experts models: run, bench, eval, logits, inspect and serve take\n"
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
          "  bench -m MODEL --json-schema FILE | --grammar FILE [--prompt T] [-n 128] [-r REPS] [--temp T] [--spec MODE]\n"
          "      [--json] [--mask-only]\n"
          "      generation with and without the constraint, alternated: wall-clock tokens/s after the prompt\n"
          "      (sampling and the grammar's mask included) and their ratio; --mask-only: the mask alone on\n"
          "      MODEL's vocabulary (any GGUF with one), documents drawn uniformly among the allowed tokens\n"
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
          "      row i = logits after consuming tokens 0..i\n",
          f);
    help_converters(f);
}

/* The entries from synth on: models made, converted, planned, deployed, served and cached. */
static void help_converters(FILE *f) {
    fputs("  synth -o FILE [--arch A] [--type T] [--embd-type T] [--output-type T]\n"
          "        [--vocab N] [--embd N] [--layers N] [--heads N] [--kv-heads N] [--ff N]\n"
          "        [--head-dim N] [--ctx N] [--experts N --experts-used K] [--tied] [--seed S]\n"
          "        [--std X] [--rope-base X] [--rope-scale X] [--rope-yarn X] [--window N]\n"
          "        [--gguf-version 2|3]\n"
          "      write a synthetic model with seeded random weights; A is one of llama (default),\n"
          "      qwen2, qwen2moe, olmoe, granitemoe, phi3, gemma2, deepseek2 (the MoE ones need\n"
          "      --experts); --window: gemma2's sliding window; T is one of\n"
          "      f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k\n"
          "  synth --lora-for MODEL -o FILE [--rank R] [--alpha A] [--type f32|f16|bf16|q8_0] [--seed S] [--std X]\n"
          "      a LoRA adapter with seeded random factors on MODEL's q, k, v, o, gate, up and down\n"
          "      (alpha: the rank unless given), in llama.cpp's adapter format\n"
          "  upcycle -m DENSE -o MOE --experts E --experts-used K [-f TEXT] [--tokens N]\n"
          "        [--heldout N] [--split cluster|random|contiguous] [--router fit|uniform]\n"
          "        [--shared N] [--combine sum|weighted] [--seed S] [--threads N]\n"
          "      split a dense llama/qwen2 model's FFNs into E experts, K used per token;\n"
          "      learns the split and router from TEXT (its last fifth, up to --heldout\n"
          "      tokens, is held out) and reports perplexity, KLD and routing there;\n"
          "      --shared N: the N most often active neurons form an always-on expert;\n"
          "      upcycle -m DENSE --measure MOE -f TEXT: that measurement alone, of an MoE\n"
          "      already written (one healed by finetune from DENSE, say)\n"
          "  quantize -m IN.gguf -o OUT.gguf --type T [-f TEXT [--calib-tokens N]] [--types-from REF]\n"
          "           [-t N] [--quiet]\n"
          "      the model with its weight matrices in T: a plain type (f32 f16 bf16 q8_0 q4_0 q4_1\n"
          "      q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k) or a mix (q3_k_m q4_k_s q4_k_m q5_k_s q5_k_m);\n"
          "      -f: an importance matrix from TEXT (first N tokens, default 8192) weights the\n"
          "      rounding; --types-from: each tensor in the type REF has for it;\n"
          "      a tensor per line on stderr (docs/quantize.md)\n"
          "  merge -m BASE.gguf --lora A.gguf [--lora-scaled B.gguf S ...] -o OUT.gguf\n"
          "      LoRA adapters folded into a copy of their base (as llama-export-lora): each adapted\n"
          "      matrix becomes W + scale x B.A, written F32 when it was F32, else F16 (docs/adapters.md)\n"
          "  finetune -m MODEL -f DATA -o OUT.gguf [--valid DATA] [--steps 100] [--batch 4] [--seq-len 256]\n"
          "           [--rank 16] [--alpha 32] [--targets q,k,v,o,gate,up,down[,router]] [--lr 1e-3] [--lr-min 1e-4]\n"
          "           [--warmup N] [--clip 1] [--weight-decay 0.01] [--seed 1] [--type f32|f16|bf16|q8_0]\n"
          "           [--checkpoint OUT.gguf.ckpt] [--checkpoint-every 10] [--restart] [--quiet]\n"
          "           [--distill TARGET.gguf] [--full | --adapter] [--memory-budget BYTES]\n"
          "      train a LoRA adapter of MODEL on DATA (a text file, a folder of them, or chat .jsonl:\n"
          "      {\"messages\": [...]} per line, the assistants' turns learnt) with AdamW, warm-up (a\n"
          "      tenth of the steps unless given, at most 100) and cosine decay; OUT in llama.cpp's adapter format; --valid: held-out loss before and\n"
          "      after; Ctrl-C or a crash: the same command resumes from the checkpoint, to the same\n"
          "      bytes (llama-family models, dense or Mixtral-gated MoE; docs/training.md); --full: every weight\n"
          "      trained, OUT a whole GGUF; --distill TARGET: learn TARGET's next-token distributions\n"
          "      (KL) on DATA, a draft for TARGET (every weight of a model up to 64 M parameters unless\n"
          "      --adapter); --memory-budget: a sequence's activations (default: what is free); past\n"
          "      it each layer is computed again in the backward; an MoE: experts no token of a step\n"
          "      reached are not updated by it, and OUT's training.expert_tokens has each one's tokens\n"
          "      --fl-round R [--from GLOBAL] [--fl-device ID]: a federated round's device: trains from\n"
          "      round R-1's GLOBAL (round 1: the base), A frozen, and OUT is an update holding B's change\n"
          "      per matrix and per expert reached, with their tokens (docs/federated.md); --fl-clip C\n"
          "      [--fl-noise Z] [--fl-delta 1e-5]: its norm clipped to C, Gaussian noise of deviation ZxC\n"
          "      added (every group then sent), the (epsilon, delta) of differential privacy stated\n"
          "  fedavg -m BASE [--from GLOBAL] -o OUT [--partial] UPDATE...\n"
          "      a round's updates averaged, each group weighted by its tokens, into the round's global\n"
          "      adapter (it loads as any adapter does, and is the next round's --from), or --partial into an aggregate\n"
          "      that averages with others as its updates would; every update checked first\n"
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
          "        [--max-connections-per-ip 32] [--idle-timeout 10] [--request-timeout 30]\n"
          "      an OpenAI-compatible server: POST /v1/completions and /v1/chat/completions (stream\n"
          "      or not; response_format, tools, logprobs, n), /v1/embeddings, GET /v1/models,\n"
          "      /health, /metrics and / (a chat page); N conversations at once on one copy of the\n"
          "      weights, up to --max-queue more requests wait (then 503); the key may also come\n"
          "      from $OCTO_API_KEY; --port 0: any free port (docs/server.md, docs/limits.md)\n"
          "  pull REF [REF...]\n"
          "      a model into the cache, its path on stdout: hf://ORG/REPO/FILE.gguf, ORG/REPO:QUANT\n"
          "      (the hub's listing names the file; ORG/REPO alone: the only GGUF, else Q4_K_M) or an\n"
          "      https:// URL; resumed where it stopped, checked against the SHA-256 the hub publishes;\n"
          "      every command's MODEL takes the same references (pulled when not cached); the cache:\n"
          "      $OCTO_CACHE, else $XDG_CACHE_HOME/octo or ~/.cache/octo; the hub: $OCTO_HF_ENDPOINT;\n"
          "      a gated repository: $HF_TOKEN\n"
          "  list (no options)\n"
          "      what is in the cache: each file's reference, size, SHA-256 and path, then the\n"
          "      ORG/REPO:QUANT references and the files they chose\n"
          "  rm REF\n"
          "      remove a reference's file from the cache (and the references that chose it)\n"
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

char *help_entry(cli_command cmd) {
    char *all = help_text(), *out = NULL;
    size_t n_out = 0;
    FILE *e = all ? open_memstream(&out, &n_out) : NULL;
    const char *name = cli_command_name(cmd);
    const size_t cl = strlen(name);
    const bool moe = cli_find(cmd, "--moe-cache") != NULL; /* the expert cache's entry is its too */
    const bool lora = cli_find(cmd, "--lora") != NULL && cmd != CMD_MERGE; /* and the adapters' */
    bool in = false;
    for (const char *l = all; e && l && *l;) { /* an entry: from a line indented by two to the next such */
        const char *end = strchr(l, '\n');
        const size_t n = end ? (size_t)(end - l) : strlen(l);
        if (n > 2 && l[0] == ' ' && l[1] == ' ' && l[2] != ' ')
            in = (n > cl + 2 && !strncmp(l + 2, name, cl) && l[2 + cl] == ' ') || (moe && !strncmp(l + 2, "Mixture", 7)) ||
                 (lora && !strncmp(l + 2, "LoRA", 4));
        if (in) fprintf(e, "%.*s\n", (int)n, l);
        l = end ? end + 1 : NULL;
    }
    free(all);
    if (e && fclose(e) == 0) return out;
    free(out);
    return NULL;
}

int help_for(cli_command cmd) {
    char *e = help_entry(cmd);
    const int rc = e && *e ? (fputs(e, stdout), finish_stdout(0)) : usage_error("no help for '%s'", cli_command_name(cmd));
    free(e);
    return rc;
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

/* How near flag is to the unknown option bad: its edit distance, at most 1
 * when bad begins with it (--temperature: --temp). */
static int nearness(const char *bad, const char *flag) {
    const int d = edit_distance(bad, flag);
    return !strncmp(bad, flag, strlen(flag)) && strlen(flag) > 2 && d > 1 ? 1 : d;
}

/* The nearest of the names and aliases of the table's rows for cmd (the first
 * of equally near ones), when it is near enough to be what was meant. */
typedef struct {
    const char *arg;
    char best[64]; /* the nearest spelling so far (an alias's is gone after the call) */
    int dist;
} nearest;

static void consider(const char *spelling, void *user) {
    nearest *n = user;
    const int d = nearness(n->arg, spelling);
    if (d < n->dist) n->dist = d, snprintf(n->best, sizeof n->best, "%s", spelling);
}

int unknown_option(cli_command cmd, const char *arg) {
    nearest n = {.arg = arg, .dist = 1 << 20};
    for (size_t i = 0; i < cli_option_count; i++) {
        const cli_option *o = &cli_options[i];
        if ((o->commands & (1u << cmd)) && o->kind != OPT_IGNORE && o->kind != OPT_REFUSE) cli_each_spelling(o, consider, &n);
    }
    /* near enough to be what was meant, and not merely short: -x is one edit from -m but means nothing like it */
    const int limit = strlen(arg) > 6 ? 3 : 2;
    const char *c = cli_command_name(cmd);
    if (n.best[0] && n.dist <= limit && 2 * n.dist < (int)strlen(n.best))
        return usage_error("%s: unknown option '%s' (did you mean %s?)", c, arg, n.best);
    return usage_error("%s: unknown option '%s'", c, arg);
}

int unknown_command(const char *name) {
    int best = -1, dist = 3; /* at most two edits: rn, rnu, sever, inpsect */
    for (int c = 0; c < CMD_COUNT; c++) {
        const int d = edit_distance(name, cli_command_name((cli_command)c));
        if (d < dist) dist = d, best = c;
    }
    if (best >= 0 && 2 * dist < (int)strlen(cli_command_name((cli_command)best)))
        return usage_error("unknown command '%s' (did you mean %s?)", name, cli_command_name((cli_command)best));
    return usage_error("unknown command '%s'", name);
}
