/*
 * unicode — UTF-8, categories, lowercase and byte-to-unicode. See unicode.h.
 *
 * Lookups are binary searches over the generated tables in unicode_data.c;
 * everything here is a pure function of its arguments (no tables built at
 * run time, no global state).
 */
#include "unicode.h"

#include <string.h>

/* ---------------------------------------------------------------- categories */

unicode_gc unicode_category(uint32_t cp) {
    if (cp > UNICODE_MAX) return UGC_Cn;
    /* the last entry whose first code point is <= cp */
    size_t lo = 0, hi = unicode_gc_ranges_n; /* answer in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if ((unicode_gc_ranges[mid] >> 5) <= cp) lo = mid;
        else hi = mid;
    }
    return (unicode_gc)(unicode_gc_ranges[lo] & 31u);
}

bool unicode_is_whitespace(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
        return true;
    default:
        return cp >= 0x2000 && cp <= 0x200A;
    }
}

unsigned unicode_flags(uint32_t cp) {
    static const uint16_t class_of[UGC_COUNT_] = {
        [UGC_Cn] = UNICODE_UNDEFINED,
        [UGC_Lu] = UNICODE_LETTER, [UGC_Ll] = UNICODE_LETTER, [UGC_Lt] = UNICODE_LETTER,
        [UGC_Lm] = UNICODE_LETTER, [UGC_Lo] = UNICODE_LETTER,
        [UGC_Mn] = UNICODE_MARK, [UGC_Mc] = UNICODE_MARK, [UGC_Me] = UNICODE_MARK,
        [UGC_Nd] = UNICODE_NUMBER, [UGC_Nl] = UNICODE_NUMBER, [UGC_No] = UNICODE_NUMBER,
        [UGC_Pc] = UNICODE_PUNCTUATION, [UGC_Pd] = UNICODE_PUNCTUATION, [UGC_Ps] = UNICODE_PUNCTUATION,
        [UGC_Pe] = UNICODE_PUNCTUATION, [UGC_Pi] = UNICODE_PUNCTUATION, [UGC_Pf] = UNICODE_PUNCTUATION,
        [UGC_Po] = UNICODE_PUNCTUATION,
        [UGC_Sm] = UNICODE_SYMBOL, [UGC_Sc] = UNICODE_SYMBOL, [UGC_Sk] = UNICODE_SYMBOL, [UGC_So] = UNICODE_SYMBOL,
        [UGC_Zs] = UNICODE_SEPARATOR, [UGC_Zl] = UNICODE_SEPARATOR, [UGC_Zp] = UNICODE_SEPARATOR,
        [UGC_Cc] = UNICODE_CONTROL, [UGC_Cf] = UNICODE_CONTROL, [UGC_Cs] = UNICODE_CONTROL, [UGC_Co] = UNICODE_CONTROL,
    };
    return class_of[unicode_category(cp)] | (unicode_is_whitespace(cp) ? UNICODE_WHITESPACE : 0u);
}

uint32_t unicode_tolower(uint32_t cp) {
    if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    /* the last run starting at or before cp */
    size_t lo = 0, hi = unicode_lower_runs_n;
    if (hi == 0 || cp < unicode_lower_runs[0].start) return cp;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (unicode_lower_runs[mid].start <= cp) lo = mid;
        else hi = mid;
    }
    const unicode_case_run *r = &unicode_lower_runs[lo];
    uint32_t off = cp - r->start;
    if (off % r->step == 0 && off / r->step < r->count) return (uint32_t)((int64_t)cp + r->delta);
    return cp;
}

/* ---------------------------------------------------------------- UTF-8 */

size_t unicode_decode(const char *s, size_t n, uint32_t *cp) {
    const uint8_t *u = (const uint8_t *)s;
    uint8_t b = u[0];
    size_t len;
    uint32_t v;
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    if ((b & 0xE0) == 0xC0) len = 2, v = b & 0x1Fu;
    else if ((b & 0xF0) == 0xE0) len = 3, v = b & 0x0Fu;
    else if ((b & 0xF8) == 0xF0) len = 4, v = b & 0x07u;
    else len = 0, v = 0; /* a continuation byte or F8..FF */
    if (len == 0 || len > n) {
        *cp = UNICODE_REPLACEMENT;
        return 1;
    }
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            *cp = UNICODE_REPLACEMENT;
            return 1;
        }
        v = (v << 6) | (u[i] & 0x3Fu);
    }
    *cp = v;
    return len;
}

int unicode_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= UNICODE_MAX) {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

/* ---------------------------------------------------------------- GPT-2 bytes */

/* Bytes that stand for themselves: the printable ones, less space, DEL..NBSP and SHY. */
static bool byte_is_direct(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/*
 * The others, in byte order, become U+0100 + k: 0x00..0x20 are k = 0..32,
 * 0x7F..0xA0 are k = 33..66 and 0xAD is k = 67.
 */
uint32_t unicode_byte_to_cp(uint8_t byte) {
    unsigned b = byte;
    if (byte_is_direct(b)) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b <= 0xA0) return 0x100 + 33 + (b - 0x7F);
    return 0x100 + 67; /* 0xAD */
}

int unicode_cp_to_byte(uint32_t cp) {
    if (cp < 0x100) return byte_is_direct(cp) ? (int)cp : -1;
    if (cp > 0x100 + 67) return -1;
    unsigned k = cp - 0x100;
    if (k <= 32) return (int)k;
    if (k <= 66) return (int)(0x7F + k - 33);
    return 0xAD;
}

size_t unicode_valid_len(const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    if (n == 0) return 0;
    const uint8_t b = u[0];
    if (b < 0x80) return 1;
    /* the lead byte's length and the range of its first continuation byte */
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b >= 0xE0 && b <= 0xEF) len = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4) len = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    else return 0; /* a continuation byte, C0/C1 (overlong), F5..FF */
    if (n < len || u[1] < lo || u[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((u[i] & 0xC0) != 0x80) return 0;
    return len;
}

size_t unicode_sanitize(const char *in, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        const size_t k = unicode_valid_len(in + i, n - i);
        if (k) {
            memcpy(out + o, in + i, k);
            o += k, i += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3, i++;
        }
    }
    out[o] = '\0';
    return o;
}
