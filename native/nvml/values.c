/* SPDX-License-Identifier: Apache-2.0 */
/* Reading NVML's own place, run/mokkafs-nvml below the root: one "key=value" file per GPU
 * and one for the node, which the daemon computes from its State at each read
 * (mokkafs/surfaces/nvml.py). A key is left out where the profile cannot state it. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

nvmlReturn_t number_of(const char *text, unsigned long long *value)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || errno != 0 || text[0] == '-')
        return NVML_ERROR_UNKNOWN;
    *value = v;
    return NVML_SUCCESS;
}

nvmlReturn_t gpu_place(nvmlDevice_t device, char *text, size_t size)
{
    char rel[PATH_MAX], probe[BDF_SIZE];
    snprintf(rel, sizeof(rel), "%s/%s", NVML_GPUS, device->bdf);
    long len = view_read(rel, text, size);
    if (len >= (long)size - 1)
        return NVML_ERROR_UNKNOWN; /* it may go on: a key cut short must not answer */
    if (len < 0) {
        /* gone from the driver too: lost; else the place is not there (not mounted) */
        nvmlReturn_t gone = gpu_info(device, "Bus Location", probe, sizeof(probe));
        return gone == NVML_ERROR_GPU_IS_LOST ? gone : NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_SUCCESS;
}

nvmlReturn_t gpu_value(nvmlDevice_t device, const char *key, char *out, size_t size)
{
    char text[PLACE_FILE_SIZE];
    nvmlReturn_t ret = gpu_place(device, text, sizeof(text));
    if (ret != NVML_SUCCESS)
        return ret;
    char found[FILE_SIZE];
    if (line_value(text, key, '=', found, sizeof(found)) < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (strlen(found) >= size)
        return NVML_ERROR_UNKNOWN;
    memcpy(out, found, strlen(found) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t gpu_number(nvmlDevice_t device, const char *key, unsigned long long *value)
{
    char text[32];
    nvmlReturn_t ret = gpu_value(device, key, text, sizeof(text));
    return ret == NVML_SUCCESS ? number_of(text, value) : ret;
}

nvmlReturn_t gpu_uint_out(nvmlDevice_t device, const char *key, unsigned int *out)
{
    unsigned long long value = 0;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_number(device, key, &value);
    if (ret != NVML_SUCCESS)
        return ret;
    if (value > UINT_MAX)
        return NVML_ERROR_UNKNOWN;
    *out = (unsigned int)value;
    return NVML_SUCCESS;
}

nvmlReturn_t system_number(const char *key, unsigned long long *value)
{
    char text[FILE_SIZE], found[32];
    if (view_read(NVML_SYSTEM, text, sizeof(text)) < 0
        || line_value(text, key, '=', found, sizeof(found)) < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    return number_of(found, value);
}
