/* SPDX-License-Identifier: Apache-2.0 */
#include "path_map.h"

#include <string.h>

#include "path_prefixes.h" /* prefixes[], numbered[], buses[]: the surfaces' roots */

static int ends_component(char c) { return c == '\0' || c == '/'; }

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* ``path`` is ``name`` followed by one or more digits, as a whole component */
static int numbered_name(const char *path, const char *name) {
    size_t n = strlen(name);
    if (strncmp(path, name, n) != 0 || !is_digit(path[n]))
        return 0;
    const char *q = path + n;
    while (is_digit(*q))
        q++;
    return ends_component(*q);
}

static int is_hex(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* ``path`` is ``dir`` followed by a PCI domain and bus in lower-case hex (DDDD:BB), as a whole
   component */
static int bus_named(const char *path, const char *dir) {
    size_t n = strlen(dir);
    if (strncmp(path, dir, n) != 0)
        return 0;
    const char *q = path + n;
    for (int i = 0; i < 7; i++) {
        if (i == 4 ? q[i] != ':' : !is_hex(q[i]))
            return 0;
    }
    return ends_component(q[7]);
}

int mokkafs_redirected(const char *path) {
    /* Every root starts with /sys, /proc or /dev: one look rejects the rest of the world. */
    if (path[0] != '/' || (path[1] != 's' && path[1] != 'p' && path[1] != 'd'))
        return 0;
    for (const char *const *p = prefixes; *p; p++) {
        size_t n = strlen(*p);
        if (strncmp(path, *p, n) == 0 && ends_component(path[n]))
            return 1;
    }
    /* /dev/nvidia<N>, /dev/nvidia-nvswitch<N>: the NVIDIA driver's numbered nodes */
    for (const char *const *p = numbered; *p; p++) {
        if (numbered_name(path, *p))
            return 1;
    }
    /* /sys/devices/pciDDDD:BB: a PCI host bridge, the root of a simulated hierarchy */
    for (const char *const *p = buses; *p; p++) {
        if (bus_named(path, *p))
            return 1;
    }
    return 0;
}

/* Drop the last component of the absolute path out[0..*len) ("/" stays "/"). */
static void pop_component(char *out, size_t *len) {
    while (*len > 1 && out[*len - 1] != '/')
        (*len)--;
    if (*len > 1)
        (*len)--;
    out[*len] = '\0';
}

/* Append the component p[0..n) to the absolute path out[0..*len); -1 if it does not fit. */
static int push_component(char *out, size_t *len, size_t size, const char *p, size_t n) {
    if (*len + 1 + n + 1 > size)
        return -1;
    if (*len > 1)
        out[(*len)++] = '/';
    memcpy(out + *len, p, n);
    *len += n;
    out[*len] = '\0';
    return 0;
}

int mokkafs_join(const char *dir, const char *rel, char *out, size_t size) {
    size_t len = strlen(dir);
    if (len + 1 + strlen(rel) + 1 > size)
        return -1;
    memcpy(out, dir, len + 1);
    while (len > 1 && out[len - 1] == '/')
        out[--len] = '\0';
    const char *p = rel;
    while (*p) {
        const char *end = strchr(p, '/');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.')) {
            /* nothing */
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            pop_component(out, &len);
        } else if (push_component(out, &len, size, p, n) != 0) {
            return -1;
        }
        p += n;
        if (*p == '/')
            p++;
    }
    return 0;
}

int mokkafs_climbs(const char *path) {
    if (strncmp(path, "/sys", 4) != 0 && strncmp(path, "/proc", 5) != 0 &&
        strncmp(path, "/dev", 4) != 0)
        return 0;
    for (const char *p = strstr(path, "/.."); p; p = strstr(p + 1, "/.."))
        if (ends_component(p[3]))
            return 1;
    return 0;
}

int mokkafs_fold(const char *path, char *out, size_t size,
                 int (*physical)(char *dir, size_t size, void *ctx), void *ctx) {
    if (path[0] != '/' || size < 2)
        return -1;
    size_t len = 1;
    out[0] = '/';
    out[1] = '\0';
    const char *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            if (len > 1 && physical(out, size, ctx) == 0)
                len = strlen(out);
            pop_component(out, &len);
        } else if (n > 0 && !(n == 1 && p[0] == '.') &&
                   push_component(out, &len, size, p, n) != 0) {
            return -1;
        }
        p += n;
    }
    size_t given = strlen(path);
    if (len > 1 && path[given - 1] == '/') {
        if (len + 2 > size)
            return -1;
        out[len++] = '/';
        out[len] = '\0';
    }
    return 0;
}

int mokkafs_map(const char *root, size_t root_len, const char *path, char *out, size_t size) {
    if (!mokkafs_redirected(path))
        return 0;
    size_t n = strlen(path);
    if (root_len + n + 1 > size)
        return -1;
    memcpy(out, root, root_len);
    memcpy(out + root_len, path, n + 1);
    return 1;
}

const char *mokkafs_unroot(const char *root, size_t root_len, const char *path) {
    if (root_len == 0 || strncmp(path, root, root_len) != 0)
        return NULL;
    if (path[root_len] == '\0')
        return "/";
    return path[root_len] == '/' ? path + root_len : NULL;
}
