/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVML as a consumer uses it, timed; the library dlopen'ed, as nvidia-ml-py and go-nvml load it:
 *   nvml_bench LIBRARY enum ROUNDS
 *     Reads its own /proc/self/smaps_rollup (Rss, Pss) before the dlopen and after nvmlInit_v2
 *     and one enumeration, then times ROUNDS rounds of nvmlInit_v2, every GPU's handle by
 *     index, name, UUID, PCI info, memory info and MIG devices (handle, UUID, memory), and
 *     nvmlShutdown. Prints one JSON line.
 *   nvml_bench LIBRARY wait EVENTS TIMEOUT_MS
 *     Registers every GPU for Xid events in one set, prints "ready", then waits EVENTS times
 *     in nvmlEventSetWait_v2 for up to TIMEOUT_MS each: "event XID NS" or "timeout NS" a wait,
 *     NS the CLOCK_MONOTONIC time it returned (Python's time.monotonic()).
 * The view is MOKKAFS_ROOT's, as for every consumer. Exit status 1 on an NVML error.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../native/nvml/nvml_api.h"

#define MAX_ROUNDS 100000

static nvmlReturn_t (*init)(void);
static nvmlReturn_t (*shutdown_)(void);
static nvmlReturn_t (*count_)(unsigned int *);
static nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
static nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
static nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
static nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t *);
static nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
static nvmlReturn_t (*mig_max)(nvmlDevice_t, unsigned int *);
static nvmlReturn_t (*mig_by_index)(nvmlDevice_t, unsigned int, nvmlDevice_t *);
static nvmlReturn_t (*set_create)(nvmlEventSet_t *);
static nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
static nvmlReturn_t (*set_wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static void check(const char *what, nvmlReturn_t r)
{
    if (r != NVML_SUCCESS) {
        fprintf(stderr, "%s: NVML error %d\n", what, (int)r);
        exit(1);
    }
}

static void *symbol(void *lib, const char *sym)
{
    void *p = dlsym(lib, sym);
    if (!p) {
        fprintf(stderr, "no %s in the library\n", sym);
        exit(1);
    }
    return p;
}

/* Rss and Pss of this process, in KiB */
static void rollup(long *rss, long *pss)
{
    char line[256];
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    *rss = *pss = -1;
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "Rss:", 4) == 0)
            *rss = atol(line + 4);
        else if (strncmp(line, "Pss:", 4) == 0)
            *pss = atol(line + 4);
    }
    fclose(f);
}

/* Every GPU's identity, PCI, memory and MIG devices; the MIG devices seen */
static unsigned int enumerate(unsigned int *gpus)
{
    unsigned int n = 0, migs = 0;
    check("count", count_(&n));
    for (unsigned int i = 0; i < n; i++) {
        nvmlDevice_t h;
        char text[NVML_DEVICE_UUID_BUFFER_SIZE];
        nvmlPciInfo_t pci;
        nvmlMemory_t mem;
        unsigned int max = 0;
        check("handle", by_index(i, &h));
        check("name", name(h, text, sizeof(text)));
        check("uuid", uuid(h, text, sizeof(text)));
        check("pci", pci_info(h, &pci));
        check("memory", memory(h, &mem));
        if (mig_max(h, &max) != NVML_SUCCESS)
            max = 0; /* a GPU without MIG */
        for (unsigned int k = 0; k < max; k++) {
            nvmlDevice_t m;
            if (mig_by_index(h, k, &m) != NVML_SUCCESS)
                continue; /* no MIG device at this index */
            check("mig uuid", uuid(m, text, sizeof(text)));
            check("mig memory", memory(m, &mem));
            migs++;
        }
    }
    *gpus = n;
    return migs;
}

