/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mokkafs-hook: an OCI createContainer hook that binds a host file over a path inside the
 * container, where the runtime itself will not mount (runc refuses anything inside /proc).
 *
 *   mokkafs-hook bind HOSTFILE CONTAINERPATH      (the OCI state JSON on standard input)
 *
 * It runs in the container's mount namespace before pivot_root: it reads the bundle from the
 * state, the root path from the bundle's config.json, and binds HOSTFILE read-only onto
 * <root>/CONTAINERPATH. Built static, so it runs on any host the runtime runs on (a
 * Kubernetes node gets a copy from the DaemonSet). No jq, no shell.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

static char *slurp(FILE *f) {
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger)
                free(buf);
            buf = bigger;
        }
    }
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* The JSON string value of the first "key" at or after `from` (escapes \" \\ \/ only, which is
 * all a path in OCI JSON carries). Returns a malloc'd string or NULL. */
static char *string_after(const char *from, const char *key) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\"", key);
    const char *p = strstr(from, pattern);
    if (!p)
        return NULL;
    p += strlen(pattern);
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ':')
        p++;
    if (*p++ != '"')
        return NULL;
    char *out = malloc(strlen(p) + 1), *o = out;
    while (out && *p && *p != '"') {
        if (*p == '\\' && p[1])
            p++;
        *o++ = *p++;
    }
    if (out)
        *o = '\0';
    return out;
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

int main(int argc, char **argv) {
    if (argc != 4 || strcmp(argv[1], "bind") != 0) {
        fprintf(stderr, "usage: mokkafs-hook bind HOSTFILE CONTAINERPATH  (OCI state on stdin)\n");
        return 2;
    }
    char *state = slurp(stdin);
    char *bundle = state ? string_after(state, "bundle") : NULL;
    if (!bundle) {
        errno = EINVAL;
        return fail("no bundle in the OCI state", NULL);
    }
    char path[PATH_MAX];
    if (join(path, bundle, "config.json") != 0)
        return fail("bundle path", bundle);
    FILE *f = fopen(path, "r");
    if (!f)
        return fail("cannot read", path);
    char *config = slurp(f);
    fclose(f);
    const char *root_obj = config ? strstr(config, "\"root\"") : NULL;
    char *root = root_obj ? string_after(root_obj, "path") : NULL;
    if (!root) {
        errno = EINVAL;
        return fail("no root.path in", path);
    }
    char joined[PATH_MAX], target[PATH_MAX], real_root[PATH_MAX];
    if (root[0] == '/' ? join(joined, "", root + 1) != 0 : join(joined, bundle, root) != 0)
        return fail("root path", root);
    if (!realpath(joined, real_root))
        return fail("no container root", joined);
    if (join(joined, real_root, argv[3] + (argv[3][0] == '/')) != 0)
        return fail("target path", argv[3]);
    if (!realpath(joined, target))
        return fail("no target", joined);
    size_t n = strlen(real_root);
    if (strncmp(target, real_root, n) != 0 || (target[n] != '/' && target[n] != '\0')) {
        errno = EXDEV;
        return fail("target resolves outside the container's root:", target);
    }
    if (mount(argv[2], target, NULL, MS_BIND, NULL) != 0)
        return fail("bind", target);
    if (mount(argv[2], target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
              NULL) != 0)
        return fail("remount read-only", target);
    return 0;
}
