/* SPDX-License-Identifier: Apache-2.0 */
/* mokkafs's topology, NVLink and fabric calls driven from C, built with the library's sources
 * under AddressSanitizer and UBSan (make nvmltopo). MOKKAFS_ROOT names the view. It prints a
 * "levels" line per GPU (its common ancestor with each GPU), "links" (how many NVLinks answer,
 * and link 0's state, version and remote type) and "fabric" (the v3 struct, or the error), which
 * tests/nvml/test_nvml_topology_c.py compares with the view; checks that a v2 fabric struct is
 * filled without a byte past its end, the bad-input answers, and 8 threads at once. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../nvml/nvml_api.h"
#include "expect.h"

#define THREADS 8
#define ROUNDS 100
#define MAX 64

static void print_gpu(unsigned int i, nvmlDevice_t h, nvmlDevice_t *all, unsigned int count)
{
    printf("levels\t%u", i);
    for (unsigned int j = 0; j < count; j++) {
        nvmlGpuTopologyLevel_t level = 99;
        expect("common ancestor", nvmlDeviceGetTopologyCommonAncestor(h, all[j], &level),
               NVML_SUCCESS);
        printf("\t%u", level);
    }
    unsigned int links = 0, state = 9, version = 9, type = 9;
    while (links < NVML_NVLINK_MAX_LINKS && nvmlDeviceGetNvLinkState(h, links, &state) == 0)
        links++;
    nvmlReturn_t ret = nvmlDeviceGetNvLinkState(h, 0, &state);
    if (ret == NVML_SUCCESS) {
        expect("version", nvmlDeviceGetNvLinkVersion(h, 0, &version), NVML_SUCCESS);
        expect("remote type", nvmlDeviceGetNvLinkRemoteDeviceType(h, 0, &type), NVML_SUCCESS);
    }
    printf("\nlinks\t%u\t%u\t%d\t%u\t%u\t%u\n", i, links, ret, state, version, type);

    nvmlGpuFabricInfoV_t v3 = {.version = nvmlGpuFabricInfo_v3};
    ret = nvmlDeviceGetGpuFabricInfoV(h, &v3);
    printf("fabric\t%u\t%d", i, ret);
    if (ret == NVML_SUCCESS) {
        printf("\t");
        for (int b = 0; b < NVML_GPU_FABRIC_UUID_LEN; b++)
            printf("%02x", v3.clusterUuid[b]);
        printf("\t%u\t%u\t%d\t%u\t%u", v3.cliqueId, v3.state, v3.status, v3.healthMask,
               v3.healthSummary);
        struct {
            nvmlGpuFabricInfo_v2_t info;
            unsigned char after[8];
        } v2;
        memset(&v2, 0xa5, sizeof(v2));
        v2.info.version = nvmlGpuFabricInfo_v2;
        expect("fabric v2", nvmlDeviceGetGpuFabricInfoV(h, (nvmlGpuFabricInfoV_t *)&v2.info),
               NVML_SUCCESS);
        int same = memcmp(v2.info.clusterUuid, v3.clusterUuid, sizeof(v3.clusterUuid)) == 0
                   && v2.info.status == v3.status && v2.info.cliqueId == v3.cliqueId
                   && v2.info.state == v3.state && v2.info.healthMask == v3.healthMask;
        expect("fabric v2 is the v3 but for the summary", same ? 0 : 1, 0);
        for (size_t b = 0; b < sizeof(v2.after); b++)
            expect("nothing written past a v2 struct", v2.after[b] == 0xa5 ? 0 : 1, 0);
        nvmlGpuFabricInfo_t v1;
        expect("fabric v1", nvmlDeviceGetGpuFabricInfo(h, &v1), NVML_SUCCESS);
        expect("fabric v1 clique", v1.cliqueId == v3.cliqueId ? 0 : 1, 0);
        v3.version = 1;
        expect("fabric of another version", nvmlDeviceGetGpuFabricInfoV(h, &v3),
               NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    }
    printf("\n");
}

static void bad_input(nvmlDevice_t h)
{
    nvmlGpuTopologyLevel_t level;
    unsigned int count = 1, value;
    nvmlGpuP2PStatus_t status;
    nvmlDevice_t forged = (nvmlDevice_t)&count;
    expect("NULL level", nvmlDeviceGetTopologyCommonAncestor(h, h, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("a handle not ours", nvmlDeviceGetTopologyCommonAncestor(h, forged, &level),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL count", nvmlDeviceGetTopologyNearestGpus(h, NVML_TOPOLOGY_SYSTEM, NULL, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("room but no array", nvmlDeviceGetTopologyNearestGpus(h, 50, &count, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    count = 0;
    expect("no such level", nvmlDeviceGetTopologyNearestGpus(h, 15, &count, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("count only", nvmlDeviceGetTopologyNearestGpus(h, 50, &count, NULL), NVML_SUCCESS);
    if (count > 1) { /* room for one of them: one is written, and said */
        nvmlDevice_t one[2] = {NULL, NULL};
        unsigned int room = 1;
        expect("room for one", nvmlDeviceGetTopologyNearestGpus(h, 50, &room, one),
               NVML_SUCCESS);
        expect("one written", room == 1 && one[0] && !one[1] ? 0 : 1, 0);
    }
    expect("set: NULL count", nvmlSystemGetTopologyGpuSet(0, NULL, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL status", nvmlDeviceGetP2PStatus(h, h, NVML_P2P_CAPS_INDEX_READ, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("no such P2P index", nvmlDeviceGetP2PStatus(h, h, 5, &status),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("P2P with itself", nvmlDeviceGetP2PStatus(h, h, 0, &status), NVML_SUCCESS);
    expect("no peer", status == NVML_P2P_STATUS_NOT_SUPPORTED ? 0 : 1, 0);
    nvmlReturn_t links = nvmlDeviceGetNvLinkState(h, 0, &value);
    nvmlReturn_t past = links == NVML_SUCCESS ? NVML_ERROR_INVALID_ARGUMENT : links;
    expect("link past the max", nvmlDeviceGetNvLinkState(h, NVML_NVLINK_MAX_LINKS, &value), past);
    expect("NULL state", nvmlDeviceGetNvLinkState(h, 0, NULL), NVML_ERROR_INVALID_ARGUMENT);
    expect("no such capability", nvmlDeviceGetNvLinkCapability(h, 0, 6, &value),
           links == NVML_SUCCESS ? NVML_ERROR_INVALID_ARGUMENT : links);
    expect("NULL remote", nvmlDeviceGetNvLinkRemotePciInfo_v2(h, 0, NULL),
           NVML_ERROR_INVALID_ARGUMENT);
    expect("NULL fabric", nvmlDeviceGetGpuFabricInfoV(h, NULL), NVML_ERROR_INVALID_ARGUMENT);
}

struct work {
    nvmlDevice_t *all;
    unsigned int count;
};

static void *hammer(void *arg)
{
    const struct work *w = arg;
    for (int r = 0; r < ROUNDS; r++) {
        nvmlGpuTopologyLevel_t level;
        nvmlGpuP2PStatus_t status;
        unsigned int a = (unsigned int)r % w->count, b = (unsigned int)(r / 3) % w->count;
        expect("threads: ancestor",
               nvmlDeviceGetTopologyCommonAncestor(w->all[a], w->all[b], &level), NVML_SUCCESS);
        expect("threads: p2p", nvmlDeviceGetP2PStatus(w->all[a], w->all[b], 0, &status),
               NVML_SUCCESS);
    }
    return NULL;
}

int main(void)
{
    unsigned int count = 0;
    nvmlDevice_t all[MAX];
    nvmlGpuTopologyLevel_t level;
    expect("before init", nvmlDeviceGetTopologyCommonAncestor(NULL, NULL, &level),
           NVML_ERROR_UNINITIALIZED);
    expect("init", nvmlInit_v2(), NVML_SUCCESS);
    expect("count", nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
    if (count > MAX)
        count = MAX;
    for (unsigned int i = 0; i < count; i++)
        expect("handle", nvmlDeviceGetHandleByIndex_v2(i, &all[i]), NVML_SUCCESS);
    for (unsigned int i = 0; i < count; i++)
        print_gpu(i, all[i], all, count);
    if (count > 0) {
        struct work w = {all, count};
        pthread_t threads[THREADS];
        bad_input(all[0]);
        for (int t = 0; t < THREADS; t++)
            pthread_create(&threads[t], NULL, hammer, &w);
        for (int t = 0; t < THREADS; t++)
            pthread_join(threads[t], NULL);
    }
    expect("shutdown", nvmlShutdown(), NVML_SUCCESS);
    printf("%d failed\n", failures);
    return failures ? 1 : 0;
}
