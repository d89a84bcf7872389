/* SPDX-License-Identifier: Apache-2.0 */
/* No file descriptor or memory leak over many calls of mokkafs's NVML (issue 39).
 * MOKKAFS_ROOT names the view (an h100 one); the first argument is the number of calls
 * (default 1,000,000). The calls go round the API a monitor polls, GPU after GPU: handles by
 * index, UUID and bus ID, names, PCI info, memory, use, temperature, power, clocks, topology,
 * NVLink, event sets made, registered, waited on and freed, error paths, and an
 * nvmlShutdown/nvmlInit cycle every CYCLE calls. After a warm-up of WARM calls the open file
 * descriptors must stay as many, and (unless "fds-only" is the second argument, as under
 * AddressSanitizer, whose quarantine holds freed memory) the heap's bytes in use (mallinfo2)
 * and the resident set must not grow past a small bound. Built two ways (native/Makefile):
 * nvmlleak against the library as the package builds it, nvmlleak_asan with its sources under
 * AddressSanitizer, whose LeakSanitizer reports at exit what was never freed. It prints
 * "checkpoint" lines, then "FAIL ..." lines and exit status 1 for what went wrong. */
#define _GNU_SOURCE
#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../nvml/nvml_api.h"
#include "../nvml/nvml_api_events.h"
#include "../nvml/nvml_api_links.h"
#include "expect.h"

#define MAX_GPUS 64
#define CYCLE 10000          /* calls between two nvmlShutdown/nvmlInit cycles */
#define WARM 20000           /* calls before the baseline */
#define CHECKPOINTS 10       /* measures after the warm-up */
#define HEAP_BOUND 65536     /* bytes the heap in use may grow by */
#define RSS_BOUND (1 << 20)  /* bytes the resident set may grow by */

struct gpu {
    nvmlDevice_t handle;
    char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
    char bus_id[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
};

static struct gpu gpus[MAX_GPUS];
static unsigned int count;
static unsigned long calls;

static void call(const char *what, nvmlReturn_t got, nvmlReturn_t want)
{
    calls++;
    if (got == want)
        return;
    if (failures < 20) /* the first few are said; the rest counted */
        expect(what, got, want);
    else
        failures++;
}

static long open_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    long n = 0;
    if (!dir)
        return -1;
    while (readdir(dir))
        n++;
    closedir(dir);
    return n; /* with ".", ".." and the directory's own: the same few each time */
}

static long long heap_in_use(void)
{
    struct mallinfo2 m = mallinfo2();
    return (long long)(m.uordblks + m.hblkhd);
}

static long long resident(void)
{
    long size = 0, pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &size, &pages) != 2)
        pages = -1;
    fclose(f);
    return pages < 0 ? -1 : (long long)pages * sysconf(_SC_PAGESIZE);
}

