/*
 * unicode — the little Unicode that tokenizers need: UTF-8 decoding, the
 * general category of a code point, White_Space, simple lowercase, and
 * GPT-2's byte-to-unicode mapping.
 *
 * Categories come from UnicodeData.txt (Unicode 15) through
 * scripts/gen_unicode.py, which writes unicode_data.c: a sorted table of
 * ranges with the same category (about 4000 entries, binary search) and a
 * table of lowercase runs. Code points the file does not list are Cn.
 *
 * unicode_flags() folds the categories into the classes pre-tokenizer
 * regexes test (\p{L}, \p{N}, \p{P}, \p{S}, \p{M}, \p{Z}, \p{C}), the way
 * llama.cpp does: Cn is "undefined", Cc/Cf/Cs/Co are control, and the
 * whitespace bit (\s) is set for the White_Space property:
 * U+0009..U+000D, U+0020, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000.
 *
 * Decoding follows llama.cpp's rules so that text splits into the same
 * units: a lead byte announces 1..4 bytes and the continuation bytes must
 * follow; anything else (a stray continuation byte, F8..FF, a truncated
 * sequence) is one unit of one byte whose code point reads as U+FFFD.
 * Overlong forms and surrogates are not rejected (llama.cpp accepts them).
 */
#ifndef OCTO_CORE_UNICODE_H
#define OCTO_CORE_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UNICODE_REPLACEMENT 0xFFFDu
#define UNICODE_MAX 0x10FFFFu

/* General categories; the numbering is shared with scripts/gen_unicode.py. */
typedef enum {
    UGC_Cn, /* unassigned */
    UGC_Lu, UGC_Ll, UGC_Lt, UGC_Lm, UGC_Lo,
    UGC_Mn, UGC_Mc, UGC_Me,
    UGC_Nd, UGC_Nl, UGC_No,
    UGC_Pc, UGC_Pd, UGC_Ps, UGC_Pe, UGC_Pi, UGC_Pf, UGC_Po,
    UGC_Sm, UGC_Sc, UGC_Sk, UGC_So,
    UGC_Zs, UGC_Zl, UGC_Zp,
    UGC_Cc, UGC_Cf, UGC_Cs, UGC_Co,
    UGC_COUNT_
} unicode_gc;

/* Classes as bits (one category bit per code point, plus WHITESPACE). */
enum {
    UNICODE_UNDEFINED = 0x001,   /* Cn, or beyond U+10FFFF */
    UNICODE_NUMBER = 0x002,      /* \p{N} */
    UNICODE_LETTER = 0x004,      /* \p{L} */
    UNICODE_SEPARATOR = 0x008,   /* \p{Z} */
    UNICODE_MARK = 0x010,        /* \p{M} */
    UNICODE_PUNCTUATION = 0x020, /* \p{P} */
    UNICODE_SYMBOL = 0x040,      /* \p{S} */
    UNICODE_CONTROL = 0x080,     /* \p{C} other than Cn */
    UNICODE_WHITESPACE = 0x100,  /* \s */
};

unicode_gc unicode_category(uint32_t cp);
unsigned unicode_flags(uint32_t cp);
bool unicode_is_whitespace(uint32_t cp);
/* The simple lowercase mapping (UnicodeData field 13), or cp itself. */
uint32_t unicode_tolower(uint32_t cp);

/*
 * Decode the unit at s[0..n) (n >= 1): returns its length in bytes (1..4)
 * and stores its code point, or UNICODE_REPLACEMENT for an invalid byte.
 */
size_t unicode_decode(const char *s, size_t n, uint32_t *cp);
/* UTF-8 of cp (<= U+10FFFF) into out; returns 1..4, or 0 for cp beyond U+10FFFF. */
int unicode_encode(uint32_t cp, char out[4]);

/*
 * Length of the valid UTF-8 character at s[0..n) by RFC 3629 (what a strict
 * decoder, JSON's included, accepts: no overlong form, no surrogate, nothing
 * past U+10FFFF), or 0 when s does not start one.
 */
size_t unicode_valid_len(const char *s, size_t n);
/*
 * in[0..n) as strictly valid UTF-8 into out (3n + 1 bytes): each valid
 * character copied, each byte that does not start one replaced by U+FFFD.
 * NUL-terminated; returns the bytes written before the NUL.
 */
size_t unicode_sanitize(const char *in, size_t n, char *out);

/* GPT-2 byte-to-unicode: bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF stand
 * for themselves, the other 68 bytes for U+0100.. in byte order. */
uint32_t unicode_byte_to_cp(uint8_t byte);
/* The inverse: the byte a code point stands for, or -1. */
int unicode_cp_to_byte(uint32_t cp);

/* ---- generated tables (unicode_data.c) ---- */
typedef struct {
    uint32_t start;
    uint16_t count;
    uint8_t step;
    int32_t delta;
} unicode_case_run;

extern const uint32_t unicode_gc_ranges[]; /* (first << 5) | unicode_gc */
extern const size_t unicode_gc_ranges_n;
extern const unicode_case_run unicode_lower_runs[];
extern const size_t unicode_lower_runs_n;

#endif
