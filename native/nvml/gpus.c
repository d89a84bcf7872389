/* SPDX-License-Identifier: Apache-2.0 */
/* The GPUs the driver lists (proc/driver/nvidia/gpus/<bdf>), in PCI order, and the handles.
 * A handle names a GPU by its sysfs bus ID (a MIG device's, its GPU's and its two instance
 * IDs) and lives as long as the process: it stays valid across swaps, and answers GPU_IS_LOST
 * while its GPU is not in the view or has fallen off the bus (its config space reads all
 * ones). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

/* distinct GPUs and MIG devices one process meets; a full table refuses more */
#define MAX_HANDLES 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvmlDevice_st handles[MAX_HANDLES];
static unsigned int used; /* under lock; handles[0..used) never change once made */

static int hex_run(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

int bdf_split(const char *bdf, unsigned int *domain, unsigned int *bus, unsigned int *dev,
              unsigned int *fn)
{
    /* the kernel's spelling: a domain of 4 to 8 hex digits, then "bb:dd.f", lowercase */
    size_t n = strlen(bdf);
    if (n < 12 || n > 16)
        return -1;
    const char *rest = bdf + n - 8;
    if (!hex_run(bdf, n - 8) || rest[0] != ':' || !hex_run(rest + 1, 2) || rest[3] != ':'
        || !hex_run(rest + 4, 2) || rest[6] != '.' || rest[7] < '0' || rest[7] > '7')
        return -1;
    unsigned long d = strtoul(bdf, NULL, 16);
    *domain = (unsigned int)d;
    *bus = (unsigned int)strtoul(rest + 1, NULL, 16);
    *dev = (unsigned int)strtoul(rest + 4, NULL, 16);
    *fn = (unsigned int)(rest[7] - '0');
    return *dev < 32 ? 0 : -1;
}

static int pci_order(const void *a, const void *b)
{
    unsigned int x[4], y[4];
    bdf_split(a, &x[0], &x[1], &x[2], &x[3]);
    bdf_split(b, &y[0], &y[1], &y[2], &y[3]);
    for (int i = 0; i < 4; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* Listed and not excluded (NVreg_ExcludedGpus): what NVML enumerates */
static int listed(const char *bdf)
{
    char rel[PATH_MAX], text[FILE_SIZE], excluded[16];
    snprintf(rel, sizeof(rel), "%s/%s/information", DRIVER_GPUS, bdf);
    if (view_read(rel, text, sizeof(text)) < 0)
        return 0;
    return text_field(text, "GPU Excluded", excluded, sizeof(excluded)) < 0
        || strcmp(excluded, "Yes") != 0;
}

int gpus_list(char bdfs[][BDF_SIZE], int max)
{
    char path[PATH_MAX];
    unsigned int parts[4];
    if (view_path(path, sizeof(path), DRIVER_GPUS) < 0)
        return -1;
    DIR *dir = opendir(path);
    if (!dir)
        return -1;
    int n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(dir)) != NULL) {
        if (bdf_split(e->d_name, &parts[0], &parts[1], &parts[2], &parts[3]) == 0
            && listed(e->d_name)) {
            memcpy(bdfs[n], e->d_name, strlen(e->d_name) + 1);
            n++;
        }
    }
    closedir(dir);
    qsort(bdfs, (size_t)n, BDF_SIZE, pci_order);
    return n;
}

static nvmlDevice_t handle_made(const char *bdf, int mig, unsigned int gi, unsigned int ci)
{
    nvmlDevice_t found = NULL;
    pthread_mutex_lock(&lock);
    for (unsigned int i = 0; i < used && !found; i++)
        if (strcmp(handles[i].bdf, bdf) == 0 && handles[i].mig == mig
            && (!mig || (handles[i].gi == gi && handles[i].ci == ci)))
            found = &handles[i];
    if (!found && used < MAX_HANDLES && strlen(bdf) < BDF_SIZE) {
        found = &handles[used];
        memcpy(found->bdf, bdf, strlen(bdf) + 1);
        found->mig = mig;
        found->gi = gi;
        found->ci = ci;
        used++;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

nvmlDevice_t handle_of(const char *bdf)
{
    return handle_made(bdf, 0, 0, 0);
}

nvmlDevice_t mig_handle_of(const char *bdf, unsigned int gi, unsigned int ci)
{
    return handle_made(bdf, 1, gi, ci);
}

int gpu_present(const char *bdf)
{
    char rel[PATH_MAX], config[5];
    snprintf(rel, sizeof(rel), "%s/%s/config", PCI_DEVICES, bdf);
    long n = view_read(rel, config, sizeof(config));
    /* a read of a function that fell off the bus completes with all ones (docs/faults.md) */
    return n >= 2 && !((unsigned char)config[0] == 0xff && (unsigned char)config[1] == 0xff);
}

nvmlReturn_t handle_check(nvmlDevice_t device)
{
    nvmlReturn_t ret = handle_check_any(device);
    return ret == NVML_SUCCESS && device->mig ? NVML_ERROR_NOT_SUPPORTED : ret;
}

nvmlReturn_t handle_check_any(nvmlDevice_t device)
{
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    /* compared as integers: a pointer that is not into the table is no handle of ours */
    uintptr_t at = (uintptr_t)device, first = (uintptr_t)&handles[0];
    pthread_mutex_lock(&lock);
    uintptr_t end = (uintptr_t)&handles[used];
    pthread_mutex_unlock(&lock);
    if (at < first || at >= end || (at - first) % sizeof(handles[0]) != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    return gpu_present(device->bdf) ? NVML_SUCCESS : NVML_ERROR_GPU_IS_LOST;
}

nvmlReturn_t gpu_info(nvmlDevice_t device, const char *key, char *out, size_t size)
{
    char rel[PATH_MAX], text[FILE_SIZE];
    snprintf(rel, sizeof(rel), "%s/%s/information", DRIVER_GPUS, device->bdf);
    if (view_read(rel, text, sizeof(text)) < 0)
        return NVML_ERROR_GPU_IS_LOST;
    return text_field(text, key, out, size) < 0 ? NVML_ERROR_UNKNOWN : NVML_SUCCESS;
}

nvmlReturn_t gpu_attr(nvmlDevice_t device, const char *attr, char *out, size_t size)
{
    char rel[PATH_MAX], text[FILE_SIZE];
    snprintf(rel, sizeof(rel), "%s/%s/%s", PCI_DEVICES, device->bdf, attr);
    if (view_read(rel, text, sizeof(text)) < 0) {
        char info[64];
        nvmlReturn_t gone = gpu_info(device, "Bus Location", info, sizeof(info));
        return gone == NVML_ERROR_GPU_IS_LOST ? gone : NVML_ERROR_UNKNOWN;
    }
    char *value = trim(text);
    if (strlen(value) >= size)
        return NVML_ERROR_UNKNOWN;
    memcpy(out, value, strlen(value) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t gpu_attr_number(nvmlDevice_t device, const char *attr, unsigned long *value)
{
    char text[64], *end;
    nvmlReturn_t ret = gpu_attr(device, attr, text, sizeof(text));
    if (ret != NVML_SUCCESS)
        return ret;
    errno = 0;
    unsigned long v = strtoul(text, &end, 0);
    if (end == text || *end != '\0' || errno != 0)
        return NVML_ERROR_UNKNOWN;
    *value = v;
    return NVML_SUCCESS;
}
