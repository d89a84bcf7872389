/* SPDX-License-Identifier: Apache-2.0 */
/* Generated from the surfaces' roots (mokkafs.surfaces.ROOTS) by
 *   python -m mokkafs.delivery.prefixes > native/path_prefixes.h
 * Do not edit: tests/unit/test_preload_paths.py checks it matches. */
/* whole paths, matched as whole components */
static const char *const prefixes[] = {
    "/sys/bus/pci",
    "/sys/class/pci_bus",
    "/sys/kernel/iommu_groups",
    "/sys/class/infiniband",
    "/sys/class/infiniband_verbs",
    "/sys/class/infiniband_mad",
    "/dev/infiniband",
    "/sys/devices/virtual/misc/rdma_cm",
    "/sys/class/misc/rdma_cm",
    "/dev/nvidiactl",
    "/dev/nvidia-modeset",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-caps",
    "/dev/nvidia-nvswitchctl",
    "/dev/vfio",
    "/sys/class/vfio-dev",
    "/sys/devices/virtual/dmi",
    "/sys/class/dmi",
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
    "/sys/module/vfio",
    "/sys/module/vfio_iommu_type1",
    "/sys/module/vfio_pci_core",
    "/sys/module/vfio_pci",
    "/proc/modules",
    "/proc/devices",
    "/proc/driver/nvidia",
    "/proc/driver/nvidia-caps",
    "/proc/driver/nvidia-nvswitch",
    "/dev/nvidia-caps-imex-channels",
    "/sys/devices/system/cpu",
    "/sys/devices/system/node",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/dev/kmsg",
    "/sys/class/net",
    NULL,
};
/* a name followed by digits: /dev/nvidia0 */
static const char *const numbered[] = {
    "/dev/nvidia",
    "/dev/nvidia-nvswitch",
    NULL,
};
/* a name followed by a PCI domain and bus in hex: /sys/devices/pci0000:18 */
static const char *const buses[] = {
    "/sys/devices/pci",
    NULL,
};
