/* SPDX-License-Identifier: Apache-2.0 */
/* MIG changes: GPU and compute instances made and destroyed through the daemon's control
 * socket (control.c), exactly as `mokkafs mig -cgi/-dgi/-cci/-dci` makes them: one new view,
 * kept in the state file, seen by the sysfs and by every process. The daemon checks each
 * change as the driver would, and answers only root and its own user.
 *
 * Before asking, the call checks the change against the view, to answer the API's own
 * errors: INVALID_ARGUMENT for a profile or placement the GPU does not have,
 * INSUFFICIENT_RESOURCES when it does not fit, IN_USE for a GPU instance with compute
 * instances. A change the daemon refuses after that (another process changed the layout
 * meanwhile) is INSUFFICIENT_RESOURCES, or INVALID_ARGUMENT for a destroy. After the change,
 * the new instance's handle is found in the view, where the daemon put it.
 *
 * A GPU instance goes where the driver puts it (the highest free start, mig_free_start);
 * CreateGpuInstanceWithPlacement names its placement in the daemon's request, and any free
 * allowed one is made.
 *
 * SetMigMode asks the daemon to turn MIG on or off ({"action": "mode"}): refused, as the
 * driver refuses it, on a GPU without MIG (NOT_SUPPORTED) and, to turn it off, while GPU
 * instances exist (IN_USE). No GPU reset is simulated: the mode is current at once, pending
 * the same, and activationStatus is NVML_SUCCESS. */
#include <stdlib.h>

#include "mig.h"

/* One request to the daemon; its refusal is the caller's bound error */
static nvmlReturn_t ask(struct mig_request req, nvmlReturn_t bound)
{
    int refused = 0;
    nvmlReturn_t ret = control_mig(&req, &refused);
    return ret == NVML_SUCCESS && refused ? bound : ret;
}

/* A request of action on GPU index naming nothing else yet */
static struct mig_request request(const char *action, unsigned int index)
{
    return (struct mig_request){.action = action, .index = index, .profile = -1, .start = -1,
                                .gi = -1, .ci = -1, .mode = -1};
}

static nvmlReturn_t create_gi(nvmlDevice_t device, unsigned int profileId,
                              const nvmlGpuInstancePlacement_t *placement,
                              nvmlGpuInstance_t *gpuInstance)
{
    nvmlReturn_t ret = handle_check_any(device);
    if (ret == NVML_SUCCESS && (device->mig || !gpuInstance))
        ret = NVML_ERROR_INVALID_ARGUMENT;
    struct mig_gpu *g = ret == NVML_SUCCESS ? mig_load(device, &ret) : NULL;
    if (!g)
        return ret;
    const struct mig_profile *p = mig_profile_by_id(g, profileId);
    int start = p ? mig_free_start(g, p) : -1;
    unsigned int index = g->index;
    if (!g->current)
        ret = NVML_ERROR_NOT_SUPPORTED;
    else if (!p)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    else if (placement && (placement->size != p->size || placement->start >= 8
                           || !(p->starts >> placement->start & 1)))
        ret = NVML_ERROR_INVALID_ARGUMENT;
    else if (placement && !mig_room(g, p, placement->start))
        ret = NVML_ERROR_INSUFFICIENT_RESOURCES;
    else if (!placement && start < 0)
        ret = NVML_ERROR_INSUFFICIENT_RESOURCES;
    if (placement)
        start = (int)placement->start;
    free(g);
    if (ret != NVML_SUCCESS)
        return ret;
    struct mig_request req = request("cgi", index);
    req.profile = (int)profileId;
    req.start = placement ? start : -1;
    ret = ask(req, NVML_ERROR_INSUFFICIENT_RESOURCES);
    if (ret != NVML_SUCCESS)
        return ret;
    g = mig_load(device, &ret); /* the new one: the profile's at the start asked for */
    for (unsigned int i = 0; g && i < g->ngis; i++)
        if (g->gis[i].profile == profileId && g->gis[i].start == (unsigned int)start) {
            nvmlGpuInstance_t made = gi_handle_of(device->bdf, g->gis[i].id);
            free(g);
            if (!made)
                return NVML_ERROR_INSUFFICIENT_RESOURCES;
            *gpuInstance = made;
            return NVML_SUCCESS;
        }
    free(g);
    return ret == NVML_SUCCESS ? NVML_ERROR_UNKNOWN : ret; /* changed again meanwhile */
}

