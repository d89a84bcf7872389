/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mokkafs-kmsg FD PATH: the kmsg mount's process (no-open mode; docs/kmsg.md).
 *
 * It mounts a FUSE connection whose root is one file over the view's dev/kmsg at PATH
 * (libfuse takes the root's mode from the mountpoint: a regular file), and answers that
 * file's opens, reads and releases through the daemon, over the SOCK_SEQPACKET socket FD
 * (the protocol: mokkafs/fuse/relay.py; the daemon's side: mokkafs/serve/kmsg.py). It keeps
 * no State and no clock.
 *
 * - Opens are answered (this connection is not the view's no-open one) direct_io, without
 *   keep_cache: every reader keeps a position of its own, every read reaches the daemon.
 * - Replies come in any order. One thread runs the FUSE loop: it sends each request to the
 *   daemon and goes on; a second thread receives the daemon's replies and answers the
 *   kernel (fuse_reply_* from any thread). A waiting read holds a table slot, no thread:
 *   the process stays at two threads and one receive buffer each, where libfuse's
 *   multi-threaded loop would hold a thread and a 1 MiB buffer for each waiting read.
 * - At most OUTSTANDING requests wait for the daemon (MAX_WAITING waiting reads and 8
 *   more: what pyfuse3's worker tasks allowed). With the table full, the loop reads no
 *   more requests from the kernel until a reply frees a slot.
 * - SIGTERM or SIGINT (the daemon's ordered stop): every request still waiting gets
 *   ENOTCONN, and it unmounts. The daemon's end closing (the daemon is gone): it ends
 *   without unmounting; the view's own mount is gone or dead, and detaching it detaches
 *   this one too. (No PR_SET_PDEATHSIG: it follows the thread that started the process,
 *   and trio starts processes from worker threads.)
 * - The mount failing: an error on stderr, exit status 1.
 *
 * Facts kept in the Python package, checked equal by tests/unit/test_kmsg_native.py:
 * STREAM_SIZE (mokkafs/fuse/attrs.py), MAX_WAITING (mokkafs/fuse/stream.py), the wire
 * format (mokkafs/fuse/relay.py) and the mount options (mokkafs/fuse/mount.py `options`).
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 314
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STREAM_SIZE (1LL << 62) /* attrs.STREAM_SIZE: where SEEK_END puts a reader */
#define TIMEOUT 3600.0          /* the root's attributes never change */
#define MAX_WAITING 64          /* stream.MAX_WAITING */
#define OUTSTANDING (8 + MAX_WAITING)
#define LARGEST (1 << 20) /* relay.LARGEST: a read asks for at most max_pages pages */
#define REQUEST_SIZE 33   /* relay.REQUEST "<QBqqq": number, operation, a, b, c */
#define REPLY_SIZE 20     /* relay.REPLY "<Qiq": number, errno, value; then the data */
enum { MOUNTED = 0, OPEN = 1, READ = 2, RELEASE = 3 };
#define OPTIONS "default_permissions,allow_other,ro,subtype=mokkafs,fsname=mokkafs@"

struct slot {
	uint64_t number; /* 0: free */
	fuse_req_t req;
	int op;
	struct fuse_file_info fi; /* an open's, copied: the kernel's lives only in the handler */
};

static struct {
	int sock;
	int wake; /* eventfd: the daemon's end closed, or a full table freed a slot */
	struct timespec mtime;
	pthread_mutex_t lock; /* guards what follows */
	struct slot slots[OUTSTANDING];
	int used;
	uint64_t next;
	int gone; /* the daemon's end closed, or the mount stops: everything is ENOTCONN */
} relay = {.sock = -1, .wake = -1, .lock = PTHREAD_MUTEX_INITIALIZER, .next = 1};

static void put64(unsigned char *at, uint64_t v) {
	v = htole64(v);
	memcpy(at, &v, 8);
}

static uint64_t get64(const unsigned char *at) {
	uint64_t v;
	memcpy(&v, at, 8);
	return le64toh(v);
}

static void wake(void) {
	uint64_t one = 1;
	if (write(relay.wake, &one, sizeof one) < 0 && errno != EAGAIN)
		perror("mokkafs-kmsg: eventfd");
}

/* Take the slot of request `number` out of the table (0: not there); whoever takes it
 * answers it. */
static int take(uint64_t number, struct slot *out) {
	int found = 0;
	pthread_mutex_lock(&relay.lock);
	for (int i = 0; i < OUTSTANDING && !found; i++) {
		if (relay.slots[i].number == number && number != 0) {
			*out = relay.slots[i];
			relay.slots[i].number = 0;
			if (relay.used-- == OUTSTANDING)
				wake();
			found = 1;
		}
	}
	pthread_mutex_unlock(&relay.lock);
	return found;
}

/* Answer a request with an errno; a release always succeeds (its handle is gone with the
 * daemon, or the daemon's answer does not matter to the kernel). */
static void fail(fuse_req_t req, int op, int error) {
	fuse_reply_err(req, op == RELEASE ? 0 : error);
}

/* Answer every request still waiting, and every later one, ENOTCONN. */
static void abandon(void) {
	struct slot left[OUTSTANDING];
	int n = 0;
	pthread_mutex_lock(&relay.lock);
	relay.gone = 1;
	for (int i = 0; i < OUTSTANDING; i++) {
		if (relay.slots[i].number != 0) {
			left[n++] = relay.slots[i];
			relay.slots[i].number = 0;
		}
	}
	relay.used = 0;
	pthread_mutex_unlock(&relay.lock);
	for (int i = 0; i < n; i++)
		fail(left[i].req, left[i].op, ENOTCONN);
}

static int send_request(uint64_t number, int op, int64_t a, int64_t b, int64_t c) {
	unsigned char m[REQUEST_SIZE];
	put64(m, number);
	m[8] = (unsigned char)op;
	put64(m + 9, (uint64_t)a);
	put64(m + 17, (uint64_t)b);
	put64(m + 25, (uint64_t)c);
	ssize_t sent;
	do
		sent = send(relay.sock, m, sizeof m, MSG_NOSIGNAL);
	while (sent < 0 && errno == EINTR);
	return sent == (ssize_t)sizeof m ? 0 : -1;
}

/* Hand a request to the daemon; the reader thread answers it. */
static void call(fuse_req_t req, int op, int64_t a, int64_t b, int64_t c,
		 const struct fuse_file_info *fi) {
	uint64_t number = 0;
	pthread_mutex_lock(&relay.lock);
	for (int i = 0; i < OUTSTANDING && !relay.gone; i++) {
		if (relay.slots[i].number == 0) {
			number = relay.next++;
			relay.slots[i] = (struct slot){.number = number, .req = req, .op = op};
			if (fi != NULL)
				relay.slots[i].fi = *fi;
			relay.used++;
			break;
		}
	}
	int gone = relay.gone;
	pthread_mutex_unlock(&relay.lock);
	if (number == 0) { /* gone (the loop reads no request while the table is full) */
		fail(req, op, gone ? ENOTCONN : EAGAIN);
		return;
	}
	struct slot mine;
	if (send_request(number, op, a, b, c) < 0 && take(number, &mine))
		fail(req, op, ENOTCONN);
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
			send_request(0, RELEASE, value, 0, 0);
	} else if (s->op == READ) {
		fuse_reply_buf(s->req, data, size);
	} else {
		fuse_reply_err(s->req, 0);
	}
}

/* Hand each reply to its request until the daemon's end closes; then abandon the rest. */
static void *receive(void *unused) {
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
		struct slot s;
		if (take(get64(m), &s))
			answer(&s, (int)le32toh(error), (int64_t)get64(m + 12), (const char *)m + REPLY_SIZE,
			       (size_t)n - REPLY_SIZE);
	}
	abandon();
	wake();
	return NULL;
}

static void kmsg_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	(void)fi;
	if (ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct stat st = {0};
	st.st_ino = ino;
	st.st_mode = S_IFREG | 0444;
	st.st_nlink = 1;
	st.st_size = STREAM_SIZE;
	st.st_blksize = 4096;
	st.st_blocks = (STREAM_SIZE + 511) / 512;
	st.st_atim = st.st_mtim = st.st_ctim = relay.mtime;
	fuse_reply_attr(req, &st, TIMEOUT);
}

static void kmsg_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	(void)ino;
	call(req, OPEN, fi->flags, fuse_req_ctx(req)->pid, 0, fi);
}

static void kmsg_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi) {
	(void)ino;
	call(req, READ, (int64_t)fi->fh, off, (int64_t)size, NULL);
}

static void kmsg_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	(void)ino;
	call(req, RELEASE, (int64_t)fi->fh, 0, 0, NULL);
}

