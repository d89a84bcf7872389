/* SPDX-License-Identifier: Apache-2.0 */
/* One MIG request to the daemon's control socket (mokkafs/serve/control.py), as `mokkafs mig`
 * sends it: a Unix stream socket, one JSON line each way. The socket is MOKKAFS_CONTROL at
 * the first nvmlInit (`mokkafs nvml-env --control PATH` prints it). The daemon answers only
 * root and its own user, and closes on others without a word: NO_PERMISSION, as the real
 * library answers a caller without the MIG configuration capability.
 *
 * The library is loaded into any consumer: no JSON library, every read bounded, the whole
 * exchange within CONTROL_SECONDS, no SIGPIPE. Only the answer's "ok" is read: the caller
 * reads the view for what changed. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "mig.h"

#define CONTROL_SECONDS 10 /* a daemon's first MIG change loads its profile checker */
#define ANSWER_SIZE 65536  /* "ok" comes first; the rest (the listing) is not read */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Waits of one call at most the time left before the deadline */
static int time_left(int fd, double deadline)
{
    double left = deadline - now();
    if (left <= 0)
        return -1;
    struct timeval tv = {.tv_sec = (time_t)left,
                         .tv_usec = (suseconds_t)((left - (double)(time_t)left) * 1e6)};
    if (tv.tv_sec == 0 && tv.tv_usec == 0)
        tv.tv_usec = 1;
    return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0
        || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ? -1 : 0;
}

static size_t skip_space(const char *s, size_t i, size_t n)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
        i++;
    return i;
}

/* The value of the answer's top-level "ok": 1 true, 0 false, -1 none (yet) */
static int answer_ok(const char *s, size_t n)
{
    int depth = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] == '"') {
            size_t start = ++i;
            while (i < n && s[i] != '"')
                i += s[i] == '\\' ? 2 : 1;
            if (i >= n)
                return -1;
            size_t len = i++ - start;
            if (depth != 1 || len != 2 || memcmp(s + start, "ok", 2) != 0)
                continue;
            i = skip_space(s, i, n);
            if (i >= n || s[i] != ':')
                continue; /* a value "ok", not the key */
            i = skip_space(s, i + 1, n);
            if (n - i >= 4 && memcmp(s + i, "true", 4) == 0)
                return 1;
            if (n - i >= 5 && memcmp(s + i, "false", 5) == 0)
                return 0;
            return -1;
        }
        depth += s[i] == '{' || s[i] == '[';
        depth -= s[i] == '}' || s[i] == ']';
        i++;
    }
    return -1;
}

static nvmlReturn_t send_all(int fd, const char *data, size_t len, double deadline)
{
    while (len > 0) {
        if (time_left(fd, deadline) < 0)
            return NVML_ERROR_TIMEOUT;
        ssize_t sent = send(fd, data, len, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR)
            continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return NVML_ERROR_TIMEOUT;
        if (sent < 0) /* the daemon hung up: it answers no other user */
            return errno == EPIPE || errno == ECONNRESET ? NVML_ERROR_NO_PERMISSION
                                                         : NVML_ERROR_UNKNOWN;
        data += sent;
        len -= (size_t)sent;
    }
    return NVML_SUCCESS;
}

/* The answer's "ok" (1 or 0) into *ok, read into answer (ANSWER_SIZE bytes) */
static nvmlReturn_t read_into(int fd, double deadline, char *answer, int *ok)
{
    size_t len = 0;
    *ok = -1;
    while (*ok < 0 && len < ANSWER_SIZE) {
        if (time_left(fd, deadline) < 0)
            return NVML_ERROR_TIMEOUT;
        ssize_t got = recv(fd, answer + len, ANSWER_SIZE - len, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return NVML_ERROR_TIMEOUT;
        if (got < 0)
            return errno == ECONNRESET ? NVML_ERROR_NO_PERMISSION : NVML_ERROR_UNKNOWN;
        if (got == 0) /* closed without a word: a caller the daemon does not answer */
            return len == 0 ? NVML_ERROR_NO_PERMISSION : NVML_ERROR_UNKNOWN;
        len += (size_t)got;
        *ok = answer_ok(answer, len);
        if (*ok < 0 && memchr(answer + len - (size_t)got, '\n', (size_t)got))
            return NVML_ERROR_UNKNOWN; /* a whole answer without "ok" */
    }
    return *ok < 0 ? NVML_ERROR_UNKNOWN : NVML_SUCCESS;
}

static nvmlReturn_t read_answer(int fd, double deadline, int *ok)
{
    char *answer = malloc(ANSWER_SIZE);
    nvmlReturn_t ret = answer ? read_into(fd, deadline, answer, ok) : NVML_ERROR_MEMORY;
    free(answer);
    return ret;
}

/* "key": [value], or "key": value when bare, when value >= 0; else nothing */
static void field(char *out, size_t size, const char *key, int value, int bare)
{
    if (value < 0)
        out[0] = '\0';
    else
        snprintf(out, size, bare ? ", \"%s\": %d" : ", \"%s\": [%d]", key, value);
}

nvmlReturn_t control_mig(const struct mig_request *req, int *refused)
{
    char path[PATH_MAX], request[320], profiles[32] = "", starts[32], gis[32], cis[32],
        mode[32];
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    *refused = 0;
    if (view_control(path, sizeof(path)) < 0 || strlen(path) >= sizeof(addr.sun_path))
        return NVML_ERROR_NO_PERMISSION;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    if (req->profile >= 0) /* a name or an ID: the daemon reads it as nvidia-smi's -cgi */
        snprintf(profiles, sizeof(profiles), "\"%d\"", req->profile);
    field(starts, sizeof(starts), "starts", req->start, 0);
    field(gis, sizeof(gis), "gi", req->gi, 0);
    field(cis, sizeof(cis), "ci", req->ci, 0);
    field(mode, sizeof(mode), "mode", req->mode, 1);
    int n = snprintf(request, sizeof(request),
                     "{\"op\": \"mig\", \"action\": \"%s\", \"gpu\": %u, \"profiles\": [%s], "
                     "\"C\": false%s%s%s%s}\n",
                     req->action, req->index, profiles, starts, gis, cis, mode);
    if (n < 0 || (size_t)n >= sizeof(request))
        return NVML_ERROR_UNKNOWN;

    double deadline = now() + CONTROL_SECONDS;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return NVML_ERROR_UNKNOWN;
    nvmlReturn_t ret = time_left(fd, deadline) < 0 ? NVML_ERROR_UNKNOWN : NVML_SUCCESS;
    while (ret == NVML_SUCCESS && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        if (errno == EINTR)
            continue;
        if (errno == EISCONN) /* connected by a call a signal interrupted */
            break;
        /* none there, or not the caller's to reach (a directory only root may enter) */
        ret = errno == EAGAIN || errno == ETIMEDOUT ? NVML_ERROR_TIMEOUT
                                                     : NVML_ERROR_NO_PERMISSION;
    }
    int ok = -1;
    if (ret == NVML_SUCCESS)
        ret = send_all(fd, request, (size_t)n, deadline);
    if (ret == NVML_SUCCESS)
        ret = read_answer(fd, deadline, &ok);
    close(fd);
    if (ret == NVML_SUCCESS && ok == 0)
        *refused = 1;
    return ret;
}
