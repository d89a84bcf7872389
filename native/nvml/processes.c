/* SPDX-License-Identifier: Apache-2.0 */
/* The processes running on a GPU, from NVML's own place (values.c): "process_count=N", then
 * "process.<i>.pid", ".name" and ".memory" (bytes) for each, and ".gpu_instance" and
 * ".compute_instance" for one in a MIG instance. The daemon computes them from its State and
 * the time: the profile's processes and the gpu-busy faults' (mokkafs/surfaces/nvml.py).
 * They are compute processes; no graphics or MPS process runs. A MIG device's handle lists
 * those in its compute instance; the GPU's lists them all, each with its instances' IDs. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mig.h"
#include "view.h"

#define MAX_PROCESSES 8   /* on one GPU (mokkafs/model/nvml.py) */
#define NAME_SIZE 80      /* a name is 64 characters at most (the profile's bound) */
#define NO_INSTANCE 0xFFFFFFFFu /* a process of a GPU without MIG: no GPU or compute instance */

struct process {
    unsigned int pid;
    unsigned int gi, ci; /* NO_INSTANCE: in none */
    unsigned long long memory;
    char name[NAME_SIZE];
};

/* One process key "process.<i>.<field>" of text */
static int process_key(const char *text, unsigned int i, const char *field, char *out,
                       size_t size)
{
    char key[64];
    snprintf(key, sizeof(key), "process.%u.%s", i, field);
    return line_value(text, key, '=', out, size);
}

/* The GPU's processes into out (MAX_PROCESSES); *count how many. A file without the keys
 * (a daemon from before them) has none; a malformed one answers UNKNOWN. */
static nvmlReturn_t processes_of(nvmlDevice_t device, struct process *out, unsigned int *count)
{
    char text[PLACE_FILE_SIZE], found[32];
    unsigned long long n = 0, pid = 0, memory = 0;
    nvmlReturn_t ret = gpu_place(device, text, sizeof(text));
    if (ret != NVML_SUCCESS)
        return ret;
    *count = 0;
    if (line_value(text, "process_count", '=', found, sizeof(found)) < 0)
        return NVML_SUCCESS;
    if (number_of(found, &n) != NVML_SUCCESS || n > MAX_PROCESSES)
        return NVML_ERROR_UNKNOWN;
    for (unsigned int i = 0; i < n; i++) {
        if (process_key(text, i, "pid", found, sizeof(found)) < 0
            || number_of(found, &pid) != NVML_SUCCESS || pid == 0 || pid > 0xFFFFFFFFull
            || process_key(text, i, "memory", found, sizeof(found)) < 0
            || number_of(found, &memory) != NVML_SUCCESS
            || process_key(text, i, "name", out[i].name, sizeof(out[i].name)) < 0)
            return NVML_ERROR_UNKNOWN;
        out[i].pid = (unsigned int)pid;
        out[i].memory = memory;
        out[i].gi = out[i].ci = NO_INSTANCE;
        unsigned long long gi = 0, ci = 0;
        int has_gi = process_key(text, i, "gpu_instance", found, sizeof(found)) >= 0;
        if (has_gi && number_of(found, &gi) != NVML_SUCCESS)
            return NVML_ERROR_UNKNOWN;
        int has_ci = process_key(text, i, "compute_instance", found, sizeof(found)) >= 0;
        if (has_ci && number_of(found, &ci) != NVML_SUCCESS)
            return NVML_ERROR_UNKNOWN;
        if (has_gi != has_ci || gi >= NO_INSTANCE || ci >= NO_INSTANCE)
            return NVML_ERROR_UNKNOWN;
        if (has_gi) {
            out[i].gi = (unsigned int)gi;
            out[i].ci = (unsigned int)ci;
        }
    }
    *count = (unsigned int)n;
    return NVML_SUCCESS;
}

nvmlReturn_t process_memory(nvmlDevice_t device, unsigned int gi, unsigned long long *all,
                            unsigned long long *in_gi)
{
    struct process procs[MAX_PROCESSES];
    unsigned int n = 0;
    nvmlReturn_t ret = processes_of(device, procs, &n);
    *all = *in_gi = 0;
    if (ret == NVML_ERROR_NOT_SUPPORTED) /* no place: no process known */
        return NVML_SUCCESS;
    for (unsigned int i = 0; ret == NVML_SUCCESS && i < n; i++) {
        *all += procs[i].memory;
        if (procs[i].gi == gi)
            *in_gi += procs[i].memory;
    }
    return ret;
}

/* The API's protocol: *infoCount in is the room of infos (NULL allowed with 0); with room
 * for all, they are written and *infoCount says how many; with too little, *infoCount says
 * how many there are, INSUFFICIENT_SIZE, and nothing else is written. graphics: none run. */