NVML_API nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                                  nvmlGpuInstance_t *gpuInstance)
{
    return create_gi(device, profileId, NULL, gpuInstance);
}

NVML_API nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(
    nvmlDevice_t device, unsigned int profileId, const nvmlGpuInstancePlacement_t *placement,
    nvmlGpuInstance_t *gpuInstance)
{
    if (!placement) {
        nvmlReturn_t ret = handle_check_any(device);
        return ret == NVML_SUCCESS ? NVML_ERROR_INVALID_ARGUMENT : ret;
    }
    return create_gi(device, profileId, placement, gpuInstance);
}

/* A GPU instance with compute instances is in use, as the driver says */
NVML_API nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance)
{
    nvmlDevice_t device;
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    nvmlReturn_t ret = gi_resolve(gpuInstance, &device, &g, &gi);
    if (ret != NVML_SUCCESS)
        return ret;
    unsigned int index = g->index, id = gi->id, cis = gi->ncis;
    free(g);
    if (cis)
        return NVML_ERROR_IN_USE;
    struct mig_request req = request("dgi", index);
    req.gi = (int)id;
    return ask(req, NVML_ERROR_INVALID_ARGUMENT);
}

/* A new compute instance: at placement if given (INVALID_ARGUMENT where its profile may not
 * start, INSUFFICIENT_RESOURCES where another holds its slices), else at the highest free
 * start; it takes the lowest free ID: as the daemon places and numbers it */
static nvmlReturn_t create_ci(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                              const nvmlComputeInstancePlacement_t *placement,
                              nvmlComputeInstance_t *computeInstance)
{
    nvmlDevice_t device;
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    nvmlReturn_t ret = computeInstance ? gi_resolve(gpuInstance, &device, &g, &gi)
                                       : NVML_ERROR_INVALID_ARGUMENT;
    if (ret != NVML_SUCCESS)
        return ret;
    unsigned int slices = mig_ci_slices_in(gi, profileId), id = 0;
    while (id < MIG_CIS && mig_ci_by_id(gi, id))
        id++;
    unsigned int index = g->index, gid = gi->id;
    int start = slices ? mig_ci_free_start(gi, slices) : -1;
    if (!slices)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    else if (placement && (placement->size != slices
                           || !mig_ci_allowed(slices, gi->slices, placement->start)))
        ret = NVML_ERROR_INVALID_ARGUMENT;
    else if (placement && !mig_ci_free(gi, slices, placement->start))
        ret = NVML_ERROR_INSUFFICIENT_RESOURCES;
    else if ((!placement && start < 0) || id >= MIG_CIS)
        ret = NVML_ERROR_INSUFFICIENT_RESOURCES;
    free(g);
    if (ret != NVML_SUCCESS)
        return ret;
    struct mig_request req = request("cci", index);
    req.profile = (int)profileId;
    req.gi = (int)gid;
    req.start = placement ? (int)placement->start : -1;
    ret = ask(req, NVML_ERROR_INSUFFICIENT_RESOURCES);
    if (ret != NVML_SUCCESS)
        return ret;
    g = mig_load(device, &ret);
    const struct mig_gi *now = g ? mig_gi_by_id(g, gid) : NULL;
    const struct mig_ci *made = now ? mig_ci_by_id(now, id) : NULL;
    if (made && made->slices == slices) {
        nvmlComputeInstance_t handle = ci_handle_of(device->bdf, gid, id);
        ret = handle ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_RESOURCES;
        if (handle)
            *computeInstance = handle;
    } else if (ret == NVML_SUCCESS) {
        ret = NVML_ERROR_UNKNOWN; /* changed again meanwhile */
    }
    free(g);
    return ret;
}

