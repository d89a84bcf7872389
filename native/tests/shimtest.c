/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exercises every function the preload shim hooks, inside and outside the redirected
 * prefixes, with relative paths from a cwd inside a redirected directory, the PATH_MAX
 * overflow, from threads and after fork. Run under the shim with MOKKAFS_ROOT pointing at a
 * tree that has the h100 view (`mokkafs render --profile h100`), as
 *   shimtest on    every check expects the view
 *   shimtest off   (MOKKAFS_PRELOAD=off) every check expects the host
 * Prints one line per failed check and "N passed, N failed" at the end; exit 1 on failure.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../path_map.h"

#define SYSFS_MAGIC 0x62656572
#define GPU "/sys/bus/pci/devices/0000:1b:00.0"
#define VENDOR GPU "/vendor"
#define IB "/sys/class/infiniband"
/* Where the profile puts them, from the environment (tests/native/test_preload.py): the GPU's
 * device directory, mlx5_0's, and how many HCAs /sys/class/infiniband lists. */
static const char *GPU_DEVICE, *IB_DEV;
static int IB_COUNT;

int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

static int passed, failed, on;
extern int shimdep_vendor_read; /* tests/shimdep.c: a library constructor's read */

#define CHECK(cond, what)                                                                \
    do {                                                                                 \
        if (cond) {                                                                      \
            passed++;                                                                    \
        } else {                                                                         \
            failed++;                                                                    \
            printf("FAIL %s:%d %s (errno %d)\n", __FILE__, __LINE__, what, errno);       \
        }                                                                                \
    } while (0)

/* Inside a prefix: succeeds under the shim, fails on this GPU-less host. */
#define INSIDE(cond, what) CHECK(on ? (cond) : !(cond), what)

static int fd_reads(int fd, const char *want) {
    char buf[256] = {0};
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    return n > 0 && strcmp(buf, want) == 0;
}

/* mokkafs_fold's physical step: keep each directory as written, or resolve one link. */
static int as_written(char *dir, size_t size, void *ctx) {
    (void)dir, (void)size, (void)ctx;
    return -1;
}

static int link_target(char *dir, size_t size, void *ctx) {
    (void)ctx;
    if (strcmp(dir, "/sys/bus/pci/devices/link") != 0)
        return -1;
    snprintf(dir, size, "/sys/devices/pci0000:00/0000:00:01.0");
    return 0;
}

static void test_path_map(void) {
    CHECK(mokkafs_redirected("/sys/class/infiniband"), "prefix itself");
    CHECK(mokkafs_redirected("/sys/class/infiniband/mlx5_0"), "below a prefix");
    CHECK(!mokkafs_redirected("/sys/class/infiniband_verbsX"), "component boundary");
    CHECK(mokkafs_redirected("/sys/class/infiniband_verbs/uverbs0"), "infiniband_verbs");
    CHECK(!mokkafs_redirected("/sys/class/infinibandX"), "infinibandX");
    CHECK(mokkafs_redirected("/sys/devices/pci0000:15/0000:1b:00.0"), "pci root");
    CHECK(!mokkafs_redirected("/sys/devices/pcie_ports"), "not a pci root");
    CHECK(mokkafs_redirected("/sys/devices/system/cpu"), "the machine's cpus");
    CHECK(!mokkafs_redirected("/sys/devices/system/clocksource"), "the rest of system stays");
    CHECK(!mokkafs_redirected("/proc/devicesX"), "/proc/devicesX");
    CHECK(mokkafs_redirected("/dev/infiniband/uverbs0"), "/dev/infiniband");
    char out[PATH_MAX];
    CHECK(mokkafs_join("/sys/class", "infiniband/../net/./eth0", out, sizeof out) == 0 &&
              strcmp(out, "/sys/class/net/eth0") == 0, "join folds . and ..");
    CHECK(mokkafs_join("/", "sys", out, sizeof out) == 0 && strcmp(out, "/sys") == 0,
          "join from /");
    CHECK(mokkafs_climbs("/sys/bus/pci/..") && mokkafs_climbs("/dev/x/../y") &&
              !mokkafs_climbs("/sys/bus/pci/..x") && !mokkafs_climbs("/usr/../sys") &&
              !mokkafs_climbs("sys/.."), "which paths climb");
    CHECK(mokkafs_fold("/sys/bus/pci/../../../../../x/./y/", out, sizeof out, as_written,
                       NULL) == 0 && strcmp(out, "/x/y/") == 0, "fold stops at /");
    CHECK(mokkafs_fold("/sys/bus/pci/devices/link/../z", out, sizeof out, link_target,
                       NULL) == 0 && strcmp(out, "/sys/devices/pci0000:00/z") == 0,
          "fold climbs a link's target");
    CHECK(mokkafs_fold("/sys/../..", out, sizeof out, as_written, NULL) == 0 &&
              strcmp(out, "/") == 0, "fold to /");
    CHECK(mokkafs_fold("/sys/x", out, 4, as_written, NULL) == -1, "fold that cannot fit");
}

