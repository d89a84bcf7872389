"""IMEX in a profile: ``system.imex`` (mokkafs), the NVIDIA driver's IMEX module parameters
and the channels whose device nodes exist (docs/mig-imex.md)."""

from __future__ import annotations

from pydantic import Field

from mokkafs.model.mig import Imex
from mokkafs.profile.problems import Problems
from mokkafs.profile.values import ClosedSection

# NVreg_ImexChannelCount's default and the largest count the driver accepts (nv-reg.h: the
# channel minors share the nvidia-caps-imex-channels major's 2^20 minors)
DEFAULT_CHANNELS = 2048
MAX_CHANNELS = 1 << 20


class ImexSection(ClosedSection):
    """mokkafs: ``params``' ImexChannelCount and CreateImexChannel0, and the channels made
    besides channel 0 (as ``nvidia-modprobe -i N`` makes them)."""

    channel_count: int = Field(default=DEFAULT_CHANNELS, ge=0, le=MAX_CHANNELS)
    create_channel0: bool = False
    channels: list[int] = Field(default=[], max_length=64)


def compile_imex(section: ImexSection, problems: Problems) -> Imex:
    for pos, channel in enumerate(section.channels):
        if not 0 <= channel < section.channel_count:
            problems.add(("system", "imex", "channels", pos),
                         f"channel {channel} is outside 0-{section.channel_count - 1} "
                         "(channel_count); name a channel below the count or raise it")
    if section.create_channel0 and not section.channel_count:
        problems.add(("system", "imex", "create_channel0"),
                     "channel 0 cannot be created with channel_count 0; raise the count")
    return Imex(section.channel_count, section.create_channel0,
                tuple(sorted(set(section.channels))))
