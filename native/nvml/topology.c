/* SPDX-License-Identifier: Apache-2.0 */
/* Topology from the PCIe tree the view serves: a GPU's place is the target of
 * sys/bus/pci/devices/<bdf>, "devices/pciDDDD:BB/<root port>/<switch up>/<switch down>/.../<gpu>".
 * Below a host bridge, PCIe alternates: a root or downstream port (odd depths), then the one
 * device on its link (even depths): an endpoint or a switch's upstream port. So the deepest
 * component two GPUs share, and the upstream ports below it, say how many switches join them.
 * Also P2P between two GPUs: over NVLink where they share a fabric, else by the PCIe level. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "links.h"

#define MAX_DEPTH 16 /* bridges between a host bridge and a GPU, and the GPU */
#define WORD_BITS (sizeof(unsigned long) * CHAR_BIT)

struct place {
    char root[BDF_SIZE];              /* "pci0000:15" */
    char hops[MAX_DEPTH][BDF_SIZE];   /* the bridges below it, then the GPU */
    int depth;
};

static nvmlReturn_t place_of(nvmlDevice_t device, struct place *p)
{
    char rel[PATH_MAX], path[PATH_MAX], link[PATH_MAX], info[BDF_SIZE];
    snprintf(rel, sizeof(rel), "%s/%s", PCI_DEVICES, device->bdf);
    ssize_t n = view_path(path, sizeof(path), rel) < 0 ? -1
                                                        : readlink(path, link, sizeof(link) - 1);
    if (n < 0) /* gone from the driver too: lost */
        return gpu_info(device, "Bus Location", info, sizeof(info)) == NVML_ERROR_GPU_IS_LOST
                   ? NVML_ERROR_GPU_IS_LOST
                   : NVML_ERROR_UNKNOWN;
    link[n] = '\0';
    char *at = strstr(link, "devices/pci"), *save = NULL;
    if (!at)
        return NVML_ERROR_UNKNOWN;
    p->depth = -1;
    for (char *part = strtok_r(at + strlen("devices/"), "/", &save); part;
         part = strtok_r(NULL, "/", &save)) {
        if (strlen(part) >= BDF_SIZE || p->depth >= MAX_DEPTH)
            return NVML_ERROR_UNKNOWN;
        memcpy(p->depth < 0 ? p->root : p->hops[p->depth], part, strlen(part) + 1);
        p->depth++;
    }
    return p->depth > 0 && strcmp(p->hops[p->depth - 1], device->bdf) == 0
               ? NVML_SUCCESS
               : NVML_ERROR_UNKNOWN;
}

static long numa_of(nvmlDevice_t device)
{
    char text[32], *end;
    if (gpu_attr(device, "numa_node", text, sizeof(text)) != NVML_SUCCESS)
        return -1;
    long v = strtol(text, &end, 10);
    return end == text || *end ? -1 : v;
}

/* The upstream ports (even depths, counted from 1) of p below depth "from", the GPU left out */
static int ups_below(const struct place *p, int from)
{
    int n = 0;
    for (int d = from + 1; d < p->depth; d++)
        n += d % 2 == 0;
    return n;
}

static nvmlReturn_t level_of(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuTopologyLevel_t *level)
{
    struct place pa, pb;
    nvmlReturn_t ret = place_of(a, &pa);
    if (ret == NVML_SUCCESS)
        ret = place_of(b, &pb);
    if (ret != NVML_SUCCESS)
        return ret;
    if (strcmp(pa.root, pb.root) != 0) {
        long na = numa_of(a), nb = numa_of(b);
        *level = na >= 0 && na == nb ? NVML_TOPOLOGY_NODE : NVML_TOPOLOGY_SYSTEM;
        return NVML_SUCCESS;
    }
    int common = 0;
    while (common < pa.depth && common < pb.depth
           && strcmp(pa.hops[common], pb.hops[common]) == 0)
        common++;
    if (common == 0) {
        *level = NVML_TOPOLOGY_HOSTBRIDGE;
    } else if (pa.depth - common <= 1 && pb.depth - common <= 1) {
        *level = NVML_TOPOLOGY_INTERNAL; /* the same GPU, or functions of one slot */
    } else {
        int switches = (common % 2 == 0) + ups_below(&pa, common) + ups_below(&pb, common);
        *level = switches <= 1 ? NVML_TOPOLOGY_SINGLE : NVML_TOPOLOGY_MULTIPLE;
    }
    return NVML_SUCCESS;
}

