/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel's poll handles mokkafs-kmsg holds, by file handle: a poller that will sleep
 * leaves one; the daemon's NOTIFY for that file (a record came) wakes it. A newer poll of
 * the same file replaces it; its release drops it. A handle that cannot be kept (no memory)
 * is dropped: its poller then waits for its own timeout. */
#include <pthread.h>
#include <stdlib.h>

#include "kmsg_pollers.h"

struct poller {
	uint64_t fh;
	struct fuse_pollhandle *ph;
	struct poller *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct poller *pollers; /* under lock */

/* Take the handle kept for `fh` out of the table (NULL: none) */
static struct fuse_pollhandle *take(uint64_t fh) {
	struct fuse_pollhandle *ph = NULL;
	pthread_mutex_lock(&lock);
	for (struct poller **at = &pollers; *at != NULL; at = &(*at)->next) {
		if ((*at)->fh == fh) {
			struct poller *found = *at;
			*at = found->next;
			ph = found->ph;
			free(found);
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return ph;
}

void pollers_drop(uint64_t fh) {
	struct fuse_pollhandle *ph = take(fh);
	if (ph != NULL)
		fuse_pollhandle_destroy(ph);
}

void pollers_keep(uint64_t fh, struct fuse_pollhandle *ph) {
	pollers_drop(fh);
	struct poller *p = malloc(sizeof *p);
	if (p == NULL) {
		fuse_pollhandle_destroy(ph);
		return;
	}
	*p = (struct poller){.fh = fh, .ph = ph};
	pthread_mutex_lock(&lock);
	p->next = pollers;
	pollers = p;
	pthread_mutex_unlock(&lock);
}

void pollers_wake(uint64_t fh) {
	struct fuse_pollhandle *ph = take(fh);
	if (ph != NULL) {
		fuse_lowlevel_notify_poll(ph);
		fuse_pollhandle_destroy(ph);
	}
}
