/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mokkafs-hook: OCI hooks for containers given a mokkafs view.
 *
 *   mokkafs-hook bind HOST CONTAINERPATH [HOST CONTAINERPATH ...]   (OCI state on stdin)
 *   mokkafs-hook record DIR                                          (OCI state on stdin)
 *   mokkafs-hook forget DIR                                          (OCI state on stdin)
 *   mokkafs-hook link TARGET LINK [TARGET LINK ...]                  (OCI state on stdin)
 *   mokkafs-hook ldcache DIR [DIR ...]                               (OCI state on stdin)
 *
 * bind, a createContainer hook, binds host paths over paths inside the container, where the
 * runtime itself will not mount (runc refuses anything inside /proc).
 * It runs in the container's mount namespace before pivot_root: it reads the bundle from the
 * state, the root path from the bundle's config.json (both parsed by json-c), and binds each
 * HOST (a file or a directory) read-only onto <root>/CONTAINERPATH. A target that does not
 * exist in the container is skipped with a note (a kernel without module support has no
 * /proc/modules to cover). Built static, so it runs on any host the runtime runs on (a
 * Kubernetes node gets a copy from the DaemonSet). No jq, no shell.
 *
 * record, a poststart hook (the runtime's namespaces, the container's process started, every
 * mount of its made), copies the container's mount table to DIR/<container id>, after a line
 * "mnt:<its mount namespace's inode>". A restarted daemon re-makes what the runtime mounted
 * over the view from it: while the view is dead, any path walk into it (a libselinux
 * constructor's statfs of /sys/fs/selinux, in every `exec`) fails the kernel's revalidation of
 * the view's dentries, and the kernel then detaches the mounts on them (d_invalidate), the
 * container's /sys/fs/cgroup among them. forget, a poststop hook, removes the record. Neither
 * fails the container: a record that cannot be made is reported and skipped.
 *
 * link and ldcache, createContainer hooks, do for mokkafs's NVML library what NVIDIA's
 * container toolkit's create-symlinks and update-ldcache hooks do for the driver's libraries
 * (docs/nvml.md). link makes each LINK, an absolute path in the container, a symbolic link to
 * TARGET, a name in the same directory (libnvidia-ml.so.1 -> libnvidia-ml.so.<version>). A
 * link of the image's at LINK is replaced; anything else there is left, with a note. ldcache
 * runs the host's ldconfig (a fixed path: /sbin/ldconfig.real, Ubuntu's binary behind its
 * /sbin/ldconfig script, else /sbin/ldconfig) over the container's /etc/ld.so.conf and each
 * DIR, writing the container's /etc/ld.so.cache. Both work in a child process chrooted into
 * the container's root, so every path, and every link the image holds, resolves inside it;
 * ldconfig is opened before the chroot and run with no environment (fexecve: glibc's ldconfig
 * is static, it needs nothing of the container's). Neither fails the container: what cannot
 * be done is reported and skipped (the library stays mounted at its versioned name).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The string at object.key, or NULL. Owned by `object`. */
static const char *string_at(struct json_object *object, const char *key) {
    struct json_object *value;
    if (!object || !json_object_object_get_ex(object, key, &value) ||
        !json_object_is_type(value, json_type_string))
        return NULL;
    return json_object_get_string(value);
}

/* out = a + "/" + b, or ENAMETOOLONG. */
static int join(char out[PATH_MAX], const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la + 1 + lb + 1 > PATH_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return 0;
}

static int fail(const char *what, const char *detail) {
    fprintf(stderr, "mokkafs-hook: %s %s: %s\n", what, detail ? detail : "", strerror(errno));
    return 1;
}

/* The container's root as an absolute, resolved path, from the OCI state on stdin. */
static int container_root(char real_root[PATH_MAX]) {
    struct json_object *state = json_object_from_fd(0);
    const char *bundle = string_at(state, "bundle");
    if (!bundle) {
        errno = EINVAL;
        return fail("no bundle in the OCI state on stdin", NULL);
    }
    char path[PATH_MAX], joined[PATH_MAX];
    if (join(path, bundle, "config.json") != 0)
        return fail("bundle path", bundle);
    struct json_object *config = json_object_from_file(path), *root_object = NULL;
    if (!config || !json_object_object_get_ex(config, "root", &root_object)) {
        errno = EINVAL;
        return fail("no root in", path);
    }
    const char *root = string_at(root_object, "path");
    if (!root) {
        errno = EINVAL;
        return fail("no root.path in", path);
    }
    int bad = root[0] == '/' ? join(joined, "", root + 1) : join(joined, bundle, root);
    if (bad != 0)
        return fail("root path", root);
    if (!realpath(joined, real_root))
        return fail("no container root", joined);
    json_object_put(config);
    json_object_put(state);
    return 0;
}

static int bind_one(const char *root, const char *host, const char *inside) {
    char joined[PATH_MAX], target[PATH_MAX];
    if (join(joined, root, inside + (inside[0] == '/')) != 0)
        return fail("target path", inside);
    if (!realpath(joined, target)) {
        if (errno == ENOENT) {
            fprintf(stderr, "mokkafs-hook: %s is not in the container; not bound\n", inside);
            return 0;
        }
        return fail("no target", joined);
    }
    size_t n = strlen(root);
    if (strncmp(target, root, n) != 0 || (target[n] != '/' && target[n] != '\0')) {
        errno = EXDEV;
        return fail("target resolves outside the container's root:", target);
    }
    if (mount(host, target, NULL, MS_BIND, NULL) != 0)
        return fail("bind", target);
    if (mount(host, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
              NULL) != 0)
        return fail("remount read-only", target);
    return 0;
}

/* The container's id from the OCI state, if it is a plain file name (runtimes' ids are). */
static const char *record_name(struct json_object *state) {
    const char *id = string_at(state, "id");
    if (!id || !id[0] || id[0] == '.' || strlen(id) > NAME_MAX)
        return NULL;
    for (const char *c = id; *c; c++)
        if (!(('a' <= *c && *c <= 'z') || ('A' <= *c && *c <= 'Z') || ('0' <= *c && *c <= '9')
              || *c == '_' || *c == '-' || *c == '.'))
            return NULL;
    return id;
}

/* DIR/<id>: "mnt:<inode>\n" and /proc/<pid>/mountinfo, written whole or not at all. */
static int record(const char *dir) {
    struct json_object *state = json_object_from_fd(0), *pid_object = NULL;
    const char *id = record_name(state);
    if (!id || !json_object_object_get_ex(state, "pid", &pid_object) ||
        !json_object_is_type(pid_object, json_type_int)) {
        errno = EINVAL;
        return fail("no id or pid in the OCI state on stdin; not recorded", NULL);
    }
    int pid = json_object_get_int(pid_object);
    char path[PATH_MAX], tmp[PATH_MAX], file[PATH_MAX];
    struct stat ns;
    snprintf(path, sizeof path, "/proc/%d/ns/mnt", pid);
    if (stat(path, &ns) != 0)
        return fail("not recorded: no mount namespace at", path);
    snprintf(path, sizeof path, "/proc/%d/mountinfo", pid);
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return fail("not recorded: cannot read", path);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return fail("not recorded: cannot make", dir);
    if (join(file, dir, id) != 0 || snprintf(tmp, sizeof tmp, "%s/.%s", dir, id) >= PATH_MAX)
        return fail("not recorded: path too long", dir);
    int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0)
        return fail("not recorded: cannot write", tmp);
    dprintf(out, "mnt:%llu\n", (unsigned long long)ns.st_ino);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) {
            n = -1;
            break;
        }
    if (n < 0 || close(out) != 0 || rename(tmp, file) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return fail("not recorded:", file);
    }
    close(in);
    json_object_put(state);
    return 0;
}

