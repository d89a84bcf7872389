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
- ``infiniband``: the /dev/infiniband nodes only.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mokkafs.delivery.records import RECORDS
from mokkafs.delivery.repair import PROPAGATED
from mokkafs.delivery.specdir import SpecDir, SpecRef, digest
from mokkafs.errors import CdiError, MountError, UsageError
from mokkafs.host.mountinfo import FSTYPE, mounted_at

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

DeviceNode = tuple[str, int, int]  # container path, major, minor
# What the view serves below /proc, each bound over the container's own: the majors, the
# NVIDIA driver's files (the view's proc/driver replaces the container's whole /proc/driver),
# the module list. A path the container's kernel lacks (/proc/modules without module
# support) is skipped by the hook.
PROC = ("devices", "driver", "modules")
# The machine's files (docs/machine.md), bound as PROC is while the view serves them: a
# profile with machine.show: false (or a daemon run with --no-machine) serves neither, and
# the container keeps its own.
PROC_MACHINE = ("cpuinfo", "meminfo")


def hook_path() -> str:
    """The static ``mokkafs-hook`` built into the package (native/mokkafs_hook.c)."""
    found = Path(__file__).resolve().parents[1] / "bin" / "mokkafs-hook"
    if not os.access(found, os.X_OK):
        raise CdiError("mokkafs-hook is not built; reinstall mokkafs "
                           "(pip install . compiles native/)")
    return str(found)


def spec_file_name(kind: str) -> str:
    """``mokkafs.io/node`` -> ``mokkafs.io_node.json``: one file per kind."""
    return kind.replace("/", "_") + ".json"


def build_spec(mountpoint: Path, nodes: list[DeviceNode], version: str = DEFAULT_VERSION,
               hook: str | None = None, kind: str = KIND, machine: bool = True,
               ) -> dict[str, Any]:
    """The spec of the view at ``mountpoint``: ``nodes`` its character devices, ``machine``
    whether it serves the machine's /proc files (``State.machine.shown``)."""
    if version not in VERSIONS:
        raise UsageError(f"--cdi-version {version}: expected one of {', '.join(VERSIONS)}")
    mnt = os.path.abspath(mountpoint)
    # The mountpoint's parent, held with slave propagation: a restarted daemon's new mount
    # appears there inside running containers (mokkafs.delivery.repair re-binds the kernel paths).
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
    def proc_hook(*names: str) -> dict[str, Any]:
        pairs = [arg for name in names for arg in (f"{mnt}/proc/{name}", f"/proc/{name}")]
        return {"hookName": "createContainer", "path": hook or hook_path(),
                "args": ["mokkafs-hook", "bind", *pairs]}

    # The container's mount table, recorded once it runs and forgotten when it ends: what a
    # restarted daemon re-makes over the view (mokkafs.delivery.repair, RECORDS).
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
    device_nodes = [{"path": path, "type": "c", "major": major, "minor": minor,
                     "permissions": "m"} for path, major, minor in nodes]
    nvidia = [n for n in device_nodes if str(n["path"]).startswith("/dev/nvidia")]
    infiniband = [n for n in device_nodes if str(n["path"]).startswith("/dev/infiniband/")]

    def device(name: str, **edits: Any) -> dict[str, Any]:
        return {"name": name, "containerEdits": {k: v for k, v in edits.items() if v}}

    proc = PROC + PROC_MACHINE if machine else PROC
    devices = [
        device("all", mounts=[parent, sys_mount], hooks=[proc_hook(*proc), *records],
               deviceNodes=device_nodes),
        device("sys", mounts=[parent, sys_mount], hooks=records),
        device("proc", hooks=[proc_hook(*proc)]),
        device("proc-mount", mounts=proc_mounts(*proc)),
        device("proc-devices", hooks=[proc_hook("devices")]),
        device("proc-devices-mount", mounts=proc_mounts("devices")),
    ]
    if machine:
        devices.append(device("proc-machine", hooks=[proc_hook(*PROC_MACHINE)]))
        devices.append(device("proc-machine-mount", mounts=proc_mounts(*PROC_MACHINE)))
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


def served_device_nodes(mountpoint: Path) -> list[DeviceNode]:
    """The character devices a serving mount describes: its ``dev/``, walked (the RDMA and
    NVIDIA nodes; ``mokkafs.surfaces.dev`` lists the same for the daemon's own spec)."""
    nodes: list[DeviceNode] = []
    base = mountpoint / "dev"
    for top, dirs, files in os.walk(base):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(top, name)
            st = os.lstat(path)
            if stat.S_ISCHR(st.st_mode):
                nodes.append(("/" + os.path.relpath(path, mountpoint), os.major(st.st_rdev),
                              os.minor(st.st_rdev)))
    return nodes


def serves_machine(mountpoint: Path) -> bool:
    """Whether a serving mount serves the machine's /proc files (``PROC_MACHINE``)."""
    return all((mountpoint / "proc" / name).is_file() for name in PROC_MACHINE)