/* ROUNDS timed rounds; RSS0, PSS0: the process's memory before the dlopen */
static int bench_enum(int rounds, long rss0, long pss0)
{
    long long *ns = calloc((size_t)rounds + 1, sizeof(*ns)), total = 0;
    unsigned int gpus = 0, migs;
    long rss1, pss1;
    if (!ns)
        return 1;
    check("init", init());
    migs = enumerate(&gpus);
    rollup(&rss1, &pss1);
    check("shutdown", shutdown_());
    for (int r = 0; r < rounds; r++) {
        long long t0 = now_ns();
        check("init", init());
        enumerate(&gpus);
        check("shutdown", shutdown_());
        ns[r] = now_ns() - t0;
        total += ns[r];
    }
    qsort(ns, (size_t)rounds, sizeof(*ns), cmp);
    printf("{\"rss_kib_before\": %ld, \"pss_kib_before\": %ld, \"gpus\": %u, "
           "\"mig_devices\": %u, \"rounds\": %d, \"p50_us\": %.3f, \"mean_us\": %.3f, "
           "\"rss_kib_after\": %ld, \"pss_kib_after\": %ld}\n",
           rss0, pss0, gpus, migs, rounds, rounds ? ns[rounds / 2] / 1e3 : 0.0,
           rounds ? total / 1e3 / rounds : 0.0, rss1, pss1);
    free(ns);
    return 0;
}

static int bench_wait(int events, unsigned int timeout_ms)
{
    nvmlEventSet_t set;
    unsigned int n = 0;
    check("init", init());
    check("set", set_create(&set));
    check("count", count_(&n));
    for (unsigned int i = 0; i < n; i++) {
        nvmlDevice_t h;
        check("handle", by_index(i, &h));
        check("register", register_events(h, nvmlEventTypeXidCriticalError, set));
    }
    printf("ready\n");
    fflush(stdout);
    for (int e = 0; e < events; e++) {
        nvmlEventData_t data;
        nvmlReturn_t r = set_wait(set, &data, timeout_ms);
        if (r == NVML_ERROR_TIMEOUT)
            printf("timeout %lld\n", now_ns());
        else {
            check("wait", r);
            printf("event %llu %lld\n", data.eventData, now_ns());
        }
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    long rss0, pss0;
    void *lib;
    if (argc < 4 || (strcmp(argv[2], "wait") == 0 && argc < 5)) {
        fprintf(stderr, "usage: nvml_bench LIBRARY enum ROUNDS | LIBRARY wait EVENTS TIMEOUT_MS\n");
        return 2;
    }
    rollup(&rss0, &pss0);
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    *(void **)&init = symbol(lib, "nvmlInit_v2");
    *(void **)&shutdown_ = symbol(lib, "nvmlShutdown");
    *(void **)&count_ = symbol(lib, "nvmlDeviceGetCount_v2");
    *(void **)&by_index = symbol(lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&name = symbol(lib, "nvmlDeviceGetName");
    *(void **)&uuid = symbol(lib, "nvmlDeviceGetUUID");
    *(void **)&pci_info = symbol(lib, "nvmlDeviceGetPciInfo_v3");
    *(void **)&memory = symbol(lib, "nvmlDeviceGetMemoryInfo");
    *(void **)&mig_max = symbol(lib, "nvmlDeviceGetMaxMigDeviceCount");
    *(void **)&mig_by_index = symbol(lib, "nvmlDeviceGetMigDeviceHandleByIndex");
    *(void **)&set_create = symbol(lib, "nvmlEventSetCreate");
    *(void **)&register_events = symbol(lib, "nvmlDeviceRegisterEvents");
    *(void **)&set_wait = symbol(lib, "nvmlEventSetWait_v2");
    if (strcmp(argv[2], "enum") == 0) {
        int rounds = atoi(argv[3]);
        if (rounds < 0 || rounds > MAX_ROUNDS)
            return 2;
        return bench_enum(rounds, rss0, pss0);
    }
    if (strcmp(argv[2], "wait") == 0)
        return bench_wait(atoi(argv[3]), (unsigned int)atoi(argv[4]));
    return 2;
}