static void test_open_family(void) {
    INSIDE(fd_reads(open(VENDOR, O_RDONLY), "0x10de\n"), "open");
    INSIDE(fd_reads(open64(VENDOR, O_RDONLY), "0x10de\n"), "open64");
    INSIDE(fd_reads(openat(AT_FDCWD, VENDOR, O_RDONLY), "0x10de\n"), "openat");
    INSIDE(fd_reads(openat64(AT_FDCWD, VENDOR, O_RDONLY), "0x10de\n"), "openat64");
    INSIDE(fd_reads(__open_2(VENDOR, O_RDONLY), "0x10de\n"), "__open_2");
    INSIDE(fd_reads(__open64_2(VENDOR, O_RDONLY), "0x10de\n"), "__open64_2");
    INSIDE(fd_reads(__openat_2(AT_FDCWD, VENDOR, O_RDONLY), "0x10de\n"), "__openat_2");
    INSIDE(fd_reads(__openat64_2(AT_FDCWD, VENDOR, O_RDONLY), "0x10de\n"), "__openat64_2");
    FILE *f = fopen(VENDOR, "r");
    char line[64] = {0};
    INSIDE(f && fgets(line, sizeof line, f) && strcmp(line, "0x10de\n") == 0, "fopen");
    if (f)
        fclose(f);
    char node_type[PATH_MAX];
    snprintf(node_type, sizeof node_type, "%s/node_type", IB_DEV);
    f = fopen64(node_type, "r");
    INSIDE(f && fgets(line, sizeof line, f) && strcmp(line, "1: CA\n") == 0, "fopen64");
    if (f)
        fclose(f);
    f = fopen("/proc/devices", "r");
    int simulated = 0;
    while (f && fgets(line, sizeof line, f))
        simulated |= strcmp(line, "235 nvidia-caps-imex-channels\n") == 0;
    if (f)
        fclose(f);
    INSIDE(simulated, "/proc/devices has the simulated majors");
    /* outside every prefix: the host's file, byte for byte */
    CHECK(fd_reads(open("/proc/sys/kernel/ostype", O_RDONLY), "Linux\n"), "outside");
}