/* The GPUs, their UUIDs and bus IDs: at the start, and again after each nvmlInit */
static void enumerate(void)
{
    call("count", nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
    if (count > MAX_GPUS)
        count = MAX_GPUS;
    for (unsigned int i = 0; i < count; i++) {
        nvmlPciInfo_t pci;
        call("handle", nvmlDeviceGetHandleByIndex_v2(i, &gpus[i].handle), NVML_SUCCESS);
        call("uuid", nvmlDeviceGetUUID(gpus[i].handle, gpus[i].uuid, sizeof(gpus[i].uuid)),
             NVML_SUCCESS);
        call("pci", nvmlDeviceGetPciInfo_v3(gpus[i].handle, &pci), NVML_SUCCESS);
        memcpy(gpus[i].bus_id, pci.busId, sizeof(gpus[i].bus_id));
    }
}

/* One round of the calls on GPU i (and its neighbour, for the pairs) */
static void round_of(unsigned int i, unsigned long round)
{
    nvmlDevice_t h = gpus[i].handle, other = gpus[(i + 1) % count].handle, found = NULL;
    char text[NVML_DEVICE_NAME_BUFFER_SIZE];
    unsigned int value = 0, n = 0, link = (unsigned int)(round % 18);
    unsigned long long big = 0;
    unsigned long cpus[4];
    nvmlPciInfo_t pci;
    nvmlMemory_t memory;
    nvmlMemory_v2_t memory2 = {.version = nvmlMemory_v2};
    nvmlUtilization_t util;
    nvmlGpuTopologyLevel_t level;
    nvmlEnableState_t state;
    nvmlGpuP2PStatus_t p2p;
    nvmlGpuFabricInfoV_t fabric = {.version = nvmlGpuFabricInfo_v3};
    nvmlDevice_t near[MAX_GPUS];
    nvmlProcessInfo_t procs[4];
    if (round % 4 == 0) { /* the look-ups list every GPU: a monitor makes them less often */
        call("count", nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
        call("by index", nvmlDeviceGetHandleByIndex_v2(i, &found), NVML_SUCCESS);
        call("by uuid", nvmlDeviceGetHandleByUUID(gpus[i].uuid, &found), NVML_SUCCESS);
        call("by bus id", nvmlDeviceGetHandleByPciBusId_v2(gpus[i].bus_id, &found),
             NVML_SUCCESS);
        call("by an unknown uuid", nvmlDeviceGetHandleByUUID("GPU-none", &found),
             NVML_ERROR_NOT_FOUND);
        n = MAX_GPUS;
        call("nearest", nvmlDeviceGetTopologyNearestGpus(h, NVML_TOPOLOGY_SYSTEM, &n, near),
             NVML_SUCCESS);
    }
    call("name", nvmlDeviceGetName(h, text, sizeof(text)), NVML_SUCCESS);
    call("uuid", nvmlDeviceGetUUID(h, text, sizeof(text)), NVML_SUCCESS);
    call("short name", nvmlDeviceGetName(h, text, 4), NVML_ERROR_INSUFFICIENT_SIZE);
    call("pci", nvmlDeviceGetPciInfo_v3(h, &pci), NVML_SUCCESS);
    call("link generation", nvmlDeviceGetCurrPcieLinkGeneration(h, &value), NVML_SUCCESS);
    call("cpus", nvmlDeviceGetCpuAffinity(h, 4, cpus), NVML_SUCCESS);
    call("memory", nvmlDeviceGetMemoryInfo(h, &memory), NVML_SUCCESS);
    call("memory v2", nvmlDeviceGetMemoryInfo_v2(h, &memory2), NVML_SUCCESS);
    call("utilization", nvmlDeviceGetUtilizationRates(h, &util), NVML_SUCCESS);
    call("temperature", nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &value), NVML_SUCCESS);
    call("power", nvmlDeviceGetPowerUsage(h, &value), NVML_SUCCESS);
    call("power limit", nvmlDeviceGetEnforcedPowerLimit(h, &value), NVML_SUCCESS);
    call("energy", nvmlDeviceGetTotalEnergyConsumption(h, &big), NVML_SUCCESS);
    call("sm clock", nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, &value), NVML_SUCCESS);
    call("max memory clock", nvmlDeviceGetMaxClockInfo(h, NVML_CLOCK_MEM, &value), NVML_SUCCESS);
    call("fan", nvmlDeviceGetFanSpeed(h, &value), NVML_ERROR_NOT_SUPPORTED);
    call("pstate", nvmlDeviceGetPerformanceState(h, &value), NVML_SUCCESS);
    n = 4;
    call("processes", nvmlDeviceGetComputeRunningProcesses_v3(h, &n, procs), NVML_SUCCESS);
    call("common ancestor", nvmlDeviceGetTopologyCommonAncestor(h, other, &level), NVML_SUCCESS);
    call("pci p2p", nvmlDeviceGetP2PStatus(h, other, NVML_P2P_CAPS_INDEX_PCI, &p2p),
         h == other ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS);
    if (round % 16 == 0) /* reads every GPU's NVLinks and switches: about 0.7 ms */
        call("nvlink p2p", nvmlDeviceGetP2PStatus(h, other, NVML_P2P_CAPS_INDEX_NVLINK, &p2p),
             h == other ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS);
    call("nvlink state", nvmlDeviceGetNvLinkState(h, link, &state), NVML_SUCCESS);
    call("nvlink remote", nvmlDeviceGetNvLinkRemotePciInfo_v2(h, link, &pci), NVML_SUCCESS);
    call("fabric", nvmlDeviceGetGpuFabricInfoV(h, &fabric), NVML_ERROR_NOT_SUPPORTED);
    if (round % 4 == 0) { /* an event set's life: made, registered, waited on, freed */
        nvmlEventSet_t set = NULL;
        nvmlEventData_t data;
        call("event set", nvmlEventSetCreate(&set), NVML_SUCCESS);
        call("supported events", nvmlDeviceGetSupportedEventTypes(h, &big), NVML_SUCCESS);
        call("register", nvmlDeviceRegisterEvents(h, nvmlEventTypeXidCriticalError, set),
             NVML_SUCCESS);
        call("wait", nvmlEventSetWait_v2(set, &data, 0), NVML_ERROR_TIMEOUT);
        call("free", nvmlEventSetFree(set), NVML_SUCCESS);
    }
}

