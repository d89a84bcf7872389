/* SPDX-License-Identifier: Apache-2.0 */
/* An event set (events.c) and its reading of the view's kernel log (event_log.c) */
#ifndef MOKKAFS_NVML_EVENTS_H
#define MOKKAFS_NVML_EVENTS_H

#include <pthread.h>

#include "view.h"

#define MAX_REGISTERED 256 /* registrations a set holds */
#define QUEUED 64          /* events a set holds for its next waits; the oldest go first */

struct registration {
    nvmlDevice_t device;
    unsigned long long types;
    unsigned long long since; /* the number of the first record it sees */
};

struct nvmlEventSet_st {
    struct nvmlEventSet_st *next; /* the live sets, under sets_lock */
    pthread_mutex_t reading;      /* one reader of the log at a time; guards fd */
    int fd;                       /* the log, or -1 while it cannot be opened */
    pthread_mutex_t lock;         /* guards what follows */
    int seen;                     /* a record was read: next_seq holds */
    unsigned long long next_seq;  /* the number after the last record read */
    struct registration regs[MAX_REGISTERED];
    unsigned int registered;
    nvmlEventData_t queue[QUEUED];
    unsigned int head, queued;
};

/* event_log.c. The log opened again: from the oldest record when the set read some (those
 * are skipped by number), else at the end. Under set->reading. */
void log_reopen(nvmlEventSet_t set, int from_oldest);
/* One record read, and queued as an event if a registration wants it (under set->reading):
 * 0, or the read's errno (EAGAIN: nothing new; EPIPE: the ring passed the set, the oldest
 * kept comes next), ENOENT when there is no log, EIO when it went away (it is opened again) */
int log_read(nvmlEventSet_t set);
/* Every record there now read (under set->reading) */
void log_drain(nvmlEventSet_t set);
/* The oldest queued event into out: 1, or 0 when none is queued */
int log_pop(nvmlEventSet_t set, nvmlEventData_t *out);

#endif