def require_serving(mountpoint: Path) -> None:
    """Raise unless a mokkafs mount serves at ``mountpoint``."""
    stack = mounted_at(os.path.abspath(mountpoint))
    if not stack or stack[-1].fstype != FSTYPE:
        raise MountError(f"{mountpoint} is not a mokkafs mount; start `mokkafs mount` first")
    try:
        (mountpoint / "proc/devices").read_bytes()
    except OSError as exc:
        raise MountError(f"{mountpoint} does not serve ({exc.strerror})") from None


def write_atomically(spec: dict[str, Any], path: Path) -> None:
    """Write the spec next to its final name and rename it into place: a runtime scanning
    the CDI directory sees the old spec or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".mokkafs-", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f, indent=2)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def check_parent(mountpoint: Path) -> Path:
    """The mountpoint's parent, which every container given the spec holds (for restart
    survival): it must hold nothing but the mountpoint, belong to root and be writable by root
    alone, or a container would see (and through sockets reach) whatever else is there. It is
    created, mode 0700, when missing. Raises ``CdiError`` naming the fix."""
    mnt = Path(os.path.abspath(mountpoint))
    parent = mnt.parent
    if parent == mnt or parent == Path("/"):
        raise CdiError(f"{mnt}: with --cdi-dir the mountpoint needs a parent directory of its "
                       "own, e.g. /run/mokkafs/node")
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = parent.stat()
    others = sorted(set(os.listdir(parent)) - {mnt.name})
    if others or st.st_uid != 0 or st.st_mode & 0o022:
        what = (f"it also holds {', '.join(others[:5])}" if others else
                f"it is owned by uid {st.st_uid}" if st.st_uid != 0 else
                f"it is writable by others (mode {st.st_mode & 0o777:o})")
        raise CdiError(f"{parent} cannot be given to containers: {what}. Every container "
                       f"given the spec sees this directory; mount at a path whose parent "
                       f"holds nothing else, e.g. {parent}/mokkafs/{mnt.name} (created 0700)")
    return parent


class Publisher:
    """Keeps ``<cdi_dir>/<kind>.json`` in step with a serving mount, touching only what it
    wrote: ``record`` is told (before and after each write) what the spec may hold, so that
    a cleanup after a crash can tell the daemon's spec from anybody else's."""

    def __init__(self, cdi_dir: Path, mountpoint: Path, version: str = DEFAULT_VERSION,
                 kind: str = KIND, hook: str | None = None,
                 record: Callable[[SpecRef | None], None] = lambda ref: None) -> None:
        self.path = Path(os.path.abspath(cdi_dir)) / spec_file_name(kind)
        self.mountpoint = mountpoint
        self.version = version
        self.kind = kind
        self.hook = hook or hook_path()
        self.record = record
        self.dir: SpecDir | None = None
        self.sha256: str | None = None  # what the spec holds, as this daemon wrote it
        self.published = False
        self.closed = False  # retracted for good: the mount is going

    def prepare(self, left: SpecRef | None = None) -> None:
        """Before mounting: hold the CDI directory, remove the spec a killed predecessor left
        (``left``, from its record), and refuse a file at the spec's name that is not this
        daemon's. Raises ``CdiError``."""
        self.dir = SpecDir.open(self.path)
        if left is not None and Path(left.path) == self.path and left.dir == self.dir.identity \
                and self.dir.remove_if(left.sha256):
            log.warning("removed %s, a CDI spec left by a daemon that did not stop cleanly",
                        self.path)
        if self.dir.current() is not None:
            self.dir.close()
            raise CdiError(f"{self.path} exists and is not a spec this daemon's record says "
                           "it wrote; mokkafs replaces only its own: remove it if it is a "
                           "stale mokkafs spec, or choose another --cdi-kind")

    def publish(self, nodes: list[DeviceNode], machine: bool = True) -> None:
        """Write the spec (unless retracted for good) of a view with the character devices
        ``nodes``, serving the machine if ``machine``. Raises ``CdiError``."""
        if self.closed or self.dir is None:
            return
        spec = build_spec(self.mountpoint, nodes, self.version, self.hook, self.kind, machine)
        validate(spec)
        data = (json.dumps(spec, indent=2) + "\n").encode()
        held = self.dir
        what = f"cannot write the CDI spec {self.path}"
        held.check_path(what)
        if held.current() not in (None, self.sha256):
            raise CdiError(f"{what}: a file mokkafs did not write took its place; it is left "
                           "as it is")
        new = digest(data)
        self.record(SpecRef(str(self.path), held.identity,
                            tuple(h for h in (self.sha256, new) if h)))
        try:
            held.write(data)
        except OSError as exc:
            raise CdiError(f"{what}: {exc.strerror}") from None
        self.sha256 = new
        self.record(SpecRef(str(self.path), held.identity, (new,)))
        self.published = True
        log.info("published CDI spec %s (kind %s)", self.path, self.kind)

    def retract(self) -> None:
        """Remove the spec this publisher wrote, for good, from the directory it wrote it to
        (never raises: it runs at shutdown)."""
        self.closed = True
        held, self.dir = self.dir, None
        if held is None:
            return
        try:
            if self.published and self.sha256 and held.remove_if((self.sha256,)):
                log.info("retracted CDI spec %s", self.path)
            self.record(None)
        except OSError as exc:
            log.error("could not retract CDI spec %s: %s", self.path, exc)
        finally:
            held.close()
            self.published = False
