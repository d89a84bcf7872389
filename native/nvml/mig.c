/* SPDX-License-Identifier: Apache-2.0 */
/* A GPU's MIG side (mig_view.c reads it at each call): its mode, its GPU instance profiles
 * and their placements, the room left, and its GPU instances. A GPU without a MIG table
 * answers NOT_SUPPORTED; the instance calls answer NOT_SUPPORTED too while MIG is off. */
#include <stdlib.h>
#include <string.h>

#include "mig.h"

/* The caller's GPU (not a MIG device) checked and its MIG state loaded; out is the caller's
 * output, checked for NULL after the handle */
static struct mig_gpu *gpu_state(nvmlDevice_t device, const void *out, nvmlReturn_t *ret)
{
    *ret = handle_check_any(device);
    if (*ret == NVML_SUCCESS && (device->mig || !out))
        *ret = NVML_ERROR_INVALID_ARGUMENT;
    return *ret == NVML_SUCCESS ? mig_load(device, ret) : NULL;
}

/* As gpu_state, and MIG on */
static struct mig_gpu *mig_on(nvmlDevice_t device, const void *out, nvmlReturn_t *ret)
{
    struct mig_gpu *g = gpu_state(device, out, ret);
    if (g && !g->current) {
        free(g);
        *ret = NVML_ERROR_NOT_SUPPORTED;
        return NULL;
    }
    return g;
}

NVML_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                           unsigned int *pendingMode)
{
    nvmlReturn_t ret;
    struct mig_gpu *g = gpu_state(device, currentMode && pendingMode ? currentMode : NULL, &ret);
    if (!g)
        return ret;
    *currentMode = g->current ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    *pendingMode = g->pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    free(g);
    return NVML_SUCCESS;
}

/* The most MIG devices the GPU may hold: 0 where MIG is off or not supported */
NVML_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    nvmlReturn_t ret;
    struct mig_gpu *g = gpu_state(device, count, &ret);
    if (!g && ret != NVML_ERROR_NOT_SUPPORTED)
        return ret;
    *count = g && g->current ? g->max_devices : 0;
    free(g);
    return NVML_SUCCESS;
}

/* The fields every version has, in the same order from id to memorySizeMB */
#define PROFILE_FIELDS(info, p)                                                            \
    do {                                                                                   \
        (info)->id = (p)->id;                                                              \
        (info)->sliceCount = (p)->slices;                                                  \
        (info)->instanceCount = (p)->most;                                                 \
        (info)->multiprocessorCount = (p)->sm;                                             \
        (info)->copyEngineCount = (p)->ce;                                                 \
        (info)->decoderCount = (p)->dec;                                                   \
        (info)->encoderCount = (p)->enc;                                                   \
        (info)->jpegCount = (p)->jpeg;                                                     \
        (info)->ofaCount = (p)->ofa;                                                       \
        (info)->memorySizeMB = (p)->memory_mb;                                             \
    } while (0)

/* The profile of an NVML enum: INVALID_ARGUMENT past the API's enums, NOT_SUPPORTED for one
 * the GPU does not have */
static nvmlReturn_t profile_of(const struct mig_gpu *g, unsigned int profile,
                               const struct mig_profile **p)
{
    if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    *p = &g->profiles[profile];
    return (*p)->known ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device,
                                                          unsigned int profile,
                                                          nvmlGpuInstanceProfileInfo_t *info)
{
    const struct mig_profile *p = NULL;
    nvmlReturn_t ret;
    struct mig_gpu *g = gpu_state(device, info, &ret);
    if (g)
        ret = profile_of(g, profile, &p);
    if (ret == NVML_SUCCESS) {
        memset(info, 0, sizeof(*info));
        PROFILE_FIELDS(info, p);
    }
    free(g);
    return ret;
}

/* v2 and v3 (their versions say which): the name is "MIG <profile>", as nvidia-smi lists */
static nvmlReturn_t profile_info_v(const struct mig_profile *p,
                                   nvmlGpuInstanceProfileInfo_v2_t *info)
{
    unsigned int version = info->version;
    if (version == nvmlGpuInstanceProfileInfo_v2) {
        memset(info, 0, sizeof(*info));
        info->version = version;
        PROFILE_FIELDS(info, p);
        strcpy(info->name, "MIG ");
        strcat(info->name, p->name);
        return NVML_SUCCESS;
    }
    if (version == nvmlGpuInstanceProfileInfo_v3) {
        nvmlGpuInstanceProfileInfo_v3_t v3 = {.version = version};
        PROFILE_FIELDS(&v3, p);
        strcpy(v3.name, "MIG ");
        strcat(v3.name, p->name);
        memcpy(info, &v3, sizeof(v3)); /* the same size as v2 */
        return NVML_SUCCESS;
    }
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
}

