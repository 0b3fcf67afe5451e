/*
 * test_platform — the platform room (src/platform/). The readers of small
 * kernel files: cgroup v2's "max" is no number, keyed lines give the number
 * after the colon, mount fields decode the kernel's octal escapes, pressure
 * lines give their avg10, fake CPU-capacity and thermal trees read as
 * written, a folder's entries read whole; octo's CPU set. Then the build's
 * own answers: the Linux readings (usage, free memory, unnamed files linked
 * at commit) or the POSIX fallback's documented ones (peak RSS only, no
 * cgroup limit, pressure and temperature unknown, no pinning, no ARM dot
 * product and no AMX, no unnamed files, no direct I/O).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/cpu.h"
#include "platform/file.h"
#include "platform/mem.h"
#include "platform/platform.h"
#include "platform/storage.h"
#include "platform/sysfile.h"
#include "platform/thermal.h"
#include "t.h"
#include "util.h"

static bool is_linux(void) { return !strcmp(plat_name(), "linux"); }

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
}

static void test_avg10(void) {
    const char *psi = "some avg10=1.25 avg60=0.50 avg300=0.00 total=12345\nfull avg10=0.75 avg60=0.00 avg300=0.00 total=99\n";
    T_NEAR(sysfile_avg10(psi, "some"), 1.25, 1e-12);
    T_NEAR(sysfile_avg10(psi, "full"), 0.75, 1e-12);
    T_NEAR(sysfile_avg10(psi, "half"), -1.0, 0);
    T_NEAR(sysfile_avg10("some avg60=1.00\nfull avg10=2.00\n", "some"), -1.0, 0); /* not from the next line */
    T_NEAR(sysfile_avg10("some avg10=x\n", "some"), -1.0, 0);
    T_NEAR(sysfile_avg10("somewhat avg10=3.00\n", "some"), -1.0, 0);
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

/* A fresh folder in the scratch folder (its path into root) holding
 * SUB/FILE = text[i] for each sub[i]. */
static void tree_make(char *root, size_t n, const char *name, const char *file, const char *const *sub,
                      const char *const *text, int count) {
    tu_tmp_path(root, n, name);
    T_CHECK(mkdir(root, 0700) == 0);
    for (int i = 0; i < count; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", root, sub[i]);
        mkdir(path, 0700);
        snprintf(path, sizeof path, "%s/%s/%s", root, sub[i], file);
        put(path, text[i]);
    }
}

static void tree_remove(const char *root, const char *file, const char *const *sub, int count) {
    for (int i = 0; i < count; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/%s/%s", root, sub[i], file);
        remove(path);
        snprintf(path, sizeof path, "%s/%s", root, sub[i]);
        rmdir(path);
    }
    rmdir(root);
}

/* cpu0, cpu1 and cpu4 report capacities, cpu3 reports 0 and cpu2 none
 * (offline); the set leaves cpu1 out. */
static void test_capacities_at(void) {
    const char *const sub[] = {"cpu0", "cpu1", "cpu3", "cpu4"}, *const cap[] = {"1024\n", "446\n", "0\n", "871\n"};
    char root[512];
    tree_make(root, sizeof root, "cpu_tree", "cpu_capacity", sub, cap, 4);
    short ids[8];
    int caps[8];
    T_EQ_INT(plat_cpu_capacities_at(root, NULL, ids, caps, 8), 3);
    T_CHECK(ids[0] == 0 && caps[0] == 1024 && ids[1] == 1 && caps[1] == 446 && ids[2] == 4 && caps[2] == 871);
    plat_cpuset only;
    plat_cpuset_zero(&only);
    plat_cpuset_add(&only, 0);
    plat_cpuset_add(&only, 4);
    T_EQ_INT(plat_cpu_capacities_at(root, &only, ids, caps, 8), 2);
    T_CHECK(ids[0] == 0 && ids[1] == 4 && caps[1] == 871);
    T_EQ_INT(plat_cpu_capacities_at(root, NULL, ids, caps, 1), 1); /* room for one */
    tree_remove(root, "cpu_capacity", sub, 4);
    T_EQ_INT(plat_cpu_capacities_at(root, NULL, ids, caps, 8), 0);
}

