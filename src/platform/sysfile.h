/*
 * platform/sysfile — small numbers and lines read from the kernel's text
 * files (/proc, /sys): what the Linux readings of the platform room parse.
 *
 * Without the scanf family: glibc's scanf can leave a push-back buffer
 * allocated (LeakSanitizer reports it from _IO_default_pbackfail), and
 * getmntent parses with sscanf, so mount tables are split here by hand.
 */
#ifndef OCTO_PLATFORM_SYSFILE_H
#define OCTO_PLATFORM_SYSFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The decimal number at the start of path's contents (leading blanks
 * skipped) into *out; false when the file is missing or starts otherwise
 * (cgroup v2's "max", say). */
bool sysfile_u64(const char *path, uint64_t *out);
/* The same from a file's text already read. */
bool sysfile_u64_text(const char *text, uint64_t *out);

/* The whole of a small file (up to n - 1 bytes) into buf, NUL-terminated;
 * false when it cannot be read or is empty. */
bool sysfile_text(const char *path, char *buf, size_t n);

/* The number after "key:" on a line of the file ("VmRSS:  123 kB" gives
 * 123); 0 when no line has it. */
uint64_t sysfile_keyed(const char *path, const char *key);

/* The number on the line of text that starts with key followed by ':' or
 * a blank (meminfo's "MemTotal:  123 kB", a cgroup's memory.stat
 * "total_rss 4096") into *out; false when no line has it. */
bool sysfile_value(const char *text, const char *key, uint64_t *out);

/* The number after "avg10=" on the line of text (a pressure file: "some
 * avg10=0.12 avg60=..." then "full ...") that starts with kind; -1 when
 * there is no such line or number. */
double sysfile_avg10(const char *text, const char *kind);
/* The number after "total=" on that line: microseconds stalled since boot;
 * -1 when it is missing. */
int64_t sysfile_psi_total(const char *text, const char *kind);

/* Splits a /proc/self/mounts line in place into its first n fields
 * (device, dir, type, options, ...), decoding the kernel's octal escapes
 * (\040 for a space); returns how many fields it found. */
int sysfile_fields(char *line, char **field, int n);

#endif
