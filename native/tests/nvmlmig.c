/* SPDX-License-Identifier: Apache-2.0 */
/* mokkafs's NVML MIG calls driven from C, built with the library's sources under
 * AddressSanitizer and UndefinedBehaviorSanitizer (make nvmlmig), on an h100-mig view
 * (MOKKAFS_ROOT). It prints a "gi" line per GPU instance and a "mig" line per MIG device
 * (tests/nvml/test_nvml_mig_c.py checks them against the view), checks bad input, reads from
 * 8 threads at once, and checks what the control socket's answers become, with a stand-in
 * daemon of its own at argv[1] (MOKKAFS_CONTROL). "FAIL ..." lines and exit status 1 say what
 * went wrong. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../nvml/nvml_api.h"
#include "expect.h"

#define THREADS 8
#define ROUNDS 50

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *status);

static void same(const char *what, int equal)
{
    expect(what, equal ? NVML_SUCCESS : NVML_ERROR_UNKNOWN, NVML_SUCCESS);
}

/* The GPU instances of every profile of a GPU in MIG mode: a "gi" line each */
static void print_gpu_instances(unsigned int i, nvmlDevice_t h)
{
    for (unsigned int e = 0; e < NVML_GPU_INSTANCE_PROFILE_COUNT; e++) {
        nvmlGpuInstanceProfileInfo_t p;
        nvmlGpuInstance_t gis[8];
        unsigned int n = 0;
        if (nvmlDeviceGetGpuInstanceProfileInfo(h, e, &p) != NVML_SUCCESS)
            continue;
        expect("gpu instances", nvmlDeviceGetGpuInstances(h, p.id, gis, &n), NVML_SUCCESS);
        for (unsigned int g = 0; g < n && g < p.instanceCount; g++) {
            nvmlGpuInstanceInfo_t info;
            nvmlComputeInstance_t cis[8];
            unsigned int m = 0;
            char list[64] = "";
            expect("gpu instance info", nvmlGpuInstanceGetInfo(gis[g], &info), NVML_SUCCESS);
            same("its device", info.device == h);
            for (unsigned int c = 0; c < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; c++) {
                nvmlComputeInstanceProfileInfo_t cp;
                if (nvmlGpuInstanceGetComputeInstanceProfileInfo(gis[g], c, 0, &cp) != NVML_SUCCESS)
                    continue;
                expect("compute instances",
                       nvmlGpuInstanceGetComputeInstances(gis[g], cp.id, cis, &m), NVML_SUCCESS);
                for (unsigned int k = 0; k < m; k++) {
                    nvmlComputeInstanceInfo_t ci;
                    expect("ci info", nvmlComputeInstanceGetInfo_v2(cis[k], &ci), NVML_SUCCESS);
                    same("its gpu instance", ci.gpuInstance == gis[g] && ci.device == h);
                    snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%u:%u",
                             list[0] ? "," : "", ci.id, cp.sliceCount);
                }
            }
            printf("gi\t%u\t%u\t%u\t%u\t%u\t%s\n", i, info.id, info.profileId,
                   info.placement.start, info.placement.size, list);
        }
    }
}