static int count_entries(DIR *d) {
    int n = 0;
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_directories(void) {
    INSIDE(count_entries(opendir(IB)) == IB_COUNT, "opendir");
    struct dirent **list;
    int n = scandir(IB, &list, NULL, alphasort);
    INSIDE(n == IB_COUNT + 2 && strcmp(list[2]->d_name, "mlx5_0") == 0, "scandir");
    for (int i = 0; i < n; i++)
        free(list[i]);
    if (n >= 0)
        free(list);
    struct dirent64 **list64;
    n = scandir64("/sys/class/infiniband_verbs", &list64, NULL, NULL);
    INSIDE(n == IB_COUNT + 3, "scandir64"); /* uverbsN, abi_version, . and .. */
    for (int i = 0; i < n; i++)
        free(list64[i]);
    if (n >= 0)
        free(list64);
    CHECK(count_entries(opendir("/proc/self/fd")) > 0, "opendir outside");
}

static void test_stat_family(void) {
    struct stat st;
    struct stat64 st64;
    struct statx stx;
    INSIDE(stat(VENDOR, &st) == 0 && S_ISREG(st.st_mode), "stat");
    INSIDE(stat64(VENDOR, &st64) == 0, "stat64");
    INSIDE(lstat(GPU, &st) == 0 && S_ISLNK(st.st_mode), "lstat");
    INSIDE(lstat64(GPU, &st64) == 0 && S_ISLNK(st64.st_mode), "lstat64");
    INSIDE(fstatat(AT_FDCWD, VENDOR, &st, 0) == 0, "fstatat");
    INSIDE(fstatat64(AT_FDCWD, GPU, &st64, AT_SYMLINK_NOFOLLOW) == 0, "fstatat64");
    INSIDE(statx(AT_FDCWD, VENDOR, 0, STATX_BASIC_STATS, &stx) == 0, "statx");
    INSIDE(stat("/dev/infiniband/uverbs0", &st) == 0 && S_ISCHR(st.st_mode) &&
               major(st.st_rdev) == 231 && minor(st.st_rdev) == 192, "stat /dev/infiniband");
    typedef int (*xstat_fn)(int, const char *, struct stat *);
    typedef int (*fxstatat_fn)(int, int, const char *, struct stat *, int);
    const char *names[] = {"__xstat", "__xstat64", "__lxstat", "__lxstat64"};
    for (int i = 0; i < 4; i++) {
        xstat_fn fn = (xstat_fn)dlsym(RTLD_DEFAULT, names[i]);
        INSIDE(fn && fn(1, VENDOR, &st) == 0, names[i]);
    }
    fxstatat_fn fx = (fxstatat_fn)dlsym(RTLD_DEFAULT, "__fxstatat");
    INSIDE(fx && fx(1, AT_FDCWD, VENDOR, &st, 0) == 0, "__fxstatat");
    fx = (fxstatat_fn)dlsym(RTLD_DEFAULT, "__fxstatat64");
    INSIDE(fx && fx(1, AT_FDCWD, VENDOR, &st, 0) == 0, "__fxstatat64");
    CHECK(stat("/proc/self", &st) == 0, "stat outside");
}

static void test_access_links_names(void) {
    INSIDE(access(VENDOR, R_OK) == 0, "access");
    INSIDE(faccessat(AT_FDCWD, VENDOR, R_OK, 0) == 0, "faccessat");
    INSIDE(euidaccess(VENDOR, R_OK) == 0, "euidaccess");
    INSIDE(eaccess(VENDOR, R_OK) == 0, "eaccess");
    char names[256];
    errno = 0;
    INSIDE(listxattr(VENDOR, names, sizeof names) >= 0, "listxattr");
    INSIDE(llistxattr(VENDOR, names, sizeof names) >= 0, "llistxattr");
    errno = 0;  /* no such attribute on the file (ENODATA/ENOTSUP), not no such file */
    INSIDE(getxattr(VENDOR, "user.none", names, sizeof names) < 0 && errno != ENOENT,
           "getxattr");
    errno = 0;
    INSIDE(lgetxattr(GPU, "user.none", names, sizeof names) < 0 && errno != ENOENT,
           "lgetxattr");
    char buf[PATH_MAX];
    ssize_t n = readlink(GPU, buf, sizeof buf - 1);
    if (n >= 0)
        buf[n] = '\0';
    char want[PATH_MAX];
    snprintf(want, sizeof want, "../../..%s", GPU_DEVICE + strlen("/sys"));
    INSIDE(n > 0 && strcmp(buf, want) == 0, "readlink");
    n = readlinkat(AT_FDCWD, IB "/mlx5_0", buf, sizeof buf - 1);
    INSIDE(n > 0, "readlinkat");
    char *r = realpath(GPU "/driver", NULL);
    INSIDE(r && strcmp(r, "/sys/bus/pci/drivers/nvidia") == 0, "realpath hides the mount");
    free(r);
    r = realpath(IB "/mlx5_0", buf);
    INSIDE(r && strcmp(r, IB_DEV) == 0, "realpath into a buffer");
    r = canonicalize_file_name(GPU);
    INSIDE(r && strcmp(r, GPU_DEVICE) == 0,
           "canonicalize_file_name");
    free(r);
    struct statfs sf;
    INSIDE(statfs(VENDOR, &sf) == 0 && sf.f_type == SYSFS_MAGIC, "statfs: sysfs magic");
    struct statfs64 sf64;
    INSIDE(statfs64(GPU, &sf64) == 0 && sf64.f_type == SYSFS_MAGIC, "statfs64");
    int fd = open(VENDOR, O_RDONLY);
    INSIDE(fd >= 0 && fstatfs(fd, &sf) == 0 && sf.f_type == SYSFS_MAGIC, "fstatfs");
    INSIDE(fd >= 0 && fstatfs64(fd, &sf64) == 0 && sf64.f_type == SYSFS_MAGIC, "fstatfs64");
    if (fd >= 0)
        close(fd);
    /* O_DIRECTORY passes no mode: the shim must not read one */
    fd = open(GPU "/", O_RDONLY | O_DIRECTORY);
    INSIDE(fd >= 0, "open O_DIRECTORY");
    if (fd >= 0)
        close(fd);
}

static void test_cwd(void) {
    char before[PATH_MAX], cwd[PATH_MAX];
    if (!getcwd(before, sizeof before))
        before[0] = '\0';
    INSIDE(chdir(IB) == 0, "chdir into a redirected directory");
    if (on) {
        CHECK(getcwd(cwd, sizeof cwd) && strcmp(cwd, IB) == 0, "getcwd hides the mount");
        char *dyn = getcwd(NULL, 0);
        CHECK(dyn && strcmp(dyn, IB) == 0, "getcwd(NULL, 0)");
        free(dyn);
        CHECK(fd_reads(open("mlx5_0/node_type", O_RDONLY), "1: CA\n"), "relative open");
        CHECK(count_entries(opendir("mlx5_0/ports")) == 1, "relative opendir");
        char *r = realpath("mlx5_0", NULL);
        CHECK(r && strcmp(r, IB_DEV) == 0, "relative realpath");
        free(r);
        struct stat st;
        CHECK(stat("../../../proc/self", &st) == 0, "relative path out of the view");
        struct statfs out, direct;
        CHECK(statfs("../../../tmp", &out) == 0 && statfs("/tmp", &direct) == 0 &&
                  out.f_type == direct.f_type, "statfs of a relative path out of the view");
        int version = chdir("/proc/driver") == 0 ? open("nvidia/version", O_RDONLY) : -1;
        CHECK(version >= 0, "relative open from a cwd below /proc");
        if (version >= 0)
            close(version);
        CHECK(chdir(IB) == 0, "back");
        int dirfd = open("/sys", O_RDONLY | O_DIRECTORY);
        CHECK(dirfd >= 0 && fchdir(dirfd) == 0 && getcwd(cwd, sizeof cwd) &&
                  strcmp(cwd, "/sys") == 0, "fchdir");
        if (dirfd >= 0)
            close(dirfd);
        CHECK(chdir("/") == 0 && count_entries(opendir("sys/class/infiniband")) == IB_COUNT,
              "relative path into the view from /");
    }
    if (before[0] && chdir(before) != 0)
        perror("chdir back");
}

static void test_overflow(void) {
    char path[PATH_MAX];
    memset(path, 'a', sizeof path);
    memcpy(path, GPU "/", strlen(GPU "/"));
    path[PATH_MAX - 10] = '\0';
    errno = 0;
    int fd = open(path, O_RDONLY);
    if (on)
        CHECK(fd < 0 && errno == ENAMETOOLONG, "overflow fails with ENAMETOOLONG");
    else
        CHECK(fd < 0 && errno != ENAMETOOLONG, "no overflow without the shim");
}

/* A working directory a little short of PATH_MAX: relative paths out of the view work there
 * (the shim must not refuse what the kernel takes). */
static void test_long_cwd(void) {
    char before[PATH_MAX], base[] = "/tmp/shimtest-XXXXXX", part[201];
    if (!getcwd(before, sizeof before) || !mkdtemp(base) || chdir(base) != 0) {
        CHECK(0, "long cwd: set-up");
        return;
    }
    memset(part, 'd', 200);
    part[200] = '\0';
    int depth = 0;
    while (strlen(base) + (size_t)(depth + 1) * 201 < PATH_MAX - 250 && mkdir(part, 0700) == 0 &&
           chdir(part) == 0)
        depth++;
    /* and a last one to 3 short of PATH_MAX: the cwd joined with "./f" is longer than that */
    char last[256];
    size_t len = strlen(base) + (size_t)depth * 201 + 1;
    size_t n = PATH_MAX - 3 - len;
    memset(last, 'e', n);
    last[n] = '\0';
    char cwd[PATH_MAX];
    if (n == 0 || n > 255 || mkdir(last, 0700) != 0 || chdir(last) != 0 ||
        !getcwd(cwd, sizeof cwd) || strlen(cwd) != PATH_MAX - 3) {
        CHECK(0, "long cwd: set-up");
        n = 0;
    }
    int fd = open("./f", O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0, "relative open in a long cwd");
    if (fd >= 0)
        close(fd);
    struct stat st;
    CHECK(stat("..", &st) == 0, "relative stat in a long cwd");
    unlink("f");
    if (n && (chdir("..") != 0 || rmdir(last) != 0))
        perror("long cwd: clean-up");
    for (; depth > 0; depth--)
        if (chdir("..") != 0 || rmdir(part) != 0)
            break;
    if (chdir(before) != 0 || rmdir(base) != 0)
        perror("long cwd: clean-up");
}

static void *thread_main(void *arg) {
    int *ok = arg;
    for (int i = 0; i < 200; i++)
        *ok += fd_reads(open(VENDOR, O_RDONLY), "0x10de\n");
    return NULL;
}

static void test_threads_and_fork(void) {
    pthread_t t[8];
    int ok[8] = {0};
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, thread_main, &ok[i]);
    int total = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        total += ok[i];
    }
    INSIDE(total == 1600, "threads");
    pid_t pid = fork();
    if (pid == 0)
        _exit(fd_reads(open(VENDOR, O_RDONLY), "0x10de\n") ? 0 : 1);
    int status = -1;
    waitpid(pid, &status, 0);
    INSIDE(WIFEXITED(status) && WEXITSTATUS(status) == 0, "after fork");
}

int main(int argc, char **argv) {
    on = argc > 1 && strcmp(argv[1], "on") == 0;
    GPU_DEVICE = getenv("SHIMTEST_GPU_DEVICE");
    IB_DEV = getenv("SHIMTEST_IB_DEVICE");
    const char *count = getenv("SHIMTEST_IB_COUNT");
    if (!GPU_DEVICE || !IB_DEV || !count) {
        fputs("shimtest: set SHIMTEST_GPU_DEVICE, SHIMTEST_IB_DEVICE and SHIMTEST_IB_COUNT\n",
              stderr);
        return 2;
    }
    IB_COUNT = atoi(count);
    test_path_map();
    test_open_family();
    test_directories();
    test_stat_family();
    test_access_links_names();
    test_cwd();
    test_overflow();
    test_long_cwd();
    test_threads_and_fork();
    INSIDE(shimdep_vendor_read, "a library constructor that runs before the shim's");
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
