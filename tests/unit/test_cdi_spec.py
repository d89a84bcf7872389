"""The CDI spec's /proc binds: the machine's cpuinfo and meminfo go with the driver's files
while the view serves the machine, and nowhere when it does not (docs/containers.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mokkafs.delivery.cdi import UPSTREAM_SCHEMA, build_spec, validate

MNT = Path("/run/mokkafs/node")
NODES = [("/dev/nvidia0", 195, 0, 0o666)]


def edits(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {d["name"]: d["containerEdits"] for d in spec["devices"]}


def bound(edit: dict[str, Any]) -> list[str]:
    """The container paths a device's createContainer hook binds, in order."""
    hooks = [h for h in edit.get("hooks", []) if h["hookName"] == "createContainer"]
    return [arg for h in hooks for arg in h["args"][3::2]]


def test_the_machines_proc_files_are_bound_with_the_drivers() -> None:
    spec = build_spec(MNT, NODES, hook="/bin/true")
    by_name = edits(spec)
    every = ["/proc/devices", "/proc/driver", "/proc/modules", "/proc/cpuinfo", "/proc/meminfo"]
    assert bound(by_name["all"]) == bound(by_name["proc"]) == every
    hook = next(h for h in by_name["all"]["hooks"] if h["hookName"] == "createContainer")
    assert hook["args"][-4:] == [f"{MNT}/proc/cpuinfo", "/proc/cpuinfo",
                                 f"{MNT}/proc/meminfo", "/proc/meminfo"]
    assert bound(by_name["proc-machine"]) == ["/proc/cpuinfo", "/proc/meminfo"]
    assert [m["containerPath"] for m in by_name["proc-mount"]["mounts"]] == every
    assert [(m["hostPath"], m["containerPath"]) for m in by_name["proc-machine-mount"][
        "mounts"]] == [(f"{MNT}/proc/cpuinfo", "/proc/cpuinfo"),
                       (f"{MNT}/proc/meminfo", "/proc/meminfo")]
    assert bound(by_name["proc-devices"]) == ["/proc/devices"]
    validate(spec)


def test_a_view_without_the_machine_binds_neither() -> None:
    spec = build_spec(MNT, NODES, hook="/bin/true", machine=False)
    assert "cpuinfo" not in json.dumps(spec) and "meminfo" not in json.dumps(spec)
    by_name = edits(spec)
    assert "proc-machine" not in by_name and "proc-machine-mount" not in by_name
    assert bound(by_name["all"]) == ["/proc/devices", "/proc/driver", "/proc/modules"]
    validate(spec)


@pytest.mark.parametrize("machine", [True, False])
def test_both_specs_match_the_cdi_projects_schema(machine: bool) -> None:
    validate(build_spec(MNT, NODES, hook="/bin/true", machine=machine), UPSTREAM_SCHEMA)


LIB = "/opt/mokkafs/lib/libnvidia-ml.so.1"
MULTIARCH = "/usr/lib/x86_64-linux-gnu"


def nvml_spec(driver: str | None) -> dict[str, Any]:
    spec = build_spec(MNT, NODES, hook="/bin/true", nvml_driver=driver, nvml_library=LIB)
    validate(spec)
    validate(spec, UPSTREAM_SCHEMA)
    return spec


def test_nvml_gives_the_library_where_the_toolkit_puts_the_drivers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    by_name = edits(nvml_spec("550.163.01"))
    nvml = by_name["nvml"]
    assert nvml["mounts"] == [
        {"hostPath": LIB, "containerPath": f"{MULTIARCH}/libnvidia-ml.so.550.163.01",
         "options": ["bind", "ro", "nosuid", "nodev"]},
        {"hostPath": f"{MNT}/run/mokkafs-nvml", "containerPath": "/run/mokkafs-nvml",
         "options": ["bind", "ro", "nosuid", "nodev", "noexec"]}]
    assert [h["args"] for h in nvml["hooks"]] == [
        ["mokkafs-hook", "link", "libnvidia-ml.so.550.163.01", f"{MULTIARCH}/libnvidia-ml.so.1",
         "libnvidia-ml.so.1", f"{MULTIARCH}/libnvidia-ml.so"],
        ["mokkafs-hook", "ldcache", MULTIARCH]]
    assert {h["hookName"] for h in nvml["hooks"]} == {"createContainer"}
    # all: the same mounts after its own, the links and the cache after the /proc binds
    assert by_name["all"]["mounts"][-2:] == nvml["mounts"]
    assert [h["args"][1] for h in by_name["all"]["hooks"]] == [
        "bind", "link", "ldcache", "record", "forget"]


def test_nvml_keeps_the_soname_when_the_version_is_not_a_plain_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    nvml = edits(nvml_spec("550.163.01/../x"))["nvml"]
    lib_dir = "/usr/lib/aarch64-linux-gnu"
    assert nvml["mounts"][0]["containerPath"] == f"{lib_dir}/libnvidia-ml.so.1"
    assert nvml["hooks"][0]["args"][2:] == ["libnvidia-ml.so.1", f"{lib_dir}/libnvidia-ml.so"]


def test_a_view_without_nvmls_place_has_no_nvml_device() -> None:
    spec = nvml_spec(None)
    assert "nvml" not in edits(spec) and "libnvidia-ml" not in json.dumps(spec)
