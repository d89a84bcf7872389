/* SPDX-License-Identifier: Apache-2.0 */
/* mokkafs's own declarations of the ECC, retired-page, remapped-row and clocks-event part of
 * the NVML API (facts of the ABI; the text is ours). nvml_api.h includes it. */
#ifndef MOKKAFS_NVML_API_ECC_H
#define MOKKAFS_NVML_API_ECC_H

typedef enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
} nvmlMemoryErrorType_t;

typedef enum {
    NVML_VOLATILE_ECC = 0,
    NVML_AGGREGATE_ECC = 1,
} nvmlEccCounterType_t;

typedef enum {
    NVML_MEMORY_LOCATION_L1_CACHE = 0,
    NVML_MEMORY_LOCATION_L2_CACHE = 1,
    NVML_MEMORY_LOCATION_DEVICE_MEMORY = 2, /* also DRAM */
    NVML_MEMORY_LOCATION_SRAM = 7,
} nvmlMemoryLocation_t;

typedef enum {
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
} nvmlPageRetirementCause_t;

NVML_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                  nvmlMemoryErrorType_t errorType,
                                                  nvmlEccCounterType_t counterType,
                                                  unsigned long long *eccCounts);
NVML_API nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device,
                                                      nvmlMemoryErrorType_t errorType,
                                                      nvmlEccCounterType_t counterType,
                                                      nvmlMemoryLocation_t locationType,
                                                      unsigned long long *count);
/* The SRAM's ECC errors (Ampere and later): uncorrectable by parity and by SEC-DED, corrected,
 * aggregate and volatile, the aggregate uncorrectable ones by unit, and whether a threshold
 * was exceeded */
typedef struct {
    unsigned int version;
    unsigned long long aggregateUncParity;
    unsigned long long aggregateUncSecDed;
    unsigned long long aggregateCor;
    unsigned long long volatileUncParity;
    unsigned long long volatileUncSecDed;
    unsigned long long volatileCor;
    unsigned long long aggregateUncBucketL2;
    unsigned long long aggregateUncBucketSm;
    unsigned long long aggregateUncBucketPcie;
    unsigned long long aggregateUncBucketMcu;
    unsigned long long aggregateUncBucketOther;
    unsigned int bThresholdExceeded;
} nvmlEccSramErrorStatus_v1_t;
#define nvmlEccSramErrorStatus_v1 NVML_STRUCT_VERSION(nvmlEccSramErrorStatus_v1_t, 1) /* 0x1000068 */

NVML_API nvmlReturn_t nvmlDeviceGetSramEccErrorStatus(nvmlDevice_t device,
                                                      nvmlEccSramErrorStatus_v1_t *status);
NVML_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                                unsigned int *uncRows, unsigned int *isPending,
                                                unsigned int *failureOccurred);
NVML_API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                                nvmlPageRetirementCause_t cause,
                                                unsigned int *pageCount,
                                                unsigned long long *addresses);
NVML_API nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device,
                                                   nvmlPageRetirementCause_t cause,
                                                   unsigned int *pageCount,
                                                   unsigned long long *addresses,
                                                   unsigned long long *timestamps);
NVML_API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                             nvmlEnableState_t *isPending);
NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                             unsigned long long *reasons);
NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                unsigned long long *reasons);

#endif
