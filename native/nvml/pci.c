/* SPDX-License-Identifier: Apache-2.0 */
/* PCI: the GPU's ids, bus ID, link, NUMA node and CPUs, each from its attribute in
 * sys/bus/pci/devices/<bdf>/ of the view, so NVML and the sysfs say the same. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mig.h"
#include "view.h"

/* What the PCI info structs share */
struct ids {
    unsigned int domain, bus, device, fn, device_id, subsystem_id, class_code;
};

/* The ids of the function a device names, from its attributes (no handle check) */
static nvmlReturn_t ids_of(nvmlDevice_t device, struct ids *ids)
{
    static const char *const attrs[] = {"vendor", "device", "subsystem_vendor",
                                        "subsystem_device", "class"};
    unsigned long v[5];
    nvmlReturn_t ret = NVML_SUCCESS;
    for (size_t i = 0; ret == NVML_SUCCESS && i < 5; i++)
        ret = gpu_attr_number(device, attrs[i], &v[i]);
    if (ret != NVML_SUCCESS)
        return ret;
    if (bdf_split(device->bdf, &ids->domain, &ids->bus, &ids->device, &ids->fn) < 0
        || v[0] > 0xffff || v[1] > 0xffff || v[2] > 0xffff || v[3] > 0xffff)
        return NVML_ERROR_UNKNOWN;
    ids->device_id = (unsigned int)(v[1] << 16 | v[0]);
    ids->subsystem_id = (unsigned int)(v[3] << 16 | v[2]);
    ids->class_code = (unsigned int)v[4];
    return NVML_SUCCESS;
}

static nvmlReturn_t read_ids(nvmlDevice_t device, struct ids *ids)
{
    nvmlReturn_t ret = handle_check(device);
    return ret == NVML_SUCCESS ? ids_of(device, ids) : ret;
}

static void bus_id(char *out, size_t size, int digits, const struct ids *ids)
{
    snprintf(out, size, "%0*X:%02X:%02X.%X", digits, ids->domain, ids->bus, ids->device,
             ids->fn);
}

static void fill_pci(nvmlPciInfo_t *pci, const struct ids *ids)
{
    memset(pci, 0, sizeof(*pci));
    bus_id(pci->busIdLegacy, sizeof(pci->busIdLegacy), 4, ids);
    bus_id(pci->busId, sizeof(pci->busId), 8, ids);
    pci->domain = ids->domain;
    pci->bus = ids->bus;
    pci->device = ids->device;
    pci->pciDeviceId = ids->device_id;
    pci->pciSubSystemId = ids->subsystem_id;
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    struct ids ids;
    nvmlReturn_t ret = read_ids(device, &ids);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci(pci, &ids);
    return NVML_SUCCESS;
}

