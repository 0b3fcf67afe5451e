/*
 * t.h — the test harness: a handful of macros, one binary per module.
 *
 * Each check records a pass or a failure (with file, line and the values
 * involved); main() ends with T_DONE(), which prints "N passed, N failed"
 * and returns non-zero when anything failed. Tests that need ../shared and
 * cannot find it call T_SKIP(), which exits with code 77 (CTest's skip code,
 * set with SKIP_RETURN_CODE) so a missing data folder is reported as skipped,
 * never as passed; but when a check before it failed, T_SKIP reports the
 * failure (exit 1): a skip must never hide one. A part of a test that needs
 * hardware this machine lacks (AMX, say) is its own CTest entry that calls
 * T_SKIP, so it shows as skipped, not as a silent pass.
 */
#ifndef OCTO_TESTS_T_H
#define OCTO_TESTS_T_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The tests run the library with its asserts on (CMakeLists.txt: OCTO_ASSERTS). */
#ifdef NDEBUG
#error "tests must be built with asserts on: configure without -DOCTO_ASSERTS=OFF"
#endif

static int t_passed, t_failed;

#define T_CHECK(cond)                                                               \
    do {                                                                            \
        if (cond) t_passed++;                                                       \
        else { t_failed++; fprintf(stderr, "%s:%d: FAIL: %s\n", __FILE__, __LINE__, #cond); } \
    } while (0)

#define T_CHECKF(cond, ...)                                                         \
    do {                                                                            \
        if (cond) t_passed++;                                                       \
        else {                                                                      \
            t_failed++;                                                             \
            fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

#define T_EQ_INT(a, b)                                                              \
    do {                                                                            \
        long long t_a_ = (long long)(a), t_b_ = (long long)(b);                     \
        T_CHECKF(t_a_ == t_b_, "%s = %lld, %s = %lld", #a, t_a_, #b, t_b_);         \
    } while (0)

#define T_NEAR(a, b, tol)                                                           \
    do {                                                                            \
        double t_a_ = (double)(a), t_b_ = (double)(b), t_t_ = (double)(tol);        \
        T_CHECKF(fabs(t_a_ - t_b_) <= t_t_, "%s = %.9g, %s = %.9g, tol %.3g",       \
                 #a, t_a_, #b, t_b_, t_t_);                                         \
    } while (0)

#define T_SKIP(why)                                                                 \
    do {                                                                            \
        if (t_failed) {                                                             \
            printf("%d passed, %d failed (then: %s)\n", t_passed, t_failed, why);   \
            exit(1);                                                                \
        }                                                                           \
        printf("skipped: %s (%d checks passed before)\n", why, t_passed);           \
        exit(77);                                                                   \
    } while (0)

#define T_DONE()                                                                    \
    do {                                                                            \
        printf("%d passed, %d failed\n", t_passed, t_failed);                       \
        return t_failed ? 1 : 0;                                                    \
    } while (0)

#endif