/* Both handles checked */
static nvmlReturn_t pair_check(nvmlDevice_t device1, nvmlDevice_t device2)
{
    nvmlReturn_t ret = handle_check(device1);
    return ret == NVML_SUCCESS ? handle_check(device2) : ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1,
                                                          nvmlDevice_t device2,
                                                          nvmlGpuTopologyLevel_t *pathInfo)
{
    nvmlGpuTopologyLevel_t level = 0;
    nvmlReturn_t ret = pair_check(device1, device2);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!pathInfo)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = level_of(device1, device2, &level);
    if (ret == NVML_SUCCESS)
        *pathInfo = level;
    return ret;
}

/* The GPUs of the view that "wanted" picks, in index order, into the caller's array: with
 * *count 0 only how many; else at most *count of them, and *count says how many */
static nvmlReturn_t gpu_set(unsigned int *count, nvmlDevice_t *array,
                            int (*wanted)(nvmlDevice_t, const void *), const void *arg)
{
    char bdfs[MAX_GPUS][BDF_SIZE];
    if (!count || (*count > 0 && !array))
        return NVML_ERROR_INVALID_ARGUMENT;
    int n = gpus_list(bdfs, MAX_GPUS);
    if (n < 0)
        return NVML_ERROR_UNKNOWN;
    unsigned int found = 0, room = *count;
    for (int i = 0; i < n; i++) {
        nvmlDevice_t h = handle_of(bdfs[i]);
        if (!h)
            return NVML_ERROR_INSUFFICIENT_RESOURCES;
        if (!wanted(h, arg))
            continue;
        if (room > 0 && found < room)
            array[found] = h;
        found++;
    }
    *count = room > 0 && found > room ? room : found;
    return NVML_SUCCESS;
}

struct near {
    nvmlDevice_t device;
    nvmlGpuTopologyLevel_t level;
};

static int within(nvmlDevice_t other, const void *arg)
{
    const struct near *near = arg;
    nvmlGpuTopologyLevel_t level;
    return other != near->device && level_of(near->device, other, &level) == NVML_SUCCESS
           && level <= near->level;
}

/* The other GPUs whose common ancestor with the device is at the level or nearer */
NVML_API nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device,
                                                       nvmlGpuTopologyLevel_t level,
                                                       unsigned int *count,
                                                       nvmlDevice_t *deviceArray)
{
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (level > NVML_TOPOLOGY_SYSTEM || level % 10 != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    struct near near = {device, level};
    return gpu_set(count, deviceArray, within, &near);
}

static int near_cpu(nvmlDevice_t gpu, const void *arg)
{
    unsigned int cpu = *(const unsigned int *)arg, words = cpu / WORD_BITS + 1;
    unsigned long *set = calloc(words, sizeof(*set));
    int near = set && nvmlDeviceGetCpuAffinity(gpu, words, set) == NVML_SUCCESS
               && (set[cpu / WORD_BITS] >> (cpu % WORD_BITS) & 1);
    free(set);
    return near;
}

/* The GPUs whose local CPUs (local_cpulist) hold the CPU */
NVML_API nvmlReturn_t nvmlSystemGetTopologyGpuSet(unsigned int cpuNumber, unsigned int *count,
                                                  nvmlDevice_t *deviceArray)
{
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    if (cpuNumber >= 1u << 20) /* past any CPU list the kernel prints */
        return NVML_ERROR_INVALID_ARGUMENT;
    return gpu_set(count, deviceArray, near_cpu, &cpuNumber);
}

/* Over NVLink where the two share a fabric (atomics too); else over PCIe while one host's
 * CPU joins them (level NODE or nearer; no atomics), and not across CPUs */
NVML_API nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                             nvmlGpuP2PCapsIndex_t p2pIndex,
                                             nvmlGpuP2PStatus_t *p2pStatus)
{
    nvmlGpuTopologyLevel_t level = 0;
    nvmlReturn_t ret = pair_check(device1, device2);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!p2pStatus || p2pIndex > NVML_P2P_CAPS_INDEX_PCI)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = level_of(device1, device2, &level);
    if (ret != NVML_SUCCESS)
        return ret;
    nvmlGpuP2PStatus_t pcie = level > NVML_TOPOLOGY_NODE ? NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED
                              : p2pIndex == NVML_P2P_CAPS_INDEX_ATOMICS ? NVML_P2P_STATUS_NOT_SUPPORTED
                                                                        : NVML_P2P_STATUS_OK;
    if (device1 == device2)
        *p2pStatus = NVML_P2P_STATUS_NOT_SUPPORTED; /* no peer */
    else if (p2pIndex == NVML_P2P_CAPS_INDEX_PCI)
        *p2pStatus = pcie;
    else if (nvlink_peers(device1, device2))
        *p2pStatus = NVML_P2P_STATUS_OK;
    else
        *p2pStatus = p2pIndex == NVML_P2P_CAPS_INDEX_NVLINK ? NVML_P2P_STATUS_NOT_SUPPORTED : pcie;
    return NVML_SUCCESS;
}