nvmlReturn_t function_pci_info(const char *bdf, nvmlPciInfo_t *pci)
{
    struct nvmlDevice_st probe = {0};
    struct ids ids;
    if (strlen(bdf) >= sizeof(probe.bdf))
        return NVML_ERROR_UNKNOWN;
    memcpy(probe.bdf, bdf, strlen(bdf) + 1);
    if (ids_of(&probe, &ids) != NVML_SUCCESS)
        return NVML_ERROR_UNKNOWN; /* not a GPU: never "lost" */
    fill_pci(pci, &ids);
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfoExt(nvmlDevice_t device, nvmlPciInfoExt_t *pci)
{
    struct ids ids;
    nvmlReturn_t ret = read_ids(device, &ids);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (pci->version != NVML_PCI_INFO_EXT_V1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    memset(pci, 0, sizeof(*pci));
    pci->version = NVML_PCI_INFO_EXT_V1;
    pci->domain = ids.domain;
    pci->bus = ids.bus;
    pci->device = ids.device;
    pci->pciDeviceId = ids.device_id;
    pci->pciSubSystemId = ids.subsystem_id;
    pci->baseClass = ids.class_code >> 16 & 0xff;
    pci->subClass = ids.class_code >> 8 & 0xff;
    bus_id(pci->busId, sizeof(pci->busId), 8, &ids);
    return NVML_SUCCESS;
}

/* "32.0 GT/s PCIe" -> 5: the generation of a link speed the kernel prints */
static nvmlReturn_t link_gen(nvmlDevice_t device, const char *attr, unsigned int *gen)
{
    static const double speeds[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
    char text[64], *end;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!gen)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_attr(device, attr, text, sizeof(text));
    if (ret != NVML_SUCCESS)
        return ret;
    double gts = strtod(text, &end);
    for (unsigned int i = 0; end != text && i < sizeof(speeds) / sizeof(speeds[0]); i++)
        if (gts == speeds[i]) {
            *gen = i + 1;
            return NVML_SUCCESS;
        }
    return NVML_ERROR_UNKNOWN; /* "Unknown": the link is down */
}

static nvmlReturn_t link_width(nvmlDevice_t device, const char *attr, unsigned int *width)
{
    unsigned long v;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!width)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_attr_number(device, attr, &v);
    if (ret != NVML_SUCCESS)
        return ret;
    if (v == 0 || v > 32) /* 63: config space reads all ones */
        return NVML_ERROR_UNKNOWN;
    *width = (unsigned int)v;
    return NVML_SUCCESS;
}

NVML_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device,
                                                          unsigned int *currLinkGen)
{
    return link_gen(device, "current_link_speed", currLinkGen);
}

NVML_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device,
                                                         unsigned int *maxLinkGen)
{
    return link_gen(device, "max_link_speed", maxLinkGen);
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device,
                                                            unsigned int *maxLinkGenDevice)
{
    return link_gen(device, "max_link_speed", maxLinkGenDevice);
}

NVML_API nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device,
                                                     unsigned int *currLinkWidth)
{
    return link_width(device, "current_link_width", currLinkWidth);
}

NVML_API nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device,
                                                    unsigned int *maxLinkWidth)
{
    return link_width(device, "max_link_width", maxLinkWidth);
}

/* BAR1's size: the GPU's second memory region in its sysfs resource file (resource1, the
 * framebuffer aperture; 64-bit, so BAR2 is its upper half and lists empty), as lspci shows it.
 * NOT_SUPPORTED when the view gives the GPU none. */
static nvmlReturn_t bar1_size(nvmlDevice_t device, unsigned long long *size)
{
    char text[FILE_SIZE];
    unsigned long long start = 0, end = 0, flags = 0;
    nvmlReturn_t ret = gpu_attr(device, "resource", text, sizeof(text));
    if (ret != NVML_SUCCESS)
        return ret;
    const char *line = strchr(text, '\n');
    if (!line || sscanf(line + 1, "%llx %llx %llx", &start, &end, &flags) != 3 || end < start)
        return NVML_ERROR_UNKNOWN;
    if (end == 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *size = end - start + 1;
    return NVML_SUCCESS;
}

/* BAR1 of a GPU: its whole aperture, none of it mapped (no process maps framebuffer memory
 * here). Of a MIG device: its GPU instance's share (its memory units of the eight), less
 * 1 MiB, as nvidia-smi lists a MIG device's (8191 MiB for a 1g of a 64 GiB BAR1; 32767 for a
 * 3g or 4g). */
NVML_API nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device,
                                                  nvmlBAR1Memory_t *bar1Memory)
{
    unsigned long long size = 0;
    nvmlReturn_t ret = handle_check_any(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!bar1Memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = bar1_size(device, &size);
    if (ret == NVML_SUCCESS && device->mig) {
        struct mig_gpu *g = NULL;
        const struct mig_gi *gi;
        const struct mig_ci *ci;
        ret = mig_device_resolve(device, &g, &gi, &ci);
        if (ret == NVML_SUCCESS)
            size = size / 8 * gi->size - (1ULL << 20);
        free(g);
    }
    if (ret != NVML_SUCCESS)
        return ret;
    *bar1Memory = (nvmlBAR1Memory_t){.bar1Total = size, .bar1Free = size, .bar1Used = 0};
    return NVML_SUCCESS;
}