int main(int argc, char **argv)
{
    unsigned long total = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    int memory = !(argc > 2 && strcmp(argv[2], "fds-only") == 0);
    unsigned long next_cycle = CYCLE, step = (total > WARM ? total - WARM : 1) / CHECKPOINTS;
    unsigned long next_check = WARM, round = 0;
    long fds0 = -1;
    long long heap0 = 0, rss0 = 0, heap_most = 0, rss_most = 0;
    int checkpoints = 0;
    call("init", nvmlInit_v2(), NVML_SUCCESS);
    enumerate();
    printf("gpus\t%u\n", count); /* stdout's buffer is made here, before the baseline */
    if (count == 0) {
        printf("FAIL no GPU in the view\n");
        return 1;
    }
    while (calls < total) {
        for (unsigned int i = 0; i < count && calls < total; i++)
            round_of(i, round);
        round++;
        if (calls >= next_cycle) {
            next_cycle += CYCLE;
            call("shutdown", nvmlShutdown(), NVML_SUCCESS);
            call("init again", nvmlInit_v2(), NVML_SUCCESS);
            enumerate();
        }
        if (calls < next_check)
            continue;
        long fds = open_fds();
        long long heap = heap_in_use(), rss = resident();
        if (fds0 < 0) { /* the warm-up is over: the baseline */
            fds0 = fds, heap0 = heap, rss0 = rss;
        } else {
            checkpoints++;
            heap_most = heap - heap0 > heap_most ? heap - heap0 : heap_most;
            rss_most = rss - rss0 > rss_most ? rss - rss0 : rss_most;
            if (fds != fds0)
                printf("FAIL open descriptors after %lu calls: %ld, %ld after the warm-up\n",
                       calls, fds, fds0), failures++;
            if (memory && heap - heap0 > HEAP_BOUND)
                printf("FAIL heap in use after %lu calls: %lld bytes more than after the "
                       "warm-up\n", calls, heap - heap0), failures++;
            if (memory && rss - rss0 > RSS_BOUND)
                printf("FAIL resident set after %lu calls: %lld bytes more than after the "
                       "warm-up\n", calls, rss - rss0), failures++;
        }
        printf("checkpoint\t%lu\t%ld\t%lld\t%lld\n", calls, fds, heap, rss);
        next_check += step ? step : 1;
    }
    call("last shutdown", nvmlShutdown(), NVML_SUCCESS);
    if (checkpoints == 0)
        printf("FAIL no checkpoint after the warm-up (%lu calls)\n", calls), failures++;
    printf("calls\t%lu\tgrowth\t%lld\t%lld\n", calls, heap_most, rss_most);
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