static int forget(const char *dir) {
    struct json_object *state = json_object_from_fd(0);
    const char *id = record_name(state);
    char file[PATH_MAX];
    if (!id || join(file, dir, id) != 0) {
        errno = EINVAL;
        return fail("no id in the OCI state on stdin; nothing forgotten", NULL);
    }
    if (unlink(file) != 0 && errno != ENOENT)
        return fail("cannot remove", file);
    json_object_put(state);
    return 0;
}

/* Runs work(argv) in a child chrooted into the container's root, ended after `seconds`.
   Returns the child's exit status, or 1. */
static int in_root(const char *root, int (*work)(char **), char **argv, unsigned seconds) {
    pid_t pid = fork();
    if (pid < 0)
        return fail("fork", NULL);
    if (pid == 0) {
        /* A runtime may start hooks with SIGALRM ignored or blocked, which fork and exec keep:
           its default comes back, so the alarm (kept across fexecve) ends a hung ldconfig. */
        sigset_t alarm_set;
        sigemptyset(&alarm_set);
        sigaddset(&alarm_set, SIGALRM);
        signal(SIGALRM, SIG_DFL);
        sigprocmask(SIG_UNBLOCK, &alarm_set, NULL);
        alarm(seconds);
        if (chroot(root) != 0 || chdir("/") != 0)
            _exit(fail("cannot enter the container's root", root));
        _exit(work(argv));
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return fail("waitpid", NULL);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    fprintf(stderr, "mokkafs-hook: ended by signal %d\n", WTERMSIG(status));
    return 1;
}

/* In the container's root: each LINK (absolute) a link to TARGET (a name beside it). */
static int make_links(char **pairs) {
    int failed = 0;
    for (; pairs[0] && pairs[1]; pairs += 2) {
        const char *target = pairs[0], *link = pairs[1];
        char tmp[PATH_MAX];
        struct stat st;
        if (link[0] != '/' || !target[0] || strchr(target, '/') || strcmp(target, ".") == 0 ||
            strcmp(target, "..") == 0) {
            errno = EINVAL;
            failed |= fail("not a name and an absolute path:", link);
            continue;
        }
        if (lstat(link, &st) == 0 && !S_ISLNK(st.st_mode)) {
            fprintf(stderr, "mokkafs-hook: %s is in the image and not a link; left\n", link);
            continue;
        }
        if (snprintf(tmp, sizeof tmp, "%s.mokkafs-hook", link) >= (int)sizeof tmp) {
            errno = ENAMETOOLONG;
            failed |= fail("link path", link);
            continue;
        }
        unlink(tmp);
        if (symlink(target, tmp) != 0 || rename(tmp, link) != 0) {
            failed |= fail("cannot make the link", link);
            unlink(tmp);
        }
    }
    return failed;
}

/* The host's ldconfig, opened before the chroot (-1: none). Fixed paths, no search. */
static int open_ldconfig(void) {
    static const char *const paths[] = {"/sbin/ldconfig.real", "/sbin/ldconfig"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
            return fd;
    }
    return -1;
}

static int ldconfig_fd = -1;

/* In the container's root: ldconfig over its /etc/ld.so.conf and the directories given. */
static int run_ldconfig(char **dirs) {
    char *argv[64] = {"ldconfig", "-C", "/etc/ld.so.cache", "-f", "/etc/ld.so.conf"};
    size_t n = 5;
    for (; *dirs && n + 1 < sizeof argv / sizeof *argv; dirs++)
        argv[n++] = *dirs;
    argv[n] = NULL;
    if (*dirs)
        fprintf(stderr, "mokkafs-hook: ldcache takes %zu directories at most; the rest left "
                "to the container's /etc/ld.so.conf\n", sizeof argv / sizeof *argv - 6);
    char *no_env[] = {NULL};
    fexecve(ldconfig_fd, argv, no_env);
    return fail("cannot run the host's ldconfig in the container", NULL);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "record") == 0) {
        record(argv[2]);  /* never fails the container: only its restart survival is less */
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "forget") == 0) {
        forget(argv[2]);
        return 0;
    }
    char root[PATH_MAX];
    /* Never fail the container: without them the library is still mounted, by its file name. */
    if (argc >= 4 && argc % 2 == 0 && strcmp(argv[1], "link") == 0) {
        if (container_root(root) != 0 || in_root(root, make_links, argv + 2, 10) != 0)
            fprintf(stderr, "mokkafs-hook: links not all made\n");
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "ldcache") == 0) {
        ldconfig_fd = open_ldconfig();
        if (ldconfig_fd < 0)
            fail("no ldconfig at /sbin/ldconfig.real or /sbin/ldconfig; linker cache not "
                 "updated", NULL);
        else if (container_root(root) != 0 || in_root(root, run_ldconfig, argv + 2, 30) != 0)
            fprintf(stderr, "mokkafs-hook: the container's linker cache was not updated\n");
        return 0;
    }
    if (argc < 4 || argc % 2 != 0 || strcmp(argv[1], "bind") != 0) {
        fprintf(stderr, "usage: mokkafs-hook bind HOST CONTAINERPATH [HOST CONTAINERPATH ...]"
                        " | record DIR | forget DIR | link TARGET LINK [TARGET LINK ...]"
                        " | ldcache DIR [DIR ...]  (OCI state on stdin)\n");
        return 2;
    }
    if (container_root(root) != 0)
        return 1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (bind_one(root, argv[i], argv[i + 1]) != 0)
            return 1;
    }
    return 0;
}
