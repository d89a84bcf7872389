"""Readers of the NVIDIA driver's device nodes as its tools find them: the /proc/devices
major of each node's driver."""

from __future__ import annotations

import re

# Which driver each node belongs to, by its /dev name (nvidia-modprobe-utils.h, the RDMA
# stack's device names): the name it must find its major under in /proc/devices.
DRIVERS = (
    (r"nvidia[0-9]+|nvidiactl|nvidia-modeset", "nvidia-frontend"),
    (r"nvidia-uvm(-tools)?", "nvidia-uvm"),
    (r"nvidia-caps/nvidia-cap[0-9]+", "nvidia-caps"),
    (r"nvidia-nvswitch([0-9]+|ctl)", "nvidia-nvswitch"),
    (r"nvidia-caps-imex-channels/channel[0-9]+", "nvidia-caps-imex-channels"),
    (r"infiniband/uverbs[0-9]+", "infiniband_verbs"),
    (r"infiniband/(umad|issm)[0-9]+", "infiniband_mad"),
    (r"infiniband/rdma_cm", "misc"),
)


def proc_majors(text: str) -> dict[str, int]:
    """nvidia-modprobe's lookup (nvidia_get_chardev_major): the Character devices block,
    a line ending in the name."""
    chars = text.partition("Character devices:\n")[2].partition("\n\n")[0]
    return {name: int(major) for major, name in
            (line.split(None, 1) for line in chars.splitlines())}


def driver_of(dev_path: str) -> str:
    for pattern, driver in DRIVERS:
        if re.fullmatch(pattern, dev_path.removeprefix("dev/")):
            return driver
    raise AssertionError(f"{dev_path}: no driver known for this node")
