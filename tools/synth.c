/*
 * synth — `octo synth`: a synthetic model with seeded random weights, of any
 * architecture, shape and tensor type octo reads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/quant.h"  /* internal: type names for `octo synth --type` */
#include "model/synth.h" /* internal: the synthetic model writer */

int cmd_synth(int argc, char **argv) {
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
