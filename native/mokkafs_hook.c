/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mokkafs-hook: an OCI createContainer hook that binds host paths over paths inside the
 * container, where the runtime itself will not mount (runc refuses anything inside /proc).
 *
 *   mokkafs-hook bind HOST CONTAINERPATH [HOST CONTAINERPATH ...]   (OCI state on stdin)
 *
 * It runs in the container's mount namespace before pivot_root: it reads the bundle from the
 * state, the root path from the bundle's config.json (both parsed by json-c), and binds each
 * HOST (a file or a directory) read-only onto <root>/CONTAINERPATH. A target that does not
 * exist in the container is skipped with a note (a kernel without module support has no
 * /proc/modules to cover). Built static, so it runs on any host the runtime runs on (a
 * Kubernetes node gets a copy from the DaemonSet). No jq, no shell.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

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

int main(int argc, char **argv) {
    if (argc < 4 || argc % 2 != 0 || strcmp(argv[1], "bind") != 0) {
        fprintf(stderr, "usage: mokkafs-hook bind HOST CONTAINERPATH [HOST CONTAINERPATH ...]"
                        "  (OCI state on stdin)\n");
        return 2;
    }
    char root[PATH_MAX];
    if (container_root(root) != 0)
        return 1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (bind_one(root, argv[i], argv[i + 1]) != 0)
            return 1;
    }
    return 0;
}