NVML_API nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                           unsigned int profileId,
                                                           nvmlComputeInstance_t *computeInstance)
{
    return create_ci(gpuInstance, profileId, NULL, computeInstance);
}

NVML_API nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId,
    const nvmlComputeInstancePlacement_t *placement, nvmlComputeInstance_t *computeInstance)
{
    if (!placement)
        return NVML_ERROR_INVALID_ARGUMENT;
    return create_ci(gpuInstance, profileId, placement, computeInstance);
}

/* Every placement of a compute instance profile in the GPU instance, free or not (as the API
 * says). With no array, *count says how many there are. */
NVML_API nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId,
    nvmlComputeInstancePlacement_t *placements, unsigned int *count)
{
    nvmlDevice_t device;
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    nvmlReturn_t ret = count ? gi_resolve(gpuInstance, &device, &g, &gi)
                             : NVML_ERROR_INVALID_ARGUMENT;
    if (ret != NVML_SUCCESS)
        return ret;
    unsigned int slices = mig_ci_slices_in(gi, profileId), n = 0;
    if (!slices)
        ret = NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned int s = 0; ret == NVML_SUCCESS && s < gi->slices; s++)
        n += (unsigned int)mig_ci_allowed(slices, gi->slices, s);
    if (ret == NVML_SUCCESS && placements && *count < n) {
        ret = NVML_ERROR_INSUFFICIENT_SIZE;
    } else if (ret == NVML_SUCCESS && placements) {
        for (unsigned int s = 0, i = 0; s < gi->slices; s++)
            if (mig_ci_allowed(slices, gi->slices, s))
                placements[i++] = (nvmlComputeInstancePlacement_t){.start = s, .size = slices};
    }
    if (ret == NVML_SUCCESS || ret == NVML_ERROR_INSUFFICIENT_SIZE)
        *count = n;
    free(g);
    return ret;
}

NVML_API nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance)
{
    nvmlDevice_t device;
    struct mig_gpu *g = NULL;
    const struct mig_gi *gi;
    const struct mig_ci *ci;
    nvmlReturn_t ret = ci_resolve(computeInstance, &device, &g, &gi, &ci);
    if (ret != NVML_SUCCESS)
        return ret;
    unsigned int index = g->index, gid = gi->id, cid = ci->id;
    free(g);
    struct mig_request req = request("dci", index);
    req.gi = (int)gid;
    req.ci = (int)cid;
    return ask(req, NVML_ERROR_INVALID_ARGUMENT);
}

/* MIG on or off through the daemon; the mode it already has is asked for too, as the real
 * library sets it again. A refusal after the checks (another process made a GPU instance
 * meanwhile) is IN_USE. */
NVML_API nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                           nvmlReturn_t *activationStatus)
{
    nvmlReturn_t ret = handle_check_any(device);
    if (ret == NVML_SUCCESS && (device->mig || !activationStatus
                                || (mode != NVML_DEVICE_MIG_ENABLE
                                    && mode != NVML_DEVICE_MIG_DISABLE)))
        ret = NVML_ERROR_INVALID_ARGUMENT;
    struct mig_gpu *g = ret == NVML_SUCCESS ? mig_load(device, &ret) : NULL;
    if (!g)
        return ret;
    unsigned int index = g->index;
    if (mode == NVML_DEVICE_MIG_DISABLE && g->current && g->ngis)
        ret = NVML_ERROR_IN_USE;
    free(g);
    struct mig_request req = request("mode", index);
    req.mode = (int)mode;
    if (ret == NVML_SUCCESS)
        ret = ask(req, NVML_ERROR_IN_USE);
    if (ret == NVML_SUCCESS)
        *activationStatus = NVML_SUCCESS;
    return ret;
}
