/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU's NUMA node and CPUs: its numa_node and local_cpulist in the view's sysfs. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

#define WORD_BITS (sizeof(unsigned long) * CHAR_BIT)

/* numa_node: NVML_SUCCESS with node >= 0, or NOT_SUPPORTED when the kernel says -1 */
static nvmlReturn_t numa_node(nvmlDevice_t device, long *node)
{
    char text[32], *end;
    nvmlReturn_t ret = gpu_attr(device, "numa_node", text, sizeof(text));
    if (ret != NVML_SUCCESS)
        return ret;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < -1 || v > INT_MAX)
        return NVML_ERROR_UNKNOWN;
    if (v < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *node = v;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
    long found;
    nvmlReturn_t ret = handle_check(device);
    if (ret == NVML_SUCCESS && !node)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        ret = numa_node(device, &found);
    if (ret == NVML_SUCCESS)
        *node = (unsigned int)found;
    return ret;
}

static void set_bit(unsigned long *set, unsigned int words, unsigned long bit)
{
    if (bit / WORD_BITS < words) /* beyond the caller's array: left out, as NVML does */
        set[bit / WORD_BITS] |= 1UL << (bit % WORD_BITS);
}

/* "0-55,112-167" into the caller's bit array: 0, or -1 when malformed */
static int cpulist_bits(const char *list, unsigned long *set, unsigned int words)
{
    const char *p = list;
    while (*p) {
        char *end;
        unsigned long first = strtoul(p, &end, 10), last = first;
        if (end == p || first > 1UL << 20)
            return -1;
        if (*end == '-') {
            p = end + 1;
            last = strtoul(p, &end, 10);
            if (end == p || last < first || last > 1UL << 20)
                return -1;
        }
        for (unsigned long cpu = first; cpu <= last; cpu++)
            set_bit(set, words, cpu);
        if (*end != ',' && *end != '\0')
            return -1;
        p = *end ? end + 1 : end;
    }
    return 0;
}

static nvmlReturn_t cpu_set(nvmlDevice_t device, unsigned int size, unsigned long *set)
{
    char text[FILE_SIZE];
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (size == 0 || !set)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_attr(device, "local_cpulist", text, sizeof(text));
    if (ret != NVML_SUCCESS)
        return ret;
    unsigned long *bits = calloc(size, sizeof(*bits));
    if (!bits)
        return NVML_ERROR_MEMORY;
    if (cpulist_bits(text, bits, size) == 0)
        memcpy(set, bits, size * sizeof(*bits));
    else
        ret = NVML_ERROR_UNKNOWN;
    free(bits);
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
                                               unsigned long *cpuSet)
{
    return cpu_set(device, cpuSetSize, cpuSet);
}

NVML_API nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device,
                                                          unsigned int cpuSetSize,
                                                          unsigned long *cpuSet,
                                                          nvmlAffinityScope_t scope)
{
    if (scope == NVML_AFFINITY_SCOPE_NODE)
        return cpu_set(device, cpuSetSize, cpuSet);
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    return scope == NVML_AFFINITY_SCOPE_SOCKET ? NVML_ERROR_NOT_SUPPORTED
                                               : NVML_ERROR_INVALID_ARGUMENT;
}

NVML_API nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
                                                  unsigned long *nodeSet,
                                                  nvmlAffinityScope_t scope)
{
    long node;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (nodeSetSize == 0 || !nodeSet || scope > NVML_AFFINITY_SCOPE_SOCKET)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (scope == NVML_AFFINITY_SCOPE_SOCKET)
        return NVML_ERROR_NOT_SUPPORTED;
    ret = numa_node(device, &node);
    if (ret != NVML_SUCCESS)
        return ret;
    memset(nodeSet, 0, nodeSetSize * sizeof(*nodeSet));
    set_bit(nodeSet, nodeSetSize, (unsigned long)node);
    return NVML_SUCCESS;
}
