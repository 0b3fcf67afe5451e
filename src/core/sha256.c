/*
 * sha256 — FIPS 180-4's SHA-256, written from the standard: 64 rounds over
 * 512-bit blocks, the message padded with a 1 bit, zeros and its length in
 * bits, big-endian.
 */
#include "sha256.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, int n) { return x >> n | x << (32 - n); }

/* One round: the eight working variables are not moved, the names rotate
 * instead (a round of index i takes them 8 - i mod 8 places along), so that
 * eight rounds in a row are straight-line code. */
#define S0(x) (rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22))
#define S1(x) (rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25))
#define ROUND(a, b, c, d, e, f, g, k, i)                                          \
    do {                                                                          \
        const uint32_t t1 = k + S1(e) + (g ^ (e & (f ^ g))) + K[i] + W(i);        \
        d += t1;                                                                  \
        k = t1 + S0(a) + ((a & b) | (c & (a | b)));                               \
    } while (0)
/* The message schedule in 16 words, each made when its round needs it. */
#define s0(x) (rotr(x, 7) ^ rotr(x, 18) ^ (x) >> 3)
#define s1(x) (rotr(x, 17) ^ rotr(x, 19) ^ (x) >> 10)
#define W(i) ((i) < 16 ? w[(i) & 15] : (w[(i) & 15] += s1(w[((i) - 2) & 15]) + w[((i) - 7) & 15] + s0(w[((i) - 15) & 15])))

static void compress(uint32_t h[8], const uint8_t *p) {
    uint32_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i += 8) {
        ROUND(a, b, c, d, e, f, g, k, i);
        ROUND(k, a, b, c, d, e, f, g, i + 1);
        ROUND(g, k, a, b, c, d, e, f, i + 2);
        ROUND(f, g, k, a, b, c, d, e, i + 3);
        ROUND(e, f, g, k, a, b, c, d, i + 4);
        ROUND(d, e, f, g, k, a, b, c, i + 5);
        ROUND(c, d, e, f, g, k, a, b, i + 6);
        ROUND(b, c, d, e, f, g, k, a, i + 7);
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void sha256_init(sha256_ctx *c) {
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, H0, sizeof H0);
    c->bytes = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t n) {
    const uint8_t *p = data;
    size_t have = (size_t)(c->bytes % 64);
    c->bytes += n;
    if (have) {
        const size_t take = n < 64 - have ? n : 64 - have;
        memcpy(c->block + have, p, take);
        p += take, n -= take, have += take;
        if (have < 64) return;
        compress(c->h, c->block);
    }
    for (; n >= 64; p += 64, n -= 64) compress(c->h, p);
    memcpy(c->block, p, n);
}

void sha256_hex(sha256_ctx *c, char out[65]) {
    const uint64_t bits = c->bytes * 8;
    uint8_t pad[72] = {0x80};
    const size_t have = (size_t)(c->bytes % 64), npad = (have < 56 ? 56 : 120) - have;
    for (int i = 0; i < 8; i++) pad[npad + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(c, pad, npad + 8);
    for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", c->h[i]);
}

err_code sha256_file(const char *path, char out[65], err_t *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(err, ERR_IO, "%s: %s", path, strerror(errno));
    uint8_t *buf = malloc(1 << 20);
    if (!buf) {
        fclose(f);
        return err_set(err, ERR_NOMEM, "out of memory");
    }
    sha256_ctx c;
    sha256_init(&c);
    for (size_t r; (r = fread(buf, 1, 1 << 20, f)) > 0;) sha256_update(&c, buf, r);
    const int bad = ferror(f);
    free(buf);
    fclose(f);
    if (bad) return err_set(err, ERR_IO, "%s: read error", path);
    sha256_hex(&c, out);
    return ERR_OK;
}
