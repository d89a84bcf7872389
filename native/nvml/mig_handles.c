/* SPDX-License-Identifier: Apache-2.0 */
/* The handles of GPU instances and compute instances. Like a GPU's, a handle names its
 * instance (its GPU's bus ID and the IDs) and lives as long as the process; each call finds
 * the instance in the view at that call, so a handle whose instance was destroyed answers
 * INVALID_ARGUMENT, and one made again with the same IDs answers for it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mig.h"

#define MAX_GI_HANDLES 1024 /* distinct GPU instances one process meets */
#define MAX_CI_HANDLES 2048 /* distinct compute instances */

struct nvmlGpuInstance_st {
    char bdf[BDF_SIZE];
    unsigned int gi;
};

struct nvmlComputeInstance_st {
    char bdf[BDF_SIZE];
    unsigned int gi, ci;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvmlGpuInstance_st gis[MAX_GI_HANDLES];
static struct nvmlComputeInstance_st cis[MAX_CI_HANDLES];
static unsigned int gis_used, cis_used; /* under lock; entries never change once made */

nvmlGpuInstance_t gi_handle_of(const char *bdf, unsigned int gi)
{
    nvmlGpuInstance_t found = NULL;
    if (strlen(bdf) >= BDF_SIZE)
        return NULL;
    pthread_mutex_lock(&lock);
    for (unsigned int i = 0; i < gis_used && !found; i++)
        if (strcmp(gis[i].bdf, bdf) == 0 && gis[i].gi == gi)
            found = &gis[i];
    if (!found && gis_used < MAX_GI_HANDLES) {
        found = &gis[gis_used];
        memcpy(found->bdf, bdf, strlen(bdf) + 1);
        found->gi = gi;
        gis_used++;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

nvmlComputeInstance_t ci_handle_of(const char *bdf, unsigned int gi, unsigned int ci)
{
    nvmlComputeInstance_t found = NULL;
    if (strlen(bdf) >= BDF_SIZE)
        return NULL;
    pthread_mutex_lock(&lock);
    for (unsigned int i = 0; i < cis_used && !found; i++)
        if (strcmp(cis[i].bdf, bdf) == 0 && cis[i].gi == gi && cis[i].ci == ci)
            found = &cis[i];
    if (!found && cis_used < MAX_CI_HANDLES) {
        found = &cis[cis_used];
        memcpy(found->bdf, bdf, strlen(bdf) + 1);
        found->gi = gi;
        found->ci = ci;
        cis_used++;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

/* Is at one of the first used entries of a table (compared as integers: a pointer not into
 * the table is no handle of ours)? */
static int ours(const void *at, const void *table, size_t size, const unsigned int *used)
{
    uintptr_t p = (uintptr_t)at, first = (uintptr_t)table;
    pthread_mutex_lock(&lock);
    uintptr_t end = first + size * *used;
    pthread_mutex_unlock(&lock);
    return p >= first && p < end && (p - first) % size == 0;
}

/* The GPU of bdf checked, and its state loaded */
static nvmlReturn_t gpu_of(const char *bdf, nvmlDevice_t *device, struct mig_gpu **g)
{
    nvmlDevice_t made = handle_of(bdf);
    if (!made)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    nvmlReturn_t ret = handle_check(made);
    if (ret != NVML_SUCCESS)
        return ret;
    *g = mig_load(made, &ret);
    *device = made;
    return ret;
}

nvmlReturn_t gi_resolve(nvmlGpuInstance_t handle, nvmlDevice_t *device, struct mig_gpu **g,
                        const struct mig_gi **gi)
{
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    if (!ours(handle, gis, sizeof(gis[0]), &gis_used))
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_of(handle->bdf, device, g);
    if (ret != NVML_SUCCESS)
        return ret;
    *gi = mig_gi_by_id(*g, handle->gi);
    if (*gi)
        return NVML_SUCCESS;
    free(*g);
    *g = NULL;
    return NVML_ERROR_INVALID_ARGUMENT; /* destroyed */
}

nvmlReturn_t ci_resolve(nvmlComputeInstance_t handle, nvmlDevice_t *device,
                        struct mig_gpu **g, const struct mig_gi **gi, const struct mig_ci **ci)
{
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    if (!ours(handle, cis, sizeof(cis[0]), &cis_used))
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = gpu_of(handle->bdf, device, g);
    if (ret != NVML_SUCCESS)
        return ret;
    *gi = mig_gi_by_id(*g, handle->gi);
    *ci = *gi ? mig_ci_by_id(*gi, handle->ci) : NULL;
    if (*ci)
        return NVML_SUCCESS;
    free(*g);
    *g = NULL;
    return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t mig_device_resolve(nvmlDevice_t device, struct mig_gpu **g,
                                const struct mig_gi **gi, const struct mig_ci **ci)
{
    nvmlDevice_t parent = NULL;
    nvmlReturn_t ret = gpu_of(device->bdf, &parent, g);
    if (ret != NVML_SUCCESS)
        return ret;
    *gi = mig_gi_by_id(*g, device->gi);
    *ci = *gi ? mig_ci_by_id(*gi, device->ci) : NULL;
    if (*ci)
        return NVML_SUCCESS;
    free(*g);
    *g = NULL;
    return NVML_ERROR_INVALID_ARGUMENT; /* the MIG device was destroyed */
}