/* Every MIG device of a GPU: a "mig" line each */
static void print_mig_devices(unsigned int i, nvmlDevice_t h)
{
    unsigned int max = 0;
    expect("max mig devices", nvmlDeviceGetMaxMigDeviceCount(h, &max), NVML_SUCCESS);
    for (unsigned int k = 0; k < max; k++) {
        nvmlDevice_t m, parent = NULL, again = NULL;
        char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
        unsigned int gi = 0, ci = 0, is_mig = 0;
        nvmlDeviceAttributes_t a;
        nvmlMemory_v2_t memory = {.version = nvmlMemory_v2};
        if (nvmlDeviceGetMigDeviceHandleByIndex(h, k, &m) != NVML_SUCCESS)
            continue;
        expect("mig uuid", nvmlDeviceGetUUID(m, uuid, sizeof(uuid)), NVML_SUCCESS);
        expect("is mig", nvmlDeviceIsMigDeviceHandle(m, &is_mig), NVML_SUCCESS);
        expect("gi id", nvmlDeviceGetGpuInstanceId(m, &gi), NVML_SUCCESS);
        expect("ci id", nvmlDeviceGetComputeInstanceId(m, &ci), NVML_SUCCESS);
        expect("attributes", nvmlDeviceGetAttributes_v2(m, &a), NVML_SUCCESS);
        expect("mig memory", nvmlDeviceGetMemoryInfo_v2(m, &memory), NVML_SUCCESS);
        expect("parent", nvmlDeviceGetDeviceHandleFromMigDeviceHandle(m, &parent), NVML_SUCCESS);
        expect("by mig uuid", nvmlDeviceGetHandleByUUID(uuid, &again), NVML_SUCCESS);
        same("a mig handle", is_mig == 1 && parent == h && again == m);
        unsigned int procs = 0; /* none runs in the shipped profile: the count asked alone */
        expect("mig processes", nvmlDeviceGetComputeRunningProcesses_v3(m, &procs, NULL),
               NVML_SUCCESS);
        same("no mig process", procs == 0);
        printf("mig\t%u\t%u\t%s\t%u\t%u\t%u\t%u\t%llu\t%llu,%llu,%llu,%llu\n", i, k, uuid, gi, ci,
               a.gpuInstanceSliceCount, a.computeInstanceSliceCount, a.memorySizeMB,
               memory.total, memory.reserved, memory.free, memory.used);

        nvmlPciInfo_t pci;
        unsigned int cur, pend;
        expect("a whole gpu's call on a mig handle", nvmlDeviceGetPciInfo_v3(m, &pci),
               NVML_ERROR_NOT_SUPPORTED);
        expect("mig mode of a mig handle", nvmlDeviceGetMigMode(m, &cur, &pend),
               NVML_ERROR_INVALID_ARGUMENT);
        expect("mig devices of a mig handle", nvmlDeviceGetMigDeviceHandleByIndex(m, 0, &again),
               NVML_ERROR_INVALID_ARGUMENT);
    }
}

