/* SPDX-License-Identifier: Apache-2.0 */
/* Which paths the preload shim sends to the mokkafs mount, and how. Pure string work. */
#ifndef MOKKAFS_PATH_MAP_H
#define MOKKAFS_PATH_MAP_H

#include <stddef.h>

/* 1 when an absolute path lies in a simulated prefix (whole components only:
 * /sys/class/infiniband_verbsX is not /sys/class/infiniband), else 0. */
int mokkafs_redirected(const char *path);

/* Join a relative path to an absolute directory and fold "." and ".." (lexically, as the
 * shell's logical cwd does). Returns 0, or -1 when the result would not fit. */
int mokkafs_join(const char *dir, const char *rel, char *out, size_t size);

/* 1 when `path` is absolute, has a ".." component, and starts in a namespace the view lives
 * in (/sys, /proc, /dev): the paths whose ".." the shim resolves itself. */
int mokkafs_climbs(const char *path);

/* Fold "." and ".." of the absolute `path` as the kernel resolves them in its namespace:
 * before each "..", `physical` rewrites what precedes it (absolute, with no "." or "..") in
 * place to the directory it physically is, links followed, or returns -1 to keep it as
 * written; ".." then takes that directory's parent, and never climbs above "/". A trailing
 * slash is kept. Returns 0, or -1 when the result would not fit in `size`. */
int mokkafs_fold(const char *path, char *out, size_t size,
                 int (*physical)(char *dir, size_t size, void *ctx), void *ctx);

/* The path to use instead of `path` (absolute): 0 = not redirected (use `path`), 1 = `out`
 * holds root + path, -1 = it would not fit in `size` (ENAMETOOLONG; never the host path). */
int mokkafs_map(const char *root, size_t root_len, const char *path, char *out, size_t size);

/* If `path` lies below `root`, the part after it ("/sys/..."), else NULL. */
const char *mokkafs_unroot(const char *root, size_t root_len, const char *path);

#endif
