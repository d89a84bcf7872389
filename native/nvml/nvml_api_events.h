/* SPDX-License-Identifier: Apache-2.0 */
/* mokkafs's own declarations of the health-event part of the NVML API (facts of the ABI; the
 * text is ours). nvml_api.h includes it; it needs nvml_api.h's types. */
#ifndef MOKKAFS_NVML_API_EVENTS_H
#define MOKKAFS_NVML_API_EVENTS_H

/* Events (events.c): the types a set records, as bits of an unsigned long long */
#define nvmlEventTypeSingleBitEccError 0x0000000000000001ULL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002ULL
#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL
#define nvmlEventTypeAll 0x000000000000ff9fULL /* every type the API names */
typedef struct nvmlEventSet_st *nvmlEventSet_t; /* the API's one-pointer struct: same ABI */

/* What nvmlEventSetWait_v2 fills (nvmlEventSetWait, the old name, the first three only) */
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;  /* the Xid; 999 when it cannot be told */
    unsigned int gpuInstanceId;     /* 0xFFFFFFFF: not a MIG instance's */
    unsigned int computeInstanceId; /* 0xFFFFFFFF: not a MIG instance's */
} nvmlEventData_t;

NVML_API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set);
NVML_API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);
NVML_API nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                       unsigned long long *eventTypes);
NVML_API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                               nvmlEventSet_t set);
NVML_API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                          unsigned int timeoutms);
NVML_API nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data,
                                       unsigned int timeoutms);

#endif
