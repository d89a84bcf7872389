"""CDI specs that give containers the simulated node at the kernel paths.

Layout (docs/containers.md says why): the view's ``sys`` becomes the container's whole
``/sys`` (simulated nodes merged over the host's live sysfs, the network-namespace-scoped
parts served from the container's own namespace); ``/proc/devices``, ``/proc/driver``,
``/proc/modules`` and, while the view serves the machine, ``/proc/cpuinfo`` and
``/proc/meminfo`` are bound over by a createContainer hook, because runc refuses mounts
inside /proc; the RDMA and NVIDIA character devices consumers stat or hand on are device
nodes.

Devices of kind ``mokkafs.io/node``:
- ``all``: everything below;
- ``sys``: the /sys mount (with ``all``, the poststart and poststop hooks that record the
  container's mounts for a restarted daemon: ``mokkafs.delivery.records``);
- ``proc``: the hook only; ``proc-mount``: direct mounts instead (crun allows them, runc
  does not); ``proc-devices`` and ``proc-devices-mount``: the same for /proc/devices alone;
  ``proc-machine`` and ``proc-machine-mount``: for /proc/cpuinfo and /proc/meminfo alone,
  only while the view serves the machine;
- ``nvidia``: the NVIDIA driver's nodes only (/dev/nvidia*, /dev/nvidia-caps/*);
- ``infiniband``: the /dev/infiniband nodes only;
- ``kmsg``: the view's kernel log at /dev/kmsg only (``all`` binds it too; docs/kmsg.md);
- ``nvml``: mokkafs's NVML library where NVIDIA's container toolkit puts the driver's, with its
  links and the container's linker cache made by createContainer hooks, and NVML's own place at
  /run/mokkafs-nvml (``all`` gives it too); only while the view serves that place
  (docs/nvml.md).

A daemon publishes its spec through ``mokkafs.delivery.publisher``; ``mokkafs.delivery.mounts``
checks a serving mount before a spec hands it to containers.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import re
from pathlib import Path
from typing import Any

from mokkafs.delivery.nvml import LIBRARY_DIR
from mokkafs.delivery.nvml import SONAME as NVML_SONAME
from mokkafs.delivery.reattach import PROPAGATED
from mokkafs.delivery.records import RECORDS
from mokkafs.errors import CdiError, UsageError
from mokkafs.surfaces import ROOTS, kmsg, proc_cpu_mem, proc_devices
from mokkafs.surfaces.nvml import ROOT as NVML_PLACE
from mokkafs.tree.roots import Root

log = logging.getLogger(__name__)

KIND = "mokkafs.io/node"
VERSIONS = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0")
# What is written unless asked otherwise: the newest that podman 4.3 (Debian 12's CDI library
# 0.5.x) reads, and every runtime since. The spec uses nothing newer.
DEFAULT_VERSION = "0.5.0"
SCHEMA = Path(__file__).resolve().parent / "cdi_schema.json"
# The CDI project's own schema, as Debian ships it (golang-github-container-orchestrated-
# devices-container-device-interface-dev); the tests check the specs against it too.
UPSTREAM_SCHEMA = Path("/usr/share/gocode/src/github.com/container-orchestrated-devices/"
                       "container-device-interface/schema/schema.json")

DeviceNode = tuple[str, int, int, int]  # container path, major, minor, permission bits


def _bound(roots: tuple[Root, ...]) -> tuple[str, ...]:
    """The names below proc/ of the roots the hook binds (``mokkafs.tree.roots``)."""
    return tuple(sorted(r.path.removeprefix("proc/") for r in roots if r.hook))


# The machine's files (docs/machine.md), bound as PROC is while the view serves them: a
# profile with machine.show: false (or a daemon run with --no-machine) serves neither, and
# the container keeps its own.
PROC_MACHINE = _bound(proc_cpu_mem.SURFACE.roots)
# What else the view serves below /proc, each bound over the container's own: the majors, the
# NVIDIA driver's files (the view's proc/driver replaces the container's whole /proc/driver),
# the module list. A path the container's kernel lacks (/proc/modules without module
# support) is skipped by the hook.
PROC = tuple(name for name in _bound(ROOTS) if name not in PROC_MACHINE)
PROC_DEVICES = _bound(proc_devices.SURFACE.roots)  # the majors alone


def hook_path() -> str:
    """The static ``mokkafs-hook`` built into the package (native/mokkafs_hook.c)."""
    found = Path(__file__).resolve().parents[1] / "bin" / "mokkafs-hook"
    if not os.access(found, os.X_OK):
        raise CdiError("mokkafs-hook is not built; reinstall mokkafs "
                           "(pip install . compiles native/)")
    return str(found)


def package_nvml_library() -> str:
    """mokkafs's NVML library built into the package (native/nvml/; mokkafs.delivery.nvml)."""
    found = LIBRARY_DIR.resolve() / NVML_SONAME
    if not found.is_file():
        raise CdiError(f"mokkafs's NVML library ({found}) is not built; reinstall mokkafs "
                       "(pip install . compiles native/)")
    return str(found)


