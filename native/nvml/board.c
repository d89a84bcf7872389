/* SPDX-License-Identifier: Apache-2.0 */
/* What a GPU says it is and how it is set, from NVML's own place (values.c): architecture,
 * brand, compute capability, serial and part number, and its modes. */
#include <stddef.h>

#include "view.h"

NVML_API nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device,
                                                nvmlDeviceArchitecture_t *arch)
{
    return gpu_uint_out(device, "architecture", arch);
}

NVML_API nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
    return gpu_uint_out(device, "brand", type);
}

NVML_API nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    return gpu_uint_out(device, "persistence_mode", mode);
}

NVML_API nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode)
{
    return gpu_uint_out(device, "compute_mode", mode);
}

NVML_API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
    return gpu_uint_out(device, "performance_state", pState);
}

/* Two keys into two outputs, both or neither */
static nvmlReturn_t pair_out(nvmlDevice_t device, const char *first_key, unsigned int *first,
                             const char *second_key, unsigned int *second)
{
    unsigned int a = 0, b = 0;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!first || !second)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_uint_out(device, first_key, &a);
    if (ret == NVML_SUCCESS)
        ret = gpu_uint_out(device, second_key, &b);
    if (ret != NVML_SUCCESS)
        return ret;
    *first = a;
    *second = b;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                           nvmlEnableState_t *pending)
{
    return pair_out(device, "ecc_current", current, "ecc_pending", pending);
}

NVML_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                         int *minor)
{
    unsigned int a = 0, b = 0;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = pair_out(device, "cuda_cc_major", &a, "cuda_cc_minor", &b);
    if (ret != NVML_SUCCESS)
        return ret;
    if (a > 99 || b > 99)
        return NVML_ERROR_UNKNOWN;
    *major = (int)a;
    *minor = (int)b;
    return NVML_SUCCESS;
}

static nvmlReturn_t text_out(nvmlDevice_t device, const char *key, char *out,
                             unsigned int length)
{
    char value[NVML_DEVICE_PART_NUMBER_BUFFER_SIZE];
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_value(device, key, value, sizeof(value));
    return ret == NVML_SUCCESS ? copy_out(out, length, value) : ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    return text_out(device, "serial", serial, length);
}

NVML_API nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *partNumber,
                                                   unsigned int length)
{
    return text_out(device, "board_part_number", partNumber, length);
}
