/*
 * test_harness — the harness itself (t.h): T_SKIP after a failed check must
 * report the failure (exit 1), never a skip; T_SKIP after passing checks
 * exits 77 (CTest's skipped); T_DONE exits 1 on any failure. Each case runs
 * in a child process, whose exit status the parent checks.
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

typedef enum { FAIL_THEN_SKIP, PASS_THEN_SKIP, FAIL_THEN_DONE, PASS_THEN_DONE } harness_case;

static int child(harness_case c) {
    T_CHECK(c == PASS_THEN_SKIP || c == PASS_THEN_DONE);
    if (c == FAIL_THEN_SKIP || c == PASS_THEN_SKIP) T_SKIP("the data folder (pretend)");
    T_DONE();
}

static int exit_status_of(harness_case c) {
    fflush(stdout);
    fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        /* the child's own report is expected noise: keep it off the log */
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(3);
        exit(child(c));
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

int main(void) {
    const int fail_skip = exit_status_of(FAIL_THEN_SKIP), pass_skip = exit_status_of(PASS_THEN_SKIP);
    const int fail_done = exit_status_of(FAIL_THEN_DONE), pass_done = exit_status_of(PASS_THEN_DONE);
    /* checked in the parent, whose own counts start at 0 */
    T_EQ_INT(fail_skip, 1);
    T_EQ_INT(pass_skip, 77);
    T_EQ_INT(fail_done, 1);
    T_EQ_INT(pass_done, 0);
    T_DONE();
}
