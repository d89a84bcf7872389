/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kmsg mount's relay to the daemon (kmsg_relay.h; the daemon's side:
 * mokkafs/fuse/relay.py).
 *
 * - A request waiting for the daemon holds a slot of a table, no thread. The table grows as
 *   requests come (it has no bound of its own: the daemon bounds the readers, docs/kmsg.md),
 *   so the loop never stops reading the kernel: an INTERRUPT always gets through.
 * - A request's number is its slot's index (low 32 bits) and a serial (high 32 bits, never
 *   0): a reply finds its slot at once, and a stale number finds none. Number 0 is MOUNTED.
 * - Whoever takes a request's slot out of the table answers it: the reply thread (the
 *   daemon's reply came), the loop's thread (the send failed, or the relay was abandoned).
 * - A READ the kernel interrupts (FUSE_INTERRUPT: its reader got a signal, or was killed) is
 *   sent on as INTERRUPT with the READ's number, once the READ itself is on the socket; the
 *   daemon ends that read (EINTR, unless its record came first).
 * - A POLL is answered with the daemon's mask. A reply numbered NOTIFY asks for no request:
 *   it wakes the kernel's poller of the file its value names (kmsg_pollers.c).
 */
#define _GNU_SOURCE
#include "kmsg_relay.h"
#include "kmsg_pollers.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

_Static_assert(sizeof(uintptr_t) >= sizeof(uint64_t), "a request's number is callback data");

struct slot {
	uint64_t number; /* 0: free */
	fuse_req_t req;
	int op;
	int sent;        /* on the daemon's socket */
	int interrupted; /* interrupted before it was sent: INTERRUPT follows it */
	struct fuse_file_info fi; /* an open's, copied: the kernel's lives only in the handler */
};

