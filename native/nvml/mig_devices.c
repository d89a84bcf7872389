/* SPDX-License-Identifier: Apache-2.0 */
/* MIG devices: a handle per compute instance, found by its GPU's index (in the order of the
 * GPU instance IDs, then the compute instance IDs) or by its UUID, and what such a handle
 * answers: its IDs, its GPU, its UUID and name, its memory and attributes. Other calls answer
 * NOT_SUPPORTED for a MIG device's handle (handle_check). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mig.h"

NVML_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                          unsigned int index,
                                                          nvmlDevice_t *migDevice)
{
    nvmlReturn_t ret = handle_check_any(device);
    if (ret == NVML_SUCCESS && (device->mig || !migDevice))
        ret = NVML_ERROR_INVALID_ARGUMENT;
    struct mig_gpu *g = ret == NVML_SUCCESS ? mig_load(device, &ret) : NULL;
    if (!g)
        return ret;
    if (index >= g->max_devices)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int i = 0, n = 0; i < g->ngis && ret == NVML_SUCCESS; i++)
        for (unsigned int c = 0; c < g->gis[i].ncis && ret == NVML_SUCCESS; c++, n++)
            if (n == index) {
                nvmlDevice_t made = mig_handle_of(device->bdf, g->gis[i].id, g->gis[i].cis[c].id);
                free(g);
                if (!made)
                    return NVML_ERROR_INSUFFICIENT_RESOURCES;
                *migDevice = made;
                return NVML_SUCCESS;
            }
    free(g);
    return ret == NVML_SUCCESS ? NVML_ERROR_NOT_FOUND : ret;
}

NVML_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    nvmlReturn_t ret = handle_check_any(device);
    if (ret == NVML_SUCCESS && !isMigDevice)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        *isMigDevice = device->mig ? 1 : 0;
    return ret;
}

/* A MIG device's handle checked (a GPU's: INVALID_ARGUMENT, or not_mig), its output not
 * NULL, and its instance found at this call: free() *g after */
static nvmlReturn_t mig_device(nvmlDevice_t device, const void *out, nvmlReturn_t not_mig,
                               struct mig_gpu **g, const struct mig_gi **gi,
                               const struct mig_ci **ci)
{
    nvmlReturn_t ret = handle_check_any(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!device->mig)
        return not_mig;
    return mig_device_resolve(device, g, gi, ci);
}

NVML_API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                   nvmlDevice_t *device)
{
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    const struct mig_ci *ci;
    nvmlReturn_t ret = mig_device(migDevice, device, NVML_ERROR_INVALID_ARGUMENT, &g, &gi, &ci);
    free(g);
    if (ret != NVML_SUCCESS)
        return ret;
    nvmlDevice_t parent = handle_of(migDevice->bdf);
    if (!parent)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    *device = parent;
    return NVML_SUCCESS;
}

static nvmlReturn_t instance_id(nvmlDevice_t device, unsigned int *id, int compute)
{
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    const struct mig_ci *ci;
    nvmlReturn_t ret = mig_device(device, id, NVML_ERROR_NOT_SUPPORTED, &g, &gi, &ci);
    if (ret == NVML_SUCCESS)
        *id = compute ? ci->id : gi->id;
    free(g);
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    return instance_id(device, id, 0);
}

NVML_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    return instance_id(device, id, 1);
}

/* The GPU instance's profile, as the table of its GPU says */
static const struct mig_profile *gi_profile(const struct mig_gpu *g, const struct mig_gi *gi)
{
    return mig_profile_by_id(g, gi->profile);
}

/* A MIG device's share of its GPU: its compute instance's SMs, its GPU instance's engines
 * (shared by its compute instances), slices and memory; counts no table gives are 0. A whole
 * GPU's: NOT_SUPPORTED (the same). */
NVML_API nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                                 nvmlDeviceAttributes_t *attributes)
{
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    const struct mig_ci *ci;
    nvmlReturn_t ret = mig_device(device, attributes, NVML_ERROR_NOT_SUPPORTED, &g, &gi, &ci);
    const struct mig_profile *p = ret == NVML_SUCCESS ? gi_profile(g, gi) : NULL;
    if (ret == NVML_SUCCESS && !p)
        ret = NVML_ERROR_UNKNOWN;
    if (p) {
        unsigned int cip = 0;
        while (cip < 4 && mig_ci_slices(cip) != ci->slices)
            cip++;
        memset(attributes, 0, sizeof(*attributes));
        attributes->multiprocessorCount = mig_ci_slices(cip) == ci->slices ? p->ci_sm[cip] : 0;
        attributes->sharedCopyEngineCount = p->ce;
        attributes->sharedDecoderCount = p->dec;
        attributes->sharedEncoderCount = p->enc;
        attributes->sharedJpegCount = p->jpeg;
        attributes->sharedOfaCount = p->ofa;
        attributes->gpuInstanceSliceCount = gi->slices;
        attributes->computeInstanceSliceCount = ci->slices;
        attributes->memorySizeMB = p->memory_mb;
    }
    free(g);
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device,
                                              nvmlDeviceAttributes_t *attributes)
{
    return nvmlDeviceGetAttributes_v2(device, attributes);
}

