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
