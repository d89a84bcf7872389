/* SPDX-License-Identifier: Apache-2.0 */
/* A GPU instance's side: its info, its compute instance profiles (one per slice count up to
 * its own: 1c, 2c, 3c, 4c, 7c, whose profile IDs are NVML's enum), the room left, and its
 * compute instances; a compute instance's info. Each call finds its instance in the view at
 * that call (mig_handles.c). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "mig.h"

NVML_API nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance,
                                             nvmlGpuInstanceInfo_t *info)
{
    nvmlDevice_t device;
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    nvmlReturn_t ret = info ? gi_resolve(gpuInstance, &device, &g, &gi)
                            : NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) {
        memset(info, 0, sizeof(*info));
        info->device = device;
        info->id = gi->id;
        info->profileId = gi->profile;
        info->placement.start = gi->start;
        info->placement.size = gi->size;
    }
    free(g);
    return ret;
}

/* A compute instance profile of a GPU instance: its slices, how many fit (an empty GPU
 * instance's), its name ("MIG 1c.3g.40gb"; the GPU instance's own when it spans it).
 * INVALID_ARGUMENT past the API's enums or for an engine profile but the shared one;
 * NOT_SUPPORTED for one the GPU instance does not have. */
struct ci_profile {
    unsigned int id, slices, count, sm; /* sm: its share of the GI's SMs */
    unsigned int ce, dec, enc, jpeg, ofa; /* the GI's engines, all shared (copied: the
                                           * GPU's state is freed before they are read) */
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
};

static nvmlReturn_t ci_profile_of(const struct mig_gpu *g, const struct mig_gi *gi,
                                  unsigned int profile, unsigned int engine,
                                  struct ci_profile *out)
{
    if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT
        || engine != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
        return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int slices = mig_ci_slices_in(gi, profile);
    const struct mig_profile *p = mig_profile_by_id(g, gi->profile);
    if (!slices)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!p)
        return NVML_ERROR_UNKNOWN;
    memset(out, 0, sizeof(*out));
    out->id = profile;
    out->slices = slices;
    out->count = gi->slices / slices;
    out->sm = p->ci_sm[profile];
    out->ce = p->ce;
    out->dec = p->dec;
    out->enc = p->enc;
    out->jpeg = p->jpeg;
    out->ofa = p->ofa;
    strcpy(out->name, "MIG ");
    if (slices < gi->slices) {
        out->name[4] = (char)('0' + slices);
        strcpy(out->name + 5, "c.");
    }
    strcat(out->name, p->name);
    return NVML_SUCCESS;
}

/* The fields every version has, in the same order from id to sharedOfaCount */
#define CI_FIELDS(info, p)                                                                 \
    do {                                                                                   \
        (info)->id = (p)->id;                                                              \
        (info)->sliceCount = (p)->slices;                                                  \
        (info)->instanceCount = (p)->count;                                                \
        (info)->multiprocessorCount = (p)->sm;                                             \
        (info)->sharedCopyEngineCount = (p)->ce;                                       \
        (info)->sharedDecoderCount = (p)->dec;                                         \
        (info)->sharedEncoderCount = (p)->enc;                                         \
        (info)->sharedJpegCount = (p)->jpeg;                                           \
        (info)->sharedOfaCount = (p)->ofa;                                             \
    } while (0)

static nvmlReturn_t ci_profile_at_call(nvmlGpuInstance_t gpuInstance, const void *info,
                                       unsigned int profile, unsigned int engine,
                                       struct ci_profile *out)
{
    nvmlDevice_t device;
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    nvmlReturn_t ret = info ? gi_resolve(gpuInstance, &device, &g, &gi)
                            : NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS)
        ret = ci_profile_of(g, gi, profile, engine, out);
    free(g);
    return ret;
}

NVML_API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(
    nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
    nvmlComputeInstanceProfileInfo_t *info)
{
    struct ci_profile p;
    nvmlReturn_t ret = ci_profile_at_call(gpuInstance, info, profile, engProfile, &p);
    if (ret != NVML_SUCCESS)
        return ret;
    memset(info, 0, sizeof(*info));
    CI_FIELDS(info, &p);
    return NVML_SUCCESS;
}

_Static_assert(sizeof(nvmlComputeInstanceProfileInfo_v2_t) == 136, "CI profile info v2");
_Static_assert(sizeof(nvmlComputeInstanceProfileInfo_v3_t) == 140, "CI profile info v3");

