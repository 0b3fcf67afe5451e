/*
 * test_sha256 — SHA-256 (src/core/sha256.c) against FIPS 180-4's examples,
 * one million 'a's among them; the digest of a text fed in pieces of every
 * size from 1 to 130 bytes equals the digest of it fed whole; and a file's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sha256.h"
#include "t.h"

static void digest(const void *p, size_t n, char out[65]) {
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, p, n);
    sha256_hex(&c, out);
}

static void test_vectors(void) {
    static const struct {
        const char *text, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        digest(v[i].text, strlen(v[i].text), hex);
        T_CHECKF(!strcmp(hex, v[i].hex), "'%s': %s", v[i].text, hex);
    }
    char *a = malloc(1000000);
    T_CHECK(a != NULL);
    if (!a) return;
    memset(a, 'a', 1000000);
    digest(a, 1000000, hex);
    T_CHECKF(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "a million a's: %s", hex);
    free(a);
}

static void test_pieces(void) {
    unsigned char text[1000];
    for (int i = 0; i < 1000; i++) text[i] = (unsigned char)(i * 131 + 7);
    char whole[65], pieces[65];
    digest(text, sizeof text, whole);
    for (size_t step = 1; step <= 130; step++) {
        sha256_ctx c;
        sha256_init(&c);
        for (size_t at = 0; at < sizeof text; at += step)
            sha256_update(&c, text + at, sizeof text - at < step ? sizeof text - at : step);
        sha256_hex(&c, pieces);
        T_CHECKF(!strcmp(whole, pieces), "pieces of %zu", step);
    }
}

static void test_file(void) {
    const char *dir = getenv("OCTO_TMP");
    char path[512], hex[65];
    snprintf(path, sizeof path, "%s/sha256-test.txt", dir ? dir : "/tmp");
    FILE *f = fopen(path, "wb");
    T_CHECK(f != NULL);
    if (!f) return;
    fputs("abc", f);
    fclose(f);
    err_t err = {0};
    T_EQ_INT(sha256_file(path, hex, &err), ERR_OK);
    T_CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    remove(path);
    T_EQ_INT(sha256_file(path, hex, &err), ERR_IO);
    T_CHECK(strstr(err.msg, "sha256-test.txt") != NULL);
}

int main(void) {
    test_vectors();
    test_pieces();
    test_file();
    T_DONE();
}
