/*
 * err — error codes and messages for every layer of octo.
 *
 * The library never prints, exits or aborts on bad input. A function that can
 * fail returns an err_code and, when the caller passed an err_t, fills in a
 * message that names the problem (a file, a tensor, a key, a number). The
 * codes are distinct per kind of problem so that tests and callers can tell a
 * truncated file from a bad magic from a tensor that runs past the end.
 *
 * The public header (include/octo.h) re-exports these numbers as octo_status;
 * src/octo.c checks at compile time that the two lists agree.
 */
#ifndef OCTO_CORE_ERR_H
#define OCTO_CORE_ERR_H

#include <stddef.h>

typedef enum {
    ERR_OK = 0,
    ERR_INVALID_ARG = 1,      /* a caller passed something meaningless */
    ERR_NOMEM = 2,            /* an allocation failed */
    ERR_IO = 3,               /* open/read/write/mmap failed */
    ERR_NOT_FOUND = 4,        /* the file does not exist */
    ERR_IS_DIR = 5,           /* a directory was given where a file was expected */
    ERR_EMPTY_FILE = 6,       /* a zero-length file */
    ERR_TRUNCATED = 7,        /* the file ends inside the header or metadata */
    ERR_BAD_MAGIC = 8,        /* not a GGUF file */
    ERR_BAD_VERSION = 9,      /* a GGUF version we do not read */
    ERR_BAD_TENSOR_TYPE = 10, /* a tensor type id we do not know */
    ERR_BAD_METADATA = 11,    /* malformed metadata: value type, duplicate key, ... */
    ERR_TENSOR_BOUNDS = 12,   /* a tensor's data runs past the end of the file */
    ERR_OVERFLOW = 13,        /* a count, size or dimension product overflows */
    ERR_MISSING_TENSOR = 14,  /* a tensor the architecture needs is absent */
    ERR_BAD_SHAPE = 15,       /* a tensor has the wrong shape */
    ERR_UNSUPPORTED_ARCH = 16,/* general.architecture names one we do not run */
    ERR_MISSING_KEY = 17,     /* a metadata key the architecture needs is absent */
    ERR_BAD_VALUE = 18,       /* a metadata value is out of range or inconsistent */
    ERR_UNSUPPORTED = 19,     /* valid input we cannot run (e.g. a type for an op) */
    ERR_CONTEXT_FULL = 20,    /* a position beyond the cache or context */
    ERR_BUSY = 21,            /* the object is in use by another stream */
    ERR_CANCELLED = 22,       /* the caller cancelled */
    ERR_NO_SPACE = 23,        /* the disk (or a quota) is full */
    ERR_CORRUPT = 24,         /* stored data fails its check: short, wrong magic or checksum */
    ERR_COUNT_
} err_code;

typedef struct {
    err_code code;
    char msg[320];
} err_t;

/* Record code and a printf-style message in e (e may be NULL); returns code. */
err_code err_set(err_t *e, err_code code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Prefix an existing message with context ("loading x.gguf: ..."); returns e->code. */
err_code err_prefix(err_t *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

void err_clear(err_t *e);

/* A short stable name for a code, e.g. "truncated". */
const char *err_code_name(err_code code);

#endif