# A driver version as a file name may carry it (550.163.01): anything else is not at hand.
PLAIN_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*")
# Debian's multiarch triplet of a machine (uname -m) where it is not "<machine>-linux-gnu".
TRIPLETS = {"ppc64le": "powerpc64le-linux-gnu", "armv7l": "arm-linux-gnueabihf"}


def nvml_edits(mnt: str, hook: str, library: str, driver: str, machine: str,
               ) -> dict[str, Any]:
    """The ``nvml`` device's edits (docs/nvml.md): the library bound read-only where NVIDIA's
    container toolkit binds the driver's on a Debian or Ubuntu node (the host's multiarch
    directory, the same path in the container), named by the view's driver version as the
    driver's file is, or by its soname when the version is not a plain one; the links the
    toolkit's hooks make (the soname, and the unversioned name nvtop opens); the container's
    linker cache updated over that directory, as the toolkit's update-ldcache hook does; and
    NVML's own place, read-only at /run/mokkafs-nvml."""
    lib_dir = f"/usr/lib/{TRIPLETS.get(machine, f'{machine}-linux-gnu')}"
    name = f"libnvidia-ml.so.{driver}" if PLAIN_VERSION.fullmatch(driver) else NVML_SONAME
    links = [(name, NVML_SONAME)] if name != NVML_SONAME else []
    links.append((NVML_SONAME, "libnvidia-ml.so"))
    return {"mounts": [
        # not noexec: the library is mapped executable
        {"hostPath": library, "containerPath": f"{lib_dir}/{name}",
         "options": ["bind", "ro", "nosuid", "nodev"]},
        {"hostPath": f"{mnt}/{NVML_PLACE}", "containerPath": f"/{NVML_PLACE}",
         "options": ["bind", "ro", "nosuid", "nodev", "noexec"]}],
        "hooks": [
            {"hookName": "createContainer", "path": hook, "args": [
                "mokkafs-hook", "link",
                *(arg for target, link in links for arg in (target, f"{lib_dir}/{link}"))]},
            {"hookName": "createContainer", "path": hook,
             "args": ["mokkafs-hook", "ldcache", lib_dir]}]}


def spec_file_name(kind: str) -> str:
    """``mokkafs.io/node`` -> ``mokkafs.io_node.json``: one file per kind."""
    return kind.replace("/", "_") + ".json"


