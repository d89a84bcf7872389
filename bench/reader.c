/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-operation latency of file-system reads, so the reader is never the bottleneck:
 *   reader OP DURATION_MS START_MONOTONIC_NS LISTFILE [LATFILE]
 * OP: read (open, read to EOF, close), stat, listdir (opendir, readdir to end, closedir),
 * readlink. Waits until START (so several readers start together), loops over the paths in
 * LISTFILE for DURATION_MS, and prints one JSON line: ops, errors, p50 and p99 in microseconds.
 * With LATFILE, it also writes every latency there (native int64 nanoseconds), so percentiles
 * can be taken over the samples of several readers together.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static int one(const char *op, const char *path) {
    char buf[8192];
    if (strcmp(op, "read") == 0) {
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            return -1;
        while (read(fd, buf, sizeof buf) > 0) {
        }
        return close(fd);
    }
    if (strcmp(op, "stat") == 0) {
        struct stat st;
        return stat(path, &st);
    }
    if (strcmp(op, "listdir") == 0) {
        DIR *d = opendir(path);
        if (!d)
            return -1;
        while (readdir(d)) {
        }
        return closedir(d);
    }
    if (strcmp(op, "readlink") == 0)
        return readlink(path, buf, sizeof buf) < 0 ? -1 : 0;
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: reader OP DURATION_MS START_MONOTONIC_NS LISTFILE [LATFILE]\n"
                        "  (DURATION_MS 0: one untimed pass over LISTFILE)\n");
        return 2;
    }
    const char *op = argv[1];
    long long duration = atoll(argv[2]) * 1000000LL, start = atoll(argv[3]);
    FILE *f = fopen(argv[4], "r");
    if (!f)
        return 2;
    size_t n = 0, cap = 1024;
    char **paths = malloc(cap * sizeof *paths), line[4096];
    while (paths && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (n == cap)
            paths = realloc(paths, (cap *= 2) * sizeof *paths);
        if (paths)
            paths[n++] = strdup(line);
    }
    fclose(f);
    if (!paths || n == 0)
        return 2;
    if (duration == 0) { /* warm-up: one untimed pass, so cells measure the steady state */
        size_t failed = 0;
        for (size_t i = 0; i < n; i++)
            failed += one(op, paths[i]) != 0;
        printf("{\"ops\": %zu, \"errors\": %zu}\n", n, failed);
        return 0;
    }
    size_t lcap = 1 << 20, count = 0, errors = 0;
    long long *lat = malloc(lcap * sizeof *lat);
    while (now_ns() < start) {
    }
    long long end = start + duration;
    for (size_t i = 0; lat; i = (i + 1) % n) {
        long long t0 = now_ns();
        if (t0 >= end)
            break;
        errors += one(op, paths[i]) != 0;
        if (count == lcap)
            lat = realloc(lat, (lcap *= 2) * sizeof *lat);
        if (lat)
            lat[count++] = now_ns() - t0;
    }
    if (!lat)
        return 2;
    qsort(lat, count, sizeof *lat, cmp);
    if (argc == 6) {
        FILE *out = fopen(argv[5], "wb");
        if (!out || fwrite(lat, sizeof *lat, count, out) != count || fclose(out) != 0)
            return 2;
    }
    printf("{\"ops\": %zu, \"errors\": %zu, \"p50_us\": %.2f, \"p99_us\": %.2f}\n", count, errors,
           count ? lat[count / 2] / 1000.0 : 0.0, count ? lat[count * 99 / 100] / 1000.0 : 0.0);
    return 0;
}