/* Zones 0, 1, 3 read (2 missing: numbering may have gaps), 4's sensor fails. */
static void test_thermal_at(void) {
    const char *const sub[] = {"thermal_zone0", "thermal_zone1", "thermal_zone3", "thermal_zone4"};
    const char *const temp[] = {"41000\n", "-5000\n", "57250\n", "error\n"};
    char root[512];
    tree_make(root, sizeof root, "thermal_tree", "temp", sub, temp, 0);
    plat_thermal t = plat_thermal_read_at(root);
    T_CHECK(!t.known && t.n_zones == 0);
    rmdir(root);
    tree_make(root, sizeof root, "thermal_tree", "temp", sub, temp, 4);
    t = plat_thermal_read_at(root);
    T_CHECK(t.known && t.n_zones == 3 && t.hottest_millicelsius == 57250);
    tree_remove(root, "temp", sub, 4);
}

static void test_cpuset(void) {
    plat_cpuset s;
    plat_cpuset_zero(&s);
    T_EQ_INT(plat_cpuset_count(&s), 0);
    T_CHECK(plat_cpuset_add(&s, 0) && plat_cpuset_add(&s, 63) && plat_cpuset_add(&s, 64) && plat_cpuset_add(&s, 1023));
    T_CHECK(plat_cpuset_add(&s, 63)); /* again: still one core */
    T_CHECK(!plat_cpuset_add(&s, -1) && !plat_cpuset_add(&s, PLAT_MAX_CPUS));
    T_EQ_INT(plat_cpuset_count(&s), 4);
    T_CHECK(plat_cpuset_has(&s, 63) && plat_cpuset_has(&s, 64) && plat_cpuset_has(&s, 1023));
    T_CHECK(!plat_cpuset_has(&s, 1) && !plat_cpuset_has(&s, 62) && !plat_cpuset_has(&s, -1) && !plat_cpuset_has(&s, 5000));
}

/* An unnamed file has no name in its folder until it is linked; the POSIX
 * fallback has none (the atomic writer then names its file from the start). */
static void test_unnamed(void) {
    char dir[512], name[600];
    tu_tmp_path(dir, sizeof dir, "unnamed");
    T_CHECK(mkdir(dir, 0700) == 0);
    const int fd = plat_open_unnamed(dir);
    if (!is_linux()) {
        T_CHECK(fd == -1 && errno == ENOTSUP);
        T_CHECK(plat_link_unnamed(0, dir) == -1 && errno == ENOTSUP);
    } else if (fd < 0) {
        printf("this file system makes no unnamed files (errno %d): only the named path is checked\n", errno);
    } else {
        T_CHECK(write(fd, "abc", 3) == 3);
        snprintf(name, sizeof name, "%s/f", dir);
        T_CHECK(access(name, F_OK) != 0);
        T_EQ_INT(plat_link_unnamed(fd, name), 0);
        struct stat st;
        T_CHECK(stat(name, &st) == 0 && st.st_size == 3);
        T_CHECK(plat_link_unnamed(fd, name) == -1 && errno == EEXIST);
        close(fd);
        remove(name);
    }
    rmdir(dir);
}

static int count_name(void *ctx, const char *name) {
    int *n = ctx;
    n[0]++;
    n[1] += !strcmp(name, "b");
    return n[2] && n[0] >= n[2]; /* stop after n[2] names when asked */
}

/* A folder's entries, "." and ".." left out, read from the start each time. */
static void test_dir_each(void) {
    const char *const sub[] = {"a", "b", "c"}, *const text[] = {"1", "2", "3"};
    char dir[512];
    tree_make(dir, sizeof dir, "dir_each", "x", sub, text, 3);
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int n[3] = {0, 0, 0};
    T_EQ_INT(plat_dir_each(fd, count_name, n), 0);
    T_CHECK(n[0] == 3 && n[1] == 1);
    int twice[3] = {0, 0, 0};
    T_EQ_INT(plat_dir_each(fd, count_name, twice), 0); /* from the start again */
    T_CHECK(twice[0] == 3);
    int stop[3] = {0, 0, 2};
    T_EQ_INT(plat_dir_each(fd, count_name, stop), 0);
    T_EQ_INT(stop[0], 2);
    close(fd);
    T_CHECK(plat_dir_each(-1, count_name, n) != 0);
    tree_remove(dir, "x", sub, 3);
}

