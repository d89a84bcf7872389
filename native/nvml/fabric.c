/* SPDX-License-Identifier: Apache-2.0 */
/* A GPU's place in an NVLink fabric, from NVML's own place (values.c): "fabric_cluster_uuid"
 * (32 hex digits), "fabric_clique_id", "fabric_state", "fabric_status", "fabric_health_mask"
 * and "fabric_health_summary" (mokkafs/surfaces/nvml_links.py). A GPU in no fabric has no
 * keys: NOT_SUPPORTED, as the real library answers off an NVLink fabric. */
#include <stddef.h>
#include <string.h>

#include "view.h"

_Static_assert(sizeof(nvmlGpuFabricInfo_t) == 28, "nvmlGpuFabricInfo_t");
_Static_assert(sizeof(nvmlGpuFabricInfo_v2_t) == 36, "nvmlGpuFabricInfo_v2_t");
_Static_assert(sizeof(nvmlGpuFabricInfo_v3_t) == 40, "nvmlGpuFabricInfo_v3_t");
_Static_assert(offsetof(nvmlGpuFabricInfo_v3_t, healthSummary) == 36, "healthSummary");

struct fabric {
    unsigned char uuid[NVML_GPU_FABRIC_UUID_LEN];
    unsigned int clique, state, status, mask, summary;
};

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static nvmlReturn_t fabric_of(nvmlDevice_t device, const void *out, struct fabric *f)
{
    char text[2 * NVML_GPU_FABRIC_UUID_LEN + 1];
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_value(device, "fabric_cluster_uuid", text, sizeof(text));
    if (ret != NVML_SUCCESS)
        return ret;
    if (strlen(text) != 2 * NVML_GPU_FABRIC_UUID_LEN)
        return NVML_ERROR_UNKNOWN;
    for (size_t i = 0; i < NVML_GPU_FABRIC_UUID_LEN; i++) {
        int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return NVML_ERROR_UNKNOWN;
        f->uuid[i] = (unsigned char)(hi << 4 | lo);
    }
    static const char *const keys[] = {"fabric_clique_id", "fabric_state", "fabric_status",
                                       "fabric_health_mask", "fabric_health_summary"};
    unsigned int *fields[] = {&f->clique, &f->state, &f->status, &f->mask, &f->summary};
    for (size_t i = 0; ret == NVML_SUCCESS && i < 5; i++)
        ret = gpu_uint_out(device, keys[i], fields[i]);
    if (ret == NVML_ERROR_NOT_SUPPORTED) /* the UUID without the rest */
        return NVML_ERROR_UNKNOWN;
    return ret == NVML_SUCCESS && (f->state > 255 || f->summary > 255) ? NVML_ERROR_UNKNOWN
                                                                      : ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device,
                                                 nvmlGpuFabricInfo_t *gpuFabricInfo)
{
    struct fabric f;
    nvmlReturn_t ret = fabric_of(device, gpuFabricInfo, &f);
    if (ret != NVML_SUCCESS)
        return ret;
    memset(gpuFabricInfo, 0, sizeof(*gpuFabricInfo));
    memcpy(gpuFabricInfo->clusterUuid, f.uuid, sizeof(f.uuid));
    gpuFabricInfo->status = (nvmlReturn_t)f.status;
    gpuFabricInfo->cliqueId = f.clique;
    gpuFabricInfo->state = (nvmlGpuFabricState_t)f.state;
    return NVML_SUCCESS;
}

/* The caller's version says the struct's size: v2 (go-nvml's V2(), nvidia-ml-py's
 * c_nvmlGpuFabricInfoV_t) has no room for the summary; v3 has */
NVML_API nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device,
                                                  nvmlGpuFabricInfoV_t *gpuFabricInfo)
{
    struct fabric f;
    nvmlReturn_t ret = fabric_of(device, gpuFabricInfo, &f);
    if (ret != NVML_SUCCESS)
        return ret;
    unsigned int version = gpuFabricInfo->version;
    if (version != nvmlGpuFabricInfo_v2 && version != nvmlGpuFabricInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlGpuFabricInfo_v2_t v2 = {.version = version, .status = (nvmlReturn_t)f.status,
                                 .cliqueId = f.clique, .state = (nvmlGpuFabricState_t)f.state,
                                 .healthMask = f.mask};
    memcpy(v2.clusterUuid, f.uuid, sizeof(f.uuid));
    memcpy(gpuFabricInfo, &v2, sizeof(v2)); /* the common part: the layouts agree */
    if (version == nvmlGpuFabricInfo_v3)
        gpuFabricInfo->healthSummary = (unsigned char)f.summary;
    return NVML_SUCCESS;
}
