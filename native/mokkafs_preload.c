/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LD_PRELOAD shim: libc consumers that run where no mount can reach (the host itself, tools
 * run by hand, pods without the CDI device) see the mokkafs view at the kernel paths.
 *
 *   MOKKAFS_ROOT=/run/mokkafs/node   the mount (absolute); unset or empty: the shim is inert
 *   MOKKAFS_PRELOAD=off              disable it for this process
 *
 * Paths below the simulated prefixes (path_map.c) are rewritten to MOKKAFS_ROOT + path; every
 * other path is passed on untouched. ".." in an absolute path in /sys, /proc or /dev is
 * resolved first, physically and never above "/", as the kernel resolves it in its namespace
 * (path_map.c's mokkafs_fold), so no path climbs out of the mount. Relative paths are
 * resolved against the logical working directory, which the chdir/fchdir hooks keep, so a
 * process whose cwd is inside a redirected directory keeps working and getcwd never shows
 * the mount. A redirected path that would overflow PATH_MAX fails with ENAMETOOLONG instead
 * of reaching the host's path. State is set once, by the first call that needs it (a program's own libraries run their constructors
 * before this one's); the hot path takes no lock. Go and static binaries bypass this by
 * nature: the mounts (CDI) are for them. So do glibc's functions that walk or match paths
 * with its internal calls (nftw, ftw, fts, glob): docs/preload.md.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "path_map.h"

#define EXPORT __attribute__((visibility("default")))
#define SYSFS_MAGIC 0x62656572
#define PROC_SUPER_MAGIC 0x9fa0
#define TMPFS_MAGIC 0x01021994

static char root[PATH_MAX];
static size_t root_len; /* 0: inert */
static char *logical_cwd; /* atomically replaced by chdir/fchdir; old values are leaked */

/* The next definition of a libc symbol, resolved once (a benign race: same value). */
#define REAL(name)                                                                       \
    ({                                                                                   \
        static __typeof__(&name) real_;                                                  \
        __typeof__(&name) fn_ = __atomic_load_n(&real_, __ATOMIC_ACQUIRE);               \
        if (!fn_) {                                                                      \
            fn_ = (__typeof__(&name))dlsym(RTLD_NEXT, #name);                            \
            __atomic_store_n(&real_, fn_, __ATOMIC_RELEASE);                             \
        }                                                                                \
        fn_;                                                                             \
    })

static void set_logical_cwd(const char *path) {
    char *copy = strdup(path);
    if (copy)
        __atomic_store_n(&logical_cwd, copy, __ATOMIC_RELEASE);
}

static void mokkafs_init(void) {
    const char *off = getenv("MOKKAFS_PRELOAD");
    const char *r = getenv("MOKKAFS_ROOT");
    if ((off && strcmp(off, "off") == 0) || !r || r[0] != '/')
        return;
    size_t n = strlen(r);
    while (n > 1 && r[n - 1] == '/')
        n--;
    if (n >= sizeof root)
        return;
    memcpy(root, r, n);
    root[n] = '\0';
    root_len = n;
    char cwd[PATH_MAX];
    if (REAL(getcwd)(cwd, sizeof cwd)) {
        const char *logical = mokkafs_unroot(root, root_len, cwd);
        set_logical_cwd(logical ? logical : cwd);
    }
}

static pthread_once_t initialised = PTHREAD_ONCE_INIT;

/* Set up on first use, wherever that is (a library constructor that reads /sys runs before
 * ours), and at load otherwise. */
static void ready(void) { pthread_once(&initialised, mokkafs_init); }

__attribute__((constructor)) static void mokkafs_load(void) { ready(); }

/* For mokkafs_fold: `dir` (in the kernel's namespace) rewritten to where it physically is,
 * resolved in the view when it is redirected and on the host otherwise. */
static int physical_dir(char *dir, size_t size, void *ctx) {
    (void)ctx;
    char mapped[PATH_MAX], real[PATH_MAX];
    int r = mokkafs_map(root, root_len, dir, mapped, sizeof mapped);
    if (r < 0 || !REAL(realpath)(r ? mapped : dir, real))
        return -1;
    const char *shown = real;
    if (r) {
        shown = mokkafs_unroot(root, root_len, real);
        if (!shown) /* a link of the view that climbs out of it: the kernel's root stops it */
            shown = "/";
    }
    size_t n = strlen(shown);
    if (n + 1 > size)
        return -1;
    memcpy(dir, shown, n + 1);
    return 0;
}

/* Set *use to the path to use for `path`: itself, or `buf` holding the redirected one.
 * Returns -1 (errno ENAMETOOLONG) when the redirected path would not fit. */
static int redirect(const char *path, char buf[PATH_MAX], const char **use) {
    *use = path;
    ready();
    if (!root_len || !path || !path[0])
        return 0;
    const char *absolute = path;
    char joined[PATH_MAX];
    if (mokkafs_climbs(path)) {
        /* Its ".." are the kernel namespace's, never the mount's: /sys/bus/pci/../../../..
         * is "/", not the mount's parent. */
        if (mokkafs_fold(path, joined, sizeof joined, physical_dir, NULL) != 0) {
            errno = ENAMETOOLONG;
            return -1;
        }
        absolute = joined;
        if (!mokkafs_redirected(absolute)) {
            *use = strcpy(buf, absolute);
            return 0;
        }
    } else if (path[0] != '/') {
        const char *cwd = __atomic_load_n(&logical_cwd, __ATOMIC_ACQUIRE);
        if (!cwd)
            return 0;
        /* Only a cwd in the view's namespaces, or a path that climbs, can lead into it. */
        if (path[0] != '.' && strcmp(cwd, "/") != 0 && strcmp(cwd, "/sys") != 0 &&
            strncmp(cwd, "/sys/", 5) != 0 && strcmp(cwd, "/proc") != 0 &&
            strncmp(cwd, "/proc/", 6) != 0 && strcmp(cwd, "/dev") != 0 &&
            strncmp(cwd, "/dev/", 5) != 0)
            return 0;
        /* Longer than a path can be: not one into the view (the kernel limits only what it
         * is given, relative to the real cwd, which is in the mount when the logical one is
         * in the view). */
        if (mokkafs_join(cwd, path, joined, sizeof joined) != 0)
            return 0;
        absolute = joined;
        if (!mokkafs_redirected(absolute)) {
            /* Outside the view; but a real cwd inside the mount must not resolve it there. */
            if (mokkafs_redirected(cwd))
                *use = strcpy(buf, absolute);
            return 0;
        }
    }
    int r = mokkafs_map(root, root_len, absolute, buf, PATH_MAX);
    if (r < 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (r)
        *use = buf;
    return 0;
}

/* For the *at functions: a path relative to another directory fd is left alone. */
static int at_redirect(int dirfd, const char *path, char buf[PATH_MAX], const char **use) {
    if (dirfd == AT_FDCWD || (path && path[0] == '/'))
        return redirect(path, buf, use);
    *use = path;
    return 0;
}

#define REDIRECT_OR_FAIL(var, path, fail)                                                \
    char var##_buf[PATH_MAX];                                                            \
    const char *var;                                                                     \
    if (redirect(path, var##_buf, &var) < 0)                                             \
        return fail

#define AT_REDIRECT_OR_FAIL(var, dirfd, path, fail)                                      \
    char var##_buf[PATH_MAX];                                                            \
    const char *var;                                                                     \
    if (at_redirect(dirfd, path, var##_buf, &var) < 0)                                   \
        return fail

/* The mode argument is passed only with O_CREAT or O_TMPFILE (whose bits include
 * O_DIRECTORY's: an O_DIRECTORY open passes none). */
static mode_t mode_arg(int flags, va_list ap) {
    return ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? (mode_t)va_arg(ap, int)
                                                                   : 0;
}

/* -- the open family ------------------------------------------------------------------- */

EXPORT int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(open)(p, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(open64)(p, flags, mode);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    AT_REDIRECT_OR_FAIL(p, dirfd, path, -1);
    return REAL(openat)(dirfd, p, flags, mode);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    AT_REDIRECT_OR_FAIL(p, dirfd, path, -1);
    return REAL(openat64)(dirfd, p, flags, mode);
}

/* Fortified variants (_FORTIFY_SOURCE): libpci opens `config` through __open_2. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

EXPORT int __open_2(const char *path, int flags) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(__open_2)(p, flags);
}

EXPORT int __open64_2(const char *path, int flags) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(__open64_2)(p, flags);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags) {
    AT_REDIRECT_OR_FAIL(p, dirfd, path, -1);
    return REAL(__openat_2)(dirfd, p, flags);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags) {
    AT_REDIRECT_OR_FAIL(p, dirfd, path, -1);
    return REAL(__openat64_2)(dirfd, p, flags);
}

EXPORT FILE *fopen(const char *path, const char *mode) {
    REDIRECT_OR_FAIL(p, path, NULL);
    return REAL(fopen)(p, mode);
}

EXPORT FILE *fopen64(const char *path, const char *mode) {
    REDIRECT_OR_FAIL(p, path, NULL);
    return REAL(fopen64)(p, mode);
}

/* -- directories (glibc's opendir and scandir open through internal symbols) -------------- */

EXPORT DIR *opendir(const char *path) {
    REDIRECT_OR_FAIL(p, path, NULL);
    return REAL(opendir)(p);
}

EXPORT int scandir(const char *path, struct dirent ***list,
                   int (*filter)(const struct dirent *),
                   int (*compar)(const struct dirent **, const struct dirent **)) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(scandir)(p, list, filter, compar);
}

EXPORT int scandir64(const char *path, struct dirent64 ***list,
                     int (*filter)(const struct dirent64 *),
                     int (*compar)(const struct dirent64 **, const struct dirent64 **)) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(scandir64)(p, list, filter, compar);
}

/* -- the stat family ------------------------------------------------------------------- */

EXPORT int stat(const char *path, struct stat *st) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(stat)(p, st);
}

EXPORT int stat64(const char *path, struct stat64 *st) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(stat64)(p, st);
}

EXPORT int lstat(const char *path, struct stat *st) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(lstat)(p, st);
}

EXPORT int lstat64(const char *path, struct stat64 *st) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(lstat64)(p, st);
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags) {
    AT_REDIRECT_OR_FAIL(p, dirfd, path, -1);
    return REAL(fstatat)(dirfd, p, st, flags);
}

EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags) {
    AT_REDIRECT_OR_FAIL(p, dirfd, path, -1);
    return REAL(fstatat64)(dirfd, p, st, flags);
}

EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask,
                 struct statx *st) {
    AT_REDIRECT_OR_FAIL(p, dirfd, path, -1);
    return REAL(statx)(dirfd, p, flags, mask, st);
}

/* The pre-2.33 glibc entry points that older binaries still call; on current glibc they are
 * only compatibility symbols, so they forward to the functions above. */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);

EXPORT int __xstat(int ver, const char *path, struct stat *st) {
    (void)ver;
    return stat(path, st);
}

EXPORT int __xstat64(int ver, const char *path, struct stat64 *st) {
    (void)ver;
    return stat64(path, st);
}

EXPORT int __lxstat(int ver, const char *path, struct stat *st) {
    (void)ver;
    return lstat(path, st);
}

EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st) {
    (void)ver;
    return lstat64(path, st);
}

EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags) {
    (void)ver;
    return fstatat(dirfd, path, st, flags);
}

EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags) {
    (void)ver;
    return fstatat64(dirfd, path, st, flags);
}

/* -- access, links, names ----------------------------------------------------------------- */

EXPORT int access(const char *path, int mode) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(access)(p, mode);
}

EXPORT int faccessat(int dirfd, const char *path, int mode, int flags) {
    AT_REDIRECT_OR_FAIL(p, dirfd, path, -1);
    return REAL(faccessat)(dirfd, p, mode, flags);
}

