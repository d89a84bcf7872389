"""A GPU rebound to vfio-pci from inside a CDI container (docs/writes.md, "vfio-pci"): a
privileged container's root does what the DRA driver's passthrough does (override, unbind,
drivers_probe); the next container given the view finds the GPU on vfio-pci, the vfio_pci
module, and its IOMMU group's device node, as the DRA driver checks them
(NVIDIA/k8s-dra-driver-gpu cmd/gpu-kubelet-plugin/vfio-device.go; tests/helpers/dra_vfio.py
reads the same on a mount)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.containers import Node, start_node
from tests.helpers.mounts import SHIPPED_PROFILES, wait_for
from tests.helpers.profiles import H100_GPU0

GPU = H100_GPU0
FN = f"/sys/bus/pci/devices/{GPU}"
SYSTEM = '  driver_version: "550.163.01"\n'


@pytest.fixture
def vfio_node(tmp_path: Path, hosttools_image: str) -> Iterator[Node]:
    """h100 on a passthrough node (vfio-pci loaded), mounted ``--writable``."""
    profile = tmp_path / "config" / "node.yaml"
    profile.parent.mkdir()
    text = (SHIPPED_PROFILES / "h100.yaml").read_text()
    profile.write_text(text.replace(SYSTEM, SYSTEM + "  vfio_pci: true\n"))
    yield from start_node(tmp_path, profile, "--writable")


def test_a_privileged_container_passes_a_gpu_through(vfio_node: Node) -> None:
    out = vfio_node.run(f"echo vfio-pci > {FN}/driver_override && "
                        f"echo {GPU} > /sys/bus/pci/drivers/nvidia/unbind && "
                        f"echo {GPU} > /sys/bus/pci/drivers_probe; echo rc=$?; "
                        f"basename $(readlink {FN}/driver); basename $(readlink {FN}/iommu_group)",
                        "--privileged")
    rc, driver, group = out.split()
    assert (rc, driver) == ("rc=0", "vfio-pci"), out

    def spec_nodes() -> set[str]:
        spec = json.loads(vfio_node.spec.read_text())
        return {n["path"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"]}
    wait_for(lambda: f"/dev/vfio/{group}" in spec_nodes(), 20, "the spec with the group")
    seen = vfio_node.run(f"test -d /sys/module/vfio_pci && echo module; "
                         f"ls /sys/kernel/iommu_groups | grep -qx {group} && echo groups; "
                         f"basename $(readlink {FN}/driver); "
                         f"test -c /dev/vfio/{group} && echo group-node; "
                         f"test -c /dev/vfio/vfio && echo container-node; "
                         f"ls {FN}/vfio-dev; test -e /proc/driver/nvidia/gpus/{GPU} || echo gone")
    assert seen.split() == ["module", "groups", "vfio-pci", "group-node", "container-node",
                            f"vfio{group}", "gone"], seen
