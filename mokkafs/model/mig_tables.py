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


def ci_starts(slices: int, gi_slices: int) -> tuple[int, ...]:
    """Where a compute instance of ``slices`` may start in a GPU instance of ``gi_slices``:
    at a multiple of its size rounded up to a power of two, within the GI, as the GI
    placements are laid on memory (``SHAPES``; `nvidia-smi mig -lcipp` on a 7-slice GI:
    ``{0,1,2,3,4,5,6}:1``, ``{0,2,4}:2``, ``{0,4}:3``, ``{0}:4``, ``{0}:7``)."""
    align = 1 << (slices - 1).bit_length()
    return tuple(range(0, gi_slices - slices + 1, align))


def ci_placements(wanted: list[tuple[int, int | None]], gi_slices: int) -> list[int] | None:
    """A start for each compute instance (slices, start) of ``wanted`` in a GPU instance of
    ``gi_slices``, on slices no other holds: a given start kept, each other the highest of
    ``ci_starts`` that lets the rest fit too (the driver places a GPU instance so too: its
    highest free start); None when none fits."""
    order = sorted(range(len(wanted)), key=lambda i: wanted[i][1] is None)  # given first
    out = [0] * len(wanted)

    def place(k: int, taken: frozenset[int]) -> bool:
        if k == len(order):
            return True
        i = order[k]
        slices, given = wanted[i]
        for start in (given,) if given is not None else ci_starts(slices, gi_slices)[::-1]:
            held = frozenset(range(start, start + slices))
            if not held & taken and place(k + 1, taken | held):
                out[i] = start
                return True
        return False

    return out if place(0, frozenset()) else None


@dataclass(frozen=True)
class Units:
    """What a GI profile holds beyond its slices: streaming multiprocessors, copy engines,
    decoders, encoders, JPEG decoders and optical flow accelerators (NVML's counts)."""

    sm: int = 0
    ce: int = 0
    dec: int = 0
    enc: int = 0
    jpeg: int = 0
    ofa: int = 0


def _units(sms: tuple[int, ...], ce: tuple[int, ...], dec: tuple[int, ...],
           jpeg: tuple[int, ...], ofa: tuple[int, ...]) -> dict[str, Units]:
    """Units by shape, each column in SHAPES' order (no model listed has an encoder in MIG)."""
    return {key: Units(sm, c, d, 0, j, o)
            for key, sm, c, d, j, o in zip(SHAPES, sms, ce, dec, jpeg, ofa, strict=True)}


# The SM and engine counts `nvidia-smi mig -lgip` lists on real boards (SM, DEC, ENC, CE,
# JPEG, OFA columns): A100-SXM4-40GB (98 SMs in MIG mode) and H100 SXM5 (132), the MIG user
# guide's examples, whose "Supported MIG Profiles" tables give the same engines (the
# A100-SXM4-80GB's are the 40GB's, renamed); H200 SXM, NVIDIA/mig-parted issue 120 (as the
# H100 SXM5's); H100 PCIe, Scaleway's MIG how-to (114 SMs; a 1g.20gb has a 1g.10gb's 14);
# B200, NVIDIA/mig-parted PR 166 and gpu-operator PR 1242, which show its 1g and 2g rows only:
# its 3g, 4g and 7g rows, which no source found shows, are 0, as docs/nvml.md says.
_A100 = _units((14, 14, 14, 28, 42, 56, 98), (1, 1, 1, 2, 3, 4, 7), (0, 1, 1, 1, 2, 2, 5),
               (0, 1, 0, 0, 0, 0, 1), (0, 1, 0, 0, 0, 0, 1))
_H100_ENGINES = ((1, 1, 1, 2, 3, 4, 8), (1, 1, 1, 2, 3, 4, 7), (1, 1, 1, 2, 3, 4, 7),
                 (0, 1, 0, 0, 0, 0, 1))
_H100_SXM = _units((16, 16, 26, 32, 60, 64, 132), *_H100_ENGINES)
_H100_PCIE = _units((14, 14, 14, 30, 46, 62, 114), *_H100_ENGINES)
_B200 = _units((18, 18, 30, 36, 0, 0, 0), (2, 2, 2, 4, 0, 0, 0), (1, 1, 1, 2, 0, 0, 0),
               (1, 1, 1, 2, 0, 0, 0), (0, 1, 0, 0, 0, 0, 0))
HARDWARE: dict[int, dict[str, Units]] = {
    0x20B0: _A100, 0x20F1: _A100, 0x20B2: _A100, 0x20B5: _A100,
    0x2330: _H100_SXM, 0x2331: _H100_PCIE, 0x2335: _H100_SXM, 0x2901: _B200,
}


def ci_sms(units: dict[str, Units], gi: str, slices: int) -> int:
    """The SMs of a compute instance of ``slices`` in a GI of shape ``gi``: the GI's when it
    spans it, else a 1g's per slice (as `nvidia-smi mig -lcip` lists: 1c.4g.20gb 14 SMs,
    2c.4g.20gb 28 on an A100-40GB); 0 where the table has none for the GI or it does not fit."""
    if gi not in units or not units[gi].sm or slices > SHAPES[gi].slices:
        return 0
    if slices == SHAPES[gi].slices:
        return units[gi].sm
    return units["1g"].sm * slices