/* v2 or v3, as the caller's version says; nothing is written past its struct */
NVML_API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,
    nvmlComputeInstanceProfileInfo_v2_t *info)
{
    struct ci_profile p;
    nvmlReturn_t ret = ci_profile_at_call(gpuInstance, info, profile, engProfile, &p);
    if (ret != NVML_SUCCESS)
        return ret;
    unsigned int version = info->version;
    if (version != nvmlComputeInstanceProfileInfo_v2
        && version != nvmlComputeInstanceProfileInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlComputeInstanceProfileInfo_v3_t v3 = {.version = version};
    CI_FIELDS(&v3, &p);
    memcpy(v3.name, p.name, sizeof(v3.name));
    memcpy(info, &v3, version == nvmlComputeInstanceProfileInfo_v3 ? sizeof(v3) : sizeof(*info));
    return NVML_SUCCESS;
}

/* How many more of the profile fit in the GPU instance's free slices */
NVML_API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId, unsigned int *count)
{
    nvmlDevice_t device;
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    struct ci_profile p;
    nvmlReturn_t ret = count ? gi_resolve(gpuInstance, &device, &g, &gi)
                             : NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) {
        ret = ci_profile_of(g, gi, profileId, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &p);
        if (ret == NVML_ERROR_NOT_SUPPORTED)
            ret = NVML_ERROR_INVALID_ARGUMENT; /* a profile ID the GPU instance has not */
    }
    if (ret == NVML_SUCCESS) {
        unsigned int used = 0;
        for (unsigned int i = 0; i < gi->ncis; i++)
            used += gi->cis[i].slices;
        *count = used < gi->slices ? (gi->slices - used) / p.slices : 0;
        if (gi->ncis + *count > MIG_CIS)
            *count = MIG_CIS - gi->ncis;
    }
    free(g);
    return ret;
}

/* The compute instances of the profile, in ID order; the caller's array holds the profile's
 * instance count, so no more are written */
NVML_API nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                         unsigned int profileId,
                                                         nvmlComputeInstance_t *computeInstances,
                                                         unsigned int *count)
{
    nvmlDevice_t device;
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    struct ci_profile p;
    nvmlReturn_t ret = count && computeInstances ? gi_resolve(gpuInstance, &device, &g, &gi)
                                                 : NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS) {
        ret = ci_profile_of(g, gi, profileId, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &p);
        if (ret == NVML_ERROR_NOT_SUPPORTED)
            ret = NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned int n = 0;
    for (unsigned int i = 0; ret == NVML_SUCCESS && i < gi->ncis && n < p.count; i++) {
        if (gi->cis[i].profile != profileId)
            continue;
        computeInstances[n] = ci_handle_of(device->bdf, gi->id, gi->cis[i].id);
        if (!computeInstances[n++])
            ret = NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    if (ret == NVML_SUCCESS)
        *count = n;
    free(g);
    return ret;
}

NVML_API nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(
    nvmlGpuInstance_t gpuInstance, unsigned int id, nvmlComputeInstance_t *computeInstance)
{
    nvmlDevice_t device;
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    nvmlReturn_t ret = computeInstance ? gi_resolve(gpuInstance, &device, &g, &gi)
                                       : NVML_ERROR_INVALID_ARGUMENT;
    if (ret == NVML_SUCCESS && id >= MIG_CIS)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    else if (ret == NVML_SUCCESS && !mig_ci_by_id(gi, id))
        ret = NVML_ERROR_NOT_FOUND;
    if (ret == NVML_SUCCESS) {
        nvmlComputeInstance_t made = ci_handle_of(device->bdf, gi->id, id);
        ret = made ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_RESOURCES;
        if (made)
            *computeInstance = made;
    }
    free(g);
    return ret;
}

_Static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32, "compute instance info");

/* _v2 fills the placement; the old name's struct ends before it */
static nvmlReturn_t ci_info(nvmlComputeInstance_t computeInstance,
                            nvmlComputeInstanceInfo_t *info, size_t size)
{
    nvmlDevice_t device;
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    const struct mig_ci *ci;
    nvmlReturn_t ret = info ? ci_resolve(computeInstance, &device, &g, &gi, &ci)
                            : NVML_ERROR_INVALID_ARGUMENT;
    nvmlGpuInstance_t parent = ret == NVML_SUCCESS ? gi_handle_of(device->bdf, gi->id) : NULL;
    if (ret == NVML_SUCCESS && !parent)
        ret = NVML_ERROR_INSUFFICIENT_RESOURCES;
    if (ret == NVML_SUCCESS) {
        nvmlComputeInstanceInfo_t out = {.device = device, .gpuInstance = parent, .id = ci->id,
                                         .profileId = ci->profile,
                                         .placement = {.start = ci->start, .size = ci->slices}};
        memcpy(info, &out, size);
    }
    free(g);
    return ret;
}

NVML_API nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                                    nvmlComputeInstanceInfo_t *info)
{
    return ci_info(computeInstance, info, sizeof(*info));
}

NVML_API nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance,
                                                 nvmlComputeInstanceInfo_t *info)
{
    return ci_info(computeInstance, info, offsetof(nvmlComputeInstanceInfo_t, placement));
}
