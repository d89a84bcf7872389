/* SPDX-License-Identifier: Apache-2.0 */
/* A GPU's NVLinks, from NVML's own place (values.c): "nvlink_links" says how many it has,
 * "nvlink.<n>.state", ".version", ".remote_type" and ".remote_bus_id" each link's facts
 * (mokkafs/surfaces/nvml_links.py). A GPU without NVLink has no keys: NOT_SUPPORTED. A link
 * index past the GPU's count (and so past NVML_NVLINK_MAX_LINKS) is INVALID_ARGUMENT. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "links.h"

/* The handle checked, the output not NULL and the link the GPU's */
static nvmlReturn_t link_check(nvmlDevice_t device, unsigned int link, const void *out)
{
    unsigned long long count = 0;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_number(device, "nvlink_links", &count);
    if (ret != NVML_SUCCESS)
        return ret;
    return link < count && link < NVML_NVLINK_MAX_LINKS ? NVML_SUCCESS
                                                        : NVML_ERROR_INVALID_ARGUMENT;
}

static void link_key(char *out, size_t size, unsigned int link, const char *field)
{
    snprintf(out, size, "nvlink.%u.%s", link, field);
}

/* One field of a link as an unsigned int into out */
static nvmlReturn_t link_uint(nvmlDevice_t device, unsigned int link, const char *field,
                              unsigned int *out)
{
    char key[48];
    nvmlReturn_t ret = link_check(device, link, out);
    if (ret != NVML_SUCCESS)
        return ret;
    link_key(key, sizeof(key), link, field);
    ret = gpu_uint_out(device, key, out);
    return ret == NVML_ERROR_NOT_SUPPORTED ? NVML_ERROR_UNKNOWN : ret; /* a link lacks it */
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                               nvmlEnableState_t *isActive)
{
    return link_uint(device, link, "state", isActive);
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                                 unsigned int *version)
{
    return link_uint(device, link, "version", version);
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                          nvmlIntNvLinkDeviceType_t *type)
{
    return link_uint(device, link, "remote_type", type);
}

/* Every link carries P2P and its atomics to the other GPUs; none reaches system memory
 * (x86 boards reach it over PCIe, Grace over C2C, which is not one of these links) */
NVML_API nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
                                                    nvmlNvLinkCapability_t capability,
                                                    unsigned int *capResult)
{
    nvmlReturn_t ret = link_check(device, link, capResult);
    if (ret != NVML_SUCCESS)
        return ret;
    if (capability > NVML_NVLINK_CAP_VALID)
        return NVML_ERROR_INVALID_ARGUMENT;
    *capResult = capability == NVML_NVLINK_CAP_P2P_SUPPORTED
                 || capability == NVML_NVLINK_CAP_P2P_ATOMICS
                 || capability == NVML_NVLINK_CAP_VALID;
    return NVML_SUCCESS;
}

/* The far end's PCI info, where it is a function of the node's bus (an HGX NVSwitch); else
 * NOT_SUPPORTED. As NVML says, pciSubSystemId is not to be relied on. */
NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                          nvmlPciInfo_t *pci)
{
    char key[48], bdf[BDF_SIZE];
    nvmlReturn_t ret = link_check(device, link, pci);
    if (ret != NVML_SUCCESS)
        return ret;
    link_key(key, sizeof(key), link, "remote_bus_id");
    ret = gpu_value(device, key, bdf, sizeof(bdf));
    return ret == NVML_SUCCESS ? function_pci_info(bdf, pci) : ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
                                                       nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, pci);
}

/* What the GPU's active links reach: the remotes' bus IDs, "" for a switch that is not on
 * the node's bus; how many */
static unsigned int reaches(nvmlDevice_t device, char out[][BDF_SIZE])
{
    char key[48];
    unsigned int n = 0, state = 0;
    for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; link++) {
        nvmlReturn_t ret = nvmlDeviceGetNvLinkState(device, link, &state);
        if (ret == NVML_ERROR_INVALID_ARGUMENT || ret == NVML_ERROR_NOT_SUPPORTED)
            break; /* past the GPU's links, or none */
        if (ret != NVML_SUCCESS || !state)
            continue;
        link_key(key, sizeof(key), link, "remote_bus_id");
        if (gpu_value(device, key, out[n], BDF_SIZE) != NVML_SUCCESS)
            out[n][0] = '\0';
        n++;
    }
    return n;
}

int nvlink_peers(nvmlDevice_t a, nvmlDevice_t b)
{
    char mine[NVML_NVLINK_MAX_LINKS][BDF_SIZE], theirs[NVML_NVLINK_MAX_LINKS][BDF_SIZE];
    unsigned int m = reaches(a, mine), t = reaches(b, theirs);
    for (unsigned int i = 0; i < m; i++)
        for (unsigned int j = 0; j < t; j++)
            if (strcmp(mine[i], theirs[j]) == 0)
                return 1;
    return 0;
}
