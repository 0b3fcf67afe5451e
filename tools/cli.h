/*
 * cli.h — helpers shared by the octo commands in tools/.
 */
#ifndef OCTO_TOOLS_CLI_H
#define OCTO_TOOLS_CLI_H

#include <stdint.h>

/* "octo: <message> (see 'octo help')" on stderr; returns 2. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "octo: <message>" on stderr; returns 1. */
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The whole string must be a number in range; returns 1 on success. */
int parse_long(const char *s, long min, long max, long *out);
int parse_float(const char *s, float *out);
/* Space- or comma-separated non-negative ids into a malloc'd array; returns 1 on success. */
int parse_tokens(const char *s, int32_t **out, int *n_out);
double mib(uint64_t bytes);

int cmd_bench(int argc, char **argv);
int cmd_eval(int argc, char **argv);

#endif
