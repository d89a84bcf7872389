/* SPDX-License-Identifier: Apache-2.0 */
/* Where the view is, and reading its files. MOKKAFS_ROOT names the mount on the node; unset
 * or empty, the view is at the kernel's own paths (a container given the CDI spec). The root
 * is taken at the first nvmlInit, and so is MOKKAFS_CONTROL, the daemon's control socket
 * (MIG changes, mig_change.c). Every call reads its files then: nothing is cached. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "view.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int inits;     /* nvmlInit calls not yet shut down; under lock */
static char root[PATH_MAX];    /* "" or the mount, no trailing slash; under lock */
static char control[PATH_MAX]; /* "" or the daemon's control socket; under lock */

nvmlReturn_t view_open(void)
{
    nvmlReturn_t ret = NVML_SUCCESS;
    pthread_mutex_lock(&lock);
    if (inits == 0) {
        const char *env = getenv("MOKKAFS_ROOT");
        size_t n = env ? strlen(env) : 0;
        while (n > 0 && env[n - 1] == '/')
            n--;
        if (n >= sizeof(root)) {
            ret = NVML_ERROR_DRIVER_NOT_LOADED;
        } else {
            memcpy(root, env ? env : "", n);
            root[n] = '\0';
            const char *given = getenv("MOKKAFS_CONTROL");
            size_t m = given ? strlen(given) : 0;
            m = m < sizeof(control) ? m : 0; /* one too long names none */
            memcpy(control, given ? given : "", m);
            control[m] = '\0';
        }
    }
    if (ret == NVML_SUCCESS)
        inits++;
    pthread_mutex_unlock(&lock);
    if (ret != NVML_SUCCESS)
        return ret;
    char version[256];
    if (view_read(DRIVER_VERSION, version, sizeof(version)) < 0) {
        view_close();
        return NVML_ERROR_DRIVER_NOT_LOADED; /* as the real library without a driver */
    }
    return NVML_SUCCESS;
}

nvmlReturn_t view_check(void)
{
    pthread_mutex_lock(&lock);
    unsigned int n = inits;
    pthread_mutex_unlock(&lock);
    return n ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

void view_close(void)
{
    pthread_mutex_lock(&lock);
    if (inits)
        inits--;
    pthread_mutex_unlock(&lock);
}

int view_control(char *out, size_t size)
{
    pthread_mutex_lock(&lock);
    size_t n = strlen(control);
    int ok = n > 0 && n < size;
    if (ok)
        memcpy(out, control, n + 1);
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

int view_path(char *out, size_t size, const char *rel)
{
    pthread_mutex_lock(&lock);
    int n = snprintf(out, size, "%s/%s", root, rel);
    pthread_mutex_unlock(&lock);
    return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

long view_read(const char *rel, char *buf, size_t size)
{
    char path[PATH_MAX];
    if (size == 0 || view_path(path, sizeof(path), rel) < 0)
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    for (;;) {
        ssize_t got = read(fd, buf + len, size - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            close(fd);
            return -1;
        }
        if (got == 0 || (len += (size_t)got) == size - 1)
            break;
    }
    close(fd);
    buf[len] = '\0';
    return (long)len;
}

char *trim(char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n'))
        s[--n] = '\0';
    return s;
}

static const char *next_line(const char *line)
{
    const char *end = strchr(line, '\n');
    return end ? end + 1 : NULL;
}

int text_field(const char *text, const char *key, char *out, size_t size)
{
    return line_value(text, key, ':', out, size);
}

int line_value(const char *text, const char *key, char sep, char *out, size_t size)
{
    size_t klen = strlen(key);
    for (const char *line = text; line != NULL; line = next_line(line)) {
        if (strncmp(line, key, klen) != 0 || line[klen] != sep)
            continue;
        const char *v = line + klen + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = strcspn(v, "\n");
        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
            n--;
        if (n >= size)
            return -1;
        memcpy(out, v, n);
        out[n] = '\0';
        return 0;
    }
    return -1;
}

nvmlReturn_t copy_out(char *dst, unsigned int length, const char *src)
{
    size_t n = strlen(src);
    if (n >= length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, n + 1);
    return NVML_SUCCESS;
}
