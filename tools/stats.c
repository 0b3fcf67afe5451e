/*
 * stats — the table of rows stats.h describes, expanded from OCTO_STATS, and
 * the JSON printer the tools share. A column of the list is (pos [, fmt
 * [, key]]); the ARG macros take its parts, NULL for those left out.
 */
#include "stats.h"

#include <string.h>

#define ARG1(...) ARG1_(__VA_ARGS__, 0)
#define ARG1_(a, ...) a
#define ARG2(...) ARG2_(__VA_ARGS__, NULL, NULL)
#define ARG2_(a, b, ...) b
#define ARG3(...) ARG3_(__VA_ARGS__, NULL, NULL, NULL)
#define ARG3_(a, b, c, ...) c
#define SHOW(col) {ARG1 col, ARG2 col, ARG3 col}
#define KIND(name)                                                                                                     \
    _Generic(((octo_stats *)0)->name, int: STAT_INT, uint64_t: STAT_U64, int64_t: STAT_I64, double: STAT_DOUBLE)

#define ROW_NUM(group, type, name, unit, run, bench, eval, serve, what)                                             \
    {#group, #name, unit, what, KIND(name), offsetof(octo_stats, name), {SHOW(run), SHOW(bench), SHOW(eval), SHOW(serve)}},
#define ROW_TEXT(group, size, name, unit, run, bench, eval, serve, what)                                            \
    {#group, #name, unit, what, STAT_TEXT, offsetof(octo_stats, name), {SHOW(run), SHOW(bench), SHOW(eval), SHOW(serve)}},

const stat_row stat_rows[] = {OCTO_STATS(ROW_NUM, ROW_TEXT)};
const int stat_n_rows = (int)(sizeof stat_rows / sizeof stat_rows[0]);

const stat_row *stat_at(stats_view v, int pos) {
    for (int i = 0; i < stat_n_rows; i++)
        if (stat_rows[i].show[v].pos == pos) return &stat_rows[i];
    return NULL;
}

const char *stat_key(const stat_row *r, stats_view v) {
    return r->show[v].key ? r->show[v].key : r->name;
}

double stat_number(const stat_row *r, const octo_stats *s) {
    const void *p = (const char *)s + r->offset;
    switch (r->kind) {
    case STAT_INT: return *(const int *)p;
    case STAT_U64: return (double)*(const uint64_t *)p;
    case STAT_I64: return (double)*(const int64_t *)p;
    case STAT_DOUBLE: return *(const double *)p;
    default: return 0;
    }
}

const char *stat_text(const stat_row *r, const octo_stats *s) {
    return r->kind == STAT_TEXT ? (const char *)s + r->offset : "";
}

/* Text as a JSON string: quotes, backslashes and control characters
 * escaped (the memory watcher's source quotes its PSI trigger). */
void stats_print_text(FILE *out, const char *t) {
    fputc('"', out);
    for (; *t; t++) {
        const unsigned char c = (unsigned char)*t;
        if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

/* One value as the tools have always printed it: integers whole, doubles
 * with the view's format, text as a JSON string. */
static void print_value(FILE *out, const stat_row *r, const char *fmt, const octo_stats *s) {
    const void *p = (const char *)s + r->offset;
    switch (r->kind) {
    case STAT_INT: fprintf(out, "%d", *(const int *)p); break;
    case STAT_U64: fprintf(out, "%llu", (unsigned long long)*(const uint64_t *)p); break;
    case STAT_I64: fprintf(out, "%lld", (long long)*(const int64_t *)p); break;
    case STAT_DOUBLE: fprintf(out, fmt ? fmt : "%g", *(const double *)p); break;
    case STAT_TEXT: stats_print_text(out, (const char *)p); break;
    }
}

void stats_print_json(FILE *out, const octo_stats *s, stats_view v, int from, int to, int sep) {
    for (int pos = from; pos <= to; pos++) {
        const stat_row *r = stat_at(v, pos);
        if (!r) continue;
        fprintf(out, "%s\"%s\": ", sep ? ", " : "", stat_key(r, v));
        print_value(out, r, r->show[v].fmt, s);
        sep = 1;
    }
}
