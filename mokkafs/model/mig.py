"""The State's partitions: the MIG layout of each GPU booted in MIG mode, and the driver's
IMEX channel settings. Immutable, like the rest of the State (``mokkafs.state``); compiled by
``mokkafs.profile.mig`` and served by ``mokkafs.surfaces.mig`` and ``mokkafs.surfaces.imex``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ComputeInstance:
    """One compute instance (one MIG device): its ID in its GPU instance, its CI profile name
    (``1c.3g.40gb``; the GI's own name when it spans the GI), its compute slices, and its
    placement's start among the GI's slices (``mig_tables.ci_starts``)."""

    id: int
    profile: str
    slices: int
    start: int


@dataclass(frozen=True, slots=True)
class GpuInstance:
    """One GPU instance: its ID (``gi<ID>`` of the capability paths), GI profile name and
    nvidia-smi profile ID, its placement (start and size in memory units of eight), its
    compute slices, and its compute instances."""

    id: int
    profile: str
    profile_id: int
    start: int
    size: int
    slices: int
    compute: tuple[ComputeInstance, ...] = ()


@dataclass(frozen=True, slots=True)
class MigGpu:
    """A GPU booted in MIG mode: the PCI function and device minor (the ``gpu<N>`` of the
    capability paths) and its GPU instances (none: MIG on, nothing created yet)."""

    bdf: str
    minor: int
    instances: tuple[GpuInstance, ...] = ()


@dataclass(frozen=True, slots=True)
class Imex:
    """The driver's IMEX parameters (``NVreg_ImexChannelCount``, ``NVreg_CreateImexChannel0``)
    and the channels whose device nodes exist: channel 0 when the driver creates it at load,
    and those ``channels`` names (as ``nvidia-modprobe -i N`` makes them)."""

    channel_count: int = 2048
    create_channel0: bool = False
    channels: tuple[int, ...] = ()

    def existing(self) -> tuple[int, ...]:
        """The channel numbers whose ``/dev/nvidia-caps-imex-channels/channel<N>`` exists."""
        made = set(self.channels) | ({0} if self.create_channel0 and self.channel_count else set())
        return tuple(sorted(made))
