/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mokkafs-kmsg FD PATH: the kmsg mount's process (docs/kmsg.md).
 *
 * It mounts a FUSE connection whose root is one file over the view's dev/kmsg at PATH
 * (libfuse takes the root's mode from the mountpoint: a regular file), and answers that
 * file's opens, reads, polls and releases through the daemon, over the SOCK_SEQPACKET
 * socket FD (kmsg_relay.c; the protocol: mokkafs/fuse/relay.py; the daemon's side:
 * mokkafs/serve/kmsg.py). It keeps no State and no clock.
 *
 * - Opens are answered direct_io, without keep_cache: every reader keeps a position of its
 *   own, every read reaches the daemon.
 * - A read carries the file's flags as they are at that read (fuse_read_in.flags): an
 *   O_NONBLOCK set by fcntl after the open counts, as on /dev/kmsg.
 * - Replies come in any order. One thread runs the FUSE loop: it sends each request to the
 *   daemon and goes on; a second thread receives the daemon's replies and answers the
 *   kernel (fuse_reply_* from any thread). A waiting read holds a table slot, no thread:
 *   the process stays at two threads and one receive buffer each, where libfuse's
 *   multi-threaded loop would hold a thread and a 1 MiB buffer for each waiting read.
 * - A read the kernel interrupts (its reader got a signal, or was killed, whichever process
 *   of those sharing the file it is) is ended by the daemon: EINTR.
 * - A poll is asked of the daemon too (is a record there?). The kernel's poll handle is
 *   kept, by file handle, until the daemon's NOTIFY for that file (a record came), a newer
 *   poll of it, or its release (kmsg_pollers.c).
 * - SIGTERM or SIGINT (the daemon's ordered stop): every request still waiting gets
 *   ENOTCONN, and it unmounts. The daemon's end closing (the daemon is gone): the same,
 *   without unmounting; the view's own mount is gone or dead, and detaching it detaches
 *   this one too. (No PR_SET_PDEATHSIG: it follows the thread that started the process,
 *   and trio starts processes from worker threads.)
 * - The mount failing: an error on stderr, exit status 1.
 *
 * Facts kept in the Python package, checked equal by tests/unit/test_kmsg_native.py:
 * STREAM_SIZE (mokkafs/fuse/attrs.py), the wire format (mokkafs/fuse/relay.py, copied in
 * kmsg_relay.h) and the mount options (mokkafs/fuse/mount.py `options`).
 */
#define _GNU_SOURCE
#include "kmsg_pollers.h"
#include "kmsg_relay.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STREAM_SIZE (1LL << 62) /* attrs.STREAM_SIZE: where SEEK_END puts a reader */
#define TIMEOUT 3600.0          /* the root's attributes never change */
#define OPTIONS "default_permissions,allow_other,ro,subtype=mokkafs,fsname=mokkafs@"

static struct timespec mtime; /* the root's times: the process's start */

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
	st.st_atim = st.st_mtim = st.st_ctim = mtime;
	fuse_reply_attr(req, &st, TIMEOUT);
}

static void kmsg_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	(void)ino;
	relay_call(req, OPEN, fi->flags, fuse_req_ctx(req)->pid, 0, 0, fi);
}

static void kmsg_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi) {
	(void)ino;
	relay_call(req, READ, (int64_t)fi->fh, off, (int64_t)size, fi->flags, NULL);
}

static void kmsg_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	(void)ino;
	pollers_drop(fi->fh);
	relay_call(req, RELEASE, (int64_t)fi->fh, 0, 0, 0, NULL);
}

/* A poll is the daemon's to answer; the kernel's handle (the poller will sleep) is kept
 * here until the daemon's NOTIFY for the file */
static void kmsg_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
		      struct fuse_pollhandle *ph) {
	(void)ino;
	if (ph != NULL)
		pollers_keep(fi->fh, ph);
	relay_call(req, POLL, (int64_t)fi->fh, ph != NULL, 0, 0, NULL);
}

static const struct fuse_lowlevel_ops ops = {
	.getattr = kmsg_getattr,
	.open = kmsg_open,
	.read = kmsg_read,
	.release = kmsg_release,
	.poll = kmsg_poll,
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
 * dropping the connection (0). The kernel's requests are always read: a full table does
 * not exist (kmsg_relay.c), so an INTERRUPT is never held up behind waiting reads. */
static int serve(struct fuse_session *se, int signals) {
	struct fuse_buf buf = {0};
	int stopped = 0;
	while (!fuse_session_exited(se) && !relay_gone()) {
		struct pollfd p[3] = {{.fd = signals, .events = POLLIN},
				      {.fd = relay_wake_fd(), .events = POLLIN},
				      {.fd = fuse_session_fd(se), .events = POLLIN}};
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
		if (p[1].revents)
			break; /* the daemon's end closed */
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
	if (relay_start((int)sock) < 0) {
		perror("mokkafs-kmsg: the daemon's socket");
		return 1;
	}
	clock_gettime(CLOCK_REALTIME, &mtime);

	/* The stop signals are read from a signalfd by the loop; every thread blocks them. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	signal(SIGPIPE, SIG_IGN);
	int signals = -1;
	if (pthread_sigmask(SIG_BLOCK, &stop, NULL) != 0 ||
	    (signals = signalfd(-1, &stop, SFD_CLOEXEC)) < 0) {
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
	if (relay_send(0, MOUNTED, 0, 0, 0, 0) < 0 ||
	    pthread_create(&reader, NULL, relay_receive, NULL) != 0) {
		perror("mokkafs-kmsg: the daemon's socket");
		return 1; /* the daemon is gone: no unmount, as below */
	}
	int unmount = serve(se, signals);
	relay_abandon();
	/* The reply thread ends before the session's fd is closed: it answers the kernel on it. */
	shutdown((int)sock, SHUT_RDWR);
	pthread_join(reader, NULL);
	if (unmount)
		fuse_session_unmount(se);
	fuse_session_destroy(se);
	return 0;
}