static const struct fuse_lowlevel_ops ops = {
	.getattr = kmsg_getattr,
	.open = kmsg_open,
	.read = kmsg_read,
	.release = kmsg_release,
};

/* os.path.abspath: `path` made absolute against the working directory, then normalized
 * lexically (no link resolved), as mokkafs.host.mountinfo.fsname writes it. */
static int abspath(const char *path, char *out, size_t size) {
	char joined[PATH_MAX * 2];
	int n;
	if (path[0] == '/') {
		n = snprintf(joined, sizeof joined, "%s", path);
	} else {
		char cwd[PATH_MAX];
		if (getcwd(cwd, sizeof cwd) == NULL)
			return -1;
		n = snprintf(joined, sizeof joined, "%s/%s", cwd, path);
	}
	if (n < 0 || (size_t)n >= sizeof joined) { /* cut short, it would name another place */
		errno = ENAMETOOLONG;
		return -1;
	}
	size_t len = 0;
	for (char *save = NULL, *part = strtok_r(joined, "/", &save); part != NULL;
	     part = strtok_r(NULL, "/", &save)) {
		if (strcmp(part, ".") == 0)
			continue;
		if (strcmp(part, "..") == 0) {
			while (len > 0 && out[--len] != '/')
				;
			continue;
		}
		size_t part_len = strlen(part);
		if (len + part_len + 2 > size) {
			errno = ENAMETOOLONG;
			return -1;
		}
		out[len++] = '/';
		memcpy(out + len, part, part_len);
		len += part_len;
	}
	if (len == 0)
		out[len++] = '/';
	out[len] = '\0';
	return 0;
}

