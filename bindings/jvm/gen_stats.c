/*
 * gen_stats — writes dev/octo/Stats.java from octo.h's list of statistics
 * (OCTO_STATS), so that the Java record has every field of octo_stats, in
 * its order, under its name in camelCase: whole numbers as long, the others
 * as double, texts as String. The JNI side (octo_jni.c) fills it from the
 * same list. Run by CMake at build time: usage gen_stats OUT.java.
 */
#include <ctype.h>
#include <stdio.h>

#include "octo.h"

/* snake_case as camelCase: time_to_first_token_ms -> timeToFirstTokenMs. */
static void camel(FILE *f, const char *s) {
    for (int up = 0; *s; s++) {
        if (*s == '_') up = 1;
        else fputc(up ? toupper((unsigned char)*s) : *s, f), up = 0;
    }
}

#define JAVA_TYPE(field) _Generic((field), double: "double", float: "double", default: "long")

static int first = 1;
static void component(FILE *f, const char *type, const char *name, const char *doc) {
    fprintf(f, "%s\n        /** %s */\n        %s ", first ? "" : ",", doc, type);
    camel(f, name);
    first = 0;
}

int main(int argc, char **argv) {
    FILE *f = argc == 2 ? fopen(argv[1], "w") : NULL;
    if (!f) return fprintf(stderr, "usage: gen_stats OUT.java\n"), 2;
    fputs("package dev.octo;\n\n"
          "/**\n * octo_stats (octo.h), every statistic in the order of OCTO_STATS: written by\n"
          " * bindings/jvm/gen_stats.c at build time; do not edit.\n */\n"
          "public record Stats(", f);
    octo_stats s;
    (void)s;
#define NUM(group, type, name, unit, a, b, c, d, doc) component(f, JAVA_TYPE(s.name), #name, "(" unit ") " doc);
#define TEXT(group, size, name, unit, a, b, c, d, doc) component(f, "String", #name, doc);
    OCTO_STATS(NUM, TEXT)
#undef NUM
#undef TEXT
    fputs(") {\n", f);
    /* the factory the JNI side calls: the numbers and the texts, each in the list's order */
    fputs("    static Stats of(long[] w, double[] r, byte[][] t) {\n        return new Stats(", f);
    int nw = 0, nr = 0, nt = 0, k = 0;
#define NUM(group, type, name, ...) \
    fprintf(f, "%s%s", k++ ? ", " : "", _Generic(s.name, double: "r", float: "r", default: "w")), \
    fprintf(f, "[%d]", _Generic(s.name, double: nr++, float: nr++, default: nw++));
#define TEXT(group, size, name, ...) fprintf(f, "%stext(t[%d])", k++ ? ", " : "", nt++);
    OCTO_STATS(NUM, TEXT)
#undef NUM
#undef TEXT
    fputs(");\n    }\n\n"
          "    /* texts cross as UTF-8 bytes, never as JNI's modified UTF-8 */\n"
          "    private static String text(byte[] b) {\n"
          "        return new String(b, java.nio.charset.StandardCharsets.UTF_8);\n    }\n}\n",
          f);
    return fclose(f) == 0 ? 0 : 1;
}