static char first_byte(const char *path) {
    FILE *f = fopen(path, "r");
    const int c = f ? fgetc(f) : EOF;
    if (f) fclose(f);
    return (char)c;
}

/* Two names swapped at once; the POSIX fallback cannot (the caller renames twice). */
static void test_exchange(void) {
    char a[512], b[512];
    tu_tmp_path(a, sizeof a, "xchg_a");
    tu_tmp_path(b, sizeof b, "xchg_b");
    put(a, "1");
    put(b, "2");
    const int rc = plat_rename_exchange(a, b);
    if (!is_linux()) {
        T_CHECK(rc == -1 && errno == ENOSYS);
    } else if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
        printf("this file system cannot exchange names (errno %d)\n", errno);
    } else {
        T_EQ_INT(rc, 0);
        T_CHECK(first_byte(a) == '2' && first_byte(b) == '1');
    }
    remove(b);
    T_CHECK(plat_rename_exchange(a, b) == -1); /* b is gone: nothing to swap with */
    remove(a);
}

/* What this build's implementation answers on this machine. */
static void test_answers(void) {
    const plat_mem_usage u = plat_mem_read();
    const plat_pressure pr = plat_mem_pressure();
    const plat_thermal th = plat_thermal_read();
    plat_cpuset allowed;
    printf("%s: rss %llu B, available %llu B, cgroup room %llu B, pressure %s (some %.2f%%), thermal %s (%lld mC)\n",
           plat_name(), (unsigned long long)u.rss_bytes, (unsigned long long)plat_mem_available(),
           (unsigned long long)plat_mem_cgroup_room(), pr.known ? "known" : "unknown", pr.some_avg10_pct,
           th.known ? "known" : "unknown", (long long)th.hottest_millicelsius);
    T_CHECK(plat_mem_available() > 0);
    T_CHECK(plat_cpu_online() >= 1);
    const uint64_t exact = plat_mem_rss_exact();
    const bool dotprod = plat_cpu_arm_dotprod(), amx = plat_cpu_amx_permit();
    printf("%s: arm dot product %s, amx tile state %s\n", plat_name(), dotprod ? "yes" : "no",
           amx ? "granted" : "not granted");
#if !defined(__aarch64__)
    T_CHECK(!dotprod); /* an AArch64 feature */
#endif
#if !defined(__x86_64__)
    T_CHECK(!amx);
#endif
    if (is_linux()) {
        T_CHECK(u.rss_bytes > 0 && u.peak_rss_bytes >= u.rss_bytes);
        /* 0 on a kernel without smaps_rollup (before 4.14); else near VmRSS, which lags */
        T_CHECKF(exact == 0 || (exact > u.rss_bytes / 2 && exact < 2 * u.rss_bytes), "exact rss %llu, VmRSS %llu",
                 (unsigned long long)exact, (unsigned long long)u.rss_bytes);
        T_CHECK(plat_cpu_allowed(&allowed) && plat_cpuset_count(&allowed) >= 1);
        T_CHECK(plat_pin_available() && plat_pin_self_get(&allowed) == 0 && plat_pin_self(&allowed) == 0);
        T_CHECK(!pr.known || (pr.some_avg10_pct >= 0 && pr.some_avg10_pct <= 100 && pr.full_avg10_pct <= pr.some_avg10_pct));
        return;
    }
    T_CHECK(u.rss_bytes == 0 && u.peak_rss_bytes > 0 && u.pss_bytes == 0 && exact == 0);
    T_CHECK(plat_mem_cgroup_room() == UINT64_MAX && !pr.known && !th.known);
    T_CHECK(!plat_cpu_allowed(&allowed) && !plat_pin_available());
    T_CHECK(!dotprod && !amx);
    T_EQ_INT(plat_pin_self_get(&allowed), ENOSYS);
    short ids[4];
    int caps[4];
    T_EQ_INT(plat_cpu_capacities(NULL, ids, caps, 4), 0);
    T_EQ_INT(plat_storage_probe("."), PLAT_STORAGE_UNKNOWN);
    T_CHECK(plat_open_direct("/") == -1 && errno == EINVAL);
}

int main(void) {
    test_u64();
    test_keyed();
    test_avg10();
    test_fields();
    test_capacities_at();
    test_thermal_at();
    test_cpuset();
    test_unnamed();
    test_dir_each();
    test_exchange();
    test_answers();
    T_DONE();
}
