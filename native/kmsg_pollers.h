/* SPDX-License-Identifier: Apache-2.0 */
/* mokkafs-kmsg's table of the kernel's poll handles, by file handle (kmsg_pollers.c) */
#ifndef MOKKAFS_KMSG_POLLERS_H
#define MOKKAFS_KMSG_POLLERS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdint.h>

/* Keep `ph` for file `fh`, in place of an older one */
void pollers_keep(uint64_t fh, struct fuse_pollhandle *ph);
/* Wake the poller of file `fh` (the daemon's NOTIFY), and forget its handle */
void pollers_wake(uint64_t fh);
/* Forget the handle of file `fh` (its release) */
void pollers_drop(uint64_t fh);

#endif