EXPORT int euidaccess(const char *path, int mode) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(euidaccess)(p, mode);
}

EXPORT int eaccess(const char *path, int mode) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(eaccess)(p, mode);
}

/* Extended attributes: `ls -l` asks for security labels of every file it lists. */
EXPORT ssize_t getxattr(const char *path, const char *name, void *value, size_t size) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(getxattr)(p, name, value, size);
}

EXPORT ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(lgetxattr)(p, name, value, size);
}

EXPORT ssize_t listxattr(const char *path, char *list, size_t size) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(listxattr)(p, list, size);
}

EXPORT ssize_t llistxattr(const char *path, char *list, size_t size) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(llistxattr)(p, list, size);
}

EXPORT ssize_t readlink(const char *path, char *buf, size_t size) {
    REDIRECT_OR_FAIL(p, path, -1);
    return REAL(readlink)(p, buf, size);
}

EXPORT ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t size) {
    AT_REDIRECT_OR_FAIL(p, dirfd, path, -1);
    return REAL(readlinkat)(dirfd, p, buf, size);
}

/* The kernel resolves inside the mount; the answer is given back in the kernel's namespace
 * (/sys/devices/pci...), never as a path below MOKKAFS_ROOT. */
EXPORT char *realpath(const char *path, char *resolved) {
    REDIRECT_OR_FAIL(p, path, NULL);
    char *real = REAL(realpath)(p, NULL);
    if (!real)
        return NULL;
    const char *shown = root_len ? mokkafs_unroot(root, root_len, real) : NULL;
    if (!shown)
        shown = real;
    char *out = resolved;
    if (!out) {
        out = strdup(shown);
    } else {
        size_t n = strlen(shown);
        if (n >= PATH_MAX) {
            free(real);
            errno = ENAMETOOLONG;
            return NULL;
        }
        memcpy(out, shown, n + 1);
    }
    free(real);
    return out;
}

