"""The character-device majors a profile gives the drivers (/proc/devices), each checked to
be a driver's own."""

from __future__ import annotations

from mokkafs.profile.problems import Problems
from mokkafs.profile.schema import Profile
from mokkafs.state import CharMajor

MISC = 10  # the misc devices' fixed major (include/uapi/linux/major.h): /dev/vfio/vfio


def majors(profile: Profile, ib: bool, nvswitch: bool, problems: Problems,
           vfio: bool = False) -> tuple[CharMajor, ...]:
    pd = profile.proc_devices
    named = [(pd.nvidia_frontend, "nvidia-frontend", "nvidia_frontend"),
             (pd.nvidia_uvm, "nvidia-uvm", "nvidia_uvm"),
             (pd.nvidia_caps, "nvidia-caps", "nvidia_caps"),
             (pd.nvidia_caps_imex_channels, "nvidia-caps-imex-channels",
              "nvidia_caps_imex_channels")]
    if nvswitch:
        named.append((pd.nvidia_nvswitch, "nvidia-nvswitch", "nvidia_nvswitch"))
    if vfio:
        named += [(pd.vfio, "vfio", "vfio"), (pd.vfio_dev, "vfio-dev", "vfio_dev"),
                  (MISC, "misc", "misc")]
    if ib:
        named += [(pd.infiniband, "infiniband_mad", "infiniband"),
                  (pd.infiniband, "infiniband_verbs", "infiniband")]
    owner: dict[int, str] = {}
    for major, name, key in named:
        other = owner.get(major)
        if other and not (other.startswith("infiniband") and name.startswith("infiniband")):
            problems.add(("proc_devices", key), f"major {major} is already used by {other}; "
                         "each driver needs its own major")
        owner.setdefault(major, name)
    problems.check()
    return tuple(sorted((CharMajor(m, n) for m, n, _ in named), key=lambda c: (c.major, c.name)))
