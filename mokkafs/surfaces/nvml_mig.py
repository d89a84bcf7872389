"""A GPU's MIG keys in NVML's own place (``run/mokkafs-nvml/gpus/<bdf>``,
``mokkafs.surfaces.nvml``): what NVML says of MIG that no kernel file holds. Computed from the
State's MIG tables (``mokkafs.model.mig_tables``) and layout (``State.mig``), the same State the
capability files come from (``mokkafs.surfaces.mig``); docs/nvml.md names the keys.

Only a GPU with a MIG table has them (NVML answers NOT_SUPPORTED for the others):

- ``mig_index``: the GPU's index, as ``mokkafs mig -i`` and the control socket name it;
- ``mig_mode_current``, ``mig_mode_pending``: 1 in MIG mode (pending: the same, as no mode
  change waits for a reset); ``mig_max_devices``: the compute slices, the most MIG devices;
- ``mig_gip.<enum>``, one per GPU instance profile (by NVML's GPU_INSTANCE_PROFILE_*):
  ``<profile ID> <slices> <most> <memory units> <memory MiB> <starts, a hex bit mask> <name>``;
  and ``mig_gip_units.<enum>``: ``<SMs> <copy engines> <decoders> <encoders> <JPEG> <OFA>``
  then the SMs of a compute instance of 1, 2, 3, 4 and 7 slices in it (0 where none fits);
- in MIG mode, ``mig_gi.<id>`` per GPU instance: ``<profile ID> <start> <units> <slices>``,
  and ``mig_ci.<gi>.<ci>`` per compute instance: ``<CI profile ID> <slices> <start> <UUID>
  <name>``.

The SM and engine counts are those real boards list (``HARDWARE``); a profile no source
shows answers 0. A profile's memory is its units' share of the board's (an eighth each), as the
names say; where the profile states no memory, the name's size. A compute instance's start
is its placement in its GPU instance's slices (``mig_tables.ci_starts``).
A MIG device's UUID is a name-based UUID (RFC 4122, version 5) of its GPU's UUID and its two
IDs: the same instance has the same UUID in every process and after a restart.
"""

from __future__ import annotations

import uuid

from mokkafs.model.mig import MigGpu
from mokkafs.model.mig_tables import (
    CI_NVML,
    CI_SLICES,
    HARDWARE,
    SHAPES,
    SLICES,
    TABLES,
    UNITS,
    Units,
    ci_sms,
)
from mokkafs.state import PciFunction

MIB = 1 << 20
CI_PROFILE = {slices: enum for enum, slices in CI_NVML.items()}  # NVML's enum is the CI ID


def mig_uuid(gpu_uuid: str, gi: int, ci: int) -> str:
    """The UUID of the MIG device of compute instance ``ci`` of GPU instance ``gi``."""
    return f"MIG-{uuid.uuid5(uuid.NAMESPACE_OID, f'{gpu_uuid}/gi{gi}/ci{ci}')}"


def memory_mib(fn: PciFunction, units: int, name: str) -> int:
    """A profile's memory: its units' share of the board's, else the size its name says."""
    assert fn.gpu is not None
    memory = fn.gpu.nvml.memory
    if memory is not None:
        return memory.total // MIB * units // UNITS
    return int(name.split("+")[0].split(".")[1].removesuffix("gb")) * 1024


def mig_values(fn: PciFunction, mig: tuple[MigGpu, ...]) -> list[tuple[str, object]]:
    """The MIG keys of GPU ``fn`` (none without a MIG table), in the file's order."""
    table = TABLES.get(fn.device)
    if table is None or fn.gpu is None:
        return []
    names = table[1]
    gpu = next((g for g in mig if g.bdf == fn.bdf), None)
    mode = int(gpu is not None)
    out: list[tuple[str, object]] = [("mig_index", fn.gpu.index), ("mig_mode_current", mode),
                                     ("mig_mode_pending", mode), ("mig_max_devices", SLICES)]
    for key, shape in SHAPES.items():
        mask = sum(1 << s for s in shape.starts)
        out.append((f"mig_gip.{shape.nvml}",
                    f"{shape.profile_id} {shape.slices} {shape.most} {shape.size} "
                    f"{memory_mib(fn, shape.size, names[key])} {mask:x} {names[key]}"))
    hardware = HARDWARE.get(fn.device, {})
    for key, shape in SHAPES.items():
        u = hardware.get(key, Units())
        cis = " ".join(str(ci_sms(hardware, key, c)) for c in CI_SLICES)
        out.append((f"mig_gip_units.{shape.nvml}",
                    f"{u.sm} {u.ce} {u.dec} {u.enc} {u.jpeg} {u.ofa} {cis}"))
    for gi in gpu.instances if gpu is not None else ():
        out.append((f"mig_gi.{gi.id}", f"{gi.profile_id} {gi.start} {gi.size} {gi.slices}"))
        for ci in gi.compute:
            out.append((f"mig_ci.{gi.id}.{ci.id}",
                        f"{CI_PROFILE[ci.slices]} {ci.slices} {ci.start} "
                        f"{mig_uuid(fn.gpu.uuid, gi.id, ci.id)} {ci.profile}"))
    return out
