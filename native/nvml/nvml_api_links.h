/* SPDX-License-Identifier: Apache-2.0 */
/* mokkafs's own declarations of the topology, NVLink and fabric part of the NVML API (the
 * values and struct layouts are facts of the ABI, checked against the NVML 13 API; the text is
 * ours). nvml_api.h includes it; it needs nvml_api.h's types. */
#ifndef MOKKAFS_NVML_API_LINKS_H
#define MOKKAFS_NVML_API_LINKS_H

#include "nvml_api.h"

/* Topology (topology.c): how far apart two GPUs sit in the PCIe tree, and P2P between them */
typedef unsigned int nvmlGpuTopologyLevel_t;
#define NVML_TOPOLOGY_INTERNAL 0u
#define NVML_TOPOLOGY_SINGLE 10u
#define NVML_TOPOLOGY_MULTIPLE 20u
#define NVML_TOPOLOGY_HOSTBRIDGE 30u
#define NVML_TOPOLOGY_NODE 40u
#define NVML_TOPOLOGY_SYSTEM 50u
typedef unsigned int nvmlGpuP2PCapsIndex_t;
#define NVML_P2P_CAPS_INDEX_READ 0u
#define NVML_P2P_CAPS_INDEX_WRITE 1u
#define NVML_P2P_CAPS_INDEX_NVLINK 2u
#define NVML_P2P_CAPS_INDEX_ATOMICS 3u
#define NVML_P2P_CAPS_INDEX_PCI 4u
typedef unsigned int nvmlGpuP2PStatus_t;
#define NVML_P2P_STATUS_OK 0u
#define NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED 1u
#define NVML_P2P_STATUS_NOT_SUPPORTED 5u

/* NVLink (nvlink.c) */
#define NVML_NVLINK_MAX_LINKS 36u
typedef unsigned int nvmlNvLinkCapability_t;
#define NVML_NVLINK_CAP_P2P_SUPPORTED 0u
#define NVML_NVLINK_CAP_SYSMEM_ACCESS 1u
#define NVML_NVLINK_CAP_P2P_ATOMICS 2u
#define NVML_NVLINK_CAP_SYSMEM_ATOMICS 3u
#define NVML_NVLINK_CAP_SLI_BRIDGE 4u
#define NVML_NVLINK_CAP_VALID 5u
typedef unsigned int nvmlIntNvLinkDeviceType_t; /* 0 GPU, 1 IBM NPU, 2 switch, 0xff unknown */
#define NVML_NVLINK_DEVICE_TYPE_SWITCH 2u

/* Fabric (fabric.c): the struct of nvmlDeviceGetGpuFabricInfo, and the versioned ones of
 * nvmlDeviceGetGpuFabricInfoV (v2 adds the version and the health mask, v3 the summary) */
#define NVML_GPU_FABRIC_UUID_LEN 16
typedef unsigned char nvmlGpuFabricState_t; /* NVML_GPU_FABRIC_STATE_*: 3 completed */
typedef struct {
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
} nvmlGpuFabricInfo_t;
typedef struct {
    unsigned int version;
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
    unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;
typedef struct {
    unsigned int version;
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status;
    unsigned int cliqueId;
    nvmlGpuFabricState_t state;
    unsigned int healthMask;
    unsigned char healthSummary;
} nvmlGpuFabricInfo_v3_t;
typedef nvmlGpuFabricInfo_v3_t nvmlGpuFabricInfoV_t;
#define nvmlGpuFabricInfo_v2 NVML_STRUCT_VERSION(nvmlGpuFabricInfo_v2_t, 2) /* 0x02000024 */
#define nvmlGpuFabricInfo_v3 NVML_STRUCT_VERSION(nvmlGpuFabricInfo_v3_t, 3) /* 0x03000028 */

NVML_API nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1,
                                                          nvmlDevice_t device2,
                                                          nvmlGpuTopologyLevel_t *pathInfo);
NVML_API nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device,
                                                       nvmlGpuTopologyLevel_t level,
                                                       unsigned int *count,
                                                       nvmlDevice_t *deviceArray);
NVML_API nvmlReturn_t nvmlSystemGetTopologyGpuSet(unsigned int cpuNumber, unsigned int *count,
                                                  nvmlDevice_t *deviceArray);
NVML_API nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                             nvmlGpuP2PCapsIndex_t p2pIndex,
                                             nvmlGpuP2PStatus_t *p2pStatus);
NVML_API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                               nvmlEnableState_t *isActive);
NVML_API nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                                 unsigned int *version);
NVML_API nvmlReturn_t nvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
                                                    nvmlNvLinkCapability_t capability,
                                                    unsigned int *capResult);
NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                          nvmlPciInfo_t *pci);
NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
                                                       nvmlPciInfo_t *pci);
NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                          nvmlIntNvLinkDeviceType_t *type);
NVML_API nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device,
                                                 nvmlGpuFabricInfo_t *gpuFabricInfo);
NVML_API nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device,
                                                  nvmlGpuFabricInfoV_t *gpuFabricInfo);

#endif
