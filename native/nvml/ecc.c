/* SPDX-License-Identifier: Apache-2.0 */
/* A GPU's memory errors and what follows them, from NVML's own place (values.c), which the
 * daemon computes from its State and the time (mokkafs/model/ecc.py): the ECC counts, the
 * rows remapped (Ampere and later) or the pages retired (before), and the clocks event
 * reasons (a gpu-hot fault's slowdown). A key the place leaves out (ECC off, the other
 * architecture's mechanism) answers NOT_SUPPORTED, as the real library does. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

#define ADDRESSES_SIZE 2048 /* 64 pages, "0x" and up to 16 digits each, and commas */

NVML_API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                  nvmlMemoryErrorType_t errorType,
                                                  nvmlEccCounterType_t counterType,
                                                  unsigned long long *eccCounts)
{
    char key[64];
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!eccCounts || (unsigned int)errorType > NVML_MEMORY_ERROR_TYPE_UNCORRECTED
        || (unsigned int)counterType > NVML_AGGREGATE_ECC)
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(key, sizeof(key), "ecc_%s_%s",
             counterType == NVML_VOLATILE_ECC ? "volatile" : "aggregate",
             errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED ? "corrected" : "uncorrected");
    return gpu_number(device, key, eccCounts);
}

/* From Ampere on, the GPU's SRAM (its caches and register files) has an ECC count of its own.
 * NVML_SUCCESS for an Ampere or later GPU with ECC on; NOT_SUPPORTED for an earlier one; the
 * place's error otherwise (a lost GPU, ECC off: NOT_SUPPORTED). */
static nvmlReturn_t sram_counted(nvmlDevice_t device)
{
    unsigned long long probe;
    unsigned int arch = 0;
    nvmlReturn_t ret = gpu_number(device, "ecc_volatile_corrected", &probe); /* ECC on */
    if (ret == NVML_SUCCESS)
        ret = gpu_uint_out(device, "architecture", &arch);
    if (ret == NVML_SUCCESS && arch < NVML_DEVICE_ARCH_AMPERE)
        ret = NVML_ERROR_NOT_SUPPORTED;
    return ret;
}

/* The errors are the device memory's (the framebuffer, as Xid 48 says): the SRAM, where the
 * GPU counts it apart (Ampere and later), counts none; no other location is counted */
NVML_API nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device,
                                                      nvmlMemoryErrorType_t errorType,
                                                      nvmlEccCounterType_t counterType,
                                                      nvmlMemoryLocation_t locationType,
                                                      unsigned long long *count)
{
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if ((unsigned int)locationType > NVML_MEMORY_LOCATION_SRAM)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (locationType == NVML_MEMORY_LOCATION_SRAM) {
        if (!count || (unsigned int)errorType > NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            || (unsigned int)counterType > NVML_AGGREGATE_ECC)
            return NVML_ERROR_INVALID_ARGUMENT;
        ret = sram_counted(device);
        if (ret == NVML_SUCCESS)
            *count = 0;
        return ret;
    }
    if (locationType != NVML_MEMORY_LOCATION_DEVICE_MEMORY) {
        unsigned long long probe;
        if (!count)
            return NVML_ERROR_INVALID_ARGUMENT;
        ret = gpu_number(device, "ecc_volatile_corrected", &probe); /* lost, or ECC off */
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_NOT_SUPPORTED;
    }
    return nvmlDeviceGetTotalEccErrors(device, errorType, counterType, count);
}

/* The SRAM's errors, where the GPU counts them (sram_counted): none, no threshold exceeded */
NVML_API nvmlReturn_t nvmlDeviceGetSramEccErrorStatus(nvmlDevice_t device,
                                                      nvmlEccSramErrorStatus_v1_t *status)
{
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!status)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (status->version != nvmlEccSramErrorStatus_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    ret = sram_counted(device);
    if (ret == NVML_SUCCESS)
        *status = (nvmlEccSramErrorStatus_v1_t){.version = nvmlEccSramErrorStatus_v1};
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                                unsigned int *uncRows, unsigned int *isPending,
                                                unsigned int *failureOccurred)
{
    static const char *const keys[] = {"remapped_rows_correctable", "remapped_rows_uncorrectable",
                                       "remapped_rows_pending", "remapped_rows_failure"};
    unsigned int got[4];
    unsigned int *outs[4] = {corrRows, uncRows, isPending, failureOccurred};
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    for (int i = 0; i < 4; i++)
        if (!outs[i])
            return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < 4 && ret == NVML_SUCCESS; i++)
        ret = gpu_uint_out(device, keys[i], &got[i]);
    if (ret != NVML_SUCCESS)
        return ret;
    for (int i = 0; i < 4; i++)
        *outs[i] = got[i];
    return NVML_SUCCESS;
}

/* The pages retired for a cause: their count, and their addresses into addresses (room for
 * *pageCount) with no time known (0) into timestamps when given */
static nvmlReturn_t retired(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                            unsigned int *pageCount, unsigned long long *addresses,
                            unsigned long long *timestamps)
{
    unsigned long long count = 0;
    char list[ADDRESSES_SIZE];
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!pageCount || (unsigned int)cause > NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
        || (*pageCount > 0 && !addresses))
        return NVML_ERROR_INVALID_ARGUMENT;
    int dbe = cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR;
    ret = gpu_number(device, dbe ? "retired_pages_dbe" : "retired_pages_sbe", &count);
    if (ret != NVML_SUCCESS)
        return ret;
    if (count > *pageCount) {
        *pageCount = (unsigned int)count;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    list[0] = '\0';
    if (count > 0) {
        ret = gpu_value(device, dbe ? "retired_pages_dbe_addresses" : "retired_pages_sbe_addresses",
                        list, sizeof(list));
        if (ret != NVML_SUCCESS)
            return ret == NVML_ERROR_NOT_SUPPORTED ? NVML_ERROR_UNKNOWN : ret;
    }
    unsigned long long got[64];
    char *at = list;
    for (unsigned long long i = 0; i < count; i++) {
        char *end;
        errno = 0;
        if (i >= 64)
            return NVML_ERROR_UNKNOWN;
        got[i] = strtoull(at, &end, 16);
        if (end == at || errno || (*end != ',' && *end != '\0') || (*end == '\0' && i + 1 < count))
            return NVML_ERROR_UNKNOWN;
        at = *end ? end + 1 : end;
    }
    for (unsigned long long i = 0; i < count; i++) {
        addresses[i] = got[i];
        if (timestamps)
            timestamps[i] = 0;
    }
    *pageCount = (unsigned int)count;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                                nvmlPageRetirementCause_t cause,
                                                unsigned int *pageCount,
                                                unsigned long long *addresses)
{
    return retired(device, cause, pageCount, addresses, NULL);
}

NVML_API nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device,
                                                   nvmlPageRetirementCause_t cause,
                                                   unsigned int *pageCount,
                                                   unsigned long long *addresses,
                                                   unsigned long long *timestamps)
{
    if (pageCount && *pageCount > 0 && !timestamps) {
        nvmlReturn_t ret = handle_check(device);
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_INVALID_ARGUMENT;
    }
    return retired(device, cause, pageCount, addresses, timestamps);
}

NVML_API nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                             nvmlEnableState_t *isPending)
{
    return gpu_uint_out(device, "retired_pages_pending", isPending);
}

NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                             unsigned long long *reasons)
{
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!reasons)
        return NVML_ERROR_INVALID_ARGUMENT;
    return gpu_number(device, "clocks_event_reasons", reasons);
}

NVML_API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                unsigned long long *reasons)
{
    return nvmlDeviceGetCurrentClocksEventReasons(device, reasons);
}
