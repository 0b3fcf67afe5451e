/*
 * test_stats — the list of statistics (OCTO_STATS, octo.h) as the tools read
 * it (tools/stats.c): a row per field of octo_stats in its order, each
 * tool's positions and keys used once, a format for every double a tool
 * shows and none for the rest, and the JSON members exactly as printed.
 */
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "t.h"

/* Every view: positions and keys once each, formats where they belong. */
static void test_views(void) {
    for (int v = 0; v < STATS_N_VIEWS; v++)
        for (int i = 0; i < stat_n_rows; i++) {
            const stat_row *r = &stat_rows[i];
            const stat_show *w = &r->show[v];
            if (!w->pos) continue;
            T_CHECKF(stat_at((stats_view)v, w->pos) == r, "view %d: position %d twice", v, w->pos);
            for (int j = 0; j < i; j++)
                T_CHECKF(!stat_rows[j].show[v].pos || strcmp(stat_key(&stat_rows[j], (stats_view)v), stat_key(r, (stats_view)v)),
                         "view %d: key %s twice", v, stat_key(r, (stats_view)v));
            if (r->kind == STAT_DOUBLE && v != STATS_SERVE) /* the server's numbers are cJSON's */
                T_CHECKF(w->fmt && w->fmt[0] == '%' && strchr("fg", w->fmt[strlen(w->fmt) - 1]), "%s: format", r->name);
            else T_CHECKF(!w->fmt || !w->fmt[0], "%s: a format it does not use", r->name);
        }
}

/* The rows: the struct's fields in order, each with a group, unit and description. */
static void test_rows(void) {
    T_CHECK(stat_n_rows > 0 && !strcmp(stat_rows[0].name, "prompt_tokens"));
    for (int i = 0; i < stat_n_rows; i++) {
        const stat_row *r = &stat_rows[i];
        T_CHECKF(i == 0 || r->offset > stat_rows[i - 1].offset, "%s: out of the struct's order", r->name);
        T_CHECKF(r->offset < sizeof(octo_stats) && r->group[0] && r->unit[0] && r->what[0], "%s", r->name);
    }
}

/* The members as bench and eval print them, from known figures. */
static void test_print(void) {
    octo_stats s;
    memset(&s, 0, sizeof s);
    s.expert_cache_hit_rate = 0.5;
    s.expert_prefetch_recall = -1;
    s.expert_bytes_read_per_token = 1234.6;
    s.expert_cache_bytes = 1ull << 40;
    s.expert_int2_promotions = 3;
    s.kv_tokens_kept_by_score = -2;
    s.prefill_speckv = 1;
    s.decode_latency_tokens = 7;
    s.decode_latency_p50_ms = 18.25;
    s.decode_latency_cv = -1;
    snprintf(s.spec_proposer, sizeof s.spec_proposer, "ngram");
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    T_CHECK(f != NULL);
    if (!f) return;
    stats_print_json(f, &s, STATS_BENCH, 1, 99, 1);
    fputc('|', f);
    stats_print_json(f, &s, STATS_EVAL, 100, 199, 0);
    fputc('|', f);
    stats_print_json(f, &s, STATS_RUN, 14, 16, 0);
    fclose(f);
    const char *want =
        ", \"expert_cache_hit_rate\": 0.5000, \"expert_prefetch_recall\": -1.0000, \"expert_prediction_rate\": 0.0000, "
        "\"expert_prediction_precision\": 0.0000, \"expert_bytes_read_per_token\": 1235, \"expert_stall_ms_per_token\": 0.0000, "
        "\"expert_cache_bytes\": 1099511627776, \"expert_int2_loads\": 0, \"expert_int2_served\": 0, "
        "\"expert_int2_promotions\": 3, \"expert_batch_saved_bytes_per_token\": 0, \"mem_level\": 0, \"mem_trims\": 0, "
        "\"mem_regrows\": 0, \"mem_pressure_events\": 0, \"mem_released_weights_bytes\": 0, "
        "\"mem_released_experts_bytes\": 0, \"mem_released_kv_bytes\": 0, \"weights_packed_bytes\": 0, "
        "\"decode_latency_tokens\": 7, \"decode_latency_p50_ms\": 18.250, \"decode_latency_p90_ms\": 0.000, "
        "\"decode_latency_p95_ms\": 0.000, \"decode_latency_p99_ms\": 0.000, \"decode_latency_max_ms\": 0.000, "
        "\"decode_latency_cv\": -1.0000, \"cpu_threads\": 0, \"cpu_effective\": 0.00, \"cpu_changes\": 0, \"cpu_probes\": 0, \"cpu_spin\": 0, \"cpu_paced\": 0, "
        "\"cpu_kernels\": \"\"|"
        "\"prefill_ms\": 0.000, \"speckv\": 1, \"lookahead_tokens\": 0, \"draft_ms\": 0.000, \"kept_by_score\": -2, "
        "\"prompt_dropped\": 0, \"prefill_ms_saved\": 0.000|"
        "\"kv_policy\": \"\", \"spec_proposer\": \"ngram\", \"spec_proposed\": 0";
    T_CHECKF(!strcmp(buf, want), "\n got  %s\n want %s", buf, want);
    free(buf);
}

int main(void) {
    test_rows();
    test_views();
    test_print();
    T_DONE();
}
