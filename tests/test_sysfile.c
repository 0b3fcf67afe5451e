/*
 * test_sysfile — numbers and mount lines from /proc and /sys files: cgroup
 * v2's "max" is no number, keyed lines give the number after the colon,
 * mount fields decode the kernel's octal escapes and survive long lines.
 */
#include <string.h>

#include "core/sysfile.h"
#include "core/sysmem.h"
#include "t.h"
#include "util.h"

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    T_CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void test_u64(void) {
    char p[512];
    tu_tmp_path(p, sizeof p, "sysfile_u64");
    uint64_t v = 7;
    put(p, "max\n");
    T_CHECK(!sysfile_u64(p, &v) && v == 7);
    put(p, "  9223372036854771712\n"); /* v1's "unlimited" */
    T_CHECK(sysfile_u64(p, &v) && v == 9223372036854771712ull);
    put(p, "1024 100000\n");
    T_CHECK(sysfile_u64(p, &v) && v == 1024);
    put(p, "");
    T_CHECK(!sysfile_u64(p, &v));
    remove(p);
    T_CHECK(!sysfile_u64(p, &v));
}

static void test_keyed(void) {
    char p[512];
    tu_tmp_path(p, sizeof p, "sysfile_keyed");
    put(p, "VmPeak:\t 5000 kB\nVmRSS:\t    1234 kB\nVmRSSx: 9 kB\n");
    T_CHECK(sysfile_keyed(p, "VmRSS") == 1234);
    T_CHECK(sysfile_keyed(p, "VmPeak") == 5000);
    T_CHECK(sysfile_keyed(p, "VmHWM") == 0);
    T_CHECK(sysfile_keyed(p, "Vm") == 0);
    remove(p);
    T_CHECK(sysfile_keyed(p, "VmRSS") == 0);
    const sysmem_usage u = sysmem_read();
    T_CHECK(u.rss_bytes > 0 && u.peak_rss_bytes >= u.rss_bytes);
    T_CHECK(sysmem_available() > 0);
}

static void test_fields(void) {
    char line[] = "cgroup /sys/fs/cgroup/my\\040mem cgroup rw,nosuid,memory 0 0\n";
    char *f[4];
    T_CHECK(sysfile_fields(line, f, 4) == 4);
    T_CHECK(!strcmp(f[0], "cgroup") && !strcmp(f[1], "/sys/fs/cgroup/my mem") && !strcmp(f[2], "cgroup"));
    T_CHECK(!strcmp(f[3], "rw,nosuid,memory"));
    char bs[] = "a /x\\134y\\0 t";
    T_CHECK(sysfile_fields(bs, f, 4) == 3 && !strcmp(f[1], "/x\\y\\0") && !strcmp(f[2], "t"));
    char blank[] = "  \n";
    T_CHECK(sysfile_fields(blank, f, 4) == 0);
}

int main(void) {
    test_u64();
    test_keyed();
    test_fields();
    T_DONE();
}
