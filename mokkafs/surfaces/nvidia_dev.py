"""The NVIDIA driver's device nodes below ``dev/``, as nvidia-modprobe makes them on a node
(NVIDIA/nvidia-modprobe ``modprobe-utils/nvidia-modprobe-utils.{c,h}``; the minors are the
driver's, NVIDIA/open-gpu-kernel-modules ``kernel-open/nvidia/nv.c``, ``linux_nvswitch.c``):

- on the ``nvidia-frontend`` major (195): ``nvidia<minor>`` for each GPU (its ``Device
  Minor``), ``nvidiactl`` (NV_CONTROL_DEVICE_MINOR 255), ``nvidia-modeset``
  (NV_MODESET_MINOR_DEVICE_NUM 254);
- on the ``nvidia-uvm`` major: ``nvidia-uvm`` (minor 0) and ``nvidia-uvm-tools`` (1);
- on the ``nvidia-caps`` major: ``nvidia-caps/nvidia-cap1`` (MIG config, 0400) and
  ``nvidia-cap2`` (MIG monitor, 0444), the minors and modes of
  ``proc/driver/nvidia/capabilities/mig/{config,monitor}``;
- where NVSwitches are on the bus, on the ``nvidia-nvswitch`` major: ``nvidia-nvswitch<N>``
  (minors in probe order, which is bus order; mode 0666, as the driver's
  ``proc/driver/nvidia-nvswitch/permissions`` says in ``procfs_nvswitch.c``, the code that
  also writes ``devices/``; older ``linux_nvswitch.c`` said 0600) and ``nvidia-nvswitchctl``
  (NVSWITCH_CTL_MINOR 255).

Every major is the State's (``State.major``), the one ``proc/devices`` lists. The nodes are
for consumers that stat them (the device plugin, the DRA driver, validators): no driver
answers behind them (docs/surfaces.md says what an open gets).
"""

from __future__ import annotations

from collections.abc import Iterator

from mokkafs.state import State
from mokkafs.surfaces.proc_driver_nvidia import (
    MIG_CONFIG_MINOR,
    MIG_MONITOR_MINOR,
    MODE_ALL_READ,
    MODE_ROOT,
)
from mokkafs.tree.assemble import stateless
from mokkafs.tree.nodes import CharDevice, Dir, Node
from mokkafs.tree.roots import kernel

CTL_MINOR = 255  # NV_CONTROL_DEVICE_MINOR
MODESET_MINOR = 254  # NV_MODESET_MINOR_DEVICE_NUM
UVM_MINOR, UVM_TOOLS_MINOR = 0, 1
NVSWITCH_CTL_MINOR = 255
MODE_ALL = 0o666  # the driver's DeviceFileMode default (params: 438)
MODE_NVSWITCH = 0o666  # /proc/driver/nvidia-nvswitch/permissions: DeviceFileMode 438
CAPS_DIR = "dev/nvidia-caps"
# The names below dev/ that carry no number; the numbered ones are ``nvidia<N>`` and
# ``nvidia-nvswitch<N>``
FIXED_NAMES = ("nvidiactl", "nvidia-modeset", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps",
               "nvidia-nvswitchctl")
NUMBERED_NAMES = ("nvidia", "nvidia-nvswitch")

DevNode = tuple[str, int, int, int]  # /dev path, major, minor, mode


def nvswitches(state: State) -> list[str]:
    """The bus ids of the NVSwitches the driver probed, in bus order: the index of each is
    the ``N`` of its ``/dev/nvidia-nvswitch<N>`` (and of its proc entry's place)."""
    return sorted(fn.bdf for fn in state.functions if fn.kind == "nvswitch")


def device_numbers(state: State) -> list[DevNode]:
    """(/dev path, major, minor, mode) of every node the simulated NVIDIA driver has: none
    unless the profile loads it (faults that remove every GPU leave the driver loaded)."""
    if "nvidia" not in state.pci_drivers:
        return []
    front, uvm, caps = (state.major(n) for n in ("nvidia-frontend", "nvidia-uvm",
                                                   "nvidia-caps"))
    minors = sorted(fn.gpu.minor for fn in state.driven_gpus()  # an unbound GPU has no node
                    if fn.gpu is not None)
    out = [(f"/dev/nvidia{minor}", front, minor, MODE_ALL) for minor in minors]
    out += [("/dev/nvidiactl", front, CTL_MINOR, MODE_ALL),
            ("/dev/nvidia-modeset", front, MODESET_MINOR, MODE_ALL),
            ("/dev/nvidia-uvm", uvm, UVM_MINOR, MODE_ALL),
            ("/dev/nvidia-uvm-tools", uvm, UVM_TOOLS_MINOR, MODE_ALL),
            (f"/{CAPS_DIR}/nvidia-cap{MIG_CONFIG_MINOR}", caps, MIG_CONFIG_MINOR, MODE_ROOT),
            (f"/{CAPS_DIR}/nvidia-cap{MIG_MONITOR_MINOR}", caps, MIG_MONITOR_MINOR,
             MODE_ALL_READ)]
    switches = nvswitches(state)
    if switches:
        sw = state.major("nvidia-nvswitch")
        out += [(f"/dev/nvidia-nvswitch{i}", sw, i, MODE_NVSWITCH)
                for i in range(len(switches))]
        out.append(("/dev/nvidia-nvswitchctl", sw, NVSWITCH_CTL_MINOR, MODE_NVSWITCH))
    return out


def char_nodes(directory: str, numbers: list[DevNode]) -> Iterator[Node]:
    """The view's nodes of ``numbers``, with ``directory`` (below dev/) when there are any."""
    if numbers:
        yield Dir(directory)
    for path, major, minor, mode in numbers:
        yield CharDevice(path.lstrip("/"), major, minor, mode)


def nodes(state: State) -> Iterator[Node]:
    return char_nodes(CAPS_DIR, device_numbers(state))


SURFACE = stateless("nvidia_dev", nodes, ("functions", "char_majors", "pci_drivers"),
                    (*(kernel(f"dev/{name}") for name in FIXED_NAMES),
                     *(kernel(f"dev/{name}", "numbered") for name in NUMBERED_NAMES)))