/* Serve until a stop signal (1: unmount) or the daemon's end closing, or the kernel
 * dropping the connection (0). */
static int serve(struct fuse_session *se, int signals) {
	int fd = fuse_session_fd(se);
	struct fuse_buf buf = {0};
	int stopped = 0;
	while (!fuse_session_exited(se)) {
		pthread_mutex_lock(&relay.lock);
		int room = relay.used < OUTSTANDING, gone = relay.gone;
		pthread_mutex_unlock(&relay.lock);
		if (gone)
			break;
		struct pollfd p[3] = {{.fd = signals, .events = POLLIN},
				      {.fd = relay.wake, .events = POLLIN},
				      {.fd = room ? fd : -1, .events = POLLIN}};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("mokkafs-kmsg: poll");
			break;
		}
		if (p[0].revents) {
			stopped = 1;
			break;
		}
		if (p[1].revents) {
			uint64_t count;
			if (read(relay.wake, &count, sizeof count) < 0 && errno != EAGAIN)
				perror("mokkafs-kmsg: eventfd");
			continue;
		}
		if (p[2].revents) {
			int res = fuse_session_receive_buf(se, &buf);
			if (res == -EINTR || res == -EAGAIN)
				continue;
			if (res <= 0)
				break; /* unmounted (ENODEV), or the device failed */
			fuse_session_process_buf(se, &buf);
		}
	}
	free(buf.mem);
	return stopped;
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: mokkafs-kmsg FD PATH (the daemon starts it: "
				"mokkafs/serve/kmsg.py)\n");
		return 2;
	}
	char *end;
	long sock = strtol(argv[1], &end, 10);
	char path[PATH_MAX];
	if (*argv[1] == '\0' || *end != '\0' || sock < 0 || sock > INT_MAX) {
		fprintf(stderr, "mokkafs-kmsg: FD %s is not a file descriptor number\n", argv[1]);
		return 2;
	}
	errno = 0;
	if (abspath(argv[2], path, sizeof path) < 0) {
		fprintf(stderr, "mokkafs-kmsg: cannot make %s absolute: %s\n", argv[2],
			strerror(errno ? errno : ENAMETOOLONG));
		return 1;
	}
	relay.sock = (int)sock;
	if (fcntl(relay.sock, F_SETFD, FD_CLOEXEC) < 0) { /* nothing it starts may hold it */
		perror("mokkafs-kmsg: the daemon's socket");
		return 1;
	}
	clock_gettime(CLOCK_REALTIME, &relay.mtime);

	/* The stop signals are read from a signalfd by the loop; every thread blocks them. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	signal(SIGPIPE, SIG_IGN);
	int signals = -1;
	if (pthread_sigmask(SIG_BLOCK, &stop, NULL) != 0 ||
	    (signals = signalfd(-1, &stop, SFD_CLOEXEC)) < 0 ||
	    (relay.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		perror("mokkafs-kmsg: setting up");
		return 1;
	}

	char options[sizeof OPTIONS + PATH_MAX];
	snprintf(options, sizeof options, "%s%s", OPTIONS, path);
	char *args[] = {argv[0], "-o", options, NULL};
	struct fuse_args fargs = FUSE_ARGS_INIT(3, args);
	struct fuse_session *se = fuse_session_new(&fargs, &ops, sizeof ops, NULL);
	if (se == NULL || fuse_session_mount(se, path) != 0) {
		fprintf(stderr, "mokkafs: ERROR mokkafs-kmsg: cannot mount the kernel log at %s "
				"(libfuse's reason above)\n", path);
		return 1;
	}
	pthread_t reader;
	if (send_request(0, MOUNTED, 0, 0, 0) < 0 ||
	    pthread_create(&reader, NULL, receive, NULL) != 0) {
		perror("mokkafs-kmsg: the daemon's socket");
		return 1; /* the daemon is gone: no unmount, as below */
	}
	int unmount = serve(se, signals);
	if (unmount)
		abandon();
	/* The reader thread ends before the session's fd is closed: it answers the kernel on it. */
	shutdown(relay.sock, SHUT_RDWR);
	pthread_join(reader, NULL);
	if (unmount)
		fuse_session_unmount(se);
	fuse_session_destroy(se);
	return 0;
}
