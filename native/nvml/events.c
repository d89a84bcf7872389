/* SPDX-License-Identifier: Apache-2.0 */
/* Event sets: Xid critical errors from the records the view's kernel log (dev/kmsg) carries,
 * at their time (event_log.c reads them). A set opens the log at its creation, at the end; a
 * wait polls it (the daemon answers poll as devkmsg_poll: docs/kmsg.md), so a waiter sleeps
 * in the kernel. A registration sees the records after it (the API: events before it are not
 * recorded). ECC events are supported where ECC is on; a double bit one comes with the
 * driver's Xid 48 (an ecc-errors fault's uncorrectable error logs one), a single bit one
 * never. Thread-safe: one wait reads a set's log at a time, others queue. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "events.h"

#define RETRY_MS 200 /* a wait without a log to poll tries to open it this often */

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvmlEventSet_st *sets; /* under sets_lock */

static int live(nvmlEventSet_t set)
{
    int found = 0;
    pthread_mutex_lock(&sets_lock);
    for (struct nvmlEventSet_st *s = sets; s && !found; s = s->next)
        found = s == set;
    pthread_mutex_unlock(&sets_lock);
    return found;
}

NVML_API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    nvmlEventSet_t made = calloc(1, sizeof(*made));
    if (!made)
        return NVML_ERROR_MEMORY;
    pthread_mutex_init(&made->reading, NULL);
    pthread_mutex_init(&made->lock, NULL);
    made->fd = -1;
    log_reopen(made, 0); /* no log (a view without dev/kmsg): a set that never fires */
    log_drain(made);
    pthread_mutex_lock(&sets_lock);
    made->next = sets;
    sets = made;
    pthread_mutex_unlock(&sets_lock);
    *set = made;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    int found = 0;
    pthread_mutex_lock(&sets_lock);
    for (struct nvmlEventSet_st **at = &sets; *at; at = &(*at)->next)
        if (*at == set) {
            *at = set->next;
            found = 1;
            break;
        }
    pthread_mutex_unlock(&sets_lock);
    if (!found)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (set->fd >= 0)
        close(set->fd);
    pthread_mutex_destroy(&set->reading);
    pthread_mutex_destroy(&set->lock);
    free(set);
    return NVML_SUCCESS;
}

/* What a GPU's events can be: Xid critical errors, and ECC errors where ECC is on */
static unsigned long long supported(nvmlDevice_t device)
{
    unsigned long long ecc = 0;
    unsigned long long types = nvmlEventTypeXidCriticalError;
    if (gpu_number(device, "ecc_current", &ecc) == NVML_SUCCESS && ecc == 1)
        types |= nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
    return types;
}

NVML_API nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                       unsigned long long *eventTypes)
{
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!eventTypes)
        return NVML_ERROR_INVALID_ARGUMENT;
    *eventTypes = supported(device);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                               nvmlEventSet_t set)
{
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!set || !live(set) || (eventTypes & ~nvmlEventTypeAll))
        return NVML_ERROR_INVALID_ARGUMENT;
    if (eventTypes & ~supported(device))
        return NVML_ERROR_NOT_SUPPORTED; /* none of them registered, as the API says */
    if (pthread_mutex_trylock(&set->reading) == 0) { /* what came before is not recorded */
        log_drain(set);
        pthread_mutex_unlock(&set->reading);
    } /* else a wait reads now: the records before are being read */
    pthread_mutex_lock(&set->lock);
    if (set->registered == MAX_REGISTERED) {
        ret = NVML_ERROR_INSUFFICIENT_RESOURCES;
    } else {
        set->regs[set->registered++] = (struct registration){
            .device = device, .types = eventTypes, .since = set->seen ? set->next_seq : 0};
    }
    pthread_mutex_unlock(&set->lock);
    return ret;
}

static long long now_ms(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The next event, within timeout ms: NVML_SUCCESS or TIMEOUT */
static nvmlReturn_t wait_event(nvmlEventSet_t set, nvmlEventData_t *out, unsigned int timeout)
{
    long long deadline = now_ms(CLOCK_MONOTONIC) + timeout;
    long long wall = now_ms(CLOCK_REALTIME) + timeout;
    struct timespec until = {.tv_sec = wall / 1000, .tv_nsec = (wall % 1000) * 1000000};
    if (pthread_mutex_timedlock(&set->reading, &until) != 0)
        return log_pop(set, out) ? NVML_SUCCESS : NVML_ERROR_TIMEOUT; /* another wait reads */
    nvmlReturn_t ret = NVML_ERROR_TIMEOUT;
    for (;;) {
        if (log_pop(set, out)) {
            ret = NVML_SUCCESS;
            break;
        }
        int r = log_read(set);
        if (r == 0 || r == EPIPE || r == EINTR)
            continue;
        long long left = deadline - now_ms(CLOCK_MONOTONIC);
        if (left <= 0)
            break;
        /* the daemon wakes this poll when a record comes; without a log, try again later */
        struct pollfd p = {.fd = set->fd, .events = POLLIN};
        if (r == EAGAIN)
            poll(&p, 1, left > 60000 ? 60000 : (int)left);
        else
            poll(NULL, 0, left > RETRY_MS ? RETRY_MS : (int)left);
    }
    pthread_mutex_unlock(&set->reading);
    return ret;
}

NVML_API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                          unsigned int timeoutms)
{
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    if (!data || !set || !live(set))
        return NVML_ERROR_INVALID_ARGUMENT;
    return wait_event(set, data, timeoutms);
}

/* The old name fills the old struct: device, eventType and eventData alone */
NVML_API nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data,
                                       unsigned int timeoutms)
{
    nvmlEventData_t got;
    nvmlReturn_t ret = view_check();
    if (ret == NVML_SUCCESS)
        ret = data ? nvmlEventSetWait_v2(set, &got, timeoutms) : NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) {
        data->device = got.device;
        data->eventType = got.eventType;
        data->eventData = got.eventData;
    }
    return ret;
}
