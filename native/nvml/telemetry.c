/* SPDX-License-Identifier: Apache-2.0 */
/* A GPU's moving values, from NVML's own place (values.c), which the daemon computes from
 * its State and the time of the read: memory, clocks, power and energy, temperature,
 * utilization and fan (the processes running: processes.c). */
#include <stddef.h>

#include "view.h"

/* The framebuffer: total, the driver's reserve, what processes allocated; the handle and
 * the caller's struct (out) checked first */
static nvmlReturn_t memory_of(nvmlDevice_t device, const void *out, unsigned long long *total,
                              unsigned long long *reserved, unsigned long long *used)
{
    nvmlReturn_t ret = handle_check_any(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig) /* its GPU instance's memory (mig_devices.c) */
        ret = mig_memory(device, total, reserved, used);
    else
        ret = gpu_number(device, "memory_total", total);
    if (ret == NVML_SUCCESS && !device->mig)
        ret = gpu_number(device, "memory_reserved", reserved);
    if (ret == NVML_SUCCESS && !device->mig)
        ret = gpu_number(device, "memory_used", used);
    if (ret == NVML_SUCCESS && (*reserved > *total || *used > *total - *reserved))
        ret = NVML_ERROR_UNKNOWN;
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    unsigned long long total = 0, reserved = 0, used = 0;
    nvmlReturn_t ret = memory_of(device, memory, &total, &reserved, &used);
    if (ret != NVML_SUCCESS)
        return ret;
    memory->total = total;
    memory->used = reserved + used; /* v1 counts the reserve as used */
    memory->free = total - reserved - used;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    unsigned long long total = 0, reserved = 0, used = 0;
    nvmlReturn_t ret = memory_of(device, memory, &total, &reserved, &used);
    if (ret != NVML_SUCCESS)
        return ret;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total - reserved - used;
    return NVML_SUCCESS;
}

/* The key of a clock domain: "<prefix>graphics" and so on; NULL for the video clock (no
 * profile states it) and for types the API does not have */
static const char *clock_key(nvmlClockType_t type, int max)
{
    static const char *const current[] = {"clock_graphics", "clock_sm", "clock_memory"};
    static const char *const top[] = {"max_clock_graphics", "max_clock_sm", "max_clock_memory"};
    return type <= NVML_CLOCK_MEM ? (max ? top : current)[type] : NULL;
}

static nvmlReturn_t clock_out(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock,
                              int max)
{
    const char *key = clock_key(type, max);
    if (!key) {
        nvmlReturn_t ret = handle_check(device);
        if (ret != NVML_SUCCESS)
            return ret;
        return type == NVML_CLOCK_VIDEO ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
    }
    return gpu_uint_out(device, key, clock);
}

NVML_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                             unsigned int *clock)
{
    return clock_out(device, type, clock, 0);
}

NVML_API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                unsigned int *clock)
{
    return clock_out(device, type, clock, 1);
}

NVML_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    return gpu_uint_out(device, "power_usage", power);
}

NVML_API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
    return gpu_uint_out(device, "power_limit", limit);
}

NVML_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    return gpu_uint_out(device, "enforced_power_limit", limit);
}

NVML_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device,
                                                          unsigned long long *energy)
{
    unsigned long long value = 0;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!energy)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_number(device, "energy", &value);
    if (ret == NVML_SUCCESS)
        *energy = value;
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                               nvmlTemperatureSensors_t sensorType,
                                               unsigned int *temp)
{
    if (sensorType != NVML_TEMPERATURE_GPU) {
        nvmlReturn_t ret = handle_check(device);
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_INVALID_ARGUMENT;
    }
    return gpu_uint_out(device, "temperature_gpu", temp);
}

NVML_API nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device,
                                                nvmlTemperature_t *temperature)
{
    unsigned int value = 0;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!temperature)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (temperature->version != nvmlTemperature_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    ret = nvmlDeviceGetTemperature(device, temperature->sensorType, &value);
    if (ret == NVML_SUCCESS && value > 300)
        ret = NVML_ERROR_UNKNOWN;
    if (ret == NVML_SUCCESS)
        temperature->temperature = (int)value;
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                    nvmlUtilization_t *utilization)
{
    unsigned int gpu = 0, memory = 0;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!utilization)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_uint_out(device, "utilization_gpu", &gpu);
    if (ret == NVML_SUCCESS)
        ret = gpu_uint_out(device, "utilization_memory", &memory);
    if (ret != NVML_SUCCESS)
        return ret;
    utilization->gpu = gpu;
    utilization->memory = memory;
    return NVML_SUCCESS;
}

/* A datacenter board cools without a fan of its own: the key is absent, NOT_SUPPORTED */
NVML_API nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
    return gpu_uint_out(device, "fan_speed", speed);
}