static nvmlReturn_t running(nvmlDevice_t device, unsigned int *infoCount, void *infos,
                            int v1, int graphics)
{
    struct process procs[MAX_PROCESSES];
    unsigned int n = 0;
    nvmlReturn_t ret = handle_check_any(device);
    if (ret == NVML_SUCCESS && device->mig) { /* its instance still there */
        struct mig_gpu *g = NULL;
        const struct mig_gi *gi;
        const struct mig_ci *ci;
        ret = mig_device_resolve(device, &g, &gi, &ci);
        free(g);
    }
    if (ret != NVML_SUCCESS)
        return ret;
    if (!infoCount || (*infoCount > 0 && !infos))
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = processes_of(device, procs, &n);
    if (ret == NVML_ERROR_NOT_SUPPORTED) { /* no place: still a GPU with no process known */
        char probe[BDF_SIZE];
        ret = gpu_info(device, "Bus Location", probe, sizeof(probe));
        n = 0;
    }
    if (ret != NVML_SUCCESS)
        return ret;
    if (graphics)
        n = 0;
    if (device->mig) { /* a MIG device: its compute instance's processes alone */
        unsigned int kept = 0;
        for (unsigned int i = 0; i < n; i++)
            if (procs[i].gi == device->gi && procs[i].ci == device->ci)
                procs[kept++] = procs[i];
        n = kept;
    }
    if (n > *infoCount) {
        *infoCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < n; i++) {
        if (v1) {
            nvmlProcessInfo_v1_t *info = (nvmlProcessInfo_v1_t *)infos + i;
            info->pid = procs[i].pid;
            info->usedGpuMemory = procs[i].memory;
        } else {
            nvmlProcessInfo_t *info = (nvmlProcessInfo_t *)infos + i;
            info->pid = procs[i].pid;
            info->usedGpuMemory = procs[i].memory;
            info->gpuInstanceId = procs[i].gi;
            info->computeInstanceId = procs[i].ci;
        }
    }
    *infoCount = n;
    return NVML_SUCCESS;
}

#define RUNNING(name, type, v1, graphics)                                                  \
    NVML_API nvmlReturn_t name(nvmlDevice_t device, unsigned int *infoCount, type *infos)  \
    {                                                                                      \
        return running(device, infoCount, infos, v1, graphics);                            \
    }

RUNNING(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_t, 0, 0)
RUNNING(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_t, 0, 0)
RUNNING(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t, 1, 0)
RUNNING(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t, 0, 1)
RUNNING(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_t, 0, 1)
RUNNING(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t, 1, 1)
RUNNING(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_t, 0, 1)
RUNNING(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_t, 0, 1)
RUNNING(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t, 1, 1)

/* Part i of n of a whole, the remainder to the first parts: the parts add up to the whole */
static unsigned int share(unsigned int whole, unsigned int n, unsigned int i)
{
    return whole / n + (i < whole % n ? 1 : 0);
}

/* The running processes' utilization: the GPU's (utilization_gpu and _memory of the place),
 * shared among them, as of now. A sample per process with some utilization, as NVML gives
 * one per process that had any in the last period; NOT_FOUND when none had any, or none since
 * lastSeenTimeStamp (microseconds of CLOCK_REALTIME). The protocol of the running lists'
 * (*processSamplesCount in is the room; INSUFFICIENT_SIZE with the count needed), with
 * utilization NULL allowed to ask the count, as nvidia-ml-py asks it. */
NVML_API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                      nvmlProcessUtilizationSample_t *utilization,
                                                      unsigned int *processSamplesCount,
                                                      unsigned long long lastSeenTimeStamp)
{
    struct process procs[MAX_PROCESSES];
    unsigned int n = 0, busy = 0, gpu = 0, memory = 0;
    struct timespec now;
    nvmlReturn_t ret = handle_check(device);
    if (ret != NVML_SUCCESS)
        return ret;
    if (!processSamplesCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    ret = processes_of(device, procs, &n);
    if (ret == NVML_SUCCESS && n > 0)
        ret = gpu_uint_out(device, "utilization_gpu", &gpu);
    if (ret == NVML_SUCCESS && n > 0)
        ret = gpu_uint_out(device, "utilization_memory", &memory);
    if (ret == NVML_ERROR_NOT_SUPPORTED) /* no place: no process known */
        n = 0;
    else if (ret != NVML_SUCCESS)
        return ret;
    clock_gettime(CLOCK_REALTIME, &now);
    unsigned long long stamp = (unsigned long long)now.tv_sec * 1000000ull
                               + (unsigned long long)now.tv_nsec / 1000ull;
    for (unsigned int i = 0; i < n; i++)
        busy += share(gpu, n, i) || share(memory, n, i);
    if (busy == 0 || lastSeenTimeStamp >= stamp)
        return NVML_ERROR_NOT_FOUND;
    if (!utilization || *processSamplesCount < busy) {
        *processSamplesCount = busy;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int out = 0;
    for (unsigned int i = 0; i < n; i++) {
        unsigned int sm = share(gpu, n, i), mem = share(memory, n, i);
        if (!sm && !mem)
            continue;
        utilization[out++] = (nvmlProcessUtilizationSample_t){
            .pid = procs[i].pid, .timeStamp = stamp, .smUtil = sm, .memUtil = mem};
    }
    *processSamplesCount = out;
    return NVML_SUCCESS;
}

/* A process's name: the real library reads /proc/<pid>; a simulated process has none there,
 * so the name is the one the place gives the pid on any GPU of the view. NOT_FOUND for a
 * pid no GPU runs. A name longer than length is cut to length - 1 characters, as NVML does. */
NVML_API nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    char bdfs[MAX_GPUS][BDF_SIZE];
    struct process procs[MAX_PROCESSES];
    unsigned int n = 0;
    nvmlReturn_t ret = view_check();
    if (ret != NVML_SUCCESS)
        return ret;
    if (!name || length == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    int gpus = gpus_list(bdfs, MAX_GPUS);
    for (int g = 0; g < gpus; g++) {
        nvmlDevice_t device = handle_of(bdfs[g]);
        if (!device || processes_of(device, procs, &n) != NVML_SUCCESS)
            continue;
        for (unsigned int i = 0; i < n; i++) {
            if (procs[i].pid != pid)
                continue;
            size_t len = strnlen(procs[i].name, length - 1);
            memcpy(name, procs[i].name, len);
            name[len] = '\0';
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}
