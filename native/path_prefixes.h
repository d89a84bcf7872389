/* SPDX-License-Identifier: Apache-2.0 */
/* Generated from mokkafs.delivery.preload.REDIRECTED by
 *   python -m mokkafs.delivery.preload > native/path_prefixes.h
 * Do not edit: tests/unit/test_preload_paths.py checks it matches. */
static const char *const prefixes[] = {
    "/sys/bus/pci",
    "/sys/class/infiniband",
    "/sys/class/infiniband_verbs",
    "/sys/class/infiniband_mad",
    "/sys/class/pci_bus",
    "/sys/kernel/iommu_groups",
    "/sys/devices/virtual/dmi",
    "/sys/class/dmi",
    "/sys/devices/virtual/misc/rdma_cm",
    "/sys/class/misc/rdma_cm",
    "/sys/module/ib_core",
    "/sys/module/mlx5_core",
    "/sys/module/mlx5_ib",
    "/sys/module/ib_uverbs",
    "/sys/module/ib_umad",
    "/sys/module/rdma_ucm",
    "/sys/module/nvidia",
    "/sys/module/nvidia_modeset",
    "/sys/module/nvidia_uvm",
    "/sys/module/nvidia_peermem",
    "/proc/devices",
    "/proc/driver/nvidia",
    "/proc/driver/nvidia-caps",
    "/proc/modules",
    "/dev/infiniband",
    NULL,
};
