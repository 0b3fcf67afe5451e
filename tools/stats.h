/*
 * stats — octo_stats as rows of a table, made from OCTO_STATS (octo.h): each
 * figure's name, group, unit, description, type and place in the struct, and
 * where each tool shows it (a view: its position, format and key). The tools
 * print figures by walking a view instead of naming fields one by one.
 */
#ifndef OCTO_TOOLS_STATS_H
#define OCTO_TOOLS_STATS_H

#include <stddef.h>
#include <stdio.h>

#include "octo.h"

typedef enum { STAT_INT, STAT_U64, STAT_I64, STAT_DOUBLE, STAT_TEXT } stat_kind;

/* The tools that show figures, one column each of OCTO_STATS. */
typedef enum { STATS_RUN, STATS_BENCH, STATS_EVAL, STATS_SERVE, STATS_N_VIEWS } stats_view;

typedef struct {
    int pos;         /* its place in the view, 0: not shown */
    const char *fmt; /* printf format of a double; NULL otherwise */
    const char *key; /* the JSON key */
} stat_show;

typedef struct {
    const char *group, *name, *unit, *what;
    stat_kind kind;
    size_t offset; /* in octo_stats */
    stat_show show[STATS_N_VIEWS];
} stat_row;

extern const stat_row stat_rows[];
extern const int stat_n_rows;

/* The row a view shows at pos, or NULL. */
const stat_row *stat_at(stats_view v, int pos);
/* Its key in view v: the name unless the list gives another. */
const char *stat_key(const stat_row *r, stats_view v);
/* A number's value (any numeric kind) as a double. */
double stat_number(const stat_row *r, const octo_stats *s);
/* A text figure's value. */
const char *stat_text(const stat_row *r, const octo_stats *s);
/* The figures view v shows at positions from..to, in order, as JSON members
 * `"key": value` separated by ", " (one before the first too when sep). */
void stats_print_json(FILE *out, const octo_stats *s, stats_view v, int from, int to, int sep);
/* t as a JSON string (quotes, backslashes and control characters escaped). */
void stats_print_text(FILE *out, const char *t);

#endif
