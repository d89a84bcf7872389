/* SPDX-License-Identifier: Apache-2.0 */
/* mokkafs's NVML driven from C, built with the library's sources under AddressSanitizer and
 * UndefinedBehaviorSanitizer (make nvmltest). MOKKAFS_ROOT names the view. It prints one
 * "gpu" line per GPU (tests/nvml/test_nvml_c.py checks them against the view), checks the
 * bad-input answers and the lifecycle, and calls from 8 threads at once; "FAIL ..." lines
 * and exit status 1 say what went wrong. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../nvml/nvml_api.h"
#include "expect.h"

/* A function the library does not implement (a stub): any signature is safe */
nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, void *utilization);

#define THREADS 8
#define ROUNDS 200

static void same(const char *what, int equal)
{
    expect(what, equal ? NVML_SUCCESS : NVML_ERROR_UNKNOWN, NVML_SUCCESS);
}

/* What NVML's own place (run/mokkafs-nvml) answers: one "values" line, then bad input */
static void print_values(unsigned int i, nvmlDevice_t h)
{
    unsigned int arch = 0, brand = 0, clocks[6] = {0}, power[3] = {0}, temp = 0, pstate = 0;
    unsigned int persistence = 0, compute = 0, ecc[2] = {0}, fan = 0, count = 4;
    int major = 0, minor = 0;
    unsigned long long energy = 0;
    char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE], part[NVML_DEVICE_PART_NUMBER_BUFFER_SIZE];
    nvmlMemory_t v1;
    nvmlMemory_v2_t v2 = {.version = nvmlMemory_v2};
    nvmlUtilization_t util;
    nvmlTemperature_t tv = {.version = nvmlTemperature_v1, .sensorType = NVML_TEMPERATURE_GPU};
    expect("architecture", nvmlDeviceGetArchitecture(h, &arch), NVML_SUCCESS);
    expect("brand", nvmlDeviceGetBrand(h, &brand), NVML_SUCCESS);
    expect("compute capability", nvmlDeviceGetCudaComputeCapability(h, &major, &minor),
           NVML_SUCCESS);
    expect("serial", nvmlDeviceGetSerial(h, serial, sizeof(serial)), NVML_SUCCESS);
    expect("part number", nvmlDeviceGetBoardPartNumber(h, part, sizeof(part)), NVML_SUCCESS);
    expect("memory", nvmlDeviceGetMemoryInfo(h, &v1), NVML_SUCCESS);
    expect("memory v2", nvmlDeviceGetMemoryInfo_v2(h, &v2), NVML_SUCCESS);
    for (unsigned int c = 0; c < 3; c++) {
        expect("clock", nvmlDeviceGetClockInfo(h, c, &clocks[c]), NVML_SUCCESS);
        expect("max clock", nvmlDeviceGetMaxClockInfo(h, c, &clocks[3 + c]), NVML_SUCCESS);
    }
    expect("power", nvmlDeviceGetPowerUsage(h, &power[0]), NVML_SUCCESS);
    expect("power limit", nvmlDeviceGetPowerManagementLimit(h, &power[1]), NVML_SUCCESS);
    expect("enforced limit", nvmlDeviceGetEnforcedPowerLimit(h, &power[2]), NVML_SUCCESS);
    expect("energy", nvmlDeviceGetTotalEnergyConsumption(h, &energy), NVML_SUCCESS);
    expect("temperature", nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &temp), NVML_SUCCESS);
    expect("temperature v", nvmlDeviceGetTemperatureV(h, &tv), NVML_SUCCESS);
    same("temperature v is the same", tv.temperature == (int)temp);
    expect("utilization", nvmlDeviceGetUtilizationRates(h, &util), NVML_SUCCESS);
    expect("persistence", nvmlDeviceGetPersistenceMode(h, &persistence), NVML_SUCCESS);
    expect("compute mode", nvmlDeviceGetComputeMode(h, &compute), NVML_SUCCESS);
    expect("ecc", nvmlDeviceGetEccMode(h, &ecc[0], &ecc[1]), NVML_SUCCESS);
    expect("pstate", nvmlDeviceGetPerformanceState(h, &pstate), NVML_SUCCESS);
    printf("values\t%u\t%u\t%u\t%d.%d\t%s\t%s\t%llu,%llu,%llu\t%llu,%llu,%llu,%llu"
           "\t%u,%u,%u,%u,%u,%u\t%u,%u,%u\t%llu\t%u\t%u,%u\t%u\t%u\t%u,%u\t%u\n",
           i, arch, brand, major, minor, serial, part, v1.total, v1.free, v1.used, v2.total,
           v2.reserved, v2.free, v2.used, clocks[0], clocks[1], clocks[2], clocks[3], clocks[4],
           clocks[5], power[0], power[1], power[2], energy, temp, util.gpu, util.memory,
           persistence, compute, ecc[0], ecc[1], pstate);

    expect("fanless", nvmlDeviceGetFanSpeed(h, &fan), NVML_ERROR_NOT_SUPPORTED);
    expect("video clock", nvmlDeviceGetClockInfo(h, NVML_CLOCK_VIDEO, &temp),
           NVML_ERROR_NOT_SUPPORTED);
    expect("no such clock", nvmlDeviceGetMaxClockInfo(h, 9, &temp), NVML_ERROR_INVALID_ARGUMENT);
    expect("no such sensor", nvmlDeviceGetTemperature(h, 1, &temp), NVML_ERROR_INVALID_ARGUMENT);
    v2.version = 1;
    expect("memory v2 of another version", nvmlDeviceGetMemoryInfo_v2(h, &v2),
           NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    expect("NULL memory", nvmlDeviceGetMemoryInfo(h, NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL minor of the capability", nvmlDeviceGetCudaComputeCapability(h, &major, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL pending", nvmlDeviceGetEccMode(h, &ecc[0], NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL power", nvmlDeviceGetPowerUsage(h, NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("no such ECC error type", nvmlDeviceGetTotalEccErrors(h, 2, 0, &energy),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL ECC count", nvmlDeviceGetTotalEccErrors(h, 0, 1, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("no such memory location", nvmlDeviceGetMemoryErrorCounter(h, 0, 0, 9, &energy),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL failure", nvmlDeviceGetRemappedRows(h, &temp, &temp, &temp, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL SRAM count", nvmlDeviceGetMemoryErrorCounter(h, 0, 0, 7, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    nvmlEccSramErrorStatus_v1_t sram = {.version = nvmlEccSramErrorStatus_v1 + 1};
    expect("SRAM status of another version", nvmlDeviceGetSramEccErrorStatus(h, &sram),
           NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    expect("NULL SRAM status", nvmlDeviceGetSramEccErrorStatus(h, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    sram = (nvmlEccSramErrorStatus_v1_t){.version = nvmlEccSramErrorStatus_v1, .volatileCor = 7};
    expect("SRAM status", nvmlDeviceGetSramEccErrorStatus(h, &sram), NVML_SUCCESS);
    same("no SRAM error", sram.volatileCor == 0 && sram.bThresholdExceeded == 0
                          && sram.version == nvmlEccSramErrorStatus_v1);
    count = 1;
    expect("room for pages, no array", nvmlDeviceGetRetiredPages(h, 1, &count, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    count = 0;
    expect("no such retirement cause", nvmlDeviceGetRetiredPages_v2(h, 2, &count, NULL, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL reasons", nvmlDeviceGetCurrentClocksEventReasons(h, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL bar1", nvmlDeviceGetBAR1MemoryInfo(h, NULL), NVML_ERROR_INVALID_ARGUMENT);
    nvmlBAR1Memory_t bar1;
    expect("bar1", nvmlDeviceGetBAR1MemoryInfo(h, &bar1), NVML_SUCCESS);
    same("bar1: all of it free", bar1.bar1Total > 0 && bar1.bar1Free == bar1.bar1Total
                                     && bar1.bar1Used == 0);
    expect("short serial", nvmlDeviceGetSerial(h, serial, 3), NVML_ERROR_INSUFFICIENT_SIZE);
    count = 2;
    expect("room for processes, no array",
           nvmlDeviceGetGraphicsRunningProcesses_v3(h, &count, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
}

/* The running processes: one "procs" line (pid:memory:name each), then the count-in/out
 * protocol, the older layouts, the kinds that run none, and the names */
static void processes(unsigned int i, nvmlDevice_t h)
{
    nvmlProcessInfo_t procs[8], again[8];
    nvmlProcessInfo_v1_t v1[8];
    unsigned int count = 8, n = 0, m = 8;
    char name[80];
    expect("processes", nvmlDeviceGetComputeRunningProcesses_v3(h, &count, procs), NVML_SUCCESS);
    printf("procs\t%u\t%u", i, count);
    for (unsigned int p = 0; p < count; p++) {
        expect("process name", nvmlSystemGetProcessName(procs[p].pid, name, sizeof(name)),
               NVML_SUCCESS);
        same("no instance", procs[p].gpuInstanceId == 0xFFFFFFFFu
                                && procs[p].computeInstanceId == 0xFFFFFFFFu);
        printf("%s%u:%llu:%s", p ? "," : "\t", procs[p].pid, procs[p].usedGpuMemory, name);
    }
    printf("\n");
    expect("NULL count", nvmlDeviceGetComputeRunningProcesses_v3(h, NULL, procs),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("how many", nvmlDeviceGetComputeRunningProcesses_v3(h, &n, NULL),
           count ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS);
    same("how many is the count", n == count);
    if (count > 0) {
        n = count - 1;
        memset(again, 0x5a, sizeof(again));
        expect("short buffer", nvmlDeviceGetComputeRunningProcesses_v3(h, &n, again),
               NVML_ERROR_INSUFFICIENT_SIZE);
        same("short buffer: the count, nothing written", n == count && again[0].pid == 0x5a5a5a5a);
        expect("short name", nvmlSystemGetProcessName(procs[0].pid, name, 3), NVML_SUCCESS);
        same("short name is cut", strlen(name) <= 2);
    }
    expect("v2", nvmlDeviceGetComputeRunningProcesses_v2(h, &m, again), NVML_SUCCESS);
    same("v2 is v3", m == count && (!m || (again[m - 1].pid == procs[m - 1].pid
                                          && again[m - 1].usedGpuMemory
                                                 == procs[m - 1].usedGpuMemory)));
    m = 8;
    expect("v1", nvmlDeviceGetComputeRunningProcesses(h, &m, v1), NVML_SUCCESS);
    same("v1 is v3", m == count && (!m || (v1[m - 1].pid == procs[m - 1].pid
                                          && v1[m - 1].usedGpuMemory
                                                 == procs[m - 1].usedGpuMemory)));
    m = 8;
    expect("graphics", nvmlDeviceGetGraphicsRunningProcesses_v3(h, &m, again), NVML_SUCCESS);
    same("no graphics process", m == 0);
    m = 0;
    expect("MPS", nvmlDeviceGetMPSComputeRunningProcesses_v3(h, &m, NULL), NVML_SUCCESS);
    /* their utilization: one "samples" line (pid:sm:memory each), and the protocol */
    nvmlProcessUtilizationSample_t samples[8];
    unsigned int s = 0;
    nvmlReturn_t r = nvmlDeviceGetProcessUtilization(h, NULL, &s, 0);
    printf("samples\t%u", i);
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
        same("a sample per process at most", s > 0 && s <= count);
        m = s;
        expect("samples", nvmlDeviceGetProcessUtilization(h, samples, &m, 0), NVML_SUCCESS);
        same("samples: as many as asked", m == s);
        for (unsigned int p = 0; p < m; p++) {
            same("sampled now", samples[p].timeStamp > 0 && samples[p].encUtil == 0
                                    && samples[p].decUtil == 0);
            printf("%s%u:%u:%u", p ? "," : "\t", samples[p].pid, samples[p].smUtil,
                   samples[p].memUtil);
        }
        expect("no sample since", nvmlDeviceGetProcessUtilization(h, samples, &m, ~0ull),
               NVML_ERROR_NOT_FOUND);
        m = s - 1;
        expect("short samples", nvmlDeviceGetProcessUtilization(h, samples, &m, 0),
               NVML_ERROR_INSUFFICIENT_SIZE);
        same("short samples: the count", m == s);
    } else {
        expect("no process with utilization", r, NVML_ERROR_NOT_FOUND);
    }
    printf("\n");
    expect("NULL sample count", nvmlDeviceGetProcessUtilization(h, samples, NULL, 0),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL name", nvmlSystemGetProcessName(1, NULL, 8), NVML_ERROR_INVALID_ARGUMENT);
    expect("no room for a name", nvmlSystemGetProcessName(1, name, 0),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("no such process", nvmlSystemGetProcessName(0xFFFFFFF0u, name, sizeof(name)),
           NVML_ERROR_NOT_FOUND);
}

static void print_gpu(unsigned int i, nvmlDevice_t h)
{
    char name[NVML_DEVICE_NAME_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
    unsigned int minor = 0, cg = 0, cw = 0, mg = 0, mw = 0, numa = 0, index = 99;
    unsigned long cpus[4] = {0};
    nvmlPciInfo_t pci;
    expect("name", nvmlDeviceGetName(h, name, sizeof(name)), NVML_SUCCESS);
    expect("uuid", nvmlDeviceGetUUID(h, uuid, sizeof(uuid)), NVML_SUCCESS);
    expect("minor", nvmlDeviceGetMinorNumber(h, &minor), NVML_SUCCESS);
    expect("pci", nvmlDeviceGetPciInfo_v3(h, &pci), NVML_SUCCESS);
    expect("index", nvmlDeviceGetIndex(h, &index), NVML_SUCCESS);
    same("index is the handle's", index == i);
    expect("current gen", nvmlDeviceGetCurrPcieLinkGeneration(h, &cg), NVML_SUCCESS);
    expect("current width", nvmlDeviceGetCurrPcieLinkWidth(h, &cw), NVML_SUCCESS);
    expect("max gen", nvmlDeviceGetMaxPcieLinkGeneration(h, &mg), NVML_SUCCESS);
    expect("max width", nvmlDeviceGetMaxPcieLinkWidth(h, &mw), NVML_SUCCESS);
    expect("numa", nvmlDeviceGetNumaNodeId(h, &numa), NVML_SUCCESS);
    expect("cpus", nvmlDeviceGetCpuAffinity(h, 4, cpus), NVML_SUCCESS);
    printf("gpu\t%u\t%s\t%s\t%s\t%s\t%u\t%08x\t%08x\t%u\t%u\t%u\t%u\t%u\t%lx,%lx,%lx,%lx\n", i,
           pci.busId, pci.busIdLegacy, name, uuid, minor, pci.pciDeviceId, pci.pciSubSystemId,
           cg, cw, mg, mw, numa, cpus[0], cpus[1], cpus[2], cpus[3]);

    nvmlDevice_t again = NULL;
    expect("by uuid", nvmlDeviceGetHandleByUUID(uuid, &again), NVML_SUCCESS);
    same("by uuid is the same handle", again == h);
    expect("by bus id", nvmlDeviceGetHandleByPciBusId_v2(pci.busId, &again), NVML_SUCCESS);
    same("by bus id is the same handle", again == h);
    expect("by legacy bus id", nvmlDeviceGetHandleByPciBusId(pci.busIdLegacy, &again),
           NVML_SUCCESS);
    same("by legacy bus id is the same handle", again == h);
    if (pci.domain == 0) { /* the short spelling, lowercase, means domain 0 */
        char bus_id[16];
        snprintf(bus_id, sizeof(bus_id), "%02x:%02x.0", pci.bus, pci.device);
        expect("by short bus id", nvmlDeviceGetHandleByPciBusId(bus_id, &again), NVML_SUCCESS);
        same("by short bus id is the same handle", again == h);
    }

    char tiny[4];
    expect("short name buffer", nvmlDeviceGetName(h, tiny, sizeof(tiny)),
           NVML_ERROR_INSUFFICIENT_SIZE);
    expect("uuid without room for its NUL",
           nvmlDeviceGetUUID(h, uuid, (unsigned int)strlen(uuid)), NVML_ERROR_INSUFFICIENT_SIZE);
    expect("NULL name", nvmlDeviceGetName(h, NULL, 64), NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL pci", nvmlDeviceGetPciInfo_v3(h, NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL minor", nvmlDeviceGetMinorNumber(h, NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL width", nvmlDeviceGetCurrPcieLinkWidth(h, NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("zero cpu set", nvmlDeviceGetCpuAffinity(h, 0, cpus), NVML_ERROR_INVALID_ARGUMENT);
    char memory[64];
    expect("a stub", nvmlDeviceGetEncoderUtilization(h, memory), NVML_ERROR_NOT_SUPPORTED);
    print_values(i, h);
    processes(i, h);
}

static void *hammer(void *arg)
{
    const char *want = arg; /* the last GPU's UUID */
    for (int r = 0; r < ROUNDS; r++) {
        unsigned int count = 0;
        nvmlDevice_t h;
        char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
        expect("threads: count", nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
        if (count == 0)
            continue;
        expect("threads: handle", nvmlDeviceGetHandleByIndex_v2(count - 1, &h), NVML_SUCCESS);
        expect("threads: uuid", nvmlDeviceGetUUID(h, uuid, sizeof(uuid)), NVML_SUCCESS);
        same("threads: the same uuid", strcmp(uuid, want) == 0);
    }
    return NULL;
}

static void bad_input(unsigned int count)
{
    nvmlDevice_t h;
    struct nvmlDevice_st *forged = (struct nvmlDevice_st *)&h;
    char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    expect("NULL count", nvmlDeviceGetCount_v2(NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL handle out", nvmlDeviceGetHandleByIndex_v2(0, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("index past the end", nvmlDeviceGetHandleByIndex_v2(count, &h),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL device", nvmlDeviceGetUUID(NULL, text, sizeof(text)),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("a handle not ours", nvmlDeviceGetName(forged, text, sizeof(text)),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL uuid", nvmlDeviceGetHandleByUUID(NULL, &h), NVML_ERROR_INVALID_ARGUMENT);
    expect("unknown uuid", nvmlDeviceGetHandleByUUID("GPU-none", &h), NVML_ERROR_NOT_FOUND);
    expect("malformed bus id", nvmlDeviceGetHandleByPciBusId_v2("zz", &h),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("absent bus id", nvmlDeviceGetHandleByPciBusId_v2("0000:ff:1f.7", &h),
           NVML_ERROR_NOT_FOUND);
    expect("short driver version", nvmlSystemGetDriverVersion(text, 2),
           NVML_ERROR_INSUFFICIENT_SIZE);
    expect("NULL cuda version", nvmlSystemGetCudaDriverVersion_v2(NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    same("an unknown code's string", strcmp(nvmlErrorString(12345), "Unknown Error") == 0);
}

static void *wait_briefly(void *set)
{
    nvmlEventData_t data;
    expect("threads: a wait with nothing to come", nvmlEventSetWait_v2(set, &data, 50),
           NVML_ERROR_TIMEOUT);
    return NULL;
}

/* Event sets: bad input, waits that time out (two threads on one set), the sets freed */
static void events(nvmlDevice_t h)
{
    nvmlEventSet_t set = NULL, other = NULL;
    nvmlEventData_t data;
    unsigned long long types = 0;
    pthread_t threads[2];
    expect("NULL set out", nvmlEventSetCreate(NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("event set", nvmlEventSetCreate(&set), NVML_SUCCESS);
    expect("another event set", nvmlEventSetCreate(&other), NVML_SUCCESS);
    expect("supported events", nvmlDeviceGetSupportedEventTypes(h, &types), NVML_SUCCESS);
    same("Xid events are supported", (types & nvmlEventTypeXidCriticalError) != 0);
    expect("NULL types", nvmlDeviceGetSupportedEventTypes(h, NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("register", nvmlDeviceRegisterEvents(h, types, set), NVML_SUCCESS);
    expect("register a type the API lacks", nvmlDeviceRegisterEvents(h, 1ULL << 40, set),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("register on no set", nvmlDeviceRegisterEvents(h, types, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("register a type not supported", nvmlDeviceRegisterEvents(h, 0x4, set),
           NVML_ERROR_NOT_SUPPORTED);
    expect("NULL data", nvmlEventSetWait_v2(set, NULL, 0), NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL data, old name", nvmlEventSetWait(set, NULL, 0), NVML_ERROR_INVALID_ARGUMENT);
    expect("nothing came", nvmlEventSetWait_v2(set, &data, 0), NVML_ERROR_TIMEOUT);
    expect("nothing came, old name", nvmlEventSetWait(other, &data, 10), NVML_ERROR_TIMEOUT);
    for (int t = 0; t < 2; t++)
        pthread_create(&threads[t], NULL, wait_briefly, set);
    for (int t = 0; t < 2; t++)
        pthread_join(threads[t], NULL);
    expect("free", nvmlEventSetFree(set), NVML_SUCCESS);
    expect("free again", nvmlEventSetFree(set), NVML_ERROR_INVALID_ARGUMENT);
    expect("wait on a freed set", nvmlEventSetWait_v2(set, &data, 0),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("free the other", nvmlEventSetFree(other), NVML_SUCCESS);
}

int main(void)
{
    unsigned int count = 0;
    nvmlDevice_t first = NULL;
    char version[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = ""; /* printed even when a call fails */
    char uuid[NVML_DEVICE_UUID_BUFFER_SIZE] = "";
    int cuda = 0;
    expect("count before init", nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
    expect("shutdown before init", nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
    expect("init", nvmlInit_v2(), NVML_SUCCESS);
    expect("init again", nvmlInitWithFlags(0), NVML_SUCCESS);
    expect("driver version", nvmlSystemGetDriverVersion(version, sizeof(version)), NVML_SUCCESS);
    printf("driver\t%s\n", version);
    expect("nvml version", nvmlSystemGetNVMLVersion(version, sizeof(version)), NVML_SUCCESS);
    expect("cuda version", nvmlSystemGetCudaDriverVersion(&cuda), NVML_SUCCESS);
    printf("versions\t%s\t%d\n", version, cuda);
    expect("count", nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
    for (unsigned int i = 0; i < count; i++) {
        nvmlDevice_t h = NULL;
        expect("handle", nvmlDeviceGetHandleByIndex_v2(i, &h), NVML_SUCCESS);
        if (h)
            print_gpu(i, h);
        if (i == 0)
            first = h;
    }
    bad_input(count);
    if (first)
        events(first);
    if (count > 0) {
        nvmlDevice_t last;
        pthread_t threads[THREADS];
        expect("last", nvmlDeviceGetHandleByIndex(count - 1, &last), NVML_SUCCESS);
        expect("last uuid", nvmlDeviceGetUUID(last, uuid, sizeof(uuid)), NVML_SUCCESS);
        for (int t = 0; t < THREADS; t++)
            pthread_create(&threads[t], NULL, hammer, uuid);
        for (int t = 0; t < THREADS; t++)
            pthread_join(threads[t], NULL);
    }
    expect("shutdown", nvmlShutdown(), NVML_SUCCESS);
    expect("shutdown of the second init", nvmlShutdown(), NVML_SUCCESS);
    expect("shutdown once too often", nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
    expect("a handle after shutdown", nvmlDeviceGetUUID(first, uuid, sizeof(uuid)),
           NVML_ERROR_UNINITIALIZED);
    if (count > 0) {
        expect("init after shutdown", nvmlInit(), NVML_SUCCESS);
        expect("an old handle after init", nvmlDeviceGetUUID(first, uuid, sizeof(uuid)),
               NVML_SUCCESS);
        expect("last shutdown", nvmlShutdown(), NVML_SUCCESS);
    }
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