def build_spec(mountpoint: Path, nodes: list[DeviceNode], version: str = DEFAULT_VERSION,
               hook: str | None = None, kind: str = KIND, machine: bool = True,
               nvml_driver: str | None = None, nvml_library: str | None = None,
               ) -> dict[str, Any]:
    """The spec of the view at ``mountpoint``: ``nodes`` its character devices, ``machine``
    whether it serves the machine's /proc files (``State.machine.shown``), ``nvml_driver``
    the driver version while it serves NVML's own place (None: it does not), ``nvml_library``
    the NVML library's path on the host (default: the package's)."""
    if version not in VERSIONS:
        raise UsageError(f"--cdi-version {version}: expected one of {', '.join(VERSIONS)}")
    mnt = os.path.abspath(mountpoint)
    # The mountpoint's parent, held with slave propagation: a restarted daemon's new mount
    # appears there inside running containers (mokkafs.delivery.reattach re-binds the kernel paths).
    # Every other bind is read-only all the way down ("rro": runc >= 1.1, crun), so no mount below
    # one can be written through it. The parent is the daemon's read-only tmpfs, holding
    # nothing but the mount (mokkafs.delivery.share).
    parent = {"hostPath": os.path.dirname(mnt), "containerPath": PROPAGATED,
              "options": ["rbind", "rro", "rslave", "nosuid", "nodev", "noexec"]}
    # /sys alone is bound writable, and not recursively: no mount below the view comes with
    # it. The daemon takes a write only where a store is simulated and only from a writer
    # with CAP_SYS_ADMIN (a privileged container's root), answering others as a read-only
    # /sys would (docs/writes.md).
    sys_mount = {"hostPath": f"{mnt}/sys", "containerPath": "/sys",
                 "options": ["bind", "nosuid", "nodev", "noexec"]}
    # The view's kernel log (docs/kmsg.md): dmesg and log followers read it as /dev/kmsg.
    kernel_log = {"hostPath": f"{mnt}/{kmsg.PATH}", "containerPath": f"/{kmsg.PATH}",
            "options": ["bind", "ro", "nosuid", "nodev", "noexec"]}

    def proc_hook(*names: str) -> dict[str, Any]:
        pairs = [arg for name in names for arg in (f"{mnt}/proc/{name}", f"/proc/{name}")]
        return {"hookName": "createContainer", "path": hook or hook_path(),
                "args": ["mokkafs-hook", "bind", *pairs]}

    # The container's mount table, recorded once it runs and forgotten when it ends: what a
    # restarted daemon re-makes over the view (mokkafs.delivery.reattach, RECORDS).
    records = [{"hookName": "poststart", "path": hook or hook_path(),
                "args": ["mokkafs-hook", "record", str(RECORDS)]},
               {"hookName": "poststop", "path": hook or hook_path(),
                "args": ["mokkafs-hook", "forget", str(RECORDS)]}]

    def proc_mounts(*names: str) -> list[dict[str, Any]]:
        return [{"hostPath": f"{mnt}/proc/{name}", "containerPath": f"/proc/{name}",
                 "options": ["bind", "ro", "nosuid", "nodev"]} for name in names]

    # Nodes to stat, not to open ("m": the device cgroup lets the container make them, never
    # read or write them, so an open fails with EPERM): on a host with RDMA or NVIDIA
    # hardware, these numbers are its real devices.
    # ``fileMode``: the node's permission bits, as the view shows them (0400 for a MIG
    # capability, 0666 for nvidiactl); the runtime makes the node with them.
    device_nodes = [{"path": path, "type": "c", "major": major, "minor": minor,
                     "fileMode": mode & 0o7777, "permissions": "m"}
                    for path, major, minor, mode in nodes]
    nvidia = [n for n in device_nodes if str(n["path"]).startswith("/dev/nvidia")]
    infiniband = [n for n in device_nodes if str(n["path"]).startswith("/dev/infiniband/")]

    def device(name: str, **edits: Any) -> dict[str, Any]:
        return {"name": name, "containerEdits": {k: v for k, v in edits.items() if v}}

    proc = PROC + PROC_MACHINE if machine else PROC
    nvml_device: dict[str, Any] = {"mounts": [], "hooks": []}
    if nvml_driver is not None:
        nvml_device = nvml_edits(mnt, hook or hook_path(),
                                 nvml_library or package_nvml_library(), nvml_driver,
                                 platform.machine())
    devices = [
        device("all", mounts=[parent, sys_mount, kernel_log, *nvml_device["mounts"]],
               hooks=[proc_hook(*proc), *nvml_device["hooks"], *records],
               deviceNodes=device_nodes),
        device("sys", mounts=[parent, sys_mount], hooks=records),
        device("proc", hooks=[proc_hook(*proc)]),
        device("proc-mount", mounts=proc_mounts(*proc)),
        device("proc-devices", hooks=[proc_hook(*PROC_DEVICES)]),
        device("proc-devices-mount", mounts=proc_mounts(*PROC_DEVICES)),
    ]
    if machine:
        devices.append(device("proc-machine", hooks=[proc_hook(*PROC_MACHINE)]))
        devices.append(device("proc-machine-mount", mounts=proc_mounts(*PROC_MACHINE)))
    devices.append(device("kmsg", mounts=[kernel_log]))
    if nvml_driver is not None:
        devices.append(device("nvml", **nvml_device))
    if nvidia:
        devices.append(device("nvidia", deviceNodes=nvidia))
    if infiniband:
        devices.append(device("infiniband", deviceNodes=infiniband))
    return {"cdiVersion": version, "kind": kind, "devices": devices}


def validate(spec: dict[str, Any], schema: Path = SCHEMA) -> None:
    """Check ``spec`` against a CDI JSON schema: by default the one mokkafs carries (the
    subset of the format it writes, with the CDI naming rules), or the CDI project's own
    (``UPSTREAM_SCHEMA``, which refers to a ``defs.json`` beside it)."""
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    if not schema.exists():
        raise CdiError(f"CDI schema {schema} is missing")
    main = json.loads(schema.read_text())
    registry: Registry[Any] = Registry()
    defs = schema.parent / "defs.json"
    if defs.exists():
        registry = registry.with_resource("defs.json", Resource.from_contents(
            json.loads(defs.read_text()), default_specification=DRAFT7))
    validator = jsonschema.Draft7Validator(main, registry=registry)
    errors = sorted(validator.iter_errors(spec), key=lambda e: list(e.path))
    if errors:
        raise CdiError("CDI spec does not match the schema: " + "; ".join(
            f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors))