nvmlReturn_t mig_device_text(nvmlDevice_t device, const char *key, char *out,
                             unsigned int length)
{
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    const struct mig_ci *ci;
    char model[128], text[256];
    nvmlReturn_t ret = mig_device_resolve(device, &g, &gi, &ci);
    if (ret == NVML_SUCCESS && strcmp(key, "GPU UUID") == 0) {
        ret = copy_out(out, length, ci->uuid);
    } else if (ret == NVML_SUCCESS && strcmp(key, "Model") == 0) {
        ret = gpu_info(device, "Model", model, sizeof(model)); /* the GPU's */
        if (ret == NVML_SUCCESS) {
            snprintf(text, sizeof(text), "%s MIG %s", model, ci->name);
            ret = copy_out(out, length, text);
        }
    } else if (ret == NVML_SUCCESS) {
        ret = NVML_ERROR_NOT_SUPPORTED;
    }
    free(g);
    return ret;
}

nvmlReturn_t mig_memory(nvmlDevice_t device, unsigned long long *total,
                        unsigned long long *reserved, unsigned long long *used)
{
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    const struct mig_ci *ci;
    unsigned long long gpu_reserved = 0, gpu_used = 0, processes = 0, own = 0;
    nvmlDevice_t parent = handle_of(device->bdf);
    nvmlReturn_t ret = parent ? mig_device_resolve(device, &g, &gi, &ci)
                              : NVML_ERROR_INSUFFICIENT_RESOURCES;
    const struct mig_profile *p = ret == NVML_SUCCESS ? gi_profile(g, gi) : NULL;
    if (ret == NVML_SUCCESS && !p)
        ret = NVML_ERROR_UNKNOWN;
    if (ret == NVML_SUCCESS)
        ret = gpu_number(parent, "memory_reserved", &gpu_reserved);
    if (ret == NVML_SUCCESS)
        ret = gpu_number(parent, "memory_used", &gpu_used);
    if (ret == NVML_SUCCESS)
        ret = process_memory(parent, gi->id, &processes, &own);
    if (ret == NVML_SUCCESS) {
        *total = p->memory_mb * MIB;
        *reserved = gpu_reserved / 8 * gi->size; /* the GPU's, shared by memory units */
        /* what no process holds, shared by memory units, and what its processes hold */
        unsigned long long rest = gpu_used > processes ? gpu_used - processes : 0;
        *used = rest / 8 * gi->size + own;
        if (*used > *total - *reserved)
            *used = *total > *reserved ? *total - *reserved : 0;
    }
    free(g);
    return ret;
}

nvmlReturn_t mig_handle_by_uuid(const char *uuid, nvmlDevice_t *device)
{
    char bdfs[MAX_GPUS][BDF_SIZE];
    int n = gpus_list(bdfs, MAX_GPUS);
    for (int i = 0; i < n; i++) {
        nvmlReturn_t ret;
        struct nvmlDevice_st probe = {0};
        memcpy(probe.bdf, bdfs[i], sizeof(probe.bdf));
        if (!gpu_present(bdfs[i]))
            continue;
        struct mig_gpu *g = mig_load(&probe, &ret);
        for (unsigned int j = 0; g && j < g->ngis; j++)
            for (unsigned int c = 0; c < g->gis[j].ncis; c++)
                if (strcmp(g->gis[j].cis[c].uuid, uuid) == 0) {
                    nvmlDevice_t made = mig_handle_of(bdfs[i], g->gis[j].id, g->gis[j].cis[c].id);
                    free(g);
                    if (!made)
                        return NVML_ERROR_INSUFFICIENT_RESOURCES;
                    *device = made;
                    return NVML_SUCCESS;
                }
        free(g);
    }
    return n < 0 ? NVML_ERROR_UNKNOWN : NVML_ERROR_NOT_FOUND;
}
