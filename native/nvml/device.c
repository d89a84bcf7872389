/* SPDX-License-Identifier: Apache-2.0 */
/* Enumeration and identity: the count, handles by index, UUID and bus ID, and what the
 * driver's proc/driver/nvidia/gpus/<bdf>/information says of each GPU. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    char bdfs[MAX_GPUS][BDF_SIZE];
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    int n = gpus_list(bdfs, MAX_GPUS);
    if (n < 0)
        return NVML_ERROR_UNKNOWN;
    *deviceCount = (unsigned int)n;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return nvmlDeviceGetCount_v2(deviceCount);
}

/* The handle of a listed GPU; GPU_IS_LOST when it fell off the bus (nvidia-smi then says
 * "Unable to determine the device handle for GPU ...: GPU is lost") */
static nvmlReturn_t handle_out(const char *bdf, nvmlDevice_t *device)
{
    if (!gpu_present(bdf))
        return NVML_ERROR_GPU_IS_LOST;
    nvmlDevice_t made = handle_of(bdf);
    if (!made)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    *device = made;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    char bdfs[MAX_GPUS][BDF_SIZE];
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    if (!device)
        return NVML_ERROR_INVALID_ARGUMENT;
    int n = gpus_list(bdfs, MAX_GPUS);
    if (n < 0)
        return NVML_ERROR_UNKNOWN;
    if (index >= (unsigned int)n)
        return NVML_ERROR_INVALID_ARGUMENT;
    return handle_out(bdfs[index], device);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    char bdfs[MAX_GPUS][BDF_SIZE], found[NVML_DEVICE_UUID_BUFFER_SIZE];
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strncmp(uuid, "MIG-", 4) == 0)
        return mig_handle_by_uuid(uuid, device);
    int n = gpus_list(bdfs, MAX_GPUS);
    for (int i = 0; i < n; i++) {
        struct nvmlDevice_st probe = {0};
        memcpy(probe.bdf, bdfs[i], sizeof(probe.bdf));
        if (gpu_info(&probe, "GPU UUID", found, sizeof(found)) == NVML_SUCCESS
            && strcmp(found, uuid) == 0)
            return handle_out(bdfs[i], device);
    }
    return n < 0 ? NVML_ERROR_UNKNOWN : NVML_ERROR_NOT_FOUND;
}

/* A bus ID as NVML takes it ("00000000:1B:00.0", "0000:1b:00.0", "1b:00.0") in the kernel's
 * spelling: 0, or -1 when it is none */
static int kernel_bdf(const char *id, char *out, size_t size)
{
    unsigned int domain = 0, bus, dev, fn;
    int used = -1;
    if (sscanf(id, "%x:%x:%x.%x%n", &domain, &bus, &dev, &fn, &used) != 4 || id[used]) {
        used = -1;
        domain = 0;
        if (sscanf(id, "%x:%x.%x%n", &bus, &dev, &fn, &used) != 3 || id[used])
            return -1;
    }
    if (bus > 0xff || dev > 0x1f || fn > 7 || strchr(id, '-') || strchr(id, ' '))
        return -1;
    int n = snprintf(out, size, "%04x:%02x:%02x.%x", domain, bus, dev, fn);
    return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    char bdfs[MAX_GPUS][BDF_SIZE], wanted[BDF_SIZE];
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    if (!pciBusId || !device || kernel_bdf(pciBusId, wanted, sizeof(wanted)) < 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    int n = gpus_list(bdfs, MAX_GPUS);
    for (int i = 0; i < n; i++)
        if (strcmp(bdfs[i], wanted) == 0)
            return handle_out(bdfs[i], device);
    return n < 0 ? NVML_ERROR_UNKNOWN : NVML_ERROR_NOT_FOUND;
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    char bdfs[MAX_GPUS][BDF_SIZE];
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    int n = gpus_list(bdfs, MAX_GPUS);
    for (int i = 0; i < n; i++)
        if (strcmp(bdfs[i], device->bdf) == 0) {
            *index = (unsigned int)i;
            return NVML_SUCCESS;
        }
    return n < 0 ? NVML_ERROR_UNKNOWN : NVML_ERROR_GPU_IS_LOST;
}

/* A text field of the information file into the caller's buffer; a MIG device's own */
static nvmlReturn_t info_text(nvmlDevice_t device, const char *key, char *out,
                              unsigned int length)
{
    char value[128];
    nvmlReturn_t ret = handle_check_any(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig)
        return mig_device_text(device, key, out, length);
    ret = gpu_info(device, key, value, sizeof(value));
    return ret == NVML_SUCCESS ? copy_out(out, length, value) : ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    return info_text(device, "Model", name, length);
}

NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    return info_text(device, "GPU UUID", uuid, length);
}

NVML_API nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version,
                                                unsigned int length)
{
    return info_text(device, "Video BIOS", version, length);
}

NVML_API nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    char value[32], *end;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!minorNumber)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_info(device, "Device Minor", value, sizeof(value));
    if (ret != NVML_SUCCESS)
        return ret;
    errno = 0;
    unsigned long minor = strtoul(value, &end, 10);
    if (end == value || *end || errno || minor > 255)
        return NVML_ERROR_UNKNOWN;
    *minorNumber = (unsigned int)minor;
    return NVML_SUCCESS;
}
