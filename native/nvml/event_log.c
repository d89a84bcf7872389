/* SPDX-License-Identifier: Apache-2.0 */
/* An event set's reading of the view's kernel log (dev/kmsg): one record a read, O_NONBLOCK.
 * A driver's Xid line, "NVRM: Xid (PCI:dddd:bb:dd): N, ...", names the GPU by its bus; the
 * record becomes an event of the first registration of that GPU that wants Xids and came
 * before it; an Xid 48 also one of the first that wants double bit ECC errors. Records are numbered: one read twice (the log opened again) is skipped. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "events.h"

#define KMSG "dev/kmsg"
#define RECORD_SIZE 8192 /* the longest record /dev/kmsg gives (CONSOLE_EXT_LOG_MAX) */
#define XID_UNKNOWN 999  /* the API's eventData for an Xid that cannot be told */
#define NO_INSTANCE 0xFFFFFFFFu /* the instance IDs of an event of a GPU not in MIG mode */
#define MAX_DRAIN 4096   /* records one drain reads at most (the log's ring) */
#define DBE_XID 48       /* the driver's Xid for an uncorrectable (double bit) ECC error */

/* The log opened O_NONBLOCK: from the oldest record (the set read some: those it read are
 * skipped by number) or at the end (a read there makes the daemon know the place) */
void log_reopen(nvmlEventSet_t set, int from_oldest)
{
    char path[PATH_MAX];
    if (set->fd >= 0)
        close(set->fd);
    set->fd = -1;
    if (view_path(path, sizeof(path), KMSG) < 0)
        return;
    set->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (set->fd >= 0 && !from_oldest)
        lseek(set->fd, 0, SEEK_END);
}

/* A bus ID of an Xid line's "PCI:dddd:bb:dd" and its Xid: 0, or -1 when the text is none */
static int xid_of(const char *text, unsigned int at[3], unsigned long long *xid)
{
    int n = -1;
    if (sscanf(text, "NVRM: Xid (PCI:%x:%x:%x): %n", &at[0], &at[1], &at[2], &n) != 3 || n < 0)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text + n, &end, 10);
    *xid = (end == text + n || errno || (*end != ',' && *end != '\0')) ? XID_UNKNOWN : v;
    return 0;
}

/* An event queued: under set->lock; full, the oldest goes */
static void queue(nvmlEventSet_t set, nvmlDevice_t device, unsigned long long type,
                  unsigned long long data)
{
    if (set->queued == QUEUED) {
        set->head = (set->head + 1) % QUEUED;
        set->queued--;
    }
    set->queue[(set->head + set->queued++) % QUEUED] = (nvmlEventData_t){
        .device = device, .eventType = type, .eventData = data,
        .gpuInstanceId = NO_INSTANCE, .computeInstanceId = NO_INSTANCE};
}

/* The first registration of the GPU at "at" that wants the type and came before seq */
static const struct registration *wanting(nvmlEventSet_t set, const unsigned int at[3],
                                          unsigned long long seq, unsigned long long type)
{
    unsigned int gpu[4];
    for (unsigned int i = 0; i < set->registered; i++) {
        const struct registration *r = &set->regs[i];
        if ((r->types & type) && seq >= r->since
            && bdf_split(r->device->bdf, &gpu[0], &gpu[1], &gpu[2], &gpu[3]) == 0
            && gpu[0] == at[0] && gpu[1] == at[1] && gpu[2] == at[2])
            return r;
    }
    return NULL;
}

/* The events of one record for the set's registrations, queued: under set->lock. An Xid is
 * an Xid critical error; an Xid 48 (the driver's double bit ECC error) is also a double bit
 * ECC error event, with no data, as the driver notifies both. */
static void match(nvmlEventSet_t set, unsigned long long seq, const char *text)
{
    unsigned int at[3];
    unsigned long long xid;
    if (xid_of(text, at, &xid) < 0)
        return;
    const struct registration *r = wanting(set, at, seq, nvmlEventTypeXidCriticalError);
    if (r)
        queue(set, r->device, nvmlEventTypeXidCriticalError, xid);
    r = xid == DBE_XID ? wanting(set, at, seq, nvmlEventTypeDoubleBitEccError) : NULL;
    if (r)
        queue(set, r->device, nvmlEventTypeDoubleBitEccError, 0);
}

/* One record read and matched (under set->reading): 0, or the read's errno (EAGAIN:
 * nothing new; EPIPE: the ring passed the set, the oldest kept comes next), ENOENT when
 * there is no log, EIO when it went away (its mount restarted): it is opened again */
int log_read(nvmlEventSet_t set)
{
    char record[RECORD_SIZE];
    if (set->fd < 0) {
        log_reopen(set, set->seen);
        if (set->fd < 0)
            return ENOENT;
    }
    ssize_t n = read(set->fd, record, sizeof(record) - 1);
    if (n < 0 && (errno == EAGAIN || errno == EINTR || errno == EPIPE))
        return errno;
    if (n <= 0) {
        log_reopen(set, set->seen);
        return EIO;
    }
    record[n] = '\0';
    unsigned long long seq;
    char *text = strchr(record, ';');
    if (!text || sscanf(record, "%*u,%llu,", &seq) != 1)
        return 0;
    text[strcspn(text, "\n")] = '\0';
    pthread_mutex_lock(&set->lock);
    if (!set->seen || seq >= set->next_seq) {
        set->seen = 1;
        set->next_seq = seq + 1;
        match(set, seq, text + 1);
    }
    pthread_mutex_unlock(&set->lock);
    return 0;
}

/* Every record there now read (under set->reading) */
void log_drain(nvmlEventSet_t set)
{
    for (int i = 0; i < MAX_DRAIN; i++) {
        int r = log_read(set);
        if (r != 0 && r != EPIPE && r != EINTR)
            return;
    }
}

int log_pop(nvmlEventSet_t set, nvmlEventData_t *out)
{
    pthread_mutex_lock(&set->lock);
    int got = set->queued > 0;
    if (got) {
        *out = set->queue[set->head];
        set->head = (set->head + 1) % QUEUED;
        set->queued--;
    }
    pthread_mutex_unlock(&set->lock);
    return got;
}
