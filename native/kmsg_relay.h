/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kmsg mount's relay to the daemon (kmsg_relay.c): each request of the kernel's is sent
 * to the daemon over a SOCK_SEQPACKET socket, and answered when the daemon's reply comes, in
 * any order. The wire format is mokkafs/fuse/relay.py's; tests/unit/test_kmsg_native.py checks
 * the copy here against it.
 */
#ifndef MOKKAFS_KMSG_RELAY_H
#define MOKKAFS_KMSG_RELAY_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdint.h>

#define LARGEST (1 << 20) /* relay.LARGEST: a read asks for at most max_pages pages */
#define REQUEST_SIZE 41   /* relay.REQUEST "<QBqqqq": number, operation, a, b, c, d */
#define REPLY_SIZE 20     /* relay.REPLY "<Qiq": number, errno, value; then the data */
enum { MOUNTED = 0, OPEN = 1, READ = 2, RELEASE = 3, INTERRUPT = 4, POLL = 5 };
#define NOTIFY 0 /* relay.NOTIFY: a reply of this number wakes the poller of its value's file */

/* Take socket `sock` (close-on-exec from now on); 0, or -1 with errno set. */
int relay_start(int sock);

/* An eventfd the loop polls: readable once the daemon's end closed (relay_gone()). */
int relay_wake_fd(void);
int relay_gone(void);

/* Send one message; 0, or -1 (the daemon's end is gone). */
int relay_send(uint64_t number, int op, int64_t a, int64_t b, int64_t c, int64_t d);

/* Hand request `req` to the daemon; the reply thread answers it. A READ is interruptible:
 * the kernel's FUSE_INTERRUPT for it is sent on as INTERRUPT. `fi`: an open's, copied. */
void relay_call(fuse_req_t req, int op, int64_t a, int64_t b, int64_t c, int64_t d,
		const struct fuse_file_info *fi);

/* The reply thread: answers each request as its reply comes, until the daemon's end closes;
 * then marks the relay gone and wakes the loop. */
void *relay_receive(void *unused);

/* Answer every request still waiting, and every later one, ENOTCONN. The loop's thread only
 * (the thread that hands requests over), once it stops handing them. */
void relay_abandon(void);

#endif