static struct {
	int sock;
	int wake;             /* eventfd: the daemon's end closed */
	pthread_mutex_t lock; /* guards what follows */
	struct slot *slots;   /* by index: a number's low 32 bits */
	uint32_t size;
	uint32_t *free; /* the free slots' indices, a stack */
	uint32_t nfree;
	uint32_t serial; /* the last number's high 32 bits */
	int gone;        /* the daemon's end closed, or the mount stops: everything is ENOTCONN */
} relay = {.sock = -1, .wake = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static void put64(unsigned char *at, uint64_t v) {
	v = htole64(v);
	memcpy(at, &v, 8);
}

static uint64_t get64(const unsigned char *at) {
	uint64_t v;
	memcpy(&v, at, 8);
	return le64toh(v);
}

int relay_start(int sock) {
	relay.sock = sock;
	if (fcntl(sock, F_SETFD, FD_CLOEXEC) < 0) /* nothing it starts may hold it */
		return -1;
	relay.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return relay.wake < 0 ? -1 : 0;
}

int relay_wake_fd(void) {
	return relay.wake;
}

int relay_gone(void) {
	pthread_mutex_lock(&relay.lock);
	int gone = relay.gone;
	pthread_mutex_unlock(&relay.lock);
	return gone;
}

int relay_send(uint64_t number, int op, int64_t a, int64_t b, int64_t c, int64_t d) {
	unsigned char m[REQUEST_SIZE];
	put64(m, number);
	m[8] = (unsigned char)op;
	put64(m + 9, (uint64_t)a);
	put64(m + 17, (uint64_t)b);
	put64(m + 25, (uint64_t)c);
	put64(m + 33, (uint64_t)d);
	ssize_t sent;
	do
		sent = send(relay.sock, m, sizeof m, MSG_NOSIGNAL);
	while (sent < 0 && errno == EINTR);
	return sent == (ssize_t)sizeof m ? 0 : -1;
}

/* Twice the slots (lock held); -1: no memory. */
static int grow(void) {
	uint32_t size = relay.size ? relay.size * 2 : 64;
	if (relay.size >= 1u << 30)
		return -1;
	struct slot *slots = realloc(relay.slots, size * sizeof *slots);
	if (slots == NULL)
		return -1;
	relay.slots = slots;
	uint32_t *free_slots = realloc(relay.free, size * sizeof *free_slots);
	if (free_slots == NULL)
		return -1; /* (the slots grew alone: the next attempt reuses them) */
	relay.free = free_slots;
	for (uint32_t i = size; i > relay.size; i--) {
		relay.slots[i - 1].number = 0;
		relay.free[relay.nfree++] = i - 1;
	}
	relay.size = size;
	return 0;
}

/* A slot for `req` (lock held): its number, or 0 (no memory). */
static uint64_t put(fuse_req_t req, int op, const struct fuse_file_info *fi) {
	if (relay.nfree == 0 && grow() < 0)
		return 0;
	uint32_t index = relay.free[--relay.nfree];
	if (++relay.serial == 0)
		relay.serial = 1;
	uint64_t number = (uint64_t)relay.serial << 32 | index;
	relay.slots[index] = (struct slot){.number = number, .req = req, .op = op};
	if (fi != NULL)
		relay.slots[index].fi = *fi;
	return number;
}

/* The slot of request `number` (lock held), or NULL: answered, or never asked. */
static struct slot *find(uint64_t number) {
	uint32_t index = (uint32_t)number;
	if (number == 0 || index >= relay.size || relay.slots[index].number != number)
		return NULL;
	return &relay.slots[index];
}

/* Take the slot of request `number` out of the table (0: not there); whoever takes it
 * answers it. */
static int take(uint64_t number, struct slot *out) {
	pthread_mutex_lock(&relay.lock);
	struct slot *s = find(number);
	if (s != NULL) {
		*out = *s;
		s->number = 0;
		relay.free[relay.nfree++] = (uint32_t)number;
	}
	pthread_mutex_unlock(&relay.lock);
	return s != NULL;
}

/* Answer a request with an errno; a release always succeeds (its handle is gone with the
 * daemon, or the daemon's answer does not matter to the kernel). */
static void fail(fuse_req_t req, int op, int error) {
	fuse_reply_err(req, op == RELEASE ? 0 : error);
}

void relay_abandon(void) {
	pthread_mutex_lock(&relay.lock);
	relay.gone = 1;
	struct slot *slots = relay.slots;
	uint32_t size = relay.size;
	relay.slots = NULL;
	relay.size = relay.nfree = 0;
	free(relay.free);
	relay.free = NULL;
	pthread_mutex_unlock(&relay.lock);
	for (uint32_t i = 0; i < size; i++)
		if (slots[i].number != 0)
			fail(slots[i].req, slots[i].op, ENOTCONN);
	free(slots);
}

/* libfuse's interrupt callback for a READ: on the loop's thread (when libfuse reads the
 * INTERRUPT, or at once in relay_call if it came first). It never touches `req`: the reply
 * thread may be answering it meanwhile. */
static void interrupted(fuse_req_t req, void *data) {
	(void)req;
	uint64_t number = (uint64_t)(uintptr_t)data;
	pthread_mutex_lock(&relay.lock);
	struct slot *s = find(number);
	int tell = s != NULL && s->sent;
	if (s != NULL && !s->sent)
		s->interrupted = 1;
	pthread_mutex_unlock(&relay.lock);
	if (tell)
		relay_send(number, INTERRUPT, 0, 0, 0, 0);
}

void relay_call(fuse_req_t req, int op, int64_t a, int64_t b, int64_t c, int64_t d,
		const struct fuse_file_info *fi) {
	pthread_mutex_lock(&relay.lock);
	int gone = relay.gone;
	uint64_t number = gone ? 0 : put(req, op, fi);
	pthread_mutex_unlock(&relay.lock);
	if (number == 0) {
		if (!gone)
			fprintf(stderr, "mokkafs: ERROR mokkafs-kmsg: no memory for another request; "
					"answering ENOMEM\n");
		fail(req, op, gone ? ENOTCONN : ENOMEM);
		return;
	}
	/* Registered before the request is sent: until then no reply can free `req`. */
	if (op == READ)
		fuse_req_interrupt_func(req, interrupted, (void *)(uintptr_t)number);
	struct slot mine;
	if (relay_send(number, op, a, b, c, d) < 0) {
		if (take(number, &mine))
			fail(req, op, ENOTCONN);
		return;
	}
	pthread_mutex_lock(&relay.lock);
	struct slot *s = find(number);
	int tell = s != NULL && s->interrupted;
	if (s != NULL)
		s->sent = 1;
	pthread_mutex_unlock(&relay.lock);
	if (tell)
		relay_send(number, INTERRUPT, 0, 0, 0, 0);
}

static void answer(const struct slot *s, int error, int64_t value, const char *data,
		   size_t size) {
	if (error != 0) {
		fail(s->req, s->op, error);
	} else if (s->op == OPEN) {
		struct fuse_file_info fi = s->fi;
		fi.fh = (uint64_t)value;
		fi.direct_io = 1;
		fi.keep_cache = 0;
		if (fuse_reply_open(s->req, &fi) == -ENOENT) /* the opener was interrupted */
			relay_send(0, RELEASE, value, 0, 0, 0);
	} else if (s->op == READ) {
		fuse_reply_buf(s->req, data, size);
	} else if (s->op == POLL) {
		fuse_reply_poll(s->req, (unsigned)value);
	} else {
		fuse_reply_err(s->req, 0);
	}
}

void *relay_receive(void *unused) {
	(void)unused;
	static unsigned char m[REPLY_SIZE + LARGEST];
	for (;;) {
		ssize_t n = recv(relay.sock, m, sizeof m, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < REPLY_SIZE)
			break;
		uint32_t error;
		memcpy(&error, m + 8, 4);
		if (get64(m) == NOTIFY) {
			pollers_wake(get64(m + 12));
			continue;
		}
		struct slot s;
		if (take(get64(m), &s))
			answer(&s, (int)le32toh(error), (int64_t)get64(m + 12), (const char *)m + REPLY_SIZE,
			       (size_t)n - REPLY_SIZE);
	}
	pthread_mutex_lock(&relay.lock);
	relay.gone = 1;
	pthread_mutex_unlock(&relay.lock);
	uint64_t one = 1;
	if (write(relay.wake, &one, sizeof one) < 0 && errno != EAGAIN)
		perror("mokkafs-kmsg: eventfd");
	return NULL;
}