/* Bad input on GPU 3 (one 7g.80gb GPU instance, one compute instance) and GPU 4 (MIG off) */
static void bad_input(nvmlDevice_t h3, nvmlDevice_t h4)
{
    unsigned int cur = 9, pend = 9, count = 0, id = 0;
    nvmlGpuInstanceProfileInfo_t p1;
    nvmlGpuInstanceProfileInfo_v2_t p2 = {.version = 1};
    nvmlGpuInstanceProfileInfo_v3_t p3 = {.version = nvmlGpuInstanceProfileInfo_v3};
    nvmlGpuInstancePlacement_t room[8], where = {.start = 0, .size = 8};
    nvmlGpuInstance_t gi = NULL, forged = (nvmlGpuInstance_t)&room[0];
    nvmlComputeInstance_t ci = NULL;
    nvmlDevice_t m = NULL;
    nvmlDeviceAttributes_t a;
    expect("mig mode", nvmlDeviceGetMigMode(h3, &cur, &pend), NVML_SUCCESS);
    same("mig on", cur == NVML_DEVICE_MIG_ENABLE && pend == NVML_DEVICE_MIG_ENABLE);
    expect("mig off", nvmlDeviceGetMigMode(h4, &cur, &pend), NVML_SUCCESS);
    same("mig off is 0", cur == 0 && pend == 0);
    expect("NULL pending", nvmlDeviceGetMigMode(h3, &cur, NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("no mig devices while off", nvmlDeviceGetMaxMigDeviceCount(h4, &count), NVML_SUCCESS);
    same("0 while off", count == 0);
    expect("profile past the enums", nvmlDeviceGetGpuInstanceProfileInfo(h3, 18, &p1),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("a profile H100 has not", nvmlDeviceGetGpuInstanceProfileInfo(h3, 5, &p1),
           NVML_ERROR_NOT_SUPPORTED);
    expect("profile info of another version", nvmlDeviceGetGpuInstanceProfileInfoV(h3, 0, &p2),
           NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    expect("profile info v3",
           nvmlDeviceGetGpuInstanceProfileInfoV(h3, 0, (nvmlGpuInstanceProfileInfo_v2_t *)&p3),
           NVML_SUCCESS);
    same("v3's fields", p3.id == 19 && p3.sliceCount == 1 && p3.instanceCount == 7
         && strcmp(p3.name, "MIG 1g.10gb") == 0 && p3.capabilities == 0);
    expect("placements: how many", nvmlDeviceGetGpuInstancePossiblePlacements_v2(h3, 19, NULL,
           &count), NVML_SUCCESS);
    same("seven 1g placements", count == 7);
    count = 2;
    expect("placements: too little room", nvmlDeviceGetGpuInstancePossiblePlacements_v2(
           h3, 19, room, &count), NVML_ERROR_INSUFFICIENT_SIZE);
    same("the room needed", count == 7);
    expect("placements of no profile", nvmlDeviceGetGpuInstancePossiblePlacements_v2(
           h3, 99, room, &count), NVML_ERROR_INVALID_ARGUMENT);
    expect("remaining", nvmlDeviceGetGpuInstanceRemainingCapacity(h3, 19, &count), NVML_SUCCESS);
    same("a full GPU", count == 0);
    expect("instances while off", nvmlDeviceGetGpuInstanceById(h4, 0, &gi),
           NVML_ERROR_NOT_SUPPORTED);
    expect("gi id past the table", nvmlDeviceGetGpuInstanceById(h3, 15, &gi),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("gi absent", nvmlDeviceGetGpuInstanceById(h3, 14, &gi), NVML_ERROR_NOT_FOUND);
    expect("gi 0", nvmlDeviceGetGpuInstanceById(h3, 0, &gi), NVML_SUCCESS);
    expect("a forged gi", nvmlGpuInstanceGetInfo(forged, NULL), NVML_ERROR_INVALID_ARGUMENT);
    nvmlGpuInstanceInfo_t info;
    expect("a forged gi's info", nvmlGpuInstanceGetInfo(forged, &info),
           NVML_ERROR_INVALID_ARGUMENT);
    nvmlComputeInstanceProfileInfo_t cp;
    nvmlComputeInstanceProfileInfo_v2_t cp2 = {.version = nvmlComputeInstanceProfileInfo_v2};
    expect("an engine profile but shared", nvmlGpuInstanceGetComputeInstanceProfileInfo(
           gi, 0, 1, &cp), NVML_ERROR_INVALID_ARGUMENT);
    expect("a ci profile past the enums", nvmlGpuInstanceGetComputeInstanceProfileInfo(
           gi, 9, 0, &cp), NVML_ERROR_INVALID_ARGUMENT);
    expect("a ci profile 7g has not", nvmlGpuInstanceGetComputeInstanceProfileInfo(
           gi, 5, 0, &cp), NVML_ERROR_NOT_SUPPORTED);
    expect("ci profile v2", nvmlGpuInstanceGetComputeInstanceProfileInfoV(gi, 1, 0, &cp2),
           NVML_SUCCESS);
    same("2c.7g.80gb", cp2.sliceCount == 2 && cp2.instanceCount == 3
         && strcmp(cp2.name, "MIG 2c.7g.80gb") == 0);
    expect("ci 0", nvmlGpuInstanceGetComputeInstanceById(gi, 0, &ci), NVML_SUCCESS);
    expect("ci absent", nvmlGpuInstanceGetComputeInstanceById(gi, 3, &ci), NVML_ERROR_NOT_FOUND);
    nvmlComputeInstanceInfo_t old = {.placement = {.start = 77, .size = 77}};
    expect("ci info, old name", nvmlComputeInstanceGetInfo(ci, &old), NVML_SUCCESS);
    same("nothing past the old struct", old.placement.start == 77 && old.id == 0);
    expect("ci capacity", nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, 0, &count),
           NVML_SUCCESS);
    same("a full gpu instance", count == 0);
    expect("mig index past the most", nvmlDeviceGetMigDeviceHandleByIndex(h3, 7, &m),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("no mig device there", nvmlDeviceGetMigDeviceHandleByIndex(h3, 1, &m),
           NVML_ERROR_NOT_FOUND);
    expect("parent of a whole gpu", nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h3, &m),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("gi id of a whole gpu", nvmlDeviceGetGpuInstanceId(h3, &id), NVML_ERROR_NOT_SUPPORTED);
    expect("attributes of a whole gpu", nvmlDeviceGetAttributes_v2(h3, &a),
           NVML_ERROR_NOT_SUPPORTED);
    expect("unknown mig uuid", nvmlDeviceGetHandleByUUID("MIG-none", &m), NVML_ERROR_NOT_FOUND);
    expect("no placement", nvmlDeviceCreateGpuInstanceWithPlacement(h3, 19, NULL, &gi),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("no room", nvmlDeviceCreateGpuInstanceWithPlacement(h3, 0, &where, &gi),
           NVML_ERROR_INSUFFICIENT_RESOURCES);
    expect("create while off", nvmlDeviceCreateGpuInstance(h4, 19, &gi), NVML_ERROR_NOT_SUPPORTED);
    expect("destroy one in use", nvmlGpuInstanceDestroy(gi), NVML_ERROR_IN_USE);
    expect("a ci with no room", nvmlGpuInstanceCreateComputeInstance(gi, 0, &ci),
           NVML_ERROR_INSUFFICIENT_RESOURCES);
    nvmlComputeInstancePlacement_t cps[8], at = {.start = 0, .size = 1};
    expect("a ci where another is", nvmlGpuInstanceCreateComputeInstanceWithPlacement(
           gi, 0, &at, &ci), NVML_ERROR_INSUFFICIENT_RESOURCES);
    at = (nvmlComputeInstancePlacement_t){.start = 1, .size = 2};
    expect("a ci where none may start", nvmlGpuInstanceCreateComputeInstanceWithPlacement(
           gi, 1, &at, &ci), NVML_ERROR_INVALID_ARGUMENT);
    expect("a ci with no placement", nvmlGpuInstanceCreateComputeInstanceWithPlacement(
           gi, 0, NULL, &ci), NVML_ERROR_INVALID_ARGUMENT);
    count = 0;
    expect("how many ci placements", nvmlGpuInstanceGetComputeInstancePossiblePlacements(
           gi, 2, NULL, &count), NVML_SUCCESS);
    same("two of 3c", count == 2);
    count = 1;
    expect("short ci placements", nvmlGpuInstanceGetComputeInstancePossiblePlacements(
           gi, 2, cps, &count), NVML_ERROR_INSUFFICIENT_SIZE);
    same("short: the count", count == 2);
    count = 8;
    expect("ci placements", nvmlGpuInstanceGetComputeInstancePossiblePlacements(
           gi, 2, cps, &count), NVML_SUCCESS);
    same("3c at 0 and 4", count == 2 && cps[0].start == 0 && cps[1].start == 4
         && cps[1].size == 3);
    expect("ci placements, no count", nvmlGpuInstanceGetComputeInstancePossiblePlacements(
           gi, 2, cps, NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("ci placements of no profile", nvmlGpuInstanceGetComputeInstancePossiblePlacements(
           gi, 7, cps, &count), NVML_ERROR_INVALID_ARGUMENT);
    expect("ci placements of a forged gi", nvmlGpuInstanceGetComputeInstancePossiblePlacements(
           forged, 0, cps, &count), NVML_ERROR_INVALID_ARGUMENT);
    nvmlReturn_t status;
    expect("mig off with instances", nvmlDeviceSetMigMode(h3, 0, &status), NVML_ERROR_IN_USE);
    expect("mig mode 2", nvmlDeviceSetMigMode(h3, 2, &status), NVML_ERROR_INVALID_ARGUMENT);
    expect("mig mode, no status", nvmlDeviceSetMigMode(h3, 1, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
}

static void *hammer(void *arg)
{
    nvmlDevice_t h = arg;
    char first[NVML_DEVICE_UUID_BUFFER_SIZE] = "", uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
    for (int r = 0; r < ROUNDS; r++) {
        nvmlDevice_t m;
        nvmlGpuInstance_t gi;
        nvmlGpuInstanceInfo_t info;
        nvmlDeviceAttributes_t a;
        expect("threads: mig device", nvmlDeviceGetMigDeviceHandleByIndex(h, 0, &m),
               NVML_SUCCESS);
        expect("threads: uuid", nvmlDeviceGetUUID(m, uuid, sizeof(uuid)), NVML_SUCCESS);
        if (!first[0])
            memcpy(first, uuid, sizeof(uuid));
        same("threads: the same uuid", strcmp(first, uuid) == 0);
        expect("threads: attributes", nvmlDeviceGetAttributes(m, &a), NVML_SUCCESS);
        expect("threads: gi", nvmlDeviceGetGpuInstanceById(h, 2, &gi), NVML_SUCCESS);
        expect("threads: gi info", nvmlGpuInstanceGetInfo(gi, &info), NVML_SUCCESS);
    }
    return NULL;
}

/* The stand-in daemon: one connection per case, its request kept; the case's answer sent,
 * or the connection closed at once (NULL), as the daemon closes on a caller it does not
 * serve */
struct stand_in {
    int listener;
    const char *const *answers;
    int cases;
    char heard[6][512];
};

static void *stand_in_serve(void *arg)
{
    struct stand_in *s = arg;
    for (int i = 0; i < s->cases; i++) {
        int fd = accept(s->listener, NULL, NULL);
        if (fd < 0)
            return NULL;
        const char *answer = s->answers[i];
        size_t len = 0;
        while (answer && len < sizeof(s->heard[0]) - 1 && !memchr(s->heard[i], '\n', len)) {
            ssize_t got = read(fd, s->heard[i] + len, sizeof(s->heard[0]) - 1 - len);
            if (got <= 0)
                break;
            len += (size_t)got;
        }
        if (answer && strcmp(answer, "long") == 0) { /* more than the library reads, no "ok" */
            static char spaces[70000];
            memset(spaces, ' ', sizeof(spaces));
            (void)!write(fd, spaces, sizeof(spaces));
        } else if (answer) {
            (void)!write(fd, answer, strlen(answer));
        }
        close(fd);
    }
    return NULL;
}

/* What each answer of the daemon to a destroy becomes, then to a MIG mode change */
static void control_answers(nvmlDevice_t h3, const char *path)
{
    static const char *const answers[] = {
        "{\"ok\": false, \"error\": \"refused\", \"exit\": 2}\n",
        NULL,
        "long",
        "{\"mig\": {\"ok\": false, \"x\": \"\\\"ok\\\": false\"}, \"ok\": true}\n",
        "{\"ok\": false, \"error\": \"refused\", \"exit\": 2}\n",
        "{\"ok\": true, \"mig\": []}\n",
    };
    static const nvmlReturn_t want[] = {NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_NO_PERMISSION,
                                        NVML_ERROR_UNKNOWN, NVML_SUCCESS};
    struct stand_in s = {.answers = answers, .cases = 6};
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
    s.listener = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s.listener < 0 || bind(s.listener, (struct sockaddr *)&addr, sizeof(addr)) < 0
        || listen(s.listener, 4) < 0) {
        same("the stand-in daemon's socket", 0);
        return;
    }
    pthread_t thread;
    pthread_create(&thread, NULL, stand_in_serve, &s);
    for (int i = 0; i < 4; i++) {
        nvmlGpuInstance_t gi;
        nvmlComputeInstance_t ci;
        expect("gi 0", nvmlDeviceGetGpuInstanceById(h3, 0, &gi), NVML_SUCCESS);
        expect("ci 0", nvmlGpuInstanceGetComputeInstanceById(gi, 0, &ci), NVML_SUCCESS);
        expect("a destroy the daemon answers", nvmlComputeInstanceDestroy(ci), want[i]);
    }
    nvmlReturn_t status = NVML_ERROR_UNKNOWN;
    expect("a mode change the daemon refuses", nvmlDeviceSetMigMode(h3, 1, &status),
           NVML_ERROR_IN_USE);
    expect("a mode change the daemon makes", nvmlDeviceSetMigMode(h3, 1, &status),
           NVML_SUCCESS);
    same("its activation status", status == NVML_SUCCESS);
    pthread_join(thread, NULL);
    close(s.listener);
    unlink(path);
    same("the request", strcmp(s.heard[0], "{\"op\": \"mig\", \"action\": \"dci\", \"gpu\": 3, "
                               "\"profiles\": [], \"C\": false, \"gi\": [0], \"ci\": [0]}\n") == 0);
    same("the mode request", strcmp(s.heard[5], "{\"op\": \"mig\", \"action\": \"mode\", "
                                    "\"gpu\": 3, \"profiles\": [], \"C\": false, "
                                    "\"mode\": 1}\n") == 0);
}

int main(int argc, char **argv)
{
    unsigned int count = 0;
    nvmlDevice_t gpus[8] = {0};
    if (argc != 2) {
        fprintf(stderr, "usage: nvmlmig SOCKET (the stand-in daemon's, MOKKAFS_CONTROL)\n");
        return 2;
    }
    setenv("MOKKAFS_CONTROL", argv[1], 1); /* read at the first nvmlInit */
    expect("init", nvmlInit_v2(), NVML_SUCCESS);
    expect("count", nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
    for (unsigned int i = 0; i < count && i < 8; i++) {
        unsigned int cur = 0, pend = 0;
        expect("handle", nvmlDeviceGetHandleByIndex_v2(i, &gpus[i]), NVML_SUCCESS);
        expect("mig mode", nvmlDeviceGetMigMode(gpus[i], &cur, &pend), NVML_SUCCESS);
        if (cur == NVML_DEVICE_MIG_ENABLE) {
            print_gpu_instances(i, gpus[i]);
            print_mig_devices(i, gpus[i]);
        }
    }
    same("h100-mig's eight GPUs", count == 8);
    if (count == 8) {
        pthread_t threads[THREADS];
        bad_input(gpus[3], gpus[4]);
        for (int t = 0; t < THREADS; t++)
            pthread_create(&threads[t], NULL, hammer, gpus[0]);
        for (int t = 0; t < THREADS; t++)
            pthread_join(threads[t], NULL);
        control_answers(gpus[3], argv[1]);
    }
    expect("shutdown", nvmlShutdown(), NVML_SUCCESS);
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
