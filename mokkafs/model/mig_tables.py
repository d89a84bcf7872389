"""The MIG profile tables: the geometry of each GPU instance profile (the same on every model
listed) and the names each model's driver gives them (docs/mig-imex.md, "MIG profile tables");
and the bounds of a MIG-capable board and of the driver's minor table."""

from __future__ import annotations

from dataclasses import dataclass

UNITS = 8  # memory units of a MIG-capable board (placements are in these)
SLICES = 7  # compute slices
# nv-caps.c's minor table: GPUs, GPU instances of each, compute instances of each
MAX_GPUS, MAX_GIS, MAX_CIS = 32, 15, 8


@dataclass(frozen=True)
class Shape:
    """A GI profile's geometry, the same on every model listed: nvidia-smi's profile ID, the
    NVML enum (GPU_INSTANCE_PROFILE_*), compute slices, memory units, allowed starts, and how
    many one GPU holds."""

    profile_id: int
    nvml: int
    slices: int
    size: int
    starts: tuple[int, ...]
    most: int


# NVIDIA MIG user guide, "Supported MIG Profiles" (A100, H100, H200, B200 tables), with the
# placements `nvidia-smi mig -lgipp` lists (sizes in memory units of eight).
SHAPES: dict[str, Shape] = {
    "1g": Shape(19, 0, 1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
    "1g+me": Shape(20, 7, 1, 1, (0, 1, 2, 3, 4, 5, 6), 1),
    "1g2": Shape(15, 9, 1, 2, (0, 2, 4, 6), 4),
    "2g": Shape(14, 1, 2, 2, (0, 2, 4), 3),
    "3g": Shape(9, 2, 3, 4, (0, 4), 2),
    "4g": Shape(5, 3, 4, 4, (0,), 1),
    "7g": Shape(0, 4, 7, 8, (0,), 1),
}


def _table(eighth: int, quarter: int, half: int, whole: int) -> dict[str, str]:
    """Profile names by shape from a model's memory per eighth, quarter, half and whole."""
    return {"1g": f"1g.{eighth}gb", "1g+me": f"1g.{eighth}gb+me", "1g2": f"1g.{quarter}gb",
            "2g": f"2g.{quarter}gb", "3g": f"3g.{half}gb", "4g": f"4g.{half}gb",
            "7g": f"7g.{whole}gb"}


# The names each model's driver gives its GI profiles, by PCI device id (pci.ids): the MIG
# user guide's tables; H200 as mig-parted issue 120 lists `nvidia-smi mig -lgip`.
A100_40 = _table(5, 10, 20, 40)
GB80 = _table(10, 20, 40, 80)
TABLES: dict[int, tuple[str, dict[str, str]]] = {
    0x20B0: ("A100 SXM4 40GB", A100_40),
    0x20F1: ("A100 PCIe 40GB", A100_40),
    0x20B2: ("A100 SXM4 80GB", GB80),
    0x20B5: ("A100 PCIe 80GB", GB80),
    0x2330: ("H100 SXM5 80GB", GB80),
    0x2331: ("H100 PCIe 80GB", GB80),
    0x2335: ("H200 SXM 141GB", _table(18, 35, 71, 141)),
    0x2901: ("B200 180GB", _table(23, 45, 90, 180)),
}
NVML_ENUM = {shape.nvml: key for key, shape in SHAPES.items()}
CI_SLICES = (1, 2, 3, 4, 7)  # COMPUTE_INSTANCE_PROFILE_{1,2,3,4,7}_SLICE
CI_NVML = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7}  # the NVML enum's slices