EXPORT char *canonicalize_file_name(const char *path) { return realpath(path, NULL); }

/* _FORTIFY_SOURCE turns these calls into their checking variants, which reach glibc's
 * internal functions directly: Debian builds its packages so. */
char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen);
ssize_t __readlink_chk(const char *path, char *buf, size_t len, size_t buflen);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t len, size_t buflen);
char *__getcwd_chk(char *buf, size_t size, size_t buflen);

static void overflow(void) {
    static const char msg[] = "mokkafs preload: buffer overflow detected\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more to say */
    }
    abort();
}

EXPORT char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen) {
    if (resolved && resolvedlen < PATH_MAX)
        overflow();
    return realpath(path, resolved);
}

EXPORT ssize_t __readlink_chk(const char *path, char *buf, size_t len, size_t buflen) {
    if (len > buflen)
        overflow();
    return readlink(path, buf, len);
}

EXPORT ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t len,
                                size_t buflen) {
    if (len > buflen)
        overflow();
    return readlinkat(dirfd, path, buf, len);
}

EXPORT char *__getcwd_chk(char *buf, size_t size, size_t buflen) {
    if (size > buflen)
        overflow();
    return getcwd(buf, size);
}

/* -- the working directory ------------------------------------------------------------- */

static void remember_cwd(void) {
    char cwd[PATH_MAX];
    ready();
    if (!root_len || !REAL(getcwd)(cwd, sizeof cwd))
        return;
    const char *logical = mokkafs_unroot(root, root_len, cwd);
    set_logical_cwd(logical ? logical : cwd);
}

EXPORT int chdir(const char *path) {
    REDIRECT_OR_FAIL(p, path, -1);
    int r = REAL(chdir)(p);
    if (r == 0)
        remember_cwd();
    return r;
}

EXPORT int fchdir(int fd) {
    int r = REAL(fchdir)(fd);
    if (r == 0)
        remember_cwd();
    return r;
}

EXPORT char *getcwd(char *buf, size_t size) {
    ready();
    char *r = REAL(getcwd)(buf, size);
    if (r && root_len) {
        const char *logical = mokkafs_unroot(root, root_len, r);
        if (logical)
            memmove(r, logical, strlen(logical) + 1);
    }
    return r;
}

/* -- filesystem type: answer as the kernel's own filesystem would --------------------- */

static void fake_magic(const char *logical, struct statfs *st) {
    if (strncmp(logical, "/sys", 4) == 0)
        st->f_type = SYSFS_MAGIC;
    else if (strncmp(logical, "/proc", 5) == 0)
        st->f_type = PROC_SUPER_MAGIC;
    else if (strncmp(logical, "/dev", 4) == 0)
        st->f_type = TMPFS_MAGIC;
}

/* The logical path `p` (what redirect gave for a call) stands for, when it is in the mount. */
static const char *in_mount(const char *path, const char *p) {
    return p != path ? mokkafs_unroot(root, root_len, p) : NULL;
}

EXPORT int statfs(const char *path, struct statfs *st) {
    REDIRECT_OR_FAIL(p, path, -1);
    int r = REAL(statfs)(p, st);
    const char *logical = r == 0 ? in_mount(path, p) : NULL;
    if (logical)
        fake_magic(logical, st);
    return r;
}

EXPORT int statfs64(const char *path, struct statfs64 *st) {
    REDIRECT_OR_FAIL(p, path, -1);
    int r = REAL(statfs64)(p, st);
    const char *logical = r == 0 ? in_mount(path, p) : NULL;
    if (logical)
        fake_magic(logical, (struct statfs *)st);
    return r;
}

/* Where an open descriptor is, as a logical path, when it is in the mount. */
static const char *fd_in_mount(int fd, char target[PATH_MAX]) {
    ready();
    if (!root_len)
        return NULL;
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = REAL(readlink)(link, target, PATH_MAX - 1);
    if (n <= 0)
        return NULL;
    target[n] = '\0';
    return mokkafs_unroot(root, root_len, target);
}

EXPORT int fstatfs(int fd, struct statfs *st) {
    int r = REAL(fstatfs)(fd, st);
    char target[PATH_MAX];
    const char *logical = r == 0 ? fd_in_mount(fd, target) : NULL;
    if (logical)
        fake_magic(logical, st);
    return r;
}

EXPORT int fstatfs64(int fd, struct statfs64 *st) {
    int r = REAL(fstatfs64)(fd, st);
    char target[PATH_MAX];
    const char *logical = r == 0 ? fd_in_mount(fd, target) : NULL;
    if (logical)
        fake_magic(logical, (struct statfs *)st);
    return r;
}