_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152, "GPU instance profile info v2");
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_v3_t) == 152, "GPU instance profile info v3");

NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device,
                                                           unsigned int profile,
                                                           nvmlGpuInstanceProfileInfo_v2_t *info)
{
    const struct mig_profile *p = NULL;
    nvmlReturn_t ret;
    struct mig_gpu *g = gpu_state(device, info, &ret);
    if (g)
        ret = profile_of(g, profile, &p);
    if (ret == NVML_SUCCESS)
        ret = profile_info_v(p, info);
    free(g);
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(
    nvmlDevice_t device, unsigned int profileId, nvmlGpuInstanceProfileInfo_v2_t *info)
{
    nvmlReturn_t ret;
    struct mig_gpu *g = gpu_state(device, info, &ret);
    const struct mig_profile *p = g ? mig_profile_by_id(g, profileId) : NULL;
    if (g)
        ret = p ? profile_info_v(p, info) : NVML_ERROR_INVALID_ARGUMENT;
    free(g);
    return ret;
}

/* Every placement of the profile, free or not, MIG on or off (as the API says). With no
 * array, *count says how many there are. */
NVML_API nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    nvmlDevice_t device, unsigned int profileId, nvmlGpuInstancePlacement_t *placements,
    unsigned int *count)
{
    nvmlReturn_t ret;
    struct mig_gpu *g = gpu_state(device, count, &ret);
    const struct mig_profile *p = g ? mig_profile_by_id(g, profileId) : NULL;
    if (g && !p)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (p) {
        unsigned int n = 0;
        for (unsigned int s = 0; s < 8; s++)
            n += p->starts >> s & 1;
        if (placements && *count < n) {
            ret = NVML_ERROR_INSUFFICIENT_SIZE;
        } else if (placements) {
            for (unsigned int s = 0, i = 0; s < 8; s++)
                if (p->starts >> s & 1)
                    placements[i++] = (nvmlGpuInstancePlacement_t){.start = s, .size = p->size};
        }
        *count = n;
    }
    free(g);
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(
    nvmlDevice_t device, unsigned int profileId, nvmlGpuInstancePlacement_t *placements,
    unsigned int *count)
{
    return nvmlDeviceGetGpuInstancePossiblePlacements_v2(device, profileId, placements, count);
}

/* How many more of the profile the GPU holds: instances made one after another, each where
 * the driver puts it (mig_free_start), until none fits */
NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device,
                                                                unsigned int profileId,
                                                                unsigned int *count)
{
    nvmlReturn_t ret;
    struct mig_gpu *g = mig_on(device, count, &ret);
    const struct mig_profile *p = g ? mig_profile_by_id(g, profileId) : NULL;
    if (g && !p)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (p) {
        unsigned int n = 0;
        int start;
        while (g->ngis < MIG_GIS && (start = mig_free_start(g, p)) >= 0) {
            g->gis[g->ngis++] = (struct mig_gi){.profile = p->id, .start = (unsigned int)start,
                                                .size = p->size, .slices = p->slices};
            n++;
        }
        *count = n;
    }
    free(g);
    return ret;
}

/* The GPU instances of the profile, in ID order; the caller's array holds the profile's
 * instance count (nvmlGpuInstanceProfileInfo_t.instanceCount), so no more are written */
NVML_API nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                                nvmlGpuInstance_t *gpuInstances,
                                                unsigned int *count)
{
    nvmlReturn_t ret;
    struct mig_gpu *g = mig_on(device, gpuInstances ? count : NULL, &ret);
    const struct mig_profile *p = g ? mig_profile_by_id(g, profileId) : NULL;
    if (g && !p)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    if (p) {
        unsigned int n = 0;
        for (unsigned int i = 0; i < g->ngis && n < p->most && ret == NVML_SUCCESS; i++) {
            if (g->gis[i].profile != profileId)
                continue;
            gpuInstances[n] = gi_handle_of(device->bdf, g->gis[i].id);
            if (!gpuInstances[n++])
                ret = NVML_ERROR_INSUFFICIENT_RESOURCES;
        }
        if (ret == NVML_SUCCESS)
            *count = n;
    }
    free(g);
    return ret;
}

NVML_API nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                   nvmlGpuInstance_t *gpuInstance)
{
    nvmlReturn_t ret;
    struct mig_gpu *g = mig_on(device, gpuInstance, &ret);
    if (g && id >= MIG_GIS)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    else if (g && !mig_gi_by_id(g, id))
        ret = NVML_ERROR_NOT_FOUND;
    if (g && ret == NVML_SUCCESS) {
        nvmlGpuInstance_t made = gi_handle_of(device->bdf, id);
        ret = made ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_RESOURCES;
        if (made)
            *gpuInstance = made;
    }
    free(g);
    return ret;
}
